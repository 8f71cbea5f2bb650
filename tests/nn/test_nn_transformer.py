"""Transformer layers, stacks and the full model: against torch in float64 (outputs, input and parameter
gradients; train with dropout 0 and eval; both batch layouts, masks of both kinds, key padding,
is_causal), state_dict keys, initialisation, deep copies, second order, errors."""
import inspect
import math

import numpy as np
import pytest

import chainrule as cr
from chainrule.errors import ShapeError
from chainrule.nn.attention import MultiheadAttention
from chainrule.nn.layers import GELU, LayerNorm
from chainrule.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tests.nn.torch_parity import close, load_torch

# torch's own notes on mixing mask kinds and on its nested-tensor fast path (these tests mix on purpose)
pytestmark = [pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning"),
              pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")]
D, H, FF = 6, 2, 10


def _check(torch, ours, theirs, inputs, call_ours, call_theirs, rng):
    """Outputs, input gradients and every parameter gradient agree with torch."""
    ci = [cr.tensor(a, requires_grad=True) for a in inputs]
    ti = [torch.tensor(a, requires_grad=True) for a in inputs]
    co, to = call_ours(ours, *ci), call_theirs(theirs, *ti)
    assert tuple(co.shape) == tuple(to.shape)
    close(co, to, "output")
    g = rng.normal(size=tuple(to.shape))
    (co * g).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    for i, (a, b) in enumerate(zip(ci, ti)):
        close(a.grad, b.grad, f"input grad {i}")
    theirs_p = dict(theirs.named_parameters())
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(theirs_p)
    for name, p in ours.named_parameters():
        close(p.grad, theirs_p[name].grad, f"grad of {name}")


def _pair(torch, cls_ours, cls_theirs, *args, mode="train", **kwargs):
    dropout = 0.0 if mode == "train" else 0.2                  # eval switches dropout off
    theirs = cls_theirs(*args, dropout=dropout, **kwargs).double()
    ours = cls_ours(*args, dropout=dropout, dtype=cr.float64, **kwargs)
    load_torch(ours, theirs)
    ours.train(mode == "train")
    theirs.train(mode == "train")
    return ours, theirs


def _seq(rng, n, batch, batch_first):
    if batch is None:
        return rng.normal(size=(n, D))
    return rng.normal(size=(batch, n, D) if batch_first else (n, batch, D))


def _kpm(rng, batch, n, kind):
    shape = (n,) if batch is None else (batch, n)
    if kind == "float":
        return rng.normal(size=shape)
    m = rng.random(shape) > 0.6
    m[..., 0] = False                                          # every row keeps a key (no NaN rows)
    return m


# ----- state dicts and initialisation -----
@pytest.mark.parametrize("bias", [True, False])
def test_state_dict_keys_match_torch(bias):
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    pairs = [
        (TransformerEncoderLayer(D, H, FF, bias=bias), tnn.TransformerEncoderLayer(D, H, FF, bias=bias)),
        (TransformerDecoderLayer(D, H, FF, bias=bias), tnn.TransformerDecoderLayer(D, H, FF, bias=bias)),
        (TransformerEncoder(TransformerEncoderLayer(D, H, FF, bias=bias), 2, LayerNorm(D)),
         tnn.TransformerEncoder(tnn.TransformerEncoderLayer(D, H, FF, bias=bias), 2, tnn.LayerNorm(D),
                                enable_nested_tensor=False)),
        (TransformerDecoder(TransformerDecoderLayer(D, H, FF, bias=bias), 2),
         tnn.TransformerDecoder(tnn.TransformerDecoderLayer(D, H, FF, bias=bias), 2)),
        (Transformer(D, H, 2, 1, FF, bias=bias), tnn.Transformer(D, H, 2, 1, FF, bias=bias)),
    ]
    for ours, theirs in pairs:
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
            [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]


SIGNATURE_PAIRS = [(Transformer, "Transformer"), (TransformerEncoderLayer, "TransformerEncoderLayer"),
                   (TransformerDecoderLayer, "TransformerDecoderLayer"), (TransformerEncoder, "TransformerEncoder"),
                   (TransformerDecoder, "TransformerDecoder"), (MultiheadAttention, "MultiheadAttention")]


@pytest.mark.parametrize("ours,name", SIGNATURE_PAIRS, ids=[n for _, n in SIGNATURE_PAIRS])
def test_signatures_match_torch(ours, name):
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.nn, name)
    for method in ("__init__", "forward"):
        a = inspect.signature(getattr(ours, method)).parameters
        b = inspect.signature(getattr(theirs, method)).parameters
        a = [(k, v.default) for k, v in a.items() if k not in ("dtype", "generator")]
        b = [(k, v.default) for k, v in b.items() if k not in ("device", "dtype")]
        assert [k for k, _ in a] == [k for k, _ in b], (name, method)
        for (k, da), (_, db) in zip(a, b):
            if k == "activation":
                assert da == "relu" and db is torch.nn.functional.relu
            else:
                assert da == db, (name, method, k)
    layer = TransformerEncoderLayer(8, 2)
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1 and layer.norm1.eps == 1e-5


