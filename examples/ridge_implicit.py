"""A differentiable optimisation layer: ridge regression's solution w*(λ), differentiated in λ.

w*(λ) = argmin_w |X w - y|² + λ|w|² is found by ``cr.root_solve`` on the optimality condition
g(w, λ) = Xᵀ(X w - y) + λ w = 0; its derivative comes from the implicit function theorem, never
from the solver's iterations. Checked against the closed form dw*/dλ = -(XᵀX + λI)⁻¹ w*, then used
to tune λ by gradient descent on a validation loss. Run: python examples/ridge_implicit.py
"""
from __future__ import annotations

import numpy as np

import chainrule as cr


def data(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    w_true = rng.standard_normal(10)
    X, Xv = rng.standard_normal((30, 10)), rng.standard_normal((200, 10))
    y = X @ w_true + 1.5 * rng.standard_normal(30)
    yv = Xv @ w_true + 1.5 * rng.standard_normal(200)
    return cr.tensor(X), cr.tensor(y), cr.tensor(Xv), cr.tensor(yv)


def ridge(X: cr.Tensor, y: cr.Tensor, lam: cr.Tensor) -> cr.Tensor:
    """w*(λ) as a root of the gradient of the ridge objective (differentiable in λ)."""
    optimality = lambda w, lam: X.T @ (X @ w - y) + lam * w          # noqa: E731
    return cr.root_solve(optimality, np.zeros(X.shape[1]), lam)


def main() -> None:
    X, y, Xv, yv = data()
    lam = cr.tensor(3.0, dtype=cr.float64, requires_grad=True)
    w = ridge(X, y, lam)
    A = X.data.T @ X.data + lam.item() * np.eye(10)
    w_closed = np.linalg.solve(A, X.data.T @ y.data)
    dw_closed = -np.linalg.solve(A, w_closed)
    dw_implicit = cr.jacobian(lambda lam: ridge(X, y, lam))(lam).data
    print(f"|w* - closed form|           = {np.max(np.abs(w.data - w_closed)):.2e}")
    print(f"|dw*/dλ implicit - closed|   = {np.max(np.abs(dw_implicit - dw_closed)):.2e}")

    def val_loss(lam: cr.Tensor) -> cr.Tensor:
        r = Xv @ ridge(X, y, lam) - yv
        return (r * r).mean()

    loss = val_loss(lam)
    loss.backward()
    eps = 1e-5
    with cr.no_grad():
        fd = (val_loss(cr.tensor(3.0 + eps, cr.float64)).item()
              - val_loss(cr.tensor(3.0 - eps, cr.float64)).item()) / (2 * eps)
    print(f"d val_loss/dλ: implicit {lam.grad.item():.8f}, finite differences {fd:.8f}")

    log_lam = cr.tensor(np.log(3.0), dtype=cr.float64, requires_grad=True)
    for step in range(31):
        loss = val_loss(cr.exp(log_lam))
        (g,) = cr.autograd.grad(loss, log_lam)
        if step % 10 == 0:
            print(f"step {step:2d}: λ = {np.exp(log_lam.item()):8.4f}   validation MSE = {loss.item():.5f}")
        with cr.no_grad():
            log_lam = cr.tensor(log_lam.data - 0.5 * g.data, requires_grad=True)


if __name__ == "__main__":
    main()
