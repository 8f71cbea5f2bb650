"""Phase retrieval by gradient descent on complex parameters: a signal from its DFT magnitudes.

A complex signal x (n samples) sits in a frame next to a known reference, a single sample of
amplitude sqrt(n) followed by n - 1 zeros (Fourier holography: the reference is as far from the
signal as the signal is long, which makes the magnitudes determine x, global phase included). Only
the magnitudes m = |DFT_M(frame)| of the 2x-oversampled DFT (M = 4n points) are measured. The
estimate z (complex128, requires_grad) starts at zero and descends

    loss(z) = mean((|DFT_M([reference, z])| - m)^2)

with heavy-ball momentum written out by hand (cr.optim.SGD with momentum=0.9 takes the same
steps): z.grad is dL/dRe z + i dL/dIm z (PyTorch's convention, docs/complex.md), so
``z -= lr * v`` descends with no conjugate anywhere. The DFT is
``cr.fft.fft(frame, n=M)``; ``--dft-matrix`` computes the same spectrum as the product F @ frame
with the M x 2n DFT matrix (one line in ``Problem.spectrum``). The relative error is measured after
aligning the global phase by that of <x, z>.
Run: python examples/phase_retrieval.py [--n 32] [--steps 300] [--dft-matrix]
"""
from __future__ import annotations

import argparse

import numpy as np

import chainrule as cr


def dft(m: int, n: int) -> np.ndarray:
    """The first n columns of the M-point DFT: F[k, j] = exp(-2 pi i k j / M) (zero-padding to M)."""
    k, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return np.exp(-2j * np.pi * k * j / m)


class Problem:
    """The measurement: a known reference, the DFT size, and the measured magnitudes."""

    def __init__(self, n: int = 32, seed: int = 0, dft_matrix: bool = False) -> None:
        rng = np.random.default_rng(seed)
        self.dft_matrix = dft_matrix
        self.n, self.m = n, 4 * n                        # frame of 2n samples, oversampled 2x
        self.x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)) / np.sqrt(2)
        self.reference = np.zeros(n, np.complex128)
        self.reference[0] = np.sqrt(n)
        self.F = cr.tensor(dft(self.m, 2 * n))
        with cr.no_grad():
            self.magnitudes = cr.abs(self.spectrum(cr.tensor(self.x))).detach()

    def spectrum(self, z: cr.Tensor) -> cr.Tensor:
        frame = cr.concatenate([cr.tensor(self.reference), z])
        if self.dft_matrix:
            return self.F @ frame                        # the same DFT as a matrix product
        return cr.fft.fft(frame, n=self.m)               # zero-padded to M points

    def loss(self, z: cr.Tensor) -> cr.Tensor:
        return cr.mean((cr.abs(self.spectrum(z)) - self.magnitudes) ** 2)

    def relative_error(self, z: np.ndarray) -> float:
        """|e^{-i phi} z - x| / |x| with phi the phase of <x, z> (the best global phase)."""
        inner = np.vdot(self.x, z)                       # sum(conj(x) * z)
        phase = inner / abs(inner) if inner != 0 else 1.0
        return float(np.linalg.norm(z / phase - self.x) / np.linalg.norm(self.x))


def solve(problem: Problem, steps: int = 300, lr: float = 0.5, momentum: float = 0.9) -> tuple:
    """Heavy-ball gradient descent from z = 0; returns (z, losses)."""
    z = cr.tensor(np.zeros(problem.n, np.complex128), requires_grad=True)
    velocity = np.zeros(problem.n, np.complex128)
    losses = []
    for _ in range(steps):
        z.grad = None
        loss = problem.loss(z)
        loss.backward()
        losses.append(loss.item())
        with cr.no_grad():
            velocity = momentum * velocity + z.grad.data
            z -= lr * velocity                           # complex z.grad: descends as written
    losses.append(problem.loss(z).item())
    return z.detach().data, losses


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=32, help="signal length")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dft-matrix", action="store_true", help="F @ frame instead of cr.fft.fft")
    args = ap.parse_args(argv)
    problem = Problem(args.n, args.seed, args.dft_matrix)
    how = "F @ frame" if args.dft_matrix else "cr.fft.fft"
    print(f"signal: {args.n} complex samples; measured: {problem.m} DFT magnitudes "
          f"(frame of {2 * args.n} with a known reference; {how}), complex128")
    z, losses = solve(problem, args.steps)
    print(f"initial loss {losses[0]:.3e}")
    print(f"final loss   {losses[-1]:.3e}  after {args.steps} steps")
    print(f"relative error of the recovered signal (global phase aligned): "
          f"{problem.relative_error(z):.3e}")


if __name__ == "__main__":
    main()
