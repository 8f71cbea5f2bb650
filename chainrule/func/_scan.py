"""What a compiled step can read besides its arguments (``cr.compile``): the tensors, arrays and Python
values reachable from its closure, globals and bound ``self``, each with the path that finds it
again at the next call; the comparisons the guards make (docs/compile.md, "Guards"); and the tape
turned into the one Python function a replay runs."""
from __future__ import annotations

import builtins
import functools
import math
import pickle
import sys
import types
from typing import Any, Callable

from chainrule.core import random as _random
from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION
from chainrule.core._pytree import flatten, paths
from chainrule.core.errors import _LIBRARY_DIRS, _package
from chainrule.core.tensor import Tensor, wrap

_SCAN_LIMIT = 4000            # objects visited when looking for the tensors a step can read
_SCAN_DEPTH = 24             # a module tree costs two levels per nesting (its _modules dict, the name)
_SEQ_LIMIT = 256              # a longer list/tuple is not looked into (and its values not guarded)
_SCALARS = (bool, int, float, complex, str, type(None))
_GONE = object()              # what a path finds when its object is gone


# ----- where a value the step reads comes from: a path from a root, re-walked at every call -----
def _walk(root: Any, steps: tuple) -> Any:
    """The object at ``steps`` from ``root`` (attributes and items), or ``_GONE``."""
    obj = root
    try:
        for attr, key in steps:
            obj = len(obj) if attr is None else obj.__dict__[key] if attr else obj[key]
    except Exception:
        return _GONE
    return obj


def _path_name(root_name: str, steps: tuple) -> str:
    return root_name + "".join(f".{k}" if attr else f"[{k!r}]" for attr, k in steps if attr is not None)


