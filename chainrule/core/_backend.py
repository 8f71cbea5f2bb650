"""The one module that imports the array library (NumPy now; a CuPy backend would swap it here)."""
import ml_dtypes
import numpy as np

ndarray = np.ndarray

__all__ = ["np", "ml_dtypes", "ndarray"]
