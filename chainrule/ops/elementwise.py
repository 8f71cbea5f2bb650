"""Elementwise primitives (NumPy names). Each op is one entry; composites need no rule.

Kink conventions (PyTorch's): relu'(0) = 0, abs'(0) = 0, sign/round/floor/ceil have zero gradient,
maximum/minimum split the gradient evenly on ties, clip passes the gradient at its bounds
(lo <= x <= hi), sqrt'(0) = inf, arctan2 has gradient 0 at the origin (0, 0).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import scipy.special

from chainrule.core._backend import ndarray, np
from chainrule.core._registry import apply, batch_elementwise, defprim, keeping_zero, passthrough, raw, unary
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import VmapError
from chainrule.core.tensor import Tensor, tensor
from chainrule.core.tensor import wrap as _wrap

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
_GELU_C, _GELU_K = math.sqrt(2.0 / math.pi), 0.044715     # GELU's tanh approximation


def _erf_numpy(x: Any) -> Any:
    return scipy.special.erf(x)


def _sigmoid_numpy(x: Any) -> Any:
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + z), z / (1 + z))


def _softplus_numpy(x: Any) -> Any:
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _gelu_numpy(x: Any) -> Any:
    return 0.5 * x * (1 + _erf_numpy(x * _SQRT_HALF))


def _gelu_tanh_numpy(x: Any) -> Any:
    u = x * x                               # x/2 (1 + tanh(c (x + k x^3))), in place after one copy
    u *= _GELU_C * _GELU_K
    u += _GELU_C
    u *= x
    np.tanh(u, out=u)
    u += 1
    u *= x
    u *= 0.5
    return u


def _gelu_tanh_grad_numpy(g: Any, x: Any) -> Any:
    """``g * gelu_tanh'(x)``: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2), t = tanh(c (x + k x^3))."""
    x2 = x * x
    t = x2 * (_GELU_C * _GELU_K)
    t += _GELU_C
    t *= x
    np.tanh(t, out=t)
    d = x2
    d *= 1.5 * _GELU_C * _GELU_K
    d += 0.5 * _GELU_C
    d *= x
    s = t * t
    np.subtract(1, s, out=s)
    s *= d
    t += 1
    t *= 0.5
    s += t
    if np.shape(g) != s.shape or np.result_type(s, g) != s.dtype:     # broadcast or promoted by g
        return s * g
    s *= g
    return s


def _d2gelu_tanh(x: Any) -> Any:
    """gelu_tanh''(x) = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)), u = c (x + k x^3), in ops (any order)."""
    x2 = x * x
    t = tanh(x * (_GELU_C + _GELU_C * _GELU_K * x2))
    du = _GELU_C + 3 * _GELU_C * _GELU_K * x2
    return (1 - t * t) * (du + 0.5 * x * (6 * _GELU_C * _GELU_K * x - 2 * t * du * du))


def _gelu_tanh_rule(g: Any, out: Any, x: Any) -> Any:
    if type(g) is ndarray and type(x) is ndarray:       # a plain backward: inline, in place
        return _gelu_tanh_grad_numpy(g, x)
    return apply(GELU_TANH_BACKWARD, (g, x))


def _relu_numpy(x: Any) -> Any:
    return np.maximum(x, 0)


def _zero(g: Any, out: Any, *xs: Any, **params: Any) -> Any:
    return zeros_like(g)


def _keep_zero(*rules: Any) -> tuple:
    """``keeping_zero`` (see _registry) on each rule: x/0, x**y at 0, arctan2 at the origin."""
    return tuple(keeping_zero(rule) for rule in rules)


# ----- unary: forward, derivative d out / d x (or the divisor of g where it is a reciprocal) -----
NEGATIVE = defprim("negative", np.negative, rules=(lambda g, out, x: -g,), complex="linear")
EXP = unary("exp", np.exp, lambda out, x: out, saves="out", autocast="float32", complex="holomorphic")
EXP2 = unary("exp2", np.exp2, lambda out, x: out * _LN2, saves="out", autocast="float32", complex="holomorphic")
LOG = unary("log", np.log, over=lambda out, x: x, keep_zero=True, autocast="float32",
            hint="log is only defined for x > 0.", complex="holomorphic")
