"""NumPy's array-manipulation routines: joining, splitting, inserting and deleting (``append``,
``insert``, ``delete``, ``block``, ``column_stack``, ``dstack``, ``hsplit``, ...), flips, rotations and
reshapes (``fliplr``, ``rot90``, ``rollaxis``, ``resize``, ``trim_zeros``), ``broadcast_arrays``,
``matrix_transpose`` and the basic queries (``shape``, ``ndim``, ``size``, ``shares_memory``).

No primitives here: every differentiable function is a composite of getitem, index_put,
concatenate, reshape, transpose, flip and the arithmetic ops, so it is differentiable in both
modes and to any order. ``trim_zeros`` chooses by value: NumPy computes the choice on the data and
chainrule gathers the chosen elements.
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Callable, Sequence

from chainrule.core._backend import np
from chainrule.core._shapes import normalize_axis
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.numpy._util import _arr, _as_result, _axis1, _dtype, _gather, _ids, _ndim, _raw, _shape, _value_dependent
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.elementwise import copy as _copy
from chainrule.ops.linalg import matrix_transpose as matrix_transpose
from chainrule.ops.shape import (
    broadcast_to,
    concatenate,
    flip,
    getitem,
    ravel,
    reshape,
    split,
    transpose,
    unbind,
    vstack,
)


# ----- joining, splitting, inserting -----
def append(arr: Any, values: Any, axis: Any = None) -> Any:
    """Values appended at the end (flattened when ``axis`` is None), as ``numpy.append``.

    >>> import chainrule as cr, numpy as np
    >>> cr.append(np.array([1.0, 2.0]), [[3.0]])
    array([1., 2., 3.])
    """
    arr, values = _arr(arr), _arr(values)
    if axis is None:
        if _ndim(arr) != 1:
            arr = ravel(arr)
        values = ravel(values)
        axis = _ndim(arr) - 1
    return concatenate((arr, values), axis=axis)


def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
    """``values`` inserted before the indices ``obj``, as ``numpy.insert`` (values take arr's dtype).

    >>> import chainrule as cr, numpy as np
    >>> cr.insert(np.array([1.0, 2.0]), 1, 9.0)
    array([1., 9., 2.])
    """
    arr, values = _arr(arr), _arr(values)
    n = math.prod(_shape(arr))
    mine = _ids(_shape(arr))
    theirs = n + _ids(_shape(values))          # NumPy places an id array exactly as it places values
    where_from = np.insert(mine, _raw(obj), theirs, axis=axis)
    both = concatenate((ravel(arr), ravel(_astype(values, _dtype(arr)))), axis=0)
    return _gather(both, where_from)


def delete(arr: Any, obj: Any, axis: Any = None) -> Any:
    """The array without the sub-arrays ``obj`` along ``axis`` (flattened when None), as ``numpy.delete``.

    >>> import chainrule as cr, numpy as np
    >>> cr.delete(np.array([1.0, 2.0, 3.0]), 1)
    array([1., 3.])
    """
    arr = _arr(arr)
    return _gather(arr, np.delete(_ids(_shape(arr)), _raw(obj), axis=axis))


def _atleast_3d(x: Any) -> Any:
    x = _arr(x)
    shape = _shape(x)
    if len(shape) == 0:
        return reshape(x, (1, 1, 1))
    if len(shape) == 1:
        return reshape(x, (1, shape[0], 1))
    if len(shape) == 2:
        return reshape(x, shape + (1,))
    return x


def atleast_3d(*arys: Any) -> Any:
    """Views with at least three dimensions ((N,) becomes (1, N, 1)), as ``numpy.atleast_3d``.

    >>> import chainrule as cr, numpy as np
    >>> cr.atleast_3d(np.ones(2)).shape
    (1, 2, 1)
    """
    out = tuple(_atleast_3d(x) for x in arys)
    return out[0] if len(out) == 1 else out


def column_stack(tup: Sequence[Any]) -> Any:
    """1-D arrays as columns of a 2-D array, as ``numpy.column_stack``.

    >>> import chainrule as cr, numpy as np
    >>> cr.column_stack([np.array([1.0, 2.0]), np.array([3.0, 4.0])])
    array([[1., 3.],
           [2., 4.]])
    """
    cols = []
    for v in tup:
        v = _arr(v)
        shape = _shape(v)
        if len(shape) < 2:
            v = reshape(v, (-1, 1)) if shape else reshape(v, (1, 1))
        cols.append(v)
    return concatenate(cols, axis=1)


def row_stack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """``vstack`` under its old name (``numpy.row_stack``)."""
    return _stacked(vstack, tup, dtype, casting, "row_stack")


def dstack(tup: Sequence[Any]) -> Any:
    """Stack along the third axis, as ``numpy.dstack``.

    >>> import chainrule as cr, numpy as np
    >>> cr.dstack([np.ones(2), np.zeros(2)]).shape
    (1, 2, 2)
    """
    return concatenate([_atleast_3d(x) for x in tup], axis=2)


def _stacked(fn: Callable, tup: Sequence[Any], dtype: Any, casting: str, op: str) -> Any:
    tup = [_arr(x) for x in tup]
    if dtype is not None:
        for x in tup:
            if not np.can_cast(_dtype(x), dtype, casting=casting):
                raise DTypeError(f"{op}: cannot cast {_dtype(x)} to {np.dtype(dtype)} with "
                                 f"casting={casting!r}")
        tup = [_astype(x, dtype) for x in tup]
    return fn(tup)


def hsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split along the second axis (the first for 1-D), as ``numpy.hsplit``.

    >>> import chainrule as cr, numpy as np
    >>> [a.tolist() for a in cr.hsplit(np.arange(4.0), 2)]
    [[0.0, 1.0], [2.0, 3.0]]
    """
    if _ndim(ary) == 0:
        raise ShapeError("hsplit only works on arrays of 1 or more dimensions")
    return split(_arr(ary), indices_or_sections, 1 if _ndim(ary) > 1 else 0)


def vsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split along the first axis of an array of 2 or more dimensions, as ``numpy.vsplit``.

    >>> import chainrule as cr, numpy as np
    >>> len(cr.vsplit(np.ones((4, 2)), 2))
    2
    """
    if _ndim(ary) < 2:
        raise ShapeError("vsplit only works on arrays of 2 or more dimensions")
    return split(_arr(ary), indices_or_sections, 0)


def dsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split along the third axis, as ``numpy.dsplit``.

    >>> import chainrule as cr, numpy as np
    >>> cr.dsplit(np.ones((1, 2, 4)), [1])[1].shape
    (1, 2, 3)
    """
    if _ndim(ary) < 3:
        raise ShapeError("dsplit only works on arrays of 3 or more dimensions")
    return split(_arr(ary), indices_or_sections, 2)


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    """The slices along ``axis``, as a tuple (``numpy.unstack``).

    >>> import chainrule as cr, numpy as np
    >>> cr.unstack(np.eye(2))[1]
    array([0., 1.])
    """
    x = _arr(x)
    if _ndim(x) == 0:
        raise ShapeError("unstack: input must be at least 1-d")
    return tuple(unbind(x, axis))


def _block_depth(arrays: Any, index: tuple = ()) -> tuple:
    """The nesting depth of ``block``'s lists and the largest leaf ndim (NumPy's checks)."""
    if type(arrays) is tuple:
        raise TypeError(f"arrays{''.join(f'[{i}]' for i in index)} is a tuple. Only lists can be used "
                        f"to arrange blocks, and np.block does not allow implicit conversion from "
                        f"tuple to ndarray.")
    if type(arrays) is list:
        if not arrays:
            raise ShapeError(f"List at arrays{''.join(f'[{i}]' for i in index)} cannot be empty")
        found = [_block_depth(a, index + (i,)) for i, a in enumerate(arrays)]
        depths = {d for d, _ in found}
        if len(depths) > 1:
            raise ShapeError(f"List depths are mismatched in np.block at arrays{list(index)}: "
                             f"found depths {sorted(depths)}")
        return depths.pop() + 1, builtins.max(n for _, n in found)
    return 0, _ndim(arrays)


def block(arrays: Any) -> Any:
    """An array assembled from nested lists of blocks, as ``numpy.block``.

    >>> import chainrule as cr, numpy as np
    >>> cr.block([[np.eye(2), np.zeros((2, 1))]]).shape
    (2, 3)
    """
    depth, leaf_ndim = _block_depth(arrays)
    ndim = builtins.max(depth, leaf_ndim)

    def assemble(a: Any, level: int) -> Any:
        if level == depth:
            a = _arr(a)
            shape = _shape(a)
            return reshape(a, (1,) * (ndim - len(shape)) + shape) if len(shape) < ndim else a
        return concatenate([assemble(v, level + 1) for v in a], axis=ndim - depth + level)

    out = assemble(arrays, 0)
    return _copy(out) if depth == 0 else out


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple:
    """The arrays broadcast against each other (read-only views), as ``numpy.broadcast_arrays``.

    >>> import chainrule as cr, numpy as np
    >>> [a.shape for a in cr.broadcast_arrays(np.ones((2, 1)), np.ones(3))]
    [(2, 3), (2, 3)]
    """
    shape = np.broadcast_shapes(*(_shape(a) for a in args))
    return tuple(broadcast_to(_arr(a), shape) for a in args)


# ----- flips, rotations, reshapes -----
def fliplr(m: Any) -> Any:
    """Reverse the columns (axis 1), as ``numpy.fliplr``.

    >>> import chainrule as cr, numpy as np
    >>> cr.fliplr(np.array([[1.0, 2.0]]))
    array([[2., 1.]])
    """
    if _ndim(m) < 2:
        raise ShapeError("Input must be >= 2-d.")
    return flip(_arr(m), 1)


def flipud(m: Any) -> Any:
    """Reverse the rows (axis 0), as ``numpy.flipud``.

    >>> import chainrule as cr, numpy as np
    >>> cr.flipud(np.array([1.0, 2.0]))
    array([2., 1.])
    """
    if _ndim(m) < 1:
        raise ShapeError("Input must be >= 1-d.")
    return flip(_arr(m), 0)


def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Any:
    """Rotate by 90 degrees ``k`` times in the plane ``axes``, as ``numpy.rot90``.

    >>> import chainrule as cr, numpy as np
    >>> cr.rot90(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[2., 4.],
           [1., 3.]])
    """
    axes = tuple(axes)
    if len(axes) != 2:
        raise ShapeError("len(axes) must be 2.")
    m = _arr(m)
    nd = _ndim(m)
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == nd:
        raise ShapeError("Axes must be different.")
    if axes[0] >= nd or axes[0] < -nd or axes[1] >= nd or axes[1] < -nd:
        raise ShapeError(f"Axes={axes} out of range for array of ndim={nd}.")
    k = operator.index(k) % 4
    if k == 0:
        return getitem(m, Ellipsis)
    if k == 2:
        return flip(flip(m, axes[0]), axes[1])
    perm = list(range(nd))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return transpose(flip(m, axes[1]), perm)
    return flip(transpose(m, perm), axes[1])


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """Roll ``axis`` backwards until it lies before ``start``, as ``numpy.rollaxis``.

    >>> import chainrule as cr, numpy as np
    >>> cr.rollaxis(np.ones((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    a = _arr(a)
    n = _ndim(a)
    axis = _axis1(axis, n, "rollaxis")
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise ShapeError(f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return getitem(a, Ellipsis)
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return transpose(a, axes)


def resize(a: Any, new_shape: Any) -> Any:
    """The flattened array repeated cyclically to fill ``new_shape``, as ``numpy.resize``.

    >>> import chainrule as cr, numpy as np
    >>> cr.resize(np.array([1.0, 2.0, 3.0]), (2, 2))
    array([[1., 2.],
           [3., 1.]])
    """
    if isinstance(new_shape, (int, np.integer)):
        new_shape = (new_shape,)
    new_shape = tuple(operator.index(s) for s in new_shape)
    if builtins.any(s < 0 for s in new_shape):
        raise ShapeError("all elements of `new_shape` must be non-negative")
    a = _arr(a)
    size, new_size = math.prod(_shape(a)), math.prod(new_shape)
    if size == 0 or new_size == 0:
        return _as_result(np.zeros(new_shape, dtype=_dtype(a)), (a,))
    return _gather(a, (np.arange(new_size, dtype=np.intp) % size).reshape(new_shape))


def trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    """``filt`` without its leading (``'f'``) and trailing (``'b'``) zeros, as ``numpy.trim_zeros``.

    >>> import chainrule as cr, numpy as np
    >>> cr.trim_zeros(np.array([0.0, 1.0, 2.0, 0.0]))
    array([1., 2.])
    """
    _value_dependent("trim_zeros", "use cr.where(filt != 0, filt, ...) or trim outside the vmapped function")(filt)
    filt = _arr(filt)
    raw = np.asarray(_raw(filt))
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ShapeError(f"unexpected character(s) in `trim`: {trim!r}")
    axes = tuple(range(raw.ndim)) if axis is None else tuple(
        normalize_axis(operator.index(a), raw.ndim, "trim_zeros")[0] for a in np.atleast_1d(axis))
    if not axes:
        return filt
    nonzero = np.argwhere(raw)
    if nonzero.size == 0:
        start = stop = np.zeros(raw.ndim, dtype=np.intp)
    else:
        start, stop = nonzero.min(axis=0), nonzero.max(axis=0) + 1
        if "f" not in trim:
            start = (None,) * raw.ndim
        if "b" not in trim:
            stop = (None,) * raw.ndim
    index = tuple(slice(start[d], stop[d]) if d in axes else slice(None) for d in range(raw.ndim))
    return getitem(filt, index)


# ----- basic queries: NumPy's plain results -----
def shape(a: Any) -> tuple:
    """The shape (``numpy.shape``)."""
    return np.shape(_raw(a))


def ndim(a: Any) -> int:
    """The number of dimensions (``numpy.ndim``)."""
    return np.ndim(_raw(a))


def size(a: Any, axis: Any = None) -> int:
    """The number of elements, along ``axis`` if given (``numpy.size``)."""
    return np.size(_raw(a), axis)


def may_share_memory(a: Any, b: Any, /, max_work: Any = 0) -> bool:
    """Whether the memory bounds overlap (``numpy.may_share_memory``)."""
    return np.may_share_memory(_raw(a), _raw(b), max_work=max_work)


def shares_memory(a: Any, b: Any, /, max_work: Any = -1) -> bool:
    """Whether the arrays share memory (``numpy.shares_memory``)."""
    return np.shares_memory(_raw(a), _raw(b), max_work=max_work)


__all__ = ["append", "insert", "delete", "atleast_3d", "column_stack", "row_stack", "dstack", "hsplit", "vsplit",
           "dsplit", "unstack", "block", "broadcast_arrays", "fliplr", "flipud", "rot90", "rollaxis", "resize",
           "trim_zeros", "matrix_transpose", "shape", "ndim", "size", "may_share_memory", "shares_memory"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__
               if hasattr(np, name) and name not in ("row_stack",)}
# (np.row_stack is a plain wrapper of np.vstack: it does not dispatch)
