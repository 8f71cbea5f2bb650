"""Transforms of transforms to third order, outer graphs, and perturbation confusion."""
import numpy as np
import pytest

import chainrule as cr

rng = np.random.default_rng(2)


def f(x):
    return cr.sin(x) * x ** 3


def d1(x):
    return np.cos(x) * x ** 3 + 3 * x ** 2 * np.sin(x)


def d2(x):
    return -np.sin(x) * x ** 3 + 6 * x ** 2 * np.cos(x) + 6 * x * np.sin(x)


def d3(x):
    return (-np.cos(x) * x ** 3 - 9 * x ** 2 * np.sin(x) + 18 * x * np.cos(x) + 6 * np.sin(x))


X0 = 0.7


def deriv_fwd(g):
    return lambda x: cr.jvp(g, (x,), (1.0,))[1]


def test_grad_of_grad_of_grad():
    g1, g2, g3 = cr.grad(f), cr.grad(cr.grad(f)), cr.grad(cr.grad(cr.grad(f)))
    for g, d in ((g1, d1), (g2, d2), (g3, d3)):
        assert abs(g(X0) - d(X0)) < 1e-12


def test_jvp_of_jvp_of_jvp():
    assert abs(deriv_fwd(deriv_fwd(f))(X0) - d2(X0)) < 1e-12
    assert abs(deriv_fwd(deriv_fwd(deriv_fwd(f)))(X0) - d3(X0)) < 1e-12


def test_every_mix_of_modes_to_third_order():
    rev = cr.grad
    for a in (rev, deriv_fwd):
        for b in (rev, deriv_fwd):
            for c in (rev, deriv_fwd):
                assert abs(a(b(c(f)))(X0) - d3(X0)) < 1e-11


def test_jacobians_of_jacobians_agree():
    A = rng.standard_normal((3, 3))

    def g(x):
        return (cr.tanh(A @ x) ** 2).sum()

    x = rng.standard_normal(3)
    H = cr.jacfwd(cr.jacrev(g))(x)
    for outer in (cr.jacfwd, cr.jacrev):
        for inner in (cr.jacfwd, cr.jacrev):
            np.testing.assert_allclose(outer(inner(g))(x), H, atol=1e-12)
    np.testing.assert_allclose(cr.hessian(g)(x), H, atol=1e-12)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    T = cr.jacfwd(cr.jacfwd(cr.jacrev(g)))(x)               # third order: a symmetric tensor
    assert T.shape == (3, 3, 3)
    np.testing.assert_allclose(T, T.transpose(1, 0, 2), atol=1e-10)
    np.testing.assert_allclose(T, T.transpose(2, 1, 0), atol=1e-10)


def test_vjp_of_jvp_and_jvp_of_vjp():
    A = rng.standard_normal((4, 3))

    def g(x):
        return cr.tanh(A @ x)

    x, v, cot = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(4)
    # d/dx <cot, J(x) v> two ways
    _, pull = cr.vjp(lambda x: cr.jvp(g, (x,), (v,))[1], x)
    (r1,) = pull(cot)
    r2 = cr.grad(lambda x: (cr.jvp(g, (x,), (v,))[1] * cot).sum())(x)
    H = cr.jacfwd(cr.jacrev(lambda x: (g(x) * cot).sum()))(x)
    np.testing.assert_allclose(r1, H @ v, atol=1e-12)
    np.testing.assert_allclose(r2, H @ v, atol=1e-12)

    def pulled(x):
        return cr.vjp(g, x)[1](cot)[0]

    _, r3 = cr.jvp(pulled, (x,), (v,))                     # forward over reverse through vjp_fn
    np.testing.assert_allclose(r3, H @ v, atol=1e-12)
    # vjp_fn is linear in the cotangent: its JVP along w is vjp_fn(w)
    w = rng.standard_normal(4)
    _, lin = cr.jvp(lambda c: cr.vjp(g, x)[1](c)[0], (cot,), (w,))
    np.testing.assert_allclose(lin, cr.vjp(g, x)[1](w)[0], atol=1e-14)


def test_perturbation_confusion_reverse():
    c = 3.0
    for x0 in (2.0, 5.0):
        assert cr.grad(lambda x: x * cr.grad(lambda y: x * y)(c))(x0) == 2 * x0
    # Siskind & Pearlmutter: d/dx [x * d/dy (x + y)] = 1 (confused implementations give 2)
    assert cr.grad(lambda x: x * cr.grad(lambda y: x + y)(1.0))(1.0) == 1.0


