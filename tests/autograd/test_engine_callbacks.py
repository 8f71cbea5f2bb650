"""Post-accumulate-grad hooks and final callbacks (queue_callback), against PyTorch 2 where it has them."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd import engine
from chainrule.core.grad_mode import STATE, _State
from chainrule.core.graph import other_refs
from chainrule.errors import GraphError


def _leaf(values=(1.0, 2.0)):
    return cr.tensor(list(values), requires_grad=True)


# ----- register_post_accumulate_grad_hook -----
def test_post_hook_sees_accumulated_grad_each_backward():
    w = _leaf()
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.data.copy()))
    (w * 3).sum().backward()
    (w * 3).sum().backward()                    # adds to the existing .grad: called again
    np.testing.assert_array_equal(np.array(seen), [[3.0, 3.0], [6.0, 6.0]])
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2
    handle.remove()                             # twice: nothing


def test_post_hook_called_once_per_backward_for_a_leaf_used_many_times():
    w = _leaf()
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(t))
    (w * w + w.exp() + w * 2).sum().backward()
    assert len(calls) == 1 and calls[0] is w


def test_post_hooks_run_in_order_and_can_change_grad_in_place():
    w = _leaf()
    order = []
    w.register_post_accumulate_grad_hook(lambda t: order.append("a"))

    def zero(t):
        order.append("b")
        t.grad.data[...] = 0.0
    w.register_post_accumulate_grad_hook(zero)
    w.sum().backward()
    assert order == ["a", "b"]
    np.testing.assert_array_equal(w.grad.data, [0.0, 0.0])


def test_post_hook_handle_is_callable_and_a_context_manager():
    w = _leaf()
    calls = []
    h = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    h()                                          # calling removes, as register_hook's remover
    w.sum().backward()
    with w.register_post_accumulate_grad_hook(lambda t: calls.append(2)):
        w.sum().backward()
    w.sum().backward()
    assert calls == [2]


def test_register_hook_returns_a_handle_with_remove():
    w = _leaf()
    h = w.register_hook(lambda g: g * 10)
    h.remove()
    w.sum().backward()
    np.testing.assert_array_equal(w.grad.data, [1.0, 1.0])


def test_post_hook_refused_on_non_leaf_and_on_no_grad_tensor():
    w = _leaf()
    with pytest.raises(GraphError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(GraphError, match="does not require grad"):
        cr.tensor(1.0).register_post_accumulate_grad_hook(lambda t: None)


def test_post_hook_must_return_none():
    w = _leaf()
    w.register_post_accumulate_grad_hook(lambda t: t.grad)
    with pytest.raises(GraphError, match="must return None"):
        w.sum().backward()


def test_post_hook_not_called_by_autograd_grad_nor_for_unrequested_leaf():
    w, z = _leaf(), _leaf()
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append("w"))
    z.register_post_accumulate_grad_hook(lambda t: calls.append("z"))
    cr.autograd.grad((w * z).sum(), [w, z])
    assert calls == []
    (w * z).sum().backward(inputs=[z])
    assert calls == ["z"]
    w.requires_grad_(False)
    (w * z).sum().backward()
    assert calls == ["z", "z"]


def test_post_hook_under_create_graph_sees_a_grad_with_history():
    w = _leaf()
    got = []
    w.register_post_accumulate_grad_hook(lambda t: got.append(t.grad.requires_grad))
    (w ** 3).sum().backward(create_graph=True)
    assert got == [True]


def test_post_hook_matches_torch():
    torch = pytest.importorskip("torch")
    for mod, mk in ((cr, lambda v: cr.tensor(v, requires_grad=True)),
                    (torch, lambda v: torch.tensor(v, requires_grad=True))):
        a, b = mk([1.0, -2.0, 3.0]), mk([0.5, 0.5, 0.5])
        log = []
        for name, t in (("a", a), ("b", b)):
            t.register_post_accumulate_grad_hook(lambda t, name=name: log.append((name, t.grad.tolist())))
        for _ in range(2):
            ((a * b).sum() + (a * a).sum()).backward()
        if mod is cr:
            ours = sorted(log)
        else:
            theirs = sorted(log)
    assert ours == theirs


def test_post_hook_in_a_training_step_can_run_the_optimizer_per_parameter():
    lin = cr.nn.Linear(3, 2)
    opts = {id(p): cr.optim.SGD([p], lr=0.1) for p in lin.parameters()}

    def step(p):
        opts[id(p)].step()
        opts[id(p)].zero_grad()
    for p in lin.parameters():
        p.register_post_accumulate_grad_hook(step)
    before = [p.data.copy() for p in lin.parameters()]
    lin(cr.tensor(np.ones((4, 3)))).sum().backward()
    for p, b in zip(lin.parameters(), before):
        assert not np.allclose(p.data, b)
        assert p.grad is None or not np.any(p.grad.data)


def _mlp_events(mod, mk):
    """The order of tensor hooks on a 3-layer MLP's activations and post-accumulate hooks on its
    parameters in a second training step."""
    rng = np.random.default_rng(0)
    ws = [mk(rng.standard_normal((4, 4))) for _ in range(3)]
    bs = [mk(rng.standard_normal(4)) for _ in range(3)]
    log = []
    for k, (w, b) in enumerate(zip(ws, bs), 1):
        w.register_post_accumulate_grad_hook(lambda t, k=k: log.append(f"W{k}"))
        b.register_post_accumulate_grad_hook(lambda t, k=k: log.append(f"b{k}"))
    x = rng.standard_normal((5, 4))
    for _ in range(2):       # the second step: the leaves' nodes are older than the whole graph
        log.clear()
        h = mk(x)
        for k, (w, b) in enumerate(zip(ws, bs), 1):
            h = mod.tanh(h @ w + b)
            if k < 3:
                h.register_hook(lambda g, k=k: log.append(f"h{k}"))
        h.sum().backward()
    return log


def _layers(log):
    """``log`` cut at the activations' hooks, each layer's parameters as a set."""
    groups, cur = [], set()
    for e in log:
        if e.startswith("h"):
            groups += [cur, e]
            cur = set()
        else:
            cur.add(e)
    return groups + [cur]


def test_post_hooks_fire_as_soon_as_the_leafs_gradient_is_complete():
    """As PyTorch: a layer's parameters are done before the gradient reaches the layer below, so
    DistributedDataParallel can start their all-reduce while the rest of the backward runs."""
    log = _mlp_events(cr, lambda v: cr.tensor(v, requires_grad=True))
    assert _layers(log) == [{"W3", "b3"}, "h2", {"W2", "b2"}, "h1", {"W1", "b1"}], log
    torch = pytest.importorskip("torch")
    theirs = _mlp_events(torch, lambda v: torch.tensor(v, requires_grad=True))
    assert _layers(theirs) == _layers(log), theirs


def test_post_hook_that_writes_grad_in_place_leaves_other_gradients_alone():
    """d's gradient is the very array that flows on to w (an add passes it through): the hook's
    in-place write must not reach w's gradient (the engine hands a hooked leaf its own array)."""
    def run(mod, mk, zero_):
        w, d = mk(np.ones((2, 3))), mk(np.zeros((2, 3)))
        d.register_post_accumulate_grad_hook(zero_)
        (mk(np.ones((4, 2))).detach() @ (w * 1.5 + d)).sum().backward()
        return w.grad.tolist(), d.grad.tolist()

    def zero(t):
        t.grad.data[...] = 0
    ours = run(cr, lambda v: cr.tensor(v, requires_grad=True), zero)
    assert ours == ([[6.0] * 3] * 2, [[0.0] * 3] * 2)
    torch = pytest.importorskip("torch")
    theirs = run(torch, lambda v: torch.tensor(v, requires_grad=True), lambda t: [t.grad.zero_()] and None)
    assert theirs == ours


