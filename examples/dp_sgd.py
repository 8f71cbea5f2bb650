"""Differentially private SGD (Abadi et al., 2016) on the embedded digits, next to plain SGD.

Each step of DP-SGD takes every example's gradient, clips it to norm C, sums the clipped gradients,
adds Gaussian noise of standard deviation sigma * C and divides by the batch size. Two ways to get
the same clipped sum here:

- ``vmap``: the per-example gradients themselves, ``cr.vmap(cr.grad(loss), in_axes=(None, 0, 0))``
  over ``cr.func.functional_call(model, params, ...)``, then clip and sum;
- ``ghost``: only the per-example gradient *norms* (``cr.func.per_example_grad_norms``: one forward
  and backward, no per-example gradients), then one ordinary backward of sum_i c_i loss_i with the
  clipping factors c_i = min(1, C / norm_i), which is the sum of the clipped gradients.

Both runs draw the same noise, so they train the same model up to float rounding. The model is the
digits MLP of ``python -m chainrule train`` (64-256-10, ReLU); non-private training takes the same
batches and steps with the batch's mean gradient. This example reports accuracy and cost only: it
does no privacy accounting (the epsilon of sigma, the sampling rate and the steps needs an
accountant, e.g. RDP).

Run: python examples/dp_sgd.py [--quick] [--epochs 8] [--clip 1.0] [--sigma 1.0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import chainrule as cr
from chainrule import train

F = cr.nn.functional


def example_loss(model: cr.nn.Module):
    """One example's loss as a function of the parameters (what ``vmap(grad)`` maps)."""
    def loss(params: dict, x: cr.Tensor, y: cr.Tensor) -> cr.Tensor:
        return F.cross_entropy(cr.func.functional_call(model, params, (x[None],)), y[None])
    return loss


class PrivateStep:
    """One DP-SGD update: per-example clipping to ``clip``, noise ``sigma * clip``, the mean."""

    def __init__(self, model: cr.nn.Module, clip: float, sigma: float, method: str, seed: int) -> None:
        self.model, self.clip, self.sigma, self.method = model, clip, sigma, method
        self.noise = np.random.default_rng(seed)
        self.per_example = cr.vmap(cr.grad(example_loss(model)), in_axes=(None, 0, 0))

    def clipped_sum(self, xb: cr.Tensor, yb: cr.Tensor) -> list:
        """The sum over the batch of each example's gradient clipped to norm ``clip``."""
        params = dict(self.model.named_parameters())
        if self.method == "vmap":
            grads = [g.data for g in self.per_example({k: p.detach() for k, p in params.items()}, xb, yb).values()]
            norms = np.sqrt(sum(_per_row(g, g) for g in grads))
            factor = np.minimum(1.0, self.clip / np.maximum(norms, 1e-12)).astype(grads[0].dtype)
            return [np.einsum("n,n...->...", factor, g) for g in grads]
        norms = cr.func.per_example_grad_norms(_losses, self.model, xb, yb)
        factor = np.minimum(1.0, self.clip / np.maximum(norms, 1e-12)).astype(np.float32)
        self.model.zero_grad()
        (_losses(self.model(xb), yb) * cr.tensor(factor)).sum().backward()
        return [p.grad.data for p in params.values()]

    def __call__(self, model: cr.nn.Module, optimizer: cr.optim.Optimizer, xb: cr.Tensor, yb: cr.Tensor) -> None:
        summed = self.clipped_sum(xb, yb)
        for p, s in zip(model.parameters(), summed):
            noisy = s + self.noise.normal(0.0, self.sigma * self.clip, size=s.shape).astype(s.dtype)
            p.grad = cr.tensor(noisy / len(xb))
        optimizer.step()


def _per_row(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum over all but the first axis of a * b (einsum reads the per-example gradients' strided
    layout as it is; a reshape would copy them)."""
    axes = "abcdefgh"[:a.ndim - 1]
    return np.einsum(f"n{axes},n{axes}->n", a, b)


def _losses(out: cr.Tensor, y: cr.Tensor) -> cr.Tensor:
    return F.cross_entropy(out, y, reduction="none")


def plain_step(model: cr.nn.Module, optimizer: cr.optim.Optimizer, xb: cr.Tensor, yb: cr.Tensor) -> None:
    optimizer.zero_grad()
    F.cross_entropy(model(xb), yb).backward()
    optimizer.step()


def run(step_fn, data: tuple, epochs: int, batch: int, lr: float, seed: int, make_step=None) -> tuple:
    """Train a fresh digits MLP: (test accuracy, median seconds per step)."""
    x_tr, y_tr, x_te, y_te, n_features, n_classes = data
    rng = np.random.default_rng(seed)
    model = train.build_model("mlp", n_features, n_classes, generator=rng)
    optimizer = cr.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    step = make_step(model) if make_step is not None else step_fn
    order = np.random.default_rng(seed + 1)
    seconds = []
    for _ in range(epochs):
        for xb, yb in cr.data.DataLoader(x_tr, y_tr, batch, shuffle=True, drop_last=True, generator=order):
            t0 = time.perf_counter()
            step(model, optimizer, xb, yb)
            seconds.append(time.perf_counter() - t0)
    # the median: on a shared machine a few steps wait for a core, which would dominate a mean
    return train.evaluate(model, x_te, y_te)[1], float(np.median(seconds))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="per-example gradient norm bound C")
    p.add_argument("--sigma", type=float, default=1.0, help="noise multiplier: noise std is sigma * C")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="3 epochs (the test's setting)")
    args = p.parse_args(argv)
    epochs = 3 if args.quick else args.epochs
    data = train.prepare(None, "mlp", args.seed)
    print(f"digits MLP 64-256-10, {len(data[0])} training examples, batch {args.batch_size}, {epochs} epochs, "
          f"SGD lr {args.lr} momentum 0.9; DP: clip C = {args.clip}, noise sigma * C = {args.sigma * args.clip}")
    common = (data, epochs, args.batch_size, args.lr, args.seed)
    plain_acc, plain_s = run(plain_step, *common)
    print(f"non-private      test accuracy {plain_acc:.3f}  {plain_s * 1e3:6.2f} ms/step")
    for method in ("vmap", "ghost"):
        acc, s = run(None, *common, make_step=lambda m, method=method: PrivateStep(
            m, args.clip, args.sigma, method, args.seed + 2))
        print(f"private ({method:5s})  test accuracy {acc:.3f}  {s * 1e3:6.2f} ms/step  "
              f"({s / plain_s:.1f}x plain)")


if __name__ == "__main__":
    main()
