"""cross_entropy / nll_loss with torch's full argument set (class weights, ignore_index, label
smoothing, soft targets, K-d inputs, every reduction): PyTorch is the oracle (float64, 1e-6); hand
values, empty and all-ignored batches, dtypes, and errors that name the op and the fix."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.nn import functional as F

SHAPES = [(5, 4), (4,), (3, 4, 2), (2, 4, 3, 2)]       # (N, C), (C,), (N, C, d1), (N, C, d1, d2)
REDUCTIONS = ["mean", "sum", "none"]


def _case(shape, ignore, seed=0):
    """float64 logits of ``shape``, integer targets (class axis 1, or 0 for 1-D input), ignore_index."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    n_classes = shape[0] if len(shape) == 1 else shape[1]
    if len(shape) == 1:
        return x, np.array(2), -100 if ignore != "custom" else 1
    t = rng.integers(0, n_classes, (shape[0],) + shape[2:])
    if ignore == "default":
        t.flat[::3] = -100
        return x, t, -100
    return x, t, 1 if ignore == "custom" else -100           # "custom": class 1 is ignored


def _weight(shape, seed=1):
    n_classes = shape[0] if len(shape) == 1 else shape[1]
    return np.random.default_rng(seed).uniform(0.5, 2.0, n_classes)


def _against_torch(ours_fn, torch_fn, x, target, reduction, wrt_target=False):
    """Compare value and input gradient (and the target's, for soft targets) under a random cotangent."""
    torch = pytest.importorskip("torch")
    cx = cr.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    ct = cr.tensor(target, requires_grad=True) if wrt_target else target
    tt = torch.tensor(target, requires_grad=wrt_target)
    ours, theirs = ours_fn(cx, ct), torch_fn(tx, tt)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-6, atol=1e-12)
    assert ours.shape == tuple(theirs.shape) and ours.dtype == np.float64
    g = np.random.default_rng(2).standard_normal(ours.shape) if reduction == "none" else np.ones(())
    ours.backward(cr.tensor(g))
    theirs.backward(torch.tensor(g))
    np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=1e-6, atol=1e-12)
    if wrt_target:
        np.testing.assert_allclose(ct.grad.data, tt.grad.numpy(), rtol=1e-6, atol=1e-12)


