"""Convolution and pooling layers: autograd Functions, functional forms and Modules.

Chapter 3 (``notebooks/03_conv2d_cpu.ipynb``) explains the CPU kernels these call
(:mod:`tinytrain.kernels.cpu`), chapter 4 (``notebooks/04_cuda_im2col.ipynb``) the CUDA
ones (:mod:`tinytrain.kernels.cuda`); ``kernels.for_array`` picks the set of the input's
device. Each call builds its ``Conv2dMeta``/``Pool2dMeta`` once, validating the shapes
before any work, and passes it to forward and (through ``ctx``) to backward.

Shapes follow PyTorch: input ``[N, C, H, W]`` (or an unbatched ``[C, H, W]``), conv weight
``[Cout, Cin, Kh, Kw]``, transposed-conv weight ``[Cin, Cout, Kh, Kw]``, bias ``[Cout]``.
``kernel_size``, ``stride``, ``padding`` and ``dilation`` take an int or an ``(h, w)`` pair.
A convolution's ``groups`` and ``dilation`` are composed at the Tensor level (im2col by
``F.unfold`` and a batched matmul: ``_grouped_dilated_conv2d``), so autograd needs nothing
new; the default ``groups=1, dilation=1`` runs the kernels directly. Transposed convolutions have no
``dilation``/``groups`` (other than 1). Pooling has all of PyTorch's options: the
usual windows run the pooling kernels, the others (``ceil_mode``, ``dilation``,
``return_indices``, ``divisor_override``, adaptive max pooling, unpooling) the general path
of :mod:`tinytrain.nn.pooling`.

The 1-D layers (``conv1d``, ``max_pool1d``, ``avg_pool1d`` and their modules) check their
arguments with PyTorch's 1-D messages and run the 2-D path on ``[N, C, 1, L]``.

A transposed convolution needs no kernels of its own: it *is* the input gradient of a
convolution (the one whose input has the transposed conv's output shape), so its forward
is that convolution's ``conv2d_backward_input``, its dX that convolution's forward and its
dW that convolution's ``conv2d_backward_weight`` with the roles of x and dy swapped.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from tinytrain import kernels
from tinytrain.autograd import Context, Function
from tinytrain.autograd.ops import IndexGrad, adjoint, anchored
from tinytrain.backend import get_array_module
from tinytrain.dtypes import DTypeError, DTypeNotImplementedError, torch_scalar_name
from tinytrain.kernels.shapes import Conv2dMeta, IntOrPair, Pool2dMeta, pair
from tinytrain.nn import init, pooling
from tinytrain.nn.fold import unfold
from tinytrain.nn.module import Module, Parameter, factory_tensor
from tinytrain.tensor import IndexRangeError, InvalidArgument, ShapeError, Tensor, check_same_dtype

__all__ = [
    "AdaptiveAvgPool2d",
    "AdaptiveMaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "Conv1d",
    "Conv2d",
    "Conv2dFunction",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose2dFunction",
    "MaxPool1d",
    "MaxPool2d",
    "MaxUnpool2d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_unpool2d",
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


def _checked(build: Any, *args: Any, **kwargs: Any) -> Any:
    """``build(*args, **kwargs)`` (a shape record that validates), its ValueError raised as a
    ShapeError: PyTorch raises a RuntimeError for sizes that do not fit."""
    try:
        return build(*args, **kwargs)
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

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Tensor, saved: tuple) -> tuple[Any, ...]:
        """The backward as ops that are differentiable again (``create_graph``): dX is the
        transposed convolution of dY, dW a :class:`Conv2dWeightGrad`, db a sum. dX and dW
        are in X's and W's graph (:func:`~tinytrain.autograd.ops.anchored`), as PyTorch's,
        whose convolution backward reads both."""
        x, w = saved
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        meta = ctx.meta
        return (_conv_anchored(ConvTranspose2dFunction.apply(grad_out, w, None, meta), saved,
                               0, meta.input_shape) if need_x else None,
                _conv_anchored(Conv2dWeightGrad.apply(grad_out, x, meta), saved, 1,
                               meta.weight_shape) if need_w else None,
                grad_out.sum((0, 2, 3)) if need_b else None, None)


def _conv_anchored(grad: Tensor, saved: Any, i: int, shape: tuple[int, ...]) -> Tensor:
    """A convolution's gradient of input ``i`` (0: X, 1: W) in that input's graph too, as
    PyTorch's: its convolution backward reads both (a later backward gives it no gradient,
    as its double backward gives an undefined one)."""
    return anchored(grad, saved.input(i, shape, grad), zeros=False)


class Conv2dWeightGrad(Function):
    """A convolution's weight gradient ``dW = conv2d_backward_weight(dY, X)`` as an op of
    its own: what ``Conv2dFunction`` and ``ConvTranspose2dFunction`` return for dW in a
    ``create_graph`` pass, so that dW can be differentiated again (WGAN-GP's penalty on a
    convolutional critic). ``dW`` is linear in each input: its gradient ``H`` (``dW``'s
    shape) goes to dY as ``conv2d(X, H)`` and to X as ``conv_transpose2d(dY, H)``.
    """

    new_grads = True

    @staticmethod
    def forward(grad_out: Any, x: Any, meta: Conv2dMeta) -> Any:
        if meta.batch == 0:
            return _zeros_like_of(x, meta.weight_shape, np.result_type(grad_out, x))
        return kernels.for_array(x).conv2d_backward_weight(grad_out, x, meta)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        grad_out, x, ctx.meta = inputs
        ctx.save_for_backward(x if ctx.needs_input_grad[0] else None,
                              grad_out if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward(ctx: Context, h: Any) -> tuple[Any, ...]:
        x, grad_out = ctx.saved_tensors
        k, meta = kernels.for_array(h), ctx.meta
        return (k.conv2d_forward(x, h, None, meta) if ctx.needs_input_grad[0] else None,
                k.conv2d_backward_input(grad_out, h, meta) if ctx.needs_input_grad[1] else None,
                None)

    @staticmethod
    def backward_graph(ctx: Context, h: Tensor, saved: tuple) -> tuple[Any, ...]:
        x, grad_out = saved
        meta = ctx.meta
        return (Conv2dFunction.apply(x, h, None, meta) if ctx.needs_input_grad[0] else None,
                ConvTranspose2dFunction.apply(grad_out, h, None, meta)
                if ctx.needs_input_grad[1] else None, None)


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair | str = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
    *,
    b: Tensor | None = None,
) -> Tensor:
    """2-D convolution (cross-correlation), as ``torch.nn.functional.conv2d``.

    ``x [N, Cin, H, W]``, ``weight [Cout, Cin / groups, Kh, Kw]``, ``bias [Cout]`` or None
    -> ``[N, Cout, Ho, Wo]`` with ``Ho = (H + 2*ph - dh*(Kh - 1) - 1) // sh + 1`` (same for
    W). ``b=`` is another name for ``bias`` (the design document's). ``stride``, ``padding``
    and ``dilation`` are an int or an ``(h, w)`` pair; ``padding`` may also be ``"valid"``
    (0) or ``"same"`` (stride 1: the output keeps the input's size). ``groups`` splits the
    channels into that many independent convolutions (``groups = Cin`` is a depthwise
    convolution). Raises a ShapeError (a RuntimeError) naming the sizes when the shapes do not
    fit together.
    """
    if b is not None:
        if bias is not None:
            raise TypeError("conv2d: give the bias once, as bias= (PyTorch's name) or b=")
        bias = b
    if isinstance(padding, str):
        pads = _padding_from_string(padding, stride, _shape(weight, "conv2d", "weight"),
                                    "conv2d", RuntimeError, dilation)
        padding = pads[2], pads[0]  # (top, left); an even kernel's extra goes right/bottom:
        if pads[1] != pads[0] or pads[3] != pads[2]:
            from tinytrain.nn.functional import pad  # (functional imports this module)

            x = pad(x, (0, pads[1] - pads[0], 0, pads[3] - pads[2]))
    if dilation != 1 or groups != 1:  # (compositions of the plain convolution below)
        return _grouped_dilated_conv2d(x, weight, bias, stride, padding, dilation, groups)
    if _unbatched(x):
        return conv2d(x.unsqueeze(0), weight, bias, stride, padding).squeeze(0)
    meta = _checked(Conv2dMeta, _shape(x, "conv2d"), _shape(weight, "conv2d", "weight"), stride,
                    padding, None if bias is None else _shape(bias, "conv2d", "bias"))
    check_same_dtype("conv2d", x, weight, bias)
    return Conv2dFunction.apply(x, weight, bias, meta)


def _dilation_pair(dilation: Any, name: str, error: type[Exception]) -> tuple[int, int]:
    """``dilation`` as ``(dh, dw)``, each at least 1 (PyTorch's message otherwise)."""
    try:
        dh, dw = pair(dilation, "dilation", name)
    except ValueError as exc:
        raise error(str(exc)) from None
    if dh < 1 or dw < 1:
        raise error(f"dilation should be greater than zero, but got {[dh, dw]}")
    return dh, dw


def _grouped_dilated_conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, stride: IntOrPair,
                            padding: IntOrPair, dilation: IntOrPair, groups: int) -> Tensor:
    """``conv2d`` with ``dilation`` and ``groups``: im2col and a matrix product, in Tensor ops.

    ``F.unfold`` gathers every window of the input (its taps ``dilation`` apart) into a
    column: ``cols [N, Cin*Kh*Kw, Ho*Wo]``. With ``G`` groups of ``Cg = Cin / G`` input and
    ``Og = Cout / G`` output channels, the rows of group ``g`` are ``cols[:, g]`` once
    reshaped to ``[N, G, Cg*Kh*Kw, Ho*Wo]``, and its outputs are its weights ``[Og,
    Cg*Kh*Kw]`` times them: one batched matmul ``[G, Og, K] @ [N, G, K, L]`` for all groups
    (a depthwise convolution is ``Og = Cg = 1``). Chapter 4's im2col + GEMM, with autograd
    (unfold's and matmul's backward) giving the gradients; no zeros are multiplied.
    """
    if not isinstance(groups, int | np.integer) or isinstance(groups, bool):
        raise TypeError(f"conv2d(): argument 'groups' must be int, not {type(groups).__name__}")
    if groups < 1:
        raise ShapeError("non-positive groups is not supported")
    dh, dw = _dilation_pair(dilation, "conv2d", ShapeError)
    if _unbatched(x):
        return _grouped_dilated_conv2d(x.unsqueeze(0), weight, bias, stride, padding,
                                       (dh, dw), groups).squeeze(0)
    x_shape, w_shape = _shape(x, "conv2d"), _shape(weight, "conv2d", "weight")
    if len(w_shape) == 4 and len(x_shape) == 4:
        if w_shape[0] % groups:
            raise ShapeError(f"Given groups={groups}, expected weight to be divisible by "
                             f"{groups} at dimension 0, but got weight of size {list(w_shape)} "
                             f"instead")
        if x_shape[1] != w_shape[1] * groups:
            raise ShapeError(f"Given groups={groups}, weight of size {list(w_shape)}, expected "
                             f"input{list(x_shape)} to have {w_shape[1] * groups} channels, but "
                             f"got {x_shape[1]} channels instead")
        kh, kw = w_shape[2:]  # (validated as the plain convolution of the dilated kernel:)
        w_shape = (w_shape[0], x_shape[1], dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    meta = _checked(Conv2dMeta, x_shape, w_shape, stride, padding,
                    None if bias is None else _shape(bias, "conv2d", "bias"))
    check_same_dtype("conv2d", x, weight, bias)
    out_c, in_g, kh, kw = weight.shape
    cols = unfold(x, (kh, kw), (dh, dw), (meta.pad_h, meta.pad_w),
                  (meta.stride_h, meta.stride_w))
    k = in_g * kh * kw
    y = (weight.reshape(groups, out_c // groups, k)
         @ cols.reshape(meta.batch, groups, k, meta.patches)).reshape(meta.output_shape)
    return y if bias is None else y + bias.reshape(1, out_c, 1, 1)


_PADDING_STRINGS = ("same", "valid")
_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _padding_from_string(padding: str, stride: IntOrPair, weight_shape: tuple[int, ...],
                         name: str, error: type[Exception], dilation: IntOrPair = 1
                         ) -> tuple[int, int, int, int]:
    """``"valid"`` (no padding) or ``"same"`` (the output keeps the input's size; stride 1
    only) as ``(left, right, top, bottom)``: ``dilation * (k - 1)`` in all, the odd one on
    the right and bottom, as PyTorch pads."""
    if padding not in _PADDING_STRINGS:
        raise error(f"{name}: Invalid padding string {padding!r}, should be one of "
                    f"{set(_PADDING_STRINGS)}")
    if padding == "valid":
        return 0, 0, 0, 0
    if pair(stride, "stride", name) != (1, 1):
        raise error("padding='same' is not supported for strided convolutions")
    (top, bottom), (left, right) = ((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                                    for k, d in zip(weight_shape[-2:],
                                                    _dilation_pair(dilation, name, error)))
    return left, right, top, bottom


def _draw_conv_parameters(layer: Module) -> None:
    """PyTorch's initialisation of a (transposed) convolution: ``kaiming_uniform_(weight,
    a=sqrt(5))`` and the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the weight's fan_in
    (``Cin * Kh * Kw`` for a convolution, ``Cout * Kh * Kw`` for a transposed one, whose
    weight is ``[Cin, Cout, Kh, Kw]``)."""
    init.kaiming_uniform_(layer.weight, a=math.sqrt(5))
    if layer.bias is not None:
        fan_in, _ = init.calculate_fan_in_and_fan_out(layer.weight)
        bound = 1 / math.sqrt(fan_in)
        init.uniform_(layer.bias, -bound, bound)


def _make_conv_parameters(layer: Module, name: str, weight_shape: tuple[int, ...],
                          out_channels: int, bias: bool, device: Any, dtype: Any) -> None:
    """A (transposed) convolution's ``weight`` of ``weight_shape`` and ``bias``
    ``[out_channels]`` (or the bias registered as None), then drawn by the layer's
    ``reset_parameters``."""
    layer.weight = Parameter(factory_tensor(name, weight_shape, device=device, dtype=dtype))
    if bias:
        layer.bias = Parameter(factory_tensor(name, (out_channels,), device=device,
                                              dtype=dtype))
    else:
        layer.register_parameter("bias", None)
    layer.reset_parameters()


class Conv2d(Module):
    """A convolution layer: ``weight [out, in / groups, Kh, Kw]`` and ``bias [out]``.

    PyTorch's initialisation: ``kaiming_uniform_(weight, a=sqrt(5))``, that is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with ``fan_in = in / groups * Kh * Kw``, and the
    bias from the same range.

    ``padding`` is an int, an ``(h, w)`` pair, ``"valid"`` (0) or ``"same"`` (stride 1: the
    output keeps the input's size; an even kernel's odd padding goes right and bottom).
    ``dilation`` spaces the kernel's taps (an int or an ``(h, w)`` pair); ``groups`` splits
    the channels into independent convolutions (``groups = in = out`` is depthwise); see
    ``conv2d`` for how both are computed.
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
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
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
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = pair(stride, "stride", "Conv2d")
        self.dilation = _dilation_pair(dilation, "Conv2d", ValueError)
        if min(self.kernel_size) < 1:
            raise ValueError(f"Conv2d: kernel_size must be positive, got {self.kernel_size}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode={padding_mode!r}")
        self.padding_mode = padding_mode
        if isinstance(padding, str):  # (kept as the string, as PyTorch's attribute)
            self._pads = _padding_from_string(padding, stride, self.kernel_size, "Conv2d",
                                              ValueError, self.dilation)
            self.padding: Any = padding
        else:
            self.padding = pair(padding, "padding", "Conv2d")
            (ph, pw) = self.padding
            self._pads = (pw, pw, ph, ph)
        _make_conv_parameters(self, "Conv2d",
                              (out_channels, in_channels // groups, *self.kernel_size),
                              out_channels, bias, device, dtype)

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does (re-initialise a model)."""
        _draw_conv_parameters(self)

    def forward(self, x: Tensor) -> Tensor:
        # (the defaults passed as 1, so that a default layer takes conv2d's plain path)
        dilation = 1 if self.dilation == (1, 1) else self.dilation
        if self.padding_mode == "zeros":
            return conv2d(x, self.weight, self.bias, self.stride, self.padding, dilation,
                          self.groups)
        from tinytrain.nn.functional import pad  # (functional imports this module)

        return conv2d(pad(x, self._pads, self.padding_mode), self.weight, self.bias,
                      self.stride, 0, dilation, self.groups)

    def extra_repr(self) -> str:
        """PyTorch's text: padding only when not zero, dilation only when not 1, groups only
        when not 1, ``bias=False`` only without one, ``padding_mode`` only when not zeros."""
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if any(self.padding):  # (a string, "same" or "valid", is shown as it is)
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        text += ", bias=False" if self.bias is None else ""
        return text + (f", padding_mode={self.padding_mode}"
                       if self.padding_mode != "zeros" else "")


# --------------------------------------------------------------------------- conv_transpose2d


class ConvTranspose2dFunction(Function):
    """``y = conv_transpose2d(x, w) + b``: the input gradient of a convolution, run forward.

    ``meta`` describes that convolution: its input is ``y`` ``[N, Cout, Ho, Wo]``, its weight
    ``w`` ``[Cin, Cout, Kh, Kw]`` (its ``out_channels`` are our ``Cin``) and its output has
    our input's shape ``[N, Cin, H, W]``. So forward is its ``conv2d_backward_input``; our
    ``dx`` is its forward on ``dy``, our ``dw`` its ``conv2d_backward_weight`` with ``x`` in
    the place of the output gradient and ``dy`` in the place of the input, and ``db`` sums
    ``dy`` per channel. ``output_padding`` rows and columns are input rows of the
    convolution that no window reaches: the kernels give them zeros (forward) and read
    none of them (dX, dW). Selective save as :class:`Conv2dFunction`.
    """

    new_grads = True

    @staticmethod
    def forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta) -> Any:
        if meta.batch == 0:
            return _zeros_like_of(x, meta.input_shape, np.result_type(x, w))
        y = kernels.for_array(x).conv2d_backward_input(x, w, meta)
        if b is not None:
            y += b.reshape(-1, 1, 1)
        return y

    setup_context = staticmethod(Conv2dFunction.setup_context)  # (the same selective save)

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, ...]:
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        meta = ctx.meta
        if meta.batch == 0:
            shapes = (meta.output_shape, meta.weight_shape, (meta.in_channels,))
            return (*(_zeros_like_of(grad_out, shape, grad_out.dtype) if need else None
                      for need, shape in zip((need_x, need_w, need_b), shapes)), None)
        k = kernels.for_array(grad_out)
        return (k.conv2d_forward(grad_out, w, None, meta) if need_x else None,
                k.conv2d_backward_weight(x, grad_out, meta) if need_w else None,
                k.conv2d_backward_bias(grad_out) if need_b else None, None)

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Tensor, saved: tuple) -> tuple[Any, ...]:
        """As :meth:`Conv2dFunction.backward_graph`, the roles swapped as in ``backward``."""
        x, w = saved
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        meta = ctx.meta
        return (_conv_anchored(Conv2dFunction.apply(grad_out, w, None, meta), saved, 0,
                               meta.output_shape) if need_x else None,
                _conv_anchored(Conv2dWeightGrad.apply(x, grad_out, meta), saved, 1,
                               meta.weight_shape) if need_w else None,
                grad_out.sum((0, 2, 3)) if need_b else None, None)


def _transposed_meta(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                     b_shape: tuple[int, ...] | None, stride: IntOrPair, padding: IntOrPair,
                     output_padding: IntOrPair) -> Conv2dMeta:
    """The :class:`Conv2dMeta` of the convolution a ``conv_transpose2d`` is the input gradient
    of, after checking the transposed conv's own shapes (with PyTorch's messages, which name
    the transposed shapes, not the convolution's)."""
    name = "conv_transpose2d"
    if len(x_shape) != 4:
        raise ShapeError(f"{name}: input must be 4-D [N, Cin, H, W] (or 3-D [Cin, H, W], one "
                         f"image), got shape {x_shape} ({len(x_shape)} dims)")
    if len(w_shape) != 4:
        raise ShapeError(f"{name}: weight must be 4-D [Cin, Cout, Kh, Kw], got shape "
                         f"{w_shape} ({len(w_shape)} dims)")
    if min(x_shape[1:]) < 1 or min(w_shape) < 1:
        raise ShapeError(f"{name}: input {x_shape} or weight {w_shape} has an empty dimension")
    (n, c_in, h, w), (c_in_w, c_out, kh, kw) = x_shape, w_shape
    if c_in != c_in_w:
        raise ShapeError(f"Given transposed=1, weight of size {list(w_shape)}, expected "
                         f"input{list(x_shape)} to have {c_in_w} channels, but got {c_in} "
                         f"channels instead")
    if b_shape is not None and tuple(b_shape) != (c_out,):
        raise ShapeError(f"Given transposed=1, weight of size {list(w_shape)}, expected bias "
                         f"to be 1-dimensional with {c_out} elements, but got bias of size "
                         f"{list(b_shape)} instead")
    (sh, sw), (ph, pw) = pair(stride, "stride", name), pair(padding, "padding", name)
    oph, opw = pair(output_padding, "output_padding", name)
    if sh < 1 or sw < 1:
        raise ValueError(f"{name}: stride must be positive, got (h, w) = {(sh, sw)}")
    if min(ph, pw, oph, opw) < 0:
        raise ValueError(f"{name}: padding and output_padding must be non-negative, got "
                         f"padding {(ph, pw)}, output_padding {(oph, opw)}")
    if oph >= sh or opw >= sw:
        raise ShapeError(f"output padding must be smaller than either stride or dilation, but "
                         f"got output_padding_height: {oph} output_padding_width: {opw} "
                         f"stride_height: {sh} stride_width: {sw} dilation_height: 1 "
                         f"dilation_width: 1")
    out_h, out_w = (h - 1) * sh - 2 * ph + kh + oph, (w - 1) * sw - 2 * pw + kw + opw
    if out_h < 1 or out_w < 1:
        raise ShapeError(f"Given input size per channel: ({h} x {w}). Calculated output size "
                         f"per channel: ({out_h} x {out_w}). Output size is too small")
    return Conv2dMeta((n, c_out, out_h, out_w), (c_in, c_out, kh, kw), (sh, sw), (ph, pw))


def conv_transpose2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    output_padding: IntOrPair = 0,
    groups: int = 1,
    dilation: IntOrPair = 1,
) -> Tensor:
    """2-D transposed convolution, as ``torch.nn.functional.conv_transpose2d``: the gradient
    of :func:`conv2d` with respect to its input, as a layer (each input pixel spreads
    ``weight`` over a ``Kh x Kw`` patch of the output, ``stride`` apart).

    ``input [N, Cin, H, W]`` (or ``[Cin, H, W]``), ``weight [Cin, Cout, Kh, Kw]``, ``bias
    [Cout]`` or None -> ``[N, Cout, Ho, Wo]`` with ``Ho = (H - 1) * sh - 2 * ph + Kh + oph``
    (same for W); ``output_padding`` (smaller than the stride) adds rows and columns at the
    bottom and right that only the bias reaches. ``groups`` and ``dilation`` other than 1
    raise a NotImplementedError.
    """
    if groups != 1:
        raise NotImplementedError(f"conv_transpose2d: groups={groups} is not supported by "
                                  f"tinytrain (groups=1 only)")
    if pair(dilation, "dilation", "conv_transpose2d") != (1, 1):
        raise NotImplementedError(f"conv_transpose2d: dilation={dilation} is not supported "
                                  f"by tinytrain (dilation=1 only)")
    if _unbatched(input):
        return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding).squeeze(0)
    meta = _transposed_meta(_shape(input, "conv_transpose2d"),
                            _shape(weight, "conv_transpose2d", "weight"),
                            None if bias is None else _shape(bias, "conv_transpose2d", "bias"),
                            stride, padding, output_padding)
    check_same_dtype("conv_transpose2d", input, weight, bias)
    return ConvTranspose2dFunction.apply(input, weight, bias, meta)


