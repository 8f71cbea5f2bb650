"""The basic layers' functions: linear, dropout, embedding, the plain losses.

All are composites of chainrule ops, so they differentiate to any order in both modes.
"""
from __future__ import annotations

import math
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating
from chainrule.core.batched import physical
from chainrule.core.errors import DTypeError, ShapeError, VmapError
from chainrule.core.random import draw
from chainrule.core.tensor import Tensor
from chainrule.numpy import log_softmax, raw, relu, sigmoid, softmax, tanh
from chainrule.ops.nn import REDUCTIONS

__all__ = ["cross_entropy", "dropout",
           "embedding", "linear", "log_softmax", "mse_loss",
           "nll_loss", "relu", "sigmoid", "softmax", "tanh"]


def _reduce(loss: Any, reduction: str, who: str) -> Any:
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{who}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# ----- losses -----
def _class_axis(shape: tuple, who: str) -> int:
    if not shape:
        raise ShapeError(f"{who}: input must have a class axis: (C,), (N, C) or (N, C, d1, ...); got a "
                         f"scalar; reshape it to (1, C)")
    return 0 if len(shape) == 1 else 1


def _class_weight(weight: Any, n_classes: int, dtype: Any, who: str) -> Any:
    if isinstance(weight, str):
        raise TypeError(f"{who}: the third argument is the per-class weight, got {weight!r}; pass "
                        f"reduction= by keyword")
    w = np.asarray(raw(weight))
    if w.shape != (n_classes,):
        raise ShapeError(f"{who}: weight must have one entry per class, shape ({n_classes},), got "
                         f"{w.shape}")
    return w.astype(dtype, copy=False)


def _along_classes(w: Any, ndim: int, ca: int) -> Any:
    """Reshape a (C,) weight to broadcast along the class axis ``ca`` of an ``ndim``-d input."""
    return w.reshape((-1,) + (1,) * (ndim - ca - 1))


def _mean_over(total: Any, count: float) -> Any:
    # 0 / 0 (everything ignored, or an empty batch) is nan, as in torch, without a NumPy warning
    return total / count if count else total * np.nan


def _class_index_loss(log_probs: Any, target: Any, weight: Any, ignore_index: int, reduction: str,
                      smoothing: float, who: str) -> Any:
    """``-w[t] * log_probs[t]`` (blended with the uniform-target term for ``smoothing``), as torch."""
    shape = np.shape(raw(log_probs))
    ca = _class_axis(shape, who)
    n_classes, expected = shape[ca], shape[:ca] + shape[ca + 1:]
    t = np.asarray(raw(target))
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{who}: target must hold integer class indices, got dtype {t.dtype}; convert "
                         f"with target.astype('int64') (for class probabilities use cross_entropy)")
    if t.shape != expected:
        raise ShapeError(f"{who}: expected input {shape} and a target of shape {expected} (the input's "
                         f"shape without its class axis {ca}), got target {t.shape}")
    keep = t != ignore_index
    bad = t[keep & ((t < 0) | (t >= n_classes))]
    if bad.size:
        raise ValueError(f"{who}: target values must lie in [0, {n_classes}) or equal ignore_index="
                         f"{ignore_index}, got {bad[:5].tolist()}; fix the labels or the number of classes")
    dtype = raw(log_probs).dtype
    safe = np.where(keep, t, 0)
    grids = list(np.ogrid[tuple(slice(n) for n in t.shape)])
    picked = ops.getitem(log_probs, tuple(grids[:ca] + [safe] + grids[ca:]))
    w = None if weight is None else _class_weight(weight, n_classes, dtype, who)
    w_t = keep.astype(dtype) if w is None else np.where(keep, w[safe], 0).astype(dtype)
    loss = -picked if w is None else -(picked * w[safe])
    if smoothing:
        per_class = log_probs if w is None else log_probs * _along_classes(w, len(shape), ca)
        loss = (1.0 - smoothing) * loss - (smoothing / n_classes) * ops.sum(per_class, axis=ca)
    if not keep.all():
        loss = ops.where(keep, loss, 0.0)
    if reduction == "mean":
        return _mean_over(ops.sum(loss), float(w_t.sum()))
    return _reduce(loss, reduction, who)


