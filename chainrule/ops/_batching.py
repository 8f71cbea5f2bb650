"""Batching rules for ``cr.vmap``, shared by the op modules (each primitive names its rule in
``defprim(..., batch=...)``; elementwise ops get ``_registry.batch_elementwise`` by default).

A rule is ``rule(prim, xs, batched, params, size) -> out``: ``xs`` holds each batched input's whole
batch (batch on axis 0) and the unbatched inputs as they are; ``batched[i]`` says which is which;
``params`` are the op's parameters for one example. The rule returns the op's result for the whole
batch, batch on axis 0, computed with chainrule ops (so it is recorded and differentiable). The
rules translate an example's parameters (axes, shapes, indices) to the batch's.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from chainrule.core._backend import np
from chainrule.core._registry import (
    PRIMITIVES,
    Batch,
    Primitive,
    apply,
    batch_elementwise,
    example_ndim,
    lift,
    refuse_batched_params,
    set_batch,
)
from chainrule.core.errors import VmapError
from chainrule.core.tensor import Tensor

Rule = Callable[..., Any]

__all__ = ["Batch", "batch_axes", "batch_unary", "batch_elementwise", "shift_axis", "shift_axes", "expand",
           "move_to_front", "transpose", "reshape", "batch_index", "example_ndim", "lift", "inverse", "no_rule",
           "set_batch", "region_shape"]


def shift_axis(axis: int, ndim: int) -> int:
    """An example's axis, as an axis of the batch (batch first)."""
    return int(axis) % max(ndim, 1) + 1


