"""The signal primitive: ``correlate``, a window of the non-conjugating cross-correlation of two 1-D
arrays (direct for short kernels, by FFT for long ones), on which NumPy's ``convolve`` and
``correlate`` (``chainrule.numpy.math_more``) run. It is linear in each input: its VJPs are windows
of the same correlation (with ``v`` flipped for ``a``'s), its JVP the op on the tangents.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

from chainrule.core._backend import np
from chainrule.core._registry import apply, defprim, raw
from chainrule.ops.reduction import sum
from chainrule.ops.shape import concatenate, expand_dims, flip, getitem


def _fast_len(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (FFT sizes that pocketfft handles fastest)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            p = p35
            while p < n:
                p *= 2
            best = builtins.min(best, p)
            p35 *= 3
        p5 *= 5
    return best


def _use_fft(length: int, m: int, dtype: Any) -> bool:
    if dtype.kind not in "fc" or builtins.min(length, m) < 64:
        return False
    size = _fast_len(length + m - 1)
    return length * (1 + m / 200) > 0.2 * size * math.log2(size)


def _window_forward(a: Any, v: Any, off: int, length: int, n: int, m: int) -> Any:
    """out[k] = sum_j a[k + off + j] v[j], k < length (a is 0 outside [0, n); v not conjugated)."""
    dtype = np.result_type(a, v)
    if length <= 0:
        return np.zeros(0, dtype=dtype)
    lo, hi = off, off + length + m - 1
    seg = a[builtins.max(lo, 0):builtins.max(builtins.min(hi, n), 0)]
    padl = builtins.min(builtins.max(0, -lo), length + m - 1)
    if seg.shape[0] != length + m - 1:
        seg = np.concatenate([np.zeros(padl, dtype=a.dtype), seg,
                              np.zeros(length + m - 1 - padl - seg.shape[0], dtype=a.dtype)])
    if _use_fft(length, m, dtype):
        size = _fast_len(length + m - 1)
        if dtype.kind == "c":
            full = np.fft.ifft(np.fft.fft(seg, size) * np.fft.fft(v[::-1], size))
        else:
            full = np.fft.irfft(np.fft.rfft(seg, size) * np.fft.rfft(v[::-1], size), size)
        return full[m - 1:m - 1 + length].astype(dtype, copy=False)
    return np.convolve(seg, v[::-1], "valid")


def _batch_correlate(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """The correlate primitive on a batch (batch first): every window of ``a`` gathered at once,
    times ``v``, summed (the direct sum for every length: one recorded op chain, no loop)."""
    a, v = xs
    off, length, n, m = (int(params[k]) for k in ("off", "length", "n", "m"))
    if length <= 0:
        return np.zeros((size, 0), np.result_type(raw(a), raw(v)))
    lead = (size,) if batched[0] else ()
    padl, padr = builtins.max(0, -off), builtins.max(0, off + length + m - 1 - n)
    dt = raw(a).dtype
    parts = ([np.zeros(lead + (padl,), dt)] if padl else []) + [a] + ([np.zeros(lead + (padr,), dt)] if padr else [])
    a = concatenate(parts, axis=-1) if len(parts) > 1 else a
    start = off + padl
    windows = getitem(a, (Ellipsis, start + np.arange(length)[:, None] + np.arange(m)))    # (..., length, m)
    return sum(windows * expand_dims(v, -2), -1)      # (size, length): one of a, v is batched


# the transposes: a's cotangent is the window of g correlated with flipped v, v's that of a with g
CORRELATE = defprim(
    "correlate", _window_forward,
    vjps=(lambda g, out, a, v, off, length, n, m: correlate_window(g, flip(v, 0), -off - (m - 1), n),
          lambda g, out, a, v, off, length, n, m: correlate_window(a, g, off, m)),
    jvps="linear", saves="x y", needs={0: (1,), 1: (0,)}, kind="linalg", complex="holomorphic",
    flops=lambda out, a, v, **p: 2 * int(np.size(out)) * int(np.size(v)),
    hint="convolve/correlate take 1-D arrays.", batch=_batch_correlate)


def correlate_window(a: Any, v: Any, off: int, length: int) -> Any:
    """``out[k] = sum_j a[k + off + j] v[j]`` for ``k < length`` (``a`` is 0 outside its range; ``v`` is
    not conjugated): a window of the cross-correlation of 1-D ``a`` and ``v``, the primitive."""
    return apply(CORRELATE, (a, v), {"off": int(off), "length": int(length), "n": int(np.shape(raw(a))[0]),
                                     "m": int(np.shape(raw(v))[0])})