# ----- cross_entropy / nll_loss against torch -----
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore", ["none", "default", "custom"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cross_entropy_class_indices_match_torch(shape, weighted, ignore, smoothing, reduction):
    torch = pytest.importorskip("torch")
    x, t, ignore_index = _case(shape, ignore)
    w = _weight(shape) if weighted else None
    kw = dict(ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    _against_torch(lambda z, y: F.cross_entropy(z, y, w, **kw),
                   lambda z, y: torch.nn.functional.cross_entropy(
                       z, y, None if w is None else torch.tensor(w), **kw), x, t, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ignore", ["none", "default", "custom"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_nll_loss_matches_torch(shape, weighted, ignore, reduction):
    torch = pytest.importorskip("torch")
    x, t, ignore_index = _case(shape, ignore)
    w = _weight(shape) if weighted else None
    kw = dict(ignore_index=ignore_index, reduction=reduction)
    _against_torch(lambda z, y: F.nll_loss(z, y, w, **kw),
                   lambda z, y: torch.nn.functional.nll_loss(
                       z, y, None if w is None else torch.tensor(w), **kw), x, t, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cross_entropy_soft_targets_match_torch(shape, weighted, smoothing, reduction):
    torch = pytest.importorskip("torch")
    x, _, _ = _case(shape, "none")
    ca = 0 if len(shape) == 1 else 1
    p = np.random.default_rng(3).uniform(size=shape)
    p /= p.sum(axis=ca, keepdims=True)
    w = _weight(shape) if weighted else None
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    _against_torch(lambda z, y: F.cross_entropy(z, y, w, **kw),
                   lambda z, y: torch.nn.functional.cross_entropy(
                       z, y, None if w is None else torch.tensor(w), **kw), x, p, reduction,
                   wrt_target=True)


def test_all_ignored_and_empty_batches_follow_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((3, 4))
    t = np.full(3, -100)
    for kw in ({}, {"label_smoothing": 0.1}, {"weight": np.ones(4)}):
        assert np.isnan(F.cross_entropy(cr.tensor(x), t, **kw).item())
        assert torch.isnan(torch.nn.functional.cross_entropy(
            torch.tensor(x), torch.tensor(t), **{k: torch.tensor(v) if k == "weight" else v
                                                 for k, v in kw.items()}))
    assert F.cross_entropy(cr.tensor(x), t, reduction="sum").item() == 0.0
    np.testing.assert_array_equal(F.nll_loss(cr.tensor(x), t, reduction="none").data, np.zeros(3))
    assert np.isnan(F.cross_entropy(cr.zeros((0, 4)), np.zeros(0, dtype=np.int64)).item())
    assert F.cross_entropy(cr.zeros((0, 4)), np.zeros(0, dtype=np.int64), reduction="sum").item() == 0
    assert np.isnan(F.cross_entropy(cr.zeros((0, 4)), np.zeros((0, 4))).item())
    assert F.cross_entropy(cr.zeros(4), -100, reduction="none").item() == 0.0   # 1-D, ignored scalar


def test_all_ignored_gradient_is_zero_for_sum():
    x = cr.tensor(np.ones((2, 3)), requires_grad=True)
    F.cross_entropy(x, [-100, -100], reduction="sum", label_smoothing=0.5).backward()
    np.testing.assert_array_equal(x.grad.data, np.zeros((2, 3)))


def test_cross_entropy_hand_computed_weight_and_smoothing():
    # logits 0 everywhere over C=2: log p = log 1/2 for both classes.
    x, w, eps = cr.zeros((2, 2), dtype=cr.float64), np.array([1.0, 3.0]), 0.5
    per = F.cross_entropy(x, [0, 1], w, reduction="none", label_smoothing=eps).data
    smooth = -(np.log(0.5) * (1 + 3))                        # -sum_c w_c log p_c
    expected = [(1 - eps) * -np.log(0.5) * 1 + eps / 2 * smooth,
                (1 - eps) * -np.log(0.5) * 3 + eps / 2 * smooth]
    np.testing.assert_allclose(per, expected, rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(x, [0, 1], w, label_smoothing=eps).data,
                               sum(expected) / (1 + 3), rtol=1e-12)   # mean divides by sum of w[y]


def test_general_path_is_twice_differentiable(rng):
    x = cr.tensor(rng.standard_normal((2, 3, 2)), requires_grad=True)
    t = np.array([[0, -100], [2, 1]])
    w = np.array([0.5, 1.0, 2.0])
    fn = lambda z: F.cross_entropy(z, t, w, label_smoothing=0.1)   # noqa: E731
    assert cr.gradcheck(fn, (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, (x,))


def test_default_case_uses_the_fused_primitive_and_others_do_not():
    x = cr.tensor(np.zeros((3, 4)), requires_grad=True)
    assert F.cross_entropy(x, [0, 1, 2], reduction="none").grad_fn.name == "SoftmaxCrossEntropyBackward"
    for kw in ({"weight": np.ones(4)}, {"label_smoothing": 0.1}, {"ignore_index": 1}):
        out = F.cross_entropy(x, [0, 1, 2], reduction="none", **kw)
        assert out.grad_fn.name != "SoftmaxCrossEntropyBackward"
    out = F.cross_entropy(x, [0, -100, 2], reduction="none")
    np.testing.assert_allclose(out.data, [np.log(4), 0.0, np.log(4)], rtol=1e-12)


def test_float32_stays_float32_with_float64_weight():
    x = cr.tensor(np.zeros((2, 3), dtype=np.float32), requires_grad=True)
    loss = F.cross_entropy(x, [0, -100], np.array([1.0, 2.0, 3.0]), label_smoothing=0.1)
    assert loss.dtype == np.float32
    # kept row 0: 0.9 * 1 * log 3 + 0.1 / 3 * (1 + 2 + 3) * log 3 = 1.1 log 3, over w[0] = 1
    np.testing.assert_allclose(loss.item(), 1.1 * np.log(3), rtol=1e-6)
    loss.backward()
    assert x.grad.dtype == np.float32
    soft = F.cross_entropy(x, np.full((2, 3), 1 / 3), label_smoothing=0.1)   # float64 probabilities
    assert soft.dtype == np.float32 and abs(soft.item() - np.log(3)) < 1e-6


def test_cross_entropy_errors_name_the_op_and_fix():
    x = cr.zeros((2, 3))
    with pytest.raises(cr.ShapeError, match=r"cross_entropy: expected input \(2, 3\).*target of "
                                            r"shape \(2,\)"):
        F.cross_entropy(x, [[0, 1]])
    with pytest.raises(cr.ShapeError, match=r"cross_entropy: expected input \(2, 3, 4\).*\(2, 4\)"):
        F.cross_entropy(cr.zeros((2, 3, 4)), np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(cr.ShapeError, match="cross_entropy: input must have a class axis"):
        F.cross_entropy(cr.tensor(1.0), 0)
    with pytest.raises(cr.DTypeError, match=r"integer class indices of shape \(2,\) or class "
                                            r"probabilities of shape \(2, 3\)"):
        F.cross_entropy(x, np.zeros((2, 2)))
    with pytest.raises(cr.DTypeError, match="cross_entropy: target of dtype bool"):
        F.cross_entropy(x, np.array([True, False]))
    with pytest.raises(cr.DTypeError, match="nll_loss: target must hold integer class indices.*"
                                            "use cross_entropy"):
        F.nll_loss(x, np.zeros((2, 3)))
    with pytest.raises(cr.DTypeError, match="nll_loss: input must be floating point"):
        F.nll_loss(np.zeros((2, 3), dtype=np.int64), [0, 1])
    with pytest.raises(ValueError, match=r"target values must lie in \[0, 3\).*ignore_index=-100.*"
                                         r"\[3, -1\]"):
        F.cross_entropy(x, [3, -1])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        F.nll_loss(x, [0, -100], ignore_index=-1)             # -100 is not the ignored value here
    with pytest.raises(cr.ShapeError, match=r"cross_entropy: weight must have one entry per class, "
                                            r"shape \(3,\), got \(2,\)"):
        F.cross_entropy(x, [0, 1], np.ones(2))
    with pytest.raises(TypeError, match="pass reduction= by keyword"):
        F.cross_entropy(x, [0, 1], "sum")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\], got 1.5"):
        F.cross_entropy(x, [0, 1], label_smoothing=1.5)
    with pytest.raises(ValueError, match="ignore_index is not supported for class-probability"):
        F.cross_entropy(x, np.full((2, 3), 1 / 3), ignore_index=0)
    with pytest.raises(ValueError, match="reduction must be"):
        F.cross_entropy(x, [0, -100], reduction="avg")
