"""The timing harness shared by every ``bench_*.py`` script (no script re-implements any of this).

A benchmark *case* is a list of *contenders* (chainrule, hand-written NumPy, each importable peer),
each a zero-argument ``setup`` that returns ``(step, value)``: ``step()`` is one timed call and
``value`` the arrays it computed, checked against the chainrule row named in ``check``.

Timing discipline (2 cores make every shortcut visible):

- set-up of every contender first, then ``gc.collect(); gc.freeze()`` so the collector does not
  rescan set-up objects during timing (it stays enabled: a library that makes cycles pays for them);
- a warm-up call per contender, which also calibrates how many calls make one sample;
- interleaved repeats (round-robin over contenders, by ``chainrule.utils.timing``), medians, and the
  spread as half the inter-quartile range in percent of the median;
- a pause (0.2 s) before every sample whose library differs from the previous sample's, because
  BLAS/OpenMP worker threads of the library that ran last keep spinning and steal a core;
- explicit thread counts: BLAS via threadpoolctl (when installed), torch via ``set_num_threads``,
  XLA (jax) by starting its CPU client under an ``n``-CPU affinity mask (its intra-op pool is sized
  to the mask; ``XLA_FLAGS`` alone does not pin jax 0.10).

JAX rows (``jax_rows``): one function gives an eager row and a ``jax.jit`` row (compiled in set-up);
every step blocks on its outputs, because JAX dispatch is asynchronous. ``jax_enable_x64`` is turned
on once, when the harness first prepares jax (float64 cases need it; float32 cases pass float32
arrays), and ``restore_threads`` puts it back.

Results go to a JSON record; the next run prints each row's change against it and flags a row more
than 10 % slower (``REGRESSION``).
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from chainrule.utils.timing import interleaved_samples

PAUSE_S = 0.2
REGRESSION = 1.10


@dataclass
class Contender:
    name: str                                  # row label, e.g. "chainrule", "PyTorch eager"
    library: str                               # "chainrule", "numpy", "torch", ... (pauses key on it)
    setup: Callable[[], tuple]                 # -> (step, value)
    check: str | None = "chainrule"            # row whose value this one must match (None: no check)


@dataclass
class Target:
    label: str
    num: str                                   # row name or extra key
    den: str | tuple                           # a tuple: the fastest of those rows
    limit: float


@dataclass
class Case:
    key: str
    title: str
    contenders: list[Contender]
    unit: str = "ms"                           # "ms", "us" or "us/op"
    per: int = 1                               # divide times by this (ops per step)
    baseline: str = "NumPy (hand-written)"     # the "×" column's denominator
    targets: list[Target] = field(default_factory=list)
    extras: Callable[[], dict] | None = None   # non-timing figures (bytes saved, ...)
    notes: list[str] = field(default_factory=list)
    rtol: float = 1e-4
    atol: float = 1e-6


@dataclass
class Row:
    name: str
    library: str
    median: float                              # seconds per step
    spread: float                              # half-IQR / median
    samples: int
    checked: str                               # "ok", "-" or the mismatch


@dataclass
class Result:
    case: Case
    rows: list[Row]
    extras: dict

    def value(self, key: str) -> float | None:
        for r in self.rows:
            if r.name == key:
                return r.median
        return self.extras.get(key)


# ----- peers and threads -----
def peer(name: str) -> Any:
    """Import an optional peer library, or return None (the case then lists it as skipped)."""
    try:
        return importlib.import_module(name)
    except Exception:   # ImportError, or a broken install: skip it either way
        return None


def hips_autograd() -> Any:
    """HIPS autograd's numpy wrapper and grad functions, or None."""
    ag = peer("autograd")
    return ag if ag is not None and hasattr(ag, "grad") else None


def peer_rows(torch_setup: Callable[[Any], Any], autograd_setup: Callable[[Any], Any]) -> list:
    """The standard peer rows ("PyTorch eager", "HIPS autograd") for whichever peers import;
    each ``*_setup(module)`` returns the contender's set-up function."""
    rows = []
    torch, ag = peer("torch"), hips_autograd()
    if torch is not None:
        rows.append(Contender("PyTorch eager", "torch", torch_setup(torch)))
    if ag is not None:
        rows.append(Contender("HIPS autograd", "autograd", autograd_setup(ag)))
    return rows


