"""The forward-mode (dual number) example of seeds/002: f(x) = exp(sin(x)·x) / (1 + x²) at x = 1.3.

The seed hand-writes a Dual class; here ``cr.jvp`` pushes the tangent dx/dx = 1 through chainrule's
own ops (true forward mode), and ``cr.grad`` gets the same number by reverse mode. NumPy float64
scalars go in (Python floats would take the default dtype, float32), so everything runs in float64
and NumPy values come out.
"""
import numpy as np

import chainrule as cr


def f(x):
    return cr.exp(cr.sin(x) * x) / (1 + x * x)


def main() -> None:
    x0 = np.float64(1.3)
    fx, dfx = cr.jvp(f, (x0,), (1.0,))              # seed derivative dx/dx = 1
    h = 1e-6
    fd = (f(x0 + h) - f(x0 - h)) / (2 * h)
    print(f"f(1.3) = {fx:.10f}")
    print(f"forward-mode derivative  {dfx:.10f}")
    print(f"central difference       {fd:.10f}")
    print(f"reverse-mode derivative  {cr.grad(f)(x0):.10f}   (cr.grad)")


if __name__ == "__main__":
    main()
