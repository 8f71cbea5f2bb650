"""Float arguments that used to become constants silently (issue 26, item 6): each is either
differentiated (checked against central differences in both modes, and NumPy's values) or refused
with an error naming the op and the argument; never a silent zero gradient."""
import numpy as np
import pytest

import chainrule as cr

X = np.array([0.3, -1.2, 2.5, 0.7, 1.9])
M = np.arange(6.0).reshape(2, 3) + 0.5
NAN_ROWS = np.array([[1.0, np.nan, 3.0, 4.0], [2.0, 5.0, 1.0, np.nan]])


def _filled(fill):
    """A fresh (non-leaf) tensor of zeros written in place by ``fill``."""
    def run(p):
        a = cr.tensor(np.zeros(3)) * 1.0
        fill(a, p)
        return a
    return run


# (name, point, function of the argument): the argument is differentiated
DIFFERENTIATED = [
    ("quantile-q", 0.33, lambda p: cr.quantile(cr.tensor(X), p)),
    ("quantile-q-hazen", 0.33, lambda p: cr.quantile(cr.tensor(X), p, method="hazen")),
    ("quantile-q-weibull", 0.33, lambda p: cr.quantile(cr.tensor(X), p, method="weibull")),
    ("quantile-q-median_unbiased", 0.33, lambda p: cr.quantile(cr.tensor(X), p, method="median_unbiased")),
    ("quantile-q-normal_unbiased", 0.33, lambda p: cr.quantile(cr.tensor(X), p, method="normal_unbiased")),
    ("quantile-q-interpolated_inverted_cdf", 0.33,
     lambda p: cr.quantile(cr.tensor(X), p, method="interpolated_inverted_cdf")),
    ("quantile-q-vector-axis", 0.3, lambda p: cr.quantile(cr.tensor(M), cr.stack([p, 2 * p]), axis=1, keepdims=True)),
    ("percentile-q", 33.0, lambda p: cr.percentile(cr.tensor(X), p)),
    ("nanquantile-q-rows", 0.3, lambda p: cr.nanquantile(cr.tensor(NAN_ROWS), cr.stack([p, 2 * p]), axis=1)),
    ("nanpercentile-q", 30.0, lambda p: cr.nanpercentile(cr.tensor(NAN_ROWS), p)),
    ("cov-aweights", 0.5, lambda p: cr.cov(cr.tensor(M), aweights=cr.stack([p, 1.0, 2.0]))),
    ("cov-aweights-fweights-ddof", 0.5,
     lambda p: cr.cov(cr.tensor(M), aweights=cr.stack([p, 1.0, 2.0]), fweights=[1, 3, 2], ddof=2)),
    ("pad-constant_values", 0.5, lambda p: cr.pad(cr.tensor(M), ((1, 2), (2, 1)), constant_values=p)),
    ("pad-constant_values-pairs", 0.5,
     lambda p: cr.pad(cr.tensor(M), ((1, 2), (2, 1)),
                      constant_values=cr.stack([p, 2 * p, 3 * p, 4 * p]).reshape(2, 2))),
    ("pad-end_values", 0.5, lambda p: cr.pad(cr.tensor(M), ((1, 2), (2, 1)), mode="linear_ramp", end_values=p)),
    ("pad-end_values-pairs", 0.5,
     lambda p: cr.pad(cr.tensor(M), ((1, 2), (3, 1)), mode="linear_ramp", end_values=cr.stack([p, -p]))),
    ("heaviside-x2", 0.5, lambda p: cr.heaviside(cr.tensor([0.0, 1.0, -1.0]), p)),
    ("sum-initial", 0.5, lambda p: cr.sum(cr.tensor(M), axis=0, initial=p)),
    ("prod-initial", 0.5, lambda p: cr.prod(cr.tensor(M), axis=1, initial=p)),
    ("amax-initial", 3.0, lambda p: cr.amax(cr.tensor(M), axis=1, initial=p)),
    ("amin-initial-where", 1.0, lambda p: cr.amin(cr.tensor(M), axis=1, initial=p, where=M > 2)),
    ("histogram_bin_edges-data", 0.5, lambda p: cr.histogram_bin_edges(cr.tensor(X) * p, 3)),
    ("histogram_bin_edges-auto", 0.5, lambda p: cr.histogram_bin_edges(cr.tensor(X) * p, "auto")),
    ("histogram-range", 3.0, lambda p: cr.histogram(cr.tensor(X), 4, range=(-2.0, p))[1]),
    ("histogram-bins-as-edges", 3.0, lambda p: cr.histogram(cr.tensor(X), cr.stack([p - 5, p - 2, p]))[1]),
    # already differentiated before the sweep (kept here so that it stays so)
    ("clip-bounds", 0.2, lambda p: cr.clip(cr.tensor(X), p, 2 * p + 1)),
    ("where-values", 0.2, lambda p: cr.where(cr.tensor(X) > 0, p, -p)),
    ("nan_to_num-nan", 0.5, lambda p: cr.nan_to_num(cr.tensor([np.nan, 1.0, np.inf]), nan=p, posinf=2 * p)),
    ("interp-xp-fp-left", 0.5,
     lambda p: cr.interp(cr.tensor(X), cr.stack([p - 3, p, p + 3]), cr.stack([0.0 * p, p, p + 3]), left=p)),
    ("trapezoid-dx", 0.5, lambda p: cr.trapezoid(cr.tensor(X), dx=p)),
    ("gradient-spacing", 0.5, lambda p: cr.gradient(cr.tensor(X), p)),
    ("linspace-logspace", 0.5, lambda p: cr.logspace(p, 2.0, 4, base=p + 2)),
    ("polyval", 0.5, lambda p: cr.polyval(cr.stack([p, 1.0, -p]), cr.tensor(X) * p)),
    ("convolve", 0.5, lambda p: cr.convolve(cr.tensor(X), cr.stack([p, 2 * p]))),
    ("diff-prepend-append", 0.5, lambda p: cr.diff(cr.tensor(X), prepend=p, append=2 * p)),
    ("insert-append", 0.5, lambda p: cr.append(cr.insert(cr.tensor(X), 1, p), p)),
    ("put-place", 0.5, _filled(lambda a, p: (cr.put(a, [0], p), cr.place(a, np.arange(3) > 1, 2 * p)))),
]