class _Scan:
    """The tensors, arrays and Python values reachable from a step's closure, globals and bound
    ``self`` (and from the objects among its arguments), each with the path that finds it again."""

    def __init__(self) -> None:
        self.tensors: dict[int, tuple] = {}     # id(tensor) -> (tensor, root index, steps, name)
        self.arrays: dict[int, tuple] = {}      # id(ndarray) -> (array, root index, steps, name, via tensor)
        self.values: list[tuple] = []           # (root index, steps, name, value): guarded by value
        self.objects: dict[int, tuple] = {}     # id(object) -> (object, root index, steps, name)
        self.roots: list[Callable[[], Any]] = []
        self.root_names: list[str] = []
        self.root_codes: list[tuple | None] = []   # a root as code for the guards: ("cell", c), ("item", d, k)
        self.seen: set[int] = set()
        self.generators: list[tuple] = []       # (NumPy generator, name): its state is compared around a capture
        self.code_names: set = set()            # every name the scanned user code mentions

    def add_root(self, getter: Callable[[], Any], name: str, code: tuple | None = None) -> None:
        self.roots.append(getter)
        self.root_names.append(name)
        self.root_codes.append(code)
        try:
            obj = getter()
        except Exception:
            return
        self._visit(obj, len(self.roots) - 1, (), name, 0)

    def _visit(self, obj: Any, root: int, steps: tuple, name: str, depth: int) -> None:
        if isinstance(obj, _SCALARS):
            self.values.append((root, steps, name, obj))
            return
        if id(obj) in self.seen or len(self.seen) > _SCAN_LIMIT or depth > _SCAN_DEPTH:
            return
        self.seen.add(id(obj))
        if isinstance(obj, (np.random.Generator, np.random.RandomState)):
            self.generators.append((obj, name))    # drawn from by cr.random.draw only (see on_draw)
            self.values.append((root, steps, name, (obj,)))     # by identity: a replay draws from it
            return
        # the step may read len(); (an empty dict may be an optimizer's state, which its island fills)
        if isinstance(obj, (list, tuple)) or (isinstance(obj, dict) and obj
                                              and all(isinstance(k, _SCALARS) for k in obj)):
            self.values.append((root, steps + ((None, "len"),), f"len({name})", len(obj)))
        through = getattr(type(obj), "_scan_through", None)
        if through is not None:          # a compiled step: its function is what it reads, not its cache
            self._visit(getattr(obj, through), root, steps + ((True, through),), f"{name}.{through}", depth + 1)
            return
        d = getattr(obj, "__dict__", None)
        if isinstance(obj, Tensor):
            self.tensors.setdefault(id(obj), (obj, root, steps, name,
                                              (obj, obj._version, obj.__dict__.get("grad"), obj.data)))
            self.arrays.setdefault(id(obj.data), (obj.data, root, steps, name, True))
        elif isinstance(obj, ndarray):
            self.arrays.setdefault(id(obj), (obj, root, steps, name, False))
        elif isinstance(obj, dict):
            for k, v in list(obj.items()):
                if isinstance(k, _SCALARS):
                    self._visit(v, root, steps + ((False, k),), _path_name(name, ((False, k),)), depth + 1)
        elif isinstance(obj, (list, tuple)) and len(obj) <= _SEQ_LIMIT:
            for i, v in enumerate(obj):
                self._visit(v, root, steps + ((False, i),), f"{name}[{i}]", depth + 1)
        elif isinstance(obj, (types.FunctionType, types.MethodType)):
            self.values.append((root, steps, name, (obj,)))      # by identity: rebinding it is a miss
            if isinstance(obj, types.MethodType):
                self.add_root(lambda m=obj: m.__self__, f"{name}.__self__")
            if not (obj.__module__ or "").startswith(("chainrule", "numpy")):
                self._function(obj, depth + 1)
        elif isinstance(d, dict) and not isinstance(obj, (types.ModuleType, type)) \
                and not type(obj).__module__.startswith(("numpy", "builtins")):
            self.objects.setdefault(id(obj), (obj, root, steps, name))
            self._class_values(type(obj))
            for k, v in list(d.items()):
                self._visit(v, root, steps + ((True, k),), f"{name}.{k}", depth + 1)

    def _class_values(self, cls: type) -> None:
        """The Python values a user's class holds (``self.scale`` found on the class)."""
        for klass in cls.__mro__:
            if klass.__module__.startswith(("chainrule", "numpy", "builtins")) or id(klass) in self.seen:
                continue
            self.seen.add(id(klass))
            for k, v in list(vars(klass).items()):
                if isinstance(v, _SCALARS) and not k.startswith("__"):
                    self.add_root(lambda klass=klass, k=k: vars(klass)[k], f"{klass.__name__}.{k}")

    def _function(self, fn: Any, depth: int) -> None:
        """A function's closure cells and the globals its code names (as new roots)."""
        if isinstance(fn, functools.partial):
            self.add_root(lambda p=fn: (p.args, p.keywords), "partial's arguments")
            fn = fn.func
        if isinstance(fn, types.MethodType):
            self.add_root(lambda m=fn: m.__self__, "self")
            fn = fn.__func__
        code = getattr(fn, "__code__", None)
        if code is None:
            obj = fn
            if getattr(obj, "__dict__", None) is not None:        # a callable object (a Module)
                self.add_root(lambda: obj, type(obj).__name__)
                for name in ("__call__", "forward"):
                    method = getattr(type(obj), name, None)
                    if isinstance(method, types.FunctionType) and not method.__module__.startswith("chainrule"):
                        self._function(method, depth)
            return
        if fn.__defaults__ or fn.__kwdefaults__:
            self.add_root(lambda f=fn: (f.__defaults__, f.__kwdefaults__), f"{code.co_name}'s defaults")
        for i, cell in enumerate(fn.__closure__ or ()):
            self.add_root(lambda cell=cell: cell.cell_contents, code.co_freevars[i], ("cell", cell))
        glob = fn.__globals__
        names = _code_names(code)
        self.code_names |= names
        for nm in names:
            if nm not in glob:
                continue
            obj = glob[nm]
            if isinstance(obj, types.ModuleType):   # ``cfg.SCALE``: the module's attributes the code names
                if not obj.__name__.startswith(("chainrule", "numpy")):
                    for attr in names & obj.__dict__.keys():
                        self.add_root(lambda obj=obj, attr=attr: obj.__dict__[attr], f"{nm}.{attr}",
                                      ("item", obj.__dict__, attr))
            else:
                self.add_root(lambda nm=nm: glob[nm], nm, ("item", glob, nm))


