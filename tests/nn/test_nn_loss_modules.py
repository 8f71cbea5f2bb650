"""Loss modules and the losses beyond basic's, against torch in float64: values, input (and target)
gradients for every reduction and several shapes, the derivative at each kink, buffers in state_dict
loaded from torch's, PyTorch's signatures and legacy flags, second-order gradchecks and clear errors."""
import inspect

import numpy as np
import pytest

import chainrule as cr
from chainrule.nn import loss as nn_loss
from chainrule.nn.functional import loss as L

REDUCTIONS = ["mean", "sum", "none"]


def _compare(ours_fn, theirs_fn, arrays, grad_of, torch, seed=3):
    """Value and the gradients of the inputs flagged in ``grad_of`` under a random cotangent (rtol 1e-10)."""
    torch_args, ours_args = [], []
    for a, g in zip(arrays, grad_of):
        ours_args.append(cr.tensor(a, requires_grad=g) if a.dtype.kind == "f" else cr.tensor(a))
        torch_args.append(torch.tensor(a, requires_grad=g) if a.dtype.kind == "f" else torch.tensor(a))
    ours, theirs = ours_fn(*ours_args), theirs_fn(*torch_args)
    assert ours.shape == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-10, atol=1e-13)
    g = np.random.default_rng(seed).standard_normal(ours.shape)
    ours.backward(cr.tensor(g))
    theirs.backward(torch.tensor(g))
    for c, t, flag in zip(ours_args, torch_args, grad_of):
        if flag:
            np.testing.assert_allclose(c.grad.data, t.grad.numpy(), rtol=1e-10, atol=1e-13)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _regression(shape, seed=0):
    r = _rng(seed)
    x, t = r.standard_normal(shape) * 2.0, r.standard_normal(shape)
    flat_x, flat_t = x.reshape(-1), t.reshape(-1)
    for i, d in enumerate([0.0, 1.0, -1.0, 0.5, -0.5][:flat_x.size]):  # ties and the kinks at beta / delta
        flat_x[i] = flat_t[i] + d
    return x, t


def _probabilities(shape, seed=0):
    r = _rng(seed)
    return r.uniform(0.05, 0.95, shape), r.uniform(0.0, 1.0, shape)


SHAPES = [(1,), (1, 3), (4, 5), (2, 3, 4)]


# ----- regression losses -----
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kwargs", [("L1Loss", {}), ("MSELoss", {}), ("SmoothL1Loss", {}),
                                         ("SmoothL1Loss", {"beta": 0.5}), ("SmoothL1Loss", {"beta": 0.0}),
                                         ("HuberLoss", {}), ("HuberLoss", {"delta": 0.5})], ids=str)
def test_regression_modules_match_torch(name, kwargs, reduction, shape):
    torch = pytest.importorskip("torch")
    ours = getattr(nn_loss, name)(reduction=reduction, **kwargs)
    theirs = getattr(torch.nn, name)(reduction=reduction, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    for mode in (True, False):
        ours.train(mode)
        theirs.train(mode)
        _compare(ours, theirs, list(_regression(shape)), [True, True], torch)


@pytest.mark.parametrize("fn,name,kwargs", [(L.l1_loss, "l1_loss", {}), (L.smooth_l1_loss, "smooth_l1_loss", {}),
                                            (L.smooth_l1_loss, "smooth_l1_loss", {"beta": 0.5}),
                                            (L.huber_loss, "huber_loss", {}),
                                            (L.huber_loss, "huber_loss", {"delta": 0.5})], ids=str)
def test_regression_kinks_have_torchs_derivative(fn, name, kwargs):
    torch = pytest.importorskip("torch")
    t = np.zeros(5)
    x = np.array([0.0, 1.0, -1.0, 0.5, -0.5])                 # d = 0, +-1, +-0.5: every kink used above
    _compare(lambda a, b: fn(a, b, reduction="sum", **kwargs),
             lambda a, b: getattr(torch.nn.functional, name)(a, b, reduction="sum", **kwargs), [x, t],
             [True, True], torch)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fn,name", [(L.l1_loss, "l1_loss"), (L.huber_loss, "huber_loss")], ids=str)
def test_weighted_l1_and_huber_match_torch(fn, name, reduction, shape):
    torch = pytest.importorskip("torch")
    w = _rng(11).uniform(0.5, 2.0, shape)          # l1's weighted mean divides by sum(w), huber's by the count
    _compare(lambda a, b: fn(a, b, reduction=reduction, weight=w),
             lambda a, b: getattr(torch.nn.functional, name)(a, b, reduction=reduction, weight=torch.tensor(w)),
             list(_regression(shape)), [True, True], torch)
    with pytest.raises(ValueError, match=rf"{name}: weight of shape \(7,\) must have the input's shape"):
        fn(cr.zeros(shape), cr.zeros(shape), weight=np.ones(7))


# ----- binary cross-entropy -----
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weight"])
def test_bce_module_matches_torch(weighted, reduction, shape):
    torch = pytest.importorskip("torch")
    w = _rng(4).uniform(0.5, 2.0, shape[-1:]) if weighted else None
    ours = nn_loss.BCELoss(weight=None if w is None else np.zeros_like(w), reduction=reduction)
    theirs = torch.nn.BCELoss(weight=None if w is None else torch.tensor(w), reduction=reduction)
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd) == ([] if w is None else ["weight"])
    ours.load_state_dict({k: v.numpy() for k, v in sd.items()})
    _compare(ours, theirs, list(_probabilities(shape)), [True, True], torch)


