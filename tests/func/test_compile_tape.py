"""cr.compile's generated code: the unrolled guard agrees with the guard that names misses, and the
tape computes a repeated ufunc call once without changing a bit."""
from __future__ import annotations

import numpy as np
import pytest

import chainrule as cr
from chainrule.func._guards import MISS, describe_guards
from chainrule.func._scan import _flatten_call, _generate, _interpret, _recomputed
from chainrule.func.compile import _state
from chainrule.func.compile import compile as cr_compile

SCALE = 0.5


def _guards(step, *args):
    """(the fast guard's answer, the slow guard's (message, found)) for a call of ``step``."""
    cap = step.captures[-1]
    leaves, tree = _flatten_call(args, {})
    if cap.fast is None:
        cap.guard(leaves, tree, _state())
    return cap.fast(leaves, tree, _state()), describe_guards(cap, leaves, tree, _state())


def _same_slots(a, b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def test_fast_and_slow_guards_agree_on_a_hit_and_on_each_miss():
    w = cr.tensor(np.arange(3.0), requires_grad=True)
    holder = {"w": w}

    @cr_compile
    def step(x, k):
        holder["w"].grad = None
        (cr.tanh(holder["w"] * x) * (k * SCALE)).sum().backward()
        return holder["w"].grad

    x = cr.tensor(np.ones(3))
    step(x, 2)
    step(x, 2)
    fast, (miss, slow) = _guards(step, x, 2)
    assert miss is None and fast is not None
    assert _same_slots(fast[0], slow[0]) and fast[1] == slow[1] and fast[2] == slow[2]
    misses = {
        "a shape": lambda: _guards(step, cr.tensor(np.ones(4)), 2),
        "a dtype": lambda: _guards(step, cr.tensor(np.ones(3, np.float32)), 2),
        "a Python value": lambda: _guards(step, x, 3),
        "requires_grad": lambda: _guards(step, cr.tensor(np.ones(3), requires_grad=True), 2),
    }
    for what, call in misses.items():
        fast, (miss, _) = call()
        assert fast is None and miss is not None, what
    global SCALE
    SCALE = 0.25                                    # a global the step reads: a value guard
    try:
        fast, (miss, _) = _guards(step, x, 2)
        assert fast is None and "SCALE" in miss
    finally:
        SCALE = 0.5
    handle = w.register_hook(lambda g: g)           # a hook on a tensor the step reads
    fast, (miss, _) = _guards(step, x, 2)
    assert fast is None and "hooks" in miss
    handle.remove()
    holder["w"] = cr.tensor(np.arange(3.0), requires_grad=True)     # rebound: another array, same guards
    fast, (miss, slow) = _guards(step, x, 2)
    assert miss is None and fast is not None and _same_slots(fast[0], slow[0])
    assert any(a is holder["w"].data for a in fast[0]) and not any(a is w.data for a in fast[0])
    holder["w"] = cr.tensor(np.arange(3.0, dtype=np.float32), requires_grad=True)
    fast, (miss, _) = _guards(step, x, 2)
    assert fast is None and "dtype" in miss


def test_the_same_tensor_twice_misses_in_both_guards():
    @cr_compile
    def step(a, b):
        return (a * b + a).detach()

    a, b = cr.tensor(np.ones(2)), cr.tensor(np.full(2, 2.0))
    step(a, b)
    step(a, b)
    fast, (miss, _) = _guards(step, a, a)
    assert fast is None and "share memory" in miss


def test_a_repeated_ufunc_call_is_computed_once_and_bitwise_as_eager():
    w = cr.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)

    def loss(x):
        w.grad = None
        d = (w * x).sum() - 0.25
        (d * d).backward()                          # d's gradient: g * d twice, then added
        return w.grad

    step = cr_compile(loss)
    xs = [np.array([0.5, -1.2, 2.0]) * s for s in (1.0, 0.5, -3.0, 7.0)]
    got = [step(cr.tensor(x)).data.copy() for x in xs]
    want = [loss(cr.tensor(x)).data.copy() for x in xs]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
    assert step.cache_info().replays >= 2
    cap = step.captures[-1]
    outs = [o[1] for o in cap.outs if o[0] in ("tensor", "array")] + [g[1] for g in cap.grad_writes]
    assert len(_recomputed(cap.entries, cap.checks, outs)) == 1


def test_a_write_between_two_equal_calls_keeps_both():
    @cr_compile
    def step(a, b):
        p = a * b
        a *= 3.0                                    # the same call now computes another value
        q = a * b
        return p + 1.0, q + 1.0                     # (read by ufuncs only: shareable but for the write)

    def run(fn):
        a, b = cr.tensor(np.array([1.0, 2.0])), cr.tensor(np.array([3.0, 5.0]))
        return [t.data.copy() for t in fn(a, b)]

    for _ in range(3):
        p, q = run(step)
        np.testing.assert_array_equal(p, [4.0, 11.0])
        np.testing.assert_array_equal(q, [10.0, 31.0])
    assert step.cache_info().replays == 2
    cap = step.captures[-1]
    assert _recomputed(cap.entries, cap.checks, [o[1] for o in cap.outs]) == {}
    writes = [e for e in cap.entries if e[0] is np.copyto]
    assert len(writes) == 1
    without = [e for e in cap.entries if e[0] is not np.copyto]
    assert len(_recomputed(without, cap.checks, [o[1] for o in cap.outs])) == 1   # (the write is what keeps them)


