"""Pooling layers over ``cr.nn.functional``'s pools."""
from __future__ import annotations

from typing import Any

from chainrule.nn import functional as F
from chainrule.nn.module import Module

__all__ = ["AvgPool2d", "MaxPool2d"]


class _Pool2d(Module):
    fn = staticmethod(F.max_pool2d)

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Any) -> Any:
        return self.fn(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    """Max pooling over (N, C, H, W) windows (stride defaults to the kernel size).

    >>> import chainrule as cr
    >>> cr.nn.MaxPool2d(2)(cr.arange(16.0).reshape(1, 1, 4, 4))
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """

    fn = staticmethod(F.max_pool2d)


class AvgPool2d(_Pool2d):
    """Average pooling over (N, C, H, W) windows (stride defaults to the kernel size).

    >>> import chainrule as cr
    >>> cr.nn.AvgPool2d(2)(cr.ones((1, 1, 4, 4))).shape
    (1, 1, 2, 2)
    """

    fn = staticmethod(F.avg_pool2d)
