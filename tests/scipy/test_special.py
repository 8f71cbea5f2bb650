"""cr.special against scipy.special: values, dtypes and shapes for every argument form, SciPy's
dispatch, the stated edge points (poles, xlogy at 0, logsumexp's b == 0 entries) and the errors of
the arguments without a derivative. The rules themselves are checked by the op-table rows
(tests/op_specs/special.py)."""
import math

import numpy as np
import pytest
import scipy.special as sc

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from chainrule.errors import GraphError
from chainrule.ops import special as S

RTOL, ATOL = 1e-12, 1e-14
EDGE = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")    # inf, NaN at edge points: stated


def _same(got, want, rtol=RTOL, atol=ATOL):
    got = got.data if isinstance(got, cr.Tensor) else got
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _leaf(x, dtype=cr.float64):
    return cr.tensor(np.asarray(x, dtype=dtype), requires_grad=True)


def _grad(fn, *xs):
    xs = [_leaf(x) for x in xs]
    gs = cr.autograd.grad(fn(*xs).sum(), xs, allow_unused=True)
    return [None if g is None else g.data for g in gs]


R = np.random.default_rng(3)
UNARY = {   # name: domain
    "gammaln": (-3.0, 4.0), "gamma": (-3.0, 4.0), "loggamma": (0.1, 5.0), "digamma": (-3.0, 4.0),
    "psi": (-3.0, 4.0), "erf": (-3.0, 3.0), "erfc": (-3.0, 3.0), "erfinv": (-0.99, 0.99),
    "erfcinv": (0.01, 1.99), "erfcx": (-3.0, 30.0), "ndtr": (-5.0, 5.0), "ndtri": (0.01, 0.99),
    "log_ndtr": (-40.0, 5.0), "expit": (-40.0, 40.0), "logit": (0.01, 0.99), "log_expit": (-40.0, 40.0),
    "entr": (0.0, 3.0), "i0": (-5.0, 5.0), "i0e": (-5.0, 5.0), "i1": (-5.0, 5.0), "i1e": (-5.0, 5.0),
    "sinc": (-3.0, 3.0),
}
BINARY = {  # name: (domain of x, domain of y)
    "xlogy": ((-2.0, 2.0), (0.0, 3.0)), "xlog1py": ((-2.0, 2.0), (-0.9, 3.0)),
    "rel_entr": ((0.0, 3.0), (0.1, 3.0)), "kl_div": ((0.0, 3.0), (0.1, 3.0)),
    "beta": ((0.2, 4.0), (0.2, 4.0)), "betaln": ((0.2, 4.0), (0.2, 4.0)),
    "gammainc": ((0.2, 4.0), (0.0, 5.0)), "gammaincc": ((0.2, 4.0), (0.0, 5.0)),
    "zeta": ((1.1, 4.0), (0.2, 3.0)),
}


# ----- values, dtypes and shapes: SciPy's, for every argument form -----
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_match_scipy(name):
    fn, ref = getattr(S, name), getattr(sc, name)
    x = R.uniform(*UNARY[name], (3, 4))
    for arg in (x, x.astype(np.float32), x[0, 0], np.float64(x[1, 1]), x.astype(np.float32)[0]):
        _same(fn(arg), ref(arg))                                 # ndarrays in, ndarrays out
        _same(fn(cr.tensor(arg)), ref(arg))                      # Tensors: the same values
    if name not in ("erfinv", "erfcinv", "ndtri", "logit", "entr"):
        _same(fn(np.arange(3)), ref(np.arange(3)))               # integers: SciPy's float64


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_match_scipy_with_broadcasting(name):
    fn, ref = getattr(S, name), getattr(sc, name)
    (lo, hi), (lo2, hi2) = BINARY[name]
    x, y = R.uniform(lo, hi, (3, 1)), R.uniform(lo2, hi2, (1, 4))
    for a, b in ((x, y), (x.astype(np.float32), y.astype(np.float32)), (x[0, 0], y), (x, float(y[0, 0]))):
        _same(fn(a, b), ref(a, b))
        _same(fn(cr.tensor(a), b), ref(a, b))


