"""cr.compile: replay == eager bitwise on new inputs; guards, value guards, fallbacks, cache_info."""
from __future__ import annotations

import functools
import random
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule.core._pytree import flatten
from chainrule.core.errors import CompileError, LinAlgError
from chainrule.func.compile import compile as cr_compile

F = cr.nn.functional


def _bits(tree):
    leaves, structure = flatten(tree)
    out = []
    for x in leaves:
        if isinstance(x, cr.Tensor):
            out.append(("T", x.data.shape, str(x.data.dtype), x.data.tobytes(), x.requires_grad))
        elif isinstance(x, np.ndarray):
            out.append(("A", x.shape, str(x.dtype), x.tobytes()))
        else:
            out.append(("V", type(x).__name__, repr(x)))
    return structure, out


def assert_bitwise(a, b):
    assert _bits(a) == _bits(b)


def replays(fn, make_args, calls=4):
    """Compile ``fn``; every call's result equals eager's bitwise; all calls after the first replay."""
    step = cr_compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(calls):
            args = make_args(i)
            got = step(*args)
            assert_bitwise(got, fn(*args))
    assert step.cache_info() == (1, calls - 1, 0, 0), step.eager_reason
    return step


def falls_back(fn, make_args, words, calls=3):
    """Compile ``fn``: one UserWarning containing ``words``; every call equals eager's result."""
    step = cr_compile(fn)
    with pytest.warns(UserWarning, match=words) as record:
        for i in range(calls):
            args = make_args(i)
            got = step(*args)
            assert_bitwise(got, fn(*args))
    assert sum("cr.compile" in str(w.message) for w in record) == 1
    info = step.cache_info()
    assert info.replays == 0 and info.captures == 1 and info.eager_runs == calls - 1
    return step


def rand(i, *shape, lo=-1.0, hi=1.0, seed=0):
    return cr.tensor(np.random.default_rng(1000 * seed + i).uniform(lo, hi, shape))


# ----- replay == eager -----
def _chain(x, w):
    for i in range(1000):
        k = i % 4
        x = x * w if k == 0 else x + 0.1 if k == 1 else cr.tanh(x) if k == 2 else x * 0.9
    return x


def test_chain_value_and_grad():
    def f(x, w):
        return cr.value_and_grad(lambda x, w: _chain(x, w).sum(), argnums=(0, 1))(x, w)
    step = replays(f, lambda i: (rand(i, 10), rand(i, 10, lo=0.9, hi=1.1, seed=1)))
    assert len(step.captures[0].entries) > 2000


def test_chain_grad_and_dead_code():
    def f(x, w):
        return cr.grad(lambda x, w: _chain(x, w).sum(), argnums=1)(x, w)    # x's gradient unused
    step = replays(f, lambda i: (rand(i, 10), rand(i, 10, lo=0.9, hi=1.1, seed=1)))
    cap = step.captures[0]
    assert len(cap.entries) < cap.n_recorded


def test_forward_only_and_outputs_of_every_kind():
    def f(x, y):
        z = (x @ y).sum(axis=0)
        return {"z": z, "arr": np.float64(1.5).item(), "n": 3, "t": (z.detach(), None)}
    replays(f, lambda i: (rand(i, 3, 4), rand(i, 4, 2, seed=1)))


def _mlp():
    cr.random.manual_seed(0)
    return cr.nn.Sequential(cr.nn.Linear(5, 8), cr.nn.Tanh(), cr.nn.Linear(8, 3))


def test_mlp_functional_call_grads():
    model = _mlp()
    params = {k: v.detach() for k, v in model.named_parameters()}

    def f(params, x, t):
        def loss(p):
            return F.mse_loss(cr.func.functional_call(model, p, (x,)), t)
        return cr.value_and_grad(loss)(params)
    replays(f, lambda i: (params, rand(i, 4, 5), rand(i, 4, 3, seed=1)))


def test_mlp_closure_autograd_grad():
    model = _mlp()

    def f(x, t):
        loss = F.mse_loss(model(x), t)
        grads = cr.autograd.grad(loss, list(model.parameters()))
        return loss.detach(), grads
    step = replays(f, lambda i: (rand(i, 4, 5), rand(i, 4, 3, seed=1)))
    # the weights are read at every call: a change of their values is seen by the next replay
    with cr.no_grad():
        model[0].weight.data[...] = 0.5
    x, t = rand(9, 4, 5), rand(9, 4, 3, seed=1)
    assert_bitwise(step(x, t), f(x, t))
    assert step.cache_info().replays == 4


def _targets(i):
    return cr.tensor(np.random.default_rng(i).integers(0, 4, 5))


def test_softmax_cross_entropy_forward_replays():
    w = cr.tensor(np.random.default_rng(3).normal(size=(6, 4)))
    replays(lambda x, target: F.cross_entropy(x @ w, target), lambda i: (rand(i, 5, 6), _targets(i)))


