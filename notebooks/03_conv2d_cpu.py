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
# 3. One matrix product per kernel offset — and why each offset's window is not one matrix.
# 4. im2col as a strided view: the famous "unfold, then one GEMM".
# 5. Where the time goes: im2col's copy against its GEMM, in flops per element.
# 6. The **column-shift kernel**: the padded input as one matrix `[Cin, N*Hp*Wp]`, each kernel
#    offset a shifted view of it, one GEMM per offset, no copy. About thirty lines, checked
#    against the package's `conv2d_forward`.
# 7. What the package adds to it — blocks of images, packing, sharding over the cores — each
#    one timed against the last, on one thread and on two, next to PyTorch.
# 8. The backward pass: `dX` is a *full* convolution with the flipped kernel, `dW` is a
#    correlation of `x` with `dY`, `db` is a sum — each checked numerically.
# 9. The `Conv2d` autograd `Function`: three backward ops, each run only when needed, and a
#    selective save; then `nn.Conv2d` against PyTorch.
# 10. Max pooling, forward and backward, with PyTorch's tie rule, as a `Function`.
# 11. Edge-detector filters applied to a real digit.
#
# Five exercises (3.1-3.5) ask you to write pieces yourself; each is checked against the
# package (and, where there is one, PyTorch's answer).

# %%
# %matplotlib inline
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import matplotlib.pyplot as plt
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from threadpoolctl import threadpool_limits

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

try:
    import torch  # the reference, when installed (the package never uses it)
except ImportError:
    torch = None

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


@contextmanager
def threads(n):
    # NumPy's BLAS, tinytrain's kernels and PyTorch all on n threads inside the block, so that
    # timings compare like with like; each gets its own setting back afterwards.
    tt_before, torch_before = tt.get_num_threads(), torch.get_num_threads() if torch else None
    with threadpool_limits(n, user_api="blas"):
        tt.set_num_threads(n)
        if torch:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            tt.set_num_threads(tt_before)
            if torch:
                torch.set_num_threads(torch_before)


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
#   their turn in the middle of a window (with stride 1 and `p = (K - 1) / 2`, `K` odd, the
#   output keeps the input's size).
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
def check_size(args, expected):
    # Your conv_output_size(*args) must return `expected`: say which call went wrong if not.
    call = f"conv_output_size{args}"
    try:
        got = conv_output_size(*args)
    except NotImplementedError:                  # the stub: not done yet
        raise
    except Exception as err:
        exact = args[1] == args[0] + 2 * args[3]
        raise AssertionError(
            f"{call} raised {type(err).__name__}: {err}; expected {expected}"
            + (" (the kernel exactly fills the padded input)" if exact else "")) from None
    assert got == expected, f"{call} returned {got!r}, expected {expected}"


check_size((28, 5, 2, 2), 14)
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
    check_size((h, kh, sh, ph), m_check.out_h)
    check_size((w, kw, sw, pw), m_check.out_w)
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
# ## 3. One matrix product per kernel offset
#
# Turn the sum inside out. Instead of visiting output positions and summing over the kernel,
# visit the `Kh * Kw` kernel **offsets** `(i, j)` and, for each, handle *all* output positions
# at once:
#
# $$y[n, :, h, w] \mathrel{+}= W_{ij}\; x_{pad}[n, :, h s + i,\; w s + j]
# \qquad\text{with}\quad W_{ij} = w[:, :, i, j] \in \mathbb{R}^{C_{out} \times C_{in}}$$
#
# For a fixed offset, the pixels `x_pad[n, :, h*s + i, w*s + j]` for all `(n, h, w)` are just a
# **shifted, strided view** of the padded input — no copy. Seen channels-last (NHWC) that view
# is an array `[N, Ho, Wo, Cin]`, a `Cin`-vector per output position, and `@ W_ij.T` maps each
# vector to its `Cout` outputs. Nine offsets, nine products, summed: that is the whole
# convolution.

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
print(f"per-offset products: {t_offsets:.2f} ms   ({t_naive / t_offsets:.0f}x faster than loops)")

# %% [markdown]
# Is each offset's product *one* big matrix product `[N*Ho*Wo, Cin] @ [Cin, Cout]`? Not
# quite, and the reason shapes the rest of the chapter. A BLAS matrix is a pointer, two sizes
# and one *leading dimension*: row `r` starts `r * ld` elements after row 0 (chapter 1). The
# window's rows are not evenly spaced: after the `Wo` pixels of one image row, the next output
# row starts `Wp` pixels further on (a padded row is `Wp = W + 2p` wide), not `Wo`. Even with
# the padded input stored as real, contiguous NHWC, the window cannot be flattened into one
# matrix without a copy, so NumPy's `@` treats it as a stack of `N * Ho` small `[Wo, Cin]`
# matrices, one image row each (or copies it). The whole padded input *is* one matrix; only
# the window is not:

# %%
xp_nhwc = np.ascontiguousarray(pad_hw(xs, 1, 1).transpose(0, 2, 3, 1))  # NHWC [4, 22, 22, 8]
win = xp_nhwc[:, 0:20, 1:21, :]                        # offset (0, 1) of a 3x3: [4, 20, 20, 8]
print("padded input", xp_nhwc.shape, "-> one matrix without a copy?",
      np.shares_memory(xp_nhwc.reshape(-1, 8), xp_nhwc))
print("its window  ", win.shape, "-> one matrix without a copy?",
      np.shares_memory(win.reshape(-1, 8), xp_nhwc), f"(rows {win.strides[2]} bytes apart,",
      f"but {win.strides[1] - win.shape[2] * win.strides[2]} extra bytes at every image-row end)")
