"""Layers without convolution: Linear, activations, Flatten / Unflatten, Embedding, Dropout,
Sequential, losses."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from tinytrain.dtypes import get_default_dtype
from tinytrain.nn import functional as F
from tinytrain.nn import init
from tinytrain.nn.containers import _index
from tinytrain.nn.module import Module, Parameter, factory_tensor
from tinytrain.tensor import Tensor


class Linear(Module):
    """``y = x @ weight.T + bias``; ``x [*, in_features]`` -> ``[*, out_features]``.

    PyTorch's initialisation: ``weight [out, in]`` and ``bias [out]`` from
    U(-1/sqrt(in), 1/sqrt(in)).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(factory_tensor("Linear", (out_features, in_features),
                                               device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(factory_tensor("Linear", (out_features,), device=device,
                                                 dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does (re-initialise a model)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    """``max(x, 0)``; with ``inplace=True`` it overwrites its input (``relu_``)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class LeakyReLU(Module):
    """``x`` for ``x > 0``, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class RReLU(Module):
    """Randomized leaky ReLU (:func:`~tinytrain.nn.functional.rrelu`): a random slope in
    ``[lower, upper]`` for negative inputs in training, their mean in eval mode."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                              else "")


class ELU(Module):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SiLU(Module):
    """``x * sigmoid(x)`` (swish)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """``x * Phi(x)`` (``approximate="none"``) or its tanh approximation (``"tanh"``)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class _InplaceActivation(Module):
    """An element-wise ``F.<name>(x, inplace)``; ``inplace=True`` overwrites the input."""

    fn: Any = None  # the functional form, set by each subclass

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return type(self).fn(x, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``."""

    fn = F.mish


class SELU(_InplaceActivation):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""

    fn = F.selu


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``."""

    fn = F.hardswish

    def extra_repr(self) -> str:  # (PyTorch's text never shows inplace here)
        return ""


class Hardsigmoid(Hardswish):
    """``relu6(x + 3) / 6``."""

    fn = F.hardsigmoid


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]`` (gradient 0 at and beyond the bounds)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
                 ) -> None:
        super().__init__()
        if not max_val > min_val:  # (PyTorch asserts this)
            raise ValueError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class CELU(Module):
    """``x`` for ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.celu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class LogSigmoid(Module):
    """``log(sigmoid(x))``, finite for any ``x``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(x)


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softsign(x)


class PReLU(Module):
    """``x`` for ``x > 0``, else ``weight * x``, with a learnt ``weight [num_parameters]``
    (filled with ``init``): one slope, or one per channel (dimension 1 of the input)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(factory_tensor("PReLU", (num_parameters,), device=device,
                                               dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class CosineSimilarity(Module):
    """``F.cosine_similarity(x1, x2, dim, eps)``: ``[N, D]`` pairs -> ``[N]`` (``dim=1``)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``F.pairwise_distance(x1, x2, p, eps, keepdim)``: ``[N, D]`` pairs -> ``[N]``."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Identity(Module):
    """Returns its input; its arguments are ignored, as PyTorch's (so that a layer can be
    swapped for it without editing the call)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x


class Flatten(Module):
    """``[N, C, H, W]`` -> ``[N, C*H*W]`` (dims ``start_dim..end_dim`` merged)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size``: ``Unflatten(1, (1, 28, 28))`` turns
    ``[N, 784]`` into ``[N, 1, 28, 28]``."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        if not isinstance(unflattened_size, tuple | list):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, but found "
                            f"type {type(unflattened_size).__name__} (one size: "
                            f"({unflattened_size!r},))")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _refuse_embedding_options(scale_grad_by_freq: bool, sparse: bool) -> None:
    """PyTorch's Embedding options tinytrain does not have, named when switched on."""
    for name, value, why in (
            ("scale_grad_by_freq", scale_grad_by_freq, "its gradients are not scaled by counts"),
            ("sparse", sparse, "its gradients are dense: SGD updates the same rows either way, "
                               "other optimizers also see the rows not looked up, as zeros")):
        if value:
            raise ValueError(f"Embedding: {name} is not supported in tinytrain ({why}); "
                             f"leave it out")


class Embedding(Module):
    """A lookup table: ``weight [num_embeddings, embedding_dim]``, N(0, 1) at first; an
    integer tensor of indices ``[*]`` gives ``[*, embedding_dim]``. The row
    ``padding_idx`` starts at zero and never gets a gradient. With ``max_norm``, each row
    looked up is first scaled in place to a ``norm_type``-norm of at most ``max_norm``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _refuse_embedding_options(scale_grad_by_freq, sparse)
        self.max_norm, self.norm_type = max_norm, norm_type
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError(f"Padding_idx must be within num_embeddings (Embedding: "
                                     f"padding_idx {padding_idx}, {num_embeddings} embeddings)")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(factory_tensor("Embedding", (num_embeddings, embedding_dim),
                                                   device=device, dtype=dtype))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: weight of shape {tuple(_weight.shape)} does not "
                                 f"match ({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        """Draw the table again from N(0, 1), as the constructor does; the ``padding_idx``
        row is zero again."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding whose weight is ``embeddings [num, dim]`` (frozen by default)."""
        if embeddings.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        return cls(*embeddings.shape, padding_idx=padding_idx, max_norm=max_norm,
                   norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, x: Tensor) -> Tensor:
        return F.embedding(x, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2.0:
            s += f", norm_type={self.norm_type}"
        return s


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training mode; identity in eval mode. With
    ``inplace=True`` it overwrites its input."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zeroes whole channels (``x[n, c]`` of ``[N, C, L]`` or ``[C, L]``) with probability
    ``p`` in training mode."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout1d(x, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zeroes whole channels (``x[n, c]`` of ``[N, C, H, W]``) with probability ``p`` in
    training mode (other ranks as :func:`tinytrain.nn.functional.dropout2d`)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout2d(x, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Zeroes whole channels (``x[n, c]`` of ``[N, C, D, H, W]`` or ``[C, D, H, W]``) with
    probability ``p`` in training mode."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout3d(x, self.p, self.training, self.inplace)


class Sequential(Module):
    """Modules applied in order; children are named ``"0"``, ``"1"``, ... (or by an OrderedDict)."""

    def __init__(self, *modules: Module | OrderedDict[str, Module]) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int | slice) -> Any:
        """``model[0]`` is the first module; ``model[1:]`` a Sequential of the rest (same
        modules, same names)."""
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        values = list(self._modules.values())
        return values[_index(i, len(values), "Sequential")]

    def __setitem__(self, i: int, module: Module) -> None:
        keys = list(self._modules)
        self.add_module(keys[_index(i, len(keys), "Sequential")], module)

    def __delitem__(self, i: int | slice) -> None:
        """Delete, then number the rest ``"0"``, ``"1"``, ... again, as PyTorch does (so
        that ``append`` cannot reuse a name that is still taken)."""
        keys = list(self._modules)
        if not isinstance(i, slice):
            i = _index(i, len(keys), "Sequential")
        for key in keys[i] if isinstance(i, slice) else [keys[i]]:
            del self._modules[key]
        self._renumber(list(self._modules.values()))

    def _renumber(self, modules: list[Module]) -> None:
        """Hold ``modules``, named ``"0"``, ``"1"``, ... (as ModuleList's)."""
        self._modules.clear()
        for n, m in enumerate(modules):
            self.add_module(str(n), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Any) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Put ``module`` before position ``index`` (``-len .. len``, else IndexError, as
        PyTorch's)."""
        if not isinstance(module, Module):  # before anything changes
            raise TypeError(f"Sequential.insert: {type(module).__name__} is not a Module")
        modules = list(self._modules.values())
        if not -len(modules) <= index <= len(modules):
            raise IndexError(f"Sequential.insert: index {index} is out of range for a "
                             f"Sequential of {len(modules)}")
        modules.insert(index, module)
        self._renumber(modules)
        return self

    def pop(self, key: int | slice) -> Module:
        """Remove and return the module at ``key`` (the rest are numbered again)."""
        value = self[key]
        del self[key]
        return value


class Softmax(Module):
    """``F.softmax`` along ``dim``. PyTorch's default ``dim=None`` picks dim 0 for 0-, 1- and
    3-d inputs, else 1, with a deprecation warning: pass ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Softmax):
    """``F.softmin`` (``softmax(-x)``) along ``dim``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softmin(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class _Loss(Module):
    """A loss module's ``reduction``; ``size_average`` / ``reduce`` (PyTorch's deprecated
    spelling of it) are turned into one with PyTorch's rule and warning
    (``F._legacy_reduction``)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = F._legacy_reduction(type(self).__name__, size_average, reduce,
                                             reduction)


class L1Loss(_Loss):
    """``F.l1_loss`` as a module: mean absolute error."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``F.smooth_l1_loss`` as a module: quadratic below ``beta``, linear above."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``F.huber_loss`` as a module: quadratic below ``delta``, linear (slope delta) above."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)  # (PyTorch's HuberLoss has no legacy arguments)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.huber_loss(input, target, self.reduction, self.delta)


class MSELoss(_Loss):
    """``F.mse_loss`` as a module: ``(input, target) -> loss``, same shapes."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class KLDivLoss(_Loss):
    """``F.kl_div`` as a module: ``(log-probabilities, target) -> loss``; ``reduction`` may
    also be ``"batchmean"``, and ``log_target=True`` takes the target as log-probabilities."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _WeightedLoss(_Loss):
    """A loss with class weights: ``weight`` is a buffer, as in PyTorch (in ``state_dict()``
    when given, moved by ``to()``)."""

    def __init__(self, weight: Tensor | None, size_average: bool | None, reduce: bool | None,
                 reduction: str) -> None:
        if isinstance(weight, str):  # (reduction passed first, where PyTorch's weight goes)
            raise TypeError(f"{type(self).__name__}: weight must be a Tensor, got the string "
                            f"{weight!r}; pass the reduction by keyword: reduction={weight!r}")
        super().__init__(size_average, reduce, reduction)
        if weight is not None and not isinstance(weight, Tensor):
            weight = Tensor(np.asarray(weight, dtype=get_default_dtype()))
        self.register_buffer("weight", weight)


class BCELoss(_WeightedLoss):
    """``F.binary_cross_entropy`` as a module: ``(probabilities, targets) -> loss``;
    ``weight`` (a buffer) scales each element's loss."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """``F.binary_cross_entropy_with_logits`` as a module: ``(logits, targets) -> loss``;
    ``weight`` and ``pos_weight`` are buffers, as in PyTorch."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if pos_weight is not None and not isinstance(pos_weight, Tensor):
            pos_weight = Tensor(np.asarray(pos_weight, dtype=get_default_dtype()))
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class NLLLoss(_WeightedLoss):
    """``F.nll_loss`` as a module: ``(log-probabilities [N, C], targets [N]) -> loss``."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """``F.cross_entropy`` as a module: ``(logits [N, C], targets [N]) -> loss`` (targets
    may also be class probabilities ``[N, C]``); ``weight``, ``ignore_index`` and
    ``label_smoothing`` as in PyTorch."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, logits: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(logits, targets, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class CosineEmbeddingLoss(_Loss):
    """``F.cosine_embedding_loss`` as a module: ``(x1 [N, D], x2 [N, D], target [N]) ->
    loss``, targets 1 (alike) or -1 (not)."""

    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``F.margin_ranking_loss`` as a module: ``(x1, x2, target) -> loss``, target 1 where
    ``x1`` should rank higher, -1 where ``x2`` should."""

    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``F.hinge_embedding_loss`` as a module: ``(distances, target) -> loss``, targets 1
    (alike) or -1 (not)."""

    def __init__(self, margin: float = 1.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``F.triplet_margin_loss`` as a module: ``(anchor [N, D], positive [N, D], negative
    [N, D]) -> loss``; ``margin`` must be > 0 (checked here, as PyTorch does)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class GLU(Module):
    """``F.glu``: the input's halves ``a, b`` along ``dim``, ``a * sigmoid(b)``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """``F.threshold``: ``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return (f"threshold={self.threshold}, value={self.value}"
                + (", inplace=True" if self.inplace else ""))


class Softshrink(Module):
    """``F.softshrink``: ``x`` moved ``lambd`` towards 0, and 0 within ``lambd`` of it."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """``F.hardshrink``: ``x`` where ``|x| > lambd``, else 0."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.hardshrink(input, self.lambd)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.tanhshrink(input)


class Softmax2d(Module):
    """``F.softmax`` over the channels of ``[N, C, H, W]`` or ``[C, H, W]`` (dim -3)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             f"instead")
        return F.softmax(input, -3)


class ChannelShuffle(Module):
    """``F.channel_shuffle``: interleave the channels of ``[N, C, *]`` across ``groups``."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Bilinear(Module):
    """``y = x1^T W_o x2 + b_o`` for each output ``o``: ``x1 [*, in1]``, ``x2 [*, in2]`` ->
    ``[*, out]``. PyTorch's initialisation: ``weight [out, in1, in2]`` and ``bias [out]``
    from U(-1/sqrt(in1), 1/sqrt(in1))."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(factory_tensor(
            "Bilinear", (out_features, in1_features, in2_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(factory_tensor("Bilinear", (out_features,), device=device,
                                                 dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class PixelShuffle(Module):
    """``F.pixel_shuffle``: ``[*, C r^2, H, W] -> [*, C, H r, W r]``."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``F.pixel_unshuffle``: ``[*, C, H r, W r] -> [*, C r^2, H, W]``."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class PoissonNLLLoss(_Loss):
    """``F.poisson_nll_loss`` as a module: ``(rates or log-rates, counts) -> loss``."""

    def __init__(self, log_input: bool = True, full: bool = False,
                 size_average: bool | None = None, eps: float = 1e-8,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class CTCLoss(_Loss):
    """``F.ctc_loss`` as a module: ``(log_probs [T, N, C], targets, input_lengths,
    target_lengths) -> loss``, with ``blank``, ``reduction`` and ``zero_infinity`` fixed here."""

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any,
                target_lengths: Any) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class GaussianNLLLoss(_Loss):
    """``F.gaussian_nll_loss`` as a module: ``(mean, target, var) -> loss``."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:  # noqa: A002
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``F.soft_margin_loss`` as a module: ``(scores, labels 1 / -1) -> loss``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``F.multilabel_soft_margin_loss`` as a module: ``(scores [N, C], labels 0 / 1
    [N, C]) -> loss``; ``weight [C]`` (a buffer) scales each class."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """``F.multi_margin_loss`` as a module: ``(scores [N, C], classes [N]) -> loss``; ``p``
    is 1 or 2 (checked here, as PyTorch does), ``weight [C]`` a buffer."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if self.weight is not None and self.weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{self.weight.ndim}D instead")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``F.triplet_margin_with_distance_loss`` as a module: ``(anchor, positive, negative)
    -> loss`` under ``distance_function`` (default ``F.pairwise_distance``)."""

    def __init__(self, *, distance_function: Any = None, margin: float = 1.0,
                 swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        # (as PyTorch: no function means a PairwiseDistance module, a child in the repr)
        self.distance_function = (PairwiseDistance() if distance_function is None
                                  else distance_function)
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)
