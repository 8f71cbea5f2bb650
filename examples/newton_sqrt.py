"""Differentiating through a program's control flow: Newton's method for sqrt(a).

The loop runs until |z^2 - a| < tol, so its trip count depends on the data; define-by-run records
the iterations that ran, and the gradient along that path converges to d sqrt(a)/da = 1/(2 sqrt a).
The stopping test (a branch condition) has derivative zero. Run: python examples/newton_sqrt.py
"""
from __future__ import annotations

import numpy as np

import chainrule as cr


def newton_sqrt(a: cr.Tensor, tol: float = 1e-12, max_iter: int = 100) -> tuple[cr.Tensor, int]:
    """sqrt(a) by Newton's method, z <- (z + a / z) / 2, looping until converged."""
    z = a * 0 + 1.0
    for k in range(1, max_iter + 1):
        z = 0.5 * (z + a / z)
        if abs(float(z * z - a)) < tol:          # data-dependent exit; no gradient flows through it
            return z, k
    raise RuntimeError(f"newton_sqrt: no convergence after {max_iter} iterations")


def main() -> None:
    print(f"{'a':>8}{'iterations':>12}{'sqrt(a)':>14}{'dz/da (AD)':>16}{'1/(2 sqrt a)':>16}")
    for value in (0.01, 2.0, 100.0, 1e6):
        a = cr.tensor(value, dtype=cr.float64, requires_grad=True)
        z, k = newton_sqrt(a)
        z.backward()
        print(f"{value:>8g}{k:>12d}{z.item():>14.8g}{a.grad.item():>16.10g}"
              f"{0.5 / np.sqrt(value):>16.10g}")
    a = cr.tensor([2.0], dtype=cr.float64, requires_grad=True)
    print("gradcheck through the loop (reverse and forward mode):",
          cr.gradcheck(lambda a: newton_sqrt(a)[0], (a,), modes=("rev", "fwd")))


if __name__ == "__main__":
    main()
