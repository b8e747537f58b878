"""The CPU kernels of the layers and of Adam (``tinytrain/kernels/cpu/layers.py``,
``optim.py``) on large arrays: the element-wise ones run in pieces and shards over threads,
Linear's GEMMs in shards with the BLAS at one thread. None of it may change a result."""

from __future__ import annotations

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import tinytrain as tt
from tinytrain.kernels.cpu import gemm, layers, optim, parallel


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}threads")
def workers(request):
    before = tt.get_num_threads()
    tt.set_num_threads(request.param)
    yield request.param
    tt.set_num_threads(before)


def reference_dropout(x: np.ndarray, p: float, seed: int) -> np.ndarray:
    """The definition, element by element index: the hash of (seed, flat index)."""
    keep = layers.dropout_keep_mask(seed, x.size, p).reshape(x.shape)
    return np.where(keep, x * x.dtype.type(1 / (1 - p)), x.dtype.type(0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [0.25, 0.5, 0.9])
def test_dropout_in_pieces_and_shards_is_the_hash_of_each_index(workers, dtype, p,
                                                                 monkeypatch):
    # Several pieces per shard, a last piece that is not full, and a seed with both halves.
    monkeypatch.setattr(layers, "DROPOUT_SHARD_PIECE", layers.DROPOUT_PIECE // 2)
    monkeypatch.setattr(layers, "DROPOUT_MIN_SHARD", layers.DROPOUT_PIECE)
    n = 3 * layers.DROPOUT_PIECE * max(workers, 1) + 1234
    x = np.random.default_rng(0).standard_normal(n).astype(dtype).reshape(-1, 2)
    seed = 0x9E37_79B9_7F4A_7C15
    y = layers.dropout_forward(x, p, seed)
    np.testing.assert_array_equal(y, reference_dropout(x, p, seed))
    assert y.dtype == dtype and y.shape == x.shape
    assert abs((y != 0).mean() - (1 - p)) < 0.01


def test_dropout_zeroes_dropped_nan_and_inf_and_keeps_the_others():
    x = np.full(10_000, np.nan, np.float32)
    x[::2] = np.inf
    y = layers.dropout_forward(x, 0.5, 7)
    keep = layers.dropout_keep_mask(7, x.size, 0.5)
    assert (y[~keep] == 0).all() and not np.signbit(y[~keep]).any()
    np.testing.assert_array_equal(y[keep], x[keep] * 2)


def test_dropout_of_a_strided_input_uses_its_logical_order():
    x = np.arange(200_000, dtype=np.float32).reshape(400, 500).T  # not C-contiguous
    np.testing.assert_array_equal(layers.dropout_forward(x, 0.3, 11),
                                  reference_dropout(np.ascontiguousarray(x), 0.3, 11))


def test_relu_in_shards(workers, monkeypatch):
    monkeypatch.setattr(layers, "RELU_FORWARD_MIN_SHARD", parallel.MIN_ELEMENTS)
    monkeypatch.setattr(layers, "RELU_BACKWARD_MIN_SHARD", parallel.MIN_ELEMENTS)
    x = np.random.default_rng(1).standard_normal((3, 5 * parallel.MIN_ELEMENTS + 7))
    x = x.astype(np.float32)
    x[0, :3] = [np.nan, -0.0, 0.0]
    g = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    y = layers.relu_forward(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    np.testing.assert_array_equal(layers.relu_backward(g, y), g * (y > 0))
    strided = x[:, ::2]
    np.testing.assert_array_equal(layers.relu_forward(strided), np.maximum(strided, 0))


def threads_used(monkeypatch, call) -> set[str]:
    """The names of the threads that ran a piece of ``call()``'s sharded work (2 threads)."""
    import threading

    seen: set[str] = set()
    real = parallel._run

    def spy(fn, a, b):
        seen.add(threading.current_thread().name.split("_")[0])
        return real(fn, a, b)

    monkeypatch.setattr(parallel, "_run", spy)
    before = tt.get_num_threads()
    tt.set_num_threads(2)
    try:
        call()
    finally:
        tt.set_num_threads(before)
    return seen


# An element-wise pass is split only when each thread's part pays for the hand-off; the
# cheaper the pass per element, the more elements that takes (measured in layers.py).
@pytest.mark.parametrize("op, small, large", [
    ("relu_forward", 692_224, 2 * layers.RELU_FORWARD_MIN_SHARD),  # cnn's conv1 output: 1 thread
    ("relu_backward", 262_144, 692_224),                         # cnn's conv1 output: 2 threads
    ("dropout", 131_072, 589_824),                                 # the example net's: 2 threads
    ("adam", 131_072, 1_179_648),                                  # the example net's fc1.weight
])
def test_an_element_wise_pass_is_split_only_when_large(monkeypatch, op, small, large):
    def run(n):
        x = np.ones(n, np.float32)
        return {
            "relu_forward": lambda: layers.relu_forward(x),
            "relu_backward": lambda: layers.relu_backward(x, x),
            "dropout": lambda: layers.dropout_forward(x, 0.5, 3),
            "adam": lambda: optim.adam_step(x, x, x.copy(), x.copy(), 1, 1e-3, (0.9, 0.999),
                                            1e-8, 0.0),
        }[op]

    assert threads_used(monkeypatch, run(small)) == set()  # one call, never through the pool
    assert threads_used(monkeypatch, run(large)) == {"MainThread", "tinytrain-cpu"}


# More features than rows (split by features, partial sums added), more rows than features
# (split by rows), a single row; with the products whole, and in chunks of features (a BLAS
# with small-matrix kernels, kernels/cpu/gemm.py, forced: 1536-feature chunks for 64 rows).
@pytest.mark.parametrize("x_shape", [(64, 9216), (64, 9999), (4, 16, 9216), (9216,), (40000, 96)])
@pytest.mark.parametrize("chunked", [False, True])
def test_linear_in_shards_matches_one_gemm(workers, x_shape, chunked, monkeypatch):
    monkeypatch.setattr(gemm, "small_gemm_mnk", lambda: 64 * 10 * 1562 if chunked else 0)
    rng = np.random.default_rng(3)
    n_in, n_out = x_shape[-1], 10
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((n_out, n_in)).astype(np.float32) * 0.01
    b = rng.standard_normal(n_out).astype(np.float32)
    g = rng.standard_normal((*x_shape[:-1], n_out)).astype(np.float32)
    y = layers.linear_forward(x, w, b)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-4)
    gx, gw, gb = layers.linear_backward(g, x, w, (True, True, True))
    g2, x2 = g.reshape(-1, n_out), x.reshape(-1, n_in)
    np.testing.assert_allclose(gx, g @ w, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gw, g2.T @ x2, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(gb, g2.sum(0), rtol=1e-5, atol=1e-4)
    assert (y.shape, gx.shape, gw.shape) == ((*x_shape[:-1], n_out), x_shape, w.shape)
    assert layers.linear_backward(g, None, w, (True, False, False))[1:] == (None, None)
    only_dw = layers.linear_backward(g, x, None, (False, True, False))
    assert only_dw[0] is None and only_dw[2] is None
    np.testing.assert_array_equal(only_dw[1], gw)
    only_db = layers.linear_backward(g, None, None, (False, False, True))
    assert only_db[:2] == (None, None)
    np.testing.assert_array_equal(only_db[2], gb)


def blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_linear_runs_its_gemms_with_one_blas_thread_and_restores_it(monkeypatch):
    """OpenBLAS's own threads never start for tinytrain's Linear, and the user's setting
    is back afterwards."""
    seen = []
    real = np.matmul

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    x = tt.randn(64, 9216, requires_grad=True)
    fc = tt.nn.Linear(9216, 128)
    with threadpool_limits(2, user_api="blas"):
        monkeypatch.setattr(np, "matmul", spy)
        fc(x).sum().backward()
        monkeypatch.undo()
        assert set(blas_threads()) == {2}
    assert len(seen) >= 3 and all(set(s) == {1} for s in seen)  # forward, dx, dw (in shards)


def reference_adam(p, g, m, v, step, lr, betas, eps):
    """The update as one expression per line, on whole arrays (bit for bit the same order)."""
    b1, b2 = betas
    m = m * b1 + (1 - b1) * g
    v = v * b2 + (1 - b2) * g * g
    denom = np.sqrt(v) / math.sqrt(1 - b2**step) + eps  # Python floats: float32 arithmetic
    return p - lr / (1 - b1**step) * m / denom, m, v


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_adam_in_pieces_and_shards_is_the_formula_bit_for_bit(workers, layout, monkeypatch):
    monkeypatch.setattr(optim, "ADAM_MIN_SHARD", parallel.MIN_ELEMENTS)
    rng = np.random.default_rng(4)
    shape = (3 * optim.ADAM_PIECE + 77, 3)
    p, g, m = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    v = rng.random(shape).astype(np.float32)
    if layout == "transposed":  # not C-contiguous: updated in place all the same
        p, g, m, v = (np.asfortranarray(a) for a in (p, g, m, v))
    expected = reference_adam(p, g, m, v, 7, 1e-3, (0.9, 0.999), 1e-8)
    optim.adam_step(p, g, m, v, 7, 1e-3, (0.9, 0.999), 1e-8, 0.0)
    for got, want in zip((p, m, v), expected):
        np.testing.assert_array_equal(got, want)