def test_softmax_cross_entropy_backward_replays():
    # its rule's one-hot targets are a taped kernel of the targets (ops/nn.py _onehot)
    w = cr.tensor(np.random.default_rng(3).normal(size=(6, 4)))

    def f(x, target):
        return cr.value_and_grad(lambda w: F.cross_entropy(x @ w, target))(w)
    replays(f, lambda i: (rand(i, 5, 6), _targets(i)))


def test_mlp_cross_entropy_training_step_replays():
    def run(compiled):
        cr.random.manual_seed(0)
        model = cr.nn.Sequential(cr.nn.Linear(6, 16), cr.nn.ReLU(), cr.nn.Linear(16, 4))
        opt = cr.optim.Adam(model.parameters(), lr=0.01)

        def train_step(x, t):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), t)
            loss.backward()
            opt.step()
            return loss.detach()
        step = cr_compile(train_step) if compiled else train_step
        losses = [step(rand(i, 5, 6), _targets(i)) for i in range(10)]
        return [p.data.tobytes() for p in model.parameters()], losses, step
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights, losses, step = run(True)
    ref_weights, ref_losses, _ = run(False)
    assert weights == ref_weights
    assert_bitwise(losses, ref_losses)
    assert step.cache_info() == (1, 9, 0, 0)        # (its zero_grad() drops what a later call finds)


def test_broadcast_reductions_views_indexing():
    def f(x, y, idx):
        def loss(x, y):
            z = x[:, None, :] * y[None] + y.T.reshape(1, 3, 2)[..., :1]
            s = z.sum(axis=(0, 2)) + z.mean(axis=1).sum() + z[idx].sum()
            return (cr.softmax(s, axis=0) * cr.transpose(z, (2, 1, 0))[0, :, 0]).sum()
        return cr.grad(loss, argnums=(0, 1))(x, y)
    replays(f, lambda i: (rand(i, 4, 2), rand(i, 3, 2, seed=1), cr.tensor(np.array([0, 2, 2]))))


def test_boolean_mask_falls_back():
    # getitem turns a mask into integer indices with np.nonzero (ops/shape.py): not on the tape
    def f(x, mask):
        return cr.grad(lambda x: (cr.tanh(x[mask]) * 2.0).sum())(x)
    masks = [np.array([True, False, True, True]), np.array([False, True, True, False])]
    falls_back(f, lambda i: (rand(i, 4), cr.tensor(masks[i % 2])), "not computed by chainrule's ops")


def test_in_place_on_intermediates_replays():
    def f(x):
        y = x * 2.0
        y += 1.0
        return y * y
    replays(f, lambda i: (rand(i, 3),))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_low_precision_replays(dtype):
    dt = getattr(cr, dtype)

    def f(x, w):
        return cr.value_and_grad(lambda w: (cr.tanh(x * w + 0.5) * 3.0).sum())(w)
    replays(f, lambda i: (rand(i, 5).astype(dt), rand(i, 5, seed=1).astype(dt)))


def test_hvp_and_jvp_replay():
    # while a capture runs, forward mode's push runs the JVP rules through ops (autograd/forward.py)
    replays(lambda x, v: cr.hvp(lambda x: (cr.sin(x) * x).sum(), (x,), (v,)),
            lambda i: (rand(i, 5), rand(i, 5, seed=1)))
    replays(lambda x, v: cr.jvp(lambda x: cr.tanh(x) * cr.exp(x), (x,), (v,)),
            lambda i: (rand(i, 5), rand(i, 5, seed=1)))


def test_amax_amin_backward_replays_with_ties():
    def f(x):
        return cr.grad(lambda x: (cr.amax(x, axis=1) * cr.amin(x, axis=0).sum()).sum())(x)
    ties = [np.array([[1.0, 1.0, 0.5], [2.0, 0.0, 2.0]]), np.array([[3.0, 1.0, 3.0], [0.0, 0.0, 0.0]])]
    replays(f, lambda i: (cr.tensor(ties[i % 2]) if i < 2 else rand(i, 2, 3),))


# ----- guards -----
def _sq(x, scale=1.0):
    return cr.grad(lambda x: (cr.tanh(x) * x * scale).sum())(x)


