"""The benchmark figures as SVG plots (``python tools/bench.py --plots DIR [--quick] [--plots-only]``).

Two kinds of figure. From a run's results (or, with ``--plots-only``, the record
``benchmarks/results.json``): the per-op overhead of the elementwise chain and the MLP step times.
From sweeps measured here and now (functions that return their numbers, so a test can check them):
the jacobian's forward/reverse crossover, checkpointing's memory against time, the transformer's
saved bytes against batch, sequence length and depth, and the fp32/bf16/fp16 loss curves.

Nothing plotted is typed in: every number is a measurement of this run or of the record. The SVGs
are reproducible byte for byte given the same numbers (fixed ``svg.hashsalt``, no date), and text
stays text (``svg.fonttype = none``) so the titles can be searched and read by screen readers.
"""
from __future__ import annotations

import gc
import importlib
import json
import math
import os
import re
import statistics
import time
from typing import Any, Callable

import numpy as np

import chainrule as cr
from chainrule import data
from chainrule.core.random import manual_seed
from chainrule.train import lm
from chainrule.train.figures import forward_saved_bytes
from chainrule.train.transformer import GPT, GPTConfig
from chainrule.utils.timing import interleaved_samples

FIGURES = ("overhead", "mlp_step", "jacobian_crossover", "checkpoint_tradeoff", "transformer_saved_bytes",
           "loss_curves")
WIDTH_IN = 7.3                 # 525 pt: about 700 px at 96 dpi
COLORS = {"chainrule": "#1f77b4", "numpy": "#7f7f7f", "torch": "#ee4c2c", "autograd": "#2ca02c",
          "jax": "#9467bd"}


