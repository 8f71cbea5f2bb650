"""C ≈ 6ND, counted: one training step of dense MLPs on D tokens, FLOPs counted by ``cr.profile``.

Forward ≈ 2ND (one multiply-add per parameter per token), backward ≈ 4ND (the gradient w.r.t. the
weights and w.r.t. the layer input, each a matmul of the same size). What is counted: every op the
step runs (matmuls, bias adds, relu, the loss), and nothing that is not run: the first layer's
input is data, so its input gradient (2·D·d_in·width FLOPs) is never computed. The SGD update
(O(N), not O(ND)) runs outside the profile, as the 6ND convention leaves it out.

    python examples/flops_6nd.py            # widths 128..1024, D = 512 tokens
    python examples/flops_6nd.py --quick    # small, for the test suite
"""
from __future__ import annotations

import argparse

import numpy as np

import chainrule as cr

D_IN, D_OUT, HIDDEN_LAYERS = 32, 32, 4


def make_mlp(width: int, rng: np.random.Generator) -> list[cr.Tensor]:
    sizes = [D_IN] + [width] * HIDDEN_LAYERS + [D_OUT]
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append(cr.tensor(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a),
                                requires_grad=True))
        params.append(cr.zeros((b,), requires_grad=True))
    return params


def step(params: list[cr.Tensor], x: cr.Tensor, y: cr.Tensor, lr: float = 1e-2) -> cr.profile:
    """One training step; returns the profile of its forward and backward."""
    with cr.profile() as p:
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i < len(params) - 2:
                h = cr.relu(h)
        loss = ((h - y) ** 2).mean()
        loss.backward()
    for w in params:                      # plain NumPy update: not part of the counted step
        w.data -= lr * w.grad.data
        w.grad = None
    return p


def measure(widths: tuple[int, ...], tokens: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for width in widths:
        params = make_mlp(width, rng)
        x = cr.tensor(rng.standard_normal((tokens, D_IN)).astype(np.float32))
        y = cr.tensor(rng.standard_normal((tokens, D_OUT)).astype(np.float32))
        p = step(params, x, y)
        n = sum(w.size for w in params)
        rows.append({"width": width, "N": n, "D": tokens, "fwd": p.forward_flops,
                     "bwd": p.backward_flops, "total": p.total_flops,
                     "skipped": 2 * tokens * D_IN * width})
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two widths, 64 tokens")
    args = parser.parse_args(argv)
    widths, tokens = ((64, 512), 64) if args.quick else ((128, 256, 512, 1024), 512)
    rows = measure(widths, tokens)
    print(f"dense MLP {D_IN} -> {HIDDEN_LAYERS} x width -> {D_OUT} (relu), one training step on "
          f"D = {tokens} tokens; FLOPs counted by cr.profile")
    print(f"{'width':>6} {'N':>10} {'fwd':>14} {'2ND':>14} {'bwd':>14} {'4ND':>14} {'total':>14} "
          f"{'6ND':>14} {'total/6ND':>9} {'bwd/fwd':>8}")
    for r in rows:
        nd = r["N"] * r["D"]
        print(f"{r['width']:>6} {r['N']:>10,} {r['fwd']:>14,} {2 * nd:>14,} {r['bwd']:>14,} "
              f"{4 * nd:>14,} {r['total']:>14,} {6 * nd:>14,} {r['total'] / (6 * nd):>9.4f} "
              f"{r['bwd'] / r['fwd']:>8.3f}")
    print("backward skips the data gradient of the first layer (2*D*d_in*width FLOPs): "
          + ", ".join(f"width {r['width']}: {r['skipped']:,} = {r['skipped'] / (4 * r['N'] * r['D']):.1%}"
                      f" of 4ND" for r in rows))
    wide = [r for r in rows if r["width"] >= 512]
    ok = all(abs(r["total"] / (6 * r["N"] * r["D"]) - 1) <= 0.05 and abs(r["bwd"] / r["fwd"] - 2) <= 0.1
             for r in wide)
    print(f"widths >= 512: total within 5% of 6ND and bwd/fwd within 2.0 +- 0.1: {'OK' if ok else 'FAILED'}")
    return rows


if __name__ == "__main__":
    main()
