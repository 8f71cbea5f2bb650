"""cr.integrate.odeint: SciPy's values; adjoint gradients (y0, t, args) against backpropagation through
a fixed-step RK4 written with chainrule ops and against central differences; forward mode; second
order; memory independent of the solver's steps; errors."""
import warnings

import numpy as np
import pytest
import scipy.integrate

import chainrule as cr
from chainrule.integrate import odeint


def f(y, t, a, b):
    """A non-autonomous predator-prey system (t enters, so the t-gradients test the f_t terms)."""
    return cr.stack([a[0] * y[0] - a[1] * y[0] * y[1], -b * y[1] + a[1] * y[0] * y[1] * cr.cos(t)])


def rk4(func, y0, t, args, m=20):
    """Fixed-step RK4 with m steps per interval, in chainrule ops: backprop through it is exact."""
    y, ys = y0, [y0]
    for i in range(len(t) - 1):
        h, tc = (t[i + 1] - t[i]) / m, t[i]
        for _ in range(m):
            k1 = func(y, tc, *args)
            k2 = func(y + h / 2 * k1, tc + h / 2, *args)
            k3 = func(y + h / 2 * k2, tc + h / 2, *args)
            k4 = func(y + h * k3, tc + h, *args)
            y, tc = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), tc + h
        ys.append(y)
    return cr.stack(ys)


Y0, T, A, B = np.array([1.0, 0.5]), np.linspace(0.0, 2.0, 6), np.array([1.1, 0.4]), np.array(0.7)
W = np.random.default_rng(0).standard_normal((6, 2))
TOL = dict(rtol=1e-10, atol=1e-10)


def loss(y0, t, a, b):
    return (odeint(f, y0, t, args=(a, b), **TOL) * W).sum()


def loss_rk4(y0, t, a, b):
    return (rk4(f, y0, t, (a, b)) * W).sum()


@pytest.fixture(scope="module")
def grads():
    return cr.grad(loss, argnums=(0, 1, 2, 3))(Y0, T, A, B)


def test_values_are_scipys():
    k = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
    ys = odeint(lambda y, t, k: cr.stack([y[1], -k * y[0] - 0.1 * y[1]]), cr.tensor([1.0, 0.0]), T, args=(k,))
    ref = scipy.integrate.odeint(lambda y, t, k: [y[1], -k * y[0] - 0.1 * y[1]], [1.0, 0.0], T, args=(2.0,))
    assert ys.shape == (6, 2) and ys.dtype == np.float64 and ys.requires_grad
    np.testing.assert_array_equal(ys.data, ref)
    # a scalar y0 is a 1-vector (SciPy); an n-d y0 keeps its shape; ndarrays in -> no graph
    assert odeint(lambda y, t: -y, 1.0, [0.0, 1.0]).shape == (2, 1)
    y2 = odeint(lambda y, t: -y, np.ones((2, 3)), [0.0, 1.0, 2.0])
    assert y2.shape == (3, 2, 3) and not y2.requires_grad
    np.testing.assert_allclose(y2.data[2], np.exp(-2.0) * np.ones((2, 3)), rtol=1e-7)


def test_gradients_match_rk4_backprop(grads):
    ref = cr.grad(loss_rk4, argnums=(0, 1, 2, 3))(Y0, T, A, B)
    for g, r in zip(grads, ref):
        assert g.shape == np.shape(r)
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)


def test_gradients_match_central_differences(grads):
    """LSODA's adaptive steps make the computed solution rough at the tolerance's level, so the step
    is 1e-3 (truncation 1e-6 on these scales)."""
    xs, h = [Y0, T, A, B], 1e-3
    for i, g in enumerate(grads):
        fd = np.zeros(np.shape(xs[i]))
        for k in np.ndindex(fd.shape):
            xp, xm = [x.copy() for x in xs], [x.copy() for x in xs]
            xp[i][k] += h
            xm[i][k] -= h
            fd[k] = (loss(*xp).item() - loss(*xm).item()) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=2e-5, atol=2e-5)


