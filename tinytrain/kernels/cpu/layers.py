"""The element-wise, linear and loss kernels of the layers, on NumPy arrays.

Each function here has a twin of the same name and signature in
:mod:`tinytrain.kernels.cuda` (fused CUDA kernels there; one NumPy expression or two here).

Dropout draws its mask from a *counter-based* hash of ``(seed, element index)`` instead of
a random-number stream: element ``i`` is kept when the top 24 bits of
``mix32(mix32(lo(i) ^ lo(seed)) ^ hi(i) ^ hi(seed))`` are at least ``ceil(p * 2**24)``
(``mix32`` is MurmurHash3's 32-bit finaliser). Any element's draw can be computed
independently, so a GPU thread computes its own without any state, backward recomputes the
mask from the seed instead of storing it, and the CPU and the GPU drop exactly the same
elements for the same seed. The layer draws the seed from tinytrain's generator, once per
call, so ``tt.manual_seed`` and checkpointed RNG states still decide every mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinytrain.kernels.cpu import gemm, memory
from tinytrain.kernels.cpu.parallel import add_shards, run_sharded, shard_elements

__all__ = [
    "cross_entropy_backward",
    "cross_entropy_forward",
    "dropout_backward",
    "dropout_forward",
    "dropout_keep",
    "dropout_keep_mask",
    "dropout_threshold",
    "linear_backward",
    "linear_forward",
    "relu_backward",
    "relu_forward",
]

# --------------------------------------------------------------------------- element-wise
#
# One pass each, written into a fresh output, over flat shards of the arrays: large arrays
# (a conv layer's activations) are split over the threads (parallel.shard_elements).


def _flat(a: Any) -> Any:
    """``a`` as a flat C-ordered array (a view when ``a`` is C-contiguous)."""
    return np.asarray(a, order="C").reshape(-1)


#: ReLU takes the maximum with a zeros array of this many elements, broadcast over the rows
#: of the input seen as ``[-1, RELU_PIECE]`` (one NumPy call): NumPy's SIMD loop for
#: ``maximum`` needs two arrays; with the scalar 0 it runs 3x slower (1.18M float32:
#: 0.36 ms against 0.11 ms with a 64K-element zeros row, which stays in cache).
RELU_PIECE = 1 << 16

#: Elements per thread before a ReLU is split over the threads. One pass is so cheap
#: (1.18M float32: 0.12 ms forward, 0.25 ms backward on one thread) that the hand-off to a
#: worker (30-80 us) eats the gain: on 2 threads, forward was no faster than one thread up
#: to 2M elements (692K: 0.08 ms on one thread, 0.11 on two; in cnn's step, unsplit: -1.5%);
#: backward (two passes) gains from ~600K on (262K: 0.07 -> 0.10-0.13 ms; 1M: 0.24 -> 0.19).
RELU_FORWARD_MIN_SHARD = 1 << 20
RELU_BACKWARD_MIN_SHARD = 1 << 18
_zeros: dict[Any, Any] = {}


def _zeros_piece(dtype: Any) -> Any:
    """A read-only zeros array of :data:`RELU_PIECE` elements of ``dtype``."""
    z = _zeros.get(dtype)
    if z is None:
        z = np.zeros(RELU_PIECE, dtype=dtype)
        z.flags.writeable = False
        _zeros[dtype] = z
    return z


def relu_forward(a: Any) -> Any:
    """``max(a, 0)``, same shape and, as PyTorch's, the same layout (NaN stays NaN): a
    transposed input gives a transposed output (NumPy's own ``maximum`` keeps it)."""
    if not a.flags.c_contiguous:
        return np.maximum(a, a.dtype.type(0))
    out = memory.empty(a.shape, dtype=a.dtype)
    src, dst, zeros = _flat(a), out.reshape(-1), _zeros_piece(a.dtype)

    def shard(lo: int, hi: int) -> None:  # rows of RELU_PIECE against the one zeros row
        whole = lo + (hi - lo) // RELU_PIECE * RELU_PIECE
        if whole > lo:
            np.maximum(src[lo:whole].reshape(-1, RELU_PIECE), zeros,
                       out=dst[lo:whole].reshape(-1, RELU_PIECE))
        if whole < hi:
            np.maximum(src[whole:hi], zeros[: hi - whole], out=dst[whole:hi])

    shard_elements(shard, a.size, RELU_FORWARD_MIN_SHARD)
    return out


def relu_backward(grad: Any, out: Any) -> Any:
    """The gradient where the forward output ``out`` is positive, 0 elsewhere.

    ``grad * (out > 0)``: a product with the mask, not ``np.where``, which branches on every
    element and on a ReLU's output (half zeros, at random) mispredicts half the time. The
    one difference from a select: an infinite or NaN gradient where the output is 0 gives
    NaN here (``inf * 0``), 0 in PyTorch; a step with such a gradient has diverged anyway.
    """
    dx = memory.empty(grad.shape, dtype=grad.dtype)
    g, y, d = _flat(grad), _flat(out), dx.reshape(-1)
    zero = out.dtype.type(0)
    shard_elements(lambda lo, hi: np.multiply(g[lo:hi], y[lo:hi] > zero, out=d[lo:hi]),
                   grad.size, RELU_BACKWARD_MIN_SHARD)
    return dx


# --------------------------------------------------------------------------- dropout

_MUL1, _MUL2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)

