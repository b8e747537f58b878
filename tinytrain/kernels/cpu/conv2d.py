"""2-D convolution on raw arrays: the shape bookkeeping and a *direct* kernel.

Chapter 3 (``notebooks/03_conv2d_cpu.ipynb``) builds everything here step by step.

Conventions (PyTorch's): the input ``x`` is ``[N, Cin, H, W]`` (NCHW), the weight
``w`` is ``[Cout, Cin, Kh, Kw]`` (OIHW), the optional bias ``b`` is ``[Cout]`` and
the output is ``[N, Cout, Ho, Wo]``. Like every deep-learning "convolution" this
is a cross-correlation: the kernel is not flipped.

**The direct kernel.** A convolution is a sum over the ``Kh * Kw`` kernel
offsets ``(i, j)`` of one matrix product each::

    out[:, n, h, w] += w[:, :, i, j] @ x_pad[:, n, h*sh + i, w*sw + j]     # [Cout, Cin] @ [Cin]

done for all ``(n, h, w)`` at once. No im2col buffer (``Kh * Kw`` copies of the
input) is ever built. The layout makes each of those products one large GEMM:

* the input is copied once into a zero-padded, *channels-first* buffer
  ``[Cin, N, Hp, Wp]`` (``Hp = H + 2 * ph``), seen as a matrix ``[Cin, N*Hp*Wp]``;
* with stride 1, the pixels that offset ``(i, j)`` multiplies are that matrix
  shifted by ``i * Wp + j`` columns, a plain 2-D view: the GEMM reads it in
  place, with no copy at all. The price is that outputs are computed on the
  whole padded grid ``[N, Hp, Wp]`` (the rows and columns past ``Ho``/``Wo`` are
  thrown away at the end), ``Hp*Wp / (Ho*Wo)`` times the useful work (1.17x for
  26x26 images and 3x3 kernels);
* with a stride, the shifted pixels are not evenly spaced in that matrix, so
  each offset copies its strided window ``[Cin, N, Ho, Wo]`` (a quarter of the
  input for stride 2) before its GEMM;
* the GEMMs run on a block of a few images at a time (about ``BLOCK_BYTES`` of
  operands), so that the block's input columns, accumulator and product stay in
  the CPU caches while the ``Kh * Kw`` products are summed; each block's real
  outputs are then copied once, plus the bias, into the NCHW result.

With ``K = Cin`` short, these GEMMs are limited by memory traffic more than by
arithmetic, which is why the layout and the blocks matter (see chapter 3 and
``bench/conv_cpu.py``). Two refinements:

* when ``Cin * Kh * Kw <= PACK_MAX_ELEMS`` (first layers, small kernels), the
  ``Kh * Kw`` windows of a block are copied into one ``[Kh*Kw*Cin, cols]`` matrix
  and multiplied once, instead of ``Kh * Kw`` rank-``Cin`` updates;
* the batch is split into one shard per core, run in parallel with a single BLAS
  thread each (:mod:`tinytrain.kernels.cpu.parallel` says why).

The three backward ops reuse the same offsets and layout:

* ``conv2d_backward_input``: ``dx_pad[:, window(i, j)] += w[:, :, i, j].T @ dy``
  (a scatter-add per offset; written as a gather this is a "full" convolution of
  ``dy`` with the flipped kernel);
* ``conv2d_backward_weight``: ``dw[:, :, i, j] = dy @ x_pad[:, window(i, j)].T``
  (a correlation of ``x`` with ``dy``);
* ``conv2d_backward_bias``: ``db = dy.sum((0, 2, 3))``.

These kernels run on NumPy arrays; the GPU has its own algorithm (im2col + cuBLAS,
chapter 4) with the same functions in :mod:`tinytrain.kernels.cuda`. ``Conv2dMeta``
lives in :mod:`tinytrain.kernels.shapes`, shared by both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytrain.kernels.cpu.parallel import shard_batch
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

# --------------------------------------------------------------------------- layout helpers
#
# The kernels work on *grids*: the positions (n, h, w) at which outputs are
# computed, flattened into the columns of a [C, cols] matrix, one block of images
# [n0, n1) at a time.
#
# * stride 1 ("dense"): the grid is the padded input grid [N, Hp, Wp]. The input
#   pixels that offset (i, j) multiplies are the columns [c0 + off, c1 + off) of the
#   padded input matrix [Cin, N*Hp*Wp], off = i*Wp + j: a 2-D view, no copy. Grid
#   columns past L = N*Hp*Wp - off_max are never computed (they are not real
#   outputs, and offsets would read past the end of the input there).
# * stride > 1: the grid is the output grid [N, Ho, Wo]; the window of offset
#   (i, j) is the strided 4-D view x_pad[:, n0:n1, i::sh, j::sw] (cut to Ho x Wo),
#   copied to a [Cin, cols] matrix for its GEMM.
#
# Working one block of images at a time keeps each block's input window, output
# accumulator and GEMM result in the CPU caches while the Kh*Kw offsets pass over
# them; BLOCK_BYTES sets how big a block is.

BLOCK_BYTES = 2 << 20

# Each offset's GEMM has only K = Cin, yet writes (and then adds) the whole
# [Cout, cols] product: with few input channels that traffic dominates (Cin = 1 is
# a rank-1 update per offset). Up to PACK_MAX_ELEMS = Cin*Kh*Kw, the Kh*Kw windows
# of a block are instead copied into one [Kh*Kw*Cin, cols] matrix (a cache-sized
# im2col of one block) and multiplied once. Measured on 2 cores: the 5x5 first
# layer of `convnet` (K = 25) went from 32 to 2.4 ms per forward, the 3x3 layers
# with Cin = 16 or 32 (K = 144, 288) ran 25-30% faster, and at K = 400 (5x5, Cin = 16)
# packing no longer helped.
PACK_MAX_ELEMS = 320


def _packed(meta: Conv2dMeta) -> bool:
    """True when the block's windows are packed into one matrix (small Cin*Kh*Kw)."""
    return meta.kernel_elems <= PACK_MAX_ELEMS