class ConvTranspose2d(Module):
    """A transposed convolution layer (a learned upsampling): ``weight [in, out, Kh, Kw]``
    (PyTorch's layout: the transpose of the convolution it undoes) and ``bias [out]``.

    PyTorch's initialisation, whose fan is computed from the weight's shape as for any
    layer: ``fan_in = weight.shape[1] * Kh * Kw = out_channels * Kh * Kw`` (not
    ``in_channels``), ``kaiming_uniform_(weight, a=sqrt(5))`` and the bias from
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    ``forward(x, output_size=None)``: ``output_size`` (``(Ho, Wo)``, or with ``N, C`` in
    front) picks the ``output_padding`` that gives that size, as in PyTorch, where several
    sizes round to the same input size under a stride. ``groups``, ``dilation`` and
    ``padding_mode`` other than 1, 1 and ``"zeros"`` raise (PyTorch's transposed convs
    accept only ``"zeros"`` too).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        output_padding: IntOrPair = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: IntOrPair = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = "ConvTranspose2d"
        if in_channels < 1 or out_channels < 1:
            raise ValueError(f"{name}: channels must be positive, got in_channels="
                             f"{in_channels}, out_channels={out_channels}")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}, got '
                             f"padding_mode={padding_mode!r}")
        if groups != 1:
            raise NotImplementedError(f"{name}: groups={groups} is not supported by tinytrain "
                                      f"(groups=1 only)")
        if pair(dilation, "dilation", name) != (1, 1):
            raise NotImplementedError(f"{name}: dilation={dilation} is not supported by "
                                      f"tinytrain (dilation=1 only)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = pair(kernel_size, "kernel_size", name)
        self.stride = pair(stride, "stride", name)
        self.padding = pair(padding, "padding", name)
        self.output_padding = pair(output_padding, "output_padding", name)
        if min(self.kernel_size) < 1:
            raise ValueError(f"{name}: kernel_size must be positive, got {self.kernel_size}")
        if any(op >= s for op, s in zip(self.output_padding, self.stride)):
            raise ValueError(f"{name}: output_padding {self.output_padding} must be smaller "
                             f"than the stride {self.stride}")
        self.groups, self.dilation, self.padding_mode = 1, (1, 1), padding_mode
        _make_conv_parameters(self, name, (in_channels, out_channels, *self.kernel_size),
                              out_channels, bias, device, dtype)

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does (re-initialise a model)."""
        _draw_conv_parameters(self)

    def _output_padding(self, x: Tensor, output_size: Any) -> tuple[int, int]:
        """The ``output_padding`` that makes the output ``output_size`` (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        try:
            size = [operator.index(s) for s in output_size]  # (8.5 refused, not truncated)
        except TypeError:
            raise TypeError(f"ConvTranspose2d: output_size must be integers, got "
                            f"{list(output_size)}") from None
        spatial = 2 if x.ndim == 4 else 1
        if len(size) == spatial + 2:
            size = size[spatial:]
        if len(size) != 2:
            raise ValueError(f"ConvTranspose2D: for {x.ndim}D input, output_size must have 2 "
                             f"or {spatial + 2} elements (got {len(size)})")
        in_hw = tuple(x.shape[-2:])
        low = [(n - 1) * s - 2 * p + k for n, s, p, k in
               zip(in_hw, self.stride, self.padding, self.kernel_size)]
        high = [m + s - 1 for m, s in zip(low, self.stride)]
        if any(not lo <= n <= hi for n, lo, hi in zip(size, low, high)):
            raise ValueError(f"requested an output size of {list(output_size)}, but valid sizes "
                             f"range from {low} to {high} (for an input of {list(in_hw)})")
        return size[0] - low[0], size[1] - low[1]

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        _shape(x, "ConvTranspose2d")
        return conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(x, output_size))

    def extra_repr(self) -> str:
        """PyTorch's text: padding and output_padding only when not zero."""
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if any(self.padding):
            text += f", padding={self.padding}"
        if any(self.output_padding):
            text += f", output_padding={self.output_padding}"
        return text + (", bias=False" if self.bias is None else "")


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

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Tensor, saved: tuple) -> tuple[Any, None]:
        """Each window's gradient added at its arg-max (found again by the forward kernel),
        as an :class:`~tinytrain.autograd.ops.IndexGrad`, whose gradient gathers there again;
        the arg-max is piecewise constant in ``x`` (no gradient through it)."""
        (x,) = saved
        meta = ctx.meta
        if meta.batch == 0:
            return Tensor(_zeros_like_of(x._data, x.shape, grad_out.dtype)), None
        xp = get_array_module(x._data)
        _, argmax = kernels.for_array(x._data).max_pool2d_forward(x._data, meta)
        k = argmax.astype(np.int64)
        rows = xp.arange(meta.out_h).reshape(-1, 1) * meta.stride_h - meta.pad_h
        cols = xp.arange(meta.out_w) * meta.stride_w - meta.pad_w
        index = (xp.arange(meta.batch).reshape(-1, 1, 1, 1),
                 xp.arange(meta.channels).reshape(1, -1, 1, 1),
                 rows + k // meta.kernel_w, cols + k % meta.kernel_w)
        return IndexGrad.apply(grad_out, x.shape, index, x), None


def _squeezed(result: Any) -> Any:
    """An unbatched call's result: the batch of one taken off (each of ``(out, indices)``)."""
    return tuple(t.squeeze(0) for t in result) if isinstance(result, tuple) else result.squeeze(0)


def max_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """2-D max pooling, as ``torch.nn.functional.max_pool2d``.

    ``x [N, C, H, W] -> [N, C, Ho, Wo]`` (or ``[C, H, W] -> [C, Ho, Wo]``), ``Ho = (H + 2 *
    padding - dilation * (kernel - 1) - 1) // stride + 1``, rounded up with ``ceil_mode``
    (a last window that would start past the input and its top padding is dropped);
    ``stride`` defaults to ``kernel_size``. The gradient goes to the first maximum of each
    window (PyTorch's tie rule; a NaN wins). ``return_indices=True`` returns ``(out,
    indices)``, ``indices`` int64 into each ``H * W`` plane (what :func:`max_unpool2d`
    takes). The default windows run the pooling kernels; dilated, ceil-mode and indexed
    pooling take the general path of :mod:`tinytrain.nn.pooling`.
    """
    if _unbatched(x):
        return _squeezed(max_pool2d(x.unsqueeze(0), kernel_size, stride, padding, dilation,
                                    ceil_mode, return_indices))
    meta = _checked(Pool2dMeta.from_shape, _shape(x, "max_pool2d"), kernel_size, stride, padding,
                    "max_pool2d", dilation=dilation, ceil_mode=ceil_mode)
    if meta.plain and not return_indices:
        return MaxPool2dFunction.apply(x, meta)
    out, indices = pooling.max_pool(x, pooling.Windows.of_pool(meta))
    return (out, indices) if return_indices else out


def max_pool2d_with_indices(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = True,
) -> tuple[Tensor, Tensor]:
    """:func:`max_pool2d` that returns ``(out, indices)`` whatever ``return_indices`` says
    (PyTorch's ``F.max_pool2d_with_indices``)."""
    return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, True)


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

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Tensor, saved: Any) -> tuple[Any, None, None]:
        """Linear: the gradient's own gradient is the pooling (its adjoint,
        :func:`~tinytrain.autograd.ops.adjoint`); in X's graph, as PyTorch's (whose
        backward reads X)."""
        meta = ctx.meta
        grad = adjoint(AvgPool2dFunction, ctx, grad_out, 0, (None, meta, ctx.count_include_pad))
        shape = (meta.batch, meta.channels, meta.in_h, meta.in_w)
        return anchored(grad, saved.input(0, shape, grad_out)), None, None


