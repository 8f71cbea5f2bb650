"""``jacobian(mode="auto")`` vs forced forward (jacfwd) and reverse (jacrev) mode on
f(x) = tanh(A x), in a wide case (n = 1000 inputs, m = 4 outputs: reverse wins) and a tall case
(n = 4, m = 1000: forward wins). Auto must pick the faster mode and cost no more than it; the slow
mode of each case (one vmapped pass over the larger dimension) must be no slower than torch.func's."""
from __future__ import annotations

import _harness as H
import numpy as np

import chainrule as cr


def _data(n: int, m: int):
    rng = np.random.default_rng(3)
    return rng.standard_normal((m, n)) / np.sqrt(n), rng.standard_normal(n)


def _cr(n, m, make):
    def setup():
        A, x = _data(n, m)
        jac = make(lambda x: cr.tanh(A @ x))
        return (lambda: jac(x)), jac(x)
    return setup


def _np(n, m):
    def setup():
        A, x = _data(n, m)

        def step():
            t = np.tanh(A @ x)
            return (1 - t * t)[:, None] * A
        return step, step()
    return setup


def _torch(torch, n, m, which):
    def setup():
        A0, x0 = _data(n, m)
        A, x = torch.tensor(A0), torch.tensor(x0)
        jac = getattr(torch.func, which)(lambda x: torch.tanh(A @ x))
        return (lambda: jac(x)), jac(x)
    return setup


def _ag(ag, n, m):
    import autograd.numpy as anp

    def setup():
        A, x = _data(n, m)
        jac = ag.jacobian(lambda x: anp.tanh(A @ x))
        return (lambda: jac(x)), jac(x)
    return setup


def _jax(n, m, which):
    def make(jax):
        jnp = jax.numpy
        return (lambda A, x: getattr(jax, which)(lambda x: jnp.tanh(A @ x))(x)), _data(n, m)
    return make


def _case(n: int, m: int, label: str) -> H.Case:
    rows = [H.Contender("chainrule jacobian(mode='auto')", "chainrule", _cr(n, m, cr.jacobian),
                        check=None),
            H.Contender("chainrule jacfwd", "chainrule", _cr(n, m, cr.jacfwd),
                        check="chainrule jacobian(mode='auto')"),
            H.Contender("chainrule jacrev", "chainrule", _cr(n, m, cr.jacrev),
                        check="chainrule jacobian(mode='auto')"),
            H.Contender("NumPy (hand-written)", "numpy", _np(n, m),
                        check="chainrule jacobian(mode='auto')")]
    torch, ag = H.peer("torch"), H.hips_autograd()
    targets = [H.Target(f"jacobian auto vs faster of jacfwd/jacrev ({label})", "chainrule jacobian(mode='auto')",
                        ("chainrule jacfwd", "chainrule jacrev"), 1.05)]
    if torch is not None:
        for which in ("jacfwd", "jacrev"):
            rows.append(H.Contender(f"torch.func.{which}", "torch", _torch(torch, n, m, which),
                                    check="chainrule jacobian(mode='auto')"))
        # the mode that loops over the larger dimension: one vmapped pass against torch.func's
        which = "jacfwd" if n > m else "jacrev"
        targets.append(H.Target(f"{which} vs torch.func.{which} ({label})", f"chainrule {which}",
                                f"torch.func.{which}", 1.0))
    if ag is not None:
        rows.append(H.Contender("HIPS autograd jacobian (reverse)", "autograd", _ag(ag, n, m),
                                check="chainrule jacobian(mode='auto')"))
    for which in ("jacfwd", "jacrev"):
        rows += H.jax_rows(_jax(n, m, which), check="chainrule jacobian(mode='auto')", what=which)
    return H.Case(f"jacobian_{label}", f"jacobian of tanh(A x), {label}: n = {n} inputs, m = {m} "
                  f"outputs, float64", rows, targets=targets, rtol=1e-8, atol=1e-10,
                  notes=H.skip_note(["torch", "autograd", "jax"]))


def cases(quick: bool = False) -> list[H.Case]:
    big = 100 if quick else 1000
    return [_case(big, 4, "wide"), _case(4, big, "tall")]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
