"""Optimizer updates on NumPy arrays, in place (PyTorch's formulas, in PyTorch's order).

The optimizers in :mod:`tinytrain.optim` keep the state and call these once per parameter;
:mod:`tinytrain.kernels.cuda` has the same functions as one fused kernel each.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinytrain.kernels.cpu import memory
from tinytrain.kernels.cpu.parallel import shard_elements

__all__ = ["adam_step", "sgd_step"]


#: Adam updates this many elements at a time, per thread, with two scratch arrays of this
#: size. Smaller pieces would stay in cache, but each of the update's 11 NumPy calls costs
#: about a microsecond of Python under the GIL: at 16K elements per piece that overhead
#: is most of the time and two threads were no faster than one (measured on the PyTorch
#: example net's 1.2M parameters: 1 thread 1.5-1.8 ms per step at any size; 2 threads 2.2 ms
#: with 16K pieces, 1.0-1.1 ms from 256K on).
ADAM_PIECE = 1 << 18
#: Elements per thread before an update is split over the threads (131K elements: 0.17 ms on
#: one thread, 0.25 on two; 262K: 0.32 against 0.25-0.31; 1M: 1.3 against 0.76).
ADAM_MIN_SHARD = 1 << 17


def adam_step(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, step: int, lr: float,
              betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """One Adam update of ``param``, ``exp_avg`` and ``exp_avg_sq`` (step ``step`` >= 1).

    Every pass is written in place, into the arrays or two scratch pieces (no temporary
    of the parameter's size), one piece at a time, and a large parameter is split over the
    threads. The arithmetic is the same, operation for operation, as::

        m = m * b1 + (1 - b1) * g;  v = v * b2 + (1 - b2) * g * g
        p -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)
    """
    b1, b2 = betas
    g = grad + weight_decay * param if weight_decay else grad
    consts = (b1, b2, lr / (1 - b1**step), math.sqrt(1 - b2**step), eps)
    dtype = np.result_type(exp_avg, g)
    if not all(a.flags.c_contiguous for a in (param, exp_avg, exp_avg_sq)):  # one piece
        _adam_piece(param, g, exp_avg, exp_avg_sq, np.empty_like(exp_avg, dtype=dtype),
                    np.empty_like(exp_avg, dtype=dtype), *consts)
        return
    p, g, m, v = (a.reshape(-1) for a in (param, g, exp_avg, exp_avg_sq))

    def shard(lo: int, hi: int) -> None:
        x = memory.empty(min(ADAM_PIECE, hi - lo), dtype=dtype)
        y = memory.empty(x.shape, x.dtype)
        for a in range(lo, hi, ADAM_PIECE):
            b = min(a + ADAM_PIECE, hi)
            _adam_piece(p[a:b], g[a:b], m[a:b], v[a:b], x[: b - a], y[: b - a], *consts)

    shard_elements(shard, p.size, ADAM_MIN_SHARD)


def _adam_piece(p: Any, g: Any, m: Any, v: Any, x: Any, y: Any, b1: float, b2: float,
                step_size: float, bias_correction2_sqrt: float, eps: float) -> None:
    """:func:`adam_step` on one piece, in place; ``x`` and ``y`` are scratch of its shape."""
    m *= b1
    m += np.multiply(g, 1 - b1, out=x)
    v *= b2
    np.multiply(g, 1 - b2, out=x)
    v += np.multiply(x, g, out=x)
    np.sqrt(v, out=x)
    x /= bias_correction2_sqrt
    x += eps  # x = the denominator
    np.multiply(m, step_size, out=y)
    y /= x
    p -= y


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