def shift_axes(axis: Any, ndim: int) -> Any:
    """``axis`` (int, tuple or None for all) of an example, as axes of the batch."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(shift_axis(a, ndim) for a in axis)
    return shift_axis(axis, ndim)


def batch_unary(prim: Primitive, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """The rule of ops that map an example's trailing axes and broadcast leading ones (matrix
    functions of ``(..., n, n)``, real/imag, view_as_real): the op once, as it is."""
    refuse_batched_params(prim, params)
    if len(xs) > 1 and not all(batched):
        xs = tuple(x if b else expand(x, size) for x, b in zip(xs, batched))
    return apply(prim, xs, params)


def batch_axes(*names: str, shapes: Sequence[str] = ()) -> Rule:
    """The rule of a one-input op whose parameters ``names`` are axes of the example (int, tuple or
    None for all) and ``shapes`` are the example's shape: both shifted past the batch axis."""
    def rule(prim: Primitive, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
        refuse_batched_params(prim, params)
        if len(xs) > 1 and not all(batched):
            xs = tuple(x if b else expand(x, size) for x, b in zip(xs, batched))
        ndim = example_ndim(xs[0], True)
        p = dict(params)
        for n in names:
            p[n] = shift_axes(p[n], ndim)
        for n in shapes:
            p[n] = (size,) + tuple(p[n])
        return apply(prim, xs, p)
    return rule


# ----- small helpers the rules share (recorded ops on the batch) -----
def expand(x: Any, size: int) -> Any:
    """An unbatched value as a batch of ``size`` copies (a broadcast view, no copy)."""
    shape = tuple(np.shape(x))
    return apply(PRIMITIVES["broadcast_to"], (reshape(x, (1,) + shape),), {"shape": (size,) + shape})


def reshape(x: Any, shape: tuple) -> Any:
    return apply(PRIMITIVES["reshape"], (x,), {"shape": tuple(shape), "in_shape": tuple(np.shape(x))})


def transpose(x: Any, axes: Sequence[int]) -> Any:
    axes = tuple(int(a) for a in axes)
    return x if axes == tuple(range(len(axes))) else apply(PRIMITIVES["transpose"], (x,), {"axes": axes})


def move_to_front(x: Any, axis: int) -> Any:
    """Axis ``axis`` of ``x`` moved to position 0."""
    ndim = np.ndim(x)
    return transpose(x, (axis,) + tuple(a for a in range(ndim) if a != axis))


# ----- indexing -----
def _is_array(i: Any) -> bool:
    return isinstance(i, (np.ndarray, Tensor)) or (isinstance(i, (np.integer, int)) and not isinstance(i, bool))


def batch_index(index: tuple, ndim: int, size: int) -> tuple[tuple, tuple]:
    """``(index of the batch, perm)`` for an example's normalized ``index`` (slices, ints, None,
    Ellipsis, integer arrays; batched integer arrays as BatchedTensors of the current level, given
    marked ``Batch``): ``batch[index of the batch]``,
    transposed by ``perm``, is ``(size,) + example result``."""
    # Ellipsis (and the trailing dims an index leaves out) as the slices they stand for, so
    # positions are explicit
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    flat: list = []
    for i in index:
        if i is Ellipsis:
            flat.extend([slice(None)] * (ndim - used))
        else:
            flat.append(i)
    if not any(i is Ellipsis for i in index):      # the dims the index leaves out, explicit too
        flat.extend([slice(None)] * (ndim - used))
    arrays = [k for k, i in enumerate(flat) if _is_array(i) or isinstance(i, Batch)]
    if not arrays:
        return (slice(None),) + tuple(flat), ()
    shapes = [np.shape(i.value)[1:] if isinstance(i, Batch) else np.shape(i) for i in (flat[k] for k in arrays)]
    adv = np.broadcast_shapes(*shapes)
    nadv = len(adv)
    adjacent = arrays == list(range(arrays[0], arrays[-1] + 1))
    # result dims that come from entries before the advanced block (slices and None)
    before = sum(1 for i in flat[:arrays[0]] if isinstance(i, slice) or i is None)
    if not any(isinstance(flat[k], Batch) for k in arrays):
        # unbatched index arrays: a leading slice keeps the batch in front, unless NumPy moves the
        # (non-adjacent) advanced dims first
        pindex = (slice(None),) + tuple(flat)
        if adjacent:
            return pindex, ()
        return pindex, (nadv,) + tuple(a for a in range(nadv + 1 + _rest(flat)) if a != nadv)
    # batched index arrays: an arange over the batch joins the advanced block, which NumPy then puts
    # first: (size, *adv, *rest); the example wants its advanced dims after ``before`` rest dims
    batch = np.arange(size).reshape((size,) + (1,) * nadv)
    pflat = []
    for i in flat:
        if isinstance(i, Batch):
            if getattr(i.value, "dtype", None) == np.bool_:
                raise VmapError("indexing with a batched boolean mask inside cr.vmap: the result's shape "
                                "would depend on the values; use cr.where(mask, x, 0) instead")
            pflat.append(lift(i.value, nadv, size))
        else:
            pflat.append(i)
    pindex = (batch,) + tuple(pflat)
    if not adjacent:
        return pindex, ()
    rest = _rest(flat)
    perm = (0,) + tuple(range(1 + nadv, 1 + nadv + before)) + tuple(range(1, 1 + nadv)) + \
        tuple(range(1 + nadv + before, 1 + nadv + rest))
    return pindex, perm


def _rest(flat: list) -> int:
    """Result dims from basic entries (slices and None)."""
    return sum(1 for i in flat if isinstance(i, slice) or i is None)


def region_shape(shape: tuple, index: tuple) -> tuple:
    """The shape of ``x[index]`` for an ``x`` of ``shape`` (computed on a zero-byte stand-in)."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.bool_), shape=shape, strides=(0,) * len(shape))
    # (a tensor index by its array: np.asarray would count as a value read under cr.compile)
    clean = tuple(i.value if isinstance(i, Batch) else
                  (i.data if type(i) is Tensor else np.asarray(i)) if isinstance(i, Tensor) else i for i in index)
    return dummy[clean].shape


def inverse(perm: Sequence[int]) -> tuple:
    inv = [0] * len(perm)
    for k, p in enumerate(perm):
        inv[p] = k
    return tuple(inv)


def no_rule(reason: str) -> Rule:
    """The rule of an op that cannot be batched (its result's shape depends on the values)."""
    def rule(prim: Primitive, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
        raise VmapError(f"{prim.name} inside cr.vmap: {reason}")
    return rule