def test_a_hooked_leafs_gradient_is_copied_only_when_shared():
    """The copy that keeps a hooked leaf's .grad its own costs a pass over the gradient: it is made
    only when another gradient still in flight holds the array (DistributedDataParallel then
    reduces the array the backward produced, in place)."""
    made = {}

    class Twice(cr.Function):
        @staticmethod
        def forward(ctx, w):
            return w * 1.0

        @staticmethod
        def backward(ctx, g):
            arr = np.full(g.shape, 2.0, g.dtype)
            made["id"] = id(arr)
            return cr.as_tensor(arr)
    w = _leaf()
    w.register_post_accumulate_grad_hook(lambda t: None)
    for _ in range(2):
        w.grad = None
        Twice.apply(w).sum().backward()
        assert id(w.grad.data) == made["id"] and w.grad.tolist() == [2.0, 2.0]     # not copied


def test_post_hook_fires_once_when_an_older_retained_graph_joins_a_newer_one():
    """A consumer from before the last backward and one from after: the hook still waits for both."""
    def run(mk):
        w = mk([1.0, 2.0])
        seen = []
        w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
        y1 = (w * 2).sum()
        y1.backward(retain_graph=True)
        ((w * w).sum() + y1).backward()
        return seen
    ours = run(lambda v: cr.tensor(v, requires_grad=True))
    assert ours == [[2.0, 2.0], [6.0, 8.0]]
    torch = pytest.importorskip("torch")
    assert run(lambda v: torch.tensor(v, requires_grad=True)) == ours


