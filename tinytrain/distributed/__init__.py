"""Data-parallel training across processes: process groups, collectives, DDP (chapter 7).

    mpiexec -n 2 python train.py          # or: python -m tinytrain.distributed.launch
                                          #     --nproc_per_node 2 train.py
    import tinytrain.distributed as dist
    dist.init_process_group("mpi")        # "nccl" for one GPU per rank
    model = dist.DistributedDataParallel(model)
    ...                                   # the usual loop; gradients are averaged in backward

The functions follow ``torch.distributed``: tensors are reduced in place, ``async_op=True``
returns a :class:`Work` whose ``wait()`` makes the result usable. There are ``all_reduce``,
``reduce``, ``broadcast``, ``all_gather``, ``all_gather_into_tensor``, ``gather``,
``scatter``, ``reduce_scatter``, ``reduce_scatter_tensor``, ``all_to_all``,
``all_to_all_single``, ``all_gather_object``, ``broadcast_object_list``, ``gather_object``,
``scatter_object_list``, ``barrier`` and ``monitored_barrier``; point to point ``send``,
``recv``, ``isend``, ``irecv`` and ``batch_isend_irecv``. Differences: processes are
always started by MPI (``mpiexec``, or the torchrun-like :mod:`tinytrain.distributed.launch`;
a process started otherwise is refused when ``WORLD_SIZE`` says there are several), ops are
strings (``"sum"``, ``"avg"``, ``"max"``, ``"min"``, ``"product"``, ``"band"``, ``"bor"``,
``"bxor"``; :class:`ReduceOp` has the PyTorch names), and there is only one group
(``group=`` may be None or that group; ``new_group()`` of every rank returns it).

Under ``mpiexec``, importing this module sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and
``LOCAL_WORLD_SIZE`` in ``os.environ``, as torchrun does, and makes an uncaught exception in
any rank stop every rank (:mod:`tinytrain.distributed.job`).
"""

from __future__ import annotations

import atexit
import datetime
import faulthandler
import numbers
import os
import sys
from typing import Any

import numpy as np

from tinytrain import _missing
from tinytrain.backend import get_array_module, split_device
from tinytrain.cuda import current_device
from tinytrain.distributed.ddp import DistributedDataParallel
from tinytrain.distributed.job import (
    abort_at_exit,
    abort_on_uncaught_exception,
    aborting,
    launcher_says_several,
    prepare_rank,
    set_rank_environment,
    started_by_mpi_launcher,
)
from tinytrain.distributed.process_group import (
    DEFAULT_TIMEOUT,
    FORWARD_ON_SOME_RANKS,
    OPS,
    UNEVEN_STEPS,
    CollectiveError,
    MPIGroup,
    ProcessGroup,
    ReduceOp,
    Work,
    share_cpu_cores,
)
from tinytrain.tensor import Tensor

prepare_rank()  # under mpiexec: torchrun's RANK, LOCAL_RANK, ... and the abort hook (job.py)

_group: ProcessGroup | None = None


class DefaultGroupError(RuntimeError, ValueError):
    """The default process group is not there yet, or is there already (a second
    ``init_process_group``). PyTorch raises ValueError for these, tinytrain raised
    RuntimeError: this is both, so ``except`` clauses written for either catch it."""


def is_available() -> bool:
    """True when mpi4py (and so an MPI library) can be imported."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_mpi_available() -> bool:
    """True when the ``mpi`` backend can run (mpi4py imports)."""
    return is_available()


def is_gloo_available() -> bool:
    """True when ``"gloo"`` can be asked for: tinytrain runs it as its ``mpi`` backend."""
    return is_available()


def is_nccl_available() -> bool:
    """True when the ``nccl`` backend can run: CuPy and its NCCL library load."""
    try:
        from tinytrain.distributed.nccl import nccl_module

        nccl_module()
    except (ImportError, RuntimeError):
        return False
    return True


class Backend(str):
    """PyTorch's backend names. ``Backend("GLOO")`` is ``"gloo"``: a plain, lower-case
    string (case does not matter). ``"gloo"`` and ``"mpi"`` run tinytrain's ``mpi``
    backend (CPU tensors), ``"nccl"`` its ``nccl`` backend (GPU tensors)."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"

    def __new__(cls, name: str) -> str:  # type: ignore[misc]
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: "
                             f"{type(name)}")
        value = name.lower()
        if value not in (cls.GLOO, cls.NCCL, cls.MPI):
            raise ValueError(f"unknown backend {name!r}; use 'gloo' or 'mpi' (CPU tensors, "
                             "through MPI) or 'nccl' (GPU tensors)")
        return value


def _rendezvous_waiting_for_every_rank(backend: str, timeout: float) -> ProcessGroup:
    """MPI's initialisation and the group's set-up wait, inside MPI's C code, for every
    rank to arrive; a rank that failed before it would leave the others there forever. A
    watchdog that needs no Python (``faulthandler``'s) ends this process after ``timeout``
    with the stack, where this function's name says what it waited for; the launcher then
    stops the others. (It replaces a ``faulthandler.dump_traceback_later`` of the caller's.)
    A rank that fails with an uncaught exception before it gets here stops the job itself
    (the abort hook, installed at import under mpiexec)."""
    faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
    try:
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise RuntimeError("tinytrain.distributed needs MPI: pip install mpi4py mpich "
                               f"({exc})") from None
        abort_on_uncaught_exception()
        if MPI.Is_finalized():
            raise RuntimeError("init_process_group: MPI was finalised (MPI.Finalize() was "
                               "called) in this process; it cannot be started again")
        if not MPI.Is_initialized():  # mpi4py.rc.initialize = False: the program left it to us
            MPI.Init_thread()
            atexit.register(_finalize_at_exit)  # (runs after the group's at-exit destroy)
        comm = MPI.COMM_WORLD.Dup()
        if backend == "nccl":
            from tinytrain.distributed.nccl import NCCLGroup

            return NCCLGroup(comm, timeout=timeout)
        return MPIGroup(comm, timeout=timeout)
    finally:
        faulthandler.cancel_dump_traceback_later()


