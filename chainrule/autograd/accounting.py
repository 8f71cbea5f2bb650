"""Counted cost: FLOPs of every op run (forward and backward) and bytes saved for backward.

``profile`` is an observer (``STATE.observers``): ``apply`` reports every op, ``Node.save`` and
``FunctionCtx.save_for_backward`` report what the graph keeps, and ``release`` (or garbage
collection of a dropped graph) reports when it lets go. FLOPs come from the op table
(``Primitive.flops``), never from a second table. Conventions, by op kind:

- matmul-class (matmul, einsum, dot, ...): 2 FLOPs per multiply-add, so (m x k)(k x n) is 2mkn;
  its backward runs two such matmuls (4mkn). einsum: 2 x the product of all index sizes per
  pairwise contraction. inv/solve/det/cholesky: the usual O(n^3) constants.
- elementwise (add, exp, relu, where, ...): 1 FLOP per output element, whatever the function.
- reductions (sum, amax, cumsum, ...): 1 FLOP per input element; logsumexp 3, softmax 4 per element.
- shape ops (reshape, transpose, getitem, concatenate, copy, ...): 0.

Backward FLOPs are the FLOPs of the ops the backward actually runs (including a checkpoint's
recomputation); while a profile is active the engine runs the rules on Tensors so each of them goes
through the op table. Saved bytes count each array held by the graph once (views count their base
array), parameters included; they fall when backward frees the graph or when it is garbage.
"""
from __future__ import annotations

import time
import weakref
from typing import Any

from chainrule.core._backend import np
from chainrule.core.grad_mode import STATE, add_to, remove_from
from chainrule.core.tensor import Tensor


class profile:
    """Count FLOPs, saved-for-backward bytes and wall time of everything run inside the block.

    >>> import chainrule as cr
    >>> w = cr.ones((3, 4), requires_grad=True)
    >>> with cr.profile() as p:
    ...     loss = (cr.ones((2, 3)) @ w).sum()
    ...     loss.backward()
    >>> p.forward_flops, p.backward_flops, p.saved_bytes      # 2*2*3*4 + 8; sum's and matmul's backward
    (56, 48, 0)
    """

    def __init__(self) -> None:
        self.forward_flops = 0
        self.backward_flops = 0
        self.saved_bytes = 0           # live now
        self.peak_saved_bytes = 0
        self.forward_time = 0.0
        self.backward_time = 0.0
        self.ops: dict[str, list] = {}  # name -> [calls, forward FLOPs, backward FLOPs, saved bytes]
        self._arrays: dict[int, list] = {}   # id(base array) -> [nbytes, holders]
        self._holders: dict[int, tuple] = {}  # id(node or ctx) -> ids of the arrays it holds
        self._phase = False
        self._mark = 0.0

    # ----- context manager -----
    def __enter__(self) -> profile:
        self._mark = time.perf_counter()
        self._phase = STATE.in_backward
        add_to("observers", self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._tick(self._phase)
        remove_from("observers", self)

    def _tick(self, phase: bool) -> None:
        # Wall time is split at op granularity: the time since the previous op is charged to the
        # phase of the op that ends it (it contains that op's own compute).
        now = time.perf_counter()
        if phase:
            self.backward_time += now - self._mark
        else:
            self.forward_time += now - self._mark
        self._mark = now
        self._phase = phase

    # ----- observer protocol -----
    def on_op(self, prim: Any, datas: list, params: dict, out: Any) -> None:
        backward = STATE.in_backward
        self._tick(backward)
        flops = int(prim.flops(out, *datas, **params))
        row = self.ops.get(prim.name)
        if row is None:
            row = self.ops[prim.name] = [0, 0, 0, 0]
        row[0] += 1
        if backward:
            row[2] += flops
            self.backward_flops += flops
        else:
            row[1] += flops
            self.forward_flops += flops

    def on_save(self, node: Any) -> None:
        held = list(node.saved or ()) + [node.out_data]
        self._hold(node, held, node.prim.name)
        if node.extra is None:
            node.extra = {}
        node.extra.setdefault("watchers", []).append(self)

    def on_save_function(self, ctx: Any) -> None:
        if not any(ctx.needs_input_grad):       # not recorded (no_grad, or no input requires grad)
            return
        self._hold(ctx, list(ctx.saved_values), getattr(ctx, "profile_name", "Function"))
        ctx.__dict__.setdefault("_watchers", []).append(self)

    def on_release(self, holder: Any) -> None:
        self._drop(id(holder))

    # ----- bookkeeping -----
    def _hold(self, holder: Any, values: list, name: str) -> None:
        key = id(holder)
        if key in self._holders:            # saved twice (a Function calling save_for_backward again)
            self._drop(key)
        ids, added = [], 0
        for arr in _arrays(values):
            aid = id(arr)
            entry = self._arrays.get(aid)
            if entry is None:
                self._arrays[aid] = [arr.nbytes, 1]
                added += arr.nbytes
            else:
                entry[1] += 1
            ids.append(aid)
        self._holders[key] = tuple(ids)
        weakref.finalize(holder, self._drop, key)
        row = self.ops.get(name)
        if row is None:
            row = self.ops[name] = [0, 0, 0, 0]
        row[3] += added
        self.saved_bytes += added
        if self.saved_bytes > self.peak_saved_bytes:
            self.peak_saved_bytes = self.saved_bytes

    def _drop(self, key: int) -> None:
        for aid in self._holders.pop(key, ()):
            entry = self._arrays[aid]
            entry[1] -= 1
            if entry[1] == 0:
                self.saved_bytes -= entry[0]
                del self._arrays[aid]

    # ----- report -----
    @property
    def total_flops(self) -> int:
        return self.forward_flops + self.backward_flops

    def __repr__(self) -> str:
        lines = [f"profile: forward {_si(self.forward_flops)}FLOP, backward {_si(self.backward_flops)}"
                 f"FLOP (x{self.backward_flops / max(self.forward_flops, 1):.2f}); saved "
                 f"{_si(self.saved_bytes)}B live, {_si(self.peak_saved_bytes)}B peak; wall forward "
                 f"{self.forward_time * 1e3:.1f} ms, backward {self.backward_time * 1e3:.1f} ms",
                 f"{'op':<16}{'calls':>8}{'fwd FLOPs':>14}{'bwd FLOPs':>14}{'saved bytes':>14}"]
        for name, (calls, fwd, bwd, saved) in sorted(self.ops.items(), key=lambda kv: -kv[1][1] - kv[1][2]):
            lines.append(f"{name:<16}{calls:>8}{fwd:>14,}{bwd:>14,}{saved:>14,}")
        return "\n".join(lines)


def _arrays(values: Any) -> list:
    """The distinct base arrays behind saved values (Tensors, ndarrays, Packed, tuples of them)."""
    found: dict[int, Any] = {}
    stack = list(values)
    while stack:
        v = stack.pop()
        if v is None:
            continue
        if isinstance(v, Tensor):
            v = v.data
        if isinstance(v, np.ndarray):
            while isinstance(v.base, np.ndarray):
                v = v.base
            found[id(v)] = v
        elif isinstance(v, np.generic):
            found[id(v)] = v
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
        elif hasattr(v, "unpack_fn"):          # Packed: what pack returned is what is held
            stack.append(v.obj)
    return list(found.values())


def _si(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:g} "
