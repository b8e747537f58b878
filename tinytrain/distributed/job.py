"""This process as one rank of an MPI job: what the launcher's environment says, and ending
the whole job when one rank fails.

``mpiexec`` starts every rank with environment variables that say which rank it is (MPICH's
``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``; Open MPI's
``OMPI_COMM_WORLD_RANK`` and friends; PMIx's ``PMIX_RANK``). Reading them needs no MPI call.
Importing :mod:`tinytrain.distributed` in such a process calls :func:`prepare_rank`, which
at once, before the program's next line:

* sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` as ``torchrun``
  does (those the launcher's variables say: a size it does not give is left as it is;
  ``LOCAL_RANK`` also from ``PMI_LOCAL_RANK``, ``PALS_LOCAL_RANKID`` or ``SLURM_LOCALID``
  when it is not set already), so a script written for torchrun may read
  ``int(os.environ["LOCAL_RANK"])`` before ``init_process_group`` (which sets them again,
  from MPI itself);
* installs :func:`abort_on_uncaught_exception`: an uncaught exception in any rank, even
  before ``init_process_group``, stops every rank, instead of leaving the others waiting in
  MPI's start-up or in a collective for a rank that is gone.

Two rules keep a job from hanging when one rank fails:

* **An uncaught exception in any rank aborts every rank** (as ``python -m mpi4py`` does):
  the rank that raised calls ``MPI_Abort`` when it exits, and mpiexec then stops the
  others. :func:`abort_at_exit` does the same for a non-zero exit code (the training
  command uses it). A rank that ends with ``sys.exit(code)`` before ``init_process_group``
  is not covered (Python tells no hook about it): the others wait in their start-up until
  their ``init_process_group`` timeout.
* ``mpiexec`` itself stops every rank when one dies (even by SIGKILL), and forwards Ctrl-C
  (SIGINT) to all of them.

Processes a rank starts (``os.system``, ``subprocess``, a fork) inherit the launcher's
variables but are not ranks: they get neither the variables' translation nor the hook. A
script run under mpiexec that never calls ``init_process_group`` still aborts the job when
one of its ranks raises (after up to :data:`JOIN_TO_ABORT` s): the hook cannot know that
the script would not have started MPI.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

#: The launchers' variables, first found wins: MPICH (Hydra), Open MPI, PMIx (Slurm, PRRTE),
#: Cray PALS; Slurm's own (``srun``) where the MPI ones say nothing.
RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PALS_RANKID")
_WORLD_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
#: Slurm's size of the job step (``srun``), read when a rank variable above is set (in a
#: batch script's own step, ``SLURM_NTASKS`` counts tasks that are not this process's).
_SLURM_SIZE_VARS = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
_LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")
#: Further launchers' local ranks, used only where ``LOCAL_RANK`` is not set already.
_LAUNCHER_LOCAL_RANK_VARS = ("PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "SLURM_LOCALID")
#: A task's rank as its launcher numbers it, MPI or not (``srun`` without MPI wire-up).
_TASK_RANK_VARS = (*RANK_VARS, "SLURM_PROCID")

#: Seconds a rank that failed before MPI started waits to join MPI's start-up (where the
#: other ranks wait for it) so that it can abort the job cleanly; after that it ends itself
#: by a signal, which makes mpiexec stop the others too.
JOIN_TO_ABORT = 10


def _launcher_value(names: tuple[str, ...]) -> int | None:
    for var in names:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def started_by_mpi_launcher() -> bool:
    """True when an MPI launcher (mpiexec, srun) started this process (read from its
    environment: no MPI call)."""
    return _launcher_value(RANK_VARS) is not None


def _launcher_world_size() -> int | None:
    """How many processes the launcher started, from its environment; None when it does
    not say (then ``WORLD_SIZE`` is left as it is)."""
    size = _launcher_value(_WORLD_SIZE_VARS)
    if size is None and started_by_mpi_launcher():
        size = _launcher_value(_SLURM_SIZE_VARS)  # srun --mpi=pmix sets PMIX_RANK, no size
    return size


def launched_world_size() -> int:
    """How many processes the launcher (mpiexec, srun) started, read from its environment;
    1 when this process was not started by one. Does not initialise MPI."""
    return _launcher_world_size() or 1


def launcher_says_several() -> str | None:
    """The launcher's variables that make this process one task of several (a size above
    1, or a rank other than 0), as ``NAME=value`` text; None when none does. ``srun``
    without MPI wire-up sets them, while each task's MPI sees a world of one."""
    sizes = (*_WORLD_SIZE_VARS, "SLURM_STEP_NUM_TASKS")
    found = [f"{var}={os.environ[var]}" for var in (*_TASK_RANK_VARS, *sizes)
             if os.environ.get(var, "").isdigit()
             and int(os.environ[var]) > (1 if var in sizes else 0)]
    return ", ".join(found) or None


