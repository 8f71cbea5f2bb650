"""grad, value_and_grad, vjp, jvp: values against closed forms and finite differences."""
import numpy as np

import chainrule as cr
from tests.func.transforms_testutil import num_jacobian

rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, (3, 2))
W = rng.uniform(-1, 1, (2, 4))
B = rng.uniform(-1, 1, 4)


def loss(x, w, b):
    return (cr.tanh(x @ w + b) ** 2).sum()


def test_grad_matches_finite_differences_for_each_argnum():
    for i, fixed in enumerate([lambda v: loss(v, W, B), lambda v: loss(X, v, B), lambda v: loss(X, W, v)]):
        g = cr.grad(loss, argnums=i)(X, W, B)
        np.testing.assert_allclose(g, num_jacobian(fixed, (X, W, B)[i]), atol=1e-8)


def test_grad_argnums_tuple_and_closed_form():
    gx, gy = cr.grad(lambda x, y: x * y ** 2, argnums=(0, 1))(3.0, 2.0)
    assert (gx, gy) == (4.0, 12.0)
    gy_only = cr.grad(lambda x, y: x * y ** 2, argnums=-1)(3.0, 2.0)
    assert gy_only == 12.0


def test_value_and_grad_and_has_aux():
    (value, aux), g = cr.value_and_grad(lambda x: ((x ** 2).sum(), {"mean": x.mean()}),
                                        has_aux=True)(np.array([1.0, 2.0, 3.0]))
    assert value == 14.0
    np.testing.assert_array_equal(g, [2.0, 4.0, 6.0])
    assert aux["mean"] == 2.0 and isinstance(aux["mean"], np.ndarray)
    g2, aux2 = cr.grad(lambda x: (x.sum() * 3, "label"), has_aux=True)(np.ones(2))
    np.testing.assert_array_equal(g2, [3.0, 3.0])
    assert aux2 == "label"


def test_grad_of_pytree_argument():
    params = {"w": W, "b": B}

    def f(p, x):
        return loss(x, p["w"], p["b"])

    g = cr.grad(f)(params, X)
    assert set(g) == {"w", "b"}
    np.testing.assert_allclose(g["w"], cr.grad(loss, argnums=1)(X, W, B), rtol=1e-12)
    np.testing.assert_allclose(g["b"], num_jacobian(lambda b: loss(X, W, b), B), atol=1e-8)
    gl = cr.grad(lambda ps: ps[0] * ps[1][0] + ps[1][1])([2.0, (3.0, 4.0)])
    assert isinstance(gl, list) and isinstance(gl[1], tuple)
    assert gl[0] == 3.0 and gl[1] == (2.0, 1.0)


def test_kinds_in_kinds_out():
    g_np = cr.grad(lambda x: (x ** 2).sum())(np.array([1.0, 2.0], dtype=np.float32))
    assert type(g_np) is np.ndarray and g_np.dtype == np.float32
    g_float = cr.grad(lambda x: x ** 2)(1.5)
    assert type(g_float) is np.ndarray and g_float.dtype == np.float64 and g_float == 3.0
    g_t = cr.grad(lambda x: (x ** 2).sum())(cr.tensor([1.0, 2.0]))
    assert isinstance(g_t, cr.Tensor) and not g_t.requires_grad
    np.testing.assert_array_equal(g_t.data, [2.0, 4.0])


def test_unused_input_and_constant_output_give_zeros():
    gx, gy = cr.grad(lambda x, y: x * 2.0, argnums=(0, 1))(1.0, np.array([1.0, 2.0]))
    assert gx == 2.0
    np.testing.assert_array_equal(gy, [0.0, 0.0])
    np.testing.assert_array_equal(cr.grad(lambda x: np.float64(3.0))(np.ones(2)), [0.0, 0.0])


