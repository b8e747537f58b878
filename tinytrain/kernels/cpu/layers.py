"""The element-wise, linear and loss kernels of the layers, on NumPy arrays.

Each function here has a twin of the same name and signature in
:mod:`tinytrain.kernels.cuda` (fused CUDA kernels there; one NumPy expression or two here).

Dropout draws its mask from a *counter-based* hash of ``(seed, element index)`` instead of
a random-number stream: element ``i`` is kept when the top 24 bits of
``mix32(mix32(lo(i) ^ lo(seed)) ^ hi(i) ^ hi(seed))`` are at least ``ceil(p * 2**24)``
(``mix32`` is MurmurHash3's 32-bit finaliser). Any element's draw can be computed
independently, so a GPU thread computes its own without any state, backward recomputes the
mask from the seed instead of storing it, and the CPU and the GPU drop exactly the same
elements for the same seed. The layer draws the seed from tinytrain's generator, once per
call, so ``tt.manual_seed`` and checkpointed RNG states still decide every mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "cross_entropy_backward",
    "cross_entropy_forward",
    "dropout_backward",
    "dropout_forward",
    "dropout_keep",
    "dropout_keep_mask",
    "dropout_threshold",
    "linear_backward",
    "linear_forward",
    "relu_backward",
    "relu_forward",
]

# --------------------------------------------------------------------------- ReLU


def relu_forward(a: Any) -> Any:
    """``max(a, 0)``, same shape (NaN stays NaN)."""
    return np.maximum(a, 0)


def relu_backward(grad: Any, out: Any) -> Any:
    """The gradient where the forward output ``out`` is positive, 0 elsewhere."""
    return grad * (out > 0)


# --------------------------------------------------------------------------- dropout

_M32 = np.uint32(0xFFFFFFFF)


def _mix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's finaliser on uint32 arrays (wrapping arithmetic, as in C)."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def dropout_threshold(p: float) -> int:
    """Keep an element when its 24-bit draw is ``>= ceil(p * 2**24)`` (exact in integers)."""
    return math.ceil(p * (1 << 24))


def dropout_keep_mask(seed: int, n: int, p: float) -> np.ndarray:
    """bool ``[n]``: which of elements ``0 .. n-1`` a dropout with ``seed`` keeps."""
    return dropout_keep(seed, np.arange(n, dtype=np.uint64), p)


def dropout_keep(seed: int, i: np.ndarray, p: float) -> np.ndarray:
    """bool, like ``i`` (uint64 element indices): whether each index is kept."""
    lo, hi = (i & np.uint64(0xFFFFFFFF)).astype(np.uint32), (i >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = _mix32(lo ^ np.uint32(seed & 0xFFFFFFFF))
        h = _mix32(h ^ hi ^ np.uint32(seed >> 32))
    return (h >> np.uint32(8)) >= dropout_threshold(p)


def dropout_forward(x: Any, p: float, seed: int) -> Any:
    """``x * mask / (1 - p)``, the mask from ``(seed, flat index)``; same shape as ``x``."""
    scale = x.dtype.type(1.0 / (1.0 - p))
    keep = dropout_keep_mask(seed, x.size, p).reshape(x.shape)
    return np.where(keep, x * scale, x.dtype.type(0))


def dropout_backward(grad: Any, p: float, seed: int) -> Any:
    """The same mask and scale applied to the gradient (recomputed, never stored)."""
    return dropout_forward(grad, p, seed)


# --------------------------------------------------------------------------- Linear


def linear_forward(x: Any, w: Any, b: Any | None) -> Any:
    """``x [*, in] @ w.T [in, out] (+ b [out]) -> [*, out]``."""
    out = x @ w.T
    if b is not None:
        out += b
    return out


def linear_backward(
    grad: Any, x: Any | None, w: Any | None, needs: tuple[bool, bool, bool]
) -> tuple[Any | None, Any | None, Any | None]:
    """``(dx [*, in], dw [out, in], db [out])`` from ``grad [*, out]``, each only if needed.

    ``w`` is needed only for dx and ``x`` only for dw (the layer saves just those).
    """
    need_x, need_w, need_b = needs
    g2 = grad.reshape(-1, grad.shape[-1])
    gx = grad @ w if need_x else None
    gw = g2.T @ x.reshape(-1, x.shape[-1]) if need_w else None
    gb = g2.sum(axis=0) if need_b else None
    return gx, gw, gb


# --------------------------------------------------------------------------- cross-entropy


def _log_softmax(a: Any) -> Any:
    shifted = a - a.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _check_targets(targets: Any, classes: int) -> None:
    if targets.size and (int(targets.min()) < 0 or int(targets.max()) >= classes):
        raise ValueError(
            f"cross_entropy: targets must lie in [0, {classes}), got values from "
            f"{int(targets.min())} to {int(targets.max())}"
        )


def cross_entropy_forward(logits: Any, targets: Any, reduction: str) -> Any:
    """``-log softmax(logits)[n, targets[n]]``: ``[N]`` for "none", else its mean or sum.

    ``logits [N, C]``, integer ``targets [N]``; a target outside ``[0, C)`` raises a
    ValueError here and now (on the CPU this costs nothing: no device to wait for).
    """
    _check_targets(targets, logits.shape[1])
    nll = -_log_softmax(logits)[np.arange(logits.shape[0]), targets]
    return nll.mean() if reduction == "mean" else nll.sum() if reduction == "sum" else nll


def cross_entropy_backward(logits: Any, targets: Any, grad: Any, reduction: str) -> Any:
    """``(softmax(logits) - onehot(targets)) * grad`` (divided by N for "mean"): ``[N, C]``."""
    out = np.exp(_log_softmax(logits))
    n = out.shape[0]
    out[np.arange(n), targets] -= 1
    if reduction == "mean":
        out *= grad / out.dtype.type(n)
    elif reduction == "sum":
        out *= grad
    else:
        out *= grad[:, None]
    return out
