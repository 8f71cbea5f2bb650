"""The conv kernels' chunked im2col (a few examples at a time) and padded rows give the values of a
whole-batch im2col and of torch."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.ops import conv as C

P1 = ((1, 1), (1, 1))


def _params(**kw):
    return dict(dict(stride=(1, 1), dilation=(1, 1), groups=1, padding=P1), **kw)


@pytest.mark.parametrize("shape, dtype", [((2, 3, 32, 32), np.float32),     # rows of 4 KiB: padded
                                          ((2, 3, 16, 16), np.float64),     # 2 KiB: padded
                                          ((8, 3, 8, 8), np.float32),       # one GEMM over N * 64: 2 KiB
                                          ((2, 3, 64, 64), np.float32),     # 16 KiB: not padded
                                          ((5, 3, 20, 20), np.float64)])    # not padded
@pytest.mark.parametrize("chunk", [1, 1 << 20])                             # one example / several at a time
def test_against_torch(shape, dtype, chunk, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(C, "_CHUNK_BYTES", chunk)
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((6, 3, 3, 3)).astype(dtype)
    p = _params()
    y = C._conv_forward(x, w, **p)
    a = rng.standard_normal(y.shape).astype(dtype)
    dw = C._conv_weight_forward(x, a, **p)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(a))
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol * np.abs(y).max())
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=tol, atol=tol * np.abs(dw).max())


@pytest.mark.parametrize("kw", [dict(groups=2), dict(stride=(2, 1), padding=((1, 0), (1, 1))),
                                dict(dilation=(2, 2), padding=((2, 2), (2, 2)))])
def test_chunk_size_does_not_change_values(kw, monkeypatch):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((7, 4, 34, 33))
    w = rng.standard_normal((6, 4 // kw.get("groups", 1), 3, 3))
    p = _params(**kw)
    results = []
    for chunk in (1, 3 * 36 * 1024 * 8, 1 << 30):            # 1, a few, all examples per chunk
        monkeypatch.setattr(C, "_CHUNK_BYTES", chunk)
        y = C._conv_forward(x, w, **p)
        a = np.cos(y)
        results.append((y, C._conv_weight_forward(x, a, **p)))
    for y, dw in results[1:]:
        np.testing.assert_array_equal(y, results[0][0])        # the same GEMMs: the same bits
        np.testing.assert_allclose(dw, results[0][1], rtol=1e-13)   # sums over n associate differently


def test_block_gradients_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 16, 16))
    conv = cr.nn.Conv2d(4, 6, 3, padding=1, dtype="float64", generator=np.random.default_rng(5))
    bn = cr.nn.BatchNorm2d(6, dtype="float64")
    xt = cr.tensor(x, requires_grad=True)
    out = cr.nn.functional.relu(bn(conv(xt)))
    cr.mean(out * out).backward()
    tc = torch.nn.Conv2d(4, 6, 3, padding=1).double()
    tc.load_state_dict({k: torch.tensor(np.array(v.data)) for k, v in conv.state_dict().items()})
    tb = torch.nn.BatchNorm2d(6).double()
    tx = torch.tensor(x, requires_grad=True)
    to = torch.relu(tb(tc(tx)))
    torch.mean(to * to).backward()
    for ours, theirs in ((xt.grad, tx.grad), (conv.weight.grad, tc.weight.grad), (conv.bias.grad, tc.bias.grad),
                         (bn.weight.grad, tb.weight.grad), (bn.bias.grad, tb.bias.grad)):
        np.testing.assert_allclose(np.asarray(ours.data), theirs.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("padding", [((-1, 0), (0, -1)), ((-1, 2), (1, -1)), ((0, 0), (0, 0)), ((2, 1), (0, 3))])
@pytest.mark.parametrize("chunk", [1, 1 << 30])
def test_padding_and_crops_per_chunk_against_torch(padding, chunk, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(C, "_CHUNK_BYTES", chunk)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 2, 18, 17))
    w = rng.standard_normal((4, 2, 3, 3))
    p = _params(padding=padding)
    y = C._conv_forward(x, w, **p)
    a = rng.standard_normal(y.shape)
    dw = C._conv_weight_forward(x, a, **p)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in padding))
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(xp.shape[2:], padding))
    xp = xp[(slice(None),) * 2 + crop]
    tx, tw = torch.tensor(xp), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw)
    ty.backward(torch.tensor(a))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-12, atol=1e-11)
