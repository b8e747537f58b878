"""Render the course as a static HTML site, every chapter executed with its figures: ``make book``.

Each chapter notebook ``notebooks/NN_slug.ipynb`` is executed in ``notebooks/``, as nbval runs
it (a chapter that needs a GPU or several processes runs its CPU part and says what it
skips), then exported by nbconvert's HTML exporter with JupyterLab's template: code, outputs
and figures (PNG, embedded in the page) as JupyterLab shows them. ``tools/book/book.html.j2``
adds the navigation (previous, contents, next). ``index.html`` is the README's course map,
its links turned into links to the pages. Formulas are typeset by MathJax 3 from a local
copy (the ``django-static-mathjax`` package's, copied to ``mathjax/``), so the site needs no
network. Links to other files of the repository (package modules, the exercise copies) point
into the checkout the book was built from.

Then :func:`check_book` checks the site: every page exists and is linked from the index and
from its neighbours, no cell raised, every cell that draws a figure shows one (embedded, and
a real PNG), and every relative link resolves. ``make book`` fails if it finds a problem.

Usage::

    python tools/make_book.py            # every chapter -> build/book/index.html, then check
    python tools/make_book.py 0 3        # a book of chapters 0 and 3 only (quick to look at)
    python tools/make_book.py --check    # check the book in build/book/ without rendering
"""

from __future__ import annotations

import argparse
import ast
import base64
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from nbformat.v4 import new_markdown_cell, new_notebook
from sync_notebooks import METADATA, NOTEBOOKS, ROOT

from tinytrain.data.idx import atomic_write_bytes

BOOK = ROOT / "build" / "book"
TEMPLATES = Path(__file__).resolve().parent / "book"
MATHJAX_URL = "mathjax/tex-svg-full.js"  # its configuration is in the template
# ipykernel's inline backend: the Makefile exports MPLBACKEND=Agg for the tests, under which
# a kernel draws every figure and shows none, unless the notebook runs `%matplotlib inline`.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


@dataclass(frozen=True)
class Chapter:
    """A chapter notebook and the page it becomes."""

    notebook: Path

    @property
    def number(self) -> int:
        return int(self.notebook.name[:2])

    @property
    def page(self) -> str:
        return self.notebook.stem + ".html"

    @property
    def title(self) -> str:
        """The chapter's first heading, e.g. "Chapter 1 — Tensors: ..."."""
        for cell in nbformat.read(self.notebook, as_version=4).cells:
            if cell.cell_type == "markdown" and (m := re.search(r"^# (.+)$", cell.source, re.M)):
                return m[1].strip()
        return self.notebook.stem


def chapters(numbers: list[int] | None = None, folder: Path = NOTEBOOKS) -> list[Chapter]:
    """The chapter notebooks of ``folder`` in order, or those with the given numbers."""
    found = [Chapter(p) for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))]
    if numbers:
        missing = set(numbers) - {c.number for c in found}
        if missing:
            raise ValueError(f"no chapter {', '.join(map(str, sorted(missing)))} in {folder}")
        found = [c for c in found if c.number in numbers]
    return found


# -- rendering ----------------------------------------------------------------------------------


def execute(nb: nbformat.NotebookNode, folder: Path, timeout: int = 1800) -> None:
    """Run every cell of ``nb`` in a fresh kernel whose working folder is ``folder``, going
    on past errors (the check reports them; the page shows them)."""
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    env = {**os.environ, "MPLBACKEND": INLINE_BACKEND}
    client.execute(env=env, stderr=subprocess.DEVNULL)  # the kernel's log; cells have outputs


def copy_mathjax(out: Path) -> None:
    """Copy MathJax 3 (``es5/``: ``tex-svg-full.js`` and the parts it loads on demand, such as
    its menu's) from the ``django-static-mathjax`` package, MathJax's release as it is, to
    ``out/mathjax``."""
    spec = importlib.util.find_spec("mathjax")
    es5 = Path(spec.submodule_search_locations[0]) / "static/mathjax/es5" if spec else None
    if es5 is None or not (es5 / "tex-svg-full.js").is_file():
        raise SystemExit("the book typesets formulas with a local MathJax: "
                         "pip install django-static-mathjax (in the dev extra)")

    def others(folder: str, names: list[str]) -> list[str]:  # the other combined builds
        return [n for n in names if folder == str(es5) and n.endswith(".js")
                and n != "tex-svg-full.js"]

    shutil.copytree(es5, out / "mathjax", ignore=others, dirs_exist_ok=True)


# a link or image of the content; the book's own links (class "tt-book") are left alone
LINK = re.compile(r'(<(?:a|img)\b(?![^>]*\btt-book\b)[^>]*?\s(?:href|src)=")([^"]*)(")')


