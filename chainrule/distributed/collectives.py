"""The process group and its collectives, on MPI (mpi4py) or in a world of one.

Every collective works in place on the tensors' ndarrays through mpi4py's buffer interface (no
copy for C-contiguous arrays of an MPI type), is issued non-blocking and is waited for by polling
``Test`` against the group's deadline, so a stalled peer becomes a ``DistributedTimeoutError`` that
names the collective instead of a hang. In a world of one every collective is the identity.

A rank that leaves the job while the group is live (``sys.exit``, the end of its script) tells
the others on a second communicator; a rank waiting on a collective that the leaver never joined
then raises instead of waiting for its deadline (MPICH's finalize would hold the leaver, and so
the job, until then). A killed rank is the launcher's to clean up (hydra's ``mpiexec`` ends the
job at once; Slurm: ``srun --kill-on-bad-exit``).

``mpi4py.MPI`` is imported by ``init_process_group``, not when this module loads: importing it
initializes MPI, which a program that never asks for a process group must not pay for.
"""
from __future__ import annotations

import atexit
import enum
import importlib
import os
import pickle
import sys
import time
import traceback
from typing import Any, Callable

from chainrule.core import random
from chainrule.core._backend import np
from chainrule.core.errors import ChainruleError
from chainrule.core.grad_mode import PROCESS
from chainrule.core.tensor import Tensor

try:
    import mpi4py
except ImportError:              # the optional extra chainrule[mpi]
    mpi4py = None

_EXTRA = "pip install 'chainrule[mpi]' (mpi4py and an MPI library, e.g. the mpich wheel)"


class DistributedError(ChainruleError, RuntimeError):
    """A process-group error: not initialized, a missing backend, a broken group."""


class DistributedTimeoutError(DistributedError, TimeoutError):
    """A collective did not complete within the group's timeout; the group is unusable afterwards."""


