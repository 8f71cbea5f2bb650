"""``cr.vmap``: run a function written for one example on a whole batch, in one pass.

Inside the function every batched argument is a ``BatchedTensor`` (``chainrule.core.batched``): code sees
one example's shape, and each op runs its primitive's batching rule once on the whole batch. The
semantics are ``torch.func.vmap``'s, under JAX's names (``in_axes``, ``out_axes``, ``axis_size``):
see docs/vmap.md.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from chainrule import numpy as _ops
from chainrule.core import _pytree as tree
from chainrule.core import random as _random
from chainrule.core._backend import ndarray, np
from chainrule.core.batched import BatchedTensor, levels_scope, physical
from chainrule.core.errors import GraphError, VmapError
from chainrule.core.grad_mode import STATE, state_scope
from chainrule.core.tensor import Tensor

RANDOMNESS = ("error", "different", "same")


class Level:
    """One active ``vmap``: its batch size, its randomness and its place in the nesting (1 = outermost)."""

    __slots__ = ("size", "randomness", "index")

    def __init__(self, size: int, randomness: str, index: int) -> None:
        self.size, self.randomness, self.index = size, randomness, index

    def generator(self, gen: Any) -> Any:
        """What ``cr.random.get_generator`` hands out inside this level (see ``randomness``)."""
        return gen if self.randomness == "same" else _BatchedGenerator(gen, self)


# positional index of ``size`` in numpy.random.Generator's draw methods
_SIZE_AT = {"random": 0, "standard_normal": 0, "standard_exponential": 0, "normal": 2, "uniform": 2,
            "integers": 2, "binomial": 2, "gamma": 2, "beta": 2, "lognormal": 2, "laplace": 2,
            "logistic": 2, "gumbel": 2, "exponential": 1, "poisson": 1, "geometric": 1,
            "standard_gamma": 1, "standard_t": 1, "chisquare": 1, "rayleigh": 1, "bernoulli": 1}


class _BatchedGenerator:
    """A generator seen inside ``vmap``: ``randomness="different"`` draws one independent sample per
    example (a batched result); ``"error"`` refuses to draw."""

    def __init__(self, gen: Any, level: Level) -> None:
        self._gen, self._level = gen, level

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._gen, name)
        if name not in _SIZE_AT:
            if callable(target) and not name.startswith("_") and name not in ("bit_generator", "spawn"):
                return self._refuse(name)
            return target
        if self._level.randomness == "error":
            return self._refuse(name)
        pos, level = _SIZE_AT[name], self._level

        def draw(*args: Any, **kwargs: Any) -> Any:
            args = list(args)
            size = args.pop(pos) if len(args) > pos else kwargs.pop("size", None)
            if any(isinstance(a, BatchedTensor) for a in list(args) + list(kwargs.values())):
                raise VmapError(f"vmap: generator.{name} with batched parameters is not supported; draw "
                                f"standard samples and transform them (e.g. loc + scale * standard_normal)")
            shape = () if size is None else (size,) if isinstance(size, (int, np.integer)) else tuple(size)
            value = target(*args, size=(level.size,) + shape, **kwargs)
            return BatchedTensor(Tensor(value), level.index, level.size)
        return draw

    def _refuse(self, name: str) -> Callable:
        randomness = self._level.randomness

        def refuse(*args: Any, **kwargs: Any) -> Any:
            if randomness == "error":
                raise VmapError(f"vmap: a random draw (generator.{name}) inside a vmap with "
                                f"randomness='error' (the default); pass randomness='different' "
                                f"(independent draws per example) or 'same' (one draw shared by all)")
            raise VmapError(f"vmap: generator.{name} is not supported with randomness='different'; "
                            f"use one of {sorted(_SIZE_AT)}")
        return refuse


def vmap(func: Callable, in_axes: Any = 0, out_axes: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None, axis_size: int | None = None) -> Callable:
    """Vectorize ``func`` over a batch axis of its arguments, as ``torch.func.vmap``.

    ``in_axes``: per argument, the axis holding the batch (None: not batched), as an int/None for
    all, or a tuple with one entry per positional argument (each an int/None or a pytree matching
    that argument). ``out_axes`` likewise for the outputs. Keyword arguments are not batched.
    ``randomness``: "error", "different" or "same" for ``cr.random`` draws inside. ``chunk_size``:
    at most that many examples per pass (bounds memory). ``axis_size``: the batch size when no
    argument is batched.

    >>> import chainrule as cr
    >>> x = cr.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> cr.vmap(lambda row: row @ row)(x)                 # one dot product per row
    tensor([ 5., 25., 61.])
    >>> cr.vmap(lambda a, b: a * b, in_axes=(0, None))(x, cr.tensor([10.0, 100.0])).shape
    (3, 2)
    """
    if randomness not in RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {RANDOMNESS}, got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")
    if axis_size is not None and (not isinstance(axis_size, int) or axis_size < 0):
        raise ValueError(f"vmap: axis_size must be a non-negative int or None, got {axis_size!r}")
    name = getattr(func, "__name__", type(func).__name__)

    @functools.wraps(func)
    def vectorized(*args: Any, **kwargs: Any) -> Any:
        leaves, structure = tree.flatten(args)
        axes = _prefix_axes(in_axes, args, "in_axes", name, top=True)
        size = _batch_size(leaves, axes, structure, axis_size, name)
        if chunk_size is None or chunk_size >= size:
            return _run(func, leaves, structure, axes, size, kwargs, out_axes, randomness, name)
        return _chunked(func, leaves, structure, axes, size, kwargs, out_axes, randomness, name, chunk_size)
    return vectorized


def _run(func: Callable, leaves: list, structure: Any, axes: list, size: int, kwargs: dict,
         out_axes: Any, randomness: str, name: str) -> Any:
    index = len(STATE.vmap_levels) + 1
    level = Level(size, randomness, index)
    with state_scope(vmap_levels=STATE.vmap_levels + (level,)):
        inside = [x if a is None else to_batched(x, a, level) for x, a in zip(leaves, axes)]
        out = func(*tree.unflatten(structure, inside), **kwargs)
    oleaves, ostructure = tree.flatten(out)
    oaxes = _prefix_axes(out_axes, out, "out_axes", name, top=False)
    results = [from_batched(o, a, level, name) for o, a in zip(oleaves, oaxes)]
    if not any(isinstance(x, Tensor) for x in leaves):      # NumPy in, NumPy out (as the transforms)
        results = [r.data if isinstance(r, Tensor) and not (r._level or r.requires_grad or r._tangents) else r
                   for r in results]
    return tree.unflatten(ostructure, results)


def _chunked(func: Callable, leaves: list, structure: Any, axes: list, size: int, kwargs: dict,
             out_axes: Any, randomness: str, name: str, chunk: int) -> Any:
    """Run ``func`` on at most ``chunk`` examples at a time and join the results along out_axes."""
    rng = _random.get_rng_state(("default",)) if randomness == "same" else None
    parts = []
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        if rng is not None:
            _random.set_rng_state(rng)          # "same": every chunk draws what the first drew
        part = [x if a is None else _slice(x, a, start, stop) for x, a in zip(leaves, axes)]
        parts.append(_run(func, part, structure, axes, stop - start, kwargs, out_axes, randomness, name))
    first, ostructure = tree.flatten(parts[0])
    oaxes = _prefix_axes(out_axes, parts[0], "out_axes", name, top=False)
    columns = zip(*(tree.flatten(p)[0] for p in parts))
    joined = [leaf[0] if a is None else _join(list(leaf), a) for leaf, a in zip(columns, oaxes)]
    return tree.unflatten(ostructure, joined)


def _slice(x: Any, axis: int, start: int, stop: int) -> Any:
    ndim = len(np.shape(x))
    index = (slice(None),) * (axis % ndim) + (slice(start, stop),)
    return x[index]


def _join(parts: list, axis: int) -> Any:
    if any(isinstance(p, Tensor) for p in parts):
        return _ops.concatenate(parts, axis=axis)
    return np.concatenate([np.asarray(p) for p in parts], axis=axis)


# ----- in and out of a level -----
def to_batched(x: Any, axis: int, level: Level) -> BatchedTensor:
    """``x`` with its batch axis ``axis`` moved to the front, as a BatchedTensor of ``level``."""
    if axis != 0:
        x = _ops.moveaxis(x, axis, 0) if isinstance(x, Tensor) else np.moveaxis(x, axis, 0)
    if not isinstance(x, Tensor):       # a tensor, so that an in-place write of a value with a
        x = Tensor(x)                   # graph or a tangent (x[k] *= w) can take its history
    return BatchedTensor(x, level.index, level.size)


def from_batched(o: Any, axis: int | None, level: Level, name: str) -> Any:
    """A result of the vmapped function, with the batch of ``level`` on axis ``axis`` (an unbatched
    result is broadcast along it, as torch.func does)."""
    if isinstance(o, Tensor) and o._level == level.index:
        if axis is None:
            raise VmapError(f"vmap({name}): an output has out_axes None but depends on the batched "
                            f"inputs (it differs from example to example); give it an out_axes")
        value = o.value
        ndim = np.ndim(value)
        dest = _axis(axis, ndim, "out_axes", name)
        if dest == 0:
            return value
        return _ops.moveaxis(value, 0, dest) if isinstance(value, Tensor) else np.moveaxis(value, 0, dest)
    if axis is None or o is None:
        return o
    return expand(o, level.size, axis, name)


def expand(o: Any, size: int, axis: int = 0, name: str = "vmap") -> Any:
    """An unbatched value repeated ``size`` times along a new axis ``axis`` (a copy, writable)."""
    if isinstance(o, Tensor):
        shape = tuple(o.shape)
        out = _ops.copy(_ops.broadcast_to(_ops.expand_dims(o, 0), (size,) + shape))
        dest = _axis(axis, len(shape) + 1, "out_axes", name)
        return out if dest == 0 else _ops.moveaxis(out, 0, dest)
    arr = np.asarray(o)
    dest = _axis(axis, arr.ndim + 1, "out_axes", name)
    return np.moveaxis(np.broadcast_to(arr, (size,) + arr.shape).copy(), 0, dest)


def _axis(axis: Any, ndim: int, what: str, name: str) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -ndim <= axis < ndim:
        raise VmapError(f"vmap({name}): {what} gives axis {axis!r}, but it must be an int in "
                        f"[{-ndim}, {ndim - 1}] (or None) for that value")
    return int(axis) % ndim


def _prefix_axes(spec: Any, value: Any, what: str, name: str, top: bool) -> list:
    """One axis (or None) per leaf of ``value``, from ``spec``: an int/None for a whole subtree, or
    a tuple/list/dict matching the tree's structure down to where it gives ints."""
    if spec is None or isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return [spec] * len(tree.flatten(value)[0])
    if top and isinstance(spec, (tuple, list)) and isinstance(value, tuple):
        if len(spec) != len(value):
            raise VmapError(f"vmap({name}): {what} has {len(spec)} entries but the function got "
                            f"{len(value)} positional arguments; give one entry (int or None) per argument")
        return [a for s, v in zip(spec, value) for a in _prefix_axes(s, v, what, name, False)]
    if isinstance(spec, dict) and isinstance(value, dict) and list(spec) == list(value):
        return [a for k in spec for a in _prefix_axes(spec[k], value[k], what, name, False)]
    if isinstance(spec, (tuple, list)) and isinstance(value, (tuple, list)) and len(spec) == len(value):
        return [a for s, v in zip(spec, value) for a in _prefix_axes(s, v, what, name, False)]
    raise VmapError(f"vmap({name}): {what}={spec!r} does not match the structure of the "
                    f"{'arguments' if what == 'in_axes' else 'outputs'} ({type(value).__name__}); give "
                    f"an int, None, or a tuple/list/dict with the same structure")


