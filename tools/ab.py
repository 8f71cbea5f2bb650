"""Back-to-back A/B of the hot path: two chainrule trees, one process each, samples interleaved.

    python tools/ab.py /path/to/tree_A /path/to/tree_B [--samples 40]
    python tools/ab.py /path/to/tree_A /path/to/tree_B --callgrind     # instructions per step

Each tree's chainrule runs in its own worker process (PYTHONPATH=tree); the cases come from this
tree's ``benchmarks/`` (the MLP step, the 1,000-op chain, the seed's tiny net). The driver asks the
workers for one timed sample at a time, alternating A/B and B/A, so machine noise hits both alike,
and prints per case the medians, the median of the per-round ratios B/A and its spread (quartiles).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "benchmarks")
CASES = {"mlp_step": ("bench_mlp_step", 3), "chain_1000": ("bench_elementwise", 3),
         "tiny_net": ("bench_tiny_net", 200)}      # module, calls per sample


def worker() -> None:
    sys.path.insert(0, BENCH)
    steps = {}
    for name, (module, _) in CASES.items():
        steps[name] = __import__(module)._chainrule()[0]
    print("ready", flush=True)
    for line in sys.stdin:
        name = line.strip()
        step, reps = steps[name], CASES[name][1]
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        print((time.perf_counter() - t0) / reps, flush=True)


def run(name: str, reps: int) -> None:
    """Set up ``name`` and run ``reps`` steps (what callgrind measures)."""
    sys.path.insert(0, BENCH)
    step = __import__(CASES[name][0])._chainrule()[0]
    for _ in range(reps):
        step()


def _env(tree: str) -> dict:
    return {**os.environ, "PYTHONPATH": os.path.abspath(tree), "PYTHONHASHSEED": "0",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def instructions(tree: str, name: str, reps: int) -> int:
    """Instructions (callgrind's Ir) of setting up ``name`` and running ``reps`` steps."""
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, __file__, "--run", name, str(reps)],
                         env=_env(tree), capture_output=True, text=True, check=True).stderr
    return int(out.split("Collected :")[1].split()[0])


def callgrind(a: str, b: str) -> None:
    """Instructions per step: the difference of two runs (few and more steps) cancels the set-up."""
    reps = {"mlp_step": (1, 3), "chain_1000": (1, 3), "tiny_net": (20, 120)}
    print(f"{'case':<12}{'A Ir/step':>14}{'B Ir/step':>14}{'B/A':>8}")
    for name, (lo, hi) in reps.items():
        per = [(instructions(t, name, hi) - instructions(t, name, lo)) / (hi - lo) for t in (a, b)]
        print(f"{name:<12}{per[0]:>14,.0f}{per[1]:>14,.0f}{per[1] / per[0]:>8.4f}")


def _start(tree: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=_env(tree))
    assert p.stdout.readline().strip() == "ready"
    return p


def _sample(p: subprocess.Popen, name: str) -> float:
    p.stdin.write(name + "\n")
    p.stdin.flush()
    return float(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--callgrind", action="store_true")
    args = ap.parse_args()
    if args.callgrind:
        return callgrind(args.a, args.b)
    a, b = _start(args.a), _start(args.b)
    times: dict = {n: ([], []) for n in CASES}
    for name in CASES:                               # warm-up
        for _ in range(3):
            _sample(a, name), _sample(b, name)
    for i in range(args.samples):
        for name in CASES:
            first, second = (a, b) if i % 2 == 0 else (b, a)
            t1, t2 = _sample(first, name), _sample(second, name)
            ta, tb = (t1, t2) if first is a else (t2, t1)
            times[name][0].append(ta)
            times[name][1].append(tb)
    print(f"{'case':<12}{'A median':>12}{'B median':>12}{'B/A':>8}   B/A quartiles "
          f"({args.samples} interleaved samples)")
    for name, (ta, tb) in times.items():
        ratios = sorted(y / x for x, y in zip(ta, tb))
        q1, q3 = ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]
        print(f"{name:<12}{statistics.median(ta) * 1e6:>10.1f}µs{statistics.median(tb) * 1e6:>10.1f}µs"
              f"{statistics.median(ratios):>8.3f}   [{q1:.3f}, {q3:.3f}]")
    for p in (a, b):
        p.stdin.close()
        p.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    elif sys.argv[1:2] == ["--run"]:
        run(sys.argv[2], int(sys.argv[3]))
    else:
        main()
