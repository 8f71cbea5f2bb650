"""Run under ``mpiexec -n N python scenarios.py NAME``: one scenario each; the test reads the output."""
import json
import os
import signal
import sys
import time

import numpy as np

import chainrule as cr
import chainrule.distributed as dist
from chainrule.distributed.optim import ZeroRedundancyOptimizer
from chainrule.nn.parallel import DistributedDataParallel


def collectives():
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    total = sum(range(1, n + 1))
    for op, want in [(dist.ReduceOp.SUM, total), (dist.ReduceOp.AVG, total / n), (dist.ReduceOp.MAX, n),
                     (dist.ReduceOp.MIN, 1)]:
        t = cr.tensor(np.full(3, r + 1.0))
        dist.all_reduce(t, op)
        assert np.allclose(t.data, want), (op, t)
    t = cr.tensor(np.full((2, 3), float(r)))[:, ::2]          # a non-contiguous view
    dist.all_reduce(t)
    assert np.allclose(t.data, total - n), t
    h = cr.tensor(np.ones(4, np.float16))
    dist.all_reduce(h)
    assert h.dtype == np.float16 and (h.data == n).all()
    i = cr.tensor(np.array([r, -r], np.int64))
    dist.all_reduce(i, dist.ReduceOp.MAX)
    assert i.data.tolist() == [n - 1, 0]
    t = cr.tensor(np.full(3, float(r)))
    dist.broadcast(t, src=n - 1)
    assert (t.data == n - 1).all()
    out = [cr.zeros(2, dtype=cr.float64) for _ in range(n)]
    dist.all_gather(out, cr.tensor(np.full(2, float(r))))
    assert [o.data[0] for o in out] == list(range(n))
    o = cr.zeros(2, dtype=cr.float64)
    dist.reduce_scatter(o, [cr.tensor(np.full(2, float(10 * r + k))) for k in range(n)])
    assert (o.data == sum(10 * q + r for q in range(n))).all(), o
    w = dist.all_reduce(cr.tensor(np.ones(2)), async_op=True)
    w.wait()
    assert w.is_completed()
    dist.barrier()
    print(f"collectives ok rank {r} of {n}", flush=True)


def timeout():
    dist.init_process_group(timeout=1.0)
    if dist.get_rank() == 1:
        time.sleep(60)                     # a stalled peer; the abort ends it
    t0 = time.monotonic()
    try:
        dist.all_reduce(cr.ones(3))
    except dist.DistributedTimeoutError as e:
        print(f"TIMEOUT after {time.monotonic() - t0:.2f} s: {e}", flush=True)
    try:
        dist.barrier()
    except dist.DistributedError as e:
        print(f"AFTER: {e}", flush=True)
    raise RuntimeError("rank 0 gives up")


def _leave_while_rank_0_waits(how):
    """Rank 1 leaves (``how``) while rank 0 waits in an all_reduce with a 60 s deadline; rank 1 prints
    the wall-clock time it left at, so the test can bound how long the job outlives it."""
    dist.init_process_group(timeout=60)
    if dist.get_rank() == 1:
        time.sleep(0.3)                    # rank 0 is inside the all_reduce by now
        print(f"LEFT AT {time.time():.3f}", flush=True)
        how()
    dist.all_reduce(cr.ones(3))
    print("rank 0 finished the all_reduce (it must not)", flush=True)


def _boom():
    raise ValueError("boom on rank 1")


def crash():
    _leave_while_rank_0_waits(_boom)


def killed():
    _leave_while_rank_0_waits(lambda: os.kill(os.getpid(), signal.SIGKILL))


def exits():
    _leave_while_rank_0_waits(lambda: sys.exit(3))


def exits_zero():
    _leave_while_rank_0_waits(lambda: sys.exit(0))


def ends_normally():
    """Every rank leaves without destroy_process_group after matching collectives: rc 0."""
    dist.init_process_group(timeout=30)
    for _ in range(3):
        dist.all_reduce(cr.ones(1000))
    if dist.get_rank() == 0:
        time.sleep(0.3)                    # the others exit first; rank 0 must not see an error
    print(f"ended rank {dist.get_rank()}", flush=True)


def seeds():
    """Unseeded: each rank's default generator differs; manual_seed(s) on a rank gives exactly s."""
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    first = cr.random.default_generator.random()
    draws = [None] * n
    dist.gather_object(first, draws if r == 0 else None, dst=0)
    cr.random.manual_seed(7)
    mine = cr.random.default_generator.random()
    if r == 0:
        print(json.dumps({"distinct": len(set(draws)) == n, "seeded_equal": mine == np.random.default_rng(7).random()}),
              flush=True)


