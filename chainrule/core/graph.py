"""Graph nodes: one ``Node`` per recorded op, one ``AccumulateGrad`` per leaf.

A node knows its edges (the nodes that produced its inputs), what it saved, and how to turn the
cotangent of its output into cotangents of its inputs. It knows nothing about the traversal.
"""
from __future__ import annotations

import itertools
import sys
import weakref
from typing import Any, Callable

from chainrule.core._backend import ndarray, np
from chainrule.core.errors import GraphError
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor as _Tensor
from chainrule.core.tensor import wrap as _wrap

FREED = object()                          # what a node's saved values become once released
next_seq = itertools.count().__next__   # creation order: the engine runs nodes from the newest back


class GraphNode:
    """What every node offers the engine, hooks and graph walks: ``edges`` (one ``(node, output
    index)`` or None per input), ``metas`` (shape, dtype per output), ``seq`` (creation order),
    ``pre_hooks``, ``vjp(g, tensor_mode)`` and ``release()``. Op nodes, leaf accumulators and
    custom-Function nodes are its three kinds; ``is_accumulator`` tells a leaf's node."""

    __slots__ = ()
    is_accumulator = False
    reentrant = False      # its backward runs a backward that accumulates into leaves (cr.checkpoint)
    name = "GraphNode"

    @property
    def next_functions(self) -> tuple:
        return tuple(e if e is not None else (None, 0) for e in self.edges)

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def add_pre_hook(self, nr: int, fn: Callable) -> Callable[[], None]:
        """Run ``fn(grad)`` on output ``nr``'s gradient before this node uses it; returns a remover."""
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(nr, [])
        if hooks and getattr(hooks[-1], "retains_grad", False):
            hooks.insert(len(hooks) - 1, fn)    # retain_grad sees the gradient after every hook
        else:
            hooks.append(fn)
        return HookHandle(hooks, fn)

    def release(self) -> None:
        """Free what the node saved for backward (nothing by default)."""

    def output_modified(self, nr: int, data: Any) -> None:
        """Output ``nr`` (whose memory is ``data``) was changed in place (nothing to do unless the
        node saved it)."""


