"""Tensor's operators and op methods, attached when the ops load: ``tensor.py`` knows no ops.

Operators whose operand order matches the op bind straight to it (one Python call fewer per op);
the reflected ones swap the operands; in-place ones compute out of place and ``_assign`` the result.
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core.batched import batch_chain, physical, rebatch
from chainrule.core.errors import GraphError, VmapError
from chainrule.core.grad_mode import STATE, enable_grad, no_grad
from chainrule.core.graph import rebase
from chainrule.core.tensor import Tensor
from chainrule.numpy import spectral_functions as Sp
from chainrule.ops import elementwise as E
from chainrule.ops import linalg as L
from chainrule.ops import reduction as R
from chainrule.ops import shape as S
from chainrule.ops.nn import log_softmax, softmax

# the methods that are not ndarray's (those come from NumPy's namespace: see attach), and the operators
_METHODS = {
    "amax": R.amax, "amin": R.amin, "logsumexp": R.logsumexp,
    "exp": E.exp, "log": E.log, "tanh": E.tanh, "sigmoid": E.sigmoid, "relu": E.relu, "sqrt": E.sqrt,
    "abs": E.abs, "floor": E.floor, "ceil": E.ceil, "sign": E.sign,
    "square": E.square, "sin": E.sin, "cos": E.cos, "exp2": E.exp2, "log1p": E.log1p,
    "expm1": E.expm1, "reciprocal": E.reciprocal, "clone": E.copy, "moveaxis": S.moveaxis,
    "expand_dims": S.expand_dims, "flip": S.flip, "roll": S.roll, "broadcast_to": S.broadcast_to,
    "unbind": S.unbind, "angle": E.angle, "tile": S.tile, "matmul": L.matmul, "norm": Sp.norm,
    "softmax": softmax, "log_softmax": log_softmax,
    "__add__": E.add, "__sub__": E.subtract, "__mul__": E.multiply, "__truediv__": E.divide,
    "__floordiv__": E.floor_divide, "__mod__": E.mod, "__divmod__": E.divmod, "__pow__": E.power,
    "__matmul__": L.matmul, "__neg__": E.negative, "__abs__": E.abs, "__getitem__": S.getitem,
    "__lt__": E.less, "__le__": E.less_equal, "__gt__": E.greater, "__ge__": E.greater_equal,
    "__eq__": E.equal, "__ne__": E.not_equal, "__invert__": E.logical_not,
    "__and__": E.logical_and, "__or__": E.logical_or,
}
# ndarray methods that are not Tensor methods of the same function: NumPy runs them in place, or their first
# argument is not the array (a.compress(condition) is np.compress(condition, a)); reshape and transpose take
# ndarray's *shape and *axes forms (below)
_NOT_METHODS = frozenset({"partition", "put", "resize", "compress", "reshape", "transpose"})


def numpy_methods(namespace: dict) -> dict:
    """``{name: function}`` for ndarray's methods that NumPy's namespace (``namespace``) has as functions:
    ``t.sum()`` is ``cr.sum(t)``, ``t.any()`` is ``cr.any(t)``."""
    return {name: namespace[name] for name in dir(np.ndarray) if not name.startswith("_")
            and name not in _NOT_METHODS and callable(getattr(np.ndarray, name)) and callable(namespace.get(name))}
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
        if self._level or isinstance(other, Tensor) and other._level:
            return _write_batched(self, op(_batched_operand(self, symbol, other), other), symbol)
        _commit(self, op(_operand(self, symbol, other), other), symbol)
        return self
    return method


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    if self._level or isinstance(value, Tensor) and value._level or \
            any(isinstance(i, Tensor) and i._level for i in (index if isinstance(index, tuple) else (index,))):
        _write_batched(self, S.index_put(_batched_operand(self, "__setitem__", value), index, value), "__setitem__")
        return
    _commit(self, S.index_put(_operand(self, "__setitem__", value), index, value), "__setitem__")


def _commit(t: Tensor, new: Any, op: str) -> None:
    """The end of an in-place ``op`` outside cr.vmap: ``t`` takes the value and history of ``new``,
    and so do its bases and views."""
    st = STATE.__dict__
    if st["rare"] and st["recorder"] is not None:    # cr.compile: it writes (t._assign) and tapes the write
        st["recorder"].on_write(t, new, op)
    else:
        t._assign(new, op)
    rebase(t, new)
    if t._family is not None:
        after_write(t)


def _batched_operand(t: Tensor, op: str, other: Any) -> Any:
    """``_operand`` inside cr.vmap: on the physical array, where the views and the graph live."""
    inner = physical(t)
    if not t._level or not isinstance(inner, Tensor):
        return _operand(t, op, other)
    return rebatch(_operand(inner, op, other), batch_chain(t))


def _write_batched(t: Tensor, new: Any, op: str) -> Tensor:
    """An in-place op inside cr.vmap: the batch of ``t`` takes the batch of the result ``new``."""
    if new._level != t._level:
        raise VmapError(f"{op} inside cr.vmap would write a batched value (it differs from example to "
                        f"example) into a tensor of shape {tuple(t.shape)} that is not batched: use the "
                        f"out-of-place form, or make that tensor batched too (pass it through vmap's "
                        f"in_axes)")
    inner, value = t.value, new.value
    if isinstance(inner, Tensor):
        inner[...] = value                  # the inner level's own in-place machinery (views, graph)
    else:
        np.copyto(inner, value.data if isinstance(value, Tensor) else value, casting="same_kind")
    return t


_MULTI = ("{op}: this tensor is one of the views returned by split/unbind, and is being modified "
          "in place while gradients are recorded: such views may not be modified in place (as in "
          "PyTorch). Clone it first (v = v.copy()) or use an out-of-place op")
_NO_GRAD = ("{op}: this view was created under no_grad and is being modified in place while "
            "gradients are recorded, which is ambiguous (as in PyTorch it is an error). Create the "
            "view with grad mode on, modify it under cr.no_grad(), or clone it first")


def check_in_place(t: Tensor, op: str, other_requires_grad: bool) -> None:
    """Raise where PyTorch refuses an in-place change of the view ``t`` while gradients are
    recorded: an output of split/unbind, a view made under no_grad, a view of a leaf that requires
    grad (in-place ops and ``ctx.mark_dirty`` alike)."""
    if not STATE.grad_enabled:
        return
    if t._view_meta is not None and (t._requires_grad or other_requires_grad):
        raise GraphError((_MULTI if t._view_meta == "multi" else _NO_GRAD).format(op=op))
    base = t
    while base._view is not None:
        base = base._view[0]
    if base is not t and base.grad_fn is None and base._requires_grad:
        raise GraphError(f"{op}: a view of a leaf tensor that requires grad is used in an in-place "
                         f"operation; wrap it in cr.no_grad() or use an out-of-place op")


def _operand(t: Tensor, op: str, other: Any) -> Any:
    """What an in-place op on ``t`` computes from: a view afresh from its base (as PyTorch's
    CopySlices, the view's old node and its hooks are left behind), and a copy where the op keeps
    its operand for ``other``'s gradient (``t *= u`` needs t's value before the change)."""
    view = t._view
    if view is not None:
        check_in_place(t, op, isinstance(other, Tensor) and other._requires_grad)
        base = t
        while base._view is not None:
            base = base._view[0]
        if (STATE.grad_enabled and base._requires_grad) or (STATE.fw_levels and base._tangents):
            t = fresh(t)
    if isinstance(other, Tensor) and other._requires_grad and STATE.grad_enabled:
        t = E.copy(t)
    return t


def root_of(t: Tensor) -> Tensor:
    """The base ``fresh`` re-derives ``t`` from: the end of its chain of (regenerable) views."""
    while t._view is not None and t._view[1] is not None:
        t = t._view[0]
    return t


def fresh(t: Tensor) -> Tensor:
    """``t`` re-derived from its root base through its chain of views: new nodes, so the old view
    nodes (and hooks on them) are left behind, as PyTorch's as_strided regeneration does."""
    chain = []
    while t._view is not None and t._view[1] is not None:
        chain.append(t)
        t = t._view[0]
    for view in reversed(chain):
        t = view._view[1](t)
    return t


