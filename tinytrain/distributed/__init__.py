"""Data-parallel training across processes: process groups, collectives, DDP (chapter 7).

    mpiexec -n 2 python train.py          # or: python -m tinytrain.train --nproc 2

    import tinytrain.distributed as dist
    dist.init_process_group("mpi")        # "nccl" for one GPU per rank
    model = dist.DistributedDataParallel(model)
    ...                                   # the usual loop; gradients are averaged in backward

The functions follow ``torch.distributed``: tensors are reduced in place, ``async_op=True``
returns a :class:`Work` whose ``wait()`` makes the result usable. Differences: processes are
always started by MPI (there is no ``torchrun``), ops are strings (``"sum"``, ``"avg"``,
``"max"``, ``"min"``; :class:`ReduceOp` has the PyTorch names), and there is only one group.
"""

from __future__ import annotations

import atexit
import datetime
import faulthandler
import numbers
import sys
from typing import Any

from tinytrain import _missing
from tinytrain.distributed.ddp import DistributedDataParallel
from tinytrain.distributed.launch import abort_on_uncaught_exception, aborting
from tinytrain.distributed.process_group import (
    DEFAULT_TIMEOUT,
    OPS,
    MPIGroup,
    ProcessGroup,
    ReduceOp,
    Work,
    share_cpu_cores,
)
from tinytrain.tensor import Tensor

_group: ProcessGroup | None = None


