"""Every Markdown link in the repository's documents resolves: README, CHANGELOG, docs/, and the
markdown cells of every notebook (chapters and learner copies).

A relative link must name a file or folder inside the repository, and its ``#anchor``, when
it points into a Markdown file or a notebook, a heading there. Links to the web are only
checked for their form (the tests run offline).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", "build", "node_modules", ".pytest_cache", ".ipynb_checkpoints"}

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]"        # [text], brackets nested once
                         r"\(\s*<?([^)\s>]*)>?(?:\s+[\"'(].*?[\"')])?\s*\)")  # (target "title")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=[\"']([^\"']+)[\"']", re.I)


def documents() -> list[Path]:
    """README, CHANGELOG, every other Markdown file and every notebook in the repository."""
    found = []
    for suffix in ("*.md", "*.ipynb"):
        for path in ROOT.rglob(suffix):
            parts = path.relative_to(ROOT).parts
            # hidden folders (.venv, .dev, ...) hold copies and caches, not documents
            if not SKIP_DIRS & set(parts) and not any(p.startswith(".") for p in parts[:-1]):
                found.append(path)
    return sorted(found)


def markdown_of(path: Path) -> list[tuple[str, str]]:
    """(where, markdown text) pieces of a document: the file, or each markdown cell."""
    if path.suffix == ".ipynb":
        cells = nbformat.read(path, as_version=4).cells
        return [(f"cell {i}", c.source) for i, c in enumerate(cells) if c.cell_type == "markdown"]
    return [("", path.read_text())]


def links_in(text: str) -> list[str]:
    """The link targets of a Markdown text, code blocks and code spans left out."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return (INLINE_LINK.findall(text) + REFERENCE.findall(text) + AUTOLINK.findall(text))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)       # [text](url) -> text
    text = re.sub(r"[`*_]", lambda m: "_" if m.group() == "_" else "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    """Anchors a link can name in a Markdown file or notebook: GitHub's slugs of its headings,
    Jupyter's (the heading text, spaces as '-'), and explicit <a name=...> anchors."""
    found: set[str] = set()
    for _, text in markdown_of(path):
        text = FENCE.sub("", text)
        for heading in HEADING.findall(text):
            found |= {github_slug(heading), heading.strip().replace(" ", "-")}
        found |= set(HTML_ANCHOR.findall(text))
    return found


def problem(doc: Path, target: str) -> str | None:
    """Why ``target``, a link in ``doc``, does not resolve (None when it does)."""
    url = urlparse(target)
    if url.scheme in ("http", "https"):
        ok = url.netloc and "." in url.netloc and not re.search(r"\s", target)
        return None if ok else "malformed web address"
    if url.scheme == "mailto":
        return None if "@" in url.path else "malformed mail address"
    if url.scheme or url.netloc:
        return f"unexpected scheme {url.scheme!r}"
    if not url.path:                                                 # "#anchor" in this file
        return None if unquote(url.fragment) in anchors_of(doc) else "no such heading here"
    if url.path.startswith("/"):
        return "absolute path: use a path relative to this file"
    resolved = (doc.parent / unquote(url.path)).resolve()
    if not resolved.is_relative_to(ROOT):
        return "points outside the repository"
    if not resolved.exists():
        return "no such file or folder"
    if url.fragment and resolved.suffix in (".md", ".ipynb"):
        if unquote(url.fragment) not in anchors_of(resolved):
            return f"no heading #{url.fragment} in {resolved.name}"
    return None


DOCUMENTS = documents()


def test_the_documents_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in DOCUMENTS}
    assert {"README.md", "CHANGELOG.md", "docs/design.md"} <= names
    assert any(n.startswith("notebooks/") for n in names)
    assert any(n.startswith("exercises/") for n in names)


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves(doc):
    broken = [f"{where or doc.name}: ({target}) {why}"
              for where, text in markdown_of(doc) for target in links_in(text)
              if (why := problem(doc, target))]
    assert not broken, "\n".join(broken)


def test_the_checker_finds_broken_links(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Part one\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](a.md) [ok](a.md#part-one) [ok](#the-doc) [ok](https://pytorch.org/docs)\n"
        "[missing](b.md) [bad anchor](a.md#part-two) [outside](../x.md) [abs](/etc/passwd)\n"
        "[web](https://no-dot) `[in code](c.md)`\n\n# The doc\n"
        "```\n[in a fence](d.md)\n```\n"
    )
    (tmp_path.parent / "x.md").write_text("outside")
    verdicts = {t: problem(doc, t) for _, text in markdown_of(doc) for t in links_in(text)}
    assert [t for t, why in verdicts.items() if why is None] == [
        "a.md", "a.md#part-one", "#the-doc", "https://pytorch.org/docs"]
    assert set(verdicts) == {"a.md", "a.md#part-one", "#the-doc", "https://pytorch.org/docs",
                             "b.md", "a.md#part-two", "../x.md", "/etc/passwd", "https://no-dot"}
