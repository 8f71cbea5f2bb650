"""Review fixes in the precision modules."""
import numpy as np
import pytest

import chainrule as cr


def test_unscale_keeps_float64_gradients_in_float64_precision():
    # float64 gradients used to be rounded through float32 while being unscaled
    w = cr.tensor(np.array([1.0]), requires_grad=True)
    opt = cr.optim.SGD([w], lr=1.0)
    scaler = cr.amp.GradScaler(init_scale=4.0)
    exact = 1e-3 + 1e-13
    w.grad = cr.tensor(np.array([4 * exact]))
    scaler.unscale_(opt)
    assert w.grad.dtype == np.float64
    assert abs(w.grad.data[0] - exact) < 1e-18


def test_unscale_of_bfloat16_gradients_rounds_once():
    w = cr.tensor(np.array([1.0], np.float32), requires_grad=True)
    w.data = w.data.astype(cr.bfloat16)
    opt = cr.optim.SGD([w], lr=1.0)
    scaler = cr.amp.GradScaler(init_scale=8.0)
    w.grad = cr.tensor(np.array([24.0], cr.bfloat16))
    scaler.unscale_(opt)
    assert w.grad.dtype == cr.bfloat16 and float(w.grad.data[0]) == 3.0


def test_fp8_quantize_refuses_non_finite_input():
    with pytest.raises(ValueError, match="inf/NaN"):
        cr.fp8.quantize(cr.tensor([1.0, np.inf]))
