"""The discrete Fourier transform, ``cr.fft``: NumPy's names and arguments (``n``/``s``, ``axis``/
``axes``, ``norm``), differentiable in both modes and to any order.

Three primitives: ``fftn`` of complex data over some axes (forward or inverse, with NumPy's norm),
and ``rfftn``/``irfftn`` (real data in, the half spectrum out, and back: NumPy's real transforms,
half the work); the rest compose them with crops, zero-pads and ``conj``. The DFT matrix is
symmetric, so the transpose of a transform is the same transform: ``fftn`` is declared holomorphic,
which makes its VJP the adjoint conj(F(conj g)), PyTorch's convention. The adjoint of ``rfftn`` is
an ``irfftn`` of the cotangent whose interior frequencies are halved (they stand for two entries of
the full spectrum), with the norm swapped; that of ``irfftn`` an ``rfftn`` with them doubled.
FLOPs: 5 n log2 n per complex transform of n points (the radix-2 count), half that for a real one,
for each batch element.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, default_for, float32
from chainrule.core._registry import apply, defprim, raw
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.tensor import Tensor, tensor
from chainrule.ops._batching import batch_axes, set_batch
from chainrule.ops.elementwise import conj
from chainrule.ops.shape import _axis, getitem, pad, roll

_NORMS = ("backward", "ortho", "forward")
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _kernel_dtype(x: Any) -> Any:
    """16- and 8-bit floats as float32: NumPy's FFT lacks their norm loops (bfloat16 has no
    ``reciprocal``/``sqrt``), and its result for float16 is complex64 anyway."""
    return x.astype(float32) if getattr(x, "dtype", None) in LOW_PRECISION else x


def _fftn_forward(x: Any, axes: tuple, norm: str, inverse: bool) -> Any:
    return (np.fft.ifftn if inverse else np.fft.fftn)(_kernel_dtype(x), axes=axes, norm=norm)


def _fftn_flops(out: Any, x: Any, axes: tuple, norm: str, inverse: bool) -> int:
    n = math.prod(np.shape(out)[a] for a in axes)
    return int(5 * np.size(out) * math.log2(n)) if n > 1 else 0


FFTN = defprim("fftn", _fftn_forward, vjps=(lambda g, out, x, **p: apply(FFTN, (g,), p),),
               jvps="linear", flops=_fftn_flops, kind="matmul", complex="holomorphic")


def _rfftn_forward(x: Any, axes: tuple, norm: str) -> Any:
    return np.fft.rfftn(_kernel_dtype(x), axes=axes, norm=norm)


def _irfftn_forward(x: Any, s: tuple, axes: tuple, norm: str) -> Any:
    return np.fft.irfftn(_kernel_dtype(x), s=s, axes=axes, norm=norm)


def _interior(m: int, n: int, axis: int, ndim: int, scale: float) -> Any:
    """Weights along the halved axis: ``scale`` on the interior frequencies, 1 on the zero frequency
    and (n even) the Nyquist one, which stand for one entry of the full spectrum each."""
    w = np.full(m, scale)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w.reshape((m,) + (1,) * (ndim - 1 - axis))


def _rfftn_vjp(g: Any, out: Any, x: Any, axes: tuple, norm: str) -> Any:
    s = tuple(np.shape(raw(x))[a] for a in axes)
    w = _interior(np.shape(raw(g))[axes[-1]], s[-1], axes[-1], np.ndim(raw(g)), 0.5)
    return irfftn(g * w, s, axes, _SWAPPED[norm])


def _irfftn_vjp(g: Any, out: Any, x: Any, s: tuple, axes: tuple, norm: str) -> Any:
    w = _interior(np.shape(raw(x))[axes[-1]], s[-1], axes[-1], np.ndim(raw(x)), 2.0)
    return rfftn(g, None, axes, _SWAPPED[norm]) * w


def _real_flops(out: Any, x: Any, axes: tuple, **params: Any) -> int:
    n = math.prod(params["s"]) if "s" in params else math.prod(np.shape(x)[a] for a in axes)
    batch = np.size(x) // math.prod(np.shape(x)[a] for a in axes) if np.size(x) else 0
    return int(2.5 * batch * n * math.log2(n)) if n > 1 else 0


RFFTN = defprim("rfftn", _rfftn_forward, vjps=(_rfftn_vjp,), jvps="linear", saves="x", flops=_real_flops,
                kind="matmul", complex="own")
IRFFTN = defprim("irfftn", _irfftn_forward, vjps=(_irfftn_vjp,), jvps="linear", saves="x", flops=_real_flops,
                 kind="matmul", complex="own")
for _prim in (FFTN, RFFTN, IRFFTN):
    set_batch(_prim, batch_axes("axes"))


def _norm(norm: str | None, op: str) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


_ONE_D = frozenset({"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"})


def _axes_and_sizes(x: Any, s: Any, axes: Any, op: str) -> tuple[tuple, tuple]:
    """NumPy's rule: ``axes`` default to the last len(s) axes (all axes without s), sizes to the
    input's; in the n-D functions (NumPy 2) an entry -1 of ``s`` keeps that axis' size."""
    shape = np.shape(raw(x))
    if axes is None:
        axes = tuple(range(len(shape))) if s is None else tuple(range(-len(s), 0))
    axes = tuple(_axis(a, len(shape), op) for a in axes)
    if s is None:
        s = tuple(shape[a] for a in axes)
    s = tuple(int(n) for n in s)
    if len(s) != len(axes):
        raise ShapeError(f"{op}: s {s} and axes {axes} must have the same length")
    if op not in _ONE_D:
        s = tuple(shape[a] if n == -1 else n for n, a in zip(s, axes))
    if any(n < 1 for n in s):
        raise ShapeError(f"{op}: invalid number of data points {s}; each must be at least 1")
    return axes, s


def _fit(x: Any, axes: tuple, sizes: tuple) -> Any:
    """Crop or zero-pad ``x`` at the end of each axis to the given sizes, as NumPy's ``n``/``s``."""
    for a, n in zip(axes, sizes):
        cur = np.shape(raw(x))[a]
        if n < cur:
            x = getitem(x, (slice(None),) * a + (slice(0, n),))
        elif n > cur:
            width = [(0, 0)] * np.ndim(raw(x))
            width[a] = (0, n - cur)
            x = pad(x, tuple(width))
    return x


