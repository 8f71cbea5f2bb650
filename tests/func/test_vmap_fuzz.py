"""Fuzz random programs under ``cr.vmap`` against a Python loop over the examples.

Hypothesis draws a short program (3-8 steps) over a pool of values: one or two batched float64
inputs (per-example shapes (3,), (2, 3), (3, 3), (2,), ()), one or two unbatched ones, and sometimes a
batched integer index (an extra batched input, values in [-2, 2)). Each step makes a new value with
one op of the vocabulary:

- elementwise unary (tanh, sin, cos, sigmoid, exp(tanh), square, neg, ``** 2``) and binary (add,
  subtract, multiply, a safe division, maximum, with a Python scalar too) with broadcasting between
  batched and unbatched values and between different ranks;
- reductions (sum, mean, max, min, prod, logsumexp; ``axis`` None, an int, negative ints, a pair;
  ``keepdims``; function and method forms), softmax, sort, cumsum (``axis`` None too);
- reshape (with -1), transpose (a permutation, or none), ``.T``, moveaxis, expand_dims, squeeze;
- basic indexing (ints, slices with steps, None, Ellipsis), integer-array indexing (adjacent and
  not), and indexing with the batched integer index along any axis;
- concatenate / stack (mixing batched and unbatched operands), matmul and einsum with matching
  shapes, ``where(c > 0, a, b)``;
- in-place ops on a copy: ``y = v.copy(); y += w; y *= 2.0; y[key] = w`` (``key`` basic or the
  batched index; a batched value is written only into a batched copy: the other case is the
  documented VmapError);
- in-place ops through views of a copy: one or two views (basic indexing with steps, ints and
  None, a reshape that splits axes, transpose, ``.T``, diagonal, a view of a view), written with
  ``*=``/``+=``/``/=`` or ``view[key] = w``, the step's value being the base or a view made before
  the writes (a merging reshape may copy inside vmap where one example's is a view: docs/vmap.md);
- tensor hooks (``t.requires_grad and t.register_hook(h)``: scale by a constant, return None,
  multiply by a value, add a value), on a value, on a new one, on the base or the view before an
  in-place write (a hook on an unbatched value is linear: ``grad(vmap)`` hands it the sum of the
  examples' gradients).

Properties, each against a Python loop of the same program over the examples (``np.stack``):

1. values: ``cr.vmap(program, in_axes, out_axes, chunk_size)``; ``in_axes`` 0, -1 or the last axis
   as a positive int for each batched input, None for the unbatched ones; ``out_axes`` 0 or -1;
   ``chunk_size`` None, 1 or 2;
2. gradients: ``vmap(grad(sum of program))`` with respect to every float input, the unbatched ones
   included (a gradient per example), and ``grad(sum of vmap(program))`` (the sum over examples
   for the unbatched inputs);
3. forward mode: ``vmap(lambda *p_and_t: jvp(program, p, t))``, every input with a tangent.

Where torch is installed, the values and per-example gradients of the programs written only with
ops that map one to one are also checked against ``torch.func.vmap``.

A failure prints the program as Python source (chainrule and, where drawn, torch): paste it into a
script to reproduce. The default run is short; ``-m slow`` runs the long variants.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chainrule as cr

RTOL = 1e-10
EXAMPLE_SHAPES = ((3,), (2, 3), (3, 3), (2,))
CONSTS = (2.0, -0.5, 1.5)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))

UNARY = {"tanh": ("cr.tanh({})", "torch.tanh({})"), "sin": ("cr.sin({})", "torch.sin({})"),
         "cos": ("cr.cos({})", "torch.cos({})"), "sigmoid": ("cr.sigmoid({})", "torch.sigmoid({})"),
         "exp_tanh": ("cr.exp(cr.tanh({}))", "torch.exp(torch.tanh({}))"),
         "square": ("cr.square({})", "torch.square({})"), "neg": ("-{}", "-{}"), "pow": ("{} ** 2", "{} ** 2")}
BINARY = {"add": ("{} + {}", "{} + {}"), "sub": ("cr.subtract({}, {})", "torch.subtract({}, {})"),
          "mul": ("{} * {}", "{} * {}"), "div": ("{} / (1.5 + {} ** 2)", "{} / (1.5 + {} ** 2)"),
          "max": ("cr.maximum({}, {})", "torch.maximum({}, {})")}
REDUCE = ("sum", "mean", "max", "min", "prod", "logsumexp")


@dataclass
class Program:
    """Inputs (name, example shape, batched, kind 'f' or 'i') and source lines for chainrule and
    torch (``torch_lines`` is None once a step has no 1:1 torch form)."""
    inputs: list
    lines: list = field(default_factory=list)
    torch_lines: list | None = field(default_factory=list)
    out: str = ""

    def source(self, lines=None) -> str:
        names = ", ".join(n for n, *_ in self.inputs)
        body = "\n".join("    " + line for line in (self.lines if lines is None else lines))
        return f"def program({names}):\n{body}\n    return {self.out}\n"

    def compile(self, torch_version: bool = False):
        env = {"cr": cr, "np": np}
        if torch_version:
            import torch
            env["torch"] = torch
            exec(self.source(self.torch_lines), env)
        else:
            exec(self.source(), env)
        return env["program"]

    def __repr__(self) -> str:
        desc = ", ".join(f"{n}: {'batched' if b else 'unbatched'} {'int ' if k == 'i' else ''}{s}"
                         for n, s, b, k in self.inputs)
        text = f"# inputs (one example's shapes): {desc}\n{self.source()}"
        if self.torch_lines is not None:
            text += "# torch:\n" + self.source(self.torch_lines)
        return text


# ----- drawing programs -----
def _dummy(shape, kind):
    return np.zeros(shape, dtype=np.int64) if kind == "i" else cr.tensor(np.full(shape, 0.5))


def _axis(draw, ndim, allow_none=False):
    """An axis in [-ndim, ndim) (negative or not), or None."""
    choices = list(range(-ndim, ndim)) + ([None] if allow_none else [])
    return draw(st.sampled_from(choices))


def _key(draw, shape, bidx=None, basic=False):
    """A basic or integer-array index for ``shape`` (ndim >= 1), as source text; ``bidx`` names the
    batched index input, whose values lie in [-2, 2); ``basic``: a basic index only (a view)."""
    nd = len(shape)
    big = [a for a in range(nd) if shape[a] >= 2]
    kinds = ["basic"] if basic else ["basic", "array"] + (["batched"] * 3 if bidx and big else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "batched":
        a = draw(st.sampled_from(big))
        form = draw(st.sampled_from(["pos", "ellipsis"]))
        if form == "ellipsis" and a == nd - 1:
            return f"..., {bidx}"
        return ", ".join([":"] * a + [bidx])
    if kind == "array":
        a = draw(st.integers(0, nd - 1))
        n = shape[a]
        vals = draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
        parts = [":"] * a + [f"np.array({vals})"]
        if a + 1 < nd and draw(st.booleans()):     # a second array: adjacent, or after a slice
            b = draw(st.integers(a + 1, nd - 1))
            m = shape[b]
            vals2 = draw(st.lists(st.integers(-m, m - 1), min_size=1, max_size=1)) if draw(st.booleans()) \
                else [draw(st.integers(-m, m - 1)) for _ in vals]
            parts += [":"] * (b - a - 1) + [f"np.array({vals2})"]
        return ", ".join(parts)
    k = draw(st.integers(1, nd))
    tail = draw(st.booleans())              # x[..., a, b] (the last k axes) or x[a, b(, ...)]
    parts = []
    for n in (shape[nd - k:] if tail else shape[:k]):
        c = draw(st.sampled_from(["int", "slice", "full", "none"]))
        if c == "int":
            parts.append(str(draw(st.integers(-n, n - 1))))
        elif c == "slice":
            start = draw(st.integers(0, n - 1))
            stop = draw(st.integers(start + 1, n))
            step = draw(st.sampled_from([1, 2]))
            parts.append(f"{start}:{stop}" + (f":{step}" if step != 1 else ""))
        elif c == "none":
            parts += ["None", ":"]
        else:
            parts.append(":")
    if tail:
        parts = ["..."] + parts
    elif draw(st.booleans()):
        parts.append("...")
    return ", ".join(parts)


def _reshapes(shape):
    size = int(np.prod(shape, dtype=np.int64))
    out = set()
    for k in (1, 2, 3):
        for fs in itertools.product(range(1, size + 1), repeat=k):
            if int(np.prod(fs)) == size:
                out.add(fs)
                out.add(tuple(-1 if i == 0 else f for i, f in enumerate(fs)))
    if size == 1:
        out.add(())
    return sorted(out)


def _splits(old, new):
    """Whether reshaping ``old`` to ``new`` only splits axes and adds or drops 1s (so it is a view
    for any strides; merging axes copies where the memory is not contiguous, and a batch's memory
    need not be laid out as one example's: docs/vmap.md)."""
    size = int(np.prod(old, dtype=np.int64))
    new = [size // -int(np.prod(new)) if d == -1 else d for d in new]
    rest = iter([d for d in new if d != 1])
    for d in (d for d in old if d != 1):
        p = 1
        while p < d:
            p *= next(rest, d + 1)
        if p != d:
            return False
    return next(rest, None) is None


def _einsum(draw, shapes):
    """An einsum spec for operands of ``shapes`` (letters joined where sizes match)."""
    letters = iter("abcdefgh")
    sizes = {}
    terms = []
    for shape in shapes:
        term = ""
        for n in shape:
            same = [c for c, s in sizes.items() if s == n and c not in term]
            if same and draw(st.booleans()):
                c = draw(st.sampled_from(same))
            else:
                c = next(letters)
                sizes[c] = n
            term += c
        terms.append(term)
    used = sorted(set("".join(terms)))
    out = draw(st.permutations(used))
    out = "".join(out[:draw(st.integers(0, len(out)))])
    return ",".join(terms) + "->" + out


@st.composite
def programs(draw, min_steps=3, max_steps=8):
    inputs = []
    for i in range(draw(st.integers(1, 2))):
        inputs.append((f"x{i}", draw(st.sampled_from(EXAMPLE_SHAPES + ((),))), True, "f"))
    for i in range(draw(st.integers(1, 2))):
        inputs.append((f"u{i}", draw(st.sampled_from(EXAMPLE_SHAPES + ((), (1, 3)))), False, "f"))
    if draw(st.booleans()):
        inputs.append(("idx", draw(st.sampled_from([(1,), (2,), (4,), (2, 2)])), True, "i"))
    p = Program(inputs)
    env = {n: _dummy(s, k) for n, s, _, k in inputs}
    shape = {n: s for n, s, _, k in inputs if k == "f"}
    batched = {n: b for n, s, b, k in inputs}
    bidx = "idx" if "idx" in env else None
    p.lines.append("# float inputs as tensors: the loop passes NumPy arrays")
    for n in shape:
        p.lines.append(f"{n} = {n} if isinstance({n}, cr.Tensor) else cr.tensor({n})")

    # operands favour the newest value, so that steps mostly chain into the output
    def pick(cond=lambda s: True):
        names = [n for n, s in shape.items() if cond(s)]
        if not names:
            raise _NoOperand
        return names[-1] if draw(st.booleans()) else draw(st.sampled_from(names))

    def pair(ok):
        pairs = [(a, b) for a in shape for b in shape if ok(shape[a], shape[b])]
        if not pairs:
            raise _NoOperand
        newest = [(a, b) for a, b in pairs if a == pairs[-1][0] or b == pairs[-1][0]]
        return draw(st.sampled_from(newest if draw(st.booleans()) else pairs))

    def bcast(s, t):
        try:
            np.broadcast_shapes(s, t)
            return True
        except ValueError:
            return False

    def mm(s, t):
        if not s or not t:
            return False
        try:
            np.matmul(np.zeros(s), np.zeros(t))
            return True
        except ValueError:
            return False

    n_steps = draw(st.integers(min_steps, max_steps))
    k = 0
    while k < n_steps:
        v = f"v{k}"
        kind = draw(st.sampled_from(["unary", "binary", "scalar", "reduce", "softmax", "sort", "cumsum",
                                     "reshape", "transpose", "T", "moveaxis", "expand_dims", "squeeze",
                                     "index", "concat", "stack", "matmul", "einsum", "where", "inplace",
                                     "view_inplace", "view_inplace", "hook"]))
        try:
            line, t, ops = _step(draw, kind, v, shape, batched, env, bidx, pick, pair, bcast, mm)
        except _NoOperand:                       # no value fits this op yet: draw another
            continue
        loc = dict(env)
        exec(line, {"cr": cr, "np": np}, loc)
        out = loc[v]
        assert isinstance(out, cr.Tensor), line
        p.lines.append(line)
        if p.torch_lines is not None and t is not None:
            p.torch_lines.append(t)
        else:
            p.torch_lines = None
        env[v] = out
        shape[v] = tuple(out.shape)
        batched[v] = any(batched[o] for o in ops)
        k += 1
    p.out = f"v{n_steps - 1}"
    return p


class _NoOperand(Exception):
    pass


def _step(draw, kind, v, shape, batched, env, bidx, pick, pair, bcast, mm):
    """One step of kind ``kind`` making value ``v``: (chainrule line, torch line or None, operands)."""
    t = None            # the torch line, when the step maps 1:1
    ops = []            # operands
    if kind == "unary":
        a = pick()
        name = draw(st.sampled_from(sorted(UNARY)))
        line, t = (f"{v} = " + f.format(a) for f in UNARY[name])
        ops = [a]
    elif kind == "binary":
        a, b = pair(bcast)
        name = draw(st.sampled_from(sorted(BINARY)))
        line, t = (f"{v} = " + f.format(a, b) for f in BINARY[name])
        ops = [a, b]
    elif kind == "scalar":
        a = pick()
        c = draw(st.sampled_from(CONSTS))
        form = draw(st.sampled_from(["{c} * {a}", "{a} + {c}", "{c} - {a}", "{a} / {c}"]))
        line = t = f"{v} = " + form.format(a=a, c=c)
        ops = [a]
    elif kind == "reduce":
        a = pick()
        nd = len(shape[a])
        name = draw(st.sampled_from(REDUCE))
        axis = _axis(draw, nd, allow_none=True)
        if nd >= 2 and draw(st.booleans()):
            axis = tuple(draw(st.permutations(range(-nd, 0)))[:2])
        keep = draw(st.booleans())
        method = name in ("sum", "mean", "max", "min", "prod") and draw(st.booleans())
        line = (f"{v} = {a}.{name}(axis={axis!r}, keepdims={keep})" if method
                else f"{v} = cr.{name}({a}, axis={axis!r}, keepdims={keep})")
        dims = tuple(range(nd)) if axis is None else axis
        if nd == 0:
            t = None
        elif name in ("sum", "mean", "logsumexp"):
            t = f"{v} = torch.{name}({a}, dim={dims!r}, keepdim={keep})"
        elif name in ("max", "min"):
            t = f"{v} = torch.a{name}({a}, dim={dims!r}, keepdim={keep})"
        elif isinstance(axis, int):
            t = f"{v} = torch.prod({a}, dim={axis}, keepdim={keep})"
        ops = [a]
    elif kind in ("softmax", "sort"):
        a = pick(lambda s: len(s) >= 1)
        axis = _axis(draw, len(shape[a]))
        line = f"{v} = cr.{kind}({a}, axis={axis})"
        t = (f"{v} = torch.softmax({a}, dim={axis})" if kind == "softmax"
             else f"{v} = torch.sort({a}, dim={axis}).values")
        ops = [a]
    elif kind == "cumsum":
        a = pick(lambda s: len(s) >= 1)
        axis = _axis(draw, len(shape[a]), allow_none=True)
        line = f"{v} = cr.cumsum({a}, axis={axis})"
        t = f"{v} = torch.cumsum({a}, dim={axis})" if axis is not None else None
        ops = [a]
    elif kind == "reshape":
        a = pick()
        new = draw(st.sampled_from(_reshapes(shape[a])))
        line = (f"{v} = {a}.reshape({new!r})" if draw(st.booleans())
                else f"{v} = cr.reshape({a}, {new!r})")
        t = f"{v} = {a}.reshape({new!r})"
        ops = [a]
    elif kind == "transpose":
        a = pick()
        nd = len(shape[a])
        perm = None if draw(st.booleans()) else tuple(draw(st.permutations(range(nd))))
        line = f"{v} = cr.transpose({a}, {perm!r})"
        t = f"{v} = {a}.permute({tuple(range(nd))[::-1] if perm is None else perm!r})"
        ops = [a]
    elif kind == "T":
        a = pick()
        line = f"{v} = {a}.T"
        t = f"{v} = {a}.permute({tuple(range(len(shape[a])))[::-1]!r})"
        ops = [a]
    elif kind == "moveaxis":
        a = pick(lambda s: len(s) >= 1)
        nd = len(shape[a])
        src, dst = _axis(draw, nd), _axis(draw, nd)
        line = f"{v} = cr.moveaxis({a}, {src}, {dst})"
        t = f"{v} = torch.movedim({a}, {src}, {dst})"
        ops = [a]
    elif kind == "expand_dims":
        a = pick()
        nd = len(shape[a])
        axis = draw(st.integers(-nd - 1, nd))
        line = f"{v} = cr.expand_dims({a}, {axis})"
        t = f"{v} = torch.unsqueeze({a}, {axis})"
        ops = [a]
    elif kind == "squeeze":
        a = pick(lambda s: 1 in s) if any(1 in s for s in shape.values()) else pick()
        ones = [i for i, n in enumerate(shape[a]) if n == 1]
        nd = len(shape[a])
        axis = draw(st.sampled_from([None] + ones + [i - nd for i in ones]))
        line = f"{v} = cr.squeeze({a}, {axis})" if axis is not None else f"{v} = cr.squeeze({a})"
        t = f"{v} = torch.squeeze({a}, {axis})" if axis is not None else f"{v} = torch.squeeze({a})"
        ops = [a]
    elif kind == "index":
        a = pick(lambda s: len(s) >= 1)
        key = _key(draw, shape[a], bidx)
        line = t = f"{v} = {a}[{key}]"
        ops = [a] + (["idx"] if "idx" in key else [])
    elif kind in ("concat", "stack"):
        a = pick(lambda s: len(s) >= 1) if kind == "concat" else pick()
        nd = len(shape[a])
        if kind == "concat":
            axis = _axis(draw, nd)
            same = [n for n, s in shape.items()
                    if len(s) == nd and all(s[i] == shape[a][i] for i in range(nd) if i != axis % nd)]
            fn, tfn = "concatenate", "cat"
        else:
            axis = draw(st.integers(-nd - 1, nd))
            same = [n for n, s in shape.items() if s == shape[a]]
            fn, tfn = "stack", "stack"
        others = draw(st.lists(st.sampled_from(same), min_size=1, max_size=2))
        ops = [a] + others
        line = f"{v} = cr.{fn}([{', '.join(ops)}], axis={axis})"
        t = f"{v} = torch.{tfn}([{', '.join(ops)}], dim={axis})"
    elif kind == "matmul":
        a, b = pair(mm)
        line = f"{v} = {a} @ {b}" if draw(st.booleans()) else f"{v} = cr.matmul({a}, {b})"
        t = f"{v} = {a} @ {b}"
        ops = [a, b]
    elif kind == "einsum":
        ops = draw(st.lists(st.sampled_from(sorted(shape)), min_size=1, max_size=2))
        spec = _einsum(draw, [shape[o] for o in ops])
        line = f"{v} = cr.einsum({spec!r}, {', '.join(ops)})"
        t = f"{v} = torch.einsum({spec!r}, {', '.join(ops)})"
    elif kind == "where":
        c = pick()
        a = pick(lambda s: bcast(s, shape[c]))
        b = pick(lambda s: bcast(s, shape[c]) and bcast(s, shape[a])
                 and bcast(np.broadcast_shapes(s, shape[a]), shape[c]))
        line = t = f"{v} = cr.where({c} > 0, {a}, {b})"
        t = f"{v} = torch.where({c} > 0, {a}, {b})"
        ops = [c, a, b]
    elif kind == "view_inplace":
        return _view_step(draw, v, shape, batched, env, pick, bcast)
    elif kind == "hook":
        a = pick()
        target = draw(st.sampled_from([a, v]))
        hook, ht, hops = _hook(draw, shape[a], batched[a], shape, batched)
        c = draw(st.sampled_from(CONSTS))
        reg, treg = (f"{target}.requires_grad and {target}.register_hook({h})" for h in (hook, ht))
        make = f"{v} = {a} * {c}"
        line, t = (f"{reg}; {make}", f"{treg}; {make}") if target == a else (f"{make}; {reg}", f"{make}; {treg}")
        if target == a and env[a]._view is not None:
            t = None        # torch 2.13 segfaults on a hook on a view inside vmap(grad) (rarely)
        ops = [a] + hops
    else:                                    # in place on a copy
        a = pick()
        sa = shape[a]
        lines = [f"{v} = {a}.copy()"]
        tl = [f"{v} = {a}.clone()"]
        ops = [a]
        target_batched = batched[a]
        for _ in range(draw(st.integers(1, 3))):
            sub = draw(st.sampled_from(["iop", "iconst", "setitem"]))
            if sub == "iop":
                ok = [n for n, s in shape.items() if bcast(s, sa) and np.broadcast_shapes(s, sa) == sa
                      and (target_batched or not batched[n])]
                if not ok:
                    continue
                w = draw(st.sampled_from(ok))
                op = draw(st.sampled_from(["+=", "-=", "*="]))
                lines.append(f"{v} {op} {w}")
                tl.append(f"{v} {op} {w}")
                ops.append(w)
            elif sub == "iconst":
                op = draw(st.sampled_from(["+=", "*=", "/="]))
                c = draw(st.sampled_from(CONSTS))
                lines.append(f"{v} {op} {c}")
                tl.append(f"{v} {op} {c}")
            elif sa:
                key = _key(draw, sa, bidx if target_batched else None)
                region = env[a].data[eval(f"np.s_[{key}]", {"np": np, "idx": np.zeros(env["idx"].shape, int)
                                                                if bidx else None})].shape
                ok = [n for n, s in shape.items() if bcast(s, region) and np.broadcast_shapes(s, region) == region
                      and (target_batched or not batched[n])]
                value = draw(st.sampled_from(ok + [str(draw(st.sampled_from(CONSTS)))]))
                lines.append(f"{v}[{key}] = {value}")
                # torch leaves a write through repeated indices unspecified: no 1:1 form
                tl.append(None if "np.array" in key or "idx" in key else f"{v}[{key}] = {value}")
                if value in shape:
                    ops.append(value)
                if "idx" in key:
                    ops.append("idx")
        line = "; ".join(lines)
        t = None if None in tl else "; ".join(tl)
    return line, t, ops


def _hook(draw, ts, tb, shape, batched):
    """A tensor hook for a value of shape ``ts`` (batched: ``tb``), as (chainrule source, torch
    source, operands). One on an unbatched value is linear: ``grad(vmap)`` hands it the sum of the
    examples' gradients, and a Python loop calls it once per example."""
    kind = draw(st.sampled_from(["scale", "none", "mul", "add"] if tb else ["scale", "none", "mul"]))
    if kind == "scale":
        h = f"lambda g: g * {draw(st.sampled_from(CONSTS))}"
        return h, h, []
    if kind == "none":
        return "lambda g: None", "lambda g: None", []
    ok = [n for n, s in shape.items() if bcast_to(s, ts) and (tb or not batched[n])]
    if not ok:
        return "lambda g: g * 2.0", "lambda g: g * 2.0", []
    w = draw(st.sampled_from(ok))
    h = f"lambda g: g * {w}" if kind == "mul" else f"lambda g: g + {w}"
    return h, h, [w]


def bcast_to(s, t):
    """Whether shape ``s`` broadcasts to exactly ``t``."""
    try:
        return np.broadcast_shapes(s, t) == tuple(t)
    except ValueError:
        return False


def _view_step(draw, v, shape, batched, env, pick, bcast):
    """In-place ops through views of a copy: ``v = a.copy()``, one or two views of it (made before
    the writes), maybe hooks on the base or a view before the writes, one to three writes through
    the first view (``*=``/``+=`` a constant or a value, ``__setitem__`` on the view), and the step's
    value is the base or one of the views (each must see the writes)."""
    a = pick()
    tb = batched[a]
    lines, tl, ops = [f"{v} = {a}.copy()"], [f"{v} = {a}.clone()"], [a]

    def shape_of(name):
        loc = dict(env)
        exec("; ".join(lines), {"cr": cr, "np": np}, loc)
        return tuple(loc[name].shape)

    def view(name, src, depth):
        ss = shape_of(src)
        kinds = ["index", "reshape", "transpose", "T"] + (["diagonal"] if len(ss) >= 2 else [])
        kinds = [k for k in kinds if k != "index" or ss]
        k = draw(st.sampled_from(kinds))
        if k == "index":
            key = _key(draw, ss, basic=True)
            c = t = f"{name} = {src}[{key}]"
        elif k == "reshape":        # one that splits axes or adds/drops 1s: a view whatever the layout
            new = draw(st.sampled_from([r for r in _reshapes(ss) if _splits(ss, r)] or [ss]))
            c = t = f"{name} = {src}.reshape({new!r})"
        elif k == "diagonal":
            c, t = f"{name} = cr.diagonal({src})", f"{name} = torch.diagonal({src})"
        elif k == "T":
            c, t = f"{name} = {src}.T", f"{name} = {src}.permute({tuple(range(len(ss)))[::-1]!r})"
        else:
            perm = tuple(draw(st.permutations(range(len(ss)))))
            c, t = f"{name} = cr.transpose({src}, {perm!r})", f"{name} = {src}.permute({perm!r})"
        lines.append(c)
        tl.append(t)

    def hook_on(name):
        h, ht, hops = _hook(draw, shape_of(name), tb, shape, batched)
        lines.append(f"{name}.requires_grad and {name}.register_hook({h})")
        # (torch 2.13 segfaults, rarely, on a hook on a view inside vmap(grad): no torch form)
        tl.append(f"{name}.requires_grad and {name}.register_hook({ht})" if name == v else None)
        ops.extend(hops)

    if draw(st.booleans()):
        hook_on(v)
    view("_w", v, 0)
    if draw(st.booleans()):
        view("_w", "_w", 1)                      # a view of a view
    others = ["_w"]
    if draw(st.booleans()):
        view("_u", v, 0)                         # another view, made before the writes
        others.append("_u")
    if draw(st.booleans()):
        hook_on("_w")                            # (left behind by the write, as in PyTorch)
    sw = shape_of("_w")
    for _ in range(draw(st.integers(1, 3))):
        sub = draw(st.sampled_from(["iconst", "iop", "setitem"] if sw else ["iconst", "iop"]))
        ok = [n for n, s in shape.items() if bcast_to(s, sw) and (tb or not batched[n])]
        if sub == "iop" and ok:
            w = draw(st.sampled_from(ok))
            op = draw(st.sampled_from(["+=", "-=", "*="]))
            lines.append(f"_w {op} {w}")
            tl.append(f"_w {op} {w}")
            ops.append(w)
        elif sub == "setitem":
            key = _key(draw, sw, basic=True)
            loc = dict(env)
            exec("; ".join(lines), {"cr": cr, "np": np}, loc)
            region = loc["_w"].data[eval(f"np.s_[{key}]", {"np": np})].shape
            ok = [n for n, s in shape.items() if bcast_to(s, region) and (tb or not batched[n])]
            value = draw(st.sampled_from(ok + [str(draw(st.sampled_from(CONSTS)))]))
            lines.append(f"_w[{key}] = {value}")
            tl.append(f"_w[{key}] = {value}")
            if value in shape:
                ops.append(value)
        else:
            op = draw(st.sampled_from(["+=", "*=", "/="]))
            c = draw(st.sampled_from(CONSTS))
            lines.append(f"_w {op} {c}")
            tl.append(f"_w {op} {c}")
    out = draw(st.sampled_from([v] + others))
    if out != v:
        lines.append(f"{v} = {out}")
        tl.append(f"{v} = {out}")
    return "; ".join(lines), None if None in tl else "; ".join(tl), ops


# ----- running them -----
@dataclass
class Case:
    p: Program
    args: list          # physical arguments (batched ones with their batch on in_axes)
    examples: list      # per example: the arguments the loop passes
    in_axes: tuple
    size: int


@st.composite
def cases(draw, min_steps=3, max_steps=8):
    p = draw(programs(min_steps, max_steps))
    size = draw(st.sampled_from([1, 2, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    args, in_axes, per = [], [], []
    for _name, shape, b, kind in p.inputs:
        full = (size,) + shape if b else shape
        value = rng.integers(-2, 2, size=full) if kind == "i" else rng.uniform(-1.5, 1.5, size=full)
        if not b:
            args.append(value)
            in_axes.append(None)
            per.append(lambda i, value=value: value)
            continue
        axis = draw(st.sampled_from([0, -1, len(shape)]))
        args.append(np.ascontiguousarray(np.moveaxis(value, 0, axis)))
        in_axes.append(axis)
        per.append(lambda i, value=value: value[i])
    examples = [[f(i) for f in per] for i in range(size)]
    return Case(p, args, examples, tuple(in_axes), size)


def _np(x):
    return np.asarray(x.detach().numpy() if isinstance(x, cr.Tensor) else x)


def _close(got, want, what, case, scale=None):
    want = np.asarray(want, dtype=np.float64)
    got = _np(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}\n{_describe(case)}"
    atol = RTOL * max(1.0, float(np.max(np.abs(want), initial=0.0)) if scale is None else scale)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol, err_msg=f"{what}\n{_describe(case)}")


def _describe(case):
    return f"{case.p!r}# in_axes={case.in_axes}, batch size {case.size}"


def _float_args(case):
    return tuple(i for i, (_, _, _, k) in enumerate(case.p.inputs) if k == "f")


def _loop_values(fn, case):
    outs = [_np(fn(*ex)) for ex in case.examples]
    peak = max(float(np.max(np.abs(o), initial=0.0)) for o in outs)
    assume(np.isfinite(peak) and peak < 1e8)      # well-conditioned programs only
    return np.stack(outs)


def check_values(case, out_axes, chunk_size=None):
    fn = case.p.compile()
    want = _loop_values(fn, case)
    got = cr.vmap(fn, in_axes=case.in_axes, out_axes=out_axes, chunk_size=chunk_size)(*case.args)
    _close(got, np.moveaxis(want, 0, out_axes), f"vmap values (out_axes={out_axes}, chunk_size={chunk_size})",
           case)


def check_grads(case):
    fn = case.p.compile()
    _loop_values(fn, case)
    argnums = _float_args(case)
    loss = cr.grad(lambda *a: fn(*a).sum(), argnums=argnums)
    want = [np.stack(g) for g in zip(*[[_np(x) for x in loss(*ex)] for ex in case.examples])]
    got = cr.vmap(loss, in_axes=case.in_axes)(*case.args)
    for i, g, w in zip(argnums, got, want):
        _close(g, w, f"vmap(grad) with respect to {case.p.inputs[i][0]}", case)
    # grad of the vmap's sum: the physical layout for batched inputs, the sum over examples otherwise
    total = cr.grad(lambda *a: cr.vmap(fn, in_axes=case.in_axes)(*a).sum(), argnums=argnums)(*case.args)
    for i, g, w in zip(argnums, total, want):
        axis = case.in_axes[i]
        expected = w.sum(0) if axis is None else np.moveaxis(w, 0, axis)
        _close(g, expected, f"grad(vmap(...).sum()) with respect to {case.p.inputs[i][0]}", case)


def check_jvp(case, seed):
    fn = case.p.compile()
    _loop_values(fn, case)
    argnums = _float_args(case)
    rng = np.random.default_rng(seed)
    n = len(case.p.inputs)

    def with_tangents(*a):
        primals, tangents = a[:n], a[n:]
        return cr.jvp(lambda *f: fn(*[f[argnums.index(i)] if i in argnums else primals[i] for i in range(n)]),
                      [primals[i] for i in argnums], list(tangents))
    # every tangent batched, the unbatched primals' too (test_jvp_of_an_unbatched_primal_... below)
    t_axes = tuple(0 for i in argnums)
    tangents = [rng.uniform(-1, 1, size=case.p.inputs[i][1] if a is None else (case.size,) + case.p.inputs[i][1])
                for i, a in zip(argnums, t_axes)]
    wants = [[_np(o) for o in with_tangents(*ex, *[tg if a is None else tg[e] for tg, a in zip(tangents, t_axes)])]
             for e, ex in enumerate(case.examples)]
    got = cr.vmap(with_tangents, in_axes=case.in_axes + t_axes)(*case.args, *tangents)
    for k, what in enumerate(("jvp primal out", "jvp tangent out")):
        _close(got[k], np.stack([w[k] for w in wants]), f"vmap(jvp): {what}", case)


def check_torch(case, torch):
    if case.p.torch_lines is None:
        return
    fn = case.p.compile()
    want = _loop_values(fn, case)
    tfn = case.p.compile(torch_version=True)
    targs = [torch.tensor(a) for a in case.args]
    got = torch.func.vmap(tfn, in_dims=case.in_axes)(*targs)
    _close(got.numpy(), want, "torch.func.vmap values", case)
    argnums = _float_args(case)
    tgrads = torch.func.vmap(torch.func.grad(lambda *a: tfn(*a).sum(), argnums=argnums),
                             in_dims=case.in_axes)(*targs)
    ours = cr.vmap(cr.grad(lambda *a: fn(*a).sum(), argnums=argnums), in_axes=case.in_axes)(*case.args)
    for i, g, w in zip(argnums, ours, tgrads):
        _close(g, w.numpy(), f"vmap(grad) vs torch.func with respect to {case.p.inputs[i][0]}", case)


# ----- the tests -----
@FAST
@given(case=cases(), out_axes=st.sampled_from([0, -1]), chunk_size=st.sampled_from([None, None, 1, 2]))
def test_vmap_values_match_a_loop(case, out_axes, chunk_size):
    check_values(case, out_axes, chunk_size)


@FAST
@given(case=cases())
def test_vmap_of_grad_and_grad_of_vmap_match_a_loop(case):
    check_grads(case)


@FAST
@given(case=cases(), seed=st.integers(0, 2**16))
def test_vmap_of_jvp_matches_a_loop(case, seed):
    check_jvp(case, seed)


@FAST
@given(case=cases())
def test_matches_torch_func_vmap(case):
    check_torch(case, pytest.importorskip("torch"))


@pytest.mark.slow
@LONG
@given(case=cases(), out_axes=st.sampled_from([0, -1]), chunk_size=st.sampled_from([None, None, 1, 2]))
def test_vmap_values_match_a_loop_long(case, out_axes, chunk_size):
    check_values(case, out_axes, chunk_size)


@pytest.mark.slow
@LONG
@given(case=cases())
def test_vmap_of_grad_and_grad_of_vmap_match_a_loop_long(case):
    check_grads(case)


@pytest.mark.slow
@LONG
@given(case=cases(), seed=st.integers(0, 2**16))
def test_vmap_of_jvp_matches_a_loop_long(case, seed):
    check_jvp(case, seed)


@pytest.mark.slow
@LONG
@given(case=cases())
def test_matches_torch_func_vmap_long(case):
    check_torch(case, pytest.importorskip("torch"))


def test_jvp_of_an_unbatched_primal_with_a_batched_tangent():
    # found by this fuzzer: with a batched primal next to it, the tangent out leaked out of the vmap
    # as a BatchedTensor (its example shape the whole batch's) instead of an array
    x, u = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    tx, tu = np.ones((2, 3)), np.arange(6.0).reshape(2, 3)
    _, tout = cr.vmap(lambda x, u, tx, tu: cr.jvp(lambda x, u: x * u, (x, u), (tx, tu)),
                      in_axes=(0, None, 0, 0))(x, u, tx, tu)
    np.testing.assert_allclose(np.asarray(tout), tx * u + x * tu)
