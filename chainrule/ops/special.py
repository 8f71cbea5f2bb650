"""``cr.special``: SciPy's special functions (``scipy.special``'s names and arguments), differentiable.

Forward values are SciPy's own (``scipy.special`` ufuncs). Each elementwise function is one primitive
whose rules are written with chainrule ops (mostly other ``cr.special`` functions), so derivatives
of any order work; logsumexp, softmax, log_softmax and multigammaln are composites. ``NUMPY`` maps
the scipy.special ufuncs here, so ``scipy.special.gammaln(tensor)`` runs ``cr.special.gammaln``.

Arguments without a derivative in chainrule (polygamma's n, betainc's a and b, gammainc's a, zeta's
x) may be constants or tensors; asking for their gradient raises a GraphError naming the argument.
Edge points: gammaln'(x) = digamma(x) (-inf at 0, NaN at the negative integers, as SciPy's psi and
PyTorch); xlogy(0, y) = 0, with gradient log(y) in x (0 where y <= 0) and 0 in y (also at y == 0);
logsumexp's b == 0 entries get gradient 0 in a (and the partial derivative exp(a - out) * sign in b).
"""
from __future__ import annotations

import math
from typing import Any

import scipy.special as _sc

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, accumulate
from chainrule.core._registry import apply, defprim, keeping_zero, raw, unary
from chainrule.core.errors import GraphError
from chainrule.core.tensor import Tensor, wrap
from chainrule.ops.elementwise import abs, astype, erf, exp, isfinite, log, log1p, sign, where
from chainrule.ops.elementwise import sinc as _sinc
from chainrule.ops.nn import log_softmax as _log_softmax_along
from chainrule.ops.nn import softmax as _softmax_along
from chainrule.ops.reduction import amax
from chainrule.ops.reduction import logsumexp as _logsumexp
from chainrule.ops.reduction import sum as _sum
from chainrule.ops.shape import reshape, squeeze, stack

_PI = math.pi
_SQRT_PI = math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
_SQRT_HALF = math.sqrt(0.5)


def _no_derivative(fn: str, arg: str, position: str, wrt: str) -> Any:
    """The rule of an argument chainrule has no derivative for: a clear error, raised only when a
    gradient (or tangent) actually reaches that argument (constants never call it)."""
    def rule(g: Any, out: Any, *xs: Any, **params: Any) -> Any:
        raise GraphError(f"{fn} is not differentiable with respect to {arg} (its {position} argument) in "
                         f"chainrule: only {wrt} is. Pass {arg} as a constant or detach it (.detach())")
    return rule


def _guarded(*rules: Any) -> tuple:
    return tuple(keeping_zero(r) for r in rules)


def _c(v: Any) -> Any:
    """A constant argument inside a rule: Python numbers as float64 arrays (an op of Python numbers
    alone would compute in the default dtype, float32)."""
    return np.asarray(v, np.float64) if type(v) in (float, int, bool) else v


# ----- gamma family -----
GAMMALN = unary("gammaln", _sc.gammaln, lambda out, x: digamma(x), keep_zero=True)
GAMMA = unary("gamma", _sc.gamma, lambda out, x: out * digamma(x), saves="x out", keep_zero=True,
              complex="holomorphic")
LOGGAMMA = unary("loggamma", _sc.loggamma, lambda out, x: digamma(x), keep_zero=True, complex="holomorphic")
DIGAMMA = unary("digamma", _sc.psi, lambda out, x: polygamma(1, x), keep_zero=True)
POLYGAMMA = defprim("polygamma", _sc.polygamma,
                    rules=_guarded(_no_derivative("polygamma", "n", "first", "x"),
                                   lambda g, out, n, x: g * polygamma(n + 1, x)),
                    saves="x y", needs={0: (), 1: (0, 1)})


def _dbeta(out: Any, a: Any, b: Any) -> Any:
    return digamma(a) - digamma(a + b)


BETA = defprim("beta", _sc.beta,
               rules=_guarded(lambda g, out, a, b: g * out * _dbeta(out, a, b),
                              lambda g, out, a, b: g * out * _dbeta(out, b, a)), saves="x y out")
