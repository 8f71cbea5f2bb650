"""NumPy's order statistics: ``median``, ``percentile``, ``quantile`` and their nan* forms
(every method of NumPy's, weights included), composites of a stable sort's gathers.

Gradients at the points where these functions branch (tested in tests/numpy/test_numpy_stats.py):

- **Order statistics** (median, percentile, quantile and their nan* forms) are linear in the
  sorted values: the gradient goes to the one or two elements whose ranks the method picks, with
  the method's interpolation weights (median of an even count: 1/2 to each middle element). Among
  tied values the element picked is the one a *stable* sort puts at that rank (the first
  occurrence in index order at the lowest tied rank, and so on); ``torch.quantile`` agrees where
  there are no ties. ``torch.median`` returns the lower middle element of an even count, NumPy
  (and chainrule) their mean, so the two differ by design. A slice holding a NaN (non-nan forms)
  gives NaN and gradient 0. In ``q`` the interpolating methods have the slope of the interpolation
  ((n - 1)(a[k+1] - a[k]) for 'linear'); the others are piecewise constant in q (gradient 0). A
  batched ``q`` is refused.
"""
from __future__ import annotations

import warnings
from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION
from chainrule.core._registry import constant_arg, in_graph, no_out, raw
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import is_batched
from chainrule.core.errors import VmapError
from chainrule.core.tensor import Tensor
from chainrule.numpy._util import _array, _inexact, _layout, _nan_mask, _nan_where, _q_first, _sorted, _wrap_like
from chainrule.ops.elementwise import astype, isnan, where
from chainrule.ops.reduction import argsort, cumsum, sum
from chainrule.ops.shape import expand_dims, getitem, reshape, take_along_axis


# ----- order statistics -----
def _key(data: Any) -> Any:
    """What order statistics sort: 16-bit floats as float32 (exact; NumPy sorts their NaNs last)."""
    return data.astype(np.float32) if data.dtype in LOW_PRECISION else data


def _stable_ties(data: Any, idx: Any, kset: Any) -> Any:
    """Make argpartition's picks those of a stable sort: among tied values, the k-th rank goes to
    the (k - #smaller)-th occurrence in index order."""
    vals = np.take_along_axis(data, idx, -1)
    for j, k in enumerate(kset):
        vj = vals[..., j:j + 1]
        eq = data == vj
        cnt = np.count_nonzero(eq, axis=-1)
        many = cnt > 1
        if not many.any():
            continue
        r = k - (data < vj).sum(-1)
        pos = np.argmax(np.cumsum(eq, -1) > r[..., None], -1)
        idx[..., j] = np.where(many, pos, idx[..., j])
    return idx


def _ranked(arr: Any, ranks: Any, batch: tuple) -> Any:
    """The elements of rank ``ranks`` (ints, shape Q, the same in every row) along ``arr``'s last
    axis, in stable-sort order; shape Q + batch, differentiable (a gather)."""
    if is_batched(arr):
        out = getitem(_sorted(arr), (Ellipsis, ranks))
        return out if np.ndim(ranks) == 0 else _q_first(out, len(batch))
    data = _key(raw(arr))
    kset = np.unique(ranks)
    if kset.size > 8:
        idx = np.argsort(data, -1, kind="stable")[..., kset]
    else:
        idx = _stable_ties(data, np.argpartition(data, kset, axis=-1)[..., kset], kset)
    vals = take_along_axis(arr, idx, -1)                          # batch + (K,)
    if kset.size == 1 and np.ndim(ranks) == 0:
        return getitem(vals, (Ellipsis, 0))
    out = getitem(vals, (Ellipsis, np.searchsorted(kset, ranks)))   # batch + Q
    return _q_first(out, len(batch))


