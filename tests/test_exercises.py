"""The exercises: each chapter has 3 to 6 (chapter 0, the orientation, has none and no
learner's copy), each announced in the text and followed by its checker; the learner's copies
in ``exercises/`` are what ``tools/make_exercises.py`` makes from the chapter sources; and run
as a learner first finds them, every checker fails on its stub while every other cell of the
chapter runs. (With the solutions, the checkers pass: nbval runs ``notebooks/``.)"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import make_exercises  # noqa: E402
from check_exercises import run_notebook  # noqa: E402
from make_exercises import (  # noqa: E402
    BEGIN,
    CHECKER,
    END,
    EXERCISES,
    GENERATED,
    chapter_number,
    exercise_sources,
    find_exercises,
    has_exercises,
    learner_notebook,
    stub_solutions,
)
from sync_notebooks import (  # noqa: E402
    EditedNotebook,
    chapter_sources,
    read_chapter,
    staged_notebook,
)

SOURCES = chapter_sources()
WITH_EXERCISES = exercise_sources()


def _exercises(source: Path):
    return find_exercises(read_chapter(source), chapter_number(source), source.name)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_chapter_has_three_to_six_exercises_each_announced_in_the_text(source):
    nb = read_chapter(source)
    exercises = _exercises(source)
    if not has_exercises(source):
        assert not exercises, "chapter 0 is the orientation: exercises start in chapter 1"
        return
    assert 3 <= len(exercises) <= 6, f"{len(exercises)} exercises"
    for ex in exercises:
        text = next(c.source for c in reversed(nb.cells[:ex.cell]) if c.cell_type == "markdown")
        assert re.search(rf"Exercise {re.escape(ex.number)}\b", text), (
            f"the markdown before exercise {ex.number} ({', '.join(ex.functions)}) should "
            f"announce it as 'Exercise {ex.number}'")


@pytest.mark.parametrize("source", WITH_EXERCISES, ids=lambda p: p.stem)
def test_learner_copy_is_made_from_the_current_source(source):
    target = EXERCISES / (source.stem + ".ipynb")
    assert target.exists(), "run `make notebooks`"
    copy = staged_notebook(target)  # (the committed copy, not the learner's answers in it)
    committed = copy.cells
    expected = learner_notebook(source).cells
    assert [(c.cell_type, c.source, c.metadata.get("tags")) for c in committed] == [
        (c.cell_type, c.source, c.metadata.get("tags")) for c in expected
    ], f"the staged {target.name} is out of date: run `make notebooks` and stage it"
    leaked = [i for i, c in enumerate(committed) if BEGIN in c.source or END in c.source]
    assert not leaked, f"solution markers in cells {leaked}"
    metadata = copy.metadata
    # not paired with a .py (JupyterLab's Jupytext would write exercises/*.py at each save)
    assert "jupytext" not in metadata
    # what `make notebooks` compares the copy with before it overwrites it
    assert metadata.get(GENERATED) == make_exercises.cells_hash(learner_notebook(source))


def test_every_learner_copy_has_a_chapter():
    assert {p.stem for p in EXERCISES.glob("*.ipynb")} == {s.stem for s in WITH_EXERCISES}


def test_a_stub_replaces_the_solution_and_names_the_exercise():
    source = (
        "def add(a, b):\n"
        '    """Add them."""\n'
        "    ### BEGIN SOLUTION\n"
        "    return a + b\n"
        "    ### END SOLUTION\n"
        "\n"
        "\n"
        "class K:\n"
        "    def twice(self, x):\n"
        "        ### BEGIN SOLUTION\n"
        "        return 2 * x\n"
        "        ### END SOLUTION\n"
    )
    stubbed, functions = stub_solutions(source, "9.2")
    assert functions == ["add", "K.twice"]
    assert "return a + b" not in stubbed and "return 2 * x" not in stubbed
    scope: dict = {}
    exec(stubbed, scope)  # noqa: S102
    with pytest.raises(NotImplementedError, match=r"^Exercise 9\.2: write add\(a, b\): add them"):
        scope["add"](1, 2)
    with pytest.raises(NotImplementedError, match=r"^Exercise 9\.2: write K\.twice\(self, x\)$"):
        scope["K"]().twice(3)


@pytest.mark.parametrize("source", [
    f"{BEGIN}\nx = 1\n{END}\n",                                      # not in a function
    f"def f():\n    {BEGIN}\n    return 1\n",                        # no END
    f"def f():\n    return 1\n    {END}\n",                          # no BEGIN
    f"def f():\n    {BEGIN}\n    {BEGIN}\n    return 1\n    {END}\n",  # nested
], ids=["outside-a-function", "no-end", "no-begin", "nested"])
def test_malformed_solution_blocks_are_refused(source):
    with pytest.raises(ValueError, match="line"):
        stub_solutions(source, "9.1", "test cell")


def test_an_exercise_needs_a_checker_right_after_it():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"def f():\n    {BEGIN}\n    return 1\n    {END}\n"),
                nbformat.v4.new_code_cell("assert f() == 1")]
    with pytest.raises(ValueError, match="without a checker"):
        find_exercises(nb, 9, "test")
    nb.cells[1].metadata["tags"] = ["checker"]
    assert [e.number for e in find_exercises(nb, 9, "test")] == ["9.1"]


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A throw-away course with chapter 1's source: make_exercises writes its copy there."""
    monkeypatch.setattr(make_exercises, "ROOT", tmp_path)
    monkeypatch.setattr(make_exercises, "EXERCISES", tmp_path / "exercises")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "exercises").mkdir()
    source = tmp_path / "notebooks" / "01_tensors.py"
    shutil.copy(ROOT / "notebooks" / "01_tensors.py", source)
    assert make_exercises.sync(source, check=False) == ["exercises/01_tensors.ipynb"]
    return source, tmp_path / "exercises" / "01_tensors.ipynb"


