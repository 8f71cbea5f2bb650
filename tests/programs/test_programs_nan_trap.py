"""The NaN trap: detect_anomaly names the creating op and its line; safe zero cotangents."""
import sys

import numpy as np
import pytest

import chainrule as cr


@pytest.fixture
def pytorch_nan_semantics():
    prev = cr.set_safe_zero_cotangents(False)
    yield
    cr.set_safe_zero_cotangents(prev)


def _line() -> int:
    return sys._getframe(1).f_lineno + 1        # the line after the caller's


def test_trap_gives_nan_without_safe_zero(pytorch_nan_semantics):
    x = cr.tensor([-1.0, 4.0], dtype=cr.float64, requires_grad=True)
    with np.errstate(invalid="ignore"):
        cr.where(x > 0, cr.sqrt(x), 0.0).sum().backward()
    assert np.isnan(x.grad.data[0]) and x.grad.data[1] == 0.25


def test_detect_anomaly_names_sqrt_and_its_forward_line(pytorch_nan_semantics):
    x = cr.tensor([-1.0, 4.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        line = _line()
        y = cr.where(x > 0, cr.sqrt(x), 0.0).sum()
        with pytest.raises(cr.AnomalyError) as info:
            y.backward()
    msg = str(info.value)
    assert "Function 'SqrtBackward' returned nan" in msg
    assert f"{__file__}, line {line}" in msg
    assert "'sqrt' created nan in forward (invalid value)" in msg


def test_detect_anomaly_names_the_creator_not_the_op_that_passed_it_on():
    x = cr.tensor([-1.0, 4.0], dtype=cr.float64, requires_grad=True)
    w = cr.tensor([2.0, 3.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        line = _line()
        u = cr.log(x)                           # creates the NaN (log of -1)
        z = (u * w).sum()                       # multiply passes it on to w's gradient
        with pytest.raises(cr.AnomalyError) as info:
            z.backward()
    msg = str(info.value)
    assert "Function 'MultiplyBackward' returned nan" in msg      # first backward result that is bad
    assert f"created in the forward pass by 'log' (invalid value) at {__file__}, line {line}" in msg


def test_detect_anomaly_names_the_op_inside_a_backward_rule():
    class BadBackward(cr.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g / (g - g)                 # 1 / 0 inside the rule

    x = cr.tensor([1.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly(), pytest.raises(cr.AnomalyError) as info:
        BadBackward.apply(x).sum().backward()
    msg = str(info.value)
    assert "BadBackwardBackward" in msg
    assert "created inside this backward rule by 'divide' (divide by zero)" in msg


def test_anomaly_mode_is_restored_and_silent_on_finite_gradients():
    x = cr.tensor([1.0, 4.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        cr.sqrt(x).sum().backward()
    np.testing.assert_allclose(x.grad.data, [0.5, 0.25])
    from chainrule.grad_mode import STATE
    assert STATE.anomaly is False and STATE.observers == []


# op, input with a point where the local derivative is inf or NaN
SINGULAR = [
    ("sqrt", cr.sqrt, [-1.0, 0.0, 4.0]),
    ("log", cr.log, [-1.0, 0.0, 2.0]),
    ("log2", cr.log2, [0.0, 2.0]),
    ("log10", cr.log10, [0.0, 2.0]),
    ("log1p", cr.log1p, [-1.0, 2.0]),
    ("cbrt", cr.cbrt, [0.0, 8.0]),
    ("arcsin", cr.arcsin, [1.0, 2.0, 0.5]),
    ("arccos", cr.arccos, [-1.0, 0.5]),
    ("arctanh", cr.arctanh, [1.0, 0.5]),
    ("arccosh", cr.arccosh, [1.0, 2.0]),
    ("reciprocal", cr.reciprocal, [0.0, 2.0]),
    ("divide", lambda x: 1.0 / x, [0.0, 2.0]),
    ("power", lambda x: x ** 0.5, [0.0, 4.0]),
    ("arctan2", lambda x: cr.arctan2(x, x * 0), [0.0, 1.0]),
]


@pytest.mark.parametrize("name, fn, x", SINGULAR, ids=[s[0] for s in SINGULAR])
def test_zero_cotangent_stays_zero_through_singular_rules(name, fn, x):
    xt = cr.tensor(x, dtype=cr.float64, requires_grad=True)
    ok = np.array(x) == x[-1]
    with np.errstate(all="ignore"):
        cr.where(cr.tensor(ok), fn(xt), 0.0).sum().backward()
        reference = cr.tensor([x[-1]], dtype=cr.float64, requires_grad=True)
        fn(reference).sum().backward()
    expected = np.where(ok, reference.grad.data[0], 0.0)
    np.testing.assert_array_equal(xt.grad.data, expected)


def test_zero_tangent_stays_zero_in_forward_mode():
    x = cr.tensor([-1.0, 4.0], dtype=cr.float64)
    with np.errstate(invalid="ignore"), cr.forward_ad.dual_level():
        xd = cr.forward_ad.make_dual(x, cr.tensor([0.0, 1.0], dtype=cr.float64))
        t = cr.forward_ad.unpack_dual(cr.sqrt(xd)).tangent
    np.testing.assert_array_equal(t.data, [0.0, 0.25])


def test_safe_zero_keeps_second_order_finite():
    x = cr.tensor([-1.0, 4.0], dtype=cr.float64, requires_grad=True)
    with np.errstate(all="ignore"):
        y = cr.where(x > 0, cr.sqrt(x), 0.0).sum()
        (gx,) = cr.autograd.grad(y, x, create_graph=True)
        (ggx,) = cr.autograd.grad(gx.sum(), x)
    np.testing.assert_allclose(gx.data, [0.0, 0.25])
    np.testing.assert_allclose(ggx.data, [0.0, -0.25 / 8])        # d/dx (1/(2 sqrt x)) = -x^-1.5/4


def test_safe_pattern_needs_no_convention(pytorch_nan_semantics):
    x = cr.tensor([-1.0, 4.0], dtype=cr.float64, requires_grad=True)
    safe_x = cr.where(x > 0, x, 1.0)
    cr.where(x > 0, cr.sqrt(safe_x), 0.0).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.25])
