"""Write the learner's copy of every chapter: ``exercises/NN_slug.ipynb``, solutions removed.

In a chapter source an exercise is a function whose body holds the reference solution
between two marker lines (nbgrader's convention)::

    def broadcast_shape(sa, sb):
        \"\"\"The shape of ``a + b`` ...\"\"\"
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

and the next cell, tagged ``checker``, tests it against the package, NumPy or PyTorch. The
learner's copy replaces every marked block with ``raise NotImplementedError("Exercise N.k:
...")``, where N is the chapter and k counts the cells that hold solutions (a cell may hold
several, e.g. the methods of one class). It also starts with a note for the learner and, so
that ``import figures`` works from ``exercises/``, puts ``notebooks/`` on the import path.

A copy is the learner's to edit, so it is never overwritten once it differs from what was last
written there: each copy records, in its notebook metadata, a hash of the cells it was written
with, and a copy whose cells no longer match that hash (answers, notes) is left alone unless
``--force`` is given, whatever the file times say. A copy from before the hash was recorded
counts as changed when its cells differ from a fresh generation.

Usage::

    python tools/make_exercises.py            # write what is out of date
    python tools/make_exercises.py --check    # exit 1 and name what is out of date
    python tools/make_exercises.py --force 3  # start chapter 3's copy afresh (answers lost)
    python tools/make_exercises.py --force    # every copy, edited or not
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell
from sync_notebooks import (
    ROOT,
    EditedNotebook,
    build_notebook,
    cells_of,
    chapter_sources,
    read_chapter,
    write_text,
)

EXERCISES = ROOT / "exercises"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CHECKER = "checker"
#: Where a copy's notebook metadata records the hash of the cells it was written with.
GENERATED = "tinytrain_generated_cells_sha256"


@dataclass
class Exercise:
    """One exercise of a chapter: the cell with its solution(s) and the checker after it."""

    number: str  # "N.k"
    cell: int  # index of the cell holding the solution blocks
    functions: list[str] = field(default_factory=list)  # the functions the learner writes


def chapter_number(source: Path) -> int:
    return int(source.name[:2])


def has_exercises(source: Path) -> bool:
    """Whether a chapter has exercises (and so a learner's copy): all but chapter 0, the
    orientation, which teaches no function to write; its copy would be the chapter itself."""
    return chapter_number(source) != 0


def exercise_sources() -> list[Path]:
    """The chapter sources that have exercises, in chapter order."""
    return [source for source in chapter_sources() if has_exercises(source)]


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef]]:
    """Every function in ``tree`` with its qualified name (``Class.method``)."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + child.name, child))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def stub_solutions(source: str, number: str, where: str = "cell") -> tuple[str, list[str]]:
    """``source`` with each solution block replaced by a stub, and the functions they were in.

    Raises:
        ValueError: naming ``where``, for a marker without its partner, a nested block, or a
            block that is not inside a function body.
    """
    lines = source.split("\n")
    functions = _functions(ast.parse(source))
    out: list[str] = []
    names: list[str] = []
    begin = None
    for lineno, line in enumerate(lines, start=1):
        marker = line.strip()
        if marker == BEGIN:
            if begin is not None:
                raise ValueError(f"{where}, line {lineno}: {BEGIN} inside another solution")
            begin = lineno
            indent = line[: len(line) - len(line.lstrip())]
        elif marker == END:
            if begin is None:
                raise ValueError(f"{where}, line {lineno}: {END} without {BEGIN}")
            inside = [(name, fn) for name, fn in functions
                      if fn.lineno < begin <= fn.end_lineno]
            if not inside:
                raise ValueError(f"{where}, line {begin}: a solution must sit inside a "
                                 f"function body")
            name, fn = min(inside, key=lambda item: item[1].end_lineno - item[1].lineno)
            doc = ast.get_docstring(fn)
            what = f"write {name}({ast.unparse(fn.args)})"
            if doc:
                first = doc.splitlines()[0]
                keep = first[:2].isupper()  # an acronym ("CUDA C ...") keeps its capitals
                what += ": " + (first if keep else first[0].lower() + first[1:])
            out.append(f"{indent}raise NotImplementedError({f'Exercise {number}: {what}'!r})")
            names.append(name)
            begin = None
        elif begin is None:
            out.append(line)
    if begin is not None:
        raise ValueError(f"{where}, line {begin}: {BEGIN} without {END}")
    return "\n".join(out), names


def find_exercises(nb: nbformat.NotebookNode, chapter: int, name: str = "") -> list[Exercise]:
    """The exercises of a chapter notebook, numbered in order.

    Raises:
        ValueError: a solution block is malformed (see :func:`stub_solutions`), or a checker
            cell does not directly follow its exercise.
    """
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or BEGIN not in cell.source:
            continue
        number = f"{chapter}.{len(found) + 1}"
        _, functions = stub_solutions(cell.source, number, f"{name} cell {i}")
        found.append(Exercise(number, i, functions))
    exercise_cells = {e.cell for e in found}
    for i, cell in enumerate(nb.cells):
        is_checker = CHECKER in cell.metadata.get("tags", [])
        if i in exercise_cells and not (
                i + 1 < len(nb.cells) and CHECKER in nb.cells[i + 1].metadata.get("tags", [])):
            raise ValueError(f"{name} cell {i}: exercise without a checker cell right after it")
        if is_checker and i - 1 not in exercise_cells:
            raise ValueError(f"{name} cell {i}: checker cell that does not follow an exercise")
    return found


def learner_notebook(source: Path) -> nbformat.NotebookNode:
    """The learner's copy of a chapter: solutions stubbed, a note and the import path first."""
    nb = read_chapter(source)
    chapter = chapter_number(source)
    exercises = find_exercises(nb, chapter, source.name)
    for ex in exercises:
        cell = nb.cells[ex.cell]
        cell.source, _ = stub_solutions(cell.source, ex.number)
    numbers = (f"exercises {exercises[0].number} to {exercises[-1].number}" if exercises
               else "no exercises")
    note = new_markdown_cell(
        f"**Exercise copy of chapter {chapter}** ({numbers}). Each exercise is a function whose "
        f"body is `raise NotImplementedError(...)`: write it, run its cell, then run the checker "
        f"cell below it. The rest of the chapter runs without your answers. From a shell, "
        f"`make check-exercises CH={chapter:02d}` checks all of them. The chapter with its "
        f"solutions is [notebooks/{source.stem}.ipynb](../notebooks/{source.stem}.ipynb).")
    path = new_code_cell('import sys\n\nsys.path.insert(0, "../notebooks")  # for figures.py, '
                         'the chapters\' plotting helpers')
    nb.cells[:0] = [note, path]
    # A learner's copy is a notebook only: Jupytext's pairing (the chapters' .py source) would
    # make JupyterLab write an exercises/*.py beside it at every save.
    nb.metadata.pop("jupytext", None)
    return nb


def cells_hash(nb: nbformat.NotebookNode) -> str:
    """A hash of what a notebook's cells say (their types and sources, not outputs or ids)."""
    return hashlib.sha256(json.dumps(cells_of(nb)).encode()).hexdigest()


def edited(copy: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> bool:
    """Whether a learner's copy holds edits that writing ``fresh`` over it would lose: its
    cells differ from those it was last written with (from a fresh generation, for a copy
    that recorded no hash) and from ``fresh``'s."""
    if cells_of(copy) == cells_of(fresh):
        return False
    recorded = copy.metadata.get(GENERATED)
    return recorded is None or recorded != cells_hash(copy)


def sync(source: Path, check: bool, force: bool = False) -> list[str]:
    """Bring ``exercises/<chapter>.ipynb`` up to date; return it if it was (or would be)
    written.

    Raises:
        EditedNotebook: the learner's copy was edited since it was written (someone's answers,
            most likely; see :func:`edited`) and ``force`` is false: it is left alone.
    """
    target = EXERCISES / (source.stem + ".ipynb")
    nb = learner_notebook(source)
    nb.metadata[GENERATED] = cells_hash(nb)
    if not force and target.exists() and edited(nbformat.read(target, as_version=4), nb):
        raise EditedNotebook(
            f"{target.relative_to(ROOT)} has cells that differ from what was last generated "
            f"(your answers?), so it was not overwritten: copy it elsewhere first, or start "
            f"it afresh with python tools/make_exercises.py --force {source.stem[:2]} (that "
            f"chapter only)")
    text = build_notebook(nb, target)
    if target.exists() and target.read_text() == text:
        return []
    if not check:
        write_text(target, text)
    return [str(target.relative_to(ROOT))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report what is out of date")
    parser.add_argument("--force", action="store_true",
                        help="overwrite learner copies even if they were edited")
    parser.add_argument("chapters", nargs="*", type=int, metavar="N",
                        help="only these chapters (e.g. 3 or 03); default: all")
    args = parser.parse_args(argv)
    sources = exercise_sources()
    chosen = [s for s in sources if int(s.stem[:2]) in args.chapters] if args.chapters \
        else sources
    missing = set(args.chapters) - {int(s.stem[:2]) for s in chosen}
    if missing:
        print(f"no chapter with exercises numbered {sorted(missing)}; there are "
              f"{[int(s.stem[:2]) for s in sources]}", file=sys.stderr)
        return 2
    try:
        stale = [path for source in chosen for path in sync(source, args.check, args.force)]
    except (ValueError, EditedNotebook) as err:
        print(err, file=sys.stderr)
        return 1
    expected = {s.stem + ".ipynb" for s in sources}
    others = sorted(p for p in EXERCISES.glob("*.ipynb") if p.name not in expected)
    # A learner's own copy of a chapter (JupyterLab's "Duplicate": 01_tensors-Copy1.ipynb) is
    # left alone; a notebook of no chapter at all is a stale output of a renamed chapter.
    copies = [p for p in others if any(p.stem.startswith(s.stem) for s in sources)]
    orphans = [p for p in others if p not in copies]
    for path in stale:
        print(("out of date: " if args.check else "wrote ") + path)
    for path in copies:
        print(f"left alone: {path.relative_to(ROOT)} (your copy of a chapter, not generated)")
    for path in orphans:
        print(f"{path.relative_to(ROOT)} has no chapter source: delete it", file=sys.stderr)
    return 1 if orphans or (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
