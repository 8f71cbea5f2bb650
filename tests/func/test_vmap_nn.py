"""``cr.vmap`` through the nn layers: per-example gradients with ``functional_call`` + ``vmap(grad)``
equal the loop over examples, and ``torch.func``'s (same weights, float64)."""
from __future__ import annotations

import numpy as np
import pytest

import chainrule as cr
from chainrule.func import functional_call
from chainrule.func.module_calls import replace_all_batch_norm_modules_

D = cr.float64


class SelfAttention(cr.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = cr.nn.MultiheadAttention(6, 2, batch_first=True, dtype=D)

    def forward(self, x):
        return self.attn(x, x, x)[0]


def _torch_self_attention(torch):
    class TorchSelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(6, 2, batch_first=True, dtype=torch.float64)

        def forward(self, x):
            return self.attn(x, x, x)[0]
    return TorchSelfAttention()


def _bn_eval(cls, n):
    def make():
        bn = cls(n, dtype=D)
        bn.running_mean.data[...] = np.linspace(-1, 1, n)
        bn.running_var.data[...] = np.linspace(0.5, 2, n)
        return bn.eval()
    return make


# name: (chainrule model, torch model or None, one example's shape)
MODELS = {
    "MultiheadAttention": (SelfAttention, _torch_self_attention, (5, 6)),
    "TransformerEncoderLayer": (
        lambda: cr.nn.TransformerEncoderLayer(6, 2, dim_feedforward=8, batch_first=True, dtype=D).eval(),
        lambda t: t.nn.TransformerEncoderLayer(6, 2, dim_feedforward=8, batch_first=True,
                                               dtype=t.float64).eval(), (5, 6)),
    "LSTM": (lambda: cr.nn.LSTM(6, 3, num_layers=2, batch_first=True, dtype=D),
             lambda t: t.nn.LSTM(6, 3, num_layers=2, batch_first=True, dtype=t.float64), (5, 6)),
    "GRU-bidirectional": (lambda: cr.nn.GRU(6, 3, batch_first=True, bidirectional=True, dtype=D),
                          lambda t: t.nn.GRU(6, 3, batch_first=True, bidirectional=True, dtype=t.float64), (5, 6)),
    "LayerNorm": (lambda: cr.nn.LayerNorm(6, dtype=D), lambda t: t.nn.LayerNorm(6, dtype=t.float64), (5, 6)),
    "GroupNorm": (lambda: cr.nn.GroupNorm(2, 4, dtype=D), lambda t: t.nn.GroupNorm(2, 4, dtype=t.float64),
                  (4, 3, 3)),
    "InstanceNorm2d": (lambda: cr.nn.InstanceNorm2d(4, affine=True, dtype=D),
                       lambda t: t.nn.InstanceNorm2d(4, affine=True, dtype=t.float64), (4, 3, 3)),
    "RMSNorm": (lambda: cr.nn.RMSNorm(6, dtype=D), lambda t: t.nn.RMSNorm(6, dtype=t.float64), (5, 6)),
    "BatchNorm2d-eval": (_bn_eval(cr.nn.BatchNorm2d, 4), None, (4, 3, 3)),
    "BatchNorm2d-train": (lambda: replace_all_batch_norm_modules_(cr.nn.BatchNorm2d(4, dtype=D)),
                          lambda t: t.func.replace_all_batch_norm_modules_(t.nn.BatchNorm2d(4, dtype=t.float64)),
                          (4, 3, 3)),
    "conv-BatchNorm-train": (
        lambda: replace_all_batch_norm_modules_(cr.nn.Sequential(
            cr.nn.Conv2d(4, 2, 1, dtype=D), cr.nn.BatchNorm2d(2, dtype=D), cr.nn.Tanh())),
        lambda t: t.func.replace_all_batch_norm_modules_(t.nn.Sequential(
            t.nn.Conv2d(4, 2, 1, dtype=t.float64), t.nn.BatchNorm2d(2, dtype=t.float64), t.nn.Tanh())), (4, 3, 3)),
}
NO_TORCH_VMAP = {"LSTM", "GRU-bidirectional"}     # torch.func.vmap cannot run torch's fused RNN kernels: loop there


def _loss(model, params, buffers, x):
    out = functional_call(model, (params, buffers), (x[None],))
    out = out[0] if isinstance(out, tuple) else out
    return (out * out).sum() + out.sum()


def _per_example(model, x):
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())
    return cr.vmap(cr.func.grad(lambda p, xi: _loss(model, p, buffers, xi)), in_axes=(None, 0))(params, x), \
        [cr.func.grad(lambda p, xi: _loss(model, p, buffers, xi))(params, x[i]) for i in range(x.shape[0])]


