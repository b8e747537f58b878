"""The CPU kernels' caching allocator: blocks are reused only once no array uses them."""

from __future__ import annotations

import gc
import signal
import sys
import threading

import numpy as np
import pytest

import tinytrain as tt
from tinytrain.kernels.cpu import memory

SHAPE = (64, 300)  # 76,800 bytes of float32: above MIN_BYTES


@pytest.fixture(autouse=True)
def _fresh_cache():
    gc.collect()
    memory.empty_cache()
    yield
    memory.empty_cache()


def test_a_dead_arrays_block_is_reused():
    a = memory.empty(SHAPE)
    ptr = a.ctypes.data
    del a
    assert memory.cached_bytes() >= 64 * 300 * 4
    b = memory.empty(SHAPE)
    assert b.ctypes.data == ptr
    assert memory.cached_bytes() == 0


@pytest.mark.parametrize("keep", [
    lambda a: a[1:].T,  # a view of a view
    lambda a: a.reshape(-1)[::3],
    lambda a: memoryview(a),  # a buffer export
    lambda a: np.frombuffer(a, dtype=np.uint8),
    lambda a: tt.from_numpy(a),  # a Tensor on it
])
def test_a_block_is_not_reused_while_anything_still_sees_it(keep):
    a = memory.empty(SHAPE)
    a[...] = 7.0
    held = keep(a)
    before = np.asarray(held).copy()
    ptr = a.ctypes.data
    del a
    gc.collect()
    others = [memory.empty(SHAPE) for _ in range(3)]
    for o in others:
        assert o.ctypes.data != ptr
        o[...] = -1.0
    np.testing.assert_array_equal(np.asarray(held), before)
    del held
    gc.collect()
    assert memory.empty(SHAPE).ctypes.data == ptr


def test_arrays_are_ordinary_writeable_arrays():
    a = memory.empty((3, 5, 1000), dtype=np.float64)
    assert a.shape == (3, 5, 1000) and a.dtype == np.float64
    assert a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    for dtype in (np.int16, np.uint32, bool, np.float32):
        z = memory.zeros((50, 2000), dtype=dtype)
        assert z.dtype == np.dtype(dtype) and not z.any()
    assert memory.empty(7).shape == (7,)
    record = np.dtype([("a", "<f4"), ("b", "<i4")])  # structured: fields kept (plain np.empty)
    assert memory.empty((20_000,), record).dtype == record


def test_zeros_on_a_dirty_block_are_zeros():
    a = memory.empty(SHAPE)
    a[...] = np.nan
    del a
    z = memory.zeros(SHAPE)
    assert not z.any() and not np.isnan(z).any()


def test_small_arrays_are_plain_numpy():
    a = memory.empty((4, 4))
    assert a.flags.owndata and a.base is None


def test_the_cache_keeps_at_most_its_limit(monkeypatch):
    monkeypatch.setattr(memory, "CACHE_LIMIT", 3 * 64 * 300 * 4)
    arrays = [memory.empty(SHAPE) for _ in range(6)]
    del arrays
    assert 0 < memory.cached_bytes() <= memory.CACHE_LIMIT
    memory.empty_cache()
    assert memory.cached_bytes() == 0


def test_threads_never_get_the_same_block_at_once():
    errors: list[str] = []

    def work(k: int) -> None:
        for _ in range(300):
            a = memory.empty(SHAPE)
            a[...] = k
            if not (a == k).all():
                errors.append(f"thread {k} saw another thread's writes")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_kernel_outputs_come_from_the_cache_and_survive_later_steps():
    """A training step's outputs reuse the last step's blocks, and what the user kept of a
    step (here: a layer's output) is never overwritten by a later one."""
    from tinytrain.kernels.cpu import relu_forward

    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    first = relu_forward(x)
    kept = first.copy()
    for _ in range(3):
        relu_forward(-x)  # made and dropped: its block goes back and is reused
    np.testing.assert_array_equal(first, kept)
    ptr = first.ctypes.data
    del first
    assert relu_forward(x).ctypes.data == ptr


def test_a_block_comes_back_while_the_cache_is_locked():
    """The garbage collector can free an array at any allocation, also inside the allocator
    while it holds its lock: giving the block back must not wait for that lock."""
    box = [memory.empty(SHAPE)]

    def drop_inside_the_allocator() -> None:
        with memory._lock:
            box.clear()  # the last reference: the finalizer runs here, in this thread

    worker = threading.Thread(target=drop_inside_the_allocator, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "returning a block deadlocked on the cache's lock"
    assert memory.cached_bytes() >= 64 * 300 * 4


def test_a_request_takes_the_newest_block_that_fits_and_never_a_smaller_one():
    big = memory.empty((100_000,), np.uint8)
    ptr = big.ctypes.data
    del big
    smaller = memory.empty((80_000,), np.uint8)  # within FIT of the free block: reuses it
    assert smaller.ctypes.data == ptr
    del smaller
    again = memory.empty((100_000,), np.uint8)  # the block kept its own size, not 80,000
    assert again.ctypes.data == ptr
    del again
    larger = memory.empty((100_000 + 2 * memory._GRAIN,), np.uint8)
    assert larger.ctypes.data != ptr  # too small for it
    much_smaller = memory.empty((100_000 * 2 // 5,), np.uint8)
    assert much_smaller.ctypes.data != ptr  # fits, but would waste more than FIT allows


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX interval timers")
def test_a_signal_is_never_swallowed_while_arrays_die(monkeypatch):
    """A signal handler's exception (Ctrl-C's KeyboardInterrupt, the training command's
    SIGTERM) raised while a block goes back must reach the program. It would not if the
    return ran Python code (a ``__del__``): Python prints "Exception ignored" and goes on,
    and a training run ignored about one Ctrl-C in 40 that way."""

    class Tick(Exception):
        pass

    def tick(signum, frame):
        raise Tick

    swallowed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))
    previous = signal.signal(signal.SIGALRM, tick)
    missed = 0
    try:
        for _ in range(200):
            try:  # (the timer inside: on a loaded machine it may fire before the loop)
                signal.setitimer(signal.ITIMER_REAL, 0.0005)
                for _ in range(20_000):  # far longer than 0.5 ms
                    arrays = [memory.empty((200, 100), np.float32) for _ in range(20)]
                    del arrays
                missed += 1
            except Tick:
                pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert (missed, swallowed) == (0, [])
