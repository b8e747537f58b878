"""Pooling's general path: any window, as a table of the input positions it reads.

The pooling kernels (:mod:`tinytrain.kernels.cpu.pool` and their CUDA twins) compute one
kind of window, fast: ``dilation=1`` and floor-mode sizes. Everything else PyTorch's 2-D
pooling offers comes through one mechanism here, written with the input's array module
(NumPy or CuPy, :func:`~tinytrain.backend.get_array_module`), so it runs on either device:

* :class:`Windows` lists, along each axis, the input rows (columns) each output's window
  reads, in PyTorch's scan order; ``-1`` marks a position outside the input (padding, the
  overhang of a ``ceil_mode`` window, the short end of an adaptive window). Its
  :meth:`~Windows.table` ``[Kh * Kw, Ho, Wo]`` holds flat indices ``r * W + c`` into one
  ``H x W`` plane, and ``H * W`` for the outside: a slot past the plane that holds the
  padding value.
* :class:`PlaneGather` reads ``x [N, C, H, W]`` at such indices and sends the gradient back
  to the places it read (a scatter-add: NumPy's or CuPy's ``add.at``).
* Max pooling (:func:`max_pool`) finds each window's maximum with PyTorch's scan rule and
  gathers there; that index, into the ``H * W`` plane, is what ``return_indices`` returns.
* Average pooling (:func:`avg_pool`) gathers every window, sums and divides by PyTorch's
  divisor (:func:`avg_divisor`).
* Adaptive pooling is the same over the adaptive windows (:meth:`Windows.adaptive`),
  ``floor(i * H / Ho)`` to ``ceil((i + 1) * H / Ho)``.
* Max unpooling (:class:`MaxUnpool2dFunction`) writes values at indices; its gradient reads
  them back.

Every window is gathered whole (``Kh * Kw`` copies of the input in memory), which the
kernels avoid; still, an MNIST CNN's activations (``[64, 32, 28, 28]`` float32) pool forward
and backward in tens of milliseconds on one CPU core, with 3x3 windows as with 2x2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinytrain.autograd import Context, Function
from tinytrain.autograd.ops import Gather, Reshape, adjoint, anchored
from tinytrain.backend import get_array_module, index_add
from tinytrain.kernels.shapes import Pool2dMeta
from tinytrain.tensor import Tensor

__all__ = ["MaxUnpool2dFunction", "PlaneGather", "Windows", "avg_divisor", "avg_pool",
           "max_pool"]


@dataclass(frozen=True)
class Windows:
    """The input positions every window of one 2-D pooling reads.

    ``rows [Ho, Kh]``: the input row of each window's ``Kh`` rows, ``-1`` outside the
    input; ``cols [Wo, Kw]`` the same for columns; the input is ``h x w``. Built on the CPU
    (the tables are small) and moved to the input's device by :meth:`table`.
    """

    rows: np.ndarray
    cols: np.ndarray
    h: int
    w: int

    @classmethod
    def of_pool(cls, meta: Pool2dMeta) -> Windows:
        """The windows of a pooling: output ``o`` reads ``o * stride - pad + r * dilation``
        for ``r`` in ``0 .. kernel - 1``, where that is inside the input."""

        def axis(size: int, out: int, kernel: int, stride: int, pad: int, dilation: int) -> Any:
            pos = np.arange(out)[:, None] * stride - pad + np.arange(kernel) * dilation
            return np.where((pos >= 0) & (pos < size), pos, -1)

        m = meta
        return cls(axis(m.in_h, m.out_h, m.kernel_h, m.stride_h, m.pad_h, m.dilation_h),
                   axis(m.in_w, m.out_w, m.kernel_w, m.stride_w, m.pad_w, m.dilation_w),
                   m.in_h, m.in_w)

    @classmethod
    def adaptive(cls, h: int, w: int, out_h: int, out_w: int) -> Windows:
        """Adaptive pooling's windows (PyTorch's): output ``i`` of ``out`` reads input
        ``floor(i * size / out)`` up to ``ceil((i + 1) * size / out)``, excluded. They differ
        in length by one at most; the shorter ones end in ``-1``."""

        def axis(size: int, out: int) -> Any:
            i = np.arange(out)
            start, end = i * size // out, -(-(i + 1) * size // out)
            pos = start[:, None] + np.arange(max((end - start).max(initial=0), 1))
            return np.where(pos < end[:, None], pos, -1)

        return cls(axis(h, out_h), axis(w, out_w), h, w)

    @property
    def out_shape(self) -> tuple[int, int]:
        return self.rows.shape[0], self.cols.shape[0]

    def table(self, xp: Any) -> Any:
        """``[Kh * Kw, Ho, Wo]``: for each window element (rows, then columns: PyTorch's scan
        order) the flat plane index ``r * W + c`` it reads at every output, ``H * W`` where it
        is outside the input. (Elements first: reductions over them run along whole
        ``[Ho, Wo]`` planes, not along short rows.)"""
        r, c = self.rows.T[:, None, :, None], self.cols.T[None, :, None, :]
        flat = np.where((r >= 0) & (c >= 0), r * self.w + c, self.h * self.w)
        return xp.asarray(flat.reshape(self.rows.shape[1] * self.cols.shape[1],
                                       *self.out_shape))

    def sizes(self) -> np.ndarray:
        """``[Ho, Wo]``: how many input elements each window reads."""
        return (self.rows >= 0).sum(1)[:, None] * (self.cols >= 0).sum(1)[None, :]


def _flat(index: Any, planes: tuple[int, int], slots: int) -> Any:
    """Plane indices ``[N, C, ...]`` (or ``[1, 1, ...]``, one table for every plane) as
    indices into the ``N * C`` planes ``(N, C) = planes`` of ``slots`` elements each, laid
    end to end."""
    xp = get_array_module(index)
    n, c = planes
    start = (xp.arange(n * c) * slots).reshape(n, c, *(1,) * (index.ndim - 2))
    return index + start


def _with_slot(x: Any, fill: Any) -> Any:
    """``x [N, C, H, W]`` as ``N * C`` planes of ``H * W + 1`` elements laid end to end, the
    last of each (the slot ``H * W``) holding ``fill``."""
    xp = get_array_module(x)
    n, c, h, w = x.shape
    return xp.concatenate([x.reshape(n, c, h * w), xp.full((n, c, 1), fill, x.dtype)],
                          axis=2).ravel()


class PlaneGather(Function):
    """``out[n, c, ...] = x[n, c].flat[index[n, c, ...]]``, and ``fill`` where the index is
    ``H * W``; ``index`` is ``[N, C, ...]``, or ``[1, 1, ...]`` to read every plane at the
    same places. Backward adds each output's gradient back where it was read (repeats
    accumulate); nothing goes to the fill."""

    new_grads = True  # backward allocates dx

    @staticmethod
    def forward(x: Any, index: Any, fill: Any) -> Any:
        n, c, h, w = x.shape
        return _with_slot(x, fill)[_flat(index, (n, c), h * w + 1)]

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        x, ctx.index, _ = inputs
        ctx.shape = x.shape

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, None, None]:
        n, c, h, w = ctx.shape
        grad = get_array_module(grad_out).zeros(n * c * (h * w + 1), grad_out.dtype)
        flat = _flat(ctx.index, (n, c), h * w + 1)
        index_add(grad, flat.ravel(), grad_out.ravel())
        return grad.reshape(n, c, h * w + 1)[:, :, :-1].reshape(ctx.shape), None, None

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Tensor, saved: tuple) -> tuple[Any, None, None]:
        """Linear in ``x`` (the fill aside): its adjoint, the gather itself with a fill of 0
        (:func:`~tinytrain.autograd.ops.adjoint`), in ``x``'s graph as PyTorch's gradients
        of max, average and adaptive pooling are (their backward reads the input)."""
        grad = adjoint(PlaneGather, ctx, grad_out, 0, (None, ctx.index, 0))
        return anchored(grad, saved.input(0, ctx.shape, grad_out)), None, None


def _lowest(dtype: Any) -> Any:
    """The value no element is below: max pooling's padding (``-inf``; an integer type's
    minimum; False)."""
    if dtype.kind == "f":
        return -np.inf
    return False if dtype.kind == "b" else np.iinfo(dtype).min


def max_indices(x: Any, windows: Windows) -> Any:
    """``[N, C, Ho, Wo]`` int64: the plane index ``r * W + c`` of each window's maximum, by
    the scan of PyTorch's CPU kernel.

    That scan starts at the window's first input element and moves on a strictly greater
    value or a NaN, so it picks the first maximum, a NaN over any number (the last NaN
    when there are several), and the first element of a window of ``-inf`` (never the
    padding).
    """
    xp = get_array_module(x)
    n, c, h, w = x.shape
    table = windows.table(xp)  # [K, Ho, Wo]
    planes = _with_slot(x, _lowest(x.dtype)).reshape(n * c, h * w + 1)
    values = xp.take(planes, table, axis=1)  # [N * C, K, Ho, Wo]
    best = values.max(axis=1, keepdims=True)  # (NaN where the window has a NaN)
    # The first element equal to the maximum: the largest "rank" K - k among them (a
    # reduction along whole planes; argmax over a middle axis copies the array first).
    size = table.shape[0]
    rank = xp.arange(size, 0, -1, dtype=np.int32)[:, None, None]
    k = size - (((values == best) & (table < h * w)) * rank).max(axis=1)
    if x.dtype.kind == "f" and n and xp.isnan(best).any():  # the last NaN, where there is one
        last_nan = (xp.isnan(values) * (size + 1 - rank)).max(axis=1) - 1
        k = xp.where(last_nan >= 0, last_nan, k)
    ho, wo = windows.out_shape
    index = table[k, xp.arange(ho)[:, None], xp.arange(wo)]
    return index.reshape(n, c, ho, wo).astype(np.int64, copy=False)


def max_pool(x: Tensor, windows: Windows) -> tuple[Tensor, Tensor]:
    """``(out [N, C, Ho, Wo], indices [N, C, Ho, Wo] int64)``: each window's maximum and
    its index into the ``H * W`` plane; the gradient goes to that index."""
    indices = max_indices(x._data, windows)
    return PlaneGather.apply(x, indices, _lowest(x.dtype)), Tensor(indices)


def avg_divisor(meta: Pool2dMeta, count_include_pad: bool, divisor_override: int | None
                ) -> np.ndarray:
    """``[Ho, Wo]``: what average pooling divides each window's sum by (PyTorch's).

    ``divisor_override`` if given; else with ``count_include_pad`` the positions the window
    covers in the padded input (a ``ceil_mode`` window's overhang past the padding does not
    count), without it the input elements it covers.
    """
    if divisor_override is not None:
        return np.full((meta.out_h, meta.out_w), divisor_override)

    def axis(size: int, out: int, kernel: int, stride: int, pad: int) -> Any:
        start = np.arange(out) * stride - pad
        end = np.minimum(start + kernel, size + pad)
        if count_include_pad:
            return end - start
        return np.minimum(end, size) - np.maximum(start, 0)

    m = meta
    return (axis(m.in_h, m.out_h, m.kernel_h, m.stride_h, m.pad_h)[:, None]
            * axis(m.in_w, m.out_w, m.kernel_w, m.stride_w, m.pad_w)[None, :])


def avg_pool(x: Tensor, windows: Windows, divisor: np.ndarray) -> Tensor:
    """``[N, C, Ho, Wo]``: each window's sum (padding counts 0) over ``divisor [Ho, Wo]``."""
    xp = get_array_module(x._data)
    sums = PlaneGather.apply(x, windows.table(xp)[None, None], 0).sum(2)
    return sums / Tensor(xp.asarray(divisor, dtype=x.dtype))