_HYPERPARAMETERS = ((True, "param_groups"), (True, "defaults"), (True, "state"))


def _read_by_island(value: tuple, rec: Any) -> bool:
    """Whether a scanned Python value is an optimizer's hyperparameter (``lr``, ``betas``, a step
    count) that only its taped ``opt.step()`` reads: the replay calls that step, which reads the value
    then, so a scheduler's new learning rate needs no new capture. Not when the step's own code
    names ``param_groups``/``defaults`` (it may read them into an op)."""
    if rec.scan.code_names & {"param_groups", "defaults"}:
        return False
    root, steps = value[0], value[1]
    for _, _, found in rec.islands:
        n = len(found[2])
        if found[1] == root and steps[:n] == found[2] and len(steps) > n and steps[n] in _HYPERPARAMETERS:
            return True
    return False


def _code_names(code: Any) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


# ----- the guards' comparisons (compile.py checks them at every call) -----
def _hooks_of(t: Tensor) -> tuple:
    """The hooks on ``t``'s gradient (register_hook, retain_grad) and its post-accumulate-grad hooks,
    compared by identity: the set of hooks on a tensor a step reads is a guard."""
    node = t.grad_fn if t.grad_fn is not None else (t._leaf_edge[0] if t._leaf_edge else None)
    pre = () if node is None or not node.pre_hooks else tuple(f for fs in node.pre_hooks.values() for f in fs)
    post = t._post_acc_hooks
    return pre + tuple(post) if post else pre


def _same(a: Any, b: Any) -> bool:
    """Python values equal bitwise: -0.0 is not 0.0, NaN is NaN; ``b`` a 1-tuple: ``a`` is its item."""
    if type(b) is tuple:
        return a is b[0]
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b) or (a != a and b != b)
    if type(a) is complex:
        return _same(a.real, b.real) and _same(a.imag, b.imag)
    return a == b                         # (only Python scalars are guarded by value)


def _leaf_guard(x: Any) -> tuple:
    if isinstance(x, Tensor):
        return ("tensor", type(x), x.data.shape, x.data.dtype, x._requires_grad, _hooks_of(x))
    if isinstance(x, ndarray):
        return ("array", type(x), x.shape, x.dtype)
    if isinstance(x, _SCALARS):
        return ("value", x)
    return ("object", x)


def _describe_miss(name: str, want: tuple, x: Any) -> str | None:
    """None if ``x`` passes the guard ``want`` of ``name``, else the message naming the guard."""
    kind = want[0]
    if kind == "value":
        return None if _same(x, want[1]) else f"{name}: value {x!r} != {want[1]!r}"
    if kind == "object":
        return None if x is want[1] else f"{name}: a different {type(want[1]).__name__} object"
    if type(x) is not want[1]:
        return f"{name}: type {type(x).__name__} != {want[1].__name__}"
    d = x.data if kind == "tensor" else x
    for what, now, was in (("shape", d.shape, want[2]), ("dtype", d.dtype, want[3])):
        if now != was:
            return f"{name}: {what} {now} != {was}"
    if kind == "tensor" and x._requires_grad != want[4]:
        return f"{name}: requires_grad {x._requires_grad} != {want[4]}"
    if kind == "tensor" and want[4] and x.grad_fn is not None:
        return f"{name}: a non-leaf tensor that requires grad (captured: a leaf)"
    if kind == "tensor" and _hooks_of(x) != want[5]:
        return f"{name}: its hooks changed ({len(_hooks_of(x))} now, {len(want[5])} captured)"
    return None


def _alias(values: list) -> tuple:
    """Which of the arrays (of the tensors) among ``values`` are one: the first index of each."""
    arrays = [x.data if isinstance(x, Tensor) else x for x in values if isinstance(x, (Tensor, ndarray))]
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(a), i) for i, a in enumerate(arrays))


