"""Cost of the safe-zero-cotangent convention (cr.set_safe_zero_cotangents), measured in one run.

Case 1: an MLP training step (784-512-512-10, batch 64, float32, softmax cross-entropy, SGD).
Case 2: the worst case, a backward through the guarded rules only (sqrt, log, divide on 10^6
elements). Each case alternates the setting on/off step by step; medians of many steps, in CPU
time of a single-threaded process (robust to other load on the machine).
Run: python benchmarks/bench_safe_zero.py [--steps N]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import chainrule as cr  # noqa: E402


def _mlp_step_fn(rng: np.random.Generator):
    sizes = [784, 512, 512, 10]
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        params.append(cr.tensor(rng.standard_normal((m, n)).astype(np.float32) / np.sqrt(m),
                                requires_grad=True))
        params.append(cr.tensor(np.zeros(n, np.float32), requires_grad=True))
    x = cr.tensor(rng.standard_normal((64, 784)).astype(np.float32))
    onehot = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]

    def step() -> None:
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = cr.relu(h)
        loss = -(cr.log_softmax(h, axis=-1) * onehot).sum() / 64
        loss.backward()
        with cr.no_grad():
            for p in params:
                p.data -= 0.01 * p.grad.data
                p.grad = None
    return step


def _guarded_step_fn(rng: np.random.Generator):
    x = cr.tensor(rng.uniform(0.5, 2.0, 1_000_000).astype(np.float32), requires_grad=True)

    def step() -> None:
        (cr.sqrt(x) + cr.log(x) + 1.0 / x).sum().backward()
        x.grad = None
    return step


def _median_pair(step, steps: int) -> tuple[float, float]:
    times = {True: [], False: []}
    for _ in range(5):
        step()
    for i in range(2 * steps):
        flag = i % 2 == 0
        cr.set_safe_zero_cotangents(flag)
        t0 = time.process_time()
        step()
        times[flag].append(time.process_time() - t0)
    cr.set_safe_zero_cotangents(True)
    return float(np.median(times[True])), float(np.median(times[False]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'case':<44}{'safe on (ms)':>14}{'safe off (ms)':>15}{'cost':>9}")
    for name, make in [("MLP step 784-512-512-10, batch 64, fp32", _mlp_step_fn),
                       ("sqrt+log+1/x backward, 1e6 fp32 (worst)", _guarded_step_fn)]:
        on, off = _median_pair(make(rng), args.steps)
        print(f"{name:<44}{on * 1e3:>14.3f}{off * 1e3:>15.3f}{(on / off - 1) * 100:>8.1f}%")


if __name__ == "__main__":
    main()
