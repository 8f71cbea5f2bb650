"""NumPy's array-creation routines that take tensors: filled arrays (``full``, ``full_like``:
differentiable in a fill value that is a tensor, as jax.numpy.full), numerical ranges
(``linspace``, ``logspace``, ``geomspace``: differentiable in their end points and ``base``;
``meshgrid``) and the building of matrices (``diag``, ``diagflat``, ``vander``, ``tri``).
``chainrule.numpy.creation`` holds the constant leaf creators (zeros, ones, eye, arange).
"""
from __future__ import annotations

import builtins
import operator
from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, get_default_dtype, is_floating
from chainrule.core._registry import in_graph, raw
from chainrule.core.batched import is_batched
from chainrule.core.errors import GraphError, ShapeError
from chainrule.core.tensor import Tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.numpy._util import _any_tensor, _arr, _array, _as_result, _dtype, _inexact, _ndim, _raw_tree, _shape
from chainrule.numpy.creation import full as _creation_full
from chainrule.numpy.manipulation import broadcast_arrays
from chainrule.ops.elementwise import astype, floor, log10, power, where
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.elementwise import copy as _copy
from chainrule.ops.elementwise import sign as _sign
from chainrule.ops.reduction import cumprod, sum
from chainrule.ops.shape import (
    broadcast_to,
    concatenate,
    diagonal,
    diagonal_scatter,
    expand_dims,
    flip,
    index_put,
    moveaxis,
    ravel,
    reshape,
)


# ----- filled arrays: differentiable in a fill value that is a tensor (as jax.numpy.full) -----
def full(shape: Any, fill_value: Any, dtype: Any = None, *, requires_grad: bool = False) -> Tensor:
    """Tensor of ``shape`` filled with ``fill_value`` (Python floats take the default dtype). A fill
    value that is part of a graph (it requires grad, is dual or batched) is broadcast to ``shape``
    and cast to ``dtype``, so the result is differentiable in it (batched inside cr.vmap).

    >>> import chainrule as cr
    >>> cr.full((2,), 0.5)
    tensor([0.5, 0.5])
    >>> cr.grad(lambda t: cr.sum(cr.full((3,), t)))(cr.tensor(2.0))
    tensor(3.)
    """
    if not isinstance(fill_value, (Tensor, list, tuple)):         # the plain path: NumPy fills
        return _creation_full(shape, fill_value, dtype, requires_grad=requires_grad)
    if not _in_graph_tree(fill_value):
        return _creation_full(shape, _raw_tree(fill_value), dtype, requires_grad=requires_grad)
    if requires_grad:
        raise GraphError("full: requires_grad=True makes a new leaf, but fill_value is part of a graph "
                         "(the result is a function of it, not a leaf); pass fill_value.detach() for a "
                         "leaf, or leave requires_grad out to differentiate through fill_value")
    return _filled(shape, fill_value, dtype)


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None) -> Any:
    """An array of ``a``'s shape and dtype (or ``shape``, ``dtype``) filled with ``fill_value``, as
    ``numpy.full_like``: a Tensor for a Tensor ``a`` or a fill value in a graph (differentiable in
    it, as ``full``), else NumPy's array. Nothing depends on ``a``'s values.

    >>> import chainrule as cr, numpy as np
    >>> cr.grad(lambda t: cr.sum(np.full_like(cr.ones(3), t)))(cr.tensor(2.0))
    tensor(3.)
    """
    if not _in_graph_tree(fill_value):
        if not isinstance(a, Tensor):
            return np.full_like(a, _raw_tree(fill_value), dtype, order, subok, shape)
        return _wrap(np.full(a.shape if shape is None else shape, _raw_tree(fill_value),
                             a.dtype if dtype is None else dtype))
    if shape is None:
        shape = a.shape if isinstance(a, Tensor) else np.shape(_raw_tree(a))
    if dtype is None:
        dtype = a.dtype if isinstance(a, Tensor) else np.asarray(_raw_tree(a)).dtype
    return _filled(shape, fill_value, dtype)