def test_post_hook_waits_for_checkpoints_that_may_add_to_the_gradient():
    """A checkpoint's backward accumulates the parameters its function closes over, unseen by the
    outer graph: a hook still fires once, with the whole gradient, for a leaf used inside one
    checkpoint and outside it, and for one closed over by two checkpoints."""
    w, b = cr.tensor([0.5, -1.0], requires_grad=True), cr.tensor([0.25, 0.75], requires_grad=True)
    x = cr.tensor([1.0, 2.0])
    seen = []
    for name, t in (("w", w), ("b", b)):
        t.register_post_accumulate_grad_hook(lambda t, name=name: seen.append((name, t.grad.tolist())))

    def loss(ckpt):
        h = ckpt(lambda v: cr.tanh(v * w + b), x)
        h = ckpt(lambda u: cr.tanh(u + b), h)
        return (h * h).sum() + (x * w).sum()
    for _ in range(2):                  # the second time, the leaves' nodes are old
        seen.clear()
        w.grad = b.grad = None
        loss(cr.checkpoint).backward()
        want_w, want_b = cr.autograd.grad(loss(lambda f, v: f(v)), [w, b])
        assert sorted(seen) == [("b", want_b.tolist()), ("w", want_w.tolist())], seen


def test_early_hooks_leave_the_graph_numbering_as_it_was():
    w = _leaf()
    w.register_post_accumulate_grad_hook(lambda t: None)
    node = w._edge()[0]
    seq = node.seq

    def fail(g):
        raise ValueError("boom")
    y = w * 2
    y.register_hook(fail)
    with pytest.raises(ValueError, match="boom"):
        (y * 3).sum().backward()
    assert node.seq == seq
    (w * 3).sum().backward()
    assert node.seq == seq and w.grad.tolist() == [3.0, 3.0]


def _order_events(mod, mk):
    """Tensor hooks on nodes unrelated to a hooked leaf ``w`` whose node is older than all of them,
    and ``w``'s post hook: the order they run in (and whether ``w``'s node kept its number)."""
    log = []
    w, x = mk([1.0, 2.0]), mk([0.5, -1.0])
    (w * 1.0).sum()                       # w's node is made first: by number it would run last
    seq = w._edge()[0].seq if mod is cr else None
    h1 = x * 3
    h1.register_hook(lambda g: log.append("h1"))
    p1 = w * 2                            # w's first producer
    p1.register_hook(lambda g: log.append("p1"))
    h2 = mod.sin(h1)
    h2.register_hook(lambda g: log.append("h2"))
    y = h2 * w                            # w's second producer, the newest node
    y.register_hook(lambda g: log.append("y"))
    w.register_post_accumulate_grad_hook(
        lambda t: log.append(("w", np.round(t.grad.tolist(), 5).tolist(), seq is None or w._edge()[0].seq == seq)))
    (y + p1).sum().backward()
    return log


