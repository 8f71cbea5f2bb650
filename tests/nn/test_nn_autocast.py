"""The layers under ``cr.autocast`` against ``torch.autocast("cpu")``: result dtypes and values.

PyTorch's CPU policy puts no norm on an autocast list: a norm computes its statistics in float32
and returns its input's dtype (a 16-bit input stays 16-bit, a float32 one float32), whatever the
weight's dtype. The layers ahead of a norm (linear, matmul, attention) run in the low dtype.
"""
from __future__ import annotations

import numpy as np
import pytest

import chainrule as cr

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")   # torch's rms_norm

LOW = {"bfloat16": (cr.bfloat16, torch.bfloat16, 2.0 ** -7), "float16": (cr.float16, torch.float16, 2.0 ** -10)}

NORMS = {   # name: (chainrule layer, torch layer, input shape)
    "BatchNorm1d": (lambda: cr.nn.BatchNorm1d(4), lambda: torch.nn.BatchNorm1d(4), (6, 4)),
    "BatchNorm2d": (lambda: cr.nn.BatchNorm2d(4), lambda: torch.nn.BatchNorm2d(4), (2, 4, 3, 3)),
    "SyncBatchNorm": (lambda: cr.nn.SyncBatchNorm(4), lambda: torch.nn.BatchNorm2d(4), (2, 4, 3, 3)),
    "GroupNorm": (lambda: cr.nn.GroupNorm(2, 4), lambda: torch.nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    "InstanceNorm1d": (lambda: cr.nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
                       lambda: torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True), (2, 4, 5)),
    "InstanceNorm2d": (lambda: cr.nn.InstanceNorm2d(4), lambda: torch.nn.InstanceNorm2d(4), (2, 4, 3, 3)),
    "RMSNorm": (lambda: cr.nn.RMSNorm(5), lambda: torch.nn.RMSNorm(5), (2, 4, 5)),
    "LayerNorm": (lambda: cr.nn.LayerNorm(5), lambda: torch.nn.LayerNorm(5), (2, 4, 5)),
}


def _pair(name, rng):
    ours, theirs = NORMS[name][0](), NORMS[name][1]()
    sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    for k, v in sd.items():
        if v.dtype.kind == "f":
            sd[k] = (v + rng.standard_normal(v.shape).astype(v.dtype) * 0.3) if "weight" in k or "bias" in k else v
    ours.load_state_dict(sd)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    return ours, theirs


def _close(got, want, eps):
    np.testing.assert_allclose(np.asarray(got, np.float64), want.detach().double().numpy(), rtol=eps, atol=eps)


def _known(names, known, extra=()):
    """``names`` as parameters, those in ``known`` expected to fail (strict: a fix shows up)."""
    return [pytest.param(*extra, n, marks=pytest.mark.xfail(strict=True, reason=known[n])) if n in known
            else pytest.param(*extra, n) for n in sorted(names)]


@pytest.mark.parametrize("low", sorted(LOW))
@pytest.mark.parametrize("input_dtype, name", [pytest.param("float32", n) for n in sorted(NORMS)]
                         + [pytest.param("low", n) for n in sorted(NORMS)])
def test_norms_return_torchs_dtype_and_values(name, input_dtype, low):
    cr_low, t_low, eps = LOW[low]
    rng = np.random.default_rng(0)
    ours, theirs = _pair(name, rng)
    x = (rng.standard_normal(NORMS[name][2]) * 3 + 1).astype(np.float32)
    xc, xt = cr.tensor(x), torch.tensor(x)
    if input_dtype == "low":
        xc, xt = xc.astype(cr_low), xt.to(t_low)
    xc.requires_grad_(True)
    xt.requires_grad_(True)
    with cr.autocast(dtype=cr_low):
        y = ours(xc)
    with torch.autocast("cpu", dtype=t_low):
        yt = theirs(xt)
    assert str(y.dtype) == str(yt.dtype).replace("torch.", "")
    _close(y.data, yt, eps)
    (y.astype(cr.float32) ** 2).sum().backward()
    (yt.float() ** 2).sum().backward()
    assert str(xc.grad.dtype) == str(xt.grad.dtype).replace("torch.", "")
    _close(xc.grad.data, xt.grad, 8 * eps * max(1.0, float(np.abs(xt.grad.double().numpy()).max())))
    for (k, p), q in zip(ours.named_parameters(), theirs.parameters()):
        assert p.grad.dtype == np.float32, k
        _close(p.grad.data, q.grad, 8 * eps * max(1.0, float(np.abs(q.grad.numpy()).max())))
    for (k, b), tb in zip(ours.named_buffers(), theirs.buffers()):
        assert str(b.dtype) == str(tb.dtype).replace("torch.", ""), k
        np.testing.assert_allclose(b.data, tb.numpy(), rtol=eps, atol=eps, err_msg=k)