LOG2 = unary("log2", np.log2, over=lambda out, x: x * _LN2, keep_zero=True, autocast="float32", complex="holomorphic")
LOG10 = unary("log10", np.log10, over=lambda out, x: x * _LN10, keep_zero=True, autocast="float32",
              complex="holomorphic")
LOG1P = unary("log1p", np.log1p, over=lambda out, x: 1 + x, keep_zero=True, autocast="float32", complex="holomorphic")
EXPM1 = unary("expm1", np.expm1, lambda out, x: out + 1, saves="out", autocast="float32", complex="holomorphic")
SQRT = unary("sqrt", np.sqrt, over=lambda out, x: 2 * out, saves="out", keep_zero=True, complex="holomorphic")
CBRT = unary("cbrt", np.cbrt, over=lambda out, x: 3 * out * out, saves="out", keep_zero=True)
SIN = unary("sin", np.sin, lambda out, x: cos(x), complex="holomorphic")
COS = unary("cos", np.cos, lambda out, x: -sin(x), complex="holomorphic")
TAN = unary("tan", np.tan, lambda out, x: 1 + out * out, saves="out", autocast="float32", complex="holomorphic")
ARCSIN = unary("arcsin", np.arcsin, over=lambda out, x: sqrt(1 - x * x), keep_zero=True, autocast="float32",
               complex="holomorphic")
ARCCOS = unary("arccos", np.arccos, over=lambda out, x: -sqrt(1 - x * x), keep_zero=True,
               autocast="float32", complex="holomorphic")
ARCTAN = defprim("arctan", np.arctan, rules=(lambda g, out, x: g / (1 + x * x),), saves="x", complex="holomorphic")
SINH = unary("sinh", np.sinh, lambda out, x: cosh(x), autocast="float32", complex="holomorphic")
COSH = unary("cosh", np.cosh, lambda out, x: sinh(x), autocast="float32", complex="holomorphic")


# tanh'(x) = 1 - tanh(x)^2 as one fused node (PyTorch's tanh_backward): x (1 - y^2), with x the
# cotangent or tangent and y = tanh's output. On Tensors (create_graph, forward-over-reverse, a jvp
# under a graph) it is one node instead of three; on ndarrays the rule runs inline.
def _tanh_rule(g: Any, out: Any, x: Any = None) -> Any:
    if type(g) is ndarray and type(out) is ndarray:
        return g * (1 - out * out)
    return apply(TANH_BACKWARD, (g, out))


TANH_BACKWARD = defprim("tanh_backward", lambda x, y: x * (1 - y * y),
                        rules=(lambda g, out, x, y: _tanh_rule(g, y),
                               lambda g, out, x, y: -2 * g * x * y), saves="x y",
                        needs={0: (1,), 1: (0, 1)}, flops=lambda out, x, y: 3 * int(np.size(out)),
                        complex="holomorphic")
TANH = defprim("tanh", np.tanh, rules=(_tanh_rule,), saves="out", complex="holomorphic")


def tanh_backward(x: Any, y: Any) -> Any:
    """``x * (1 - y**2)``: the cotangent (or tangent) ``x`` of ``y = tanh(.)`` pulled through tanh.

    >>> import chainrule as cr, numpy as np
    >>> cr.numpy.tanh_backward(np.array([2.0]), np.array([0.5]))
    array([1.5])
    """
    return _tanh_rule(x, y)


ARCSINH = defprim("arcsinh", np.arcsinh, rules=(lambda g, out, x: g / sqrt(x * x + 1),), saves="x",
                  complex="holomorphic")
# sqrt(x - 1) sqrt(x + 1), not sqrt(x^2 - 1): the same for real x >= 1, and right for complex x with Re x < 0
ARCCOSH = unary("arccosh", np.arccosh, over=lambda out, x: sqrt(x - 1) * sqrt(x + 1), keep_zero=True,
                complex="holomorphic")
ARCTANH = unary("arctanh", np.arctanh, over=lambda out, x: 1 - x * x, keep_zero=True, complex="holomorphic")
SIGMOID = unary("sigmoid", _sigmoid_numpy, lambda out, x: out * (1 - out), saves="out", complex="holomorphic")
# relu'(0) = 0, as in PyTorch and JAX
# relu'(x) read from the output (out > 0 iff x > 0): the pre-activation need not be kept (PyTorch too)
RELU = defprim("relu", _relu_numpy, rules=(lambda g, out, x: g * (out > 0),), saves="out",
               decide=lambda x: x > 0)
