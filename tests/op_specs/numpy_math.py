"""Op-table rows of chainrule/numpy/math.py: ``SPECS`` (float64 inputs) and ``COMPLEX_SPECS``
(complex128 inputs). ``name`` is the primitive a row exercises (the main one a composite runs on),
``id`` the function. Rows of real functions with complex results return ``view_as_real`` of them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import chainrule as cr
from tests.op_specs.spec import OpSpec, _t, _tl

BCAST = ((3, 1), (1, 4))
_EXPS = np.array([[-3, 0, 2, 5]])                     # ldexp's integer exponents
_SPECIAL = np.zeros((3, 4))                             # nan_to_num: replaced entries (gradient 0)
_SPECIAL[0, 1], _SPECIAL[1, 2], _SPECIAL[2, 0] = np.nan, np.inf, -np.inf
_NANS = np.where(np.isnan(_SPECIAL), np.nan, 0.0)
_CSPECIAL = _SPECIAL + 0j
_CSPECIAL[0, 3], _CSPECIAL[2, 2] = complex(0.0, np.nan), complex(0.0, -np.inf)
# roots 1, -2, 0.5 +- i (real coefficients): well separated, so a small perturbation keeps them distinct
_P = np.poly([1.0, -2.0, 0.5 + 1j, 0.5 - 1j]).real
_CP = np.poly([1.0 + 0.5j, -2.0, 0.5 - 1j])
_Z5 = np.zeros(5)                                       # float64: 16-bit inputs upcast (see polydiv)
_NARROW = (-0.3, 0.3)


# ----- the same functions in torch -----
def _t_heaviside(t: Any, x: Any, y: Any) -> Any:
    # no derivative in torch: ours is 0 in x, and 1 in y where x == 0 (the value is y there)
    return t.heaviside(x.detach(), y.detach()) + 0 * x + (x.detach() == 0) * (y - y.detach())


def _t_nextafter(t: Any, x: Any, y: Any) -> Any:
    return x + (t.nextafter(x, y) - x).detach() + 0 * y


def _t_horner(t: Any, p: Any, x: Any) -> Any:
    y = t.zeros_like(x)
    for i in range(len(p)):
        y = y * x + p[i]
    return y


def _t_front(t: Any, a: Any, n: int) -> Any:
    return t.cat([t.zeros(n, dtype=a.dtype), a])


def _t_polyadd(t: Any, a: Any, b: Any, sign: float = 1.0) -> Any:
    n = max(len(a), len(b))
    return _t_front(t, a, n - len(a)) + sign * _t_front(t, b, n - len(b))


def _t_polymul(t: Any, a: Any, b: Any) -> Any:
    out = t.zeros(len(a) + len(b) - 1, dtype=t.promote_types(a.dtype, b.dtype))
    for i in range(len(a)):
        out = out + t.cat([t.zeros(i, dtype=out.dtype), a[i] * b, t.zeros(len(a) - 1 - i, dtype=out.dtype)])
    return out


def _t_polyder(t: Any, p: Any) -> Any:
    return p[:-1] * t.arange(len(p) - 1, 0, -1, dtype=t.float64)


def _t_polyint(t: Any, p: Any, k: Any) -> Any:
    return t.cat([p / t.arange(len(p), 0, -1, dtype=t.float64), k.reshape(1)])


def _t_polydiv(t: Any, u: Any, v: Any) -> Any:
    m, n = len(u) - 1, len(v) - 1
    r = list(u)
    q = []
    for k in range(m - n + 1):
        d = (1.0 / v[0]) * r[k]
        q.append(d)
        for j in range(n + 1):
            r[k + j] = r[k + j] - d * v[j]
    return t.cat([t.stack(q), t.stack(r[m - n + 1:])])    # the leading remainder terms are ~0: dropped


def _t_polyfit(t: Any, x: Any, y: Any, deg: int, w: Any = None) -> Any:
    lhs = t.stack([x ** i for i in range(deg, -1, -1)], dim=1)
    rhs = y
    if w is not None:
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = (lhs * lhs).sum(0).sqrt()
    c = t.linalg.pinv(lhs / scale) @ rhs
    return c / (scale[:, None] if c.ndim == 2 else scale)


def _t_companion(t: Any, p: Any) -> Any:
    n = len(p)
    first = (-p[1:] / p[0])[None, :]
    return t.cat([first, t.eye(n - 2, n - 1, dtype=p.dtype)])


def _t_roots(t: Any, p: Any) -> Any:
    return t.view_as_real(t.linalg.eigvals(_t_companion(t, p + t.tensor(_P))))


def _t_poly(t: Any, z: Any) -> Any:
    a = t.ones(1, dtype=z.dtype)
    zero = t.zeros(1, dtype=z.dtype)
    for i in range(len(z)):
        a = t.cat([a, zero]) - z[i] * t.cat([zero, a])
    return a


def _t_sort_complex(t: Any, x: Any) -> Any:
    idx = t.tensor(np.argsort(x.detach().numpy(), axis=-1))
    out = t.gather(x, -1, idx)
    return out if out.is_complex() else t.view_as_real(out.to(t.complex128))


def _t_unwrap(t: Any, x: Any) -> Any:
    d = 3 * x.detach().numpy()
    return 3 * x + t.tensor(np.unwrap(d) - d)


def _t_nan_to_num_complex(t: Any, z: Any) -> Any:
    fix = lambda part: t.nan_to_num(part, posinf=7.0, neginf=-7.0)    # noqa: E731
    return t.complex(fix(z.real + t.tensor(_CSPECIAL.real)), fix(z.imag + t.tensor(_CSPECIAL.imag)))


def _cat(*xs: Any) -> Any:
    return cr.concatenate([cr.ravel(x) for x in xs])


def _polydiv(u: Any, v: Any) -> Any:
    return _cat(*cr.polydiv(u + _Z5, v + _Z5[:3]))


def _polyfit_w(x: Any, y: Any, w: Any) -> Any:
    return cr.polyfit(x, y, 2, w=w)


SPECS: list = [
    OpSpec("copysign", cr.copysign, shapes=BCAST, torch_fn=_t("copysign")),
    OpSpec("multiply", cr.deg2rad, id="deg2rad", domain=(-400.0, 400.0), torch_fn=_t("deg2rad")),
    OpSpec("multiply", cr.radians, id="radians", domain=(-400.0, 400.0), torch_fn=_t("deg2rad")),
    OpSpec("multiply", cr.rad2deg, id="rad2deg", torch_fn=_t("rad2deg")),
    OpSpec("multiply", cr.degrees, id="degrees", torch_fn=_t("rad2deg")),
    OpSpec("trunc", cr.trunc, domain=(-3.0, 3.0), order=1, torch_fn=_t("trunc")),
    OpSpec("trunc", cr.fix, id="fix", domain=(-3.0, 3.0), order=1, torch_fn=_t("fix")),
    OpSpec("power", cr.float_power, id="float_power", shapes=BCAST, domains=((0.5, 2.0), (-1.5, 1.5)),
           torch_fn=_t("float_power")),
    OpSpec("fmod", cr.fmod, shapes=BCAST, domains=((-3.0, 3.0), (0.7, 1.3)), torch_fn=_t("fmod")),
    OpSpec("fmod", cr.fmod, id="fmod-negative-divisor", shapes=BCAST, domains=((-3.0, 3.0), (-1.3, -0.7)),
           torch_fn=_t("fmod")),
    OpSpec("heaviside", cr.heaviside, shapes=BCAST, order=1, torch_fn=_tl(_t_heaviside)),
    # cr.i0 (NumPy's dtypes) is a composite of cr.special.i0's primitive
    OpSpec("i0", cr.i0, id="i0", domain=(-3.0, 3.0), order=3, torch_fn=_tl(lambda t, x: t.special.i0(x))),
    # torch's ldexp differentiates 2**e in integers (0 for e < 0): float exponents there
    OpSpec("ldexp", lambda x: cr.ldexp(x, _EXPS),
           torch_fn=_tl(lambda t, x: t.ldexp(x, t.tensor(_EXPS, dtype=t.float64)))),
    OpSpec("log1p", cr.logaddexp2, id="logaddexp2", shapes=BCAST, torch_fn=_t("logaddexp2")),
    OpSpec("modf", lambda x: cr.modf(x)[0], domain=(-3.0, 3.0), torch_fn=_tl(lambda t, x: x - t.trunc(x))),
    OpSpec("modf", lambda x: cr.stack(cr.modf(x)), id="modf-both", domain=(-3.0, 3.0),
           torch_fn=_tl(lambda t, x: t.stack([x - t.trunc(x), t.trunc(x)]))),
    # (+-inf to the dtype's largest values: in the rows with explicit values, where sums stay finite)
    OpSpec("where", lambda x: cr.nan_to_num(x + _NANS), id="nan_to_num",
           torch_fn=_tl(lambda t, x: t.nan_to_num(x + t.tensor(_NANS)))),
    OpSpec("where", lambda x: cr.nan_to_num(x + _SPECIAL, nan=1.5, posinf=7.0, neginf=-7.0), id="nan_to_num-values",
           torch_fn=_tl(lambda t, x: t.nan_to_num(x + t.tensor(_SPECIAL), nan=1.5, posinf=7.0, neginf=-7.0))),
    OpSpec("copy", cr.positive, id="positive", torch_fn=_t("positive")),
    OpSpec("real", lambda x: cr.real_if_close(cr.astype(x, np.complex128)), id="real_if_close",
           torch_fn=_tl(lambda t, x: t.real(x.to(t.complex128)))),
    OpSpec("sinc", cr.sinc, id="sinc", order=3, torch_fn=_t("sinc")),
    OpSpec("sinc", cr.sinc, id="sinc-near-zero", domain=(-0.4, 0.4), order=3, torch_fn=_t("sinc")),
    OpSpec("spacing", cr.spacing, order=1),
    OpSpec("add", lambda x: cr.unwrap(x * 3.0), id="unwrap", shapes=((3, 8),), torch_fn=_tl(_t_unwrap)),
    OpSpec("multiply", cr.polyval, id="polyval", shapes=((4,), (3, 4)), torch_fn=_tl(_t_horner)),
    OpSpec("add", cr.polyadd, id="polyadd", shapes=((3,), (5,)), torch_fn=_tl(_t_polyadd)),
    OpSpec("subtract", cr.polysub, id="polysub", shapes=((5,), (2,)),
           torch_fn=_tl(lambda t, a, b: _t_polyadd(t, a, b, -1.0))),
    OpSpec("matmul", cr.polymul, id="polymul", shapes=((3,), (4,)), torch_fn=_tl(_t_polymul)),
    OpSpec("matmul", cr.polymul, id="polymul-longer-first", shapes=((5,), (2,)), torch_fn=_tl(_t_polymul)),
    OpSpec("multiply", cr.polyder, id="polyder", shapes=((5,),), torch_fn=_tl(_t_polyder)),
    OpSpec("multiply", lambda p: cr.polyder(p, 2), id="polyder-2", shapes=((5,),),
           torch_fn=_tl(lambda t, p: _t_polyder(t, _t_polyder(t, p)))),
    OpSpec("divide", lambda p, k: cr.polyint(p, k=k), id="polyint", shapes=((4,), ()), torch_fn=_tl(_t_polyint)),
    OpSpec("divide", _polydiv, id="polydiv", shapes=((5,), (3,)), domains=((-2.0, 2.0), (0.5, 2.0)),
           torch_fn=_tl(_t_polydiv)),
    # polyfit runs on solve, but fits 16-bit data in float32 (where solve refuses float16): named by matmul
    OpSpec("matmul", lambda x, y: cr.polyfit(x, y, 2), id="polyfit", shapes=((8,), (8,)),
           torch_fn=_tl(lambda t, x, y: _t_polyfit(t, x, y, 2))),
    OpSpec("matmul", _polyfit_w, id="polyfit-weights-2d", shapes=((8,), (8, 2), (8,)),
           domains=((-2.0, 2.0), (-2.0, 2.0), (0.5, 1.5)), torch_fn=_tl(lambda t, x, y, w: _t_polyfit(t, x, y, 2, w))),
    OpSpec("eigvals", lambda p: cr.view_as_real(cr.astype(cr.roots(p + _P), np.complex128)), id="roots",
           shapes=((5,),), domain=(-0.05, 0.05), torch_fn=_tl(_t_roots)),
    OpSpec("multiply", cr.poly, id="poly", shapes=((4,),), torch_fn=_tl(_t_poly)),
    OpSpec("getitem", lambda x: cr.view_as_real(cr.sort_complex(x)), id="sort_complex",
           torch_fn=_tl(_t_sort_complex)),
    OpSpec("ldexp", lambda x: cr.frexp(x)[0], id="frexp", domain=(-40.0, 40.0),
           torch_fn=_tl(lambda t, x: t.frexp(x).mantissa)),
    OpSpec("nextafter", cr.nextafter, shapes=BCAST, torch_fn=_tl(_t_nextafter)),
]

COMPLEX_SPECS: list = [
    OpSpec("sinc", cr.sinc, id="sinc", kinds="c", torch_fn=_t("sinc")),
    OpSpec("sinc", cr.sinc, id="sinc-near-zero", kinds="c", domain=(-0.2, 0.2), imag=(-0.2, 0.2),
           torch_fn=_t("sinc")),
    OpSpec("power", cr.float_power, id="float_power", shapes=BCAST, kinds="cc",
           domains=((0.5, 2.0), (-1.5, 1.5)), imag=_NARROW, torch_fn=_t("float_power")),
    OpSpec("power", cr.float_power, id="float_power-rc", shapes=BCAST, kinds="rc",
           domains=((0.5, 2.0), (-1.5, 1.5)), imag=_NARROW, torch_fn=_t("float_power")),
    OpSpec("copy", cr.positive, id="positive", kinds="c", torch_fn=_t("positive")),
    OpSpec("real", lambda z: cr.real_if_close(z, tol=1e12), id="real_if_close", kinds="c", imag=(-1e-5, 1e-5),
           torch_fn=_t("real")),
    # each part on its own (where runs on the real parts; view_as_complex joins them)
    OpSpec("view_as_complex", lambda z: cr.nan_to_num(z + _CSPECIAL, posinf=7.0, neginf=-7.0), id="nan_to_num",
           kinds="c", torch_fn=_tl(_t_nan_to_num_complex)),
    OpSpec("multiply", cr.polyval, id="polyval", shapes=((4,), (3, 4)), kinds="cc", torch_fn=_tl(_t_horner)),
    OpSpec("multiply", cr.polyval, id="polyval-rc", shapes=((4,), (3, 4)), kinds="rc",
           torch_fn=_tl(lambda t, p, x: _t_horner(t, p.to(x.dtype), x))),
    OpSpec("add", cr.polyadd, id="polyadd", shapes=((3,), (5,)), kinds="cc", torch_fn=_tl(_t_polyadd)),
    OpSpec("matmul", cr.polymul, id="polymul", shapes=((3,), (4,)), kinds="cc", torch_fn=_tl(_t_polymul)),
    OpSpec("multiply", cr.polyder, id="polyder", shapes=((5,),), kinds="c", torch_fn=_tl(_t_polyder)),
    OpSpec("divide", lambda p, k: cr.polyint(p, k=k), id="polyint", shapes=((4,), ()), kinds="cc",
           torch_fn=_tl(_t_polyint)),
    OpSpec("divide", lambda u, v: _cat(*cr.polydiv(u, v)), id="polydiv", shapes=((5,), (3,)), kinds="cc",
           domains=((-2.0, 2.0), (0.5, 2.0)), torch_fn=_tl(_t_polydiv)),
    OpSpec("matmul", lambda x, y: cr.polyfit(x, y, 2), id="polyfit", shapes=((8,), (8,)), kinds="rc",
           torch_fn=_tl(lambda t, x, y: _t_polyfit(t, x.to(y.dtype), y, 2))),
    OpSpec("eigvals", lambda p: cr.roots(p + _CP), id="roots", shapes=((4,),), kinds="c", domain=(-0.05, 0.05),
           imag=(-0.05, 0.05), torch_fn=_tl(lambda t, p: t.linalg.eigvals(_t_companion(t, p + t.tensor(_CP))))),
    OpSpec("multiply", cr.poly, id="poly", shapes=((4,),), kinds="c", torch_fn=_tl(_t_poly)),
    OpSpec("getitem", cr.sort_complex, id="sort_complex", kinds="c", torch_fn=_tl(_t_sort_complex)),
]
