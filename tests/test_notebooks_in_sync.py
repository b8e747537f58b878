"""Each chapter is a pair: the source ``notebooks/NN_slug.py`` (Jupytext percent format) and
the notebook ``NN_slug.ipynb`` made from it. Both must hold the same cells, so that what
reviewers read is what nbval runs; committed notebooks carry no outputs.

``make notebooks`` (``tools/sync_notebooks.py``) repairs every failure here."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from jupytext.compare import compare_notebooks

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from sync_notebooks import (  # noqa: E402
    HEADER,
    NOTEBOOKS,
    chapter_sources,
    read_chapter,
    staged_notebook,
)

SOURCES = chapter_sources()
COMMITTED = sorted(NOTEBOOKS.glob("*.ipynb")) + sorted((ROOT / "exercises").glob("*.ipynb"))


def test_every_chapter_is_a_source_and_a_notebook():
    sources = {p.stem for p in SOURCES}
    notebooks = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert sources, "no chapter sources notebooks/NN_*.py"
    assert not notebooks - sources, f"notebooks without a source .py: {notebooks - sources}"
    assert not sources - notebooks, "sources without a notebook: run `make notebooks`"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_source_starts_with_the_chapter_header(source):
    assert source.read_text().startswith(HEADER + "\n"), "run `make notebooks` to restore it"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_holds_the_cells_of_its_source(source):
    notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    # raises NotebookDifference naming the first cell that differs
    compare_notebooks(notebook, read_chapter(source), fmt="py:percent")


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_committed_notebook_has_no_outputs(path):
    cells = staged_notebook(path).cells  # (not a learner's working copy: see staged_notebook)
    with_outputs = [i for i, c in enumerate(cells)
                    if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not with_outputs, (f"cells {with_outputs} of the staged {path.name} have outputs: "
                              f"run `make notebooks` and stage it again")


def test_the_checks_read_the_staged_notebook_not_a_learners_working_copy(tmp_path, monkeypatch):
    """A learner's answers and saved outputs (unstaged) do not fail ``make test``; a staged
    notebook with outputs does, and outside git the file on disk is read."""
    import subprocess

    import sync_notebooks

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    path = tmp_path / "exercises" / "01.ipynb"
    path.parent.mkdir()
    clean = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise NotImplementedError")])
    nbformat.write(clean, path)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "course"], check=True)
    monkeypatch.setattr(sync_notebooks, "ROOT", tmp_path)
    answered = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x = 1", execution_count=1, outputs=[nbformat.v4.new_output("stream", text="1")])])
    nbformat.write(answered, path)
    assert staged_notebook(path).cells[0].source == "raise NotImplementedError"
    subprocess.run([*git, "add", "."], check=True)
    assert staged_notebook(path).cells[0].outputs  # staged: what the test checks
    other = tmp_path.parent / f"{tmp_path.name}_untracked.ipynb"  # outside the repository
    nbformat.write(answered, other)
    assert staged_notebook(other).cells[0].source == "x = 1"
