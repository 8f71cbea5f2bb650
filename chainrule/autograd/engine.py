"""The reverse pass: order the graph, run each node's VJP once, accumulate, free. Knows no ops."""
from __future__ import annotations

import gc
import sys
from heapq import heappop, heappush
from typing import Any, Sequence

from chainrule.core._backend import np
from chainrule.core._dtypes import is_floating as _is_float
from chainrule.core.batched import BatchedTensor
from chainrule.core.errors import DTypeError, GraphError, ShapeError, rule_error
from chainrule.core.grad_mode import STATE
from chainrule.core.graph import HOOKED_LEAVES, hooked_accumulators, run_post_acc_hooks, walk
from chainrule.core.tensor import Tensor as _Tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.numpy import astype as _astype
from chainrule.numpy import copy as _copy
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
    d = STATE.__dict__             # per thread; the key exists only while callbacks are queued
    queued = d.get("final_callbacks")
    if queued is None:
        queued = d["final_callbacks"] = []
    queued.append(fn)


def _run_callbacks(d: dict) -> None:
    queued = d["final_callbacks"]
    i = 0
    while i < len(queued):         # a callback may queue more: they run too, after it
        queued[i]()
        i += 1
    del d["final_callbacks"]


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
    """Process every node that receives a gradient from ``roots`` once, in dependency order.

    Nodes are numbered as they are created, and a node is always created after the nodes of its
    inputs, so reverse creation order is a topological order: the engine pops the pending node with
    the highest number from a heap. No dependency-counting pass is needed, and nothing that does not
    receive a gradient is visited.

    ``targets`` maps edges to tensors whose gradient is wanted: with ``accumulate`` False their
    cotangents are returned and nothing else is run past them; with True only they accumulate.
    ``capture`` (default: ``targets`` when not accumulating) names the edges whose cotangents are
    returned; a captured leaf gives its gradient back instead of accumulating it.
    """
    if capture is None and not accumulate:
        capture = targets
    st = STATE
    tensor_mode = create_graph or bool(st.fw_levels) or bool(st.observers)
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
        if edge[0] not in pending:
            heappush(heap, (-edge[0].seq, edge[0]))
        _add(pending, edge, g)
    captured: dict = {}
    stored = {id(g) for _, g in roots}      # arrays a leaf's .grad must not alias: the caller's
    grads = gi = None
    anomaly = st.anomaly
    d = st.__dict__                   # (non-rare fields: the hot path writes the dict directly)
    # With hooked leaves about, the outermost accumulating backward orders them (_order_hooked) and
    # owns ``deferred``: a backward inside it (a checkpoint's) accumulates without running hooks
    # and leaves the leaves there, for the outer one to run once their gradient is complete.
    # (Without any, no leaf has hooks and neither name below is read.)
    early = None
    if HOOKED_LEAVES:
        deferred = d.get("deferred_hooks")
        nested = deferred is not None
        if accumulate and not nested:
            early = _order_hooked(roots)
            deferred = d["deferred_hooks"] = {}
    own_grads = early is not None or create_graph
    prev_grad, prev_in_bw = d["grad_enabled"], d["in_backward"]
    d["grad_enabled"], d["in_backward"] = create_graph, True
    # A backward allocates many short-lived objects that refcounting frees; the cyclic collector
    # scanning them costs ~8% of a small-op backward, so it waits until the pass is over.
    collect = gc.isenabled()
    gc.disable()
    # a backward run inside a backward (prev_in_bw) has its own queue of final callbacks
    outer_callbacks = d.pop("final_callbacks", None) if prev_in_bw else None
    try:
        # ``nxt``: a node made pending by the last one and newer than everything in the heap, run
        # next without going through the heap (a chain never touches the heap at all)
        nxt = None
        while True:
            if nxt is not None:
                node, nxt = nxt, None
            elif heap:
                node = heappop(heap)[1]
            else:
                break
            g = pending.pop(node)
            if needed is not None and node not in needed:    # leads to no target: skipped, and so
                if node.pre_hooks and node in root_nodes:    # are its hooks, but for a root's (PyTorch)
                    _run_hooks(node, g, tensor_mode)
                continue
            if node.pre_hooks:
                g = _run_hooks(node, g, tensor_mode)
            if capture is not None and _capture(node, g, capture, captured) and node.is_accumulator:
                continue                             # a captured leaf gives its gradient back
            if node.is_accumulator:
                if accumulate:
                    if own_grads:                # a leaf's .grad must be its own
                        g = _own(g, node, early, create_graph, grads, gi)
                    hooked = node.accumulate(g, create_graph, stored)
                    if hooked is not None:
                        if nested:
                            deferred[id(hooked)] = hooked
                        else:
                            if deferred:
                                deferred.pop(id(hooked), None)
                            run_post_acc_hooks(hooked)
                continue
            if needed is not None and (node, 0) in targets and len(node.metas) == 1 and \
                    not _upstream_target(node, needed):      # a target with no target behind it
                continue
            try:                                     # free when nothing is raised (3.11)
                grads = node.vjp(g, tensor_mode)
            except Exception as e:
                if not hasattr(node, "prim"):        # a cr.Function's backward: the user's own error
                    raise
                raise rule_error(e, f"backward of '{node.prim.name}'") from e
            if anomaly:
                anomaly.check(node, grads)
            for edge, gi in zip(node.edges, grads):
                if edge is None or gi is None:
                    continue
                child = edge[0]
                metas = child.metas
                shape, dtype = metas[edge[1]]
                if tensor_mode or gi.shape != shape or gi.dtype is not dtype:   # _fit: exact test
                    gi = _fit(gi, edge, node, tensor_mode)
                if child in pending:
                    if len(metas) == 1:
                        pending[child] = pending[child] + gi
                    else:
                        _add(pending, edge, gi)
                    continue
                if nxt is None:
                    nxt = child
                else:
                    heappush(heap, (-child.seq, child))
                if len(metas) == 1:
                    pending[child] = gi
                else:
                    _add(pending, edge, gi)
            if nxt is not None and heap and heap[0][0] < -nxt.seq:   # the heap holds a newer node
                heappush(heap, (-nxt.seq, nxt))
                nxt = None
            if not retain_graph:
                node.release()
        if early is not None:
            for t in list(deferred.values()):     # accumulated inside reentrant nodes only
                run_post_acc_hooks(t)
        if "final_callbacks" in d:
            _run_callbacks(d)
    finally:
        if early is not None:
            for acc, seq in early.items():
                acc.seq = seq
            del d["deferred_hooks"]
        d["grad_enabled"], d["in_backward"] = prev_grad, prev_in_bw
        if "final_callbacks" in d:          # a node or callback raised: the queue is dropped
            del d["final_callbacks"]
        if outer_callbacks is not None:
            d["final_callbacks"] = outer_callbacks
        if collect:
            gc.enable()
    return captured


