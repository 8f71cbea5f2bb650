"""Ops follow NumPy's semantics: NaN with no degrees of freedom, stacking 0-d tensors, weighted
averages, named results, sort with axis=None, np.* reductions with NumPy's positional arguments,
ufunc.at (inside cr.vmap, repeated indices) and ufunc.accumulate (running extremes)."""
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


# ----- ufunc.at and ufunc.accumulate: batched (cr.vmap), repeated indices, running extremes -----
AT_UFUNCS = [np.add, np.subtract, np.multiply, np.maximum, np.minimum]


def _at_loss(ufunc):
    def loss(x, v, i):
        y = x * 1.0                                   # (not a leaf)
        ufunc.at(y, i, v * 2)
        return (y ** 2 * np.arange(1.0, 6.0)).sum()
    return loss


@pytest.mark.parametrize("ufunc", AT_UFUNCS, ids=lambda u: u.__name__)
@pytest.mark.parametrize("batched_index", [False, True], ids=["same-index", "batched-index"])
def test_ufunc_at_inside_vmap_matches_a_loop_over_examples(ufunc, batched_index):
    rng = np.random.default_rng(1)
    x, v = rng.integers(-2, 3, (3, 5)).astype(float), rng.integers(-2, 3, (3, 4)).astype(float)  # ties
    index = np.array([[0, 0, 2, 4], [1, 1, 1, 3], [4, 0, 4, 2]]) if batched_index else np.array([0, 0, 3, 1])
    pick = (lambda k: index[k]) if batched_index else (lambda k: index)
    axes = (0, 0, 0 if batched_index else None)
    f = _at_loss(ufunc)
    loop = [cr.grad(f, argnums=(0, 1))(x[k], v[k], pick(k)) for k in range(3)]
    values = cr.vmap(f, in_axes=axes)(x, v, index)
    np.testing.assert_allclose(np.asarray(values), [float(f(cr.tensor(x[k]), v[k], pick(k))) for k in range(3)])
    gx, gv = cr.vmap(cr.grad(f, argnums=(0, 1)), in_axes=axes)(x, v, index)
    np.testing.assert_allclose(gx, [g[0] for g in loop])
    np.testing.assert_allclose(gv, [g[1] for g in loop])
    outer = cr.grad(lambda x: cr.vmap(f, in_axes=axes)(x, v, index).sum())(x)       # grad(vmap)
    np.testing.assert_allclose(np.asarray(outer), [g[0] for g in loop])
    fixed = cr.vmap(cr.grad(lambda x: f(x, v[0], pick(0))))(x)                      # unbatched values
    np.testing.assert_allclose(fixed, [cr.grad(lambda x: f(x, v[0], pick(0)))(x[k]) for k in range(3)])


def test_ufunc_at_inside_vmap_refuses_what_it_cannot_batch():
    def distinct(x):
        y = x * 1.0
        np.negative.at(y, [0, 2])
        return y
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(cr.vmap(distinct)(x), [[-0.0, 1, -2], [-3, 4, -5]])

    def moving(x, i):
        y = x * 1.0
        np.divide.at(y, i, 2.0)
        return y
    with pytest.raises(cr.errors.UnsupportedArgument, match="differ between examples"):
        cr.vmap(moving)(x, np.array([[0], [1]]))

    def unbatched_target(v):
        y = cr.zeros(3)
        np.add.at(y, [0], v)
        return y
    with pytest.raises(cr.VmapError, match="not batched"):
        cr.vmap(unbatched_target)(np.ones((2, 1)))


@pytest.mark.parametrize("ufunc,reduce", [(np.multiply, "prod"), (np.maximum, "amax"), (np.minimum, "amin"),
                                          (np.add, "sum")], ids=lambda u: getattr(u, "__name__", u))
