"""Reductions: sum, prod, amax/amin, logsumexp, cumsum, cumprod (primitives); mean/var/std (composites).

Ties in amax/amin split the gradient evenly among the maximal elements (PyTorch's convention).
Every reduction of 16-bit and FP8 floats, composites included, runs whole in float32 and rounds
once at the end (``_dtypes.accumulate``): sum, prod, logsumexp, cumsum, cumprod and their rules
never see a 16-bit array (amax/amin, exact in any dtype, run in the input's).
"""
from __future__ import annotations

import builtins
import math
from typing import Any

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION, accum_dtype, accumulate
from chainrule.core._registry import apply, defprim, in_graph, no_out, raw
from chainrule.core._shapes import normalize_axis, reduced_shape
from chainrule.core.grad_mode import STATE
from chainrule.ops._batching import batch_axes, set_batch
from chainrule.ops._batching import reshape as _breshape
from chainrule.ops.elementwise import (
    _abs2,
    _zero_at_zero,
    astype,
    equal,
    exp,
    maximum,
    minimum,
    ones_like,
    sqrt,
    where,
    zeros_like,
)
from chainrule.ops.elementwise import round as _round
from chainrule.ops.shape import (
    broadcast_to,
    concatenate,
    diagonal,
    flip,
    getitem,
    moveaxis,
    pad_widths,
    ravel,
    reshape,
    stack,
    take_along_axis,
    transpose,
)
from chainrule.ops.shape import pad as _pad_linear


