"""Custom differentiable ops: subclass ``cr.Function`` with static ``forward``/``backward`` (and ``jvp``)."""
from __future__ import annotations

import warnings
from typing import Any

from chainrule.autograd.forward import fit_tangent, levels_of, tower
from chainrule.core._backend import np
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import GraphError
from chainrule.core.grad_mode import STATE, no_grad
from chainrule.core.graph import (
    FREED,
    GraphNode,
    check_saved,
    next_seq,
    pack_saved,
    rebase,
    unpack_saved,
    versions_of,
)
from chainrule.core.tensor import Tensor, wrap
from chainrule.numpy import after_write, check_in_place, fresh, moveaxis, stack, zeros_like


class FunctionCtx:
    """The ``ctx`` handed to a Function's forward, backward and jvp."""

    def __init__(self) -> None:
        self.saved_values: Any = ()       # what save_for_backward kept (packed by saved-tensor hooks)
        self.versions: dict | None = None
        self.needs_input_grad: tuple = ()
        self.non_differentiable: set = set()
        self.dirty: dict = {}             # id -> input that forward modified in place (mark_dirty)
        self._who = "saved_tensors"       # "MyFnBackward" once Function.apply made this ctx

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors for backward; they are checked against in-place changes and freed after use."""
        self.versions = versions_of(tensors)
        # saved_tensors_hooks apply here too, as in PyTorch
        self.saved_values = tuple(pack_saved(list(tensors))) if STATE.hooks else tensors
        for ob in STATE.observers:
            ob.on_save_function(self)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``; raises if one was modified in place since."""
        check_saved(self._who, self.saved_values, self.versions or {}, "saved tensor")
        return unpack_saved(self.saved_values, True)

    def mark_dirty(self, *tensors: Any) -> None:
        """Declare inputs that forward modified in place; forward must return them. Each returned
        one is the input itself, now with this Function's node as its history (PyTorch's rule)."""
        self.dirty = {id(t): t for t in tensors}

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """Declare outputs that never carry a gradient (e.g. an argmax output)."""
        self.non_differentiable.update(id(t) for t in tensors)


class FunctionNode(GraphNode):
    """The ``grad_fn`` of the outputs of a ``Function.apply`` call."""

    __slots__ = ("fn_cls", "ctx", "edges", "metas", "pre_hooks", "extra", "seq", "__weakref__")

    def __init__(self, fn_cls: type, ctx: FunctionCtx, edges: tuple, metas: tuple) -> None:
        self.seq = next_seq()
        self.fn_cls, self.ctx, self.edges, self.metas = fn_cls, ctx, edges, metas
        self.pre_hooks = None
        self.extra = None

    @property
    def name(self) -> str:
        return f"{self.fn_cls.__name__}Backward"

    @property
    def reentrant(self) -> bool:
        return self.fn_cls.reentrant

    def vjp(self, g: Any, tensor_mode: bool) -> list:
        gs = g if type(g) is list else [g]
        gs = [_as_tensor(x) if x is not None else wrap(np.zeros(shape, dtype))
              for x, (shape, dtype) in zip(gs, self.metas)]
        result = self.fn_cls.backward(self.ctx, *gs)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(self.edges):
            raise GraphError(f"{self.name}: backward returned {len(result)} gradients but forward took "
                             f"{len(self.edges)} inputs; return one value (or None) per input")
        out = []
        for edge, r in zip(self.edges, result):
            if edge is None or r is None:
                out.append(None)
                continue
            if not isinstance(r, Tensor):
                r = wrap(np.asarray(r))
            out.append(r if tensor_mode else r.data)
        return out

    def release(self) -> None:
        for ob in self.ctx.__dict__.pop("_watchers", ()):
            ob.on_release(self.ctx)
        if self.ctx.saved_values:
            self.ctx.saved_values = FREED


def _as_tensor(x: Any) -> Any:
    return x if isinstance(x, Tensor) else wrap(np.asarray(x))


