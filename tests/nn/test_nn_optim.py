"""Optimizers and schedules: hand-computed updates, torch.optim as a second oracle, state dicts."""
import math

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn, optim


def quad_grad(p):
    """Set p.grad for the loss sum(p**3) / 3 (grad p**2), through a real backward."""
    p.grad = None
    ((p * p * p).sum() / 3).backward()


def test_sgd_plain_momentum_nesterov_weight_decay_by_hand():
    p0 = np.array([1.0, -2.0])
    for kw in ({}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
               {"momentum": 0.5, "dampening": 0.1, "weight_decay": 0.1}):
        p = nn.Parameter(p0.copy())
        opt = optim.SGD([p], lr=0.1, **kw)
        ref, buf = p0.copy(), None
        mu, damp, wd = kw.get("momentum", 0), kw.get("dampening", 0), kw.get("weight_decay", 0)
        for _ in range(3):
            quad_grad(p)
            opt.step()
            g = ref ** 2 + wd * ref
            if mu:
                buf = g.copy() if buf is None else mu * buf + (1 - damp) * g
                g = g + mu * buf if kw.get("nesterov") else buf
            ref = ref - 0.1 * g
            np.testing.assert_allclose(p.data, ref, rtol=1e-14, err_msg=str(kw))


def test_adam_and_adamw_by_hand():
    for cls, wd in ((optim.Adam, 0.0), (optim.Adam, 0.1), (optim.AdamW, 0.1)):
        p = nn.Parameter(np.array([0.5, -1.5, 2.0]))
        opt = cls([p], lr=0.01, betas=(0.8, 0.9), eps=1e-8, weight_decay=wd)
        ref, m, v = p.data.copy(), 0.0, 0.0
        for t in range(1, 5):
            quad_grad(p)
            opt.step()
            g = ref ** 2
            if cls is optim.AdamW:
                ref = ref * (1 - 0.01 * wd)
            else:
                g = g + wd * ref
            m = 0.8 * m + 0.2 * g
            v = 0.9 * v + 0.1 * g * g
            ref = ref - 0.01 * (m / (1 - 0.8 ** t)) / (np.sqrt(v / (1 - 0.9 ** t)) + 1e-8)
            np.testing.assert_allclose(p.data, ref, rtol=1e-12, err_msg=f"{cls.__name__} wd={wd}")
        assert opt.state[p]["step"] == 4


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.2)),
    ("Adam", dict(lr=0.01, weight_decay=0.05)),
    ("AdamW", dict(lr=0.01, betas=(0.85, 0.95), weight_decay=0.1)),
])
def test_matches_torch_optim_on_a_model(name, kw):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 4)), rng.integers(0, 3, 16)
    ours = nn.Sequential(nn.Linear(4, 5, dtype=cr.float64, generator=rng), nn.Tanh(),
                         nn.Linear(5, 3, dtype=cr.float64, generator=rng))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).double()
    with torch.no_grad():
        for (_, p), tp in zip(ours.named_parameters(), theirs.parameters()):
            tp.copy_(torch.tensor(p.data))
    opt = getattr(optim, name)(ours.parameters(), **kw)
    topt = getattr(torch.optim, name)(theirs.parameters(), **kw)
    for _ in range(5):
        opt.zero_grad()
        cr.nn.functional.cross_entropy(ours(cr.tensor(x)), y).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y)).backward()
        topt.step()
    for p, tp in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_updates_are_in_place_and_not_recorded():
    p = nn.Parameter([1.0, 2.0])
    data_id, version = id(p.data), p._version
    opt = optim.Adam([p], lr=0.1)
    quad_grad(p)
    opt.step()
    assert id(p.data) == data_id and p.grad_fn is None and p.is_leaf
    assert p._version == version + 1                 # stale graphs that saved p will refuse backward
    np.testing.assert_allclose(opt.state[p]["exp_avg"], 0.1 * np.array([1.0, 4.0]), rtol=1e-6)


