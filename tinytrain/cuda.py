"""``tt.cuda``: the few ``torch.cuda`` functions scripts use to pick a device.

tinytrain runs one GPU per process through CuPy (see :mod:`tinytrain.backend`).
"""

from __future__ import annotations

from typing import Any

from tinytrain import backend
from tinytrain.random import seed_value


def is_available() -> bool:
    """True when CuPy imports and sees a GPU (``device="cuda"`` will work)."""
    return backend.cuda_is_available()


def device_count() -> int:
    """The number of GPUs CuPy sees (0 without CuPy or a GPU)."""
    return backend.cupy_module().cuda.runtime.getDeviceCount() if is_available() else 0


def current_device() -> int:
    """The index of this process's GPU (CuPy's current device); 0 without a GPU."""
    return backend.cupy_module().cuda.Device().id if is_available() else 0


def set_device(device: Any) -> None:
    """Make GPU ``device`` (an index, ``"cuda:N"``, ``tt.device("cuda", N)``) this process's GPU:
    ``"cuda"`` then means it (``torch.cuda.set_device``; DDP scripts pass their local rank)."""
    try:
        name, index = backend.split_device(device)
    except ValueError:
        name, index = "", None
    if name != "cuda" or index is None:  # ('cuda' alone names no GPU: PyTorch refuses it)
        raise ValueError(f"set_device: expected a GPU index, 'cuda:N' or a cuda device with an "
                         f"index, got {device!r}")
    if not is_available():
        backend.array_module("cuda")  # raises: no CuPy, or no GPU
    if index >= device_count():
        raise ValueError(f"set_device: there is no GPU {index}; this machine has "
                         f"{device_count()}")
    backend.cupy_module().cuda.Device(index).use()


def synchronize() -> None:
    """Wait until the GPU has finished all queued work (for timing). No-op without a GPU."""
    if is_available():
        backend.cupy_module().cuda.Device().synchronize()


def manual_seed(seed: int) -> None:
    """Accepted for PyTorch scripts; does nothing: every random number in tinytrain comes
    from one CPU generator (``tt.manual_seed``) and is then moved to the GPU. A seed that
    is not an integer is refused, as by PyTorch."""
    seed_value(seed)


manual_seed_all = manual_seed
