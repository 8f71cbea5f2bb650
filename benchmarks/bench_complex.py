"""A complex linear layer's training step: loss = mean(|X @ W + b - T|^2) with complex W (256 x 256)
and b, batch 64, forward + backward for both parameters, in complex64 and in complex128.

Every row returns PyTorch's gradient, dL/dRe + i dL/dIm (docs/complex.md): the hand-written NumPy
row computes it as R = X W + b - T, G = 2 R / R.size, W.grad = X^H G, b.grad = sum(G); HIPS
autograd's ``grad`` returns the conjugate (its convention), so its row conjugates once. The
harness compares real arrays, so each row's gradients are compared as (real, imag) pairs.
"""
from __future__ import annotations

import _harness as H
import numpy as np

import chainrule as cr

BATCH, N_IN, N_OUT = 64, 256, 256


def _data(dtype, quick: bool):
    n_in, n_out = (32, 32) if quick else (N_IN, N_OUT)
    rng = np.random.default_rng(5)

    def c(*shape, scale=1.0):
        return (scale * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))).astype(dtype)
    x, t = c(BATCH, n_in), c(BATCH, n_out)
    w, b = c(n_in, n_out, scale=1 / np.sqrt(2 * n_in)), c(n_out, scale=0.1)
    return x, t, w, b


def _pairs(grads) -> list:
    """Complex gradients as float (..., 2) arrays of (real, imag), which the harness compares."""
    out = []
    for g in grads:
        g = g.detach() if hasattr(g, "detach") else g
        g = g.data if isinstance(getattr(g, "data", None), np.ndarray) else g
        g = g.numpy() if hasattr(g, "numpy") else np.asarray(g)
        out.append(np.stack([g.real, g.imag], axis=-1))
    return out


def _chainrule(dtype, quick):
    def setup():
        x0, t0, w0, b0 = _data(dtype, quick)
        x, t = cr.tensor(x0), cr.tensor(t0)
        w, b = cr.tensor(w0, requires_grad=True), cr.tensor(b0, requires_grad=True)

        def step():
            w.grad = b.grad = None
            cr.mean(cr.abs(x @ w + b - t) ** 2).backward()
            return w.grad, b.grad
        return step, _pairs(step())
    return setup


def _numpy(dtype, quick):
    def setup():
        x, t, w, b = _data(dtype, quick)
        xh = x.conj().T

        def step():
            r = x @ w + b - t
            g = r * (2 / r.size)                  # dL/dRe r + i dL/dIm r of mean(|r|^2)
            return xh @ g, g.sum(axis=0)          # J^H g through the matmul and the broadcast
        return step, _pairs(step())
    return setup


def _torch(dtype, quick):
    def factory(torch):
        def setup():
            x0, t0, w0, b0 = _data(dtype, quick)
            x, t = torch.tensor(x0), torch.tensor(t0)
            w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)

            def step():
                w.grad = b.grad = None
                torch.mean(torch.abs(x @ w + b - t) ** 2).backward()
                return w.grad, b.grad
            return step, _pairs(step())
        return setup
    return factory


def _autograd(dtype, quick):
    def factory(ag):
        import autograd.numpy as anp

        def setup():
            x, t, w, b = _data(dtype, quick)
            g = ag.grad(lambda ps: anp.mean(anp.abs(x @ ps[0] + ps[1] - t) ** 2))

            def step():
                gw, gb = g([w, b])
                return np.conj(gw), np.conj(gb)     # HIPS autograd's convention: the conjugate
            return step, _pairs(step())
        return setup
    return factory


def cases(quick: bool = False) -> list[H.Case]:
    out = []
    n_in, n_out = (32, 32) if quick else (N_IN, N_OUT)
    for dtype, name, rtol, atol in ((np.complex64, "complex64", 2e-3, 1e-5),
                                    (np.complex128, "complex128", 1e-9, 1e-12)):
        rows = [H.Contender("chainrule", "chainrule", _chainrule(dtype, quick)),
                H.Contender("NumPy (hand-written)", "numpy", _numpy(dtype, quick))]
        rows += H.peer_rows(_torch(dtype, quick), _autograd(dtype, quick))
        out.append(H.Case(f"complex_step_{name}",
                          f"complex linear layer {n_in}->{n_out}, batch {BATCH}, {name}, "
                          f"mean |XW + b - T|^2, fwd+bwd", rows,
                          targets=[H.Target(f"complex {name} step vs hand-written NumPy", "chainrule",
                                            "NumPy (hand-written)", 1.5)],
                          rtol=rtol, atol=atol, notes=H.skip_note(["torch", "autograd", "jax"])))
    return out


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
