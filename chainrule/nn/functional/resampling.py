"""Resampling, as ``torch.nn.functional``'s: ``interpolate`` (nearest, nearest-exact, linear,
bilinear, trilinear, bicubic, area), ``unfold``/``fold`` (im2col and its transpose) and pixel
(un)shuffle.

Composites of chainrule ops, so they differentiate to any order in both modes. ``interpolate`` is
separable: one axis at a time (the last first, as torch's kernels nest), each output a fixed
combination of gathered inputs with torch's source indices and weights (computed in float64 for
float64 input, float32 otherwise, as torch's ``opmath``). ``unfold`` is one gather and ``fold`` one
scatter-add, the transpose of each other.
"""
from __future__ import annotations

import math
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.nn.functional.conv import _ntuple
from chainrule.nn.functional.pooling import (
    _adaptive_avg_pool,
    _check_window,
    _floating,
    _in_planes,
    _take_axis,
    _take_planes,
)
from chainrule.numpy import raw

__all__ = ["fold", "interpolate", "pixel_shuffle", "pixel_unshuffle", "unfold"]

_MODES = {"nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "linear": (1,), "bilinear": (2,),
          "bicubic": (2,), "trilinear": (3,), "area": (1, 2, 3)}
_CUBIC_A = -0.75                                   # torch's (and OpenCV's) bicubic coefficient


# ----- interpolate: torch's sizes and scales -----
def _sizes_and_scales(shape: tuple, size: Any, scale_factor: Any, mode: str,
                      recompute_scale_factor: Any) -> tuple[tuple[int, ...], list]:
    """The output size and the scale each axis's index rule uses (None: in / out), as torch's
    ``interpolate``: a given ``scale_factor`` is used as such unless ``recompute_scale_factor``."""
    d, spatial = len(shape) - 2, shape[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size or scale_factor, got "
                         + ("both" if size is not None else "neither"))
    if size is not None and recompute_scale_factor:
        raise ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit size; "
                         "drop it or pass scale_factor instead")
    given = size if size is not None else scale_factor
    if np.ndim(given) and len(given) != d:
        name = "size" if size is not None else "scale_factor"
        raise ValueError(f"interpolate: input with spatial size {spatial} needs {name} with {d} values, got "
                         f"{given!r}; give the input as (N, C, d1, ..., dK) and one value per axis")
    if size is not None:
        out, scales = tuple(int(v) for v in (given if np.ndim(given) else (given,) * d)), [None] * d
    else:
        scales = [float(v) for v in (given if np.ndim(given) else (given,) * d)]
        out = tuple(math.floor(float(n) * sc) for n, sc in zip(spatial, scales))
        if recompute_scale_factor or mode == "area":
            scales = [None] * d
    if min(out) <= 0 or min(spatial) <= 0:
        raise ShapeError(f"interpolate: input and output sizes must be positive, got input {spatial} and output "
                         f"{out}; use a larger size or scale_factor")
    return out, scales


def _opmath(x: Any) -> Any:
    return np.float64 if raw(x).dtype == np.float64 else np.float32


def _scale(n_in: int, n_out: int, align_corners: bool, scale: Any, op: Any) -> Any:
    """torch's ``area_pixel_compute_scale``: input steps per output step."""
    if align_corners:
        return op(n_in - 1) / op(n_out - 1) if n_out > 1 else op(0)
    return op(1.0 / scale) if scale is not None and scale > 0 else op(n_in) / op(n_out)


def _source(n_in: int, n_out: int, align_corners: bool, scale: Any, op: Any, cubic: bool = False) -> Any:
    """torch's ``area_pixel_compute_source_index``: each output's real-valued input coordinate."""
    sc, i = _scale(n_in, n_out, align_corners, scale, op), np.arange(n_out).astype(op)
    if align_corners:
        return sc * i
    src = sc * (i + op(0.5)) - op(0.5)
    return src if cubic else np.maximum(src, op(0))


def _nearest(x: Any, axis: int, n_out: int, scale: Any, exact: bool, op: Any, legacy: bool) -> Any:
    """torch's nearest source index, ``floor(i * scale)`` ('nearest-exact': ``floor((i + 0.5) * scale)``),
    floored in float32 as torch's ``floorf``. ``legacy``: torch's ``nearest_idx`` (its 2-D kernel for
    small outputs): a float32 scale, and a copy or ``i >> 1`` when the size is kept or doubled."""
    n_in = tuple(np.shape(raw(x)))[axis]
    i = np.arange(n_out)
    if legacy:
        sc = _scale(n_in, n_out, False, scale, np.float32)
        if not exact and n_out in (n_in, 2 * n_in):
            index = i if n_out == n_in else i >> 1
        else:
            index = np.floor((((i + 0.5) * np.float64(sc)) if exact else i.astype(np.float32) * sc)
                             .astype(np.float32)).astype(np.int64)
    else:
        src = _source(n_in, n_out, False, scale, op) + op(0.5) if exact else \
            _scale(n_in, n_out, False, scale, op) * i.astype(op)
        index = np.floor(src.astype(np.float32)).astype(np.int64)
    index = np.minimum(index, n_in - 1)
    return _select(x, axis, index)