def test_backward_accumulates_into_leaves_and_composes():
    a = cr.tensor(A, requires_grad=True)
    b = cr.tensor(B, requires_grad=True)
    y0 = cr.tensor(Y0, requires_grad=True)
    t = cr.tensor(T, requires_grad=True)
    scale = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
    (scale * loss(y0, t, a, b)).backward()
    g = cr.grad(loss, argnums=(0, 1, 2, 3))(Y0, T, A, B)
    for leaf, gi in zip((y0, t, a, b), g):
        np.testing.assert_allclose(leaf.grad.data, 2 * gi, rtol=1e-8)
    np.testing.assert_allclose(scale.grad.data, loss(Y0, T, A, B).data, rtol=1e-12)
    assert "OdeintBackward" in str(odeint(f, y0, t, args=(a, b)).grad_fn)


def test_float32_inputs_get_float32_gradients():
    k = cr.tensor(0.5, requires_grad=True)                # float32
    y0 = cr.tensor([1.0, 2.0], requires_grad=True)
    ys = odeint(lambda y, t, k: -k * y, y0, [0.0, 1.0], args=(k,))
    assert ys.dtype == np.float64                          # SciPy computes in float64
    ys.sum().backward()
    assert y0.grad.dtype == np.float32 and k.grad.dtype == np.float32
    np.testing.assert_allclose(y0.grad.data, [1 + np.exp(-0.5)] * 2, rtol=1e-6)
    np.testing.assert_allclose(k.grad.data, -np.exp(-0.5) * 3.0, rtol=1e-6)


