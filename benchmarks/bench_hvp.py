"""Hessian-vector product vs gradient on f(x) = sum(tanh(W x)**2), n = 1000, float64.

chainrule's ``cr.hvp`` is forward-over-reverse (the JVP of the gradient), and so is JAX's row
(``jax.jvp`` of ``jax.grad``, eager and jit); PyTorch's is double backward; HIPS autograd's
``hessian_tensor_product`` is reverse-over-reverse. The target is each library's own HVP/grad ratio."""
from __future__ import annotations

import _harness as H
import numpy as np

import chainrule as cr


def _data(n: int):
    rng = np.random.default_rng(2)
    return rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n), rng.standard_normal(n)


def _f(W):
    return lambda x: cr.sum(cr.tanh(W @ x) ** 2)


def _cr_grad(n):
    def setup():
        W, x, _ = _data(n)
        g = cr.grad(_f(W))
        return (lambda: g(x)), g(x)
    return setup


def _cr_hvp(n):
    def setup():
        W, x, v = _data(n)
        f = _f(W)

        def step():
            return cr.hvp(f, (x,), (v,))[0]
        return step, step()
    return setup


def _np_grad(n):
    def setup():
        W, x, _ = _data(n)

        def step():
            t = np.tanh(W @ x)
            return W.T @ (2 * t * (1 - t * t))
        return step, step()
    return setup


def _np_hvp(n):
    def setup():
        W, x, v = _data(n)

        def step():                     # H v = W^T diag(d/dz [2 t (1 - t^2)]) W v
            t = np.tanh(W @ x)
            s = 1 - t * t
            return W.T @ ((2 * s * s - 4 * t * t * s) * (W @ v))
        return step, step()
    return setup


def _torch_grad(torch, n):
    def setup():
        W0, x0, _ = _data(n)
        W, x = torch.tensor(W0), torch.tensor(x0, requires_grad=True)

        def step():
            return torch.autograd.grad(torch.sum(torch.tanh(W @ x) ** 2), x)[0]
        return step, step()
    return setup


def _torch_hvp(torch, n):
    def setup():
        W0, x0, v0 = _data(n)
        W, x, v = torch.tensor(W0), torch.tensor(x0, requires_grad=True), torch.tensor(v0)

        def step():                     # double backward, PyTorch's usual HVP
            g = torch.autograd.grad(torch.sum(torch.tanh(W @ x) ** 2), x, create_graph=True)[0]
            return torch.autograd.grad(g, x, v)[0]
        return step, step()
    return setup


def _ag(ag, n, hvp: bool):
    import autograd.numpy as anp

    def setup():
        W, x, v = _data(n)
        f = lambda x: anp.sum(anp.tanh(W @ x) ** 2)  # noqa: E731
        fn = ag.hessian_tensor_product(f) if hvp else ag.grad(f)

        def step():
            return fn(x, v) if hvp else fn(x)
        return step, step()
    return setup


def _jax(n, hvp: bool):
    def make(jax):
        jnp = jax.numpy
        W, x, v = _data(n)
        g = jax.grad(lambda W, x: jnp.sum(jnp.tanh(W @ x) ** 2), argnums=1)
        if hvp:
            return (lambda W, x, v: jax.jvp(lambda x: g(W, x), (x,), (v,))[1]), (W, x, v)
        return g, (W, x)
    return make


def cases(quick: bool = False) -> list[H.Case]:
    n = 200 if quick else 1000
    rows = [H.Contender("chainrule grad", "chainrule", _cr_grad(n), check=None),
            H.Contender("chainrule hvp", "chainrule", _cr_hvp(n), check=None),
            H.Contender("NumPy grad (hand-written)", "numpy", _np_grad(n), check="chainrule grad"),
            H.Contender("NumPy hvp (hand-written)", "numpy", _np_hvp(n), check="chainrule hvp")]
    targets = [H.Target("HVP / grad (chainrule)", "chainrule hvp", "chainrule grad", 2.0)]
    torch, ag = H.peer("torch"), H.hips_autograd()
    if torch is not None:
        rows += [H.Contender("PyTorch grad", "torch", _torch_grad(torch, n), check="chainrule grad"),
                 H.Contender("PyTorch hvp (double backward)", "torch", _torch_hvp(torch, n),
                             check="chainrule hvp")]
    if ag is not None:
        rows += [H.Contender("HIPS autograd grad", "autograd", _ag(ag, n, False), check="chainrule grad"),
                 H.Contender("HIPS autograd hvp", "autograd", _ag(ag, n, True), check="chainrule hvp")]
    rows += H.jax_rows(_jax(n, False), check="chainrule grad", what="grad")
    rows += H.jax_rows(_jax(n, True), check="chainrule hvp", what="hvp (jvp of grad)")
    return [H.Case("hvp", f"HVP vs grad, f = sum(tanh(W x)^2), n = {n}, float64", rows,
                   baseline="chainrule grad", targets=targets, rtol=1e-8, atol=1e-10,
                   notes=["ratios in the × column are to chainrule's gradient; compare each "
                          "library's hvp row with its own grad row"] +
                   H.skip_note(["torch", "autograd", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