def _pack(buf: Any, pk: Any, meta: Conv2dMeta, n0: int, n1: int) -> Any:
    """Copy every offset's window of images [n0, n1) into ``pk``: ``[Kh*Kw*Cin, cols]``,
    rows ordered (i, j, c). Returns the filled part."""
    c = meta.in_channels
    cols = _grid_cols(meta, n0, n1)
    for k, (i, j) in enumerate(meta.offsets()):
        pk[k * c : (k + 1) * c, :cols] = _cols(_window(buf, i, j, meta, n0, n1))
    return pk[:, :cols]


def _dense(meta: Conv2dMeta) -> bool:
    """True when the zero-copy stride-1 path applies."""
    return meta.stride_h == 1 and meta.stride_w == 1


def _grid_hw(meta: Conv2dMeta) -> tuple[int, int]:
    """The (h, w) size of one image's grid."""
    return (meta.padded_h, meta.padded_w) if _dense(meta) else (meta.out_h, meta.out_w)


def _image_blocks(meta: Conv2dMeta, itemsize: int) -> list[tuple[int, int]]:
    """Ranges of images ``[n0, n1)`` whose grid columns fill about BLOCK_BYTES."""
    gh, gw = _grid_hw(meta)
    rows = meta.kernel_elems if _packed(meta) else meta.in_channels
    col_bytes = (rows + 2 * meta.out_channels) * itemsize
    per_block = max(1, BLOCK_BYTES // (gh * gw * col_bytes))
    return [(n0, min(n0 + per_block, meta.batch)) for n0 in range(0, meta.batch, per_block)]


def _grid_cols(meta: Conv2dMeta, n0: int, n1: int) -> int:
    """How many grid columns of images [n0, n1) are computed."""
    gh, gw = _grid_hw(meta)
    if not _dense(meta):
        return (n1 - n0) * gh * gw
    off_max = (meta.kernel_h - 1) * meta.padded_w + (meta.kernel_w - 1)
    return min(n1 * gh * gw, meta.batch * gh * gw - off_max) - n0 * gh * gw


def _window(buf: Any, i: int, j: int, meta: Conv2dMeta, n0: int, n1: int) -> Any:
    """What kernel offset (i, j) touches of a padded ``[C, N, Hp, Wp]`` buffer, images [n0, n1).

    A writable view: ``[C, cols]`` on the dense path, ``[C, n1-n0, Ho, Wo]`` otherwise.
    """
    if _dense(meta):
        start = n0 * meta.padded_h * meta.padded_w + i * meta.padded_w + j
        return buf.reshape(buf.shape[0], -1)[:, start : start + _grid_cols(meta, n0, n1)]
    h_end = i + meta.stride_h * (meta.out_h - 1) + 1
    w_end = j + meta.stride_w * (meta.out_w - 1) + 1
    return buf[:, n0:n1, i : h_end : meta.stride_h, j : w_end : meta.stride_w]


def _cols(view: Any) -> Any:
    """A window as a 2-D ``[C, cols]`` matrix (a copy only for strided windows)."""
    return view if view.ndim == 2 else view.reshape(view.shape[0], -1)


def _padded_cnhw(x: Any, meta: Conv2dMeta) -> Any:
    """Copy ``x [N, C, H, W]`` once into a zero-padded channels-first ``[C, N, Hp, Wp]``."""
    ph, pw = meta.pad_h, meta.pad_w
    if ph == 0 and pw == 0:
        return np.ascontiguousarray(x.transpose(1, 0, 2, 3))
    shape = (meta.in_channels, meta.batch, meta.padded_h, meta.padded_w)
    buf = np.zeros(shape, dtype=x.dtype)
    buf[:, :, ph : ph + meta.in_h, pw : pw + meta.in_w] = x.transpose(1, 0, 2, 3)
    return buf


class _GradGrid:
    """``dy [N, Cout, Ho, Wo]`` laid out on the grid, one block of images at a time.

    ``block(n0, n1)`` returns ``[Cout, cols]`` with zeros at the grid positions that
    are not real outputs (they must not contribute to dX or dW). One buffer is
    reused for every block; its zeros are written once.
    """

    def __init__(self, grad_out: Any, meta: Conv2dMeta, max_images: int) -> None:
        self.dy, self.meta = grad_out, meta
        gh, gw = _grid_hw(meta)
        self.buf = np.zeros((meta.out_channels, max_images, gh, gw), dtype=grad_out.dtype)

    def block(self, n0: int, n1: int) -> Any:
        meta, buf = self.meta, self.buf[:, : n1 - n0]
        buf[:, :, : meta.out_h, : meta.out_w] = self.dy[n0:n1].transpose(1, 0, 2, 3)
        return buf.reshape(meta.out_channels, -1)[:, : _grid_cols(meta, n0, n1)]


# --------------------------------------------------------------------------- forward


def conv2d_forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta) -> Any:
    """Direct convolution: ``[N, Cin, H, W] * [Cout, Cin, Kh, Kw] (+ [Cout]) -> [N, Cout, Ho, Wo]``.

    For each block of images, one GEMM ``[Cout, Cin] @ [Cin, cols]`` per kernel
    offset is summed into a grid accumulator, whose real outputs are then copied
    (plus bias) into the NCHW output. Shards of the batch run in parallel.
    """
    out = np.empty(meta.output_shape, dtype=np.result_type(x, w))
    shard_batch(lambda xs, os_, a, b_: _forward(xs, w, b, meta.with_batch(b_ - a), os_),
             meta.batch, x, out)
    return out


