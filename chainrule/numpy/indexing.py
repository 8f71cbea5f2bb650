"""NumPy's indexing routines: choosing and selecting (``choose``, ``select``, ``compress``,
``extract``), the in-place writes (``put``, ``put_along_axis``, ``putmask``, ``place``,
``fill_diagonal``, ``copyto``) and the index-valued results (``unravel_index``, ``ix_``,
``tril_indices_from``, ...).

The selections are composites of getitem, where and stack. The in-place functions write through
``Tensor.__setitem__``, so version counters and view rebasing record them as any in-place op.
Index-valued functions accept tensors that require grad and return NumPy's plain results.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from chainrule.core._backend import ndarray, np
from chainrule.core._registry import no_out
from chainrule.core.batched import is_batched
from chainrule.core.errors import DTypeError, GraphError, ShapeError, numpy_caller
from chainrule.core.tensor import Tensor, graph_role
from chainrule.numpy._util import (
    _along_axis,
    _arr,
    _as_result,
    _axis1,
    _dtype,
    _gather,
    _raw,
    _raw_tree,
    _shape,
    _stand_in,
    _value_dependent,
)
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.elementwise import copy as _copy
from chainrule.ops.elementwise import where
from chainrule.ops.reduction import cumsum
from chainrule.ops.shape import broadcast_to, getitem, ravel, reshape, stack, take


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
    a, axis = _along_axis(a, axis, "compress")
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


def _numpy_copy(a: Any, order: str = "K", subok: bool = False) -> Any:
    """A copy, as ``numpy.copy`` (gradient 1); the dispatch target of ``np.copy(tensor)``."""
    return _copy(_arr(a))


def _numpy_astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    """Cast, as ``numpy.astype`` (differentiable); the dispatch target of ``np.astype(tensor)``."""
    if device is not None and device != "cpu":
        raise ShapeError(f'Device not understood. Only "cpu" is allowed, but received: {device}')
    x = _arr(x)
    if _dtype(x) == np.dtype(dtype):
        return _copy(x) if copy else x
    return _astype(x, dtype)


# ----- index-valued results (no gradient by nature): NumPy's plain results -----
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


__all__ = ["choose", "select", "compress", "extract", "put", "put_along_axis", "putmask", "place", "fill_diagonal",
           "copyto", "diag_indices_from", "tril_indices_from", "triu_indices_from", "mask_indices", "ravel_multi_index",
           "unravel_index", "indices", "ix_"]
NUMPY: dict = {**{getattr(np, name): globals()[name] for name in __all__ if name not in ("indices", "mask_indices")},
               np.copy: _numpy_copy, np.astype: _numpy_astype}     # NumPy's arguments, before the same primitives