def avg_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """2-D average pooling, as ``torch.nn.functional.avg_pool2d`` (its argument order).

    ``x [N, C, H, W] -> [N, C, Ho, Wo]`` (or ``[C, H, W] -> [C, Ho, Wo]``), ``Ho = (H + 2 *
    padding - kernel) // stride + 1``, rounded up with ``ceil_mode`` (as
    :func:`max_pool2d`); ``stride`` defaults to ``kernel_size``. Each window's sum (padding
    adds 0) is divided by ``divisor_override`` if given, else by the positions the window
    covers in the padded input (``count_include_pad=True``; a ceil-mode window's overhang
    past the padding does not count) or the input elements it covers (False). The default
    windows and divisors run the pooling kernels; the others take the general path of
    :mod:`tinytrain.nn.pooling`.
    """
    if divisor_override is not None:
        if not isinstance(divisor_override, int | np.integer) or isinstance(divisor_override,
                                                                            bool):
            raise TypeError(f"avg_pool2d(): argument 'divisor_override' must be int, not "
                            f"{type(divisor_override).__name__}")
        if divisor_override == 0:
            raise InvalidArgument("avg_pool2d: divisor_override must not be zero")
    if _unbatched(x):
        return avg_pool2d(x.unsqueeze(0), kernel_size, stride, padding, ceil_mode,
                          count_include_pad, divisor_override).squeeze(0)
    meta = _checked(Pool2dMeta.from_shape, _shape(x, "avg_pool2d"), kernel_size, stride, padding,
                    "avg_pool2d", ceil_mode=ceil_mode)
    if x.dtype == np.int64:  # PyTorch averages int64 (only) in integers, truncated toward 0
        return avg_pool2d(x.to(dtype=np.float64), kernel_size, stride, padding, ceil_mode,
                          count_include_pad, divisor_override).trunc().to(dtype=np.int64)
    if x.dtype.kind != "f":
        raise DTypeNotImplementedError(f'"avg_pool2d" not implemented for '
                                       f'\'{torch_scalar_name(x.dtype)}\'')
    if meta.plain and divisor_override is None:
        return AvgPool2dFunction.apply(x, meta, count_include_pad)
    return pooling.avg_pool(x, pooling.Windows.of_pool(meta),
                            pooling.avg_divisor(meta, count_include_pad, divisor_override))


