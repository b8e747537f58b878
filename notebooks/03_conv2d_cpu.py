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
# # Chapter 3 — Convolution on the CPU, from loops to a fast direct kernel
#
# A convolution layer slides a small stack of weights — a *kernel* — over an image and, at
# every position, takes a weighted sum of the pixels under it. The same few weights are reused
# at every position, which is why convolutions see edges and strokes wherever they are, with
# far fewer parameters than a dense layer.
#
# This chapter builds `Conv2d` for tinytrain, on the CPU, with NumPy. We go from the definition
# to code that runs within a small factor of PyTorch's, checking every step against the
# previous one, and we derive the backward pass — which turns out to be made of convolutions
# too.
#
# **What you will build / learn in this chapter**
#
# 1. Cross-correlation by hand on a tiny image, and the output-size formula
#    (`Conv2dMeta`, the one place where every size is computed and checked).
# 2. Naive loops: the definition, written out. Slow, but obviously right.
# 3. The *direct* kernel: one matrix product per kernel offset — `Kh * Kw` big GEMMs.
# 4. im2col as a strided view: the famous "unfold, then one GEMM" — and why its copy, not its
#    GEMM, costs the time.
# 5. What the package kernel does with the memory layout, and a timing chart against PyTorch.
# 6. The backward pass: `dX` is a *full* convolution with the flipped kernel, `dW` is a
#    correlation of `x` with `dY`, `db` is a sum — each checked numerically.
# 7. `tinytrain.nn.Conv2d` and `F.max_pool2d` against PyTorch, and edge-detector filters
#    applied to a real digit.

# %%
# %matplotlib inline
import time

import matplotlib.pyplot as plt
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F
from tinytrain.kernels.cpu.conv2d import (
    Conv2dMeta,
    conv2d_backward_bias,
    conv2d_backward_input,
    conv2d_backward_weight,
    conv2d_forward,
)

np.set_printoptions(precision=3, suppress=True)
rng = np.random.default_rng(0)


def best_ms(fn, repeat=3):
    # The fastest of `repeat` runs, in milliseconds (after one warm-up run).
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


# %% [markdown]
# ## 1. Cross-correlation by hand
#
# Take a 5x5 image `x` and a 3x3 kernel `k`. Put the kernel on the image's top-left corner,
# multiply the 9 overlapping numbers pairwise and add them up: that is output pixel `(0, 0)`.
# Slide the kernel one pixel right for output `(0, 1)`, and so on:
#
# $$y[h, w] = \sum_{i=0}^{K_h-1} \sum_{j=0}^{K_w-1} k[i, j]\; x[h + i,\; w + j]$$
#
# Mathematicians call this a *cross-correlation*; a true convolution flips the kernel first
# (`x[h - i, w - j]`). Deep-learning libraries all compute the cross-correlation and call it
# convolution — the network learns the weights, so the flip would not change what it can
# represent. We follow them.

# %%
x = np.arange(25, dtype=np.float64).reshape(5, 5)   # x[r, c] = 5r + c
k = np.array([[1.0, 0.0, -1.0],
              [2.0, 0.0, -2.0],
              [1.0, 0.0, -1.0]])                      # a Sobel filter: left minus right

# Output pixel (1, 2): the 3x3 window whose top-left corner is x[1, 2].
window = x[1:4, 2:5]
y12 = (window * k).sum()
print(window, "\n->", y12)
# On a ramp that grows by 1 per column, left minus right is -(1+2+1) * 2 = -8, everywhere.
assert y12 == -8


# %% [markdown]
# The picture: the kernel (orange) sits on the image at output position `(1, 2)`; the number it
# produces lands in cell `(1, 2)` of the output. A 5x5 image and a 3x3 kernel give a 3x3
# output, because the kernel has 3 places to go in each direction.

# %%
y_hand = np.array([[(x[h:h + 3, w:w + 3] * k).sum() for w in range(3)] for h in range(3)])
fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), gridspec_kw={"width_ratios": [5, 3, 3]})
figures.draw_number_grid(axes[0], x, "input x (5x5)", highlight=((1, 2), (3, 3)))
figures.draw_number_grid(axes[1], k, "kernel k (3x3)")
figures.draw_number_grid(axes[2], y_hand, "output y (3x3)", highlight=((1, 2), (1, 1)))
plt.tight_layout()
plt.show()
assert (y_hand == -8).all()

# %% [markdown]
# ### Channels, batches, stride and padding
#
# Real layers add four things:
#
# * **channels**: the input has `Cin` planes (3 for RGB) and the kernel spans all of them —
#   a weight `w[o]` of shape `[Cin, Kh, Kw]` — summing over channels too;
# * **output channels**: `Cout` kernels, one output plane each: the weight is `[Cout, Cin, Kh,
#   Kw]` (PyTorch's "OIHW"), the input `[N, Cin, H, W]` ("NCHW");
# * **stride** `s`: the kernel jumps `s` pixels at a time, shrinking the output;
# * **padding** `p`: `p` rows and columns of zeros around the image, so border pixels get
#   their turn in the middle of a window (with `p = (K - 1) / 2` the output keeps the input's
#   size).
#
# Each of H and W then follows `out = (in + 2p - K) // s + 1` — and H and W are independent:
# a `(2, 3)` kernel with stride `(2, 1)` is fine. `Conv2dMeta` is the one place in tinytrain
# that does this arithmetic, and it refuses shapes that do not fit, naming the sizes:

