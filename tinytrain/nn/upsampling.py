"""Resizing images: ``F.interpolate`` and the ``nn.Upsample`` modules, as PyTorch's.

A 2-D resize is separable: each output row is a weighted sum of one or two input rows, each
output column of one or two input columns. So one mechanism does both modes, one axis at a
time: a *tap* is an index array (the source row or column of every output one) and its
weights, and resizing an axis adds up ``take(x, index, axis) * weight`` over the taps.

* ``"nearest"``: one tap, weight 1, source ``floor(dst * scale)`` in float32, or
  ``dst // 2`` for exactly twice the size (PyTorch's legacy nearest);
  ``"nearest-exact"``: source ``floor((dst + 0.5) * scale)``, the nearest pixel centre.
* ``"linear"`` (3-D input ``[N, C, L]``) and ``"bilinear"`` (4-D): two taps, the rows
  (columns) either side of the source coordinate,
  weighted by the distance to it; ``align_corners=True`` maps the corner pixels' centres
  onto each other, ``False`` (the default) the corners of the images.
* ``"bicubic"`` (4-D): four taps, the rows ``floor(src) - 1 .. floor(src) + 2`` (clamped to
  the image: a border row is read again), weighted by Keys' cubic convolution with
  ``A = -0.75`` at the distances to ``src`` (PyTorch's ``get_cubic_upsample_coefficients``);
  the source coordinate is not clamped at 0, as in PyTorch's cubic kernels.

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
from tinytrain.autograd.ops import adjoint
from tinytrain.backend import get_array_module
from tinytrain.dtypes import DTypeError
from tinytrain.nn.module import Module
from tinytrain.tensor import ShapeError, Tensor

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "interpolate"]

#: each mode and the input dims it takes (PyTorch's: ``"linear"`` 3-D, ``"bilinear"`` 4-D)
_MODES = {"nearest": (3, 4), "nearest-exact": (3, 4), "linear": (3,), "bilinear": (4,),
          "bicubic": (4,)}
#: PyTorch's other modes: named in the error, not implemented here
_TORCH_MODES = ("trilinear", "area")
#: the ``A`` of PyTorch's cubic convolution (Keys' kernel; OpenCV's value)
_CUBIC_A = -0.75


def _taps(xp: Any, in_size: int, out_size: int, scale: float | None, mode: str,
          align_corners: bool, dtype: Any, copy_same: bool = True) -> list[tuple[Any, Any]]:
    """``[(index, weight), ...]`` of one axis: output ``j`` is the sum over the taps of
    ``weight[j] * input[index[j]]`` (``weight`` None means 1).

    ``scale`` is the user's scale factor (None when a size was given or with
    ``recompute_scale_factor``); PyTorch then maps with ``1 / scale``, else with
    ``in / out``. The arithmetic is in float32, for bilinear on float64 input in float64 (as
    PyTorch's CPU kernels compute the source coordinates); the weights are in ``dtype``. With
    ``copy_same``, an axis that keeps its size is copied (a scale factor of 1.2 on 3 rows
    gives 3 rows, the same ones), as in PyTorch's kernels that do so.
    """
    if out_size == in_size and copy_same:  # (PyTorch's kernels: see InterpolateFunction)
        return [(xp.arange(out_size), None)]
    weight_dtype = dtype
    # PyTorch's nearest_idx computes in float32 for every dtype, and takes exactly twice the
    # size as dst // 2 whatever the scale factor; bilinear in float64 for float64 input
    dtype = np.dtype(np.float64 if dtype == np.float64 else np.float32)
    nearest = mode.startswith("nearest")
    if nearest:
        dtype = np.dtype(np.float32)
    if mode == "nearest" and out_size == 2 * in_size:
        return [(xp.arange(out_size) // 2, None)]

    def ratio() -> Any:  # PyTorch's compute_scales_value
        if scale is not None and scale > 0:
            return xp.asarray(1.0 / scale, dtype=dtype)
        return xp.asarray(in_size, dtype=dtype) / xp.asarray(out_size, dtype=dtype)

    dst = xp.arange(out_size, dtype=dtype)
    if nearest:
        offset = dtype.type(0.5 if mode == "nearest-exact" else 0.0)
        src = xp.floor((dst + offset) * ratio()).astype(xp.int64)
        return [(xp.minimum(src, in_size - 1), None)]
    if align_corners:
        step = (xp.asarray(in_size - 1, dtype=dtype) / (out_size - 1) if out_size > 1
                else xp.asarray(0, dtype=dtype))
        src = dst * step
    elif mode == "bicubic":  # (no clamp at 0: the taps are clamped instead)
        src = (dst + dtype.type(0.5)) * ratio() - dtype.type(0.5)
    else:
        src = xp.maximum((dst + dtype.type(0.5)) * ratio() - dtype.type(0.5), dtype.type(0))
    if mode == "bicubic":
        return _cubic_taps(xp, src, in_size, weight_dtype)
    lo = src.astype(xp.int64)  # (floor: src >= 0)
    hi = xp.minimum(lo + 1, in_size - 1)
    frac = xp.clip(src - lo.astype(dtype), 0, 1)
    return [(lo, (1 - frac).astype(weight_dtype)), (hi, frac.astype(weight_dtype))]


def _cubic_taps(xp: Any, src: Any, in_size: int, weight_dtype: Any) -> list[tuple[Any, Any]]:
    """The four taps of bicubic at source coordinates ``src``: rows ``floor(src) - 1 + k``
    clamped into ``[0, in_size)``, weights PyTorch's cubic coefficients of ``t = src -
    floor(src)``, computed in ``src``'s dtype in PyTorch's order of operations."""
    floor = xp.floor(src)
    t = src - floor
    one, a = src.dtype.type(1), src.dtype.type(_CUBIC_A)

    def near(x: Any) -> Any:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + one

    def far(x: Any) -> Any:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    rest = one - t
    weights = (far(t + one), near(t), near(rest), far(rest + one))
    lo = floor.astype(xp.int64)
    return [(xp.clip(lo + (k - 1), 0, in_size - 1), w.astype(weight_dtype))
            for k, w in enumerate(weights)]


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


class InterpolateFunction(Function):
    """Resize the spatial axes of ``x [N, C, *spatial] -> [N, C, *size]`` (one or two axes),
    one axis after another (see the module docstring). ``scales`` are the user's scale
    factors (one per axis) or Nones. Nothing is saved: backward builds the same taps from
    the sizes.

    An axis whose size a scale factor leaves as it is (1.2 on 4 rows) is copied by
    PyTorch's 2-D nearest and its (bi)linear kernels, and mapped through the scale like any
    other by its 1-D nearest and its nearest-exact kernels (``_copies_same``)."""

    @staticmethod
    def forward(x: Any, size: tuple[int, ...], scales: tuple[Any, ...], mode: str,
                align_corners: bool) -> Any:
        xp, copy_same = get_array_module(x), _copies_same(mode, len(size))
        for axis, (n_in, n_out, scale) in enumerate(zip(x.shape[2:], size, scales), 2):
            taps = _taps(xp, n_in, n_out, scale, mode, align_corners, x.dtype, copy_same)
            x = _resample(x, taps, axis)
        return x

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        x, ctx.size, ctx.scales, ctx.mode, ctx.align_corners = inputs
        ctx.in_size = x.shape[2:]

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, None, None, None, None]:
        xp, copy_same = get_array_module(grad), _copies_same(ctx.mode, len(ctx.size))
        axes = list(enumerate(zip(ctx.in_size, ctx.size, ctx.scales), 2))
        for axis, (n_in, n_out, scale) in reversed(axes):
            taps = _taps(xp, n_in, n_out, scale, ctx.mode, ctx.align_corners, grad.dtype,
                         copy_same)
            grad = _scatter(grad, taps, axis, n_in)
        return grad, None, None, None, None

    @staticmethod
    def backward_graph(ctx: Context, grad: Tensor, saved: tuple) -> tuple[Any, ...]:
        """Linear: the gradient's own gradient is the resize itself (the taps' adjoint)."""
        args = (None, ctx.size, ctx.scales, ctx.mode, ctx.align_corners)
        return adjoint(InterpolateFunction, ctx, grad, 0, args), None, None, None, None


def _copies_same(mode: str, spatial_dims: int) -> bool:
    """Whether PyTorch's kernel for ``mode`` copies an axis that keeps its size (its bicubic
    forward does not: a scale factor 1.2 on 3 rows maps them through ``1 / 1.2``)."""
    return (mode not in ("nearest-exact", "bicubic")
            and not (mode == "nearest" and spatial_dims == 1))


def _per_axis(value: Any, spatial: tuple[int, ...], name: str, cast: Any) -> tuple[Any, ...]:
    """One int/float for every spatial axis, or one each (as many as ``spatial``)."""
    if isinstance(value, tuple | list):
        if len(value) != len(spatial):
            raise ValueError(
                f"Input and output must have the same number of spatial dimensions, but got "
                f"input with spatial dimensions of {list(spatial)} and {name} of "
                f"{tuple(value)}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                f"format and {name} in (o1, o2, ...,oK) format.")
        return tuple(cast(v) for v in value)
    return (cast(value),) * len(spatial)


def _size(value: Any) -> int:
    """An output size: an integer (PyTorch refuses 8.5 rather than truncating it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"interpolate: size must be an int or a pair of ints, got {value!r}")
    return int(value)


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,  # noqa: A002
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize ``input [N, C, L]`` or ``[N, C, H, W]`` to ``size`` (an int: every spatial
    axis) or by ``scale_factor`` (a float, or one per axis), as
    ``torch.nn.functional.interpolate``.

    With a scale factor the output is ``floor(L * scale)`` (and so on), and the source
    coordinates use ``1 / scale`` (PyTorch's default; ``recompute_scale_factor=True`` uses
    ``L / Lo`` instead). Modes ``"nearest"`` (PyTorch's legacy rule, source
    ``floor(dst * L / Lo)``, or ``floor(dst / scale)``), ``"nearest-exact"`` (source
    ``floor((dst + 0.5) / scale)``), and ``"linear"`` (3-D) / ``"bilinear"`` / ``"bicubic"``
    (4-D) with ``align_corners`` False by default, or True. Other modes, 5-D input and
    ``antialias=True`` raise a NotImplementedError naming them.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    if mode not in _MODES:
        what = "is not in tinytrain" if mode in _TORCH_MODES else "is not a mode"
        raise NotImplementedError(f"interpolate: mode {mode!r} {what}; tinytrain has "
                                  f"{' | '.join(_MODES)}")
    if input.ndim not in _MODES[mode]:
        need = " or ".join(f"{n}D" for n in _MODES[mode])
        extra = " (tinytrain has no 5-D interpolation)" if input.ndim == 5 else ""
        raise NotImplementedError(f"Got {input.ndim}D input of shape {tuple(input.shape)}, but "
                                  f"{mode} mode needs {need} input{extra}")
    if antialias:
        raise NotImplementedError(f"interpolate: antialias=True is not in tinytrain (mode "
                                  f"{mode!r}); resize with antialias=False")
    if align_corners is not None and mode.startswith("nearest"):
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if input.dtype.kind != "f":
        raise DTypeError(f"interpolate: expected a floating point tensor, got {input.dtype}")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    spatial = tuple(input.shape[2:])
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        out_size = _per_axis(size, spatial, "output size", _size)
        scales: tuple[Any, ...] = (None,) * len(spatial)
    else:
        scales = _per_axis(scale_factor, spatial, "scale_factor", float)
        out_size = tuple(math.floor(n * s) for n, s in zip(spatial, scales))
        if recompute_scale_factor:
            scales = (None,) * len(spatial)
    if min(out_size) < 1 or min(spatial) < 1:
        names = ("H", "W")[-len(spatial):]
        got = [", ".join(f"{a}: {n}" for a, n in zip(names, sizes))
               for sizes in (spatial, out_size)]
        raise ShapeError(f"Input and output sizes should be greater than 0, but got input "
                         f"({got[0]}) output ({got[1]})")
    return InterpolateFunction.apply(input, out_size, scales, mode, bool(align_corners))


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