def test_transformer_init_is_xavier_on_matrices():
    gen = np.random.default_rng(0)
    model = Transformer(8, 2, 1, 1, 16, generator=gen, dtype=cr.float64)
    for name, p in model.named_parameters():
        if p.ndim > 1:
            fan_out, fan_in = p.shape
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            assert np.abs(p.data).max() <= bound, name
            assert np.abs(p.data).max() > 0.8 * bound, name
    assert np.all(model.encoder.layers[0].self_attn.in_proj_bias.data == 0)
    assert np.all(model.decoder.norm.weight.data == 1) and np.all(model.decoder.norm.bias.data == 0)
    same = [Transformer(4, 2, 1, 1, 4, generator=np.random.default_rng(1)).state_dict() for _ in range(2)]
    for k in same[0]:
        np.testing.assert_array_equal(same[0][k].data, same[1][k].data)


def test_stacks_hold_independent_deep_copies_sharing_the_generator():
    gen = np.random.default_rng(0)
    layer = TransformerEncoderLayer(D, H, FF, generator=gen)
    enc = TransformerEncoder(layer, 3)
    assert len(enc.layers) == 3 and enc.num_layers == 3
    ws = [m.linear1.weight for m in enc.layers]
    assert len({id(w) for w in ws}) == 3 and all(w is not layer.linear1.weight for w in ws)
    np.testing.assert_array_equal(ws[0].data, ws[2].data)       # copies start equal, as torch's
    ws[0].data[...] = 0
    assert np.any(ws[1].data != 0)
    assert all(m.dropout.generator is gen for m in enc.layers)
    assert len(list(enc.parameters())) == 3 * len(list(layer.parameters()))


def test_generate_square_subsequent_mask_matches_torch():
    torch = pytest.importorskip("torch")
    ours = Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(ours.data, torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    assert Transformer.generate_square_subsequent_mask(3, dtype=cr.float64).dtype == np.float64
    assert ours.dtype == cr.get_default_dtype()


# ----- encoder and decoder layers against torch -----
LAYER_CASES = {
    # name: (layer kwargs, batch (None: unbatched), mask kind, kpm kind, is_causal)
    "plain": (dict(), 2, None, None, False),
    "batch1_bf": (dict(batch_first=True), 1, None, None, False),
    "norm_first": (dict(norm_first=True), 3, None, None, False),
    "gelu_bf_nf": (dict(activation="gelu", batch_first=True, norm_first=True), 2, None, None, False),
    "no_bias": (dict(bias=False), 2, None, None, False),
    "callable_act": (dict(activation="tanh"), 2, None, None, False),
    "module_act": (dict(activation="gelu_module"), 2, None, None, False),
    "causal": (dict(batch_first=True), 2, "causal", None, True),
    "bool_mask": (dict(), 2, "bool", None, False),
    "kpm_bool": (dict(batch_first=True), 3, None, "bool", False),
    "float_mask_kpm": (dict(norm_first=True), 2, "float", "float", False),
    "causal_kpm": (dict(), 2, "causal", "bool", True),
    "unbatched": (dict(), None, None, None, False),
    "unbatched_kpm": (dict(norm_first=True), None, "causal", "bool", False),
}


def _layer_kwargs(torch, kw):
    act = kw.get("activation", "relu")
    ours, theirs = dict(kw), dict(kw)
    if act == "tanh":
        ours["activation"], theirs["activation"] = cr.tanh, torch.tanh
    elif act == "gelu_module":
        ours["activation"], theirs["activation"] = GELU(), torch.nn.GELU()
    return ours, theirs


def _attn_mask(rng, kind, n_q, n_k):
    if kind is None:
        return None
    if kind == "causal":
        return np.triu(np.full((n_q, n_k), -np.inf), 1)
    if kind == "float":
        return rng.normal(size=(n_q, n_k))
    m = rng.random((n_q, n_k)) > 0.6
    m[:, 0] = False
    return m


def _as_torch(torch, a):
    return None if a is None else torch.tensor(a)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_encoder_layer_matches_torch(rng, case, mode):
    torch = pytest.importorskip("torch")
    kw, batch, mask_kind, kpm_kind, causal = LAYER_CASES[case]
    ok, tk = _layer_kwargs(torch, kw)
    dropout = 0.0 if mode == "train" else 0.2
    theirs = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=dropout, **tk).double()
    ours = TransformerEncoderLayer(D, H, FF, dropout=dropout, dtype=cr.float64, **ok)
    load_torch(ours, theirs)
    ours.train(mode == "train")
    theirs.train(mode == "train")
    S = 5
    src = _seq(rng, S, batch, kw.get("batch_first", False))
    mask = _attn_mask(rng, mask_kind, S, S)
    kpm = None if kpm_kind is None else _kpm(rng, batch, S, kpm_kind)
    _check(torch, ours, theirs, [src],
           lambda m, x: m(x, src_mask=mask, src_key_padding_mask=kpm, is_causal=causal),
           lambda m, x: m(x, src_mask=_as_torch(torch, mask), src_key_padding_mask=_as_torch(torch, kpm),
                          is_causal=causal), rng)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_decoder_layer_matches_torch(rng, case, mode):
    torch = pytest.importorskip("torch")
    kw, batch, mask_kind, kpm_kind, causal = LAYER_CASES[case]
    ok, tk = _layer_kwargs(torch, kw)
    dropout = 0.0 if mode == "train" else 0.2
    theirs = torch.nn.TransformerDecoderLayer(D, H, FF, dropout=dropout, **tk).double()
    ours = TransformerDecoderLayer(D, H, FF, dropout=dropout, dtype=cr.float64, **ok)
    load_torch(ours, theirs)
    ours.train(mode == "train")
    theirs.train(mode == "train")
    T, S = 4, 5
    bf = kw.get("batch_first", False)
    tgt, mem = _seq(rng, T, batch, bf), _seq(rng, S, batch, bf)
    masks = dict(tgt_mask=_attn_mask(rng, mask_kind, T, T),
                 memory_mask=None if mask_kind in (None, "causal") else _attn_mask(rng, mask_kind, T, S),
                 tgt_key_padding_mask=None if kpm_kind is None else _kpm(rng, batch, T, kpm_kind),
                 memory_key_padding_mask=None if kpm_kind is None else _kpm(rng, batch, S, kpm_kind))
    _check(torch, ours, theirs, [tgt, mem],
           lambda m, t, s: m(t, s, tgt_is_causal=causal, **masks),
           lambda m, t, s: m(t, s, tgt_is_causal=causal, **{k: _as_torch(torch, v) for k, v in masks.items()}),
           rng)