def _answer(copy: Path, drop_hash: bool = False) -> None:
    """Write an answer into exercise 1.1 of ``copy``, as a learner saving in JupyterLab."""
    nb = nbformat.read(copy, as_version=4)
    cell = next(c for c in nb.cells if "def contiguous_strides" in c.source)
    cell.source = cell.source.split("    raise NotImplementedError")[0] + "    return 'MINE'\n"
    if drop_hash:
        del nb.metadata[GENERATED]
    nbformat.write(nb, copy)


def _touch_later(path: Path, than: Path) -> None:
    later = than.stat().st_mtime + 10
    os.utime(path, (later, later))


@pytest.mark.parametrize("copy_is_newer", [False, True], ids=["chapter-newer", "copy-newer"])
def test_a_copy_with_answers_is_never_overwritten_whatever_the_file_times(course,
                                                                          copy_is_newer):
    source, copy = course
    _answer(copy)
    if copy_is_newer:
        _touch_later(copy, source)
    else:  # JupyterLab re-saved the paired chapter when the learner peeked at a solution
        _touch_later(source, copy)
    with pytest.raises(EditedNotebook, match="--force"):
        make_exercises.sync(source, check=False)
    with pytest.raises(EditedNotebook):
        make_exercises.sync(source, check=True)
    assert "return 'MINE'" in copy.read_text()
    assert make_exercises.sync(source, check=False, force=True)
    assert "return 'MINE'" not in copy.read_text()


def test_an_unchanged_copy_follows_its_chapter_whatever_the_file_times(course):
    source, copy = course
    source.write_text(source.read_text() + "\n# %% [markdown]\n# A new closing remark.\n")
    _touch_later(copy, source)  # e.g. a checkout that wrote the copy last
    assert make_exercises.sync(source, check=True) == ["exercises/01_tensors.ipynb"]
    assert make_exercises.sync(source, check=False) == ["exercises/01_tensors.ipynb"]
    nb = nbformat.read(copy, as_version=4)
    assert nb.cells[-1].source == "A new closing remark."
    assert nb.metadata[GENERATED] == make_exercises.cells_hash(nb)
    assert make_exercises.sync(source, check=True) == []


def test_a_copy_written_before_the_hash_is_kept_when_its_cells_changed(course):
    source, copy = course
    nb = nbformat.read(copy, as_version=4)
    del nb.metadata[GENERATED]
    nbformat.write(nb, copy)
    _touch_later(source, copy)
    assert make_exercises.sync(source, check=False) == ["exercises/01_tensors.ipynb"]
    assert GENERATED in nbformat.read(copy, as_version=4).metadata  # unchanged: rewritten
    _answer(copy, drop_hash=True)
    _touch_later(source, copy)
    with pytest.raises(EditedNotebook, match="--force"):
        make_exercises.sync(source, check=False)
    assert "return 'MINE'" in copy.read_text()


def test_make_exercises_says_why_it_refuses(course, capsys, monkeypatch):
    source, copy = course
    monkeypatch.setattr(make_exercises, "exercise_sources", lambda: [source])
    _answer(copy)
    assert make_exercises.main([]) == 1
    assert "make_exercises.py --force 01 (that chapter only)" in capsys.readouterr().err
    assert make_exercises.main(["--force", "5"]) == 2  # another chapter: this copy stays
    assert "no chapter with exercises numbered [5]" in capsys.readouterr().err
    assert "return 'MINE'" in copy.read_text()
    assert make_exercises.main(["--force", "1"]) == 0
    assert "return 'MINE'" not in copy.read_text()


