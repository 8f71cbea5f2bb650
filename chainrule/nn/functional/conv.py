"""Convolutions, as ``torch.nn.functional``'s."""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.nn.functional.pooling import _pair, _patches
from chainrule.numpy import raw

__all__ = ["conv2d"]


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
