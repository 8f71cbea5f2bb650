"""Convolution: three bilinear primitives, closed under differentiation, so exact to any order.

With ``x`` (N, C, *S) zero-padded by ``padding`` (before, after per axis; the primitives pad it
themselves, so the graph keeps the unpadded input), ``w`` (O, C/groups, *K) and ``a`` (N, O, *P):

    conv(x, w)            (N, O, *P)        out[n, o, p] = sum_{c, k} x[n, c, p*stride + k*dilation] w[o, c, k]
    conv_transpose(a, w)  (N, C, *S)        its transpose in x: the scatter of a through w
    conv_weight(x, a)     (O, C/groups, *K) its transpose in w: the correlation of x with a

Each one's VJPs are the other two (the classic identities: dx of a convolution is a transposed
convolution, dw a correlation of the input with the cotangent), and each is linear in each input,
so its JVP is itself on the tangent. Shapes fit exactly: ``S + before + after = (P - 1) * stride +
dilation * (K - 1) + 1`` (the callers trim ``after`` by the rows a stride leaves unused), so every shape
is read off the operands and the parameters.

Kernels: im2col copies of the windows (an ``as_strided`` view of the padded input) and matmuls
stacked over the examples and groups: a few examples at a time (about 1 MiB of columns), so each GEMM
reads its columns from cache rather than memory; the transposed op scatter-adds its columns, one slice
add per kernel offset (col2im; at stride 1 on the flattened grid, so each add is one long row). Their
temporaries live in per-thread scratch arrays. 16-bit inputs accumulate in float32 and round once,
as matmul.
"""
from __future__ import annotations

import functools
import math
import threading
from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION
from chainrule.core._registry import apply, defprim
from chainrule.core.errors import ShapeError
from chainrule.ops._batching import expand, reshape, set_batch, transpose
from chainrule.ops.linalg import _accumulating

__all__ = ["conv", "conv_transpose", "conv_weight"]

_as_strided = np.lib.stride_tricks.as_strided


def _low(*xs: Any) -> bool:
    return any(getattr(x, "dtype", None) in LOW_PRECISION for x in xs)


def _rounded_once(kernel: Any) -> Any:
    """A convolution's forward that computes 16-bit operands in float32 and rounds once, as matmul."""
    @functools.wraps(kernel)
    def run(x: Any, y: Any, **params: Any) -> Any:
        if _low(x, y):
            return _accumulating(lambda a, b: kernel(a, b, **params), x, y)
        return kernel(x, y, **params)
    return run


def _check(name: str, x: Any, y: Any, stride: tuple, dilation: tuple, groups: int, channels: tuple) -> None:
    """The operands' ranks, batch and channel counts (the kernels' strided views trust them):
    ``channels`` = (what x's axis 1 must be, what y's axis 0 or 1 must be divisible into)."""
    nd = x.ndim - 2
    if nd < 1 or y.ndim != x.ndim or len(stride) != nd or len(dilation) != nd or groups < 1:
        raise ShapeError(f"{name}: operands {x.shape} and {y.shape} with stride {stride}, dilation "
                         f"{dilation}, groups {groups} do not match: both (N or O, C, *spatial) with one "
                         f"stride and dilation per spatial axis; {_HINT}")
    want, split = channels
    if x.shape[1] != want or split % groups or x.shape[1] % groups:
        raise ShapeError(f"{name}: operands {x.shape} and {y.shape} do not match in channels for groups="
                         f"{groups}; {_HINT}")


def _fit(name: str, spatial: tuple, kernel: tuple, out: tuple, stride: tuple, dilation: tuple) -> None:
    want = tuple((p - 1) * s + d * (k - 1) + 1 for p, k, s, d in zip(out, kernel, stride, dilation))
    if tuple(spatial) != want or min(out, default=1) < 1 or min(kernel, default=1) < 1:
        raise ShapeError(f"{name}: input spatial size {tuple(spatial)} does not fit kernel {tuple(kernel)}, "
                         f"stride {stride}, dilation {dilation} and output {tuple(out)} exactly (it must be "
                         f"{want}); choose the padding so that it does (cr.nn.functional.conv2d does)")


