"""GELU on the CPU in float32 and float16 (``more_ops.gelu_array``, ``gelu_slope_array``): one
fitted polynomial for ``exp(t^2) erfc(t)`` and one ``exp``, evaluated in float64. Checked
against ``math.erfc`` in float64: the values within one float32 ulp (PyTorch's own kernel is
off by up to 1.7e7 ulp in the far negative tail), the slope within two ulps away from its zero
near -0.75 (where ``Φ + x φ`` cancels); special values, non-contiguous inputs and arrays of
several pieces against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import more_ops

POINTS = np.concatenate([
    np.random.default_rng(0).standard_normal(60_000) * 3,
    np.linspace(-14.5, 6.5, 30_001),
    [0.0, -0.0, 1e-30, -1e-30, 5e-8, -5e-8, 5.9, -5.9, 10.3, -10.3, 13.9, -13.9],
]).astype(np.float32)


def _reference(x):
    v = x.astype(np.float64).tolist()
    cdf = np.array([0.5 * math.erfc(-a / math.sqrt(2)) for a in v])
    pdf = np.array([math.exp(-a * a / 2) / math.sqrt(2 * math.pi) for a in v])
    x64 = x.astype(np.float64)
    return x64 * cdf, cdf + x64 * pdf


def test_values_within_one_float32_ulp():
    value, _ = _reference(POINTS)
    got = more_ops.gelu_array(POINTS)
    assert got.dtype == np.float32
    ulp = np.spacing(np.abs(value).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got - value) <= ulp), np.max(np.abs(got - value) / ulp)


def test_slope_within_two_ulps():
    _, slope = _reference(POINTS)
    got = more_ops.gelu_slope_array(POINTS)
    ulp = np.spacing(np.abs(slope).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got - slope) <= 2 * ulp + 1e-9)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("size", [7, more_ops.ERF_PIECE, 3 * more_ops.ERF_PIECE + 11])
def test_module_forward_and_backward_match_torch(dtype, size):
    rng = np.random.default_rng(size)
    x = (rng.standard_normal((size, 3)) * 3).astype(dtype)
    x[:4, 0] = [np.inf, -np.inf, np.nan, -20]
    x = x.T  # non-contiguous
    g = rng.standard_normal(x.shape).astype(dtype)
    a, t = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = tt.nn.GELU()(a), torch.nn.GELU()(t)
    assert out.dtype == np.dtype(dtype) and out.shape == tuple(ref.shape)
    tol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