def test_post_hook_fires_once_its_last_producer_ran_before_unrelated_nodes():
    """Counting: w's hook fires right after p1's node, its last producer to run, before h1's (older
    than p1's, newer than w's); no node is renumbered meanwhile. Exactly PyTorch's order."""
    ours = _order_events(cr, lambda v: cr.tensor(v, requires_grad=True))
    want_w = np.round(np.sin(np.array([0.5, -1.0]) * 3) + 2, 5).tolist()
    assert ours == ["y", "h2", "p1", ("w", want_w, True), "h1"], ours
    torch = pytest.importorskip("torch")
    assert _order_events(torch, lambda v: torch.tensor(v, requires_grad=True)) == ours


def test_other_refs_pins_the_refcount_behaviour_ownership_relies_on():
    """The engine (may a hook write a hooked leaf's .grad in place?) and DDP (may a bucket buffer be
    reused?) decide ownership by ``graph.other_refs``: it counts the references besides the caller's.
    If CPython changes what ``sys.getrefcount`` counts (borrowed references), this fails first."""
    a = np.zeros(3)
    assert other_refs(a) == 0
    b = a
    assert other_refs(a) == 1
    held = [a, a]
    assert other_refs(a) == 3
    del b, held
    assert other_refs(a) == 0
    assert other_refs(np.zeros(3)) == 0           # a temporary: only the call holds it

    def through(x):
        return other_refs(x)                      # the frame that called ``through`` holds one more
    assert through(a) == 1
    assert through(np.zeros(3)) == 1              # (the temporary its caller passed)


def test_the_hooked_leaf_registry_is_per_thread(monkeypatch):
    """A post hook registered in one thread does not make another thread's backwards look for hooked
    leaves (no bookkeeping is built there); the hook still fires, when its leaf accumulates."""
    built, log = [], []
    real = engine._LeafHooks
    monkeypatch.setattr(engine, "_LeafHooks", lambda *a: built.append(threading.get_ident()) or real(*a))
    w = _leaf()

    def register():
        w.register_post_accumulate_grad_hook(lambda t: log.append(t.grad.tolist()))
        log.append(len(STATE.hooked_leaves))

    def backward():
        log.append(len(STATE.hooked_leaves))
        (w * 3).sum().backward()

    def both():
        v = _leaf()
        v.register_post_accumulate_grad_hook(lambda t: log.append("v"))
        (v * 2).sum().backward()
        log.append(built == [threading.get_ident()])
    for fn in (register, backward, both):
        th = threading.Thread(target=fn)
        th.start()
        th.join()
    assert log == [1, 0, [3.0, 3.0], "v", True], log


def test_state_declares_every_field_the_engine_writes():
    """Inside a backward with hooked leaves, a checkpoint and a queued callback, and after it, the
    thread's state holds exactly the fields ``_State`` declares."""
    declared = set(vars(_State()))
    w, x = _leaf(), _leaf([3.0, 4.0])
    seen = []

    def post(t):
        seen.append(set(vars(STATE)))
        cr.autograd.queue_callback(lambda: seen.append(set(vars(STATE))))
    w.register_post_accumulate_grad_hook(post)
    h = cr.checkpoint(lambda v: cr.tanh(v * w), x)
    (h.sum() + (w * x).sum()).backward()
    seen.append(set(vars(STATE)))
    assert len(seen) == 3 and all(s == declared for s in seen), [s ^ declared for s in seen]


# ----- queue_callback -----
def test_queue_callback_outside_backward_raises():
    with pytest.raises(GraphError, match="only be installed during a backward"):
        cr.autograd.queue_callback(lambda: None)


