"""Normalisation layers and functions: against torch in float64 (outputs, input and parameter gradients,
buffers after several training steps, train and eval), gradchecked to second order, and their errors."""
import inspect

import numpy as np
import pytest

import chainrule as cr
from chainrule.nn import normalization as N
from chainrule.nn.functional import normalization as NF
from chainrule.nn.functional.normalization import batch_norm, group_norm, instance_norm, rms_norm
from chainrule.nn.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm

RTOL, ATOL = 1e-10, 1e-12


def t64(rng, *shape):
    return cr.tensor(rng.normal(size=shape), dtype=cr.float64, requires_grad=True)


# ----- torch as the oracle -----
def _randomize(torch, module, rng):
    """Give torch's module random parameters and running statistics, so loading them is tested."""
    with torch.no_grad():
        for name, t in module.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            values = rng.uniform(0.5, 2.0, size=t.shape) if name.endswith("running_var") \
                else rng.normal(size=t.shape)
            t.copy_(torch.tensor(values))


def _load(ours, theirs):
    result = ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []


def _step(torch, ours, theirs, x, rng):
    """One forward and backward of both; compare the output, the input's and the parameters' gradients."""
    cx, tx = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours.zero_grad()
    theirs.zero_grad()
    out, ref = ours(cx), theirs(tx)
    assert out.shape == tuple(ref.shape) and out.dtype == np.float64
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    g = rng.normal(size=out.shape)
    out.backward(cr.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    params = dict(theirs.named_parameters())
    assert sorted(name for name, _ in ours.named_parameters()) == sorted(params)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, params[name].grad.numpy(), rtol=RTOL, atol=ATOL)


def _same_state(ours, theirs):
    mine, ref = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(ref)
    for k, v in ref.items():
        assert mine[k].shape == tuple(v.shape), k
        np.testing.assert_allclose(mine[k].data, v.numpy(), rtol=RTOL, atol=ATOL, err_msg=k)


def _train_then_eval(torch, ours, theirs, shapes, rng):
    _randomize(torch, theirs, rng)
    _load(ours, theirs)
    ours.train(), theirs.train()
    for shape in shapes:                                   # several steps, the buffers compared each time
        _step(torch, ours, theirs, rng.normal(size=shape) * 2 + 0.5, rng)
        _same_state(ours, theirs)
    ours.eval(), theirs.eval()
    _step(torch, ours, theirs, rng.normal(size=shapes[0]), rng)
    _same_state(ours, theirs)


BN_CONFIGS = [dict(), dict(momentum=None), dict(momentum=0.3, affine=False), dict(track_running_stats=False),
              dict(bias=False, eps=1e-3)]


@pytest.mark.parametrize("config", BN_CONFIGS, ids=str)
@pytest.mark.parametrize("name,shapes", [
    ("BatchNorm1d", [(4, 3), (7, 3), (2, 3)]),
    ("BatchNorm1d", [(1, 3, 5), (3, 3, 4), (2, 3, 1)]),
    ("BatchNorm2d", [(1, 3, 2, 3), (5, 3, 3, 3), (2, 3, 1, 2)]),
], ids=["1d-NC", "1d-NCL", "2d"])
def test_batchnorm_matches_torch(rng, name, shapes, config):
    torch = pytest.importorskip("torch")
    ours = getattr(N, name)(3, dtype=cr.float64, **config)
    theirs = getattr(torch.nn, name)(3, dtype=torch.float64, **config)
    _train_then_eval(torch, ours, theirs, shapes, rng)


IN_CONFIGS = [dict(), dict(affine=True), dict(track_running_stats=True), dict(track_running_stats=True, momentum=None),
              dict(affine=True, track_running_stats=True, momentum=0.25)]