def test_decreasing_and_repeated_times():
    k = np.array(0.3)
    for t in (np.array([2.0, 1.0, 0.5, 0.0]), np.array([0.0, 1.0, 1.0, 2.0])):
        ys = odeint(lambda y, t, k: -k * y * y, np.array([1.0]), t, args=(k,), **TOL)
        np.testing.assert_allclose(ys.data[:, 0], 1 / (1 + 0.3 * (t - t[0])), rtol=1e-8)
        gt, gk = cr.grad(lambda t, k: odeint(lambda y, t, k: -k * y * y, np.array([1.0]), t, args=(k,),
                                             **TOL).sum(), argnums=(0, 1))(t, k)
        # y(t) = 1 / (1 + k (t - t0)): exact derivatives
        s = 1 + 0.3 * (t - t[0])
        dt = -0.3 / s ** 2
        np.testing.assert_allclose(gt, np.r_[-dt[1:].sum(), dt[1:]], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(gk, (-(t - t[0]) / s ** 2).sum(), rtol=1e-6)


def test_forward_mode_matches_reverse(grads):
    tangents = (np.array([1.0, -0.5]), np.linspace(0.1, 0.3, 6), np.array([0.3, -0.2]), np.array(0.5))
    out, jv = cr.jvp(loss, (Y0, T, A, B), tangents)
    np.testing.assert_allclose(out, loss(Y0, T, A, B).data, rtol=0, atol=0)
    np.testing.assert_allclose(jv, sum((g * t).sum() for g, t in zip(grads, tangents)), rtol=1e-7)
    J = cr.jacfwd(lambda a: odeint(f, Y0, T, args=(a, B), **TOL))(A)
    Jr = cr.jacrev(lambda a: rk4(f, Y0, T, (a, B)))(A)
    np.testing.assert_allclose(J, Jr, rtol=1e-6, atol=1e-8)


def test_second_order():
    """grad of grad (the augmented solve is an odeint again) and jacfwd of jacrev (cr.hessian)."""
    g = lambda k: cr.integrate.odeint(lambda y, t, k: -k * y * y, np.array([1.0]), [0.0, 1.0, 2.0],
                                      args=(k,), rtol=1e-9, atol=1e-9).sum()
    k = np.array(0.5)
    exact = sum(2 * t ** 2 / (1 + k * t) ** 3 for t in (1.0, 2.0))      # d²/dk² of 1 / (1 + k t)
    np.testing.assert_allclose(cr.grad(cr.grad(g))(k), exact, rtol=1e-6)
    np.testing.assert_allclose(cr.hessian(g)(k), exact, rtol=1e-6)


def test_adjoint_memory_does_not_grow_with_steps_or_time_points():
    """What odeint keeps for backward is its output (the adjoint's restart points), y0, t and the
    args: nothing per solver step, and nothing per time point beyond the output and t themselves.
    Backprop through RK4 keeps every stage."""
    fn = lambda y, t, k: cr.stack([y[1], -k * y[0]])
    extra, steps, held5 = set(), [], None
    for n, tol in [(5, 1e-6), (5, 1e-10), (40, 1e-10)]:
        k = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
        t = np.linspace(0.0, 10.0, n)
        with cr.profile() as p:
            ys, info = odeint(fn, np.array([1.0, 0.0]), t, args=(k,), rtol=tol, atol=tol, full_output=True)
            held = p.saved_bytes
            ys.sum().backward()
        extra.add(held - ys.data.nbytes - t.nbytes)
        held5 = held5 or held
        steps.append(int(info["nst"][-1]))
        assert p.saved_bytes == 0                          # freed by the backward
        assert p.peak_saved_bytes - held < 200             # the backward's own solves save ~nothing
    assert extra == {16 + 8} and steps[1] > steps[0]      # y0 and k only
    k = cr.tensor(2.0, dtype=cr.float64, requires_grad=True)
    with cr.profile() as p:
        out = rk4(fn, np.array([1.0, 0.0]), np.linspace(0.0, 10.0, 5), (k,), m=10).sum()
    assert p.peak_saved_bytes > 20 * held5 and out.requires_grad


def test_options_full_output_and_tfirst():
    ys, info = odeint(lambda t, y: -t * y, np.array([1.0]), [0.0, 1.0], tfirst=True, full_output=True, hmax=0.1)
    np.testing.assert_allclose(ys.data[-1], np.exp(-0.5), rtol=1e-6)
    assert set(info) >= {"nst", "hu", "message"} and info["hu"].max() <= 0.1 + 1e-12


def test_errors():
    with pytest.raises(ValueError, match="monotonically"):
        odeint(lambda y, t: -y, np.array([1.0]), [0.0, 2.0, 1.0])
    with pytest.raises(cr.ShapeError, match=r"returned shape \(3,\) for y of shape \(2,\)"):
        odeint(lambda y, t: cr.concatenate([y, y[:1]]), np.array([1.0, 2.0]), [0.0, 1.0])
    with pytest.raises(cr.ShapeError, match="1-d"):
        odeint(lambda y, t: -y, np.array([1.0]), np.zeros((2, 2)))
    hidden = cr.tensor(0.5, requires_grad=True)
    with pytest.raises(cr.GraphError, match="args="):
        odeint(lambda y, t: -hidden * y, np.array([1.0]), [0.0, 1.0])
    with pytest.raises(cr.DTypeError, match="complex"):
        odeint(lambda y, t: -y, np.array([1.0 + 1j]), [0.0, 1.0])
    with pytest.raises(TypeError, match="unexpected keyword"):
        odeint(lambda y, t: -y, np.array([1.0]), [0.0, 1.0], method="RK45")
    with pytest.raises(RuntimeError, match="mxstep"):
        odeint(lambda y, t: -y, np.array([1.0]), [0.0, 1e6], mxstep=5)
    g = lambda k: odeint(lambda y, t, k: -k * y, np.array([1.0]), [0.0, 1.0], args=(k,)).sum()
    with pytest.raises(cr.GraphError, match="order two or more"):
        cr.jacfwd(cr.jacfwd(g))(np.array(0.5))
    with pytest.raises(cr.GraphError, match="grad of jvp"):
        cr.grad(lambda k: cr.jvp(g, (k,), (np.array(1.0),))[1])(np.array(0.5))


# ----- stiff systems: the adjoint re-solves y forwards per interval, only a runs backwards -----
def stiff(y, t, p):
    """y0' = p0 y0 (p0 = -30: a fast decaying mode), y1' = p1 y0 - y1."""
    return cr.stack([p[0] * y[0], p[1] * y[0] - y[1]])


def diag(y, t, lam):
    return lam * y


def lotka(y, t, p):
    return cr.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]])


SYSTEMS = [  # (func, y0, t, args): stiff and non-stiff
    (stiff, np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([-30.0, 0.0])),
    (stiff, np.array([1.0, 0.5]), np.array([0.0, 0.3, 1.0, 1.0, 2.0]), np.array([-30.0, 0.7])),
    (diag, np.array([1.0, 1.0]), np.array([0.0, 0.5, 1.0]), np.array([-100.0, -1.0])),
    (lotka, np.array([10.0, 5.0]), np.linspace(0.0, 6.0, 7), np.array([1.0, 0.1, 0.075, 1.5])),
]


