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

from sync_notebooks import HEADER, NOTEBOOKS, chapter_sources, read_chapter  # noqa: E402

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
    cells = nbformat.read(path, as_version=4).cells
    with_outputs = [i for i, c in enumerate(cells)
                    if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not with_outputs, f"cells {with_outputs} have outputs: run `make notebooks`"