SOFTPLUS = unary("softplus", _softplus_numpy, lambda out, x: sigmoid(x), autocast="float32")
ERF = unary("erf", _erf_numpy, lambda out, x: _TWO_OVER_SQRT_PI * exp(-x * x), complex="holomorphic")
# exact (erf) GELU, torch.nn.functional.gelu's default
GELU = unary("gelu", _gelu_numpy,
             lambda out, x: 0.5 * (1 + erf(x * _SQRT_HALF)) + x * _INV_SQRT_2PI * exp(-0.5 * x * x))
# GELU's tanh approximation (GPT-2's), one node instead of nine: F.gelu(x, approximate="tanh")
# (as tanh_backward: the rule's product is one node on Tensors, its NumPy inline on arrays)
GELU_TANH_BACKWARD = defprim("gelu_tanh_backward", _gelu_tanh_grad_numpy,
                             rules=(lambda ct, out, g, x: _gelu_tanh_rule(ct, None, x),
                                    lambda ct, out, g, x: ct * g * _d2gelu_tanh(x)),
                             saves="x y", needs={0: (1,), 1: (0, 1)})
GELU_TANH = defprim("gelu_tanh", _gelu_tanh_numpy, rules=(_gelu_tanh_rule,), saves="x")


def gelu_tanh(x: Any) -> Any:
    """``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` as one node (``F.gelu(x, approximate="tanh")``).

    >>> from chainrule.ops.elementwise import gelu_tanh
    >>> gelu_tanh(tensor([1.0]))
    tensor([0.841192])
    """
    return apply(GELU_TANH, (x,))


def gelu_tanh_backward(g: Any, x: Any) -> Any:
    """``g * gelu_tanh'(x)``: the cotangent (or tangent) ``g`` pulled through ``gelu_tanh`` at ``x``.

    >>> import numpy as np
    >>> from chainrule.ops.elementwise import gelu_tanh_backward
    >>> gelu_tanh_backward(np.array([2.0]), np.array([0.0]))
    array([1.])
    """
    return _gelu_tanh_rule(g, None, x)

# abs'(0) = 0 (sign(0) = 0), as in PyTorch
ABS = defprim("abs", np.abs, vjps=(lambda g, out, x: g * _sgn(x),),
              jvps=(lambda t, out, x: _along(_sgn(x), t),), saves="x", decide=np.sign, complex="own")


def _sgn(x: Any) -> Any:
    """sign(x) for reals; z / |z| (0 at 0) for complex, differentiable (abs's second derivative)."""
    if x.dtype.kind != "c":
        return sign(x)
    a = abs(x)
    safe = where(a == 0, 1, a)
    # the parts divided separately: exact (x / a would be a complex division, off by an ulp)
    return where(a == 0, 0, _real(x) / safe + _imag(x) / safe * 1j)


def _abs2(x: Any) -> Any:
    """|x|^2: x * x for reals, real(x * conj(x)) for complex (var, norms)."""
    if x.dtype.kind != "c":
        return x * x
    return _real(x * conj(x))


def _along(w: Any, t: Any) -> Any:
    """The tangent of a real function of z whose VJP is ``g * w``: Re(conj(w) t) (t * w for reals)."""
    if w.dtype.kind != "c":
        return t * w
    return _real(conj(w) * t)


def _angle_w(x: Any) -> Any:
    # angle(z) = atan2(y, x): d/dx = -y/|z|^2, d/dy = x/|z|^2, so z.grad = g * i z / |z|^2 (0 at 0)
    if x.dtype.kind != "c":
        return zeros_like(x)
    sq = _real(x * conj(x))
    return where(sq == 0, 0, x * 1j / where(sq == 0, 1, sq))


# The real and imaginary parts (shape.real/imag make them views): real's rule passes g on (the
# engine casts it to the complex input: g + 0j), imag's gives g * 1j (the engine keeps the real
# part, 0, for a real input)
REAL = defprim("real", np.real, vjps=(passthrough,), jvps="linear", complex="own", kind="shape",
               batch=batch_elementwise)
IMAG = defprim("imag", np.imag, vjps=(lambda g, out, x: g * 1j,), jvps="linear", complex="own", kind="shape",
               batch=batch_elementwise)
