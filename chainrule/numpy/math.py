"""NumPy's elementwise and small math functions: differentiable where the result is a real or complex
function of the input, plain (integer/boolean, never requiring grad) where it is discrete by nature.

Conventions (PyTorch's where it has the function):

* piecewise-constant results have zero gradient: ``trunc``/``fix``, ``heaviside`` in x1 (in x2 it is
  1 where x1 == 0, the value there),
  ``spacing``, ``modf``'s integral part, ``copysign``'s second input (and its first at 0, as torch);
* piecewise-linear ones pass the gradient: ``fmod`` (1 for x, ``-trunc(x / y)`` for y, as torch),
  ``modf``'s fractional part, ``frexp``'s mantissa (``2**-e``), ``nextafter`` (1 for x, 0 for y: the
  result is x plus a piecewise-constant step), ``unwrap`` (the cumulative correction is constant);
* ``nan_to_num`` passes the gradient where the input is finite, 0 where a value was replaced;
* ``sinc``: NumPy's normalised sin(pi x) / (pi x); sinc'(0) = 0 and sinc''(0) = -pi**2 / 3 exactly;
* ``i0``'s derivative is i1 (``scipy.special.i1``), i1's is i0 - i1 / x (1/2 at 0);
* ``polyfit`` returns NumPy's coefficients, differentiable in x, y and w (the derivative of the
  least-squares solution, full column rank assumed); ``roots`` and ``poly`` of a matrix run on the
  ``eigvals`` primitive (distinct roots assumed), and return real arrays where NumPy does.

Functions of plain arrays (no Tensor) return NumPy's own results. The primitives under copysign,
trunc/fix, modf, fmod, heaviside, spacing, nextafter and ldexp/frexp are in ``chainrule.ops.elementwise``;
``i0`` is a composite of ``cr.special.i0`` with NumPy's dtypes.
"""
from __future__ import annotations

import builtins
import inspect
import math
from typing import Any, Callable

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION, get_default_dtype
from chainrule.core._registry import PRIMITIVES, apply, constant_arg, no_out, raw
from chainrule.core.batched import is_batched
from chainrule.core.errors import ShapeError, VmapError
from chainrule.core.tensor import Tensor, tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.ops.elementwise import (
    COPYSIGN,
    FMOD,
    HEAVISIDE,
    LDEXP,
    MODF,
    NEXTAFTER,
    SPACING,
    TRUNC,
    abs,
    astype,
    conj,
    copy,
    equal,
    exp2,
    floor,
    isfinite,
    isnan,
    log1p,
    log2,
    maximum,
    mod,
    multiply,
    power,
    sqrt,
    where,
)
from chainrule.ops.elementwise import sinc as sinc  # (listed in __all__: cr.sinc, np.sinc dispatch)
from chainrule.ops.linalg import matmul, solve
from chainrule.ops.reduction import argsort, cumsum, sum
from chainrule.ops.shape import (
    atleast_1d,
    concatenate,
    expand_dims,
    getitem,
    imag,
    real,
    stack,
    take_along_axis,
    transpose,
    view_as_complex,
)
from chainrule.ops.special import i0 as special_i0

_PI = math.pi
_LOG2E = 1.0 / math.log(2.0)          # NumPy's NPY_LOG2E, 1.4426950408889634


def _has_tensor(args: Any) -> bool:
    for a in args:
        if isinstance(a, Tensor) or (type(a) in (list, tuple) and _has_tensor(a)):
            return True
    return False


def _zeros_like(x: Any) -> Any:
    """Zeros of ``x``'s (example) shape and dtype: a constant Tensor for a Tensor."""
    z = np.zeros(np.shape(raw(x)), _dtype(x))
    return _wrap(z) if isinstance(x, Tensor) else z


def _dtype(x: Any) -> Any:
    dt = getattr(raw(x), "dtype", None)
    return np.asarray(x).dtype if dt is None else dt


def _ufunc_fn(prim: Any, name: str, doc: str) -> Callable:
    """A public function for a binary primitive, with NumPy's ``out=None`` (refused)."""
    def fn(x1: Any, x2: Any, out: Any = None) -> Any:
        no_out(name, out)
        return apply(prim, (x1, x2))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


