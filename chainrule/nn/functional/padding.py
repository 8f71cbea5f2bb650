"""``F.pad``, as ``torch.nn.functional.pad``: composites of ``cr.pad`` and slicing, differentiable to
any order."""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.numpy import raw

__all__ = ["pad"]

# PyTorch's mode -> numpy.pad's
_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _widths(who: str, pad: Any, shape: tuple) -> list:
    """PyTorch's flat ``pad`` (last axis first, (before, after) pairs) as one pair per axis."""
    p = tuple(pad)
    if len(p) % 2 or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in p):
        raise ValueError(f"{who}: pad must be an even number of ints ((left, right) of the last axis first), "
                         f"got {pad!r}")
    if len(p) // 2 > len(shape):
        raise ShapeError(f"{who}: pad {p} names {len(p) // 2} axes, but the input {shape} has {len(shape)}")
    widths = [(0, 0)] * len(shape)
    for i in range(len(p) // 2):
        widths[len(shape) - 1 - i] = (int(p[2 * i]), int(p[2 * i + 1]))
    return widths


def pad(input: Any, pad: Any, mode: str = "constant", value: Any = None) -> Any:
    """Pad ``input`` as ``torch.nn.functional.pad``: ``pad`` = (left, right) of the last axis, then of
    the one before, ...; ``mode`` "constant" (with ``value``, default 0), "reflect" (no edge repeat),
    "replicate" (the edge) or "circular" (wrap around). Negative pads crop.

    >>> import chainrule as cr
    >>> cr.nn.functional.pad(cr.tensor([[1.0, 2.0, 3.0]]), (2, -1), mode="reflect")
    tensor([[3., 2., 1., 2.]])
    """
    shape = tuple(np.shape(raw(input)))
    if mode not in _MODES:
        raise ValueError(f"pad: mode must be one of {sorted(_MODES)}, got {mode!r}")
    widths = _widths("pad", pad, shape)
    if mode != "constant":
        if value is not None:
            raise ValueError(f"pad: mode {mode!r} doesn't take a value argument; drop value= (or use "
                             f"mode='constant')")
        axes = len(tuple(pad)) // 2
        if not 1 <= axes <= 3 or len(shape) not in (axes + 1, axes + 2):
            raise ShapeError(f"pad: mode {mode!r} pads the last 1, 2 or 3 axes of a batched or unbatched "
                             f"input ((C, *S) or (N, C, *S)): pad of {len(tuple(pad))} values needs a "
                             f"{axes + 1}-d or {axes + 2}-d input, got {shape}")
        for n, (lo, hi) in zip(shape, widths):
            if mode == "reflect" and max(lo, hi) >= n and max(lo, hi) > 0:
                raise ShapeError(f"pad: reflect padding {(lo, hi)} must be less than the axis' size {n} "
                                 f"(input {shape}); use mode='replicate' or pad less")
            if mode == "circular" and max(lo, hi) > n:
                raise ShapeError(f"pad: circular padding {(lo, hi)} wraps around more than once (axis size "
                                 f"{n}, input {shape}); pad at most {n}")
    for n, (lo, hi) in zip(shape, widths):
        if n + lo + hi < 0:
            raise ShapeError(f"pad: pads {(lo, hi)} crop more than the axis' {n} entries (input {shape})")
    out = input
    # circular wraps the cropped input (PyTorch's order); the other modes pad the whole input, then crop
    if mode == "circular":
        out = _crop(out, widths)
    grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in widths)
    if any(lo or hi for lo, hi in grow):
        kw = {"constant_values": 0.0 if value is None else value} if mode == "constant" else {}
        out = ops.pad(out, grow, mode=_MODES[mode], **kw)
    return out if mode == "circular" else _crop(out, widths)


def _crop(x: Any, widths: list) -> Any:
    """``x`` without the entries the negative pads remove."""
    if not any(lo < 0 or hi < 0 for lo, hi in widths):
        return x
    shape = np.shape(raw(x))
    return ops.getitem(x, tuple(slice(-min(lo, 0), n + min(hi, 0)) for (lo, hi), n in zip(widths, shape)))