def _ranked_rows(arr: Any, ranks: Any, batch: tuple) -> Any:
    """As ``_ranked`` with ranks that differ per row (shape Q + batch): a stable sort."""
    if is_batched(arr, ranks):
        # batched ranks (maybe float-valued): each picked by a comparison with the positions
        n = np.shape(raw(arr))[-1]
        hit = expand_dims(ranks, -1) == np.arange(n)                 # Q + batch + (n,)
        return sum(where(hit, _sorted(arr), 0), -1)
    order = np.argsort(_key(raw(arr)), -1, kind="stable")        # NaN last
    nb = len(batch)
    qshape = np.shape(ranks)[:np.ndim(ranks) - nb]
    r2 = np.moveaxis(np.reshape(ranks, (-1,) + batch), 0, -1)       # batch + (prod Q,)
    idx = np.take_along_axis(order, r2, -1)
    vals = reshape(take_along_axis(arr, idx, -1), batch + qshape)
    return _q_first(vals, nb)


def _int(x: Any) -> Any:
    """Integer-valued ``x`` as intp; a tensor (batched counts) stays as it is, float-valued."""
    return x if isinstance(x, Tensor) else np.asarray(x).astype(np.intp)


def _boundaries(index: Any, condition: Any) -> Any:
    previous = np.floor(index)
    res = _int(np.where(condition(index - previous, index), previous, previous + 1))
    return np.maximum(res, 0)


_ALPHA_BETA = {"interpolated_inverted_cdf": (0, 1), "hazen": (0.5, 0.5), "weibull": (0, 0),
               "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0)}


METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
           "hazen", "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher",
           "midpoint", "nearest")


def _virtual_index(n: Any, q: Any, method: str) -> Any:
    """NumPy's virtual index of quantile ``q`` among ``n`` sorted values (integers: no interpolation)."""
    if method == "inverted_cdf":
        return _boundaries(n * q - 1, lambda g, i: g == 0)
    if method == "closest_observation":
        return _boundaries(n * q - 1 - 0.5, lambda g, i: (g == 0) & (np.floor(i) % 2 == 1))
    if method == "averaged_inverted_cdf":
        return n * q - 1
    if method == "linear":
        return (n - 1) * q
    if method == "lower":
        return _int(np.floor((n - 1) * q))
    if method == "higher":
        return _int(np.ceil((n - 1) * q))
    if method == "nearest":
        return _int(np.around((n - 1) * q))
    if method == "midpoint":
        return 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))
    alpha, beta = _ALPHA_BETA[method]
    return n * q + (alpha + q * (1 - alpha - beta)) - 1


def _neighbours(vi: Any, n: Any, method: str) -> tuple:
    """NumPy's ``_get_indexes`` and ``_get_gamma``: (previous rank, next rank, gamma)."""
    prev = np.floor(vi)
    nxt = prev + 1
    above = vi >= n - 1
    prev, nxt = np.where(above, -1, prev), np.where(above, -1, nxt)
    below = vi < 0
    prev, nxt = np.where(below, 0, prev), np.where(below, 0, nxt)
    bad = np.isnan(vi)
    prev, nxt = np.where(bad, -1, prev), np.where(bad, -1, nxt)
    gamma = vi - prev
    if method == "averaged_inverted_cdf":
        gamma = np.where(gamma == 0, 0.5, 1.0)
    elif method == "midpoint":
        gamma = np.where(vi % 1 == 0, 0.0, 0.5)
    if isinstance(gamma, Tensor):
        gamma = astype(gamma, vi.dtype)
    else:
        gamma = np.asarray(gamma, dtype=np.asarray(vi).dtype)
    prev, nxt = _int(prev), _int(nxt)
    return np.where(prev < 0, n - 1, prev), np.where(nxt < 0, n - 1, nxt), gamma


def _lerp(a: Any, b: Any, t: Any, omt: Any, upper: Any) -> Any:
    """NumPy's ``_lerp``: a + (b - a) t, or b - (b - a)(1 - t) where t >= 0.5 (``upper``)."""
    d = b - a
    if np.ndim(upper) == 0 and not isinstance(upper, Tensor):
        return b - d * omt if upper else a + d * t
    return where(upper, b - d * omt, a + d * t)


def _float_values(x: Any) -> Any:
    return x if _inexact(raw(x).dtype) else astype(x, np.float64)