def _solved_one_at_a_time(source: Path) -> tuple[nbformat.NotebookNode, list[tuple[int, int]]]:
    """The learner's copy of ``source`` where each exercise is run as a learner meets it:
    its stub and checker, then its solution and the checker again, then the stub once more,
    so that every checker but its second run, and every other cell, sees only stubs. Also the
    (stub checker, solved checker) cell indices of each exercise."""
    nb = learner_notebook(source)
    solutions = read_chapter(source).cells
    lead = len(nb.cells) - len(solutions)  # the note and the import path before the chapter
    cells, checkers = [], []
    for i, cell in enumerate(nb.cells):
        cells.append(cell)
        if CHECKER in cell.metadata.get("tags", []):
            stub = nb.cells[i - 1]
            solved = nbformat.v4.new_code_cell(solutions[i - 1 - lead].source)
            checkers.append((len(cells) - 1, len(cells) + 1))
            cells += [solved, nbformat.v4.new_code_cell(cell.source, metadata=cell.metadata),
                      nbformat.v4.new_code_cell(stub.source)]
    nb.cells = cells
    return nb, checkers


@pytest.mark.parametrize("source", WITH_EXERCISES, ids=lambda p: p.stem)
def test_each_checker_needs_only_its_own_exercise_and_the_rest_none(source, monkeypatch,
                                                                    tmp_path):
    # A learner who solved only exercise N.k: its checker passes (it calls no other exercise's
    # function), and every other checker fails on its own stub. The chapter's other cells run
    # on stubs only. An empty data root: chapter 6 skips its full-MNIST run (nbval does it).
    monkeypatch.setenv("TINYTRAIN_DATA", str(tmp_path))
    nb, checkers = _solved_one_at_a_time(source)
    runs = {run.index: run for run in run_notebook(EXERCISES / (source.stem + ".ipynb"), nb=nb)}
    numbers = [ex.number for ex in _exercises(source)]
    assert len(checkers) == len(numbers)
    for (on_stub, on_solution), number in zip(checkers, numbers):
        error = runs[on_stub].error
        assert error is not None, f"the checker of exercise {number} passed on the stub"
        name, message = error
        assert name == "NotImplementedError" and message.startswith(f"Exercise {number}:"), (
            f"the checker of exercise {number} failed with {name}: {message}, not on its stub")
        assert runs[on_solution].error is None, (
            f"with only exercise {number} solved, its checker failed: {runs[on_solution].error}")
    broken = [(i, run.error) for i, run in runs.items() if not run.checker and run.error]
    assert not broken, f"cells that fail without the solutions: {broken}"


# Wrong answers a learner wrote, each with what its checker must say (a fragment of its
# AssertionError). Each was accepted, or refused with no useful message, by an earlier checker.
WRONG_ANSWERS = {
    "02_autograd": [
        ("2.1", "def topological_order(root):\n"
                "    order, seen = [], set()\n"
                "    def visit(v):\n"
                "        if id(v) not in seen:\n"
                "            seen.add(id(v))\n"
                "            for child in v._prev:\n"
                "                visit(child)\n"
                "            order.append(v)\n"
                "    visit(root)\n"
                "    return order\n",
         "the test graph is a chain of 5,000 ops, so the topological sort must use an explicit "
         "stack, not recursion"),
        ("2.2", "from tinytrain.autograd.function import Function\n\n\n"
                "class Sigmoid(Function):\n"
                "    @staticmethod\n"
                "    def forward(a):\n"
                "        np.negative(a, out=a); np.exp(a, out=a); a += 1\n"
                "        return np.reciprocal(a, out=a)\n\n"
                "    @staticmethod\n"
                "    def setup_context(ctx, inputs, output):\n"
                "        ctx.save_for_backward(output)\n\n"
                "    @staticmethod\n"
                "    def backward(ctx, g):\n"
                "        (s,) = ctx.saved_tensors\n"
                "        return g * s * (1 - s)\n",
         "forward changed its input x in place"),
    ],
    "03_conv2d_cpu": [
        ("3.1", "def conv_output_size(size, kernel, stride=1, padding=0):\n"
                "    if kernel >= size + 2 * padding:\n"
                "        raise ValueError('does not fit')\n"
                "    return (size + 2 * padding - kernel) // stride + 1\n",
         "raised ValueError: does not fit; expected 1 (the kernel exactly fills the padded input)"),
        ("3.2", "def im2col(x, kh, kw, stride=1, padding=0):\n"
                "    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))\n"
                "    v = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]\n"
                "    n, c, ho, wo = v.shape[:4]\n"
                "    return v.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, -1).astype(float)\n",
         "dtype float64 for float32 input: keep x's dtype"),
    ],
    "07_ddp": [
        ("7.2", "def ring_all_reduce(arrays):\n"  # counts each message on the receiving rank
                "    R = len(arrays)\n"
                "    data = [[c.astype(float) for c in np.array_split(a, R)] for a in arrays]\n"
                "    sent = [0] * R\n"
                "    for s in range(R - 1):\n"
                "        for r, k, m in [(r, (r - s) % R, data[r][(r - s) % R].copy())\n"
                "                        for r in range(R)]:\n"
                "            data[(r + 1) % R][k] = data[(r + 1) % R][k] + m\n"
                "            sent[(r + 1) % R] += len(m)\n"
                "    for s in range(R - 1):\n"
                "        for r, k, m in [(r, (r + 1 - s) % R, data[r][(r + 1 - s) % R].copy())\n"
                "                        for r in range(R)]:\n"
                "            data[(r + 1) % R][k] = m\n"
                "            sent[(r + 1) % R] += len(m)\n"
                "    return [np.concatenate(d) for d in data], sent\n",
         "3 ranks, 10 elements each: rank 0 sent 13 elements, expected 14 (per rank: "
         "[13, 14, 13], expected [14, 13, 13]"),
        ("7.4", "def global_metrics(per_rank):\n"
                "    count = sum(r[2] for r in per_rank)\n"
                "    return (sum(r[1] for r in per_rank) / count,\n"
                "            float(np.mean([loss / n for loss, _, n in per_rank])))\n",
         "expected the sum of the per-rank loss sums over the total count"),
    ],
}


