"""Stateless layer functions (``import tinytrain.nn.functional as F``)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from tinytrain import _numpy_names, backend
from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.autograd import no_grad
from tinytrain.autograd import ops as O
from tinytrain.dtypes import DTypeError, DTypeNotImplementedError, int64, torch_scalar_name
from tinytrain.nn.conv import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv_transpose1d,
    conv_transpose2d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_unpool2d,
)
from tinytrain.nn.ctc import ctc_loss
from tinytrain.nn.fold import fold, unfold
from tinytrain.nn.upsampling import interpolate
from tinytrain.nn.vision import affine_grid, grid_sample
from tinytrain.random import default_generator
from tinytrain.tensor import (
    IndexRangeError,
    InvalidArgument,
    ShapeError,
    Tensor,
    _as_operand,
    _broadcasts,
    check_same_dtype,
    tensor,
    where,
)
from tinytrain.tensor import (
    _warn_user as _warn,  # (a UserWarning at the user's line: F.softmax(x), nn.Softmax()(x))
)

__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool1d_with_indices",
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices",
    "affine_grid", "avg_pool1d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
    "bilinear", "binary_cross_entropy_with_logits", "celu", "celu_", "channel_shuffle",
    "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d",
    "cosine_embedding_loss", "cosine_similarity", "cross_entropy", "ctc_loss", "dropout",
    "dropout1d",
    "dropout2d", "dropout3d", "elu",
    "elu_", "embedding", "fold", "gaussian_nll_loss", "gelu", "glu", "grid_sample", "group_norm",
    "gumbel_softmax", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "hardtanh_",
    "hinge_embedding_loss", "huber_loss", "instance_norm", "interpolate", "kl_div", "l1_loss",
    "layer_norm", "leaky_relu", "leaky_relu_", "linear", "local_response_norm",
    "log_softmax", "logsigmoid",
    "margin_ranking_loss", "max_pool1d", "max_pool1d_with_indices", "max_pool2d",
    "max_pool2d_with_indices", "max_unpool2d", "mish", "mse_loss", "multi_margin_loss",
    "multilabel_soft_margin_loss", "nll_loss", "normalize", "one_hot", "pad", "pairwise_distance",
    "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss", "prelu", "relu", "relu6", "relu_",
    "rrelu",
    "rms_norm", "scaled_dot_product_attention", "selu", "selu_", "sigmoid", "silu",
    "smooth_l1_loss", "soft_margin_loss", "softmax", "softmin", "softplus", "softshrink",
    "softsign", "tanh", "tanhshrink", "threshold", "threshold_", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "unfold",
]

_REDUCTIONS = ("mean", "sum", "none")


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    return x.relu_() if inplace else x.relu()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def _floating(name: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if x.dtype.kind != "f":
        raise DTypeNotImplementedError(f"{name}: expected a floating point tensor, got "
                                       f"{x.dtype} (PyTorch: not implemented for "
                                       f"'{torch_scalar_name(x.dtype)}'); convert with .float()")


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    _floating("leaky_relu", x)
    fn = lambda t: O.LeakyReLU.apply(t, negative_slope, False)  # noqa: E731
    return x._inplace("leaky_relu_", fn) if inplace else fn(x)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: ``x`` where ``x > 0``, else ``a * x``. Training draws ``a``
    uniform in ``[lower, upper]`` for every element from tinytrain's random stream
    (``tt.manual_seed``); otherwise ``a = (lower + upper) / 2`` (a :func:`leaky_relu`)."""
    _floating("rrelu", input)
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    from tinytrain.tensor import rand

    slope = rand(*input.shape, dtype=input.dtype, device=input.device) * (upper - lower) + lower
    fn = lambda t: where(t <= 0, t * slope, t)  # noqa: E731 (PyTorch's: x <= 0 gets the slope)
    return input._inplace("rrelu_", fn) if inplace else fn(input)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    _floating("elu", x)
    fn = lambda t: O.LeakyReLU.apply(t, alpha, True)  # noqa: E731
    return x._inplace("elu_", fn) if inplace else fn(x)


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (swish)."""
    _floating("silu", x)
    return x._inplace("silu_", O.SiLU.apply) if inplace else O.SiLU.apply(x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``, Phi the standard normal CDF; ``approximate="tanh"`` uses PyTorch's
    tanh formula instead."""
    _floating("gelu", x)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return O.GELU.apply(x, approximate)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``."""
    _floating("softplus", x)
    return O.Softplus.apply(x, beta, threshold)


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def _maybe_inplace(name: str, x: Tensor, fn: Any, inplace: bool) -> Tensor:
    """``fn(x)``, or written into ``x`` itself (``name_``) with ``inplace=True``."""
    _floating(name, x)
    return x._inplace(name + "_", fn) if inplace else fn(x)


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
             ) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``. As in PyTorch the gradient passes only
    strictly inside (0 at the bounds themselves, where ``clamp``'s passes)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if isinstance(x, Tensor) and x.dtype.kind in "iu":  # integers: clamped to int bounds, as
        lo, hi = int(min_val), int(max_val)             # PyTorch's (no gradient to keep)
        if x.dtype.kind == "u" and lo < 0:  # (-1 would wrap to 255)
            raise DTypeError(f"hardtanh: cannot do hardtanh on an unsigned type ({x.dtype}) "
                             f"with negative limits ({min_val}, {max_val})")
        return x.clamp_(lo, hi) if inplace else x.clamp(lo, hi)

    def fn(t: Tensor) -> Tensor:
        a = t._data
        inside = (a > min_val) & (a < max_val)
        return O.PiecewiseLinear.apply(t, backend.get_array_module(a).clip(a, min_val, max_val),
                                       inside)

    return _maybe_inplace("hardtanh", x, fn, inplace)


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``: ``hardtanh(x, 0, 6)``."""
    return hardtanh(x, 0.0, 6.0, inplace)


