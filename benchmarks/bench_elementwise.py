"""Per-op overhead: a chain of 1,000 small elementwise ops on float64[10], forward + backward.

The chain cycles through ``x * w`` (w a leaf: two differentiable inputs), ``x + 0.1``, ``tanh(x)``
and ``x * 0.9``; the loss is ``sum(x)``. At 10 elements the arithmetic is free, so the time per op
is the framework's bookkeeping: recording a node, running its rule, accumulating.
"""
from __future__ import annotations

import _harness as H
import numpy as np

import chainrule as cr

N_OPS = 1000


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.uniform(-1, 1, 10), rng.uniform(0.9, 1.1, 10)


def chain(x, w, tanh):
    for i in range(N_OPS):
        k = i % 4
        if k == 0:
            x = x * w
        elif k == 1:
            x = x + 0.1
        elif k == 2:
            x = tanh(x)
        else:
            x = x * 0.9
    return x


def _chainrule():
    x0, w0 = _inputs()
    x, w = cr.tensor(x0, requires_grad=True), cr.tensor(w0, requires_grad=True)

    def step():
        x.grad = w.grad = None
        chain(x, w, cr.tanh).sum().backward()
        return x.grad, w.grad
    return step, step()


def _numpy():
    x0, w0 = _inputs()

    def step():
        x, tape = x0, []
        for i in range(N_OPS):                   # forward, keeping what backward needs
            k = i % 4
            if k == 0:
                tape.append(x)
                x = x * w0
            elif k == 1:
                x = x + 0.1
            elif k == 2:
                x = np.tanh(x)
                tape.append(x)
            else:
                x = x * 0.9
        g, gw = np.ones_like(x), np.zeros_like(w0)
        for i in reversed(range(N_OPS)):
            k = i % 4
            if k == 0:
                gw += g * tape.pop()
                g = g * w0
            elif k == 2:
                t = tape.pop()
                g = g * (1 - t * t)
            elif k == 3:
                g = g * 0.9
        return g, gw
    return step, step()


def _torch(torch):
    def setup():
        x0, w0 = _inputs()
        x = torch.tensor(x0, requires_grad=True)
        w = torch.tensor(w0, requires_grad=True)

        def step():
            x.grad = w.grad = None
            chain(x, w, torch.tanh).sum().backward()
            return x.grad, w.grad
        return step, step()
    return setup


def _autograd(ag):
    import autograd.numpy as anp

    def setup():
        x0, w0 = _inputs()
        g = ag.grad(lambda x, w: anp.sum(chain(x, w, anp.tanh)), argnum=(0, 1))

        def step():
            return g(x0, w0)
        return step, step()
    return setup


def jax_grads(jax):
    """The chain's gradients w.r.t. x and w as one JAX function, for the eager and the jit row."""
    jnp = jax.numpy
    return jax.grad(lambda x, w: jnp.sum(chain(x, w, jnp.tanh)), argnums=(0, 1)), _inputs()


def cases(quick: bool = False) -> list[H.Case]:
    rows = [H.Contender("chainrule", "chainrule", _chainrule),
            H.Contender("NumPy (hand-written)", "numpy", _numpy)]
    rows += H.peer_rows(_torch, _autograd) + H.jax_rows(jax_grads)
    rows[0].check = "chainrule"
    targets = [H.Target("elementwise chain: per-op overhead vs PyTorch eager", "chainrule",
                        "PyTorch eager", 0.8)] if any(r.name == "PyTorch eager" for r in rows) else []
    return [H.Case("elementwise_chain", f"{N_OPS}-op elementwise chain on float64[10], fwd+bwd",
                   rows, unit="us/op", per=N_OPS, targets=targets, rtol=1e-10, atol=1e-12,
                   notes=H.skip_note(["torch", "autograd", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
