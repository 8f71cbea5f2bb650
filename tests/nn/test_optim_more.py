"""RMSprop, Adagrad, Adamax, NAdam, RAdam and Adam(W)'s amsgrad/maximize, step by step against torch.optim."""
import numpy as np
import pytest

import chainrule as cr
from chainrule import nn
from chainrule.optim.adagrad import Adagrad
from chainrule.optim.adam import Adam, AdamW
from chainrule.optim.adam_variants import Adamax, NAdam, RAdam
from chainrule.optim.lbfgs import LBFGS
from chainrule.optim.rmsprop import RMSprop

OURS = {"RMSprop": RMSprop, "Adagrad": Adagrad, "Adamax": Adamax, "NAdam": NAdam, "RAdam": RAdam,
        "Adam": Adam, "AdamW": AdamW}
CASES = [
    ("RMSprop", {}),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.05, momentum=0.8, centered=True)),
    ("RMSprop", dict(lr=0.005, momentum=0.5, maximize=True)),
    ("RMSprop", dict(centered=True)),
    ("Adagrad", {}),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-8)),
    ("Adagrad", dict(lr=0.02, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(lr=0.01, betas=(0.85, 0.99), weight_decay=0.05, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.05)),   # rho_t > 5 from step 6 on
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.7), weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.05, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01, betas=(0.85, 0.95), amsgrad=True)),
    ("AdamW", dict(lr=0.01, maximize=True)),
]


@pytest.fixture
def torch():
    """torch, with float64 as its default dtype: it keeps scalar state (NAdam's mu_product) in that dtype."""
    torch = pytest.importorskip("torch")
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield torch
    torch.set_default_dtype(old)


def _models(torch, seed=0):
    rng = np.random.default_rng(seed)
    ours = nn.Sequential(nn.Linear(4, 5, dtype=cr.float64, generator=rng), nn.Tanh(),
                         nn.Linear(5, 3, dtype=cr.float64, generator=rng))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).double()
    theirs.load_state_dict({k: torch.tensor(np.asarray(v.data)) for k, v in ours.state_dict().items()})
    return ours, theirs


def _step(ours, opt, theirs, topt, torch, x, y):
    opt.zero_grad()
    cr.nn.functional.cross_entropy(ours(cr.tensor(x)), y).backward()
    opt.step()
    topt.zero_grad()
    torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y)).backward()
    topt.step()


def _assert_same(ours, opt, theirs, topt, msg):
    for p, tp in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-10, atol=1e-13, err_msg=msg)
    for p, tp in zip(ours.parameters(), theirs.parameters()):
        mine, ref = opt.state[p], topt.state[tp]
        assert set(mine) == set(ref), (msg, sorted(mine), sorted(ref))
        for k, v in ref.items():
            np.testing.assert_allclose(np.asarray(mine[k], dtype=float), v.detach().numpy(), rtol=1e-10,
                                       atol=1e-13, err_msg=f"{msg} state {k}")


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_torch_step_by_step_with_a_state_dict_round_trip(name, kw, torch):
    rng = np.random.default_rng(1)
    ours, theirs = _models(torch)
    opt, topt = OURS[name](ours.parameters(), **kw), getattr(torch.optim, name)(theirs.parameters(), **kw)
    batches = [(rng.normal(size=(7, 4)), rng.integers(0, 3, 7)) for _ in range(20)]
    for t, (x, y) in enumerate(batches[:10]):
        _step(ours, opt, theirs, topt, torch, x, y)
        _assert_same(ours, opt, theirs, topt, f"{name} {kw} step {t + 1}")
    # round trip: a fresh model and optimizer (other lr) take over from the saved state
    sd = opt.state_dict()
    assert sd["param_groups"][0]["lr"] == topt.state_dict()["param_groups"][0]["lr"]
    copy = nn.Sequential(nn.Linear(4, 5, dtype=cr.float64), nn.Tanh(), nn.Linear(5, 3, dtype=cr.float64))
    copy.load_state_dict(ours.state_dict())
    opt2 = OURS[name](copy.parameters(), lr=0.5)
    opt2.load_state_dict(sd)
    for t, (x, y) in enumerate(batches[10:]):
        _step(copy, opt2, theirs, topt, torch, x, y)
        _assert_same(copy, opt2, theirs, topt, f"{name} {kw} step {t + 11} after reload")


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_defaults_and_group_keys_match_torch(name, torch):
    ours = OURS[name]([nn.Parameter([1.0])]).param_groups[0]
    theirs = getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(1))]).param_groups[0]
    assert set(ours) - {"params"} <= set(theirs)
    for k in set(ours) - {"params"}:
        assert ours[k] == theirs[k], k


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adam"])
def test_complex_parameters_follow_torch(name, torch):
    z0 = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    p, tp = nn.Parameter(z0.copy()), torch.nn.Parameter(torch.tensor(z0))
    opt, topt = OURS[name]([p], lr=0.05), getattr(torch.optim, name)([tp], lr=0.05)
    for _ in range(4):
        p.grad = None
        (cr.abs(p * p) ** 2).sum().backward()
        opt.step()
        topt.zero_grad()
        (torch.abs(tp * tp) ** 2).sum().backward()
        topt.step()
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-10)


