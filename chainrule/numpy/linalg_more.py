"""The rest of ``numpy.linalg``'s products and reshaped systems, as composites: no new primitive.

matrix_power (binary exponentiation of matmul, inv for negative powers), multi_dot (NumPy's
optimal parenthesisation by the matrix-chain DP), tensorsolve and tensorinv (a reshape to a square
system, solve or inv, a reshape back), and NumPy 2's array-API members matrix_transpose, outer,
cross, vecdot, trace, diagonal, tensordot (np.linalg's versions: trace and diagonal act on the
LAST two axes, outer takes 1-D inputs only). Each is written with chainrule ops (matmul, solve,
inv, reshape, sum, ...), so reverse and forward mode, higher orders and complex inputs come from
those ops' rules; ndarrays in give ndarrays out, and values match NumPy's bit for bit where
NumPy computes the same products in the same order.
"""
from __future__ import annotations

import operator
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from chainrule.core._backend import np
from chainrule.core._registry import _python_array, no_out
from chainrule.core.errors import DTypeError, LinAlgError, ShapeError
from chainrule.core.tensor import Tensor
from chainrule.ops.elementwise import astype, conj, copy, where
from chainrule.ops.linalg import dot, inv, matmul, matrix_transpose, solve
from chainrule.ops.linalg import tensordot as _tensordot
from chainrule.ops.reduction import sum
from chainrule.ops.shape import diagonal as _diagonal
from chainrule.ops.shape import getitem, moveaxis, reshape, stack, transpose

__all__ = ["matrix_power", "multi_dot", "tensorsolve", "tensorinv", "matrix_transpose", "outer", "cross",
           "vecdot", "trace", "diagonal", "tensordot"]


def _arr(x: Any) -> Any:
    """Tensors and ndarrays as they are; lists, tuples and numbers as arrays (Python floats take
    the default dtype, as every chainrule op reads them)."""
    return x if isinstance(x, (Tensor, np.ndarray)) else _python_array(x)


@contextmanager
def _named(name: str) -> Iterator[None]:
    """Errors of the inner ops (a singular matrix in inv/solve, float16, ...) prefixed with the
    function the user called: "matrix_power(a, -2): inv: cannot apply to ..."."""
    try:
        yield
    except (ShapeError, DTypeError, LinAlgError) as e:
        raise type(e)(f"{name}: {e}") from None


def _square(a: Any, name: str) -> None:
    shape = a.shape
    if len(shape) < 2:
        raise ShapeError(f"{name}: needs a (stack of) square matrices, got a {len(shape)}-dimensional "
                         f"input of shape {shape}")
    if shape[-1] != shape[-2]:
        raise ShapeError(f"{name}: the last two dimensions must be square, got shape {shape} "
                         f"({shape[-2]} x {shape[-1]})")


