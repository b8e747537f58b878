"""A caching allocator for the CPU kernels' large arrays (like CuPy's memory pool, on the host).

Why: a training step allocates the same large arrays every step (each layer's output, its
gradient, the convolution's im2col blocks), and frees them when the step's graph goes. glibc
hands memory that large back to the kernel (``munmap``, or trimming the heap's top once more
than twice the largest freed block is free), so the next step gets fresh pages and faults
every 4 KiB of them in again, zero-filled. On the course's 2-core VM a fault costs about
2 us: the ``cnn`` model's step at batch 64 took ~4,000 faults, 8 of its 22 ms on one thread.

So the kernels take their outputs and scratch from here: :func:`empty` returns an array on a
block that an earlier, dead array used (the newest that fits), or a new one. A block goes
back to the cache when the last array on it dies: the array is made from a small *lease*
object that owns nothing but holds the block (NumPy stops collapsing a view's ``base`` at a
non-array owner, so every view of the array keeps the array, and thus the lease, alive), and
the lease's death queues the block. Nothing else changes for the arrays' users: they are
ordinary writeable ndarrays, only not ``OWNDATA``.

The queueing is a weak reference's callback that is C code (``deque.append``), not a
``__del__`` method: Python checks for signals when it starts running Python code, and a
Ctrl-C or SIGTERM that arrives inside a ``__del__`` is printed and *ignored* ("Exception
ignored in ..."). With a thousand arrays dying per step, a training run lost about one
Ctrl-C in 40 that way.

Only the thread that calls the kernels (the training loop's) uses the cache. The threads of
the kernels' pool (:mod:`~tinytrain.kernels.cpu.parallel`) take their shards' scratch from
``np.empty``: glibc keeps the memory of their per-thread arenas (the fault count did not
change without them), and the cache's Python bookkeeping there only contends for the GIL
with the calling thread.

What this costs: ~2 us per large array (a step makes a few dozen), and memory: the cache
keeps blocks that no array uses, at most :data:`CACHE_LIMIT` bytes (oldest dropped first);
a steady training loop keeps about its step's peak. ``empty_cache()`` gives them back.
Arrays under :data:`MIN_BYTES` come from ``np.empty`` as before (glibc's heap reuses those).
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections import OrderedDict, deque
from typing import Any

import numpy as np

from tinytrain.kernels.cpu.parallel import in_worker

__all__ = ["CACHE_LIMIT", "MIN_BYTES", "cached_bytes", "empty", "empty_cache", "zeros"]

#: Arrays smaller than this are plain ``np.empty`` arrays.
MIN_BYTES = 1 << 16
#: Block sizes are rounded up to a multiple of this (a page).
_GRAIN = 1 << 12
#: The cache keeps at most this many bytes of unused blocks; beyond it the oldest go.
CACHE_LIMIT = 1 << 29

#: A request takes the most recently returned block that fits (at most this many looked at)
#: and is at most :data:`FIT` times its size: the newest block is the one most likely still
#: in the CPU's caches, as the memory glibc would hand back. (Only exactly-sized blocks, the
#: first version, made a convnet step 3-7% slower than plain ``np.empty`` where glibc did not
#: fault; this way it is as fast there.)
SCAN = 16
FIT = 1.5

_lock = threading.Lock()
# A block is (uint8 array, its address). id(block) -> (size, block), oldest first:
_free: OrderedDict[int, tuple[int, Any]] = OrderedDict()
_cached = 0  # bytes in _free
# The weak references of leases that died, not yet sorted into _free. A dying lease's weak
# reference only appends itself here (atomic, no lock): that may happen in any thread, at
# any allocation, even while this thread holds _lock.
_returned: deque[weakref.ref] = deque()


# The blocks of live leases, by the weak reference that watches each lease.
_leased: dict[weakref.ref, tuple[int, Any]] = {}


def _new_lock_in_child() -> None:
    """A child forked while another thread held ``_lock`` would wait for it forever."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


class _Lease:
    """Owner of one array's memory: its array holds it. When the last array (or view, or
    buffer export) on it dies, so does the lease, and its weak reference in :data:`_leased`
    queues itself in ``_returned`` (a C call: no Python code runs there)."""

    __slots__ = ("__array_interface__", "__weakref__")


def _sort_in() -> None:
    """Move the returned blocks into the cache, dropping the oldest beyond CACHE_LIMIT.
    Call with _lock held."""
    global _cached
    while _returned:
        size, block = _leased.pop(_returned.popleft())
        _free[id(block)] = (size, block)
        _cached += size
    while _cached > CACHE_LIMIT and _free:
        _cached -= _free.popitem(last=False)[1][0]


def _take(size: int) -> tuple[int, Any]:
    """``(block size, block)`` for a request of ``size`` bytes: a cached block or a new one."""
    global _cached
    with _lock:
        _sort_in()
        for _, key in zip(range(SCAN), reversed(_free)):
            have, block = _free[key]
            if size <= have <= size * FIT:
                del _free[key]
                _cached -= have
                return have, block
    block = np.empty(size, dtype=np.uint8)
    return size, (block, block.ctypes.data)


def empty(shape: Any, dtype: Any = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array, as ``np.empty(shape, dtype)``, on a cached block
    when it is at least :data:`MIN_BYTES` large."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    nbytes = dtype.itemsize * math.prod(shape)
    if nbytes < MIN_BYTES or dtype.kind in "OV" or min(shape) < 0 or in_worker():
        return np.empty(shape, dtype=dtype)
    size = -(-nbytes // _GRAIN) * _GRAIN
    size, block = _take(size)
    lease = _Lease()
    _leased[weakref.ref(lease, _returned.append)] = (size, block)
    lease.__array_interface__ = {"data": (block[1], False), "shape": shape,
                                 "typestr": dtype.str, "version": 3}
    return np.asarray(lease)


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
        while _returned:
            _leased.pop(_returned.popleft())
        _free.clear()
        _cached = 0