# conj is its own transpose: conj(t) forward, conj(g) backward (a real loss: z.grad = conj(w.grad))
CONJ = defprim("conj", np.conj, rules=(lambda g, out, x: conj(g),), complex="own")
ANGLE = defprim("angle", np.angle, vjps=(lambda g, out, x: g * _angle_w(x),),
                jvps=(lambda t, out, x: _along(_angle_w(x), t),), saves="x", complex="own")
RECIPROCAL = unary("reciprocal", np.reciprocal, lambda out, x: -(out * out), saves="out", keep_zero=True,
                   autocast="float32", complex="holomorphic")
SQUARE = unary("square", np.square, lambda out, x: 2 * x, complex="holomorphic")
# Piecewise-constant ops: zero gradient everywhere (PyTorch's convention), not "no gradient".
SIGN = defprim("sign", np.sign, rules=(_zero,), kind="discrete")
ROUND = defprim("round", np.round, rules=(_zero,), kind="discrete")
FLOOR = defprim("floor", np.floor, rules=(_zero,), kind="discrete")
CEIL = defprim("ceil", np.ceil, rules=(_zero,), kind="discrete")
COPY = defprim("copy", np.copy, rules=(passthrough,), flops=lambda out, x: 0, kind="shape", complex="linear",
               batch=batch_elementwise)
ALIAS = defprim("alias", lambda x: x.view() if hasattr(x, "view") else x, rules=(passthrough,), complex="linear")


def _astype_forward(x: Any, dtype: Any) -> Any:
    if not hasattr(x, "astype"):
        return np.asarray(x, dtype=dtype)
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        x = x.real                      # complex to real keeps the real part (and says nothing)
    return x.astype(dtype)


# The engine casts a cotangent to its input's dtype, so astype's rule is the identity.
ASTYPE = defprim("astype", _astype_forward, vjps=(passthrough,), jvps="linear", complex="own")


# NumPy's normalised sinc, sin(pi x) / (pi x) (cr.sinc and cr.special.sinc). sinc(x) = sum_k (-1)^k
# (pi x)^(2k) / (2k+1)!, so sinc'(x) = x * sum_{k>=1} c_k (x^2)^(k-1): a Taylor polynomial where
# |pi x| < 1 (the closed form (cos(pi x) - sinc(x)) / x cancels there; the polynomial is exact at 0
# to every order, sinc''(0) = -pi^2/3), the closed form elsewhere; holomorphic.
_SINC_C = (-(math.pi ** 2) / 3,) + tuple((-1) ** k * 2 * k * math.pi ** (2 * k) / math.factorial(2 * k + 1)
                                         for k in range(2, 13))


def _dsinc(x: Any) -> Any:
    small = np.abs(raw(x)) < 1.0 / math.pi
    parts = []
    if small.any():
        xs = where(small, x, 0.0)
        u = xs * xs
        q = _SINC_C[-1]
        for c in reversed(_SINC_C[:-1]):
            q = q * u + c
        parts.append(xs * q)
    if not small.all():
        xb = where(small, 1.0, x)
        parts.append((cos(xb * math.pi) - sinc(xb)) / xb)
    return parts[0] if len(parts) == 1 else where(small, parts[0], parts[1])


SINC = defprim("sinc", np.sinc, rules=(lambda g, out, x: g * _dsinc(x),), saves="x", complex="holomorphic")


# ----- binary -----
ADD = defprim("add", np.add, rules=(passthrough, passthrough), complex="linear")
SUBTRACT = defprim("subtract", np.subtract, rules=(passthrough, lambda g, out, x, y: -g), complex="linear")
MULTIPLY = defprim("multiply", np.multiply,
                   vjps=(lambda g, out, x, y: g * y, lambda g, out, x, y: g * x), jvps="linear",
                   saves="x y", needs={0: (1,), 1: (0,)}, complex="holomorphic")
# divide keeps its operands, not the quotient (as PyTorch): an in-place change of x / y is fine
DIVIDE = defprim("divide", np.divide,
                 rules=_keep_zero(lambda g, out, x, y: g / y, lambda g, out, x, y: -g * (x / y) / y),
                 saves="x y", needs={0: (1,), 1: (0, 1)}, complex="holomorphic")


def _dpow_dexp(out: Any, x: Any) -> Any:
    # d(x**y)/dy = x**y log x, taken as 0 where x == 0 (the limit for y > 0), as PyTorch does
    return where(x == 0, 0.0, out * log(where(x == 0, 1.0, x)))


