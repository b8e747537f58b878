"""Run a CPU kernel on shards of its work, one thread per core, with BLAS single-threaded.

Like PyTorch's intra-op thread pool, tinytrain's CPU kernels bring their own threads:
every op that calls the BLAS (convolution, the linear layers) or makes a pass over a
large array (pooling, ReLU, dropout) splits its work into one contiguous shard per
worker (images of the batch, rows of a matrix, or a range of elements), and *while
the kernel runs* the BLAS is set to one thread; when it returns (or raises) the BLAS
gets back the thread count it had, so the rest of the process (the user's own NumPy)
is left as it was. NumPy releases the GIL inside matmul and large ufuncs, so the
shards really run in parallel, each on its own core with its own block of work in
cache.

Why not let the BLAS use the cores?

* The direct convolution makes many medium-sized GEMMs (one per block of images, tens
  per op). A multi-threaded BLAS wakes and synchronises its threads on every call, and
  on GEMMs this size that costs more than it saves: measured on 2 cores, two BLAS
  threads made the convolutions of the ``convnet`` model 1.5-2.4x *slower* than one,
  and 10-25x slower while another process was busy on the second core.
* After a multi-threaded GEMM, OpenBLAS's worker threads keep spinning for a while,
  waiting for more work, on the cores the next kernel's shards need. When the linear
  layers still called a two-thread BLAS between the sharded kernels, a ``convnet`` + Adam
  training step on 2 cores took 41-46 ms against 28 ms with the BLAS held at one thread
  around the whole loop. With every BLAS call inside a kernel, OpenBLAS never starts its
  threads for tinytrain's work: 21-27 ms, held or not. So no training loop needs a
  process-wide limit (``python -m tinytrain.train`` sets none).

The switch must be cheap: it happens around every kernel call. ``threadpoolctl``'s
``threadpool_limits`` looks the libraries up again each time (0.2-0.7 ms); here they
are looked up once, and the switch calls the BLAS's own ``openblas_set_num_threads``
(or MKL's, BLIS's) through threadpoolctl's controller: a set-and-restore around a
kernel costs about 4 microseconds (handing a shard to a worker, 30-50). The BLAS
setting is process-wide, so the first kernel to start (in any thread) saves it and the
last one to finish restores it; a NumPy call made by another thread while a kernel
runs also gets one BLAS thread.

The number of workers is decided when tinytrain is imported: as many as the BLAS is
allowed then (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or the core count decide
that), at most one per core; ``tinytrain.set_num_threads(n)`` changes it. Without
``threadpoolctl`` the BLAS cannot be switched, so the kernels run serially.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

_lock = threading.Lock()
_workers: int | None = None  # decided on first use
_chosen: int | None = None  # set by the program (set_num_threads), not by a default
_blas: list[Any] | None = None  # threadpoolctl's controller of each loaded BLAS, found once
_blas_threads = 1  # the BLAS's thread count when it was found: the default number of workers
_running = 0  # kernels running now, in any thread
_saved: list[int] = []  # the BLAS thread counts to restore when the last kernel finishes
_pinned = False  # the BLAS is at one thread (set by a kernel) and not yet restored
_pool: list[_Worker] = []  # the kernels' threads, started when first needed
_local = threading.local()


def _blas_libraries() -> list[Any]:
    """The loaded BLAS libraries, each with ``get_num_threads()`` / ``set_num_threads(n)``.

    Found once, when tinytrain is imported (about 1 ms), and their thread count noted then:
    that is the default number of workers even if the BLAS is limited later (e.g. to one
    thread around a training loop)."""
    global _blas, _blas_threads
    if _blas is None:
        with _lock:
            if _blas is None:
                try:
                    from threadpoolctl import ThreadpoolController

                    libs = [_Blas(lib) for lib in
                            ThreadpoolController().select(user_api="blas").lib_controllers]
                    _blas_threads = max((lib.get_num_threads() or 1 for lib in libs), default=1)
                except Exception:  # not installed, or an unknown BLAS: leave the BLAS alone
                    libs = []
                _blas = libs
    return _blas


class _Blas:
    """One BLAS library's own get/set-num-threads functions, looked up once.

    threadpoolctl >= 3.8 lets only the first Python thread that sets OpenBLAS's
    limit change it again (``set_num_threads`` from any other thread is silently
    ignored); its ``_real_set_num_threads`` is the plain call. Kernels may run in
    any thread, and the lock in :func:`blas_single_threaded` already keeps them
    from fighting, so the plain call is the one wanted here.
    """

    def __init__(self, controller: Any) -> None:
        self.get_num_threads = controller.get_num_threads
        self.set_num_threads = getattr(controller, "_real_set_num_threads",
                                       controller.set_num_threads)


@contextmanager
def blas_single_threaded() -> Iterator[None]:
    """The BLAS at one thread inside the block; its own thread count again after it."""
    global _running, _saved, _pinned
    libs = _blas_libraries()
    counted = False  # set in the same breath as the count, so a Ctrl-C cannot leave it up
    try:
        with _lock:
            if _running == 0:
                if not _pinned:  # (a restore cut short by a Ctrl-C: keep the counts saved)
                    _saved = [lib.get_num_threads() for lib in libs]
                    _pinned = True  # before the switch, which a Ctrl-C may cut short too
                for lib, n in zip(libs, _saved):
                    if n != 1:
                        lib.set_num_threads(1)
            _running += 1
            counted = True
        yield
    finally:
        if counted:
            with _lock:
                _running -= 1
                if _running == 0:
                    _restore_blas(libs)
                    _pinned = False


def _restore_blas(libs: list[Any]) -> None:
    for lib, n in zip(libs, _saved):
        if n != 1:
            lib.set_num_threads(n)


def get_num_threads() -> int:
    """How many threads tinytrain's CPU kernels split their work over."""
    global _workers
    if _workers is None:
        _blas_libraries()
        _workers = max(1, min(_blas_threads, os.cpu_count() or 1))
    return _workers


