"""Data-parallel training across processes: process groups, collectives, DDP (chapter 7).

    mpiexec -n 2 python train.py          # or: python -m tinytrain.train --nproc 2

    import tinytrain.distributed as dist
    dist.init_process_group("mpi")        # "nccl" for one GPU per rank
    model = dist.DistributedDataParallel(model)
    ...                                   # the usual loop; gradients are averaged in backward

The functions follow ``torch.distributed``: tensors are reduced in place, ``async_op=True``
returns a :class:`Work` whose ``wait()`` makes the result usable. There are ``all_reduce``,
``reduce``, ``broadcast``, ``all_gather``, ``all_gather_into_tensor``, ``gather``,
``scatter``, ``all_gather_object``, ``broadcast_object_list``, ``gather_object``,
``scatter_object_list`` and ``barrier``. Differences:
processes are always started by MPI (there is no ``torchrun``), ops are strings (``"sum"``,
``"avg"``, ``"max"``, ``"min"``, ``"product"``; :class:`ReduceOp` has the PyTorch names), and
there is only one group (``group=`` may be None or that group).
"""

from __future__ import annotations

import atexit
import datetime
import faulthandler
import numbers
import sys
from typing import Any

from tinytrain import _missing
from tinytrain.backend import get_array_module
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


def _same_call_on_every_rank(what: str, array: Any | None, payload: Any = None) -> list[Any]:
    """Raise, on every rank at once, if the ranks did not all make this same call; return
    every rank's ``payload`` (small, picklable), which travels with the check.

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
    gathered = g.allgather_object(
        (g.collectives, payload), what=what if array is None else f"{what} of {g.describe(array)}")
    counts = [count for count, _ in gathered]
    if len(set(counts)) > 1:
        listing = ", ".join(f"rank {r}: {n}" for r, n in enumerate(counts))
        raise RuntimeError(
            f"{what} (rank {g.rank} of {g.world_size}): the ranks have made different numbers "
            f"of collective calls before this one ({listing}; DistributedDataParallel's "
            "gradient all-reduces count): they ran different numbers of steps or batches, "
            "e.g. a dataset split unevenly across ranks: use DistributedSampler (the same "
            "number of samples on every rank), drop_last=True, or the same number of batches")
    return [theirs for _, theirs in gathered]


def _the_group(given: Any, what: str) -> ProcessGroup:
    """The group, checking PyTorch's ``group=`` argument: None or the group itself."""
    g = group(what)
    if given is not None and given is not g:
        raise ValueError(f"{what} on rank {g.rank}: group={given!r} is not this job's group; "
                         "tinytrain.distributed has one group, of every rank: pass group=None")
    return g


