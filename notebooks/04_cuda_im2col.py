# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 4 — Convolution on the GPU: im2col, cuBLAS and col2im, kernels written by hand
#
# Chapter 3's convolution is a good CPU algorithm: a few hundred cache-sized matrix products
# per layer. On a GPU the same algorithm is a bad one: thousands of tiny launches, each too
# small to fill a chip with 132 multiprocessors. A GPU wants a few *large* operations, each
# spread over hundreds of thousands of threads. This chapter gives tinytrain its own CUDA
# kernels, written in CUDA C, and builds the GPU convolution the classic way:
#
# * **im2col** copies every input patch into one big column matrix, so that the whole
#   convolution of a batch becomes **one GEMM**, done by cuBLAS;
# * the backward pass is two more GEMMs and **col2im**, written as a *gather* so that it needs
#   no atomics and gives the same bits every run; the bias gradient rides in the dW GEMM (and,
#   when the weight is frozen, is a **block reduction** of its own).
#
# **What you will build / learn**
#
# 1. The CUDA thread model (grid, block, thread, warp), and an *emulator* that runs a kernel's
#    CUDA C source on the CPU, thread by thread — so every index in this chapter is checked,
#    GPU or not.
# 2. A first kernel: the bounds check and the grid-stride loop.
# 3. im2col derived, checked against chapter 3; why its layout makes the writes *coalesced*.
# 4. cuBLAS's GEMM (and its column-major convention), TF32 versus float32.
# 5. Backward: dW as one GEMM, dX through col2im as a gather, not a scatter with `atomicAdd`,
#    and why the order of a floating-point sum matters; the bias gradient as a block reduction.
# 6. The whole layer against the CPU kernels and PyTorch; timing done right; one epoch.
# 7. The bugs that cost GPU programmers their evenings: a float64 array in a `float*`, a
#    strided view, a 32-bit index that overflows.
#
# The package code is in [`tinytrain/kernels/cuda/`](../tinytrain/kernels/cuda): the `.cu`
# sources, `plans.py` (each op as a list of launches), `runtime.py` (the only code that talks
# to the GPU) and `emulator.py`. **Without a GPU** every GPU cell says what it skips; the
# emulator, the index checks and the compilation to PTX still run.

# %%
# %matplotlib inline
import gc
import re
import textwrap
import time

import matplotlib.pyplot as plt
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain.kernels import cpu
from tinytrain.kernels.cuda import emulator, nvrtc, plans, runtime
from tinytrain.kernels.cuda.emulator import EmulatorError, emulated_kernels
from tinytrain.kernels.shapes import Conv2dMeta

try:
    import torch  # the reference, when installed (the package never uses it)
except ImportError:
    torch = None

np.set_printoptions(precision=3, suppress=True, linewidth=100)
rng = np.random.default_rng(0)
GPU = tt.cuda_is_available()
if GPU:
    import cupy as cp

    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    print("GPU:", name.decode() if isinstance(name, bytes) else name)
else:
    print("No GPU here: the GPU cells will say what they skip; everything else runs on the CPU.")

# %% [markdown]
# ## 1. The thread model
#
# A CUDA **kernel** is a function that a GPU runs many times at once, once per **thread**.
# Threads come in **blocks** (up to 1024 threads; a block runs on one multiprocessor and its
# threads can share fast *shared memory* and wait for each other), and blocks form a
# **grid**. A launch `kernel<<<grid, block>>>(args)` starts `grid * block` threads; each one
# reads its coordinates from four built-in variables and computes *which element is mine*:
#
# ```c
# long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // my global index
# ```
#
# The hardware runs threads in groups of 32 called **warps**, in lock-step: the 32 threads of a
# warp execute the same instruction, each on its own data. Two consequences drive everything
# below: neighbouring threads should touch neighbouring addresses (so a warp's 32 accesses are
# served by one memory transaction), and a warp whose threads take different branches runs
# both branches, one after the other.
#
# ## 2. A first kernel, on an emulator
#
# A kernel is a pure function of `(blockIdx, threadIdx)` and memory, so a CPU can run it: call
# it once per thread. tinytrain's kernels are written in a small subset of CUDA C (scalar
# types, `p[i]` array accesses, `if`/`for`, `__syncthreads()`), and
# `tinytrain.kernels.cuda.emulator` translates such source into Python and runs it over a grid,
# checking every access. Here is a kernel that scales a vector, launched with 3 blocks of 4
# threads for 10 elements:

# %%
SCALE = r"""
extern "C" __global__ void scale(const float* x, float* y, long long n, float a)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i];
    }
}
"""
scale = emulator.translate(SCALE, "scale.cu")["scale"]
x = np.arange(10, dtype=np.float32)
y = np.zeros_like(x)
emulator.launch(scale, 3, 4, (x, y, np.int64(10), np.float32(2)))  # 12 threads, 10 elements
print("y =", y)
assert (y == 2 * x).all()
print("\nwhat the emulator runs for each thread:\n" + scale.source)

# %% [markdown]
# The translation keeps C's meaning, not Python's: `int` arithmetic wraps at 32 bits, integer
# `/` and `%` truncate toward zero, `threadIdx.x` is *unsigned*. The two extra threads of the
# last block (`i = 10, 11`) must do nothing: that is what `if (i < n)` is for. Without it, they
# read and write past the ends of `x` and `y` — on a GPU, silently, in someone else's memory;
# in the emulator, an error that names the thread:

# %%
no_check = emulator.translate(SCALE.replace("if (i < n)", "if (1)"), "scale.cu")["scale"]
try:
    emulator.launch(no_check, 3, 4, (x, y, np.int64(10), np.float32(2)))
except EmulatorError as err:
    print("EmulatorError:", err)
else:
    raise AssertionError("the emulator should have refused this launch")

# %% [markdown]
# The same source runs on the GPU through CuPy's `RawKernel` (NVRTC compiles it when it is
# first launched). Without a GPU we can still compile it — NVRTC is a library, it needs no
# GPU — and look at the PTX, the GPU's portable assembly:

# %%
if GPU:
    gpu_scale = cp.RawKernel(SCALE, "scale")
    gx, gy = cp.asarray(x), cp.zeros(10, cp.float32)
    gpu_scale((3,), (4,), (gx, gy, np.int64(10), np.float32(2)))
    print("on the GPU:", gy.get())
    assert (gy.get() == y).all()