def test_ufunc_at_with_repeated_indices_matches_torch_scatter_reduce(ufunc, reduce):
    torch = pytest.importorskip("torch")
    a0 = np.array([3.0, -1.0, 0.5, 2.0, 0.0])
    v0 = np.array([3.0, 3.0, 0.5, -2.0, 2.0, 2.0, 4.0])       # ties with a and among themselves, a zero in a
    index = np.array([0, 0, 2, 4, 4, 4, 1])
    w = np.arange(1.0, 6.0)
    a, v = cr.tensor(a0, requires_grad=True), cr.tensor(v0, requires_grad=True)
    y = a * 1.0
    ufunc.at(y, index, v)
    want = a0.copy()
    ufunc.at(want, index, v0)
    np.testing.assert_allclose(y.data, want)
    (y * w).sum().backward()
    ta, tv = torch.tensor(a0, requires_grad=True), torch.tensor(v0, requires_grad=True)
    (ta.scatter_reduce(0, torch.tensor(index), tv, reduce, include_self=True) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.data, ta.grad.numpy())
    np.testing.assert_allclose(v.grad.data, tv.grad.numpy())    # maximum: a 3-way tie gets 1/3 each


def test_ufunc_at_with_repeated_indices_has_exact_higher_derivatives():
    rng = np.random.default_rng(4)
    a = cr.tensor(rng.uniform(0.5, 1.5, (3, 4)), requires_grad=True)
    v = cr.tensor(rng.uniform(0.5, 1.5, 5), requires_grad=True)
    index = ([0, 0, 2, 0, 1], [1, 1, 3, 1, 0])                  # (0, 1) three times

    def f(a, v):
        y = a * 1.0
        np.multiply.at(y, index, v)
        return y
    assert cr.gradcheck(f, (a, v), modes=("rev", "fwd"))
    assert cr.gradgradcheck(f, (a, v))
    y = f(a, v)
    assert np.isclose(y.data[0, 1], a.data[0, 1] * v.data[0] * v.data[1] * v.data[3])


def test_ufunc_at_with_repeated_indices_handles_many_multiplicities():
    rng = np.random.default_rng(5)
    index = rng.integers(0, 40, 300)
    x, v = rng.normal(size=40), rng.normal(size=300)
    for ufunc in (np.maximum, np.minimum, np.multiply):
        want, t = x.copy(), cr.tensor(x.copy())
        ufunc.at(want, index, v)
        ufunc.at(t, index, cr.tensor(v))
        np.testing.assert_allclose(t.data, want, rtol=1e-12)


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum], ids=lambda u: u.__name__)
def test_maximum_minimum_accumulate_are_torch_cummax_cummin(ufunc):
    torch = pytest.importorskip("torch")
    x0 = np.array([[1.0, 3.0, 3.0, 2.0, np.nan, 5.0, np.nan, 0.0],
                   [4.0, 1.0, 1.0, 0.5, 0.5, 7.0, 7.0, -1.0]])     # ties and NaNs
    w = np.arange(1.0, 9.0)
    x = cr.tensor(x0, requires_grad=True)
    y = ufunc.accumulate(x, axis=1)
    np.testing.assert_array_equal(y.data, ufunc.accumulate(x0, axis=1))
    (y * w).sum().backward()
    t = torch.tensor(x0, requires_grad=True)
    cum = torch.cummax if ufunc is np.maximum else torch.cummin
    (cum(t, 1).values * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.data, t.grad.numpy())   # all of it to the (latest) extreme
    z = np.random.default_rng(0).integers(0, 4, (3, 5, 6)).astype(float)
    np.testing.assert_array_equal(cr.vmap(ufunc.accumulate)(z), ufunc.accumulate(z, axis=1))
    g = cr.vmap(cr.grad(lambda s: (ufunc.accumulate(s, axis=1) ** 2).sum()))(z)
    for k in range(3):
        t = torch.tensor(z[k], requires_grad=True)
        (cum(t, 1).values ** 2).sum().backward()
        np.testing.assert_array_equal(g[k], t.grad.numpy())
    s = cr.tensor(np.random.default_rng(2).normal(size=(4, 9)), requires_grad=True)
    assert cr.gradcheck(lambda s: ufunc.accumulate(s, axis=0), (s,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda s: ufunc.accumulate(s, axis=1) ** 2, (s,))


def test_add_and_multiply_accumulate_are_cumsum_and_cumprod():
    x = cr.tensor(np.random.default_rng(3).normal(size=(3, 4)), requires_grad=True)
    np.testing.assert_allclose(np.add.accumulate(x, axis=1).data, np.cumsum(x.data, axis=1))
    np.testing.assert_allclose(np.multiply.accumulate(x).data, np.cumprod(x.data, axis=0))
    assert cr.gradcheck(lambda x: np.multiply.accumulate(x, axis=1), (x,))
