"""Tour sections for the two modes: the forward-vs-reverse choice rule and Hessian-vector products.

The measuring helpers are also used by ``examples/choice_rule.py``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import chainrule as cr
from chainrule.tour._sections import Context, section
from chainrule.utils.timing import describe, interleaved_medians


def time_jacobians(n: int, m: int, rounds: int, seed: int = 0) -> dict:
    """Median times of jacfwd, jacrev and jacobian(mode="auto") on f(x) = tanh(A x), A of shape (m, n)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n)) / np.sqrt(n)
    x = rng.standard_normal(n)

    def f(x: Any) -> Any:
        return cr.tanh(A @ x)

    auto = cr.jacobian(f)
    result: dict = interleaved_medians({"forward": lambda: cr.jacfwd(f)(x),
                                        "reverse": lambda: cr.jacrev(f)(x),
                                        "auto": lambda: auto(x)}, rounds)
    result["picked"] = auto.last_mode
    result["faster"] = min(("forward", "reverse"), key=result.__getitem__)
    return result


def time_hvp(n: int, rounds: int, seed: int = 0) -> dict:
    """Median times of f, grad f and hvp on a 2-layer tanh net of width n; and |hvp - H v|."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n)) / np.sqrt(n)
    x, v = rng.standard_normal(n), rng.standard_normal(n)

    def f(x: Any) -> Any:
        return cr.tanh(A @ cr.tanh(A @ x)).sum()

    grad_f = cr.grad(f)
    result: dict = interleaved_medians({"f": lambda: f(x), "grad": lambda: grad_f(x),
                                        "hvp": lambda: cr.hvp(f, (x,), (v,))}, rounds)
    small = min(n, 40)                  # the dense Hessian check on a slice that stays cheap
    xs, vs, As = x[:small], v[:small], A[:small, :small]

    def g(x: Any) -> Any:
        return cr.tanh(As @ cr.tanh(As @ x)).sum()

    (hv,) = cr.hvp(g, (xs,), (vs,))
    result["error"] = float(np.max(np.abs(hv - cr.hessian(g)(xs) @ vs)))
    return result


def saved_bytes(depth: int, width: int, mode: str) -> int:
    """Peak bytes saved for backward by a ``depth``-layer tanh chain, in reverse or forward mode."""
    x = np.full(width, 0.5)

    def chain(x: Any) -> Any:
        for _ in range(depth):
            x = cr.tanh(x)
        return x

    with cr.profile() as p:
        if mode == "reverse":
            chain(cr.tensor(x, requires_grad=True))
        else:
            cr.jvp(chain, (x,), (np.ones(width),))
    return p.peak_saved_bytes


@section("modes", "Forward vs reverse mode and the choice rule",
         "forward builds the Jacobian a column per input (cost ~ n), reverse a row per output "
         "(cost ~ m); pick the cheaper dimension")
def choice_rule(ctx: Context) -> None:
    big = 200 if ctx.fast else 1000
    ctx.say(f"f(x) = tanh(A x); times: {describe(ctx.rounds)}")
    ctx.say(f"{'n -> m':>12} {'jacfwd':>10} {'jacrev':>10} {'auto':>10}  auto picked")
    for n, m in ((big, 4), (4, big)):
        r = time_jacobians(n, m, ctx.rounds)
        ctx.say(f"{f'{n} -> {m}':>12} {r['forward'] * 1e3:8.2f}ms {r['reverse'] * 1e3:8.2f}ms "
                f"{r['auto'] * 1e3:8.2f}ms  {r['picked']} (jacfwd/jacrev = "
                f"{r['forward'] / r['reverse']:.3g})")
    depths = (10, 50) if ctx.fast else (10, 50, 100)
    for depth in depths:
        ctx.say(f"tanh chain of depth {depth:3d}, width 1000: saved for backward "
                f"reverse {saved_bytes(depth, 1000, 'reverse'):>7} B, "
                f"forward {saved_bytes(depth, 1000, 'forward')} B")


@section("hvp", "Hessian-vector products (forward-over-reverse)",
         "H v = the JVP of the gradient: a small multiple of one gradient, without forming H")
def hessian_vector(ctx: Context) -> None:
    n = 200 if ctx.fast else 1000
    r = time_hvp(n, ctx.rounds)
    ctx.say(f"f(x) = sum(tanh(A tanh(A x))), n = {n}; times: {describe(ctx.rounds)}")
    ctx.say(f"f {r['f'] * 1e3:.2f} ms, grad {r['grad'] * 1e3:.2f} ms, hvp {r['hvp'] * 1e3:.2f} ms: "
            f"hvp/grad = {r['hvp'] / r['grad']:.2f}, hvp/f = {r['hvp'] / r['f']:.2f}")
    ctx.say(f"hvp agrees with hessian(f) @ v (n = 40 slice): max |difference| = {r['error']:.1e}")
