"""A deep, narrow MLP: 96 tanh layers of width 256, batch 32, float32, loss mean(h**2);
forward + backward, all 192 parameter gradients."""
from __future__ import annotations

import _harness as H
import _models as M

import chainrule as cr

LAYERS, WIDTH, BATCH = 96, 256, 32


def _chainrule(layers: int):
    def setup():
        ps0, x = M.deep_data(layers, WIDTH, BATCH)
        ps = [cr.tensor(p, requires_grad=True) for p in ps0]

        def step():
            for p in ps:
                p.grad = None
            h = M.deep_forward(ps, x, cr.tanh)
            cr.mean(h * h).backward()
            return [p.grad for p in ps]
        return step, step()
    return setup


def _numpy(layers: int):
    def setup():
        ps, x = M.deep_data(layers, WIDTH, BATCH)

        def step():
            return M.deep_numpy_grads(ps, x)
        return step, step()
    return setup


def _torch(torch, layers: int):
    def setup():
        ps0, x0 = M.deep_data(layers, WIDTH, BATCH)
        ps = [torch.tensor(p, requires_grad=True) for p in ps0]
        x = torch.tensor(x0)

        def step():
            for p in ps:
                p.grad = None
            h = M.deep_forward(ps, x, torch.tanh)
            torch.mean(h * h).backward()
            return [p.grad for p in ps]
        return step, step()
    return setup


def _autograd(ag, layers: int):
    import autograd.numpy as anp

    def setup():
        ps, x = M.deep_data(layers, WIDTH, BATCH)
        g = ag.grad(lambda ps: anp.mean(M.deep_forward(ps, x, anp.tanh) ** 2))

        def step():
            return g(ps)
        return step, step()
    return setup


def _jax(layers: int):
    def make(jax):
        jnp = jax.numpy
        return (jax.grad(lambda ps, x: jnp.mean(M.deep_forward(ps, x, jnp.tanh) ** 2)),
                M.deep_data(layers, WIDTH, BATCH))
    return make


def cases(quick: bool = False) -> list[H.Case]:
    layers = 8 if quick else LAYERS
    rows = [H.Contender("chainrule", "chainrule", _chainrule(layers)),
            H.Contender("NumPy (hand-written)", "numpy", _numpy(layers))]
    rows += H.peer_rows(lambda torch: _torch(torch, layers), lambda ag: _autograd(ag, layers))
    rows += H.jax_rows(_jax(layers))
    return [H.Case("deep_mlp", f"{layers} layers x {WIDTH}, batch {BATCH}, float32, fwd+bwd", rows,
                   targets=[H.Target(f"deep MLP ({layers}x{WIDTH}) vs hand-written NumPy", "chainrule",
                                     "NumPy (hand-written)", 1.20)],
                   rtol=2e-3, atol=1e-5, notes=H.skip_note(["torch", "autograd", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
