"""2-D convolution on raw arrays: a *direct* kernel for each of forward, dX and dW.

Chapter 3 (``notebooks/03_conv2d_cpu.ipynb``) builds everything here step by step.

Conventions (PyTorch's): the input ``x`` is ``[N, Cin, H, W]`` (NCHW), the weight
``w`` is ``[Cout, Cin, Kh, Kw]`` (OIHW), the optional bias ``b`` is ``[Cout]`` and
the output is ``[N, Cout, Ho, Wo]``. Like every deep-learning "convolution" this
is a cross-correlation: the kernel is not flipped.

A convolution is a sum over the ``Kh * Kw`` kernel offsets ``(i, j)`` of one matrix
product each::

    out[n, :, h, w] += w[:, :, i, j] @ x_pad[n, :, h*sh + i, w*sw + j]     # [Cout, Cin] @ [Cin]

No im2col matrix of the whole batch (``Kh * Kw`` copies of the input) is ever built.
The kernels work on a *block* of a few images at a time (about ``BLOCK_BYTES`` of
operands), so that what a block's GEMMs read and write stays in the CPU caches, and
the batch is split into one shard per core, run in parallel with a single BLAS thread
each (:mod:`tinytrain.kernels.cpu.parallel` says why).

* **Forward and dW read windows: they pack them.** A block's windows are one strided
  view of the (padded) input (``sliding_window_view``), copied once into a reused
  buffer: the block's im2col, ``[K, Ho*Wo]`` per image with ``K = Cin*Kh*Kw``, exactly
  the output positions. Then one GEMM per image with that long ``K``: forward's
  ``[w2 | b] [Cout, K+1] @ [col; 1]`` (the bias against a row of ones) is already NCHW and
  is written straight into the output; dW sums ``col @ dy[n].T`` over the images. With
  many input channels (and stride 1) the windows are packed *wide*: each output row keeps
  the input's row length, so every window row is one contiguous run of the image and the
  copy runs over long rows; the few columns that are not outputs are left out of the
  copy to the output (forward) or meet zeros in ``dy`` (dW).
* **dX writes windows: column shifts.** ``dx_pad[:, window(i, j)] += w[:, :, i, j].T @ dy``
  is a scatter-add per offset (written as a gather this is a "full" convolution of
  ``dy`` with the flipped kernel). A block's padded input gradient is kept channels
  first, ``[Cin, n, Hp, Wp]``, and seen as a matrix ``[Cin, n*Hp*Wp]``; with stride 1 the
  pixels offset ``(i, j)`` touches are its columns shifted by ``i * Wp + j``, a 2-D view,
  so the products (from one GEMM) are added into long contiguous rows. The shift by
  ``j`` is taken on ``dy``'s side (``Kw`` shifted copies of its grid), so the GEMM sums
  each kernel row and only ``Kh`` blocks are added. The price is that ``dy`` is laid out
  on the whole padded grid, with zeros past ``Ho``/``Wo``. With a stride, each offset's
  window is a strided view.
* ``conv2d_backward_bias``: ``db = dy.sum((0, 2, 3))``, as one GEMV per image; the layer's
  ``conv2d_backward`` gets it from dW's GEMM instead (a row of ones under the windows).

The GEMMs go through :mod:`tinytrain.kernels.cpu.gemm`, which cuts them into column
chunks where the BLAS has small-matrix kernels that make that faster.

Why two layouts: measured on one core (``bench/NOTES_cpu.md``), packing made forward and
dW 1.1-1.7x faster than column shifts at every size tried (``K`` from 9 to 1152; 30-50x
for ``Cin = 1``, whose shifted GEMMs are rank-1 updates), while for dX the column
shifts' contiguous adds beat scattering the packed product back (col2im, strided adds
of ``Wo``-long rows) by 1.1-1.6x from ``Cin = 16`` on.

These kernels run on NumPy arrays; the GPU has its own algorithm (im2col + cuBLAS,
chapter 4) with the same functions in :mod:`tinytrain.kernels.cuda`. ``Conv2dMeta``
lives in :mod:`tinytrain.kernels.shapes`, shared by both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from tinytrain.kernels.cpu import gemm, memory
from tinytrain.kernels.cpu.parallel import add_shards, run_sharded, shard_batch
from tinytrain.kernels.shapes import Conv2dMeta, pair

__all__ = [
    "Conv2dMeta",
    "conv2d_backward",
    "conv2d_backward_bias",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "conv2d_forward",
    "pair",
]

#: How many bytes of operands one block of images has (its images' im2col matrices and
#: outputs, or their dX products and gradients): a few MiB, in the caches of one core.
#: Larger blocks mean fewer NumPy calls per op: 4 MiB made dX 10-20% faster than 2 MiB
#: (8 MiB: a little more, for twice the scratch memory); forward and dW did not change.
BLOCK_BYTES = 4 << 20


#: A shard of the batch gets at least this many multiply-adds (forward's: Cout * K per output
#: position). A thread's share of a small convolution (a first layer, one input channel) is
#: mostly Python, which holds the GIL, so the other thread would mostly wait for it: cnn's
#: conv1 inside a training step took 0.36 ms forward and 0.48 backward on two threads, 0.24
#: and 0.32 on one.
MIN_SHARD_MACS = 1 << 24


def _min_shard(meta: Conv2dMeta) -> int:
    """The fewest images of a shard (see MIN_SHARD_MACS)."""
    per_image = meta.out_channels * meta.kernel_elems * meta.out_h * meta.out_w
    return max(2, -(-MIN_SHARD_MACS // max(per_image, 1)))


def _image_blocks(meta: Conv2dMeta, bytes_per_image: int) -> list[tuple[int, int]]:
    """Ranges of images ``[n0, n1)`` of about BLOCK_BYTES of operands each."""
    per_block = max(1, BLOCK_BYTES // bytes_per_image)
    return [(n0, min(n0 + per_block, meta.batch)) for n0 in range(0, meta.batch, per_block)]


# --------------------------------------------------------------------------- packed windows
#
# Per image n of a block, with col[n] = im2col of the image ([K, cols], rows ordered
# (c, i, j) like w2 = w.reshape(Cout, K)):
#
#   forward:  out[n] = [w2 | b] @ [col[n]; 1]   [Cout, K+1] @ [K+1, cols]
#   dW:       dw2.T += col[n] @ dy[n].T         [K, cols] @ [cols, Cout]
#
# Forward's bias is one more column of the weight matrix, met by a row of ones in col
# (written once, when the buffer is made): the GEMM adds it, so no pass over the output
# does. The columns are the output positions, in one of two layouts:
#
# * exact: cols = Ho*Wo, only the real outputs; the GEMM writes the NCHW output directly.
# * wide (stride 1, Cin >= WIDE_MIN_CHANNELS): cols = Ho*Wp, the output rows laid out Wp
#   apart, as in the (padded) input. Then the window of row (c, i, j) is one contiguous run
#   of the input image, x_flat[c, i*Wp + j :][:(Ho-1)*Wp + Wo], so the pack copies long runs
#   instead of Ho runs of Wo; the price is Kw-1 columns per output row that are not outputs
#   (+8% GEMM work at 26x26, 3x3), which forward's copy to the output leaves out and which
#   meet zeros in dW's dy. The last row's Kw-1 of them would read past the image: they are
#   never packed, and stay the zeros the buffer was made with. On one core
#   (bench/NOTES_cpu.md, v10) wide was 1-8% faster for forward and 8-15% for dW from Cin = 16 on,
#   and slower below 8.
#
# dW multiplies by dy[n] transposed: laid out [cols, Cout] (wide: in the zero grid; NN, 7-9%
# faster than the transposed view in OpenBLAS's SkylakeX kernels) or a view of dy (exact:
# NT, 1.4-1.7x faster than with col[n] transposed). numpy.matmul does a block's images in
# one (batched) call, in column chunks where kernels/cpu/gemm.py says so.

#: The wide layout is used from this many input channels on. Measured on one core, batch 64
#: (forward / dW, wide against exact): Cin = 1, 3, 4: 1.04-1.6x slower (the crop and the
#: extra columns cost more than the shorter pack saves); Cin = 8: 1.05x / 0.97x; Cin = 16:
#: 0.92x / 0.85x (3x3 at 26x26), 0.99x / 0.89x (5x5 at 14x14).
WIDE_MIN_CHANNELS = 16


def _window_views(xp: Any, meta: Conv2dMeta) -> Any:
    """Every window of a padded block ``[n, Cin, Hp, Wp]`` as a strided view
    ``[n, Cin, Kh, Kw, Ho, Wo]`` (no copy)."""
    v = sliding_window_view(xp, (meta.kernel_h, meta.kernel_w), axis=(2, 3))
    return v[:, :, :: meta.stride_h, :: meta.stride_w].transpose(0, 1, 4, 5, 2, 3)


def _wide(meta: Conv2dMeta) -> bool:
    """True when forward and dW pack wide windows (see above)."""
    return _dense(meta) and meta.in_channels >= WIDE_MIN_CHANNELS


class _Im2col:
    """One shard's images, packed one block at a time into a reused im2col buffer
    (``[n, K, cols]``, plus a row of ones for a bias when ``ones``).

    With ``kernel_rows`` (wide layout only) it packs one row per input channel and kernel
    row, ``(c, i)``, ``Kw - 1`` columns longer: the window row ``(c, i, j)`` is then the
    column-shifted view ``col[:, (c, i), j : j + cols]``, and the pack is ``Kw`` times
    smaller (for dW, which can sum its ``Kw`` products separately).
    """

    def __init__(self, meta: Conv2dMeta, dtype: Any, ones: bool = False,
                 kernel_rows: bool = False) -> None:
        self.meta, self.wide = meta, _wide(meta)
        self.kernel_rows = kernel_rows and self.wide
        self.cols = meta.out_h * (meta.padded_w if self.wide else meta.out_w)
        self.windows = meta.in_channels * meta.kernel_h if self.kernel_rows else meta.kernel_elems
        rows = self.windows + ones
        width = self.cols + (meta.kernel_w - 1 if self.kernel_rows else 0)
        out_elems = meta.out_channels * self.cols
        self.blocks = _image_blocks(meta, (rows * width + out_elems) * np.dtype(dtype).itemsize)
        self.per_block = self.blocks[0][1] - self.blocks[0][0]
        self.col = memory.empty((self.per_block, rows, width), dtype=dtype)
        # wide: the last output row's window runs stop where the image does
        self.packed = (meta.out_h - 1) * meta.padded_w + meta.out_w if self.wide else self.cols
        if self.kernel_rows:
            self.packed += meta.kernel_w - 1
        self.col[:, :, self.packed :] = 0  # columns that are never packed
        if ones:
            self.col[:, -1, : self.cols] = 1
        self.pad = None
        if meta.pad_h or meta.pad_w:  # a padded copy of the block; its border stays zero
            self.pad = memory.zeros((self.per_block, meta.in_channels, meta.padded_h,
                                     meta.padded_w), dtype=dtype)

    def pack(self, x: Any, n0: int, n1: int) -> Any:
        """im2col of images ``[n0, n1)`` of ``x``: ``[n1 - n0, K (+1), cols (+ Kw-1)]``."""
        meta, block, n = self.meta, x[n0:n1], n1 - n0
        if self.pad is not None:
            ph, pw = meta.pad_h, meta.pad_w
            padded = self.pad[:n]
            padded[:, :, ph : ph + meta.in_h, pw : pw + meta.in_w] = block
            block = padded
        windows_of = self.col[:n, : self.windows, : self.packed]
        if self.wide:
            if block.strides[2] != block.shape[3] * block.strides[3]:  # rows not back to back
                block = np.ascontiguousarray(block)
            s = block.strides
            kw = 1 if self.kernel_rows else meta.kernel_w
            windows = as_strided(block, shape=(n, meta.in_channels, meta.kernel_h, kw,
                                               self.packed),
                                 strides=(s[0], s[1], s[2], s[3], s[3]), writeable=False)
        else:
            windows = _window_views(block, meta)
        np.copyto(windows_of.reshape(windows.shape), windows)
        return self.col[:n]


def conv2d_forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta) -> Any:
    """Direct convolution: ``[N, Cin, H, W] * [Cout, Cin, Kh, Kw] (+ [Cout]) -> [N, Cout, Ho, Wo]``.

    For each block of images, the windows are packed (im2col of the block, with a row of
    ones for the bias) and one GEMM per image, ``[Cout, K (+1)] @ [K (+1), cols]``, writes
    the output (exact layout) or a buffer whose real columns are copied to the output
    (wide layout). Shards of the batch run in parallel.
    """
    out = memory.empty(meta.output_shape, dtype=np.result_type(x, w))
    shard_batch(lambda xs, os_, a, b_: _forward(xs, w, b, meta.with_batch(b_ - a), os_),
                meta.batch, x, out, min_shard=_min_shard(meta))
    return out


def _forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta, out: Any) -> None:
    """:func:`conv2d_forward` of one shard, written into ``out``."""
    dtype = out.dtype
    x = x.astype(dtype, copy=False)
    w2 = w.astype(dtype, copy=False).reshape(meta.out_channels, meta.kernel_elems)
    if b is not None:
        w2 = np.concatenate([w2, b.astype(dtype, copy=False)[:, None]], axis=1)
    im2col = _Im2col(meta, dtype, ones=b is not None)
    buf = (memory.empty((im2col.per_block, meta.out_channels, im2col.cols), dtype=dtype)
           if im2col.wide else None)
    for n0, n1 in im2col.blocks:
        n = n1 - n0
        y = out[n0:n1].reshape(n, meta.out_channels, -1) if buf is None else buf[:n]
        gemm.matmul_cols(w2, im2col.pack(x, n0, n1), out=y)
        if buf is not None:
            rows = y.reshape(n, meta.out_channels, meta.out_h, meta.padded_w)
            out[n0:n1] = rows[..., : meta.out_w]


def conv2d_backward_weight(grad_out: Any, x: Any, meta: Conv2dMeta) -> Any:
    """``dw [Cout, Cin, Kh, Kw]`` from ``dy [N, Cout, Ho, Wo]`` and ``x [N, Cin, H, W]``.

    ``dw2.T = sum over images of col[n] @ dy[n].T`` (``[K, cols] @ [cols, Cout]``), with
    the windows packed block by block as in forward: the correlation of the input with
    the output gradient. Needs ``x`` only. Shards of the batch run in parallel and
    their partial sums are added at the end.
    """
    return _from_rows(add_shards(shard_batch(
        lambda dys, xs, a, b: _backward_weight(dys, xs, meta.with_batch(b - a)),
        meta.batch, grad_out, x, min_shard=_min_shard(meta))), meta)


def _from_rows(dw_t: Any, meta: Conv2dMeta) -> Any:
    """``dw [Cout, Cin, Kh, Kw]`` from the first K rows of the summed ``dw2.T``."""
    return np.ascontiguousarray(dw_t[: meta.kernel_elems].T).reshape(meta.weight_shape)


def _backward_weight(grad_out: Any, x: Any, meta: Conv2dMeta, ones: bool = False) -> Any:
    """:func:`conv2d_backward_weight` of one shard, as ``dw2.T [K, Cout]``; with ``ones``, a
    row of ones under the windows makes one more row of the product: ``db`` (the sum of
    ``dy`` over images and positions), for the cost of one more row in the GEMM.

    Wide layout, where the BLAS has small-matrix kernels: the windows are packed by kernel
    row (``kernel_rows``) and each kernel column ``j`` is a product of its own,
    ``col[:, :, j : j + cols] @ dy.T``, a pack ``Kw`` times smaller for the same GEMM work
    (one core, cnn's conv2 dW 2.31 -> 2.07 ms, the example's 3x3 -11%, convnet's 5x5
    -25%). Without those kernels the ``Kw`` GEMMs with fewer rows cost more than the pack
    saves (OpenBLAS's Haswell kernels: +2-4% for 3x3), so one GEMM it is.
    """
    dtype = np.result_type(grad_out, x)
    x, dy = x.astype(dtype, copy=False), grad_out.astype(dtype, copy=False)
    im2col = _Im2col(meta, dtype, ones=ones, kernel_rows=gemm.small_gemm_mnk() > 0)
    shifts = meta.kernel_w if im2col.kernel_rows else 1
    dw_t = np.zeros((shifts, im2col.windows + ones, meta.out_channels), dtype=dtype)
    grid = None
    if im2col.wide:  # dy on the wide columns, transposed; the non-outputs stay zero
        grid = memory.empty((im2col.per_block, meta.out_h, meta.padded_w, meta.out_channels),
                            dtype=dtype)
        grid[:, :, meta.out_w :] = 0  # the blocks write the rest
    for n0, n1 in im2col.blocks:
        n = n1 - n0
        if grid is None:
            dy_t = dy[n0:n1].reshape(n, meta.out_channels, -1).transpose(0, 2, 1)
        else:
            grid[:n, :, : meta.out_w] = dy[n0:n1].transpose(0, 2, 3, 1)
            dy_t = grid[:n].reshape(n, im2col.cols, meta.out_channels)
        col = im2col.pack(x, n0, n1)
        for j in range(shifts):  # the ones row (db) only once, with j = 0
            dw_t[j, : im2col.windows + (ones and j == 0)] += gemm.matmul_sum(
                col[:, : im2col.windows + (ones and j == 0), j : j + im2col.cols], dy_t)
    if shifts == 1:
        return dw_t[0]
    rows = dw_t[:, : im2col.windows].reshape(shifts, -1, meta.kernel_h, meta.out_channels)
    by_offset = rows.transpose(1, 2, 0, 3).reshape(meta.kernel_elems, meta.out_channels)
    return np.concatenate([by_offset, dw_t[0, im2col.windows :]])  # rows (c, i, j), then db


# --------------------------------------------------------------------------- dX: column shifts
#
# dX works on *grids*: the positions (n, h, w) at which outputs were computed,
# flattened into the columns of a [C, cols] matrix, one block of images at a time.
#
# * stride 1 ("dense"): the grid is the padded input grid [n, Hp, Wp], and a kernel offset
#   (i, j) is a shift of its columns by i*Wp + j: dx_pad[:, p + i*Wp + j] gets
#   w[:, :, i, j].T @ dy[:, p]. The shifts by j are taken on dy's side: dy's grid comes
#   Kw times, copy j shifted right by j columns (a 2-D copy), so that one GEMM,
#   [Kh*Cin, Kw*Cout] @ [Kw*Cout, cols], sums over j and Cout at once; its Kh row blocks
#   are then added into the block's padded input gradient [Cin, n*Hp*Wp] at column
#   offsets i*Wp (2-D views, long contiguous rows; the first one is a copy). Grid positions
#   that are not outputs hold zeros in dy, and each image's grid rows past Ho give zero
#   products, so the GEMM skips them; the last image's shifted rows reach `spill` =
#   (Kh-1)*Wp columns past the block, so its matrix is that much wider.
# * stride > 1: the grid is the output grid [n, Ho, Wo]; one GEMM gives every offset's
#   product, [Kh*Kw*Cin, Cout] @ [Cout, cols], and offset (i, j)'s is added into the
#   strided 4-D view dx_pad[:, :, i::sh, j::sw] (cut to Ho x Wo).
#
# With the j-shifts on dy's side, the dense path adds Kh row blocks instead of Kh*Kw
# (copying dy Kw-1 more times, for fewer passes over the larger dX side): cnn's conv2 dX
# 2.40 -> 2.25 ms on one core. Each block's padded gradient lives in a small buffer that
# is cropped into dx at once.


def _dense(meta: Conv2dMeta) -> bool:
    """True when the zero-copy stride-1 path applies."""
    return meta.stride_h == 1 and meta.stride_w == 1


def _grid_hw(meta: Conv2dMeta) -> tuple[int, int]:
    """The (h, w) size of one image's grid."""
    return (meta.padded_h, meta.padded_w) if _dense(meta) else (meta.out_h, meta.out_w)


def _window(acc: Any, i: int, j: int, meta: Conv2dMeta, n: int) -> Any:
    """Strided path: what kernel offset (i, j) touches of a block's padded gradient ``acc``
    (``[C, n*Hp*Wp]``, ``n`` images), as a view ``[C, n, Ho, Wo]``."""
    hp, wp = meta.padded_h, meta.padded_w
    h_end = i + meta.stride_h * (meta.out_h - 1) + 1
    w_end = j + meta.stride_w * (meta.out_w - 1) + 1
    padded = acc[:, : n * hp * wp].reshape(acc.shape[0], n, hp, wp)
    return padded[:, :, i : h_end : meta.stride_h, j : w_end : meta.stride_w]


class _GradGrid:
    """``dy [N, Cout, Ho, Wo]`` laid out on the grid, one block of images at a time.

    ``block(n0, n1)`` returns ``[copies * Cout, (n1-n0) * grid]`` with zeros at the grid
    positions that are not real outputs (they must not contribute to dX); copy ``j`` is
    shifted right by ``j`` columns (zeros shifted in). One buffer is reused for every
    block; its zeros are written once.
    """

    def __init__(self, grad_out: Any, meta: Conv2dMeta, max_images: int, copies: int) -> None:
        self.dy, self.meta = grad_out, meta
        gh, gw = _grid_hw(meta)
        self.buf = memory.empty((copies, meta.out_channels, max_images * gh * gw),
                                dtype=grad_out.dtype)
        # Zeros where blocks never write: copy 0's positions that are not outputs, and the
        # first j columns of copy j (the blocks write the rest).
        first = self.buf[0].reshape(meta.out_channels, max_images, gh, gw)
        first[:, :, meta.out_h :] = 0
        first[:, :, : meta.out_h, meta.out_w :] = 0
        for j in range(1, copies):
            self.buf[j, :, :j] = 0

    def block(self, n0: int, n1: int) -> Any:
        meta, grid_hw = self.meta, _grid_hw(self.meta)
        cols = (n1 - n0) * math.prod(grid_hw)
        first = self.buf[0, :, :cols].reshape(meta.out_channels, n1 - n0, *grid_hw)
        first[:, :, : meta.out_h, : meta.out_w] = self.dy[n0:n1].transpose(1, 0, 2, 3)
        for j in range(1, self.buf.shape[0]):
            self.buf[j, :, j:cols] = self.buf[0, :, : cols - j]
        return self.buf[:, :, :cols].reshape(-1, cols)


def conv2d_backward_input(grad_out: Any, w: Any, meta: Conv2dMeta) -> Any:
    """``dx [N, Cin, H, W]`` from ``dy [N, Cout, Ho, Wo]`` and ``w [Cout, Cin, Kh, Kw]``.

    Per offset, ``w[:, :, i, j].T @ dy`` (``[Cin, Cout] @ [Cout, cols]``) is added into the
    window of the padded input gradient that this offset read in forward, from one GEMM
    for all offsets (stride 1: the offsets of a kernel row summed in it); the padding
    border is cut off at the end. Needs ``w`` only. Shards of the batch run in parallel.
    """
    dx = memory.empty(meta.input_shape, dtype=np.result_type(grad_out, w))
    shard_batch(lambda dys, dxs, a, b: _backward_input(dys, w, meta.with_batch(b - a), dxs),
                meta.batch, grad_out, dx, min_shard=_min_shard(meta))
    return dx


def _backward_input(grad_out: Any, w: Any, meta: Conv2dMeta, dx: Any) -> None:
    """:func:`conv2d_backward_input` of one shard, written into ``dx``."""
    dtype, dense = dx.dtype, _dense(meta)
    c_in, hp, wp, ph, pw = meta.in_channels, meta.padded_h, meta.padded_w, meta.pad_h, meta.pad_w
    kh, kw, c_out = meta.kernel_h, meta.kernel_w, meta.out_channels
    w = w.astype(dtype, copy=False)
    if dense:  # rows (i, c), columns (j, co)
        w_mat = np.ascontiguousarray(w.transpose(2, 1, 3, 0)).reshape(kh * c_in, kw * c_out)
    else:      # rows (i, j, c), columns co
        w_mat = np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(kh * kw * c_in, c_out)
    rows, copies = w_mat.shape[0], w_mat.shape[1] // c_out
    gh, gw = _grid_hw(meta)
    spill = (kh - 1) * wp if dense else 0
    per_image = gh * gw * (copies * c_out + rows) + hp * wp * c_in
    blocks = _image_blocks(meta, per_image * dx.itemsize)
    per_block = blocks[0][1] - blocks[0][0]
    dy_grid = _GradGrid(grad_out.astype(dtype, copy=False), meta, per_block, copies)
    prod_buf = memory.empty((rows, per_block * gh * gw), dtype=dtype)
    # Dense: an image's grid rows past Ho give zero products (dy is zero there, also after
    # the shifts by j < Kw): the GEMM skips them (-7.7% of its work at 26x26, 3x3).
    live = meta.out_h * gw if dense else gh * gw
    prod_buf.reshape(rows, per_block, gh * gw)[:, :, live:] = 0
    acc_buf = memory.empty((c_in, per_block * hp * wp + spill), dtype=dtype)
    for n0, n1 in blocks:
        n = n1 - n0
        prod, grid = prod_buf[:, : n * gh * gw], dy_grid.block(n0, n1)
        gemm.matmul_cols(w_mat, grid.reshape(-1, n, gh * gw)[:, :, :live].transpose(1, 0, 2),
                         out=prod.reshape(rows, n, gh * gw)[:, :, :live].transpose(1, 0, 2))
        acc, size = acc_buf[:, : n * hp * wp + spill], n * hp * wp
        if dense:  # kernel row i's products go to columns shifted by i*Wp; row 0's: a copy
            acc[:, :size] = prod[:c_in]
            acc[:, size:] = 0
            for i in range(1, kh):
                acc[:, i * wp : i * wp + size] += prod[i * c_in : (i + 1) * c_in]
        else:
            acc[...] = 0
            for k, (i, j) in enumerate(meta.offsets()):
                window = _window(acc, i, j, meta, n)
                window += prod[k * c_in : (k + 1) * c_in].reshape(window.shape)
        padded = acc[:, :size].reshape(c_in, n, hp, wp)
        dx[n0:n1] = padded[:, :, ph : ph + meta.in_h, pw : pw + meta.in_w].transpose(1, 0, 2, 3)


# --------------------------------------------------------------------------- db, all three


def conv2d_backward_bias(grad_out: Any) -> Any:
    """``db [Cout]`` from ``dy [N, Cout, Ho, Wo]``: the sum over N, Ho and Wo.

    Each image's ``[Cout, Ho*Wo]`` times a vector of ones (a GEMV: 3.3x faster than
    ``sum(axis=(0, 2, 3))``, whose reduction over two strided axes NumPy does not vectorise),
    then the images' sums added; shards of the batch in parallel.
    """
    return add_shards(run_sharded(lambda lo, hi: _backward_bias(grad_out[lo:hi]),
                                  grad_out.shape[0]))


def _backward_bias(grad_out: Any) -> Any:
    """:func:`conv2d_backward_bias` of one shard."""
    n, c = grad_out.shape[:2]
    dy = grad_out.reshape(n, c, -1)
    return (dy @ np.ones(dy.shape[2], dtype=dy.dtype)).sum(axis=0)


def conv2d_backward(
    grad_out: Any, x: Any | None, w: Any | None, meta: Conv2dMeta,
    needs: tuple[bool, bool, bool],
) -> tuple[Any | None, Any | None, Any | None]:
    """``(dx, dw, db)``, each computed only if ``needs`` (for x, w, b) says so, else None.

    The layer's single entry point for the three backward ops (``x`` is needed only for
    dW, ``w`` only for dX). One shard of the batch per thread does all three for its
    images (dW and db as partial sums, added at the end): one hand-off to the other
    threads instead of three (each costs 40-60 us), and dW reads the shard's ``dy`` while
    dX has just left it in the caches. With dW, db comes out of dW's GEMM (a row of ones
    under the windows, as forward adds the bias). The CUDA version shares work too (the
    layout change of ``dy`` that dX and dW both start with).
    """
    need_x, need_w, need_b = needs
    dx = memory.empty(meta.input_shape, dtype=np.result_type(grad_out, w)) if need_x else None

    def shard(lo: int, hi: int) -> tuple[Any | None, Any | None]:
        part, dy = meta.with_batch(hi - lo), grad_out[lo:hi]
        if need_x:
            _backward_input(dy, w, part, dx[lo:hi])
        if need_w:
            return _backward_weight(dy, x[lo:hi], part, ones=need_b), None
        return None, _backward_bias(dy) if need_b else None

    parts = (run_sharded(shard, meta.batch, _min_shard(meta)) if need_x or need_w or need_b
             else [])
    dw = db = None
    if need_w:
        dw_t = add_shards([p[0] for p in parts])
        dw, db = _from_rows(dw_t, meta), (dw_t[-1].copy() if need_b else None)
    elif need_b:
        db = add_shards([p[1] for p in parts])
    return dx, dw, db
