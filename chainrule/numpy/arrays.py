"""NumPy's array-manipulation functions (``append``, ``insert``, ``block``, ``gradient``, ``kron``,
``cross``, ``unique``, ``piecewise``, ``put``, ...), with NumPy's arguments and results.

No primitives here: every differentiable function is a composite of getitem, index_put,
concatenate, reshape, transpose, where, flip, cumsum/cumprod and the arithmetic ops, so it is
differentiable in both modes and to any order. Where NumPy picks elements by value (partition,
unique, trim_zeros, ...) NumPy computes the choice on the data and chainrule gathers the chosen
elements, so the values are NumPy's and the gradient flows to the elements picked. The in-place
functions (put, put_along_axis, putmask, place, fill_diagonal, copyto) write through
``Tensor.__setitem__``, so version counters and view rebasing record them as any in-place op.
Index-valued functions (argwhere, searchsorted, unravel_index, ...) accept tensors that require
grad and return NumPy's plain results.
"""
from __future__ import annotations

import builtins
import math
import operator
import warnings
from typing import Any, Callable, NamedTuple, Sequence

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import is_floating
from chainrule.core._registry import in_graph, no_out
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import batched_like, is_batched, whole_batch
from chainrule.core.errors import DTypeError, GraphError, ShapeError, VmapError, numpy_caller
from chainrule.core.tensor import Tensor, graph_role
from chainrule.core.tensor import wrap as _wrap
from chainrule.numpy.creation import full as _creation_full
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.elementwise import conj, not_equal, where
from chainrule.ops.elementwise import copy as _copy
from chainrule.ops.linalg import matmul
from chainrule.ops.linalg import matrix_transpose as matrix_transpose  # (one implementation, listed in __all__)
from chainrule.ops.reduction import cumprod, cumsum
from chainrule.ops.shape import (
    broadcast_to,
    concatenate,
    diagonal,
    diagonal_scatter,
    expand_dims,
    flip,
    getitem,
    index_put,
    moveaxis,
    ravel,
    reshape,
    split,
    stack,
    take,
    take_along_axis,
    transpose,
    unbind,
    vstack,
)

_NOVALUE = object()                 # NumPy's "argument not given" (diff's prepend/append)