# ----- (a) differentiable functions -----
copysign = _ufunc_fn(COPYSIGN, "copysign", """``|x1|`` with the sign (bit) of ``x2``; gradient ``+-sign(x1)`` for x1
    (0 at x1 == 0, as torch), 0 for x2.

    >>> import chainrule as cr
    >>> cr.copysign(cr.tensor([1.0, -2.0]), -0.0)
    tensor([-1., -2.])
    """)
fmod = _ufunc_fn(FMOD, "fmod", """C's remainder (the sign of ``x1``); gradient 1 for x1, ``-trunc(x1 / x2)`` for x2.

    >>> import chainrule as cr
    >>> cr.fmod(cr.tensor([-7.0, 7.0]), 3.0)
    tensor([-1.,  1.])
    """)
heaviside = _ufunc_fn(HEAVISIDE, "heaviside", """0 for ``x1 < 0``, ``x2`` at 0, 1 for ``x1 > 0``; gradient 0 for x1,
    ``x1 == 0`` for x2 (it is x2 there).

    >>> import chainrule as cr
    >>> cr.heaviside(cr.tensor([-1.0, 0.0, 2.0]), 0.5)
    tensor([0. , 0.5, 1. ])
    """)
nextafter = _ufunc_fn(NEXTAFTER, "nextafter", """The next float after ``x1`` towards ``x2``; gradient 1 for x1
    (x1 plus a piecewise-constant step), 0 for x2.

    >>> import chainrule as cr, numpy as np
    >>> bool(cr.nextafter(np.float64(1.0), 2.0) - 1.0 == np.finfo(np.float64).eps)
    True
    """)
ldexp = _ufunc_fn(LDEXP, "ldexp", """``x1 * 2**x2`` exactly (``x2`` integer); gradient ``2**x2`` for x1.

    >>> import chainrule as cr
    >>> cr.ldexp(cr.tensor([1.5]), 3)
    tensor([12.])
    """)


def trunc(x: Any, out: Any = None) -> Any:
    """Round towards zero; zero gradient.

    >>> import chainrule as cr
    >>> cr.trunc(cr.tensor([-1.7, 1.7]))
    tensor([-1.,  1.])
    """
    no_out("trunc", out)
    return apply(TRUNC, (x,))


def fix(x: Any, out: Any = None) -> Any:
    """Round towards zero (``numpy.fix``, the same as ``trunc``); zero gradient."""
    no_out("fix", out)
    return apply(TRUNC, (x,))


def spacing(x: Any, out: Any = None) -> Any:
    """The distance to the next float away from zero; zero gradient.

    >>> import chainrule as cr, numpy as np
    >>> bool(cr.spacing(np.array([1.0]))[0] == np.finfo(np.float64).eps)
    True
    """
    no_out("spacing", out)
    return apply(SPACING, (x,))


def modf(x: Any, out: Any = None) -> tuple:
    """``(fractional part, integral part)``, both with ``x``'s sign; gradients 1 and 0.

    >>> import chainrule as cr
    >>> cr.modf(cr.tensor([-2.5]))
    (tensor([-0.5]), tensor([-2.]))
    """
    no_out("modf", out)
    return apply(MODF, (x,)), apply(TRUNC, (x,))