def _own(g: Any, node: Any, early: dict | None, create_graph: bool, grads: Any, gi: Any) -> Any:
    """``g`` for a leaf's ``.grad``, copied where it would be shared. Under ``create_graph`` a copy
    with history, always (PyTorch clones too): otherwise an add hands both leaves one tensor. For
    a leaf with post-accumulate-grad hooks, a copy when a gradient still in flight is this very
    array (``run``'s own references, ``grads`` and ``gi``, aside), so a hook may write ``.grad``."""
    if create_graph:
        return _copy(g) if isinstance(g, _Tensor) and not g._level else g
    if node not in early or type(g) is not np.ndarray:
        return g
    held = (gi is g) + sum(x is g for x in grads or ())      # run's own references, besides its g
    del gi       # ours: 3 = run's g, this frame's g, getrefcount's argument
    return g.copy() if sys.getrefcount(g) > 3 + held else g


def _order_hooked(roots: list) -> dict:
    """Renumber the nodes of the leaves with post-accumulate-grad hooks to run right after their
    earliest consumer, when their gradient is complete (a leaf's node is as old as the leaf's first
    use ever, so it would run last), so the hooks fire during the backward as in PyTorch. Several
    leaves completed by one consumer keep their relative order. Returns their own numbers, which
    ``run`` puts back when it ends. (The numbers live on the nodes: two backwards running at once in
    two threads over one hooked leaf may see each other's; concurrent backward is not supported.)"""
    first = hooked_accumulators([edge[0] for edge, _ in roots])
    own = {acc: acc.seq for acc in first}
    by_consumer: dict = {}
    for acc, s in first.items():
        by_consumer.setdefault(s, []).append(acc)
    for s, accs in by_consumer.items():
        accs.sort(key=own.__getitem__, reverse=True)
        for i, acc in enumerate(accs):       # between s - 1 and s: after s, before anything older
            acc.seq = s - (i + 1) / (len(accs) + 1)
    return own


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