else:
    print("no GPU: skipping the launch on the device")
try:
    ptx = nvrtc.compile_ptx(SCALE, "scale.cu")
    print("\n".join(line for line in ptx.splitlines() if "ld.global" in line or "st.global" in
                    line or re.search(r"mul\.\S*f32", line)))
except nvrtc.NVRTCError as err:
    print("NVRTC is not installed here:", str(err).splitlines()[0])

# %% [markdown]
# ### Grid-stride loops
#
# One thread per element means a grid as large as the data: for a 100-million-element tensor,
# 400,000 blocks. It is simpler and no slower to launch *enough* threads to fill the GPU (a
# few waves of resident blocks) and let each thread walk the array in steps of the whole
# grid. Every elementwise kernel in tinytrain is written this way, so any grid size is
# correct; the launcher caps the grid at `plans.MAX_BLOCKS` blocks.
#
# ```c
# for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
#      i += (long long)blockDim.x * gridDim.x) { ... }
# ```
#
# The picture: 2 blocks of 4 threads over 20 elements. Consecutive elements go to consecutive
# threads on every pass — the property that keeps a warp's accesses together.

# %%
OWNER = r"""
extern "C" __global__ void owner(long long* who, long long n)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        who[i] = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    }
}
"""
owner = emulator.translate(OWNER, "owner.cu")["owner"]
who = np.full(20, -1, np.int64)
emulator.launch(owner, 2, 4, (who, np.int64(20)))
fig, ax = plt.subplots(figsize=(10, 1.3))
figures.draw_thread_owners(ax, who, 4, 2, "global thread that handles each element")
figures.show("04_grid_stride")
assert (who == np.arange(20) % 8).all()

# %% [markdown]
# ### Exercise 4.1 — which elements does a thread handle?
#
# Write `grid_stride_elements(block, thread, block_dim, grid_dim, n)`: the indices, in order,
# that thread `thread` of block `block` handles in a grid-stride loop over `n` elements. The
# checker runs the `owner` kernel above in the emulator for several launch shapes and compares.

# %%
def grid_stride_elements(block, thread, block_dim, grid_dim, n):
    """The elements (a list of ints, in loop order) handled by one thread of a grid-stride loop."""
    ### BEGIN SOLUTION
    return list(range(block * block_dim + thread, n, block_dim * grid_dim))
    ### END SOLUTION


# %% tags=["checker"]
for block_dim, grid_dim, n in [(4, 2, 20), (32, 3, 200), (8, 5, 7), (1, 1, 3), (64, 2, 128)]:
    who = np.full(n, -1, np.int64)
    emulator.launch(owner, grid_dim, block_dim, (who, np.int64(n)))
    for b in range(grid_dim):
        for t in range(block_dim):
            expected = np.flatnonzero(who == b * block_dim + t).tolist()
            got = list(grid_stride_elements(b, t, block_dim, grid_dim, n))
            assert got == expected, f"block {b} thread {t} of <<<{grid_dim}, {block_dim}>>>, " \
                                    f"n={n}: {got} != {expected}"
print("Exercise 4.1: grid_stride_elements agrees with the emulated kernel")

# %% [markdown]
# ### Exercise 4.2 — write a CUDA kernel
#
# Now write one: return the CUDA C source of `relu(const float* x, float* y, long long n)`,
# which sets `y[i] = x[i] > 0 ? x[i] : 0` for every `i < n`, with a grid-stride loop and the
# bounds check it implies. The checker launches your source in the emulator with a grid too
# small for the array (the loop must take turns) and one too large (the check must stop the
# extra threads), and compiles it with NVRTC when NVRTC is installed. The emulator runs a
# subset of CUDA C, the one the package's kernels are written in: `int`, `long long`,
# `size_t`, `float`, `for`, `while`, `if`, `?:` and the like, but not `auto`, `do ... while`
# or pointer arithmetic (the docstring of
# [tinytrain/kernels/cuda/emulator.py](../tinytrain/kernels/cuda/emulator.py) lists it).

# %%
def relu_source():
    """CUDA C (a string) of a kernel
    ``extern "C" __global__ void relu(const float* x, float* y, long long n)``."""
    ### BEGIN SOLUTION
    return r"""
    extern "C" __global__ void relu(const float* x, float* y, long long n)
    {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (long long)blockDim.x * gridDim.x) {
            y[i] = x[i] > 0 ? x[i] : 0.0f;
        }
    }
    """
    ### END SOLUTION


# %% tags=["checker"]
learner_relu = emulator.translate(textwrap.dedent(relu_source()), "relu.cu")["relu"]
for grid, block, n in [(2, 32, 300), (8, 32, 50), (1, 1, 5)]:
    xs = rng.standard_normal(n).astype(np.float32)
    ys = np.full(n, np.nan, np.float32)
    emulator.launch(learner_relu, grid, block, (xs, ys, np.int64(n)))
    wrong = np.flatnonzero(ys != np.maximum(xs, 0))
    assert not wrong.size, (
        f"<<<{grid}, {block}>>> over {n} elements: y[{wrong[0]}] is {ys[wrong[0]]} for "
        f"x = {xs[wrong[0]]}, expected {max(xs[wrong[0]], 0)}" + (
            " (never written)" if np.isnan(ys[wrong[0]]) else ""))
try:
    ptx = nvrtc.compile_ptx(textwrap.dedent(relu_source()), "relu.cu")
    assert ".entry relu(" in ptx, ('the kernel has a C++ (mangled) name: declare it extern "C" '
                                   '__global__, or cp.RawKernel(src, "relu") cannot find it')
except nvrtc.NVRTCError as err:
    assert "not found" in str(err), err  # only a missing NVRTC is excused
print("Exercise 4.2: your kernel covers every element, stays in bounds and compiles")