def _quantile(a: Any, q: Any, axis: Any, method: str, keepdims: bool, weights: Any, weak: bool,
              nan: bool, op: str, qt: Any = None) -> Any:
    if method not in METHODS:
        raise ValueError(f"{op}: {method!r} is not a valid method. Use one of: {METHODS}")
    a = _array(a)
    if raw(a).dtype.kind == "c":
        raise TypeError(f"{op}: a must be an array of real numbers")
    q = np.asarray(q)
    if q.ndim > 2:
        raise ValueError(f"{op}: q must be a scalar or 1d")
    arr, batch, keep = _layout(a, axis, op)
    n = raw(arr).shape[-1]
    if weights is not None:
        out = _weighted_quantile(arr, q, weights, a, axis, batch, op)
        has_nan = _any_nan(arr)
        cnt = None
    else:
        mask = _nan_mask(arr) if nan else None
        if mask is not None:
            cnt = n - (sum(mask, -1) if isinstance(mask, Tensor) else mask.sum(-1))     # batch
            nb = (1,) * len(batch)
            vi = _virtual_index(cnt, q.reshape(q.shape + nb), method)
            has_nan = None
        else:
            cnt = None
            vi = np.asarray(_virtual_index(n, q, method))
            has_nan = _any_nan(arr)
        out = _interpolate(arr, vi, cnt if cnt is not None else n, method, batch, weak, cnt is not None, qt)
    if cnt is not None:
        out = _nan_where(cnt == 0, out, "All-NaN slice encountered", 3)
    if has_nan is not None and (is_batched(has_nan) or has_nan.any()):
        out = where(has_nan, np.nan, out)
    return reshape(out, q.shape + keep) if keepdims else out


def _any_nan(arr: Any) -> Any:
    """Whether each row (last axis) of ``arr`` holds a NaN (None for integer data)."""
    if not _inexact(raw(arr).dtype):
        return None
    return sum(isnan(arr), -1) > 0 if is_batched(arr) else np.isnan(raw(arr)).any(-1)


_DISCRETE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")


def _index_slope(n: Any, method: str) -> Any:
    """d(virtual index)/dq of the methods whose weight gamma moves with q (None for the others:
    their result is piecewise constant in q, its derivative 0)."""
    if method == "linear":
        return n - 1
    if method in _ALPHA_BETA:
        alpha, beta = _ALPHA_BETA[method]
        return n + (1 - alpha - beta)
    return None


def _interpolate(arr: Any, vi: Any, n: Any, method: str, batch: tuple, weak: bool, rows: bool,
                 qt: Any = None) -> Any:
    gather = _ranked_rows if rows else _ranked
    if method in _DISCRETE:                                        # no interpolation
        return gather(arr, np.where(vi < 0, n - 1, np.minimum(vi, np.maximum(n - 1, 0))), batch)
    prev, nxt, gamma = _neighbours(vi, n, method)
    if rows:
        prev, nxt = np.maximum(prev, 0), np.maximum(nxt, 0)         # all-NaN rows: replaced by NaN later
    dtype = raw(arr).dtype
    vals = _float_values(gather(arr, np.stack([prev, nxt]), batch))
    lo, hi = getitem(vals, 0), getitem(vals, 1)
    if not rows:
        gamma = gamma.reshape(gamma.shape + (1,) * len(batch))
    if weak and _inexact(dtype):                                    # NumPy's weak Python float gamma
        t, omt = gamma.astype(dtype), (1 - gamma).astype(dtype)
    else:
        t, omt = gamma, 1 - gamma
    slope = None if qt is None else _index_slope(n, method)
    if slope is not None:
        # the same values, with gamma's derivative in q: the slope (clamped ends: lo == hi, so 0)
        qs = reshape(qt, np.shape(raw(qt)) + (1,) * len(batch))
        dt = (qs - qs.detach()) * slope
        t, omt = t + dt, omt - dt
    return _lerp(lo, hi, t, omt, gamma >= 0.5)


def _weights_layout(weights: Any, a: Any, axis: Any, op: str) -> Any:
    """NumPy's ``_weights_are_valid``: weights of a's shape, or 1-D along ``axis``."""
    w = np.asarray(raw(weights))
    shape = np.shape(raw(a))
    if w.shape != shape:
        if axis is None:
            raise TypeError(f"{op}: Axis must be specified when shapes of a and weights differ.")
        axes = normalize_axis(axis, len(shape), op)
        if w.shape != tuple(shape[ax] for ax in axes):
            raise ValueError(f"{op}: Shape of weights must be consistent with shape of a along specified axis.")
        w = np.broadcast_to(w.reshape(tuple(s if ax in axes else 1 for ax, s in enumerate(shape))), shape)
    return w


