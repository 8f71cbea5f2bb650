"""Activations and distances as functions, as ``torch.nn.functional``: leaky_relu, elu, selu, silu, mish,
softplus, softsign, hardtanh, hardswish, relu6, prelu, glu, one_hot, normalize, cosine_similarity,
pairwise_distance.

All are composites of chainrule ops (``where`` with a mask picks a branch, so a kink's derivative is
the one PyTorch uses, said at each function), so they differentiate to any order in both modes. The
unused branch of a ``where`` is always fed a safe value, so its derivative is never ``0 * inf``.
"""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.tensor import Tensor
from chainrule.numpy import raw
from chainrule.ops.elementwise import gelu_tanh

__all__ = ["cosine_similarity", "elu", "gelu", "glu", "hardswish", "hardtanh", "leaky_relu", "mish", "normalize",
           "one_hot", "pairwise_distance", "prelu", "relu6", "selu", "silu", "softplus", "softsign"]

# SELU's constants, as PyTorch (Klambauer et al., 2017)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _shape(x: Any) -> tuple:
    return tuple(np.shape(raw(x)))


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """``x`` where ``x > 0``, else ``negative_slope * x``. At 0 the derivative is ``negative_slope``, as
    PyTorch's. ``inplace`` is accepted for PyTorch's signature; the result is always a new tensor.

    >>> import chainrule as cr
    >>> cr.nn.functional.leaky_relu(cr.tensor([-2.0, 3.0]), 0.1)
    tensor([-0.2,  3. ])
    """
    return ops.where(input > 0, input, input * negative_slope)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``; the derivative at 0 is ``alpha``, as PyTorch's.

    >>> import chainrule as cr
    >>> cr.nn.functional.elu(cr.tensor([0.0, 2.0]))
    tensor([0., 2.])
    """
    neg = ops.where(input > 0, 0.0, input)          # exp never sees a large positive x
    return ops.where(input > 0, input, ops.expm1(neg) * alpha)


def selu(input: Any, inplace: bool = False) -> Any:
    """``scale * elu(x, alpha)`` with PyTorch's constants (derivative ``scale * alpha`` at 0).

    >>> import chainrule as cr
    >>> cr.nn.functional.selu(cr.tensor([1.0]))
    tensor([1.050701])
    """
    return elu(input, SELU_ALPHA) * SELU_SCALE


def silu(input: Any, inplace: bool = False) -> Any:
    """``x * sigmoid(x)`` (the swish).

    >>> import chainrule as cr
    >>> cr.nn.functional.silu(cr.tensor([0.0]))
    tensor([0.])
    """
    return input * ops.sigmoid(input)


def mish(input: Any, inplace: bool = False) -> Any:
    """``x * tanh(softplus(x))``.

    >>> import chainrule as cr
    >>> cr.nn.functional.mish(cr.tensor([0.0]))
    tensor([0.])
    """
    return input * ops.tanh(ops.softplus(input))


def gelu(input: Any, approximate: str = "none") -> Any:
    """Gaussian error linear unit, as ``torch.nn.functional.gelu``: ``x * Phi(x)`` (``"none"``, the erf
    form, one primitive) or its ``"tanh"`` approximation ``x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    >>> import chainrule as cr
    >>> cr.nn.functional.gelu(cr.tensor([1.0]), approximate="tanh")
    tensor([0.841192])
    """
    if approximate == "none":
        return ops.gelu(input)
    if approximate != "tanh":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return gelu_tanh(input)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (as PyTorch:
    at ``beta * x == threshold`` the log form is used, for the value and the derivative).

    >>> import chainrule as cr
    >>> cr.nn.functional.softplus(cr.tensor([0.0, 30.0]), beta=2.0).round(4)
    tensor([ 0.3466, 30.    ])
    """
    bx = input * beta
    return ops.where(bx > threshold, input, ops.softplus(bx) / beta)


