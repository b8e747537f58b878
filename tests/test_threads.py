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
        "import threadpoolctl\n"
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
