"""chainrule/numpy/math.py beyond its op-table rows: NumPy's values, dtypes and shapes for every
argument form (special values included), the gradients at the edge points the conventions fix,
errors, the plain (non-differentiable) functions, the window functions and NumPy dispatch."""
import math

import numpy as np
import pytest
import scipy.special

import chainrule as cr

RTOL, ATOL = 1e-12, 1e-14


def _t(a, grad=True):
    return cr.tensor(np.asarray(a), requires_grad=grad)


def _same(got, want, exact=False):
    """NumPy's result: the same dtype and shape, values to 1e-12 (float32: 1 ulp; NaNs in the same places)."""
    g = got.data if isinstance(got, cr.Tensor) else np.asarray(got)
    w = np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    if exact:
        np.testing.assert_array_equal(g, w)
    else:
        single = w.dtype in (np.float32, np.complex64)
        np.testing.assert_allclose(g, w, rtol=2.4e-7 if single else RTOL, atol=ATOL, equal_nan=True)


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    x = rng.uniform(-5, 5, (4, 5))
    y = rng.uniform(-3, 3, (4, 5))
    x[0, :4] = [0.0, -0.0, 3.0, -2.0]               # zeros of both signs, integers
    x[1, :3] = [np.inf, -np.inf, np.nan]
    y[0, :2] = [-0.0, 0.0]
    return x, y


BINARY = ["copysign", "fmod", "heaviside", "nextafter", "float_power", "logaddexp2"]
UNARY = ["deg2rad", "radians", "rad2deg", "degrees", "trunc", "fix", "spacing", "sinc", "positive", "nan_to_num"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_binary_values_match_numpy(name, dtype, data):
    x, y = (a.astype(dtype) for a in data)
    # NumPy's float_power and logaddexp2 call libm's pow/exp2/log1p, np.power/np.exp2 SIMD kernels: 1 ulp apart
    exact = dtype == np.float64 and name not in ("float_power", "logaddexp2")
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x, y)
        got = getattr(cr, name)(_t(x), _t(y))
        _same(got, want, exact=exact)
        _same(getattr(cr, name)(x, y), want, exact=exact)       # ndarrays in: ndarray out
        assert type(getattr(cr, name)(x, y)) is np.ndarray


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_unary_values_match_numpy(name, dtype, data):
    x = data[0] if dtype != np.int64 else np.arange(-6, 6).reshape(3, 4)
    x = x.astype(dtype)
    with np.errstate(all="ignore"):
        _same(getattr(cr, name)(_t(x, grad=dtype != np.int64)), getattr(np, name)(x), exact=dtype == np.float64)


def test_integer_binaries_keep_numpys_dtypes():
    i, j = np.arange(-6, 6).reshape(3, 4), np.arange(1, 13).reshape(3, 4)
    for name in ["copysign", "fmod", "heaviside", "float_power", "logaddexp2"]:
        _same(getattr(cr, name)(cr.tensor(i), cr.tensor(j)), getattr(np, name)(i, j))


def test_complex_values_match_numpy(data):
    x, y = data
    z = np.where(np.isfinite(x), x, 0) + 1j * y
    _same(cr.sinc(_t(z)), np.sinc(z), exact=True)
    _same(cr.float_power(_t(z), 2.5), np.float_power(z, 2.5))
    with np.errstate(invalid="ignore"):
        _same(cr.float_power(_t(x), _t(z)), np.float_power(x, z))
    _same(cr.positive(_t(z)), np.positive(z), exact=True)
    special = x + 1j * np.where(np.isfinite(x), y, x[::-1])      # NaN and inf in both parts
    _same(cr.nan_to_num(_t(special)), np.nan_to_num(special), exact=True)
    _same(cr.nan_to_num(_t(special.astype(np.complex64))), np.nan_to_num(special.astype(np.complex64)), exact=True)
    _same(cr.sort_complex(_t(z)), np.sort_complex(z), exact=True)


