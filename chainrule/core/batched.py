"""BatchedTensor: what code inside ``cr.vmap`` sees. It holds the whole batch (its ``value``, the
batch on axis 0) and shows one example: its ``shape``, ``ndim`` and ``len`` leave the batch out.

Ops on it run the primitive's batching rule (``Primitive.batch``) once on the whole batch. It is
a Tensor, so every op, method and operator takes it. Its ``data`` (what ``raw(x)`` gives composite
ops) is an ``Example``: the example's shape, ndim, size and dtype, and no values. What would need
one example's *value* in Python (``if``, ``float``, ``.item()``, ``np.asarray``) raises VmapError,
since the examples differ.

Nested ``vmap`` nests them: the value of a level-2 BatchedTensor is a level-1 BatchedTensor (or
an ndarray, or a Tensor that records gradients: ``grad(vmap(f))`` records on the inside).
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core.errors import VmapConversionError, VmapError, numpy_caller
from chainrule.core.grad_mode import STATE, state_scope
from chainrule.core.tensor import NUMPY_CALL, Tensor, tensor

_CONTROL = ("{what} needs the value of a batched tensor inside cr.vmap, but it differs from example "
            "to example: Python control flow and conversions cannot depend on it. Write the branch "
            "with cr.where(cond, a, b) (both sides computed, one chosen per element), move the "
            "check outside the vmapped function, or loop over the examples in Python")


def _needs_one_value(what: str, error: type = VmapError) -> Any:
    """A method of BatchedTensor that needs one value (``what``), which the examples do not share."""
    def refuse(self: BatchedTensor) -> Any:
        raise error(_CONTROL.format(what=what))
    return refuse


class BatchedTensor(Tensor):
    """The batch of one ``vmap`` level behind one example's view (see the module docstring).

    >>> import chainrule as cr
    >>> shapes = []
    >>> cr.vmap(lambda x: shapes.append(x.shape) or x.sum())(cr.ones((5, 3)))
    tensor([3., 3., 3., 3., 3.])
    >>> shapes
    [(3,)]
    """

    def __init__(self, value: Any, level: int, size: int) -> None:
        self.value = value          # the whole batch: ndarray or Tensor, batch on axis 0
        self._level = level
        self.bsize = size
        self.grad_fn = None

    # what composite ops and user code see: one example
    @property
    def data(self) -> Example:      # raw(x): np.shape(raw(x)) is the example's shape
        return Example(self)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape[1:])      # (not np.shape: a Tensor would dispatch, slowly)

    @property
    def ndim(self) -> int:
        return len(self.value.shape) - 1

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return np.result_type(self.value) if not isinstance(self.value, Tensor) else self.value.dtype

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def _requires_grad(self) -> bool:
        return isinstance(self.value, Tensor) and self.value._requires_grad

    @_requires_grad.setter
    def _requires_grad(self, flag: bool) -> None:
        if flag:
            raise VmapError("requires_grad on a batched tensor inside cr.vmap: make the input require "
                            "grad before the vmap, or use cr.grad inside the vmapped function")

    requires_grad = _requires_grad

    @property
    def grad(self) -> Any:
        return None

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor (one example of a vmap batch is a scalar)")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"BatchedTensor(level={self._level}, batch={self.bsize}, example shape={self.shape}, "
                f"dtype={self.dtype})")

    # what needs one value raises: the examples differ
    item = _needs_one_value(".item()")
    __bool__ = _needs_one_value("bool() (an if, while, and/or or assert on a tensor)")
    __float__ = _needs_one_value("float()")
    __int__ = _needs_one_value("int()")
    __index__ = _needs_one_value("using a tensor as a Python index")
    numpy = _needs_one_value(".numpy()", VmapConversionError)
    tolist = _needs_one_value(".tolist()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        caller, ours = numpy_caller()
        fix = f"use {ours}, which batches" if ours else "write it with chainrule ops, which batch (cr.stack " \
                                                         "for a list of tensors, cr.where(cond, a, b) for a branch)"
        raise VmapConversionError(f"{caller or NUMPY_CALL} needs the values of a batched tensor inside cr.vmap, "
                                  f"but they differ from example to example: {fix}, move the NumPy call outside "
                                  f"the vmapped function, or loop over the examples in Python")

    def detach(self) -> BatchedTensor:
        value = self.value.detach() if isinstance(self.value, Tensor) else self.value
        return BatchedTensor(value, self._level, self.bsize)

    def copy_as_leaf(self, dtype: Any, requires_grad: bool) -> BatchedTensor:
        """``cr.tensor(x)`` of a batched ``x``: a copy of the batch, batched the same way."""
        if requires_grad:
            self._requires_grad = True          # raises: see the setter
        return BatchedTensor(tensor(self.value, dtype=dtype), self._level, self.bsize)

    def retain_grad(self) -> None:
        raise VmapError("retain_grad() on a batched tensor inside cr.vmap (as torch.func, unsupported: "
                        "its .grad would hold every example's gradient); register_hook sees that "
                        "gradient batched, or return the tensor from the function and use cr.grad on it")

    def register_post_accumulate_grad_hook(self, hook: Any) -> None:
        raise VmapError("register_post_accumulate_grad_hook on a batched tensor inside cr.vmap: a leaf "
                        "accumulates its .grad outside the vmap; register the hook there, or use "
                        "register_hook, which sees each example's gradient batched")

    def backward(self, *args: Any, **kwargs: Any) -> None:
        raise VmapError("backward() on a batched tensor inside cr.vmap: use cr.grad / cr.vjp inside "
                        "the vmapped function, or call backward on (a function of) the vmap's output")


class Example:
    """What ``raw(x)`` gives for a BatchedTensor ``x``: one example's metadata (shape, ndim, size,
    dtype), no values. NumPy reads its shape (``np.shape``, ``np.ndim``, ``np.size``); anything that
    needs values (``np.asarray``, ufuncs, comparisons) raises VmapError."""

    __slots__ = ("shape", "ndim", "size", "dtype")

    def __init__(self, t: BatchedTensor) -> None:
        self.shape, self.dtype = t.shape, t.dtype
        self.ndim, self.size = len(self.shape), t.size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor (one example of a vmap batch is a scalar)")
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise VmapError(_CONTROL.format(what="NumPy code on the values of a tensor (not a chainrule op)"))

    def __repr__(self) -> str:
        return f"<one example of a vmap batch: shape {self.shape}, {self.dtype}>"


def _no_values(name: str) -> Any:
    def refuse(self: Example, *args: Any) -> Any:
        raise VmapError(_CONTROL.format(what=f"NumPy code on the values of a tensor ({name})"))
    return refuse


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__add__", "__radd__",
              "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__neg__",
              "__abs__", "__invert__", "__and__", "__or__", "__getitem__", "__iter__", "__float__",
              "__int__", "__index__", "__pow__", "__matmul__", "astype", "copy", "any", "all",
              "sum", "reshape", "item", "tolist"):
    setattr(Example, _name, _no_values(_name))
Example.__hash__ = None  # type: ignore[assignment]


def is_batched(*xs: Any) -> bool:
    """Whether any of ``xs`` is batched by cr.vmap (so its values cannot be read per example)."""
    return any(isinstance(x, Tensor) and x._level for x in xs)


def whole_batch(x: Any) -> Any:
    """The values of every example of ``x`` at once (the ndarray behind all its vmap levels, batch
    axes first), for what a rule computes from values over leading axes alike (checks, an index).
    Not batched: the ndarray behind ``x``."""
    while isinstance(x, Tensor) and x._level:
        x = x.value
    return x.data if isinstance(x, Tensor) else x


def batched_like(v: Any, like: Any) -> Any:
    """``v``, computed from ``whole_batch(like)`` (its batch axes first), batched as ``like`` is."""
    if isinstance(like, Tensor) and like._level:
        return BatchedTensor(batched_like(v, like.value), like._level, like.bsize)
    return v


def level_of(x: Any) -> int:
    """The vmap level ``x`` is batched at (0: not batched)."""
    return x._level if isinstance(x, Tensor) else 0


# ----- the physical arrays behind a batched value (where graphs, views and hooks live) -----
def physical(x: Any) -> Any:
    """The array behind every level of ``x`` (batch axes first, lowest level first)."""
    while isinstance(x, Tensor) and x._level:
        x = x.value
    return x


def batch_chain(x: Any) -> tuple:
    """``((level, size), ...)`` of the BatchedTensors wrapping ``x``, outermost first."""
    chain = []
    while isinstance(x, Tensor) and x._level:
        chain.append((x._level, x.bsize))
        x = x.value
    return tuple(chain)


def rebatch(v: Any, chain: tuple) -> Any:
    """Inverse of ``physical``: the physical array ``v`` wrapped as ``batch_chain`` gave."""
    for level, size in reversed(chain):
        v = BatchedTensor(v, level, size)
    return v


def on_physical(fn: Any, like: Tensor) -> Any:
    """``fn`` of values batched as ``like``, as a function of their physical arrays (its result's
    physical array). It runs in ``levels_scope`` of the vmap levels active now, so it also runs
    once they have exited (an in-place op on a view the vmap returned)."""
    chain, levels = batch_chain(like), STATE.vmap_levels

    def run(*arrays: Any) -> Any:
        with levels_scope(levels):
            return physical(fn(*(rebatch(a, chain) for a in arrays)))
    return run


def levels_scope(levels: tuple) -> state_scope:
    """A scope where the vmap ``levels`` are active: the current levels if they extend them (a
    transform nested inside is still running), else ``levels``, reinstated (their vmap exited)."""
    now = STATE.vmap_levels
    return state_scope(vmap_levels=now if now[:len(levels)] == levels else levels)
