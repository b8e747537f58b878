"""Normalisation layers: BatchNorm1d / BatchNorm2d, LayerNorm, GroupNorm, RMSNorm and
InstanceNorm1d / 2d / 3d.

All are built from tensor ops (mean, subtract, divide by the square root of the variance
plus ``eps``), so autograd differentiates them like any other expression; the functional
forms are ``F.batch_norm``, ``F.layer_norm`` and ``F.group_norm`` (a layer norm over each
group of channels).

Batch norm keeps *running* statistics as buffers (``running_mean``, ``running_var``,
``num_batches_tracked``: in ``state_dict()``, moved by ``to()``). In training mode it
normalises with the batch's mean and (biased) variance and updates the running ones,
``running = (1 - momentum) running + momentum batch`` with the unbiased variance; in eval
mode (``model.eval()``) it normalises with the running statistics, so a prediction does
not depend on the rest of its batch.
"""

from __future__ import annotations

from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.nn import functional as F
from tinytrain.nn import init
from tinytrain.nn.module import Module, Parameter, factory_tensor
from tinytrain.tensor import ShapeError, Tensor, tensor


class _NormBase(Module):
    """Batch and instance norm's parameters (``weight``, ``bias``) and running statistics
    (PyTorch's ``_NormBase``: an instance norm is not a batch norm for ``isinstance``, so that
    ``SyncBatchNorm.convert_sync_batchnorm`` leaves it alone)."""

    ndims: tuple[int, ...] = ()  # the input dimensions this layer accepts
    # A state dict without the count (PyTorch's before 0.4.1, and hand-made ones) still loads
    # strictly, keeping the layer's own count, as in PyTorch.
    _optional_state = ("num_batches_tracked",)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        name, shape = type(self).__name__, (num_features,)
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)
        if affine:
            self.weight = Parameter(factory_tensor(name, shape, 1, device, dtype))
            if bias:
                self.bias = Parameter(factory_tensor(name, shape, 0, device, dtype))
        for buffer in ("running_mean", "running_var", "num_batches_tracked"):
            self.register_buffer(buffer, None)
        if track_running_stats:
            self.running_mean = factory_tensor(name, shape, 0, device, dtype)
            self.running_var = factory_tensor(name, shape, 1, device, dtype)
            self.num_batches_tracked = tensor(0, device=device)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches counted (as at construction)."""
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """The running statistics reset, weight ones and bias zeros (as at construction)."""
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self.ndims or x.shape[1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}({self.num_features}): expected input of "
                f"{' or '.join(f'{d}-D' for d in self.ndims)} with {self.num_features} "
                f"channels in dimension 1, got shape {x.shape}")
        factor = self._count_batch()
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch, factor, self.eps)

    def _count_batch(self) -> float:
        """Count a training batch in ``num_batches_tracked``; return the running statistics'
        update factor (``momentum``, or ``1 / batches`` for a cumulative average)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average of every batch so far
                factor = 1.0 / self.num_batches_tracked.item()
        return factor


class BatchNorm1d(_BatchNorm):
    """Batch norm of ``[N, C]`` or ``[N, C, L]`` inputs, per channel ``C``."""

    ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of ``[N, C, H, W]`` inputs, per channel ``C``."""

    ndims = (4,)


class _AffineNorm(Module):
    """LayerNorm's and GroupNorm's per-element ``weight`` (ones) and ``bias`` (zeros), each
    None when not asked for."""

    def _affine(self, owner: str, shape: tuple[int, ...], affine: bool, bias: bool,
                device: Any, dtype: Any) -> None:
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)
        if affine:
            self.weight = Parameter(factory_tensor(owner, shape, 1, device, dtype))
            if bias:
                self.bias = Parameter(factory_tensor(owner, shape, 0, device, dtype))

    def reset_parameters(self) -> None:
        """Weight ones and bias zeros again (as at construction)."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)


class LayerNorm(_AffineNorm):
    """Normalise each sample over its last dims ``normalized_shape`` (mean 0, variance 1),
    then scale by ``weight`` and shift by ``bias`` (ones and zeros at first)."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self._affine("LayerNorm", shape, elementwise_affine, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(_AffineNorm):
    """Normalise each sample over groups of ``num_channels / num_groups`` channels (and all
    positions), then scale by ``weight [C]`` and shift by ``bias [C]`` (ones and zeros at
    first). ``GroupNorm(1, C)`` is a layer norm over ``[C, H, W]``, ``GroupNorm(C, C)`` an
    instance norm."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.affine = affine
        self._affine("GroupNorm", (num_channels,), affine, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        if isinstance(x, Tensor) and (x.ndim < 2 or x.shape[1] != self.num_channels):
            raise ShapeError(f"GroupNorm({self.num_groups}, {self.num_channels}): expected "
                             f"input [N, {self.num_channels}, *], got shape {x.shape}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """Root-mean-square normalisation of each sample over its last dims ``normalized_shape``
    (``F.rms_norm``), then a scale by ``weight`` (ones at first; no bias). ``eps=None``: the
    machine epsilon of the input's dtype, as in PyTorch."""

    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.register_parameter("weight", None)  # (no bias at all, as PyTorch's)
        if elementwise_affine:
            self.weight = Parameter(factory_tensor("RMSNorm", shape, 1, device, dtype))

    def reset_parameters(self) -> None:
        """Weight ones again (as at construction)."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _InstanceNorm(_NormBase):
    """Instance norm (``F.instance_norm``): each sample's each channel normalised over its
    positions. PyTorch's defaults differ from batch norm's: no ``weight``/``bias``
    (``affine=False``) and no running statistics (``track_running_stats=False``); with them,
    evaluation (``.eval()``) normalises with the running ones. An input without the batch
    dimension is run as a batch of one."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim not in self.ndims:
            raise ValueError(f"expected {'D or '.join(map(str, self.ndims))}D input (got "
                             f"{getattr(x, 'ndim', type(x).__name__)}D input)")
        unbatched = x.ndim == self.ndims[0]
        dim = 0 if unbatched else 1
        if x.shape[dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={dim} to match num_features "
                                 f"({self.num_features}), but got: {x.shape[dim]}.")
            F._warn(f"input's size at dim={dim} does not match num_features. You can silence "
                    f"this warning by not passing in num_features, which is not used because "
                    f"affine=False")
        batch = x.unsqueeze(0) if unbatched else x
        out = F.instance_norm(batch, self.running_mean, self.running_var, self.weight,
                              self.bias, self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of ``[N, C, L]`` inputs (or unbatched ``[C, L]``)."""

    ndims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of ``[N, C, H, W]`` inputs (or unbatched ``[C, H, W]``)."""

    ndims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of ``[N, C, D, H, W]`` inputs (or unbatched ``[C, D, H, W]``)."""

    ndims = (4, 5)


class LocalResponseNorm(Module):
    """``F.local_response_norm``: ``x / (k + alpha * mean of x^2 over size channels)^beta``
    for ``[N, C, *]`` input (AlexNet's); no parameters."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