@pytest.mark.parametrize("config", IN_CONFIGS, ids=str)
@pytest.mark.parametrize("name,shapes", [
    ("InstanceNorm1d", [(2, 3, 5), (1, 3, 4), (3, 3, 2)]),
    ("InstanceNorm1d", [(3, 5), (3, 2)]),                      # unbatched (C, L)
    ("InstanceNorm2d", [(2, 3, 3, 4), (1, 3, 2, 1)]),
    ("InstanceNorm2d", [(3, 3, 3)]),                           # unbatched (C, H, W)
], ids=["1d", "1d-unbatched", "2d", "2d-unbatched"])
def test_instancenorm_matches_torch(rng, name, shapes, config):
    torch = pytest.importorskip("torch")
    ours = getattr(N, name)(3, dtype=cr.float64, **config)
    theirs = getattr(torch.nn, name)(3, dtype=torch.float64, **config)
    _train_then_eval(torch, ours, theirs, shapes, rng)


@pytest.mark.parametrize("groups,channels,shape,config", [
    (2, 6, (3, 6), dict()), (3, 6, (1, 6, 5), dict()), (1, 4, (2, 4, 3, 3), dict(eps=1e-3)),
    (4, 4, (2, 4, 3), dict(affine=False)), (2, 4, (1, 4, 2, 3), dict(bias=False)),
])
def test_groupnorm_matches_torch(rng, groups, channels, shape, config):
    torch = pytest.importorskip("torch")
    ours = GroupNorm(groups, channels, dtype=cr.float64, **config)
    theirs = torch.nn.GroupNorm(groups, channels, dtype=torch.float64, **config)
    _train_then_eval(torch, ours, theirs, [shape, shape], rng)


@pytest.mark.parametrize("normalized_shape,shape,config", [
    (5, (3, 5), dict()), (5, (1, 5), dict(eps=1e-6)), ((2, 3), (4, 2, 3), dict()),
    (3, (2, 4, 3), dict(elementwise_affine=False)), ((4,), (4,), dict(eps=0.1)),
])
def test_rmsnorm_matches_torch(rng, normalized_shape, shape, config):
    torch = pytest.importorskip("torch")
    ours = RMSNorm(normalized_shape, dtype=cr.float64, **config)
    theirs = torch.nn.RMSNorm(normalized_shape, dtype=torch.float64, **config)
    _train_then_eval(torch, ours, theirs, [shape], rng)


def test_rmsnorm_eps_none_is_the_dtype_epsilon(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(3, 4)) * 1e-8                  # eps dominates: the default shows
    for dtype in ("float64", "float32"):
        ours = RMSNorm(4, dtype=dtype)(cr.tensor(x.astype(dtype))).data
        ref = torch.nn.RMSNorm(4, dtype=getattr(torch, dtype))(torch.tensor(x.astype(dtype))).detach().numpy()
        np.testing.assert_allclose(ours, ref, rtol=1e-5 if dtype == "float32" else 1e-10)
    np.testing.assert_allclose(rms_norm(cr.tensor(x), 4).data, x / np.sqrt((x * x).mean(-1, keepdims=True)
                                                                            + np.finfo(np.float64).eps))


def test_state_dict_keys_shapes_and_init_match_torch():
    torch = pytest.importorskip("torch")
    cases = [("BatchNorm1d", (5,), {}), ("BatchNorm2d", (4,), dict(affine=False)),
             ("BatchNorm1d", (3,), dict(track_running_stats=False)), ("InstanceNorm1d", (3,), {}),
             ("InstanceNorm2d", (3,), dict(affine=True, track_running_stats=True)),
             ("GroupNorm", (2, 6), {}), ("GroupNorm", (2, 6), dict(bias=False)), ("RMSNorm", ((2, 3),), {}),
             ("RMSNorm", (3,), dict(elementwise_affine=False))]
    for name, args, kwargs in cases:
        ours, theirs = getattr(N, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
        mine, ref = ours.state_dict(), theirs.state_dict()
        assert list(mine) == list(ref), name
        for k, v in ref.items():
            assert mine[k].shape == tuple(v.shape), (name, k)
            np.testing.assert_array_equal(mine[k].data, v.numpy(), err_msg=f"{name}.{k}")
        assert mine.get("num_batches_tracked", cr.tensor(np.int64(0))).dtype == np.int64
        assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()], name
        assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()], name
        assert ours.extra_repr() == theirs.extra_repr(), name
        if "weight" in mine:
            assert ours.weight.dtype == cr.get_default_dtype()