def test_modf_frexp_ldexp_i0_match_numpy(data):
    x = data[0]
    for got, want in zip(cr.modf(_t(x)), np.modf(x)):
        _same(got, want, exact=True)
    for got, want in zip(cr.frexp(_t(x)), np.frexp(x)):
        _same(got, want, exact=True)
    e = np.arange(-10, 10).reshape(4, 5)
    _same(cr.ldexp(_t(x), e), np.ldexp(x, e), exact=True)
    with np.errstate(over="ignore"):
        _same(cr.ldexp(_t(np.float32(3.0)), 200), np.ldexp(np.float32(3.0), 200), exact=True)    # inf, as NumPy
    _same(cr.ldexp(_t(1e-300), 1000), np.ldexp(1e-300, 1000), exact=True)     # 2**1000 * 1e-300: no overflow
    f = np.where(np.isfinite(x), x, 1.0)
    for a in (f, f.astype(np.float32)):
        # NumPy's dtype and shape; the values are cr.special.i0's (SciPy's: np.i0's to 2 ulp in float64,
        # and correctly rounded in float32, where np.i0's own error reaches ~4 ulp)
        got, want = cr.i0(_t(a)), np.i0(a)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.data, want, rtol=5e-16 if a.dtype == np.float64 else 5e-7)
        np.testing.assert_array_equal(got.data, scipy.special.i0(a))
    _same(cr.frexp(x)[0], np.frexp(x)[0], exact=True)


@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5, "posinf": 9.0, "neginf": -9.0}, {"posinf": 1e300}])
@np.errstate(over="ignore")                 # 1e300 in float32: inf, as NumPy
def test_nan_to_num_arguments(kwargs, data):
    x = data[0]
    _same(cr.nan_to_num(_t(x), **kwargs), np.nan_to_num(x, **kwargs), exact=True)
    _same(cr.nan_to_num(_t(x.astype(np.float32)), **kwargs), np.nan_to_num(x.astype(np.float32), **kwargs),
          exact=True)
    _same(cr.nan_to_num(x, copy=False, **kwargs), np.nan_to_num(x, **kwargs), exact=True)


def test_real_if_close():
    z = np.array([1.0 + 1e-16j, 2.0 - 2e-17j])
    _same(cr.real_if_close(_t(z)), np.real_if_close(z), exact=True)
    far = _t(np.array([1.0 + 1e-6j]))
    assert cr.real_if_close(far) is far                        # NumPy returns its input
    _same(cr.real_if_close(_t(np.array([1.0 + 1e-6j])), tol=1e12), np.real_if_close(np.array([1.0 + 1e-6j]), 1e12))
    real = _t(np.array([1.0, 2.0]))
    assert cr.real_if_close(real) is real


@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"period": 5.0, "discont": 3.0}, {"period": 360}])
def test_unwrap_matches_numpy(kwargs):
    p = np.cumsum(np.random.default_rng(4).uniform(-4, 4, (3, 40)), axis=1) * (60 if "period" in kwargs
                                                                                 and kwargs["period"] == 360 else 1)
    _same(cr.unwrap(_t(p), **kwargs), np.unwrap(p, **kwargs), exact=True)
    q = np.array([0, 1, 2, -1, 0])
    _same(cr.unwrap(cr.tensor(q), period=4), np.unwrap(q, period=4), exact=True)       # integers: NumPy's dtype


def test_unwrap_gradient_passes_through():
    p = _t(np.array([0.0, 3.0, 6.5, -0.5, 2.0]))
    out = cr.unwrap(p)
    assert not np.allclose(out.data, p.data)                    # corrections were made
    v = np.arange(1.0, 6.0)
    (out * v).sum().backward()
    np.testing.assert_array_equal(p.grad.data, v)


# ----- polynomials -----
@pytest.fixture
def coeffs():
    rng = np.random.default_rng(5)
    return rng.uniform(-2, 2, 6), rng.uniform(-2, 2, 3), rng.uniform(-2, 2, (3, 7))


