"""``tt.accelerator``: ``torch.accelerator``'s device-agnostic helpers (PyTorch 2.6+).

tinytrain's one accelerator is an NVIDIA GPU through CuPy (``"cuda"``).
"""

from __future__ import annotations

from tinytrain import backend


def is_available() -> bool:
    """True when a GPU can be used (``tt.cuda.is_available()``)."""
    return backend.cuda_is_available()


def current_accelerator() -> backend.Device | None:
    """``device("cuda")`` when a GPU can be used, else None (as PyTorch)."""
    return backend.CUDA if is_available() else None


def device_count() -> int:
    from tinytrain import cuda

    return cuda.device_count()