def test_issue_reproducer_stiff_gradient_is_right():
    """The state integrated backwards (the old adjoint) gave -13.03 here; the true value is
    e^-1 (1 - e^-29) / 29."""
    L = lambda k: odeint(lambda y, t, k: cr.stack([-30 * y[0], k * y[0] - y[1]]), [1.0, 0.0], [0.0, 1.0],
                         args=(k,))[-1, 1]
    exact = np.exp(-1) * (1 - np.exp(-29)) / 29
    np.testing.assert_allclose(cr.grad(L)(np.array(0.0)), exact, rtol=1e-4)      # default tolerances
    np.testing.assert_allclose(cr.jacfwd(L)(np.array(0.0)), exact, rtol=1e-6)


def test_adjoint_of_diag_100_works_at_default_tolerances():
    """y' = diag(-100, -1) y: the backward used to fail ("Excess work done") integrating e^{100 t}."""
    def L(y0, lam):
        return odeint(diag, y0, [0.0, 1.0], args=(lam,))[-1].sum()
    gy0, glam = cr.grad(L, argnums=(0, 1))(np.array([1.0, 2.0]), np.array([-100.0, -1.0]))
    np.testing.assert_allclose(gy0, [np.exp(-100), np.exp(-1)], rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(glam, [np.exp(-100), 2 * np.exp(-1)], rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("system", range(len(SYSTEMS)))
def test_adjoint_matches_forward_sensitivities_and_differences(system):
    """Gradients in y0, args and every t_i, against forward mode (the sensitivity equations, a
    forward-in-time solve) and central differences, on stiff and non-stiff systems."""
    func, y0, t, p = SYSTEMS[system]
    w = np.random.default_rng(system).standard_normal((len(t), len(y0)))

    def L(y0, t, p):
        return (odeint(func, y0, t, args=(p,), **TOL) * w).sum()

    xs = (y0, t, p)
    rev = cr.grad(L, argnums=(0, 1, 2))(*xs)
    fwd = cr.jacfwd(L, argnums=(0, 1, 2))(*xs)
    scale = max(np.abs(np.concatenate([np.ravel(g) for g in fwd])).max(), 1.0)
    for i, (r, f_) in enumerate(zip(rev, fwd)):
        np.testing.assert_allclose(r, f_, rtol=1e-6, atol=1e-8 * scale)
        h = 1e-4 * max(1.0, np.abs(xs[i]).max())
        fd = np.zeros(np.shape(xs[i]))
        ok = np.ones(fd.shape, bool)
        if i == 1:             # a repeated time cannot move both ways and keep t monotonic
            ok = np.r_[True, np.diff(t) != 0] & np.r_[np.diff(t) != 0, True]
        for k in zip(*np.nonzero(ok)):
            xp, xm = [x.copy() for x in xs], [x.copy() for x in xs]
            xp[i][k] += h
            xm[i][k] -= h
            fd[k] = (L(*xp).item() - L(*xm).item()) / (2 * h)
        np.testing.assert_allclose(np.asarray(r)[ok], fd[ok], rtol=1e-4, atol=1e-6 * scale)


def test_a_parameter_in_the_initial_state_and_in_t():
    """k enters y0, args and the final time: y0 = (k, 1), y' = (-30 y0, k y0 - y1) on [0, 1 + k]."""
    def L(k):
        y0 = cr.stack([k, cr.ones_like(k)])
        t = cr.stack([cr.zeros_like(k), 1 + k])
        return odeint(lambda y, t, k: cr.stack([-30 * y[0], k * y[0] - y[1]]), y0, t, args=(k,), **TOL)[-1, 1]

    def exact(k):          # y1(T) = e^-T + k² (e^-T - e^{-30 T}) / 29, T = 1 + k
        T = 1 + k
        return np.exp(-T) + k * k * (np.exp(-T) - np.exp(-30 * T)) / 29

    k, h = np.array(0.4), 1e-5
    d_exact = (exact(k + h) - exact(k - h)) / (2 * h)
    np.testing.assert_allclose(L(k).item(), exact(k), rtol=1e-8)
    np.testing.assert_allclose(cr.grad(L)(k), d_exact, rtol=1e-6)
    np.testing.assert_allclose(cr.jacfwd(L)(k), d_exact, rtol=1e-6)


def test_second_order_on_a_stiff_system():
    """A backward that is differentiated again solves the forward sensitivity system (stable): grad
    of grad and cr.hessian against y1(1) = p1 (e^{p0} - e^-1) / (p0 + 1)."""
    def L(p):
        return odeint(stiff, np.array([1.0, 0.0]), [0.0, 1.0], args=(p,), **TOL)[-1, 1]

    P, h = np.array([-30.0, 0.5]), 1e-3
    g = lambda a: (np.exp(a) - np.exp(-1)) / (a + 1)
    g1, g2 = (g(P[0] + h) - g(P[0] - h)) / (2 * h), (g(P[0] + h) - 2 * g(P[0]) + g(P[0] - h)) / h ** 2
    H = np.array([[P[1] * g2, g1], [g1, 0.0]])
    np.testing.assert_allclose(cr.grad(L)(P), [P[1] * g1, g(P[0])], rtol=1e-6)
    np.testing.assert_allclose(cr.hessian(L)(P), H, rtol=1e-5, atol=1e-12)
    gg = np.stack([cr.grad(lambda p: cr.grad(L)(p)[i])(P) for i in range(2)])
    np.testing.assert_allclose(gg, H, rtol=1e-5, atol=1e-12)
    # through y0 and t too: y' = -k y², y(t1) = y0 / (1 + k y0 (t1 - t0)); d²/dy0² = -2k t / (1 + k y0 t)³
    M = lambda y0: odeint(lambda y, t, k: -k * y * y, y0, [0.0, 2.0], args=(np.array(0.5),), **TOL)[-1, 0]
    np.testing.assert_allclose(cr.grad(cr.grad(lambda y0: M(y0.reshape(1))))(np.array(1.0)), -2 * 0.5 * 2 / 2 ** 3,
                               rtol=1e-6)
    # third order (the sensitivity solve's own backward is differentiated again): d³/dk³ 1/(1 + 2k)
    K = lambda k: odeint(lambda y, t, k: -k * y * y, np.array([1.0]), [0.0, 2.0], args=(k,), **TOL)[-1, 0]
    np.testing.assert_allclose(cr.grad(cr.grad(cr.grad(K)))(np.array(0.5)), -3.0, rtol=1e-7)
    np.testing.assert_allclose(cr.jacfwd(cr.grad(cr.grad(K)))(np.array(0.5)), -3.0, rtol=1e-7)


def test_the_backward_keeps_no_dense_output_between_forward_and_backward():
    """The trajectory is checkpointed at the output times (which odeint returns anyway): the
    profiler sees the same saved bytes on a stiff system, and nothing left after backward."""
    k = cr.tensor([-100.0, -1.0], dtype=cr.float64, requires_grad=True)
    t = np.linspace(0.0, 1.0, 5)
    with cr.profile() as p:
        ys = odeint(diag, np.array([1.0, 1.0]), t, args=(k,))
        held = p.saved_bytes
        ys.sum().backward()
    assert held == ys.data.nbytes + t.nbytes + 16 + 16 and p.saved_bytes == 0
    np.testing.assert_allclose(k.grad.data, [(t * np.exp(-100 * t)).sum(), (t * np.exp(-t)).sum()],
                               rtol=1e-6, atol=1e-9)


# ----- vmap: one solve per example, equal to a Python loop -----
def M(k):
    return odeint(lambda y, t, k: -k * y * y, np.array([1.0]), [0.0, 1.0, 2.0], args=(k,), **TOL)[-1, 0]


def test_vmap_of_odeint_and_of_its_derivatives_equal_a_loop():
    ks = np.array([0.5, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no per-example warning: this is odeint's batching
        np.testing.assert_allclose(cr.vmap(M)(ks), [M(k).item() for k in ks], rtol=1e-13)
        loop = np.array([cr.grad(M)(k) for k in ks])
        np.testing.assert_allclose(loop, -2 / (1 + 2 * ks) ** 2, rtol=1e-6)
        np.testing.assert_allclose(cr.vmap(cr.grad(M))(ks), loop, rtol=1e-13)
        np.testing.assert_allclose(cr.grad(lambda ks: cr.vmap(M)(ks).sum())(ks), loop, rtol=1e-13)
        np.testing.assert_allclose(cr.vmap(cr.jacfwd(M))(ks), loop, rtol=1e-6)
        np.testing.assert_allclose(cr.jacfwd(cr.vmap(M))(ks), np.diag(loop), rtol=1e-6)
        np.testing.assert_allclose(cr.vmap(cr.grad(cr.grad(M)))(ks), [cr.grad(cr.grad(M))(k) for k in ks],
                                   rtol=1e-13)
        np.testing.assert_allclose(cr.vmap(cr.hessian(M))(ks), 8 / (1 + 2 * ks) ** 3, rtol=1e-5)
        kk = np.array([[0.5, 1.0], [2.0, 3.0]])
        np.testing.assert_allclose(cr.vmap(cr.vmap(M))(kk), 1 / (1 + 2 * kk), rtol=1e-7)
        # batched y0 and t; full_output gives one info per example
        ys, infos = cr.vmap(lambda y0: odeint(lambda y, t: -y, y0, [0.0, 1.0], full_output=True))(
            np.array([[1.0], [2.0]]))
        np.testing.assert_allclose(ys[:, -1, 0], [np.exp(-1), 2 * np.exp(-1)], rtol=1e-7)
        assert len(infos) == 2 and all("nst" in i for i in infos)
        gt = cr.vmap(cr.grad(lambda t: odeint(lambda y, t: -y, np.array([1.0]), t, **TOL)[-1, 0]))(
            np.array([[0.0, 1.0], [0.0, 2.0]]))
        e = np.exp([-1.0, -2.0])
        np.testing.assert_allclose(gt, np.stack([e, -e], axis=1), rtol=1e-7)


def test_vmap_closure_over_a_batched_tensor_is_refused():
    with pytest.raises(cr.VmapError, match=r"args=\(\.\.\.\)"):
        cr.vmap(lambda k: odeint(lambda y, t: -k * y, np.array([1.0]), [0.0, 1.0]))(np.array([0.5, 1.0]))
    with pytest.raises(cr.VmapError, match=r"args=\(\.\.\.\)"):
        cr.vmap(cr.grad(lambda k: odeint(lambda y, t: -k * y, np.array([1.0]), [0.0, 1.0])[-1, 0]))(
            np.array([0.5, 1.0]))


def test_create_graph_through_the_cotangent_and_float32():
    y0 = cr.tensor([1.0, 2.0], dtype=cr.float64, requires_grad=True)
    c = cr.tensor([1.0, 3.0], dtype=cr.float64, requires_grad=True)
    (gy,) = cr.autograd.grad(odeint(lambda y, t: -y, y0, [0.0, 1.0])[-1], [y0], grad_outputs=[c], create_graph=True)
    np.testing.assert_allclose(gy.data, np.exp(-1) * np.array([1.0, 3.0]), rtol=1e-7)
    (gc,) = cr.autograd.grad(gy.sum(), [c])
    np.testing.assert_allclose(gc.data, [np.exp(-1)] * 2, rtol=1e-7)
    k = cr.tensor(0.5, requires_grad=True)                # float32
    (g,) = cr.autograd.grad(odeint(lambda y, t, k: -k * y * y, np.array([1.0]), [0.0, 2.0], args=(k,))[-1, 0], [k],
                            create_graph=True)
    (gg,) = cr.autograd.grad(g, [k])
    assert g.dtype == gg.dtype == np.float32
    np.testing.assert_allclose([g.item(), gg.item()], [-0.5, 1.0], rtol=1e-5)


def test_options_of_the_users_system_stay_out_of_the_derived_solves():
    """Dfun (and ml/mu/col_deriv/h0) describe the user's n-dimensional system and per-component atol
    is y's: the adjoint, sensitivity and second-order solves (other sizes) get neither."""
    lam = np.array([-100.0, -1.0])
    J = lambda y, t: np.diag(lam)

    def L(y0, lam):
        return odeint(diag, y0, [0.0, 0.5, 1.0], args=(lam,), Dfun=J, atol=np.array([1e-10, 1e-9]), rtol=1e-10,
                      hmax=0.2)[1:].sum()
    y0 = np.array([1.0, 2.0])
    exact_y0 = np.exp(np.outer([0.5, 1.0], lam)).sum(0)
    exact_lam = (np.array([0.5, 1.0])[:, None] * np.exp(np.outer([0.5, 1.0], lam))).sum(0) * y0
    gy0, glam = cr.grad(L, argnums=(0, 1))(y0, lam)
    np.testing.assert_allclose(gy0, exact_y0, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(glam, exact_lam, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(cr.jacfwd(L, argnums=1)(y0, lam), exact_lam, rtol=1e-7, atol=1e-10)
    h = cr.hessian(lambda lam: L(y0, lam))(lam)       # d²/dλ_i² of Σ_t y0_i e^{λ_i t}
    np.testing.assert_allclose(h, np.diag((np.array([0.25, 1.0])[:, None] * np.exp(np.outer([0.5, 1.0], lam))).sum(0)
                                          * y0), rtol=1e-6, atol=1e-10)
