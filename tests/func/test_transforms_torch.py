"""torch.func as a second oracle (skipped when torch is not installed)."""
import numpy as np
import pytest

import chainrule as cr

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")

rng = np.random.default_rng(3)
A = rng.standard_normal((4, 3))
X, W = rng.standard_normal(3), rng.standard_normal(4)


def ours(x, w):
    return (cr.tanh(A @ x) * w).sum() + cr.log(1 + x ** 2).sum() * (w ** 2).sum()


def theirs(x, w):
    At = torch.as_tensor(A)
    return (torch.tanh(At @ x) * w).sum() + torch.log(1 + x ** 2).sum() * (w ** 2).sum()


def T(a):
    return torch.as_tensor(np.asarray(a))


def test_grad_and_hessian_match_torch_func():
    for argnums in (0, 1, (0, 1)):
        g, gt = cr.grad(ours, argnums)(X, W), tf.grad(theirs, argnums)(T(X), T(W))
        if not isinstance(argnums, tuple):
            g, gt = (g,), (gt,)
        assert len(g) == len(gt)
        for a, b in zip(g, gt):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-12, atol=1e-14)
    H, Ht = cr.hessian(ours)(X, W), tf.hessian(theirs)(T(X), T(W))
    np.testing.assert_allclose(H, Ht.numpy(), rtol=1e-11, atol=1e-13)


def test_jvp_vjp_jacobians_match_torch_func():
    def vec(x):
        return cr.sin(A @ x) * x.sum()

    def vec_t(x):
        return torch.sin(torch.as_tensor(A) @ x) * x.sum()

    v, cot = rng.standard_normal(3), rng.standard_normal(4)
    _, t = cr.jvp(vec, (X,), (v,))
    _, tt = tf.jvp(vec_t, (T(X),), (T(v),))
    np.testing.assert_allclose(t, tt.numpy(), rtol=1e-12)
    (g,) = cr.vjp(vec, X)[1](cot)
    (gt,) = tf.vjp(vec_t, T(X))[1](T(cot))
    np.testing.assert_allclose(g, gt.numpy(), rtol=1e-12)
    np.testing.assert_allclose(cr.jacfwd(vec)(X), tf.jacfwd(vec_t)(T(X)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(cr.jacrev(vec)(X), tf.jacrev(vec_t)(T(X)).numpy(), rtol=1e-12)


def test_hvp_matches_torch_forward_over_reverse():
    v = rng.standard_normal(3)
    (hv,) = cr.hvp(lambda x: ours(x, W), (X,), (v,))
    _, hvt = tf.jvp(tf.grad(lambda x: theirs(x, T(W))), (T(X),), (T(v),))
    np.testing.assert_allclose(hv, hvt.numpy(), rtol=1e-12)