class ReduceOp(enum.Enum):
    """How a collective combines the replicas' tensors, as ``torch.distributed.ReduceOp``."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


_LEAVING = 77                   # the tag of "this rank is exiting" on the control communicator
_PEER_POLL_S = 0.05              # how often a waiting rank looks for peers that left
# MPICH moves a collective's data only inside MPI calls on every rank involved: a waiter that
# sleeps between Tests stalls its peers too (a 2.7 MB all-reduce took 3 ms instead of 0.6 ms), so
# a wait spins on Test for up to _SPIN_S and only then backs off to sleeps (a peer still computes).
# With more ranks than cores on the node it yields the core at each Test, or the spinning rank
# holds the core that the peer it waits for needs; with a core each, yielding costs ~2 ms a wait.
_SPIN_S = 0.05
_LEFT_GRACE_S = 0.5              # a collective the leaver did join still completes within this
_UNSEEDED = random.default_generator      # manual_seed replaces it: identity tells "never seeded"

_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "MPI_LOCALRANKID", "PMIX_RANK", "HYDRA_CONTROL_FD")


def launched_by_mpi(environ: Any = None) -> str | None:
    """The environment variable that says an MPI launcher (mpiexec, mpirun, srun) started this
    process, or None.

    >>> launched_by_mpi({"PMI_RANK": "0", "PMI_SIZE": "2"})
    'PMI_RANK'
    >>> launched_by_mpi({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None    # a 1-task job step
    True
    """
    env = os.environ if environ is None else environ
    for k in _LAUNCHER_VARS:
        if k in env:
            return k
    hydra = sorted(k for k in env if k.startswith("HYDRA_"))
    if hydra:
        return hydra[0]
    if "SLURM_PROCID" in env:
        n = env.get("SLURM_STEP_NUM_TASKS", env.get("SLURM_NTASKS", "1"))
        if n.isdigit() and int(n) > 1:
            return "SLURM_PROCID"
    return None


class Work:
    """A pending collective (``async_op=True``): ``is_completed()`` tests, ``wait()`` blocks up to the
    group's timeout and then runs the completion step (a copy back, the division of AVG)."""

    def __init__(self, group: _Group | None, name: str, request: Any,
                 done: Callable[[], None] | None = None) -> None:
        self._group, self.name, self._request, self._done = group, name, request, done
        self._finished = request is None
        if self._finished and done is not None:
            done()

    def _finish(self) -> None:
        self._finished = True
        if self._done is not None:
            self._done()

    def is_completed(self) -> bool:
        """Test once (driving MPI's progress); True once the collective has completed here."""
        if not self._finished and self._request.Test():
            self._finish()
        return self._finished

    def wait(self) -> None:
        if not self._finished:
            self._group.wait(self._request, self.name)
            self._finish()


class _Group:
    """The world: an MPI communicator (and a control one for exit notices), or None for a world of one."""

    def __init__(self, backend: str, timeout: float, comm: Any = None, mpi: Any = None) -> None:
        self.backend, self.timeout, self.comm, self.MPI = backend, float(timeout), comm, mpi
        self.rank = comm.Get_rank() if comm is not None else 0
        self.size = comm.Get_size() if comm is not None else 1
        self.ctrl = comm.Dup() if comm is not None else None
        self.oversubscribed = False
        if comm is not None:
            node = comm.Split_type(mpi.COMM_TYPE_SHARED)
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
            self.oversubscribed = node.Get_size() > cores
            node.Free()
        self.broken: str | None = None
        self.left: list[int] = []        # ranks that announced their exit

    def check(self, name: str) -> None:
        if self.broken:
            raise DistributedError(f"{name}: the process group is unusable since {self.broken}; "
                                   f"no collective can run on it (end the job, or destroy it and "
                                   f"start over)")

    def _poll_left(self) -> None:
        status = self.MPI.Status()
        while self.ctrl.Iprobe(self.MPI.ANY_SOURCE, _LEAVING, status):
            note = np.zeros(1, np.int64)
            self.ctrl.Recv(note, status.Get_source(), _LEAVING)
            self.left.append(int(note[0]))

    def wait(self, request: Any, name: str) -> None:
        """Poll ``request`` until it completes, the timeout passes or a peer has left (then the
        group is broken)."""
        now = time.monotonic()
        deadline, poll, spin, gone = now + self.timeout, now + _PEER_POLL_S, now + _SPIN_S, None
        pause = 0.0
        while not request.Test():
            now = time.monotonic()
            if now > deadline:
                self.broken = f"{name} timed out on rank {self.rank}"
                raise DistributedTimeoutError(
                    f"{name} on rank {self.rank} of {self.size} did not complete within the timeout "
                    f"of {self.timeout:g} s (init_process_group(timeout=...)): a peer is stalled, "
                    f"dead, or issuing different collectives. The process group is unusable now "
                    f"(the pending operation cannot be cancelled); end the job")
            if now > poll:
                poll = now + _PEER_POLL_S
                self._poll_left()
                if self.left and gone is None:
                    gone = now + _LEFT_GRACE_S
            if gone is not None and now > gone:
                who = ", ".join(map(str, sorted(set(self.left))))
                self.broken = f"rank {who} left the job during {name}"
                raise DistributedError(
                    f"{name} on rank {self.rank} of {self.size} cannot complete: rank {who} exited "
                    f"(sys.exit or the end of its script) without joining it. The process group is "
                    f"unusable now; end the job")
            if now > spin:
                time.sleep(pause)
                pause = min(2 * pause + 1e-5, 1e-3)
            elif self.oversubscribed:
                os.sched_yield()

    def announce_exit(self) -> None:
        """Tell every other rank that this one is leaving (bounded: at most 1 s)."""
        note = np.array([self.rank], np.int64)
        reqs = [self.ctrl.Isend(note, r, _LEAVING) for r in range(self.size) if r != self.rank]
        end = time.monotonic() + 1.0
        while not self.MPI.Request.Testall(reqs) and time.monotonic() < end:
            time.sleep(1e-3)


_GROUP: _Group | None = None


def _excepthook(prev: Callable) -> Callable:
    def hook(exc_type: Any, exc: Any, tb: Any) -> None:
        group = _GROUP
        if group is None or group.comm is None or group.size == 1:
            prev(exc_type, exc, tb)
            return
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        sys.stderr.write(text + f"chainrule.distributed: uncaught {exc_type.__name__} on rank {group.rank}; "
                                f"aborting all {group.size} processes (MPI_Abort)\n")
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(0.5)          # let the launcher forward this output before the abort kills the job
        group.MPI.COMM_WORLD.Abort(1)
    hook._chainrule_abort = True  # type: ignore[attr-defined]
    return hook


def _at_exit() -> None:
    group = _GROUP
    if group is not None and group.comm is not None and group.size > 1 and not group.broken:
        group.announce_exit()


def init_process_group(backend: str | None = None, timeout: float = 30.0) -> None:
    """Join the world: MPI when an MPI launcher started the process (or ``backend="mpi"``), a world
    of one otherwise (``backend="self"``), so the same script runs under ``mpiexec -n 8`` and alone.

    ``timeout`` (seconds) bounds every collective. Under MPI with more than one process an uncaught
    exception on any rank prints its traceback and aborts the whole job, and a rank that exits
    while the group is live makes the collectives that wait for it raise. Under MPI an unseeded
    ``cr.random`` default generator is reseeded per rank (rank r > 0 from ``SeedSequence(0,
    spawn_key=(r,))``), so dropout masks differ across ranks; ``cr.random.manual_seed(s)`` before or
    after this call keeps exactly ``s`` on the rank that calls it.

    >>> import chainrule.distributed as dist
    >>> dist.init_process_group(backend="self"); dist.get_rank(), dist.get_world_size()
    (0, 1)
    >>> dist.destroy_process_group()
    """
    global _GROUP
    if _GROUP is not None:
        raise DistributedError("init_process_group: the process group is already initialized; call "
                               "destroy_process_group() first")
    if timeout <= 0:
        raise ValueError(f"init_process_group: timeout must be > 0 seconds, got {timeout}")
    launcher = launched_by_mpi()
    if backend is None:
        backend = "mpi" if launcher else "self"
    if backend not in ("mpi", "self"):
        raise ValueError(f"init_process_group: backend must be 'mpi', 'self' or None (detect), got {backend!r}")
    if backend == "self":
        _GROUP = PROCESS.group = _Group("self", timeout)
        return
    if mpi4py is None:
        why = (f"this process was started by an MPI launcher ({launcher} is set)" if launcher
               else "backend='mpi' was asked for")
        raise DistributedError(f"init_process_group: {why} but mpi4py is not installed; {_EXTRA}")
    mpi = importlib.import_module("mpi4py.MPI")
    _GROUP = PROCESS.group = _Group("mpi", timeout, mpi.COMM_WORLD.Dup(), mpi)
    if _GROUP.size > 1:
        if not getattr(sys.excepthook, "_chainrule_abort", False):
            sys.excepthook = _excepthook(sys.excepthook)
        atexit.unregister(_at_exit)
        atexit.register(_at_exit)    # after mpi4py's import, so it runs before MPI_Finalize
        if random.default_generator is _UNSEEDED and _GROUP.rank > 0:
            random.manual_seed(np.random.SeedSequence(0, spawn_key=(_GROUP.rank,)))


def is_initialized() -> bool:
    """True inside ``init_process_group`` ... ``destroy_process_group``."""
    return _GROUP is not None


def _group(name: str) -> _Group:
    if _GROUP is None:
        raise DistributedError(f"{name}: the process group is not initialized; call "
                               f"chainrule.distributed.init_process_group() first")
    _GROUP.check(name)
    return _GROUP


def _rooted(name: str, role: str, root: int) -> _Group:
    """The group of a collective rooted at rank ``root`` (its ``role``: src or dst), checked to have it."""
    group = _group(name)
    if not 0 <= root < group.size:
        raise ValueError(f"{name}: {role}={root} is not a rank of a world of {group.size}")
    return group


def get_rank() -> int:
    """This process's rank in the process group (0 .. world size - 1)."""
    return _group("get_rank").rank


def get_world_size() -> int:
    """The number of processes in the process group."""
    return _group("get_world_size").size


def get_backend() -> str:
    """The process group's backend name (``"mpi"``, or ``"self"`` for a one-process group)."""
    return _group("get_backend").backend


def destroy_process_group() -> None:
    """Leave the group (its communicator is freed unless it is broken); MPI stays initialized."""
    global _GROUP
    g, _GROUP = _GROUP, None
    PROCESS.group = None
    if g is not None and g.comm is not None and not g.broken:
        g.comm.Free()
        g.ctrl.Free()


# ----- buffers -----
def _array(t: Any, name: str) -> Any:
    if isinstance(t, Tensor):
        return t.data
    if isinstance(t, np.ndarray):
        return t
    raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")


def _bump(t: Any) -> None:
    if isinstance(t, Tensor):
        t._bump()


def _wire(arr: Any) -> tuple[Any, Callable[[Any], None] | None]:
    """A contiguous array of an MPI type for ``arr``, and how to copy results back (None: the same)."""
    if arr.dtype.kind in "fciub" and arr.dtype.itemsize >= 4 or arr.dtype.kind in "iub":
        if arr.flags.c_contiguous:
            return arr, None
        buf = np.ascontiguousarray(arr)
    else:                        # float16, bfloat16, float8: reduce in float32
        buf = arr.astype(np.float32)
    return buf, lambda b: np.copyto(arr, b, casting="unsafe")


def _op(group: _Group, op: ReduceOp, name: str, dtype: Any) -> Any:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{name}: op must be a cr.distributed.ReduceOp, got {op!r}")
    if op is ReduceOp.AVG and dtype.kind not in "fc":
        raise TypeError(f"{name}: ReduceOp.AVG needs a floating dtype, got {dtype}")
    if op in (ReduceOp.MAX, ReduceOp.MIN) and dtype.kind == "c":
        raise TypeError(f"{name}: ReduceOp.{op.name} is not defined for complex dtype {dtype}")
    m = group.MPI
    return None if m is None else {ReduceOp.SUM: m.SUM, ReduceOp.AVG: m.SUM, ReduceOp.MAX: m.MAX,
                                   ReduceOp.MIN: m.MIN}[op]


def _run(group: _Group, name: str, request: Any, done: Callable[[], None] | None, async_op: bool) -> Any:
    work = Work(group, name, request, done)
    if async_op:
        return work
    work.wait()
    return None


# ----- collectives -----
def _reduced(group: _Group, op: ReduceOp, buf: Any, back: Callable[[Any], None] | None,
             tensor: Any) -> Callable[[], None]:
    """What a finished reduction does: divide for AVG, copy back off the wire, bump the version."""
    def done() -> None:
        if op is ReduceOp.AVG:
            buf[...] /= group.size
        if back is not None:
            back(buf)
        _bump(tensor)
    return done


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across the world, in place, on every rank (``async_op=True``: a ``Work``).

    >>> import chainrule as cr, chainrule.distributed as dist
    >>> dist.init_process_group(backend="self")
    >>> t = cr.tensor([1.0, 2.0]); dist.all_reduce(t, dist.ReduceOp.AVG); t
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    name = "all_reduce"
    group = _group(name)
    arr = _array(tensor, name)
    mop = _op(group, op, name, arr.dtype)
    if group.size == 1:
        return _run(group, name, None, None, async_op)
    buf, back = _wire(arr)
    req = group.comm.Iallreduce(group.MPI.IN_PLACE, buf, mop)
    return _run(group, name, req, _reduced(group, op, buf, back, tensor), async_op)


def broadcast(tensor: Any, src: int = 0, async_op: bool = False) -> Work | None:
    """Overwrite ``tensor`` on every rank with its value on rank ``src``."""
    name = "broadcast"
    group = _rooted(name, "src", src)
    arr = _array(tensor, name)
    if group.size == 1:
        return _run(group, name, None, None, async_op)
    buf, back = _wire(arr)
    req = group.comm.Ibcast(buf, root=src)

    def done() -> None:
        if back is not None:
            back(buf)
        _bump(tensor)
    return _run(group, name, req, done, async_op)


def _one_per_rank(name: str, what: str, tensors: list, group: Any, ref_tensor: Any, ref_name: str) -> tuple:
    """``(the array of ref_tensor, the arrays of tensors)``, checked: one per rank, each of the
    reference's shape and dtype."""
    ref = _array(ref_tensor, name)
    if len(tensors) != group.size:
        raise ValueError(f"{name}: {what} has {len(tensors)} entries, the world has {group.size}")
    arrays = [_array(t, name) for t in tensors]
    for i, a in enumerate(arrays):
        if a.shape != ref.shape or a.dtype != ref.dtype:
            raise ValueError(f"{name}: {what}[{i}] is {a.dtype}{list(a.shape)}, {ref_name} is "
                             f"{ref.dtype}{list(ref.shape)}")
    return ref, arrays


def all_gather(tensor_list: list, tensor: Any, async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` (same shape and dtype on every rank)."""
    name = "all_gather"
    group = _group(name)
    arr, outs = _one_per_rank(name, "tensor_list", tensor_list, group, tensor, "the tensor")
    send, _ = _wire(arr)
    recv = np.empty((group.size, *send.shape), send.dtype)

    def done() -> None:
        for t, o, r in zip(tensor_list, outs, recv):
            np.copyto(o, r, casting="unsafe")
            _bump(t)
    if group.size == 1:
        recv[0] = send
        return _run(group, name, None, done, async_op)
    req = group.comm.Iallgather(send, recv)
    return _run(group, name, req, done, async_op)


def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM,
                   async_op: bool = False) -> Work | None:
    """``output`` on rank r becomes the reduction over ranks of their ``input_list[r]``."""
    name = "reduce_scatter"
    group = _group(name)
    out, ins = _one_per_rank(name, "input_list", input_list, group, output, "the output")
    mop = _op(group, op, name, out.dtype)
    if group.size == 1:
        np.copyto(out, ins[0])
        _bump(output)
        return _run(group, name, None, None, async_op)
    send = np.stack([_wire(a)[0] for a in ins])
    buf, back = _wire(out)
    if back is None:
        buf = out
    req = group.comm.Ireduce_scatter_block(send, buf, mop)
    return _run(group, name, req, _reduced(group, op, buf, back, output), async_op)


def barrier() -> None:
    """Wait until every rank has reached this call (bounded by the group's timeout)."""
    group = _group("barrier")
    if group.size > 1:
        group.wait(group.comm.Ibarrier(), "barrier")


def gather_object(obj: Any, object_gather_list: list | None = None, dst: int = 0) -> None:
    """Collect every rank's picklable ``obj`` into ``object_gather_list`` (a list of world-size
    entries, needed on ``dst`` only), bounded by the group's timeout like every collective.

    >>> import chainrule.distributed as dist
    >>> dist.init_process_group(backend="self")
    >>> out = [None]; dist.gather_object({"a": 1}, out); out
    [{'a': 1}]
    >>> dist.destroy_process_group()
    """
    name = "gather_object"
    group = _rooted(name, "dst", dst)
    if group.rank == dst and (object_gather_list is None or len(object_gather_list) != group.size):
        raise ValueError(f"{name}: on rank dst={dst} object_gather_list must be a list of "
                         f"{group.size} entries (one per rank)")
    if group.size == 1:
        object_gather_list[0] = obj
        return
    payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    sizes = np.zeros(group.size, np.int64)
    group.wait(group.comm.Iallgather(np.array([payload.size], np.int64), sizes), name)
    recv = np.empty(int(sizes.sum()) if group.rank == dst else 0, np.uint8)
    spec = [recv, (sizes, None), group.MPI.BYTE] if group.rank == dst else None
    group.wait(group.comm.Igatherv([payload, group.MPI.BYTE], spec, root=dst), name)
    if group.rank == dst:
        starts = np.concatenate([[0], np.cumsum(sizes)])
        for r in range(group.size):
            object_gather_list[r] = pickle.loads(recv[starts[r]:starts[r + 1]].tobytes())
