"""``cr.compile``: run a step eagerly once while recording the NumPy kernels chainrule calls, then
replay that flat tape on new inputs, behind guards (docs/compile.md).

``apply`` reports every op to the recorder in ``STATE.recorder``, and the engine runs the VJP rules
through ops while one is active, so backward passes are on the tape too. Each array is known by
``id()`` while the capture keeps it alive; an array no entry produced is resolved to an argument or
to a tensor the step reaches (closure, globals, ``self``), or the capture is refused. What v1
cannot replay runs eagerly, with one warning that says why.
"""
from __future__ import annotations

import functools
import operator
import random
import types
import warnings
from collections import namedtuple
from typing import Any, Callable

from chainrule.core import _constants, _dtypes
from chainrule.core import random as _random
from chainrule.core._backend import ndarray, np
from chainrule.core._pytree import LEAF, flatten, unflatten
from chainrule.core._registry import _PY_NUMBERS, _PY_RESULTS, _WIDE, _keep_low_precision, _python_scalars
from chainrule.core.errors import CompileError
from chainrule.core.grad_mode import STATE, state_scope
from chainrule.core.tensor import Tensor, wrap
from chainrule.func._guards import MISS, describe_guards, fast_guard, whole_call
from chainrule.func._scan import (
    _DIRECT,
    _SCALARS,
    _alias,
    _direct,
    _Draw,
    _flatten_call,
    _generate,
    _hooks_of,
    _interpret,
    _Island,
    _layout,
    _leaf_guard,
    _leaf_names,
    _Miss,
    _path_name,
    _read_by_island,
    _rng_state,
    _same,
    _same_numpy_state,
    _Scan,
    _set_rng_state,
    _slots_of,
    _user_line,
    _walk,
)

__all__ = ["compile"]

CacheInfo = namedtuple("CacheInfo", "captures replays eager_runs misses")

# The primitives whose VJP and JVP rules are straight-line chainrule ops (no Python branch on the
# values they are given): a capture whose backward runs the rule of any other primitive is refused.
# Those with ``keeping_zero`` rules (log, sqrt, divide, ...) branch on exact-zero cotangents unless
# ``cr.set_safe_zero_cotangents(False)``.
_STRAIGHT_RULES = frozenset({
    "negative", "exp", "exp2", "expm1", "sin", "cos", "tan", "arctan", "sinh", "cosh", "tanh",
    "tanh_backward", "arcsinh", "sigmoid", "relu", "softplus", "erf", "gelu", "gelu_tanh",
    "gelu_tanh_backward", "abs", "real", "imag", "conj", "square", "sign", "copy", "alias", "astype", "add",
    "subtract", "multiply", "maximum", "minimum", "where", "clip", "reshape", "transpose", "broadcast_to",
    "diagonal", "flip", "roll", "pad", "getitem", "index_put", "sum", "amax", "amin", "cumsum", "linear",
    "matmul", "einsum", "concatenate", "softmax", "log_softmax", "softmax_cross_entropy", "conv",
    "conv_transpose", "conv_weight", "layer_norm", "layer_norm_backward",
})
_WHOLE_ENTRIES = 256       # a shorter plain tape runs as one function with its guards (~8 us a line to compile)
_KEEPS_ZERO = "keeps_zero"
# straight-line rules but for ``keeping_zero``'s test, which a capture tapes (a kernel and a value
# guard); power's base rule branches on its exponent's zeros too: straight for a Python exponent only
_KEEPING_ZERO_RULES = frozenset({"log", "log2", "log10", "log1p", "sqrt", "cbrt", "arcsin", "arccos",
                                 "arccosh", "arctanh", "reciprocal", "divide"})


_ACCUMULATES = ("it accumulates .grad into an existing gradient (or writes .grad by hand), which v1 does not "
                "replay; clear the gradients first (opt.zero_grad(), or p.grad = None) or use cr.grad / "
                "cr.autograd.grad, which return them")


class _Refused(Exception):
    """The capture cannot be replayed: the message says why (the step then runs eagerly)."""


