"""Root conftest: one BLAS/OpenMP thread per process, set before NumPy loads, so test timings are
stable on a shared 2-core machine (idle BLAS threads spin and steal the other core)."""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