def test_polynomial_arithmetic_matches_numpy(coeffs):
    a, b, x = coeffs
    _same(cr.polyval(_t(a), _t(x)), np.polyval(a, x), exact=True)
    _same(cr.polyval(list(a), _t(x)), np.polyval(a, x), exact=True)
    _same(cr.polyval([_t(v) for v in a], 0.5), np.polyval(a, 0.5), exact=True)
    _same(cr.polyval(_t(a + 1j), _t(x)), np.polyval(a + 1j, x), exact=True)
    for fn in ("polyadd", "polysub", "polymul"):
        _same(getattr(cr, fn)(_t(a), _t(b)), getattr(np, fn)(a, b), exact=fn != "polymul")
        _same(getattr(cr, fn)(_t(b), a), getattr(np, fn)(b, a), exact=fn != "polymul")
        _same(getattr(cr, fn)(a, b), getattr(np, fn)(a, b), exact=True)
    i, j = np.array([1, 2, 3]), np.array([4, 5])
    _same(cr.polymul(cr.tensor(i), cr.tensor(j)), np.polymul(i, j), exact=True)
    for m in (0, 1, 3, 7):
        _same(cr.polyder(_t(a), m), np.polyder(a, m), exact=True)
    for m, k in ((1, None), (2, None), (2, 3.0), (2, [1.0, 2.0]), (3, [1.0, 2.0, 3.0, 4.0]), (0, None)):
        _same(cr.polyint(_t(a), m, k), np.polyint(a, m, k), exact=True)
    _same(cr.polyint(_t(a), 2, _t(np.array([1.0, -1.0]))), np.polyint(a, 2, [1.0, -1.0]), exact=True)
    pairs = ((a, b), (b, a), (a, b[:1]), (a + 1j, b), (np.polymul(b, b), b), (np.array([1, 2, 3]), np.array([1, 1])))
    for u, v in pairs:
        for got, want in zip(cr.polydiv(_t(u, grad=u.dtype.kind != "i"), _t(v, grad=v.dtype.kind != "i")),
                             np.polydiv(u, v)):
            _same(got, want, exact=True)


def test_polymul_and_polyder_gradients(coeffs):
    a, b, _ = coeffs
    ta, tb = _t(a), _t(b)
    v = np.random.default_rng(6).standard_normal(len(a) + len(b) - 1)
    (cr.polymul(ta, tb) * v).sum().backward()
    np.testing.assert_allclose(ta.grad.data, np.correlate(v, b, "valid"), rtol=RTOL)
    np.testing.assert_allclose(tb.grad.data, np.correlate(v, a, "valid"), rtol=RTOL)
    p = _t(a)
    cr.polyder(p, 2).sum().backward()
    np.testing.assert_array_equal(p.grad.data, [20.0, 12.0, 6.0, 2.0, 0.0, 0.0])


@pytest.mark.parametrize("kwargs", [{}, {"w": True}, {"full": True}, {"cov": True}, {"cov": "unscaled"}])
def test_polyfit_matches_numpy(kwargs):
    rng = np.random.default_rng(7)
    x, y, w = np.linspace(-1, 1, 20), rng.normal(size=(20, 2)), rng.uniform(0.5, 2.0, 20)
    kwargs = {k: (w if k == "w" else v) for k, v in kwargs.items()}
    for yy in (y, y[:, 0]):
        want = np.polyfit(x, yy, 3, **kwargs)
        got = cr.polyfit(_t(x), _t(yy), 3, **{k: (_t(v) if k == "w" else v) for k, v in kwargs.items()})
        if isinstance(want, tuple):
            _same(got[0], want[0], exact=True)
            for g, wv in zip(got[1:], want[1:]):
                np.testing.assert_array_equal(g, wv)
        else:
            _same(got, want, exact=True)


