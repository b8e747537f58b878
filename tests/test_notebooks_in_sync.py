"""Every chapter has a source that reviews read: either a generator tools/build_notebook_NN.py
(the committed notebook must be exactly what it makes), or a Jupytext percent script
notebooks/NN_slug.py paired with the notebook (both must hold the same cells)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILDERS = sorted((ROOT / "tools").glob("build_notebook_*.py"))
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_every_notebook_has_a_builder_or_a_source():
    built = {b.stem.removeprefix("build_notebook_") for b in BUILDERS}
    paired = {p.name[:2] for p in SOURCES}
    chapters = {p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert chapters and chapters == built | paired and not built & paired


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda p: p.stem)
def test_notebook_matches_its_builder(builder):
    r = subprocess.run([sys.executable, str(builder), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_holds_the_cells_of_its_source(source):
    import jupytext
    from jupytext.compare import compare_notebooks

    notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    compare_notebooks(notebook, jupytext.read(source), fmt="py:percent")
    assert not any(c.cell_type == "code" and (c.outputs or c.execution_count)
                   for c in notebook.cells), "commit the notebook without outputs"
