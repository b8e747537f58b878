"""The CUDA kernel set on a real GPU (marked ``cuda``: skipped cleanly without CuPy and a GPU).

Every kernel against the CPU kernel set on the CPU tests' configuration grid (float32 and
float64), float64 gradients against finite differences computed on the GPU, bit-identical
reruns, 10 training steps CPU vs GPU from the same weights, the asynchronous check of
cross-entropy targets, a training step that does not wait for the GPU, and the GPU-resident
DataLoader. Launches run with ``runtime.CHECK`` on (arguments checked against the C
signatures, a sync after each step so a failing kernel is named where it failed), except in
the test that checks there is no sync.

Run on the GPU machine with ``python3 -m pytest -m cuda -q tests`` (tools/gpu_session.sh).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import numpy as np
import pytest

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain.kernels import cpu
from tinytrain.kernels.shapes import Conv2dMeta, Pool2dMeta

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not tt.cuda_is_available(), reason="needs CuPy and an NVIDIA GPU"),
]


@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


@pytest.fixture(scope="module")
def k():
    from tinytrain.kernels import cuda

    return cuda


@pytest.fixture(autouse=True)
def checked_launches(monkeypatch):
    from tinytrain.kernels.cuda import runtime

    monkeypatch.setattr(runtime, "CHECK", True)


def close(ours, ref, what, rtol):
    """``ours`` (CuPy or NumPy) against the CPU's ``ref``: shape, dtype, values."""
    ours = ours.get() if hasattr(ours, "get") else np.asarray(ours)
    ref = np.asarray(ref)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} on the GPU, {ref.shape} on CPU"
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} on the GPU, {ref.dtype} on CPU"
    atol = rtol * max(1.0, float(np.abs(ref).max(initial=0)))
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=atol, err_msg=what)


RTOL = {np.float32: 2e-5, np.float64: 1e-12}


# --------------------------------------------------------------------------- compilation


def test_every_kernel_compiles_and_loads_for_both_dtypes():
    from tinytrain.kernels.cuda import emulator, runtime

    names = runtime.compile_all()
    expected = {f"{p.stem}.{n}" for p in emulator.SOURCE_DIR.glob("*.cu")
                for n in emulator.load(p.stem).kernels}
    assert set(names) == expected


def test_nvrtc_of_this_machine_compiles_the_sources_to_ptx():
    from tinytrain.kernels.cuda import nvrtc

    ptx = nvrtc.compile_sources()
    assert len(ptx) == 20 and all(".entry" in text for text in ptx.values())


# --------------------------------------------------------------------------- convolution

KERNELS = [1, 2, 3, (2, 3)]
STRIDES = [1, 2, (2, 1)]
GRID = list(itertools.product([1, 3], [1, 3], [1, 4], [0, 1, 2], [True, False], [(5, 7), (6, 8)]))


