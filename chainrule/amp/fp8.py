"""FP8 (float8_e4m3fn, float8_e5m2): scaled quantize/dequantize and an FP8 matmul, differentiable.

The scale comes from the amax: ``scale = amax / finfo(dtype).max``, so the largest magnitude maps to
the format's largest finite value. Per-tensor scaling uses one amax; per-block scaling
(``block_size=b``) uses one amax per ``b`` consecutive elements of the last axis, so an outlier only
coarsens its own block. Gradients are straight-through: the rounding's derivative is taken as 1
(the cast rule is the identity) and the scale is a constant, so ``dequantize(quantize(x))`` has the
identity as its Jacobian up to one FP8 rounding: a gradient reaching the FP8 tensor ``q`` is, like
every gradient, cast to ``q``'s dtype. ``fake_quantize`` (used by ``fp8_matmul``) passes gradients
through exactly, in the input's dtype.
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import ml_dtypes, np
from chainrule.core._dtypes import float8_e4m3fn, float8_e5m2, float32
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.core.tensor import Tensor
from chainrule.numpy import astype, matmul, raw, reshape, swapaxes

__all__ = ["FORMATS", "dequantize", "fake_quantize", "fp8_matmul", "quantize", "relative_error"]

FORMATS = (float8_e4m3fn, float8_e5m2)


def quantize(x: Any, dtype: Any = float8_e4m3fn, block_size: int | None = None) -> tuple:
    """Scale ``x`` by its amax (per tensor, or per block of the last axis) and round to FP8.

    Returns ``(q, scale)``: ``q`` has ``x``'s shape in ``dtype``; ``scale`` (float32) is a scalar or
    has shape ``x.shape[:-1] + (x.shape[-1] // block_size,)``. ``x ≈ dequantize(q, scale)``.

    >>> import chainrule as cr
    >>> q, s = cr.fp8.quantize(cr.tensor([1.0, -2.0, 448.0]))
    >>> q.dtype, float(s)
    (dtype(float8_e4m3fn), 1.0)
    """
    d = np.dtype(dtype)
    if d not in FORMATS:
        raise DTypeError(f"fp8.quantize: dtype must be cr.float8_e4m3fn or cr.float8_e5m2, got {d}")
    top = float(ml_dtypes.finfo(d).max)
    data = raw(x).astype(float32)
    shape = data.shape
    if not np.all(np.isfinite(data)):
        bad = int(np.size(data) - np.count_nonzero(np.isfinite(data)))
        raise ValueError(f"fp8.quantize: the input (shape {shape}) holds {bad} inf/NaN value(s); an "
                         f"amax-based scale cannot represent them. Find where they come from "
                         f"(cr.detect_anomaly()) or clip the input first")
    if block_size is None:
        amax = np.max(np.abs(data)) if data.size else np.float32(0)
        scale = np.where(amax > 0, amax / top, 1.0).astype(float32)
        scaled = x / scale if hasattr(x, "requires_grad") else data / scale
    else:
        n = shape[-1] if shape else 1
        if not shape or n % block_size:
            raise ShapeError(f"fp8.quantize: the last axis ({n}, shape {shape}) must be a multiple of "
                             f"block_size={block_size}; pad it or pick a divisor of {n}")
        blocks = shape[:-1] + (n // block_size, block_size)
        amax = np.max(np.abs(data.reshape(blocks)), axis=-1)
        scale = np.where(amax > 0, amax / top, 1.0).astype(float32)
        scaled = reshape(reshape(x, blocks) / scale[..., None], shape)
    # amax / scale rounds to at most top (1 + 2^-24): the cast rounds that to top, no clip needed
    return astype(astype(scaled, float32), d), scale


def dequantize(q: Any, scale: Any) -> Any:
    """Back to float32: ``q * scale`` (the block size is read off ``scale``'s last axis).

    >>> import chainrule as cr
    >>> q, s = cr.fp8.quantize(cr.tensor([[0.5, 8.0, -1.0, 2.0]]), block_size=2)
    >>> cr.fp8.dequantize(q, s)
    tensor([[ 0.5,  8. , -1. ,  2. ]])
    """
    qf = astype(q, float32)
    scale = np.asarray(scale, dtype=float32)
    if scale.ndim == 0:
        return qf * scale
    shape = raw(qf).shape
    blocks = shape[:-1] + (scale.shape[-1], shape[-1] // scale.shape[-1])
    return reshape(reshape(qf, blocks) * scale[..., None], shape)


def fake_quantize(x: Any, dtype: Any = float8_e4m3fn, block_size: int | None = None) -> Any:
    """``dequantize(quantize(x))`` with an exact straight-through gradient (the identity).

    >>> import chainrule as cr
    >>> x = cr.tensor([0.3, -1.7, 2.0], requires_grad=True)
    >>> cr.fp8.fake_quantize(x).sum().backward(); x.grad
    tensor([1., 1., 1.])
    """
    dq = astype(dequantize(*quantize(raw(x), dtype, block_size)), raw(x).dtype)
    if not isinstance(x, Tensor):
        return dq
    return x + (dq - x.detach())


def fp8_matmul(x: Any, y: Any, dtype: Any = float8_e4m3fn, block_size: int | None = None) -> Any:
    """``x @ y`` with both operands quantized to FP8 and the products accumulated in float32.

    Per-block scales run along the contraction axis (the last axis of ``x``, the first of ``y``),
    which is how blockwise-scaled FP8 GEMMs are laid out.

    >>> import chainrule as cr
    >>> cr.fp8.fp8_matmul(cr.tensor([[1.0, 2.0]]), cr.tensor([[4.0], [2.0]]))
    tensor([[8.]])
    """
    xq = fake_quantize(astype(x, float32), dtype, block_size)
    yq = swapaxes(fake_quantize(astype(swapaxes(y, -1, -2), float32), dtype, block_size), -1, -2)
    return matmul(xq, yq)


def relative_error(approx: Any, exact: Any) -> float:
    """``‖approx − exact‖ / ‖exact‖`` in float64 (Frobenius norms).

    >>> from chainrule.fp8 import relative_error
    >>> round(relative_error([1.0, 2.0], [1.0, 2.5]), 4)
    0.1857
    """
    a = np.asarray(raw(approx), dtype=np.float64)
    e = np.asarray(raw(exact), dtype=np.float64)
    return float(np.linalg.norm(a - e) / np.linalg.norm(e))