# ----- timing -----
def time_calls(fns: dict[str, Callable[[], Any]], rounds: int, min_sample_s: float) -> dict[str, float]:
    """Median seconds per call of each function: a warm-up, a calibration of how many calls make one
    sample, then ``rounds`` interleaved samples (``chainrule.utils.timing``, as the harness does)."""
    numbers = {}
    for name, fn in fns.items():
        fn()
        t0 = time.perf_counter()
        fn()
        numbers[name] = max(1, int(min_sample_s / max(time.perf_counter() - t0, 1e-7)))

    def batch(fn: Callable[[], Any], n: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(n):
                fn()
        return run
    gc.collect()
    samples = interleaved_samples({k: batch(f, numbers[k]) for k, f in fns.items()}, rounds, warmup=0)
    return {k: statistics.median(s) / numbers[k] for k, s in samples.items()}


def _timing(quick: bool) -> tuple[int, float]:
    return (5, 0.004) if quick else (7, 0.03)


# ----- sweeps -----
def jacobian_sweep(quick: bool = False) -> dict:
    """Seconds of ``cr.jacfwd``, ``cr.jacrev`` and ``cr.jacobian(mode="auto")`` on f(x) = tanh(A x)
    (bench_jacobian's function and data): against n inputs at a fixed m, and against m at a fixed n.
    Forward mode costs one vmapped pass over n, reverse one over m, so they cross near n = m (within
    the sizes where a call's fixed overhead, about 0.2 ms, hides both)."""
    bj = importlib.import_module("bench_jacobian")
    fixed = 16 if quick else 32
    sizes = [4, 16, 64, 256, 1024] if quick else [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    rounds, min_s = _timing(quick)
    out: dict = {"fixed": fixed, "sizes": sizes}
    for axis in ("n", "m"):
        series: dict = {"jacfwd": [], "jacrev": [], "auto": [], "auto_mode": []}
        for size in sizes:
            t, mode = _jacobian_point(bj, *((size, fixed) if axis == "n" else (fixed, size)), rounds, min_s)
            for k in ("jacfwd", "jacrev", "auto"):
                series[k].append(t[k])
            series["auto_mode"].append(mode)
        out["by_" + axis] = series
    return out


def _jacobian_point(bj: Any, n: int, m: int, rounds: int, min_s: float) -> tuple[dict, str]:
    """The three Jacobians' seconds at one (n, m), and the mode auto chose."""
    A, x = bj._data(n, m)
    auto = cr.jacobian(lambda x: cr.tanh(A @ x))
    fwd, rev = cr.jacfwd(lambda x: cr.tanh(A @ x)), cr.jacrev(lambda x: cr.tanh(A @ x))
    t = time_calls({"jacfwd": lambda: fwd(x), "jacrev": lambda: rev(x), "auto": lambda: auto(x)}, rounds, min_s)
    return t, auto.last_mode


def checkpoint_sweep(quick: bool = False) -> dict:
    """Step time and peak saved bytes (``cr.profile``) of bench_checkpoint's deep tanh MLP with
    ``checkpoint_sequential`` in k segments (the divisors of L, and the benchmark's round(sqrt(L))),
    and without checkpointing."""
    bc = importlib.import_module("bench_checkpoint")
    layers = 16 if quick else 96
    root = round(math.sqrt(layers))                    # bench_checkpoint's segment count
    segments = sorted({k for k in range(1, layers + 1) if layers % k == 0} | {root})
    steps = {k: bc._step_fn(layers, k) for k in segments}
    steps[0] = bc._step_fn(layers, None)            # 0: plain
    peaks = {}
    for k, step in steps.items():
        with cr.profile() as p:
            step()
        peaks[k] = p.peak_saved_bytes
    rounds, min_s = _timing(quick)
    times = time_calls({str(k): s for k, s in steps.items()}, rounds + 2, max(min_s, 0.01))
    return {"layers": layers, "width": bc.WIDTH, "batch": bc.BATCH, "segments": segments,
            "time": [times[str(k)] for k in segments], "peak": [peaks[k] for k in segments],
            "plain_time": times["0"], "plain_peak": peaks[0]}


def transformer_bytes_sweep(quick: bool = False) -> dict:
    """Bytes the transformer's graph holds for backward after one forward
    (``train.figures.forward_saved_bytes``, parameters excluded) as batch, n_ctx and n_layer vary
    one at a time around the demo's model (built as ``train.figures.scaling_table`` builds it)."""
    corpus = data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=0)
    if quick:
        base = {"batch": 4, "n_ctx": 16, "n_layer": 2, "d_model": 32, "n_head": 2}
        grid = {"batch": [1, 2, 4, 8], "n_ctx": [4, 8, 16, 32], "n_layer": [1, 2, 4]}
    else:
        base = {"batch": 32, "n_ctx": 64, "n_layer": 4, "d_model": 96, "n_head": 4}
        grid = {"batch": [1, 2, 4, 8, 16, 32], "n_ctx": [8, 16, 32, 64, 128], "n_layer": [1, 2, 4, 8]}
    out: dict = {"base": base}
    for what, values in grid.items():
        measured = []
        for v in values:
            s = dict(base, **{what: v})
            manual_seed(0)
            model = GPT(GPTConfig(len(corpus.vocab), s["n_ctx"], s["d_model"], s["n_head"], s["n_layer"], 0.0))
            x, y = corpus.batch("train", s["batch"], s["n_ctx"], generator=np.random.default_rng(0))
            measured.append(forward_saved_bytes(model, x, y))
        out[what] = {"values": values, "bytes": measured}
    return out


LM_FULL = {"steps": 100, "batch": 16, "n_ctx": 64, "d_model": 96, "n_layer": 4, "n_head": 4, "warmup": 20,
           "eval_every": 25}
LM_QUICK = {"steps": 12, "batch": 4, "n_ctx": 16, "d_model": 32, "n_layer": 1, "n_head": 2, "warmup": 3,
            "eval_every": 6}


def loss_curves(quick: bool = False, precisions: tuple = ("fp32", "bf16", "fp16")) -> dict:
    """Per-step training loss and validation loss of the transformer demo (``train.lm.train``, the
    code behind ``python -m chainrule train --model transformer --precision P``), one run per
    precision from the same initialisation and batches. Smaller than the docs' 200-step runs so the
    three fit in about two minutes on two cores."""
    c = LM_QUICK if quick else LM_FULL
    out: dict = {"config": c}
    for prec in precisions:
        args = lm.parser().parse_args([f"--{k.replace('_', '-')}={c[k]}" for k in
                                       ("steps", "n_ctx", "d_model", "n_layer", "n_head", "warmup", "eval_every")]
                                      + [f"--batch-size={c['batch']}", f"--precision={prec}", "--quiet"])
        manual_seed(args.seed)                        # as lm.main: seed, corpus, model
        corpus = data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=args.seed)
        model = GPT(GPTConfig(len(corpus.vocab), args.n_ctx, args.d_model, args.n_head, args.n_layer, args.dropout))
        hist = lm.train(model, corpus, args, log=lambda s: None)
        hist.pop("trainer", None)
        out[prec] = {"step": hist["step"], "train_loss": hist["train_loss"], "val_step": hist["val_step"],
                     "val_loss": hist["val_loss"], "median_step_s": float(np.median(hist["step_seconds"]))}
    return out


