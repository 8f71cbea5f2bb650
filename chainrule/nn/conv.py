"""Convolution layers over ``cr.nn.functional``'s convolutions; PyTorch's initialisation."""
from __future__ import annotations

import math
from typing import Any

from chainrule.nn import functional as F
from chainrule.nn.functional.pooling import _pair
from chainrule.nn.layers import _uniform_param
from chainrule.nn.module import Module

__all__ = ["Conv2d"]


class Conv2d(Module):
    """2-D convolution over (N, C, H, W) input (im2col + matmul); PyTorch's default initialisation.

    >>> import chainrule as cr
    >>> cr.nn.Conv2d(1, 4, 3, padding=1)(cr.ones((2, 1, 8, 8))).shape
    (2, 4, 8, 8)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, bias: bool = True, dtype: Any = None, generator: Any = None) -> None:
        super().__init__()
        kh, kw = _pair(kernel_size)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = (kh, kw), _pair(stride), _pair(padding)
        bound = 1.0 / math.sqrt(in_channels * kh * kw)
        self.weight = _uniform_param((out_channels, in_channels, kh, kw), bound, dtype, generator)
        self.bias = _uniform_param((out_channels,), bound, dtype, generator) if bias else None

    def forward(self, x: Any) -> Any:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")