def _root(g: ProcessGroup, what: str, name: str, rank: int | None, group_rank: int | None,
          default: int | None = 0) -> int:
    """PyTorch's ``src``/``dst`` and ``group_src``/``group_dst`` (the same rank here: there
    is one group): the rank, checked."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"{what} on rank {g.rank}: pass {name} or group_{name}, not both")
    rank = group_rank if rank is None else rank
    rank = default if rank is None else rank
    if rank is None:
        raise ValueError(f"{what} on rank {g.rank}: {name} is required (the rank that "
                         "receives the result)")
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or \
            not 0 <= rank < g.world_size:
        raise ValueError(f"{what} on rank {g.rank}: {name}={rank!r} is not a rank of this "
                         f"group of {g.world_size}")
    return int(rank)


def _reduction(tensor: Tensor, op: str, what: str) -> tuple[Any, str]:
    """The array to reduce and the backend's op. A bool tensor, as in PyTorch: ``"sum"``
    and ``"max"`` are a logical or, ``"min"`` and ``"product"`` a logical and, reduced as
    0/1 bytes."""
    if op not in OPS:
        raise ValueError(f"{what}: unknown op {op!r}; use one of {', '.join(OPS)}")
    boolean = isinstance(tensor, Tensor) and tensor.dtype == "bool"
    array = _array(tensor, f"{what}(op={op!r})", bytes_of_bool=boolean)
    if op == "avg" and (boolean or array.dtype.kind != "f"):
        raise TypeError(f"{what}(op='avg') on rank {get_rank()}: needs a floating-point "
                        f"tensor, got {'bool' if boolean else array.dtype}")
    if boolean:  # the bytes are 0 or 1: or = max, and = min
        op = "min" if op in ("min", "product") else "max"
    return array, op


def _finish(work: Work, async_op: bool) -> Work | None:
    if async_op:
        return work
    work.wait()
    return None


class _Then(Work):
    """A collective's :class:`Work`, then ``then()`` once it has been waited for (copies
    out of a staging buffer); it keeps ``keep`` (the buffers the collective reads or writes)
    alive until then. Under nccl the copies run on the current stream, after it waited for
    the collective."""

    def __init__(self, work: Work, then: Any = None, keep: Any = None) -> None:
        self.work, self.then, self.keep = work, then, keep
        self.done = False

    def wait(self) -> None:
        if not self.done:
            self.work.wait()
            if self.then is not None:
                self.then()
            self.done, self.then, self.keep = True, None, None

    def is_completed(self) -> bool:
        if not self.done and self.work.is_completed():
            self.wait()
        return self.done


def all_reduce(tensor: Tensor, op: str = "sum", group: Any = None,
               async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over all ranks, in place: every rank gets the sum (``"avg"``, ``"max"``,
    ``"min"``, ``"product"``) of every rank's values. Same shape and dtype on every rank; any
    shape (a mismatch raises on every rank, naming each rank's call). A bool tensor, as in
    PyTorch: ``"sum"`` and ``"max"`` are a logical or, ``"min"`` and ``"product"`` a logical
    and. With ``async_op=True``, returns a :class:`Work`; the values are valid after
    ``wait()``."""
    g = _the_group(group, "all_reduce")
    array, op_used = _reduction(tensor, op, "all_reduce")
    _same_call_on_every_rank(f"all_reduce(op={op!r})", tensor.data)  # bool says bool
    return _finish(g.all_reduce(array, op_used), async_op)


