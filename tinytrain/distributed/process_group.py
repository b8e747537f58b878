"""Process groups: which processes take part, and the collectives between them.

The processes are started by MPI (``mpiexec -n 2 python train.py``): MPI gives each one its
*rank* ``0 .. world_size - 1`` and lets them find each other (the *rendezvous*). A process
group wraps that world and offers the collectives DDP needs, on raw arrays, in place:

* ``all_reduce(array, op)``: every rank ends with the element-wise sum / average / max / min
  / product of all ranks' arrays; ``reduce(array, dst, op)``: only rank ``dst`` does;
* ``broadcast(array, src)``: every rank ends with rank ``src``'s array;
* ``all_gather(array, out)``: every rank's ``out`` ends with all ranks' arrays, in rank
  order; ``gather(array, out, dst)``: only rank ``dst``'s; ``scatter(stack, out, src)``:
  rank ``r``'s ``out`` ends with ``stack[r]`` of rank ``src``;
* ``barrier()``: no rank leaves before every rank has arrived.

The collectives start the operation and return a :class:`Work` handle at once; ``wait()``
makes the result usable. The Work holds the arrays until the operation has completed, and
the group holds every Work until then, so a temporary array or a dropped handle is safe
(see :class:`Work`). Point-to-point ``send`` and ``recv`` (only two ranks take part) return
Works too. Two backends implement them:

* ``mpi`` (this file): NumPy arrays through mpi4py's non-blocking collectives (buffer
  interface, no pickling). ``wait()`` polls the request from Python, so Ctrl-C still works
  while a rank waits for a peer. MPI advances a non-blocking collective only inside MPI
  calls, so on CPU ranks most of the transfer happens in ``wait()``: DDP starts buckets
  early, but the overlap with backward is small. NCCL progresses on the GPU by itself.
* ``nccl`` (:mod:`tinytrain.distributed.nccl`): CuPy arrays through NCCL, one GPU per rank.

Every collective must be called by every rank, in the same order, with arrays of the same
shape and dtype: that is the contract of collective communication, and breaking it hangs or
corrupts. Errors name the rank and the operation.

**Three communicators.** A group duplicates MPI's: ``comm`` carries the data collectives,
``check_comm`` the small checks (:meth:`ProcessGroup.allgather_object`: is every rank making
the same call?; the object collectives' objects travel with them), and a third the "leaving"
notices below. MPI matches collectives by communicator and order only, so a check on one
rank could otherwise be matched with a DDP bucket's all-reduce on another and read float
bits as sizes; on separate communicators they never meet, and a mismatch waits and then
raises instead.

**A rank that leaves.** When ranks run different numbers of batches, the one that finishes
first leaves (``destroy_process_group()``, or the end of the program, which calls it) while
another waits in a collective that can never complete. MPI would not say so: the waiting
rank would sit there for the whole timeout (30 minutes). So, as PyTorch's gloo notices its
peer's closed connection, each rank listens from the start for a one-byte "leaving" notice
from every peer, and ``destroy()`` sends its own to every peer, then waits (bounded by the
timeout) until it has every peer's: at a normal end every rank reaches ``destroy()``, so
this is a short rendezvous, and MPI is finalised with no request pending. A rank waiting in
a collective checks for notices every few milliseconds; once one has arrived it still
polls its collective for :data:`LEAVE_GRACE` seconds (one that the leaving rank completed
may still be finishing here), then raises :class:`PeerLeft`, which names the rank that left
and the likely cause. A rank that works alone before it leaves (rank 0 writing a
checkpoint) waits in no collective, so it is never reported. The ``nccl`` backend shares
this for its MPI calls (barriers, checks); NCCL's own collectives run on the GPU and are not
covered (a peer that left makes them hang until NCCL's own watchdog, if any).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import time
from typing import Any

import numpy as np

#: The reductions: PyTorch's ReduceOp, lower-case ("band", "bor", "bxor": bitwise, of
#: integer and bool tensors).
OPS = ("sum", "avg", "max", "min", "product", "band", "bor", "bxor")

#: How long a rank waits in a collective for the others before it raises (PyTorch's default
#: for its CPU backends, ``default_pg_timeout``): a rank that exited, hangs, or took another
#: path turns into an error that names the operation instead of a silent hang.
DEFAULT_TIMEOUT = 30 * 60.0

#: Seconds a rank still polls its collective after a peer's "leaving" notice arrived, before
#: it raises :class:`PeerLeft` (a collective the leaving rank completed may still be
#: finishing on this rank: the notice travels on another communicator than the data).
LEAVE_GRACE = 3.0

#: Seconds a rank waits in one collective before it says so on stderr (once): a rank in a
#: different collective than its peers (uneven batches) waits for the whole timeout, and
#: without a word a learner cannot tell a hang from a slow peer.
STALL_NOTICE = 60.0

#: Largest pickle :meth:`ProcessGroup.allgather_object` accepts from a rank (it is for checks
#: and the small objects of ``all_gather_object`` / ``broadcast_object_list``).
MAX_OBJECT_BYTES = 64 * 1024 * 1024


class _ReduceOpNames(type):
    def __getattr__(cls, name: str) -> Any:
        message = f"type object 'ReduceOp' has no attribute {name!r}"
        if not name.startswith("__"):
            message += (": tinytrain reduces with SUM, AVG, MAX, MIN, PRODUCT, and BAND, BOR "
                        "and BXOR for integer and bool tensors (on a bool tensor, SUM and MAX "
                        "are a logical or, MIN and PRODUCT a logical and)")
        raise AttributeError(message)


class ReduceOp(metaclass=_ReduceOpNames):
    """PyTorch-style names for the reduction operations (plain strings here). PyTorch's
    others (``PREMUL_SUM``, ...) raise an AttributeError that says what there is."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


