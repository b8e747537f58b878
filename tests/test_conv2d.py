"""Conv2d: shapes (Conv2dMeta), exact values, gradients, PyTorch parity, bad input.

The CPU kernels live in ``tinytrain/kernels/cpu/conv2d.py`` (the CUDA ones are checked by
``tests/test_cuda_*.py``); the autograd Function, ``F.conv2d`` and ``nn.Conv2d`` in
``tinytrain/nn/conv.py``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import tinytrain as tt
import tinytrain.kernels.cpu.conv2d as kernels
from tinytrain.kernels.cpu import gemm
from tinytrain.kernels.shapes import Conv2dMeta
from tinytrain.nn.conv import Conv2d, conv2d

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture(params=["exact", "wide", "exact, chunked", "wide, chunked"])
def layout(request, monkeypatch):
    """The CPU forward and dW pack either layout of windows (kernels/cpu/conv2d.py); the
    choice depends on Cin, so the tests force each one on every shape. "chunked": the
    GEMMs run in column chunks (kernels/cpu/gemm.py), which happens only with some BLAS
    builds, so it is forced here too, with a limit that makes the tests' small products
    split into chunks of a few columns."""
    wide = request.param.startswith("wide")
    monkeypatch.setattr(kernels, "WIDE_MIN_CHANNELS", 1 if wide else 10**9)
    monkeypatch.setattr(gemm, "small_gemm_mnk", lambda: 600 if "chunked" in request.param else 0)
    monkeypatch.setattr(gemm, "MIN_CHUNK", 1)
    return request.param


def run_conv(x, w, b=None, stride=1, padding=0, grad=None, device="cpu"):
    """tinytrain conv2d forward (+ backward with ``grad``): arrays (y, dx, dw, db)."""
    xt = tt.tensor(x, requires_grad=True, device=device)
    wt = tt.tensor(w, requires_grad=True, device=device)
    bt = None if b is None else tt.tensor(b, requires_grad=True, device=device)
    y = conv2d(xt, wt, bt, stride, padding)
    if grad is None:
        return y.numpy(), None, None, None
    y.backward(tt.tensor(grad, device=device))
    return (
        y.numpy(),
        xt.grad.numpy(),
        wt.grad.numpy(),
        None if bt is None else bt.grad.numpy(),
    )


# --------------------------------------------------------------------------- Conv2dMeta


def test_meta_sizes():
    m = Conv2dMeta((8, 3, 28, 30), (16, 3, 5, 3), stride=(2, 1), padding=(1, 2), bias_shape=(16,))
    assert (m.batch, m.in_channels, m.out_channels) == (8, 3, 16)
    assert (m.in_h, m.in_w, m.kernel_h, m.kernel_w) == (28, 30, 5, 3)
    assert (m.stride_h, m.stride_w, m.pad_h, m.pad_w) == (2, 1, 1, 2)
    assert (m.out_h, m.out_w) == ((28 + 2 - 5) // 2 + 1, (30 + 4 - 3) // 1 + 1) == (13, 32)
    assert m.patches == 13 * 32
    assert m.kernel_elems == 3 * 5 * 3
    assert m.has_bias
    assert m.output_shape == (8, 16, 13, 32)
    assert m.offsets()[:4] == [(0, 0), (0, 1), (0, 2), (1, 0)]


def test_meta_scalar_and_pair_arguments_agree():
    a = Conv2dMeta((1, 1, 9, 9), (1, 1, 3, 3), stride=2, padding=1)
    b = Conv2dMeta((1, 1, 9, 9), (1, 1, 3, 3), stride=(2, 2), padding=[1, 1])
    assert a == b
    assert not a.has_bias


# --------------------------------------------------------------------------- exact values

X44 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)  # x[r, c] = 4r + c


def test_exact_box_filter_with_and_without_bias(device):
    w = np.ones((1, 1, 2, 2), dtype=np.float32)
    expected = np.array([[10, 14, 18], [26, 30, 34], [42, 46, 50]], dtype=np.float32)
    y, *_ = run_conv(X44, w, device=device)
    np.testing.assert_array_equal(y[0, 0], expected)
    y, *_ = run_conv(X44, w, np.array([0.5], dtype=np.float32), device=device)
    np.testing.assert_array_equal(y[0, 0], expected + 0.5)


def test_exact_stride2_padding1(device):
    # Padded to 6x6; 2x2 windows at stride 2 see real rows {0}, {1, 2}, {3} (same for columns).
    w = np.ones((1, 1, 2, 2), dtype=np.float32)
    expected = np.array([[0, 3, 3], [12, 30, 18], [12, 27, 15]], dtype=np.float32)
    y, *_ = run_conv(X44, w, stride=2, padding=1, device=device)
    np.testing.assert_array_equal(y[0, 0], expected)


def test_exact_non_square_2x3_kernel(device):
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)  # x[r, c] = 4r + c
    w = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32).reshape(1, 1, 2, 3)
    # out[0, 0] = 1*0 + 2*1 + 3*2 + 4*4 + 5*5 + 6*6 = 85; one column right adds sum(w) = 21,
    # one row down adds 4 * 21 = 84.
    y, *_ = run_conv(x, w, device=device)
    np.testing.assert_array_equal(y[0, 0], [[85, 106], [169, 190]])


def test_exact_channels_are_summed_and_outputs_separate(device):
    x = np.stack([X44[0, 0], 100 * X44[0, 0]])[None]  # [1, 2, 4, 4]
    w = np.zeros((3, 2, 1, 1), dtype=np.float32)
    w[0, 0] = 1  # channel 0 only
    w[1, 1] = 1  # channel 1 only
    w[2] = 2  # 2 * (channel 0 + channel 1)
    y, *_ = run_conv(x, w, np.array([0, 0, 1], dtype=np.float32), device=device)
    np.testing.assert_array_equal(y[0, 0], X44[0, 0])
    np.testing.assert_array_equal(y[0, 1], 100 * X44[0, 0])
    np.testing.assert_array_equal(y[0, 2], 202 * X44[0, 0] + 1)


def test_exact_gradients_of_box_filter():
    # d(sum y)/dx counts how many windows cover each pixel; d(sum y)/dw sums each shifted view.
    w = np.ones((1, 1, 2, 2), dtype=np.float32)
    g = np.ones((1, 1, 3, 3), np.float32)
    _, dx, dw, db = run_conv(X44, w, np.zeros(1, np.float32), grad=g)
    coverage = [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]
    np.testing.assert_array_equal(dx[0, 0], coverage)
    x = X44[0, 0]
    expected_dw = [[x[:3, :3].sum(), x[:3, 1:].sum()], [x[1:, :3].sum(), x[1:, 1:].sum()]]
    np.testing.assert_array_equal(dw[0, 0], expected_dw)
    np.testing.assert_array_equal(db, [9])


# --------------------------------------------------------------------------- gradcheck


def numerical_grad(f, a: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to every element of ``a``."""
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        old = a[idx]
        a[idx] = old + eps
        up = f()
        a[idx] = old - eps
        down = f()
        a[idx] = old
        g[idx] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize(
    "x_shape, w_shape, stride, padding",
    [
        ((2, 2, 5, 6), (3, 2, 3, 3), 1, 1),  # the dense stride-1 path, with padding
        ((2, 3, 6, 5), (2, 3, 2, 3), (2, 1), (1, 2)),  # the strided path, non-square
        ((1, 2, 7, 7), (2, 2, 3, 2), 3, 0),  # stride 3: some inputs are never read
    ],
)
def test_gradcheck_float64(x_shape, w_shape, stride, padding, layout):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])
    meta = Conv2dMeta(x.shape, w.shape, stride, padding, b.shape)
    g = rng.standard_normal(meta.output_shape)

    def loss() -> float:  # L = sum(conv(x, w, b) * g), so dL/dy = g
        return float((kernels.conv2d_forward(x, w, b, meta) * g).sum())

    _, dx, dw, db = run_conv(x, w, b, stride, padding, grad=g)
    assert dx.dtype == dw.dtype == db.dtype == np.float64
    for analytic, wrt in ((dx, x), (dw, w), (db, b)):
        np.testing.assert_allclose(analytic, numerical_grad(loss, wrt), rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- PyTorch parity

KERNELS = [1, 2, 3, (2, 3)]
STRIDES = [1, 2, (2, 1)]


def _close(name: str, ours: np.ndarray, ref: np.ndarray, case: str) -> None:
    """rtol 1e-5, and an atol of 1e-5 of the largest magnitude (float32 sums)."""
    atol = 1e-5 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=atol, err_msg=f"{name} differs: {case}")