# %%
meta = Conv2dMeta((8, 3, 28, 28), (16, 3, 5, 5), stride=2, padding=2, bias_shape=(16,))
print(meta)
print("patches per image:", meta.patches, "  inputs per output:", meta.kernel_elems)
assert (meta.out_h, meta.out_w) == ((28 + 4 - 5) // 2 + 1,) * 2 == (14, 14)

for bad in [lambda: Conv2dMeta((8, 3, 28, 28), (16, 4, 5, 5)),
            lambda: Conv2dMeta((1, 1, 2, 2), (1, 1, 5, 5), padding=1),
            lambda: Conv2dMeta((8, 3, 28, 28), (16, 3, 5, 5), bias_shape=(3,))]:
    try:
        bad()
        raise AssertionError("expected a ValueError")
    except ValueError as err:
        print("ValueError:", err)


# %% [markdown]
# ### Exercise 3.1 — the output-size formula
#
# Write `conv_output_size(size, kernel, stride, padding)`: the number of outputs along one
# axis, or a `ValueError` when the kernel does not fit in the padded input. The checker
# compares it with `Conv2dMeta` on random sizes, with H and W different, including kernels
# that exactly fill the padded input and strides larger than the kernel.

# %%
def conv_output_size(size, kernel, stride=1, padding=0):
    """Outputs along one axis of a convolution; ValueError if the kernel does not fit."""
    ### BEGIN SOLUTION
    if kernel > size + 2 * padding:
        raise ValueError(f"kernel {kernel} is larger than the padded input {size + 2 * padding}")
    return (size + 2 * padding - kernel) // stride + 1
    ### END SOLUTION


# %% tags=["checker"]
assert conv_output_size(28, 5, 2, 2) == 14
check_rng = np.random.default_rng(31)
fitted = 0
for _ in range(300):
    (h, w), (kh, kw), (sh, sw), (ph, pw) = (tuple(int(v) for v in check_rng.integers(lo, hi, 2))
                                            for lo, hi in [(1, 12), (1, 8), (1, 5), (0, 4)])
    try:
        m_check = Conv2dMeta((1, 1, h, w), (1, 1, kh, kw), (sh, sw), (ph, pw))
    except ValueError:                         # the kernel does not fit: yours must say so too
        for args in [(h, kh, sh, ph), (w, kw, sw, pw)]:
            if args[1] > args[0] + 2 * args[3]:
                try:
                    conv_output_size(*args)
                except ValueError:
                    continue
                raise AssertionError(f"conv_output_size{args}: the kernel does not fit") from None
        continue
    fitted += 1
    assert conv_output_size(h, kh, sh, ph) == m_check.out_h, (h, kh, sh, ph)
    assert conv_output_size(w, kw, sw, pw) == m_check.out_w, (w, kw, sw, pw)
assert fitted > 100
print(f"Exercise 3.1: conv_output_size agrees with Conv2dMeta on {fitted} shapes")

# %% [markdown]
# ## 2. Naive loops
#
# The definition with all indices written out: for every image `n`, output channel `o` and
# output position `(h, w)`, the window of the padded input times `w[o]`, summed. (We let NumPy
# do the innermost sum over `Cin x Kh x Kw`; four Python loops remain.)

# %%
def pad_hw(x, ph, pw):
    # Zero-pad the last two axes of an NCHW array.
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def conv2d_naive(x, w, b=None, stride=1, padding=0):
    m = Conv2dMeta(x.shape, w.shape, stride, padding, None if b is None else b.shape)
    xp = pad_hw(x, m.pad_h, m.pad_w)
    y = np.zeros(m.output_shape, dtype=x.dtype)
    for n in range(m.batch):
        for o in range(m.out_channels):
            for h in range(m.out_h):
                for v in range(m.out_w):
                    r, c = h * m.stride_h, v * m.stride_w
                    y[n, o, h, v] = (xp[n, :, r:r + m.kernel_h, c:c + m.kernel_w] * w[o]).sum()
            if b is not None:
                y[n, o] += b[o]
    return y


y = conv2d_naive(x[None, None], k[None, None])
assert np.array_equal(y[0, 0], y_hand)
# stride 2 and padding 1 on the same image: the 3x3 kernel lands on a 7x7 padded image.
print(conv2d_naive(x[None, None], k[None, None], stride=2, padding=1)[0, 0])

# %% [markdown]
# A small but realistic case — 4 images, 8 channels in, 16 out, 20x20 pixels — already takes
# tens of thousands of trips through the Python loop:

# %%
xs = rng.standard_normal((4, 8, 20, 20))
ws = rng.standard_normal((16, 8, 3, 3))
bs = rng.standard_normal(16)
y_naive = conv2d_naive(xs, ws, bs, stride=1, padding=1)
t_naive = best_ms(lambda: conv2d_naive(xs, ws, bs, 1, 1), repeat=1)
print(f"naive loops: {t_naive:.1f} ms for output {y_naive.shape}")


# %% [markdown]
# ## 3. The direct kernel: one matrix product per kernel offset
#
# Turn the sum inside out. Instead of visiting output positions and summing over the kernel,
# visit the `Kh * Kw` kernel **offsets** `(i, j)` and, for each, handle *all* output positions
# at once:
#
# $$y[n, :, h, w] \mathrel{+}= W_{ij}\; x_{pad}[n, :, h s + i,\; w s + j]
# \qquad\text{with}\quad W_{ij} = w[:, :, i, j] \in \mathbb{R}^{C_{out} \times C_{in}}$$
#
# For a fixed offset, the pixels `x_pad[n, :, h*s + i, w*s + j]` for all `(n, h, w)` are just a
# **shifted, strided view** of the padded input — no copy. Put channels last (NHWC) and that
# view is a stack of `Cin`-vectors, one per output position; multiplying it by `W_ij.T` is one
# big matrix product `[N*Ho*Wo, Cin] @ [Cin, Cout]`. Nine offsets, nine products, summed: that
# is the whole convolution.

# %%
def conv2d_offsets(x, w, b=None, stride=1, padding=0):
    m = Conv2dMeta(x.shape, w.shape, stride, padding, None if b is None else b.shape)
    xp = pad_hw(x, m.pad_h, m.pad_w).transpose(0, 2, 3, 1)          # NHWC view
    y = np.zeros((m.batch, m.out_h, m.out_w, m.out_channels), dtype=x.dtype)
    for i in range(m.kernel_h):
        for j in range(m.kernel_w):
            rows = slice(i, i + m.stride_h * (m.out_h - 1) + 1, m.stride_h)
            cols = slice(j, j + m.stride_w * (m.out_w - 1) + 1, m.stride_w)
            y += xp[:, rows, cols, :] @ w[:, :, i, j].T               # [N,Ho,Wo,Cin] @ [Cin,Cout]
    if b is not None:
        y += b
    return y.transpose(0, 3, 1, 2)                                  # back to NCHW


y_offsets = conv2d_offsets(xs, ws, bs, 1, 1)
assert np.allclose(y_offsets, y_naive)
t_offsets = best_ms(lambda: conv2d_offsets(xs, ws, bs, 1, 1))
print(f"per-offset GEMMs: {t_offsets:.2f} ms   ({t_naive / t_offsets:.0f}x faster than loops)")

# %% [markdown]
# ## 4. im2col as a strided view
#
# The classic alternative gathers, for every output position, the whole `Cin x Kh x Kw` window
# into one row of a matrix — the **im2col** ("image to columns") matrix, `[N*Ho*Wo, Cin*Kh*Kw]`
# — and then does a *single* GEMM with the weight reshaped to `[Cout, Cin*Kh*Kw]`.
#
# NumPy can build all windows without copying anything: `sliding_window_view` (a friendly face
# of `as_strided`) returns a 6-D *view* `[N, Cin, Ho, Wo, Kh, Kw]` whose strides simply point
# back into the input. Here it is on a 4x4 one-channel image with a 2x2 kernel:

# %%
img = np.arange(16.0).reshape(1, 1, 4, 4)
view = sliding_window_view(img, (2, 2), axis=(2, 3))     # [1, 1, 3, 3, 2, 2]
print("view shape", view.shape, " strides (bytes)", view.strides)
assert np.shares_memory(view, img)                       # a view: nothing was copied yet

cols = view.transpose(0, 2, 3, 1, 4, 5).reshape(9, 4)    # [N*Ho*Wo, Cin*Kh*Kw]: now a copy
assert not np.shares_memory(cols, img)

fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.6), gridspec_kw={"width_ratios": [4, 4]})
figures.draw_number_grid(axes[0], img[0, 0], "input (4x4)", highlight=((1, 1), (2, 2)))
figures.draw_number_grid(axes[1], cols, "im2col matrix (9 x 4)", highlight=((4, 0), (1, 4)))
axes[1].set_ylabel("output position")
axes[1].set_xlabel("kernel offset")
plt.tight_layout()
plt.show()
# Row 4 is output position (1, 1): the window x[1:3, 1:3].
assert list(cols[4]) == [5, 6, 9, 10]


