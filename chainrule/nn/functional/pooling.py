"""Pooling, as ``torch.nn.functional``'s: max, average and adaptive pools over 1-, 2- and 3-D windows.

Composites of chainrule ops, so they differentiate to any order in both modes. A max pool finds each
window's maximum in NumPy with torch's rule (the first in row-major order; a NaN wins) and gathers it
from the input: one gather forward, one scatter-add backward, and the whole gradient goes to that
element, as torch's. An average pool sums windows one axis at a time (strided slices; a reshape and one
sum for long tiling windows) and divides by torch's divisor.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating
from chainrule.core.batched import batch_chain, physical, rebatch
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor
from chainrule.nn.functional.conv import _ntuple
from chainrule.numpy import raw

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "max_pool1d", "max_pool2d", "max_pool3d"]

_LAYOUT = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


# ----- arguments and shapes -----
def _batched(x: Any, d: int, who: str) -> tuple[Any, bool]:
    """``x`` with its batch axis (an unbatched ``(C, *spatial)`` input gets N=1) and whether it had none."""
    shape = tuple(np.shape(raw(x)))
    if len(shape) == d + 1:
        return ops.reshape(x, (1,) + shape), True
    if len(shape) != d + 2:
        unbatched = _LAYOUT[d].replace("N, ", "")
        raise ShapeError(f"{who}: expected input of shape {_LAYOUT[d]} or {unbatched} (unbatched), got "
                         f"{shape}; add the missing axes with x.reshape(...) (a single channel: C=1)")
    return x, False


def _unbatch(y: Any, unbatched: bool) -> Any:
    return ops.reshape(y, tuple(np.shape(raw(y)))[1:]) if unbatched else y


def _floating(x: Any, who: str) -> None:
    dtype = raw(x).dtype
    if not is_floating(dtype):
        raise DTypeError(f"{who}: expected a floating-point input, got {dtype}; cast it first, e.g. "
                         f"x.astype(cr.float32)")


def _out_len(n: int, k: int, s: int, p: int, dil: int, ceil_mode: bool) -> int:
    """torch's ``pooling_output_shape``: in ceil mode the last window must start inside the input or
    the left padding."""
    out = (n + 2 * p - dil * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_args(d: int, who: str, kernel_size: Any, stride: Any, padding: Any, dilation: Any) -> tuple:
    """Kernel, stride (the kernel's when None or empty), padding and dilation as ``d``-tuples: an int or
    a 1-sequence is the same for every axis, as torch's pools take them."""
    stride = stride if stride is not None and np.size(stride) else kernel_size
    return tuple(_ntuple(v, d, who, what, one_for_all=True) for v, what in
                 ((kernel_size, "kernel_size"), (stride, "stride"), (padding, "padding"), (dilation, "dilation")))


def _check_window(who: str, padding: tuple, **positive: tuple) -> None:
    """Each of ``positive`` (kernel_size, stride, dilation: per-axis tuples) positive, ``padding`` not negative."""
    for name, v in positive.items():
        if min(v) <= 0:
            raise ValueError(f"{who}: {name} must be positive, got {v}")
    if min(padding) < 0:
        raise ValueError(f"{who}: padding must be non-negative, got {padding}")


def _geometry(sizes: tuple, k: tuple, s: tuple, p: tuple, dil: tuple, ceil_mode: bool,
              who: str) -> tuple[int, ...]:
    _check_window(who, p, kernel_size=k, stride=s, dilation=dil)
    if any(pj > kj // 2 for pj, kj in zip(p, k)):
        raise ValueError(f"{who}: padding should be at most half of kernel size (as torch), got padding={p} "
                         f"and kernel_size={k}; use padding <= kernel_size // 2, or pad the input with "
                         f"cr.pad first")
    out = tuple(_out_len(*a, ceil_mode) for a in zip(sizes, k, s, p, dil))
    if min(out) < 1:
        raise ShapeError(f"{who}: input of spatial size {sizes} is too small for kernel_size={k}, "
                         f"dilation={dil}, padding={p}: the output would be {out}; use a smaller kernel "
                         f"or more padding")
    return out


def _grid(arrays: Any, op: Any = np.add) -> Any:
    """Per-axis 1-D arrays combined over their outer grid (``op``: add for flat indices, multiply for
    divisors, logical_or for masks)."""
    total = None
    for j, a in enumerate(arrays):
        a = np.asarray(a).reshape((1,) * j + (-1,) + (1,) * (len(arrays) - j - 1))
        total = a if total is None else op(total, a)
    return total


def _right_pad(n: int, k: int, s: int, p: int, dil: int, out: int) -> int:
    """Padding after the input so the last of ``out`` windows fits (ceil mode may need more than p)."""
    return max(0, (out - 1) * s + dil * (k - 1) + 1 - n - p)


# ----- gathers within planes: one getitem on the flattened input -----
def _take_planes(x: Any, index: Any, per_plane: bool = False) -> Any:
    """``out[n, c, ...] = x[n, c].ravel()[index[...]]`` for ``x`` of shape (N, C, *spatial): ``index``
    is the same in every plane, or (``per_plane``) of shape (N, C, ...), or inside ``cr.vmap`` a batched
    per-plane index (one per example). One gather forward, one 1-D scatter-add backward (a gather
    along an axis scatters ten times slower)."""
    shape = tuple(np.shape(raw(x)))
    nc, size = shape[0] * shape[1], math.prod(shape[2:])
    if isinstance(index, Tensor):
        chain = batch_chain(index)
        phys = np.asarray(raw(physical(index)))
        lead, rest = phys.shape[:len(chain)], phys.shape[len(chain) + 2:]
        flat = _in_planes(nc, size, phys.reshape(lead + (nc,) + rest), len(rest))
        flat = rebatch(flat.reshape(lead + (-1,)), chain)
    else:
        rest = index.shape[2:] if per_plane else index.shape
        flat = _flat_planes(index, nc, size, per_plane)
        if STATE.recorder is not None:      # cr.compile: the planes' offsets are a kernel of the index
            STATE.recorder.on_kernel(_flat_planes, (index,), {"nc": nc, "size": size, "per_plane": per_plane},
                                     flat)
    return ops.reshape(ops.getitem(ops.ravel(x), flat), shape[:2] + rest)


def _flat_planes(index: Any, nc: int, size: int, per_plane: bool) -> Any:
    rest = index.shape[2:] if per_plane else index.shape
    return _in_planes(nc, size, index.reshape((nc,) + rest) if per_plane else index, len(rest)).ravel()


def _in_planes(nc: int, size: int, index: Any, rest: int) -> Any:
    """Indices into ``nc`` stacked planes of ``size`` elements: ``index`` (the same in every plane, or
    with an axis of ``nc`` before its last ``rest`` axes) plus each plane's start."""
    return (np.arange(nc) * size).reshape((nc,) + (1,) * rest) + index


# ----- max: torch's first maximum, found in NumPy, then gathered -----
def _lowest(dtype: Any) -> Any:
    """The value no element can be below: -inf for floats, the minimum of an integer dtype."""
    if is_floating(dtype):
        return -np.inf
    return False if dtype.kind == "b" else np.iinfo(dtype).min


def _first_max(candidates: Iterable[tuple[Any, Any]], init: Any) -> Any:
    """The index of the first maximum over ``candidates`` (``(values, their indices)`` in scan order):
    torch's loop ``if (v > best || isnan(v))`` from ``best`` = the dtype's lowest and ``init``, so a
    tie keeps the first, a NaN wins (the last one) and padding (the lowest value) never does."""
    cands = list(candidates)
    top = cands[0][0].copy()
    for v, _ in cands[1:]:
        np.maximum(top, v, out=top)
    low = _lowest(top.dtype)
    if (top == low).any() or (is_floating(top.dtype) and np.isnan(top).any()):
        return _scan(cands, init)                       # the rare cases, by torch's loop itself
    # the first candidate equal to the maximum: which = min over t of (t if equal else K), in integer
    # arithmetic (a masked copy branches on the mask, several times slower on ties' random patterns)
    kind = np.int32 if len(cands) > 127 else np.int8
    which = np.full(top.shape, len(cands) - 1, dtype=kind)
    for t in range(len(cands) - 1):
        hit = (cands[t][0] == top).view(np.int8).astype(kind, copy=False)
        hit *= kind(t - len(cands) + 1)
        np.minimum(which, hit + kind(len(cands) - 1), out=which)
    table = np.stack([np.broadcast_to(w, np.shape(init)) for _, w in cands]).reshape(len(cands), -1)
    flat = which.reshape(-1, table.shape[1])
    return table[flat, np.arange(table.shape[1])].reshape(top.shape)


def _scan(cands: list, init: Any) -> Any:
    best = np.full(cands[0][0].shape, _lowest(cands[0][0].dtype), cands[0][0].dtype)
    idx = np.array(np.broadcast_to(init, best.shape), dtype=np.int64)
    for v, where in cands:
        upd = v > best
        if is_floating(v.dtype):
            upd |= np.isnan(v)
        np.copyto(best, v, where=upd)
        np.copyto(idx, where, where=upd)
    return idx


def _physical_values(x: Any) -> tuple[Any, tuple]:
    """The array behind ``x`` (inside ``cr.vmap``: every level's batch axis leading) and its vmap chain."""
    if isinstance(x, Tensor) and x._level:
        return np.asarray(raw(physical(x))), batch_chain(x)
    return np.asarray(raw(x)), ()


def _gather_max(x: Any, index: Any, chain: tuple) -> tuple[Any, Any]:
    """The maxima at per-plane ``index`` (batched inside ``cr.vmap``), and the indices as a tensor."""
    index_t = rebatch(Tensor(index), chain) if chain else Tensor(index)
    return _take_planes(x, index_t if chain else index, per_plane=True), index_t


def _has_nan(v: Any) -> bool:
    return is_floating(v.dtype) and bool(np.isnan(v).any())


def _tiled_max_index(v: Any, k: tuple, out: tuple) -> Any:
    """``_window_max_index`` for large windows that tile the input, without padding or NaN: NumPy's
    argmax over each window's copy (its first maximum is torch's), not one pass per window element."""
    d, lead = len(k), v.shape[:-len(k)]
    crop = v[(Ellipsis,) + tuple(slice(0, o * kj) for o, kj in zip(out, k))]
    split = crop.reshape(lead + tuple(x for o, kj in zip(out, k) for x in (o, kj)))
    m = len(lead)
    windows = split.transpose(tuple(range(m)) + tuple(m + 2 * j for j in range(d))
                              + tuple(m + 2 * j + 1 for j in range(d))).reshape(lead + out + (-1,))
    t = np.unravel_index(windows.argmax(axis=-1), k)           # the offset within the window, per axis
    strides = [math.prod(v.shape[-d:][j + 1:]) for j in range(d)]
    starts = _grid([np.arange(o) * kj * sj for o, kj, sj in zip(out, k, strides)])
    return starts + sum(tj * sj for tj, sj in zip(t, strides))


def _window_max_index(v: Any, k: tuple, s: tuple, p: tuple, dil: tuple, out: tuple) -> tuple[Any, Any]:
    """Per-plane flat indices (shape ``v.shape[:-d] + out``) of each window's first maximum, and the
    windows with no element inside the input (dilation with padding: torch reads outside the input
    there; ours are -inf with no gradient, indexed at the nearest element)."""
    d, sizes = len(k), v.shape[-len(k):]
    if k == s and not any(p) and set(dil) == {1} and math.prod(k) >= 16 and not _has_nan(v):
        return _tiled_max_index(v, k, out), np.zeros(out, dtype=bool)
    pads = [(0, 0)] * (v.ndim - d) + [(pj, _right_pad(*a)) for pj, a in zip(p, zip(sizes, k, s, p, dil, out))]
    vp = np.pad(v, pads, constant_values=_lowest(v.dtype)) if any(map(any, pads)) else v
    strides = [math.prod(sizes[j + 1:]) for j in range(d)]
    starts = [np.arange(o) * sj - pj for o, sj, pj in zip(out, s, p)]
    # torch starts each window at its first position >= 0 (the while loop over the dilation)
    first = [st + dj * np.maximum(0, -(st // dj)) for st, dj in zip(starts, dil)]
    empty = _grid([f >= n for f, n in zip(first, sizes)], np.logical_or)
    init = _grid([np.minimum(f, n - 1) * sj for f, n, sj in zip(first, sizes, strides)])

    def candidates() -> Iterator[tuple[Any, Any]]:
        for t in itertools.product(*(range(kj) for kj in k)):
            view = vp[(Ellipsis,) + tuple(slice(tj * dj, tj * dj + sj * (o - 1) + 1, sj)
                                          for tj, dj, sj, o in zip(t, dil, s, out))]
            yield view, _grid([(st + tj * dj) * sj for st, tj, dj, sj in zip(starts, t, dil, strides)])
    return _first_max(candidates(), init), empty


def _max_pool(x: Any, d: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
              return_indices: bool, who: str) -> Any:
    x, unbatched = _batched(x, d, who)
    k, s, p, dil = _pool_args(d, who, kernel_size, stride, padding, dilation)
    out = _geometry(tuple(np.shape(raw(x)))[2:], k, s, p, dil, ceil_mode, who)
    v, chain = _physical_values(x)
    index, empty = _window_max_index(v, k, s, p, dil, out)
    rec = STATE.recorder
    if rec is not None:                     # cr.compile: the window search is one kernel of the values
        rec.on_kernel(_window_max_index, (v,), {"k": k, "s": s, "p": p, "dil": dil, "out": out}, (index, empty))
    y, index_t = _gather_max(x, index, chain)
    if empty.any() if rec is None else rec.on_condition(empty, "max pooling's empty windows"):
        y = ops.where(empty, np.array(_lowest(v.dtype), dtype=v.dtype), y)
    y = _unbatch(y, unbatched)
    return (y, _unbatch(index_t, unbatched)) if return_indices else y


def max_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over 1-D windows, as ``torch.nn.functional.max_pool1d`` (see ``max_pool2d``).

    >>> import chainrule as cr
    >>> y, i = cr.nn.functional.max_pool1d(cr.tensor([[[1.0, 3.0, 3.0, 2.0, 5.0]]]), 2, return_indices=True)
    >>> y, i
    (tensor([[[3., 3.]]]), tensor([[[1, 2]]]))
    """
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool1d")


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over 2-D windows, as ``torch.nn.functional.max_pool2d``: input (N, C, H, W) or
    (C, H, W); ``stride`` defaults to ``kernel_size``; padding (at most half the kernel) never wins
    (-inf, or an integer dtype's minimum); torch's ``ceil_mode`` (the last window starts inside the
    input or the left padding); ``return_indices`` gives each maximum's flat index ``h * W + w`` in
    its plane (int64). Ties go to the first maximum in row-major order, and it gets the whole
    gradient, as torch's (a NaN wins).

    >>> import chainrule as cr, numpy as np
    >>> cr.nn.functional.max_pool2d(cr.tensor(np.array([[[[1, 2], [3, 4]]]])), 2, stride=1, padding=1)
    tensor([[[[1, 2, 2],
              [3, 4, 4],
              [3, 4, 4]]]])
    """
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d")


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over 3-D windows, as ``torch.nn.functional.max_pool3d`` (see ``max_pool2d``).

    >>> import chainrule as cr
    >>> cr.nn.functional.max_pool3d(cr.arange(8.0).reshape(1, 2, 2, 2), 2)
    tensor([[[[7.]]]])
    """
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


# ----- average: window sums, one axis at a time, over torch's divisor -----
def _window_sum(x: Any, axis: int, k: int, s: int, out: int) -> Any:
    """Sums of ``out`` windows of ``k`` along ``axis``, ``s`` apart, starting at 0 (``x`` holds them all)."""
    shape = tuple(np.shape(raw(x)))
    if k == s and k >= 8:      # long tiling windows: one reshape and one sum (NumPy sums short axes slowly)
        x = ops.getitem(x, (slice(None),) * axis + (slice(0, out * k),)) if shape[axis] != out * k else x
        return ops.sum(ops.reshape(x, shape[:axis] + (out, k) + shape[axis + 1:]), axis=axis + 1)
    total = None
    for t in range(k):
        part = ops.getitem(x, (slice(None),) * axis + (slice(t, t + s * (out - 1) + 1, s),))
        total = part if total is None else total + part
    return total


def _counts(n: int, k: int, s: int, p: int, out: int, count_include_pad: bool) -> Any:
    """torch's divisor along one axis: the window clipped to the padded input, or to the input."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, n + p)
    if count_include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)


def _avg_pool(x: Any, d: int, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
              count_include_pad: bool, divisor_override: Any, who: str) -> Any:
    x, unbatched = _batched(x, d, who)
    _floating(x, who)
    k, s, p, _ = _pool_args(d, who, kernel_size, stride, padding, 1)
    sizes = tuple(np.shape(raw(x)))[2:]
    out = _geometry(sizes, k, s, p, (1,) * d, ceil_mode, who)
    if divisor_override is not None and int(divisor_override) == 0:
        raise ValueError(f"{who}: divisor_override must be non-zero, got {divisor_override}")
    pads = [(pj, _right_pad(n, kj, sj, pj, 1, o)) for n, kj, sj, pj, o in zip(sizes, k, s, p, out)]
    if any(map(any, pads)):
        x = ops.pad(x, [(0, 0), (0, 0)] + pads)
    for j in range(d):
        x = _window_sum(x, 2 + j, k[j], s[j], out[j])
    if divisor_override is not None:
        return _unbatch(x / divisor_override, unbatched)
    divisor = _grid([_counts(*args, count_include_pad) for args in zip(sizes, k, s, p, out)], np.multiply)
    dtype = raw(x).dtype
    if np.all(divisor == divisor.flat[0]):
        return _unbatch(x / np.asarray(divisor.flat[0], dtype=dtype), unbatched)
    return _unbatch(x / divisor.astype(dtype), unbatched)


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Any:
    """Average pooling over 1-D windows, as ``torch.nn.functional.avg_pool1d`` (see ``avg_pool2d``).

    >>> import chainrule as cr
    >>> cr.nn.functional.avg_pool1d(cr.tensor([[[1.0, 3.0, 5.0]]]), 2, stride=1)
    tensor([[[2., 4.]]])
    """
    return _avg_pool(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None, "avg_pool1d")


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    """Average pooling over 2-D windows, as ``torch.nn.functional.avg_pool2d``: input (N, C, H, W) or
    (C, H, W); zero padding counted unless ``count_include_pad=False``; in ``ceil_mode`` a window
    that runs past the padding divides by its part inside it (torch's rule); ``divisor_override``
    divides every sum by that number instead.

    >>> import chainrule as cr
    >>> cr.nn.functional.avg_pool2d(cr.tensor([[[[1.0, 2.0], [3.0, 6.0]]]]), 2)
    tensor([[[[3.]]]])
    """
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool2d")


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    """Average pooling over 3-D windows, as ``torch.nn.functional.avg_pool3d`` (see ``avg_pool2d``).

    >>> import chainrule as cr
    >>> cr.nn.functional.avg_pool3d(cr.arange(8.0).reshape(1, 2, 2, 2), 2)
    tensor([[[[3.5]]]])
    """
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool3d")


# ----- adaptive: torch's bins floor(i * L / out) .. ceil((i + 1) * L / out) -----
def _output_size(output_size: Any, sizes: tuple, who: str) -> tuple[int, ...]:
    d = len(sizes)
    out = (output_size,) * d if np.ndim(output_size) == 0 and output_size is not None else tuple(output_size)
    if len(out) != d:
        raise ValueError(f"{who}: output_size must be an int or {d} values, got {output_size!r}")
    out = tuple(n if o is None else int(o) for o, n in zip(out, sizes))   # None keeps the input's size
    if min(out) < 1 or min(sizes) < 1:
        raise ShapeError(f"{who}: output_size {out} and input spatial size {sizes} must be positive; "
                         f"use output_size >= 1 (None keeps an axis)")
    return out


def _bins(n: int, out: int) -> tuple[Any, Any]:
    i = np.arange(out)
    return (i * n) // out, -((-(i + 1) * n) // out)


def _adaptive_avg_pool(x: Any, d: int, output_size: Any, who: str) -> Any:
    x, unbatched = _batched(x, d, who)
    _floating(x, who)
    sizes = tuple(np.shape(raw(x)))[2:]
    out = _output_size(output_size, sizes, who)
    if all(n % o == 0 for n, o in zip(sizes, out)):           # equal bins: an average pool
        k = tuple(n // o for n, o in zip(sizes, out))
        return _unbatch(_avg_pool(x, d, k, k, 0, False, True, None, who), unbatched)
    for j, (n, o) in enumerate(zip(sizes, out)):
        start, end = _bins(n, o)
        width = int((end - start).max())
        pos = start[:, None] + np.arange(width)                        # (o, width): the bin, then repeats
        valid = pos < end[:, None]
        pos = np.minimum(pos, end[:, None] - 1)
        x = _take_axis(x, 2 + j, pos)                                   # (..., o, width, ...)
        mask = valid.reshape((o, width) + (1,) * (d - 1 - j))
        x = ops.sum(ops.where(mask, x, np.zeros((), raw(x).dtype)), axis=3 + j)
        x = x / (end - start).astype(raw(x).dtype).reshape((o,) + (1,) * (d - 1 - j))
    return _unbatch(x, unbatched)


def _take_axis(x: Any, axis: int, pos: Any) -> Any:
    """``x`` (N, C, *spatial) indexed along ``axis`` by the integer array ``pos``, whose shape replaces
    the axis; one flat gather (see ``_take_planes``)."""
    sizes = tuple(np.shape(raw(x)))[2:]
    j = axis - 2
    dims = sizes[:j] + pos.shape + sizes[j + 1:]
    flat = np.zeros((), dtype=np.int64)
    for i, n in enumerate(sizes):
        lead = i if i < j else i + pos.ndim - 1
        if i == j:
            g = pos.reshape((1,) * j + pos.shape + (1,) * (len(sizes) - j - 1))
        else:
            g = np.arange(n).reshape((1,) * lead + (n,) + (1,) * (len(dims) - lead - 1))
        flat = flat + g * math.prod(sizes[i + 1:])
    return _take_planes(x, np.broadcast_to(flat, dims))


def _adaptive_max_pool(x: Any, d: int, output_size: Any, return_indices: bool, who: str) -> Any:
    x, unbatched = _batched(x, d, who)
    sizes = tuple(np.shape(raw(x)))[2:]
    out = _output_size(output_size, sizes, who)
    v, chain = _physical_values(x)
    if all(n % o == 0 for n, o in zip(sizes, out)):           # equal bins: a max pool's windows
        k = tuple(n // o for n, o in zip(sizes, out))
        index = _window_max_index(v, k, k, (0,) * d, (1,) * d, out)[0]
    else:
        index = _bin_max_index(v, sizes, out)
    y, index_t = _gather_max(x, index, chain)
    y = _unbatch(y, unbatched)
    return (y, _unbatch(index_t, unbatched)) if return_indices else y


def _bin_max_index(v: Any, sizes: tuple, out: tuple) -> Any:
    """Per-plane flat indices of each adaptive bin's first maximum (bins of unequal widths)."""
    d = len(sizes)
    strides = [math.prod(sizes[j + 1:]) for j in range(d)]
    bins = [_bins(n, o) for n, o in zip(sizes, out)]
    widths = [int((e - b).max()) for b, e in bins]

    def candidates() -> Iterator[tuple[Any, Any]]:
        low = np.array(_lowest(v.dtype), dtype=v.dtype)
        for t in itertools.product(*(range(w) for w in widths)):
            pos = [b + tj for (b, _), tj in zip(bins, t)]
            valid = ~_grid([pj >= e for pj, (_, e) in zip(pos, bins)], np.logical_or)
            pos = [np.minimum(pj, e - 1) for pj, (_, e) in zip(pos, bins)]
            yield np.where(valid, v[(Ellipsis,) + np.ix_(*pos)], low), _grid([pj * sj for pj, sj in zip(pos, strides)])

    return _first_max(candidates(), _grid([b * sj for (b, _), sj in zip(bins, strides)]))


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:
    """Average over ``output_size`` bins, as ``torch.nn.functional.adaptive_avg_pool1d``: bin ``i``
    covers ``floor(i * L / out)`` to ``ceil((i + 1) * L / out)`` (bins may overlap).

    >>> import chainrule as cr
    >>> cr.nn.functional.adaptive_avg_pool1d(cr.tensor([[[1.0, 2.0, 4.0]]]), 2)
    tensor([[[1.5, 3. ]]])
    """
    return _adaptive_avg_pool(input, 1, output_size, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """Average over ``output_size`` bins per axis, as ``torch.nn.functional.adaptive_avg_pool2d``
    (torch's bins, see ``adaptive_avg_pool1d``; ``None`` keeps an axis's size).

    >>> import chainrule as cr
    >>> cr.nn.functional.adaptive_avg_pool2d(cr.ones((2, 3, 5, 7)), (1, None)).shape
    (2, 3, 1, 7)
    """
    return _adaptive_avg_pool(input, 2, output_size, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:
    """Average over ``output_size`` bins per axis, as ``torch.nn.functional.adaptive_avg_pool3d``.

    >>> import chainrule as cr
    >>> cr.nn.functional.adaptive_avg_pool3d(cr.ones((1, 4, 5, 6)), 2).shape
    (1, 2, 2, 2)
    """
    return _adaptive_avg_pool(input, 3, output_size, "adaptive_avg_pool3d")


def adaptive_max_pool1d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """Max over ``output_size`` bins, as ``torch.nn.functional.adaptive_max_pool1d`` (torch's bins;
    ties and gradients as ``max_pool2d``: the first maximum gets it all).

    >>> import chainrule as cr
    >>> cr.nn.functional.adaptive_max_pool1d(cr.tensor([[[1.0, 5.0, 2.0]]]), 2, return_indices=True)
    (tensor([[[5., 5.]]]), tensor([[[1, 1]]]))
    """
    return _adaptive_max_pool(input, 1, output_size, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """Max over ``output_size`` bins per axis, as ``torch.nn.functional.adaptive_max_pool2d``; the
    indices are flat ``h * W + w`` in each plane (int64).

    >>> import chainrule as cr
    >>> cr.nn.functional.adaptive_max_pool2d(cr.arange(12.0).reshape(1, 3, 4), (2, 1))
    tensor([[[ 7.],
             [11.]]])
    """
    return _adaptive_max_pool(input, 2, output_size, return_indices, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """Max over ``output_size`` bins per axis, as ``torch.nn.functional.adaptive_max_pool3d``.

    >>> import chainrule as cr
    >>> cr.nn.functional.adaptive_max_pool3d(cr.arange(8.0).reshape(1, 2, 2, 2), 1)
    tensor([[[[7.]]]])
    """
    return _adaptive_max_pool(input, 3, output_size, return_indices, "adaptive_max_pool3d")
