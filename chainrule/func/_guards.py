"""A capture's guards as generated Python (``cr.compile``): the checks unrolled, with the shapes,
dtypes and paths as constants, so that a cache hit costs a few attribute loads per guard instead of
a loop over tuples. ``fast_guard`` answers "all pass" (with the slots the tape starts from) or None;
``whole_call`` runs a short capture's whole call (guards, tape, ``.grad`` writes, outputs) as one
function. On a miss ``describe_guards`` checks the guards again one by one and names the one that
failed, so the messages stay in one place."""
from __future__ import annotations

import builtins
from typing import Any, Callable

from chainrule.core._backend import ndarray
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor, wrap
from chainrule.func._scan import _GONE, _alias, _describe_miss, _flatten_call, _hooks_of, _layout, _same, _tape, _walk


class _Source:
    """The generated function's lines and the constants they name."""

    def __init__(self, miss: str) -> None:
        self.miss = miss                  # what the function returns where a guard fails
        self.lines: list[str] = []
        self.names: dict = {"_alias": _alias, "_hooks_of": _hooks_of, "_layout": _layout, "_same": _same,
                            "_MISS": MISS}

    def const(self, value: Any) -> str:
        name = f"k{len(self.names)}"
        self.names[name] = value
        return name

    def fail_if(self, condition: str) -> None:
        self.lines.append(f"if {condition}: return {self.miss}")

    def walk(self, root: int, steps: tuple) -> str:
        """``_walk(roots[root], steps)`` as one expression (a missing step raises: the slow guard runs)."""
        code = f"_r{root}"
        for attr, key in steps:
            code = f"len({code})" if attr is None else f"{code}.__dict__[{self.const(key)}]" if attr else \
                f"{code}[{self.const(key)}]"
        return code

    def hooks_differ(self, t: str, hooks: tuple, leaf: bool = False) -> str:
        """``_hooks_of(t) != hooks``; without hooks, inline (``leaf``: ``t.grad_fn`` is known None)."""
        if hooks:
            return f"_hooks_of({t}) != {self.const(hooks)}"
        edge = f"{t}._leaf_edge and {t}._leaf_edge[0].pre_hooks"
        node = edge if leaf else f"{t}.grad_fn.pre_hooks if {t}.grad_fn is not None else {edge}"
        return f"(({node}) or {t}._post_acc_hooks)"

    def same(self, now: str, value: Any) -> str:
        """``_same(now, value)``, inline for the common exact types."""
        if type(value) is tuple:
            return f"{now} is {self.const(value[0])}"
        if value is None or type(value) is bool:
            return f"{now} is {value!r}"
        if type(value) in (int, str) or type(value) is float and value == value and value != 0.0:
            return f"(type({now}) is {type(value).__name__} and {now} == {self.const(value)})"   # (a sign too)
        return f"_same({now}, {self.const(value)})"