def _batch_size(leaves: list, axes: list, structure: Any, axis_size: int | None, name: str) -> int:
    sizes = {}
    paths = tree.paths(structure)
    for x, a, path in zip(leaves, axes, paths):
        if a is None:
            continue
        if not isinstance(x, (Tensor, ndarray, np.generic)):
            raise VmapError(f"vmap({name}): in_axes gives axis {a} for argument {_where(path)}, a "
                            f"{type(x).__name__}; only arrays and tensors can be batched: give None for it "
                            f"or pass an array")
        shape = tuple(np.shape(x))
        if not shape:
            raise VmapError(f"vmap({name}): argument {_where(path)} is 0-dimensional, so it has no axis "
                            f"{a} to batch over; give None for it")
        sizes[path] = shape[_axis(a, len(shape), "in_axes", name)]
    found = set(sizes.values())
    if len(found) > 1:
        listed = ", ".join(f"{_where(p)}: {s}" for p, s in sizes.items())
        raise VmapError(f"vmap({name}): the batched arguments have different sizes along their in_axes "
                        f"({listed}); they must all have the same batch size")
    if not found:
        if axis_size is None:
            raise VmapError(f"vmap({name}): no argument is batched (in_axes is None for all); give "
                            f"axis_size= for the batch size")
        return axis_size
    size = found.pop()
    if axis_size is not None and axis_size != size:
        raise VmapError(f"vmap({name}): axis_size={axis_size} but the batched arguments have size {size}")
    return size


