"""The schedules of chainrule.optim.lr_scheduler against torch.optim.lr_scheduler: 50 steps of learning
rates (and cycled momenta), state_dict round trips mid-run, errors."""
import math
import types

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.optim import lr_scheduler as sm
from chainrule.optim.adam import Adam
from chainrule.optim.sgd import SGD

OURS = types.SimpleNamespace(**{n: getattr(sm, n) for n in dir(sm) if n[0].isupper()})


class Halve:
    """A callable object: its __dict__ goes into the state dict (PyTorch's rule)."""

    def __init__(self):
        self.rate = 0.9

    def __call__(self, epoch):
        return self.rate


def _fib_ramp(epoch):
    return 1.0 / (1 + epoch) ** 0.5


CASES = {
    "LambdaLR": lambda S, o: S.LambdaLR(o, _fib_ramp),
    "LambdaLR-per-group": lambda S, o: S.LambdaLR(o, [_fib_ramp, lambda e: 0.97 ** e]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95 if e % 3 else 1.02),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.5),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.93),
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=17),
    "LinearLR-decay": lambda S, o: S.LinearLR(o, start_factor=1.0, end_factor=0.05, total_iters=40),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=7),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=30, power=1.7),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=[0.3, 0.5], total_steps=51),
    "OneCycleLR-3phase-linear": lambda S, o: S.OneCycleLR(o, max_lr=0.4, epochs=6, steps_per_epoch=9,
                                                         pct_start=0.25, anneal_strategy="linear",
                                                         three_phase=True, div_factor=10.0),
    "CyclicLR": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=7),
    "CyclicLR-triangular2": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=4, step_size_down=9,
                                                     mode="triangular2"),
    "CyclicLR-exp_range": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="exp_range",
                                                   gamma=0.97, base_momentum=0.7, max_momentum=0.95),
    "CyclicLR-scale_fn": lambda S, o: S.CyclicLR(o, 0.02, 0.08, step_size_up=6, scale_fn=lambda x: 0.9 ** x,
                                                  scale_mode="iterations", cycle_momentum=False),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=7, eta_min=0.001),
    "CosineAnnealingWarmRestarts-mult": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    "SequentialLR": lambda S, o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=8),
                                                    S.ExponentialLR(o, gamma=0.9),
                                                    S.MultiStepLR(o, milestones=[3, 9], gamma=0.3)],
                                                milestones=[8, 30]),
    "SequentialLR-poly": lambda S, o: S.SequentialLR(o, [S.PolynomialLR(o, total_iters=10, power=0.5),
                                                         S.StepLR(o, step_size=4, gamma=0.7)], milestones=[10]),
    "SequentialLR-cosine": lambda S, o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.5, total_iters=4),
                                                           S.CosineAnnealingLR(o, T_max=20, eta_min=0.01)],
                                                       milestones=[10]),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.3, total_iters=6),
                                                         S.ExponentialLR(o, gamma=0.95),
                                                         S.MultiStepLR(o, milestones=[20, 40])]),
    "ChainedScheduler-step-cosine": lambda S, o: S.ChainedScheduler([S.StepLR(o, step_size=3, gamma=0.7),
                                                                     S.CosineAnnealingLR(o, T_max=9, eta_min=0.001),
                                                                     S.ExponentialLR(o, gamma=0.99)]),
    "StepLR": lambda S, o: S.StepLR(o, step_size=4, gamma=0.6),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=12, eta_min=0.002),   # 50 steps: 2 periods
    "ChainedScheduler-warmup": lambda S, o: S.ChainedScheduler([S.LinearLR(o, start_factor=0.1, total_iters=10),
                                                                S.MultiplicativeLR(o, Halve())], optimizer=o),
}
BETA1 = {"OneCycleLR", "CyclicLR-exp_range"}       # cycle beta1 of Adam instead of SGD's momentum


