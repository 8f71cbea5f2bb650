"""Convolution layers over ``cr.nn.functional``'s convolutions, as ``torch.nn``'s: ``Conv1d/2d/3d`` and
``ConvTranspose1d/2d/3d``, with PyTorch's arguments, weight layouts, initialisation and reprs."""
from __future__ import annotations

from typing import Any

from chainrule.nn import functional as F
from chainrule.nn import init
from chainrule.nn.functional.conv import (
    _PADDING_MODES,
    _conv_padding,
    _conv_transposend,
    _convnd,
    _ntuple,
    _output_padding,
)
from chainrule.nn.layers import _uniform_param
from chainrule.nn.module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class _ConvNd(Module):
    """The state shared by the convolutions: PyTorch's attributes, its kaiming-uniform(a=sqrt(5))
    initialisation (bound 1/sqrt(fan_in) for weight and bias) and its ``extra_repr``."""

    nd = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any, groups: int, bias: bool, padding_mode: str, output_padding: Any = 0,
                 dtype: Any = None, generator: Any = None) -> None:
        super().__init__()
        who, nd = type(self).__name__, self.nd
        if groups < 1 or in_channels % groups:
            raise ValueError(f"{who}: in_channels={in_channels} must be divisible by groups={groups}")
        if out_channels % groups:
            raise ValueError(f"{who}: out_channels={out_channels} must be divisible by groups={groups}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{who}: padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode={padding_mode!r}")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'{who}: only "zeros" padding mode is supported, got padding_mode={padding_mode!r}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        # as torch's: a 1-tuple stride/padding/dilation is for every axis, a 1-tuple kernel_size is refused
        self.kernel_size = _ntuple(kernel_size, nd, who, "kernel_size")
        self.stride = _ntuple(stride, nd, who, "stride", one_for_all=True)
        self.dilation = _ntuple(dilation, nd, who, "dilation", one_for_all=True)
        self.output_padding = _ntuple(output_padding, nd, who, "output_padding", one_for_all=True)
        self.padding_mode = padding_mode
        if isinstance(padding, str) and not self.transposed:
            _conv_padding(who, padding, self.kernel_size, self.stride, self.dilation)      # checked here
            self.padding = padding
        else:
            self.padding = _ntuple(padding, nd, who, "padding", one_for_all=True)
        shape = ((in_channels, out_channels // groups) if self.transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        bound = init._default_bound(shape)
        self.weight = _uniform_param(shape, bound, dtype, generator)
        self.bias = _uniform_param((out_channels,), bound, dtype, generator) if bias else None

    def extra_repr(self) -> str:
        nd = self.nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", dtype: Any = None, generator: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, dtype, generator)

    def forward(self, x: Any) -> Any:
        who = type(self).__name__
        if self.padding_mode == "zeros":
            return _convnd(who, self.nd, x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                           self.groups)
        pairs = _conv_padding(who, self.padding, self.kernel_size, self.stride, self.dilation)
        flat = tuple(p for pair in reversed(pairs) for p in pair)        # F.pad's order: last axis first
        return _convnd(who, self.nd, F.pad(x, flat, mode=self.padding_mode), self.weight, self.bias,
                       self.stride, 0, self.dilation, self.groups)


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", dtype: Any = None,
                 generator: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, dtype, generator)

    def forward(self, x: Any, output_size: Any = None) -> Any:
        who = type(self).__name__
        extra = self.output_padding
        if output_size is not None:
            extra = _output_padding(who, tuple(x.shape), output_size, self.stride, self.padding,
                                    self.kernel_size, self.dilation)
        return _conv_transposend(who, self.nd, x, self.weight, self.bias, self.stride, self.padding, extra,
                                 self.groups, self.dilation)


class Conv1d(_Conv):
    """1-D convolution over (N, C, L) or (C, L), as ``torch.nn.Conv1d``.

    >>> import chainrule as cr
    >>> cr.nn.Conv1d(2, 4, 3, padding="same")(cr.ones((5, 2, 7))).shape
    (5, 4, 7)
    """

    nd = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C, H, W) or (C, H, W), as ``torch.nn.Conv2d`` (im2col + matmul).

    >>> import chainrule as cr
    >>> cr.nn.Conv2d(1, 4, 3, padding=1)(cr.ones((2, 1, 8, 8))).shape
    (2, 4, 8, 8)
    """

    nd = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W), as ``torch.nn.Conv3d``.

    >>> import chainrule as cr
    >>> cr.nn.Conv3d(1, 2, 3, stride=2, padding=1)(cr.ones((1, 1, 4, 4, 4))).shape
    (1, 2, 2, 2, 2)
    """

    nd = 3


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution (weight (in, out/groups, k)), as ``torch.nn.ConvTranspose1d``;
    ``forward(x, output_size=...)`` picks the output padding.

    >>> import chainrule as cr
    >>> cr.nn.ConvTranspose1d(2, 3, 3, stride=2)(cr.ones((1, 2, 5)), output_size=(12,)).shape
    (1, 3, 12)
    """

    nd = 1


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution (weight (in, out/groups, kh, kw)), as ``torch.nn.ConvTranspose2d``.

    >>> import chainrule as cr
    >>> cr.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)(cr.ones((1, 4, 5, 5))).shape
    (1, 2, 10, 10)
    """

    nd = 2


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution (weight (in, out/groups, kd, kh, kw)), as ``torch.nn.ConvTranspose3d``.

    >>> import chainrule as cr
    >>> cr.nn.ConvTranspose3d(2, 2, 2, stride=2)(cr.ones((1, 2, 2, 2, 2))).shape
    (1, 2, 4, 4, 4)
    """

    nd = 3