@pytest.mark.parametrize("name, point, fn", DIFFERENTIATED, ids=[c[0] for c in DIFFERENTIATED])
def test_the_argument_is_differentiated_in_both_modes(name, point, fn):
    p = cr.tensor(np.float64(point), requires_grad=True)
    out = fn(p)
    assert out.requires_grad, f"{name}: the result does not depend on the argument"
    assert cr.gradcheck(fn, (p,), modes=("rev", "fwd"))


def test_the_quantile_in_q_is_the_slope_of_the_sorted_data():
    # the example: quantile([1, 5, 2, 8], q) at 0.3 is 1.9 + ..., slope (n - 1)(a[2] - a[1]) = 3
    a = cr.tensor([1.0, 5.0, 2.0, 8.0], dtype=cr.float64)
    assert cr.grad(lambda q: cr.quantile(a, q))(np.float64(0.3)) == pytest.approx(3.0, rel=1e-12)
    assert cr.grad(lambda q: cr.percentile(a, q))(np.float64(30.0)) == pytest.approx(0.03, rel=1e-12)
    q = cr.tensor(np.array([0.3, 0.9]), requires_grad=True)
    out = cr.quantile(a, q, method="linear")
    np.testing.assert_array_equal(out.data, np.quantile(a.data, q.data))       # values untouched
    out.sum().backward()
    np.testing.assert_allclose(q.grad.data, [3.0, 9.0], rtol=1e-12)           # (n-1)(2-1), (n-1)(8-5)
    # the mixed second derivative: d/da of dq = (n - 1) (e_hi - e_lo)
    dq = cr.grad(lambda a, q: cr.quantile(a, q), argnums=1)
    np.testing.assert_allclose(cr.grad(lambda a: dq(a, np.float64(0.3)))(a).data, [-3.0, 0.0, 3.0, 0.0])
    # the discrete methods are piecewise constant in q: gradient 0 (and q may require grad)
    assert cr.grad(lambda q: cr.quantile(a, q, method="nearest"))(np.float64(0.3)) == 0.0


