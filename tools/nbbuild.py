"""What every ``tools/build_notebook_NN.py`` shares: collect cells, write or check the notebook.

A chapter is generated from a Python file so that it can be reviewed as plain text and
rebuilt reproducibly: cell ids are fixed (``c00``, ``c01``, ...) and it is saved without
outputs. Each builder does::

    from nbbuild import Notebook
    nb = Notebook("05_dataloader.ipynb", __doc__)
    md, code = nb.md, nb.code
    md(r\"\"\" # Chapter 5 ... \"\"\")
    code(r\"\"\" import numpy as np \"\"\")
    if __name__ == "__main__":
        sys.exit(nb.main())

``python tools/build_notebook_NN.py`` writes ``notebooks/NN_*.ipynb``; ``--check`` exits 1
when the committed notebook differs from what the builder makes.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent


class Notebook:
    """The cells of one chapter, in order, and the file they go to."""

    def __init__(self, filename: str, doc: str | None = None) -> None:
        self.target = ROOT / "notebooks" / filename
        self.doc = doc or f"Write notebooks/{filename}"
        self.cells: list[tuple[str, str]] = []

    def md(self, text: str) -> None:
        self.cells.append(("markdown", textwrap.dedent(text).strip("\n")))

    def code(self, text: str) -> None:
        self.cells.append(("code", textwrap.dedent(text).strip("\n")))

    def build(self) -> nbformat.NotebookNode:
        nb = new_notebook()
        for i, (kind, src) in enumerate(self.cells):
            cell = new_markdown_cell(src) if kind == "markdown" else new_code_cell(src)
            cell["id"] = f"c{i:02d}"
            nb.cells.append(cell)
        nb.metadata = {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                           "name": "python3"},
            "language_info": {"name": "python"},
        }
        nbformat.validate(nb)
        return nb

    def main(self) -> int:
        parser = argparse.ArgumentParser(description=self.doc.splitlines()[0])
        parser.add_argument("--check", action="store_true", help="compare instead of writing")
        parser.add_argument("--output", type=Path, default=self.target)
        args = parser.parse_args()
        text = nbformat.writes(self.build()) + "\n"
        if args.check:
            current = args.output.read_text() if args.output.exists() else ""
            if current != text:
                print(f"{args.output} is out of date; run tools/build_notebook_*.py",
                      file=sys.stderr)
                return 1
            return 0
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        shown = args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output
        print(f"wrote {shown}")
        return 0