def stalled_consolidate():
    """Rank 1 never joins consolidate_state_dict: rank 0 times out after 1 s."""
    dist.init_process_group(timeout=1.0)
    w = cr.nn.Parameter(np.ones(4))
    opt = ZeroRedundancyOptimizer([w], cr.optim.Adam, lr=0.1)
    if dist.get_rank() == 1:
        time.sleep(60)
    t0 = time.monotonic()
    try:
        opt.consolidate_state_dict(to=0)
    except dist.DistributedTimeoutError as e:
        print(f"TIMEOUT after {time.monotonic() - t0:.2f} s: {e}", flush=True)
        raise


def mismatch():
    dist.init_process_group(timeout=30)
    DistributedDataParallel(cr.nn.Linear(3, 2 + dist.get_rank()))


def reentrant():
    """A cr.Function whose backward runs a backward that adds to a parameter: marked reentrant, the
    hooks wait for it and the gradient is the average; unmarked, DDP refuses with a clear error."""
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    w = cr.nn.Parameter(np.array([[1.0, 2.0], [3.0, 4.0]]))
    model = cr.nn.Module()
    model.w = w
    ddp = DistributedDataParallel(model, bucket_cap_mb=1e-5)
    assert ddp.bucket_sizes == [1]                      # w alone: reduced in place

    class Sneaky(cr.Function):
        reentrant = True

        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            with cr.enable_grad():
                (w * (r + 1.0)).sum().backward()        # adds r + 1 to every entry of w.grad
            return g
    x = cr.tensor(np.ones((3, 2)), requires_grad=True)
    (Sneaky.apply(x) @ w).sum().backward()              # before the nested part: 3 per entry
    want = 3.0 + sum(q + 1.0 for q in range(n)) / n
    assert np.allclose(w.grad.data, want), (w.grad, want)
    print(f"REENTRANT OK rank {r}", flush=True)
    w.grad = None
    Sneaky.reentrant = False
    (Sneaky.apply(x) @ w).sum().backward()


def zero():
    """ZeRO-1 against plain Adam (the same gradients on every rank); prints one JSON line from rank 0."""
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    cr.random.manual_seed(0)               # the same model on every rank (no DDP to broadcast it)

    def build():
        return cr.nn.Sequential(cr.nn.Linear(8, 64), cr.nn.Tanh(), cr.nn.Linear(64, 64), cr.nn.Tanh(),
                                cr.nn.Linear(64, 64), cr.nn.Tanh(), cr.nn.Linear(64, 4))
    a, b = build(), build()
    b.load_state_dict(a.state_dict())
    za = ZeroRedundancyOptimizer(list(a.parameters()), cr.optim.Adam, lr=0.01, weight_decay=0.01)
    ob = cr.optim.Adam(list(b.parameters()), lr=0.01, weight_decay=0.01)
    for step in range(20):
        rng = np.random.default_rng(step)
        x = cr.tensor(rng.standard_normal((16, 8)).astype(np.float32))
        for m, o in ((a, za), (b, ob)):
            (m(x) ** 2).mean().backward()
            o.step()
            o.zero_grad()
    diff = max(float(np.abs(p.data - q.data).max()) for p, q in zip(a.parameters(), b.parameters()))
    mine = cr.tensor(np.array([float(za.local_state_bytes())]))
    most = cr.tensor(mine.data.copy())
    dist.all_reduce(mine)
    dist.all_reduce(most, dist.ReduceOp.MAX)
    plain = sum(v.nbytes for s in ob.state.values() for v in s.values() if isinstance(v, np.ndarray))
    za.consolidate_state_dict(to=0)
    if r == 0:
        full, ref = za.state_dict(), ob.state_dict()
        same = sorted(full["state"]) == sorted(ref["state"]) and all(
            np.array_equal(full["state"][k]["exp_avg"], ref["state"][k]["exp_avg"]) for k in ref["state"])
        print(json.dumps({"n": n, "diff": diff, "total_state": float(mine.data[0]), "plain_state": plain,
                          "max_rank_ratio": float(most.data[0]) / plain, "consolidated_equal": bool(same)}),
              flush=True)


def zero_groups():
    """add_param_group after construction: the same updates as plain Adam given the same groups."""
    dist.init_process_group(timeout=30)
    cr.random.manual_seed(0)
    a = cr.nn.Sequential(cr.nn.Linear(4, 16), cr.nn.Tanh(), cr.nn.Linear(16, 16), cr.nn.Tanh(), cr.nn.Linear(16, 2))
    b = cr.nn.Sequential(cr.nn.Linear(4, 16), cr.nn.Tanh(), cr.nn.Linear(16, 16), cr.nn.Tanh(), cr.nn.Linear(16, 2))
    b.load_state_dict(a.state_dict())
    pa, pb = list(a.parameters()), list(b.parameters())
    za = ZeroRedundancyOptimizer(pa[:2], cr.optim.Adam, lr=0.01)
    ob = cr.optim.Adam(pb[:2], lr=0.01)
    za.add_param_group({"params": pa[2:], "lr": 0.03})
    ob.add_param_group({"params": pb[2:], "lr": 0.03})
    for step in range(10):
        x = cr.tensor(np.random.default_rng(step).standard_normal((8, 4)).astype(np.float32))
        for m, o in ((a, za), (b, ob)):
            (m(x) ** 2).mean().backward()
            o.step()
            o.zero_grad()
    diff = max(float(np.abs(p.data - q.data).max()) for p, q in zip(pa, pb))
    if dist.get_rank() == 0:
        print(json.dumps({"diff": diff, "owners": sorted(set(za.owner.values()))}), flush=True)