def _weighted_quantile(arr: Any, q: Any, weights: Any, a: Any, axis: Any, batch: tuple, op: str) -> Any:
    """method='inverted_cdf' with weights: the first sorted element whose weight CDF reaches q."""
    w = _weights_layout(weights, a, axis, op)
    if np.any(w < 0):
        raise ValueError(f"{op}: Weights must be non-negative.")
    w = raw(_layout(w, axis, op)[0])
    if is_batched(arr):
        return _weighted_quantile_batched(arr, q, w, batch)
    data = _key(raw(arr))
    n = data.shape[-1]
    order = np.argsort(data, -1, kind="stable")
    ws = np.take_along_axis(w, order, -1)
    cdf = ws.cumsum(-1, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        cdf = cdf / cdf[..., -1:]
    if np.isnan(cdf[..., -1]).any():
        raise ValueError(f"{op}: Weights included NaN, inf or were all zero.")
    if q.dtype.kind == "f":
        cdf = cdf.astype(q.dtype)
    idx = np.empty(batch + (q.size,), dtype=np.intp)
    for kk in np.ndindex(batch):
        c = cdf[kk]
        if c[0] == 0:
            c = np.where(c == 0, -1, c)
        pos = np.minimum(np.searchsorted(c, q.ravel(), side="left"), n - 1)
        idx[kk] = order[kk][pos]
    vals = reshape(take_along_axis(arr, idx, -1), batch + q.shape)
    return _q_first(vals, len(batch))


def _weighted_quantile_batched(arr: Any, q: Any, w: Any, batch: tuple) -> Any:
    """``_weighted_quantile`` of a batched ``arr`` (constant weights): the CDF's positions counted
    with comparisons, not searched (weights all zero or NaN give NaN instead of the ValueError)."""
    order = argsort(arr, axis=-1)
    ws = astype(take_along_axis(w, order, -1), np.float64)
    cdf = cumsum(ws, -1)
    cdf = cdf / getitem(cdf, (Ellipsis, slice(-1, None)))
    if q.dtype.kind == "f":
        cdf = astype(cdf, q.dtype)
    cdf = where(cdf == 0, -1, cdf)              # NumPy's: leading zero weights are never picked
    n = np.shape(raw(arr))[-1]
    nb = len(batch)
    qs = q.reshape(q.shape + (1,) * (nb + 1))
    pos = np.minimum(sum(cdf < qs, -1), n - 1)      # Q + batch: searchsorted(cdf, q, "left")
    return _ranked_rows(arr, pos, batch)


def _check_q(q: Any, message: str, op: str) -> Any:
    q = np.asarray(raw(q))
    if q.size and not (np.min(q) >= 0 and np.max(q) <= 1):
        raise ValueError(f"{op}: {message}")
    return q


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None,
             interpolation: Any = None) -> Any:
    """Quantiles as ``numpy.quantile`` (all 13 methods; ``weights`` with ``inverted_cdf``); the
    gradient goes to the one or two order statistics used (see the module docstring for ties),
    and to a tensor ``q`` (the interpolation's slope).

    >>> import chainrule as cr
    >>> x = cr.tensor([3.0, 1.0, 4.0, 2.0], requires_grad=True)
    >>> cr.quantile(x, 0.5).backward(); x.grad
    tensor([0.5, 0. , 0. , 0.5])
    """
    return _quantile_entry(a, q, axis, out, method, keepdims, weights, interpolation, 1, False, "quantile")


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None,
               interpolation: Any = None) -> Any:
    """Percentiles as ``numpy.percentile``: ``quantile`` of ``q / 100``."""
    return _quantile_entry(a, q, axis, out, method, keepdims, weights, interpolation, 100, False, "percentile")


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None,
                interpolation: Any = None) -> Any:
    """``quantile`` ignoring NaNs (``numpy.nanquantile``); NaN entries get gradient 0."""
    return _quantile_entry(a, q, axis, out, method, keepdims, weights, interpolation, 1, True, "nanquantile")


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None,
                  interpolation: Any = None) -> Any:
    """``percentile`` ignoring NaNs (``numpy.nanpercentile``)."""
    return _quantile_entry(a, q, axis, out, method, keepdims, weights, interpolation, 100, True,
                           "nanpercentile")