def relink(page: str, base: Path, out: Path, pages: dict[Path, str]) -> str:
    """``page`` (HTML rendered from a document in folder ``base``) with its relative links made
    to work from ``out``: a link to a chapter notebook of the book goes to its page, a link to
    any other file to that file in the repository."""
    def fix(m: re.Match) -> str:
        url = urlsplit(html.unescape(m[2]))
        if url.scheme or url.netloc or not url.path or url.path.startswith("/"):
            return m[0]  # the web, data: images, anchors in the page itself
        target = (base / unquote(url.path)).resolve()
        new = pages.get(target) or quote(os.path.relpath(target, out.resolve()))
        if url.fragment:
            new += "#" + url.fragment
        return m[1] + html.escape(new) + m[3]

    return LINK.sub(fix, page)


def export(nb: nbformat.NotebookNode, title: str, prev: Chapter | None,
           after: Chapter | None) -> str:
    """The page of ``nb``: JupyterLab's HTML with the book's navigation and local MathJax."""
    exporter = HTMLExporter(template_name="lab", extra_template_paths=[str(TEMPLATES)])
    exporter.template_file = "book.html.j2"
    exporter.mathjax_url = MATHJAX_URL
    nb.metadata["title"] = title

    def link(ch: Chapter | None) -> dict | None:
        return ch and {"href": ch.page, "title": ch.title}

    book = {"prev": link(prev), "next": link(after)}
    body, _ = exporter.from_notebook_node(nb, resources={"book": book})
    return body


def course_map(readme: Path = ROOT / "README.md") -> list[str]:
    """The lines of the README's course map table (``## Course map``)."""
    m = re.search(r"^## Course map\n(.*?)(?=^## |\Z)", readme.read_text(), re.S | re.M)
    rows = [line for line in (m[1] if m else "").splitlines() if line.startswith("|")]
    if len(rows) < 3:
        raise ValueError(f"{readme}: no course map table under '## Course map'")
    return rows


def index_notebook(book: list[Chapter], readme: Path = ROOT / "README.md") -> nbformat.NotebookNode:
    """The index page: the README's course map, rows for chapters not in ``book`` left out."""
    header, rule, *rows = course_map(readme)
    notebooks = {c.notebook.resolve() for c in book}
    in_book = [row for row in rows
               if any((readme.parent / t).resolve() in notebooks
                      for t in re.findall(r"\]\(([^)#\s]+\.ipynb)", row.split("|")[1]))]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()
    intro = (
        "# tinytrain — the course\n\n"
        "A small deep-learning training framework built from scratch, chapter by chapter: "
        "tensors, autograd, convolution on the CPU and in CUDA, a DataLoader, MNIST training "
        "and data-parallel training. Each page is a chapter as it ran when this book was built"
        + (f" (commit `{commit}`)" if commit else "") + ", with its outputs and figures; a "
        "chapter that needs a GPU or several processes shows its CPU part and says what it "
        "skipped. To run the chapters and do the exercises, use the repository: `make lab` "
        "([README](README.md)).")
    table = "## Course map\n\n" + "\n".join([header, rule, *in_book])
    nb = new_notebook(cells=[new_markdown_cell(intro), new_markdown_cell(table)])
    nb.metadata["kernelspec"] = METADATA["kernelspec"]  # no code, but nbconvert wants one
    return nb


def render_book(book: list[Chapter], out: Path = BOOK, readme: Path = ROOT / "README.md",
                log=print) -> None:
    """Execute and export every chapter of ``book`` into ``out``, with the index and MathJax."""
    out.mkdir(parents=True, exist_ok=True)
    copy_mathjax(out)
    pages = {c.notebook.resolve(): c.page for c in book}
    index = index_notebook(book, readme)
    page = export(index, "tinytrain — the course", None, book[0] if book else None)
    atomic_write_bytes(out / "index.html", relink(page, readme.parent, out, pages).encode())
    for i, chapter in enumerate(book):
        start = time.perf_counter()
        nb = nbformat.read(chapter.notebook, as_version=4)
        execute(nb, chapter.notebook.parent)
        prev = book[i - 1] if i else None
        after = book[i + 1] if i + 1 < len(book) else None
        page = relink(export(nb, chapter.title, prev, after), chapter.notebook.parent, out, pages)
        atomic_write_bytes(out / chapter.page, page.encode())
        log(f"{chapter.page}: executed and rendered in {time.perf_counter() - start:.0f} s")


# -- checking -----------------------------------------------------------------------------------

CELL = re.compile(r'<div\b[^>]*?\sid="cell-id=([^"]+)"')
IMG_SRC = re.compile(r'<img\b[^>]*?\ssrc="([^"]*)"')
HREF = re.compile(r'<a\b[^>]*?\shref="([^"]*)"')
SIGNATURES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}


def draws(source: str) -> bool:
    """Whether a code cell draws a figure every time it runs: a call on ``plt`` or ``figures``
    (the chapters' plotting helpers) in a statement that is not inside an ``if``, a loop, a
    ``try`` or a function (where it may not run). IPython's magic lines are left out."""
    try:
        body = ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M)).body
    except SyntaxError:
        return False
    statements = list(body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.With):
            statements.extend(node.body)
            continue
        if isinstance(node, ast.If | ast.For | ast.While | ast.Try | ast.FunctionDef
                      | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for call in ast.walk(node):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Name)
                    and call.func.value.id in ("plt", "figures")):
                return True
    return False


