"""Pooling: max and average over windows (a strided slice per kernel offset, stacked).

Composites of chainrule ops, so they differentiate to any order in both modes.
"""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating
from chainrule.core.errors import ShapeError
from chainrule.numpy import raw

__all__ = ["avg_pool2d", "max_pool2d"]


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


def _lowest(dtype: Any) -> Any:
    """The value no element can be below: -inf for floats, the minimum of an integer dtype."""
    if is_floating(dtype):
        return -np.inf
    return False if dtype.kind == "b" else np.iinfo(dtype).min


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max over each window (padding never wins: -inf, or an integer dtype's minimum). Ties share the
    gradient equally.

    >>> import chainrule as cr, numpy as np
    >>> cr.nn.functional.max_pool2d(cr.tensor(np.array([[[[1, 2], [3, 4]]]])), 2, stride=1, padding=1)
    tensor([[[[1, 2, 2],
              [3, 4, 4],
              [3, 4, 4]]]])
    """
    kernel = _pair(kernel_size)
    p = _patches(x, kernel, _pair(stride if stride is not None else kernel_size), _pair(padding),
                 "max_pool2d", fill=_lowest(np.asarray(raw(x)).dtype))
    return ops.amax(p, axis=2)


def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Mean over each window (zero padding is counted, as PyTorch's default).

    >>> import chainrule as cr
    >>> cr.nn.functional.avg_pool2d(cr.tensor([[[[1.0, 2.0], [3.0, 6.0]]]]), 2)
    tensor([[[[3.]]]])
    """
    kernel = _pair(kernel_size)
    p = _patches(x, kernel, _pair(stride if stride is not None else kernel_size), _pair(padding),
                 "avg_pool2d")
    return ops.mean(p, axis=2)
