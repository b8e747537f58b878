"""The shape bookkeeping of convolution and pooling, shared by every kernel set.

``Conv2dMeta`` and ``Pool2dMeta`` compute and validate every size of one call from the
operands' shapes and the ``stride``/``padding``/``kernel_size`` arguments, with errors that
name the sizes. They know nothing about devices: the CPU kernels
(:mod:`tinytrain.kernels.cpu`), the CUDA kernels (:mod:`tinytrain.kernels.cuda`) and the
layers (:mod:`tinytrain.nn.conv`) all take them from here. A layer builds the meta once per
call and hands it to the forward and the backward kernels.
"""

from __future__ import annotations

import copy
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np

__all__ = ["Conv2dMeta", "IntOrPair", "Pool2dMeta", "pair"]

IntOrPair = int | tuple[int, int]


def pair(value: Any, name: str, op: str = "conv2d") -> tuple[int, int]:
    """``3 -> (3, 3)``; ``(2, 3) -> (2, 3)``. Anything else raises a ValueError."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value), int(value)
    if (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value)
    ):
        return int(value[0]), int(value[1])
    raise ValueError(f"{op}: {name} must be an int or a pair of ints (h, w), got {value!r}")


@dataclass(frozen=True)
class Conv2dMeta:
    """Every size of one 2-D convolution, computed and validated in one place.

    Build it from the shapes of the operands::

        meta = Conv2dMeta(x.shape, w.shape, stride=1, padding=0, bias_shape=None)

    ``stride`` and ``padding`` are an int or an ``(h, w)`` pair; from here on H and W
    are always separate. Invalid shapes raise a ValueError that names the sizes:
    a 4-D NCHW input, a 4-D OIHW weight, matching channels, stride > 0,
    padding >= 0, a kernel that fits the padded input, a bias of shape ``[Cout]``.

    ``out = (in + 2 * pad - kernel) // stride + 1`` for each of H and W.
    """

    x_shape: InitVar[tuple[int, ...]]
    w_shape: InitVar[tuple[int, ...]]
    stride: InitVar[IntOrPair] = 1
    padding: InitVar[IntOrPair] = 0
    bias_shape: InitVar[tuple[int, ...] | None] = None

    batch: int = field(init=False)
    in_channels: int = field(init=False)
    out_channels: int = field(init=False)
    in_h: int = field(init=False)
    in_w: int = field(init=False)
    kernel_h: int = field(init=False)
    kernel_w: int = field(init=False)
    stride_h: int = field(init=False)
    stride_w: int = field(init=False)
    pad_h: int = field(init=False)
    pad_w: int = field(init=False)
    out_h: int = field(init=False)
    out_w: int = field(init=False)
    has_bias: bool = field(init=False)

    def __post_init__(
        self,
        x_shape: tuple[int, ...],
        w_shape: tuple[int, ...],
        stride: IntOrPair,
        padding: IntOrPair,
        bias_shape: tuple[int, ...] | None,
    ) -> None:
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        if len(x_shape) != 4:
            raise ValueError(
                f"conv2d: input must be 4-D [N, Cin, H, W] (or 3-D [Cin, H, W], one image), got "
                f"shape {x_shape} "
                f"({len(x_shape)} dims)"
            )
        if len(w_shape) != 4:
            raise ValueError(
                f"conv2d: weight must be 4-D [Cout, Cin, Kh, Kw], got shape {w_shape} "
                f"({len(w_shape)} dims)"
            )
        if min(x_shape[1:]) < 1:  # an empty batch is fine (an empty output, as PyTorch)
            raise ValueError(f"conv2d: input shape {x_shape} has an empty dimension")
        if min(w_shape) < 1:
            raise ValueError(f"conv2d: weight shape {w_shape} has an empty dimension")
        n, c_in, h, w = x_shape
        c_out, c_in_w, kh, kw = w_shape
        if c_in != c_in_w:
            raise ValueError(
                f"conv2d: input has {c_in} channels but weight expects {c_in_w} "
                f"(input shape {x_shape}, weight shape {w_shape})"
            )
        sh, sw = pair(stride, "stride")
        ph, pw = pair(padding, "padding")
        if sh < 1 or sw < 1:
            raise ValueError(f"conv2d: stride must be positive, got stride (h, w) = {(sh, sw)}")
        if ph < 0 or pw < 0:
            raise ValueError(
                f"conv2d: padding must be non-negative, got padding (h, w) = {(ph, pw)}"
            )
        if kh > h + 2 * ph or kw > w + 2 * pw:
            raise ValueError(
                f"conv2d: kernel {kh}x{kw} does not fit the padded input "
                f"{h + 2 * ph}x{w + 2 * pw} (input {h}x{w}, padding {ph}x{pw})"
            )
        if bias_shape is not None and tuple(bias_shape) != (c_out,):
            raise ValueError(
                f"conv2d: bias must have shape ({c_out},) = [Cout], got {tuple(bias_shape)} "
                f"(weight shape {w_shape})"
            )
        values = dict(
            batch=n, in_channels=c_in, out_channels=c_out, in_h=h, in_w=w,
            kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
            out_h=(h + 2 * ph - kh) // sh + 1, out_w=(w + 2 * pw - kw) // sw + 1,
            has_bias=bias_shape is not None,
        )  # fmt: skip
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @property
    def padded_h(self) -> int:
        return self.in_h + 2 * self.pad_h

    @property
    def padded_w(self) -> int:
        return self.in_w + 2 * self.pad_w

    @property
    def patches(self) -> int:
        """Output positions per image and channel: ``Ho * Wo``."""
        return self.out_h * self.out_w

    @property
    def kernel_elems(self) -> int:
        """Inputs that one output element sums over: ``Cin * Kh * Kw``."""
        return self.in_channels * self.kernel_h * self.kernel_w

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_channels, self.in_h, self.in_w)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.in_channels, self.kernel_h, self.kernel_w)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.out_h, self.out_w)

    def with_batch(self, batch: int) -> Conv2dMeta:
        """The same convolution on ``batch`` images (a shard of the batch)."""
        meta = copy.copy(self)
        object.__setattr__(meta, "batch", batch)
        return meta

    def offsets(self) -> list[tuple[int, int]]:
        """The kernel offsets ``(i, j)`` in row-major order."""
        return [(i, j) for i in range(self.kernel_h) for j in range(self.kernel_w)]


@dataclass(frozen=True)
class Pool2dMeta:
    """Every size of one 2-D pooling, validated in one place (H and W kept separate).

    ``out = (in + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1`` for each of H and W;
    with ``ceil_mode`` the division rounds up, but the last window must start inside the
    input or its left/top padding (PyTorch's rule). The pooling kernels compute the windows
    of ``dilation=1`` and floor division only (:attr:`plain`); the others take the general
    path of :mod:`tinytrain.nn.pooling`.
    """

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
    dilation_h: int = 1
    dilation_w: int = 1
    ceil_mode: bool = False

    @classmethod
    def from_shape(
        cls,
        x_shape: tuple[int, ...],
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        op: str = "max_pool2d",
        *,
        dilation: IntOrPair = 1,
        ceil_mode: bool = False,
    ) -> Pool2dMeta:
        """Validate and compute; ``stride=None`` means ``stride = kernel_size``."""
        x_shape = tuple(x_shape)
        if len(x_shape) != 4:
            raise ValueError(
                f"{op}: input must be 4-D [N, C, H, W] (or 3-D [C, H, W], one image), got shape "
                f"{x_shape} ({len(x_shape)} dims)"
            )
        if min(x_shape[1:]) < 1:  # an empty batch is fine (an empty output, as PyTorch)
            raise ValueError(f"{op}: input shape {x_shape} has an empty dimension")
        kh, kw = pair(kernel_size, "kernel_size", op)
        sh, sw = pair(kernel_size if stride is None else stride, "stride", op)
        ph, pw = pair(padding, "padding", op)
        dh, dw = pair(dilation, "dilation", op)
        if kh < 1 or kw < 1:
            raise ValueError(f"{op}: kernel_size must be positive, got (h, w) = {(kh, kw)}")
        if sh < 1 or sw < 1:
            raise ValueError(f"{op}: stride must be positive, got (h, w) = {(sh, sw)}")
        if dh < 1 or dw < 1:
            raise ValueError(f"{op}: dilation must be positive, got (h, w) = {(dh, dw)}")
        if ph < 0 or pw < 0:
            raise ValueError(f"{op}: padding must be non-negative, got (h, w) = {(ph, pw)}")
        if 2 * ph > kh or 2 * pw > kw:
            raise ValueError(
                f"{op}: padding should be at most half the kernel size, got padding {ph}x{pw} "
                f"for kernel {kh}x{kw}"
            )
        n, c, h, w = x_shape
        out_h = _pool_out(h, kh, sh, ph, dh, ceil_mode)
        out_w = _pool_out(w, kw, sw, pw, dw, ceil_mode)
        if out_h < 1 or out_w < 1:
            spans = "" if (dh, dw) == (1, 1) else (
                f" with dilation {dh}x{dw} (spanning {dh * (kh - 1) + 1}x{dw * (kw - 1) + 1})")
            raise ValueError(
                f"{op}: kernel {kh}x{kw}{spans} does not fit the padded input "
                f"{h + 2 * ph}x{w + 2 * pw} (input {h}x{w}, padding {ph}x{pw})"
            )
        for axis, size, k, s, p, d, out in (("row", h, kh, sh, ph, dh, out_h),
                                            ("column", w, kw, sw, pw, dw, out_w)):
            empty = _window_of_padding(size, out, k, s, p, d)
            if empty is not None:  # (PyTorch gives -inf there, with an index outside the
                raise ValueError(  # window, and its backward writes out of bounds)
                    f"{op}: with dilation {d} the window of output {axis} {empty} reads only "
                    f"padding (input {h}x{w}, kernel {kh}x{kw}, padding {ph}x{pw})"
                )
        return cls(n, c, h, w, kh, kw, sh, sw, ph, pw, out_h, out_w, dh, dw, bool(ceil_mode))

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.channels, self.out_h, self.out_w)

    @property
    def plain(self) -> bool:
        """True when the windows are those of ``dilation=1, ceil_mode=False``, which the
        pooling kernels compute (``ceil_mode=True`` often gives the same windows)."""
        return ((self.dilation_h, self.dilation_w) == (1, 1)
                and self.out_h == _pool_out(self.in_h, self.kernel_h, self.stride_h, self.pad_h)
                and self.out_w == _pool_out(self.in_w, self.kernel_w, self.stride_w, self.pad_w))

    def offsets(self) -> list[tuple[int, int]]:
        """The window offsets ``(i, j)`` in row-major (PyTorch's scan) order."""
        return [(i, j) for i in range(self.kernel_h) for j in range(self.kernel_w)]

    def window(self, padded: Any, i: int, j: int) -> Any:
        """The view ``[..., Ho, Wo]`` of a padded ``[..., Hp, Wp]`` array at offset (i, j)."""
        h_end = i + self.stride_h * (self.out_h - 1) + 1
        w_end = j + self.stride_w * (self.out_w - 1) + 1
        return padded[..., i : h_end : self.stride_h, j : w_end : self.stride_w]


def _pool_out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1,
              ceil: bool = False) -> int:
    """PyTorch's ``pooling_output_shape``: floor (or ceil) division, and in ceil mode no
    window that starts past the input and its left/top padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _window_of_padding(size: int, out: int, kernel: int, stride: int, pad: int,
                       dilation: int) -> int | None:
    """The first output whose window (positions ``o * stride - pad + r * dilation``) reads no
    input at all, or None. Only dilation can step a window over the input: with dilation 1,
    padding at most half the kernel and PyTorch's ceil-mode rule every window reads some."""
    if dilation == 1:
        return None
    return next((o for o in range(out)
                 if not any(0 <= o * stride - pad + r * dilation < size for r in range(kernel))),
                None)
