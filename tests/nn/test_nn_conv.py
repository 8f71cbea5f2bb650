"""Convolutions and F.pad against torch.nn in float64: outputs, input, weight and bias gradients for
1-/2-/3-d, strides, paddings (ints, tuples, "same", "valid"), dilations, groups, every padding_mode,
transposed convolutions with output_padding and output_size=; modules loaded from torch's state_dict;
second derivatives, cr.vmap and the error messages."""
import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RTOL, ATOL = 1e-10, 1e-12


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)


def _compare(cr_fn, torch_fn, shapes, rng):
    """cr_fn and torch_fn on the same float64 inputs: the outputs and every input's gradient."""
    datas = [rng.standard_normal(s) for s in shapes]
    xs = [cr.tensor(d, dtype=cr.float64, requires_grad=True) for d in datas]
    txs = [torch.tensor(d, requires_grad=True) for d in datas]
    out, tout = cr_fn(*xs), torch_fn(*txs)
    assert out.shape == tuple(tout.shape)
    _close(out.data, tout.detach().numpy())
    v = rng.standard_normal(out.shape)
    out.backward(cr.tensor(v))
    tout.backward(torch.tensor(v))
    for x, tx in zip(xs, txs):
        _close(x.grad.data, tx.grad.numpy())


CONV_CASES = [
    (1, (3, 4, 11), (5, 4, 3), dict(stride=2, padding=1)),
    (1, (2, 2, 9), (3, 2, 3), dict(padding="same")),
    (1, (2, 2, 9), (3, 2, 4), dict(padding="same", dilation=2)),          # even kernel: odd pad after
    (1, (2, 2, 9), (3, 2, 4), dict(padding="valid", stride=2)),
    (2, (2, 3, 7, 8), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1))),
    (2, (2, 4, 6, 7), (6, 2, 3, 3), dict(groups=2, padding=1, stride=2)),
    (2, (2, 3, 6, 5), (6, 1, 3, 3), dict(groups=3, padding=1)),            # depthwise, multiplier 2
    (2, (1, 3, 7, 5), (2, 3, 2, 4), dict(padding="same", dilation=(2, 1))),  # batch 1, odd sizes
    (2, (3, 6, 6), (4, 3, 3, 3), dict(padding=1)),                          # unbatched
    (2, (2, 3, 18, 17), (4, 3, 3, 2), dict(padding=1)),                     # >= 256 outputs: a GEMM each
    (2, (1, 4, 20, 20), (4, 2, 3, 3), dict(groups=2, dilation=(1, 2))),
    (3, (2, 2, 5, 4, 6), (3, 2, 3, 2, 3), dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(1, 1, 2))),
    (3, (2, 4, 4, 4, 4), (4, 2, 2, 2, 2), dict(groups=2, padding="same")),
]


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")
@pytest.mark.parametrize("nd, xs, ws, kw", CONV_CASES)
def test_conv_matches_torch(nd, xs, ws, kw, rng):
    name = f"conv{nd}d"
    _compare(lambda x, w, b: getattr(F, name)(x, w, b, **kw),
             lambda x, w, b: getattr(TF, name)(x, w, b, **kw), (xs, ws, (ws[0],)), rng)