# ----- a checkpoint saved on rank 0 resumes on any number of ranks -----
RESUME_K, RESUME_BATCH = 5, 8     # the global batch: split across the ranks


def _resume_model():
    cr.random.manual_seed(0)                         # the same start in every process that builds it
    return cr.nn.Sequential(cr.nn.Linear(5, 12, dtype=cr.float64), cr.nn.Tanh(),
                            cr.nn.Linear(12, 12, dtype=cr.float64), cr.nn.Tanh(),
                            cr.nn.Linear(12, 3, dtype=cr.float64))


def _resume_steps(ddp, opt, steps, rank, n):
    """Steps ``steps`` on this rank's slice of each step's global batch (the same on every rank)."""
    b = RESUME_BATCH // n
    for step in steps:
        rng = np.random.default_rng(1000 + step)
        x = rng.standard_normal((RESUME_BATCH, 5))
        y = rng.standard_normal((RESUME_BATCH, 3))
        sl = slice(rank * b, (rank + 1) * b)
        ((ddp(cr.tensor(x[sl])) - cr.tensor(y[sl])) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()


RESUME_HYPER = dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01)


def _make_opt(kind, params, **hyper):
    if kind == "zero":
        return ZeroRedundancyOptimizer(params, cr.optim.Adam, **hyper)
    return cr.optim.Adam(params, **hyper)


def resume_save():
    """DDP + ZeRO(Adam): K steps, consolidate on rank 0, ``cr.save`` model and optimizer there."""
    path = sys.argv[2]
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    model = _resume_model()
    ddp = DistributedDataParallel(model, bucket_cap_mb=1e-3)
    opt = _make_opt("zero", list(ddp.parameters()), **RESUME_HYPER)
    _resume_steps(ddp, opt, range(RESUME_K), r, n)
    opt.consolidate_state_dict(to=0)
    if r == 0:
        cr.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": RESUME_K}, path)
        print(json.dumps({"saved": n, "owners": sorted(set(opt.owner.values()))}), flush=True)
    dist.destroy_process_group()


def resume_load():
    """Load the checkpoint into DDP and ``kind`` ("adam": the plain optimizer; "zero"), train K more
    steps, and compare with one process trained 2K steps on the whole batch without a break."""
    path, kind = sys.argv[2], sys.argv[3]
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    model = _resume_model()
    ckpt = cr.load(path)
    model.load_state_dict(ckpt["model"])
    ddp = DistributedDataParallel(model, bucket_cap_mb=1e-3)
    opt = _make_opt(kind, list(ddp.parameters()))      # the defaults: the checkpoint brings lr, betas...
    opt.load_state_dict(ckpt["optimizer"])
    owners = sorted(set(opt.owner.values())) if kind == "zero" else [0]
    hyper = {k: opt.param_groups[0][k] for k in RESUME_HYPER}
    start = ckpt["step"]
    _resume_steps(ddp, opt, range(start, start + RESUME_K), r, n)
    if r == 0:
        ref = _resume_model()
        ref_opt = _make_opt("adam", list(ref.parameters()), **RESUME_HYPER)
        _resume_steps(ref, ref_opt, range(2 * RESUME_K), 0, 1)
        diff = max(float(np.abs(p.data - q.data).max()) for p, q in zip(model.parameters(), ref.parameters()))
        moved = max(float(np.abs(p.data - q.data).max()) for p, q in zip(model.parameters(),
                                                                           _resume_model().parameters()))
        steps = sorted({int(s["step"]) for s in ref_opt.state.values()})
        print(json.dumps({"n": n, "kind": kind, "diff": diff, "moved": moved, "ref_steps": steps,
                          "owners": owners, "hyper_restored": hyper == RESUME_HYPER}), flush=True)
    dist.destroy_process_group()


def sampler():
    """DistributedSampler without num_replicas=/rank=: both from the process group, as in PyTorch."""
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
    implicit = cr.data.DistributedSampler(11, seed=3)
    explicit = cr.data.DistributedSampler(11, num_replicas=n, rank=r, seed=3)
    rows = [None] * n
    dist.gather_object({"rank": r, "replicas": implicit.num_replicas, "sampler_rank": implicit.rank,
                        "same": list(implicit) == list(explicit), "indices": list(implicit)}, rows)
    if r == 0:                                      # one line: the ranks' prints would interleave
        print(json.dumps(rows), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    globals()[sys.argv[1]]()
