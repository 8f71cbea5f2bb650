"""Tensor's operators and op methods, attached when the ops load: ``tensor.py`` knows no ops.

Operators whose operand order matches the op bind straight to it (one Python call fewer per op);
the reflected ones swap the operands; in-place ones compute out of place and ``_assign`` the result.
"""
from __future__ import annotations

from typing import Any

from ..errors import GraphError
from ..grad_mode import STATE
from ..tensor import Tensor
from . import elementwise as E
from . import linalg as L
from . import reduction as R
from . import shape as S
from .nn import log_softmax, softmax

_METHODS = {
    "sum": R.sum, "mean": R.mean, "prod": R.prod, "max": R.max, "min": R.min, "amax": R.amax,
    "amin": R.amin, "var": R.var, "std": R.std, "cumsum": R.cumsum, "cumprod": R.cumprod,
    "argmax": R.argmax, "argmin": R.argmin, "argsort": R.argsort, "logsumexp": R.logsumexp,
    "exp": E.exp, "log": E.log, "tanh": E.tanh, "sigmoid": E.sigmoid, "relu": E.relu, "sqrt": E.sqrt,
    "abs": E.abs, "clip": E.clip, "round": E.round, "floor": E.floor, "ceil": E.ceil, "sign": E.sign,
    "square": E.square, "sin": E.sin, "cos": E.cos, "exp2": E.exp2, "log1p": E.log1p,
    "expm1": E.expm1, "reciprocal": E.reciprocal, "copy": E.copy, "clone": E.copy,
    "astype": E.astype, "swapaxes": S.swapaxes, "moveaxis": S.moveaxis, "squeeze": S.squeeze,
    "expand_dims": S.expand_dims, "ravel": S.ravel, "flatten": S.flatten, "flip": S.flip,
    "roll": S.roll, "repeat": S.repeat, "take": S.take, "trace": R.trace, "diagonal": S.diagonal,
    "broadcast_to": S.broadcast_to, "tile": S.tile, "sort": R.sort, "dot": L.dot,
    "matmul": L.matmul, "norm": L.norm, "softmax": softmax, "log_softmax": log_softmax,
    "__add__": E.add, "__sub__": E.subtract, "__mul__": E.multiply, "__truediv__": E.divide,
    "__floordiv__": E.floor_divide, "__mod__": E.mod, "__divmod__": E.divmod, "__pow__": E.power,
    "__matmul__": L.matmul, "__neg__": E.negative, "__abs__": E.abs, "__getitem__": S.getitem,
    "__lt__": E.less, "__le__": E.less_equal, "__gt__": E.greater, "__ge__": E.greater_equal,
    "__eq__": E.equal, "__ne__": E.not_equal, "__invert__": E.logical_not,
    "__and__": E.logical_and, "__or__": E.logical_or,
}
_REFLECTED = {"__radd__": E.add, "__rsub__": E.subtract, "__rmul__": E.multiply,
              "__rtruediv__": E.divide, "__rfloordiv__": E.floor_divide, "__rmod__": E.mod,
              "__rdivmod__": E.divmod, "__rpow__": E.power, "__rmatmul__": L.matmul}
_IN_PLACE = {"__iadd__": (E.add, "+="), "__isub__": (E.subtract, "-="), "__imul__": (E.multiply, "*="),
             "__itruediv__": (E.divide, "/="), "__imod__": (E.mod, "%="),
             "__ifloordiv__": (E.floor_divide, "//=")}


def _reflected(op: Any) -> Any:
    def method(self: Tensor, other: Any) -> Any:
        return op(other, self)
    return method


def _in_place(op: Any, symbol: str) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        if self._view is not None:
            _check_view(self, symbol)
        # the op may keep self for its gradient (t *= u needs t): give it the value before the change
        keep = E.copy(self) if isinstance(other, Tensor) and other._requires_grad else self
        self._assign(op(keep, other), symbol)
        if self._view is not None:
            _rewrite_bases(self)
        return self
    return method


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    if self._view is not None:
        _check_view(self, "__setitem__")
    self._assign(S.index_put(self, index, value), "__setitem__")
    if self._view is not None:
        _rewrite_bases(self)


def _check_view(view: Tensor, op: str) -> None:
    base = view
    while base._view is not None:
        base = base._view[0]
    if base.grad_fn is None and base._requires_grad and STATE.grad_enabled:
        raise GraphError(f"{op}: a view of a leaf tensor that requires grad is used in an in-place "
                         f"operation; wrap it in cr.no_grad() or use an out-of-place op")


def _rewrite_bases(view: Tensor) -> None:
    """After an in-place op on ``view``: its base's history now runs through the view's new value
    (PyTorch's CopySlices), up a chain of views, and each view is regenerated from its new base."""
    if not STATE.grad_enabled:
        return
    chain = []
    while view._view is not None and view._view[1] is not None:
        base, regenerate, put_back = view._view
        if not (view._requires_grad or base._requires_grad):
            break
        new_base = put_back(base, view)        # the base with the view's region replaced: recorded
        base.grad_fn, base._nr, base._requires_grad = new_base.grad_fn, new_base._nr, True
        chain.append((view, base, regenerate))
        view = base
    for view, base, regenerate in reversed(chain):
        again = regenerate(base)
        view.grad_fn, view._nr = again.grad_fn, again._nr


def _reshape(self: Tensor, *shape: Any) -> Tensor:
    """Reshape; accepts ``t.reshape(2, 3)`` and ``t.reshape((2, 3))``."""
    return S.reshape(self, shape[0] if len(shape) == 1 else shape)


def _transpose(self: Tensor, *axes: Any) -> Tensor:
    """Permute axes as ``ndarray.transpose`` (reverse when none are given)."""
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = tuple(axes[0])
    return S.transpose(self, axes or None)


def attach(dispatch_ufunc: Any, dispatch_function: Any) -> None:
    """Give ``Tensor`` its op methods, operators and NumPy dispatch."""
    for name, fn in _METHODS.items():
        setattr(Tensor, name, fn)
    for name, fn in _REFLECTED.items():
        setattr(Tensor, name, _reflected(fn))
    for name, (fn, symbol) in _IN_PLACE.items():
        setattr(Tensor, name, _in_place(fn, symbol))
    Tensor.__setitem__ = _setitem
    Tensor.reshape = Tensor.view = _reshape
    Tensor.transpose = Tensor.permute = _transpose
    Tensor.T = property(S.transpose)
    Tensor.mT = property(lambda self: S.swapaxes(self, -1, -2))
    Tensor.__array_ufunc__ = lambda self, ufunc, method, *inputs, **kwargs: dispatch_ufunc(
        ufunc, method, inputs, kwargs)
    Tensor.__array_function__ = lambda self, func, types, args, kwargs: dispatch_function(
        func, args, kwargs)