assert np.shares_memory(xp_nhwc.reshape(-1, 8), xp_nhwc)
assert not np.shares_memory(win.reshape(-1, 8), xp_nhwc)

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
# Every input pixel appears in up to `Kh * Kw` rows: the matrix is up to **9 times** the size
# of the input for a 3x3 kernel (`Kh*Kw * Ho*Wo / (H*W)` times: a little less without padding).
# The view was free; the `reshape` that makes it a real matrix for BLAS is a copy of all of
# that.

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
# `[N*Ho*Wo, C*kh*kw]`, in `x`'s dtype, whose row `(n, h, w)` is the zero-padded window under
# output pixel `(h, w)` of image `n`, flattened in `(c, i, j)` order, so that `im2col(x, ...)
# @ w.reshape(Cout, -1).T` is the convolution. The checker compares it with the definition
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
for trial in range(12):
    n, c, cout = (int(v) for v in check_rng.integers(1, 4, 3))
    kh, kw = (int(v) for v in check_rng.integers(1, 4, 2))
    stride, padding = int(check_rng.integers(1, 3)), int(check_rng.integers(0, 3))
    h, w = kh + int(check_rng.integers(0, 5)), kw + int(check_rng.integers(0, 5))
    dtype = (np.float64, np.float32)[trial % 2]
    x_check = check_rng.standard_normal((n, c, h, w)).astype(dtype)
    meta_check = Conv2dMeta(x_check.shape, (cout, c, kh, kw), stride, padding)
    cols_check = np.asarray(im2col(x_check, kh, kw, stride, padding))
    rows = n * meta_check.out_h * meta_check.out_w
    where = (f"x {x_check.shape} {x_check.dtype}, kh={kh}, kw={kw}, stride={stride}, "
             f"padding={padding}")
    assert cols_check.shape == (rows, c * kh * kw), (
        f"{where}: shape {cols_check.shape}, expected {(rows, c * kh * kw)}")
    assert cols_check.dtype == x_check.dtype, (
        f"{where}: dtype {cols_check.dtype} for {x_check.dtype} input: keep x's dtype")
    xp_check = pad_hw(x_check, padding, padding)
    for row, (b, i, j) in enumerate(np.ndindex(n, meta_check.out_h, meta_check.out_w)):
        window = xp_check[b, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
        assert np.array_equal(cols_check[row], window.reshape(-1)), (
            f"{where}: row {row} (image {b}, output pixel ({i}, {j})) is "
            f"{np.round(cols_check[row], 3).tolist()}, expected the window "
            f"{np.round(window.reshape(-1), 3).tolist()} flattened in (c, i, j) order")
    if torch is not None:
        unfolded = torch.nn.functional.unfold(torch.from_numpy(x_check), (kh, kw),
                                              padding=padding, stride=stride)
        assert np.array_equal(cols_check, unfolded.transpose(1, 2).reshape(rows, -1).numpy()), (
            f"{where}: differs from torch's unfold")
    w_check = check_rng.standard_normal((cout, c, kh, kw)).astype(dtype)
    y_check = (cols_check @ w_check.reshape(cout, -1).T).reshape(
        n, meta_check.out_h, meta_check.out_w, cout).transpose(0, 3, 1, 2)
    assert np.allclose(y_check, conv2d_forward(x_check, w_check, None, meta_check),
                       rtol=1e-4, atol=1e-5), (
        f"{where}: one GEMM with it differs from conv2d_forward")
print("Exercise 3.2: im2col matches the definition" + (", torch's unfold" if torch else ""),
      "and gives conv2d_forward with one GEMM")

# %% [markdown]
# ## 5. Where the time goes
#
# Time the two halves of im2col separately, at the size of the second convolution of PyTorch's
# MNIST example (`x [N, 32, 26, 26]`, `w [64, 32, 3, 3]`, float32; we take a batch of `N = 16`
# instead of 64 to keep this notebook quick): building the matrix, and multiplying it. Both
# run on one thread (`threads(1)`, defined at the top, holds NumPy's BLAS, tinytrain and
# PyTorch at one thread), so the comparison is fair.

# %%
xb = rng.standard_normal((16, 32, 26, 26), dtype=np.float32)
wb = rng.standard_normal((64, 32, 3, 3), dtype=np.float32)
mb = Conv2dMeta(xb.shape, wb.shape)


def im2col_copy():
    v = sliding_window_view(xb, (3, 3), axis=(2, 3))
    return v.transpose(0, 2, 3, 1, 4, 5).reshape(mb.batch * mb.patches, mb.kernel_elems)


cols_b = im2col_copy()
w_mat = np.ascontiguousarray(wb.reshape(64, -1).T)
with threads(1):
    t_copy = best_ms(im2col_copy)
    t_gemm = best_ms(lambda: cols_b @ w_mat)
(M, K), N_out = cols_b.shape, w_mat.shape[1]
flops = 2 * M * K * N_out
flops_per_element = flops / (M * K + K * N_out)       # per element of the two inputs it reads
print(f"im2col matrix [{M}, {K}]: {cols_b.nbytes / 2**20:.0f} MiB",
      f"(input: {xb.nbytes / 2**20:.1f} MiB, {cols_b.size / xb.size:.1f}x)")
print(f"the GEMM [{M}, {K}] @ [{K}, {N_out}]: {flops / 1e9:.2f} GFLOP,",
      f"{flops_per_element:.0f} flops per element it reads")
print(f"one thread: building the matrix {t_copy:.1f} ms, the GEMM {t_gemm:.1f} ms",
      f"(the copy takes {t_copy / t_gemm:.0%} of the GEMM's time)")
assert 120 < flops_per_element < 135

# %% [markdown]
# The GEMM does about `2MKN / (MK + KN)` ≈ 127 flops for every element it reads (printed
# above), so a good BLAS keeps the arithmetic units busy and runs at the speed of the
# arithmetic. The copy does no arithmetic at all: it writes a matrix several times the size
# of the input (printed above) through a gather whose innermost run is only `Kw = 3` floats,
# and runs at the speed of memory. The two times printed above show what that means on this
# machine: the copy, with no arithmetic in it, against the GEMM, with all of it.
#
# The per-offset kernel of section 3 copies nothing — but each offset's product is a stack of
# `N * Ho` tiny GEMMs (`[Wo, Cin] @ [Cin, Cout]`, 24 rows each here), each with a short inner
# dimension (`K = Cin = 32`, against `288` for im2col); and the `y += ...` reads and writes the
# whole output once more for every offset. **Memory traffic, not arithmetic, is what to
# optimise.** The next two sections build, step by step, what the package kernel
# (`tinytrain.kernels.cpu.conv2d`) does about it.
#
# ## 6. The column-shift kernel: one GEMM per offset, on a view
#
# Section 3's window could not be one matrix because an output row is narrower than a padded
# input row. So make them equally wide: **compute outputs on the whole padded grid**.
#
# 1. **Channels first, padded, once.** Copy the input once into a zero-padded `[Cin, N, Hp, Wp]`
#    buffer and read it as a matrix `X = [Cin, N*Hp*Wp]`: one row per channel, one column per
#    padded pixel. Column `c = n*Hp*Wp + h*Wp + w` is pixel `(n, h, w)`.
# 2. **Offsets are column shifts.** Let grid column `c` hold output `(n, h, w)`. Kernel offset
#    `(i, j)` multiplies it with pixel `(n, h + i, w + j)`, which is column `c + i*Wp + j`. So
#    the operand of offset `(i, j)` is `X[:, s : s + L]` with `s = i*Wp + j`: the same matrix
#    shifted by `s` columns, a 2-D view whose rows are evenly spaced (leading dimension
#    `N*Hp*Wp`), which BLAS reads in place. One GEMM `[Cout, Cin] @ [Cin, L]` per offset.
# 3. **Throw away what is not an output.** A grid column with `h >= Ho` or `w >= Wo` is not an
#    output: its "window" wraps into the next row (or image). It is computed anyway and
#    dropped at the end, and the last `(Kh-1)*Wp + Kw-1` columns are not computed at all (they
#    would read past the end of `X`), so `L = N*Hp*Wp - (Kh-1)*Wp - (Kw-1)`.
#
# Here is the shift on one 3x3 image with padding 1 (`Hp = Wp = 5`) and a 3x3 kernel. Left,
# each pixel carries its column number in `X`; the dashed frame holds the grid positions that
# are real outputs, the orange frame the pixels that offset `(1, 2)` reads for them. Right,
# every computed grid column `c` (grey: not an output), the column offset `(0, 0)` reads for
# it, and the column offset `(1, 2)` reads — the same columns, shifted by `1*5 + 2 = 7`.

# %%
fig = figures.draw_column_shift(hp=5, wp=5, kh=3, kw=3, pad=1, offset=(1, 2))
plt.tight_layout()
plt.show()

# %% [markdown]
# The kernel is about thirty lines. It works for stride 1 only: with a stride, the pixels one
# offset reads are no longer evenly spaced columns of `X` (packing the windows, section 7,
# handles strides too).

# %%
def conv2d_shift(x, w, b=None, padding=0):
    """Stride-1 convolution [N, Cin, H, W] * [Cout, Cin, Kh, Kw] -> [N, Cout, Ho, Wo]:
    one GEMM per kernel offset, each on a column-shifted view of the padded input."""
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    hp, wp = h + 2 * padding, wd + 2 * padding
    ho, wo = hp - kh + 1, wp - kw + 1
    # 1. channels first, padded, once: the matrix X [Cin, N*Hp*Wp]
    xp = np.zeros((cin, n, hp, wp), dtype=x.dtype)
    xp[:, :, padding:padding + h, padding:padding + wd] = x.transpose(1, 0, 2, 3)
    X = xp.reshape(cin, n * hp * wp)
    w_ij = np.ascontiguousarray(w.transpose(2, 3, 0, 1))        # [Kh, Kw, Cout, Cin]
    # 2. one GEMM per offset: grid column c reads column c + i*Wp + j
    L = n * hp * wp - ((kh - 1) * wp + (kw - 1))                  # columns every shift can read
    grid = np.zeros((cout, n * hp * wp), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            s = i * wp + j
            grid[:, :L] += w_ij[i, j] @ X[:, s:s + L]             # [Cout, Cin] @ [Cin, L]: a view
    # 3. keep the real outputs of the grid, add the bias, back to NCHW
    y = grid.reshape(cout, n, hp, wp)[:, :, :ho, :wo]
    if b is not None:
        y = y + b.reshape(-1, 1, 1, 1)
    return np.ascontiguousarray(y.transpose(1, 0, 2, 3))


for x_s, w_s, pad in [(xs, ws, 1), (xb, wb, 0),
                      (rng.standard_normal((3, 2, 7, 5)), rng.standard_normal((5, 2, 2, 4)), 2)]:
    b_s = rng.standard_normal(w_s.shape[0]).astype(x_s.dtype)
    ours = conv2d_shift(x_s, w_s, b_s, pad)
    package = conv2d_forward(x_s, w_s, b_s, Conv2dMeta(x_s.shape, w_s.shape, 1, pad, b_s.shape))
    assert ours.shape == package.shape and np.allclose(ours, package, rtol=1e-4, atol=1e-3)
hp_b, ho_b = xb.shape[2], mb.out_h
print(f"conv2d_shift == conv2d_forward; the padded grid is {hp_b}x{hp_b}",
      f"for {ho_b}x{ho_b} outputs: {hp_b**2 / ho_b**2:.2f}x the useful work")
# the operand of every offset is a view of X, not a copy:
X_demo = np.zeros((32, 16 * 26 * 26), dtype=np.float32)
assert np.shares_memory(X_demo[:, 2 * 26 + 2:], X_demo)

# %% [markdown]
# Grid positions that are not outputs cost `Hp*Wp / (Ho*Wo)` times the useful work (printed
# above) — cheaper than any copy.
#
# ## 7. What blocks, packing and sharding add
#
# `conv2d_shift` reads every window in place. Three refinements, each aimed at memory traffic
# or at the cores, lead to the package's kernels:
#
# * **Blocks of images.** With the whole batch at once, `grid` (`[Cout, N*Hp*Wp]`) and the
#   product of each offset are many megabytes: each of the `Kh*Kw` passes streams them through
#   main memory. The package runs the offsets over a few images at a time (a few MiB of
#   operands, `BLOCK_BYTES`), so a block's input columns, accumulator and product stay in the
#   CPU caches, and writes each block's outputs (plus bias) to the NCHW result once. It also
#   multiplies into a reused buffer (`np.matmul(..., out=tmp)`) instead of a new array.
# * **Packing.** Each offset's GEMM has `K = Cin`: with few channels (a first layer: `Cin = 1`)
#   it is a rank-`Cin` update that reads and writes the whole accumulator for very little
#   arithmetic. Copying the `Kh*Kw` shifted views of one block into one `[Kh*Kw*Cin, cols]`
#   matrix (a cache-sized im2col of that block only) gives *one* GEMM with `K = Cin*Kh*Kw`.
# * **Sharding.** The batch is split into one shard per core, each shard run on its own
#   thread with the BLAS at *one* thread. A multi-threaded BLAS would wake and synchronise
#   its threads for every one of the many medium-sized GEMMs;
#   on the development machine (2 cores) two BLAS threads were slower than one, and much
#   slower when another process held the second core, so
#   [`tinytrain/kernels/cpu/parallel.py`](../tinytrain/kernels/cpu/parallel.py) holds the BLAS
#   at one thread while a kernel runs.
#
# Once every block is packed, the shift has one more cost to drop: the padded grid's extra
# columns, and the copy of the real outputs into NCHW at the end. The package's forward
# (and its dW) pack the **exact windows** instead: `sliding_window_view` of the block, copied
# once, is `[K, Ho*Wo]` per image, only real outputs, so one GEMM per image writes the NCHW
# output directly. The package's dX keeps the column shifts (exercise 3.4), whose adds run
# over long contiguous rows.

# %% [markdown]
# > **Aside: the package in more detail** (skip it on a first reading). The figures in this
# > aside were measured on the development machine (an AVX-512 CPU, one core; the runs are in
# > [bench/NOTES_cpu.md](../bench/NOTES_cpu.md)), not in this notebook; another CPU gives
# > other numbers, and the choices below are the package's answer to them.
# >
# > * Packing exact windows beat the column shifts for forward and dW at every size tried
# >   (`K` from 9 to 1,152).
# > * dX splits each shift in two: the part along a kernel row (`j`) is taken on `dY`'s side,
# >   by stacking `Kw` copies of `dY`'s grid shifted by `j` columns, so one GEMM sums over `j`
# >   and only the `Kh` row shifts (`i*Wp`) are added into the gradient: fewer passes over
# >   the larger side (`cnn`'s conv2 dX 6% faster, a 5x5 kernel's 35%).
# > * With many input channels each image keeps its own row length (`Wp`), so a window row is
# >   *one* run of `(Ho-1)*Wp + Wo` numbers to copy, for `Kw-1` columns per output row that
# >   are not outputs. From `Cin = 16` on it made forward 1-8% faster and dW 8-15%; it loses
# >   for a first layer, so `WIDE_MIN_CHANNELS` picks it.
# > * The bias is one more column of the weight matrix, `[w2 | b]`, met by a row of ones
# >   under the packed windows, so the GEMM adds it; in dW the same row gives `db`.
# > * On CPUs where OpenBLAS has *small-matrix kernels* (its AVX-512 targets compute a
# >   product with `M*N*K` at most 10^6 straight from the operands), a block's GEMM is cut
# >   into a few column chunks: `cnn`'s conv2, `[32, 145] @ [145, 624]` per image, ran at
# >   ~170 GF/s whole and ~215 in three chunks.
# >   [`tinytrain/kernels/cpu/gemm.py`](../tinytrain/kernels/cpu/gemm.py) asks the BLAS which
# >   kernels it runs and cuts only where that pays (not on this machine if its BLAS has no
# >   such kernels); the arithmetic of each output is the same either way.

# %% [markdown]
# Blocks and packing, added to `conv2d_shift` (the same three steps, one block at a time):

# %%
from tinytrain.kernels.cpu.conv2d import BLOCK_BYTES

assert BLOCK_BYTES == 4 * 2**20                                  # the package's block size


def conv2d_blocked(x, w, b=None, padding=0, pack=False, block_bytes=BLOCK_BYTES):
    """conv2d_shift over blocks of images [n0, n1); pack=True: one GEMM per block."""
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    hp, wp = h + 2 * padding, wd + 2 * padding
    ho, wo = hp - kh + 1, wp - kw + 1
    xp = np.zeros((cin, n, hp, wp), dtype=x.dtype)
    xp[:, :, padding:padding + h, padding:padding + wd] = x.transpose(1, 0, 2, 3)
    X = xp.reshape(cin, n * hp * wp)
    w_ij = np.ascontiguousarray(w.transpose(2, 3, 0, 1))        # [Kh, Kw, Cout, Cin]
    w_pk = w_ij.transpose(2, 0, 1, 3).reshape(cout, -1)          # [Cout, Kh*Kw*Cin], (i, j, c)
    rows = kh * kw * cin if pack else cin
    per_block = max(1, block_bytes // (hp * wp * (rows + 2 * cout) * x.itemsize))
    acc = np.empty((cout, per_block * hp * wp), dtype=x.dtype)   # buffers reused by every block
    tmp = np.empty_like(acc)
    packed = np.empty((kh * kw * cin, per_block * hp * wp), dtype=x.dtype) if pack else None
    out = np.empty((n, cout, ho, wo), dtype=x.dtype)
    last = n * hp * wp - ((kh - 1) * wp + (kw - 1))
    for n0 in range(0, n, per_block):
        n1 = min(n0 + per_block, n)
        c0, L = n0 * hp * wp, min(n1 * hp * wp, last) - n0 * hp * wp   # this block's columns
        for k, (i, j) in enumerate(np.ndindex(kh, kw)):
            view = X[:, c0 + i * wp + j:][:, :L]
            if pack:
                packed[k * cin:(k + 1) * cin, :L] = view              # copy the view into place
            elif k == 0:
                np.matmul(w_ij[i, j], view, out=acc[:, :L])
            else:
                np.matmul(w_ij[i, j], view, out=tmp[:, :L])
                acc[:, :L] += tmp[:, :L]
        if pack:
            np.matmul(w_pk, packed[:, :L], out=acc[:, :L])          # one GEMM, K = Kh*Kw*Cin
        y = acc[:, :(n1 - n0) * hp * wp].reshape(cout, n1 - n0, hp, wp)[:, :, :ho, :wo]
        if b is not None:
            y += b.reshape(-1, 1, 1, 1)
        out[n0:n1] = y.transpose(1, 0, 2, 3)                         # NCHW, once per block
    return out


_pool = ThreadPoolExecutor(max_workers=os.cpu_count())


def sharded(kernel, x, *args, workers=2, **kwargs):
    # Split the batch into `workers` shards, each run by `kernel` in its own thread. Call it
    # with the BLAS at one thread (threadpool_limits(1)): one core per shard.
    bounds = [len(x) * k // workers for k in range(workers + 1)]
    parts = _pool.map(lambda lo_hi: kernel(x[lo_hi[0]:lo_hi[1]], *args, **kwargs),
                      zip(bounds[:-1], bounds[1:]))
    return np.concatenate(list(parts))


for x_s, w_s, pad in [(xs, ws, 1), (xb, wb, 0)]:
    b_s = rng.standard_normal(w_s.shape[0]).astype(x_s.dtype)
    expected = conv2d_forward(x_s, w_s, b_s, Conv2dMeta(x_s.shape, w_s.shape, 1, pad, b_s.shape))
    small_blocks = dict(padding=pad, block_bytes=20_000)               # several blocks
    for y_s in [conv2d_blocked(x_s, w_s, b_s, **small_blocks),
                conv2d_blocked(x_s, w_s, b_s, pack=True, **small_blocks),
                sharded(conv2d_blocked, x_s, w_s, b_s, pack=True, workers=3, **small_blocks)]:
        assert np.allclose(y_s, expected, rtol=1e-4, atol=1e-3)
print("blocks, packing and shards: the same numbers as conv2d_forward")

# %% [markdown]
# Now time every version of this chapter, on two layers with a batch of 32 images: the
# first layer of the course's `convnet` (`Cin = 1`, 5x5, padding 2: where packing matters)
# and the second convolution of PyTorch's MNIST example (`Cin = 32`, 3x3). Like is compared
# with like: every version runs **on one thread** (NumPy's BLAS, tinytrain's kernel and
# PyTorch all held at one, `threads(1)`), and the last four also **on two** (`threads(2)`):
# `+ packing` with a two-thread BLAS, `+ sharding` as two shards on one BLAS thread each,
# which is how the package (`tt.set_num_threads(2)`) spends two cores, the package itself,
# and PyTorch on two threads. Timings depend on the machine and on what else runs on it;
# nothing here asserts one. (`bench/conv_cpu.py` measures forward and the three backward ops
# more carefully.)

# %%
layers = {
    "convnet conv1: x [32,1,28,28], w [16,1,5,5], padding 2":
        (rng.standard_normal((32, 1, 28, 28), dtype=np.float32),
         rng.standard_normal((16, 1, 5, 5), dtype=np.float32), 2),
    "MNIST example conv2: x [32,32,26,26], w [64,32,3,3]":
        (rng.standard_normal((32, 32, 26, 26), dtype=np.float32),
         rng.standard_normal((64, 32, 3, 3), dtype=np.float32), 0),
}
thread_counts = [1, 2] if (os.cpu_count() or 1) >= 2 else [1]


def time_layer(x, w, pad):
    # {version: {threads: best ms}} of one layer's forward, every version on the same threads.
    versions = {
        "per-offset (NHWC)": lambda: conv2d_offsets(x, w, None, 1, pad),
        "im2col + one GEMM": lambda: conv2d_im2col(x, w, None, 1, pad),
        "column shift": lambda: conv2d_shift(x, w, None, pad),
        "+ blocks": lambda: conv2d_blocked(x, w, None, pad),
        "+ packing": lambda: conv2d_blocked(x, w, None, pad, pack=True),
        "+ sharding": lambda: sharded(conv2d_blocked, x, w, None, pad, pack=True,
                                      workers=tt.get_num_threads()),
        "tinytrain conv2d_forward": lambda: conv2d_forward(x, w, None,
                                                           Conv2dMeta(x.shape, w.shape, 1, pad)),
    }
    if torch:
        x_t, w_t = torch.from_numpy(x), torch.from_numpy(w)
        versions["PyTorch"] = lambda: torch.nn.functional.conv2d(x_t, w_t, padding=pad)
    on_two = ["+ packing", "+ sharding", "tinytrain conv2d_forward", "PyTorch"]
    times = {name: {} for name in versions}
    for n in thread_counts:
        with threads(n):
            for name, fn in versions.items():
                if (n == 1 and name == "+ sharding") or (n > 1 and name not in on_two):
                    continue                                 # (one shard is "+ packing")
                if name == "+ sharding":
                    with threadpool_limits(1, user_api="blas"):   # n shards, one BLAS thread each
                        times[name][n] = best_ms(fn)
                else:
                    times[name][n] = best_ms(fn)
    return times


timings = {title: time_layer(*layer) for title, layer in layers.items()}
for title, per_version in timings.items():
    print(title)
    for name, per in per_version.items():
        print(f"  {name:<26}" + "".join(f"{per[n]:9.1f} ms ({n} thr)" for n in per))

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
for ax, (title, per) in zip(axes, timings.items()):
    figures.draw_thread_bars(ax, per, "forward, " + title)
plt.tight_layout()
plt.show()

c1 = timings[next(iter(timings))]
print(f"conv1 (Cin = 1): packing {c1['+ blocks'][1] / c1['+ packing'][1]:.0f}x faster on one"
      " thread; the package", " / ".join(f"{c1['tinytrain conv2d_forward'][n]:.1f} ms"
                                          for n in thread_counts), "on", " / ".join(
          map(str, thread_counts)), "thread(s)")

# %% [markdown]
# How to read the chart: down the blue bars, each refinement against the one above it, all on
# one thread; the orange bars, the four ways to use a second core. Three things to look for
# (the numbers are this run's; the printout above the chart is exact):
#
# * On `conv1` (`Cin = 1`) the un-packed kernels do 25 rank-1 updates of a big accumulator;
#   packing turns them into one GEMM with `K = 25` and is the largest single step.
# * A two-thread BLAS makes the many medium-sized GEMMs of `+ packing` pay for waking and
#   synchronising its threads at every call; sharding the batch instead gives each core whole
#   blocks of work and synchronises once, at the end. Any version that splits its work over
#   two threads, PyTorch's included, needs both cores: on a machine busy with other work it
#   waits for the slower thread, and its two-thread bar can be longer than its one-thread bar.
# * "+ sharding" and `conv2d_forward` differ in what they pack: this notebook's version packs
#   shifted rows and copies its outputs out of the padded grid; the package packs the exact
#   windows for conv1, whose GEMMs write each shard's output in place, and for conv2
#   (`Cin = 32`, at least `WIDE_MIN_CHANNELS`) one wide run per window row and image, copying
#   the real columns out.
#
# Lessons, in the order they cost time:
#
# * the **copies** (im2col's matrix, a window copy per offset, the `y += ...` pass, layout
#   changes) matter as much as the flops — count bytes moved, not only multiplies;
# * a GEMM with a short inner dimension (`K = Cin`) is itself memory-bound, so keep its operands
#   in cache (blocks of images), let it read views in place (the column shift), or pack the
#   offsets into one longer `K` — a copy, but one that stays in cache and buys one long GEMM;
# * one layout change in (NCHW to padded channels-first) and one out (back to NCHW, with the bias
#   added on the way) is the whole price of the layout — do it once, not per offset;
# * on a few cores, split the batch over the cores and give each one single-threaded BLAS
#   calls, rather than splitting every small GEMM over all of them.

# %% [markdown]
# ## 8. The backward pass is made of convolutions too
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
# The package computes the same three gradients with three ops, each run only when
# autograd's `ctx.needs_input_grad` asks for it (a frozen layer needs no `dW`; the first layer
# needs no `dX`). They reuse the forward's tricks: `conv2d_backward_input` adds
# `W_ij.T @ dY` into the window of offset `(i, j)` of a padded gradient buffer (the scatter
# form of the full convolution above; the package sums each kernel row's offsets in its
# GEMM first), `conv2d_backward_weight` packs the windows of a block of images (as the
# forward does) and adds one GEMM per image, `col[n] @ dY[n].T`, and `conv2d_backward_bias`
# is the sum over images and positions (a GEMV with a vector of ones; the combined
# `conv2d_backward` that the layer calls gets it from dW's GEMM instead, as one more row
# against a row of ones under the windows). And `setup_context` saves
# only what those ops read: `x` only if `dW` is needed, `w` only if `dX` is.

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
# Section 8 found `dW[o, c, i, j] = sum over (n, h, w) of dY[n, o, h, w] * x_pad[n, c, h*s + i,
# w*s + j]`. For one kernel offset `(i, j)` that is one matrix product: `dY` as a matrix
# `[Cout, N*Ho*Wo]` times the shifted (and strided) window of the padded input as a matrix
# `[N*Ho*Wo, Cin]` gives `dW[:, :, i, j]`, a `[Cout, Cin]` block. Write
# `conv2d_weight_grad(x, dy, kh, kw, stride, padding)` that way — `kh * kw` products, no loop
# over pixels. The checker compares it with the package's `conv2d_backward_weight` and with
# PyTorch's autograd (when installed), on random shapes, strides and paddings.

# %%
def conv2d_weight_grad(x, dy, kh, kw, stride=1, padding=0):
    """dL/dW [Cout, Cin, kh, kw] from x [N, Cin, H, W] and dy = dL/dy [N, Cout, Ho, Wo].

    One matrix product per kernel offset."""
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
    assert np.allclose(dw_mine, conv2d_backward_weight(dy_check, x_check, meta_check)), (
        f"x {x_check.shape}, kernel {kh}x{kw}, stride {stride}, padding {padding}: dW differs "
        f"from conv2d_backward_weight by up to "
        f"{np.abs(dw_mine - conv2d_backward_weight(dy_check, x_check, meta_check)).max():.3g}")
    if torch is not None:
        w_t = torch.zeros((cout, cin, kh, kw), dtype=torch.float64, requires_grad=True)
        out_t = torch.nn.functional.conv2d(torch.from_numpy(x_check), w_t, stride=stride,
                                           padding=padding)
        out_t.backward(torch.from_numpy(dy_check))
        assert np.allclose(dw_mine, w_t.grad.numpy()), "dW differs from PyTorch's"
print("Exercise 3.3: conv2d_weight_grad matches conv2d_backward_weight"
      + (" and PyTorch" if torch else ""))

# %% [markdown]
# ### Exercise 3.4 — the input gradient, with column shifts
#
# The forward of section 6 added `W_ij @ X[:, s : s + L]` into the grid, for `s = i*Wp + j`.
# Its backward runs the same shifts the other way: lay `dY` out on the padded grid (a matrix
# `[Cout, N*Hp*Wp]`, with zeros at the grid positions that are not outputs), and for each
# offset add `W_ij.T @ dY_grid[:, :L]` (`[Cin, Cout] @ [Cout, L]`) into the columns
# `[s, s + L)` of a padded input-gradient matrix `[Cin, N*Hp*Wp]`: every input pixel collects
# the gradient of each output it was read by. Then drop the padding and return NCHW. Write
# `conv2d_input_grad_shift(dy, w, padding)` for stride 1. The checker compares it with the
# package's `conv2d_backward_input` and with PyTorch's autograd (when installed).

# %%
def conv2d_input_grad_shift(dy, w, padding=0):
    """dL/dx [N, Cin, H, W] of a stride-1 convolution, from dy [N, Cout, Ho, Wo] and w.

    w is [Cout, Cin, Kh, Kw]; one GEMM per kernel offset, added into shifted columns."""
    ### BEGIN SOLUTION
    n, cout, ho, wo = dy.shape
    _, cin, kh, kw = w.shape
    hp, wp = ho + kh - 1, wo + kw - 1
    grid = np.zeros((cout, n, hp, wp), dtype=dy.dtype)
    grid[:, :, :ho, :wo] = dy.transpose(1, 0, 2, 3)              # dY on the padded grid
    dy_grid = grid.reshape(cout, n * hp * wp)
    L = n * hp * wp - ((kh - 1) * wp + (kw - 1))
    dx_pad = np.zeros((cin, n * hp * wp), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            s = i * wp + j
            dx_pad[:, s:s + L] += w[:, :, i, j].T @ dy_grid[:, :L]
    dx = dx_pad.reshape(cin, n, hp, wp)[:, :, padding:hp - padding, padding:wp - padding]
    return np.ascontiguousarray(dx.transpose(1, 0, 2, 3))
    ### END SOLUTION


# %% tags=["checker"]
try:
    import torch
except ImportError:
    torch = None

check_rng = np.random.default_rng(35)
for _ in range(10):
    n, cin, cout = (int(v) for v in check_rng.integers(1, 4, 3))
    kh, kw = (int(v) for v in check_rng.integers(1, 4, 2))
    padding = int(check_rng.integers(0, 3))
    x_check = check_rng.standard_normal((n, cin, max(kh - 2 * padding, 1) + int(
        check_rng.integers(0, 5)), max(kw - 2 * padding, 1) + int(check_rng.integers(0, 5))))
    w_check = check_rng.standard_normal((cout, cin, kh, kw))
    meta_check = Conv2dMeta(x_check.shape, w_check.shape, 1, padding)
    dy_check = check_rng.standard_normal(meta_check.output_shape)
    dx_mine = conv2d_input_grad_shift(dy_check, w_check, padding)
    assert np.shape(dx_mine) == x_check.shape, f"shape {np.shape(dx_mine)}, not {x_check.shape}"
    assert np.allclose(dx_mine, conv2d_backward_input(dy_check, w_check, meta_check)), (
        f"x {x_check.shape}, w {w_check.shape}, padding {padding}: dX differs from "
        f"conv2d_backward_input by up to "
        f"{np.abs(dx_mine - conv2d_backward_input(dy_check, w_check, meta_check)).max():.3g}")
    if torch is not None:
        x_t = torch.tensor(x_check, requires_grad=True)
        torch.nn.functional.conv2d(x_t, torch.from_numpy(w_check), padding=padding).backward(
            torch.from_numpy(dy_check))
        assert np.allclose(dx_mine, x_t.grad.numpy()), "dX differs from PyTorch's"
print("Exercise 3.4: conv2d_input_grad_shift matches conv2d_backward_input"
      + (" and PyTorch" if torch else ""))

# %% [markdown]
# ## 9. The `Conv2d` autograd Function
#
# Kernels work on raw arrays; autograd (chapter 2) needs a `Function`: a `forward` on raw
# arrays, a `setup_context` that keeps what backward will read, and a `backward` that returns
# one gradient per input. Three things make the convolution's Function worth writing out:
#
# * **three backward ops, each only when needed.** `ctx.needs_input_grad` says which inputs
#   want a gradient: the first layer's input (the images) needs no `dX`, a frozen layer no
#   `dW`, a layer without bias no `db`. Each skipped op is a whole convolution saved.
# * **selective save.** `dX` reads only `w`, `dW` reads only `x`, `db` reads nothing. So keep
#   `x` only if `w` needs a gradient and `w` only if `x` does: for the first layer of a
#   network, `w` is not kept at all, and in a frozen layer `x` (a whole activation) is not.
# * **the shapes, once.** `Conv2dMeta` is computed (and checked) before forward and rides on
#   `ctx` to backward, which needs it for every op.

# %%
from tinytrain.autograd import Function


class Conv2dFn(Function):
    @staticmethod
    def forward(x, w, b, meta):                  # raw arrays in, a raw array out
        return conv2d_forward(x, w, b, meta)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, _, meta = inputs
        need_x, need_w = ctx.needs_input_grad[:2]
        ctx.meta = meta
        ctx.save_for_backward(x if need_w else None,      # dW reads x
                              w if need_x else None)      # dX reads w

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = conv2d_backward_input(dy, w, ctx.meta) if need_x else None
        dw = conv2d_backward_weight(dy, x, ctx.meta) if need_w else None
        db = conv2d_backward_bias(dy) if need_b else None
        return dx, dw, db, None                            # no gradient for meta


def my_conv2d(x, w, b=None, stride=1, padding=0):
    meta = Conv2dMeta(x.shape, w.shape, stride, padding, None if b is None else b.shape)
    return Conv2dFn.apply(x, w, b, meta)


# %% [markdown]
# Check it against the package's `F.conv2d` and against PyTorch, forward and the three
# gradients, with strides and paddings (forward and `dX` come out of the same kernels, bit
# for bit; `dW` and `db` to float32 rounding, their sums taken in another order), then look
# at what each node keeps. The input of a
# first layer does not require a gradient: its node keeps `x` (for `dW`) and not `w`.

# %%
for stride, padding in [(1, 0), (1, 2), (2, 1), ((2, 1), (0, 1))]:
    x9 = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    w9 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b9 = rng.standard_normal(4).astype(np.float32)
    dy9 = None
    results = []
    for conv_fn in (my_conv2d, F.conv2d):
        xt, wt, bt = (tt.tensor(a, requires_grad=True) for a in (x9, w9, b9))
        out9 = conv_fn(xt, wt, bt, stride, padding)
        dy9 = rng.standard_normal(out9.shape).astype(np.float32) if dy9 is None else dy9
        (out9 * tt.tensor(dy9)).sum().backward()
        results.append([out9.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for name, ours, package in zip(["forward", "dX", "dW", "db"], *results):
        if name in ("forward", "dX"):
            assert np.array_equal(ours, package)         # the same kernels: bit for bit
        else:  # the package's db is a row of dW's GEMM: the same sums in another order
            assert np.allclose(ours, package, rtol=1e-5, atol=1e-5)
    if torch:
        xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x9, w9, b9))
        out_t = torch.nn.functional.conv2d(xt, wt, bt, stride, padding)
        out_t.backward(torch.from_numpy(dy9))
        for ours, theirs in zip(results[0], [out_t.detach(), xt.grad, wt.grad, bt.grad]):
            assert np.allclose(ours, theirs.numpy(), rtol=1e-4, atol=1e-4)
print("Conv2dFn == F.conv2d (forward and dX bit for bit, dW and db to float32 rounding)"
      + (" and == PyTorch" if torch else ""), "on 4 strides/paddings")

w_layer = tt.tensor(w9, requires_grad=True)
for x_grad, w_grad in [(False, True), (True, True), (True, False)]:
    w_layer.requires_grad = w_grad
    node = my_conv2d(tt.tensor(x9, requires_grad=x_grad), w_layer).grad_fn
    kept = ["x" if node.ctx.saved_tensors[0] is not None else "-",
            "w" if node.ctx.saved_tensors[1] is not None else "-"]
    print(f"x requires grad {x_grad!s:5}  w requires grad {w_grad!s:5}  -> keeps {kept}")
    assert (kept[0] == "x") == w_grad and (kept[1] == "w") == x_grad
w_layer.requires_grad = True

# %% [markdown]
# And the backward ops really are skipped: count the kernel calls of one backward pass, with
# the images not requiring a gradient (a first layer) and with a frozen weight.

# %%
calls = {"dX": 0, "dW": 0, "db": 0}
originals = (conv2d_backward_input, conv2d_backward_weight, conv2d_backward_bias)


def counted(name, fn):
    def wrapper(*args):
        calls[name] += 1
        return fn(*args)
    return wrapper


conv2d_backward_input, conv2d_backward_weight, conv2d_backward_bias = (
    counted(name, fn) for name, fn in zip(calls, originals))
try:
    for x_grad, w_grad in [(False, True), (True, False)]:
        calls.update(dX=0, dW=0, db=0)
        w_frozen = tt.tensor(w9, requires_grad=w_grad)
        my_conv2d(tt.tensor(x9, requires_grad=x_grad), w_frozen,
                  tt.tensor(b9, requires_grad=True)).sum().backward()
        print(f"x requires grad {x_grad!s:5} w requires grad {w_grad!s:5}: calls {calls}")
        assert calls == {"dX": int(x_grad), "dW": int(w_grad), "db": 1}
finally:
    conv2d_backward_input, conv2d_backward_weight, conv2d_backward_bias = originals

# %% [markdown]
# The package's `Conv2dFunction` in [`tinytrain/nn/conv.py`](../tinytrain/nn/conv.py) is this
# class, with two differences. It asks `kernels.for_array(x)` for the kernels of the input's
# device, so the same Function runs the CUDA kernels of chapter 4 on a GPU array. And its
# backward makes one call, `conv2d_backward(dy, x, w, meta, needs)`, with the same three
# flags: on the CPU each thread does `dX`, `dW` and `db` for its share of the batch (one
# hand-off to the threads instead of three), and `db` comes out of `dW`'s GEMM as the row of
# ones above.
#
# ### The layer: `tinytrain.nn.Conv2d`
#
# The layer holds the parameters and calls the Function. It initialises them like PyTorch:
# `kaiming_uniform_(w, a=sqrt(5))`, which is `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` with
# `fan_in = Cin*Kh*Kw`, and the bias from the same range. With the same weights it must give
# PyTorch's numbers, forward and backward, also followed by a ReLU and max pooling:

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

if torch:
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
else:
    print("PyTorch is not installed: the comparison with it is skipped")

# %% [markdown]
# ## 10. Max pooling, forward and backward
#
# **Max pooling** keeps the largest value of each `k x k` window (stride `s`, usually `k`); it
# has no weights and does not mix channels. It is built like the direct convolution: a loop
# over the `k * k` window offsets `(i, j)`, each a strided view `x[:, :, i::s, j::s]` that holds
# the element at offset `(i, j)` of every window at once. The forward is a running maximum
# over those views; it also records *which* offset won, the **arg-max**.
#
# The gradient of a maximum goes to the element that won, and only to it. When several
# values tie, PyTorch's CPU kernel scans the window row by row and keeps the *first* maximum
# (it moves on only for a strictly greater value). A scan over the offsets in row-major order
# that replaces the best only when `value > best` does exactly that — and ties are common:
# after a ReLU, whole windows are zero.

# %%
def max_pool2d_scan(x, k, stride):
    """x [N, C, H, W] -> (max [N, C, Ho, Wo], arg-max offset i*k + j [N, C, Ho, Wo])."""
    n, c, h, w = x.shape
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    best = np.full((n, c, ho, wo), -np.inf, dtype=x.dtype)
    arg = np.zeros((n, c, ho, wo), dtype=np.int16)
    for o, (i, j) in enumerate(np.ndindex(k, k)):
        value = x[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
        take = value > best                          # strictly greater: ties keep the first
        best = np.where(take, value, best)
        arg = np.where(take, np.int16(o), arg)
    return best, arg


def max_pool2d_backward_scan(dy, x, k, stride):
    """dL/dx [N, C, H, W] from dy [N, C, Ho, Wo] and the forward's input x."""
    _, arg = max_pool2d_scan(x, k, stride)           # find the arg-max again, from x
    ho, wo = dy.shape[2:]
    dx = np.zeros_like(x, dtype=dy.dtype)
    for o, (i, j) in enumerate(np.ndindex(k, k)):
        view = dx[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
        view += np.where(arg == o, dy, 0)            # each window's winner gets its gradient
    return dx


# %% [markdown]
# Within one offset no two windows share an input, so `view += ...` is a correct scatter-add
# even when windows overlap (`stride < k`); across offsets the `+=` accumulates.
#
# What should the autograd Function keep for backward? The arg-max is what backward needs,
# but a Function's forward returns only its output. The package keeps the *input* instead and
# finds the arg-max again in backward: that costs no memory in practice (the input is the
# previous ReLU's output, which that ReLU keeps anyway), and forward writes no arg-max array
# that backward may never read (evaluation under `no_grad` never runs backward).

# %%
class MaxPool2dFn(Function):
    @staticmethod
    def forward(x, k, stride):
        return max_pool2d_scan(x, k, stride)[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.k, ctx.stride = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return max_pool2d_backward_scan(dy, x, ctx.k, ctx.stride), None, None


for k, stride, shape in [(2, 2, (2, 3, 6, 8)), (3, 2, (1, 2, 9, 7)), (2, 1, (2, 2, 5, 5)),
                         (3, 3, (1, 1, 7, 8))]:
    x10 = np.maximum(rng.integers(-2, 3, shape), 0).astype(np.float32)   # a ReLU's ties
    dy10 = rng.standard_normal(
        (shape[0], shape[1], (shape[2] - k) // stride + 1, (shape[3] - k) // stride + 1)
    ).astype(np.float32)
    mine, package = tt.tensor(x10, requires_grad=True), tt.tensor(x10, requires_grad=True)
    out_mine = MaxPool2dFn.apply(mine, k, stride)
    out_pkg = F.max_pool2d(package, k, stride)
    (out_mine * tt.tensor(dy10)).sum().backward()
    (out_pkg * tt.tensor(dy10)).sum().backward()
    assert np.array_equal(out_mine.numpy(), out_pkg.numpy())
    assert np.array_equal(mine.grad.numpy(), package.grad.numpy())
    if torch:
        x_t = torch.tensor(x10, requires_grad=True)
        out_t = torch.nn.functional.max_pool2d(x_t, k, stride)
        out_t.backward(torch.from_numpy(dy10))
        assert np.array_equal(out_mine.numpy(), out_t.detach().numpy())
        # the same winners; where windows overlap, the sums are added in another order
        assert np.allclose(mine.grad.numpy(), x_t.grad.numpy(), rtol=1e-6, atol=1e-6)
print("MaxPool2dFn == F.max_pool2d" + (" and PyTorch" if torch else ""),
      "on windows with ties, overlapping (stride < k) and not")

flat_img = tt.tensor(np.array([[[[0.0, 0.0, 2.0, 2.0],
                                 [0.0, 0.0, 2.0, 1.0]]]]), requires_grad=True)
MaxPool2dFn.apply(flat_img, 2, 2).sum().backward()
print("gradient of a 2x2 max pool over two windows of ties:\n", flat_img.grad.numpy()[0, 0])
assert flat_img.grad.numpy()[0, 0].tolist() == [[1, 0, 1, 0], [0, 0, 0, 0]]

# %% [markdown]
# The package's kernels ([`tinytrain/kernels/cpu/pool.py`](../tinytrain/kernels/cpu/pool.py))
# are these two scans, plus padding (with `-inf`, never chosen), NaN (it wins, as in
# PyTorch) and shards of the batch over the cores; `MaxPool2dFunction` in `nn/conv.py` is
# `MaxPool2dFn`. One difference is about speed, not results: the package moves the arg-max
# with arithmetic, `arg += take * (o - arg)`, instead of `np.where`. `np.where` branches on
# every element, and on a ReLU's output, where half the values are zeros at random, the
# processor guesses half of those branches wrong: several times slower than a comparison.
#
# ### Exercise 3.5 — the backward pass of average pooling
#
# Average pooling outputs the mean of each `k x k` window. Write
# `avg_pool2d_backward(dy, input_shape, k, stride)`: each output's gradient is shared equally,
# `dy / k²`, by the `k²` inputs of its window; windows may overlap (`stride < k`), and inputs in
# no window (the last rows and columns when the windows do not reach them) get 0. The offset
# loop of `max_pool2d_backward_scan` is a good model. The checker compares with the package's
# `F.avg_pool2d` backward and with PyTorch (when installed).

# %%
def avg_pool2d_backward(dy, input_shape, k, stride):
    """dL/dx [N, C, H, W] of k x k average pooling with this stride, from dy [N, C, Ho, Wo]."""
    ### BEGIN SOLUTION
    ho, wo = dy.shape[2:]
    dx = np.zeros(input_shape, dtype=dy.dtype)
    for i in range(k):
        for j in range(k):
            dx[:, :, i:i + stride * (ho - 1) + 1:stride,
               j:j + stride * (wo - 1) + 1:stride] += dy / (k * k)
    return dx
    ### END SOLUTION


# %% tags=["checker"]
try:
    import torch
except ImportError:
    torch = None

check_rng = np.random.default_rng(36)
for _ in range(12):
    k = int(check_rng.integers(1, 4))
    stride = int(check_rng.integers(1, k + 2))
    shape = (int(check_rng.integers(1, 3)), int(check_rng.integers(1, 4)),
             k + int(check_rng.integers(0, 6)), k + int(check_rng.integers(0, 6)))
    x_check = check_rng.standard_normal(shape).astype(np.float32)
    ho, wo = (shape[2] - k) // stride + 1, (shape[3] - k) // stride + 1
    dy_check = check_rng.standard_normal((shape[0], shape[1], ho, wo)).astype(np.float32)
    dx_mine = avg_pool2d_backward(dy_check, shape, k, stride)
    leaf = tt.tensor(x_check, requires_grad=True)
    (F.avg_pool2d(leaf, k, stride) * tt.tensor(dy_check)).sum().backward()
    where = f"input_shape={shape}, k={k}, stride={stride}"
    assert np.shape(dx_mine) == shape, f"{where}: dX of shape {np.shape(dx_mine)}"
    assert np.allclose(dx_mine, leaf.grad.numpy(), atol=1e-6), (
        f"{where}: dX differs from F.avg_pool2d's gradient by up to "
        f"{np.max(np.abs(dx_mine - leaf.grad.numpy())):.3g}")
    if torch is not None:
        x_t = torch.tensor(x_check, requires_grad=True)
        torch.nn.functional.avg_pool2d(x_t, k, stride).backward(torch.from_numpy(dy_check))
        assert np.allclose(dx_mine, x_t.grad.numpy(), atol=1e-6), (
            f"{where}: dX differs from PyTorch's gradient")
print("Exercise 3.5: avg_pool2d_backward matches F.avg_pool2d" + (" and PyTorch" if torch else ""))

# %% [markdown]
# ## 11. Filters that look learned
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
# * Turning the sum inside out gives `Kh * Kw` matrix products, one per kernel offset, on
#   shifted views of the input. A padded window is not one matrix, though: its rows are not
#   evenly spaced.
# * im2col is a zero-copy *view* until BLAS needs a matrix; then it is an up-to-9x copy. Its
#   GEMM does about 127 flops per element it reads, the copy none: memory traffic is what to
#   optimise.
# * The **column shift** makes each offset one GEMM on a view: channels first and padded, the
#   input is a matrix `[Cin, N*Hp*Wp]`, outputs are computed on the whole padded grid, and
#   offset `(i, j)` reads the columns shifted by `i*Wp + j`. Blocks of images keep the work in
#   cache; packing a block's windows (a cache-sized im2col) makes one long GEMM, which the
#   package does for forward and dW (dX keeps the shifts); shards of the batch run over the
#   cores with a one-thread BLAS each.
# * The backward pass is three ops, each run only when `needs_input_grad` asks: `dX` is a full
#   convolution of `dY` with the flipped kernel (scatter-adds into shifted columns), `dW` a
#   correlation of `x` with `dY`, `db` a sum. The Function saves `x` only for `dW` and `w`
#   only for `dX`.
# * Max pooling is a scan over the window offsets that keeps the first maximum (PyTorch's tie
#   rule); its backward finds the arg-max again from the saved input and scatters.
#   `nn.Conv2d`, `F.conv2d`, `nn.MaxPool2d` / `F.max_pool2d` and `F.avg_pool2d` match PyTorch.
#
# The production code is in [`tinytrain/kernels/cpu/conv2d.py`](../tinytrain/kernels/cpu/conv2d.py)
# (the direct forward and the three backward ops; `Conv2dMeta` is in
# [`tinytrain/kernels/shapes.py`](../tinytrain/kernels/shapes.py)),
# [`tinytrain/kernels/cpu/parallel.py`](../tinytrain/kernels/cpu/parallel.py) (shards and BLAS
# threads), [`tinytrain/kernels/cpu/pool.py`](../tinytrain/kernels/cpu/pool.py) (pooling) and
# [`tinytrain/nn/conv.py`](../tinytrain/nn/conv.py) (the autograd Functions and the layers);
# [`tests/test_conv2d.py`](../tests/test_conv2d.py) checks it against PyTorch over a grid of
# shapes, and [`bench/conv_cpu.py`](../bench/conv_cpu.py) times it.
# [Chapter 4](04_cuda_im2col.ipynb) moves convolution to the GPU with an im2col kernel and
# cuBLAS — and checks it against this CPU kernel.
#
# **Previous:** [Chapter 2 — autograd](02_autograd.ipynb) · **Next:** [Chapter 4 — CUDA
# im2col](04_cuda_im2col.ipynb).
