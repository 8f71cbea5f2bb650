"""GradScaler: a hand-worked overflow/growth sequence, PyTorch's semantics, static mode, floor, NaN stop,
unscaling in the gradient's own dtype."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.amp import GradScaler, NonFiniteGradientError

INF, NAN = np.inf, np.nan
# gradient of the (unscaled) loss at each step; inf/nan steps must be skipped and back off the scale
SEQUENCE = [[1.0, 2.0], [0.5, -1.0], [INF, 1.0], [1.0, 1.0], [NAN, 0.0], [2.0, 2.0], [1.0, -3.0]]


def _run(scaler, seq=SEQUENCE):
    p = cr.tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = cr.optim.SGD([p], lr=1.0)
    trace = []
    for c in seq:
        opt.zero_grad()
        loss = (p * np.array(c, np.float32)).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        trace.append((scaler.get_scale(), p.data.copy()))
    return trace


def test_hand_worked_overflow_and_growth_sequence():
    s = GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    trace = _run(s)
    assert [t[0] for t in trace] == [8.0, 16.0, 8.0, 8.0, 4.0, 4.0, 8.0]
    assert [h["skipped"] for h in s.history] == [False, False, True, False, True, False, False]
    # applied: steps 1, 2, 4, 6, 7 (SGD lr=1 on the unscaled gradients)
    np.testing.assert_allclose(trace[-1][1], -(np.array([1, 2]) + [0.5, -1] + [1, 1] + [2, 2] + [1, -3]))
    np.testing.assert_allclose(trace[2][1], trace[1][1])            # skipped step left p alone
    assert s.state_dict() == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                              "growth_interval": 2, "_growth_tracker": 0}


def test_matches_torch_grad_scaler():
    torch = pytest.importorskip("torch")
    ours = _run(GradScaler(init_scale=8.0, growth_interval=2))
    p = torch.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([p], lr=1.0)
    ts = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    for (scale, pv), c in zip(ours, SEQUENCE):
        opt.zero_grad()
        ts.scale((p * torch.tensor(c, dtype=torch.float32)).sum()).backward()
        ts.step(opt)
        ts.update()
        assert ts.get_scale() == scale
        np.testing.assert_allclose(p.detach().numpy(), pv)


def test_static_scale_skips_but_never_changes():
    s = GradScaler(init_scale=4.0, dynamic=False, growth_interval=1)
    trace = _run(s)
    assert {t[0] for t in trace} == {4.0}
    assert sum(h["skipped"] for h in s.history) == 2


def test_floor_and_growth_stops_at_float32_max():
    s = GradScaler(init_scale=8.0, min_scale=2.0, max_backoffs=None)
    _run(s, [[INF, 0.0]] * 5)
    assert s.get_scale() == 2.0
    big = GradScaler(init_scale=2.0 ** 127, growth_interval=1)
    _run(big, [[1.0, 1.0]])
    assert big.get_scale() == 2.0 ** 127            # 2^128 is not a finite float32: no growth


def test_persistent_nan_stops_with_the_op_that_made_it():
    p = cr.tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = cr.optim.SGD([p], lr=0.1)
    s = GradScaler(init_scale=2.0 ** 10, max_backoffs=3)
    with pytest.raises(NonFiniteGradientError, match=r"4 consecutive.*'sqrt' in the forward pass"):
        for _ in range(10):
            opt.zero_grad()
            loss = cr.sqrt(p - 1.0).sum() + (p * p).sum()     # sqrt of a negative number: NaN
            s.scale(loss).backward()
            s.step(opt)
            s.update()
    assert s.get_scale() == 2.0 ** 6
    assert not cr.core.grad_mode.STATE.observers                   # the watcher is gone


def test_overflow_then_recovery_does_not_stop():
    s = GradScaler(init_scale=8.0, max_backoffs=2, growth_interval=100)
    _run(s, [[INF, 0.0]] * 2 + [[1.0, 1.0]] * 3)
    assert s.get_scale() == 2.0 and not cr.core.grad_mode.STATE.observers


def test_usage_errors_and_state_dict_round_trip():
    p = cr.tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = cr.optim.SGD([p], lr=0.1)
    s = GradScaler()
    s.scale((p * 2.0).sum()).backward()
    s.unscale_(opt)
    np.testing.assert_array_equal(p.grad.data, [2.0, 2.0])
    with pytest.raises(RuntimeError, match="already called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="already called"):
        s.step(opt)
    s.update()
    t = GradScaler(init_scale=1.0)
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict() and t.get_scale() == 2.0 ** 16
    h = cr.tensor(np.zeros(2, cr.float16), requires_grad=True)
    h.grad = cr.tensor(np.ones(2, cr.float16))
    with pytest.raises(TypeError, match="float16 gradients.*MasterWeights"):
        GradScaler().unscale_(cr.optim.SGD([h], lr=0.1))


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


def test_disabled_scaler_is_a_pass_through():
    s = GradScaler(enabled=False)
    loss = cr.tensor(3.0)
    assert s.scale(loss) is loss and s.get_scale() == 1.0 and s.state_dict() == {}


def test_diagnostics_count_zero_and_nonfinite_gradients():
    p = cr.tensor(np.zeros(4, np.float32), requires_grad=True)
    opt = cr.optim.SGD([p], lr=1e-6)
    s = GradScaler(init_scale=1.0, stats_dtype=cr.bfloat16)
    p.data = np.ones(4, np.float32)
    s.scale((p * np.array([0.0, 1.0, 1.0, 1.0], np.float32)).sum()).backward()
    s.step(opt)
    s.update()
    rec = s.history[-1]
    assert rec["underflow"] == 0.25 and rec["overflow"] == 0.0
    assert rec["stale"] == 1.0               # 1 - 1e-6 rounds back to 1.0 in bfloat16
    assert "skipped 0" in cr.precision.summarize(s.history)


def test_watcher_goes_when_the_scaler_is_dropped_mid_iteration():
    import gc
    p = cr.tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = cr.optim.SGD([p], lr=0.1)
    s = GradScaler(init_scale=2.0 ** 10, max_backoffs=1)
    opt.zero_grad()
    s.scale(cr.sqrt(p - 1.0).sum()).backward()                 # NaN: one backoff installs the watcher
    s.step(opt)
    s.update()
    assert cr.core.grad_mode.STATE.observers and cr.core.grad_mode.STATE.rare
    del s                                                       # abandoned before the next update
    gc.collect()
    assert not cr.core.grad_mode.STATE.observers and not cr.core.grad_mode.STATE.rare