def is_initialized() -> bool:
    return _group is not None


_HOW_TO_START = ("tinytrain's ranks are started by MPI: run mpiexec -n {n} python script.py, "
                 "or python -m tinytrain.distributed.launch --nproc_per_node {n} script.py")


def _refuse_a_lone_process(g: ProcessGroup, world_size: Any, rank: Any) -> None:
    """A process no MPI launcher started is a group of one. If the program (``world_size``,
    as with ``mp.spawn``) or the environment (``WORLD_SIZE``, as torchrun sets it) says
    there are several ranks, each process would train alone, silently: refuse."""
    if g.world_size != 1:
        return
    several = launcher_says_several()
    if several:
        raise RuntimeError(
            f"init_process_group: the launcher's variables ({several}) say this process is "
            "one task of several, but MPI sees it alone (a world of one), so each task "
            "would train alone. The launcher started the tasks without connecting their MPI: "
            "with Slurm, run srun --mpi=pmi2 or srun --mpi=pmix (whichever your MPI library "
            "supports; srun --mpi=list lists them), or run mpiexec -n N python script.py "
            "with the mpiexec of the MPI that mpi4py was built with (python -c 'from mpi4py "
            "import MPI; print(MPI.Get_library_version())' names it)")
    if started_by_mpi_launcher():
        return
    if world_size not in (-1, None):
        if isinstance(world_size, numbers.Integral) and world_size > 1:
            raise RuntimeError(
                f"init_process_group: world_size={world_size} (rank={rank}) was passed, but no "
                "mpiexec started this process: MPI sees it alone, so each process (started by "
                "mp.spawn, multiprocessing or by hand) would train alone. "
                + _HOW_TO_START.format(n=world_size) + " (no spawning; leave rank and "
                "world_size out: MPI decides them)")
        return
    env = os.environ.get("WORLD_SIZE", "")
    if env.isdigit() and int(env) > 1:
        raise RuntimeError(
            f"init_process_group: WORLD_SIZE={env} and RANK={os.environ.get('RANK')} in the "
            "environment (set by torchrun, or by hand) say this process is one of "
            f"{env} ranks, but no mpiexec started it: MPI sees it alone, so each process "
            "would train alone. " + _HOW_TO_START.format(n=env))


def init_process_group(backend: str | None = "mpi", init_method: str | None = None,
                       timeout: datetime.timedelta | float | None = None,
                       world_size: int = -1, rank: int = -1,
                       device_id: Any = None) -> ProcessGroup:
    """Join the job's processes (started by ``mpiexec``) as one group; returns it.

    ``backend="mpi"`` (or None) reduces NumPy tensors through MPI; ``"nccl"`` CuPy tensors
    through NCCL, each rank on the GPU of its local rank. ``"gloo"``, PyTorch's CPU backend
    (the one its CPU tutorials use), means ``"mpi"`` here: both reduce CPU tensors. Case
    does not matter (``"GLOO"``). Also: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and
    ``LOCAL_WORLD_SIZE`` are set in ``os.environ`` (as torchrun does), an uncaught exception
    in any rank aborts every rank, and each rank gets its share of the CPU cores
    (``tt.set_num_threads``, unless the program set a number itself). A single process (no
    mpiexec) is a group of one, unless ``world_size`` or the ``WORLD_SIZE`` variable says
    there are several ranks: then it raises (each process would otherwise train alone).

    MPI says which rank each process is and how many there are: ``world_size`` and ``rank``,
    PyTorch's arguments, may be given (a script written for ``torchrun`` passes them) but
    must agree with it (integers: a value read from ``os.environ`` needs ``int()``).
    ``init_method`` may be None, ``"env://"``, ``"tcp://host:port"`` or ``"file://path"``:
    the processes find each other through MPI whichever it is (the address and file are
    not used). ``device_id`` (a device, ``"cuda:N"`` or an index; PyTorch's hint of this
    rank's device) changes nothing: with ``"nccl"`` it must be the GPU of this rank (that
    of its local rank, or the one ``tt.cuda.set_device`` chose), with ``"mpi"`` it is
    only checked to be a device.

    ``timeout`` (a ``timedelta`` or seconds; default 30 minutes, as PyTorch's CPU backends):
    how long a rank waits in a collective for the others before it raises an error that
    names the collective and the rank (which then stops every rank). It covers the ``mpi``
    backend's collectives and barriers; NCCL's own collectives run on the GPU.
    """
    global _group
    if _group is not None:
        raise DefaultGroupError(
            f"trying to initialize the default process group twice! (rank {_group.rank} of "
            f"{_group.world_size}: init_process_group() was already called in this process; "
            "destroy_process_group() first to start a new one)")
    name = "mpi" if backend is None else backend.lower() if isinstance(backend, str) else backend
    backend = "mpi" if name == "gloo" else name
    for arg, value in (("rank", rank), ("world_size", world_size)):  # PyTorch's order
        if isinstance(value, bool) or not isinstance(value, numbers.Integral | None):
            raise RuntimeError(f"init_process_group: `{arg}` must be an integer, got "
                               f"{value!r} ({type(value).__name__}); from the environment: "
                               f"{arg}=int(os.environ[...]), or leave it out (MPI decides it)")
    if init_method is not None and (not isinstance(init_method, str) or not init_method
                                    .startswith(("env://", "tcp://", "file://"))):
        raise ValueError(f"init_process_group: init_method={init_method!r} is not supported: "
                         "the processes are started and found by MPI (mpiexec, srun); "
                         "'env://', 'tcp://...' and 'file://...' are accepted (and not used), "
                         "or leave it out")
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
    if device_id is not None:
        try:
            device_kind, device_index = split_device(device_id)
        except ValueError as exc:
            raise ValueError(f"init_process_group: device_id={device_id!r}: {exc}") from None
    g = _rendezvous_waiting_for_every_rank(backend, float(seconds))
    try:
        _refuse_a_lone_process(g, world_size, rank)
        if g.device == "cuda" and device_id is not None:
            mine = current_device()
            if device_kind != "cuda" or device_index not in (None, mine):
                raise ValueError(f"init_process_group: device_id={device_id!r} on rank "
                                 f"{g.rank} of {g.world_size}: the nccl backend runs this "
                                 f"rank on GPU {mine} (cuda:{mine}); pass that, or leave "
                                 "device_id out")
        for name, given, actual in (("world_size", world_size, g.world_size),
                                    ("rank", rank, g.rank)):
            if given not in (-1, None) and given != actual:
                raise ValueError(f"init_process_group: {name}={given} was passed, but mpiexec "
                                 f"started this process as rank {g.rank} of {g.world_size} "
                                 f"(leave {name} out: MPI decides it)")
    except (RuntimeError, ValueError):
        g.destroy(rendezvous=False)  # the other ranks may never get this far
        raise
    _group = g
    set_rank_environment(g.rank, g.world_size, g.local_rank, g.local_size)
    share_cpu_cores(_group.local_size)
    atexit.register(_destroy_at_exit)
    return _group