#: Dropout hashes this many elements at a time on one thread: its two uint32 scratch
#: arrays stay in cache (590K float32: 0.98 ms in pieces of 32K, 0.87 in pieces of 64K).
DROPOUT_PIECE = 1 << 16
#: ... and this many when the work is split over threads. The hash is ~17 NumPy calls per
#: piece, and every call takes the GIL again: two threads on 32K or 64K pieces waited for
#: each other so often that they were *slower* than one (590K: 1.16-1.36 ms against
#: 0.94-0.98). Pieces as large as the shard (up to this; 2 MiB of scratch each) make it
#: 0.59-0.61 ms on two threads.
DROPOUT_SHARD_PIECE = 1 << 19
#: Elements per thread before dropout is split over the threads.
DROPOUT_MIN_SHARD = 1 << 17


def _mix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's finaliser on uint32 arrays (wrapping arithmetic, as in C)."""
    h = h ^ (h >> np.uint32(16))
    h = h * _MUL1
    h = h ^ (h >> np.uint32(13))
    h = h * _MUL2
    return h ^ (h >> np.uint32(16))


def _mix32_inplace(h: np.ndarray, tmp: np.ndarray) -> None:
    """:func:`_mix32` written over ``h`` (``tmp``: scratch of ``h``'s size): no allocation."""
    for shift, mul in ((16, _MUL1), (13, _MUL2), (16, None)):
        np.right_shift(h, np.uint32(shift), out=tmp)
        h ^= tmp
        if mul is not None:
            h *= mul


def dropout_threshold(p: float) -> int:
    """Keep an element when its 24-bit draw is ``>= ceil(p * 2**24)`` (exact in integers)."""
    return math.ceil(p * (1 << 24))


def dropout_keep_mask(seed: int, n: int, p: float) -> np.ndarray:
    """bool ``[n]``: which of elements ``0 .. n-1`` a dropout with ``seed`` keeps."""
    return dropout_keep(seed, np.arange(n, dtype=np.uint64), p)


