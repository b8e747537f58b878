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


@dataclass
class CellRun:
    """What one code cell did: its index, whether it is a checker, and its error if any."""

    index: int  # its place among the notebook's cells
    checker: bool
    error: tuple[str, str] | None  # (exception name, message)
    count: int = 0  # its execution count: what JupyterLab shows as [n] after a Run All


def run_notebook(path: Path, timeout: int = 600,
                 nb: nbformat.NotebookNode | None = None) -> list[CellRun]:
    """Execute the notebook at ``path`` (or ``nb``, as if it were there) in the folder of
    ``path``, continuing past errors."""
    nb = nbformat.read(path, as_version=4) if nb is None else nb
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(stderr=subprocess.DEVNULL)  # the kernel's own log; cells report via outputs
    runs = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():  # (empty: never run)
            continue
        errors = [(o.ename, o.evalue) for o in cell.outputs if o.output_type == "error"]
        runs.append(CellRun(i, CHECKER in cell.metadata.get("tags", []),
                            errors[0] if errors else None, cell.execution_count or 0))
    return runs


def report(path: Path) -> bool:
    """Print where each exercise of ``path`` stands; True when all passed."""
    print(f"{path.relative_to(EXERCISES.parent)}:")
    runs = run_notebook(path)
    number = 0
    ok = True
    chapter = path.name[:2].lstrip("0") or "0"
    for run, after in zip(runs, [*runs[1:], None]):
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
            else:
                # the whole message: np.testing's first line is empty, the mismatch below it
                lines = [line for line in message.splitlines() if line.strip()][:12]
                print(prefix + f"FAILED: {name}: " + "\n      ".join(lines))
        elif run.error is not None and after is not None and after.checker:
            ok = False  # the cell with the answer (its checker comes next) did not run
            print(f"  exercise {chapter}.{number + 1}: the cell with your answer (code cell "
                  f"[{run.count}]) raised {run.error[0]}: {run.error[1]}")
        elif run.error is not None:
            ok = False
            print(f"  code cell [{run.count}] (not an exercise) failed: {run.error[0]}: "
                  f"{run.error[1]}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=int,
                        help="chapter numbers, e.g. 3 (default: all)")
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
    results = [report(p) for p in paths]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