# ----- stacks and the full model -----
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_and_decoder_stacks_match_torch(rng, mode, batch_first):
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    dropout = 0.0 if mode == "train" else 0.2
    enc_t = tnn.TransformerEncoder(tnn.TransformerEncoderLayer(D, H, FF, dropout, batch_first=batch_first), 2,
                                   tnn.LayerNorm(D), enable_nested_tensor=False).double()
    enc = TransformerEncoder(TransformerEncoderLayer(D, H, FF, dropout, batch_first=batch_first,
                                                     dtype=cr.float64), 2, LayerNorm(D, dtype=cr.float64))
    dec_t = tnn.TransformerDecoder(tnn.TransformerDecoderLayer(D, H, FF, dropout, batch_first=batch_first,
                                                               norm_first=True), 2).double()
    dec = TransformerDecoder(TransformerDecoderLayer(D, H, FF, dropout, batch_first=batch_first, norm_first=True,
                                                     dtype=cr.float64), 2)
    for ours, theirs in ((enc, enc_t), (dec, dec_t)):
        load_torch(ours, theirs)
        ours.train(mode == "train")
        theirs.train(mode == "train")
    S, T, N = 5, 3, 2
    src, tgt = _seq(rng, S, N, batch_first), _seq(rng, T, N, batch_first)
    kpm = _kpm(rng, N, S, "bool")
    causal = Transformer.generate_square_subsequent_mask(S, dtype=cr.float64).data
    _check(torch, enc, enc_t, [src],
           lambda m, x: m(x, mask=causal, src_key_padding_mask=kpm, is_causal=True),
           lambda m, x: m(x, mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(kpm), is_causal=True),
           rng)
    tmask = np.triu(np.ones((T, T), bool), 1)
    _check(torch, dec, dec_t, [tgt, src],
           lambda m, t, s: m(t, s, tgt_mask=tmask, memory_key_padding_mask=kpm),
           lambda m, t, s: m(t, s, tgt_mask=torch.tensor(tmask), memory_key_padding_mask=torch.tensor(kpm)), rng)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("batch_first,norm_first,batch", [(False, False, 2), (True, True, 1), (False, True, None)])
