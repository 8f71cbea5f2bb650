"""chainrule.distributed and DistributedDataParallel: a world of one in this process, and real
worlds of 2 and 4 processes launched with ``mpiexec`` (skipped without mpi4py or mpiexec)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr
import chainrule.distributed as dist
from chainrule.distributed import collectives
from chainrule.distributed.optim import ZeroRedundancyOptimizer
from chainrule.nn.parallel import DistributedDataParallel

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MPIEXEC = next((str(p) for p in (Path(sys.executable).parent / "mpiexec",) if p.exists()),
               shutil.which("mpiexec"))
LAUNCHER_VARS = [k for k in os.environ if collectives.launched_by_mpi({k: os.environ[k], "SLURM_NTASKS": "2"})]

needs_mpi = pytest.mark.skipif(collectives.mpi4py is None or MPIEXEC is None,
                               reason="needs mpi4py and mpiexec: pip install 'chainrule[mpi]'")


def mpiexec(n: int, script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(HERE / script), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture
def world_of_one(monkeypatch):
    for k in LAUNCHER_VARS:
        monkeypatch.delenv(k)
    dist.init_process_group()
    yield
    dist.destroy_process_group()


# ----- a world of one -----
def test_world_of_one_collectives_are_the_identity(world_of_one):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "self"
    t = cr.tensor(np.array([1.0, -2.0]))
    for op in dist.ReduceOp:
        dist.all_reduce(t, op)
        assert t.data.tolist() == [1.0, -2.0]
    dist.broadcast(t, src=0)
    out = [cr.zeros(2, dtype=cr.float64)]
    dist.all_gather(out, t)
    assert out[0].data.tolist() == [1.0, -2.0]
    o = cr.zeros(2, dtype=cr.float64)
    dist.reduce_scatter(o, [t])
    assert o.data.tolist() == [1.0, -2.0]
    dist.barrier()
    assert dist.all_reduce(t, async_op=True).is_completed()
    with pytest.raises(ValueError, match="src=1"):
        dist.broadcast(t, src=1)
    with pytest.raises(TypeError, match="AVG needs a floating"):
        dist.all_reduce(cr.tensor(np.array([1, 2])), dist.ReduceOp.AVG)


def test_world_of_one_ddp_trains_as_the_module(world_of_one):
    rng = np.random.default_rng(0)
    a, b = cr.nn.Linear(4, 3), cr.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    ddp = DistributedDataParallel(a)
    assert ddp.module is a and [id(p) for p in ddp.parameters()] == [id(p) for p in a.parameters()]
    oa, ob = cr.optim.Adam(ddp.parameters(), lr=0.01), cr.optim.Adam(b.parameters(), lr=0.01)
    for _ in range(5):
        x = cr.tensor(rng.standard_normal((8, 4)).astype(np.float32))
        for model, opt in ((ddp, oa), (b, ob)):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
    with ddp.no_sync():
        ddp(x).sum().backward()
    assert all(np.array_equal(p.data, q.data) for p, q in zip(a.parameters(), b.parameters()))


def test_ddp_buckets_reduce_in_place_or_reuse_a_buffer_nothing_views():
    """A bucket's way in and out, without MPI (the reduction itself is left out): one owned
    gradient is divided in place and is the result; several are copied into a buffer that the
    next step reuses only once no .grad still views it (a kept .grad keeps its values)."""
    from chainrule.nn.parallel import _Bucket
    a, b = cr.nn.Parameter(np.zeros((2, 3))), cr.nn.Parameter(np.zeros(4))
    flags = np.zeros(3, np.int32)
    lone = _Bucket(0, [a], 0, np.dtype(np.float64), 0.5)
    g = np.full((2, 3), 4.0)
    lone.put(0, g, True, flags)
    assert list(lone.reduced(flags)) == [(a, g)] and (g == 2.0).all()       # in place: g itself
    kept = np.full((2, 3), 4.0)
    lone.put(0, kept, False, flags)                                       # not owned: copied
    (_, out), = lone.reduced(flags)
    assert out is not kept and (kept == 4.0).all() and (out == 2.0).all()

    pair = _Bucket(1, [a, b], 1, np.dtype(np.float64), 0.5)

    def step(value):
        pair.put(0, np.full((2, 3), value), True, flags)
        pair.put(1, None, False, flags)                                   # b: no gradient here
        return [g for _, g in pair.reduced(flags)]
    ga, gb = step(2.0)
    assert gb is None and ga.shape == (2, 3) and (ga == 1.0).all()
    ga2, _ = step(6.0)                         # ga still views the buffer: a new one
    assert ga2.base is not ga.base and (ga == 1.0).all() and (ga2 == 3.0).all()
    second = id(ga2.base)                      # (an id: holding the buffer would keep it in use)
    del ga, ga2
    ga3, _ = step(8.0)                         # nothing views the last one: reused
    assert id(ga3.base) == second and (ga3 == 4.0).all()


def test_errors_are_clear(monkeypatch):
    for k in LAUNCHER_VARS:
        monkeypatch.delenv(k)
    with pytest.raises(dist.DistributedError, match="not initialized"):
        dist.get_rank()
    with pytest.raises(dist.DistributedError, match="not initialized"):
        DistributedDataParallel(cr.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="backend"):
        dist.init_process_group(backend="nccl")
    dist.init_process_group()
    try:
        with pytest.raises(dist.DistributedError, match="already initialized"):
            dist.init_process_group()
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


@pytest.mark.parametrize("env, want", [
    ({"PMI_RANK": "0", "PMI_SIZE": "2"}, "PMI_RANK"), ({"OMPI_COMM_WORLD_RANK": "1"}, "OMPI_COMM_WORLD_RANK"),
    ({"HYDRA_FOO": "1"}, "HYDRA_FOO"), ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, "SLURM_PROCID"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, None), ({}, None)])
def test_launcher_detection(env, want):
    assert dist.launched_by_mpi(env) == want


@pytest.mark.parametrize("env, backend, needle", [
    ({"PMI_RANK": "0", "PMI_SIZE": "2"}, "None", "started by an MPI launcher (PMI_RANK is set)"),
    ({}, "'mpi'", "backend='mpi' was asked for")])
def test_mpi_without_mpi4py_names_the_extra(env, backend, needle):
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import chainrule.distributed as d\n"
            f"d.init_process_group(backend={backend})\n")
    clean = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env},
                         cwd=ROOT, timeout=60)
    assert out.returncode != 0
    assert needle in out.stderr and "chainrule[mpi]" in out.stderr, out.stderr[-2000:]


# ----- real worlds -----
@pytest.fixture(scope="module", params=[2, 4])
def equivalence(request):
    if collectives.mpi4py is None or MPIEXEC is None:
        pytest.skip("needs mpi4py and mpiexec: pip install 'chainrule[mpi]'")
    out = mpiexec(request.param, "ddp_equivalence.py")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return {r["case"]: r for r in map(json.loads, out.stdout.splitlines())}


CASES = [f"{o}-{d}-{v}" for o in ("sgd", "adam") for d in ("float64", "float32")
         for v in ("plain", "unused", "nosync", "ckpt", "mixed", "shared")]


@needs_mpi
@pytest.mark.parametrize("case", CASES)
def test_ddp_matches_one_process_with_the_whole_batch(equivalence, case):
    r = equivalence[case]
    tol = 1e-10 if "float64" in case else 1e-5
    assert r["diff"] < tol and r["spread"] == 0.0 and r["grads_as_expected"], r
    assert r["buckets"] >= (1 if "plain" in case else 2)


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives(n):
    out = mpiexec(n, "scenarios.py", "collectives")
    assert out.returncode == 0, out.stderr[-3000:]
    assert all(f"collectives ok rank {r} of {n}" in out.stdout for r in range(n)), out.stdout


def _left_at(out: subprocess.CompletedProcess) -> float:
    return float(next(x for x in out.stdout.splitlines() if x.startswith("LEFT AT")).split()[2])


@needs_mpi
def test_a_stalled_peer_times_out_naming_the_collective():
    t0 = time.monotonic()
    out = mpiexec(2, "scenarios.py", "timeout")
    wall = time.monotonic() - t0
    assert out.returncode != 0
    line = next(x for x in out.stdout.splitlines() if x.startswith("TIMEOUT"))
    assert "all_reduce on rank 0 of 2" in line and "unusable" in line
    assert 1.0 <= float(line.split()[2]) < 2.0          # the deadline (1 s) plus at most one second
    assert "AFTER: barrier: the process group is unusable since all_reduce timed out" in out.stdout
    assert wall < 30            # the stalled rank (sleeping 60 s) was aborted


@needs_mpi
def test_consolidate_state_dict_observes_the_deadline():
    out = mpiexec(2, "scenarios.py", "stalled_consolidate")
    assert out.returncode != 0
    line = next(x for x in out.stdout.splitlines() if x.startswith("TIMEOUT"))
    assert "gather_object on rank 0 of 2" in line and 1.0 <= float(line.split()[2]) < 2.0, line


# Rank 1 leaves while rank 0 waits in an all_reduce with a 60 s deadline: the job must end within
# 5 s of rank 1 leaving (measured from the time rank 1 printed to the launcher's exit).
@needs_mpi
@pytest.mark.parametrize("scenario, needles", [
    ("crash", ["boom on rank 1", "aborting all 2 processes"]),
    ("killed", ["signal 9"]),
    ("exits", ["rank 1 exited", "aborting all 2 processes"]),
    ("exits_zero", ["rank 1 exited", "aborting all 2 processes"])])
def test_a_rank_that_dies_or_leaves_ends_the_job_within_5_s(scenario, needles):
    out = mpiexec(2, "scenarios.py", scenario)
    ended = time.time()
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "must not" not in out.stdout, text[-3000:]
    assert ended - _left_at(out) < 5.0, text[-3000:]
    assert all(n in text for n in needles), text[-3000:]


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_ranks_that_end_without_destroying_the_group_exit_cleanly(n):
    out = mpiexec(n, "scenarios.py", "ends_normally")
    assert out.returncode == 0, out.stderr[-3000:]
    assert all(f"ended rank {r}" in out.stdout for r in range(n))


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_distributed_sampler_takes_rank_and_world_size_from_the_group(n):
    out = mpiexec(n, "scenarios.py", "sampler")
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("[")))
    got = [(d["rank"], d["replicas"], d["sampler_rank"], d["same"]) for d in rows]
    assert got == [(r, n, r, True) for r in range(n)]
    everything = [i for d in rows for i in d["indices"]]
    assert set(everything) == set(range(11)) and len(everything) == -(-11 // n) * n       # all, padded


@needs_mpi
def test_unseeded_generators_differ_across_ranks_and_manual_seed_is_exact():
    out = mpiexec(4, "scenarios.py", "seeds")
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"distinct": True, "seeded_equal": True}


@needs_mpi
def test_different_models_are_refused():
    out = mpiexec(2, "scenarios.py", "mismatch")
    assert out.returncode != 0
    assert "the ranks' models differ" in out.stderr and "rank 1: 2 parameters, 12 elements" in out.stderr


@needs_mpi
def test_a_reentrant_function_is_waited_for_and_an_unmarked_one_refused():
    out = mpiexec(2, "scenarios.py", "reentrant")
    assert all(f"REENTRANT OK rank {r}" in out.stdout for r in range(2)), out.stdout + out.stderr[-3000:]
    assert out.returncode != 0
    assert "parameter 'w' received more gradient after its bucket's all-reduce had started" in out.stderr
    assert "reentrant = True" in out.stderr


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_zero_matches_adam_and_shards_the_state(n):
    out = mpiexec(n, "scenarios.py", "zero")
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["diff"] == 0.0 and r["consolidated_equal"], r
    assert r["total_state"] == r["plain_state"]               # nothing duplicated
    # whole tensors: the largest (a 64x64 weight, 0.447 of the state) bounds the split from below
    assert r["max_rank_ratio"] <= max(1.02 / n, 0.45), r


@needs_mpi
def test_zero_add_param_group_after_construction():
    out = mpiexec(2, "scenarios.py", "zero_groups")
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["diff"] == 0.0 and r["owners"] == [0, 1], r      # both ranks own part of the new group


def test_zero_in_a_world_of_one(world_of_one):

    w = cr.nn.Parameter(np.array([1.0, 2.0]))
    opt = ZeroRedundancyOptimizer([w], cr.optim.SGD, lr=0.5)
    with pytest.raises(RuntimeError, match="consolidate_state_dict"):
        opt.state_dict()
    (w * w).sum().backward()
    opt.step()
    assert w.data.tolist() == [0.0, 0.0]
    opt.consolidate_state_dict()
    assert opt.state_dict()["param_groups"][0]["lr"] == 0.5


@needs_mpi
def test_a_checkpoint_from_rank_0_resumes_on_any_number_of_ranks(tmp_path):
    """DDP + ZeRO(Adam) on 2 ranks for 5 steps, consolidated and saved on rank 0; resumed for 5 more
    steps by one process (no launcher) with the plain Adam and by 4 ranks with ZeRO (resharded), each
    built with the defaults (the checkpoint brings lr, betas, eps): both end where one process
    trained 10 steps on the whole batch ends (float64)."""
    ckpt = str(tmp_path / "ckpt.npz")
    out = mpiexec(2, "scenarios.py", "resume_save", ckpt)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"saved": 2, "owners": [0, 1]}
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    one = subprocess.run([sys.executable, str(HERE / "scenarios.py"), "resume_load", ckpt, "adam"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    four = mpiexec(4, "scenarios.py", "resume_load", ckpt, "zero")
    for res, n, owners in ((one, 1, [0]), (four, 4, [0, 1, 2, 3])):
        assert res.returncode == 0, res.stderr[-3000:]
        r = json.loads(res.stdout.strip().splitlines()[-1])
        assert r["n"] == n and r["owners"] == owners and r["hyper_restored"], r
        assert r["diff"] < 1e-10 and r["moved"] > 0.01 and r["ref_steps"] == [10], r


def test_zero_groups_carry_every_hyperparameter_of_the_inner_optimizer(world_of_one):
    w, v = cr.nn.Parameter(np.ones(2)), cr.nn.Parameter(np.ones(3))
    z = ZeroRedundancyOptimizer([w], cr.optim.AdamW, lr=0.1)
    plain = cr.optim.AdamW([cr.nn.Parameter(np.ones(2))], lr=0.1)
    assert z.param_groups[0].keys() == plain.param_groups[0].keys()
    z.add_param_group({"params": [v], "betas": (0.5, 0.9)})          # a key the caller did not pass
    (w.sum() + v.sum()).backward()
    z.step()
    z.consolidate_state_dict()
    groups = z.state_dict()["param_groups"]
    assert groups[0]["decoupled_weight_decay"] and groups[0]["betas"] == (0.9, 0.999)
    assert groups[1]["betas"] == (0.5, 0.9) and groups[1]["lr"] == 0.1