def after_write(t: Tensor) -> None:
    """After an in-place op on ``t``: if ``t`` is a view, its bases' history now runs through its
    new value (PyTorch's CopySlices: ``index_put``, or the inverse reshape/transpose, up a chain of
    views), and every view of this memory is re-derived from its root base, each straight from
    the root (PyTorch's regeneration of a view's grad_fn), also after a write that was not
    recorded (under no_grad, through detach()): a hook or retain_grad on one view never sees the
    gradient of another view of it. Forward mode alike: the base's tangent takes the view's new
    tangent, and each view's tangent is the view of its base's."""
    recorded, dual = STATE.grad_enabled, bool(STATE.fw_levels)
    view = t
    while view._view is not None:               # a vmap reshape that copied (shape._as_view): the
        if getattr(view, "_copy_link", False):  # write reaches its base as through a view
            base = view._view[0]
            np.copyto(base.data, np.reshape(view.data, base.data.shape))
        view = view._view[0]
    view = value = t
    while (recorded or dual) and view._view is not None and view._view[2] is not None:
        base, _, put_back = view._view
        if not ((recorded and (value._requires_grad or base._requires_grad))
                or (dual and (value._tangents or base._tangents))):
            break
        value = put_back(fresh(base), value)   # the base with the view's region replaced
        view = base
    if view is not t:
        rebase(view, value)                    # (the views between are re-derived below)
    for ref in list(t._family):                # (regenerated views join it: not visited)
        v = ref()
        if v is None or v._view is None or v._view[1] is None:
            continue
        if getattr(v, "_copy_link", False) and v is not t:     # (base before view: creation order)
            np.copyto(v.data, np.reshape(v._view[0].data, v.data.shape))
        root = root_of(v)
        track = root._requires_grad and v._view_meta != "no_grad"   # (that one is a leaf)
        if track or (dual and root._tangents):
            with enable_grad() if track else no_grad():     # recorded as PyTorch's, in any mode
                rebase(v, fresh(v), keep=v is not t or not recorded)   # (t's recorded write
                                                                        # moves its hook at once)


