"""Private helpers shared by the chapters of NumPy's namespace (manipulation, indexing, sorting,
setops, creation_more, math_more, statistics, order_statistics, functional): argument reading
(tensors, nested lists, batched examples), gathers and small constant-result wrappers."""
from __future__ import annotations

import builtins
import math
import operator
import warnings
from typing import Any, Callable, Sequence

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION
from chainrule.core._registry import raw
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import is_batched
from chainrule.core.errors import VmapError
from chainrule.core.tensor import Tensor, wrap
from chainrule.core.tensor import wrap as _wrap
from chainrule.ops.elementwise import isnan, where
from chainrule.ops.reduction import argsort
from chainrule.ops.shape import getitem, ravel, reshape, stack, take_along_axis, transpose


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


def _along_axis(a: Any, axis: Any, op: str) -> tuple:
    """``(a, axis)`` read as NumPy's ``axis=`` of one axis: ``a`` as an array, flattened for None."""
    a = _arr(a)
    if axis is None:
        return ravel(a), 0
    return a, _axis1(axis, _ndim(a), op)


def _gather(x: Any, flat_index: Any) -> Any:
    """``x.flat[flat_index]`` (any shape of integer index): a differentiable gather."""
    return getitem(ravel(x), np.asarray(flat_index, dtype=np.intp))


def _ids(shape: tuple) -> Any:
    return np.arange(math.prod(shape), dtype=np.intp).reshape(shape)


def _as_result(y: Any, like: Sequence[Any]) -> Any:
    """A constant ndarray result as a Tensor when a Tensor came in."""
    return _wrap(y) if isinstance(y, ndarray) and _any_tensor(*like) else y


# ----- helpers of the statistics chapters -----
def _array(a: Any) -> Any:
    return a if isinstance(a, Tensor) else np.asarray(a)


def _wrap_like(data: Any, *like: Any) -> Any:
    """A constant result: a Tensor (never requiring grad) when an input is a Tensor."""
    return wrap(np.asarray(data)) if builtins.any(isinstance(x, Tensor) for x in like) else data


def _inexact(dtype: Any) -> bool:
    return dtype.kind in "fc" or dtype in LOW_PRECISION


def _nan_mask(a: Any) -> Any:
    """NaN positions of ``a`` (None when there are none, or for integer data); of a batched tensor,
    a batched mask (whether it holds anywhere is unknown)."""
    d = raw(a)
    if not _inexact(d.dtype):
        return None
    if is_batched(a):
        return isnan(a)
    mask = np.isnan(d)
    return mask if mask.any() else None


def _nan_where(bad: Any, out: Any, message: str, stacklevel: int) -> Any:
    """NaN where ``bad`` holds, with NumPy's RuntimeWarning if it holds anywhere (a batched ``bad``:
    the where always, without the warning, which would depend on the values)."""
    if is_batched(bad):
        return where(bad, np.nan, out)
    if np.any(bad):
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
        return where(bad, np.nan, out)
    return out


def _sorted(arr: Any) -> Any:
    """``arr`` sorted along its last axis by a stable sort (NaN last), differentiably (a gather)."""
    return take_along_axis(arr, argsort(arr, axis=-1), -1)


def _layout(a: Any, axis: Any, op: str) -> tuple:
    """``a`` with the reduced axes merged into one last axis: (array, batch shape, keepdims shape)."""
    shape = tuple(np.shape(raw(a)))
    nd = len(shape)
    axes = normalize_axis(axis, nd, op)
    axes = tuple(range(nd)) if axes is None else axes
    rest = tuple(i for i in range(nd) if i not in axes)
    batch = tuple(shape[i] for i in rest)
    n = math.prod(shape[i] for i in axes)
    arr = a
    if rest + axes != tuple(range(nd)):
        arr = transpose(arr, rest + axes)
    if len(axes) != 1:
        arr = reshape(arr, batch + (n,))
    keep = tuple(1 if i in axes else shape[i] for i in range(nd))
    return arr, batch, keep


def _q_first(x: Any, nb: int) -> Any:
    """batch + Q -> Q + batch."""
    nd = np.ndim(raw(x))
    if nb == 0 or nd == nb:
        return x
    return transpose(x, tuple(range(nb, nd)) + tuple(range(nb)))