def _select(x: Any, axis: int, index: Any) -> Any:
    """``x`` indexed along ``axis`` by ``index``: a strided slice for an even step, each element
    repeated ``r`` times (an integer upscale: a stack, whose gradient is ``r`` slices) or a gather."""
    shape = tuple(np.shape(raw(x)))
    n_in, n_out = shape[axis], len(index)
    step = index[1] - index[0] if n_out > 1 else 1
    if index[0] == 0 and step >= 1 and (index == np.arange(n_out) * step).all():
        return x if step == 1 and n_out == n_in else \
            ops.getitem(x, (slice(None),) * axis + (slice(0, step * (n_out - 1) + 1, step),))
    r = n_out // n_in
    if n_out == r * n_in and (index == np.arange(n_out) // r).all():
        return ops.reshape(ops.stack([x] * r, axis=axis + 1), shape[:axis] + (n_out,) + shape[axis + 1:])
    return _take_axis(x, axis, index)


def _linear(x: Any, axis: int, n_out: int, align_corners: bool, scale: Any, op: Any) -> Any:
    n_in = tuple(np.shape(raw(x)))[axis]
    if n_out == n_in:                                  # torch copies this axis
        return x
    src = _source(n_in, n_out, align_corners, scale, op)
    i0 = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n_in - 1)
    lam1 = np.clip(src - i0.astype(op), 0, 1)
    i1 = i0 + (i0 < n_in - 1)
    return _combine(x, axis, [i0, i1], [op(1) - lam1, lam1])


def _cubic(x: Any, axis: int, n_out: int, align_corners: bool, scale: Any, op: Any) -> Any:
    n_in = tuple(np.shape(raw(x)))[axis]
    src = _source(n_in, n_out, align_corners, scale, op, cubic=True)
    i0 = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n_in - 1)
    t = np.clip(src - i0.astype(op), 0, 1)
    a = op(_CUBIC_A)

    def near(v: Any) -> Any:                           # |v| <= 1
        return ((a + 2) * v - (a + 3)) * v * v + 1

    def far(v: Any) -> Any:                            # 1 < |v| < 2
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a
    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    return _combine(x, axis, [np.clip(i0 - 1 + j, 0, n_in - 1) for j in range(4)], weights)


def _combine(x: Any, axis: int, indices: list, weights: list) -> Any:
    """``sum_j x[..., indices[j], ...] * weights[j]`` along ``axis``, in torch's order."""
    d = len(np.shape(raw(x))) - 2
    dtype = raw(x).dtype
    out = None
    for index, w in zip(indices, weights):
        term = _take_axis(x, axis, index) * w.astype(dtype).reshape((-1,) + (1,) * (d + 1 - axis))
        out = term if out is None else out + term
    return out