# %% [markdown]
# ## 3. im2col, derived
#
# A convolution of `x [N, C, H, W]` with `w [Cout, C, Kh, Kw]` computes, for every output
# pixel, a dot product of the weights with one input patch of `K = C*Kh*Kw` values. Copy every
# patch into a column of a matrix `col` and the whole convolution is one matrix product:
#
# $$ y_\text{rows}[Cout, N \cdot P] = W[Cout, K] \;@\; \text{col}[K, N \cdot P],
#    \qquad P = H_o W_o. $$
#
# Row `k = (c, ki, kj)` of `col` holds kernel offset `(ki, kj)` of channel `c`; column
# `(n, oh, ow)` is output pixel `(oh, ow)` of image `n`. The entry is the input pixel that this
# weight multiplies there, in the padded image:
#
# $$ \text{col}[(c K_h + k_i) K_w + k_j,\; n P + o_h W_o + o_w]
#    = x[n, c,\; o_h s_h - p_h + k_i,\; o_w s_w - p_w + k_j] $$
#
# or 0 where that row or column falls in the padding. The simplest kernel gives each entry of
# `col` its own thread, which computes its `(k, n, oh, ow)` from its index with `/` and `%`.
# But a GPU has no integer divider: a division is a sequence of instructions (a much longer one
# for 64-bit integers), and five of them per copied float cost more than the copy. So each thread
# of `im2col` in [`conv2d.cu`](../tinytrain/kernels/cuda/conv2d.cu) takes one channel `c` of
# one column `(n, oh, ow)`, finds those with three divisions, and copies the `Kh*Kw` entries
# of that column that come from channel `c` in two plain loops. (`index_t` is `int` or
# `long long`, see section 11; ignore `ones_row` until section 6.)

# %%
source = (emulator.SOURCE_DIR / "conv2d.cu").read_text()
start = source.index('extern "C" __global__ void im2col')
print(source[start:source.index("}\n}", start) + 3])

# %% [markdown]
# To see the map, feed it an input whose values are their own flat index (plus one, so that 0
# means padding): `col` then *shows* which pixel each entry copies. A 1-channel 4x4 image, a
# 2x3 kernel, stride (2, 1), padding (1, 1):

# %%
meta = Conv2dMeta((1, 1, 4, 4), (1, 1, 2, 3), stride=(2, 1), padding=(1, 1))
x_ids = np.arange(1, 17, dtype=np.float32).reshape(meta.input_shape)
col = np.full(meta.kernel_elems * meta.batch * meta.patches, np.nan, np.float32)
kernel = emulator.load("conv2d")["im2col"]
emulator.launch(kernel, 2, 32, (x_ids, col, np.int64(0), np.int64(1), *plans._sizes(meta),
                                np.int32(0)))  # the last argument: ones_row = 0
col_index = col.reshape(meta.kernel_elems, -1).astype(int) - 1  # -1: padding
fig, ax = plt.subplots(figsize=(10, 2.6))
figures.draw_index_matrix(ax, col_index, f"col [K={meta.kernel_elems}, P={meta.patches}]: the "
                          "input pixel each entry copies", "column = output pixel (oh, ow)",
                          "row = kernel offset (ki, kj)")
figures.show("04_im2col_map")
print(f"output {meta.out_h}x{meta.out_w}; row 0 is kernel offset (0, 0): the top-left pixel of "
      "every window, padding where the window hangs over the border")

# %% [markdown]
# Chapter 3 built im2col from NumPy's `sliding_window_view` on the padded input. The kernel
# must agree with it for every stride, padding and kernel shape; the emulator runs the kernel's
# source over a grid of them:

# %%
def im2col_numpy(x, meta):
    """Chapter 3's im2col: windows of the padded input, as [C*Kh*Kw, N*Ho*Wo]."""
    xp = np.pad(x, ((0, 0), (0, 0), (meta.pad_h,) * 2, (meta.pad_w,) * 2))
    win = sliding_window_view(xp, (meta.kernel_h, meta.kernel_w), axis=(2, 3))
    win = win[:, :, ::meta.stride_h, ::meta.stride_w]  # [N, C, Ho, Wo, Kh, Kw]
    return win.transpose(1, 4, 5, 0, 2, 3).reshape(meta.kernel_elems, -1)


cases = 0
for kernel_hw in [(1, 1), (2, 2), (3, 3), (2, 3), (3, 1)]:
    for stride in [1, 2, (2, 1), 3]:
        for padding in [0, 1, (1, 2)]:
            x = rng.standard_normal((2, 2, 6, 7)).astype(np.float32)
            try:
                meta = Conv2dMeta(x.shape, (3, 2, *kernel_hw), stride, padding)
            except ValueError:
                continue  # the kernel does not fit the padded input
            col = np.full(meta.kernel_elems * meta.batch * meta.patches, np.nan, np.float32)
            emulator.launch(kernel, 3, 32, (x, col, np.int64(0), np.int64(2),
                                            *plans._sizes(meta), np.int32(0)))
            assert np.array_equal(col.reshape(meta.kernel_elems, -1), im2col_numpy(x, meta))
            cases += 1
print(f"the kernel's im2col equals chapter 3's on {cases} configurations")

# %% [markdown]
# ### Exercise 4.3 — im2col's index map
#
# Write `im2col_source(k, j, meta)`: for row `k` and column `j` of the column matrix of a whole
# batch, the flat index into `x` (C order, `[N, C, H, W]`) of the pixel that entry copies, or
# `-1` when it is padding. The checker compares your map with the kernel's on several shapes.

# %%
def im2col_source(k, j, meta):
    """Flat index in x [N, C, H, W] read by col[k][j], or -1 for padding (meta: Conv2dMeta)."""
    ### BEGIN SOLUTION
    n, p = divmod(j, meta.patches)
    oh, ow = divmod(p, meta.out_w)
    c, rest = divmod(k, meta.kernel_h * meta.kernel_w)
    ki, kj = divmod(rest, meta.kernel_w)
    h = oh * meta.stride_h - meta.pad_h + ki
    w = ow * meta.stride_w - meta.pad_w + kj
    if not (0 <= h < meta.in_h and 0 <= w < meta.in_w):
        return -1
    return ((n * meta.in_channels + c) * meta.in_h + h) * meta.in_w + w
    ### END SOLUTION


# %% tags=["checker"]
for x_shape, w_shape, stride, padding in [((1, 1, 4, 4), (1, 1, 2, 3), (2, 1), (1, 1)),
                                          ((2, 3, 5, 6), (2, 3, 3, 3), 1, 1),
                                          ((2, 2, 7, 5), (1, 2, 1, 3), (3, 2), (0, 1))]:
    meta = Conv2dMeta(x_shape, w_shape, stride, padding)
    x_ids = np.arange(1, np.prod(x_shape) + 1, dtype=np.float64).reshape(x_shape)
    col = np.full(meta.kernel_elems * meta.batch * meta.patches, np.nan)
    emulator.launch(emulator.load("conv2d", np.float64)["im2col"], 2, 32,
                    (x_ids, col, np.int64(0), np.int64(meta.batch), *plans._sizes(meta),
                     np.int32(0)))
    expected = col.reshape(meta.kernel_elems, -1).astype(int) - 1
    for (k, j), e in np.ndenumerate(expected):
        assert im2col_source(k, j, meta) == e, f"{x_shape} {w_shape} s={stride} p={padding}: " \
                                               f"col[{k}][{j}] should read {e}"
