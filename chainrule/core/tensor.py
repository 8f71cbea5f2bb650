"""Tensor: an ndarray plus the metadata autograd needs. Operators delegate to ``chainrule.ops``."""
from __future__ import annotations

import weakref
from typing import Any

from chainrule.core import _dtypes
from chainrule.core._backend import ndarray, np
from chainrule.core.errors import (
    ConversionError,
    DTypeError,
    GraphError,
    ShapeError,
    VmapError,
    conversion_source,
)
from chainrule.core.grad_mode import STATE


class Tensor:
    """An n-dimensional array that can record the ops applied to it.

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward(); x.grad
    tensor([2., 4.])
    """

    __slots__ = ("data", "grad_fn", "_requires_grad", "__dict__", "__weakref__")
    __array_priority__ = 1000
    # Rarely set fields default on the class until an instance sets its own, so a new op result
    # costs three stores (data, grad_fn, _requires_grad) and no per-instance dict.
    grad: Tensor | None = None
    _nr = 0                 # which output of grad_fn this tensor is
    _version = 0            # bumped by in-place ops; checked against saved versions in backward
    _family: list | None = None     # weakrefs of the tensors sharing this memory (views, detach):
                                    # they share one version counter, as in PyTorch
    _view: tuple | None = None      # a view's (base, regenerate(base), put_back(base, view)), set by
                                    # the ops that make views: in-place on a view rewrites the base
    _tangents: dict | None = None   # forward mode: {level: tangent}
    _leaf_edge: Any = None  # a leaf's (AccumulateGrad node, 0), created on first use
    _retains = False
    _level = 0                      # cr.vmap: the level a BatchedTensor is batched at (0: not batched)
    _view_meta: str | None = None   # "multi" (an output of split/unbind) or "no_grad" (made under
                                    # no_grad): in-place on it with grad recorded raises, as PyTorch

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        if isinstance(data, Tensor):
            data = data.data
        if type(data) is not ndarray:
            data = np.asarray(data)
        self.data = data
        self.grad_fn = None
        self._requires_grad = False
        if requires_grad:
            self.requires_grad = True

    # ----- metadata -----
    @property
    def requires_grad(self) -> bool:
        """Whether ops on this tensor are recorded for backward (settable on leaves)."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self.grad_fn is not None and not flag:
            raise GraphError("requires_grad can only be turned off on leaf tensors; "
                             "use .detach() to get a tensor outside the graph")
        if flag and not _dtypes.is_floating(self.data.dtype):
            raise DTypeError(f"requires_grad=True needs a floating dtype, but this tensor is "
                             f"{self.data.dtype} with shape {self.data.shape}; create it with "
                             f"dtype=cr.float32 (or float64), or from float data")
        self._requires_grad = bool(flag)

    def requires_grad_(self, flag: bool = True) -> Tensor:
        """Set ``requires_grad`` in place and return self (leaf tensors only)."""
        self.requires_grad = flag
        return self

    @property
    def is_leaf(self) -> bool:
        """True for a tensor no recorded op made (``grad_fn is None``): backward fills its ``.grad``."""
        return self.grad_fn is None

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of ``.data``."""
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of ``.data``."""
        return self.data.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self.data.ndim

    @property
    def size(self) -> int:
        """The number of elements (NumPy's ``size``, not torch's ``size()``)."""
        return self.data.size

    @property
    def nbytes(self) -> int:
        """Bytes of ``.data``."""
        return self.data.nbytes

    @property
    def retains_grad(self) -> bool:
        """True after ``retain_grad()`` on a non-leaf: backward fills its ``.grad`` too."""
        return self._retains

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self.data)

    def __iter__(self) -> Any:
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor; use .item() for its value")
        return (self[i] for i in range(len(self.data)))

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self.data), separator=", ", prefix="tensor(")
        extra = ""
        if self.data.dtype not in (_dtypes.get_default_dtype(), _dtypes.default_for(_dtypes.complex128),
                                   np.dtype(np.int64), np.dtype(np.bool_)):
            extra += f", dtype={self.data.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name}>"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    # ----- conversion -----
    def item(self) -> Any:
        """Return the value of a one-element tensor as a Python number."""
        if self.data.size != 1:
            raise ValueError(f"item(): only one-element tensors can be converted, got shape {self.shape}")
        value = self.data.item()
        if STATE.recorder is not None:      # cr.compile: a value the captured step depends on
            STATE.recorder.on_value(self, value, "item")
        return value

    def numpy(self) -> ndarray:
        """Return the underlying ndarray (shared, not copied); refuses a tensor in a graph (one that
        requires grad or carries a forward-mode tangent), as PyTorch does."""
        if self._requires_grad or self._tangents is not None:
            role = graph_role(self)
            if role:
                raise ConversionError(f"numpy(): this tensor {role}; call .detach().numpy() (the result "
                                      f"will not be tracked)")
        if STATE.recorder is not None:      # cr.compile: values read outside the recorded ops
            STATE.recorder.on_numpy(self, "numpy()")
        return self.data

    def tolist(self) -> Any:
        """The values as nested Python lists (any tensor, as ``.item()``)."""
        if STATE.recorder is not None:      # cr.compile: values read outside the recorded ops
            STATE.recorder.on_numpy(self, "tolist()")
        return self.data.tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> ndarray:
        if self._requires_grad or self._tangents is not None:      # the plain path: two attribute tests
            refuse_conversion(self)
        if STATE.recorder is not None:      # cr.compile: values read outside the recorded ops
            STATE.recorder.on_numpy(self, "np.asarray()")
        if dtype is not None and dtype != self.data.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __index__(self) -> int:
        value = int(self.data.__index__())
        if STATE.recorder is not None:      # cr.compile: a value the captured step depends on
            STATE.recorder.on_value(self, value, "index")
        return value

    def __hash__(self) -> int:
        return id(self)

    def __format__(self, spec: str) -> str:
        """``f"{t:.3f}"``: a one-element tensor formats its value (as ``t.item()``; a 0-d one also
        with an empty spec, as PyTorch and NumPy); any other tensor only with an empty spec (str)."""
        if self.ndim == 0 or spec and self.size == 1:
            return format(self.item(), spec)
        if not spec:
            return str(self)
        raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__ for a tensor of "
                        f"shape {self.shape}: only a one-element tensor formats its value; format "
                        f"t.item() or t.tolist(), or use str(t)")

    # ----- copy, deepcopy, pickle: a leaf's values and requires_grad, as in PyTorch -----
    def __reduce_ex__(self, protocol: Any) -> tuple:
        """Pickle (and ``copy.copy``) the values and ``requires_grad``: not ``.grad``, the graph, hooks
        or the memory a view shares (a non-leaf comes back as a leaf, as in PyTorch)."""
        if self._level:
            raise VmapError(f"pickle/copy of a tensor batched by cr.vmap (example shape {self.shape}): its "
                            f"values differ from example to example; return it from the vmapped "
                            f"function and pickle the result")
        return _rebuild, (type(self), self.data, self._requires_grad)

    def __deepcopy__(self, memo: dict) -> Tensor:
        """A leaf's own copy of the values, ``requires_grad`` and ``.grad``; a non-leaf is refused, as
        in PyTorch (its copy could not take part in the graph)."""
        if self.grad_fn is not None:
            raise GraphError(f"deepcopy: only leaf tensors support the deepcopy protocol (as in PyTorch), but "
                             f"this tensor of shape {self.shape} was computed by "
                             f"<{self.grad_fn.name}>; deep-copy t.detach() for its values "
                             f"(.requires_grad_() makes the copy a new leaf)")
        fn, (cls, data, requires_grad) = self.__reduce_ex__(4)
        new = fn(cls, data.copy(), requires_grad)
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        return new

    # ----- graph -----
    def detach(self) -> Tensor:
        """Return a tensor that shares data (and its version counter) but is outside the graph."""
        return wrap(self.data)._shares_memory_with(self)

    def _shares_memory_with(self, base: Tensor) -> Tensor:
        """Make ``self`` (a view of ``base``'s memory) share ``base``'s version counter."""
        family = base._family
        if family is None:
            family = base._family = [weakref.ref(base)]
        elif len(family) >= 16 and not len(family) & (len(family) - 1):   # at 16, 32, 64, ...: drop
            family[:] = [ref for ref in family if ref() is not None]       # the views that are gone
        family.append(weakref.ref(self))
        self._family = family
        self._version = base._version
        return self

    def detach_(self) -> Tensor:
        """Cut this tensor out of the graph in place."""
        self.grad_fn = None
        self._nr = 0
        self._requires_grad = False
        return self

    # ----- in place -----
    def _bump(self) -> None:
        """An in-place change: every tensor sharing this memory moves to the next version, and a
        node that kept one of them as its output learns that the value it saved is gone."""
        version = self._version + 1
        for t in [self] if self._family is None else (ref() for ref in self._family):
            if t is not None:
                t._version = version
                if t.grad_fn is not None:
                    t.grad_fn.output_modified(t._nr, t.data)

    def _assign(self, new: Tensor, op: str) -> Tensor:
        """Write ``new`` (an out-of-place result) into ``self``'s memory, after checking it may be
        (``graph.rebase`` then gives ``self`` ``new``'s history)."""
        if self.grad_fn is None and self._requires_grad and STATE.grad_enabled:
            raise GraphError(f"{op}: a leaf tensor that requires grad is used in an in-place "
                             f"operation; wrap it in cr.no_grad() or use an out-of-place op")
        form = f"t = t {op[:-1]} other" if op.endswith("=") else "an out-of-place op"
        if new.data.shape != self.data.shape:
            raise ShapeError(f"{op}: the in-place result has shape {new.data.shape}, which does not "
                             f"match the tensor's shape {self.data.shape}; use the out-of-place "
                             f"form ({form}) to get the broadcast result")
        if not self.data.flags.writeable:
            raise GraphError(f"{op}: this tensor of shape {self.data.shape} is a read-only view "
                             f"(e.g. a broadcast_to result, whose elements share memory); make a "
                             f"copy first (t = t.copy()) or use the out-of-place form ({form})")
        if not np.can_cast(new.data.dtype, self.data.dtype, casting="same_kind"):
            raise DTypeError(f"{op}: the result is {new.data.dtype}, which cannot be stored in place "
                             f"in this {self.data.dtype} tensor; use the out-of-place form "
                             f"({form}) or cast first (t = t.astype(cr.float32))")
        np.copyto(self.data, new.data, casting="same_kind")
        self._bump()
        return self

    def zero_(self) -> Tensor:
        """Fill with zeros in place (not recorded)."""
        self.data[...] = 0
        self._bump()
        return self

    def __pos__(self) -> Tensor:
        return self

NUMPY_CALL = "np.asarray() / np.array() (or a NumPy function that chainrule does not implement)"


def graph_role(t: Tensor) -> str:
    """What makes ``t`` part of a graph, for messages; "" if nothing does (it converts)."""
    if t._requires_grad:
        return "requires grad"
    if t._tangents and any(level in STATE.fw_levels for level in t._tangents):
        return "carries a forward-mode tangent (inside cr.jvp, cr.jacfwd or a dual_level)"
    return ""


def refuse_conversion(t: Tensor) -> None:
    """NumPy asks for the values of ``t``: raise if it is part of a graph (the derivative would be
    dropped silently), naming the library function that asked and chainrule's version of it."""
    role = graph_role(t)
    if not role:
        return
    caller, ours, constant = conversion_source(t)
    fix = f"use {ours}, which is differentiable" if ours else ("write it with chainrule ops (cr.stack for a "
                                                               "list of tensors, cr.special, cr.linalg, ...)")
    raise ConversionError(f"{caller or NUMPY_CALL} converts a tensor that {role} to a NumPy array, "
                          f"which would drop its derivative silently: " + (constant or f"{fix}; or pass "
                          f"t.detach() if you mean the result to be a constant"))


def wrap(data: Any) -> Tensor:
    """Wrap an op's raw result as a new tensor without copying (the hot path)."""
    t = _new(Tensor)
    t.data = data if type(data) is ndarray else np.asarray(data)
    t.grad_fn = None
    t._requires_grad = False
    return t


_new = object.__new__


def _rebuild(cls: type, data: ndarray, requires_grad: bool) -> Tensor:
    """A leaf of class ``cls`` holding ``data`` (unpickling, copy, deepcopy)."""
    t = _new(cls)
    t.data, t.grad_fn, t._requires_grad = data, None, requires_grad
    return t


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Create a leaf tensor holding a copy of ``data``.

    Python floats become the default dtype (float32), Python complex numbers its complex partner
    (complex64); NumPy arrays keep theirs.

    >>> import chainrule as cr
    >>> cr.tensor([1.0, 2.0]).dtype, cr.tensor([1, 2]).dtype
    (dtype('float32'), dtype('int64'))
    """
    if isinstance(data, Tensor):
        if data._level:                 # inside cr.vmap: a copy of the whole batch, still batched
            return data.copy_as_leaf(dtype, requires_grad)
        data = data.data
    python_data = not isinstance(data, (ndarray, np.generic))
    try:
        arr = np.array(data, dtype=dtype, copy=True)
    except ConversionError:         # tensors in a list: copied by value, out of the graph (as torch.tensor)
        arr = np.array(_values(data), dtype=dtype, copy=True)
    if arr.dtype.kind in "OUS":
        raise DTypeError(f"tensor: cannot hold {type(data).__name__} data ({arr.dtype}); a tensor "
                         f"holds numbers: pass numbers, (nested) lists of numbers or a numeric array")
    if dtype is None and python_data and arr.dtype.kind in "fc" and arr.dtype.itemsize in (8, 16):
        arr = arr.astype(_dtypes.default_for(arr.dtype))     # float64/complex128 from Python data
    out = Tensor(arr)
    if requires_grad:
        out.requires_grad = True
    return out


def _values(data: Any) -> Any:
    """Nested lists with each (unbatched) Tensor replaced by its ndarray."""
    if isinstance(data, (list, tuple)):
        return [_values(d) for d in data]
    return data.data if isinstance(data, Tensor) and not data._level else data