BETALN = defprim("betaln", _sc.betaln,
                 rules=_guarded(lambda g, out, a, b: g * _dbeta(out, a, b),
                                lambda g, out, a, b: g * _dbeta(out, b, a)), saves="x y")
def _dbetainc(a: Any, b: Any, x: Any) -> Any:
    """d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    return exp(xlogy(a - 1, x) + xlog1py(b - 1, -x) - betaln(_c(a), b))


BETAINC = defprim("betainc", _sc.betainc,
                  rules=_guarded(_no_derivative("betainc", "a", "first", "x"),
                                 _no_derivative("betainc", "b", "second", "x"),
                                 lambda g, out, a, b, x: g * _dbetainc(a, b, x)),
                  saves="x y z", needs={0: (), 1: (), 2: (0, 1, 2)})


def _dgammainc(a: Any, x: Any) -> Any:
    """d/dx P(a, x) = x^(a-1) e^(-x) / Gamma(a)."""
    return exp(xlogy(a - 1, x) - x - gammaln(_c(a)))


GAMMAINC = defprim("gammainc", _sc.gammainc,
                   rules=_guarded(_no_derivative("gammainc", "a", "first", "x"),
                                  lambda g, out, a, x: g * _dgammainc(a, x)),
                   saves="x y", needs={0: (), 1: (0, 1)})
GAMMAINCC = defprim("gammaincc", _sc.gammaincc,
                    rules=_guarded(_no_derivative("gammaincc", "a", "first", "x"),
                                   lambda g, out, a, x: -g * _dgammainc(a, x)),
                    saves="x y", needs={0: (), 1: (0, 1)})


def _zeta_forward(x: Any, q: Any, riemann: bool = False) -> Any:
    return _sc.zeta(x) if riemann else _sc.zeta(x, q)


ZETA = defprim("zeta", _zeta_forward,
               rules=_guarded(_no_derivative("zeta", "x", "first", "q"),
                              lambda g, out, x, q, riemann=False: -g * x * zeta(x + 1, q)),
               saves="x y", needs={0: (), 1: (0, 1)})

# ----- error function family (erf itself is cr.erf, ops/elementwise.py) -----
ERFC = unary("erfc", _sc.erfc, lambda out, x: -_TWO_OVER_SQRT_PI * exp(-x * x), complex="holomorphic")
ERFINV = unary("erfinv", _sc.erfinv, lambda out, x: 0.5 * _SQRT_PI * exp(erfinv(x) ** 2),  # keeps x,
               keep_zero=True, autocast="float32")                        # not out, as PyTorch
ERFCINV = unary("erfcinv", _sc.erfcinv, lambda out, x: -0.5 * _SQRT_PI * exp(out * out), saves="out",
                keep_zero=True)
# x sqrt(pi) erfcx(x) - 1 = sum_{n>=1} (-1)^n (2n-1)!! / (2x^2)^n (asymptotic): for x >= 8, 20 terms
# are exact to 1e-17 relative
_ERFCX_LARGE = 8.0
_ERFCX_SERIES = tuple((-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(1, 21))


def _derfcx(out: Any, x: Any) -> Any:
    """erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi), whose terms cancel for large x (2% off at 1e7, 0 at
    1e8); for real x >= 8 it is 2/sqrt(pi) times the asymptotic series instead (its own derivative
    is the next order's rule)."""
    xd = raw(x)
    near = 2 * x * out - _TWO_OVER_SQRT_PI
    large = None if np.iscomplexobj(xd) else np.asarray(xd >= _ERFCX_LARGE)
    if large is None or not large.any():
        return near
    r = 1 / where(large, x, _ERFCX_LARGE)                 # (a harmless point where it is not used)
    u = 0.5 * r * r
    series = 0.0
    for c in reversed(_ERFCX_SERIES):                        # Horner: sum c_n u^n
        series = (series + c) * u
    return where(large, _TWO_OVER_SQRT_PI * series, near)


ERFCX = unary("erfcx", _sc.erfcx, _derfcx, saves="x out", complex="holomorphic")
NDTR = unary("ndtr", _sc.ndtr, lambda out, x: _INV_SQRT_2PI * exp(-0.5 * x * x), complex="holomorphic")
NDTRI = unary("ndtri", _sc.ndtri, lambda out, x: _SQRT_2PI * exp(0.5 * out * out), saves="out", keep_zero=True)
# phi(x) / Phi(x) = 1 / (sqrt(pi/2) erfcx(-x/sqrt 2)): no overflow or cancellation for any x
LOG_NDTR = unary("log_ndtr", _sc.log_ndtr, over=lambda out, x: _SQRT_HALF_PI * erfcx(-_SQRT_HALF * x),
                 complex="holomorphic")

# ----- logistic family -----
EXPIT = unary("expit", _sc.expit, lambda out, x: out * expit(-x), saves="x out")
LOGIT = unary("logit", _sc.logit, over=lambda out, x: x * (1 - x), keep_zero=True)
LOG_EXPIT = unary("log_expit", _sc.log_expit, lambda out, x: expit(-x))


# ----- x log y and entropies -----
def _log_unless_zero(x: Any, y: Any, pole: float, log_fn: Any) -> Any:
    """d/dx x log(y - pole) = log(y - pole), taken as 0 where x == 0 and y <= pole (PyTorch's)."""
    yd = raw(y)
    beyond = (yd == pole) if np.iscomplexobj(yd) else (yd <= pole)
    mask = (raw(x) == 0) & beyond
    return where(mask, 0, log_fn(where(mask, pole + 1, y))) if mask.any() else log_fn(y)


def _x_over(x: Any, y: Any, pole: float) -> Any:
    """d/dy x log(y - pole) = x / (y - pole), taken as 0 where x == 0 (also at y == pole)."""
    both = (raw(x) == 0) & (raw(y) == pole)
    return x / (where(both, 1 + pole, y) - pole) if both.any() else x / (y - pole)


XLOGY = defprim("xlogy", _sc.xlogy,
                rules=_guarded(lambda g, out, x, y: g * _log_unless_zero(x, y, 0, log),
                               lambda g, out, x, y: g * _x_over(x, y, 0)), saves="x y", complex="holomorphic")
XLOG1PY = defprim("xlog1py", _sc.xlog1py,
                  rules=_guarded(lambda g, out, x, y: g * _log_unless_zero(x, y, -1, log1p),
                                 lambda g, out, x, y: g * _x_over(x, y, -1)), saves="x y", complex="holomorphic")
ENTR = unary("entr", _sc.entr, lambda out, x: -(log(x) + 1), keep_zero=True)
REL_ENTR = defprim("rel_entr", _sc.rel_entr,
                   rules=_guarded(lambda g, out, x, y: g * (log(x / y) + 1),
                                  lambda g, out, x, y: -g * (x / y)), saves="x y")
KL_DIV = defprim("kl_div", _sc.kl_div,
                 rules=_guarded(lambda g, out, x, y: g * log(x / y),
                                lambda g, out, x, y: g * (1 - x / y)), saves="x y")


# ----- modified Bessel functions of order 0 and 1 (i0e, i1e: scaled by exp(-|x|)) -----
def _i1_over_x(i1x: Any, x: Any, limit: float) -> Any:
    """i0(x) - i1(x)/x (or its scaled form), with its limit at x == 0."""
    zero = raw(x) == 0
    return where(zero, limit, -i1x / where(zero, 1, x))


I0 = unary("i0", _sc.i0, lambda out, x: i1(x))
I0E = unary("i0e", _sc.i0e, lambda out, x: i1e(x) - sign(x) * out, saves="x out", decide=np.sign)
I1 = unary("i1", _sc.i1, lambda out, x: i0(x) + _i1_over_x(out, x, -0.5), saves="x out")
I1E = unary("i1e", _sc.i1e, lambda out, x: i0e(x) + _i1_over_x(out, x, -0.5) - sign(x) * out, saves="x out")




# ----- public functions -----
def _fn1(prim: Any, doc: str) -> Any:
    def fn(x: Any) -> Any:
        return apply(prim, (x,))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    return fn


def _fn2(prim: Any, args: tuple, doc: str) -> Any:
    def fn(x: Any, y: Any) -> Any:
        return apply(prim, (x, y))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    fn.__text_signature__ = f"({', '.join(args)})"
    return fn


gammaln = _fn1(GAMMALN, """``log|Gamma(x)|`` (``scipy.special.gammaln``); derivative digamma(x) (-inf at 0, NaN at the
    negative integers, where gammaln is inf).

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0, 3.0], requires_grad=True)
    >>> cr.special.gammaln(x).sum().backward(); x.grad
    tensor([-0.5772157,  0.9227843])
    """)
gamma = _fn1(GAMMA, "``Gamma(x)`` (``scipy.special.gamma``), real or complex; derivative gamma(x) digamma(x).")
loggamma = _fn1(LOGGAMMA, "Principal branch of ``log Gamma(x)`` (``scipy.special.loggamma``), real (x > 0) or "
                          "complex; derivative digamma(x).")
digamma = _fn1(DIGAMMA, "``Gamma'(x) / Gamma(x)`` (``scipy.special.psi``); derivative polygamma(1, x).")
psi = digamma
erfc = _fn1(ERFC, "``1 - erf(x)`` (``scipy.special.erfc``), real or complex.")
erfinv = _fn1(ERFINV, "Inverse of erf (``scipy.special.erfinv``); derivative sqrt(pi)/2 exp(erfinv(x)^2).")
erfcinv = _fn1(ERFCINV, "Inverse of erfc (``scipy.special.erfcinv``).")
erfcx = _fn1(ERFCX, "Scaled complementary error function ``exp(x^2) erfc(x)`` (``scipy.special.erfcx``).")
ndtr = _fn1(NDTR, "Standard normal CDF (``scipy.special.ndtr``), real or complex.")
ndtri = _fn1(NDTRI, "Inverse of ndtr (``scipy.special.ndtri``).")
log_ndtr = _fn1(LOG_NDTR, "``log(ndtr(x))`` without underflow (``scipy.special.log_ndtr``); its derivative "
                          "phi(x) / ndtr(x) is computed through erfcx, accurate for any x.")
expit = _fn1(EXPIT, """Logistic sigmoid ``1 / (1 + exp(-x))`` (``scipy.special.expit``).

    >>> import chainrule as cr, numpy as np
    >>> cr.special.expit(np.array([0.0]))
    array([0.5])
    """)
logit = _fn1(LOGIT, "``log(x / (1 - x))`` (``scipy.special.logit``); derivative 1 / (x (1 - x)).")
log_expit = _fn1(LOG_EXPIT, "``log(expit(x))`` (``scipy.special.log_expit``); derivative expit(-x).")
xlogy = _fn2(XLOGY, ("x", "y"), """``x * log(y)``, 0 where x == 0 (``scipy.special.xlogy``). Gradient: log(y) in x
    (0 where x == 0 and y <= 0, as PyTorch), x / y in y (0 where x == 0, also at y == 0, where
    PyTorch gives NaN).

    >>> import chainrule as cr
    >>> x, y = cr.tensor([0.0, 0.0], requires_grad=True), cr.tensor([0.0, 2.0], requires_grad=True)
    >>> cr.special.xlogy(x, y).sum().backward(); x.grad, y.grad
    (tensor([0.       , 0.6931472]), tensor([0., 0.]))
    """)
xlog1py = _fn2(XLOG1PY, ("x", "y"), "``x * log1p(y)``, 0 where x == 0 (``scipy.special.xlog1py``); gradient "
                                    "log1p(y) in x (0 where x == 0 and y <= -1), x / (1 + y) in y (0 where x == 0).")
entr = _fn1(ENTR, "``-x log x`` (0 at 0, -inf for x < 0; ``scipy.special.entr``); derivative -(log x + 1).")
rel_entr = _fn2(REL_ENTR, ("x", "y"), "``x log(x / y)`` (``scipy.special.rel_entr``); derivatives log(x / y) + 1 "
                                      "and -x / y.")
kl_div = _fn2(KL_DIV, ("x", "y"), "``x log(x / y) - x + y`` (``scipy.special.kl_div``); derivatives log(x / y) "
                                  "and 1 - x / y.")
beta = _fn2(BETA, ("a", "b"), "Beta function ``B(a, b)`` (``scipy.special.beta``).")
betaln = _fn2(BETALN, ("a", "b"), "``log|B(a, b)|`` (``scipy.special.betaln``).")
gammainc = _fn2(GAMMAINC, ("a", "x"), "Regularized lower incomplete gamma ``P(a, x)`` (``scipy.special.gammainc``); "
                                      "differentiable in x only (a: a GraphError if its gradient is asked).")
gammaincc = _fn2(GAMMAINCC, ("a", "x"), "Regularized upper incomplete gamma ``Q(a, x)`` "
                                        "(``scipy.special.gammaincc``); differentiable in x only.")
i0 = _fn1(I0, "Modified Bessel function of order 0 (``scipy.special.i0``); derivative i1(x).")
i0e = _fn1(I0E, "Exponentially scaled i0, ``exp(-|x|) i0(x)`` (``scipy.special.i0e``); derivative "
                "i1e(x) - sign(x) i0e(x) (0 at the kink x = 0).")
i1 = _fn1(I1, "Modified Bessel function of order 1 (``scipy.special.i1``); derivative i0(x) - i1(x)/x (1/2 at 0).")
i1e = _fn1(I1E, "Exponentially scaled i1 (``scipy.special.i1e``); derivative i0e(x) - i1e(x)/x - sign(x) i1e(x).")


sinc = _sinc                         # NumPy's normalised sinc: one primitive (ops.elementwise)


def polygamma(n: Any, x: Any) -> Any:
    """The n-th derivative of digamma (``scipy.special.polygamma``); differentiable in x (derivative
    polygamma(n + 1, x)); n is an integer argument without a gradient.

    >>> import chainrule as cr, numpy as np
    >>> round(float(cr.special.polygamma(1, np.array(1.0))), 12)    # pi^2 / 6
    1.644934066848
    """
    return apply(POLYGAMMA, (n, x))


def betainc(a: Any, b: Any, x: Any) -> Any:
    """Regularized incomplete beta ``I_x(a, b)`` (``scipy.special.betainc``); differentiable in x
    (derivative x^(a-1) (1-x)^(b-1) / B(a, b)); a GraphError names a or b if their gradient is asked."""
    return apply(BETAINC, (a, b, x))


def zeta(x: Any, q: Any = None) -> Any:
    """Riemann (q None) or Hurwitz zeta function (``scipy.special.zeta``); differentiable in q
    (derivative -x zeta(x + 1, q)); a GraphError names x if its gradient is asked."""
    if q is None:
        return apply(ZETA, (x, 1.0), {"riemann": True})
    return apply(ZETA, (x, q))


def multigammaln(a: Any, d: Any) -> Any:
    """Log of the multivariate gamma function of dimension d (``scipy.special.multigammaln``): a
    composite of gammaln.

    >>> import chainrule as cr, numpy as np
    >>> round(float(cr.special.multigammaln(np.array(23.5), 10)), 10)
    457.1766747829
    """
    dim = np.asarray(d)[()]
    if not np.isscalar(dim) or np.floor(dim) != dim or dim < 1:
        raise ValueError(f"multigammaln: d should be a positive integer (dimension), got {d!r}")
    dim = int(dim)
    batched = _batched(a)
    if not batched and np.any(np.asarray(raw(a)) <= 0.5 * (dim - 1)):
        raise ValueError(f"multigammaln: condition a > 0.5 * (d - 1) = {0.5 * (dim - 1)} not met")
    # SciPy's order of operations (a float64 constant, as SciPy's; then the sum of the stacked terms)
    res = np.float64((dim * (dim - 1) * 0.25) * np.log(np.pi))
    out = res + _sum(stack([gammaln(a - (j - 1.0) / 2) for j in range(1, dim + 1)]), axis=0)
    # inside cr.vmap the check cannot raise for some examples only: NaN where it fails
    return where(a <= 0.5 * (dim - 1), np.nan, out) if batched else out


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False) -> Any:
    """``log(sum(b * exp(a), axis))`` (``scipy.special.logsumexp``); with ``return_sign=True``, the
    pair (log|sum|, sign(sum)) (the sign has no gradient). Without b: cr.logsumexp (gradient the
    softmax; 0 where every entry is -inf). With b: entries with b == 0 are left out of the sum (a
    may be inf or NaN there, as SciPy) and get gradient 0 in a; their gradient in b is the partial
    derivative sign * exp(a - out) (0 where a is not finite); a slice whose sum is 0 gives -inf with
    gradient 0; a negative sum without return_sign gives NaN (gradient 0).

    >>> import chainrule as cr
    >>> a = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> out, sgn = cr.special.logsumexp(a, b=cr.tensor([1.0, -1.0]), return_sign=True)
    >>> round(float(out), 6), float(sgn)
    (1.541325, -1.0)
    """
    if b is None:
        out = _logsumexp(a, axis, keepdims)
        if not return_sign:
            return out
        o = raw(out)
        return out, _constant_like(out, np.where(np.isnan(o), o, np.where(o == -np.inf, 0, 1)).astype(o.dtype))
    a, b = (x if isinstance(x, Tensor) else np.asarray(x) for x in (a, b))
    if a.dtype in LOW_PRECISION or b.dtype in LOW_PRECISION:     # in float32, rounded once (as cr.logsumexp)
        res = logsumexp(a.astype(np.float32), axis, b.astype(np.float32), keepdims, return_sign)
        try:
            low = np.result_type(a.dtype, b.dtype)
        except TypeError:                     # bfloat16 with float16: no common type; float32 it stays
            return res
        return tuple(r.astype(low) for r in res) if return_sign else res.astype(low)
    if _batched(a, b):
        return _logsumexp_b_ops(a, b, axis, keepdims, return_sign)
    ad, bd = raw(a), raw(b)
    ad_b, bd_b = np.broadcast_arrays(np.asarray(ad), np.asarray(bd))
    keep = bd_b != 0
    ignored = ~keep & ~np.isfinite(ad_b)
    a_max = np.amax(np.where(keep, ad_b, -np.inf), axis=axis, keepdims=True)
    a_max = np.where(np.isfinite(a_max), a_max, 0)
    s = _sum(b * exp(where(ignored, -np.inf, a) - a_max), axis=axis, keepdims=keepdims)
    sd = raw(s)
    zero = sd == 0
    shift = a_max if keepdims else np.squeeze(a_max, axis=axis)
    out = where(zero, -np.inf, log(abs(where(zero, 1, s))) + shift)
    sgn = np.sign(sd)
    if return_sign:
        return out, _constant_like(out, sgn.astype(raw(out).dtype))
    return where(sgn < 0, np.nan, out)


