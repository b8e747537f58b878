"""2-D max and average pooling on raw arrays, forward and backward.

Chapter 3 (``notebooks/03_conv2d_cpu.ipynb``) uses these after the convolution.

A pooling window slides like a convolution kernel, but has no weights and does
not mix channels. Like the direct convolution, every kernel here is a loop over
the ``Kh * Kw`` window offsets ``(i, j)``, each touching one strided view of the
(padded) input ``x_pad[:, :, i::sh, j::sw]`` that holds the element at offset
``(i, j)`` of every window at once. No window buffer is built.

Semantics are PyTorch's (``ceil_mode=False``, ``dilation=1``; the other options take the
general path of :mod:`tinytrain.nn.pooling`):

* ``out = (in + 2 * pad - kernel) // stride + 1``; ``stride`` defaults to the
  kernel size; padding is at most half the kernel;
* max pooling pads with ``-inf`` and sends the gradient to the arg-max of each
  window. Ties go to the *first* maximum in row-major window order (the scan
  PyTorch's CPU kernel does: it only moves on a strictly greater value); a NaN
  wins over numbers; padding is never chosen;
* average pooling pads with zeros and, by default (``count_include_pad=True``),
  divides by ``Kh * Kw`` even where the window overlaps the padding.

These are the CPU (NumPy) kernels; :mod:`tinytrain.kernels.cuda` has the same
functions for arrays on the GPU.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tinytrain.kernels.cpu import memory
from tinytrain.kernels.cpu.parallel import shard_batch
from tinytrain.kernels.shapes import Pool2dMeta

__all__ = [
    "Pool2dMeta",
    "avg_pool2d_backward",
    "avg_pool2d_forward",
    "max_pool2d_backward",
    "max_pool2d_forward",
]


def _pad(x: Any, meta: Pool2dMeta, value: float) -> Any:
    """``x`` with ``pad_h``/``pad_w`` rows/columns of ``value`` around H and W (no copy if 0)."""
    if meta.pad_h == 0 and meta.pad_w == 0:
        return x
    n, c, h, w = x.shape
    out = np.full((n, c, h + 2 * meta.pad_h, w + 2 * meta.pad_w), value, dtype=x.dtype)
    out[:, :, meta.pad_h : meta.pad_h + h, meta.pad_w : meta.pad_w + w] = x
    return out


def _unpad(grad_pad: Any, meta: Pool2dMeta) -> Any:
    ph, pw = meta.pad_h, meta.pad_w
    return np.ascontiguousarray(grad_pad[:, :, ph : ph + meta.in_h, pw : pw + meta.in_w])


def max_pool2d_forward(x: Any, meta: Pool2dMeta) -> tuple[Any, Any]:
    """``x [N, C, H, W] -> (out [N, C, Ho, Wo], argmax [N, C, Ho, Wo])``.

    ``argmax`` holds, for every output, the window offset ``k = i * Kw + j`` of the
    chosen input (int16; int32 for windows of more than 32767 elements). Shards of the
    batch run in parallel
    (:mod:`tinytrain.kernels.cpu.parallel`).
    """
    out = memory.empty(meta.output_shape, dtype=x.dtype)
    argmax = memory.empty(meta.output_shape, dtype=_offset_dtype(meta))

    def shard(xs: Any, o: Any, am: Any, a: int, b: int) -> None:
        _max_scan(xs, replace(meta, batch=b - a), o, am)

    shard_batch(shard, meta.batch, x, out, argmax)
    return out, argmax


def _offset_dtype(meta: Pool2dMeta) -> Any:
    """The smallest integer type that holds every window offset ``0 .. Kh*Kw - 1``."""
    return np.int16 if meta.kernel_h * meta.kernel_w <= np.iinfo(np.int16).max else np.int32


def _max_scan(x: Any, meta: Pool2dMeta, best: Any, argmax: Any) -> None:
    """Each window's maximum into ``best`` and its offset into ``argmax`` (both ``[n, C, Ho, Wo]``).

    The scan over the ``Kh * Kw`` offsets keeps a running maximum and, where an offset's
    value is strictly greater, moves the arg-max to it (PyTorch's first-maximum rule)::

        take = value > best;  best = max(best, value);  argmax += take * (k - argmax)

    Arithmetic, not masked writes: ``np.where``/``copyto(where=...)`` branch on every
    element, and on a ReLU's output (half zeros, at random) mispredict half the time,
    10x slower than these three passes. Two cases this misses go to the exact scan of
    :func:`_max_scan_exact`: a NaN (``take`` is False for NaN; PyTorch takes it) and, with
    padding, a window whose real values are all ``-inf`` (its first offset may be padding).
    Both leave a non-finite maximum, so one check of ``best`` finds them.
    """
    x_pad = _pad(x, meta, float("-inf"))
    offsets = meta.offsets()
    np.copyto(best, meta.window(x_pad, *offsets[0]))
    argmax[...] = 0
    take = memory.empty(best.shape, dtype=bool)
    step = memory.empty(best.shape, dtype=argmax.dtype)
    for k, (i, j) in enumerate(offsets[1:], start=1):
        value = meta.window(x_pad, i, j)
        np.greater(value, best, out=take)
        np.maximum(best, value, out=best)
        np.subtract(argmax.dtype.type(k), argmax, out=step)
        step *= take
        argmax += step
    if not np.isfinite(best).all():
        best[...], argmax[...] = _max_scan_exact(x_pad, meta)


def _max_scan_exact(x_pad: Any, meta: Pool2dMeta) -> tuple[Any, Any]:
    """The scan of PyTorch's CPU kernel, NaN and padding included (slower: masked writes)."""
    # Which padded positions are real input: padding is skipped, never chosen.
    real = memory.zeros((x_pad.shape[2], x_pad.shape[3]), dtype=bool)
    real[meta.pad_h : meta.pad_h + meta.in_h, meta.pad_w : meta.pad_w + meta.in_w] = True
    best = np.full(meta.output_shape, float("-inf"), dtype=x_pad.dtype)
    kind = _offset_dtype(meta)
    argmax = np.full(meta.output_shape, -1, dtype=kind)
    for k, (i, j) in enumerate(meta.offsets()):
        value = meta.window(x_pad, i, j)
        # PyTorch's scan: take a strictly greater value, or a NaN; a window whose
        # real values are all -inf keeps its first real position.
        take = (value > best) | np.isnan(value) | ((argmax < 0) & meta.window(real, i, j))
        best = np.where(take, value, best)
        argmax = np.where(take, kind(k), argmax)
    return best, argmax


def max_pool2d_backward(grad_out: Any, x: Any, meta: Pool2dMeta) -> Any:
    """``dx [N, C, H, W]``: each output's gradient added to the input it chose.

    Needs the forward input ``x``, not the arg-max: each shard finds its windows' arg-max
    again (the scan of :func:`max_pool2d_forward`) and scatters. So the layer keeps only
    ``x``, which the ReLU before it keeps anyway, and forward does not write an arg-max
    array that backward may never read. One pass per window offset,
    ``dx[window k] = dy * (argmax == k)``; windows that overlap add instead of writing.
    Shards of the batch run in parallel. (A product, not a select: an infinite or NaN
    ``dy`` gives NaN at its window's other positions, where PyTorch gives 0; a step with
    such a gradient has diverged anyway.)
    """
    dx = memory.empty((meta.batch, meta.channels, meta.in_h, meta.in_w), dtype=grad_out.dtype)

    def shard(gs: Any, xs: Any, dxs: Any, a: int, b: int) -> None:
        shard_meta = replace(meta, batch=b - a)
        best = memory.empty(shard_meta.output_shape, dtype=xs.dtype)
        argmax = memory.empty(shard_meta.output_shape, dtype=_offset_dtype(meta))
        _max_scan(xs, shard_meta, best, argmax)
        dxs[...] = _max_pool2d_backward(gs, argmax, shard_meta)

    shard_batch(shard, meta.batch, grad_out, x, dx)
    return dx


def _max_pool2d_backward(grad_out: Any, argmax: Any, meta: Pool2dMeta) -> Any:
    shape = (meta.batch, meta.channels, meta.in_h + 2 * meta.pad_h, meta.in_w + 2 * meta.pad_w)
    # Windows that tile the input exactly write every element once: no zeros needed.
    tiles = ((meta.stride_h, meta.stride_w) == (meta.kernel_h, meta.kernel_w)
             and (meta.out_h * meta.stride_h, meta.out_w * meta.stride_w) == shape[2:])
    overlap = meta.stride_h < meta.kernel_h or meta.stride_w < meta.kernel_w
    grad_pad = (memory.empty if tiles else memory.zeros)(shape, dtype=grad_out.dtype)
    chosen = memory.empty(argmax.shape, dtype=bool)
    for k, (i, j) in enumerate(meta.offsets()):
        np.equal(argmax, k, out=chosen)
        view = meta.window(grad_pad, i, j)
        if overlap:
            view += grad_out * chosen
        else:
            np.multiply(grad_out, chosen, out=view)
    return _unpad(grad_pad, meta)


def _avg_divisor(meta: Pool2dMeta, count_include_pad: bool, dtype: Any) -> Any:
    """What each output is divided by: ``Kh * Kw``, or the count of real inputs (``[Ho, Wo]``)."""
    if count_include_pad or (meta.pad_h == 0 and meta.pad_w == 0):
        return dtype.type(meta.kernel_h * meta.kernel_w)
    real = _pad(np.ones((1, 1, meta.in_h, meta.in_w), dtype=dtype), meta, 0.0)
    count = sum(meta.window(real, i, j) for i, j in meta.offsets())
    return count[0, 0]


def avg_pool2d_forward(x: Any, meta: Pool2dMeta, count_include_pad: bool = True) -> Any:
    """``x [N, C, H, W] -> out [N, C, Ho, Wo]``: the mean of each window."""
    x_pad = _pad(x, meta, 0.0)
    total = memory.zeros(meta.output_shape, dtype=x.dtype)
    for i, j in meta.offsets():
        total += meta.window(x_pad, i, j)
    return total / _avg_divisor(meta, count_include_pad, x.dtype)


def avg_pool2d_backward(grad_out: Any, meta: Pool2dMeta, count_include_pad: bool = True) -> Any:
    """``dx [N, C, H, W]``: each output's gradient spread evenly over its window."""
    share = grad_out / _avg_divisor(meta, count_include_pad, grad_out.dtype)
    shape = (meta.batch, meta.channels, meta.in_h + 2 * meta.pad_h, meta.in_w + 2 * meta.pad_w)
    grad_pad = memory.zeros(shape, dtype=grad_out.dtype)
    for i, j in meta.offsets():
        view = meta.window(grad_pad, i, j)
        view += share
    return _unpad(grad_pad, meta)
