"""Functions of the singular values and of the whole spectrum: ``pinv`` (on the ``pinv`` primitive of
``chainrule.ops.spectral``), ``lstsq``,
``matrix_rank``, the norms (``norm``, ``matrix_norm``, ``vector_norm``: NumPy's ``np.linalg.norm``
semantics, every ord) and ``cond``, built on ``spectral``'s svd/svdvals.

>>> import chainrule as cr
>>> float(cr.linalg.norm(cr.tensor([[3.0, 0.0], [0.0, -4.0]]), "nuc"))
7.0
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, accumulate
from chainrule.core._registry import apply, raw
from chainrule.core.batched import batched_like, whole_batch
from chainrule.core.errors import ShapeError, VmapError
from chainrule.core.tensor import Tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.ops._degenerate import _eps
from chainrule.ops.elementwise import _abs2, _zero_at_zero, abs, astype, conj, sqrt, where
from chainrule.ops.linalg import _per_batch, inv, matmul
from chainrule.ops.reduction import amax, amin, sum
from chainrule.ops.shape import expand_dims, moveaxis, ravel, real, reshape, squeeze
from chainrule.ops.spectral import PINV, _as_dtype, _floating, _matrices, _NoValue, _square, _svd_input, svdvals


def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NoValue) -> Any:
    """Moore-Penrose pseudo-inverse, as ``numpy.linalg.pinv`` (same ``rcond``/``rtol`` cutoffs, relative
    to the largest singular value). Its derivative (Golub & Pereyra 1973) holds where the rank is
    locally constant: the singular values below the cutoff are taken as exact zeros. It needs no
    singular vectors, so repeated singular values (orthogonal matrices, the identity) are fine.

    >>> import chainrule as cr
    >>> cr.linalg.pinv(cr.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5, 0. ],
            [0. , 0. ]])
    """
    a, shape = _svd_input(a, hermitian, "pinv")
    dtype = raw(a).dtype
    if rcond is None:
        if rtol is _NoValue:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(shape[-2:]) * _eps(dtype)
        else:
            rcond = raw(rtol)
    elif rtol is not _NoValue:
        raise ValueError("pinv: `rtol` and `rcond` can't be both set.")
    rcond = raw(rcond)
    rcond = float(rcond) if np.ndim(rcond) == 0 else np.asarray(rcond)
    return apply(PINV, (a,), {"rcond": rcond, "hermitian": bool(hermitian)})


def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple:
    """Least-squares solution of ``a @ x = b``, as ``numpy.linalg.lstsq``: ``(x, residuals, rank, s)``.
    x, residuals and s are differentiable (x away from rank changes); rank is an integer.

    >>> import chainrule as cr
    >>> x, res, rank, s = cr.linalg.lstsq(cr.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]),
    ...                                    cr.tensor([1.0, 2.0, 3.0]))
    >>> x, res, int(rank)
    (tensor([1., 2.]), tensor([9.]), 2)
    """
    a, b = _floating(a), _floating(b)
    sa, sb = np.shape(raw(a)), np.shape(raw(b))
    if len(sa) != 2 or len(sb) not in (1, 2):
        raise ShapeError(f"lstsq: expects a 2-D a and a 1-D or 2-D b (NumPy's lstsq is not batched), "
                         f"got shapes {sa} and {sb}")
    m, n = sa
    if sb[0] != m:
        raise ShapeError(f"lstsq: incompatible dimensions: a is {sa}, b is {sb} (b.shape[0] must be {m})")
    is_1d = len(sb) == 1
    b2 = expand_dims(b, -1) if is_1d else b
    dtype = np.result_type(raw(a).dtype, raw(b).dtype)
    real_dtype = np.finfo(dtype).dtype if dtype.kind == "c" else dtype
    if rcond is None:
        rcond = _eps(dtype) * max(m, n)
    elif rcond < 0:
        rcond = _eps(dtype)
    tracked = isinstance(a, Tensor) or isinstance(b, Tensor)
    if m == 0 or n == 0 or (not is_1d and sb[-1] == 0):
        x, res, rank, s = np.linalg.lstsq(raw(a), raw(b), rcond=rcond)
        return tuple(_wrap(r) for r in (x, res)) + (rank, _wrap(s)) if tracked else (x, res, rank, s)
    s = svdvals(a)
    rank = _per_batch(lambda v: np.count_nonzero(v > rcond * v.max(axis=-1, keepdims=True, initial=0),
                                                 axis=-1).astype(np.int32), s)
    ranks = whole_batch(rank)
    if ranks.ndim and m > n and (ranks == n).any() and not (ranks == n).all():
        raise VmapError("lstsq inside cr.vmap: the residuals' shape depends on the rank, and some examples "
                        "have full column rank and some not; compute b - a @ x instead")
    x = matmul(pinv(a, rcond=rcond), b2)
    x = _as_dtype(x, dtype)
    if (ranks == n).all() and m > n:
        r = b2 - matmul(a, x)
        res = sum(real(r * conj(r)) if dtype.kind == "c" else r * r, axis=0)
        res = _as_dtype(res, real_dtype)
    else:
        res = np.array([], dtype=real_dtype)
        res = _wrap(res) if tracked else res
    if is_1d:
        x = x[..., 0]
    return x, res, rank, _as_dtype(s, real_dtype)


def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:
    """Rank by SVD, as ``numpy.linalg.matrix_rank`` (an int or an int array; no gradient).

    >>> import chainrule as cr
    >>> int(cr.linalg.matrix_rank(cr.tensor([[1.0, 2.0], [2.0, 4.0]])))
    1
    """
    return _per_batch(lambda v: np.linalg.matrix_rank(np.asarray(v), tol=None if tol is None else raw(tol),
                                                      hermitian=hermitian, rtol=None if rtol is None else raw(rtol)),
                      A)


def _vector_norm(x: Any, ord: Any, axis: Any, keepdims: bool) -> Any:
    """Vector p-norm over ``axis`` (an int, a tuple read as one flattened axis, or None: all).

    Where a p-norm (p > 0) or one of its terms |x_i|**p has an infinite slope at 0 (the whole
    vector 0; a zero entry for p < 1), the gradient there is taken as 0, as PyTorch does."""
    if getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(_vector_norm, x, ord, axis, keepdims)
    if ord is None or (not isinstance(ord, str) and ord == 2):
        return _zero_at_zero(sqrt, sum(_abs2(x), axis=axis, keepdims=keepdims))
    if isinstance(ord, str) or not isinstance(ord, (int, float, np.number)):
        raise ValueError(f"norm: ord={ord!r} is not a vector norm order; use a number, inf or -inf "
                         f"(or a 2-D input or a 2-tuple axis for matrix norms such as 'fro' and 'nuc')")
    if ord == np.inf:
        return amax(abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return amin(abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return sum(astype(x != 0, abs(x).dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return sum(abs(x), axis=axis, keepdims=keepdims)
    if ord < 0:                      # a zero entry makes the norm 0 through 0**ord = inf: no masking
        return sum(abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    # |x|**p (p < 1) and s**(1/p) (p > 1) have infinite slopes at 0: gradient 0 there, as PyTorch
    powered = _zero_at_zero(lambda a: a ** ord, abs(x))
    return _zero_at_zero(lambda s: s ** (1.0 / ord), sum(powered, axis=axis, keepdims=keepdims))


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


def _matrix_axes(x: Any, axis: Any, op: str) -> tuple:
    ndim = len(np.shape(raw(x)))
    if not isinstance(axis, (tuple, list)) or len(axis) != 2:
        raise ValueError(f"{op}: axis must be a pair of axes, got {axis!r}")
    a0, a1 = (int(a) % ndim if -ndim <= int(a) < ndim else None for a in axis)
    if a0 is None or a1 is None or a0 == a1:
        raise ValueError(f"{op}: invalid axis {axis!r} for an array of {ndim} dimensions")
    return a0, a1


def matrix_norm(x: Any, *, ord: Any = "fro", axis: tuple = (-2, -1), keepdims: bool = False) -> Any:
    """Matrix norms ('fro', 'nuc', 2, -2, 1, -1, inf, -inf) over ``axis``, as ``numpy.linalg.norm``
    with a 2-tuple axis (and ``torch.linalg.matrix_norm``); 'nuc', 2, -2 from the singular values.

    >>> import chainrule as cr
    >>> cr.linalg.matrix_norm(cr.tensor([[3.0, 0.0], [0.0, -4.0]]), ord="nuc")
    tensor(7.)
    """
    a0, a1 = _matrix_axes(x, axis, "matrix_norm")
    if not any(ord is o or (not isinstance(ord, str) and not isinstance(o, str) and ord == o)
               or (isinstance(ord, str) and ord == o) for o in _MATRIX_ORDS):
        raise ValueError(f"matrix_norm: invalid norm order {ord!r} for matrices; use one of 'fro', 'nuc', "
                         f"2, -2, 1, -1, inf, -inf")
    x = _floating(x)
    if ord == "fro":
        return _vector_norm(x, None, (a0, a1), keepdims)
    if ord in (1, -1, np.inf, -np.inf):
        if getattr(x, "dtype", None) in LOW_PRECISION:
            return accumulate(matrix_norm, x, ord, (a0, a1), keepdims)
        inner, outer = (a0, a1) if ord in (1, -1) else (a1, a0)    # 1: max column sum; inf: max row sum
        r = (amax if ord > 0 else amin)(sum(abs(x), axis=inner, keepdims=True), axis=outer, keepdims=True)
        return r if keepdims else squeeze(r, (a0, a1))
    s = svdvals(moveaxis(x, (a0, a1), (-2, -1)))
    r = sum(s, axis=-1) if ord == "nuc" else amax(s, axis=-1) if ord == 2 else amin(s, axis=-1)
    if keepdims:
        shape = list(np.shape(raw(x)))
        shape[a0] = shape[a1] = 1
        r = reshape(r, tuple(shape))
    return r


def vector_norm(x: Any, *, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
    """Vector p-norm over ``axis`` (all axes by default, or several: flattened together), as
    ``numpy.linalg.vector_norm`` / ``torch.linalg.vector_norm``.

    >>> import chainrule as cr
    >>> cr.linalg.vector_norm(cr.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    x = _floating(x)
    shape = np.shape(raw(x))
    ndim = len(shape)
    if axis is None:
        axes = tuple(range(ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(int(a) % ndim for a in axis)
    else:
        axes = (int(axis) % ndim,)
    if len(set(axes)) != len(axes):
        raise ValueError(f"vector_norm: repeated axis in {axis!r}")
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    keep = [a for a in range(ndim) if a not in axes]
    flat = reshape(moveaxis(x, axes, tuple(range(ndim - len(axes), ndim))) if ndim else ravel(x),
                   tuple(shape[a] for a in keep) + (-1,))
    r = _vector_norm(flat, ord, -1, False)
    if keepdims:
        r = reshape(r, tuple(1 if a in axes else shape[a] for a in range(ndim)))
    return r


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``numpy.linalg.norm`` (also ``cr.norm`` and ``Tensor.norm``): a vector norm over one axis (every
    ``ord`` of ``numpy.linalg.norm``: inf, -inf, 0, any p), a matrix norm over two ('fro', 'nuc', 2,
    -2, 1, -1, inf, -inf; 'nuc', 2 and -2 by singular values), the 2-norm of all entries when both
    ``ord`` and ``axis`` are None. Without ``axis``, a 1-D input takes vector norms, a 2-D input
    matrix norms. At 0, a p-norm's gradient is taken as 0, as PyTorch does.

    >>> import chainrule as cr
    >>> cr.linalg.norm(cr.tensor([[1.0, 0.0], [0.0, 2.0]]), ord=2)
    tensor(2.)
    >>> x = cr.tensor([0.0, 0.0], requires_grad=True)
    >>> cr.linalg.norm(x, ord=3).backward(); x.grad
    tensor([0., 0.])
    """
    x = _floating(x)
    ndim = len(np.shape(raw(x)))
    if axis is None:
        if ord is None:
            return _vector_norm(x if keepdims else ravel(x), None, None, keepdims)
        if ndim not in (1, 2):
            raise ValueError(f"norm: ord={ord!r} without axis needs a 1-D or 2-D input, got {ndim} dimensions "
                             f"(shape {np.shape(raw(x))}); pass axis (an int for vector norms, a pair for "
                             f"matrix norms)")
        axis = tuple(range(ndim))
    elif not isinstance(axis, (tuple, list)):
        axis = (axis,)
    if len(axis) == 2:
        return matrix_norm(x, ord="fro" if ord is None else ord, axis=tuple(axis), keepdims=keepdims)
    if len(axis) != 1:
        raise ValueError(f"norm: axis must be an int or a pair of ints, got {axis!r}")
    a = int(axis[0])
    if not -ndim <= a < ndim:
        raise ValueError(f"norm: axis {a} is out of range for an array of {ndim} dimensions")
    return _vector_norm(x, ord, a % ndim, keepdims)


def cond(x: Any, p: Any = None) -> Any:
    """Condition number, as ``numpy.linalg.cond``: p None/2/-2 from the singular values, the others
    ('fro', 'nuc', 1, -1, inf, -inf) as norm(x, p) * norm(inv(x), p); inf for singular matrices.

    >>> import chainrule as cr
    >>> cr.linalg.cond(cr.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    x = _floating(x)
    _matrices(x, "cond")
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = svdvals(x)
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        _square(x, "cond")
        try:
            r = matrix_norm(x, ord=p) * matrix_norm(inv(x), ord=p)
        except (np.linalg.LinAlgError, ValueError) as e:
            if "ord" in str(e) or "order" in str(e):
                raise
            want = _per_batch(lambda v: np.linalg.cond(v, p), x)    # singular somewhere: NumPy's inf, no gradient
            return _wrap(want) if isinstance(x, Tensor) and not x._level else want
    nan = np.isnan(whole_batch(r)) & ~np.isnan(whole_batch(x)).any(axis=(-2, -1))
    if np.any(nan):
        r = where(batched_like(nan, r), np.inf, r)
    return r