def reduce(tensor: Tensor, dst: int | None = None, op: str = "sum", group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """As :func:`all_reduce`, but only rank ``dst`` gets the result, in its ``tensor``; the
    other ranks' ``tensor`` is left as it was (PyTorch promises nothing about it). ``dst``
    is required, as in PyTorch."""
    g = _the_group(group, "reduce")
    dst = _root(g, "reduce", "dst", dst, group_dst, default=None)
    array, op_used = _reduction(tensor, op, "reduce")
    _same_call_on_every_rank(f"reduce(dst={dst}, op={op!r})", tensor.data)
    return _finish(g.reduce(array, dst, op_used), async_op)


def broadcast(tensor: Tensor, src: int | None = None, group: Any = None,
              async_op: bool = False, group_src: int | None = None) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``, in place (the same
    ``src``, shape and dtype on every rank; a mismatch raises on every rank). ``src``
    defaults to 0."""
    g = _the_group(group, "broadcast")
    src = _root(g, "broadcast", "src", src, group_src)
    array = _array(tensor, f"broadcast(src={src})")
    _same_call_on_every_rank(f"broadcast(src={src})", array)
    return _finish(g.broadcast(array, src), async_op)


def _movable(tensor: Tensor, what: str, sent: bool = False) -> Any:
    """The array of a tensor that is only moved, not reduced: any dtype of the backend, and
    bool as its bytes. One that is only ``sent`` may be non-contiguous (a transpose): it is
    sent from a contiguous copy, as PyTorch does."""
    if sent and isinstance(tensor, Tensor) and not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return _array(tensor, what, bytes_of_bool=isinstance(tensor, Tensor)
                  and tensor.dtype == "bool")


def _one_per_rank(g: ProcessGroup, tensors: Any, like: Tensor, name: str, what: str) -> None:
    """``tensors`` must be a list of ``world_size`` tensors of ``like``'s shape and dtype."""
    where = f"{what} on rank {g.rank} of {g.world_size}"
    if not isinstance(tensors, list | tuple):
        raise TypeError(f"{where}: {name} must be a list of {g.world_size} tensors (one per "
                        f"rank), got {type(tensors).__name__}")
    if len(tensors) != g.world_size:
        raise ValueError(f"{where}: {name} has {len(tensors)} tensors; it needs one per rank, "
                         f"{g.world_size}")
    for i, t in enumerate(tensors):
        _movable(t, f"{what}, {name}[{i}],", sent=True)  # (its values are copied in or out)
        if t.shape != like.shape or t.dtype != like.dtype:
            raise ValueError(f"{where}: {name}[{i}] is {t.dtype} {list(t.shape)} but the "
                             f"tensor is {like.dtype} {list(like.shape)}; every entry must have "
                             "the tensor's shape and dtype")


def _copy_parts(whole: Any, tensors: Any) -> Any:
    """A function that copies part ``r`` of ``whole`` (``[world_size, ...]``) into
    ``tensors[r]``."""
    def copy() -> None:
        for part, t in zip(whole, tensors):
            t.data[...] = part.view(t.data.dtype)  # (a bool tensor's bytes were gathered)
    return copy


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None,
               async_op: bool = False) -> Work | None:
    """Every rank's ``tensor`` into every rank's ``tensor_list``: ``tensor_list[r]`` gets
    rank ``r``'s. ``tensor_list`` holds ``world_size`` tensors of ``tensor``'s shape and
    dtype, preallocated; ``tensor`` has the same shape and dtype on every rank (a mismatch
    raises on every rank, naming each rank's shape)."""
    g = _the_group(group, "all_gather")
    array = _movable(tensor, "all_gather", sent=True)
    _one_per_rank(g, tensor_list, tensor, "tensor_list", "all_gather")
    _same_call_on_every_rank("all_gather", tensor.data)
    whole = get_array_module(array).empty((g.world_size, *array.shape), array.dtype)
    work = g.all_gather(array, whole)
    return _finish(_Then(work, _copy_parts(whole, tensor_list), keep=(array, whole)), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Work | None:
    """Every rank's ``input_tensor`` (shape ``[n, ...]``, the same on every rank) into
    ``output_tensor``, in rank order: either concatenated, ``[world_size * n, ...]``, or
    stacked, ``[world_size, n, ...]`` (as PyTorch; a 0-d input gathers into
    ``[world_size]``)."""
    what = "all_gather_into_tensor"
    g = _the_group(group, what)
    array = _movable(input_tensor, what, sent=True)
    out = _movable(output_tensor, f"{what}, output_tensor,")
    shape = tuple(input_tensor.shape)
    forms = [(g.world_size, *shape)] + ([(g.world_size * shape[0], *shape[1:])] if shape else [])
    if tuple(output_tensor.shape) not in forms or output_tensor.dtype != input_tensor.dtype:
        raise ValueError(
            f"{what} on rank {g.rank} of {g.world_size}: output_tensor is {output_tensor.dtype} "
            f"{list(output_tensor.shape)} but the input is {input_tensor.dtype} {list(shape)}: "
            f"the output must have the input's dtype and shape "
            f"{' or '.join(str(list(f)) for f in forms[::-1])}")
    _same_call_on_every_rank(what, input_tensor.data)
    return _finish(_Then(g.all_gather(array, out), keep=(array, out)), async_op)


def gather(tensor: Tensor, gather_list: list[Tensor] | None = None, dst: int | None = None,
           group: Any = None, async_op: bool = False,
           group_dst: int | None = None) -> Work | None:
    """Every rank's ``tensor`` into rank ``dst``'s ``gather_list`` (``world_size`` tensors
    of ``tensor``'s shape and dtype; given on ``dst`` only, as in PyTorch). ``dst``
    defaults to 0."""
    g = _the_group(group, "gather")
    dst = _root(g, "gather", "dst", dst, group_dst)
    what = f"gather(dst={dst})"
    array = _movable(tensor, what, sent=True)
    if g.rank == dst:
        if gather_list is None:
            raise ValueError(f"{what} on rank {g.rank}: gather_list must be given on the "
                             "destination rank")
        _one_per_rank(g, gather_list, tensor, "gather_list", what)
    elif gather_list:
        raise ValueError(f"{what} on rank {g.rank}: gather_list must not be given on a rank "
                         "other than dst")
    _same_call_on_every_rank(what, tensor.data)
    whole = (get_array_module(array).empty((g.world_size, *array.shape), array.dtype)
             if g.rank == dst else None)
    work = g.gather(array, whole, dst)
    then = _copy_parts(whole, gather_list) if whole is not None else None
    return _finish(_Then(work, then, keep=(array, whole)), async_op)


def scatter(tensor: Tensor, scatter_list: list[Tensor] | None = None, src: int | None = None,
            group: Any = None, async_op: bool = False,
            group_src: int | None = None) -> Work | None:
    """Rank ``src``'s ``scatter_list[r]`` into rank ``r``'s ``tensor`` (``scatter_list``:
    ``world_size`` tensors of ``tensor``'s shape and dtype, given on ``src`` only, as in
    PyTorch). ``src`` defaults to 0."""
    g = _the_group(group, "scatter")
    src = _root(g, "scatter", "src", src, group_src)
    what = f"scatter(src={src})"
    out = _movable(tensor, what)
    stack = None
    if g.rank == src:
        if scatter_list is None:
            raise ValueError(f"{what} on rank {g.rank}: scatter_list must be given on the "
                             "source rank")
        _one_per_rank(g, scatter_list, tensor, "scatter_list", what)
        stack = get_array_module(out).stack([_movable(t, what, sent=True) for t in scatter_list])
    elif scatter_list:
        raise ValueError(f"{what} on rank {g.rank}: scatter_list must not be given on a rank "
                         "other than src")
    _same_call_on_every_rank(what, tensor.data)
    return _finish(_Then(g.scatter(stack, out, src), keep=(stack, out)), async_op)


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """Every rank's ``obj`` (picklable, small: at most 64 MiB pickled) into every rank's
    ``object_list``, which must hold ``world_size`` entries: ``object_list[r]`` becomes
    rank ``r``'s. The objects travel with the call check (MPI, on the CPU, for both
    backends)."""
    g = _the_group(group, "all_gather_object")
    _object_list(g, object_list, "all_gather_object", g.world_size)
    object_list[:] = _same_call_on_every_rank("all_gather_object()", None, payload=obj)
    g.collectives += 1


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                          device: Any = None, group_src: int | None = None) -> None:
    """Rank ``src``'s ``object_list`` entries (picklable, small) into every rank's
    ``object_list``, in place; the list has the same length on every rank. ``src`` defaults
    to 0. ``device`` is accepted for PyTorch's scripts: the objects travel through MPI on
    the CPU for both backends."""
    g = _the_group(group, "broadcast_object_list")
    src = _root(g, "broadcast_object_list", "src", src, group_src)
    _object_list(g, object_list, "broadcast_object_list")
    mine = list(object_list) if g.rank == src else None
    everyone = _same_call_on_every_rank(
        f"broadcast_object_list(src={src}) of {len(object_list)} objects", None, payload=mine)
    object_list[:] = everyone[src]
    g.collectives += 1


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int | None = None,
                  group: Any = None, group_dst: int | None = None) -> None:
    """Every rank's ``obj`` (picklable, small) into rank ``dst``'s ``object_gather_list``
    (``world_size`` entries, given on ``dst`` only, as in PyTorch): entry ``r`` becomes rank
    ``r``'s. ``dst`` defaults to 0."""
    g = _the_group(group, "gather_object")
    dst = _root(g, "gather_object", "dst", dst, group_dst)
    what = f"gather_object(dst={dst})"
    if g.rank == dst:
        _object_list(g, object_gather_list, what, g.world_size, "object_gather_list",
                     at_least=True)
    elif object_gather_list:
        raise ValueError(f"{what} on rank {g.rank}: object_gather_list must not be given on a "
                         "rank other than dst")
    everyone = _same_call_on_every_rank(what, None, payload=obj)
    if g.rank == dst:
        object_gather_list[: g.world_size] = everyone
    g.collectives += 1


