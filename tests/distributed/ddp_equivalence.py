"""Run under ``mpiexec -n N``: DDP with per-rank batch B against one process with batch N*B.

Rank 0 trains the reference model itself, from its own initial parameters (which DDP broadcasts),
on the whole batch; every case prints one JSON line from rank 0:
{"case": ..., "diff": max |DDP - reference|, "spread": max |rank r - rank 0|, ...}.
"""
import json
import sys

import numpy as np

import chainrule as cr
import chainrule.distributed as dist
from chainrule.nn.parallel import DistributedDataParallel

B, STEPS, D_IN, D_H, D_OUT = 4, 20, 6, 16, 3


class Net(cr.nn.Module):
    def __init__(self, rng, dtype):
        super().__init__()
        p = lambda *s: cr.nn.Parameter(rng.standard_normal(s).astype(dtype) * 0.5)
        self.d1 = p(D_IN, D_H)        # variant "shared": its gradient is the array that flows on to
        # w1 (and, registered first, it is a bucket of its own: reduced in place)
        self.w1, self.b1, self.w2, self.b2 = p(D_IN, D_H), p(D_H), p(D_H, D_OUT), p(D_OUT)
        self.extra = p(D_OUT)         # used on rank 0 only (variant "unused")
        self.unused = p(2, 2)         # never used
        self.recompute = self.shared = self.mixed = False

    def forward(self, x):
        if self.shared:               # the add passes its gradient on to w1 * 1.5 and to d1 alike
            return cr.tanh(x @ (self.w1 * 1.5 + self.d1) + self.b1) @ self.w2 + self.b2
        if self.recompute:            # variant "ckpt": w1, b1 are used in a recomputed segment
            return cr.checkpoint(lambda v: cr.tanh(v @ self.w1 + self.b1), x) @ self.w2 + self.b2
        if self.mixed:                # variant "mixed": w1 in a recomputed segment and outside it,
            h = cr.checkpoint(lambda v: cr.tanh(v @ self.w1 + self.b1), x)      # b1 in two segments
            h = cr.checkpoint(lambda u: cr.tanh(u + self.b1), h)
            return h @ self.w2 + self.b2 + cr.tanh(x @ self.w1)[:, :D_OUT]
        return cr.tanh(x @ self.w1 + self.b1) @ self.w2 + self.b2


def mse(model, x, y):
    return ((model(x) - y) ** 2).mean()


def run(case, rank, n):
    opt_name, dtype, variant = case.split("-")
    dtype = np.dtype(dtype)
    model = Net(np.random.default_rng(100 + rank), dtype)          # different on purpose: DDP broadcasts
    ref = Net(np.random.default_rng(100), dtype) if rank == 0 else None
    model.recompute = variant == "ckpt"
    model.shared, model.mixed = variant == "shared", variant == "mixed"
    if ref is not None:
        ref.shared, ref.mixed = model.shared, model.mixed
    ddp = DistributedDataParallel(model, bucket_cap_mb=25 if variant == "plain" else 1e-4)
    make = (lambda ps: cr.optim.SGD(ps, lr=0.05, momentum=0.9)) if opt_name == "sgd" else \
        (lambda ps: cr.optim.Adam(ps, lr=0.01))
    opt = make(list(ddp.parameters()))
    ref_opt = make(list(ref.parameters())) if ref is not None else None
    unused_none = extra_grad = True
    for step in range(STEPS):
        rng = np.random.default_rng(step)
        X = rng.standard_normal((n * B, D_IN)).astype(dtype)
        Y = rng.standard_normal((n * B, D_OUT)).astype(dtype)
        x, y = cr.tensor(X[rank * B:(rank + 1) * B]), cr.tensor(Y[rank * B:(rank + 1) * B])
        if variant == "nosync":
            h = B // 2
            with ddp.no_sync():
                (mse(ddp, x[:h], y[:h]) / 2).backward()
            (mse(ddp, x[h:], y[h:]) / 2).backward()
        else:
            loss = mse(ddp, x, y)
            if variant == "unused" and rank == 0:
                loss = loss + 0.5 * (model.extra ** 2).sum()
            loss.backward()
        unused_none = unused_none and model.unused.grad is None
        extra_grad = extra_grad and (model.extra.grad is not None) == (variant == "unused")
        opt.step()
        opt.zero_grad()
        if ref is not None:
            loss = mse(ref, cr.tensor(X), cr.tensor(Y))
            if variant == "unused":
                loss = loss + (0.5 / n) * (ref.extra ** 2).sum()
            loss.backward()
            ref_opt.step()
            ref_opt.zero_grad()
    # the same on every rank?
    spread = 0.0
    for p in model.parameters():
        p0 = cr.tensor(p.data.copy())
        dist.broadcast(p0, src=0)
        spread = max(spread, float(np.abs(p0.data - p.data).max()))
    s = cr.tensor(np.array([spread, float(not (unused_none and extra_grad))]))
    dist.all_reduce(s, dist.ReduceOp.MAX)
    if rank == 0:
        diff = max(float(np.abs(a.data.astype(np.float64) - b.data).max())
                   for a, b in zip(model.parameters(), ref.parameters()))
        moved = float(np.abs(model.unused.data - ref.unused.data).max())
        print(json.dumps({"case": case, "n": n, "diff": diff, "spread": float(s.data[0]),
                          "grads_as_expected": bool(s.data[1] == 0), "unused_moved": moved,
                          "buckets": len(ddp._buckets)}), flush=True)


def main():
    dist.init_process_group(timeout=60)
    rank, n = dist.get_rank(), dist.get_world_size()
    cases = sys.argv[1:] or [f"{o}-{d}-{v}" for o in ("sgd", "adam") for d in ("float64", "float32")
                             for v in ("plain", "unused", "nosync", "ckpt", "mixed", "shared")]
    for case in cases:
        run(case, rank, n)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