def test_first_steps_by_hand():
    w = nn.Parameter([1.0, -2.0])
    opt = RMSprop([w], lr=0.1, alpha=0.5)
    (w * w).sum().backward()                     # g = 2w; square_avg = 0.5 g^2; step = lr g / (|g|/sqrt2)
    opt.step()
    np.testing.assert_allclose(w.data, [1 - 0.1 * np.sqrt(2), -2 + 0.1 * np.sqrt(2)], rtol=1e-7)
    w = nn.Parameter(np.array([3.0]))
    opt = Adagrad([w], lr=0.1, lr_decay=1.0)
    for lr in (0.1, 0.05):                        # lr / (1 + (t - 1) lr_decay), sum grows
        w.grad = None
        (w * 1.0).sum().backward()
        before = w.item()
        opt.step()
        s = opt.state[w]["sum"][0]
        assert abs(before - w.item() - lr / (np.sqrt(s) + 1e-10)) < 1e-12
    w = nn.Parameter([1.0])
    opt = Adam([w], lr=0.1, maximize=True)
    (w * w).sum().backward()
    opt.step()
    assert abs(w.item() - 1.1) < 1e-7            # maximize ascends


def test_bad_hyperparameters_are_refused_with_the_name():
    p = [nn.Parameter([1.0])]
    with pytest.raises(ValueError, match="RMSprop: alpha must be in"):
        RMSprop(p, alpha=1.5)
    with pytest.raises(ValueError, match="RMSprop: momentum must be >= 0"):
        RMSprop(p, momentum=-0.1)
    with pytest.raises(ValueError, match="Adagrad: lr_decay must be >= 0"):
        Adagrad(p, lr_decay=-1)
    with pytest.raises(ValueError, match="Adagrad: initial_accumulator_value must be >= 0"):
        Adagrad(p, initial_accumulator_value=-1)
    with pytest.raises(ValueError, match=r"Adamax: betas must be two numbers in \[0, 1\)"):
        Adamax(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="NAdam: momentum_decay must be >= 0"):
        NAdam(p, momentum_decay=-1)
    with pytest.raises(ValueError, match="RAdam: lr must be >= 0"):
        RAdam(p, lr=-1e-3)
    with pytest.raises(ValueError, match="empty parameter list"):
        NAdam([])
    with pytest.raises(cr.ShapeError, match="state 'exp_avg' of parameter 0 has shape"):
        q = nn.Parameter([1.0, 2.0])
        o = RAdam([q])
        (q * q).sum().backward()
        o.step()
        sd = o.state_dict()
        sd["state"][0]["exp_avg"] = np.zeros(3)
        RAdam([nn.Parameter([0.0, 0.0])]).load_state_dict(sd)


