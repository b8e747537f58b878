"""Max and average pooling: exact values, PyTorch's tie rule, parity, gradients, bad input.

CPU kernels: ``tinytrain/kernels/cpu/pool.py``; Functions and Modules: ``tinytrain/nn/conv.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tinytrain as tt
from tinytrain.kernels.cpu.pool import avg_pool2d_forward
from tinytrain.kernels.shapes import Pool2dMeta
from tinytrain.nn.conv import AvgPool2d, MaxPool2d, avg_pool2d, max_pool2d

pytestmark = pytest.mark.usefixtures("torch_single_thread")


def run_pool(fn, x, grad=None, device="cpu", **kwargs):
    """Forward (and backward with ``grad``) of a tinytrain pooling function: (y, dx)."""
    xt = tt.tensor(x, requires_grad=True, device=device)
    y = fn(xt, **kwargs)
    if grad is None:
        return y.numpy(), None
    y.backward(tt.tensor(grad, device=device))
    return y.numpy(), xt.grad.numpy()


def torch_pool(name, x, grad, **kwargs):
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.nn.functional, name)(tx, **kwargs)
    ty.backward(torch.tensor(grad))
    return ty.detach().numpy(), tx.grad.numpy()


X44 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)  # x[r, c] = 4r + c


# --------------------------------------------------------------------------- exact values


def test_max_pool_exact_values_and_gradient(device):
    y, dx = run_pool(max_pool2d, X44, np.ones((1, 1, 2, 2), np.float32), device, kernel_size=2)
    np.testing.assert_array_equal(y[0, 0], [[5, 7], [13, 15]])
    # Each window's gradient goes to its bottom-right corner, the maximum.
    expected = np.zeros((4, 4), np.float32)
    expected[1::2, 1::2] = 1
    np.testing.assert_array_equal(dx[0, 0], expected)


def test_max_pool_overlapping_windows_accumulate_gradient(device):
    # 3x3 windows at stride 1 on a 4x4 ramp: every window's max is inside the bottom-right 2x2.
    y, dx = run_pool(
        max_pool2d, X44, np.ones((1, 1, 2, 2), np.float32), device, kernel_size=3, stride=1
    )
    np.testing.assert_array_equal(y[0, 0], [[10, 11], [14, 15]])
    np.testing.assert_array_equal(dx[0, 0, 2:, 2:], [[1, 1], [1, 1]])
    assert dx.sum() == 4


def test_max_pool_padding_is_never_the_maximum(device):
    x = -np.ones((1, 1, 2, 2), np.float32)  # every real value is below the zero a pad might be
    y, _ = run_pool(max_pool2d, x, device=device, kernel_size=2, stride=1, padding=1)
    np.testing.assert_array_equal(y[0, 0], -np.ones((3, 3)))


def test_avg_pool_exact_values_and_gradient(device):
    y, dx = run_pool(avg_pool2d, X44, np.ones((1, 1, 2, 2), np.float32), device, kernel_size=2)
    np.testing.assert_array_equal(y[0, 0], [[2.5, 4.5], [10.5, 12.5]])
    np.testing.assert_array_equal(dx[0, 0], np.full((4, 4), 0.25))


def test_avg_pool_padding_counts_by_default():
    x = np.ones((1, 1, 2, 2), np.float32)
    y, _ = run_pool(avg_pool2d, x, kernel_size=2, stride=1, padding=1)
    np.testing.assert_array_equal(y[0, 0], [[0.25, 0.5, 0.25], [0.5, 1, 0.5], [0.25, 0.5, 0.25]])
    y, _ = run_pool(avg_pool2d, x, kernel_size=2, stride=1, padding=1, count_include_pad=False)
    np.testing.assert_array_equal(y[0, 0], np.ones((3, 3)))


# --------------------------------------------------------------------------- ties, like PyTorch


def test_max_pool_ties_go_to_the_first_maximum_like_pytorch():
    """Constant regions and repeated maxima: the gradient lands where PyTorch puts it."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, size=(2, 3, 7, 6)).astype(np.float32)  # values 0..2: many ties
    x[0, 0] = 1.0  # a constant plane: every window is one big tie
    # Distinct integer gradients: sums are exact in any order, and a misrouted one shows.
    g = (rng.permutation(2 * 3 * 9 * 9) + 1).reshape(2, 3, 9, 9).astype(np.float32)
    for kwargs in (
        dict(kernel_size=2),
        dict(kernel_size=3, stride=1, padding=1),
        dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
        dict(kernel_size=3, stride=2, padding=1),
    ):
        meta = Pool2dMeta.from_shape(x.shape, **kwargs)
        grad = g[..., : meta.out_h, : meta.out_w].copy()
        y, dx = run_pool(max_pool2d, x, grad, **kwargs)
        ty, tdx = torch_pool("max_pool2d", x, grad, **kwargs)
        np.testing.assert_array_equal(y, ty, err_msg=str(kwargs))
        np.testing.assert_array_equal(dx, tdx, err_msg=f"tie gradient differs for {kwargs}")