def softsign(input: Any) -> Any:
    """``x / (1 + |x|)``.

    >>> import chainrule as cr
    >>> cr.nn.functional.softsign(cr.tensor([-1.0, 3.0]))
    tensor([-0.5 ,  0.75])
    """
    return input / (ops.abs(input) + 1.0)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    """``x`` clipped to ``[min_val, max_val]``. The derivative is 1 strictly inside and 0 at and beyond
    the bounds, as PyTorch's.

    >>> import chainrule as cr
    >>> cr.nn.functional.hardtanh(cr.tensor([-3.0, 0.5, 3.0]))
    tensor([-1. ,  0.5,  1. ])
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val={min_val} is above max_val={max_val}; pass min_val <= max_val")
    return ops.where(input <= min_val, min_val, ops.where(input >= max_val, max_val, input))


def relu6(input: Any, inplace: bool = False) -> Any:
    """``min(max(x, 0), 6)``: ``hardtanh(x, 0, 6)``, with its derivative (0 at 0 and at 6, as PyTorch's).

    >>> import chainrule as cr
    >>> cr.nn.functional.relu6(cr.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """
    return hardtanh(input, 0.0, 6.0)


def hardswish(input: Any, inplace: bool = False) -> Any:
    """``x * relu6(x + 3) / 6``. The derivative is 0 for ``x <= -3`` and 1 for ``x >= 3`` (so 0 at -3
    and 1 at 3), as PyTorch's.

    >>> import chainrule as cr
    >>> cr.nn.functional.hardswish(cr.tensor([-4.0, 0.0, 4.0]))
    tensor([-0.,  0.,  4.])
    """
    middle = input * (input + 3.0) / 6.0
    return ops.where(input <= -3.0, input * 0.0, ops.where(input >= 3.0, input, middle))


def prelu(input: Any, weight: Any) -> Any:
    """``x`` where ``x > 0``, else ``weight * x``, with one weight or one per channel (axis 1). At 0
    the derivative is ``weight``, as PyTorch's.

    >>> import chainrule as cr
    >>> cr.nn.functional.prelu(cr.tensor([[-2.0, 2.0]]), cr.tensor([0.25]))
    tensor([[-0.5,  2. ]])
    """
    shape, w_shape = _shape(input), _shape(weight)
    if len(w_shape) != 1:
        raise ShapeError(f"prelu: weight must be 1-D, (1,) or (channels,), got shape {w_shape}")
    n = w_shape[0]
    if n != 1:
        if len(shape) < 2 or shape[1] != n:
            raise ShapeError(f"prelu: weight has {n} entries, one per channel, but the input of shape {shape} "
                             f"has {shape[1] if len(shape) >= 2 else 'no'} channels on axis 1; use "
                             f"num_parameters={shape[1] if len(shape) >= 2 else 1}")
        weight = ops.reshape(weight, (n,) + (1,) * (len(shape) - 2))
    elif len(shape) == 0:
        weight = ops.reshape(weight, ())
    return ops.where(input > 0, input, input * weight)


def glu(input: Any, dim: int = -1) -> Any:
    """The gated linear unit: split ``input`` in halves ``a, b`` along ``dim``, return ``a * sigmoid(b)``.

    >>> import chainrule as cr
    >>> cr.nn.functional.glu(cr.tensor([[2.0, 0.0]]))
    tensor([[1.]])
    """
    shape = _shape(input)
    if not shape:
        raise ShapeError("glu: input must have at least one axis, got a scalar")
    if not -len(shape) <= dim < len(shape):
        raise ShapeError(f"glu: dim={dim} is out of range for an input of shape {shape}")
    if shape[dim] % 2:
        raise ShapeError(f"glu: halving dim={dim} needs an even size, got shape {shape} (size {shape[dim]}); "
                         f"pad or slice that axis to an even length")
    a, b = ops.split(input, 2, axis=dim)
    return a * ops.sigmoid(b)


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """``(..., num_classes)`` int64 tensor with a 1 at each index of the integer ``tensor`` (no gradient);
    ``num_classes=-1`` takes the largest index plus one.

    >>> import chainrule as cr
    >>> cr.nn.functional.one_hot(cr.tensor([0, 2]))
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    t = np.asarray(raw(tensor))
    if t.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expects integer class indices, got dtype {t.dtype}; convert with "
                         f"tensor.astype('int64')")
    if num_classes == -1:
        if not t.size:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass num_classes=")
        num_classes = int(t.max()) + 1
    if num_classes < 1 and t.size or num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be positive (or -1 to infer it), got {num_classes}")
    if t.size and (t.min() < 0 or t.max() >= num_classes):
        raise ValueError(f"one_hot: class values must lie in [0, {num_classes}), got values from {t.min()} to "
                         f"{t.max()}; raise num_classes or fix the indices")
    return Tensor((t[..., None] == np.arange(num_classes)).astype(np.int64))


def _axis(dim: int, ndim: int, who: str, shape: tuple) -> int:
    if not -ndim <= dim < ndim:
        raise ShapeError(f"{who}: dim={dim} is out of range for an input of shape {shape}; pass a dim in "
                         f"[{-ndim}, {ndim - 1}]" + (" (a 1-D input needs dim=0)" if ndim == 1 else ""))
    return dim % ndim


def _pnorm(x: Any, p: float, axis: int, keepdims: bool) -> Any:
    """The p-norm along ``axis`` with derivative 0 at the zero vector (as torch's ``linalg.vector_norm``)."""
    if p == float("inf"):
        return ops.amax(ops.abs(x), axis=axis, keepdims=keepdims)
    if p <= 0:
        raise ValueError(f"norm: p must be positive, got p={p}")
    s = ops.sum(x * x if p == 2 else ops.power(ops.abs(x), float(p)), axis=axis, keepdims=keepdims)
    nonzero = s > 0
    safe = ops.where(nonzero, s, 1.0)
    return ops.where(nonzero, ops.sqrt(safe) if p == 2 else ops.power(safe, 1.0 / p), 0.0)


def _clamp_min(x: Any, low: float) -> Any:
    # PyTorch's clamp_min passes the gradient where x >= low
    return ops.where(x >= low, x, low)


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Any:
    """``x / max(||x||_p, eps)`` along ``dim``, as ``torch.nn.functional.normalize``.

    >>> import chainrule as cr
    >>> cr.nn.functional.normalize(cr.tensor([[3.0, 4.0]]))
    tensor([[0.6, 0.8]])
    """
    shape = _shape(input)
    axis = _axis(dim, max(len(shape), 1), "normalize", shape)
    return input / _clamp_min(_pnorm(input, p, axis, True), eps)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """``<x1, x2> / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim``, after broadcasting, as torch.

    >>> import chainrule as cr
    >>> cr.nn.functional.cosine_similarity(cr.tensor([[1.0, 0.0]]), cr.tensor([[1.0, 1.0]])).round(4)
    tensor([0.7071])
    """
    s1, s2 = _shape(x1), _shape(x2)
    try:
        shape = np.broadcast_shapes(s1, s2)
    except ValueError:
        raise ShapeError(f"cosine_similarity: x1 of shape {s1} and x2 of shape {s2} do not broadcast; make "
                         f"them the same shape") from None
    axis = _axis(dim, max(len(shape), 1), "cosine_similarity", shape)
    if s1 != shape:
        x1 = ops.broadcast_to(x1, shape)
    if s2 != shape:
        x2 = ops.broadcast_to(x2, shape)
    n1 = _clamp_min(_pnorm(x1, 2, axis, False), eps)
    n2 = _clamp_min(_pnorm(x2, 2, axis, False), eps)
    return ops.sum(x1 * x2, axis=axis) / (n1 * n2)


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Any:
    """``||x1 - x2 + eps||_p`` along the last axis, as ``torch.nn.functional.pairwise_distance``.

    >>> import chainrule as cr
    >>> cr.nn.functional.pairwise_distance(cr.tensor([[3.0, 0.0]]), cr.tensor([[0.0, 4.0]]), eps=0.0)
    tensor([5.])
    """
    s1, s2 = _shape(x1), _shape(x2)
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        raise ShapeError(f"pairwise_distance: x1 of shape {s1} and x2 of shape {s2} do not broadcast; make "
                         f"them the same shape") from None
    d = x1 - x2 + eps
    if not _shape(d):
        return ops.abs(d)
    return _pnorm(d, p, -1, keepdim)