def _logsumexp_b_ops(a: Any, b: Any, axis: Any, keepdims: bool, return_sign: bool) -> Any:
    """``logsumexp`` with ``b``, its constants (the shift, the masks, the sign) from chainrule ops
    (inside cr.vmap, where no value can be read): the same values and gradients."""
    keep = b != 0
    ignored = ~keep & ~isfinite(a)
    a_max = amax(where(keep, a.detach() if isinstance(a, Tensor) else a, -np.inf), axis=axis, keepdims=True)
    a_max = where(isfinite(a_max), a_max, 0)
    s = _sum(b * exp(where(ignored, -np.inf, a) - a_max), axis=axis, keepdims=keepdims)
    zero = s == 0
    shift = a_max if keepdims else squeeze(a_max, axis=axis)
    out = where(zero, -np.inf, log(abs(where(zero, 1, s))) + shift)
    sgn = sign(s.detach())
    if return_sign:
        return out, astype(sgn, out.dtype)
    return where(sgn < 0, np.nan, out)


def _batched(*xs: Any) -> bool:
    """Whether any of ``xs`` is a batched tensor (inside cr.vmap): its values cannot be read."""
    return any(isinstance(x, Tensor) and x._level for x in xs)


def _constant_like(like: Any, data: Any) -> Any:
    """``data`` as a constant of ``like``'s kind: a Tensor without grad for a Tensor, else as is."""
    return wrap(data) if isinstance(like, Tensor) else data


