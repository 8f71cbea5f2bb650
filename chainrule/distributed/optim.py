"""``ZeroRedundancyOptimizer``: the optimizer state sharded across ranks (ZeRO stage 1).

Whole parameters are assigned to ranks greedily by bytes (largest first, to the rank with the
fewest bytes so far; the same assignment everywhere). Each rank builds the inner optimizer on its
shard only, so each holds about 1/N of the state, steps it, and then every parameter is broadcast
from its owner. The gradients must already be the same on every rank (``DistributedDataParallel``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from chainrule.core._backend import np
from chainrule.core.grad_mode import enable_grad
from chainrule.core.tensor import Tensor
from chainrule.distributed import collectives as dist
from chainrule.optim import Adam, Optimizer


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap ``optimizer_class(params, **defaults)`` so that each rank keeps the state of its shard.

    ``param_groups`` lists every parameter (a learning-rate scheduler works on it as usual; the
    hyperparameters are copied to the shard's optimizer at each step). ``state_dict()`` returns the
    full state on the rank given to the last ``consolidate_state_dict(to)``.

    >>> import chainrule as cr, chainrule.distributed as dist
    >>> from chainrule.distributed.optim import ZeroRedundancyOptimizer
    >>> dist.init_process_group(backend="self")
    >>> w = cr.nn.Parameter([1.0]); opt = ZeroRedundancyOptimizer([w], cr.optim.Adam, lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)
    0.9
    >>> dist.destroy_process_group()
    """

    def __init__(self, params: Iterable[Any], optimizer_class: type = Adam, **defaults: Any) -> None:
        self.optimizer_class, self._kwargs = optimizer_class, defaults
        # every hyperparameter of the inner optimizer (its defaults filled in), so that param_groups
        # and the consolidated state dict are the plain optimizer's: a checkpoint carries betas, eps...
        full = optimizer_class([Tensor(np.zeros(1), requires_grad=True)], **defaults).defaults
        super().__init__(params, dict(full))
        self.owner: dict[int, int] = {}
        self.shard_bytes = [0] * dist.get_world_size()
        self._assign([p for g in self.param_groups for p in g["params"]])
        self._local: list[tuple[int, dict]] = []        # (index of the full group, shard group)
        for gi, g in enumerate(self.param_groups):
            mine = [p for p in g["params"] if self.owner[id(p)] == dist.get_rank()]
            if mine:
                self._local.append((gi, {**g, "params": mine}))
        self.optim = optimizer_class([g for _, g in self._local], **defaults) if self._local else None
        self._consolidated: dict | None = None

    def _assign(self, params: list) -> None:
        """Give each parameter an owner: largest first, to the rank with the fewest bytes so far (the
        same on every rank)."""
        load = self.shard_bytes
        for i in sorted(range(len(params)), key=lambda i: (-params[i].nbytes, i)):
            r = min(range(len(load)), key=lambda r: (load[r], r))
            self.owner[id(params[i])] = r
            load[r] += params[i].nbytes

    def add_param_group(self, group: dict) -> None:
        """Add a group (on every rank, in the same order): its parameters are assigned as the
        constructor's were, continuing from the bytes each rank already holds."""
        super().add_param_group(group)
        if getattr(self, "owner", None) is None:            # (the constructor's own groups)
            return
        gi, g = len(self.param_groups) - 1, self.param_groups[-1]
        self._assign(g["params"])
        mine = [p for p in g["params"] if self.owner[id(p)] == dist.get_rank()]
        if mine:
            self._local.append((gi, {**g, "params": mine}))
            if self.optim is None:
                self.optim = self.optimizer_class([self._local[-1][1]], **self._kwargs)
            else:
                self.optim.add_param_group(self._local[-1][1])

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Step the shard, then broadcast each parameter from its owner."""
        loss = None
        if self.optim is not None:
            for (gi, _), inner in zip(self._local, self.optim.param_groups):
                inner.update({k: v for k, v in self.param_groups[gi].items() if k != "params"})
            loss = self.optim.step(closure)
        elif closure is not None:
            with enable_grad():                     # no parameter is ours to update
                loss = closure()
        if dist.get_world_size() > 1:
            for g in self.param_groups:
                for p in g["params"]:
                    dist.broadcast(p, src=self.owner[id(p)])
        return loss

    def local_state_bytes(self) -> int:
        """The bytes of optimizer state (arrays) held by this rank."""
        if self.optim is None:
            return 0
        return sum(v.nbytes for s in self.optim.state.values() for v in s.values() if isinstance(v, np.ndarray))

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Collect every shard's state on rank ``to`` (a collective: call it on every rank; bounded
        by the group's timeout)."""
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        mine = {} if self.optim is None else {index[id(p)]: s for p, s in self.optim.state.items()}
        rank = dist.get_rank()
        shards: list = [None] * dist.get_world_size()
        dist.gather_object(mine, shards if rank == to else None, dst=to)
        full = Optimizer.state_dict(self)
        if rank == to:
            for shard in shards:
                full["state"].update({k: {n: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v)
                                          for n, v in s.items()} for k, s in shard.items()})
            self._consolidated = {**full, "state": dict(sorted(full["state"].items()))}
        else:
            self._consolidated = None

    def state_dict(self) -> dict:
        """The full state, on the rank that ``consolidate_state_dict(to)`` collected it on."""
        if self._consolidated is None:
            raise RuntimeError(f"ZeroRedundancyOptimizer.state_dict on rank {dist.get_rank()}: call "
                               f"consolidate_state_dict(to=...) on every rank first, and read the "
                               f"state dict on rank `to`")
        return self._consolidated

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a full state dict (from ``state_dict()`` or the plain optimizer's, saved with any number
        of ranks): each rank keeps the entries of the parameters it owns now, and every group takes
        the saved hyperparameters."""
        Optimizer.load_state_dict(self, state_dict)          # checks, and sets the hyperparameters
        full, self.state = self.state, {}
        if self.optim is not None:
            mine = {id(q) for g in self.optim.param_groups for q in g["params"]}
            self.optim.state = {p: s for p, s in full.items() if id(p) in mine}
            for (gi, _), inner in zip(self._local, self.optim.param_groups):
                inner.update({k: v for k, v in self.param_groups[gi].items() if k != "params"})

    def update(self, p: Any, g: Any, state: dict, group: dict) -> None:
        raise TypeError("ZeroRedundancyOptimizer steps its shard's optimizer; it has no update rule")
