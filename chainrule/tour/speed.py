"""Tour section for speed: a step captured once and replayed as its flat list of NumPy kernels."""
from __future__ import annotations

import numpy as np

import chainrule as cr
from chainrule.tour._sections import Context, section
from chainrule.utils.timing import describe, interleaved_medians


def _chain_step(x: cr.Tensor, w: cr.Tensor, n_ops: int):
    def step():
        x.grad = w.grad = None
        y = x
        for i in range(n_ops // 2):                  # two elementwise ops per round
            y = cr.tanh(y) * w if i % 2 else y * w + 0.5
        y.sum().backward()
        return x.grad, w.grad
    return step


def _tiny_step(w1: cr.Tensor, w2: cr.Tensor, x: np.ndarray, target: float):
    def step():
        w1.grad = w2.grad = None
        d = w2 @ cr.tanh(w1 @ x) - target
        (d * d).backward()
        return w1.grad, w2.grad
    return step


def _repeat(fn, n: int):
    def run():
        for _ in range(n):
            fn()
    return run


@section("compile", "Speed: capture a step once, replay its NumPy kernels (cr.compile)",
         "the Python bookkeeping of a define-by-run library costs more than NumPy's kernels on small "
         "arrays; a replay of the recorded kernels keeps eager semantics without it")
def compiled_speed(ctx: Context) -> None:
    rng = np.random.default_rng(0)
    n_ops = 200 if ctx.fast else 1000
    x = cr.tensor(rng.uniform(-1, 1, 10), requires_grad=True)
    w = cr.tensor(rng.uniform(0.9, 1.1, 10), requires_grad=True)
    w1 = cr.tensor(rng.normal(size=(4, 3)), requires_grad=True)
    w2 = cr.tensor(rng.normal(size=(1, 4)), requires_grad=True)
    cases = {"chain": _chain_step(x, w, n_ops), "tiny": _tiny_step(w1, w2, np.array([0.5, -1.0, 2.0]), 0.25)}
    compiled = {name: cr.compile(step) for name, step in cases.items()}
    for name, step in cases.items():               # the capture, then the first replay (code generation)
        compiled[name]()
        compiled[name]()
        same = all(a.data.tobytes() == b.data.tobytes() for a, b in zip(compiled[name](), step()))
        if not same:
            raise AssertionError(f"the compiled {name} step differs from eager")
    reps = {"chain": 5, "tiny": 200}
    fns = {(name, kind): _repeat(fn, reps[name])
           for name in cases for kind, fn in (("eager", cases[name]), ("compiled", compiled[name]))}
    t = interleaved_medians(fns, ctx.rounds)
    ctx.say(f"forward + backward, {describe(ctx.rounds)}; the replays return bitwise eager's gradients")
    chain_e, chain_c = (t["chain", k] / reps["chain"] / n_ops * 1e6 for k in ("eager", "compiled"))
    ctx.say(f"{n_ops:,}-op elementwise chain: eager {chain_e:.2f} us/op, compiled {chain_c:.2f} us/op "
            f"({chain_e / chain_c:.1f}x faster)")
    tiny_e, tiny_c = (t["tiny", k] / reps["tiny"] * 1e6 for k in ("eager", "compiled"))
    ctx.say(f"3-4-1 tanh net: eager {tiny_e:.1f} us, compiled {tiny_c:.1f} us ({tiny_e / tiny_c:.1f}x faster); "
            f"{compiled['tiny'].cache_info()}")