# ----- the run's (or the record's) timings -----
def timings_from_results(results: list) -> dict:
    """``{case key: {"title", "unit", "per", "rows": {row: seconds}, "source": "this run"}}``."""
    return {r.case.key: {"title": r.case.title, "unit": r.case.unit, "per": r.case.per,
                         "rows": {row.name: row.median for row in r.rows}, "source": "this run"} for r in results}


def timings_from_record(record: dict, keys: tuple = ("elementwise_chain", "mlp_step", "deep_mlp")) -> dict:
    """The same from the record (full runs only, on the machine it names), titles and units from the
    full-size cases."""
    out = {}
    for mod in ("bench_elementwise", "bench_mlp_step", "bench_deep_mlp"):
        for case in importlib.import_module(mod).cases(False):
            if case.key in keys and case.key in record:
                out[case.key] = {"title": case.title, "unit": case.unit, "per": case.per,
                                 "rows": dict(record[case.key]), "source": "benchmarks/results.json",
                                 "machine": record.get("_machine", {})}
    return out


def machine_line(info: dict, threads: str = "") -> str:
    """One short line naming the machine and the versions, for a figure's caption."""
    libs = ", ".join(f"{k} {info[k]}" for k in ("numpy", "chainrule", "torch", "jax") if k in info)
    line = f"{info.get('cpu', 'unknown CPU')}, {info.get('cores', '?')} cores; {libs}"
    return line + ("; " + re.sub(r"\s+\(.*?\)", "", threads.split(";")[0]) if threads else "")


# ----- drawing -----
def _plt() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.hashsalt": "chainrule-bench", "svg.fonttype": "none", "font.size": 9,
                         "axes.titlesize": 10, "figure.titlesize": 11, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def _save(fig: Any, path: str, caption: str) -> str:
    """Caption at the foot (machine; source), tight layout, SVG without a date."""
    lines = caption.count("\n") + 1
    fig.text(0.01, 0.005, caption, fontsize=7, color="#555555", ha="left", va="bottom", linespacing=1.3)
    fig.tight_layout(rect=(0, 0.14 * lines / fig.get_figheight(), 1, 1))
    fig.savefig(path, format="svg", metadata={"Date": None})
    _plt().close(fig)
    return path


