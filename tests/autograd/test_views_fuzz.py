"""Fuzz views and in-place operations against PyTorch.

Hypothesis draws small float64 programs: 1-2 leaves that require grad, a non-leaf base
(``x0 * c``, ``exp(x0)`` or ``tanh(x0)``), then 1-6 steps, each one of: a view of an existing tensor
(a slice along the first or the last axis, an integer index (a 0-d view), a reshape, ``.T`` of a 2-D
tensor, ``detach()``), an out-of-place op on tensors of the same shape (mul, add, tanh,
exp(tanh(.))), an in-place op on a tensor or a view (``+=``, ``-=``, ``*=``, ``/=`` by a constant,
``+=``, ``-=``, ``*=`` by a tensor of the same shape that may require grad, ``t[a:b] = value`` with a
constant or a tensor), or a scaling hook on a non-leaf. The loss is the sum of the squares of one
or two tensors, and ``loss.backward()`` ends the program.

The SAME program runs in chainrule and torch. Either both raise at the same step (chainrule's
GraphError, ShapeError, DTypeError or IndexError; torch's RuntimeError or IndexError), or neither
does, and then the loss, every leaf's ``.grad`` (``None`` included), the final value of every tensor
and whether it requires grad agree.

Not in the vocabulary (not implemented in chainrule): views made under no_grad, multi-output view
ops, forward mode, ``ctx.mark_dirty``, ``retain_grad``, and matmul. Kept out as well: operands
that partially overlap the written memory (torch refuses them; see the comment at the top).

A failure prints the program as torch code: paste it into a script to reproduce.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chainrule as cr

torch = pytest.importorskip("torch", reason="the views fuzz compares against PyTorch")

RTOL, ATOL = 1e-10, 1e-12      # ATOL scales with the magnitude of the expected array
SHAPES = ((4,), (2, 3), (3, 2), (2, 2))
CONSTS = (0.5, 2.0, -1.5, 3.0)
CR_ERRORS = (cr.GraphError, cr.ShapeError, cr.DTypeError, IndexError)
TORCH_ERRORS = (RuntimeError, IndexError)

IN_PLACE_CONST = "+-*/"
# Not a chainrule bug: torch refuses an in-place op whose operand partially overlaps the written
# memory (``t = y.reshape(2, 2); t.T += t``: "some elements of the input tensor and the written-to
# tensor refer to a single memory location"); NumPy, and so chainrule, buffers and computes it.
# Such operands (overlapping, but not the very same elements in the same layout) are not drawn.


def _partial_overlap(target: np.ndarray, operand: np.ndarray) -> bool:
    if not np.shares_memory(target, operand):
        return False
    same = (target.__array_interface__["data"][0] == operand.__array_interface__["data"][0]
            and target.shape == operand.shape and target.strides == operand.strides)
    return not same


# ----- programs -----

@dataclass(frozen=True)
class Program:
    """``shapes``: leaf shapes (tensors ``x0``, ``x1``). ``base``: ("mul", c), ("exp",) or ("tanh",),
    the tensor ``y = f(x0)``. ``steps``: each creates a new tensor ``t<i>`` (views and out-of-place
    ops) or changes one in place / hooks one. ``loss``: one or two tensor indices."""
    seed: int
    shapes: tuple
    base: tuple
    steps: tuple
    loss: tuple

    def name(self, i: int) -> str:
        n = len(self.shapes)
        return f"x{i}" if i < n else "y" if i == n else f"t{i}"

    def __repr__(self) -> str:
        return "\n" + "\n".join(self.code()) + "\n"

    def code(self) -> list[str]:
        n = self.name
        lines = ["import numpy as np, torch", f"rng = np.random.default_rng({self.seed})"]
        for i, s in enumerate(self.shapes):
            lines.append(f"x{i} = torch.tensor(rng.uniform(-1.5, 1.5, size={s}), dtype=torch.float64, "
                         f"requires_grad=True)")
        b = self.base
        lines.append("y = " + (f"x0 * {b[1]}" if b[0] == "mul" else f"x0.{b[0]}()"))
        count = len(self.shapes) + 1
        for step in self.steps:
            kind = step[0]
            if kind in ("view", "op"):
                lines.append(f"{n(count)} = {_expr_code(step, n)}")
                count += 1
            elif kind == "iconst":
                lines.append(f"{n(step[1])} {step[2]}= {step[3]}")
            elif kind == "itensor":
                lines.append(f"{n(step[1])} {step[2]}= {n(step[3])}")
            elif kind == "setitem":
                value = step[3][1] if step[3][0] == "const" else n(step[3][1])
                lines.append(f"{n(step[1])}[{_key_code(step[2])}] = {value}")
            else:
                t = n(step[1])
                lines.append(f"if not {t}.is_leaf: {t}.register_hook(lambda g: g * {step[2]})")
        lines.append("loss = " + " + ".join(f"({n(i)} * {n(i)}).sum()" for i in self.loss))
        lines.append("loss.backward()")
        return lines


def _key_code(key: tuple) -> str:
    if key[0] == "int":
        return str(key[1])
    _, axis, a, b, step = key
    s = f"{a}:{b}" + ("" if step == 1 else f":{step}")
    return s if axis == 0 else f":, {s}"


def _expr_code(step: tuple, n) -> str:
    if step[0] == "view":
        src, how, param = step[1], step[2], step[3]
        if how == "index":
            return f"{n(src)}[{_key_code(param)}]"
        if how == "reshape":
            return f"{n(src)}.reshape({param})"
        return f"{n(src)}.T" if how == "T" else f"{n(src)}.detach()"
    op, args = step[1], step[2]
    if op == "tanh":
        return f"{n(args[0])}.tanh()"
    if op == "exp":
        return f"{n(args[0])}.tanh().exp()"
    return f"{n(args[0])} {'*' if op == 'mul' else '+'} {n(args[1])}"


def _np_key(key: tuple):
    if key[0] == "int":
        return key[1]
    _, axis, a, b, step = key
    s = slice(a, b, step)
    return s if axis == 0 else (slice(None), s)


def _reshapes(s: tuple) -> list:
    size = int(np.prod(s, dtype=int))
    cands = {(size,), tuple(reversed(s)), tuple(d for d in s if d != 1)}
    if size == 4:
        cands.add((2, 2))
    if size == 6:
        cands |= {(2, 3), (3, 2)}
    if size == 1:
        cands |= {(1,), ()}
    return sorted(cands, key=repr)


@st.composite
def slice_keys(draw, shape: tuple):
    axis = draw(st.sampled_from([0, len(shape) - 1]))
    n = shape[axis]
    a = draw(st.integers(0, n - 1))
    b = draw(st.integers(a + 1, n))
    return ("slice", axis, a, b, draw(st.sampled_from([1, 1, 2])))


@st.composite
def view_programs(draw, max_steps: int = 6) -> Program:
    seed = draw(st.integers(0, 2**16))
    s0 = draw(st.sampled_from(SHAPES))
    shapes = [s0] + ([draw(st.sampled_from([s0, s0, *SHAPES]))] if draw(st.booleans()) else [])
    base = draw(st.one_of(st.tuples(st.just("mul"), st.sampled_from(CONSTS)),
                          st.just(("exp",)), st.just(("tanh",))))
    # A NumPy stand-in for each tensor made so far: its shape, and whether a view shares memory.
    arrays = [np.empty(s) for s in shapes] + [np.empty(s0)]
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        n = len(arrays)
        ok = list(range(n))
        src = draw(st.one_of(st.just(ok[-1]), st.sampled_from(ok)))   # chains more often than not
        s = arrays[src].shape
        same = [j for j in ok if arrays[j].shape == s]
        kinds = ["view", "view", "op", "iconst", "itensor", "itensor", "hook"]
        kinds += ["setitem"] if s else []
        kind = draw(st.sampled_from(kinds))
        if kind == "view":
            hows = ["reshape", "detach"] + (["index", "index"] if s else []) + (["T"] if len(s) == 2 else [])
            how = draw(st.sampled_from(hows))
            a = arrays[src]
            if how == "index":
                param = draw(st.one_of(slice_keys(s),
                                       st.tuples(st.just("int"), st.integers(-s[0], s[0] - 1))))
                k = _np_key(param)
                new = a[(*k, ...) if isinstance(k, tuple) else (k, ...)]   # ...: a[i] is a 0-d view
            elif how == "reshape":
                param = draw(st.sampled_from(_reshapes(s)))
                new = a.reshape(param)
            else:
                param = None
                new = a.T if how == "T" else a.view()           # detach: no autograd view
            steps.append(("view", src, how, param))
            arrays.append(new)
            continue
        if kind == "op":
            op = draw(st.sampled_from(["mul", "add", "tanh", "exp"]))
            args = (src, draw(st.sampled_from(same))) if op in ("mul", "add") else (src,)
            steps.append(("op", op, args))
            arrays.append(np.empty(s))
            continue
        if kind == "iconst":
            steps.append(("iconst", src, draw(st.sampled_from(IN_PLACE_CONST)), draw(st.sampled_from(CONSTS))))
        elif kind == "itensor":
            fits = [j for j in same if not _partial_overlap(arrays[src], arrays[j])]
            steps.append(("itensor", src, draw(st.sampled_from("+-*")), draw(st.sampled_from(fits))))
        elif kind == "setitem":
            key = draw(slice_keys(s))
            target = np.empty(s)[_np_key(key)].shape
            region = arrays[src][_np_key(key)]
            fits = [j for j in ok if arrays[j].shape in (target, ()) and not _partial_overlap(region, arrays[j])]
            value = draw(st.one_of(st.tuples(st.just("const"), st.sampled_from(CONSTS)),
                                   *([st.tuples(st.just("tensor"), st.sampled_from(fits))] if fits else [])))
            steps.append(("setitem", src, key, value))
        else:
            steps.append(("hook", src, draw(st.sampled_from(CONSTS))))
    loss = tuple(draw(st.lists(st.sampled_from(range(len(arrays))), min_size=1, max_size=2, unique=True)))
    return Program(seed, tuple(shapes), base, tuple(steps), loss)


# ----- one interpreter, two libraries -----

class CrLib:
    name = "chainrule"
    errors = CR_ERRORS
    exp, tanh = staticmethod(cr.exp), staticmethod(cr.tanh)

    @staticmethod
    def leaf(a):
        return cr.tensor(a, dtype=cr.float64, requires_grad=True)

    @staticmethod
    def numpy(t):
        return None if t is None else np.array(t.data, copy=True)


class TorchLib:
    name = "torch"
    errors = TORCH_ERRORS

    @staticmethod
    def exp(x):
        return torch.exp(x)

    @staticmethod
    def tanh(x):
        return torch.tanh(x)

    @staticmethod
    def leaf(a):
        return torch.tensor(a, dtype=torch.float64, requires_grad=True)

    @staticmethod
    def numpy(t):
        return None if t is None else t.detach().clone().numpy()


def _in_place(t, op: str, v) -> None:
    if op == "+":
        t += v
    elif op == "-":
        t -= v
    elif op == "*":
        t *= v
    else:
        t /= v


def execute(p: Program, lib) -> dict:
    """Run ``p`` in ``lib``; return ("raised", step, error) or the loss, leaf grads and final values."""
    rng = np.random.default_rng(p.seed)
    ts = [lib.leaf(rng.uniform(-1.5, 1.5, size=s)) for s in p.shapes]
    b = p.base
    ts.append(ts[0] * b[1] if b[0] == "mul" else getattr(lib, b[0])(ts[0]))
    step_no = -1
    try:
        for step in p.steps:
            step_no += 1
            kind = step[0]
            if kind == "view":
                src, how, param = ts[step[1]], step[2], step[3]
                if how == "index":
                    ts.append(src[_np_key(param)])
                elif how == "reshape":
                    ts.append(src.reshape(param))
                else:
                    ts.append(src.T if how == "T" else src.detach())
            elif kind == "op":
                op, args = step[1], step[2]
                a = ts[args[0]]
                if op == "tanh":
                    ts.append(lib.tanh(a))
                elif op == "exp":
                    ts.append(lib.exp(lib.tanh(a)))
                else:
                    ts.append(a * ts[args[1]] if op == "mul" else a + ts[args[1]])
            elif kind == "iconst":
                _in_place(ts[step[1]], step[2], step[3])
            elif kind == "itensor":
                _in_place(ts[step[1]], step[2], ts[step[3]])
            elif kind == "setitem":
                value = step[3][1] if step[3][0] == "const" else ts[step[3][1]]
                ts[step[1]][_np_key(step[2])] = value
            else:
                t, c = ts[step[1]], step[2]
                if not t.is_leaf:
                    t.register_hook(lambda g, c=c: g * c)
        step_no = len(p.steps)
        loss = None
        for i in p.loss:
            term = (ts[i] * ts[i]).sum()
            loss = term if loss is None else loss + term
        step_no += 1
        loss.backward()
    except lib.errors as e:
        return {"raised": step_no, "error": f"{type(e).__name__}: {e}"}
    return {"raised": None,
            "loss": lib.numpy(loss),
            "grads": [lib.numpy(x.grad) for x in ts[:len(p.shapes)]],
            "values": [lib.numpy(t) for t in ts],
            "requires_grad": [bool(t.requires_grad) for t in ts]}


def _close(got, want, what: str, p: Program) -> None:
    if want is None or got is None:
        assert got is None and want is None, f"{what}: chainrule {got}, torch {want}\n{p!r}"
        return
    want = np.asarray(want)
    atol = ATOL * max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=atol,
                               err_msg=f"{what} differs\n{p!r}")


def check(p: Program) -> None:
    want = execute(p, TorchLib)
    got = execute(p, CrLib)
    assert got["raised"] == want["raised"], (
        f"chainrule raised at step {got['raised']} ({got.get('error')}), torch at step "
        f"{want['raised']} ({want.get('error')}) (step len(steps) is the loss, +1 the backward)\n{p!r}")
    if want["raised"] is not None:
        return
    _close(got["loss"], want["loss"], "loss", p)
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        _close(g, w, f"x{i}.grad", p)
    for i, (g, w) in enumerate(zip(got["values"], want["values"])):
        _close(g, w, f"the value of {p.name(i)}", p)
    assert got["requires_grad"] == want["requires_grad"], f"requires_grad differs\n{p!r}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view_programs())
def test_views_and_in_place_ops_match_torch(p):
    check(p)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view_programs())
def test_views_and_in_place_ops_match_torch_long(p):
    check(p)
