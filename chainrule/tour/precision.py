"""Tour section for precision: the seed's float16/bfloat16 figures, loss scaling live, FP8 scaling.

``examples/seed_precision.py`` prints the same figures by calling ``seed_figures`` and
``small_gradient_network``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import chainrule as cr
from chainrule.tour._sections import Context, section


def seed_figures(say: Callable[[str], None] = print) -> None:
    """The seed's recipe, verbatim numbers: 100,000 small gradients in float16, scaled, and bfloat16."""
    rng = np.random.default_rng(0)
    grads = np.abs(rng.normal(0, 1e-6, 100000)) * rng.choice([1e-2, 1, 1e2], 100000)
    g16 = cr.tensor(grads).astype(cr.float16).numpy()
    tiny = cr.precision.finfo(cr.float16).smallest_subnormal
    say(f"float16 smallest subnormal {tiny:.1e}; gradients flushed to zero: {np.mean(g16 == 0):.1%}")
    scale = 2.0 ** 14
    scaled = cr.tensor(grads * scale).astype(cr.float16).numpy()
    recovered = scaled.astype(np.float32) / scale
    say(f"with loss scaling by 2^14: zeros {np.mean(scaled == 0):.1%}, median relative error "
          f"{np.median(np.abs(recovered - grads) / grads):.1e}")
    bf = (grads.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)  # truncation
    say(f"bfloat16 (8 exponent bits): zeros {np.mean(bf == 0):.1%}, median relative error "
          f"{np.median(np.abs(bf - grads) / grads):.1e}")
    rne = cr.tensor(grads.astype(np.float32)).astype(cr.bfloat16).numpy().astype(np.float64)
    say(f"cr.bfloat16 (round to nearest even): zeros {np.mean(rne == 0):.1%}, median relative error "
          f"{np.median(np.abs(rne - grads) / grads):.1e}")
    say("  why they differ: the seed truncates the low 16 bits (error uniform in [0, 1) ulp, median "
        "about 1/2 ulp);")
    say("  cr.bfloat16 rounds to nearest even (error in [0, 1/2] ulp, median about 1/4 ulp): half the error")


def small_gradient_network(say: Callable[[str], None] = print) -> None:
    """A tanh MLP whose loss is small, backpropagated under float16 autocast without and with GradScaler."""
    rng = np.random.default_rng(1)
    x = cr.tensor(rng.standard_normal((256, 32)).astype(np.float32))
    y = cr.tensor(rng.standard_normal((256, 1)).astype(np.float32))
    shapes = [(32, 64), (64, 64), (64, 1)]
    params = [cr.tensor((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32),
                        requires_grad=True) for s in shapes]
    opt = _Plain(params)

    def loss_fn() -> cr.Tensor:
        h = x
        for w in params[:-1]:
            h = cr.tanh(h @ w)
        return 1e-4 * cr.mean((h @ params[-1] - y) ** 2)   # a small loss: a late-training regime

    loss_fn().backward()
    ref = _take_grads(params)
    say(f"network 32-64-64-1 (tanh), loss {loss_fn().item():.2e}: float32 gradient elements "
          f"{sum(g.size for g in ref)}, exactly zero {_zero_frac(ref):.1%}")
    with cr.autocast(dtype=cr.float16):
        loss = loss_fn()
    loss.backward()
    plain = _take_grads(params)
    say(f"float16 autocast, no scaling: gradients flushed to zero {_zero_frac(plain):.1%}, "
          f"median relative error {_median_rel(plain, ref):.1e}")
    scaler = cr.amp.GradScaler()
    with cr.autocast(dtype=cr.float16):
        loss = loss_fn()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    scaled = _take_grads(params)
    say(f"float16 autocast + GradScaler (scale 2^16): gradients flushed to zero "
          f"{_zero_frac(scaled):.1%}, median relative error {_median_rel(scaled, ref):.1e}")


def _take_grads(params: list) -> list:
    """The parameters' gradients as arrays, cleared from the parameters for the next backward."""
    grads = [p.grad.numpy() for p in params]
    for p in params:
        p.grad = None
    return grads


class _Plain:
    """The optimizer protocol GradScaler needs: param_groups (no update is made here)."""

    def __init__(self, params: list) -> None:
        self.param_groups = [{"params": params}]


def _zero_frac(grads: list) -> float:
    return float(np.mean(np.concatenate([g.ravel() == 0 for g in grads])))


def _median_rel(grads: list, ref: list) -> float:
    g, r = (np.concatenate([a.ravel().astype(np.float64) for a in v]) for v in (grads, ref))
    return float(np.median(np.abs(g - r) / np.abs(r)))


@section("precision", "Precision: float16 underflow, loss scaling, bfloat16 rounding, FP8 scaling",
         "float16 flushes small gradients to zero; scaling the loss by 2^14 recovers them; bfloat16 "
         "keeps float32's range with less precision; FP8 needs per-tensor or per-block scales")
def precision(ctx: Context) -> None:
    seed_figures(ctx.say)
    ctx.say()
    small_gradient_network(ctx.say)
    ctx.say()
    rng = np.random.default_rng(0)
    n = 128 if ctx.fast else 512
    x = rng.standard_normal((n, 1024)).astype(np.float32)
    x.flat[rng.choice(x.size, n // 4, replace=False)] *= 1000.0      # sparse activation outliers
    w = (rng.standard_normal((1024, 256)) / 32).astype(np.float32)
    for dtype in cr.fp8.FORMATS:
        errs = [cr.fp8.relative_error(cr.fp8.fp8_matmul(x, w, dtype, b), x @ w) for b in (None, 128, 32)]
        ctx.say(f"FP8 {dtype} matmul, activations with outliers: relative error per tensor "
                f"{errs[0]:.2e}, per block of 128 {errs[1]:.2e}, per block of 32 {errs[2]:.2e}")