def _complex(x: Any, axes: tuple, sizes: tuple, norm: str, inverse: bool) -> Any:
    """The complex transforms along ``axes`` (sizes ``sizes``), taken in that order. Distinct axes
    commute: one primitive (its axes reversed, as NumPy's fftn takes the last first: the same
    rounding). A repeated axis is transformed again at each repetition, as NumPy's 1-D transforms
    one after another (each crops or pads to its own size)."""
    if len(set(axes)) == len(axes):
        return apply(FFTN, (_fit(x, axes, sizes),), {"axes": axes[::-1], "norm": norm, "inverse": inverse})
    for a, n in zip(axes, sizes):
        x = apply(FFTN, (_fit(x, (a,), (n,)),), {"axes": (a,), "norm": norm, "inverse": inverse})
    return x


def _transform(x: Any, s: Any, axes: Any, norm: Any, inverse: bool, op: str) -> Any:
    axes, sizes = _axes_and_sizes(x, s, axes, op)
    return _complex(x, axes[::-1], sizes[::-1], _norm(norm, op), inverse)     # NumPy: the last axis first


def _n(n: int | None) -> tuple | None:
    return None if n is None else (n,)


def fftn(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Any:
    """N-D discrete Fourier transform (``numpy.fft.fftn``; a repeated axis transforms again).

    >>> import chainrule as cr
    >>> cr.fft.fftn(cr.tensor([[1.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]])
    """
    return _transform(x, s, axes, norm, False, "fftn")


def ifftn(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """N-D inverse discrete Fourier transform (``numpy.fft.ifftn``)."""
    return _transform(x, s, axes, norm, True, "ifftn")


def fft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """1-D discrete Fourier transform (``numpy.fft.fft``).

    >>> import chainrule as cr
    >>> cr.fft.fft(cr.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
    """
    return _transform(x, _n(n), (axis,), norm, False, "fft")


def ifft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """1-D inverse discrete Fourier transform (``numpy.fft.ifft``)."""
    return _transform(x, _n(n), (axis,), norm, True, "ifft")


def fft2(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """2-D discrete Fourier transform (``numpy.fft.fft2``)."""
    return _transform(x, s, axes, norm, False, "fft2")


def ifft2(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """2-D inverse discrete Fourier transform (``numpy.fft.ifft2``)."""
    return _transform(x, s, axes, norm, True, "ifft2")


def _real_input(x: Any, op: str) -> Any:
    dtype = x.dtype if isinstance(x, (Tensor, np.ndarray)) else np.asarray(x).dtype
    if dtype.kind == "c":
        raise DTypeError(f"{op}: the input is {dtype}, but {op} transforms real data; use "
                         f"{op[1:] if op.startswith('r') else op} for complex input, or pass x.real")
    return x


def _rfftn(x: Any, s: Any, axes: Any, norm: Any, op: str) -> Any:
    """NumPy's rfftn: the real transform along the last axis, then the complex ones along the
    others, last first (one primitive when no axis repeats)."""
    axes, sizes = _axes_and_sizes(_real_input(x, op), s, axes, op)
    norm = _norm(norm, op)
    if len(set(axes)) == len(axes):
        return apply(RFFTN, (_fit(x, axes, sizes),), {"axes": axes, "norm": norm})
    x = apply(RFFTN, (_fit(x, axes[-1:], sizes[-1:]),), {"axes": axes[-1:], "norm": norm})
    return _complex(x, axes[-2::-1], sizes[-2::-1], norm, False)


def rfftn(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """N-D transform of real data, the last axis halved (``numpy.fft.rfftn``)."""
    return _rfftn(x, s, axes, norm, "rfftn")


def rfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """1-D transform of real data: the n // 2 + 1 non-negative frequencies (``numpy.fft.rfft``).

    >>> import chainrule as cr
    >>> cr.fft.rfft(cr.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return _rfftn(x, _n(n), (axis,), norm, "rfft")


def rfft2(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """2-D transform of real data (``numpy.fft.rfft2``)."""
    return _rfftn(x, s, axes, norm, "rfft2")


def _irfftn(x: Any, s: Any, axes: Any, norm: Any, op: str) -> Any:
    """NumPy's irfftn: the complex inverse transforms along all axes but the last, in order, then
    the real one along the last (one primitive when no axis repeats)."""
    shape = np.shape(raw(x))
    axes, sizes = _axes_and_sizes(x, s, axes, op)
    norm = _norm(norm, op)
    if s is None:
        sizes = sizes[:-1] + (2 * (shape[axes[-1]] - 1),)
        if sizes[-1] < 1:
            raise ShapeError(f"{op}: invalid number of data points {sizes[-1]} along axis {axes[-1]}; "
                             f"pass n (or s)")
    if len(set(axes)) != len(axes):
        x = _complex(x, axes[:-1], sizes[:-1], norm, True)
        axes, sizes = axes[-1:], sizes[-1:]
    x = _fit(x, axes, sizes[:-1] + (sizes[-1] // 2 + 1,))
    return apply(IRFFTN, (x,), {"s": sizes, "axes": axes, "norm": norm})


def irfftn(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Any:
    """Inverse of ``rfftn``: a real result (``numpy.fft.irfftn``); the half spectrum is extended by
    Hermitian symmetry along the last axis (the imaginary parts of its 0 and n/2 terms are dropped)."""
    return _irfftn(x, s, axes, norm, "irfftn")


def irfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Inverse of ``rfft`` (``numpy.fft.irfft``): ``n`` real points (default 2 (m - 1)).

    >>> import chainrule as cr
    >>> cr.fft.irfft(cr.fft.rfft(cr.tensor([1.0, 2.0, 3.0, 4.0])))
    tensor([1., 2., 3., 4.])
    """
    return _irfftn(x, _n(n), (axis,), norm, "irfft")


def irfft2(x: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """Inverse of ``rfft2`` (``numpy.fft.irfft2``)."""
    return _irfftn(x, s, axes, norm, "irfft2")


def hfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Transform of a Hermitian-symmetric signal given by its first half: real (``numpy.fft.hfft``)."""
    return _irfftn(conj(x), _n(n), (axis,), _SWAPPED[_norm(norm, "hfft")], "hfft")


def ihfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Inverse of ``hfft`` (``numpy.fft.ihfft``): the half spectrum of real data."""
    return conj(_rfftn(x, _n(n), (axis,), _SWAPPED[_norm(norm, "ihfft")], "ihfft"))


def fftshift(x: Any, axes: Any = None) -> Any:
    """Move the zero frequency to the middle (``numpy.fft.fftshift``; a roll)."""
    return _shift(x, axes, 1)


def ifftshift(x: Any, axes: Any = None) -> Any:
    """Undo ``fftshift`` (``numpy.fft.ifftshift``)."""
    return _shift(x, axes, -1)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    shape = np.shape(raw(x))
    axes = tuple(range(len(shape))) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    return roll(x, tuple(sign * (shape[a] // 2) for a in axes), axes)


def fftfreq(n: int, d: float = 1.0) -> Any:
    """Sample frequencies of ``fft`` (``numpy.fft.fftfreq``), as a tensor of the default dtype."""
    return tensor(np.fft.fftfreq(n, d).astype(default_for(np.dtype(np.float64))))


def rfftfreq(n: int, d: float = 1.0) -> Any:
    """Sample frequencies of ``rfft`` (``numpy.fft.rfftfreq``), as a tensor of the default dtype."""
    return tensor(np.fft.rfftfreq(n, d).astype(default_for(np.dtype(np.float64))))


NAMES = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
         "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq")