# ----- the functional forms, buffers updated in place -----
def test_functional_forms_match_torch(rng):
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    x, w, b = rng.normal(size=(4, 6, 3)), rng.normal(size=6), rng.normal(size=6)
    rm, rv = rng.normal(size=6), rng.uniform(0.5, 2, size=6)
    ours_rm, ours_rv = cr.tensor(rm), cr.tensor(rv)
    ref_rm, ref_rv = torch.tensor(rm), torch.tensor(rv)
    w63 = w[:, None] * np.ones(3)
    pairs = [      # each call in turn, the running statistics moving along in both
        (lambda x, w, b: batch_norm(x, ours_rm, ours_rv, w, b, training=True, momentum=0.2, eps=1e-4),
         lambda x, w, b: tF.batch_norm(x, ref_rm, ref_rv, w, b, training=True, momentum=0.2, eps=1e-4)),
        (lambda x, w, b: batch_norm(x, ours_rm, ours_rv, w, b), lambda x, w, b: tF.batch_norm(x, ref_rm, ref_rv, w, b)),
        (lambda x, w, b: batch_norm(x, None, None, training=True),
         lambda x, w, b: tF.batch_norm(x, None, None, training=True)),
        (lambda x, w, b: instance_norm(x, ours_rm, ours_rv, w, b, momentum=0.3),
         lambda x, w, b: tF.instance_norm(x, ref_rm, ref_rv, w, b, momentum=0.3)),
        (lambda x, w, b: instance_norm(x, ours_rm, ours_rv, use_input_stats=False),
         lambda x, w, b: tF.instance_norm(x, ref_rm, ref_rv, use_input_stats=False)),
        (lambda x, w, b: group_norm(x, 3, w, b, eps=1e-3), lambda x, w, b: tF.group_norm(x, 3, w, b, eps=1e-3)),
        (lambda x, w, b: rms_norm(x, (6, 3), w[:, None] * cr.tensor(np.ones(3))),
         lambda x, w, b: tF.rms_norm(x, (6, 3), w[:, None] * torch.ones(3, dtype=torch.float64))),
        (lambda x, w, b: rms_norm(x, 3, eps=1e-3), lambda x, w, b: tF.rms_norm(x, (3,), eps=1e-3)),
        (lambda x, w, b: rms_norm(x, (6, 3), cr.tensor(w63)),
         lambda x, w, b: tF.rms_norm(x, (6, 3), torch.tensor(w63))),
    ]
    for ours, theirs in pairs:
        cx, cw, cb = (cr.tensor(a, requires_grad=True) for a in (x, w, b))
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        out, ref = ours(cx, cw, cb), theirs(tx, tw, tb)
        np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ours_rm.data, ref_rm.numpy(), rtol=RTOL)
        np.testing.assert_allclose(ours_rv.data, ref_rv.numpy(), rtol=RTOL)
        g = rng.normal(size=x.shape)
        (out * g).sum().backward()
        (ref * torch.tensor(g)).sum().backward()
        for c, t in ((cx, tx), (cw, tw), (cb, tb)):
            if t.grad is None:
                assert c.grad is None
            else:
                np.testing.assert_allclose(c.grad.data, t.grad.numpy(), rtol=RTOL, atol=ATOL)
    assert not np.allclose(ours_rm.data, rm) and not np.allclose(ours_rv.data, rv)    # the buffers did move