def test_max_pool_constant_window_sends_gradient_to_its_top_left():
    x = np.ones((1, 1, 2, 2), np.float32)
    _, dx = run_pool(max_pool2d, x, np.ones((1, 1, 1, 1), np.float32), kernel_size=2)
    np.testing.assert_array_equal(dx[0, 0], [[1, 0], [0, 0]])


def test_max_pool_infinities_and_nan_like_pytorch():
    x = np.full((1, 2, 4, 4), -np.inf, np.float32)  # all -inf: the first *real* input wins
    x[0, 1] = np.arange(16).reshape(4, 4)
    x[0, 1, 1, 2] = np.nan  # a NaN wins its windows
    grad = np.arange(1, 1 + 2 * 9, dtype=np.float32).reshape(1, 2, 3, 3)
    kwargs = dict(kernel_size=2, stride=2, padding=1)
    y, dx = run_pool(max_pool2d, x, grad, **kwargs)
    ty, tdx = torch_pool("max_pool2d", x, grad, **kwargs)
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_array_equal(dx, tdx)


@pytest.mark.parametrize("workers", [1, 2])
def test_max_pool_nan_and_inf_among_finite_images_like_pytorch(workers):
    """The CPU kernel scans finite windows arithmetically and re-scans a shard exactly when a
    maximum is NaN or infinite: the images next to a NaN or an inf must not change."""
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((6, 3, 6, 6)), 0).astype(np.float32)  # ReLU ties
    x[1, 2, 3, 4] = np.nan
    x[4, 0, 0, 1] = np.inf
    x[5, 1, :2, :2] = -np.inf
    grad = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    before = tt.get_num_threads()
    tt.set_num_threads(workers)
    try:
        y, dx = run_pool(max_pool2d, x, grad, kernel_size=2)
    finally:
        tt.set_num_threads(before)
    ty, tdx = torch_pool("max_pool2d", x, grad, kernel_size=2)
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_array_equal(dx, tdx)


# --------------------------------------------------------------------------- PyTorch parity


@pytest.mark.parametrize("name, fn", [("max_pool2d", max_pool2d), ("avg_pool2d", avg_pool2d)])
def test_pytorch_parity_grid(name, fn, device):
    rng = np.random.default_rng(0)
    grid = itertools.product(
        [1, 2, 3, (2, 3)], [None, 1, 2, (2, 1)], [0, 1], [(5, 7), (6, 8)], [np.float32, np.float64]
    )
    for kernel, stride, padding, (h, w), dtype in grid:
        kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        if 2 * padding > min(kh, kw):
            continue  # PyTorch (and tinytrain) refuse padding above half the kernel
        kwargs = dict(kernel_size=kernel, stride=stride, padding=padding)
        x = rng.standard_normal((2, 3, h, w)).astype(dtype)
        meta = Pool2dMeta.from_shape(x.shape, kernel, stride, padding)
        grad = rng.standard_normal(meta.output_shape).astype(dtype)
        y, dx = run_pool(fn, x, grad, device, **kwargs)
        ty, tdx = torch_pool(name, x, grad, **kwargs)
        case = f"{name} {kwargs} {h}x{w} {dtype.__name__}"
        np.testing.assert_allclose(y, ty, rtol=1e-6, atol=1e-6, err_msg=case)
        np.testing.assert_allclose(dx, tdx, rtol=1e-6, atol=1e-6, err_msg=case)
        assert y.dtype == dx.dtype == dtype


