"""Tensor hooks and retain_grad, as PyTorch >= 2.0 runs them (the fuzz against torch is
test_hooks_fuzz.py; these are the reproducers of defects found, each pinned to its value)."""
import numpy as np
import pytest

import chainrule as cr


def test_retain_grad_with_the_same_tensor_in_inputs_counts_once():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    h.retain_grad()
    (h * h).sum().backward(inputs=[h])
    np.testing.assert_array_equal(h.grad.data, [2.0, 4.0])
    assert x.grad is None


def test_a_non_leaf_in_inputs_retains_its_grad_in_later_backwards_as_torch():
    x = cr.tensor(0.5, dtype=cr.float64, requires_grad=True)
    v = cr.tanh(x)
    loss = cr.tanh(v)
    loss.backward(inputs=[v], retain_graph=True)
    first = float(v.grad)
    loss.backward()
    assert float(v.grad) == pytest.approx(2 * first) and v.retains_grad


@pytest.mark.parametrize("retain_first", [True, False])
def test_retain_grad_sees_the_gradient_after_every_hook(retain_first):
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    if retain_first:
        h.retain_grad()
    h.register_hook(lambda g: g * 10)
    if not retain_first:
        h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_array_equal(h.grad.data, [20.0, 40.0])
    np.testing.assert_array_equal(x.grad.data, [20.0, 40.0])


@pytest.mark.parametrize("hook, error, words", [
    (lambda g: 5, cr.DTypeError, "returned int 5"),
    (lambda g: cr.tensor([1.0, 2.0, 3.0]), cr.ShapeError, "shape (3,) for a tensor of shape (2,)"),
    (lambda g: g.astype(cr.float64), cr.DTypeError, "dtype float64 for a tensor of dtype float32"),
])
@pytest.mark.parametrize("leaf", [True, False])
def test_a_hook_returning_a_misfit_gradient_is_refused(hook, error, words, leaf):
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    h = x if leaf else x * 1
    h.register_hook(hook)
    with pytest.raises(error, match="hook") as info:
        (h * h).sum().backward()
    assert words in str(info.value)
    assert x.grad is None


def test_hooks_of_tensors_that_lead_to_no_input_do_not_run():
    a = cr.tensor([1.0, 2.0], requires_grad=True)
    b = cr.tensor([3.0, 4.0], requires_grad=True)
    seen = []
    b.register_hook(lambda g: seen.append(g))
    (ga,) = cr.autograd.grad((a * b).sum(), [a])
    np.testing.assert_array_equal(ga.data, [3.0, 4.0])
    assert seen == []


def test_the_roots_retain_grad_runs_even_when_it_leads_to_no_input():
    x = cr.tensor(0.3, dtype=cr.float64, requires_grad=True)
    v1, v2 = cr.tanh(x), cr.tanh(x)
    loss = v2.sum()
    loss.retain_grad()
    loss.backward(inputs=[v1])
    assert float(loss.grad) == 1.0 and v1.grad is None


def test_requires_grad_off_after_use_leaves_grad_untouched():
    x = cr.tensor(1.0, requires_grad=True)
    y = x * 2
    x.requires_grad_(False)
    y.backward()
    assert x.grad is None


def test_reshape_to_the_same_shape_is_a_new_tensor_with_its_own_grad():
    x = cr.tensor([1.0, 2.0], requires_grad=True)
    v = x.reshape(2)
    assert v is not x and v.grad_fn is not None
    (v * v).sum().backward()
    assert v.grad is None
    np.testing.assert_array_equal(x.grad.data, [2.0, 4.0])


def test_a_retained_grad_keeps_its_graph_under_create_graph_as_torch():
    x = cr.tensor([1.0, 2.0], dtype=cr.float64, requires_grad=True)
    h = x * 1
    h.retain_grad()
    (h ** 3).sum().backward(create_graph=True)
    assert h.grad.requires_grad
    (gx,) = cr.autograd.grad(h.grad.sum(), x)                 # d/dx sum(3 x^2) = 6x
    np.testing.assert_allclose(gx.data, [6.0, 12.0])


def test_a_retained_grad_shares_no_memory_with_other_grads():
    a = cr.tensor([1.0, 2.0], requires_grad=True)
    y = a + 0
    y.retain_grad()
    y.sum().backward()
    y.grad.data[0] = 100.0
    np.testing.assert_array_equal(a.grad.data, [1.0, 1.0])
