"""``cr.stats``: SciPy's distributions (``scipy.stats``' names and call signatures), differentiable.

``cr.stats.norm.logpdf(x, loc=0, scale=1)``, ``cr.stats.gamma.cdf(x, a, loc=0, scale=1)``,
``cr.stats.poisson.logpmf(k, mu, loc=0)``, the frozen form ``cr.stats.norm(loc, scale).logpdf(x)``,
``cr.stats.multivariate_normal.logpdf(x, mean, cov)`` and ``cr.stats.dirichlet.logpdf(x, alpha)``; also
``sf`` and ``logsf``, and ``ppf`` and ``isf`` where the inverse has a differentiable closed form. A
missing method's AttributeError lists the ones a distribution has.
Every density is a composite of chainrule ops and ``cr.special`` functions written with SciPy's own
formulas, so values agree with ``scipy.stats`` to rounding, and derivatives of any order work in
both modes. SciPy's conventions are kept: outside the support a log density is -inf and a density
0 (gradient 0), invalid parameters (scale <= 0, a shape out of range, NaN) give NaN (gradient 0).
Inputs without a Tensor give NumPy float64 results, as SciPy; Tensors keep their float dtype.

Derivatives: in the data and every continuous parameter, except where ``cr.special`` has none: a cdf
through ``gammainc`` (gamma's a, chi2's df) or ``betainc`` (t's df, beta's a and b, binom's n)
raises a GraphError naming that argument of the special function when its gradient is asked for.
Discrete data k enters the cdf through floor (no gradient); in a log pmf it has the gradient of
the continuous formula (as ``torch.distributions``).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import scipy.special as _sc

from chainrule import numpy as ops
from chainrule.core import _dtypes
from chainrule.core._backend import np
from chainrule.core._registry import raw
from chainrule.core.tensor import Tensor, wrap
from chainrule.ops import special as S

__all__ = ["norm", "multivariate_normal", "t", "gamma", "beta", "dirichlet", "poisson", "binom", "bernoulli",
           "laplace", "cauchy", "expon", "chi2", "uniform", "logistic"]

_LOG_2PI = math.log(2.0 * math.pi)
_NORM_LOGC = 0.5 * _LOG_2PI                 # SciPy's _norm_pdf_logC
_NORM_C = math.sqrt(2.0 * math.pi)          # SciPy's _norm_pdf_C
_LOG_PI = math.log(math.pi)
_LN2 = math.log(2.0)


# ----- inputs, masks and outputs -----
def _inputs(*vals: Any) -> tuple[list, Any]:
    """Floating arrays or Tensors, and the result dtype if any input is a Tensor (else None). Without
    a Tensor everything is float64 (SciPy's). With one, Python numbers, lists, integer arrays and
    integer Tensors take the Tensors' float dtype (the default float dtype if none is floating);
    float arrays stay as they are; the result has NumPy's dtype of them all."""
    tensors = [v for v in vals if isinstance(v, Tensor)]
    if not tensors:
        return [np.asarray(v, np.float64) for v in vals], None
    floats = [v.dtype for v in tensors if _dtypes.is_floating(v.dtype)]
    dt = np.result_type(*floats) if floats else np.dtype(_dtypes.get_default_dtype())
    out = []
    for v in vals:
        if isinstance(v, Tensor):
            out.append(v if _dtypes.is_floating(v.dtype) else wrap(np.asarray(v.data, dt)))
        elif isinstance(v, np.ndarray) and v.dtype.kind in "fc":
            out.append(v)
        else:
            out.append(np.asarray(v, dt))
    return out, np.result_type(*[v.dtype for v in out])


def _np(v: Any) -> np.ndarray:
    return np.asarray(raw(v))


def _keep(cond: np.ndarray, v: Any, safe: Any) -> Any:
    """``v`` where ``cond`` holds, else ``safe``: the entries whose result is thrown away are computed at
    a harmless point, so no inf or NaN reaches a derivative rule (where's gradient would multiply it
    by 0 and give NaN). Plain arrays carry no gradient: they stay as they are."""
    if not isinstance(v, Tensor) or cond.all():
        return v
    return ops.where(cond, v, safe)


def _fill(cond: np.ndarray, val: Any, fill: float, bad: np.ndarray, extra: Any = None) -> Any:
    """``val`` where ``cond``, ``fill`` elsewhere, 1 or 0 (``extra`` = (mask, value)) where SciPy puts
    them, and NaN where the parameters are invalid or the data NaN."""
    out = val if cond.all() else ops.where(cond, val, fill)
    if extra is not None and extra[0].any():
        out = ops.where(extra[0], extra[1], out)
    if bad.any():
        out = ops.where(bad, np.nan, out)
    return out


def _finish(out: Any, tensor: Any) -> Any:
    """The result: a Tensor of the inputs' dtype (constants of a 16-bit computation may have been
    computed by SciPy in float64), or SciPy's float64 array or scalar."""
    if tensor is not None:
        out = out if isinstance(out, Tensor) else wrap(np.asarray(out))
        return out if out.dtype == tensor else out.astype(tensor)
    out = np.asarray(out)
    return out[()] if out.ndim == 0 else out


def _split(lower: np.ndarray, z: Any, at: Any, low: Any, high: Any) -> Any:
    """``low(z)`` where ``lower``, else ``high(z)``; each branch sees ``at`` where it is not used."""
    if lower.all():
        return low(z)
    if not lower.any():
        return high(z)
    return ops.where(lower, low(_keep(lower, z, at)), high(_keep(~lower, z, at)))


def _with_value(value: np.ndarray, f: Any) -> Any:
    """SciPy's own numbers ``value`` with the derivatives (every order, both modes) of the composite
    ``f`` of the same function: ``(f - f.detach()) + value``, exactly ``value`` where f is finite."""
    if not isinstance(f, Tensor):
        return value
    return (f - f.detach()) + value.astype(f.dtype)


class _Methods:
    """Every distribution: a method it lacks (one SciPy has, or a typo) raises an AttributeError
    that lists the ones it has."""

    name = ""
    NOT_HERE: dict = {}         # SciPy's methods missing here, and why

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        why = f" ({self.NOT_HERE[name]})" if name in self.NOT_HERE else ""
        raise AttributeError(f"cr.stats.{self.name} has no method {name!r}{why}; it has "
                             f"{', '.join(self.methods())}")

    @classmethod
    def methods(cls) -> list:
        """The public methods, by SciPy's names."""
        return [n for n in dir(cls) if not n.startswith("_") and n != "methods" and callable(getattr(cls, n))]


def _no_inverse(dist: str, inverse: str) -> dict:
    """Why a distribution has no ppf and isf: the inverse special function is not differentiable here."""
    return {m: f"its inverse needs scipy.special.{inverse}, which has no differentiable version in "
               f"cr.special; use scipy.stats.{dist}.{m} on plain values" for m in ("ppf", "isf")}


class _Frozen:
    """A distribution with its parameters fixed: ``cr.stats.norm(1.0, 2.0).logpdf(x)``."""

    def __init__(self, dist: Any, args: tuple, kwds: dict) -> None:
        self.dist, self.args, self.kwds = dist, args, kwds

    def __getattr__(self, name: str) -> Any:
        if name in type(self.dist).METHODS:
            method = getattr(self.dist, name)

            @functools.wraps(method)
            def frozen(x: Any) -> Any:
                return method(x, *self.args, **self.kwds)
            return frozen
        raise AttributeError(f"frozen cr.stats.{self.dist.name} has no method {name!r}; it has "
                             f"{', '.join(type(self.dist).METHODS)}")

    def __repr__(self) -> str:
        return f"<frozen cr.stats.{self.dist.name}>"


class _Dist(_Methods):
    """The parts SciPy's rv_continuous and rv_discrete share: argument parsing and freezing."""

    shape_names: tuple = ()
    extra: tuple = ("loc", "scale")
    safe_shapes: tuple = ()
    METHODS: tuple = ()

    def __init__(self, name: str) -> None:
        self.name = name
        self.shapes = ", ".join(self.shape_names) or None
        self.numargs = len(self.shape_names)

    def __call__(self, *args: Any, **kwds: Any) -> _Frozen:
        self._parse(args, kwds, "__call__")
        return _Frozen(self, args, kwds)

    def __repr__(self) -> str:
        return f"<cr.stats.{self.name}>"

    def _parse(self, args: tuple, kwds: dict, method: str) -> tuple:
        names = self.shape_names + self.extra
        if len(args) > len(names):
            raise TypeError(f"{self.name}.{method}() takes at most {len(names)} parameters "
                            f"({', '.join(names)}), got {len(args)}")
        vals = dict(zip(names, args))
        for k, v in kwds.items():
            if k not in names:
                raise TypeError(f"{self.name}.{method}() got an unexpected keyword argument {k!r}")
            if k in vals:
                raise TypeError(f"{self.name}.{method}() got multiple values for argument {k!r}")
            vals[k] = v
        missing = [n for n in self.shape_names if n not in vals]
        if missing:
            raise TypeError(f"{self.name}.{method}() missing required argument(s): {', '.join(missing)}")
        return ([vals[n] for n in self.shape_names], vals.get("loc", 0.0), vals.get("scale", 1.0))

    def _argcheck(self, *shapes: np.ndarray) -> np.ndarray:
        cond = np.asarray(True)
        for s in shapes:
            cond = cond & (s > 0)
        return cond


class _Continuous(_Dist):
    """SciPy's rv_continuous: logpdf, pdf, cdf, logcdf, sf, logsf of ``(x - loc) / scale`` in standard form."""

    METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
    a, b = -np.inf, np.inf      # the standard form's support
    inside = 0.0                # a point inside it

    def _standard(self, x: Any, args: tuple, kwds: dict, method: str) -> tuple:
        shapes, loc, scale = self._parse(args, kwds, method)
        (x, loc, scale, *shapes), tensor = _inputs(x, loc, scale, *shapes)
        sd, shd = _np(scale), [_np(s) for s in shapes]
        positive = sd > 0
        scale = _keep(positive, scale, 1.0)
        with np.errstate(all="ignore"):
            z = (x - loc) / scale
            zd = _np(z)
            cond0 = np.asarray(self._argcheck(*shd)) & positive
            cond0 = np.broadcast_to(cond0, np.broadcast_shapes(cond0.shape, zd.shape))
        return z, zd, shapes, shd, scale, cond0, tensor

    def _conds(self, zd: np.ndarray, cond0: np.ndarray, closed: bool) -> tuple:
        """(where the density or cdf is computed, where it is NaN): inside the support, closed for the
        density and open for the cdf, with valid parameters."""
        nan = np.isnan(zd)
        if self.a == -np.inf and self.b == np.inf:
            inside = ~nan if closed else np.isfinite(zd)
        else:
            inside = ((self.a <= zd) & (zd <= self.b)) if closed else ((self.a < zd) & (zd < self.b))
        return cond0 & inside, ~cond0 | nan

    def _safe(self, cond: np.ndarray, z: Any, shapes: list, scale: Any = None) -> tuple:
        zs = _keep(cond, z, self.inside)
        ss = [_keep(cond, s, v) for s, v in zip(shapes, self.safe_shapes)]
        return zs, ss, (None if scale is None else _keep(cond, scale, 1.0))

    def logpdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        return self._density(x, args, kwds, "logpdf", self._logpdf, log=True)

    def pdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        return self._density(x, args, kwds, "pdf", self._pdf, log=False)

    def cdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        return self._probability(x, args, kwds, "cdf", self._cdf, log=False, upper=False)

    def logcdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        return self._probability(x, args, kwds, "logcdf", self._logcdf, log=True, upper=False)

    def sf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """The survival function 1 - cdf, as SciPy's ``sf`` (no cancellation in the upper tail).

        >>> import chainrule as cr
        >>> round(float(cr.stats.norm.sf(3.0)), 6)
        0.00135
        """
        return self._probability(x, args, kwds, "sf", self._sf, log=False, upper=True)

    def logsf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """log of the survival function, as SciPy's ``logsf`` (finite far in the upper tail)."""
        return self._probability(x, args, kwds, "logsf", self._logsf, log=True, upper=True)

    def _density(self, x: Any, args: tuple, kwds: dict, method: str, f: Any, log: bool) -> Any:
        """logpdf (``log``) and pdf: ``f`` of the standard form on the (closed) support, divided by the
        scale; 0 (log: -inf) outside it, NaN for invalid parameters and NaN x."""
        z, zd, shapes, _, scale, cond0, tensor = self._standard(x, args, kwds, method)
        with np.errstate(all="ignore"):
            cond, bad = self._conds(zd, cond0, True)
            zs, ss, sc = self._safe(cond, z, shapes, scale)
            val = f(zs, *ss) - ops.log(sc) if log else f(zs, *ss) / sc
            return _finish(_fill(cond, val, -np.inf if log else 0.0, bad), tensor)

    def _probability(self, x: Any, args: tuple, kwds: dict, method: str, f: Any, log: bool, upper: bool) -> Any:
        """cdf, logcdf and (``upper``) sf, logsf: ``f`` of the standard form inside the (open) support;
        beyond its end on the tail's side 0 (log: -inf), beyond the other end 1 (log: 0); NaN for
        invalid parameters and NaN x."""
        z, zd, shapes, _, _, cond0, tensor = self._standard(x, args, kwds, method)
        with np.errstate(all="ignore"):
            cond, bad = self._conds(zd, cond0, False)
            zs, ss, _ = self._safe(cond, z, shapes)
            val = f(zs, *ss)
            certain = (zd <= self.a) if upper else (zd >= self.b)
            return _finish(_fill(cond, val, -np.inf if log else 0.0, bad, (certain & cond0, 0.0 if log else 1.0)),
                           tensor)

    # the standard form; _pdf, _logcdf, _sf and _logsf have SciPy's defaults
    def _pdf(self, z: Any, *shapes: Any) -> Any:
        return ops.exp(self._logpdf(z, *shapes))

    def _logcdf(self, z: Any, *shapes: Any) -> Any:
        """SciPy's rv_continuous._logcdf: log(cdf) below the median, log1p(-sf) above it."""
        med = np.asarray(self._median(*[_np(s) for s in shapes]), np.float64)
        med = np.broadcast_to(med, np.broadcast_shapes(med.shape, _np(z).shape))
        return _split(_np(z) < med, z, med, lambda z: ops.log(self._cdf(z, *shapes)),
                      lambda z: ops.log1p(-self._sf(z, *shapes)))

    def _sf(self, z: Any, *shapes: Any) -> Any:
        return 1.0 - self._cdf(z, *shapes)

    def _logsf(self, z: Any, *shapes: Any) -> Any:
        """SciPy's rv_continuous._logsf: log(sf) above the median, log1p(-cdf) below it."""
        med = np.asarray(self._median(*[_np(s) for s in shapes]), np.float64)
        med = np.broadcast_to(med, np.broadcast_shapes(med.shape, _np(z).shape))
        return _split(_np(z) > med, z, med, lambda z: ops.log(self._sf(z, *shapes)),
                      lambda z: ops.log1p(-self._cdf(z, *shapes)))


class _Invertible(_Continuous):
    """A continuous distribution whose quantile function has a differentiable form: also ``ppf``
    (the inverse of the cdf) and ``isf`` (of the sf), as SciPy's (NaN outside [0, 1] and for invalid
    parameters, the support's ends at q = 0 and 1), differentiable in q, loc and scale."""

    METHODS = _Continuous.METHODS + ("ppf", "isf")

    def ppf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """The quantile function (inverse of the cdf), as SciPy's ``ppf``; differentiable in q.

        >>> import chainrule as cr
        >>> round(float(cr.stats.norm.ppf(0.975)), 4)
        1.96
        """
        return self._quantile(q, args, kwds, "ppf", self._ppf, self.a, self.b)

    def isf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """The inverse of the survival function, as SciPy's ``isf``."""
        return self._quantile(q, args, kwds, "isf", self._isf, self.b, self.a)

    def _quantile(self, q: Any, args: tuple, kwds: dict, method: str, f: Any, at0: float, at1: float) -> Any:
        shapes, loc, scale = self._parse(args, kwds, method)
        (q, loc, scale, *shapes), tensor = _inputs(q, loc, scale, *shapes)
        qd, shd = _np(q), [_np(s) for s in shapes]
        with np.errstate(all="ignore"):
            cond0 = np.asarray(self._argcheck(*shd)) & (_np(scale) > 0) & ~np.isnan(_np(loc))
            cond0 = np.broadcast_to(cond0, np.broadcast_shapes(cond0.shape, qd.shape))
            cond = cond0 & (0 < qd) & (qd < 1)
            sc = _keep(cond0, scale, 1.0)
            val = f(_keep(cond, q, 0.5), *[_keep(cond, s, v) for s, v in zip(shapes, self.safe_shapes)]) * sc + loc
            out = _fill(cond, val, np.nan, np.zeros((), bool))
            for end, at in ((at0, cond0 & (qd == 0)), (at1, cond0 & (qd == 1))):
                if at.any():
                    out = ops.where(at, end * sc + loc if np.isfinite(end) else end, out)
            return _finish(out, tensor)

    def _isf(self, q: Any, *shapes: Any) -> Any:
        return self._ppf(1.0 - q, *shapes)


class _Discrete(_Dist):
    """SciPy's rv_discrete: logpmf, pmf, cdf, logcdf, sf, logsf of ``k - loc``."""

    METHODS = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")
    NOT_HERE = {m: "a step function of q: use scipy.stats on plain values" for m in ("ppf", "isf")}
    extra = ("loc",)
    a = 0.0

    def _b(self, *shapes: np.ndarray) -> Any:
        return np.inf

    def _standard(self, k: Any, args: tuple, kwds: dict, method: str) -> tuple:
        shapes, loc, _ = self._parse(args, kwds, method)
        (k, loc, *shapes), tensor = _inputs(k, loc, *shapes)
        with np.errstate(all="ignore"):
            k = k - loc
            kd, shd = _np(k), [_np(s) for s in shapes]
            cond0 = np.asarray(self._argcheck(*shd))
            cond0 = np.broadcast_to(cond0, np.broadcast_shapes(cond0.shape, kd.shape))
        return k, kd, shapes, shd, cond0, tensor

    def _safe(self, cond: np.ndarray, k: Any, shapes: list) -> tuple:
        return _keep(cond, k, 0.0), [_keep(cond, s, v) for s, v in zip(shapes, self.safe_shapes)]

    def logpmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        return self._mass(k, args, kwds, "logpmf", self._logpmf, -np.inf)

    def pmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        return self._mass(k, args, kwds, "pmf", self._pmf, 0.0)

    def _mass(self, k: Any, args: tuple, kwds: dict, method: str, f: Any, outside: float) -> Any:
        """logpmf and pmf: ``f`` at the integers of the support, ``outside`` elsewhere, NaN for invalid
        parameters and NaN k."""
        k, kd, shapes, shd, cond0, tensor = self._standard(k, args, kwds, method)
        with np.errstate(all="ignore"):
            cond = cond0 & (kd >= self.a) & (kd <= self._b(*shd)) & (np.floor(kd) == kd)
            ks, ss = self._safe(cond, k, shapes)
            return _finish(_fill(cond, f(ks, *ss), outside, ~cond0 | np.isnan(kd)), tensor)

    def _floored(self, k: Any, args: tuple, kwds: dict, method: str) -> tuple:
        """The start of cdf, logcdf, sf and logsf: ``(kd, b, cond0, cond, kf, safe shapes, tensor)``, with
        ``cond`` the finite k of the support and ``kf`` floor(k) there, 0 elsewhere (no gradient)."""
        k, kd, shapes, shd, cond0, tensor = self._standard(k, args, kwds, method)
        with np.errstate(all="ignore"):
            b = self._b(*shd)
            cond = cond0 & (kd >= self.a) & (kd < b) & np.isfinite(kd)
            _, ss = self._safe(cond, k, shapes)
            kf = np.where(cond, np.floor(kd), 0.0).astype(_np(k).dtype)
        return kd, b, cond0, cond, kf, ss, tensor

    def cdf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        kd, b, cond0, cond, kf, ss, tensor = self._floored(k, args, kwds, "cdf")
        with np.errstate(all="ignore"):
            return _finish(_fill(cond, self._cdf(kf, *ss), 0.0, ~cond0 | np.isnan(kd), (kd >= b, 1.0)), tensor)

    def logcdf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        kd, b, cond0, cond, kf, ss, tensor = self._floored(k, args, kwds, "logcdf")
        with np.errstate(all="ignore"):
            out = _fill(cond, ops.log(self._cdf(kf, *ss)), -np.inf, ~cond0 | np.isnan(kd))
            top = np.broadcast_to(kd >= b, cond.shape)     # SciPy's order: 0 there, even over NaN
            return _finish(ops.where(top, 0.0, out) if top.any() else out, tensor)

    def sf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """P(K > k), as SciPy's ``sf``."""
        return self._survival(k, args, kwds, "sf", lambda v: v, 0.0, 1.0)

    def logsf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """log P(K > k), as SciPy's ``logsf``."""
        return self._survival(k, args, kwds, "logsf", ops.log, -np.inf, 0.0)

    def _survival(self, k: Any, args: tuple, kwds: dict, method: str, f: Any, above: float, below: float) -> Any:
        """SciPy's rv_discrete.sf/logsf: ``f(sf)`` on the support, ``below`` under it (and at -inf),
        ``above`` from its top, NaN for invalid parameters and NaN k."""
        kd, _, cond0, cond, kf, ss, tensor = self._floored(k, args, kwds, method)
        with np.errstate(all="ignore"):
            under = ((kd < self.a) | np.isneginf(kd)) & cond0
            return _finish(_fill(cond, f(self._sf(kf, *ss)), above, ~cond0 | np.isnan(kd), (under, below)), tensor)

    def _pmf(self, k: Any, *shapes: Any) -> Any:
        return ops.exp(self._logpmf(k, *shapes))

    def _sf(self, k: Any, *shapes: Any) -> Any:
        return 1.0 - self._cdf(k, *shapes)


# ----- continuous distributions -----
class _Symmetric(_Invertible):
    """A standard form symmetric about 0: sf(z) = cdf(-z), logsf(z) = logcdf(-z), isf(q) = -ppf(q)."""

    def _sf(self, z: Any, *shapes: Any) -> Any:
        return self._cdf(-z, *shapes)

    def _logsf(self, z: Any, *shapes: Any) -> Any:
        return self._logcdf(-z, *shapes)

    def _isf(self, q: Any, *shapes: Any) -> Any:
        return -self._ppf(q, *shapes)

    def _median(self, *shapes: Any) -> Any:
        return 0.0


def _norm_logpdf(z: Any) -> Any:
    return -z ** 2 / 2.0 - _NORM_LOGC


class norm_gen(_Symmetric):
    """Normal: ``norm.logpdf(x, loc=0, scale=1)`` (``scipy.stats.norm``).

    >>> import chainrule as cr
    >>> x = cr.tensor([0.0, 1.0], dtype=cr.float64, requires_grad=True)
    >>> cr.stats.norm.logpdf(x, loc=1.0, scale=2.0).sum().backward(); x.grad
    tensor([ 0.25, -0.  ], dtype=float64)
    """

    def _logpdf(self, z: Any) -> Any:
        return _norm_logpdf(z)

    def _pdf(self, z: Any) -> Any:
        return ops.exp(-z ** 2 / 2.0) / _NORM_C

    def _cdf(self, z: Any) -> Any:
        return S.ndtr(z)

    def _logcdf(self, z: Any) -> Any:
        return S.log_ndtr(z)

    def _ppf(self, q: Any) -> Any:
        return S.ndtri(q)

    def entropy(self, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        """``0.5 log(2 pi e) + log(scale)``, NaN where scale <= 0; the shape of scale (as SciPy)."""
        (scale,), tensor = _inputs(scale)
        positive = _np(scale) > 0
        val = 0.5 * (_LOG_2PI + 1.0) + ops.log(_keep(positive, scale, 1.0))
        return _finish(_fill(positive, val, np.nan, ~positive), tensor)


class t_gen(_Continuous):
    """Student's t: ``t.logpdf(x, df, loc=0, scale=1)``; df = inf is the normal. The cdf's values are
    ``scipy.special.stdtr``'s, its derivatives those of the same function written with betainc (so df
    is not differentiable)."""

    NOT_HERE = _no_inverse("t", "stdtrit")

    shape_names = ("df",)
    safe_shapes = (1.0,)

    def _logpdf(self, z: Any, df: Any) -> Any:
        def finite(z: Any, df: Any) -> Any:
            return _log_poch_half(0.5 * df) - 0.5 * (ops.log(df) + _LOG_PI) - (df + 1) / 2 * ops.log1p(z * z / df)
        return self._with_inf_df(z, df, finite, lambda z: _norm_logpdf(z))

    def _cdf(self, z: Any, df: Any) -> Any:
        value = np.asarray(_sc.stdtr(_np(df), _np(z)))
        if not isinstance(z, Tensor) and not isinstance(df, Tensor):
            return value
        return _with_value(value, self._with_inf_df(z, df, _stdtr, S.ndtr))

    def _sf(self, z: Any, df: Any) -> Any:
        return self._cdf(-z, df)

    def _median(self, df: np.ndarray) -> Any:
        return 0.0

    @staticmethod
    def _with_inf_df(z: Any, df: Any, finite: Any, normal: Any) -> Any:
        infinite = np.isposinf(_np(df))
        if not infinite.any():
            return finite(z, df)
        infinite = np.broadcast_to(infinite, np.broadcast_shapes(infinite.shape, _np(z).shape))
        return ops.where(infinite, normal(z), finite(z, _keep(~infinite, df, 1.0)))


def _log_poch_half(h: Any) -> Any:
    """``log(Gamma(h + 1/2) / Gamma(h))`` (SciPy's log(poch(h, 0.5))): the gammaln difference below 20,
    above it the asymptotic series (gammaln's difference cancels; SciPy's poch itself is off by up to
    3e-12 relative for h in 250..1e4, this series by less than 2e-14)."""
    def series(h: Any) -> Any:
        r = 1.0 / h
        r2 = r * r
        return 0.5 * ops.log(h) + r * (-1.0 / 8 + r2 * (1.0 / 192 + r2 * (-1.0 / 640 + r2 * (17.0 / 14336))))
    return _split(_np(h) >= 20, h, 20.0, series, lambda h: S.gammaln(h + 0.5) - S.gammaln(h))


def _stdtr(z: Any, df: Any) -> Any:
    """The t cdf (for its derivatives) by the regularized incomplete beta function (Boost's method): the tail
    0.5 I_{df/(df+x^2)}(df/2, 1/2) where it is below 1/4, else 1/2 + sign(x)/2 I_{x^2/(df+x^2)}(1/2, df/2).
    Where x^2 / (df + x^2) underflows to 0 (x = 0 too): 1/2 + x pdf(0), the exact slope at 0 (the
    betainc form would give 0 * inf there)."""
    zd, dfd = _np(z), _np(df)
    with np.errstate(all="ignore"):
        x2d = zd * zd
        tail = 0.5 * _sc.betainc(dfd / 2, 0.5, dfd / (dfd + x2d)) < 0.25
        tiny = (x2d / (dfd + x2d)) == 0
    shape = np.broadcast_shapes(zd.shape, dfd.shape)
    tail, tiny = np.broadcast_to(tail, shape), np.broadcast_to(tiny, shape)

    def tails(z: Any) -> Any:
        p = 0.5 * S.betainc(df / 2, 0.5, df / (df + z * z))
        return ops.where(_np(z) > 0, 1.0 - p, p)

    def center(z: Any) -> Any:
        zc = _keep(~tiny, z, 1.0)
        x2 = zc * zc
        c = 0.5 + 0.5 * ops.sign(zc) * S.betainc(0.5, df / 2, x2 / (df + x2))
        if not tiny.any():
            return c
        dfs = _keep(tiny, df, 1.0)
        pdf0 = ops.exp(_log_poch_half(0.5 * dfs) - 0.5 * (ops.log(dfs) + _LOG_PI))
        return ops.where(tiny, 0.5 + z * pdf0, c)
    return _split(tail, z, 1.0, tails, center)


class gamma_gen(_Continuous):
    """Gamma: ``gamma.logpdf(x, a, loc=0, scale=1)``; the cdf is gammainc (a not differentiable)."""

    NOT_HERE = _no_inverse("gamma", "gammaincinv")

    shape_names = ("a",)
    safe_shapes = (1.0,)
    a, inside = 0.0, 1.0

    def _logpdf(self, z: Any, a: Any) -> Any:
        return S.xlogy(a - 1.0, z) - z - S.gammaln(a)

    def _cdf(self, z: Any, a: Any) -> Any:
        return S.gammainc(a, z)

    def _sf(self, z: Any, a: Any) -> Any:
        return S.gammaincc(a, z)

    def _median(self, a: np.ndarray) -> Any:
        return _sc.gammaincinv(a, 0.5)


class beta_gen(_Continuous):
    """Beta: ``beta.logpdf(x, a, b, loc=0, scale=1)``; the cdf is betainc (a, b not differentiable)."""

    NOT_HERE = _no_inverse("beta", "betaincinv")

    shape_names = ("a", "b")
    safe_shapes = (1.0, 1.0)
    a, b, inside = 0.0, 1.0, 0.5

    def _logpdf(self, z: Any, a: Any, b: Any) -> Any:
        return S.xlog1py(b - 1.0, -z) + S.xlogy(a - 1.0, z) - S.betaln(a, b)

    def _cdf(self, z: Any, a: Any, b: Any) -> Any:
        return S.betainc(a, b, z)

    def _sf(self, z: Any, a: Any, b: Any) -> Any:
        return S.betainc(b, a, 1.0 - z)

    def _median(self, a: np.ndarray, b: np.ndarray) -> Any:
        return _sc.betaincinv(a, b, 0.5)


class chi2_gen(_Continuous):
    """Chi-squared: ``chi2.logpdf(x, df, loc=0, scale=1)``; the cdf is gammainc (df not differentiable)."""

    NOT_HERE = _no_inverse("chi2", "gammaincinv")

    shape_names = ("df",)
    safe_shapes = (1.0,)
    a, inside = 0.0, 1.0

    def _logpdf(self, z: Any, df: Any) -> Any:
        return S.xlogy(df / 2.0 - 1, z) - z / 2.0 - S.gammaln(df / 2.0) - (_LN2 * df) / 2.0

    def _cdf(self, z: Any, df: Any) -> Any:
        return S.gammainc(df / 2.0, z / 2.0)

    def _sf(self, z: Any, df: Any) -> Any:
        return S.gammaincc(df / 2.0, z / 2.0)

    def _median(self, df: np.ndarray) -> Any:
        return 2 * _sc.gammaincinv(df / 2, 0.5)


class laplace_gen(_Symmetric):
    """Laplace: ``laplace.logpdf(x, loc=0, scale=1)``. The log density and log cdf are -|z| - log 2 and
    z - log 2 for z < 0, finite where SciPy's log(0.5 exp(-|z|)) underflows to -inf (|z| > 745)."""

    def _logpdf(self, z: Any) -> Any:
        return -ops.abs(z) - _LN2

    def _pdf(self, z: Any) -> Any:
        return 0.5 * ops.exp(-ops.abs(z))

    def _cdf(self, z: Any) -> Any:
        return _split(_np(z) > 0, z, 0.0, lambda z: 1.0 - 0.5 * ops.exp(-z), lambda z: 0.5 * ops.exp(z))

    def _logcdf(self, z: Any) -> Any:
        return _split(_np(z) < 0, z, 0.0, lambda z: z - _LN2, lambda z: ops.log1p(-0.5 * ops.exp(-z)))

    def _ppf(self, q: Any) -> Any:
        return _split(_np(q) > 0.5, q, 0.5, lambda q: -ops.log(2.0 * (1.0 - q)), lambda q: ops.log(2.0 * q))


class cauchy_gen(_Symmetric):
    """Cauchy: ``cauchy.logpdf(x, loc=0, scale=1)``."""

    def _logpdf(self, z: Any) -> Any:
        absz = ops.abs(z)
        return _split(_np(absz) < 1, absz, 0.5, lambda a: -_LOG_PI - ops.log1p(a ** 2),
                      lambda a: -_LOG_PI - (2 * ops.log(a) + ops.log1p((1 / a) ** 2)))

    def _pdf(self, z: Any) -> Any:
        return 1.0 / math.pi / (1.0 + z * z)

    def _cdf(self, z: Any) -> Any:
        return ops.arctan2(1.0, -z) / math.pi

    def _ppf(self, q: Any) -> Any:
        """Boost's (SciPy's) -1/tan(pi q), with q - 1 for q > 1/2 (the period: no rounding of 1 - q), as
        -cos/sin, whose derivatives do not cancel near q = 1/2 (tan's pole)."""
        angle = math.pi * ops.where(_np(q) > 0.5, q - 1.0, q)
        return -ops.cos(angle) / ops.sin(angle)


class expon_gen(_Invertible):
    """Exponential: ``expon.logpdf(x, loc=0, scale=1)`` (scale = 1 / rate)."""

    a, inside = 0.0, 1.0

    def _logpdf(self, z: Any) -> Any:
        return -z

    def _pdf(self, z: Any) -> Any:
        return ops.exp(-z)

    def _cdf(self, z: Any) -> Any:
        return -ops.expm1(-z)

    def _sf(self, z: Any) -> Any:
        return ops.exp(-z)

    def _logsf(self, z: Any) -> Any:
        return -z

    def _ppf(self, q: Any) -> Any:
        return -ops.log1p(-q)

    def _isf(self, q: Any) -> Any:
        return -ops.log(q)

    def _median(self) -> Any:
        return _LN2


class uniform_gen(_Invertible):
    """Uniform on [loc, loc + scale]: ``uniform.logpdf(x, loc=0, scale=1)``."""

    a, b, inside = 0.0, 1.0, 0.5

    def _logpdf(self, z: Any) -> Any:
        return ops.zeros_like(z)

    def _pdf(self, z: Any) -> Any:
        return ops.ones_like(z)

    def _cdf(self, z: Any) -> Any:
        return z

    def _ppf(self, q: Any) -> Any:
        return q

    def _median(self) -> Any:
        return 0.5


class logistic_gen(_Symmetric):
    """Logistic: ``logistic.logpdf(x, loc=0, scale=1)``."""

    def _logpdf(self, z: Any) -> Any:
        y = -ops.abs(z)
        return y - 2.0 * ops.log1p(ops.exp(y))

    def _cdf(self, z: Any) -> Any:
        return S.expit(z)

    def _logcdf(self, z: Any) -> Any:
        return S.log_expit(z)

    def _ppf(self, q: Any) -> Any:
        return S.logit(q)


# ----- discrete distributions -----
class poisson_gen(_Discrete):
    """Poisson: ``poisson.logpmf(k, mu, loc=0)``; the cdf is gammaincc(k + 1, mu), differentiable in mu.

    >>> import chainrule as cr
    >>> mu = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
    >>> cr.stats.poisson.logpmf(3, mu).backward(); mu.grad
    tensor(0.5, dtype=float64)
    """

    shape_names = ("mu",)
    safe_shapes = (1.0,)

    def _argcheck(self, mu: np.ndarray) -> np.ndarray:
        return mu >= 0

    def _logpmf(self, k: Any, mu: Any) -> Any:
        return S.xlogy(k, mu) - S.gammaln(k + 1) - mu

    def _cdf(self, k: Any, mu: Any) -> Any:
        return S.gammaincc(k + 1, mu)

    def _sf(self, k: Any, mu: Any) -> Any:
        return S.gammainc(k + 1, mu)


class binom_gen(_Discrete):
    """Binomial: ``binom.logpmf(k, n, p, loc=0)``; the cdf is betainc(n - k, k + 1, 1 - p), differentiable
    in p (n is a count: asking for its gradient through the cdf raises betainc's GraphError)."""

    shape_names = ("n", "p")
    safe_shapes = (1.0, 0.5)

    def _argcheck(self, n: np.ndarray, p: np.ndarray) -> np.ndarray:
        return (n >= 0) & (np.floor(n) == n) & (p >= 0) & (p <= 1)

    def _b(self, n: np.ndarray, p: np.ndarray) -> Any:
        return n

    def _logpmf(self, k: Any, n: Any, p: Any) -> Any:
        combiln = S.gammaln(n + 1) - (S.gammaln(k + 1) + S.gammaln(n - k + 1))
        return combiln + S.xlogy(k, p) + S.xlog1py(n - k, -p)

    def _cdf(self, k: Any, n: Any, p: Any) -> Any:
        full = np.broadcast_to(_np(k) >= _np(n), np.broadcast_shapes(np.shape(_np(k)), np.shape(_np(n)),
                                                                     np.shape(_np(p))))
        if full.any():      # k >= n is 1 (SciPy's caller already put it), betainc(0, ...) is not defined
            n = ops.where(full, _np(k) + 1.0, n) if isinstance(n, Tensor) else np.where(full, _np(k) + 1.0, n)
        return S.betainc(n - k, k + 1, 1.0 - p)

    def _sf(self, k: Any, n: Any, p: Any) -> Any:
        return S.betainc(k + 1, n - k, p)         # (k < n here: the caller puts 0 from n on)


class bernoulli_gen(binom_gen):
    """Bernoulli: ``bernoulli.logpmf(k, p, loc=0)`` (binom with n = 1, as SciPy)."""

    shape_names = ("p",)
    safe_shapes = (0.5,)

    def _argcheck(self, p: np.ndarray) -> np.ndarray:
        return (p >= 0) & (p <= 1)

    def _b(self, p: np.ndarray) -> Any:
        return 1.0

    def _logpmf(self, k: Any, p: Any) -> Any:
        return binom_gen._logpmf(self, k, 1.0, p)

    def _cdf(self, k: Any, p: Any) -> Any:
        return binom_gen._cdf(self, k, np.ones_like(_np(k)), p)

    def _sf(self, k: Any, p: Any) -> Any:
        return binom_gen._sf(self, k, 1.0, p)


# ----- multivariate -----
def _squeeze_output(out: Any, tensor: Any) -> Any:
    return _finish(ops.squeeze(out) if np.ndim(_np(out)) else out, tensor)


class multivariate_normal_gen(_Methods):
    """Multivariate normal: ``multivariate_normal.logpdf(x, mean=None, cov=1)`` (``scipy.stats``'), the
    last axis of x the components; cov a matrix, a vector (diagonal) or a number. Through cholesky
    and a triangular solve: differentiable in x, mean and cov (a symmetric gradient, as PyTorch's).
    A singular cov raises LinAlgError (``allow_singular=True`` is not supported for singular cov).

    >>> import chainrule as cr, numpy as np
    >>> round(float(cr.stats.multivariate_normal.logpdf([0.0, 0.0], cov=np.eye(2))), 6)
    -1.837877
    """

    METHODS = ("logpdf", "pdf")
    name = "multivariate_normal"

    def __call__(self, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> _Frozen:
        return _Frozen(self, (), {"mean": mean, "cov": cov, "allow_singular": allow_singular})

    def __repr__(self) -> str:
        return "<cr.stats.multivariate_normal>"

    def logpdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        out, tensor = self._logpdf(x, mean, cov, allow_singular)
        return _squeeze_output(out, tensor)

    def pdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        out, tensor = self._logpdf(x, mean, cov, allow_singular)
        return _squeeze_output(ops.exp(out), tensor)

    @staticmethod
    def _logpdf(x: Any, mean: Any, cov: Any, allow_singular: bool) -> tuple:
        given = [v for v in (x, mean, cov) if v is not None]
        vals, tensor = _inputs(*given)
        x, rest = vals[0], vals[1:]
        mean = rest.pop(0) if mean is not None else None
        cov = rest.pop(0) if cov is not None else np.asarray(1.0)
        cd = _np(cov)
        if mean is not None:
            dim = _np(mean).size
        else:
            dim = 1 if cd.ndim < 2 else cd.shape[0]
            mean = np.zeros(dim, _np(cov).dtype)
        if dim == 1:
            mean, cov = ops.reshape(mean, (1,)), ops.reshape(cov, (1, 1))
            cd = _np(cov)
        if np.ndim(_np(mean)) != 1 or _np(mean).shape[0] != dim:
            raise ValueError(f"multivariate_normal: array 'mean' must be a vector of length {dim}")
        if cd.ndim == 0:
            cov = cov * np.eye(dim, dtype=cd.dtype)
        elif cd.ndim == 1:
            cov = ops.diag(cov)
        elif cd.ndim != 2 or cd.shape != (dim, dim):
            raise ValueError(f"multivariate_normal: cov of shape {cd.shape} does not fit mean of length {dim}")
        xd = _np(x)
        if xd.ndim == 0:
            x = ops.reshape(x, (1,))
        elif xd.ndim == 1:
            x = ops.reshape(x, (-1, 1) if dim == 1 else (1, -1))
        if _np(x).shape[-1] != dim:
            raise ValueError(f"multivariate_normal: x's last axis has {_np(x).shape[-1]} entries, the mean {dim}")
        try:
            np.linalg.cholesky(_np(cov))
        except np.linalg.LinAlgError as e:
            what = ("a singular cov is not supported (allow_singular=True)" if allow_singular else
                    "when allow_singular is False, the input matrix must be symmetric positive definite")
            raise np.linalg.LinAlgError(f"multivariate_normal: {what}") from e
        chol = ops.linalg.cholesky(cov)
        dev = x - mean
        lead = _np(dev).shape[:-1]
        white = ops.linalg.solve_triangular(chol, ops.transpose(ops.reshape(dev, (-1, dim))), lower=True)
        maha = ops.reshape(ops.sum(white ** 2, axis=0), lead)
        log_det = 2.0 * ops.sum(ops.log(ops.linalg.diagonal(chol)))
        return -0.5 * (dim * _LOG_2PI + log_det + maha), tensor


class dirichlet_gen(_Methods):
    """Dirichlet: ``dirichlet.logpdf(x, alpha)`` (``scipy.stats``'): alpha a vector of K > 0, the FIRST
    axis of x the components (K, or K - 1 with the last 1 - sum); x is checked as SciPy does
    (ValueError off the simplex). Differentiable in x and alpha.

    >>> import chainrule as cr
    >>> round(float(cr.stats.dirichlet.logpdf([0.2, 0.8], [1.5, 2.0])), 6)
    0.293893
    """

    METHODS = ("logpdf", "pdf")
    name = "dirichlet"

    def __call__(self, alpha: Any) -> _Frozen:
        return _Frozen(self, (), {"alpha": alpha})

    def __repr__(self) -> str:
        return "<cr.stats.dirichlet>"

    def logpdf(self, x: Any, alpha: Any) -> Any:
        out, tensor = self._logpdf(x, alpha)
        return _squeeze_output(out, tensor)

    def pdf(self, x: Any, alpha: Any) -> Any:
        out, tensor = self._logpdf(x, alpha)
        return _squeeze_output(ops.exp(out), tensor)

    @staticmethod
    def _logpdf(x: Any, alpha: Any) -> tuple:
        (x, alpha), tensor = _inputs(x, alpha)
        ad = _np(alpha)
        if ad.ndim != 1:
            raise ValueError(f"dirichlet: parameter vector 'alpha' must be one dimensional, got shape {ad.shape}")
        if np.min(ad) <= 0:
            raise ValueError("dirichlet: all parameters alpha must be greater than 0")
        xd = _np(x)
        if xd.ndim == 0 or (xd.shape[0] + 1 != ad.shape[0] and xd.shape[0] != ad.shape[0]):
            raise ValueError(f"dirichlet: x must have K = {ad.shape[0]} or K - 1 entries along its first "
                             f"axis, got shape {xd.shape}")
        if xd.shape[0] != ad.shape[0]:
            x = ops.concatenate([x, ops.reshape(1.0 - ops.sum(x, axis=0), (1,) + xd.shape[1:])], axis=0)
            xd = _np(x)
        if np.min(xd) < 0 or np.max(xd) > 1:
            raise ValueError("dirichlet: each entry of x must lie in [0, 1]")
        zero_lt1 = (xd == 0) & (ad < 1).reshape((-1,) + (1,) * (xd.ndim - 1))
        if zero_lt1.any():
            raise ValueError("dirichlet: each entry in x must be greater than zero if its alpha is less than one")
        if (np.abs(np.sum(xd, 0) - 1.0) > 10e-10).any():
            raise ValueError(f"dirichlet: x must lie on the simplex, but its sums are {np.sum(xd, 0)}")
        lnb = ops.sum(S.gammaln(alpha)) - S.gammaln(ops.sum(alpha))
        return -lnb + ops.sum(ops.transpose(S.xlogy(alpha - 1, ops.transpose(x))), axis=0), tensor


norm = norm_gen("norm")
t = t_gen("t")
gamma = gamma_gen("gamma")
beta = beta_gen("beta")
chi2 = chi2_gen("chi2")
laplace = laplace_gen("laplace")
cauchy = cauchy_gen("cauchy")
expon = expon_gen("expon")
uniform = uniform_gen("uniform")
logistic = logistic_gen("logistic")
poisson = poisson_gen("poisson")
binom = binom_gen("binom")
bernoulli = bernoulli_gen("bernoulli")
multivariate_normal = multivariate_normal_gen()
dirichlet = dirichlet_gen()