def test_quantile_q_inside_vmap():
    a = np.array([[1.0, 5.0, 2.0, 8.0], [3.0, 1.0, 4.0, 1.5]])
    total = cr.grad(lambda q: cr.vmap(lambda row: cr.quantile(row, q))(cr.tensor(a)).sum())(np.float64(0.3))
    assert total == pytest.approx(3.0 + 1.5, rel=1e-12)
    with pytest.raises(cr.VmapError, match=r"quantile\(\): q is batched"):
        cr.vmap(lambda q: cr.quantile(cr.tensor(a[0]), q))(cr.tensor([0.3, 0.5]))


def test_values_with_tensor_arguments_are_numpys():
    c, e = cr.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True), cr.tensor([-1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(cr.pad(cr.tensor(M), ((1, 2), (2, 1)), constant_values=c).data,
                                  np.pad(M, ((1, 2), (2, 1)), constant_values=c.data))
    np.testing.assert_allclose(cr.pad(cr.tensor(M), 2, mode="linear_ramp", end_values=e).data,
                               np.pad(M, 2, mode="linear_ramp", end_values=e.data), rtol=1e-15)
    w = cr.tensor([0.5, 1.0, 2.0], requires_grad=True)
    np.testing.assert_allclose(cr.cov(cr.tensor(M), aweights=w, ddof=1).data, np.cov(M, aweights=w.data, ddof=1),
                               rtol=1e-14)
    x = cr.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(cr.histogram_bin_edges(x, "auto").data, np.histogram_bin_edges(X, "auto"))
    assert cr.histogram(x, 3)[1].requires_grad
    assert cr.sum(cr.tensor(M), initial=cr.tensor(0.5, requires_grad=True)).data == M.sum() + 0.5


def test_the_edges_move_with_the_data_min_and_max():
    x = cr.tensor(X, requires_grad=True)
    cr.histogram_bin_edges(x, 4).sum().backward()        # edges i: min + (max - min) i / 4, 5 of them
    want = np.zeros(5)
    want[X.argmin()], want[X.argmax()] = 2.5, 2.5
    np.testing.assert_allclose(x.grad.data, want, rtol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda p: cr.cov(cr.tensor(M), fweights=cr.stack([p, p, p])), r"cov\(\): fweights requires grad"),
    (lambda p: cr.kaiser(4, p), r"kaiser\(\): beta requires grad"),
], ids=["cov-fweights", "kaiser-beta"])
def test_an_argument_without_a_derivative_is_refused_by_name(call, match):
    p = cr.tensor(1.0, requires_grad=True)
    with pytest.raises(cr.GraphError, match=match + r".*pass \w+\.detach\(\)"):
        call(p)
    call(p.detach())                                      # a constant works


def test_tolerances_of_comparisons_may_be_tensors():
    # isclose's rtol/atol were handed to NumPy as tensors, which recursed into the dispatch
    atol = cr.tensor(0.1, requires_grad=True)
    np.testing.assert_array_equal(cr.isclose(cr.tensor(X), cr.tensor(X + 0.05), atol=atol).data, np.ones(5, bool))
    assert cr.allclose(cr.tensor(X), cr.tensor(X), rtol=atol)


def test_the_refusal_helper_names_op_argument_and_role():
    from chainrule.core._registry import constant_arg
    assert constant_arg(cr.tensor([1.0]), "op", "arg").tolist() == [1.0]         # plain: its data
    assert constant_arg(0.5, "op", "arg") == 0.5
    with pytest.raises(cr.GraphError, match=r"op\(\): arg requires grad.*arg\.detach\(\)"):
        constant_arg(cr.tensor(1.0, requires_grad=True), "op", "arg")
    with pytest.raises(cr.GraphError, match=r"op\(\): arg carries a forward-mode tangent"):
        cr.jvp(lambda t: constant_arg(t, "op", "arg"), (cr.tensor(1.0),), (cr.tensor(1.0),))
    with pytest.raises(cr.VmapError, match=r"op\(\): arg is batched by cr.vmap"):
        cr.vmap(lambda t: constant_arg(t, "op", "arg"))(cr.tensor([1.0, 2.0]))


