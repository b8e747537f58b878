"""Run a CPU kernel on shards of the batch, one thread per core, with BLAS single-threaded.

Why not let the BLAS use the cores? The direct convolution makes many small GEMMs
(one per kernel offset and block of images, ~100 per op). A multi-threaded BLAS
wakes and synchronises its threads on every call, and on GEMMs this small that costs
more than it saves: measured on 2 cores, two BLAS threads made the convolutions of
the ``convnet`` model 1.5-2.4x *slower* than one, and 10-25x slower while another
process was busy on the second core (each call waits for a time slice).

So the kernels split the batch into one contiguous shard per core and run each
shard's GEMMs on a single BLAS thread, from a small thread pool. NumPy releases the
GIL inside matmul and large ufuncs, so the shards really run in parallel, and each
thread keeps its own block of images in its core's cache.

The number of workers is the BLAS's thread count when the kernel is called, so the
usual knobs (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``threadpoolctl``) still
decide how many cores tinytrain uses. Without ``threadpoolctl`` the kernels run
serially, on whatever threads the BLAS chooses.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_blas: Any = None  # threadpoolctl's controller for the BLAS libraries, or False
_pool: ThreadPoolExecutor | None = None
_local = threading.local()

#: Set to an int to fix the number of shards (tests use it); None follows the BLAS.
WORKERS: int | None = None


def _blas_controller() -> Any:
    global _blas
    if _blas is None:
        with _lock:
            if _blas is None:
                try:
                    from threadpoolctl import ThreadpoolController

                    _blas = ThreadpoolController().select(user_api="blas") or False
                except Exception:  # not installed, or an unknown BLAS
                    _blas = False
    return _blas


def num_workers() -> int:
    """How many shards a kernel call is split into: the BLAS's current thread count."""
    if getattr(_local, "inside", False):
        return 1
    if WORKERS is not None:
        return WORKERS
    blas = _blas_controller()
    if not blas:
        return 1
    threads = max(p["num_threads"] for p in blas.info())
    return max(1, min(threads, os.cpu_count() or 1))


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tinytrain-cpu")
        return _pool


def _run(fn: Callable[[int, int], T], a: int, b: int) -> T:
    _local.inside = True  # a kernel called from a shard does not shard again
    try:
        return fn(a, b)
    finally:
        _local.inside = False


def run_sharded(fn: Callable[[int, int], T], batch: int, min_shard: int = 2) -> list[T]:
    """``[fn(a, b) for each shard [a, b) of range(batch)]``, the shards in parallel.

    ``fn`` must only write to the part of its outputs that belongs to its shard.
    Shards have at least ``min_shard`` images; a batch too small to split (or one
    worker) runs as a single call on the calling thread.
    """
    workers = min(num_workers(), max(1, batch // min_shard))
    blas = _blas_controller()
    single = blas.limit(limits=1) if blas else nullcontext()
    if workers == 1:
        with single:
            return [fn(0, batch)]
    bounds = [batch * k // workers for k in range(workers + 1)]
    with single:
        futures = [_executor(workers).submit(_run, fn, a, b)
                   for a, b in zip(bounds[:-1], bounds[1:])]
        return [f.result() for f in futures]