def frexp(x: Any, out: Any = None) -> tuple:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent``, 0.5 <= |mantissa| < 1; the
    mantissa ``x * 2**-e`` is differentiable (gradient ``2**-e``), the int32 exponent is not.

    >>> import chainrule as cr
    >>> cr.frexp(cr.tensor([12.0]))
    (tensor([0.75]), tensor([4], dtype=int32))
    """
    no_out("frexp", out)
    if not isinstance(x, Tensor):
        return np.frexp(x)
    e = _frexp_exponent(x.detach()) if is_batched(x) else _wrap(np.frexp(x.data)[1])
    return apply(LDEXP, (x, -e)), e


def _frexp_exponent(x: Any) -> Any:
    """frexp's int32 exponent with chainrule ops (inside cr.vmap): floor(log2|x|) + 1 in float64,
    corrected by one either way where log2 rounded across a power of two; 0 at 0, inf and NaN."""
    ax = abs(astype(x, np.float64))
    ok = isfinite(ax) & (ax != 0)
    e = floor(log2(where(ok, ax, 1.0))) + 1
    with np.errstate(over="ignore"):              # 2**1024 is inf: no value reaches it
        e = where(ax >= power(2.0, e), e + 1, e)
    e = where(ax < power(2.0, e - 1), e - 1, e)
    # (astype's primitive itself: cr.astype reads an integer cast's values directly)
    return apply(PRIMITIVES["astype"], (where(ok, e, 0.0),), {"dtype": np.dtype(np.int32)})




def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0 (``numpy.i0``); its derivative is i1.
    A composite: ``cr.special.i0`` of ``x`` with NumPy's dtypes (integers, booleans and Python
    numbers in float64; floats, 16-bit ones included, in their own dtype).

    >>> import chainrule as cr
    >>> cr.i0(cr.tensor([0.0, 1.0], dtype=cr.float64)).data
    array([1.        , 1.26606588])
    """
    tensor_in = isinstance(x, Tensor)
    x = x if tensor_in else np.asarray(x)
    dtype = _dtype(x)
    if dtype.kind == "c":
        raise TypeError("i0 not supported for complex values")
    if dtype.kind not in "f" and dtype not in LOW_PRECISION:
        x, dtype = astype(x, np.float64), np.dtype(np.float64)
    y = special_i0(x)
    if _dtype(y) != dtype:                          # (SciPy computes 16-bit floats in float64)
        y = astype(y, dtype)
    return y if tensor_in else np.asarray(y)


def deg2rad(x: Any, out: Any = None) -> Any:
    """Degrees to radians, ``x * (pi / 180)`` as NumPy.

    >>> import chainrule as cr
    >>> cr.deg2rad(cr.tensor([180.0]))
    tensor([3.1415927])
    """
    no_out("deg2rad", out)
    return multiply(x, _PI / 180.0)


def rad2deg(x: Any, out: Any = None) -> Any:
    """Radians to degrees, ``x * (180 / pi)`` as NumPy."""
    no_out("rad2deg", out)
    return multiply(x, 180.0 / _PI)


radians = deg2rad
degrees = rad2deg


def positive(x: Any, out: Any = None) -> Any:
    """``+x``: a copy, gradient 1 (real or complex)."""
    no_out("positive", out)
    return copy(x)


def float_power(x1: Any, x2: Any, out: Any = None) -> Any:
    """``x1 ** x2`` computed in float64 (complex128 for complex inputs), as ``numpy.float_power``.

    >>> import chainrule as cr
    >>> cr.float_power(cr.tensor([2.0]), 3).dtype
    dtype('float64')
    """
    no_out("float_power", out)
    dt = np.complex128 if np.result_type(_dtype(x1), _dtype(x2)).kind == "c" else np.float64
    return power(astype(x1, dt), astype(x2, dt))


def logaddexp2(x1: Any, x2: Any, out: Any = None) -> Any:
    """``log2(2**x1 + 2**x2)`` computed stably, NumPy's formula; gradient 0 where both are -inf.

    >>> import chainrule as cr
    >>> cr.logaddexp2(cr.tensor([1.0, 3.0]), cr.tensor([1.0, 3.0]))
    tensor([2., 4.])
    """
    no_out("logaddexp2", out)
    m = maximum(x1, x2)
    same = equal(x1, x2)              # also both +-inf, where x1 - x2 is NaN
    d = abs(where(same, 0.0, x1) - where(same, 0.0, x2))
    res = where(same, m + 1, m + log1p(exp2(-d)) * _LOG2E)
    return where(same & (m == -np.inf), -np.inf, res)