@pytest.mark.parametrize("change, message", [
    (lambda: (rand(0, 4),), "argument 0: shape (4,) != (3,)"),
    (lambda: (rand(0, 3).astype(cr.float32),), "argument 0: dtype float32 != float64"),
    (lambda: (rand(0, 3), 2.0), "the arguments' structure changed"),
])
def test_argument_guards(change, message):
    step = cr_compile(_sq)
    step(rand(1, 3))
    step(rand(2, 3))
    args = change()
    assert_bitwise(step(*args), _sq(*args))
    assert step.last_miss == message
    assert step.cache_info() == (2, 1, 0, 1)
    # both captures stay usable
    assert_bitwise(step(rand(3, 3)), _sq(rand(3, 3)))
    assert step.cache_info() == (2, 2, 0, 1)
    err = cr_compile(_sq, on_miss="error")
    err(rand(1, 3))
    with pytest.raises(CompileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        err(*change())
    assert isinstance(CompileError("x"), cr.ChainruleError)


def test_scalar_argument_guard_by_value():
    step = cr_compile(_sq)
    x = rand(0, 3)
    step(x, 2.0)
    step(x, 2.0)
    assert_bitwise(step(x, 3.0), _sq(x, 3.0))
    assert step.last_miss == "argument 1: value 3.0 != 2.0"
    assert step.cache_info() == (2, 1, 0, 1)
    step(x, -0.0)
    assert "value -0.0 != " in step.last_miss


def test_requires_grad_guard_and_grad_mode_guard():
    def f(x):
        return (x * 2.0).sum().detach()
    step = cr_compile(f)
    step(rand(0, 3))
    step(rand(0, 3).requires_grad_())
    assert step.last_miss == "argument 0: requires_grad True != False"
    with cr.no_grad():
        step(rand(0, 3))
    assert step.last_miss.startswith("grad mode")
    assert step.cache_info().captures == 3


def test_default_dtype_guard():
    step = cr_compile(lambda x: (x * 0.5).detach())
    step(rand(0, 3))
    prev = cr.get_default_dtype()
    cr.set_default_dtype(cr.float64 if prev == cr.float32 else cr.float32)
    try:
        step(rand(0, 3))
    finally:
        cr.set_default_dtype(prev)
    assert step.last_miss.startswith("default dtype")


def test_closed_over_tensor_guard_and_python_value_guard():
    state = {"w": cr.tensor([1.0, 2.0, 3.0]), "scale": 2.0}

    def f(x):
        return cr.grad(lambda x: (x * state["w"] * state["scale"]).sum())(x)
    step = cr_compile(f)
    step(rand(0, 3))
    state["scale"] = 3.0
    assert_bitwise(step(rand(1, 3)), f(rand(1, 3)))
    assert step.last_miss == "state['scale']: value 3.0 != 2.0"
    state["w"] = cr.tensor([1.0, 2.0])
    with pytest.raises(ValueError):
        f(rand(1, 3))
    with pytest.raises(ValueError):
        step(rand(1, 3))
    assert "state['w']: shape (2,) != (3,)" == step.last_miss


def test_module_attribute_is_guarded():
    import types
    cfg = types.ModuleType("cfg")
    cfg.SCALE = 2.0
    g = {"cfg": cfg, "cr": cr}
    exec("def f(x):\n    return (x * cfg.SCALE).detach()\n", g)
    step = cr_compile(g["f"])
    step(rand(0, 2))
    cfg.SCALE = 3.0
    assert_bitwise(step(rand(0, 2)), g["f"](rand(0, 2)))
    assert step.last_miss == "cfg.SCALE: value 3.0 != 2.0"


SCALE = 2.0


def _scaled(x):
    return (x * SCALE).detach()


def test_class_attribute_and_default_argument_are_guarded():
    class Scaler:
        scale = 2.0

        def __call__(self, x, shift=1.0):
            return (x * self.scale + shift).detach()
    s = Scaler()
    step = cr_compile(s.__call__)
    step(rand(0, 2))
    Scaler.scale = 3.0
    assert_bitwise(step(rand(0, 2)), s(rand(0, 2)))
    assert step.last_miss == "Scaler.scale: value 3.0 != 2.0"
    Scaler.__call__.__defaults__ = (5.0,)
    assert_bitwise(step(rand(0, 2)), s(rand(0, 2)))
    assert "defaults" in step.last_miss


def test_bound_method_reads_its_instance_at_every_call():
    class Layer:
        def __init__(self):
            self.w = rand(0, 3)

        def step(self, x):
            return cr.grad(lambda x: (x * self.w).sum())(x)
    layer = Layer()
    step = cr_compile(layer.step)
    step(rand(1, 3))
    layer.w = rand(2, 3)
    assert_bitwise(step(rand(1, 3)), layer.step(rand(1, 3)))
    assert step.cache_info() == (1, 1, 0, 0)
    partial = cr_compile(functools.partial(_sq, scale=2.0))
    partial(rand(0, 3))
    assert_bitwise(partial(rand(1, 3)), _sq(rand(1, 3), scale=2.0))
    assert partial.cache_info() == (1, 1, 0, 0)


def test_closed_over_bound_method():
    layer = cr.nn.Linear(3, 2)
    forward = layer.forward

    def f(x):
        return forward(x).detach()
    step = cr_compile(f)
    for i in range(3):
        assert_bitwise(step(rand(i, 4, 3)), f(rand(i, 4, 3)))
    assert step.cache_info() == (1, 2, 0, 0)
    forward = cr.nn.Linear(3, 2).forward         # rebound: the new layer runs
    assert_bitwise(step(rand(5, 4, 3)), f(rand(5, 4, 3)))
    assert step.last_miss.startswith("forward: value")


def test_global_number_is_guarded():
    global SCALE
    step = cr_compile(_scaled)
    step(rand(0, 2))
    SCALE = 3.0
    try:
        assert_bitwise(step(rand(0, 2)), _scaled(rand(0, 2)))
    finally:
        SCALE = 2.0
    assert step.last_miss == "SCALE: value 3.0 != 2.0"


def test_module_training_flag_is_guarded():
    model = _mlp()

    def f(x):
        return model(x).detach()
    step = cr_compile(f)
    step(rand(0, 2, 5))
    model.eval()
    step(rand(0, 2, 5))
    assert "training" in step.last_miss


def test_same_tensor_passed_twice():
    def f(x, y):
        return cr.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(x, y)
    step = cr_compile(f)
    a = rand(0, 3)
    step(a, a)
    b, c = rand(1, 3), rand(2, 3, seed=1)
    assert_bitwise(step(b, c), f(b, c))
    assert "share memory" in step.last_miss
    # and the other way: captured with two tensors, called with one twice (its gradients add up)
    step2 = cr_compile(f)
    step2(b, c)
    assert_bitwise(step2(a, a), f(a, a))
    assert "share memory" in step2.last_miss and step2.cache_info() == (2, 0, 0, 1)


def test_closed_over_tensor_also_passed_as_argument():
    w = rand(0, 3)

    def f(x):
        return cr.grad(lambda x: (x * w).sum())(x)
    step = cr_compile(f)
    step(w)                                    # w is the argument and the closed-over tensor
    other = rand(1, 3)
    assert_bitwise(step(other), f(other))      # now they differ: a miss, not the argument twice
    assert step.last_miss == "w: no longer the tensor passed as argument 0"
    assert_bitwise(step(other), f(other))
    assert step.cache_info() == (2, 1, 0, 1)


def test_a_kernel_refusing_new_values_raises_eagers_error():
    step = cr_compile(lambda a: cr.linalg.inv(a).detach())
    step(cr.tensor(np.eye(2)))
    with pytest.raises(LinAlgError):
        step(cr.tensor(np.zeros((2, 2))))
    assert step.cache_info().eager_runs == 1


def test_value_guard_flips():
    def f(x):
        loss = (x * x).sum()
        if loss.item() > 1.0:
            return (loss * 2.0).detach()
        return (loss - 1.0).detach()
    step = cr_compile(f)
    small, big = cr.tensor([0.1, 0.2]), cr.tensor([1.0, 2.0])
    for x in (small, small, big, big, small):
        assert_bitwise(step(x), f(x))
    assert "value read by .item()" in step.last_miss
    # small, small (replay), big (value guard: miss, recapture), big (replay), small (the first capture)
    assert step.cache_info() == (2, 3, 0, 1)


def test_value_guard_replays_when_the_value_holds():
    def f(x, n):
        return cr.tile(x, int(n)).sum().detach()
    step = cr_compile(f)
    n = cr.tensor(3)
    step(rand(0, 2), n)
    assert_bitwise(step(rand(1, 2), n), f(rand(1, 2), n))
    assert step.cache_info().replays == 1


def test_max_captures_warns_and_runs_eagerly():
    step = cr_compile(_sq, max_captures=2)
    step(rand(0, 2))
    step(rand(0, 3))
    with pytest.warns(UserWarning, match="2 captures made"):
        out = step(rand(0, 4))
    assert_bitwise(out, _sq(rand(0, 4)))
    assert step.cache_info() == (2, 0, 1, 2)


def test_decorator_forms():
    @cr_compile
    def a(x):
        return (x * 2.0).detach()

    @cr_compile(max_captures=2)
    def b(x):
        return (x * 3.0).detach()
    assert a(rand(0, 2)).shape == (2,) and b(rand(0, 2)).shape == (2,)
    assert b.max_captures == 2
    with pytest.raises(ValueError, match="on_miss"):
        cr_compile(a, on_miss="x")


def test_compiled_method():
    class Model:
        def __init__(self):
            self.w = rand(0, 3)

        @cr_compile
        def step(self, x):
            return cr.grad(lambda x: (cr.tanh(x * self.w)).sum())(x)
    m = Model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            assert_bitwise(m.step(rand(i, 3)), Model.step.fn(m, rand(i, 3)))
    assert Model.step.cache_info() == (1, 2, 0, 0)
    m.w = rand(5, 3)                         # rebound: read through the instance at every call
    assert_bitwise(m.step(rand(1, 3)), Model.step.fn(m, rand(1, 3)))
    assert Model.step.cache_info() == (1, 3, 0, 0)


# ----- fallbacks: one warning, eager's results -----
def test_numpy_read_falls_back_naming_the_line():
    def f(x):
        y = x * 2.0
        return cr.tensor(np.asarray(y) + 1.0) * y
    step = falls_back(f, lambda i: (rand(i, 3),), "np.asarray")
    assert "test_compile.py" in step.eager_reason


def test_tolist_falls_back():
    falls_back(lambda x: (x * x.tolist()[0]).detach(), lambda i: (rand(i, 2),), r"tolist\(\)")


def test_backward_into_cleared_grads_replays():
    w = cr.tensor([1.0, 2.0], requires_grad=True)

    def f(x):
        w.grad = None
        (cr.tanh(w * x) * x).sum().backward()
        return w.grad
    step = cr_compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(4):
            x = rand(i, 2)
            got = step(x)
            assert got is w.grad                  # the returned gradient is w's own, as eagerly
            assert_bitwise(got, f(x))
    assert step.cache_info() == (2, 2, 0, 1)      # captured from None, then from a gradient present
    assert "w.grad: a gradient is present" in step.last_miss


def test_backward_accumulating_into_grads_falls_back():
    def make(w):
        def f(x):
            (w * x).sum().backward()
            return w.grad.detach()
        return f
    wa, wb = cr.tensor([1.0, 2.0], requires_grad=True), cr.tensor([1.0, 2.0], requires_grad=True)
    step, eager = cr_compile(make(wa)), make(wb)
    with pytest.warns(UserWarning, match="accumulates .grad"):
        for i in range(4):
            assert_bitwise(step(rand(i, 2)), eager(rand(i, 2)))
    assert_bitwise(wa.grad, wb.grad)
    assert step.cache_info() == (2, 0, 2, 1)


def test_training_loop_compiled_step_matches_eager():
    def run(compiled):
        model = _mlp()
        opt = cr.optim.Adam(model.parameters(), lr=0.01)

        def grads(x, t):
            opt.zero_grad()
            loss = F.mse_loss(model(x), t)
            loss.backward()
            return loss.detach()
        step = cr_compile(grads) if compiled else grads
        losses = []
        for i in range(20):
            losses.append(step(rand(i, 4, 5), rand(i, 4, 3, seed=1)))
            opt.step()
        return [p.data.copy() for p in model.parameters()], losses, step
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights, losses, step = run(True)
    ref_weights, ref_losses, _ = run(False)
    assert all(np.array_equal(a, b) for a, b in zip(weights, ref_weights))
    assert_bitwise(losses, ref_losses)
    assert step.cache_info().replays == 19 and step.cache_info().captures == 1


@pytest.mark.parametrize("make_opt", [lambda ps: cr.optim.SGD(ps, lr=0.1, momentum=0.9),
                                      lambda ps: cr.optim.Adam(ps, lr=0.01)])
def test_full_training_step_replays_with_the_optimizer(make_opt):
    def run(compiled):
        model = _mlp()
        opt = make_opt(model.parameters())

        def train_step(x, t):
            opt.zero_grad()
            loss = F.mse_loss(model(x), t)
            loss.backward()
            opt.step()
            return loss.detach()
        step = cr_compile(train_step) if compiled else train_step
        losses = [step(rand(i, 4, 5), rand(i, 4, 3, seed=1)) for i in range(20)]
        grads = [p.grad.data.copy() for p in model.parameters()]
        return [p.data.copy() for p in model.parameters()], grads, losses, step
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights, grads, losses, step = run(True)
    ref_weights, ref_grads, ref_losses, _ = run(False)
    assert all(np.array_equal(a, b) for a, b in zip(weights, ref_weights))
    assert all(np.array_equal(a, b) for a, b in zip(grads, ref_grads))
    assert_bitwise(losses, ref_losses)
    assert step.cache_info() == (1, 19, 0, 0)


def test_learning_rate_change_is_seen_by_the_replay():
    # the taped opt.step() reads its hyperparameters when the replay calls it: no miss, eager's weights
    runs = []
    for compiled in (True, False):
        model = _mlp()
        opt = cr.optim.SGD(model.parameters(), lr=0.1)

        def train_step(x, t, model=model, opt=opt):
            opt.zero_grad()
            F.mse_loss(model(x), t).backward()
            opt.step()
        step = cr_compile(train_step) if compiled else train_step
        for i in range(4):
            if i == 3:
                opt.param_groups[0]["lr"] = 0.05
            step(rand(i, 4, 5), rand(i, 4, 3, seed=1))
        runs.append([p.data.copy() for p in model.parameters()])
        if compiled:
            assert step.cache_info() == (1, 3, 0, 0)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


def test_optimizer_step_with_a_closure_falls_back():
    model = _mlp()
    opt = cr.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, t):
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), t)
            loss.backward()
            return loss
        return opt.step(closure).detach()
    step = cr_compile(train_step)
    with pytest.warns(UserWarning, match="closure"):
        for i in range(3):
            step(rand(i, 4, 5), rand(i, 4, 3, seed=1))
    assert step.cache_info().replays == 0