def set_rank_environment(rank: int, world_size: int, local_rank: int | None,
                         local_world_size: int | None) -> None:
    """``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` in ``os.environ``, as
    torchrun sets them (those not known are left as they are)."""
    for name, value in (("RANK", rank), ("WORLD_SIZE", world_size), ("LOCAL_RANK", local_rank),
                        ("LOCAL_WORLD_SIZE", local_world_size)):
        if value is not None:
            os.environ[name] = str(value)


#: Set by the rank itself to its pid: a process it starts (a helper script, ``os.system``)
#: inherits the launcher's variables too, but it is not a rank, and must not join or abort
#: the job when it fails.
_RANK_PID = "TINYTRAIN_RANK_PID"


def prepare_rank() -> None:
    """Under an MPI launcher: torchrun's variables and the abort hook (see the module
    docstring). Elsewhere, and in a process a rank started, nothing. Makes no MPI call."""
    rank = _launcher_value(RANK_VARS)
    if rank is None or os.environ.get(_RANK_PID, str(os.getpid())) != str(os.getpid()):
        return
    os.environ[_RANK_PID] = str(os.getpid())
    local_rank = _launcher_value(_LOCAL_RANK_VARS)
    if local_rank is None and "LOCAL_RANK" not in os.environ:
        local_rank = _launcher_value(_LAUNCHER_LOCAL_RANK_VARS)
    set_rank_environment(rank, _launcher_world_size(), local_rank,
                         _launcher_value(_LOCAL_SIZE_VARS))
    abort_on_uncaught_exception()


_aborting = False


def abort_at_exit(status: Any) -> None:
    """Make this rank call ``MPI_Abort(status)`` when Python exits (mpiexec then stops every
    rank), instead of ``MPI_Finalize``, which would wait for ranks that may never come.
    ``status`` is an exit code, or the exception that ends the process."""
    global _aborting
    from mpi4py.run import set_abort_status

    _aborting = True
    set_abort_status(status)


def aborting() -> bool:
    """True once :func:`abort_at_exit` was called (then nothing collective may run)."""
    return _aborting


def abort_on_uncaught_exception() -> None:
    """Install a ``sys.excepthook`` that prints the traceback, then aborts every rank.

    A rank that fails before MPI started (before ``init_process_group``) first joins MPI's
    start-up, where the other ranks wait for it (it completes once every rank is there),
    so that it can abort them; if that takes more than :data:`JOIN_TO_ABORT` seconds (the
    others are still busy before their own start-up), an alarm ends it by SIGALRM instead,
    and mpiexec stops the others for that."""
    if getattr(sys.excepthook, "_tinytrain_abort", False):
        return
    previous, rank_pid = sys.excepthook, os.getpid()

    def hook(kind: type, value: BaseException, tb: Any) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        if os.getpid() != rank_pid:  # a fork of the rank (a worker): not the rank itself
            return
        if started_by_mpi_launcher() and "mpi4py.MPI" not in sys.modules:
            _join_mpi_start_up()
        try:
            abort_at_exit(value)
        except ImportError:  # no mpi4py: no MPI job to stop
            pass

    hook._tinytrain_abort = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def _join_mpi_start_up() -> None:
    """Initialise MPI (importing mpi4py.MPI does), at most :data:`JOIN_TO_ABORT` s."""
    previous = signal.signal(signal.SIGALRM, signal.SIG_DFL)  # (the kernel's: no Python needed)
    signal.alarm(JOIN_TO_ABORT)
    try:
        from mpi4py import MPI  # noqa: F401
    except ImportError:
        pass
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
