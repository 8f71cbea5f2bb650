"""scaled_dot_product_attention and MultiheadAttention: against torch in float64 (outputs, input and
parameter gradients, every mask kind), state_dict keys and initialisation, second order, errors."""
import math

import numpy as np
import pytest

import chainrule as cr
from chainrule.errors import ShapeError
from chainrule.nn.attention import MultiheadAttention
from chainrule.nn.functional.attention import multi_head_attention_forward, scaled_dot_product_attention
from chainrule.utils.viz import nodes
from tests.nn.torch_parity import close, load_torch

# torch's own notes on mixing mask kinds and on its nested-tensor fast path (these tests mix on purpose)
pytestmark = [pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning"),
              pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")]


def t64(rng, *shape):
    return cr.tensor(rng.normal(size=shape), dtype=cr.float64, requires_grad=True)


def _check_against_torch(torch, ours, theirs, inputs, call_ours, call_theirs, rng):
    """Outputs, input gradients and parameter gradients of ``call(module, *inputs)`` agree."""
    ci = [cr.tensor(a, requires_grad=True) for a in inputs]
    ti = [torch.tensor(a, requires_grad=True) for a in inputs]
    co = [o for o in call_ours(ours, *ci) if o is not None]
    to = [o for o in call_theirs(theirs, *ti) if o is not None]
    assert len(co) == len(to)
    gs = [rng.normal(size=tuple(o.shape)) for o in to]
    for i, (a, b) in enumerate(zip(co, to)):
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b, f"output {i}")
    sum(((a * g).sum() for a, g in zip(co, gs)), cr.tensor(0.0, dtype=cr.float64)).backward()
    sum((b * torch.tensor(g)).sum() for b, g in zip(to, gs)).backward()
    for i, (a, b) in enumerate(zip(ci, ti)):
        if b.grad is None:
            assert a.grad is None or not np.any(a.grad.data), f"input {i}"
        else:
            close(a.grad, b.grad, f"input grad {i}")
    theirs_p = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, theirs_p[name].grad, f"grad of {name}")
    return co


def _mha(call_kwargs):
    def call(m, q, k, v, *masks):
        kw = dict(call_kwargs)
        for name, mask in zip(kw.pop("_mask_names", ()), masks):
            kw[name] = mask
        return m(q, k, v, **kw)
    return call


# ----- scaled_dot_product_attention -----
SDPA_CASES = {
    "plain": dict(q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7), kw={}),
    "batch1_3d": dict(q=(1, 3, 4), k=(1, 5, 4), v=(1, 5, 2), kw={}),
    "causal_rect": dict(q=(2, 2, 4, 3), k=(2, 2, 6, 3), v=(2, 2, 6, 3), kw=dict(is_causal=True)),
    "causal_tall": dict(q=(1, 5, 3), k=(1, 3, 3), v=(1, 3, 2), kw=dict(is_causal=True)),
    "scale": dict(q=(2, 4, 3), k=(2, 4, 3), v=(2, 4, 3), kw=dict(scale=0.37)),
    "gqa": dict(q=(2, 4, 3, 5), k=(2, 2, 6, 5), v=(2, 2, 6, 5), kw=dict(enable_gqa=True)),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_matches_torch(rng, case):
    torch = pytest.importorskip("torch")
    c = SDPA_CASES[case]
    arrays = [rng.normal(size=c[n]) for n in ("q", "k", "v")]
    ours = [cr.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = scaled_dot_product_attention(*ours, **c["kw"])
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, **c["kw"])
    close(out, ref, "output")
    g = rng.normal(size=tuple(ref.shape))
    (out * g).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for a, b, n in zip(ours, theirs, "qkv"):
        close(a.grad, b.grad, f"d{n}")