def _dropout_run(compiled, make_gen=None, calls=20):
    """20 training steps of an MLP with Dropout(0.5), reseeded halfway: (weights, losses, step, state)."""
    cr.random.manual_seed(0)
    gen = make_gen() if make_gen else None
    model = cr.nn.Sequential(cr.nn.Linear(5, 16), cr.nn.ReLU(), cr.nn.Dropout(0.5), cr.nn.Linear(16, 4))
    opt = cr.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, t):
        opt.zero_grad()
        h = model(x) if gen is None else F.dropout(model(x), 0.25, generator=gen)
        loss = F.cross_entropy(h, t)
        loss.backward()
        opt.step()
        return loss.detach()
    step = cr_compile(train_step) if compiled else train_step
    losses = []
    for i in range(calls):
        if i == calls // 2:
            cr.random.manual_seed(7)                      # seen by the replays (a new default generator)
        losses.append(step(rand(i, 8, 5), cr.tensor(np.random.default_rng(i).integers(0, 4, 8))))
    state = (gen or cr.random.default_generator).bit_generator.state
    return [p.data.tobytes() for p in model.parameters()], losses, step, state


@pytest.mark.parametrize("make_gen", [None, lambda: np.random.default_rng(11)], ids=["default", "passed"])
def test_dropout_training_replays_the_random_stream(make_gen):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights, losses, step, state = _dropout_run(True, make_gen)
    ref_weights, ref_losses, _, ref_state = _dropout_run(False, make_gen)
    assert weights == ref_weights and state == ref_state
    assert_bitwise(losses, ref_losses)
    assert step.cache_info() == (1, 19, 0, 0)


