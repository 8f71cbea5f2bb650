"""NumPy's mathematical functions on whole arrays: differences and sums (``diff``, ``ediff1d``,
``gradient``, ``cross``, ``cumulative_sum``, ``cumulative_prod``, ``trapezoid``), products
(``kron``, ``matvec``, ``vecmat``), ``convolve``, ``correlate`` and ``interp``.

All are composites of chainrule ops; ``convolve`` and ``correlate`` run on the ``correlate``
primitive (``chainrule.ops.signal``: a window of the non-conjugating cross-correlation, direct or
by FFT). ``interp`` is differentiable in ``x`` (the slope of the segment on the right of x; of the
last segment at ``xp[-1]``; 0 outside [xp[0], xp[-1]]), in ``fp``, ``left`` and ``right``, and, as
a bonus, in ``xp`` (through the segment's end points; the segment choice is piecewise constant).
"""
from __future__ import annotations

import builtins
import operator
import warnings
from typing import Any, Callable

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, is_floating
from chainrule.core._registry import no_out, raw
from chainrule.core._shapes import normalize_axis
from chainrule.core.batched import is_batched
from chainrule.core.errors import DTypeError, ShapeError
from chainrule.numpy._util import _arr, _array, _axis1, _dtype, _ndim, _raw, _shape
from chainrule.ops.elementwise import astype, clip, conj, isfinite, isnan, mod, not_equal, where
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.linalg import matmul
from chainrule.ops.reduction import argsort, cumprod, cumsum, sum
from chainrule.ops.shape import broadcast_to, concatenate, expand_dims, flip, getitem, moveaxis, ravel, reshape, stack
from chainrule.ops.signal import correlate_window

_NOVALUE = object()                 # NumPy's "argument not given" (diff's prepend/append)


# ----- differences, sums and products -----
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _NOVALUE, append: Any = _NOVALUE) -> Any:
    """The n-th discrete difference along ``axis``, as ``numpy.diff`` (bool: ``!=``).

    >>> import chainrule as cr, numpy as np
    >>> cr.diff(np.array([1.0, 4.0, 9.0]), prepend=0.0)
    array([1., 3., 5.])
    """
    if n == 0:
        return a
    if n < 0:
        raise ShapeError(f"order must be non-negative but got {n!r}")
    a = _arr(a)
    nd = _ndim(a)
    if nd == 0:
        raise ShapeError("diff requires input that is at least one dimensional")
    axis = _axis1(axis, nd, "diff")
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            parts.append(a)
        elif extra is not _NOVALUE:
            extra = _arr(extra)
            if _ndim(extra) == 0:
                shape = list(_shape(a))
                shape[axis] = 1
                extra = broadcast_to(extra, tuple(shape))
            parts.append(extra)
    if len(parts) > 1:
        a = concatenate(parts, axis=axis)
    hi = (slice(None),) * axis + (slice(1, None),)
    lo = (slice(None),) * axis + (slice(None, -1),)
    for _ in range(n):
        a = not_equal(getitem(a, hi), getitem(a, lo)) if _dtype(a) == np.bool_ else getitem(a, hi) - getitem(a, lo)
    return a


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """Differences of the flattened array, with values before and after, as ``numpy.ediff1d``.

    >>> import chainrule as cr, numpy as np
    >>> cr.ediff1d(np.array([1.0, 2.0, 4.0]), to_begin=-1.0)
    array([-1.,  1.,  2.])
    """
    ary = ravel(_arr(ary))
    dtype = _dtype(ary)
    parts = []
    for name, extra in (("to_begin", to_begin), (None, None), ("to_end", to_end)):
        if name is None:
            parts.append(getitem(ary, slice(1, None)) - getitem(ary, slice(None, -1)))
        elif extra is not None:
            extra = _arr(extra)
            if not np.can_cast(_raw(extra), dtype, casting="same_kind"):
                raise DTypeError(f"dtype of `{name}` must be compatible with input `ary` under the "
                                 f"`same_kind` rule.")
            parts.append(_astype(ravel(extra), dtype))
    out = concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    return _astype(out, dtype) if _dtype(out) != dtype else out


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """Second-order central differences inside, first- or second-order one-sided ones at the
    edges, as ``numpy.gradient`` (spacings: scalars or coordinate arrays, which may be tensors).

    >>> import chainrule as cr, numpy as np
    >>> cr.gradient(np.array([1.0, 4.0, 9.0, 16.0]))
    array([3., 4., 6., 7.])
    """
    f = _arr(f)
    nd = _ndim(f)
    axes = tuple(range(nd)) if axis is None else _axes_in_order(axis, nd)
    n = len(varargs)
    if n == 0:
        dx: list = [1.0] * len(axes)
    elif n == 1 and np.ndim(_raw(varargs[0])) == 0:
        dx = [varargs[0]] * len(axes)
    elif n == len(axes):
        dx = [_spacing(d, _shape(f)[ax]) for d, ax in zip(varargs, axes)]
    else:
        raise DTypeError("invalid number of arguments")
    if edge_order > 2:
        raise ShapeError("'edge_order' greater than 2 not supported")
    otype = _dtype(f)
    if not is_floating(otype):                  # (bfloat16 kept: NumPy would give float64)
        if otype.kind in "iu":
            f = _astype(f, np.float64)
        otype = np.dtype(np.float64)
    outs = []
    for ax, h in zip(axes, dx):
        if _shape(f)[ax] < edge_order + 1:
            raise ShapeError("Shape of array too small to calculate a numerical gradient, at least "
                             "(edge_order + 1) elements are required.")
        out = _gradient_along(f, ax, h, edge_order, nd)
        outs.append(_astype(out, otype) if _dtype(out) != otype else out)
    return outs[0] if len(axes) == 1 else tuple(outs)


