"""Run under ``mpiexec -n N python scenarios.py NAME``: one scenario each; the test reads the output."""
import json
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


def crash():
    dist.init_process_group(timeout=60)
    if dist.get_rank() == 1:
        raise ValueError("boom on rank 1")
    dist.barrier()                         # never completes: rank 1's abort ends the job


def mismatch():
    dist.init_process_group(timeout=30)
    DistributedDataParallel(cr.nn.Linear(3, 2 + dist.get_rank()))


def zero():
    """ZeRO-1 against plain Adam (the same gradients on every rank); prints one JSON line from rank 0."""
    dist.init_process_group(timeout=30)
    r, n = dist.get_rank(), dist.get_world_size()
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


if __name__ == "__main__":
    globals()[sys.argv[1]]()