def test_transformer_matches_torch(rng, mode, batch_first, norm_first, batch):
    torch = pytest.importorskip("torch")
    kwargs = dict(num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=FF, batch_first=batch_first,
                  norm_first=norm_first)
    ours, theirs = _pair(torch, Transformer, torch.nn.Transformer, D, H, mode=mode, **kwargs)
    S, T = 5, 4
    src, tgt = _seq(rng, S, batch, batch_first), _seq(rng, T, batch, batch_first)
    tmask = Transformer.generate_square_subsequent_mask(T, dtype=cr.float64).data
    masks = dict(tgt_mask=tmask, src_key_padding_mask=_kpm(rng, batch, S, "bool"),
                 memory_key_padding_mask=_kpm(rng, batch, S, "bool"),
                 tgt_key_padding_mask=_kpm(rng, batch, T, "bool"))
    _check(torch, ours, theirs, [src, tgt],
           lambda m, s, t: m(s, t, tgt_is_causal=True, **masks),
           lambda m, s, t: m(s, t, tgt_is_causal=True, **{k: torch.tensor(v) for k, v in masks.items()}), rng)


def test_training_steps_track_torch(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, TransformerEncoderLayer, torch.nn.TransformerEncoderLayer, D, H, FF,
                         batch_first=True)
    x, target = rng.normal(size=(2, 4, D)), rng.normal(size=(2, 4, D))
    tp = dict(theirs.named_parameters())
    for _ in range(3):
        ours.zero_grad()
        theirs.zero_grad()
        ((ours(cr.tensor(x)) - target) ** 2).mean().backward()
        ((theirs(torch.tensor(x)) - torch.tensor(target)) ** 2).mean().backward()
        with torch.no_grad():
            for name, p in ours.named_parameters():
                p.data[...] -= 0.1 * p.grad.data
                tp[name] -= 0.1 * tp[name].grad
    for name, p in ours.named_parameters():
        close(p, tp[name], name)


# ----- second order -----
def test_encoder_layer_gradgradcheck(rng):
    layer = TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation="gelu", dtype=cr.float64, generator=rng)
    x = cr.tensor(rng.normal(size=(3, 1, 4)), requires_grad=True)
    kpm = np.array([[False, False, True]])
    assert cr.gradcheck(lambda x: layer(x, src_key_padding_mask=kpm), (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x: layer(x, src_key_padding_mask=kpm), (x,))


def test_decoder_layer_gradgradcheck(rng):
    layer = TransformerDecoderLayer(4, 2, 6, dropout=0.0, activation="gelu", norm_first=True, dtype=cr.float64,
                                    generator=rng)
    t = cr.tensor(rng.normal(size=(2, 1, 4)), requires_grad=True)
    m = cr.tensor(rng.normal(size=(3, 1, 4)), requires_grad=True)
    mask = Transformer.generate_square_subsequent_mask(2, dtype=cr.float64)
    assert cr.gradgradcheck(lambda t, m: layer(t, m, tgt_mask=mask, tgt_is_causal=True), (t, m))


# ----- errors -----
def test_errors_name_the_layer_shapes_and_fix():
    with pytest.raises(ValueError, match="activation should be 'relu' or 'gelu'"):
        TransformerEncoderLayer(D, H, FF, activation="swish")
    with pytest.raises(ValueError, match="divisible by num_heads"):
        TransformerEncoderLayer(5, 2, FF)
    layer = TransformerEncoderLayer(D, H, FF)
    with pytest.raises(ShapeError, match=r"TransformerEncoderLayer: src must be .*d_model = 6; got \(5, 2, 4\)"):
        layer(cr.ones((5, 2, 4)))
    with pytest.raises(ValueError, match="is_causal=True is a hint"):
        layer(cr.ones((5, 2, D)), is_causal=True)
    dec = TransformerDecoderLayer(D, H, FF)
    with pytest.raises(ShapeError, match=r"TransformerDecoderLayer: memory must be"):
        dec(cr.ones((5, 2, D)), cr.ones((5, 2, 3)))
    model = Transformer(D, H, 1, 1, FF)
    with pytest.raises(ShapeError, match=r"Transformer: src \(5, 2, 6\) and tgt \(4, 3, 6\).*same batch size"):
        model(cr.ones((5, 2, D)), cr.ones((4, 3, D)))
    with pytest.raises(ShapeError, match=r"must equal d_model=6"):
        model(cr.ones((5, 2, 4)), cr.ones((4, 2, 4)))
    with pytest.raises(ValueError, match="num_layers must be at least 1"):
        TransformerEncoder(layer, 0)
    assert isinstance(layer.self_attn, MultiheadAttention)