def test_bce_at_zero_and_one_is_clamped_as_torch():
    torch = pytest.importorskip("torch")
    x, t = np.array([0.0, 1.0, 0.0, 1.0, 1e-50]), np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    ours = L.binary_cross_entropy(cr.tensor(x), cr.tensor(t), reduction="none")
    theirs = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t), reduction="none")
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.data, [100.0, 100.0, 0.0, 0.0, 100.0])
    cx = cr.tensor(x, requires_grad=True)
    L.binary_cross_entropy(cx, cr.tensor(t)).backward()
    assert np.isfinite(cx.grad.data).all()           # clamped: 0 here (torch: (x - t) / max(x (1 - x), 1e-12))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted,pos", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["plain", "weight", "pos_weight", "both"])
def test_bce_with_logits_module_matches_torch(weighted, pos, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(7)
    w = r.uniform(0.5, 2.0, shape) if weighted else None
    pw = r.uniform(0.5, 3.0, shape[-1:]) if pos else None
    ours = nn_loss.BCEWithLogitsLoss(weight=None if w is None else np.ones_like(w), reduction=reduction,
                                     pos_weight=None if pw is None else np.ones_like(pw))
    theirs = torch.nn.BCEWithLogitsLoss(weight=None if w is None else torch.tensor(w), reduction=reduction,
                                        pos_weight=None if pw is None else torch.tensor(pw))
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)
    assert all(ours.state_dict()[k].shape == tuple(v.shape) for k, v in sd.items())
    ours.load_state_dict({k: v.numpy() for k, v in sd.items()})
    x = r.standard_normal(shape) * 3.0
    x.reshape(-1)[0] = 0.0
    _compare(ours, theirs, [x, r.uniform(0.0, 1.0, shape)], [True, True], torch)


def test_bce_with_logits_is_softplus_minus_logits_times_target_and_stable():
    x, t = cr.tensor(_rng().standard_normal((3, 4))), cr.tensor(_rng(1).uniform(size=(3, 4)))
    np.testing.assert_allclose(L.binary_cross_entropy_with_logits(x, t).data,
                               (cr.softplus(x) - x * t).mean().data, rtol=1e-13)
    big = cr.tensor([-800.0, 800.0], dtype=cr.float64)
    np.testing.assert_allclose(L.binary_cross_entropy_with_logits(big, cr.tensor([1.0, 0.0]), reduction="none",
                                                                  pos_weight=[2.0]).data, [1600.0, 800.0])