def _soft_target_loss(logits: Any, target: Any, ca: int, weight: Any, reduction: str,
                      smoothing: float) -> Any:
    """``-sum_c w_c * p_c * log_softmax(x)_c`` per example for class probabilities ``p``, as torch."""
    shape = np.shape(raw(logits))
    if not isinstance(target, Tensor):
        target = np.asarray(target, dtype=raw(logits).dtype)
    if smoothing:
        target = target * (1.0 - smoothing) + smoothing / shape[ca]
    terms = log_softmax(logits, axis=ca) * target
    if weight is not None:
        w = _class_weight(weight, shape[ca], raw(logits).dtype, "cross_entropy")
        terms = terms * _along_classes(w, len(shape), ca)
    loss = -ops.sum(terms, axis=ca)
    if reduction == "mean":                  # torch divides by the number of rows, not by weights
        return _mean_over(ops.sum(loss), float(np.size(raw(loss))))
    return _reduce(loss, reduction, "cross_entropy")


def _batched_target_loss(logits: Any, target: Any, shape: tuple, weight: Any, ignore_index: int,
                         reduction: str, label_smoothing: float) -> Any:
    """cross_entropy inside cr.vmap with a batched class-index target (per-example losses): the
    fused primitive, which takes a batched target."""
    if weight is not None or label_smoothing or 0 <= ignore_index < shape[-1] or len(shape) not in (1, 2) \
            or tuple(target.shape) != tuple(shape[:-1]) or reduction not in REDUCTIONS:
        raise VmapError(f"cross_entropy inside cr.vmap with a batched target takes (C,) or (N, C) logits "
                        f"(got {shape}) with a target of their shape minus the class axis (got "
                        f"{tuple(target.shape)}), and no weight, label_smoothing or in-range "
                        f"ignore_index; compute the loss from log_softmax for the other forms")
    t = physical(target)
    values = np.asarray(t.data if isinstance(t, Tensor) else t)
    if values.size and (values.min() < 0 or values.max() >= shape[-1]):
        raise IndexError(f"cross_entropy: target classes must be in [0, {shape[-1]}), got values from "
                         f"{values.min()} to {values.max()}")
    if len(shape) == 1:                     # one example's (C,) logits and a scalar class
        return ops.reshape(ops.softmax_cross_entropy(ops.reshape(logits, (1, shape[0])),
                                                     ops.reshape(target, (1,)), reduction), ())
    return ops.softmax_cross_entropy(logits, target, reduction)


def nll_loss(log_probs: Any, target: Any, weight: Any = None, ignore_index: int = -100,
             reduction: str = "mean") -> Any:
    """Negative log-likelihood of integer ``target`` classes, as ``torch.nn.functional.nll_loss``.

    ``log_probs`` is (C,), (N, C) or (N, C, d1, ...) with the class axis at 1; ``target`` has the
    input's shape without it. ``weight`` (C,) scales each class (a constant, never differentiated);
    targets equal to ``ignore_index`` add 0; ``mean`` divides by the sum of the kept targets' weights.

    >>> import chainrule as cr
    >>> float(cr.nn.functional.nll_loss(cr.log(cr.tensor([[0.5, 0.5]])), [1]))  # doctest: +ELLIPSIS
    0.693...
    >>> cr.nn.functional.nll_loss(cr.tensor([[-1.0, -2.0], [-3.0, -4.0]]), [1, -100], reduction="none")
    tensor([2., 0.])
    """
    if not is_floating(np.asarray(raw(log_probs)).dtype):
        raise DTypeError(f"nll_loss: input must be floating point (log-probabilities), got dtype "
                         f"{np.asarray(raw(log_probs)).dtype}; pass log_softmax(logits)")
    return _class_index_loss(log_probs, target, weight, ignore_index, reduction, 0.0, "nll_loss")