def destroy_process_group(group: Any = None) -> None:
    """Leave the group: complete the collectives still in flight (also those whose handle
    was dropped), tell the other ranks, wait until they leave too (at a normal end they
    all do; at most the group's timeout), free the communicators. Collectives fail
    afterwards. It runs at exit when the program did not call it, so a rank that ends while
    another still waits for it in a collective makes that rank raise at once (see
    :mod:`tinytrain.distributed.process_group`), not after the timeout."""
    _leave(group, at_exit=False)


def _leave(given: Any, at_exit: bool) -> None:
    global _group
    if _group is not None:
        g = _the_group(given, "destroy_process_group")
        if _mpi_finalized():
            _group = None
            raise RuntimeError(
                f"destroy_process_group() on rank {g.rank} of {g.world_size}: MPI was "
                "finalised (MPI.Finalize() was called) before it, so the group cannot be "
                "left cleanly: call destroy_process_group() before MPI.Finalize(), or leave "
                "MPI.Finalize() out (mpi4py finalises MPI at exit)")
        _group = None
        g.destroy(at_exit=at_exit)


def _mpi_finalized() -> bool:
    from mpi4py import MPI

    return MPI.Is_finalized()


def _finalize_at_exit() -> None:
    """MPI that init_process_group initialised (``mpi4py.rc.initialize = False``) is
    finalised at exit, unless the program did it, or a rank aborts the job."""
    from mpi4py import MPI

    if not aborting() and MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.Finalize()


def _destroy_at_exit() -> None:
    if _group is not None and _mpi_finalized():  # the program called MPI.Finalize() itself:
        return  # every rank did (it is collective), so none waits for this one
    if not aborting():  # after an error a peer may be gone: freeing could wait for it
        try:
            _leave(None, at_exit=True)
        except CollectiveError as exc:  # a collective whose handle was dropped cannot complete
            print(f"tinytrain.distributed, at exit: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            abort_at_exit(1)


class _World:
    """PyTorch's ``GroupMember``: ``WORLD`` is the group of every rank (None before
    ``init_process_group``, as in PyTorch)."""

    NON_GROUP_MEMBER = -100

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def WORLD(self) -> ProcessGroup | None:  # noqa: N802 (PyTorch's name)
        return _group

    def __repr__(self) -> str:
        return f"<tinytrain.distributed.{self._name}>"


class _GroupNames(_World):
    """``dist.group``: PyTorch's ``group.WORLD``; called, ``dist.group(what)`` returns the
    process group, or raises an error saying that ``init_process_group`` comes first
    (``what`` names the caller in it)."""

    def __call__(self, what: str = "this call") -> ProcessGroup:
        if _group is None:
            raise DefaultGroupError(
                f"{what}: Default process group has not been initialized, please make sure "
                "to call init_process_group. (tinytrain.distributed.init_process_group() "
                "first)")
        return _group


GroupMember = _World("GroupMember")
group = _GroupNames("group")


def get_rank(group: Any = None) -> int:
    return _the_group(group, "get_rank()").rank


def get_world_size(group: Any = None) -> int:
    return _the_group(group, "get_world_size()").world_size


def get_global_rank(group: Any, group_rank: int) -> int:
    """The rank in the job of rank ``group_rank`` of ``group``: the same number, since the
    one group is every rank (PyTorch's identity for its default group)."""
    g = _the_group(group, "get_global_rank()")
    if isinstance(group_rank, bool) or not isinstance(group_rank, numbers.Integral) or \
            not 0 <= group_rank < g.world_size:
        raise ValueError(f"Group rank {group_rank!r} is not part of group {g!r} (ranks 0 to "
                         f"{g.world_size - 1})")
    return int(group_rank)


def get_process_group_ranks(group: Any) -> list[int]:
    """The job's ranks in ``group`` (None: the default group), in group order: every rank."""
    return list(range(_the_group(group, "get_process_group_ranks()").world_size))


def is_torchelastic_launched() -> bool:
    """False: tinytrain's ranks are started by MPI, never by torchelastic (torchrun)."""
    return False


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank on its machine, from ``LOCAL_RANK`` (set under mpiexec, srun
    with PMI, and torchrun), else ``fallback_rank``; neither raises, as PyTorch's."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
        "`get_node_local_rank` to work, assuming you are not running in a multi-device "
        "context and want the code to run locally instead.")


