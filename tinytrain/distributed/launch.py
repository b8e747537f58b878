"""Starting and stopping the processes of a job: ``mpiexec``, ``--nproc``, and aborting.

tinytrain does not start processes itself: MPI does (``mpiexec -n 2 python ...``; MPICH and
mpi4py install from PyPI). On several machines it is the same command with a host file::

    mpiexec -n 8 -f hosts.txt python -m tinytrain.train        # MPICH (Open MPI: --hostfile)

Two rules keep a job from hanging when one rank fails:

* **An uncaught exception in any rank aborts every rank** (as ``python -m mpi4py`` does):
  :func:`abort_on_uncaught_exception` makes the rank that raised call ``MPI_Abort`` when it
  exits, and mpiexec then stops the others, instead of leaving them waiting forever in a
  collective. :func:`abort_at_exit` does the same for a non-zero exit code.
* ``mpiexec`` itself stops every rank when one dies (even by SIGKILL), and forwards Ctrl-C
  (SIGINT) to all of them.
"""

from __future__ import annotations

import codecs
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

# Environment variables in which launchers announce the number of processes.
_WORLD_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")  # MPICH, Open MPI


def launched_world_size() -> int:
    """How many processes the launcher (mpiexec) started, read from its environment; 1
    when this process was not started by one. Does not initialise MPI."""
    for var in _WORLD_SIZE_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def find_mpiexec() -> str:
    """The ``mpiexec`` to launch with: ``$TINYTRAIN_MPIEXEC``, else the one installed next
    to this Python (pip's mpich puts it in the environment's ``bin/``), else on ``PATH``."""
    candidates = [os.environ.get("TINYTRAIN_MPIEXEC"),
                  str(Path(sys.executable).parent / "mpiexec"), shutil.which("mpiexec")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError(
        "no mpiexec found: install MPI with `pip install mpi4py mpich` (or put your MPI's "
        "mpiexec on PATH, or set TINYTRAIN_MPIEXEC)")


def mpiexec_command(nproc: int, args: list[str]) -> list[str]:
    """``mpiexec -n N python ARGS``."""
    return [find_mpiexec(), "-n", str(nproc), sys.executable, *args]


def rank_environment(threads: int) -> dict[str, str]:
    """This environment with, unless set already, ``OMP_NUM_THREADS`` (and the BLAS
    libraries' variables) at ``threads``: each rank's share of the cores, read by NumPy's
    BLAS and tinytrain's kernels when they load. mpiexec passes it on to the ranks."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(threads))
    return env


def relaunch(nproc: int, args: list[str]) -> int:
    """Run ``python ARGS`` as ``nproc`` MPI processes and return mpiexec's exit code.

    On Ctrl-C (or another KeyboardInterrupt; its ``forward_signal`` attribute, if any, names
    the signal), returns 128 + the signal's number within 30 s (0 if the run had finished
    anyway). A terminal's Ctrl-C reaches mpiexec and the ranks too, so then they first get
    10 s to stop cleanly (passing it on at once would be a second Ctrl-C to mpiexec, which
    aborts the ranks where they are); a signal that reached only this process (``kill``, a
    scheduler's SIGTERM) is passed on to mpiexec at once. After 20 s more, mpiexec is killed.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    proc = subprocess.Popen(mpiexec_command(nproc, args),
                            env=rank_environment(max(1, (cores or 1) // nproc)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    copiers = [threading.Thread(target=_copy_output, args=(pipe, name), daemon=True)
               for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
    for copier in copiers:
        copier.start()
    try:
        return proc.wait()
    except KeyboardInterrupt as exc:
        sig = getattr(exc, "forward_signal", signal.SIGINT)
        from_terminal = sig == signal.SIGINT and _in_terminal_foreground()
        if not from_terminal:
            proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            if from_terminal:
                proc.send_signal(sig)
            try:
                rc = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
        return 0 if rc == 0 else 128 + sig
    finally:
        for copier in copiers:  # (they end when mpiexec's pipes close: after its last line)
            copier.join(timeout=5)


def _copy_output(pipe: Any, name: str) -> None:
    """Copy what mpiexec writes, as it comes, to this process's ``sys.stdout`` or
    ``sys.stderr`` (whatever they are when it is written: the training command's guarded
    streams). mpiexec writes into a pipe that this process reads, not into the caller's
    stdout: if that reader goes away (``... --nproc 2 | head``), mpiexec would die of SIGPIPE
    and take the ranks with it, mid-run, silently. A stream that fails is given up; the
    pipe is still read to its end, so that mpiexec never blocks on it."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    alive = True
    with pipe:
        while chunk := os.read(pipe.fileno(), 1 << 16):
            if alive:
                try:
                    stream = getattr(sys, name)
                    stream.write(decoder.decode(chunk))
                    stream.flush()
                except (OSError, ValueError, AttributeError):  # closed, or None
                    alive = False


def _in_terminal_foreground() -> bool:
    """True when this process runs in its terminal's foreground (where Ctrl-C signals the
    whole process group, mpiexec and the ranks included)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):  # no terminal, or not a POSIX system
        return False


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
    """Install a ``sys.excepthook`` that prints the traceback, then aborts every rank."""
    if getattr(sys.excepthook, "_tinytrain_abort", False):
        return
    previous = sys.excepthook

    def hook(kind: type, value: BaseException, tb: Any) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        abort_at_exit(value)

    hook._tinytrain_abort = True  # type: ignore[attr-defined]
    sys.excepthook = hook
