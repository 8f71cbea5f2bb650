"""The random-program fuzzers through ``cr.compile`` (issue 29): each program becomes a step, called
3 times with new inputs of the same shapes (new leaves, new values), and every call must be bitwise
equal to eager execution of the same program on the same inputs: its outputs and the ``.grad`` of
its leaves. The steps that the capture can replay must replay (``cache_info``: 1 capture, 2
replays); the others must say why, with one of the reasons in ``REFUSALS`` (any other reason fails).

- views, in-place ops and hooks (tests/autograd/test_views_fuzz.py): views of views, split and
  unbind, in-place ops on views and bases (under no_grad too), ``t[key] = value``, mark_dirty
  Functions, ``retain_grad`` and scaling hooks, ``loss.backward()``; the step returns the loss,
  every tensor's value (detached), whether it is a leaf and requires grad, the retained gradients;
- tensor hooks, post-accumulate-grad hooks and retain_grad (tests/autograd/test_hooks_fuzz.py),
  every backward scheme of that fuzzer, with the observers' snapshots and the hooks' call counts
  returned; the post hooks write ``t.grad`` in place with in-place ops (``HookLib``), or, as the
  hooks fuzz does, through ``t.grad.data`` (``RawHookLib``: a replay cannot see that, and the
  capture's verifying replay refuses it);
- functional programs and vmap (tests/func/test_vmap_fuzz.py): the program on one example, its
  ``cr.grad``, ``cr.vmap`` of it and ``cr.vmap(cr.grad(...))``.

``python tests/func/test_compile_fuzz.py [n]`` prints, for ``n`` programs of each fuzzer, the
fraction replayed and the reasons of the others.
"""
from __future__ import annotations

import collections
import contextlib
import re
import sys
import types
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chainrule as cr
from chainrule.func.compile import compile as cr_compile
from tests.autograd import test_hooks_fuzz as hooks_fuzz
from tests.autograd import test_views_fuzz as views_fuzz
from tests.func import test_vmap_fuzz as vmap_fuzz
from tests.func.test_compile import _bits

CALLS = 3
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))

# Why a program may run eagerly instead (each a pattern of its reason); see docs/compile.md.
REFUSALS = {
    # registered on a leaf the step is given: each eager call would add one more, a replay none
    "a hook that outlives the step": r"registers a hook on a tensor of shape .* that outlives the step",
    # index lists (x[[0, 2]]), cr.ones_like, diagonal_scatter's mask, grad's zeros for an unused
    # input: arrays made with NumPy inside the step, which the capture cannot prove value-independent
    "an array made inside the step": r"(reads an array|returns a tensor) of shape .* not computed by chainrule's ops",
    "a .grad with a graph (create_graph)": r"leaves a \.grad that requires grad",
    "a rule that branches on values": r"runs the derivative rule of '",
    # batching rules of a batched integer index read it with np.asarray
    "NumPy reads inside cr.vmap": r"reads tensor values with np\.asarray\(\)",
    # RawHookLib's post hooks write t.grad.data: the verifying replay sees another .grad
    "NumPy writes into .grad": r"a replay on the capture's own inputs gives another",
}
STATS: dict = collections.defaultdict(collections.Counter)
CENSUS = [False]                  # counting (_census): an unexpected reason is counted, not a failure


def _reason(step) -> str | None:
    """None if the step replayed every call after its capture, else its reason (checked)."""
    info = step.cache_info()
    if info.replays == CALLS - 1 and info.captures == 1 and info.eager_runs == 0:
        return None
    reason = step.eager_reason or f"{info} (last miss: {step.last_miss})"
    assert CENSUS[0] or any(re.search(p, reason) for p in REFUSALS.values()), f"an unexpected refusal: {reason}"
    return reason


