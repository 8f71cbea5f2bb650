"""Second and third derivatives through fixed_point / root_solve: the backward and tangent linear
solves are implicit solves themselves, checked against closed forms (implicit function theorem),
long unrolled iterations and finite differences, in all four reverse/forward compositions; and a
closure over a tensor that needs a derivative raises instead of dropping it."""
import numpy as np
import pytest

import chainrule as cr

F64 = cr.float64


# ----- z = a cos z + x: closed forms by the implicit function theorem -----

def _contraction(p):
    return cr.fixed_point(lambda z, p: p[0] * cr.cos(z) + p[1], cr.tensor(0.0, dtype=F64), p)


def _contraction_unrolled(p, k=200):
    z = cr.tensor(0.0, dtype=F64)
    for _ in range(k):
        z = p[0] * cr.cos(z) + p[1]
    return z


def _contraction_closed_form(a, x):
    z = x
    for _ in range(500):
        z = a * np.cos(z) + x
    d = 1 + a * np.sin(z)
    z_a, z_x = np.cos(z) / d, 1 / d
    d_a, d_x = np.sin(z) + a * np.cos(z) * z_a, a * np.cos(z) * z_x
    z_aa = (-np.sin(z) * z_a * d - np.cos(z) * d_a) / d ** 2
    z_ax = (-np.sin(z) * z_x * d - np.cos(z) * d_x) / d ** 2
    z_xx = -a * np.cos(z) / d ** 3
    return np.array([z_a, z_x]), np.array([[z_aa, z_ax], [z_ax, z_xx]])


P0 = np.array([0.5, 0.3])


def test_scalar_contraction_hessian_matches_closed_form_and_unrolled():
    grad, hess = _contraction_closed_form(*P0)
    np.testing.assert_allclose(cr.grad(_contraction)(P0), grad, atol=1e-10)
    np.testing.assert_allclose(cr.hessian(_contraction)(P0), hess, atol=1e-9)
    np.testing.assert_allclose(cr.hessian(_contraction_unrolled)(P0), hess, atol=1e-9)


@pytest.mark.parametrize("compose", [
    lambda f: cr.hessian(f),                        # forward over reverse
    lambda f: cr.jacrev(cr.grad(f)),                # reverse over reverse
    lambda f: cr.jacfwd(cr.jacfwd(f)),              # forward over forward
    lambda f: cr.jacrev(cr.jacfwd(f)),              # reverse over forward
], ids=["fwd-rev", "rev-rev", "fwd-fwd", "rev-fwd"])
def test_scalar_contraction_all_compositions(compose):
    _, hess = _contraction_closed_form(*P0)
    np.testing.assert_allclose(compose(_contraction)(P0), hess, atol=1e-9)


def test_create_graph_grad_of_grad_matches_closed_form():
    _, hess = _contraction_closed_form(*P0)
    p = cr.tensor(P0, dtype=F64, requires_grad=True)
    (g,) = cr.autograd.grad(_contraction(p), p, create_graph=True)
    assert g.requires_grad
    (h0,) = cr.autograd.grad(g[0], p, retain_graph=True)
    (h1,) = cr.autograd.grad(g[1], p)
    np.testing.assert_allclose(np.stack([h0.data, h1.data]), hess, atol=1e-9)


