"""Launch plans: every CUDA op as a list of kernel launches and cuBLAS GEMMs, device-free.

A plan function takes the array module ``xp`` (``cupy`` on the GPU, ``numpy`` in the
emulator), the inputs and the meta, allocates the outputs and scratch buffers with ``xp``
and returns ``(outputs, steps)``. The steps are plain data:

* :class:`Launch`: which kernel of which ``.cu`` file, the grid and block sizes and the
  arguments, each scalar already of its exact C type (``np.int64`` for ``long long``, ...);
* :class:`Gemm`: ``C = alpha * op(A) @ op(B) + beta * C`` on row-major matrices given as
  (array, element offset, leading dimension), as NumPy thinks of them; optionally a batch
  of such products at fixed element strides (cuBLAS's strided batched GEMM).

Index width: the kernels compute indices in ``index_t``, compiled as ``int`` or ``long
long``. :func:`launch` picks ``int`` when every index of the launch fits in 32 bits (the
largest array plus the grid's stride, see :func:`narrow`): a GPU divides 32-bit integers in
far fewer instructions than 64-bit ones. The plans write the index arguments as plain
Python ints and tell :func:`launch` the largest array (``emulator.run_plan`` checks that
claim); :func:`launch` gives the ints the chosen type.

``runtime.run`` executes a plan on the GPU, ``emulator.run_plan`` on the CPU. Every line of
the launch logic (grid sizes, chunking, offsets, leading dimensions, argument types) is
therefore exercised by the CPU tests; on the GPU only the launch calls themselves are new.

Sizes: elementwise kernels run ``THREADS`` threads per block and at most ``MAX_BLOCKS``
blocks (their grid-stride loops cover any size); the reductions run ``REDUCE_THREADS`` (a
power of two, at most the 256 of their shared arrays). The convolution's column buffer
holds at most ``COL_BYTES`` bytes: the batch is processed in chunks of images that fit. The
dW GEMM is cut into slices of at least ``SLICE_COLS`` columns (:func:`dw_slices`). Tests
shrink all five to exercise the loops, the chunking and the slicing on tiny shapes.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from tinytrain.kernels.shapes import Conv2dMeta, Pool2dMeta

THREADS = 256
MAX_BLOCKS = 4096  # ~4 waves of resident blocks on a 132-SM H200; more only adds scheduling
REDUCE_THREADS = 256
COL_BYTES = 256 << 20
SLICE_COLS = 2048  # measured best of 2048..16384 on an H200 (bench/NOTES_gpu.md)
MAX_SLICES = 128
INT_MAX = 2**31 - 1  # cuBLAS takes int sizes and leading dimensions
INDEX_MAX = 2**31 - 1  # the largest index an int index_t holds

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
i64, i32, u32 = np.int64, np.int32, np.uint32


class Launch(NamedTuple):
    """``file.cu``'s ``kernel<<<grid, block>>>(*args)`` compiled with ``real`` = ``dtype`` and
    ``index_t`` = ``long long`` (``wide``) or ``int``."""

    file: str
    kernel: str
    dtype: Any
    grid: int
    block: int
    args: tuple
    wide: bool = True


class Gemm(NamedTuple):
    """Row-major ``C[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C``.

    ``op(A)`` is ``A`` (stored ``m x k``) or, with ``transa``, ``A.T`` (stored ``k x m``);
    likewise ``B``. Element ``(r, c)`` of a stored matrix is ``array.flat[off + r*ld + c]``.
    With ``batch`` > 1 it is ``batch`` products: product ``i`` starts ``i * stride_a``
    elements after ``a_off`` (likewise B and C).
    """

    transa: bool
    transb: bool
    m: int
    n: int
    k: int
    alpha: float
    a: Any
    a_off: int
    lda: int
    b: Any
    b_off: int
    ldb: int
    beta: float
    c: Any
    c_off: int
    ldc: int
    batch: int = 1
    stride_a: int = 0
    stride_b: int = 0
    stride_c: int = 0


def grid_for(total: int) -> int:
    """Blocks for ``total`` elements at ``THREADS`` per block, capped at ``MAX_BLOCKS``."""
    return max(1, min(-(-total // THREADS), MAX_BLOCKS))


def narrow(largest: int, threads: int) -> bool:
    """True when 32-bit indices are safe for a launch of ``threads`` threads whose largest
    array has ``largest`` elements: every index a kernel forms is below the size of one of
    its arrays (the kernels are written so), and a grid-stride loop adds the grid's thread
    count to an index below that size before it stops."""
    return largest + threads <= INDEX_MAX


def launch(file: str, kernel: str, dtype: Any, grid: int, block: int, *args: Any,
           largest: int) -> Launch:
    """A :class:`Launch`; the plain Python ints among ``args`` are ``index_t``: they become
    ``np.int32`` if :func:`narrow` allows, ``np.int64`` otherwise. ``largest`` is the size
    of the largest array in ``args`` (the plan knows it; the emulator checks it)."""
    wide = not narrow(largest, grid * block)
    index = i64 if wide else i32
    return Launch(file, kernel, dtype, grid, block,
                  tuple([index(a) if type(a) is int else a for a in args]), wide)


def elementwise(file: str, kernel: str, dtype: Any, total: int, *args: Any,
                largest: int = 0) -> Launch:
    """A launch of ``THREADS``-thread blocks over ``total`` elements; ``largest``: the size of
    the largest array in ``args`` when it exceeds ``total``."""
    return launch(file, kernel, dtype, grid_for(total), THREADS, *args,
                  largest=max(total, largest))


def check_float(op: str, *arrays: Any) -> Any:
    """The common float dtype of ``arrays`` (the first one given; None entries skipped), or a
    TypeError naming them."""
    dtype = arrays[0].dtype
    for a in arrays:
        if a is not None and a.dtype != dtype:
            break
    else:
        if dtype in FLOATS:
            return dtype
    raise TypeError(f"{op} on the GPU needs float32 or float64 operands of one dtype, got "
                    f"{', '.join(str(a.dtype) for a in arrays if a is not None)}")


def check_gemm(g: Gemm) -> Gemm:
    """cuBLAS takes 32-bit sizes: refuse (clearly) what would overflow them."""
    if max(g.m, g.n, g.k, g.lda, g.ldb, g.ldc) > INT_MAX:
        raise ValueError(f"a GEMM of {g.m}x{g.k} @ {g.k}x{g.n} (leading dimensions "
                         f"{g.lda}, {g.ldb}, {g.ldc}) exceeds cuBLAS's 32-bit sizes; use a "
                         "smaller batch")
    return g


# --------------------------------------------------------------------------- convolution


def conv_chunks(meta: Conv2dMeta, itemsize: int, extra_rows: int = 0) -> list[tuple[int, int]]:
    """``[(n0, nb), ...]``: the images of each chunk, whose column buffer (``K +
    extra_rows`` rows) fits COL_BYTES."""
    per_image = (meta.kernel_elems + extra_rows) * meta.patches * itemsize
    nb = max(1, min(meta.batch, COL_BYTES // per_image))
    return [(n0, min(nb, meta.batch - n0)) for n0 in range(0, meta.batch, nb)]


def dw_slices(nb: int, patches: int) -> int:
    """How many slices the dW GEMM of a chunk of ``nb`` images is cut into: the largest
    divisor of ``nb`` (slices hold whole images, all of one size) up to MAX_SLICES whose
    slices keep at least SLICE_COLS columns; 1 (no slicing) when no such divisor exists."""
    return _dw_slices(nb, patches, SLICE_COLS, MAX_SLICES)


@functools.lru_cache(maxsize=256)  # a layer's sizes repeat every step
def _dw_slices(nb: int, patches: int, slice_cols: int, max_slices: int) -> int:
    best = 1
    for s in range(2, min(nb, max_slices) + 1):
        if nb % s == 0 and (nb // s) * patches >= slice_cols:
            best = s
    return best


@functools.lru_cache(maxsize=256)  # a layer's meta repeats every step
def _sizes(meta: Conv2dMeta, wide: bool = True) -> tuple:
    """The size arguments of im2col/col2im after (n0, nb): np.int64 (``wide``) or np.int32."""
    m, index = meta, i64 if wide else i32
    return tuple(index(v) for v in (m.in_channels, m.in_h, m.in_w, m.kernel_h, m.kernel_w,
                                     m.stride_h, m.stride_w, m.pad_h, m.pad_w, m.out_h,
                                     m.out_w))


def _im2col(x: Any, col: Any, n0: int, nb: int, meta: Conv2dMeta, ones_row: bool) -> Launch:
    """im2col of images ``n0 .. n0+nb-1`` into ``col`` (plus a row of ones if asked)."""
    threads = meta.in_channels * nb * meta.patches  # one per (channel, column)
    grid = grid_for(threads)
    wide = not narrow(max(x.size, col.size), grid * THREADS)
    index = i64 if wide else i32
    return Launch("conv2d", "im2col", col.dtype, grid, THREADS,
                  (x, col, index(n0), index(nb), *_sizes(meta, wide), i32(ones_row)), wide)


def conv2d_forward(xp: Any, x: Any, w: Any, b: Any | None, meta: Conv2dMeta) -> tuple:
    """``y = conv2d(x, w) + b``: per chunk, im2col then ``W [Cout, K] @ col [K, nb*P]`` into
    ``y_rows [Cout, N*P]``; finally one kernel lays ``y_rows`` out as NCHW and adds the bias.
    """
    dtype = check_float("conv2d", x, w, b)
    x, w = xp.ascontiguousarray(x), xp.ascontiguousarray(w)
    n, cout, k, p = meta.batch, meta.out_channels, meta.kernel_elems, meta.patches
    chunks = conv_chunks(meta, dtype.itemsize)
    y_rows = xp.empty(cout * n * p, dtype)
    col = xp.empty(k * chunks[0][1] * p, dtype)
    out = xp.empty(meta.output_shape, dtype)
    steps: list = []
    for n0, nb in chunks:
        steps.append(_im2col(x, col, n0, nb, meta, False))
        steps.append(check_gemm(Gemm(False, False, cout, nb * p, k, 1.0, w, 0, k, col, 0,
                                     nb * p, 0.0, y_rows, n0 * p, n * p)))
    bias = y_rows if b is None else xp.ascontiguousarray(b)
    steps.append(elementwise("conv2d", "rows_to_nchw", dtype, out.size, y_rows, bias, out, n,
                             cout, p, i32(b is not None)))
    return out, steps


def channel_sum(xp: Any, dy: Any, channels: int, inner: int, dtype: Any) -> tuple:
    """``dy [outer, channels, inner]`` -> ``(sums [channels], launch)``: one block per
    channel (``channel_sum``), for a bias gradient."""
    outer = dy.size // (channels * inner)
    sums = xp.empty(channels, dtype)
    return sums, launch("conv2d", "channel_sum", dtype, min(channels, MAX_BLOCKS),
                        REDUCE_THREADS, dy, sums, outer, channels, inner, largest=dy.size)


def conv2d_backward(xp: Any, dy: Any, x: Any | None, w: Any | None, meta: Conv2dMeta,
                    needs: tuple[bool, bool, bool]) -> tuple:
    """``(dx, dw, db)`` (None where not needed) from ``dy [N, Cout, Ho, Wo]``.

    One kernel lays ``dy`` out as ``dy_rows [Cout, N*P]``. Then per chunk of images:
    dW = ``dy_rows[:, chunk] @ col^T`` with im2col recomputed from x, and ``dcol = W^T @
    dy_rows[:, chunk]`` gathered into dx by col2im. When db is needed too, col gets a row of
    ones and db comes out of the dW GEMM as its last column. A large chunk's dW GEMM is cut
    into slices (:func:`dw_slices`), one batched GEMM into ``part [S, Cout, K(+1)]``, that
    ``sum_slices`` adds up (and splits into dw and db); chunks accumulate into dw and db.
    """
    need_x, need_w, need_b = needs
    dtype = check_float("conv2d backward", dy, x if need_w else None, w if need_x else None)
    dy = xp.ascontiguousarray(dy)
    n, cout, k, p = meta.batch, meta.out_channels, meta.kernel_elems, meta.patches
    steps: list = []
    dx = dw = db = col = dcol = part = dy_rows = None
    if need_x or need_w:
        dy_rows = xp.empty(dy.size, dtype)
        steps.append(elementwise("conv2d", "nchw_to_rows", dtype, dy.size, dy, dy_rows, n,
                                 cout, p))
    if need_b and not need_w:
        db, first = channel_sum(xp, dy, cout, p, dtype)
        steps.append(first)
    ones = need_w and need_b  # db from the dW GEMM
    kb = k + ones  # the rows of col (and columns of dW's GEMM)
    chunks = conv_chunks(meta, dtype.itemsize, int(ones))
    if need_w:
        x = xp.ascontiguousarray(x)
        dw = xp.empty(meta.weight_shape, dtype)
        db = xp.empty(cout, dtype) if ones else None
        col = xp.empty(kb * chunks[0][1] * p, dtype)
        slices = max(dw_slices(nb, p) for _, nb in chunks)
        if ones or slices > 1:
            part = xp.empty(slices * cout * kb, dtype)
    if need_x:
        w = xp.ascontiguousarray(w)
        dx = xp.empty(meta.input_shape, dtype)
        dcol = xp.empty(k * chunks[0][1] * p, dtype)
    for n0, nb in chunks:
        cols = nb * p
        if need_w:
            steps.append(_im2col(x, col, n0, nb, meta, ones))
            if part is None:  # one GEMM into dw; the chunks add up through beta
                steps.append(check_gemm(Gemm(False, True, cout, k, cols, 1.0, dy_rows, n0 * p,
                                             n * p, col, 0, cols, 0.0 if n0 == 0 else 1.0, dw,
                                             0, k)))
            else:
                s = dw_slices(nb, p)
                length = cols // s
                steps.append(check_gemm(Gemm(False, True, cout, kb, length, 1.0, dy_rows,
                                             n0 * p, n * p, col, 0, cols, 0.0, part, 0, kb,
                                             s, length, length, cout * kb)))
                steps.append(elementwise("conv2d", "sum_slices", dtype, cout * kb, part, dw,
                                         dw if db is None else db, s, cout, k, kb,
                                         i32(n0 > 0), largest=part.size))
        if need_x:
            steps.append(check_gemm(Gemm(True, False, k, cols, cout, 1.0, w, 0, k, dy_rows,
                                         n0 * p, n * p, 0.0, dcol, 0, cols)))
            col2im_threads = nb * meta.in_channels * meta.in_h * meta.in_w
            grid = grid_for(col2im_threads)
            wide = not narrow(max(dcol.size, dx.size), grid * THREADS)
            index = i64 if wide else i32
            steps.append(Launch("conv2d", "col2im", dtype, grid, THREADS,
                                (dcol, dx, index(n0), index(nb), *_sizes(meta, wide)), wide))
    return (dx, dw, db), steps


# --------------------------------------------------------------------------- pooling


def _pool_sizes(meta: Pool2dMeta) -> tuple:
    m = meta
    return (m.batch, m.channels, m.in_h, m.in_w, m.kernel_h, m.kernel_w, m.stride_h,
            m.stride_w, m.pad_h, m.pad_w, m.out_h, m.out_w)


def max_pool2d_forward(xp: Any, x: Any, meta: Pool2dMeta) -> tuple:
    """``(out, argmax int16)``: one thread per output."""
    dtype = check_float("max_pool2d", x)
    x = xp.ascontiguousarray(x)
    out = xp.empty(meta.output_shape, dtype)
    argmax = xp.empty(meta.output_shape, np.int16)
    return (out, argmax), [elementwise("pool", "max_pool_forward", dtype, out.size, x, out,
                                       argmax, *_pool_sizes(meta), largest=x.size)]


def max_pool2d_backward(xp: Any, dy: Any, x: Any, meta: Pool2dMeta) -> tuple:
    """``dx``: one thread per input element, gathering from the windows that chose it."""
    dtype = check_float("max_pool2d backward", dy, x)
    dy, x = xp.ascontiguousarray(dy), xp.ascontiguousarray(x)
    dx = xp.empty(x.shape, dtype)
    return dx, [elementwise("pool", "max_pool_backward", dtype, dx.size, dy, x, dx,
                            *_pool_sizes(meta))]


def avg_pool2d_forward(xp: Any, x: Any, meta: Pool2dMeta, count_include_pad: bool) -> tuple:
    dtype = check_float("avg_pool2d", x)
    x = xp.ascontiguousarray(x)
    out = xp.empty(meta.output_shape, dtype)
    return out, [elementwise("pool", "avg_pool_forward", dtype, out.size, x, out,
                             *_pool_sizes(meta), i32(count_include_pad), largest=x.size)]


def avg_pool2d_backward(xp: Any, dy: Any, meta: Pool2dMeta, count_include_pad: bool) -> tuple:
    dtype = check_float("avg_pool2d backward", dy)
    dy = xp.ascontiguousarray(dy)
    dx = xp.empty((meta.batch, meta.channels, meta.in_h, meta.in_w), dtype)
    return dx, [elementwise("pool", "avg_pool_backward", dtype, dx.size, dy, dx,
                            *_pool_sizes(meta), i32(count_include_pad))]


# --------------------------------------------------------------------------- layers


# (outputs take the input's shape before ascontiguousarray, which turns a 0-d array into 1-d)


def relu_forward(xp: Any, x: Any) -> tuple:
    dtype = check_float("relu", x)
    y = xp.empty(x.shape, dtype)
    x = xp.ascontiguousarray(x)
    return y, [elementwise("layers", "relu_forward", dtype, x.size, x, y, x.size)]


def relu_backward(xp: Any, g: Any, out: Any) -> tuple:
    dtype = check_float("relu backward", g, out)
    dx = xp.empty(g.shape, dtype)
    g, out = xp.ascontiguousarray(g), xp.ascontiguousarray(out)
    return dx, [elementwise("layers", "relu_backward", dtype, g.size, g, out, dx, g.size)]


def dropout(xp: Any, x: Any, p: float, seed: int, threshold: int) -> tuple:
    """``x * keep(seed, i) / (1 - p)``; ``threshold`` = ``ceil(p * 2**24)`` (the CPU set's)."""
    dtype = check_float("dropout", x)
    y = xp.empty(x.shape, dtype)
    x = xp.ascontiguousarray(x)
    return y, [elementwise("layers", "dropout", dtype, x.size, x, y, x.size,
                           u32(seed & 0xFFFFFFFF), u32(seed >> 32), u32(threshold),
                           dtype.type(1.0 / (1.0 - p)))]


def linear_forward(xp: Any, x: Any, w: Any, b: Any | None) -> tuple:
    """``x [*, in] @ w.T (+ b)``: one GEMM, then (with a bias) one ``add_bias`` kernel."""
    dtype = check_float("linear", x, w, b)
    x, w = xp.ascontiguousarray(x), xp.ascontiguousarray(w)
    out_f, in_f = w.shape
    rows = x.size // in_f
    out = xp.empty((*x.shape[:-1], out_f), dtype)
    steps: list = [check_gemm(Gemm(False, True, rows, out_f, in_f, 1.0, x, 0, in_f, w, 0,
                                   in_f, 0.0, out, 0, out_f))]
    if b is not None:
        steps.append(elementwise("conv2d", "add_bias", dtype, out.size, out,
                                 xp.ascontiguousarray(b), out.size, out_f, 1))
    return out, steps


def linear_backward(xp: Any, g: Any, x: Any | None, w: Any | None,
                    needs: tuple[bool, bool, bool]) -> tuple:
    """``(dx = g @ w, dw = g^T @ x, db = sum of g's rows)``, each only if needed."""
    need_x, need_w, need_b = needs
    dtype = check_float("linear backward", g, x if need_w else None, w if need_x else None)
    g = xp.ascontiguousarray(g)
    out_f = g.shape[-1]
    rows = g.size // out_f
    dx = dw = db = None
    steps: list = []
    if need_x:
        w = xp.ascontiguousarray(w)
        in_f = w.shape[1]
        dx = xp.empty((*g.shape[:-1], in_f), dtype)
        steps.append(check_gemm(Gemm(False, False, rows, in_f, out_f, 1.0, g, 0, out_f, w, 0,
                                     in_f, 0.0, dx, 0, in_f)))
    if need_w:
        x = xp.ascontiguousarray(x)
        in_f = x.shape[-1]
        dw = xp.empty((out_f, in_f), dtype)
        steps.append(check_gemm(Gemm(True, False, out_f, in_f, rows, 1.0, g, 0, out_f, x, 0,
                                     in_f, 0.0, dw, 0, in_f)))
    if need_b:
        db, reduce = channel_sum(xp, g, out_f, 1, dtype)
        steps.append(reduce)
    return (dx, dw, db), steps


# --------------------------------------------------------------------------- loss

REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
#: PyTorch's default ignore_index: rows with this target count for nothing (see loss.cu).
IGNORE_INDEX = -100


def cross_entropy_forward(xp: Any, logits: Any, targets: Any, reduction: str, err: Any) -> tuple:
    """Loss (``[N]`` or a 0-d array) in one single-block kernel, which also writes the
    target check into ``err`` (three int64s; see ``loss.cu``)."""
    dtype = check_float("cross_entropy", logits)
    logits = xp.ascontiguousarray(logits)
    targets = xp.ascontiguousarray(targets.astype(np.int64, copy=False))
    n, c = logits.shape
    out = xp.empty((n,) if reduction == "none" else (), dtype)
    return out, [launch("loss", "cross_entropy_forward", dtype, 1, REDUCE_THREADS, logits,
                        targets, out, err, n, c, i32(REDUCTIONS[reduction]), i64(IGNORE_INDEX),
                        largest=logits.size)]


def cross_entropy_backward(xp: Any, logits: Any, targets: Any, g: Any, reduction: str) -> tuple:
    dtype = check_float("cross_entropy backward", logits, g)
    logits, g = xp.ascontiguousarray(logits), xp.ascontiguousarray(g)
    targets = xp.ascontiguousarray(targets.astype(np.int64, copy=False))
    n, c = logits.shape
    dlogits = xp.empty((n, c), dtype)
    return dlogits, [elementwise("loss", "cross_entropy_backward", dtype, n, logits, targets,
                                 g, dlogits, n, c, i32(REDUCTIONS[reduction]), i64(IGNORE_INDEX),
                                 largest=logits.size)]


# --------------------------------------------------------------------------- optimizers


def _in_place(op: str, xp: Any, *arrays: Any) -> Any:
    dtype = check_float(op, *arrays)
    for a in arrays:
        if a is not None and not a.flags.c_contiguous:
            raise ValueError(f"{op} updates in place and needs C-contiguous arrays")
    return dtype


@functools.lru_cache(maxsize=16)
def _adam_scalars(dtype: Any, step: int, lr: float, b1: float, b2: float, eps: float,
                  wd: float) -> tuple:
    """Adam's per-step scalars in ``dtype`` (the same for every parameter of a step: cached,
    so a model's parameters after the first reuse them)."""
    t = dtype.type
    return (t(lr / (1 - b1**step)), t(b1), t(1 - b1), t(b2), t(1 - b2), t(eps), t(wd),
            t(math.sqrt(1 - b2**step)))


def adam_step(xp: Any, p: Any, g: Any, m: Any, v: Any, step: int, lr: float,
              betas: tuple[float, float], eps: float, wd: float) -> tuple:
    """The host computes Adam's per-step scalars; one kernel updates p, m and v."""
    dtype = _in_place("adam", xp, p, m, v)
    g = xp.ascontiguousarray(g.astype(dtype, copy=False))
    return None, [elementwise("optim", "adam_step", dtype, p.size, p, g, m, v, p.size,
                              *_adam_scalars(dtype, step, lr, *betas, eps, wd))]


def sgd_step(xp: Any, p: Any, g: Any, buf: Any | None, lr: float, momentum: float,
             dampening: float, wd: float, nesterov: bool, first: bool) -> tuple:
    dtype = _in_place("sgd", xp, p, buf)
    g = xp.ascontiguousarray(g.astype(dtype, copy=False))
    t = dtype.type
    args = (p, g, p if buf is None else buf, p.size, t(lr), t(momentum),
            t(1 - dampening), t(wd), i32(nesterov), i32(first), i32(bool(momentum)))
    return None, [elementwise("optim", "sgd_step", dtype, p.size, *args)]