class HookHandle:
    """What registering a hook returns: ``handle.remove()`` (PyTorch's ``RemovableHandle``) takes
    the hook out again, and so does calling ``handle()``; removing twice does nothing. Also a
    context manager: the hook is removed on leaving the ``with`` block."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn: Callable) -> None:
        self._hooks, self._fn = hooks, fn

    def remove(self) -> None:
        hooks = self._hooks
        for i, h in enumerate(hooks):
            if h is self._fn:
                del hooks[i]
                return

    __call__ = remove

    def __enter__(self) -> HookHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def walk(starts: Any, stop: Any = ()) -> list:
    """Every node reachable from the nodes ``starts`` (not entering those in ``stop``), each once,
    inputs before their consumers (post-order). Iterative: graphs can be 100,000 nodes deep."""
    order: list = []
    seen = set(stop)
    for start in starts:
        if start is None or start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(start.edges))]
        while stack:
            node, it = stack[-1]
            for edge in it:
                if edge is not None and edge[0] not in seen:
                    seen.add(edge[0])
                    stack.append((edge[0], iter(edge[0].edges)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def hooked_producers(starts: Any) -> dict:
    """For each node of a leaf with post-accumulate-grad hooks reached from the nodes ``starts``, the
    set of nodes there that may add to its gradient: its consumers and every reentrant node (whose
    own backward may accumulate into any leaf). Once the engine has run them all, the leaf's gradient
    is complete, so its hooks can fire (``DistributedDataParallel`` starts a bucket's all-reduce)
    while the rest still runs."""
    producers: dict = {}
    reentrant: set = set()
    stack = [s for s in starts if s is not None]
    seen = set(stack)
    while stack:
        node = stack.pop()
        if node.reentrant:
            reentrant.add(node)
        for edge in node.edges:
            if edge is None:
                continue
            child = edge[0]
            if child.is_accumulator:
                t = child.variable()
                if t is not None and t._post_acc_hooks:
                    producers.setdefault(child, set()).add(node)
            elif child not in seen:
                seen.add(child)
                stack.append(child)
    for nodes in producers.values():
        nodes |= reentrant
    return producers


def other_refs(x: Any) -> int:
    """How many references to ``x`` exist besides the one the caller passes it by: 0 means no one
    else can see it (an array nobody else holds may be written in place). The one place that reads
    CPython's reference counts: it relies on ``sys.getrefcount`` counting the caller's reference,
    this parameter and its own argument (pinned by tests/autograd/test_engine_callbacks.py)."""
    return sys.getrefcount(x) - 3


def closure_leaves(roots: list, wanted: list) -> list:
    """Leaves that require grad reached from the tensors ``roots`` without passing through the
    tensors ``wanted``, other than those: what a function closes over (checkpoint, implicit)."""
    stop = [x.grad_fn for x in wanted if x.grad_fn is not None]
    skip = {id(x) for x in wanted}
    leaves = [node.variable() for node in walk([r.grad_fn for r in roots], stop=stop)
              if node.is_accumulator]
    return [t for t in leaves if t is not None and id(t) not in skip]


class Node(GraphNode):
    """The ``grad_fn`` of a tensor produced by a primitive."""

    __slots__ = ("seq", "prim", "params", "edges", "saved", "out_data", "metas",
                 "__dict__", "__weakref__")
    # Rarely set fields default on the class (no per-node dict in the common case):
    out_tangents: Any = None    # the output's forward-mode tangents, when the rules need the output
    pre_hooks: Any = None       # {output index: [fn, ...]}
    extra: Any = None           # rarely used: anomaly traceback, watchers, packed marker
    versions: Any = None        # {input index: version when saved}, only if some version is not 0

    def __init__(self, prim: Any, params: dict, edges: tuple, xs: tuple, out: Any, idx: Any,
                 rare: bool) -> None:
        """Record ``out = prim(*xs)``: keep inputs ``idx`` (and the output if the primitive declares
        it) for the rules. ``rare`` (``STATE.rare``) says whether hooks or observers may be active."""
        self.seq = next_seq()
        self.prim = prim
        self.params = params
        self.edges = edges
        data = out.data
        self.metas = ((data.shape, data.dtype),)     # (shape, dtype) per output
        self.out_data = data if prim.save_out else None
        saved = ()
        if idx:
            n = len(xs)
            saved = [None] * n
            versions = None
            for i in idx:               # ascending: an open range (saves="xs") ends at the last input
                if i >= n:
                    break
                x = saved[i] = xs[i]
                if isinstance(x, _Tensor) and x._version:
                    if versions is None:
                        versions = self.versions = {}
                    versions[i] = x._version
        self.saved = saved
        if rare:
            self._save_rare(out)

    def _save_rare(self, out: Any) -> None:
        """Forward-mode tangents of a saved output, saved-tensor hooks, memory observers."""
        st = STATE
        if self.out_data is not None:
            self.out_tangents = out._tangents
        if st.hooks:
            saved, self.out_data = _pack_node(list(self.saved) or None, self.out_data, self)
            self.saved = saved if saved is not None else ()
            self.extra = self.extra or {}
            self.extra["packed"] = True
        for ob in st.observers:
            ob.on_save(self)

    @property
    def name(self) -> str:
        return self.prim.name.title().replace("_", "") + "Backward"

    # ----- saved values -----
    def unpack(self, tensor_mode: bool) -> tuple[tuple, Any]:
        """Return (xs, out) for the rules: ndarrays in the fast mode, Tensors otherwise."""
        saved = self.saved
        check_saved(self.name, saved, self.versions or {})
        if self.extra and "output_modified" in self.extra:
            raise GraphError(
                f"{self.name}: one of the values needed for gradient computation has been modified by "
                f"an in-place operation: its output (shape {self.metas[0][0]}), which it saved for "
                f"backward, was changed in place (directly, through a view or through .detach()). "
                f"Use an out-of-place op (y = y + 1 instead of y += 1) or .clone() before modifying it")
        out = self.out_data
        if type(out) is Packed:
            out = out.unpack(tensor_mode)
        elif tensor_mode and out is not None:
            t = _wrap(out)
            if self.prim.differentiable_out:
                t.grad_fn, t._requires_grad = self, True
            t._tangents = self.out_tangents
            out = t
        if not saved:
            return (None,) * len(self.edges), out
        return unpack_saved(saved, tensor_mode), out

    def output_modified(self, nr: int, data: Any) -> None:
        out = self.out_data
        if type(out) is Packed:         # (under saved-tensor hooks: the tensor it was packed from)
            src = out.source()
            out = None if src is None else src.data
        if out is None or self.saved is FREED or not np.may_share_memory(out, data):
            return                      # it kept no output, or a copy: nothing it needs went stale
        needed_by = self.prim.out_for
        if needed_by is None or any(self.edges[i] is not None for i in needed_by if i < len(self.edges)):
            self.extra = self.extra or {}
            self.extra["output_modified"] = True

    def release(self) -> None:
        """Free saved values (after a backward without retain_graph)."""
        if self.extra and "watchers" in self.extra:
            for ob in self.extra.pop("watchers"):
                ob.on_release(self)
        if self.out_data is not None:
            self.saved = FREED
            self.out_data = None
            if self.out_tangents is not None:
                self.out_tangents = None
        elif self.saved:
            self.saved = FREED

    # ----- the rule -----
    def vjp(self, g: Any, tensor_mode: bool) -> Any:
        """Cotangents for each edge, given the cotangent ``g`` of the output."""
        if self.prim.passthrough:              # add, alias, copy, astype: g itself, no rule call
            return (g,) * len(self.edges)
        saved = self.saved
        if tensor_mode or self.extra is not None or saved is FREED or type(self.out_data) is Packed:
            xs, out = self.unpack(tensor_mode)
        else:                                  # the fast path: ndarrays, no hooks (plain loops: 3.11)
            out = self.out_data
            if saved:
                xs = []
                for x in saved:
                    if isinstance(x, _Tensor):
                        if x._version:
                            self.unpack(False)     # checks versions: raises if modified in place
                        xs.append(x.data)
                    else:
                        xs.append(x)
            else:
                xs = (None,) * len(self.edges)
        prim, params, edges = self.prim, self.params, self.edges
        rules = prim.vjps
        if len(edges) == 1 and not prim.variadic:
            if params:
                return (rules[0](g, out, *xs, **params),)
            return (rules[0](g, out, *xs),)
        grads = []
        for i, e in enumerate(edges):
            r = rules[0 if prim.variadic else i]
            if e is None or r is None:
                grads.append(None)
            elif prim.variadic:
                grads.append(r(g, out, *xs, argnum=i, **params))
            elif params:
                grads.append(r(g, out, *xs, **params))
            else:
                grads.append(r(g, out, *xs))
        return grads


class AccumulateGrad(GraphNode):
    """The node of a leaf tensor: adds the incoming gradient to ``tensor.grad``."""

    __slots__ = ("variable", "metas", "pre_hooks", "edges", "extra", "seq", "__weakref__")
    name = "AccumulateGrad"
    is_accumulator = True

    def __init__(self, t: Any) -> None:
        self.seq = next_seq()
        self.variable = weakref.ref(t)
        self.metas = ((t.data.shape, t.data.dtype),)
        self.pre_hooks = None
        self.edges = ()
        self.extra = None

    def accumulate(self, g: Any, create_graph: bool, stored: set) -> Any:
        """Add ``g`` to the leaf's ``.grad``; return the leaf if it has post-accumulate-grad hooks
        (the engine runs them), else None."""
        t = self.variable()
        if t is None or not t._requires_grad or t._view_meta == "no_grad":
            return None     # requires_grad_(False) since, or a view made under no_grad: as PyTorch
        if not create_graph and isinstance(g, _Tensor) and not g._level:
            g = g.data
        if not isinstance(g, _Tensor):
            if type(g) is not ndarray or g.base is not None or id(g) in stored:
                src, g = g, np.array(g, copy=True)   # never alias a view, a user's array or another leaf's grad
                if STATE.recorder is not None:  # cr.compile: the copy is a kernel of the tape
                    STATE.recorder.on_kernel(_own_copy, (src,), None, g)
            stored.add(id(g))
            g = _wrap(g)
        if t.grad is None:
            t.grad = g
        elif create_graph or t.grad.grad_fn is not None:
            t.grad = t.grad + g
        else:
            old = t.grad.data
            t.grad = _wrap(old + g.data)
            if STATE.recorder is not None:      # cr.compile: the sum is a kernel of the tape
                STATE.recorder.on_kernel(_add_grads, (old, g.data), None, t.grad.data)
        return t if t._post_acc_hooks else None   # a class attribute, None until a hook is registered

    def vjp(self, g: Any, tensor_mode: bool) -> list:
        return []


def _own_copy(a: Any) -> Any:
    """The copy ``accumulate`` makes, as a kernel ``cr.compile`` replays."""
    return np.array(a, copy=True)


def _add_grads(a: Any, b: Any) -> Any:
    """The sum ``accumulate`` makes into an existing ``.grad``, as a kernel ``cr.compile`` replays."""
    return np.asarray(a + b)


def run_post_acc_hooks(t: Any) -> None:
    """``t.register_post_accumulate_grad_hook``'s hooks, in order, once ``t.grad`` is updated."""
    for fn in list(t._post_acc_hooks):
        if fn(t) is not None:
            name = getattr(fn, "__qualname__", type(fn).__name__)
            raise GraphError(f"post accumulate grad hook {name!r} returned a value; a post accumulate "
                             f"grad hook must return None (it may read or change tensor.grad in place)")


class Packed:
    """A saved value that went through ``saved_tensors_hooks``' pack; unpacked in backward."""

    __slots__ = ("obj", "unpack_fn", "source", "grad_fn", "nr")

    def __init__(self, obj: Any, unpack_fn: Callable, source: Any) -> None:
        self.obj, self.unpack_fn = obj, unpack_fn
        self.source = weakref.ref(source)   # a strong ref would keep the unpacked array alive
        self.grad_fn, self.nr = None, 0
        if isinstance(source, _Tensor) and source._requires_grad:
            # a leaf's unpacked value must still lead to the leaf (its AccumulateGrad node), or a
            # create_graph backward would lose every term through it
            self.grad_fn, self.nr = source._edge()

    def unpack(self, tensor_mode: bool) -> Any:
        value = self.unpack_fn(self.obj)
        data = value.data if isinstance(value, _Tensor) else np.asarray(value)
        if not tensor_mode:
            return data
        t = _wrap(data)
        if self.grad_fn is not None:
            t.grad_fn, t._nr, t._requires_grad = self.grad_fn, self.nr, True
        return t


# ----- saved values: one way to pack, check and unpack them (op nodes and custom Functions) -----
def pack_saved(values: list) -> list:
    """``values`` with each tensor through the active ``saved_tensors_hooks``' pack (the saved
    tensor itself, as PyTorch)."""
    pack, unpack = STATE.hooks[-1]
    return [Packed(pack(x), unpack, x) if isinstance(x, _Tensor) else x for x in values]


def check_saved(who: str, saved: Any, versions: dict, what: str = "input") -> None:
    """Raise if ``saved`` was freed, or if a saved tensor changed in place since it was saved
    (``versions``: {index: version when saved}, absent meaning 0; ``what``: how to name one)."""
    if saved is FREED:
        raise GraphError(f"{who}: the saved values were freed: trying to backward through the graph a "
                         f"second time (or directly access saved values after they were freed). Saved "
                         f"intermediate values are freed after .backward() or autograd.grad(); pass "
                         f"retain_graph=True to the first call if you need to backward twice")
    for i, x in enumerate(saved):
        if type(x) is Packed:
            x = x.source()
            if x is None:           # the tensor is gone, so nothing can have modified it
                continue
        if isinstance(x, _Tensor) and x._version != versions.get(i, 0):
            raise GraphError(
                f"{who}: {what} {i} (shape {tuple(x.shape)}) was modified in place after it was "
                f"saved: one of the values needed for gradient computation has been modified by an "
                f"in-place operation (it is at version {x._version}; expected version "
                f"{versions.get(i, 0)}). Use an out-of-place op (x = x + y instead of x += y) or "
                f".clone() before modifying it")


def unpack_saved(saved: Any, tensor_mode: bool) -> tuple:
    """The saved values for a rule: Tensors (packed ones unpacked) or, in a plain backward, arrays."""
    if tensor_mode:
        return tuple(x.unpack(True) if type(x) is Packed else x for x in saved)
    return tuple(_raw(x) for x in saved)


def versions_of(values: Any) -> dict | None:
    """{index: version} of the saved tensors whose version is not 0 (None if all are 0)."""
    versions = {i: x._version for i, x in enumerate(values) if isinstance(x, _Tensor) and x._version}
    return versions or None


def _pack_node(saved: list | None, out_data: Any, node: Node) -> tuple:
    if saved is not None:
        saved = pack_saved(saved)
    if out_data is not None:
        src = _wrap(out_data)
        pack, unpack = STATE.hooks[-1]
        packed = Packed(pack(src), unpack, src)
        packed.grad_fn = node if node.prim.differentiable_out else None
        out_data = packed
    return saved, out_data


def _raw(x: Any) -> Any:
    if type(x) is Packed:
        return x.unpack(False)
    return x.data if isinstance(x, _Tensor) else x


def add_retain_hook(t: Any, keep: bool = False) -> None:
    """``t.retain_grad()``: a hook that keeps ``t``'s gradient in ``t.grad``; it stays the last hook
    of ``t``, so it sees the gradient after every other hook (PyTorch >= 2.0).

    ``keep``: the hooks on ``t``'s earlier nodes stay (a view re-derived after a write through other
    memory: PyTorch moves its hook lazily, when the view is next used, so a use made before the
    write still fills ``.grad``); once a newer one receives a gradient, or ``t`` gets a hook, the
    older ones are dropped. Each hook has a generation; ``t._retain_live`` is the oldest that counts."""
    ref = weakref.ref(t)
    gen = t._retain_gen = t._retain_gen + 1
    if not keep:
        t._retain_live = gen

    def retain(g: Any) -> None:
        owner = ref()
        if owner is not None and gen >= owner._retain_live:
            owner._retain_live = gen      # (newest first: the engine runs the newer node first)
            if not g.requires_grad:       # a copy: the engine may hand the same array on elsewhere
                src, g = g.data, _wrap(np.array(g.data, copy=True))
                if STATE.recorder is not None:      # cr.compile: the copy is a kernel of the tape
                    STATE.recorder.on_kernel(_own_copy, (src,), None, g.data)
            owner.grad = g if owner.grad is None else owner.grad + g     # under create_graph: recorded

    retain.retains_grad = True
    t._retain_undo = t.grad_fn.add_pre_hook(t._nr, retain)


def rebase(t: Any, new: Any, keep: bool = False) -> None:
    """``t`` was changed in place to ``new``'s value: it takes ``new``'s history (its gradient now
    flows through ``new``'s node) and forward-mode tangents; ``retain_grad`` follows it, as PyTorch
    (``keep``: see add_retain_hook)."""
    if new.grad_fn is not None and new.grad_fn is not t.grad_fn:
        if t._retains and not keep:
            t._retain_undo()
        t.grad_fn, t._nr, t._requires_grad = new.grad_fn, new._nr, True
        if t._retains:
            add_retain_hook(t, keep)
    t._tangents = new._tangents



# ----- the graph side of Tensor, attached here: tensor.py holds data and metadata only -----
def _edge(self: _Tensor) -> tuple:
    """The (node, output index) that receives this tensor's gradient."""
    if self.grad_fn is not None:
        return (self.grad_fn, self._nr)
    edge = self._leaf_edge
    if edge is None:
        edge = self._leaf_edge = (AccumulateGrad(self), 0)
    return edge


def retain_grad(self: _Tensor) -> None:
    """Keep ``.grad`` on a non-leaf tensor after backward (leaves always keep it)."""
    if self.grad_fn is None:
        if not self._requires_grad:
            raise GraphError("retain_grad() on a tensor that does not require grad")
        return
    if self._retains:
        self._retain_live = self._retain_gen       # (its earlier nodes' hooks no longer count)
        return
    self._retains = True
    add_retain_hook(self)


def register_hook(self: _Tensor, fn: Callable[[_Tensor], _Tensor | None]) -> Callable[[], None]:
    """Call ``fn(grad)`` when this tensor's gradient is computed; a returned tensor replaces it.

    Returns a function that removes the hook.

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> _ = x.register_hook(lambda g: g * 10)
    >>> x.sum().backward(); x.grad
    tensor([10., 10.])
    """
    if not self._requires_grad:
        raise GraphError("register_hook: cannot register a hook on a tensor that does not require grad")
    self._retain_live = self._retain_gen           # as PyTorch: its retain_grad moves here too
    node, nr = self._edge()
    return node.add_pre_hook(nr, fn)


def register_post_accumulate_grad_hook(self: _Tensor, hook: Callable[[_Tensor], None]) -> HookHandle:
    """Call ``hook(tensor)`` after a backward has accumulated this leaf's gradient into ``.grad``
    (once per backward that reaches it, also when it adds to an existing ``.grad``; not in
    ``autograd.grad``, which accumulates nothing). The hook returns None. Returns a handle whose
    ``.remove()`` takes the hook out (PyTorch's ``RemovableHandle``).

    >>> import chainrule as cr
    >>> w = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> h = w.register_post_accumulate_grad_hook(lambda t: print("grad:", t.grad))
    >>> (w * 3).sum().backward()
    grad: tensor([3., 3.])
    >>> h.remove()
    """
    if self.grad_fn is not None:
        raise GraphError("post accumulate grad hooks cannot be registered on non-leaf tensors "
                         "(register_post_accumulate_grad_hook on a tensor with a grad_fn); use "
                         "register_hook for a non-leaf's gradient")
    if not self._requires_grad:
        raise GraphError("register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
                         "does not require grad")
    hooks = self._post_acc_hooks
    if hooks is None:         # this thread's backwards look for the leaves it hooked
        hooks = self._post_acc_hooks = []
        registry = STATE.hooked_leaves
        registry.add(weakref.ref(self, registry.discard))
    hooks.append(hook)
    return HookHandle(hooks, hook)


_Tensor._edge = _edge
_Tensor.retain_grad = retain_grad
_Tensor.register_hook = register_hook
_Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
_Tensor._post_acc_hooks = None      # a leaf's post-accumulate-grad hooks, once one is registered
_Tensor._retain_gen = _Tensor._retain_live = 0      # retain_grad's hooks: see add_retain_hook