# ----- the recorder: what apply, the engine and Tensor's value reads report during a capture -----
class _Recorder:
    def __init__(self, leaves: list, scan: _Scan) -> None:
        self.slot_of: dict[int, int] = {}        # id(array) -> slot
        self.alive: list = []                    # the arrays above (alive: their id() stays unique)
        self.sources: list = []                  # slot -> how a replay fills it (None: an entry)
        self.entries: list = []                  # (kernel, input slots, params, dynamic params, out slot, post)
        self.checks: list = []                   # (after entry n, slot, kind, value, where): value guards
        self.snapshots: list = []                # [array, its bytes (after the taped writes), name, slot]
        self.seen: dict[int, tuple] = {}         # id(tensor) -> (tensor, version, grad, data)
        self.graph_prims: dict[str, Any] = {}    # primitives whose rules may run (in a graph, or dual)
        self.rules_ran = False                   # a backward or forward mode ran rules
        self.cleared: set = set()                # ids of tensors whose .grad the step drops before any rule ran
        self.refused: str | None = None
        self.scan = scan
        self.leaf_tensor: dict[int, int] = {}
        self.leaf_array: dict[int, int] = {}
        self.leaf_start: dict[int, tuple] = {}   # id(tensor argument) -> (tensor, version, grad, data)
        self.grad_writes: list = []              # (which tensor, slot of its new .grad or None, from None)
        self.islands: list = []                  # (entry index, optimizer, its path): opt.step() calls
        self.versions: dict[int, tuple] = {}     # id(tensor) -> (it, version): after a taped write or island
        self.writes: list = []                   # (entry's slot, its index, external written or None)
        self.bumps: dict[int, list] = {}         # id(tensor) -> [it, taped writes into its memory]
        self.shared: list = []                   # the arrays every replay shares (constants, seeds)
        self.initial: dict[int, tuple] = {}      # slot -> (a copy before a write into it, the array, name)
        self.island_arrays: set = set()          # ids of the arrays islands update in place
        # id(generator) -> (it, its name, its state now): moved by the taped draws only
        self.rng_expect: dict[int, tuple] = {id(g): (g, name, _rng_state(g)) for g, name in scan.generators}
        self.default_generator = _random.default_generator
        self.rng_expect[id(self.default_generator)] = (self.default_generator, "cr.random.default_generator",
                                                       _rng_state(self.default_generator))
        self.drew: set = set()                   # the generators drawn from (True: the default one)
        self.rng_start = list(self.rng_expect.values())      # (a verifying replay puts them back)
        for i, x in enumerate(leaves):
            if isinstance(x, Tensor):
                self.leaf_tensor.setdefault(id(x), i)
                self.leaf_start[id(x)] = (x, x._version, x.__dict__.get("grad"), x.data)
                self.leaf_array.setdefault(id(x.data), i)
            elif isinstance(x, ndarray):
                self.leaf_array.setdefault(id(x), i)
        # the tensors that outlive the step (arguments, what the scan found), as at the call
        self.persistent = {key: found[4] for key, found in scan.tensors.items()}
        self.persistent.update(self.leaf_start)
        self.hooks_start = {key: _hooks_of(rec[0]) for key, rec in self.persistent.items()}

    def refuse(self, reason: str) -> None:
        self.refused = self.refused or reason

    # -- slots --
    def _new_slot(self, arr: Any, source: Any) -> int:
        s = len(self.sources)
        self.sources.append(source)
        self.slot_of[id(arr)] = s
        self.alive.append(arr)
        return s

    def slot(self, arr: Any, t: Any, what: str) -> int:
        """The slot of an array read as an op's input (``t``: its tensor, if it came as one)."""
        s = self.slot_of.get(id(arr))
        if s is not None:
            return s
        if t is not None:
            i = self.leaf_tensor.get(id(t))
            if i is not None and t.data is arr:
                return self._external(arr, ("arg", i), f"argument {i}")
            found = self.scan.tensors.get(id(t))
            if found is not None and t.data is arr:
                if t.grad_fn is not None:
                    raise _Refused(f"{what} reads {found[3]}, a tensor computed before the step (it has a "
                                   f"grad_fn); pass it as an argument, or detach it")
                return self._external(arr, ("ext", found[1], found[2], True), found[3])
        i = self.leaf_array.get(id(arr))
        if i is not None:
            return self._external(arr, ("argdata", i), f"argument {i}")
        found = self.scan.arrays.get(id(arr))
        if found is not None:
            return self._external(arr, ("ext", found[1], found[2], found[4]), found[3])
        if id(arr) in _constants.IDS:                # a causal mask: made from (guarded) shapes alone
            self.shared.append(arr)
            return self._new_slot(arr, ("const", arr))
        if isinstance(arr, np.generic):
            raise _Refused(f"{what} takes a NumPy scalar ({arr!r}) computed outside chainrule's ops; "
                           f"use a Python number or a tensor")
        if any(isinstance(rec[2], Tensor) and rec[2].data is arr for rec in self.persistent.values()):
            raise _Refused(_ACCUMULATES)
        shape = getattr(arr, "shape", "?")
        raise _Refused(f"{what} reads an array of shape {shape} that was not computed by chainrule's ops "
                       f"in the step nor passed to it (a tensor made inside the step with cr.tensor/"
                       f"cr.zeros/..., or NumPy code on .data); pass it as an argument or make it "
                       f"outside the step")

    def _external(self, arr: Any, source: tuple, name: str) -> int:
        s = self._new_slot(arr, source)
        self.snapshots.append([arr, arr.tobytes(), name, s])
        return s

    def _see(self, t: Tensor, what: str) -> None:
        rec = self.seen.get(id(t))
        if rec is None:
            self.seen[id(t)] = (t, t._version, t.__dict__.get("grad"), t.data)
        elif rec[1] != t._version or rec[3] is not t.data:
            raise _Refused(f"{what} reads a tensor of shape {t.shape} changed in place during the step "
                           f"outside chainrule's in-place ops (.data rebound, zero_(), a buffer update "
                           f"or an optimizer of its own)")

    # -- the reports --
    def _grad_write(self, key: int, t: Tensor, before: Any) -> None:
        """``t.grad`` changed during the step: a replay sets it to the new gradient (or None), if that
        is a fresh tensor computed on the tape (a backward into cleared gradients) of a tensor the
        replay can find again."""
        if key in self.leaf_tensor:
            where: tuple = ("leaf", self.leaf_tensor[key])
        elif key in self.scan.tensors:
            found = self.scan.tensors[key]
            where = ("path", found[1], found[2], found[3])
        else:
            raise _Refused(f"it writes .grad of a tensor of shape {t.shape} made inside the step")
        g = t.__dict__.get("grad")
        if g is None:
            self.grad_writes.append((where, None, False))
            return
        s = self._fresh_grad(g)
        if s is None and isinstance(g, Tensor) and g._requires_grad:
            raise _Refused("it leaves a .grad that requires grad (backward(create_graph=True)), a live "
                           "graph a replay cannot hand out; use cr.grad / cr.autograd.grad inside the step")
        if s is None:
            raise _Refused(_ACCUMULATES)
        # from None: eager would add to a gradient present at a later call, so one must be absent then
        # (unless the step drops it itself, zero_grad() before its backward)
        self.grad_writes.append((where, s, before is None and key not in self.cleared))

    def on_clear_grad(self, t: Tensor) -> None:
        """``zero_grad()`` drops ``t.grad``: before any rule ran, a present gradient is never added to."""
        if not self.rules_ran:
            self.cleared.add(id(t))

    def _fresh_grad(self, g: Any) -> int | None:
        """The slot of a gradient a backward of the step made (a new tensor on the tape), else None."""
        s = self.slot_of.get(id(g.data)) if isinstance(g, Tensor) else None
        fresh = s is not None and self.sources[s] is None and g.grad_fn is None and not g._requires_grad
        return s if fresh else None

    def on_island(self, opt: Any, closure: Any) -> Any:
        """``opt.step()`` during the capture: run it (unrecorded) and tape the call itself, with the
        gradients it reads; a replay sets them and calls the same method at the same point."""
        found = self.scan.objects.get(id(opt))
        if closure is not None or found is None or self.refused is not None:
            self.refuse("it calls opt.step(closure)" if closure is not None else
                        "it calls the step of an optimizer it does not reach through its closure, "
                        "globals or arguments")
            with state_scope(recorder=None):
                return opt.step(closure)
        params = [p for group in opt.param_groups for p in group["params"]]
        slots = []
        for p in params:
            g = p.__dict__.get("grad")
            s = None if g is None else self._fresh_grad(g)
            if g is not None and s is None:
                self.refuse(f"it calls opt.step() on a gradient of shape {g.shape} the tape did not make "
                            f"(accumulated into an existing one, copied outside the recorded kernels, "
                            f"or set by hand); clear the gradients first (opt.zero_grad())")
            slots.append(s)
        with state_scope(recorder=None):
            opt.step()
        for p in params:
            self.versions[id(p)] = (p, p._version)
            self.island_arrays.add(id(p.data))
            rec = self.seen.get(id(p))
            if rec is not None:
                self.seen[id(p)] = (p, p._version, rec[2], rec[3])
        island = _Island(opt, params, [s is not None for s in slots])
        out = self._new_slot(island, None)
        self.entries.append((island, tuple(s for s in slots if s is not None), None, None, out, None))
        self.islands.append((len(self.entries) - 1, opt, found))
        return None

    def on_write(self, t: Tensor, new: Tensor, op: str) -> None:
        """An in-place op's write (``numpy._methods._commit``): ``t._assign(new, op)``, taped as
        ``np.copyto`` of ``new``'s array into ``t``'s, the very array eager execution writes (a view's
        array is a view of its base's: the replay writes through it as eagerly)."""
        target = t.data
        if self.refused is None:
            try:
                self._see(t, op)
                dst = self.slot_of.get(id(target))
                dst = self.slot(target, t, op) if dst is None else dst
                src = self.slot_of.get(id(new.data))
                src = self.slot(new.data, new, op) if src is None else src
                if any(np.may_share_memory(a, target) for a in self.shared):
                    raise _Refused(f"{op} writes into a constant the step made from a Python list (or "
                                   f"into backward's seed); make it a tensor outside the step")
                for snap in self.snapshots:     # the externals this write changes: unchanged until now
                    if np.may_share_memory(snap[0], target):
                        if snap[0].tobytes() != snap[1]:
                            raise _Refused(f"it writes into {snap[2]} with NumPy (its values changed "
                                           f"during the step)")
                        self.initial.setdefault(snap[3], (snap[0].copy(), snap[0], snap[2]))
            except _Refused as e:
                self.refuse(str(e))
        t._assign(new, op)                 # (its errors are eager's: nothing is taped then)
        if self.refused is not None:
            return
        out = self._new_slot(object(), None)
        self.entries.append((np.copyto, (dst, src), {"casting": "same_kind"}, None, out, None))
        into = None                         # the name of an external it writes into, if any
        for snap in self.snapshots:
            if np.may_share_memory(snap[0], target):
                snap[1] = snap[0].tobytes()
                into = into or snap[2]
        self.writes.append((out, len(self.entries) - 1, into))
        for m in [t] if t._family is None else [r() for r in t._family]:
            if m is not None:               # its version moved with t's: by this write, taped
                self.versions[id(m)] = (m, m._version)
                self.bumps.setdefault(id(m), [m, 0])[1] += 1
                rec = self.seen.get(id(m))
                if rec is not None:
                    self.seen[id(m)] = (m, m._version, rec[2], rec[3])

    def on_op(self, prim: Any, xs: tuple, datas: list, params: Any, out: Any) -> Any:
        has_tensor = needs_grad = False
        try:
            if self.refused is None:
                ins = []
                seen, slot_of = self.seen, self.slot_of
                for x, a in zip(xs, datas):
                    if isinstance(x, Tensor):
                        has_tensor = True
                        needs_grad = needs_grad or x._requires_grad
                        rec = seen.get(id(x))           # (inlined: the common case is one seen before)
                        if rec is None or rec[1] != x._version or rec[3] is not x.data:
                            self._see(x, prim.name)
                        s = slot_of.get(id(a))
                        ins.append(s if s is not None else self.slot(a, x, prim.name))
                    elif type(x) is list or type(x) is tuple:      # apply made it an array: constant
                        ins.append(self._new_slot(a, ("const", a)))
                        self.shared.append(a)
                    elif isinstance(a, (ndarray, np.generic)):
                        ins.append(self.slot(a, None, prim.name))
                    else:
                        ins.append(self._constant(a))
                dyn = self._params(prim.name, params) if params else None
            else:
                has_tensor = any(isinstance(x, Tensor) for x in xs)
                needs_grad = any(isinstance(x, Tensor) and x._requires_grad for x in xs)
        except _Refused as e:
            self.refuse(str(e))
        post = None
        if has_tensor:                        # what apply does to the result, done here once
            if type(out) is not ndarray:
                out, post = np.asarray(out), "asarray"
            x0 = datas[0]
            if (type(x0) is not ndarray or out.dtype is not x0.dtype) and out.dtype in _WIDE \
                    and out.dtype != getattr(x0, "dtype", None) and not (params and "dtype" in params):
                low = _keep_low_precision(datas, out)
                if low is not out:
                    out, post = low, ("astype", low.dtype, post)
            st = STATE.__dict__         # rules run in a backward and for forward mode's tangents
            self.rules_ran = self.rules_ran or st["in_backward"] or bool(st["fw_levels"])
            if prim.name not in self.graph_prims and not _constant_safe(prim, xs) and (
                    needs_grad and prim.vjps is not None and st["grad_enabled"]
                    or st["fw_levels"] and prim.jvps is not None):
                self.graph_prims[prim.name] = prim
        elif type(out) in _PY_RESULTS and type(datas[0]) in _PY_NUMBERS and _python_scalars(xs):
            return out                        # apply casts it (a new object): never read by id
        if self.refused is None:
            s = self._new_slot(out, None)
            fn = _direct(prim, datas, params) if prim.name in _DIRECT else prim.forward
            self.entries.append((fn, tuple(ins), params or None, dyn, s, post))
        return out

    def expected_version(self, t: Tensor) -> int:
        """``t._version`` as the taped writes leave it (else an untaped write changed ``t``)."""
        rec = self.versions.get(id(t)) or self.seen.get(id(t)) or self.persistent.get(id(t))
        if rec is not None:
            return rec[1]
        for ref in t._family or ():           # a view made after a write into its memory
            m = ref()
            known = None if m is None else self.versions.get(id(m)) or self.seen.get(id(m))
            if known is not None and known[1] == t._version:
                return t._version
        return 0

    def _constant(self, value: Any) -> int:
        if not isinstance(value, _SCALARS + (np.dtype,)):
            raise _Refused(f"an op takes an input of type {type(value).__name__} that v1 cannot replay")
        self.sources.append(("const", value))
        return len(self.sources) - 1

    def _params(self, name: str, params: dict) -> Any:
        """The params that hold arrays or tensors: (key, template) pairs, filled at replay."""
        dyn = tuple((k, tpl) for k, v in params.items() if (tpl := self._template(v, name)) is not _STATIC)
        return dyn or None

    def _template(self, v: Any, name: str) -> Any:
        if isinstance(v, Tensor):
            self._see(v, name)
            return ("t", self.slot(v.data, v, name))
        if isinstance(v, (ndarray, np.generic)):
            return ("a", self.slot(v, None, name))
        if type(v) is tuple or type(v) is list:
            parts = [self._template(w, name) for w in v]
            if all(p is _STATIC for p in parts):
                return _STATIC
            return (type(v), tuple(("c", w) if p is _STATIC else p for w, p in zip(v, parts)))
        if isinstance(v, (dict, set)) or hasattr(v, "__array__"):
            raise _Refused(f"{name} takes a parameter of type {type(v).__name__} that v1 cannot replay")
        return _STATIC

    def on_seed(self, arr: Any) -> None:
        self.rules_ran = True
        if id(arr) in self.slot_of or id(arr) in self.leaf_array or id(arr) in self.scan.arrays:
            return
        if arr.size == 1 and arr.reshape(-1)[0] == 1:        # backward()'s implicit seed (ones)
            self._new_slot(arr, ("ones", arr.shape, arr.dtype))
            self.shared.append(arr)

    def on_random(self) -> None:
        self.refuse("it draws random numbers outside cr.random.draw (cr.nn.init, a distribution's "
                    "sample, ...), which a replay would not repeat; pass the values as arguments")

    def on_kernel(self, fn: Callable, arrays: tuple, params: dict | None, out: Any) -> None:
        """``out = fn(*arrays, **params)`` ran as NumPy code inside an op or a rule (a one-hot, a tie
        count, keeping_zero's test): tape it as an entry, its arrays as slots (``out``: an array or
        a tuple of arrays)."""
        try:
            if self.refused is None:
                parts = out if type(out) is tuple else (out,)
                if not all(type(a) is ndarray or isinstance(a, np.generic) for a in parts):   # (0-d: a scalar)
                    raise _Refused(f"{fn.__name__} returned a {type(out).__name__}, not arrays")
                ins = tuple(self.slot(a, None, fn.__name__) for a in arrays)
                dyn = self._params(fn.__name__, params) if params else None
                self.entries.append((fn, ins, params or None, dyn, self._new_slot(out, None), None))
                if type(out) is tuple:              # (several arrays: one entry picks each)
                    whole = self.slot_of[id(out)]
                    for i, a in enumerate(out):
                        self.entries.append((operator.itemgetter(i), (whole,), None, None,
                                             self._new_slot(a, None), None))
        except _Refused as e:
            self.refuse(str(e))

    def on_condition(self, arr: Any, where: str) -> bool:
        """``bool(arr.any())`` decides a branch of a rule: a value guard on it (``arr`` on the tape)."""
        value = bool(arr.any())
        s = self.slot_of.get(id(arr))
        if s is None:
            self.refuse(f"{where} branches on an array not on the tape")
        elif self.refused is None:
            self.checks.append((len(self.entries), s, "any", value, where))
        return value

    def on_draw(self, kernel: Callable, generator: Any, args: tuple) -> Any:
        """``cr.random.draw``: run ``kernel`` on the generator and tape a call that draws from the
        generator ``get_generator(generator)`` gives at replay (the default one is looked up again:
        ``cr.random.manual_seed`` between calls is seen). The generator must have moved only by
        these draws (its state is compared at each draw and at the end)."""
        gen = _random.default_generator if generator is None else generator
        try:
            if self.refused is None:
                known = self.rng_expect.get(id(gen))
                if known is None:
                    raise _Refused("it draws from a generator made inside the step (or one it does not "
                                   "reach through its closure, globals or arguments); a replay cannot "
                                   "find it again")
                if _rng_state(gen) != known[2]:
                    raise _Refused(f"it draws from the generator {known[1]} directly as well as through "
                                   f"chainrule's random ops; a replay would not repeat those draws")
        except _Refused as e:
            self.refuse(str(e))
        out = kernel(gen, *args)
        if self.refused is None:
            self.rng_expect[id(gen)] = (gen, self.rng_expect[id(gen)][1], _rng_state(gen))
            self.drew.add(generator is None or gen)
            self.on_kernel(_Draw(kernel, generator), (), {"args": args}, out)
        return out

    def on_numpy(self, t: Tensor, how: str) -> None:
        self.refuse(f"it reads tensor values with {how} at {_user_line()}, which a replay cannot see")

    def on_value(self, t: Tensor, value: Any, kind: str) -> None:
        try:
            if self.refused is None:
                self.checks.append((len(self.entries), self.slot(t.data, t, f".{kind}()"), kind, value,
                                    _user_line()))
        except _Refused as e:
            self.refuse(str(e))

    def finish(self, out: Any) -> None:
        """The end of the capture: refuse what the step changed beyond its return value and the taped
        writes (the tensors made inside the step are the replay's own: their hooks, retained
        gradients and in-place changes are on the tape)."""
        self.grad_writes = []
        for key, (t, version, grad, data) in self.persistent.items():
            if t.__dict__.get("grad") is not grad:
                self._grad_write(key, t, grad)
            moved = t._version != self.versions.get(key, (t, version))[1]
            if moved and t.data.base is not None and id(t.data.base) in self.island_arrays:
                moved = False                   # a view of a parameter an island updated (its bias as (C, 1, 1))
            if moved or t.data is not data:
                raise _Refused(f"it changes a tensor of shape {t.shape} in place outside chainrule's "
                               f"in-place ops (.data rebound, zero_(), a buffer update such as "
                               f"BatchNorm's running statistics, or an optimizer whose step is its own)")
            if _hooks_of(t) != self.hooks_start[key]:
                raise _Refused(f"it registers a hook on a tensor of shape {t.shape} that outlives the step "
                               f"(each call would add one more); register it outside the step, or "
                               f"remove it (handle.remove()) before the step returns")
        for arr, before, name, _ in self.snapshots:
            if id(arr) not in self.island_arrays and arr.tobytes() != before:
                raise _Refused(f"it writes into {name} with NumPy (its values changed during the step)")
        islands = [(found[1], found[2]) for _, _, found in self.islands]
        for t, root, steps, name, _ in self.scan.tensors.values():
            if _walk(self.scan.roots[root](), steps) is not t and not any(
                    r == root and steps[:len(p)] == p for r, p in islands):
                raise _Refused(f"it rebinds {name} to another tensor, a Python side effect a replay would "
                               f"not repeat")
        for root, steps, name, value in self.scan.values:
            now = _walk(self.scan.roots[root](), steps)
            if not _same(now, value):
                raise _Refused(f"it changes {name} ({value!r} -> {now!r}), a Python side effect a replay "
                               f"would not repeat")
        if self.rules_ran:
            for name, prim in self.graph_prims.items():
                if name in _STRAIGHT_RULES or name in _KEEPING_ZERO_RULES:
                    continue
                if not STATE.safe_zero and name != "power" and all(
                        getattr(r, _KEEPS_ZERO, False) or r is None for r in (prim.vjps or ())):
                    continue
                raise _Refused(f"it runs the derivative rule of '{name}', which branches on values "
                               f"(v1 replays only straight-line rules)")