def test_polyfit_gradient_is_the_scaled_pseudoinverse():
    rng = np.random.default_rng(8)
    x, w = rng.uniform(-2, 2, 9), rng.uniform(0.5, 2.0, 9)
    jac = cr.jacobian(lambda y: cr.polyfit(x, y, 3, w=w))(cr.tensor(rng.normal(size=9), dtype=cr.float64))
    np.testing.assert_allclose(jac.data, np.linalg.pinv(np.vander(x, 4) * w[:, None]) * w, rtol=1e-9, atol=1e-12)


def test_roots_match_numpy_and_their_derivative():
    for p in ([1.0, -6.0, 11.0, -6.0], [0.0, 0.0, 2.0, 0.0, 8.0, 0.0, 0.0], [1.0, 2.0, 5.0], [3, -3, 0],
              [1.0 + 1j, 2.0, -1j], [0.0, 0.0], [5.0], np.array([1, -3, 2], np.float32)):
        _same(cr.roots(_t(np.asarray(p), grad=np.asarray(p).dtype.kind != "i")), np.roots(p), exact=True)
    # a simple root r of p: dr/dp_k = -r**(n - k) / p'(r)
    p = np.array([2.0, -3.0, -11.0, 6.0])
    tp = _t(p)
    r = cr.roots(tp)
    assert r.dtype == cr.float64
    r[0].backward()
    r0 = r.data[0]
    np.testing.assert_allclose(tp.grad.data, -r0 ** np.arange(3, -1, -1) / np.polyval(np.polyder(p), r0), rtol=1e-10)


def test_poly_matches_numpy():
    rng = np.random.default_rng(9)
    a = rng.normal(size=(4, 4))
    for z in (np.array([1.0, 2.0, -3.0]), np.array([1, 2]), np.array([1 + 1j, 1 - 1j, 2.0]),
              np.array([1 + 1j, 2.0]), np.array([1.0, 2.0], np.float32)):
        _same(cr.poly(_t(z, grad=z.dtype.kind != "i")), np.poly(z), exact=True)
    _same(cr.poly(_t(a)), np.poly(a))
    assert cr.poly(_t(np.zeros(0))) == np.poly(np.zeros(0)) == 1.0
    # d/dz_i of the coefficients of prod (x - z_j): -prod_{j != i} (x - z_j)'s coefficients
    z = _t(np.array([1.0, 2.0, -3.0]))
    cr.poly(z)[2].backward()                          # the x**1 coefficient: z0 z1 + z0 z2 + z1 z2
    np.testing.assert_allclose(z.grad.data, [-1.0, -2.0, 3.0])