def cross_entropy(logits: Any, target: Any, weight: Any = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
    """Cross-entropy of ``logits`` against ``target``, as ``torch.nn.functional.cross_entropy``.

    ``target`` holds integer class indices (the input's shape without the class axis 1, or a scalar
    for (C,) logits) or, as floats of the input's shape, class probabilities. ``weight``,
    ``ignore_index`` and ``label_smoothing`` follow torch (docs/training.md has the table). The
    plain case, (N, C) logits and in-range indices, runs as one fused primitive.

    >>> import chainrule as cr
    >>> float(cr.nn.functional.cross_entropy(cr.tensor([[0.0, 0.0]]), [0]))  # doctest: +ELLIPSIS
    0.693...
    >>> cr.nn.functional.cross_entropy(cr.tensor([[0.0, 0.0]]), [0], label_smoothing=0.5, reduction="none")
    tensor([0.6931472])
    """
    shape = np.shape(raw(logits))
    if isinstance(target, Tensor) and target._level and target.dtype.kind in "iu":
        return _batched_target_loss(logits, target, shape, weight, ignore_index, reduction, label_smoothing)
    t = np.asarray(raw(target))
    if weight is None and not label_smoothing and len(shape) == 2 and t.shape == shape[:1] \
            and t.dtype.kind in "iu" and t.size and 0 <= np.minimum.reduce(t) \
            and np.maximum.reduce(t) < shape[1] \
            and (ignore_index < 0 or ignore_index >= shape[1]) and reduction in REDUCTIONS:
        return ops.softmax_cross_entropy(logits, t, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    ca = _class_axis(shape, "cross_entropy")
    if t.dtype.kind in "iu":
        return _class_index_loss(log_softmax(logits, axis=ca), t, weight, ignore_index, reduction,
                                 label_smoothing, "cross_entropy")
    if not is_floating(t.dtype) or t.shape != shape:
        raise DTypeError(f"cross_entropy: target of dtype {t.dtype} and shape {t.shape} is not "
                         f"integer class indices of shape {shape[:ca] + shape[ca + 1:]} or class "
                         f"probabilities of shape {shape}; convert indices with target.astype('int64')")
    if ignore_index >= 0:
        raise ValueError(f"cross_entropy: ignore_index is not supported for class-probability "
                         f"(float) targets, got ignore_index={ignore_index}; zero those rows' "
                         f"probabilities instead")
    return _soft_target_loss(logits, target, ca, weight, reduction, label_smoothing)


def mse_loss(x: Any, target: Any, reduction: str = "mean") -> Any:
    """Mean squared error.

    >>> import chainrule as cr
    >>> cr.nn.functional.mse_loss(cr.tensor([1.0, 3.0]), cr.tensor([1.0, 1.0]))
    tensor(2.)
    """
    if np.shape(raw(x)) != np.shape(raw(target)):
        raise ShapeError(f"mse_loss: input shape {np.shape(raw(x))} and target shape "
                         f"{np.shape(raw(target))} differ; reshape one so they match")
    d = x - target
    return _reduce(d * d, reduction, "mse_loss")


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight.T + bias`` (weight has shape (out_features, in_features), as in PyTorch).

    >>> import chainrule as cr
    >>> w, b = cr.tensor([[1.0, 1.0], [0.0, 1.0]]), cr.tensor([0.5, 0.0])
    >>> cr.nn.functional.linear(cr.tensor([[1.0, 2.0]]), w, b)
    tensor([[3.5, 2. ]])
    """
    n_in = np.shape(raw(weight))[1]
    shape = np.shape(raw(x))
    if shape[-1:] != (n_in,):
        raise ShapeError(f"linear: input of shape {shape} does not end in in_features="
                         f"{n_in}; reshape it (e.g. with cr.nn.Flatten()) or change in_features")
    if len(shape) > 2:
        # NumPy runs a stacked matmul as one product per leading index ((128, 8, 256) @ (256, 1024):
        # 128 products of 8 rows, 5x slower than one): the rows as one matrix, the leading axes back
        return ops.reshape(linear(ops.reshape(x, (math.prod(shape[:-1]), n_in)), weight, bias),
                           shape[:-1] + (np.shape(raw(weight))[0],))
    if bias is None:
        return ops.matmul(x, ops.transpose(weight))
    return ops.linear(x, weight, bias)


def dropout(x: Any, p: float = 0.5, training: bool = True, generator: Any = None) -> Any:
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p); identity if not training.

    >>> import chainrule as cr, numpy as np
    >>> y = cr.nn.functional.dropout(cr.ones(1000), 0.5, generator=np.random.default_rng(0))
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    data = raw(x)
    if p == 1.0:
        return x * np.zeros((), dtype=data.dtype)
    return x * draw(_dropout_mask, generator, np.shape(data), p, data.dtype)


def _dropout_mask(gen: Any, shape: tuple, p: float, dtype: Any) -> Any:
    return ((gen.random(shape) >= p) * (1.0 / (1.0 - p))).astype(dtype)


def embedding(indices: Any, weight: Any) -> Any:
    """Rows of ``weight`` picked by integer ``indices`` (any shape).

    >>> import chainrule as cr
    >>> cr.nn.functional.embedding([[2, 0]], cr.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]))
    tensor([[[4., 5.],
             [0., 1.]]])
    """
    idx = np.asarray(raw(indices))
    n = np.shape(raw(weight))[0]
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"embedding: indices must be integers, got dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"embedding: indices must lie in [0, {n}), got min {idx.min()} and max "
                         f"{idx.max()}; enlarge num_embeddings or fix the indices")
    return ops.getitem(weight, idx)