def _quantile_entry(a: Any, q: Any, axis: Any, out: Any, method: str, keepdims: bool, weights: Any,
                    interpolation: Any, scale: int, nan: bool, op: str) -> Any:
    no_out(op, out)
    if interpolation is not None:
        raise TypeError(f"{op}: interpolation= was renamed method= in NumPy 1.22; pass method={interpolation!r}")
    weak = type(q) in (int, float)
    if isinstance(q, Tensor) and q._level:
        constant_arg(q, op, "q")                    # refused: a batched q
    qt = (q / scale if scale != 1 else q) if in_graph(q) else None     # differentiated through gamma
    q = raw(q)
    if scale == 100:
        q = _check_q(np.true_divide(q, 100), "Percentiles must be in the range [0, 100]", op)
    else:
        q = _check_q(q, "Quantiles must be in the range [0, 1]", op)
    if weights is not None:
        if method != "inverted_cdf":
            raise ValueError(f"{op}: Only method 'inverted_cdf' supports weights. Got: {method}.")
        if nan and is_batched(a):
            raise VmapError(f"{op} with weights inside cr.vmap: chainrule cannot drop the NaNs there (which "
                            f"entries remain depends on the values); call quantile on NaN-free data")
        if nan and _nan_mask(a) is not None:
            raise ValueError(f"{op}: weights with NaN entries are not supported in chainrule; drop the NaNs "
                             f"(and their weights) and call quantile")
    return _quantile(a, q, axis, method, keepdims, weights, weak, nan, op, qt)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    """Median as ``numpy.median`` (the mean of the two middle values of an even count, which share
    the gradient 1/2 each; ``torch.median`` returns the lower one instead).

    >>> import chainrule as cr
    >>> cr.median(cr.tensor([[1.0, 5.0, 2.0], [4.0, 3.0, 6.0]]), axis=1)
    tensor([2., 4.])
    """
    no_out("median", out)
    return _median(a, axis, keepdims, False, "median")


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """``median`` ignoring NaNs (``numpy.nanmedian``); all-NaN slices give NaN (RuntimeWarning) and
    gradient 0."""
    no_out("nanmedian", out)
    return _median(a, axis, keepdims, True, "nanmedian")


def _median(a: Any, axis: Any, keepdims: bool, nan: bool, op: str) -> Any:
    a = _array(a)
    arr, batch, keep = _layout(a, axis, op)
    data = raw(arr)
    n = data.shape[-1]
    inexact = _inexact(data.dtype)
    if n == 0:
        warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=3)
        dtype = data.dtype if inexact else np.dtype(np.float64)
        res = _wrap_like(np.full(batch, np.nan, dtype=dtype), a)
        return reshape(res, keep) if keepdims else res
    mask = _nan_mask(arr) if nan else None
    cnt = None
    if mask is not None:
        cnt = n - (sum(mask, -1) if isinstance(mask, Tensor) else mask.sum(-1))
        ranks = np.stack([np.maximum((cnt - 1) // 2, 0), cnt // 2])
        vals = _ranked_rows(arr, ranks, batch)
    else:
        vals = _ranked(arr, np.array([(n - 1) // 2, n // 2]), batch)
    if data.dtype in LOW_PRECISION or data.dtype == np.float16:
        out = astype((astype(getitem(vals, 0), np.float32) + astype(getitem(vals, 1), np.float32)) / 2,
                     data.dtype)
    else:
        vals = _float_values(vals)
        out = (getitem(vals, 0) + getitem(vals, 1)) / 2
    if cnt is not None:
        out = _nan_where(cnt == 0, out, "All-NaN slice encountered", 3)
    elif inexact and not nan:
        has_nan = _any_nan(arr)
        if is_batched(has_nan) or has_nan.any():
            out = where(has_nan, np.nan, out)
    return reshape(out, keep) if keepdims else out


__all__ = ["median", "percentile", "quantile", "nanmedian", "nanpercentile", "nanquantile"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__ if hasattr(np, name)}
