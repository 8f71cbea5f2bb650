"""``cr.linalg``: NumPy's ``np.linalg`` (with SciPy's ``solve_triangular``/``cho_solve`` and torch's
``matrix_exp``). The short names ``cr.inv``, ``cr.cholesky``, ``cr.norm``, ... are these same functions.

>>> import chainrule as cr
>>> cr.linalg.det(cr.eye(3) * 2.0).item()
8.0
>>> cr.linalg.norm is cr.norm
True
"""
from chainrule.core._backend import np
from chainrule.numpy.linalg_more import (
    cross,
    diagonal,
    matrix_power,
    matrix_transpose,
    multi_dot,
    outer,
    tensordot,
    tensorinv,
    tensorsolve,
    trace,
    vecdot,
)
from chainrule.numpy.spectral_functions import cond, lstsq, matrix_norm, matrix_rank, norm, pinv, vector_norm
from chainrule.ops.decompositions import cho_solve, eig, eigvals, matrix_exp, qr, solve_triangular
from chainrule.ops.linalg import cholesky, det, inv, matmul, slogdet, solve
from chainrule.ops.spectral import eigh, eigvalsh, svd, svdvals

LinAlgError = np.linalg.LinAlgError

__all__ = ["LinAlgError", "cho_solve", "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "inv", "lstsq", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "solve_triangular",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]