def _dpow_dbase(x: Any, y: Any) -> Any:
    # d(x**y)/dx = y x**(y-1), taken as 0 where y == 0 (also at x == 0, where 0 * inf is NaN), as PyTorch
    if (type(y) is int or type(y) is float) and y == 2:
        return x * 2.0                       # the square: no power op
    if not np.any(raw(y) == 0):
        return y * power(x, y - 1)
    with np.errstate(divide="ignore", invalid="ignore"):     # 0 * 0**-1 at x == 0: masked below
        d = y * power(x, y - 1)
    return where(y == 0, 0.0, d)


_POW_BASE_KEEPING_ZERO, _POW_EXP = _keep_zero(lambda g, out, x, y: g * _dpow_dbase(x, y),
                                              lambda g, out, x, y: g * _dpow_dexp(out, x))


def _pow_base(g: Any, out: Any, x: Any, y: Any) -> Any:
    # a constant exponent >= 1 has a finite derivative wherever x is: no zero-keeping scan needed
    if (type(y) is int or type(y) is float) and y >= 1:
        return g * _dpow_dbase(x, y)
    return _POW_BASE_KEEPING_ZERO(g, out, x, y)


_pow_base.keeps_zero = True


# the output only for the exponent's gradient (as PyTorch): x ** 2 may be changed in place
POWER = defprim("power", np.power, rules=(_pow_base, _POW_EXP), saves="x y out", autocast="float32",
                out_for=(1,), complex="holomorphic")


# floor_divide is piecewise constant: zero gradient, as floor. mod(x, y) = x - floor(x / y) * y:
# gradient 1 for x and -floor(x / y) for y (PyTorch's remainder). Both keep NumPy's result dtypes.
FLOOR_DIVIDE = defprim("floor_divide", np.floor_divide, rules=(_zero, _zero), kind="discrete",
                       decide=np.floor_divide)
MOD = defprim("mod", np.remainder, rules=(passthrough, lambda g, out, x, y: -g * floor_divide(x, y)),
              saves="x y", needs={1: (0, 1)}, decide=np.floor_divide)


def _extremum(name: str, forward: Any, greater: bool) -> Any:
    """maximum (``greater``) or minimum: the gradient goes to the winner; ties split it evenly (PyTorch)."""
    def share(a: Any, b: Any) -> Any:
        # 1 where a wins, 0 where it loses, 1/2 on ties
        return where(a == b, 0.5, where(a > b if greater else a < b, 1.0, 0.0))
    return defprim(name, forward, rules=(lambda g, out, x, y: g * share(x, y),
                                         lambda g, out, x, y: g * share(y, x)),
                   saves="x y", decide=lambda x, y: np.sign(np.subtract(x, y)))


MAXIMUM = _extremum("maximum", np.maximum, greater=True)
MINIMUM = _extremum("minimum", np.minimum, greater=False)


def _inv_r2(x: Any, y: Any) -> Any:
    # 1 / (x^2 + y^2), taken as 0 at the origin (0/0), where arctan2 has no derivative, as PyTorch
    r2 = x * x + y * y
    if not np.any(raw(r2) == 0):
        return 1.0 / r2
    zero = r2 == 0
    return where(zero, 0.0, 1.0 / where(zero, 1.0, r2))


ARCTAN2 = defprim("arctan2", np.arctan2,
                  rules=_keep_zero(lambda g, out, x, y: g * y * _inv_r2(x, y),
                                   lambda g, out, x, y: -g * x * _inv_r2(x, y)), saves="x y")
# where(cond, x, y): the condition gets no gradient; the untaken branch gets exactly zero.
WHERE = defprim("where", np.where, rules=(None, lambda g, out, c, x, y: where(c, g, 0.0),
                                          lambda g, out, c, x, y: where(c, 0.0, g)), saves="x", complex="linear")


def _clip_forward(x: Any, lo: Any, hi: Any) -> Any:
    return np.minimum(np.maximum(x, lo), hi)


