"""Convolutions' ``groups`` and ``dilation`` (and ``padding="same"`` with dilation) against
PyTorch: values and the three gradients, nn.Conv2d's shapes, initialisation and text, and
PyTorch's errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

# (N, C, H, W, out, kernel, stride, padding, dilation, groups)
CASES = [
    (2, 4, 9, 9, 6, 3, 1, 1, 2, 2),
    (2, 6, 10, 11, 6, (2, 3), (2, 1), (1, 2), (2, 3), 3),
    (1, 8, 7, 7, 8, 3, 1, "same", 2, 8),            # depthwise, dilated, same
    (3, 4, 8, 8, 4, (4, 2), 1, "same", (1, 3), 1),   # even kernel: odd padding right/bottom
    (2, 4, 8, 8, 8, 3, 2, 0, 1, 4),                  # channel multiplier 2 per group
    (2, 32, 12, 12, 32, 3, 1, 1, 1, 32),             # depthwise 3x3 (MobileNet)
    (2, 3, 9, 9, 2, 3, 1, "valid", (3, 2), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_conv2d_groups_dilation_as_torch(case, dtype):
    n, c, h, w, o, k, stride, padding, dilation, groups = case
    kh, kw = k if isinstance(k, tuple) else (k, k)
    rng = np.random.default_rng(0)
    x, wt, b = (rng.standard_normal(s).astype(dtype) for s in
                ((n, c, h, w), (o, c // groups, kh, kw), (o,)))
    ours = [tt.tensor(a, requires_grad=True) for a in (x, wt, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, wt, b)]
    with warnings.catch_warnings():  # (torch's note on even kernels with "same")
        warnings.simplefilter("ignore")
        expected = torch.nn.functional.conv2d(*theirs, stride, padding, dilation, groups)
    got = F.conv2d(*ours, stride, padding, dilation, groups)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), **tol)
    g = rng.standard_normal(expected.shape).astype(dtype)
    expected.backward(torch.tensor(g))
    got.backward(tt.tensor(g))
    for a, e in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), **tol)


def test_conv2d_unbatched_and_keywords(device):
    """An unbatched input, keywords, and the device's kernels (CuPy on "cuda")."""
    rng = np.random.default_rng(1)
    x, wt = rng.standard_normal((4, 7, 7)), rng.standard_normal((4, 1, 3, 3))
    expected = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(wt), groups=4,
                                          dilation=(2, 1), padding=1)
    xs, ws = (tt.tensor(a, device=device, requires_grad=True) for a in (x, wt))
    got = F.conv2d(xs, ws, groups=4, dilation=(2, 1), padding=1)
    assert got.device == xs.device
    np.testing.assert_allclose(got.detach().cpu().numpy(), expected.numpy(), rtol=1e-10)
    got.sum().backward()
    assert ws.grad.device == xs.device and ws.grad.shape == (4, 1, 3, 3)


def test_nn_conv2d_groups_dilation_as_torch():
    ours = nn.Conv2d(6, 9, 3, 1, "same", 2, 3, padding_mode="reflect")
    theirs = torch.nn.Conv2d(6, 9, 3, 1, "same", 2, 3, padding_mode="reflect")
    assert ours.weight.shape == tuple(theirs.weight.shape) == (9, 2, 3, 3)
    assert (ours.groups, ours.dilation) == (theirs.groups, theirs.dilation)
    assert repr(ours) == repr(theirs)
    for m in (nn.Conv2d(4, 4, 3, groups=4, bias=False), nn.Conv2d(4, 8, 3, dilation=(1, 2))):
        t = torch.nn.Conv2d(4, m.out_channels, 3, groups=m.groups, dilation=m.dilation,
                            bias=m.bias is not None)
        assert repr(m) == repr(t)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    x = np.random.default_rng(2).standard_normal((2, 6, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ours(tt.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_nn_conv2d_init_uses_fan_in_of_a_group():
    """fan_in = in / groups * Kh * Kw: the weight and bias bounds are 1/sqrt(fan_in)."""
    tt.manual_seed(0)
    m = nn.Conv2d(64, 64, 3, groups=64)  # fan_in 9: bound 1/3
    bound = 1 / 3
    for p in (m.weight, m.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.9 * bound  # (64*9 draws reach near the bound)


def test_lazy_conv2d_groups():
    m = nn.LazyConv2d(8, 3, groups=4, padding=1)
    y = m(tt.ones(2, 4, 5, 5))
    assert type(m) is nn.Conv2d and m.weight.shape == (8, 1, 3, 3) and y.shape == (2, 8, 5, 5)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(8, 3, groups=4)(tt.ones(1, 6, 5, 5))


@pytest.mark.parametrize("kwargs, message", [
    (dict(in_channels=4, out_channels=6, groups=3), "in_channels must be divisible by groups"),
    (dict(in_channels=6, out_channels=4, groups=3), "out_channels must be divisible by groups"),
    (dict(in_channels=6, out_channels=6, groups=0), "groups must be a positive integer"),
])
def test_nn_conv2d_errors_as_torch(kwargs, message):
    for module in (nn, torch.nn):
        with pytest.raises(ValueError, match=message):
            module.Conv2d(kernel_size=3, **kwargs)


@pytest.mark.parametrize("x_shape, w_shape, kwargs, message", [
    ((1, 4, 5, 5), (6, 2, 3, 3), dict(groups=3),
     r"Given groups=3, weight of size \[6, 2, 3, 3\], expected input\[1, 4, 5, 5\] to have 6 "
     "channels, but got 4 channels instead"),
    ((1, 4, 5, 5), (4, 2, 3, 3), dict(groups=3),
     "Given groups=3, expected weight to be divisible by 3 at dimension 0"),
    ((1, 4, 5, 5), (4, 4, 3, 3), dict(groups=0), "non-positive groups is not supported"),
    ((1, 4, 5, 5), (4, 4, 3, 3), dict(dilation=(1, 0)), "dilation should be greater than zero"),
    ((1, 4, 5, 5), (4, 4, 3, 3), dict(stride=2, padding="same", dilation=2),
     "padding='same' is not supported for strided convolutions"),
])
def test_conv2d_errors_as_torch(x_shape, w_shape, kwargs, message):
    for tensor, f in ((tt.ones, F.conv2d), (torch.ones, torch.nn.functional.conv2d)):
        with pytest.raises(RuntimeError, match=message):
            f(tensor(x_shape), tensor(w_shape), **kwargs)


def test_dilated_kernel_larger_than_input_is_refused():
    with pytest.raises(RuntimeError, match="does not fit"):
        F.conv2d(tt.ones(1, 4, 5, 5), tt.ones(4, 4, 3, 3), dilation=3)