@pytest.mark.parametrize("stride", STRIDES, ids=str)
@pytest.mark.parametrize("kernel", KERNELS, ids=str)
def test_pytorch_parity_grid(kernel, stride, device, layout):
    """batch x Cin x Cout x padding x bias x (odd, even H/W) for one kernel and stride."""
    torch = pytest.importorskip("torch")
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    rng = np.random.default_rng(10 * KERNELS.index(kernel) + STRIDES.index(stride))
    grid = itertools.product([1, 3], [1, 3], [1, 4], [0, 1, 2], [True, False], [(5, 7), (6, 8)])
    for n, c_in, c_out, padding, bias, (h, w) in grid:
        case = f"N={n} Cin={c_in} Cout={c_out} k={kernel} s={stride} p={padding} b={bias} {h}x{w}"
        x = rng.standard_normal((n, c_in, h, w), dtype=np.float32)
        wt = rng.standard_normal((c_out, c_in, kh, kw), dtype=np.float32)
        b = rng.standard_normal(c_out, dtype=np.float32) if bias else None
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(wt, requires_grad=True)
        tb = torch.tensor(b, requires_grad=True) if bias else None
        ty = torch.nn.functional.conv2d(tx, tw, tb, stride, padding)
        g = rng.standard_normal(tuple(ty.shape), dtype=np.float32)
        ty.backward(torch.from_numpy(g))
        y, dx, dw, db = run_conv(x, wt, b, stride, padding, grad=g, device=device)
        _close("forward", y, ty.detach().numpy(), case)
        _close("dX", dx, tx.grad.numpy(), case)
        _close("dW", dw, tw.grad.numpy(), case)
        if bias:
            _close("db", db, tb.grad.numpy(), case)