def set_num_threads(n: int) -> None:
    """Split tinytrain's CPU kernels over ``n`` threads.

    Inside a kernel each thread calls the BLAS single-threaded; NumPy's own BLAS
    setting outside the kernels is not changed (use ``threadpoolctl`` for that).
    """
    global _chosen
    _chosen = set_default_num_threads(n)


def set_default_num_threads(n: int) -> int:
    """:func:`set_num_threads` as a default of tinytrain's (e.g. each rank's share of the
    cores), which a number the program chose itself (:func:`chosen_num_threads`) overrides."""
    global _workers
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"set_num_threads: need an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"set_num_threads: need at least 1 thread, got {n}")
    _workers = int(n)
    return _workers


def chosen_num_threads() -> int | None:
    """The number of threads the program set with :func:`set_num_threads`, or None."""
    return _chosen


def _mark_worker() -> None:
    _local.worker = True


def in_worker() -> bool:
    """True in one of the threads of the kernels' pool (not in the thread that called a kernel)."""
    return getattr(_local, "worker", False)


_MARK = ("mark",)  # a job that only says "every job before me is done"


class _Worker:
    """One thread of the kernels' pool: it takes a shard from its own queue, runs it and
    releases ``done``; the caller takes ``done`` to wait for it.

    Why not ``concurrent.futures``: a shard's hand-off is what two threads lose against
    one, and an executor's ``submit`` and ``wait`` are ~20 us each of Python (a Future, its
    Condition, a waiter object) during which the other thread waits for the GIL. A queue
    and a lock are each one C call: cnn's training step on two threads went 8.44 -> 8.16 ms
    (bench/NOTES_cpu.md, v15).
    """

    started = 0  # for the threads' names

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.done = threading.Lock()
        self.done.acquire()
        self.result: tuple[Any, BaseException | None] = (None, None)
        self.idle = True  # no shard handed out and not yet waited for (set after ``done``)
        self.marked = threading.Lock()  # released when a _MARK job is reached
        self.marked.acquire()
        _Worker.started += 1
        thread = threading.Thread(target=self._loop, name=f"tinytrain-cpu_{_Worker.started}",
                                  daemon=True)
        try:
            thread.start()
        except BaseException:  # (a Ctrl-C in start): if the thread runs, it ends at once
            self.jobs.put(None)
            raise

    def _loop(self) -> None:
        _mark_worker()
        while (job := self.jobs.get()) is not None:
            if job is _MARK:  # every job queued before it is done (see _drain)
                _release(self.marked)
                continue
            try:
                # the shard holds the BLAS at one thread itself: a retired worker's shard may
                # outlive its caller's kernel, and a multi-threaded BLAS called from several
                # threads at once can hang
                with blas_single_threaded():
                    self.result = (_run(*job), None)
            except BaseException as exc:  # handed to the caller, which raises it
                self.result = (None, exc)
            del job  # the shard's closure holds the kernel's arrays: not until the next job
            _release(self.done)
            self.idle = True