@pytest.mark.parametrize("third", [
    lambda f: cr.grad(cr.grad(cr.grad(f))),
    lambda f: cr.jacfwd(cr.jacfwd(cr.jacfwd(f))),
    lambda f: cr.jacfwd(cr.hessian(f)),
    lambda f: cr.grad(cr.jacfwd(cr.grad(f))),
    lambda f: cr.grad(cr.jacfwd(cr.jacfwd(f))),
], ids=["rrr", "fff", "ffr", "rfr", "rff"])
def test_third_derivative_matches_unrolled(third):
    def solve(x):
        return cr.fixed_point(lambda z, x: 0.5 * cr.cos(z) + x, cr.tensor(0.0, dtype=F64), x)

    def unrolled(x):
        z = cr.tensor(0.0, dtype=F64)
        for _ in range(200):
            z = 0.5 * cr.cos(z) + x
        return z
    x = cr.tensor(0.3, dtype=F64)
    d3 = third(solve)(x)
    np.testing.assert_allclose(d3, cr.grad(cr.grad(cr.grad(unrolled)))(x), atol=1e-8)
    h = 1e-4           # and by central differences of the closed-form second derivative
    fd = (_contraction_closed_form(0.5, 0.3 + h)[1][1, 1]
          - _contraction_closed_form(0.5, 0.3 - h)[1][1, 1]) / (2 * h)
    np.testing.assert_allclose(d3, fd, rtol=1e-6)


def _solve(a):
    return cr.fixed_point(lambda z, a: a * cr.cos(z), cr.tensor(0.0, dtype=F64), a)


@pytest.mark.parametrize("second_order", [
    lambda: cr.hvp(_solve, (0.5,), (1.0,))[0],
    lambda: cr.hessian(_solve)(0.5),
    lambda: cr.jvp(lambda a: cr.jvp(_solve, (a,), (1.0,))[1], (0.5,), (1.0,))[1],
    lambda: cr.jacfwd(cr.jacfwd(_solve))(0.5),
    lambda: cr.grad(lambda a: cr.jvp(_solve, (a,), (1.0,))[1])(0.5),
    lambda: cr.jacrev(cr.jacfwd(_solve))(0.5),
], ids=["hvp", "hessian", "jvp-jvp", "jacfwd-jacfwd", "grad-jvp", "jacrev-jacfwd"])
def test_second_order_through_implicit_solve_matches_central_differences(second_order):
    # all of these once returned 0, then raised; now the solve's second-order terms are solves too
    h = 1e-5
    fd = (cr.grad(_solve)(0.5 + h) - cr.grad(_solve)(0.5 - h)) / (2 * h)       # about -0.73
    np.testing.assert_allclose(float(np.asarray(second_order())), fd, rtol=1e-6)


def test_first_order_jvp_with_parameter_requiring_grad_still_works():
    a = cr.tensor(0.5, dtype=F64, requires_grad=True)
    _, t = cr.jvp(_solve, (a,), (cr.tensor(1.0, dtype=F64),))
    np.testing.assert_allclose(t.item(), cr.grad(_solve)(0.5), rtol=1e-8)


# ----- a deep-equilibrium layer: Hessians of a loss vs the unrolled iteration -----

def _deq(seed=0, n=4):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, n)) * 0.5 / np.sqrt(n)
    x = rng.standard_normal(n)
    return W, x


def _f(z, W, x):
    return cr.tanh(W @ z + x)


def _loss(z):
    return (z * z * cr.tensor([1.0, -0.5, 2.0, 0.7])).sum() + cr.sin(z).sum()


def _loss_implicit(W, x, **kw):
    return _loss(cr.fixed_point(_f, np.zeros(4), W, x, **kw))


def _loss_unrolled(W, x, k=100):
    z = cr.zeros(4, dtype=F64)
    for _ in range(k):
        z = _f(z, W, x)
    return _loss(z)


@pytest.mark.parametrize("compose", [
    lambda f: cr.hessian(f),
    lambda f: cr.jacrev(cr.grad(f)),
    lambda f: cr.jacfwd(cr.jacfwd(f)),
    lambda f: cr.jacrev(cr.jacfwd(f)),
], ids=["fwd-rev", "rev-rev", "fwd-fwd", "rev-fwd"])
def test_deq_loss_hessian_in_x_all_compositions_match_unrolled(compose):
    W, x = _deq()
    expected = cr.hessian(lambda x: _loss_unrolled(W, x))(x)
    got = compose(lambda x: _loss_implicit(W, x))(x)
    np.testing.assert_allclose(got, expected, atol=1e-8)
    assert np.abs(expected).max() > 0.1        # a real second-order term, not all zeros


