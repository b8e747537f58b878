"""Parameter initialisation, in place, drawing from the global stream (``tt.manual_seed``),
or from ``generator=`` (a ``tt.Generator``) where PyTorch takes one.

PyTorch's defaults for Linear and Conv2d are ``kaiming_uniform_(w, a=sqrt(5))``
(which works out to U(-1/sqrt(fan_in), 1/sqrt(fan_in))) and a bias drawn from
the same range.

Each function fills its argument in place and returns it. PyTorch's tutorials write
``nn.init.normal_(m.weight.data, 0.0, 0.02)``: ``.data`` is a Tensor sharing the weight's
memory (outside autograd), so the weight is filled. A raw NumPy/CuPy array is filled the
same way.
"""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain._missing import module_getattr
from tinytrain.dtypes import DTypeNotImplementedError, torch_scalar_name
from tinytrain.random import numpy_generator
from tinytrain.tensor import Tensor


def _fill(t: Tensor | np.ndarray, values: Any) -> Tensor:
    t = t if isinstance(t, Tensor) else Tensor(t)  # a raw NumPy/CuPy array, as a Tensor
    t._data[...] = backend.to_device(np.asarray(values).astype(t.dtype), t.device)
    t._version_counter[0] += 1  # an in-place write, as fill_ / copy_ count it
    return t