def _release(lock: threading.Lock) -> None:
    try:
        lock.release()
    except RuntimeError:  # already released and not taken since: nobody waits for it
        pass


# One kernel call at a time uses the pool (another thread's runs its shards one after the
# other on its own core). The pool's state must survive a Ctrl-C at any point of a call
# (Python raises KeyboardInterrupt between any two bytecodes, even inside an ``except``):
#
# * a call does not return or raise while a shard it handed out may still run
#   (_run_on_pool, _wait_for), except where a Ctrl-C lands in its own bookkeeping;
# * so each call first checks every worker (_claim_pool): one still busy with an earlier
#   call's shard leaves the pool, one whose ``done`` was released and never taken gets it
#   taken, so that no call ever takes another's ``done`` or result;
# * the calling thread is recorded as the pool's user: a call interrupted before it could
#   let go is found by the next call of the same thread, which takes the pool again.
_user: int | None = None


def _claim_pool() -> bool:
    """Make the calling thread the pool's user (and check its workers, above); False while
    another thread uses it."""
    global _user
    me = threading.get_ident()
    with _lock:
        if _user is not None and _user != me:
            return False
        _user = me
        for worker in list(_pool):
            if not worker.idle or not worker.jobs.empty():
                _retire_locked([worker])
                continue
            worker.done.acquire(blocking=False)
            worker.marked.acquire(blocking=False)
        return True


def _release_pool() -> None:
    global _user
    with _lock:
        for worker in _pool:
            worker.result = (None, None)  # what a failed call did not collect: its arrays
        _user = None


def _workers_for(count: int) -> list[_Worker]:
    """The first ``count`` threads of the pool (started now if there are fewer)."""
    with _lock:
        while len(_pool) < count:
            _pool.append(_Worker())
        return _pool[:count]


def _retire_locked(workers: list[_Worker]) -> None:
    """Take threads whose shard may still be running out of the pool (``_lock`` held): each
    ends after its shard, and their ``done`` is never waited on again."""
    for worker in workers:
        if worker in _pool:
            _pool.remove(worker)
        worker.jobs.put(None)


def _forget_pool_in_child() -> None:
    """After ``os.fork`` the child has none of the pool's threads (and a lock another
    thread held stays held): it starts its own pool, from nothing, when it needs one. A
    kernel that was running in another thread of the parent never ends here: the BLAS gets
    back the thread count it had before."""
    global _lock, _running, _user, _pinned
    _lock, _user = threading.Lock(), None
    _pool.clear()
    if _pinned:
        _running, _pinned = 0, False
        _restore_blas(_blas or [])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _run(fn: Callable[[int, int], T], a: int, b: int) -> T:
    _local.inside = True  # a kernel called from a shard does not shard again
    try:
        return fn(a, b)
    finally:
        _local.inside = False


def shard_batch(kernel: Callable[..., T], batch: int, *arrays: Any, min_shard: int = 2) -> list[T]:
    """``kernel(*(a[lo:hi] for a in arrays), lo, hi)`` for each shard ``[lo, hi)`` of the
    batch (at least ``min_shard`` images each), in parallel. ``arrays`` are batch-major
    NumPy arrays."""
    return run_sharded(lambda lo, hi: kernel(*(t[lo:hi] for t in arrays), lo, hi), batch,
                       min_shard)


