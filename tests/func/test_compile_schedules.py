"""cr.compile on training loops: an optimizer's hyperparameters are read by its taped
``opt.step()`` when a replay calls it, so a new learning rate is no miss; a step's own
``zero_grad()`` before its backward means a gradient present at a later call is never added to, so
one capture serves the loop. The weights stay bitwise equal to eager training."""
from __future__ import annotations

import warnings

import numpy as np

import chainrule as cr


def _train(compiled: bool, reads_lr: bool = False, steps: int = 8):
    rng = np.random.default_rng(0)
    model = cr.nn.Linear(4, 3, generator=np.random.default_rng(1))
    opt = cr.optim.AdamW(model.parameters(), lr=1e-2)
    sched = cr.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / steps)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    def step_reading_lr(x):                 # the step's own code reads the learning rate into an op
        opt.zero_grad()
        loss = (model(x) ** 2).mean() * (1.0 + opt.param_groups[0]["lr"])
        loss.backward()
        opt.step()
        return loss.detach()
    fn = step_reading_lr if reads_lr else step
    run = cr.compile(fn) if compiled else fn
    losses = []
    for _ in range(steps):
        losses.append(run(cr.tensor(rng.standard_normal((5, 4)))).data)
        sched.step()
    return losses, [p.data.copy() for p in model.parameters()], run


def test_a_scheduled_learning_rate_replays_bitwise():
    (want, w_want, _), (got, w_got, run) = _train(False), _train(True)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert all(np.array_equal(a, b) for a, b in zip(w_got, w_want))
    info = run.cache_info()
    # (the step's zero_grad() drops the gradients a later call finds: one capture)
    assert info == (1, 7, 0, 0), run.last_miss


def test_a_step_that_reads_the_learning_rate_itself_is_guarded_by_it():
    (want, w_want, _), (got, w_got, run) = _train(False, reads_lr=True), _train(True, reads_lr=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert all(np.array_equal(a, b) for a, b in zip(w_got, w_want))
    assert run.cache_info().replays == 0 and "['lr']: value" in run.last_miss


def test_zero_grad_after_a_backward_keeps_the_guard():
    # zero_grad() drops .grad only after a first backward added to it: eager's first gradient
    # depends on what was present at the call, so that must still be guarded
    def run(compiled):
        w = cr.tensor(np.ones(3), requires_grad=True)
        opt = cr.optim.SGD([w], lr=0.1)

        def step(x):
            (w * x).sum().backward()
            first = w.grad * 1.0
            opt.zero_grad()
            (w * x * 2.0).sum().backward()
            return first.detach()
        fn = cr.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [fn(cr.tensor([1.0, 2.0, 3.0])).data for _ in range(3)], fn
    (got, fn), (want, _) = run(True), run(False)
    assert [a.tolist() for a in want] == [[1.0, 2.0, 3.0], [3.0, 6.0, 9.0], [3.0, 6.0, 9.0]]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert fn.cache_info().replays == 0
