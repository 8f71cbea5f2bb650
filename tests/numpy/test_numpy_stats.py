"""chainrule/numpy/statistics.py, order_statistics.py and the statistics-born functions of math_more.py
(convolve, interp, trapezoid) and creation_more.py (linspace, ...) against NumPy: values, dtypes and
shapes for every argument form, the stated gradients at ties, NaNs and kinks, errors, and dispatch
through ``np.<name>(tensor)``."""
import warnings

import numpy as np
import pytest

import chainrule as cr

METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
           "hazen", "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher",
           "midpoint", "nearest"]


def same(got, want, rtol=1e-12, atol=1e-14):
    """Equal to NumPy's result: shape, dtype and values (NaNs in the same places)."""
    got, want = np.asarray(getattr(got, "data", got)), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def grad_of(fn, x, *rest):
    t = cr.tensor(np.asarray(x, dtype=float), dtype=cr.float64, requires_grad=True)
    out = fn(t, *rest)
    out.backward(cr.ones(out.shape, dtype=cr.float64))
    return t.grad.data


@pytest.fixture
def data():
    return np.random.default_rng(3).normal(size=(4, 5, 6))


# ----- order statistics -----
@pytest.mark.parametrize("method", METHODS)
def test_quantile_and_percentile_match_numpy_for_every_method_and_axis_form(method, data):
    t = cr.tensor(data)
    for axis in (None, 0, -1, (0, 2), (1, 2)):
        for keepdims in (False, True):
            for q in (0.3, 0.0, 1.0, [0.0, 0.25, 1.0], np.array([[0.1, 0.9], [0.5, 0.77]])):
                kw = dict(axis=axis, keepdims=keepdims, method=method)
                same(cr.quantile(t, q, **kw), np.quantile(data, q, **kw))
                p = q * 100 if isinstance(q, float) else np.multiply(q, 100)
                same(cr.percentile(t, p, **kw), np.percentile(data, p, **kw))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_quantile_and_median_keep_numpys_result_dtype(dtype):
    a = (np.random.default_rng(0).normal(size=(4, 7)) * 4).astype(dtype)
    t = cr.tensor(a)
    for axis in (None, 1):
        same(cr.median(t, axis=axis), np.median(a, axis=axis))
        for method in METHODS:
            for q in (0.3, [0.2, 0.5], np.float32(0.4), np.array([0.3], dtype=np.float32)):
                same(cr.quantile(t, q, axis=axis, method=method), np.quantile(a, q, axis=axis, method=method))


def test_median_matches_numpy(data):
    t = cr.tensor(data)
    for axis in (None, 0, 1, -1, (0, 2)):
        for keepdims in (False, True):
            same(cr.median(t, axis=axis, keepdims=keepdims), np.median(data, axis=axis, keepdims=keepdims))
    same(cr.median(cr.tensor(data[0, 0, :5])), np.median(data[0, 0, :5]))      # odd count


def test_median_of_an_even_count_gives_half_to_each_middle_element():
    np.testing.assert_array_equal(grad_of(cr.median, [4.0, 1.0, 3.0, 2.0]), [0, 0, 0.5, 0.5])
    np.testing.assert_array_equal(grad_of(cr.median, [4.0, 1.0, 3.0]), [0, 0, 1])


