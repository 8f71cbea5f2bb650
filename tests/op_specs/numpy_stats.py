"""Op-table rows of chainrule/numpy/statistics.py, order_statistics.py, math_more.py (convolve, correlate,
interp, trapezoid) and creation_more.py (the spaced grids): the ``correlate`` primitive
(chainrule/ops/signal.py, under convolve and correlate) and the composites, each row named after the
primitive it mainly runs on, with ``id=`` naming the function."""
from __future__ import annotations

import numpy as np

import chainrule as cr
from tests.op_specs.spec import OpSpec, _tl

_NAN = np.zeros((3, 5), dtype=bool)
_NAN[0, 1] = _NAN[1, 3] = _NAN[1, 4] = _NAN[2, 0] = True
_H = np.array([0.05, 0.9, 0.35, 0.5, 0.61, 0.2, 0.99, 0.45])
_B = np.array([0, 2, 2, 1, 4, 0, 2, 3])
_XP = np.array([-1.5, -0.5, 0.2, 0.9, 1.6])


def _nans(x):
    return cr.where(_NAN, np.nan, x)


def _tnans(t, x):
    return t.where(t.tensor(_NAN), t.tensor(float("nan"), dtype=x.dtype), x)


SPECS: list[OpSpec] = [
    # ----- the primitive: a window of the (non-conjugating) cross-correlation -----
    OpSpec("correlate", lambda a, v: cr.convolve(a, v), id="convolve-full", shapes=((7,), (3,)),
           torch_fn=_tl(lambda t, a, v: t.nn.functional.conv1d(a[None, None], t.flip(v, (0,))[None, None],
                                                               padding=2)[0, 0])),
    OpSpec("correlate", lambda a, v: cr.convolve(a, v, "same"), id="convolve-same", shapes=((3,), (6,))),
    OpSpec("correlate", lambda a, v: cr.convolve(a, v, "valid"), id="convolve-valid", shapes=((8,), (3,))),
    OpSpec("correlate", lambda a, v: cr.correlate(a, v), id="correlate-valid", shapes=((7,), (3,)),
           torch_fn=_tl(lambda t, a, v: t.nn.functional.conv1d(a[None, None], v[None, None])[0, 0])),
    OpSpec("correlate", lambda a, v: cr.correlate(a, v, "same"), id="correlate-same", shapes=((4,), (7,))),
    OpSpec("correlate", lambda a, v: cr.correlate(a, v, "full"), id="correlate-full-fft",
           shapes=((300,), (90,)), order=1),
    # ----- order statistics (gathers: getitem) -----
    OpSpec("getitem", lambda x: cr.median(x, axis=1), id="median", shapes=((3, 5),),
           torch_fn=_tl(lambda t, x: t.median(x, dim=1).values)),
    OpSpec("getitem", lambda x: cr.median(x, axis=(0, 2), keepdims=True), id="median-even-tuple",
           shapes=((2, 3, 2),)),
    OpSpec("getitem", lambda x: cr.quantile(x, [0.1, 0.5, 0.8], axis=0), id="quantile",
           torch_fn=_tl(lambda t, x: t.quantile(x, t.tensor([0.1, 0.5, 0.8], dtype=x.dtype), dim=0))),
    OpSpec("getitem", lambda x: cr.quantile(x, 0.3, axis=1, method="midpoint"), id="quantile-midpoint",
           torch_fn=_tl(lambda t, x: t.quantile(x, 0.3, dim=1, interpolation="midpoint"))),
    OpSpec("getitem", lambda x: cr.quantile(x, 0.7, method="nearest"), id="quantile-nearest",
           torch_fn=_tl(lambda t, x: t.quantile(x, 0.7, interpolation="nearest"))),
    OpSpec("getitem", lambda x: cr.quantile(x, [0.2, 0.6], axis=1, method="hazen"), id="quantile-hazen"),
    OpSpec("getitem", lambda x: cr.percentile(x, 40.0, axis=1, method="inverted_cdf"),
           id="percentile-inverted_cdf"),
    OpSpec("getitem", lambda x: cr.quantile(x, 0.4, axis=1, method="inverted_cdf",
                                            weights=np.array([1.0, 2.0, 0.5, 1.0])),
           id="quantile-weights"),
    OpSpec("getitem", lambda x: cr.nanmedian(_nans(x), axis=1), id="nanmedian", shapes=((3, 5),)),
    OpSpec("getitem", lambda x: cr.nanquantile(_nans(x), [0.25, 0.9], axis=1), id="nanquantile", shapes=((3, 5),),
           torch_fn=_tl(lambda t, x: t.nanquantile(_tnans(t, x), t.tensor([0.25, 0.9], dtype=x.dtype), dim=1))),
    OpSpec("getitem", lambda x: cr.nanpercentile(_nans(x), 60.0, axis=0, method="weibull"),
           id="nanpercentile", shapes=((3, 5),)),
    # ----- nan* reductions (NaNs replaced by where) -----
    OpSpec("where", lambda x: cr.nansum(_nans(x), axis=1), id="nansum", shapes=((3, 5),),
           torch_fn=_tl(lambda t, x: t.nansum(_tnans(t, x), dim=1))),
    OpSpec("where", lambda x: cr.nanmean(_nans(x), axis=0), id="nanmean", shapes=((3, 5),),
           torch_fn=_tl(lambda t, x: t.nanmean(_tnans(t, x), dim=0))),
    OpSpec("where", lambda x: cr.nanvar(_nans(x), axis=1, ddof=1), id="nanvar", shapes=((3, 5),)),
    OpSpec("where", lambda x: cr.nanstd(_nans(x), axis=1), id="nanstd", shapes=((3, 5),)),
    OpSpec("where", lambda x: cr.nanprod(_nans(x), axis=1), id="nanprod", shapes=((3, 5),), domain=(0.5, 1.5)),
    OpSpec("where", lambda x: cr.nanmax(_nans(x), axis=1), id="nanmax", shapes=((3, 5),)),
    OpSpec("where", lambda x: cr.nanmin(_nans(x)), id="nanmin", shapes=((3, 5),)),
    OpSpec("where", lambda x: cr.nancumsum(_nans(x), axis=1), id="nancumsum", shapes=((3, 5),)),
    OpSpec("where", lambda x: cr.nancumprod(_nans(x), axis=1), id="nancumprod", shapes=((3, 5),),
           domain=(0.5, 1.5)),
    OpSpec("amax", lambda x: cr.ptp(x, axis=1), id="ptp", torch_fn=_tl(lambda t, x: x.amax(1) - x.amin(1))),
    # ----- covariance (rows named after transpose/diagonal, not matmul: cov promotes 16-bit data to
    # float64, as NumPy, where matmul's rows expect a 16-bit result computed in float32) -----
    OpSpec("transpose", cr.cov, id="cov", shapes=((3, 6),), torch_fn=_tl(lambda t, x: t.cov(x))),
    OpSpec("transpose", lambda x, y: cr.cov(x, y, rowvar=False, aweights=np.arange(1.0, 7.0)), id="cov-y-aweights",
           shapes=((6, 2), (6,))),
    OpSpec("transpose", lambda x: cr.cov(x, fweights=np.array([1, 2, 0, 3, 1, 1]), ddof=0), id="cov-fweights",
           shapes=((3, 6),), torch_fn=_tl(lambda t, x: t.cov(x, correction=0, fweights=t.tensor([1, 2, 0, 3, 1, 1])))),
    OpSpec("diagonal", cr.corrcoef, id="corrcoef", shapes=((3, 6),), torch_fn=_tl(lambda t, x: t.corrcoef(x))),
    # ----- interpolation, integration, histograms, grids -----
    OpSpec("getitem", lambda x, fp: cr.interp(x, _XP, fp), id="interp", shapes=((3, 4), (5,)),
           domains=((-1.9, 1.9), (-2.0, 2.0))),
    OpSpec("getitem", lambda x, fp, lo: cr.interp(x, _XP, fp, left=lo), id="interp-left", shapes=((6,), (5,), ()),
           domains=((-2.5, 1.5), (-2.0, 2.0), (-1.0, 1.0))),
    OpSpec("getitem", lambda x, fp: cr.interp(x, _XP, fp, period=2.5), id="interp-period", shapes=((6,), (5,)),
           domains=((-4.0, 4.0), (-2.0, 2.0))),
    OpSpec("getitem", lambda y, x: cr.trapezoid(y, x), id="trapezoid", shapes=((3, 5), (5,)),
           torch_fn=_tl(lambda t, y, x: t.trapezoid(y, x))),
    OpSpec("getitem", lambda y: cr.trapezoid(y, dx=0.3, axis=0), id="trapezoid-dx",
           torch_fn=_tl(lambda t, y: t.trapezoid(y, dx=0.3, dim=0))),
    OpSpec("scatter_add", lambda w: cr.histogram(_H, bins=3, range=(0, 1), weights=w)[0], id="histogram-weights",
           shapes=((8,),)),
    OpSpec("scatter_add", lambda w: cr.histogram(_H, bins=4, weights=w, density=True)[0],
           id="histogram-density", shapes=((8,),), domain=(0.5, 2.0)),
    OpSpec("scatter_add", lambda w: cr.bincount(_B, w, minlength=6), id="bincount", shapes=((8,),),
           torch_fn=_tl(lambda t, w: t.zeros(6, dtype=w.dtype).index_add(0, t.tensor(_B), w))),
    OpSpec("index_put", lambda s, e: cr.linspace(s, e, 5), id="linspace", shapes=((), ()),
           torch_fn=_tl(lambda t, s, e: s + (e - s) * t.linspace(0, 1, 5, dtype=s.dtype))),
    OpSpec("index_put", lambda s, e: cr.linspace(s, e, 4, endpoint=False, axis=1), id="linspace-axis",
           shapes=((3,), (3,))),
    OpSpec("index_put", lambda s, e: cr.logspace(s, e, 4, base=2.0), id="logspace", shapes=((2,), (2,))),
    OpSpec("index_put", lambda s, e: cr.geomspace(s, e, 5), id="geomspace", shapes=((), ()), domain=(0.5, 3.0)),
]

COMPLEX_SPECS: list[OpSpec] = [
    OpSpec("correlate", lambda a, v: cr.convolve(a, v, "same"), id="convolve-cc", shapes=((6,), (3,)), kinds="cc",
           torch_fn=_tl(lambda t, a, v: t.nn.functional.conv1d(a[None, None], t.flip(v, (0,))[None, None],
                                                               padding=1)[0, 0])),
    OpSpec("correlate", lambda a, v: cr.correlate(a, v, "full"), id="correlate-cr", shapes=((5,), (3,)), kinds="cr"),
    OpSpec("correlate", lambda a, v: cr.correlate(a, v, "valid"), id="correlate-rc", shapes=((5,), (3,)), kinds="rc"),
]
