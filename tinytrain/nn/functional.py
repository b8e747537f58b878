"""Stateless layer functions (``import tinytrain.nn.functional as F``)."""

from __future__ import annotations

import warnings
from typing import Any

from tinytrain import backend
from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.autograd import ops as O
from tinytrain.nn.conv import avg_pool2d, conv2d, max_pool2d
from tinytrain.random import default_generator
from tinytrain.tensor import Tensor, check_same_dtype

__all__ = [
    "avg_pool2d", "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv2d",
    "cross_entropy", "dropout", "linear", "log_softmax", "max_pool2d", "mse_loss", "nll_loss",
    "relu", "sigmoid", "softmax", "tanh",
]

_REDUCTIONS = ("mean", "sum", "none")


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    return x.relu_() if inplace else x.relu()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.log_softmax(dim)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (computed stably)."""
    return x.softmax(dim)


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
    check_same_dtype("linear", x, weight, bias)
    return O.Linear.apply(x, weight, bias)


def _class_targets(name: str, scores: Tensor, targets: Any, reduction: str) -> Any:
    """``targets`` as an integer array ``[N]`` of classes in ``[0, C)`` for ``scores [N, C]``."""
    t = targets.data if isinstance(targets, Tensor) else targets
    t = backend.get_array_module(scores.data).asarray(t)
    if scores.ndim != 2:
        raise ValueError(f"{name}: input must be [N, C], got shape {scores.shape}")
    if t.ndim != 1 or t.shape[0] != scores.shape[0]:
        raise ValueError(
            f"{name}: targets must be [N] = [{scores.shape[0]}] class indices, got shape "
            f"{tuple(t.shape)}"
        )
    if t.dtype.kind not in "iu":
        raise TypeError(f"{name}: targets must be integer class indices, not {t.dtype}")
    if t.size and (int(t.min()) < 0 or int(t.max()) >= scores.shape[1]):
        raise ValueError(
            f"{name}: targets must lie in [0, {scores.shape[1]}), got values from "
            f"{int(t.min())} to {int(t.max())}"
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {reduction!r}; use one of {_REDUCTIONS}")
    return t


def cross_entropy(logits: Tensor, targets: Tensor | Any, reduction: str = "mean") -> Tensor:
    """Cross-entropy of ``logits [N, C]`` against integer class ``targets [N]``.

    ``reduction`` is ``"mean"`` (over the batch, the default), ``"sum"`` or ``"none"``.
    """
    t = _class_targets("cross_entropy", logits, targets, reduction)
    return O.CrossEntropy.apply(logits, t, reduction)


def nll_loss(input: Tensor, target: Tensor | Any, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Negative log-likelihood of integer ``target [N]`` under log-probabilities
    ``input [N, C]`` (e.g. ``log_softmax`` output): ``-input[i, target[i]]``, averaged
    (``"mean"``), summed (``"sum"``) or per sample (``"none"``).
    ``nll_loss(log_softmax(x, 1), y)`` equals ``cross_entropy(x, y)``.
    """
    t = _class_targets("nll_loss", input, target, reduction)
    return O.NLLLoss.apply(input, t, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean (or sum, or none) of ``(input - target) ** 2``, element-wise.

    Shapes should match; as in PyTorch, broadcastable ones are broadcast with a warning.
    """
    if isinstance(target, Tensor) and target.shape != input.shape:
        warnings.warn(
            f"mse_loss: target shape {target.shape} differs from input shape {input.shape}; "
            f"they are broadcast, which is likely not what you want", stacklevel=2)
    return _reduce((input - target) ** 2, reduction, "mse_loss")


def _reduce(loss: Tensor, reduction: str, name: str) -> Tensor:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {reduction!r}; use one of {_REDUCTIONS}")
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _same_shape(name: str, input: Tensor, target: Tensor) -> None:  # noqa: A002
    if not isinstance(target, Tensor) or target.shape != input.shape:
        raise ValueError(f"{name}: target must be a Tensor of the input's shape {input.shape}, "
                         f"got {getattr(target, 'shape', type(target).__name__)}")


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,  # noqa: A002
                                     reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of ``target`` (probabilities in [0, 1], the input's shape) under
    logits ``input``: ``-(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x)))``, computed stably."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    target = target.to(dtype=input.dtype)
    return _reduce(O.BCEWithLogits.apply(input, target), reduction,
                   "binary_cross_entropy_with_logits")


def binary_cross_entropy(input: Tensor, target: Tensor,  # noqa: A002
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of ``target`` under probabilities ``input`` (same shape); each
    log is clamped at -100, as in PyTorch, so 0 and 1 give finite losses."""
    _same_shape("binary_cross_entropy", input, target)
    if input.numel() and not ((input.data >= 0) & (input.data <= 1)).all():
        raise ValueError("binary_cross_entropy: input must be probabilities in [0, 1]; for "
                         "logits use binary_cross_entropy_with_logits")
    target = target.to(dtype=input.dtype)
    return _reduce(O.BinaryCrossEntropy.apply(input, target), reduction, "binary_cross_entropy")


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    keep = default_generator().random(x.shape) >= p
    mask = backend.to_device((keep / (1.0 - p)).astype(x.dtype), x.device)
    return x * Tensor(mask)


__getattr__ = _module_getattr(__name__, {}, (
    "tinytrain.nn.functional has " + ", ".join(__all__)))
