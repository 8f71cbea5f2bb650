"""Convolutions, as ``torch.nn.functional``'s: ``conv1d/2d/3d`` and ``conv_transpose1d/2d/3d``.

Each checks its arguments and runs one of the convolution primitives of ``chainrule.ops.conv`` (which
zero-pad themselves; closed under differentiation: exact to any order, in both modes and under
``cr.vmap``); the bias is one broadcast add.
"""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.numpy import raw
from chainrule.ops.conv import conv, conv_transpose

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v: Any, nd: int, who: str, what: str, one_for_all: bool = False) -> tuple:
    """An int or an ``nd``-sequence of ints as an ``nd``-tuple (PyTorch's ``_pair`` and kin); with
    ``one_for_all`` a 1-sequence too, the same for every axis (as torch's pools and ``F.conv*`` take it).

    >>> _ntuple((3,), 2, "max_pool2d", "kernel_size", one_for_all=True)
    (3, 3)
    """
    t = (v,) * nd if np.ndim(v) == 0 else tuple(v)
    if one_for_all and len(t) == 1:
        t = t * nd
    if len(t) != nd or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in t):
        raise ValueError(f"{who}: {what} must be an int or {nd} ints"
                         f"{' (or one int in a sequence, for every axis)' if one_for_all and nd > 1 else ''}, "
                         f"got {v!r}")
    return tuple(int(i) for i in t)


def _conv_padding(who: str, padding: Any, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """``padding`` (int, tuple, "valid" or "same") as one (before, after) pair per spatial axis.
    "same" pads ``dilation * (k - 1)`` in all, the odd one after (PyTorch's split)."""
    nd = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding != "same":
            raise ValueError(f"{who}: invalid padding string {padding!r}, should be one of 'valid', 'same' "
                             f"(or an int or {nd} ints)")
        if any(s != 1 for s in stride):
            raise ValueError(f"{who}: padding='same' is not supported for strided convolutions (stride "
                             f"{stride}); pass stride=1 or explicit padding")
        return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation))
    p = _ntuple(padding, nd, who, "padding", one_for_all=True)
    if min(p) < 0:
        raise ValueError(f"{who}: negative padding {p} is not supported; crop the input with "
                         f"cr.nn.functional.pad(x, (-1, -1, ...)) first")
    return tuple((i, i) for i in p)


def _prepare(who: str, nd: int, x: Any, weight: Any, stride: Any, dilation: Any, groups: int,
             transposed: bool) -> tuple:
    """The shapes checked against the weight's layout, (out, in/groups, *kernel), or (in, out/groups,
    *kernel) when ``transposed``; ``x`` with a batch axis (an unbatched ``(C, *S)`` input gets N=1), the
    input's and the weight's shapes, whether the input had none, stride and dilation as ``nd``-tuples,
    and ``groups`` as an int."""
    xs, ws = tuple(np.shape(raw(x))), tuple(np.shape(raw(weight)))
    if len(ws) != nd + 2:
        raise ShapeError(f"{who}: the weight must have {nd + 2} dimensions (out, in/groups, *kernel), got "
                         f"shape {ws}")
    if len(xs) not in (nd + 1, nd + 2):
        raise ShapeError(f"{who}: expected input of shape (N, C, {', '.join(('L', 'HW', 'DHW')[nd - 1])}) "
                         f"or unbatched (C, ...), got {xs}; add axes with x.reshape")
    unbatched = len(xs) == nd + 1
    if unbatched:
        x = ops.reshape(x, (1,) + xs)
    stride = _ntuple(stride, nd, who, "stride", one_for_all=True)
    dilation = _ntuple(dilation, nd, who, "dilation", one_for_all=True)
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{who}: stride {stride} and dilation {dilation} must be positive")
    groups = int(groups)
    channels = xs[-nd - 1]
    if transposed:
        if groups < 1 or ws[0] % groups:
            raise ValueError(f"{who}: groups={groups} must be positive and divide the weight's in channels "
                             f"{ws[0]} (weight {ws}, laid out (in, out/groups, *kernel))")
        if channels != ws[0]:
            raise ShapeError(f"{who}: weight of size {ws} (in, out/groups, *kernel) expects input {xs} to have "
                             f"{ws[0]} channels, but got {channels}; set in_channels={channels}")
    else:
        if groups < 1 or ws[0] % groups:
            raise ValueError(f"{who}: groups={groups} must be positive and divide the weight's out channels "
                             f"{ws[0]} (weight {ws})")
        if channels != ws[1] * groups:
            raise ShapeError(f"{who}: given groups={groups}, weight of size {ws} expects input {xs} to have "
                             f"{ws[1] * groups} channels, but got {channels}; set in_channels={channels} (or "
                             f"reshape the input)")
    return x, xs, ws, unbatched, stride, dilation, groups


