"""The book (``make book``, tools/make_book.py): chapters executed and rendered as HTML with
their figures, an index made from the README's course map, and a check that finds a cell that
raised, a figure that is missing or broken, and a link that leads nowhere.

CI renders only chapter 0 (a few seconds: the renderer end to end, on a real chapter with a
figure); ``make book`` renders and checks every chapter."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from make_book import (  # noqa: E402
    Chapter,
    chapters,
    check_book,
    course_map,
    draws,
    render_book,
)


def test_chapter_0_renders_with_its_figure_and_the_index_links_it(tmp_path):
    book = chapters([0])
    render_book(book, tmp_path, log=lambda _: None)
    assert check_book(book, tmp_path) == []
    page = (tmp_path / book[0].page).read_text()
    assert len(re.findall(r'<img\b[^>]*\ssrc="data:image/png;base64,', page)) >= 1
    assert "Orientation" in page and "test accuracy:" in page      # text and outputs
    assert 'src="mathjax/tex-svg-full.js"' in page
    assert (tmp_path / "mathjax/tex-svg-full.js").stat().st_size > 1_000_000
    assert "https://" not in "".join(re.findall(r"<script[^>]*>", page)), "a script from the web"
    # a link into the package leads from the book's folder to the file in the repository
    tensor_py = [h for h in re.findall(r'href="([^"]*)"', page) if h.endswith("/tensor.py")]
    assert tensor_py and (tmp_path / tensor_py[0]).resolve() == ROOT / "tinytrain/tensor.py"
    index = (tmp_path / "index.html").read_text()
    assert f'href="{book[0].page}"' in index and "01_tensors.html" not in index


def _fake_course(tmp_path: Path) -> tuple[list[Chapter], Path]:
    """A two-chapter course in tmp_path: chapter 1 draws, raises and links to a missing file."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    one = new_notebook(cells=[
        new_markdown_cell("# Chapter 1 — One\n\n[gone](no_such_file.py), [two](02_two.ipynb)"),
        new_code_cell("import matplotlib.pyplot as plt\n\nplt.plot([0, 1], [1, 0])\nplt.show()"),
        new_code_cell("1 / 0"),
        new_code_cell("if False:\n    plt.plot([0, 1])"),
    ])
    two = new_notebook(cells=[new_markdown_cell("# Chapter 2 — Two"), new_code_cell("x = 1")])
    for name, nb in (("01_one", one), ("02_two", two)):
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nbformat.write(nb, folder / f"{name}.ipynb")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Course map\n\n| chapter | time |\n| --- | --- |\n"
                      "| [01 One](notebooks/01_one.ipynb) | 1 h |\n"
                      "| [02 Two](notebooks/02_two.ipynb) | 2 h |\n\n## Next\n")
    return chapters(folder=folder), readme


def test_the_check_finds_errors_missing_figures_and_broken_links(tmp_path, monkeypatch):
    # The Makefile exports MPLBACKEND=Agg for the tests, under which a kernel shows no figure
    # unless the notebook asks for `%matplotlib inline` (this one does not): the renderer
    # must give its kernels the inline backend.
    monkeypatch.setenv("MPLBACKEND", "Agg")
    book, readme = _fake_course(tmp_path)
    out = tmp_path / "book"
    render_book(book, out, readme, log=lambda _: None)
    problems = check_book(book, out)
    assert len(problems) == 2, problems
    assert re.fullmatch(r"01_one\.html, cell 2 \(id .*\) raised: ZeroDivisionError: .*",
                        problems[0])
    assert problems[1] == "01_one.html: link to ../notebooks/no_such_file.py: no such file"
    page = (out / "01_one.html").read_text()
    assert 'href="02_two.html" rel="next"' in page and 'href="02_two.html">two<' in page

    # a render without the inline backend shows no figure; a broken PNG shows nothing either
    image = re.search(r'<img\b[^>]*\ssrc="data:image/png;base64,([^"]*)"', page)
    (out / "01_one.html").write_text(page.replace(image[0], "<p>"))
    assert "01_one.html, cell 1 (id" in check_book(book, out)[0]
    assert check_book(book, out)[0].endswith("draws a figure, but the page shows none")
    (out / "01_one.html").write_text(page.replace(image[1], "aGVsbG8="))  # "hello"
    assert "01_one.html: an embedded image is not a valid image/png file" in check_book(book, out)

    (out / "02_two.html").unlink()
    assert "02_two.html is missing: render chapter 2" in check_book(book, out)


@pytest.mark.parametrize("source, expected", [
    ("plt.plot(x)\nplt.show()", True),
    ("fig = figures.draw_ring_schedule(4)", True),
    ("with tt.no_grad():\n    fig, ax = plt.subplots()", True),
    ("if gpu:\n    plt.show()", False),                      # may not run: no figure expected
    ("for ax in axes:\n    ax.plot(x)", False),
    ("def f():\n    plt.show()", False),
    ("import figures\nx = np.zeros(3)", False),
    ("%matplotlib inline\nplt.plot(x)", True),                # magics are left out
    ("%timeit plt.plot(x)", False),
])
def test_draws_means_a_figure_every_time_the_cell_runs(source, expected):
    assert draws(source) is expected


def _readme_map() -> dict[str, dict[str, str]]:
    """The README's course map, by chapter number: column -> cell."""
    header, _, *rows = course_map()
    columns = [h.strip() for h in header.strip("|").split("|")]
    table = {}
    for row in rows:
        cells = dict(zip(columns, (c.strip() for c in row.strip("|").split("|"))))
        table[str(int(re.search(r"\[(\d+) ", cells["chapter"])[1]))] = cells
    return table


def test_readme_course_map_and_chapter_0_agree_on_prerequisites_and_times():
    readme = _readme_map()
    assert set(readme) == {str(c.number) for c in chapters()}, "the map lists every chapter"
    text = next(c.source for c in nbformat.read(ROOT / "notebooks/00_introduction.ipynb",
                                                as_version=4).cells
                if c.source.startswith("## 3. The chapters"))
    # "* **[Chapter 1 — Tensors](01_tensors.ipynb)**, 2 h; before it: Python, .... *You build*"
    described = re.findall(r"\*\*\[Chapter (\d+) [^\]]*\]\([^)]*\)\*\*, (.+?); before it: "
                           r"(.+?)\. \*You build\*", " ".join(text.split()))
    assert [n for n, _, _ in described] == sorted(set(readme) - {"0"}, key=int)
    for number, time, before in described:
        assert (before, time) == (readme[number]["before it"], readme[number]["time"]), (
            f"chapter {number}: the README says {readme[number]['before it']!r}, "
            f"{readme[number]['time']!r}")
