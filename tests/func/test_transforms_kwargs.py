"""Keyword arguments of the transformed function pass through undifferentiated (as in JAX and
torch.func), and jacobian's mode choice sees them."""
import numpy as np
import pytest

import chainrule as cr


def f(x, y, scale=1.0):
    return scale * (x * y ** 2).sum()


@pytest.mark.parametrize("make", [cr.grad, cr.value_and_grad, cr.jacfwd, cr.jacrev, cr.jacobian,
                                  cr.hessian])
def test_keyword_arguments_pass_through_undifferentiated(make):
    # JAX and torch.func pass keyword arguments of the transformed function through to f.
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    got = make(f)(x, y, scale=3.0)
    want = make(lambda x, y: f(x, y, scale=3.0))(x, y)
    for a, b in zip(np.atleast_1d(np.asarray(got, dtype=object)).ravel(),
                    np.atleast_1d(np.asarray(want, dtype=object)).ravel()):
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def test_grad_keyword_argument_value_is_used():
    g = cr.grad(f)(np.array([1.0]), np.array([2.0]), scale=5.0)
    np.testing.assert_allclose(g, [20.0])


def test_jacobian_mode_for_with_keyword_arguments():
    J = cr.jacobian(lambda x, reps=1: cr.concatenate([x] * reps))
    x = np.ones(2)
    assert J.mode_for(x, reps=1) == "reverse"
    assert J.mode_for(x, reps=3) == "forward"      # the keyword changes m: not the same cache entry
    assert J(x, reps=3).shape == (6, 2) and J.last_mode == "forward"