def conv_on_both(k, cp, rng, n, c_in, c_out, kernel, stride, padding, bias, hw, dtype):
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    x = rng.standard_normal((n, c_in, *hw)).astype(dtype)
    w = rng.standard_normal((c_out, c_in, kh, kw)).astype(dtype)
    b = rng.standard_normal(c_out).astype(dtype) if bias else None
    meta = Conv2dMeta(x.shape, w.shape, stride, padding, None if b is None else b.shape)
    dy = rng.standard_normal(meta.output_shape).astype(dtype)
    what = (f"conv2d N={n} Cin={c_in} Cout={c_out} k={kernel} s={stride} p={padding} "
            f"bias={bias} {hw} {np.dtype(dtype).name}")
    g = [None if a is None else cp.asarray(a) for a in (x, w, b, dy)]
    rtol = RTOL[dtype]
    close(k.conv2d_forward(g[0], g[1], g[2], meta), cpu.conv2d_forward(x, w, b, meta),
          "y of " + what, rtol)
    needs = (True, True, bias)
    ours = k.conv2d_backward(g[3], g[0], g[1], meta, needs)
    for name, a, r in zip(("dx", "dw", "db"), ours, cpu.conv2d_backward(dy, x, w, meta, needs)):
        if r is not None:
            close(a, r, f"{name} of {what}", rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", STRIDES, ids=str)
@pytest.mark.parametrize("kernel", KERNELS, ids=str)
def test_conv2d_matches_the_cpu_kernels_over_the_grid(k, cp, kernel, stride, dtype):
    rng = np.random.default_rng(KERNELS.index(kernel) * 10 + STRIDES.index(stride))
    for case in GRID:
        conv_on_both(k, cp, rng, *case[:3], kernel, stride, *case[3:], dtype)


def test_conv2d_batch_chunks_and_large_layers(k, cp, monkeypatch):
    """Chunks of a few images (dW summed over chunks by cuBLAS's beta), and the shapes of
    the course's models at batch 64."""
    from tinytrain.kernels.cuda import plans

    rng = np.random.default_rng(0)
    monkeypatch.setattr(plans, "COL_BYTES", 3 * 25 * 28 * 28 * 4)
    conv_on_both(k, cp, rng, 10, 1, 16, 5, 1, 2, True, (28, 28), np.float32)
    monkeypatch.undo()
    conv_on_both(k, cp, rng, 64, 16, 32, 5, 1, 2, True, (14, 14), np.float32)  # convnet conv2
    conv_on_both(k, cp, rng, 64, 16, 32, 3, 1, 0, True, (26, 26), np.float32)  # cnn conv2


def test_the_64_bit_index_kernels_match_the_cpu_too(k, cp, monkeypatch):
    """Launches use int indices whenever they fit (every test shape here does); the long long
    variant, which a launch beyond 2**31 elements takes, must compute the same thing."""
    from tinytrain.kernels.cuda import plans

    monkeypatch.setattr(plans, "narrow", lambda arrays, threads: False)
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        conv_on_both(k, cp, rng, 3, 2, 4, (2, 3), (2, 1), 1, True, (6, 8), dtype)
        conv_on_both(k, cp, rng, 64, 1, 16, 5, 1, 2, True, (28, 28), dtype)  # dW in slices
        x = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
        meta = Pool2dMeta.from_shape(x.shape, 2)
        dy = rng.standard_normal(meta.output_shape).astype(dtype)
        close(k.max_pool2d_backward(cp.asarray(dy), cp.asarray(x), meta),
              cpu.max_pool2d_backward(dy, x, meta), "max pool dx, 64-bit", RTOL[dtype])


def test_conv2d_refuses_mixed_dtypes_with_a_clear_error(k, cp):
    x, w = cp.ones((1, 1, 3, 3), cp.float64), cp.ones((1, 1, 2, 2), cp.float32)
    with pytest.raises(TypeError, match="float32 or float64 operands of one dtype"):
        k.conv2d_forward(x, w, None, Conv2dMeta(x.shape, w.shape))


# --------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooling_matches_the_cpu_kernels_over_the_grid(k, cp, dtype):
    rng = np.random.default_rng(1)
    grid = itertools.product([1, 2, 3, (2, 3)], [None, 1, 2, (2, 1)], [0, 1], [(5, 7), (6, 8)])
    for kernel, stride, padding, hw in grid:
        kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        if 2 * padding > min(kh, kw):
            continue
        x = rng.integers(-3, 4, (2, 3, *hw)).astype(dtype)  # ties: the first maximum wins
        meta = Pool2dMeta.from_shape(x.shape, kernel, stride, padding)
        dy = rng.standard_normal(meta.output_shape).astype(dtype)
        gx, gdy = cp.asarray(x), cp.asarray(dy)
        what = f"kernel {kernel} stride {stride} padding {padding} {hw} {np.dtype(dtype).name}"
        out, am = k.max_pool2d_forward(gx, meta)
        ref_out, ref_am = cpu.max_pool2d_forward(x, meta)
        close(out, ref_out, "max pool " + what, 0)
        close(am, ref_am, "arg-max " + what, 0)
        close(k.max_pool2d_backward(gdy, gx, meta), cpu.max_pool2d_backward(dy, x, meta),
              "max pool dx " + what, RTOL[dtype])
        for cip in (True, False):
            close(k.avg_pool2d_forward(gx, meta, cip), cpu.avg_pool2d_forward(x, meta, cip),
                  f"avg pool (count_include_pad={cip}) " + what, RTOL[dtype])
            close(k.avg_pool2d_backward(gdy, meta, cip), cpu.avg_pool2d_backward(dy, meta, cip),
                  f"avg pool dx (count_include_pad={cip}) " + what, RTOL[dtype])


# --------------------------------------------------------------------------- layers and loss


def test_relu_dropout_linear_match_the_cpu(k, cp):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    gx = cp.asarray(x)
    close(k.relu_forward(gx), cpu.relu_forward(x), "relu", 0)
    close(k.relu_backward(gx, k.relu_forward(gx)), cpu.relu_backward(x, cpu.relu_forward(x)),
          "relu backward", 0)
    for p in (0.25, 0.5):
        close(k.dropout_forward(gx, p, 12345), cpu.dropout_forward(x, p, 12345),
              f"dropout p={p}: the GPU must drop exactly the CPU's elements", 0)
        close(k.dropout_backward(gx, p, 99), cpu.dropout_backward(x, p, 99), "dropout bwd", 0)
    w, b = rng.standard_normal((10, 128)).astype(np.float32), rng.standard_normal(10)
    b = b.astype(np.float32)
    close(k.linear_forward(gx, cp.asarray(w), cp.asarray(b)), cpu.linear_forward(x, w, b),
          "linear", RTOL[np.float32])
    g = rng.standard_normal((64, 10)).astype(np.float32)
    ours = k.linear_backward(cp.asarray(g), gx, cp.asarray(w), (True, True, True))
    for name, a, r in zip("xwb", ours, cpu.linear_backward(g, x, w, (True, True, True))):
        close(a, r, f"linear d{name}", RTOL[np.float32])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_the_cpu(k, cp, reduction):
    rng = np.random.default_rng(3)
    logits = (4 * rng.standard_normal((300, 10))).astype(np.float32)
    t = rng.integers(0, 10, 300)
    close(k.cross_entropy_forward(cp.asarray(logits), cp.asarray(t), reduction),
          np.asarray(cpu.cross_entropy_forward(logits, t, reduction), np.float32),
          "cross-entropy", 1e-5)
    g = np.asarray(rng.standard_normal(300 if reduction == "none" else ()), np.float32)
    close(k.cross_entropy_backward(cp.asarray(logits), cp.asarray(t), cp.asarray(g), reduction),
          cpu.cross_entropy_backward(logits, t, g, reduction), "cross-entropy grad", 1e-5)


def test_cross_entropy_on_the_gpu_ignores_the_default_ignore_index(cp):
    """F.cross_entropy with GPU targets holding -100 takes the fused kernel and agrees with
    PyTorch (loss and gradient); no deferred target error follows."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((50, 7)).astype(np.float32)
    t = rng.integers(0, 7, 50)
    t[::3] = -100
    x = tt.tensor(cp.asarray(logits), requires_grad=True)
    loss = tt.nn.functional.cross_entropy(x, tt.tensor(cp.asarray(t)))
    loss.backward()
    xr = torch.tensor(logits, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(xr, torch.tensor(t))
    ref.backward()
    close(loss._data, ref.detach().numpy(), "loss", 1e-5)
    close(x.grad._data, xr.grad.numpy(), "grad", 1e-5)
    tt.kernels.cuda.check_errors()


def test_bad_targets_on_the_gpu_raise_a_few_calls_later_without_a_sync(k, cp):
    """The bad call returns a NaN loss at once; a later call (at most CHECK_DEPTH later) or
    check_errors() raises the ValueError, naming the row and the value."""
    logits = cp.zeros((4, 3), cp.float32)
    good, bad = cp.asarray([0, 1, 2, 1]), cp.asarray([0, 5, 2, -1])
    k.check_errors()
    loss = k.cross_entropy_forward(logits, bad, "mean")
    assert np.isnan(float(loss))
    with pytest.raises(ValueError, match=r"2 target\(s\) outside \[0, 3\) .*first at row 1: 5"):
        for _ in range(k.CHECK_DEPTH + 1):
            k.cross_entropy_forward(logits, good, "mean")
    k.cross_entropy_forward(logits, bad, "sum")
    with pytest.raises(ValueError, match=r"outside \[0, 3\)"):
        k.check_errors()
    k.cross_entropy_forward(logits, good, "mean")
    k.check_errors()  # reported once, then clean


def test_bad_targets_from_the_host_raise_at_once(cp):
    logits = tt.zeros(3, 4, device="cuda")
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 4\), got values from 0 to 4"):
        F.cross_entropy(logits, np.array([0, 4, 1]))


def test_fused_optimizer_updates_match_the_cpu(k, cp):
    rng = np.random.default_rng(4)
    p0 = rng.standard_normal(1000).astype(np.float32)
    for wd in (0.0, 0.01):
        gp, gm, gv = cp.asarray(p0), cp.zeros(1000, cp.float32), cp.zeros(1000, cp.float32)
        rp, rm, rv = p0.copy(), np.zeros(1000, np.float32), np.zeros(1000, np.float32)
        for step in range(1, 6):
            g = rng.standard_normal(1000).astype(np.float32)
            k.adam_step(gp, cp.asarray(g), gm, gv, step, 1e-2, (0.9, 0.999), 1e-8, wd)
            cpu.adam_step(rp, g, rm, rv, step, 1e-2, (0.9, 0.999), 1e-8, wd)
        close(gp, rp, f"Adam (weight decay {wd}) after 5 steps", 1e-6)
    for momentum, nesterov in [(0.0, False), (0.9, False), (0.9, True)]:
        gp, rp = cp.asarray(p0), p0.copy()
        gb = cp.empty_like(gp) if momentum else None
        rb = np.empty_like(rp) if momentum else None
        for first in (True, False, False):
            g = rng.standard_normal(1000).astype(np.float32)
            k.sgd_step(gp, cp.asarray(g), gb, 0.1, momentum, 0.0, 0.001, nesterov, first)
            cpu.sgd_step(rp, g, rb, 0.1, momentum, 0.0, 0.001, nesterov, first)
        close(gp, rp, f"SGD momentum {momentum} nesterov {nesterov}", 1e-6)


# --------------------------------------------------------------------------- gradcheck


def numerical_grad(loss, a, eps=1e-6):
    """Central differences of the scalar ``loss()`` w.r.t. every element of the CuPy ``a``."""
    g = np.zeros(a.shape)
    flat = a.reshape(-1)
    for i in range(flat.size):
        old = float(flat[i])
        flat[i] = old + eps
        up = loss()
        flat[i] = old - eps
        down = loss()
        flat[i] = old
        g.reshape(-1)[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("op", ["conv2d", "max_pool2d", "avg_pool2d", "linear+relu+ce"])
def test_float64_gradients_on_the_gpu_match_finite_differences(cp, op):
    rng = np.random.default_rng(5)

    def leaf(*shape):
        return tt.tensor(rng.standard_normal(shape), device="cuda", requires_grad=True)

    x, w, b = leaf(2, 2, 5, 6), leaf(3, 2, 3, 2), leaf(3)
    wl, bl = leaf(4, 60), leaf(4)
    t = tt.tensor(np.array([1, 3]), device="cuda")
    ops = {
        "conv2d": (lambda: F.conv2d(x, w, b, stride=(2, 1), padding=1), [x, w, b]),
        "max_pool2d": (lambda: F.max_pool2d(x, 3, 2, 1), [x]),
        "avg_pool2d": (lambda: F.avg_pool2d(x, (2, 3), 1, 1), [x]),
        "linear+relu+ce": (lambda: F.cross_entropy(F.linear(x.reshape(2, 60), wl, bl).relu(),
                                                   t).reshape(1), [x, wl, bl]),
    }
    fn, params = ops[op]
    out = fn()
    probe = tt.tensor(rng.standard_normal(out.shape), device="cuda")
    (out * probe).sum().backward()

    def loss():
        with tt.no_grad():
            return (fn() * probe).sum().item()

    for p in params:
        numeric = numerical_grad(loss, p._data)  # (the CuPy array, written)
        np.testing.assert_allclose(p.grad.numpy(), numeric, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{op}: the gradient of a {p.shape} operand")


# --------------------------------------------------------------------------- training


def mini_batches(n=10, batch=64):
    from tinytrain.data import MNISTMini

    ds = MNISTMini(train=True)
    return [ds.get_batch(np.arange(i * batch, (i + 1) * batch)) for i in range(n)]


def train_steps(model_name, device, dtype, optimizer, batches, seed=0):
    """Losses and final parameters of ``len(batches)`` steps from ``tt.manual_seed(seed)``."""
    from tinytrain.models import build_model

    tt.manual_seed(seed)
    model = build_model(model_name).to(device, dtype)
    params = list(model.parameters())
    opt = (tt.optim.Adam(params, lr=2e-3) if optimizer == "adam"
           else tt.optim.SGD(params, lr=0.05, momentum=0.9))
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(tt.tensor(x, dtype=dtype, device=device)),
                               tt.tensor(y, device=device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), [p.numpy() for p in params]


@pytest.mark.parametrize("model, optimizer, dtype, tol, param_tol", [
    ("convnet", "sgd", np.float64, 1e-9, 1e-9),
    ("convnet", "adam", np.float64, 1e-9, 1e-9),
    ("cnn", "sgd", np.float64, 1e-9, 1e-9),
    # float32: Adam moves a parameter by up to lr = 2e-3 per step whatever the size of its
    # gradient, so a gradient at rounding level may step either way: allow a few steps
    ("convnet", "adam", np.float32, 1e-3, 1e-2),
])
def test_ten_training_steps_on_the_gpu_follow_the_cpu(model, optimizer, dtype, tol, param_tol):
    """Same initial weights, same batches, same dropout masks (the counter hash): the GPU's
    losses stay within ``tol`` and its parameters within ``param_tol`` of the CPU's (in
    float64 only the summation order of the GEMMs differs)."""
    batches = mini_batches()
    cpu_losses, cpu_params = train_steps(model, "cpu", dtype, optimizer, batches)
    gpu_losses, gpu_params = train_steps(model, "cuda", dtype, optimizer, batches)
    assert cpu_losses[-1] < cpu_losses[0], "the CPU run did not learn: the comparison is moot"
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=tol, atol=tol,
                               err_msg=f"{model} {optimizer} {np.dtype(dtype).name}: losses")
    for i, (g, c) in enumerate(zip(gpu_params, cpu_params)):
        np.testing.assert_allclose(g, c, rtol=param_tol, atol=param_tol,
                                   err_msg=f"{model} {optimizer}: parameter {i} {c.shape}")


def test_two_gpu_runs_are_bit_identical():
    """Gathers instead of atomics, fixed-order reductions, deterministic cuBLAS: the same
    run twice gives the same bits."""
    batches = mini_batches(5)
    a_losses, a_params = train_steps("convnet", "cuda", np.float32, "adam", batches)
    b_losses, b_params = train_steps("convnet", "cuda", np.float32, "adam", batches)
    np.testing.assert_array_equal(a_losses, b_losses)
    for a, b in zip(a_params, b_params):
        np.testing.assert_array_equal(a, b)


def test_a_training_step_does_not_wait_for_the_gpu(cp, monkeypatch):
    """Queue ~0.5 s of GPU work, then time one training step on the host: if anything in the
    step waited for the GPU (a .item(), a host-side check of the targets, a copy back), it
    would take as long as the queued work."""
    from tinytrain.kernels.cuda import runtime
    from tinytrain.models import build_model

    monkeypatch.setattr(runtime, "CHECK", False)
    spin = cp.RawKernel(r"""
        extern "C" __global__ void spin(long long cycles) {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) { }
        }""", "spin")
    tt.manual_seed(0)
    model = build_model("convnet").to("cuda")
    opt = tt.optim.Adam(model.parameters(), lr=2e-3)
    x, y = mini_batches(1)[0]
    x, y = tt.tensor(x, device="cuda"), tt.tensor(y, device="cuda")

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):  # compile every kernel, fill CuPy's memory pool
        step()
    cp.cuda.Device().synchronize()
    spin((1,), (1,), (np.int64(10**9),))  # ~0.5 s at the H200's ~2 GHz
    t0 = time.perf_counter()
    step()
    host = time.perf_counter() - t0
    cp.cuda.Device().synchronize()
    total = time.perf_counter() - t0
    assert total > 0.2, f"the spin kernel ran only {total:.3f} s; cannot tell"
    assert host < total / 3, (f"a training step took {host:.3f} s on the host while the GPU "
                              f"was busy for {total:.3f} s: something in it waits for the GPU")


def test_the_data_set_stays_on_the_gpu_and_batches_match_the_cpu(cp):
    from tinytrain.data import DataLoader, MNISTMini

    ds = MNISTMini(train=False)
    gpu = DataLoader(ds, batch_size=128, shuffle=True, seed=1, device="cuda")
    host = DataLoader(ds, batch_size=128, shuffle=True, seed=1)
    for (x, y), (xc, yc) in zip(gpu, host, strict=True):
        assert x.device == y.device == "cuda"
        np.testing.assert_array_equal(x.numpy(), xc.numpy())
        np.testing.assert_array_equal(y.numpy(), yc.numpy())


def test_train_command_on_the_gpu(tmp_path):
    """`python -m tinytrain.train --device cuda` end to end on the bundled mini set."""
    r = subprocess.run([sys.executable, "-m", "tinytrain.train", "--device", "cuda",
                        "--dataset", "mnist-mini", "--save", str(tmp_path / "ck.npz")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    acc = float(r.stdout.split("accuracy ")[-1].split("%")[0])
    assert acc > 85, r.stdout


@pytest.mark.parametrize("make_opt", [lambda ps: tt.optim.Adam(ps, lr=0.1, weight_decay=0.01),
                                      lambda ps: tt.optim.SGD(ps, lr=0.1, momentum=0.9)],
                         ids=["adam", "sgd"])
def test_an_optimizer_steps_a_non_contiguous_parameter_on_the_gpu_as_on_the_cpu(make_opt):
    rng = np.random.default_rng(0)
    w, g = rng.standard_normal((6, 4), dtype=np.float32), rng.standard_normal((4, 6),
                                                                               dtype=np.float32)
    params = {}
    for device in ("cpu", "cuda"):
        base = tt.tensor(w, device=device)
        p = tt.nn.Parameter(base.T)  # a transposed view: not contiguous
        opt = make_opt([p])
        for _ in range(3):
            p.grad = tt.tensor(g, device=device)
            opt.step()
        params[device] = (p.numpy(), base.numpy())
    np.testing.assert_allclose(params["cuda"][0], params["cpu"][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["cuda"][1], params["cpu"][0].T, rtol=1e-5, atol=1e-6)
    assert not np.allclose(params["cpu"][0], w.T)  # it moved


def test_relu_of_integers_on_the_gpu_as_on_the_cpu():
    x = np.array([-3, 0, 5], dtype=np.int64)
    out = tt.tensor(x, device="cuda").relu()
    assert out.dtype == tt.int64 and out.device == "cuda"
    np.testing.assert_array_equal(out.numpy(), tt.tensor(x).relu().numpy())


# ------------------------------------------------------------------ found by client programs


@pytest.mark.parametrize("kwargs", [{"weight": "ones"}, {"label_smoothing": 0.1},
                                    {"ignore_index": 3}])
def test_cross_entropy_slow_paths_refuse_gpu_targets_out_of_range(kwargs):
    logits = tt.randn(4, 5, device="cuda")
    targets = tt.tensor([0, 1, 7, 2], device="cuda")
    if kwargs.get("weight") == "ones":
        kwargs = {"weight": tt.ones(5, device="cuda")}
    with pytest.raises(IndexError, match=r"targets must lie in \[0, 5\)"):
        F.cross_entropy(logits, targets, **kwargs)


@pytest.mark.parametrize("index", [[1, 7], (slice(None), [0, 4]), (Ellipsis, [-5])])
def test_integer_array_indices_out_of_range_raise_on_the_gpu_as_on_the_cpu(index):
    for device in ("cpu", "cuda"):
        x = tt.zeros(3, 4, device=device)
        with pytest.raises(IndexError):
            x[index]
        with pytest.raises(IndexError):
            x[tt.tensor(index, device=device) if isinstance(index, list) else index] = 1.0
    x = tt.arange(12.0, device="cuda").reshape(3, 4)
    assert x[[2, -1]].tolist() == [[8.0, 9.0, 10.0, 11.0]] * 2


def test_cuda_n_is_this_process_gpu():
    from tinytrain import cuda

    here = cuda.current_device()
    assert tt.ones(2).to(f"cuda:{here}").device == "cuda"
    assert tt.ones(2).cuda(here).device == "cuda"
    other = (here + 1) % max(cuda.device_count(), 2)
    if other >= cuda.device_count():
        with pytest.raises(ValueError, match="no GPU"):
            cuda.set_device(other)
    with pytest.raises(ValueError, match="one GPU per process"):
        tt.ones(2).to(f"cuda:{other}")


@pytest.mark.parametrize("in_f, out_f", [(0, 3), (4, 0)])
def test_linear_with_zero_features_on_the_gpu_matches_the_cpu(in_f, out_f):
    results = []
    for device in ("cpu", "cuda"):
        x = tt.ones(5, in_f, device=device, requires_grad=True)
        layer = tt.nn.Linear(in_f, out_f).to(device)
        with tt.no_grad():
            layer.weight.fill_(0.5)
            layer.bias.fill_(0.25)
        y = layer(x)
        y.sum().backward()
        results.append([t.cpu().numpy() for t in (y, x.grad, layer.weight.grad,
                                                   layer.bias.grad)])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_cpu_0d_tensors_join_gpu_ops_like_torch():
    x = tt.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    s = tt.tensor(3.0, requires_grad=True)  # on the CPU
    y = x * s + tt.tensor(1.0) - tt.maximum(x, tt.tensor(1.5))
    assert y.device == "cuda"
    y.sum().backward()
    assert s.grad.device == "cpu" and s.grad.item() == 3.0
    assert x.grad.tolist() == [3.0, 2.0]
    assert (x == tt.tensor(2.0)).tolist() == [False, True]
    with pytest.raises(RuntimeError, match="one device"):
        x + tt.ones(2)  # not 0-d: refused, as PyTorch


def test_fill_and_zero_of_gpu_tensors_and_views():
    x = tt.zeros(3, 4, device="cuda")
    x[1].fill_(2.0)
    x[:, 0].zero_()
    x.t()[3].fill_(5)
    assert x.cpu().numpy().tolist() == [[0, 0, 0, 5], [0, 2, 2, 5], [0, 0, 0, 5]]
    assert tt.ones(0, 3, device="cuda").fill_(1.0).shape == (0, 3)


def test_an_optimizer_state_left_behind_by_a_model_move_is_named():
    model = tt.nn.Linear(3, 2)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(tt.ones(4, 3)).sum().backward()
    opt.step()
    model.to("cuda")
    opt.zero_grad()
    model(tt.ones(4, 3, device="cuda")).sum().backward()
    with pytest.raises(RuntimeError, match="'momentum_buffer'.*on cpu, the parameter on cuda"):
        opt.step()
    opt.load_state_dict(opt.state_dict())  # moves the state to the parameters, as PyTorch
    opt.step()


def test_pytorch_ddp_device_spellings_name_this_process_gpu():
    from tinytrain import cuda

    here = cuda.current_device()
    cuda.set_device(tt.device("cuda", here))  # the object keeps its index
    assert cuda.current_device() == here
    with pytest.raises(ValueError, match="with an index"):
        cuda.set_device("cuda")  # names no GPU, as in PyTorch (it used to move to GPU 0)
    assert cuda.current_device() == here
    assert tt.ones(2).to(here).device == "cuda"  # model.to(rank), as the DDP tutorial
    assert next(tt.nn.Linear(2, 2).to(here).parameters()).device == "cuda"
    device = tt.device("cuda", cuda.device_count())  # built before set_device: no error yet
    with pytest.raises(ValueError, match="one GPU per process"):
        tt.zeros(2, device=device)
