"""``tt.cuda``: the few ``torch.cuda`` functions scripts use to pick a device.

tinytrain runs one GPU per process through CuPy (see :mod:`tinytrain.backend`).
"""

from __future__ import annotations

from tinytrain import backend


def is_available() -> bool:
    """True when CuPy imports and sees a GPU (``device="cuda"`` will work)."""
    return backend.cuda_is_available()


def device_count() -> int:
    """The number of GPUs CuPy sees (0 without CuPy or a GPU)."""
    return backend.cupy_module().cuda.runtime.getDeviceCount() if is_available() else 0


def synchronize() -> None:
    """Wait until the GPU has finished all queued work (for timing). No-op without a GPU."""
    if is_available():
        backend.cupy_module().cuda.Device().synchronize()


def manual_seed(seed: int) -> None:
    """Accepted for PyTorch scripts; does nothing: every random number in tinytrain comes
    from one CPU generator (``tt.manual_seed``) and is then moved to the GPU."""


manual_seed_all = manual_seed