def matrix_power(a: Any, n: int) -> Any:
    """``a`` raised to the integer power ``n`` (batched), as ``numpy.linalg.matrix_power``: binary
    exponentiation of matmul; ``n < 0`` inverts first; ``n = 0`` gives the identity (in ``a``'s
    dtype and shape, with a zero gradient); ``n = 1`` gives a copy.

    >>> import chainrule as cr
    >>> a = cr.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)
    >>> cr.numpy.linalg_more.matrix_power(a, 3)
    tensor([[1., 3.],
            [0., 1.]], grad_fn=<MatmulBackward>)
    """
    a = _arr(a)
    _square(a, "matrix_power")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: the exponent must be an integer, got {n!r} "
                        f"({type(n).__name__})") from None
    if n == 0:
        # the identity, taken by where from a constant: a's dtype and shape, and a zero gradient
        eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
        return where(np.True_, eye, a)
    if n < 0:
        with _named(f"matrix_power(a, {n})"):
            a = inv(a)
        n = -n
    elif n == 1:
        return copy(a)
    # NumPy's order of products (its short-cuts for 2 and 3, then least significant bit first)
    if n == 1:
        return a
    if n == 2:
        return matmul(a, a)
    if n == 3:
        return matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _chain_order(shapes: list) -> list:
    """NumPy's matrix-chain DP: s[i][j] is where the product of matrices i..j splits (Cormen,
    0-based), with the same float costs and the same tie-breaking as numpy.linalg.multi_dot."""
    n = len(shapes)
    p = [s[0] for s in shapes] + [shapes[-1][1]]
    m = [[0.0] * n for _ in range(n)]
    s = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            m[i][j] = float("inf")
            for k in range(i, j):
                q = m[i][k] + m[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if q < m[i][j]:
                    m[i][j] = q
                    s[i][j] = k
    return s


def multi_dot(arrays: Sequence[Any], *, out: Any = None) -> Any:
    """Product of two or more matrices in the cheapest order, as ``numpy.linalg.multi_dot``: the
    first and last operands may be 1-D (a row and a column vector), the others are 2-D; two
    operands are ``dot``.

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0, 2.0])
    >>> cr.numpy.linalg_more.multi_dot([x, cr.tensor([[1.0, 0.0], [0.0, 2.0]]), x])
    tensor(9.)
    """
    no_out("multi_dot", out)
    arrays = [_arr(a) for a in arrays]
    if len(arrays) < 2:
        raise ShapeError(f"multi_dot: expects at least two arrays, got {len(arrays)}")
    if len(arrays) == 2:
        return dot(arrays[0], arrays[1])
    first, last = arrays[0].ndim, arrays[-1].ndim
    if first == 1:
        arrays[0] = reshape(arrays[0], (1, -1))
    if last == 1:
        arrays[-1] = reshape(arrays[-1], (-1, 1))
    shapes = [tuple(a.shape) for a in arrays]
    for i, s in enumerate(shapes):
        if len(s) != 2:
            raise ShapeError(f"multi_dot: operand {i} is {len(s)}-dimensional (shape {s}); the first and "
                             f"last operands must be 1-D or 2-D, the others 2-D")
    for i in range(len(shapes) - 1):
        if shapes[i][1] != shapes[i + 1][0]:
            raise ShapeError(f"multi_dot: operands {i} and {i + 1} are not aligned: shapes {shapes[i]} and "
                             f"{shapes[i + 1]} ({shapes[i][1]} != {shapes[i + 1][0]})")
    if len(arrays) == 3:
        (a0, a1b0), (b1c0, c1) = shapes[0], shapes[2]
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            result = matmul(matmul(arrays[0], arrays[1]), arrays[2])
        else:
            result = matmul(arrays[0], matmul(arrays[1], arrays[2]))
    else:
        order = _chain_order(shapes)

        def product(i: int, j: int) -> Any:
            if i == j:
                return arrays[i]
            return matmul(product(i, order[i][j]), product(order[i][j] + 1, j))
        result = product(0, len(arrays) - 1)
    if first == 1 and last == 1:
        return getitem(result, (0, 0))
    if first == 1 or last == 1:
        return reshape(result, (-1,))
    return result


def _prod(shape: Sequence[int]) -> int:
    p = 1
    for k in shape:
        p *= int(k)
    return p


def tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    """The ``x`` with ``tensordot(a, x, axes=x.ndim) == b``, as ``numpy.linalg.tensorsolve``: ``a``'s
    axes listed in ``axes`` move to the end, ``a`` is reshaped to a square matrix, solved, and the
    solution takes the shape of ``a``'s trailing ``a.ndim - b.ndim`` axes.

    >>> import chainrule as cr
    >>> a = cr.tensor(np.eye(6).reshape(2, 3, 6) * 2.0)
    >>> cr.numpy.linalg_more.tensorsolve(a, cr.tensor([[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]])).shape
    (6,)
    """
    a, b = _arr(a), _arr(b)
    an = a.ndim
    if axes is not None:
        order = list(range(an))
        for k in axes:
            order.remove(k)
            order.insert(an, k)
        a = transpose(a, tuple(order))
    oldshape = tuple(a.shape[-(an - b.ndim):])
    n = _prod(oldshape)
    if _prod(a.shape) != n * n or _prod(b.shape) != n:
        raise ShapeError(f"tensorsolve: a of shape {tuple(a.shape)} (after moving axes={axes} to the end) and "
                         f"b of shape {tuple(b.shape)} do not make a square system: need "
                         f"prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim]) == b.size, got "
                         f"{_prod(a.shape[b.ndim:])}, {_prod(a.shape[:b.ndim])} and {_prod(b.shape)}")
    with _named("tensorsolve"):
        x = solve(reshape(a, (n, n)), reshape(b, (n,)))
    return reshape(x, oldshape)


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse for ``tensordot(ainv, a, axes=ind)``-style products, as ``numpy.linalg.tensorinv``:
    ``a`` reshaped to ``(prod(a.shape[:ind]), prod(a.shape[ind:]))``, inverted, reshaped to
    ``a.shape[ind:] + a.shape[:ind]``.

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.tensorinv(cr.tensor(np.eye(4).reshape(4, 2, 2) * 2.0), ind=1).shape
    (2, 2, 4)
    """
    a = _arr(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    shape = tuple(a.shape)
    rows, cols = _prod(shape[:ind]), _prod(shape[ind:])
    if rows != cols or ind > len(shape):
        raise ShapeError(f"tensorinv: a of shape {shape} with ind={ind} is not square: prod(a.shape[:{ind}]) = "
                         f"{rows} must equal prod(a.shape[{ind}:]) = {cols}")
    with _named("tensorinv"):
        ainv = inv(reshape(a, (rows, cols)))
    return reshape(ainv, shape[ind:] + shape[:ind])


def outer(x1: Any, x2: Any, /) -> Any:
    """Outer product of two 1-D inputs, as ``numpy.linalg.outer`` (which, unlike ``numpy.outer``,
    refuses other ranks).

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.outer(cr.tensor([1.0, 2.0]), cr.tensor([3.0, 4.0, 5.0])).shape
    (2, 3)
    """
    x1, x2 = _arr(x1), _arr(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(f"outer: inputs must be one-dimensional, got shapes {tuple(x1.shape)} and "
                         f"{tuple(x2.shape)} (numpy.outer / cr.outer flatten them instead)")
    return reshape(x1, (-1, 1)) * reshape(x2, (1, -1))


def _vector_pair(x1: Any, x2: Any, axis: int, op: str) -> tuple:
    """``(x1, x2)`` as arrays, checked to have an axis ``axis`` (cross's and vecdot's)."""
    x1, x2 = _arr(x1), _arr(x2)
    for s in (x1.shape, x2.shape):
        if not -len(s) <= axis < len(s):
            raise ShapeError(f"{op}: axis {axis} is out of range for shapes {tuple(x1.shape)} and "
                             f"{tuple(x2.shape)}")
    return x1, x2


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """Cross product of (broadcast stacks of) 3-vectors along ``axis``, as ``numpy.linalg.cross``.

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.cross(cr.tensor([1.0, 0.0, 0.0]), cr.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    x1, x2 = _vector_pair(x1, x2, axis, "cross")
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ShapeError(f"cross: both inputs must be (stacks of) 3-vectors along axis {axis}, got shapes "
                         f"{tuple(x1.shape)} and {tuple(x2.shape)} ({x1.shape[axis]} and {x2.shape[axis]} "
                         f"components)")
    a, b = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    a0, a1, a2 = (getitem(a, (Ellipsis, i)) for i in range(3))
    b0, b1, b2 = (getitem(b, (Ellipsis, i)) for i in range(3))
    cp = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return moveaxis(cp, -1, axis % cp.ndim)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """``sum(conj(x1) * x2)`` along ``axis`` (broadcasting the other axes), as ``numpy.linalg.vecdot``.

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.vecdot(cr.tensor([[1.0, 2.0], [3.0, 4.0]]), cr.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    x1, x2 = _vector_pair(x1, x2, axis, "vecdot")
    if x1.shape[axis] != x2.shape[axis]:
        raise ShapeError(f"vecdot: the vectors along axis {axis} differ in length: shapes {tuple(x1.shape)} "
                         f"and {tuple(x2.shape)} ({x1.shape[axis]} != {x2.shape[axis]})")
    a, b = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    if a.dtype.kind == "c":
        a = conj(a)
    prod = a * b
    out = sum(prod, axis=-1)
    return out if out.dtype == prod.dtype else astype(out, prod.dtype)     # int32 stays int32, as NumPy


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """Sum of the diagonals of the LAST two axes, as ``numpy.linalg.trace`` (``numpy.trace`` and
    ``cr.trace`` take the first two).

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.trace(cr.tensor([[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]]))
    tensor([ 3., 11.])
    """
    x = _arr(x)
    if x.ndim < 2:
        raise ShapeError(f"trace: needs at least 2 dimensions, got shape {tuple(x.shape)}")
    out = sum(_diagonal(x, offset, -2, -1), axis=-1, dtype=dtype)
    return out if dtype is None or out.dtype == np.dtype(dtype) else astype(out, dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """Diagonals of the LAST two axes, as ``numpy.linalg.diagonal`` (a view).

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.diagonal(cr.tensor([[1.0, 2.0], [3.0, 4.0]]), offset=1)
    tensor([2.])
    """
    x = _arr(x)
    if x.ndim < 2:
        raise ShapeError(f"diagonal: needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return _diagonal(x, offset, -2, -1)


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    """``numpy.linalg.tensordot``: ``cr.tensordot`` with NumPy 2's keyword-only ``axes``.

    >>> import chainrule as cr
    >>> cr.numpy.linalg_more.tensordot(cr.tensor([[1.0, 2.0]]), cr.tensor([[3.0, 4.0]]), axes=2)
    tensor(11.)
    """
    return _tensordot(_arr(x1), _arr(x2), axes=axes)

