"""Gradient checkpointing: the seed's formula table, then the same trade-off measured in chainrule.

seeds/002 estimates activation memory for 96 layers of 300 MB when checkpointing every k layers
(L/k checkpoints kept plus one k-layer segment recomputed). Here a real 96-layer MLP is run with
``cr.checkpoint_sequential`` and ``cr.profile`` measures the peak bytes saved for backward; the step
time is the median of forward+backward passes interleaved over the configurations (each config in
turn, every round), and the gradients are compared with the un-checkpointed ones.

    python examples/seed_checkpointing.py               # batch 256, width 128, float32 and float64
    python examples/seed_checkpointing.py --quick       # small layers (used by the tests)
    python examples/seed_checkpointing.py --plot out.png
"""
from __future__ import annotations

import argparse
import math

import numpy as np

import chainrule as cr
from chainrule.utils.timing import describe, interleaved_medians

LAYERS = 96


def seed_table() -> None:
    # verbatim from seeds/002 (section "Activation memory"): prints 28.8 / 8.4 / 5.9 / 8.4 GB
    layers, act_mb = 96, 300.0          # layers and activation memory per layer for one microbatch, MB
    for k in (1, 4, int(math.sqrt(layers)), 24):
        stored = layers if k == 1 else layers / k + k   # checkpoints kept plus one segment recomputed
        extra = 0 if k == 1 else 1       # roughly one extra forward pass when recomputing
        print(f"checkpoint every {k:2d} layers: about {stored * act_mb / 1000:5.1f} GB of activations, "
              f"extra forward passes {extra}")


class Dense:
    """relu(h @ w + b): one layer; saves its input and pre-activation for backward."""

    def __init__(self, w: cr.Tensor, b: cr.Tensor) -> None:
        self.w, self.b = w, b

    def __call__(self, h: cr.Tensor) -> cr.Tensor:
        return cr.relu(h @ self.w + self.b)


def make_layers(width: int, dtype: type, seed: int = 0) -> list[Dense]:
    rng = np.random.default_rng(seed)
    return [Dense(cr.tensor((rng.standard_normal((width, width)) * np.sqrt(2.0 / width)).astype(dtype),
                            requires_grad=True),
                  cr.tensor(np.full(width, 0.01, dtype), requires_grad=True)) for _ in range(LAYERS)]


def params_of(layers: list[Dense]) -> list[cr.Tensor]:
    return [p for layer in layers for p in (layer.w, layer.b)]


def run(layers: list, x: cr.Tensor, segments: int | None) -> cr.Tensor:
    """Forward + backward; ``segments=None`` means no checkpointing."""
    h = x
    if segments is None:
        for f in layers:
            h = f(h)
    else:
        h = cr.checkpoint_sequential(layers, segments, h)
    loss = (h * h).mean()
    loss.backward()
    return loss


def step(layers: list, x: cr.Tensor, segments: int | None) -> None:
    """One training step's autodiff work: clear the gradients, forward, backward."""
    for p in params_of(layers):
        p.grad = None
    run(layers, x, segments)


def grads(layers: list, x: cr.Tensor, segments: int | None) -> list:
    step(layers, x, segments)
    return [p.grad.data.copy() for p in params_of(layers)]


