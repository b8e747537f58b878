"""The README's Python example runs as printed (on the bundled mini set) and learns."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs_and_learns():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "the README has one Python example"
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)  # noqa: S102
    assert scope["loss"].item() < 0.5  # one epoch over 5,000 digits; chance is 2.30