def _constant_safe(prim: Any, xs: tuple) -> bool:
    """``x / c`` and ``x ** c`` (``c`` a Python number): the rule's one branch on values is
    ``keeping_zero``'s, which the capture tapes (power's other branch is on the constant)."""
    if len(xs) != 2 or isinstance(xs[1], (Tensor, ndarray)) or type(xs[1]) not in (int, float):
        return False
    return prim.name in ("divide", "power")


_STATIC = object()


class _Capture:
    """One recorded step: its guards, its tape (dead entries dropped) and how to rebuild its outputs."""

    def __init__(self, rec: _Recorder, leaves: list, tree: Any, out: Any, state: tuple) -> None:
        self.tree, self.state = tree, state
        self.names = _leaf_names(tree)
        self.leaf_guards = [_leaf_guard(x) for x in leaves]
        for name, x in zip(self.names, leaves):
            if isinstance(x, Tensor) and x._requires_grad and x.grad_fn is not None:
                raise _Refused(f"{name} is a non-leaf tensor that requires grad (a graph from outside "
                               f"the step); pass it detached")
        self.scan_roots, self.root_codes = rec.scan.roots, rec.scan.root_codes
        self.value_guards = [v for v in rec.scan.values if not _read_by_island(v, rec)]
        out_leaves, self.out_tree = flatten(out)
        t = self.out_tree                    # (a flat tuple or list of leaves: rebuilt without the walk)
        flat = t is not LEAF and t[0] in (tuple, list) and all(c is LEAF for c in t[2])
        self.rebuild = t[0] if flat else functools.partial(unflatten, t)
        self.outs = [self._output(rec, x, leaves) for x in out_leaves]
        needed = {o[1] for o in self.outs if o[0] in ("tensor", "array")}
        needed |= {c[1] for c in rec.checks}
        needed |= {w[1] for w in rec.grad_writes if w[1] is not None}
        needed |= {rec.entries[i][4] for i, _, _ in rec.islands}
        needed |= {e[4] for e in rec.entries if type(e[0]) is _Draw}     # a replay moves the stream as eager
        needed |= {w[0] for w in rec.writes}                            # and writes where eager writes
        self.grad_writes = rec.grad_writes
        if any(at > i for at, *_ in rec.checks for i, _, _ in rec.islands):
            raise _Refused("it reads a value (.item(), float(), ...) after opt.step(): a replay would "
                           "have to stop after the optimizer's writes; read it before the step")
        # a value guard after a write into an external: a replay that misses there puts it back
        late = any(into and any(c[0] > i for c in rec.checks) for _, i, into in rec.writes)
        self.restore = sorted(rec.initial) if late else []
        # writes outside the tape that a kernel's error could leave half done: the error is raised
        self.effects = bool(rec.islands) or not late and any(into for *_, into in rec.writes)
        self.islands = [(opt, found[1], found[2], found[3], rec.entries[i][0].ids)
                        for i, opt, found in rec.islands]
        keep = []
        for e in reversed(rec.entries):
            if e[4] in needed:
                keep.append(e)
                needed.update(e[1])
                for _, tpl in e[3] or ():
                    needed.update(_slots_of(tpl))
        keep.reverse()
        kept = {id(e): i for i, e in enumerate(keep)}
        position, n = [], 0                  # kept entries before each original position
        for e in rec.entries:
            position.append(n)
            n += id(e) in kept
        position.append(n)
        self.entries = [(fn, ins, params or {}, dyn, o, post) for fn, ins, params, dyn, o, post in keep]
        self.kept = [o[1] for o in self.outs if o[0] in ("tensor", "array")] + \
            [w[1] for w in self.grad_writes if w[1] is not None]        # the slots the tape must hand back
        self.checks = [(position[at], s, kind, value, where) for at, s, kind, value, where in rec.checks]
        self.n_recorded = len(rec.entries)
        self.init: list = [None] * len(rec.sources)
        self.args: list = []                 # (slot, leaf index, read .data)
        self.exts: list = []                 # (slot, root, steps, via tensor, guard, name)
        for s, src in enumerate(rec.sources):
            if src is None or s not in needed:
                continue
            kind = src[0]
            if kind == "const":
                self.init[s] = src[1]
            elif kind == "ones":
                self.init[s] = np.ones(src[1], src[2])
            elif kind == "arg":
                self.args.append((s, src[1], True))
            elif kind == "argdata":
                self.args.append((s, src[1], isinstance(leaves[src[1]], Tensor)))
            else:
                _, root, steps, via = src
                obj = _walk(rec.scan.roots[root](), steps)
                name = _path_name(rec.scan.root_names[root], steps)
                self.exts.append((s, root, steps, via, _leaf_guard(obj), name))
        # a closed-over tensor that was also an argument was read from the argument's slot: it
        # must stay that argument
        self.leaf_paths = [(found[1], found[2], found[3], rec.leaf_tensor[key])
                           for key, found in rec.scan.tensors.items() if key in rec.leaf_tensor]
        self.leaf_paths += [(found[1], found[2], found[3], rec.leaf_array[key])
                            for key, found in rec.scan.arrays.items()
                            if key in rec.leaf_array and not found[4]]
        self.alias = _alias(leaves + [_walk(rec.scan.roots[e[1]](), e[2]) for e in self.exts])
        self.distinct = self.alias == tuple(range(len(self.alias)))     # (the common case: a set's size)
        self.used_roots = sorted({e[1] for e in self.exts} | {v[0] for v in self.value_guards}
                                 | {p[0] for p in self.leaf_paths}
                                 | {w[0][1] for w in self.grad_writes if w[0][0] == "path"}
                                 | {i[1] for i in self.islands})
        self.run: Callable | None = None
        self.fast: Callable | None = None     # the guards as code, and for a short plain capture the
        self.call: Callable | None = None     # whole call as code (guards, tape, .grad writes, outputs)
        self.drew = rec.drew
        self.bumps: list = []                # (which tensor, taped writes): its version moves as eagerly
        families: set = set()
        for key, (m, count) in rec.bumps.items():
            family = id(m._family) if m._family is not None else key
            if key in rec.persistent and family not in families:
                families.add(family)
                found = rec.scan.tensors.get(key)
                self.bumps.append((("leaf", rec.leaf_tensor[key]) if key in rec.leaf_tensor else
                                   ("path", found[1], found[2], found[3]), count))
        # every tensor found by the scan that the step read: requires_grad and the hooks (the backward
        # reaches it even where its value is dead code), unless its external's guard checks them
        covered = {(e[1], e[2]) for e in self.exts if e[3]}
        self.graph_guards = [(found[1], found[2], found[3], t._requires_grad, _hooks_of(t))
                             for key, (t, *_) in rec.seen.items()
                             if key in rec.scan.tensors and key not in rec.leaf_tensor
                             for found in (rec.scan.tensors[key],) if (found[1], found[2]) not in covered]
        self.used_roots = sorted(set(self.used_roots) | {w[0][1] for w in self.bumps if w[0][0] == "path"}
                                 | {g[0] for g in self.graph_guards})
        self.layout = None                   # with writes: the arrays' strides fix which kernels return views
        if rec.writes:
            objs = leaves + [_walk(rec.scan.roots[e[1]](), e[2]) for e in self.exts]
            self.layout = _layout(objs)
        if not rec.islands:
            self._verify(rec, leaves, out_leaves)
        self.whole = len(self.entries) <= _WHOLE_ENTRIES and not (
            self.islands or self.drew or self.restore or self.checks or self.bumps)

    def _verify(self, rec: _Recorder, leaves: list, out_leaves: list) -> None:
        """Replay the tape once on the capture's own inputs (a copy of the externals it wrote into,
        as they were before) and compare with what eager execution left: the outputs, the new
        ``.grad``s and the arrays written. A difference means the step computed something the tape
        does not see (NumPy code writing into ``t.data`` of a tensor made inside the step or of a
        gradient, in a hook, ...): refused."""
        vals = self.init[:]
        for s, i, data in self.args:
            vals[s] = leaves[i].data if data else leaves[i]
        for s, root, steps, via, _, _ in self.exts:
            obj = _walk(rec.scan.roots[root](), steps)
            vals[s] = obj.data if via else obj
        for s, (copy, _, _) in rec.initial.items():
            vals[s] = copy
        gens = [(g, start, _rng_state(g)) for g, _, start in rec.rng_start]
        try:
            for g, start, _ in gens:
                _set_rng_state(g, start)
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                _interpret(self.entries, self.checks, self.kept, vals)
            drawn = [_rng_state(g) for g, _, _ in gens]
        except Exception as e:
            raise _Refused(f"a replay on the capture's own inputs fails ({type(e).__name__}: {e})") from None
        finally:
            for g, _, end in gens:
                _set_rng_state(g, end)
        if drawn != [end for _, _, end in gens]:
            raise _Refused("a replay on the capture's own inputs draws other random numbers than eager")
        got = [(f"output {k}", vals[o[1]], x.data if isinstance(x, Tensor) else x)
               for k, (o, x) in enumerate(zip(self.outs, out_leaves)) if o[0] in ("tensor", "array")]
        got += [(f"{w[0][3] if w[0][0] == 'path' else self.names[w[0][1]]}.grad", vals[w[1]],
                 (leaves[w[0][1]] if w[0][0] == "leaf" else _walk(rec.scan.roots[w[0][1]](), w[0][2])).grad.data)
                for w in self.grad_writes if w[1] is not None]
        got += [(name, copy, arr) for copy, arr, name in rec.initial.values()]
        for what, a, b in got:
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                raise _Refused(f"a replay on the capture's own inputs gives another {what} than eager "
                               f"execution: the step computes values outside chainrule's ops (NumPy code "
                               f"writing into t.data, in a hook?)")

    def _output(self, rec: _Recorder, x: Any, leaves: list) -> tuple:
        if isinstance(x, Tensor):
            if x._requires_grad:
                raise _Refused("it returns a tensor that requires grad (a live graph); return "
                               "t.detach(), or values and gradients (cr.value_and_grad)")
            if x._version != rec.expected_version(x):
                raise _Refused("it returns a tensor changed in place outside chainrule's in-place ops "
                               "(zero_(), a write through .data)")
            for i, leaf in enumerate(leaves):
                if leaf is x:
                    return ("leaf", i)
            s = rec.slot_of.get(id(x.data))
            if s is None:
                try:                    # (an argument's or a parameter's array, no op read it)
                    s = rec.slot(x.data, x, "the output")
                except _Refused:
                    raise _Refused(f"it returns a tensor of shape {x.shape} not computed by chainrule's "
                                   f"ops in the step") from None
            return ("tensor", s)
        if isinstance(x, ndarray):
            if id(x) not in rec.slot_of:
                raise _Refused(f"it returns an array of shape {x.shape} not computed by chainrule's ops")
            return ("array", rec.slot_of[id(x)])
        if isinstance(x, _SCALARS):
            return ("const", x)
        raise _Refused(f"it returns a {type(x).__name__}; v1 replays steps returning tensors, arrays "
                       f"and Python numbers")

    # -- a call --
    def guard(self, leaves: list, tree: Any, state: tuple) -> tuple[str | None, list]:
        """(None, what the replay needs: the slots, the ``.grad`` targets, the version bumps) if every
        guard passes, else (the failing guard's message, [])."""
        if self.fast is None:                   # generated once, at the first call after the capture
            self.fast = fast_guard(self)
            self.call = whole_call(self) if self.whole else None
        found = self.fast(leaves, tree, state)
        return (None, found) if found is not None else describe_guards(self, leaves, tree, state)

    def replay(self, leaves: list, found: Any) -> Any:
        vals, targets, bumped = found
        if self.run is None:                    # compiled once, at the first replay (~10 us per entry)
            self.run = _generate(self.entries, self.checks, self.kept)
        if self.drew or self.restore:   # a miss or a kernel's error: the generators and externals go back
            gens = [_random.get_generator(None if g is True else g) for g in self.drew]
            states = [g.bit_generator.state for g in gens]
            saved = [(vals[s], vals[s].copy()) for s in self.restore if vals[s] is not None]
            try:
                self.run(vals)
            except Exception:
                for g, state in zip(gens, states):
                    g.bit_generator.state = state
                for arr, copy in saved:
                    np.copyto(arr, copy)
                raise
        else:
            self.run(vals)
        grads = {}
        for t, s in targets:           # the writes of a replay: after every check (and the islands')
            if s is None:
                t.grad = None
                continue
            g = t.__dict__.get("grad")
            if g is None or g.data is not vals[s]:           # (an island set this one already)
                g = grads.get(s) or wrap(vals[s])
                t.grad = g
            grads[s] = g
        for t, count in bumped:            # the version counters of the memory written, as eagerly
            for _ in range(count):
                t._bump()
        return self._outputs(vals, leaves, grads)

    def _outputs(self, vals: list, leaves: list, grads: dict) -> Any:
        return self.rebuild([(grads[x] if x in grads else wrap(vals[x])) if kind == "tensor"   # p.grad: itself
                             else vals[x] if kind == "array" else leaves[x] if kind == "leaf" else x
                             for kind, x in self.outs])