# ----- full / full_like: differentiable in a fill value that is a tensor (issue 26, item 3) -----
FILLED = [
    ("full", lambda p: cr.full((2, 3), p)),
    ("full-vector-fill", lambda p: cr.full((2, 3), cr.stack([p, 2 * p, p * p]))),
    ("full-list-fill", lambda p: cr.full((2, 2), [p, 1.0])),
    ("full-dtype", lambda p: cr.full((3,), p * p, dtype=np.float64)),
    ("full_like", lambda p: cr.full_like(cr.tensor(M), p)),
    ("np.full_like-tensor", lambda p: np.full_like(cr.tensor(M), p ** 3)),
    ("np.full_like-shape", lambda p: np.full_like(cr.tensor(M), p, shape=(4,))),
    ("full_like-array", lambda p: cr.full_like(M, p)),
]


@pytest.mark.parametrize("name, fn", FILLED, ids=[c[0] for c in FILLED])
def test_a_tensor_fill_value_is_differentiated_in_both_modes_and_twice(name, fn):
    p = cr.tensor(np.float64(0.7), requires_grad=True)
    assert fn(p).requires_grad
    assert cr.gradcheck(fn, (p,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda p: fn(p) ** 2, (p,))


def test_full_like_of_a_tensor_counts_its_elements():
    # the reproducer: d/dt sum(full_like(x, t)) is x.size, not 0
    x = cr.tensor(np.ones(3))
    assert cr.grad(lambda t: cr.sum(np.full_like(x, t)))(cr.tensor(2.0)) == 3.0
    assert cr.grad(lambda t: cr.sum(cr.full((2, 3), t)))(cr.tensor(2.0)) == 6.0
    assert cr.hessian(lambda t: cr.sum(cr.full((3,), t) ** 3))(np.float64(2.0)) == pytest.approx(36.0)
    value, tangent = cr.jvp(lambda t: np.full_like(x, t), (np.float64(2.0),), (np.float64(1.5),))
    np.testing.assert_array_equal(value, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(tangent, [1.5, 1.5, 1.5])


def test_batched_fill_values():
    s = np.array([1.0, 2.0, 3.0])
    got = cr.vmap(lambda t: cr.full((2,), t * 2))(s)
    np.testing.assert_array_equal(got.data, np.repeat(2 * s[:, None], 2, axis=1))
    got = cr.vmap(lambda t: np.full_like(cr.tensor(M), t))(s)
    np.testing.assert_array_equal(got.data, s[:, None, None] * np.ones((3, 2, 3)))
    np.testing.assert_array_equal(cr.vmap(cr.grad(lambda t: cr.sum(cr.full((4,), t) ** 2)))(s).data, 8 * s)
    # a batched `a` with a plain fill: one example's shape
    np.testing.assert_array_equal(cr.vmap(lambda a: np.full_like(a, 0.5))(np.ones((5, 2))).data,
                                  np.full((5, 2), 0.5))


def test_full_with_plain_fill_values_is_numpys():
    assert cr.full((2,), 0.5).dtype == cr.get_default_dtype() and cr.full((2,), 2).dtype == np.int64
    assert cr.full(3, 1.5, dtype=np.float64).data.tolist() == [1.5] * 3
    leaf = cr.full((2,), cr.tensor(2.0), requires_grad=True)            # a plain tensor: its value
    assert leaf.is_leaf and leaf.requires_grad and leaf.data.tolist() == [2.0, 2.0]
    out = np.full_like(M, 2.5)
    assert type(out) is np.ndarray and out.tolist() == np.full_like(M, 2.5).tolist()
    assert np.full_like(cr.tensor([1, 2]), 2.5).data.tolist() == [2, 2]   # a's dtype, as NumPy
    y = cr.full((3,), cr.tensor(1.0, requires_grad=True))
    y[0] = 5.0                                                            # writable, not a broadcast view
    assert y.data.tolist() == [5.0, 1.0, 1.0]
    with pytest.raises(cr.GraphError, match="full: requires_grad=True makes a new leaf.*detach"):
        cr.full((2,), cr.tensor(1.0, requires_grad=True), requires_grad=True)


def test_numpy_full_of_a_graph_tensor_points_to_cr_full():
    # np.full and np.full_like of an ndarray do not dispatch on the fill value: they say what to use
    t = cr.tensor(2.0, requires_grad=True)
    with pytest.raises(cr.ConversionError, match="numpy.full converts .*use cr.full, which is differentiable"):
        np.full((2,), t)
    with pytest.raises(cr.DTypeError, match=r"numpy.full_like asked: use cr.full_like, which is differentiable"):
        np.full_like(M, t)
    assert cr.grad(lambda t: cr.sum(cr.full_like(M, t)))(cr.tensor(2.0)) == 6.0     # and the advice holds


# ----- NumPy functions without a chainrule version never drop a graph tensor (item 3) -----
FALLBACK_KINDS = {
    "leaf": lambda body: body(cr.tensor(X, requires_grad=True)),
    "inside_grad": lambda body: cr.grad(lambda t: cr.sum(body(t)[0]))(X),
    "jvp": lambda body: cr.jvp(lambda t: body(t)[0], (X,), (np.ones_like(X),)),
    "jvp_no_grad": lambda body: cr.jvp(lambda t: _no_grad(body, t), (X,), (np.ones_like(X),)),
    "batched": lambda body: cr.vmap(body)(np.stack([X, 2 * X])),
}


def _no_grad(body, t):
    with cr.no_grad():
        return body(t)[0]


@pytest.mark.parametrize("kind", FALLBACK_KINDS)
@pytest.mark.parametrize("call, arg", [
    (lambda t: np.histogram2d(X, X, weights=t), "weights"),
    (lambda t: np.histogram2d(t, X), "x"),
    (lambda t: np.histogramdd([X, t]), r"sample\[1\]"),
    (lambda t: np.histogramdd(np.stack([X, X], 1), weights=t, density=True), "weights"),
], ids=["histogram2d-weights", "histogram2d-x", "histogramdd-list", "histogramdd-weights"])
def test_a_float_result_of_a_graph_tensor_is_refused_by_argument(kind, call, arg):
    expected = cr.VmapConversionError if kind == "batched" else cr.ConversionError
    with pytest.raises(expected, match=r"numpy\.histogram(2d|dd)\(\): " + arg + r" (requires grad|carries a "
                                       r"forward-mode tangent|is batched by cr.vmap)"):
        FALLBACK_KINDS[kind](call)


def test_plain_and_no_grad_tensors_still_run_numpy():
    want = np.histogram2d(X, X, weights=X)
    for t in (cr.tensor(X), cr.tensor(X, requires_grad=True).detach()):
        got = np.histogram2d(X, X, weights=t)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    with cr.no_grad():                           # no graph is recorded: nothing to drop
        np.testing.assert_array_equal(np.histogramdd([X, cr.tensor(X, requires_grad=True)])[0],
                                      np.histogramdd([X, X])[0])
    # integer, boolean or shape-only results have no derivative: computed for any tensor
    x = cr.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(np.isin(x, [0.3]), np.isin(X, [0.3]))
    assert np.empty_like(x).shape == X.shape
    np.testing.assert_array_equal(np.argwhere(x > 1), np.argwhere(X > 1))
    seen = []                                    # a batched tensor's dtype is one for all examples
    cr.vmap(lambda r: seen.append((np.result_type(r), np.can_cast(r, np.float32))) or r)(np.ones((2, 3)))
    assert seen == [(np.float64, False)]


def test_histogram_weights_are_differentiated():
    # np.histogram (1-D) has a chainrule version: each bin sums its elements' weights
    w = cr.tensor(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), requires_grad=True)
    counts, _ = np.histogram(X, bins=2, weights=w)
    (counts * cr.tensor([10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(w.grad.data, np.where(X < (X.min() + X.max()) / 2, 10.0, 100.0))