def _finite(x: Any, nan: Any, posinf: Any, neginf: Any) -> Any:
    big = np.finfo(_dtype(x)).max
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    return where(isnan(x), nan, where(x == np.inf, posinf, where(x == -np.inf, neginf, x)))


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    """NaN to ``nan``, +-inf to ``posinf``/``neginf`` (the dtype's largest finite values by default),
    for real and complex (each part) data; the gradient passes where ``x`` is finite, 0 where a value
    was replaced. A new tensor is returned whatever ``copy`` says.

    >>> import chainrule as cr
    >>> cr.nan_to_num(cr.tensor([float("nan"), 1.0, float("-inf")]), neginf=-9.0)
    tensor([ 0.,  1., -9.])
    """
    if not isinstance(x, Tensor):
        return np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    kind = x.dtype.kind
    if kind == "c":
        parts = [_finite(part(x), nan, posinf, neginf) for part in (real, imag)]
        return view_as_complex(stack(parts, axis=-1))
    return _finite(x, nan, posinf, neginf) if kind == "f" or x.dtype in LOW_PRECISION else x


def real_if_close(a: Any, tol: float = 100) -> Any:
    """The real part of complex ``a`` if every imaginary part is below ``tol`` (machine epsilons when
    > 1); otherwise ``a``. The real part's gradient is ``g + 0j``.

    >>> import chainrule as cr
    >>> cr.real_if_close(cr.tensor([1.0 + 1e-16j]))
    tensor([1.])
    """
    if not isinstance(a, Tensor):
        return np.real_if_close(a, tol)
    if a.dtype.kind == "c" and is_batched(a):
        raise VmapError("real_if_close of a complex batched tensor inside cr.vmap: the result's dtype (real "
                        "or complex) would depend on the values; use cr.real(a) where the imaginary parts "
                        "are known to be negligible, or call real_if_close outside the vmapped function")
    if a.dtype.kind == "c" and np.real_if_close(a.data, tol).dtype.kind != "c":
        return real(a)
    return a


def unwrap(p: Any, discont: Any = None, axis: int = -1, *, period: float = 2 * _PI) -> Any:
    """Add multiples of ``period`` so adjacent differences along ``axis`` stay below
    ``max(discont, period / 2)``; the correction is piecewise constant, so the gradient passes.

    >>> import chainrule as cr
    >>> cr.unwrap(cr.tensor([0.0, 6.0]), period=4.0)
    tensor([0., 2.])
    """
    if not isinstance(p, Tensor):
        return np.unwrap(p, discont, axis, period=period)
    return p + _unwrap_correction(p.detach(), discont, axis, period)


def _unwrap_correction(p: Any, discont: Any, axis: int, period: Any) -> Any:
    """NumPy's cumulative correction (``up - p``, 0 in the first position), piecewise constant in p,
    with chainrule ops (so it batches under cr.vmap)."""
    nd = np.ndim(raw(p))
    ax = axis % nd
    lo, hi = (slice(None),) * ax + (slice(None, -1),), (slice(None),) * ax + (slice(1, None),)
    dd = getitem(p, hi) - getitem(p, lo)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(_dtype(dd), period)
    if np.issubdtype(dtype, np.integer):
        interval_high, rem = builtins.divmod(period, 2)
        boundary_ambiguous = rem == 0
    else:
        interval_high, boundary_ambiguous = period / 2, True
    interval_low = -interval_high
    ddmod = mod(dd - interval_low, period) + interval_low
    if boundary_ambiguous:
        ddmod = where((ddmod == interval_low) & (dd > 0), interval_high, ddmod)
    ph_correct = where(abs(dd) < discont, 0, ddmod - dd)
    first = _zeros_like(getitem(p, (slice(None),) * ax + (slice(0, 1),)))
    return astype(concatenate([first, cumsum(ph_correct, ax)], axis=ax), dtype)


def sort_complex(a: Any) -> Any:
    """Sort by real part, then imaginary part, along the last axis; a complex result, gradient
    gathered back to the original positions.

    >>> import chainrule as cr
    >>> cr.sort_complex(cr.tensor([3.0, 1.0, 2.0])).data
    array([1.+0.j, 2.+0.j, 3.+0.j])
    """
    if not isinstance(a, Tensor):
        return np.sort_complex(a)
    if is_batched(a):
        out = take_along_axis(a, argsort(a, axis=-1), -1)
    else:
        out = take_along_axis(a, np.argsort(a.data, axis=-1), -1)
    if a.dtype.kind != "c":
        out = astype(out, np.complex64 if a.dtype.char in "bhBH" else np.complex128)
    return out


