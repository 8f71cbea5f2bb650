"""The extension API: declare a primitive once (forward, VJP and JVP rules) and call it.

A primitive's rules are written with chainrule's own ops, so the same rule runs on ndarrays in a
plain backward and on Tensors when the backward is itself differentiated (see ``core/_registry.py``).

>>> import numpy as np
>>> import chainrule as cr
>>> from chainrule.extend import apply, defprim
>>> CUBE = defprim("cube_example", lambda x: x ** 3,
...                vjps=(lambda g, out, x: 3 * g * x * x,),
...                jvps=(lambda t, out, x: 3 * t * x * x,), saves="x")
>>> x = cr.tensor(2.0, requires_grad=True)
>>> apply(CUBE, (x,)).backward(); x.grad
tensor(12.)
>>> del cr.extend.PRIMITIVES["cube_example"]     # (keep the op table as it was)
"""
from chainrule.core._registry import (
    PRIMITIVES,
    Primitive,
    apply,
    defprim,
    keeping_zero,
    linear_jvps,
    passthrough,
    raw,
    unary,
)

__all__ = ["PRIMITIVES", "Primitive", "apply", "defprim", "keeping_zero", "linear_jvps", "passthrough", "raw",
           "unary"]