def _reshape(self: Tensor, *shape: Any) -> Tensor:
    """Reshape; accepts ``t.reshape(2, 3)`` and ``t.reshape((2, 3))``."""
    return S.reshape(self, shape[0] if len(shape) == 1 else shape)


def _transpose(self: Tensor, *axes: Any) -> Tensor:
    """Permute axes as ``ndarray.transpose`` (reverse when none are given)."""
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = tuple(axes[0])
    return S.transpose(self, axes or None)


def attach(dispatch_ufunc: Any, dispatch_function: Any, namespace: dict) -> None:
    """Give ``Tensor`` its op methods (ndarray's from NumPy's ``namespace``), operators and NumPy dispatch."""
    for name, fn in {**numpy_methods(namespace), **_METHODS}.items():
        setattr(Tensor, name, fn)
    for name, fn in _REFLECTED.items():
        setattr(Tensor, name, _reflected(fn))
    for name, (fn, symbol) in _IN_PLACE.items():
        setattr(Tensor, name, _in_place(fn, symbol))
    Tensor.__setitem__ = _setitem
    Tensor.reshape = Tensor.view = _reshape
    Tensor.transpose = Tensor.permute = _transpose
    Tensor.T = property(S.transpose)
    Tensor.real = property(S.real, lambda self, value: S.real(self).__setitem__(Ellipsis, value))
    Tensor.imag = property(S.imag, lambda self, value: S.imag(self).__setitem__(Ellipsis, value))
    Tensor.mT = property(lambda self: S.swapaxes(self, -1, -2))
    Tensor.__array_ufunc__ = lambda self, ufunc, method, *inputs, **kwargs: dispatch_ufunc(
        ufunc, method, inputs, kwargs)
    Tensor.__array_function__ = lambda self, func, types, args, kwargs: (
        _METADATA[func](args[0]) if func in _METADATA and len(args) == 1 and not kwargs
        else dispatch_function(func, args, kwargs))


# np.shape / np.ndim of a tensor: read, not dispatched (batching rules ask for them on every op)
_METADATA = {np.shape: lambda a: tuple(a.shape), np.ndim: lambda a: a.ndim}
