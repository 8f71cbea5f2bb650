"""Second derivatives through a fixed point: implicit vs unrolled Hessians of a DEQ layer's loss.

z* = tanh(z* W + x U + b), hidden 32, batch 8, float64, |W|_2 = 0.6 (the layer of deq.py). The
Hessian of loss(b) = sum(v * z*(b)) with respect to b (32 x 32) by ``cr.hessian`` (forward over
reverse) through ``cr.fixed_point``, and through k unrolled iterations; then one Hessian-vector
product with respect to W (1024 entries) by ``cr.hvp``. Also the scalar z = a cos z + x, whose
d²z/dx² = -a cos z / (1 + a sin z)³ follows from the implicit function theorem. Times are medians
of runs interleaved over all the methods (each in turn, every round).
Run: python examples/deq_hessian.py [--fast]
"""
from __future__ import annotations

import argparse

import numpy as np

import chainrule as cr
from chainrule.utils.timing import describe, interleaved_medians


def make_layer(hidden: int = 32, features: int = 16, batch: int = 8, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((hidden, hidden))
    w *= 0.6 / np.linalg.norm(w, 2)
    return {"W": w, "U": rng.standard_normal((features, hidden)) / np.sqrt(features),
            "b": rng.standard_normal(hidden) * 0.1, "x": rng.standard_normal((batch, features)),
            "v": rng.standard_normal((batch, hidden))}


def cell(z: cr.Tensor, W: cr.Tensor, injection: cr.Tensor) -> cr.Tensor:
    return cr.tanh(z @ W + injection)


def loss_fn(layer: dict, k: int | None):
    """loss(W, b) through k unrolled iterations, or implicitly (k=None)."""
    x, U, v = (cr.tensor(layer[n]) for n in "xUv")

    def loss(W, b):
        injection = x @ U + b
        if k is None:
            z = cr.fixed_point(cell, np.zeros(v.shape), W, injection, tol=1e-12)
        else:
            z = cr.zeros(v.shape, dtype=cr.float64)
            for _ in range(k):
                z = cell(z, W, injection)
        return (z * v).sum()
    return loss


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fast", action="store_true")
    args = ap.parse_args(argv)
    rounds = 3 if args.fast else 5
    layer = make_layer()
    W, b = layer["W"], layer["b"]
    V = np.random.default_rng(1).standard_normal(W.shape)
    implicit = "implicit (`cr.fixed_point`)"
    ks = (10, 40) if args.fast else (10, 20, 40, 80)
    losses = {f"unrolled k = {k}": loss_fn(layer, k) for k in ks}
    losses[implicit] = loss_fn(layer, None)
    fns = {}
    for name, loss in losses.items():
        fns["hessian", name] = lambda loss=loss: cr.hessian(lambda b: loss(W, b))(b)
        fns["hvp", name] = lambda loss=loss: cr.hvp(lambda W: loss(W, b), (W,), (V,))[0]
    out = {key: fn() for key, fn in fns.items()}          # the results, and the timing's warm-up
    times = interleaved_medians(fns, rounds, warmup=0)
    print(f"times: {describe(rounds)}")
    print("| method | max |H_b - implicit| | hessian (b) time | max |Hv_W - implicit| "
          "| hvp (W) time |")
    print("|---|---|---|---|---|")
    for name in losses:
        h, v = ("—" if name == implicit else
                f"{np.abs(out[what, name] - out[what, implicit]).max():.1e}" for what in ("hessian", "hvp"))
        print(f"| {name} | {h} | {times['hessian', name] * 1e3:.0f} ms | {v} | "
              f"{times['hvp', name] * 1e3:.0f} ms |")
    H = out["hessian", implicit]
    print(f"symmetry of the implicit Hessian: max |H - Hᵀ| = {np.abs(H - H.T).max():.1e}")

    a, x = 0.5, 0.3
    d2 = cr.grad(cr.grad(lambda x: cr.fixed_point(lambda z, x: a * cr.cos(z) + x, 0.0, x)))(x)
    z = x
    for _ in range(200):
        z = a * np.cos(z) + x
    closed = -a * np.cos(z) / (1 + a * np.sin(z)) ** 3
    print(f"z = 0.5 cos z + x at x = 0.3: d²z/dx² = {float(d2):.12f}, closed form {closed:.12f}, "
          f"|difference| = {abs(float(d2) - closed):.1e}")


if __name__ == "__main__":
    main()