# ----- helpers -----
def _raw(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _raw_tree(x: Any) -> Any:
    """Tensors unwrapped inside lists and tuples (lexsort's keys, ix_'s arguments)."""
    if isinstance(x, (list, tuple)):
        return type(x)(_raw_tree(v) for v in x)
    return _raw(x)


def _arr(x: Any) -> Any:
    """A Tensor as it is; a list holding tensors stacked (differentiably); anything else as NumPy
    reads it (``np.asarray``)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (list, tuple)) and _holds_tensor(x):
        return stack([_arr(v) for v in x])
    return np.asarray(x)


def _holds_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) or (isinstance(x, (list, tuple)) and builtins.any(_holds_tensor(v) for v in x))


def _shape(x: Any) -> tuple:
    return tuple(np.shape(_raw_tree(x)))


def _ndim(x: Any) -> int:
    return len(_shape(x))


def _dtype(x: Any) -> Any:
    return np.asarray(_raw(x)).dtype if not isinstance(x, (Tensor, ndarray)) else _raw(x).dtype


def _value_dependent(op: str, instead: str) -> Callable:
    """A refusal for batched inputs of ``op``, whose result's shape depends on the values."""
    def check(*xs: Any) -> None:
        if is_batched(*(v for x in xs for v in (x if isinstance(x, (list, tuple)) else (x,)))):
            raise VmapError(f"{op} inside cr.vmap: the shape of its result would depend on the values, so the "
                            f"examples' results would differ in shape; {instead}")
    return check


def _stand_in(x: Any) -> Any:
    """NumPy's view of ``x`` for checks of shapes and dtypes: zeros of a batched tensor's example."""
    if isinstance(x, (list, tuple)):
        return type(x)(_stand_in(v) for v in x)
    return np.zeros(x.shape, x.dtype) if is_batched(x) else _raw(x)


def _take_along(x: Any, idx: Any, axis: int) -> Any:
    """``take_along_axis(x, idx, axis)`` for an index tensor (batched too): a getitem with grids."""
    shape = _shape(idx)
    nd = len(shape)
    grids: list = [np.arange(k).reshape((-1,) + (1,) * (nd - 1 - d)) for d, k in enumerate(shape)]
    grids[axis] = idx
    return getitem(x, tuple(grids))


def _any_tensor(*xs: Any) -> bool:
    return builtins.any(isinstance(x, Tensor) for x in xs)


def _axis1(axis: Any, ndim: int, op: str) -> int:
    return normalize_axis(operator.index(axis), ndim, op)[0]


def _gather(x: Any, flat_index: Any) -> Any:
    """``x.flat[flat_index]`` (any shape of integer index): a differentiable gather."""
    return getitem(ravel(x), np.asarray(flat_index, dtype=np.intp))


def _ids(shape: tuple) -> Any:
    return np.arange(math.prod(shape), dtype=np.intp).reshape(shape)


def _as_result(y: Any, like: Sequence[Any]) -> Any:
    """A constant ndarray result as a Tensor when a Tensor came in."""
    return _wrap(y) if isinstance(y, ndarray) and _any_tensor(*like) else y


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


# ----- choosing and selecting -----
def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    """Each element from the choice ``a`` names (a gather), as ``numpy.choose``.

    >>> import chainrule as cr, numpy as np
    >>> cr.choose(np.array([0, 1, 0]), [np.zeros(3), np.ones(3)])
    array([0., 1., 0.])
    """
    no_out("choose", out)
    like = (a,)
    a = np.asarray(_raw(a))
    if a.dtype.kind not in "iub":
        raise DTypeError(f"choose: the index array must be integer, got {a.dtype}")
    if isinstance(choices, (Tensor, ndarray)):
        choices = [getitem(choices, i) for i in range(_shape(choices)[0])]
    choices = [_arr(c) for c in choices]
    n = len(choices)
    if mode == "raise":
        if a.size and (a.min() < 0 or a.max() >= n):
            raise ShapeError("invalid entry in choice array")
    elif mode == "wrap":
        a = a % n
    elif mode == "clip":
        a = np.clip(a, 0, n - 1)
    else:
        raise ShapeError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    shape = np.broadcast_shapes(a.shape, *(_shape(c) for c in choices))
    dtype = np.result_type(*(_dtype(c) for c in choices))
    stacked = stack([broadcast_to(_astype(c, dtype), shape) for c in choices], axis=0)
    grids = tuple(np.ogrid[tuple(slice(k) for k in shape)]) if shape else ()
    return _as_result(getitem(stacked, (np.broadcast_to(a, shape).astype(np.intp),) + grids), like)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """The first choice whose condition holds, else ``default``, as ``numpy.select``.

    >>> import chainrule as cr, numpy as np
    >>> x = np.array([-1.0, 0.5, 2.0])
    >>> cr.select([x < 0, x > 1], [-x, x * 10], default=0.0)
    array([ 1.,  0., 20.])
    """
    if len(condlist) != len(choicelist):
        raise ShapeError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ShapeError("select with an empty condition list is not possible")
    py = (int, float, complex)
    choices = [c if type(c) in py or isinstance(c, Tensor) else np.asarray(c) for c in choicelist]
    default = default if type(default) in py or isinstance(default, Tensor) else np.asarray(default)
    try:
        dtype = np.result_type(*(_raw(c) for c in choices), _raw(default))
    except TypeError as e:
        raise DTypeError(f"Choicelist and default value do not have a common dtype: {e}") from None
    conds = [c if is_batched(c) else np.asarray(_raw(c)) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != np.bool_:
            raise DTypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    shape = np.broadcast_shapes(*(np.shape(c) for c in conds), *(np.shape(_raw(c)) for c in choices))
    result = broadcast_to(_astype(_arr(default), dtype), shape)
    for cond, choice in zip(reversed(conds), reversed(choices)):
        result = where(cond, _astype(_arr(choice), dtype), result)
    result = broadcast_to(result, shape) if _shape(result) != shape else result
    return _as_result(result, (*condlist, *choicelist, default))


def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Any:
    """The slices along ``axis`` where ``condition`` holds, as ``numpy.compress``.

    >>> import chainrule as cr, numpy as np
    >>> cr.compress([True, False, True], np.array([1.0, 2.0, 3.0]))
    array([1., 3.])
    """
    no_out("compress", out)
    _value_dependent("compress", "use cr.where(condition, a, 0) to keep the shape")(condition)
    cond = np.asarray(_raw(condition))
    if cond.ndim != 1:
        raise ShapeError("condition must be a 1-d array")
    index = np.nonzero(cond)[0]
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _axis1(axis, _ndim(a), "compress")
    n = _shape(a)[axis]
    if index.size and index[-1] >= n:
        raise IndexError(f"index {index[-1]} is out of bounds for axis {axis} with size {n}")
    return _as_result(take(a, index, axis=axis), (condition,))


def extract(condition: Any, arr: Any) -> Any:
    """The elements where ``condition`` is nonzero (both flattened), as ``numpy.extract``.

    >>> import chainrule as cr, numpy as np
    >>> cr.extract(np.array([0, 1, 1]), np.array([4.0, 5.0, 6.0]))
    array([5., 6.])
    """
    _value_dependent("extract", "use cr.where(condition, arr, 0) to keep the shape")(condition)
    return _as_result(take(ravel(_arr(arr)), np.nonzero(np.ravel(_raw(condition)))[0]), (condition,))


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[i]`` applied where ``condlist[i]`` holds (constants allowed), as ``numpy.piecewise``;
    the gradient flows through the pieces chosen (chainrule-callable functions).

    >>> import chainrule as cr, numpy as np
    >>> x = np.array([-2.0, 3.0])
    >>> cr.piecewise(x, [x < 0], [lambda v: -v, lambda v: v * v])
    array([2., 9.])
    """
    x = _arr(x)
    n2 = len(funclist)
    if is_batched(condlist) or isinstance(condlist, (list, tuple)) and is_batched(*condlist):
        return _piecewise_batched(x, condlist, funclist, args, kw)
    if isinstance(condlist, Tensor):
        condlist = condlist.data
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, ndarray, Tensor)) and _ndim(x) != 0):
        condlist = [condlist]
    conds = np.asarray(_raw_tree(list(condlist) if isinstance(condlist, (list, tuple)) else condlist),
                       dtype=bool)
    n = len(conds)
    if n == n2 - 1:
        conds = np.concatenate([conds, ~np.any(conds, axis=0, keepdims=True)], axis=0)
    elif n != n2:
        raise ShapeError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y: Any = np.zeros(_shape(x), _dtype(x))
    for cond, func in zip(conds, funclist):
        if not callable(func):
            y = index_put(y, cond, _raw(func) if not isinstance(func, Tensor) else func)
        else:
            vals = getitem(x, cond)
            if math.prod(_shape(vals)) > 0:
                y = index_put(y, cond, func(vals, *args, **kw))
    return _as_result(y, (x,))


def _piecewise_batched(x: Any, condlist: Any, funclist: Sequence[Any], args: tuple, kw: dict) -> Any:
    """``piecewise`` with batched conditions (inside cr.vmap): each function runs on all of ``x`` and
    a where picks its values (which elements a condition selects depends on the values)."""
    if isinstance(condlist, Tensor) and _ndim(condlist) == _ndim(x):
        condlist = [condlist]
    conds = [broadcast_to(c if isinstance(c, Tensor) else np.asarray(_raw(c), dtype=bool), _shape(x))
             for c in condlist]
    n, n2 = len(conds), len(funclist)
    if n == n2 - 1:
        rest = conds[0]
        for c in conds[1:]:
            rest = rest | c
        conds.append(~rest)
    elif n != n2:
        raise ShapeError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y: Any = np.zeros(_shape(x), _dtype(x))
    for cond, func in zip(conds, funclist):
        vals = func(x, *args, **kw) if callable(func) else func
        y = where(cond, _astype(_arr(vals), _dtype(x)), y)
    return y


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """``func1d`` on every 1-D slice along ``axis``, results stacked, as ``numpy.apply_along_axis``;
    differentiable when ``func1d`` is.

    >>> import chainrule as cr, numpy as np
    >>> cr.apply_along_axis(lambda v: v[::-1], 1, np.arange(4.0).reshape(2, 2))
    array([[1., 0.],
           [3., 2.]])
    """
    arr = _arr(arr)
    nd = _ndim(arr)
    axis = _axis1(axis, nd, "apply_along_axis")
    view = moveaxis(arr, axis, -1)
    outer = _shape(view)[:-1]
    if math.prod(outer) == 0:
        raise ShapeError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = []
    for ind in np.ndindex(outer):
        r = _arr(func1d(getitem(view, ind + (Ellipsis,)), *args, **kwargs))
        if results:
            if _shape(r) != _shape(results[0]):
                raise ShapeError(f"apply_along_axis: func1d returned shape {_shape(r)}, then "
                                 f"{_shape(results[0])}: every call must return the same shape")
            r = _astype(r, _dtype(results[0]))
        results.append(r)
    res_shape = _shape(results[0])
    buff = reshape(stack(results, axis=0), outer + res_shape)
    dims = list(range(len(outer) + len(res_shape)))
    nb = len(dims)
    perm = dims[:axis] + dims[nb - len(res_shape):] + dims[axis:nb - len(res_shape)]
    return transpose(buff, perm)


def apply_over_axes(func: Callable, a: Any, axes: Any) -> Any:
    """``func(a, axis)`` repeatedly over ``axes``, keeping dimensions, as ``numpy.apply_over_axes``.

    >>> import chainrule as cr, numpy as np
    >>> cr.apply_over_axes(cr.sum, np.ones((2, 3)), [0, 1])
    array([[6.]])
    """
    val = _arr(a)
    n = _ndim(val)
    if np.ndim(axes) == 0:
        axes = (axes,)
    for axis in axes:
        if axis < 0:
            axis = n + axis
        res = func(val, axis)
        if _ndim(res) != _ndim(val):
            res = expand_dims(res, axis)
            if _ndim(res) != _ndim(val):
                raise ShapeError("function is not returning an array of the correct shape")
        val = res
    return val


# ----- diagonals, differences, products -----
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


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _NOVALUE, append: Any = _NOVALUE) -> Any:
    """The n-th discrete difference along ``axis``, as ``numpy.diff`` (bool: ``!=``).

    >>> import chainrule as cr, numpy as np
    >>> cr.diff(np.array([1.0, 4.0, 9.0]), prepend=0.0)
    array([1., 3., 5.])
    """
    if n == 0:
        return a
    if n < 0:
        raise ShapeError(f"order must be non-negative but got {n!r}")
    a = _arr(a)
    nd = _ndim(a)
    if nd == 0:
        raise ShapeError("diff requires input that is at least one dimensional")
    axis = _axis1(axis, nd, "diff")
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            parts.append(a)
        elif extra is not _NOVALUE:
            extra = _arr(extra)
            if _ndim(extra) == 0:
                shape = list(_shape(a))
                shape[axis] = 1
                extra = broadcast_to(extra, tuple(shape))
            parts.append(extra)
    if len(parts) > 1:
        a = concatenate(parts, axis=axis)
    hi = (slice(None),) * axis + (slice(1, None),)
    lo = (slice(None),) * axis + (slice(None, -1),)
    for _ in range(n):
        a = not_equal(getitem(a, hi), getitem(a, lo)) if _dtype(a) == np.bool_ else getitem(a, hi) - getitem(a, lo)
    return a


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """Differences of the flattened array, with values before and after, as ``numpy.ediff1d``.

    >>> import chainrule as cr, numpy as np
    >>> cr.ediff1d(np.array([1.0, 2.0, 4.0]), to_begin=-1.0)
    array([-1.,  1.,  2.])
    """
    ary = ravel(_arr(ary))
    dtype = _dtype(ary)
    parts = []
    for name, extra in (("to_begin", to_begin), (None, None), ("to_end", to_end)):
        if name is None:
            parts.append(getitem(ary, slice(1, None)) - getitem(ary, slice(None, -1)))
        elif extra is not None:
            extra = _arr(extra)
            if not np.can_cast(_raw(extra), dtype, casting="same_kind"):
                raise DTypeError(f"dtype of `{name}` must be compatible with input `ary` under the "
                                 f"`same_kind` rule.")
            parts.append(_astype(ravel(extra), dtype))
    out = concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    return _astype(out, dtype) if _dtype(out) != dtype else out


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """Second-order central differences inside, first- or second-order one-sided ones at the
    edges, as ``numpy.gradient`` (spacings: scalars or coordinate arrays, which may be tensors).

    >>> import chainrule as cr, numpy as np
    >>> cr.gradient(np.array([1.0, 4.0, 9.0, 16.0]))
    array([3., 4., 6., 7.])
    """
    f = _arr(f)
    nd = _ndim(f)
    axes = tuple(range(nd)) if axis is None else _axes_in_order(axis, nd)
    n = len(varargs)
    if n == 0:
        dx: list = [1.0] * len(axes)
    elif n == 1 and np.ndim(_raw(varargs[0])) == 0:
        dx = [varargs[0]] * len(axes)
    elif n == len(axes):
        dx = [_spacing(d, _shape(f)[ax]) for d, ax in zip(varargs, axes)]
    else:
        raise DTypeError("invalid number of arguments")
    if edge_order > 2:
        raise ShapeError("'edge_order' greater than 2 not supported")
    otype = _dtype(f)
    if not is_floating(otype):                  # (bfloat16 kept: NumPy would give float64)
        if otype.kind in "iu":
            f = _astype(f, np.float64)
        otype = np.dtype(np.float64)
    outs = []
    for ax, h in zip(axes, dx):
        if _shape(f)[ax] < edge_order + 1:
            raise ShapeError("Shape of array too small to calculate a numerical gradient, at least "
                             "(edge_order + 1) elements are required.")
        out = _gradient_along(f, ax, h, edge_order, nd)
        outs.append(_astype(out, otype) if _dtype(out) != otype else out)
    return outs[0] if len(axes) == 1 else tuple(outs)


def _axes_in_order(axis: Any, nd: int) -> tuple:
    """NumPy's normalize_axis_tuple: the axes in the order given (gradient returns them so)."""
    axes = (axis,) if isinstance(axis, int) or hasattr(axis, "__index__") else tuple(axis)
    out = tuple(normalize_axis(operator.index(a), nd, "gradient")[0] for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError("gradient: repeated axis")
    return out


def _spacing(d: Any, n: int) -> Any:
    if np.ndim(_raw(d)) == 0:
        return d
    d = _arr(d)
    if _ndim(d) != 1:
        raise ShapeError("distances must be either scalars or 1d")
    if _shape(d)[0] != n:
        raise ShapeError("when 1d, distances must match the length of the corresponding dimension")
    if _dtype(d).kind in "iu":
        d = _astype(d, np.float64)
    h = getitem(d, slice(1, None)) - getitem(d, slice(None, -1))
    raw_h = _raw(h)
    if (raw_h == raw_h[0]).all():
        return getitem(h, 0)
    return h


def _gradient_along(f: Any, ax: int, h: Any, edge_order: int, nd: int) -> Any:
    def at(s: Any) -> Any:
        return getitem(f, (slice(None),) * ax + (s,))

    def along(v: Any) -> Any:            # a 1-D coefficient vector, broadcast along ``ax``
        return reshape(v, tuple(-1 if i == ax else 1 for i in range(nd)))

    uniform = np.ndim(_raw(h)) == 0
    if uniform:
        inner = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
    else:
        dx1, dx2 = getitem(h, slice(0, -1)), getitem(h, slice(1, None))
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        inner = along(a) * at(slice(None, -2)) + along(b) * at(slice(1, -1)) + along(c) * at(slice(2, None))
    if edge_order == 1:
        h0 = h if uniform else getitem(h, 0)
        hn = h if uniform else getitem(h, -1)
        first = (at(slice(1, 2)) - at(slice(0, 1))) / h0
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / hn
    else:
        if uniform:
            a, b, c = -1.5 / h, 2.0 / h, -0.5 / h
        else:
            dx1, dx2 = getitem(h, 0), getitem(h, 1)
            a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = -dx1 / (dx2 * (dx1 + dx2))
        first = a * at(slice(0, 1)) + b * at(slice(1, 2)) + c * at(slice(2, 3))
        if uniform:
            a, b, c = 0.5 / h, -2.0 / h, 1.5 / h
        else:
            dx1, dx2 = getitem(h, -2), getitem(h, -1)
            a = dx2 / (dx1 * (dx1 + dx2))
            b = -(dx2 + dx1) / (dx1 * dx2)
            c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(slice(-3, -2)) + b * at(slice(-2, -1)) + c * at(slice(-1, None))
    return concatenate([first, inner, last], axis=ax)


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product, as ``numpy.kron`` (arrays of different ndim: leading ones).

    >>> import chainrule as cr, numpy as np
    >>> cr.kron(np.array([1.0, 2.0]), np.array([1.0, 10.0]))
    array([ 1., 10.,  2., 20.])
    """
    a, b = _arr(a), _arr(b)
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return a * b
    nd = builtins.max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    ar = reshape(a, tuple(v for n in sa for v in (n, 1)))
    br = reshape(b, tuple(v for n in sb for v in (1, n)))
    return reshape(ar * br, tuple(p * q for p, q in zip(sa, sb)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None) -> Any:
    """The cross product of 3-vectors (or 2-vectors: the z component), as ``numpy.cross``.

    >>> import chainrule as cr, numpy as np
    >>> cr.cross(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    array([0., 0., 1.])
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _arr(a), _arr(b)
    if _ndim(a) < 1 or _ndim(b) < 1:
        raise ShapeError("At least one array has zero dimension")
    a = moveaxis(a, _axis1(axisa, _ndim(a), "cross (axisa)"), -1)
    b = moveaxis(b, _axis1(axisb, _ndim(b), "cross (axisb)"), -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of 3-dimensional "
                      "vectors instead. (deprecated in NumPy 2.0)", DeprecationWarning, stacklevel=2)
    shape = np.broadcast_shapes(_shape(a)[:-1], _shape(b)[:-1])
    dtype = np.promote_types(_dtype(a), _dtype(b))
    a, b = _astype(a, dtype), _astype(b, dtype)
    a0, a1, b0, b1 = (getitem(v, (Ellipsis, i)) for v, i in ((a, 0), (a, 1), (b, 0), (b, 1)))
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return broadcast_to(z, shape) if _shape(z) != shape else z
    if na == 2:
        b2 = getitem(b, (Ellipsis, 2))
        parts = [a1 * b2, -(a0 * b2), z]
    elif nb == 2:
        a2 = getitem(a, (Ellipsis, 2))
        parts = [-(a2 * b1), a2 * b0, z]
    else:
        a2, b2 = getitem(a, (Ellipsis, 2)), getitem(b, (Ellipsis, 2))
        parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z]
    cp = stack([broadcast_to(p, shape) for p in parts], axis=-1)
    return moveaxis(cp, -1, _axis1(axisc, len(shape) + 1, "cross (axisc)"))


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


def matvec(x1: Any, x2: Any, /) -> Any:
    """Matrix-vector products over the last axes, broadcast (the ufunc ``numpy.matvec``).

    >>> import chainrule as cr, numpy as np
    >>> cr.matvec(np.eye(2), np.array([1.0, 2.0]))
    array([1., 2.])
    """
    x1, x2 = _arr(x1), _arr(x2)
    s1, s2 = _shape(x1), _shape(x2)
    if len(s1) < 2 or len(s2) < 1 or s1[-1] != s2[-1]:
        raise ShapeError(f"matvec: needs (..., m, n) and (..., n) arrays, got shapes {s1} and {s2}")
    return getitem(matmul(x1, expand_dims(x2, -1)), (Ellipsis, 0))


def vecmat(x1: Any, x2: Any, /) -> Any:
    """Vector-matrix products, the vector conjugated (the ufunc ``numpy.vecmat``).

    >>> import chainrule as cr, numpy as np
    >>> cr.vecmat(np.array([1.0, 2.0]), np.eye(2))
    array([1., 2.])
    """
    x1, x2 = _arr(x1), _arr(x2)
    s1, s2 = _shape(x1), _shape(x2)
    if len(s1) < 1 or len(s2) < 2 or s1[-1] != s2[-2]:
        raise ShapeError(f"vecmat: needs (..., n) and (..., n, m) arrays, got shapes {s1} and {s2}")
    if _dtype(x1).kind == "c":
        x1 = conj(x1)
    return getitem(matmul(expand_dims(x1, -2), x2), (Ellipsis, 0, slice(None)))


def _cumulative(x: Any, fn: Callable, ufunc: Any, axis: Any, dtype: Any, out: Any, include_initial: bool,
                op: str) -> Any:
    no_out(op, out)
    x = _arr(x)
    if _ndim(x) == 0:
        x = reshape(x, (1,))
    if axis is None:
        if _ndim(x) >= 2:
            raise ShapeError("For arrays which have more than one dimension ``axis`` argument is required.")
        axis = 0
    axis = _axis1(axis, _ndim(x), op)
    want = np.dtype(dtype) if dtype is not None else ufunc.accumulate(np.zeros(1, dtype=_dtype(x))).dtype
    if dtype is not None:
        x = _astype(x, dtype)
    res = fn(x, axis=axis)
    if _dtype(res) != want:
        res = _astype(res, want)
    if include_initial:
        shape = list(_shape(res))
        shape[axis] = 1
        res = concatenate([np.full(shape, ufunc.identity, dtype=want), res], axis=axis)
    return res


def cumulative_sum(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                   include_initial: bool = False) -> Any:
    """Cumulative sum, optionally starting with 0, as ``numpy.cumulative_sum``.

    >>> import chainrule as cr, numpy as np
    >>> cr.cumulative_sum(np.array([1.0, 2.0]), include_initial=True)
    array([0., 1., 3.])
    """
    return _cumulative(x, cumsum, np.add, axis, dtype, out, include_initial, "cumulative_sum")


def cumulative_prod(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                    include_initial: bool = False) -> Any:
    """Cumulative product, optionally starting with 1, as ``numpy.cumulative_prod``.

    >>> import chainrule as cr, numpy as np
    >>> cr.cumulative_prod(np.array([2.0, 3.0]), include_initial=True)
    array([1., 2., 6.])
    """
    return _cumulative(x, cumprod, np.multiply, axis, dtype, out, include_initial, "cumulative_prod")


# ----- choices by value: NumPy chooses, chainrule gathers -----
def _matching(x: Any, y: Any, axis: int) -> Any:
    """Indices ``p`` along ``axis`` with ``take_along_axis(x, p) == y`` (y a rearrangement of x)."""
    ox = np.argsort(x, axis=axis, kind="stable")
    oy = np.argsort(y, axis=axis, kind="stable")
    p = np.empty_like(ox)
    np.put_along_axis(p, oy, ox, axis=axis)
    return p


def partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Any:
    """NumPy's partition (the k-th element in its sorted place), as a gather: differentiable.

    >>> import chainrule as cr, numpy as np
    >>> cr.partition(np.array([3.0, 1.0, 2.0]), 0)[0]
    np.float64(1.0)
    """
    if order is not None:
        raise DTypeError("partition: order= applies to structured arrays, which chainrule does not hold")
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _axis1(axis, _ndim(a), "partition")
    if is_batched(a):
        # NumPy's arrangement of each example (its own partition), computed on the whole batch
        data = whole_batch(a)
        ax = axis + data.ndim - _ndim(a)
        idx = _matching(data, np.partition(data, _raw(kth), axis=ax, kind=kind), ax)
        return _take_along(a, batched_like(idx, a), axis)
    raw = np.asarray(_raw(a))
    p = np.partition(raw, _raw(kth), axis=axis, kind=kind)
    return take_along_axis(a, _matching(raw, p, axis), axis)


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def _positions_of(flat: Any, values: Any) -> Any:
    """For each of ``values`` (unique values of ``flat``), an index of ``flat`` holding it (NaNs:
    the NaNs of ``flat`` in turn)."""
    order = np.argsort(flat, kind="stable")
    pos = np.searchsorted(flat[order], values, side="left")
    idx = order[np.minimum(pos, builtins.max(flat.size - 1, 0))]
    nan = np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, bool)
    if nan.any():
        nan_at = np.flatnonzero(np.isnan(flat))
        idx[nan] = nan_at[np.arange(nan.sum()) % nan_at.size]
    return idx


def _unique(x: Any, return_index: bool, return_inverse: bool, return_counts: bool, axis: Any,
            equal_nan: bool, sorted: bool) -> tuple:
    _value_dependent("unique", "how many values are unique differs by example: call it outside the "
                     "vmapped function, or compare with cr.sort(x) and its shifted copy")(x)
    x = _arr(x)
    raw = np.asarray(_raw(x))
    if axis is None or raw.ndim == 1:
        res = np.unique(raw, return_index, return_inverse, return_counts, axis=axis,
                        equal_nan=equal_nan, sorted=sorted)
        res = res if isinstance(res, tuple) else (res,)
        flat = raw.ravel()
        values = _gather(x, _positions_of(flat, res[0]) if res[0].size else np.zeros(0, np.intp))
        return (values,) + tuple(res[1:])
    res = np.unique(raw, True, return_inverse, return_counts, axis=axis, equal_nan=equal_nan, sorted=sorted)
    values = take(x, res[1], axis=operator.index(axis))
    return (values,) + ((res[1],) if return_index else ()) + tuple(res[2:])


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: Any = None, *, equal_nan: bool = True, sorted: bool = True) -> Any:
    """The unique elements (or slices along ``axis``), as ``numpy.unique``; the values are a gather
    (the gradient goes to an occurrence of each), indices and counts plain arrays.

    >>> import chainrule as cr, numpy as np
    >>> cr.unique(np.array([2.0, 1.0, 2.0]))
    array([1., 2.])
    """
    out = _unique(ar, return_index, return_inverse, return_counts, axis, equal_nan, sorted)
    return out[0] if len(out) == 1 else out


def unique_values(x: Any) -> Any:
    """The unique elements (order NumPy's: not necessarily sorted), as ``numpy.unique_values``.

    >>> import chainrule as cr, numpy as np
    >>> sorted(cr.unique_values(np.array([1.0, 1.0])).tolist())
    [1.0]
    """
    return _unique(x, False, False, False, None, False, False)[0]


def unique_counts(x: Any) -> UniqueCountsResult:
    """(values, counts), as ``numpy.unique_counts``.

    >>> import chainrule as cr, numpy as np
    >>> cr.unique_counts(np.array([1.0, 1.0])).counts
    array([2])
    """
    return UniqueCountsResult(*_unique(x, False, False, True, None, False, True))


def unique_inverse(x: Any) -> UniqueInverseResult:
    """(values, inverse_indices of x's shape), as ``numpy.unique_inverse``.

    >>> import chainrule as cr, numpy as np
    >>> cr.unique_inverse(np.array([2.0, 1.0])).inverse_indices
    array([1, 0])
    """
    return UniqueInverseResult(*_unique(x, False, True, False, None, False, True))


def unique_all(x: Any) -> UniqueAllResult:
    """(values, indices, inverse_indices, counts), as ``numpy.unique_all``.

    >>> import chainrule as cr, numpy as np
    >>> cr.unique_all(np.array([2.0, 1.0, 2.0])).indices
    array([1, 0])
    """
    return UniqueAllResult(*_unique(x, True, True, True, None, False, True))


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


# ----- in place: writes through Tensor.__setitem__ (version counters, view rebasing) -----
def _last_writes(flat: Any) -> Any:
    """Positions of the last write to each element (NumPy's assignments: the last one wins)."""
    if flat.size < 2:
        return np.arange(flat.size)
    _, first = np.unique(flat[::-1], return_index=True)
    return np.sort(flat.size - 1 - first)


def _write(op: str, a: Tensor, flat: Any, vals: Any) -> None:
    """``a.flat[flat] = vals`` (vals 1-D, one per index) through ``a.__setitem__``."""
    flat = np.asarray(flat, dtype=np.intp).ravel()
    if flat.size == 0:
        return
    keep = _last_writes(flat)
    if keep.size != flat.size:
        flat, vals = flat[keep], getitem(vals, keep)
    _setitem(op, a, np.unravel_index(flat, a.shape), vals)


def _setitem(op: str, a: Tensor, index: Any, vals: Any) -> None:
    try:
        a[index] = vals
    except GraphError as e:            # (a leaf that requires grad, a split output, ...): name the op
        raise GraphError(f"{op}: {e}") from None


def _numpy_in_place(op: str, a: Any, fn: Callable, *values: Any) -> bool:
    """Check the call on a copy (NumPy's errors and warnings); run it directly for an ndarray."""
    if isinstance(a, Tensor):
        fn(np.array(_stand_in(a), copy=True), *(_stand_in(v) for v in values))
        return False
    for v in values:
        role = graph_role(v) if isinstance(v, Tensor) else ""
        if role:
            caller, ours = numpy_caller(v)           # np.full_like(array, t) fills through copyto
            fix = f" ({caller} asked: use {ours}, which is differentiable)" if ours and caller else ""
            raise DTypeError(f"{op}: cannot write a tensor that {role} into a NumPy array "
                             f"(no derivative can flow through it); make the target a Tensor, or "
                             f"pass v.detach(){fix}")
    fn(a, *(_raw_tree(v) for v in values))
    return True


def _cycled(values: Any, n: int, positions: Any = None) -> Any:
    """``values.flat[positions % values.size]`` (default positions 0..n-1): NumPy's repetition."""
    values = _arr(values)
    size = math.prod(_shape(values))
    positions = np.arange(n) if positions is None else np.asarray(positions)
    return _gather(values, positions % size)


def put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    """``a.flat[ind] = v`` in place (v repeated as needed), as ``numpy.put``.

    >>> import chainrule as cr
    >>> x = cr.zeros(3); cr.put(x, [0, 2], [1.0, 2.0]); x
    tensor([1., 0., 2.])
    """
    if _numpy_in_place("put", a, lambda t, i, w: np.put(t, i, w, mode=mode), ind, v):
        return
    n, v = a.size, _arr(v)
    ind = np.asarray(_raw(ind)).ravel().astype(np.intp)
    if ind.size == 0 or math.prod(_shape(v)) == 0:
        return
    ind = ind % n if mode == "wrap" else np.clip(ind, 0, n - 1) if mode == "clip" else np.where(ind < 0, ind + n, ind)
    _write("put", a, ind, _cycled(v, ind.size))


def put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> None:
    """``arr`` with ``values`` written at ``indices`` along ``axis``, in place, as ``numpy.put_along_axis``.

    >>> import chainrule as cr, numpy as np
    >>> x = cr.zeros((2, 2)); cr.put_along_axis(x, np.array([[1], [0]]), 5.0, axis=1); x
    tensor([[0., 5.],
            [5., 0.]])
    """
    if _numpy_in_place("put_along_axis", arr, lambda t, i, w: np.put_along_axis(t, i, w, axis), indices, values):
        return
    indices = np.asarray(_raw(indices))
    if axis is None:
        shape, axis = (arr.size,), 0
    else:
        shape = arr.shape
        axis = _axis1(axis, len(shape), "put_along_axis")
    index = []
    for d, n in enumerate(shape):
        if d == axis:
            index.append(np.where(indices < 0, indices + n, indices))
        else:
            index.append(np.arange(n).reshape(tuple(-1 if i == d else 1 for i in range(indices.ndim))))
    index = np.broadcast_arrays(*index)
    flat = np.ravel_multi_index(tuple(index), shape)
    vals = ravel(broadcast_to(_arr(values), flat.shape))
    _write("put_along_axis", arr, flat, vals)


def putmask(a: Any, mask: Any, values: Any) -> None:
    """``a.flat[n] = values.flat[n % values.size]`` where ``mask.flat[n]``, in place, as ``numpy.putmask``.

    >>> import chainrule as cr, numpy as np
    >>> x = cr.zeros(3); cr.putmask(x, np.array([True, False, True]), [1.0, 2.0]); x
    tensor([1., 0., 1.])
    """
    if _numpy_in_place("putmask", a, lambda t, m, w: np.putmask(t, m, w), mask, values):
        return
    if is_batched(mask):        # which elements are written depends on the values: a where
        _setitem("putmask", a, Ellipsis, where(mask, reshape(_cycled(values, a.size), a.shape), a))
        return
    flat, values = np.flatnonzero(np.asarray(_raw(mask))), _arr(values)
    if flat.size and math.prod(_shape(values)):
        _write("putmask", a, flat, _cycled(values, flat.size, flat))


def place(arr: Any, mask: Any, vals: Any) -> None:
    """The elements where ``mask`` holds set to ``vals`` in turn (repeated), in place, as ``numpy.place``.

    >>> import chainrule as cr, numpy as np
    >>> x = cr.zeros(3); cr.place(x, np.array([True, False, True]), [1.0, 2.0]); x
    tensor([1., 0., 2.])
    """
    if _numpy_in_place("place", arr, lambda t, m, w: np.place(t, m, w), mask, vals):
        return
    if is_batched(mask):        # the k-th masked element takes vals[k]: k counted by a cumulative sum
        flat = ravel(mask)
        k = cumsum(flat, axis=0) - 1
        size = math.prod(_shape(vals))
        picked = getitem(ravel(_arr(vals)), k % size)
        _setitem("place", arr, Ellipsis, where(mask, reshape(picked, arr.shape), arr))
        return
    flat = np.flatnonzero(np.asarray(_raw(mask)))
    if flat.size:
        _write("place", arr, flat, _cycled(vals, flat.size))


def fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    """The main diagonal set to ``val`` (repeated) in place, as ``numpy.fill_diagonal``.

    >>> import chainrule as cr
    >>> x = cr.zeros((2, 2)); cr.fill_diagonal(x, 3.0); x
    tensor([[3., 0.],
            [0., 3.]])
    """
    if _numpy_in_place("fill_diagonal", a, lambda t, w: np.fill_diagonal(t, w, wrap), val):
        return
    shape = a.shape
    if len(shape) == 2:
        step, end = shape[1] + 1, None if wrap else shape[1] * shape[1]
    else:
        step, end = 1 + int(np.cumprod(shape[:-1]).sum()), None
    flat, val = np.arange(a.size)[:end:step], _arr(val)
    if flat.size and math.prod(_shape(val)):
        _write("fill_diagonal", a, flat, _cycled(val, flat.size))


def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """``src`` (broadcast) copied into ``dst`` where ``where`` holds, in place, as ``numpy.copyto``.

    >>> import chainrule as cr, numpy as np
    >>> x = cr.zeros(3); cr.copyto(x, 2.0, where=np.array([True, False, True])); x
    tensor([2., 0., 2.])
    """
    if _numpy_in_place("copyto", dst, lambda t, s, w: np.copyto(t, s, casting=casting, where=w), src, where):
        return
    if is_batched(where):       # which elements are copied depends on the values: a where
        _setitem("copyto", dst, Ellipsis, _select(where, broadcast_to(_arr(src), dst.shape), dst))
        return
    mask = np.broadcast_to(np.asarray(_raw(where), dtype=bool), dst.shape)
    src = broadcast_to(_arr(src), dst.shape)
    if mask.all():
        _setitem("copyto", dst, Ellipsis, src)
    elif mask.any():
        index = np.nonzero(mask)
        _setitem("copyto", dst, index, getitem(src, index))


_select = where                     # (copyto's argument ``where`` hides the op)


def copy(a: Any, order: str = "K", subok: bool = False) -> Any:
    """A copy, as ``numpy.copy`` (gradient 1); the dispatch target of ``np.copy(tensor)``."""
    return _copy(_arr(a))


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    """Cast, as ``numpy.astype`` (differentiable); the dispatch target of ``np.astype(tensor)``."""
    if device is not None and device != "cpu":
        raise ShapeError(f'Device not understood. Only "cpu" is allowed, but received: {device}')
    x = _arr(x)
    if _dtype(x) == np.dtype(dtype):
        return _copy(x) if copy else x
    return _astype(x, dtype)


# ----- index-valued results (no gradient by nature): NumPy's plain results -----
def argwhere(a: Any) -> Any:
    """Indices of the nonzero elements, one row each (``numpy.argwhere``)."""
    _value_dependent("argwhere", "use cr.where(a != 0, x, y) to select elementwise")(a)
    return np.argwhere(_raw(a))


def flatnonzero(a: Any) -> Any:
    """Flat indices of the nonzero elements (``numpy.flatnonzero``)."""
    _value_dependent("flatnonzero", "use cr.where(a != 0, x, y) to select elementwise")(a)
    return np.flatnonzero(_raw(a))


def argpartition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Any:
    """Indices that partition ``a`` (``numpy.argpartition``)."""
    return np.argpartition(_raw(a), _raw(kth), axis=axis, kind=kind, order=order)


def lexsort(keys: Any, axis: int = -1) -> Any:
    """Indices sorting by the last key, then the one before, ... (``numpy.lexsort``)."""
    return np.lexsort(_raw_tree(keys) if isinstance(keys, (list, tuple)) else _raw(keys), axis=axis)


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    """Insertion indices of ``v`` into sorted ``a`` (``numpy.searchsorted``)."""
    return np.searchsorted(_raw(a), _raw(v), side=side, sorter=_raw(sorter))


def digitize(x: Any, bins: Any, right: bool = False) -> Any:
    """The bin of each element (``numpy.digitize``)."""
    return np.digitize(_raw(x), _raw(bins), right=right)


def diag_indices_from(arr: Any) -> tuple:
    """Indices of the main diagonal of an (n, n, ...) array (``numpy.diag_indices_from``)."""
    return np.diag_indices_from(_raw(arr))


def tril_indices_from(arr: Any, k: int = 0) -> tuple:
    """Indices of the lower triangle (``numpy.tril_indices_from``)."""
    return np.tril_indices_from(_raw(arr), k)


def triu_indices_from(arr: Any, k: int = 0) -> tuple:
    """Indices of the upper triangle (``numpy.triu_indices_from``)."""
    return np.triu_indices_from(_raw(arr), k)


def mask_indices(n: int, mask_func: Callable, k: int = 0) -> tuple:
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero (``numpy.mask_indices``); chainrule's
    functions (cr.triu) work as ``mask_func``."""
    return np.nonzero(np.asarray(_raw(mask_func(np.ones((n, n), int), k))) != 0)


def ravel_multi_index(multi_index: Any, dims: Any, mode: str = "raise", order: str = "C") -> Any:
    """Flat indices from index arrays (``numpy.ravel_multi_index``)."""
    return np.ravel_multi_index(_raw_tree(tuple(multi_index)), dims, mode=mode, order=order)


def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple:
    """Index arrays from flat indices (``numpy.unravel_index``)."""
    return np.unravel_index(_raw(indices), shape, order=order)


def indices(dimensions: Any, dtype: Any = int, sparse: bool = False) -> Any:
    """The grid of indices of an array of shape ``dimensions`` (``numpy.indices``)."""
    return np.indices(dimensions, dtype=dtype, sparse=sparse)


def ix_(*args: Any) -> tuple:
    """Open-mesh index arrays from 1-D sequences (``numpy.ix_``)."""
    return np.ix_(*(_raw(a) for a in args))


def tri(N: int, M: Any = None, k: int = 0, dtype: Any = float, *, like: Any = None) -> Any:
    """Ones at and below the k-th diagonal, an ndarray (``numpy.tri``)."""
    return np.tri(N, M, k, dtype=dtype)


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


_SETS = ("how many values the set holds differs by example: call it outside the vmapped function, or "
         "test membership elementwise (cr.sum(a[:, None] == b, axis=1) > 0) and select with cr.where")


def _set_values(arrays: tuple, positions: Any) -> Any:
    """The values of a set operation, gathered from the flattened inputs at ``positions`` (indices
    into their concatenation): the gradient goes to the occurrence each value was taken from."""
    flat = [ravel(a) for a in arrays]
    return _gather(concatenate(flat) if len(flat) > 1 else flat[0], np.asarray(positions, dtype=np.intp))


def _first_positions(values: Any, pool: Any) -> Any:
    """Position in ``pool`` of the first occurrence of each of ``values`` (all present in pool)."""
    order = np.argsort(pool, kind="stable")
    return order[np.searchsorted(pool[order], values)]


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False) -> Any:
    """Sorted common values, as ``numpy.intersect1d``; differentiable: each value is gathered from
    ``ar1`` (its first occurrence), so ``ar2`` gets no gradient (the values are ar1's).

    >>> import chainrule as cr, numpy as np
    >>> cr.intersect1d(np.array([3.0, 1.0, 2.0]), np.array([2.0, 3.0]))
    array([2., 3.])
    """
    _value_dependent("intersect1d", _SETS)(ar1, ar2)
    a, b = np.asarray(_raw(ar1)), np.asarray(_raw(ar2))
    vals, i1, i2 = np.intersect1d(a, b, assume_unique=assume_unique, return_indices=True)
    out = _set_values((ar1,), i1)
    return (out, i1, i2) if return_indices else out


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Any:
    """Values of ``ar1`` not in ``ar2``, as ``numpy.setdiff1d``; gathered from ``ar1``.

    >>> import chainrule as cr, numpy as np
    >>> cr.setdiff1d(np.array([3.0, 1.0, 2.0]), np.array([2.0]))
    array([1., 3.])
    """
    _value_dependent("setdiff1d", _SETS)(ar1, ar2)
    a = np.asarray(_raw(ar1)).ravel()
    vals = np.setdiff1d(a, np.asarray(_raw(ar2)), assume_unique=assume_unique)
    return _set_values((ar1,), _first_positions(vals, a))


def union1d(ar1: Any, ar2: Any) -> Any:
    """Sorted values in either input, as ``numpy.union1d``; each gathered from its first occurrence
    in ``ar1`` then ``ar2``.

    >>> import chainrule as cr, numpy as np
    >>> cr.union1d(np.array([3.0, 1.0]), np.array([2.0, 1.0]))
    array([1., 2., 3.])
    """
    _value_dependent("union1d", _SETS)(ar1, ar2)
    pool = np.concatenate([np.asarray(_raw(ar1)).ravel(), np.asarray(_raw(ar2)).ravel()])
    vals = np.union1d(np.asarray(_raw(ar1)), np.asarray(_raw(ar2)))
    return _set_values((ar1, ar2), _first_positions(vals, pool))


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Any:
    """Sorted values in exactly one input, as ``numpy.setxor1d``; each gathered from where it occurs.

    >>> import chainrule as cr, numpy as np
    >>> cr.setxor1d(np.array([3.0, 1.0]), np.array([2.0, 1.0]))
    array([2., 3.])
    """
    _value_dependent("setxor1d", _SETS)(ar1, ar2)
    pool = np.concatenate([np.asarray(_raw(ar1)).ravel(), np.asarray(_raw(ar2)).ravel()])
    vals = np.setxor1d(np.asarray(_raw(ar1)), np.asarray(_raw(ar2)), assume_unique=assume_unique)
    return _set_values((ar1, ar2), _first_positions(vals, pool))


__all__ = ["intersect1d", "setdiff1d", "union1d", "setxor1d", "append", "insert", "delete", "atleast_3d",
           "column_stack", "row_stack", "dstack", "hsplit", "vsplit", "dsplit", "unstack", "block",
           "broadcast_arrays", "meshgrid", "choose", "select", "compress", "extract", "piecewise",
           "apply_along_axis", "apply_over_axes", "diag", "diagflat", "diff", "ediff1d", "gradient", "kron",
           "cross", "fliplr", "flipud", "rot90", "rollaxis", "resize", "trim_zeros", "vander", "matrix_transpose",
           "matvec", "vecmat", "cumulative_sum", "cumulative_prod", "partition", "unique", "unique_values",
           "unique_counts", "unique_inverse", "unique_all", "put", "put_along_axis", "putmask", "place",
           "fill_diagonal", "copyto", "argwhere", "flatnonzero", "argpartition", "lexsort", "searchsorted",
           "digitize", "diag_indices_from", "tril_indices_from", "triu_indices_from", "mask_indices",
           "ravel_multi_index", "unravel_index", "indices", "ix_", "tri", "shape", "ndim", "size",
           "may_share_memory", "shares_memory", "full", "full_like"]
_DISPATCHED = (*__all__, "copy", "astype")
NUMPY: dict = {getattr(np, name): globals()[name] for name in _DISPATCHED
               if hasattr(np, name) and name not in ("indices", "tri", "mask_indices", "row_stack", "full")}
# (np.row_stack is a plain wrapper of np.vstack: it does not dispatch)
