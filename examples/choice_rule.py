"""The forward-vs-reverse choice rule of the seeds, measured.

1. Jacobian of f(x) = tanh(A x) for (n=1000 inputs, m=4 outputs) and (n=4, m=1000) by jacfwd (one
   forward pass per input), jacrev (one backward per output) and jacobian(mode="auto"), which picks
   forward when n < m. Medians of interleaved runs; auto must be (about) as fast as the faster mode.
2. hvp (forward-over-reverse) costs a small multiple of grad.
3. Saved-for-backward memory of a 100-layer tanh chain: grows with depth in reverse mode, stays at
   zero in forward mode (counted by cr.profile).

Run: python examples/choice_rule.py [--quick]
"""
import argparse

from chainrule.tour.modes import saved_bytes, time_hvp, time_jacobians
from chainrule.utils.timing import describe


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (for the test suite)")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 9

    print(f"Jacobian of f(x) = tanh(A x), {describe(rounds)}")
    print(f"{'n':>5} {'m':>5} {'jacfwd':>10} {'jacrev':>10} {'auto':>10} {'fwd/rev':>8}  auto picked  faster")
    for n, m in ((1000, 4), (4, 1000)):
        r = time_jacobians(n, m, rounds)
        print(f"{n:>5} {m:>5} {r['forward'] * 1e3:8.2f}ms {r['reverse'] * 1e3:8.2f}ms "
              f"{r['auto'] * 1e3:8.2f}ms {r['forward'] / r['reverse']:8.3g}  {r['picked']:<11}  "
              f"{r['faster']}")

    n = 300 if args.quick else 1000
    r = time_hvp(n, rounds)
    print(f"\nHessian-vector product, f(x) = sum(tanh(A tanh(A x))), n = {n}, {describe(rounds)}")
    print(f"f {r['f'] * 1e3:.3f} ms   grad {r['grad'] * 1e3:.3f} ms   hvp {r['hvp'] * 1e3:.3f} ms")
    print(f"grad/f = {r['grad'] / r['f']:.2f}   hvp/f = {r['hvp'] / r['f']:.2f}   "
          f"hvp/grad = {r['hvp'] / r['grad']:.2f}")
    print(f"hvp vs hessian @ v (40-dim slice): max |difference| = {r['error']:.1e}")

    print("\nSaved for backward by a tanh chain (width 1000, float64)")
    print(f"{'depth':>6} {'reverse':>12} {'forward':>9}")
    for depth in (1, 10, 50, 100):
        print(f"{depth:>6} {saved_bytes(depth, 1000, 'reverse'):>10} B "
              f"{saved_bytes(depth, 1000, 'forward'):>7} B")


if __name__ == "__main__":
    main()