TRANSPOSE_CASES = [
    (1, (2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (1, (2, 4, 5), (4, 1, 2), dict(groups=2, dilation=3)),
    (2, (2, 4, 3, 4), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2,
                                         dilation=2)),
    (2, (1, 3, 5, 4), (3, 2, 3, 3), dict(stride=1, padding=2)),
    (2, (3, 4, 4), (3, 2, 3, 3), dict(stride=2)),                                         # unbatched
    (3, (1, 2, 3, 2, 3), (2, 3, 2, 3, 2), dict(stride=2, padding=1, output_padding=(1, 0, 1))),
]


@pytest.mark.parametrize("nd, xs, ws, kw", TRANSPOSE_CASES)
def test_conv_transpose_matches_torch(nd, xs, ws, kw, rng):
    name = f"conv_transpose{nd}d"
    cout = ws[1] * kw.get("groups", 1)
    _compare(lambda x, w, b: getattr(F, name)(x, w, b, **kw),
             lambda x, w, b: getattr(TF, name)(x, w, b, **kw), (xs, ws, (cout,)), rng)


def test_functional_argument_order_is_torchs():
    # conv_transpose: (input, weight, bias, stride, padding, output_padding, groups, dilation)
    x, w = cr.ones((1, 2, 3, 3)), cr.ones((2, 1, 2, 2))
    tx, tw = torch.ones(1, 2, 3, 3), torch.ones(2, 1, 2, 2)
    _close(F.conv_transpose2d(x, w, None, 2, 1, 1, 2, 1).data, TF.conv_transpose2d(tx, tw, None, 2, 1, 1, 2, 1))
    _close(F.conv2d(x, w.reshape(1, 2, 2, 2), None, 1, 1, 2, 1).data,
           TF.conv2d(tx, tw.reshape(1, 2, 2, 2), None, 1, 1, 2, 1))


# ----- modules: torch's weights, padding modes, output_size, init, repr -----
def _module_pair(name, args, kw):
    tmod = getattr(torch.nn, name)(*args, **kw).double()
    mod = getattr(nn, name)(*args, **kw, dtype=cr.float64)
    mod.load_state_dict({k: cr.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()})
    assert list(mod.state_dict()) == list(tmod.state_dict())
    return mod, tmod


MODULE_CASES = [
    ("Conv1d", (4, 6, 3), dict(padding="same", padding_mode="reflect", groups=2), (2, 4, 9)),
    ("Conv1d", (3, 2, 4), dict(padding=2, padding_mode="circular", bias=False), (3, 8)),
    ("Conv2d", (3, 4, (3, 2)), dict(padding=(1, 2), padding_mode="replicate", stride=2), (2, 3, 7, 6)),
    ("Conv2d", (3, 4, 4), dict(padding="same", padding_mode="reflect", dilation=(1, 2)), (2, 3, 9, 9)),
    ("Conv2d", (3, 4, 3), dict(padding=1, padding_mode="circular"), (1, 3, 5, 6)),
    ("Conv2d", (2, 4, 3), dict(padding="valid", padding_mode="zeros", dilation=2), (2, 2, 7, 7)),
    ("Conv3d", (2, 2, 3), dict(padding=1, padding_mode="circular"), (1, 2, 4, 3, 5)),
    ("Conv3d", (2, 4, 2), dict(padding="same", padding_mode="replicate", groups=2), (2, 4, 4, 3)),
    ("ConvTranspose1d", (4, 2, 3), dict(stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5)),
    ("ConvTranspose2d", (3, 4, (2, 3)), dict(stride=(2, 1), dilation=(1, 2), bias=False), (2, 3, 4, 5)),
    ("ConvTranspose3d", (2, 2, 2), dict(stride=2, padding=(0, 1, 0)), (1, 2, 2, 3, 2)),
]


@pytest.mark.parametrize("name, args, kw, shape", MODULE_CASES)
def test_module_matches_torch_after_loading_its_state_dict(name, args, kw, shape, rng):
    mod, tmod = _module_pair(name, args, kw)
    data = rng.standard_normal(shape)
    x, tx = cr.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    out, tout = mod(x), tmod(tx)
    _close(out.data, tout.detach().numpy())
    v = rng.standard_normal(out.shape)
    out.backward(cr.tensor(v))
    tout.backward(torch.tensor(v))
    _close(x.grad.data, tx.grad.numpy())
    for p, tp in zip(mod.parameters(), tmod.parameters()):
        _close(p.grad.data, tp.grad.numpy())
    assert repr(mod) == repr(tmod)


@pytest.mark.parametrize("name, size", [("ConvTranspose1d", (12,)), ("ConvTranspose2d", (2, 2, 12, 11)),
                                        ("ConvTranspose3d", (12, 11, 6))])
def test_transposed_output_size(name, size, rng):
    nd = int(name[-2])
    mod, tmod = _module_pair(name, (2, 3, 3), dict(stride=(2, 3, 2)[:nd], padding=1))
    data = rng.standard_normal((2, 2) + (6, 4, 3)[:nd])
    out, tout = mod(cr.tensor(data), output_size=size), tmod(torch.tensor(data), output_size=size)
    assert out.shape == tuple(tout.shape)
    _close(out.data, tout.detach().numpy())
    with pytest.raises(ValueError, match=rf"{name}: requested an output size"):
        mod(cr.tensor(data), output_size=tuple(s + 5 for s in size))


@pytest.mark.parametrize("name, args, fan_in", [("Conv2d", (6, 9, 3), 2 * 9), ("Conv1d", (4, 4, 5), 4 * 5),
                                                ("ConvTranspose2d", (64, 6, 3), 3 * 9),
                                                ("ConvTranspose3d", (5, 4, 2), 4 * 8)])
def test_kaiming_uniform_initialisation(name, args, fan_in):
    groups = 3 if name == "Conv2d" else (2 if name == "ConvTranspose2d" else 1)
    mod = getattr(nn, name)(*args, groups=groups, generator=np.random.default_rng(0))
    bound = 1 / np.sqrt(fan_in)
    tmod = getattr(torch.nn, name)(*args, groups=groups)
    assert mod.weight.shape == tuple(tmod.weight.shape)
    for p in (mod.weight, mod.bias):
        a = np.abs(p.data)
        assert a.max() <= bound and (p is mod.bias or a.max() > 0.9 * bound)
    assert np.abs(tmod.weight.detach().numpy()).max() <= bound       # torch's bound is the same


def test_reprs_match_torch():
    for name, args, kw in [("Conv1d", (3, 4, 3), {}), ("Conv2d", (2, 4, 3), dict(stride=2, padding=1, groups=2)),
                           ("Conv3d", (2, 2, 3), dict(padding="valid", bias=False)),
                           ("ConvTranspose2d", (3, 4, 3), dict(stride=2, output_padding=1, dilation=2))]:
        assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw))