@pytest.mark.parametrize("returned", ["both", "one"])
def test_equal_results_handed_out_stay_two_arrays(returned):
    @cr_compile
    def step(a):
        p, q = a * a, a * a
        return (p, q) if returned == "both" else (p, q + 1.0)

    a = cr.tensor(np.array([1.5, -2.0]))
    for _ in range(3):
        p, q = step(a)
    assert p.data is not q.data
    p.data[0] = 100.0                               # writing into one output leaves the other
    assert q.data[0] == (2.25 if returned == "both" else 3.25)


def test_a_short_plain_capture_runs_as_one_function():
    w = cr.tensor(np.array([[0.2, -0.4], [0.7, 0.1]]), requires_grad=True)

    def loss(x):
        w.grad = None
        d = (cr.tanh(w @ x) * x).sum() - 0.5
        (d * d).backward()
        return w.grad, d.detach()

    step = cr_compile(loss)
    for _ in range(3):
        step(cr.tensor(np.array([1.0, -2.0])))
    cap = step.captures[-1]
    assert cap.whole and cap.call is not None
    x = cr.tensor(np.array([0.25, 3.0]))
    got = cap.call((x,), {})
    assert w.grad is got[0]                       # the replay set .grad to what it returned
    want = loss(x)
    assert all(a.data.tobytes() == b.data.tobytes() for a, b in zip(got, want))
    assert cap.call((cr.tensor(np.ones(3)),), {}) is MISS
    assert cap.call((x,), {"extra": 1}) is MISS and cap.call((x, x), {}) is MISS


def test_a_capture_with_a_value_check_takes_the_long_way():
    w = cr.tensor(np.array([0.5, -1.0]), requires_grad=True)

    @cr_compile
    def step(x):
        w.grad = None
        y = (w * x).sum()
        if y.item() > 0:                            # a value guard inside the tape
            y = y * 2.0
        y.backward()
        return w.grad

    for _ in range(3):
        step(cr.tensor(np.array([3.0, 1.0])))
    cap = step.captures[-1]
    assert cap.checks and not cap.whole and cap.call is None and cap.fast is not None
    assert step.cache_info().replays == 1


def test_the_verifying_loop_computes_what_the_generated_code_computes():
    w = cr.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)

    @cr_compile
    def step(x):
        w.grad = None
        d = cr.tanh(w * x).sum() - 0.25
        (d * d + cr.exp(w).sum()).backward()
        return w.grad, d.detach()

    for _ in range(3):
        step(cr.tensor(np.array([0.5, -1.2, 2.0])))
    cap = step.captures[-1]
    found = cap.fast(*_flatten_call((cr.tensor(np.array([2.0, 0.1, -0.3])),), {}), _state())
    looped, generated = found[0][:], found[0][:]
    _interpret(cap.entries, cap.checks, cap.kept, looped)
    _generate(cap.entries, cap.checks, cap.kept)(generated)
    assert all(looped[s].tobytes() == generated[s].tobytes() for s in cap.kept)


def test_the_hot_capture_leaves_rare_states_and_misses_to_the_long_way():
    w = cr.tensor(np.array([0.5, -1.0]), requires_grad=True)

    def loss(x):
        w.grad = None
        (cr.tanh(w * x) ** 2).sum().backward()
        return w.grad

    step = cr_compile(loss)
    x = cr.tensor(np.array([1.0, 2.0]))
    for _ in range(3):
        step(x)
    assert step._hot is step.captures[-1]
    with pytest.warns(UserWarning, match="detect_anomaly"), cr.detect_anomaly():
        got = step(x)                               # a rare state: eagerly, as the long way does
    assert step.cache_info().eager_runs == 1 and got.data.tobytes() == loss(x).data.tobytes()
    x32, n = cr.tensor(np.array([1.0, 2.0], np.float32)), len(step.captures)
    step(x32)                                       # a miss: a new capture, not hot before its first replay
    assert len(step.captures) == n + 1 and step._hot is None
    step(x32)
    assert step._hot is step.captures[-1]
    before = step.cache_info().replays
    step(x)                                         # the older capture still replays (the long way)
    assert step.cache_info().replays == before + 1


def test_a_refused_capture_ends_the_hot_path_too():
    w = cr.tensor(np.array([0.5, -1.0, 2.0]))

    def f(x):
        return (w[:x.shape[0]] * x).detach() if x.shape[0] == 2 else cr.tensor(x.tolist())

    step = cr_compile(f)
    two = cr.tensor(np.array([1.0, 2.0]))
    for _ in range(3):
        step(two)
    assert step._hot is not None
    with pytest.warns(UserWarning, match="cannot be replayed"):
        step(cr.tensor(np.ones(3)))                 # .tolist(): refused, and every later call is eager
    assert step._hot is None and step.eager_reason is not None
    eager = step.cache_info().eager_runs
    step(two)
    assert step.cache_info().eager_runs == eager + 1
