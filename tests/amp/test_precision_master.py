"""Master weights keep updates that bfloat16 rounds away; diagnostics report stale updates."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.precision import MasterWeights


def _train(w, opt, steps, mw=None):
    for _ in range(steps):
        opt.zero_grad()
        if mw is not None:
            mw.zero_grad()
        (w.astype(cr.float32) * 1e-4).sum().backward()       # gradient 1e-4: SGD(lr=1) steps by 1e-4
        if mw is None:
            opt.step()
        else:
            mw.step(opt)


def test_small_update_is_lost_in_pure_bfloat16():
    w = cr.tensor(np.ones(1, cr.bfloat16), requires_grad=True)
    opt = cr.optim.SGD([w], lr=1.0)
    _train(w, opt, 100)
    assert float(w.data[0]) == 1.0             # 1 - 1e-4 rounds back to 1 (bfloat16 spacing 2^-7)


def test_master_weights_keep_the_small_update():
    w = cr.tensor(np.ones(1, np.float32), requires_grad=True)
    mw = MasterWeights([w], dtype=cr.bfloat16)
    opt = cr.optim.SGD(mw.params, lr=1.0)
    _train(w, opt, 1, mw)
    g = float(np.float32(1e-4).astype(cr.bfloat16))       # the gradient of a bfloat16 weight is bfloat16
    assert mw.params[0].data[0] == np.float32(1.0) - np.float32(g)
    assert float(w.data[0]) == 1.0 and mw.history[-1]["stale"] == 1.0
    _train(w, opt, 99, mw)
    np.testing.assert_allclose(mw.params[0].data[0], 1 - 100 * g, rtol=1e-6)
    assert w.dtype == cr.bfloat16 and w.data[0] == mw.params[0].data[0].astype(cr.bfloat16) != 1.0
    assert mw.history[-1]["underflow"] == 0.0


def test_master_weights_with_a_grad_scaler_in_float16():
    w = cr.tensor(np.ones(3, np.float32), requires_grad=True)
    mw = MasterWeights([w], dtype=cr.float16)
    opt = cr.optim.SGD(mw.params, lr=1.0)
    scaler = cr.amp.GradScaler(init_scale=2.0 ** 20)
    (scaler.scale((w.astype(cr.float32) * 1e-7).sum())).backward()   # 1e-7 would underflow unscaled
    mw.step(opt, scaler)
    scaler.update()
    np.testing.assert_allclose(mw.params[0].data, 1 - 1e-7, rtol=1e-7)
    assert scaler.history[-1]["underflow"] == 0.0


def test_cast_helpers():
    assert cr.precision.spacing(1.0, cr.bfloat16) == 2.0 ** -7
    assert cr.precision.spacing(1.0, cr.float16) == 2.0 ** -10
    assert cr.precision.spacing(1.0, cr.float32) == 2.0 ** -23
    with pytest.raises(cr.DTypeError, match="MasterWeights: dtype must be"):
        MasterWeights([cr.tensor([1.0], requires_grad=True)], dtype=cr.float32)
