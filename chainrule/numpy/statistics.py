"""NumPy's statistics and signal functions: order statistics, NaN-ignoring reductions, covariance,
convolution, interpolation, integration, histograms and spaced grids, with NumPy's arguments.

All are composites of chainrule ops except one primitive, ``correlate`` (a window of the
non-conjugating cross-correlation, direct or by FFT), on which ``convolve`` and ``correlate`` run.

Gradients at the points where these functions branch (stated once here, tested in
tests/ops/test_numpy_stats.py):

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
- **cov** is differentiable in ``aweights``; ``fweights`` (integer counts) requiring grad is refused.
- **nan* reductions**: NaN entries get gradient 0. An all-NaN slice gives NumPy's value (nansum 0,
  nanprod 1; nanmean, nanvar, nanstd, nanmax, nanmin, nanmedian, nanquantile, nanpercentile NaN with
  NumPy's RuntimeWarning; nanargmax/nanargmin raise ValueError) and gradient 0. nanmax/nanmin split
  the gradient evenly among tied extremes, as ``amax``.
- **interp** is differentiable in ``x`` (the slope of the segment on the right of x; of the last
  segment at ``xp[-1]``; 0 outside [xp[0], xp[-1]]), in ``fp``, ``left`` and ``right``, and, as a
  bonus, in ``xp`` (through the segment's end points; the segment choice is piecewise constant).
- **histogram/bincount**: counts have no gradient; with ``weights`` the result is a differentiable
  sum of weights per bin. Bin edges are differentiable in what sets them: the data's min and max
  (no ``range``), ``range``, or ``bins`` given as the edges.
- **linspace/logspace/geomspace** are differentiable in their end points (and ``base``).
"""
from __future__ import annotations

import builtins
import math
import operator
import warnings
from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, get_default_dtype
from chainrule.core._registry import apply, constant_arg, defprim, in_graph, no_out, raw
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import is_batched
from chainrule.core.errors import ShapeError, VmapError
from chainrule.core.tensor import Tensor, wrap
from chainrule.ops.elementwise import (
    _abs2,
    _zero_at_zero,
    astype,
    clip,
    conj,
    floor,
    isfinite,
    isnan,
    log10,
    mod,
    power,
    sqrt,
    where,
)
from chainrule.ops.elementwise import sign as _sign
from chainrule.ops.linalg import matmul
from chainrule.ops.reduction import amax, amin, argmax, argmin, argsort, cumprod, cumsum, prod, sum
from chainrule.ops.shape import (
    concatenate,
    diagonal,
    expand_dims,
    flip,
    getitem,
    index_put,
    moveaxis,
    ravel,
    real,
    reshape,
    scatter_add,
    squeeze,
    take_along_axis,
    transpose,
)


def _arr(a: Any) -> Any:
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
    a = _arr(a)
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
    a = _arr(a)
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


# ----- simple reductions -----
def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Range ``max - min`` along ``axis`` (``numpy.ptp``); tied extremes share the gradient.

    >>> import chainrule as cr
    >>> cr.ptp(cr.tensor([[1.0, 4.0], [2.0, 8.0]]), axis=1)
    tensor([3., 6.])
    """
    no_out("ptp", out)
    a = _arr(a)
    return amax(a, axis, keepdims=keepdims) - amin(a, axis, keepdims=keepdims)


def _replaced(a: Any, value: float) -> tuple:
    """``a`` with NaNs replaced by ``value`` (gradient 0 there), and the NaN mask (None: none)."""
    a = _arr(a)
    mask = _nan_mask(a)
    return (a, None) if mask is None else (where(mask, value, a), mask)


def _count_ok(mask: Any, axis: Any, keepdims: bool) -> Any:
    if isinstance(mask, Tensor):
        return sum(~mask, axis, keepdims=keepdims)
    return np.sum(~mask, axis=axis, dtype=np.intp, keepdims=keepdims)


def _divide_by_count(tot: Any, cnt: Any) -> Any:
    """NumPy's ``_divide_by_count``: the quotient keeps ``tot``'s (inexact) dtype; 0/0 is NaN,
    replaced afterwards (so its gradient is 0)."""
    dtype = raw(tot).dtype
    safe = np.where(cnt == 0, 1, cnt)
    out = tot / safe.astype(np.float64)
    if _inexact(dtype) and raw(out).dtype != dtype:
        out = astype(out, dtype)
    return out


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Sum treating NaN as 0 (``numpy.nansum``); NaN entries get gradient 0.

    >>> import chainrule as cr
    >>> cr.nansum(cr.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    no_out("nansum", out)
    return sum(_replaced(a, 0.0)[0], axis, dtype, keepdims=keepdims)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Product treating NaN as 1 (``numpy.nanprod``); NaN entries get gradient 0."""
    no_out("nanprod", out)
    x = _replaced(a, 1.0)[0]
    return prod(x, axis, dtype, keepdims=keepdims)


