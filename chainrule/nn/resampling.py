"""Resampling layers over ``cr.nn.functional``'s: Upsample, Unfold/Fold, PixelShuffle/PixelUnshuffle,
with torch.nn's arguments, attributes and reprs."""
from __future__ import annotations

from typing import Any

from chainrule.nn._common import _FunctionalLayer
from chainrule.nn.functional import resampling as F
from chainrule.nn.module import Module

__all__ = ["Fold", "PixelShuffle", "PixelUnshuffle", "Unfold", "Upsample", "UpsamplingBilinear2d",
           "UpsamplingNearest2d"]


class Upsample(Module):
    """Resize by ``size`` or ``scale_factor``, as ``torch.nn.Upsample`` (``F.interpolate``'s modes).

    >>> import chainrule as cr
    >>> cr.nn.Upsample(scale_factor=2, mode="bilinear")(cr.ones((1, 3, 4, 5))).shape
    (1, 3, 8, 10)
    """

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: Any = None, recompute_scale_factor: Any = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input: Any) -> Any:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(mode='nearest')`` for (N, C, H, W), as ``torch.nn.UpsamplingNearest2d``.

    >>> import chainrule as cr
    >>> cr.nn.UpsamplingNearest2d(scale_factor=2)(cr.tensor([[[[1.0, 2.0]]]]))
    tensor([[[[1., 1., 2., 2.],
              [1., 1., 2., 2.]]]])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(mode='bilinear', align_corners=True)``, as ``torch.nn.UpsamplingBilinear2d``.

    >>> import chainrule as cr
    >>> cr.nn.UpsamplingBilinear2d(size=(1, 3))(cr.tensor([[[[0.0, 4.0]]]]))
    tensor([[[[0., 2., 4.]]]])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Unfold(_FunctionalLayer):
    """Sliding blocks as columns, (N, C, H, W) -> (N, C * kh * kw, L), as ``torch.nn.Unfold``.

    >>> import chainrule as cr
    >>> cr.nn.Unfold(kernel_size=3, padding=1)(cr.ones((2, 4, 5, 5))).shape
    (2, 36, 25)
    """

    fn = staticmethod(F.unfold)

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> None:
        super().__init__(kernel_size=kernel_size, dilation=dilation, padding=padding, stride=stride)


class Fold(_FunctionalLayer):
    """Columns back into an image, summing overlaps, (N, C * kh * kw, L) -> (N, C, *output_size), as
    ``torch.nn.Fold``.

    >>> import chainrule as cr
    >>> cr.nn.Fold(output_size=(4, 5), kernel_size=2)(cr.ones((1, 8, 12))).shape
    (1, 2, 4, 5)
    """

    fn = staticmethod(F.fold)

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__(output_size=output_size, kernel_size=kernel_size, dilation=dilation, padding=padding,
                         stride=stride)


class PixelShuffle(_FunctionalLayer):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r), as ``torch.nn.PixelShuffle``.

    >>> import chainrule as cr
    >>> cr.nn.PixelShuffle(3)(cr.ones((1, 9, 4, 4))).shape
    (1, 1, 12, 12)
    """

    fn = staticmethod(F.pixel_shuffle)

    def __init__(self, upscale_factor: int) -> None:
        super().__init__(upscale_factor=upscale_factor)


class PixelUnshuffle(_FunctionalLayer):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), as ``torch.nn.PixelUnshuffle``.

    >>> import chainrule as cr
    >>> cr.nn.PixelUnshuffle(3)(cr.ones((1, 1, 12, 12))).shape
    (1, 9, 4, 4)
    """

    fn = staticmethod(F.pixel_unshuffle)

    def __init__(self, downscale_factor: int) -> None:
        super().__init__(downscale_factor=downscale_factor)