def _state() -> tuple:
    return (STATE.grad_enabled, _dtypes.get_default_dtype(), STATE.safe_zero)


_RARE_FEATURES = (("vmap_levels", "inside cr.vmap"), ("fw_levels", "inside forward mode (cr.jvp, dual_level)"),
                  ("autocast", "under cr.autocast"), ("anomaly", "under detect_anomaly"),
                  ("hooks", "under saved_tensors_hooks"), ("observers", "while a profiler or tracer watches"))


class Compiled:
    """A step compiled by ``cr.compile``: call it as the function it wraps."""

    _scan_through = "fn"           # what a scan of another step finds here: the function, not the cache

    def __init__(self, fn: Callable, max_captures: int, on_miss: str) -> None:
        if on_miss not in ("recapture", "error"):
            raise ValueError(f"cr.compile: on_miss must be 'recapture' or 'error', got {on_miss!r}")
        if not isinstance(max_captures, int) or max_captures < 1:
            raise ValueError(f"cr.compile: max_captures must be a positive int, got {max_captures!r}")
        self.fn, self.max_captures, self.on_miss = fn, max_captures, on_miss
        self.captures: list[_Capture] = []
        self._hot: _Capture | None = None
        self.last_miss: str | None = None
        self.eager_reason: str | None = None
        self._counts = [0, 0, 0, 0]
        self._warned: set = set()
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """A compiled method: bound to its instance (an argument, guarded by identity)."""
        return self if obj is None else types.MethodType(self, obj)

    def cache_info(self) -> CacheInfo:
        """``(captures, replays, eager_runs, misses)`` so far."""
        return CacheInfo(*self._counts)

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"cr.compile({getattr(self.fn, '__name__', 'step')}): {message}", UserWarning,
                          stacklevel=3)

    def _eager(self, args: tuple, kwargs: dict) -> Any:
        self._counts[2] += 1
        return self.fn(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hot = self._hot            # the newest capture, once replayed, when its whole call is one function
        if hot is not None:        # (the older captures, and the newest before it is hot, take the long way)
            try:
                out = hot.call(args, kwargs)
            except Exception:                    # a kernel refused these values: eager raises its error
                if hot.effects:
                    raise
                return self._eager(args, kwargs)
            if out is not MISS:
                self._counts[1] += 1
                return out
        d = STATE.__dict__
        if d["rare"]:
            if d["recorder"] is not None:            # inside another capture: its ops are recorded there
                return self.fn(*args, **kwargs)
            for field, words in _RARE_FEATURES:
                if d[field]:
                    self._warn(field, f"called {words}: it runs eagerly")
                    break
            return self._eager(args, kwargs)
        if self.eager_reason is not None:
            return self._eager(args, kwargs)
        leaves, tree = _flatten_call(args, kwargs)
        state = _state()
        miss = None                              # the newest capture's failing guard
        for cap in reversed(self.captures):
            exts = cap.fast(leaves, tree, state) if cap.fast is not None else None
            failed = None
            if exts is None:
                failed, exts = cap.guard(leaves, tree, state)
            if failed is None:
                try:
                    out = cap.replay(leaves, exts)
                except _Miss as e:
                    failed = str(e)
                except Exception:                # a kernel refused these values: eager raises its error
                    if cap.effects:              # (unless the replay wrote outside the tape before)
                        raise
                    return self._eager(args, kwargs)
            if failed is not None:
                miss = miss or failed
                continue
            if cap is self.captures[-1] and cap.call is not None:
                self._hot = cap
            self._counts[1] += 1
            return out
        if self.captures:
            self._counts[3] += 1
            self.last_miss = miss
            if self.on_miss == "error":
                raise CompileError(f"cr.compile({getattr(self.fn, '__name__', 'step')}): no capture matches "
                                   f"this call: {miss}")
            if len(self.captures) >= self.max_captures:
                self._warn("max", f"{self.max_captures} captures made and the guards still miss ({miss}); "
                                  f"later misses run eagerly")
                return self._eager(args, kwargs)
        return self._capture(args, kwargs, leaves, tree, state)

    def _capture(self, args: tuple, kwargs: dict, leaves: list, tree: Any, state: tuple) -> Any:
        scan = _Scan()
        for i, x in enumerate(leaves):
            if not isinstance(x, (Tensor, ndarray) + _SCALARS):
                scan.add_root(lambda i=i, x=x: x, f"argument {i}")
        scan._function(self.fn, 0)
        for t in [x for x in leaves if isinstance(x, Tensor)] + [f[0] for f in list(scan.tensors.values())]:
            for fn in _hooks_of(t):          # what the hooks on what it reads read (and change)
                scan.add_root(lambda fn=fn: fn, f"a hook on a tensor of shape {t.shape}")
        rec = _Recorder(leaves, scan)
        rng = np.random.get_state(), random.getstate()
        with state_scope(recorder=rec):
            out = self.fn(*args, **kwargs)
        self._counts[0] += 1
        try:
            if rec.refused is not None:
                raise _Refused(rec.refused)
            if random.getstate() != rng[1] or not _same_numpy_state(np.random.get_state(), rng[0]):
                raise _Refused("it draws from NumPy's or Python's global random generator; pass the "
                               "random values as arguments")
            if _random.default_generator is not rec.default_generator:
                raise _Refused("it reseeds the default generator (cr.random.manual_seed) inside the step; "
                               "seed it outside")
            for g, name, expected in rec.rng_expect.values():
                if _rng_state(g) != expected:
                    raise _Refused(f"it draws from the NumPy generator {name} directly; use chainrule's "
                                   f"random ops (dropout) or pass the random values as arguments")
            rec.finish(out)
            cap = _Capture(rec, leaves, tree, out, state)
        except _Refused as e:
            self.eager_reason, self._hot = str(e), None
            self._warn("refused", f"the step cannot be replayed: {e}; it runs eagerly")
            return out
        self.captures.append(cap)
        self._hot = None                         # (the newest capture is tried first: it becomes hot once replayed)
        return out


def compile(fn: Callable | None = None, *, max_captures: int = 8, on_miss: str = "recapture") -> Any:
    """Capture a step once and replay its NumPy kernels on later calls whose guards match.

    The first call runs ``fn`` eagerly, recording the kernels chainrule runs (forward and backward);
    a later call whose guards match replays them, bitwise as eager execution would compute. What v1
    cannot replay runs eagerly, with one warning (docs/compile.md). Also ``@cr.compile(max_captures=2)``.

    >>> import chainrule as cr
    >>> from chainrule.func.compile import compile
    >>> w = cr.tensor([1.0, 2.0])
    >>> step = compile(lambda x: cr.value_and_grad(lambda w: (cr.tanh(w * x) * x).sum())(w))
    >>> a = step(cr.tensor([0.5, 0.25])); b = step(cr.tensor([0.5, 0.25]))
    >>> bool((a[1] == b[1]).all()), step.cache_info()
    (True, CacheInfo(captures=1, replays=1, eager_runs=0, misses=0))
    """
    if fn is None:
        return lambda f: Compiled(f, max_captures, on_miss)
    if not callable(fn):
        raise TypeError(f"cr.compile: expected a function, got {type(fn).__name__}")
    return Compiled(fn, max_captures, on_miss)