def _pair(torch, name, cr_params=None):
    if cr_params is None:
        cr_params = [nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))]
    tparams = [torch.nn.Parameter(torch.zeros(2, dtype=torch.float64)),
               torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))]
    if name in BETA1:
        ours = Adam([{"params": [cr_params[0]]}, {"params": [cr_params[1]], "lr": 0.05}], lr=0.1)
        theirs = torch.optim.Adam([{"params": [tparams[0]]}, {"params": [tparams[1]], "lr": 0.05}], lr=0.1)
    else:
        ours = SGD([{"params": [cr_params[0]]}, {"params": [cr_params[1]], "lr": 0.05}], lr=0.1, momentum=0.9)
        theirs = torch.optim.SGD([{"params": [tparams[0]]}, {"params": [tparams[1]], "lr": 0.05}], lr=0.1,
                                 momentum=0.9)
    return ours, theirs


def _hyper(opt):
    return [(g["lr"], g.get("momentum"), g.get("betas", (None,))[0]) for g in opt.param_groups]


def _check(s, opt, ts, topt, msg):
    np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12, atol=1e-15, err_msg=msg)
    for mine, ref in zip(_hyper(opt), _hyper(topt)):
        np.testing.assert_allclose([v for v in mine if v is not None], [v for v in ref if v is not None],
                                   rtol=1e-12, atol=1e-15, err_msg=msg)


@pytest.mark.parametrize("name", list(CASES))
def test_fifty_steps_match_torch_with_a_state_dict_round_trip(name):
    torch = pytest.importorskip("torch")
    opt, topt = _pair(torch, name)
    s, ts = CASES[name](OURS, opt), CASES[name](torch.optim.lr_scheduler, topt)
    _check(s, opt, ts, topt, f"{name} at construction")
    for t in range(1, 51):
        opt.step()
        topt.step()
        s.step()
        ts.step()
        _check(s, opt, ts, topt, f"{name} step {t}")
        if t == 25:           # a fresh optimizer and scheduler take over from the saved states
            params = [p for g in opt.param_groups for p in g["params"]]
            sd, osd = s.state_dict(), opt.state_dict()
            opt, _ = _pair(torch, name, params)
            s = CASES[name](OURS, opt)
            opt.load_state_dict(osd)
            s.load_state_dict(sd)
            _check(s, opt, ts, topt, f"{name} after reload")


def test_state_dict_keys_follow_torch():
    torch = pytest.importorskip("torch")
    for name in CASES:
        opt, topt = _pair(torch, name)
        mine, theirs = CASES[name](OURS, opt).state_dict(), CASES[name](torch.optim.lr_scheduler, topt).state_dict()
        assert set(mine) == set(theirs) - {"_get_lr_called_within_step"}, name
        assert mine.get("last_epoch") == theirs.get("last_epoch"), name
    s = OURS.MultiplicativeLR(SGD([nn.Parameter([0.0])], lr=1.0), Halve())
    s.lr_lambdas[0].rate = 0.5
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}]
    s2 = OURS.MultiplicativeLR(SGD([nn.Parameter([0.0])], lr=1.0), Halve())
    s2.load_state_dict(sd)
    assert s2.lr_lambdas[0].rate == 0.5 and OURS.LambdaLR(s2.optimizer, _fib_ramp).state_dict()["lr_lambdas"] == [None]


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", threshold_mode="abs", threshold=0.05, cooldown=2),
                                dict(factor=0.5, patience=2, min_lr=[0.02, 0.001], cooldown=1),
                                dict(mode="min", threshold_mode="abs", threshold=0.1, patience=0, eps=0.03)])
def test_reduce_lr_on_plateau_matches_torch(kw):
    torch = pytest.importorskip("torch")
    opt, topt = _pair(torch, "plateau")
    s = OURS.ReduceLROnPlateau(opt, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    rng = np.random.default_rng(3)
    metrics = np.round(np.cumsum(rng.normal(0.0, 0.3, 60)) + 5, 1)     # random walk with plateaus
    for t, m in enumerate(metrics):
        opt.step()
        topt.step()
        s.step(cr.tensor(m) if t % 2 else float(m))
        ts.step(float(m))
        _check(s, opt, ts, topt, f"{kw} step {t}")
        assert (s.best, s.num_bad_epochs, s.cooldown_counter) == (ts.best, ts.num_bad_epochs, ts.cooldown_counter)
        if t == 30:
            sd = s.state_dict()
            s = OURS.ReduceLROnPlateau(opt, **kw)
            s.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] < 0.1 or kw.get("mode") == "max"


