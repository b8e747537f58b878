"""Convolution and pooling layers: autograd Functions, functional forms and Modules.

Chapter 3 (``notebooks/03_conv2d_cpu.ipynb``) explains the CPU kernels these call
(:mod:`tinytrain.kernels.cpu`), chapter 4 (``notebooks/04_cuda_im2col.ipynb``) the CUDA
ones (:mod:`tinytrain.kernels.cuda`); ``kernels.for_array`` picks the set of the input's
device. Each call builds its ``Conv2dMeta``/``Pool2dMeta`` once, validating the shapes
before any work, and passes it to forward and (through ``ctx``) to backward.

Shapes follow PyTorch: input ``[N, C, H, W]``, conv weight ``[Cout, Cin, Kh, Kw]``,
bias ``[Cout]``. ``kernel_size``, ``stride`` and ``padding`` take an int or an
``(h, w)`` pair. Unlike PyTorch, a 3-D (unbatched) input is not accepted, and
``dilation``/``groups``/``ceil_mode`` do not exist.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinytrain import kernels
from tinytrain.autograd import Context, Function
from tinytrain.backend import get_array_module
from tinytrain.dtypes import DTypeError
from tinytrain.functions import stack
from tinytrain.kernels.shapes import Conv2dMeta, IntOrPair, Pool2dMeta, pair
from tinytrain.nn import init
from tinytrain.nn.module import Module, Parameter, factory_tensor
from tinytrain.tensor import ShapeError, Tensor, check_same_dtype

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "Conv2d",
    "Conv2dFunction",
    "MaxPool2d",
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "conv2d",
    "max_pool2d",
]


def _shape(t: Any, name: str, what: str = "input") -> tuple[int, ...]:
    if not isinstance(t, Tensor):  # (a list or None would fail deep inside with no name)
        raise TypeError(f"{name}(): argument '{what}' must be a Tensor, not "
                        f"{type(t).__name__}")
    return tuple(t.shape)


def _unbatched(x: Any) -> bool:
    """True for an unbatched ``[C, H, W]`` input, which PyTorch's conv and pools accept
    (run as a batch of one)."""
    return isinstance(x, Tensor) and x.ndim == 3


def _checked(build: Any, *args: Any) -> Any:
    """``build(*args)`` (a shape record that validates), its ValueError raised as a
    ShapeError: PyTorch raises a RuntimeError for sizes that do not fit."""
    try:
        return build(*args)
    except ValueError as exc:
        raise ShapeError(str(exc)) from None


# --------------------------------------------------------------------------- conv2d


def _zeros_like_of(a: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Zeros of ``shape`` on ``a``'s device (NumPy or CuPy): an empty batch's results."""
    return get_array_module(a).zeros(shape, dtype=dtype)