# ----- derivatives to any order, vmap, low precision -----
def test_gradgradcheck_conv_and_transposed(rng):
    x, w = [cr.tensor(rng.standard_normal(s), requires_grad=True) for s in ((1, 2, 5, 4), (2, 1, 2, 3))]
    assert cr.gradgradcheck(lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=1, groups=2), (x, w))
    a, v = [cr.tensor(rng.standard_normal(s), requires_grad=True) for s in ((1, 2, 3, 2), (2, 2, 2, 2))]
    assert cr.gradgradcheck(lambda a, v: F.conv_transpose2d(a, v, stride=2, padding=1, output_padding=1), (a, v))
    assert cr.gradcheck(lambda a, v: F.conv_transpose2d(a, v, dilation=2), (a, v), modes=("rev", "fwd"))


def test_third_derivative_is_exact(rng):
    # f(w) = sum(conv(x, w)^3): its third derivative along u is 6 sum(conv(x, u)^3), by bilinearity
    x, w, u = (rng.standard_normal(s) for s in ((1, 1, 6), (1, 1, 3), (1, 1, 3)))
    f = lambda w: (F.conv1d(cr.tensor(x), w) ** 3).sum()         # noqa: E731
    d1 = lambda w: cr.jvp(f, (w,), (cr.tensor(u),))[1]           # noqa: E731
    d2 = lambda w: cr.jvp(d1, (w,), (cr.tensor(u),))[1]          # noqa: E731
    d3 = cr.grad(d2)(cr.tensor(w))
    expected = 6 * np.sum(TF.conv1d(torch.tensor(x), torch.tensor(u)).numpy() ** 3)
    np.testing.assert_allclose(float((d3 * cr.tensor(u)).sum()), expected, rtol=1e-10)


def test_vmap_over_a_conv_equals_the_loop(rng):
    xs, ws = rng.standard_normal((4, 2, 3, 6, 5)), rng.standard_normal((4, 6, 1, 3, 3))
    b = cr.tensor(rng.standard_normal(6))
    shared = cr.tensor(ws[0])
    got = cr.vmap(lambda x: F.conv2d(x, shared, b, padding=1, groups=3))(cr.tensor(xs))
    _close(got.data, np.stack([F.conv2d(cr.tensor(x), shared, b, padding=1, groups=3).data for x in xs]))
    per_example = cr.vmap(lambda x, w: F.conv2d(x, w, stride=2, groups=3))(cr.tensor(xs), cr.tensor(ws))
    _close(per_example.data, np.stack([F.conv2d(cr.tensor(x), cr.tensor(w), stride=2, groups=3).data
                                       for x, w in zip(xs, ws)]))
    # per-example weight gradients through vmap(grad)
    grads = cr.vmap(cr.grad(lambda w, x: (F.conv_transpose2d(x, w, stride=2) ** 2).sum()))(
        cr.tensor(rng.standard_normal((4, 3, 2, 2, 2))), cr.tensor(xs))
    assert grads.shape == (4, 3, 2, 2, 2)