def test_ties_go_to_the_element_a_stable_sort_puts_at_that_rank():
    x = [2.0, 1.0, 2.0, 3.0, 2.0]          # stable order: 1(1) 2(0) 2(2) 2(4) 3(3); rank 2 -> index 2
    np.testing.assert_array_equal(grad_of(cr.median, x), [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(grad_of(lambda t: cr.quantile(t, 0.25), x), [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(grad_of(lambda t: cr.quantile(t, 0.75), x), [0, 0, 0, 0, 1])
    # batched rows, ties everywhere: the same rule per row
    rows = np.array([[5.0, 5.0, 5.0, 1.0], [0.0, 7.0, 7.0, 7.0]])
    g = grad_of(lambda t: cr.quantile(t, 0.5, axis=1, method="lower"), rows)
    np.testing.assert_array_equal(g, [[1, 0, 0, 0], [0, 1, 0, 0]])


def test_ties_agree_with_torch_quantile_and_differ_from_torch_median_by_design():
    torch = pytest.importorskip("torch")
    x = [2.0, 1.0, 2.0, 3.0, 2.0]
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.quantile(tx, 0.5).backward()
    np.testing.assert_array_equal(grad_of(lambda t: cr.quantile(t, 0.5), x), tx.grad.numpy())
    tx = torch.tensor([4.0, 1.0, 3.0, 2.0], dtype=torch.float64)
    assert float(torch.median(tx)) == 2.0 and float(cr.median(cr.tensor(tx.numpy()))) == 2.5
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.median(tx).backward()                       # torch splits among the tied medians
    np.testing.assert_allclose(tx.grad.numpy(), [1 / 3, 0, 1 / 3, 0, 1 / 3])


def test_nan_in_a_slice_gives_nan_and_gradient_zero_for_the_non_nan_functions():
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    same(cr.median(cr.tensor(a), axis=1), np.median(a, axis=1))
    same(cr.quantile(cr.tensor(a), 0.3, axis=1), np.quantile(a, 0.3, axis=1))
    g = grad_of(lambda t: cr.median(t, axis=1), a)
    np.testing.assert_array_equal(g, [[0, 0, 0], [0, 1, 0]])


def test_weighted_inverted_cdf_matches_numpy():
    rng = np.random.default_rng(1)
    a, w = rng.normal(size=(3, 8)), rng.uniform(size=(3, 8))
    w[0, :2] = 0
    for q in (0.0, 0.3, [0.1, 0.5, 1.0]):
        same(cr.quantile(cr.tensor(a), q, axis=1, method="inverted_cdf", weights=w),
             np.quantile(a, q, axis=1, method="inverted_cdf", weights=w))
        same(cr.quantile(cr.tensor(a), q, axis=0, method="inverted_cdf", weights=w[:, 0]),
             np.quantile(a, q, axis=0, method="inverted_cdf", weights=w[:, 0]))
        same(cr.percentile(cr.tensor(a), np.multiply(q, 100), method="inverted_cdf", weights=w),
             np.percentile(a, np.multiply(q, 100), method="inverted_cdf", weights=w))
    g = grad_of(lambda t: cr.quantile(t, 0.5, method="inverted_cdf", weights=np.array([1.0, 1, 1, 5])),
                [4.0, 1.0, 3.0, 2.0])
    np.testing.assert_array_equal(g, [0, 0, 0, 1])
    with pytest.raises(ValueError, match="Only method 'inverted_cdf' supports weights"):
        cr.quantile(cr.tensor(a), 0.5, weights=w)
    with pytest.raises(ValueError, match="non-negative"):
        cr.quantile(cr.tensor(a), 0.5, method="inverted_cdf", weights=-w)


def test_quantile_errors():
    t = cr.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="Quantiles must be in the range"):
        cr.quantile(t, 1.5)
    with pytest.raises(ValueError, match="Percentiles must be in the range"):
        cr.percentile(t, -1)
    with pytest.raises(ValueError, match="not a valid method"):
        cr.quantile(t, 0.5, method="linearr")
    with pytest.raises(TypeError, match="out= is not supported"):
        cr.median(t, out=np.empty(()))
    with pytest.raises(TypeError, match="real numbers"):
        cr.quantile(cr.tensor([1j]), 0.5)


# ----- nan* reductions -----
@pytest.fixture
def nandata():
    a = np.random.default_rng(2).normal(size=(5, 6))
    a[np.random.default_rng(3).uniform(size=a.shape) < 0.3] = np.nan
    a[2, 1:] = np.nan
    a[2, 0] = 0.25
    return a


@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanmax", "nanmin",
                                  "nanmedian"])
def test_nan_reductions_match_numpy(name, nandata):
    fn, ref = getattr(cr, name), getattr(np, name)
    for a in (nandata, nandata.astype(np.float32), np.arange(12).reshape(3, 4)):
        for axis in (None, 0, 1, (0, 1)):
            for keepdims in (False, True):
                same(fn(cr.tensor(a), axis=axis, keepdims=keepdims), ref(a, axis=axis, keepdims=keepdims))
    if name in ("nanvar", "nanstd"):
        same(fn(cr.tensor(nandata), axis=1, ddof=1), ref(nandata, axis=1, ddof=1))
    if name in ("nansum", "nanmean", "nanvar", "nanstd", "nanprod"):
        same(fn(cr.tensor(nandata.astype(np.float32)), axis=1, dtype=np.float64),
             ref(nandata.astype(np.float32), axis=1, dtype=np.float64))


@pytest.mark.parametrize("method", METHODS)
def test_nanquantile_and_nanpercentile_match_numpy(method, nandata):
    t = cr.tensor(nandata)
    for axis in (None, 0, 1):
        for keepdims in (False, True):
            kw = dict(axis=axis, keepdims=keepdims, method=method)
            same(cr.nanquantile(t, [0.1, 0.5, 0.9], **kw), np.nanquantile(nandata, [0.1, 0.5, 0.9], **kw))
            same(cr.nanpercentile(t, 33.0, **kw), np.nanpercentile(nandata, 33.0, **kw))


def test_nan_cumulative_and_arg_functions_match_numpy(nandata):
    t = cr.tensor(nandata)
    for axis in (None, 0, 1):
        same(cr.nancumsum(t, axis=axis), np.nancumsum(nandata, axis=axis))
        same(cr.nancumprod(t, axis=axis), np.nancumprod(nandata, axis=axis))
        same(cr.nanargmax(t, axis=axis), np.nanargmax(nandata, axis=axis))
        same(cr.nanargmin(t, axis=axis), np.nanargmin(nandata, axis=axis))
    assert not cr.nanargmax(cr.tensor(nandata, requires_grad=True)).requires_grad


def test_nan_entries_get_gradient_zero(nandata):
    nan = np.isnan(nandata)
    for fn in (cr.nansum, cr.nanmean, cr.nanvar, cr.nanstd, cr.nanprod, cr.nanmax, cr.nanmedian,
               lambda t: cr.nanquantile(t, 0.3), lambda t: cr.nancumsum(t, axis=1)):
        g = grad_of(fn, nandata)
        assert np.all(g[nan] == 0) and np.all(np.isfinite(g))
    np.testing.assert_array_equal(grad_of(lambda t: cr.nanmean(t, axis=1), nandata)[2], [1, 0, 0, 0, 0, 0])


def test_all_nan_slices_give_numpys_values_warnings_and_gradient_zero():
    a = np.array([[np.nan, np.nan], [1.0, 3.0]])
    for name in ("nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nanmedian"):
        with pytest.warns(RuntimeWarning):
            want = getattr(np, name)(a, axis=1)
        with pytest.warns(RuntimeWarning):
            same(getattr(cr, name)(cr.tensor(a), axis=1), want)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = grad_of(lambda t: getattr(cr, name)(t, axis=1), a)
        np.testing.assert_array_equal(g[0], [0, 0])
    for name in ("nanquantile", "nanpercentile"):
        with pytest.warns(RuntimeWarning, match="All-NaN"):
            same(getattr(cr, name)(cr.tensor(a), 0.5, axis=1), getattr(np, name)(a, 0.5, axis=1))
    same(cr.nansum(cr.tensor(a), axis=1), np.nansum(a, axis=1))         # 0, no warning
    same(cr.nanprod(cr.tensor(a), axis=1), np.nanprod(a, axis=1))       # 1
    np.testing.assert_array_equal(grad_of(lambda t: cr.nanprod(t, axis=1), a), [[0, 0], [3, 1]])
    for name in ("nanargmax", "nanargmin"):
        with pytest.raises(ValueError, match="All-NaN slice"):
            getattr(cr, name)(cr.tensor(a), axis=1)
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        same(cr.nanvar(cr.tensor(a), axis=1, ddof=2), np.nanvar(a[1:], axis=1, ddof=2).repeat(2))


def test_ptp_matches_numpy_and_shares_ties(data):
    for a in (data, np.arange(12).reshape(3, 4)):
        for axis in (None, 1, (0, 1)):
            same(cr.ptp(cr.tensor(a), axis=axis), np.ptp(a, axis=axis))
    np.testing.assert_array_equal(grad_of(cr.ptp, [3.0, 1.0, 3.0]), [0.5, -1, 0.5])


# ----- covariance -----
def test_cov_and_corrcoef_match_numpy_for_every_argument():
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(3, 8)), rng.normal(size=(2, 8))
    fw, aw = rng.integers(0, 4, 8), rng.uniform(size=8)
    for kw in ({}, {"bias": True}, {"ddof": 3}, {"fweights": fw}, {"aweights": aw},
               {"fweights": fw, "aweights": aw}, {"fweights": fw, "aweights": aw, "ddof": 0},
               {"dtype": np.float32}):
        same(cr.cov(cr.tensor(X), **kw), np.cov(X, **kw))
        same(cr.cov(cr.tensor(X), cr.tensor(Y), **kw), np.cov(X, Y, **kw))
        same(cr.cov(cr.tensor(X.T), cr.tensor(Y.T), rowvar=False, **kw), np.cov(X.T, Y.T, rowvar=False, **kw))
    same(cr.cov(cr.tensor(X[0])), np.cov(X[0]))
    same(cr.cov(cr.tensor(X[0]), cr.tensor(X[1])), np.cov(X[0], X[1]))
    same(cr.cov(cr.tensor(np.arange(12).reshape(3, 4))), np.cov(np.arange(12).reshape(3, 4)))
    Xc = X + 1j * rng.normal(size=X.shape)
    same(cr.cov(cr.tensor(Xc)), np.cov(Xc))
    same(cr.corrcoef(cr.tensor(X)), np.corrcoef(X))
    same(cr.corrcoef(cr.tensor(X), cr.tensor(Y)), np.corrcoef(X, Y))
    same(cr.corrcoef(cr.tensor(X.T), rowvar=False), np.corrcoef(X.T, rowvar=False))
    same(cr.corrcoef(cr.tensor(X[0])), np.corrcoef(X[0]))
    same(cr.corrcoef(cr.tensor(Xc)), np.corrcoef(Xc))