def jax_rows(make: Callable[[Any], tuple], check: str | None = "chainrule", what: str = "") -> list:
    """The rows "JAX eager<what>" and "JAX jit<what>" of one computation ([] without jax).

    ``make(jax)`` returns ``(fn, args)``: ``fn(*args)`` is one step, a pytree of arrays out. The
    eager row calls ``fn``, the jit row ``jax.jit(fn)``, compiled by the set-up's first call; the
    args go to the device in set-up (NumPy dtypes kept: float32 stays float32)."""
    if peer("jax") is None:
        return []
    label = f" {what}" if what else ""
    return [Contender(f"JAX eager{label}", "jax", _jax_setup(make, False), check),
            Contender(f"JAX jit{label}", "jax", _jax_setup(make, True), check)]


def _jax_setup(make: Callable[[Any], tuple], jit: bool) -> Callable[[], tuple]:
    def setup() -> tuple:
        jax = jax_ready()
        fn, args = make(jax)
        args = jax.tree_util.tree_map(jax.numpy.asarray, tuple(args))
        f = jax.jit(fn) if jit else fn

        def step():
            return jax.block_until_ready(f(*args))
        return step, [np.asarray(a) for a in jax.tree_util.tree_leaves(step())]
    return setup


XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_JAX_X64: bool | None = None
_XLA_FLAGS: str | None = None
_XLA_LINE: tuple[int, str] | None = None       # (threads, line) of the client this process started


def jax_ready() -> Any:
    """jax with ``jax_enable_x64`` on (float64 cases need it); ``restore_threads`` puts it back."""
    global _JAX_X64
    jax = peer("jax")
    if _JAX_X64 is None:
        _JAX_X64 = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    return jax


def _start_xla(jax: Any, n: int) -> str:
    """Start XLA's CPU client on ``n`` threads and say how: its intra-op pool is sized by the CPUs
    the starting thread may run on, so start it under an ``n``-CPU affinity mask, then unpin the
    threads. For n == 1 ``XLA_FLAGS`` gets ``XLA_ONE_THREAD`` too (the usual recipe, which jax 0.10
    alone does not honour). A client runs for the life of the process: it is started once."""
    global _XLA_FLAGS, _XLA_LINE
    if _XLA_LINE is not None:
        return _XLA_LINE[1] + ("" if _XLA_LINE[0] == n else f" (started earlier; {n} requested now)")
    xb = importlib.import_module("jax._src.xla_bridge")
    if getattr(xb, "backends_are_initialized", lambda: False)():
        return f"jax/XLA: its CPU client had started before the harness ran, so not pinned to {n} thread(s)"
    if n == 1:
        _XLA_FLAGS = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{_XLA_FLAGS} {XLA_ONE_THREAD}".strip()
    flags = f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}" if n == 1 else "XLA_FLAGS unchanged"
    if not hasattr(os, "sched_setaffinity"):
        jax.devices()
        line = f"jax/XLA: {flags}; no CPU affinity on this OS, so XLA's pool may use every core"
    else:
        mask, tasks = os.sched_getaffinity(0), "/proc/self/task"
        before = set(os.listdir(tasks)) if os.path.isdir(tasks) else None
        os.sched_setaffinity(0, sorted(mask)[:n])
        try:
            jax.devices()                            # creates the client and its thread pool
        finally:
            os.sched_setaffinity(0, mask)
            for tid in (set(os.listdir(tasks)) - before) if before is not None else ():
                try:
                    os.sched_setaffinity(int(tid), mask)
                except OSError:                      # the thread has ended
                    pass
        k = min(n, len(mask))
        line = (f"jax/XLA: {k} intra-op thread(s) (CPU client started under a {k}-CPU affinity mask, "
                f"then unpinned; {flags})")
    _XLA_LINE = (n, line)
    return line


_LIMITER: Any = None
_TORCH_THREADS: int | None = None


def set_threads(n: int) -> str:
    """Pin BLAS/OpenMP and torch to ``n`` threads; return a line describing what was set."""
    global _LIMITER, _TORCH_THREADS
    parts = []
    tpc = peer("threadpoolctl")
    if tpc is not None:
        _LIMITER = tpc.threadpool_limits(n)
        libs = sorted({f"{i['internal_api']} {i.get('version') or ''}".strip()
                       for i in tpc.threadpool_info()})
        parts.append(f"BLAS/OpenMP: {n} thread(s) via threadpoolctl ({', '.join(libs)})")
    else:   # BLAS reads its thread count once, when NumPy loads: too late to set it here
        env = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
        parts.append(f"BLAS: {env + ' thread(s), from the environment' if env else 'its default threads'}; "
                     f"not pinned to {n} (threadpoolctl, in the bench extra, is not installed: install it "
                     f"or start with OPENBLAS_NUM_THREADS={n})")
    if "torch" in sys.modules or peer("torch") is not None:
        torch = sys.modules["torch"]
        if _TORCH_THREADS is None:
            _TORCH_THREADS = torch.get_num_threads()
        torch.set_num_threads(n)
        parts.append(f"torch: {torch.get_num_threads()} thread(s)")
    if peer("jax") is not None:
        parts.append(_start_xla(jax_ready(), n) + "; jax_enable_x64 on")
    return "; ".join(parts)


