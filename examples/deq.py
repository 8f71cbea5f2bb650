"""A small deep-equilibrium (DEQ) layer: unrolled vs implicit gradients, and their memory.

The layer's output is the fixed point z* = tanh(z* W + x U + b). Unrolling k iterations records
k copies of the layer (saved-for-backward bytes grow linearly in k) and its gradient converges to
the implicit one as k grows; ``cr.fixed_point`` records none of them (flat memory) and gets the
gradient from the implicit function theorem. Memory figures come from ``cr.profile``.
Run: python examples/deq.py [--fast]
"""
from __future__ import annotations

import argparse

import numpy as np

import chainrule as cr


def make_layer(hidden: int = 32, features: int = 16, batch: int = 8, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((hidden, hidden))
    w *= 0.6 / np.linalg.norm(w, 2)                     # contraction: tanh' <= 1, |W| = 0.6
    return {"W": cr.tensor(w, requires_grad=True),
            "U": cr.tensor(rng.standard_normal((features, hidden)) / np.sqrt(features),
                           requires_grad=True),
            "b": cr.tensor(np.zeros(hidden), requires_grad=True),
            "x": cr.tensor(rng.standard_normal((batch, features))),
            "v": cr.tensor(rng.standard_normal((batch, hidden)))}


def cell(z: cr.Tensor, W: cr.Tensor, injection: cr.Tensor) -> cr.Tensor:
    return cr.tanh(z @ W + injection)


def loss_and_saved(layer: dict, k: int | None) -> tuple[cr.Tensor, int]:
    """Loss through k unrolled iterations (k=None: implicit), and the peak saved bytes."""
    W, U, b, x, v = (layer[n] for n in "WUbxv")
    with cr.profile() as p:
        injection = x @ U + b
        z0 = np.zeros(v.shape)
        if k is None:
            z = cr.fixed_point(cell, z0, W, injection, tol=1e-12)
        else:
            z = cr.tensor(z0)
            for _ in range(k):
                z = cell(z, W, injection)
        loss = (z * v).sum()
    return loss, p.peak_saved_bytes


def gradients(layer: dict, k: int | None) -> tuple[list, int]:
    loss, saved = loss_and_saved(layer, k)
    params = [layer[n] for n in "WUb"]
    return [g.data for g in cr.autograd.grad(loss, params)], saved


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fast", action="store_true")
    args = ap.parse_args(argv)
    layer = make_layer()
    exact, implicit_bytes = gradients(layer, None)
    print(f"{'method':<18}{'max |grad - implicit grad|':>28}{'saved for backward':>22}")
    for k in ((5, 10, 20, 40) if args.fast else (5, 10, 20, 40, 80, 160)):
        g, saved = gradients(layer, k)
        err = max(float(np.max(np.abs(a - b))) for a, b in zip(g, exact))
        print(f"{'unrolled k=' + str(k):<18}{err:>28.3e}{saved:>20,d} B")
    print(f"{'implicit':<18}{0.0:>28.3e}{implicit_bytes:>20,d} B")


if __name__ == "__main__":
    main()
