"""The CPU error function (GELU's, ``Tensor.erf``'s): computed on L2-sized pieces, float32
and float16 through Cody's float64 rational functions, float64 through ``math.erf``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinytrain import more_ops
from tinytrain.autograd import ops


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_erf_equals_math_erf_rounded_to_the_dtype(dtype):
    x = np.concatenate([np.linspace(-6, 6, 200_000), [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                      1e-30, -1e-30, 5e-8]]).astype(dtype)
    expected = np.array([math.erf(v) for v in x.tolist()]).astype(dtype)
    got = ops.erf(x.reshape(8, -1)).reshape(-1)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("size", [1, more_ops.ERF_PIECE - 1, more_ops.ERF_PIECE,
                                  3 * more_ops.ERF_PIECE + 5])
@pytest.mark.parametrize("fn, whole", [(more_ops.erf_array, more_ops._erf),
                                       (more_ops.erfc_array, more_ops._erfc)])
def test_pieces_give_the_whole_array_result(size, fn, whole):
    x = (np.random.default_rng(size).standard_normal(size) * 4).reshape(-1, 1)
    np.testing.assert_array_equal(fn(x), whole(x))
    assert fn(x).shape == x.shape
