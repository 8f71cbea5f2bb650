"""The core issue's two figures in one table run: the per-op overhead of a 1,000-op elementwise
chain and a 784-512-512-10 MLP training step, each side by side with hand-written NumPy and the
installed peers (``python benchmarks/bench_core.py``; the full suite: ``python tools/bench.py``)."""
from __future__ import annotations

import _harness as H
import bench_elementwise
import bench_mlp_step


def cases(quick: bool = False) -> list[H.Case]:
    return bench_elementwise.cases(quick) + bench_mlp_step.cases(quick)


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