def is_available() -> bool:
    """True when mpi4py (and so an MPI library) can be imported."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def _rendezvous_waiting_for_every_rank(backend: str, timeout: float) -> ProcessGroup:
    """MPI's initialisation and the group's set-up wait, inside MPI's C code, for every
    rank to arrive; a rank that failed before it would leave the others there forever. A
    watchdog that needs no Python (``faulthandler``'s) ends this process after ``timeout``
    with the stack, where this function's name says what it waited for; the launcher then
    stops the others. (It replaces a ``faulthandler.dump_traceback_later`` of the caller's.)"""
    faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
    try:
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise RuntimeError("tinytrain.distributed needs MPI: pip install mpi4py mpich "
                               f"({exc})") from None
        abort_on_uncaught_exception()
        comm = MPI.COMM_WORLD.Dup()
        if backend == "nccl":
            from tinytrain.distributed.nccl import NCCLGroup

            return NCCLGroup(comm, timeout=timeout)
        return MPIGroup(comm, timeout=timeout)
    finally:
        faulthandler.cancel_dump_traceback_later()


def is_initialized() -> bool:
    return _group is not None


def init_process_group(backend: str | None = "mpi", init_method: str | None = None,
                       timeout: datetime.timedelta | float | None = None,
                       world_size: int = -1, rank: int = -1) -> ProcessGroup:
    """Join the job's processes (started by ``mpiexec``) as one group; returns it.

    ``backend="mpi"`` (or None) reduces NumPy tensors through MPI; ``"nccl"`` CuPy tensors
    through NCCL, each rank on the GPU of its local rank. ``"gloo"``, PyTorch's CPU backend
    (the one its CPU tutorials use), means ``"mpi"`` here: both reduce CPU tensors. Also:
    an uncaught exception in any rank now aborts every rank, and each rank gets its share of
    the CPU cores (``tt.set_num_threads``, unless the program set a number itself). A
    single process (no mpiexec) is a group of one.

    MPI says which rank each process is and how many there are: ``world_size`` and ``rank``,
    PyTorch's arguments, may be given (a script written for ``torchrun`` passes them) but
    must agree with it; ``init_method`` may be None or ``"env://"`` (there is nothing else
    to rendezvous through).

    ``timeout`` (a ``timedelta`` or seconds; default 30 minutes, as PyTorch's CPU backends):
    how long a rank waits in a collective for the others before it raises an error that
    names the collective and the rank (which then stops every rank). It covers the ``mpi``
    backend's collectives and barriers; NCCL's own collectives run on the GPU.
    """
    global _group
    if _group is not None:
        raise RuntimeError("init_process_group() was already called in this process")
    backend = "mpi" if backend in (None, "gloo") else backend
    if init_method not in (None, "env://"):
        raise ValueError(f"init_process_group: init_method={init_method!r} is not supported: "
                         "the processes are started and found by mpiexec (leave it out)")
    if backend not in ("mpi", "nccl"):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; use 'mpi' (CPU "
                         "tensors; 'gloo' is taken as 'mpi') or 'nccl' (GPU tensors)")
    seconds = (DEFAULT_TIMEOUT if timeout is None else timeout.total_seconds()
               if isinstance(timeout, datetime.timedelta) else timeout)
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta or a "
                        f"number of seconds, got {timeout!r}")
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    g = _rendezvous_waiting_for_every_rank(backend, float(seconds))
    for name, given, actual in (("world_size", world_size, g.world_size),
                                ("rank", rank, g.rank)):
        if given not in (-1, None) and given != actual:
            g.destroy(rendezvous=False)  # the other ranks may never get this far
            raise ValueError(f"init_process_group: {name}={given} was passed, but mpiexec "
                             f"started this process as rank {g.rank} of {g.world_size} (leave "
                             f"{name} out: MPI decides it)")
    _group = g
    share_cpu_cores(_group.local_size)
    atexit.register(_destroy_at_exit)
    return _group


def destroy_process_group() -> None:
    """Leave the group: tell the other ranks, wait until they leave too (at a normal end they
    all do; at most the group's timeout), free the communicators. Collectives fail
    afterwards. It runs at exit when the program did not call it, so a rank that ends while
    another still waits for it in a collective makes that rank raise at once (see
    :mod:`tinytrain.distributed.process_group`), not after the timeout."""
    global _group
    if _group is not None:
        group, _group = _group, None
        group.destroy()


def _destroy_at_exit() -> None:
    if not aborting():  # after an error a peer may be gone: freeing could wait for it
        destroy_process_group()


def group(what: str = "this call") -> ProcessGroup:
    """The process group, or an error saying that ``init_process_group`` comes first."""
    if _group is None:
        raise RuntimeError(f"{what} needs a process group: call "
                           "tinytrain.distributed.init_process_group() first")
    return _group


def get_rank() -> int:
    return group("get_rank()").rank


def get_world_size() -> int:
    return group("get_world_size()").world_size


def get_local_rank() -> int:
    """This rank's index among the processes of its machine (its GPU with nccl)."""
    return group("get_local_rank()").local_rank


def get_backend() -> str:
    return group("get_backend()").backend


def _array(tensor: Any, what: str, bytes_of_bool: bool = False) -> Any:
    """The tensor's raw array, after checking that this backend can communicate it
    (``bytes_of_bool``: a bool tensor's array viewed as uint8, sharing its memory)."""
    g = group(what)
    where = f"{what} on rank {g.rank}"
    if not isinstance(tensor, Tensor):
        hint = ("; pass the Tensor itself (p.grad, not p.grad.data: tinytrain's .data is the "
                "raw array)" if hasattr(tensor, "dtype") else "")
        raise TypeError(f"{where}: expected a tinytrain Tensor, got "
                        f"{type(tensor).__name__}{hint}")
    if tensor.device != g.device:
        raise RuntimeError(
            f"{where}: the {g.backend} backend communicates {g.device} tensors, but this one "
            f"is on {tensor.device}; move it with .to({g.device!r})")
    array = tensor.data.view("uint8") if bytes_of_bool else tensor.data
    if array.dtype.name not in g.dtypes:
        raise TypeError(f"{where}: dtype {array.dtype} is not supported by the {g.backend} "
                        f"backend (supported: {', '.join(g.dtypes)})")
    if not array.flags.c_contiguous:
        raise ValueError(f"{where}: the tensor of shape {tensor.shape} is not contiguous; "
                         "communicate a contiguous copy")
    return array


def _same_call_on_every_rank(what: str, array: Any | None) -> None:
    """Raise, on every rank at once, if the ranks did not all make this same call.

    MPI does not check: an all-reduce of 4 floats on one rank and 6 on another, of float32
    against float64, or a "sum" against a "max", returns garbage on each rank without an
    error. So the user-facing collectives first compare what each rank asked for (one small
    all-gather, ~0.1 ms, which compares the calls). DistributedDataParallel's bucket
    all-reduces skip this: their layout is checked once, when the model is wrapped. The
    check runs on a communicator of its own, so a rank still in a bucket's all-reduce makes
    it wait (then time out, or fail at once when that rank left), never match.

    Each rank also says how many collectives it has started so far (DDP's buckets
    included): under NCCL a rank that ran one batch fewer would reach this call while the
    other's last bucket all-reduce is still queued on its GPU, and NCCL would pair the two
    (a metric summed with gradients, silently); different counts raise instead."""
    g = group(what)
    counts = g.allgather_object(
        g.collectives, what=what if array is None else f"{what} of {g.describe(array)}")
    if len(set(counts)) > 1:
        listing = ", ".join(f"rank {r}: {n}" for r, n in enumerate(counts))
        raise RuntimeError(
            f"{what} (rank {g.rank} of {g.world_size}): the ranks have made different numbers "
            f"of collective calls before this one ({listing}; DistributedDataParallel's "
            "gradient all-reduces count): they ran different numbers of steps or batches, "
            "e.g. a dataset split unevenly across ranks: use DistributedSampler (the same "
            "number of samples on every rank), drop_last=True, or the same number of batches")


def all_reduce(tensor: Tensor, op: str = "sum", async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over all ranks, in place: every rank gets the sum (``"avg"``, ``"max"``,
    ``"min"``) of every rank's values. Same shape and dtype on every rank; any shape (a
    mismatch raises on every rank, naming each rank's call). A bool tensor, as in PyTorch:
    ``"sum"`` and ``"max"`` are a logical or, ``"min"`` a logical and (as 0/1 bytes).
    With ``async_op=True``, returns a :class:`Work`; the values are valid after ``wait()``."""
    if op not in OPS:
        raise ValueError(f"all_reduce: unknown op {op!r}; use one of {', '.join(OPS)}")
    boolean = isinstance(tensor, Tensor) and tensor.dtype == "bool"
    if boolean and op == "avg":
        raise TypeError(f"all_reduce(op='avg') on rank {get_rank()}: needs a floating-point "
                        "tensor, got bool")
    array = _array(tensor, f"all_reduce(op={op!r})", bytes_of_bool=boolean)
    if op == "avg" and array.dtype.kind != "f":
        raise TypeError(f"all_reduce(op='avg') on rank {get_rank()}: needs a floating-point "
                        f"tensor, got {array.dtype}")
    _same_call_on_every_rank(f"all_reduce(op={op!r})", tensor.data)  # bool says bool
    if boolean:  # the bytes are 0 or 1: or = max, and = min
        op = "min" if op == "min" else "max"
    work = group().all_reduce(array, op)
    if async_op:
        return work
    work.wait()
    return None


def broadcast(tensor: Tensor, src: int = 0, async_op: bool = False) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``, in place (the same
    ``src``, shape and dtype on every rank; a mismatch raises on every rank)."""
    g = group("broadcast")
    if not 0 <= src < g.world_size:
        raise ValueError(f"broadcast on rank {g.rank}: src={src} is not a rank of this group "
                         f"of {g.world_size}")
    array = _array(tensor, f"broadcast(src={src})")
    _same_call_on_every_rank(f"broadcast(src={src})", array)
    work = g.broadcast(array, src)
    if async_op:
        return work
    work.wait()
    return None


def barrier() -> None:
    """Wait until every rank has called ``barrier()`` (a rank that made another collective
    call instead raises on every rank, as for :func:`all_reduce`)."""
    g = group("barrier()")
    _same_call_on_every_rank("barrier()", None)
    g.barrier()


_ONLY = ("tinytrain.distributed has all_reduce, broadcast and barrier, on one group of every "
         "rank")
__getattr__ = _missing.module_getattr("tinytrain.distributed", {
    "all_gather": _ONLY + "; an all_gather is an all_reduce('sum') of a zero tensor in which "
                  "each rank fills its own slot",
    "all_gather_object": _ONLY + "; utils.sum_over_ranks adds numbers over the ranks",
    "reduce": _ONLY + "; all_reduce gives every rank the result",
    "new_group": "tinytrain.distributed has one group, of every rank",
    "get_process_group": "tinytrain.distributed has one group, of every rank",
    "launch": "start the ranks with mpiexec -n N python script.py (or python -m "
              "tinytrain.train --nproc N)",
    "run": "start the ranks with mpiexec -n N python script.py",
    "elastic": "start the ranks with mpiexec -n N python script.py",
}, offer=_ONLY)

__all__ = [
    "DistributedDataParallel", "ProcessGroup", "ReduceOp", "Work", "all_reduce", "barrier",
    "broadcast", "destroy_process_group", "get_backend", "get_local_rank", "get_rank",
    "get_world_size", "init_process_group", "is_available", "is_initialized",
]
