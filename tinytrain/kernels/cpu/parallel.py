"""Run a CPU kernel on shards of the batch, one thread per core, with BLAS single-threaded.

Why not let the BLAS use the cores? The direct convolution makes many small GEMMs
(one per kernel offset and block of images, ~100 per op). A multi-threaded BLAS
wakes and synchronises its threads on every call, and on GEMMs this small that costs
more than it saves: measured on 2 cores, two BLAS threads made the convolutions of
the ``convnet`` model 1.5-2.4x *slower* than one, and 10-25x slower while another
process was busy on the second core (each call waits for a time slice). Switching
the BLAS between one thread (inside a kernel) and several (outside) costs too: a
``convnet`` training step took 86 ms that way, 54 ms with the BLAS left on one thread.

So, like PyTorch's intra-op thread pool, tinytrain takes the CPU threads for itself:
the first time a kernel runs, it notes how many threads the BLAS was allowed
(``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or the core count decide that),
keeps that many workers, and sets the BLAS to one thread for the rest of the
process. Each kernel call then splits the batch into one contiguous shard per
worker. NumPy releases the GIL inside matmul and large ufuncs, so the shards really
run in parallel, each on its own core with its own block of images in cache.
``tinytrain.set_num_threads(n)`` changes the number of workers. Without
``threadpoolctl`` the BLAS is left alone and the kernels run serially.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_workers: int | None = None  # decided on first use
_blas_limit: Any = None  # keeps threadpoolctl's limit (BLAS at one thread) in force
_pool: ThreadPoolExecutor | None = None
_local = threading.local()


def _take_over() -> int:
    """On first use: note the BLAS's thread count, then pin the BLAS to one thread."""
    global _workers, _blas_limit
    if _workers is None:
        with _lock:
            if _workers is None:
                try:
                    from threadpoolctl import ThreadpoolController

                    blas = ThreadpoolController().select(user_api="blas")
                    threads = max((p["num_threads"] for p in blas.info()), default=1)
                    _blas_limit = blas.limit(limits=1) if blas else None
                except Exception:  # not installed, or an unknown BLAS: stay serial
                    threads = 1
                _workers = max(1, min(threads, os.cpu_count() or 1))
    return _workers


def get_num_threads() -> int:
    """How many threads tinytrain's CPU kernels split their work over."""
    return _take_over()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for tinytrain's CPU kernels (the BLAS itself stays at one)."""
    global _workers
    if int(n) < 1:
        raise ValueError(f"set_num_threads: need at least 1 thread, got {n}")
    _take_over()
    _workers = int(n)


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


def shard_batch(kernel: Callable[..., T], batch: int, *arrays: Any) -> list[T]:
    """``kernel(*(a[lo:hi] for a in arrays), lo, hi)`` for each shard ``[lo, hi)`` of the
    batch, in parallel. ``arrays`` are batch-major NumPy arrays."""
    return run_sharded(lambda lo, hi: kernel(*(t[lo:hi] for t in arrays), lo, hi), batch)


def run_sharded(fn: Callable[[int, int], T], batch: int, min_shard: int = 2) -> list[T]:
    """``[fn(a, b) for each shard [a, b) of range(batch)]``, the shards in parallel.

    ``fn`` must only write to the part of its outputs that belongs to its shard.
    Shards have at least ``min_shard`` images; a batch too small to split (or one
    worker) runs as a single call on the calling thread.
    """
    workers = 1 if getattr(_local, "inside", False) else _take_over()
    workers = min(workers, max(1, batch // min_shard))
    if workers == 1:
        return [fn(0, batch)]
    bounds = [batch * k // workers for k in range(workers + 1)]
    futures = [_executor(workers).submit(_run, fn, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    return [f.result() for f in futures]
