"""Data-parallel training over MPI (``chainrule.distributed``), following ``torch.distributed``.

Start the processes with an MPI launcher (``mpiexec -n 8 python train.py``, ``srun``) and call
``init_process_group()``; started any other way, the same script runs as a world of one, where
every collective is the identity. The MPI backend needs the optional extra ``chainrule[mpi]``.
See docs/distributed.md.

>>> import chainrule as cr, chainrule.distributed as dist
>>> dist.init_process_group()          # no launcher here: a world of one
>>> dist.get_world_size(), dist.is_initialized()
(1, True)
>>> dist.destroy_process_group()
"""

from chainrule.distributed.collectives import (
    DistributedError,
    DistributedTimeoutError,
    ReduceOp,
    Work,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    gather_object,
    get_backend,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    launched_by_mpi,
    reduce_scatter,
)

__all__ = ["DistributedError", "DistributedTimeoutError", "ReduceOp", "Work", "all_gather", "all_reduce",
           "barrier", "broadcast", "destroy_process_group", "gather_object", "get_backend", "get_rank",
           "get_world_size", "init_process_group", "is_initialized", "launched_by_mpi", "optim",
           "reduce_scatter"]
