"""Gradient checkpointing: keep a function's inputs, recompute its inside during backward.

``checkpoint`` is a ``cr.Function`` whose forward runs ``fn`` under ``no_grad`` (saving only the
inputs) and whose backward re-runs ``fn`` with the graph on and backpropagates through that copy
(Chen et al., "Training deep nets with sublinear memory cost", arXiv 1604.06174).
``checkpoint_sequential`` does it per segment of a layer list, with ``segments`` as in PyTorch or
with a ``memory_budget``: then ``plan_checkpoints`` measures each layer once and picks the placement
with the least recomputation whose predicted peak fits.

Tensors ``fn`` closes over (parameters) get their gradients accumulated into ``.grad`` during
backward, as in PyTorch's reentrant checkpoint; to get them from ``cr.autograd.grad`` pass them as
arguments. Pass intermediate (non-leaf) tensors as arguments too, never through a closure.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from chainrule.autograd import engine
from chainrule.autograd.accounting import profile
from chainrule.autograd.function import Function, FunctionCtx
from chainrule.core._backend import np
from chainrule.core.grad_mode import STATE, enable_grad
from chainrule.core.graph import closure_leaves
from chainrule.core.random import get_rng_state, set_rng_state, used_rng_state
from chainrule.core.tensor import Tensor
from chainrule.numpy import PRIMITIVES, apply

log = logging.getLogger("chainrule.checkpoint")


def checkpoint(fn: Callable, *args: Any, preserve_rng_state: bool = True,
               use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` saving only ``args``; recompute it during backward.

    ``fn`` returns a Tensor or a tuple. With ``preserve_rng_state`` the recomputation sees the same
    random numbers (chainrule's default generator and NumPy's global RNG), so dropout masks match.
    ``use_reentrant`` is accepted for PyTorch compatibility and changes nothing (see docs/memory.md).

    >>> import chainrule as cr
    >>> x = cr.tensor([0.5, 1.0], requires_grad=True)
    >>> y = cr.checkpoint(lambda v: cr.tanh(v) * v, x).sum()
    >>> y.backward(); x.grad
    tensor([0.8553411, 1.1815685])
    """
    if kwargs:
        fn = functools.partial(fn, **kwargs)
    st = STATE
    if not st.grad_enabled:
        return fn(*args)                 # nothing would be saved anyway
    if st.fw_levels:
        return fn(*args)                 # forward mode saves nothing: running fn is its jvp (tangents
                                         # may also come from tensors fn closes over)
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        # fn may still close over parameters: a fresh anchor input makes the node be recorded
        args = args + (Tensor(np.zeros((), np.float32), requires_grad=True),)
        return _Checkpoint.apply(_drop_last(fn), preserve_rng_state, *args)
    return _Checkpoint.apply(fn, preserve_rng_state, *args)


def _drop_last(fn: Callable) -> Callable:
    def run(*args: Any) -> Any:
        return fn(*args[:-1])
    return run