def test_vjp_several_outputs_pytree():
    def f(x, w):
        h = x @ w
        return {"h": h, "s": (cr.tanh(h).sum(), h[0])}

    out, vjp_fn = cr.vjp(f, X, W)
    np.testing.assert_allclose(out["h"], X @ W)
    ch, cs, c0 = rng.standard_normal((3, 4)), 0.7, rng.standard_normal(4)
    gx, gw = vjp_fn({"h": ch, "s": (cs, c0)})

    def scalar(x, w):
        o = f(x, w)
        return (o["h"] * ch).sum() + o["s"][0] * cs + (o["s"][1] * c0).sum()

    np.testing.assert_allclose(gx, num_jacobian(lambda v: scalar(v, W), X), atol=1e-8)
    np.testing.assert_allclose(gw, num_jacobian(lambda v: scalar(X, v), W), atol=1e-8)
    gx2, _ = vjp_fn({"h": ch, "s": (cs, c0)})          # the graph is reused
    np.testing.assert_array_equal(gx, gx2)


def test_vjp_has_aux():
    out, vjp_fn, aux = cr.vjp(lambda x: (x * 2, x.sum()), np.array([1.0, 2.0]), has_aux=True)
    np.testing.assert_array_equal(out, [2.0, 4.0])
    assert aux == 3.0
    (g,) = vjp_fn(np.array([1.0, -1.0]))
    np.testing.assert_array_equal(g, [2.0, -2.0])


def test_jvp_matches_jacobian_times_tangent():
    v = (rng.standard_normal(X.shape), rng.standard_normal(W.shape), rng.standard_normal(B.shape))

    def f(x, w, b):
        h = cr.tanh(x @ w + b)
        return h, h.sum(axis=0) * b

    out, tout = cr.jvp(f, (X, W, B), v)
    eps = 1e-6
    up = f(*(p + eps * t for p, t in zip((X, W, B), v)))
    down = f(*(p - eps * t for p, t in zip((X, W, B), v)))
    for k in range(2):
        np.testing.assert_allclose(out[k], f(X, W, B)[k], rtol=1e-14)
        np.testing.assert_allclose(tout[k], (up[k] - down[k]) / (2 * eps), atol=1e-8)


def test_jvp_pytree_inputs_and_aux():
    primals = ({"a": 2.0, "b": [3.0]},)
    tangents = ({"a": 1.0, "b": [0.5]},)
    out, tout, aux = cr.jvp(lambda p: (p["a"] * p["b"][0], "aux"), primals, tangents, has_aux=True)
    assert out == 6.0 and tout == 1.0 * 3.0 + 2.0 * 0.5 and aux == "aux"


def test_jvp_of_output_independent_of_input_is_zero():
    out, tout = cr.jvp(lambda x: np.ones(3), (np.array(1.0),), (np.array(1.0),))
    np.testing.assert_array_equal(tout, np.zeros(3))


def test_jvp_and_vjp_are_adjoint():
    u, cot = rng.standard_normal(X.shape), rng.standard_normal((3, 4))

    def f(x):
        return cr.sin(x @ W) * cr.exp(x).sum()

    _, ju = cr.jvp(f, (X,), (u,))
    _, vjp_fn = cr.vjp(f, X)
    (jt_cot,) = vjp_fn(cot)
    assert abs((cot * ju).sum() - (jt_cot * u).sum()) < 1e-12


def test_tensor_inputs_keep_dtype_float32():
    x = cr.tensor([0.5, 1.0])
    out, tout = cr.jvp(cr.exp, (x,), (cr.ones(2),))
    assert isinstance(tout, cr.Tensor) and tout.dtype == np.float32
    np.testing.assert_allclose(tout.data, np.exp([0.5, 1.0]), rtol=1e-6)


def test_engine_grad_keeps_forward_tangents():
    # regression (core fix): autograd.grad under a dual level returns a dual gradient
    with cr.forward_ad.dual_level():
        x = cr.forward_ad.make_dual(cr.tensor(np.array(2.0)), cr.tensor(np.array(1.0)))
        leaf = cr.Tensor(x.data, requires_grad=True)
        leaf._tangents = x._tangents
        (g,) = cr.autograd.grad(leaf ** 3, leaf)
        assert g.item() == 12.0
        assert cr.forward_ad.unpack_dual(g).tangent.item() == 12.0      # d/dx 3x^2 = 6x


def test_namedtuple_pytrees_keep_their_type():
    import collections
    P = collections.namedtuple("P", "a b")
    g = cr.grad(lambda p: p.a * p.b)(P(2.0, 3.0))
    assert isinstance(g, P) and (g.a, g.b) == (3.0, 2.0)
