"""The CPU cross-entropy kernels (``kernels.cpu.layers``): the loss as each row's logsumexp
minus the target's logit, the gradient from one ``exp`` pass, scaled per row; checked against
PyTorch for every reduction, on logits large enough to overflow an unshifted ``exp`` and with
``-inf`` entries away from the target."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_loss_and_gradient_match_torch(dtype, reduction, scale):
    rng = np.random.default_rng(int(scale) + len(reduction))
    logits = (rng.standard_normal((37, 11)) * scale).astype(dtype)
    targets = rng.integers(0, 11, 37)
    logits[3, (targets[3] + 1) % 11] = -np.inf
    x, t = tt.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    loss = tt.nn.functional.cross_entropy(x, tt.tensor(targets), reduction=reduction)
    ref = torch.nn.functional.cross_entropy(t, torch.tensor(targets), reduction=reduction)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(loss.detach().numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(ref.shape).astype(dtype) + 2
    loss.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
    assert x.grad.dtype == np.dtype(dtype)