def _sum_forward(x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
    return np.add.reduce(x, axis=axis, keepdims=keepdims)   # np.sum minus its Python wrapper


def _reduce_flops(out: Any, x: Any, **params: Any) -> int:
    return int(np.size(x))


SUM = defprim("sum", _sum_forward,
              vjps=(lambda g, out, x, axis, keepdims, shape: expand_reduced(g, shape, axis, keepdims),),
              jvps="linear", flops=_reduce_flops, kind="reduction", accumulate=True, autocast="float32",
              complex="linear")


def _prod_others(x: Any, axis: Any) -> Any:
    """Product of all other elements in each reduced group (exact even where x has zeros)."""
    if x.size == 0:                     # no elements, no products (and reshape cannot infer a -1)
        return zeros_like(x)
    ndim = x.ndim
    axes = tuple(range(ndim)) if axis is None else axis
    rest = [i for i in range(ndim) if i not in axes]
    perm = rest + list(axes)
    xt = transpose(x, perm)
    lead = xt.shape[:len(rest)]
    flat = reshape(xt, lead + (-1,))
    ones = ones_like(flat[..., :1])
    left = cumprod(concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = flip(cumprod(flip(concatenate([flat[..., 1:], ones], axis=-1), -1), axis=-1), -1)
    others = reshape(left * right, xt.shape)
    inverse = [0] * ndim
    for i, p in enumerate(perm):
        inverse[p] = i
    return transpose(others, inverse)


PROD = defprim("prod", lambda x, axis, keepdims, shape: np.prod(x, axis=axis, keepdims=keepdims),
               vjps=(lambda g, out, x, axis, keepdims, shape:
                     expand_reduced(g, shape, axis, keepdims) * _prod_others(x, axis),),
               jvps=(lambda t, out, x, axis, keepdims, shape:
                     sum(t * _prod_others(x, axis), axis, keepdims=keepdims),),
               saves="x", flops=_reduce_flops, kind="reduction", accumulate=True, autocast="float32",
               complex="holomorphic")


def _argmax_share(out: Any, x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
    # 1/k on each of the k tied extreme elements of a group, 0 elsewhere
    hit = equal(x, expand_reduced(out, shape, axis, keepdims))
    hit = astype(hit, x.dtype)
    # counted in float32 for 16-bit x: a bfloat16 count stops at 256
    count = _tie_count(raw(hit), axis, accum_dtype(x.dtype))
    if type(hit) is not ndarray and STATE.recorder is not None:   # cr.compile: tape the count
        STATE.recorder.on_kernel(_tie_count, (raw(hit),), {"axis": axis, "dtype": accum_dtype(x.dtype)}, count)
    return hit / count


def _tie_count(hit: Any, axis: Any, dtype: Any) -> Any:
    return np.sum(hit, axis=axis, keepdims=True, dtype=dtype)


def _extreme_rules() -> tuple:
    def vjp(g: Any, out: Any, x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
        return expand_reduced(g, shape, axis, keepdims) * _argmax_share(out, x, axis, keepdims, shape)

    def jvp(t: Any, out: Any, x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
        return sum(t * _argmax_share(out, x, axis, keepdims, shape), axis, keepdims=keepdims)
    return (vjp,), (jvp,)


_MAX_VJP, _MAX_JVP = _extreme_rules()
def _ties(x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
    return x == np.amax(x, axis=axis, keepdims=True)


def _ties_min(x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
    return x == np.amin(x, axis=axis, keepdims=True)


AMAX = defprim("amax", lambda x, axis, keepdims, shape: np.amax(x, axis=axis, keepdims=keepdims),
               vjps=_MAX_VJP, jvps=_MAX_JVP, saves="x out", flops=_reduce_flops, kind="reduction",
               decide=_ties,
               hint="amax of an empty array is undefined.")
AMIN = defprim("amin", lambda x, axis, keepdims, shape: np.amin(x, axis=axis, keepdims=keepdims),
               vjps=_MAX_VJP, jvps=_MAX_JVP, saves="x out", flops=_reduce_flops, kind="reduction",
               decide=_ties_min)


def _logsumexp_forward(x: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
    try:
        m = np.maximum.reduce(x, axis=axis, keepdims=True)
    except ValueError:                  # no elements, no maximum: the sum is 0, its log -inf
        m = 0
    m = np.where(np.isfinite(m), m, 0)
    total = np.add.reduce(np.exp(x - m), axis=axis, keepdims=True)
    if total.all():
        out = np.log(total) + m
    else:
        with np.errstate(divide="ignore"):     # every entry -inf: log(0) = -inf is the answer
            out = np.log(total) + m
    return out if keepdims else np.reshape(out, [n for i, n in enumerate(out.shape)
                                                 if axis is not None and i not in axis])


def _softmax_of(x: Any, out: Any, axis: Any, keepdims: bool, shape: Any) -> Any:
    # d logsumexp / dx = softmax(x) = exp(x - out), except where out is infinite (x - out is NaN):
    # out = -inf (every entry -inf, i.e. log 0, the log-semiring zero): gradient 0, since
    # log(0 + 0 * e^y) has slope 0 in y (PyTorch and JAX give NaN: pytorch#31829, jax#6811);
    # out = +inf: the k entries equal to +inf share it, 1/k each, the softmax of a k-way tie.
    full = expand_reduced(out, shape, axis, keepdims)
    if not np.isinf(raw(out)).any():
        return exp(x - full)
    finite = ~np.isinf(raw(full))
    p = exp(where(finite, x - where(finite, full, 0.0), -np.inf))
    top = (raw(x) == np.inf) & ~finite
    if not top.any():
        return p
    share = top / np.maximum(np.sum(top, axis=axis, keepdims=True), 1)
    return p + share.astype(raw(p).dtype)


LOGSUMEXP = defprim("logsumexp", _logsumexp_forward,
                    vjps=(lambda g, out, x, axis, keepdims, shape:
                          expand_reduced(g, shape, axis, keepdims) * _softmax_of(x, out, axis, keepdims, shape),),
                    jvps=(lambda t, out, x, axis, keepdims, shape:
                          sum(t * _softmax_of(x, out, axis, keepdims, shape), axis, keepdims=keepdims),),
                    saves="x out", flops=lambda out, x, **p: 3 * int(np.size(x)), kind="reduction",
                    accumulate=True, autocast="float32")


CUMSUM = defprim("cumsum", lambda x, axis: np.cumsum(x, axis=axis),
                 vjps=(lambda g, out, x, axis: flip(cumsum(flip(g, axis), axis), axis),), jvps="linear",
                 flops=_reduce_flops, kind="reduction", accumulate=True, autocast="float32", complex="linear")
def _cumprod_vjp(g: Any, out: Any, x: Any, axis: int) -> Any:
    # d out_j / d x_i = out_j / x_i for j >= i when x has no zeros; otherwise the exact recurrence
    # s_i = g_i + x_{i+1} s_{i+1}, grad_i = (x_0 ... x_{i-1}) s_i, one step per element of the axis
    if not np.any(raw(x) == 0):
        return flip(cumsum(flip(g * out, axis), axis), axis) / x
    xm, gm = moveaxis(x, axis, 0), moveaxis(g, axis, 0)
    n = xm.shape[0]
    s = [gm[n - 1]]
    for i in range(n - 2, -1, -1):
        s.append(gm[i] + xm[i + 1] * s[-1])
    left = concatenate([ones_like(xm[:1]), cumprod(xm[:-1], 0)], axis=0)
    return moveaxis(left * stack(s[::-1]), 0, axis)


def _cumprod_jvp(t: Any, out: Any, x: Any, axis: int) -> Any:
    if not np.any(raw(x) == 0):
        return cumsum(t / x, axis) * out
    xm, tm, om = moveaxis(x, axis, 0), moveaxis(t, axis, 0), moveaxis(out, axis, 0)
    dout = [tm[0]]                       # dout_j = dout_{j-1} x_j + out_{j-1} t_j
    for j in range(1, xm.shape[0]):
        dout.append(dout[-1] * xm[j] + om[j - 1] * tm[j])
    return moveaxis(stack(dout), 0, axis)


# exact also where x has zeros (as PyTorch)
CUMPROD = defprim("cumprod", lambda x, axis: np.cumprod(x, axis=axis),
                  vjps=(_cumprod_vjp,), jvps=(_cumprod_jvp,),
                  saves="x out", flops=_reduce_flops, kind="reduction", accumulate=True, autocast="float32",
                  complex="holomorphic")


# ----- public functions -----
def _reduce(x: Any, prim: Any, axis: Any, keepdims: bool) -> Any:
    if prim.accumulate and getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(_reduce, x, prim, axis, keepdims)
    shape = tuple(np.shape(raw(x)))
    axis = normalize_axis(axis, len(shape), prim.name)
    if axis is not None and len(axis) == len(shape):
        axis = None if not keepdims else axis
    return apply(prim, (x,), {"axis": axis, "keepdims": bool(keepdims), "shape": shape})


def _mask(where_: Any, x: Any) -> Any:
    """NumPy's ``where=`` of a reduction as a boolean array of ``x``'s shape, or None for "all"."""
    if where_ is None or where_ is True:
        return None
    return np.broadcast_to(np.asarray(raw(where_), dtype=bool), np.shape(raw(x)))


def _dtype_of(x: Any) -> Any:
    return np.dtype(getattr(x, "dtype", None) or np.asarray(raw(x)).dtype)


def _initial(x: Any, initial: Any) -> Any:
    """``initial`` cast to the reduction's dtype, as NumPy; a tensor in a graph keeps its gradient."""
    if in_graph(initial):
        return astype(initial, _dtype_of(x))
    return np.asarray(raw(initial)).astype(_dtype_of(x))


def sum(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    """Sum over ``axis`` (int, tuple or None), as ``numpy.sum`` (its parameters in its order); ``where``
    masks entries out (they get no gradient), ``initial`` is added.

    >>> import chainrule as cr
    >>> cr.sum(cr.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0)
    tensor([4., 6.])
    """
    return _sum_or_prod(x, SUM, axis, dtype, out, keepdims, initial, where)


_where = where                       # (``where`` is also a keyword of the reductions)


def prod(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
         where: Any = None) -> Any:
    """Product over ``axis``; the gradient is exact even with zeros in the input. ``where`` masks
    entries out, ``initial`` multiplies, as ``numpy.prod``."""
    return _sum_or_prod(x, PROD, axis, dtype, out, keepdims, initial, where)


def _prepare(x: Any, dtype: Any, out: Any, op: str) -> Any:
    """The shared prologue of the public reductions: refuse ``out=``, cast to ``dtype``."""
    if out is not None:
        no_out(op, out)
    return x if dtype is None else astype(x, dtype)


def _sum_or_prod(x: Any, prim: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any,
                 where: Any) -> Any:
    x = _prepare(x, dtype, out, prim.name)
    mask = _mask(where, x)
    if mask is not None:
        x = _where(mask, x, 0 if prim is SUM else 1)     # masked entries become the identity
    total = _reduce(x, prim, axis, keepdims)
    if initial is None:
        return total
    return total + _initial(total, initial) if prim is SUM else total * _initial(total, initial)


def _extreme(x: Any, prim: Any, axis: Any, out: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    x = _prepare(x, None, out, prim.name)
    if initial is None and where is None:
        return _reduce(x, prim, axis, keepdims)
    mask = _mask(where, x)
    name = "maximum" if prim is AMAX else "minimum"
    if initial is None:
        if mask is not None:
            raise ValueError(f"reduction operation '{name}' does not have an identity, so to use a where "
                             f"mask one has to specify 'initial'")
        return _reduce(x, prim, axis, keepdims)
    first = _initial(x, initial)
    if mask is not None:             # masked entries can never win: -inf (+inf) for floats, else initial
        fill = (-np.inf if prim is AMAX else np.inf) if _dtype_of(x).kind in "fc" else first
        x = _where(mask, x, fill)
    if _count(x, axis, prim.name) == 0:                   # nothing to reduce: initial everywhere
        return sum(x, axis, keepdims=keepdims) * 0 + first
    return (maximum if prim is AMAX else minimum)(_reduce(x, prim, axis, keepdims), first)


def amax(x: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
         where: Any = None) -> Any:
    """Maximum over ``axis``; ties share the gradient evenly. ``initial`` and ``where`` as ``numpy.max``."""
    return _extreme(x, AMAX, axis, out, keepdims, initial, where)


def amin(x: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
         where: Any = None) -> Any:
    """Minimum over ``axis``; ties share the gradient evenly. ``initial`` and ``where`` as ``numpy.min``."""
    return _extreme(x, AMIN, axis, out, keepdims, initial, where)


max = amax
min = amin


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``log(sum(exp(x), axis))`` computed without overflow; its gradient is the softmax, taken as 0
    where every entry is -inf and shared by the +inf entries where some are +inf.

    >>> import chainrule as cr
    >>> x = cr.tensor([[-float("inf"), -float("inf")], [float("inf"), 0.0]], requires_grad=True)
    >>> cr.logsumexp(x, axis=1).backward(cr.tensor([1.0, 1.0])); x.grad
    tensor([[0., 0.],
            [1., 0.]])
    """
    return _reduce(x, LOGSUMEXP, axis, keepdims)


def cumsum(x: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum along ``axis`` (flattened when None), in ``dtype`` if given."""
    x = _prepare(x, dtype, out, "cumsum")
    return _along(reshape(x, (-1,)), CUMSUM, 0) if axis is None else _along(x, CUMSUM, axis)


def cumprod(x: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product along ``axis`` (flattened when None); the gradient is exact with zeros too.

    >>> import chainrule as cr
    >>> x = cr.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> cr.cumprod(x).sum().backward(); x.grad
    tensor([1., 8., 0.])
    """
    x = _prepare(x, dtype, out, "cumprod")
    return _along(reshape(x, (-1,)), CUMPROD, 0) if axis is None else _along(x, CUMPROD, axis)


def _along(x: Any, prim: Any, axis: Any) -> Any:
    """A primitive along one ``axis``: cumsum, cumprod, softmax, log_softmax."""
    if prim.accumulate and getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(_along, x, prim, axis)
    return apply(prim, (x,), {"axis": normalize_axis(axis, np.ndim(raw(x)), prim.name)[0]})


def _count(x: Any, axis: Any, op: str) -> int:
    shape = np.shape(raw(x))
    axes = normalize_axis(axis, len(shape), op)
    if axes is None:
        return math.prod(shape)
    return math.prod(shape[a] for a in axes)


# The composites run whole in float32 for 16-bit x: a float16 sum rounded before the division
# overflows (1,000 values of 100), and a variance would round at every step.
def mean(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    """Arithmetic mean over ``axis`` (composite: sum / n); ``where`` averages the selected entries."""
    x = _prepare(x, dtype, out, "mean")
    if getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(lambda v: mean(v, axis, keepdims=keepdims, where=where), x)
    mask = _mask(where, x)
    if mask is not None:
        total = sum(x, axis, keepdims=keepdims, where=mask)
        count = np.sum(mask, axis=normalize_axis(axis, mask.ndim, "mean"), keepdims=keepdims)
        kind = _dtype_of(total).kind
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / count.astype(_dtype_of(total) if kind in "fc" else np.float64)
    n = _count(x, axis, "mean")
    return sum(x, axis, keepdims=keepdims) / n                         # NaN for no elements, as NumPy


def var(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
        where: Any = None) -> Any:
    """Variance over ``axis`` with ``ddof`` (NumPy's default 0; PyTorch's unbiased is ddof=1), in
    ``dtype`` if given; ``where`` uses only the selected entries."""
    return _var(_prepare(x, dtype, out, "var"), axis, keepdims, ddof, "var", where)


def std(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
        where: Any = None) -> Any:
    """Standard deviation (composite: sqrt of var); the gradient of a constant's std is 0, as PyTorch."""
    x = _prepare(x, dtype, out, "std")
    if getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(lambda v: std(v, axis, ddof=ddof, keepdims=keepdims, where=where), x)
    return _zero_at_zero(sqrt, _var(x, axis, keepdims, ddof, "std", where))


def _var(x: Any, axis: Any, keepdims: bool, ddof: int, op: str, where: Any = None) -> Any:
    if getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(_var, x, axis, keepdims, ddof, op, where)
    mask = _mask(where, x)
    if mask is not None:
        n = np.sum(mask, axis=normalize_axis(axis, mask.ndim, op), keepdims=keepdims)
        centered = x - mean(x, axis, keepdims=True, where=mask)
        total = sum(_abs2(centered), axis, keepdims=keepdims, where=mask)
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / np.maximum(n - ddof, 0).astype(_dtype_of(total))
    n = _count(x, axis, op)
    centered = x - mean(x, axis, keepdims=True)
    return sum(_abs2(centered), axis, keepdims=keepdims) / builtins.max(n - ddof, 0)     # real for complex x


def average(x: Any, axis: Any = None, weights: Any = None, returned: bool = False, *, keepdims: bool = False) -> Any:
    """Weighted mean, as ``numpy.average`` (1-D weights may run along ``axis``); composite.
    ``returned=True`` also gives the sum of the weights (differentiable in them).

    >>> import chainrule as cr
    >>> cr.average(cr.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0, weights=cr.tensor([1.0, 3.0]))
    tensor([2.5, 3.5])
    """
    if getattr(x, "dtype", None) in LOW_PRECISION:
        if returned:
            avg, scale = average(astype(x, accum_dtype(x.dtype)), axis, weights, True, keepdims=keepdims)
            return astype(avg, x.dtype), astype(scale, x.dtype)
        return accumulate(lambda v: average(v, axis, weights, keepdims=keepdims), x)
    if weights is None:
        avg = mean(x, axis, keepdims=keepdims)
        if not returned:
            return avg
        shape = np.shape(raw(avg))
        scale = np.full(shape, np.size(raw(x)) / builtins.max(int(np.prod(shape)), 1), dtype=_dtype_of(avg))
        return avg, scale
    ndim, wdim = np.ndim(raw(x)), np.ndim(raw(weights))
    if wdim == 1 and ndim > 1 and axis is not None and not isinstance(axis, tuple):
        a = normalize_axis(axis, ndim, "average")[0]      # 1-D weights along ``axis``, as NumPy
        weights = reshape(weights, tuple(-1 if i == a else 1 for i in range(ndim)))
    total = sum(weights * ones_like(x), axis, keepdims=keepdims)
    avg = sum(x * weights, axis, keepdims=keepdims) / total
    if not returned:
        return avg
    return avg, broadcast_to(total, np.shape(raw(avg))) if np.shape(raw(total)) != np.shape(raw(avg)) else total


def pad(x: Any, pad_width: Any, mode: str = "constant", *, constant_values: Any = None, end_values: Any = None,
        reflect_type: Any = None, stat_length: Any = None) -> Any:
    """``numpy.pad``: the linear modes of ``shape.pad`` and the statistic modes 'maximum', 'minimum',
    'mean' and 'median' (the statistic of the first/last ``stat_length`` entries along each axis:
    differentiable, as amax/amin/mean/sort are).

    >>> import chainrule as cr
    >>> cr.pad(cr.tensor([1.0, 5.0, 3.0]), (1, 2), mode="maximum", stat_length=2)
    tensor([5., 1., 5., 3., 5., 5.])
    """
    if mode not in ("maximum", "minimum", "mean", "median"):
        if stat_length is not None:
            pad_widths(x, pad_width, mode, {"stat_length": stat_length})     # (refused, naming it)
        return _pad_linear(x, pad_width, mode, constant_values=constant_values, end_values=end_values,
                           reflect_type=reflect_type)
    widths = pad_widths(x, pad_width, mode, {"stat_length": stat_length, "constant_values": constant_values,
                                             "end_values": end_values, "reflect_type": reflect_type})
    ndim = len(widths)
    lengths = None if stat_length is None else np.broadcast_to(np.asarray(stat_length, dtype=int), (ndim, 2))
    dtype = _dtype_of(x)
    for axis, (lo, hi) in enumerate(widths):
        if lo == hi == 0:
            continue
        n = np.shape(raw(x))[axis]
        if n == 0:
            raise ValueError(f"pad: can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
        parts = []
        for side, width in ((0, lo), (1, hi)):
            if not width:
                parts.append(None)
                continue
            k = n if lengths is None else builtins.min(builtins.max(int(lengths[axis][side]), 1), n)
            chunk = getitem(x, (slice(None),) * axis + ((slice(0, k),) if side == 0 else (slice(n - k, n),)))
            stat = _statistic(chunk, mode, axis)
            if dtype.kind in "iub" and mode in ("mean", "median"):
                stat = astype(_round(stat), dtype)             # NumPy rounds an integer array's mean
            shape = list(np.shape(raw(x)))
            shape[axis] = width
            parts.append(broadcast_to(stat, tuple(shape)))
        x = concatenate([p for p in (parts[0], x, parts[1]) if p is not None], axis=axis)
    return x


def _statistic(chunk: Any, mode: str, axis: int) -> Any:
    if mode == "maximum":
        return amax(chunk, axis, keepdims=True)
    if mode == "minimum":
        return amin(chunk, axis, keepdims=True)
    if mode == "mean":
        return mean(chunk, axis, keepdims=True)
    ordered = sort(chunk, axis)                                  # median: the middle one or two
    k = np.shape(raw(chunk))[axis]
    middle = slice((k - 1) // 2, k // 2 + 1)
    return mean(getitem(ordered, (slice(None),) * axis + (middle,)), axis, keepdims=True)


# Integer results, no gradient (vjps=None): a Tensor in gives a Tensor that never requires grad.
ARGMAX = defprim("argmax", lambda x, axis, keepdims: np.argmax(x, axis=axis, keepdims=keepdims),
                 kind="discrete")
ARGMIN = defprim("argmin", lambda x, axis, keepdims: np.argmin(x, axis=axis, keepdims=keepdims),
                 kind="discrete")
ARGSORT = defprim("argsort", lambda x, axis: np.argsort(x, axis=axis, kind="stable"), kind="discrete")


def _batch_arg(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """argmax/argmin: axis None is the index into the flattened example."""
    x, axis, keepdims = xs[0], params["axis"], params["keepdims"]
    ndim = np.ndim(x) - 1
    if axis is not None:
        return apply(prim, (x,), {"axis": axis % builtins.max(ndim, 1) + 1, "keepdims": keepdims})
    out = apply(prim, (_breshape(x, (size, -1)),), {"axis": 1, "keepdims": False})
    return _breshape(out, (size,) + (1,) * ndim) if keepdims else out


for _prim in (SUM, PROD, AMAX, AMIN, LOGSUMEXP):
    set_batch(_prim, batch_axes("axis", shapes=("shape",)))
for _prim in (CUMSUM, CUMPROD, ARGSORT):
    set_batch(_prim, batch_axes("axis"))
set_batch(ARGMAX, _batch_arg)
set_batch(ARGMIN, _batch_arg)


def argmax(x: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the maximum (non-differentiable integer result)."""
    x = _prepare(x, None, out, "argmax")
    return apply(ARGMAX, (x,), {"axis": axis, "keepdims": keepdims})


def argmin(x: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the minimum (non-differentiable integer result)."""
    x = _prepare(x, None, out, "argmin")
    return apply(ARGMIN, (x,), {"axis": axis, "keepdims": keepdims})


def argsort(x: Any, axis: int = -1) -> Any:
    """Indices that sort ``x`` along ``axis`` (non-differentiable)."""
    return apply(ARGSORT, (x,), {"axis": axis})


def sort(x: Any, axis: int = -1) -> Any:
    """Sorted copy (flattened when ``axis`` is None); the gradient flows back to the original positions.

    >>> import chainrule as cr
    >>> cr.sort(cr.tensor([[3.0, 1.0], [2.0, 0.0]]), axis=None)
    tensor([0., 1., 2., 3.])
    """
    if axis is None:
        x, axis = ravel(x), 0
    return take_along_axis(x, argsort(x, axis=axis), axis)


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """Sum of the diagonal (composite)."""
    return sum(diagonal(x, offset, axis1, axis2), axis=-1)


# ----- the two reduction dances every rule shares -----
def expand_reduced(g: Any, shape: tuple[int, ...], axis: tuple[int, ...] | None,
                   keepdims: bool) -> Any:
    """Broadcast the gradient of a reduction back to the input's ``shape``."""
    if type(g) is ndarray:              # a plain backward: two C calls, no op dispatch
        return np.broadcast_to(g if keepdims else g.reshape(reduced_shape(shape, axis)), shape)
    if not keepdims:
        g = reshape(g, reduced_shape(shape, axis))
    return broadcast_to(g, shape)


def sum_to(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``g`` over the axes that broadcasting added or stretched, so it gets ``shape``."""
    gshape = tuple(g.shape)
    if gshape == shape:
        return g
    axes = _SUM_PLANS.get((gshape, shape))
    if axes is None:
        axes = _sum_plan(gshape, shape)
    if type(g) is ndarray and g.dtype not in LOW_PRECISION:    # a plain backward: C calls only
        return (np.add.reduce(g, axis=axes, keepdims=True) if axes else g).reshape(shape)
    g = sum(g, axis=axes, keepdims=True) if axes else g
    return reshape(g, shape)


_SUM_PLANS: dict = {}           # (gradient shape, target shape) -> the axes to sum: computed once


def _sum_plan(gshape: tuple, shape: tuple) -> tuple:
    lead = len(gshape) - len(shape)
    if lead < 0:
        raise ValueError(f"cannot sum shape {gshape} to {shape}")
    axes = list(range(lead))
    for i, n in enumerate(shape):
        m = gshape[lead + i]
        if n == 1 and m != 1:
            axes.append(lead + i)
        elif n != m:
            raise ValueError(f"cannot sum shape {gshape} to {shape}")
    if len(_SUM_PLANS) < 4096:
        _SUM_PLANS[(gshape, shape)] = tuple(axes)
    return tuple(axes)