def _where(path: tuple) -> str:
    return "args" + "".join(f"[{k!r}]" for k in path)


# ----- transforms inside vmap: a graph (or a dual) lives at its primals' physical level -----
# A value batched at several levels is a chain BT_k(BT_j(... physical)) with k > j > ...: the outer
# level's batch is axis 0 of the physical array. ``grad``/``vjp``/``jvp`` inside ``vmap`` record on
# the physical arrays (every active level's batch a real axis) and move cotangents and tangents
# there with ``strip``; their results go back with ``unstrip``.
def levels_of(x: Any) -> list:
    """The vmap levels ``x`` is batched at, outermost wrapper first (highest level first)."""
    out = []
    while isinstance(x, Tensor) and x._level:
        out.append(x._level)
        x = x.value
    return out


def rewrap(v: Any, levels: list) -> Any:
    """Inverse of ``physical``: wrap ``v`` at ``levels`` (as ``levels_of`` lists them)."""
    for j in reversed(levels):
        v = BatchedTensor(v, j, STATE.vmap_levels[j - 1].size)
    return v


def add_level(x: Any, j: int) -> Any:
    """``x`` (not batched at level ``j``) as a batch of copies at level ``j``."""
    if isinstance(x, Tensor) and x._level > j:
        return BatchedTensor(add_level(x.value, j), x._level, x.bsize)
    size = STATE.vmap_levels[j - 1].size
    if not isinstance(x, Tensor):
        x = Tensor(np.asarray(x))
    return BatchedTensor(_ops.broadcast_to(_ops.expand_dims(x, 0), (size,) + tuple(x.shape)), j, size)


