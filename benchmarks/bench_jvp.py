"""Forward-mode JVP of the 96 x 256 tanh MLP (batch 32, float32) along a tangent of its input,
vs the same network's plain forward pass: ``cr.jvp`` computes output and tangent in one pass."""
from __future__ import annotations

import _harness as H
import _models as M
import numpy as np

import chainrule as cr

WIDTH, BATCH = 256, 32


def _inputs(layers: int):
    ps, x = M.deep_data(layers, WIDTH, BATCH)
    v = np.random.default_rng(4).standard_normal(x.shape).astype(np.float32)
    return ps, x, v


def _cr_forward(layers):
    def setup():
        ps, x, _ = _inputs(layers)
        step = lambda: M.deep_forward(ps, cr.tensor(x), cr.tanh)  # noqa: E731
        return step, step()
    return setup


def _cr_jvp(layers):
    def setup():
        ps, x, v = _inputs(layers)
        f = lambda x: M.deep_forward(ps, x, cr.tanh)  # noqa: E731
        step = lambda: cr.jvp(f, (x,), (v,))  # noqa: E731
        return step, step()
    return setup


def _np_forward(layers):
    def setup():
        ps, x, _ = _inputs(layers)
        step = lambda: M.deep_forward(ps, x, np.tanh)  # noqa: E731
        return step, step()
    return setup


def _np_jvp(layers):
    def setup():
        ps, x, v = _inputs(layers)
        step = lambda: M.deep_numpy_jvp(ps, x, v)  # noqa: E731
        return step, step()
    return setup


def _torch(torch, layers, jvp: bool):
    def setup():
        ps0, x0, v0 = _inputs(layers)
        ps, x, v = [torch.tensor(p) for p in ps0], torch.tensor(x0), torch.tensor(v0)
        f = lambda x: M.deep_forward(ps, x, torch.tanh)  # noqa: E731
        if jvp:
            step = lambda: torch.func.jvp(f, (x,), (v,))  # noqa: E731
        else:
            def step():
                with torch.no_grad():
                    return f(x)
        return step, step()
    return setup


def _jax(layers, jvp: bool):
    def make(jax):
        jnp = jax.numpy
        ps, x, v = _inputs(layers)
        f = lambda ps, x: M.deep_forward(ps, x, jnp.tanh)  # noqa: E731
        if jvp:
            return (lambda ps, x, v: jax.jvp(lambda x: f(ps, x), (x,), (v,))), (ps, x, v)
        return f, (ps, x)
    return make


def cases(quick: bool = False) -> list[H.Case]:
    layers = 8 if quick else 96
    fw, jv = "chainrule forward", "chainrule jvp"
    rows = [H.Contender(fw, "chainrule", _cr_forward(layers), check=None),
            H.Contender(jv, "chainrule", _cr_jvp(layers), check=None),
            H.Contender("NumPy forward", "numpy", _np_forward(layers), check=fw),
            H.Contender("NumPy jvp (hand-written)", "numpy", _np_jvp(layers), check=jv)]
    torch = H.peer("torch")
    if torch is not None:
        rows += [H.Contender("PyTorch forward (no_grad)", "torch", _torch(torch, layers, False), check=fw),
                 H.Contender("torch.func.jvp", "torch", _torch(torch, layers, True), check=jv)]
    rows += H.jax_rows(_jax(layers, False), check=fw, what="forward")
    rows += H.jax_rows(_jax(layers, True), check=jv, what="jvp")
    return [H.Case("jvp", f"forward-mode JVP of the {layers} x {WIDTH} MLP vs its forward, batch "
                   f"{BATCH}, float32", rows, baseline=fw,
                   targets=[H.Target("JVP of the deep MLP vs its forward", jv, fw, 1.5)],
                   rtol=2e-3, atol=1e-5, notes=H.skip_note(["torch", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