@pytest.mark.parametrize("backward_solver", ["gmres", "iteration"])
def test_deq_hvp_in_the_weight_matrix_matches_unrolled(backward_solver):
    W, x = _deq(1)
    V = np.random.default_rng(2).standard_normal(W.shape)
    (got,) = cr.hvp(lambda W: _loss_implicit(W, x, backward_solver=backward_solver), (W,), (V,))
    (expected,) = cr.hvp(lambda W: _loss_unrolled(W, x), (W,), (V,))
    np.testing.assert_allclose(got, expected, atol=1e-8)


def test_deq_mixed_second_derivative_by_create_graph_backward():
    W0, x0 = _deq(3)
    results = []
    for loss in (_loss_implicit, _loss_unrolled):
        W = cr.tensor(W0, dtype=F64, requires_grad=True)
        x = cr.tensor(x0, dtype=F64, requires_grad=True)
        (gx,) = cr.autograd.grad(loss(W, x), x, create_graph=True)
        (gx * cr.tensor([1.0, 2.0, -1.0, 0.5])).sum().backward()       # d/dW <v, dL/dx>
        results.append(W.grad.data)
    np.testing.assert_allclose(results[0], results[1], atol=1e-8)


def test_gradgradcheck_fixed_point_and_root_solve():
    W, x = _deq(4, n=3)
    W = cr.tensor(W, dtype=F64, requires_grad=True)
    x = cr.tensor(x, dtype=F64, requires_grad=True)
    assert cr.gradgradcheck(lambda W, x: cr.fixed_point(_f, np.zeros(3), W, x), (W, x))
    c = cr.tensor([0.5, 2.0], dtype=F64, requires_grad=True)
    g = lambda z, c: z ** 3 + z - c                                   # noqa: E731
    assert cr.gradgradcheck(lambda c: cr.root_solve(g, np.zeros(2), c), (c,))


# ----- root_solve -----

def test_root_solve_second_derivative_closed_form():
    def solve(c):
        return cr.root_solve(lambda z, c: z ** 3 + z - c, cr.tensor(0.0, dtype=F64), c)
    c = 2.5
    z = solve(cr.tensor(c, dtype=F64)).item()
    closed = -6 * z / (3 * z ** 2 + 1) ** 3                 # d²z/dc², since dz/dc = 1 / (3z² + 1)
    np.testing.assert_allclose(cr.grad(cr.grad(solve))(c), closed, rtol=1e-9)
    np.testing.assert_allclose(cr.hessian(solve)(c), closed, rtol=1e-9)
    np.testing.assert_allclose(cr.jacfwd(cr.jacfwd(solve))(c), closed, rtol=1e-9)


def test_ridge_regression_validation_loss_curvature_closed_form():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 5)), rng.standard_normal(20)
    Xv, yv = rng.standard_normal((10, 5)), rng.standard_normal(10)

    def val_loss(lam):
        Xt, yt = cr.tensor(X), cr.tensor(y)
        w = cr.root_solve(lambda w, lam: Xt.T @ (Xt @ w - yt) + lam * w, np.zeros(5), lam)
        return ((cr.tensor(Xv) @ w - cr.tensor(yv)) ** 2).sum()
    lam = 0.7
    A = X.T @ X + lam * np.eye(5)
    w = np.linalg.solve(A, X.T @ y)
    w1 = -np.linalg.solve(A, w)                              # dw/dλ
    w2 = 2 * np.linalg.solve(A, np.linalg.solve(A, w))       # d²w/dλ²
    closed = 2 * (Xv @ w1) @ (Xv @ w1) + 2 * (Xv @ w - yv) @ (Xv @ w2)
    for second in (cr.hessian(val_loss), cr.grad(cr.grad(val_loss)), cr.jacfwd(cr.jacfwd(val_loss)),
                   cr.jacrev(cr.jacfwd(val_loss))):
        np.testing.assert_allclose(second(lam), closed, rtol=1e-8)


# ----- failures stay loud -----

