"""SyncBatchNorm: in one process it is BatchNorm (against torch.nn); under ``mpiexec -n 2`` (this file
runs itself as the workers) ranks holding parts of a batch match one process with the whole batch."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr
import chainrule.distributed as dist
from chainrule.distributed import collectives
from chainrule.nn.parallel import DistributedDataParallel

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = next((str(p) for p in (Path(sys.executable).parent / "mpiexec",) if p.exists()), shutil.which("mpiexec"))
SHARDS = {"equal": [3, 3], "unequal": [1, 4], "empty": [0, 5]}     # examples per rank
C, H, W, STEPS = 3, 2, 2, 3


def _data(n):
    rng = np.random.default_rng(7)
    return (rng.standard_normal((n, C, H, W)) * 2 + 5, rng.standard_normal((n, C, H, W)),
            rng.standard_normal(C) + 1, rng.standard_normal(C))


def _bn(cls, weight, bias, momentum=0.1):
    bn = cls(C, momentum=momentum, dtype=cr.float64)
    bn.weight.data[...], bn.bias.data[...] = weight, bias
    return bn


def _steps(bn, x, w):
    """STEPS training steps; per step the output, the input's gradient, the parameters' gradients,
    the gradient of |dL/dx|^2 with respect to the weight (a second-order term), the running stats."""
    rows = []
    for step in range(STEPS):
        xt = cr.tensor(x + step, requires_grad=True)
        y = bn(xt)
        (gx,) = cr.autograd.grad((y * w).sum(), [xt], create_graph=True)
        (gw2,) = cr.autograd.grad((gx * gx).sum(), [bn.weight])
        bn.weight.grad = bn.bias.grad = None
        (y * w).sum().backward()
        rows.append({"y": y.data.tolist(), "gx": xt.grad.data.tolist(), "gw": bn.weight.grad.data.tolist(),
                     "gb": bn.bias.grad.data.tolist(), "gw2": gw2.data.tolist(),
                     "rm": bn.running_mean.data.tolist(), "rv": bn.running_var.data.tolist(),
                     "nbt": int(bn.num_batches_tracked.data)})
    return rows


def _directional(cls, x, w, weight, bias):
    """Forward mode: the derivative of sum(bn(x) * w) along cos(x), and of its gradient in x along
    the same direction (forward over reverse)."""
    bn = _bn(cls, weight, bias)
    f = lambda t: (bn(t) * cr.tensor(w)).sum()
    _, along = cr.func.jvp(f, (cr.tensor(x),), (cr.tensor(np.cos(x)),))
    _, hvp = cr.func.jvp(cr.func.grad(f), (cr.tensor(x),), (cr.tensor(np.cos(x)),))
    return {"along": float(along.data), "hvp": hvp.data.tolist()}


def _ddp_train(model, x, target, steps=STEPS):
    opt = cr.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        ((model(cr.tensor(x)) - cr.tensor(target)) ** 2).mean().backward()
        opt.step()


def _net(bn_cls=cr.nn.BatchNorm2d):
    rng = np.random.default_rng(3)
    net = cr.nn.Sequential(cr.nn.Conv2d(C, 4, 1, dtype=cr.float64), bn_cls(4, dtype=cr.float64), cr.nn.Tanh(),
                           cr.nn.Flatten(), cr.nn.Linear(4 * H * W, 2, dtype=cr.float64))
    for p in net.parameters():
        p.data[...] = rng.standard_normal(p.shape)
    return net


def worker(shards: str, out_dir: str) -> None:
    """One rank: its part of the batch through SyncBatchNorm, written as JSON to out_dir/rank<r>.json."""
    dist.init_process_group(timeout=60)
    r, sizes = dist.get_rank(), SHARDS[shards]
    lo, hi = sum(sizes[:r]), sum(sizes[:r + 1])
    x, w, weight, bias = _data(sum(sizes))
    out = {"rank": r, "steps": _steps(_bn(cr.nn.SyncBatchNorm, weight, bias), x[lo:hi], w[lo:hi]),
           "jvp": _directional(cr.nn.SyncBatchNorm, x[lo:hi], w[lo:hi], weight, bias)}
    if shards == "equal":            # DDP over a converted model, SGD with momentum, mean loss
        model = cr.nn.SyncBatchNorm.convert_sync_batchnorm(_net())
        target = np.random.default_rng(5).standard_normal((sum(sizes), 2))
        _ddp_train(DistributedDataParallel(model), x[lo:hi], target[lo:hi])
        out["ddp"] = {k: v.data.tolist() for k, v in model.state_dict().items()}
    Path(out_dir, f"rank{r}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


# ----- one process -----
def test_without_a_process_group_it_is_batchnorm():
    x, w, weight, bias = _data(6)
    got, want = _steps(_bn(cr.nn.SyncBatchNorm, weight, bias), x, w), _steps(_bn(cr.nn.BatchNorm2d, weight, bias), x, w)
    assert got == want


def test_in_a_world_of_one_it_is_batchnorm_and_matches_torch():
    torch = pytest.importorskip("torch")
    x, w, weight, bias = _data(6)
    dist.init_process_group(backend="self")
    try:
        got = _steps(_bn(cr.nn.SyncBatchNorm, weight, bias, momentum=None), x, w)
    finally:
        dist.destroy_process_group()
    tb = torch.nn.BatchNorm2d(C, momentum=None, dtype=torch.float64)
    with torch.no_grad():
        tb.weight[:], tb.bias[:] = torch.tensor(weight), torch.tensor(bias)
    for step, row in enumerate(got):
        xt = torch.tensor(x + step, requires_grad=True)
        y = tb(xt)
        (y * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(row["y"], y.detach().numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(row["gx"], xt.grad.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(row["gw"], tb.weight.grad.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(row["rv"], tb.running_var.numpy(), rtol=0, atol=1e-12)
        tb.weight.grad = tb.bias.grad = None


def test_convert_sync_batchnorm_keeps_parameters_buffers_and_mode():
    torch = pytest.importorskip("torch")
    net = _net()
    bn = net[1]
    bn.eval()
    out = cr.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert out is net and type(net[1]) is cr.nn.SyncBatchNorm and not net[1].training
    assert net[1].weight is bn.weight and net[1].running_var is bn.running_var
    assert net[1].num_batches_tracked is bn.num_batches_tracked
    assert list(net.state_dict()) == list(torch.nn.SyncBatchNorm.convert_sync_batchnorm(
        torch.nn.Sequential(torch.nn.Conv2d(C, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.Tanh(),
                            torch.nn.Flatten(), torch.nn.Linear(4 * H * W, 2))).state_dict())
    lone = cr.nn.BatchNorm1d(4, affine=False, track_running_stats=False)
    new = cr.nn.SyncBatchNorm.convert_sync_batchnorm(lone)
    assert type(new) is cr.nn.SyncBatchNorm and new.weight is None and new.running_mean is None
    assert repr(new) == repr(torch.nn.SyncBatchNorm(4, affine=False, track_running_stats=False))


def test_errors_name_the_layer_and_the_fix():
    with pytest.raises(ValueError, match="SyncBatchNorm: .*process_group=None"):
        cr.nn.SyncBatchNorm(3, process_group="group")
    with pytest.raises(ValueError, match="device=None"):
        cr.nn.SyncBatchNorm(3, device="cuda")
    bn = cr.nn.SyncBatchNorm(3)
    with pytest.raises(cr.ShapeError, match=r"SyncBatchNorm: expected input of at least 2 dimensions.*\(3,\)"):
        bn(cr.ones(3))
    with pytest.raises(cr.ShapeError, match="num_features=4"):
        bn(cr.ones((2, 4, 5)))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(cr.ones((1, 3)))


def test_any_number_of_spatial_axes_as_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2, 2))
    got = cr.nn.SyncBatchNorm(3, dtype=cr.float64)(cr.tensor(x))
    want = torch.nn.SyncBatchNorm(3, dtype=torch.float64)(torch.tensor(x))
    np.testing.assert_allclose(got.data, want.detach().numpy(), rtol=0, atol=1e-12)


# ----- two ranks -----
@pytest.mark.skipif(collectives.mpi4py is None or MPIEXEC is None,
                    reason="needs mpi4py and mpiexec: pip install 'chainrule[mpi]'")
@pytest.mark.parametrize("shards", sorted(SHARDS))
def test_two_ranks_match_one_process_with_the_whole_batch(shards, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not collectives.launched_by_mpi({k: v, "SLURM_NTASKS": "2"})}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run([MPIEXEC, "-n", "2", sys.executable, __file__, shards, str(tmp_path)], capture_output=True,
                         text=True, timeout=120, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    sizes = SHARDS[shards]
    x, w, weight, bias = _data(sum(sizes))
    want = _steps(_bn(cr.nn.BatchNorm2d, weight, bias), x, w)
    for step, ref in enumerate(want):
        got = [d["steps"][step] for d in ranks]
        for k in ("y", "gx"):               # each rank: its own examples
            whole = np.concatenate([np.reshape(g[k], (n, C, H, W)) for g, n in zip(got, sizes)])
            np.testing.assert_allclose(whole, ref[k], rtol=0, atol=1e-12, err_msg=k)
        for k in ("gw", "gb", "gw2"):       # parameters: each rank's share, summed (as DDP's all-reduce)
            np.testing.assert_allclose(np.sum([g[k] for g in got], axis=0), ref[k], rtol=0, atol=1e-11, err_msg=k)
        for k in ("rm", "rv", "nbt"):       # the running statistics: the same on every rank
            assert got[0][k] == got[1][k], k
            np.testing.assert_allclose(got[0][k], ref[k], rtol=0, atol=1e-12, err_msg=k)
    ref = _directional(cr.nn.BatchNorm2d, x, w, weight, bias)       # each rank: its share of the loss
    np.testing.assert_allclose(sum(d["jvp"]["along"] for d in ranks), ref["along"], rtol=1e-12, atol=1e-12)
    hvp = np.concatenate([np.reshape(d["jvp"]["hvp"], (n, C, H, W)) for d, n in zip(ranks, sizes)])
    np.testing.assert_allclose(hvp, ref["hvp"], rtol=0, atol=1e-11)
    if shards == "equal":
        ref_net = _net()
        target = np.random.default_rng(5).standard_normal((sum(sizes), 2))
        _ddp_train(ref_net, x, target)
        for k, v in ref_net.state_dict().items():
            assert ranks[0]["ddp"][k] == ranks[1]["ddp"][k], k
            np.testing.assert_allclose(ranks[0]["ddp"][k], v.data, rtol=0, atol=1e-12, err_msg=k)


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