print("Exercise 4.3: im2col_source is the kernel's index map")

# %% [markdown]
# ## 4. Why this layout: coalesced writes
#
# Memory is moved in transactions of 32-byte sectors, grouped in 128-byte lines. When the 32
# threads of a warp write 32 consecutive floats, that is one 128-byte line: one transaction.
# When they write 32 floats `K` apart, it is 32 lines: 32 transactions for the same data. So
# the fastest-varying index of the *thread* should be the fastest-varying index of the
# *array*. In `col [K, N*P]` consecutive threads take consecutive columns of one row. In the
# transposed layout `[N*P, K]` (one row per output pixel, the other common choice) the same
# threads would write one element per row, `K` floats apart. For `convnet`'s second layer
# (`K = 16*5*5 = 400`):

# %%
K, warp = 400, np.arange(32)
addresses = {"col [K, N*P] (tinytrain)": 4 * warp,  # thread t writes col[k][j0 + t]
             "col [N*P, K]": 4 * warp * K}  # thread t writes colT[j0 + t][k]
fig, ax = plt.subplots(figsize=(7, 3))
figures.draw_warp_addresses(ax, addresses, 128)
figures.show("04_coalescing")
for label, addr in addresses.items():
    print(f"{label:26s}: one warp's 32 writes touch {len(set(addr // 128))} lines of 128 bytes")
