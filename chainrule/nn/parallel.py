"""``DistributedDataParallel``: average gradients across ranks while the backward is still running.

The parameters are cut into buckets (about ``bucket_cap_mb`` each) in reverse registration order,
the order in which a backward usually produces their gradients, and the buckets are the same on
every rank. A post-accumulate-grad hook, which the engine fires as soon as a parameter's gradient
is complete, divides the gradient by the world size into its bucket: a bucket of one parameter
reduces that gradient's own array in place, a bucket of several copies them into one buffer
(reused while no ``.grad`` views it). A bucket whose gradients are all in starts a non-blocking
all-reduce at once (buckets start in index order on every rank, so the collectives match), and the
hooks drive MPI's progress with ``Test``. A callback queued on the backward
(``cr.autograd.queue_callback``) starts what is left and waits; each ``.grad`` is then its reduced
array, or a view of its bucket's buffer (no copy).

One "has a gradient" flag per parameter is reduced too (one small all-reduce after the buckets): a
parameter that got no gradient on some ranks is averaged with zeros from those ranks, one that got
none on any rank keeps ``.grad = None`` (so an optimizer skips it, as in one process).
"""
from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Iterator

from chainrule import autograd
from chainrule.core._backend import np
from chainrule.core.grad_mode import STATE
from chainrule.core.graph import other_refs
from chainrule.core.tensor import Tensor
from chainrule.distributed import collectives as dist
from chainrule.nn.module import Module


def _broadcast_coalesced(tensors: list) -> None:
    """Overwrite ``tensors`` with rank 0's values: one broadcast per dtype (their values concatenated),
    not one per tensor."""
    if dist.get_world_size() == 1:
        return
    by_dtype: dict[Any, list] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    root = dist.get_rank() == 0
    for dtype, group in by_dtype.items():
        flat = np.concatenate([np.ravel(t.data) for t in group]) if group else np.empty(0, dtype)
        dist.broadcast(flat, src=0)
        if root:
            continue
        o = 0
        for t in group:
            t.data[...] = flat[o:o + t.size].reshape(t.shape)
            t._bump()
            o += t.size