def test_cov_errors_and_warnings():
    X = cr.tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="ddof must be integer"):
        cr.cov(X, ddof=1.5)
    with pytest.raises(TypeError, match="fweights must be integer"):
        cr.cov(X, fweights=[1.5, 1, 1])
    with pytest.raises(RuntimeError, match="incompatible numbers of samples"):
        cr.cov(X, aweights=[1.0, 1.0])
    with pytest.raises(ValueError, match="more than 2 dimensions"):
        cr.cov(cr.tensor(np.ones((2, 2, 2))))
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        cr.cov(X, ddof=3)


# ----- convolution -----
def test_convolve_and_correlate_match_numpy_for_all_lengths_and_modes():
    rng = np.random.default_rng(5)
    for n in range(1, 8):
        for m in range(1, 8):
            a, v = rng.normal(size=n), rng.normal(size=m)
            for mode in ("full", "same", "valid"):
                same(cr.convolve(cr.tensor(a), cr.tensor(v), mode), np.convolve(a, v, mode))
                same(cr.correlate(cr.tensor(a), cr.tensor(v), mode), np.correlate(a, v, mode))
    a, v = rng.normal(size=7) + 1j * rng.normal(size=7), rng.normal(size=3) + 1j * rng.normal(size=3)
    for mode in ("full", "same", "valid"):
        same(cr.convolve(cr.tensor(a), cr.tensor(v), mode), np.convolve(a, v, mode))
        same(cr.correlate(cr.tensor(a), cr.tensor(v), mode), np.correlate(a, v, mode))
        same(cr.correlate(cr.tensor(v), cr.tensor(a), mode), np.correlate(v, a, mode))
    same(cr.convolve(cr.tensor([1, 2, 3]), cr.tensor([0, 1])), np.convolve([1, 2, 3], [0, 1]))
    same(cr.convolve(np.array([1.0, 2.0]), 3.0), np.convolve([1.0, 2.0], 3.0))