def test_perturbation_confusion_forward_and_mixed():
    c = 3.0
    for x0 in (2.0, 5.0):
        inner_fwd = lambda x: cr.jvp(lambda y: x * y, (c,), (1.0,))[1]   # noqa: E731
        inner_rev = lambda x: cr.grad(lambda y: x * y)(c)                  # noqa: E731
        assert deriv_fwd(lambda x: x * inner_fwd(x))(x0) == 2 * x0
        assert deriv_fwd(lambda x: x * inner_rev(x))(x0) == 2 * x0
        assert cr.grad(lambda x: x * inner_fwd(x))(x0) == 2 * x0
    assert deriv_fwd(lambda x: x * deriv_fwd(lambda y: x + y)(1.0))(1.0) == 1.0


def test_result_stays_connected_to_an_outer_graph():
    x = cr.tensor(np.array([0.3, -0.4]), requires_grad=True)
    g = cr.grad(lambda x: (cr.sin(x) * x ** 3).sum())(x)
    assert g.requires_grad
    g.sum().backward()
    np.testing.assert_allclose(x.grad.data, d2(x.data), rtol=1e-12)
    y = cr.tensor(np.array(0.5), requires_grad=True)
    _, t = cr.jvp(lambda z: cr.exp(z * y), (np.array(1.0),), (np.array(1.0),))
    t.backward()                                     # d/dy [y exp(y)] = (1 + y) exp(y)
    assert abs(y.grad.item() - 1.5 * np.exp(0.5)) < 1e-12


def test_closure_over_an_outer_leaf_at_top_level():
    w = cr.tensor(np.array([1.0, 2.0]), requires_grad=True)
    g = cr.grad(lambda x: (w * x ** 2).sum())(np.array([3.0, 4.0]))
    assert isinstance(g, cr.Tensor) and g.requires_grad          # depends on w: kept differentiable
    g.sum().backward()                                           # d/dw sum(2 w x) = 2 x
    np.testing.assert_array_equal(w.grad.data, [6.0, 8.0])
    plain = cr.grad(lambda x: (x ** 2).sum())(np.array([3.0, 4.0]))
    assert type(plain) is np.ndarray


def test_no_graph_is_kept_when_nothing_outside_needs_it():
    x = cr.tensor([1.0, 2.0])                     # does not require grad
    g = cr.grad(lambda x: (x ** 3).sum())(x)
    assert g.grad_fn is None and not g.requires_grad
    with cr.no_grad():                            # transforms still work under no_grad
        h = cr.grad(lambda x: (x ** 3).sum())(cr.tensor([1.0], requires_grad=True))
    assert not h.requires_grad and h.item() == 3.0


@pytest.mark.parametrize("x0", [0.2, 1.1])
def test_hvp_of_tensor_that_requires_grad_is_differentiable(x0):
    x = cr.tensor(np.array([x0]), requires_grad=True)
    (hv,) = cr.hvp(lambda x: (cr.sin(x) * x ** 3).sum(), (x,), (np.array([1.0]),))
    np.testing.assert_allclose(hv.data, d2(np.array([x0])), rtol=1e-12)
    hv.sum().backward()
    np.testing.assert_allclose(x.grad.data, d3(np.array([x0])), rtol=1e-12)


def test_auto_jacobian_nests():
    A = rng.standard_normal((5, 2))

    def g(x):
        return (cr.tanh(A @ x) ** 2).sum()

    x = rng.standard_normal(2)
    inner = cr.jacobian(g)
    outer = cr.jacobian(inner)
    np.testing.assert_allclose(outer(x), cr.hessian(g)(x), atol=1e-12)
    assert inner.last_mode == "reverse" and outer.last_mode == "reverse"   # n = 2 >= m = 1, 2
    tall = cr.jacobian(lambda x: cr.tanh(A @ x))                          # n = 2 < m = 5
    s = cr.grad(lambda x: tall(x).sum())(x)
    assert tall.last_mode == "forward"
    np.testing.assert_allclose(s, cr.grad(lambda x: cr.jacrev(lambda y: cr.tanh(A @ y))(x).sum())(x),
                               atol=1e-12)


def test_grad_with_respect_to_a_tangent():
    # jvp is linear in the tangent: d/dv sum(J v) = J^T 1
    x, v = rng.standard_normal(3), rng.standard_normal(3)

    def g(x):
        return cr.sin(x) * x.sum()

    gv = cr.grad(lambda v: cr.jvp(g, (x,), (v,))[1].sum())(v)
    np.testing.assert_allclose(gv, cr.jacrev(g)(x).sum(axis=0), atol=1e-12)