def dropout_keep(seed: int, i: np.ndarray, p: float) -> np.ndarray:
    """bool, like ``i`` (uint64 element indices): whether each index is kept."""
    lo, hi = (i & np.uint64(0xFFFFFFFF)).astype(np.uint32), (i >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = _mix32(lo ^ np.uint32(seed & 0xFFFFFFFF))
        h = _mix32(h ^ hi ^ np.uint32(seed >> 32))
    return (h >> np.uint32(8)) >= dropout_threshold(p)


def _keep_words(seed: int, start: int, h: np.ndarray, tmp: np.ndarray, threshold: int) -> None:
    """Overwrite ``h`` (uint32 ``[m]``) with an all-ones word for each element
    ``start .. start+m-1`` that dropout keeps and 0 for each it drops: :func:`dropout_keep`
    computed in place, for indices below 2**32 (high half 0)."""
    np.add(np.arange(h.size, dtype=np.uint32), np.uint32(start), out=h)
    h ^= np.uint32(seed & 0xFFFFFFFF)
    _mix32_inplace(h, tmp)
    h ^= np.uint32(seed >> 32)
    _mix32_inplace(h, tmp)
    h >>= np.uint32(8)
    h -= np.uint32(threshold)  # wraps to >= 2**31 where the draw is below the threshold
    h >>= np.uint32(31)        # 1 where dropped, 0 where kept
    h -= np.uint32(1)          # 0 where dropped, all ones where kept


def dropout_forward(x: Any, p: float, seed: int) -> Any:
    """``x * mask / (1 - p)``, the mask from ``(seed, flat index)``; same shape as ``x``.

    Dropped elements are exactly 0, also where ``x`` is NaN or inf (as the CUDA kernel's
    ``keep ? x * scale : 0``): the scaled values' bits are and-ed with an all-ones word
    where kept and 0 where dropped, a product of bits without a branch. The hash runs
    in place on pieces of :data:`DROPOUT_PIECE` elements (in cache); a large array is split
    over the threads, each taking its shard in pieces of up to :data:`DROPOUT_SHARD_PIECE`.
    """
    scale = x.dtype.type(1.0 / (1.0 - p))
    if x.dtype.kind != "f" or x.dtype.itemsize % 4 or x.size >= 2**32:  # the plain formula
        keep = dropout_keep_mask(seed, x.size, p).reshape(x.shape)
        return np.where(keep, x * scale, x.dtype.type(0))
    out = memory.empty(x.shape, dtype=x.dtype)
    src, dst = _flat(x), out.reshape(-1)
    words = x.dtype.itemsize // 4  # uint32 words per element
    threshold = dropout_threshold(p)

    def shard(lo: int, hi: int) -> None:
        piece = DROPOUT_PIECE if hi - lo == x.size else DROPOUT_SHARD_PIECE
        h = memory.empty(min(piece, hi - lo), dtype=np.uint32)
        tmp = memory.empty(h.shape, h.dtype)
        for a in range(lo, hi, piece):
            b = min(a + piece, hi)
            mask = h[: b - a]
            _keep_words(seed, a, mask, tmp[: b - a], threshold)
            np.multiply(src[a:b], scale, out=dst[a:b])
            bits = dst[a:b].view(np.uint32).reshape(b - a, words)
            bits &= mask[:, None]

    shard_elements(shard, x.size, DROPOUT_MIN_SHARD)
    return out


def dropout_backward(grad: Any, p: float, seed: int) -> Any:
    """The same mask and scale applied to the gradient (recomputed, never stored)."""
    return dropout_forward(grad, p, seed)


# --------------------------------------------------------------------------- Linear
#
# The GEMMs of a linear layer run on tinytrain's threads, each on a shard of the rows (or,
# for dW, of the columns) with the BLAS at one thread, as the convolutions do: OpenBLAS's
# own threads would keep spinning after the call on the cores the next kernel's shards
# need (see parallel.py). A shard gets at least MIN_SHARD_MACS multiply-adds.

#: Below this many multiply-adds a GEMM shard is not worth a thread (~40 us of work).
MIN_SHARD_MACS = 1 << 22


def _min_shard(macs_per_row: int) -> int:
    return max(1, MIN_SHARD_MACS // max(macs_per_row, 1))


def linear_forward(x: Any, w: Any, b: Any | None) -> Any:
    """``x [*, in] @ w.T [in, out] (+ b [out]) -> [*, out]``.

    Sharded over the rows of ``x``, or, when there are more input features than rows (a
    classifier head after a convolution: 64 x 18432), over the input features, each thread
    reading its own slice of ``x`` and ``w`` and the partial products summed: split by rows,
    every thread would read all of ``w`` (2 threads: 0.61 ms against 0.26 on 64 x 18432 x 10).
    A narrow head's products run in chunks of features where the BLAS has small-matrix
    kernels (:mod:`tinytrain.kernels.cpu.gemm`: 0.39 -> 0.19 ms for 64 x 18432 x 10).
    """
    n_in, n_out = w.shape[1], w.shape[0]
    x2 = x.reshape(math.prod(x.shape[:-1]), n_in)
    n_rows = x2.shape[0]
    if n_in > n_rows:
        def features(lo: int, hi: int) -> Any:  # these input features' part of the product
            return gemm.matmul_sum(x2[None, :, lo:hi], w.T[None, lo:hi])

        out = add_shards(run_sharded(features, n_in, min_shard=_min_shard(n_rows * n_out)))
        if b is not None:
            out += b
    else:
        out = memory.empty((n_rows, n_out), dtype=np.result_type(x, w))

        def rows(lo: int, hi: int) -> None:
            np.matmul(x2[lo:hi], w.T, out=out[lo:hi])
            if b is not None:
                out[lo:hi] += b

        run_sharded(rows, n_rows, min_shard=_min_shard(n_in * n_out))
    return out.reshape(*x.shape[:-1], n_out)


def linear_backward(
    grad: Any, x: Any | None, w: Any | None, needs: tuple[bool, bool, bool]
) -> tuple[Any | None, Any | None, Any | None]:
    """``(dx [*, in], dw [out, in], db [out])`` from ``grad [*, out]``, each only if needed.

    ``w`` is needed only for dx and ``x`` only for dw (the layer saves just those).
    dw is sharded over its columns (the input features), and so is dx when there are more
    input features than rows (else over its rows); when both go by features, one sharded
    call does both (one hand-off to the other threads, not two). The products run in
    column chunks where :mod:`tinytrain.kernels.cpu.gemm` says so (64 x 18432 x 10: dx
    0.62 -> 0.38 ms, dw 0.46 -> 0.24 on one thread).
    """
    need_x, need_w, need_b = needs
    g2 = grad.reshape(math.prod(grad.shape[:-1]), grad.shape[-1])
    n_rows, n_out = g2.shape
    n_in = w.shape[1] if need_x else x.shape[-1] if need_w else 0
    x2 = x.reshape(math.prod(x.shape[:-1]), n_in) if need_w else None
    gx = memory.empty((n_rows, n_in), dtype=np.result_type(grad, w)) if need_x else None
    gw = memory.empty((n_out, n_in), dtype=np.result_type(grad, x)) if need_w else None
    dx_by_rows = need_x and n_in <= n_rows

    def features(lo: int, hi: int) -> None:  # dw's columns lo:hi, and dx's unless by rows
        if need_x and not dx_by_rows:
            gemm.matmul_cols(g2, w[:, lo:hi], out=gx[:, lo:hi])
        if need_w:
            gemm.matmul_cols(g2.T, x2[:, lo:hi], out=gw[:, lo:hi])

    if need_w or (need_x and not dx_by_rows):
        run_sharded(features, n_in, min_shard=_min_shard(n_rows * n_out))
    if dx_by_rows:
        run_sharded(lambda lo, hi: gemm.matmul_cols(g2[lo:hi], w, out=gx[lo:hi]), n_rows,
                    min_shard=_min_shard(n_in * n_out))
    gb = g2.sum(axis=0) if need_b else None
    return (None if gx is None else gx.reshape(*grad.shape[:-1], n_in)), gw, gb


# --------------------------------------------------------------------------- cross-entropy


def _exp_minus(logits: Any, shift: Any) -> Any:
    """``exp(logits - shift)`` (``shift [N, 1]``), in one buffer written twice."""
    out = memory.empty(logits.shape, dtype=logits.dtype)
    np.subtract(logits, shift, out=out)
    return np.exp(out, out=out)


def _logsumexp_rows(logits: Any) -> Any:
    """``log sum_c exp(logits[n, c])`` of ``logits [N, C]``, as ``[N, 1]``: shifted by each
    row's maximum, so that no ``exp`` overflows."""
    top = logits.max(axis=1, keepdims=True)
    return top + np.log(_exp_minus(logits, top).sum(axis=1, keepdims=True))


def _check_targets(targets: Any, classes: int) -> None:
    if targets.size and (int(targets.min()) < 0 or int(targets.max()) >= classes):
        raise ValueError(
            f"cross_entropy: targets must lie in [0, {classes}), got values from "
            f"{int(targets.min())} to {int(targets.max())}"
        )


def cross_entropy_forward(logits: Any, targets: Any, reduction: str) -> Any:
    """``-log softmax(logits)[n, targets[n]]``: ``[N]`` for "none", else its mean or sum.

    ``logits [N, C]``, integer ``targets [N]``; a target outside ``[0, C)`` raises a
    ValueError here and now (on the CPU this costs nothing: no device to wait for).
    """
    _check_targets(targets, logits.shape[1])
    # -log softmax at the target alone: the row's logsumexp minus the target's logit
    # (three passes over the logits, none of them making the whole log-softmax)
    rows = np.arange(logits.shape[0])
    nll = _logsumexp_rows(logits)[:, 0] - logits[rows, targets]
    return nll.mean() if reduction == "mean" else nll.sum() if reduction == "sum" else nll


def cross_entropy_backward(logits: Any, targets: Any, grad: Any, reduction: str) -> Any:
    """``(softmax(logits) - onehot(targets)) * grad`` (divided by N for "mean"): ``[N, C]``.

    One ``exp`` pass (the costly one: ~4 ns per float32 element on the course's VM): the
    shifted exponentials are scaled by ``grad / (N * row sum)`` in one more pass, then the
    target entries lose ``grad / N``."""
    n = logits.shape[0]
    out = _exp_minus(logits, logits.max(axis=1, keepdims=True))
    if reduction == "mean":
        scale = np.full((n, 1), grad / out.dtype.type(n), dtype=out.dtype)
    elif reduction == "sum":
        scale = np.full((n, 1), grad, dtype=out.dtype)
    else:
        scale = grad.astype(out.dtype, copy=False).reshape(n, 1)
    out *= scale / out.sum(axis=1, keepdims=True)
    out[np.arange(n), targets] -= scale[:, 0]
    return out
