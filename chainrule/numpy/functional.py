"""NumPy's functional-programming routines: ``piecewise``, ``apply_along_axis`` and
``apply_over_axes``, differentiable through the functions they call (composites)."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from chainrule.core._backend import ndarray, np
from chainrule.core.batched import is_batched
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.numpy._util import _arr, _as_result, _axis1, _dtype, _ndim, _raw, _raw_tree, _shape
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.elementwise import where
from chainrule.ops.shape import broadcast_to, expand_dims, getitem, index_put, moveaxis, reshape, stack, transpose


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[i]`` applied where ``condlist[i]`` holds (constants allowed), as ``numpy.piecewise``;
    the gradient flows through the pieces chosen (chainrule-callable functions).

    >>> import chainrule as cr, numpy as np
    >>> x = np.array([-2.0, 3.0])
    >>> cr.piecewise(x, [x < 0], [lambda v: -v, lambda v: v * v])
    array([2., 9.])
    """
    x = _arr(x)
    n2 = len(funclist)
    if is_batched(condlist) or isinstance(condlist, (list, tuple)) and is_batched(*condlist):
        return _piecewise_batched(x, condlist, funclist, args, kw)
    if isinstance(condlist, Tensor):
        condlist = condlist.data
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, ndarray, Tensor)) and _ndim(x) != 0):
        condlist = [condlist]
    conds = np.asarray(_raw_tree(list(condlist) if isinstance(condlist, (list, tuple)) else condlist),
                       dtype=bool)
    if _with_otherwise(len(conds), n2):
        conds = np.concatenate([conds, ~np.any(conds, axis=0, keepdims=True)], axis=0)
    y: Any = np.zeros(_shape(x), _dtype(x))
    for cond, func in zip(conds, funclist):
        if not callable(func):
            y = index_put(y, cond, _raw(func) if not isinstance(func, Tensor) else func)
        else:
            vals = getitem(x, cond)
            if math.prod(_shape(vals)) > 0:
                y = index_put(y, cond, func(vals, *args, **kw))
    return _as_result(y, (x,))


def _with_otherwise(n: int, n2: int) -> bool:
    """Whether ``n`` conditions for ``n2`` functions leave the last function for "otherwise" (n2 = n + 1);
    else there must be one function per condition."""
    if n != n2 and n != n2 - 1:
        raise ShapeError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    return n == n2 - 1


def _piecewise_batched(x: Any, condlist: Any, funclist: Sequence[Any], args: tuple, kw: dict) -> Any:
    """``piecewise`` with batched conditions (inside cr.vmap): each function runs on all of ``x`` and
    a where picks its values (which elements a condition selects depends on the values)."""
    if isinstance(condlist, Tensor) and _ndim(condlist) == _ndim(x):
        condlist = [condlist]
    conds = [broadcast_to(c if isinstance(c, Tensor) else np.asarray(_raw(c), dtype=bool), _shape(x))
             for c in condlist]
    if _with_otherwise(len(conds), len(funclist)):
        rest = conds[0]
        for c in conds[1:]:
            rest = rest | c
        conds.append(~rest)
    y: Any = np.zeros(_shape(x), _dtype(x))
    for cond, func in zip(conds, funclist):
        vals = func(x, *args, **kw) if callable(func) else func
        y = where(cond, _astype(_arr(vals), _dtype(x)), y)
    return y


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """``func1d`` on every 1-D slice along ``axis``, results stacked, as ``numpy.apply_along_axis``;
    differentiable when ``func1d`` is.

    >>> import chainrule as cr, numpy as np
    >>> cr.apply_along_axis(lambda v: v[::-1], 1, np.arange(4.0).reshape(2, 2))
    array([[1., 0.],
           [3., 2.]])
    """
    arr = _arr(arr)
    nd = _ndim(arr)
    axis = _axis1(axis, nd, "apply_along_axis")
    view = moveaxis(arr, axis, -1)
    outer = _shape(view)[:-1]
    if math.prod(outer) == 0:
        raise ShapeError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = []
    for ind in np.ndindex(outer):
        r = _arr(func1d(getitem(view, ind + (Ellipsis,)), *args, **kwargs))
        if results:
            if _shape(r) != _shape(results[0]):
                raise ShapeError(f"apply_along_axis: func1d returned shape {_shape(r)}, then "
                                 f"{_shape(results[0])}: every call must return the same shape")
            r = _astype(r, _dtype(results[0]))
        results.append(r)
    res_shape = _shape(results[0])
    buff = reshape(stack(results, axis=0), outer + res_shape)
    dims = list(range(len(outer) + len(res_shape)))
    nb = len(dims)
    perm = dims[:axis] + dims[nb - len(res_shape):] + dims[axis:nb - len(res_shape)]
    return transpose(buff, perm)


def apply_over_axes(func: Callable, a: Any, axes: Any) -> Any:
    """``func(a, axis)`` repeatedly over ``axes``, keeping dimensions, as ``numpy.apply_over_axes``.

    >>> import chainrule as cr, numpy as np
    >>> cr.apply_over_axes(cr.sum, np.ones((2, 3)), [0, 1])
    array([[6.]])
    """
    val = _arr(a)
    n = _ndim(val)
    if np.ndim(axes) == 0:
        axes = (axes,)
    for axis in axes:
        if axis < 0:
            axis = n + axis
        res = func(val, axis)
        if _ndim(res) != _ndim(val):
            res = expand_dims(res, axis)
            if _ndim(res) != _ndim(val):
                raise ShapeError("function is not returning an array of the correct shape")
        val = res
    return val


__all__ = ["piecewise", "apply_along_axis", "apply_over_axes"]
NUMPY: dict = {getattr(np, name): globals()[name] for name in __all__ if hasattr(np, name)}