# ----- the arguments, the generators, the memory layout -----
def _user_line() -> str:
    """``file:line`` of the innermost frame outside chainrule and the installed libraries."""
    frame = sys._getframe(1)
    while frame is not None and (_package(frame) == "chainrule"
                                 or frame.f_code.co_filename.startswith(_LIBRARY_DIRS)):
        frame = frame.f_back
    return "?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _leaf_names(tree: Any) -> list[str]:
    if type(tree) is int:                   # _flatten_call's positional leaves
        return [f"argument {i}" for i in range(tree)]
    return [(f"argument {p[1]}" if p[0] == 0 else f"argument {p[1]!r}") + "".join(f"[{k!r}]" for k in p[2:])
            for p in paths(tree)]


def _layout(values: list) -> tuple:
    return tuple((a.strides, a.flags.writeable) for a in
                 (x.data if isinstance(x, Tensor) else x for x in values if isinstance(x, (Tensor, ndarray))))


def _flatten_call(args: tuple, kwargs: dict) -> tuple[list, Any]:
    """``flatten((args, kwargs))``; positional leaves only (the common call) without the walk."""
    if not args and not kwargs:
        return [], 0
    if not kwargs and not any(isinstance(x, (dict, list, tuple)) for x in args):
        return list(args), len(args)
    return flatten((args, kwargs))


def _same_numpy_state(a: tuple, b: tuple) -> bool:
    return all(np.array_equal(x, y) if isinstance(x, ndarray) else x == y for x, y in zip(a, b))


def _rng_state(g: Any) -> bytes:
    """A NumPy generator's state, comparable (MT19937's holds an array)."""
    return pickle.dumps(g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state())


def _set_rng_state(g: Any, state: bytes) -> None:
    if isinstance(g, np.random.Generator):
        g.bit_generator.state = pickle.loads(state)
    else:
        g.set_state(pickle.loads(state))


# ----- the tape as code: a replay runs one generated function -----
_DIRECT = frozenset({"matmul", "getitem"})


def _direct(prim: Any, datas: list, params: Any) -> Callable:
    """The forward to tape, without the Python dispatch whose choice the guards fix: matmul's on
    ndarrays of these dtypes and dimensions is ``np.matmul``; getitem with an Ellipsis is ``x[index]``."""
    if prim.name == "matmul":
        x, y = datas
        if type(x) is ndarray and type(y) is ndarray and x.dtype not in LOW_PRECISION \
                and y.dtype not in LOW_PRECISION and (x.ndim <= 2 or y.ndim <= 1):
            return np.matmul
    elif any(i is Ellipsis for i in params["index"]):
        return _getitem_with_ellipsis
    return prim.forward


def _getitem_with_ellipsis(x: Any, index: tuple, shape: tuple) -> Any:
    return x[index]


class _Island:
    """A tape entry that is a call: an optimizer's ``step`` on the gradients the tape computed."""

    def __init__(self, opt: Any, params: list, has_grad: list) -> None:
        self.opt, self.params, self.has_grad = opt, params, has_grad
        self.ids = tuple(id(p) for p in params)

    def __call__(self, *grads: Any) -> None:
        it = iter(grads)
        for p, has in zip(self.params, self.has_grad):
            p.grad = wrap(next(it)) if has else None
        self.opt.step()


class _Draw:
    """A tape entry that draws: ``kernel`` on the generator ``get_generator(generator)`` gives at
    replay (the default generator of that moment, or the one passed, guarded by identity)."""

    def __init__(self, kernel: Callable, generator: Any) -> None:
        self.kernel, self.generator = kernel, generator
        self.__name__ = getattr(kernel, "__name__", "draw")

    def __call__(self, args: tuple) -> Any:
        return self.kernel(_random.get_generator(self.generator), *args)



class _Miss(Exception):
    """A replay's guard failed: the message names it."""


def _fill(tpl: tuple, vals: dict) -> Any:
    """A parameter rebuilt from its template: ("a", slot) an array, ("t", slot) a tensor, ("c", value)
    a constant, (tuple or list, parts) a sequence of those."""
    tag = tpl[0]
    if tag == "a":
        return vals[tpl[1]]
    if tag == "t":
        return wrap(vals[tpl[1]])
    if tag == "c":
        return tpl[1]
    return tag(_fill(p, vals) for p in tpl[1])