def cells_of_page(page: str) -> dict[str, str]:
    """The HTML of each cell of a page, by cell id."""
    starts = [(m.start(), m[1]) for m in CELL.finditer(page)] + [(len(page), "")]
    return {cid: page[a:b] for (a, cid), (b, _) in zip(starts, starts[1:])}


def image_problem(src: str, page: Path) -> str | None:
    """Why the image ``src`` of ``page`` would not show (None when it would)."""
    if src.startswith("data:"):
        kind, _, data = src[5:].partition(",")
        mime = kind.split(";")[0]
        try:
            raw = base64.b64decode(data, validate=True) if ";base64" in kind else data.encode()
        except ValueError:
            return f"an embedded {mime} image is not valid base64"
        signature = SIGNATURES.get(mime)
        if signature is None or not raw.startswith(signature) or len(raw) < 100:
            return f"an embedded image is not a valid {mime} file"
        return None
    url = urlsplit(html.unescape(src))
    if url.scheme or url.netloc:
        return f"image {src} is fetched from the web"
    return None if (page.parent / unquote(url.path)).is_file() else f"image {src} is missing"


def link_problem(href: str, page: Path, pages: set[str]) -> str | None:
    """Why the link ``href`` of ``page`` does not resolve (None when it does)."""
    url = urlsplit(html.unescape(href))
    if url.scheme or url.netloc or not url.path:
        return None  # the web (not checked offline) and anchors in the page
    path = unquote(url.path)
    target = (page.parent / path).resolve()
    if target.suffix != ".html" or target.parent != page.parent.resolve():
        return None if target.exists() else f"link to {href}: no such file"
    if path not in pages:  # a page of the book
        return f"link to {path}, a page not in this book"
    if url.fragment and f'id="{html.escape(unquote(url.fragment))}"' not in target.read_text():
        return f"link to {href}: no such heading in {path}"
    return None


def check_book(book: list[Chapter], out: Path = BOOK) -> list[str]:
    """What is wrong with the book of ``book`` in ``out``: one line per problem."""
    problems: list[str] = []
    names = {c.page for c in book} | {"index.html"}
    index = out / "index.html"
    if not index.is_file():
        return [f"{index} is missing: run `make book`"]
    listed = {unquote(urlsplit(html.unescape(h)).path) for h in HREF.findall(index.read_text())}
    problems += [f"index.html does not link {c.page}" for c in book if c.page not in listed]
    for i, chapter in enumerate(book):
        page = out / chapter.page
        if not page.is_file():
            problems.append(f"{chapter.page} is missing: render chapter {chapter.number}")
            continue
        text = page.read_text()
        cells = cells_of_page(text)
        source = nbformat.read(chapter.notebook, as_version=4).cells
        for n, cell in enumerate(source):
            if cell.cell_type != "code":
                continue
            where = f"{chapter.page}, cell {n} (id {cell.id})"
            shown = cells.get(cell.id)
            if shown is None:
                problems.append(f"{where} is not in the page (is the page out of date?)")
                continue
            if 'class="tt-error"' in shown:
                error = re.sub(r"<[^>]+>", "", shown.split('class="tt-error"', 1)[1])
                last = [line for line in html.unescape(error).splitlines() if line.strip()]
                problems.append(f"{where} raised: {last[-1].strip() if last else '?'}")
            elif draws(cell.source) and "<img" not in shown:
                problems.append(f"{where} draws a figure, but the page shows none")
        problems += [f"{chapter.page}: {why}" for src in IMG_SRC.findall(text)
                     if (why := image_problem(src, page))]
        problems += [f"{chapter.page}: {why}" for href in set(HREF.findall(text))
                     if (why := link_problem(href, page, names))]
        for rel, neighbour in (("prev", book[i - 1] if i else None),
                               ("next", book[i + 1] if i + 1 < len(book) else None)):
            if neighbour and f'href="{neighbour.page}" rel="{rel}"' not in text:
                problems.append(f"{chapter.page} has no '{rel}' link to {neighbour.page}")
        if MATHJAX_URL in text and not (out / MATHJAX_URL).is_file():
            problems.append(f"{chapter.page} loads {MATHJAX_URL}, which is missing")
    problems += [f"index.html: {why}" for href in set(HREF.findall(index.read_text()))
                 if (why := link_problem(href, index, names))]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=int, help="chapter numbers (default: all)")
    parser.add_argument("--check", action="store_true", help="only check, do not render")
    parser.add_argument("--out", type=Path, default=BOOK, help=f"default: {BOOK}")
    args = parser.parse_args(argv)
    try:
        book = chapters(args.chapters)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    if not args.check:
        start = time.perf_counter()
        render_book(book, args.out)
        print(f"rendered {len(book)} chapters in {time.perf_counter() - start:.0f} s")
    problems = check_book(book, args.out)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"checked {len(book)} chapters: every cell ran, every figure is there, every link "
          f"resolves. Open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