# ----- KL divergence -----
@pytest.mark.parametrize("shape", [(1, 3), (4, 5), (2, 3, 4), (5,)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
def test_kl_div_module_matches_torch(log_target, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(2)
    logits = r.standard_normal(shape)
    x = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    p = r.dirichlet(np.ones(shape[-1]), shape[:-1]) if len(shape) > 1 else r.dirichlet(np.ones(shape[0]))
    t = np.log(p) if log_target else p
    if not log_target:
        t.reshape(-1)[0] = 0.0                           # a zero target adds 0, as torch's xlogy
    ours = nn_loss.KLDivLoss(reduction=reduction, log_target=log_target)
    theirs = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    grad_target = log_target                              # torch's d/dt at t == 0 is nan
    _compare(ours, theirs, [x, t], [True, grad_target], torch)


# ----- embedding / ranking / triplet losses -----
@pytest.mark.parametrize("shape", [(1, 3), (5, 4), (6,)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.2])
def test_cosine_embedding_module_matches_torch(margin, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(3)
    x1, x2 = r.standard_normal(shape), r.standard_normal(shape)
    y = np.where(r.uniform(size=shape[:-1]) < 0.5, 1, -1).astype(np.int64)
    y.reshape(-1)[0] = -1
    ours = nn_loss.CosineEmbeddingLoss(margin, reduction=reduction)
    theirs = torch.nn.CosineEmbeddingLoss(margin, reduction=reduction)
    _compare(ours, theirs, [x1, x2, y], [True, True, False], torch)


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 2)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking_module_matches_torch_including_the_kink(margin, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(4)
    x1, x2 = r.standard_normal(shape), r.standard_normal(shape)
    y = np.where(r.uniform(size=shape) < 0.5, 1.0, -1.0)
    y.reshape(-1)[0] = 1.0
    x1.reshape(-1)[0] = x2.reshape(-1)[0] + margin     # -y (x1 - x2) + margin == 0 exactly: the kink
    ours = nn_loss.MarginRankingLoss(margin, reduction=reduction)
    theirs = torch.nn.MarginRankingLoss(margin, reduction=reduction)
    _compare(ours, theirs, [x1, x2, y], [True, True, True], torch)


@pytest.mark.parametrize("shape", [(1, 3), (5, 4), (6,)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [{}, {"margin": 0.5, "p": 1.0}, {"p": 3.0, "swap": True},
                                    {"margin": 2.0, "eps": 0.0, "swap": True}], ids=str)
def test_triplet_margin_module_matches_torch(kwargs, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(5)
    a, p, n = (r.standard_normal(shape) for _ in range(3))
    ours = nn_loss.TripletMarginLoss(reduction=reduction, **kwargs)
    theirs = torch.nn.TripletMarginLoss(reduction=reduction, **kwargs)
    _compare(ours, theirs, [a, p, n], [True, True, True], torch)


# ----- cross-entropy and NLL modules: weight buffer, ignore_index, label_smoothing -----
@pytest.mark.parametrize("shape", [(1, 4), (5, 3), (2, 4, 3), (4,)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [{}, {"ignore_index": 1}, {"label_smoothing": 0.2}, {"weight": True},
                                    {"weight": True, "ignore_index": 0, "label_smoothing": 0.1}], ids=str)
def test_cross_entropy_module_matches_torch(kwargs, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(6)
    n_classes = shape[0] if len(shape) == 1 else shape[1]
    kw = dict(kwargs)
    w = r.uniform(0.5, 2.0, n_classes) if kw.pop("weight", False) else None
    ours = nn_loss.CrossEntropyLoss(weight=None if w is None else np.ones(n_classes), reduction=reduction, **kw)
    theirs = torch.nn.CrossEntropyLoss(weight=None if w is None else torch.tensor(w), reduction=reduction, **kw)
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)
    ours.load_state_dict({k: v.numpy() for k, v in sd.items()})
    x = r.standard_normal(shape)
    t = np.array(r.integers(0, n_classes)) if len(shape) == 1 else r.integers(0, n_classes, (shape[0],) + shape[2:])
    t.reshape(-1)[0] = 2                                  # a class that is not ignored
    _compare(ours, theirs, [x, t], [True, False], torch)


@pytest.mark.parametrize("shape", [(1, 4), (5, 3), (2, 4, 3)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_module_matches_torch(weighted, reduction, shape):
    torch = pytest.importorskip("torch")
    r = _rng(8)
    w = r.uniform(0.5, 2.0, shape[1]) if weighted else None
    ours = nn_loss.NLLLoss(weight=None if w is None else np.ones(shape[1]), ignore_index=0, reduction=reduction)
    theirs = torch.nn.NLLLoss(weight=None if w is None else torch.tensor(w), ignore_index=0, reduction=reduction)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = r.standard_normal(shape)
    t = r.integers(0, shape[1], (shape[0],) + shape[2:])
    t.reshape(-1)[0] = 1
    _compare(ours, theirs, [x, t], [True, False], torch)


# ----- CTC: against torch through log_softmax (torch's own d/dlog_probs assumes normalised inputs) -----
CTC_CASES = {
    "padded": dict(T=6, N=3, C=4, targets=[[1, 2, 2], [3, 0, 0], [1, 1, 0]], tl=[3, 1, 2], il=[6, 4, 5]),
    "concatenated": dict(T=5, N=2, C=3, targets=[1, 2, 2, 1], tl=[3, 1], il=[5, 3]),
    "batch_one": dict(T=4, N=1, C=5, targets=[[4, 4]], tl=[2], il=[4]),
    "empty_target": dict(T=3, N=2, C=3, targets=[[1, 2], [0, 0]], tl=[2, 0], il=[3, 2]),
    "blank_last": dict(T=5, N=2, C=4, targets=[[0, 1], [2, 2]], tl=[2, 2], il=[5, 4], blank=3),
    "unbatched": dict(T=5, N=None, C=3, targets=[1, 2], tl=2, il=5),
    "infeasible": dict(T=3, N=2, C=3, targets=[[1, 1, 1], [1, 2, 0]], tl=[3, 2], il=[3, 3]),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("case", list(CTC_CASES))
def test_ctc_loss_module_matches_torch(case, zero_infinity, reduction):
    torch = pytest.importorskip("torch")
    c = CTC_CASES[case]
    blank = c.get("blank", 0)
    shape = (c["T"], c["C"]) if c["N"] is None else (c["T"], c["N"], c["C"])
    logits = _rng(13).standard_normal(shape)
    targets, il, tl = np.array(c["targets"]), np.array(c["il"]), np.array(c["tl"])
    ours = nn_loss.CTCLoss(blank, reduction, zero_infinity)
    theirs = torch.nn.CTCLoss(blank, reduction, zero_infinity)
    cx, tx = cr.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    lo = ours(cr.log_softmax(cx, axis=-1), cr.tensor(targets), il, tl)
    lt = theirs(torch.log_softmax(tx, -1), torch.tensor(targets), torch.tensor(il), torch.tensor(tl))
    assert lo.shape == tuple(lt.shape)
    np.testing.assert_allclose(lo.data, lt.detach().numpy(), rtol=1e-10)
    if case == "infeasible" and not zero_infinity:
        assert np.isinf(lo.data).any()
        return
    g = _rng(14).standard_normal(lo.shape)
    lo.backward(cr.tensor(g))
    lt.backward(torch.tensor(g))
    np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=1e-9, atol=1e-13)


def test_ctc_loss_second_order_and_errors():
    lp = cr.tensor(_rng(15).standard_normal((4, 2, 3)), dtype=cr.float64, requires_grad=True)
    fn = lambda x: L.ctc_loss(cr.log_softmax(x, axis=2), np.array([[1, 2], [2, 0]]), [4, 3], [2, 1])
    assert cr.gradcheck(fn, (lp,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, (lp,))
    with pytest.raises(ValueError, match=r"ctc_loss: target labels must lie in \[0, 3\) and differ from blank=0"):
        L.ctc_loss(lp, np.array([[1, 0], [2, 0]]), [4, 3], [2, 1])
    with pytest.raises(ValueError, match=r"input_lengths must lie in \[0, T=4\]"):
        L.ctc_loss(lp, np.array([[1, 2], [2, 0]]), [5, 3], [2, 1])
    with pytest.raises(cr.ShapeError, match="one entry per example"):
        L.ctc_loss(lp, np.array([[1, 2], [2, 0]]), [4], [2, 1])
    with pytest.raises(cr.ShapeError, match=r"log_probs must be \(T, N, C\) or \(T, C\)"):
        L.ctc_loss(cr.zeros(3), np.array([1]), [3], [1])


# ----- PyTorch's signatures and legacy flags -----
_SKIP = {"device", "dtype"}


@pytest.mark.parametrize("name", nn_loss.__all__)
def test_module_signature_is_torchs(name):
    torch = pytest.importorskip("torch")
    ours_p = inspect.signature(getattr(nn_loss, name)).parameters
    theirs_p = inspect.signature(getattr(torch.nn, name)).parameters
    assert [n for n in theirs_p if n not in _SKIP] == list(ours_p)          # same names, same order
    for n in ours_p:
        assert ours_p[n].default == theirs_p[n].default, (name, n)


@pytest.mark.parametrize("name", L.__all__)
def test_function_signature_is_torchs(name):
    torch = pytest.importorskip("torch")
    ours_p = inspect.signature(getattr(L, name)).parameters
    theirs_p = inspect.signature(getattr(torch.nn.functional, name)).parameters
    assert list(theirs_p) == list(ours_p)
    for n in ours_p:
        assert ours_p[n].default == theirs_p[n].default, (name, n)


@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (True, True), (False, True),
                                                 (True, False)], ids=str)
def test_legacy_size_average_and_reduce_map_as_torch(size_average, reduce):
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning):
        theirs = torch.nn.L1Loss(size_average, reduce)
    assert nn_loss.L1Loss(size_average, reduce).reduction == theirs.reduction
    x, t = _regression((3, 2))
    _compare(lambda a, b: L.l1_loss(a, b, size_average, reduce), theirs, [x, t], [True, True], torch)


# ----- second order -----
def _t(a, grad=True):
    return cr.tensor(a, dtype=cr.float64, requires_grad=grad)


def test_losses_second_order():
    r = _rng(9)
    x, t = _t(r.standard_normal((3, 4)) * 2), _t(r.standard_normal((3, 4)))
    for fn in (lambda a, b: L.smooth_l1_loss(a, b, beta=1.5), lambda a, b: L.huber_loss(a, b, delta=0.7),
               lambda a, b: L.binary_cross_entropy_with_logits(a, cr.sigmoid(b), pos_weight=cr.tensor([1., 2, 3, 4]),
                                                               weight=cr.tensor([.5, 1., 1.5, 2.]))):
        assert cr.gradcheck(fn, (x, t), modes=("rev", "fwd"))
        assert cr.gradgradcheck(fn, (x, t))
    p, q = _t(r.uniform(0.1, 0.9, (3, 4))), _t(r.uniform(0.1, 0.9, (3, 4)))
    assert cr.gradgradcheck(lambda a, b: L.binary_cross_entropy(a, b, weight=np.arange(1.0, 5.0)), (p, q))
    assert cr.gradgradcheck(lambda a, b: L.kl_div(cr.log(a), b, reduction="batchmean"), (p, q))
    y = cr.tensor([1, -1, -1])
    assert cr.gradgradcheck(lambda a, b: L.cosine_embedding_loss(a, b, y, -0.5), (x, t))
    s = cr.tensor([1.0, -1.0, 1.0, -1.0])
    assert cr.gradgradcheck(lambda a, b: L.margin_ranking_loss(a, b, s, 3.0), (x[0], t[0]))
    n = _t(r.standard_normal((3, 4)))
    assert cr.gradgradcheck(lambda a, b, c: L.triplet_margin_loss(a, b, c, margin=5.0, p=3.0, swap=True), (x, t, n))


def test_module_losses_train_a_step_like_torch():
    torch = pytest.importorskip("torch")
    r = _rng(10)
    w, x, t = r.standard_normal((3, 4)), r.standard_normal((5, 4)), r.uniform(size=(5, 3))
    cw, tw = _t(w), torch.tensor(w, requires_grad=True)
    pw = r.uniform(0.5, 2.0, 3)
    ours, theirs = nn_loss.BCEWithLogitsLoss(pos_weight=pw), torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pw))
    for _ in range(3):
        lo, lt = ours(cr.tensor(x) @ cw.T, cr.tensor(t)), theirs(torch.tensor(x) @ tw.T, torch.tensor(t))
        np.testing.assert_allclose(lo.item(), lt.item(), rtol=1e-10)
        lo.backward()
        lt.backward()
        np.testing.assert_allclose(cw.grad.data, tw.grad.numpy(), rtol=1e-10)
        cw = _t(cw.data - 0.5 * cw.grad.data)
        with torch.no_grad():
            tw -= 0.5 * tw.grad
        tw.grad = None
        np.testing.assert_allclose(cw.data, tw.detach().numpy(), rtol=1e-12)


def test_losses_under_vmap_match_a_loop():
    r = _rng(12)
    x, t = cr.tensor(r.standard_normal((4, 3))), cr.tensor(r.uniform(size=(4, 3)))
    for fn in (L.l1_loss, L.huber_loss, L.smooth_l1_loss, L.binary_cross_entropy_with_logits,
               lambda a, b: L.binary_cross_entropy(cr.sigmoid(a), b), lambda a, b: L.kl_div(a, b),
               lambda a, b: L.triplet_margin_loss(a, b, a * 2.0),
               lambda a, b: L.cosine_embedding_loss(a, b, cr.tensor(-1), margin=-0.5)):
        batched = cr.vmap(fn)(x, t)
        np.testing.assert_allclose(batched.data, [fn(x[i], t[i]).data for i in range(4)], rtol=1e-12)


# ----- errors name the loss, the shapes and the fix -----
def test_errors_name_the_loss_shapes_and_fix():
    with pytest.raises(cr.ShapeError, match=r"l1_loss: input shape \(2,\) and target shape \(3,\) differ"):
        nn_loss.L1Loss()(cr.zeros(2), cr.zeros(3))
    with pytest.raises(ValueError, match="binary_cross_entropy: input must hold probabilities in"
                                         r" \[0, 1\].*apply sigmoid first"):
        L.binary_cross_entropy(cr.tensor([1.5]), cr.tensor([1.0]))
    with pytest.raises(cr.ShapeError, match=r"pos_weight of shape \(3,\) does not broadcast to the input's "
                                            r"shape \(2, 4\)"):
        nn_loss.BCEWithLogitsLoss(pos_weight=np.ones(3))(cr.zeros((2, 4)), cr.zeros((2, 4)))
    with pytest.raises(TypeError, match="pass reduction= by keyword"):
        L.binary_cross_entropy_with_logits(cr.zeros(2), cr.zeros(2), "sum")
    with pytest.raises(ValueError, match="KLDivLoss: reduction must be one of .*'batchmean', got 'avg'"):
        nn_loss.KLDivLoss(reduction="avg")
    with pytest.raises(ValueError, match="L1Loss: reduction must be one of 'mean', 'sum', 'none', got 'batchmean'"):
        nn_loss.L1Loss(reduction="batchmean")
    with pytest.raises(cr.ShapeError, match=r"cosine_embedding_loss: target must have shape \(2,\)"):
        nn_loss.CosineEmbeddingLoss()(cr.ones((2, 3)), cr.ones((2, 3)), cr.tensor([1, 1, 1]))
    with pytest.raises(cr.ShapeError, match=r"triplet_margin_loss: anchor, positive and negative must all be"):
        nn_loss.TripletMarginLoss()(cr.ones((2, 3)), cr.ones((2, 3)), cr.ones(3))
    with pytest.raises(ValueError, match="TripletMarginLoss: margin must be greater than 0"):
        nn_loss.TripletMarginLoss(margin=0.0)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be non-negative"):
        L.smooth_l1_loss(cr.zeros(2), cr.zeros(2), beta=-1.0)
    with pytest.raises(cr.ShapeError, match=r"margin_ranking_loss: input1, input2 and target must have the same "
                                            r"number of axes"):
        L.margin_ranking_loss(cr.zeros((2, 1)), cr.zeros(2), cr.zeros(2))
    with pytest.raises(ValueError, match="CrossEntropyLoss: label_smoothing must be in"):
        nn_loss.CrossEntropyLoss(label_smoothing=1.5)


def test_reprs_and_buffers():
    assert repr(nn_loss.MSELoss()) == "MSELoss()"
    assert repr(nn_loss.L1Loss(reduction="sum")) == "L1Loss(reduction='sum')"
    m = nn_loss.CrossEntropyLoss(weight=[1.0, 2.0])
    assert list(m.state_dict()) == ["weight"] and m.weight.dtype == cr.get_default_dtype()
    assert list(nn_loss.BCEWithLogitsLoss().state_dict()) == []