class Conv2dFunction(Function):
    """``y = conv2d(x, w) + b``, with three separate backward ops.

    Selective save: ``w`` is kept only if ``x`` needs a gradient (dX reads ``w``),
    ``x`` only if ``w`` needs one (dW reads ``x``); db reads nothing.
    """

    new_grads = True  # the kernels allocate dx, dw and db

    @staticmethod
    def forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta) -> Any:
        if meta.batch == 0:  # nothing for a kernel to do
            return _zeros_like_of(x, meta.output_shape, np.result_type(x, w))
        return kernels.for_array(x).conv2d_forward(x, w, b, meta)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        x, w, _, ctx.meta = inputs
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.save_for_backward(x if need_w else None, w if need_x else None)

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, ...]:
        x, w = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        meta = ctx.meta
        if meta.batch == 0:  # no images: zero gradients for the weights, an empty dx
            shapes = (meta.input_shape, meta.weight_shape, (meta.out_channels,))
            return (*(_zeros_like_of(grad_out, shape, grad_out.dtype) if need else None
                      for need, shape in zip(needs, shapes)), None)
        gx, gw, gb = kernels.for_array(grad_out).conv2d_backward(grad_out, x, w, meta, needs)
        return gx, gw, gb, None


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    *,
    b: Tensor | None = None,
) -> Tensor:
    """2-D convolution (cross-correlation), as ``torch.nn.functional.conv2d``.

    ``x [N, Cin, H, W]``, ``weight [Cout, Cin, Kh, Kw]``, ``bias [Cout]`` or None
    -> ``[N, Cout, Ho, Wo]`` with ``Ho = (H + 2*ph - Kh) // sh + 1`` (same for W).
    ``b=`` is another name for ``bias`` (the design document's). ``stride`` and ``padding``
    are an int or an ``(h, w)`` pair. Raises a ValueError naming the sizes when the shapes
    do not fit together.
    """
    if b is not None:
        if bias is not None:
            raise TypeError("conv2d: give the bias once, as bias= (PyTorch's name) or b=")
        bias = b
    if isinstance(padding, str):
        pads = _padding_from_string(padding, stride, _shape(weight, "conv2d", "weight"),
                                    "conv2d", RuntimeError)
        padding = pads[2], pads[0]  # (top, left); an even kernel's extra goes right/bottom:
        if pads[1] != pads[0] or pads[3] != pads[2]:
            from tinytrain.nn.functional import pad  # (functional imports this module)

            x = pad(x, (0, pads[1] - pads[0], 0, pads[3] - pads[2]))
    if _unbatched(x):
        return conv2d(x.unsqueeze(0), weight, bias, stride, padding).squeeze(0)
    meta = _checked(Conv2dMeta, _shape(x, "conv2d"), _shape(weight, "conv2d", "weight"), stride,
                    padding, None if bias is None else _shape(bias, "conv2d", "bias"))
    check_same_dtype("conv2d", x, weight, bias)
    return Conv2dFunction.apply(x, weight, bias, meta)