def _guard_lines(cap: Any, src: _Source, call: bool = False) -> tuple[list, list, list]:
    """Append ``cap``'s guards to ``src`` (its locals start with ``_``: the tape's are ``r0``, ``f0``,
    ...); returns the (slot, local) pairs the tape starts from, the (tensor local, slot) pairs whose
    ``.grad`` a replay sets, and the (tensor local, count) pairs whose version it bumps. ``call``:
    the function takes the call's ``args, kwargs`` and finds the leaves and the state itself (a
    positional call without containers, the common one, without flattening it)."""
    out = src.lines
    state = f"(_d['grad_enabled'], _default_dtype(), _d['safe_zero']) != {src.const(cap.state)}"
    if not call:
        src.fail_if(f"tree != {src.const(cap.tree)} or state != {src.const(cap.state)}")
    elif type(cap.tree) is int:                  # (what _flatten_call makes of such a call)
        out.append("_d = _STATE.__dict__")
        src.fail_if(f"kwargs or _d['rare'] or len(args) != {cap.tree} or {state}")
        out.append("leaves = args")
    else:
        out.append("_d = _STATE.__dict__")
        src.fail_if("_d['rare']")
        out.append("leaves, tree = _flatten_call(args, kwargs)")
        src.fail_if(f"tree != {src.const(cap.tree)} or {state}")
    arrays = []                          # the arrays whose aliasing and layout are guarded, in order
    for i, want in enumerate(cap.leaf_guards):
        x = f"_x{i}"
        out.append(f"{x} = leaves[{i}]")
        kind = want[0]
        if kind == "tensor":
            out.append(f"_d{i} = {x}.data")
            src.fail_if(f"type({x}) is not {src.const(want[1])} or _d{i}.shape != {src.const(want[2])} "
                        f"or _d{i}.dtype is not {src.const(want[3])} or {x}._requires_grad is not {want[4]}")
            if want[4]:
                src.fail_if(f"{x}.grad_fn is not None or {src.hooks_differ(x, want[5], leaf=True)}")
            arrays.append(f"_d{i}")
        elif kind == "array":
            src.fail_if(f"type({x}) is not {src.const(want[1])} or {x}.shape != {src.const(want[2])} "
                        f"or {x}.dtype is not {src.const(want[3])}")
            arrays.append(x)
        elif kind == "value":
            src.fail_if(f"not {src.same(x, want[1])}")
        else:
            src.fail_if(f"{x} is not {src.const(want[1])}")
    slots = [(s, f"_x{i}.data" if data else f"_x{i}") for s, i, data in cap.args]
    for root in cap.used_roots:
        code = cap.root_codes[root]
        out.append(f"_r{root} = " + (f"{src.const(code[1])}.cell_contents" if code and code[0] == "cell" else
                                     f"{src.const(code[1])}[{src.const(code[2])}]" if code else
                                     f"{src.const(cap.scan_roots[root])}()"))
    for k, (s, root, steps, via, want, _) in enumerate(cap.exts):
        o = f"_o{k}"
        out.append(f"{o} = {src.walk(root, steps)}")
        if via:
            out.append(f"_e{k} = {o}.data")
            src.fail_if(f"type({o}) is not {src.const(want[1])} or _e{k}.shape != {src.const(want[2])} "
                        f"or _e{k}.dtype is not {src.const(want[3])} or {o}._requires_grad is not {want[4]} "
                        f"or {o}.grad_fn is not None or {src.hooks_differ(o, want[5], leaf=True)}")
        else:
            out.append(f"_e{k} = {o}")
            src.fail_if(f"type({o}) is not {src.const(want[1])} or {o}.shape != {src.const(want[2])} "
                        f"or {o}.dtype is not {src.const(want[3])}")
        slots.append((s, f"_e{k}"))
        arrays.append(f"_e{k}")
    for root, steps, _, requires_grad, hooks in cap.graph_guards:
        out.append(f"_t = {src.walk(root, steps)}")
        src.fail_if(f"_t._requires_grad is not {requires_grad} or {src.hooks_differ('_t', hooks)}")
    for root, steps, _, i in cap.leaf_paths:
        src.fail_if(f"{src.walk(root, steps)} is not leaves[{i}]")
    listed = "[" + ", ".join(arrays) + "]"
    if cap.distinct:
        if len(arrays) > 1:
            src.fail_if(f"len({{{', '.join(f'id({a})' for a in arrays)}}}) != {len(arrays)}")
    else:
        src.fail_if(f"_alias({listed}) != {src.const(cap.alias)}")
    if cap.layout is not None:
        src.fail_if(f"_layout({listed}) != {src.const(cap.layout)}")
    for root, steps, _, value in cap.value_guards:
        out.append(f"_v = {src.walk(root, steps)}")
        src.fail_if(f"not {src.same('_v', value)}")
    for opt, root, steps, _, ids in cap.islands:
        out.append(f"_opt = {src.walk(root, steps)}")
        src.fail_if(f"_opt is not {src.const(opt)} or tuple(id(p) for group in _opt.param_groups "
                    f"for p in group['params']) != {src.const(ids)}")
    targets = []
    for k, (where, s, from_none) in enumerate(cap.grad_writes):
        out.append(f"_g{k} = " + (f"leaves[{where[1]}]" if where[0] == "leaf" else src.walk(where[1], where[2])))
        if from_none:
            src.fail_if(f"_g{k}.__dict__.get('grad') is not None")
        targets.append((f"_g{k}", s))
    bumped = []
    for k, (where, count) in enumerate(cap.bumps):
        out.append(f"_b{k} = " + (f"leaves[{where[1]}]" if where[0] == "leaf" else src.walk(where[1], where[2])))
        bumped.append((f"_b{k}", count))
    return slots, targets, bumped


