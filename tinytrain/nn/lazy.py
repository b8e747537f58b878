"""Lazy layers: ``LazyLinear``, ``LazyConv2d``, ``LazyBatchNorm1d/2d``, as PyTorch's.

A lazy layer is built without its input size (``in_features``, ``in_channels``,
``num_features`` are 0): its weight and bias are placeholders
(:class:`~tinytrain.nn.module.UninitializedParameter`) until the first call, which reads the
size from the input, gives the placeholders their shapes, draws them with the regular layer's
initialisation and turns the module into the regular layer (``type(m)`` is then ``Conv2d``),
so ``net(X); net.apply(init_fn)`` sees regular layers. Convert a lazy model's device and
dtype before that dry run; ``load_state_dict`` of a full state dict gives the placeholders the
loaded shapes (the module stays lazy until its first call, as in PyTorch).
"""

from __future__ import annotations

from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.nn.conv import Conv2d, IntOrPair
from tinytrain.nn.layers import Linear
from tinytrain.nn.module import (
    Module,
    UninitializedBuffer,
    UninitializedParameter,
    UninitializedTensorMixin,
)
from tinytrain.nn.normalization import BatchNorm1d, BatchNorm2d, _BatchNorm
from tinytrain.tensor import ShapeError, Tensor

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyConv2d", "LazyLinear"]


class LazyModuleMixin:
    """The one mechanism: a layer class with this mixin first, e.g.
    ``class LazyLinear(LazyModuleMixin, Linear)``, is built by the regular constructor (with
    an input size of 1, thrown away), then :meth:`_make_lazy` swaps its parameters and
    buffers for placeholders. Its first call runs :meth:`initialize_parameters` (per layer:
    the input size, the placeholders' shapes), the regular ``reset_parameters`` if anything was
    a placeholder, and becomes ``cls_to_become``."""

    cls_to_become: type[Module]
    size_name: str  # the attribute the input gives: "in_features", "in_channels", ...

    def _make_lazy(self) -> None:
        setattr(self, self.size_name, 0)
        owner = type(self).__name__
        for registry, kind in ((self._parameters, UninitializedParameter),
                               (self._buffers, UninitializedBuffer)):
            for name, t in registry.items():
                if t is not None and t.ndim > 0:  # (BatchNorm's batch count is a number)
                    registry[name] = kind(t.requires_grad, t.device, t.dtype, owner=owner)

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer is still a placeholder."""
        return any(isinstance(t, UninitializedTensorMixin)
                   for t in (*self._parameters.values(), *self._buffers.values()))

    def reset_parameters(self) -> None:
        """Nothing to draw before the first call (the regular constructor calls this)."""

    def initialize_parameters(self, x: Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not define initialize_parameters")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fresh = self.has_uninitialized_params()
        with no_grad():
            self.initialize_parameters(*args, **kwargs)
        self.__class__ = self.cls_to_become
        if fresh:
            self.reset_parameters()  # the regular layer's: drawn now, from tt.manual_seed's
        return self(*args, **kwargs)


def _input(layer: Module, x: Any, ndims: tuple[int, ...] | None, what: str) -> Tensor:
    """``x`` when it is a Tensor of one of ``ndims`` dimensions (None: at least one), else a
    clear error naming the layer."""
    if not isinstance(x, Tensor) or x.ndim not in (ndims or range(1, x.ndim + 1)):
        got = f"shape {x.shape}" if isinstance(x, Tensor) else type(x).__name__
        dims = " or ".join(f"{d}-D" for d in ndims) if ndims else "an at least 1-D"
        raise ShapeError(f"{type(layer).__name__}: expected {dims} input {what} to infer its "
                         f"input size from, got {got}")
    return x


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is ``x.shape[-1]`` of its first input."""

    cls_to_become = Linear
    size_name = "in_features"

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(1, out_features, bias, device, dtype)
        self._make_lazy()

    def initialize_parameters(self, x: Tensor) -> None:
        self.in_features = _input(self, x, None, "[*, in_features]").shape[-1]
        for p, shape in ((self.weight, (self.out_features, self.in_features)),
                         (self.bias, (self.out_features,))):
            if isinstance(p, UninitializedTensorMixin):
                p.materialize(shape)


class LazyConv2d(LazyModuleMixin, Conv2d):
    """``Conv2d`` whose ``in_channels`` is ``x.shape[-3]`` of its first input."""

    cls_to_become = Conv2d
    size_name = "in_channels"

    def __init__(self, out_channels: int, kernel_size: IntOrPair, stride: IntOrPair = 1,
                 padding: IntOrPair | str = 0, dilation: IntOrPair = 1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        # (in_channels = groups until the first input: divisible by groups, as it must be)
        super().__init__(groups if isinstance(groups, int) else 1, out_channels, kernel_size,
                         stride, padding, dilation, groups, bias, padding_mode, device, dtype)
        self._make_lazy()

    def initialize_parameters(self, x: Tensor) -> None:
        self.in_channels = _input(self, x, (3, 4), "[N, C, H, W] or [C, H, W]").shape[-3]
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        for p, shape in ((self.weight, (self.out_channels, self.in_channels // self.groups,
                                        *self.kernel_size)),
                         (self.bias, (self.out_channels,))):
            if isinstance(p, UninitializedTensorMixin):
                p.materialize(shape)


class _LazyBatchNorm(LazyModuleMixin, _BatchNorm):
    size_name = "num_features"

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None
                 ) -> None:
        super().__init__(1, eps, momentum, affine, track_running_stats, device, dtype)
        self._make_lazy()

    def initialize_parameters(self, x: Tensor) -> None:
        self.num_features = _input(self, x, self.ndims, "[N, C, *]").shape[1]
        for t in (*self._parameters.values(), *self._buffers.values()):
            if isinstance(t, UninitializedTensorMixin):
                t.materialize((self.num_features,))


class LazyBatchNorm1d(_LazyBatchNorm):
    """``BatchNorm1d`` whose ``num_features`` is ``x.shape[1]`` of its first input."""

    cls_to_become = BatchNorm1d
    ndims = BatchNorm1d.ndims


class LazyBatchNorm2d(_LazyBatchNorm):
    """``BatchNorm2d`` whose ``num_features`` is ``x.shape[1]`` of its first input."""

    cls_to_become = BatchNorm2d
    ndims = BatchNorm2d.ndims
