"""Property tests: broadcasting shapes for binary ops, random compositions gradchecked."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chainrule as cr
from tests.strategies import arrays, broadcastable_pairs, compositions

BINARY = [cr.add, cr.subtract, cr.multiply, cr.maximum, lambda x, y: x / (2 + y * y), cr.arctan2]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(shapes=broadcastable_pairs(), op=st.sampled_from(BINARY), seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_and_unbroadcast(shapes, op, seed):
    rng = np.random.default_rng(seed)
    x, y = (arrays(rng, s) for s in shapes.input_shapes)
    out = op(x, y)
    assert out.shape == shapes.result_shape
    assert cr.gradcheck(op, (x, y), modes=("rev", "fwd"))
    out.sum().backward()
    assert x.grad.shape == x.shape and y.grad.shape == y.shape


@FAST
@given(program=compositions(), seed=st.integers(0, 2**16))
def test_random_compositions_gradcheck(program, seed):
    _, fn = program
    x = arrays(np.random.default_rng(seed), (2, 3))
    fn(x)
    assume(fn.peak < 1e6)                      # a well-conditioned program
    assert cr.gradcheck(fn, (x,), modes=("rev", "fwd"))


@settings(max_examples=10, deadline=None)
@given(program=compositions(max_ops=4), seed=st.integers(0, 2**16))
def test_random_compositions_second_order(program, seed):
    _, fn = program
    x = arrays(np.random.default_rng(seed), (2, 3))
    assert cr.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_scalars_do_not_upcast(dtype):
    x = cr.tensor(np.ones(3, dtype=dtype), requires_grad=True)
    y = 2.5 * x + 1 - x / 3.0
    assert y.dtype == dtype
    y.sum().backward()
    assert x.grad.dtype == dtype