# ----- polynomials (highest power first, as numpy.poly*) -----
def _poly_array(p: Any) -> Any:
    """A Tensor, or a list of Tensors stacked, or an ndarray."""
    if isinstance(p, Tensor):
        return p
    if type(p) in (list, tuple) and _has_tensor(p):
        return stack([q if isinstance(q, Tensor) else np.asarray(q) for q in p])
    return np.asarray(p)


def polyval(p: Any, x: Any) -> Any:
    """The polynomial ``p`` (highest power first) at ``x``, by Horner's rule as NumPy; differentiable in
    both.

    >>> import chainrule as cr
    >>> cr.polyval(cr.tensor([1.0, 0.0, -1.0]), cr.tensor([2.0, 3.0]))
    tensor([3., 8.])
    """
    p = _poly_array(p)
    x = x if isinstance(x, Tensor) else np.asarray(x)
    y = _zeros_like(x)
    for i in range(len(p)):
        y = y * x + p[i]
    return y


def _front_zeros(a: Any, n: int) -> Any:
    return concatenate([np.zeros(n, _dtype(a)), a]) if n else a


def _poly_pair(a1: Any, a2: Any) -> tuple:
    a1, a2 = atleast_1d(_poly_array(a1)), atleast_1d(_poly_array(a2))
    diff = len(a2) - len(a1)
    return _front_zeros(a1, builtins.max(diff, 0)), _front_zeros(a2, builtins.max(-diff, 0))


def polyadd(a1: Any, a2: Any) -> Any:
    """The sum of two polynomials (the shorter padded with leading zeros).

    >>> import chainrule as cr
    >>> cr.polyadd(cr.tensor([1.0, 2.0]), cr.tensor([1.0, 0.0, 0.0]))
    tensor([1., 1., 2.])
    """
    if not _has_tensor((a1, a2)):
        return np.polyadd(a1, a2)
    a1, a2 = _poly_pair(a1, a2)
    return a1 + a2


def polysub(a1: Any, a2: Any) -> Any:
    """The difference of two polynomials (the shorter padded with leading zeros)."""
    if not _has_tensor((a1, a2)):
        return np.polysub(a1, a2)
    a1, a2 = _poly_pair(a1, a2)
    return a1 - a2


def polymul(a1: Any, a2: Any) -> Any:
    """The product of two polynomials (their convolution), as a Toeplitz matrix times ``a2``.

    >>> import chainrule as cr
    >>> cr.polymul(cr.tensor([1.0, 1.0]), cr.tensor([1.0, -1.0]))
    tensor([ 1.,  0., -1.])
    """
    if not _has_tensor((a1, a2)):
        return np.polymul(a1, a2)
    a1, a2 = atleast_1d(_poly_array(a1)), atleast_1d(_poly_array(a2))
    n, m = len(a1), len(a2)
    if n == 0 or m == 0:
        raise ShapeError("polymul: the polynomials must not be empty")
    pad = np.zeros(m - 1, _dtype(a1))
    padded = concatenate([pad, a1, pad])
    k, j = np.arange(n + m - 1)[:, None], np.arange(m)[None, :]
    return matmul(padded[k - j + m - 1], a2)        # out[k] = sum_j a1[k - j] a2[j]


