"""Write every chapter's notebook from its source: ``notebooks/NN_slug.py`` -> ``NN_slug.ipynb``.

A chapter's source is a Jupytext percent-format script (``# %%`` starts a code cell,
``# %% [markdown]`` a markdown cell), paired with its notebook by the header's
``formats: ipynb,py:percent``. Edit either side: the ``.py`` in any editor, or the notebook
in JupyterLab, where Jupytext saves both files. Then run this script (``make notebooks``):
it rewrites each ``.ipynb`` from its ``.py`` without outputs, keeps the cell ids of cells that
did not move (so a diff shows only what changed), and puts the header back to the one below
(JupyterLab adds version details to it).

Usage::

    python tools/sync_notebooks.py            # write what is out of date
    python tools/sync_notebooks.py --check    # exit 1 and name what is out of date

The learner's copies in ``exercises/`` are made from the same sources by
``tools/make_exercises.py``; ``make notebooks`` runs both.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import sys
from pathlib import Path

import jupytext
import nbformat

from tinytrain.data.idx import atomic_write_bytes

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
FORMAT = "py:percent"

#: The header every chapter source starts with (jupytext writes and reads it).
HEADER = """\
# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---
"""
METADATA = {
    "jupytext": {"formats": "ipynb,py:percent"},
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
}


def chapter_sources() -> list[Path]:
    """Every chapter source, ``notebooks/NN_slug.py``, in chapter order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def staged_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook ``path`` as git's index holds it (what a commit takes), else as on disk.

    The tests of committed notebooks read this, so that a learner's answers in
    ``exercises/`` and outputs JupyterLab saved into a chapter, neither meant to be
    committed, do not fail ``make test``; what is staged or committed is checked (in a
    fresh clone, as CI runs, both are the files on disk)."""
    import subprocess

    try:
        text = subprocess.run(["git", "show", f":{path.resolve().relative_to(ROOT)}"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, ValueError, subprocess.CalledProcessError):  # no git, untracked
        return nbformat.read(path, as_version=4)
    return nbformat.reads(text, as_version=4)


def read_chapter(source: Path) -> nbformat.NotebookNode:
    """The notebook a chapter source describes: its cells, and the fixed metadata."""
    nb = jupytext.read(source, fmt=FORMAT)
    nb.metadata = nbformat.from_dict(METADATA)
    return nb


def with_header(text: str) -> str:
    """``text`` (a percent-format script) with its YAML header replaced by :data:`HEADER`."""
    if text.startswith("# ---\n"):
        end = text.index("\n# ---\n", 5) + len("\n# ---\n")
        text = text[end:]
    return HEADER + "\n" + text.lstrip("\n")


def stable_ids(cells: list, old_cells: list) -> None:
    """Give ``cells`` the ids of the ``old_cells`` they correspond to, new ones a content hash.

    Unchanged cells keep their id wherever they moved to; a cell edited in place keeps the id
    of the cell it replaced; a new cell gets a short hash of its text.
    """
    def key(c):
        return (c.cell_type, c.source)

    match: dict[int, int] = {}
    sm = difflib.SequenceMatcher(a=[key(c) for c in old_cells], b=[key(c) for c in cells],
                                 autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            match.update(zip(range(j1, j2), range(i1, i2)))
    used: set[str] = set()
    for j, cell in enumerate(cells):
        cid = old_cells[match[j]].get("id") if j in match else None
        if not cid or cid in used:
            digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()
            cid = next(digest[k:k + 8] for k in range(len(digest)) if digest[k:k + 8] not in used)
        cell["id"] = cid
        used.add(cid)


def build_notebook(nb: nbformat.NotebookNode, target: Path) -> str:
    """The text of ``target`` for notebook ``nb``: no outputs, ids kept from ``target``."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    old = nbformat.read(target, as_version=4).cells if target.exists() else []
    stable_ids(nb.cells, old)
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def cells_of(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """What a notebook says: the type and text of each cell."""
    return [(c.cell_type, c.source) for c in nb.cells]


def write_text(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file, so an interrupted run leaves the old file."""
    atomic_write_bytes(path, text.encode())


class EditedNotebook(Exception):
    """A notebook was edited without Jupytext: rewriting it from its source would lose that."""


def sync(source: Path, check: bool) -> list[str]:
    """Bring ``source`` and its notebook up to date; return what was (or would be) written.

    Raises:
        EditedNotebook: the notebook's cells differ from the source's and the notebook is the
            newer file (edited in a Jupyter without Jupytext): it is left alone.
    """
    changed = []
    text = source.read_text()
    if with_header(text) != text:
        changed.append(str(source.relative_to(ROOT)))
        if not check:
            write_text(source, with_header(text))
    target = source.with_suffix(".ipynb")
    nb = read_chapter(source)
    if (target.exists() and target.stat().st_mtime > source.stat().st_mtime
            and cells_of(nbformat.read(target, as_version=4)) != cells_of(nb)):
        rel = target.relative_to(ROOT)
        raise EditedNotebook(
            f"{rel} is newer than {source.name} and its cells differ: it was edited without "
            f"Jupytext. Take its cells into the source first with `jupytext --to py:percent "
            f"{rel}` (or discard them with `touch {source.relative_to(ROOT)}`), then run this "
            f"again.")
    new = build_notebook(nb, target)
    if not target.exists() or target.read_text() != new:
        changed.append(str(target.relative_to(ROOT)))
        if not check:
            write_text(target, new)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report what is out of date")
    args = parser.parse_args(argv)
    try:
        stale = [path for source in chapter_sources() for path in sync(source, args.check)]
    except EditedNotebook as err:
        print(err, file=sys.stderr)
        return 1
    orphans = [nb for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
               if not nb.with_suffix(".py").exists()]
    for path in stale:
        print(("out of date: " if args.check else "wrote ") + path)
    for nb in orphans:
        print(f"{nb.relative_to(ROOT)} has no source {nb.with_suffix('.py').name}: convert it "
              f"with `jupytext --to py:percent {nb.relative_to(ROOT)}`", file=sys.stderr)
    return 1 if orphans or (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
