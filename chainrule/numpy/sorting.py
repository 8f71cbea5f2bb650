"""NumPy's sorting, searching and counting routines beyond the op table's sort/argsort:
``partition`` (NumPy chooses, chainrule gathers, so the gradient flows to the elements picked) and
the index-valued ``argpartition``, ``lexsort``, ``searchsorted``, ``digitize``, ``argwhere`` and
``flatnonzero`` (NumPy's plain results; tensors that require grad are accepted)."""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core.batched import batched_like, is_batched, whole_batch
from chainrule.core.errors import DTypeError
from chainrule.numpy._util import _along_axis, _ndim, _raw, _raw_tree, _take_along, _value_dependent
from chainrule.ops.shape import take_along_axis


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
    a, axis = _along_axis(a, axis, "partition")
    if is_batched(a):
        # NumPy's arrangement of each example (its own partition), computed on the whole batch
        data = whole_batch(a)
        ax = axis + data.ndim - _ndim(a)
        idx = _matching(data, np.partition(data, _raw(kth), axis=ax, kind=kind), ax)
        return _take_along(a, batched_like(idx, a), axis)
    raw = np.asarray(_raw(a))
    p = np.partition(raw, _raw(kth), axis=axis, kind=kind)
    return take_along_axis(a, _matching(raw, p, axis), axis)


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


__all__ = ["partition", "argwhere", "flatnonzero", "argpartition", "lexsort", "searchsorted", "digitize"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__ if hasattr(np, name)}