def test_warm_restarts_fractional_epochs_match_torch():
    torch = pytest.importorskip("torch")
    opt, topt = _pair(torch, "warm")
    s = OURS.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2, eta_min=0.005)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0=4, T_mult=2, eta_min=0.005)
    for e in np.arange(0, 30, 0.35):
        s.step(float(e))
        ts.step(float(e))
        _check(s, opt, ts, topt, f"epoch {e}")


def test_closed_forms_by_hand():
    opt = SGD([nn.Parameter([0.0])], lr=1.0)
    s = OURS.CosineAnnealingWarmRestarts(opt, T_0=5, eta_min=0.1)
    got = [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(10)]
    want = [0.1 + 0.9 * (1 + math.cos(math.pi * (t % 5) / 5)) / 2 for t in range(11)]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    opt = SGD([nn.Parameter([0.0])], lr=1.0)
    s = OURS.LinearLR(opt, start_factor=0.25, total_iters=3)
    got = [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(5)]
    np.testing.assert_allclose(got, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0], rtol=1e-14)
    assert isinstance(s, cr.optim.LRScheduler)

    class Halving(sm.LRScheduler):                # a closed-form subclass (lr_at) inside SequentialLR
        def lr_at(self, base_lr, epoch):
            return base_lr / 2 ** epoch
    opt = SGD([nn.Parameter([0.0])], lr=1.0)
    s = OURS.SequentialLR(opt, [OURS.ConstantLR(opt, factor=0.5, total_iters=9), Halving(opt)], milestones=[2])
    got = [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(4)]
    np.testing.assert_allclose(got, [0.5, 0.5, 1.0, 0.5, 0.25], rtol=1e-14)


def test_bad_arguments_name_the_scheduler():
    opt = SGD([nn.Parameter([0.0])], lr=1.0)
    with pytest.raises(ValueError, match="LinearLR: start_factor must be in"):
        OURS.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="ConstantLR: factor must be in"):
        OURS.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="LambdaLR: got 2 lr_lambdas for 1 parameter groups"):
        OURS.LambdaLR(opt, [_fib_ramp, _fib_ramp])
    with pytest.raises(ValueError, match="OneCycleLR: pass total_steps"):
        OURS.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="OneCycleLR: stepped 3 times, but total_steps is 2"):
        s = OURS.OneCycleLR(opt, max_lr=1.0, total_steps=2, cycle_momentum=False)
        for _ in range(3):
            s.step()
    with pytest.raises(ValueError, match="CyclicLR: cycle_momentum=True needs an optimizer with momentum"):
        OURS.CyclicLR(cr.optim.Optimizer([nn.Parameter([0.0])], dict(lr=1.0)), 0.1, 1.0)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts: T_0 must be a positive integer"):
        OURS.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: factor must be < 1"):
        OURS.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: mode must be"):
        OURS.ReduceLROnPlateau(opt, mode="maximum")
    with pytest.raises(ValueError, match="SequentialLR: 2 schedulers need 1 milestones, got 0"):
        OURS.SequentialLR(opt, [OURS.ExponentialLR(opt, 0.9), OURS.ExponentialLR(opt, 0.9)], milestones=[])
    other = SGD([nn.Parameter([0.0])], lr=1.0)
    with pytest.raises(ValueError, match="ChainedScheduler: the scheduler at index 1 .* another optimizer"):
        OURS.ChainedScheduler([OURS.ExponentialLR(opt, 0.9), OURS.ExponentialLR(other, 0.9)])
    with pytest.raises(ValueError, match="ReduceLROnPlateau .* cannot be combined"):
        OURS.ChainedScheduler([OURS.ReduceLROnPlateau(opt)])
    with pytest.raises(KeyError, match="has no 'initial_lr' although last_epoch=3"):
        OURS.ExponentialLR(SGD([nn.Parameter([0.0])], lr=1.0), 0.9, last_epoch=3)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        OURS.ExponentialLR("sgd", 0.9)