def _axes_in_order(axis: Any, nd: int) -> tuple:
    """NumPy's normalize_axis_tuple: the axes in the order given (gradient returns them so)."""
    axes = (axis,) if isinstance(axis, int) or hasattr(axis, "__index__") else tuple(axis)
    out = tuple(normalize_axis(operator.index(a), nd, "gradient")[0] for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError("gradient: repeated axis")
    return out


def _spacing(d: Any, n: int) -> Any:
    if np.ndim(_raw(d)) == 0:
        return d
    d = _arr(d)
    if _ndim(d) != 1:
        raise ShapeError("distances must be either scalars or 1d")
    if _shape(d)[0] != n:
        raise ShapeError("when 1d, distances must match the length of the corresponding dimension")
    if _dtype(d).kind in "iu":
        d = _astype(d, np.float64)
    h = getitem(d, slice(1, None)) - getitem(d, slice(None, -1))
    raw_h = _raw(h)
    if (raw_h == raw_h[0]).all():
        return getitem(h, 0)
    return h


def _gradient_along(f: Any, ax: int, h: Any, edge_order: int, nd: int) -> Any:
    def at(s: Any) -> Any:
        return getitem(f, (slice(None),) * ax + (s,))

    def along(v: Any) -> Any:            # a 1-D coefficient vector, broadcast along ``ax``
        return reshape(v, tuple(-1 if i == ax else 1 for i in range(nd)))

    uniform = np.ndim(_raw(h)) == 0
    if uniform:
        inner = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
    else:
        dx1, dx2 = getitem(h, slice(0, -1)), getitem(h, slice(1, None))
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        inner = along(a) * at(slice(None, -2)) + along(b) * at(slice(1, -1)) + along(c) * at(slice(2, None))
    if edge_order == 1:
        h0 = h if uniform else getitem(h, 0)
        hn = h if uniform else getitem(h, -1)
        first = (at(slice(1, 2)) - at(slice(0, 1))) / h0
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / hn
    else:
        if uniform:
            a, b, c = -1.5 / h, 2.0 / h, -0.5 / h
        else:
            dx1, dx2 = getitem(h, 0), getitem(h, 1)
            a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = -dx1 / (dx2 * (dx1 + dx2))
        first = a * at(slice(0, 1)) + b * at(slice(1, 2)) + c * at(slice(2, 3))
        if uniform:
            a, b, c = 0.5 / h, -2.0 / h, 1.5 / h
        else:
            dx1, dx2 = getitem(h, -2), getitem(h, -1)
            a = dx2 / (dx1 * (dx1 + dx2))
            b = -(dx2 + dx1) / (dx1 * dx2)
            c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(slice(-3, -2)) + b * at(slice(-2, -1)) + c * at(slice(-1, None))
    return concatenate([first, inner, last], axis=ax)


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product, as ``numpy.kron`` (arrays of different ndim: leading ones).

    >>> import chainrule as cr, numpy as np
    >>> cr.kron(np.array([1.0, 2.0]), np.array([1.0, 10.0]))
    array([ 1., 10.,  2., 20.])
    """
    a, b = _arr(a), _arr(b)
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return a * b
    nd = builtins.max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    ar = reshape(a, tuple(v for n in sa for v in (n, 1)))
    br = reshape(b, tuple(v for n in sb for v in (1, n)))
    return reshape(ar * br, tuple(p * q for p, q in zip(sa, sb)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None) -> Any:
    """The cross product of 3-vectors (or 2-vectors: the z component), as ``numpy.cross``.

    >>> import chainrule as cr, numpy as np
    >>> cr.cross(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    array([0., 0., 1.])
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _arr(a), _arr(b)
    if _ndim(a) < 1 or _ndim(b) < 1:
        raise ShapeError("At least one array has zero dimension")
    a = moveaxis(a, _axis1(axisa, _ndim(a), "cross (axisa)"), -1)
    b = moveaxis(b, _axis1(axisb, _ndim(b), "cross (axisb)"), -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of 3-dimensional "
                      "vectors instead. (deprecated in NumPy 2.0)", DeprecationWarning, stacklevel=2)
    shape = np.broadcast_shapes(_shape(a)[:-1], _shape(b)[:-1])
    dtype = np.promote_types(_dtype(a), _dtype(b))
    a, b = _astype(a, dtype), _astype(b, dtype)
    a0, a1, b0, b1 = (getitem(v, (Ellipsis, i)) for v, i in ((a, 0), (a, 1), (b, 0), (b, 1)))
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return broadcast_to(z, shape) if _shape(z) != shape else z
    if na == 2:
        b2 = getitem(b, (Ellipsis, 2))
        parts = [a1 * b2, -(a0 * b2), z]
    elif nb == 2:
        a2 = getitem(a, (Ellipsis, 2))
        parts = [-(a2 * b1), a2 * b0, z]
    else:
        a2, b2 = getitem(a, (Ellipsis, 2)), getitem(b, (Ellipsis, 2))
        parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z]
    cp = stack([broadcast_to(p, shape) for p in parts], axis=-1)
    return moveaxis(cp, -1, _axis1(axisc, len(shape) + 1, "cross (axisc)"))


def matvec(x1: Any, x2: Any, /) -> Any:
    """Matrix-vector products over the last axes, broadcast (the ufunc ``numpy.matvec``).

    >>> import chainrule as cr, numpy as np
    >>> cr.matvec(np.eye(2), np.array([1.0, 2.0]))
    array([1., 2.])
    """
    x1, x2 = _arr(x1), _arr(x2)
    s1, s2 = _shape(x1), _shape(x2)
    if len(s1) < 2 or len(s2) < 1 or s1[-1] != s2[-1]:
        raise ShapeError(f"matvec: needs (..., m, n) and (..., n) arrays, got shapes {s1} and {s2}")
    return getitem(matmul(x1, expand_dims(x2, -1)), (Ellipsis, 0))


def vecmat(x1: Any, x2: Any, /) -> Any:
    """Vector-matrix products, the vector conjugated (the ufunc ``numpy.vecmat``).

    >>> import chainrule as cr, numpy as np
    >>> cr.vecmat(np.array([1.0, 2.0]), np.eye(2))
    array([1., 2.])
    """
    x1, x2 = _arr(x1), _arr(x2)
    s1, s2 = _shape(x1), _shape(x2)
    if len(s1) < 1 or len(s2) < 2 or s1[-1] != s2[-2]:
        raise ShapeError(f"vecmat: needs (..., n) and (..., n, m) arrays, got shapes {s1} and {s2}")
    if _dtype(x1).kind == "c":
        x1 = conj(x1)
    return getitem(matmul(expand_dims(x1, -2), x2), (Ellipsis, 0, slice(None)))


def _cumulative(x: Any, fn: Callable, ufunc: Any, axis: Any, dtype: Any, out: Any, include_initial: bool,
                op: str) -> Any:
    no_out(op, out)
    x = _arr(x)
    if _ndim(x) == 0:
        x = reshape(x, (1,))
    if axis is None:
        if _ndim(x) >= 2:
            raise ShapeError("For arrays which have more than one dimension ``axis`` argument is required.")
        axis = 0
    axis = _axis1(axis, _ndim(x), op)
    want = np.dtype(dtype) if dtype is not None else ufunc.accumulate(np.zeros(1, dtype=_dtype(x))).dtype
    if dtype is not None:
        x = _astype(x, dtype)
    res = fn(x, axis=axis)
    if _dtype(res) != want:
        res = _astype(res, want)
    if include_initial:
        shape = list(_shape(res))
        shape[axis] = 1
        res = concatenate([np.full(shape, ufunc.identity, dtype=want), res], axis=axis)
    return res


def cumulative_sum(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                   include_initial: bool = False) -> Any:
    """Cumulative sum, optionally starting with 0, as ``numpy.cumulative_sum``.

    >>> import chainrule as cr, numpy as np
    >>> cr.cumulative_sum(np.array([1.0, 2.0]), include_initial=True)
    array([0., 1., 3.])
    """
    return _cumulative(x, cumsum, np.add, axis, dtype, out, include_initial, "cumulative_sum")


def cumulative_prod(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                    include_initial: bool = False) -> Any:
    """Cumulative product, optionally starting with 1, as ``numpy.cumulative_prod``.

    >>> import chainrule as cr, numpy as np
    >>> cr.cumulative_prod(np.array([2.0, 3.0]), include_initial=True)
    array([1., 2., 6.])
    """
    return _cumulative(x, cumprod, np.multiply, axis, dtype, out, include_initial, "cumulative_prod")


# ----- convolution -----
def _signal_args(a: Any, v: Any, op: str) -> tuple:
    a, v = _array(a), _array(v)
    if np.ndim(raw(a)) == 0:
        a = reshape(a, (1,))
    if np.ndim(raw(v)) == 0:
        v = reshape(v, (1,))
    if np.ndim(raw(a)) != 1 or np.ndim(raw(v)) != 1:
        raise ShapeError(f"{op}: a and v must be 1-D, got shapes {np.shape(raw(a))} and {np.shape(raw(v))}")
    if np.shape(raw(a))[0] == 0:
        raise ValueError(f"{op}: a cannot be empty")
    if np.shape(raw(v))[0] == 0:
        raise ValueError(f"{op}: v cannot be empty")
    return a, v


def _low(fn: Any, a: Any, v: Any, mode: str) -> Any:
    dt = [raw(x).dtype for x in (a, v)]
    if builtins.any(d in LOW_PRECISION for d in dt):
        want = np.result_type(*dt) if not builtins.all(d in LOW_PRECISION for d in dt) else dt[0]
        out = fn(astype(a, np.float32), astype(v, np.float32), mode)
        return astype(out, want) if want in LOW_PRECISION else out
    return None


def convolve(a: Any, v: Any, mode: str = "full") -> Any:
    """Discrete linear convolution of two 1-D arrays, as ``numpy.convolve`` (modes full, same,
    valid); direct for short kernels, by FFT for long ones (then accurate to rounding of the FFT).

    >>> import chainrule as cr
    >>> cr.convolve(cr.tensor([1.0, 2.0, 3.0]), cr.tensor([0.0, 1.0, 0.5]))
    tensor([0. , 1. , 2.5, 4. , 1.5])
    """
    a, v = _signal_args(a, v, "convolve")
    low = _low(convolve, a, v, mode)
    if low is not None:
        return low
    n, m = np.shape(raw(a))[0], np.shape(raw(v))[0]
    if m > n:
        a, v, n, m = v, a, m, n
    start, length = _mode_window(mode, n, m, (m - 1) // 2, "convolve")
    return correlate_window(a, flip(v, 0), start - (m - 1), length)


def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    """Cross-correlation ``c[k] = sum_n a[n + k] conj(v[n])`` of two 1-D arrays, as
    ``numpy.correlate`` (modes valid, same, full).

    >>> import chainrule as cr
    >>> cr.correlate(cr.tensor([1.0, 2.0, 3.0]), cr.tensor([0.0, 1.0, 0.5]))
    tensor([3.5])
    """
    a, v = _signal_args(a, v, "correlate")
    low = _low(correlate, a, v, mode)
    if low is not None:
        return low
    n, m = np.shape(raw(a))[0], np.shape(raw(v))[0]
    if raw(v).dtype.kind == "c":
        v = conj(v)
    start, length = _mode_window(mode, n, m, (m - 1) // 2 if n >= m else n // 2, "correlate")
    return correlate_window(a, v, start - (m - 1), length)


def _mode_window(mode: str, n: int, m: int, same_start: int, op: str) -> tuple:
    """(start in the full correlation, length) of NumPy's modes."""
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        return same_start, builtins.max(n, m)
    if mode == "valid":
        return builtins.min(n, m) - 1, abs(n - m) + 1
    raise ValueError(f"{op}: mode must be one of 'valid', 'same', or 'full', got {mode!r}")


# ----- interpolation and integration -----
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation, as ``numpy.interp`` (float64 or complex128 result);
    differentiable in ``x``, ``fp``, ``left``, ``right`` (and ``xp``), see the module docstring.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.5, 1.5], requires_grad=True)
    >>> cr.interp(x, [0.0, 1.0, 2.0], [0.0, 2.0, 3.0]).sum().backward(); x.grad
    tensor([2., 1.])
    """
    fdt = np.complex128 if np.iscomplexobj(raw(_array(fp))) else np.float64
    x, xp, fp = astype(_array(x), np.float64), astype(_array(xp), np.float64), astype(_array(fp), fdt)
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = builtins.abs(period)
        left = right = None
        if np.ndim(raw(xp)) != 1 or np.ndim(raw(fp)) != 1:
            raise ValueError("interp: Data points must be 1-D sequences")
        if np.shape(raw(xp))[0] != np.shape(raw(fp))[0]:
            raise ValueError("interp: fp and xp are not of the same length")
        x = mod(x, period)
        xp = mod(xp, period)
        order = argsort(xp) if is_batched(xp) else np.argsort(raw(xp), kind="stable")
        xp, fp = getitem(xp, order), getitem(fp, order)
        xp = concatenate([getitem(xp, slice(-1, None)) - period, xp, getitem(xp, slice(0, 1)) + period])
        fp = concatenate([getitem(fp, slice(-1, None)), fp, getitem(fp, slice(0, 1))])
    xpr, xr = raw(xp), raw(x)
    if np.ndim(xpr) != 1 or np.ndim(raw(fp)) != 1:
        raise ValueError("interp: Data points must be 1-D sequences")
    L = xpr.shape[0]
    if L == 0:
        raise ValueError("interp: array of sample points is empty")
    if raw(fp).shape[0] != L:
        raise ValueError("interp: fp and xp are not of the same length.")
    lval = getitem(fp, 0) if left is None else astype(_array(left), fdt)
    rval = getitem(fp, -1) if right is None else astype(_array(right), fdt)
    if is_batched(x, xp, fp, lval, rval):
        return _interp_batched(x, xp, fp, lval, rval, L)
    below, above = xr < xpr[0], xr > xpr[-1]
    if L == 1:
        return where(below, lval, where(above, rval, getitem(fp, 0)))      # NaN x: fp[0], as NumPy
    else:
        j = np.searchsorted(xpr, xr, side="right") - 1
        fj, fj1, v0, v1 = _segment(x, xp, fp, np.clip(j, 0, L - 2))
        r0, r1 = raw(v0), raw(v1)
        last = (j == L - 1) & ~above                     # x == xp[-1]: fp[-1] (NumPy's dy[j])
        knot = (xr == xpr[np.clip(j, 0, L - 1)]) & ~last
        res = v0
        redo = np.isnan(r0) & ~knot & ~last              # NaN one way: try the other (NumPy)
        if redo.any():
            res = where(redo, v1, res)
            same = redo & np.isnan(r1) & (raw(fj) == raw(fj1))
            if same.any():
                res = where(same, fj, res)
        bad_knot = knot & ~np.isfinite(r0)
        if bad_knot.any():
            res = where(bad_knot, fj, res)
        if last.any():
            res = where(last & np.isfinite(r1), v1, where(last, fj1, res))
        res = where(below, lval, where(above, rval, res))
    if np.isnan(xr).any():
        res = where(np.isnan(xr), x, res)
    return res


def _segment(x: Any, xp: Any, fp: Any, jc: Any) -> tuple:
    """The knots' values around each x (segment ``jc``) and the line through them evaluated at x
    from either end: (fj, fj1, v0, v1)."""
    xj, xj1 = getitem(xp, jc), getitem(xp, jc + 1)
    fj, fj1 = getitem(fp, jc), getitem(fp, jc + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (fj1 - fj) / (xj1 - xj)
        return fj, fj1, slope * (x - xj) + fj, slope * (x - xj1) + fj1


def _interp_batched(x: Any, xp: Any, fp: Any, lval: Any, rval: Any, L: int) -> Any:
    """``interp``'s rules with chainrule ops only (inside cr.vmap, where no value can be read):
    each correction is a where, the segment a count of the knots at or below x."""
    below, above = x < getitem(xp, 0), x > getitem(xp, -1)
    if L == 1:
        return where(below, lval, where(above, rval, getitem(fp, 0)))
    j = sum(expand_dims(x, -1) >= xp, -1) - 1                     # searchsorted(xp, x, "right") - 1
    fj, fj1, v0, v1 = _segment(x, xp, fp, clip(j, 0, L - 2))
    last = (j == L - 1) & ~above
    knot = (x == getitem(xp, clip(j, 0, L - 1))) & ~last
    redo = isnan(v0) & ~knot & ~last
    res = where(redo, v1, v0)
    res = where(redo & isnan(v1) & (fj == fj1), fj, res)
    res = where(knot & ~isfinite(v0), fj, res)
    res = where(last & isfinite(v1), v1, where(last, fj1, res))
    res = where(below, lval, where(above, rval, res))
    return where(isnan(x), x, res)


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """Trapezoidal rule along ``axis``, as ``numpy.trapezoid`` (composite; differentiable in
    ``y``, ``x`` and ``dx``).

    >>> import chainrule as cr
    >>> cr.trapezoid(cr.tensor([1.0, 2.0, 3.0]), dx=0.5)
    tensor(2.)
    """
    y = _array(y)
    nd = np.ndim(raw(y))
    if x is None:
        d = dx
    else:
        x = _array(x)
        if np.ndim(raw(x)) == 1:
            d = _diff(x, 0)
            shape = [1] * nd
            shape[axis] = np.shape(raw(d))[0]
            d = reshape(d, tuple(shape))
        else:
            d = _diff(x, axis)
    ax = normalize_axis(axis, nd, "trapezoid")[0]
    s1 = (slice(None),) * ax + (slice(1, None),)
    s2 = (slice(None),) * ax + (slice(None, -1),)
    return sum(d * (getitem(y, s1) + getitem(y, s2)) / 2.0, ax)


def _diff(x: Any, axis: int) -> Any:
    ax = normalize_axis(axis, np.ndim(raw(x)), "trapezoid")[0]
    return getitem(x, (slice(None),) * ax + (slice(1, None),)) - getitem(x, (slice(None),) * ax + (slice(None, -1),))


__all__ = ["diff", "ediff1d", "gradient", "kron", "cross", "matvec", "vecmat", "cumulative_sum", "cumulative_prod",
           "convolve", "correlate", "interp", "trapezoid"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__ if hasattr(np, name)}