class CollectiveError(RuntimeError):
    """A collective that cannot complete: a peer did not join it in time, or left."""


class CollectiveTimeout(CollectiveError):
    """A rank waited longer than the group's timeout for the others to join a collective."""


class PeerLeft(CollectiveError):
    """A rank left the group (``destroy_process_group()`` or exit) while this rank waited for
    it in a collective."""


class UnevenCollectives(CollectiveError):
    """The ranks left the group having started different numbers of collectives: a
    collective that some ranks made was completed without the others, or paired with
    another call of theirs (see :meth:`ProcessGroup.destroy`)."""


#: Why ranks make different numbers of collective calls, for the errors that find it out.
UNEVEN_STEPS = ("the ranks ran different numbers of steps or batches, e.g. a dataset split "
                "unevenly across ranks: use DistributedSampler (it gives every rank the same "
                "number of samples), drop_last=True, or the same number of batches on every "
                "rank")
FORWARD_ON_SOME_RANKS = (
    "a forward of the DistributedDataParallel wrapper on some ranks only, e.g. `if rank == "
    "0: ddp(x)` for validation (with buffers, BatchNorm's, each forward broadcasts them: a "
    "collective): evaluate on one rank with ddp.module(x), or call ddp(x) on every rank")


def rank_list(ranks: list[int]) -> str:
    """``rank 2``, ``ranks 0 and 2``, ``ranks 0, 1 and 3``."""
    names = [str(r) for r in ranks]
    if len(names) == 1:
        return f"rank {names[0]}"
    return f"ranks {', '.join(names[:-1])} and {names[-1]}"


class Work:
    """Handle of an operation that was started (PyTorch's ``Work``): ``wait()`` before using
    its result.

    A Work holds the arrays the operation reads and writes until it has completed. MPI and
    NCCL write into them in the background: a temporary tensor (``all_reduce(t * 5,
    async_op=True)``), once freed, would have its memory handed to the next array NumPy or
    CuPy makes, which would then receive the result. Its group keeps it too until it has
    completed (:meth:`ProcessGroup.complete`): a handle the program dropped still completes,
    with its averaging and copies out, at the latest when a later collective is waited for,
    at a barrier or when the group is destroyed, as PyTorch's process groups keep their
    work. Collectives complete in the order they were started; point-to-point operations
    (``ordered=False``) each on its own.
    """

    def __init__(self, group: ProcessGroup, what: str, keep: Any = None,
                 ordered: bool = True) -> None:
        self.group, self.what, self.ordered = group, what, ordered
        self._keep: list[Any] = [keep]
        self._then: list[Any] = []
        self.completed = False

    def then(self, fn: Any = None, keep: Any = None) -> Work:
        """Run ``fn()`` once the operation has completed (a copy out of a staging buffer, an
        average), keeping ``keep`` alive until then. Returns this Work."""
        if fn is not None:
            self._then.append(fn)
        self._keep.append(keep)
        return self

    def wait(self) -> bool:
        """Block until the operation has completed (``mpi``), or make the current CUDA stream
        wait for it (``nccl``; the host does not block); the collectives the group started
        before it complete first. Returns True, as PyTorch's."""
        self.group.complete(self)
        return True

    def is_completed(self) -> bool:
        """True once the operation has completed (then its result is in place)."""
        if not self.completed and self._test():
            self._finish()
        return self.completed

    def _finish(self) -> None:
        self.completed = True
        then, self._then, self._keep = self._then, [], []
        for fn in then:
            fn()

    # the backend's part
    def _test(self) -> bool:
        """Has it completed? Never blocks."""
        raise NotImplementedError

    def _block(self) -> None:
        """Return once it has completed (``nccl``: once the current stream waits for it)."""
        raise NotImplementedError