class MaxPool2d(Module):
    """Module form of :func:`max_pool2d` (``return_indices=True``: it returns ``(out,
    indices)``)."""

    def __init__(
        self, kernel_size: IntOrPair, stride: IntOrPair | None = None, padding: IntOrPair = 0,
        dilation: IntOrPair = 1, return_indices: bool = False, ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        # as PyTorch: no stride means the kernel's, and the attribute says so
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.dilation, self.ceil_mode = dilation, ceil_mode
        self.return_indices = return_indices

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

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
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.ceil_mode, self.divisor_override = ceil_mode, divisor_override
        # as PyTorch: no stride means the kernel's, and the attribute says so
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# --------------------------------------------------------------------------- 1-D: conv, pools
#
# A 1-D convolution or pooling over ``[N, C, L]`` is the 2-D one over ``[N, C, 1, L]`` with a
# ``1 x K`` kernel: the functions below check their arguments with PyTorch's 1-D messages,
# then run the 2-D path (its kernels and its autograd) and take the height of 1 off again.


def _single(value: Any, name: str, op: str) -> int:
    """``3`` or ``(3,)`` as ``3``; PyTorch's message for anything else."""
    if isinstance(value, tuple | list) and len(value) == 1:
        value = value[0]
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    shown = list(value) if isinstance(value, tuple | list) else value
    raise ShapeError(f"{op}: expected {name} to be a single integer value or a list of 1 values "
                     f"to match the convolution dimensions, but got {name}={shown}")


def conv1d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | tuple[int] = 1,
    padding: int | tuple[int] | str = 0,
    dilation: int | tuple[int] = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution (cross-correlation), as ``torch.nn.functional.conv1d``.

    ``input [N, Cin, L]`` (or unbatched ``[Cin, L]``), ``weight [Cout, Cin / groups, K]``,
    ``bias [Cout]`` -> ``[N, Cout, Lo]``, ``Lo = (L + 2 p - d (K - 1) - 1) // s + 1``.
    ``padding`` may be ``"valid"`` or ``"same"`` (stride 1). Runs :func:`conv2d` on
    ``[N, Cin, 1, L]`` with a ``1 x K`` kernel.
    """
    x_shape, w_shape = _shape(input, "conv1d"), _shape(weight, "conv1d", "weight")
    if len(x_shape) not in (2, 3):
        raise ShapeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got "
                         f"input of size: {list(x_shape)}")
    if len(w_shape) != 3:
        raise ShapeError(f"conv1d: expected weight [Cout, Cin / groups, K] (3-dimensional), "
                         f"got weight of size {list(w_shape)}")
    s = _single(stride, "stride", "conv1d")
    d = _single(dilation, "dilation", "conv1d")
    p = padding if isinstance(padding, str) else _single(padding, "padding", "conv1d")
    if s < 1:
        raise ShapeError("non-positive stride is not supported")
    if d < 1:
        raise ShapeError("dilation should be greater than zero")
    if not isinstance(p, str) and p < 0:
        raise ShapeError("negative padding is not supported")
    if isinstance(groups, int) and not isinstance(groups, bool) and groups >= 1:
        c = x_shape[-2]
        if w_shape[0] % groups:
            raise ShapeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                             f"at dimension 0, but got weight of size {list(w_shape)} instead")
        if c != w_shape[1] * groups:
            raise ShapeError(f"Given groups={groups}, weight of size {list(w_shape)}, expected "
                             f"input{list(x_shape)} to have {w_shape[1] * groups} channels, but "
                             f"got {c} channels instead")
    if bias is not None and tuple(_shape(bias, "conv1d", "bias")) != (w_shape[0],):
        raise ShapeError(f"Given weight of size {list(w_shape)}, expected bias to be "
                         f"1-dimensional with {w_shape[0]} elements, but got bias of size "
                         f"{list(bias.shape)} instead")
    span = d * (w_shape[2] - 1) + 1
    if not isinstance(p, str) and x_shape[-1] + 2 * p < span:
        raise ShapeError(f"Calculated padded input size per channel: ({x_shape[-1] + 2 * p}). "
                         f"Kernel size: ({span}). Kernel size can't be greater than actual "
                         f"input size")
    check_same_dtype("conv1d", input, weight, bias)
    y = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, s),
               p if isinstance(p, str) else (0, p), 1 if d == 1 else (1, d), groups)
    return y.squeeze(-2)


def _pool1d_args(name: str, x: Any, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any) -> tuple[int, int, int, int]:
    """A 1-D pooling's ``(k, s, p, d)``, checked with PyTorch's messages (``stride=None``
    or empty: the kernel's)."""
    shape = _shape(x, name)
    k = _single(kernel_size, "kernel_size", name)
    s = k if stride is None or (isinstance(stride, tuple | list) and not stride) else _single(
        stride, "stride", name)
    p, d = _single(padding, "padding", name), _single(dilation, "dilation", name)
    if len(shape) not in (2, 3):
        if name == "avg_pool1d":
            raise ShapeError(f"Expected 2 to 3 dimensions, but got {len(shape)}-dimensional "
                             f"tensor for argument #1 'self' (while checking arguments for "
                             f"avg_pool1d)")
        raise ShapeError(f"{name}: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                         f"batch size for input, but got:{list(shape)}")
    for what, v in (("kernel_size", k), ("stride", s), ("dilation", d)):
        if v < 1:
            raise ShapeError(f"{name}() {what} must be greater than zero, but got {v}")
    if p < 0:
        raise ShapeError(f"{name}() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise ShapeError(f"{name}() padding should be at most half of kernel size, but got "
                         f"padding={p} and kernel_size={k}")
    return k, s, p, d


def _pool1d_out(name: str, x: Tensor, k: int, s: int, p: int, d: int, ceil_mode: bool) -> None:
    length = x.shape[-1]
    out = (length + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    if out < 1:
        raise ShapeError(f"{name}() Invalid computed output size: {out}")


def max_pool1d(
    input: Tensor,  # noqa: A002
    kernel_size: int | tuple[int],
    stride: int | tuple[int] | None = None,
    padding: int | tuple[int] = 0,
    dilation: int | tuple[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """1-D max pooling, as ``torch.nn.functional.max_pool1d``: ``[N, C, L] -> [N, C, Lo]``
    (or ``[C, L] -> [C, Lo]``), ``Lo`` as :func:`max_pool2d`'s ``Wo``; ``return_indices``
    gives int64 positions along ``L``. :func:`max_pool2d` over ``[N, C, 1, L]``."""
    k, s, p, d = _pool1d_args("max_pool1d", input, kernel_size, stride, padding, dilation)
    _pool1d_out("max_pool1d", input, k, s, p, d, ceil_mode)
    result = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode,
                        return_indices)
    if return_indices:
        out, indices = result
        return out.squeeze(-2), indices.squeeze(-2)
    return result.squeeze(-2)


def max_pool1d_with_indices(
    input: Tensor,  # noqa: A002
    kernel_size: int | tuple[int],
    stride: int | tuple[int] | None = None,
    padding: int | tuple[int] = 0,
    dilation: int | tuple[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = True,
) -> tuple[Tensor, Tensor]:
    """:func:`max_pool1d` that returns ``(out, indices)`` (PyTorch's
    ``F.max_pool1d_with_indices``)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool1d(
    input: Tensor,  # noqa: A002
    kernel_size: int | tuple[int],
    stride: int | tuple[int] | None = None,
    padding: int | tuple[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """1-D average pooling, as ``torch.nn.functional.avg_pool1d``: ``[N, C, L] ->
    [N, C, Lo]`` (or ``[C, L] -> [C, Lo]``). :func:`avg_pool2d` over ``[N, C, 1, L]``."""
    k, s, p, d = _pool1d_args("avg_pool1d", input, kernel_size, stride, padding, 1)
    length = input.shape[-1]
    out = (length + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    if out < 1:
        c = input.shape[-2]
        raise ShapeError(f"Given input size: ({c}x1x{length}). Calculated output size: "
                         f"({c}x1x{out}). Output size is too small")
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode,
                      count_include_pad).squeeze(-2)


class Conv1d(Module):
    """A 1-D convolution layer: ``weight [out, in / groups, K]`` and ``bias [out]``, drawn as
    :class:`Conv2d`'s (PyTorch's ``kaiming_uniform_(a=sqrt(5))``, ``fan_in = in / groups *
    K``). ``kernel_size``, ``stride``, ``padding`` and ``dilation`` are stored as 1-tuples,
    as PyTorch's; ``padding`` may be ``"valid"`` or ``"same"``, ``padding_mode`` as
    :class:`Conv2d`'s. Input ``[N, in, L]`` (or ``[in, L]``), see :func:`conv1d`."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] = 1,
        padding: int | tuple[int] | str = 0,
        dilation: int | tuple[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if in_channels < 1 or out_channels < 1:
            raise ValueError(f"Conv1d: channels must be positive, got in_channels={in_channels}, "
                             f"out_channels={out_channels}")
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode={padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = (_single(kernel_size, "kernel_size", "Conv1d"),)
        self.stride = (_single(stride, "stride", "Conv1d"),)
        self.dilation = (_single(dilation, "dilation", "Conv1d"),)
        if self.kernel_size[0] < 1:
            raise ValueError(f"Conv1d: kernel_size must be positive, got {self.kernel_size}")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            left, right, _, _ = _padding_from_string(padding, (1, self.stride[0]),
                                                     (1, self.kernel_size[0]), "Conv1d",
                                                     ValueError, (1, self.dilation[0]))
            self._pads = (left, right)
            self.padding: Any = padding
        else:
            self.padding = (_single(padding, "padding", "Conv1d"),)
            self._pads = (self.padding[0], self.padding[0])
        _make_conv_parameters(self, "Conv1d",
                              (out_channels, in_channels // groups, self.kernel_size[0]),
                              out_channels, bias, device, dtype)

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does (re-initialise a model)."""
        _draw_conv_parameters(self)

    def forward(self, x: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            return conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                          self.groups)
        from tinytrain.nn.functional import pad  # (functional imports this module)

        return conv1d(pad(x, self._pads, self.padding_mode), self.weight, self.bias,
                      self.stride, 0, self.dilation, self.groups)

    def extra_repr(self) -> str:
        """PyTorch's text (as :class:`Conv2d`'s, with 1-tuples)."""
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if isinstance(self.padding, str) or any(self.padding):
            text += f", padding={self.padding}"
        if self.dilation != (1,):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        text += ", bias=False" if self.bias is None else ""
        return text + (f", padding_mode={self.padding_mode}"
                       if self.padding_mode != "zeros" else "")


def conv_transpose1d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | tuple[int] = 1,
    padding: int | tuple[int] = 0,
    output_padding: int | tuple[int] = 0,
    groups: int = 1,
    dilation: int | tuple[int] = 1,
) -> Tensor:
    """1-D transposed convolution, as ``torch.nn.functional.conv_transpose1d``: ``input [N,
    Cin, L]`` (or ``[Cin, L]``), ``weight [Cin, Cout, K]`` -> ``[N, Cout, (L - 1) * s - 2 p
    + K + op]``. Runs :func:`conv_transpose2d` on ``[N, Cin, 1, L]`` (groups and dilation 1
    only, as there)."""
    for what, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor) or t.ndim not in ((2, 3) if what == "input" else (3,)):
            raise ShapeError(f"conv_transpose1d: expected {what} "
                             f"{'[N, Cin, L] or [Cin, L]' if what == 'input' else '[Cin, Cout, K]'}"
                             f", got {type(t).__name__} of shape {tuple(getattr(t, 'shape', ()))}")
    s, p, op, d = (_single(v, n, "conv_transpose1d") for v, n in (
        (stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
        (dilation, "dilation")))
    return conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, s), (0, p),
                            (0, op), groups, (1, d)).squeeze(-2)


class ConvTranspose1d(Module):
    """A 1-D transposed convolution layer: ``weight [in, out, K]`` and ``bias [out]``, drawn
    as :class:`ConvTranspose2d`'s; ``kernel_size``, ``stride``, ``padding`` and
    ``output_padding`` stored as 1-tuples, as PyTorch's. ``forward(x, output_size=None)``;
    see :func:`conv_transpose1d`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int],
                 stride: int | tuple[int] = 1, padding: int | tuple[int] = 0,
                 output_padding: int | tuple[int] = 0, groups: int = 1, bias: bool = True,
                 dilation: int | tuple[int] = 1, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = "ConvTranspose1d"
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}, got '
                             f"padding_mode={padding_mode!r}")
        if groups != 1 or _single(dilation, "dilation", name) != 1:
            raise NotImplementedError(f"{name}: groups={groups}, dilation={dilation}: tinytrain "
                                      f"has groups=1 and dilation=1 only")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.output_padding = (
            (_single(v, n, name),) for v, n in ((kernel_size, "kernel_size"), (stride, "stride"),
                                                (padding, "padding"),
                                                (output_padding, "output_padding")))
        if in_channels < 1 or out_channels < 1 or self.kernel_size[0] < 1:
            raise ValueError(f"{name}: channels and kernel_size must be positive, got "
                             f"{in_channels}, {out_channels}, {self.kernel_size}")
        if self.output_padding[0] >= self.stride[0]:
            raise ValueError(f"{name}: output_padding {self.output_padding} must be smaller "
                             f"than the stride {self.stride}")
        self.groups, self.dilation, self.padding_mode = 1, (1,), padding_mode
        _make_conv_parameters(self, name, (in_channels, out_channels, self.kernel_size[0]),
                              out_channels, bias, device, dtype)

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does."""
        _draw_conv_parameters(self)

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        output_padding = self.output_padding[0]
        if output_size is not None:  # PyTorch's rule: the padding that gives this length
            low = ((x.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0]
                   + self.kernel_size[0])
            length = int(list(output_size)[-1])
            if not low <= length < low + self.stride[0]:
                raise ValueError(f"requested an output size of {list(output_size)}, but valid "
                                 f"sizes range from {[low]} to {[low + self.stride[0] - 1]} "
                                 f"(for an input of {[x.shape[-1]]})")
            output_padding = length - low
        return conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding,
                                output_padding)

    def extra_repr(self) -> str:
        """PyTorch's text: padding and output_padding only when not zero."""
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,):
            text += f", padding={self.padding}"
        if self.output_padding != (0,):
            text += f", output_padding={self.output_padding}"
        return text + (", bias=False" if self.bias is None else "")


class MaxPool1d(Module):
    """Module form of :func:`max_pool1d` (``return_indices=True``: it returns ``(out,
    indices)``). Not a :class:`MaxPool2d` for ``isinstance``, as in PyTorch."""

    def __init__(
        self, kernel_size: int | tuple[int], stride: int | tuple[int] | None = None,
        padding: int | tuple[int] = 0, dilation: int | tuple[int] = 1,
        return_indices: bool = False, ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        # as PyTorch: no stride means the kernel's, and the attribute says so
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.dilation, self.ceil_mode = dilation, ceil_mode
        self.return_indices = return_indices

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

    extra_repr = MaxPool2d.extra_repr


class AvgPool1d(Module):
    """Module form of :func:`avg_pool1d`; ``kernel_size``, ``stride`` and ``padding`` are
    stored as 1-tuples, as PyTorch's."""

    def __init__(self, kernel_size: int | tuple[int], stride: int | tuple[int] | None = None,
                 padding: int | tuple[int] = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = (_single(kernel_size, "kernel_size", "AvgPool1d"),)
        self.stride = self.kernel_size if stride is None else (
            _single(stride, "stride", "AvgPool1d"),)
        self.padding = (_single(padding, "padding", "AvgPool1d"),)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# --------------------------------------------------------------------------- adaptive pooling


def _adaptive_input(x: Any, output_size: Any, name: str) -> tuple[int, int]:
    """Check an adaptive pooling's ``[N, C, H, W]`` input and return its output size
    ``(oh, ow)`` from ``output_size``: an int, or a pair whose None entries keep the input's
    size."""
    shape = _shape(x, name)
    if len(shape) != 4:
        raise ShapeError(f"{name}: expected input [N, C, H, W] (or [C, H, W]), got shape "
                         f"{shape}")
    if min(shape[1:]) < 1:  # (an empty batch is fine, as in PyTorch)
        raise ShapeError(f"{name}: input shape {shape} has an empty dimension")
    h, w = shape[2:]
    sizes = output_size if isinstance(output_size, tuple | list) else (output_size,) * 2
    if len(sizes) != 2:
        raise ShapeError(f"{name}: output_size must be an int or 2 sizes, got {output_size}")
    try:
        oh, ow = (n if s is None else operator.index(s) for s, n in zip(sizes, (h, w)))
    except TypeError:
        raise TypeError(f"{name}: output_size must be ints (or None), got {output_size}"
                        ) from None
    if oh < 0 or ow < 0:
        raise ValueError(f"{name}: output_size must be non-negative, got {output_size}")
    return oh, ow


def adaptive_avg_pool2d(x: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a given output size, as ``F.adaptive_avg_pool2d``.

    ``x [N, C, H, W] -> [N, C, oh, ow]`` (or ``[C, H, W] -> [C, oh, ow]``; ``output_size``
    an int, a pair, or a pair with None for "keep that size"). Output cell ``i`` averages
    rows ``floor(i H / oh)`` to ``ceil((i + 1) H / oh)`` (PyTorch's windows,
    :meth:`pooling.Windows.adaptive`). ``output_size=1`` is the mean over each plane, as
    PyTorch computes it (its gradient then needs no input: ``create_graph``'s gradient does
    not require grad, as torch's). When ``oh`` divides ``H`` and ``ow`` divides ``W`` it is
    :func:`avg_pool2d` with window and stride ``(H / oh, W / ow)``, the kernel; other sizes
    take the general path.
    """
    if _unbatched(x):
        return adaptive_avg_pool2d(x.unsqueeze(0), output_size).squeeze(0)
    oh, ow = _adaptive_input(x, output_size, "adaptive_avg_pool2d")
    h, w = x.shape[2:]
    if x.dtype.kind != "f":
        raise DTypeNotImplementedError(f'"adaptive_avg_pool2d" not implemented for '
                                       f'\'{torch_scalar_name(x.dtype)}\'')
    if (oh, ow) == (1, 1):  # a mean over the plane, as PyTorch computes it (and its graph)
        return x.mean((2, 3), keepdim=True)
    if oh and ow and h % oh == 0 and w % ow == 0:
        return avg_pool2d(x, (h // oh, w // ow))
    windows = pooling.Windows.adaptive(h, w, oh, ow)
    return pooling.avg_pool(x, windows, windows.sizes())


def adaptive_max_pool2d(x: Tensor, output_size: Any, return_indices: bool = False
                        ) -> Tensor | tuple[Tensor, Tensor]:
    """Max pooling to a given output size, as ``F.adaptive_max_pool2d``: the windows of
    :func:`adaptive_avg_pool2d`, the maximum of each (PyTorch's tie and NaN rule, as
    :func:`max_pool2d`). ``return_indices=True`` returns ``(out, indices)``, ``indices``
    int64 into each ``H * W`` plane."""
    if _unbatched(x):
        return _squeezed(adaptive_max_pool2d(x.unsqueeze(0), output_size, return_indices))
    oh, ow = _adaptive_input(x, output_size, "adaptive_max_pool2d")
    out, indices = pooling.max_pool(x, pooling.Windows.adaptive(*x.shape[2:], oh, ow))
    return (out, indices) if return_indices else out


def adaptive_max_pool2d_with_indices(x: Tensor, output_size: Any, return_indices: bool = True
                                     ) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool2d` that returns ``(out, indices)`` (PyTorch's
    ``F.adaptive_max_pool2d_with_indices``)."""
    return adaptive_max_pool2d(x, output_size, True)


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


class AdaptiveMaxPool2d(Module):
    """Module form of :func:`adaptive_max_pool2d`."""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return adaptive_max_pool2d(x, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


def _adaptive1d_input(x: Any, output_size: Any, name: str) -> int:
    """Check a 1-D adaptive pooling's ``[N, C, L]`` / ``[C, L]`` input and ``output_size``
    (an int or a sequence of one), with PyTorch's messages, and return the output length."""
    shape = _shape(x, name)
    if len(shape) not in (2, 3):
        raise ShapeError(f"Expected 2 to 3 dimensions, but got {len(shape)}-dimensional tensor "
                         f"for argument #1 'self' (while checking arguments for {name})")
    sizes = tuple(output_size) if isinstance(output_size, tuple | list) else (output_size,)
    if len(sizes) != 1:
        raise ShapeError(f"{name}() argument 'output_size' should contain one int (got "
                         f"{len(sizes)})")
    if isinstance(sizes[0], bool) or not isinstance(sizes[0], int | np.integer):
        raise TypeError(f"{name}(): argument 'output_size' (position 2) must be tuple of ints, "
                        f"not {type(sizes[0]).__name__}")
    size = int(sizes[0])
    if size < 0:
        raise ShapeError(f"{name}: elements of output_size must be greater than or equal to 0 "
                         f"but received {size}")
    if x.dtype.kind != "f":
        raise DTypeNotImplementedError(f'"{name}" not implemented for '
                                       f'\'{torch_scalar_name(x.dtype)}\'')
    empty = [d for d in range(len(shape) - 2, len(shape)) if shape[d] == 0]
    if name == "adaptive_avg_pool1d":  # (PyTorch's averages over no channels)
        empty = [d for d in empty if d == len(shape) - 1]
    if empty:
        raise ShapeError(f"{name}(): Expected input to have non-zero size for non-batch "
                         f"dimensions, but input has sizes {list(shape)} with dimension "
                         f"{empty[0]} being empty")
    return size


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """Average pooling to a given length, as ``F.adaptive_avg_pool1d``: ``[N, C, L] ->
    [N, C, output_size]`` (or ``[C, L] -> [C, output_size]``; ``output_size`` an int or a
    sequence of one). PyTorch's windows: output ``i`` averages ``floor(i L / o)`` to
    ``ceil((i + 1) L / o)``. :func:`adaptive_avg_pool2d` over ``[N, C, 1, L]``."""
    size = _adaptive1d_input(input, output_size, "adaptive_avg_pool1d")
    if input.shape[-2] == 0:  # (no channels: PyTorch's empty result; the 2-D pool refuses)
        return input.mean(-1, keepdim=True).expand(*input.shape[:-1], size)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


def adaptive_max_pool1d(input: Tensor, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max pooling to a given length, as ``F.adaptive_max_pool1d``: the windows of
    :func:`adaptive_avg_pool1d`, the maximum of each; ``return_indices=True`` returns ``(out,
    indices)``, int64 positions along ``L``. :func:`adaptive_max_pool2d` over ``[N, C, 1,
    L]``."""
    size = _adaptive1d_input(input, output_size, "adaptive_max_pool1d")
    result = adaptive_max_pool2d(input.unsqueeze(-2), (1, size), return_indices)
    if return_indices:
        out, indices = result
        return out.squeeze(-2), indices.squeeze(-2)
    return result.squeeze(-2)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool1d` that returns ``(out, indices)`` (PyTorch's
    ``F.adaptive_max_pool1d_with_indices``)."""
    return adaptive_max_pool1d(input, output_size, True)


class AdaptiveAvgPool1d(Module):
    """Module form of :func:`adaptive_avg_pool1d` (``AdaptiveAvgPool1d(1)``: global average
    pooling over time, as in d2l's TextCNN)."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(Module):
    """Module form of :func:`adaptive_max_pool1d` (``return_indices=True``: it returns
    ``(out, indices)``)."""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return adaptive_max_pool1d(x, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


# --------------------------------------------------------------------------- unpooling


def _unpool_size(x_shape: tuple[int, ...], kernel: tuple[int, int], stride: tuple[int, int],
                 padding: tuple[int, int], output_size: Any) -> tuple[int, int]:
    """PyTorch's ``_unpool_output_size``: ``(h - 1) * stride - 2 * padding + kernel``, or
    ``output_size`` (``(H, W)``, or with ``N, C`` in front) when it lies within a stride of
    that (several sizes pool to the same one)."""
    default = [(n - 1) * s + k - 2 * p for n, s, k, p in zip(x_shape[-2:], stride, kernel,
                                                                padding)]
    if output_size is None:
        size = default
    else:
        size = list(output_size)
        if len(size) == 4:
            size = size[2:]
        if len(size) != 2:
            raise ValueError(f"output_size should be a sequence containing 2 or 4 elements, "
                             f"but it has a length of '{len(size)}'")
        for d, (n, m, s) in enumerate(zip(size, default, stride)):
            if not m - s < n < m + s:
                raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be '
                                 f"between {m - s} and {m + s})")
    if min(size) < 1:
        raise ValueError(f"max_unpool2d: the output size {tuple(size)} is empty (input "
                         f"{tuple(x_shape)}, kernel {kernel}, stride {stride}, padding "
                         f"{padding})")
    return int(size[0]), int(size[1])


def max_unpool2d(
    x: Tensor,
    indices: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool2d`, as ``F.max_unpool2d``: zeros of the pooled
    input's size with each value of ``x [N, C, h, w]`` at its index (``indices``, the same
    shape, int64 into each ``H * W`` plane, as ``max_pool2d(..., return_indices=True)``
    gives). The size is ``(h - 1) * stride - 2 * padding + kernel_size``, or
    ``output_size`` within a stride of that. The gradient reads ``dy`` at the indices.
    """
    name = "max_unpool2d"
    x_shape, i_shape = _shape(x, name), _shape(indices, name, "indices")
    if len(x_shape) not in (3, 4):
        raise ShapeError(f"{name}: input must be 3-D [C, h, w] or 4-D [N, C, h, w], got "
                         f"shape {x_shape}")
    if i_shape != x_shape:
        raise ShapeError(f"{name}: indices must have the input's shape {x_shape}, got "
                         f"{i_shape}")
    if indices.dtype != np.int64:
        raise DTypeError(f"{name}: indices must be int64 (as max_pool2d returns them), got "
                         f"{indices.dtype}")
    kernel = pair(kernel_size, "kernel_size", name)
    size = _unpool_size(x_shape, kernel, kernel if stride is None else pair(stride, "stride", name),
                        pair(padding, "padding", name), output_size)
    if _unbatched(x):
        x, indices = x.unsqueeze(0), indices.unsqueeze(0)
    if indices.numel():
        xp = get_array_module(indices._data)
        low, high = int(xp.min(indices._data)), int(xp.max(indices._data))
        if low < 0 or high >= size[0] * size[1]:
            raise IndexRangeError(f"{name}: found an invalid max index {low if low < 0 else high} "
                                  f"(output planes are {size[0]}x{size[1]})")
    out = pooling.MaxUnpool2dFunction.apply(x, indices._data, size)
    return out.squeeze(0) if len(x_shape) == 3 else out


class MaxUnpool2d(Module):
    """Module form of :func:`max_unpool2d`: ``forward(x, indices, output_size=None)``."""

    def __init__(self, kernel_size: IntOrPair, stride: IntOrPair | None = None,
                 padding: IntOrPair = 0) -> None:
        super().__init__()
        self.kernel_size = pair(kernel_size, "kernel_size", "MaxUnpool2d")
        self.stride = (self.kernel_size if stride is None
                       else pair(stride, "stride", "MaxUnpool2d"))
        self.padding = pair(padding, "padding", "MaxUnpool2d")

    def forward(self, x: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return max_unpool2d(x, indices, self.kernel_size, self.stride, self.padding,
                            output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