# clip passes the gradient to x on [lo, hi] inclusive (torch.clamp); to lo/hi where they bind.
CLIP = defprim("clip", _clip_forward,
               rules=(lambda g, out, x, lo, hi: g * ((x >= lo) & (x <= hi)),
                      lambda g, out, x, lo, hi: g * (x < lo),
                      lambda g, out, x, lo, hi: g * ((x > hi) & (x >= lo))), saves="x y z",
               decide=lambda x, lo, hi: np.sign(np.subtract(x, lo)) + 3 * np.sign(np.subtract(x, hi)))


# ----- comparisons and logic: non-differentiable (vjps=None), results never require grad -----
def _nondiff(name: str, fn: Any) -> Any:
    return defprim(name, fn, vjps=None, jvps=None, kind="discrete")


LESS = _nondiff("less", np.less)
LESS_EQUAL = _nondiff("less_equal", np.less_equal)
GREATER = _nondiff("greater", np.greater)
GREATER_EQUAL = _nondiff("greater_equal", np.greater_equal)
EQUAL = _nondiff("equal", np.equal)
NOT_EQUAL = _nondiff("not_equal", np.not_equal)
LOGICAL_AND = _nondiff("logical_and", np.logical_and)
LOGICAL_OR = _nondiff("logical_or", np.logical_or)
LOGICAL_NOT = _nondiff("logical_not", np.logical_not)
ISNAN = _nondiff("isnan", np.isnan)
ISFINITE = _nondiff("isfinite", np.isfinite)
ISINF = _nondiff("isinf", np.isinf)


# ----- public functions -----
def _unary_fn(prim: Any) -> Any:
    def fn(x: Any) -> Any:
        return apply(prim, (x,))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}``, differentiable (see ``numpy.{prim.name}``)."
    return fn


def _binary_fn(prim: Any) -> Any:
    def fn(x: Any, y: Any) -> Any:
        return apply(prim, (x, y))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}`` with broadcasting (see ``numpy.{prim.name}``)."
    return fn


negative, exp, exp2, log, log2, log10, log1p, expm1 = map(
    _unary_fn, (NEGATIVE, EXP, EXP2, LOG, LOG2, LOG10, LOG1P, EXPM1))
sqrt, cbrt, sin, cos, tan, arcsin, arccos, arctan = map(
    _unary_fn, (SQRT, CBRT, SIN, COS, TAN, ARCSIN, ARCCOS, ARCTAN))
sinh, cosh, tanh, arcsinh, arccosh, arctanh = map(_unary_fn, (SINH, COSH, TANH, ARCSINH, ARCCOSH, ARCTANH))
sigmoid, relu, softplus, erf, gelu, abs, reciprocal, square = map(
    _unary_fn, (SIGMOID, RELU, SOFTPLUS, ERF, GELU, ABS, RECIPROCAL, SQUARE))
sign, floor, ceil, copy, conj, angle = map(_unary_fn, (SIGN, FLOOR, CEIL, COPY, CONJ, ANGLE))
_real, _imag = map(_unary_fn, (REAL, IMAG))


def sinc(x: Any) -> Any:
    """NumPy's normalised sinc, ``sin(pi x) / (pi x)`` (1 at 0); real or complex. sinc'(0) = 0 and
    sinc''(0) = -pi**2 / 3 exactly (``numpy.sinc``, ``scipy.special.sinc``).

    >>> import chainrule as cr
    >>> cr.sinc(cr.tensor([0.0, 0.5], dtype=cr.float64)).data
    array([1.        , 0.63661977])
    """
    return apply(SINC, (x,))
conjugate = conj
isnan, isfinite, isinf, logical_not = map(_unary_fn, (ISNAN, ISFINITE, ISINF, LOGICAL_NOT))
add, subtract, multiply, divide, power, maximum, minimum, arctan2 = map(
    _binary_fn, (ADD, SUBTRACT, MULTIPLY, DIVIDE, POWER, MAXIMUM, MINIMUM, ARCTAN2))
floor_divide, mod = map(_binary_fn, (FLOOR_DIVIDE, MOD))
less, less_equal, greater, greater_equal, equal, not_equal, logical_and, logical_or = map(
    _binary_fn, (LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL, LOGICAL_AND, LOGICAL_OR))
true_divide = divide
remainder = mod
absolute = abs
pow = power


def alias(x: Any) -> Any:
    """A new tensor viewing all of ``x``'s memory (and sharing its version counter); gradient 1.

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0, 2.0])
    >>> cr.numpy.alias(x).data.base is x.data
    True
    """
    out = apply(ALIAS, (x,))
    return out._shares_memory_with(x) if isinstance(x, Tensor) else out


