"""Control flow: define-by-run differentiates the path taken (loops, while, recursion, early exit)."""
import numpy as np
import pytest

import chainrule as cr


def newton_sqrt(a, iters=None, tol=1e-12):
    """Newton's method for sqrt(a); with iters=None it loops until converged (data-dependent)."""
    z = a * 0 + 1.0
    k = 0
    while True:
        z = 0.5 * (z + a / z)
        k += 1
        if iters is not None and k >= iters:
            return z
        if iters is None and abs(float(z * z - a)) < tol:
            return z


def test_newton_sqrt_gradient_is_that_of_sqrt():
    a = cr.tensor([2.0, 9.0, 0.3], dtype=cr.float64, requires_grad=True)
    z = newton_sqrt(a[0]), newton_sqrt(a[1]), newton_sqrt(a[2])
    cr.stack(z).sum().backward()
    np.testing.assert_allclose(a.grad.data, 0.5 / np.sqrt([2.0, 9.0, 0.3]), rtol=1e-10)


def test_newton_sqrt_gradcheck_fixed_and_data_dependent_trip_counts():
    a = cr.tensor([2.5], dtype=cr.float64, requires_grad=True)
    assert cr.gradcheck(lambda a: newton_sqrt(a, iters=3), (a,), modes=("rev", "fwd"))
    assert cr.gradcheck(lambda a: newton_sqrt(a), (a,), modes=("rev", "fwd"))


def _collatz_like(x):
    # while loop whose trip count depends on the value: halve until below 1
    steps = 0
    while float(x.sum()) > 1.0:
        x = x * 0.5 + cr.sin(x) * 0.01
        steps += 1
    return x, steps


def test_while_loop_trip_count_depends_on_data():
    small = cr.tensor([0.9, 0.05], dtype=cr.float64, requires_grad=True)
    large = cr.tensor([7.0, 3.0], dtype=cr.float64, requires_grad=True)
    assert _collatz_like(small)[1] == 0 and _collatz_like(large)[1] > 2
    assert cr.gradcheck(lambda x: _collatz_like(x)[0], (large,))
    y, _ = _collatz_like(small)
    y.sum().backward()
    np.testing.assert_array_equal(small.grad.data, [1.0, 1.0])     # no iteration ran: identity


def _power_rec(x, n):
    if n == 0:
        return x * 0 + 1
    half = _power_rec(x, n // 2)
    return half * half * (x if n % 2 else 1)


def test_recursion_square_and_multiply():
    x = cr.tensor([1.3, -0.7], dtype=cr.float64, requires_grad=True)
    _power_rec(x, 5).sum().backward()
    np.testing.assert_allclose(x.grad.data, 5 * x.data ** 4, rtol=1e-12)
    assert cr.gradcheck(lambda x: _power_rec(x, 7), (x,), modes=("rev", "fwd"))


def _early_exit_sum(xs, limit):
    total = xs[0] * 0
    for i in range(xs.shape[0]):
        if float(total) > limit:
            break                       # early exit: later terms never enter the graph
        total = total + xs[i] ** 2
    return total


def test_early_exit_gives_zero_gradient_to_unvisited_terms():
    xs = cr.tensor([1.0, 2.0, 3.0, 4.0], dtype=cr.float64, requires_grad=True)
    _early_exit_sum(xs, 4.0).backward()
    np.testing.assert_array_equal(xs.grad.data, [2.0, 4.0, 0.0, 0.0])
    assert cr.gradcheck(lambda xs: _early_exit_sum(xs, 4.0), (xs,))


@pytest.mark.parametrize("x0, expected", [(2.0, 2 * 2.0), (-2.0, np.cos(-2.0))])
def test_branch_condition_has_zero_derivative(x0, expected):
    x = cr.tensor(x0, dtype=cr.float64, requires_grad=True)
    y = x * x if x > 0 else cr.sin(x)        # Python `if` on a tensor: only the taken branch is recorded
    y.backward()
    assert x.grad.item() == pytest.approx(expected, rel=1e-12)