@pytest.mark.parametrize("stride, padding", [(1, 0), (1, 1), (2, 1)])
def test_many_image_blocks_match_one_block(monkeypatch, stride, padding, layout):
    """The kernels work one block of images at a time; block edges must not show."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 2))
    meta = Conv2dMeta(x.shape, w.shape, stride, padding, (4,))
    g = rng.standard_normal(meta.output_shape)
    b = rng.standard_normal(4)

    def all_ops():
        return (
            kernels.conv2d_forward(x, w, b, meta),
            kernels.conv2d_backward_input(g, w, meta),
            kernels.conv2d_backward_weight(g, x, meta),
        )

    one_block = all_ops()
    monkeypatch.setattr(kernels, "BLOCK_BYTES", 1)  # one image per block
    assert len(kernels._image_blocks(meta, 8)) == 5
    for a, b_ in zip(one_block, all_ops()):
        np.testing.assert_allclose(a, b_, rtol=1e-12, atol=1e-12)
    # two images per block, the last one alone: a smaller block after larger ones reuses
    # buffers that the larger ones wrote further into
    monkeypatch.setattr(kernels, "_image_blocks", lambda m, _: [
        (n0, min(n0 + 2, m.batch)) for n0 in range(0, m.batch, 2)])
    for a, b_ in zip(one_block, all_ops()):
        np.testing.assert_allclose(a, b_, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("view", ["transposed", "cropped", "every other image"])
def test_wide_windows_of_a_strided_input(view, layout):
    """The wide windows walk an image's rows as one run: inputs whose rows are not back to
    back (a transposed or cropped view) must give the same result as a contiguous copy."""
    rng = np.random.default_rng(5)
    base = rng.standard_normal((6, 9, 11, 10)).astype(np.float32)
    x = {"transposed": base.transpose(0, 1, 3, 2), "cropped": base[:, :, 1:9, 2:9],
         "every other image": base[::2]}[view]
    w = rng.standard_normal((5, 9, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    for padding in (0, 1):
        meta = Conv2dMeta(x.shape, w.shape, 1, padding, b.shape)
        dy = rng.standard_normal(meta.output_shape).astype(np.float32)
        dense = np.ascontiguousarray(x)
        np.testing.assert_array_equal(kernels.conv2d_forward(x, w, b, meta),
                                      kernels.conv2d_forward(dense, w, b, meta))
        np.testing.assert_array_equal(kernels.conv2d_backward_weight(dy, x, meta),
                                      kernels.conv2d_backward_weight(dy, dense, meta))


def test_the_layout_follows_the_channel_count():
    dense = Conv2dMeta((2, kernels.WIDE_MIN_CHANNELS, 9, 9), (4, kernels.WIDE_MIN_CHANNELS, 3, 3))
    assert kernels._wide(dense)
    assert not kernels._wide(Conv2dMeta((2, 1, 9, 9), (4, 1, 3, 3)))  # a first layer
    assert not kernels._wide(Conv2dMeta((2, 16, 9, 9), (4, 16, 3, 3), stride=2))


def test_float32_stays_float32():
    x = np.ones((1, 2, 4, 4), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    y, dx, dw, db = run_conv(x, w, np.ones(3, np.float32), grad=np.ones((1, 3, 2, 2), np.float32))
    assert y.dtype == dx.dtype == dw.dtype == db.dtype == np.float32


# --------------------------------------------------------------------------- autograd wiring


def forbidden(*args):
    raise AssertionError("this backward op should not run")


def test_backward_runs_only_the_ops_that_are_needed(monkeypatch):
    x = tt.tensor(np.ones((1, 2, 5, 5), np.float32), requires_grad=True)
    w = tt.tensor(np.ones((3, 2, 3, 3), np.float32))  # a constant: no dW
    b = tt.tensor(np.ones(3, np.float32))  # a constant: no db
    monkeypatch.setattr(kernels, "conv2d_backward_weight", forbidden)
    monkeypatch.setattr(kernels, "conv2d_backward_bias", forbidden)
    y = conv2d(x, w, b)
    saved_x, saved_w = y.grad_fn.ctx.saved_tensors
    assert saved_x is None and saved_w is not None  # dX needs w only
    y.sum().backward()
    assert x.grad.shape == (1, 2, 5, 5)
    assert w.grad is None and b.grad is None


def test_weight_only_gradient_saves_only_x(monkeypatch):
    monkeypatch.setattr(kernels, "conv2d_backward_input", forbidden)
    x = tt.tensor(np.ones((1, 2, 5, 5), np.float32))
    w = tt.tensor(np.ones((3, 2, 3, 3), np.float32), requires_grad=True)
    y = conv2d(x, w)
    saved_x, saved_w = y.grad_fn.ctx.saved_tensors
    assert saved_x is not None and saved_w is None  # dW needs x only
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 2, 3, 3), 9, np.float32))


def test_no_grad_records_nothing():
    x = tt.tensor(np.ones((1, 1, 3, 3), np.float32), requires_grad=True)
    w = tt.tensor(np.ones((1, 1, 2, 2), np.float32), requires_grad=True)
    with tt.no_grad():
        y = conv2d(x, w)
    assert y.grad_fn is None and not y.requires_grad


# --------------------------------------------------------------------------- nn.Conv2d


def test_module_parameters_and_pytorch_init():
    tt.manual_seed(0)
    m = Conv2d(16, 32, 3)
    names = [name for name, _ in m.named_parameters()]
    assert names == ["weight", "bias"]
    assert m.weight.shape == (32, 16, 3, 3) and m.bias.shape == (32,)
    assert m.weight.dtype == np.float32
    bound = 1 / math.sqrt(16 * 3 * 3)  # kaiming_uniform_(a=sqrt(5)) on fan_in = Cin*Kh*Kw
    w = m.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound  # U(-a, a) has std a/sqrt(3)
    assert np.abs(m.bias.numpy()).max() <= bound
    tt.manual_seed(0)
    np.testing.assert_array_equal(Conv2d(16, 32, 3).weight.numpy(), w)  # seeded


def test_module_without_bias_and_non_square_arguments():
    m = Conv2d(2, 4, (2, 3), stride=(2, 1), padding=(1, 0), bias=False)
    assert m.bias is None
    assert [name for name, _ in m.named_parameters()] == ["weight"]
    assert m.weight.shape == (4, 2, 2, 3)
    y = m(tt.tensor(np.ones((3, 2, 5, 5), np.float32)))
    assert y.shape == (3, 4, (5 + 2 - 2) // 2 + 1, 5 - 3 + 1)


def test_module_matches_pytorch_with_the_same_weights(device):
    torch = pytest.importorskip("torch")
    tt.manual_seed(3)
    m = Conv2d(3, 5, 3, padding=1).to(device)
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 8), dtype=np.float32)
    ref = torch.nn.Conv2d(3, 5, 3, padding=1)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(m.weight.numpy()))
        ref.bias.copy_(torch.from_numpy(m.bias.numpy()))
        expected = ref(torch.from_numpy(x)).numpy()
    _close("Conv2d", m(tt.tensor(x, device=device)).numpy(), expected, "module")


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "x_shape, w_shape, kwargs, message",
    [
        ((5, 5), (2, 3, 3, 3), {}, r"input must be 4-D .*got shape \(5, 5\) \(2 dims\)"),
        ((1, 3, 5, 5), (2, 3, 3), {}, r"weight must be 4-D .*got shape \(2, 3, 3\)"),
        ((1, 3, 0, 5), (2, 3, 3, 3), {}, r"input shape \(1, 3, 0, 5\) has an empty dimension"),
        ((1, 3, 5, 5), (0, 3, 3, 3), {}, r"weight shape \(0, 3, 3, 3\) has an empty dimension"),
        (
            (1, 3, 5, 5),
            (8, 4, 3, 3),
            {},
            r"input has 3 channels but weight expects 4 .*weight shape \(8, 4, 3, 3\)",
        ),
        ((1, 3, 5, 5), (2, 3, 3, 3), {"stride": 0}, r"stride must be positive.*\(0, 0\)"),
        ((1, 3, 5, 5), (2, 3, 3, 3), {"stride": (1, -2)}, r"stride must be positive.*\(1, -2\)"),
        ((1, 3, 5, 5), (2, 3, 3, 3), {"padding": -1}, r"padding must be non-negative.*\(-1, -1\)"),
        (
            (1, 3, 2, 2),
            (2, 3, 5, 5),
            {"padding": 1},
            r"kernel 5x5 does not fit the padded input 4x4 \(input 2x2, padding 1x1\)",
        ),
        (
            (1, 3, 9, 2),
            (2, 3, 1, 3),
            {},
            r"kernel 1x3 does not fit the padded input 9x2",
        ),
        (
            (1, 3, 5, 5),
            (2, 3, 3, 3),
            {"bias_shape": (3,)},
            r"bias must have shape \(2,\) = \[Cout\], got \(3,\)",
        ),
        (
            (1, 3, 5, 5),
            (2, 3, 3, 3),
            {"bias_shape": (2, 1)},
            r"bias must have shape \(2,\) = \[Cout\], got \(2, 1\)",
        ),
        ((1, 3, 5, 5), (2, 3, 3, 3), {"stride": (1, 2, 3)}, r"stride must be an int or a pair"),
        ((1, 3, 5, 5), (2, 3, 3, 3), {"padding": 1.5}, r"padding must be an int or a pair"),
    ],
)
def test_bad_shapes_raise_value_errors_that_name_the_sizes(x_shape, w_shape, kwargs, message):
    with pytest.raises(ValueError, match=r"^conv2d: " + message):
        Conv2dMeta(x_shape, w_shape, **kwargs)
    # The public function checks before any work is done, with the same message.
    x = tt.tensor(np.zeros(x_shape, np.float32))
    w = tt.tensor(np.zeros(w_shape, np.float32))
    bias_shape = kwargs.pop("bias_shape", None)
    b = None if bias_shape is None else tt.tensor(np.zeros(bias_shape, np.float32))
    with pytest.raises(ValueError, match=r"^conv2d: " + message):
        conv2d(x, w, b, **kwargs)


def test_module_rejects_bad_arguments():
    with pytest.raises(ValueError, match="channels must be positive"):
        Conv2d(0, 4, 3)
    with pytest.raises(ValueError, match="kernel_size must be positive"):
        Conv2d(1, 4, (0, 3))
    with pytest.raises(ValueError, match="kernel_size must be an int or a pair"):
        Conv2d(1, 4, "3")
    m = Conv2d(3, 4, 3)
    with pytest.raises(ValueError, match="input has 1 channels but weight expects 3"):
        m(tt.tensor(np.zeros((1, 1, 5, 5), np.float32)))


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 0)])
def test_batch_shards_in_parallel_give_the_serial_result(workers, stride, padding, layout,
                                                         monkeypatch):
    """Sharding the batch over threads (kernels/cpu/parallel.py) changes nothing but speed."""
    monkeypatch.setattr(kernels, "MIN_SHARD_MACS", 1)  # shard even these small convolutions
    from tinytrain.kernels.cpu import parallel
    from tinytrain.kernels.cpu.conv2d import (
        Conv2dMeta,
        conv2d_backward,
        conv2d_backward_bias,
        conv2d_backward_input,
        conv2d_backward_weight,
        conv2d_forward,
    )

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((7, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    meta = Conv2dMeta(x.shape, w.shape, stride, padding, b.shape)
    dy = rng.standard_normal(meta.output_shape).astype(np.float32)

    def run() -> tuple[np.ndarray, ...]:
        return (conv2d_forward(x, w, b, meta), conv2d_backward_input(dy, w, meta),
                conv2d_backward_weight(dy, x, meta), conv2d_backward_bias(dy))

    def run_merged(needs) -> tuple[np.ndarray | None, ...]:  # the layer's one backward call
        return conv2d_backward(dy, x, w, meta, needs)

    before = parallel.get_num_threads()
    try:
        tt.set_num_threads(1)
        serial = run()
        tt.set_num_threads(workers)
        sharded = run()
        merged = {needs: run_merged(needs) for needs in itertools.product([False, True], repeat=3)}
    finally:
        tt.set_num_threads(before)
    for needs, grads in merged.items():  # each asked-for gradient is the separate op's, no other
        for need, got, alone in zip(needs, grads, sharded[1:]):  # (db: summed in another order)
            if need:
                np.testing.assert_allclose(got, alone, rtol=1e-5, atol=1e-5)
            else:
                assert got is None
    # Per image the arithmetic is the same, but not always bit for bit: a shard's GEMMs
    # have fewer columns, and BLAS kernels (OpenBLAS's Haswell ones, for example) may
    # round an edge tile of another width differently. dW is also summed over shards.
    np.testing.assert_allclose(sharded[0], serial[0], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(sharded[1], serial[1], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(sharded[2], serial[2], rtol=1e-5, atol=1e-5)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, torch.tensor(b), stride=stride, padding=padding)
    yt.backward(torch.tensor(dy))
    np.testing.assert_allclose(sharded[0], yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sharded[1], xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sharded[2], wt.grad.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape, threads", [
    (((64, 1, 28, 28), (16, 1, 3, 3)), {"MainThread"}),    # cnn's conv1: one thread
    (((64, 16, 26, 26), (32, 16, 3, 3)), {"MainThread", "tinytrain-cpu"}),  # cnn's conv2: two
])
def test_a_small_convolution_is_not_split_over_threads(monkeypatch, shape, threads):
    """Below MIN_SHARD_MACS per shard a convolution runs on the calling thread alone: a
    thread's share would be mostly Python, which holds the GIL."""
    import threading

    seen = set()
    real_forward, real_backward = kernels._forward, kernels._backward_weight

    def forward(*args):
        seen.add(threading.current_thread().name.split("_")[0])
        return real_forward(*args)

    def backward_weight(*args, **kwargs):
        seen.add(threading.current_thread().name.split("_")[0])
        return real_backward(*args, **kwargs)

    monkeypatch.setattr(kernels, "_forward", forward)
    monkeypatch.setattr(kernels, "_backward_weight", backward_weight)
    x_shape, w_shape = shape
    meta = Conv2dMeta(x_shape, w_shape)
    x = np.zeros(x_shape, np.float32)
    w = np.zeros(w_shape, np.float32)
    before = tt.get_num_threads()
    try:
        tt.set_num_threads(2)
        kernels.conv2d_forward(x, w, None, meta)
        kernels.conv2d_backward(np.zeros(meta.output_shape, np.float32), x, w, meta,
                                (False, True, False))
    finally:
        tt.set_num_threads(before)
    assert seen == threads