def _plain_log(ax: Any, axes: str = "xy", subs: tuple = (1.0, 2.0, 5.0)) -> None:
    """Log axes labelled 1, 2, 5, 10, 20, ... (not 10^0), no labels on the minor ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    for name in axes:
        axis = ax.xaxis if name == "x" else ax.yaxis
        axis.set_major_locator(LogLocator(subs=subs))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def _library(row: str) -> str:
    low = row.lower()
    for key, lib in (("pytorch", "torch"), ("torch", "torch"), ("autograd", "autograd"), ("jax", "jax"),
                     ("numpy", "numpy")):
        if key in low:
            return lib
    return "chainrule"


def _bars(ax: Any, case: dict) -> None:
    scale = (1e3 if case["unit"] == "ms" else 1e6) / case["per"]
    names = sorted(case["rows"], key=lambda n: (_library(n) != "chainrule", _library(n) != "numpy"))
    values = [case["rows"][n] * scale for n in names]
    ys = range(len(names))
    log = max(values) > 20 * min(values)           # e.g. JAX eager against JAX jit: a log axis
    left = min(values) / 3 if log else 0.0
    ax.barh(ys, [v - left for v in values], left=left, color=[COLORS[_library(n)] for n in names])
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    for y, v in zip(ys, values):
        ax.text(v, y, f" {v:.3g}", va="center", fontsize=8)
    unit = case["unit"].replace("us", "µs")
    label = f"time per step ({unit})" if case["per"] == 1 else f"time per op ({unit})"
    if log:
        ax.set_xscale("log")
        _plain_log(ax, "x", subs=(1.0,) if max(values) > 300 * min(values) else (1.0, 2.0, 5.0))
        ax.set_xlim(left, max(values) * 3)
    else:
        ax.set_xlim(0, max(values) * 1.18)
    ax.set_xlabel(label + (", log scale" if log else "") + "; lower is better")


def plot_overhead(case: dict, caption: str, path: str) -> str:
    """Bar chart of the elementwise chain's per-op time, chainrule and every row of the results."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.5 * len(case["rows"]) + 1.6))
    _bars(ax, case)
    ax.set_title(f"Per-op overhead: {case['title']}")
    return _save(fig, path, f"{caption}\nsource: {case['source']}")


def plot_mlp_step(timings: dict, caption: str, path: str) -> str:
    """MLP step time, every row of the MLP case and of the deep MLP case."""
    plt = _plt()
    keys = [k for k in ("mlp_step", "deep_mlp") if k in timings]
    rows = max(len(timings[k]["rows"]) for k in keys)
    fig, axes = plt.subplots(len(keys), 1, figsize=(WIDTH_IN, len(keys) * (0.45 * rows + 1.2) + 0.6), squeeze=False)
    for ax, k in zip(axes[:, 0], keys):
        _bars(ax, timings[k])
        ax.set_title(("MLP step: " if k == "mlp_step" else "deep MLP step: ") + timings[k]["title"])
    return _save(fig, path, f"{caption}\nsource: {timings[keys[0]]['source']}")


def plot_jacobian(sweep: dict, caption: str, path: str) -> str:
    """Two log-log panels: time against n at fixed m, and against m at fixed n."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.4), sharey=True)
    xs = sweep["sizes"]
    for ax, axis in zip(axes, ("n", "m")):
        s = sweep["by_" + axis]
        ax.loglog(xs, [t * 1e3 for t in s["jacfwd"]], "o-", color="#ff7f0e", label="cr.jacfwd (forward)")
        ax.loglog(xs, [t * 1e3 for t in s["jacrev"]], "s-", color="#2ca02c", label="cr.jacrev (reverse)")
        ax.loglog(xs, [t * 1e3 for t in s["auto"]], "k--", lw=1, marker="x", label='cr.jacobian(mode="auto")')
        ax.axvline(sweep["fixed"], color="gray", lw=0.8, ls=":", label="n = m")
        other = "m" if axis == "n" else "n"
        ax.set_title(f"{'wide' if axis == 'n' else 'tall'}: {other} = {sweep['fixed']} fixed")
        ax.set_xlabel(f"{axis} ({'inputs' if axis == 'n' else 'outputs'})")
        cross = crossover(xs, *((s["jacfwd"], s["jacrev"]) if axis == "n" else (s["jacrev"], s["jacfwd"])))
        if cross is not None:
            ax.axvline(cross, color="#d62728", lw=0.8, ls="--", label=f"measured crossover ≈ {cross:.0f}")
        _plain_log(ax, "y")
        _plain_log(ax, "x", subs=(1.0,))
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("time per Jacobian (ms)")
    fig.suptitle("Jacobian of tanh(A x), float64: forward vs reverse mode, and auto's choice")
    return _save(fig, path, caption)


def plot_checkpoint(sweep: dict, caption: str, path: str) -> str:
    """Peak saved bytes against step time, one point per segment count k, and the plain step."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.8))
    t = [v * 1e3 for v in sweep["time"]]
    mib = [v / 2**20 for v in sweep["peak"]]
    ax.plot(t, mib, "o-", color=COLORS["chainrule"], lw=0.8, label="checkpoint_sequential, k segments")
    root = round(math.sqrt(sweep["layers"]))
    for k, x, y in zip(sweep["segments"], t, mib):
        ax.annotate(f"k={k}" + (" (≈√L)" if k == root else ""), (x, y), textcoords="offset points",
                    xytext=(4, 3), fontsize=7)
    ax.plot([sweep["plain_time"] * 1e3], [sweep["plain_peak"] / 2**20], "D", color="#d62728", ms=7,
            label="no checkpointing")
    ax.set_yscale("log")
    _plain_log(ax, "y")
    ax.set_xlabel("step time, forward + backward (ms)")
    ax.set_ylabel("peak saved-for-backward memory (MiB, log)")
    ax.set_title(f"Gradient checkpointing: memory vs time ({sweep['layers']} tanh layers x {sweep['width']}, "
                 f"batch {sweep['batch']}, float32)")
    ax.legend(fontsize=8)
    return _save(fig, path, caption)


