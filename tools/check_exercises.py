"""Check your answers: run a chapter's exercise copy and say, per exercise, where it stands.

Runs ``exercises/NN_slug.ipynb`` as you saved it, cell by cell, in a fresh kernel (errors do
not stop the run), then reports each exercise as passed, not done yet (its stub still raises
``NotImplementedError``) or failed (with the checker's message). A cell outside the exercises
that fails is reported too: the chapter is meant to run whatever your answers are.

Usage::

    python tools/check_exercises.py 03         # chapter 3 (or: make check-exercises CH=03)
    python tools/check_exercises.py            # every chapter

Exit status 0 when every exercise of the chosen chapters passes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from make_exercises import CHECKER, EXERCISES
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

#: How long one cell may run before it is interrupted (seconds): an answer that loops
#: forever is reported as such instead of holding the check up for good.
CELL_TIMEOUT = 600


@dataclass
class CellRun:
    """What one code cell did: its index, whether it is a checker, and its error if any."""

    index: int  # its place among the notebook's cells
    checker: bool
    error: tuple[str, str] | None  # (exception name, message)
    count: int = 0  # its execution count: what JupyterLab shows as [n] after a Run All
    ran: bool = True  # False: the kernel died before this cell could run


#: The error given to the cell that was running when the kernel died (a crash, the memory
#: running out, ``os._exit``), and to the cells after it, which never ran.
KERNEL_DIED = "KernelDied"
NOT_RUN = "NotRun"


def run_notebook(path: Path, timeout: int = CELL_TIMEOUT,
                 nb: nbformat.NotebookNode | None = None) -> list[CellRun]:
    """Execute the notebook at ``path`` (or ``nb``, as if it were there) in the folder of
    ``path``, continuing past errors. A cell that runs longer than ``timeout`` seconds is
    interrupted (its error is a ``KeyboardInterrupt``); if the kernel dies, the cell that was
    running gets the error ``KERNEL_DIED`` and the cells after it ``NOT_RUN``."""
    nb = nbformat.read(path, as_version=4) if nb is None else nb
    started: list[int] = []
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True,
                            on_cell_start=lambda cell, cell_index: started.append(cell_index),
                            resources={"metadata": {"path": str(path.parent)}})
    died = None
    try:
        client.execute(stderr=subprocess.DEVNULL)  # the kernel's log; cells report via outputs
    except DeadKernelError:
        died = started[-1] if started else -1
    runs = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():  # (empty: never run)
            continue
        errors = [(o.ename, o.evalue) for o in cell.outputs if o.output_type == "error"]
        run = CellRun(i, CHECKER in cell.metadata.get("tags", []),
                      errors[0] if errors else None, cell.execution_count or 0)
        if died is not None and i == died:
            run.count = max((r.count for r in runs), default=0) + 1  # it never got one
            run.error = (KERNEL_DIED, "the Python kernel died while this cell ran (a crash, "
                         "the memory running out, or exit() in the cell)")
        elif died is not None and i > died:
            run.error, run.ran = (NOT_RUN, "not run: the kernel had died"), False
        runs.append(run)
    return runs


def _describe(error: tuple[str, str], timeout: int) -> str:
    """``error`` as a line of the report."""
    name, message = error
    if name == "KeyboardInterrupt":
        return (f"did not finish within {timeout} s and was interrupted (a loop that never "
                "ends? a slow machine: --timeout)")
    if name == KERNEL_DIED:
        return message
    return f"raised {name}: {message}"


def report(path: Path, timeout: int = CELL_TIMEOUT) -> bool:
    """Print where each exercise of ``path`` stands; True when all passed."""
    print(f"{path.relative_to(EXERCISES.parent)}:")
    runs = run_notebook(path, timeout)
    number = 0
    ok = True
    chapter = path.name[:2].lstrip("0") or "0"
    for run, after in zip(runs, [*runs[1:], None]):
        if not run.ran:
            ok = False
            if run.checker:
                number += 1
                print(f"  exercise {chapter}.{number}: not checked: the kernel had died "
                      "(see above); fix that cell and run the check again")
            continue
        if run.checker:
            number += 1
            prefix = f"  exercise {chapter}.{number}: "
            if run.error is None:
                print(prefix + "passed")
                continue
            ok = False
            name, message = run.error
            if name == "NotImplementedError" and message.startswith("Exercise"):
                print(prefix + "not done yet")
            elif name in ("KeyboardInterrupt", KERNEL_DIED):
                print(prefix + "FAILED: the checker " + _describe(run.error, timeout))
            else:
                # the whole message: np.testing's first line is empty, the mismatch below it
                lines = [line for line in message.splitlines() if line.strip()][:12]
                print(prefix + f"FAILED: {name}: " + "\n      ".join(lines))
        elif run.error is not None and after is not None and after.checker:
            ok = False  # the cell with the answer (its checker comes next) did not run
            print(f"  exercise {chapter}.{number + 1}: the cell with your answer (code cell "
                  f"[{run.count}]) {_describe(run.error, timeout)}")
        elif run.error is not None:
            ok = False
            print(f"  code cell [{run.count}] (not an exercise) {_describe(run.error, timeout)}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=int,
                        help="chapter numbers, e.g. 3 (default: all)")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT,
                        help=f"seconds a cell may run before it is interrupted "
                             f"(default {CELL_TIMEOUT})")
    args = parser.parse_args(argv)
    paths = sorted(EXERCISES.glob("[0-9][0-9]_*.ipynb"))
    if args.chapters:
        wanted = {f"{c:02d}" for c in args.chapters}
        missing = wanted - {p.name[:2] for p in paths}
        if missing:
            print(f"no exercise copy for chapter(s) {', '.join(sorted(missing))} in "
                  f"{EXERCISES}", file=sys.stderr)
            return 2
        paths = [p for p in paths if p.name[:2] in wanted]
    results = [report(p, args.timeout) for p in paths]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