def get_local_rank() -> int:
    """This rank's index among the processes of its machine (its GPU with nccl)."""
    return _the_group(None, "get_local_rank()").local_rank


def get_backend(group: Any = None) -> str:
    return _the_group(group, "get_backend()").backend


def new_group(ranks: Any = None, timeout: datetime.timedelta | float | None = None,
              backend: str | None = None, pg_options: Any = None,
              use_local_synchronization: bool = False, group_desc: str | None = None,
              device_id: Any = None) -> ProcessGroup:
    """PyTorch's ``new_group``, for the group of every rank only (``ranks`` None, or every
    rank): that is the job's group, which is returned, and the collectives take it as
    ``group=``. A group of some of the ranks raises NotImplementedError. ``timeout`` and
    ``backend``, if given, must be the group's; the other arguments change nothing here."""
    g = _the_group(None, "new_group()")
    if ranks is not None:
        listed = sorted(int(r) for r in ranks)
        if listed != list(range(g.world_size)):
            raise NotImplementedError(
                f"new_group(ranks={list(ranks)}) on rank {g.rank} of {g.world_size}: "
                "tinytrain.distributed has one group, of every rank; a group of some ranks "
                "is not supported (use the whole group, or send/recv between those ranks)")
    if backend is not None and Backend(backend) not in (g.backend, "gloo" if g.backend ==
                                                         "mpi" else g.backend):
        raise ValueError(f"new_group(backend={backend!r}) on rank {g.rank}: the group of every "
                         f"rank runs the {g.backend} backend")
    seconds = (timeout.total_seconds() if isinstance(timeout, datetime.timedelta)
               else timeout)
    if seconds is not None and seconds != g.timeout:
        raise ValueError(f"new_group(timeout={timeout!r}) on rank {g.rank}: the group of every "
                         f"rank keeps init_process_group's timeout ({g.timeout:g} s)")
    return g


def _array(tensor: Any, what: str, bytes_of_bool: bool = False) -> Any:
    """The array to communicate for ``tensor``, after checking that this backend can: the
    tensor's own array when it is contiguous, else a contiguous copy (a column, a transpose:
    as PyTorch's gloo, the collective works on the copy, and :func:`_copy_back` writes the
    result into the tensor). ``bytes_of_bool``: a bool tensor's array viewed as uint8."""
    g = group(what)
    where = f"{what} on rank {g.rank}"
    if not isinstance(tensor, Tensor):
        hint = ("; pass the Tensor itself (p.grad, not an array such as p.grad.numpy())"
                if hasattr(tensor, "dtype") else "")
        raise TypeError(f"{where}: expected a tinytrain Tensor, got "
                        f"{type(tensor).__name__}{hint}")
    if tensor.device != g.device:
        raise RuntimeError(
            f"{where}: the {g.backend} backend communicates {g.device} tensors, but this one "
            f"is on {tensor.device}; move it with .to({g.device!r})")
    array = tensor._data
    if not array.flags.c_contiguous:
        array = get_array_module(array).ascontiguousarray(array)
    if bytes_of_bool:
        array = array.view("uint8")
    if array.dtype.name not in g.dtypes:
        raise TypeError(f"{where}: dtype {array.dtype} is not supported by the {g.backend} "
                        f"backend (supported: {', '.join(g.dtypes)})")
    return array


def _copy_back(tensor: Tensor, array: Any) -> Any:
    """For a tensor that a collective writes: None when ``array`` is the tensor's own memory,
    else a function that copies ``array`` (its staged copy) into it."""
    if tensor._data.flags.c_contiguous:
        return None

    def copy() -> None:
        tensor._data[...] = array.view(tensor._data.dtype)
    return copy


def _movable(tensor: Tensor, what: str) -> Any:
    """The array of a tensor that is only moved, not reduced: any dtype of the backend, and
    bool as its bytes."""
    return _array(tensor, what, bytes_of_bool=isinstance(tensor, Tensor)
                  and tensor.dtype == "bool")


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
            "buffer broadcasts and gradient all-reduces count). Common causes: "
            f"{UNEVEN_STEPS}; or {FORWARD_ON_SOME_RANKS}")
    return [theirs for _, theirs in gathered]


def _the_group(given: Any, what: str) -> ProcessGroup:
    """The group, checking PyTorch's ``group=`` argument: None or the group itself (which
    ``new_group()`` returns)."""
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


_BITWISE = ("band", "bor", "bxor")


def _reduce_op(g: ProcessGroup, tensor: Any, op: str, what: str) -> str:
    """The backend's op for reducing ``tensor`` with ``op``, checked. A bool tensor, as in
    PyTorch: ``"sum"`` and ``"max"`` are a logical or, ``"min"`` and ``"product"`` a logical
    and (reduced as 0/1 bytes; the bitwise ops act on those bytes as they are)."""
    if op not in OPS:
        raise ValueError(f"{what}: unknown op {op!r}; use one of {', '.join(OPS)}")
    boolean = isinstance(tensor, Tensor) and tensor.dtype == "bool"
    dtype = "bool" if boolean else getattr(tensor, "dtype", None)
    if op == "avg" and (boolean or np.dtype(dtype).kind != "f"):
        raise TypeError(f"{what}(op='avg') on rank {g.rank}: needs a floating-point "
                        f"tensor, got {dtype}")
    if op in _BITWISE:
        if g.backend == "nccl":
            raise RuntimeError(f"{what}(op={op!r}) on rank {g.rank}: Cannot use "
                               f"ReduceOp.{op.upper()} with NCCL (NCCL has no bitwise "
                               "reductions; PyTorch's nccl backend refuses them too)")
        if not boolean and np.dtype(dtype).kind not in "iu":
            raise RuntimeError(f"{what}(op={op!r}) on rank {g.rank}: Cannot use "
                               f"ReduceOp.{op.upper()} with non-integral dtype {dtype}")
        return op
    if boolean:  # the bytes are 0 or 1: or = max, and = min
        return "min" if op in ("min", "product") else "max"
    return op


