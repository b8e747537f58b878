"""``SyncBatchNorm``: batch norm whose statistics cover every rank's batch, as PyTorch's.

Under data parallelism each rank sees ``N_r`` samples; a plain BatchNorm normalises each
rank's slice with that slice's statistics, so a small per-rank batch gives noisy statistics
(and a model that differs from the one trained on the whole batch). ``SyncBatchNorm`` in
training mode normalises with the statistics of the union of all ranks' batches: the result,
the input gradients and the running statistics are those of one BatchNorm over the
concatenated batch. Two all-reduces per layer and step make that happen, each of a short
per-channel vector:

* forward: ``[sum x, sum x**2, count]`` (``2C + 1`` numbers). From them every rank gets the
  same mean, biased variance (for normalising) and unbiased variance (for ``running_var``);
  ranks with different batch sizes (even empty ones) are handled by the summed count.
* backward: ``[sum dy, sum dy * xhat]`` (``2C``), the two per-channel sums in batch norm's
  input gradient ``dx = w / std * (dy - mean(dy) - xhat * mean(dy * xhat))``, where the
  means are over the whole batch. The weight and bias gradients stay local sums, as in
  PyTorch: DistributedDataParallel averages them like any other gradient.

The sums are accumulated in float64 (a tiny vector), so ``E[x**2] - E[x]**2`` keeps float32
inputs' precision. The all-reduces go through :func:`tinytrain.distributed.all_reduce`, on
the array module of the input: MPI for NumPy tensors, NCCL for CuPy ones.

When it does not synchronise: in eval mode (the running statistics are used, as in
BatchNorm), and when there is nothing to synchronise with: no process group initialised,
or a group of one rank. It then is exactly ``BatchNorm1d/2d`` on its input (PyTorch's
"fallback to framework BN"). Difference from PyTorch: PyTorch refuses to synchronise CPU
tensors ("SyncBatchNorm expected input tensor to be on GPU ..."); tinytrain's ``mpi``
backend reduces CPU tensors, so SyncBatchNorm runs on the CPU too.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tinytrain.autograd import Context, Function, no_grad
from tinytrain.backend import get_array_module
from tinytrain.nn.functional import _same_precision
from tinytrain.nn.module import Module
from tinytrain.nn.normalization import _BatchNorm
from tinytrain.tensor import ShapeError, Tensor

__all__ = ["SyncBatchNorm"]

_SUMS = np.float64  # the dtype of the per-channel sums that travel between ranks


def _world_size(group: Any) -> int:
    """How many ranks share the statistics: 1 without a process group. (Only a program that
    imported tinytrain.distributed can have one: importing it here would set up MPI's
    environment and abort hooks in every program that uses SyncBatchNorm.)"""
    dist = sys.modules.get("tinytrain.distributed")
    if dist is None or not dist.is_initialized():
        return 1
    return dist.get_world_size(group)


def _all_reduce_sum(array: Any, group: Any) -> Any:
    """``array`` summed over every rank (in place; returned)."""
    from tinytrain import distributed as dist  # (a group exists: see _world_size)

    dist.all_reduce(Tensor(array), op="sum", group=group)
    return array


def _channel_shape(x: Any) -> tuple[int, ...]:
    """``(1, C, 1, ...)``: a per-channel vector's shape against ``x [N, C, *]``."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _other_axes(x: Any) -> tuple[int, ...]:
    """Every axis of ``x [N, C, *]`` but the channels'."""
    return (0, *range(2, x.ndim))