def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum treating NaN as 0 (``numpy.nancumsum``)."""
    no_out("nancumsum", out)
    x = _replaced(a, 0.0)[0]
    return cumsum(x, axis, dtype)


def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product treating NaN as 1 (``numpy.nancumprod``)."""
    no_out("nancumprod", out)
    x = _replaced(a, 1.0)[0]
    return cumprod(x, axis, dtype)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Mean ignoring NaNs (``numpy.nanmean``); all-NaN slices: NaN (RuntimeWarning), gradient 0."""
    no_out("nanmean", out)
    x, mask = _replaced(a, 0.0)
    if mask is None:
        return _mean_like(x, axis, dtype, keepdims)
    cnt = _count_ok(mask, normalize_axis(axis, mask.ndim, "nanmean"), keepdims)
    avg = _divide_by_count(sum(x, axis, dtype, keepdims=keepdims), cnt)
    return _nan_where(cnt == 0, avg, "Mean of empty slice", 2)


def _mean_like(x: Any, axis: Any, dtype: Any, keepdims: bool) -> Any:
    """``numpy.mean``: the sum in ``dtype`` (float64 for integers) over the count."""
    d = raw(x).dtype
    if dtype is None and not _inexact(d):
        dtype = np.float64
    nd = np.ndim(raw(x))
    axes = normalize_axis(axis, nd, "nanmean")
    shape = np.shape(raw(x))
    n = math.prod(shape) if axes is None else math.prod(shape[i] for i in axes)
    tot = sum(x, axis, dtype, keepdims=keepdims)
    return _divide_by_count(tot, np.asarray(n))


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False) -> Any:
    """Variance ignoring NaNs (``numpy.nanvar``); NaN entries and slices with no degrees of freedom
    (NaN, RuntimeWarning) get gradient 0."""
    no_out("nanvar", out)
    return _nanvar(a, axis, dtype, ddof, keepdims, "nanvar")


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False) -> Any:
    """Standard deviation ignoring NaNs (``numpy.nanstd``); gradient 0 where it is 0, as ``std``."""
    no_out("nanstd", out)
    return _zero_at_zero(sqrt, _nanvar(a, axis, dtype, ddof, keepdims, "nanstd"))


def _nanvar(a: Any, axis: Any, dtype: Any, ddof: int, keepdims: bool, op: str) -> Any:
    x, mask = _replaced(a, 0.0)
    d = raw(x)
    if dtype is None and not _inexact(d.dtype):
        dtype = np.float64
    axes = normalize_axis(axis, d.ndim, op)
    if mask is None:
        mask = np.zeros(d.shape, dtype=bool)
    cnt = _count_ok(mask, axes, True)
    avg = _divide_by_count(sum(x, axis, dtype, keepdims=True), cnt)
    centered = x - avg
    if is_batched(mask) or mask.any():
        # NumPy's masked path subtracts in place: the deviations keep the data's dtype
        if raw(centered).dtype != d.dtype and _inexact(d.dtype):
            centered = astype(centered, d.dtype)
        centered = where(mask, 0.0, centered)
    var = sum(_abs2(centered), axis, dtype, keepdims=keepdims)
    if not keepdims:
        cnt = _count_ok(mask, axes, False)
    dof = cnt - ddof
    bad = dof <= 0
    var = _divide_by_count(var, np.where(bad, 1, dof))
    return _nan_where(bad, var, "Degrees of freedom <= 0 for slice.", 3)


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Maximum ignoring NaNs (``numpy.nanmax``); all-NaN slices: NaN (RuntimeWarning), gradient 0."""
    no_out("nanmax", out)
    return _nanextreme(a, axis, keepdims, amax, -np.inf)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Minimum ignoring NaNs (``numpy.nanmin``); all-NaN slices: NaN (RuntimeWarning), gradient 0."""
    no_out("nanmin", out)
    return _nanextreme(a, axis, keepdims, amin, np.inf)


def _nanextreme(a: Any, axis: Any, keepdims: bool, fn: Any, fill: float) -> Any:
    x, mask = _replaced(a, fill)
    res = fn(x, axis, keepdims=keepdims)
    if mask is not None:
        axes = normalize_axis(axis, np.ndim(raw(mask)), "nanmax")
        allnan = _count_ok(mask, axes, keepdims) == 0
        res = _nan_where(allnan, res, "All-NaN slice encountered", 3)
    return res


def nanargmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the maximum ignoring NaNs (``numpy.nanargmax``; integer, no gradient)."""
    no_out("nanargmax", out)
    return _nanarg(a, axis, keepdims, argmax, -np.inf, "nanargmax")


def nanargmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the minimum ignoring NaNs (``numpy.nanargmin``; integer, no gradient)."""
    no_out("nanargmin", out)
    return _nanarg(a, axis, keepdims, argmin, np.inf, "nanargmin")


def _nanarg(a: Any, axis: Any, keepdims: bool, fn: Any, fill: float, op: str) -> Any:
    a = _arr(a)
    mask = _nan_mask(a)
    if mask is not None:
        if not is_batched(mask) and np.any(np.all(mask, axis=axis)):
            raise ValueError(f"{op}: All-NaN slice encountered")
        a = where(mask, fill, a)
    return fn(a, axis, keepdims=keepdims)


# ----- covariance -----
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
        fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> Any:
    """Covariance matrix, as ``numpy.cov`` (composite; differentiable in ``aweights`` too;
    ``fweights`` are integer counts, a tensor requiring grad there is refused).

    >>> import chainrule as cr
    >>> cr.cov(cr.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]], dtype=float64)
    """
    if ddof is not None and ddof != int(ddof):
        raise ValueError("cov: ddof must be integer")
    m = _arr(m)
    if np.ndim(raw(m)) > 2:
        raise ValueError("cov: m has more than 2 dimensions")
    if y is not None:
        y = _arr(y)
        if np.ndim(raw(y)) > 2:
            raise ValueError("cov: y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(raw(m), np.float64) if y is None else np.result_type(raw(m), raw(y), np.float64)
    X = _ndmin2(astype(m, dtype))
    if not rowvar and np.ndim(raw(m)) != 1:
        X = transpose(X)
    if raw(X).shape[0] == 0:
        return _wrap_like(np.array([]).reshape(0, 0), m)
    if y is not None:
        Y = _ndmin2(astype(y, dtype))
        if not rowvar and raw(Y).shape[0] != 1:
            Y = transpose(Y)
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    nobs = raw(X).shape[1]
    w = None
    if fweights is not None:                    # integer counts: no derivative
        fweights = np.asarray(constant_arg(fweights, "cov", "fweights"), dtype=float)
        if not np.all(fweights == np.around(fweights)):
            raise TypeError("cov: fweights must be integer")
        _check_weights(fweights, nobs, "fweights")
        w = fweights
    if aweights is not None:                    # differentiable: a tensor stays one
        if isinstance(aweights, Tensor) and aweights._level:
            constant_arg(aweights, "cov", "aweights")          # refused: batched weights
        _check_weights(np.asarray(raw(aweights), dtype=float), nobs, "aweights")
        aweights = astype(aweights, np.float64) if isinstance(aweights, Tensor) else np.asarray(aweights, float)
        w = aweights if w is None else w * aweights
    if w is None:
        avg = _divide_by_count(sum(X, 1), np.asarray(nobs))
        fact = nobs - ddof
    else:
        rdt = np.result_type(raw(X).dtype, raw(w).dtype)
        w_sum = astype(sum(w), rdt)
        avg = sum(X * w, 1) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * sum(w * aweights) / w_sum
    if raw(fact) <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        fact = 0.0
    X = X - expand_dims(avg, 1)
    X_T = transpose(X) if w is None else transpose(X * w)
    if raw(X).dtype.kind == "c":
        X_T = conj(X_T)
    c = matmul(X, X_T)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = c * np.true_divide(1, fact)          # NumPy's c *= 1 / fact keeps c's dtype
    return squeeze(scaled if raw(scaled).dtype == raw(c).dtype else astype(scaled, raw(c).dtype))


def _ndmin2(x: Any) -> Any:
    nd = np.ndim(raw(x))
    return reshape(x, (1,) * (2 - nd) + np.shape(raw(x))) if nd < 2 else x


def _check_weights(w: Any, nobs: int, name: str) -> None:
    if w.ndim > 1:
        raise RuntimeError(f"cov: cannot handle multidimensional {name}")
    if w.shape[0] != nobs:
        raise RuntimeError(f"cov: incompatible numbers of samples and {name}")
    if np.any(w < 0):
        raise ValueError(f"cov: {name} cannot be negative")


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Any:
    """Pearson correlation coefficients, as ``numpy.corrcoef`` (composite of ``cov``).

    >>> import chainrule as cr
    >>> cr.corrcoef(cr.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 5.0]]))[0, 1].data.round(4)
    np.float64(0.9934)
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if np.ndim(raw(c)) < 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            return c / c
    d = diagonal(c)
    if raw(c).dtype.kind == "c":
        stddev = sqrt(real(d))
    else:
        stddev = sqrt(d)
    c = c / expand_dims(stddev, 1)
    c = c / expand_dims(stddev, 0)
    if raw(c).dtype.kind == "c":
        return c         # NumPy clips the real and imaginary parts to [-1, 1]: rounding-level only
    return clip(c, -1, 1)


