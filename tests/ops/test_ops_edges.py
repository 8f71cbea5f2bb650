"""Gradients at the edge points of the op table: singular det, p-norms at 0, logsumexp at +-inf,
atan2/hypot at the origin, std of a constant. PyTorch (float64) is the oracle where it gives a value."""
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule.errors import ShapeError


def f64(v, grad=True):
    return cr.tensor(np.asarray(v, dtype=np.float64), requires_grad=grad)


def grad_of(fn, v):
    """Gradient of sum(fn(x)) at v, with every RuntimeWarning turned into an error."""
    x = f64(v)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = fn(x)
        out.sum().backward()
    return out.data, x.grad.data


def torch_grad(fn, v):
    torch = pytest.importorskip("torch")
    x = torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True)
    out = fn(torch, x)
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy()


# ----- det at singular matrices: the gradient is the cofactor matrix adj(x)^T -----
_RNG = np.random.default_rng(3)
_Q1, _ = np.linalg.qr(_RNG.normal(size=(3, 3)))
_Q2, _ = np.linalg.qr(_RNG.normal(size=(3, 3)))
SINGULAR = {
    "rank2of3": _RNG.normal(size=(3, 2)) @ _RNG.normal(size=(2, 3)),
    "rank1of3": np.outer([1.0, 2.0, 3.0], [1.0, 0.0, 2.0]),
    "zero3": np.zeros((3, 3)),
    "rank1of2": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "zero1": np.zeros((1, 1)),
    "near_singular": _Q1 @ np.diag([2.0, 1.0, 1e-13]) @ _Q2.T,
}


