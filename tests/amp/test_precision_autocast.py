"""autocast: which op runs in which dtype; nesting, threads, backward dtypes."""
import threading

import numpy as np
import pytest

import chainrule as cr
from chainrule.amp import op_policy


def _x(shape=(4, 3), dtype=np.float32, grad=True):
    return cr.tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype), requires_grad=grad)


@pytest.mark.parametrize("low", [cr.bfloat16, cr.float16], ids=str)
def test_op_lists(low):
    x, w = _x((4, 3)), _x((3, 5))
    with cr.autocast(dtype=low):
        y = x @ w
        cases = {
            "matmul": y, "einsum": cr.einsum("ij,jk->ik", x, w),
            "softmax": cr.softmax(y), "log_softmax": cr.log_softmax(y),
            "logsumexp": cr.logsumexp(y, axis=1), "sum": y.sum(), "mean": y.mean(),
            "var": cr.var(y), "exp": cr.exp(y), "log": cr.log(cr.abs(y) + 1.0),
            "power": y ** 2, "prod": cr.prod(y, axis=0), "cumsum": cr.cumsum(y, axis=1),
            "relu": cr.relu(y), "tanh": cr.tanh(y), "add": y + y, "reshape": y.reshape(20),
            "add_f32_bias": y + np.ones(5, np.float32), "amax": cr.amax(y),
        }
    want = {"matmul": low, "einsum": low, "relu": low, "tanh": low, "add": low, "reshape": low,
            "amax": low, "add_f32_bias": cr.float32}
    for name, out in cases.items():
        assert out.dtype == want.get(name, cr.float32), name
    assert op_policy("matmul") == "low" and op_policy("einsum") == "low"
    assert {op_policy(n) for n in ("softmax", "log_softmax", "logsumexp", "sum", "inv")} == {"float32"}


def test_matmul_value_is_the_rounded_float32_product():
    x, w = _x((4, 3)), _x((3, 5))
    with cr.autocast(dtype=cr.bfloat16):
        y = x @ w
    xb, wb = x.data.astype(cr.bfloat16).astype(np.float32), w.data.astype(cr.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(y.data, (xb @ wb).astype(cr.bfloat16))


def test_outside_nothing_changes_and_float64_is_left_alone():
    x, w = _x((4, 3)), _x((3, 5))
    assert (x @ w).dtype == cr.float32
    with cr.autocast(dtype=cr.float16):
        pass
    assert (x @ w).dtype == cr.float32
    x64 = _x((4, 3), np.float64)
    with cr.autocast(dtype=cr.float16):
        assert (x64 @ x64.T).dtype == cr.float64


def test_backward_gives_float32_parameter_gradients_in_the_forward_dtypes():
    x, w = _x((4, 3)), _x((3, 5))
    with cr.autocast(dtype=cr.bfloat16):
        loss = cr.log_softmax(x @ w).sum()
        loss.backward()                     # backward inside autocast: still the forward's dtypes
    assert loss.dtype == cr.float32 and w.grad.dtype == cr.float32 and x.grad.dtype == cr.float32
    x2, w2 = _x((4, 3)), _x((3, 5))
    cr.log_softmax(x2 @ w2).sum().backward()
    np.testing.assert_allclose(w.grad.data, w2.grad.data, atol=0.1)


def test_nesting_and_disabling():
    x = _x((2, 2))
    with cr.autocast(dtype=cr.bfloat16):
        with cr.autocast(dtype=cr.float16):
            assert (x @ x).dtype == cr.float16
            with cr.autocast(enabled=False):
                assert (x @ x).dtype == cr.float32
        assert (x @ x).dtype == cr.bfloat16
    assert (x @ x).dtype == cr.float32


def test_decorator_and_thread_locality():
    x = _x((2, 2))

    @cr.autocast(dtype=cr.float16)
    def f(x):
        return x @ x
    assert f(x).dtype == cr.float16 and (x @ x).dtype == cr.float32
    seen = []
    with cr.autocast(dtype=cr.bfloat16):
        t = threading.Thread(target=lambda: seen.append((x @ x).dtype))
        t.start()
        t.join()
        assert (x @ x).dtype == cr.bfloat16
    assert seen == [cr.float32]


def test_bad_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match="autocast: dtype must be"):
        cr.autocast(dtype=cr.float64)
