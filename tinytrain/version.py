"""``tt.version``: as ``torch.version``, ``__version__`` (tinytrain's) and ``cuda``: the
version of the CUDA runtime CuPy was built for (``"12.8"``), read from CuPy on first use,
or None when CuPy is not installed (as PyTorch's CPU build says None). ``cuda`` is not a
promise that a GPU is there: ``tt.cuda.is_available()`` says that."""

from __future__ import annotations

from typing import Any

from tinytrain import backend

__version__ = "0.1.0"


def _cuda_version() -> str | None:
    try:
        cp = backend.cupy_module()
        v = int(cp.cuda.runtime.runtimeGetVersion())
    except Exception:  # no CuPy, or CuPy without a usable CUDA runtime: as a CPU build
        return None
    return f"{v // 1000}.{v % 1000 // 10}"


def __getattr__(name: str) -> Any:
    if name == "cuda":
        return _cuda_version()
    raise AttributeError(f"module 'tinytrain.version' has no attribute {name!r}")


__all__ = ["__version__", "cuda"]  # noqa: F822 (cuda: read on first use, __getattr__)
