"""Padding layers, as PyTorch's: ``nn.ZeroPad2d``, ``nn.ConstantPad2d``,
``nn.ReflectionPad2d``, ``nn.ReplicationPad2d``, ``nn.CircularPad2d`` and their 1-D and 3-D
forms.

Each is :func:`tinytrain.nn.functional.pad` of the last 1, 2 or 3 dimensions in one mode:
``padding`` is an int (the same on every side) or ``(left, right[, top, bottom[, front,
back]])``, starting from the last dimension; a negative size crops, as in PyTorch.
"""

from __future__ import annotations

from tinytrain.nn import functional as F
from tinytrain.nn.module import Module
from tinytrain.tensor import Tensor

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d",
    "ZeroPad3d",
]


class _PadNd(Module):
    """Pad the last ``dims`` dimensions in ``mode`` (the subclasses set both)."""

    dims: int
    mode: str

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__()
        self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) else tuple(padding)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """Pad with ``value``."""

    mode = "constant"

    def __init__(self, padding: int | tuple[int, ...], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """``[*, W]`` -> ``[*, left + W + right]``, filled with ``value``."""

    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """``[*, H, W]`` -> ``[*, top + H + bottom, left + W + right]``, filled with ``value``."""

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """``[*, D, H, W]`` padded on all three, filled with ``value``."""

    dims = 3


class ZeroPad1d(ConstantPad1d):
    """``ConstantPad1d`` with value 0."""

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding, 0.0)

    extra_repr = _PadNd.extra_repr


class ZeroPad2d(ConstantPad2d):
    """``ConstantPad2d`` with value 0: ``[*, H, W]`` -> ``[*, top + H + bottom, left + W +
    right]``."""

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding, 0.0)

    extra_repr = _PadNd.extra_repr


class ZeroPad3d(ConstantPad3d):
    """``ConstantPad3d`` with value 0."""

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding, 0.0)

    extra_repr = _PadNd.extra_repr


class _ReflectionPadNd(_PadNd):
    """The input mirrored at its edges, the edge not repeated: ``[2, 3, 4]`` padded by 2 on
    the left is ``[4, 3, 2, 3, 4]``; each size must be smaller than its dimension."""

    mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    dims = 1


class ReflectionPad2d(_ReflectionPadNd):
    dims = 2


class ReflectionPad3d(_ReflectionPadNd):
    dims = 3


class _ReplicationPadNd(_PadNd):
    """Copies of the edge values: ``[2, 3, 4]`` padded by 2 on the left is
    ``[2, 2, 2, 3, 4]``."""

    mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    dims = 1


class ReplicationPad2d(_ReplicationPadNd):
    dims = 2


class ReplicationPad3d(_ReplicationPadNd):
    dims = 3


class _CircularPadNd(_PadNd):
    """The input wrapped around: ``[2, 3, 4]`` padded by 2 on the left is
    ``[3, 4, 2, 3, 4]``."""

    mode = "circular"


class CircularPad1d(_CircularPadNd):
    dims = 1


class CircularPad2d(_CircularPadNd):
    dims = 2


class CircularPad3d(_CircularPadNd):
    dims = 3
