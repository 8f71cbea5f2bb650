"""Graph semantics with exact values: leaves, grad_fn, accumulation, retain_graph, hooks, no_grad,
deep graphs, create_graph, autograd.grad, custom Functions, and every error with its message."""
import threading

import numpy as np
import pytest

import chainrule as cr
from tests.custom_functions import Square


def test_leaves_and_grad_fn_names():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    c = cr.tensor([3.0, 4.0])
    y = cr.exp(x) * c
    assert x.is_leaf and x.grad_fn is None and c.is_leaf
    assert not y.is_leaf and y.grad_fn.name == "MultiplyBackward"
    (exp_edge, _), (c_edge, _) = y.grad_fn.next_functions
    assert exp_edge.name == "ExpBackward" and c_edge is None
    assert exp_edge.next_functions[0][0].name == "AccumulateGrad"
    assert exp_edge.next_functions[0][0].variable() is x


def test_gradient_accumulates_across_uses_and_calls():
    x = cr.tensor(3.0, requires_grad=True)
    y = x * x + x          # x used three times
    y.backward()
    assert x.grad.item() == 7.0
    (x * 2).backward()
    assert x.grad.item() == 9.0   # accumulated across calls, like PyTorch


def test_broadcast_gradient_is_summed_to_input_shape():
    x = cr.tensor(np.ones((3, 1)), requires_grad=True)
    y = cr.tensor(np.arange(4.0), requires_grad=True)
    (x * y).sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.full((3, 1), 6.0))
    np.testing.assert_array_equal(y.grad.data, np.full(4, 3.0))


def test_second_backward_needs_retain_graph():
    x = cr.tensor(2.0, requires_grad=True)
    y = cr.exp(x) * x
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == pytest.approx(2 * 3 * np.exp(2.0), rel=1e-6)
    with pytest.raises(cr.GraphError, match="second time.*retain_graph=True"):
        y.backward()


def test_retain_grad_and_hooks():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    seen = []
    h.register_hook(lambda g: seen.append(g.data.copy()))
    remove = x.register_hook(lambda g: g * 10)
    (h * h).sum().backward()
    np.testing.assert_array_equal(h.grad.data, [6.0, 12.0])
    np.testing.assert_array_equal(seen[0], [6.0, 12.0])
    np.testing.assert_array_equal(x.grad.data, [180.0, 360.0])
    remove()
    x.grad = None
    (x * 1).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])


def test_no_grad_records_and_saves_nothing():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    with cr.no_grad():
        y = cr.tanh(x) * x
    assert not y.requires_grad and y.grad_fn is None

    @cr.no_grad()
    def f(v):
        return v * 2
    assert f(x).grad_fn is None
    with cr.no_grad():
        with cr.enable_grad():
            assert (x * 2).requires_grad
    with cr.set_grad_enabled(False):
        assert not cr.is_grad_enabled()
    assert cr.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = []
    with cr.no_grad():
        t = threading.Thread(target=lambda: seen.append(cr.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_deep_chain_has_no_recursion_limit():
    x = cr.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0


def test_create_graph_gives_second_derivatives():
    x = cr.tensor(1.5, requires_grad=True)
    y = cr.sin(x) * x * x
    (gx,) = cr.autograd.grad(y, x, create_graph=True)
    (gxx,) = cr.autograd.grad(gx, x)
    v = 1.5
    assert gx.item() == pytest.approx(np.cos(v) * v * v + 2 * v * np.sin(v))
    assert gxx.item() == pytest.approx(-np.sin(v) * v * v + 4 * v * np.cos(v) + 2 * np.sin(v))


def test_backward_create_graph_accumulates_differentiable_grad():
    x = cr.tensor(2.0, requires_grad=True)
    (x ** 3).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.item() == 12.0
    x.grad = None
    g.backward()
    assert x.grad.item() == 12.0   # d/dx 3x^2 at 2


def test_autograd_grad_does_not_touch_leaves_and_allow_unused():
    x = cr.tensor(2.0, requires_grad=True)
    z = cr.tensor(1.0, requires_grad=True)
    gx, gz = cr.autograd.grad(x * x, [x, z], allow_unused=True)
    assert gx.item() == 4.0 and gz is None and x.grad is None
    with pytest.raises(cr.GraphError, match="allow_unused=True"):
        cr.autograd.grad(x * x, [x, z])


def test_autograd_grad_wrt_intermediate():
    x = cr.tensor(2.0, requires_grad=True)
    h = x * 3
    y = h * h
    (gh,) = cr.autograd.grad(y, h)
    assert gh.item() == 12.0


def test_backward_inputs_restricts_accumulation():
    x = cr.tensor(2.0, requires_grad=True)
    z = cr.tensor(3.0, requires_grad=True)
    (x * z).backward(inputs=[x])
    assert x.grad.item() == 3.0 and z.grad is None


def test_leaf_grads_never_alias():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = cr.tensor([1.0, 2.0], requires_grad=True)
    seed = np.array([1.0, 1.0])
    (x + y).backward(seed)
    x.grad.data[0] = 100
    assert y.grad.data[0] == 1.0 and seed[0] == 1.0


def test_indexing_accumulates_repeated_indices_and_masks():
    x = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x[[0, 0, 2]] * cr.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [3.0, 0.0, 3.0])
    x.grad = None
    x[x > 1.5].sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 1.0, 1.0])