# %% [markdown]
# Every input pixel appears in up to `Kh * Kw` rows: the matrix is (about) **9 times** the size
# of the input for a 3x3 kernel. The view was free; the `reshape` that makes it a real matrix
# for BLAS is a copy of all of that.

# %%
def conv2d_im2col(x, w, b=None, stride=1, padding=0):
    m = Conv2dMeta(x.shape, w.shape, stride, padding, None if b is None else b.shape)
    xp = pad_hw(x, m.pad_h, m.pad_w)
    v = sliding_window_view(xp, (m.kernel_h, m.kernel_w), axis=(2, 3))
    v = v[:, :, ::m.stride_h, ::m.stride_w]                           # [N,Cin,Ho,Wo,Kh,Kw]
    cols = v.transpose(0, 2, 3, 1, 4, 5).reshape(m.batch * m.patches, m.kernel_elems)
    y = cols @ w.reshape(m.out_channels, -1).T                        # one GEMM
    if b is not None:
        y += b
    return y.reshape(m.batch, m.out_h, m.out_w, m.out_channels).transpose(0, 3, 1, 2)


y_im2col = conv2d_im2col(xs, ws, bs, 1, 1)
assert np.allclose(y_im2col, y_offsets)
assert np.allclose(conv2d_im2col(xs, ws, bs, (2, 1), 2), conv2d_offsets(xs, ws, bs, (2, 1), 2))
t_im2col = best_ms(lambda: conv2d_im2col(xs, ws, bs, 1, 1))
print(f"im2col + one GEMM: {t_im2col:.2f} ms")

# %% [markdown]
# ### Exercise 3.2 — the im2col matrix
#
# Write `im2col(x, kh, kw, stride, padding)` for an NCHW array `x`: the matrix
# `[N*Ho*Wo, C*kh*kw]` whose row `(n, h, w)` is the zero-padded window under output pixel
# `(h, w)` of image `n`, flattened in `(c, i, j)` order, so that `im2col(x, ...) @
# w.reshape(Cout, -1).T` is the convolution. The checker compares it with the definition
# written as loops, with PyTorch's `unfold` (when installed), and checks that one GEMM with it
# gives the package's `conv2d_forward`.

# %%
def im2col(x, kh, kw, stride=1, padding=0):
    """im2col of x [N, C, H, W]: [N*Ho*Wo, C*kh*kw], rows in (n, h, w) order."""
    ### BEGIN SOLUTION
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    n, c, ho, wo = windows.shape[:4]
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * kh * kw)
    ### END SOLUTION


# %% tags=["checker"]
try:
    import torch
except ImportError:
    torch = None