def _reduction(tensor: Tensor, op: str, what: str) -> tuple[Any, str]:
    """The array to reduce (a contiguous one: see :func:`_array`) and the backend's op."""
    g = group(what)
    op_used = _reduce_op(g, tensor, op, what) if isinstance(tensor, Tensor) else op
    boolean = isinstance(tensor, Tensor) and tensor.dtype == "bool"
    return _array(tensor, f"{what}(op={op!r})", bytes_of_bool=boolean), op_used


def _finish(work: Work, async_op: bool) -> Work | None:
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Tensor, op: str = "sum", group: Any = None,
               async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over all ranks, in place: every rank gets the sum (``"avg"``, ``"max"``,
    ``"min"``, ``"product"``; ``"band"``, ``"bor"``, ``"bxor"`` for integer and bool tensors)
    of every rank's values. Same shape and dtype on every rank; any shape (a mismatch raises
    on every rank, naming each rank's call); a non-contiguous tensor (a column) is reduced
    through a contiguous copy. A bool tensor, as in PyTorch: ``"sum"`` and ``"max"`` are a
    logical or, ``"min"`` and ``"product"`` a logical and. With ``async_op=True``, returns a
    :class:`Work`; the values are valid after ``wait()``."""
    g = _the_group(group, "all_reduce")
    array, op_used = _reduction(tensor, op, "all_reduce")
    _same_call_on_every_rank(f"all_reduce(op={op!r})", tensor._data)  # bool says bool
    return _finish(g.all_reduce(array, op_used).then(_copy_back(tensor, array)), async_op)


def reduce(tensor: Tensor, dst: int | None = None, op: str = "sum", group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """As :func:`all_reduce`, but only rank ``dst`` gets the result, in its ``tensor``; the
    other ranks' ``tensor`` is left as it was (PyTorch promises nothing about it). ``dst``
    is required, as in PyTorch."""
    g = _the_group(group, "reduce")
    dst = _root(g, "reduce", "dst", dst, group_dst, default=None)
    array, op_used = _reduction(tensor, op, "reduce")
    _same_call_on_every_rank(f"reduce(dst={dst}, op={op!r})", tensor._data)
    copy = _copy_back(tensor, array) if g.rank == dst else None
    return _finish(g.reduce(array, dst, op_used).then(copy), async_op)


def broadcast(tensor: Tensor, src: int | None = None, group: Any = None,
              async_op: bool = False, group_src: int | None = None) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``, in place (the same
    ``src``, shape and dtype on every rank; a mismatch raises on every rank). ``src``
    defaults to 0."""
    g = _the_group(group, "broadcast")
    src = _root(g, "broadcast", "src", src, group_src)
    array = _movable(tensor, f"broadcast(src={src})")
    _same_call_on_every_rank(f"broadcast(src={src})", tensor._data)
    copy = _copy_back(tensor, array) if g.rank != src else None
    return _finish(g.broadcast(array, src).then(copy), async_op)


def _one_per_rank(g: ProcessGroup, tensors: Any, like: Tensor, name: str, what: str) -> None:
    """``tensors`` must be a list of ``world_size`` tensors of ``like``'s shape and dtype."""
    where = f"{what} on rank {g.rank} of {g.world_size}"
    _list_per_rank(g, tensors, name, where)
    for i, t in enumerate(tensors):
        _movable(t, f"{what}, {name}[{i}],")  # (its values are copied in or out)
        if t.shape != like.shape or t.dtype != like.dtype:
            raise ValueError(f"{where}: {name}[{i}] is {t.dtype} {list(t.shape)} but the "
                             f"tensor is {like.dtype} {list(like.shape)}; every entry must have "
                             "the tensor's shape and dtype")


def _list_per_rank(g: ProcessGroup, tensors: Any, name: str, where: str) -> None:
    if not isinstance(tensors, list | tuple):
        raise TypeError(f"{where}: {name} must be a list of {g.world_size} tensors (one per "
                        f"rank), got {type(tensors).__name__}")
    if len(tensors) != g.world_size:
        raise ValueError(f"{where}: {name} has {len(tensors)} tensors; it needs one per rank, "
                         f"{g.world_size}")


def _copy_parts(whole: Any, tensors: Any) -> Any:
    """A function that copies part ``r`` of ``whole`` (``[world_size, ...]``) into
    ``tensors[r]``."""
    def copy() -> None:
        for part, t in zip(whole, tensors):
            t._data[...] = part.view(t._data.dtype)  # (a bool tensor's bytes were gathered)
    return copy