def _in_graph_tree(x: Any) -> bool:
    return in_graph(x) or (isinstance(x, (list, tuple)) and builtins.any(_in_graph_tree(v) for v in x))


def _filled(shape: Any, fill_value: Any, dtype: Any) -> Any:
    """``fill_value`` (a tensor, or a list holding tensors) cast to ``dtype`` and broadcast to
    ``shape``, as a fresh (writable) tensor."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    value = _arr(fill_value)
    return _copy(broadcast_to(value if dtype is None else _astype(value, dtype), shape))


# ----- building matrices -----
def diag(v: Any, k: int = 0) -> Any:
    """The k-th diagonal of a 2-D array, or a 2-D array with a 1-D ``v`` on it, as ``numpy.diag``.

    >>> import chainrule as cr, numpy as np
    >>> cr.diag(np.array([1.0, 2.0]), 1)
    array([[0., 1., 0.],
           [0., 0., 2.],
           [0., 0., 0.]])
    """
    v = _arr(v)
    shape = _shape(v)
    k = operator.index(k)
    if len(shape) == 1:
        n = shape[0] + abs(k)
        return diagonal_scatter(np.zeros((n, n), dtype=_dtype(v)), v, k)
    if len(shape) == 2:
        return diagonal(v, k)
    raise ShapeError("Input must be 1- or 2-d.")


def diagflat(v: Any, k: int = 0) -> Any:
    """A 2-D array with the flattened input on the k-th diagonal, as ``numpy.diagflat``.

    >>> import chainrule as cr, numpy as np
    >>> cr.diagflat(np.array([[1.0, 2.0]])).shape
    (2, 2)
    """
    return diag(ravel(_arr(v)), k)


def vander(x: Any, N: Any = None, increasing: bool = False) -> Any:
    """The Vandermonde matrix (powers N-1 .. 0, or 0 .. N-1), as ``numpy.vander``.

    >>> import chainrule as cr, numpy as np
    >>> cr.vander(np.array([2.0, 3.0]), 3)
    array([[4., 2., 1.],
           [9., 3., 1.]])
    """
    x = _arr(x)
    if _ndim(x) != 1:
        raise ShapeError("x must be a one-dimensional array or sequence.")
    n = _shape(x)[0]
    N = n if N is None else operator.index(N)
    dtype = _dtype(x) if is_floating(_dtype(x)) else np.promote_types(_dtype(x), int)   # (bfloat16 kept)
    x = _astype(x, dtype)
    ones = np.ones((n, builtins.min(N, 1)), dtype=dtype)
    if N > 1:
        powers = cumprod(broadcast_to(reshape(x, (n, 1)), (n, N - 1)), axis=1)   # NumPy's accumulate
        out = concatenate([ones, powers], axis=1)
    else:
        out = _as_result(ones, (x,))
    return out if increasing else flip(out, 1)


def tri(N: int, M: Any = None, k: int = 0, dtype: Any = float, *, like: Any = None) -> Any:
    """Ones at and below the k-th diagonal, an ndarray (``numpy.tri``)."""
    return np.tri(N, M, k, dtype=dtype)


# ----- numerical ranges: spaced grids, meshgrid -----
def _make(data: Any, dtype: Any) -> Tensor:
    """chainrule.numpy.creation's rule: a float64 grid from Python numbers takes the default dtype."""
    if dtype is None and data.dtype == np.float64:
        data = data.astype(get_default_dtype())
    return Tensor(data)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """``num`` evenly spaced values, as ``numpy.linspace``; differentiable in Tensor end points.
    From plain numbers, a constant Tensor in the default dtype (as ``cr.arange``).

    >>> import chainrule as cr
    >>> b = cr.tensor(2.0, requires_grad=True)
    >>> cr.linspace(0.0, b, 3).sum().backward(); b.grad
    tensor(1.5)
    """
    if not _any_tensor(start, stop):
        res = np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
        return (_make(res[0], dtype), res[1]) if retstep else _make(res, dtype)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    dt = np.result_type(raw(start), raw(stop))
    if not _inexact(dt):
        dt = np.dtype(np.float64)
    start, stop = astype(_array(start), dt), astype(_array(stop), dt)
    delta = stop - start
    nd = np.ndim(raw(delta))
    y = np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * nd)
    if div > 0:
        step = delta / div
        if is_batched(step):          # NumPy's choice, per example: any zero step divides last
            y = where(sum(step == 0) > 0, (y / div) * delta, y * step)
        else:
            y = (y / div) * delta if np.any(raw(step) == 0) else y * step
    else:
        step = np.nan
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y = index_put(y, -1, stop)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype is not None:
        if np.issubdtype(dtype, np.integer):
            y = floor(y)
        y = astype(y, dtype)
    return (y, step) if retstep else y


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    """``base ** linspace(start, stop)``, as ``numpy.logspace``; differentiable in Tensor arguments."""
    if not _any_tensor(start, stop, base):
        return _make(np.logspace(start, stop, num, endpoint, base, dtype, axis), dtype)
    ndmax = builtins.max(np.ndim(raw(v)) for v in (start, stop, base))
    start, stop, base = (_atleast(v, ndmax) for v in (start, stop, base))
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    out = power(expand_dims(base, axis), y)
    return out if dtype is None else astype(out, dtype)


