"""DDP's communication against a bare Allreduce of the same bytes, and step time at 1, 2, 4 processes.

    python benchmarks/bench_ddp.py                    # launches mpiexec -n 1, 2, 4 and prints a table
    python benchmarks/bench_ddp.py --nproc 2 --json   # one world size, its JSON line

The model is the 784-512-512-10 MLP (2.68 MB of float32 gradients) under
``DistributedDataParallel(bucket_cap_mb=2 KiB)``: five buckets ([b3, W3], [b2], [W2], [b1], [W1]).
Each rank trains on its own batch of 64 (weak scaling), with SGD. Per round, in interleaved order so
that the machine's drift hits all alike (a new seeded order each round, the same on every rank), it
times:

- bare: one blocking ``MPI_Allreduce`` (mpi4py, in place) of a buffer of all the gradient bytes;
- step: forward, backward (with DDP's bucketed ``Iallreduce``), optimizer step, zero_grad;
- local: the same step under ``no_sync()`` (no communication; the hooks return at once).

DDP's communication per step is step - local (what the user waits for, overlap included), and the
ratio is that over bare. Every figure is the median over rounds of the slowest rank's time
(rounds start at a barrier). On a 2-core machine 4 processes are oversubscribed: their times say
how the code behaves when cores are scarce, not how it scales.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np

import chainrule as cr
import chainrule.distributed as dist
from chainrule.distributed import collectives
from chainrule.nn.parallel import DistributedDataParallel
from chainrule.train import find_mpiexec, launch_env

SIZES, BATCH, CAP_MB = (784, 512, 512, 10), 64, 2 / 1024


def build() -> cr.nn.Module:
    layers: list = []
    for i, (a, b) in enumerate(zip(SIZES, SIZES[1:])):
        layers += [cr.nn.Linear(a, b), cr.nn.ReLU()] if i < len(SIZES) - 2 else [cr.nn.Linear(a, b)]
    return cr.nn.Sequential(*layers)


def measure(rounds: int) -> dict | None:
    """Rank 0: the figures; the other ranks: None."""
    dist.init_process_group(timeout=300)
    rank, n = dist.get_rank(), dist.get_world_size()
    group = collectives._GROUP
    model = build()
    nbytes = sum(p.nbytes for p in model.parameters())
    ddp = DistributedDataParallel(model, bucket_cap_mb=CAP_MB)
    opt = cr.optim.SGD(ddp.parameters(), lr=1e-3)
    rng = np.random.default_rng(rank)
    x = cr.tensor(rng.standard_normal((BATCH, SIZES[0])).astype(np.float32))
    y = rng.integers(0, SIZES[-1], BATCH)
    flat = np.ones(nbytes // 4, np.float32)

    def bare() -> None:
        if n > 1:
            group.comm.Allreduce(group.MPI.IN_PLACE, flat, group.MPI.SUM)

    def step() -> None:
        cr.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        opt.zero_grad()

    def local() -> None:
        with ddp.no_sync():
            cr.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        opt.zero_grad()

    fns = {"bare": bare, "step": step, "local": local}
    times: dict[str, list] = {k: [] for k in fns}
    order, shuffle = list(fns.items()), random.Random(0).shuffle     # the same on every rank
    for r in range(rounds + 3):                  # 3 warm-up rounds
        shuffle(order)                           # no case always follows the same one (caches)
        for k, f in order:
            dist.barrier()
            t0 = time.perf_counter()
            f()
            dt = np.array([time.perf_counter() - t0])
            dist.all_reduce(dt, dist.ReduceOp.MAX)
            if r >= 3:
                times[k].append(float(dt[0]))
    med = {k: float(np.median(v)) for k, v in times.items()}
    q = {k: [float(x) for x in np.percentile(v, [25, 75])] for k, v in times.items()}
    comm = med["step"] - med["local"]
    out = {"processes": n, "grad_bytes": int(nbytes), "buckets": len(ddp._buckets),
           "bucket_params": ddp.bucket_sizes, "rounds": rounds,
           "bare_allreduce_ms": round(1e3 * med["bare"], 3),
           "bare_iqr_ms": [round(1e3 * v, 3) for v in q["bare"]],
           "allreduce_GBps_algbw": round(nbytes / med["bare"] / 1e9, 3) if n > 1 else None,
           "ddp_comm_ms_per_step": round(1e3 * comm, 3),
           "ratio_ddp_to_bare": round(comm / med["bare"], 3) if n > 1 else None,
           "step_ms": round(1e3 * med["step"], 3), "step_iqr_ms": [round(1e3 * v, 3) for v in q["step"]],
           "local_step_ms": round(1e3 * med["local"], 3),
           "examples_per_s": round(n * BATCH / med["step"], 1)}
    dist.destroy_process_group()
    return out if rank == 0 else None


def launch(n: int, rounds: int) -> dict:
    env = {k: v for k, v in launch_env(n).items() if not collectives.launched_by_mpi({k: v, "SLURM_NTASKS": "2"})}
    cmd = [find_mpiexec(), "-n", str(n), sys.executable, os.path.abspath(__file__), "--json",
           "--rounds", str(rounds)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, nargs="*", default=[1, 2, 4])
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--json", action="store_true", help="print JSON lines only")
    args = p.parse_args()
    if collectives.launched_by_mpi():
        r = measure(args.rounds)
        if r is not None:
            print(json.dumps(r), flush=True)
        return
    if find_mpiexec() is None or collectives.mpi4py is None:
        sys.exit("bench_ddp: needs mpi4py and mpiexec: pip install \"chainrule[mpi]\"")
    rows = [launch(n, args.rounds) for n in args.nproc]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"784-512-512-10 MLP, {rows[0]['grad_bytes'] / 1e6:.2f} MB of gradients, {rows[0]['rounds']} "
          f"rounds (medians; slowest rank), batch {BATCH} per process")
    print(f"{'procs':>5} {'buckets':>7} {'bare ms':>8} {'DDP comm ms':>11} {'ratio':>6} {'step ms':>8} "
          f"{'local ms':>8} {'ex/s':>8}")
    for r in rows:
        ratio = "-" if r["ratio_ddp_to_bare"] is None else f"{r['ratio_ddp_to_bare']:.2f}"
        print(f"{r['processes']:>5} {r['buckets']:>7} {r['bare_allreduce_ms']:>8.3f} "
              f"{r['ddp_comm_ms_per_step']:>11.3f} {ratio:>6} {r['step_ms']:>8.3f} {r['local_step_ms']:>8.3f} "
              f"{r['examples_per_s']:>8.0f}")


if __name__ == "__main__":
    main()
