"""Dtype names, the default dtype for Python data, and the accumulation-dtype rule."""
from __future__ import annotations

from typing import Any, Callable

from chainrule.core._backend import ml_dtypes, np
from chainrule.core.grad_mode import STATE

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

LOW_PRECISION = frozenset({float16, bfloat16, float8_e4m3fn, float8_e5m2})
_FLOATS = frozenset({float16, float32, float64, bfloat16, float8_e4m3fn, float8_e5m2,
                     np.dtype(np.complex64), np.dtype(np.complex128)})

_default = [float32]


def set_default_dtype(dtype: object) -> None:
    """Set the dtype that Python floats become (float32 unless changed).

    >>> import chainrule as cr
    >>> cr.set_default_dtype(cr.float64); cr.tensor([1.0]).dtype
    dtype('float64')
    >>> cr.set_default_dtype(cr.float32)
    """
    d = np.dtype(dtype)
    if d not in _FLOATS or d.kind == "c":
        raise TypeError(f"set_default_dtype: {d} is not a floating dtype; use float32 or float64")
    _default[0] = d


def get_default_dtype() -> np.dtype:
    """Return the dtype that Python floats become."""
    return _default[0]


complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)


def default_for(dtype: np.dtype) -> np.dtype:
    """What NumPy's float64 or complex128 from Python data becomes: the default dtype, or its
    complex partner (complex64 for float32 and the 16-bit floats, complex128 for float64)."""
    if dtype.kind != "c":
        return _default[0]
    return complex128 if _default[0] == float64 else complex64


def is_floating(dtype: np.dtype) -> bool:
    """True for dtypes that can carry gradients (real and complex floats, incl. bfloat16/FP8)."""
    return dtype in _FLOATS


def accum_dtype(dtype: np.dtype) -> np.dtype:
    """Dtype that sums and products of ``dtype`` values accumulate in (float32 for 16/8-bit floats)."""
    return float32 if dtype in LOW_PRECISION else dtype


def accumulate(fn: Callable, x: Any, *args: Any) -> Any:
    """``fn(x, *args)`` computed in ``x``'s accumulation dtype and rounded back to ``x``'s dtype once:
    PyTorch's rule for reductions of 16-bit and FP8 floats.

    Callers test ``dtype in LOW_PRECISION`` first (one set lookup: float32/64 pay nothing else) and
    hand over ``fn``, which then runs whole in float32, forward and rules alike. ``.astype`` is
    differentiable on Tensors, so the gradient flows back through both casts and arrives in x's
    dtype. Under autocast the result stays float32, as autocast's float32 reductions leave it.
    """
    dtype = x.dtype
    out = fn(x.astype(accum_dtype(dtype)), *args)
    return out if STATE.autocast is not None else out.astype(dtype)