def test_three_and_integer_argument_functions_match_scipy():
    a, b, x = R.uniform(0.3, 4, (3, 1)), R.uniform(0.3, 4, (1, 4)), R.uniform(0, 1, (3, 4))
    _same(S.betainc(a, b, x), sc.betainc(a, b, x))
    _same(S.betainc(a.astype(np.float32), b.astype(np.float32), x.astype(np.float32)),
          sc.betainc(a.astype(np.float32), b.astype(np.float32), x.astype(np.float32)))
    x = R.uniform(0.2, 4, (3, 4))
    for n in (0, 1, 3, np.array([[0], [1], [2]])):
        _same(S.polygamma(n, x), sc.polygamma(n, x))
        _same(S.polygamma(n, cr.tensor(x)), sc.polygamma(n, x))
    _same(S.polygamma(2, x.astype(np.float32)), sc.polygamma(2, x.astype(np.float32)))
    for d in (1, 2, 5, np.int64(3)):
        _same(S.multigammaln(x + 2, d), sc.multigammaln(x + 2, d))
        _same(S.multigammaln(cr.tensor(x.astype(np.float32) + 2), d), sc.multigammaln(x.astype(np.float32) + 2, d))
    _same(S.multigammaln(np.float64(23.5), 10), sc.multigammaln(23.5, 10))
    xs = np.array([-3.5, -1.5, 0.5, 2.0, 5.0])
    _same(S.zeta(xs), sc.zeta(xs))                              # Riemann, continued to x < 1
    _same(S.zeta(cr.tensor(xs)), sc.zeta(xs))
    _same(S.zeta(xs[2:], 2.5), sc.zeta(xs[2:], 2.5))


def test_erf_is_scipys():
    x = R.uniform(-3, 3, 50)
    _same(cr.erf(x), sc.erf(x), rtol=0, atol=0)
    z = x + 1j * R.uniform(-1, 1, 50)
    _same(S.erf(z), sc.erf(z), rtol=0, atol=0)
    assert S.erf is cr.erf


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1), (0, 2), (2,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_matches_scipy(axis, keepdims):
    a = R.uniform(-3, 3, (2, 3, 4)) if axis != (0, 1) else R.uniform(-3, 3, (2, 3))
    b = R.uniform(-1, 2, a.shape)
    for kw in ({}, {"b": b}, {"b": b[0]}, {"b": 2.0}, {"b": np.abs(b) + 0.1}):
        for rs in (False, True):
            want = sc.logsumexp(a, axis=axis, keepdims=keepdims, return_sign=rs, **kw)
            for arg in (a, cr.tensor(a)):
                got = S.logsumexp(arg, axis=axis, keepdims=keepdims, return_sign=rs, **kw)
                with np.errstate(invalid="ignore"):
                    if rs:
                        _same(got[0], want[0]), _same(got[1], want[1])
                    else:
                        _same(got, want)
    _same(S.logsumexp(a.astype(np.float32), axis=axis), sc.logsumexp(a.astype(np.float32), axis=axis),
          rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1), (1, 2), (0, 1, 2), (1,)])
def test_softmax_matches_scipy_axis_none_is_every_entry(name, axis):
    x = R.uniform(-3, 3, (2, 3, 4))
    fn, ref = getattr(S, name), getattr(sc, name)
    _same(fn(x, axis=axis), ref(x, axis=axis))
    _same(fn(cr.tensor(x), axis), ref(x, axis=axis))
    _same(fn(x.astype(np.float32), axis), ref(x.astype(np.float32), axis=axis), rtol=1e-6, atol=1e-7)
    _same(fn(np.arange(4)), ref(np.arange(4)))
    _same(fn(np.float64(2.0)), ref(np.float64(2.0)))


def test_softmax_axis_none_differs_from_cr_softmax():
    x = R.uniform(-1, 1, (2, 3))
    assert np.allclose(np.sum(S.softmax(x)), 1.0) and not np.allclose(cr.softmax(x), S.softmax(x))


# ----- dispatch: scipy.special's ufuncs on Tensors run cr.special -----
@pytest.mark.parametrize("ufunc", sorted(S.NUMPY, key=lambda u: u.__name__), ids=lambda u: u.__name__)
def test_scipy_ufuncs_dispatch_on_tensors(ufunc):
    args = [_leaf(R.uniform(0.2, 0.8, 3)) for _ in range(ufunc.nin)]
    out = ufunc(*args)
    assert isinstance(out, cr.Tensor) and out.requires_grad
    _same(out, ufunc(*[a.data for a in args]))
    if ufunc.__name__ in ("betainc", "gammainc", "gammaincc", "zeta"):
        return
    out.sum().backward()
    assert all(np.all(np.isfinite(a.grad.data)) for a in args)