def measure(batch: int, width: int, rounds: int, dtype: type = np.float32) -> list[dict]:
    """One row per configuration: memory, FLOPs, gradient difference; step times if ``rounds``."""
    layers = make_layers(width, dtype)
    x = cr.tensor(np.random.default_rng(1).standard_normal((batch, width)).astype(dtype))
    configs = [("1", None), ("4", LAYERS // 4), (f"{LAYERS // round(math.sqrt(LAYERS))}/"
                                                 f"{math.ceil(LAYERS / round(math.sqrt(LAYERS)))}",
                                                 round(math.sqrt(LAYERS))), ("24", LAYERS // 24)]
    reference = grads(layers, x, None)
    rows = []
    for label, segments in configs:
        with cr.profile() as p:
            run(layers, x, segments)
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(reference, grads(layers, x, segments)))
        rows.append({"every": label, "segments": segments, "peak": p.peak_saved_bytes,
                     "diff": diff, "bwd_flops": p.backward_flops, "fwd_flops": p.forward_flops})
    for r in rows:
        r["layers_worth"] = r["peak"] / (rows[0]["peak"] / LAYERS)
    if rounds:                              # the runs above were the warm-up
        times = interleaved_medians({r["every"]: lambda s=r["segments"]: step(layers, x, s)
                                     for r in rows}, rounds, warmup=0)
        for r in rows:
            r["time"] = times[r["every"]]
            r["time_ratio"] = r["time"] / rows[0]["time"]
    return rows


def report(rows: list[dict], dtype_name: str, rounds: int) -> None:
    base = rows[0]
    print(f"\nmeasured ({dtype_name}): peak bytes saved for backward, step time ({describe(rounds)}), "
          f"max |grad diff|")
    for r in rows:
        seg = "no checkpointing" if r["segments"] is None else f"{r['segments']} segments"
        flops = (r['fwd_flops'] + r['bwd_flops']) / (base['fwd_flops'] + base['bwd_flops'])
        print(f"checkpoint every {r['every']:>4} layers ({seg:>16}): peak {r['peak'] / 1e6:8.2f} MB "
              f"= {r['layers_worth']:5.1f} layers' worth, step {r['time'] * 1e3:7.1f} ms "
              f"({r['time_ratio']:.2f}x), counted FLOPs x{flops:.2f}, "
              f"max |grad diff| {r['diff']:.1e}")
    sq = rows[2]
    bound = 2.5 * math.sqrt(LAYERS)
    print(f"sqrt(L) segments: peak {sq['layers_worth']:.1f} layers' worth <= 2.5*sqrt(L) = {bound:.1f}: "
          f"{'OK' if sq['layers_worth'] <= bound else 'FAILED'}; memory ratio {base['peak'] / sq['peak']:.1f}x "
          f"smaller; time ratio {sq['time_ratio']:.2f} (target <= 1.5)")


def plot(rows: list[dict], path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib (pip install 'chainrule[plot]'); skipped")
        return
    seg_len = [1 if r["segments"] is None else LAYERS / r["segments"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    a1.plot(seg_len, [r["peak"] / 1e6 for r in rows], "o-", label="measured")
    a1.plot(seg_len, [rows[0]["peak"] / 1e6 * (LAYERS if k == 1 else LAYERS / k + k) / LAYERS
                      for k in seg_len], "s--", label="seed formula L/k + k")
    a1.set(xlabel="segment length k (layers)", ylabel="peak saved MB", title="activation memory")
    a1.legend()
    a2.plot(seg_len, [r["time_ratio"] for r in rows], "o-")
    a2.set(xlabel="segment length k (layers)", ylabel="step time / plain", title="step time")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small layers, fewer rounds")
    parser.add_argument("--plot", metavar="PNG", help="draw memory and time against segment length")
    args = parser.parse_args(argv)
    batch, width, rounds = (32, 32, 5) if args.quick else (256, 128, 7)
    print("seed formula (96 layers, 300 MB of activations per layer):")
    seed_table()
    print(f"\nchainrule, a real {LAYERS}-layer MLP (relu(h @ W + b)), batch {batch}, width {width}")
    rows32 = measure(batch, width, rounds, np.float32)
    report(rows32, "float32", rounds)
    rows64 = measure(batch, width, 0, np.float64)
    exact = all(r["diff"] == 0.0 for r in rows64)
    print(f"float32 gradients: max |diff| {max(r['diff'] for r in rows32):.1e} (<= 1e-6: "
          f"{'OK' if max(r['diff'] for r in rows32) <= 1e-6 else 'FAILED'}); float64 gradients "
          f"exactly equal: {'OK' if exact else 'FAILED'}")
    if args.plot:
        plot(rows32, args.plot)
    return {"float32": rows32, "float64": rows64}


if __name__ == "__main__":
    main()