def _function(src: _Source, signature: str, guarded: list, after: list) -> Callable:
    """``def signature``: the guard lines (``src.miss`` where one fails or raises), then ``after``."""
    body = "".join(f"        {line}\n" for line in guarded)
    rest = "".join(f"    {line}\n" for line in after)
    name = signature[:signature.index("(")]
    code = f"def {signature}:\n    try:\n{body}    except Exception:\n        return {src.miss}\n{rest}"
    exec(builtins.compile(code, f"<cr.compile {name}>", "exec"), src.names)   # noqa: S102 - our own code
    return src.names[name]


def fast_guard(cap: Any) -> Callable:
    """``cap``'s guards as ``check(leaves, tree, state)``: the replay's ``(slots, targets, bumped)``
    when every guard passes, else None (and any exception is None: the slow guard decides)."""
    src = _Source("None")
    slots, targets, bumped = _guard_lines(cap, src)
    fill = [f"_slots = {src.const(cap.init)}[:]"] + [f"_slots[{s}] = {x}" for s, x in slots]
    listed = (f"[{', '.join(f'({t}, {s})' for t, s in targets)}], "
              f"[{', '.join(f'({t}, {count})' for t, count in bumped)}]")
    return _function(src, "check(leaves, tree, state)", src.lines + fill + [f"return _slots, {listed}"], [])


MISS = object()               # what a whole call answers when a guard fails


def whole_call(cap: Any) -> Callable:
    """A short capture's call as one function of the call's arguments, ``call(args, kwargs)``: the
    guards, the tape on the guards' locals and the writes of ``.grad`` and the outputs, or ``MISS``
    where a guard fails or a rarely used feature is on (then ``Compiled`` takes the long way, which
    names the guard). For captures without value checks, islands, random draws or version bumps
    (``_Capture.whole``)."""
    src = _Source("_MISS")
    src.names.update(_STATE=STATE, _default_dtype=get_default_dtype, _flatten_call=_flatten_call)
    slots, targets, _ = _guard_lines(cap, src, call=True)
    names, reads, body, written = _tape(cap.entries, cap.checks, cap.kept)
    for key in names:
        src.names.setdefault(key, names[key])
    src.names["_wrap"] = wrap
    local = dict(slots)
    loads = [f"{r} = {local[j]}" if j in local else f"{r} = {src.const(cap.init[j])}" for j, r in reads]
    reg = dict(written)
    tail, wrapped = [], {}
    for t, s in targets:
        if s is None:
            tail.append(f"{t}.grad = None")
            continue
        if s not in wrapped:
            wrapped[s] = f"_w{s}"
            tail.append(f"_w{s} = _wrap({reg[s]})")
        tail.append(f"{t}.grad = {wrapped[s]}")
    items = [(wrapped.get(x) or f"_wrap({reg[x]})") if kind == "tensor" else reg[x] if kind == "array"
             else f"leaves[{x}]" if kind == "leaf" else src.const(x) for kind, x in cap.outs]
    if cap.rebuild is tuple:
        tail.append(f"return ({''.join(f'{i}, ' for i in items)})")
    else:
        tail.append(f"return {src.const(cap.rebuild)}([{', '.join(items)}])")
    return _function(src, "call(args, kwargs)", src.lines, loads + body + tail)