def run_sharded(fn: Callable[[int, int], T], batch: int, min_shard: int = 2) -> list[T]:
    """``[fn(a, b) for each shard [a, b) of range(batch)]``, the shards in parallel.

    ``fn`` must only write to the part of its outputs that belongs to its shard.
    Shards have at least ``min_shard`` images; a batch too small to split (or one
    worker) runs as a single call on the calling thread. The calling thread runs the first
    shard itself, the pool's threads the others; while another thread's call uses the
    pool, the calling thread runs the same shards in turn. The BLAS runs on one thread
    until every shard has finished, also when one raises; a Ctrl-C is raised once they
    have (see :func:`_wait_for`).
    """
    if getattr(_local, "inside", False):
        return [fn(0, batch)]
    workers = min(get_num_threads(), max(1, batch // min_shard))
    with blas_single_threaded():
        if workers == 1:
            return [fn(0, batch)]
        bounds = [batch * k // workers for k in range(workers + 1)]
        shards = list(zip(bounds[:-1], bounds[1:]))
        if sys.is_finalizing() or not _claim_pool():
            # the same shards, one after the other (the same sums in the same order: the
            # results do not depend on which thread got the pool); at exit, daemon
            # threads no longer run
            return [_run(fn, a, b) for a, b in shards]
        try:
            return _run_on_pool(fn, shards)
        finally:
            _release_pool()


def _run_on_pool(fn: Callable[[int, int], T], shards: list[tuple[int, int]]) -> list[T]:
    """The first shard on the calling thread, the others on the pool's threads.

    Every shard is done before this returns or raises: a kernel's effects (an optimizer's
    in-place update, say) must not go on after its caller has moved on, e.g. to restore the
    weights after a Ctrl-C."""
    pool = _workers_for(len(shards) - 1)
    handing_out = True
    try:
        for worker, (a, b) in zip(pool, shards[1:]):
            worker.idle = False
            worker.jobs.put((fn, a, b))
        handing_out = False
        try:
            first = _run(fn, *shards[0])
        finally:
            _wait_for(pool)
    except BaseException:
        if handing_out:  # which workers got a shard is not known: wait for any that did
            _drain(pool)
        raise
    results = [first]
    for worker in pool:
        value, error = worker.result
        if error is not None:
            raise error
        results.append(value)
    return results


def _wait_for(pool: list[_Worker]) -> None:
    """Wait for each worker's shard. A Ctrl-C meanwhile is raised once they are done (as a
    PyTorch op finishes before Python sees the signal); a second one gives up on them, and
    they leave the pool (their late ``done`` must never be taken for another call's)."""
    interrupted: BaseException | None = None
    pending = list(pool)
    while pending:
        try:
            while pending:  # (the loop, not only the wait, inside the try)
                pending[0].done.acquire()
                del pending[0]
        except BaseException as exc:
            if interrupted is not None:
                _retire(pending)
                raise
            interrupted = exc
            if pending and pending[0].idle:  # the signal may have come just after the
                pending[0].done.acquire(blocking=False)  # acquire: either way, it is held
                del pending[0]
    if interrupted is not None:
        raise interrupted


def _drain(pool: list[_Worker]) -> None:
    """After an exception while shards were being handed out: a _MARK behind each worker's
    job (queues are first in, first out) says when the shard it may have got is done; then
    its ``done`` is taken if that shard released it. Interrupted again: they leave the pool."""
    try:
        for worker in pool:
            worker.jobs.put(_MARK)
        for worker in pool:
            worker.marked.acquire()
            worker.done.acquire(blocking=False)
    except BaseException:
        _retire(pool)
        raise


def _retire(workers: list[_Worker]) -> None:
    with _lock:
        _retire_locked(workers)


def add_shards(parts: list[Any]) -> Any:
    """The shards' partial results (of :func:`run_sharded`) added up, in shard order, in
    place into the first one."""
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total


#: Element-wise kernels split an array over the threads only when every thread gets at
#: least this many elements (unless the kernel asks for more, below). The hand-off is the
#: cost to beat: a waiting worker is woken ~12 us after the call, but starts its shard
#: 30-55 us after it (it waits for the GIL while the calling thread sets up its own shard),
#: and the caller then waits for the last shard: about a ReLU pass over 500K float32.
MIN_ELEMENTS = 1 << 16


def shard_elements(fn: Callable[[int, int], T], size: int,
                   min_per_thread: int | None = None) -> list[T]:
    """``fn(a, b)`` for each shard ``[a, b)`` of ``range(size)`` (flat element indices),
    in parallel when the array is large enough (``min_per_thread`` elements per thread:
    a cheap pass needs more elements to pay for the hand-off than an expensive one;
    :data:`MIN_ELEMENTS` when not given)."""
    return run_sharded(fn, size, min_shard=max(1, min_per_thread or MIN_ELEMENTS))


_blas_libraries()