@pytest.mark.parametrize("kind", ["bool", "float", "bool_broadcast", "float_grad"])
def test_sdpa_masks_match_torch(rng, kind):
    torch = pytest.importorskip("torch")
    q, k, v = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(2, 3, 6, 5))
    if kind.startswith("bool"):
        mask = rng.random((4, 6) if kind == "bool_broadcast" else (2, 1, 4, 6)) > 0.4
        mask[..., 0] = True                                   # every query keeps a key (no NaN rows)
    else:
        mask = rng.normal(size=(2, 3, 4, 6))
    ours = [cr.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    cm, tm = (cr.tensor(mask, requires_grad=True), torch.tensor(mask, requires_grad=True)) \
        if kind == "float_grad" else (mask, torch.tensor(mask))
    out = scaled_dot_product_attention(*ours, attn_mask=cm)
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=tm)
    close(out, ref, "output")
    g = rng.normal(size=tuple(ref.shape))
    (out * g).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for a, b in zip(ours, theirs):
        close(a.grad, b.grad, "input grad")
    if kind == "float_grad":
        close(cm.grad, tm.grad, "mask grad")


def test_sdpa_bool_mask_polarity_true_takes_part():
    q = k = cr.tensor(np.eye(2))
    v = cr.tensor([[1.0, 0.0], [0.0, 1.0]])
    only_first = np.array([[True, False], [True, False]])
    out = scaled_dot_product_attention(q, k, v, attn_mask=only_first)
    np.testing.assert_allclose(out.data, [[1.0, 0.0], [1.0, 0.0]])


def test_sdpa_dropout_uses_generator_and_scales(rng):
    q, k, v = (cr.tensor(rng.normal(size=(1, 4, 3))) for _ in range(3))
    v = cr.tensor(np.eye(4)[None])                   # the output is the (dropped) weights themselves
    plain = scaled_dot_product_attention(q, k, v).data
    a = scaled_dot_product_attention(q, k, v, dropout_p=0.5, generator=np.random.default_rng(3)).data
    b = scaled_dot_product_attention(q, k, v, dropout_p=0.5, generator=np.random.default_rng(3)).data
    np.testing.assert_array_equal(a, b)
    kept = a != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(a[kept], 2 * plain[kept])


def test_sdpa_gradcheck_both_modes_and_second_order(rng):
    q, k, v = t64(rng, 2, 3, 2), t64(rng, 2, 4, 2), t64(rng, 2, 4, 3)
    mask = np.array([[True, True, False, True], [True, False, True, True], [True, True, True, False]])
    assert cr.gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v),
                        modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))


def test_sdpa_errors_name_the_shapes():
    q, k, v = cr.ones((2, 3, 4)), cr.ones((2, 5, 4)), cr.ones((2, 5, 6))
    with pytest.raises(ShapeError, match=r"scaled_dot_product_attention.*\(2, 3, 4\).*\(2, 5, 3\)"):
        scaled_dot_product_attention(q, cr.ones((2, 5, 3)), v)
    with pytest.raises(ShapeError, match=r"attn_mask of shape \(3, 4\).*\(2, 3, 5\)"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 4), bool))
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 5), bool), is_causal=True)
    with pytest.raises(TypeError, match="boolean or floating"):
        scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 5), int))
    with pytest.raises(ShapeError, match="at least 2 axes"):
        scaled_dot_product_attention(cr.ones(4), k, v)


# ----- MultiheadAttention: state_dict and init -----
@pytest.mark.parametrize("kwargs", [{}, dict(bias=False), dict(kdim=3, vdim=5), dict(add_bias_kv=True),
                                    dict(kdim=3, bias=False, add_bias_kv=True)],
                         ids=["packed", "no_bias", "kvdim", "bias_kv", "kdim_nobias_biaskv"])