def test_setitem_is_differentiable_and_bumps_version():
    x = cr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = cr.tensor(5.0, requires_grad=True)
    y = x * 1
    y[1] = v * 2
    assert y._version == 1
    (y * cr.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 0.0, 100.0])
    assert v.grad.item() == 20.0


def test_numpy_interop_stays_differentiable():
    x = cr.tensor([0.5, 1.0], requires_grad=True)
    y = np.exp(x) * np.sum(x)
    assert isinstance(y, cr.Tensor) and y.requires_grad
    y.sum().backward()
    e = np.exp([0.5, 1.0])
    np.testing.assert_allclose(x.grad.data, e * 1.5 + e.sum(), rtol=1e-6)
    assert np.asarray(x.detach()).shape == (2,)
    with pytest.raises(TypeError, match="no differentiable chainrule version"):
        np.lib.stride_tricks.sliding_window_view(x, 2)


def test_default_dtype_rules():
    assert cr.tensor([1.0]).dtype == np.float32
    assert cr.tensor(np.array([1.0])).dtype == np.float64
    assert cr.tensor([1, 2]).dtype == np.int64
    cr.set_default_dtype(cr.float64)
    try:
        assert cr.tensor([1.0]).dtype == np.float64
    finally:
        cr.set_default_dtype(cr.float32)


def test_astype_casts_gradient_back():
    x = cr.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x.astype(cr.float32) * 3
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.data, [3.0, 3.0])


# ----- custom Functions -----
class BadShape(cr.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return cr.ones((5,))


def test_custom_function_backward_double_backward_and_jvp():
    x = cr.tensor(3.0, requires_grad=True)
    y = Square.apply(x)
    assert y.grad_fn.name == "SquareBackward"
    (g,) = cr.autograd.grad(y, x, create_graph=True)
    assert g.item() == 6.0
    (gg,) = cr.autograd.grad(g, x)
    assert gg.item() == 2.0
    from chainrule import forward_ad as fwAD
    with fwAD.dual_level():
        d = fwAD.make_dual(cr.tensor(3.0), cr.tensor(1.0))
        assert fwAD.unpack_dual(Square.apply(d)).tangent.item() == 6.0


def test_custom_function_wrong_shape_is_named():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(cr.ShapeError,
                       match=r"BadShapeBackward returned a gradient of shape \(5,\) for an input of shape \(2,\)"):
        BadShape.apply(x).sum().backward()


# ----- errors -----
def test_shape_errors_at_forward_time():
    with pytest.raises(cr.ShapeError, match=r"matmul: shapes \(3, 4\) and \(5, 2\) are not aligned: 4 != 5"):
        cr.matmul(cr.ones((3, 4)), cr.ones((5, 2)))
    with pytest.raises(cr.ShapeError, match=r"add: cannot apply to inputs \(3,\) float32, \(4,\) float32"):
        cr.ones(3) + cr.ones(4)


def test_backward_errors():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(cr.GraphError, match=r"only for scalar outputs.*shape \(2,\).*gradient="):
        (x * 2).backward()
    with pytest.raises(cr.ShapeError, match=r"gradient has shape \(3,\) but output 0 has shape \(2,\)"):
        (x * 2).backward(np.ones(3))
    with pytest.raises(cr.GraphError, match="does not require grad"):
        cr.tensor([1.0]).sum().backward()


def test_requires_grad_on_integer_tensor_is_refused():
    with pytest.raises(cr.DTypeError, match="requires_grad=True needs a floating dtype.*int64"):
        cr.tensor([1, 2], requires_grad=True)


def test_in_place_modification_of_saved_tensor_is_detected():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = (h * h).sum()
    h += 1
    with pytest.raises(cr.GraphError, match="modified by an in-place operation.*version 1; expected version 0"):
        y.backward()


def test_in_place_on_leaf_requiring_grad_is_refused():
    x = cr.tensor([1.0], requires_grad=True)
    with pytest.raises(cr.GraphError, match="leaf tensor that requires grad"):
        x *= 2
    with cr.no_grad():
        x *= 2
    assert x.item() == 2.0


def test_in_place_ops_rebase_the_graph():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y *= 3
    y -= 1
    y /= 2
    assert y.grad_fn.name == "DivideBackward"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [1.5, 1.5])


