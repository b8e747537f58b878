"""``F.unfold`` / ``nn.Unfold`` (im2col) and ``F.fold`` / ``nn.Fold`` (col2im), as PyTorch's.

``unfold`` cuts the sliding ``kh x kw`` blocks out of a batch of images, each block a column:
``[N, C, H, W]`` -> ``[N, C * kh * kw, L]``, with ``L = Ho * Wo`` block positions in row-major
order and each column ordered channel, kernel row, kernel column (the layout of chapter 4's
im2col, so ``w.view(Cout, -1) @ unfold(x, k)`` is a convolution). ``padding`` adds zeros around
the image, ``dilation`` spaces the kernel's taps, ``stride`` the blocks:
``Ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1``, and the same for ``Wo``.

``fold`` puts the columns back: ``[N, C * kh * kw, L]`` -> ``[N, C, H, W]`` for an
``output_size=(H, W)``, adding up the values of overlapping blocks (so ``fold(unfold(x))`` is
``x`` times how many blocks cover each pixel). The two are each other's adjoint, hence each
other's gradient: one Function each, whose backward runs the other's array function.

Both loop over the ``kh * kw`` kernel offsets; each offset is one strided slice of the padded
image (all blocks' tap at that offset), copied out (im2col) or added back (col2im). Array
slicing only, so the same code runs on NumPy and CuPy (:func:`get_array_module`). Unbatched
input works too: ``[C, H, W]`` for unfold, ``[C * kh * kw, L]`` for fold.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tinytrain.autograd import Context, Function
from tinytrain.backend import get_array_module
from tinytrain.kernels.shapes import IntOrPair, pair
from tinytrain.nn.module import Module
from tinytrain.tensor import InvalidArgument, ShapeError, Tensor

__all__ = ["Fold", "Unfold", "fold", "unfold"]


class Blocks(NamedTuple):
    """The sliding blocks of one call: kernel, dilation, padding, stride as (h, w) pairs, the
    image size ``(H, W)`` and the number of block positions ``(Ho, Wo)``."""

    kernel: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]
    stride: tuple[int, int]
    size: tuple[int, int]
    count: tuple[int, int]


def _blocks(op: str, size: tuple[int, int], kernel_size: IntOrPair, dilation: IntOrPair,
            padding: IntOrPair, stride: IntOrPair) -> Blocks:
    """Validate the arguments (PyTorch's rules and messages) and count the blocks."""
    k, d, p, s = (pair(v, name, op) for v, name in ((kernel_size, "kernel_size"),
                                                     (dilation, "dilation"),
                                                     (padding, "padding"), (stride, "stride")))
    for (h, w), name, short, low in ((k, "kernel size", "kernel", 1), (s, "stride", "stride", 1),
                                     (d, "dilation", "dilation", 1), (p, "padding", "pad", 0)):
        if h < low or w < low:
            what = "be greater than zero" if low else "be non-negative"
            raise InvalidArgument(f"{op}: {name} should {what}, but got {short}_height: {h} "
                                  f"{short}_width: {w}")
    count = tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                  for n, kk, dd, pp, ss in zip(size, k, d, p, s))
    return Blocks(k, d, p, s, size, count)  # type: ignore[arg-type]


def _window(start: int, step: int, count: int) -> slice:
    """``count`` positions ``start, start + step, ...``: one kernel tap of every block."""
    return slice(start, start + step * (count - 1) + 1, step)