def _stacked_forms(g: ProcessGroup, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The shapes of ``world_size`` tensors of ``shape``, stacked or (if not 0-d)
    concatenated along dim 0."""
    return [(g.world_size, *shape)] + (
        [(g.world_size * shape[0], *shape[1:])] if shape else [])


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None,
               async_op: bool = False) -> Work | None:
    """Every rank's ``tensor`` into every rank's ``tensor_list``: ``tensor_list[r]`` gets
    rank ``r``'s. ``tensor_list`` holds ``world_size`` tensors of ``tensor``'s shape and
    dtype, preallocated; ``tensor`` has the same shape and dtype on every rank (a mismatch
    raises on every rank, naming each rank's shape)."""
    g = _the_group(group, "all_gather")
    array = _movable(tensor, "all_gather")
    _one_per_rank(g, tensor_list, tensor, "tensor_list", "all_gather")
    _same_call_on_every_rank("all_gather", tensor._data)
    whole = get_array_module(array).empty((g.world_size, *array.shape), array.dtype)
    work = g.all_gather(array, whole)
    return _finish(work.then(_copy_parts(whole, tensor_list)), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Work | None:
    """Every rank's ``input_tensor`` (shape ``[n, ...]``, the same on every rank) into
    ``output_tensor``, in rank order: either concatenated, ``[world_size * n, ...]``, or
    stacked, ``[world_size, n, ...]`` (as PyTorch; a 0-d input gathers into
    ``[world_size]``)."""
    what = "all_gather_into_tensor"
    g = _the_group(group, what)
    array = _movable(input_tensor, what)
    out = _movable(output_tensor, f"{what}, output_tensor,")
    shape = tuple(input_tensor.shape)
    forms = _stacked_forms(g, shape)
    if tuple(output_tensor.shape) not in forms or output_tensor.dtype != input_tensor.dtype:
        raise ValueError(
            f"{what} on rank {g.rank} of {g.world_size}: output_tensor is {output_tensor.dtype} "
            f"{list(output_tensor.shape)} but the input is {input_tensor.dtype} {list(shape)}: "
            f"the output must have the input's dtype and shape "
            f"{' or '.join(str(list(f)) for f in forms[::-1])}")
    _same_call_on_every_rank(what, input_tensor._data)
    return _finish(g.all_gather(array, out).then(_copy_back(output_tensor, out)), async_op)


def gather(tensor: Tensor, gather_list: list[Tensor] | None = None, dst: int | None = None,
           group: Any = None, async_op: bool = False,
           group_dst: int | None = None) -> Work | None:
    """Every rank's ``tensor`` into rank ``dst``'s ``gather_list`` (``world_size`` tensors
    of ``tensor``'s shape and dtype; given on ``dst`` only, as in PyTorch). ``dst``
    defaults to 0."""
    g = _the_group(group, "gather")
    dst = _root(g, "gather", "dst", dst, group_dst)
    what = f"gather(dst={dst})"
    array = _movable(tensor, what)
    if g.rank == dst:
        if gather_list is None:
            raise ValueError(f"{what} on rank {g.rank}: gather_list must be given on the "
                             "destination rank")
        _one_per_rank(g, gather_list, tensor, "gather_list", what)
    elif gather_list:
        raise ValueError(f"{what} on rank {g.rank}: gather_list must not be given on a rank "
                         "other than dst")
    _same_call_on_every_rank(what, tensor._data)
    whole = (get_array_module(array).empty((g.world_size, *array.shape), array.dtype)
             if g.rank == dst else None)
    work = g.gather(array, whole, dst)
    return _finish(work.then(_copy_parts(whole, gather_list) if whole is not None else None),
                   async_op)


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
        stack = get_array_module(out).stack([_movable(t, what) for t in scatter_list])
    elif scatter_list:
        raise ValueError(f"{what} on rank {g.rank}: scatter_list must not be given on a rank "
                         "other than src")
    _same_call_on_every_rank(what, tensor._data)
    return _finish(g.scatter(stack, out, src).then(_copy_back(tensor, out)), async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: str = "sum", group: Any = None,
                          async_op: bool = False) -> Work | None:
    """Reduce every rank's ``input`` (``world_size`` parts of ``output``'s shape, stacked
    ``[world_size, *output.shape]`` or concatenated along dim 0), and give rank ``r`` part
    ``r`` of the result, in ``output``. Ops and dtypes as :func:`all_reduce`."""
    what = "reduce_scatter_tensor"
    g = _the_group(group, what)
    out = _movable(output, f"{what}, output,")
    array, op_used = _reduction(input, op, what)
    forms = _stacked_forms(g, tuple(output.shape))
    if tuple(input.shape) not in forms or output.dtype != input.dtype:
        raise ValueError(
            f"{what} on rank {g.rank} of {g.world_size}: input is {input.dtype} "
            f"{list(input.shape)} but output is {output.dtype} {list(output.shape)}: the input "
            f"must have the output's dtype and shape "
            f"{' or '.join(str(list(f)) for f in forms[::-1])}")
    _same_call_on_every_rank(f"{what}(op={op!r})", input._data)
    return _finish(g.reduce_scatter(array, out, op_used).then(_copy_back(output, out)),
                   async_op)


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: str = "sum",
                   group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce every rank's ``input_list`` (``world_size`` tensors of ``output``'s shape and
    dtype) entry by entry, and give rank ``r`` the reduction of entry ``r``, in
    ``output``."""
    what = "reduce_scatter"
    g = _the_group(group, what)
    out = _movable(output, f"{what}, output,")
    _one_per_rank(g, input_list, output, "input_list", what)
    stack = get_array_module(out).stack([_movable(t, what) for t in input_list])
    op_used = _reduce_op(g, output, op, what)
    _same_call_on_every_rank(f"{what}(op={op!r})", output._data)
    return _finish(g.reduce_scatter(stack, out, op_used).then(_copy_back(output, out)),
                   async_op)


def _counts_agree(g: ProcessGroup, what: str, send: list[int], recv: list[int]) -> None:
    """Every rank's sends and receives of an all-to-all (element counts per peer): what rank
    ``a`` sends to ``b`` must be what ``b`` expects from ``a``. Checked on every rank from
    the call check's payloads, so that all raise together."""
    counts = _same_call_on_every_rank(what, None, payload=(send, recv))
    for a, (sends, _) in enumerate(counts):
        for b, (_, receives) in enumerate(counts):
            if sends[b] != receives[a]:
                raise ValueError(
                    f"{what} (rank {g.rank} of {g.world_size}): rank {a} sends {sends[b]} "
                    f"elements to rank {b}, which expects {receives[a]} from it; each rank's "
                    "output split sizes must be what the others' input split sizes send it")


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group: Any = None,
                      async_op: bool = False) -> Work | None:
    """Split ``input`` along dim 0 and send part ``q`` to rank ``q``; rank ``q``'s part for
    this rank lands in ``output`` at part ``q``. Without split sizes the parts are equal
    (``input.shape[0]`` divisible by ``world_size``; ``output`` has ``input``'s shape);
    ``input_split_sizes[q]`` rows go to rank ``q``, ``output_split_sizes[q]`` rows come
    from it. Same dtype everywhere; the shape after dim 0 the same on every rank."""
    what = "all_to_all_single"
    g = _the_group(group, what)
    where = f"{what} on rank {g.rank} of {g.world_size}"
    array, out = _movable(input, what), _movable(output, f"{what}, output,")
    if output.dtype != input.dtype or not (input.shape and output.shape) or \
            tuple(output.shape[1:]) != tuple(input.shape[1:]):
        raise ValueError(f"{where}: output is {output.dtype} {list(output.shape)} and input "
                         f"{input.dtype} {list(input.shape)}: they need the same dtype, at least "
                         "one dimension and the same shape after dim 0")
    splits = []
    for name, sizes, t in (("input_split_sizes", input_split_sizes, input),
                           ("output_split_sizes", output_split_sizes, output)):
        if sizes is None:
            if t.shape[0] % g.world_size:
                raise ValueError(f"{where}: {name} not given, so dim 0 ({t.shape[0]}) is split "
                                 f"in {g.world_size} equal parts, but it is not divisible by "
                                 f"{g.world_size}")
            sizes = [t.shape[0] // g.world_size] * g.world_size
        sizes = [int(s) for s in sizes]
        if len(sizes) != g.world_size or sum(sizes) != t.shape[0] or min(sizes) < 0:
            raise ValueError(f"{where}: {name}={sizes} must be {g.world_size} sizes (one per "
                             f"rank) that add up to dim 0, {t.shape[0]}")
        splits.append(sizes)
    row = int(np.prod(input.shape[1:], dtype=np.int64))
    send, recv = ([s * row for s in sizes] for sizes in splits)
    rest = "".join(f", {d}" for d in input.shape[1:])
    _counts_agree(g, f"{what} of {input.dtype} [*{rest}]", send, recv)
    return _finish(g.all_to_all(array, out, send, recv).then(_copy_back(output, out)),
                   async_op)


def all_to_all(output_tensor_list: list[Tensor], input_tensor_list: list[Tensor],
               group: Any = None, async_op: bool = False) -> Work | None:
    """``input_tensor_list[q]`` to rank ``q``; rank ``q``'s tensor for this rank into
    ``output_tensor_list[q]``. Both lists hold ``world_size`` tensors of one dtype; sizes
    may differ from peer to peer, but each output must have the size of what its peer
    sends."""
    what = "all_to_all"
    g = _the_group(group, what)
    where = f"{what} on rank {g.rank} of {g.world_size}"
    for name, tensors in (("output_tensor_list", output_tensor_list),
                          ("input_tensor_list", input_tensor_list)):
        _list_per_rank(g, tensors, name, where)
    first = input_tensor_list[0]
    for name, tensors in (("output_tensor_list", output_tensor_list),
                          ("input_tensor_list", input_tensor_list)):
        for i, t in enumerate(tensors):
            _movable(t, f"{what}, {name}[{i}],")
            if t.dtype != first.dtype:
                raise ValueError(f"{where}: {name}[{i}] is {t.dtype} but input_tensor_list[0] "
                                 f"is {first.dtype}; every tensor must have the same dtype")
    xp = get_array_module(first._data)
    array = xp.concatenate([_movable(t, what).reshape(-1) for t in input_tensor_list])
    send = [int(t._data.size) for t in input_tensor_list]
    recv = [int(t._data.size) for t in output_tensor_list]
    out = xp.empty(sum(recv), array.dtype)
    _counts_agree(g, f"{what} of {first.dtype}", send, recv)
    starts = np.concatenate([[0], np.cumsum(recv)])

    def copy_out() -> None:
        for t, a, b in zip(output_tensor_list, starts[:-1], starts[1:]):
            t._data[...] = out[a:b].view(t._data.dtype).reshape(t.shape)
    return _finish(g.all_to_all(array, out, send, recv).then(copy_out), async_op)


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




def barrier(group: Any = None, async_op: bool = False,
            device_ids: list[int] | None = None) -> Work | None:
    """Wait until every rank has called ``barrier()`` (a rank that made another collective
    call instead raises on every rank, as for :func:`all_reduce`). What this rank started
    before completes first. ``device_ids`` is accepted for PyTorch's scripts."""
    g = _the_group(group, "barrier()")
    _same_call_on_every_rank("barrier()", None)
    return _finish(g.barrier(), async_op)


def monitored_barrier(group: Any = None, timeout: datetime.timedelta | float | None = None,
                      wait_all_ranks: bool = False) -> None:
    """A barrier that names the ranks that did not arrive, as PyTorch's (gloo's): rank 0
    waits at most ``timeout`` (default: the group's) for every other rank's message, then
    answers each; otherwise it raises, naming the first missing rank (every missing rank
    with ``wait_all_ranks=True``)."""
    g = _the_group(group, "monitored_barrier()")
    seconds = (g.timeout if timeout is None else timeout.total_seconds()
               if isinstance(timeout, datetime.timedelta) else float(timeout))
    g.monitored_barrier(seconds, wait_all_ranks)


# ------------------------------------------------------------------ point to point


def _peer(g: ProcessGroup, what: str, name: str, rank: int | None, group_rank: int | None,
          any_rank: bool = False) -> int | None:
    """The peer rank of a send or receive, checked (None: any rank, for a receive)."""
    if rank is None and group_rank is None and any_rank:
        return None
    rank = _root(g, what, name, rank, group_rank, default=None)
    if rank == g.rank:
        kind = "destination" if name == "dst" else "source"
        raise ValueError(f"{what} on rank {g.rank}: Invalid {kind} rank: {kind} rank should "
                         "not be the same as the rank of the current process.")
    return rank


def _tag(g: ProcessGroup, what: str, tag: Any) -> int:
    if isinstance(tag, bool) or not isinstance(tag, numbers.Integral) or not 0 <= tag < 2**15:
        raise ValueError(f"{what} on rank {g.rank}: tag={tag!r} must be an integer from 0 to "
                         "32767")
    return int(tag)


def isend(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0,
          group_dst: int | None = None) -> Work:
    """Start sending ``tensor`` to rank ``dst``; returns a :class:`Work` (``wait()`` before
    writing to the tensor again). Only ``dst`` takes part: it receives with :func:`recv`
    or :func:`irecv` (the same shape, dtype and ``tag``)."""
    g = _the_group(group, "isend")
    dst = _peer(g, "isend", "dst", dst, group_dst)
    array = _movable(tensor, f"isend(dst={dst})")
    return g.send(array, dst, _tag(g, "isend", tag))


def irecv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0,
          group_src: int | None = None) -> Work:
    """Start receiving into ``tensor`` from rank ``src`` (None: from any rank); returns a
    :class:`Work` (the values are there after ``wait()``; its ``source`` is the sender)."""
    g = _the_group(group, "irecv")
    src = _peer(g, "irecv", "src", src, group_src, any_rank=True)
    what = f"irecv(src={src})"
    array = _movable(tensor, what)
    work = g.recv(array, src, _tag(g, what, tag))

    def check_size() -> None:
        got = work.status.Get_count() if hasattr(work, "status") else array.nbytes
        if got != array.nbytes:
            raise RuntimeError(f"{what} on rank {g.rank}: rank {work.source} sent {got} bytes, "
                               f"but the tensor ({tensor.dtype} {list(tensor.shape)}) holds "
                               f"{array.nbytes}; send and receive tensors of one shape and "
                               "dtype")
    return work.then(check_size).then(_copy_back(tensor, array))


def send(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0,
         group_dst: int | None = None) -> None:
    """Send ``tensor`` to rank ``dst`` and wait until it has gone (see :func:`isend`)."""
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0,
         group_src: int | None = None) -> int:
    """Receive into ``tensor`` from rank ``src`` (None: from any rank); returns the
    sender's rank, as PyTorch's."""
    work = irecv(tensor, src, group, tag, group_src)
    work.wait()
    return work.source