class ProcessGroup:
    """The ranks of one job and the collectives between them (see the module docstring).

    Attributes:
        backend: ``"mpi"`` or ``"nccl"``.
        device: where the arrays must live: ``"cpu"`` (mpi) or ``"cuda"`` (nccl).
        rank, world_size: this process's rank and the number of processes.
        local_rank, local_size: the same among the processes of this machine (MPI's
            shared-memory split), which choose this rank's GPU or share of the CPU cores.
        comm: the MPI communicator of the data collectives (also used by the nccl backend,
            for the rendezvous).
        check_comm: a duplicate of it for :meth:`allgather_object` (the checks).
        timeout: seconds a collective waits in ``wait()`` before raising (``mpi`` backend,
            and the nccl backend's MPI calls; NCCL's own run on the GPU).
    """

    backend = ""
    device = ""
    dtypes: tuple[str, ...] = ()
    collectives = 0  # collectives this rank started, barriers aside (compared by the checks)

    def __init__(self, comm: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        from mpi4py import MPI

        self.comm, self.timeout = comm, float(timeout)
        self.rank, self.world_size = comm.Get_rank(), comm.Get_size()
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        local.Free()
        self.check_comm = comm.Dup()
        self.departures = _Departures(comm) if self.world_size > 1 else None
        self.in_flight: list[Work] = []  # started, not known to be completed (see Work)
        self.abandoned: list[Work] = []  # in flight when one failed: their arrays stay alive

    # the collectives, on raw arrays of this backend's device (checked by the callers)
    def all_reduce(self, array: Any, op: str = "sum") -> Work:
        raise NotImplementedError

    def reduce(self, array: Any, dst: int, op: str = "sum") -> Work:
        """``all_reduce``, but the result lands on rank ``dst`` only (the others' ``array``
        is left as it was)."""
        raise NotImplementedError

    def broadcast(self, array: Any, src: int = 0) -> Work:
        raise NotImplementedError

    def all_gather(self, array: Any, out: Any) -> Work:
        """``out`` (contiguous, ``world_size * array.size`` elements) gets every rank's
        ``array`` one after the other, in rank order."""
        raise NotImplementedError

    def gather(self, array: Any, out: Any | None, dst: int) -> Work:
        """``all_gather`` into rank ``dst``'s ``out`` only (None on the other ranks)."""
        raise NotImplementedError

    def scatter(self, stack: Any | None, out: Any, src: int) -> Work:
        """Rank ``r``'s ``out`` gets part ``r`` of rank ``src``'s ``stack`` (contiguous,
        ``world_size * out.size`` elements; None on the other ranks)."""
        raise NotImplementedError

    def send(self, array: Any, dst: int, tag: int = 0) -> Work:
        """Send ``array`` to rank ``dst`` (point-to-point: only that rank takes part)."""
        raise NotImplementedError

    def recv(self, array: Any, src: int | None, tag: int = 0) -> Work:
        """Receive into ``array`` from rank ``src`` (None: any rank); once it completed, the
        Work's ``source`` is the sender's rank."""
        raise NotImplementedError

    def reduce_scatter(self, array: Any, out: Any, op: str = "sum") -> Work:
        """Rank ``r``'s ``out`` gets part ``r`` of the reduction of every rank's ``array``
        (contiguous, ``world_size * out.size`` elements)."""
        raise NotImplementedError

    def all_to_all(self, array: Any, out: Any, send_counts: list[int],
                   recv_counts: list[int]) -> Work:
        """Rank ``r`` sends ``send_counts[q]`` elements of ``array`` (the parts one after the
        other, in rank order) to each rank ``q``, and receives ``recv_counts[q]`` from each
        into ``out``, in rank order."""
        raise NotImplementedError

    def batch(self) -> contextlib.AbstractContextManager:
        """A context in which sends and receives are started as one batch
        (``batch_isend_irecv``): nothing to do for MPI, one NCCL group for nccl."""
        return contextlib.nullcontext()

    def monitored_barrier(self, timeout: float, wait_all_ranks: bool = False) -> None:
        """PyTorch's ``monitored_barrier``: every rank sends rank 0 a message on the check
        communicator; rank 0 waits at most ``timeout`` s for all of them, then answers each,
        or raises naming the ranks that did not arrive (the first only, unless
        ``wait_all_ranks``). The others wait for the answer a little longer (rank 0's error
        comes first), then raise."""
        self.complete()
        what = f"monitored_barrier() on rank {self.rank} of {self.world_size}"
        token = np.zeros(max(self.world_size, 1), dtype=np.uint8)
        if self.rank == 0:
            waiting = {r: _mpi_call(self, what, self.check_comm.Irecv, token[r:r + 1], r,
                                    _MONITORED_TAG) for r in range(1, self.world_size)}
            _poll(waiting, time.monotonic() + timeout)
            if waiting:
                for request in waiting.values():
                    request.Cancel()
                    request.Wait()
                missing = sorted(waiting) if wait_all_ranks else sorted(waiting)[:1]
                names = ", ".join(str(r) for r in missing)
                raise CollectiveTimeout(
                    f"[Rank 0]: Rank{'s' if wait_all_ranks else ''} {names} failed to pass "
                    f"monitoredBarrier in {round(timeout * 1000)} ms")
            answers = [_mpi_call(self, what, self.check_comm.Isend, token[:1], r,
                                 _MONITORED_TAG) for r in range(1, self.world_size)]
            _poll(dict(enumerate(answers)), time.monotonic() + timeout)
            return
        arrived = _mpi_call(self, what, self.check_comm.Isend, token[:1], 0, _MONITORED_TAG)
        answer = {0: _mpi_call(self, what, self.check_comm.Irecv, token[1:2], 0,
                               _MONITORED_TAG)}
        _poll(answer, time.monotonic() + timeout + LEAVE_GRACE)
        if answer:
            raise CollectiveTimeout(
                f"Rank {self.rank} successfully reached monitoredBarrier, but rank 0 did not "
                f"answer within {round(timeout * 1000)} ms: rank 0 names the ranks that did "
                "not arrive (or it did not arrive itself)")
        arrived.Wait()

    def _track(self, work: Work) -> Work:
        """Keep ``work`` until it has completed (forgetting those that completed meanwhile)."""
        self.in_flight = [w for w in self.in_flight if not w.is_completed()]
        self.in_flight.append(work)
        return work

    def complete(self, upto: Work | None = None) -> None:
        """Complete what is in flight: the collectives in the order they were started, up to
        ``upto`` (None: all of them); a point-to-point ``upto`` (or one the group does not
        keep) alone. A failure (a peer left, the timeout) abandons everything in flight: it
        cannot complete either, and waiting for each would take another timeout; its arrays
        stay allocated, since MPI may still write into them."""
        if upto is not None and (not upto.ordered or upto not in self.in_flight):
            todo = [upto]
        else:
            todo = [w for w in self.in_flight if w.ordered]
            if upto is not None:
                todo = todo[: todo.index(upto) + 1]
        try:
            for work in todo:
                if not work.completed:
                    work._block()
                    work._finish()
        except CollectiveError:
            self.abandoned += self.in_flight
            self.in_flight = []
            raise
        self.in_flight = [w for w in self.in_flight if not w.completed]

    def barrier(self) -> Work:
        """Every rank waits until every rank has arrived; what this rank started before
        completes first (as gloo's barrier)."""
        self.complete()
        return self._track(_MPIWork(_mpi_call(self, "barrier()", self.comm.Ibarrier), self,
                                    "barrier()"))

    def allgather_object(self, obj: Any, what: str = "allgather_object") -> list[Any]:
        """Every rank's ``obj`` (small, picklable), in rank order: for checks, not data.

        ``what`` names the call it serves: ranks that pass different ``what`` (they made
        different calls) raise on every rank, listing each rank's. It runs on ``check_comm``,
        so it is never matched with another rank's data collective (a rank that is in one
        makes it wait, then raise). Two non-blocking collectives (the pickles' sizes, then
        the pickles) waited for like the others, so that a rank that never calls it is an
        error after the timeout, not a hang (mpi4py's ``comm.allgather`` blocks in C)."""
        from mpi4py import MPI

        mine = np.frombuffer(pickle.dumps((what, obj)), dtype=np.uint8)
        if mine.size > MAX_OBJECT_BYTES:
            raise ValueError(f"{what} on rank {self.rank}: objects sent between ranks must be "
                             f"small (at most {MAX_OBJECT_BYTES} bytes pickled); this one "
                             f"pickles to {mine.size} bytes: send arrays as tensors")
        sizes = np.zeros(self.world_size, dtype=np.int32)
        _MPIWork(_mpi_call(self, what, self.check_comm.Iallgather,
                           np.array([mine.size], dtype=np.int32), sizes), self, what,
                 ordered=False).wait()
        _check_object_sizes(sizes, f"{what} on rank {self.rank} of {self.world_size}")
        starts = np.concatenate([[0], np.cumsum(sizes[:-1])]).astype(np.int32)
        everyone = np.empty(int(sizes.sum()), dtype=np.uint8)
        _MPIWork(_mpi_call(self, what, self.check_comm.Iallgatherv, mine,
                           [everyone, (sizes, starts), MPI.BYTE]), self, what,
                 ordered=False).wait()
        gathered = [pickle.loads(everyone[a:a + n].tobytes()) for a, n in zip(starts, sizes)]
        if any(call != what for call, _ in gathered):
            listing = "; ".join(f"rank {r}: {call}" for r, (call, _) in enumerate(gathered))
            raise RuntimeError(f"{what} (rank {self.rank} of {self.world_size}): the ranks made "
                               f"different collective calls ({listing}); every rank must make "
                               "the same calls in the same order, with the same shape, dtype "
                               "and arguments")
        return [o for _, o in gathered]

    def stall_timer(self) -> StallTimer:
        """A timer for the time this rank is held up waiting for communication."""
        return StallTimer()

    def destroy(self, rendezvous: bool = True, at_exit: bool = False) -> None:
        """Leave the group: complete the collectives in flight, tell every peer and wait (at
        most ``timeout``) until every peer has said it leaves too, then free the
        communicators. ``rendezvous=False`` (a group refused right after it was made) tells
        nobody and waits for nobody; ``at_exit``: the program ended without destroying it
        (the peers' errors say so)."""
        try:
            if rendezvous:
                self.complete()
        finally:
            if self.departures is not None:
                self.departures.leave(self.timeout if rendezvous else None,
                                      LEFT_AT_EXIT if at_exit else LEFT_BY_DESTROY,
                                      self.collectives)
            self.check_comm.Free()
            self.comm.Free()
        if rendezvous and self.departures is not None:
            self._compare_counts(at_exit)

    def _compare_counts(self, at_exit: bool) -> None:
        """Every rank's notice carries the number of collectives it started (no extra
        message): different numbers mean that a collective some ranks made was completed
        without the others (MPI's broadcast completes at its root once the data has gone)
        or was paired with another call of theirs, silently. PyTorch's gloo would wait for
        the missing call until its timeout; here every rank raises, naming the counts."""
        counts = {self.rank: self.collectives, **self.departures.counts}
        if len(set(counts.values())) < 2:
            return
        listing = ", ".join(f"rank {r}: {n}" for r, n in sorted(counts.items()))
        where = ("at exit (the program ended without destroy_process_group())" if at_exit
                 else "destroy_process_group()")
        raise UnevenCollectives(
            f"{where} on rank {self.rank} of {self.world_size}: the ranks made different "
            f"numbers of collective calls ({listing}; DistributedDataParallel's buffer "
            "broadcasts and gradient all-reduces count). A call that only some ranks made "
            "was completed without the others or paired with a later call of theirs, so "
            "the ranks may hold different values (e.g. BatchNorm's running statistics). "
            f"Common causes: {FORWARD_ON_SOME_RANKS}; or {UNEVEN_STEPS}")

    def describe(self, array: Any) -> str:
        return f"{array.dtype} {list(array.shape)}"


#: The tag of monitored_barrier's messages (on the check communicator, which carries no
#: other point-to-point message).
_MONITORED_TAG = 77


def _poll(requests: dict[int, Any], deadline: float) -> None:
    """Test ``requests`` until all have completed (each is removed) or ``deadline``."""
    while requests and time.monotonic() < deadline:
        for key in [k for k, request in requests.items() if request.Test()]:
            del requests[key]
        if requests:
            time.sleep(0.001)


def _check_object_sizes(sizes: np.ndarray, where: str) -> None:
    """The ranks' pickle sizes, as gathered by ``allgather_object``, before anything is
    allocated from them: each must be a check's (positive, at most MAX_OBJECT_BYTES); other
    bytes mean that another kind of call answered."""
    bad = [(r, int(n)) for r, n in enumerate(sizes) if not 0 < n <= MAX_OBJECT_BYTES]
    if bad:
        raise RuntimeError(f"{where}: rank {bad[0][0]} sent a size of {bad[0][1]} bytes, not "
                           f"one of a check's object (1 to {MAX_OBJECT_BYTES}): the ranks' calls "
                           "on the check communicator do not match")


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

        what = f"all_reduce(op={op!r}) of {self.describe(array)}"
        return self._start(what, self.comm.Iallreduce, MPI.IN_PLACE, array,
                           _mpi_op(op, array), finish=self._average(array, op))

    def reduce(self, array: np.ndarray, dst: int, op: str = "sum") -> Work:
        from mpi4py import MPI

        what = f"reduce(dst={dst}, op={op!r}) of {self.describe(array)}"
        if self.rank != dst:
            return self._start(what, self.comm.Ireduce, array, None, _mpi_op(op, array), dst)
        return self._start(what, self.comm.Ireduce, MPI.IN_PLACE, array, _mpi_op(op, array),
                           dst, finish=self._average(array, op))

    def broadcast(self, array: np.ndarray, src: int = 0) -> Work:
        what = f"broadcast(src={src}) of {self.describe(array)}"
        return self._start(what, self.comm.Ibcast, array, src)

    def all_gather(self, array: np.ndarray, out: np.ndarray) -> Work:
        what = f"all_gather of {self.describe(array)}"
        return self._start(what, self.comm.Iallgather, array, out)

    def gather(self, array: np.ndarray, out: np.ndarray | None, dst: int) -> Work:
        what = f"gather(dst={dst}) of {self.describe(array)}"
        return self._start(what, self.comm.Igather, array, out, dst)

    def scatter(self, stack: np.ndarray | None, out: np.ndarray, src: int) -> Work:
        what = f"scatter(src={src}) of {self.describe(out)}"
        return self._start(what, self.comm.Iscatter, stack, out, src)

    def reduce_scatter(self, array: np.ndarray, out: np.ndarray, op: str = "sum") -> Work:
        what = f"reduce_scatter(op={op!r}) of {self.describe(array)}"
        return self._start(what, self.comm.Ireduce_scatter_block, array, out,
                           _mpi_op(op, array), finish=self._average(out, op))

    def all_to_all(self, array: np.ndarray, out: np.ndarray, send_counts: list[int],
                   recv_counts: list[int]) -> Work:
        what = f"all_to_all of {self.describe(array)}"
        send, recv = np.asarray(send_counts, np.int64), np.asarray(recv_counts, np.int64)
        starts = [np.concatenate([[0], np.cumsum(c[:-1])]) for c in (send, recv)]
        return self._start(what, self.comm.Ialltoallv, [array, (send, starts[0])],
                           [out, (recv, starts[1])])

    def send(self, array: np.ndarray, dst: int, tag: int = 0) -> Work:
        what = f"send(dst={dst}, tag={tag}) of {self.describe(array)}"
        request = _mpi_call(self, what, self.comm.Isend, array, dst, tag)
        return self._track(_MPIWork(request, self, what, keep=array, ordered=False,
                                    peers=[dst]))

    def recv(self, array: np.ndarray, src: int | None, tag: int = 0) -> Work:
        from mpi4py import MPI

        what = f"recv(src={src}, tag={tag}) of {self.describe(array)}"
        request = _mpi_call(self, what, self.comm.Irecv, array,
                            MPI.ANY_SOURCE if src is None else src, tag)
        return self._track(_MPIWork(request, self, what, keep=array, ordered=False,
                                    peers=None if src is None else [src], any_peer=src is None))

    def _start(self, what: str, fn: Any, *args: Any, finish: Any = None) -> Work:
        """Start one of MPI's non-blocking collectives (counted for the call checks); its
        Work keeps the arguments (the arrays) alive until it has completed."""
        self.collectives += 1
        work = _MPIWork(_mpi_call(self, what, fn, *args), self, what, keep=args)
        return self._track(work.then(finish))

    def _average(self, array: np.ndarray, op: str) -> Any:
        """MPI has no average: sum, then divide once the sum has arrived (as NCCL's
        ncclAvg)."""
        if op == "avg":
            return lambda: np.true_divide(array, self.world_size, out=array)
        return None


def _mpi_op(op: str, array: np.ndarray) -> Any:
    """MPI's operation for ``op`` ("avg" sums; the group divides afterwards)."""
    from mpi4py import MPI

    if op in ("max", "min") and array.dtype.kind == "f":
        return _nan_propagating(op)
    return {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
            "product": MPI.PROD, "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR}[op]


_NAN_OPS: dict[str, Any] = {}


def _nan_propagating(op: str) -> Any:
    """MPI's MAX / MIN for floats, as PyTorch's: NaN wherever a rank has one. MPI's own
    compare with ``>``, so a NaN is kept or dropped by the order of the operands, which
    differs from rank to rank: the ranks would end with different values."""
    if op not in _NAN_OPS:
        from mpi4py import MPI
        from mpi4py.util import dtlib

        ufunc = np.maximum if op == "max" else np.minimum  # (these propagate NaN)

        def reduce(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
            dtype = dtlib.to_numpy_dtype(datatype)
            out = np.frombuffer(inoutbuf, dtype=dtype)
            ufunc(np.frombuffer(inbuf, dtype=dtype), out, out=out)

        _NAN_OPS[op] = MPI.Op.Create(reduce, commute=True)
    return _NAN_OPS[op]


#: What a rank's "leaving" notice says (its one byte): how it left.
LEFT_BY_DESTROY, LEFT_AT_EXIT = 1, 2


class _Departures:
    """The "leaving" notices of a group (see the module docstring), on a communicator of
    their own: a receive posted at the start for every peer, one send to each at the end.
    The notice's byte says how the rank left: :data:`LEFT_BY_DESTROY` (its program called
    ``destroy_process_group()``) or :data:`LEFT_AT_EXIT` (its program ended without it)."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm.Dup()
        me = comm.Get_rank()
        self.peers = [r for r in range(comm.Get_size()) if r != me]
        self._inbox = np.zeros((len(self.peers), 2), dtype=np.int64)  # (how, collectives)
        self._outbox = np.array([LEFT_BY_DESTROY, 0], dtype=np.int64)
        self._receives = {r: self.comm.Irecv(self._inbox[i], source=r)
                          for i, r in enumerate(self.peers)}
        self.left: dict[int, float] = {}  # rank -> when its notice was seen (time.monotonic)
        self.how: dict[int, int] = {}  # rank -> its notice (LEFT_BY_DESTROY or LEFT_AT_EXIT)
        self.counts: dict[int, int] = {}  # rank -> the collectives it had started by then
        self._next_check = 0.0

    def poll(self, every: float = 0.005) -> dict[int, float]:
        """The peers that left so far; tests the receives at most once per ``every`` s."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + every
            for r in [r for r, request in self._receives.items() if request.Test()]:
                del self._receives[r]
                self.left[r] = now
                self.how[r], self.counts[r] = (int(v) for v in self._inbox[self.peers.index(r)])
        return self.left

    def leave(self, timeout: float | None, how: int = LEFT_BY_DESTROY,
              collectives: int = 0) -> None:
        """Send this rank's notice (``how`` it leaves, and how many ``collectives`` it
        started) to every peer and wait until every peer's has come and the sends are done,
        for at most ``timeout`` s (None: send nothing, wait for no one). Then cancel what
        remains, so that no request is left pending, and free."""
        self._outbox[:] = how, collectives
        sends = ([] if timeout is None else
                 [self.comm.Isend(self._outbox, dest=r) for r in self.peers])
        deadline = time.monotonic() + (timeout or 0.0)
        while (self._receives or sends) and time.monotonic() < deadline:
            self.poll(every=0.0)
            sends = [s for s in sends if not s.Test()]
            if self._receives or sends:
                time.sleep(0.001)  # may last long (a peer writing a checkpoint): no spinning
        for request in self._receives.values():
            request.Cancel()
            request.Wait()
        for request in sends:  # (a send is freed once it completes)
            request.Cancel()
            request.Free()
        self._receives = {}
        self.comm.Free()


class _MPIWork(Work):
    """An MPI request; ``wait()`` polls it, so that signals (Ctrl-C) are handled meanwhile,
    and yields the core between polls (on a machine with more busy threads than cores, a
    spinning rank would take time from the rank it waits for).

    ``peers``: the ranks it waits for (None: every rank; ``any_peer``: any one of them, a
    receive from any source). Once it has completed, ``source`` is the rank a receive got
    its message from."""

    def __init__(self, request: Any, group: ProcessGroup, what: str, keep: Any = None,
                 ordered: bool = True, peers: list[int] | None = None,
                 any_peer: bool = False) -> None:
        from mpi4py import MPI

        super().__init__(group, what, keep, ordered)
        self.request, self.peers, self.any_peer = request, peers, any_peer
        self.status = MPI.Status()
        self.source: int | None = None

    def _test(self) -> bool:
        if _mpi_call(self.group, self.what, self.request.Test, self.status):
            self.source = self.status.Get_source()
            return True
        return False

    def _block(self) -> None:
        g = self.group
        start = time.monotonic()
        deadline, stall = start + g.timeout, start + STALL_NOTICE
        while not self._test():
            now = time.monotonic()
            if now > stall and g.timeout > STALL_NOTICE:  # once: say why it is quiet
                stall = float("inf")
                print(f"tinytrain.distributed: rank {g.rank} of {g.world_size} has waited "
                      f"{STALL_NOTICE:g} s in {self.what}; if another rank is in a different "
                      "collective (e.g. it ran a different number of batches), this waits "
                      f"until the timeout ({g.timeout:g} s). Every rank must make the same "
                      "collective calls in the same order", file=sys.stderr, flush=True)
            left = self._peers_gone()
            if left and (now > min(left.values()) + LEAVE_GRACE or now > deadline):
                raise PeerLeft(self._gone_message(sorted(left)))
            if now > deadline:
                raise CollectiveTimeout(
                    f"{self.what} on rank {g.rank} of {g.world_size} ({g.backend} backend) did "
                    f"not complete within {g.timeout:g} s: another rank has not called it (it "
                    "hangs, or took another path, e.g. it ran a different number of batches "
                    "and is in another collective; every rank must make the same collective "
                    "calls in the same order). init_process_group(timeout=...) sets the limit"
                    + ("; dist.monitored_barrier() names the ranks that do not arrive"
                       if self.what.startswith("barrier()") else ""))
            _yield()

    def _peers_gone(self) -> dict[int, float]:
        """The ranks it waits for that have left (all of them, for ``any_peer``)."""
        g = self.group
        left = g.departures.poll() if g.departures is not None else {}
        if self.peers is None and not self.any_peer:
            return left
        needed = self.peers if self.peers is not None else \
            [r for r in range(g.world_size) if r != g.rank]
        gone = {r: t for r, t in left.items() if r in needed}
        return gone if not self.any_peer or len(gone) == len(needed) else {}

    def _gone_message(self, gone: list[int]) -> str:
        g = self.group
        one = len(gone) == 1
        ranks = rank_list(gone)
        at_exit = g.departures.how.get(gone[0]) == LEFT_AT_EXIT
        how = ((f"{'its program' if one else 'their programs'} ended without "
                f"destroy_process_group(): at {'its' if one else 'their'} last line, sys.exit() "
                "or exit()") if at_exit
               else f"{'it' if one else 'they'} called destroy_process_group()")
        message = (f"{self.what} on rank {g.rank} of {g.world_size} ({g.backend} backend) "
                   f"cannot complete: {ranks} left the group ({how}) while this rank waits "
                   f"for {'it' if one else 'them'} here. ")
        if self.peers is not None or self.any_peer:  # a send or receive
            return message + ("Every send needs a matching receive on its peer, and every "
                              "receive a send")
        if at_exit:
            return message + (f"If {ranks} stopped on purpose or on an error, "
                              f"{'its' if one else 'their'} own output says why; if "
                              f"{'it' if one else 'they'} simply finished, {UNEVEN_STEPS}; or "
                              f"{FORWARD_ON_SOME_RANKS}")
        return message + f"Likely cause: {UNEVEN_STEPS}; or {FORWARD_ON_SOME_RANKS}"


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