def test_callbacks_run_after_every_node_in_order_before_backward_returns():
    w, z = _leaf(), _leaf([3.0, 4.0])
    log = []

    def hook(g):
        cr.autograd.queue_callback(lambda: log.append(("cb1", w.grad.tolist(), z.grad.tolist())))
        cr.autograd.queue_callback(lambda: log.append(("cb2",)))
    (w * 2).register_hook(hook)
    y = (w * 2) * z
    y.register_hook(hook)
    y.sum().backward()
    # queued from the first hook to run; every leaf's .grad is final when the callbacks run
    assert log[0] == ("cb1", [6.0, 8.0], [2.0, 4.0])
    assert [e[0] for e in log] == ["cb1", "cb2"] * (len(log) // 2)
    assert not cr.core.grad_mode.STATE.in_backward


def test_callbacks_queued_by_callbacks_run_too():
    w = _leaf()
    log = []

    def second():
        log.append(2)
        cr.autograd.queue_callback(lambda: log.append(3))

    def first():
        log.append(1)
        cr.autograd.queue_callback(second)
    w.register_hook(lambda g: cr.autograd.queue_callback(first))
    w.sum().backward()
    assert log == [1, 2, 3]
    w.sum().backward()
    assert log == [1, 2, 3, 1, 2, 3]            # nothing left over from the last backward


def test_callback_from_post_accumulate_hook_like_ddp():
    """What DDP does: a parameter's post-accumulate hook queues one callback that sees all grads."""
    params = [_leaf(), _leaf([5.0, 6.0])]
    state = {"queued": False, "seen": None}

    def finalize():
        state["seen"] = [p.grad.tolist() for p in params]
        state["queued"] = False

    def on_grad(p):
        if not state["queued"]:
            state["queued"] = True
            cr.autograd.queue_callback(finalize)
    for p in params:
        p.register_post_accumulate_grad_hook(on_grad)
    (params[0] * params[1]).sum().backward()
    assert state["seen"] == [[5.0, 6.0], [1.0, 2.0]]


def test_callback_in_autograd_grad_and_with_retain_and_create_graph():
    w = _leaf()
    log = []
    w.register_hook(lambda g: cr.autograd.queue_callback(lambda: log.append(cr.is_grad_enabled())))
    y = (w ** 3).sum()
    (g,) = cr.autograd.grad(y, w, retain_graph=True)
    assert log == [False]
    (g,) = cr.autograd.grad(y, w, create_graph=True)
    assert log == [False, True]                 # grad mode as in the backward: on under create_graph
    assert g.requires_grad
    g.sum().backward()                          # the hook fires again in the double backward
    assert log == [False, True, False]
    np.testing.assert_allclose(w.grad.data, 6 * np.array([1.0, 2.0]))


def test_callback_error_is_raised_by_backward_and_state_is_restored():
    w = _leaf()

    def boom():
        raise ValueError("boom")
    h = w.register_hook(lambda g: cr.autograd.queue_callback(boom))
    with pytest.raises(ValueError, match="boom"):
        w.sum().backward()
    h.remove()
    assert not cr.core.grad_mode.STATE.in_backward and cr.is_grad_enabled()
    with pytest.raises(GraphError):
        cr.autograd.queue_callback(lambda: None)
    w.sum().backward()                          # the failed callback is not run again


def test_queue_callback_refuses_non_callable():
    w = _leaf()
    w.register_hook(lambda g: cr.autograd.queue_callback(42))
    with pytest.raises(TypeError, match="callable"):
        w.sum().backward()


def test_nested_backward_runs_its_own_callbacks():
    """A backward inside a backward (here in a hook) has its own queue, as PyTorch's graph tasks."""
    w, v = _leaf(), _leaf([3.0, 4.0])
    log = []

    def inner_hook(g):
        cr.autograd.queue_callback(lambda: log.append("inner"))

    v.register_hook(inner_hook)

    def outer_hook(g):
        cr.autograd.queue_callback(lambda: log.append("outer"))
        with cr.enable_grad():
            (v * 2).sum().backward()
        log.append("inner returned")
    w.register_hook(outer_hook)
    w.sum().backward()
    assert log == ["inner", "inner returned", "outer"]


def test_callbacks_match_torch_order():
    torch = pytest.importorskip("torch")
    queue_torch = torch.autograd.Variable._execution_engine.queue_callback
    logs = {}
    for name, mod, queue in (("cr", cr, cr.autograd.queue_callback), ("torch", torch, queue_torch)):
        w = mod.tensor([1.0, 2.0], requires_grad=True)
        log = []

        def cb(i, queue=queue, log=log):
            log.append(i)
            if i < 2:
                queue(lambda: cb(i + 10))
        w.register_hook(lambda g, queue=queue, cb=cb: (queue(lambda: cb(0)), queue(lambda: cb(1)))[-1])
        w.register_post_accumulate_grad_hook(lambda t, queue=queue, log=log: log.append("post"))
        (w * w).sum().backward()
        logs[name] = log
    assert logs["cr"] == logs["torch"]
