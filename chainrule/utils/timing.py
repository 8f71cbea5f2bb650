"""Timing on a noisy machine: interleaved samples and their medians.

Every time or ratio that the tour, the examples and the benchmark harness print comes from here.
One measurement per contender is not enough: load changes of ±20 % between runs can reverse a
comparison. So the contenders run in turn (A, B, C, A, B, C, ...), a change in load hits all of them
alike, and the median ignores the odd slow sample.
"""
from __future__ import annotations

import random
import statistics
import time
from typing import Any, Callable


def interleaved_samples(fns: dict[str, Callable[[], Any]], rounds: int = 7, warmup: int = 1, *,
                        before: Callable[[str], None] | None = None,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds taken by each ``fn()``, one sample per round, the functions in turn every round, in
    a new (seeded) order each round: no function always runs right after the same neighbour, so a
    neighbour that leaves the caches cold (another library) does not always slow the same one.

    First ``warmup`` untimed calls of each. ``before(name)``, if given, runs untimed before each
    sample. The garbage collector stays enabled: a contender that makes cycles pays for them.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order, shuffle = list(fns.items()), random.Random(0).shuffle
    for r in range(rounds):
        if r:
            shuffle(order)
        for name, fn in order:
            if before is not None:
                before(name)
            start = clock()
            fn()
            samples[name].append(clock() - start)
    return samples


def interleaved_medians(fns: dict[str, Callable[[], Any]], rounds: int = 7, warmup: int = 1,
                        **options: Any) -> dict[str, float]:
    """The median of each function's ``interleaved_samples`` (``options`` are passed on).

    >>> now = [0.0]
    >>> def work(seconds): now[0] += seconds      # a fake clock: work advances it, nothing waits
    >>> interleaved_medians({"fast": lambda: work(1), "slow": lambda: work(3)}, rounds=5,
    ...                     clock=lambda: now[0])
    {'fast': 1.0, 'slow': 3.0}
    """
    samples = interleaved_samples(fns, rounds, warmup, **options)
    return {name: statistics.median(s) for name, s in samples.items()}


def describe(rounds: int) -> str:
    """How a printed time was measured, e.g. ``median of 7 interleaved runs``."""
    return f"median of {rounds} interleaved runs"