def test_low_precision_accumulates_in_float32(rng):
    x, w = rng.standard_normal((1, 8, 6, 6)), rng.standard_normal((4, 8, 3, 3))
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    ref = F.conv2d(cr.tensor(x16.astype(np.float64)), cr.tensor(w16.astype(np.float64)))
    out = F.conv2d(cr.tensor(x16), cr.tensor(w16))
    assert out.dtype == cr.float16
    np.testing.assert_allclose(out.data.astype(np.float64), ref.data, rtol=2e-3, atol=2e-3)
    with cr.autocast(cr.bfloat16):
        assert F.conv2d(cr.tensor(x.astype(np.float32)), cr.tensor(w.astype(np.float32))).dtype == cr.bfloat16


# ----- errors name the function and the fix -----
def test_errors_name_the_function_and_the_fix():
    with pytest.raises(cr.ShapeError, match=r"conv2d: given groups=1, .* to have 3 channels, but got 5; set in_ch"):
        F.conv2d(cr.ones((1, 5, 6, 6)), cr.ones((4, 3, 3, 3)))
    with pytest.raises(ValueError, match=r"conv2d: groups=3 must be positive and divide"):
        F.conv2d(cr.ones((1, 6, 6, 6)), cr.ones((4, 2, 3, 3)), groups=3)
    with pytest.raises(ValueError, match=r"Conv2d: in_channels=5 must be divisible by groups=2"):
        nn.Conv2d(5, 4, 3, groups=2)
    with pytest.raises(cr.ShapeError, match=r"Conv3d: kernel \(3, 3, 3\) .* larger than the padded .*smaller kernel"):
        nn.Conv3d(1, 1, 3)(cr.ones((1, 1, 2, 4, 4)))
    with pytest.raises(ValueError, match=r"conv1d: padding='same' is not supported for strided .* stride=1"):
        F.conv1d(cr.ones((1, 1, 6)), cr.ones((1, 1, 3)), stride=2, padding="same")
    with pytest.raises(ValueError, match=r"Conv2d: padding='same' is not supported for strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"Conv2d: padding_mode must be one of \['zeros', 'reflect', 'replicate'"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match=r'ConvTranspose2d: only "zeros" padding mode'):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match=r"conv_transpose1d: output_padding \(2,\) must be smaller than either stride"):
        F.conv_transpose1d(cr.ones((1, 1, 3)), cr.ones((1, 1, 3)), stride=2, output_padding=2)
    with pytest.raises(cr.ShapeError, match=r"conv2d: expected input of shape \(N, C, H, W\) or unbatched"):
        F.conv2d(cr.ones((6, 6)), cr.ones((1, 1, 3, 3)))
    with pytest.raises(ValueError, match=r"conv2d: invalid padding string 'full'"):
        F.conv2d(cr.ones((1, 1, 6, 6)), cr.ones((1, 1, 3, 3)), padding="full")


# ----- F.pad -----
PAD_CASES = [
    ("constant", (2, 3, 4), (1, 2)),
    ("constant", (2, 3, 4, 5), (1, -2, 0, 1, -1, 2)),          # negative pads crop
    ("reflect", (2, 3, 5), (2, 4)),
    ("reflect", (2, 3, 4, 5), (1, -2, 3, 2)),
    ("replicate", (3, 4, 5), (3, 1, 0, 6)),
    ("replicate", (1, 2, 3, 4, 5), (1, 2, -1, 1, 2, 0)),
    ("circular", (2, 2, 5), (-1, 2)),
    ("circular", (2, 3, 4, 5), (2, 5, 4, 1)),
]


@pytest.mark.parametrize("mode, shape, pad", PAD_CASES)
def test_pad_matches_torch(mode, shape, pad, rng):
    _compare(lambda x: F.pad(x, pad, mode=mode), lambda x: TF.pad(x, pad, mode=mode), (shape,), rng)


def test_pad_value_and_errors(rng):
    _compare(lambda x: F.pad(x, (1, 1, 2, 0), value=2.5), lambda x: TF.pad(x, (1, 1, 2, 0), value=2.5), ((2, 3),), rng)
    assert cr.gradgradcheck(lambda x: F.pad(x, (2, 1), mode="reflect") ** 2, (cr.tensor(rng.standard_normal((1, 4)),
                                                                                         requires_grad=True),))
    with pytest.raises(cr.ShapeError, match=r"pad: reflect padding \(4, 0\) must be less than the axis' size 4"):
        F.pad(cr.ones((1, 4)), (4, 0), mode="reflect")
    with pytest.raises(cr.ShapeError, match=r"pad: circular padding .* wraps around more than once"):
        F.pad(cr.ones((1, 4)), (5, 0), mode="circular")
    with pytest.raises(cr.ShapeError, match=r"pad: mode 'replicate' pads the last 1, 2 or 3 axes"):
        F.pad(cr.ones((1, 2, 4, 4)), (1, 1), mode="replicate")
    with pytest.raises(ValueError, match=r"pad: mode 'reflect' doesn't take a value"):
        F.pad(cr.ones((1, 4)), (1, 1), mode="reflect", value=0.0)
    with pytest.raises(ValueError, match=r"pad: pad must be an even number of ints"):
        F.pad(cr.ones((1, 4)), (1, 1, 2))


def test_results_do_not_share_the_kernels_work_arrays(rng):
    # the kernels reuse per-thread scratch arrays: what they return must be fresh, in every layout
    from concurrent.futures import ThreadPoolExecutor
    for shape in ((1, 2, 6, 6), (1, 2, 20, 20), (3, 2, 20, 20)):
        x, w = rng.standard_normal(shape), rng.standard_normal((3, 2, 3, 3))
        first = F.conv2d(cr.tensor(x), cr.tensor(w))
        up = F.conv_transpose2d(cr.tensor(first.data), cr.tensor(w))
        kept = first.data.copy(), up.data.copy()
        F.conv2d(cr.tensor(2 * x), cr.tensor(w))
        F.conv_transpose2d(cr.tensor(2 * first.data), cr.tensor(w))
        np.testing.assert_array_equal(first.data, kept[0])
        np.testing.assert_array_equal(up.data, kept[1])
    xs = [rng.standard_normal((2, 2, 24, 24)) for _ in range(8)]
    w = cr.tensor(rng.standard_normal((3, 2, 3, 3)))
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda x: F.conv2d(cr.tensor(x), w, padding=1).data, xs))
    for x, got in zip(xs, together):
        np.testing.assert_array_equal(got, F.conv2d(cr.tensor(x), w, padding=1).data)


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")
@pytest.mark.parametrize("per_example, limit", [(1, 1 << 26), (10 ** 9, 0)], ids=["per-example-gemms", "no-scratch"])
def test_every_kernel_layout_matches_torch(per_example, limit, monkeypatch, rng):
    # the other kernel paths than the shapes above pick: a GEMM per example at any size, or one GEMM for
    # all, and work arrays allocated per call
    from chainrule.ops import conv as C
    monkeypatch.setattr(C, "_PER_EXAMPLE", per_example)
    monkeypatch.setattr(C, "_SCRATCH_LIMIT", limit)
    for nd, xs, ws, kw in CONV_CASES[::3]:
        _compare(lambda x, w, b: getattr(F, f"conv{nd}d")(x, w, b, **kw),
                 lambda x, w, b: getattr(TF, f"conv{nd}d")(x, w, b, **kw), (xs, ws, (ws[0],)), rng)
    for nd, xs, ws, kw in TRANSPOSE_CASES[::2]:
        cout = ws[1] * kw.get("groups", 1)
        _compare(lambda x, w, b: getattr(F, f"conv_transpose{nd}d")(x, w, b, **kw),
                 lambda x, w, b: getattr(TF, f"conv_transpose{nd}d")(x, w, b, **kw), (xs, ws, (cout,)), rng)