def polyder(p: Any, m: int = 1) -> Any:
    """The ``m``-th derivative of the polynomial ``p``.

    >>> import chainrule as cr
    >>> cr.polyder(cr.tensor([1.0, 1.0, 1.0])).data         # float64, as NumPy's
    array([2., 1.])
    """
    m = int(m)
    if m < 0:
        raise ValueError("polyder: order of derivative must be positive (see polyint)")
    if not _has_tensor((p,)):
        return np.polyder(p, m)
    p = _poly_array(p)
    for _ in range(m):
        p = p[:-1] * np.arange(len(p) - 1, 0, -1)
    return p


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The ``m``-th antiderivative of ``p``, with integration constants ``k`` (one, or one per order;
    differentiable too).

    >>> import chainrule as cr
    >>> cr.polyint(cr.tensor([3.0, 2.0]), k=1.0).data
    array([1.5, 2. , 1. ])
    """
    m = int(m)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive (see polyder)")
    if not _has_tensor((p, k)):
        return np.polyint(p, m, k)
    k = np.zeros(m, float) if k is None else k
    k = atleast_1d(k if isinstance(k, Tensor) else np.asarray(k))
    if len(k) == 1 and m > 1:
        k = k[0] * np.ones(m, float)
    if len(k) < m:
        raise ValueError("polyint: k must be a scalar or a rank-1 array of length 1 or >m.")
    p = _poly_array(p)
    for i in range(m):
        p = concatenate([p / np.arange(len(p), 0, -1), k[i:i + 1]])
    return p


def polydiv(u: Any, v: Any) -> tuple:
    """``(quotient, remainder)`` of polynomial division, NumPy's algorithm step by step (leading
    remainder terms within 1e-8 of 0 are dropped, as NumPy; inside cr.vmap only those that vanish by
    construction, so the shape is fixed); differentiable in both.

    >>> import chainrule as cr
    >>> cr.polydiv(cr.tensor([1.0, 0.0, -1.0]), cr.tensor([1.0, 1.0]))
    (tensor([ 1., -1.]), tensor([0.]))
    """
    if not _has_tensor((u, v)):
        return np.polydiv(u, v)
    u, v = atleast_1d(_poly_array(u)) + 0.0, atleast_1d(_poly_array(v)) + 0.0
    dtype = np.result_type(_dtype(u), _dtype(v))
    m, n = len(u) - 1, len(v) - 1
    scale = 1.0 / v[0]
    r = [u[i] for i in range(m + 1)]
    q = []
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        for j in range(n + 1):
            r[k + j] = r[k + j] - d * v[j]
    if is_batched(u, v):
        # the shape cannot depend on the values: the leading terms that vanish by construction go, any
        # other near-zero leading term of the remainder stays (NumPy would drop it, as JAX's does not)
        r = r[builtins.min(m - n + 1, m):] if m >= n else r
    while len(r) > 1 and not is_batched(r[0]) and np.allclose(raw(r[0]), 0, rtol=1e-14):
        r = r[1:]
    quotient = astype(stack(q), dtype) if q else _wrap(np.zeros(1, dtype))
    return quotient, astype(stack(r), dtype)


def polyfit(x: Any, y: Any, deg: int, rcond: Any = None, full: bool = False, w: Any = None,
            cov: Any = False) -> Any:
    """Least-squares polynomial fit of degree ``deg``: NumPy's coefficients, differentiable in ``x``,
    ``y`` and ``w`` (the derivative of the least-squares solution, from its scaled normal equations;
    full column rank assumed). ``full=True`` and ``cov=True`` return NumPy's extra results as plain
    arrays. 16-bit data is fitted in float32 (NumPy has no 16-bit least squares) and rounded once.

    >>> import chainrule as cr
    >>> cr.polyfit(cr.tensor([0.0, 1.0, 2.0]), cr.tensor([1.0, 3.0, 5.0]), 1).data.round(6)
    array([2., 1.])
    """
    if not _has_tensor((x, y, w)):
        return np.polyfit(x, y, deg, rcond, full, w, cov)
    xs, ys, ws = (a if a is None or isinstance(a, Tensor) else np.asarray(a) for a in (x, y, w))
    low = [_dtype(a) for a in (xs, ys, ws) if a is not None and _dtype(a) in LOW_PRECISION]
    if low:
        back = np.result_type(*low)
        xs, ys, ws = (a if a is None or _dtype(a) not in LOW_PRECISION else astype(a, np.float32)
                      for a in (xs, ys, ws))
    batched = is_batched(xs, ys, ws)
    if batched and (full or cov):
        raise VmapError("polyfit with full=True or cov=True inside cr.vmap: those extra results are NumPy's "
                        "plain arrays, computed from the values; call it outside the vmapped function")
    result = None if batched else np.polyfit(raw(xs), raw(ys), deg, rcond, full, raw(ws), cov)
    c = None if batched else result[0] if full or cov else result
    order = int(deg) + 1
    x0, y0 = xs + 0.0, ys + 0.0
    lhs = stack([power(x0, i) for i in range(order - 1, -1, -1)], axis=1)
    rhs = y0
    if ws is not None:
        ws = ws + 0.0
        lhs = lhs * expand_dims(ws, 1)
        rhs = rhs * (expand_dims(ws, 1) if len(np.shape(raw(rhs))) == 2 else ws)
    scale = sqrt(sum(lhs * conj(lhs) if _dtype(lhs).kind == "c" else lhs * lhs, axis=0))
    lhs = lhs / scale
    lhs_h = transpose(conj(lhs) if _dtype(lhs).kind == "c" else lhs)
    sol = solve(matmul(lhs_h, lhs), matmul(lhs_h, rhs))
    sol = transpose(transpose(sol) / scale)
    # NumPy's values, the least-squares solution's derivatives (batched: the solution itself)
    c = sol if batched else c + (sol - raw(sol))
    if low:
        c = astype(c, back)
    return (c,) + tuple(result[1:]) if full or cov else c


def _eigvals(a: Any) -> Any:
    # numpy_math sits beside decompositions in the layers: its primitive is reached through the table
    return apply(PRIMITIVES["eigvals"], (a,))


def roots(p: Any) -> Any:
    """The roots of the polynomial ``p``: the eigenvalues of its companion matrix, as NumPy (real when
    all are real, else complex); differentiable where the roots are distinct.

    >>> import chainrule as cr
    >>> cr.roots(cr.tensor([1.0, -3.0, 2.0], dtype=cr.float64)).data
    array([2., 1.])
    """
    if not isinstance(p, Tensor):
        return np.roots(p)
    if is_batched(p):
        raise VmapError("roots inside cr.vmap: how many roots there are (leading zeros are dropped) and "
                        "whether they are real would depend on the values; take cr.linalg.eigvals of the "
                        "companion matrix (its shape fixed by the degree) instead")
    p = atleast_1d(p)
    if p.ndim != 1:
        raise ShapeError("roots: input must be a rank-1 array")
    nonzero = np.nonzero(np.ravel(p.data))[0]
    if len(nonzero) == 0:
        return _wrap(np.array([]))
    trailing = len(p) - int(nonzero[-1]) - 1
    p = p[int(nonzero[0]):int(nonzero[-1]) + 1]
    if p.dtype.kind not in "fc":
        p = astype(p, np.float64)
    n = len(p)
    if n > 1:
        companion = concatenate([expand_dims(-p[1:] / p[0], 0), np.eye(n - 2, n - 1, dtype=p.dtype)])
        r = _eigvals(companion)
    else:
        r = _wrap(np.array([], np.result_type(p.dtype, np.complex64)))
    if trailing:
        r = concatenate([r, np.zeros(trailing, r.dtype)])
    if p.dtype.kind != "c" and not np.any(r.data.imag):
        r = real(r)                   # NumPy's eigvals is real when every eigenvalue is
    return r


def poly(seq_of_zeros: Any) -> Any:
    """The coefficients of the monic polynomial with the given roots (or a square matrix's
    characteristic polynomial); real when the roots come in conjugate pairs, as NumPy (inside
    cr.vmap: complex for complex roots, real for a real matrix).

    >>> import chainrule as cr
    >>> cr.poly(cr.tensor([1.0, 2.0], dtype=cr.float64)).data
    array([ 1., -3.,  2.])
    """
    if not isinstance(seq_of_zeros, Tensor):
        return np.poly(seq_of_zeros)
    z = atleast_1d(seq_of_zeros)
    shape = z.shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        z = _eigvals(z)
    elif len(shape) == 1:
        z = astype(z, np.mintypecode(z.dtype.char))
    else:
        raise ShapeError("poly: input must be 1d or non-empty square 2d array")
    if len(z) == 0:
        return 1.0
    a = np.ones(1, z.dtype)
    zero = np.zeros(1, z.dtype)
    for i in range(len(z)):
        a = concatenate([a, zero]) - z[i] * concatenate([zero, a])    # convolve(a, [1, -z_i])
    if z.dtype.kind == "c" and is_batched(z):
        # the dtype cannot vary by example: a real matrix's roots pair up (LAPACK's are exact conjugates)
        return real(a) if seq_of_zeros.dtype.kind != "c" else a
    if z.dtype.kind == "c":
        r = np.asarray(z.data, complex)
        if np.all(np.sort(r) == np.sort(r.conjugate())):
            a = real(a)
    return a


# ----- (b) discrete results: NumPy's, from the data; never requiring grad -----
def _plain(npfn: Callable, name: str) -> Callable:
    """NumPy's result of the inputs' data; a Tensor input gives a Tensor (or NumPy's Python bool/int)
    that does not require grad.

    >>> import chainrule as cr
    >>> cr.signbit(cr.tensor([-0.0, 1.0], requires_grad=True)), cr.allclose(cr.tensor([1.0]), 1.0)
    (tensor([ True, False]), True)
    """
    def fn(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        no_out(name, out)
        datas = [type(a)(raw(b) for b in a) if type(a) in (list, tuple) else raw(a) for a in args]
        res = npfn(*datas, **{k: raw(v) for k, v in kwargs.items()})     # (isclose's rtol/atol: data too)
        if _has_tensor(args) and isinstance(res, (ndarray, np.generic)):
            return _wrap(np.asarray(res))
        return res
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``numpy.{name}`` of the data: a non-differentiable result (a Tensor input gives a "
                  f"Tensor that does not require grad).")
    return fn


_PLAIN = ("signbit", "isneginf", "isposinf", "iscomplex", "isreal", "iscomplexobj", "isrealobj", "isclose",
          "allclose", "array_equal", "array_equiv", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor",
          "invert", "bitwise_count", "bitwise_left_shift", "bitwise_right_shift", "logical_xor", "count_nonzero",
          "all", "any")
(signbit, isneginf, isposinf, iscomplex, isreal, iscomplexobj, isrealobj, isclose, allclose, array_equal,
 array_equiv, gcd, lcm, bitwise_and, bitwise_or, bitwise_xor, invert, bitwise_count, bitwise_left_shift,
 bitwise_right_shift, logical_xor, count_nonzero, all, any) = (
    _plain(getattr(np, name), name) for name in _PLAIN)
bitwise_not, left_shift, right_shift = invert, bitwise_left_shift, bitwise_right_shift    # NumPy's aliases too


# ----- window functions: constants of the default dtype -----
def _window(npfn: Callable, name: str) -> Callable:
    def fn(M: int, *args: Any) -> Tensor:
        return tensor(npfn(M, *(constant_arg(a, name, "beta") for a in args)), dtype=get_default_dtype())
    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = inspect.signature(npfn)          # (the arguments go to NumPy as they came)
    fn.__doc__ = (f"``numpy.{name}`` as a tensor of the default dtype (no gradient).\n\n"
                  f"    >>> import chainrule as cr\n    >>> cr.{name}(3{', 0.0' if name == 'kaiser' else ''})"
                  f".shape\n    (3,)\n    ")
    return fn


bartlett, blackman, hamming, hanning, kaiser = (
    _window(getattr(np, name), name) for name in ("bartlett", "blackman", "hamming", "hanning", "kaiser"))


__all__ = ["copysign", "deg2rad", "degrees", "rad2deg", "radians", "fix", "trunc", "float_power", "fmod",
           "heaviside", "i0", "ldexp", "logaddexp2", "modf", "nan_to_num", "positive", "real_if_close", "sinc",
           "spacing", "unwrap", "polyval", "polyadd", "polysub", "polymul", "polyder", "polyint", "polydiv",
           "polyfit", "roots", "poly", "sort_complex", "frexp", "nextafter", "signbit", "isneginf", "isposinf",
           "iscomplex", "isreal", "iscomplexobj", "isrealobj", "isclose", "allclose", "array_equal", "array_equiv",
           "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "invert", "bitwise_count",
           "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift", "logical_xor", "count_nonzero",
           "all", "any", "bartlett", "blackman", "hamming", "hanning", "kaiser"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__}