def round(x: Any, decimals: int = 0) -> Any:
    """Round to ``decimals`` places; zero gradient (see ``numpy.round``)."""
    return apply(ROUND, (x,), {"decimals": decimals} if decimals else None)


around = round


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """Pick from ``x`` where ``condition`` holds, else from ``y``; the condition gets no gradient.

    >>> import chainrule as cr
    >>> cr.where(cr.tensor([True, False]), cr.tensor([1.0, 2.0]), 0.0)
    tensor([1., 0.])
    """
    if x is None and y is None:
        return nonzero(condition)
    return apply(WHERE, (condition, x, y))


def nonzero(x: Any) -> tuple:
    """Indices of the non-zero elements (plain integer arrays; see ``numpy.nonzero``)."""
    if isinstance(x, Tensor) and x._level:
        raise VmapError("nonzero inside cr.vmap: how many indices it returns depends on the values, "
                        "so the examples' results would have different shapes; use cr.where(x != 0, "
                        "a, b) to select elementwise, or call nonzero outside the vmapped function")
    return np.nonzero(raw(x))


def clip(x: Any, a_min: Any = None, a_max: Any = None) -> Any:
    """Limit values to [a_min, a_max]; the gradient passes where a_min <= x <= a_max."""
    kind = getattr(raw(x), "dtype", np.dtype(float)).kind
    lo = (np.iinfo(raw(x).dtype).min if kind in "iu" else -np.inf) if a_min is None else a_min
    hi = (np.iinfo(raw(x).dtype).max if kind in "iu" else np.inf) if a_max is None else a_max
    return apply(CLIP, (x, lo, hi))


def astype(x: Any, dtype: Any) -> Any:
    """Cast to ``dtype``, differentiably (the gradient is cast back to the input's dtype)."""
    dtype = np.dtype(dtype)
    if getattr(x, "dtype", None) == dtype:
        return x
    if dtype.kind not in "fcV" and isinstance(x, Tensor):      # not differentiable: no node
        if x._level:
            return BatchedTensor(astype(x.value, dtype), x._level, x.bsize)
        return _wrap(_astype_forward(x.data, dtype))
    return apply(ASTYPE, (x,), {"dtype": dtype})


def as_tensor(data: Any, dtype: Any = None) -> Any:
    """Return ``data`` as a Tensor, sharing memory where possible (no copy for Tensors/ndarrays).

    >>> import chainrule as cr, numpy as np
    >>> a = np.zeros(2)
    >>> cr.as_tensor(a).data is a
    True
    """
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype == dtype else astype(data, dtype)
    if isinstance(data, ndarray) and (dtype is None or data.dtype == dtype):
        return Tensor(data)
    return tensor(data, dtype=dtype)


def zeros_like(x: Any, dtype: Any = None) -> Any:
    """Zeros of ``x``'s shape: an ndarray for ndarray input, a (constant) Tensor for Tensor input
    (inside vmap: one example's shape, the same for all)."""
    return _constant_like(x, dtype, np.zeros, np.zeros_like)


def ones_like(x: Any, dtype: Any = None) -> Any:
    """Ones of ``x``'s shape, as ``zeros_like``."""
    return _constant_like(x, dtype, np.ones, np.ones_like)


def _constant_like(x: Any, dtype: Any, make: Callable, make_like: Callable) -> Any:
    """``make_like(x)`` (``np.zeros_like``, ``np.ones_like``), a constant Tensor for a Tensor ``x``."""
    if isinstance(x, Tensor) and x._level:
        return _wrap(make(x.shape, dtype=dtype or x.dtype))
    data = make_like(raw(x), dtype=dtype)
    return _wrap(data) if isinstance(x, Tensor) else data


def divmod(x: Any, y: Any) -> tuple:
    """``(floor_divide(x, y), mod(x, y))``, as Python's ``divmod`` and ``numpy.divmod``.

    >>> import chainrule as cr
    >>> cr.divmod(cr.tensor([7, -7]), 2)
    (tensor([ 3, -4]), tensor([1, 1]))
    """
    return floor_divide(x, y), mod(x, y)


