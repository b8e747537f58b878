"""The emulator itself: C semantics of the translated kernels, the checks it makes, the
subset it refuses, and that it really runs the .cu source (a wrong index there fails)."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from tinytrain.kernels import cpu
from tinytrain.kernels.cuda import emulator, plans
from tinytrain.kernels.cuda.emulator import EmulatorError, TranslationError, emulated_kernels
from tinytrain.kernels.shapes import Conv2dMeta, Pool2dMeta


def kernel(body: str, params: str = "long long* out", name: str = "k", real: str = "f32"):
    src = f'extern "C" __global__ void {name}({params})\n{{\n{textwrap.dedent(body)}\n}}\n'
    return emulator.translate(src, "test.cu", real)[name]


def run1(body: str, params: str = "long long* out", *args, n: int = 1) -> np.ndarray:
    out = np.zeros(n, np.int64)
    emulator.launch(kernel(body, params), 1, 1, (out, *args))
    return out


# --------------------------------------------------------------------------- C semantics


def test_integer_division_and_remainder_truncate_toward_zero_as_in_c():
    out = run1("out[0] = -7 / 2; out[1] = -7 % 2; out[2] = 7 / -2; out[3] = (-7) % (-2);",
               n=4)
    assert out.tolist() == [-3, -1, -3, -1]  # Python's // and % would give -4, 1, -4, -1


def test_int_arithmetic_wraps_at_32_bits_but_long_long_does_not():
    out = run1("""
        int a = 65536;
        int wrapped = a * a;
        long long b = 65536;
        out[0] = wrapped;
        out[1] = b * b;
        out[2] = (long long)a * a;
    """, n=3)
    assert out.tolist() == [0, 2**32, 2**32]


def test_the_classic_overflow_blockIdx_times_blockDim_is_unsigned_32_bit():
    """``blockIdx.x * blockDim.x`` is an unsigned int product: past 2**32 it wraps, which is
    why every kernel casts to long long first."""
    k = kernel("""
        if (threadIdx.x == 0) {
            out[blockIdx.x] = blockIdx.x * blockDim.x;
            out[2 + blockIdx.x] = (long long)blockIdx.x * blockDim.x;
        }
    """)
    out = np.zeros(4, np.int64)
    # emulate only what matters: a huge blockDim is not launchable, so call the function
    k.fn(0, 1, 2**31 + 8, 2, None, emulator._Array(out, "out", "k", emulator._Tracker()))
    assert out[1] == (2**31 + 8) % 2**32 and out[3] == 2**31 + 8


def test_signed_unsigned_comparison_converts_like_c():
    out = run1("int m = -1; unsigned int u = 1u; out[0] = m < u ? 1 : 0; out[1] = m < 1;",
               n=2)
    assert out.tolist() == [0, 1]  # -1 becomes 4294967295 against an unsigned int


def test_unsigned_arithmetic_wraps_and_shifts_logically():
    out = run1("unsigned int h = 0xffffffffu; h += 2u; out[0] = h; "
               "unsigned int g = 0x80000000u; out[1] = g >> 31; out[2] = g << 1;", n=3)
    assert out.tolist() == [1, 1, 0]


def test_size_t_and_unsigned_long_long_are_unsigned_64_bit_as_in_c():
    out = run1("""
        size_t i = blockIdx.x * blockDim.x + threadIdx.x;
        unsigned long long big = 4294967296ull;
        ptrdiff_t d = -1;
        size_t zero = 0;
        out[0] = i + 65536 * (size_t)65536;
        out[1] = big * 3;
        out[2] = d < big ? 1 : 0;
        out[3] = (long long)(zero - 1);
        out[4] = 18446744073709551615ull + 2 == 1 ? 1 : 0;
    """, n=5)
    # 2**32 fits; -1 becomes 2**64 - 1 against an unsigned long long; 0 - 1 wraps to it
    assert out.tolist() == [2**32, 3 * 2**32, 0, -1, 1]


def test_a_size_t_parameter_takes_a_uint64():
    relu = kernel("""
        for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            y[i] = x[i] > 0 ? x[i] : 0.0f;
    """, "const float* x, float* y, size_t n")
    x = np.random.default_rng(0).standard_normal(70).astype(np.float32)
    y = np.full(70, np.nan, np.float32)
    emulator.launch(relu, 2, 16, (x, y, np.uint64(70)))
    assert np.array_equal(y, np.maximum(x, 0))
    with pytest.raises(TypeError, match="must be a uint64"):
        emulator.launch(relu, 2, 16, (x, y, np.int64(70)))


def test_float_to_int_conversion_truncates_and_real_follows_the_dtype():
    k32 = kernel("real v = (real)1 / (real)3; out[0] = v;", "real* out", real="f32")
    k64 = kernel("real v = (real)1 / (real)3; out[0] = v; out[1] = (long long)(-2.7);",
                 "double* out", real="f64")
    o32, o64 = np.zeros(1, np.float32), np.zeros(2, np.float64)
    emulator.launch(k32, 1, 1, (o32,))
    emulator.launch(k64, 1, 1, (o64,))
    assert o32[0] == np.float32(1) / np.float32(3) and o64[0] == 1 / 3 and o64[1] == -2


def test_for_loop_continue_runs_the_step():
    out = run1("""
        long long s = 0;
        for (long long i = 0; i < 10; i++) {
            if (i % 2 == 0) {
                continue;
            }
            s += i;
        }
        out[0] = s;
    """)
    assert out[0] == 25


# --------------------------------------------------------------------------- checks


def test_out_of_bounds_access_names_the_thread_and_the_index():
    k = kernel("out[threadIdx.x + 1] = 1;")
    with pytest.raises(EmulatorError, match=r"thread 3 of block 0 writes out\[4\], outside "
                                            r"\[0, 4\)"):
        emulator.launch(k, 1, 4, (np.zeros(4, np.int64),))
    # threadIdx.x is unsigned: thread 0's "threadIdx.x - 1" is 4294967295, not -1
    k = kernel("out[0] = x[threadIdx.x - 1];", "long long* out, const long long* x")
    with pytest.raises(EmulatorError, match=r"thread 0 of block 0 reads x\[4294967295\]"):
        emulator.launch(k, 1, 2, (np.zeros(1, np.int64), np.zeros(2, np.int64)))


def test_a_missing_syncthreads_in_a_shared_memory_reduction_is_a_race():
    good = """
        __shared__ real partial[8];
        partial[threadIdx.x] = x[threadIdx.x];
        __syncthreads();
        for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride) {
                partial[threadIdx.x] += partial[threadIdx.x + stride];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            out[0] = partial[0];
        }
    """
    params = "real* out, const real* x"
    x, out = np.arange(8, dtype=np.float32), np.zeros(1, np.float32)
    emulator.launch(kernel(good, params), 1, 8, (out, x))
    assert out[0] == 28
    bad = good.replace("            __syncthreads();\n        }", "        }")
    assert bad != good
    with pytest.raises(EmulatorError, match=r"race on __shared__ partial\[\d\].*between the "
                                            r"same two __syncthreads"):
        emulator.launch(kernel(bad, params), 1, 8, (out, x))


def test_a_thread_leaving_before_a_barrier_is_reported():
    k = kernel("if (threadIdx.x == 0) { return; } __syncthreads(); out[threadIdx.x] = 1;")
    with pytest.raises(EmulatorError, match=r"threads \[0\] finished while threads \[1, 2\] "
                                            r"wait at __syncthreads"):
        emulator.launch(k, 1, 3, (np.zeros(3, np.int64),))


@pytest.mark.parametrize("args, message", [
    ((np.zeros(2, np.float64), np.int64(2)), r"'x' must be an array of float32, got one of "
                                             r"float64"),
    ((np.zeros((2, 2), np.float32)[:, 0], np.int64(2)), "'x' must be C-contiguous"),
    ((np.zeros(2, np.float32), 2), r"'n' must be a int64 \(C type i64\), got int 2"),
    ((np.zeros(2, np.float32), np.int32(2)), r"'n' must be a int64 .*got int32"),
    ((np.float32(0), np.int64(1)), r"'x' must be an array of float32, got float32"),
])
def test_arguments_must_match_the_c_signature_exactly(args, message):
    """The mistakes that make a real GPU compute garbage: a float64 array for a float*, a
    strided view, a Python int (or an int32) where a long long is expected."""
    k = kernel("x[0] = 1;", "float* x, long long n")
    with pytest.raises(TypeError, match=message):
        emulator.launch(k, 1, 1, args)


def test_unwritten_outputs_stay_nan_in_the_emulated_kernel_set(monkeypatch):
    """A kernel that skips elements leaves the poison of a fresh buffer, so it fails."""
    src = (emulator.SOURCE_DIR / "layers.cu").read_text().replace(
        "y[i] = v < 0 ? (real)0 : v;", "if (i > 0) { y[i] = v < 0 ? (real)0 : v; }")
    monkeypatch.setitem(emulator._cache, ("layers", "f32", "i32"),
                        emulator.translate(src, "layers.cu", "f32", "i32"))
    with emulated_kernels() as k:
        y = k.relu_forward(np.ones(5, np.float32))
    assert np.isnan(y[0]) and (y[1:] == 1).all()


@pytest.mark.parametrize("body, message", [
    ("float* p = out; p[0] = 1;", "expected a variable name"),
    ("out[0] = x + 1;", "pointer"),
    ("out[threadIdx.y] = 1;", r"only one-dimensional grids"),
    ("#define N 4\nout[0] = N;", "preprocessor lines are not supported"),
    ("out[0] = printf(1);", r"call of 'printf': not a math builtin"),
    ("x[0] = 1;", "write through the const pointer 'x'"),
    ("out[0] = 1.5 % 2;", "operator '%' on floating-point values"),
    ("auto i = 1; out[0] = i;", r"'auto' is not in the subset of CUDA C .*emulator\.py"),
    ("int i = 0; do { i++; } while (i < 3); out[0] = i;", r"'do' is not in the subset"),
])
def test_code_outside_the_subset_is_refused_with_its_line(body, message):
    with pytest.raises(TranslationError, match=message):
        kernel(body, "float* out, const float* x")


# --------------------------------------------------------------------------- mutations

# Plausible index bugs, one per kernel: each must make the CPU comparison fail, which shows
# the emulator runs the very text of the .cu files.
MUTATIONS = [
    ("conv2d", "index_t w = ow * sw - pw + kj;", "index_t w = ow * sw + kj;"),
    ("conv2d", "index_t h = oh * sh - ph + ki;", "index_t h = oh * sh - ph + ki + 0 * H;"
     " if (h == 0) { h = 1; }"),
    ("conv2d", "for (index_t ki = h + ph - oh_last * sh; ki < Kh", "for (index_t ki = 0; ki < Kh"),
    ("conv2d", "index_t ow = ow_last;", "index_t ow = ow_last - 1;"),
    ("conv2d", "real v = y[c * N * P + n * P + p];", "real v = y[n * C * P + c * P + p];"),
    ("conv2d", "if (h >= 0 && h < H && w >= 0 && w < W)", "if (h >= 0 && h <= H && w >= 0)"),
    ("conv2d", "dx[n0 * C * H * W + i] = sum;", "dx[i] = sum;"),
    ("conv2d", "rows[i] = dy[(n * C + c) * P + (j - n * P)];",
     "rows[i] = dy[(n * C + c) * P + j];"),
    ("conv2d", "s += part[t * Cout * Kb + i];", "s += part[t * Cout * K + i];"),
    ("conv2d", "col[C * Kh * Kw * cols + j] = 1;", "col[C * Kh * Kw * cols + j] = 0.5;"),
    ("pool", "if (k == ki * Kw + kj) {", "if (k == kj * Kh + ki) {"),
    ("pool", "index_t rows = min(h0 + Kh, H) - max(h0, (index_t)0);", "index_t rows = Kh;"),
]


def differs_from_cpu(k, x, stride, rng) -> bool:
    """Conv forward and backward, max- and avg-pool backward: does any differ from the CPU?"""
    w = rng.standard_normal((3, 2, 3, 3))
    b = rng.standard_normal(3)
    meta = Conv2dMeta(x.shape, w.shape, stride, 1, (3,))
    pm = Pool2dMeta.from_shape(x.shape, 3, stride, 1)
    dy, pdy = rng.standard_normal(meta.output_shape), rng.standard_normal(pm.output_shape)
    pairs = [
        (k.conv2d_forward(x, w, b, meta), cpu.conv2d_forward(x, w, b, meta)),
        *zip(k.conv2d_backward(dy, x, w, meta, (True, True, True)),
             cpu.conv2d_backward(dy, x, w, meta, (True, True, True))),
        (k.max_pool2d_backward(pdy, x, pm), cpu.max_pool2d_backward(pdy, x, pm)),
        (k.avg_pool2d_forward(x, pm, False), cpu.avg_pool2d_forward(x, pm, False)),
    ]
    return any(not np.allclose(a, r) for a, r in pairs)


@pytest.mark.parametrize("file, old, new", MUTATIONS, ids=lambda v: v if len(v) < 12 else None)
def test_a_wrong_index_in_the_source_is_caught(monkeypatch, file, old, new):
    src = (emulator.SOURCE_DIR / f"{file}.cu").read_text()
    assert src.count(old) >= 1, f"mutation target not found: {old}"
    monkeypatch.setitem(emulator._cache, (file, "f64", "i32"),
                        emulator.translate(src.replace(old, new), f"{file}.cu", "f64", "i32"))
    monkeypatch.setattr(plans, "COL_BYTES", 2 * 2 * 9 * 15 * 8)  # two images per chunk
    monkeypatch.setattr(plans, "SLICE_COLS", 4)  # dW in slices
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 5, 6))
    with emulated_kernels() as k:
        caught = []
        for stride in (1, 2, (2, 1)):
            try:
                caught.append(differs_from_cpu(k, x, stride, rng))
            except EmulatorError:  # out of bounds, a race: caught as well
                caught.append(True)
    assert any(caught), f"the mutation {new!r} went unnoticed"


def test_the_unmutated_sources_agree_with_the_cpu_on_the_mutation_cases():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 5, 6))
    with emulated_kernels() as k:
        assert not any(differs_from_cpu(k, x, s, rng) for s in (1, 2, (2, 1)))


def test_every_kernel_of_every_source_is_exercised_by_the_emulator_tests():
    """A kernel added to a .cu file without a plan (and so without emulator coverage) fails."""
    used = set(re.findall(r'"(\w+\.?\w*)", "(\w+)"',
                          (emulator.SOURCE_DIR / "plans.py").read_text()))
    for path in emulator.SOURCE_DIR.glob("*.cu"):
        for name in emulator.load(path.stem).kernels:
            assert (path.stem, name) in used, f"{path.name}: {name} is never launched by a plan"