def _over_axes(x: Any, axis: Any, along: Any, composite: Any) -> Any:
    """``along(x, axis)`` over SciPy's axis argument: None is every entry, a tuple several axes."""
    if axis is None:
        shape = np.shape(raw(x))
        return reshape(along(reshape(x, (-1,)), 0), shape)
    if isinstance(axis, (tuple, list)):
        if len(axis) == 1:
            return along(x, axis[0])
        if getattr(x, "dtype", None) in LOW_PRECISION:      # in float32, rounded once (as the primitives)
            return accumulate(composite, x, tuple(axis))
        return composite(x, tuple(axis))
    return along(x, axis)


def _float(x: Any) -> Any:
    """Integer and bool inputs as float64, as SciPy computes them."""
    d = raw(x)
    if isinstance(x, Tensor):
        return astype(x, np.float64) if x.dtype.kind in "biu" else x
    return np.asarray(d, np.float64) if np.asarray(d).dtype.kind in "biu" else x


def softmax(x: Any, axis: Any = None) -> Any:
    """``exp(x) / sum(exp(x), axis)`` (``scipy.special.softmax``): axis None (the default) is over
    every entry, unlike ``cr.softmax`` (the last axis); a tuple, over several axes.

    >>> import chainrule as cr, numpy as np
    >>> cr.special.softmax(np.zeros((2, 2)))
    array([[0.25, 0.25],
           [0.25, 0.25]])
    """
    return _over_axes(_float(x), axis, _softmax_along,
                      lambda x, axes: exp(x - _logsumexp(x, axes, True)))


