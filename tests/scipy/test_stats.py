"""cr.stats against scipy.stats (values, every method, broadcasting, edges), gradients against
central differences (both modes, second order) and against torch.distributions."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

import chainrule as cr
from chainrule.errors import GraphError

F64 = cr.float64
TOL = dict(rtol=1e-12, atol=1e-14, equal_nan=True)

X_REAL = np.array([-1e3, -40.0, -7.5, -2.0, -0.3, 0.0, 1e-300, 0.4, 1.0, 2.5, 9.0, 50.0, np.inf, -np.inf, np.nan])
X_POS = np.array([-1.0, 0.0, 1e-8, 0.05, 0.5, 1.0, 2.0, 3.7, 12.0, 60.0, np.inf, np.nan])
X_UNIT = np.array([-0.5, 0.0, 1e-9, 0.02, 0.3, 0.5, 0.77, 0.99, 1.0, 1.5, np.nan])
K_INT = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 7.0, 20.0, np.inf, np.nan])

# name, x grid, parameter sets (positional shapes, then keywords); the last sets broadcast
CONTINUOUS = [
    ("norm", X_REAL, [((), {}), ((), {"loc": 1.5, "scale": 0.3}), ((), {"scale": -1.0}),
                      ((), {"loc": np.array([[0.0], [2.0]]), "scale": np.array([0.5, 1.0, 3.0])[:, None, None]})]),
    ("t", X_REAL, [((3.5,), {}), ((1.0,), {"loc": -1.0, "scale": 2.0}), ((np.inf,), {}), ((0.4,), {}),
                   ((np.array([[2.0], [80.0], [3e5]]),), {"scale": np.array([1.0, 0.5])[:, None, None]}),
                   ((-1.0,), {})]),
    ("gamma", X_POS, [((2.5,), {}), ((0.7,), {"scale": 2.0}), ((1.0,), {"loc": -0.5}), ((0.0,), {}),
                      ((np.array([[0.3], [4.0], [40.0]]),), {"scale": np.array([[[1.0]], [[3.0]]])})]),
    ("beta", X_UNIT, [((2.0, 3.0), {}), ((0.5, 0.5), {}), ((1.0, 1.0), {"loc": 0.1, "scale": 0.8}),
                      ((np.array([[0.7], [5.0]]), np.array([0.4, 2.0, 30.0])[:, None, None]), {}),
                      ((-1.0, 2.0), {})]),
    ("chi2", X_POS, [((3.0,), {}), ((1.0,), {"scale": 2.0}),
                     ((np.array([[0.5], [2.0], [25.0]]),), {"loc": np.array([0.0, -0.2])[:, None, None]})]),
    ("laplace", X_REAL[np.abs(X_REAL) < 700], [((), {}), ((), {"loc": -1.0, "scale": 3.0}),
                                               ((), {"scale": np.array([[0.5], [2.0]])})]),
    ("cauchy", X_REAL, [((), {}), ((), {"loc": 2.0, "scale": 0.1}), ((), {"scale": np.array([[0.5], [2.0]])})]),
    ("expon", X_POS, [((), {}), ((), {"loc": 0.5, "scale": 2.0}), ((), {"scale": np.array([[0.5], [2.0]])})]),
    ("uniform", X_UNIT, [((), {}), ((), {"loc": 0.2, "scale": 0.5}), ((), {"scale": np.array([[0.5], [2.0]])}),
                         ((), {"scale": 0.0})]),
    ("logistic", X_REAL, [((), {}), ((), {"loc": 1.0, "scale": 4.0}), ((), {"scale": np.array([[0.5], [2.0]])})]),
]
DISCRETE = [
    ("poisson", K_INT, [((3.0,), {}), ((0.0,), {}), ((0.4,), {"loc": 1.0}), ((-1.0,), {}),
                        ((np.array([[0.1], [2.0], [15.0]]),), {})]),
    ("binom", K_INT, [((10, 0.3), {}), ((7, 0.0), {}), ((7, 1.0), {}), ((5.5, 0.3), {}), ((20, 0.9), {"loc": 1}),
                      ((np.array([[3], [12]]), np.array([0.05, 0.5, 0.95])[:, None, None]), {})]),
    ("bernoulli", K_INT, [((0.3,), {}), ((0.0,), {}), ((1.0,), {}), ((1.2,), {}),
                          ((np.array([[0.1], [0.8]]),), {})]),
]
Q = np.array([-0.1, 0.0, 1e-300, 1e-12, 0.01, 0.3, 0.5, 0.77, 1 - 1e-9, 1.0, 1.5, np.nan])
INVERTIBLE = ("norm", "laplace", "cauchy", "expon", "uniform", "logistic")   # ppf and isf in closed form
CASES = [(n, m, x, a, k) for n, x, sets in CONTINUOUS for m in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
         for a, k in sets]
CASES += [(n, m, Q, a, k) for n, x, sets in CONTINUOUS if n in INVERTIBLE for m in ("ppf", "isf") for a, k in sets]
CASES += [(n, m, x, a, k) for n, x, sets in DISCRETE for m in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")
          for a, k in sets]


def _ids(case):
    return f"{case[0]}.{case[1]}-{case[3]}-{sorted(case[4])}"


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_values_equal_scipy(case):
    name, method, x, args, kwds = case
    with np.errstate(all="ignore"):                    # SciPy's own warnings (chainrule's: none)
        want = getattr(getattr(st, name), method)(x, *args, **kwds)
    got = getattr(getattr(cr.stats, name), method)(x, *args, **kwds)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL)
    # the same through Tensors: the same values, a Tensor back
    tx = cr.tensor(x, dtype=F64)
    targs = [cr.tensor(np.asarray(a, np.float64)) for a in args]
    got_t = getattr(getattr(cr.stats, name), method)(tx, *targs, **kwds)
    assert isinstance(got_t, cr.Tensor) and got_t.dtype == np.float64
    np.testing.assert_allclose(got_t.data, want, **TOL)


def test_scalars_give_numpy_scalars_and_frozen_form():
    v = cr.stats.norm.logpdf(0.5)
    assert type(v) is np.float64 and v == st.norm.logpdf(0.5)
    assert cr.stats.gamma(2.0, scale=3.0).cdf(1.0) == pytest.approx(st.gamma(2.0, scale=3.0).cdf(1.0), rel=1e-14)
    assert cr.stats.binom(10, 0.3).logpmf(3) == pytest.approx(st.binom(10, 0.3).logpmf(3), rel=1e-14)
    assert cr.stats.gamma.logpdf(1.0, 2.0, 0.5, 2.0) == pytest.approx(st.gamma.logpdf(1.0, 2.0, 0.5, 2.0), rel=1e-14)
    assert cr.stats.t.shapes == "df" and cr.stats.beta.numargs == 2


def test_float32_tensors_stay_float32():
    x = cr.tensor([0.5, 1.5])
    out = cr.stats.gamma.logpdf(x, 2.0, scale=cr.tensor(1.5))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.data, st.gamma.logpdf([0.5, 1.5], 2.0, scale=1.5), rtol=1e-6)
    k = cr.tensor([0, 1, 2])                                       # integer data with a float32 rate
    assert cr.stats.poisson.logpmf(k, cr.tensor(2.0)).dtype == np.float32
    h = cr.tensor([0.5, 1.5], dtype=cr.float16, requires_grad=True)    # SciPy's float64 constants cast back
    out = cr.stats.gamma.logpdf(h, 2.0)
    out.sum().backward()
    assert out.dtype == np.float16 and h.grad.dtype == np.float16


def test_where_scipy_underflows_laplace_stays_finite():
    assert st.laplace.logpdf(800.0) == -np.inf
    assert cr.stats.laplace.logpdf(800.0) == pytest.approx(-800 - np.log(2), rel=1e-15)
    assert cr.stats.laplace.logcdf(-800.0) == pytest.approx(-800 - np.log(2), rel=1e-15)


def test_t_cdf_values_are_stdtrs_own():
    x, df = np.array([-3e-9, -2.0, 0.8, 1e-6, 7e-9]), np.array([1.0, 3e5, 3e5, 1.0, 2.5])
    got = cr.stats.t.cdf(cr.tensor(x, requires_grad=True), cr.tensor(df))
    np.testing.assert_array_equal(got.data, st.t.cdf(x, df))


# ----- multivariate -----
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.7]])


@pytest.mark.parametrize("x,mean,cov", [
    (np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.2, 0.3]), COV),
    (np.random.default_rng(0).normal(size=(4, 5, 3)), np.array([0.1, 0.2, 0.3]), COV),
    (np.array([[0.5, -1.0]]), np.array([0.0, 1.0]), np.array([1.0, 2.0])),
    (np.array([0.3, 1.2, -4.0]), 1.0, 2.5),
    (0.7, None, 1),
    (np.array([[1.0, 2.0, 3.0]]), np.array([0.0, 0.0, 0.0]), 0.5),
])
def test_multivariate_normal_equals_scipy(x, mean, cov):
    for method in ("logpdf", "pdf"):
        want = getattr(st.multivariate_normal, method)(x, mean, cov)
        got = getattr(cr.stats.multivariate_normal, method)(x, mean, cov)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    frozen = cr.stats.multivariate_normal(mean, cov)
    np.testing.assert_allclose(frozen.logpdf(x), st.multivariate_normal(mean, cov).logpdf(x), rtol=1e-12)


def test_multivariate_normal_errors():
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        cr.stats.multivariate_normal.logpdf([0.0, 0.0], cov=np.ones((2, 2)))
    with pytest.raises(ValueError, match="mean"):
        cr.stats.multivariate_normal.logpdf([0.0, 0.0], mean=np.zeros((2, 1)), cov=np.eye(2))


@pytest.mark.parametrize("x,alpha", [
    (np.array([0.2, 0.3, 0.5]), np.array([1.5, 2.0, 0.7])),
    (np.array([0.2, 0.3]), np.array([1.5, 2.0, 0.7])),
    (np.array([[0.2, 0.1, 0.6], [0.3, 0.8, 0.2], [0.5, 0.1, 0.2]]), np.array([1.5, 2.0, 0.7])),
    (np.array([0.0, 1.0]), np.array([1.0, 2.0])),
])
def test_dirichlet_equals_scipy(x, alpha):
    for method in ("logpdf", "pdf"):
        want = getattr(st.dirichlet, method)(x, alpha)
        got = getattr(cr.stats.dirichlet, method)(x, alpha)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("x,alpha,match", [([0.2, 0.7], [1.5, 2.0], "simplex"), ([0.0, 1.0], [0.5, 2.0], "alpha"),
                                           ([0.2, 0.8], [0.0, 2.0], "greater than 0"),
                                           ([0.2, 0.8, 0.0, 0.0], [1.0, 2.0], "K = 2")])
def test_dirichlet_checks_like_scipy(x, alpha, match):
    with pytest.raises(ValueError, match=match):
        st.dirichlet.logpdf(x, alpha) if match != "K = 2" else None
        cr.stats.dirichlet.logpdf(x, alpha)


# ----- gradients -----
def _t(v, grad=True):
    return cr.tensor(np.asarray(v, np.float64), requires_grad=grad)


GRAD_CASES = [
    ("norm", "logpdf", [-0.7, 0.2, 1.9], [], {"loc": 0.3, "scale": 1.7}),
    ("norm", "logcdf", [-9.0, 0.2, 3.0], [], {"loc": 0.3, "scale": 1.7}),
    ("norm", "pdf", [-0.7, 0.2, 1.9], [], {"loc": 0.3, "scale": 1.7}),
    ("t", "logpdf", [-3.0, 0.2, 4.0], [3.5], {"loc": 0.1, "scale": 2.0}),
    ("gamma", "logpdf", [0.4, 1.3, 5.0], [2.5], {"scale": 1.5}),
    ("beta", "logpdf", [0.1, 0.4, 0.8], [2.0, 3.5], {}),
    ("chi2", "logpdf", [0.4, 2.0, 6.0], [3.0], {"scale": 1.2}),
    ("laplace", "logpdf", [-2.0, 0.5, 3.0], [], {"loc": 0.1, "scale": 2.0}),
    ("cauchy", "logpdf", [-2.0, 0.5, 3.0], [], {"loc": 0.1, "scale": 2.0}),
    ("expon", "logpdf", [0.3, 1.0, 4.0], [], {"loc": 0.1, "scale": 2.0}),
    ("uniform", "logpdf", [0.3, 0.5, 0.8], [], {"loc": 0.1, "scale": 2.0}),
    ("logistic", "logpdf", [-2.0, 0.5, 3.0], [], {"loc": 0.1, "scale": 2.0}),
    ("logistic", "logcdf", [-2.0, 0.5, 3.0], [], {"loc": 0.1, "scale": 2.0}),
    ("cauchy", "logcdf", [-2.0, 0.5, 3.0], [], {"loc": 0.1, "scale": 2.0}),
    ("laplace", "cdf", [-2.0, 0.5, 3.0], [], {"loc": 0.1, "scale": 2.0}),
    ("expon", "logcdf", [0.3, 1.0, 4.0], [], {"scale": 2.0}),
    ("poisson", "logpmf", [0.0, 2.0, 5.0], [3.2], {}),
    ("binom", "logpmf", [0.0, 2.0, 5.0], [np.array(8.0), 0.3], {}),
    ("bernoulli", "logpmf", [0.0, 1.0, 1.0], [0.3], {}),
]


@pytest.mark.parametrize("name,method,x,args,kwds", GRAD_CASES, ids=[f"{c[0]}.{c[1]}" for c in GRAD_CASES])
def test_gradcheck_both_modes(name, method, x, args, kwds):
    fn = getattr(getattr(cr.stats, name), method)
    keys = list(kwds)
    n_fixed = 1 if name == "binom" else 0             # binom's n is a count: a constant

    def f(x, *params):
        shapes = list(args[:n_fixed]) + list(params[:len(args) - n_fixed])
        return fn(x, *shapes, **dict(zip(keys, params[len(args) - n_fixed:])))
    discrete = name in ("poisson", "binom", "bernoulli")
    inputs = [_t(x, grad=not discrete)] + [_t(a) for a in args[n_fixed:]] + [_t(kwds[k]) for k in keys]
    assert cr.gradcheck(f, inputs, modes=("rev", "fwd"))


@pytest.mark.parametrize("name,method,x,args", [
    ("t", "cdf", [-30.0, -2.0, -0.3, 0.0, 1e-200, 0.4, 3.0, 25.0], [2.5]),
    ("gamma", "cdf", [0.3, 2.0, 7.0], [2.5]),
    ("gamma", "logcdf", [0.3, 2.0, 7.0], [2.5]),
    ("beta", "cdf", [0.3, 0.5, 0.9], [2.0, 0.7]),
    ("beta", "logcdf", [0.3, 0.5, 0.9], [2.0, 0.7]),
    ("chi2", "cdf", [0.3, 2.0, 7.0], [3.0]),
])
def test_cdf_gradients_in_the_data(name, method, x, args):
    fn = getattr(getattr(cr.stats, name), method)
    assert cr.gradcheck(lambda x, s: fn(x, *args, loc=0.2, scale=s), [_t(x), _t(1.3)], modes=("rev", "fwd"))


def test_t_cdf_slope_at_zero_is_the_density():
    x = _t([0.0, 1e-200])
    cr.stats.t.cdf(x, 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.data, st.t.pdf(0.0, 3.0), rtol=1e-14)


@pytest.mark.parametrize("name,method,x,args", [
    ("poisson", "cdf", [0.0, 2.0, 5.0], [3.2]), ("poisson", "logcdf", [0.0, 2.0, 5.0], [3.2]),
    ("binom", "cdf", [0.0, 2.0, 5.0], [8, None]), ("bernoulli", "cdf", [0.0, 1.0], [None]),
])
def test_discrete_cdf_gradients_in_the_rate(name, method, x, args):
    fn = getattr(getattr(cr.stats, name), method)
    p0 = 3.2 if name == "poisson" else 0.35

    def f(p):
        return fn(np.array(x), *[p if a is None or name == "poisson" else a for a in args])
    assert cr.gradcheck(f, [_t(p0)], modes=("rev", "fwd"))


@pytest.mark.parametrize("name,method,x,args", [
    ("gamma", "logpdf", [0.4, 1.3, 5.0], [2.5]), ("beta", "logpdf", [0.1, 0.4, 0.8], [2.0, 3.5]),
    ("t", "logpdf", [-3.0, 0.2, 4.0], [3.5]), ("norm", "logcdf", [-4.0, 0.2, 3.0], []),
    ("t", "cdf", [-3.0, 0.2, 4.0], [3.5]),
])
def test_gradgradcheck(name, method, x, args):
    fn = getattr(getattr(cr.stats, name), method)
    diff_shapes = method != "cdf"
    if diff_shapes:
        assert cr.gradgradcheck(lambda x, *p: fn(x, *p, scale=1.4), [_t(x)] + [_t(a) for a in args])
    else:
        assert cr.gradgradcheck(lambda x: fn(x, *args, scale=1.4), [_t(x)])


def test_multivariate_normal_and_dirichlet_gradcheck():
    rng = np.random.default_rng(1)
    x, mean, a = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=(3, 3))

    def mvn(x, mean, a):
        return cr.stats.multivariate_normal.logpdf(x, mean, a @ a.T + np.eye(3))
    assert cr.gradcheck(mvn, [_t(x), _t(mean), _t(a)], modes=("rev", "fwd"))
    assert cr.gradgradcheck(mvn, [_t(x[:2]), _t(mean), _t(a)])
    xs = np.array([[0.2, 0.1], [0.3, 0.6]])            # K - 1 components: perturbations stay on the simplex
    assert cr.gradcheck(lambda x, al: cr.stats.dirichlet.logpdf(x, al), [_t(xs), _t([1.5, 2.0, 0.7])],
                        modes=("rev", "fwd"))


# sf, logsf (every distribution) and ppf, isf (those with a closed-form inverse): every order, both modes
SURVIVAL = [(n, a, k) for n, a, k in [
    ("norm", [], {}), ("t", [3.5], {}), ("gamma", [2.5], {}), ("beta", [2.0, 3.5], {}), ("chi2", [3.0], {}),
    ("laplace", [], {}), ("cauchy", [], {}), ("expon", [], {}), ("uniform", [], {}), ("logistic", [], {})]]
X_FOR = {"beta": [0.1, 0.4, 0.8], "uniform": [0.3, 0.5, 0.8], "gamma": [0.4, 1.3, 5.0], "chi2": [0.4, 2.0, 6.0],
         "expon": [0.3, 1.0, 4.0]}


@pytest.mark.parametrize("name,args,kwds", SURVIVAL, ids=[c[0] for c in SURVIVAL])
@pytest.mark.parametrize("method", ["sf", "logsf"])
def test_sf_and_logsf_gradients(name, args, kwds, method):
    fn = getattr(getattr(cr.stats, name), method)
    x = X_FOR.get(name, [-2.0, 0.5, 3.0])
    assert cr.gradcheck(lambda x, s: fn(x, *args, loc=0.05, scale=s), [_t(x), _t(1.3)], modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x, s: fn(x, *args, loc=0.05, scale=s), [_t(x), _t(1.3)])
    np.testing.assert_allclose(fn(np.array(x), *args) + 0, getattr(getattr(st, name), method)(x, *args),
                               rtol=1e-12)


@pytest.mark.parametrize("name", ["norm", "laplace", "cauchy", "expon", "uniform", "logistic"])
@pytest.mark.parametrize("method", ["ppf", "isf"])
def test_ppf_and_isf_are_differentiable_inverses(name, method):
    fn = getattr(getattr(cr.stats, name), method)
    q = [0.02, 0.3, 0.45, 0.7, 0.97]                        # (laplace's second derivative jumps at 1/2)
    assert cr.gradcheck(lambda q, l, s: fn(q, loc=l, scale=s), [_t(q), _t(0.2), _t(1.7)], modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda q, s: fn(q, loc=0.2, scale=s), [_t(q), _t(1.7)])
    # the inverse of the cdf (sf): d ppf / dq = 1 / pdf(ppf(q)), and its second derivative is exact
    qt = _t(q)
    x = fn(qt, loc=0.2, scale=1.7)
    back = (cr.stats.__dict__[name].cdf if method == "ppf" else cr.stats.__dict__[name].sf)(x, loc=0.2, scale=1.7)
    np.testing.assert_allclose(back.data, q, rtol=1e-13)
    x.sum().backward()
    sign = 1 if method == "ppf" else -1
    np.testing.assert_allclose(qt.grad.data, sign / getattr(st, name).pdf(x.data, loc=0.2, scale=1.7), rtol=1e-10)


def test_missing_methods_list_the_ones_there_are():
    with pytest.raises(AttributeError, match=r"cr.stats.gamma has no method 'ppf' \(.*gammaincinv.*"
                                             r"scipy.stats.gamma.ppf.*\); it has cdf, logcdf, logpdf, logsf, pdf, sf"):
        cr.stats.gamma.ppf(0.5, 2.0)
    with pytest.raises(AttributeError, match="norm has no method 'rvs'; it has cdf, entropy, isf, .*ppf, sf"):
        cr.stats.norm.rvs(0.5)
    with pytest.raises(AttributeError, match="poisson has no method 'isf' .*step function.*logsf, pmf, sf"):
        cr.stats.poisson.isf(0.5)
    with pytest.raises(AttributeError, match="frozen cr.stats.t has no method 'ppf'; it has logpdf, .*sf, logsf"):
        cr.stats.t(3.0).ppf(0.5)
    with pytest.raises(AttributeError, match="multivariate_normal has no method 'cdf'; it has logpdf, pdf"):
        cr.stats.multivariate_normal.cdf(0.5)
    assert not hasattr(cr.stats.dirichlet, "sf") and cr.stats.norm(1.0, 2.0).isf(0.3) == st.norm(1.0, 2.0).isf(0.3)


def test_outside_support_and_bad_parameters_have_zero_gradient():
    x = _t([-1.0, 0.5, 2.0])
    a = _t([2.5, -1.0, 3.0])
    s = _t([1.0, 1.0, 0.0])
    out = cr.stats.gamma.logpdf(x, a, scale=s)
    np.testing.assert_array_equal(out.data[:2], [-np.inf, np.nan])
    assert np.isnan(out.data[2])
    out = cr.stats.gamma.logpdf(x, a, scale=s)
    cr.where(np.isfinite(out.data), out, 0.0).sum().backward()
    for v in (x, a, s):
        assert np.isfinite(v.grad.data).all() and (v.grad.data == 0).all()
    y = _t([-1.0, 0.3, 1.5])                           # beta's logpdf outside [0, 1], cdf at the edges
    (cr.stats.beta.logpdf(y, 2.0, 2.0)[1] + cr.stats.beta.cdf(y, 2.0, 2.0).sum()).backward()
    assert np.isfinite(y.grad.data).all() and y.grad.data[0] == 0 and y.grad.data[2] == 0


@pytest.mark.parametrize("call,arg", [
    (lambda x, p: cr.stats.gamma.cdf(x, p), "a"),
    (lambda x, p: cr.stats.chi2.cdf(x, p), "a"),
    (lambda x, p: cr.stats.beta.cdf(x, p, 2.0), "a"),
    (lambda x, p: cr.stats.t.cdf(x, p), "betainc"),
])
def test_cdf_in_a_shape_parameter_is_a_clear_error(call, arg):
    p = _t(2.5)
    out = call(np.array([0.3, 0.6]), p).sum()
    with pytest.raises(GraphError, match=f"not differentiable with respect to {arg}|{arg}"):
        out.backward()


def test_argument_errors():
    with pytest.raises(TypeError, match="missing required argument.*a"):
        cr.stats.gamma.logpdf(1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'df'"):
        cr.stats.norm.logpdf(1.0, df=3)
    with pytest.raises(TypeError, match="at most"):
        cr.stats.norm.logpdf(1.0, 0.0, 1.0, 2.0)
    with pytest.raises(TypeError, match="multiple values"):
        cr.stats.t.logpdf(1.0, 3.0, df=3.0)


# ----- torch.distributions -----
TORCH = [
    ("Normal", lambda D, p: D.Normal(p[0], p[1]), lambda x, p: cr.stats.norm.logpdf(x, p[0], p[1]),
     [-1.0, 0.3, 2.0], [0.2, 1.5]),
    ("StudentT", lambda D, p: D.StudentT(p[0], p[1], p[2]), lambda x, p: cr.stats.t.logpdf(x, p[0], p[1], p[2]),
     [-1.0, 0.3, 2.0], [3.5, 0.2, 1.5]),
    ("Gamma", lambda D, p: D.Gamma(p[0], p[1]), lambda x, p: cr.stats.gamma.logpdf(x, p[0], scale=1 / p[1]),
     [0.3, 1.0, 4.0], [2.5, 0.7]),
    ("Beta", lambda D, p: D.Beta(p[0], p[1]), lambda x, p: cr.stats.beta.logpdf(x, p[0], p[1]),
     [0.1, 0.5, 0.8], [2.0, 0.7]),
    ("Chi2", lambda D, p: D.Chi2(p[0]), lambda x, p: cr.stats.chi2.logpdf(x, p[0]), [0.3, 1.0, 4.0], [3.0]),
    ("Laplace", lambda D, p: D.Laplace(p[0], p[1]), lambda x, p: cr.stats.laplace.logpdf(x, p[0], p[1]),
     [-1.0, 0.3, 2.0], [0.2, 1.5]),
    ("Cauchy", lambda D, p: D.Cauchy(p[0], p[1]), lambda x, p: cr.stats.cauchy.logpdf(x, p[0], p[1]),
     [-1.0, 0.3, 2.0], [0.2, 1.5]),
    ("Exponential", lambda D, p: D.Exponential(p[0]), lambda x, p: cr.stats.expon.logpdf(x, scale=1 / p[0]),
     [0.3, 1.0, 4.0], [0.7]),
    ("Uniform", lambda D, p: D.Uniform(p[0], p[1]), lambda x, p: cr.stats.uniform.logpdf(x, p[0], p[1] - p[0]),
     [0.3, 1.0, 1.9], [0.2, 2.5]),
    ("Poisson", lambda D, p: D.Poisson(p[0]), lambda x, p: cr.stats.poisson.logpmf(x, p[0]), [0.0, 2.0, 5.0], [3.2]),
    ("Binomial", lambda D, p: D.Binomial(8, probs=p[0]), lambda x, p: cr.stats.binom.logpmf(x, 8, p[0]),
     [0.0, 2.0, 8.0], [0.3]),
    ("Bernoulli", lambda D, p: D.Bernoulli(probs=p[0]), lambda x, p: cr.stats.bernoulli.logpmf(x, p[0]),
     [0.0, 1.0, 1.0], [0.3]),
]


@pytest.mark.parametrize("name,tdist,crfn,x,params", TORCH, ids=[c[0] for c in TORCH])
def test_log_prob_and_gradients_equal_torch(name, tdist, crfn, x, params):
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=name not in ("Poisson", "Binomial", "Bernoulli"))
    tp = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in params]
    lp = tdist(torch.distributions, tp).log_prob(tx)
    lp.sum().backward()
    cx, cp = _t(x, grad=tx.requires_grad), [_t(v) for v in params]
    out = crfn(cx, cp)
    np.testing.assert_allclose(out.data, lp.detach().numpy(), rtol=1e-12, atol=1e-14)
    out.sum().backward()
    for c, w in zip(cp, tp):
        np.testing.assert_allclose(c.grad.data, w.grad.numpy(), rtol=1e-10, atol=1e-12)
    if tx.requires_grad:                                # uniform's log density does not depend on x
        got = np.zeros(len(x)) if cx.grad is None else cx.grad.data
        want = np.zeros(len(x)) if tx.grad is None else tx.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_multivariate_normal_and_dirichlet_equal_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x, mean, a = rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    tx, tm, tc = (torch.tensor(v, requires_grad=True) for v in (x, mean, cov))
    lp = torch.distributions.MultivariateNormal(tm, covariance_matrix=tc).log_prob(tx)
    lp.sum().backward()
    cx, cm, cc = _t(x), _t(mean), _t(cov)
    out = cr.stats.multivariate_normal.logpdf(cx, cm, cc)
    out.sum().backward()
    np.testing.assert_allclose(out.data, lp.detach().numpy(), rtol=1e-12)
    for c, w in ((cx, tx), (cm, tm)):
        np.testing.assert_allclose(c.grad.data, w.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cc.grad.data, (tc.grad.numpy() + tc.grad.numpy().T) / 2, rtol=1e-10, atol=1e-12)
    xs = np.array([[0.2, 0.1], [0.3, 0.6], [0.5, 0.3]])          # SciPy: components on the first axis
    tx, ta = (torch.tensor(xs.T.copy(), requires_grad=True),
              torch.tensor([1.5, 2.0, 0.7], dtype=torch.float64, requires_grad=True))
    lp = torch.distributions.Dirichlet(ta).log_prob(tx)
    lp.sum().backward()
    cx, ca = _t(xs), _t([1.5, 2.0, 0.7])
    out = cr.stats.dirichlet.logpdf(cx, ca)
    out.sum().backward()
    np.testing.assert_allclose(out.data, lp.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ca.grad.data, ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(cx.grad.data, tx.grad.numpy().T, rtol=1e-10)
