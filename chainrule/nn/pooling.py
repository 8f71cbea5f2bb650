"""Pooling layers over ``cr.nn.functional``'s pools, with torch.nn's arguments, attributes and reprs."""
from __future__ import annotations

from typing import Any

from chainrule.nn._common import _FunctionalLayer
from chainrule.nn.functional import pooling as F
from chainrule.nn.module import Module

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "MaxPool1d",
           "MaxPool2d", "MaxPool3d"]


def _single(v: Any) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class _MaxPoolNd(Module):
    fn = staticmethod(F.max_pool2d)

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Any) -> Any:
        return self.fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                       ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max pooling over (N, C, L) or (C, L) windows, as ``torch.nn.MaxPool1d`` (``F.max_pool1d``).

    >>> import chainrule as cr
    >>> cr.nn.MaxPool1d(2)(cr.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[3., 2.]])
    """

    fn = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Max pooling over (N, C, H, W) or (C, H, W) windows, as ``torch.nn.MaxPool2d``: stride defaults
    to the kernel size; ties give the whole gradient to the first maximum (``F.max_pool2d``).

    >>> import chainrule as cr
    >>> cr.nn.MaxPool2d(2)(cr.arange(16.0).reshape(1, 1, 4, 4))
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """

    fn = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """Max pooling over (N, C, D, H, W) or (C, D, H, W) windows, as ``torch.nn.MaxPool3d``.

    >>> import chainrule as cr
    >>> cr.nn.MaxPool3d(2)(cr.ones((1, 2, 4, 4, 4))).shape
    (1, 2, 2, 2, 2)
    """

    fn = staticmethod(F.max_pool3d)


class _AvgPoolNd(Module):
    fn = staticmethod(F.avg_pool2d)

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: Any = None) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Any) -> Any:
        return self.fn(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                       self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Average pooling over (N, C, L) or (C, L) windows, as ``torch.nn.AvgPool1d`` (no
    ``divisor_override``, as torch; its sizes kept as 1-tuples, as torch's).

    >>> import chainrule as cr
    >>> cr.nn.AvgPool1d(2)(cr.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[2., 1.]])
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(_single(kernel_size), _single(stride if stride is not None else kernel_size),
                         _single(padding), ceil_mode, count_include_pad)

    def forward(self, input: Any) -> Any:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """Average pooling over (N, C, H, W) or (C, H, W) windows, as ``torch.nn.AvgPool2d``
    (``count_include_pad``, ``ceil_mode``, ``divisor_override`` as ``F.avg_pool2d``).

    >>> import chainrule as cr
    >>> cr.nn.AvgPool2d(2)(cr.ones((1, 1, 4, 4))).shape
    (1, 1, 2, 2)
    """

    fn = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPoolNd):
    """Average pooling over (N, C, D, H, W) or (C, D, H, W) windows, as ``torch.nn.AvgPool3d``.

    >>> import chainrule as cr
    >>> cr.nn.AvgPool3d(2)(cr.ones((1, 2, 4, 4, 4))).shape
    (1, 2, 2, 2, 2)
    """

    fn = staticmethod(F.avg_pool3d)


class _AdaptivePool(_FunctionalLayer):
    fn = staticmethod(F.adaptive_avg_pool2d)

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size=output_size)


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average over ``output_size`` bins of (N, C, L) or (C, L) input, as ``torch.nn.AdaptiveAvgPool1d``.

    >>> import chainrule as cr
    >>> cr.nn.AdaptiveAvgPool1d(1)(cr.tensor([[1.0, 3.0, 2.0]]))
    tensor([[2.]])
    """

    fn = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average over ``output_size`` bins per axis, as ``torch.nn.AdaptiveAvgPool2d`` (``None`` keeps an
    axis); ``AdaptiveAvgPool2d(1)`` is global average pooling.

    >>> import chainrule as cr
    >>> cr.nn.AdaptiveAvgPool2d(1)(cr.ones((2, 8, 5, 5))).shape
    (2, 8, 1, 1)
    """

    fn = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average over ``output_size`` bins per axis, as ``torch.nn.AdaptiveAvgPool3d``.

    >>> import chainrule as cr
    >>> cr.nn.AdaptiveAvgPool3d((1, 2, 2))(cr.ones((1, 3, 4, 4))).shape
    (1, 1, 2, 2)
    """

    fn = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input: Any) -> Any:
        return self.fn(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Max over ``output_size`` bins of (N, C, L) or (C, L) input, as ``torch.nn.AdaptiveMaxPool1d``.

    >>> import chainrule as cr
    >>> cr.nn.AdaptiveMaxPool1d(1)(cr.tensor([[1.0, 3.0, 2.0]]))
    tensor([[3.]])
    """

    fn = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Max over ``output_size`` bins per axis, as ``torch.nn.AdaptiveMaxPool2d`` (``return_indices``:
    flat per-plane int64 indices).

    >>> import chainrule as cr
    >>> cr.nn.AdaptiveMaxPool2d((2, 1))(cr.arange(12.0).reshape(1, 3, 4))
    tensor([[[ 7.],
             [11.]]])
    """

    fn = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """Max over ``output_size`` bins per axis, as ``torch.nn.AdaptiveMaxPool3d``.

    >>> import chainrule as cr
    >>> cr.nn.AdaptiveMaxPool3d(1)(cr.ones((1, 2, 3, 4, 5))).shape
    (1, 2, 1, 1, 1)
    """

    fn = staticmethod(F.adaptive_max_pool3d)