def interpolate(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: Any = None, recompute_scale_factor: Any = None, antialias: bool = False) -> Any:
    """Resize (N, C, *spatial) input, as ``torch.nn.functional.interpolate``: to ``size`` or by
    ``scale_factor`` (output ``floor(n * scale)``; the given scale then sets the index rule unless
    ``recompute_scale_factor=True``); modes 'nearest' (torch's ``floor(i * in / out)``),
    'nearest-exact', 'linear' (3-D input), 'bilinear' and 'bicubic' (4-D), 'trilinear' (5-D), with
    ``align_corners``, and 'area' (adaptive average pooling).

    >>> import chainrule as cr
    >>> x = cr.tensor([[[1.0, 2.0, 4.0]]])
    >>> cr.nn.functional.interpolate(x, scale_factor=2)
    tensor([[[1., 1., 2., 2., 4., 4.]]])
    >>> cr.nn.functional.interpolate(x, size=5, mode="linear", align_corners=True)
    tensor([[[1. , 1.5, 2. , 3. , 4. ]]])
    """
    shape = tuple(np.shape(raw(input)))
    if mode == "lanczos":
        raise NotImplementedError("interpolate: mode 'lanczos' (torch's antialiased Lanczos-3) is not "
                                  "implemented; use 'bicubic' or 'area'")
    if mode not in _MODES:
        raise ValueError(f"interpolate: unknown mode {mode!r}; use one of {', '.join(_MODES)}")
    d = len(shape) - 2
    if d not in _MODES[mode]:
        need = " or ".join(f"{k + 2}-D" for k in _MODES[mode])
        raise ShapeError(f"interpolate: mode {mode!r} needs {need} input (N, C, *spatial), got shape {shape}"
                         + ("; add the batch axis with x.reshape(1, *x.shape)" if d + 1 in _MODES[mode] else ""))
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError(f"interpolate: align_corners is for the modes linear, bilinear, bicubic and "
                             f"trilinear, not {mode!r}; leave it None")
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not implemented; smooth first (e.g. "
                                  "mode='area' when shrinking by an integer factor)")
    out, scales = _sizes_and_scales(shape, size, scale_factor, mode, recompute_scale_factor)
    if mode == "area":
        return _adaptive_avg_pool(input, d, out, "interpolate")
    if mode not in ("nearest", "nearest-exact"):
        _floating(input, "interpolate")
    op = _opmath(input)
    # torch's 2-D nearest kernel for outputs with H + W <= 128 indexes with its legacy rule
    legacy = d == 2 and out[0] + out[1] <= 128
    x = input
    for j in reversed(range(d)):                       # the last axis first, as torch's kernels nest
        axis = 2 + j
        if mode in ("nearest", "nearest-exact"):
            x = _nearest(x, axis, out[j], scales[j], mode == "nearest-exact", op, legacy)
        elif mode == "bicubic":
            x = _cubic(x, axis, out[j], align_corners, scales[j], op)
        else:
            x = _linear(x, axis, out[j], align_corners, scales[j], op)
    return x


