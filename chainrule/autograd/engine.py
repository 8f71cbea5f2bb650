"""The reverse pass: order the graph, run each node's VJP once, accumulate, free. Knows no ops."""
from __future__ import annotations

import gc
from heapq import heappop, heappush
from typing import Any, Sequence

from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating as _is_float
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import DTypeError, GraphError, ShapeError, rule_error
from chainrule.core.grad_mode import STATE
from chainrule.core.graph import hooked_producers, other_refs, run_post_acc_hooks, walk
from chainrule.core.tensor import Tensor as _Tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.ops.elementwise import astype as _astype
from chainrule.ops.elementwise import copy as _copy
from chainrule.ops.reduction import sum_to


def queue_callback(fn: Any) -> None:
    """Run ``fn()`` once the running backward has processed every node, before ``backward()`` or
    ``autograd.grad`` returns (PyTorch's ``Variable._execution_engine.queue_callback``).

    Callable only during a backward (from a tensor hook, a post-accumulate-grad hook, a custom
    Function's backward or another callback). Callbacks run in the order queued, those queued by a
    callback too, with grad mode as in the backward (on under ``create_graph=True``); an exception
    raised by one is raised by the backward, and the rest do not run.
    """
    if not STATE.in_backward:
        raise GraphError("queue_callback: final callbacks can only be installed during a backward pass "
                         "(call it from a tensor hook, a post accumulate grad hook or a Function's "
                         "backward)")
    if not callable(fn):
        raise TypeError(f"queue_callback: expected a callable, got {type(fn).__name__}")
    d = STATE.__dict__             # per thread; None until a callback is queued
    queued = d["final_callbacks"]
    if queued is None:
        queued = d["final_callbacks"] = []
    queued.append(fn)


def _run_callbacks(d: dict) -> None:
    queued = d["final_callbacks"]
    i = 0
    while i < len(queued):         # a callback may queue more: they run too, after it
        queued[i]()
        i += 1
    d["final_callbacks"] = None


def backward(outputs: Sequence[Any], grad_outputs: Sequence[Any] | None, retain_graph: bool | None,
             create_graph: bool, inputs: Sequence[Any] | None = None) -> None:
    """Accumulate gradients of ``outputs`` into the ``.grad`` of leaves (or of ``inputs`` only)."""
    roots = _roots(outputs, grad_outputs, create_graph, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    targets = None
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, _Tensor) else list(inputs)
        targets = {t._edge(): t for t in inputs}
        for t in inputs:           # a non-leaf in inputs= gets its .grad as leaves do: PyTorch makes
            if t.grad_fn is not None:      # it retain its gradient, in this and later backwards
                t.retain_grad()
    run(roots, retain_graph, create_graph, targets, accumulate=True)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> tuple:
    """Return the gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated).

    >>> import chainrule as cr
    >>> x = cr.tensor(2.0, requires_grad=True)
    >>> cr.autograd.grad(x ** 3, x)
    (tensor(12.),)
    """
    single = isinstance(outputs, _Tensor)
    outputs = [outputs] if single else list(outputs)
    if grad_outputs is not None and isinstance(grad_outputs, (_Tensor, np.ndarray)):
        grad_outputs = [grad_outputs]
    inputs = [inputs] if isinstance(inputs, _Tensor) else list(inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, _Tensor) or not x.requires_grad:
            raise GraphError(f"autograd.grad: input {i} does not require grad; create it with "
                             f"requires_grad=True (or call .requires_grad_())")
    roots = _roots(outputs, grad_outputs, create_graph, "autograd.grad")
    if retain_graph is None:
        retain_graph = create_graph
    targets = {x._edge(): x for x in inputs}
    captured = run(roots, retain_graph, create_graph, targets, accumulate=False)
    result = []
    for i, x in enumerate(inputs):
        g = captured.get(x._edge())
        if g is None:
            if not allow_unused:
                raise GraphError(f"autograd.grad: input {i} (shape {x.shape}) was not used to compute "
                                 f"the outputs; pass allow_unused=True to get None for it")
            result.append(None)
            continue
        if not isinstance(g, _Tensor):
            g = _wrap(g)
        elif not create_graph:
            g = _detached(g)
        result.append(g)
    return tuple(result)