def _spatial_positive(who: str, sizes: tuple, xs: tuple, extents: tuple, kernel: tuple) -> None:
    if any(s < e for s, e in zip(sizes, extents)):
        raise ShapeError(f"{who}: kernel {kernel} (dilated extent {extents}) is larger than the padded input "
                         f"{sizes} (input {xs}); use a smaller kernel or dilation, or more padding")


def _finish(who: str, out: Any, bias: Any, nd: int, unbatched: bool) -> Any:
    """``out`` plus the bias (one per output channel), without the batch axis again for an unbatched input."""
    if bias is not None:
        o = np.shape(raw(out))[1]
        if tuple(np.shape(raw(bias))) != (o,):
            raise ShapeError(f"{who}: bias must have shape ({o},) (one per output channel), got "
                             f"{tuple(np.shape(raw(bias)))}")
        out = out + ops.reshape(bias, (o,) + (1,) * nd)
    return ops.reshape(out, np.shape(raw(out))[1:]) if unbatched else out


def _convnd(who: str, nd: int, x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
            groups: int) -> Any:
    x, xs, ws, unbatched, stride, dilation, groups = _prepare(who, nd, x, weight, stride, dilation, groups,
                                                              transposed=False)
    kernel = ws[2:]
    pads = _conv_padding(who, padding, kernel, stride, dilation)
    extents = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    sizes = tuple(s + lo + hi for s, (lo, hi) in zip(xs[-nd:], pads))
    _spatial_positive(who, sizes, xs, extents, kernel)
    # the rows after the last window are never read: pad less after (or crop), so the primitive fits
    fit = tuple((s - e) // st * st + e for s, e, st in zip(sizes, extents, stride))
    pads = tuple((lo, hi - (s - f)) for (lo, hi), s, f in zip(pads, sizes, fit))
    return _finish(who, conv(x, weight, stride, dilation, groups, pads), bias, nd, unbatched)


def _conv_transposend(who: str, nd: int, x: Any, weight: Any, bias: Any, stride: Any, padding: Any,
                      output_padding: Any, groups: int, dilation: Any) -> Any:
    x, xs, ws, unbatched, stride, dilation, groups = _prepare(who, nd, x, weight, stride, dilation, groups,
                                                              transposed=True)
    kernel = ws[2:]
    if isinstance(padding, str):
        raise ValueError(f"{who}: padding must be an int or {nd} ints (no 'same' or 'valid' for transposed "
                         f"convolutions), got {padding!r}")
    pad = _ntuple(padding, nd, who, "padding", one_for_all=True)
    extra = _ntuple(output_padding, nd, who, "output_padding", one_for_all=True)
    if min(pad) < 0 or min(extra) < 0:
        raise ValueError(f"{who}: padding {pad} and output_padding {extra} must be non-negative")
    if any(e >= max(s, d) for e, s, d in zip(extra, stride, dilation)):
        raise ValueError(f"{who}: output_padding {extra} must be smaller than either stride {stride} or "
                         f"dilation {dilation} in each axis")
    full = tuple((p - 1) * s + d * (k - 1) + 1 for p, k, s, d in zip(xs[-nd:], kernel, stride, dilation))
    size = tuple(f - 2 * p + e for f, p, e in zip(full, pad, extra))
    if min(size) < 1:
        raise ShapeError(f"{who}: the output would have spatial size {size} (input {xs}, kernel {kernel}, "
                         f"stride {stride}, padding {pad}); use less padding")
    # the grid less padding before and after; output_padding extends it after (with zeros past its end)
    out = conv_transpose(x, weight, stride, dilation, groups, tuple((p, p - e) for p, e in zip(pad, extra)))
    return _finish(who, out, bias, nd, unbatched)


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """1-D cross-correlation of (N, C, L) (or unbatched (C, L)) with a weight (out, C/groups, k), as
    ``torch.nn.functional.conv1d``; ``padding`` an int, a tuple, "valid" or "same".

    >>> import chainrule as cr
    >>> cr.nn.functional.conv1d(cr.ones((1, 1, 4)), cr.ones((1, 1, 3)), padding="same")
    tensor([[[2., 3., 3., 2.]]])
    """
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """2-D cross-correlation of (N, C, H, W) (or unbatched (C, H, W)) with a weight (out, C/groups, kh,
    kw), as ``torch.nn.functional.conv2d``: im2col and one matmul per call.

    >>> import chainrule as cr
    >>> cr.nn.functional.conv2d(cr.ones((1, 1, 3, 3)), cr.ones((2, 1, 2, 2))).shape
    (1, 2, 2, 2)
    """
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """3-D cross-correlation of (N, C, D, H, W) (or unbatched) with a weight (out, C/groups, kd, kh, kw),
    as ``torch.nn.functional.conv3d``.

    >>> import chainrule as cr
    >>> cr.nn.functional.conv3d(cr.ones((1, 2, 3, 3, 3)), cr.ones((4, 2, 2, 2, 2)), stride=2).shape
    (1, 4, 1, 1, 1)
    """
    return _convnd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """1-D transposed convolution (the gradient of conv1d in its input) of (N, C_in, L) with a weight
    (C_in, C_out/groups, k), as ``torch.nn.functional.conv_transpose1d`` (note: groups before dilation).

    >>> import chainrule as cr
    >>> cr.nn.functional.conv_transpose1d(cr.ones((1, 1, 2)), cr.ones((1, 1, 2)), stride=2)
    tensor([[[1., 1., 1., 1.]]])
    """
    return _conv_transposend("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding,
                             groups, dilation)


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """2-D transposed convolution of (N, C_in, H, W) with a weight (C_in, C_out/groups, kh, kw), as
    ``torch.nn.functional.conv_transpose2d``.

    >>> import chainrule as cr
    >>> cr.nn.functional.conv_transpose2d(cr.ones((1, 3, 4, 4)), cr.ones((3, 2, 3, 3)), stride=2,
    ...                                   padding=1, output_padding=1).shape
    (1, 2, 8, 8)
    """
    return _conv_transposend("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding,
                             groups, dilation)


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """3-D transposed convolution of (N, C_in, D, H, W) with a weight (C_in, C_out/groups, kd, kh, kw),
    as ``torch.nn.functional.conv_transpose3d``.

    >>> import chainrule as cr
    >>> cr.nn.functional.conv_transpose3d(cr.ones((1, 2, 2, 2, 2)), cr.ones((2, 1, 2, 2, 2))).shape
    (1, 1, 3, 3, 3)
    """
    return _conv_transposend("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding,
                             groups, dilation)


def _output_padding(who: str, input_shape: tuple, output_size: Any, stride: tuple, padding: tuple,
                              kernel: tuple, dilation: tuple) -> tuple:
    """The ``output_padding`` that makes a transposed convolution's output ``output_size`` (its spatial
    part, or the whole (N, C, ...) shape), as ``ConvTranspose*d.forward(x, output_size=...)``."""
    nd = len(kernel)
    size = tuple(int(s) for s in output_size)
    if len(size) == nd + 2 or (len(size) == nd + 1 and len(input_shape) == nd + 1):
        size = size[-nd:]
    if len(size) != nd:
        raise ValueError(f"{who}: output_size must have {nd} or {nd + 2} elements, got {output_size!r}")
    lows = tuple((n - 1) * s - 2 * p + d * (k - 1) + 1
                 for n, s, p, k, d in zip(input_shape[-nd:], stride, padding, kernel, dilation))
    for want, low, s in zip(size, lows, stride):
        if not low <= want < low + s:
            raise ValueError(f"{who}: requested an output size of {size}, but valid sizes range from {lows} "
                             f"to {tuple(lo + st - 1 for lo, st in zip(lows, stride))} (for an input of "
                             f"{tuple(input_shape)})")
    return tuple(want - low for want, low in zip(size, lows))

