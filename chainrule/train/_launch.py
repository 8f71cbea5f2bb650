"""What both training runs share: the progress bar, re-launching under ``mpiexec``, and the
environment for N processes on one machine."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Any

from chainrule.distributed import collectives as dist


def _progress(iterable: Any, total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True)


def find_mpiexec() -> str | None:
    """The mpich wheel's ``mpiexec`` (next to this Python), else the first on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def relaunch(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Run this same command under ``mpiexec -n args.nproc``; its exit status."""
    extra = 'pip install "chainrule[mpi]"'
    if dist.mpi4py is None:
        p.error(f"--nproc {args.nproc} needs mpi4py and an MPI launcher, which are not installed; {extra}")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        p.error(f"--nproc {args.nproc}: no mpiexec next to {sys.executable} or on PATH; {extra} "
                f"(the mpich wheel brings one)")
    cmd = [mpiexec, "-n", str(args.nproc), sys.executable, "-m", "chainrule", "train", *argv]
    return subprocess.run(cmd, env=launch_env(args.nproc)).returncode


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def launch_env(nproc: int) -> dict:
    """The environment for ``nproc`` processes on this machine: this chainrule importable, and
    (unless set) BLAS threads capped at cores/nproc, since N processes each spinning a full set of
    OpenBLAS threads made a DDP step 13x slower on 2 cores (docs/distributed.md)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    for k in _THREAD_VARS:
        env.setdefault(k, str(max(1, cores // nproc)))
    return env


def _silent(*args: Any, **kwargs: Any) -> None:
    """``print`` on the ranks other than 0."""
