"""The reverse-mode example of seeds/002: a 3-4-1 tanh network (random.seed(0), the seed's draws),
one backward pass, checked by a finite difference. Prints the seed's figures."""
from chainrule.tour.core import seed_network


def main() -> None:
    loss, analytic, fd = seed_network()
    print(f"loss {loss:.6f}")
    print(f"dL/dW1[2][1]: reverse mode {analytic:.8f}, finite difference {fd:.8f}")
    print("one backward pass gave all 16 gradients; finite differences would need 32 loss evaluations")


if __name__ == "__main__":
    main()
