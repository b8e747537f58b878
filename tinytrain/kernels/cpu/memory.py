"""A caching allocator for the CPU kernels' large arrays (like CuPy's memory pool, on the host).

Why: a training step allocates the same large arrays every step (each layer's output, its
gradient, the convolution's im2col blocks), and frees them when the step's graph goes. glibc
hands memory that large back to the kernel (``munmap``, or trimming the heap's top once more
than twice the largest freed block is free), so the next step gets fresh pages and faults
every 4 KiB of them in again, zero-filled. On the course's 2-core VM a fault costs about
2 us: the ``cnn`` model's step at batch 64 took ~4,000 faults, 8 of its 22 ms on one thread.

So the kernels take their outputs and scratch from here: :func:`empty` returns an array on a
block that an earlier, dead array of the same size class used, or a new one. A block goes
back to the cache when the last array on it dies: the array is made from a small *lease*
object that owns nothing but holds the block (NumPy stops collapsing a view's ``base`` at a
non-array owner, so every view of the array keeps the array, and thus the lease, alive) and
a ``weakref.finalize`` on the lease returns the block. Nothing else changes for the arrays'
users: they are ordinary writeable ndarrays, only not ``OWNDATA``.

What this costs: ~3 us per large array (a step makes a few dozen), and memory: the cache
keeps blocks that no array uses, at most :data:`CACHE_LIMIT` bytes (oldest dropped first);
a steady training loop keeps about its step's peak. ``empty_cache()`` gives them back.
Arrays under :data:`MIN_BYTES` come from ``np.empty`` as before (glibc's heap reuses those).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict, deque
from typing import Any

import numpy as np

__all__ = ["CACHE_LIMIT", "MIN_BYTES", "cached_bytes", "empty", "empty_cache", "zeros"]

#: Arrays smaller than this are plain ``np.empty`` arrays.
MIN_BYTES = 1 << 16
#: Block sizes are rounded up to a multiple of this (a page), so near sizes share blocks.
_GRAIN = 1 << 12
#: The cache keeps at most this many bytes of unused blocks; beyond it the oldest go.
CACHE_LIMIT = 1 << 29

_lock = threading.Lock()
_free: OrderedDict[int, tuple[int, Any]] = OrderedDict()  # id -> (size, block), oldest first
_by_size: dict[int, list[int]] = {}  # size -> ids in _free
_cached = 0  # bytes in _free
# Blocks whose arrays died, not yet sorted into _free. A finalizer only appends here (atomic,
# no lock): it may run in any thread, at any allocation, even while this thread holds _lock.
_returned: deque[tuple[int, Any]] = deque()


class _Lease:
    """Owner of one array's memory: it holds the block, its array holds it."""

    __slots__ = ("__array_interface__", "__weakref__")


def _sort_in() -> None:
    """Move the returned blocks into the cache, dropping the oldest beyond CACHE_LIMIT.
    Call with _lock held."""
    global _cached
    while _returned:
        size, block = _returned.popleft()
        _free[id(block)] = (size, block)
        _by_size.setdefault(size, []).append(id(block))
        _cached += size
    while _cached > CACHE_LIMIT and _free:
        key, (old, _) = _free.popitem(last=False)
        _by_size[old].remove(key)
        _cached -= old


def _take(size: int) -> Any:
    global _cached
    with _lock:
        _sort_in()
        ids = _by_size.get(size)
        if ids:
            _, block = _free.pop(ids.pop())
            _cached -= size
            return block
    return np.empty(size, dtype=np.uint8)


def empty(shape: Any, dtype: Any = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array, as ``np.empty(shape, dtype)``, on a cached block
    when it is at least :data:`MIN_BYTES` large."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if nbytes < MIN_BYTES or dtype.hasobject:
        return np.empty(shape, dtype=dtype)
    size = -(-nbytes // _GRAIN) * _GRAIN
    block = _take(size)
    lease = _Lease()
    lease.__array_interface__ = {"data": (block.ctypes.data, False), "shape": shape,
                                 "typestr": dtype.str, "version": 3}
    out = np.asarray(lease)
    weakref.finalize(lease, _returned.append, (size, block)).atexit = False
    return out


def zeros(shape: Any, dtype: Any = np.float32) -> np.ndarray:
    """As ``np.zeros(shape, dtype)``, on a cached block when large (see :func:`empty`)."""
    out = empty(shape, dtype)
    out.fill(0)
    return out


def cached_bytes() -> int:
    """Bytes held by the cache in blocks that no array uses."""
    with _lock:
        _sort_in()
        return _cached


def empty_cache() -> None:
    """Give every unused cached block back (as ``torch.cuda.empty_cache`` does on the GPU)."""
    global _cached
    with _lock:
        _returned.clear()
        _free.clear()
        _by_size.clear()
        _cached = 0
