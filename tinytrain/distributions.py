"""Probability distributions for sampling and policy gradients (``torch.distributions``).

    dist = tt.distributions.Categorical(logits=policy(state))   # logits [B, A]
    action = dist.sample()                                      # int64 [B]
    loss = -(dist.log_prob(action) * returns).sum()             # REINFORCE

:class:`Categorical`, :class:`Bernoulli` and :class:`Normal` with PyTorch's parameters,
shapes (``batch_shape``, ``event_shape``), argument checks and formulas, so ``log_prob``,
``entropy`` and :func:`kl_divergence` give PyTorch's values and gradients. Samples come from
tinytrain's random stream (``tt.manual_seed``), so they are not PyTorch's numbers, but have
the same distribution. ``Normal.rsample`` is reparameterised (``loc + eps * scale``): its
samples pass gradients to ``loc`` and ``scale``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from tinytrain import dtypes
from tinytrain._missing import module_getattr
from tinytrain.autograd import no_grad
from tinytrain.more_ops import broadcast_tensors, erf, erfinv
from tinytrain.tensor import Tensor, full, rand, randn, tensor

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal", "kl_divergence",
           "register_kl"]

__getattr__ = module_getattr(
    "tinytrain.distributions", {},
    "tinytrain.distributions has Categorical, Bernoulli and Normal (and kl_divergence, "
    "register_kl); other families can subclass Distribution with tensor ops")


# ------------------------------------------------------------------ constraints


class _Constraint:
    """What a parameter or a value must satisfy: ``check`` gives a bool tensor."""

    def __init__(self, name: str, check: Callable[[Tensor], Tensor]) -> None:
        self.name, self.check = name, check

    def __repr__(self) -> str:
        return self.name


_real = _Constraint("Real()", lambda v: v == v)  # (not NaN; infinities are real here)
_real_vector = _Constraint("IndependentConstraint(Real(), 1)", lambda v: (v == v).all(-1))
_positive = _Constraint("GreaterThan(lower_bound=0.0)", lambda v: v > 0)
_unit_interval = _Constraint("Interval(lower_bound=0.0, upper_bound=1.0)",
                             lambda v: (v >= 0) & (v <= 1))
_boolean = _Constraint("Boolean()", lambda v: (v == 0) | (v == 1))
_simplex = _Constraint("Simplex()", lambda v: (v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6))


def _integer_interval(upper: int) -> _Constraint:
    return _Constraint(f"IntegerInterval(lower_bound=0, upper_bound={upper})",
                       lambda v: (v % 1 == 0) & (v >= 0) & (v <= upper))


def _size(shape: tuple) -> str:
    return f"torch.Size({list(shape)})"


# ------------------------------------------------------------------ the base class


class Distribution:
    """A batch of distributions of one family: ``batch_shape`` independent ones, each over
    values of ``event_shape``. ``validate_args`` (default: True, as PyTorch's under
    ``__debug__``) checks the parameters here and the values given to ``log_prob``."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict[str, _Constraint] = {}
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument checking on or off for distributions made without
        ``validate_args``."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape: Sequence[int] = (), event_shape: Sequence[int] = (),
                 validate_args: bool | None = None) -> None:
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if param not in self.__dict__:  # (a lazy one not computed yet: skipped)
                    continue
                value = self.__dict__[param]
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._event_shape

    @property
    def support(self) -> _Constraint:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def _extended_shape(self, sample_shape: Sequence[int] = ()) -> tuple[int, ...]:
        """``sample_shape + batch_shape + event_shape``: the shape of ``sample``'s result."""
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Samples of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sample "
                                  f"(has_rsample is False); use sample()")

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        """``sample((n,))``, with PyTorch's FutureWarning."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample((n,))

    def expand(self, batch_shape: Sequence[int],
               _instance: Distribution | None = None) -> Distribution:
        """The same distributions repeated to ``batch_shape`` (which the current one must
        broadcast to): a new instance whose parameters are expanded views, not copies."""
        raise NotImplementedError

    def _get_checked_instance(self, cls: type, _instance: Distribution | None) -> Any:
        """The object :meth:`expand` fills: ``_instance``, or a new, uninitialised one of
        this type (a subclass with its own ``__init__`` must define its own ``expand``)."""
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                f"__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expanded(self, new: Any, batch_shape: tuple[int, ...]) -> Any:
        """Finish :meth:`expand`: ``new``'s shapes, and this one's argument checking."""
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _validate_sample(self, value: Any) -> None:
        """PyTorch's checks of a ``log_prob`` value: a tensor, broadcastable with
        ``batch_shape + event_shape``, in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        start = value.ndim - len(self._event_shape)
        if value.shape[start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{_size(value.shape)} vs {_size(self._event_shape)}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(value.shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{_size(value.shape)} vs {_size(expected)}.")
        if not bool(self.support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support "
                             f"({self.support!r}) of the distribution {self!r}, but found "
                             f"invalid values:\n{value}")

    def __repr__(self) -> str:
        names = [p for p in self.arg_constraints if p in self.__dict__]
        shown = ", ".join(f"{p}: {str(self.__dict__[p]) if self.__dict__[p].numel() == 1 else _size(self.__dict__[p].shape)}"  # noqa: E501
                          for p in names)
        return f"{type(self).__name__}({shown})"


def _as_float_tensor(*values: Any) -> tuple[Tensor, ...]:
    """PyTorch's ``broadcast_all``: numbers become tensors of the default dtype (or of the
    tensors' dtype and device), and all broadcast to one shape."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    for v in values:
        if not isinstance(v, Tensor | numbers.Number):
            raise ValueError("Input arguments must all be instances of numbers.Number, "
                             "torch.Tensor or objects implementing __torch_function__.")
    like = tensors[0] if tensors else None
    dtype = like.dtype if like is not None and like.dtype.kind == "f" else None
    device = like.device if like is not None else None
    out = [v if isinstance(v, Tensor) else
           tensor(v, dtype=dtype or dtypes.get_default_dtype(), device=device) for v in values]
    return tuple(broadcast_tensors(*out)) if len(out) > 1 else tuple(out)


def _eps(t: Tensor) -> float:
    return float(dtypes.finfo(t.dtype).eps)


def _one_of(probs: Any, logits: Any) -> None:
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


# ------------------------------------------------------------------ the families


class Categorical(Distribution):
    """One of ``K`` categories, ``0 .. K-1``, with probabilities ``probs [..., K]``
    (non-negative; normalised here) or unnormalised log-probabilities ``logits [..., K]``.
    ``batch_shape`` is the parameter's shape without the last dimension; samples are int64
    of shape ``sample_shape + batch_shape``."""

    arg_constraints = {"probs": _simplex, "logits": _real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        _one_of(probs, logits)
        param = probs if probs is not None else logits
        if not isinstance(param, Tensor):
            raise TypeError(f"Categorical: {'probs' if probs is not None else 'logits'} must "
                            f"be a Tensor, got {type(param).__name__}")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], (), validate_args)

    @cached_property
    def logits(self) -> Tensor:
        """Normalised log-probabilities (``log(probs)``, probabilities clamped to
        ``[eps, 1 - eps]`` first)."""
        eps = _eps(self.probs)
        return self.probs.clamp(eps, 1 - eps).log()

    @cached_property
    def probs(self) -> Tensor:
        return self.logits.softmax(-1)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    @property
    def support(self) -> _Constraint:
        return _integer_interval(self._num_events - 1)

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                    device=self.probs.device)

    @property
    def variance(self) -> Tensor:
        return self.mean

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Category indices, int64 ``[*sample_shape, *batch_shape]``: the first category
        whose cumulative probability exceeds a uniform draw."""
        shape = self._extended_shape(sample_shape)
        with no_grad():
            cdf = self.probs.cumsum(-1)
            u = rand(*shape, 1, dtype=cdf.dtype, device=cdf.device)
            picked = (cdf <= u).sum(-1)
            return picked.clamp(max=self._num_events - 1)  # (cdf[-1] may round below 1)

    def log_prob(self, value: Tensor) -> Tensor:
        """``log probs[value]`` for category indices ``value`` (broadcast with
        ``batch_shape``)."""
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        """``-sum(probs * logits)`` over the categories, ``[*batch_shape]``."""
        logits = self.logits.clamp(min=float(dtypes.finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def expand(self, batch_shape: Sequence[int],
               _instance: Distribution | None = None) -> Categorical:
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        shape = batch_shape + (self._num_events,)
        for name in ("probs", "logits"):  # (those computed so far)
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(shape))
                new._param = new.__dict__[name]
        new._num_events = self._num_events
        return self._expanded(new, batch_shape)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        from tinytrain.tensor import arange

        values = arange(self._num_events, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values


class Bernoulli(Distribution):
    """0 or 1, 1 with probability ``probs`` (in [0, 1]) or ``sigmoid(logits)``; a number or a
    tensor, whose shape is ``batch_shape``. Samples are floats of the parameter's dtype."""

    arg_constraints = {"probs": _unit_interval, "logits": _real}
    support = _boolean
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = _as_float_tensor(probs)
        else:
            (self.logits,) = _as_float_tensor(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.shape, (), validate_args)

    @cached_property
    def logits(self) -> Tensor:
        eps = _eps(self.probs)
        p = self.probs.clamp(eps, 1 - eps)
        return p.log() - (-p).log1p()

    @cached_property
    def probs(self) -> Tensor:
        return self.logits.sigmoid()

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, math.nan)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        with no_grad():
            return self.probs.expand(self._extended_shape(sample_shape)).bernoulli()

    def log_prob(self, value: Tensor) -> Tensor:
        """``value * log(p) + (1 - value) * log(1 - p)``, computed from the logits."""
        from tinytrain.nn.functional import binary_cross_entropy_with_logits

        if self._validate_args:
            self._validate_sample(value)
        logits, value = _as_float_tensor(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value.to(dtype=logits.dtype),
                                                 reduction="none")

    def entropy(self) -> Tensor:
        from tinytrain.nn.functional import binary_cross_entropy_with_logits

        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def expand(self, batch_shape: Sequence[int],
               _instance: Distribution | None = None) -> Bernoulli:
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = tuple(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
                new._param = new.__dict__[name]
        return self._expanded(new, batch_shape)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = tensor([0.0, 1.0], dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values


class Normal(Distribution):
    """The normal distribution N(``loc``, ``scale``^2); ``loc`` and ``scale`` (> 0) are
    numbers or tensors, broadcast together to ``batch_shape``."""

    arg_constraints = {"loc": _real, "scale": _positive}
    support = _real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = _as_float_tensor(loc, scale)
        both_numbers = isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number)
        super().__init__(() if both_numbers else self.loc.shape, (), validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Distribution | None = None
               ) -> Normal:
        new = self._get_checked_instance(Normal, _instance)
        batch_shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """``loc + eps * scale`` with ``eps ~ N(0, 1)`` of shape ``sample_shape +
        batch_shape``: differentiable in ``loc`` and ``scale``."""
        shape = self._extended_shape(sample_shape)
        eps = randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return (-((value - self.loc) ** 2) / (2 * var) - self.scale.log()
                - math.log(math.sqrt(2 * math.pi)))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


# ------------------------------------------------------------------ KL divergence

_KL: dict[tuple[type, type], Callable[[Any, Any], Tensor]] = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """Decorator: ``@register_kl(P, Q) def kl(p, q): ...`` adds KL(p || q) for those types."""

    def add(fn: Callable) -> Callable:
        _KL[type_p, type_q] = fn
        return fn

    return add


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) per batch entry: Normal-Normal, Categorical-Categorical and
    Bernoulli-Bernoulli in closed form (others: register_kl)."""
    for tp in type(p).__mro__:
        for tq in type(q).__mro__:
            if (tp, tq) in _KL:
                return _KL[tp, tq](p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p of type "
                              f"{type(p).__name__} and q of type {type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill((q.probs == 0).expand_as(t), math.inf)
    t = t.masked_fill((p.probs == 0).expand_as(t), 0)
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    from tinytrain.nn.functional import softplus

    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, math.inf).masked_fill(p.probs == 0, 0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = t2.masked_fill(q.probs == 1, math.inf).masked_fill(p.probs == 1, 0)
    return t1 + t2