def test_sort_complex_gathers_the_gradient():
    x = _t(np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]]))
    out = cr.sort_complex(x)
    _same(out, np.sort_complex(x.data), exact=True)
    cr.real(out * np.array([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [[100.0, 1.0, 10.0], [10.0, 1.0, 100.0]])
    _same(cr.sort_complex(cr.tensor(np.array([3, 1], np.int8))), np.sort_complex(np.array([3, 1], np.int8)))


# ----- gradients at the edge points -----
def _grads(fn, *xs):
    ts = [_t(x) for x in xs]
    out = fn(*ts)
    out.backward(cr.tensor(np.ones(out.shape)))
    return [np.zeros_like(t.data) if t.grad is None else t.grad.data for t in ts]


def test_copysign_gradients():
    gx, gy = _grads(cr.copysign, [2.0, -2.0, 0.0, -0.0, 3.0], [-1.0, -1.0, -1.0, 1.0, 0.0])
    np.testing.assert_array_equal(gx, [-1.0, 1.0, 0.0, 0.0, 1.0])          # 0 at x == 0, as torch
    np.testing.assert_array_equal(gy, np.zeros(5))


def test_fmod_gradients():
    gx, gy = _grads(cr.fmod, [7.0, -7.0, 5.5], [2.0, 2.0, -2.0])
    np.testing.assert_array_equal(gx, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy, [-3.0, 3.0, 2.0])                    # -trunc(x / y)


@pytest.mark.parametrize("fn", [cr.trunc, cr.fix, cr.spacing, lambda x: cr.modf(x)[1],
                                lambda x: cr.heaviside(x, 0.5)])
def test_piecewise_constant_functions_have_zero_gradient(fn):
    (g,) = _grads(fn, [-1.5, -0.0, 0.0, 0.3, 2.0])
    np.testing.assert_array_equal(g, np.zeros(5))


def test_heaviside_gradient_is_zero_in_x1_and_one_in_x2_where_x1_is_zero():
    # heaviside(x1, x2) is x2 where x1 == 0: linear there (issue 26: the x2 gradient was dropped)
    gx, gy = _grads(cr.heaviside, [0.0, -1.0, 1.0, -0.0], [0.5, 0.5, 0.5, 0.25])
    np.testing.assert_array_equal(gx, np.zeros(4))
    np.testing.assert_array_equal(gy, [1.0, 0.0, 0.0, 1.0])
    y = cr.tensor(0.5, requires_grad=True)                # a broadcast x2: summed over the zeros of x1
    cr.heaviside(cr.tensor([0.0, 2.0, 0.0]), y).sum().backward()
    assert y.grad.data == 2.0
    _, t = cr.jvp(lambda b: cr.heaviside(cr.tensor([0.0, 3.0]), b), (cr.tensor([0.5, 0.5]),),
                  (cr.tensor([1.0, 1.0]),))
    np.testing.assert_array_equal(t.data, [1.0, 0.0])


def test_modf_frexp_nextafter_gradients():
    (g,) = _grads(lambda x: cr.modf(x)[0], [-2.5, 0.25, 3.0])
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0])
    (g,) = _grads(lambda x: cr.frexp(x)[0], [12.0, -0.3, 0.0, 1e-300])
    np.testing.assert_array_equal(g, 2.0 ** -np.frexp([12.0, -0.3, 0.0, 1e-300])[1].astype(float))
    gx, gy = _grads(cr.nextafter, [1.0, -2.0], [2.0, -3.0])
    np.testing.assert_array_equal(gx, [1.0, 1.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])
    (g,) = _grads(lambda x: cr.ldexp(x, np.array([3, -2])), [1.0, 1.0])
    np.testing.assert_array_equal(g, [8.0, 0.25])


def test_nan_to_num_gradient_is_zero_where_replaced():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])
    (g,) = _grads(lambda t: cr.nan_to_num(t * 3.0), x)
    np.testing.assert_array_equal(g, [3.0, 0.0, 0.0, 0.0, 3.0])
    z = _t(np.array([complex(1.0, np.nan), complex(np.inf, 2.0), 1 + 1j]))
    cr.real(cr.nan_to_num(z, posinf=5.0) * (2 - 3j)).sum().backward()        # Re(w z): z.grad = conj(w) per kept part
    np.testing.assert_array_equal(z.grad.data, [2.0, 3j, 2 + 3j])