def test_draw_then_value_guard_miss_restores_the_stream():
    def f(x):
        y = F.dropout(x, 0.5)
        return (y * 2.0).detach() if bool(x.sum() > 0) else (y - 1.0).detach()
    cr.random.manual_seed(1)
    step = cr_compile(f)
    xs = [rand(0, 6, lo=0.1), rand(1, 6, lo=0.1), rand(2, 6, lo=-1.0, hi=-0.1), rand(3, 6, lo=0.1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [step(x) for x in xs]
    cr.random.manual_seed(1)
    assert_bitwise(got, [f(x) for x in xs])
    assert step.cache_info() == (2, 2, 0, 1)


def test_a_generator_passed_as_an_argument_is_drawn_from_at_replay():
    def f(x, gen):
        return (F.dropout(x, 0.5, generator=gen) * 3.0).detach()
    step = cr_compile(f)
    a, b = np.random.default_rng(4), np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [step(rand(i, 16), a) for i in range(4)]
    assert_bitwise(got, [f(rand(i, 16), b) for i in range(4)])
    assert a.bit_generator.state == b.bit_generator.state and step.cache_info() == (1, 3, 0, 0)
    step(rand(0, 16), np.random.default_rng(4))
    assert step.last_miss == "argument 1: a different Generator object"


def _draw_falls_back(fn, words):
    step = cr_compile(fn)
    cr.random.manual_seed(2)
    with pytest.warns(UserWarning, match=words):
        got = [step(rand(i, 8)) for i in range(3)]
    cr.random.manual_seed(2)
    assert_bitwise(got, [fn(rand(i, 8)) for i in range(3)])
    assert step.cache_info() == (1, 0, 2, 0)


def test_draws_a_replay_cannot_repeat_fall_back():
    _draw_falls_back(lambda x: F.dropout(x, 0.5, generator=np.random.default_rng(0)) * 2.0,
                     "made inside the step")
    _draw_falls_back(lambda x: F.dropout(x, 0.5) * cr.random.default_generator.random(),
                     "cr.random.default_generator directly")

    def reseeds(x):
        cr.random.manual_seed(3)
        return F.dropout(x, 0.5) * 2.0
    _draw_falls_back(reseeds, "reseeds")
    _draw_falls_back(lambda x: x * cr.nn.init.normal_(cr.zeros(8)), "random")


@pytest.mark.parametrize("module", [np.random, random])
def test_global_random_generators_fall_back(module):
    def f(x):
        return (x * module.random()).detach()
    step = cr_compile(f)
    module.seed(3)
    with pytest.warns(UserWarning, match="global random generator"):
        a = [step(rand(i, 2)) for i in range(3)]
    module.seed(3)
    assert_bitwise(a, [f(rand(i, 2)) for i in range(3)])


def test_generated_code_replays_bitwise():
    def f(x, w):
        return cr.value_and_grad(lambda x, w: (_chain(x, w) * x).sum(), argnums=(0, 1))(x, w)
    step = replays(f, lambda i: (rand(i, 10), rand(i, 10, lo=0.9, hi=1.1, seed=1)), calls=12)
    assert step.captures[0].run is not None


def test_python_side_effect_falls_back():
    counter = {"calls": 0}

    def f(x):
        counter["calls"] += 1
        return (x * 2.0).detach()
    falls_back(f, lambda i: (rand(i, 2),), r"changes counter\['calls'\]")


def test_a_hook_registered_inside_the_step_replays():
    def f(x):
        def loss(x):
            y = x * 2.0
            y.register_hook(lambda g: g * 3.0)
            return (y * y).sum()
        return cr.grad(loss)(x)
    replays(f, lambda i: (rand(i, 3),))


def test_hook_added_between_calls_is_a_miss():
    model = _mlp()

    def f(x):
        return cr.autograd.grad(model(x).sum(), list(model.parameters()))
    step = cr_compile(f)
    step(rand(0, 2, 5))
    step(rand(1, 2, 5))
    handle = model[0].weight.register_hook(lambda g: g * 2.0)
    assert_bitwise(step(rand(2, 2, 5)), f(rand(2, 2, 5)))          # a miss, then a second capture
    assert step.last_miss == "model._modules['0']._parameters['weight']: its hooks changed (1 now, 0 captured)"
    assert_bitwise(step(rand(3, 2, 5)), f(rand(3, 2, 5)))          # replayed, with the hook
    handle.remove()
    assert_bitwise(step(rand(4, 2, 5)), f(rand(4, 2, 5)))          # the first capture again
    assert step.cache_info() == (2, 3, 0, 1)


def test_returning_a_live_graph_falls_back():
    w = cr.tensor([1.0, 2.0], requires_grad=True)
    falls_back(lambda x: w * x, lambda i: (rand(i, 2),), "requires grad")


def test_tensor_made_inside_the_step_falls_back():
    falls_back(lambda x: (x * cr.tensor(x.data * 2.0)).detach(), lambda i: (rand(i, 2),),
               "not computed by chainrule's ops")


def test_keeping_zero_rule_replays_with_a_tensor_seed():
    def f(x, seed):
        y = cr.log(x * x + 1.0)
        (g,) = cr.autograd.grad(y, (x,), grad_outputs=(seed,))
        return g
    replays(f, lambda i: (rand(i, 3).requires_grad_(), rand(i, 3, seed=1)))


def test_keeping_zero_test_is_a_value_guard():
    # sqrt'(0) = inf meets the zero cotangent where() sends to the untaken branch: 0, not NaN
    def f(x):
        return cr.grad(lambda x: cr.where(x > 0, cr.sqrt(cr.abs(x)) / x.shape[0], 0.0).sum())(x)
    step = cr_compile(f)
    xs = [[1.0, 2.0], [3.0, 4.0], [0.0, 1.0], [0.0, 2.0], [1.0, 5.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for v in xs:
            with np.errstate(all="ignore"):
                assert_bitwise(step(cr.tensor(v)), f(cr.tensor(v)))
    assert step.cache_info() == (2, 3, 0, 1)
    assert step.last_miss == "a zero cotangent meeting an infinite derivative (keeping_zero): True != False"
    with pytest.raises(CompileError, match="keeping_zero"), np.errstate(all="ignore"):
        s2 = cr_compile(f, on_miss="error")
        s2(cr.tensor([1.0, 2.0]))
        s2(cr.tensor([0.0, 2.0]))


@pytest.mark.parametrize("safe_zero", [True, False])
def test_keeping_zero_rules_replay(safe_zero):
    def f(x, y):
        return cr.grad(lambda x, y: (cr.log(x * x + 1.0) / y + cr.sqrt(y) ** 1.5 + x ** 0.5).sum(),
                       argnums=(0, 1))(x, y)
    cr.set_safe_zero_cotangents(safe_zero)
    try:
        replays(f, lambda i: (rand(i, 3, lo=0.1), rand(i, 3, lo=0.5, hi=2.0, seed=1)))
    finally:
        cr.set_safe_zero_cotangents(True)


def test_power_with_a_tensor_exponent_falls_back():
    # power's base rule also branches on the exponent's zeros in Python (ops/elementwise.py)
    def f(x, y):
        return cr.grad(lambda x: (x ** y).sum())(x)
    falls_back(f, lambda i: (rand(i, 3, lo=0.5), rand(i, 3, seed=1)), "'power'")


def test_rare_states_run_eagerly():
    step = cr_compile(_sq)
    step(rand(0, 3))
    with pytest.warns(UserWarning, match="detect_anomaly"), cr.detect_anomaly():
        assert_bitwise(step(rand(1, 3)), _sq(rand(1, 3)))
    assert step.cache_info().eager_runs == 1


# ----- random programs -----
_UNARY = [cr.tanh, cr.sin, cr.cos, cr.exp, cr.sigmoid, lambda v: v * v, lambda v: -v,
          lambda v: cr.abs(v), lambda v: cr.relu(v), lambda v: v.T if v.ndim == 2 else v]
_BINARY = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, cr.maximum,
           lambda a, b: cr.where(a > b, a, b)]


def _program(rng):
    ops = []
    for _ in range(int(rng.integers(3, 12))):
        kind = rng.integers(0, 5)
        if kind == 0:
            ops.append(("u", int(rng.integers(len(_UNARY)))))
        elif kind == 1:
            ops.append(("b", int(rng.integers(len(_BINARY))), int(rng.integers(0, 2))))
        elif kind == 2:
            ops.append(("s", float(rng.choice([0.5, -1.5, 2.0]))))
        elif kind == 3:
            ops.append(("r", int(rng.integers(0, 3))))
        else:
            ops.append(("m",))

    def run(x, y):
        vals = [x, y]
        for op in ops:
            v = vals[-1]
            if op[0] == "u":
                v = _UNARY[op[1]](v)
            elif op[0] == "b":
                w = vals[op[2]]
                v = _BINARY[op[1]](v, w if w.shape == v.shape else w.T if w.T.shape == v.shape else 1.0)
            elif op[0] == "s":
                v = v * op[1] + 0.25
            elif op[0] == "r":
                v = [v.sum(axis=0, keepdims=True) + v, v.reshape(-1)[::-1].reshape(v.shape),
                     v.mean(axis=-1, keepdims=True) * v][op[1]]
            else:
                v = v @ vals[1].T @ vals[1] if v.ndim == 2 else v
            vals.append(v)
        return vals[-1].sum() + (x * y).sum()
    return run


def _fuzz(n_programs, seed):
    rng = np.random.default_rng(seed)
    for p in range(n_programs):
        run = _program(rng)

        def f(x, y, run=run):
            return cr.value_and_grad(run, argnums=(0, 1))(x, y)
        dtype = (cr.float64, cr.float32)[p % 2]
        replays(f, lambda i, p=p, dtype=dtype: (rand(i, 3, 3, seed=2 * p).astype(dtype),
                                               rand(i, 3, 3, seed=2 * p + 1).astype(dtype)), calls=3)


def test_random_programs():
    _fuzz(25, 0)


def test_random_programs_in_forward_mode():
    # forward mode's nested push (while a capture runs) against eager's plain single-level push
    rng = np.random.default_rng(5)
    for p in range(12):
        run = _program(rng)

        def f(x, y, tx, run=run):
            return cr.jvp(lambda x: run(x, y), (x,), (tx,))
        replays(f, lambda i, p=p: (rand(i, 3, 3, seed=3 * p), rand(i, 3, 3, seed=3 * p + 1),
                                   rand(i, 3, 3, seed=3 * p + 2)), calls=3)


@pytest.mark.slow
def test_random_programs_long():
    _fuzz(400, 1)


def test_a_growing_list_the_step_reads_is_a_miss_not_a_stale_replay():
    class Holder:
        def __init__(self):
            self.items = []

    h = Holder()

    def step(x):
        return (x * len(h.items)).sum()

    compiled = cr.compile(step)
    for _ in range(3):
        x = cr.tensor([1.0, 2.0])
        assert compiled(x).data.tobytes() == step(x).data.tobytes()
        h.items.append(1)
    assert compiled.cache_info().misses == 2
    assert compiled.last_miss == "len(h.items): value 2 != 1"


def test_a_draw_from_a_reachable_numpy_generator_runs_eagerly():
    rng = np.random.default_rng(0)

    def step(x):
        return (x * rng.normal()).sum()

    compiled = cr.compile(step)
    with pytest.warns(UserWarning, match="draws from the NumPy generator rng"):
        compiled(cr.tensor([1.0]))
    first = rng.bit_generator.state
    compiled(cr.tensor([1.0]))                      # eager: the stream moves on
    assert rng.bit_generator.state != first
    assert compiled.cache_info().eager_runs == 1 and compiled.cache_info().replays == 0


def test_a_step_through_training_mode_batch_norm_runs_eagerly():
    # batch_norm_train's plain backward (in place, on ndarrays) and its rules in ops round differently
    # (1 ulp): a replay of the rules could not be bitwise eager's, so the step is refused
    bn = cr.nn.BatchNorm2d(3, track_running_stats=False, dtype=cr.float64).requires_grad_(False)

    def step(x):
        value, g = cr.value_and_grad(lambda v: (bn(v) ** 3).sum())(x)
        return value.detach(), g

    compiled = cr.compile(step)
    rng = np.random.default_rng(0)
    with pytest.warns(UserWarning, match="batch_norm_train"):
        compiled(cr.tensor(rng.normal(size=(4, 3, 2, 2))))
    for _ in range(2):
        x = cr.tensor(rng.normal(size=(4, 3, 2, 2)))
        (a, ga), (b, gb) = compiled(x), step(x)
        assert a.data.tobytes() == b.data.tobytes() and ga.data.tobytes() == gb.data.tobytes()
    assert compiled.cache_info().replays == 0 and compiled.cache_info().eager_runs == 2


def test_a_compiled_step_named_like_an_attribute_it_calls_still_replays():
    # `opt.step()` puts "step" in the code's names; the global `step` is the compiled step itself,
    # whose counters change on every call: the scan must not take them for the user's state
    src = ("def step(x):\n    opt.zero_grad()\n    loss = ((w * x) ** 2).sum()\n    loss.backward()\n"
           "    opt.step()\n    return loss.detach()\n")
    runs = []
    for compiled in (True, False):
        w = cr.tensor(np.ones(3), requires_grad=True)
        g = {"w": w, "opt": cr.optim.SGD([w], lr=0.1)}
        exec(src, g)
        if compiled:
            g["step"] = cr.compile(g["step"])
        runs.append(([g["step"](cr.tensor(np.full(3, float(i)))).data for i in range(1, 5)], w.data))
        if compiled:
            assert g["step"].cache_info().replays >= 2, g["step"].last_miss
    (got, w_got), (want, w_want) = runs
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    np.testing.assert_array_equal(w_got, w_want)
