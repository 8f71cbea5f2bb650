"""cr.integrate.odeint: SciPy's values; adjoint gradients (y0, t, args) against backpropagation through
a fixed-step RK4 written with chainrule ops and against central differences; forward mode; second
order; memory independent of the solver's steps; errors."""
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
