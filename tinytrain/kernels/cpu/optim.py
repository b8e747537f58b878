"""Optimizer updates on NumPy arrays, in place (PyTorch's formulas, in PyTorch's order).

The optimizers in :mod:`tinytrain.optim` keep the state and call these once per parameter;
:mod:`tinytrain.kernels.cuda` has the same functions as one fused kernel each.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["adam_step", "sgd_step"]


def adam_step(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, step: int, lr: float,
              betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """One Adam update of ``param``, ``exp_avg`` and ``exp_avg_sq`` (step ``step`` >= 1)."""
    b1, b2 = betas
    g = grad + weight_decay * param if weight_decay else grad
    exp_avg *= b1
    exp_avg += (1 - b1) * g
    exp_avg_sq *= b2
    exp_avg_sq += (1 - b2) * g * g
    step_size = lr / (1 - b1**step)
    denom = np.sqrt(exp_avg_sq) / math.sqrt(1 - b2**step) + eps
    param -= (step_size * exp_avg / denom).astype(param.dtype, copy=False)


def sgd_step(param: Any, grad: Any, buf: Any | None, lr: float, momentum: float,
             dampening: float, weight_decay: float, nesterov: bool, first: bool) -> None:
    """One SGD update of ``param`` (and of the momentum buffer ``buf`` when ``momentum``).

    ``first`` marks the first step, where the buffer (allocated, not yet filled) becomes
    the gradient itself.
    """
    g = grad + weight_decay * param if weight_decay else grad
    if momentum:
        if first:
            buf[...] = g
        else:
            buf *= momentum
            buf += (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    param -= param.dtype.type(lr) * g