check_rng = np.random.default_rng(32)
for _ in range(12):
    n, c, cout = (int(v) for v in check_rng.integers(1, 4, 3))
    kh, kw = (int(v) for v in check_rng.integers(1, 4, 2))
    stride, padding = int(check_rng.integers(1, 3)), int(check_rng.integers(0, 3))
    h, w = kh + int(check_rng.integers(0, 5)), kw + int(check_rng.integers(0, 5))
    x_check = check_rng.standard_normal((n, c, h, w))
    meta_check = Conv2dMeta(x_check.shape, (cout, c, kh, kw), stride, padding)
    cols_check = np.asarray(im2col(x_check, kh, kw, stride, padding))
    rows = n * meta_check.out_h * meta_check.out_w
    assert cols_check.shape == (rows, c * kh * kw), f"shape {cols_check.shape}"
    xp_check = pad_hw(x_check, padding, padding)
    for row, (b, i, j) in enumerate(np.ndindex(n, meta_check.out_h, meta_check.out_w)):
        window = xp_check[b, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
        assert np.array_equal(cols_check[row], window.reshape(-1)), f"row {row} = {(b, i, j)}"
    if torch is not None:
        unfolded = torch.nn.functional.unfold(torch.from_numpy(x_check), (kh, kw),
                                              padding=padding, stride=stride)
        assert np.array_equal(cols_check, unfolded.transpose(1, 2).reshape(rows, -1).numpy())
    w_check = check_rng.standard_normal((cout, c, kh, kw))
    y_check = (cols_check @ w_check.reshape(cout, -1).T).reshape(
        n, meta_check.out_h, meta_check.out_w, cout).transpose(0, 3, 1, 2)
    assert np.allclose(y_check, conv2d_forward(x_check, w_check, None, meta_check))
print("Exercise 3.2: im2col matches the definition" + (", torch's unfold" if torch else ""),
      "and gives conv2d_forward with one GEMM")

# %% [markdown]
# ## 5. Where the time goes
#
# Time the two halves of im2col separately, at the size of the second convolution of PyTorch's
# MNIST example (`x [N, 32, 26, 26]`, `w [64, 32, 3, 3]`, float32; we take a batch of `N = 16`
# instead of 64 to keep this notebook quick): building the matrix, and multiplying it.

# %%
xb = rng.standard_normal((16, 32, 26, 26), dtype=np.float32)
wb = rng.standard_normal((64, 32, 3, 3), dtype=np.float32)
mb = Conv2dMeta(xb.shape, wb.shape)


def im2col_copy():
    v = sliding_window_view(xb, (3, 3), axis=(2, 3))
    return v.transpose(0, 2, 3, 1, 4, 5).reshape(mb.batch * mb.patches, mb.kernel_elems)


cols_b = im2col_copy()
w_mat = np.ascontiguousarray(wb.reshape(64, -1).T)
t_copy = best_ms(im2col_copy)
t_gemm = best_ms(lambda: cols_b @ w_mat)
gflop = 2 * cols_b.shape[0] * cols_b.shape[1] * 64 / 1e9
print(f"im2col matrix: {cols_b.nbytes / 2**20:.0f} MiB (input: {xb.nbytes / 2**20:.1f} MiB)")
print(f"building it: {t_copy:.1f} ms   the GEMM ({gflop:.2f} GFLOP): {t_gemm:.1f} ms")

# %% [markdown]
# On the machines this course was written on, the copy costs about as much as the GEMM or more:
# its 9x-inflated matrix is written once and read once, through a gather whose innermost
# dimension is only 3 floats long. A GEMM does ~300 flops per element it reads here, so it
# runs at the speed of the arithmetic; the copy does none, so it runs at the speed of memory.
#
# The direct kernel of section 3 copies nothing per offset — but it has costs of its own: each
# of its nine GEMMs has a short inner dimension (`K = Cin = 32`, against `288` for im2col), so
# it reads and writes its big output `[N*Ho*Wo, Cout]` nine times, and the `y += ...` adds
# another pass each time. **Memory traffic, not arithmetic, is what to optimise.** The package
# kernel, `tinytrain.kernels.cpu.conv2d`, does three things about it:
#
# 1. **Channels first, padded, once.** The input is copied once into a zero-padded
#    `[Cin, N, Hp, Wp]` buffer and read as a matrix `[Cin, N*Hp*Wp]`.
# 2. **Shifts are column offsets.** With stride 1, the pixel under kernel offset `(i, j)` for
#    output `(n, h, w)` sits exactly `i*Wp + j` columns to the right of the one for offset
#    `(0, 0)`. So each offset's operand is a plain slice of columns of that matrix — a 2-D view
#    with an ordinary leading dimension, which BLAS reads in place. The price is computing
#    outputs on the whole padded grid `Hp x Wp` and dropping the extra rows and columns
#    (1.17x the work for 26x26 inputs) — cheaper than any copy.
# 3. **Blocks of images.** The loop over the nine offsets runs on a few images at a time, so
#    that block's input columns, its accumulator and the GEMM's result stay in the CPU caches
#    while the nine products are summed; each block is written to the NCHW output (plus bias)
#    once.
#
# The column-shift trick, checked on a small example:

# %%
xt_small = rng.standard_normal((2, 3, 5, 6))
m_small = Conv2dMeta(xt_small.shape, (4, 3, 3, 3))
flat = xt_small.transpose(1, 0, 2, 3).reshape(3, -1)          # [Cin, N*H*W]  (no padding here)
i, j = 2, 1
shifted = flat[:, i * 6 + j:][:, :2 * 5 * 6 - (i * 6 + j)]     # the columns, shifted by i*W + j
grid = np.zeros((3, 2 * 5 * 6))
grid[:, :shifted.shape[1]] = shifted
grid = grid.reshape(3, 2, 5, 6)[:, :, :m_small.out_h, :m_small.out_w]  # keep the real outputs
expected = xt_small[:, :, i:i + m_small.out_h, j:j + m_small.out_w].transpose(1, 0, 2, 3)
assert np.array_equal(grid, expected)
print("offset (2, 1) = columns shifted by", i * 6 + j, "- same pixels as the strided window")

# %% [markdown]
# Now all versions on the small case, and the package kernel against PyTorch at the MNIST
# size. (Timings depend on the machine and on what else it is doing; the chart is for
# orientation, and nothing here asserts on a time.) `bench/conv_cpu.py` measures the forward
# *and* the three backward ops carefully, with pinned threads.

# %%
y_pkg = conv2d_forward(xs, ws, bs, Conv2dMeta(xs.shape, ws.shape, 1, 1, bs.shape))
assert np.allclose(y_pkg, y_naive)
t_pkg = best_ms(lambda: conv2d_forward(xs, ws, bs, Conv2dMeta(xs.shape, ws.shape, 1, 1, (16,))))

small = {"naive loops": t_naive, "per-offset GEMMs": t_offsets, "im2col": t_im2col,
         "tinytrain kernel": t_pkg}
big = {"per-offset GEMMs (NHWC)": best_ms(lambda: conv2d_offsets(xb, wb)),
       "im2col": best_ms(lambda: conv2d_im2col(xb, wb)),
       "tinytrain kernel": best_ms(lambda: conv2d_forward(xb, wb, None, mb))}
assert np.allclose(conv2d_forward(xb, wb, None, mb), conv2d_im2col(xb, wb), atol=1e-3)
try:
    import torch

    xb_t, wb_t = torch.from_numpy(xb), torch.from_numpy(wb)
    with torch.no_grad():
        big["PyTorch"] = best_ms(lambda: torch.nn.functional.conv2d(xb_t, wb_t))
        ref = torch.nn.functional.conv2d(xb_t, wb_t).numpy()
    assert np.allclose(conv2d_forward(xb, wb, None, mb), ref, atol=1e-3)
except ImportError:
    print("PyTorch is not installed: its bar is skipped")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
for ax, (title, times) in zip(axes, [("x [4,8,20,20], w [16,8,3,3], float64", small),
                                     ("x [16,32,26,26], w [64,32,3,3], float32", big)]):
    bars = ax.barh(list(times), list(times.values()), color="tab:blue")
    ax.bar_label(bars, fmt="%.1f ms", padding=3)
    ax.set_xscale("log")
    ax.set_title(f"forward, {title}", fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(right=max(times.values()) * 8)
plt.tight_layout()
plt.show()

# %% [markdown]
# What `bench/conv_cpu.py` measured on the 2-core machine this chapter was written on
# (OpenBLAS 0.3.31, `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` unset, one thread for both
# libraries, best of 12 interleaved rounds). The machine was shared with other jobs at the time,
# so the absolute times are inflated; the ratios are the useful part:
#
# | `x [64,32,26,26]`, `w [64,32,3,3]` | tinytrain | PyTorch (oneDNN) | ratio |
# | --- | ---: | ---: | ---: |
# | forward | 37.5 ms | 22.4 ms | 1.7 |
# | dX | 37.6 ms | 18.6 ms | 2.0 |
# | dW | 33.9 ms | 19.4 ms | 1.7 |
# | forward + backward (autograd) | 118.2 ms | 64.9 ms | 1.8 |
#
# With two BLAS threads on a *busy* two-core machine, every one of the kernel's ~150 GEMM calls
# per op waits for a second thread that another process is holding: many medium-sized
# multi-threaded BLAS calls are fragile under oversubscription, where PyTorch's single oneDNN
# call per op is not. On a quiet machine, two threads help both libraries alike.
#
# Lessons, in the order they cost time:
#
# * the **copies** (im2col's matrix, a window copy per offset, the `y += ...` pass, layout
#   changes) matter as much as the flops — count bytes moved, not only multiplies;
# * a GEMM with a short inner dimension (`K = Cin`) is itself memory-bound, so keep its operands
#   in cache (blocks of images) and let it read views in place (the column-shift trick);
# * one layout change in (NCHW to padded channels-first) and one out (back to NCHW, with the bias
#   added on the way) is the whole price of the layout — do it once, not per offset.

# %% [markdown]
# ## 6. The backward pass is made of convolutions too
#
# Given `dY = dL/dy` (shape `[N, Cout, Ho, Wo]`), we need three gradients. Write the forward
# once more (stride 1, no padding, to keep indices readable):
#
# $$y[n, o, h, w] = \sum_{c, i, j} w[o, c, i, j]\; x[n, c, h + i, w + j] + b[o]$$
#
# **db.** `b[o]` is added to every output of channel `o`, so
# $\;db[o] = \sum_{n, h, w} dY[n, o, h, w]$.
#
# **dW.** `w[o, c, i, j]` multiplies `x[n, c, h + i, w + j]` in output `(n, o, h, w)`, so
#
# $$dW[o, c, i, j] = \sum_{n, h, w} dY[n, o, h, w]\; x[n, c, h + i, w + j]$$
#
# — a cross-correlation of `x` with `dY` used as the kernel (summing over the batch instead of
# over channels): **dW is a convolution of the input with the output gradient.**
#
# **dX.** Input pixel `x[n, c, u, v]` was used by every output `(h, w) = (u - i, v - j)` that
# exists, with weight `w[o, c, i, j]`:
#
# $$dX[n, c, u, v] = \sum_{o, i, j} w[o, c, i, j]\; dY[n, o, u - i, v - j]$$
#
# Substitute `i' = Kh - 1 - i`, `j' = Kw - 1 - j`: this is a cross-correlation of `dY`,
# zero-padded by `K - 1` on every side, with the kernel **flipped** in both spatial directions
# and with `Cin` and `Cout` swapped: **dX is a "full" convolution of dY with the flipped
# kernel.** (With a stride, insert `s - 1` zeros between the rows and columns of `dY` first.)
#
# Both statements are one line each with the forward we already have:

# %%
x6 = rng.standard_normal((2, 3, 7, 6))
w6 = rng.standard_normal((4, 3, 3, 2))
m6 = Conv2dMeta(x6.shape, w6.shape)
dy6 = rng.standard_normal(m6.output_shape)

# dX: pad dY by K-1, flip the kernel, swap its in/out channels, correlate.
w_flipped = w6[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)               # [Cin, Cout, Kh, Kw]
dx_full = conv2d_offsets(dy6, w_flipped, padding=(m6.kernel_h - 1, m6.kernel_w - 1))

# dW: correlate x with dY, batch playing the role of channels: [Cin, N, H, W] * [Cout, N, Ho, Wo].
dw_corr = conv2d_offsets(x6.transpose(1, 0, 2, 3), dy6.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)

db_sum = dy6.sum(axis=(0, 2, 3))
print("dX", dx_full.shape, " dW", dw_corr.shape, " db", db_sum.shape)
assert dx_full.shape == x6.shape and dw_corr.shape == w6.shape


# %% [markdown]
# Check them against finite differences: nudge one number by `±eps`, see how
# `L = sum(y * dY)` moves. (Float64, so the agreement is to many digits.)

# %%
def loss6(xv, wv, bv):
    return (conv2d_offsets(xv, wv, bv) * dy6).sum()


b6 = rng.standard_normal(4)
eps = 1e-6
for name, arr, analytic, idx in [("dX", x6, dx_full, (1, 2, 3, 4)),
                                 ("dX", x6, dx_full, (0, 0, 0, 5)),
                                 ("dW", w6, dw_corr, (3, 1, 2, 0)),
                                 ("db", b6, db_sum, (2,))]:
    old = arr[idx]
    arr[idx] = old + eps
    up = loss6(x6, w6, b6)
    arr[idx] = old - eps
    down = loss6(x6, w6, b6)
    arr[idx] = old
    numeric = (up - down) / (2 * eps)
    print(f"{name}{idx}: analytic {analytic[idx]: .8f}   numeric {numeric: .8f}")
    assert abs(numeric - analytic[idx]) < 1e-6

# %% [markdown]
# The package computes the same three gradients with three separate ops, each run only when
# autograd's `ctx.needs_input_grad` asks for it (a frozen layer needs no `dW`; the first layer
# needs no `dX`). They reuse the forward's tricks: `conv2d_backward_input` adds
# `W_ij.T @ dY` into the window of offset `(i, j)` of a padded gradient buffer (the scatter
# form of the full convolution above), `conv2d_backward_weight` computes `dY @ window(i, j).T`
# per offset, and `conv2d_backward_bias` is the sum. And `setup_context` saves only what those
# ops read: `x` only if `dW` is needed, `w` only if `dX` is.

# %%
for stride, padding in [(1, 0), (2, 1), ((2, 1), (0, 2))]:
    m = Conv2dMeta(x6.shape, w6.shape, stride, padding, (4,))
    g = rng.standard_normal(m.output_shape)
    dx_pkg = conv2d_backward_input(g, w6, m)
    dw_pkg = conv2d_backward_weight(g, x6, m)
    # Reference: differentiate the naive forward with finite differences along random directions.
    for arr, grad in [(x6, dx_pkg), (w6, dw_pkg)]:
        direction = rng.standard_normal(arr.shape)
        arr += eps * direction
        up = (conv2d_naive(x6, w6, None, stride, padding) * g).sum()
        arr -= 2 * eps * direction
        down = (conv2d_naive(x6, w6, None, stride, padding) * g).sum()
        arr += eps * direction
        assert abs((up - down) / (2 * eps) - (grad * direction).sum()) < 1e-5
    assert np.allclose(conv2d_backward_bias(g), g.sum(axis=(0, 2, 3)))
m = Conv2dMeta(x6.shape, w6.shape)
assert np.allclose(conv2d_backward_input(dy6, w6, m), dx_full)
assert np.allclose(conv2d_backward_weight(dy6, x6, m), dw_corr)
print("package backward ops agree with the derivation and with finite differences")

# %% [markdown]
# ### Exercise 3.3 — the weight gradient, one matrix product per offset
#
# Section 6 found `dW[o, c, i, j] = sum over (n, h, w) of dY[n, o, h, w] * x_pad[n, c, h*s + i,
# w*s + j]`. For one kernel offset `(i, j)` that is one matrix product: `dY` as a matrix
# `[Cout, N*Ho*Wo]` times the shifted (and strided) window of the padded input as a matrix
# `[N*Ho*Wo, Cin]` gives `dW[:, :, i, j]`, a `[Cout, Cin]` block. Write
# `conv2d_weight_grad(x, dy, kh, kw, stride, padding)` that way — `kh * kw` products, no loop
# over pixels. The checker compares it with the package's `conv2d_backward_weight` and with
# PyTorch's autograd (when installed), on random shapes, strides and paddings.

# %%
def conv2d_weight_grad(x, dy, kh, kw, stride=1, padding=0):
    """dL/dW [Cout, Cin, kh, kw] of a convolution of x [N, Cin, H, W] with output gradient dy
    [N, Cout, Ho, Wo]: one matrix product per kernel offset."""
    ### BEGIN SOLUTION
    cin, (n, cout, ho, wo) = x.shape[1], dy.shape
    xp = pad_hw(x, padding, padding)
    dy_mat = dy.transpose(1, 0, 2, 3).reshape(cout, n * ho * wo)
    dw = np.zeros((cout, cin, kh, kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i, i + stride * (ho - 1) + 1, stride)
            cols = slice(j, j + stride * (wo - 1) + 1, stride)
            window = xp[:, :, rows, cols]                          # [N, Cin, Ho, Wo]
            dw[:, :, i, j] = dy_mat @ window.transpose(0, 2, 3, 1).reshape(n * ho * wo, cin)
    return dw
    ### END SOLUTION


# %% tags=["checker"]
try:
    import torch
except ImportError:
    torch = None

check_rng = np.random.default_rng(33)
for _ in range(10):
    n, cin, cout = (int(v) for v in check_rng.integers(1, 4, 3))
    kh, kw = (int(v) for v in check_rng.integers(1, 4, 2))
    stride, padding = int(check_rng.integers(1, 3)), int(check_rng.integers(0, 3))
    x_check = check_rng.standard_normal((n, cin, kh + int(check_rng.integers(0, 6)),
                                         kw + int(check_rng.integers(0, 6))))
    meta_check = Conv2dMeta(x_check.shape, (cout, cin, kh, kw), stride, padding)
    dy_check = check_rng.standard_normal(meta_check.output_shape)
    dw_mine = conv2d_weight_grad(x_check, dy_check, kh, kw, stride, padding)
    assert np.shape(dw_mine) == (cout, cin, kh, kw), f"shape {np.shape(dw_mine)}"
    assert np.allclose(dw_mine, conv2d_backward_weight(dy_check, x_check, meta_check))
    if torch is not None:
        w_t = torch.zeros((cout, cin, kh, kw), dtype=torch.float64, requires_grad=True)
        out_t = torch.nn.functional.conv2d(torch.from_numpy(x_check), w_t, stride=stride,
                                           padding=padding)
        out_t.backward(torch.from_numpy(dy_check))
        assert np.allclose(dw_mine, w_t.grad.numpy())
print("Exercise 3.3: conv2d_weight_grad matches conv2d_backward_weight"
      + (" and PyTorch" if torch else ""))

# %% [markdown]
# ## 7. `tinytrain.nn.Conv2d`, pooling, and PyTorch
#
# The layer wraps the kernels in an autograd `Function` (`tinytrain/nn/conv.py`) and
# initialises its parameters like PyTorch: `kaiming_uniform_(w, a=sqrt(5))`, which is
# `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` with `fan_in = Cin*Kh*Kw`, and the bias from the same
# range. With the same weights it must give PyTorch's numbers, forward and backward:

# %%
tt.manual_seed(0)
conv = nn.Conv2d(3, 8, 3, stride=1, padding=1)
print(conv, "\nweight", conv.weight.shape, " bias", conv.bias.shape)
bound = 1 / np.sqrt(3 * 3 * 3)
assert np.abs(conv.weight.numpy()).max() <= bound

x7 = rng.standard_normal((2, 3, 9, 9), dtype=np.float32)
x7_tt = tt.tensor(x7, requires_grad=True)
out = F.max_pool2d(conv(x7_tt).relu(), 2)                  # [2, 8, 4, 4]
out.sum().backward()

try:
    import torch

    conv_t = torch.nn.Conv2d(3, 8, 3, stride=1, padding=1)
    with torch.no_grad():
        conv_t.weight.copy_(torch.from_numpy(conv.weight.numpy()))
        conv_t.bias.copy_(torch.from_numpy(conv.bias.numpy()))
    x7_t = torch.tensor(x7, requires_grad=True)
    out_t = torch.nn.functional.max_pool2d(torch.relu(conv_t(x7_t)), 2)
    out_t.sum().backward()
    checks = {"output": (out.numpy(), out_t.detach().numpy()),
              "dX": (x7_tt.grad.numpy(), x7_t.grad.numpy()),
              "dW": (conv.weight.grad.numpy(), conv_t.weight.grad.numpy()),
              "db": (conv.bias.grad.numpy(), conv_t.bias.grad.numpy())}
    for name, (ours, theirs) in checks.items():
        err = np.abs(ours - theirs).max()
        print(f"{name:6s} max |tinytrain - PyTorch| = {err:.1e}")
        assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-5)
except ImportError:
    print("PyTorch is not installed: the comparison with it is skipped")

# %% [markdown]
# **Max pooling** keeps the largest value of each window, and its gradient goes to that
# arg-max alone. When several values tie, PyTorch's CPU kernel scans the window row by row
# and keeps the *first* maximum (it only moves on a strictly greater value); tinytrain does the
# same, so gradients agree exactly even on images with flat regions — common after a ReLU,
# where whole windows are zero.

# %%
flat_img = tt.tensor(np.array([[[[0.0, 0.0, 2.0, 2.0],
                                 [0.0, 0.0, 2.0, 1.0]]]]), requires_grad=True)
F.max_pool2d(flat_img, 2).sum().backward()
print(flat_img.grad.numpy()[0, 0])
assert flat_img.grad.numpy()[0, 0].tolist() == [[1, 0, 1, 0], [0, 0, 0, 0]]

# %% [markdown]
# ### Exercise 3.4 — the backward pass of max pooling
#
# Write `max_pool2d_backward(x, grad_out, k)` for `k x k` max pooling with stride `k` and no
# padding: each window's gradient `grad_out[n, c, h, w]` goes to the position of the window's
# **first** maximum in row-by-row order, every other input gets 0, and so do the last rows
# and columns when `k` does not divide `H` or `W` (pooling drops them). NumPy's `argmax`
# returns the first maximum, which is the tie rule we want. The checker compares with the
# package's `F.max_pool2d` backward and with PyTorch (when installed), on inputs with many
# ties.

# %%
def max_pool2d_backward(x, grad_out, k):
    """dL/dx [N, C, H, W] of k x k max pooling (stride k) of x, given grad_out [N, C, H//k,
    W//k]; ties go to the first maximum of the window."""
    ### BEGIN SOLUTION
    n, c, h, w = x.shape
    ho, wo = h // k, w // k
    windows = x[:, :, :ho * k, :wo * k].reshape(n, c, ho, k, wo, k).transpose(0, 1, 2, 4, 3, 5)
    first = windows.reshape(n, c, ho, wo, k * k).argmax(axis=-1)
    grads = np.zeros((n, c, ho, wo, k * k), dtype=x.dtype)
    np.put_along_axis(grads, first[..., None], grad_out[..., None], axis=-1)
    dx = np.zeros_like(x)
    dx[:, :, :ho * k, :wo * k] = grads.reshape(n, c, ho, wo, k, k).transpose(
        0, 1, 2, 4, 3, 5).reshape(n, c, ho * k, wo * k)
    return dx
    ### END SOLUTION


# %% tags=["checker"]
try:
    import torch
except ImportError:
    torch = None

check_rng = np.random.default_rng(34)
for trial in range(12):
    k = int(check_rng.integers(1, 4))
    shape = (int(check_rng.integers(1, 3)), int(check_rng.integers(1, 4)),
             k * int(check_rng.integers(1, 4)) + int(check_rng.integers(0, k)),
             k * int(check_rng.integers(1, 4)) + int(check_rng.integers(0, k)))
    # small integers (and, every other trial, a ReLU): windows with ties everywhere
    x_check = check_rng.integers(-2, 3, shape).astype(np.float32)
    if trial % 2:
        x_check = np.maximum(x_check, 0)
    g_check = check_rng.standard_normal((shape[0], shape[1], shape[2] // k, shape[3] // k))
    g_check = g_check.astype(np.float32)
    dx_mine = max_pool2d_backward(x_check, g_check, k)
    leaf = tt.tensor(x_check, requires_grad=True)
    (F.max_pool2d(leaf, k) * tt.tensor(g_check)).sum().backward()
    assert np.shape(dx_mine) == shape, f"shape {np.shape(dx_mine)}"
    assert np.array_equal(dx_mine, leaf.grad.numpy()), f"x =\n{x_check}"
    if torch is not None:
        x_t = torch.tensor(x_check, requires_grad=True)
        torch.nn.functional.max_pool2d(x_t, k).backward(torch.from_numpy(g_check))
        assert np.array_equal(dx_mine, x_t.grad.numpy())
print("Exercise 3.4: max_pool2d_backward matches F.max_pool2d" + (" and PyTorch" if torch else ""),
      "(ties included)")

# %% [markdown]
# ## 8. Filters that look learned
#
# The first layer of a trained CNN tends to learn small edge and stroke detectors. The classic
# hand-made ones are the **Sobel** filters: left-minus-right (responds to vertical edges) and
# its transpose (horizontal edges). As a 2-channel `Conv2d` weight `[2, 1, 3, 3]`, applied to a
# digit from the bundled mini MNIST (or, without the bundle, a digit we draw):

# %%
try:
    from tinytrain.data import MNISTMini

    digit, label = MNISTMini(train=False)[0]
    source = f"MNIST test digit, label {label}"
except (ImportError, FileNotFoundError) as err:
    print("bundled mini MNIST not available, drawing a digit instead:", err)
    rr, cc = np.mgrid[:28, :28]
    ring = np.abs(np.hypot(rr - 14, (cc - 14) * 1.4) - 8) < 2       # a zero
    digit = ring.astype(np.float32)[None]
    source = "a synthetic zero"

sobel_x = np.array([[1, 0, -1], [2, 0, -2], [1, 0, -1]], dtype=np.float32)
edges = nn.Conv2d(1, 2, 3, padding=1, bias=False)
edges.weight.data[...] = np.stack([sobel_x, sobel_x.T])[:, None]   # [2, 1, 3, 3]
with tt.no_grad():
    response = edges(tt.tensor(digit[None])).numpy()[0]             # [2, 28, 28]
magnitude = np.hypot(response[0], response[1])

fig, axes = plt.subplots(1, 4, figsize=(12, 3.3))
panels = [(digit[0], "input: " + source, "gray"),
          (response[0], "Sobel x (vertical edges)", "RdBu"),
          (response[1], "Sobel y (horizontal edges)", "RdBu"),
          (magnitude, "edge magnitude", "magma")]
for ax, (img, title, cmap) in zip(axes, panels):
    lim = np.abs(img).max()
    ax.imshow(img, cmap=cmap, vmin=-lim if cmap == "RdBu" else None, vmax=lim)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
plt.tight_layout()
plt.show()

assert response.shape == (2, 28, 28)
# Edges only where the digit is: the blank border of the image gives no response.
assert np.abs(response[:, :2, :]).max() == 0 and magnitude.max() > 1

# %% [markdown]
# A sanity check on a picture whose answer we know: a vertical step edge lights up Sobel-x in
# the two columns next to the step and leaves Sobel-y dark inside the image. (At the image's
# border the zero padding is itself an edge: the bright half's last column answers too.)

# %%
step = np.zeros((1, 1, 6, 6), dtype=np.float32)
step[..., 3:] = 1.0                                     # dark left half, bright right half
with tt.no_grad():
    r = edges(tt.tensor(step)).numpy()[0]
print(r[0])
inner = r[:, 1:-1, 1:-1]                               # away from the zero-padded border
assert np.array_equal(np.nonzero(inner[0][0])[0] + 1, [2, 3])  # the columns at the step
assert np.abs(inner[1]).max() == 0                     # no horizontal edge inside the image

# %% [markdown]
# ## Summary
#
# * A convolution layer is a cross-correlation: a weighted sum of each `Kh x Kw` window over
#   all input channels, one kernel per output channel. `Conv2dMeta` computes every size
#   (`out = (in + 2p - K) // s + 1`, H and W separately) and rejects shapes that do not fit,
#   naming the sizes.
# * Turning the sum inside out gives the **direct** kernel: `Kh * Kw` matrix products, one per
#   kernel offset, on shifted views of the input — no im2col matrix.
# * im2col is a zero-copy *view* until BLAS needs a matrix; then it is a 9x copy that can cost
#   as much as the GEMM. Memory traffic is what to optimise: channels-first padded layout,
#   offsets as column shifts, blocks of images that stay in cache.
# * The backward pass is three ops, each run only when needed: `dX` is a full convolution of
#   `dY` with the flipped kernel, `dW` a correlation of `x` with `dY`, `db` a sum.
# * `nn.Conv2d`, `F.conv2d`, `nn.MaxPool2d` / `F.max_pool2d` (PyTorch's tie rule) and
#   `F.avg_pool2d` match PyTorch.
#
# The production code is in [`tinytrain/kernels/cpu/conv2d.py`](../tinytrain/kernels/cpu/conv2d.py)
# (`Conv2dMeta`, the direct forward and the three backward ops),
# [`tinytrain/kernels/cpu/pool.py`](../tinytrain/kernels/cpu/pool.py) (pooling) and
# [`tinytrain/nn/conv.py`](../tinytrain/nn/conv.py) (the autograd Functions and the layers);
# `tests/test_conv2d.py` checks it against PyTorch over a grid of shapes, and
# `bench/conv_cpu.py` times it. Chapter 4 moves convolution to the GPU with an im2col kernel
# and cuBLAS — and checks it against this CPU kernel.
