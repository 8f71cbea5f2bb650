"""DistributedDataParallel and buffers (a BatchNorm's running statistics) on 2 ranks whose buffers
start different, against torch's DDP on gloo run by the same processes with the same weights and data.

This file runs itself as the workers: ``mpiexec -n 2 python test_ddp_buffers.py PORT DIR``; each
rank writes DIR/rank<r>.json with, per variant, the parameters and buffers after construction and after each
forward, for chainrule and (when torch is installed) for torch.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr
import chainrule.distributed as dist
from chainrule.distributed import collectives
from chainrule.nn.parallel import DistributedDataParallel

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = next((str(p) for p in (Path(sys.executable).parent / "mpiexec",) if p.exists()), shutil.which("mpiexec"))
VARIANTS = {     # name: DDP's keyword arguments
    "default": {},
    "broadcast_buffers=True": {"broadcast_buffers": True},
    "broadcast_buffers=False": {"broadcast_buffers": False},
    "forward_sync_buffers=False": {"forward_sync_buffers": False},
    "init_sync=False": {"init_sync": False},
}
STEPS = 3


def _initial(rank):
    """This rank's starting state: parameters and buffers that differ from rank to rank."""
    rng = np.random.default_rng(100 + rank)
    params = {"0.weight": rng.standard_normal((4, 3)), "0.bias": rng.standard_normal(4),
              "1.weight": rng.standard_normal(4) + 1, "1.bias": rng.standard_normal(4),
              "3.weight": rng.standard_normal((1, 4)), "3.bias": rng.standard_normal(1)}
    buffers = {"1.running_mean": np.full(4, rank + 1.0), "1.running_var": np.full(4, 2.0 + rank),
               "1.num_batches_tracked": np.array(5 * rank)}
    return {**params, **buffers}


def _batches(rank):
    rng = np.random.default_rng(7 + rank)
    return [(rng.standard_normal((5, 3)) * (1 + step), rng.standard_normal((5, 1))) for step in range(STEPS + 2)]


def _snapshot(state):
    return {k: np.asarray(v).tolist() for k, v in state.items()}


def _run_chainrule(rank, kwargs):
    model = cr.nn.Sequential(cr.nn.Linear(3, 4, dtype=cr.float64), cr.nn.BatchNorm1d(4, dtype=cr.float64),
                             cr.nn.Tanh(), cr.nn.Linear(4, 1, dtype=cr.float64))
    model.load_state_dict(_initial(rank))
    ddp = DistributedDataParallel(model, **kwargs)
    record = [_snapshot({k: v.data for k, v in model.state_dict().items()})]
    opt = cr.optim.SGD(ddp.parameters(), lr=0.1)
    batches = _batches(rank)
    for x, y in batches[:STEPS]:
        opt.zero_grad()
        loss = ((ddp(cr.tensor(x)) - cr.tensor(y)) ** 2).mean()
        record.append(_snapshot({k: v.data for k, v in model.state_dict().items()}))
        loss.backward()
        opt.step()
    with cr.no_grad():                  # a forward without grad: the next one does not broadcast
        ddp(cr.tensor(batches[STEPS][0]))
    ddp(cr.tensor(batches[STEPS + 1][0]))
    record.append(_snapshot({k: v.data for k, v in model.state_dict().items()}))
    return record