def im2col(x: Any, b: Blocks) -> Any:
    """The blocks of images ``x [N, C, H, W]`` as columns: ``[N, C * kh * kw, Ho * Wo]``."""
    xp = get_array_module(x)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (oh, ow) = b.kernel, b.dilation, b.padding, \
        b.stride, b.count
    if ph or pw:
        x = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = xp.empty(x.shape[:2] + (kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = x[:, :, _window(i * dh, sh, oh), _window(j * dw, sw, ow)]
    return cols.reshape(x.shape[0], x.shape[1] * kh * kw, oh * ow)


def col2im(cols: Any, b: Blocks) -> Any:
    """Columns ``[N, C * kh * kw, Ho * Wo]`` added back into images ``[N, C, H, W]``."""
    xp = get_array_module(cols)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (oh, ow) = b.kernel, b.dilation, b.padding, \
        b.stride, b.count
    (h, w), n = b.size, cols.shape[0]
    cols = cols.reshape(n, cols.shape[1] // (kh * kw), kh, kw, oh, ow)
    out = xp.zeros((n, cols.shape[1], h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, _window(i * dh, sh, oh), _window(j * dw, sw, ow)] += cols[:, :, i, j]
    return xp.ascontiguousarray(out[:, :, ph:ph + h, pw:pw + w]) if ph or pw else out


class UnfoldFunction(Function):
    """im2col; its gradient is col2im of the output's."""

    new_grads = True  # (backward's arrays are new)

    @staticmethod
    def forward(x: Any, blocks: Blocks) -> Any:
        return im2col(x, blocks)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.blocks = inputs[1]

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, None]:
        return col2im(grad_out, ctx.blocks), None

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Any, saved: tuple) -> tuple[Any, None]:
        return FoldFunction.apply(grad_out, ctx.blocks), None  # (the two are adjoints)


class FoldFunction(Function):
    """col2im; its gradient is im2col of the output's."""

    new_grads = True

    @staticmethod
    def forward(cols: Any, blocks: Blocks) -> Any:
        return col2im(cols, blocks)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.blocks = inputs[1]

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple[Any, None]:
        return im2col(grad_out, ctx.blocks), None

    @staticmethod
    def backward_graph(ctx: Context, grad_out: Any, saved: tuple) -> tuple[Any, None]:
        return UnfoldFunction.apply(grad_out, ctx.blocks), None


def _floating(op: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.dtype.kind != "f":
        raise NotImplementedError(f"{op} is not implemented for {x.dtype} tensors; convert "
                                  f"with .float()")


def unfold(input: Tensor, kernel_size: IntOrPair, dilation: IntOrPair = 1,  # noqa: A002
           padding: IntOrPair = 0, stride: IntOrPair = 1) -> Tensor:
    """The sliding blocks of ``input [N, C, H, W]`` (or ``[C, H, W]``) as columns:
    ``[N, C * kh * kw, L]`` (or ``[C * kh * kw, L]``), ``L`` the number of block positions
    (module docstring). Differentiable."""
    _floating("unfold", input)
    if input.ndim not in (3, 4) or 0 in input.shape[-3:]:
        raise ShapeError(f"unfold: expected a 3-D or 4-D (batch mode) tensor with possibly 0 "
                         f"batch size and other non-zero dimensions for input, but got: "
                         f"{list(input.shape)}")
    blocks = _blocks("unfold", input.shape[-2:], kernel_size, dilation, padding, stride)
    if min(blocks.count) < 1:
        raise ShapeError(
            f"unfold: given input with spatial size {tuple(input.shape[-2:])}, kernel_size="
            f"{blocks.kernel}, dilation={blocks.dilation}, padding={blocks.padding}, "
            f"calculated shape of the array of sliding blocks as {blocks.count}, but its "
            f"components must be at least one")
    if input.ndim == 3:
        return UnfoldFunction.apply(input.unsqueeze(0), blocks).squeeze(0)
    return UnfoldFunction.apply(input, blocks)


def fold(input: Tensor, output_size: IntOrPair, kernel_size: IntOrPair,  # noqa: A002
         dilation: IntOrPair = 1, padding: IntOrPair = 0, stride: IntOrPair = 1) -> Tensor:
    """Columns ``[N, C * kh * kw, L]`` (or ``[C * kh * kw, L]``) added back into images
    ``[N, C, H, W]`` (or ``[C, H, W]``) of ``output_size=(H, W)``; overlapping blocks add
    up. The inverse layout of :func:`unfold`. Differentiable."""
    _floating("fold", input)
    if input.ndim not in (2, 3) or 0 in input.shape[-2:]:
        raise ShapeError(f"fold: expected a 2-D or 3-D (batch mode) tensor for input with "
                         f"possibly 0 batch size and non-zero dimensions, but got: "
                         f"{list(input.shape)}")
    size = pair(output_size, "output_size", "fold")
    blocks = _blocks("fold", size, kernel_size, dilation, padding, stride)
    rows, length = input.shape[-2:]
    (kh, kw), (oh, ow) = blocks.kernel, blocks.count
    if rows % (kh * kw):
        raise ShapeError(f"fold: expected size of input's dimension {input.ndim - 2} to be "
                         f"divisible by the product of kernel_size, but got input.size("
                         f"{input.ndim - 2})={rows} and kernel_size={blocks.kernel}")
    if length != max(oh, 0) * max(ow, 0) or min(oh, ow) < 1:
        raise ShapeError(
            f"fold: given output_size={size}, kernel_size={blocks.kernel}, dilation="
            f"{blocks.dilation}, padding={blocks.padding}, stride={blocks.stride}, expected "
            f"size of input's dimension {input.ndim - 1} to match the calculated number of "
            f"sliding blocks {oh} * {ow} = {oh * ow}, but got input.size({input.ndim - 1})="
            f"{length}")
    if input.ndim == 2:
        return FoldFunction.apply(input.unsqueeze(0), blocks).squeeze(0)
    return FoldFunction.apply(input, blocks)


class Unfold(Module):
    """:func:`unfold` as a layer: ``[N, C, H, W]`` -> ``[N, C * kh * kw, L]``."""

    def __init__(self, kernel_size: IntOrPair, dilation: IntOrPair = 1,
                 padding: IntOrPair = 0, stride: IntOrPair = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """:func:`fold` as a layer: ``[N, C * kh * kw, L]`` -> ``[N, C, *output_size]``."""

    def __init__(self, output_size: IntOrPair, kernel_size: IntOrPair, dilation: IntOrPair = 1,
                 padding: IntOrPair = 0, stride: IntOrPair = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