@pytest.mark.parametrize("stem", sorted(WRONG_ANSWERS))
def test_checkers_reject_wrong_answers_and_say_what_is_wrong(stem, monkeypatch, tmp_path):
    # The learner's copy with, after each listed exercise's checker, a wrong answer, the
    # checker again, and the stub once more (so the rest of the chapter sees only stubs).
    monkeypatch.setenv("TINYTRAIN_DATA", str(tmp_path))
    source = next(s for s in WITH_EXERCISES if s.stem == stem)
    nb = learner_notebook(source)
    wrong = {number: (code, says) for number, code, says in WRONG_ANSWERS[stem]}
    numbers = iter(ex.number for ex in _exercises(source))
    cells, expect = [], {}
    for i, cell in enumerate(nb.cells):
        cells.append(cell)
        if CHECKER in cell.metadata.get("tags", []) and (number := next(numbers)) in wrong:
            code, says = wrong[number]
            cells.append(nbformat.v4.new_code_cell(code))
            cells.append(nbformat.v4.new_code_cell(cell.source, metadata=cell.metadata))
            expect[len(cells) - 1] = (number, says)
            cells.append(nbformat.v4.new_code_cell(nb.cells[i - 1].source))
    assert len(expect) == len(wrong)
    nb.cells = cells
    runs = {run.index: run for run in run_notebook(EXERCISES / (stem + ".ipynb"), nb=nb)}
    for index, (number, says) in expect.items():
        assert runs[index - 1].error is None, f"the wrong answer to {number} did not run"
        error = runs[index].error
        assert error is not None, f"the checker of exercise {number} accepted a wrong answer"
        assert error[0] == "AssertionError" and says in error[1], (
            f"exercise {number}: the checker said {error[0]}: {error[1]}, not '{says}'")


def _checked_notebook(path: Path, answer: str) -> Path:
    """A one-exercise learner's copy at ``path``: setup, ``answer``, its checker, a last cell."""
    nb = nbformat.v4.new_notebook()
    checker = nbformat.v4.new_code_cell("assert answer() == 42, 'expected 42'")
    checker.metadata["tags"] = [CHECKER]
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(answer), checker,
                nbformat.v4.new_code_cell("y = 2")]
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("answer, says", [
    ("import os\nos._exit(3)", ["exercise 9.1: the cell with your answer (code cell [2]) "
                                "the Python kernel died", "exercise 9.1: not checked"]),
    ("while True:\n    pass", ["exercise 9.1: the cell with your answer (code cell [2]) did "
                               "not finish within 5 s and was interrupted"]),
])
def test_check_exercises_reports_an_answer_that_kills_or_hangs_the_kernel(
        answer, says, tmp_path, monkeypatch, capsys):
    # An answer that kills the kernel or never returns is reported against its exercise
    # instead of stopping the check with nbclient's DeadKernelError or a cell timeout.
    import check_exercises

    folder = tmp_path / "exercises"
    folder.mkdir()
    path = _checked_notebook(folder / "09_demo.ipynb", "def answer():\n    return 42\n" + answer)
    monkeypatch.setattr(check_exercises, "EXERCISES", folder)
    assert check_exercises.report(path, timeout=5) is False
    out = capsys.readouterr().out
    for fragment in says:
        assert fragment in out, out
    runs = run_notebook(path, timeout=5)
    assert [run.ran for run in runs] == [True, True, "os._exit" not in answer,
                                         "os._exit" not in answer]
