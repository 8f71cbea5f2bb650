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


def _tanh_chain(h, n):
    for _ in range(n):
        h = cr.tanh(h)
    return h


def _anomaly_message(y):
    with pytest.raises(cr.AnomalyError) as info:
        y.sum().backward()
    return str(info.value)


def test_detect_anomaly_walks_back_to_the_forward_op_that_created_nan():
    x = cr.tensor([0.5, 1.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        h = _tanh_chain(x, 6)
        line = _line()
        h = cr.log(h - 5)                       # creates the NaN; 13 tanh pass it on
        for _ in range(13):
            last = _line()
            h = cr.tanh(h)
        msg = _anomaly_message(h)
    assert "Function 'TanhBackward' returned nan" in msg
    assert f"The forward call that created it: {__file__}, line {last}" in msg
    assert f"created in the forward pass by 'log' (invalid value) at {__file__}, line {line}" in msg
    assert "'log' created nan there from finite values" in msg


def test_detect_anomaly_finds_a_forward_division_by_zero_several_ops_back():
    x = cr.tensor([0.5, 1.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        h = x * 2
        line = _line()
        h = 1.0 / (h - h)                       # inf
        h = cr.exp(h * 3 + 1)                   # passed on, then ExpBackward returns inf
        msg = _anomaly_message(h)
    assert "Function 'ExpBackward' returned inf" in msg
    assert f"by 'divide' (divide by zero) at {__file__}, line {line}" in msg
    assert "'divide' created inf there" in msg


def test_detect_anomaly_finds_the_creator_on_one_branch_of_an_add():
    x = cr.tensor([0.5, 1.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        a = cr.where(x > 0.7, cr.sqrt(x - 0.7), 0.0)   # finite branch: sqrt's NaN is masked
        line = _line()
        b = _tanh_chain(cr.log(x - 5), 4)       # the NaN branch, further from the failing node
        msg = _anomaly_message(_tanh_chain(a + b, 5))
    assert f"by 'log' (invalid value) at {__file__}, line {line}" in msg
    assert "'sqrt'" not in msg


def test_detect_anomaly_names_an_op_whose_floating_point_error_was_silenced():
    x = cr.tensor([0.5, 1.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        with np.errstate(all="ignore"):
            line = _line()
            h = cr.log(x - 5)
        msg = _anomaly_message(_tanh_chain(h, 3))
    assert (f"by 'log' (no floating-point error reported) at {__file__}, line {line}") in msg
    assert "'log' created nan there from finite values, 3 node(s) before" in msg


@pytest.mark.parametrize("requires_grad, op, desc", [(True, "tanh", "a leaf tensor"),
                                                     (False, "multiply", "a tensor")])
def test_detect_anomaly_says_when_an_input_already_held_nan(requires_grad, op, desc):
    x = cr.tensor([np.nan, 1.0], dtype=cr.float64, requires_grad=requires_grad)
    w = cr.tensor([2.0, 3.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        line = _line()
        h = cr.tanh(x) if requires_grad else w * x
        msg = _anomaly_message(_tanh_chain(h, 5))
    index = 0 if requires_grad else 1
    assert (f"No op created the NaN/inf: input {index} of '{op}' already held nan ({desc} of shape "
            f"(2,)) when it was called at {__file__}, line {line}") in msg
    assert "created in the forward pass" not in msg


def test_detect_anomaly_walk_is_iterative_on_a_deep_graph():
    x = cr.tensor([0.5], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        line = _line()
        h = cr.log(x - 5)
    h = _tanh_chain(h, 20_000)                  # recorded outside anomaly mode: fast to build
    with cr.detect_anomaly():
        msg = _anomaly_message(h)
    assert f"by 'log' (invalid value) at {__file__}, line {line}" in msg
    assert "20000 node(s) before this one" in msg


def test_anomaly_mode_is_restored_and_silent_on_finite_gradients():
    x = cr.tensor([1.0, 4.0], dtype=cr.float64, requires_grad=True)
    with cr.detect_anomaly():
        cr.sqrt(x).sum().backward()
    np.testing.assert_allclose(x.grad.data, [0.5, 0.25])
    from chainrule.core.grad_mode import STATE
    assert not STATE.anomaly and not STATE.observers


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