def cofactor_by_minors(a):
    n = a.shape[-1]
    cof = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, -2), j, -1)
            cof[..., i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return cof


@pytest.mark.parametrize("name", list(SINGULAR))
def test_det_gradient_at_singular_matrix_is_the_cofactor_matrix(name):
    a = SINGULAR[name]
    out, g = grad_of(cr.linalg.det, a)
    np.testing.assert_allclose(out, np.linalg.det(a), atol=1e-12)
    np.testing.assert_allclose(g, cofactor_by_minors(a), atol=1e-12)
    assert cr.gradcheck(cr.linalg.det, (f64(a),), modes=("rev", "fwd"))
    if a.shape[-1] > 2:          # torch 2.13 returns 0 for exactly singular 2x2 (see the next test)
        _, tg = torch_grad(lambda t, x: t.linalg.det(x), a)
        np.testing.assert_allclose(g, tg, atol=1e-9)


@pytest.mark.parametrize("a, cof", [([[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),
                                    ([[0.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]])])
def test_det_gradient_of_singular_2x2_is_exact(a, cof):
    # d det / d[[a, b], [c, d]] = [[d, -c], [-b, a]] everywhere; torch 2.13 gives zeros at these points
    _, g = grad_of(cr.linalg.det, a)
    np.testing.assert_allclose(g, cof, atol=1e-14)


def test_det_gradient_of_near_singular_matrix_is_accurate():
    # exact cofactor of Q1 diag(s) Q2^T is det(Q1) det(Q2) Q1 diag(prod_{j != i} s_j) Q2^T
    a = SINGULAR["near_singular"]
    exact = np.linalg.det(_Q1) * np.linalg.det(_Q2) * _Q1 @ np.diag([1e-13, 2e-13, 2.0]) @ _Q2.T
    _, g = grad_of(cr.linalg.det, a)
    np.testing.assert_allclose(g, exact, rtol=0, atol=1e-12)


def test_det_gradient_batched_mixes_singular_and_regular():
    a = np.stack([SINGULAR["rank2of3"], SINGULAR["zero3"], _RNG.normal(size=(3, 3)), SINGULAR["rank1of3"]])
    a = np.stack([a, a[::-1]])                       # (2, 4, 3, 3)
    out, g = grad_of(cr.linalg.det, a)
    np.testing.assert_allclose(g, cofactor_by_minors(a), atol=1e-12)
    _, tg = torch_grad(lambda t, x: t.linalg.det(x), a)
    np.testing.assert_allclose(g, tg, atol=1e-9)
    assert cr.gradcheck(cr.linalg.det, (f64(a),), modes=("rev", "fwd"))


@pytest.mark.parametrize("name", ["rank2of3", "rank1of3", "zero3"])
def test_det_jvp_at_singular_matrix_is_trace_of_adjugate_times_tangent(name):
    a = SINGULAR[name]
    t = _RNG.normal(size=a.shape)
    out, tout = cr.jvp(cr.linalg.det, (a,), (t,))
    np.testing.assert_allclose(tout, np.sum(cofactor_by_minors(a) * t), atol=1e-12)
    assert cr.gradcheck(cr.linalg.det, (f64(a),), modes=("rev", "fwd"))


def test_det_second_derivative_at_regular_and_singular_matrices():
    regular = _RNG.normal(size=(2, 3, 3))
    assert cr.gradgradcheck(cr.linalg.det, (f64(regular),))
    # det is a polynomial: its Hessian is finite everywhere, also where x is singular
    for name in ("rank2of3", "rank1of3", "zero3", "rank1of2", "zero1"):
        assert cr.gradgradcheck(cr.linalg.det, (f64(SINGULAR[name]),))
    torch = pytest.importorskip("torch")
    a = SINGULAR["rank2of3"]
    h = cr.hessian(cr.linalg.det)(f64(a)).data
    th = torch.autograd.functional.hessian(torch.linalg.det, torch.tensor(a))
    np.testing.assert_allclose(h, th.numpy(), atol=1e-9)


def test_det_gradient_in_float32_has_no_nan_at_singular_matrix():
    x = cr.tensor(SINGULAR["rank1of3"].astype(np.float32), requires_grad=True)
    cr.linalg.det(x).backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.data, cofactor_by_minors(SINGULAR["rank1of3"]), atol=1e-4)


def test_slogdet_gradient_at_singular_matrix_raises_clear_error():
    x = f64([[1.0, 2.0], [2.0, 4.0]])
    sign, logabsdet = cr.linalg.slogdet(x)
    assert sign.item() == 0.0 and logabsdet.item() == -np.inf
    with pytest.raises(ValueError, match=r"slogdet.*\(2, 2\) input is singular.*cr\.linalg\.det"):
        logabsdet.backward()


# ----- p-norms at zero: PyTorch's subgradient 0 -----
P_VALUES = [0.5, 1, 1.5, 3, np.inf, -np.inf]
POINTS = {"zero_vector": [0.0, 0.0, 0.0], "one_zero": [0.0, 1.0, -2.0], "two_zeros": [0.0, 0.0, -2.0]}


@pytest.mark.parametrize("p", P_VALUES, ids=str)
@pytest.mark.parametrize("point", list(POINTS))
def test_vector_p_norm_gradient_at_zeros_matches_torch(p, point):
    v = POINTS[point]
    out, g = grad_of(lambda x: cr.linalg.norm(x, ord=p), v)
    tout, tg = torch_grad(lambda t, x: t.linalg.vector_norm(x, ord=p), v)
    np.testing.assert_allclose(out, tout, rtol=1e-12)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-15)
    assert np.isfinite(g).all()


@pytest.mark.parametrize("p", P_VALUES, ids=str)
def test_p_norm_along_an_axis_at_zero_rows_matches_torch(p):
    v = [[0.0, 0.0], [3.0, -4.0], [0.0, 2.0]]
    out, g = grad_of(lambda x: cr.linalg.norm(x, ord=p, axis=1), v)
    tout, tg = torch_grad(lambda t, x: t.linalg.vector_norm(x, ord=p, dim=1), v)
    np.testing.assert_allclose(out, tout, rtol=1e-12)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-15)
    out, g = grad_of(lambda x: cr.norm(x, ord=p, axis=0, keepdims=True), v)
    tout, tg = torch_grad(lambda t, x: t.linalg.vector_norm(x, ord=p, dim=0, keepdim=True), v)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("p", [0.5, 1.5, 3])
