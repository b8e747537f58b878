"""Shared fixtures: the ``device`` every device-aware test runs on.

``"cpu"`` always runs; ``"cuda"`` carries the ``cuda`` marker and skips unless
CuPy sees a GPU (``tt.cuda_is_available()``). Results are brought back with
``.numpy()`` and compared with PyTorch on the CPU.
"""

from __future__ import annotations

import pytest

import tinytrain as tt

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
