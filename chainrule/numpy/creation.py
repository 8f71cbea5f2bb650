"""Array creation: constant (non-differentiable) leaf tensors. Python floats use the default dtype."""
from __future__ import annotations

from typing import Any

from chainrule.core import _dtypes
from chainrule.core._backend import np
from chainrule.core.tensor import Tensor


def _make(data: Any, dtype: Any, requires_grad: bool) -> Tensor:
    if dtype is None and data.dtype == np.float64:
        data = data.astype(_dtypes.get_default_dtype())
    return Tensor(data, requires_grad=requires_grad)


def zeros(shape: Any, dtype: Any = None, *, requires_grad: bool = False) -> Tensor:
    """Tensor of zeros.

    >>> import chainrule as cr
    >>> cr.zeros((2,))
    tensor([0., 0.])
    """
    return _make(np.zeros(shape, dtype=dtype or np.float64), dtype, requires_grad)


def ones(shape: Any, dtype: Any = None, *, requires_grad: bool = False) -> Tensor:
    """Tensor of ones."""
    return _make(np.ones(shape, dtype=dtype or np.float64), dtype, requires_grad)


def empty(shape: Any, dtype: Any = None, *, requires_grad: bool = False) -> Tensor:
    """Uninitialised tensor (zeros here, for reproducibility)."""
    return zeros(shape, dtype, requires_grad=requires_grad)


def full(shape: Any, fill_value: float, dtype: Any = None, *, requires_grad: bool = False) -> Tensor:
    """Tensor filled with a constant ``fill_value`` (``cr.full`` is ``numpy.creation_more.full``: this,
    and differentiable in a fill value that is a tensor in a graph)."""
    data = np.full(shape, fill_value, dtype=dtype)
    if dtype is None and isinstance(fill_value, float):
        data = data.astype(_dtypes.get_default_dtype())
    return Tensor(data, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> Tensor:
    """Identity matrix."""
    return _make(np.eye(n, m, k, dtype=dtype or np.float64), dtype, False)


def arange(*args: Any, dtype: Any = None) -> Tensor:
    """Evenly spaced values (``numpy.arange``); float results use the default dtype."""
    return _make(np.arange(*args, dtype=dtype), dtype, False)


def linspace(start: float, stop: float, num: int = 50, dtype: Any = None) -> Tensor:
    """``num`` evenly spaced values from start to stop."""
    return _make(np.linspace(start, stop, num, dtype=dtype), dtype, False)