def test_p_norm_derivatives_away_from_zero_still_exact(p):
    x = f64([[0.7, -1.3, 2.1], [0.4, 0.9, -0.2]])
    assert cr.gradcheck(lambda x: cr.linalg.norm(x, ord=p, axis=1), (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x: cr.linalg.norm(x, ord=p, axis=1), (x,))


def test_p_norm_jvp_at_zero_vector_is_zero():
    _, t = cr.jvp(lambda x: cr.linalg.norm(x, ord=3), (np.zeros(3),), (np.ones(3),))
    assert float(t) == 0.0


# ----- logsumexp at -inf and +inf -----
def test_logsumexp_all_minus_inf_row_has_zero_gradient_and_no_warning():
    v = [[-np.inf, -np.inf, -np.inf], [0.0, 1.0, -np.inf]]
    out, g = grad_of(lambda x: cr.logsumexp(x, axis=1), v)
    assert out[0] == -np.inf
    np.testing.assert_allclose(out[1], np.log(1 + np.e))
    assert g[0].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(g[1], [1 / (1 + np.e), np.e / (1 + np.e), 0.0])
    # PyTorch agrees on the finite row and gives NaN on the -inf row (issue 31829): we give 0
    _, tg = torch_grad(lambda t, x: t.logsumexp(x, dim=1), v)
    np.testing.assert_allclose(g[1], tg[1])
    assert np.isnan(tg[0]).all()


def test_logsumexp_all_minus_inf_whole_array_and_keepdims():
    out, g = grad_of(lambda x: cr.logsumexp(x), [-np.inf, -np.inf])
    assert out == -np.inf and g.tolist() == [0.0, 0.0]
    out, g = grad_of(lambda x: cr.logsumexp(x, axis=0, keepdims=True), [[-np.inf], [-np.inf]])
    assert out.shape == (1, 1) and g.tolist() == [[0.0], [0.0]]


def test_logsumexp_plus_inf_entries_share_the_gradient():
    v = [[np.inf, 1.0, np.inf], [np.inf, -np.inf, 0.0], [np.inf, np.inf, np.inf]]
    out, g = grad_of(lambda x: cr.logsumexp(x, axis=1), v)
    assert out.tolist() == [np.inf, np.inf, np.inf]
    np.testing.assert_allclose(g, [[0.5, 0.0, 0.5], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_logsumexp_jvp_and_second_order_at_infinities():
    x = np.array([[-np.inf, -np.inf], [np.inf, 2.0], [0.0, 1.0]])
    t = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _, tout = cr.jvp(lambda x: cr.logsumexp(x, axis=1), (x,), (t,))
    p = np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum()
    np.testing.assert_allclose(tout, [0.0, 3.0, p @ [5.0, 6.0]])
    xt = f64(x)
    (g,) = cr.autograd.grad(cr.logsumexp(xt, axis=1), xt, grad_outputs=np.ones(3), create_graph=True)
    (gg,) = cr.autograd.grad((g * f64(t, grad=False)).sum(), xt)
    assert np.isfinite(gg.data).all()
    assert gg.data[0].tolist() == [0.0, 0.0] and gg.data[1].tolist() == [0.0, 0.0]
    assert cr.gradgradcheck(lambda x: cr.logsumexp(x, axis=1), (f64(x[2:]),))


def test_logaddexp_of_two_minus_infinities_has_zero_gradient():
    x, y = f64([-np.inf, -np.inf, 0.0]), f64([-np.inf, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = cr.logaddexp(x, y)
        out.sum().backward()
    np.testing.assert_allclose(out.data, np.logaddexp(x.data, y.data))
    np.testing.assert_allclose(x.grad.data, [0.0, 0.0, 0.5])
    np.testing.assert_allclose(y.grad.data, [0.0, 1.0, 0.5])


# ----- other points of the op table -----
def test_arctan2_gradient_at_origin_is_zero_as_torch():
    x, y = f64([0.0, 1.0, 0.0]), f64([0.0, 2.0, -3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cr.arctan2(x, y).sum().backward()
    torch = pytest.importorskip("torch")
    tx, ty = (torch.tensor(v.data, requires_grad=True) for v in (x, y))
    torch.atan2(tx, ty).sum().backward()
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy())
    np.testing.assert_allclose(y.grad.data, ty.grad.numpy())
    assert x.grad.data[0] == 0.0 and y.grad.data[0] == 0.0
    _, t = cr.jvp(cr.arctan2, (np.zeros(1), np.zeros(1)), (np.ones(1), np.ones(1)))
    assert t.tolist() == [0.0]
    assert cr.gradgradcheck(cr.arctan2, (f64([0.5, -1.0]), f64([2.0, 0.3])))


def test_hypot_gradient_at_origin_is_zero_like_the_two_norm():
    x, y = f64([0.0, 3.0]), f64([0.0, -4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cr.hypot(x, y).sum().backward()
    np.testing.assert_allclose(x.grad.data, [0.0, 0.6])
    np.testing.assert_allclose(y.grad.data, [0.0, -0.8])
    assert cr.gradcheck(cr.hypot, (f64([3.0, -1.0]), f64([4.0, 2.0])), modes=("rev", "fwd"))


def test_std_of_a_constant_has_zero_gradient_as_torch():
    v = [[1.5, 1.5, 1.5], [1.0, 2.0, 4.0]]
    out, g = grad_of(lambda x: cr.std(x, axis=1), v)
    tout, tg = torch_grad(lambda t, x: t.std(x, dim=1, unbiased=False), v)
    np.testing.assert_allclose(out, tout)
    np.testing.assert_allclose(g, tg, atol=1e-15)
    assert g[0].tolist() == [0.0, 0.0, 0.0]
    assert cr.gradgradcheck(lambda x: cr.std(x, axis=1, ddof=1), (f64([[0.3, 1.2, -0.4]]),))


def test_vector_norm_with_a_matrix_order_raises_clear_error():
    with pytest.raises(ValueError, match=r"norm: ord='fro' is not a vector norm order"):
        cr.linalg.norm(f64([1.0, 2.0]), ord="fro")


def test_power_of_zero_base_gradient_wrt_exponent():
    # d(0**y)/dy = 0**y log 0: 0 for y > 0 (the limit) and y == 0 (as PyTorch); 0 also for y < 0,
    # where 0**y = inf and PyTorch gives -inf
    out, g = grad_of(lambda y: cr.power(np.zeros(2), y), [2.0, 0.0])
    assert out.tolist() == [0.0, 1.0] and g.tolist() == [0.0, 0.0]
    _, tg = torch_grad(lambda t, y: t.pow(t.zeros(2, dtype=t.float64), y), [2.0, 0.0])
    assert tg.tolist() == [0.0, 0.0]
    y = f64([-1.0])
    with np.errstate(divide="ignore", invalid="ignore"):    # 0**-1 = inf warns in the forward already
        cr.power(np.zeros(1), y).sum().backward()
    assert y.grad.tolist() == [0.0]


def test_det_create_graph_at_huge_singular_matrix_raises_clear_error():
    x = f64(np.zeros((100, 100)))
    with pytest.raises(ValueError, match=r"det: .*\(100, 100\) matrix needs its n\^2 minors.*regularise"):
        cr.autograd.grad(cr.linalg.det(x), x, create_graph=True)
    (g,) = cr.autograd.grad(cr.linalg.det(x), x)              # first order: the SVD, no limit
    assert g.shape == (100, 100) and not g.data.any()


def test_power_gradient_at_zero_base_and_zero_exponent_is_zero():
    # d(x**0)/dx = 0 everywhere, also at x = 0 (PyTorch gives 0; 0 * 0**-1 = 0 * inf was NaN)
    x = f64([0.0, 1.0, 2.0])
    (x ** 0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    x = f64([0.0, 2.0, 3.0])
    (x ** cr.tensor(np.arange(3.0))).sum().backward()   # polynomial features 1, x, x^2
    assert x.grad.tolist() == [0.0, 1.0, 6.0]
    _, t = cr.jvp(lambda x: x ** 0.0, (np.array([0.0, 1.0]),), (np.array([1.0, 1.0]),))
    assert t.tolist() == [0.0, 0.0]


def test_power_second_order_with_zero_exponent():
    y = np.array([0.0, 2.0])
    assert cr.gradgradcheck(lambda x: cr.power(x, y), (f64([0.5, 1.5]),))
    assert cr.gradcheck(lambda x: cr.power(x, y), (f64([0.5, 1.5]),), modes=("rev", "fwd"))


def test_cumprod_gradient_with_zeros_matches_torch_convention():
    x = f64([1.0, 0.0, 2.0, 3.0])
    cr.cumprod(x).sum().backward()
    # d/dx_i sum_j prod_{k<=j} x_k, exactly: [1, 1+2+6, 0, 0]
    np.testing.assert_allclose(x.grad.data, [1.0, 9.0, 0.0, 0.0])
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4))
    a[1, 2] = a[0, 1] = 0.0
    assert cr.gradcheck(lambda x: cr.cumprod(x, axis=1), (f64(a),))
    assert cr.gradcheck(lambda x: cr.cumprod(x, axis=0), (f64(a),), modes=("fwd",))
    assert cr.gradgradcheck(lambda x: cr.cumprod(x, axis=1), (f64(a),))


def test_hypot_does_not_overflow_in_float32():
    out = cr.hypot(cr.tensor([3e19, 0.0, np.inf]), cr.tensor([4e19, 0.0, 1.0]))
    np.testing.assert_allclose(out.data, np.hypot(np.float32([3e19, 0, np.inf]), np.float32([4e19, 0, 1])))
    assert out.dtype == np.float32
    assert cr.gradcheck(cr.hypot, (f64([3.0, -1.0, 1e-3]), f64([4.0, 2.0, -5.0])))


def test_logaddexp_of_two_minus_infinities_is_minus_infinity():
    out = cr.logaddexp(cr.tensor([-np.inf, 0.0]), cr.tensor([-np.inf, 0.0]))
    np.testing.assert_allclose(out.data, np.logaddexp([-np.inf, 0.0], [-np.inf, 0.0]))


def test_fmax_fmin_ignore_nans_as_numpy():
    a, b = np.array([np.nan, 1.0, 3.0]), np.array([2.0, np.nan, 1.0])
    np.testing.assert_array_equal(cr.fmax(cr.tensor(a), cr.tensor(b)).data, np.fmax(a, b))
    np.testing.assert_array_equal(cr.fmin(cr.tensor(a), cr.tensor(b)).data, np.fmin(a, b))
    x = f64(a)
    cr.fmax(x, f64(b, grad=False)).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


# ----- empty dimensions: PyTorch's results, empty gradients of the input's shape -----
EMPTY_PROD = [((0, 3), 1), ((3, 0), 1), ((0, 3), None), ((2, 0, 3), 2), ((2, 0, 3), (0, 2))]


def torch_prod(x, axis):
    if axis is None:
        return x.prod()
    for a in sorted(np.atleast_1d(axis), reverse=True):    # torch.prod takes one dim at a time
        x = x.prod(int(a))
    return x


def test_prod_gradient_with_no_rows_is_empty():
    # the reported crash: the rules reshaped to (0, -1)
    assert cr.grad(lambda x: cr.prod(x, axis=1).sum())(np.zeros((0, 3))).shape == (0, 3)


@pytest.mark.parametrize("shape, axis", EMPTY_PROD, ids=str)
def test_prod_with_an_empty_dimension_has_an_empty_gradient_and_tangent(shape, axis):
    out, g = grad_of(lambda x: cr.prod(x, axis=axis), np.zeros(shape))
    np.testing.assert_array_equal(out, np.prod(np.zeros(shape), axis=axis))
    assert g.shape == shape and g.dtype == np.float64
    _, t = cr.jvp(lambda x: cr.prod(x, axis=axis), (np.zeros(shape),), (np.ones(shape),))
    assert t.shape == out.shape and not t.any()


@pytest.mark.parametrize("shape, axis", EMPTY_PROD, ids=str)
def test_prod_with_an_empty_dimension_matches_torch(shape, axis):
    out, g = grad_of(lambda x: cr.prod(x, axis=axis), np.zeros(shape))
    tout, tg = torch_grad(lambda t, x: torch_prod(x, axis), np.zeros(shape))
    np.testing.assert_array_equal(out, tout)
    np.testing.assert_array_equal(g, tg)


# name -> (chainrule function, torch function, input)
EMPTY_AXIS = {
    "softmax": (cr.softmax, lambda t, x: t.softmax(x, -1), np.zeros((2, 0))),
    "log_softmax": (cr.log_softmax, lambda t, x: t.log_softmax(x, -1), np.zeros((2, 0))),
    "logsumexp": (lambda x: cr.logsumexp(x, axis=-1), lambda t, x: t.logsumexp(x, -1), np.zeros((2, 0))),
    "softmax_of_no_rows": (cr.softmax, lambda t, x: t.softmax(x, -1), np.zeros((0, 3))),
    "logsumexp_of_nothing": (cr.logsumexp, lambda t, x: t.logsumexp(x, 0), np.zeros(0)),
}


@pytest.mark.parametrize("name", list(EMPTY_AXIS))
def test_softmax_family_over_an_empty_axis(name):
    fn, _, x = EMPTY_AXIS[name]
    out, g = grad_of(fn, x)
    if name.startswith("logsumexp"):
        assert out.shape == x.shape[:-1] and (out == -np.inf).all()     # log of an empty sum
    else:
        assert out.shape == x.shape
    assert g.shape == x.shape and g.dtype == np.float64
    _, t = cr.jvp(fn, (x,), (np.ones_like(x),))
    assert t.shape == out.shape and not t.any()
    assert cr.gradgradcheck(fn, (f64(x),))


@pytest.mark.parametrize("name", list(EMPTY_AXIS))
def test_softmax_family_over_an_empty_axis_matches_torch(name):
    fn, torch_fn, x = EMPTY_AXIS[name]
    out, g = grad_of(fn, x)
    tout, tg = torch_grad(torch_fn, x)
    np.testing.assert_array_equal(out, tout)
    np.testing.assert_array_equal(g, tg)


# ----- axis arguments that are not ints, or out of range -----
@pytest.mark.parametrize("op", ["sum", "mean", "prod", "var", "std", "amax", "logsumexp", "cumsum",
                                "softmax"])
def test_a_float_axis_raises_an_error_that_names_the_op_and_the_fix(op):
    x = f64(np.ones((2, 3)))
    with pytest.raises(cr.errors.ShapeError) as e:
        getattr(cr, op)(x, axis=1.0)
    assert str(e.value) == f"{op}: axis must be an int or a tuple of ints, got 1.0 (float); pass axis=1"


def test_axis_errors_name_the_fix_for_tuples_and_non_integral_values():
    x = f64(np.ones((2, 3)))
    with pytest.raises(cr.errors.ShapeError, match=r"^sum: .* got \(0, 1\.0\) \(tuple\); pass axis=\(0, 1\)$"):
        cr.sum(x, axis=(0, 1.0))
    with pytest.raises(cr.errors.ShapeError, match=r"^mean: .* got 1\.5 \(float\); pass an int such as axis=0"):
        cr.mean(x, axis=1.5)
    with pytest.raises(cr.errors.ShapeError, match=r"^var: .* got '1' \(str\)"):
        cr.var(x, axis="1")
    assert cr.sum(x, axis=np.int64(1)).shape == (2,) and cr.sum(x, axis=[0, 1]).shape == ()


@pytest.mark.parametrize("call", [
    lambda a: cr.moveaxis(a, 5, 0), lambda a: cr.swapaxes(a, 3, 0), lambda a: cr.transpose(a, (0, 3)),
    lambda a: cr.expand_dims(a, 5), lambda a: cr.stack([a, a], axis=4),
    lambda a: cr.numpy.flatten(a, 5), lambda a: cr.split(a, 1, axis=3), lambda a: cr.take(a, [0], axis=2)])
def test_out_of_range_axes_raise_instead_of_wrapping(call):
    with pytest.raises(ShapeError, match="out of bounds"):
        call(cr.ones((2, 3)))
