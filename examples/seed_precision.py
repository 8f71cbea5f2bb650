"""Reproduce the seed's precision figures with chainrule's dtypes, then show them on real gradients.

Run: python examples/seed_precision.py   (the functions live in chainrule/tour/precision.py, so
``python -m chainrule tour --only precision`` prints the same lines)
"""
from chainrule.tour.precision import seed_figures, small_gradient_network


def main() -> None:
    seed_figures()
    print()
    small_gradient_network()


if __name__ == "__main__":
    main()