def test_running_statistics_follow_the_formula():
    x = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])
    bn = BatchNorm1d(2, momentum=0.25, dtype=cr.float64)
    bn(cr.tensor(x))
    np.testing.assert_allclose(bn.running_mean.data, 0.25 * x.mean(0))
    np.testing.assert_allclose(bn.running_var.data, 0.75 + 0.25 * x.var(0, ddof=1))
    cumulative = BatchNorm1d(2, momentum=None, dtype=cr.float64)
    batches = [x, x * 2 - 1, x ** 2]
    for b in batches:
        cumulative(cr.tensor(b))
    np.testing.assert_allclose(cumulative.running_mean.data, np.mean([b.mean(0) for b in batches], axis=0))
    np.testing.assert_allclose(cumulative.running_var.data, np.mean([b.var(0, ddof=1) for b in batches], axis=0))
    assert int(cumulative.num_batches_tracked) == 3
    cumulative.reset_running_stats()
    np.testing.assert_array_equal(cumulative.running_var.data, [1.0, 1.0])
    assert int(cumulative.num_batches_tracked) == 0


def test_running_statistics_stay_outside_the_graph(rng):
    bn = BatchNorm2d(2, dtype=cr.float64)
    x = t64(rng, 3, 2, 2, 2)
    out = bn(x)
    for buf in (bn.running_mean, bn.running_var, bn.num_batches_tracked):
        assert buf.grad_fn is None and not buf.requires_grad
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    before = bn.running_mean.data.copy()
    (out * out).sum().backward()                  # the update did not break or join the backward
    np.testing.assert_array_equal(bn.running_mean.data, before)
    assert x.grad is not None and bn.weight.grad is not None
    # an eval-mode graph keeps a copy of the statistics: a later training step does not invalidate it
    bn.eval()
    y = bn(x)
    bn.train()
    bn(x)
    y.sum().backward()
    with cr.no_grad():
        bn(x)
    assert int(bn.num_batches_tracked) == 3


def test_eval_without_running_stats_uses_batch_statistics(rng):
    x = rng.normal(size=(5, 3))
    bn = BatchNorm1d(3, track_running_stats=False, affine=False, dtype=cr.float64).eval()
    expected = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5)
    np.testing.assert_allclose(bn(cr.tensor(x)).data, expected, rtol=1e-12)
    assert bn.running_mean is None and list(bn.state_dict()) == []


# ----- derivatives: both modes, second order -----
@pytest.mark.parametrize("make,shape,train", [
    (lambda: BatchNorm1d(2, dtype=cr.float64), (3, 2), True),
    (lambda: BatchNorm1d(2, dtype=cr.float64), (3, 2, 2), False),
    (lambda: BatchNorm2d(2, dtype=cr.float64), (2, 2, 2, 1), True),
    (lambda: InstanceNorm1d(2, affine=True, dtype=cr.float64), (2, 2, 3), True),
    (lambda: GroupNorm(2, 4, dtype=cr.float64), (2, 4, 2), True),
    (lambda: RMSNorm(3, dtype=cr.float64), (2, 3), True),
], ids=["bn1d-train", "bn1d-eval", "bn2d", "instance", "group", "rms"])
def test_layers_gradcheck_both_modes_and_second_order(rng, make, shape, train):
    m = make().train(train)
    params = [p for _, p in m.named_parameters()]
    with cr.no_grad():
        for p in params:
            p.data[...] = rng.normal(size=p.shape)
    names = [n for n, _ in m.named_parameters()]

    def f(x, *ps):
        return cr.func.functional_call(m, dict(zip(names, ps)), (x,))

    x = t64(rng, *shape)
    assert cr.gradcheck(f, (x, *params), modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda x, *ps: (f(x, *ps) ** 2).sum(axis=0), (x, *params))


@pytest.mark.parametrize("fn", [
    lambda x, w, b: batch_norm(x, None, None, w, b, training=True),
    lambda x, w, b: instance_norm(x, weight=w, bias=b),
    lambda x, w, b: group_norm(x, 2, w, b),
    lambda x, w, b: rms_norm(x, 3, w[:3]),
], ids=["batch", "instance", "group", "rms"])
def test_functions_gradgradcheck(rng, fn):
    x, w, b = t64(rng, 2, 4, 3), t64(rng, 4), t64(rng, 4)
    assert cr.gradcheck(fn, (x, w, b), modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, (x, w, b))