def _rosenbrock(x, lib):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[2]) ** 2 + 100 * (x[3] - x[2] ** 2) ** 2


# (lr=1 without a line search is chaotic on Rosenbrock: the two libraries' last-bit differences grow from
# 1e-17 to 1e-8 within 20 iterations, so the undamped case runs with a smaller lr)
@pytest.mark.parametrize("kw", [dict(lr=0.3, max_iter=8), dict(line_search_fn="strong_wolfe"),
                                dict(lr=0.5, max_iter=7, history_size=3, line_search_fn="strong_wolfe"),
                                dict(lr=0.1, max_iter=5, history_size=2, tolerance_change=1e-12)])
def test_lbfgs_rosenbrock_iterate_by_iterate(kw, torch):
    x0 = np.array([-1.2, 1.0, 0.5, -0.4])
    p, tp = nn.Parameter(x0.copy()), torch.nn.Parameter(torch.tensor(x0))
    opt, topt = LBFGS([p], **kw), torch.optim.LBFGS([tp], **kw)
    seen, tseen = [], []

    def closure():
        opt.zero_grad()
        seen.append(p.data.copy())
        loss = _rosenbrock(p, cr)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        tseen.append(tp.detach().numpy().copy())
        loss = _rosenbrock(tp, torch)
        loss.backward()
        return loss

    for it in range(6):
        loss, tloss = opt.step(closure), topt.step(tclosure)
        tloss = tloss.item()
        assert abs(float(loss) - tloss) <= 1e-10 * max(1.0, abs(tloss)), it
        assert len(seen) == len(tseen), (it, len(seen), len(tseen))
        np.testing.assert_allclose(np.array(seen), np.array(tseen), rtol=1e-9, atol=1e-12, err_msg=f"step {it}")
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-9, atol=1e-12)
    st, tst = opt.state[p], topt.state[tp]
    assert (st["n_iter"], st["func_evals"]) == (tst["n_iter"], tst["func_evals"])
    assert len(st["old_dirs"]) == len(tst["old_dirs"])
    if "strong_wolfe" in kw.values() and kw.get("max_iter", 20) == 20:
        np.testing.assert_allclose(p.data, np.ones(4), atol=1e-5)     # converged


def test_lbfgs_on_a_model_with_a_state_dict_round_trip(torch):
    rng = np.random.default_rng(4)
    ours, theirs = _models(torch)
    x, y = rng.normal(size=(9, 4)), rng.integers(0, 3, 9)
    kw = dict(lr=0.8, max_iter=4, history_size=5, line_search_fn="strong_wolfe")
    opt, topt = LBFGS(ours.parameters(), **kw), torch.optim.LBFGS(theirs.parameters(), **kw)

    def closure_for(model, o):
        def closure():
            o.zero_grad()
            loss = cr.nn.functional.cross_entropy(model(cr.tensor(x)), y)
            loss.backward()
            return loss
        return closure

    def tclosure():
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure_for(ours, opt))
        topt.step(tclosure)
    copy = nn.Sequential(nn.Linear(4, 5, dtype=cr.float64), nn.Tanh(), nn.Linear(5, 3, dtype=cr.float64))
    copy.load_state_dict(ours.state_dict())
    opt2 = LBFGS(copy.parameters(), lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["history_size"] == 5
    for _ in range(3):
        opt2.step(closure_for(copy, opt2))
        topt.step(tclosure)
    for p, tp in zip(copy.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-8, atol=1e-11)


def test_lbfgs_refuses_groups_and_a_missing_closure():
    a, b = nn.Parameter([1.0]), nn.Parameter([2.0])
    with pytest.raises(ValueError, match="LBFGS: parameter groups are not supported"):
        LBFGS([{"params": [a]}, {"params": [b]}])
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe'"):
        LBFGS([a], line_search_fn="backtracking")
    with pytest.raises(TypeError, match="LBFGS.step needs a closure"):
        LBFGS([a]).step(None)
