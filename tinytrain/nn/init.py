"""Parameter initialisation, in place, drawing from the package generator.

PyTorch's defaults for Linear and Conv2d are ``kaiming_uniform_(w, a=sqrt(5))``
(which works out to U(-1/sqrt(fan_in), 1/sqrt(fan_in))) and a bias drawn from
the same range.
"""

from __future__ import annotations

import math

import numpy as np

from tinytrain import backend
from tinytrain.random import default_generator
from tinytrain.tensor import Tensor


def _fill(t: Tensor, values: np.ndarray) -> Tensor:
    t.data[...] = backend.to_device(values.astype(t.dtype), t.device)
    return t


def calculate_fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    """``fan_in = shape[1] * receptive field``, ``fan_out = shape[0] * receptive field``."""
    if t.ndim < 2:
        raise ValueError(f"fan in/out needs at least 2 dimensions, got shape {t.shape}")
    receptive = int(np.prod(t.shape[2:])) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    return _fill(t, default_generator().uniform(a, b, size=t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    return _fill(t, default_generator().normal(mean, std, size=t.shape))


def zeros_(t: Tensor) -> Tensor:
    t.data[...] = 0
    return t


def kaiming_uniform_(t: Tensor, a: float = 0.0, nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan_in)``, gain as in PyTorch."""
    fan_in, _ = calculate_fan_in_and_fan_out(t)
    gain = math.sqrt(2.0 / (1 + a**2)) if nonlinearity == "leaky_relu" else (
        math.sqrt(2.0) if nonlinearity == "relu" else 1.0)
    bound = gain * math.sqrt(3.0 / fan_in)
    return uniform_(t, -bound, bound)


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)
