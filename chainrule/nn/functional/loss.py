"""The losses beyond basic's, as ``torch.nn.functional``: l1_loss, smooth_l1_loss, huber_loss,
binary_cross_entropy (with weight), binary_cross_entropy_with_logits (with weight and pos_weight),
kl_div, cosine_embedding_loss, margin_ranking_loss, triplet_margin_loss, ctc_loss.

Composites of chainrule ops, so they differentiate to any order in both modes. ``reduction`` is
``"mean"``, ``"sum"`` or ``"none"`` (``kl_div`` also takes ``"batchmean"``); PyTorch's deprecated
``size_average``/``reduce`` are accepted and mapped as PyTorch maps them.
"""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._shapes import broadcasts_to
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.nn.functional.activation import _clamp_min, pairwise_distance
from chainrule.nn.functional.basic import _reduce
from chainrule.numpy import raw

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss", "ctc_loss",
           "huber_loss", "kl_div", "l1_loss", "margin_ranking_loss", "smooth_l1_loss", "triplet_margin_loss"]


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """PyTorch's mapping of the deprecated ``size_average``/``reduce`` flags to ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _shape(x: Any) -> tuple:
    return tuple(np.shape(raw(x)))


def _same_shape(x: Any, target: Any, who: str) -> None:
    if _shape(x) != _shape(target):
        raise ShapeError(f"{who}: input shape {_shape(x)} and target shape {_shape(target)} differ; reshape "
                         f"one so they match")


def l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Any = None) -> Any:
    """Mean absolute error ``|x - t|``; its derivative at ``x == t`` is 0, as PyTorch's. With ``weight``
    (the input's shape) ``mean`` is ``sum(w |x - t|) / sum(w)``, as PyTorch.

    >>> import chainrule as cr
    >>> cr.nn.functional.l1_loss(cr.tensor([1.0, 4.0]), cr.tensor([2.0, 2.0]))
    tensor(1.5)
    """
    _same_shape(input, target, "l1_loss")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = ops.abs(input - target)
    if weight is None:
        return _reduce(loss, reduction, "l1_loss")
    w = _elementwise_weight(weight, input, "l1_loss")
    if reduction == "mean":
        return ops.sum(loss * w) / ops.sum(w)
    return _reduce(loss * w, reduction, "l1_loss")


def _elementwise_weight(weight: Any, input: Any, who: str) -> Any:
    if _shape(weight) != _shape(input):
        raise ValueError(f"{who}: weight of shape {_shape(weight)} must have the input's shape {_shape(input)}")
    return _as_constant(weight, input)


def _difference(input: Any, target: Any, param_bad: bool, param_rule: str, who: str) -> tuple:
    """``(d, |d|)`` for ``d = input - target``, after the shape check and the loss's parameter check."""
    _same_shape(input, target, who)
    if param_bad:
        raise ValueError(f"{who}: {param_rule}")
    d = input - target
    return d, ops.abs(d)


def smooth_l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Any:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = x - t``; beta=0 is l1_loss).

    >>> import chainrule as cr
    >>> cr.nn.functional.smooth_l1_loss(cr.tensor([0.5, 3.0]), cr.tensor([0.0, 0.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    d, ad = _difference(input, target, beta < 0, f"beta must be non-negative, got {beta}", "smooth_l1_loss")
    loss = ad if beta == 0 else ops.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta)
    return _reduce(loss, _legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None) -> Any:
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (``d = x - t``), times ``weight``
    (the input's shape) if given; ``mean`` then averages the weighted terms, as PyTorch.

    >>> import chainrule as cr
    >>> cr.nn.functional.huber_loss(cr.tensor([0.5, 3.0]), cr.tensor([0.0, 0.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    d, ad = _difference(input, target, delta <= 0, f"delta must be positive, got {delta}", "huber_loss")
    loss = ops.where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * _elementwise_weight(weight, input, "huber_loss")
    return _reduce(loss, reduction, "huber_loss")


def _clamped_log(x: Any) -> Any:
    """``max(log(x), -100)`` as PyTorch's binary_cross_entropy, with no ``0 * inf`` in its derivative."""
    positive = x > 0
    logs = ops.log(ops.where(positive, x, 1.0))
    return ops.where(ops.logical_and(positive, logs > -100.0), logs, -100.0)


def binary_cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Any:
    """``-w (t log x + (1 - t) log(1 - x))`` on probabilities ``x``, each log clamped at -100 as PyTorch.

    Where a log is clamped its derivative here is 0 (PyTorch's is ``(x - t) / max(x (1 - x), 1e-12)``);
    everywhere else the two agree.

    >>> import chainrule as cr
    >>> round(float(cr.nn.functional.binary_cross_entropy(cr.tensor([0.5]), cr.tensor([1.0]))), 4)
    0.6931
    """
    _same_shape(input, target, "binary_cross_entropy")
    x = raw(input)                     # inside cr.vmap the values are not known here: no check
    if isinstance(x, (np.ndarray, np.generic, float)) and np.size(x) and (np.any(x < 0) or np.any(x > 1)):
        raise ValueError(f"binary_cross_entropy: input must hold probabilities in [0, 1], got values from "
                         f"{x.min()} to {x.max()}; apply sigmoid first or use binary_cross_entropy_with_logits")
    loss = -(target * _clamped_log(input) + (1.0 - target) * _clamped_log(1.0 - input))
    if weight is not None:
        loss = loss * _as_constant(weight, input)
    return _reduce(loss, _legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy")


def _as_constant(w: Any, like: Any) -> Any:
    """A weight as given (a Tensor stays one, so it may carry a gradient), else an array of ``like``'s dtype."""
    if isinstance(w, Tensor):
        return w
    return np.asarray(w, dtype=np.asarray(raw(like)).dtype if not isinstance(like, Tensor) else like.dtype)


def _broadcasts(w: Any, shape: tuple, name: str, who: str) -> None:
    ws = _shape(w)
    if not broadcasts_to(ws, shape):
        raise ShapeError(f"{who}: {name} of shape {ws} does not broadcast to the input's shape {shape}; for "
                         f"pos_weight pass one entry per class (the last axis)")


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                                     reduce: Any = None, reduction: str = "mean", pos_weight: Any = None) -> Any:
    """Binary cross-entropy on logits, ``w ((1 - t) x + (1 + (p - 1) t) softplus(-x))`` (no overflow), as
    PyTorch's: ``weight`` scales each element, ``pos_weight`` (one per class, the last axis) the positives.

    >>> import chainrule as cr
    >>> F = cr.nn.functional
    >>> round(float(F.binary_cross_entropy_with_logits(cr.tensor([0.0]), cr.tensor([1.0]), pos_weight=[2.0])), 4)
    1.3863
    """
    who = "binary_cross_entropy_with_logits"
    if isinstance(weight, str):
        raise TypeError(f"{who}: the third argument is the per-element weight, got {weight!r}; pass "
                        f"reduction= by keyword")
    _same_shape(input, target, who)
    shape = _shape(input)
    soft = ops.softplus(-input)
    if pos_weight is None:
        loss = (1.0 - target) * input + soft
    else:
        _broadcasts(pos_weight, shape, "pos_weight", who)
        loss = (1.0 - target) * input + ((_as_constant(pos_weight, input) - 1.0) * target + 1.0) * soft
    if weight is not None:
        _broadcasts(weight, shape, "weight", who)
        loss = loss * _as_constant(weight, input)
    return _reduce(loss, _legacy_reduction(size_average, reduce, reduction), who)


def kl_div(input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
           log_target: bool = False) -> Any:
    """KL divergence with ``input`` as log-probabilities: ``t (log t - x)`` (0 where ``t == 0``), or
    ``exp(t) (t - x)`` with ``log_target``. ``"batchmean"`` divides the sum by the batch size (axis 0),
    the true KL; ``"mean"`` (PyTorch's default) divides by the number of elements.

    >>> import chainrule as cr
    >>> x = cr.log(cr.tensor([[0.5, 0.5]]))
    >>> float(cr.nn.functional.kl_div(x, cr.tensor([[0.5, 0.5]]), reduction="batchmean"))
    0.0
    """
    _same_shape(input, target, "kl_div")
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        positive = target > 0
        loss = ops.where(positive, target * ops.log(ops.where(positive, target, 1.0)), 0.0) - target * input
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "batchmean":
        shape = _shape(input)
        total = ops.sum(loss)
        return total / shape[0] if shape else total
    return _reduce(loss, reduction, "kl_div")


def _pm_one_target(target: Any, expected: tuple, who: str) -> Any:
    if _shape(target) != expected:
        raise ShapeError(f"{who}: target must have shape {expected} (one +1/-1 label per example), got "
                         f"{_shape(target)}")
    return target


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, size_average: Any = None,
                          reduce: Any = None, reduction: str = "mean") -> Any:
    """``1 - cos(x1, x2)`` where ``y == 1``, ``max(0, cos(x1, x2) - margin)`` where ``y == -1`` (0 for any
    other label), the cosine along the last axis of (N, D) or (D,) inputs, as PyTorch.

    >>> import chainrule as cr
    >>> x1, x2 = cr.tensor([[1.0, 0.0], [1.0, 0.0]]), cr.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> cr.nn.functional.cosine_embedding_loss(x1, x2, cr.tensor([1, -1]), reduction="none")
    tensor([0., 0.])
    """
    who = "cosine_embedding_loss"
    s1, s2 = _shape(input1), _shape(input2)
    if s1 != s2 or len(s1) not in (1, 2):
        raise ShapeError(f"{who}: input1 and input2 must both be (N, D) or (D,), got {s1} and {s2}")
    target = _pm_one_target(target, s1[:-1], who)
    eps = 1e-12                                  # PyTorch's EPSILON, added to each squared magnitude
    dot = ops.sum(input1 * input2, axis=-1)
    mag1 = ops.sum(input1 * input1, axis=-1) + eps
    mag2 = ops.sum(input2 * input2, axis=-1) + eps
    cos = dot / ops.sqrt(mag1 * mag2)
    pos = ops.where(target == 1, 1.0 - cos, 0.0)
    neg = ops.where(target == -1, _clamp_min(cos - margin, 0.0), 0.0)
    return _reduce(pos + neg, _legacy_reduction(size_average, reduce, reduction), who)


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, size_average: Any = None,
                        reduce: Any = None, reduction: str = "mean") -> Any:
    """``max(0, -y (x1 - x2) + margin)``; at 0 the gradient passes, as PyTorch's ``clamp_min``.

    >>> import chainrule as cr
    >>> cr.nn.functional.margin_ranking_loss(cr.tensor([1.0, 1.0]), cr.tensor([0.0, 0.0]), cr.tensor([1.0, -1.0]))
    tensor(0.5)
    """
    who = "margin_ranking_loss"
    shapes = [_shape(input1), _shape(input2), _shape(target)]
    if len({len(s) for s in shapes}) != 1:
        raise ShapeError(f"{who}: input1, input2 and target must have the same number of axes, got shapes "
                         f"{shapes[0]}, {shapes[1]} and {shapes[2]}")
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(f"{who}: input1, input2 and target of shapes {shapes[0]}, {shapes[1]}, {shapes[2]} "
                         f"do not broadcast; make them the same shape") from None
    loss = _clamp_min(-target * (input1 - input2) + margin, 0.0)
    return _reduce(loss, _legacy_reduction(size_average, reduce, reduction), who)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the pairwise p-distance (``swap``: ``d(a, n)`` is
    replaced by ``min(d(a, n), d(p, n))``), for (N, D) or (D,) inputs, as PyTorch.

    >>> import chainrule as cr
    >>> a, p, n = cr.tensor([[0.0, 0.0]]), cr.tensor([[0.0, 1.0]]), cr.tensor([[3.0, 0.0]])
    >>> round(float(cr.nn.functional.triplet_margin_loss(a, p, n, eps=0.0)), 4)
    0.0
    """
    who = "triplet_margin_loss"
    shapes = [_shape(anchor), _shape(positive), _shape(negative)]
    if len({len(s) for s in shapes}) != 1 or len(shapes[0]) not in (1, 2):
        raise ShapeError(f"{who}: anchor, positive and negative must all be (N, D) or all (D,), got shapes "
                         f"{shapes[0]}, {shapes[1]} and {shapes[2]}")
    if margin <= 0:
        raise ValueError(f"{who}: margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ops.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = _clamp_min(d_pos - d_neg + margin, 0.0)
    return _reduce(loss, _legacy_reduction(size_average, reduce, reduction), who)


# CTC's "log 0": finite, so that logsumexp of three impossible paths stays finite (its exp is exactly 0)
_LOG_ZERO = -1e30


def _ctc_labels(targets: Any, target_lengths: np.ndarray, n: int, who: str) -> list:
    t = np.asarray(raw(targets))
    if t.dtype.kind not in "iu":
        raise ShapeError(f"{who}: targets must hold integer labels, got dtype {t.dtype}")
    if t.ndim == 1 and n > 1:                           # the labels concatenated
        if t.size != target_lengths.sum():
            raise ShapeError(f"{who}: 1-D targets are the labels concatenated, {target_lengths.sum()} "
                             f"(the sum of target_lengths) of them; got {t.size}")
        return np.split(t, np.cumsum(target_lengths)[:-1])
    t = t.reshape(n, -1)
    if target_lengths.max(initial=0) > t.shape[1]:
        raise ShapeError(f"{who}: a target length ({target_lengths.max()}) exceeds the padded targets' "
                         f"width {t.shape[1]} (targets of shape {t.shape})")
    return [t[i, :k] for i, k in enumerate(target_lengths)]


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Any:
    """Connectionist temporal classification loss, ``-log p(target | log_probs)`` summed over alignments
    (the forward algorithm in log space), as ``torch.nn.functional.ctc_loss``.

    ``log_probs`` is (T, N, C) or unbatched (T, C), log-probabilities (``log_softmax`` along C);
    ``targets`` is (N, S) padded or the labels concatenated; ``"mean"`` divides each loss by its target
    length, then averages. An impossible alignment costs ``inf`` (0 with ``zero_infinity``). The gradient
    is the exact one; PyTorch's own with respect to ``log_probs`` assumes they are normalised, so the two
    agree through ``log_softmax`` (the gradients of the logits).

    >>> import chainrule as cr
    >>> lp = cr.log(cr.full((2, 1, 2), 0.5))             # T=2, N=1, C=2 (0 is the blank)
    >>> round(float(cr.nn.functional.ctc_loss(lp, [[1]], [2], [1], reduction="sum")), 4)    # 3 alignments
    0.2877
    """
    who = "ctc_loss"
    shape = _shape(log_probs)
    unbatched = len(shape) == 2
    if unbatched:
        log_probs = ops.reshape(log_probs, (shape[0], 1, shape[1]))
        shape = (shape[0], 1, shape[1])
    if len(shape) != 3:
        raise ShapeError(f"{who}: log_probs must be (T, N, C) or (T, C), got shape {shape}")
    n_steps, n, n_classes = shape
    il = np.asarray(raw(input_lengths)).astype(np.int64).reshape(-1)
    tl = np.asarray(raw(target_lengths)).astype(np.int64).reshape(-1)
    if il.shape != (n,) or tl.shape != (n,):
        raise ShapeError(f"{who}: input_lengths and target_lengths need one entry per example ({n}), got "
                         f"{il.size} and {tl.size}")
    if il.min() < 0 or il.max() > n_steps or tl.min() < 0:
        raise ValueError(f"{who}: input_lengths must lie in [0, T={n_steps}] and target_lengths be "
                         f"non-negative, got {il.tolist()} and {tl.tolist()}")
    if not 0 <= blank < n_classes:
        raise ValueError(f"{who}: blank={blank} is not a class of C={n_classes}")
    labels = _ctc_labels(targets, tl, n, who)
    for lab in labels:
        if lab.size and (lab.min() < 0 or lab.max() >= n_classes or (lab == blank).any()):
            raise ValueError(f"{who}: target labels must lie in [0, {n_classes}) and differ from blank={blank}, "
                             f"got {lab.tolist()}")
    width = 2 * int(tl.max(initial=0)) + 1
    ext = np.full((n, width), blank, dtype=np.int64)          # blank, l1, blank, l2, ..., blank
    for i, lab in enumerate(labels):
        ext[i, 1:2 * lab.size + 1:2] = lab
    pos = np.arange(width)
    valid = pos[None, :] < (2 * tl + 1)[:, None]
    skip = np.zeros((n, width), dtype=bool)                   # the s-2 step: a label unlike the one before
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    skip &= valid
    repeats = np.array([int((lab[1:] == lab[:-1]).sum()) for lab in labels])
    feasible = il >= tl + repeats
    emit = ops.getitem(log_probs, (slice(None), np.arange(n)[:, None], ext))        # (T, N, width)
    alpha = ops.where(valid & (pos[None, :] <= 1), emit[0], _LOG_ZERO)
    pad1 = np.full((n, 1), _LOG_ZERO)
    pad2 = np.full((n, 2), _LOG_ZERO)
    for t in range(1, n_steps):
        if not (il > t).any():
            break
        a1 = ops.concatenate([pad1.astype(alpha.dtype), alpha[:, :-1]], axis=1)
        a2 = ops.where(skip, ops.concatenate([pad2.astype(alpha.dtype), alpha[:, :-2]], axis=1)
                       if width > 2 else _LOG_ZERO, _LOG_ZERO)
        step = ops.where(valid, ops.logsumexp(ops.stack([alpha, a1, a2]), axis=0) + emit[t], _LOG_ZERO)
        alpha = ops.where((il > t)[:, None], step, alpha)
    rows = np.arange(n)
    last = ops.getitem(alpha, (rows, 2 * tl))
    before = ops.where(tl > 0, ops.getitem(alpha, (rows, np.maximum(2 * tl - 1, 0))), _LOG_ZERO)
    nll = -ops.logsumexp(ops.stack([last, before]), axis=0)
    dead = ~feasible | (il == 0)
    if dead.any():
        nll = ops.where(dead, 0.0 if zero_infinity else np.inf, nll)
        nll = ops.where((il == 0) & (tl == 0), 0.0, nll)          # nothing to emit in no time: p = 1
    if unbatched:
        nll = ops.reshape(nll, ())
    if reduction == "mean":
        return ops.mean(nll / np.maximum(tl, 1).astype(alpha.dtype))
    return _reduce(nll, reduction, who)