def _detached(g: Any) -> Any:
    """``g`` out of the graph, keeping its forward-mode tangents: under forward mode the gradient
    is a dual (forward-over-reverse); a vmap-batched one keeps those of its batch."""
    if g._level:
        return BatchedTensor(_detached(g.value), g._level, g.bsize) if isinstance(g.value, _Tensor) else g
    tangents, g = g._tangents, g.detach()
    g._tangents = tangents
    return g


def gradients_and_accumulate(outputs: list, grad_outputs: list, inputs: list, create_graph: bool,
                             stop: list | None = None) -> list:
    """Gradients of ``outputs`` for ``inputs``, returned (None where unused), while every other leaf
    reached accumulates its gradient into ``.grad`` as in ``backward``; with ``stop``, the walk goes
    no further than ``inputs`` and ``stop`` (tensors), whose nodes are then the only ones run past.
    What a checkpoint's backward needs: its inputs' gradients back, its closure's parameters filled.
    """
    roots = _roots(outputs, grad_outputs, create_graph, "backward")
    capture = {x._edge(): x for x in inputs}
    targets = None if stop is None else {**capture, **{t._edge(): t for t in stop}}
    captured = run(roots, create_graph, create_graph, targets, accumulate=True, capture=capture)
    return [captured.get(edge) for edge in capture]