@pytest.mark.parametrize("low", sorted(LOW))
def test_a_norm_after_a_linear_layer_stays_in_the_low_dtype(low):
    """Linear runs in the low dtype; the norm keeps it (float32 statistics inside), as torch."""
    cr_low, t_low, eps = LOW[low]
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    ours = cr.nn.Sequential(cr.nn.Linear(3, 4), cr.nn.BatchNorm1d(4), cr.nn.ReLU())
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU())
    ours.load_state_dict({"0.weight": w, "0.bias": b, **{k: v.numpy() for k, v in theirs[1].state_dict(
        prefix="1.").items()}})
    with torch.no_grad():
        theirs[0].weight[:], theirs[0].bias[:] = torch.tensor(w), torch.tensor(b)
    with cr.autocast(dtype=cr_low):
        h, y = ours[0](cr.tensor(x)), ours(cr.tensor(x))
    with torch.autocast("cpu", dtype=t_low):
        ht, yt = theirs[0](torch.tensor(x)), theirs(torch.tensor(x))
    assert h.dtype == y.dtype == cr_low and ht.dtype == yt.dtype == t_low
    _close(y.data, yt, 2 * eps)
    np.testing.assert_allclose(ours[1].running_mean.data, theirs[1].running_mean.numpy(), rtol=1e-6, atol=1e-6)


# what PyTorch's CPU autocast returns for float32 inputs, and chainrule's differences (op-table policy)
OPS = {
    "linear": (lambda m, x: cr.nn.functional.linear(x, m), lambda m, x: torch.nn.functional.linear(x, m)),
    "matmul": (lambda m, x: x @ m.T, lambda m, x: x @ m.T),
    "softmax": (lambda m, x: cr.nn.functional.softmax(x @ m.T, -1),
                lambda m, x: torch.softmax(x @ m.T, -1)),
    "sdpa": (lambda m, x: cr.nn.functional.scaled_dot_product_attention(x, x, x),
             lambda m, x: torch.nn.functional.scaled_dot_product_attention(x, x, x)),
    "conv2d": (lambda m, x: cr.nn.functional.conv2d(x[:, None], m[None, None, :2, :3]),
               lambda m, x: torch.nn.functional.conv2d(x[:, None], m[None, None, :2, :3])),
    "lstm": (lambda m, x: _lstm(cr.nn.LSTM(4, 4, batch_first=True), m, x)[0],
             lambda m, x: _lstm(torch.nn.LSTM(4, 4, batch_first=True), m, x)[0]),
}
OP_KNOWN = {"softmax": "chainrule runs softmax in float32 under autocast (CUDA's list); torch's CPU "
                       "autocast leaves it in its input's dtype"}


def _lstm(layer, m, x):
    values = np.asarray(m.data if isinstance(m, cr.Tensor) else m.numpy(), np.float32).ravel()
    for p in layer.parameters():                   # the same weights on both sides
        fill = np.resize(values, tuple(p.shape))
        p.data[...] = fill if isinstance(p, cr.Tensor) else torch.tensor(fill)
    return layer(x)


@pytest.mark.parametrize("op", _known(OPS, OP_KNOWN))
def test_ops_ahead_of_the_norms_follow_torchs_cpu_policy(op):
    rng = np.random.default_rng(2)
    m, x = rng.standard_normal((4, 4)).astype(np.float32), rng.standard_normal((2, 3, 4)).astype(np.float32)
    with cr.autocast(dtype=cr.bfloat16):
        y = OPS[op][0](cr.tensor(m), cr.tensor(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = OPS[op][1](torch.tensor(m), torch.tensor(x))
    assert str(y.dtype) == str(yt.dtype).replace("torch.", "")
    _close(y.astype(cr.float32).data, yt.float(), 2 ** -6)
