"""Matrix products in column chunks (tinytrain/kernels/cpu/gemm.py): when they are cut, how,
and that the cut products are the whole ones."""

from __future__ import annotations

import numpy as np
import pytest

from tinytrain.kernels.cpu import gemm


@pytest.fixture
def small_kernels(monkeypatch):
    """A BLAS with small-matrix kernels up to ``limit`` (set it on the returned object)."""
    class Limit:
        value = gemm.SMALL_MNK

    monkeypatch.setattr(gemm, "small_gemm_mnk", lambda: Limit.value)
    return Limit


def test_chunk_width_keeps_each_call_within_the_limit_and_the_chunks_even(small_kernels):
    # cnn's conv2 forward: [32, 144] @ [144, 622] -> three calls of at most 208 columns
    assert gemm.chunk_width(32 * 144, 622) == 208
    for fixed, cols in [(4608, 622), (4608, 2000), (1000, 5000), (7000, 143)]:
        width = gemm.chunk_width(fixed, cols)
        if width is None:
            continue
        assert width * fixed <= gemm.SMALL_MNK
        calls = -(-cols // width)
        assert calls > 1 and calls * width - cols < calls  # the last chunk is nearly full


def test_chunk_width_is_none_where_chunks_do_not_pay(small_kernels):
    assert gemm.chunk_width(32 * 144, 200) is None  # one call is within the limit already
    assert gemm.chunk_width(64 * 288, 622) is None  # chunks of 54 columns: narrower than MIN_CHUNK
    small_kernels.value = 0  # no small-matrix kernels: never cut
    assert gemm.chunk_width(32 * 144, 622) is None


@pytest.mark.parametrize("a_shape, b_shape", [
    ((5, 7), (7, 40)),            # 2-D, chunks of 8 and no tail
    ((5, 7), (3, 7, 43)),         # a batch, chunks of 8 and a tail of 3 columns
    ((3, 5, 7), (3, 7, 41)),      # batched a too, chunks of 7 and a tail of 6
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_cols_is_the_whole_product(small_kernels, monkeypatch, a_shape, b_shape, dtype):
    monkeypatch.setattr(gemm, "MIN_CHUNK", 1)
    small_kernels.value = 5 * 7 * 8
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    assert gemm.chunk_width(5 * 7, b_shape[-1]) in (7, 8)  # 40 columns: 5 x 8; 41: 6 x 7
    out = np.full(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (5, b_shape[-1]), np.nan,
                  dtype=dtype)
    assert gemm.matmul_cols(a, b, out=out) is out
    np.testing.assert_array_equal(out, np.matmul(a, b))  # column chunks: the same dot products


def test_matmul_cols_writes_into_a_strided_output(small_kernels, monkeypatch):
    monkeypatch.setattr(gemm, "MIN_CHUNK", 1)
    small_kernels.value = 4 * 6 * 5
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((2, 6, 23))
    big = np.zeros((2, 4, 30))
    gemm.matmul_cols(a, b, out=big[:, :, 3:26])
    np.testing.assert_array_equal(big[:, :, 3:26], a @ b)
    assert not big[:, :, :3].any() and not big[:, :, 26:].any()  # nothing written outside


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("length", [48, 50])
def test_matmul_sum_is_the_sum_of_the_products(small_kernels, monkeypatch, transposed, length):
    monkeypatch.setattr(gemm, "MIN_CHUNK", 1)
    small_kernels.value = 9 * 4 * 12
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 9, length))
    b = rng.standard_normal((3, 4, length)).transpose(0, 2, 1) if transposed else \
        rng.standard_normal((3, length, 4))
    assert gemm.chunk_width(9 * 4, length) == (12 if length == 48 else 10)
    np.testing.assert_allclose(gemm.matmul_sum(a, b), sum(a[n] @ b[n] for n in range(3)),
                               rtol=1e-12, atol=1e-12)
    small_kernels.value = 0
    np.testing.assert_allclose(gemm.matmul_sum(a, b), sum(a[n] @ b[n] for n in range(3)),
                               rtol=1e-12, atol=1e-12)


def _openblas(target):
    return {"user_api": "blas", "internal_api": "openblas", "architecture": target}


@pytest.mark.parametrize("info, expected", [
    ([_openblas("SkylakeX")], gemm.SMALL_MNK),
    ([_openblas("SapphireRapids")], gemm.SMALL_MNK),
    ([_openblas("Haswell")], 0),
    ([_openblas("Zen")], 0),
    ([{"user_api": "blas", "internal_api": "mkl", "architecture": None}], 0),
    ([{"user_api": "openmp", "internal_api": "openmp"}], 0),
    ([], 0),
])
def test_small_kernels_are_found_from_the_blas_target(monkeypatch, info, expected):
    import threadpoolctl

    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: info)
    gemm.small_gemm_mnk.cache_clear()
    try:
        assert gemm.small_gemm_mnk() == expected
    finally:
        gemm.small_gemm_mnk.cache_clear()


def test_an_unknown_blas_means_no_chunks(monkeypatch):
    import threadpoolctl

    def broken():
        raise RuntimeError("no BLAS found")

    monkeypatch.setattr(threadpoolctl, "threadpool_info", broken)
    gemm.small_gemm_mnk.cache_clear()
    try:
        assert gemm.small_gemm_mnk() == 0
    finally:
        gemm.small_gemm_mnk.cache_clear()
