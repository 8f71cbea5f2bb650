"""Tour sections for memory: activation bytes with and without no_grad, checkpointing's trade-off."""
from __future__ import annotations

import math

import numpy as np

import chainrule as cr
from chainrule.tour._sections import Context, section
from chainrule.utils.timing import describe, interleaved_medians


def _mlp(depth: int, width: int, batch: int) -> tuple[list, cr.Tensor]:
    rng = np.random.default_rng(0)
    ws = [cr.tensor((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
                    requires_grad=True) for _ in range(depth)]
    layers = [lambda h, w=w: cr.relu(h @ w) for w in ws]
    return layers, cr.tensor(rng.standard_normal((batch, width)).astype(np.float32))


@section("activations", "Activation memory with and without no_grad",
         "reverse mode keeps activations until backward; no_grad keeps none")
def activation_memory(ctx: Context) -> None:
    depth, width, batch = (8, 64, 64) if ctx.fast else (16, 256, 256)
    layers, x = _mlp(depth, width, batch)
    for mode in ("grad", "no_grad"):
        with cr.profile() as p, cr.set_grad_enabled(mode == "grad"):
            h = x
            for f in layers:
                h = f(h)
            live = p.saved_bytes
        what = f" ({depth} layers x (input + pre-activation + weight))" if mode == "grad" else ""
        ctx.say(f"{mode:>8}: forward {p.forward_flops / 1e6:7.1f} MFLOP, saved for backward "
                f"{live / 1e6:6.2f} MB{what}")
    with cr.profile() as p:
        h = x
        for f in layers:
            h = f(h)
        h.sum().backward()
    ctx.say(f"after backward: saved {p.saved_bytes} B live (peak {p.peak_saved_bytes / 1e6:.2f} MB); "
            f"backward/forward FLOPs = {p.backward_flops / p.forward_flops:.2f}")


@section("checkpointing", "Checkpointing's memory/time trade-off",
         "store about sqrt(L) checkpoints, recompute the rest: memory ~2 sqrt(L) layers, ~1 extra forward")
def checkpointing(ctx: Context) -> None:
    depth, width, batch = (36, 32, 32) if ctx.fast else (64, 128, 256)
    layers, x = _mlp(depth, width, batch)

    def step(segments: int | None) -> None:
        h = x
        if segments is None:
            for f in layers:
                h = f(h)
        else:
            h = cr.checkpoint_sequential(layers, segments, x)
        h.sum().backward()

    configs = (None, depth // 2, round(math.sqrt(depth)), 2)
    profiles = []
    for segments in configs:                  # one profiled step each, also the timing's warm-up
        with cr.profile() as p:
            step(segments)
        profiles.append(p)
    times = interleaved_medians({s: lambda s=s: step(s) for s in configs}, ctx.rounds, warmup=0)
    base_peak, base_time = profiles[0].peak_saved_bytes, times[None]
    ctx.say(f"step time: forward + backward, {describe(ctx.rounds)}")
    for segments, p in zip(configs, profiles):
        label = "no checkpointing" if segments is None else f"{segments:3d} segments"
        ctx.say(f"{label:>16}: peak saved {p.peak_saved_bytes / 1e6:6.2f} MB "
                f"({p.peak_saved_bytes / base_peak * depth:5.1f} layers' worth), counted FLOPs "
                f"{p.total_flops / 1e6:7.1f} M, step {times[segments] * 1e3:6.1f} ms "
                f"({times[segments] / base_time:.2f}x)")
    budget = base_peak // 4
    plan = cr.plan_checkpoints(layers, x, budget)
    ctx.say(f"planner, budget {budget / 1e6:.2f} MB: {plan}")
