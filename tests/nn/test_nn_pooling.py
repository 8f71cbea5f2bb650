"""Pooling (max, average, adaptive; 1-, 2- and 3-D): against torch in float64 (outputs, indices, input
gradients, ties), gradchecked to second order, the modules, and the errors."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.nn import pooling as NP
from chainrule.nn.functional import pooling as P

torch = pytest.importorskip("torch")
tF = torch.nn.functional
RTOL, ATOL = 1e-10, 1e-12


def _compare(ours_fn, theirs_fn, x, rng, indices=False):
    """Output (and indices), then the input gradient for a random cotangent."""
    cx, tx = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours_fn(cx), theirs_fn(tx)
    if indices:
        (out, idx), (ref, tidx) = out, ref
        assert idx.dtype == np.int64
        np.testing.assert_array_equal(idx.data, tidx.numpy())
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    g = rng.normal(size=out.shape)
    out.backward(cr.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=RTOL, atol=ATOL)


SHAPES = {1: [(2, 3, 11), (1, 1, 7), (3, 10)], 2: [(2, 3, 9, 8), (1, 1, 5, 7), (2, 7, 6)],
          3: [(1, 2, 7, 6, 5), (2, 5, 6, 7)]}
# (kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [(2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True), (2, 2, 0, 1, True),
             (3, 1, 1, 2, False), (3, 3, 1, 2, True), (4, 3, 2, 1, True), ((2, 3), (1, 2), (1, 0), (2, 1), True)]


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("case", MAX_CASES, ids=str)
def test_max_pool_matches_torch(rng, d, case):
    k, s, p, dil, ceil = case
    if np.ndim(k) and d != 2:
        k, s, p, dil = k[0], s[0], p[0], dil[0]
    for shape in SHAPES[d]:
        x = rng.normal(size=shape)
        ours, theirs = getattr(P, f"max_pool{d}d"), getattr(tF, f"max_pool{d}d")
        _compare(lambda t: ours(t, k, s, p, dil, ceil, return_indices=True),
                 lambda t: theirs(t, k, s, p, dil, ceil, return_indices=True), x, rng, indices=True)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_max_pool_ties_give_the_whole_gradient_to_the_first_maximum(rng, d):
    # relu outputs: many exact zeros, so most windows tie (torch: the first in row-major order wins)
    shape = SHAPES[d][0]
    x = np.maximum(rng.normal(size=shape), 0.0)
    x[..., :2] = 1.0
    for k, s in ((2, 1), (3, 2), (2, 2)):
        _compare(lambda t: getattr(P, f"max_pool{d}d")(t, k, s, return_indices=True),
                 lambda t: getattr(tF, f"max_pool{d}d")(t, k, s, return_indices=True), x, rng, indices=True)


def test_large_tiling_windows_keep_torchs_first_maximum(rng):
    # windows of 16+ elements that tile the input take NumPy's argmax (a global max pool, say)
    x = np.maximum(rng.normal(size=(2, 3, 8, 12)), 0)
    x[0, 0] = 0.0                                              # a whole plane of ties
    x[0, 1, :4, :4] = -np.inf
    for ours, theirs in ((lambda t: P.max_pool2d(t, 4, return_indices=True),
                          lambda t: tF.max_pool2d(t, 4, return_indices=True)),
                         (lambda t: P.adaptive_max_pool2d(t, 1, return_indices=True),
                          lambda t: tF.adaptive_max_pool2d(t, 1, return_indices=True)),
                         (lambda t: P.max_pool1d(t.reshape(2, 3, 96), 16, return_indices=True),
                          lambda t: tF.max_pool1d(t.reshape(2, 3, 96), 16, return_indices=True)),
                         (lambda t: P.max_pool3d(t.reshape(2, 3, 4, 2, 12), (2, 2, 4), return_indices=True),
                          lambda t: tF.max_pool3d(t.reshape(2, 3, 4, 2, 12), (2, 2, 4), return_indices=True))):
        _compare(ours, theirs, x, rng, indices=True)
    x[1, 2, 5, 7] = x[1, 2, 6, 1] = np.nan                      # NaN: torch's loop (the last NaN wins)
    y, i = P.adaptive_max_pool2d(cr.tensor(x), 1, return_indices=True)
    ty, ti = tF.adaptive_max_pool2d(torch.tensor(x), 1, return_indices=True)
    np.testing.assert_array_equal(y.data, ty.numpy())
    np.testing.assert_array_equal(i.data, ti.numpy())


def test_max_pool_windows_outside_the_input_are_minus_infinity_without_gradient():
    # dilation 3 with padding 1: the only window sees positions -1 and 2 of a length-2 input
    # (torch reads outside its buffer there; ours is -inf, and no gradient flows)
    x = cr.tensor([[[1.0, 2.0]]], requires_grad=True)
    y, i = P.max_pool1d(x, 2, 1, padding=1, dilation=3, return_indices=True)
    np.testing.assert_array_equal(y.data, [[[-np.inf]]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [[[0.0, 0.0]]])


def test_max_pool_nan_and_minus_infinity_follow_torch(rng):
    x = np.array([[[1.0, np.nan, np.nan, 2.0, -np.inf, -np.inf, 3.0]]])
    for args in ((4, 4, 0, 1, True), (2, 2, 1, 1, False), (3, 1, 1, 1, False)):
        y, i = P.max_pool1d(cr.tensor(x), *args, return_indices=True)
        ty, ti = tF.max_pool1d(torch.tensor(x), *args, return_indices=True)
        np.testing.assert_array_equal(y.data, ty.numpy())
        np.testing.assert_array_equal(i.data, ti.numpy())
    x = np.full((1, 1, 3), -np.inf)                          # all -inf: the first element inside the input
    cx, tx = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    P.max_pool1d(cx, 2, 2, 1).sum().backward()
    tF.max_pool1d(tx, 2, 2, 1).sum().backward()
    np.testing.assert_array_equal(cx.grad.data, tx.grad.numpy())


# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [(2, None, 0, False, True, None), (3, 2, 1, False, True, None), (3, 2, 1, True, True, None),
             (3, 2, 1, True, False, None), (3, 2, 1, False, False, None), (2, 2, 1, True, False, None),
             (4, 3, 2, True, True, None), (3, 1, 1, False, False, 5), (2, 1, 0, True, True, 3),
             ((2, 3), (2, 1), (1, 1), True, False, None)]


@pytest.mark.parametrize("d, case", [(d, case) for d in (1, 2, 3) for case in AVG_CASES
                                     if not (d == 1 and case[5] is not None)],   # avg_pool1d: no divisor_override
                         ids=str)
def test_avg_pool_matches_torch(rng, d, case):
    k, s, p, ceil, cip, div = case
    if np.ndim(k) and d != 2:
        k, s, p = k[0], s[0], p[0]
    extra = {} if d == 1 else {"divisor_override": div}
    for shape in SHAPES[d]:
        x = rng.normal(size=shape)
        ours, theirs = getattr(P, f"avg_pool{d}d"), getattr(tF, f"avg_pool{d}d")
        _compare(lambda t: ours(t, k, s, p, ceil, cip, **extra),
                 lambda t: theirs(t, k, s, p, ceil, cip, **extra), x, rng)


ADAPTIVE_SIZES = {1: [(11, 4), (7, 7), (8, 4), (5, 1), (3, 5)],
                  2: [((9, 8), (4, 3)), ((7, 6), 1), ((5, 7), (None, 3)), ((6, 4), (3, 2)), ((3, 2), (5, 4))],
                  3: [((7, 6, 5), (3, 2, 4)), ((4, 4, 4), 2), ((5, 6, 7), (None, 4, 1))]}


@pytest.mark.parametrize("d", [1, 2, 3])
def test_adaptive_avg_pool_matches_torch(rng, d):
    for spatial, out in ADAPTIVE_SIZES[d]:
        spatial = (spatial,) if d == 1 else spatial
        for lead in ((2, 3), (1, 1), (3,)):
            x = rng.normal(size=lead + spatial)
            _compare(lambda t: getattr(P, f"adaptive_avg_pool{d}d")(t, out),
                     lambda t: getattr(tF, f"adaptive_avg_pool{d}d")(t, out), x, rng)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_adaptive_max_pool_matches_torch(rng, d):
    for spatial, out in ADAPTIVE_SIZES[d]:
        spatial = (spatial,) if d == 1 else spatial
        for lead in ((2, 3), (1, 1), (3,)):
            for x in (rng.normal(size=lead + spatial), np.maximum(rng.normal(size=lead + spatial), 0)):
                _compare(lambda t: getattr(P, f"adaptive_max_pool{d}d")(t, out, return_indices=True),
                         lambda t: getattr(tF, f"adaptive_max_pool{d}d")(t, out, return_indices=True),
                         x, rng, indices=True)


# ----- second order, forward mode -----
def t64(rng, *shape):
    return cr.tensor(rng.normal(size=shape), dtype=cr.float64, requires_grad=True)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: P.max_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 2, 5, 5)),
    (lambda x: P.max_pool1d(x, 2, 1, dilation=2), (2, 2, 7)),
    (lambda x: P.max_pool3d(x, 2, 1), (1, 2, 3, 3, 3)),
    (lambda x: P.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 2, 5, 5)),
    (lambda x: P.avg_pool2d(x, 2), (2, 2, 5, 5)),
    (lambda x: P.avg_pool3d(x, 2, 1, 1, divisor_override=3), (1, 2, 3, 3, 3)),
    (lambda x: P.adaptive_avg_pool2d(x, (3, 2)), (2, 2, 5, 5)),
    (lambda x: P.adaptive_max_pool2d(x, (2, 3)), (2, 2, 5, 5)),
], ids=["max2d", "max1d", "max3d", "avg2d", "avg2d-tiled", "avg3d", "adaptive-avg", "adaptive-max"])
def test_pools_gradcheck_to_second_order(rng, fn, shape):
    x = t64(rng, *shape)
    assert cr.gradcheck(fn, (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, (x,))


def test_pools_under_vmap_match_the_loop(rng):
    x = rng.normal(size=(4, 2, 6, 5))
    for fn in (lambda t: P.max_pool2d(t, 2, 1, return_indices=True)[0],
               lambda t: P.adaptive_max_pool2d(t, (3, 2)), lambda t: P.avg_pool2d(t, 3, 2, 1)):
        batched = cr.vmap(fn)(cr.tensor(x))
        for b in range(4):
            np.testing.assert_allclose(batched.data[b], fn(cr.tensor(x[b])).data, rtol=RTOL)
    nested = rng.normal(size=(2, 3, 1, 2, 5, 4))          # two levels: the indices, one per example
    idx = cr.vmap(cr.vmap(lambda t: P.max_pool2d(t, 2, 1, return_indices=True)[1]))(cr.tensor(nested))
    assert idx.dtype == np.int64
    for a in range(2):
        for b in range(3):
            np.testing.assert_array_equal(idx.data[a, b], P.max_pool2d(cr.tensor(nested[a, b]), 2, 1,
                                                                      return_indices=True)[1].data)
    g = cr.vmap(cr.func.grad(lambda t: P.max_pool2d(t, 2).sum()))(cr.tensor(x))
    tx = torch.tensor(x, requires_grad=True)
    tF.max_pool2d(tx, 2).sum().backward()
    np.testing.assert_allclose(g.data, tx.grad.numpy())


# ----- integer max pools, dtypes -----
def test_max_pool_keeps_integer_dtypes():
    x = cr.tensor(np.arange(12, dtype=np.int32).reshape(1, 1, 3, 4))
    y, i = P.max_pool2d(x, 2, return_indices=True)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y.data, [[[[5, 7]]]])
    np.testing.assert_array_equal(i.data, [[[[5, 7]]]])


def test_float32_stays_float32(rng):
    x = cr.tensor(rng.normal(size=(1, 2, 6, 6)).astype(np.float32))
    for fn in (lambda t: P.max_pool2d(t, 2), lambda t: P.avg_pool2d(t, 3, 2, 1, divisor_override=2),
               lambda t: P.adaptive_avg_pool2d(t, 4)):
        assert fn(x).dtype == np.float32


# ----- modules -----
MODULES = [
    ("MaxPool1d", dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True), (2, 3, 9)),
    ("MaxPool2d", dict(kernel_size=(2, 3), stride=1, padding=1, dilation=(1, 2)), (2, 3, 7, 8)),
    ("MaxPool3d", dict(kernel_size=2), (1, 2, 4, 5, 6)),
    ("AvgPool1d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (2, 3, 8)),
    ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, divisor_override=4), (2, 3, 7, 7)),
    ("AvgPool3d", dict(kernel_size=(1, 2, 2)), (1, 2, 3, 4, 4)),
    ("AdaptiveAvgPool1d", dict(output_size=3), (2, 3, 7)),
    ("AdaptiveAvgPool2d", dict(output_size=(3, None)), (2, 3, 7, 5)),
    ("AdaptiveAvgPool3d", dict(output_size=2), (1, 2, 5, 4, 3)),
    ("AdaptiveMaxPool1d", dict(output_size=3), (2, 3, 7)),
    ("AdaptiveMaxPool2d", dict(output_size=(3, 2)), (2, 7, 5)),
    ("AdaptiveMaxPool3d", dict(output_size=2), (1, 2, 5, 4, 3)),
]


@pytest.mark.parametrize("name,kwargs,shape", MODULES, ids=[m[0] for m in MODULES])
def test_pool_modules_match_torch(rng, name, kwargs, shape):
    ours, theirs = getattr(NP, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    _compare(ours, theirs, rng.normal(size=shape), rng)
    assert list(ours.state_dict()) == [] and repr(ours).startswith(name)
    for attr in kwargs:
        assert getattr(ours, attr) == getattr(theirs, attr), attr


def test_pool_modules_return_indices(rng):
    x = rng.normal(size=(2, 3, 7, 6))
    for name, kw in (("MaxPool2d", dict(kernel_size=3, stride=2, ceil_mode=True)),
                     ("AdaptiveMaxPool2d", dict(output_size=(3, 4)))):
        _compare(getattr(NP, name)(return_indices=True, **kw), getattr(torch.nn, name)(return_indices=True, **kw),
                 x, rng, indices=True)


def test_module_defaults_are_torchs():
    m = NP.MaxPool2d(3)
    assert (m.stride, m.padding, m.dilation, m.ceil_mode, m.return_indices) == (3, 0, 1, False, False)
    assert repr(m) == repr(torch.nn.MaxPool2d(3))
    a = NP.AvgPool2d(2)
    assert (a.stride, a.ceil_mode, a.count_include_pad, a.divisor_override) == (2, False, True, None)
    assert repr(a) == repr(torch.nn.AvgPool2d(2))
    assert repr(NP.AdaptiveAvgPool2d((2, None))) == repr(torch.nn.AdaptiveAvgPool2d((2, None)))


# ----- errors -----
def test_errors_name_the_function_and_the_fix():
    with pytest.raises(ValueError, match=r"max_pool2d: padding should be at most half of kernel.*kernel_size // 2"):
        P.max_pool2d(cr.ones((1, 1, 5, 5)), 2, padding=2)
    with pytest.raises(ValueError, match="avg_pool1d: padding should be at most half"):
        P.avg_pool1d(cr.ones((1, 1, 5)), 3, padding=2)
    with pytest.raises(cr.ShapeError, match=r"max_pool1d: input of spatial size \(5,\) is too small.*would be \(0,\)"):
        P.max_pool1d(cr.ones((1, 1, 5)), 7)
    with pytest.raises(cr.ShapeError, match=r"avg_pool2d: expected input of shape \(N, C, H, W\) or \(C, H, W\)"):
        P.avg_pool2d(cr.ones((4, 4)), 2)
    with pytest.raises(cr.ShapeError, match=r"max_pool3d: expected input of shape \(N, C, D, H, W\)"):
        P.max_pool3d(cr.ones((2, 2, 2)), 2)
    with pytest.raises(ValueError, match="stride must be positive"):
        P.max_pool2d(cr.ones((1, 1, 4, 4)), 2, stride=0)
    with pytest.raises(ValueError, match="max_pool2d: kernel_size must be an int or 2 ints"):
        P.max_pool2d(cr.ones((1, 1, 4, 4)), (2, 2, 2))
    with pytest.raises(cr.ShapeError, match="adaptive_avg_pool2d: output_size .* must be positive"):
        P.adaptive_avg_pool2d(cr.ones((1, 1, 4, 4)), (0, 2))
    with pytest.raises(cr.DTypeError, match="avg_pool2d: expected a floating-point input"):
        P.avg_pool2d(cr.tensor(np.ones((1, 1, 4, 4), dtype=np.int64)), 2)
    with pytest.raises(ValueError, match="divisor_override must be non-zero"):
        P.avg_pool2d(cr.ones((1, 1, 4, 4)), 2, divisor_override=0)


# ----- 1-element tuples: the same for every axis (torch's pools and F.conv*; not Conv's kernel_size) -----
@pytest.mark.parametrize("d", [1, 2, 3])
def test_one_element_tuples_are_for_every_axis(rng, d):
    x = rng.normal(size=(2, 3) + (7,) * d)
    fn, tfn = getattr(P, f"max_pool{d}d"), getattr(tF, f"max_pool{d}d")
    _compare(lambda v: fn(v, (3,), (2,), (1,), (2,)), lambda v: tfn(v, (3,), (2,), (1,), (2,)), x, rng)
    fn, tfn = getattr(P, f"avg_pool{d}d"), getattr(tF, f"avg_pool{d}d")
    _compare(lambda v: fn(v, [3], (2,), (1,)), lambda v: tfn(v, [3], (2,), (1,)), x, rng)
    for name in ("MaxPool", "AvgPool"):
        ours = getattr(NP, f"{name}{d}d")((3,), stride=(2,))
        theirs = getattr(torch.nn, f"{name}{d}d")((3,), stride=(2,))
        assert repr(ours) == repr(theirs)
        _compare(ours, theirs, x, rng)


def test_conv_takes_one_element_stride_padding_dilation_but_not_kernel(rng):
    x, w = rng.normal(size=(1, 2, 7, 7)), rng.normal(size=(3, 2, 3, 3))
    ours = cr.nn.functional.conv2d(cr.tensor(x), cr.tensor(w), stride=(2,), padding=(1,), dilation=(2,))
    ref = tF.conv2d(torch.tensor(x), torch.tensor(w), stride=(2,), padding=(1,), dilation=(2,))
    np.testing.assert_allclose(ours.data, ref.numpy(), rtol=RTOL, atol=ATOL)
    wt = rng.normal(size=(2, 3, 3, 3))
    ours = cr.nn.functional.conv_transpose2d(cr.tensor(x), cr.tensor(wt), stride=(2,), padding=(1,),
                                             output_padding=(1,))
    ref = tF.conv_transpose2d(torch.tensor(x), torch.tensor(wt), stride=(2,), padding=(1,), output_padding=(1,))
    np.testing.assert_allclose(ours.data, ref.numpy(), rtol=RTOL, atol=ATOL)
    m = cr.nn.Conv2d(2, 3, 3, stride=(2,), padding=(1,))
    assert (m.stride, m.padding) == ((2, 2), (1, 1))
    with pytest.raises(ValueError, match=r"Conv2d: kernel_size must be an int or 2 ints, got \(3,\)"):
        cr.nn.Conv2d(2, 3, (3,))                                 # torch refuses it too
    with pytest.raises(ValueError, match=r"max_pool2d: stride must be an int or 2 ints \(or one int in a "
                                         r"sequence, for every axis\), got \(1, 2, 3\)"):
        P.max_pool2d(cr.ones((1, 1, 4, 4)), 2, stride=(1, 2, 3))
    with pytest.raises(ValueError, match=r"unfold: kernel_size must be an int or 2 ints, got \(3,\)"):
        cr.nn.functional.unfold(cr.ones((1, 1, 4, 4)), (3,))     # as torch's: unfold takes no 1-tuple