class _Bucket:
    """Parameters whose gradients are all-reduced together, divided by the world size on the way in.

    A bucket of one parameter reduces that gradient's own array in place when it may (the array
    the backward just produced, contiguous, of the wire dtype): no copy. Otherwise the gradients
    are copied into one buffer, which is reused from step to step once no ``.grad`` views it.
    """

    def __init__(self, index: int, params: list, first: int, dtype: Any, scale: float) -> None:
        self.index, self.params, self.first, self.dtype, self.scale = index, params, first, dtype, scale
        self.offsets, n = [], 0
        for p in params:
            self.offsets.append(n)
            n += p.size
        self.numel = n
        self.buffer: Any = None      # this step's: a gradient's own array (inplace), or a copy
        self.inplace = False
        self.spare: Any = None       # the last copy buffer, reused once no .grad views it
        self.ready: set[int] = set()
        self.work: dist.Work | None = None

    def put(self, i: int, grad: Any, owned: bool, flags: Any) -> None:
        """Divide parameter ``i``'s gradient ``grad`` (None: it has none) by the world size into
        the bucket; ``owned``: ``grad`` is the array the backward produced, so it may be reduced
        in place. Its "has a gradient" flag goes into ``flags``."""
        flags[self.first + i] = grad is not None
        self.ready.add(i)
        if owned and len(self.params) == 1 and grad.dtype == self.dtype and grad.flags.c_contiguous \
                and grad.flags.writeable:
            self.buffer, self.inplace = np.multiply(grad, self.scale, out=grad), True
            return
        if self.buffer is None:
            spare, self.spare = self.spare, None
            self.buffer = spare if spare is not None and not other_refs(spare) else np.empty(self.numel, self.dtype)
        p, o = self.params[i], self.offsets[i]
        if grad is None:
            self.buffer[o:o + p.size] = 0
        else:
            np.multiply(np.ravel(grad), self.scale, out=self.buffer[o:o + p.size], casting="unsafe")

    def reduced(self, flags: Any) -> Iterator[tuple[Tensor, Any]]:
        """Each parameter with its reduced gradient, None where no rank had one (once ``work`` is
        done); then the bucket is empty for the next backward."""
        for i, p in enumerate(self.params):
            if not flags[self.first + i]:
                yield p, None
            elif self.inplace:
                yield p, self.buffer
            else:     # a view of the buffer (no copy); the buffer is reused once no .grad views it
                o = self.offsets[i]
                yield p, self.buffer[o:o + p.size].astype(p.dtype, copy=False).reshape(p.shape)
        if not self.inplace:
            self.spare = self.buffer
        self.clear()

    def clear(self) -> None:
        """Empty for the next backward."""
        self.buffer, self.inplace, self.work = None, False, None
        self.ready.clear()


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training: forward is the module's, and after each backward
    every parameter's ``.grad`` is the average over the ranks (so N processes with batch B each
    train as one process with batch N*B and a mean loss).

    At construction rank 0's parameters and buffers are broadcast to all ranks (one collective per
    dtype), after checking that every rank has the same parameter shapes; a BatchNorm inside is then
    PyTorch's plain BatchNorm under DDP: each rank normalises with its own batch's statistics and
    updates its running ones from them, and the forwards re-start from rank 0's buffers. The buffer
    arguments are PyTorch 2.13's: ``broadcast_buffers`` (None: True) broadcasts the buffers at
    construction and before each forward that follows a forward with grad enabled outside
    ``no_sync()``; ``False`` leaves them rank-local, at construction too. ``forward_sync_buffers``,
    when given, decides the per-forward broadcast and the buffers are always broadcast at
    construction. ``init_sync=False`` broadcasts nothing at construction. ``no_sync()`` skips the
    gradients' communication (gradient accumulation). In a world of one it changes nothing.

    >>> import chainrule as cr, chainrule.distributed as dist
    >>> from chainrule.nn.parallel import DistributedDataParallel
    >>> dist.init_process_group(backend="self")
    >>> ddp = DistributedDataParallel(cr.nn.Linear(3, 1))
    >>> ddp(cr.ones((2, 3))).sum().backward(); ddp.module.weight.grad.shape
    (1, 3)
    >>> dist.destroy_process_group()
    """

    def __init__(self, module: Module, bucket_cap_mb: float = 25, broadcast_buffers: bool | None = None, *,
                 init_sync: bool = True, forward_sync_buffers: bool | None = None) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a cr.nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise dist.DistributedError("DistributedDataParallel: the process group is not initialized; "
                                        "call chainrule.distributed.init_process_group() first")
        if bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
        self.module = module
        if forward_sync_buffers is not None:
            forward, at_init = bool(forward_sync_buffers), True
        else:
            forward = at_init = broadcast_buffers is None or bool(broadcast_buffers)
        object.__setattr__(self, "broadcast_buffers", forward)
        object.__setattr__(self, "bucket_cap_mb", float(bucket_cap_mb))
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._check_same_parameters(named)
        if init_sync:
            _broadcast_coalesced([p for _, p in named] + (list(module.buffers()) if at_init else []))
        object.__setattr__(self, "_forward_sync", True)   # PyTorch's require_forward_param_sync
        object.__setattr__(self, "_sync", True)
        object.__setattr__(self, "_queued", False)
        object.__setattr__(self, "_next", 0)
        buckets: list[_Bucket] = []
        where: dict[int, tuple[_Bucket, int]] = {}
        if dist.get_world_size() > 1:
            cap = bucket_cap_mb * 2 ** 20
            open_: dict[Any, tuple[list, int]] = {}

            def close(dtype: Any) -> None:
                params, _ = open_.pop(dtype)
                first = sum(len(b.params) for b in buckets)
                b = _Bucket(len(buckets), params, first, dtype, 1.0 / dist.get_world_size())
                buckets.append(b)
                for i, q in enumerate(params):
                    where[id(q)] = (b, i)
            for _, p in reversed(named):
                wire = p.dtype if p.dtype.kind in "fc" and p.dtype.itemsize >= 4 else np.dtype(np.float32)
                params, nbytes = open_.get(wire, ([], 0))
                params.append(p)
                open_[wire] = (params, nbytes + p.size * wire.itemsize)
                if open_[wire][1] >= cap:
                    close(wire)
            for wire in list(open_):
                close(wire)
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_where", where)
        object.__setattr__(self, "_names", {id(p): n for n, p in named})
        object.__setattr__(self, "_flags", np.zeros(len(where), np.int32))   # has a gradient, per param
        object.__setattr__(self, "_handles", [p.register_post_accumulate_grad_hook(self._hook)
                                              for _, p in named if id(p) in where])

    # ----- construction -----
    @staticmethod
    def _check_same_parameters(named: list) -> None:
        n = dist.get_world_size()
        if n == 1:
            return
        sig = repr([(name, tuple(p.shape), p.dtype.str) for name, p in named]).encode()
        digest = int.from_bytes(hashlib.sha256(sig).digest()[:7], "little")
        mine = np.array([len(named), sum(p.size for _, p in named), digest], np.int64)
        every = [np.zeros(3, np.int64) for _ in range(n)]
        dist.all_gather(every, mine)
        bad = [r for r in range(n) if not np.array_equal(every[r], every[0])]
        if bad:
            rows = "; ".join(f"rank {r}: {int(every[r][0])} parameters, {int(every[r][1])} elements"
                             for r in [0, *bad])
            here = ", ".join(f"{name}{list(p.shape)}:{p.dtype}" for name, p in named[:8])
            raise dist.DistributedError(
                f"DistributedDataParallel: the ranks' models differ (names, shapes or dtypes of the "
                f"parameters that require grad): {rows}. Rank {dist.get_rank()} has "
                f"{here}{' ...' if len(named) > 8 else ''}. Build the same model on every rank")

    # ----- the module's own -----
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers and self._forward_sync:
            _broadcast_coalesced(list(self.module.buffers()))      # buffers re-assigned since count too
        out = self.module(*args, **kwargs)
        # as PyTorch: a forward without grad, or inside no_sync(), skips the next forward's broadcast
        object.__setattr__(self, "_forward_sync", STATE.grad_enabled and self._sync)
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards inside accumulate local gradients without communication; the first backward
        after it averages everything accumulated."""
        old = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", old)

    def extra_repr(self) -> str:
        return f"buckets={len(self._buckets)}, bucket_cap_mb={self.bucket_cap_mb:g}"

    @property
    def bucket_sizes(self) -> list[int]:
        """The number of parameters in each bucket, in launch order."""
        return [len(b.params) for b in self._buckets]

    # ----- the backward -----
    def _hook(self, p: Tensor) -> None:
        if not self._sync:
            return
        if not self._queued:
            autograd.queue_callback(self._finish)
            object.__setattr__(self, "_queued", True)
        b, i = self._where[id(p)]
        if b.work is not None:
            raise dist.DistributedError(
                f"DistributedDataParallel: parameter {self._names[id(p)]!r} received more gradient "
                f"after its bucket's all-reduce had started: a backward run inside this backward (a "
                f"cr.Function whose backward calls backward) added to it. Set `reentrant = True` on "
                f"that Function's class (as cr.checkpoint's has), so the engine completes a "
                f"parameter's gradient before its hook fires")
        # the engine gives a hooked leaf a .grad that nothing else holds: reducible in place
        b.put(i, p.grad.data, p.grad.grad_fn is None, self._flags)
        self._launch(complete_only=True)
        for q in self._buckets[:self._next]:       # drive progress of what is in flight
            if not q.work.is_completed():
                break

    def _launch(self, complete_only: bool) -> None:
        buckets = self._buckets
        while self._next < len(buckets):
            b = buckets[self._next]
            if complete_only and len(b.ready) < len(b.params):
                return
            for i, p in enumerate(b.params):
                if i not in b.ready:      # no gradient in this backward: the one from before, or none
                    b.put(i, None if p.grad is None else p.grad.data, False, self._flags)
            b.work = dist.all_reduce(b.buffer, dist.ReduceOp.SUM, async_op=True)
            object.__setattr__(self, "_next", self._next + 1)

    def _finish(self) -> None:
        object.__setattr__(self, "_queued", False)
        try:
            self._launch(complete_only=False)
            flags = dist.all_reduce(self._flags, dist.ReduceOp.SUM, async_op=True)
            for b in self._buckets:
                b.work.wait()
            flags.wait()
            for b in self._buckets:
                for p, g in b.reduced(self._flags):
                    if g is None:
                        p.grad = None
                    elif p.grad is not None and p.grad.data is g:
                        p.grad._bump()           # reduced in place
                    else:
                        p.grad = Tensor(g)
        finally:
            object.__setattr__(self, "_next", 0)
            for b in self._buckets:
                b.clear()           # (done already, unless an error above left them filled)
