"""NumPy's statistics: ``ptp``, the NaN-ignoring reductions (``nansum``, ``nanmean``, ``nanvar``,
``nanmax``, ``nanargmax``, ...), covariance (``cov``, ``corrcoef``) and histograms (``histogram``,
``histogram_bin_edges``, ``bincount``), with NumPy's arguments; all composites of chainrule ops.
The order statistics are in ``chainrule.numpy.order_statistics``.

Gradients at the points where these functions branch (tested in tests/numpy/test_numpy_stats.py):

- **cov** is differentiable in ``aweights``; ``fweights`` (integer counts) requiring grad is refused.
- **nan* reductions**: NaN entries get gradient 0. An all-NaN slice gives NumPy's value (nansum 0,
  nanprod 1; nanmean, nanvar, nanstd, nanmax, nanmin, nanmedian, nanquantile, nanpercentile NaN with
  NumPy's RuntimeWarning; nanargmax/nanargmin raise ValueError) and gradient 0. nanmax/nanmin split
  the gradient evenly among tied extremes, as ``amax``.
- **histogram/bincount**: counts have no gradient; with ``weights`` the result is a differentiable
  sum of weights per bin. Bin edges are differentiable in what sets them: the data's min and max
  (no ``range``), ``range``, or ``bins`` given as the edges.
"""
from __future__ import annotations

import builtins
import math
import warnings
from typing import Any

from chainrule.core._backend import np
from chainrule.core._registry import constant_arg, in_graph, no_out, raw
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import is_batched
from chainrule.core.errors import VmapError
from chainrule.core.tensor import Tensor
from chainrule.numpy._util import _array, _inexact, _nan_mask, _nan_where, _wrap_like
from chainrule.ops.elementwise import _abs2, _zero_at_zero, astype, clip, conj, sqrt, where
from chainrule.ops.linalg import matmul
from chainrule.ops.reduction import amax, amin, argmax, argmin, cumprod, cumsum, prod, sum
from chainrule.ops.shape import (
    concatenate,
    diagonal,
    expand_dims,
    getitem,
    ravel,
    real,
    reshape,
    scatter_add,
    squeeze,
    transpose,
)


# ----- simple reductions -----
def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Range ``max - min`` along ``axis`` (``numpy.ptp``); tied extremes share the gradient.

    >>> import chainrule as cr
    >>> cr.ptp(cr.tensor([[1.0, 4.0], [2.0, 8.0]]), axis=1)
    tensor([3., 6.])
    """
    no_out("ptp", out)
    a = _array(a)
    return amax(a, axis, keepdims=keepdims) - amin(a, axis, keepdims=keepdims)


def _replaced(a: Any, value: float) -> tuple:
    """``a`` with NaNs replaced by ``value`` (gradient 0 there), and the NaN mask (None: none)."""
    a = _array(a)
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
    return _nan_cumulative(cumsum, 0.0, a, axis, dtype, out, "nancumsum")


def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product treating NaN as 1 (``numpy.nancumprod``)."""
    return _nan_cumulative(cumprod, 1.0, a, axis, dtype, out, "nancumprod")


def _nan_cumulative(op: Any, identity: float, a: Any, axis: Any, dtype: Any, out: Any, name: str) -> Any:
    """``op`` (cumsum, cumprod) of ``a`` with its NaNs replaced by the op's ``identity``."""
    no_out(name, out)
    return op(_replaced(a, identity)[0], axis, dtype)


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
    a = _array(a)
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
    m = _array(m)
    if np.ndim(raw(m)) > 2:
        raise ValueError("cov: m has more than 2 dimensions")
    if y is not None:
        y = _array(y)
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
    weights = _array(weights)
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
    w = _array(weights)
    if np.shape(raw(w)) != np.shape(xr):
        raise ValueError("bincount: The weights and list don't have the same length.")
    w = w if raw(w).dtype == np.float64 else astype(w, np.float64)
    return scatter_add(w, (np.asarray(xr, dtype=np.intp),), (counts.shape[0],))


__all__ = ["ptp", "nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanmax", "nanmin", "nancumsum", "nancumprod",
           "nanargmax", "nanargmin", "cov", "corrcoef", "histogram", "histogram_bin_edges", "bincount"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__ if hasattr(np, name)}