class Function:
    """Base class of custom ops; use ``MyFn.apply(*args)``.

    >>> import chainrule as cr
    >>> class Cube(cr.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 3
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 3 * x ** 2 * g
    >>> x = cr.tensor(2.0, requires_grad=True)
    >>> Cube.apply(x).backward(); x.grad
    tensor(12.)
    """

    # True for a Function whose backward runs a backward of its own that accumulates into leaves
    # (cr.checkpoint's): post-accumulate-grad hooks then wait until it has run
    reentrant = False

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        """The op on plain values (define it, static): save what ``backward`` needs on ``ctx``."""
        raise GraphError("subclasses of cr.Function must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        """The VJP (define it, static): one gradient per output in, one per ``forward`` input out
        (None for an input that needs none)."""
        raise GraphError("subclasses of cr.Function must define a static backward(ctx, ...)")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run the Function on tensors and record it in the graph (call this, not ``forward``)."""
        if STATE.vmap_levels:
            level = max((a._level for a in args if isinstance(a, Tensor)), default=0)
            if level:
                return _apply_batched(cls, level, args, kwargs)
        ctx = FunctionCtx()
        ctx._who = f"{cls.__name__}Backward"
        record = STATE.grad_enabled and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx.needs_input_grad = tuple(record and isinstance(a, Tensor) and a.requires_grad for a in args)
        before = [a._tangents if isinstance(a, Tensor) else None for a in args] if STATE.fw_levels else None
        with no_grad():
            raw_out = cls.forward(ctx, *args, **kwargs)
        if before is not None:        # an input forward changed in place gets its tangent from jvp
            for a, tangents in zip(args, before):
                if isinstance(a, Tensor) and id(a) in ctx.dirty:
                    a._tangents = tangents
        single = not isinstance(raw_out, tuple)
        outs = [raw_out] if single else list(raw_out)
        if ctx.dirty:
            _check_dirty(cls, ctx, args, outs, record)
        results = []
        for o in outs:
            if isinstance(o, Tensor) and id(o) in ctx.dirty:
                t = o                     # a modified input is returned as itself
            elif isinstance(o, Tensor):
                t = wrap(o.data)
            elif isinstance(o, (np.ndarray, np.generic, float, int)):
                t = wrap(np.asarray(o))
            else:
                t = o
            results.append(t)
        if record:
            # a dirty view's gradient goes to its base through a fresh view, bypassing its old node
            # and hooks (as an in-place op on a view does: PyTorch's CopySlices)
            edges = tuple(None if not (isinstance(a, Tensor) and a.requires_grad)
                          else fresh(a)._edge() if a._view is not None and id(a) in ctx.dirty
                          else a._edge() for a in args)
            metas = tuple((r.shape, r.dtype) if isinstance(r, Tensor) else ((), np.dtype(np.float64))
                          for r in results)
            node = FunctionNode(cls, ctx, edges, metas)
            for nr, (r, o) in enumerate(zip(results, outs)):
                if isinstance(r, Tensor) and id(o) not in ctx.non_differentiable \
                        and r.dtype.kind in "fcV":
                    if id(o) in ctx.dirty:
                        rebase(r, _Result(node, nr, r._tangents))
                    else:
                        r.grad_fn, r._nr, r._requires_grad = node, nr, True
        if STATE.fw_levels:
            _function_jvp(cls, ctx, args, results)
        for t in ctx.dirty.values():
            if t._family is not None:     # a view: its base's history and its siblings follow
                after_write(t)
        return results[0] if single else tuple(results)


class VmapInfo:
    """What a Function's ``vmap(info, in_dims, *args)`` static method learns of the batch."""

    def __init__(self, batch_size: int, randomness: str) -> None:
        self.batch_size, self.randomness = batch_size, randomness


def _apply_batched(cls: type, level: int, args: tuple, kwargs: dict) -> Any:
    """A Function called inside ``cr.vmap``: its ``vmap`` static method (PyTorch's protocol:
    ``vmap(info, in_dims, *args) -> (outputs, out_dims)``, on the whole batch), or else one call
    per example, with a one-time warning."""
    lvl = STATE.vmap_levels[level - 1]
    batched = [isinstance(a, Tensor) and a._level == level for a in args]
    values = [a.value if b else a for a, b in zip(args, batched)]
    rule = getattr(cls, "vmap", None)
    if rule is not None:
        in_dims = tuple(0 if b else None for b in batched)
        outs, out_dims = rule(VmapInfo(lvl.size, lvl.randomness), in_dims, *values, **kwargs)
        single = not isinstance(outs, tuple)
        outs = (outs,) if single else outs
        dims = (out_dims,) * len(outs) if not isinstance(out_dims, tuple) else out_dims
        wrapped = tuple(o if d is None else BatchedTensor(o if d == 0 else moveaxis(o, d, 0), level, lvl.size)
                        for o, d in zip(outs, dims))
        return wrapped[0] if single else wrapped
    warn_per_example(cls.__name__)
    results = [cls.apply(*[v[k] if b else v for v, b in zip(values, batched)], **kwargs) for k in range(lvl.size)]
    if not isinstance(results[0], tuple):
        return BatchedTensor(stack(results), level, lvl.size)
    return tuple(BatchedTensor(stack(list(parts)), level, lvl.size) for parts in zip(*results))


class _Result:
    """What ``graph.rebase`` reads of a new value: its history (node, output index) and tangents
    (a dirty input's own, copied: the jvp below reads them before it writes the new ones)."""

    def __init__(self, node: Any, nr: int, tangents: dict | None) -> None:
        self.grad_fn, self._nr, self._tangents = node, nr, dict(tangents) if tangents else None


def _check_dirty(cls: type, ctx: FunctionCtx, args: tuple, outs: list, record: bool) -> None:
    returned = {id(o) for o in outs}
    for t in ctx.dirty.values():
        if not any(t is a for a in args):
            raise GraphError(f"{cls.__name__}: mark_dirty was given a tensor that is not an input of "
                             f"forward; only inputs modified in place are marked dirty")
        if id(t) not in returned:
            raise GraphError(f"{cls.__name__}: an input marked dirty (shape {t.shape}) was not returned "
                             f"by forward; return every tensor modified in place")
        if record and t.grad_fn is None and t._requires_grad:      # (also a view made under no_grad)
            raise GraphError(f"{cls.__name__}: a leaf tensor that requires grad (shape {t.shape}) was "
                             f"modified in place (mark_dirty); clone it first or call under cr.no_grad()")
        if record:
            check_in_place(t, f"{cls.__name__} (mark_dirty)", False)


def _function_jvp(cls: type, ctx: FunctionCtx, args: tuple, results: list) -> None:
    levels = levels_of(args)
    if not levels:
        return
    if getattr(cls, "jvp", None) is None:
        raise GraphError(f"{cls.__name__}: this Function is used under forward mode (jvp / "
                         f"forward_ad) but defines no jvp(ctx, *tangents); add a static jvp method")
    for level in levels:
        tangents = [a._tangents.get(level) if isinstance(a, Tensor) and a._tangents
                    and level in a._tangents
                    else (zeros_like(a) if isinstance(a, Tensor) else None) for a in args]
        with tower(level):
            touts = cls.jvp(ctx, *tangents)
            touts = touts if isinstance(touts, tuple) else (touts,)
            for r, t in zip(results, touts):
                if isinstance(r, Tensor) and t is not None:
                    if r._tangents is None:
                        r._tangents = {}
                    r._tangents[level] = fit_tangent(t, r, cls.__name__)


Function.jvp = None  # type: ignore[attr-defined]  # optional: define a static jvp(ctx, *tangents)


def warn_per_example(name: str) -> None:
    """The one-time warning of a custom Function without a ``vmap`` rule, run per example."""
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(f"cr.vmap: the custom Function {name} has no vmap static method, so it runs once "
                      f"per example in a Python loop (slow); give it a vmap rule", stacklevel=3)


_WARNED: set = set()