def test_saved_tensor_modified_in_place_error_names_the_function():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    y = Square.apply(h)
    h += 1
    with pytest.raises(cr.GraphError, match=r"SquareBackward: saved tensor 0 \(shape \(2,\)\) was "
                                            r"modified in place"):
        y.sum().backward()


def test_second_backward_error_names_the_function():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x).sum()
    y.backward()
    with pytest.raises(cr.GraphError, match="SquareBackward: the saved values were freed"):
        y.backward()


@pytest.mark.parametrize("ufunc", sorted((u for u in cr.numpy._UFUNCS if u.nout == 1), key=lambda u: u.__name__),
                         ids=lambda u: u.__name__)
def test_every_numpy_ufunc_dispatches_to_chainrule(ufunc):
    data = np.array([[0.3, 0.6], [0.2, 0.1]]) if ufunc in (np.matvec, np.vecmat) else np.array([0.3, 0.6])
    try:
        expected = ufunc(*(data,) * ufunc.nin)
    except TypeError:                          # integer-only ufuncs (gcd, bitwise_and, ldexp, ...)
        pytest.skip(f"numpy.{ufunc.__name__} takes no float input")
    x = cr.tensor(data, requires_grad=True)
    out = ufunc(*(x,) * ufunc.nin)
    assert isinstance(out, cr.Tensor)
    np.testing.assert_allclose(out.data, expected)
    differentiable = out.dtype.kind == "f"
    assert out.requires_grad == differentiable


SIMPLE_FUNCTIONS = [np.sum, np.mean, np.prod, np.max, np.min, np.var, np.std, np.cumsum, np.cumprod,
                    np.ravel, np.transpose, np.flip, np.trace, np.diagonal, np.sort, np.linalg.inv,
                    np.linalg.det, np.atleast_2d, np.tril, np.triu, np.average, np.linalg.norm]


@pytest.mark.parametrize("func", SIMPLE_FUNCTIONS, ids=lambda f: f.__name__)
def test_numpy_functions_dispatch(func):
    data = np.arange(1.0, 5.0).reshape(2, 2) + np.eye(2)
    x = cr.tensor(data, requires_grad=True)
    out = func(x)
    assert isinstance(out, cr.Tensor) and out.requires_grad
    np.testing.assert_allclose(out.data, func(data))


def test_ops_and_backward_work_in_a_fresh_thread():
    results = []

    def work():
        x = cr.tensor([1.0, 2.0], requires_grad=True)
        (cr.tanh(x) * x).sum().backward()
        results.append(x.grad.data.copy())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(results[0], np.tanh(x) + x * (1 - np.tanh(x) ** 2), rtol=1e-6)


def test_python_list_operands_take_the_default_dtype():
    assert cr.add(cr.tensor([1.0]), [1.0]).dtype == np.float32
    assert (cr.tensor([1.0]) * [2.0, 3.0]).dtype == np.float32
    assert cr.exp([1.0]).dtype == np.float32
    assert cr.add(cr.tensor([1], dtype=cr.int64), [2]).dtype == np.int64