def test_long_inputs_use_the_fft_to_rounding_accuracy_and_keep_exact_gradients():
    rng = np.random.default_rng(6)
    a, v = rng.normal(size=3000), rng.normal(size=700)
    for mode in ("full", "same", "valid"):
        same(cr.convolve(cr.tensor(a), cr.tensor(v), mode), np.convolve(a, v, mode), rtol=1e-9, atol=1e-10)
    ta, tv = cr.tensor(a, requires_grad=True), cr.tensor(v, requires_grad=True)
    g = rng.normal(size=3000)
    cr.convolve(ta, tv, "same").backward(cr.tensor(g))
    # the transposes: with G the cotangent of the full convolution, a's gradient is G correlated
    # with v, v's is G correlated with a
    full = np.zeros(3699)
    full[349:3349] = g
    np.testing.assert_allclose(ta.grad.data, np.correlate(full, v, "valid"), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tv.grad.data, np.correlate(full, a, "valid"), rtol=1e-9, atol=1e-9)


def test_convolve_errors():
    with pytest.raises(ValueError, match="a cannot be empty"):
        cr.convolve(cr.tensor(np.zeros(0)), cr.tensor([1.0]))
    with pytest.raises(ValueError, match="mode must be one of"):
        cr.convolve(cr.tensor([1.0]), cr.tensor([1.0]), "middle")
    with pytest.raises(ValueError, match="1-D"):
        cr.correlate(cr.tensor(np.ones((2, 2))), cr.tensor([1.0]))


