"""DDP communication against a bare Allreduce, and step time at 1, 2, 4 processes.

Run it under an MPI launcher (not part of the test suite):

    for n in 1 2 4; do mpiexec -n $n python benchmarks/bench_ddp.py; done

Rank 0 prints one JSON line: the MLP's gradient bytes, the bare Allreduce of those bytes (one
buffer), the extra time per step that DDP's communication costs (DDP step minus the same step under
no_sync), the number of buckets, and the step time.
"""
from __future__ import annotations

import json
import time

import numpy as np

import chainrule as cr
import chainrule.distributed as dist
from chainrule.nn.parallel import DistributedDataParallel

WIDTH, DEPTH, BATCH, STEPS = 512, 4, 64, 30


def median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    dist.init_process_group(timeout=120)
    rank, n = dist.get_rank(), dist.get_world_size()
    layers = []
    for _ in range(DEPTH):
        layers += [cr.nn.Linear(WIDTH, WIDTH), cr.nn.Tanh()]
    model = cr.nn.Sequential(*layers)
    nbytes = sum(p.nbytes for p in model.parameters())
    ddp = DistributedDataParallel(model, bucket_cap_mb=nbytes / 2**20 / 5)      # >= 4 buckets
    opt = cr.optim.SGD(ddp.parameters(), lr=1e-3)
    rng = np.random.default_rng(rank)
    x = cr.tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
    flat = np.ones(nbytes // 4, np.float32)

    def bare() -> None:
        dist.all_reduce(flat)

    def step() -> None:
        ddp(x).square().mean().backward()
        opt.step()
        opt.zero_grad()

    def local_step() -> None:
        with ddp.no_sync():
            ddp(x).square().mean().backward()
        opt.zero_grad()

    for f in (bare, step, local_step):
        f()
    t_bare = median_time(bare, STEPS)
    t_step = median_time(step, STEPS)
    t_local = median_time(local_step, STEPS)
    if rank == 0:
        print(json.dumps({"processes": n, "grad_bytes": nbytes, "buckets": len(ddp._buckets),
                          "bare_allreduce_ms": round(1e3 * t_bare, 3),
                          "allreduce_GBps_algbw": round(nbytes / t_bare / 1e9, 3) if n > 1 else None,
                          "ddp_comm_ms_per_step": round(1e3 * (t_step - t_local), 3),
                          "step_ms": round(1e3 * t_step, 3), "local_step_ms": round(1e3 * t_local, 3)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