def scatter_object_list(scatter_object_output_list: list[Any],
                        scatter_object_input_list: list[Any] | None = None,
                        src: int | None = None, group: Any = None,
                        group_src: int | None = None) -> None:
    """Rank ``src``'s ``scatter_object_input_list[r]`` (``world_size`` picklable, small
    objects, given on ``src`` only) into rank ``r``'s ``scatter_object_output_list[0]``.
    ``src`` defaults to 0."""
    g = _the_group(group, "scatter_object_list")
    src = _root(g, "scatter_object_list", "src", src, group_src)
    what = f"scatter_object_list(src={src})"
    _object_list(g, scatter_object_output_list, what, 1, "scatter_object_output_list",
                 at_least=True)  # (the object lands in entry 0)
    mine = None
    if g.rank == src:
        if scatter_object_input_list is None:
            raise ValueError(f"{what} on rank {g.rank}: the source rank must provide "
                             "scatter_object_input_list, one object per rank")
        mine = list(scatter_object_input_list)  # (any sequence, as PyTorch's)
        _object_list(g, mine, what, g.world_size, "scatter_object_input_list")
    everyone = _same_call_on_every_rank(what, None, payload=mine)
    scatter_object_output_list[0] = everyone[src][g.rank]
    g.collectives += 1


def _object_list(g: ProcessGroup, object_list: Any, what: str, size: int | None = None,
                 name: str = "object_list", at_least: bool = False) -> None:
    """Check a list the call fills in place: a list, of ``size`` entries (or more, with
    ``at_least``: PyTorch fills the first ``size``)."""
    if not isinstance(object_list, list):
        raise TypeError(f"{what} on rank {g.rank}: {name} must be a list (filled in place), "
                        f"got {type(object_list).__name__}")
    if size is not None and (len(object_list) < size if at_least else len(object_list) != size):
        raise ValueError(f"{what} on rank {g.rank} of {g.world_size}: {name} has "
                         f"{len(object_list)} entries; it needs one per rank, {size} (e.g. "
                         f"[None] * dist.get_world_size())")