def test_an_empty_batch_gives_empty_outputs_and_zero_weight_gradients_as_torch():
    torch = pytest.importorskip("torch")
    from tinytrain.nn import functional as F

    x = tt.zeros(0, 3, 8, 7, requires_grad=True)
    w = tt.randn(4, 3, 3, 2, requires_grad=True)
    b = tt.randn(4, requires_grad=True)
    y = F.max_pool2d(F.conv2d(x, w, b, stride=1, padding=1), 2) + F.avg_pool2d(
        F.conv2d(x, w, b, stride=1, padding=1), 2)
    y.sum().backward()
    ty = torch.nn.functional.conv2d(torch.zeros(0, 3, 8, 7), torch.zeros(4, 3, 3, 2), padding=1)
    assert y.shape == tuple(torch.nn.functional.max_pool2d(ty, 2).shape) == (0, 4, 4, 4)
    assert x.grad.shape == (0, 3, 8, 7)
    assert not w.grad.numpy().any() and not b.grad.numpy().any()


def test_the_bias_by_the_design_documents_name_b():
    x, w, b = tt.randn(2, 3, 5, 5), tt.randn(4, 3, 3, 3), tt.randn(4)
    np.testing.assert_array_equal(conv2d(x, w, b=b).numpy(), conv2d(x, w, b).numpy())
    with pytest.raises(TypeError, match="give the bias once"):
        conv2d(x, w, b, b=b)