# ----- convolution -----
def _fast_len(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (FFT sizes that pocketfft handles fastest)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            p = p35
            while p < n:
                p *= 2
            best = builtins.min(best, p)
            p35 *= 3
        p5 *= 5
    return best


def _use_fft(length: int, m: int, dtype: Any) -> bool:
    if dtype.kind not in "fc" or builtins.min(length, m) < 64:
        return False
    size = _fast_len(length + m - 1)
    return length * (1 + m / 200) > 0.2 * size * math.log2(size)


def _window_forward(a: Any, v: Any, off: int, length: int, n: int, m: int) -> Any:
    """out[k] = sum_j a[k + off + j] v[j], k < length (a is 0 outside [0, n); v not conjugated)."""
    dtype = np.result_type(a, v)
    if length <= 0:
        return np.zeros(0, dtype=dtype)
    lo, hi = off, off + length + m - 1
    seg = a[builtins.max(lo, 0):builtins.max(builtins.min(hi, n), 0)]
    padl = builtins.min(builtins.max(0, -lo), length + m - 1)
    if seg.shape[0] != length + m - 1:
        seg = np.concatenate([np.zeros(padl, dtype=a.dtype), seg,
                              np.zeros(length + m - 1 - padl - seg.shape[0], dtype=a.dtype)])
    if _use_fft(length, m, dtype):
        size = _fast_len(length + m - 1)
        if dtype.kind == "c":
            full = np.fft.ifft(np.fft.fft(seg, size) * np.fft.fft(v[::-1], size))
        else:
            full = np.fft.irfft(np.fft.rfft(seg, size) * np.fft.rfft(v[::-1], size), size)
        return full[m - 1:m - 1 + length].astype(dtype, copy=False)
    return np.convolve(seg, v[::-1], "valid")


def _batch_correlate(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """The correlate primitive on a batch (batch first): every window of ``a`` gathered at once,
    times ``v``, summed (the direct sum for every length: one recorded op chain, no loop)."""
    a, v = xs
    off, length, n, m = (int(params[k]) for k in ("off", "length", "n", "m"))
    if length <= 0:
        return np.zeros((size, 0), np.result_type(raw(a), raw(v)))
    lead = (size,) if batched[0] else ()
    padl, padr = builtins.max(0, -off), builtins.max(0, off + length + m - 1 - n)
    dt = raw(a).dtype
    parts = ([np.zeros(lead + (padl,), dt)] if padl else []) + [a] + ([np.zeros(lead + (padr,), dt)] if padr else [])
    a = concatenate(parts, axis=-1) if len(parts) > 1 else a
    start = off + padl
    windows = getitem(a, (Ellipsis, start + np.arange(length)[:, None] + np.arange(m)))    # (..., length, m)
    return sum(windows * expand_dims(v, -2), -1)      # (size, length): one of a, v is batched


# the transposes: a's cotangent is the window of g correlated with flipped v, v's that of a with g
CORRELATE = defprim(
    "correlate", _window_forward,
    vjps=(lambda g, out, a, v, off, length, n, m: _window(g, flip(v, 0), -off - (m - 1), n),
          lambda g, out, a, v, off, length, n, m: _window(a, g, off, m)),
    jvps="linear", saves="x y", needs={0: (1,), 1: (0,)}, kind="linalg", complex="holomorphic",
    flops=lambda out, a, v, **p: 2 * int(np.size(out)) * int(np.size(v)),
    hint="convolve/correlate take 1-D arrays.", batch=_batch_correlate)


def _window(a: Any, v: Any, off: int, length: int) -> Any:
    """A window of the non-conjugating cross-correlation of 1-D ``a`` and ``v`` (the primitive)."""
    return apply(CORRELATE, (a, v), {"off": int(off), "length": int(length), "n": int(np.shape(raw(a))[0]),
                                     "m": int(np.shape(raw(v))[0])})


def _signal_args(a: Any, v: Any, op: str) -> tuple:
    a, v = _arr(a), _arr(v)
    if np.ndim(raw(a)) == 0:
        a = reshape(a, (1,))
    if np.ndim(raw(v)) == 0:
        v = reshape(v, (1,))
    if np.ndim(raw(a)) != 1 or np.ndim(raw(v)) != 1:
        raise ShapeError(f"{op}: a and v must be 1-D, got shapes {np.shape(raw(a))} and {np.shape(raw(v))}")
    if np.shape(raw(a))[0] == 0:
        raise ValueError(f"{op}: a cannot be empty")
    if np.shape(raw(v))[0] == 0:
        raise ValueError(f"{op}: v cannot be empty")
    return a, v


def _low(fn: Any, a: Any, v: Any, mode: str) -> Any:
    dt = [raw(x).dtype for x in (a, v)]
    if builtins.any(d in LOW_PRECISION for d in dt):
        want = np.result_type(*dt) if not builtins.all(d in LOW_PRECISION for d in dt) else dt[0]
        out = fn(astype(a, np.float32), astype(v, np.float32), mode)
        return astype(out, want) if want in LOW_PRECISION else out
    return None


def convolve(a: Any, v: Any, mode: str = "full") -> Any:
    """Discrete linear convolution of two 1-D arrays, as ``numpy.convolve`` (modes full, same,
    valid); direct for short kernels, by FFT for long ones (then accurate to rounding of the FFT).

    >>> import chainrule as cr
    >>> cr.convolve(cr.tensor([1.0, 2.0, 3.0]), cr.tensor([0.0, 1.0, 0.5]))
    tensor([0. , 1. , 2.5, 4. , 1.5])
    """
    a, v = _signal_args(a, v, "convolve")
    low = _low(convolve, a, v, mode)
    if low is not None:
        return low
    n, m = np.shape(raw(a))[0], np.shape(raw(v))[0]
    if m > n:
        a, v, n, m = v, a, m, n
    start, length = _mode_window(mode, n, m, (m - 1) // 2, "convolve")
    return _window(a, flip(v, 0), start - (m - 1), length)


def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    """Cross-correlation ``c[k] = sum_n a[n + k] conj(v[n])`` of two 1-D arrays, as
    ``numpy.correlate`` (modes valid, same, full).

    >>> import chainrule as cr
    >>> cr.correlate(cr.tensor([1.0, 2.0, 3.0]), cr.tensor([0.0, 1.0, 0.5]))
    tensor([3.5])
    """
    a, v = _signal_args(a, v, "correlate")
    low = _low(correlate, a, v, mode)
    if low is not None:
        return low
    n, m = np.shape(raw(a))[0], np.shape(raw(v))[0]
    if raw(v).dtype.kind == "c":
        v = conj(v)
    start, length = _mode_window(mode, n, m, (m - 1) // 2 if n >= m else n // 2, "correlate")
    return _window(a, v, start - (m - 1), length)


def _mode_window(mode: str, n: int, m: int, same_start: int, op: str) -> tuple:
    """(start in the full correlation, length) of NumPy's modes."""
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        return same_start, builtins.max(n, m)
    if mode == "valid":
        return builtins.min(n, m) - 1, abs(n - m) + 1
    raise ValueError(f"{op}: mode must be one of 'valid', 'same', or 'full', got {mode!r}")


# ----- interpolation and integration -----
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation, as ``numpy.interp`` (float64 or complex128 result);
    differentiable in ``x``, ``fp``, ``left``, ``right`` (and ``xp``), see the module docstring.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.5, 1.5], requires_grad=True)
    >>> cr.interp(x, [0.0, 1.0, 2.0], [0.0, 2.0, 3.0]).sum().backward(); x.grad
    tensor([2., 1.])
    """
    fdt = np.complex128 if np.iscomplexobj(raw(_arr(fp))) else np.float64
    x, xp, fp = astype(_arr(x), np.float64), astype(_arr(xp), np.float64), astype(_arr(fp), fdt)
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = builtins.abs(period)
        left = right = None
        if np.ndim(raw(xp)) != 1 or np.ndim(raw(fp)) != 1:
            raise ValueError("interp: Data points must be 1-D sequences")
        if np.shape(raw(xp))[0] != np.shape(raw(fp))[0]:
            raise ValueError("interp: fp and xp are not of the same length")
        x = mod(x, period)
        xp = mod(xp, period)
        order = argsort(xp) if is_batched(xp) else np.argsort(raw(xp), kind="stable")
        xp, fp = getitem(xp, order), getitem(fp, order)
        xp = concatenate([getitem(xp, slice(-1, None)) - period, xp, getitem(xp, slice(0, 1)) + period])
        fp = concatenate([getitem(fp, slice(-1, None)), fp, getitem(fp, slice(0, 1))])
    xpr, xr = raw(xp), raw(x)
    if np.ndim(xpr) != 1 or np.ndim(raw(fp)) != 1:
        raise ValueError("interp: Data points must be 1-D sequences")
    L = xpr.shape[0]
    if L == 0:
        raise ValueError("interp: array of sample points is empty")
    if raw(fp).shape[0] != L:
        raise ValueError("interp: fp and xp are not of the same length.")
    lval = getitem(fp, 0) if left is None else astype(_arr(left), fdt)
    rval = getitem(fp, -1) if right is None else astype(_arr(right), fdt)
    if is_batched(x, xp, fp, lval, rval):
        return _interp_batched(x, xp, fp, lval, rval, L)
    below, above = xr < xpr[0], xr > xpr[-1]
    if L == 1:
        return where(below, lval, where(above, rval, getitem(fp, 0)))      # NaN x: fp[0], as NumPy
    else:
        j = np.searchsorted(xpr, xr, side="right") - 1
        fj, fj1, v0, v1 = _segment(x, xp, fp, np.clip(j, 0, L - 2))
        r0, r1 = raw(v0), raw(v1)
        last = (j == L - 1) & ~above                     # x == xp[-1]: fp[-1] (NumPy's dy[j])
        knot = (xr == xpr[np.clip(j, 0, L - 1)]) & ~last
        res = v0
        redo = np.isnan(r0) & ~knot & ~last              # NaN one way: try the other (NumPy)
        if redo.any():
            res = where(redo, v1, res)
            same = redo & np.isnan(r1) & (raw(fj) == raw(fj1))
            if same.any():
                res = where(same, fj, res)
        bad_knot = knot & ~np.isfinite(r0)
        if bad_knot.any():
            res = where(bad_knot, fj, res)
        if last.any():
            res = where(last & np.isfinite(r1), v1, where(last, fj1, res))
        res = where(below, lval, where(above, rval, res))
    if np.isnan(xr).any():
        res = where(np.isnan(xr), x, res)
    return res


def _segment(x: Any, xp: Any, fp: Any, jc: Any) -> tuple:
    """The knots' values around each x (segment ``jc``) and the line through them evaluated at x
    from either end: (fj, fj1, v0, v1)."""
    xj, xj1 = getitem(xp, jc), getitem(xp, jc + 1)
    fj, fj1 = getitem(fp, jc), getitem(fp, jc + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (fj1 - fj) / (xj1 - xj)
        return fj, fj1, slope * (x - xj) + fj, slope * (x - xj1) + fj1


def _interp_batched(x: Any, xp: Any, fp: Any, lval: Any, rval: Any, L: int) -> Any:
    """``interp``'s rules with chainrule ops only (inside cr.vmap, where no value can be read):
    each correction is a where, the segment a count of the knots at or below x."""
    below, above = x < getitem(xp, 0), x > getitem(xp, -1)
    if L == 1:
        return where(below, lval, where(above, rval, getitem(fp, 0)))
    j = sum(expand_dims(x, -1) >= xp, -1) - 1                     # searchsorted(xp, x, "right") - 1
    fj, fj1, v0, v1 = _segment(x, xp, fp, clip(j, 0, L - 2))
    last = (j == L - 1) & ~above
    knot = (x == getitem(xp, clip(j, 0, L - 1))) & ~last
    redo = isnan(v0) & ~knot & ~last
    res = where(redo, v1, v0)
    res = where(redo & isnan(v1) & (fj == fj1), fj, res)
    res = where(knot & ~isfinite(v0), fj, res)
    res = where(last & isfinite(v1), v1, where(last, fj1, res))
    res = where(below, lval, where(above, rval, res))
    return where(isnan(x), x, res)


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """Trapezoidal rule along ``axis``, as ``numpy.trapezoid`` (composite; differentiable in
    ``y``, ``x`` and ``dx``).

    >>> import chainrule as cr
    >>> cr.trapezoid(cr.tensor([1.0, 2.0, 3.0]), dx=0.5)
    tensor(2.)
    """
    y = _arr(y)
    nd = np.ndim(raw(y))
    if x is None:
        d = dx
    else:
        x = _arr(x)
        if np.ndim(raw(x)) == 1:
            d = _diff(x, 0)
            shape = [1] * nd
            shape[axis] = np.shape(raw(d))[0]
            d = reshape(d, tuple(shape))
        else:
            d = _diff(x, axis)
    ax = normalize_axis(axis, nd, "trapezoid")[0]
    s1 = (slice(None),) * ax + (slice(1, None),)
    s2 = (slice(None),) * ax + (slice(None, -1),)
    return sum(d * (getitem(y, s1) + getitem(y, s2)) / 2.0, ax)


def _diff(x: Any, axis: int) -> Any:
    ax = normalize_axis(axis, np.ndim(raw(x)), "trapezoid")[0]
    return getitem(x, (slice(None),) * ax + (slice(1, None),)) - getitem(x, (slice(None),) * ax + (slice(None, -1),))


# ----- histograms -----
def _bin_edges(a: Any, bins: Any, range: Any, weights: Any, op: str) -> tuple:
    """NumPy's bin edges (an ndarray) and the same edges as returned: differentiable in what sets
    them, the data's min and max (without ``range``), ``range``, or ``bins`` given as the edges (the
    number of bins is piecewise constant)."""
    if is_batched(a, bins, range):
        raise VmapError(f"{op} of batched data (or bins or range) inside cr.vmap: the bin edges and the count "
                        f"in each bin depend on the values; batch only the weights, or compute the histogram "
                        f"outside the vmapped function")
    rng = None if range is None else tuple(raw(r) for r in range)
    # (batched weights: the edges depend on the shape of the weights only)
    stand_in = np.ones(np.shape(raw(weights))) if is_batched(weights) else raw(weights)
    edges = np.histogram_bin_edges(raw(a), raw(bins), rng, stand_in)
    if np.ndim(raw(bins)) == 1:
        return edges, reshape(bins, edges.shape) if in_graph(bins) else _wrap_like(edges, a, weights)
    ends = (amin(a), amax(a)) if range is None and np.size(raw(a)) else (0, 1) if range is None else range
    if not builtins.any(in_graph(e) for e in ends):
        return edges, _wrap_like(edges, a, weights)
    # edge i is first + (last - first) i / n: the values NumPy's, the derivatives those of the ends
    u = np.linspace(0.0, 1.0, edges.shape[0])
    moved = edges
    for e, w in zip(ends, (1 - u, u)):
        if in_graph(e):
            moved = moved + astype(e - e.detach(), edges.dtype) * w.astype(edges.dtype)
    return edges, moved


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:
    """Bin edges, as ``numpy.histogram_bin_edges``; differentiable in the data's min and max (without
    ``range``), in ``range`` and in ``bins`` given as edges."""
    return _bin_edges(a, bins, range, weights, "histogram_bin_edges")[1]


def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None, weights: Any = None) -> tuple:
    """``(hist, bin_edges)`` as ``numpy.histogram``. Counts have no gradient; with ``weights`` each
    bin is the sum of its elements' weights, differentiable in them (a scatter-add). The edges are
    differentiable as ``histogram_bin_edges``'.

    >>> import chainrule as cr
    >>> w = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> h, edges = cr.histogram(cr.tensor([0.1, 0.2, 0.9]), bins=2, range=(0, 1), weights=w)
    >>> h
    tensor([3., 3.], grad_fn=<ScatterAddBackward>)
    """
    edges, out_edges = _bin_edges(a, bins, range, weights, "histogram")
    data = raw(a)
    if weights is None:
        rng = None if range is None else tuple(raw(r) for r in range)
        hist = np.histogram(data, raw(bins), rng, density)[0]
        return _wrap_like(hist, a), out_edges
    weights = _arr(weights)
    flat = np.ravel(data)
    if np.shape(raw(weights)) != np.shape(data):
        raise ValueError("histogram: weights should have the same shape as a.")
    nb = edges.shape[0] - 1
    ind = np.searchsorted(edges, flat, side="right") - 1
    ind[flat == edges[-1]] = nb - 1
    keep = np.flatnonzero((ind >= 0) & (ind < nb) & (flat >= edges[0]) & (flat <= edges[-1]))
    w = ravel(weights)
    hist = scatter_add(getitem(w, keep), (ind[keep],), (nb,))
    if density:
        db = np.diff(edges).astype(float)
        hist = hist / db / sum(hist)
    return hist, out_edges


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    """Counts of each non-negative integer, as ``numpy.bincount``; with ``weights`` the sums of
    the weights (float64), differentiable in them."""
    if is_batched(x):
        raise VmapError("bincount of batched values inside cr.vmap: the result's length (the largest value "
                        "+ 1) would depend on the values; compare with each bin instead, e.g. "
                        "cr.sum(x[..., None] == cr.arange(n), axis=-2)")
    xr = raw(x)
    counts = np.bincount(xr, minlength=minlength)
    if weights is None:
        return _wrap_like(counts, x)
    w = _arr(weights)
    if np.shape(raw(w)) != np.shape(xr):
        raise ValueError("bincount: The weights and list don't have the same length.")
    w = w if raw(w).dtype == np.float64 else astype(w, np.float64)
    return scatter_add(w, (np.asarray(xr, dtype=np.intp),), (counts.shape[0],))


# ----- spaced grids -----
def _make(data: Any, dtype: Any) -> Tensor:
    """chainrule.numpy.creation's rule: a float64 grid from Python numbers takes the default dtype."""
    if dtype is None and data.dtype == np.float64:
        data = data.astype(get_default_dtype())
    return Tensor(data)


def _any_tensor(*xs: Any) -> bool:
    return builtins.any(isinstance(x, Tensor) for x in xs)


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
    start, stop = astype(_arr(start), dt), astype(_arr(stop), dt)
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
    v = _arr(v)
    k = np.ndim(raw(v))
    return reshape(v, (1,) * (nd - k) + np.shape(raw(v))) if k < nd else v


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """A geometric sequence, as ``numpy.geomspace`` (exact end points); differentiable in Tensor
    end points."""
    if not _any_tensor(start, stop):
        return _make(np.geomspace(start, stop, num, endpoint, dtype, axis), dtype)
    start, stop = _arr(start) * 1.0, _arr(stop) * 1.0
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


__all__ = ["median", "percentile", "quantile", "ptp", "nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanmax",
           "nanmin", "nanmedian", "nanpercentile", "nanquantile", "nancumsum", "nancumprod", "nanargmax",
           "nanargmin", "cov", "corrcoef", "convolve", "correlate", "interp", "trapezoid", "histogram",
           "histogram_bin_edges", "bincount", "linspace", "logspace", "geomspace"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__}
