"""Starting the processes of a job: ``mpiexec``, ``--nproc``, and torchrun's command line.

tinytrain does not start processes itself: MPI does (``mpiexec -n 2 python ...``; MPICH and
mpi4py install from PyPI). On several machines it is the same command with a host file::

    mpiexec -n 8 -f hosts.txt python -m tinytrain.train        # MPICH (Open MPI: --hostfile)

On one machine this module is also a command with torchrun's spelling, which runs
``mpiexec`` for you (so does ``python -m tinytrain.distributed.run``)::

    python -m tinytrain.distributed.launch --nproc_per_node 2 train.py --epochs 3
    python -m tinytrain.distributed.launch --nproc 2 -m my_package.train

Each rank finds ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` in its
environment, as under torchrun (:mod:`tinytrain.distributed.job` sets them when
``tinytrain.distributed`` is imported); nothing is passed as ``--local-rank``.

What stops a whole job when one rank fails is in :mod:`tinytrain.distributed.job`.
"""

from __future__ import annotations

import argparse
import codecs
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tinytrain.distributed.job import (  # noqa: F401  (their home before; train.py uses them)
    abort_at_exit,
    abort_on_uncaught_exception,
    aborting,
    launched_world_size,
)


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


# --------------------------------------------------------------------------- the command


class _Terminated(KeyboardInterrupt):
    forward_signal = signal.SIGTERM  # (relaunch passes it on to mpiexec)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def build_parser(prog: str = "python -m tinytrain.distributed.launch") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run a training script as N ranks on this machine (through "
        "mpiexec), with torchrun's options and environment variables.")
    p.add_argument("--nproc_per_node", "--nproc-per-node", "--nproc", dest="nproc", type=int,
                   default=1, metavar="N", help="number of ranks (processes) to start "
                   "(default 1, as torchrun's)")
    p.add_argument("--nnodes", default="1", help="only 1: on several machines run mpiexec "
                   "with a host file")
    p.add_argument("--node_rank", "--node-rank", type=int, default=0, help="only 0")
    p.add_argument("--standalone", action="store_true", help="accepted (one machine)")
    p.add_argument("--use_env", "--use-env", action="store_true",
                   help="accepted (the variables are always set)")
    for name in ("master_addr", "master_port"):
        p.add_argument(f"--{name}", f"--{name.replace('_', '-')}", default=None,
                       help="accepted and unused: MPI finds the ranks")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the script as a module, as python -m does")
    p.add_argument("script", help="the training script (or module, with -m)")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m tinytrain.distributed.launch"
         ) -> int:
    """``python -m tinytrain.distributed.launch --nproc_per_node N script.py ARGS``: run
    ``mpiexec -n N python script.py ARGS`` and return its exit code."""
    p = build_parser(prog)
    args = p.parse_args(argv)
    if args.nproc <= 0:
        p.error(f"--nproc_per_node must be a positive integer, got {args.nproc}")
    if args.nnodes not in ("1", "1:1") or args.node_rank != 0:
        p.error(f"--nnodes {args.nnodes} --node_rank {args.node_rank}: this command starts the "
                "ranks of one machine; on several machines run mpiexec with a host file "
                "(mpiexec -n N -f hosts.txt python script.py)")
    if launched_world_size() > 1:
        p.error("this process is already one of several ranks started by mpiexec; run the "
                "script itself under mpiexec, or this command without mpiexec")
    target = ["-m", args.script] if args.module else [args.script]
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
    return relaunch(args.nproc, [*target, *args.script_args])


if __name__ == "__main__":
    sys.exit(main())