def _forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta, out: Any) -> None:
    """:func:`conv2d_forward` of one shard, written into ``out``."""
    dtype = out.dtype
    xbuf = _padded_cnhw(x.astype(dtype, copy=False), meta)
    w_ij = np.ascontiguousarray(w.astype(dtype, copy=False).transpose(2, 3, 0, 1))  # [Kh,Kw,O,I]
    bias = None if b is None else b.astype(dtype, copy=False).reshape(-1, 1, 1, 1)
    gh, gw = _grid_hw(meta)
    blocks = _image_blocks(meta, xbuf.itemsize)
    per_block = blocks[0][1] - blocks[0][0]
    acc_buf = np.empty((meta.out_channels, per_block * gh * gw), dtype=dtype)
    packed = _packed(meta)
    if packed:  # w as [Cout, Kh*Kw*Cin], columns ordered (i, j, c) like the packed rows
        w_pk = w_ij.transpose(2, 0, 1, 3).reshape(meta.out_channels, -1)
        pk_buf = np.empty((meta.kernel_elems, acc_buf.shape[1]), dtype=dtype)
    else:
        tmp_buf = np.empty_like(acc_buf)
    for n0, n1 in blocks:
        cols = _grid_cols(meta, n0, n1)
        acc = acc_buf[:, :cols]
        if packed:
            np.matmul(w_pk, _pack(xbuf, pk_buf, meta, n0, n1), out=acc)
        else:
            tmp = tmp_buf[:, :cols]
            for k, (i, j) in enumerate(meta.offsets()):
                window = _cols(_window(xbuf, i, j, meta, n0, n1))
                if k == 0:
                    np.matmul(w_ij[i, j], window, out=acc)
                else:
                    np.matmul(w_ij[i, j], window, out=tmp)
                    acc += tmp
        grid = acc_buf[:, : (n1 - n0) * gh * gw].reshape(meta.out_channels, n1 - n0, gh, gw)
        real = grid[:, :, : meta.out_h, : meta.out_w]  # [Cout, n, Ho, Wo]
        if bias is not None:
            real += bias
        out[n0:n1] = real.transpose(1, 0, 2, 3)


