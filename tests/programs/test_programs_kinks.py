"""The kink conventions, one table (mirrored in docs/programs.md)."""
import numpy as np
import pytest

import chainrule as cr

TIE = cr.tensor([1.0, 3.0, 3.0], dtype=cr.float64)

# (name, function of x, x, expected gradient of sum(f(x)) w.r.t. x)
KINKS = [
    ("relu'(0) = 0", cr.relu, [0.0, -1.0, 2.0], [0.0, 0.0, 1.0]),
    ("abs'(0) = 0", cr.abs, [0.0, -1.0, 2.0], [0.0, -1.0, 1.0]),
    ("maximum tie: 1/2 each", lambda x: cr.maximum(x, x * 0 + 1.0), [1.0, 0.0], [0.5, 0.0]),
    ("minimum tie: 1/2 each", lambda x: cr.minimum(x, x * 0 + 1.0), [1.0, 2.0], [0.5, 0.0]),
    ("amax ties split evenly", cr.amax, [1.0, 3.0, 3.0], [0.0, 0.5, 0.5]),
    ("amin ties split evenly", cr.amin, [1.0, 1.0, 1.0], [1 / 3, 1 / 3, 1 / 3]),
    ("clip passes at its bounds", lambda x: cr.clip(x, 0.0, 1.0), [0.0, 1.0, 2.0, -1.0],
     [1.0, 1.0, 0.0, 0.0]),
    ("sqrt'(0) = inf", cr.sqrt, [0.0, 4.0], [np.inf, 0.25]),
    ("sign: zero", cr.sign, [0.0, -2.0, 3.0], [0.0, 0.0, 0.0]),
    ("round: zero", cr.round, [0.5, 1.4], [0.0, 0.0]),
    ("floor: zero", cr.floor, [1.0, 1.5], [0.0, 0.0]),
    ("ceil: zero", cr.ceil, [1.0, 1.5], [0.0, 0.0]),
]


@pytest.mark.parametrize("name, fn, x, expected", KINKS, ids=[k[0] for k in KINKS])
def test_kink_convention(name, fn, x, expected):
    xt = cr.tensor(x, dtype=cr.float64, requires_grad=True)
    with np.errstate(divide="ignore"):
        fn(xt).sum().backward()
    np.testing.assert_array_equal(xt.grad.data, expected)


@pytest.mark.parametrize("name, fn, x, expected", KINKS[:2] + KINKS[6:7], ids=["relu", "abs", "clip"])
def test_kink_convention_forward_mode(name, fn, x, expected):
    xt = cr.tensor(x, dtype=cr.float64)
    with cr.forward_ad.dual_level():
        cols = []
        for j in range(len(x)):
            t = np.zeros(len(x))
            t[j] = 1.0
            out = fn(cr.forward_ad.make_dual(xt, cr.tensor(t)))
            cols.append(cr.forward_ad.unpack_dual(out).tangent.data[j])
    np.testing.assert_array_equal(cols, expected)


def test_argmax_has_no_gradient():
    x = cr.tensor([1.0, 5.0, 2.0], requires_grad=True)
    idx = cr.argmax(x)
    assert int(idx) == 1 and not getattr(idx, "requires_grad", False)