_PADDING_STRINGS = ("same", "valid")
_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _padding_from_string(padding: str, stride: IntOrPair, weight_shape: tuple[int, ...],
                         name: str, error: type[Exception]) -> tuple[int, int, int, int]:
    """``"valid"`` (no padding) or ``"same"`` (the output keeps the input's size; stride 1
    only) as ``(left, right, top, bottom)``: ``k - 1`` in all, the odd one on the right and
    bottom, as PyTorch pads."""
    if padding not in _PADDING_STRINGS:
        raise error(f"{name}: Invalid padding string {padding!r}, should be one of "
                    f"{set(_PADDING_STRINGS)}")
    if padding == "valid":
        return 0, 0, 0, 0
    if pair(stride, "stride", name) != (1, 1):
        raise error("padding='same' is not supported for strided convolutions")
    (top, bottom), (left, right) = (((k - 1) // 2, k - 1 - (k - 1) // 2)
                                    for k in weight_shape[-2:])
    return left, right, top, bottom


class Conv2d(Module):
    """A convolution layer: ``weight [out, in, Kh, Kw]`` and ``bias [out]``.

    PyTorch's initialisation: ``kaiming_uniform_(weight, a=sqrt(5))``, that is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with ``fan_in = in * Kh * Kw``, and the
    bias from the same range.

    ``padding`` is an int, an ``(h, w)`` pair, ``"valid"`` (0) or ``"same"`` (stride 1: the
    output keeps the input's size; an even kernel's odd padding goes right and bottom).
    ``padding_mode`` is what the padding holds: ``"zeros"``, or the input's ``"reflect"``ion,
    its ``"replicate"``d edge or its ``"circular"`` wrap-around (these pad with ``F.pad``
    first, as PyTorch does).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair | str = 0,
        bias: bool = True,
        *,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if in_channels < 1 or out_channels < 1:
            raise ValueError(
                f"Conv2d: channels must be positive, got in_channels={in_channels}, "
                f"out_channels={out_channels}"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = pair(stride, "stride", "Conv2d")
        if min(self.kernel_size) < 1:
            raise ValueError(f"Conv2d: kernel_size must be positive, got {self.kernel_size}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode={padding_mode!r}")
        self.padding_mode = padding_mode
        if isinstance(padding, str):  # (kept as the string, as PyTorch's attribute)
            self._pads = _padding_from_string(padding, stride, self.kernel_size, "Conv2d",
                                              ValueError)
            self.padding: Any = padding
        else:
            self.padding = pair(padding, "padding", "Conv2d")
            (ph, pw) = self.padding
            self._pads = (pw, pw, ph, ph)
        self.weight = Parameter(factory_tensor(
            "Conv2d", (out_channels, in_channels, *self.kernel_size), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(factory_tensor("Conv2d", (out_channels,), device=device,
                                                 dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does (re-initialise a model)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            kh, kw = self.kernel_size
            bound = 1 / math.sqrt(self.in_channels * kh * kw)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            return conv2d(x, self.weight, self.bias, self.stride, self.padding)
        from tinytrain.nn.functional import pad  # (functional imports this module)

        return conv2d(pad(x, self._pads, self.padding_mode), self.weight, self.bias,
                      self.stride, 0)

    def extra_repr(self) -> str:
        """PyTorch's text: padding only when not zero, ``bias=False`` only without one,
        ``padding_mode`` only when not zeros."""
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if any(self.padding):  # (a string, "same" or "valid", is shown as it is)
            text += f", padding={self.padding}"
        text += ", bias=False" if self.bias is None else ""
        return text + (f", padding_mode={self.padding_mode}"
                       if self.padding_mode != "zeros" else "")


# --------------------------------------------------------------------------- pooling


class MaxPool2dFunction(Function):
    """Max pooling; backward finds each window's arg-max again from the saved input.

    A Function's forward returns only its output, so the arg-max that forward found
    is not kept. Saving ``x`` instead costs no memory in practice (it is the output
    of the ReLU before, which that ReLU keeps anyway), and the backward kernel finds the
    arg-max where it needs it (on the GPU, inside the same kernel that gathers dx).
    """

    @staticmethod
    def forward(x: Any, meta: Pool2dMeta) -> Any:
        if meta.batch == 0:
            return _zeros_like_of(x, meta.output_shape, x.dtype)
        out, _ = kernels.for_array(x).max_pool2d_forward(x, meta)
        return out

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        x, meta = inputs
        ctx.meta = meta
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, None]:
        (x,) = ctx.saved_tensors
        if ctx.meta.batch == 0:
            return _zeros_like_of(grad_out, x.shape, grad_out.dtype), None
        return kernels.for_array(grad_out).max_pool2d_backward(grad_out, x, ctx.meta), None


def max_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
) -> Tensor:
    """2-D max pooling, as ``torch.nn.functional.max_pool2d`` (``ceil_mode=False``).

    ``x [N, C, H, W] -> [N, C, Ho, Wo]``; ``stride`` defaults to ``kernel_size``.
    The gradient goes to the first maximum of each window (PyTorch's tie rule).
    """
    if _unbatched(x):
        return max_pool2d(x.unsqueeze(0), kernel_size, stride, padding).squeeze(0)
    meta = _checked(Pool2dMeta.from_shape, _shape(x, "max_pool2d"), kernel_size, stride, padding,
                    "max_pool2d")
    return MaxPool2dFunction.apply(x, meta)


class AvgPool2dFunction(Function):
    """Average pooling; backward needs only the sizes."""

    @staticmethod
    def forward(x: Any, meta: Pool2dMeta, count_include_pad: bool) -> Any:
        if meta.batch == 0:
            return _zeros_like_of(x, meta.output_shape, x.dtype)
        return kernels.for_array(x).avg_pool2d_forward(x, meta, count_include_pad)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        _, ctx.meta, ctx.count_include_pad = inputs

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, None, None]:
        meta = ctx.meta
        if meta.batch == 0:
            shape = (0, meta.channels, meta.in_h, meta.in_w)
            return _zeros_like_of(grad_out, shape, grad_out.dtype), None, None
        k = kernels.for_array(grad_out)
        return k.avg_pool2d_backward(grad_out, meta, ctx.count_include_pad), None, None


def avg_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    count_include_pad: bool = True,
) -> Tensor:
    """2-D average pooling, as ``torch.nn.functional.avg_pool2d`` (``ceil_mode=False``).

    ``x [N, C, H, W] -> [N, C, Ho, Wo]``; ``stride`` defaults to ``kernel_size``.
    """
    if _unbatched(x):
        return avg_pool2d(x.unsqueeze(0), kernel_size, stride, padding,
                          count_include_pad).squeeze(0)
    meta = _checked(Pool2dMeta.from_shape, _shape(x, "avg_pool2d"), kernel_size, stride, padding,
                    "avg_pool2d")
    if x.dtype.kind != "f":  # (an integer average would need rounding PyTorch refuses too)
        raise DTypeError(f"avg_pool2d: expected a floating point tensor, got {x.dtype}")
    return AvgPool2dFunction.apply(x, meta, count_include_pad)


class MaxPool2d(Module):
    """Module form of :func:`max_pool2d`."""

    def __init__(
        self, kernel_size: IntOrPair, stride: IntOrPair | None = None, padding: IntOrPair = 0
    ) -> None:
        super().__init__()
        # as PyTorch: no stride means the kernel's, and the attribute says so
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.dilation, self.ceil_mode = 1, False  # (what tinytrain's pooling always does)

    def forward(self, x: Tensor) -> Tensor:
        return max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Module form of :func:`avg_pool2d`."""

    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        # as PyTorch: no stride means the kernel's, and the attribute says so
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def adaptive_avg_pool2d(x: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a given output size, as ``F.adaptive_avg_pool2d``.

    ``x [N, C, H, W] -> [N, C, oh, ow]`` (``output_size`` an int, a pair, or a pair with
    None for "keep that size"). Output cell ``i`` averages rows ``floor(i H / oh)`` to
    ``ceil((i + 1) H / oh)`` (PyTorch's windows). When ``oh`` divides ``H`` and ``ow``
    divides ``W`` (``output_size=1`` included) that is :func:`avg_pool2d` with window and
    stride ``(H / oh, W / ow)``, the kernel; other sizes average each window separately.
    """
    if _unbatched(x):
        return adaptive_avg_pool2d(x.unsqueeze(0), output_size).squeeze(0)
    if len(_shape(x, "adaptive_avg_pool2d")) != 4:
        raise ShapeError(f"adaptive_avg_pool2d: expected input [N, C, H, W], got shape "
                         f"{tuple(x.shape)}")
    h, w = x.shape[2:]
    sizes = output_size if isinstance(output_size, tuple | list) else (output_size,) * 2
    if len(sizes) != 2:
        raise ShapeError(f"adaptive_avg_pool2d: output_size must be an int or 2 sizes, got "
                         f"{output_size}")
    oh, ow = (n if s is None else int(s) for s, n in zip(sizes, (h, w)))
    if oh < 1 or ow < 1:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be positive, got {output_size}")
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(x, (h // oh, w // ow))
    rows = [(i * h // oh, -(-(i + 1) * h // oh)) for i in range(oh)]
    cols = [(j * w // ow, -(-(j + 1) * w // ow)) for j in range(ow)]
    return stack([stack([x[:, :, r0:r1, c0:c1].mean((2, 3)) for c0, c1 in cols], -1)
                  for r0, r1 in rows], -2)


class AdaptiveAvgPool2d(Module):
    """Module form of :func:`adaptive_avg_pool2d` (``AdaptiveAvgPool2d(1)``: global average
    pooling to ``[N, C, 1, 1]``)."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