def machine() -> dict:
    """Machine and versions, for the report header."""
    info = {"python": platform.python_version(), "platform": platform.platform(),
            "cpu": _cpu_name(), "cores": os.cpu_count(), "numpy": np.__version__}
    for name in ("chainrule", "torch", "autograd", "jax"):
        mod = peer(name)
        if mod is not None:
            info[name] = getattr(mod, "__version__", "installed")
    return info


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ----- measuring -----
def run_case(case: Case, repeats: int, min_sample_s: float, pause_s: float) -> Result:
    """Set up, check and time every contender of ``case``, interleaved."""
    steps, values = {}, {}
    for c in case.contenders:
        steps[c.name], values[c.name] = c.setup()
    rows_checked = {c.name: _check(case, c, values) for c in case.contenders}
    extras = case.extras() if case.extras else {}
    gc.collect()
    gc.freeze()
    try:
        numbers = {}
        for c in case.contenders:                     # warm-up and calibration
            step = steps[c.name]
            step()
            t0 = time.perf_counter()
            step()
            one = max(time.perf_counter() - t0, 1e-7)
            numbers[c.name] = max(1, int(min_sample_s / one))
        library = {c.name: c.library for c in case.contenders}
        last = None

        def pause(name: str) -> None:
            nonlocal last
            if pause_s and library[name] != last:
                time.sleep(pause_s)
            last = library[name]

        batches = interleaved_samples({name: _batch(steps[name], numbers[name]) for name in steps},
                                      repeats, warmup=0, before=pause)
        samples = {name: [t / numbers[name] for t in s] for name, s in batches.items()}
    finally:
        gc.unfreeze()
    rows = []
    for c in case.contenders:
        s = samples[c.name]
        med = statistics.median(s)
        q = np.percentile(s, [25, 75]) if len(s) > 1 else (med, med)
        rows.append(Row(c.name, c.library, med, float(q[1] - q[0]) / 2 / med, len(s),
                        rows_checked[c.name]))
    return Result(case, rows, extras)


def _batch(step: Callable[[], Any], n: int) -> Callable[[], None]:
    """``n`` calls of ``step`` as one sample."""
    def run() -> None:
        for _ in range(n):
            step()
    return run


def _check(case: Case, c: Contender, values: dict) -> str:
    if c.check is None or c.check == c.name:
        return "-" if c.check is None else "reference"
    ref, got = values[c.check], values[c.name]
    ref = [np.asarray(v, dtype=np.float64) for v in _flat(ref)]
    got = [np.asarray(v, dtype=np.float64) for v in _flat(got)]
    if len(ref) != len(got):
        raise AssertionError(f"{case.key}: {c.name} returned {len(got)} arrays, {c.check} {len(ref)}")
    for i, (r, v) in enumerate(zip(ref, got)):
        if r.shape != v.shape or not np.allclose(v, r, rtol=case.rtol, atol=case.atol):
            err = np.max(np.abs(v - r)) if r.shape == v.shape else f"shape {v.shape} vs {r.shape}"
            raise AssertionError(f"{case.key}: {c.name}'s result {i} differs from {c.check}'s "
                                 f"(max abs diff {err})")
    return "ok"


def _flat(v: Any) -> list:
    if isinstance(v, (list, tuple)):
        return [a for x in v for a in _flat(x)]
    if hasattr(v, "detach") and hasattr(v, "numpy"):      # a torch tensor or a chainrule Tensor
        v = v.detach()
        v = v.numpy() if not hasattr(v, "data") or not isinstance(v.data, np.ndarray) else v.data
    return [np.asarray(v)]


# ----- recording and reporting -----
def load_record(path: str | None) -> dict:
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def save_record(path: str, results: list[Result], info: dict) -> None:
    data = load_record(path)
    data["_machine"] = info
    for res in results:
        data[res.case.key] = {r.name: r.median for r in res.rows}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


