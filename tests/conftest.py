"""Shared fixtures: the ``device`` every device-aware test runs on.

``"cpu"`` always runs; ``"cuda"`` carries the ``cuda`` marker and skips unless
CuPy sees a GPU (``tt.cuda_is_available()``). Results are brought back with
``.numpy()`` and compared with PyTorch on the CPU.
"""

from __future__ import annotations

import importlib.util

import pytest

import tinytrain as tt

# The notebook-format tests need the dev extra's notebook tools. Where they are missing (the
# GPU machines, which run only the cuda-marked tests) those modules are not collected, and
# the test session's header says so.
_NOTEBOOK_TOOLS = ("nbformat", "jupytext", "nbclient", "nbconvert")
_MISSING_TOOLS = [m for m in _NOTEBOOK_TOOLS if importlib.util.find_spec(m) is None]
_NOTEBOOK_TESTS = ["test_notebooks_in_sync.py", "test_exercises.py", "test_links.py",
                   "test_book.py"]
collect_ignore = _NOTEBOOK_TESTS if _MISSING_TOOLS else []


def pytest_report_header(config: pytest.Config) -> str | None:
    if _MISSING_TOOLS:
        return (f"notebook-format tests not collected: {', '.join(_MISSING_TOOLS)} missing "
                "(pip install -e '.[dev]')")
    return None

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.cuda)]


@pytest.fixture(scope="session", params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    """``"cpu"``, then ``"cuda"`` (skipped cleanly without CuPy and a GPU)."""
    if request.param == "cuda" and not tt.cuda_is_available():
        pytest.skip("needs CuPy and an NVIDIA GPU")
    return request.param


@pytest.fixture
def torch_single_thread():
    """PyTorch on one thread for the test: on tiny tensors, two threads on a busy 2-core CI
    box are slower than one."""
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
