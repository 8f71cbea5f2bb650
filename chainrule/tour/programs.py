"""Tour sections for differentiating through programs: control flow, the NaN trap, implicit
differentiation of solvers, and gradient estimators for discrete/random operations."""
from __future__ import annotations

import numpy as np

import chainrule as cr
from chainrule.tour._sections import Context, section


@section("control-flow", "Control flow: the gradient follows the path taken",
         "AD differentiates the path actually taken; the derivative of a branch condition is zero")
def control_flow(ctx: Context) -> None:
    for value in (2.0, 100.0):
        a = cr.tensor(value, dtype=cr.float64, requires_grad=True)
        z, k = a * 0 + 1.0, 0
        while abs(float(z * z - a)) > 1e-12:          # Newton for sqrt: data-dependent trip count
            z, k = 0.5 * (z + a / z), k + 1
        z.backward()
        ctx.say(f"newton_sqrt({value:g}): {k} iterations recorded, dz/da = {a.grad.item():.10f} "
                f"(exact 1/(2 sqrt a) = {0.5 / np.sqrt(value):.10f})")


@section("nan-trap", "Kinks and the NaN trap: where(x > 0, sqrt(x), 0.)",
         "non-differentiable points get a convention; 0 * inf in an untaken branch gives NaN")
def nan_trap(ctx: Context) -> None:
    x = cr.tensor([-1.0, 0.0, 4.0], dtype=cr.float64, requires_grad=True)
    prev = cr.set_safe_zero_cotangents(False)
    try:
        with np.errstate(all="ignore"):
            cr.where(x > 0, cr.sqrt(x), 0.0).sum().backward()
        ctx.say(f"PyTorch/JAX convention (0 * inf = NaN): grad = {x.grad.data}")
        x.grad = None
        with cr.detect_anomaly():
            y = cr.where(x > 0, cr.sqrt(x), 0.0).sum()
            try:
                y.backward()
            except cr.AnomalyError as e:
                lines = str(e).splitlines()
                ctx.say("detect_anomaly: " + lines[0])
                ctx.say("                " + next(ln for ln in lines if "first NaN" in ln)[:100])
    finally:
        cr.set_safe_zero_cotangents(prev)
    x.grad = None
    with np.errstate(all="ignore"):
        cr.where(x > 0, cr.sqrt(x), 0.0).sum().backward()
    ctx.say(f"chainrule default (a zero cotangent stays zero): grad = {x.grad.data}")
    for name, fn, v in [("relu", cr.relu, 0.0), ("abs", cr.abs, 0.0), ("sqrt", cr.sqrt, 0.0)]:
        t = cr.tensor(v, dtype=cr.float64, requires_grad=True)
        with np.errstate(all="ignore"):
            fn(t).backward()
        ctx.say(f"  {name}'({v:g}) = {t.grad.item()}")


@section("implicit", "Iterative solvers: unrolled vs implicit differentiation",
         "implicit differentiation uses the optimality conditions, not every stored iteration")
def implicit(ctx: Context) -> None:
    rng = np.random.default_rng(0)
    n = 16
    w = rng.standard_normal((n, n))
    W = cr.tensor(w * 0.6 / np.linalg.norm(w, 2), requires_grad=True)
    x = cr.tensor(rng.standard_normal(n), requires_grad=True)
    v = cr.tensor(rng.standard_normal(n))
    f = lambda z, W, x: cr.tanh(W @ z + x)                       # noqa: E731
    with cr.profile() as p:
        z = cr.fixed_point(f, np.zeros(n), W, x)
    (g_imp,) = cr.autograd.grad((z * v).sum(), W)
    ctx.say(f"{'method':<16}{'max |grad - implicit|':>24}{'saved bytes':>14}")
    for k in ((5, 20) if ctx.fast else (5, 10, 20, 40)):
        with cr.profile() as pk:
            zk = cr.zeros(n, dtype=cr.float64)
            for _ in range(k):
                zk = f(zk, W, x)
        (g,) = cr.autograd.grad((zk * v).sum(), W)
        ctx.say(f"{'unrolled k=' + str(k):<16}{np.max(np.abs(g.data - g_imp.data)):>24.2e}"
                f"{pk.peak_saved_bytes:>14,d}")
    ctx.say(f"{'implicit':<16}{0.0:>24.2e}{p.peak_saved_bytes:>14,d}")


@section("estimators", "Discrete operations: gradient estimators",
         "sampling, rounding, argmax have zero/undefined gradients; reparameterization, "
         "straight-through and REINFORCE give surrogates")
def estimators(ctx: Context) -> None:
    E, D = cr.estimators, cr.distributions
    x = cr.tensor([0.3, 1.7], requires_grad=True)
    cr.round(x).sum().backward()
    ctx.say(f"round(x): gradient {x.grad.data} (zero almost everywhere)")
    x.grad = None
    E.round_ste(x).sum().backward()
    ctx.say(f"round_ste(x) (straight-through): value {E.round_ste(x).data}, gradient {x.grad.data}")
    f = lambda z: z * z                                           # noqa: E731
    normal = lambda mu: D.Normal(mu, 1.0)                         # noqa: E731
    r = E.report({"reparameterized": E.reparam_estimator(normal, f),
                  "REINFORCE": E.reinforce_estimator(normal, f),
                  "REINFORCE + baseline": E.reinforce_estimator(normal, f, baseline="mean")},
                 0.8, exact=lambda mu: mu * mu + 1.0, num_samples=2000 if ctx.fast else 20000,
                 generator=np.random.default_rng(0))
    ctx.say("∇μ E[z²], z ~ N(μ=0.8, 1):\n" + str(r))
    ctx.say(f"variance ratios: REINFORCE / reparameterized = "
            f"{r.ratio('REINFORCE', 'reparameterized'):.1f}, REINFORCE / with baseline = "
            f"{r.ratio('REINFORCE', 'REINFORCE + baseline'):.1f}")