class P2POp:
    """One send or receive for :func:`batch_isend_irecv`: ``P2POp(dist.isend, tensor,
    peer)`` or ``P2POp(dist.irecv, tensor, peer)``."""

    def __init__(self, op: Any, tensor: Tensor, peer: int | None = None, group: Any = None,
                 tag: int = 0, group_peer: int | None = None) -> None:
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``tinytrain.distributed.isend`` or ``tinytrain.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group
        self.tag, self.group_peer = tag, group_peer

    def __repr__(self) -> str:
        return f"P2POp({self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    """Start every send and receive of the list; returns their :class:`Work` objects. On
    the nccl backend they run as one NCCL group (so that pairs of ranks may send to each
    other first without waiting for each other)."""
    if not isinstance(p2p_op_list, list | tuple) or not p2p_op_list or \
            not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``tinytrain.distributed.P2POp``.")
    g = _the_group(p2p_op_list[0].group, "batch_isend_irecv")
    with g.batch():
        return [p.op(p.tensor, p.peer, p.group, p.tag, p.group_peer) for p in p2p_op_list]


__getattr__ = _missing.module_getattr("tinytrain.distributed", {
    "get_process_group": "tinytrain.distributed has one group, of every rank (new_group() "
                         "returns it)",
    "elastic": "start the ranks with mpiexec -n N python script.py, or python -m "
               "tinytrain.distributed.launch --nproc_per_node N script.py",
}, offer="tinytrain.distributed has all_reduce, reduce, broadcast, all_gather, "
         "all_gather_into_tensor, gather, scatter, reduce_scatter, reduce_scatter_tensor, "
         "all_to_all, all_to_all_single, the object collectives, barrier, monitored_barrier, "
         "send, recv, isend, irecv and batch_isend_irecv, on one group of every rank")

__all__ = [
    "Backend", "DefaultGroupError", "DistributedDataParallel", "GroupMember", "P2POp",
    "ProcessGroup", "ReduceOp", "Work", "get_global_rank", "get_node_local_rank",
    "get_process_group_ranks", "group", "is_torchelastic_launched",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list",
    "destroy_process_group", "gather", "gather_object", "get_backend", "get_local_rank",
    "get_rank", "get_world_size", "init_process_group", "irecv", "is_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available", "isend",
    "monitored_barrier", "new_group", "recv", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "scatter_object_list", "send",
]
