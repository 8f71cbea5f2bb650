"""cr.vmap's semantics: in_axes/out_axes, nesting, keyword arguments, randomness, chunking, errors,
in-place ops, custom Functions, and composition with every transform (checked against loops and,
where installed, torch.func)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import chainrule as cr

rng = np.random.default_rng(0)
X = rng.standard_normal((5, 3))
Y = rng.standard_normal((5, 3))
W = rng.standard_normal((3, 2))


def t(a, **kw):
    return cr.tensor(a, dtype=cr.float64, **kw)


def f(x):
    return (cr.sin(x) * x).sum()


# ----- in_axes, out_axes, shapes -----
def test_code_inside_sees_one_example():
    seen = []

    def g(x):
        seen.append((x.shape, x.ndim, len(x)))
        return x * 2
    out = cr.vmap(g)(t(X))
    assert seen == [((3,), 1, 3)]
    np.testing.assert_allclose(out.numpy(), 2 * X)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_in_axes_and_out_axes_ints(axis):
    data = np.moveaxis(X, 0, axis)
    out = cr.vmap(lambda x: cr.exp(x), in_axes=axis, out_axes=axis)(t(data))
    np.testing.assert_allclose(out.numpy(), np.exp(data))


def test_in_axes_pytree_and_none():
    def g(d, w, scale):
        return {"y": d["a"] @ w * scale, "b": d["b"]}
    out = cr.vmap(g, in_axes=({"a": 0, "b": None}, None, None))({"a": t(X), "b": t(Y[0])}, t(W), 2.0)
    np.testing.assert_allclose(out["y"].numpy(), X @ W * 2)
    np.testing.assert_allclose(out["b"].numpy(), np.broadcast_to(Y[0], (5, 3)))   # unbatched: broadcast


def test_out_axes_pytree_and_none():
    a, b = cr.vmap(lambda x: (x * 2, cr.tensor(7.0)), out_axes=(1, None))(t(X))
    np.testing.assert_allclose(a.numpy(), 2 * X.T)
    assert float(b) == 7.0


def test_numpy_arguments_give_numpy_results():
    out = cr.vmap(lambda x: x * 2)(X)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 2 * X)


def test_keyword_arguments_are_not_batched():
    out = cr.vmap(lambda x, *, shift: x + shift)(t(X), shift=t(Y[0]))
    np.testing.assert_allclose(out.numpy(), X + Y[0])


def test_nested_vmap_is_an_outer_product():
    out = cr.vmap(cr.vmap(lambda a, b: (a * b).sum(), in_axes=(None, 0)), in_axes=(0, None))(t(X), t(Y))
    np.testing.assert_allclose(out.numpy(), X @ Y.T)


def test_axis_size_with_no_batched_argument():
    out = cr.vmap(lambda x: x + 1, in_axes=None, axis_size=4)(t(Y[0]))
    np.testing.assert_allclose(out.numpy(), np.broadcast_to(Y[0] + 1, (4, 3)))


@pytest.mark.parametrize("chunk", [1, 2, 5, 100])
def test_chunk_size_gives_the_same_result(chunk):
    out = cr.vmap(lambda x: cr.softmax(x, axis=0) @ t(W), chunk_size=chunk)(t(X))
    ref = cr.vmap(lambda x: cr.softmax(x, axis=0) @ t(W))(t(X))
    np.testing.assert_allclose(out.numpy(), ref.numpy())


# ----- errors -----
@pytest.mark.parametrize("body, needle", [
    (lambda x: x if x.sum() > 0 else -x, "bool()"),
    (lambda x: float(x.sum()), "float()"),
    (lambda x: x.sum().item(), ".item()"),
    (lambda x: np.asarray(x), "np.asarray"),
    (lambda x: cr.nonzero(x), "depends on the values"),
    (lambda x: x[x > 0], "depend on the values"),
])
def test_value_dependent_code_raises_a_clear_error(body, needle):
    with pytest.raises(cr.VmapError, match="vmap") as info:
        cr.vmap(body)(t(X))
    assert needle in str(info.value)
    assert "cr.where" in str(info.value)


def test_mismatched_batch_sizes():
    with pytest.raises(cr.VmapError, match="different sizes"):
        cr.vmap(lambda a, b: a + b)(t(X), t(rng.standard_normal((4, 3))))


def test_in_axes_errors():
    with pytest.raises(cr.VmapError, match="2 entries but the function got 1"):
        cr.vmap(lambda a: a, in_axes=(0, 0))(t(X))
    with pytest.raises(cr.VmapError, match="axis 2"):
        cr.vmap(lambda a: a, in_axes=2)(t(X))
    with pytest.raises(cr.VmapError, match="only arrays and tensors"):
        cr.vmap(lambda a: a)(3.0)
    with pytest.raises(cr.VmapError, match="axis_size"):
        cr.vmap(lambda a: a, in_axes=None)(t(X))


def test_batched_output_with_out_axes_none():
    with pytest.raises(cr.VmapError, match="out_axes None"):
        cr.vmap(lambda a: a * 2, out_axes=None)(t(X))


# ----- in place -----
def test_in_place_ops_on_batched_tensors():
    def g(r):
        r = r.copy()
        r += 1
        r[0] = 10.0
        r *= 3
        return r * r
    xt = t(X, requires_grad=True)
    out = cr.vmap(g)(xt)
    ref = (3 * (X + 1)) ** 2
    ref[:, 0] = 900.0
    np.testing.assert_allclose(out.numpy() if not out.requires_grad else out.detach().numpy(), ref)
    out.sum().backward()
    expected = 18 * (X + 1)
    expected[:, 0] = 0.0
    np.testing.assert_allclose(xt.grad.numpy(), expected)


def test_in_place_write_of_a_batched_value_into_an_unbatched_tensor():
    def g(r):
        buf = cr.zeros(3, dtype=cr.float64)
        buf += r
        return buf
    with pytest.raises(cr.VmapError, match="not batched"):
        cr.vmap(g)(t(X))


def test_setitem_with_a_batched_index():
    idx = np.array([0, 2, 1, 1, 0])
    out = cr.vmap(lambda r, i: r[i])(t(X), cr.tensor(idx))
    np.testing.assert_allclose(out.numpy(), X[np.arange(5), idx])


# ----- randomness -----
def _dropout(x):
    return cr.nn.functional.dropout(x, 0.5, training=True)


def test_randomness_error_by_default():
    with pytest.raises(cr.VmapError, match="randomness"):
        cr.vmap(_dropout)(t(np.ones((4, 100))))


def test_randomness_different_and_same():
    ones = t(np.ones((4, 100)))
    diff = cr.vmap(_dropout, randomness="different")(ones).numpy()
    same = cr.vmap(_dropout, randomness="same")(ones).numpy()
    assert not all(np.array_equal(diff[0], d) for d in diff[1:])
    assert all(np.array_equal(same[0], s) for s in same[1:])
    assert set(np.unique(diff)) <= {0.0, 2.0}


def test_randomness_same_with_chunks_draws_once():
    same = cr.vmap(_dropout, randomness="same", chunk_size=2)(t(np.ones((4, 100)))).numpy()
    assert all(np.array_equal(same[0], s) for s in same[1:])


# ----- custom Functions -----
class Cube(cr.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


class BatchedCube(Cube):
    calls = 0

    @staticmethod
    def vmap(info, in_dims, x):
        BatchedCube.calls += 1
        assert info.batch_size == 5 and in_dims == (0,)
        return BatchedCube.apply(x), 0


def test_function_with_a_vmap_rule_runs_once_on_the_batch():
    BatchedCube.calls = 0
    xt = t(X, requires_grad=True)
    cr.vmap(lambda r: BatchedCube.apply(r).sum())(xt).sum().backward()
    assert BatchedCube.calls == 1
    np.testing.assert_allclose(xt.grad.numpy(), 3 * X ** 2)


def test_function_without_a_vmap_rule_loops_with_one_warning():
    xt = t(X, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cr.vmap(lambda r: Cube.apply(r).sum())(xt).sum().backward()
        cr.vmap(lambda r: Cube.apply(r).sum())(xt)
    assert len([m for m in w if "Cube" in str(m.message)]) <= 1
    np.testing.assert_allclose(xt.grad.numpy(), 3 * X ** 2)


# ----- composition with the transforms -----
def _loop(fn, *args):
    return np.stack([np.asarray(fn(*a)) for a in zip(*args)])


def test_vmap_of_grad_and_grad_of_vmap():
    ref = _loop(cr.grad(f), X)
    np.testing.assert_allclose(np.asarray(cr.vmap(cr.grad(f))(X)), ref)
    xt = t(X, requires_grad=True)
    cr.vmap(f)(xt).sum().backward()                 # the tensor API on a vmap's output
    np.testing.assert_allclose(xt.grad.numpy(), ref)
    np.testing.assert_allclose(np.asarray(cr.grad(lambda x: cr.vmap(f)(x).sum())(X)), ref)


def test_per_example_gradients_of_an_unbatched_argument():
    def loss(w, x):
        return (cr.tanh(x @ w) ** 2).sum()
    got = cr.vmap(cr.grad(loss), in_axes=(None, 0))(W, X)
    ref = np.stack([cr.grad(loss)(W, x) for x in X])
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)


def test_per_example_gradients_through_a_closure():
    got = cr.vmap(lambda x: cr.grad(lambda w: (cr.tanh(x @ w) ** 2).sum())(W))(X)
    ref = np.stack([cr.grad(lambda w: (cr.tanh(x @ w) ** 2).sum())(W) for x in X])
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)


def test_vmap_of_jvp_and_of_vjp_fn():
    def g(x):
        return cr.sin(x) * x
    _, tangents = cr.vmap(lambda x, v: cr.jvp(g, (x,), (v,)))(X, Y)
    np.testing.assert_allclose(np.asarray(tangents), (np.cos(X) * X + np.sin(X)) * Y)
    _, vjp_fn = cr.vjp(g, X[0])
    rows = cr.vmap(vjp_fn)(np.eye(3))[0]
    np.testing.assert_allclose(np.asarray(rows), np.diag(np.cos(X[0]) * X[0] + np.sin(X[0])))


def test_jacrev_of_vmap_and_vmap_of_hessian():
    jac = cr.jacrev(cr.vmap(lambda x: cr.sin(x).sum()))(X)            # (5,) outputs, (5, 3) input
    expected = np.zeros((5, 5, 3))
    for i in range(5):
        expected[i, i] = np.cos(X[i])
    np.testing.assert_allclose(np.asarray(jac), expected)
    hess = cr.vmap(cr.hessian(lambda x: (x ** 3).sum() + x[0] * x[1]))(X)
    ref = np.stack([np.diag(6 * x) + np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]) for x in X])
    np.testing.assert_allclose(np.asarray(hess), ref, atol=1e-12)


def test_vmap_of_vmap_of_grad():
    data = rng.standard_normal((2, 4, 3))
    got = cr.vmap(cr.vmap(cr.grad(f)))(data)
    np.testing.assert_allclose(np.asarray(got), np.cos(data) * data + np.sin(data))


@pytest.mark.parametrize("chunk", [None, 2])
def test_jacobians_are_one_batched_pass(chunk):
    A = rng.standard_normal((4, 3))

    def g(x):
        return cr.tanh(t(A) @ x)
    expected = (1 - np.tanh(A @ X[0]) ** 2)[:, None] * A
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # no fallback to one pass per basis vector
        np.testing.assert_allclose(np.asarray(cr.jacrev(g, chunk_size=chunk)(X[0])), expected)
        np.testing.assert_allclose(np.asarray(cr.jacfwd(g, chunk_size=chunk)(X[0])), expected)


def test_matches_torch_func():
    torch = pytest.importorskip("torch")

    def g(w, x):
        return (cr.tanh(x @ w) ** 2).sum()

    def tg(w, x):
        return (torch.tanh(x @ w) ** 2).sum()
    ours = cr.vmap(cr.grad(g), in_axes=(None, 0))(W, X)
    theirs = torch.func.vmap(torch.func.grad(tg), in_dims=(None, 0))(torch.tensor(W), torch.tensor(X))
    np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), rtol=1e-12)
    ours = cr.vmap(cr.hessian(lambda x: cr.sin(x).sum() * x[0]))(X)
    theirs = torch.func.vmap(torch.func.hessian(lambda x: torch.sin(x).sum() * x[0]))(torch.tensor(X))
    np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), rtol=1e-12, atol=1e-14)


def test_setitem_with_a_batched_index_that_leaves_out_trailing_dims():
    # found by test_vmap_fuzz: x[idx] = value with a batched idx on a 2-D example built the value
    # for a 2-D region (the implicit trailing slice was left out)
    data = rng.standard_normal((2, 2, 3))
    idx = np.array([[1, 0], [0, 0]])

    def g(x, i):
        y = x.copy()
        y[i] = 2.0
        y[i] += x[0]
        return y
    got = cr.vmap(g)(data, idx)
    ref = np.stack([g(t(x), i).numpy() for x, i in zip(data, idx)])
    np.testing.assert_allclose(np.asarray(got), ref)
    grads = cr.vmap(cr.grad(lambda x, i: (g(x, i) ** 2).sum()))(data, idx)
    np.testing.assert_allclose(np.asarray(grads), np.stack([cr.grad(lambda x: (g(x, i) ** 2).sum())(x)
                                                            for x, i in zip(data, idx)]))


def test_jvp_of_a_shared_primal_with_per_example_tangents_through_a_closure():
    # the shared primal meets a batched value only inside the function (a closure): its dual is
    # copied per example there, each copy with its own tangent
    tangents = Y + 1
    out = cr.vmap(lambda x, v: cr.jvp(lambda w: cr.sin(x * w).sum(), (Y[0],), (v,))[1])(X, tangents)
    np.testing.assert_allclose(np.asarray(out), (np.cos(X * Y[0]) * X * tangents).sum(1))