def _atleast(v: Any, nd: int) -> Any:
    v = _array(v)
    k = np.ndim(raw(v))
    return reshape(v, (1,) * (nd - k) + np.shape(raw(v))) if k < nd else v


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """A geometric sequence, as ``numpy.geomspace`` (exact end points); differentiable in Tensor
    end points."""
    if not _any_tensor(start, stop):
        return _make(np.geomspace(start, stop, num, endpoint, dtype, axis), dtype)
    start, stop = _array(start) * 1.0, _array(stop) * 1.0
    batched = is_batched(start, stop)
    if not batched and (np.any(raw(start) == 0) or np.any(raw(stop) == 0)):
        raise ValueError("geomspace: Geometric sequence cannot include zero")
    dt = np.result_type(*(np.float32 if raw(v).dtype in LOW_PRECISION else raw(v).dtype for v in (start, stop)),
                        float(num), np.zeros((), dtype))
    start, stop = astype(start, dt), astype(stop, dt)
    # (batched: a zero end point gives NaN or inf, not NumPy's ValueError, which would depend on the values)
    sign = _sign(start).detach() if batched else np.sign(raw(start))
    start = start / sign
    stop = stop / sign
    with np.errstate(invalid="ignore", divide="ignore"):
        result = logspace(log10(start), log10(stop), num=num, endpoint=endpoint, base=10.0, dtype=dt)
    if num > 0:
        result = index_put(result, 0, start)
        if num > 1 and endpoint:
            result = index_put(result, -1, stop)
    result = sign * result
    if axis != 0:
        result = moveaxis(result, 0, axis)
    return result if dtype is None else astype(result, dtype)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple:
    """Coordinate grids from coordinate vectors, as ``numpy.meshgrid`` (broadcasts: differentiable).

    >>> import chainrule as cr, numpy as np
    >>> [g.shape for g in cr.meshgrid(np.arange(3.0), np.arange(2.0))]
    [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise ShapeError("Valid values for `indexing` are 'xy' and 'ij'.")
    ndim = len(xi)
    ones = (1,) * ndim
    out = [reshape(_arr(x), ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and ndim > 1:
        out[0] = reshape(out[0], (1, -1) + ones[2:])
        out[1] = reshape(out[1], (-1, 1) + ones[2:])
    if not sparse:
        out = list(broadcast_arrays(*out))
    if copy:
        out = [_copy(x) for x in out]
    return tuple(out)


__all__ = ["full", "full_like", "diag", "diagflat", "vander", "tri", "linspace", "logspace", "geomspace", "meshgrid"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__
               if hasattr(np, name) and name not in ("tri", "full")}