def _generate(entries: list, checks: list, outs: list) -> Callable:
    """The tape as one Python function of the slot list: it reads its inputs from the list and writes
    the output slots back into it."""
    names, reads, body, written = _tape(entries, checks, outs)
    lines = [f"{r} = v[{j}]" for j, r in reads] + body + [f"v[{o}] = {r}" for o, r in written]
    src = "def run(v):\n" + "".join(f"    {line}\n" for line in lines + ["return None"])
    exec(builtins.compile(src, "<cr.compile tape>", "exec"), names)   # noqa: S102 - our own code
    return names["run"]


def _interpret(entries: list, checks: list, outs: list, vals: list) -> None:
    """What ``_generate``'s function computes, by a plain loop over the entries, on the slot list
    (a capture's check of its own tape: generating the code costs ~10 us a line, more than the
    whole eager step, so that waits for the first replay). A slot is dropped after its last read."""
    again = _recomputed(entries, checks, outs)
    last: dict = {}
    for k, e in enumerate(entries):
        for s in e[1]:
            last[s] = k
        for _, tpl in e[3] or ():
            last.update(dict.fromkeys(_slots_of(tpl), k))
    for at, s, *_ in checks:
        last[s] = max(last.get(s, at), at)
    dead: dict = {}
    keep = set(outs)
    for s, k in last.items():
        if s not in keep:
            dead.setdefault(k, []).append(s)
    c = 0
    for k, (fn, ins, kw, dyn, o, post) in enumerate(entries):
        while c < len(checks) and checks[c][0] <= k:
            _check(checks[c], vals)
            c += 1
        if o in again:
            vals[o] = vals[again[o]]
        else:
            args = [vals[again.get(i, i)] for i in ins]
            if dyn is not None:
                kw = {**kw, **{key: _fill(tpl, vals) for key, tpl in dyn}}
            r = fn(*args, **kw) if kw else fn(*args)
            vals[o] = r if post is None else _post(r, post)
        for s in dead.get(k, ()):
            if s not in again.values():
                vals[s] = None
    for check in checks[c:]:
        _check(check, vals)


def _tape(entries: list, checks: list, outs: list) -> tuple[dict, list, list, list]:
    """The tape as lines of Python: each entry one call (no loop, no indexing) on local variables,
    ``r0``, ``r1``, ... The locals are registers: a slot's is reused once the slot is dead, so a
    replay frees its temporaries as eager execution does (keeping every one to the end made the GPT
    step replay 25 % slower than eager) without a ``del`` per slot (which doubled the time to
    compile the function). Returns the names the lines use, the (slot, register) pairs to load
    first, the lines, and the (slot, register) of each of ``outs`` at the end."""
    names: dict = {"_fill": _fill, "_post": _post, "_check": _check, "_asarray": np.asarray}
    produced: set = set()
    lines: list = []                    # (the line with {slot} fields, the slots it reads, the slot it makes)
    read: set = set()
    last: dict = {}                     # slot -> the last line that reads it

    def use(slot: int) -> str:
        if slot not in produced:
            read.add(slot)
        last[slot] = len(lines)
        return f"\x00{slot}\x00"
    again = _recomputed(entries, checks, outs)
    c = 0
    for k in range(len(entries) + 1):
        while c < len(checks) and checks[c][0] == k:        # value guards: in their place
            names[f"c{c}"] = checks[c]
            lines.append((f"_check(c{c}, {{{checks[c][1]}: {use(checks[c][1])}}})", None))
            c += 1
        if k == len(entries):
            break
        fn, ins, kw, dyn, o, post = entries[k]
        if o in again:
            continue
        names[f"f{k}"] = fn
        args = ", ".join(use(again.get(i, i)) for i in ins)
        if fn is _getitem_with_ellipsis and dyn is None:        # a constant index: the subscript itself
            names[f"p{k}"] = kw["index"]
            call = f"{args}[p{k}]"
        elif dyn is not None:
            names[f"p{k}"], names[f"d{k}"] = kw, dyn
            env = "{" + ", ".join(f"{j}: {use(j)}" for j in sorted({j for _, t in dyn for j in _slots_of(t)})) + "}"
            kws = f"**{{**p{k}, **{{key: _fill(tpl, {env}) for key, tpl in d{k}}}}}"
            call = f"f{k}({args + ', ' if args else ''}{kws})"
        elif kw:
            names[f"p{k}"] = kw
            call = f"f{k}({args + ', ' if args else ''}**p{k})"
        else:
            call = f"f{k}({args})"
        if post == "asarray":                        # (kept where ufuncs read it: they take a 0-d array
            call = f"_asarray({call})"               # faster than a NumPy scalar, 350 ns against 560)
        elif post is not None:
            names[f"q{k}"] = post
            call = f"_post({call}, q{k})"
        lines.append((call, o))
        produced.add(o)
    keep = dict.fromkeys(outs)              # (in order, once each)
    read |= keep.keys() - produced          # (an output no entry makes: an argument, a constant)
    reg: dict = {}
    free: list = []
    ends: dict = {}
    for slot, n in last.items():
        if slot not in keep:
            ends.setdefault(n, []).append(slot)

    def assign(slot: int) -> str:
        reg[slot] = free.pop() if free else f"r{len(reg) + len(free)}"
        return reg[slot]
    reads = [(j, assign(j)) for j in sorted(read)]
    body = []
    for n, (code, o) in enumerate(lines):
        parts = code.split("\x00")                           # text, slot, text, ...: the inputs' registers
        parts[1::2] = [reg[int(p)] for p in parts[1::2]]
        code = "".join(parts)                                 # then free the dead ones
        free.extend(reg[slot] for slot in ends.get(n, ()))
        body.append(code if o is None else f"{assign(o)} = {code}")
        if o is not None and o not in keep and o not in last:
            free.append(reg[o])                              # made and never read (an in-place target)
    return names, reads, body, [(o, reg[o]) for o in keep]