_SCRATCH = threading.local()
_SCRATCH_LIMIT = 1 << 26          # bytes: larger work arrays are allocated per call


def _scratch(slot: int | str, shape: tuple, dtype: Any) -> Any:
    """A per-thread work array (the im2col columns, the GEMM results a kernel copies out of): reused
    across calls, since fresh large arrays cost a page fault per 4 KiB on first touch (as much as
    the copy itself). Only a kernel's temporaries live here; what a primitive returns is fresh."""
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    if size > _SCRATCH_LIMIT:
        return np.empty(shape, dtype)
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    buf = bufs.get(slot)
    if buf is None or buf.size < size:
        buf = bufs[slot] = np.empty(size, np.uint8)
    return buf[:size].view(dtype).reshape(shape)


# at least this many output positions per example: GEMMs per example, whose results land in the
# (N, O, *P) layout directly (no transposing copy); fewer: one GEMM over all of them
_PER_EXAMPLE = 256
_CHUNK_BYTES = 1 << 20            # the columns of this many bytes of examples at a time (at least one)


def _strides(x: Any, groups: int, stride: tuple, dilation: tuple) -> tuple:
    """The strides of an example's windows in ``x`` (N, C, *S): (group, channel, *kernel offset) and
    (*output position)."""
    sc, ss = x.strides[1], x.strides[2:]
    return ((x.shape[1] // groups * sc, sc) + tuple(s * d for s, d in zip(ss, dilation)),
            tuple(s * st for s, st in zip(ss, stride)))


def _padded_rows(slot: int | str, lead: tuple, width: int, dtype: Any) -> Any:
    """A scratch array (*lead, width) whose rows may be padded (``_row_pad``): unit stride along the
    last axis, as BLAS takes it."""
    pad = _row_pad(width * dtype.itemsize) // dtype.itemsize
    return _scratch(slot, lead + (width + pad,), dtype)[..., :width]


def _cols(x: Any, kernel: tuple, out: tuple, stride: tuple, dilation: tuple, groups: int) -> Any:
    """im2col of the whole batch: the windows of ``x`` (N, C, *S) as (groups, C/g * prod(K), N * prod(P)),
    in scratch slot 0 (for fewer than ``_PER_EXAMPLE`` output positions per example)."""
    n, c = x.shape[:2]
    kstrides, pstrides = _strides(x, groups, stride, dilation)
    shape = (groups, c // groups) + kernel + (n,) + out
    cols = _padded_rows(0, (groups, c // groups * math.prod(kernel)), n * math.prod(out), x.dtype)
    np.copyto(np.reshape(cols, shape, copy=False),
              _as_strided(x, shape, kstrides + (x.strides[0],) + pstrides, writeable=False))
    return cols


def _chunks(x: Any, kernel: tuple, out: tuple, stride: tuple, dilation: tuple, groups: int) -> Any:
    """im2col a few examples at a time (about ``_CHUNK_BYTES`` of columns) into one reused scratch
    array, for the GEMM that reads them while they are still in cache (the whole batch's columns,
    prod(K) times the input, would go out to memory and back): yields (the examples as a slice,
    their columns (k, groups, C/g * prod(K), prod(P)))."""
    n, c = x.shape[:2]
    kstrides, pstrides = _strides(x, groups, stride, dilation)
    shape = (groups, c // groups) + kernel + out
    rows, cells = c // groups * math.prod(kernel), math.prod(out)
    k = max(1, min(n, _CHUNK_BYTES // max(1, groups * rows * cells * x.dtype.itemsize)))
    buf = _padded_rows(0, (k, groups, rows), cells, x.dtype)
    for i in range(0, n, k):
        m = min(k, n - i)
        np.copyto(np.reshape(buf[:m], (m,) + shape, copy=False),
                  _as_strided(x[i:i + m], (m,) + shape, x.strides[:1] + kstrides + pstrides, writeable=False))
        yield slice(i, i + m), buf[:m]


def _row_pad(row_bytes: int) -> int:
    """Bytes to add after each row of the columns: rows of 2, 4 or 8 KiB alias in the L1 cache (4 KiB
    apart map to one set), and OpenBLAS's forward SGEMM runs ~20% slower on them (measured on the
    benchmark's (64, 288) @ (288, 1024); longer rows were as fast unpadded)."""
    return 64 if row_bytes % 2048 == 0 and row_bytes <= 8192 else 0


def _by_group(a: Any, groups: int) -> Any:
    """(N, O, *P) -> (groups, O/g, N * prod(P)): the channels of each group as rows (scratch slot 2)."""
    n, o = a.shape[:2]
    rows = _scratch(2, (groups, o // groups, n, math.prod(a.shape[2:])), a.dtype)
    np.copyto(rows, a.reshape((n, groups, o // groups, -1)).transpose(1, 2, 0, 3))
    return rows.reshape(groups, o // groups, -1)


def _from_group(m: Any, n: int, spatial: tuple) -> Any:
    """(groups, O/g, N * prod(P)) -> (N, O, *P), contiguous."""
    g, og = m.shape[:2]
    out = m.reshape((g * og, n) + tuple(spatial))
    return np.swapaxes(out, 0, 1).copy()          # (a copy: m may be a scratch array)


def _overlap(inner: tuple, padding: tuple) -> tuple:
    """The slices of an unpadded array (spatial shape ``inner``) and of its padded version (``padding``:
    (before, after) per axis, negative crops) that hold the same entries: (unpadded's, padded's)."""
    src = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(inner, padding))
    dst = tuple(slice(max(lo, 0), max(lo, 0) + sl.stop - sl.start) for sl, (lo, _) in zip(src, padding))
    return (slice(None), slice(None)) + src, (slice(None), slice(None)) + dst


def _padded(x: Any, padding: tuple) -> Any:
    """``x`` (N, C, *S) zero-padded by ``padding`` (a crop where negative), in scratch slot 3: the
    primitives pad their operand themselves, so the graph keeps the unpadded input."""
    if len(padding) != x.ndim - 2:
        raise ShapeError(f"conv: padding {padding} must have one (before, after) pair per spatial axis of "
                         f"the input {x.shape}")
    if not any(lo or hi for lo, hi in padding):
        return x
    size = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[2:], padding))
    if min(size) < 1:
        raise ShapeError(f"conv: padding {padding} leaves nothing of the input {x.shape}")
    src, dst = _overlap(x.shape[2:], padding)
    if all(lo <= 0 and hi <= 0 for lo, hi in padding):
        return x[src]                                   # a crop: a view
    buf = _scratch(3, x.shape[:2] + size, x.dtype)
    for i, (lo, hi) in enumerate(padding):              # zero the margins only: the rest is overwritten
        edge = (slice(None),) * (i + 2)
        buf[edge + (slice(0, max(lo, 0)),)] = 0
        buf[edge + (slice(size[i] - max(hi, 0), size[i]),)] = 0
    buf[dst] = x[src]
    return buf


def _unpadded(full: Any, padding: tuple) -> Any:
    """(C, N, *F) -> a fresh (N, C, *S), ``S = F - before - after``: the adjoint of ``_padded`` (the
    entries the padding added are dropped; where it cropped, zeros come back)."""
    if len(padding) != full.ndim - 2:
        raise ShapeError(f"conv_transpose: padding {padding} must have one (before, after) pair per spatial "
                         f"axis of the result {full.shape[2:]}")
    full = np.swapaxes(full, 0, 1)
    if not any(lo or hi for lo, hi in padding):
        return full.copy()                              # (a copy: full may be a scratch array)
    size = tuple(n - lo - hi for n, (lo, hi) in zip(full.shape[2:], padding))
    src, dst = _overlap(size, padding)
    if all(lo >= 0 and hi >= 0 for lo, hi in padding):
        return full[dst].copy()
    out = np.zeros(full.shape[:2] + size, full.dtype)
    out[src] = full[dst]
    return out


@_rounded_once
def _conv_forward(x: Any, w: Any, stride: tuple, dilation: tuple, groups: int, padding: tuple) -> Any:
    _check("conv", x, w, stride, dilation, groups, (w.shape[1] * groups, w.shape[0]))
    x = _padded(x, padding)
    kernel, spatial = w.shape[2:], x.shape[2:]
    out = tuple((s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(spatial, kernel, stride, dilation))
    _fit("conv", spatial, kernel, out, stride, dilation)
    n, o = x.shape[0], w.shape[0]
    wm = w.reshape(groups, o // groups, -1)
    if math.prod(out) >= _PER_EXAMPLE:                   # per example: (N, g, Og, P), the result's layout
        res = np.empty((n, groups, o // groups, math.prod(out)), np.result_type(w, x))
        for at, cols in _chunks(x, kernel, out, stride, dilation, groups):
            np.matmul(wm, cols, out=res[at])
        return res.reshape((n, o) + out)
    cols = _cols(x, kernel, out, stride, dilation, groups)
    prod = np.matmul(wm, cols, out=_scratch(1, (groups, wm.shape[1], cols.shape[2]), np.result_type(wm, cols)))
    return _from_group(prod, n, out)


@_rounded_once
def _conv_transpose_forward(a: Any, w: Any, stride: tuple, dilation: tuple, groups: int, padding: tuple) -> Any:
    _check("conv_transpose", a, w, stride, dilation, groups, (w.shape[0], w.shape[0]))
    n, out = a.shape[0], a.shape[2:]
    kernel = w.shape[2:]
    cg = w.shape[1]
    spatial = tuple((p - 1) * s + d * (k - 1) + 1 for p, k, s, d in zip(out, kernel, stride, dilation))
    wm = np.swapaxes(w.reshape(groups, w.shape[0] // groups, -1), 1, 2)        # (g, Cg*K, Og)
    if all(s == 1 for s in stride) and len(out) > 1:
        return _unpadded(_col2im_flat(a, wm, kernel, out, spatial, dilation, groups), padding)
    ag = _by_group(a, groups)
    cols = np.matmul(wm, ag, out=_scratch(0, (groups, wm.shape[1], ag.shape[2]), np.result_type(wm, ag)))
    cols = cols.reshape((groups * cg,) + kernel + (n,) + out)
    dx = _scratch(1, (groups * cg, n) + spatial, cols.dtype)
    dx.fill(0)
    for k in np.ndindex(*kernel):             # col2im: one slice add per kernel offset
        at = tuple(slice(i * d, i * d + s * (p - 1) + 1, s) for i, d, s, p in zip(k, dilation, stride, out))
        dx[(slice(None), slice(None)) + at] += cols[(slice(None),) + k]
    return _unpadded(dx, padding)


def _col2im_flat(a: Any, wm: Any, kernel: tuple, out: tuple, spatial: tuple, dilation: tuple,
                 groups: int) -> Any:
    """col2im for stride 1, on rows as long as the input's: ``a`` laid on the input's grid (its trailing
    axes zero-extended to the input's), a kernel offset is one shift of the flattened grid, so each
    offset is one long contiguous add. The zeros past ``a``'s edge spill only zeros across rows; the
    last ones past the end land in a tail that is dropped. Returns (C, N, *S), a scratch array."""
    n, o = a.shape[:2]
    og, cgk = wm.shape[2], wm.shape[1]
    grid = (out[0],) + spatial[1:]
    length = math.prod(grid)
    laid = _scratch(2, (groups, og, n) + grid, a.dtype)
    laid.fill(0)
    laid[(slice(None),) * 3 + tuple(slice(0, p) for p in out)] = \
        a.reshape((n, groups, og) + out).transpose((1, 2, 0) + tuple(range(3, 3 + len(out))))
    cols = np.matmul(wm, laid.reshape(groups, og, n * length),
                     out=_scratch(0, (groups, cgk, n * length), np.result_type(wm, a)))
    kprod = math.prod(kernel)
    cols = cols.reshape(groups * (cgk // kprod), kprod, n, length)
    steps = [math.prod(spatial[i + 1:]) for i in range(len(spatial))]
    offsets = [sum(i * d * st for i, d, st in zip(k, dilation, steps)) for k in np.ndindex(*kernel)]
    total = math.prod(spatial)
    flat = _scratch(1, (cols.shape[0], n, max(offsets) + length), cols.dtype)
    flat.fill(0)
    for j, off in enumerate(offsets):
        flat[:, :, off:off + length] += cols[:, j]
    return flat[:, :, :total].reshape((cols.shape[0], n) + spatial)             # (C, N, *S)


@_rounded_once
def _conv_weight_forward(x: Any, a: Any, stride: tuple, dilation: tuple, groups: int, padding: tuple) -> Any:
    _check("conv_weight", x, a, stride, dilation, groups, (x.shape[1], a.shape[1]))
    if x.shape[0] != a.shape[0]:
        raise ShapeError(f"conv_weight: the input {x.shape} and the cotangent {a.shape} differ in batch size")
    x = _padded(x, padding)
    spatial, out = x.shape[2:], a.shape[2:]
    kernel = tuple((s - (p - 1) * st - 1) // d + 1 for s, p, st, d in zip(spatial, out, stride, dilation))
    _fit("conv_weight", spatial, kernel, out, stride, dilation)
    n, o = a.shape[:2]
    if math.prod(out) >= _PER_EXAMPLE:   # the sum over n of (g, Cg*K, P) @ (g, P, Og), transposed after:
        ag = a.reshape(n, groups, o // groups, -1)    # OpenBLAS runs this orientation ~15% faster than (Og, Cg*K)
        dw = np.zeros((groups, x.shape[1] // groups * math.prod(kernel), o // groups), np.result_type(x, a))
        for at, cols in _chunks(x, kernel, out, stride, dilation, groups):
            dw += np.matmul(cols, np.swapaxes(ag[at], 2, 3)).sum(axis=0)
        dw = np.swapaxes(dw, 1, 2)
    else:
        dw = np.matmul(_by_group(a, groups), np.swapaxes(_cols(x, kernel, out, stride, dilation, groups), 1, 2))
    return dw.reshape((o, x.shape[1] // groups) + kernel)


def _flops(out: Any, x: Any, y: Any, **params: Any) -> int:
    """2 N prod(P) O (C/g) prod(K): conv's (the result is (N, O, *P), y the weight)."""
    return 2 * int(np.size(out)) * math.prod(np.shape(y)[1:])


def _flops_transpose(out: Any, a: Any, w: Any, **params: Any) -> int:
    return 2 * int(np.size(a)) * math.prod(np.shape(w)[1:])


def _flops_weight(out: Any, x: Any, a: Any, **params: Any) -> int:
    return 2 * int(np.size(a)) * math.prod(np.shape(out)[1:])


_HINT = ("x is (N, C, *S), the weight (O, C/groups, *K), the cotangent (N, O, *P); use "
         "cr.nn.functional.conv1d/2d/3d, which check the shapes and pad.")


def _conv_x(g: Any, out: Any, x: Any, w: Any, **p: Any) -> Any:
    return apply(CONV_TRANSPOSE, (g, w), p)


def _conv_w(g: Any, out: Any, x: Any, w: Any, **p: Any) -> Any:
    return apply(CONV_WEIGHT, (x, g), p)


# what the three primitives share: each is linear in each operand, whose rule reads the other one
_BILINEAR = {"jvps": "linear", "saves": "x y", "needs": {0: (1,), 1: (0,)}, "accumulate": True, "autocast": "low",
             "kind": "matmul", "hint": _HINT, "complex": "holomorphic"}
CONV = defprim("conv", _conv_forward, vjps=(_conv_x, _conv_w), flops=_flops, **_BILINEAR)
CONV_TRANSPOSE = defprim(
    "conv_transpose", _conv_transpose_forward,
    vjps=(lambda h, out, a, w, **p: apply(CONV, (h, w), p), lambda h, out, a, w, **p: apply(CONV_WEIGHT, (h, a), p)),
    flops=_flops_transpose, **_BILINEAR)
CONV_WEIGHT = defprim(
    "conv_weight", _conv_weight_forward,
    vjps=(lambda k, out, x, a, **p: apply(CONV_TRANSPOSE, (a, k), p), lambda k, out, x, a, **p: apply(CONV, (x, k), p)),
    flops=_flops_weight, **_BILINEAR)

# the role of each operand and of the result: "d" data (N, channels, *spatial), "w" a weight (O, C/g, *K)
_ROLES = {"conv": ("dw", "d"), "conv_transpose": ("dw", "d"), "conv_weight": ("dd", "w")}


def _batch_conv(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """vmap: a batch of data only joins the batch axis N; per-example weights (or a per-example
    weight result) join the groups, so each example convolves with its own kernel in one call."""
    ins, res = _ROLES[prim.name]
    if res == "d" and not any(b for b, r in zip(batched, ins) if r == "w"):
        i = ins.index("d")
        d = xs[i]
        shape = tuple(np.shape(d))
        args = list(xs)
        args[i] = reshape(d, (shape[0] * shape[1],) + shape[2:])
        out = apply(prim, tuple(args), params)
        return reshape(out, (size, shape[1]) + tuple(np.shape(out))[1:])
    args = []
    for x, b, r in zip(xs, batched, ins):
        x = x if b else expand(x, size)
        s = tuple(np.shape(x))
        if r == "d":            # (B, N, C, *S) -> (N, B*C, *S)
            args.append(reshape(transpose(x, (1, 0) + tuple(range(2, len(s)))), (s[1], size * s[2]) + s[3:]))
        else:                   # (B, O, C/g, *K) -> (B*O, C/g, *K)
            args.append(reshape(x, (size * s[1],) + s[2:]))
    out = apply(prim, tuple(args), {**params, "groups": params["groups"] * size})
    s = tuple(np.shape(out))
    if res == "w":
        return reshape(out, (size, s[0] // size) + s[1:])
    out = reshape(out, (s[0], size, s[1] // size) + s[2:])
    return transpose(out, (1, 0) + tuple(range(2, len(s) + 1)))


for _prim in (CONV, CONV_TRANSPOSE, CONV_WEIGHT):
    set_batch(_prim, _batch_conv)


def _params(stride: Any, dilation: Any, groups: int, padding: Any) -> dict:
    stride = tuple(int(v) for v in stride)
    padding = ((0, 0),) * len(stride) if padding is None else tuple((int(lo), int(hi)) for lo, hi in padding)
    return {"stride": stride, "dilation": tuple(int(d) for d in dilation), "groups": int(groups),
            "padding": padding}


def conv(x: Any, w: Any, stride: tuple, dilation: tuple, groups: int = 1, padding: Any = None) -> Any:
    """The convolution primitive (a cross-correlation, as PyTorch's) of ``x`` (N, C, *S), zero-padded
    by ``padding`` ((before, after) per spatial axis; negative crops), with ``w`` (O, C/groups, *K);
    the padded size must fit exactly: ``S + before + after = (P - 1) * stride + dilation * (K - 1) + 1``.

    >>> import chainrule as cr
    >>> conv(cr.ones((1, 1, 3)), cr.ones((1, 1, 2)), (1,), (1,), padding=((1, 0),))
    tensor([[[1., 2., 2.]]])
    """
    return apply(CONV, (x, w), _params(stride, dilation, groups, padding))


def conv_transpose(a: Any, w: Any, stride: tuple, dilation: tuple, groups: int = 1, padding: Any = None) -> Any:
    """The transpose of ``conv`` in its input: ``a`` (N, O, *P) scattered through ``w`` (O, C/g, *K)
    onto the padded grid ``(P - 1) * stride + dilation * (K - 1) + 1``, then cut to (N, C, *S) by
    ``padding`` (``S`` = the grid less before and after; a negative after adds zeros: output_padding).

    >>> import chainrule as cr
    >>> conv_transpose(cr.ones((1, 1, 2)), cr.ones((1, 1, 2)), (1,), (1,))
    tensor([[[1., 2., 1.]]])
    """
    return apply(CONV_TRANSPOSE, (a, w), _params(stride, dilation, groups, padding))


def conv_weight(x: Any, a: Any, stride: tuple, dilation: tuple, groups: int = 1, padding: Any = None) -> Any:
    """The transpose of ``conv`` in its weight: the correlation of ``x`` (N, C, *S), padded by
    ``padding``, with ``a`` (N, O, *P), of shape (O, C/groups, *K).

    >>> import chainrule as cr
    >>> conv_weight(cr.ones((1, 1, 3)), cr.ones((1, 1, 2)), (1,), (1,))
    tensor([[[2., 2.]]])
    """
    return apply(CONV_WEIGHT, (x, a), _params(stride, dilation, groups, padding))
