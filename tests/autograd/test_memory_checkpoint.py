"""cr.checkpoint / checkpoint_sequential / plan_checkpoints: same gradients, less memory."""
import itertools

import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd.checkpoint import _min_budget, _peak, _solve


def _t(shape, rng, requires_grad=True):
    return cr.tensor(rng.standard_normal(shape), requires_grad=requires_grad)


def _grads(fn, inputs, use_checkpoint, **kw):
    for x in inputs:
        x.grad = None
    out = cr.checkpoint(fn, *inputs, **kw) if use_checkpoint else fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    total = sum((o * o).sum() for o in outs if isinstance(o, cr.Tensor) and o.requires_grad)
    total.backward()
    return [x.grad.data.copy() for x in inputs]


COMPOSITIONS = {
    "tanh_matmul": lambda x, w: cr.tanh(x @ w) * x[:, :1],
    "softmax_logsumexp": lambda x, w: cr.softmax(x @ w, axis=-1) + cr.logsumexp(x, axis=1, keepdims=True),
    "where_relu_getitem": lambda x, w: cr.where(x > 0, cr.relu(x), cr.exp(x))[1:, :3] @ w[:3],
    "einsum_concat": lambda x, w: cr.concatenate([cr.einsum("ij,jk->ik", x, w), cr.sin(x)], axis=1),
    "reductions": lambda x, w: cr.amax(x, axis=0) * cr.mean(w) + cr.sqrt(cr.sum(x * x) + 1.0),
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_checkpoint_gradients_equal_plain(rng, name):
    x, w = _t((4, 5), rng), _t((5, 5), rng)
    fn = COMPOSITIONS[name]
    plain = _grads(fn, [x, w], False)
    ckpt = _grads(fn, [x, w], True)
    for a, b in zip(plain, ckpt):
        np.testing.assert_array_equal(a, b)


def _dropout(h):
    keep = np.random.random(h.shape) > 0.5                            # NumPy's global RNG
    noise = cr.random.default_generator.standard_normal(h.shape)      # chainrule's generator
    return h * keep * 2.0 + 0.01 * noise * h


def test_rng_inside_gives_the_same_mask_on_recompute(rng):
    x, w = _t((6, 6), rng), _t((6, 6), rng)
    fn = lambda x, w: _dropout(cr.tanh(x @ w))                      # noqa: E731

    def run(use_checkpoint, **kw):
        np.random.seed(7)
        cr.random.manual_seed(7)
        return _grads(fn, [x, w], use_checkpoint, **kw)

    plain, ckpt = run(False), run(True)
    for a, b in zip(plain, ckpt):
        np.testing.assert_array_equal(a, b)
    np.random.seed(7)
    cr.random.manual_seed(7)
    unpreserved = run(True, preserve_rng_state=False)
    assert not np.allclose(unpreserved[0], plain[0])             # a fresh mask in backward


def test_backward_leaves_the_callers_rng_stream_alone(rng):
    x = _t((3,), rng)
    np.random.seed(5)
    cr.checkpoint(_dropout, x).sum()
    expected_next = np.random.random()
    np.random.seed(5)
    y = cr.checkpoint(_dropout, x).sum()
    y.backward()                       # replays the saved state, then puts the caller's back
    assert np.random.random() == expected_next


def test_create_graph_through_checkpoint(rng):
    x0 = rng.standard_normal((3, 4))
    fn = lambda x: (cr.sin(x) * x * x).sum()                           # noqa: E731

    def second(use_checkpoint):
        x = cr.tensor(x0, requires_grad=True)
        y = cr.checkpoint(fn, x) if use_checkpoint else fn(x)
        (gx,) = cr.autograd.grad(y, x, create_graph=True)
        (ggx,) = cr.autograd.grad((gx * gx).sum(), x)
        return gx.data, ggx.data

    for a, b in zip(second(False), second(True)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_several_inputs_outputs_and_non_tensor_args(rng):
    x, y = _t((3, 3), rng), _t((3,), rng)

    def fn(x, scale, y, mode, nothing):
        assert mode == "sum" and nothing is None
        a = cr.exp(x) * scale
        return a + y, cr.tanh(y) * 3.0, 7

    out_plain = fn(x, 2.0, y, "sum", None)
    (out_plain[0].sum() + out_plain[1].sum()).backward()
    gp = [x.grad.data.copy(), y.grad.data.copy()]
    x.grad = y.grad = None
    out = cr.checkpoint(fn, x, 2.0, y, "sum", None)
    assert out[2] == 7
    (out[0].sum() + out[1].sum()).backward()
    np.testing.assert_array_equal(gp[0], x.grad.data)
    np.testing.assert_array_equal(gp[1], y.grad.data)


def test_outputs_that_do_not_require_grad(rng):
    x = _t((4,), rng)

    def fn(x):
        return cr.exp(x), cr.argmax(x), x.detach() * 2

    out, idx, const = cr.checkpoint(fn, x)
    assert int(idx.item()) == int(np.argmax(x.data))
    (out.sum() + const.sum()).backward()
    np.testing.assert_allclose(x.grad.data, np.exp(x.data))


def test_closure_parameters_get_gradients_even_when_no_input_requires_grad(rng):
    w = _t((4, 4), rng)
    x = _t((2, 4), rng, requires_grad=False)
    cr.checkpoint(lambda x: cr.tanh(x @ w), x).sum().backward()
    g_ckpt = w.grad.data.copy()
    w.grad = None
    cr.tanh(x @ w).sum().backward()
    np.testing.assert_array_equal(g_ckpt, w.grad.data)


def test_nested_checkpoints(rng):
    x, w = _t((3, 3), rng), _t((3, 3), rng)
    inner = lambda h, w: cr.tanh(h @ w)                                 # noqa: E731
    outer = lambda x, w: cr.exp(cr.checkpoint(inner, cr.sin(x), w)) * x  # noqa: E731
    plain = _grads(lambda x, w: cr.exp(inner(cr.sin(x), w)) * x, [x, w], False)
    nested = _grads(outer, [x, w], True)
    for a, b in zip(plain, nested):
        np.testing.assert_array_equal(a, b)


def test_forward_mode_runs_through(rng):
    x0, t0 = rng.standard_normal(5), rng.standard_normal(5)
    fn = lambda x: cr.tanh(x) * x                                       # noqa: E731
    with cr.forward_ad.dual_level():
        out = cr.checkpoint(fn, cr.forward_ad.make_dual(cr.tensor(x0), cr.tensor(t0)))
        tangent = cr.forward_ad.unpack_dual(out).tangent.data
    expected = (1 - np.tanh(x0) ** 2) * x0 * t0 + np.tanh(x0) * t0
    np.testing.assert_allclose(tangent, expected, rtol=1e-12)


def test_second_backward_without_retain_graph_raises(rng):
    x = _t((3,), rng)
    y = cr.checkpoint(cr.exp, x).sum()
    y.backward()
    with pytest.raises(cr.GraphError):
        y.backward()


def test_checkpoint_saves_only_the_inputs(rng):
    x, w = _t((64, 32), rng), _t((32, 32), rng)
    fn = lambda x: cr.tanh(cr.tanh(x @ w) @ w)                         # noqa: E731
    with cr.profile() as p:
        y = cr.checkpoint(fn, x).sum()
        assert p.saved_bytes == x.nbytes
        y.backward()
    assert p.saved_bytes == 0
    with cr.profile() as q:
        fn(x).sum().backward()
    assert p.peak_saved_bytes < q.peak_saved_bytes + x.nbytes


def _mlp(rng, n, width, batch):
    ws = [cr.tensor(rng.standard_normal((width, width)) / np.sqrt(width), requires_grad=True)
          for _ in range(n)]
    layers = [lambda h, w=w: cr.tanh(h @ w) for w in ws]
    return ws, layers, cr.tensor(rng.standard_normal((batch, width)), requires_grad=True)


@pytest.mark.parametrize("segments", [None, 1, 2, 4, 16])
def test_checkpoint_sequential_gradients_equal(rng, segments):
    ws, layers, x = _mlp(rng, 16, 8, 4)
    h = x
    for f in layers:
        h = f(h)
    h.sum().backward()
    expected = [t.grad.data.copy() for t in [x] + ws]
    for t in [x] + ws:
        t.grad = None
    cr.checkpoint_sequential(layers, segments, x).sum().backward()
    for a, t in zip(expected, [x] + ws):
        np.testing.assert_array_equal(a, t.grad.data)


def test_checkpoint_sequential_memory_follows_sqrt_n(rng):
    ws, layers, x = _mlp(rng, 36, 16, 64)
    with cr.profile() as plain:
        h = x
        for f in layers:
            h = f(h)
        h.sum().backward()
    with cr.profile() as ck:
        cr.checkpoint_sequential(layers, None, x).sum().backward()
    per_layer = plain.peak_saved_bytes / 36
    assert ck.peak_saved_bytes <= 2.5 * 6 * per_layer
    assert ck.peak_saved_bytes < plain.peak_saved_bytes / 2


def test_checkpoint_sequential_bad_segments(rng):
    with pytest.raises(ValueError, match="segments must be an integer between 1 and"):
        cr.checkpoint_sequential([cr.exp] * 3, 5, _t((2,), rng))
    with pytest.raises(TypeError, match="list of callables"):
        cr.checkpoint_sequential([1, 2], 1, _t((2,), rng))


@pytest.mark.parametrize("use_reentrant", [True, False, None])
def test_checkpoint_accepts_pytorch_use_reentrant(use_reentrant):
    x = cr.tensor([0.5, 1.0], dtype=cr.float64, requires_grad=True)
    y = cr.checkpoint(lambda v: cr.tanh(v) * v, x, use_reentrant=use_reentrant).sum()
    y.backward()
    t = np.tanh([0.5, 1.0])
    np.testing.assert_allclose(x.grad.data, t + np.array([0.5, 1.0]) * (1 - t ** 2))
    z = cr.checkpoint_sequential([cr.tanh] * 4, 2, x, use_reentrant=use_reentrant)
    assert z.shape == (2,)


def test_checkpoint_under_forward_mode_keeps_tangents_of_closed_over_tensors():
    # The tangent enters through a tensor fn closes over, not through checkpoint's arguments.
    x = np.array([0.5, 1.0])

    def f(w):
        return cr.checkpoint(lambda v: v * w, cr.tensor(x, dtype=cr.float64))

    out, tout = cr.jvp(f, (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),))
    np.testing.assert_allclose(np.asarray(out), [0.5, 2.0])
    np.testing.assert_allclose(np.asarray(tout), x)      # was [0, 0]: the tangent was dropped


def test_hvp_through_checkpoint_with_closed_over_parameter():
    w = np.array([0.3, -0.7])

    def f(x):
        return cr.checkpoint(lambda v: cr.tanh(v * x), cr.tensor(w)).sum()

    def g(x):
        return cr.tanh(cr.tensor(w) * x).sum()

    v = np.array([1.0, 0.5])
    np.testing.assert_allclose(cr.hvp(f, (np.array([0.2, 0.4]),), (v,))[0],
                               cr.hvp(g, (np.array([0.2, 0.4]),), (v,))[0])


# ----- planner -----
def _brute_force(layer_bytes, layer_flops, input_bytes, budget):
    n, best = len(layer_bytes), None
    for cuts in itertools.product([0, 1], repeat=n - 1):
        edges = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        bounds = list(zip(edges[:-1], edges[1:]))
        for ckpt in itertools.product([False, True], repeat=len(bounds)):
            if _peak(bounds, list(ckpt), layer_bytes, input_bytes) > budget:
                continue
            flops = sum(sum(layer_flops[a:b]) for (a, b), c in zip(bounds, ckpt) if c)
            best = flops if best is None else min(best, flops)
    return best


@pytest.mark.parametrize("profile_name,layer_bytes", [
    ("uniform", [100] * 8),
    ("growing", [20, 40, 60, 80, 100, 120, 140, 160]),
    ("bottleneck", [200, 200, 10, 10, 10, 200, 200, 10]),
])
@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.8])
def test_planner_is_optimal_under_its_model(profile_name, layer_bytes, fraction):
    input_bytes = [b // 4 for b in layer_bytes]
    layer_flops = [b * 3 for b in layer_bytes]
    budget = max(int(fraction * sum(layer_bytes)), _min_budget(layer_bytes, input_bytes))
    plan = _solve(layer_bytes, layer_flops, input_bytes, budget)
    assert plan.predicted_peak <= budget
    assert plan.recompute_flops == _brute_force(layer_bytes, layer_flops, input_bytes, budget)


@pytest.mark.parametrize("widths", [[16] * 12, [8, 8, 16, 16, 32, 32, 32, 32, 16, 16, 8, 8],
                                    [32, 4, 32, 4, 32, 4, 32, 4, 32, 4, 32, 4]])
def test_planner_respects_its_budget_when_measured(rng, widths):
    ws = [cr.tensor(rng.standard_normal((a, b)) / np.sqrt(a), requires_grad=True)
          for a, b in zip(widths, widths[1:] + widths[:1])]
    layers = [lambda h, w=w: cr.tanh(h @ w) for w in ws]
    x = cr.tensor(rng.standard_normal((32, widths[0])), requires_grad=True)
    with cr.profile() as plain:
        h = x
        for f in layers:
            h = f(h)
        h.sum().backward()
    expected = [w.grad.data.copy() for w in ws]
    for w in ws:
        w.grad = None
    budget = plain.peak_saved_bytes // 2
    plan = cr.plan_checkpoints(layers, x, budget)
    assert any(plan.checkpointed) and "checkpoint plan for 12 layers" in str(plan)
    with cr.profile() as p:
        cr.checkpoint_sequential(layers, None, x, memory_budget=budget).sum().backward()
    assert p.peak_saved_bytes <= budget
    for a, w in zip(expected, ws):
        np.testing.assert_array_equal(a, w.grad.data)
    assert cr.plan_checkpoints(layers, x, budget) is plan          # measured once, then cached


def test_planner_prefers_no_recomputation_when_everything_fits(rng):
    _, layers, x = _mlp(rng, 6, 8, 4)
    plan = cr.plan_checkpoints(layers, x, 10 ** 9)
    assert plan.checkpointed == [False] and plan.recompute_flops == 0


def test_planner_infeasible_budget_names_the_minimum(rng):
    _, layers, x = _mlp(rng, 6, 8, 4)
    with pytest.raises(ValueError, match="smallest feasible budget") as err:
        cr.plan_checkpoints(layers, x, 10)
    minimum = int(str(err.value).split("about ")[1].split(" bytes")[0].replace(",", ""))
    assert cr.plan_checkpoints(layers, x, minimum).predicted_peak <= minimum