class _Checkpoint(Function):
    reentrant = True         # backward accumulates the gradients of the parameters fn closes over

    @staticmethod
    def forward(ctx: FunctionCtx, run: Callable, preserve: bool, *args: Any) -> Any:
        ctx.run = run
        ctx.rng = get_rng_state() if preserve else None
        ctx.is_tensor = tuple(isinstance(a, Tensor) for a in args)
        ctx.others = tuple(None if t else a for a, t in zip(args, ctx.is_tensor))
        ctx.profile_name = "checkpoint"
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        out = run(*args)
        if ctx.rng is not None:
            ctx.rng = used_rng_state(ctx.rng)     # restore in backward only the RNGs fn drew from
        return out

    @staticmethod
    def backward(ctx: FunctionCtx, *gs: Any) -> tuple:
        create_graph = STATE.grad_enabled
        saved = iter(ctx.saved_tensors)
        with enable_grad():
            xs = []
            for other, is_tensor in zip(ctx.others, ctx.is_tensor):
                if not is_tensor:
                    xs.append(other)
                    continue
                x = next(saved)
                if create_graph and x.requires_grad:
                    xs.append(apply(PRIMITIVES["alias"], (x,)))   # stays connected: grad of grad reaches x
                else:
                    xd = x.detach()
                    xd.requires_grad = x.requires_grad
                    xs.append(xd)
            with _rng_state(ctx.rng):
                outs = ctx.run(*xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        pairs = [(o, g) for o, g in zip(outs, gs) if isinstance(o, Tensor) and o.requires_grad]
        wanted = [x for x, t in zip(xs, ctx.is_tensor) if t and x.requires_grad]
        found = iter(())
        if pairs:
            roots = [o for o, _ in pairs]
            # the inputs' gradients come back; closed-over parameters accumulate theirs. Fresh leaf
            # inputs need no graph walk; aliased ones (create_graph) stay connected to the outer
            # graph, so the walk stops at them and at the closure's leaves
            stop = None if not create_graph else closure_leaves(roots, wanted)
            found = iter(engine.gradients_and_accumulate(roots, [g for _, g in pairs], wanted,
                                                         create_graph, stop))
        grads = [next(found, None) if t and x.requires_grad else None for x, t in zip(xs, ctx.is_tensor)]
        return (None, None, *grads)


@contextlib.contextmanager
def _rng_state(state: dict | None) -> Iterator[None]:
    if state is None:
        yield
        return
    stash = get_rng_state(tuple(state))       # only what the replay changes: NumPy's costs ~50 µs
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(stash)


# ----- sequential models -----
def checkpoint_sequential(functions: Sequence[Callable], segments: int | CheckpointPlan | None,
                          input: Any, *, preserve_rng_state: bool = True,
                          memory_budget: int | None = None, use_reentrant: bool | None = None) -> Any:
    """Run ``functions`` in order, checkpointing segments of them (PyTorch's argument order).

    ``segments=None`` splits into about √N segments of near-equal length; as in PyTorch the last
    segment runs without checkpointing. With ``memory_budget`` (bytes) the placement comes from
    ``plan_checkpoints`` (measured on the first call, then cached). ``use_reentrant`` is accepted
    for PyTorch compatibility and changes nothing.

    >>> import chainrule as cr
    >>> layers = [cr.tanh] * 9
    >>> x = cr.tensor([0.3], requires_grad=True)
    >>> cr.checkpoint_sequential(layers, 3, x).sum().backward(); x.grad.shape
    (1,)
    """
    fns = _as_list(functions)
    if memory_budget is not None:
        plan = plan_checkpoints(fns, input, memory_budget)
    elif isinstance(segments, CheckpointPlan):
        plan = segments
    else:
        plan = CheckpointPlan.uniform(len(fns), segments)
    if plan.bounds and plan.bounds[-1][1] != len(fns):
        raise ValueError(f"checkpoint_sequential: the plan covers {plan.bounds[-1][1]} layers but "
                         f"{len(fns)} functions were given; make the plan for these functions")
    x = input
    for (a, b), ckpt in zip(plan.bounds, plan.checkpointed):
        run = _Segment(fns[a:b])
        x = checkpoint(run, x, preserve_rng_state=preserve_rng_state) if ckpt else run(x)
    return x


class _Segment:
    def __init__(self, fns: list) -> None:
        self.fns = fns

    def __call__(self, x: Any) -> Any:
        for f in self.fns:
            x = f(x)
        return x


def _as_list(functions: Any) -> list:
    if callable(getattr(functions, "children", None)):
        return list(functions.children())
    try:
        fns = list(functions)
    except TypeError:
        raise TypeError(f"checkpoint_sequential: functions must be a list of callables, got "
                        f"{type(functions).__name__}") from None
    if not fns or not all(callable(f) for f in fns):
        raise TypeError("checkpoint_sequential: functions must be a non-empty list of callables")
    return fns


@dataclass
class CheckpointPlan:
    """Where ``checkpoint_sequential`` cuts: segment bounds and which segments are checkpointed.

    Plans from ``plan_checkpoints`` also carry the measured per-layer figures and the prediction.
    """

    bounds: list[tuple[int, int]]
    checkpointed: list[bool]
    budget: int | None = None
    predicted_peak: int | None = None
    unplanned_peak: int | None = None       # all activations kept (no checkpointing)
    recompute_flops: int | None = None
    forward_flops: int | None = None
    layer_bytes: list[int] = field(default_factory=list)
    layer_flops: list[int] = field(default_factory=list)
    input_bytes: list[int] = field(default_factory=list)

    @classmethod
    def uniform(cls, n: int, segments: int | None) -> CheckpointPlan:
        """``segments`` near-equal segments of ``n`` layers (None: about √n); the last runs plainly."""
        s = max(1, round(math.sqrt(n))) if segments is None else segments
        if not isinstance(s, (int, np.integer)) or not 1 <= s <= n:
            raise ValueError(f"checkpoint_sequential: segments must be an integer between 1 and the "
                             f"number of functions ({n}), got {segments!r}")
        edges = [round(i * n / s) for i in range(s + 1)]
        bounds = [(edges[i], edges[i + 1]) for i in range(s)]
        return cls(bounds, [True] * (s - 1) + [False])

    @property
    def segment_lengths(self) -> list[int]:
        """The number of layers in each segment."""
        return [b - a for a, b in self.bounds]

    def __str__(self) -> str:
        ck = ", ".join(f"{a}-{b - 1}" for (a, b), c in zip(self.bounds, self.checkpointed) if c)
        plain = ", ".join(f"{a}-{b - 1}" for (a, b), c in zip(self.bounds, self.checkpointed) if not c)
        text = (f"checkpoint plan for {self.bounds[-1][1]} layers: {len(self.bounds)} segments; "
                f"checkpointed layers [{ck or 'none'}], kept layers [{plain or 'none'}]")
        if self.predicted_peak is not None:
            text += (f"; budget {self.budget:,} B, predicted peak {self.predicted_peak:,} B (without "
                     f"checkpointing {self.unplanned_peak:,} B); recomputes {self.recompute_flops:,} "
                     f"FLOPs ({100 * self.recompute_flops / max(self.forward_flops or 1, 1):.0f}% of "
                     f"a forward)")
        return text


_PLANS: dict = {}


def plan_checkpoints(functions: Sequence[Callable], input: Any, memory_budget: int) -> CheckpointPlan:
    """Pick segments and which to checkpoint so the predicted peak saved bytes fit ``memory_budget``,
    with the least recomputation. Measures every layer once on ``input`` (cached per functions/shape).

    The prediction is conservative (arrays shared by neighbouring layers are counted twice).

    >>> import chainrule as cr
    >>> layers = [cr.tanh] * 8
    >>> x = cr.ones((100,), requires_grad=True)            # tanh saves its 400-byte output
    >>> plan = cr.plan_checkpoints(layers, x, memory_budget=2000)
    >>> plan.predicted_peak <= 2000 < plan.unplanned_peak
    True
    """
    fns = _as_list(functions)
    key = (tuple(id(f) for f in fns), getattr(input, "shape", None), str(getattr(input, "dtype", "")),
           int(memory_budget))
    hit = _PLANS.get(key)
    if hit is not None:
        return hit[1]
    layer_bytes, layer_flops, input_bytes = _measure(fns, input)
    plan = _solve(layer_bytes, layer_flops, input_bytes, int(memory_budget))
    if len(_PLANS) >= 32:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[key] = (fns, plan)          # keeping fns keeps their ids valid
    log.info("%s", plan)
    return plan


def _measure(fns: list, input: Any) -> tuple[list, list, list]:
    """Per layer: bytes its graph saves, its forward FLOPs, and its input's bytes (one pass)."""
    layer_bytes, layer_flops, input_bytes = [], [], []
    rng = get_rng_state()
    x = input
    try:
        for f in fns:
            if isinstance(x, Tensor):
                x = x.detach()
                x.requires_grad = x.dtype.kind in "fcV"
            input_bytes.append(int(x.nbytes) if isinstance(x, Tensor) else 0)
            with enable_grad(), profile() as p:
                out = f(x)
            layer_bytes.append(p.saved_bytes)
            layer_flops.append(p.forward_flops)
            x = out
    finally:
        set_rng_state(rng)
    return layer_bytes, layer_flops, input_bytes


def _peak(bounds: list, ckpt: list, layer_bytes: list, input_bytes: list) -> int:
    """Predicted peak: everything kept at the end of forward, or a recomputed segment on top of
    what the segments before it keep (backward runs the segments last to first)."""
    kept, peak = 0, 0
    for (a, b), c in zip(bounds, ckpt):
        full = sum(layer_bytes[a:b])
        if c:
            peak = max(peak, kept + input_bytes[a] + full)
            kept += input_bytes[a]
        else:
            kept += full
    return max(peak, kept)


def _solve(layer_bytes: list, layer_flops: list, input_bytes: list, budget: int) -> CheckpointPlan:
    n = len(layer_bytes)
    pre_b = np.concatenate([[0], np.cumsum(layer_bytes)]).astype(np.int64).tolist()
    pre_f = np.concatenate([[0], np.cumsum(layer_flops)]).astype(np.int64).tolist()
    # frontier[i]: Pareto-optimal (kept bytes, recompute FLOPs, segments) for a prefix of i layers
    frontier: list[list] = [[] for _ in range(n + 1)]
    frontier[0] = [(0, 0, ())]
    for i in range(n):
        if not frontier[i]:
            continue
        for kept, flops, segs in frontier[i]:
            for k in range(i + 1, n + 1):
                full = pre_b[k] - pre_b[i]
                if kept + full <= budget:
                    frontier[k].append((kept + full, flops, segs + ((i, k, False),)))
                if kept + input_bytes[i] + full <= budget:
                    frontier[k].append((kept + input_bytes[i], flops + pre_f[k] - pre_f[i],
                                        segs + ((i, k, True),)))
                elif kept + full > budget:
                    break            # longer segments only need more
        for k in range(i + 1, n + 1):
            frontier[k] = _pareto(frontier[k])
    if not frontier[n]:
        raise ValueError(f"plan_checkpoints: no checkpoint placement fits memory_budget={budget:,} "
                         f"bytes; the smallest feasible budget for these layers is about "
                         f"{_min_budget(layer_bytes, input_bytes):,} bytes (the layers save "
                         f"{sum(layer_bytes):,} bytes without checkpointing)")
    kept, flops, segs = min(frontier[n], key=lambda e: (e[1], len(e[2]), e[0]))
    bounds = [(a, b) for a, b, _ in segs]
    ckpt = [c for _, _, c in segs]
    return CheckpointPlan(bounds, ckpt, budget, _peak(bounds, ckpt, layer_bytes, input_bytes),
                          sum(layer_bytes), flops, sum(layer_flops), layer_bytes, layer_flops,
                          input_bytes)


def _pareto(entries: list) -> list:
    """Keep entries not beaten on both kept bytes and recompute FLOPs (fewer segments on ties)."""
    best: list = []
    for e in sorted(entries, key=lambda e: (e[0], e[1], len(e[2]))):
        if not best or e[1] < best[-1][1]:
            best.append(e)
    return best


def _min_budget(layer_bytes: list, input_bytes: list) -> int:
    """Smallest budget any placement fits (binary search over a feasibility pass)."""
    n = len(layer_bytes)

    def feasible(budget: int) -> bool:
        least = [0] + [None] * n          # least kept bytes for each prefix (feasibility is monotone)
        for i in range(n):
            if least[i] is None:
                continue
            full = 0
            for k in range(i + 1, n + 1):
                full += layer_bytes[k - 1]
                for kept, ok in ((least[i] + full, least[i] + full <= budget),
                                 (least[i] + input_bytes[i], least[i] + input_bytes[i] + full <= budget)):
                    if ok and (least[k] is None or kept < least[k]):
                        least[k] = kept
        return least[n] is not None

    lo, hi = 0, sum(layer_bytes) + sum(input_bytes)
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