def _recomputed(entries: list, checks: list, outs: list) -> dict:
    """The entries that call a ufunc an earlier entry called on the same slots, with no write in
    between: their slot -> the earlier one, whose array then serves both (the backward of ``d * d``
    computes ``g * d`` twice). Only where both results are read by plain ufunc calls alone: never
    written, returned, checked or indexed, so nobody sees that they are one array."""
    pure = [type(e[0]) is np.ufunc and not e[2] and e[3] is None and e[5] in (None, "asarray") for e in entries]
    shareable: dict = {}                # slot -> read by plain ufunc calls only
    for e, ok in zip(entries, pure):
        for s in e[1]:
            shareable[s] = shareable.get(s, True) and ok
        for _, tpl in e[3] or ():
            shareable.update(dict.fromkeys(_slots_of(tpl), False))
    shareable.update(dict.fromkeys([c[1] for c in checks] + list(outs), False))
    first: dict = {}
    again: dict = {}
    for e, ok in zip(entries, pure):
        if not ok:
            first.clear()                   # (a call that may write: the same ufunc may now compute another value)
            continue
        key = (e[0], tuple([again.get(s, s) for s in e[1]]) if again else e[1], e[5])
        was = first.setdefault(key, e[4])
        if was != e[4] and shareable.get(was, True) and shareable.get(e[4], True):
            again[e[4]] = was
    return again


def _slots_of(tpl: tuple) -> list:
    if tpl[0] in ("a", "t"):
        return [tpl[1]]
    return [] if tpl[0] == "c" else [s for p in tpl[1] for s in _slots_of(p)]


def _post(r: Any, post: Any) -> Any:
    """What apply does to a kernel's result: ``np.asarray`` ("asarray"), a rounding ("astype", ...)."""
    return np.asarray(r) if post == "asarray" else (r if post[2] is None else _post(r, post[2])).astype(post[1])


def _check(check: tuple, vals: list) -> None:
    _, s, kind, value, where = check
    now = vals[s].item() if kind == "item" else bool(vals[s].any()) if kind == "any" else int(vals[s].__index__())
    if not _same(now, value):
        raise _Miss(f"{where}: {now!r} != {value!r}" if kind == "any" else
                    f"the value read by .{kind}() at {where}: {now!r} != {value!r}")