# --------------------------------------------------------------------------- backward


def conv2d_backward_input(grad_out: Any, w: Any, meta: Conv2dMeta) -> Any:
    """``dx [N, Cin, H, W]`` from ``dy [N, Cout, Ho, Wo]`` and ``w [Cout, Cin, Kh, Kw]``.

    Per offset, ``w[:, :, i, j].T @ dy`` (``[Cin, Cout] @ [Cout, cols]``) is added
    into the window of the padded input gradient that this offset read in
    forward; the padding border is cut off at the end. Needs ``w`` only. Shards of
    the batch run in parallel, each into its own padded buffer.
    """
    dx = np.empty(meta.input_shape, dtype=np.result_type(grad_out, w))
    shard_batch(lambda dys, dxs, a, b: _backward_input(dys, w, meta.with_batch(b - a), dxs),
             meta.batch, grad_out, dx)
    return dx


def _backward_input(grad_out: Any, w: Any, meta: Conv2dMeta, dx: Any) -> None:
    """:func:`conv2d_backward_input` of one shard, written into ``dx``."""
    dtype = dx.dtype
    grad_out = grad_out.astype(dtype, copy=False)
    w_t = np.ascontiguousarray(w.astype(dtype, copy=False).transpose(2, 3, 1, 0))  # [Kh,Kw,I,O]
    shape = (meta.in_channels, meta.batch, meta.padded_h, meta.padded_w)
    dx_pad = np.zeros(shape, dtype=dtype)
    blocks = _image_blocks(meta, dx_pad.itemsize)
    dy_grid = _GradGrid(grad_out, meta, blocks[0][1] - blocks[0][0])
    tmp_buf = np.empty((meta.in_channels, dy_grid.buf[0].size), dtype=dtype)
    for n0, n1 in blocks:
        dy = dy_grid.block(n0, n1)
        tmp = tmp_buf[:, : dy.shape[1]]
        for i, j in meta.offsets():
            np.matmul(w_t[i, j], dy, out=tmp)
            window = _window(dx_pad, i, j, meta, n0, n1)
            window += tmp.reshape(window.shape)
    ph, pw = meta.pad_h, meta.pad_w
    dx[...] = dx_pad[:, :, ph : ph + meta.in_h, pw : pw + meta.in_w].transpose(1, 0, 2, 3)


