"""Review fixes for checkpointing, saved-tensor hooks and accounting."""
import numpy as np
import pytest

import chainrule as cr


@pytest.mark.parametrize("use_reentrant", [True, False, None])
def test_checkpoint_accepts_pytorch_use_reentrant(use_reentrant):
    x = cr.tensor([0.5, 1.0], dtype=cr.float64, requires_grad=True)
    y = cr.checkpoint(lambda v: cr.tanh(v) * v, x, use_reentrant=use_reentrant).sum()
    y.backward()
    t = np.tanh([0.5, 1.0])
    np.testing.assert_allclose(x.grad.data, t + np.array([0.5, 1.0]) * (1 - t ** 2))
    z = cr.checkpoint_sequential([cr.tanh] * 4, 2, x, use_reentrant=use_reentrant)
    assert z.shape == (2,)


def test_checkpoint_under_forward_mode_keeps_tangents_of_closed_over_tensors():
    # The tangent enters through a tensor fn closes over, not through checkpoint's arguments.
    x = np.array([0.5, 1.0])

    def f(w):
        return cr.checkpoint(lambda v: v * w, cr.tensor(x, dtype=cr.float64))

    out, tout = cr.jvp(f, (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),))
    np.testing.assert_allclose(np.asarray(out), [0.5, 2.0])
    np.testing.assert_allclose(np.asarray(tout), x)      # was [0, 0]: the tangent was dropped


def test_hvp_through_checkpoint_with_closed_over_parameter():
    w = np.array([0.3, -0.7])

    def f(x):
        return cr.checkpoint(lambda v: cr.tanh(v * x), cr.tensor(w)).sum()

    def g(x):
        return cr.tanh(cr.tensor(w) * x).sum()

    v = np.array([1.0, 0.5])
    np.testing.assert_allclose(cr.hvp(f, (np.array([0.2, 0.4]),), (v,))[0],
                               cr.hvp(g, (np.array([0.2, 0.4]),), (v,))[0])


def test_second_derivative_through_a_packed_leaf():
    x = cr.tensor([1.0, 2.0], dtype=cr.float64, requires_grad=True)
    with cr.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = (x * x * x).sum()
    (g,) = cr.autograd.grad(y, x, create_graph=True)
    (gg,) = cr.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.data, [3.0, 12.0])
    np.testing.assert_allclose(gg.data, [6.0, 12.0])


def test_saved_tensor_hooks_apply_to_custom_functions():
    from custom_functions import Square
    calls = []

    def pack(t):
        calls.append("pack")
        return t.data.astype(np.float16)

    def unpack(obj):
        calls.append("unpack")
        return obj.astype(np.float64)

    x = cr.tensor([1.5, 2.25], dtype=cr.float64, requires_grad=True)
    with cr.saved_tensors_hooks(pack, unpack):
        y = Square.apply(x).sum()
    y.backward()
    assert calls == ["pack", "unpack"]
    np.testing.assert_array_equal(x.grad.data, [3.0, 4.5])     # exact in float16