def _run_torch(rank, kwargs, torch):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Tanh(),
                                torch.nn.Linear(4, 1)).double()
    model.load_state_dict({k: torch.tensor(v) for k, v in _initial(rank).items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)      # broadcast_buffers is deprecated in 2.13
        ddp = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    record = [_snapshot({k: v.detach().numpy() for k, v in model.state_dict().items()})]
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    batches = _batches(rank)
    for x, y in batches[:STEPS]:
        opt.zero_grad()
        loss = ((ddp(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        record.append(_snapshot({k: v.detach().numpy() for k, v in model.state_dict().items()}))
        loss.backward()
        opt.step()
    with torch.no_grad():
        ddp(torch.tensor(batches[STEPS][0]))
    ddp(torch.tensor(batches[STEPS + 1][0]))
    record.append(_snapshot({k: v.detach().numpy() for k, v in model.state_dict().items()}))
    return record


def worker(port: str, out_dir: str) -> None:
    dist.init_process_group(timeout=60)
    rank = dist.get_rank()
    out = {"rank": rank, "chainrule": {name: _run_chainrule(rank, kw) for name, kw in VARIANTS.items()}}
    try:
        import torch
        import torch.distributed as tdist
    except ImportError:
        torch = None
    if torch is not None and tdist.is_available() and tdist.is_gloo_available():
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                 world_size=dist.get_world_size())
        out["torch"] = {name: _run_torch(rank, kw, torch) for name, kw in VARIANTS.items()}
        tdist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    if collectives.mpi4py is None or MPIEXEC is None:
        pytest.skip("needs mpi4py and mpiexec: pip install 'chainrule[mpi]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not collectives.launched_by_mpi({k: v, "SLURM_NTASKS": "2"})}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = tmp_path_factory.mktemp("ddp_buffers")
    run = subprocess.run([MPIEXEC, "-n", "2", sys.executable, __file__, str(port), str(out)], capture_output=True,
                         text=True, timeout=180, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


BUFFERS = ("1.running_mean", "1.running_var", "1.num_batches_tracked")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_in_a_world_of_one_every_variant_is_the_module(variant, monkeypatch):
    for k in [k for k in os.environ if collectives.launched_by_mpi({k: os.environ[k], "SLURM_NTASKS": "2"})]:
        monkeypatch.delenv(k)
    dist.init_process_group(backend="self")
    try:
        model = cr.nn.Sequential(cr.nn.Linear(3, 4, dtype=cr.float64), cr.nn.BatchNorm1d(4, dtype=cr.float64))
        model.load_state_dict({k: v for k, v in _initial(0).items() if k.startswith(("0.", "1."))})
        ref = cr.nn.Sequential(cr.nn.Linear(3, 4, dtype=cr.float64), cr.nn.BatchNorm1d(4, dtype=cr.float64))
        ref.load_state_dict(model.state_dict())
        ddp = DistributedDataParallel(model, **VARIANTS[variant])
        assert ddp.broadcast_buffers == (variant not in ("broadcast_buffers=False", "forward_sync_buffers=False"))
        x = cr.tensor(_batches(0)[0][0])
        np.testing.assert_array_equal(ddp(x).data, ref(x).data)
        for (k, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
            np.testing.assert_array_equal(a.data, b.data, err_msg=k)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_ddp_keeps_parameters_and_buffers_as_torchs_ddp(ranks, variant):
    if "torch" not in ranks[0]:
        pytest.skip("needs torch with gloo")
    for r in ranks:
        for i, (ours, theirs) in enumerate(zip(r["chainrule"][variant], r["torch"][variant])):
            for k in theirs:
                np.testing.assert_allclose(ours[k], theirs[k], rtol=0, atol=1e-12,
                                           err_msg=f"rank {r['rank']}, record {i}, {k}")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_buffers_start_from_rank_0_unless_asked_not_to(ranks, variant):
    first = [r["chainrule"][variant][0] for r in ranks]
    synced = variant not in ("broadcast_buffers=False", "init_sync=False")
    for k in BUFFERS:
        assert (first[0][k] == first[1][k]) == synced, k
    assert (first[1]["1.running_mean"] == _initial(0 if synced else 1)["1.running_mean"].tolist())
    params_synced = variant != "init_sync=False"
    assert (first[0]["0.weight"] == first[1]["0.weight"]) == params_synced


def test_each_forward_starts_from_rank_0s_buffers_as_plain_batchnorm(ranks):
    """With the default, rank r's running statistics after a forward are rank 0's before it, updated
    with rank r's own batch (plain BatchNorm: no statistics cross the ranks)."""
    rows = [r["chainrule"]["default"] for r in ranks]
    for step in range(STEPS):
        before = rows[0][step]                       # rank 0's after the previous forward (or at start)
        for r in range(2):
            x = _batches(r)[step][0]
            params = rows[r][step + 1]               # those of this forward (it changes no parameter)
            bn = cr.nn.BatchNorm1d(4, dtype=cr.float64)
            bn.load_state_dict({k[2:]: np.asarray(before[k]) if k.startswith("1.running") or k.endswith(
                "tracked") else np.asarray(params[k]) for k in before if k.startswith("1.")})
            h = cr.tensor(x) @ cr.tensor(np.asarray(params["0.weight"])).T + cr.tensor(np.asarray(params["0.bias"]))
            bn(h)
            np.testing.assert_allclose(rows[r][step + 1]["1.running_mean"], bn.running_mean.data, rtol=0, atol=1e-12)
            assert rows[r][step + 1]["1.num_batches_tracked"] == int(bn.num_batches_tracked.data)
    assert rows[0][-1]["1.running_mean"] != rows[1][-1]["1.running_mean"]      # after a no_grad forward


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
