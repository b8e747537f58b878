"""Spatial transformers' sampling: ``F.affine_grid`` and ``F.grid_sample`` (2-D).

Both are composed of differentiable tensor ops, so autograd gives the gradients of the input,
of the sampling grid and of the affine matrices; the one NumPy/CuPy code path serves both
devices. ``grid_sample`` turns each grid point ``(x, y)`` in ``[-1, 1]`` into pixel
coordinates (``align_corners``: -1 and 1 are the corner pixels' centres, else their outer
edges), applies the padding mode to them (``border`` clamps, ``reflection`` mirrors at the
edges), then reads the input: ``bilinear`` weighs the four neighbours by their distances
(neighbours outside the input read 0), ``nearest`` takes the closest pixel (halves rounded
to even, as PyTorch's ``nearbyint``; no gradient for the grid, as in PyTorch).

The gradients at the edges are PyTorch's: a coordinate clamped by ``border`` or
``reflection`` has gradient 0 there (the edge itself included), and a mirrored one has its
sign flipped per reflection. The four neighbours' positions are constants (their floor),
so the grid's gradient is the one of the bilinear weights, as in PyTorch's kernel.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.dtypes import DTypeError
from tinytrain.tensor import ShapeError, Tensor, where

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


def _align(align_corners: bool | None) -> bool:
    if align_corners is None:
        from tinytrain.nn.functional import _warn  # (functional imports this module)

        _warn(_ALIGN_WARNING)
        return False
    return bool(align_corners)


def _steps(n: int, align_corners: bool, xp: Any, dtype: Any) -> Any:
    """PyTorch's ``linspace_from_neg_one``: ``n`` points from -1 to 1 (0 for one point),
    pulled in to the pixel centres, by ``(n - 1) / n``, without ``align_corners``."""
    if n <= 1:
        return xp.zeros(max(n, 0), dtype=dtype)
    steps = xp.linspace(-1, 1, n, dtype=dtype)
    return steps if align_corners else steps * dtype.type((n - 1) / n)


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The sampling grid ``[N, H, W, 2]`` of the affine maps ``theta [N, 2, 3]`` for an output
    of ``size = (N, C, H, W)``: point ``(i, j)`` is ``theta @ (x_j, y_i, 1)``, ``x`` and ``y``
    the output's pixel centres in ``[-1, 1]`` (``align_corners`` as :func:`grid_sample`'s;
    None means False, with PyTorch's warning). Differentiable in ``theta``. 2-D only (a 5-D
    ``size``, PyTorch's 3-D transform, is refused)."""
    align = _align(align_corners)
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be a Tensor, not "
                        f"{type(theta).__name__}")
    if theta.dtype.kind != "f":
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    given, size = size, [int(s) for s in size]
    if len(size) == 5:
        raise NotImplementedError("affine_grid: tinytrain has 2-D affine grids only (size "
                                  f"[N, C, H, W]), got the 3-D size {size}")
    if len(size) != 4:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {given}.")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{given}. Got {list(theta.shape)}.")
    if align and min(size[-2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {given}")
    n, _, h, w = size
    if theta.shape[0] != n:
        raise ShapeError(f"affine_grid: theta holds {theta.shape[0]} matrices for a size of "
                         f"batch {n}")
    xp = backend.get_array_module(theta._data)
    dtype = np.dtype(theta.dtype)
    base = xp.empty((h, w, 3), dtype=dtype)
    base[..., 0] = _steps(w, align, xp, dtype)[None, :]
    base[..., 1] = _steps(h, align, xp, dtype)[:, None]
    base[..., 2] = 1
    grid = Tensor(base.reshape(1, h * w, 3)) @ theta.transpose(1, 2)
    return grid.reshape(n, h, w, 2)


def _unnormalize(coord: Tensor, size: int, align: bool) -> Tensor:
    """``[-1, 1]`` to pixel coordinates (``align``: -1 and 1 the corner pixels' centres)."""
    if align:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip(coord: Tensor, size: int) -> Tensor:
    """``coord`` clamped to ``[0, size - 1]``, its gradient 0 at and beyond the edges
    (PyTorch's ``clip_coordinates_set_grad``); a NaN (a NaN grid value, or an infinite one
    reflected) becomes 0, as PyTorch's ``min(max(coord, 0), size - 1)`` makes it."""
    inside = (coord > 0) & (coord < size - 1)
    return where(inside, coord, coord.detach().nan_to_num(0.0).clamp(0, size - 1))


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """``coord`` mirrored into ``[twice_low / 2, twice_high / 2]`` as often as needed, the
    gradient's sign flipped with each reflection (PyTorch's
    ``reflect_coordinates_set_grad``)."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = coord - low
    xp = backend.get_array_module(d._data)
    a = d * Tensor(xp.where(d._data < 0, -1, 1).astype(d.dtype))  # |d|, its gradient -1 or 1
    with np.errstate(invalid="ignore"):  # (an infinite coordinate: NaN, which _clip makes 0)
        flips = (a.detach() / span).floor()
        extra = a - flips * span  # (fmod(|d|, span))
        return where(Tensor(xp.fmod(flips._data, 2) == 0), extra, span - extra) + low


def _source_index(coord: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    coord = _unnormalize(coord, size, align)
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        coord = (_reflect(coord, 0, 2 * (size - 1)) if align
                 else _reflect(coord, -1, 2 * size - 1))
        coord = _clip(coord, size)
    return coord


def _index(coord: Any) -> Any:
    """Whole-number pixel coordinates as int64; a non-finite one (a NaN or infinite grid
    value: PyTorch's own backward crashes on those) as -2, outside the input."""
    xp = backend.get_array_module(coord)
    finite = xp.isfinite(coord) & (xp.abs(coord) < 2.0**62)
    return xp.where(finite, coord, -2).astype(np.int64)


def _read(flat: Tensor, xi: Any, yi: Any, h: int, w: int) -> Tensor:
    """``input[n, :, yi, xi]`` for integer arrays ``xi``, ``yi`` ``[N, Ho, Wo]`` (0 where
    outside the input): ``[N, C, Ho, Wo]``. ``flat`` is the input as ``[N, C, H * W]``."""
    xp = backend.get_array_module(xi)
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    index = xp.where(inside, yi * w + xi, 0).astype(np.int64)
    n, c, _ = flat.shape
    spots = index.reshape(n, 1, -1)
    values = flat.gather(2, Tensor(xp.broadcast_to(spots, (n, c, spots.shape[2]))))
    values = values.reshape(n, c, *xi.shape[1:])
    return where(Tensor(inside[:, None]), values, 0.0)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",  # noqa: A002
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample ``input [N, C, H, W]`` at the points of ``grid [N, Ho, Wo, 2]`` -> ``[N, C, Ho,
    Wo]``. ``grid[n, i, j] = (x, y)`` in ``[-1, 1]`` (-1: left / top, 1: right / bottom;
    beyond reads the padding). ``mode`` is ``"bilinear"`` or ``"nearest"`` (``"bicubic"`` is
    refused); ``padding_mode`` ``"zeros"``, ``"border"`` or ``"reflection"``;
    ``align_corners`` as in :func:`affine_grid` (None means False, with PyTorch's warning).
    Differentiable in ``input`` and (bilinear) ``grid``. 2-D only (5-D inputs refused)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    align = _align(align_corners)
    for what, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"grid_sample(): argument '{what}' must be a Tensor, not "
                            f"{type(t).__name__}")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: tinytrain has mode='bilinear' and "
                                  "mode='nearest'; 'bicubic' is not implemented")
    if input.ndim == 5:
        raise NotImplementedError(f"grid_sample: tinytrain samples 2-D inputs [N, C, H, W] "
                                  f"only, got the 5-D input {list(input.shape)}")
    if input.ndim != 4 or grid.ndim != 4:
        raise ShapeError(f"grid_sampler(): expected 4D input and grid with same number of "
                         f"dimensions, but got input with sizes {list(input.shape)} and grid "
                         f"with sizes {list(grid.shape)}")
    if grid.shape[-1] != 2:
        raise ShapeError(f"grid_sampler(): expected grid to have size 2 in last dimension, but "
                         f"got grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise ShapeError(f"grid_sampler(): expected grid and input to have same batch size, "
                         f"but got input with sizes {list(input.shape)} and grid with sizes "
                         f"{list(grid.shape)}")
    if input.dtype.kind != "f" or input.dtype != grid.dtype:
        raise DTypeError(f"grid_sampler(): expected input and grid to have the same floating "
                         f"point dtype, but input has {input.dtype} and grid has {grid.dtype}")
    if input.device != grid.device:
        raise ValueError(f"grid_sampler(): expected input and grid to be on same device, but "
                         f"input is on {input.device} and grid is on {grid.device}")
    n, c, h, w = input.shape
    if min(h, w) == 0:
        raise ShapeError(f"grid_sampler(): expected input to have non-empty spatial "
                         f"dimensions, but input has sizes {list(input.shape)}")
    ix = _source_index(grid[..., 0], w, padding_mode, align)
    iy = _source_index(grid[..., 1], h, padding_mode, align)
    flat = input.reshape(n, c, h * w)
    xp = backend.get_array_module(ix._data)
    if mode == "nearest":
        out = _read(flat, _index(xp.rint(ix._data)), _index(xp.rint(iy._data)), h, w)
        # the grid joins the graph with a zero gradient (PyTorch's: zeros, not None)
        with np.errstate(invalid="ignore"):  # (inf + -inf, unused)
            return where(Tensor(xp.zeros((), dtype=bool)), (ix + iy).unsqueeze(1), out)
    x0, y0 = ix.detach().floor(), iy.detach().floor()
    xi, yi = _index(x0._data), _index(y0._data)
    with np.errstate(invalid="ignore"):  # (an infinite coordinate, zeros padding: NaN, as torch)
        dx, dy = ix - x0, iy - y0  # the distances to the top-left neighbour, differentiable
        out = _read(flat, xi, yi, h, w) * ((1 - dx) * (1 - dy)).unsqueeze(1)
        out = out + _read(flat, xi + 1, yi, h, w) * (dx * (1 - dy)).unsqueeze(1)
        out = out + _read(flat, xi, yi + 1, h, w) * ((1 - dx) * dy).unsqueeze(1)
        return out + _read(flat, xi + 1, yi + 1, h, w) * (dx * dy).unsqueeze(1)