def test_mha_state_dict_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    theirs = torch.nn.MultiheadAttention(8, 2, **kwargs)
    ours = MultiheadAttention(8, 2, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert type(ours.out_proj).__name__ == type(theirs.out_proj).__name__


def test_mha_initialisation_follows_torch():
    gen = np.random.default_rng(0)
    m = MultiheadAttention(64, 4, add_bias_kv=True, dtype=cr.float64, generator=gen)
    w = m.in_proj_weight.data
    bound = math.sqrt(6.0 / (64 + 3 * 64))                    # xavier_uniform_ on (3E, E)
    assert w.dtype == np.float64 and np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.all(m.in_proj_bias.data == 0) and np.all(m.out_proj.bias.data == 0)
    ow = m.out_proj.weight.data                                # Linear's default: U(-1/sqrt(E), 1/sqrt(E))
    assert np.abs(ow).max() <= 1 / 8 and np.abs(ow).max() > 0.9 / 8
    assert np.std(m.bias_k.data) > 0 and m.bias_k.shape == (1, 1, 64)
    sep = MultiheadAttention(6, 2, kdim=4, vdim=10, generator=gen)
    assert np.abs(sep.k_proj_weight.data).max() <= math.sqrt(6.0 / (6 + 4))
    assert np.abs(sep.v_proj_weight.data).max() <= math.sqrt(6.0 / (6 + 10))
    same = [MultiheadAttention(4, 2, generator=np.random.default_rng(5)).in_proj_weight.data for _ in range(2)]
    np.testing.assert_array_equal(*same)


# ----- MultiheadAttention against torch -----
MHA_CASES = {
    # name: (module kwargs, query shape (L, N) / (L,), key length S, call kwargs, mask builder)
    "self_batch1": (dict(), (3, 1), None, dict(), None),
    "cross_odd": (dict(), (4, 3), 5, dict(), None),
    "batch_first": (dict(batch_first=True), (4, 2), 5, dict(), None),
    "unbatched": (dict(), (4,), 5, dict(), None),
    "unbatched_bf": (dict(batch_first=True), (3,), None, dict(), None),
    "kvdim": (dict(kdim=3, vdim=5), (4, 2), 6, dict(), None),
    "no_bias": (dict(bias=False), (3, 2), 4, dict(), None),
    "bias_kv": (dict(add_bias_kv=True), (3, 2), 4, dict(), None),
    "zero_attn": (dict(add_zero_attn=True), (3, 2), 4, dict(), None),
    "per_head": (dict(), (3, 2), 4, dict(average_attn_weights=False), None),
    "no_weights": (dict(batch_first=True), (3, 2), 4, dict(need_weights=False), None),
    "bool_attn_mask": (dict(), (4, 2), 5, dict(), "attn_bool"),
    "float_attn_mask": (dict(batch_first=True), (4, 2), 5, dict(), "attn_float"),
    "attn_mask_3d": (dict(), (4, 2), 5, dict(), "attn_3d"),
    "kpm_bool": (dict(batch_first=True), (4, 3), 5, dict(), "kpm_bool"),
    "kpm_float": (dict(), (4, 3), 5, dict(), "kpm_float"),
    "kpm_and_mask": (dict(add_bias_kv=True, add_zero_attn=True), (4, 2), 5, dict(), "both"),
    "kpm_unbatched": (dict(), (4,), 5, dict(need_weights=False), "kpm_bool"),
    "causal": (dict(batch_first=True), (4, 2), None, dict(is_causal=True), "causal"),
    "causal_no_weights": (dict(), (4, 2), None, dict(is_causal=True, need_weights=False), "causal"),
    "causal_kpm": (dict(), (4, 2), None, dict(is_causal=True, need_weights=False), "causal_kpm"),
    # batch-first inputs go through the layer untransposed: every layout-dependent path once more
    "kvdim_bf": (dict(kdim=3, vdim=5, batch_first=True), (4, 2), 6, dict(), None),
    "no_bias_bf": (dict(bias=False, batch_first=True), (3, 2), 4, dict(), None),
    "kpm_and_mask_bf": (dict(add_bias_kv=True, add_zero_attn=True, batch_first=True), (4, 2), 5, dict(), "both"),
    "attn_3d_bf": (dict(batch_first=True), (4, 2), 5, dict(average_attn_weights=False), "attn_3d"),
    "kpm_float_bf": (dict(batch_first=True), (4, 3), 5, dict(), "kpm_float"),
}


def _masks(kind, rng, L, S, N, H, batched=True):
    """(names, arrays) of the masks for a case (bool: True = not allowed; column 0 always allowed)."""
    def bool_mask(shape):
        m = rng.random(shape) > 0.6
        m[..., 0] = False
        return m
    kpm_shape = (N, S) if batched else (S,)
    return {
        None: ((), ()),
        "attn_bool": (("attn_mask",), (bool_mask((L, S)),)),
        "attn_float": (("attn_mask",), (rng.normal(size=(L, S)),)),
        "attn_3d": (("attn_mask",), (rng.normal(size=(N * H, L, S)),)),
        "kpm_bool": (("key_padding_mask",), (bool_mask(kpm_shape),)),
        "kpm_float": (("key_padding_mask",), (rng.normal(size=kpm_shape),)),
        "both": (("attn_mask", "key_padding_mask"), (bool_mask((L, S)), bool_mask(kpm_shape))),
        "causal": (("attn_mask",), (np.triu(np.ones((L, L), bool), 1),)),
        "causal_kpm": (("attn_mask", "key_padding_mask"), (np.triu(np.ones((L, L), bool), 1),
                                                          bool_mask(kpm_shape))),
    }[kind]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", list(MHA_CASES))
def test_mha_matches_torch(rng, case, mode):
    torch = pytest.importorskip("torch")
    mod_kw, qshape, S, call_kw, mask_kind = MHA_CASES[case]
    E, H = 6, 2
    L = qshape[0]
    S = S or L
    batched = len(qshape) == 2
    N = qshape[1] if batched else 1
    dropout = 0.0 if mode == "train" else 0.3                 # eval switches attention dropout off
    theirs = torch.nn.MultiheadAttention(E, H, dropout=dropout, **mod_kw).double()
    ours = MultiheadAttention(E, H, dropout=dropout, dtype=cr.float64, **mod_kw)
    load_torch(ours, theirs)
    ours.train(mode == "train")
    theirs.train(mode == "train")
    kdim, vdim = mod_kw.get("kdim", E), mod_kw.get("vdim", E)

    def shape(n, width):
        if not batched:
            return (n, width)
        return (N, n, width) if mod_kw.get("batch_first") else (n, N, width)
    self_attn = S == L and kdim == E and vdim == E and "cross" not in case
    q = rng.normal(size=shape(L, E))
    k = q if self_attn else rng.normal(size=shape(S, kdim))
    v = q if self_attn else rng.normal(size=shape(S, vdim))
    names, masks = _masks(mask_kind, rng, L, S, N, H, batched)
    kw = dict(call_kw, _mask_names=names)
    call_ours = _mha(kw)

    def call_theirs(m, q, k, v, *ms):
        return _mha(kw)(m, q, k, v, *(torch.tensor(a) for a in ms))
    _check_against_torch(torch, ours, theirs, [q, k, v], lambda m, *xs: call_ours(m, *xs, *masks),
                         lambda m, *xs: call_theirs(m, *xs, *masks), rng)


def test_mha_function_static_kv_matches_torch(rng):
    torch = pytest.importorskip("torch")
    E, H, L, S, N = 6, 2, 3, 4, 2
    x = rng.normal(size=(L, N, E))
    sk, sv = rng.normal(size=(N * H, S, E // H)), rng.normal(size=(N * H, S, E // H))
    w, b, ow, ob = (rng.normal(size=s) for s in ((3 * E, E), (3 * E,), (E, E), (E,)))
    ours = [cr.tensor(a, requires_grad=True) for a in (x, sk, sv, w, b, ow, ob)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, sk, sv, w, b, ow, ob)]

    def run(f, x, sk, sv, w, b, ow, ob):
        return f(x, x, x, E, H, w, b, None, None, False, 0.0, ow, ob, static_k=sk, static_v=sv)
    co, cw = run(multi_head_attention_forward, *ours)
    to, tw = run(torch.nn.functional.multi_head_attention_forward, *theirs)
    close(co, to, "output")
    close(cw, tw, "weights")
    g = rng.normal(size=co.shape)
    (co * g).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    for i, (a, t) in enumerate(zip(ours, theirs)):
        if t.grad is None:
            assert a.grad is None or not np.any(a.grad.data), f"input {i}"
        else:
            close(a.grad, t.grad, f"grad {i}")
    with pytest.raises(ShapeError, match=r"static_k must be \(N \* num_heads, S, head_dim\) = \(4, S, 3\)"):
        run(multi_head_attention_forward, *ours[:1], cr.ones((2, S, 3)), *ours[2:])


@pytest.mark.parametrize("kind", ["self", "cross_masks"])
def test_mha_function_batch_first_is_the_transposed_call(rng, kind):
    """``batch_first=True`` (chainrule's keyword) is the seq-first call on transposed inputs, in values
    and gradients; the layer relies on it."""
    E, H, L, S, N = 6, 3, 4, 5, 2
    w, b, ow, ob = (t64(rng, *s) for s in ((3 * E, E), (3 * E,), (E, E), (E,)))
    q = rng.normal(size=(N, L, E))
    kv = q if kind == "self" else rng.normal(size=(N, S, E))
    S = kv.shape[1]
    masks = {} if kind == "self" else dict(attn_mask=rng.normal(size=(N * H, L, S)),
                                           key_padding_mask=np.array([[False] * (S - 1) + [True]] * N))
    results = []
    for batch_first in (True, False):
        w.grad = b.grad = ow.grad = ob.grad = None
        qt, kvt = (cr.tensor(a if batch_first else a.swapaxes(0, 1), requires_grad=True) for a in (q, kv))
        out, wts = multi_head_attention_forward(qt, kvt, kvt, E, H, w, b, None, None, False, 0.0, ow, ob,
                                                batch_first=batch_first, **masks)
        out = out if batch_first else cr.swapaxes(out, 0, 1)
        (out * out).sum().backward()
        grads = [qt.grad.data, kvt.grad.data]
        grads = grads if batch_first else [gr.swapaxes(0, 1) for gr in grads]
        results.append([out.data, wts.data, *grads, *(p.grad.data.copy() for p in (w, b, ow, ob))])
    for a, c in zip(*results):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-11)    # (key-bias grads: 0 up to rounding)


def test_mha_projections_run_as_2d_products():
    """Speed guard: every projection is one 2-D product (NumPy's 3-D matmul is one product per leading
    index, up to 5x slower) and a batch-first input is never transposed before it."""
    for batch_first in (True, False):
        m = MultiheadAttention(8, 2, batch_first=batch_first, generator=np.random.default_rng(0))
        x = cr.tensor(np.ones((3, 5, 8)), requires_grad=True)
        out = m(x, x, x, need_weights=False)[0]
        graph = nodes(out)
        names = [(getattr(n, "prim", None) and n.prim.name, n.metas[0][0]) for n in graph]
        linears = [shape for name, shape in names if name == "linear"]
        assert len(linears) == 4 and all(len(shape) == 2 for shape in linears)
        if batch_first:
            assert not [shape for name, shape in names if name == "transpose" and len(shape) == 3]


def test_mha_weights_mask_semantics():
    m = MultiheadAttention(4, 2, dtype=cr.float64, generator=np.random.default_rng(0))
    x = cr.tensor(np.random.default_rng(1).normal(size=(3, 2, 4)))
    kpm = np.array([[False, False, True], [False, True, True]])
    _, w = m(x, x, x, key_padding_mask=kpm)
    assert w.shape == (2, 3, 3)
    np.testing.assert_array_equal(w.data[0, :, 2], 0)
    np.testing.assert_array_equal(w.data[1, :, 1:], 0)
    np.testing.assert_allclose(w.data.sum(-1), 1)
    _, w = m(x, x, x, attn_mask=np.triu(np.ones((3, 3), bool), 1), average_attn_weights=False)
    assert w.shape == (2, 2, 3, 3)
    np.testing.assert_array_equal(np.triu(w.data, 1), 0)


def test_mha_dropout_in_train_only():
    m = MultiheadAttention(4, 2, dropout=0.5, dtype=cr.float64, generator=np.random.default_rng(0))
    x = cr.tensor(np.random.default_rng(1).normal(size=(5, 2, 4)))
    _, w_train = m(x, x, x, average_attn_weights=False)
    assert np.any(w_train.data == 0)
    m.eval()
    _, w_eval = m(x, x, x, average_attn_weights=False)
    assert not np.any(w_eval.data == 0)
    kept = w_train.data != 0
    np.testing.assert_allclose(w_train.data[kept], 2 * w_eval.data[kept])


def test_mha_gradgradcheck_small(rng):
    m = MultiheadAttention(4, 2, add_bias_kv=True, dtype=cr.float64, generator=rng)
    q, kv = t64(rng, 2, 1, 4), t64(rng, 3, 1, 4)
    kpm = np.array([[False, True, False]])
    assert cr.gradcheck(lambda q, kv: m(q, kv, kv, key_padding_mask=kpm)[0], (q, kv), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda q, kv: m(q, kv, kv, key_padding_mask=kpm)[0], (q, kv))


def test_mha_function_gradgradcheck_in_weights(rng):
    E, H = 4, 2
    x = t64(rng, 3, 1, E)
    w, b, ow, ob = t64(rng, 3 * E, E), t64(rng, 3 * E), t64(rng, E, E), t64(rng, E)

    def f(w, b, ow, ob):
        return multi_head_attention_forward(x, x, x, E, H, w, b, None, None, False, 0.0, ow, ob)[0]
    assert cr.gradgradcheck(f, (w, b, ow, ob))


def test_mha_errors_name_layer_and_shapes():
    m = MultiheadAttention(4, 2)
    x = cr.ones((3, 2, 4))
    with pytest.raises(ValueError, match="embed_dim=6 must be divisible by num_heads=4"):
        MultiheadAttention(6, 4)
    with pytest.raises(ShapeError, match=r"MultiheadAttention: query of shape \(3, 2, 5\).*embed_dim=4"):
        m(cr.ones((3, 2, 5)), x, x)
    with pytest.raises(ShapeError, match=r"MultiheadAttention:.*query \(3, 2, 4\).*key \(2, 4\)"):
        m(x, cr.ones((2, 4)), cr.ones((2, 4)))
    with pytest.raises(ShapeError, match=r"2-D attn_mask must be \(L, S\) = \(3, 3\), got \(3, 4\)"):
        m(x, x, x, attn_mask=np.zeros((3, 4), bool))
    with pytest.raises(ShapeError, match=r"3-D attn_mask must be \(N \* num_heads, L, S\) = \(4, 3, 3\)"):
        m(x, x, x, attn_mask=np.zeros((2, 3, 3)))
    with pytest.raises(ShapeError, match=r"key_padding_mask must be \(N, S\) = \(2, 3\), got \(3, 2\)"):
        m(x, x, x, key_padding_mask=np.zeros((3, 2), bool))
    with pytest.raises(ShapeError, match="different batch sizes"):
        m(x, cr.ones((3, 1, 4)), cr.ones((3, 1, 4)))
    with pytest.raises(ValueError, match="is_causal=True is a hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(TypeError, match="key_padding_mask must be boolean or floating"):
        m(x, x, x, key_padding_mask=np.zeros((2, 3), int))
    with pytest.raises(ShapeError, match=r"query must be \(L, E\) unbatched or \(L, N, E\)"):
        m(cr.ones(4), x, x)
