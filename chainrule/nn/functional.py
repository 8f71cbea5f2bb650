"""Stateless building blocks of the layers: losses, activations, dropout, convolution and pooling.

All are composites of chainrule ops, so they differentiate to any order in both modes.
"""
from __future__ import annotations

from typing import Any

from .. import ops
from .._backend import np
from ..errors import DTypeError, ShapeError
from ..ops import gelu, log_softmax, raw, relu, sigmoid, softmax, tanh
from ..random import get_generator

__all__ = ["avg_pool2d", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout",
           "embedding", "gelu", "layer_norm", "linear", "log_softmax", "max_pool2d", "mse_loss",
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
def nll_loss(log_probs: Any, target: Any, reduction: str = "mean") -> Any:
    """Negative log-likelihood of integer ``target`` classes under ``log_probs`` of shape (N, C).

    >>> import chainrule as cr
    >>> float(cr.nn.functional.nll_loss(cr.log(cr.tensor([[0.5, 0.5]])), [1]))  # doctest: +ELLIPSIS
    0.693...
    """
    shape = np.shape(raw(log_probs))
    t = np.asarray(raw(target))
    if t.dtype.kind not in "iu":
        raise DTypeError(f"nll_loss/cross_entropy: target must hold integer class indices, got "
                         f"dtype {t.dtype}; convert with target.astype('int64') (for probabilities "
                         f"use binary_cross_entropy_with_logits or a soft-label loss)")
    if len(shape) != 2 or t.shape != shape[:1]:
        raise ShapeError(f"nll_loss/cross_entropy: expected input (N, C) and target (N,), got input "
                         f"{shape} and target {t.shape}")
    if t.size and (t.min() < 0 or t.max() >= shape[1]):
        raise ValueError(f"nll_loss/cross_entropy: target values must lie in [0, {shape[1]}), got "
                         f"min {t.min()} and max {t.max()}")
    picked = ops.getitem(log_probs, (np.arange(shape[0]), t))
    return _reduce(-picked, reduction, "nll_loss")


def cross_entropy(logits: Any, target: Any, reduction: str = "mean") -> Any:
    """Cross-entropy of (N, C) ``logits`` against integer ``target`` (N,), via a stable log_softmax.

    >>> import chainrule as cr
    >>> float(cr.nn.functional.cross_entropy(cr.tensor([[0.0, 0.0]]), [0]))  # doctest: +ELLIPSIS
    0.693...
    """
    shape = np.shape(raw(logits))
    t = np.asarray(raw(target))
    if len(shape) == 2 and t.shape == shape[:1] and t.dtype.kind in "iu" and t.size \
            and 0 <= t.min() and t.max() < shape[1]:
        return _reduce(ops.softmax_cross_entropy(logits, t), reduction, "cross_entropy")
    return nll_loss(log_softmax(logits, axis=-1), target, reduction)   # raises the clear errors


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


def binary_cross_entropy_with_logits(logits: Any, target: Any, reduction: str = "mean") -> Any:
    """Binary cross-entropy on logits, computed as ``softplus(x) - x * t`` (no overflow).

    >>> import chainrule as cr
    >>> float(cr.nn.functional.binary_cross_entropy_with_logits(cr.tensor([0.0]), cr.tensor([1.0])))  # doctest: +ELLIPSIS
    0.693...
    """
    if np.shape(raw(logits)) != np.shape(raw(target)):
        raise ShapeError(f"binary_cross_entropy_with_logits: logits shape {np.shape(raw(logits))} and "
                         f"target shape {np.shape(raw(target))} differ; they must match")
    return _reduce(ops.softplus(logits) - logits * target, reduction, "binary_cross_entropy_with_logits")


# ----- layers as functions -----
def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight.T + bias`` (weight has shape (out_features, in_features), as in PyTorch)."""
    n_in = np.shape(raw(weight))[1]
    if np.shape(raw(x))[-1:] != (n_in,):
        raise ShapeError(f"linear: input of shape {np.shape(raw(x))} does not end in in_features="
                         f"{n_in}; reshape it (e.g. with cr.nn.Flatten()) or change in_features")
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
    keep = get_generator(generator).random(np.shape(data)) >= p
    return x * (keep * (1.0 / (1.0 - p))).astype(data.dtype)


def layer_norm(x: Any, normalized_shape: tuple, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Any:
    """Normalize over the trailing ``normalized_shape`` axes (biased variance, as PyTorch).

    >>> import chainrule as cr
    >>> cr.nn.functional.layer_norm(cr.tensor([[1.0, 3.0]]), 2)
    tensor([[-0.999995,  0.999995]])
    """
    shape = np.shape(raw(x))
    if np.ndim(normalized_shape) == 0:
        normalized_shape = (int(normalized_shape),)
    k = len(normalized_shape)
    if tuple(shape[len(shape) - k:]) != tuple(normalized_shape):
        raise ShapeError(f"layer_norm: input of shape {shape} does not end in normalized_shape "
                         f"{tuple(normalized_shape)}")
    axes = tuple(range(len(shape) - k, len(shape)))
    centered = x - ops.mean(x, axis=axes, keepdims=True)
    out = centered / ops.sqrt(ops.mean(centered * centered, axis=axes, keepdims=True) + eps)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def embedding(indices: Any, weight: Any) -> Any:
    """Rows of ``weight`` picked by integer ``indices`` (any shape)."""
    idx = np.asarray(raw(indices))
    n = np.shape(raw(weight))[0]
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"embedding: indices must be integers, got dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"embedding: indices must lie in [0, {n}), got min {idx.min()} and max "
                         f"{idx.max()}; enlarge num_embeddings or fix the indices")
    return ops.getitem(weight, idx)


# ----- convolution and pooling (im2col) -----
def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if np.ndim(v) == 0 else (int(v[0]), int(v[1]))


def _patches(x: Any, kernel: tuple, stride: tuple, padding: tuple, who: str,
             fill: float = 0.0) -> Any:
    """(N, C, H, W) -> (N, C, kh*kw, Ho, Wo): one strided slice per kernel offset, stacked."""
    shape = np.shape(raw(x))
    if len(shape) != 4:
        raise ShapeError(f"{who}: expected input of shape (N, C, H, W), got {shape}; add a channel "
                         f"axis with x.reshape(N, 1, H, W)")
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    if ph or pw:
        x = ops.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    h, w = shape[2] + 2 * ph, shape[3] + 2 * pw
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"{who}: kernel {kernel} is larger than the padded input {h}x{w} "
                         f"(input {shape}, padding {padding}); use a smaller kernel or more padding")
    cols = [ops.getitem(x, (slice(None), slice(None), slice(i, i + sh * (ho - 1) + 1, sh),
                            slice(j, j + sw * (wo - 1) + 1, sw)))
            for i in range(kh) for j in range(kw)]
    return ops.stack(cols, axis=2)


def conv2d(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0) -> Any:
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``: im2col, then one matmul.

    >>> import chainrule as cr
    >>> cr.nn.functional.conv2d(cr.ones((1, 1, 3, 3)), cr.ones((2, 1, 2, 2))).shape
    (1, 2, 2, 2)
    """
    o, c, kh, kw = np.shape(raw(weight))
    xs = np.shape(raw(x))
    if len(xs) == 4 and xs[1] != c:
        raise ShapeError(f"conv2d: input has {xs[1]} channels but the weight {np.shape(raw(weight))} "
                         f"expects {c}; set in_channels={xs[1]}")
    p = _patches(x, (kh, kw), _pair(stride), _pair(padding), "conv2d")   # checks (N, C, H, W)
    n = xs[0]
    _, _, _, ho, wo = np.shape(raw(p))
    cols = ops.reshape(ops.transpose(p, (0, 3, 4, 1, 2)), (n * ho * wo, c * kh * kw))
    out = ops.matmul(cols, ops.transpose(ops.reshape(weight, (o, c * kh * kw))))
    if bias is not None:
        out = out + bias
    return ops.transpose(ops.reshape(out, (n, ho, wo, o)), (0, 3, 1, 2))


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max over each window (padding counts as -inf). Ties share the gradient equally."""
    kernel = _pair(kernel_size)
    p = _patches(x, kernel, _pair(stride if stride is not None else kernel_size), _pair(padding),
                 "max_pool2d", fill=-np.inf)
    return ops.amax(p, axis=2)


def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Mean over each window (zero padding is counted, as PyTorch's default)."""
    kernel = _pair(kernel_size)
    p = _patches(x, kernel, _pair(stride if stride is not None else kernel_size), _pair(padding),
                 "avg_pool2d")
    return ops.mean(p, axis=2)