def barrier() -> None:
    """Wait until every rank has called ``barrier()`` (a rank that made another collective
    call instead raises on every rank, as for :func:`all_reduce`)."""
    g = group("barrier()")
    _same_call_on_every_rank("barrier()", None)
    g.barrier()


_ONLY = ("tinytrain.distributed has all_reduce, reduce, broadcast, all_gather, "
         "all_gather_into_tensor, gather, scatter, all_gather_object, broadcast_object_list, "
         "gather_object, scatter_object_list and barrier, on one group of every rank")
__getattr__ = _missing.module_getattr("tinytrain.distributed", {
    "reduce_scatter": _ONLY + "; a reduce_scatter is an all_reduce of which each rank keeps "
                      "its part",
    "reduce_scatter_tensor": _ONLY + "; a reduce_scatter is an all_reduce of which each rank "
                             "keeps its part",
    "new_group": "tinytrain.distributed has one group, of every rank",
    "get_process_group": "tinytrain.distributed has one group, of every rank",
    "launch": "start the ranks with mpiexec -n N python script.py (or python -m "
              "tinytrain.train --nproc N)",
    "run": "start the ranks with mpiexec -n N python script.py",
    "elastic": "start the ranks with mpiexec -n N python script.py",
}, offer=_ONLY)

__all__ = [
    "DistributedDataParallel", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "barrier", "broadcast",
    "broadcast_object_list", "destroy_process_group", "gather", "gather_object", "get_backend",
    "get_local_rank", "get_rank", "get_world_size", "init_process_group", "is_available",
    "is_initialized", "reduce", "scatter", "scatter_object_list",
]