def _roots(outputs: list, grad_outputs: Any, create_graph: bool, who: str) -> list:
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise ShapeError(f"{who}: got {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    roots = []
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise GraphError(f"{who}: output {i} does not require grad and has no grad_fn; make sure "
                             f"an input has requires_grad=True and the computation did not run "
                             f"under cr.no_grad()")
        g = None if grad_outputs is None else grad_outputs[i]
        if g is None:
            if out.data.size != 1:
                raise GraphError(f"{who}: grad can be implicitly created only for scalar outputs, but "
                                 f"output {i} has shape {out.shape}; pass gradient= (a tensor of that "
                                 f"shape), or reduce the output first (e.g. .sum())")
            if out.data.dtype.kind == "c":
                raise DTypeError(f"{who}: grad can be implicitly created only for real scalar outputs, "
                                 f"but output {i} is {out.dtype}; differentiate a real function of "
                                 f"it (z.abs() ** 2, z.real, ...) or pass gradient=")
            g = np.ones(out.data.shape, out.data.dtype)
        elif isinstance(g, _Tensor) and g._level:     # batched by cr.vmap: the rules run batched
            if tuple(g.shape) != tuple(out.shape):
                raise ShapeError(f"{who}: gradient has shape {tuple(g.shape)} but output {i} has shape "
                                 f"{out.shape}; they must match")
        else:
            gd = g.data if isinstance(g, _Tensor) else np.asarray(g)
            if gd.dtype.kind not in "fiub" and not _is_float(gd.dtype):
                raise DTypeError(f"{who}: gradient for output {i} has dtype {gd.dtype}; it must be "
                                 f"numeric, of the output's shape {out.shape} (dtype {out.dtype})")
            if not isinstance(g, _Tensor):
                gd = gd.astype(out.dtype, copy=False)
            if gd.shape != out.shape:
                raise ShapeError(f"{who}: gradient has shape {gd.shape} but output {i} has shape "
                                 f"{out.shape}; they must match")
            if not (create_graph and isinstance(g, _Tensor)):
                g = gd
        roots.append((out._edge(), g))
    return roots


def run(roots: list, retain_graph: bool, create_graph: bool, targets: dict | None,
        accumulate: bool, capture: dict | None = None) -> dict:
    """Run each node that gets a gradient from ``roots`` once, newest first (reverse ``seq`` is topological).
    ``targets``: edges returned (``accumulate`` False) or the only ones accumulated; ``capture``: returned."""
    st, d = STATE, STATE.__dict__     # (non-rare fields: the hot path writes the dict directly)
    tensor_mode = create_graph or bool(st.fw_levels) or bool(st.observers) or st.recorder is not None
    needed, root_nodes, capture, pending, heap, stored = _start(roots, targets, capture, accumulate, tensor_mode)
    captured: dict = {}
    grads = gi = hooks = nxt = None      # nxt: a node made pending by the last one, newer than the heap's
    if d["hooked_leaves"] and accumulate and d["leaf_hooks"] is None:     # the outermost one owns them
        hooks = d["leaf_hooks"] = _LeafHooks(roots, pending, needed, capture, create_graph, tensor_mode, stored)
    watch, own_grads, saved = hooks or st.anomaly, hooks is not None or create_graph, _enter(d, create_graph)
    try:
        while True:
            if nxt is not None:
                node, nxt = nxt, None
            elif heap:
                node = heappop(heap)[1]
            else:
                break
            g = pending.pop(node)
            if needed is not None and node not in needed and _skipped(node, g, root_nodes, tensor_mode):
                continue
            if node.pre_hooks:
                g = _run_hooks(node, g, tensor_mode)
            if capture is not None and _capture(node, g, capture, captured) and node.is_accumulator:
                continue                             # a captured leaf gives its gradient back
            if node.is_accumulator:
                if accumulate:
                    if own_grads:                # a leaf's .grad must be its own (1: run's g)
                        g = hooks.own(node, g, 1 + (gi is g) + _count(grads, g)) if hooks else _with_history(g)
                    if (t := node.accumulate(g, create_graph, stored)) is not None:
                        _post_accumulate(t, d["leaf_hooks"], hooks is None)
                continue
            if needed is not None and (node, 0) in targets and _target_end(node, needed):
                continue
            try:                                     # free when nothing is raised (3.11)
                grads = node.vjp(g, tensor_mode)
            except Exception as e:
                _reraise(node, e)
            if watch:                                # anomaly's checks; the hooked leaves it completes
                grads = watch.check(node, grads)
            for edge, gi in zip(node.edges, grads):
                if edge is None or gi is None:
                    continue
                child = edge[0]
                shape, dtype = (metas := child.metas)[edge[1]]
                if tensor_mode or gi.shape != shape or gi.dtype is not dtype:   # _fit: exact test
                    gi = _fit(gi, edge, node, tensor_mode)
                if child not in pending:             # newly pending: next, or into the heap
                    if nxt is None:
                        nxt = child
                    else:
                        heappush(heap, (-child.seq, child))
                    if len(metas) == 1:
                        pending[child] = gi
                        continue
                elif len(metas) == 1:
                    pending[child] = pending[child] + gi
                    continue
                _add(pending, edge, gi)
            if nxt is not None and heap and heap[0][0] < -nxt.seq:   # the heap holds a newer node
                nxt = heappush(heap, (-nxt.seq, nxt))           # (None)
            if not retain_graph:
                node.release()
        if hooks is not None or d["final_callbacks"] is not None:
            _finish(d, hooks)
    finally:
        _leave(d, saved, hooks)
    return captured


def _start(roots: list, targets: dict | None, capture: dict | None, accumulate: bool, tensor_mode: bool) -> tuple:
    """What ``run`` starts from: the ``needed`` nodes (None: all), the root nodes whose hooks run even
    when not needed, ``capture`` (default: ``targets`` when not accumulating), the pending gradients,
    the heap (newest first) and the ids of the arrays a leaf's ``.grad`` must not alias: the caller's."""
    if capture is None and not accumulate:
        capture = targets
    needed = root_nodes = None
    if targets is not None:
        # a root leading to no target still runs its tensor hooks when it is the only root: PyTorch
        # then starts at it, while several roots hang under a root node that feeds needed ones only
        needed, root_nodes = _needed(roots, targets), {roots[0][0][0]} if len(roots) == 1 else ()
    pending: dict = {}
    heap: list = []
    for edge, g in roots:
        if tensor_mode and not isinstance(g, _Tensor):
            g = _wrap(g)
            if STATE.recorder is not None:        # cr.compile: the seed made from shapes (ones)
                STATE.recorder.on_seed(g.data)
        if edge[0] not in pending:
            heappush(heap, (-edge[0].seq, edge[0]))
        _add(pending, edge, g)
    return needed, root_nodes, capture, pending, heap, {id(g) for _, g in roots}


def _skipped(node: Any, g: Any, root_nodes: Any, tensor_mode: bool) -> bool:
    """A node that leads to no target is not run, nor are its hooks, but for a root's (PyTorch)."""
    if node.pre_hooks and node in root_nodes:
        _run_hooks(node, g, tensor_mode)
    return True


def _target_end(node: Any, needed: set) -> bool:
    """Whether a target node (output 0) has no target behind it: it need not run."""
    return len(node.metas) == 1 and not _upstream_target(node, needed)


def _reraise(node: Any, e: Exception) -> None:
    """Raise the error of ``node``'s backward, named after its op (a cr.Function's: the user's own)."""
    if not hasattr(node, "prim"):
        raise                                    # (called while ``e`` is being handled)
    raise rule_error(e, f"backward of '{node.prim.name}'") from e


def _finish(d: dict, hooks: Any) -> None:
    """The pass is over: the hooks still deferred, then the final callbacks."""
    if hooks is not None:
        hooks.finish()
    if d["final_callbacks"] is not None:
        _run_callbacks(d)


def _enter(d: dict, create_graph: bool) -> tuple:
    """Put this thread's state into a backward's; return what ``_leave`` restores. A backward inside
    a backward has its own queue of final callbacks. A backward allocates many short-lived objects
    that refcounting frees; the cyclic collector scanning them costs ~8% of a small-op backward, so
    it waits until the pass is over."""
    saved = d["grad_enabled"], d["in_backward"], d["final_callbacks"], gc.isenabled()
    d["grad_enabled"], d["in_backward"], d["final_callbacks"] = create_graph, True, None
    gc.disable()
    return saved


def _leave(d: dict, saved: tuple, hooks: Any) -> None:
    """Undo ``_enter`` (a queue of callbacks left by a raising node or callback is dropped)."""
    d["grad_enabled"], d["in_backward"], d["final_callbacks"], collect = saved
    if hooks is not None:
        d["leaf_hooks"] = None
    if collect:
        gc.enable()


def _with_history(g: Any) -> Any:
    """Under ``create_graph`` a leaf's ``.grad`` is a copy with history, always (PyTorch clones too):
    otherwise an add hands both leaves one tensor."""
    return _copy(g) if isinstance(g, _Tensor) and not g._level else g


def _count(grads: Any, g: Any) -> int:
    return sum(x is g for x in grads) if grads else 0


def _post_accumulate(t: Any, tracker: Any, nested: bool) -> None:
    """``t``'s gradient was accumulated: its hooks fire now, or, in a backward nested in the one that
    owns ``tracker`` (a checkpoint's), once that one has its whole gradient."""
    if tracker is None:
        run_post_acc_hooks(t)
    else:
        tracker.accumulated(t, nested)


class _LeafHooks:
    """The post-accumulate-grad hooks of the outermost accumulating backward (``STATE.leaf_hooks``
    while it runs), which ``run`` consults only when this thread has hooked leaves.

    For each hooked leaf's node the engine reaches, ``left`` counts the producers still to run (its
    consumers and the reentrant nodes, see ``graph.hooked_producers``); ``feeds`` maps each producer
    to the leaf nodes it counts for. Their gradients gather in ``pending`` (seeded with ``_NOTHING``,
    so the loop never schedules them). When a producer's rule has run (``check``), each leaf it
    completes accumulates at once, before any other node runs (PyTorch's "AccumulateGrad as soon as
    possible"), and its hooks fire; a leaf whose count never reaches 0 (a producer received no
    gradient) accumulates when the pass ends. ``deferred``: leaves a nested backward accumulated
    into, whose hooks wait for this one: they fire with the leaf, or at the end. ``own`` keeps hooked
    ``.grad`` arrays their leaf's own, so a hook may write them in place.
    """

    def __init__(self, roots: list, pending: dict, needed: set | None, capture: dict | None,
                 create_graph: bool, tensor_mode: bool, stored: set) -> None:
        self.pending, self.stored = pending, stored
        self.create_graph, self.tensor_mode, self.anomaly = create_graph, tensor_mode, STATE.anomaly
        self.hooked = hooked_producers([edge[0] for edge, _ in roots])
        self.left: dict = {}
        self.feeds: dict = {}
        self.deferred: dict = {}
        for acc, producers in self.hooked.items():
            if acc in pending or (needed is not None and acc not in needed) or \
                    (capture is not None and (acc, 0) in capture):     # a root, skipped or given back
                continue
            producers = [p for p in producers if needed is None or p in needed]    # the others never run
            self.left[acc] = len(producers)
            pending[acc] = _NOTHING
            for p in producers:
                self.feeds.setdefault(p, []).append(acc)

    def check(self, node: Any, grads: Any) -> Any:
        """After ``node``'s rule: accumulate the hooked leaves it completes (their hooks fire) and
        return ``grads`` less what it gave them."""
        if self.anomaly:
            self.anomaly.check(node, grads)
        done = [acc for acc in self.feeds.pop(node, ()) if self._ran(acc)]
        if not done:
            return grads
        out = list(grads)
        for acc in sorted(done, key=_newest, reverse=True):     # several: the newer leaf first
            g = self._gradient(acc, node, out)
            if g is not None:
                self._accumulate(acc, self.own(acc, g, 1 + _count(grads, g)))
        return out

    def _accumulate(self, acc: Any, g: Any) -> None:
        t = acc.accumulate(g, self.create_graph, self.stored)
        if t is not None:
            self.accumulated(t, False)

    def _ran(self, acc: Any) -> bool:
        left = self.left[acc] - 1
        self.left[acc] = left
        return not left

    def _gradient(self, acc: Any, node: Any, out: list) -> Any:
        """``acc``'s whole gradient, after its tensor hooks: what is pending plus what ``node`` gives it
        (taken out of ``out``); None if it has none."""
        g = self.pending.pop(acc)
        if g is _NOTHING:
            g = None
        for i, edge in enumerate(node.edges):
            gi = out[i]
            if edge is None or edge[0] is not acc or gi is None:
                continue
            out[i] = None
            shape, dtype = acc.metas[0]
            if self.tensor_mode or gi.shape != shape or gi.dtype is not dtype:
                gi = _fit(gi, edge, node, self.tensor_mode)
            g = gi if g is None else g + gi
        if g is not None and acc.pre_hooks:
            g = _run_hooks(acc, g, self.tensor_mode)
        return g

    def own(self, acc: Any, g: Any, known: int) -> Any:
        """``g`` for ``acc``'s ``.grad``, copied where it would be shared: with history under
        ``create_graph``; for a hooked leaf, when a reference other than the ``known`` ones of the
        engine's callers (a gradient still in flight, a user's array) holds this very array."""
        if self.create_graph:
            return _with_history(g)
        if acc not in self.hooked:
            return g
        if isinstance(g, _Tensor):               # tensor mode (a profile, a capture): copied by an op
            return _copy(g) if not g._level and other_refs(g) > known else g
        if type(g) is not np.ndarray:
            return g
        return g.copy() if other_refs(g) > known else g

    def accumulated(self, t: Any, nested: bool) -> None:
        """``t``'s gradient was accumulated, by this backward (its hooks fire) or a nested one."""
        if nested:
            self.deferred[id(t)] = t
        else:
            self.deferred.pop(id(t), None)
            run_post_acc_hooks(t)

    def finish(self) -> None:
        """The end of the pass: the leaves still waiting for a producer that received no gradient,
        then the hooks of leaves accumulated inside nested backwards only."""
        for acc in sorted((a for a, n in self.left.items() if n), key=_newest, reverse=True):
            g = self.pending.pop(acc)
            if g is not _NOTHING:
                g = _run_hooks(acc, g, self.tensor_mode) if acc.pre_hooks else g
                self._accumulate(acc, self.own(acc, g, 1))
        for t in list(self.deferred.values()):
            run_post_acc_hooks(t)


def _newest(node: Any) -> int:
    return node.seq


class _Nothing:
    """No gradient yet: adding one gives that one."""

    def __add__(self, other: Any) -> Any:
        return other


_NOTHING = _Nothing()


def _capture(node: Any, g: Any, capture: dict, captured: dict) -> bool:
    """Store ``node``'s cotangents that ``capture`` asks for; say whether there were any."""
    hit = False
    for nr in range(len(node.metas)):
        if (node, nr) in capture:
            captured[(node, nr)] = g[nr] if type(g) is list else g
            hit = True
    return hit


def _add(pending: dict, edge: tuple, g: Any) -> None:
    node, nr = edge
    if len(node.metas) == 1:
        old = pending.get(node)
        pending[node] = g if old is None else old + g
        return
    slots = pending.get(node)
    if slots is None:
        slots = pending[node] = [None] * len(node.metas)
    slots[nr] = g if slots[nr] is None else slots[nr] + g


def _fit(g: Any, edge: tuple, consumer: Any, tensor_mode: bool) -> Any:
    """Sum ``g`` to the shape of the value it is a gradient of and cast it to that dtype. Only here."""
    shape, dtype = edge[0].metas[edge[1]]
    if tensor_mode and not isinstance(g, _Tensor):
        g = _wrap(np.asarray(g))
    gshape = g.shape
    if gshape != shape:
        try:
            g = sum_to(g, shape)
        except ValueError:
            raise ShapeError(f"{consumer.name} returned a gradient of shape {tuple(gshape)} for an "
                             f"input of shape {shape}; a gradient must have the input's shape (or "
                             f"broadcast to it)") from None
    if g.dtype != dtype:
        g = _astype(g, dtype)
    return g


def _run_hooks(node: Any, g: Any, tensor_mode: bool) -> Any:
    multi = type(g) is list
    for nr, hooks in node.pre_hooks.items():
        gi = g[nr] if multi else g
        if gi is None:
            continue
        for fn in list(hooks):
            arg = gi if isinstance(gi, _Tensor) else _wrap(gi)
            res = fn(arg)
            if res is not None:
                res = _hook_result(res, fn, node.metas[nr])
                gi = res if tensor_mode else res.data
        if multi:
            g[nr] = gi
        else:
            g = gi
    return g


def _hook_result(res: Any, fn: Any, meta: tuple) -> Any:
    """A hook's replacement gradient, checked: a tensor (or array) of the gradient's shape and dtype."""
    shape, dtype = meta
    name = getattr(fn, "__qualname__", type(fn).__name__)
    if not isinstance(res, (_Tensor, np.ndarray)):
        raise DTypeError(f"hook {name!r} returned {type(res).__name__} {res!r:.30}; a tensor hook must return "
                         f"None or a tensor of the gradient's shape {shape} and dtype {dtype}")
    if res.shape != shape:
        raise ShapeError(f"hook {name!r} returned a gradient of shape {tuple(res.shape)} for a "
                         f"tensor of shape {shape}; a hook may change the values, not the shape")
    if res.dtype != dtype:
        raise DTypeError(f"hook {name!r} returned a gradient of dtype {res.dtype} for a tensor of "
                         f"dtype {dtype}; cast it back (.astype(...)) in the hook")
    return res if isinstance(res, _Tensor) else _wrap(res)


def _needed(roots: list, targets: dict) -> set:
    """Nodes on some path from the roots to a target (the others need not run)."""
    target_nodes = {edge[0] for edge in targets}
    needed: set = set()
    for node in walk(start for (start, _), _g in roots):   # inputs first: one pass decides all
        if node in target_nodes or any(e is not None and e[0] in needed for e in node.edges):
            needed.add(node)
    return needed


def _upstream_target(node: Any, needed: set) -> bool:
    return any(e is not None and e[0] in needed for e in node.edges)


def _tensor_backward(self: _Tensor, gradient: Any = None, retain_graph: bool | None = None,
                     create_graph: bool = False, inputs: Any = None) -> None:
    """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (reverse mode).

    >>> import chainrule as cr
    >>> x = cr.tensor(3.0, requires_grad=True)
    >>> (x ** 2).backward(); x.grad
    tensor(6.)
    """
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)


_Tensor.backward = _tensor_backward      # attached here: tensor.py holds data and metadata only