def global_batch_statistics(x: Any, group: Any) -> tuple[Any, Any, int]:
    """Per-channel ``mean [C]`` and biased ``var [C]`` (float64) of the union of every rank's
    ``x [N_r, C, *]``, and the number of values per channel in it, ``sum_r N_r * prod(*)``:
    one all-reduce of ``[sum x, sum x**2, count]``."""
    xp, c = get_array_module(x), x.shape[1]
    axes = _other_axes(x)
    packed = xp.concatenate([x.sum(axes, dtype=_SUMS), (x * x).sum(axes, dtype=_SUMS),
                             xp.full(1, x.size // c, dtype=_SUMS)])
    packed = _all_reduce_sum(packed, group)
    count = int(packed[2 * c])
    if count == 0:  # every rank's batch is empty: an empty output, no statistics
        return xp.zeros(c, _SUMS), xp.ones(c, _SUMS), 0
    mean = packed[:c] / count
    var = xp.maximum(packed[c:2 * c] / count - mean * mean, 0.0)  # (rounding: never < 0)
    return mean, var, count


class SyncBatchNormFunction(Function):
    """``(x - mean) * invstd * weight + bias`` with statistics of the whole (all ranks')
    batch, given; backward all-reduces ``[sum dy, sum dy * xhat]`` for the input gradient.

    Inputs: ``x [N_r, C, *]``, ``weight [C]`` and ``bias [C]`` (or None), ``mean [C]`` and
    ``invstd [C]`` (arrays), ``count`` (values per channel over all ranks), the group.
    """

    @staticmethod
    def forward(x: Any, weight: Any, bias: Any, mean: Any, invstd: Any, count: int,
                group: Any) -> Any:
        shape = _channel_shape(x)
        out = (x - mean.astype(x.dtype).reshape(shape)) * invstd.astype(x.dtype).reshape(shape)
        if weight is not None:
            out *= weight.astype(x.dtype).reshape(shape)
        if bias is not None:
            out += bias.astype(x.dtype).reshape(shape)
        return out

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        x, weight, _, mean, invstd, ctx.count, ctx.group = inputs
        ctx.dtypes = (None if weight is None else weight.dtype,
                      None if inputs[2] is None else inputs[2].dtype)
        ctx.save_for_backward(x, weight, mean, invstd)

    @staticmethod
    def backward(ctx: Context, dy: Any) -> tuple[Any, ...]:
        x, weight, mean, invstd = ctx.saved_tensors
        xp, c, shape, axes = get_array_module(x), x.shape[1], _channel_shape(x), _other_axes(x)
        xhat = (x - mean.astype(x.dtype).reshape(shape)) * invstd.astype(x.dtype).reshape(shape)
        sum_dy = dy.sum(axes, dtype=_SUMS)
        sum_dy_xhat = (dy * xhat).sum(axes, dtype=_SUMS)
        needs_x, needs_w, needs_b = ctx.needs_input_grad[:3]
        w_dtype, b_dtype = ctx.dtypes
        dweight = sum_dy_xhat.astype(w_dtype) if needs_w else None  # (local: DDP averages)
        dbias = sum_dy.astype(b_dtype) if needs_b else None
        dx = None
        if needs_x:  # (every rank's x needs a gradient, or none does: the same model)
            packed = _all_reduce_sum(xp.concatenate([sum_dy, sum_dy_xhat]), ctx.group)
            n = max(ctx.count, 1)
            mean_dy = (packed[:c] / n).astype(x.dtype).reshape(shape)
            mean_dy_xhat = (packed[c:] / n).astype(x.dtype).reshape(shape)
            scale = invstd if weight is None else invstd * weight
            dx = (dy - mean_dy - xhat * mean_dy_xhat) * scale.astype(x.dtype).reshape(shape)
        return dx, dweight, dbias, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch norm of ``[N, C, *]`` inputs (2-D to 5-D) whose training statistics are those of
    every rank's batch together, as ``torch.nn.SyncBatchNorm`` (see the module docstring).

    ``process_group``: the group to synchronise over (None: every rank; tinytrain has one
    group). In eval mode, and without a process group of more than one rank, it is
    ``BatchNorm`` on its input. Convert a model's BatchNorm layers with
    :meth:`convert_sync_batchnorm` before wrapping it in DistributedDataParallel.
    """

    ndims = (2, 3, 4, 5)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def forward(self, x: Tensor) -> Tensor:
        """``x [N, C, *] -> [N, C, *]``."""
        if not isinstance(x, Tensor) or x.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {getattr(x, 'ndim', 0)}D input)")
        if x.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        if not self.training or _world_size(self.process_group) == 1:
            return super().forward(x)  # BatchNorm on this rank's input
        if x.shape[1] != self.num_features:
            raise ShapeError(f"SyncBatchNorm({self.num_features}): expected input [N, "
                             f"{self.num_features}, *], got shape {x.shape}")
        if x.dtype.kind != "f":
            raise TypeError(f"SyncBatchNorm: expected a floating point input, got {x.dtype}")
        _same_precision("SyncBatchNorm", x, self.weight, self.bias)
        factor = self._count_batch()
        mean, var, count = global_batch_statistics(x._data, self.process_group)
        if count == 1:  # (every rank sees the same count, so every rank raises)
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)} on this rank and 1 value over all ranks")
        if self.track_running_stats and count > 1:
            with no_grad():  # the same update on every rank, from the same statistics
                for running, value in ((self.running_mean, mean),
                                       (self.running_var, var * (count / (count - 1)))):
                    running.mul_(1 - factor).add_(Tensor(value.astype(running.dtype)) * factor)
        invstd = 1.0 / get_array_module(var).sqrt(var + self.eps)
        return SyncBatchNormFunction.apply(x, self.weight, self.bias, mean, invstd, count,
                                           self.process_group)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """Replace every BatchNorm layer in ``module`` (recursively) by a SyncBatchNorm that
        shares its parameters and buffers (weight, bias, running statistics, batch count:
        the same tensors, so ``requires_grad`` and the values carry over) and its training
        flag; other modules stay. Returns ``module`` itself, or a new SyncBatchNorm when
        ``module`` is a BatchNorm. The state dict's keys do not change."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, bias=module.bias is not None)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