# ----- unfold / fold: torch's (N, C * prod(kernel), L) layout -----
def _blocks(sizes: tuple, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple,
            who: str) -> tuple[tuple[int, ...], Any]:
    """The grid of sliding blocks and each block element's flat index in the padded plane, (K, L)."""
    _check_window(who, padding, kernel_size=kernel, dilation=dilation, stride=stride)
    padded = tuple(n + 2 * p for n, p in zip(sizes, padding))
    blocks = tuple((n - dl * (k - 1) - 1) // s + 1 for n, k, dl, s in zip(padded, kernel, dilation, stride))
    if min(blocks) < 1:
        raise ShapeError(f"{who}: spatial size {sizes} with kernel_size={kernel}, dilation={dilation}, "
                         f"padding={padding}, stride={stride} gives {blocks} sliding blocks, and each must be "
                         f"at least one; use a smaller kernel or dilation, or more padding")
    (kh, kw), (dh, dw), (sh, sw), (bh, bw) = kernel, dilation, stride, blocks
    rows = (np.arange(kh)[:, None, None, None] * dh + np.arange(bh)[None, None, :, None] * sh)
    cols = (np.arange(kw)[None, :, None, None] * dw + np.arange(bw)[None, None, None, :] * sw)
    return blocks, (rows * padded[1] + cols).reshape(kh * kw, bh * bw)


def _unfold_args(kernel_size: Any, dilation: Any, padding: Any, stride: Any, who: str) -> tuple:
    return tuple(_ntuple(v, 2, who, name) for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                          (padding, "padding"), (stride, "stride")))


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Any:
    """Sliding blocks of (N, C, H, W) (or (C, H, W)) input as columns, as
    ``torch.nn.functional.unfold``: (N, C * kh * kw, L), channel-major, blocks in row-major order;
    zero padding. One gather (its gradient sums overlaps).

    >>> import chainrule as cr
    >>> cr.nn.functional.unfold(cr.arange(9.0).reshape(1, 1, 3, 3), 2)
    tensor([[[0., 1., 3., 4.],
             [1., 2., 4., 5.],
             [3., 4., 6., 7.],
             [4., 5., 7., 8.]]])
    """
    shape = tuple(np.shape(raw(input)))
    if len(shape) not in (3, 4):
        raise ShapeError(f"unfold: expected input of shape (N, C, H, W) or (C, H, W), got {shape}; unfold "
                         f"works on 2-D images (for one axis use Tensor slicing or cr.lib.stride_tricks)")
    x = ops.reshape(input, (1,) + shape) if len(shape) == 3 else input
    n, c, h, w = tuple(np.shape(raw(x)))
    k, dl, p, s = _unfold_args(kernel_size, dilation, padding, stride, "unfold")
    _, index = _blocks((h, w), k, dl, p, s, "unfold")
    if any(p):
        x = ops.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    cols = ops.reshape(_take_planes(x, index), (n, c * index.shape[0], index.shape[1]))
    return ops.reshape(cols, tuple(np.shape(raw(cols)))[1:]) if len(shape) == 3 else cols


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Any:
    """Columns back into an image, summing where blocks overlap, as ``torch.nn.functional.fold``:
    (N, C * kh * kw, L) (or unbatched) -> (N, C, *output_size); the transpose of ``unfold``, one
    scatter-add.

    >>> import chainrule as cr
    >>> x = cr.ones((1, 1, 3, 3))
    >>> cr.nn.functional.fold(cr.nn.functional.unfold(x, 2), (3, 3), 2)   # how many blocks cover each pixel
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    shape = tuple(np.shape(raw(input)))
    if len(shape) not in (2, 3):
        raise ShapeError(f"fold: expected input of shape (N, C * kh * kw, L) or (C * kh * kw, L), got {shape}")
    cols = ops.reshape(input, (1,) + shape) if len(shape) == 2 else input
    n, ck, length = tuple(np.shape(raw(cols)))
    out = _ntuple(output_size, 2, "fold", "output_size")
    k, dl, p, s = _unfold_args(kernel_size, dilation, padding, stride, "fold")
    blocks, index = _blocks(out, k, dl, p, s, "fold")
    if ck % index.shape[0]:
        raise ShapeError(f"fold: input's dimension 1 ({ck}) must be divisible by the product of kernel_size "
                         f"{k} ({index.shape[0]}); it holds C * kh * kw values per block")
    if length != index.shape[1]:
        raise ShapeError(f"fold: output_size={out}, kernel_size={k}, dilation={dl}, padding={p}, stride={s} give "
                         f"{blocks[0]} * {blocks[1]} = {index.shape[1]} sliding blocks, but the input has "
                         f"{length} (its dimension 2); match output_size to the unfolded image")
    c = ck // index.shape[0]
    padded = (out[0] + 2 * p[0], out[1] + 2 * p[1])
    flat = _in_planes(n * c, padded[0] * padded[1], index, index.ndim).ravel()
    img = ops.reshape(ops.scatter_add(ops.ravel(cols), flat, (n * c * padded[0] * padded[1],)), (n, c) + padded)
    if any(p):
        img = ops.getitem(img, (slice(None), slice(None), slice(p[0], p[0] + out[0]), slice(p[1], p[1] + out[1])))
    return ops.reshape(img, (c,) + out) if len(shape) == 2 else img


# ----- pixel shuffle -----
def _pixel(x: Any, r: int, up: bool, who: str) -> Any:
    shape = tuple(np.shape(raw(x)))
    if len(shape) < 3:
        raise ShapeError(f"{who}: expected input of shape (*, C, H, W), got {shape}")
    if int(r) < 1:
        raise ValueError(f"{who}: the factor must be a positive int, got {r}")
    lead, (c, h, w) = shape[:-3], shape[-3:]
    m = len(lead)
    if up:
        if c % (r * r):
            raise ShapeError(f"{who}: channels ({c}) must be divisible by upscale_factor ** 2 ({r * r})")
        y = ops.reshape(x, lead + (c // (r * r), r, r, h, w))
        y = ops.transpose(y, tuple(range(m)) + tuple(m + a for a in (0, 3, 1, 4, 2)))
        return ops.reshape(y, lead + (c // (r * r), h * r, w * r))
    if h % r or w % r:
        raise ShapeError(f"{who}: height and width ({h}, {w}) must be divisible by downscale_factor ({r})")
    y = ops.reshape(x, lead + (c, h // r, r, w // r, r))
    y = ops.transpose(y, tuple(range(m)) + tuple(m + a for a in (0, 2, 4, 1, 3)))
    return ops.reshape(y, lead + (c * r * r, h // r, w // r))


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r), as ``torch.nn.functional.pixel_shuffle``.

    >>> import chainrule as cr
    >>> cr.nn.functional.pixel_shuffle(cr.arange(4.0).reshape(4, 1, 1), 2)
    tensor([[[0., 1.],
             [2., 3.]]])
    """
    return _pixel(input, int(upscale_factor), True, "pixel_shuffle")


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), as ``torch.nn.functional.pixel_unshuffle``.

    >>> import chainrule as cr
    >>> cr.nn.functional.pixel_unshuffle(cr.arange(4.0).reshape(1, 2, 2), 2).shape
    (4, 1, 1)
    """
    return _pixel(input, int(downscale_factor), False, "pixel_unshuffle")