# ----- interpolation and integration -----
@pytest.mark.filterwarnings("ignore:invalid value encountered in remainder:RuntimeWarning")
def test_interp_matches_numpy():
    rng = np.random.default_rng(7)
    xp, fp = np.sort(rng.uniform(0, 10, 8)), rng.normal(size=8)
    x = np.concatenate([rng.uniform(-1, 11, 30), xp, [np.nan, -np.inf, np.inf]])
    for kw in ({}, {"left": -5.0}, {"right": 7.0}, {"left": 1.0, "right": 2.0}, {"period": 3.0}, {"period": -4.0}):
        same(cr.interp(cr.tensor(x), cr.tensor(xp), cr.tensor(fp), **kw), np.interp(x, xp, fp, **kw))
    same(cr.interp(cr.tensor(x), xp, fp + 2j * fp), np.interp(x, xp, fp + 2j * fp))
    same(cr.interp(cr.tensor(x), xp[:1], fp[:1]), np.interp(x, xp[:1], fp[:1]))
    dup, fdup = np.sort(np.r_[xp, xp[3]]), np.r_[fp, 1.0]
    same(cr.interp(cr.tensor(x), dup, fdup), np.interp(x, dup, fdup))
    same(cr.interp(cr.tensor(x.astype(np.float32)), xp, fp), np.interp(x.astype(np.float32), xp, fp))
    with pytest.raises(ValueError, match="period must be a non-zero value"):
        cr.interp(cr.tensor(x), xp, fp, period=0)
    with pytest.raises(ValueError, match="same length"):
        cr.interp(cr.tensor(x), xp, fp[:3])