def describe_guards(cap: Any, leaves: list, tree: Any, state: tuple) -> tuple[str | None, Any]:
    """The guards one by one (after ``fast_guard`` said no, or raised): None and what the replay
    needs if all pass, else the first failing guard's message (``step.last_miss``)."""
    if tree != cap.tree:
        return "the arguments' structure changed", []
    if state != cap.state:
        return _state_miss(state, cap.state), []
    for i, (want, x) in enumerate(zip(cap.leaf_guards, leaves)):
        miss = _describe_miss(cap.names[i], want, x)
        if miss is not None:
            return miss, []
    roots = {}
    for root in cap.used_roots:
        try:
            roots[root] = cap.scan_roots[root]()
        except Exception:
            roots[root] = _GONE
    exts = []
    for s, root, steps, via, want, name in cap.exts:
        obj = _walk(roots[root], steps)
        miss = f"{name}: no longer found" if obj is _GONE else _describe_miss(name, want, obj)
        if miss is None and via and obj.grad_fn is not None:
            miss = f"{name}: now a tensor with a grad_fn"
        if miss is not None:
            return miss, []
        exts.append((s, obj.data if via else obj))
    for root, steps, name, requires_grad, hooks in cap.graph_guards:
        t = _walk(roots[root], steps)
        if t is not _GONE and (t._requires_grad is not requires_grad or _hooks_of(t) != hooks):
            return (f"{name}: requires_grad {t._requires_grad} != {requires_grad}" if t._requires_grad
                    is not requires_grad else f"{name}: its hooks changed ({len(_hooks_of(t))} now, "
                    f"{len(hooks)} captured)"), []
    for root, steps, name, i in cap.leaf_paths:
        if _walk(roots[root], steps) is not leaves[i]:
            return f"{name}: no longer the tensor passed as {cap.names[i]}", []
    arrays = [x.data if isinstance(x, Tensor) else x for x in leaves if isinstance(x, (Tensor, ndarray))]
    arrays += [arr for _, arr in exts]
    if (len({id(a) for a in arrays}) != len(arrays)) if cap.distinct else _alias(arrays) != cap.alias:
        return "the arguments share memory differently (the same tensor passed twice?)", []
    if cap.layout is not None and _layout(arrays) != cap.layout:
        return "an array's memory layout (strides, writeable) changed: the step writes in place", []
    for root, steps, name, value in cap.value_guards:
        now = _walk(roots[root], steps)
        if not _same(now, value):
            return f"{name}: value {'(gone)' if now is _GONE else repr(now)} != {value!r}", []
    for opt, root, steps, name, ids in cap.islands:
        if _walk(roots[root], steps) is not opt:
            return f"{name}: no longer the optimizer captured", []
        if tuple(id(p) for group in opt.param_groups for p in group["params"]) != ids:
            return f"{name}: its parameters changed", []
    targets = []
    for where, s, from_none in cap.grad_writes:
        t = leaves[where[1]] if where[0] == "leaf" else _walk(roots[where[1]], where[2])
        if t is _GONE:
            return f"{where[3]}: no longer found", []
        if from_none and t.__dict__.get("grad") is not None:
            name = cap.names[where[1]] if where[0] == "leaf" else where[3]
            return (f"{name}.grad: a gradient is present (the capture started from None: the "
                    f"backward would add to it)"), []
        targets.append((t, s))
    bumped = []
    for where, count in cap.bumps:
        t = leaves[where[1]] if where[0] == "leaf" else _walk(roots[where[1]], where[2])
        if t is _GONE:
            return f"{where[3]}: no longer found", []
        bumped.append((t, count))
    vals = cap.init[:]
    for s, i, data in cap.args:
        vals[s] = leaves[i].data if data else leaves[i]
    for s, arr in exts:
        vals[s] = arr
    return None, (vals, targets, bumped)


def _state_miss(now: tuple, was: tuple) -> str:
    return next(f"{name}: {a} != {b}" for name, a, b in
                zip(("grad mode", "default dtype", "safe-zero cotangents"), now, was) if a != b)