def test_non_converging_inner_solve_raises_convergence_error():
    # the forward converges (Anderson solves this linear map), but the adjoint fixed-point
    # iteration has spectral radius 1.5: first- and second-order backward must both fail loudly
    def solve(a):
        return cr.fixed_point(lambda z, a: 1.5 * z + a * a, np.zeros(2), a,
                              backward_solver="iteration", max_iter=50).sum()
    a = np.array([0.5, 0.5])
    for second in (cr.hessian(solve), cr.jacrev(cr.grad(solve))):
        with pytest.raises(cr.ConvergenceError, match="backward"):
            second(a)
    # the forward-mode (tangent) solves use GMRES and do converge: d²/da² of -2a² per entry
    np.testing.assert_allclose(cr.jacfwd(cr.jacfwd(solve))(a), -4 * np.eye(2), atol=1e-10)


def test_fixed_point_closing_over_a_parameter_raises_instead_of_dropping_its_gradient():
    W = cr.tensor([[0.3, 0.1], [0.0, 0.2]], dtype=F64, requires_grad=True)
    b = cr.tensor([1.0, 1.0], dtype=F64, requires_grad=True)
    z = cr.fixed_point(lambda z, b: cr.tanh(W @ z + b), cr.zeros(2, dtype=F64), b)
    with pytest.raises(cr.GraphError, match=r"closes over 1 tensor.*\(2, 2\).*Pass them as params"):
        z.sum().backward()


def test_fixed_point_with_parameters_passed_explicitly_still_works():
    W = cr.tensor([[0.3, 0.1], [0.0, 0.2]], dtype=F64, requires_grad=True)
    b = cr.tensor([1.0, 1.0], dtype=F64, requires_grad=True)
    z = cr.fixed_point(lambda z, W, b: cr.tanh(W @ z + b), cr.zeros(2, dtype=F64), W, b)
    z.sum().backward()
    assert W.grad is not None and b.grad is not None


def test_closure_over_a_grad_tensor_still_raises_with_create_graph():
    W = cr.tensor([[0.3, 0.1], [0.0, 0.2]], dtype=F64, requires_grad=True)
    b = cr.tensor([1.0, 1.0], dtype=F64, requires_grad=True)
    z = cr.fixed_point(lambda z, b: cr.tanh(W @ z + b), cr.zeros(2, dtype=F64), b)
    with pytest.raises(cr.GraphError, match=r"closes over 1 tensor.*\(2, 2\)"):
        cr.autograd.grad(z.sum(), b, create_graph=True)


def test_fixed_point_closing_over_a_dual_raises_under_forward_mode():
    def g(a):
        return cr.fixed_point(lambda z: a * cr.cos(z), cr.tensor(0.0, dtype=F64))
    with pytest.raises(cr.GraphError, match="forward-mode tangent"):
        cr.jvp(g, (0.5,), (1.0,))                      # was a tangent of exactly 0


def test_integer_param_under_forward_mode_and_second_order():
    # an integer index param has no tangent; forward mode used to fail on make_dual(int64 primal)
    idx = cr.tensor(np.array([2, 0, 1]))
    g = lambda z, x, idx: cr.tanh(0.4 * z[idx] + x)          # noqa: E731

    def unrolled(x):
        z = cr.zeros(3, dtype=F64)
        for _ in range(100):
            z = g(z, x, idx)
        return z
    x, t = np.array([0.3, -0.2, 0.5]), np.array([1.0, 0.5, -1.0])
    _, tz = cr.jvp(lambda x: cr.fixed_point(g, np.zeros(3), x, idx), (x,), (t,))
    np.testing.assert_allclose(tz, cr.jvp(unrolled, (x,), (t,))[1], atol=1e-10)
    h = cr.hessian(lambda x: (cr.fixed_point(g, np.zeros(3), x, idx) ** 2).sum())(x)
    np.testing.assert_allclose(h, cr.hessian(lambda x: (unrolled(x) ** 2).sum())(x), atol=1e-9)
