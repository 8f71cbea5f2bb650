"""Tensor construction, conversion and in-place misuse: clear errors where NumPy would be silent
or cryptic."""
import numpy as np
import pytest

import chainrule as cr


def test_a_0d_tensor_is_not_iterable():
    with pytest.raises(TypeError, match="0-d tensor"):
        list(cr.tensor(3.0))
    with pytest.raises(TypeError, match="0-d tensor"):
        sum(cr.tensor(5.0))
    with pytest.raises(TypeError):
        len(cr.tensor(5.0))


def test_iterating_yields_differentiable_rows():
    x = cr.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    rows = list(x)
    assert len(rows) == 2 and rows[1].requires_grad
    sum(r.sum() * k for k, r in enumerate(rows, 1)).backward()
    np.testing.assert_array_equal(x.grad.data, [[1.0, 1.0], [2.0, 2.0]])


def test_complex_data_takes_the_complex_partner_of_the_default_dtype_and_can_require_grad():
    z = cr.tensor([3 + 4j], requires_grad=True)
    assert z.dtype == cr.complex64 and z.requires_grad
    (z.abs() ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.data, [6 + 8j])              # dL/dx + i dL/dy (PyTorch's)
    assert cr.tensor(np.array([1 + 1j])).dtype == cr.complex128     # NumPy data keeps its dtype
    with pytest.raises(cr.DTypeError, match="relu: no complex derivative"):
        cr.relu(cr.tensor([1 + 1j], requires_grad=True))
    with pytest.raises(cr.DTypeError, match="only for real scalar outputs"):
        (cr.tensor([1 + 1j], requires_grad=True) * 2).sum().backward()


@pytest.mark.parametrize("data", ["a", None, [1, "a"], b"x", {"a": 1}])
def test_non_numeric_data_is_refused(data):
    with pytest.raises(cr.DTypeError, match="tensor: cannot hold"):
        cr.tensor(data)


def test_python_scalars_follow_the_default_dtype_as_lists_do():
    assert cr.exp(1.0).dtype == cr.exp([1.0, 2.0]).dtype == np.float32
    assert cr.add(1.0, 2).dtype == np.float32
    assert cr.exp(np.float64(1.0)).dtype == np.float64     # NumPy values keep their dtype
    assert cr.exp(1).dtype == np.exp(1).dtype               # integers as NumPy
    prev = cr.get_default_dtype()
    cr.set_default_dtype(cr.float64)
    try:
        assert cr.exp(1.0).dtype == np.float64
    finally:
        cr.set_default_dtype(prev)


def test_adding_a_string_names_the_op_and_the_operand():
    with pytest.raises(cr.DTypeError, match="add: .*input 1 is a str .*'a'"):
        cr.tensor([1.0]) + "a"


def test_in_place_float_result_into_an_int_tensor():
    t = cr.tensor(np.arange(3))
    with pytest.raises(cr.DTypeError, match=r"\+=: the result is float64.* int64 tensor.*t = t \+ other"):
        t += 1.5
    np.testing.assert_array_equal(t.data, [0, 1, 2])
    t += 2
    np.testing.assert_array_equal(t.data, [2, 3, 4])


def test_in_place_on_a_broadcast_view_is_refused():
    b = cr.broadcast_to(cr.tensor([1.0, 2.0]), (3, 2))
    with pytest.raises(cr.GraphError, match=r"\*=: .*read-only view.*copy"):
        b *= 2
    c = b.copy()
    c *= 2
    np.testing.assert_array_equal(c.data, [[2.0, 4.0]] * 3)


@pytest.mark.parametrize("gradient", [np.array(["a"]), np.array([None]), [b"x"]])
def test_backward_with_a_non_numeric_gradient(gradient):
    x = cr.tensor([1.0], requires_grad=True)
    with pytest.raises(cr.DTypeError, match="backward: gradient for output 0 has dtype"):
        (x * 2).backward(gradient)


def test_numpy_functions_without_a_chainrule_version_are_named_as_written():
    x = cr.tensor(np.eye(2), requires_grad=True)
    name = r"numpy\.lib\.stride_tricks\.sliding_window_view"
    with pytest.raises(TypeError, match=name + " has no differentiable"):
        np.lib.stride_tricks.sliding_window_view(x, 2)
    out = np.lib.stride_tricks.sliding_window_view(x.detach(), (2, 2))   # without grad: NumPy's
    np.testing.assert_array_equal(out, np.lib.stride_tricks.sliding_window_view(np.eye(2), (2, 2)))
