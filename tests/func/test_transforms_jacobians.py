"""jacfwd, jacrev, jacobian (the choice rule), hessian, hvp."""
import numpy as np
import pytest

import chainrule as cr
from tests.func.transforms_testutil import num_jacobian

rng = np.random.default_rng(1)
A = rng.standard_normal((5, 3))
X = rng.uniform(-1, 1, 3)


def f(x):
    return cr.tanh(A @ x) * x.sum()


@pytest.mark.parametrize("jac", [cr.jacfwd, cr.jacrev, cr.jacobian])
def test_jacobian_matches_finite_differences(jac):
    J = jac(f)(X)
    assert J.shape == (5, 3)
    np.testing.assert_allclose(J, num_jacobian(f, X), atol=1e-8)


@pytest.mark.parametrize("jac", [cr.jacfwd, cr.jacrev])
def test_jacobian_shape_convention_out_shape_plus_in_shape(jac):
    M = rng.standard_normal((2, 3))
    J = jac(lambda m: cr.exp(m).T)(M)                     # (3, 2) output of a (2, 3) input
    assert J.shape == (3, 2, 2, 3)
    expected = np.zeros((3, 2, 2, 3))
    for i in range(2):
        for j in range(3):
            expected[j, i, i, j] = np.exp(M[i, j])
    np.testing.assert_allclose(J, expected, rtol=1e-14)


@pytest.mark.parametrize("jac", [cr.jacfwd, cr.jacrev, cr.jacobian])
def test_jacobian_pytrees_and_argnums(jac):
    def g(x, y):
        return {"p": x * y, "s": (x ** 2).sum()}

    x, y = rng.standard_normal(3), rng.standard_normal(3)
    J = jac(g, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(J["p"][0], np.diag(y), rtol=1e-14)
    np.testing.assert_allclose(J["p"][1], np.diag(x), rtol=1e-14)
    np.testing.assert_allclose(J["s"][0], 2 * x, rtol=1e-14)
    np.testing.assert_allclose(J["s"][1], np.zeros(3))
    Jd = jac(lambda p: p["a"] * p["b"])({"a": 2.0, "b": np.array([1.0, 3.0])})
    assert Jd["a"].shape == (2,) and Jd["b"].shape == (2, 2)
    np.testing.assert_allclose(Jd["a"], [1.0, 3.0])
    np.testing.assert_allclose(Jd["b"], 2 * np.eye(2))


def test_jacobian_has_aux():
    J, aux = cr.jacfwd(lambda x: (x * 3, x.sum()), has_aux=True)(np.ones(2))
    np.testing.assert_array_equal(J, 3 * np.eye(2))
    assert aux == 2.0
    J, aux = cr.jacrev(lambda x: (x * 3, "a"), has_aux=True)(np.ones(2))
    np.testing.assert_array_equal(J, 3 * np.eye(2))
    assert aux == "a"


def test_choice_rule_picks_the_smaller_dimension():
    wide = cr.jacobian(lambda x: cr.tanh(rng.standard_normal((4, 50)) @ x))
    tall = cr.jacobian(lambda x: cr.tanh(rng.standard_normal((50, 4)) @ x))
    assert wide.last_mode is None
    assert wide.mode_for(np.ones(50)) == "reverse"       # n = 50 > m = 4
    assert tall.mode_for(np.ones(4)) == "forward"        # n = 4 < m = 50
    tall(np.ones(4))
    assert tall.last_mode == "forward"
    wide(np.ones(50))
    assert wide.last_mode == "reverse"
    square = cr.jacobian(lambda x: x * 2)
    assert square.mode_for(np.ones(3)) == "reverse"      # n == m: reverse
    forced = cr.jacobian(lambda x: x * 2, mode="forward")
    np.testing.assert_array_equal(forced(np.ones(3)), 2 * np.eye(3))
    assert forced.last_mode == "forward"


def test_choice_rule_probe_is_cached_per_signature():
    calls = []

    def g(x):
        calls.append(x.shape)
        return x * 2

    J = cr.jacobian(g)
    J.mode_for(np.ones(3))
    J.mode_for(np.ones(3))
    assert len(calls) == 1                               # one probe for this signature
    J.mode_for(np.ones(4))
    assert len(calls) == 2
    with pytest.raises(ValueError, match="mode must be one of"):
        cr.jacobian(g, mode="sideways")


def test_hessian_closed_form_and_argnums():
    M = rng.standard_normal((3, 3))
    M = M + M.T
    H = cr.hessian(lambda x: 0.5 * x @ M @ x + cr.sin(x).sum())(X)
    np.testing.assert_allclose(H, M - np.diag(np.sin(X)), atol=1e-12)
    H2 = cr.hessian(lambda x, y: (x * x * y).sum(), argnums=(0, 1))(np.array([1.0, 2.0]),
                                                                     np.array([3.0, 4.0]))
    np.testing.assert_allclose(H2[0][0], np.diag([6.0, 8.0]))
    np.testing.assert_allclose(H2[0][1], np.diag([2.0, 4.0]))
    np.testing.assert_allclose(H2[1][1], np.zeros((2, 2)))


def test_hvp_matches_hessian_times_vector():
    def g(x, w):
        return (cr.tanh(A @ x) * w).sum() + (x ** 4).sum()

    w, v, u = rng.standard_normal(5), rng.standard_normal(3), rng.standard_normal(5)
    hx, hw = cr.hvp(g, (X, w), (v, u))
    H = cr.hessian(g, argnums=(0, 1))(X, w)
    np.testing.assert_allclose(hx, H[0][0] @ v + H[0][1] @ u, atol=1e-12)
    np.testing.assert_allclose(hw, H[1][0] @ v + H[1][1] @ u, atol=1e-12)
    gx = lambda x: cr.grad(g)(x, w)                      # noqa: E731
    np.testing.assert_allclose(cr.hvp(lambda x: g(x, w), (X,), (v,))[0],
                               num_jacobian(gx, X) @ v, atol=1e-7)


def test_jacobian_of_tensor_input_is_tensor():
    J = cr.jacrev(lambda x: x * x)(cr.tensor([1.0, 2.0]))
    assert isinstance(J, cr.Tensor) and J.dtype == np.float32
    np.testing.assert_array_equal(J.data, np.diag([2.0, 4.0]))


def test_aux_that_is_none_is_still_returned():
    J, aux = cr.jacrev(lambda x: (x * 2, None), has_aux=True)(np.ones(2))
    assert aux is None
    np.testing.assert_array_equal(J, 2 * np.eye(2))
    J, aux = cr.jacfwd(lambda x: (x * 2, None), has_aux=True)(np.ones(2))
    assert aux is None