def _fit(xs: list, ys: list, quadratic: bool) -> tuple[np.ndarray, str]:
    """Least-squares a + b·x (or a·x + b·x², bytes of T tokens with T×T attention) through the points."""
    x = np.asarray(xs, dtype=float)
    cols = [x, x * x] if quadratic else [np.ones_like(x), x]
    coef = np.linalg.lstsq(np.stack(cols, 1), np.asarray(ys, dtype=float), rcond=None)[0]
    fine = np.linspace(x.min(), x.max(), 50)
    return fine, (coef[0] * fine + coef[1] * fine ** 2 if quadratic else coef[0] + coef[1] * fine)


def plot_transformer_bytes(sweep: dict, caption: str, path: str) -> str:
    """Three panels: saved bytes against batch, n_ctx and n_layer, measured, with a fitted line."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(WIDTH_IN, 3.2))
    base = sweep["base"]
    labels = {"batch": "batch (sequences)", "n_ctx": "sequence length n_ctx (tokens)",
              "n_layer": "depth n_layer (blocks)"}
    fits = {"batch": "fit a + b·batch", "n_ctx": "fit a·T + b·T²", "n_layer": "fit a + b·L"}
    for ax, what in zip(axes, ("batch", "n_ctx", "n_layer")):
        xs, ys = sweep[what]["values"], sweep[what]["bytes"]
        ax.plot(xs, [y / 2**20 for y in ys], "o", color=COLORS["chainrule"], label="measured")
        fx, fy = _fit(xs, ys, what == "n_ctx")
        ax.plot(fx, fy / 2**20, "-", color="gray", lw=1, label=fits[what])
        ax.set_xticks([v for v in xs if 8 * v >= xs[-1]])
        ax.set_xlim(0, xs[-1] * 1.05)
        ax.set_ylim(0, max(ys) / 2**20 * 1.25)
        ax.set_xlabel(labels[what])
        ax.legend(fontsize=7, loc="upper left")
        others = ", ".join(f"{k} {v}" for k, v in base.items() if k != what and k in labels)
        ax.set_title(f"{others}\nlast doubling: ×{ys[-1] / ys[-2]:.2f}", fontsize=8)
    axes[0].set_ylabel("saved for backward (MiB)")
    fig.suptitle(f"Transformer saved-for-backward bytes after one forward (d_model {base['d_model']}, "
                 f"{base['n_head']} heads)")
    return _save(fig, path, caption)


def plot_loss_curves(curves: dict, caption: str, path: str) -> str:
    """Per-step training loss of each precision, and its validation points."""
    plt = _plt()
    c = curves["config"]
    fig, (ax, dx) = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.6), gridspec_kw={"width_ratios": (3, 2)})
    styles = {"fp32": ("#1f77b4", "-"), "bf16": ("#ff7f0e", "--"), "fp16": ("#2ca02c", ":")}
    ref = curves.get("fp32")
    for prec in ("fp32", "bf16", "fp16"):
        if prec not in curves:
            continue
        h, (color, ls) = curves[prec], styles[prec]
        ax.plot(h["step"], h["train_loss"], ls, color=color, lw=1.2,
                label=f"{prec} ({h['median_step_s'] * 1e3:.0f} ms/step), val {h['val_loss'][-1]:.4f}")
        ax.plot(h["val_step"], h["val_loss"], "o", color=color, ms=4)
        if ref is not None and prec != "fp32":
            dx.plot(h["step"], np.subtract(h["train_loss"], ref["train_loss"]), ls, color=color, lw=1,
                    label=f"{prec} − fp32")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title("train loss per step; dots: validation")
    ax.legend(fontsize=7)
    dx.axhline(0, color="gray", lw=0.8)
    dx.set_xlabel("optimizer step")
    dx.set_ylabel("train loss difference (nats)")
    dx.set_title("difference from fp32")
    dx.legend(fontsize=7)
    fig.suptitle(f"Training loss fp32 / bf16 / fp16: GPT of {c['n_layer']} blocks, d_model {c['d_model']}, "
                 f"batch {c['batch']} x {c['n_ctx']}, {c['steps']} steps")
    return _save(fig, path, caption)


def write_all(out_dir: str, quick: bool, timings: dict, info: dict, threads: str = "",
              log: Callable[[str], None] = print, only: tuple = FIGURES) -> dict:
    """Measure the sweeps (on this machine, ``info``), write every figure of ``only`` into ``out_dir``
    and the numbers plotted as ``figures.json``; return ``{"paths": {...}, "data": {name: numbers}}``."""
    data: dict = {}
    if "overhead" in only and "elementwise_chain" in timings:
        data["overhead"] = timings["elementwise_chain"]
    if "mlp_step" in only and ("mlp_step" in timings or "deep_mlp" in timings):
        data["mlp_step"] = {k: timings[k] for k in ("mlp_step", "deep_mlp") if k in timings}
    for name in FIGURES[2:]:
        if name in only:
            log(f"plots: measuring {name} ...")
            t0 = time.perf_counter()
            data[name] = SWEEPS[name](quick)
            log(f"plots: {name} took {time.perf_counter() - t0:.1f} s")
    saved = {"machine": info, "threads": threads, "quick": quick, "figures": data}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "figures.json"), "w") as f:     # the numbers plotted, to read or redraw
        json.dump(saved, f, indent=1, sort_keys=True)
    return {"paths": draw_all(out_dir, saved), "data": data}


def draw_all(out_dir: str, saved: dict) -> dict:
    """Draw the figures of ``saved`` (``write_all``'s ``figures.json``) into ``out_dir``: restyling a
    figure does not need the 2-minute measurement again (``draw_all(d, json.load(open(d + "/figures.json")))``)."""
    caption = machine_line(saved["machine"], saved["threads"])
    caption += "; quick (smoke) sizes, not a measurement" if saved["quick"] else ""

    def bar_caption(case: dict) -> str:       # the record: full runs, maybe on another machine
        return caption if case["source"] == "this run" else machine_line(case.get("machine") or {})
    paths = {}
    for name, numbers in saved["figures"].items():
        path = os.path.join(out_dir, name + ".svg")
        if name == "overhead":
            paths[name] = plot_overhead(numbers, bar_caption(numbers), path)
        elif name == "mlp_step":
            paths[name] = plot_mlp_step(numbers, bar_caption(next(iter(numbers.values()))), path)
        else:
            paths[name] = DRAW[name](numbers, caption, path)
    return paths


def crossover(sizes: list, slow: list, fast: list) -> float | None:
    """Where ``fast`` goes below ``slow`` for good: the geometric mean of the last size where it is
    not lower and the next (None when it does not end lower)."""
    for i in range(len(sizes)):
        if all(f < s for f, s in zip(fast[i:], slow[i:])):
            return sizes[0] if i == 0 else math.sqrt(sizes[i - 1] * sizes[i])
    return None


SWEEPS = {"jacobian_crossover": jacobian_sweep, "checkpoint_tradeoff": checkpoint_sweep,
          "transformer_saved_bytes": transformer_bytes_sweep, "loss_curves": loss_curves}
DRAW = {"jacobian_crossover": plot_jacobian, "checkpoint_tradeoff": plot_checkpoint,
        "transformer_saved_bytes": plot_transformer_bytes, "loss_curves": plot_loss_curves}