def test_vmap_refuses_running_updates_and_runs_without(rng):
    xs = cr.tensor(rng.normal(size=(4, 3, 2)))
    rm, rv = cr.zeros(2, dtype=cr.float64), cr.ones(2, dtype=cr.float64)
    with pytest.raises(cr.VmapError, match="running_mean=None"):
        cr.vmap(lambda x: batch_norm(x, rm, rv, training=True))(xs)
    per_example = np.stack([batch_norm(xs[i], None, None, training=True).data for i in range(4)])
    np.testing.assert_allclose(cr.vmap(lambda x: batch_norm(x, None, None, training=True))(xs).data,
                               per_example, rtol=1e-12)
    np.testing.assert_allclose(cr.vmap(lambda x: group_norm(x, 1))(xs).data,
                               np.stack([group_norm(xs[i], 1).data for i in range(4)]), rtol=1e-12)


def test_float16_input_is_normalised_in_float32():
    x = np.random.default_rng(0).normal(size=(8, 3)) * 300 + 1000     # (x - mean)**2 overflows float16
    x16 = cr.tensor(x.astype(np.float16))
    ref = x.astype(np.float16).astype(np.float64)
    expected = (ref - ref.mean(0)) / np.sqrt(ref.var(0) + 1e-5)
    for out in (batch_norm(x16, None, None, training=True), BatchNorm1d(3)(x16)):
        assert out.dtype == np.float16
        np.testing.assert_allclose(out.data.astype(np.float64), expected, atol=2e-3)
    assert rms_norm(x16, 3).dtype == np.float16 and np.isfinite(rms_norm(x16, 3).data).all()


# ----- training mode is one fused node (ops/normalization.py's batch_norm_train) -----
def _nodes(t):
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and id(node) not in seen:
            seen.add(id(node))
            todo.extend(e[0] for e in node.edges if e is not None)
    return len(seen)


def test_training_batch_norm_is_one_node(rng):
    x = t64(rng, 4, 3, 2, 2)
    out = BatchNorm2d(3, dtype=cr.float64)(x)
    assert repr(out.grad_fn) == "<BatchNormTrainBackward>"
    assert _nodes(out) == 4                        # the node and the accumulators of x, weight and bias
    assert repr(batch_norm(x, None, None, training=True).grad_fn) == "<BatchNormTrainBackward>"


@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm3d_and_second_derivatives_match_torch(rng, affine):
    """5-d input; the input's and weight's gradients of a gradient (create_graph) against torch's."""
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(2, 3, 2, 3, 2)) * 2 + 1
    w, b = rng.normal(size=3), rng.normal(size=3)
    cx, cw, cb = (cr.tensor(v, requires_grad=True) for v in (x, w, b))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    out = batch_norm(cx, None, None, cw if affine else None, cb if affine else None, training=True)
    ref = torch.nn.functional.batch_norm(tx, None, None, tw if affine else None, tb if affine else None, training=True)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    (gx,) = cr.autograd.grad((out ** 3).sum(), (cx,), create_graph=True)
    (rx,) = torch.autograd.grad((ref ** 3).sum(), (tx,), create_graph=True)
    np.testing.assert_allclose(gx.data, rx.detach().numpy(), rtol=RTOL, atol=ATOL)
    wrt = (cx, cw) if affine else (cx,)
    got = cr.autograd.grad((gx * gx).sum(), wrt)
    want = torch.autograd.grad((rx * rx).sum(), (tx, tw) if affine else (tx,))
    for a, e in zip(got, want):
        np.testing.assert_allclose(a.data, e.numpy(), rtol=1e-9, atol=1e-11)


