"""Stateless layer functions (``import tinytrain.nn.functional as F``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.autograd import ops as O
from tinytrain.nn.conv import avg_pool2d, conv2d, max_pool2d
from tinytrain.random import default_generator
from tinytrain.tensor import Tensor

__all__ = [
    "avg_pool2d", "conv2d", "cross_entropy", "dropout", "linear", "log_softmax", "max_pool2d",
    "relu", "sigmoid", "tanh",
]


def relu(x: Tensor) -> Tensor:
    return x.relu()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.log_softmax(dim)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias``: ``x [*, in]``, ``weight [out, in]``, ``bias [out]``.

    Returns ``[*, out]``.
    """
    if x.ndim < 1 or weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear: input of shape {x.shape} does not fit weight of shape {weight.shape} "
            f"(expected input [..., {weight.shape[1] if weight.ndim == 2 else '?'}])"
        )
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    if x.dtype != weight.dtype:
        raise TypeError(f"linear: input is {x.dtype} but weight is {weight.dtype}")
    return O.Linear.apply(x, weight, bias)


def cross_entropy(logits: Tensor, targets: Tensor | Any, reduction: str = "mean") -> Tensor:
    """Cross-entropy of ``logits [N, C]`` against integer class ``targets [N]``.

    ``reduction`` is ``"mean"`` (over the batch, the default), ``"sum"`` or ``"none"``.
    A target outside ``[0, C)`` raises a ValueError, by this call when the targets are in
    host memory (a NumPy array or a CPU tensor). Targets already on the GPU would have to be
    copied back to be checked here, a wait for the GPU every step; instead the kernel checks
    them and the error is raised *later*: by a later ``cross_entropy`` call on the GPU, at
    most ``tinytrain.kernels.cuda.CHECK_DEPTH`` (4) calls after the bad one, or by
    ``tinytrain.kernels.cuda.check_errors()``; the bad call's loss is NaN.
    """
    t = targets.data if isinstance(targets, Tensor) else targets
    if backend.device_of(logits.data) != "cpu" and backend.device_of(t) == "cpu":
        t = np.asarray(t)  # host targets for a GPU loss: check them before the copy, for free
        if t.dtype.kind in "iu" and t.ndim == 1 and t.size and (
                t.min() < 0 or t.max() >= logits.shape[-1]):
            raise ValueError(f"cross_entropy: targets must lie in [0, {logits.shape[-1]}), got "
                             f"values from {t.min()} to {t.max()}")
    t = backend.get_array_module(logits.data).asarray(t)
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy: logits must be [N, C], got shape {logits.shape}")
    if t.ndim != 1 or t.shape[0] != logits.shape[0]:
        raise ValueError(
            f"cross_entropy: targets must be [N] = [{logits.shape[0]}] class indices, got shape "
            f"{tuple(t.shape)}"
        )
    if t.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class indices, not {t.dtype}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: unknown reduction {reduction!r}")
    return O.CrossEntropy.apply(logits, t, reduction)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``.

    The mask is a hash of (a seed drawn from tinytrain's generator, the element's index),
    computed where ``x`` lives: the same seed drops the same elements on the CPU and the GPU.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    seed = int(default_generator().integers(0, 2**64, dtype=np.uint64))  # one draw per call
    return O.Dropout.apply(x, p, seed)