def hypot(x: Any, y: Any) -> Any:
    """``sqrt(x**2 + y**2)`` without overflow (scaled by max(|x|, |y|)), composite.

    >>> import chainrule as cr
    >>> cr.hypot(cr.tensor([3e19]), cr.tensor([4e19]))
    tensor([5.e+19])
    """
    m = maximum(abs(x), abs(y))
    safe = where((m == 0) | isinf(m), 1.0, m)
    # gradient 0 at the origin, as the 2-norm's (PyTorch's hypot gives NaN there)
    return where(isinf(m), m, safe * _zero_at_zero(sqrt, square(x / safe) + square(y / safe)))


def _zero_at_zero(fn: Any, x: Any) -> Any:
    """``fn(x)`` for an ``fn`` with ``fn(0) = 0`` whose slope at 0 is infinite (sqrt, x**(1/p)),
    with the gradient at ``x == 0`` taken as 0: the subgradient PyTorch uses for norms and std.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.0, 4.0], requires_grad=True)
    >>> _zero_at_zero(cr.sqrt, x).sum().backward(); x.grad
    tensor([0.  , 0.25])
    """
    zero = x == 0
    return where(zero, 0.0, fn(where(zero, 1.0, x)))


def logaddexp(x: Any, y: Any) -> Any:
    """``log(exp(x) + exp(y))`` computed stably (composite); gradient 0 where both are -inf, as
    ``logsumexp``."""
    m = maximum(x, y)
    same = x == y                    # also both +-inf, where x - y is NaN
    out = m + log1p(exp(-abs(where(same, 0.0, x) - where(same, 0.0, y))))
    return where(same & (m == -np.inf), -np.inf, out)


def fmax(x: Any, y: Any) -> Any:
    """Elementwise maximum ignoring NaNs, as ``numpy.fmax`` (composite of maximum).

    >>> import chainrule as cr
    >>> cr.fmax(cr.tensor([float("nan"), 1.0]), cr.tensor([2.0, 0.0]))
    tensor([2., 1.])
    """
    return where(isnan(y), x, where(isnan(x), y, maximum(x, y)))


def fmin(x: Any, y: Any) -> Any:
    """Elementwise minimum ignoring NaNs, as ``numpy.fmin`` (composite of minimum)."""
    return where(isnan(y), x, where(isnan(x), y, minimum(x, y)))



# ----- NumPy's rounding and floating-point primitives (their NumPy-named functions: numpy/math.py) -----
def _sign_bit(y: Any) -> Any:
    """-1 where y's sign bit is set, else 1 (a constant: copysign's y gets no gradient)."""
    return np.where(np.signbit(raw(y)), -1, 1).astype(np.int8)


# copysign(x, y) = |x| * (+-1 by y's sign bit): d/dx = sign(x) * (+-1), 0 at x == 0 (torch); y: 0
COPYSIGN = defprim("copysign", np.copysign,
                   rules=(lambda g, out, x, y: g * (sign(x) * _sign_bit(y)), _zero),
                   saves="x y", needs={0: (0, 1), 1: ()}, decide=lambda x, y: np.sign(x))
TRUNC = defprim("trunc", np.trunc, rules=(_zero,), kind="discrete")
# modf's fractional part, x - trunc(x) with C's signs and infinities: gradient 1
MODF = defprim("modf", lambda x: np.modf(x)[0], rules=(passthrough,))
FMOD = defprim("fmod", np.fmod, rules=(passthrough, lambda g, out, x, y: -g * apply(TRUNC, (x / y,))),
               saves="x y", needs={1: (0, 1)}, decide=lambda x, y: np.trunc(np.divide(x, y)))
# heaviside(x, y) is y where x == 0: linear in y there, constant elsewhere
HEAVISIDE = defprim("heaviside", np.heaviside, rules=(_zero, lambda g, out, x, y: g * equal(x, 0)),
                    saves="x", needs={0: (), 1: (0,)}, decide=lambda x, y: np.sign(x))
SPACING = defprim("spacing", np.spacing, rules=(_zero,), kind="discrete")
NEXTAFTER = defprim("nextafter", np.nextafter, rules=(passthrough, _zero))
# ldexp(x, e) = x * 2**e, exactly: linear in x (its rule is ldexp itself), e an integer
LDEXP = defprim("ldexp", np.ldexp, rules=(lambda g, out, x, y: apply(LDEXP, (g, y)), None),
                saves="y", needs={0: (1,), 1: ()}, hint="The exponent must be an integer array.")
