"""Review fixes in the op modules: gradients at edge points, numerical stability, NumPy semantics."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.errors import ShapeError


def f64(v, grad=True):
    return cr.tensor(np.asarray(v, dtype=np.float64), requires_grad=grad)


# ----- gradients -----
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


# ----- NumPy semantics -----
def test_var_and_mean_with_no_degrees_of_freedom_are_nan_as_numpy():
    with np.errstate(all="ignore"):
        assert np.isnan(cr.var(cr.tensor([1.0]), ddof=1).item())
        assert np.isnan(cr.mean(cr.tensor(np.zeros(0, np.float32))).item())
        assert np.isnan(cr.std(cr.tensor([2.0]), ddof=1).item())


def test_clip_keeps_integer_dtype_with_one_bound():
    out = cr.clip(cr.tensor([1, 5, 9]), None, 6)
    assert out.dtype == np.int64 and out.tolist() == [1, 5, 6]
    assert cr.clip(cr.tensor([1, 5, 9]), 3, None).tolist() == [3, 5, 9]


@pytest.mark.parametrize("call", [
    lambda a: cr.moveaxis(a, 5, 0), lambda a: cr.swapaxes(a, 3, 0), lambda a: cr.transpose(a, (0, 3)),
    lambda a: cr.expand_dims(a, 5), lambda a: cr.stack([a, a], axis=4),
    lambda a: cr.ops.flatten(a, 5), lambda a: cr.split(a, 1, axis=3), lambda a: cr.take(a, [0], axis=2)])
def test_out_of_range_axes_raise_instead_of_wrapping(call):
    with pytest.raises(ShapeError, match="out of bounds"):
        call(cr.ones((2, 3)))


def test_stack_hstack_vstack_edge_cases():
    with pytest.raises(ValueError, match="at least one"):
        cr.stack([])
    s = [cr.tensor(1.0), cr.tensor(2.0)]
    assert cr.hstack(s).tolist() == [1.0, 2.0]
    assert cr.vstack(s).shape == (2, 1)
    assert cr.vstack([cr.ones(3), cr.ones(3)]).shape == (2, 3)


def test_average_with_1d_weights_along_an_axis():
    x = np.arange(12.0).reshape(3, 4)
    w = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(cr.average(cr.tensor(x), axis=0, weights=w).data,
                               np.average(x, axis=0, weights=w))
    np.testing.assert_allclose(np.average(cr.tensor(x), axis=0, weights=w).data,
                               np.average(x, axis=0, weights=w))


def test_slogdet_returns_numpys_named_result():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    res = cr.linalg.slogdet(cr.tensor(a))
    ref = np.linalg.slogdet(a)
    assert float(res.sign) == ref.sign and np.isclose(float(res.logabsdet), ref.logabsdet)
    sign, logabsdet = res
    assert float(sign) == ref.sign


def test_sort_with_axis_none_flattens():
    x = np.array([[3.0, 1.0], [2.0, 0.0]])
    assert cr.sort(cr.tensor(x), axis=None).tolist() == np.sort(x, axis=None).tolist()


def test_numpy_reductions_accept_numpys_positional_order():
    t = cr.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = np.sum(t, 0, np.float64)                 # numpy.sum(a, axis, dtype, out, keepdims)
    assert out.shape == (2,) and out.dtype == np.float64
    assert np.mean(t, 1, None, None, True).shape == (2, 1)
    assert np.var(t, 0, None, None, 1).tolist() == [2.0, 2.0]   # ddof=1
    with pytest.raises(TypeError, match="out="):
        np.sum(t, 0, None, np.zeros(2))


def test_empty_list_index_selects_nothing():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = x[[]]
    assert y.shape == (0,)
    (y.sum() + x.sum()).backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])
