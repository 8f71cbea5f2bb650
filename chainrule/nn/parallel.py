"""``DistributedDataParallel``: average gradients across ranks while the backward is still running.

The parameters are cut into buckets (about ``bucket_cap_mb`` each) in reverse registration order,
the order in which a backward usually produces their gradients, and the buckets are the same on
every rank. A post-accumulate-grad hook copies each gradient, divided by the world size, into its
bucket (one pass); a bucket whose gradients are all in starts a non-blocking all-reduce at once
(buckets start in index order on every rank, so the collectives match), and the hooks drive MPI's
progress with ``Test``. A callback queued on the backward (``cr.autograd.queue_callback``) starts
what is left and waits; each ``.grad`` is then a view of its reduced bucket (no copy), so every
backward fills new buckets.

Each bucket carries one "has a gradient" flag per parameter, reduced with the values: a parameter
that got no gradient on some ranks is averaged with zeros from those ranks, one that got none on
any rank keeps ``.grad = None`` (so an optimizer skips it, as in one process).
"""
from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Iterator

from .. import autograd
from .._backend import np
from ..distributed import collectives as dist
from ..tensor import Tensor
from .module import Module


class _Bucket:
    def __init__(self, index: int, params: list, dtype: Any, scale: float) -> None:
        self.index, self.params, self.dtype, self.scale = index, params, dtype, scale
        self.offsets, n = [], 0
        for p in params:
            self.offsets.append(n)
            n += p.size
        self.numel = n
        self.buffer: Any = None      # values, then one has-grad flag per param; new each step
        self.ready: set[int] = set()
        self.work: dist.Work | None = None

    def put(self, i: int, grad: Any) -> None:
        """Copy the gradient of parameter ``i``, divided by the world size, into the buffer."""
        if self.buffer is None:
            self.buffer = np.empty(self.numel + len(self.params), self.dtype)
        p, o = self.params[i], self.offsets[i]
        if grad is None:
            self.buffer[o:o + p.size] = 0
            self.buffer[self.numel + i] = 0
        else:
            np.multiply(np.ravel(grad), self.scale, out=self.buffer[o:o + p.size], casting="unsafe")
            self.buffer[self.numel + i] = 1
        self.ready.add(i)


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training: forward is the module's, and after each backward
    every parameter's ``.grad`` is the average over the ranks (so N processes with batch B each
    train as one process with batch N*B and a mean loss).

    At construction rank 0's parameters and buffers are broadcast to all ranks, after checking that
    every rank has the same parameter shapes. ``broadcast_buffers=True`` also broadcasts the buffers
    at each forward. ``no_sync()`` skips the communication (gradient accumulation). In a world of
    one it changes nothing.

    >>> import chainrule as cr, chainrule.distributed as dist
    >>> from chainrule.nn.parallel import DistributedDataParallel
    >>> dist.init_process_group(backend="self")
    >>> ddp = DistributedDataParallel(cr.nn.Linear(3, 1))
    >>> ddp(cr.ones((2, 3))).sum().backward(); ddp.module.weight.grad.shape
    (1, 3)
    >>> dist.destroy_process_group()
    """

    def __init__(self, module: Module, bucket_cap_mb: float = 25, broadcast_buffers: bool = True) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a cr.nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise dist.DistributedError("DistributedDataParallel: the process group is not initialized; "
                                        "call chainrule.distributed.init_process_group() first")
        if bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
        self.module = module
        object.__setattr__(self, "broadcast_buffers", bool(broadcast_buffers))
        object.__setattr__(self, "bucket_cap_mb", float(bucket_cap_mb))
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._check_same_parameters(named)
        for _, p in named:
            dist.broadcast(p, src=0)
        for _, b in module.named_buffers():
            dist.broadcast(b, src=0)
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
                b = _Bucket(len(buckets), params, dtype, 1.0 / dist.get_world_size())
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
        if self.broadcast_buffers and dist.get_world_size() > 1:
            for b in self.module.buffers():
                dist.broadcast(b, src=0)
        return self.module(*args, **kwargs)

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
        if b.work is None:
            b.put(i, p.grad.data)
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
                if i not in b.ready:
                    b.put(i, None if p.grad is None else p.grad.data)
            b.work = dist.all_reduce(b.buffer, dist.ReduceOp.SUM, async_op=True)
            object.__setattr__(self, "_next", self._next + 1)

    def _finish(self) -> None:
        object.__setattr__(self, "_queued", False)
        try:
            self._launch(complete_only=False)
            for b in self._buckets:
                b.work.wait()
                flags = b.buffer[b.numel:]
                for i, p in enumerate(b.params):
                    if flags[i].real > 0:
                        o = b.offsets[i]
                        # a view of the buffer (no copy): the next step writes a new buffer
                        p.grad = Tensor(b.buffer[o:o + p.size].astype(p.dtype, copy=False).reshape(p.shape))
        finally:
            object.__setattr__(self, "_next", 0)
            for b in self._buckets:
                b.ready.clear()
                b.work = None
                b.buffer = None
