"""``tt.cuda``: the few ``torch.cuda`` functions scripts use to pick a device and to report
its memory.

tinytrain runs one GPU per process through CuPy (see :mod:`tinytrain.backend`). Its arrays
come from CuPy's memory pool, so the memory functions report that pool (PyTorch's report its
caching allocator). Without a GPU they answer as PyTorch's CPU build does: the byte counts
are 0 and ``empty_cache`` does nothing, ``get_device_name`` raises.
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


def _gpu(device: Any, what: str) -> int:
    """The index of GPU ``device`` (None: this process's), checked."""
    if not is_available():
        backend.array_module("cuda")  # raises: no CuPy, or no GPU
    if device is None:
        return current_device()
    try:
        name, index = backend.split_device(device)
    except ValueError:
        name, index = "", None
    if name != "cuda":
        raise ValueError(f"{what}: expected a GPU index, 'cuda', 'cuda:N' or a cuda device, got "
                         f"{device!r}")
    index = current_device() if index is None else index
    if index >= device_count():
        raise ValueError(f"{what}: there is no GPU {index}; this machine has {device_count()}")
    return index


def _pool_bytes(device: Any, what: str, reserved: bool) -> int:
    """Bytes of CuPy's memory pool on GPU ``device``: in arrays, or held (``reserved``)."""
    if not is_available():
        return 0
    cp = backend.cupy_module()
    with cp.cuda.Device(_gpu(device, what)):
        pool = cp.get_default_memory_pool()
        return int(pool.total_bytes() if reserved else pool.used_bytes())


def memory_allocated(device: Any = None) -> int:
    """Bytes in arrays on GPU ``device`` (None: this process's), from CuPy's memory pool;
    0 without a GPU (as PyTorch's CPU build)."""
    return _pool_bytes(device, "memory_allocated", reserved=False)


def memory_reserved(device: Any = None) -> int:
    """Bytes CuPy's memory pool holds on GPU ``device``: in arrays, and freed but kept for
    reuse (PyTorch's caching allocator, likewise); 0 without a GPU."""
    return _pool_bytes(device, "memory_reserved", reserved=True)


class _Peak:
    """The largest :func:`memory_allocated` per GPU since tracking began. CuPy's pool keeps
    no peak: a memory hook (CuPy's ``MemoryHook``, entered for good on the first call of
    :func:`max_memory_allocated` or :func:`reset_peak_memory_stats`) updates it after each
    allocation of this thread. Until then, nothing is tracked (no cost per allocation)."""

    def __init__(self) -> None:
        self.peak: dict[int, int] = {}
        self.hook: Any = None

    def start(self) -> None:
        if self.hook is not None:
            return
        cp = backend.cupy_module()
        peak = self.peak

        class PeakHook(cp.cuda.memory_hook.MemoryHook):
            name = "tinytrain_peak"

            def malloc_postprocess(self, device_id: int, **sizes: Any) -> None:
                used = int(cp.get_default_memory_pool().used_bytes())
                peak[device_id] = max(peak.get(device_id, 0), used)

        self.hook = PeakHook()
        self.hook.__enter__()

    def reset(self, index: int) -> None:
        self.peak[index] = _pool_bytes(index, "reset_peak_memory_stats", reserved=False)


_peak = _Peak()


def max_memory_allocated(device: Any = None) -> int:
    """The largest :func:`memory_allocated` of GPU ``device`` since tracking began: the
    first call of this function or of :func:`reset_peak_memory_stats` (CuPy keeps no peak;
    call ``reset_peak_memory_stats()`` before the part to measure). 0 without a GPU."""
    if not is_available():
        return 0
    index = _gpu(device, "max_memory_allocated")
    _peak.start()
    now = memory_allocated(index)
    _peak.peak[index] = max(_peak.peak.get(index, 0), now)
    return _peak.peak[index]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Start :func:`max_memory_allocated` again from the bytes in use now. Needs a GPU."""
    index = _gpu(device, "reset_peak_memory_stats")
    _peak.start()
    _peak.reset(index)


def empty_cache() -> None:
    """Give the GPU memory that CuPy's pools hold but no array uses back to the driver
    (``memory_reserved`` drops towards ``memory_allocated``: a block of which arrays still
    use a part stays held, as in PyTorch). Does nothing without a GPU."""
    if is_available():
        cp = backend.cupy_module()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()


def get_device_name(device: Any = None) -> str:
    """The name of GPU ``device`` (None: this process's), e.g. ``"NVIDIA H200"``. Needs a
    GPU (PyTorch's CPU build raises too)."""
    name = backend.cupy_module().cuda.runtime.getDeviceProperties(
        _gpu(device, "get_device_name"))["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: tinytrain has no bfloat16 tensors (its float dtypes are float16, float32 and
    float64), whatever the GPU supports. Scripts that pick ``"bfloat16"`` when this is True
    (nanoGPT) then choose float16 or float32; tinytrain trains in float32 (``tt.amp``)."""
    return False


def __getattr__(name: str) -> Any:
    """``tt.cuda.amp`` (PyTorch's deprecated spelling of ``tt.amp`` for CUDA) loads on first
    use; other missing names get the module's hint."""
    if name == "amp":
        from tinytrain.amp import _cuda_amp

        return _cuda_amp
    from tinytrain._missing import module_getattr

    return module_getattr("tinytrain.cuda", {})(name)
