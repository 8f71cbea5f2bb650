"""Gradient checkpointing, sqrt(L) segments, on the 96 x 256 tanh MLP (batch 32, float32):
step time (forward + backward) and peak saved-for-backward memory, each vs no checkpointing.

Memory is measured by ``cr.profile`` (bytes of arrays held for backward, peak over the step), for
chainrule only; the JAX rows time ``jax.checkpoint`` on the same segments, eager and jit."""
from __future__ import annotations

import math

import _harness as H
import _models as M

import chainrule as cr

WIDTH, BATCH = 256, 32


def _step_fn(layers: int, segments: int | None):
    ps0, x = M.deep_data(layers, WIDTH, BATCH)
    ps = [cr.tensor(p, requires_grad=True) for p in ps0]
    fns = M.deep_layers(ps, cr.tanh)

    def step():
        for p in ps:
            p.grad = None
        h = cr.checkpoint_sequential(fns, segments, x) if segments else M.deep_forward(ps, x, cr.tanh)
        cr.mean(h * h).backward()
        return [p.grad for p in ps]
    return step


def _chainrule(layers: int, segments: int | None):
    def setup():
        step = _step_fn(layers, segments)
        return step, step()
    return setup


def _torch(torch, layers: int, segments: int | None):
    from torch.utils.checkpoint import checkpoint_sequential

    def setup():
        ps0, x0 = M.deep_data(layers, WIDTH, BATCH)
        ps = [torch.tensor(p, requires_grad=True) for p in ps0]
        fns = M.deep_layers(ps, torch.tanh)
        x = torch.tensor(x0)

        def step():
            for p in ps:
                p.grad = None
            h = (checkpoint_sequential(fns, segments, x, use_reentrant=False) if segments
                 else M.deep_forward(ps, x, torch.tanh))
            torch.mean(h * h).backward()
            return [p.grad for p in ps]
        return step, step()
    return setup


def _jax(layers: int, segments: int | None):
    """jax.grad of the loss, with ``jax.checkpoint`` on the segments checkpoint_sequential would
    checkpoint (its plan: the last segment runs plainly)."""
    def make(jax):
        jnp = jax.numpy
        plan = cr.CheckpointPlan.uniform(layers, segments) if segments else None
        run = lambda ps, h: M.deep_forward(ps, h, jnp.tanh)  # noqa: E731
        saved = jax.checkpoint(run)

        def loss(ps, h):
            if plan is None:
                h = run(ps, h)
            else:
                for (a, b), ck in zip(plan.bounds, plan.checkpointed):
                    h = (saved if ck else run)(ps[2 * a:2 * b], h)
            return jnp.mean(h * h)
        return jax.grad(loss), M.deep_data(layers, WIDTH, BATCH)
    return make


def _peak_saved(layers: int, segments: int | None) -> int:
    step = _step_fn(layers, segments)
    with cr.profile() as p:
        step()
    return p.peak_saved_bytes


def cases(quick: bool = False) -> list[H.Case]:
    layers = 16 if quick else 96
    seg = round(math.sqrt(layers))
    ck, plain = f"chainrule, checkpointed ({seg} segments)", "chainrule, plain"
    rows = [H.Contender(plain, "chainrule", _chainrule(layers, None), check=None),
            H.Contender(ck, "chainrule", _chainrule(layers, seg), check=plain)]
    torch = H.peer("torch")
    if torch is not None:
        rows += [H.Contender("PyTorch, plain", "torch", _torch(torch, layers, None), check=plain),
                 H.Contender(f"PyTorch, checkpointed ({seg} segments)", "torch",
                             _torch(torch, layers, seg), check=plain)]
    rows += H.jax_rows(_jax(layers, None), check=plain, what="plain")
    rows += H.jax_rows(_jax(layers, seg), check=plain, what=f"checkpointed ({seg} segments)")

    def extras() -> dict:
        return {"peak saved bytes, plain": _peak_saved(layers, None),
                "peak saved bytes, checkpointed": _peak_saved(layers, seg)}
    return [H.Case("checkpoint", f"checkpointing sqrt(L) on {layers} x {WIDTH}, batch {BATCH}, "
                   f"float32, fwd+bwd", rows, baseline=plain, extras=extras,
                   targets=[H.Target("checkpointing: step time vs plain", ck, plain, 1.4),
                            H.Target("checkpointing: peak saved memory vs plain",
                                     "peak saved bytes, checkpointed", "peak saved bytes, plain", 0.3)],
                   rtol=2e-3, atol=1e-5, notes=H.skip_note(["torch", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
