"""``python tools/bench.py [--quick] [--out FILE.md] [--plots DIR [--plots-only]]``: run the benchmark suite.

The suite lives in ``benchmarks/`` of the source checkout (one ``bench_<topic>.py`` per case and a
shared ``_harness.py``); this command finds it next to the package, runs every case, prints a
Markdown table and compares each row with the recorded results (``benchmarks/results.json``), so a
change that slows a case by more than 10 % shows as ``REGRESSION``. Full runs update the record;
``--quick`` is a smoke run (small sizes, two short samples, no pauses) that never does.

``--plots DIR`` then writes the figures as SVGs (``benchmarks/plots.py``, matplotlib): the run's
overhead and MLP bars, and sweeps measured for the plots (jacobian crossover, checkpointing,
transformer saved bytes, loss curves by precision). ``--plots-only`` skips the timing suite and
draws the bars from the record, so the figures can be regenerated on their own.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

SUITE = ("bench_elementwise", "bench_mlp_step", "bench_deep_mlp", "bench_tiny_net", "bench_hvp",
         "bench_jacobian", "bench_checkpoint", "bench_jvp", "bench_complex", "bench_linalg", "bench_reductions",
         "bench_stats", "bench_per_example", "bench_nn", "bench_transformer", "bench_compile")


def suite_dir() -> Path:
    """The ``benchmarks/`` folder: ``$CHAINRULE_BENCHMARKS`` or the one next to the package.

    >>> suite_dir().name
    'benchmarks'
    """
    env = os.environ.get("CHAINRULE_BENCHMARKS")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "benchmarks"


def main(argv: list[str] | None = None) -> int:
    """Run the suite; return 0, or 2 when the suite is not found or an argument is wrong."""
    ap = argparse.ArgumentParser(prog="python tools/bench.py", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, short samples")
    ap.add_argument("--out", help="write the Markdown table to this file as well")
    ap.add_argument("--only", help="run only cases whose script name contains this text")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS/OpenMP and torch threads (default 1: reproducible on a shared machine)")
    ap.add_argument("--repeats", type=int, help="samples per contender (default 15, quick 2)")
    ap.add_argument("--record", help="JSON record to compare with (default benchmarks/results.json)")
    ap.add_argument("--plots", metavar="DIR", help="write the figures as SVGs into DIR (needs matplotlib)")
    ap.add_argument("--plots-only", action="store_true",
                    help="no timing suite: the sweeps, and the bars from the record (DIR default docs/assets/plots)")
    args = ap.parse_args(argv)
    root = suite_dir()
    if not (root / "_harness.py").exists():
        print(f"bench: the benchmark suite was not found at {root}; run from a source checkout of "
              f"chainrule (or set CHAINRULE_BENCHMARKS to its benchmarks/ folder)", file=sys.stderr)
        return 2
    if (args.plots or args.plots_only) and importlib.util.find_spec("matplotlib") is None:
        print("bench: --plots needs matplotlib (pip install 'chainrule[plot]')", file=sys.stderr)
        return 2
    sys.path.insert(0, str(root))
    harness = importlib.import_module("_harness")
    record_path = args.record or str(root / "results.json")
    if args.plots_only:
        return _plots(harness, args, args.plots or str(root.parent / "docs" / "assets" / "plots"),
                      harness.load_record(record_path), [])
    names = [n for n in SUITE if not args.only or args.only in n]
    if not names:
        print(f"bench: no case matches --only {args.only!r}; cases: {', '.join(SUITE)}", file=sys.stderr)
        return 2
    case_lists = [importlib.import_module(n).cases(args.quick) for n in names]
    record = harness.load_record(record_path)
    log = (lambda s: print(s, file=sys.stderr))
    results, info, threads = harness.run_all(case_lists, quick=args.quick, repeats=args.repeats,
                                             threads=args.threads, log=log)
    text = harness.markdown(results, info, threads, record)
    print(text)
    if args.out:                         # the file says which command wrote it
        command = " ".join(["python tools/bench.py", *(sys.argv[1:] if argv is None else argv)])
        Path(args.out).write_text(f"<!-- Written by `{command}`. -->\n\n{text}")
    if not args.quick:
        harness.save_record(record_path, results, info)
    return _plots(harness, args, args.plots, record, results) if args.plots else 0


def _plots(harness: ModuleType, args: argparse.Namespace, out: str, record: dict, results: list) -> int:
    """Write the figures: bars from this run's results where it ran those cases, else the record."""
    plots = importlib.import_module("plots")
    timings = plots.timings_from_record(record)
    timings.update(plots.timings_from_results(results))
    info = harness.machine()                   # the sweeps' machine; the record's bars name their own
    threads = harness.set_threads(args.threads)
    try:
        done = plots.write_all(out, args.quick, timings, info, threads, log=lambda s: print(s, file=sys.stderr))
    finally:
        harness.restore_threads()
    for path in done["paths"].values():
        print(f"plot: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