def calculate_fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    """``fan_in = shape[1] * receptive field``, ``fan_out = shape[0] * receptive field``."""
    if t.ndim < 2:
        raise ValueError(f"fan in/out needs at least 2 dimensions, got shape {t.shape}")
    receptive = int(np.prod(t.shape[2:])) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def _floating(t: Tensor | np.ndarray, name: str) -> None:
    """Random draws are real numbers: cast into an integer tensor they would be truncated
    (mostly to 0), so, as PyTorch, refuse."""
    if t.dtype.kind != "f":  # (PyTorch's NotImplementedError; also the TypeError it was)
        raise DTypeNotImplementedError(f"{name} expects a floating point tensor, got dtype "
                                       f"{t.dtype} (not implemented for "
                                       f"'{torch_scalar_name(t.dtype)}')")


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    _floating(t, "uniform_")
    rng = numpy_generator(generator, "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_: expects a range [a, b) with a <= b, got a={a} > b={b}")
    return _fill(t, rng.uniform(a, b, size=t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    _floating(t, "normal_")
    return _fill(t, numpy_generator(generator, "normal_").normal(mean, std, size=t.shape))


def constant_(t: Tensor, val: float) -> Tensor:
    return _fill(t, val)


def zeros_(t: Tensor) -> Tensor:
    return _fill(t, 0)


def ones_(t: Tensor) -> Tensor:
    return _fill(t, 1)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """PyTorch's recommended gain for an activation: 1 for linear, (transposed) convolutions
    and sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu
    (``param``, the slope: 0.01 by default; an int or float, else a ValueError), 3/4 for
    selu. tinytrain also takes ``"identity"`` (1)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                        "conv_transpose2d", "conv_transpose3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, int | float) and not isinstance(param, bool):
            slope = param
        else:  # (True would be a slope of 1; PyTorch's check and text)
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _gain_and_fan(t: Tensor, a: float, mode: str, nonlinearity: str) -> tuple[float, int]:
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return calculate_gain(nonlinearity, a), fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``, gain as in PyTorch."""
    if 0 in t.shape:  # nothing to fill (and no fan to divide by), as PyTorch
        return t
    gain, fan = _gain_and_fan(t, a, mode, nonlinearity)
    bound = gain * math.sqrt(3.0 / fan)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)`` (He initialisation)."""
    if 0 in t.shape:
        return t
    gain, fan = _gain_and_fan(t, a, mode, nonlinearity)
    return normal_(t, 0.0, gain / math.sqrt(fan), generator)


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot)."""
    if 0 in t.shape:
        return t
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))`` (Glorot)."""
    if 0 in t.shape:
        return t
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Any = None) -> Tensor:
    """N(mean, std^2) truncated to ``[a, b]`` (absolute bounds, not in units of ``std``).

    Draws normals and draws again those outside ``[a, b]`` (PyTorch inverts the normal CDF
    instead: the same distribution, other numbers). When ``[a, b]`` holds under 1% of the
    normal's mass, it inverts the CDF too (``statistics.NormalDist``, per element).
    """
    _floating(t, "trunc_normal_")
    gen = numpy_generator(generator, "trunc_normal_")
    if not a <= b:
        raise ValueError(f"trunc_normal_: the interval [a, b] = [{a}, {b}] is empty (a > b)")
    if not (math.isfinite(mean) and math.isfinite(std) and std > 0):  # (NaN: redrawn forever)
        raise ValueError(f"trunc_normal_: mean and std must be finite and std > 0, got "
                         f"mean={mean}, std={std}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    n = int(np.prod(t.shape))
    lo, hi = (NormalDist(mean, std).cdf(v) for v in (a, b))
    if hi - lo < 0.01:
        # the lower tail, mirrored for an upper one: the CDF near 1 rounds to 1.0 in float64
        # (an interval [8, 9] drew six distinct values), near 0 it keeps its precision
        # (and the CDF from erfc, which keeps it in the lower tail where 1 + erf cancels)
        flip = a > mean
        lo_x, hi_x = (2 * mean - b, 2 * mean - a) if flip else (a, b)
        lo, hi = (0.5 * math.erfc((mean - v) / (std * math.sqrt(2))) for v in (lo_x, hi_x))
        inv = np.vectorize(NormalDist(mean, std).inv_cdf, otypes=[np.float64])
        p = gen.uniform(lo, hi, size=n).clip(np.nextafter(0, 1), np.nextafter(1, 0))
        x = inv(p).clip(lo_x, hi_x)
        return _fill(t, (2 * mean - x if flip else x).reshape(t.shape))
    kept = np.empty(0)
    while kept.size < n:
        draw = gen.normal(mean, std, size=n - kept.size)
        kept = np.concatenate([kept, draw[(draw >= a) & (draw <= b)]])
    return _fill(t, kept.reshape(t.shape))


def orthogonal_(t: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain``, as PyTorch's: ``t`` seen as
    ``[rows, cols] = [shape[0], prod(shape[1:])]`` gets the Q of the QR decomposition of a
    normal matrix, each column's sign set by R's diagonal (so that Q is uniformly
    distributed); orthonormal rows if ``rows < cols``, else orthonormal columns."""
    _floating(t, "orthogonal_")
    rng = numpy_generator(generator, "orthogonal_")
    if t.ndim < 2:
        raise ValueError(f"orthogonal_: Only tensors with 2 or more dimensions are supported, "
                         f"got shape {t.shape}")
    if 0 in t.shape:
        return t if isinstance(t, Tensor) else Tensor(t)
    rows = t.shape[0]
    cols = int(np.prod(t.shape)) // rows
    flat = rng.normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, (gain * q).reshape(t.shape))


def eye_(t: Tensor) -> Tensor:
    """The identity matrix in a 2-D ``t`` (ones on the main diagonal of a non-square one)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(t, np.eye(*t.shape))


def dirac_(t: Tensor, groups: int = 1) -> Tensor:
    """A convolution weight ``[out, in, *kernel]`` (3-, 4- or 5-D) that passes its input
    through: 1 at the kernel's centre from input channel ``d`` to output channel ``d`` of
    each of the ``groups`` (``min(out / groups, in)`` channels), 0 elsewhere."""
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if t.shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = t.shape[0] // groups
    values = np.zeros(t.shape)
    centre = tuple(k // 2 for k in t.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, t.shape[1])):
            values[(g * per_group + d, d, *centre)] = 1
    return _fill(t, values)


__getattr__ = module_getattr(__name__, {}, (
    "tinytrain.nn.init has uniform_, normal_, trunc_normal_, constant_, zeros_, ones_, eye_, "
    "dirac_, kaiming_uniform_, kaiming_normal_, xavier_uniform_, xavier_normal_, orthogonal_ "
    "and calculate_gain"))
