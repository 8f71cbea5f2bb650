"""Ops follow NumPy's semantics: NaN with no degrees of freedom, stacking 0-d tensors, weighted
averages, named results, sort with axis=None, np.* reductions with NumPy's positional arguments."""
import numpy as np
import pytest

import chainrule as cr


def test_var_and_mean_with_no_degrees_of_freedom_are_nan_as_numpy():
    with np.errstate(all="ignore"):
        assert np.isnan(cr.var(cr.tensor([1.0]), ddof=1).item())
        assert np.isnan(cr.mean(cr.tensor(np.zeros(0, np.float32))).item())
        assert np.isnan(cr.std(cr.tensor([2.0]), ddof=1).item())


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