def test_avg_pool_gradcheck_float64():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 5, 6))
    meta = Pool2dMeta.from_shape(x.shape, 3, 2, 1, "avg_pool2d")
    g = rng.standard_normal(meta.output_shape)
    _, dx = run_pool(avg_pool2d, x, g, kernel_size=3, stride=2, padding=1)
    numeric = np.zeros_like(x)
    eps = 1e-6
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = (avg_pool2d_forward(x, meta) * g).sum()
        x[idx] = old - eps
        down = (avg_pool2d_forward(x, meta) * g).sum()
        x[idx] = old
        numeric[idx] = (up - down) / (2 * eps)
    np.testing.assert_allclose(dx, numeric, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- modules


@pytest.mark.parametrize("shape, kernel", [((2, 3, 1, 40_000), (1, 40_000)),
                                           ((1, 2, 200, 200), 200), ((2, 1, 190, 190), 185)])
def test_max_pool_windows_of_more_than_32767_elements_like_pytorch(shape, kernel):
    """The arg-max offsets outgrow int16 (the usual type) and take int32."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y, dx = run_pool(max_pool2d, x, np.ones((shape[0], shape[1], 1, 1), np.float32),
                     kernel_size=kernel)
    ty, tdx = torch_pool("max_pool2d", x, np.ones((shape[0], shape[1], 1, 1), np.float32),
                         kernel_size=kernel)
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_array_equal(dx, tdx)


def test_modules():
    x = tt.tensor(np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6))
    assert MaxPool2d(2)(x).shape == (2, 3, 3, 3)
    assert MaxPool2d(3, stride=1, padding=1)(x).shape == (2, 3, 6, 6)
    assert AvgPool2d((2, 3))(x).shape == (2, 3, 3, 2)
    assert list(MaxPool2d(2).parameters()) == []
    assert "kernel_size=2" in repr(MaxPool2d(2))


def test_no_grad_records_nothing():
    x = tt.tensor(np.ones((1, 1, 4, 4), np.float32), requires_grad=True)
    with tt.no_grad():
        y = max_pool2d(x, 2)
    assert y.grad_fn is None


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "shape, kwargs, message",
    [
        ((4, 4), dict(kernel_size=2), r"input must be 4-D .*\(4, 4\) \(2 dims\)"),
        ((1, 0, 4, 4), dict(kernel_size=2), r"input shape \(1, 0, 4, 4\) has an empty dimension"),
        ((1, 1, 4, 4), dict(kernel_size=0), r"kernel_size must be positive.*\(0, 0\)"),
        ((1, 1, 4, 4), dict(kernel_size=2, stride=0), r"stride must be positive.*\(0, 0\)"),
        ((1, 1, 4, 4), dict(kernel_size=2, padding=-1), r"padding must be non-negative"),
        (
            (1, 1, 4, 4),
            dict(kernel_size=2, padding=2),
            r"padding should be at most half the kernel size, got padding 2x2 for kernel 2x2",
        ),
        (
            (1, 1, 2, 9),
            dict(kernel_size=3),
            r"kernel 3x3 does not fit the padded input 2x9 \(input 2x9, padding 0x0\)",
        ),
        ((1, 1, 4, 4), dict(kernel_size=(1, 2, 3)), r"kernel_size must be an int or a pair"),
    ],
)
@pytest.mark.parametrize("name, fn", [("max_pool2d", max_pool2d), ("avg_pool2d", avg_pool2d)])
def test_bad_input_raises_value_errors_that_name_the_sizes(name, fn, shape, kwargs, message):
    x = tt.tensor(np.zeros(shape, np.float32))
    with pytest.raises(ValueError, match=rf"^{name}: {message}"):
        fn(x, **kwargs)


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("kernel,stride,padding", [(2, None, 0), (3, 2, 1)])
def test_max_pool_batch_shards_give_the_serial_result(workers, kernel, stride, padding):
    """The CPU pooling kernels shard the batch over threads: nothing but speed may change."""
    from tinytrain.kernels.cpu import parallel
    from tinytrain.kernels.cpu.pool import max_pool2d_backward, max_pool2d_forward

    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(7, 3, 9, 8)).astype(np.float32)  # many ties
    meta = Pool2dMeta.from_shape(x.shape, kernel, stride, padding, "max_pool2d")
    g = rng.standard_normal(meta.output_shape).astype(np.float32)
    before = parallel.get_num_threads()
    try:
        tt.set_num_threads(1)
        out1, am1 = max_pool2d_forward(x, meta)
        dx1 = max_pool2d_backward(g, x, meta)
        tt.set_num_threads(workers)
        out2, am2 = max_pool2d_forward(x, meta)
        dx2 = max_pool2d_backward(g, x, meta)
    finally:
        tt.set_num_threads(before)
    np.testing.assert_array_equal(out1, out2)
    np.testing.assert_array_equal(am1, am2)
    np.testing.assert_array_equal(dx1, dx2)