def test_float32_with_a_large_mean_is_as_accurate_as_torch(rng):
    """Statistics accumulated in float64 over the batch and the output from the centred input, as
    PyTorch's CPU kernels: float32 with mean/std = 100 is as close to the float64 result as torch's
    float32 (within a factor of 2, or 1e-6 of the largest value)."""
    torch = pytest.importorskip("torch")
    x = (rng.normal(size=(8, 4, 6, 6)) * 0.5 + 50).astype(np.float32)
    g = rng.normal(size=x.shape).astype(np.float32)
    w, b = rng.normal(size=4).astype(np.float32), rng.normal(size=4).astype(np.float32)
    cx, cw, cb = (cr.tensor(v, requires_grad=True) for v in (x, w, b))
    out = batch_norm(cx, None, None, cw, cb, training=True)
    out.backward(cr.tensor(g))
    assert out.dtype == cx.grad.dtype == cw.grad.dtype == np.float32

    def torch_step(dtype):
        ts = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in (x, w, b)]
        ref = torch.nn.functional.batch_norm(ts[0], None, None, ts[1], ts[2], training=True)
        ref.backward(torch.tensor(g, dtype=dtype))
        return [t.detach().numpy().astype(np.float64) for t in (ref, *(t.grad for t in ts))]
    for ours, exact, theirs in zip((out, cx.grad, cw.grad, cb.grad), torch_step(torch.float64),
                                   torch_step(torch.float32)):
        scale = np.abs(exact).max()
        assert np.abs(ours.data - exact).max() <= max(2 * np.abs(theirs - exact).max(), 1e-6 * scale)


def test_the_output_may_change_in_place_and_the_input_changed_between_calls(rng):
    """The node keeps the input, not the output (as PyTorch: BatchNorm then ReLU(inplace=True)); the
    running update reads the statistics of the call it follows, never an earlier call's."""
    x, w, b = t64(rng, 4, 3), t64(rng, 3), t64(rng, 3)
    g = rng.normal(size=(4, 3))
    batch_norm(x, None, None, w, b, training=True).backward(cr.tensor(g))
    want = [t.grad.data.copy() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    out = batch_norm(x, None, None, w, b, training=True)
    out += 1.0
    out.backward(cr.tensor(g))
    for t, e in zip((x, w, b), want):
        np.testing.assert_allclose(t.grad.data, e, rtol=1e-13)
    rm, rv = cr.zeros(3, dtype=cr.float64), cr.ones(3, dtype=cr.float64)
    data = rng.normal(size=(5, 3))
    arr = data.copy()
    batch_norm(cr.tensor(arr), None, None, training=True)      # no running statistics: nothing read
    arr += 10.0                                                 # the same array, changed in place
    batch_norm(cr.tensor(arr), rm, rv, training=True, momentum=1.0)
    np.testing.assert_allclose(rm.data, (data + 10).mean(0), rtol=1e-13)
    np.testing.assert_allclose(rv.data, data.var(0, ddof=1), rtol=1e-12)


def test_a_step_of_the_conv_block_matches_torch_in_float32(rng):
    """The benchmark's block (Conv2d + BatchNorm2d + ReLU, small): output, every gradient, buffers."""
    torch = pytest.importorskip("torch")
    ours = cr.nn.Sequential(cr.nn.Conv2d(3, 4, 3, padding=1, generator=np.random.default_rng(1)),
                            BatchNorm2d(4), cr.nn.ReLU()).train()
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    theirs.load_state_dict({k: torch.tensor(np.array(v.data)) for k, v in ours.state_dict().items()})
    x = rng.normal(size=(4, 3, 6, 6)).astype(np.float32)
    out, ref = ours(cr.tensor(x)), theirs(torch.tensor(x))
    cr.mean(out * out).backward()
    torch.mean(ref * ref).backward()
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, params[name].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    for name, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].data, v.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)


def test_batch_norm_train_refuses_mismatched_operands():
    from chainrule.ops.normalization import batch_norm_train
    with pytest.raises(cr.ShapeError, match=r"batch_norm_train: input \(2, 3\), weight \(2,\) and bias \(3,\)"):
        batch_norm_train(cr.ones((2, 3)), cr.ones(2), cr.zeros(3), 1e-5)


