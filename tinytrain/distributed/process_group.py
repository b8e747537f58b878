"""Process groups: which processes take part, and the collectives between them.

The processes are started by MPI (``mpiexec -n 2 python train.py``): MPI gives each one its
*rank* ``0 .. world_size - 1`` and lets them find each other (the *rendezvous*). A process
group wraps that world and offers the collectives DDP needs, on raw arrays, in place:

* ``all_reduce(array, op)``: every rank ends with the element-wise sum / average / max / min
  of all ranks' arrays;
* ``broadcast(array, src)``: every rank ends with rank ``src``'s array;
* ``barrier()``: no rank leaves before every rank has arrived.

``all_reduce`` and ``broadcast`` start the operation and return a :class:`Work` handle at
once; ``wait()`` makes the result usable. Two backends implement them:

* ``mpi`` (this file): NumPy arrays through mpi4py's non-blocking collectives (buffer
  interface, no pickling). ``wait()`` polls the request from Python, so Ctrl-C still works
  while a rank waits for a peer. MPI advances a non-blocking collective only inside MPI
  calls, so on CPU ranks most of the transfer happens in ``wait()``: DDP starts buckets
  early, but the overlap with backward is small. NCCL progresses on the GPU by itself.
* ``nccl`` (:mod:`tinytrain.distributed.nccl`): CuPy arrays through NCCL, one GPU per rank.

Every collective must be called by every rank, in the same order, with arrays of the same
shape and dtype: that is the contract of collective communication, and breaking it hangs or
corrupts. Errors name the rank and the operation.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import numpy as np

OPS = ("sum", "avg", "max", "min")

#: How long a rank waits in a collective for the others before it raises (PyTorch's default
#: for its CPU backends, ``default_pg_timeout``): a rank that exited, hangs, or took another
#: path turns into an error that names the operation instead of a silent hang.
DEFAULT_TIMEOUT = 30 * 60.0


class ReduceOp:
    """PyTorch-style names for the reduction operations (plain strings here)."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


class CollectiveTimeout(RuntimeError):
    """A rank waited longer than the group's timeout for the others to join a collective."""


class Work:
    """Handle of a collective that was started: ``wait()`` before using its result."""

    def wait(self) -> None:
        raise NotImplementedError

    def is_completed(self) -> bool:
        raise NotImplementedError


class ProcessGroup:
    """The ranks of one job and the collectives between them (see the module docstring).

    Attributes:
        backend: ``"mpi"`` or ``"nccl"``.
        device: where the arrays must live: ``"cpu"`` (mpi) or ``"cuda"`` (nccl).
        rank, world_size: this process's rank and the number of processes.
        local_rank, local_size: the same among the processes of this machine (MPI's
            shared-memory split), which choose this rank's GPU or share of the CPU cores.
        comm: the MPI communicator (also used by the nccl backend, for the rendezvous).
        timeout: seconds a collective waits in ``wait()`` before raising (``mpi`` backend,
            and the nccl backend's MPI calls; NCCL's own run on the GPU).
    """

    backend = ""
    device = ""
    dtypes: tuple[str, ...] = ()

    def __init__(self, comm: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        from mpi4py import MPI

        self.comm, self.timeout = comm, float(timeout)
        self.rank, self.world_size = comm.Get_rank(), comm.Get_size()
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        local.Free()

    # the collectives, on raw arrays of this backend's device (checked by the callers)
    def all_reduce(self, array: Any, op: str = "sum") -> Work:
        raise NotImplementedError

    def broadcast(self, array: Any, src: int = 0) -> Work:
        raise NotImplementedError

    def barrier(self) -> None:
        _MPIWork(self.comm.Ibarrier(), self, "barrier").wait()

    def allgather_object(self, obj: Any, what: str = "allgather_object") -> list[Any]:
        """Every rank's ``obj`` (small, picklable), in rank order: for checks, not data.

        Two non-blocking collectives (the pickles' sizes, then the pickles) waited for like
        the others, so that a rank that never calls it is an error after the timeout, not a
        hang (mpi4py's ``comm.allgather`` blocks in C). ``what``: the call it serves, for
        that error."""
        from mpi4py import MPI

        mine = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        sizes = np.zeros(self.world_size, dtype=np.int32)
        _MPIWork(_mpi_call(self, what, self.comm.Iallgather,
                           np.array([mine.size], dtype=np.int32), sizes), self, what).wait()
        starts = np.concatenate([[0], np.cumsum(sizes[:-1])]).astype(np.int32)
        everyone = np.empty(int(sizes.sum()), dtype=np.uint8)
        _MPIWork(_mpi_call(self, what, self.comm.Iallgatherv, mine,
                           [everyone, (sizes, starts), MPI.BYTE]), self, what).wait()
        return [pickle.loads(everyone[a:a + n].tobytes()) for a, n in zip(starts, sizes)]

    def stall_timer(self) -> StallTimer:
        """A timer for the time this rank is held up waiting for communication."""
        return StallTimer()

    def destroy(self) -> None:
        self.comm.Free()

    def describe(self, array: Any) -> str:
        return f"{array.dtype} {list(array.shape)}"


class StallTimer:
    """Time spent blocked in ``wait()``: host time here; GPU time for nccl."""

    def __init__(self) -> None:
        self._start = self._stop = 0.0

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self) -> None:
        self._stop = time.perf_counter()

    def seconds(self) -> float:
        return self._stop - self._start


