"""The reverse-mode example of seeds/002: a 3-4-1 tanh network, one backward pass, checked by a
finite difference. Same draws as the seed (random.seed(0)), same printed figures."""
import random

import numpy as np

import chainrule as cr


def main() -> None:
    random.seed(0)
    w1 = np.array([[random.uniform(-1, 1) for _ in range(3)] for _ in range(4)])
    w2 = np.array([random.uniform(-1, 1) for _ in range(4)])
    x, target = np.array([0.5, -1.2, 2.0]), 0.3

    W1 = cr.tensor(w1, requires_grad=True)
    W2 = cr.tensor(w2, requires_grad=True)

    def loss(W1, W2):
        h = cr.tanh(W1 @ x)
        d = W2 @ h - target
        return d * d

    L = loss(W1, W2)
    L.backward()
    print(f"loss {L.item():.6f}")
    eps = 1e-6
    up, down = w1.copy(), w1.copy()
    up[2, 1] += eps
    down[2, 1] -= eps
    with cr.no_grad():
        fd = (loss(cr.tensor(up), W2).item() - loss(cr.tensor(down), W2).item()) / (2 * eps)
    print(f"dL/dW1[2][1]: reverse mode {W1.grad.data[2, 1]:.8f}, finite difference {fd:.8f}")
    n_params = W1.size + W2.size
    print(f"one backward pass gave all {n_params} gradients; finite differences would need "
          f"{2 * n_params} loss evaluations")


if __name__ == "__main__":
    main()