def _against_eager(fn, args_of, fuzzer: str, grads_of=None):
    """``fn`` compiled and eager on ``args_of(k)`` (fresh, equal inputs for each); bitwise equal
    results (and ``grads_of(args)``: the leaves' ``.grad``); the reason it did not replay, or None."""
    step = cr_compile(fn)
    for k in range(CALLS):
        a, b = args_of(k), args_of(k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # the refusal's warning, and NumPy's on both sides
            try:
                want = fn(*b)
            except (cr.ChainruleError, IndexError) as e:
                with pytest.raises(type(e)):
                    step(*a)
                STATS[fuzzer]["raises (both)"] += 1
                return "raises"
            got = step(*a)
        assert _bits(got) == _bits(want), f"call {k}: the compiled step's results differ from eager's"
        if grads_of is not None:
            assert _bits(grads_of(a)) == _bits(grads_of(b)), f"call {k}: the leaves' .grad differ"
    reason = _reason(step)
    STATS[fuzzer]["replayed" if reason is None else reason[:110]] += 1
    return reason


# ----- views, in-place ops, hooks on views -----
def _views_step(p):
    def step(*xs):
        ts = list(xs)
        loss, retained, returned = views_fuzz.run(p, views_fuzz.CrLib, ts, [-1])
        return (loss.detach(), [t.detach() for t in ts], [bool(t.is_leaf) for t in ts],
                [bool(t.requires_grad) for t in ts], {i: ts[i].grad for i in retained}, returned)
    return step


def check_views(p) -> str | None:
    return _against_eager(_views_step(p), lambda k: views_fuzz.leaves(p, views_fuzz.CrLib, seed=p.seed + 7 * k),
                          "views", lambda xs: [x.grad for x in xs])


# ----- tensor hooks, post-accumulate-grad hooks, retain_grad -----
class HookLib(hooks_fuzz.CrLib):
    """The hooks fuzz's chainrule side, its observers' snapshots as tensors (copies made by ops), so
    that a step can return them; post hooks write ``.grad`` with in-place ops."""

    @staticmethod
    def numpy(t):
        return None if t is None else t.detach().copy()

    @staticmethod
    def in_place(g, op, c):
        with cr.no_grad():
            if op == "mul":
                g *= c
            else:
                g += c


class RawHookLib(HookLib):
    in_place = staticmethod(hooks_fuzz.CrLib.in_place)      # through g.data: invisible to a replay


def check_hooks(p, lib=HookLib) -> str | None:
    def step(*xs):
        return hooks_fuzz.execute(p, lib, None, list(xs))
    return _against_eager(step, lambda k: hooks_fuzz.leaves(p, lib, seed=p.seed + 7 * k),
                          "hooks" if lib is HookLib else "hooks, raw", lambda xs: [x.grad for x in xs])


# ----- functional programs and vmap -----
def check_vmap(case, kind: str) -> str | None:
    fn = case.p.compile()
    argnums = vmap_fuzz._float_args(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vmap_fuzz._loop_values(fn, case)             # well-conditioned programs only (assume)
    step = fn if kind in ("program", "vmap") else cr.grad(lambda *a: fn(*a).sum(), argnums=argnums)
    if kind.startswith("vmap"):
        step = cr.vmap(step, in_axes=case.in_axes)
    inputs = case.args if kind.startswith("vmap") else case.examples[0]

    def args(k):                                     # new values of the float inputs at each call
        return [cr.tensor(a * (1 + 0.25 * k)) if i in argnums else a for i, a in enumerate(inputs)]
    return _against_eager(step, args, f"vmap fuzz: {kind}")


# ----- the tests -----
@FAST
@given(p=views_fuzz.view_programs())
def test_views_programs_replay_bitwise(p):
    check_views(p)


@FAST
@given(p=views_fuzz.view_programs(regeneration=True))
def test_regenerated_views_programs_replay_bitwise(p):
    check_views(p)


@FAST
@given(p=hooks_fuzz.hook_programs(), raw=st.booleans())
def test_hook_programs_replay_bitwise(p, raw):
    check_hooks(p, RawHookLib if raw else HookLib)


@FAST
@given(case=vmap_fuzz.cases(), kind=st.sampled_from(["program", "grad", "vmap", "vmap_grad"]))
def test_functional_and_vmap_programs_replay_bitwise(case, kind):
    check_vmap(case, kind)


@pytest.mark.slow
@LONG
@given(p=views_fuzz.view_programs(), regeneration=st.booleans())
def test_views_programs_replay_bitwise_long(p, regeneration):
    check_views(p)


@pytest.mark.slow
@LONG
@given(p=hooks_fuzz.hook_programs(), raw=st.booleans())
def test_hook_programs_replay_bitwise_long(p, raw):
    check_hooks(p, RawHookLib if raw else HookLib)


@pytest.mark.slow
@LONG
@given(case=vmap_fuzz.cases(), kind=st.sampled_from(["program", "grad", "vmap", "vmap_grad"]))
def test_functional_and_vmap_programs_replay_bitwise_long(case, kind):
    check_vmap(case, kind)


# ----- hand-written programs: what each kind of write and hook replays, and what refuses -----
def _fresh(i, *shape, requires_grad=False):
    return cr.tensor(np.random.default_rng(i).uniform(-1.0, 1.0, shape), requires_grad=requires_grad)


def _twins(make, calls=4, shape=(4,), requires_grad=False):
    """``make()`` twice (a compiled and an eager step with their own state); both called on equal
    inputs; returns the compiled step and the two states (``make`` returns (step, state))."""
    (fn_c, state_c), (fn_e, state_e) = make(), make()
    step = cr_compile(fn_c)
    for i in range(calls):
        a, b = _fresh(i, *shape, requires_grad=requires_grad), _fresh(i, *shape, requires_grad=requires_grad)
        assert _bits(step(a)) == _bits(fn_e(b)), f"call {i}"
        assert _bits((a.grad, state_c)) == _bits((b.grad, state_e)), f"call {i}: the state differs"
    return step, state_c, state_e


def test_writes_into_views_of_a_tensor_made_in_the_step_replay():
    def make():
        def f(x):
            y = x * 2.0
            v = y[1:3]
            v *= 10.0                   # through a view: y changes
            y[0] = -1.0                 # __setitem__
            y.T[3:] += v[0]
            return y.detach(), v.detach()
        return f, None
    step, _, _ = _twins(make)
    assert step.cache_info() == (1, 3, 0, 0), step.eager_reason


def test_setitem_of_a_tensor_that_requires_grad_replays_its_gradient():
    def make():
        def f(x):
            y = x * 1.0
            y[1:3] = x[0:2] * x[0:2]    # index_put in the graph: its rules are straight-line
            (y * y).sum().backward()
            return y.detach()
        return f, None
    step, _, _ = _twins(make, requires_grad=True)
    assert step.cache_info() == (1, 3, 0, 0), step.eager_reason


def test_an_optimizer_written_by_hand_replays_its_writes_and_version_counters():
    def make():
        w = cr.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)

        def f(x):
            w.grad = None
            loss = cr.tanh(w * x).sum()
            loss.backward()
            with cr.no_grad():
                p = w
                p -= 0.1 * w.grad       # the leaf's own array, written in place
            return loss.detach()
        return f, w
    step, w_c, w_e = _twins(make, calls=6)
    assert step.cache_info().replays == 4, step.eager_reason     # (the first two capture: .grad None, then not)
    assert w_c._version == w_e._version == 6
    assert _bits(w_c.grad) == _bits(w_e.grad)


def test_in_place_updates_of_a_closed_over_buffer_replay():
    def make():
        running = cr.zeros(4)

        def f(x):
            with cr.no_grad():
                r = running
                r *= 0.9
                r += 0.1 * x
            return (x - running).detach()
        return f, running
    step, _, _ = _twins(make)
    assert step.cache_info() == (1, 3, 0, 0), step.eager_reason


def test_a_mark_dirty_function_replays():
    dirty = views_fuzz._dirty_functions(cr.Function)

    def make():
        def f(x):
            y = dirty["*"].apply(x * 1.0)
            (y * y).sum().backward()
            return y.detach()
        return f, None
    step, _, _ = _twins(make, requires_grad=True)
    assert step.cache_info() == (1, 3, 0, 0), step.eager_reason


def test_retain_grad_and_hooks_registered_inside_the_step_replay():
    def make():
        def f(x):
            y = x * 3.0
            y.retain_grad()
            y.register_hook(lambda g: g * 10.0)
            z = cr.tanh(y)
            z.retain_grad()
            handle = x.register_post_accumulate_grad_hook(lambda t: None)
            (z * z).sum().backward()
            handle.remove()             # (a hook left on the argument would outlive the step)
            return y.grad, z.grad
        return f, None
    step, _, _ = _twins(make, requires_grad=True)
    assert step.cache_info() == (1, 3, 0, 0), step.eager_reason


def test_a_post_accumulate_hook_before_the_step_replays_and_its_set_is_a_guard():
    def make():
        w = cr.tensor(np.ones(4), requires_grad=True)

        def hook(t):
            with cr.no_grad():
                g = t.grad
                g *= 0.5                # in place on the new .grad: taped
        w.register_post_accumulate_grad_hook(hook)

        def f(x):
            (w * x).sum().backward()
            g, w.grad = w.grad, None
            return g
        return f, w
    step, w_c, w_e = _twins(make, calls=5)
    assert step.cache_info() == (1, 4, 0, 0), step.eager_reason
    handle = w_c.register_post_accumulate_grad_hook(lambda t: None)
    w_e.register_post_accumulate_grad_hook(lambda t: None)
    assert _bits(step(_fresh(9, 4))) == _bits(_fresh(9, 4) * 0.5)
    assert step.last_miss.endswith("its hooks changed (2 now, 1 captured)")
    handle.remove()


def test_a_hook_reading_a_global_guards_its_value():
    w = cr.tensor(np.ones(3), requires_grad=True)
    scale = {"c": 2.0}
    w.register_hook(lambda g: g * scale["c"])
    step = cr_compile(lambda x: cr.autograd.grad((w * x).sum(), [w])[0])
    for i, c in enumerate((2.0, 2.0, 3.0, 3.0)):
        scale["c"] = c
        assert _bits(step(_fresh(i, 3))) == _bits(_fresh(i, 3) * c)
    assert step.cache_info() == (2, 2, 0, 1) and "value 3.0 != 2.0" in step.last_miss


@pytest.mark.parametrize("case", ["hook side effect", "hook left on an argument", "numpy write", "zero_",
                                  "rebound attribute"])
def test_what_a_replay_could_not_repeat_runs_eagerly(case):
    log, holder = [], types.SimpleNamespace(t=cr.ones(3))

    def f(x):
        if case == "hook side effect":
            y = x * 2.0
            y.register_hook(lambda g: log.append(1))
            return cr.autograd.grad((y * y).sum(), [x])[0]
        if case == "hook left on an argument":
            x.register_hook(lambda g: g * 2.0)
            return cr.autograd.grad((x * x).sum(), [x])[0]
        y = x * 2.0
        if case == "numpy write":
            y.data[...] = 0.0           # invisible to the tape: the verifying replay differs
        elif case == "zero_":
            y.zero_()
            return y.detach()
        else:
            holder.t = holder.t * x
        return (y + 1.0).detach()
    words = {"hook side effect": "changes len(log)", "hook left on an argument": "outlives the step",
             "numpy write": "capture's own inputs", "zero_": "outside chainrule's in-place ops",
             "rebound attribute": "rebinds holder.t"}
    step = cr_compile(f)
    with pytest.warns(UserWarning, match=re.escape(words[case])):
        step(_fresh(0, 3, requires_grad=case.startswith("hook")))
    assert step.cache_info() == (1, 0, 0, 0)


def test_a_value_read_after_a_write_into_a_buffer_misses_without_writing_twice():
    def make():
        buf = cr.zeros(3)

        def f(x):
            with cr.no_grad():
                b = buf
                b += x
            if bool(buf.sum() > 0):     # a value guard after the write: a miss puts buf back
                return (x * 2.0).detach()
            return (x * 3.0).detach()
        return f, buf
    (fn_c, buf_c), (fn_e, buf_e) = make(), make()
    step = cr_compile(fn_c)
    for i, v in enumerate((1.0, 1.0, -5.0, -5.0, 1.0, 20.0)):
        assert _bits(step(cr.full(3, v))) == _bits(fn_e(cr.full(3, v))), i
        assert _bits(buf_c) == _bits(buf_e) and buf_c._version == buf_e._version, i
    assert step.cache_info() == (2, 4, 0, 1)


def test_a_post_hook_writing_grad_in_place_in_tensor_mode():
    # the engine copies a hooked leaf's gradient that is still shared before a hook may write it, in
    # tensor mode (cr.profile, a capture) as in the plain backward
    def f(x0, x1, watch):
        def hook(t):
            with cr.no_grad():
                g = t.grad
                g *= 0.5
        handle = x0.register_post_accumulate_grad_hook(hook)
        with cr.profile() if watch else contextlib.nullcontext():     # (a profiler: tensor mode)
            cr.tanh(x0 + cr.tanh(x1)).sum().backward()
        handle.remove()
        return x1.grad
    x = [cr.tensor(0.3, requires_grad=True), cr.tensor(-0.7, requires_grad=True)]
    y = [cr.tensor(0.3, requires_grad=True), cr.tensor(-0.7, requires_grad=True)]
    assert _bits(f(*x, True)) == _bits(f(*y, False))


def test_a_write_through_a_view_misses_when_the_argument_strides_change():
    def f(x):
        with cr.no_grad():
            v = x.reshape(-1)           # a view of a contiguous x, a copy of a transposed one
            v += 1.0
        return x.detach()
    step = cr_compile(f)
    for _ in range(2):
        a = cr.tensor(np.arange(6.0).reshape(2, 3))
        assert _bits(step(a)) == _bits(f(cr.tensor(np.arange(6.0).reshape(2, 3))))
    t = cr.tensor(np.ascontiguousarray(np.arange(6.0).reshape(3, 2)).T)
    assert _bits(step(t)) == _bits(f(cr.tensor(np.ascontiguousarray(np.arange(6.0).reshape(3, 2)).T)))
    assert "memory layout" in step.last_miss and step.cache_info() == (2, 1, 0, 1)


def test_a_kernel_returning_a_numpy_scalar_replays():
    # found by the vmap fuzz: amax's tie count of a 0-d tensor is a NumPy scalar, not an array
    step = cr_compile(cr.grad(lambda x: cr.max(cr.cos(x), axis=None).sum()))
    for i in range(3):
        assert _bits(step(cr.tensor(0.4 + i))) == _bits(cr.grad(lambda x: cr.max(cr.cos(x), axis=None).sum())(
            cr.tensor(0.4 + i)))
    assert step.cache_info() == (1, 2, 0, 0), step.eager_reason


def _census(n: int) -> None:
    """``n`` programs of each kind: the fraction replayed, the reasons of the others."""
    runs = [(views_fuzz.view_programs(), check_views), (views_fuzz.view_programs(regeneration=True), check_views),
            (hooks_fuzz.hook_programs(), check_hooks),
            (hooks_fuzz.hook_programs(), lambda p: check_hooks(p, RawHookLib)),
            *((vmap_fuzz.cases(), lambda c, k=k: check_vmap(c, k)) for k in ("program", "grad", "vmap", "vmap_grad"))]
    CENSUS[0] = True
    for strategy, check in runs:
        def run(x, check=check):
            check(x)
        settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck),
                 database=None)(given(x=strategy)(lambda x: run(x)))()
    for fuzzer, counts in STATS.items():
        total = sum(counts.values())
        print(f"{fuzzer}: {counts['replayed']}/{total} replayed ({counts['replayed'] / total:.0%})")
        for reason, k in counts.most_common():
            if reason != "replayed":
                print(f"    {k:4d}  {reason}")


if __name__ == "__main__":
    _census(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
