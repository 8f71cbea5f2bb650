"""Central finite differences in float64 for the transform tests."""
import numpy as np


def num_jacobian(f, x, eps=1e-6):
    """d f(x) / d x by central differences: shape f(x).shape + x.shape (f maps ndarray -> ndarray)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        col = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
        jac.reshape(out.shape + (x.size,))[..., k] = col
    return jac


def num_grad(f, x, eps=1e-6):
    return num_jacobian(f, x, eps)