def test_logaddexp2_at_ties_and_minus_infinity():
    gx, gy = _grads(cr.logaddexp2, [1.0, -np.inf, np.inf, 0.0], [1.0, -np.inf, 1.0, 1.0])
    np.testing.assert_array_equal(gx[:3], [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(gy[:3], [0.5, 0.0, 0.0])
    np.testing.assert_allclose([gx[3], gy[3]], [1 / 3, 2 / 3], rtol=1e-15)   # 2**x / (2**x + 2**y)


def test_sinc_derivatives_at_zero():
    """sinc'(0) = 0, sinc''(0) = -pi**2/3 (exactly the float), sinc'''(0) = 0, sinc''''(0) = pi**4/5."""
    zero = cr.tensor(0.0, dtype=cr.float64)
    d = [cr.sinc]
    for _ in range(4):
        d.append(cr.grad(d[-1]))
    got = [float(f(zero)) for f in d]
    assert got[:4] == [1.0, 0.0, -(math.pi ** 2) / 3, 0.0]
    assert got[4] == pytest.approx(math.pi ** 4 / 5, rel=1e-13)
    # forward over reverse agrees
    assert float(cr.jvp(d[1], (zero,), (cr.tensor(1.0, dtype=cr.float64),))[1]) == -(math.pi ** 2) / 3
    # no cancellation near 0 (where the closed form loses every digit) and no seam at the switch
    x = np.array([1e-9, 1e-5, 0.3, 1 / math.pi, 0.32, 1.5])
    y = np.pi * x
    exact = (y * np.cos(y) - np.sin(y)) / (y * x)
    exact[:2] = -(np.pi ** 2) * x[:2] / 3 * (1 - y[:2] ** 2 / 10)
    (g,) = _grads(cr.sinc, x)
    np.testing.assert_allclose(g, exact, rtol=1e-13)


def test_i0_derivatives():
    x = np.array([0.0, 0.5, -1.5, 4.0])
    (g,) = _grads(cr.i0, x)
    np.testing.assert_allclose(g, scipy.special.i1(x), rtol=1e-14)
    zero = cr.tensor(0.0, dtype=cr.float64)
    assert float(cr.grad(cr.grad(cr.i0))(zero)) == 0.5                     # i1'(0) = 1/2
    x = cr.tensor(1.3, dtype=cr.float64)
    # i0'' = i0 - i1 / x
    assert float(cr.grad(cr.grad(cr.i0))(x)) == pytest.approx(np.i0(1.3) - scipy.special.i1(1.3) / 1.3, rel=1e-14)


# ----- errors -----
@pytest.mark.parametrize("name", BINARY + ["ldexp"])
def test_out_is_refused(name):
    with pytest.raises(TypeError, match=f"^{name}: out= is not supported"):
        getattr(cr, name)(_t([1.0]), 1, out=np.empty(1))


@pytest.mark.parametrize("name", ["trunc", "fix", "spacing", "modf", "frexp", "deg2rad", "rad2deg", "positive",
                                  "signbit", "all", "any", "gcd"])
def test_out_is_refused_for_unary_and_plain_functions(name):
    args = (cr.tensor([4, 6]), 2) if name == "gcd" else (_t([1.0]),)
    with pytest.raises(TypeError, match=f"^{name}: out= is not supported"):
        getattr(cr, name)(*args, out=np.empty(1))


def test_argument_errors():
    p = _t([1.0, 2.0])
    with pytest.raises(ValueError, match="polyder: order of derivative must be positive"):
        cr.polyder(p, -1)
    with pytest.raises(ValueError, match="polyint: order of integral must be positive"):
        cr.polyint(p, -1)
    with pytest.raises(ValueError, match="k must be a scalar or a rank-1 array"):
        cr.polyint(p, 3, [1.0, 2.0])
    with pytest.raises(ValueError, match="roots: input must be a rank-1 array"):
        cr.roots(_t(np.ones((2, 2))))
    with pytest.raises(ValueError, match="poly: input must be 1d or non-empty square 2d array"):
        cr.poly(_t(np.ones((2, 3))))
    with pytest.raises(TypeError, match="ldexp"):
        cr.ldexp(_t([1.0]), 1.5)
    with pytest.raises(ValueError, match="polymul: the polynomials must not be empty"):
        cr.polymul(_t(np.zeros(0)), p)


def test_sixteen_bit_polyfit_runs_in_float32_and_rounds_once():
    x, y = np.linspace(-1, 1, 8), np.cos(np.linspace(-1, 1, 8))
    for dtype in (cr.float16, cr.bfloat16):
        got = cr.polyfit(_t(x.astype(dtype)), _t(y.astype(dtype)), 2)
        want = np.polyfit(x.astype(dtype).astype(np.float32), y.astype(dtype).astype(np.float32), 2)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.data, want.astype(dtype))


# ----- the plain functions -----
PLAIN_CASES = [
    ("signbit", ([-0.0, 1.0, -2.0],), {}), ("isneginf", ([-np.inf, 1.0, np.inf],), {}),
    ("isposinf", ([-np.inf, 1.0, np.inf],), {}), ("iscomplex", ([1 + 1j, 2.0],), {}), ("isreal", ([1 + 1j, 2.0],), {}),
    ("iscomplexobj", ([1.0, 2.0],), {}), ("isrealobj", ([1.0, 2.0],), {}),
    ("isclose", ([1.0, 2.0, np.nan], [1.0 + 1e-9, 2.1, np.nan]), {"equal_nan": True}),
    ("allclose", ([1.0, 2.0], [1.0, 2.0 + 1e-9]), {}), ("allclose", ([1.0, 2.0], [1.0, 2.1]), {"rtol": 0.1}),
    ("array_equal", ([1.0, np.nan], [1.0, np.nan]), {"equal_nan": True}), ("array_equiv", ([1.0, 1.0], [1.0]), {}),
    ("gcd", ([12, 18, -4], [8, 12, 6]), {}), ("lcm", ([12, 18, -4], [8, 12, 6]), {}),
    ("bitwise_and", ([12, 5], [10, 3]), {}), ("bitwise_or", ([12, 5], [10, 3]), {}),
    ("bitwise_xor", ([12, 5], [10, 3]), {}), ("bitwise_not", ([12, -5],), {}), ("invert", ([True, False],), {}),
    ("bitwise_count", ([7, -8, 1023],), {}), ("left_shift", ([1, 3], [2, 4]), {}),
    ("right_shift", ([64, 7], [2, 1]), {}),
    ("bitwise_left_shift", ([1, 3], [2, 4]), {}), ("bitwise_right_shift", ([64, 7], [2, 1]), {}),
    ("logical_xor", ([1.0, 0.0, 2.0], [0.0, 0.0, 3.0]), {}),
    ("count_nonzero", ([[1.0, 0.0], [2.0, 3.0]],), {}), ("count_nonzero", ([[1.0, 0.0], [2.0, 3.0]],), {"axis": 0}),
    ("count_nonzero", ([[1.0, 0.0], [2.0, 3.0]],), {"axis": 1, "keepdims": True}),
    ("all", ([[1.0, 0.0], [2.0, 3.0]],), {}), ("all", ([[1.0, 0.0], [2.0, 3.0]],), {"axis": (0, 1), "keepdims": True}),
    ("any", ([[1.0, 0.0], [0.0, 0.0]],), {"axis": 1}), ("any", ([[0.0, 0.0]],), {"where": np.array([[True, False]])}),
]


@pytest.mark.parametrize("name, args, kwargs", PLAIN_CASES, ids=[c[0] for c in PLAIN_CASES])
def test_plain_functions_return_numpys_result_without_grad(name, args, kwargs):
    arrays = [np.asarray(a) for a in args]
    want = getattr(np, name)(*arrays, **kwargs)
    assert type(getattr(cr, name)(*arrays, **kwargs)) is type(want)         # ndarrays in: NumPy's own result
    tensors = [cr.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays]
    got = getattr(cr, name)(*tensors, **kwargs)
    if isinstance(want, (bool, int)):
        assert type(got) is type(want) and got == want
    else:
        assert isinstance(got, cr.Tensor) and not got.requires_grad and got.grad_fn is None
        _same(got, want, exact=True)
    dispatched = getattr(np, name)(*tensors, **kwargs)                       # np.<name>(tensor) runs ours
    assert type(dispatched) is type(got) and np.array_equal(np.asarray(getattr(dispatched, "data", dispatched)),
                                                            np.asarray(want))


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning", "kaiser"])
@pytest.mark.parametrize("m", [0, 1, 7])
def test_window_functions(name, m):
    args = (m, 5.0) if name == "kaiser" else (m,)
    w = getattr(cr, name)(*args)
    assert isinstance(w, cr.Tensor) and w.dtype == cr.get_default_dtype() and not w.requires_grad
    np.testing.assert_array_equal(w.data, getattr(np, name)(*args).astype(cr.get_default_dtype()))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_i0_has_numpys_dtypes(dtype):
    # cr.i0 is a composite of cr.special.i0 (one i0 primitive) with np.i0's result dtypes
    a = np.array([0, 1, 2], dtype=dtype)
    for arg in (a, cr.tensor(a)):
        out = cr.i0(arg)
        assert type(out) is (cr.Tensor if isinstance(arg, cr.Tensor) else np.ndarray)
        assert np.asarray(out.data if isinstance(out, cr.Tensor) else out).dtype == np.i0(a).dtype
    assert cr.i0(1.0).dtype == np.i0(1.0).dtype and cr.i0(1.0).shape == np.i0(1.0).shape == ()
    assert cr.i0(cr.tensor([1.5], requires_grad=True)).grad_fn.name == "I0Backward"
    with pytest.raises(TypeError, match="complex"):
        cr.i0(np.array([1j]))


def test_i0_of_kaiser_and_low_precision():
    x = cr.tensor(np.array([0.5, 2.0]).astype(cr.bfloat16), requires_grad=True)
    out = cr.i0(x)
    assert out.dtype == cr.bfloat16
    out.astype(cr.float32).sum().backward()
    assert x.grad.dtype == cr.bfloat16


# ----- NumPy dispatch -----
DISPATCH = [
    (np.copysign, (1.0, -1.0)), (np.fmod, (5.5, 2.0)), (np.heaviside, (0.5, 0.5)), (np.nextafter, (1.0, 2.0)),
    (np.float_power, (2.0, 1.5)), (np.logaddexp2, (1.0, 2.0)), (np.ldexp, (1.5, None)),
    (np.deg2rad, (30.0,)), (np.radians, (30.0,)), (np.rad2deg, (1.0,)), (np.degrees, (1.0,)), (np.trunc, (-1.5,)),
    (np.fix, (-1.5,)), (np.i0, (1.5,)), (np.sinc, (0.3,)), (np.spacing, (1.0,)), (np.positive, (2.0,)),
    (np.nan_to_num, (2.0,)), (np.real_if_close, (2.0,)), (np.unwrap, (2.0,)), (np.sort_complex, (2.0,)),
    (np.polyval, (2.0, 3.0)), (np.polyadd, (1.0, 2.0)), (np.polysub, (1.0, 2.0)), (np.polymul, (1.0, 2.0)),
    (np.polyder, (2.0,)), (np.polyint, (2.0,)), (np.poly, (2.0,)), (np.roots, (2.0,)),
]


@pytest.mark.parametrize("func, args", DISPATCH, ids=[f.__name__ for f, _ in DISPATCH])
def test_numpy_dispatch_runs_the_differentiable_version(func, args):
    base = np.array([1.5, -0.5, 3.0])
    ts = [_t(base * a) for a in args if a is not None]
    extra = [np.array([2, -1, 0])] if func is np.ldexp else []
    with np.errstate(invalid="ignore"):          # float_power of a negative base: NaN, as NumPy
        out = func(*ts, *extra)
        ref = getattr(cr, func.__name__)(*[t.data for t in ts], *extra)
    assert isinstance(out, cr.Tensor) and out.requires_grad
    _same(out, ref)


def test_numpy_dispatch_of_functions_with_two_results():
    base = np.array([1.5, -0.5, 3.0])
    ts = [_t(base)]
    for got, want in zip(np.modf(ts[0]), np.modf(base)):
        _same(got, want)
    mantissa, exponent = np.frexp(ts[0])
    assert mantissa.requires_grad and not exponent.requires_grad
    q, r = np.polydiv(_t([1.0, 0.0, -1.0]), _t([1.0, 1.0]))
    assert q.requires_grad and r.requires_grad
    assert np.polyfit(_t(base), _t(base), 1).requires_grad