def test_param_groups_layout_and_per_group_hyperparameters():
    a, b = nn.Parameter([1.0]), nn.Parameter([1.0])
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    assert opt.param_groups[1]["params"][0] is b and opt.param_groups[0]["momentum"] == 0.0
    (a + b).sum().backward()
    opt.step()
    np.testing.assert_allclose([a.item(), b.item()], [0.9, 0.0])
    with pytest.raises(ValueError, match="more than one group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="unknown hyperparameters"):
        optim.SGD([{"params": [nn.Parameter([1.0])], "momentun": 0.9}])
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="leaf tensors that require grad"):
        optim.SGD([cr.ones(2)])


def test_zero_grad_and_skips_params_without_grad():
    a, b = nn.Parameter([1.0]), nn.Parameter([5.0])
    opt = optim.SGD([a, b], lr=0.5)
    (a * 2).sum().backward()
    opt.step()
    assert b.item() == 5.0 and a.item() == 0.0
    opt.zero_grad()
    assert a.grad is None


def test_optimizer_state_dict_round_trip_continues_identically(tmp_path):
    def make():
        return nn.Parameter(np.array([0.3, -0.7, 1.1]))
    p1 = make()
    opt1 = optim.Adam([p1], lr=0.05)
    for _ in range(3):
        quad_grad(p1)
        opt1.step()
    cr.save(opt1.state_dict(), tmp_path / "opt.npz")
    p2 = nn.Parameter(p1.data.copy())
    opt2 = optim.Adam([p2], lr=0.5)
    opt2.load_state_dict(cr.load(tmp_path / "opt.npz"))
    assert opt2.param_groups[0]["lr"] == 0.05 and opt2.param_groups[0]["betas"] == (0.9, 0.999)
    for _ in range(2):
        for p, o in ((p1, opt1), (p2, opt2)):
            quad_grad(p)
            o.step()
    np.testing.assert_array_equal(p1.data, p2.data)
    sd = opt1.state_dict()
    sd["state"][0]["exp_avg"] = np.zeros(5)
    with pytest.raises(cr.ShapeError, match="state 'exp_avg' of parameter 0 has shape"):
        opt2.load_state_dict(sd)
    with pytest.raises(cr.ShapeError, match="saved groups have sizes"):
        optim.Adam([p2, make()]).load_state_dict(opt1.state_dict())


def test_schedulers_closed_form_and_vs_torch():
    p = nn.Parameter([0.0])
    opt = optim.SGD([p], lr=0.2)
    sched = optim.CosineAnnealingLR(opt, T_max=10, eta_min=0.01)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(10):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    expected = [0.01 + 0.19 * (1 + math.cos(math.pi * t / 10)) / 2 for t in range(11)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    step = optim.StepLR(optim.SGD([nn.Parameter([0.0])], lr=1.0), step_size=3, gamma=0.1)
    got = []
    for _ in range(7):
        step.step()
        got.append(step.get_last_lr()[0])
    np.testing.assert_allclose(got, [1, 1, 0.1, 0.1, 0.1, 0.01, 0.01])
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.zeros(1))
    topt = torch.optim.SGD([tp], lr=0.2)
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=10, eta_min=0.01)
    tlrs = [tsched.get_last_lr()[0]]
    for _ in range(10):
        topt.step()
        tsched.step()
        tlrs.append(tsched.get_last_lr()[0])
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-9)
    sched2 = optim.CosineAnnealingLR(optim.SGD([nn.Parameter([0.0])], lr=0.2), T_max=10, eta_min=0.01)
    sched2.load_state_dict(sched.state_dict())
    assert sched2.get_last_lr() == sched.get_last_lr()


def test_bad_hyperparameters_are_refused():
    p = [nn.Parameter([1.0])]
    with pytest.raises(ValueError, match="nesterov=True needs momentum > 0"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas in"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="lr, momentum and weight_decay must be >= 0"):
        optim.SGD(p, lr=-1)