# ----- errors name the layer, the shapes and the fix -----
def test_errors_name_the_layer_shapes_and_fix():
    with pytest.raises(cr.ShapeError, match=r"BatchNorm1d: expected 2D \(N, C\) or 3D .* 4D input of shape "
                                            r"\(1, 3, 2, 2\); for \(N, C, H, W\) images use BatchNorm2d"):
        BatchNorm1d(3)(cr.zeros((1, 3, 2, 2)))
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D"):
        BatchNorm2d(3)(cr.zeros((2, 3)))
    with pytest.raises(cr.ShapeError, match=r"input of shape \(2, 4\) has 4 channels .* num_features=3"):
        BatchNorm1d(3)(cr.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"more than 1 value per channel when training.*\(1, 3\)"):
        BatchNorm1d(3)(cr.zeros((1, 3)))
    BatchNorm1d(3).eval()(cr.zeros((1, 3)))                            # eval mode takes a batch of one
    with pytest.raises(ValueError, match="running_mean and running_var are needed when training=False"):
        batch_norm(cr.zeros((2, 3)), None, None)
    with pytest.raises(ValueError, match="pass both running_mean and running_var"):
        batch_norm(cr.zeros((2, 3)), cr.zeros(3), None, training=True)
    with pytest.raises(cr.ShapeError, match=r"running_var must have one entry per channel, shape \(3,\)"):
        batch_norm(cr.zeros((2, 3)), cr.zeros(3), cr.ones(2), training=True)
    with pytest.raises(cr.DTypeError, match="floating point"):
        batch_norm(cr.tensor(np.zeros((2, 3), dtype=np.int64)), None, None, training=True)
    with pytest.raises(ValueError, match="momentum must be a number"):
        batch_norm(cr.ones((2, 3)), cr.zeros(3), cr.ones(3), training=True, momentum=None)
    with pytest.raises(ValueError, match=r"momentum must be in \[0, 1\]"):
        BatchNorm1d(3, momentum=1.5)
    with pytest.raises(ValueError, match=r"InstanceNorm1d: expected more than 1 value per instance"):
        InstanceNorm1d(3)(cr.zeros((2, 3, 1)))
    with pytest.raises(cr.ShapeError, match=r"InstanceNorm2d: expected 3D \(C, H, W\) or 4D"):
        InstanceNorm2d(3)(cr.zeros((2, 3)))
    with pytest.raises(cr.ShapeError, match="has 4 channels on axis 1, but num_features=3"):
        InstanceNorm1d(3, affine=True)(cr.zeros((2, 4, 5)))
    with pytest.warns(UserWarning, match="unused, since affine=False"):
        InstanceNorm1d(3)(cr.zeros((2, 4, 5)))
    with pytest.raises(ValueError, match=r"num_channels \(6\) must be divisible by num_groups \(4\)"):
        GroupNorm(4, 6)
    with pytest.raises(cr.ShapeError, match=r"GroupNorm: input of shape \(2, 5, 3\) has 5 channels"):
        GroupNorm(2, 4)(cr.zeros((2, 5, 3)))
    with pytest.raises(cr.ShapeError, match="num_groups=4 does not divide"):
        group_norm(cr.zeros((2, 6)), 4)
    with pytest.raises(ValueError, match="more than 1 value per group"):
        group_norm(cr.zeros((1, 2)), 2)
    with pytest.raises(cr.ShapeError, match=r"RMSNorm: input of shape \(2, 5\) does not end in normalized_shape "
                                            r"\(4,\).*normalized_shape=\(5,\)"):
        RMSNorm(4)(cr.zeros((2, 5)))
    with pytest.raises(ValueError, match="num_features must be a positive integer"):
        BatchNorm2d(0)


# ----- every public class and function carries a doctest -----
@pytest.mark.parametrize("module,expected", [(N, 7), (NF, 5)], ids=["modules", "functions"])
def test_public_names_have_doctests(module, expected):
    assert len(module.__all__) == expected
    for name in module.__all__:
        obj = getattr(module, name)
        assert inspect.isclass(obj) or inspect.isfunction(obj)
        assert ">>>" in (obj.__doc__ or ""), name