def log_softmax(x: Any, axis: Any = None) -> Any:
    """``x - logsumexp(x, axis)`` (``scipy.special.log_softmax``): axis None is over every entry."""
    return _over_axes(_float(x), axis, _log_softmax_along, lambda x, axes: x - _logsumexp(x, axes, True))


NAMES: tuple = ()       # the functions live under cr.special, not at the top level
# scipy.special's ufuncs (they honour __array_ufunc__): scipy.special.gammaln(tensor) runs ours.
# polygamma, multigammaln, zeta, logsumexp, softmax and log_softmax are Python functions in SciPy:
# call cr.special.<name> on tensors.
NUMPY: dict = {
    _sc.gammaln: gammaln, _sc.gamma: gamma, _sc.loggamma: loggamma, _sc.psi: digamma,
    _sc.beta: beta, _sc.betaln: betaln, _sc.betainc: betainc, _sc.gammainc: gammainc, _sc.gammaincc: gammaincc,
    _sc.erf: erf, _sc.erfc: erfc, _sc.erfinv: erfinv, _sc.erfcinv: erfcinv, _sc.erfcx: erfcx,
    _sc.ndtr: ndtr, _sc.ndtri: ndtri, _sc.log_ndtr: log_ndtr,
    _sc.expit: expit, _sc.logit: logit, _sc.log_expit: log_expit,
    _sc.xlogy: xlogy, _sc.xlog1py: xlog1py, _sc.entr: entr, _sc.rel_entr: rel_entr, _sc.kl_div: kl_div,
    _sc.i0: i0, _sc.i0e: i0e, _sc.i1: i1, _sc.i1e: i1e,
}

__all__ = ["gammaln", "gamma", "loggamma", "digamma", "psi", "polygamma", "multigammaln", "beta", "betaln",
           "betainc", "erf", "erfc", "erfinv", "erfcinv", "erfcx", "ndtr", "ndtri", "log_ndtr", "expit", "logit",
           "log_expit", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div", "logsumexp", "softmax", "log_softmax",
           "i0", "i0e", "i1", "i1e", "sinc", "zeta", "gammainc", "gammaincc"]