@pytest.mark.parametrize("name", list(MODELS))
def test_per_example_gradients_equal_the_loop(name):
    make, _, shape = MODELS[name]
    model = make()
    x = cr.tensor(np.random.default_rng(0).standard_normal((3, *shape)))
    batched, loop = _per_example(model, x)
    assert sorted(batched) == sorted(dict(model.named_parameters()))
    for k, g in batched.items():
        assert g.shape == (3, *dict(model.named_parameters())[k].shape)
        for i in range(3):
            np.testing.assert_allclose(g.data[i], loop[i][k].data, rtol=0, atol=1e-12, err_msg=f"{k}[{i}]")


@pytest.mark.parametrize("name", [n for n in MODELS if MODELS[n][1] is not None])
def test_per_example_gradients_match_torch_func(name):
    torch = pytest.importorskip("torch")
    make, make_torch, shape = MODELS[name]
    model, tmodel = make(), make_torch(torch)
    rng = np.random.default_rng(1)
    for v in tmodel.parameters():                 # the same (random) weights on both sides
        v.data = torch.tensor(rng.standard_normal(tuple(v.shape)) * 0.5)
    model.load_state_dict({k: v.detach().numpy() for k, v in tmodel.state_dict().items()})
    x = rng.standard_normal((3, *shape))
    batched, _ = _per_example(model, cr.tensor(x))
    tparams = {k: v.detach() for k, v in tmodel.named_parameters()}
    tbuffers = dict(tmodel.named_buffers())

    def tloss(p, xi):
        out = torch.func.functional_call(tmodel, (p, tbuffers), (xi[None],))
        out = out[0] if isinstance(out, tuple) else out
        return (out * out).sum() + out.sum()
    if name in NO_TORCH_VMAP:
        rows = [torch.func.grad(tloss)(tparams, torch.tensor(xi)) for xi in x]
        want = {k: torch.stack([r[k] for r in rows]) for k in tparams}
    else:
        want = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0))(tparams, torch.tensor(x))
    for k, g in batched.items():
        np.testing.assert_allclose(g.data, want[k].numpy(), rtol=1e-10, atol=1e-12, err_msg=k)


def test_batch_norm_in_training_mode_under_vmap_names_the_fix():
    bn = cr.nn.BatchNorm2d(4, dtype=D)
    x = cr.tensor(np.random.default_rng(0).standard_normal((3, 2, 4, 3, 3)))
    with pytest.raises(cr.VmapError, match=r"BatchNorm2d: .*replace_all_batch_norm_modules_"):
        cr.vmap(bn)(x)
    replace_all_batch_norm_modules_(bn)
    out = cr.vmap(bn)(x)                          # each vmapped call: its own batch of 2
    for i in range(3):
        np.testing.assert_allclose(out.data[i], bn(x[i]).data, rtol=0, atol=1e-12)


def test_replace_all_batch_norm_modules_matches_torch():
    torch = pytest.importorskip("torch")
    ours = cr.nn.Sequential(cr.nn.BatchNorm1d(3), cr.nn.Sequential(cr.nn.SyncBatchNorm(3), cr.nn.InstanceNorm1d(
        3, track_running_stats=True)), cr.nn.BatchNorm2d(3, track_running_stats=False))
    theirs = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Sequential(torch.nn.SyncBatchNorm(3),
                                 torch.nn.InstanceNorm1d(3, track_running_stats=True)),
                                 torch.nn.BatchNorm2d(3, track_running_stats=False))
    assert replace_all_batch_norm_modules_(ours) is ours
    torch.func.replace_all_batch_norm_modules_(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [getattr(m, "track_running_stats", None) for m in ours.modules()] == \
        [getattr(m, "track_running_stats", None) for m in theirs.modules()]
    assert repr(ours) == repr(theirs)
    with pytest.raises(TypeError, match="replace_all_batch_norm_modules_: root must be a cr.nn.Module"):
        replace_all_batch_norm_modules_(theirs)
