"""NumPy's set routines: ``unique`` and its array-API forms (``unique_values``, ``unique_counts``,
``unique_inverse``, ``unique_all``), ``intersect1d``, ``setdiff1d``, ``union1d`` and ``setxor1d``.

NumPy picks the values on the data and chainrule gathers them from the inputs, so the values are
NumPy's and the gradient goes to the occurrence each value was taken from.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, NamedTuple

from chainrule.core._backend import np
from chainrule.numpy._util import _arr, _gather, _raw, _value_dependent
from chainrule.ops.shape import concatenate, ravel, take


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


__all__ = ["intersect1d", "setdiff1d", "union1d", "setxor1d", "unique", "unique_values", "unique_counts",
           "unique_inverse", "unique_all"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__ if hasattr(np, name)}
