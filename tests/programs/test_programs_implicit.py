"""fixed_point / root_solve: implicit gradients vs unrolled and finite differences, VJP and JVP."""
import numpy as np
import pytest

import chainrule as cr


def _deq_problem(seed=0, n=6):
    rng = np.random.default_rng(seed)
    W = cr.tensor(rng.standard_normal((n, n)) * 0.4 / np.sqrt(n), dtype=cr.float64, requires_grad=True)
    x = cr.tensor(rng.standard_normal(n), dtype=cr.float64, requires_grad=True)
    return W, x


def f(z, W, x):
    return cr.tanh(W @ z + x)


def unrolled(W, x, k):
    z = cr.zeros(x.shape, dtype=cr.float64)
    for _ in range(k):
        z = f(z, W, x)
    return z


@pytest.mark.parametrize("solver", ["anderson", "iteration"])
@pytest.mark.parametrize("backward_solver", ["gmres", "iteration"])
def test_fixed_point_matches_unrolled_gradient(solver, backward_solver):
    W, x = _deq_problem()
    v = np.linspace(-1, 1, 6)
    z = cr.fixed_point(f, np.zeros(6), W, x, solver=solver, backward_solver=backward_solver)
    assert np.max(np.abs(f(z, W, x).data - z.data)) < 1e-9
    gW, gx = cr.autograd.grad((z * v).sum(), [W, x])
    uW, ux = cr.autograd.grad((unrolled(W, x, 80) * v).sum(), [W, x])
    np.testing.assert_allclose(gW.data, uW.data, atol=1e-9)
    np.testing.assert_allclose(gx.data, ux.data, atol=1e-9)


def test_fixed_point_gradcheck_vjp_and_jvp():
    W, x = _deq_problem(1, n=4)
    assert cr.gradcheck(lambda W, x: cr.fixed_point(f, np.zeros(4), W, x), (W, x), modes=("rev", "fwd"))


def test_fixed_point_jvp_matches_unrolled_jvp():
    W, x = _deq_problem(2)
    tW, tx = np.full((6, 6), 0.1), np.linspace(0, 1, 6)
    fwd = cr.forward_ad
    with fwd.dual_level():
        args = (fwd.make_dual(W.detach(), cr.tensor(tW)), fwd.make_dual(x.detach(), cr.tensor(tx)))
        t_imp = fwd.unpack_dual(cr.fixed_point(f, np.zeros(6), *args)).tangent.data
        t_unr = fwd.unpack_dual(unrolled(*args, k=80)).tangent.data
    np.testing.assert_allclose(t_imp, t_unr, atol=1e-9)


def test_gradient_does_not_depend_on_z0():
    W, x = _deq_problem(3)
    grads = []
    for z0 in (np.zeros(6), np.full(6, 0.9)):
        z = cr.fixed_point(f, z0, W, x)
        grads.append(cr.autograd.grad(z.sum(), [W])[0].data)
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-10)


def test_fixed_point_keeps_no_graph_of_the_iterations():
    W, x = _deq_problem(4)
    z = cr.fixed_point(f, np.zeros(6), W, x, solver="iteration")
    assert z.grad_fn.next_functions[2][0] is W._edge()[0]     # straight to the leaves: no chain
    with cr.profile() as p_imp:
        z_imp = cr.fixed_point(f, np.zeros(6), W, x, solver="iteration")
    with cr.profile() as p_unr:
        z_unr = unrolled(W, x, 60)
    assert z_imp.requires_grad and z_unr.requires_grad
    assert p_imp.peak_saved_bytes <= W.nbytes + x.nbytes + z_imp.nbytes      # z*, W, x: flat
    assert p_unr.peak_saved_bytes >= 60 * z_unr.nbytes                       # grows with k


def test_root_solve_gradients_vjp_and_jvp():
    c = cr.tensor([0.5, 2.0, 3.0], dtype=cr.float64, requires_grad=True)
    g = lambda z, c: z ** 3 + z - c                          # noqa: E731
    z = cr.root_solve(g, np.zeros(3), c)
    np.testing.assert_allclose((z ** 3 + z).data, c.data, atol=1e-10)
    z.sum().backward()
    np.testing.assert_allclose(c.grad.data, 1 / (3 * z.data ** 2 + 1), rtol=1e-10)
    assert cr.gradcheck(lambda c: cr.root_solve(g, np.zeros(3), c), (c,), modes=("rev", "fwd"))


