"""CPU threads: the kernels shard the batch and hold the BLAS at one thread only while they run.

Nothing tinytrain does may change the process's own BLAS setting: after a convolution
(also one that raises, also several in parallel threads) threadpoolctl sees the thread
count it saw before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain.kernels.cpu import conv2d as conv_kernels


def blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.fixture(autouse=True)
def shard_every_convolution(monkeypatch):
    """These small convolutions would run on one thread (conv2d.MIN_SHARD_MACS); the tests
    here are about what happens when they are split over threads."""
    monkeypatch.setattr(conv_kernels, "MIN_SHARD_MACS", 1)


def conv_step() -> None:
    x = tt.randn(8, 3, 10, 10, requires_grad=True)
    w = tt.randn(4, 3, 3, 3, requires_grad=True)
    F.max_pool2d(F.conv2d(x, w, padding=1).relu(), 2).sum().backward()


def test_first_convolution_leaves_the_process_blas_setting_alone():
    """In a fresh process (the first kernel call is when tinytrain used to pin the BLAS)."""
    code = (
        "import numpy as np, threadpoolctl\n"
        "threadpoolctl.threadpool_limits(2, user_api='blas')\n"
        "import tinytrain as tt, tinytrain.nn.functional as F\n"
        "x = tt.randn(8, 3, 10, 10, requires_grad=True)\n"
        "w = tt.randn(4, 3, 3, 3, requires_grad=True)\n"
        "F.max_pool2d(F.conv2d(x, w, padding=1), 2).sum().backward()\n"
        "print([p['num_threads'] for p in threadpoolctl.threadpool_info()"
        " if p['user_api'] == 'blas'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.split() == ["[2]"]


@pytest.fixture
def two_blas_threads():
    with threadpool_limits(2, user_api="blas"):
        assert set(blas_threads()) == {2}
        yield


@pytest.fixture
def blas_inside_kernels(monkeypatch):
    """The BLAS thread counts seen from inside each forward convolution kernel call."""
    seen: list[list[int]] = []
    real = conv_kernels._forward

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(conv_kernels, "_forward", spy)
    return seen


def test_the_blas_is_single_threaded_inside_a_kernel_and_restored_after(two_blas_threads,
                                                                       blas_inside_kernels):
    conv_step()
    assert blas_inside_kernels and all(set(s) == {1} for s in blas_inside_kernels)
    assert set(blas_threads()) == {2}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_kernel_that_raises_restores_the_blas(two_blas_threads, monkeypatch, workers):
    seen = []

    def broken(*args, **kwargs):
        seen.append(blas_threads())
        raise MemoryError("no room for the padded input")

    before = tt.get_num_threads()
    tt.set_num_threads(workers)
    try:
        monkeypatch.setattr(conv_kernels, "_backward_input", broken)
        with pytest.raises(MemoryError):
            conv_step()
    finally:
        tt.set_num_threads(before)
    assert seen and all(set(s) == {1} for s in seen)
    assert set(blas_threads()) == {2}


def test_kernels_in_several_threads_restore_the_blas_once_all_are_done(two_blas_threads,
                                                                      blas_inside_kernels):
    errors = []

    def work():
        try:
            for _ in range(5):
                conv_step()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(blas_inside_kernels) >= 15 and all(set(s) == {1} for s in blas_inside_kernels)
    assert set(blas_threads()) == {2}


def test_set_num_threads_validates_and_round_trips():
    before = tt.get_num_threads()
    try:
        tt.set_num_threads(np.int64(3))
        assert tt.get_num_threads() == 3
    finally:
        tt.set_num_threads(before)
    for bad, err in ((0, ValueError), (-2, ValueError), (2.0, TypeError), ("2", TypeError),
                     (True, TypeError)):
        with pytest.raises(err, match="set_num_threads"):
            tt.set_num_threads(bad)
    assert tt.get_num_threads() == before


@pytest.mark.parametrize("limit", [
    "from tinytrain.kernels.cpu.parallel import blas_single_threaded as limited",
    "from threadpoolctl import threadpool_limits\n"
    "def limited(): return threadpool_limits(1, user_api='blas')",
])
def test_the_default_worker_count_is_the_blas_setting_at_import(limit):
    """Even when the first kernel runs with the BLAS limited to one thread (the training
    command, or a user's threadpool_limits around a loop), the workers default to the
    BLAS's thread count from when tinytrain was imported."""
    code = (
        "import numpy, threadpoolctl  # the BLAS is loaded, so the limit applies to it\n"
        "threadpoolctl.threadpool_limits(2, user_api='blas')\n"
        "import tinytrain as tt, tinytrain.nn.functional as F\n"
        f"{limit}\n"
        "with limited():\n"
        "    F.conv2d(tt.randn(4, 1, 5, 5), tt.randn(2, 1, 3, 3))\n"
        "    print(tt.get_num_threads())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.split() == [str(min(2, os.cpu_count() or 1))]


def test_the_training_command_leaves_the_blas_alone_and_its_kernels_hold_it(
        two_blas_threads, blas_inside_kernels, monkeypatch):
    """No process-wide limit, not even for the run: between kernels the BLAS keeps the user's
    setting, and tinytrain's own ops (conv, linear) run it at one thread on its threads."""
    from tinytrain import train

    seen, inside_linear = [], []
    real, real_matmul = train.train_one_epoch, np.matmul

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    def matmul_spy(*args, **kwargs):
        inside_linear.append(blas_threads())
        return real_matmul(*args, **kwargs)

    monkeypatch.setattr(train, "train_one_epoch", spy)
    monkeypatch.setattr(np, "matmul", matmul_spy)
    assert train.main(["--model", "cnn", "--dataset", "mnist-mini", "--no-download",
                       "--epochs", "1", "--batch-size", "500"]) == 0
    assert seen == [[2]]
    assert blas_inside_kernels and all(set(s) == {1} for s in blas_inside_kernels)
    assert inside_linear and all(set(s) == {1} for s in inside_linear)
    assert set(blas_threads()) == {2}


# --------------------------------------------------------------------------- the pool itself

@pytest.fixture
def two_workers():
    before = tt.get_num_threads()
    tt.set_num_threads(2)
    yield
    tt.set_num_threads(before)


def test_every_shard_runs_once_and_the_results_come_in_shard_order(two_workers):
    from tinytrain.kernels.cpu.parallel import in_worker, run_sharded

    for batch in (2, 3, 7, 64):
        parts = run_sharded(lambda a, b: (a, b, in_worker()), batch, min_shard=1)
        assert [(a, b) for a, b, _ in parts] == [(0, batch // 2), (batch // 2, batch)]
        assert [w for _, _, w in parts] == [False, True]  # the caller runs the first shard
    assert run_sharded(lambda a, b: (a, b), 3, min_shard=2) == [(0, 3)]  # too small to split


def test_an_error_in_the_workers_shard_reaches_the_caller_and_the_pool_goes_on(two_workers):
    from tinytrain.kernels.cpu.parallel import run_sharded

    def shard(a, b):
        if a > 0:
            raise ValueError(f"shard [{a}, {b}) failed")
        return a

    with pytest.raises(ValueError, match=r"shard \[4, 8\) failed"):
        run_sharded(shard, 8)
    assert run_sharded(lambda a, b: b - a, 8) == [4, 4]  # no stale result from the failed call


def test_the_pool_keeps_no_reference_to_a_finished_shard(two_workers):
    """A worker waiting for its next job must not hold the last one's closure: it holds the
    kernel's arrays (a layer's output would stay alive until the next sharded call)."""
    import weakref

    from tinytrain.kernels.cpu.parallel import run_sharded

    class Big:
        pass

    big = Big()
    alive = weakref.ref(big)
    assert run_sharded(lambda a, b, big=big: b - a, 8) == [4, 4]
    del big
    assert alive() is None


def test_kernels_called_from_several_threads_at_once_each_get_their_own_results(two_workers):
    """One call uses the pool at a time; a call made meanwhile runs on its own thread."""
    from tinytrain.kernels.cpu.parallel import run_sharded

    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(200):
                assert sum(run_sharded(lambda a, b: k * (b - a), 64)) == 64 * k
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def _forked_child_passes(before: str, child: str, ok: str, after: str = "") -> None:
    """In a fresh process: run ``before``, fork, and in the child run ``child`` and exit 0
    if ``ok`` holds (3 if not); the parent then runs ``after``. Asserts the child's 0."""
    out = _python(
        "import os, tinytrain as tt\n"
        "from tinytrain.kernels.cpu.parallel import run_sharded\n"
        "tt.set_num_threads(2)\n"
        f"{before}"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        f"    {child}\n"
        f"    os._exit(0 if {ok} else 3)\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
        f"{after}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_starts_its_own_pool():
    """A child forked after the pool started has none of its threads: its kernels used to
    wait forever for a worker that did not exist there."""
    _forked_child_passes("assert run_sharded(lambda a, b: b - a, 8) == [4, 4]\n",
                         "parts = run_sharded(lambda a, b: b - a, 8)", "parts == [4, 4]")


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT delivered to the process")
def test_ctrl_c_while_waiting_for_a_shard_is_raised_once_the_shard_is_done():
    """A kernel's effects must not go on after its caller has seen the Ctrl-C (a training
    loop that restores its weights would have them overwritten by the late half of an
    optimizer step); a second Ctrl-C gives up on the shard, whose thread leaves the pool,
    so that its late result is never taken for the next call's."""
    out = _python(
        "import os, signal, threading, time, tinytrain as tt\n"
        "from tinytrain.kernels.cpu.parallel import run_sharded\n"
        "tt.set_num_threads(2)\n"
        "done = []\n"
        "def slow(a, b):\n"
        "    if a > 0:\n"
        "        time.sleep(0.5)\n"
        "        done.append(a)\n"
        "    return ('slow', a)\n"
        "def interrupt(*at):\n"
        "    for t in at:\n"
        "        threading.Timer(t, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "for at in [(0.1,), (0.1, 0.2)]:\n"
        "    done.clear()\n"
        "    interrupt(*at)\n"
        "    try:\n"
        "        run_sharded(slow, 8)\n"
        "        print('not interrupted')\n"
        "    except KeyboardInterrupt:\n"
        "        print(f'{len(at)} Ctrl-C: interrupted, the shard done: {done == [4]}')\n"
        "    print(run_sharded(lambda a, b: ('next', a), 8))\n"
        "    time.sleep(0.6)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "1 Ctrl-C: interrupted, the shard done: True", "[('next', 0), ('next', 4)]",
        "2 Ctrl-C: interrupted, the shard done: False", "[('next', 0), ('next', 4)]"]


class _PutThenInterrupt:
    """A worker's job queue whose ``put`` is followed by a Ctrl-C (once)."""

    def __init__(self, real):
        self.real, self.fired = real, False

    def put(self, job):
        self.real.put(job)
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt

    def get(self):
        return self.real.get()

    def empty(self):
        return self.real.empty()


def test_a_ctrl_c_while_shards_are_handed_out_waits_for_the_shards_that_were(two_workers):
    """Python may raise KeyboardInterrupt just after ``put`` returned: the call does not
    know whether the worker got its shard; it waits behind it for it, and the pool goes on."""
    from tinytrain.kernels.cpu import parallel

    parallel.run_sharded(lambda a, b: None, 8)  # the pool's thread exists
    worker = parallel._pool[0]
    worker.jobs = _PutThenInterrupt(worker.jobs)
    done = []

    def slow(a, b):
        if a > 0:
            time.sleep(0.3)
            done.append(a)
        return a

    try:
        with pytest.raises(KeyboardInterrupt):
            parallel.run_sharded(slow, 8)
        assert done == [4]  # not raised before the worker's shard was done
        assert parallel.run_sharded(lambda a, b: (a, b), 8) == [(0, 4), (4, 8)]
    finally:
        worker.jobs = worker.jobs.real


def test_a_worker_left_in_a_bad_state_by_an_escaped_call_is_healed_or_replaced(two_workers):
    """A Ctrl-C can still land in a call's own bookkeeping (Python checks for signals even
    inside an ``except``): the next call checks every worker first, so it never takes an
    earlier call's ``done`` or result."""
    from tinytrain.kernels.cpu import parallel

    parallel.run_sharded(lambda a, b: None, 8)
    worker = parallel._pool[0]
    done = []

    def slow(a, b):
        if a > 0:
            time.sleep(0.2)
            done.append(a)
        return ("new", a)

    worker.result = (("stale", 4), None)  # a shard that ended after its call had left
    worker.done.release()
    assert parallel.run_sharded(slow, 8) == [("new", 0), ("new", 4)] and done == [4]
    assert worker in parallel._pool  # healed: its late done was taken first
    worker.idle = False  # as if a shard of an earlier call were still running on it
    done.clear()
    assert parallel.run_sharded(slow, 8) == [("new", 0), ("new", 4)] and done == [4]
    assert worker not in parallel._pool  # replaced by a new thread


def test_a_call_interrupted_before_it_let_go_of_the_pool_does_not_keep_it(two_workers):
    from tinytrain.kernels.cpu import parallel
    from tinytrain.kernels.cpu.parallel import in_worker, run_sharded

    assert parallel._claim_pool()  # as if interrupted between taking the pool and using it
    parts = run_sharded(lambda a, b: in_worker(), 8)
    assert parts == [False, True]  # this thread's next call uses the pool again


def test_while_another_thread_uses_the_pool_a_call_runs_the_same_shards_in_turn(two_workers):
    """The same shards (so the same sums, in the same order): a result does not depend on
    which thread got the pool."""
    from tinytrain.kernels.cpu import parallel
    from tinytrain.kernels.cpu.parallel import in_worker, run_sharded

    other = threading.Thread(target=parallel._claim_pool)
    other.start()
    other.join()
    try:
        assert run_sharded(lambda a, b: (a, b, in_worker()), 8) == [(0, 4, False),
                                                                     (4, 8, False)]
    finally:
        parallel._user = None


def test_a_kernel_run_while_python_exits_does_not_hang_it():
    """A ``__del__`` that runs a kernel at interpreter exit: the pool's daemon threads no
    longer run then, so the shards run on the exiting thread."""
    out = _python(
        "import numpy as np, tinytrain as tt\n"
        "tt.set_num_threads(2)\n"
        "class Summary:\n"
        "    def __init__(self, t):\n"
        "        self.t = t\n"
        "    def __del__(self):\n"
        "        print('relu at exit:', float(self.t.relu().numpy().sum()) > 0, flush=True)\n"
        "x = tt.tensor(np.random.default_rng(0).standard_normal(4_000_000).astype(np.float32))\n"
        "x.relu()  # the pool's thread is started\n"
        "summary = Summary(x)\n")
    assert out.returncode == 0, out.stderr  # (a hang fails by _python's timeout)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_child_forked_while_a_kernel_runs_gets_the_blas_thread_count_back():
    _forked_child_passes(
        "import threading, time\n"
        "from threadpoolctl import threadpool_info, threadpool_limits\n"
        "def blas():\n"
        "    return [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']\n"
        "threadpool_limits(2, user_api='blas')\n"
        "t = threading.Thread(target=run_sharded, args=(lambda a, b: time.sleep(0.5), 8))\n"
        "t.start()\n"
        "time.sleep(0.1)\n"
        "assert blas() == [1]  # held by the kernel in the other thread\n",
        "run_sharded(lambda a, b: None, 8)", "blas() == [2]", after="t.join()\n")
