"""The CUDA kernel set, checked on the CPU: the .cu sources run through the emulator.

``emulated_kernels()`` runs ``tinytrain.kernels.cuda`` itself (its glue, its launch plans,
and the kernels' *source* translated to Python) on NumPy arrays, with tiny launch sizes so
that grid-stride loops, several blocks and the batch chunking are all exercised. Every op
is compared with the CPU kernel set on the configuration grid of the CPU tests. The GPU
runs the same plans (``tests/test_cuda_device.py``, marked ``cuda``).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tinytrain.kernels import cpu
from tinytrain.kernels.cuda import emulator, plans
from tinytrain.kernels.cuda.emulator import EmulatorError, emulated_kernels
from tinytrain.kernels.shapes import Conv2dMeta, Pool2dMeta


@pytest.fixture
def k(monkeypatch):
    """The CUDA kernel set on the emulator, with launches small enough to loop and chunk, and
    dW GEMMs cut into slices of a few columns."""
    monkeypatch.setattr(plans, "THREADS", 32)
    monkeypatch.setattr(plans, "MAX_BLOCKS", 3)  # 96 threads: grid-stride loops take turns
    monkeypatch.setattr(plans, "REDUCE_THREADS", 16)
    monkeypatch.setattr(plans, "SLICE_COLS", 8)
    monkeypatch.setattr(plans, "MAX_SLICES", 4)
    with emulated_kernels() as kernels:
        yield kernels


def close(ours, ref, what, rtol=1e-5):
    assert ours.shape == ref.shape and ours.dtype == ref.dtype, (what, ours.shape, ref.shape)
    atol = rtol * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=atol, err_msg=what)


# --------------------------------------------------------------------------- convolution

KERNELS = [1, 2, 3, (2, 3)]
STRIDES = [1, 2, (2, 1)]
# batch x Cin x Cout x padding x bias x (H, W): the CPU tests' grid, for every kernel size
# and stride (1,152 convolutions, forward and three backward ops).
GRID = list(itertools.product([1, 3], [1, 3], [1, 4], [0, 1, 2], [True, False], [(5, 7), (6, 8)]))


def conv_case(rng, n, c_in, c_out, kernel, stride, padding, bias, hw, dtype=np.float32):
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    x = rng.standard_normal((n, c_in, *hw)).astype(dtype)
    w = rng.standard_normal((c_out, c_in, kh, kw)).astype(dtype)
    b = rng.standard_normal(c_out).astype(dtype) if bias else None
    meta = Conv2dMeta(x.shape, w.shape, stride, padding, None if b is None else b.shape)
    dy = rng.standard_normal(meta.output_shape).astype(dtype)
    return x, w, b, dy, meta


def check_conv(k, x, w, b, dy, meta, needs=(True, True, True), rtol=1e-5):
    what = f"x {x.shape} w {w.shape} stride {meta.stride_h, meta.stride_w} pad " \
           f"{meta.pad_h, meta.pad_w} bias {b is not None}"
    close(k.conv2d_forward(x, w, b, meta), cpu.conv2d_forward(x, w, b, meta), "y " + what, rtol)
    needs = (needs[0], needs[1], needs[2] and b is not None)
    ours = k.conv2d_backward(dy, x, w, meta, needs)
    ref = cpu.conv2d_backward(dy, x, w, meta, needs)
    for name, a, r in zip(("dx", "dw", "db"), ours, ref):
        assert (a is None) == (r is None), name
        if r is not None:
            close(a, r, f"{name} {what}", rtol)


@pytest.mark.parametrize("stride", STRIDES, ids=str)
@pytest.mark.parametrize("kernel", KERNELS, ids=str)
def test_conv2d_matches_the_cpu_kernels_over_the_grid(k, kernel, stride):
    rng = np.random.default_rng(KERNELS.index(kernel) * 10 + STRIDES.index(stride))
    for n, c_in, c_out, padding, bias, hw in GRID:
        check_conv(k, *conv_case(rng, n, c_in, c_out, kernel, stride, padding, bias, hw))


@pytest.mark.parametrize("case", [
    dict(n=1, c_in=1, c_out=1, kernel=3, stride=1, padding=0, hw=(3, 3)),  # a 1x1 output
    dict(n=2, c_in=2, c_out=3, kernel=(3, 2), stride=3, padding=0, hw=(7, 7)),  # unread inputs
    dict(n=1, c_in=2, c_out=2, kernel=(1, 3), stride=(1, 2), padding=(0, 1), hw=(4, 9)),
    dict(n=3, c_in=1, c_out=2, kernel=5, stride=1, padding=2, hw=(6, 5)),  # convnet's conv1
], ids=["1x1-output", "stride3", "non-square", "pad2-C1"])
def test_conv2d_edge_shapes(k, case):
    rng = np.random.default_rng(0)
    check_conv(k, *conv_case(rng, case["n"], case["c_in"], case["c_out"], case["kernel"],
                             case["stride"], case["padding"], True, case["hw"]))


def test_conv2d_float64_and_partial_gradients(k):
    rng = np.random.default_rng(1)
    x, w, b, dy, meta = conv_case(rng, 2, 2, 3, 3, 2, 1, True, (5, 6), np.float64)
    for needs in [(True, False, False), (False, True, False), (False, False, True),
                  (True, True, True)]:
        check_conv(k, x, w, b, dy, meta, needs, rtol=1e-12)
    close(k.conv2d_backward_input(dy, w, meta), cpu.conv2d_backward_input(dy, w, meta), "dx",
          1e-12)
    close(k.conv2d_backward_weight(dy, x, meta), cpu.conv2d_backward_weight(dy, x, meta), "dw",
          1e-12)
    close(k.conv2d_backward_bias(dy), cpu.conv2d_backward_bias(dy), "db", 1e-12)


def test_conv2d_chunks_of_the_batch_give_the_same_result(k, monkeypatch):
    """A column buffer of one image (or two) forces several chunks: forward, dX, and dW
    accumulated over chunks by the GEMM's beta = 1."""
    rng = np.random.default_rng(2)
    x, w, b, dy, meta = conv_case(rng, 5, 2, 3, 3, 1, 1, True, (5, 4), np.float64)
    per_image = meta.kernel_elems * meta.patches * 8
    for images in (1, 2):
        monkeypatch.setattr(plans, "COL_BYTES", images * per_image)
        assert len(plans.conv_chunks(meta, 8)) == -(-5 // images)
        check_conv(k, x, w, b, dy, meta, rtol=1e-12)


def test_conv2d_with_one_dw_gemm_and_with_64_bit_indices(k, monkeypatch):
    """The other two paths of the plans: dW as one GEMM (no slices; with and without the bias
    row), and the kernels compiled with long long indices (what a launch beyond 2**31
    elements uses), over part of the grid."""
    rng = np.random.default_rng(3)
    for slice_cols, wide in ((10**9, False), (8, True), (10**9, True)):
        monkeypatch.setattr(plans, "SLICE_COLS", slice_cols)
        monkeypatch.setattr(plans, "narrow", lambda largest, threads, wide=wide: not wide)
        for i, (n, c_in, c_out, padding, bias, hw) in enumerate(GRID):
            if i % 4 == 0:
                check_conv(k, *conv_case(rng, n, c_in, c_out, (2, 3), (2, 1), padding, bias, hw))
        x = rng.standard_normal((3, 2, 5, 6)).astype(np.float32)
        meta = Pool2dMeta.from_shape(x.shape, 2)
        dy = rng.standard_normal(meta.output_shape).astype(np.float32)
        close(k.max_pool2d_backward(dy, x, meta), cpu.max_pool2d_backward(dy, x, meta),
              "max pool dx")
        close(k.relu_forward(x), cpu.relu_forward(x), "relu")


def test_launches_use_32_bit_indices_exactly_when_every_index_fits():
    assert plans.narrow(2**31 - 1 - 4096, 4096)
    assert not plans.narrow(2**31 - 4096, 4096)
    x = np.zeros(10, np.float32)
    step = plans.elementwise("layers", "relu_forward", np.float32, 10, x, x, 10)
    assert not step.wide and type(step.args[2]) is np.int32
    step = plans.elementwise("layers", "relu_forward", np.float32, 10, x, x, 10, largest=2**31)
    assert step.wide and type(step.args[2]) is np.int64


@pytest.mark.parametrize("index_max", [100, 150, 200, 250, 300, 400, 600, 900, 1500])
def test_every_plan_tells_the_launcher_its_largest_array(k, monkeypatch, index_max):
    """With a tiny INDEX_MAX, some launches of small shapes need 64-bit indices and others do
    not; the emulator checks every narrow launch against its arrays (emulator.check_width),
    so a plan that understates its largest array fails for some INDEX_MAX. The results must
    match the CPU's with either width."""
    monkeypatch.setattr(plans, "INDEX_MAX", index_max)
    rng = np.random.default_rng(11)
    check_conv(k, *conv_case(rng, 3, 2, 3, 3, 1, 1, True, (6, 7)))
    check_conv(k, *conv_case(rng, 2, 1, 2, 2, 2, 0, True, (5, 5)), needs=(True, False, True))
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    meta = Pool2dMeta.from_shape(x.shape, 2, 1)
    dy = rng.standard_normal(meta.output_shape).astype(np.float32)
    close(k.max_pool2d_forward(x, meta)[0], cpu.max_pool2d_forward(x, meta)[0], "max pool")
    close(k.max_pool2d_backward(dy, x, meta), cpu.max_pool2d_backward(dy, x, meta), "max dx")
    close(k.avg_pool2d_forward(x, meta), cpu.avg_pool2d_forward(x, meta), "avg pool")
    close(k.avg_pool2d_backward(dy, meta), cpu.avg_pool2d_backward(dy, meta), "avg dx")
    logits = rng.standard_normal((37, 10)).astype(np.float32)
    t = rng.integers(0, 10, 37)
    close(np.asarray(k.cross_entropy_forward(logits, t, "mean")),
          np.asarray(cpu.cross_entropy_forward(logits, t, "mean"), np.float32), "loss", 1e-6)
    g = np.ones((), np.float32)
    close(k.cross_entropy_backward(logits, t, g, "mean"),
          cpu.cross_entropy_backward(logits, t, g, "mean"), "dlogits", 1e-6)
    w = rng.standard_normal((4, 10)).astype(np.float32)
    gy = rng.standard_normal((37, 4)).astype(np.float32)
    for a, r in zip(k.linear_backward(gy, logits, w, (True, True, True)),
                    cpu.linear_backward(gy, logits, w, (True, True, True))):
        close(a, r, "linear")
    p, m, v = (rng.random(80).astype(np.float32) for _ in range(3))
    ref = [a.copy() for a in (p, m, v)]
    k.adam_step(p, m, m.copy(), v, 1, 1e-3, (0.9, 0.999), 1e-8, 0.0)
    cpu.adam_step(ref[0], ref[1], ref[1].copy(), ref[2], 1, 1e-3, (0.9, 0.999), 1e-8, 0.0)
    np.testing.assert_array_equal(p, ref[0])


def test_dw_slices_hold_whole_images_and_enough_columns(monkeypatch):
    monkeypatch.setattr(plans, "SLICE_COLS", 4096)
    monkeypatch.setattr(plans, "MAX_SLICES", 128)
    assert plans.dw_slices(512, 784) == 64  # convnet's conv1 at batch 512: 8 images a slice
    assert plans.dw_slices(512, 196) == 16  # conv2: 32 images, 6,272 columns a slice
    assert plans.dw_slices(64, 196) == 2
    assert plans.dw_slices(64, 49) == 1  # too few columns to cut
    assert plans.dw_slices(61, 784) == 1  # a prime batch: no equal slices of whole images
    for nb, p in [(512, 784), (96, 100), (7, 5000), (1, 10**6)]:
        s = plans.dw_slices(nb, p)
        assert nb % s == 0 and s <= 128 and (s == 1 or nb // s * p >= 4096)


def test_conv2d_refuses_mixed_or_integer_dtypes(k):
    x = np.ones((1, 1, 3, 3), np.float64)
    w = np.ones((1, 1, 2, 2), np.float32)
    meta = Conv2dMeta(x.shape, w.shape)
    with pytest.raises(TypeError, match="float32 or float64 operands of one dtype, got "
                                        "float64, float32"):
        k.conv2d_forward(x, w, None, meta)
    with pytest.raises(TypeError, match="int64"):
        k.conv2d_forward(x.astype(np.int64), w.astype(np.int64), None, meta)


def test_col2im_is_a_gather_each_input_written_by_one_thread():
    """The emulator reports two threads writing one element; col2im never does, while a
    scatter version of it (one thread per column entry, +=) is caught at once."""
    scatter = textwrap.dedent("""
        extern "C" __global__ void col2im_scatter(const float* dcol, float* dx, long long K,
                                                  long long cols, long long W)
        {
            for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < K * cols;
                 i += (long long)blockDim.x * gridDim.x) {
                long long k = i / cols;
                long long col = i % cols;
                dx[col + k] += dcol[i];   // a 1-D "image": entry (k, col) goes to pixel col + k
            }
        }
    """)
    kern = emulator.translate(scatter, "scatter.cu")["col2im_scatter"]
    dcol, dx = np.ones(2 * 4, np.float32), np.zeros(5, np.float32)
    with pytest.raises(EmulatorError, match=r"race on dx\[1\]"):
        emulator.launch(kern, 2, 4, (dcol, dx, np.int64(2), np.int64(4), np.int64(5)))


# --------------------------------------------------------------------------- pooling

POOL_GRID = list(itertools.product([1, 2, 3, (2, 3)], [None, 1, 2, (2, 1)], [0, 1],
                                   [(5, 7), (6, 8)]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooling_matches_the_cpu_kernels(k, dtype):
    rng = np.random.default_rng(3)
    for i, (kernel, stride, padding, hw) in enumerate(POOL_GRID):
        kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        if 2 * padding > min(kh, kw) or i % 3 != (dtype == np.float64):
            continue  # PyTorch's padding rule; and a third of the grid per dtype
        x = rng.integers(-3, 4, (2, 2, *hw)).astype(dtype)  # small integers: many ties
        meta = Pool2dMeta.from_shape(x.shape, kernel, stride, padding)
        dy = rng.standard_normal(meta.output_shape).astype(dtype)
        what = f"kernel {kernel} stride {stride} padding {padding} {hw}"
        out, am = k.max_pool2d_forward(x, meta)
        ref_out, ref_am = cpu.max_pool2d_forward(x, meta)
        np.testing.assert_array_equal(out, ref_out, err_msg=what)
        np.testing.assert_array_equal(am, ref_am, err_msg=what)
        close(k.max_pool2d_backward(dy, x, meta), cpu.max_pool2d_backward(dy, x, meta),
              "max dx " + what)
        for cip in (True, False):
            close(k.avg_pool2d_forward(x, meta, cip), cpu.avg_pool2d_forward(x, meta, cip),
                  f"avg {cip} " + what)
            close(k.avg_pool2d_backward(dy, meta, cip), cpu.avg_pool2d_backward(dy, meta, cip),
                  f"avg dx {cip} " + what)


def test_max_pool_nan_and_infinity_like_the_cpu(k):
    x = np.array([[[[1, np.nan, 3, -np.inf], [np.nan, 0, -np.inf, -np.inf]]]], np.float32)
    meta = Pool2dMeta.from_shape(x.shape, 2)
    out, am = k.max_pool2d_forward(x, meta)
    ref_out, ref_am = cpu.max_pool2d_forward(x, meta)
    np.testing.assert_array_equal(out, ref_out)  # NaN == NaN for assert_array_equal
    np.testing.assert_array_equal(am, ref_am)


# --------------------------------------------------------------------------- layers


def test_relu_and_its_gradient(k):
    x = np.array([[-2.0, -0.0, 0.0, 1.5, np.nan]], np.float32)
    y = k.relu_forward(x)
    np.testing.assert_array_equal(y, cpu.relu_forward(x))
    g = np.arange(5, dtype=np.float32).reshape(1, 5)
    np.testing.assert_array_equal(k.relu_backward(g, y), cpu.relu_backward(g, y))


def test_elementwise_kernels_keep_the_shape_of_0_d_and_strided_inputs(k):
    """ascontiguousarray turns a 0-d array into a 1-d one: outputs keep the input's shape."""
    for x in (np.array(-1.5, np.float32), np.array(2.0, np.float64),
              np.arange(12, dtype=np.float32).reshape(3, 4).T - 5):
        for y, ref in [(k.relu_forward(x), cpu.relu_forward(x)),
                       (k.relu_backward(x, x), cpu.relu_backward(x, x)),
                       (k.dropout_forward(x, 0.5, 3), cpu.dropout_forward(x, 0.5, 3))]:
            assert y.shape == ref.shape and y.dtype == ref.dtype
            np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keeps_exactly_the_cpu_elements(k, p):
    """The kernel's hash of (seed, index) and the CPU's NumPy version are the same function."""
    x = np.random.default_rng(4).standard_normal((3, 70)).astype(np.float32)
    seed = 0x1234_5678_9ABC_DEF0 + int(p * 100)
    y = k.dropout_forward(x, p, seed)
    np.testing.assert_array_equal(y, cpu.dropout_forward(x, p, seed))
    assert 0 < (y != 0).sum() < x.size
    np.testing.assert_array_equal(k.dropout_backward(x, p, seed), y)


def test_dropout_hash_uses_the_high_half_of_the_index():
    """Element 2**32 + i is not element i: the kernel's device function, run at such
    indices, matches the NumPy hash there and differs from indices 0..7."""
    src = (emulator.SOURCE_DIR / "layers.cu").read_text() + textwrap.dedent("""
        extern "C" __global__ void keep_at(long long* out, long long start, unsigned int lo,
                                           unsigned int hi, unsigned int threshold)
        {
            out[threadIdx.x] = dropout_keep(lo, hi, threshold, start + threadIdx.x) ? 1 : 0;
        }
    """)
    kern = emulator.translate(src, "layers.cu + keep_at")["keep_at"]
    seed, p = 5 + (7 << 32), 0.5
    keep = {}
    for start in (0, 2**32):
        out = np.zeros(8, np.int64)
        emulator.launch(kern, 1, 8, (out, np.int64(start), np.uint32(5), np.uint32(7),
                                     np.uint32(cpu.layers.dropout_threshold(p))))
        ref = cpu.layers.dropout_keep(seed, np.arange(start, start + 8, dtype=np.uint64), p)
        np.testing.assert_array_equal(out.astype(bool), ref)
        keep[start] = ref.tolist()
    assert keep[0] != keep[2**32]


@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_and_backward(k, bias):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)  # leading dims are flattened
    w = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32) if bias else None
    close(k.linear_forward(x, w, b), cpu.linear_forward(x, w, b), "linear")
    g = rng.standard_normal((2, 3, 5)).astype(np.float32)
    needs = (True, True, bias)
    for name, a, r in zip("xwb", k.linear_backward(g, x, w, needs),
                          cpu.linear_backward(g, x, w, needs)):
        if r is None:
            assert a is None
        else:
            close(a, r, "d" + name)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_forward_and_backward(k, reduction, dtype):
    rng = np.random.default_rng(6)
    logits = (5 * rng.standard_normal((37, 10))).astype(dtype)  # 37 rows over 16 threads
    targets = rng.integers(0, 10, 37)
    loss = k.cross_entropy_forward(logits, targets, reduction)
    ref = cpu.cross_entropy_forward(logits, targets, reduction)
    close(np.asarray(loss), np.asarray(ref, dtype=dtype), "loss", 1e-6)
    g = np.asarray(rng.standard_normal(37 if reduction == "none" else ()), dtype)
    close(k.cross_entropy_backward(logits, targets.astype(np.uint8), g, reduction),
          cpu.cross_entropy_backward(logits, targets, g, reduction), "dlogits", 1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_skips_rows_whose_target_is_ignore_index(k, reduction):
    """PyTorch's default ignore_index (-100): the row's loss and gradient are 0 and the mean
    is over the other rows; not a bad target. Checked against torch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    logits = (3 * rng.standard_normal((37, 5))).astype(np.float64)
    targets = rng.integers(0, 5, 37)
    targets[[0, 5, 6, 36]] = -100
    g = rng.standard_normal(37 if reduction == "none" else ())
    x = torch.tensor(logits, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(x, torch.tensor(targets), reduction=reduction)
    ref.backward(torch.tensor(g))
    close(np.asarray(k.cross_entropy_forward(logits, targets, reduction)),
          ref.detach().numpy(), "loss", 1e-12)
    close(k.cross_entropy_backward(logits, targets, g, reduction), x.grad.numpy(),
          "dlogits", 1e-12)


def test_cross_entropy_of_only_ignored_rows_is_nan_like_pytorch(k):
    logits, targets = np.zeros((3, 4)), np.full(3, -100)
    assert np.isnan(k.cross_entropy_forward(logits, targets, "mean"))
    assert k.cross_entropy_forward(logits, targets, "sum") == 0


def test_cross_entropy_reports_bad_targets_through_its_error_slot():
    """The kernel writes (count, first bad row, its value) and a NaN loss."""
    kern = emulator.load("loss")["cross_entropy_forward"]
    logits = np.zeros((6, 3), np.float32)
    out, err = np.empty((), np.float32), np.zeros(3, np.int64)
    targets = np.array([0, 2, 3, 1, -1, 7])
    emulator.launch(kern, 1, 4, (logits, targets, out, err, np.int64(6), np.int64(3),
                                 np.int32(1), np.int64(-100)))
    assert err.tolist() == [3, 2, 3] and np.isnan(out)
    with emulated_kernels() as k, pytest.raises(ValueError, match=r"3 target\(s\) outside "
                                                 r"\[0, 3\) \(the first at row 2: 3\)"):
        k.cross_entropy_forward(logits, targets, "mean")


# --------------------------------------------------------------------------- optimizers


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adam_step_is_bitwise_the_cpu_update(k, wd):
    rng = np.random.default_rng(7)
    state = [rng.standard_normal(50).astype(np.float32) for _ in range(3)]
    state[2] = np.abs(state[2])
    gpu, ref = [s.copy() for s in state], [s.copy() for s in state]
    for step in (1, 2, 3):
        g = rng.standard_normal(50).astype(np.float32)
        k.adam_step(gpu[0], g, gpu[1], gpu[2], step, 1e-2, (0.9, 0.999), 1e-8, wd)
        cpu.adam_step(ref[0], g, ref[1], ref[2], step, 1e-2, (0.9, 0.999), 1e-8, wd)
    for a, r in zip(gpu, ref):
        np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("momentum, nesterov, wd", [(0.0, False, 0.0), (0.9, False, 0.0),
                                                     (0.9, True, 0.01)])
def test_sgd_step_is_bitwise_the_cpu_update(k, momentum, nesterov, wd):
    rng = np.random.default_rng(8)
    p = rng.standard_normal(40).astype(np.float32)
    gpu, ref = p.copy(), p.copy()
    gbuf = np.empty_like(p) if momentum else None
    rbuf = np.empty_like(p) if momentum else None
    for first in (True, False, False):
        g = rng.standard_normal(40).astype(np.float32)
        k.sgd_step(gpu, g, gbuf, 0.1, momentum, 0.0, wd, nesterov, first)
        cpu.sgd_step(ref, g, rbuf, 0.1, momentum, 0.0, wd, nesterov, first)
    np.testing.assert_array_equal(gpu, ref)


# --------------------------------------------------------------------------- the kernel set


def test_the_cuda_set_has_every_function_of_the_cpu_set():
    from tinytrain.kernels import cuda

    missing = [name for name in cpu.KERNELS if not callable(getattr(cuda, name, None))]
    assert not missing, f"tinytrain.kernels.cuda lacks {missing}"


def test_importing_tinytrain_and_its_kernels_never_imports_cupy():
    code = ("import sys, tinytrain, tinytrain.nn.functional, tinytrain.kernels.cuda, "
            "tinytrain.kernels.cuda.emulator, tinytrain.kernels.cuda.nvrtc, tinytrain.train; "
            "assert 'cupy' not in sys.modules, 'cupy was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- cuBLAS mapping


@pytest.mark.parametrize("transa, transb", list(itertools.product([False, True], repeat=2)))
def test_row_major_gemm_becomes_the_right_column_major_cublas_call(transa, transb):
    """runtime.cublas_call swaps operands for cuBLAS's column-major layout; run that call
    in NumPy by the BLAS definition, with offsets and padded leading dimensions."""
    from tinytrain.kernels.cuda.runtime import cublas_call

    rng = np.random.default_rng(9)
    m, n, kk = 3, 4, 5
    a = rng.standard_normal(200)
    b = rng.standard_normal(200)
    c = rng.standard_normal(100)
    lda, ldb, ldc = (m if transa else kk) + 2, (kk if transb else n) + 1, n + 3
    g = plans.Gemm(transa, transb, m, n, kk, 1.5, a, 7, lda, b, 3, ldb, 0.5, c, 2, ldc)
    expected = c.copy()
    emulator.gemm_rowmajor(g._replace(c=expected))
    got = c.copy()
    args = cublas_call(g)
    emulator.gemm_colmajor(*args[:11], (got, args[11][1]), args[12])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    untouched = np.ones(100, bool)
    for r in range(m):
        untouched[2 + r * ldc: 2 + r * ldc + n] = False
    np.testing.assert_array_equal(got[untouched], c[untouched])


@pytest.mark.parametrize("transa, transb", [(False, True), (True, False)])
def test_a_strided_batch_of_gemms_maps_to_cublas_with_the_strides_swapped(transa, transb):
    """Three products at element strides (as dW's slices): the row-major plan, the
    column-major cuBLAS call and NumPy agree on each, and nothing between them is written."""
    from tinytrain.kernels.cuda.runtime import cublas_call

    rng = np.random.default_rng(10)
    m, n, kk, batch = 3, 4, 5, 3
    a, b = rng.standard_normal(400), rng.standard_normal(400)
    c = rng.standard_normal(200)
    lda, ldb, ldc = (m if transa else kk) + 1, (kk if transb else n) + 2, n + 1
    g = plans.Gemm(transa, transb, m, n, kk, 1.0, a, 4, lda, b, 1, ldb, 0.0, c, 3, ldc,
                   batch, 41, 37, 50)
    expected = c.copy()
    emulator.gemm_rowmajor(g._replace(c=expected))
    got = c.copy()
    args = cublas_call(g)
    emulator.gemm_colmajor(*args[:11], (got, args[11][1]), *args[12:])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    touched = np.zeros(200, bool)
    for i in range(batch):
        sa = a[4 + 41 * i:].reshape(-1)
        op_a = np.lib.stride_tricks.as_strided(sa, (kk, m) if transa else (m, kk),
                                               (lda * 8, 8))
        sb = b[1 + 37 * i:]
        op_b = np.lib.stride_tricks.as_strided(sb, (n, kk) if transb else (kk, n), (ldb * 8, 8))
        product = (op_a.T if transa else op_a) @ (op_b.T if transb else op_b)
        for r in range(m):
            start = 3 + 50 * i + r * ldc
            np.testing.assert_allclose(got[start:start + n], product[r], rtol=1e-12)
            touched[start:start + n] = True
    np.testing.assert_array_equal(got[~touched], c[~touched])


def test_gemm_refuses_a_leading_dimension_that_overlaps_rows():
    a = np.zeros(12)
    g = plans.Gemm(False, False, 3, 4, 4, 1.0, a, 0, 3, np.zeros(16), 0, 4, 0.0, np.zeros(12),
                   0, 4)
    with pytest.raises(EmulatorError, match="leading dimension of A is 3 < 4"):
        emulator.gemm_rowmajor(g)


def test_gemm_sizes_beyond_32_bits_are_refused_clearly():
    g = plans.Gemm(False, False, 2**31, 1, 1, 1.0, None, 0, 1, None, 0, 1, 0.0, None, 0, 1)
    with pytest.raises(ValueError, match="exceeds cuBLAS's 32-bit sizes"):
        plans.check_gemm(g)


# --------------------------------------------------------------------------- target checks


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class _DeviceArray(np.ndarray):
    """A NumPy array with CuPy's ``.data.ptr`` (the fake GPU's memory is the host's)."""

    @property
    def data(self):
        return _Pointer(self.ctypes.data)


class _FakeEvent:
    log: list = []

    def __init__(self, block=False, disable_timing=True):
        self.done = True

    def record(self, stream=None):
        self.done = False  # the test decides when the GPU gets there

    def synchronize(self):
        _FakeEvent.log.append("wait")
        self.done = True


class _FakeCupy:
    """Just what runtime.TargetChecks uses of CuPy, on the host."""

    int64 = np.int64

    class cuda:  # noqa: N801
        Event = _FakeEvent

        @staticmethod
        def alloc_pinned_memory(nbytes):
            return bytearray(nbytes)

        @staticmethod
        def get_current_stream():
            return _Pointer(0)

        class runtime:  # noqa: N801
            memcpyDeviceToHost = 2

            @staticmethod
            def memcpyAsync(dst, src, size, kind, stream):
                import ctypes

                ctypes.memmove(dst, src, size)

    @staticmethod
    def zeros(shape, dtype):
        return np.zeros(shape, dtype).view(_DeviceArray)


def test_bad_targets_are_raised_late_but_within_check_depth_calls(monkeypatch):
    """runtime.TargetChecks with a fake GPU whose events complete when the test says: the
    error waits for its copy, is raised by the next call that sees it, at the latest when
    the ring of CHECK_DEPTH slots comes round (which waits), and only once."""
    from tinytrain.kernels.cuda import runtime

    monkeypatch.setattr(runtime, "cupy", lambda: _FakeCupy)
    checks = runtime.TargetChecks()
    monkeypatch.setattr(runtime, "_checks", checks)

    class Executor(emulator.Emulated):
        @staticmethod
        def target_checks():
            return checks

    from tinytrain.kernels import cuda

    monkeypatch.setattr(cuda, "executor", Executor())
    logits = np.zeros((4, 3), np.float32)
    good, bad = np.array([0, 1, 2, 1]), np.array([0, 5, 2, 1])
    _FakeEvent.log.clear()
    assert np.isnan(cuda.cross_entropy_forward(logits, bad, "mean"))  # no error yet
    for _ in range(runtime.CHECK_DEPTH - 1):  # the GPU is "behind": nothing is checked
        cuda.cross_entropy_forward(logits, good, "mean")
    assert _FakeEvent.log == []
    with pytest.raises(ValueError, match=r"1 target\(s\) outside \[0, 3\) .*first at row 1: 5"):
        cuda.cross_entropy_forward(logits, good, "mean")  # the ring came round: wait, raise
    assert _FakeEvent.log == ["wait"]
    for e in checks.events:
        e.done = True
    cuda.cross_entropy_forward(logits, good, "mean")  # reported once, not again
    cuda.cross_entropy_forward(logits, bad, "sum")
    for e in checks.events:  # the GPU catches up (events complete in stream order)
        e.done = True
    with pytest.raises(ValueError, match="outside"):  # a finished bad call: the next one raises
        cuda.cross_entropy_forward(logits, good, "mean")
    cuda.cross_entropy_forward(logits, bad, "none")
    with pytest.raises(ValueError, match="outside"):  # or check_errors(), which waits
        cuda.check_errors()
    cuda.check_errors()  # and then all is clean


def test_a_background_compilation_is_the_one_launches_wait_for(monkeypatch):
    """compile_in_background starts compiling the module; a launch that needs it meanwhile
    waits for that compilation instead of starting a second one (NVRTC is ~1 s cold)."""
    import threading
    import time

    from tinytrain.kernels.cuda import runtime

    compiled = []

    class Module:
        def __init__(self, code, options):
            self.code, self.ready = code, False

        def get_function(self, name):
            if not self.ready:
                time.sleep(0.2)  # the compilation
                compiled.append(self.code)
                self.ready = True
            return f"<{name}>"

    class FakeCupy:
        RawModule = Module

    monkeypatch.setattr(runtime, "cupy", lambda: FakeCupy)
    monkeypatch.setattr(runtime, "_modules", {})
    monkeypatch.setattr(runtime, "_kernels", {})
    thread = runtime.compile_in_background(np.float32)
    time.sleep(0.05)  # the thread is compiling now
    got = []
    launcher = threading.Thread(target=lambda: got.append(
        runtime.kernel("conv2d", "im2col", np.dtype(np.float32), False)))
    launcher.start()
    thread.join()
    launcher.join()
    assert got == ["<im2col>"] and len(compiled) == 1
    assert "typedef int index_t;" in compiled[0] and "void im2col(" in compiled[0]


def test_linear_with_zero_features_runs_no_empty_gemm():
    """cuBLAS refuses empty matrices: ``in_features=0`` or ``out_features=0`` give zeros
    (plus the bias) without a GEMM, as the CPU and PyTorch do."""
    with emulated_kernels() as k:
        out = k.linear_forward(np.ones((5, 0), np.float32), np.ones((3, 0), np.float32),
                               np.full(3, 2.0, np.float32))
        np.testing.assert_array_equal(out, np.full((5, 3), 2.0, np.float32))
        assert k.linear_forward(np.ones((5, 4), np.float32), np.ones((0, 4), np.float32),
                                None).shape == (5, 0)
        dx, dw, db = k.linear_backward(np.ones((5, 0), np.float32), np.ones((5, 4), np.float32),
                                       np.ones((0, 4), np.float32), (True, True, True))
        assert (dx.shape, dw.shape, db.shape) == ((5, 4), (0, 4), (0,))
        assert not dx.any()


def test_every_kernel_is_found_where_its_file_says_and_nowhere_else():
    """``runtime.kernel(file, name)`` checks that ``name`` is written in ``file.cu`` before it
    compiles anything (all files are one module, so a wrong file would go unnoticed)."""
    from tinytrain.kernels.cuda import runtime

    files = sorted(runtime.SOURCE_DIR.glob("*.cu"))
    for path in files:
        for name in emulator.load(path.stem, np.float32, True).kernels:
            assert f"void {name}(" in path.read_text()
            other = next(p.stem for p in files if p != path)
            with pytest.raises(ValueError, match=f"no kernel '{name}' in {other}.cu"):
                runtime.kernel(other, name, np.float32)