def logsigmoid(x: Tensor) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, computed as ``min(x, 0) - log1p(exp(-|x|))``:
    finite for any ``x`` (``log(sigmoid(-200))`` would be ``log(0)``)."""
    _floating("logsigmoid", x)
    return -O.Softplus.apply(-x, 1.0, math.inf)  # (no linear cut-off, as PyTorch's)


def mish(x: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _maybe_inplace("mish", x, lambda t: t * softplus(t).tanh(), inplace)


def hardswish(x: Tensor, inplace: bool = False) -> Tensor:
    """``0`` up to -3, ``x (x + 3) / 6`` between -3 and 3, then ``x``; at the ends the
    gradient is the outer piece's (0 at -3, 1 at 3), as PyTorch's."""

    def fn(t: Tensor) -> Tensor:
        m = t.clamp(-3, 3)  # the middle piece on its own range: no inf * 0 in its gradient
        return where(t <= -3, 0.0, where(t < 3, m * (m + 3) / 6, t))

    return _maybe_inplace("hardswish", x, fn, inplace)


def hardsigmoid(x: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``: 0 up to -3, 1 from 3, a line between (gradient 1/6 strictly
    inside)."""
    return _maybe_inplace("hardsigmoid", x, lambda t: hardtanh(t + 3, 0.0, 6.0) / 6, inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with PyTorch's constants (alpha 1.6733, scale 1.0507)."""
    return _maybe_inplace("selu", x, lambda t: elu(t, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""
    if alpha == 0:
        raise ZeroDivisionError("alpha cannot be 0 for CELU")

    def fn(t: Tensor) -> Tensor:  # (the exp of the clamped x: no inf for large x)
        return where(t > 0, t, (t.clamp(max=0) / alpha).expm1() * alpha)

    return _maybe_inplace("celu", x, fn, inplace)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Tensor:
    """``softmax(-input, dim)``: weights that favour the smallest entries. Without ``dim``,
    PyTorch's implicit choice, with its warning (pass ``dim``)."""
    return (-input).softmax(_softmax_dim("softmin", input, dim), dtype=dtype)


def softsign(x: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return x / (x.abs() + 1)


def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x``: ``weight`` is one slope (one element) or
    one per channel, ``[C]`` for ``x [N, C, *]`` (dimension 1)."""
    if weight.ndim > 1:
        raise ShapeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                         f"ndim = {weight.ndim}")
    if weight.numel() != 1:
        if x.ndim == 0:
            raise ShapeError("prelu: Not allow zero-dim input tensor.")
        channels = x.shape[1] if x.ndim > 1 else 1
        if weight.numel() != channels:
            raise ShapeError(f"prelu: Mismatch of parameter numbers and input channel size. "
                             f"Found parameter numbers = {weight.numel()} and channel size = "
                             f"{channels}.")
        weight = weight.reshape((1, channels) + (1,) * (x.ndim - 2))
    elif x.ndim < weight.ndim:  # a [1] weight and a 0-d x: a 0-d result, as PyTorch's
        weight = weight.reshape(())
    return where(x > 0, x, x * weight)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1/|x1| * x2/|x2|)`` along ``dim`` (``x1`` and ``x2`` broadcast together;
    ``dim`` removed from the shape).

    PyTorch 2.x's formula: each input is divided by its norm first (the result stays in
    [-1, 1]), each norm clamped to at least ``eps``. The clamp is made without gradient,
    as PyTorch's: at a zero vector the similarity is 0 and its gradient ``x2/|x2| / eps``.
    """
    for what, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"cosine_similarity(): argument '{what}' must be a Tensor, not "
                            f"{type(t).__name__}")
        if t.dtype.kind != "f":
            raise DTypeError(f"cosine_similarity: expected floating point tensors, got "
                             f"{x1.dtype} and {x2.dtype}")
    shape = O.broadcast_shapes("cosine_similarity", x1.shape, x2.shape)
    x1, x2 = x1.broadcast_to(shape), x2.broadcast_to(shape)
    n1, n2 = x1.norm(2, dim, keepdim=True).clone(), x2.norm(2, dim, keepdim=True).clone()
    with no_grad():
        n1.clamp_(min=eps)
        n2.clamp_(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``norm_p(x1 - x2 + eps)`` over the last dimension (of the larger input): ``[N, D]``
    pairs give ``[N]`` (``[N, 1]`` with ``keepdim``)."""
    dim = max(x1.ndim, x2.ndim) - 1
    return (x1 - x2 + eps).norm(p, dim if dim >= 0 else None, keepdim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """``log(softmax(input))`` along ``dim`` (computed stably); ``dtype`` converts first.
    Without ``dim``, PyTorch's implicit choice, with its warning (pass ``dim``).
    ``_stacklevel`` is accepted for PyTorch's signature; the warning names the caller's line
    by itself."""
    return input.log_softmax(_softmax_dim("log_softmax", input, dim), dtype=dtype)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Tensor:
    """``exp(input) / sum(exp(input))`` along ``dim`` (computed stably); ``dtype`` converts
    first. Without ``dim``, PyTorch's implicit choice, with its warning (pass ``dim``)."""
    return input.softmax(_softmax_dim("softmax", input, dim), dtype=dtype)


def _softmax_dim(name: str, x: Tensor, dim: int | None) -> int:
    """``dim=None``: PyTorch's old implicit choice (0 for 0-, 1- and 3-d inputs, else 1),
    with its warning (``torch.nn.functional._get_softmax_dim``)."""
    if dim is not None:
        return dim
    _warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
          f"include dim=X as an argument.")
    return 0 if x.ndim in (0, 1, 3) else 1


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias``: ``x [*, in]``, ``weight [out, in]``, ``bias [out]``.

    Returns ``[*, out]``.
    """
    for what, t in (("input", x), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"linear(): argument '{what}' must be a Tensor, not "
                            f"{type(t).__name__}")
    if x.ndim < 1 or weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input of shape {x.shape} does not fit weight of shape {weight.shape} "
            f"(expected input [..., {weight.shape[1] if weight.ndim == 2 else '?'}])"
        )
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ShapeError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    check_same_dtype("linear", x, weight, bias)
    return O.Linear.apply(x, weight, bias)


def _class_targets(name: str, scores: Tensor, targets: Any, reduction: str,
                   checked_by_kernel: bool = False, ignore_index: int | None = None) -> Any:
    """``targets`` as an integer array ``[N]`` of classes in ``[0, C)`` (or equal to
    ``ignore_index``) for ``scores [N, C]``, on the scores' device.

    Targets in host memory are range-checked here, before any copy, for free. Targets already
    on the GPU are range-checked here only when the loss kernel does not check them itself
    (``checked_by_kernel``): reading their min and max would wait for the GPU every step.
    """
    t = targets._data if isinstance(targets, Tensor) else targets
    on_host = backend.device_of(t) == "cpu"
    if on_host:
        t = np.asarray(t)
    if scores.ndim != 2:
        raise ShapeError(f"{name}: input must be [N, C], got shape {scores.shape}")
    if t.ndim != 1 or t.shape[0] != scores.shape[0]:
        raise ShapeError(
            f"{name}: targets must be [N] = [{scores.shape[0]}] class indices, got shape "
            f"{tuple(t.shape)}"
        )
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{name}: targets must be integer class indices, not {t.dtype}")
    if t.dtype not in (np.int64, np.uint8):  # (PyTorch's rule and text: int32 is refused)
        raise DTypeError(f"expected target dtype to be Long or Byte, but got "
                         f"{torch_scalar_name(t.dtype)}")
    if t.size and (on_host or not checked_by_kernel):
        kept = t if ignore_index is None else t[t != ignore_index]
        lo, hi = (int(kept.min()), int(kept.max())) if kept.size else (0, 0)
        if lo < 0 or hi >= scores.shape[1]:
            raise IndexRangeError(f"{name}: targets must lie in [0, {scores.shape[1]}), got "
                                  f"values from {lo} to {hi}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {reduction!r}; use one of {_REDUCTIONS}")
    return backend.get_array_module(scores._data).asarray(t)


def cross_entropy(input: Tensor, target: Tensor | Any, weight: Tensor | None = None,  # noqa: A002
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of ``input`` logits ``[N, C]`` against integer class ``target [N]``, or
    against class probabilities ``target [N, C]`` (a float tensor of the input's shape).
    As in PyTorch, ``input`` may also be unbatched, ``[C]`` (``target []``), or have more
    dimensions, ``[N, C, d1, ...]`` (``target [N, d1, ...]``, one class per position;
    ``"none"`` returns the loss in that shape, ``"mean"`` averages over every position).

    ``reduction`` is ``"mean"`` (over the batch, the default), ``"sum"`` or ``"none"``;
    ``weight [C]`` weighs each class (a weighted mean divides by the targets' total weight),
    targets equal to ``ignore_index`` count for nothing, and ``label_smoothing`` mixes the
    targets with the uniform distribution, all as in PyTorch. ``size_average`` / ``reduce``:
    PyTorch's deprecated spelling of ``reduction`` (:func:`_legacy_reduction`).

    Plain class targets take the fused kernel (log-softmax and NLL in one node). A target
    outside ``[0, C)`` raises a ValueError (an IndexError too, PyTorch's type), by this call
    when the targets are in host memory (a NumPy array or a CPU tensor). Targets already on
    the GPU would have to be copied back to be checked here, a wait for the GPU every step;
    instead the kernel checks them and the
    error is raised *later*: by a later ``cross_entropy`` call on the GPU, at most
    ``tinytrain.kernels.cuda.CHECK_DEPTH`` (4) calls after the bad one, or by
    ``tinytrain.kernels.cuda.check_errors()``; the bad call's loss is NaN. The GPU kernel
    itself skips targets equal to the default ``ignore_index`` (-100); any other
    ``ignore_index`` takes the general path.
    """
    reduction = _legacy_reduction("cross_entropy", size_average, reduce, reduction)
    _floating("cross_entropy: the logits", input)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    input, target, shape = _as_rows("cross_entropy", input, target)  # noqa: A001
    if _is_probabilities(input, target):
        loss = _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
        return _unflatten_none(loss, reduction, shape)
    fused = weight is None and not label_smoothing and ignore_index == -100
    t = _class_targets("cross_entropy", input, target, reduction, checked_by_kernel=fused,
                       ignore_index=ignore_index)  # (only the fused kernel checks the range)
    host = backend.device_of(t) == "cpu"
    if fused and not (host and t.size and bool((t == ignore_index).any())):
        loss = O.CrossEntropy.apply(input, t, reduction)
    else:
        loss = _nll(input.log_softmax(1), t, weight, ignore_index, reduction, label_smoothing,
                    "cross_entropy")
    return _unflatten_none(loss, reduction, shape)


def _as_rows(name: str, input: Tensor, target: Any) -> tuple[Tensor, Any, Any]:  # noqa: A002
    """PyTorch's other input layouts for a class loss as the ``[N, C]`` one: unbatched
    ``[C]`` (target ``[]``) and K-dimensional ``[N, C, d1, ...]`` (target ``[N, d1, ...]``),
    the class axis moved last and the rest flattened: ``[M, C]`` and ``[M]`` (class
    probabilities as targets: ``[M, C]``). Returns them and the shape a per-element loss
    (``reduction="none"``) takes back, or None for ``[N, C]`` (nothing to do)."""
    if input.ndim == 2 or input.ndim == 0:  # ([N, C] as is; 0-d is refused downstream)
        return input, target, None
    c = input.shape[0] if input.ndim == 1 else input.shape[1]
    shape = () if input.ndim == 1 else (input.shape[0], *input.shape[2:])
    soft = _is_probabilities(input, target)
    t_shape = tuple(np.shape(target)) if not hasattr(target, "shape") else tuple(target.shape)
    if not soft and t_shape != shape:
        raise ShapeError(f"{name}: for input of shape {input.shape} the targets must be class "
                         f"indices of shape {shape} (or probabilities of the input's shape), "
                         f"got shape {t_shape}")

    def rows(a: Any) -> Any:
        return a.reshape(1, c) if a.ndim == 1 else a.movedim(1, -1).reshape(-1, c)

    if soft:
        return rows(input), rows(target), shape
    t = target if hasattr(target, "reshape") else np.asarray(target)  # a list, say
    return rows(input), t.reshape(-1), shape


def _unflatten_none(loss: Tensor, reduction: str, shape: Any) -> Tensor:
    """A per-element loss of :func:`_as_rows`'s rows back in the targets' shape."""
    return loss.reshape(shape) if shape is not None and reduction == "none" else loss


def nll_loss(input: Tensor, target: Tensor | Any, weight: Tensor | None = None,  # noqa: A002
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer ``target [N]`` under log-probabilities
    ``input [N, C]`` (e.g. ``log_softmax`` output; or ``[C]`` and ``[N, C, d1, ...]`` as in
    :func:`cross_entropy`): ``-input[i, target[i]]`` (times
    ``weight[target[i]]``), averaged (``"mean"``: over the total weight), summed (``"sum"``)
    or per sample (``"none"``); targets equal to ``ignore_index`` count for nothing.
    ``nll_loss(log_softmax(x, 1), y)`` equals ``cross_entropy(x, y)``. ``size_average`` /
    ``reduce``: PyTorch's deprecated spelling of ``reduction`` (:func:`_legacy_reduction`).
    """
    reduction = _legacy_reduction("nll_loss", size_average, reduce, reduction)
    input, target, shape = _as_rows("nll_loss", input, target)  # noqa: A001
    t = _class_targets("nll_loss", input, target, reduction, ignore_index=ignore_index)
    if weight is None and not bool((t == ignore_index).any()):
        loss = O.NLLLoss.apply(input, t, reduction)
    else:
        loss = _nll(input, t, weight, ignore_index, reduction, name="nll_loss")
    return _unflatten_none(loss, reduction, shape)


def _class_weight(name: str, weight: Tensor | None, logp: Tensor) -> Any:
    """The class weights as a raw array ``[C]`` of the scores' dtype (ones if None)."""
    xp, c = backend.get_array_module(logp._data), logp.shape[1]
    if weight is None:
        return xp.ones(c, dtype=logp.dtype)
    w = weight._data if isinstance(weight, Tensor) else xp.asarray(weight)
    if tuple(w.shape) != (c,):
        raise ShapeError(f"{name}: weight must be [C] = [{c}] (one per class), got shape "
                         f"{tuple(w.shape)}")
    return backend.to_device(w, logp.device).astype(logp.dtype, copy=False)


def _nll(logp: Tensor, t: Any, weight: Tensor | None, ignore_index: int, reduction: str,
         label_smoothing: float = 0.0, name: str = "cross_entropy") -> Tensor:
    """PyTorch's weighted NLL with ignored targets and label smoothing, from ops on
    ``logp [N, C]`` (the slow path of ``cross_entropy`` / ``nll_loss``)."""
    xp = backend.get_array_module(logp._data)
    n, c = logp.shape
    w = _class_weight(name, weight, logp)
    keep = t != ignore_index
    safe = xp.where(keep, t, 0)
    w_t = Tensor(w[safe] * keep)  # each sample's weight, 0 if ignored
    kept = Tensor(keep)
    # an ignored row is left out by where(), not multiplied by 0: its logits may be -inf or
    # NaN (a masked vocabulary, padding), and -inf * 0 is NaN
    loss = -where(kept, logp[xp.arange(n), safe], 0.0) * w_t
    # Every target ignored: the mean is NaN (0 / 0) but the gradient zero, as in PyTorch
    # (dividing by the zero total would give 0 * inf = NaN gradients, and one optimizer
    # step on an all-padding batch would turn every weight NaN). So divide by 1 and add a
    # NaN that carries no gradient. Array ops only: no wait for a GPU.
    none_kept = ~keep.any()
    nan = Tensor(xp.where(none_kept, xp.nan, 0).astype(logp.dtype))

    def mean(total: Any) -> Tensor:
        return Tensor(xp.where(none_kept, 1, total).astype(logp.dtype))

    total = w_t._data.sum()
    if label_smoothing:
        smooth = where(kept, -(logp * Tensor(w)).sum(1), 0.0)
        if reduction == "mean":
            # PyTorch: each part divided by the total weight (by the count without weights)
            denom = total if weight is not None else keep.sum()
            return ((1 - label_smoothing) * loss.sum() / mean(total)
                    + label_smoothing / c * smooth.sum() / mean(denom) + nan)
        loss = (1 - label_smoothing) * loss + label_smoothing / c * smooth
    if reduction == "mean":
        return loss.sum() / mean(total) + nan
    return _reduce(loss, reduction, name)


def _is_probabilities(input: Tensor, target: Any) -> bool:  # noqa: A002
    return (isinstance(target, Tensor) and target.dtype.kind == "f"
            and target.shape == input.shape)


def _soft_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None,  # noqa: A002
                        reduction: str, label_smoothing: float) -> Tensor:
    """Cross-entropy against class probabilities ``target [N, C]``: ``-sum_c w_c y_c log p_c``
    per sample; the mean divides by N (weights or not), as in PyTorch."""
    if input.ndim != 2:
        raise ShapeError(f"cross_entropy: input must be [N, C], got shape {input.shape}")
    c = input.shape[1]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    w = _class_weight("cross_entropy", weight, input)
    return _reduce(-(input.log_softmax(1) * target * Tensor(w)).sum(1), reduction,
                   "cross_entropy")


def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,  # noqa: A002
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Mean (or sum, or none) of ``(input - target) ** 2``, element-wise.

    Shapes should match; as in PyTorch, broadcastable ones are broadcast with a warning.
    ``size_average`` / ``reduce``: PyTorch's deprecated spelling of ``reduction``
    (:func:`_legacy_reduction`), as in every loss below that PyTorch gives them.
    """
    reduction = _legacy_reduction("mse_loss", size_average, reduce, reduction)
    _warn_broadcast("mse_loss", input, target)
    return _reduce((input - target) ** 2, reduction, "mse_loss")


def _warn_broadcast(name: str, input: Tensor, target: Any) -> None:  # noqa: A002
    if isinstance(target, Tensor) and target.shape != input.shape:
        warnings.warn(  # (PyTorch's words; a size prints as a tuple)
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
            f"Please ensure they have the same size.", stacklevel=3)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,  # noqa: A002
            reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Mean (or sum, or none) of ``|input - target|``, element-wise."""
    reduction = _legacy_reduction("l1_loss", size_average, reduce, reduction)
    _warn_broadcast("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction, "l1_loss")


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,  # noqa: A002
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Per element ``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``
    (``d = input - target``; ``beta = 0`` is the L1 loss)."""
    reduction = _legacy_reduction("smooth_l1_loss", size_average, reduce, reduction)
    _warn_broadcast("smooth_l1_loss", input, target)
    if beta < 0:
        raise InvalidArgument(f"smooth_l1_loss does not support negative values for beta "
                              f"(got {beta})")
    d = input - target
    if beta == 0:
        return _reduce(d.abs(), reduction, "smooth_l1_loss")
    a, q = d.abs(), d.clamp(-beta, beta)  # q: the quadratic part's d, finite where unused
    return _reduce(where(a < beta, 0.5 * q * q / beta, a - 0.5 * beta), reduction,
                   "smooth_l1_loss")


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0) -> Tensor:
    """Per element ``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    _warn_broadcast("huber_loss", input, target)
    if not delta > 0:
        raise InvalidArgument(f"huber_loss does not support non-positive values for delta "
                              f"(got {delta})")
    d = input - target
    a, q = d.abs(), d.clamp(-delta, delta)  # (an infinite d gives no NaN gradient)
    return _reduce(where(a < delta, 0.5 * q * q, delta * (a - 0.5 * delta)), reduction,
                   "huber_loss")


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,  # noqa: A002
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """The Kullback-Leibler divergence of ``input`` (log-probabilities) from ``target``
    (probabilities; log-probabilities with ``log_target=True``), per element
    ``target * (log(target) - input)``; a target of 0 adds 0 (PyTorch's ``xlogy``), and
    there the target's gradient, should it need one, is finite (PyTorch's is NaN).

    ``reduction``: ``"mean"`` over all elements (PyTorch's default, which is not the KL
    divergence), ``"batchmean"`` (the sum over the batch size ``input.shape[0]``: the KL
    divergence per sample), ``"sum"`` or ``"none"``; ``"mean"`` warns, as PyTorch's. Shapes
    broadcast, as in PyTorch. ``size_average`` / ``reduce`` replace ``reduction`` (but
    ``"batchmean"`` still divides by the batch size afterwards, as in PyTorch).
    """
    applied = _legacy_reduction("kl_div", size_average, reduce, reduction)
    if reduction not in (*_REDUCTIONS, "batchmean"):
        raise ValueError(f"kl_div: unknown reduction {reduction!r}; use one of "
                         f"{(*_REDUCTIONS, 'batchmean')}")
    if reduction == "mean" and size_average is None and reduce is None:
        _warn("reduction: 'mean' divides the total loss by both the batch size and the support "
              "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
              "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
              "major release.")
    target = _as_operand(target, input, "kl_div")
    O.broadcast_shapes("kl_div", input.shape, target.shape)
    if log_target:
        loss = target.exp() * (target - input)
    else:  # (log of 1 where the target is 0: 0 * log(0) would be NaN, and its gradient too)
        loss = target * where(target == 0, 1, target).log() - target * input
    loss = _reduce(loss, "sum" if applied == "batchmean" else applied, "kl_div")
    return loss / input.shape[0] if reduction == "batchmean" and input.ndim else loss


def _reduce(loss: Tensor, reduction: str, name: str) -> Tensor:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {reduction!r}; use one of {_REDUCTIONS}")
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _legacy_reduction(name: str, size_average: bool | None, reduce: bool | None,
                      reduction: str) -> str:
    """``reduction``, or, when either of PyTorch's pre-1.0 arguments is given, the reduction
    they stand for, with PyTorch's deprecation warning (``torch.nn._reduction
    .legacy_get_string``): a None counts as True; ``reduce=False`` is ``"none"`` (one loss
    per element, whatever ``size_average`` says), else ``size_average=False`` is ``"sum"``,
    else ``"mean"``. Given, they win over ``reduction``, as in PyTorch.

    The one place every loss function and loss module turns them into a reduction.
    A string in their place (``F.mse_loss(x, y, "sum")``: PyTorch's third argument is
    ``size_average``, and PyTorch would quietly take the mean) is refused, naming the fix.
    """
    if size_average is None and reduce is None:
        return reduction
    for what, value in (("size_average", size_average), ("reduce", reduce)):
        if isinstance(value, str):
            raise TypeError(f"{name}: {what} must be a bool or None, got the string {value!r}; "
                            f"pass the reduction by keyword: reduction={value!r}")
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    legacy = "mean" if size_average and reduce else "sum" if reduce else "none"
    _warn(f"size_average and reduce args will be deprecated, please use reduction='{legacy}' "
          f"instead.")
    return legacy


def _same_shape(name: str, input: Tensor, target: Tensor) -> None:  # noqa: A002
    if not isinstance(target, Tensor) or target.shape != input.shape:
        raise ShapeError(f"{name}: target must be a Tensor of the input's shape {input.shape}, "
                         f"got {getattr(target, 'shape', type(target).__name__)}")


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,  # noqa: A002
                                     weight: Tensor | None = None,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of ``target`` (probabilities in [0, 1], the input's shape) under
    logits ``input``: ``-(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x)))``, computed stably.

    ``weight`` (broadcast to the input's shape) scales each element's loss; ``pos_weight``
    (broadcast along the last dim, e.g. ``[C]`` for ``[N, C]``) scales the positive term,
    ``-p y log sigmoid(x)``, as in PyTorch. The loss has the dtype of a floating ``target``,
    as PyTorch's (which computes it in place in a copy of the target): float64 logits with
    ``labels.float()`` give a float32 loss (the input's gradient stays float64). An integer
    or bool target (class labels as they come) raises DTypeError (a RuntimeError, as
    PyTorch's): convert with ``target.float()``.
    """
    name = "binary_cross_entropy_with_logits"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _same_shape(name, input, target)
    _floating(name, input)
    if target.dtype.kind != "f":  # (PyTorch computes the loss into a copy of the target)
        raise DTypeError(f"{name}: result type {torch_scalar_name(input.dtype)} can't be cast "
                         f"to the desired output type {torch_scalar_name(target.dtype)}: the "
                         f"target must be floating (probabilities), got {target.dtype}; "
                         f"pass target.float()")
    out_dtype = target.dtype
    target = target.to(dtype=input.dtype)
    loss = O.BCEWithLogits.apply(input, target)  # softplus(-x) + (1 - y) x
    if pos_weight is not None:  # the positive term, -y log sigmoid(x) = y softplus(-x), p times
        loss = loss + (_as_weight(name, "pos_weight", pos_weight, input) - 1) * target \
            * softplus(-input)
    if weight is not None:
        loss = loss * _as_weight(name, "weight", weight, input)
    if loss.dtype != out_dtype:
        loss = loss.to(dtype=out_dtype)
    return _reduce(loss, reduction, name)


def binary_cross_entropy(input: Tensor, target: Tensor,  # noqa: A002
                         weight: Tensor | None = None, size_average: bool | None = None,
                         reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of ``target`` under probabilities ``input`` (same shape, both in
    [0, 1]); each log is clamped at -100, as in PyTorch, so 0 and 1 give finite losses.
    ``weight`` (broadcast to the input's shape) scales each element's loss."""
    name = "binary_cross_entropy"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _same_shape(name, input, target)
    if input.numel() and not ((input._data >= 0) & (input._data <= 1)).all():
        raise InvalidArgument(f"{name}: all elements of input should be between 0 and 1 "
                              "(probabilities; for logits use binary_cross_entropy_with_logits)")
    if target.dtype.kind != "f":
        raise DTypeError(f"{name}: Found dtype {torch_scalar_name(target.dtype)} but expected "
                         f"{torch_scalar_name(input.dtype)}: the target must be floating "
                         f"(probabilities), got {target.dtype}; pass target.float()")
    if target.numel() and not ((target._data >= 0) & (target._data <= 1)).all():
        raise InvalidArgument(f"{name}: all elements of target should be between 0 and 1 "
                              f"(labels such as -1/1, or a 0-255 mask, need mapping to 0/1 "
                              f"first)")
    target = target.to(dtype=input.dtype)
    loss = O.BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * _as_weight(name, "weight", weight, input)
    return _reduce(loss, reduction, name)


def _as_weight(name: str, what: str, w: Any, input: Tensor) -> Tensor:  # noqa: A002
    """A per-element loss weight as a Tensor of the input's dtype, checked to broadcast to
    the input's shape (the loss keeps the input's shape)."""
    if isinstance(w, str):  # (reduction passed third, where PyTorch's weight goes)
        raise TypeError(f"{name}: {what} must be a Tensor, got the string {w!r}; pass the "
                        f"reduction by keyword: reduction={w!r}")
    w = w if isinstance(w, Tensor) else tensor(w, device=input.device)
    if not _broadcasts(w.shape, input.shape):
        raise ShapeError(f"{name}: {what} of shape {tuple(w.shape)} does not broadcast to "
                         f"the input's shape {input.shape}")
    return w.to(dtype=input.dtype)


def _tensor_args(name: str, **args: Any) -> None:
    """Each of ``args`` must be a Tensor: a TypeError naming the first that is not."""
    for what, t in args.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{what}' must be a Tensor, not "
                            f"{type(t).__name__}")


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor,
                          margin: float = 0.0, size_average: bool | None = None,
                          reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Whether pairs of embeddings are alike (``target`` 1) or not (-1), by their cosine
    similarity ``cos``: ``1 - cos`` for a 1, ``max(0, cos - margin)`` for a -1, 0 for any
    other target. ``input1``, ``input2`` ``[N, D]`` with ``target [N]``, or ``[D]`` with a
    0-d target; the loss is ``[N]`` (``reduction="none"``), or its mean or sum.

    ``cos`` is PyTorch's formula for this loss, ``x1.x2 / sqrt((|x1|^2 + 1e-12)
    (|x2|^2 + 1e-12))``, not :func:`cosine_similarity`'s (which clamps each norm at 1e-8):
    the two differ near zero vectors, and this keeps the values and gradients PyTorch's.
    """
    name = "cosine_embedding_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _tensor_args(name, input1=input1, input2=input2, target=target)
    if target.ndim not in (0, 1):
        raise ShapeError(f"{name}: 0D or 1D target tensor expected, multi-target not "
                         f"supported (got target of shape {target.shape})")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise ShapeError(f"{name}: {target.ndim}D target tensor expects {target.ndim + 1}D "
                         f"input tensors, but found inputs with sizes {list(input1.shape)} "
                         f"and {list(input2.shape)}.")
    dim = target.ndim  # (the feature dimension)
    dot = (input1 * input2).sum(dim)
    squares = ((input1 * input1).sum(dim) + 1e-12) * ((input2 * input2).sum(dim) + 1e-12)
    cos = dot / squares.sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, (cos - margin).clamp(min=0),
                                                     0.0)
    return _reduce(loss, reduction, name)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """Whether ``input1`` should rank above ``input2`` (``target`` 1) or below (-1), per
    element: ``max(0, -target * (input1 - input2) + margin)``. The three tensors have the
    same number of dimensions (and broadcast together, as in PyTorch)."""
    name = "margin_ranking_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _tensor_args(name, input1=input1, input2=input2, target=target)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise ShapeError(f"{name} : All input tensors should have same dimension but got "
                         f"sizes: input1: {input1.shape}, input2: {input2.shape}, target: "
                         f"{target.shape}")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction, name)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,  # noqa: A002
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """For distances ``input`` between pairs that are alike (``target`` 1) or not (-1), per
    element: ``input`` for a 1, ``max(0, margin - input)`` for a -1 (and their sum for any
    other target, as PyTorch's formula gives). ``input`` and ``target`` broadcast."""
    name = "hinge_embedding_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _tensor_args(name, input=input, target=target)
    loss = where(target != 1, (margin - input).clamp(min=0), 0.0) + where(target != -1, input,
                                                                            0.0)
    return _reduce(loss, reduction, name)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` per triplet, ``d`` the
    :func:`pairwise_distance` (``p``-norm over the last dimension, ``eps`` added to the
    difference): ``[N, D]`` inputs give ``[N]`` losses (``reduction="none"``; ``[D]`` give
    one). ``swap``: ``d(anchor, negative)`` is replaced by ``d(positive, negative)`` where
    that is smaller (the "distance swap" of Balntas et al. 2016). ``margin`` must be > 0."""
    name = "triplet_margin_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _tensor_args(name, anchor=anchor, positive=positive, negative=negative)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {reduction!r}; use one of {_REDUCTIONS}")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"The anchor, positive, and negative tensors are expected to have the "
                         f"same number of dimensions, but got: anchor {anchor.ndim}D, positive "
                         f"{positive.ndim}D, and negative {negative.ndim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction, name)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (into ``x``
    itself with ``inplace=True``).

    The mask is a hash of (a seed drawn from tinytrain's generator, the element's index),
    computed where ``x`` lives: the same seed drops the same elements on the CPU and the GPU.
    A dropped element is exactly 0, also where ``x`` is NaN or inf (PyTorch multiplies by the
    mask, which keeps a NaN: a NaN activation then shows only where it was kept).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:  # every element dropped (and no 1/(1-p) to scale by), as PyTorch
        fn = lambda t: t * 0.0 if t.dtype.kind == "f" else t.new_zeros(t.shape)  # noqa: E731
    else:
        _floating("dropout", x)  # (an integer tensor could not hold the kept values' 1/(1-p))
        seed = int(default_generator().integers(0, 2**64, dtype=np.uint64))  # one per call
        fn = lambda t: O.Dropout.apply(t, p, seed)  # noqa: E731
    return x._inplace("dropout_", fn) if inplace else fn(x)


def _feature_dropout(x: Tensor, p: float, training: bool, inplace: bool) -> Tensor:
    """PyTorch's ``feature_dropout``: zero each feature ``x[n, c]`` (``[N, C, *]``, the mask
    broadcast over the other dims) with probability ``p``, scale the rest by ``1/(1-p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if x.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    _floating("dropout", x)
    if p == 1.0:
        mask = Tensor(backend.to_device(np.zeros((), x.dtype), x.device))
    else:
        keep = default_generator().random(tuple(x.shape[:2]) + (1,) * (x.ndim - 2)) >= p
        mask = Tensor(backend.to_device((keep / (1 - p)).astype(x.dtype), x.device))
    return x.mul_(mask) if inplace else x * mask


def _unbatched_feature_dropout(x: Tensor, p: float, training: bool, inplace: bool,
                               batched: bool) -> Tensor:
    if batched:
        return _feature_dropout(x, p, training, inplace)
    if inplace:  # (x itself, through a view with a batch dim of 1)
        _feature_dropout(x.unsqueeze(0), p, training, True)
        return x
    return _feature_dropout(x.unsqueeze(0), p, training, False).squeeze(0)


def _deprecated_dims(name: str, ndim: int, spatial: int) -> None:
    warnings.warn(f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will "
                  "result in an error in a future release. To retain the behavior and silence "
                  f"this warning, please use dropout instead. Note that {name} exists to "
                  f"provide channel-wise dropout on inputs with {spatial} spatial dimensions, "
                  "a channel dimension, and an optional batch dimension (i.e. "
                  f"{spatial + 1}D or {spatial + 2}D inputs).", stacklevel=3)


def dropout1d(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
              ) -> Tensor:
    """Zero each channel ``x[n, c]`` of ``[N, C, L]`` (or ``[C, L]``) with probability ``p``
    and scale the rest by ``1/(1-p)``; other ranks raise RuntimeError, as PyTorch's."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {x.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout "
                           "on inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs).")
    return _unbatched_feature_dropout(x, p, training, inplace, x.ndim == 3)


def dropout2d(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
              ) -> Tensor:
    """Zero each channel ``x[n, c]`` (``[N, C, H, W]``) with probability ``p`` and scale the
    rest by ``1/(1-p)`` (into ``x`` itself with ``inplace=True``); the channel mask is drawn
    from tinytrain's generator. As PyTorch's: a 3-D input is taken as ``[N, C, L]`` (it
    warns), and other ranks warn and drop ``x[n, c]`` of ``[N, C, *]`` (a 2-D input: each
    element, as ``dropout``)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if x.ndim not in (3, 4):
        _deprecated_dims("dropout2d", x.ndim, 2)
    if x.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim. This behavior will change "
                      "in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise "
                      "dropout behavior, please switch to using dropout1d instead.",
                      stacklevel=2)
    return _feature_dropout(x, p, training, inplace)


def dropout3d(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
              ) -> Tensor:
    """Zero each channel ``x[n, c]`` of ``[N, C, D, H, W]`` (or ``[C, D, H, W]``) with
    probability ``p`` and scale the rest by ``1/(1-p)``; other ranks warn, as PyTorch's."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if x.ndim not in (4, 5):
        _deprecated_dims("dropout3d", x.ndim, 3)
    return _unbatched_feature_dropout(x, p, training, inplace, x.ndim == 5)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Integer classes ``[*]`` -> int64 ``[*, num_classes]`` with a 1 at each class
    (``num_classes=-1``: the largest class + 1)."""
    t = tensor._data if isinstance(tensor, Tensor) else np.asarray(tensor)
    if t.dtype.kind not in "iu":
        raise DTypeError(f"one_hot is only applicable to index tensor of integer type, got "
                         f"{t.dtype}")
    if t.size and int(t.min()) < 0:
        raise InvalidArgument("one_hot: Class values must be non-negative.")
    top = int(t.max()) + 1 if t.size else 0
    if num_classes == -1:
        num_classes = top
    elif top > num_classes:
        raise InvalidArgument(f"one_hot: Class values must be smaller than num_classes "
                              f"({num_classes}), got {top - 1}")
    xp = backend.get_array_module(t)
    return Tensor((t[..., None] == xp.arange(num_classes)).astype(int64))


_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def pad(input: Tensor, pad: tuple[int, ...], mode: str = "constant",  # noqa: A002
        value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dimensions: ``pad = (left, right, top, bottom, ...)``
    starts from the last dimension, as PyTorch's. Negative sizes crop: reflect and replicate
    crop what they padded (PyTorch's order), constant and circular the input, which must
    then have the elements to crop. ``mode`` is ``"constant"`` (with ``value``, default 0),
    ``"reflect"``, ``"replicate"`` or ``"circular"``."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding length must be even and at most 2 * {input.ndim}, got "
                         f"{len(pad)} ({tuple(pad)})")
    for i, p in enumerate(pad):
        if isinstance(p, bool) or not hasattr(type(p), "__index__"):  # (not 1.5 taken as 1)
            raise TypeError(f"pad(): argument 'pad' must be tuple of ints, but found element "
                            f"of type {type(p).__name__} at pos {i}")
    k = len(pad) // 2  # (the other modes pad the last 1, 2 or 3 dims of a batch or a sample)
    if mode in _PAD_MODES and not (k <= 3 and k + 1 <= input.ndim <= k + 2):
        raise NotImplementedError(
            f"pad: padding size {len(pad)} is not supported for a {input.ndim}D input in mode "
            f"{mode!r}: it takes padding size 2, 4 or 6 for the last 1, 2 or 3 dimensions of "
            f"an input with one or two more (channels, and a batch or not)")
    widths = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        widths[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    for axis, ((lo, hi), n) in enumerate(zip(widths, input.shape)):
        # (reflect and replicate crop what they padded, the others the input: see below)
        there = n + (0 if mode in ("constant", "circular") else max(lo, 0) + max(hi, 0))
        if n + lo + hi < 0 or max(-lo, 0) + max(-hi, 0) > there:
            raise ShapeError(f"pad: padding {lo, hi} of dimension {axis} (size {n}) crops more "
                             f"than the {there} elements there")
        if mode == "reflect" and (lo or hi) and (lo >= n or hi >= n):
            raise ShapeError(f"pad: reflect padding {lo, hi} must be smaller than dimension "
                             f"{axis}'s size {n}")
        if mode == "circular" and (lo > n or hi > n):
            raise ShapeError(f"pad: circular padding {lo, hi} can wrap at most once around "
                             f"dimension {axis} (size {n})")
    if mode != "constant" and mode not in _PAD_MODES:
        raise ValueError(f"pad: unknown mode {mode!r}; use 'constant', "
                         f"{', '.join(repr(m) for m in _PAD_MODES)}")
    if mode != "constant" and value is not None and value != 0:
        raise InvalidArgument(f"pad: padding mode {mode!r} doesn't take a value, got {value}")
    def crop(t: Tensor) -> Tensor:
        if not any(lo < 0 or hi < 0 for lo, hi in widths):
            return t
        return t[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(widths, t.shape))]

    # The order of PyTorch's: reflect and replicate pad the positive sizes from the whole input,
    # then crop the negative ones; circular wraps around what the crop leaves.
    grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in widths)
    out = crop(input) if mode == "circular" else input
    if mode == "constant":
        fill = 0 if value is None else value
        out = O.Pad.apply(out, grow, out.dtype.type(fill)) if any(map(any, grow)) else out
    else:
        for axis, (lo, hi) in enumerate(grow):  # each padded axis: gather the right entries
            if lo or hi:
                source = np.pad(np.arange(out.shape[axis]), (lo, hi), mode=_PAD_MODES[mode])
                index = (slice(None),) * axis + (backend.to_device(source, out.device),)
                op = O.Index if mode == "circular" else O.PadIndex  # (PyTorch's graphs)
                out = op.apply(out, index)
    return out if mode == "circular" else crop(out)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,  # noqa: A002
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight [num, dim]`` for the integer indices ``input [*]``: ``[*, dim]``.
    The row ``padding_idx`` gets no gradient. With ``max_norm``, the rows looked up whose
    ``norm_type``-norm exceeds it are first scaled to ``max_norm`` in ``weight`` itself (in
    place, outside the graph), as PyTorch's ``embedding_renorm_``."""
    if scale_grad_by_freq or sparse:
        raise ValueError("embedding: scale_grad_by_freq and sparse are not supported in "
                         "tinytrain; leave them out")
    idx = input._data if isinstance(input, Tensor) else np.asarray(input)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"embedding: indices must be integers, got {idx.dtype}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: 'weight' must be 2-D [num_embeddings, dim], got shape "
                         f"{weight.shape}")
    n = weight.shape[0]
    if padding_idx is not None and not -n <= padding_idx < n:
        raise AssertionError(f"Padding_idx must be within num_embeddings (embedding: "
                             f"padding_idx {padding_idx}, {n} embeddings)")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexRangeError(f"embedding: index out of range in self: indices from "
                              f"{int(idx.min())} to {int(idx.max())} for {n} embeddings")
    idx = backend.to_device(idx, weight.device)
    if max_norm is not None:
        _renorm_rows(weight, idx, max_norm, norm_type)
    return O.Embedding.apply(weight, idx, None if padding_idx is None else padding_idx % n)


def _renorm_rows(weight: Tensor, idx: Any, max_norm: float, norm_type: float) -> None:
    """Scale each row of ``weight`` that ``idx`` names by ``max_norm / (norm + 1e-7)`` where
    its norm exceeds ``max_norm``, in place (a new version: a graph that saved the old
    rows refuses to run backward). The norm in the weight's dtype, the scale in float64
    rounded to it, as PyTorch's CPU kernel."""
    xp = backend.get_array_module(weight._data)
    rows = xp.unique(idx.reshape(-1))
    with no_grad():
        norms = Tensor(weight._data[rows]).norm(norm_type, 1)._data.astype(np.float64)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(weight.dtype)
    weight._data[rows] = weight._data[rows] * scale[:, None]
    weight._version_counter[0] += 1


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:  # noqa: A002
    """``input / max(norm_p(input, dim), eps)``: unit vectors along ``dim``."""
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps)


def _same_precision(name: str, input: Tensor, *params: Tensor | None) -> None:  # noqa: A002
    """float32 and float64 must not mix (PyTorch's "mixed dtype" error); a float16 input
    with float32 parameters is mixed precision, which PyTorch allows (the result is then
    float16 again: :func:`_as_input`)."""
    if input.dtype == np.float16 and all(p is None or p.dtype == np.float32 for p in params):
        return
    check_same_dtype(name, input, *params)


def _opmath(input: Tensor) -> Tensor:  # noqa: A002
    """A float16 input in float32, where a normalisation computes: PyTorch's "opmath" (the
    squares of values above 256 overflow float16, and a variance of inf normalises every
    value to 0); :func:`_as_input` rounds the result to float16 once."""
    return input.to(dtype=np.float32) if input.dtype == np.float16 else input


def _as_input(out: Tensor, input: Tensor) -> Tensor:  # noqa: A002
    """A mixed-precision result in the input's dtype (float16), as PyTorch gives it."""
    return out if out.dtype == input.dtype else out.to(dtype=input.dtype)


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last dims ``normalized_shape`` to mean 0 and variance 1 (biased),
    then scale by ``weight`` and shift by ``bias`` (both of ``normalized_shape``)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if input.shape[input.ndim - k:] != shape or k > input.ndim:
        raise ShapeError(f"layer_norm: Given normalized_shape={list(shape)}, expected input with "
                         f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != shape:
            raise ShapeError(f"layer_norm: Expected {name} to be of same shape as "
                             f"normalized_shape {list(shape)}, but got {name} of shape "
                             f"{list(t.shape)}")
    _same_precision("layer_norm", input, weight, bias)
    axes = tuple(range(input.ndim - k, input.ndim))
    out = O.Normalize.apply(_opmath(input), weight, bias, axes, eps, None, [])
    return _as_input(out, input)  # (contiguous, as PyTorch's layer_norm output)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each sample's channels in ``num_groups`` groups: ``input [N, C, *]`` seen as
    ``[N, G, C/G * prod(*)]``, each group to mean 0 and variance 1 (biased), as
    :func:`layer_norm` does over its last dims; then scale by ``weight [C]`` and shift by
    ``bias [C]`` per channel. Independent of the batch, so it trains with any batch size."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise ShapeError(f"group_norm: expected input [N, C, *], got "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    n, c = input.shape[:2]
    if num_groups < 1 or c % num_groups:
        raise ShapeError(f"Expected number of channels in input to be divisible by num_groups, "
                         f"but got input of shape {list(input.shape)} and num_groups="
                         f"{num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"group_norm: Expected {name} to be a vector of size equal to the "
                             f"number of channels in input ({c}), but got {name} of shape "
                             f"{list(t.shape)} (input {list(input.shape)})")
    _same_precision("group_norm", input, weight, bias)
    grouped = input.reshape(n, num_groups, math.prod(input.shape[1:]) // num_groups)
    out = layer_norm(grouped, grouped.shape[2:], eps=eps).reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    return _as_input(out + bias.reshape(shape) if bias is not None else out, input)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,  # noqa: A002
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of ``input [N, C, *]`` to mean 0 and variance 1, then scale by
    ``weight [C]`` and shift by ``bias [C]``.

    ``training``: with the batch's statistics over every axis but 1 (the variance biased),
    and the running ones updated in place, ``running = (1 - momentum) running +
    momentum batch`` (the variance unbiased), as PyTorch does. Otherwise with
    ``running_mean`` / ``running_var``.
    """
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected input [N, C, *], got shape {input.shape}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise ShapeError(f"batch_norm: {name} should contain {c} elements (one per "
                             f"channel of input {list(input.shape)}), not shape {list(t.shape)}")
    _same_precision("batch_norm", input, weight, bias)
    shape = (1, c) + (1,) * (input.ndim - 2)
    axes = (0, *range(2, input.ndim))
    count = input.numel() // max(c, 1)
    if training and count == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {list(input.shape)}")
    x = _opmath(input)
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: running_mean and running_var are needed when not "
                         "training")
    params = [None if t is None else t.reshape(shape) for t in (weight, bias)]
    if training and count == 0:  # an empty batch: an empty output, no statistics (PyTorch)
        out = x * params[0] if weight is not None else x
        return _as_input(out + params[1] if bias is not None else out, input)
    if training:
        moments: list = []
        out = O.Normalize.apply(x, *params, axes, eps, None, moments)
        with no_grad():
            mean, var = (Tensor(m.reshape(c)) for m in moments)
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(var * (momentum * count / (count - 1)))
    elif running_mean.requires_grad or running_var.requires_grad:  # (not buffers: composed,
        out = (x - running_mean.reshape(shape)) / (running_var.reshape(shape) + eps).sqrt()
        out = out * params[0] if weight is not None else out  # so they get gradients too)
        out = out + params[1] if bias is not None else out
    else:
        stats = (running_mean._data.reshape(shape), running_var._data.reshape(shape))
        out = O.Normalize.apply(x, *params, axes, eps, stats, None)
    return _as_input(out, input)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,  # noqa: A002
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each sample's each channel of ``input [N, C, *]`` over its positions
    ``*`` (mean 0, biased variance 1), then scale by ``weight [C]`` and shift by ``bias
    [C]``: :func:`batch_norm` of ``[1, N*C, *]``, as PyTorch computes it.

    ``use_input_stats=False`` normalises with ``running_mean`` / ``running_var`` instead.
    With ``use_input_stats`` and running statistics given, they are updated in place with
    the batch's per-sample statistics averaged over the samples, ``running = (1 - momentum)
    running + momentum mean_n(stat)`` (the variance unbiased), as in PyTorch.
    """
    _tensor_args("instance_norm", input=input)
    if input.ndim < 2:
        raise ShapeError(f"instance_norm: expected input [N, C, *], got shape {input.shape}")
    n, c = input.shape[:2]
    if use_input_stats and math.prod(input.shape[2:]) <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{list(input.shape)}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise ShapeError("Expected running_mean and running_var to be defined when "
                         "use_input_stats is false")
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise ShapeError(f"instance_norm: {name} should contain {c} elements (one per "
                             f"channel of input {list(input.shape)}), not shape "
                             f"{list(t.shape)}")
    _same_precision("instance_norm", input, weight, bias)
    stats = [None if t is None else t.detach().reshape(c).repeat(n)
             for t in (running_mean, running_var)]  # (one copy per sample, as PyTorch's)
    flat = input.reshape(1, n * c, *input.shape[2:])
    out = batch_norm(flat, stats[0], stats[1], None, None, use_input_stats, momentum,
                     eps).reshape(input.shape)
    if use_input_stats:
        with no_grad():
            for t, new in zip((running_mean, running_var), stats):
                if t is not None:
                    t.copy_(new.reshape(n, c).mean(0).reshape(t.shape))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    return _as_input(out + bias.reshape(shape) if bias is not None else out, input)


# --------------------------------------------------------------------------- more activations


def relu_(input: Tensor) -> Tensor:  # noqa: A002
    """:func:`relu` written into ``input`` itself."""
    return relu(input, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    """:func:`elu` written into ``input`` itself."""
    return elu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    """:func:`leaky_relu` written into ``input`` itself."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    """:func:`hardtanh` written into ``input`` itself."""
    return hardtanh(input, min_val, max_val, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    """:func:`celu` written into ``input`` itself."""
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:  # noqa: A002
    """:func:`selu` written into ``input`` itself."""
    return selu(input, inplace=True)


def threshold(input: Tensor, threshold: float, value: float,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """``input`` where ``input > threshold``, else ``value`` (the gradient is 1 where the
    input is kept, 0 elsewhere; a NaN is kept, as in PyTorch). Integer inputs keep their
    dtype (``value`` cast to it)."""
    _tensor_args("threshold", input=input)
    if input.dtype.kind == "b":
        raise DTypeError(f"threshold: expected a numeric tensor, got {input.dtype}")
    fill = value if input.dtype.kind == "f" else int(value)

    def fn(t: Tensor) -> Tensor:
        a = t._data
        below = a <= threshold
        value = backend.get_array_module(a).where(below, a.dtype.type(fill), a)
        return O.PiecewiseLinear.apply(t, value, ~below)

    return input._inplace("threshold_", fn) if inplace else fn(input)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    """:func:`threshold` written into ``input`` itself."""
    return globals()["threshold"](input, threshold, value, inplace=True)


def _lambd(name: str, x: Tensor, lambd: float, check: bool) -> None:
    _floating(name, x)
    top = float(np.finfo(x.dtype).max)
    if check and not 0 <= lambd <= top:
        raise InvalidArgument(f"lambda must be in range [0, {top:g}] for input dtype "
                              f"{torch_scalar_name(x.dtype)}, but found {lambd:g}")


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between (gradient 1
    outside, 0 inside; a NaN stays NaN with gradient 0, as in PyTorch). ``lambd >= 0``."""
    _lambd("softshrink", input, lambd, True)
    a = input._data
    xp, above, below = backend.get_array_module(a), a > lambd, a < -lambd
    value = xp.where(above, a - lambd, xp.where(below, a + lambd, _nan_or_zero(a)))
    return O.PiecewiseLinear.apply(input, value, above | below)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0 (gradient 1 and 0; a NaN stays NaN with gradient
    0, as PyTorch's vectorised kernel gives: its scalar loop, which handles the last few
    elements of a tensor, gives 1, and -0.0 for softshrink's negative middle)."""
    _lambd("hardshrink", input, lambd, False)
    a = input._data
    outside = (a > lambd) | (a < -lambd)
    value = backend.get_array_module(a).where(outside, a, _nan_or_zero(a))
    return O.PiecewiseLinear.apply(input, value, outside)


def _nan_or_zero(a: Any) -> Any:
    """0, or NaN where ``a`` (an array) is NaN (the shrinks' middle piece)."""
    return backend.get_array_module(a).where(a != a, a, a.dtype.type(0))


def tanhshrink(input: Tensor) -> Tensor:  # noqa: A002
    """``x - tanh(x)`` (integers give the default float dtype, as PyTorch)."""
    _tensor_args("tanhshrink", input=input)
    x = input._float_input()
    return x - x.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    """The gated linear unit: ``input`` split in halves ``a, b`` along ``dim``,
    ``a * sigmoid(b)``; ``[*, 2n, *] -> [*, n, *]``."""
    _floating("glu", input)
    if input.ndim == 0:
        raise ShapeError("glu does not support scalars because halving size must be even")
    if not -input.ndim <= dim < input.ndim:
        raise IndexRangeError(f"Dimension out of range (expected to be in range of "
                              f"[{-input.ndim}, {input.ndim - 1}], but got {dim})")
    dim %= input.ndim
    if input.shape[dim] % 2:
        raise ShapeError(f"Halving dimension must be even, but dimension {dim} is size "
                         f"{input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """A sample from the Gumbel-softmax (concrete) distribution over ``dim``:
    ``softmax((logits + g) / tau)``, ``g = -log(E)`` with ``E`` standard exponential draws
    from tinytrain's generator (seeded by ``tt.manual_seed``). ``hard=True`` returns the
    one-hot of the sample's argmax, with the soft sample's gradient (straight-through:
    ``y_hard - y_soft.detach() + y_soft``). ``eps`` is unused, as in PyTorch (kept for its
    signature)."""
    _floating("gumbel_softmax", logits)
    if eps != 1e-10:
        _warn("`eps` parameter is deprecated and has no effect.")
    draws = default_generator().exponential(size=logits.shape)
    gumbels = Tensor(backend.to_device(-np.log(draws).astype(logits.dtype), logits.device))
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = y_soft.new_zeros(y_soft.shape).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
             eps: float | None = None) -> Tensor:
    """Root-mean-square normalisation over the last dims ``normalized_shape``:
    ``input / sqrt(mean(input^2) + eps) * weight`` (``weight`` of ``normalized_shape``, or
    none). ``eps=None`` is the machine epsilon of the input's dtype
    (``tt.finfo(dtype).eps``), as in PyTorch. No mean is subtracted (unlike
    :func:`layer_norm`). float16 inputs are computed in float32 (and ``eps=None`` is then
    float32's epsilon), as PyTorch's; the result has the input's dtype."""
    _floating("rms_norm", input)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k > input.ndim or input.shape[input.ndim - k:] != shape:
        raise ShapeError(f"rms_norm: Given normalized_shape={list(shape)}, expected input with "
                         f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise ShapeError(f"rms_norm: Expected weight to be of same shape as normalized_shape, "
                         f"but got weight of shape {list(weight.shape)} and normalized_shape = "
                         f"{list(shape)}")
    # float16 is computed in float32 (300 squared overflows float16), as PyTorch's opmath,
    # eps=None then float32's epsilon; the result has the input's dtype, whatever the weight's
    x = input.to(dtype=np.float32) if input.dtype == np.float16 else input
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    axes = tuple(range(input.ndim - k, input.ndim))
    out = x * ((x * x).mean(axes, keepdim=True) + eps).rsqrt()
    out = out if weight is None else out * weight
    return out if out.dtype == input.dtype else out.to(dtype=input.dtype)


def _pixel_args(name: str, x: Tensor, factor: int, what: str) -> None:
    _tensor_args(name, input=x)
    if not isinstance(factor, int | np.integer) or isinstance(factor, bool):
        raise TypeError(f"{name}(): argument '{what}' must be int, not {type(factor).__name__}")
    if factor <= 0:
        raise InvalidArgument(f"{name} expects a positive {what}, but got {factor}")
    if x.ndim < 3:
        raise ShapeError(f"{name} expects input to have at least 3 dimensions, but got input "
                         f"with {x.ndim} dimension(s)")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """``[*, C r^2, H, W] -> [*, C, H r, W r]`` (``r = upscale_factor``): each group of
    ``r^2`` channels becomes an ``r x r`` block of pixels (sub-pixel convolution)."""
    r = upscale_factor
    _pixel_args("pixel_shuffle", input, r, "upscale_factor")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible "
                         f"by the square of upscale_factor, but input.size(-3)={c} is not "
                         f"divisible by {r * r}")
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4,  # noqa: A002
                        beta: float = 0.75, k: float = 1.0) -> Tensor:
    """AlexNet's normalisation across channels: ``x / (k + alpha * mean(x^2))^beta``, the
    mean over the ``size`` neighbouring channels (zeros beyond the edges), for ``[N, C, *]``
    input; PyTorch's formula (an average pool of the squares over the channel axis)."""
    if input.ndim < 3:
        raise ShapeError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    n, c = input.shape[:2]
    squares = (input * input).reshape(n, 1, c, -1)  # channels as the pooled H axis
    squares = pad(squares, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(squares, (size, 1), stride=1).reshape(input.shape)
    return input / (div * alpha + k) ** beta


def channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """``[N, C, *]`` with its channels interleaved across ``groups`` (ShuffleNet): channel
    ``g * (C / groups) + k`` moves to ``k * groups + g``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"channel_shuffle(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise ShapeError(f"Number of groups to divide channels in must be positive. Value of "
                         f"groups:{groups}")
    if input.ndim <= 2:
        raise ShapeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                         f"sizes {list(input.shape)}")
    n, c, *rest = input.shape
    if c % groups:
        raise ShapeError(f"Number of channels must be divisible by groups. Got {c} channels "
                         f"and {groups} groups.")
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``:
    ``input1 [*, in1]``, ``input2 [*, in2]``, ``weight [out, in1, in2]`` -> ``[*, out]``."""
    for what, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"bilinear(): argument '{what}' must be a Tensor, not "
                            f"{type(t).__name__}")
    if weight.ndim != 3:
        raise ShapeError(f"bilinear(): weight must be 3-D [out, in1, in2], got shape "
                         f"{tuple(weight.shape)}")
    if input1.ndim != input2.ndim or input1.shape[:-1] != input2.shape[:-1]:
        raise ShapeError(f"bilinear(): input batch dimensions do not match: got "
                         f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    for i, (x, size) in enumerate(((input1, weight.shape[1]), (input2, weight.shape[2])), 1):
        if x.shape[-1] != size:
            raise ShapeError(f"bilinear(): input{i} size does not match weight size: got "
                             f"{x.shape[-1]} but expected {size}")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ShapeError(f"bilinear: bias has shape {tuple(bias.shape)}, expected "
                         f"({weight.shape[0]},)")
    check_same_dtype("bilinear", input1, input2, weight, bias)
    # x1 W_o x2 for every o: (x1 @ W viewed [in1, out*in2]) then a sum against x2
    out_features, in1, in2 = weight.shape
    mixed = input1 @ weight.permute(1, 0, 2).reshape(in1, out_features * in2)
    out = (mixed.reshape(*mixed.shape[:-1], out_features, in2) * input2.unsqueeze(-2)).sum(-1)
    return out if bias is None else out + bias


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """``[*, C, H r, W r] -> [*, C r^2, H, W]`` (``r = downscale_factor``): the inverse of
    :func:`pixel_shuffle`."""
    r = downscale_factor
    _pixel_args("pixel_unshuffle", input, r, "downscale_factor")
    *batch, c, h, w = input.shape
    for what, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise ShapeError(f"pixel_unshuffle expects {what} to be divisible by "
                             f"downscale_factor, but input.size({d})={size} is not divisible "
                             f"by {r}")
    n = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


# --------------------------------------------------------------------------- more losses


def _reduction_checked(name: str, reduction: str) -> None:
    """PyTorch's early check (before any other argument's) of ``reduction``."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {reduction!r}; use one of {_REDUCTIONS}")


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True,  # noqa: A002
                     full: bool = False, size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of ``target`` counts under a Poisson distribution of rate
    ``exp(input)`` (``log_input=True``: per element ``exp(input) - target * input``) or
    ``input`` itself (``input - target * log(input + eps)``). ``full`` adds Stirling's
    approximation of ``log(target!)``, ``target log(target) - target + log(2 pi target) / 2``,
    where ``target > 1``. ``input`` and ``target`` broadcast. The target's gradient (should it
    need one) is PyTorch's, but finite where the target is 0 (PyTorch's is NaN there)."""
    name = "poisson_nll_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _reduction_checked(name, reduction)
    _tensor_args(name, input=input, target=target)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        t = where(big, target, 1.0)  # (log of 1 where unused: no NaN in the gradient)
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + where(big, stirling, 0.0)
    return _reduce(loss, reduction, name)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float,  # noqa: A002
                      full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of ``target`` under normal distributions of mean ``input`` and
    variance ``var``: per element ``(log(var) + (input - target)^2 / var) / 2`` (plus
    ``log(2 pi) / 2`` with ``full``). ``var`` has the input's shape, or one dimension of size
    1 where the input's differs (or lacks the input's last dimension), or is a number;
    it is clamped to at least ``eps`` without gradient, as in PyTorch; a negative entry is
    refused."""
    name = "gaussian_nll_loss"
    _tensor_args(name, input=input, target=target)
    if not isinstance(var, Tensor):
        if isinstance(var, bool) or not isinstance(var, int | float):
            raise TypeError(f"{name}(): argument 'var' must be a Tensor or a float, not "
                            f"{type(var).__name__}")
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.new_full(input.shape, float(var)).detach()
    elif var.numel() and bool((var._data < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape)
                                                 if i != v) == 1):
            raise ShapeError(f"{name}: var is of incorrect size: var of shape {list(var.shape)} "
                             f"for input of shape {list(input.shape)} (it must be the input's "
                             f"shape, or have one dimension of size 1 where the input's "
                             f"differs, or lack the input's last dimension)")
    _reduction_checked(name, reduction)
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, name)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,  # noqa: A002
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The two-class logistic loss of ``target`` labels 1 / -1 under scores ``input``: per
    element ``log(1 + exp(-target * input))`` (PyTorch's formula: it overflows to inf for
    ``-target * input`` above ~709 in float64, ~88 in float32, as PyTorch's)."""
    name = "soft_margin_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _tensor_args(name, input=input, target=target)
    return _reduce((-target * input).exp().log1p(), reduction, name)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor,  # noqa: A002
                                weight: Tensor | None = None, size_average: bool | None = None,
                                reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-label one-versus-all logistic loss: ``input [N, C]`` scores, ``target [N, C]``
    labels 0 / 1; per sample the mean over classes of ``-(y log sigmoid(x) + (1 - y)
    log sigmoid(-x))`` (each class's term times ``weight [C]``): ``[N]`` with
    ``reduction="none"``."""
    name = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    _tensor_args(name, input=input, target=target)
    _floating(name, input)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * _as_operand(weight, input, name)
    c = input.shape[-1] if input.ndim else 1
    loss = loss.sum(-1) / c if loss.ndim else loss / c
    return _reduce(loss, reduction, name)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The multi-class hinge loss: ``input [N, C]`` scores (or ``[C]``), ``target [N]`` classes
    (int64); per sample ``sum_{j != y} max(0, margin - x[y] + x[j])^p / C``, each term
    times ``weight[y]``. ``p`` is 1 or 2. The gradient flows where a term is positive."""
    name = "multi_margin_loss"
    reduction = _legacy_reduction(name, size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    _reduction_checked(name, reduction)
    _tensor_args(name, input=input, target=target)
    _floating(name, input)
    if input.ndim not in (1, 2) or (input.ndim == 2 and input.shape[1] == 0) or (
            input.ndim == 1 and input.shape[0] == 0):
        raise ShapeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                         f"but got: {list(input.shape)}")
    rows = input.reshape(1, -1) if input.ndim == 1 else input
    n, c = rows.shape
    if target.numel() != n or target.ndim > 1:
        raise ShapeError(f"{name}: target tensor should be 1-D with size equal to the number "
                         f"of input samples (batch size). Expected target size [{n}], but got "
                         f"{list(target.shape)}. Input has shape {list(input.shape)}.")
    if target.dtype != np.int64:
        raise DTypeError(f"expected scalar type Long but found "
                         f"{torch_scalar_name(target.dtype)}")
    t = target._data.reshape(n)
    if t.size and (int(t.min()) < 0 or int(t.max()) >= c):
        raise IndexRangeError(f"{name}: target out of range: classes must lie in [0, {c}), "
                              f"got values from {int(t.min())} to {int(t.max())}")
    if weight is not None and weight.numel() != c:
        raise ShapeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    xp = backend.get_array_module(t)
    idx = Tensor(t.reshape(n, 1))
    z = margin - rows.gather(1, idx) + rows
    other = Tensor(xp.arange(c) != t.reshape(n, 1))  # (j != y)
    h = where(other & (z > 0), z, 0.0)
    h = h * h if p == 2 else h
    if weight is not None:
        h = h * weight.to(dtype=rows.dtype)[idx]
    loss = h.sum(1) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction, name)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any distance: ``max(0, margin + d(anchor, positive) -
    d(anchor, negative))``, ``d = distance_function`` (a callable of two tensors; default
    :func:`pairwise_distance`). ``swap`` as in :func:`triplet_margin_loss`."""
    name = "triplet_margin_with_distance_loss"
    _reduction_checked(name, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _tensor_args(name, anchor=anchor, positive=positive, negative=negative)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"The anchor, positive, and negative tensors are expected to have the "
                         f"same number of dimensions, but got: anchor {anchor.ndim}D, positive "
                         f"{positive.ndim}D, and negative {negative.ndim}D inputs")
    d = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = d(anchor, positive), d(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(d(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction, name)


# --------------------------------------------------------------------------- attention

#: PyTorch's C++ names of the dtypes, as its attention messages print them.
_CPP_DTYPE = {"float16": "c10::Half", "float32": "float", "float64": "double",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}


def _cpp(dtype: Any) -> str:
    return _CPP_DTYPE.get(np.dtype(dtype).name, np.dtype(dtype).name)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key^T * scale + bias) @ value``: ``query [*, L, E]``, ``key
    [*, S, E]``, ``value [*, S, Ev]`` -> ``[*, L, Ev]`` (the ``*`` dims broadcast; usually
    ``[N, heads]``). ``scale`` defaults to ``1 / sqrt(E)``.

    ``attn_mask`` broadcasts to ``[*, L, S]``: a bool mask says which keys each query may
    attend to (True: attend), a float one is added to the scores. ``is_causal=True`` lets
    query ``i`` attend to keys ``0..i`` only (the top-left lower triangle, also when
    ``L != S``); with an ``attn_mask`` as well, both apply: what PyTorch 2.13's fused CPU
    kernel computes (its other paths, taken for 2-D/3-D inputs, dropout or some gradients,
    refuse the pair, as its documentation asks for one or the other). A query that may attend
    to nothing gets zeros, and zero gradients (PyTorch's kernel, not the NaN of a softmax over
    ``-inf`` only). ``dropout_p`` drops attention weights with :func:`dropout` (always, as
    PyTorch: pass 0 in evaluation), drawn from tinytrain's generator. ``enable_gqa``:
    grouped-query attention, ``key``/``value`` with fewer heads (dim -3) that divide the
    query's, each repeated for its group of query heads.

    Composed of differentiable tensor ops (matmul, softmax, where), so autograd gives every
    gradient; the ``[*, L, S]`` weights are materialised (no fused kernel).
    """
    name = "scaled_dot_product_attention"
    _tensor_args(name, query=query, key=key, value=value)
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ShapeError(f"{name}: Expected query, key, and value to all be  at least 2 "
                         f"dimensional, but got query.dim: {query.ndim} key.dim: {key.ndim} and "
                         f"value.dim: {value.ndim} instead.")
    if not query.dtype == key.dtype == value.dtype:
        raise DTypeError(f"{name}: Expected query, key, and value to have the same dtype, but "
                         f"got query.dtype: {_cpp(query.dtype)} key.dtype: {_cpp(key.dtype)} "
                         f"and value.dtype: {_cpp(value.dtype)} instead.")
    if query.dtype.kind != "f":
        raise DTypeError(f"{name}: expected floating point query, key and value, got "
                         f"{query.dtype}")
    if not query.device == key.device == value.device:
        raise InvalidArgument(f"{name}: Expected query, key, and value to be on the same "
                              f"device, got {query.device}, {key.device} and {value.device}")
    (L, E), (S, Ek), Sv = query.shape[-2:], key.shape[-2:], value.shape[-2]
    if Ek != E or Sv != S:
        raise ShapeError(f"{name}: expected query [*, L, E], key [*, S, E] and value "
                         f"[*, S, Ev], got query {list(query.shape)}, key {list(key.shape)} "
                         f"and value {list(value.shape)}")
    if not 0.0 <= dropout_p <= 1.0:
        raise InvalidArgument(f"dropout probability has to be between 0 and 1, but got "
                              f"{dropout_p}")
    if enable_gqa:
        key, value = _gqa_heads(name, query, key), _gqa_heads(name, query, value)
    if scale is None:  # (E = 0: the scores are empty sums, 0 whatever the scale)
        scale = 1 / math.sqrt(E) if E else 1.0
    scores = query @ key.transpose(-2, -1) * scale
    allowed = None  # a bool array [L, S] or [*, L, S]: which keys each query may attend to
    xp = backend.get_array_module(scores._data)
    if is_causal:
        allowed = xp.tril(xp.ones((L, S), dtype=bool))
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise TypeError(f"{name}(): argument 'attn_mask' must be a Tensor, not "
                            f"{type(attn_mask).__name__}")
        if attn_mask.dtype not in (np.bool_, np.float32, query.dtype):
            raise DTypeError(f"{name}: Expected attn_mask dtype to be bool or float or to match "
                             f"query dtype, but got attn_mask.dtype: {_cpp(attn_mask.dtype)} "
                             f"and  query.dtype: {_cpp(query.dtype)} instead.")
        if not _broadcasts(attn_mask.shape, scores.shape):
            raise ShapeError(f"{name}: attn_mask of shape {list(attn_mask.shape)} does not "
                             f"broadcast to the attention weights' shape {list(scores.shape)} "
                             f"([*, L, S])")
        if attn_mask.device != query.device:
            raise InvalidArgument(f"{name}: attn_mask is on {attn_mask.device}, the query on "
                                  f"{query.device}")
        if attn_mask.dtype == np.bool_:
            m = attn_mask._data
            allowed = m if allowed is None else allowed & m
        else:
            scores = scores + attn_mask.to(dtype=query.dtype)
    if allowed is not None:
        scores = where(Tensor(allowed), scores, -math.inf)
    # Rows with no key to attend to: their softmax would be 0/0. Scores of 0 there (a finite
    # softmax, nothing NaN in the backward pass), then zero weights, as PyTorch's kernel.
    dead = Tensor(xp.isneginf(scores._data).all(-1, keepdims=True))
    weights = where(dead, 0.0, where(dead, 0.0, scores).softmax(-1))
    if dropout_p > 0:
        weights = dropout(weights, dropout_p)
    return weights @ value


def _gqa_heads(name: str, query: Tensor, kv: Tensor) -> Tensor:
    """``kv [*, Hk, S, E]`` with each head repeated ``Hq / Hk`` times, one after the other
    (PyTorch's ``repeat_interleave(Hq // Hk, -3)``), for grouped-query attention."""
    if query.ndim < 3 or kv.ndim < 3:
        raise ShapeError(f"{name}: enable_gqa needs query, key and value with a heads "
                         f"dimension (dim -3), got shapes {list(query.shape)} and "
                         f"{list(kv.shape)}")
    hq, hk = query.shape[-3], kv.shape[-3]
    if hk == hq:
        return kv
    if hq % hk:
        raise ShapeError(f"{name}: Number of heads in key and value must divide the number of "
                         f"heads in query (got {hk} and {hq})")
    g = hq // hk
    shape = kv.shape[:-3] + (hk, g) + kv.shape[-2:]
    return kv.unsqueeze(-3).expand(*shape).reshape(*kv.shape[:-3], hq, *kv.shape[-2:])


# NumPy's axis= / keepdims= where PyTorch's functional takes them (its softmax, log_softmax,
# softmin and normalize do not)
_numpy_names.accept(globals(), "cosine_similarity pairwise_distance")


__getattr__ = _module_getattr(__name__, {}, (
    "tinytrain.nn.functional has " + ", ".join(__all__)))
