"""Resizing images: ``F.interpolate`` and the ``nn.Upsample`` modules, as PyTorch's.

A 2-D resize is separable: each output row is a weighted sum of one or two input rows, each
output column of one or two input columns. So one mechanism does both modes, one axis at a
time: a *tap* is an index array (the source row or column of every output one) and its
weights, and resizing an axis adds up ``take(x, index, axis) * weight`` over the taps.

* ``"nearest"``: one tap, weight 1, source ``floor(dst * scale)`` in float32, or
  ``dst // 2`` for exactly twice the size (PyTorch's legacy nearest, which
  ``"nearest-exact"`` fixes; tinytrain has only the legacy one).
* ``"bilinear"``: two taps, the rows (columns) either side of the source coordinate,
  weighted by the distance to it; ``align_corners=True`` maps the corner pixels' centres
  onto each other, ``False`` (the default) the corners of the images.

The gradient puts each output's gradient back where its taps read it: a scatter-add
(``backend.index_add``, NumPy's or CuPy's ``add.at``), since several outputs read the same
input row. The taps are index arithmetic with the input's array module, so the same code
runs on NumPy and on CuPy.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.autograd import Context, Function
from tinytrain.backend import get_array_module
from tinytrain.dtypes import DTypeError
from tinytrain.nn.module import Module
from tinytrain.tensor import ShapeError, Tensor

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "interpolate"]

_MODES = ("nearest", "bilinear")
#: PyTorch's other modes: named in the error, not implemented here
_TORCH_MODES = ("linear", "bicubic", "trilinear", "area", "nearest-exact")


def _taps(xp: Any, in_size: int, out_size: int, scale: float | None, mode: str,
          align_corners: bool, dtype: Any) -> list[tuple[Any, Any]]:
    """``[(index, weight), ...]`` of one axis: output ``j`` is the sum over the taps of
    ``weight[j] * input[index[j]]`` (``weight`` None means 1).

    ``scale`` is the user's scale factor (None when a size was given or with
    ``recompute_scale_factor``); PyTorch then maps with ``1 / scale``, else with
    ``in / out``. The arithmetic is in float32, for bilinear on float64 input in float64 (as
    PyTorch's CPU kernels compute the source coordinates); the weights are in ``dtype``. An
    axis that keeps its size is copied (a scale factor of 1.2 on 3 rows gives 3 rows, the
    same ones), as in PyTorch.
    """
    if out_size == in_size:  # PyTorch copies an axis that keeps its size, whatever the scale
        return [(xp.arange(out_size), None)]
    weight_dtype = dtype
    # PyTorch's nearest_idx computes in float32 for every dtype, and takes exactly twice the
    # size as dst // 2 whatever the scale factor; bilinear in float64 for float64 input
    dtype = np.dtype(np.float64 if dtype == np.float64 and mode != "nearest" else np.float32)
    if mode == "nearest" and out_size == 2 * in_size:
        return [(xp.arange(out_size) // 2, None)]

    def ratio() -> Any:  # PyTorch's compute_scales_value
        if scale is not None and scale > 0:
            return xp.asarray(1.0 / scale, dtype=dtype)
        return xp.asarray(in_size, dtype=dtype) / xp.asarray(out_size, dtype=dtype)

    dst = xp.arange(out_size, dtype=dtype)
    if mode == "nearest":
        src = xp.floor(dst * ratio()).astype(xp.int64)
        return [(xp.minimum(src, in_size - 1), None)]
    if align_corners:
        step = (xp.asarray(in_size - 1, dtype=dtype) / (out_size - 1) if out_size > 1
                else xp.asarray(0, dtype=dtype))
        src = dst * step
    else:
        src = xp.maximum((dst + dtype.type(0.5)) * ratio() - dtype.type(0.5), dtype.type(0))
    lo = src.astype(xp.int64)  # (floor: src >= 0)
    hi = xp.minimum(lo + 1, in_size - 1)
    frac = xp.clip(src - lo.astype(dtype), 0, 1)
    return [(lo, (1 - frac).astype(weight_dtype)), (hi, frac.astype(weight_dtype))]


def _along(weight: Any, axis: int, ndim: int) -> Any:
    """``weight [n]`` shaped to broadcast along ``axis`` of an ``ndim``-D array."""
    return weight.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _resample(a: Any, taps: list[tuple[Any, Any]], axis: int) -> Any:
    """Axis ``axis`` of ``a`` resized: the sum over the taps of the gathered rows, weighted."""
    xp, out = get_array_module(a), None
    for index, weight in taps:
        part = xp.take(a, index, axis=axis)
        part = part if weight is None else part * _along(weight, axis, a.ndim)
        out = part if out is None else out + part
    return out


def _scatter(grad: Any, taps: list[tuple[Any, Any]], axis: int, size: int) -> Any:
    """The gradient of :func:`_resample`: each tap's weighted gradient added back at the rows
    it read (several outputs may read one row, so ``index_add``)."""
    shape = grad.shape[:axis] + (size,) + grad.shape[axis + 1:]
    out = get_array_module(grad).zeros(shape, dtype=grad.dtype)
    where = (slice(None),) * axis
    for index, weight in taps:
        backend.index_add(out, (*where, index),
                          grad if weight is None else grad * _along(weight, axis, grad.ndim))
    return out


class Interpolate2dFunction(Function):
    """Resize ``x [N, C, H, W] -> [N, C, Ho, Wo]``: rows, then columns (see the module
    docstring). ``scales`` are the user's ``(h, w)`` scale factors or Nones. Nothing is
    saved: backward builds the same taps from the sizes."""

    @staticmethod
    def forward(x: Any, size: tuple[int, int], scales: tuple[Any, Any], mode: str,
                align_corners: bool) -> Any:
        xp, (h, w) = get_array_module(x), x.shape[2:]
        rows = _taps(xp, h, size[0], scales[0], mode, align_corners, x.dtype)
        cols = _taps(xp, w, size[1], scales[1], mode, align_corners, x.dtype)
        return _resample(_resample(x, rows, 2), cols, 3)

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        x, ctx.size, ctx.scales, ctx.mode, ctx.align_corners = inputs
        ctx.in_hw = x.shape[2:]

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, None, None, None, None]:
        xp, (h, w) = get_array_module(grad), ctx.in_hw
        rows = _taps(xp, h, ctx.size[0], ctx.scales[0], ctx.mode, ctx.align_corners, grad.dtype)
        cols = _taps(xp, w, ctx.size[1], ctx.scales[1], ctx.mode, ctx.align_corners, grad.dtype)
        return _scatter(_scatter(grad, cols, 3, w), rows, 2, h), None, None, None, None


def _two(value: Any, name: str, cast: Any) -> tuple[Any, Any]:
    """An int/float for both of H and W, or one each."""
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(
                f"Input and output must have the same number of spatial dimensions, but got "
                f"input with spatial dimensions of 2 and {name} {tuple(value)}. tinytrain's "
                f"interpolate takes 4-D input [N, C, H, W] and a {name} of (h, w)")
        return cast(value[0]), cast(value[1])
    return cast(value), cast(value)


def _size(value: Any) -> int:
    """An output size: an integer (PyTorch refuses 8.5 rather than truncating it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"interpolate: size must be an int or a pair of ints, got {value!r}")
    return int(value)


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,  # noqa: A002
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize ``input [N, C, H, W]`` to ``size`` ``(Ho, Wo)`` (an int: both) or by
    ``scale_factor`` (a float or an ``(h, w)`` pair), as ``torch.nn.functional.interpolate``.

    With a scale factor the output is ``floor(H * scale)`` (and W), and the source
    coordinates use ``1 / scale`` (PyTorch's default; ``recompute_scale_factor=True`` uses
    ``H / Ho`` instead). Modes ``"nearest"`` (PyTorch's legacy rule, source row
    ``floor(dst * H / Ho)``, or ``floor(dst / scale)``) and ``"bilinear"`` (``align_corners``
    False by default, or True). Other modes and 3-D/5-D inputs raise a NotImplementedError
    naming them.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    if mode not in _MODES:
        what = "is not in tinytrain" if mode in _TORCH_MODES else "is not a mode"
        raise NotImplementedError(f"interpolate: mode {mode!r} {what}; tinytrain has "
                                  f"{' | '.join(_MODES)}")
    if input.ndim != 4:
        raise NotImplementedError(f"interpolate: got {input.ndim}-D input of shape "
                                  f"{tuple(input.shape)}, but tinytrain's {mode} mode needs "
                                  f"4-D input [N, C, H, W]")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not in tinytrain")
    if align_corners is not None and mode == "nearest":
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if input.dtype.kind != "f":
        raise DTypeError(f"interpolate: expected a floating point tensor, got {input.dtype}")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    h, w = input.shape[2:]
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        out_hw, scales = _two(size, "output size", _size), (None, None)
    else:
        scales = _two(scale_factor, "scale_factor", float)
        out_hw = tuple(math.floor(n * s) for n, s in zip((h, w), scales))
        if recompute_scale_factor:
            scales = (None, None)
    if min(out_hw) < 1 or min(h, w) < 1:
        raise ShapeError(f"Input and output sizes should be greater than 0, but got input (H: "
                         f"{h}, W: {w}) output (H: {out_hw[0]}, W: {out_hw[1]})")
    return Interpolate2dFunction.apply(input, out_hw, scales, mode, bool(align_corners))


class Upsample(Module):
    """Module form of :func:`interpolate`: ``Upsample(scale_factor=2)`` doubles H and W
    (nearest), ``Upsample(size=(7, 7), mode="bilinear")`` resizes."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        if isinstance(scale_factor, tuple | list):  # (PyTorch keeps floats)
            self.scale_factor: Any = tuple(float(s) for s in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode="nearest")``."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode="bilinear", align_corners=True)``."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
