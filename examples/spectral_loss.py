"""Losses on spectra: gradients through ``cr.linalg.eigvalsh`` and the nuclear norm.

(a) **Inverse eigenvalue problem.** A symmetric matrix A(B) = B + B^T (n x n, B free) is fitted to
    a target spectrum: loss(B) = sum((eigvalsh(A(B)) - target)^2), minimised with ``cr.optim.Adam``.
    The gradient of an eigenvalue is dlambda_i/dA = v_i v_i^T, so the loss's gradient is
    V diag(2 (lambda - target)) V^T, symmetrised through B + B^T; ``eigvalsh`` needs no
    eigenvector cotangent, so it is differentiable even where eigenvalues cross during the descent.
(b) **Matrix completion by nuclear-norm regularisation.** A rank-r matrix M (m x n) is observed on
    a random half of its entries (mask). The estimate X minimises

        loss(X) = 0.5 * ||mask * (X - M)||_F^2 + lam * ||X||_nuc

    with ``cr.linalg.norm(X, 'nuc')`` (the sum of singular values; its gradient is U V^T where the
    singular values are distinct and nonzero), by Adam with a decaying step. The singular values
    of the result show the recovered rank (the nuclear norm pulls the small ones to ~0), and the
    relative error on the *unobserved* entries measures the completion.

Everything is float64 and takes a few seconds.
Run: python examples/spectral_loss.py [--steps-eig 400] [--steps-nuc 1500]
"""
from __future__ import annotations

import argparse

import numpy as np

import chainrule as cr


# ----- (a) a symmetric matrix with a prescribed spectrum -----
class SpectrumFit:
    """Fit A(B) = B + B^T to a target spectrum (ascending, as eigvalsh returns it)."""

    def __init__(self, n: int = 8, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.n = n
        self.target = np.linspace(-2.0, 3.0, n)            # distinct, ascending
        self.b0 = rng.standard_normal((n, n)) / np.sqrt(n)

    def loss(self, b: cr.Tensor) -> cr.Tensor:
        w = cr.linalg.eigvalsh(b + b.T)
        return cr.sum((w - cr.tensor(self.target)) ** 2)

    def solve(self, steps: int = 400, lr: float = 0.05) -> tuple[np.ndarray, list[float]]:
        b = cr.tensor(self.b0.copy(), requires_grad=True)
        opt = cr.optim.Adam([b], lr=lr)
        sched = cr.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = self.loss(b)
            loss.backward()
            losses.append(loss.item())
            opt.step()
            sched.step()
        losses.append(self.loss(b).item())
        return b.detach().data, losses


# ----- (b) nuclear-norm matrix completion -----
class Completion:
    """A rank-r m x n matrix observed on a random fraction of its entries."""

    def __init__(self, m: int = 30, n: int = 24, rank: int = 2, observed: float = 0.5,
                 lam: float = 0.05, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.m, self.n, self.rank, self.lam = m, n, rank, lam
        self.M = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
        self.mask = (rng.random((m, n)) < observed).astype(np.float64)

    def loss(self, x: cr.Tensor) -> cr.Tensor:
        r = cr.tensor(self.mask) * (x - cr.tensor(self.M))
        return 0.5 * cr.sum(r * r) + self.lam * cr.linalg.norm(x, "nuc")

    def solve(self, steps: int = 1500, lr: float = 0.02) -> tuple[np.ndarray, list[float]]:
        x = cr.tensor(self.mask * self.M, requires_grad=True)   # start: unobserved entries 0
        opt = cr.optim.Adam([x], lr=lr)
        sched = cr.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr * 1e-3)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = self.loss(x)
            loss.backward()
            losses.append(loss.item())
            opt.step()
            sched.step()
        losses.append(self.loss(x).item())
        return x.detach().data, losses

    def reference(self, iters: int = 3000) -> np.ndarray:
        """The minimiser by proximal gradient in NumPy: a gradient step on the data term (step 1,
        its Lipschitz constant), then singular value thresholding by lam (the nuclear norm's prox)."""
        x = self.mask * self.M
        for _ in range(iters):
            u, s, vt = np.linalg.svd(x - self.mask * (x - self.M), full_matrices=False)
            x = (u * np.maximum(s - self.lam, 0.0)) @ vt
        return x

    def unobserved_error(self, x: np.ndarray) -> float:
        hidden = self.mask == 0
        return float(np.linalg.norm((x - self.M)[hidden]) / np.linalg.norm(self.M[hidden]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps-eig", type=int, default=400)
    ap.add_argument("--steps-nuc", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    fit = SpectrumFit(seed=args.seed)
    b, losses = fit.solve(args.steps_eig)
    w = np.linalg.eigvalsh(b + b.T)
    print(f"(a) spectrum fit: A = B + B^T, {fit.n}x{fit.n}, loss on cr.linalg.eigvalsh, "
          f"Adam, {args.steps_eig} steps")
    print(f"    initial loss {losses[0]:.3e}")
    print(f"    final loss   {losses[-1]:.3e}")
    print(f"    max eigenvalue error {np.max(np.abs(w - fit.target)):.3e}")

    comp = Completion(seed=args.seed)
    x, losses = comp.solve(args.steps_nuc)
    s = np.linalg.svd(x, compute_uv=False)
    rank = int(np.sum(s > 1e-3 * s[0]))
    print(f"(b) matrix completion: rank-{comp.rank} {comp.m}x{comp.n}, "
          f"{comp.mask.mean():.0%} of the entries observed, "
          f"0.5||mask(X - M)||_F^2 + {comp.lam} ||X||_nuc, Adam, {args.steps_nuc} steps")
    print(f"    initial loss {losses[0]:.3e}")
    print(f"    final loss   {losses[-1]:.3e}")
    best = comp.loss(cr.tensor(comp.reference())).item()
    print(f"    optimum (NumPy singular value thresholding) {best:.3e}; "
          f"excess loss: initial {losses[0] - best:.3e}, final {losses[-1] - best:.3e}")
    print(f"    relative error on the unobserved entries: {comp.unobserved_error(x):.3e}")
    print(f"    singular values of X: {np.array2string(s[:6], precision=3)} ...")
    print(f"    singular values of M: {np.array2string(np.linalg.svd(comp.M, compute_uv=False)[:3], precision=3)}")
    print(f"    recovered rank {rank} (singular values above 1e-3 x the largest)")


if __name__ == "__main__":
    main()