def test_interp_gradients_at_knots_and_outside():
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0])
    # knots take the slope of the segment on their right; xp[-1] that of the last; outside: 0
    g = grad_of(lambda t: cr.interp(t, xp, fp), [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(g, [0, 2, 2, 0.5, 0.5, 0.5, 0])
    f = cr.tensor(fp, requires_grad=True)
    cr.interp(np.array([0.5, 2.0, 5.0]), xp, f).backward(cr.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(f.grad.data, [0.5, 1.0, 1.5])          # right: fp[-1]
    p = cr.tensor(xp, requires_grad=True)                                  # xp too (piecewise)
    cr.interp(np.array([0.5]), p, fp).backward(cr.tensor([1.0]))
    np.testing.assert_allclose(p.grad.data, [-1.0, -1.0, 0.0])


def test_trapezoid_matches_numpy_and_torch():
    rng = np.random.default_rng(8)
    y, x, x2 = rng.normal(size=(3, 6)), np.sort(rng.normal(size=6)), np.sort(rng.normal(size=(3, 6)), axis=1)
    same(cr.trapezoid(cr.tensor(y)), np.trapezoid(y))
    same(cr.trapezoid(cr.tensor(y), dx=0.3, axis=0), np.trapezoid(y, dx=0.3, axis=0))
    same(cr.trapezoid(cr.tensor(y), cr.tensor(x)), np.trapezoid(y, x))
    same(cr.trapezoid(cr.tensor(y), cr.tensor(x2)), np.trapezoid(y, x2))
    same(cr.trapezoid(cr.tensor(np.arange(5))), np.trapezoid(np.arange(5)))


# ----- histograms -----
def test_histogram_and_bincount_match_numpy():
    rng = np.random.default_rng(9)
    h, w = rng.normal(size=100), rng.uniform(size=100)
    for kw in ({}, {"bins": 5}, {"bins": [-1, 0, 0.5, 2]}, {"range": (-1, 1)}, {"density": True}):
        for weights in (None, w):
            got, want = cr.histogram(cr.tensor(h), weights=weights, **kw), np.histogram(h, weights=weights, **kw)
            same(got[0], want[0])
            same(got[1], want[1])
    same(cr.histogram(cr.tensor(h), bins="auto")[0], np.histogram(h, bins="auto")[0])
    same(cr.histogram_bin_edges(cr.tensor(h), "fd"), np.histogram_bin_edges(h, "fd"))
    b, bw = rng.integers(0, 6, 50), rng.normal(size=50)
    same(cr.bincount(cr.tensor(b)), np.bincount(b))
    same(cr.bincount(cr.tensor(b), cr.tensor(bw), minlength=9), np.bincount(b, bw, minlength=9))


def test_histogram_weights_are_differentiable_and_counts_are_not():
    x = cr.tensor([0.1, 0.2, 0.9, 1.5], requires_grad=True)
    counts, edges = cr.histogram(x, bins=2, range=(0, 1))
    assert not counts.requires_grad and not edges.requires_grad
    w = cr.tensor([1.0, 2.0, 3.0, 4.0], dtype=cr.float64, requires_grad=True)
    hist, _ = cr.histogram(np.array([0.1, 0.2, 0.9, 1.5]), bins=2, range=(0, 1), weights=w)
    hist.backward(cr.tensor([10.0, 100.0]))
    np.testing.assert_array_equal(w.grad.data, [10, 10, 100, 0])        # out of range: 0
    w.grad = None
    cr.bincount(np.array([2, 0, 2]), w[:3]).backward(cr.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(w.grad.data, [3, 1, 3, 0])


# ----- spaced grids -----
def test_linspace_from_plain_numbers_is_the_old_creation_function():
    out = cr.linspace(0, 1, 5)
    assert isinstance(out, cr.Tensor) and out.dtype == cr.get_default_dtype() and not out.requires_grad
    np.testing.assert_allclose(out.data, np.linspace(0, 1, 5))
    assert cr.linspace(0, 10, 3, dtype=cr.int64).dtype == np.int64
    assert cr.linspace(0.0, 1.0, 4, dtype=cr.float64).dtype == np.float64
    out, step = cr.linspace(0.0, 1.0, 5, retstep=True)
    assert step == 0.25 and isinstance(out, cr.Tensor)
    assert cr.logspace(0, 2, 3).dtype == cr.get_default_dtype()
    np.testing.assert_allclose(cr.geomspace(1, 100, 3).data, [1, 10, 100])


def test_linspace_logspace_geomspace_with_tensor_end_points_match_numpy():
    f64 = dict(dtype=cr.float64)
    for s, e, kw in ((0.0, 1.0, {}), (0.0, 1.0, {"num": 7, "endpoint": False}),
                     (np.array([0.0, 1.0]), np.array([2.0, 5.0]), {"num": 4, "axis": 1}),
                     (1.0, 1.0, {"num": 3}), (0.0, 10.0, {"num": 5, "dtype": int}), (2.0, 3.0, {"num": 1})):
        same(cr.linspace(cr.tensor(s, **f64), cr.tensor(e, **f64), **kw), np.linspace(s, e, **kw))
        same(cr.logspace(cr.tensor(s, **f64), cr.tensor(e, **f64), **kw), np.logspace(s, e, **kw))
    out, step = cr.linspace(cr.tensor(0.0, **f64), 1.0, 5, retstep=True)
    same(out, np.linspace(0.0, 1.0, 5))
    same(step, np.linspace(0.0, 1.0, 5, retstep=True)[1])
    for s, e, kw in ((1.0, 1000.0, {}), (-1.0, -1000.0, {"num": 4, "endpoint": False}),
                     (np.array([1.0, 2.0]), np.array([10.0, 3.0]), {"num": 5, "axis": -1})):
        same(cr.geomspace(cr.tensor(s, **f64), cr.tensor(e, **f64), **kw), np.geomspace(s, e, **kw))
    same(cr.logspace(cr.tensor(0.0, **f64), 2.0, 5, base=cr.tensor(2.0, **f64)), np.logspace(0.0, 2.0, 5, base=2.0))
    with pytest.raises(ValueError, match="cannot include zero"):
        cr.geomspace(cr.tensor(0.0), 1.0)


def test_grid_gradients_in_the_end_points():
    s = cr.tensor(1.0, dtype=cr.float64, requires_grad=True)
    e = cr.tensor(3.0, dtype=cr.float64, requires_grad=True)
    cr.linspace(s, e, 5).backward(cr.tensor([1.0, 0.0, 0.0, 0.0, 0.0]))
    assert float(s.grad.data) == 1.0 and float(e.grad.data) == 0.0
    s.grad = e.grad = None
    cr.linspace(s, e, 5).sum().backward()
    assert float(s.grad.data) == 2.5 and float(e.grad.data) == 2.5
    s.grad = e.grad = None
    cr.geomspace(s, e, 3).backward(cr.tensor([0.0, 1.0, 0.0]))            # sqrt(s e)
    np.testing.assert_allclose([s.grad.data, e.grad.data], [0.5 * np.sqrt(3.0), 0.5 / np.sqrt(3.0)])


# ----- dispatch, 16-bit, plain arrays -----
def test_numpy_dispatch_runs_the_chainrule_functions(data, nandata):
    t = cr.tensor(data[0], requires_grad=True)
    n = cr.tensor(nandata, requires_grad=True)
    calls = [(np.median, (t,), {"axis": 1}), (np.quantile, (t, 0.3), {"method": "hazen"}),
             (np.percentile, (t, [10, 90]), {"axis": 0}), (np.ptp, (t,), {}), (np.cov, (t,), {}),
             (np.corrcoef, (t,), {}), (np.trapezoid, (t,), {}), (np.nansum, (n,), {}), (np.nanmean, (n, 1), {}),
             (np.nanvar, (n,), {}), (np.nanstd, (n,), {}), (np.nanprod, (n,), {}), (np.nanmax, (n,), {}),
             (np.nanmin, (n,), {}), (np.nanmedian, (n,), {}), (np.nanquantile, (n, 0.5), {}),
             (np.nanpercentile, (n, 50), {}), (np.nancumsum, (n,), {}), (np.nancumprod, (n,), {}),
             (np.convolve, (t[0], t[1]), {}), (np.correlate, (t[0], t[1], "full"), {}),
             (np.interp, (t[0], [0.0, 1.0], [1.0, 2.0]), {}), (np.linspace, (t[0, 0], 2.0, 3), {}),
             (np.logspace, (t[0, 0], 2.0, 3), {}), (np.geomspace, (t[0, 0] ** 2 + 1, 2.0, 3), {})]
    for fn, args, kw in calls:
        raw = [a.data if isinstance(a, cr.Tensor) else a for a in args]
        got = fn(*args, **kw)
        assert isinstance(got, cr.Tensor) and got.requires_grad, fn.__name__
        same(got, fn(*raw, **kw))
    for fn in (np.nanargmax, np.nanargmin):
        same(fn(n, axis=0), fn(nandata, axis=0))
    same(np.histogram(t, bins=3)[0], np.histogram(data[0], bins=3)[0])
    same(np.bincount(cr.tensor([1, 1, 3])), np.bincount([1, 1, 3]))
    same(np.histogram_bin_edges(t, 4), np.histogram_bin_edges(data[0], 4))


def test_ndarrays_in_give_ndarrays_out(data):
    for out in (cr.median(data), cr.quantile(data, 0.4, axis=1), cr.nanmean(data), cr.cov(data[0]),
                cr.convolve(data[0, 0], data[0, 1]), cr.interp(data[0, 0], [0.0, 1.0], [1.0, 2.0])):
        assert not isinstance(out, cr.Tensor)


@pytest.mark.parametrize("dtype", [cr.bfloat16, cr.float16])
def test_16_bit_order_statistics(dtype):
    a = np.array([[3.0, np.nan, 1.0, 2.0], [0.5, 0.25, 4.0, 8.0]])
    t = cr.tensor(a.astype(dtype), requires_grad=True)
    out = cr.nanmedian(t, axis=1)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.data.astype(float), [2.0, 2.25])
    out.astype(cr.float32).sum().backward()
    np.testing.assert_array_equal(t.grad.data.astype(float), [[0, 0, 0, 1], [0.5, 0, 0.5, 0]])
    np.testing.assert_array_equal(cr.convolve(t[1], t[1]).data.astype(float),
                                  np.convolve(a[1], a[1]).astype(dtype).astype(float))
