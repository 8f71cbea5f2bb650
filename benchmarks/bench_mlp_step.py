"""A training step's gradients of a 784-512-512-10 ReLU MLP, batch 64, float32, softmax
cross-entropy: forward + backward, all six parameter gradients, side by side with the peers."""
from __future__ import annotations

import _harness as H
import _models as M

import chainrule as cr


def _chainrule():
    ps0, x, y = M.mlp_data()
    ps = [cr.tensor(p, requires_grad=True) for p in ps0]

    def step():
        for p in ps:
            p.grad = None
        M.mlp_chainrule(ps, x, y).backward()
        return [p.grad for p in ps]
    return step, step()


def _numpy():
    ps, x, y = M.mlp_data()

    def step():
        return M.mlp_numpy_grads(ps, x, y)
    return step, step()


def _torch(torch):
    def setup():
        ps0, x0, y0 = M.mlp_data()
        ps = [torch.tensor(p, requires_grad=True) for p in ps0]
        x, y = torch.tensor(x0), torch.tensor(y0)

        def step():
            for p in ps:
                p.grad = None
            M.mlp_torch(torch, ps, x, y).backward()
            return [p.grad for p in ps]
        return step, step()
    return setup


def _autograd(ag):
    import autograd.numpy as anp

    def setup():
        ps, x, y = M.mlp_data()
        g = ag.grad(lambda ps: M.mlp_autograd(anp, ps, x, y))

        def step():
            return g(ps)
        return step, step()
    return setup


def jax_grads(jax):
    """The six gradients as one JAX function, for the eager and the jit row (float32 arrays)."""
    jnp = jax.numpy
    return jax.grad(lambda ps, x, y: M.mlp_autograd(jnp, ps, x, y)), M.mlp_data()


def cases(quick: bool = False) -> list[H.Case]:
    rows = [H.Contender("chainrule", "chainrule", _chainrule),
            H.Contender("NumPy (hand-written)", "numpy", _numpy)]
    rows += H.peer_rows(_torch, _autograd) + H.jax_rows(jax_grads)
    return [H.Case("mlp_step", "MLP 784-512-512-10, batch 64, float32, softmax-CE, fwd+bwd", rows,
                   targets=[H.Target("MLP step vs hand-written NumPy", "chainrule",
                                     "NumPy (hand-written)", 1.10)],
                   rtol=2e-3, atol=2e-5, notes=H.skip_note(["torch", "autograd", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