def test_root_solve_coupled_system_against_closed_form():
    # A z = b solved as a root problem: dz/db = A^-1
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = cr.tensor([1.0, -1.0], dtype=cr.float64, requires_grad=True)
    z = cr.root_solve(lambda z, b: cr.tensor(A) @ z - b, np.zeros(2), b)
    np.testing.assert_allclose(z.data, np.linalg.solve(A, b.data), atol=1e-12)
    (z * cr.tensor([1.0, 0.0])).sum().backward()
    np.testing.assert_allclose(b.grad.data, np.linalg.inv(A)[0], atol=1e-10)


def test_forward_non_convergence_reports_residual_and_iterations():
    a = cr.tensor(1.0, dtype=cr.float64, requires_grad=True)
    with pytest.raises(cr.ConvergenceError, match=r"no convergence after 25 iterations: residual 1 >"):
        cr.fixed_point(lambda z, a: z + a, cr.tensor(0.0, dtype=cr.float64), a, max_iter=25)
    with pytest.raises(cr.ConvergenceError, match=r"root_solve: no convergence after 5 iterations"):
        cr.root_solve(lambda z, a: z * z + a, cr.tensor(1.0, dtype=cr.float64), a, max_iter=5)


def test_backward_non_convergence_raises_instead_of_a_wrong_gradient():
    # forward converges (Anderson solves this linear map) but I - df/dz has spectral radius > 1
    # for the adjoint fixed-point iteration, which must then fail loudly
    a = cr.tensor([0.5, 0.5], dtype=cr.float64, requires_grad=True)
    z = cr.fixed_point(lambda z, a: 1.5 * z + a, np.zeros(2), a, backward_solver="iteration",
                       max_iter=50)
    np.testing.assert_allclose(z.data, [-1.0, -1.0])
    with pytest.raises(cr.ConvergenceError, match="backward"):
        z.sum().backward()
    z2 = cr.fixed_point(lambda z, a: 1.5 * z + a, np.zeros(2), a)       # GMRES does solve it
    z2.sum().backward()
    np.testing.assert_allclose(a.grad.data, [-2.0, -2.0])                # dz/da = 1 / (1 - 1.5)


def test_create_graph_through_implicit_solve_gives_the_second_derivative():
    a = cr.tensor(0.5, dtype=cr.float64, requires_grad=True)
    z = cr.fixed_point(lambda z, a: a * cr.cos(z), np.float64(0.0), a)
    (g,) = cr.autograd.grad(z, a, create_graph=True)
    (h,) = cr.autograd.grad(g, a)
    zd, d = z.item(), 1 + 0.5 * np.sin(z.item())       # z = a cos z: z' = cos z / d
    z1 = np.cos(zd) / d
    z2 = (-np.sin(zd) * z1 * d - np.cos(zd) * (np.sin(zd) + 0.5 * np.cos(zd) * z1)) / d ** 2
    np.testing.assert_allclose([g.item(), h.item()], [z1, z2], rtol=1e-9)


def test_bad_solver_name_and_shape():
    with pytest.raises(ValueError, match="unknown solver='newton'"):
        cr.fixed_point(lambda z: z, np.zeros(1), solver="newton")
    with pytest.raises(cr.ShapeError, match=r"fixed_point: f\(z, \*params\) returned shape \(3,\)"):
        cr.fixed_point(lambda z: cr.concatenate([z, z[:1]]), np.zeros(2))


def test_gmres_solves_nonsymmetric_system():
    from chainrule.programs.implicit import gmres
    rng = np.random.default_rng(0)
    A = np.eye(30) * 3 + rng.standard_normal((30, 30)) * 0.3
    b = rng.standard_normal(30)
    np.testing.assert_allclose(gmres(lambda v: A @ v, b, tol=1e-12, restart=10), np.linalg.solve(A, b),
                               atol=1e-9)