class MPIGroup(ProcessGroup):
    """The ``mpi`` backend: NumPy arrays, mpi4py's non-blocking collectives."""

    backend = "mpi"
    device = "cpu"
    dtypes = ("float16", "float32", "float64", "int8", "uint8", "int32", "int64")

    def all_reduce(self, array: np.ndarray, op: str = "sum") -> Work:
        from mpi4py import MPI

        mpi_op = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
        what = f"all_reduce(op={op!r}) of {self.describe(array)}"
        request = _mpi_call(self, what, self.comm.Iallreduce, MPI.IN_PLACE, array, mpi_op)
        # MPI has no average: sum, then divide once the sum has arrived (as NCCL's ncclAvg)
        finish = (lambda: np.true_divide(array, self.world_size, out=array)) if op == "avg" \
            else None
        return _MPIWork(request, self, what, finish)

    def broadcast(self, array: np.ndarray, src: int = 0) -> Work:
        what = f"broadcast(src={src}) of {self.describe(array)}"
        return _MPIWork(_mpi_call(self, what, self.comm.Ibcast, array, src), self, what)


class _MPIWork(Work):
    """An MPI request; ``wait()`` polls it, so that signals (Ctrl-C) are handled meanwhile,
    and yields the core between polls (on a machine with more busy threads than cores, a
    spinning rank would take time from the rank it waits for)."""

    def __init__(self, request: Any, group: ProcessGroup, what: str,
                 finish: Any = None) -> None:
        self.request, self.group, self.what, self.finish = request, group, what, finish
        self.done = False

    def is_completed(self) -> bool:
        if not self.done and _mpi_call(self.group, self.what, self.request.Test):
            self.done = True
            if self.finish is not None:
                self.finish()
        return self.done

    def wait(self) -> None:
        deadline = time.monotonic() + self.group.timeout
        while not self.is_completed():
            if time.monotonic() > deadline:
                g = self.group
                raise CollectiveTimeout(
                    f"{self.what} on rank {g.rank} of {g.world_size} ({g.backend} backend) did "
                    f"not complete within {g.timeout:g} s: another rank has not called it (it "
                    "exited, hangs, or took another path; every rank must make the same "
                    "collective calls in the same order). init_process_group(timeout=...) "
                    "sets the limit")
            _yield()


_yield = getattr(os, "sched_yield", lambda: None)  # (not on Windows)


def _mpi_call(group: ProcessGroup, what: str, fn: Any, *args: Any) -> Any:
    from mpi4py import MPI

    try:
        return fn(*args)
    except (MPI.Exception, BufferError, ValueError, TypeError) as exc:
        raise RuntimeError(f"{what} failed on rank {group.rank} of {group.world_size} "
                           f"({group.backend} backend): {exc}") from None


_blas_limit: Any = None  # keeps the BLAS thread limit in force for the process's lifetime


def share_cpu_cores(local_size: int) -> int:
    """Give this rank its share of the machine's cores, ``cores // local_size`` threads.

    Without it every rank would start one thread per core (tinytrain's kernels and the BLAS),
    and 2 ranks on 2 cores would run 4 busy threads that evict each other. Returns the
    number of threads; ``OMP_NUM_THREADS``, when set, is respected, and so is a number the
    program set itself with ``tt.set_num_threads`` before.
    """
    from tinytrain.kernels.cpu import parallel

    global _blas_limit
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    given = os.environ.get("OMP_NUM_THREADS", "")
    threads = max(1, (cores or 1) // local_size)
    if given.isdigit() and int(given) > 0:
        threads = int(given)
    if parallel.chosen_num_threads() is not None:
        threads = parallel.chosen_num_threads()
    else:
        parallel.set_default_num_threads(threads)
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a runtime dependency
        return threads
    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    if blas and max(blas) > threads:  # never raise it: the kernels may have pinned it to 1
        _blas_limit = threadpool_limits(limits=threads, user_api="blas")
    return threads