class MaxUnpool2dFunction(Function):
    """The partial inverse of max pooling: ``x [N, C, h, w]`` written at plane ``indices``
    (the same shape) of zero planes ``[N, C, H, W]`` (``size = (H, W)``). Where an index
    repeats (overlapping windows chose the same input) one of its values stays: which is
    undefined, in PyTorch as here. Backward reads the gradient at the indices, for every
    value."""

    new_grads = True

    @staticmethod
    def forward(x: Any, indices: Any, size: tuple[int, int]) -> Any:
        n, c = x.shape[:2]
        out = get_array_module(x).zeros(n * c * size[0] * size[1], x.dtype)
        out[_flat(indices, (n, c), size[0] * size[1]).ravel()] = x.ravel()
        return out.reshape(n, c, *size)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        _, ctx.indices, _ = inputs

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, None, None]:
        n, c, h, w = grad_out.shape
        return grad_out.ravel()[_flat(ctx.indices, (n, c), h * w)], None, None

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Tensor, saved: tuple) -> tuple[Any, None, None]:
        """The gradient read at the indices as a :class:`~tinytrain.autograd.ops.Gather` of
        each plane, whose own gradient adds back at the indices (repeated ones too)."""
        n, c, h, w = grad_out.shape
        index = ctx.indices.reshape(n, c, -1)
        planes = Gather.apply(Reshape.apply(grad_out, (n, c, h * w)), index, 2)
        return Reshape.apply(planes, ctx.indices.shape), None, None