def test_names_live_under_special_only():
    assert S.NAMES == () and not hasattr(cr, "gammaln") and cr.special.psi is cr.special.digamma
    assert set(S.__all__) <= set(dir(S))


# ----- edge points -----
@EDGE
def test_gammaln_and_digamma_at_poles():
    """gammaln is inf at 0, -1, -2, ...; its gradient is digamma there: -inf at 0, NaN at the negative
    integers (SciPy's psi; PyTorch's lgamma too). A zero cotangent gives 0 (where-masked poles)."""
    x = _leaf([0.0, -1.0, -2.0, 2.0])
    y = S.gammaln(x)
    np.testing.assert_array_equal(y.data, [np.inf, np.inf, np.inf, 0.0])
    (g,) = cr.autograd.grad(y.sum(), x)
    np.testing.assert_array_equal(np.isnan(g.data), [False, True, True, False])
    assert g.data[0] == -np.inf and g.data[3] == pytest.approx(1 - np.euler_gamma)
    (g,) = cr.autograd.grad(cr.where(x > 0, S.gammaln(x), 0.0).sum(), x)
    np.testing.assert_array_equal(g.data, [0.0, 0.0, 0.0, 1 - np.euler_gamma])


@EDGE
def test_xlogy_at_zero():
    """xlogy(0, y) = 0 for every y >= 0; at x == 0 the gradient in x is log(y), 0 where y <= 0 (as
    PyTorch), and in y it is 0, also at y == 0 (where PyTorch's x / y gives NaN); at x != 0, y == 0:
    -inf in x, inf in y."""
    x, y = _leaf([0.0, 0.0, 1.0, 0.0, 0.0]), _leaf([0.0, 2.0, 0.0, 1.0, -1.0])
    with np.errstate(invalid="ignore"):
        out = S.xlogy(x, y)
    np.testing.assert_array_equal(out.data, sc.xlogy(x.data, y.data))
    np.testing.assert_array_equal(out.data[:4], [0.0, 0.0, -np.inf, 0.0])
    gx, gy = cr.autograd.grad(out.sum(), [x, y])
    np.testing.assert_array_equal(gx.data, [0.0, np.log(2.0), -np.inf, 0.0, 0.0])
    np.testing.assert_array_equal(gy.data, [0.0, 0.0, np.inf, 0.0, 0.0])
    # second order at x == 0, y != 0: d/dx (x / y) = d/dy log(y) = 1 / y
    x, y = _leaf([0.0]), _leaf([2.0])
    gx, gy = cr.autograd.grad(S.xlogy(x, y).sum(), [x, y], create_graph=True)
    assert cr.autograd.grad(gy.sum(), x)[0].data[0] == 0.5 == cr.autograd.grad(gx.sum(), y)[0].data[0]
    gx, gy = _grad(S.xlog1py, [0.0, 0.0, 0.0], [-1.0, 1.0, -2.0])
    np.testing.assert_array_equal(gx, [0.0, np.log(2.0), 0.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0])


@EDGE
def test_xlogy_gradients_match_torch_but_at_the_origin():
    torch = pytest.importorskip("torch")
    x, y = np.array([0.0, 0.0, 1.5, -2.0, 0.0]), np.array([2.0, 0.5, 0.0, 3.0, -1.0])
    for ours, theirs in ((S.xlogy, torch.special.xlogy), (S.xlog1py, torch.special.xlog1py)):
        tx, ty = (torch.tensor(v, requires_grad=True) for v in (x, y))
        theirs(tx, ty).sum().backward()
        with np.errstate(invalid="ignore"):
            gx, gy = _grad(ours, x, y)
        np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-15)     # (torch's log1p: 1 ulp off)
        np.testing.assert_array_equal(gy[:4], ty.grad.numpy()[:4])
        assert gy[4] == 0          # xlog1py at (0, -1): 0 (PyTorch: 0 / 0 = NaN); xlogy at (0, -1): -0.0