def with_levels(x: Any, levels: set) -> Any:
    """``x`` batched at ``levels`` (copies where it is not)."""
    have = set(levels_of(x))
    for j in sorted(levels - have):
        x = add_level(x, j)
    return x


def strip(x: Any, j: int) -> Any:
    """Level ``j``'s batch of ``x`` as a real leading axis; other levels stay batched."""
    if not (isinstance(x, Tensor) and x._level >= j and j in levels_of(x)):
        x = add_level(x, j)
    if x._level == j:
        return x.value
    return BatchedTensor(_ops.moveaxis(strip(x.value, j), 1, 0), x._level, x.bsize)


def unstrip(g: Any, j: int) -> Any:
    """Inverse of ``strip``: the leading axis of ``g`` becomes level ``j``'s batch."""
    if isinstance(g, Tensor) and g._level > j:
        return BatchedTensor(unstrip(_ops.moveaxis(g.value, 1, 0), j), g._level, g.bsize)
    return BatchedTensor(g, j, STATE.vmap_levels[j - 1].size)


def lower(direction: Any, levels: list) -> Any:
    """A cotangent or tangent for a value batched at ``levels``, moved to its physical level."""
    for j in levels:                       # highest first: the batch axes end up lowest level first
        direction = strip(direction, j)
    return direction


def lift_result(g: Any, levels: list) -> Any:
    """A gradient or tangent of a physical value, batched again at ``levels``."""
    if g is None:
        return None
    for j in reversed(levels):
        g = unstrip(g, j)
    return g


# ----- tensor hooks inside vmap: on the physical array, seeing the gradient batched -----
def register_hook(self: BatchedTensor, fn: Callable) -> Any:
    """``register_hook`` on a batched tensor (as torch.func): ``fn`` receives the gradient batched as
    this tensor is (each example's gradient) and may return a replacement, batched or not (an
    unbatched one is every example's). The hook sits on the physical array, where the graph is."""
    inner = physical(self)
    if not (isinstance(inner, Tensor) and inner._requires_grad):
        raise GraphError("register_hook: cannot register a hook on a tensor that does not require grad")
    levels, active = levels_of(self), STATE.vmap_levels

    def hook(g: Any) -> Any:
        with levels_scope(active):       # (a vmap around the backward batches g further: kept)
            res = fn(lift_result(g, levels))
            if res is None:
                return None
            extra = set(levels_of(res)) - set(levels) - set(levels_of(g))
            if extra:
                raise VmapError(f"a tensor hook inside cr.vmap returned a gradient batched at vmap "
                                f"level(s) {sorted(extra)}, where neither the tensor nor its gradient is "
                                f"batched: return a value batched as the gradient it receives")
            return lower(res, levels)
    hook.__qualname__ = getattr(fn, "__qualname__", type(fn).__name__)    # errors name the user's hook
    return inner.register_hook(hook)


BatchedTensor.register_hook = register_hook