def _fmt_time(seconds: float, case: Case) -> str:
    v = seconds / case.per * (1e3 if case.unit == "ms" else 1e6)
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def target_lines(results: list[Result]) -> list[tuple[str, float | None, float, bool | None]]:
    """(label, measured ratio, limit, met) for every target of every case."""
    out = []
    for res in results:
        for t in res.case.targets:
            dens = [res.value(d) for d in ((t.den,) if isinstance(t.den, str) else t.den)]
            num, den = res.value(t.num), min([d for d in dens if d is not None], default=None)
            ratio = None if num is None or den is None or den == 0 else num / den
            out.append((t.label, ratio, t.limit, None if ratio is None else ratio <= t.limit))
    return out


def markdown(results: list[Result], info: dict, threads: str, record: dict) -> str:
    """One Markdown document: machine, targets, then one table per case."""
    lines = ["## Targets (ratios from the same run)", "",
             "| target | measured | limit | met |", "|---|---|---|---|"]
    for label, ratio, limit, met in target_lines(results):
        shown = "n/a" if ratio is None else f"{ratio:.2f}×"
        lines.append(f"| {label} | {shown} | ≤ {limit:g}× | {'yes' if met else 'n/a' if met is None else 'NO'} |")
    for res in results:
        case = res.case
        base = res.value(case.baseline)
        old = record.get(case.key, {})
        lines += ["", f"## {case.title}", "",
                  f"| library | median ({case.unit}) | spread | × {case.baseline} | result check | vs recorded |",
                  "|---|---|---|---|---|---|"]
        for r in res.rows:
            ratio = f"{r.median / base:.2f}" if base else "-"
            prev = old.get(r.name)
            if prev:
                change = r.median / prev
                vs = f"{(change - 1) * 100:+.0f}%" + (" **REGRESSION**" if change > REGRESSION else "")
            else:
                vs = "-"
            lines.append(f"| {r.name} | {_fmt_time(r.median, case)} | ±{r.spread * 100:.0f}% | "
                         f"{ratio} | {r.checked} | {vs} |")
        for k, v in res.extras.items():
            lines.append(f"\n{k}: {v:,.0f}" if isinstance(v, (int, float)) else f"\n{k}: {v}")
        for note in case.notes:
            lines.append(f"\n{note}")
    head = ["# chainrule benchmarks", "",
            "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), "",
            f"Threads: {threads}", ""]
    return "\n".join(head + lines) + "\n"


def run_all(case_lists: list[list[Case]], quick: bool = False, repeats: int | None = None,
            threads: int | None = None, pause_s: float | None = None,
            log: Callable[[str], None] = print) -> tuple[list[Result], dict, str]:
    """Run the cases; quick = few, short samples without pauses (a smoke run, not a measurement)."""
    thread_line = set_threads(threads or os.cpu_count() or 1)
    repeats = repeats or (2 if quick else 15)
    min_sample = 0.002 if quick else 0.05
    pause = (0.0 if quick else PAUSE_S) if pause_s is None else pause_s
    results = []
    try:
        for cases in case_lists:
            for case in cases:
                log(f"running {case.key} ...")
                results.append(run_case(case, repeats, min_sample, pause))
    finally:
        restore_threads()
    return results, machine(), thread_line


def restore_threads() -> None:
    """Undo ``set_threads`` (the caller, e.g. a test session, gets its thread counts back)."""
    global _LIMITER, _TORCH_THREADS, _JAX_X64, _XLA_FLAGS
    if _JAX_X64 is not None:
        sys.modules["jax"].config.update("jax_enable_x64", _JAX_X64)
        _JAX_X64 = None
    if _XLA_FLAGS is not None:      # XLA has read it already; later processes get the caller's value
        if _XLA_FLAGS:
            os.environ["XLA_FLAGS"] = _XLA_FLAGS
        else:
            os.environ.pop("XLA_FLAGS", None)
        _XLA_FLAGS = None
    if _LIMITER is not None:
        _LIMITER.restore_original_limits()
        _LIMITER = None
    if _TORCH_THREADS is not None:
        sys.modules["torch"].set_num_threads(_TORCH_THREADS)
        _TORCH_THREADS = None


def main(cases_fn: Callable[[bool], list[Case]], argv: list[str] | None = None) -> int:
    """Standalone entry point of one bench script: ``python benchmarks/bench_x.py [--quick]``."""
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    results, info, threads = run_all([cases_fn(quick)], quick=quick, threads=1)
    print(markdown(results, info, threads, {}))
    return 0


def skip_note(names: list[str]) -> list[str]:
    """Notes for peers that are not importable (e.g. jax), so the table says why a column is gone."""
    return [f"{n}: not installed, skipped" for n in names if peer(n) is None]
