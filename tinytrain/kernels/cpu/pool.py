"""2-D max and average pooling on raw arrays, forward and backward.

Chapter 3 (``notebooks/03_conv2d_cpu.ipynb``) uses these after the convolution.

A pooling window slides like a convolution kernel, but has no weights and does
not mix channels. Like the direct convolution, every kernel here is a loop over
the ``Kh * Kw`` window offsets ``(i, j)``, each touching one strided view of the
(padded) input ``x_pad[:, :, i::sh, j::sw]`` that holds the element at offset
``(i, j)`` of every window at once. No window buffer is built.

Semantics are PyTorch's (``ceil_mode=False``, ``dilation=1``):

* ``out = (in + 2 * pad - kernel) // stride + 1``; ``stride`` defaults to the
  kernel size; padding is at most half the kernel;
* max pooling pads with ``-inf`` and sends the gradient to the arg-max of each
  window. Ties go to the *first* maximum in row-major window order (the scan
  PyTorch's CPU kernel does: it only moves on a strictly greater value); a NaN
  wins over numbers; padding is never chosen;
* average pooling pads with zeros and, by default (``count_include_pad=True``),
  divides by ``Kh * Kw`` even where the window overlaps the padding.

The kernels use the array module of their input, so they also run on CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tinytrain.backend import get_array_module
from tinytrain.kernels.cpu.conv2d import IntOrPair, pair
from tinytrain.kernels.cpu.parallel import shard_batch

__all__ = [
    "Pool2dMeta",
    "avg_pool2d_backward",
    "avg_pool2d_forward",
    "max_pool2d_backward",
    "max_pool2d_forward",
]


@dataclass(frozen=True)
class Pool2dMeta:
    """Every size of one 2-D pooling, validated in one place (H and W kept separate)."""

    batch: int
    channels: int
    in_h: int
    in_w: int
    kernel_h: int
    kernel_w: int
    stride_h: int
    stride_w: int
    pad_h: int
    pad_w: int
    out_h: int
    out_w: int

    @classmethod
    def from_shape(
        cls,
        x_shape: tuple[int, ...],
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        op: str = "max_pool2d",
    ) -> Pool2dMeta:
        """Validate and compute; ``stride=None`` means ``stride = kernel_size``."""
        x_shape = tuple(x_shape)
        if len(x_shape) != 4:
            raise ValueError(
                f"{op}: input must be 4-D [N, C, H, W], got shape {x_shape} ({len(x_shape)} dims)"
            )
        if min(x_shape) < 1:
            raise ValueError(f"{op}: input shape {x_shape} has an empty dimension")
        kh, kw = pair(kernel_size, "kernel_size", op)
        sh, sw = pair(kernel_size if stride is None else stride, "stride", op)
        ph, pw = pair(padding, "padding", op)
        if kh < 1 or kw < 1:
            raise ValueError(f"{op}: kernel_size must be positive, got (h, w) = {(kh, kw)}")
        if sh < 1 or sw < 1:
            raise ValueError(f"{op}: stride must be positive, got (h, w) = {(sh, sw)}")
        if ph < 0 or pw < 0:
            raise ValueError(f"{op}: padding must be non-negative, got (h, w) = {(ph, pw)}")
        if 2 * ph > kh or 2 * pw > kw:
            raise ValueError(
                f"{op}: padding should be at most half the kernel size, got padding {ph}x{pw} "
                f"for kernel {kh}x{kw}"
            )
        n, c, h, w = x_shape
        if kh > h + 2 * ph or kw > w + 2 * pw:
            raise ValueError(
                f"{op}: kernel {kh}x{kw} does not fit the padded input "
                f"{h + 2 * ph}x{w + 2 * pw} (input {h}x{w}, padding {ph}x{pw})"
            )
        out_h, out_w = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        return cls(n, c, h, w, kh, kw, sh, sw, ph, pw, out_h, out_w)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.channels, self.out_h, self.out_w)

    def offsets(self) -> list[tuple[int, int]]:
        """The window offsets ``(i, j)`` in row-major (PyTorch's scan) order."""
        return [(i, j) for i in range(self.kernel_h) for j in range(self.kernel_w)]

    def window(self, padded: Any, i: int, j: int) -> Any:
        """The view ``[..., Ho, Wo]`` of a padded ``[..., Hp, Wp]`` array at offset (i, j)."""
        h_end = i + self.stride_h * (self.out_h - 1) + 1
        w_end = j + self.stride_w * (self.out_w - 1) + 1
        return padded[..., i : h_end : self.stride_h, j : w_end : self.stride_w]


def _pad(x: Any, meta: Pool2dMeta, value: float) -> Any:
    """``x`` with ``pad_h``/``pad_w`` rows/columns of ``value`` around H and W (no copy if 0)."""
    if meta.pad_h == 0 and meta.pad_w == 0:
        return x
    xp = get_array_module(x)
    n, c, h, w = x.shape
    out = xp.full((n, c, h + 2 * meta.pad_h, w + 2 * meta.pad_w), value, dtype=x.dtype)
    out[:, :, meta.pad_h : meta.pad_h + h, meta.pad_w : meta.pad_w + w] = x
    return out


def _unpad(grad_pad: Any, meta: Pool2dMeta) -> Any:
    xp = get_array_module(grad_pad)
    ph, pw = meta.pad_h, meta.pad_w
    return xp.ascontiguousarray(grad_pad[:, :, ph : ph + meta.in_h, pw : pw + meta.in_w])


def max_pool2d_forward(x: Any, meta: Pool2dMeta) -> tuple[Any, Any]:
    """``x [N, C, H, W] -> (out [N, C, Ho, Wo], argmax [N, C, Ho, Wo])``.

    ``argmax`` holds, for every output, the window offset ``k = i * Kw + j`` of the
    chosen input (int16), which is all the backward needs. On the CPU, shards of the
    batch run in parallel (:mod:`tinytrain.kernels.cpu.parallel`).
    """
    xp = get_array_module(x)
    out = xp.empty(meta.output_shape, dtype=x.dtype)
    argmax = xp.empty(meta.output_shape, dtype=xp.int16)

    def shard(xs: Any, o: Any, am: Any, a: int, b: int) -> None:
        o[...], am[...] = _max_pool2d_forward(xs, replace(meta, batch=b - a))

    shard_batch(shard, meta.batch, x, out, argmax)
    return out, argmax


def _max_pool2d_forward(x: Any, meta: Pool2dMeta) -> tuple[Any, Any]:
    xp = get_array_module(x)
    x_pad = _pad(x, meta, float("-inf"))
    # Which padded positions are real input: padding is skipped, never chosen.
    real = xp.zeros((x_pad.shape[2], x_pad.shape[3]), dtype=bool)
    real[meta.pad_h : meta.pad_h + meta.in_h, meta.pad_w : meta.pad_w + meta.in_w] = True
    best = xp.full(meta.output_shape, float("-inf"), dtype=x.dtype)
    argmax = xp.full(meta.output_shape, -1, dtype=xp.int16)
    for k, (i, j) in enumerate(meta.offsets()):
        value = meta.window(x_pad, i, j)
        # PyTorch's scan: take a strictly greater value, or a NaN; a window whose
        # real values are all -inf keeps its first real position.
        take = (value > best) | xp.isnan(value) | ((argmax < 0) & meta.window(real, i, j))
        best = xp.where(take, value, best)
        argmax = xp.where(take, xp.int16(k), argmax)
    return best, argmax


def max_pool2d_backward(grad_out: Any, argmax: Any, meta: Pool2dMeta) -> Any:
    """``dx [N, C, H, W]``: each output's gradient added to the input it chose.

    One pass per window offset; within one offset no two outputs share an input,
    so a plain ``+=`` into the strided view is a correct scatter-add even when
    windows overlap. On the CPU, shards of the batch run in parallel.
    """
    xp = get_array_module(grad_out)
    dx = xp.empty((meta.batch, meta.channels, meta.in_h, meta.in_w), dtype=grad_out.dtype)

    def shard(gs: Any, ams: Any, dxs: Any, a: int, b: int) -> None:
        dxs[...] = _max_pool2d_backward(gs, ams, replace(meta, batch=b - a))

    shard_batch(shard, meta.batch, grad_out, argmax, dx)
    return dx


def _max_pool2d_backward(grad_out: Any, argmax: Any, meta: Pool2dMeta) -> Any:
    xp = get_array_module(grad_out)
    shape = (meta.batch, meta.channels, meta.in_h + 2 * meta.pad_h, meta.in_w + 2 * meta.pad_w)
    grad_pad = xp.zeros(shape, dtype=grad_out.dtype)
    zero = xp.zeros((), dtype=grad_out.dtype)
    for k, (i, j) in enumerate(meta.offsets()):
        view = meta.window(grad_pad, i, j)
        view += xp.where(argmax == k, grad_out, zero)
    return _unpad(grad_pad, meta)


def _avg_divisor(xp: Any, meta: Pool2dMeta, count_include_pad: bool, dtype: Any) -> Any:
    """What each output is divided by: ``Kh * Kw``, or the count of real inputs (``[Ho, Wo]``)."""
    if count_include_pad or (meta.pad_h == 0 and meta.pad_w == 0):
        return dtype.type(meta.kernel_h * meta.kernel_w)
    real = _pad(xp.ones((1, 1, meta.in_h, meta.in_w), dtype=dtype), meta, 0.0)
    count = sum(meta.window(real, i, j) for i, j in meta.offsets())
    return count[0, 0]


def avg_pool2d_forward(x: Any, meta: Pool2dMeta, count_include_pad: bool = True) -> Any:
    """``x [N, C, H, W] -> out [N, C, Ho, Wo]``: the mean of each window."""
    xp = get_array_module(x)
    x_pad = _pad(x, meta, 0.0)
    total = xp.zeros(meta.output_shape, dtype=x.dtype)
    for i, j in meta.offsets():
        total += meta.window(x_pad, i, j)
    return total / _avg_divisor(xp, meta, count_include_pad, x.dtype)


def avg_pool2d_backward(grad_out: Any, meta: Pool2dMeta, count_include_pad: bool = True) -> Any:
    """``dx [N, C, H, W]``: each output's gradient spread evenly over its window."""
    xp = get_array_module(grad_out)
    share = grad_out / _avg_divisor(xp, meta, count_include_pad, grad_out.dtype)
    shape = (meta.batch, meta.channels, meta.in_h + 2 * meta.pad_h, meta.in_w + 2 * meta.pad_w)
    grad_pad = xp.zeros(shape, dtype=grad_out.dtype)
    for i, j in meta.offsets():
        view = meta.window(grad_pad, i, j)
        view += share
    return _unpad(grad_pad, meta)