def conv2d_backward_weight(grad_out: Any, x: Any, meta: Conv2dMeta) -> Any:
    """``dw [Cout, Cin, Kh, Kw]`` from ``dy [N, Cout, Ho, Wo]`` and ``x [N, Cin, H, W]``.

    Per offset, ``dw[:, :, i, j] = dy @ window(i, j).T`` (``[Cout, cols] @ [cols, Cin]``),
    summed over the blocks of images: the correlation of the input with the
    output gradient. Needs ``x`` only. Shards of the batch run in parallel and
    their partial sums are added at the end.
    """
    partial = shard_batch(lambda dys, xs, a, b: _backward_weight(dys, xs, meta.with_batch(b - a)),
                       meta.batch, grad_out, x)
    dw = partial[0]
    for p in partial[1:]:
        dw += p
    return dw


def _backward_weight(grad_out: Any, x: Any, meta: Conv2dMeta) -> Any:
    """:func:`conv2d_backward_weight` of one shard."""
    dtype = np.result_type(grad_out, x)
    xbuf = _padded_cnhw(x.astype(dtype, copy=False), meta)
    blocks = _image_blocks(meta, xbuf.itemsize)
    dy_grid = _GradGrid(grad_out.astype(dtype, copy=False), meta, blocks[0][1] - blocks[0][0])
    shape = (meta.kernel_h, meta.kernel_w, meta.out_channels, meta.in_channels)
    if _packed(meta):  # one [Cout, cols] @ [cols, Kh*Kw*Cin] product per block
        pk_buf = np.empty((meta.kernel_elems, dy_grid.buf[0].size), dtype=dtype)
        dw_pk = np.zeros((meta.out_channels, meta.kernel_elems), dtype=dtype)
        for n0, n1 in blocks:
            dw_pk += dy_grid.block(n0, n1) @ _pack(xbuf, pk_buf, meta, n0, n1).T
        dw_pk = dw_pk.reshape(meta.out_channels, meta.kernel_h, meta.kernel_w, -1)
        return np.ascontiguousarray(dw_pk.transpose(0, 3, 1, 2))
    dw, tmp = np.empty(shape, dtype=dtype), np.empty(shape[2:], dtype=dtype)
    for b, (n0, n1) in enumerate(blocks):
        dy = dy_grid.block(n0, n1)
        for i, j in meta.offsets():
            window = _cols(_window(xbuf, i, j, meta, n0, n1))
            if b == 0:
                np.matmul(dy, window.T, out=dw[i, j])
            else:
                np.matmul(dy, window.T, out=tmp)
                dw[i, j] += tmp
    return np.ascontiguousarray(dw.transpose(2, 3, 0, 1))


def conv2d_backward_bias(grad_out: Any) -> Any:
    """``db [Cout]`` from ``dy [N, Cout, Ho, Wo]``: the sum over N, Ho and Wo."""
    return grad_out.sum(axis=(0, 2, 3))


def conv2d_backward(
    grad_out: Any, x: Any | None, w: Any | None, meta: Conv2dMeta,
    needs: tuple[bool, bool, bool],
) -> tuple[Any | None, Any | None, Any | None]:
    """``(dx, dw, db)``, each computed only if ``needs`` (for x, w, b) says so, else None.

    The layer's single entry point for the three backward ops (``x`` is needed only for
    dW, ``w`` only for dX). Here it simply calls them; the CUDA version shares work
    between them (the layout change of ``dy`` that dX and dW both start with).
    """
    need_x, need_w, need_b = needs
    return (
        conv2d_backward_input(grad_out, w, meta) if need_x else None,
        conv2d_backward_weight(grad_out, x, meta) if need_w else None,
        conv2d_backward_bias(grad_out) if need_b else None,
    )