@EDGE
def test_logsumexp_b_zero_entries():
    """b == 0 entries are left out of the sum (a may be inf or NaN there, as SciPy): gradient 0 in
    a; in b, the partial derivative exp(a - out) * sign (0 where a is not finite)."""
    a, b = _leaf([1.0, np.inf, 3.0, np.nan]), _leaf([1.0, 0.0, 0.0, 0.0])
    out = S.logsumexp(a, b=b)
    assert float(out.data) == sc.logsumexp(a.data, b=b.data) == 1.0
    ga, gb = cr.autograd.grad(out, [a, b])
    np.testing.assert_array_equal(ga.data, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(gb.data, [1.0, 0.0, np.exp(2.0), 0.0], rtol=1e-15)
    # every b == 0 (or every a == -inf): -inf, sign 0, gradient 0
    a, b = _leaf([[1.0, 2.0], [-np.inf, -np.inf]]), _leaf([[0.0, 0.0], [1.0, 1.0]])
    out, sgn = S.logsumexp(a, axis=1, b=b, return_sign=True)
    want = sc.logsumexp(a.data, axis=1, b=b.data, return_sign=True)
    _same(out, want[0]), _same(sgn, want[1])
    assert not sgn.requires_grad
    ga, gb = cr.autograd.grad(out.sum(), [a, b])
    np.testing.assert_array_equal(ga.data, 0.0)
    np.testing.assert_array_equal(gb.data, 0.0)
    # a negative sum: NaN without return_sign (SciPy), log|sum| and -1 with it; the gradient of log|sum|
    a, b = _leaf([1.0, 2.0]), _leaf([1.0, -1.0])
    with np.errstate(invalid="ignore"):
        assert np.isnan(float(S.logsumexp(a, b=b).data)) and np.isnan(sc.logsumexp(a.data, b=b.data))
    out, sgn = S.logsumexp(a, b=b, return_sign=True)
    assert float(sgn.data) == -1.0
    ga, gb = cr.autograd.grad(out, [a, b])
    s = np.exp(1.0) - np.exp(2.0)
    np.testing.assert_allclose(ga.data, [np.exp(1.0) / s, -np.exp(2.0) / s], rtol=1e-14)
    np.testing.assert_allclose(gb.data, [np.exp(1.0) / s, np.exp(2.0) / s], rtol=1e-14)


@EDGE
def test_logsumexp_without_b_is_cr_logsumexp():
    x = _leaf([[-np.inf, -np.inf], [np.inf, 0.0], [1.0, 2.0]])
    out, sgn = S.logsumexp(x, axis=1, return_sign=True)
    want = sc.logsumexp(x.data, axis=1, return_sign=True)
    _same(out, want[0]), _same(sgn, want[1])
    (g,) = cr.autograd.grad(out.sum(), x)
    np.testing.assert_allclose(g.data, [[0, 0], [1, 0], sc.softmax([1.0, 2.0])], rtol=1e-15)


def test_bessel_and_sinc_at_zero():
    x0 = cr.tensor(0.0, dtype=cr.float64)
    d = {n: cr.grad(getattr(S, n)) for n in ("i0", "i0e", "i1", "i1e", "sinc")}
    assert [float(d[n](x0)) for n in ("i0", "i0e", "i1", "i1e", "sinc")] == [0.0, 0.0, 0.5, 0.5, 0.0]
    assert float(cr.grad(d["i1"])(x0)) == 0.0                    # i1 is odd
    assert float(cr.grad(d["i0"])(x0)) == 0.5                    # i0'' = i1' = 1/2
    assert float(cr.grad(d["sinc"])(x0)) == pytest.approx(-math.pi ** 2 / 3, rel=1e-15)
    assert float(cr.grad(cr.grad(d["sinc"]))(x0)) == 0.0
    # sinc' has no cancellation near 0: the series and the closed form meet at |x| = 0.05
    x = np.array([1e-9, 1e-5, 0.0499999, 0.05, 0.3])
    want = (np.cos(np.pi * x) * np.pi * x - np.sin(np.pi * x)) / (np.pi * x * x)
    np.testing.assert_allclose(_grad(S.sinc, x)[0][2:], want[2:], rtol=1e-12)
    np.testing.assert_allclose(_grad(S.sinc, x)[0][:2], -math.pi ** 2 / 3 * x[:2], rtol=1e-9)


@EDGE
def test_log_ndtr_gradient_far_in_both_tails():
    """phi(x) / ndtr(x) through erfcx: accurate at -1e5 (~ -x) and 0 at +40 (no 0 / 0 or overflow)."""
    mpmath = pytest.importorskip("mpmath")
    x = np.array([-1e5, -40.0, -5.0, 0.0, 5.0, 40.0])
    (g,) = _grad(S.log_ndtr, x)

    def ratio(v):
        v = mpmath.mpf(v)
        return float(mpmath.npdf(v) / mpmath.ncdf(v))
    with mpmath.workdps(50):
        np.testing.assert_allclose(g, [ratio(v) for v in x], rtol=1e-12, atol=0)


def test_erfcx_derivatives_do_not_cancel_at_large_x():
    """erfcx' = 2x erfcx - 2/sqrt(pi) cancels for large x (it was 2% off at 1e7, 0 at 1e8): the
    asymptotic series there, in both modes, under vmap, and its second derivative."""
    mpmath = pytest.importorskip("mpmath")
    x = np.array([-20.0, -5.0, 0.0, 1.0, 7.999, 8.0, 8.5, 20.0, 1e3, 1e7, 1e8])

    def exact(v):
        v = mpmath.mpf(v)
        e, c = mpmath.exp(v * v) * mpmath.erfc(v), 2 / mpmath.sqrt(mpmath.pi)
        return float(2 * v * e - c), float((4 * v * v + 2) * e - 2 * v * c)
    with mpmath.workdps(60):
        want = np.array([exact(v) for v in x])
    (g,) = _grad(S.erfcx, x)
    np.testing.assert_allclose(g, want[:, 0], rtol=3e-15, atol=0)
    np.testing.assert_allclose(cr.vmap(cr.jacfwd(S.erfcx))(x), want[:, 0], rtol=3e-15, atol=0)
    np.testing.assert_allclose(cr.vmap(cr.grad(cr.grad(S.erfcx)))(x), want[:, 1], rtol=1e-12, atol=0)
    assert float(cr.grad(S.erfcx)(cr.tensor(1e8, dtype=cr.float64))) == pytest.approx(-5.641895835e-17, rel=1e-9)
    assert float(cr.grad(S.erfcx)(cr.tensor(1e200, dtype=cr.float64))) == 0.0     # -5.6e-401 underflows
    assert cr.gradgradcheck(S.erfcx, [_leaf([7.5, 8.2, 12.0])])


def test_expit_gradient_in_the_tails_and_its_second_derivative():
    (g,) = _grad(S.expit, [-50.0, 40.0])
    np.testing.assert_allclose(g, np.exp([-50.0, -40.0]), rtol=1e-12)     # out * expit(-x): no 1 - out
    assert cr.gradgradcheck(S.logit, [_leaf([0.2, 0.7])])


@EDGE
def test_entropies_at_zero():
    gx, = _grad(S.entr, [0.0, 1.0])
    np.testing.assert_array_equal(gx, [np.inf, -1.0])          # -(log 0 + 1)
    gx, gy = _grad(S.kl_div, [0.0, 2.0], [1.0, 1.0])
    np.testing.assert_array_equal(gy, [1.0, -1.0])             # 1 - x / y
    assert gx[0] == -np.inf


@EDGE
def test_erfinv_and_ndtri_derivatives_at_their_ends():
    (g,) = _grad(S.erfinv, [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(g, [np.inf, math.sqrt(math.pi) / 2, np.inf])
    (g,) = _grad(S.ndtri, [0.5])
    assert g[0] == pytest.approx(math.sqrt(2 * math.pi), rel=1e-15)


def test_complex_gamma_loggamma_first_order_only():
    """gamma/loggamma of complex z: first derivatives (digamma of complex z); a second derivative
    needs digamma's, which chainrule refuses for complex data with a clear error."""
    z = cr.tensor(np.array([1.5 + 0.5j]), requires_grad=True)
    (g,) = cr.autograd.grad(cr.real(S.loggamma(z)).sum(), z)
    np.testing.assert_allclose(g.data, np.conj(sc.psi(z.data)), rtol=1e-14)
    with pytest.raises(cr.DTypeError, match="digamma: no complex derivative"):
        cr.autograd.grad(cr.real(S.gamma(z)).sum(), z, create_graph=True)


# ----- arguments without a derivative: constants work, a gradient request is a clear error -----
NO_DERIVATIVE = [   # (call, the inputs that need a gradient, the argument named)
    ("betainc", lambda a, b, x: S.betainc(a, b, x), [0], "with respect to a"),
    ("betainc", lambda a, b, x: S.betainc(a, b, x), [1], "with respect to b"),
    ("gammainc", lambda a, b, x: S.gammainc(a, x), [0], "with respect to a"),
    ("gammaincc", lambda a, b, x: S.gammaincc(a, x), [0], "with respect to a"),
    ("zeta", lambda a, b, x: S.zeta(a + 1.5, x), [0], "with respect to x"),
    ("zeta", lambda a, b, x: S.zeta(a + 1.5), [0], "with respect to x"),
    ("polygamma", lambda a, b, x: S.polygamma(a, x), [0], "with respect to n"),
]


@pytest.mark.parametrize("name, fn, which, arg", NO_DERIVATIVE)
def test_a_gradient_in_an_argument_without_a_derivative_names_it(name, fn, which, arg):
    vals = [np.array([1.0, 2.0]), np.array([2.0, 1.5]), np.array([0.3, 0.6])]
    xs = [cr.tensor(v, requires_grad=(i in which or i == 2)) for i, v in enumerate(vals)]
    out = fn(*xs)
    assert out.requires_grad
    with pytest.raises(GraphError, match=rf"^backward of '{name}': {name} is not differentiable {arg}"):
        out.sum().backward()
    with pytest.raises(GraphError, match=rf"^forward-mode derivative of '{name}': .*{arg}"), dual_level():
        fn(*[make_dual(cr.tensor(v), cr.tensor(np.ones(2))) if i in which else cr.tensor(v)
             for i, v in enumerate(vals)])
    # the same arguments as constants (tensors without grad): the differentiable one works
    consts = [cr.tensor(v) for v in vals[:2]] + [_leaf(vals[2])]
    out = fn(*consts)
    if out.requires_grad:                     # (Riemann's zeta has no differentiable argument)
        (g,) = cr.autograd.grad(out.sum(), consts[2])
        assert np.all(np.isfinite(g.data))


def test_constant_arguments_give_the_documented_derivatives():
    a, b, x = 2.0, 3.0, np.array([0.25, 0.5])
    (g,) = _grad(lambda x: S.betainc(a, b, x), x)
    np.testing.assert_allclose(g, x ** (a - 1) * (1 - x) ** (b - 1) / sc.beta(a, b), rtol=1e-13)
    (g,) = _grad(lambda x: S.gammainc(a, x), x)
    np.testing.assert_allclose(g, x ** (a - 1) * np.exp(-x) / sc.gamma(a), rtol=1e-13)
    (g,) = _grad(lambda q: S.zeta(3.0, q), x)
    np.testing.assert_allclose(g, -3.0 * sc.zeta(4.0, x), rtol=1e-13)
    (g,) = _grad(lambda x: S.polygamma(1, x), x)
    np.testing.assert_allclose(g, sc.polygamma(2, x), rtol=1e-13)
    (g,) = _grad(lambda x: S.multigammaln(x, 2), x + 1)
    np.testing.assert_allclose(g, sc.psi(x + 1) + sc.psi(x + 0.5), rtol=1e-13)
    # forward mode agrees
    with dual_level():
        t = unpack_dual(S.betainc(a, b, make_dual(cr.tensor(x), cr.tensor(np.ones(2))))).tangent
    np.testing.assert_allclose(t.data, x ** (a - 1) * (1 - x) ** (b - 1) / sc.beta(a, b), rtol=1e-13)


def test_multigammaln_errors_as_scipy():
    with pytest.raises(ValueError, match="d should be a positive integer"):
        S.multigammaln(np.array(3.0), 2.5)
    with pytest.raises(ValueError, match=r"a > 0.5 \* \(d - 1\)"):
        S.multigammaln(cr.tensor([0.5, 3.0]), 3)


def test_16_bit_inputs_round_scipy_values_once():
    x = np.array([0.3, 1.7, 2.5])
    for dtype in (cr.float16, cr.bfloat16):
        out = S.gammaln(cr.tensor(x.astype(dtype)))
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.data, sc.gammaln(x.astype(dtype).astype(np.float64)).astype(dtype))