lines = {label: len(set(addr // 128)) for label, addr in addresses.items()}
assert lines == {"col [K, N*P] (tinytrain)": 1, "col [N*P, K]": 32}  # 1 transaction against 32

# %% [markdown]
# The reads of `x` are coalesced too: consecutive threads read consecutive pixels of one image
# row (`sw` apart with a stride). The layout has a second benefit for the backward pass:
# `dW = dy_rows @ col^T` is then **one** GEMM whose inner dimension runs over the whole batch,
# so the sum over images is done inside cuBLAS.
#
# The price of im2col is memory: `col` holds `Kh * Kw` copies of the input (25 for a 5x5
# kernel), 160 MB for `convnet`'s
# second layer at batch 512. tinytrain bounds it: the launcher processes the batch in chunks
# of images whose column buffer fits `plans.COL_BYTES` (256 MiB). Here is the whole plan of
# one convolution at batch 64 — two kernels and a GEMM when the batch fits in one chunk:

# %%
meta = Conv2dMeta((64, 16, 14, 14), (32, 16, 5, 5), 1, 2, (32,))
x, w, b = (np.zeros(s, np.float32) for s in (meta.input_shape, meta.weight_shape, (32,)))
_, steps = plans.conv2d_forward(np, x, w, b, meta)
for step in steps:
    if isinstance(step, plans.Launch):
        print(f"launch {step.file}.cu:{step.kernel}<<<{step.grid}, {step.block}>>>")
    else:
        print(f"cuBLAS GEMM [{step.m} x {step.k}] @ [{step.k} x {step.n}] -> C (ld {step.ldc})")
assert [type(s).__name__ for s in steps].count("Launch") == 2           # two kernels ...
assert [type(s).__name__ for s in steps].count("Gemm") == 1             # ... and one GEMM
per_image = meta.kernel_elems * meta.patches * 4
n_chunks = {}
for batch in (64, 512, 2048):
    chunks = plans.conv_chunks(Conv2dMeta((batch, 16, 14, 14), (32, 16, 5, 5), 1, 2), 4)
    print(f"batch {batch:4d}: col would be {batch * per_image / 2**20:6.1f} MiB -> "
          f"{len(chunks)} chunk(s) of at most {chunks[0][1]} images")
    assert sum(nb for _, nb in chunks) == batch                          # every image once
    assert all(nb * per_image <= plans.COL_BYTES for _, nb in chunks)    # every col fits
    n_chunks[batch] = len(chunks)
assert n_chunks == {64: 1, 512: 1, 2048: 3}  # 160 MB fits in 256 MiB; 640 MB needs three

# %% [markdown]
# ## 5. The GEMM: cuBLAS, column-major, and TF32
#
# Writing a fast GEMM is a chapter of its own; we call NVIDIA's cuBLAS. One trap: cuBLAS
# follows Fortran and stores matrices by **columns**, while NumPy (and tinytrain) store them by
# rows. A row-major `r x c` matrix with leading dimension `ld` *is* the column-major `c x r`
# matrix — its transpose — with the same `ld`. So `C = A @ B` row-major is computed as
# `C^T = B^T @ A^T` column-major: swap the operands and `m`/`n`, keep the transpose flags
# (`runtime.cublas_call`). The emulator runs such a call in NumPy by the BLAS definition, which
# checks the swap:

# %%
A, B = rng.standard_normal((3, 5)), rng.standard_normal((5, 4))
C = np.zeros(12)
g = plans.Gemm(False, False, 3, 4, 5, 1.0, A.reshape(-1), 0, 5, B.reshape(-1), 0, 4, 0.0, C, 0, 4)
call = runtime.cublas_call(g)
print("cuBLAS is called with (transa, transb, m, n, k) =", call[:5], "and lda, ldb, ldc =",
      (call[7], call[9], call[12]))
emulator.gemm_colmajor(*call)
assert np.allclose(C.reshape(3, 4), A @ B)

# %% [markdown]
# **TF32.** Since Ampere, tensor cores can run float32 GEMMs in *TF32*: the inputs are rounded
# to 10 mantissa bits (float32 has 23), products and sums stay in float32. It is several times
# faster and about a thousand times less precise. PyTorch uses it by default for convolutions
# (cuDNN) but not for matmuls; tinytrain's cuBLAS calls stay in full float32 (CuPy leaves TF32
# off), which is why the GPU tests can compare with the CPU at `rtol = 2e-5`. Rounding the inputs
# to 10 bits in NumPy shows the size of the effect on a `[32, 400] @ [400, 512]` product:

# %%
def to_tf32(a):
    """Round float32 values to TF32's 10-bit mantissa (round to nearest even)."""
    bits = a.astype(np.float32).view(np.uint32)
    bits = (bits + 0x0FFF + ((bits >> 13) & 1)) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


A32 = rng.standard_normal((32, 400)).astype(np.float32)
B32 = rng.standard_normal((400, 512)).astype(np.float32)
exact = A32.astype(np.float64) @ B32.astype(np.float64)
scale_ = np.abs(exact).max()
err32 = np.abs(A32 @ B32 - exact).max() / scale_
err_tf32 = np.abs(to_tf32(A32).astype(np.float64) @ to_tf32(B32).astype(np.float64)
                  - exact).max() / scale_
print(f"largest error relative to max |C|: float32 {err32:.1e}, TF32 inputs {err_tf32:.1e}")
assert err_tf32 > 30 * err32
if GPU and torch is not None:
    ta, tb = torch.from_numpy(A32).cuda(), torch.from_numpy(B32).cuda()
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        err = np.abs((ta @ tb).cpu().numpy() - exact).max() / scale_
        print(f"on the GPU, cuBLAS with allow_tf32={tf32}: {err:.1e}")
    torch.backends.cuda.matmul.allow_tf32 = False
else:
    print("no GPU or no PyTorch: skipping cuBLAS's own float32 and TF32 products")

# %% [markdown]
# ## 6. Backward: two GEMMs and col2im
#
# With `dy_rows [Cout, N*P]` (the output gradient laid out like `y_rows`, by one more kernel):
#
# * `dW = dy_rows @ col^T`: one GEMM, `[Cout, N*P] @ [N*P, K]`, summed over the batch by the
#   GEMM itself;
# * `db[c]` = the sum of row `c` of `dy_rows`. Give `col` one more row, of ones
#   (`ones_row`), and that sum is the last column of the same GEMM: `[Cout, N*P] @ [N*P, K+1]`
#   computes dW and db together;
# * `dcol = W^T @ dy_rows`, `[K, Cout] @ [Cout, N*P]`, the gradient of every entry of `col`;
#   and since entry `(k, j)` of `col` was a copy of one input pixel, that pixel's gradient is
#   the **sum of the `dcol` entries that copied it**. That is col2im.
#
# One GEMM with an inner dimension of `N*P` has a small output (`16 x 26` for `convnet`'s first
# layer) and a long sum (401,408 terms at batch 512): cuBLAS computes it on a handful of the
# GPU's 132 multiprocessors. The launcher therefore cuts the columns into slices of whole
# images (`plans.dw_slices`), one batched GEMM computes a partial product per slice, and a
# small kernel (`sum_slices`) adds the partial products in a fixed order.
#
# The direct way to write col2im is a *scatter*: one thread per `dcol` entry, adding its value
# into its pixel. But several entries copy the same pixel (with a 3x3 kernel at stride 1, nine
# of them), so several threads add to one address at once — a race, which needs `atomicAdd`.
# The emulator catches the race:

# %%
SCATTER = r"""
extern "C" __global__ void col2im_scatter(const float* dcol, float* dx, long long K,
                                          long long cols)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < K * cols;
         i += (long long)blockDim.x * gridDim.x) {
        dx[i % cols + i / cols] += dcol[i];  // a 1-D image: entry (k, col) feeds pixel col + k
    }
}
"""
scatter = emulator.translate(SCATTER, "scatter.cu")["col2im_scatter"]
try:
    emulator.launch(scatter, 2, 8, (np.ones(3 * 6, np.float32), np.zeros(8, np.float32),
                                    np.int64(3), np.int64(6)))
except EmulatorError as err:
    print("EmulatorError:", err)
else:
    raise AssertionError("the emulator should have refused this launch")

# %% [markdown]
# `atomicAdd` makes the scatter correct, but not *reproducible*: the additions into one pixel
# happen in whatever order the threads arrive, and floating-point addition is not associative.
# The same nine (or 900) numbers added in different orders give different float32 results:

# %%
values = (rng.standard_normal(900) * 10.0 ** rng.integers(-3, 3, 900)).astype(np.float32)
exact_sum = float(np.sum(values.astype(np.float64)))
orders = []
for _ in range(400):
    s = np.float32(0)
    for v in rng.permutation(values):
        s = np.float32(s + v)
    orders.append(s)
orders = np.array(orders)
fig, ax = plt.subplots(figsize=(7, 2.8))
figures.draw_sum_orders(ax, orders, exact_sum)
figures.show("04_sum_orders")
print(f"{len(np.unique(orders))} different float32 results from 400 orders of the same 900 numbers")
assert len(np.unique(orders)) > 1

# %% [markdown]
# So tinytrain writes col2im as a **gather**: one thread per *input* pixel, which finds the
# entries that copied it and adds them in a fixed order. Inverting the index map: kernel row
# `ki` reads input row `h` at output row `oh` exactly when `oh*sh + ki = h + ph`, so `ki`
# runs over the values congruent to `h + ph` modulo `sh`, and `oh = (h + ph - ki) / sh` must
# lie in `[0, Ho)` (likewise for columns). The kernel starts from the largest such `oh`,
# `(h + ph) / sh`, and steps `ki` up by `sh` while `oh` goes down by one: a few divisions
# per pixel (splitting its index into plane, row and column, then one per axis for the
# largest `oh` and `ow`), none in the loop. No two threads write the same address, and
# every run adds the same numbers in the same order: the same bits, every time.

# %%
start = source.index('extern "C" __global__ void col2im')
print(source[start:source.index("}\n}", start) + 3])

# %% [markdown]
# ### Exercise 4.4 — col2im as a gather
#
# Write `col2im_entries(n, c, h, w, meta)`: the `(row, column)` entries of the column matrix
# (of the whole batch) that copied input pixel `x[n, c, h, w]`. Its gradient is the sum of
# `dcol` over those entries; the checker sums random `dcol` values over your entries and
# compares with the kernel's `col2im`, for strides that skip pixels and paddings that hide them.

# %%
def col2im_entries(n, c, h, w, meta):
    """The (k, j) entries of col [C*Kh*Kw, N*Ho*Wo] that hold a copy of x[n, c, h, w]."""
    ### BEGIN SOLUTION
    entries = []
    for ki in range(meta.kernel_h):
        th = h + meta.pad_h - ki
        if th < 0 or th % meta.stride_h or th // meta.stride_h >= meta.out_h:
            continue
        for kj in range(meta.kernel_w):
            tw = w + meta.pad_w - kj
            if tw < 0 or tw % meta.stride_w or tw // meta.stride_w >= meta.out_w:
                continue
            k = (c * meta.kernel_h + ki) * meta.kernel_w + kj
            j = n * meta.patches + (th // meta.stride_h) * meta.out_w + tw // meta.stride_w
            entries.append((k, j))
    return entries
    ### END SOLUTION


# %% tags=["checker"]
for x_shape, w_shape, stride, padding in [((2, 2, 5, 6), (1, 2, 3, 3), 1, 1),
                                          ((1, 1, 7, 7), (1, 1, 3, 2), 3, 0),
                                          ((2, 1, 6, 5), (1, 1, 2, 3), (2, 1), (1, 2))]:
    meta = Conv2dMeta(x_shape, w_shape, stride, padding)
    dcol = rng.standard_normal((meta.kernel_elems, meta.batch * meta.patches))
    dx = np.full(int(np.prod(x_shape)), np.nan)
    emulator.launch(emulator.load("conv2d", np.float64)["col2im"], 2, 32,
                    (dcol.reshape(-1), dx, np.int64(0), np.int64(meta.batch),
                     *plans._sizes(meta)))
    for n, c, h, w in np.ndindex(*x_shape):
        mine = sum(dcol[k, j] for k, j in col2im_entries(n, c, h, w, meta))
        assert np.isclose(mine, dx.reshape(x_shape)[n, c, h, w]), (
            f"x[{n}, {c}, {h}, {w}] (x {x_shape}, w {w_shape}, stride {stride}, padding "
            f"{padding}): your entries {col2im_entries(n, c, h, w, meta)} sum to {mine}, the "
            f"kernel gathers {dx.reshape(x_shape)[n, c, h, w]}")
print("Exercise 4.4: col2im_entries finds exactly the entries col2im gathers")

# %% [markdown]
# ## 7. The bias gradient: a block reduction
#
# When there is no dW GEMM to ride along (a linear layer's bias, or a frozen weight), `db[c]`
# is a sum of `N*P` numbers of its own (50,176 for `convnet`'s first layer at batch 64). One
# block per channel: each of its threads adds a strided share into a register, writes its
# partial sum to **shared memory**, and then the block halves the number of partial sums until
# one is left. Between the halvings every thread must wait for the others — `__syncthreads()`
# — or it would read a partial sum that is not written yet. The order of the additions is
# fixed, so the result is reproducible too.

# %%
start = source.index('extern "C" __global__ void channel_sum')
print(source[start:source.index("}\n}", start) + 3])

# %% [markdown]
# Forget the `__syncthreads()` inside the loop and the emulator, which runs the threads of a
# block in phases between barriers, reports threads reading and writing the same shared
# element between the same two barriers:

# %%
broken = source.replace("            __syncthreads();\n        }\n        if (threadIdx.x == 0",
                        "        }\n        if (threadIdx.x == 0")
assert broken != source
broken_kernel = emulator.translate(broken, "conv2d.cu")["channel_sum"]
dy = rng.standard_normal((4, 3, 10)).astype(np.float32)
db = np.zeros(3, np.float32)
try:
    emulator.launch(broken_kernel, 3, 16, (dy, db, np.int64(4), np.int64(3), np.int64(10)))
except EmulatorError as err:
    print("EmulatorError:", err)
else:
    raise AssertionError("the emulator should have refused this launch")

# %% [markdown]
# ### Exercise 4.5 — the block's sum, in the block's order
#
# Write `block_sum(values, threads)`: the float32 sum of `values` (a float32 array) exactly as
# one block of `threads` threads computes it in `channel_sum` — thread `t` first adds
# `values[t], values[t + threads], ...` in order, starting from 0; then, for `stride =
# threads/2, threads/4, ..., 1`, partial sum `t < stride` adds partial sum `t + stride`. Do
# every addition in float32: the checker wants the kernel's result **bit for bit**.

# %%
def block_sum(values, threads):
    """float32 sum of values, in the order of a shared-memory tree reduction over `threads`."""
    ### BEGIN SOLUTION
    partial = np.zeros(threads, np.float32)
    for t in range(threads):
        for v in values[t::threads]:
            partial[t] = np.float32(partial[t] + v)
    stride = threads // 2
    while stride > 0:
        partial[:stride] = partial[:stride] + partial[stride:2 * stride]
        stride //= 2
    return partial[0]
    ### END SOLUTION


# %% tags=["checker"]
reduce_kernel = emulator.load("conv2d")["channel_sum"]
check_rng = np.random.default_rng(45)  # its own: the cases must not depend on earlier cells
for n, threads in [(100, 16), (1000, 32), (7, 8), (64, 64), (600, 16), (5000, 64)] * 3:
    v = (check_rng.standard_normal(n) * 10.0 ** check_rng.integers(-4, 4, n)).astype(np.float32)
    out = np.zeros(1, np.float32)
    emulator.launch(reduce_kernel, 1, threads, (v, out, np.int64(n), np.int64(1),
                                                np.int64(1)))
    mine = np.float32(block_sum(v, threads))
    assert mine == out[0], f"{n} values over {threads} threads: {mine!r} != kernel {out[0]!r}"
print("Exercise 4.5: block_sum reproduces the kernel's reduction bit for bit")

# %% [markdown]
# ## 8. The whole layer, checked
#
# `tinytrain.kernels.cuda` strings these kernels together: `conv2d_forward` is im2col, a GEMM
# and a layout kernel that adds the bias; `conv2d_backward` lays `dy` out once and shares it
# between the dW GEMM (with db as its last column) and the dX GEMM + col2im. Under
# `emulated_kernels()` the very same module runs on NumPy arrays — its glue, its launch plans
# with their offsets and leading dimensions, and the `.cu` sources — so we can compare the whole
# layer with the CPU kernels of chapter 3 and with PyTorch (when installed) here, with or
# without a GPU:

# %%
x = rng.standard_normal((3, 2, 7, 6))
w = rng.standard_normal((4, 2, 3, 2))
b = rng.standard_normal(4)
meta = Conv2dMeta(x.shape, w.shape, (2, 1), 1, b.shape)
dy = rng.standard_normal(meta.output_shape)
with emulated_kernels() as k:
    y_gpu = k.conv2d_forward(x, w, b, meta)
    dx_gpu, dw_gpu, db_gpu = k.conv2d_backward(dy, x, w, meta, (True, True, True))
ours = {"y": y_gpu, "dx": dx_gpu, "dw": dw_gpu, "db": db_gpu}
cpu_refs = {"y": cpu.conv2d_forward(x, w, b, meta), "dx": cpu.conv2d_backward_input(dy, w, meta),
            "dw": cpu.conv2d_backward_weight(dy, x, meta), "db": cpu.conv2d_backward_bias(dy)}
refs = {"CPU": cpu_refs}
if torch is not None:
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, (2, 1), 1)
    ty.backward(torch.tensor(dy))
    refs["PyTorch"] = {"y": ty.detach().numpy(), "dx": tx.grad.numpy(),
                       "dw": tw.grad.numpy(), "db": tb.grad.numpy()}
for name in ours:
    errors = {who: np.abs(ours[name] - ref[name]).max() for who, ref in refs.items()}
    print(f"{name}:", ", ".join(f"|CUDA kernels - {who}| = {e:.1e}" for who, e in errors.items()))
    assert all(np.allclose(ours[name], ref[name], rtol=1e-12, atol=1e-12)
               for ref in refs.values())

# %% [markdown]
# On a GPU, the same comparison through the public API — tensors on `"cuda"`, `F.conv2d`,
# autograd — in float32 and float64:

# %%
if GPU:
    who, ref = list(refs.items())[-1]                 # PyTorch when installed, else the CPU
    for dtype, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
        xs, ws, bs = (tt.tensor(a.astype(dtype), device="cuda", requires_grad=True)
                      for a in (x, w, b))
        out = F.conv2d(xs, ws, bs, (2, 1), 1)
        out.backward(tt.tensor(dy.astype(dtype), device="cuda"))
        for name, got in [("y", out), ("dx", xs.grad), ("dw", ws.grad), ("db", bs.grad)]:
            err = np.abs(got.numpy() - ref[name]).max() / max(1, np.abs(ref[name]).max())
            print(f"GPU {np.dtype(dtype).name} {name}: relative error vs {who} {err:.1e}")
            assert err < tol
else:
    print("no GPU: skipping the comparison on the device (the cuda-marked tests make it over the "
          "full grid of shapes)")

# %% [markdown]
# ## 9. Timing done right
#
# A kernel launch returns as soon as the work is *queued*: timing a GPU call with the host's
# clock alone measures the queueing, not the work. Four rules:
#
# 1. **Warm up**: the first call compiles the kernels (NVRTC, then cached on disk by CuPy)
#    and grows CuPy's memory pool; never time it.
# 2. **Synchronise** before reading the clock — or better, record CUDA **events** in the
#    stream and ask the GPU how long passed between them.
# 3. Time **many** calls: one small kernel is a few microseconds.
# 4. Mind **Python's garbage collector**: once in a while it walks every object the process
#    holds (with PyTorch and CuPy loaded, hundreds of thousands) and that pause lands in
#    whichever loop is running. `gc.freeze()` after the warm-up moves what exists into a
#    generation it never walks; section 10 times training steps that way.

# %%
if GPU:
    meta = Conv2dMeta((512, 16, 14, 14), (32, 16, 5, 5), 1, 2, (32,))
    gx = cp.asarray(rng.standard_normal(meta.input_shape).astype(np.float32))
    gw = cp.asarray(rng.standard_normal(meta.weight_shape).astype(np.float32))
    gb = cp.zeros(32, cp.float32)
    from tinytrain.kernels import cuda as kc

    t0 = time.perf_counter()
    kc.conv2d_forward(gx, gw, gb, meta)
    cp.cuda.Device().synchronize()
    print(f"first call (compiles, allocates): {1e3 * (time.perf_counter() - t0):.2f} ms")
    t0 = time.perf_counter()
    for _ in range(20):
        kc.conv2d_forward(gx, gw, gb, meta)
    print(f"20 calls, no synchronisation:       {1e3 * (time.perf_counter() - t0) / 20:.3f} ms "
          "each (the time to queue them)")
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(20):
        kc.conv2d_forward(gx, gw, gb, meta)
    end.record()
    end.synchronize()
    print(f"20 calls between CUDA events:        {cp.cuda.get_elapsed_time(start, end) / 20:.3f} "
          "ms each (the GPU's time)")
else:
    print("no GPU: skipping the timings (bench/conv_gpu.py compares with cuDNN on a GPU)")

# %% [markdown]
# ## 10. One epoch, GPU and CPU
#
# `python -m tinytrain.train --device cuda` trains the default recipe with everything on the
# GPU: the data set is copied there once (`DataLoader(..., device="cuda")`) and shuffled and
# batched there, the optimizer updates each parameter with one fused kernel, and nothing in a
# step waits for the GPU — not even the check of the targets, which the cross-entropy kernel
# makes on the device and reports a few calls later. The CPU's time per epoch is estimated
# from 20 steps.

# %%
from tinytrain.models import build_model


def time_steps(device, steps, batch=64):
    tt.manual_seed(0)
    model = build_model("convnet").to(device)
    opt = tt.optim.Adam(model.parameters(), lr=2e-3)
    data = tt.data.MNISTMini(train=True).get_batch(np.arange(batch))
    x, y = tt.tensor(data[0], device=device), tt.tensor(data[1], device=device)
    for i in range(steps + 2):
        if i == 2:  # two warm-up steps
            if device == "cuda":
                cp.cuda.Device().synchronize()
            gc.collect()
            gc.freeze()  # rule 4 of section 9
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    final = loss.item()  # waits for the GPU
    return (time.perf_counter() - t0) / steps, final


cpu_step, _ = time_steps("cpu", 20)
print(f"CPU: {1e3 * cpu_step:.1f} ms per step of batch 64, about {938 * cpu_step:.0f} s per epoch")
if GPU:
    gpu_step, _ = time_steps("cuda", 200)
    print(f"GPU: {1e3 * gpu_step:.2f} ms per step, about {938 * gpu_step:.1f} s per epoch: "
          f"{cpu_step / gpu_step:.0f}x the CPU")
    from tinytrain.train import main as train_main

    train_main(["--device", "cuda", "--no-download"])  # one full epoch (mnist-mini if offline)
else:
    print("no GPU: skipping the GPU epoch")

# %% [markdown]
# ## 11. The bugs that cost evenings
#
# **A float64 array passed to a `float*` kernel.** A kernel receives a raw pointer; nothing
# tells it the array holds doubles. It reads each 8-byte double as two 4-byte floats and
# computes garbage, without any error. tinytrain's launch plans give every argument its exact
# type, and the emulator (and `TINYTRAIN_CUDA_CHECK=1` on a GPU) checks them against the C
# signature:

# %%
x64 = np.arange(10, dtype=np.float64)
try:
    emulator.launch(scale, 3, 4, (x64, np.zeros(10, np.float32), np.int64(10), np.float32(2)))
except TypeError as err:
    print("TypeError:", err)
else:
    raise AssertionError("the launch should have refused these arguments")
print("what the kernel would read from the float64 buffer:",
      x64.view(np.float32)[:6], "(halves of doubles, not 0, 1, 2, ...)")
if GPU:
    gy = cp.zeros(10, cp.float32)
    gpu_scale((1,), (16,), (cp.asarray(x64), gy, np.int64(10), np.float32(2)))
    print("on the GPU, unchecked:", gy.get())

# %% [markdown]
# **A non-contiguous array.** A kernel indexes `p[i]` as a flat buffer; a transposed or sliced
# view has the same buffer in another order. The plans make inputs contiguous
# (`ascontiguousarray` copies only when needed) and the check refuses a strided view:

# %%
try:
    emulator.launch(scale, 1, 16, (np.ones((4, 4), np.float32)[:, 0], np.zeros(4, np.float32),
                                   np.int64(4), np.float32(2)))
except TypeError as err:
    print("TypeError:", err)
else:
    raise AssertionError("the launch should have refused these arguments")

# %% [markdown]
# **A 32-bit index.** `int i = blockIdx.x * blockDim.x + threadIdx.x` works in every test and
# breaks on real data: `blockIdx.x * blockDim.x` is an `unsigned int` product, and an `int`
# holds at most 2,147,483,647. A batch of 512 images of 64 channels of 256x256 is already
# 2,147,483,648 elements. The emulator keeps C's 32-bit arithmetic, so the wrap shows:

# %%
INT_INDEX = r"""
extern "C" __global__ void index32(long long* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    out[0] = i;
    out[1] = j;
}
"""
index32 = emulator.translate(INT_INDEX, "index32.cu")["index32"]
out = np.zeros(2, np.int64)
tracker = emulator._Tracker()
# thread 0 of block 8,388,608 of 256 threads: a launch too large to emulate, so call it directly
index32.fn(0, 2**23, 256, 2**23 + 1, None, emulator._Array(out, "out", "index32", tracker))
print(f"element {2**23 * 256:,}: int index {out[0]:,}, long long index {out[1]:,}")
assert out[0] < 0 and out[1] == 2**31
elements = 512 * 64 * 256 * 256
print(f"512 x 64 x 256 x 256 = {elements:,} elements; int max = {2**31 - 1:,}")

# %% [markdown]
# tinytrain's kernels compute every index in `index_t`, and the launcher compiles each kernel
# twice: with `typedef int index_t;` and with `typedef long long index_t;`. A launch runs the
# `int` version only when every index it can form fits: each index stays below the size of
# one of its arrays, and a grid-stride loop adds the whole grid to an index before it stops, so
# the test is `largest array + threads in the grid <= 2^31 - 1` (`plans.narrow`). Why not
# `long long` everywhere, as the first version of these kernels did? Speed: the GPU divides
# 32-bit integers several times faster than 64-bit ones, and the index arithmetic, not the
# memory traffic, was what im2col spent its time on (bench/NOTES_gpu.md). cuBLAS's sizes are
# `int`: the plans refuse a GEMM dimension beyond 2^31 - 1 with a clear error instead of
# wrapping.
#
# ## Summary
#
# * A kernel is a function of its thread's coordinates; launch enough threads and let each
#   walk the data in a **grid-stride loop**, with a bounds check.
# * **im2col** turns a convolution into one GEMM; its `[K, N*P]` layout makes the writes
#   coalesced and dW a single GEMM over the whole batch. The batch is chunked to bound the
#   buffer. **cuBLAS** is column-major: swap the operands.
# * Backward is two GEMMs and **col2im as a gather** (no atomics, reproducible); the bias
#   gradient is a row of ones in `col` (one more column of the dW GEMM), or on its own a
#   **block reduction** in shared memory with `__syncthreads()`.
# * Integer division is expensive on a GPU: few divisions per thread, and 32-bit indices
#   whenever every index fits.
# * The **emulator** runs the real CUDA C on the CPU with C's integer rules, bounds, race and
#   argument checks, so all of this is tested without a GPU; NVRTC compiles the sources to PTX
#   anywhere.
#
# The package: the kernels
# [`conv2d.cu`](../tinytrain/kernels/cuda/conv2d.cu),
# [`pool.cu`](../tinytrain/kernels/cuda/pool.cu),
# [`layers.cu`](../tinytrain/kernels/cuda/layers.cu),
# [`loss.cu`](../tinytrain/kernels/cuda/loss.cu),
# [`optim.cu`](../tinytrain/kernels/cuda/optim.cu); the launch plans
# [`plans.py`](../tinytrain/kernels/cuda/plans.py); the runtime
# [`runtime.py`](../tinytrain/kernels/cuda/runtime.py); the emulator
# [`emulator.py`](../tinytrain/kernels/cuda/emulator.py); NVRTC without a GPU
# [`nvrtc.py`](../tinytrain/kernels/cuda/nvrtc.py); the dispatch between CPU and GPU kernels
# [`kernels/__init__.py`](../tinytrain/kernels/__init__.py). The tests:
# [`test_cuda_emulator.py`](../tests/test_cuda_emulator.py),
# [`test_cuda_translator.py`](../tests/test_cuda_translator.py) (CPU) and
# [`test_cuda_device.py`](../tests/test_cuda_device.py) (GPU); the benchmarks
# [`bench/conv_gpu.py`](../bench/conv_gpu.py) and [`bench/mnist_gpu.py`](../bench/mnist_gpu.py).
#
# **Previous:** [Chapter 3 — Conv2d on the CPU](03_conv2d_cpu.ipynb) · **Next:** [Chapter 5 —
# DataLoader](05_dataloader.ipynb): the data that feeds these kernels.
