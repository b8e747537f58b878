"""Learning-rate schedules: each ``scheduler.step()`` sets every parameter group's ``lr``.

All follow :class:`LRScheduler`, PyTorch's mechanism: ``last_epoch`` counts ``step()``
calls. The constructor makes the first step itself (from ``last_epoch=-1`` to 0, with
``_is_initial`` set, so that it sets the rate of step 0), and each later call sets the
rates ``get_lr()`` computes for the new ``last_epoch``. Where PyTorch computes a rate from
the previous one (StepLR, ExponentialLR, CosineAnnealingLR, LinearLR... multiply or move
the current rate), tinytrain does the same arithmetic, so the numbers match PyTorch's bit
for bit, and schedulers stepped together chain (each works on the rate the other set).
``step(epoch)`` (deprecated in PyTorch) jumps to ``epoch`` with the closed form
``_get_closed_form_lr()`` where there is one.

Resuming, as in PyTorch: load the optimizer's ``state_dict()`` (it has the groups' rates and
the ``initial_lr`` the first scheduler recorded), then either load the scheduler's
``state_dict()`` into a new one, or make it with ``last_epoch=`` the number of steps done.
Loading a scheduler's state sets no rate: the optimizer's state has them.

Step them once per epoch or once per batch, as the schedule is meant (OneCycleLR, CyclicLR:
per batch). :class:`ReduceLROnPlateau` is the exception: ``step(metric)`` lowers the rate
when the metric stops improving.
"""

from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.optim.optimizer import Optimizer

__all__ = ["ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
           "CyclicLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR",
           "MultiplicativeLR", "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau",
           "SequentialLR", "StepLR"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available (PyTorch's warning).")


def _per_group(who: str, name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """``value`` for each parameter group: a list or tuple (one per group), or one value."""
    n = len(optimizer.param_groups)
    if not isinstance(value, list | tuple):
        return [value] * n
    if len(value) != n:
        raise ValueError(f"{who}: {name} must have the same length as optimizer.param_groups: "
                         f"expected {n} values (one per parameter group), got {len(value)}")
    return list(value)


def _check_optimizer(optimizer: Any, who: str) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{who} needs an Optimizer, got {type(optimizer).__name__}")


class LRScheduler:
    """Base class: subclasses define ``get_lr()``, the rates for ``self.last_epoch``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` it sets.
        last_epoch: ``-1`` (default) for a new schedule: each group's current rate is
            recorded as its ``initial_lr`` (unless an earlier scheduler did), and becomes
            ``base_lrs``. Another value resumes after that many steps: the groups must have
            an ``initial_lr`` already (KeyError otherwise, as PyTorch).
    """

    _is_initial = False  # True during the step the constructor makes

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, type(self).__name__)
        self.optimizer = optimizer
        # As PyTorch: the first scheduler records each group's rate as "initial_lr", and
        # every scheduler made later (a cosine after a warm-up) starts from it, not from
        # whatever rate the groups have reached by then.
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\nThis typically happens "
                        "when:\n1. You're trying to resume training from a checkpoint but "
                        "haven't properly loaded the optimizer state\n2. You're using "
                        "last_epoch >= 0 for a fresh training run (not recommended)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The constructor's step: to ``last_epoch + 1``, with ``_is_initial`` set."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Move to the next step (or to ``epoch``: deprecated, as in PyTorch) and set the
        groups' rates."""
        if self._step_count == 1 and getattr(self.optimizer, "_step_count", 1) == 0:
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`: call them in "
                "the opposite order (optimizer first), or the first value of the schedule is "
                "skipped (as PyTorch warns)", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            lrs = closed_form() if closed_form is not None else self.get_lr()
        self._set(lrs)

    def _set(self, lrs: Sequence[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The rates the last ``step()`` (or the construction) set."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (as PyTorch's: ``last_epoch``, ``base_lrs``,
        ``_last_lr``, ``_step_count``, ``_is_initial`` and the settings)."""
        return {k: (list(v) if isinstance(v, list) else v) for k, v in vars(self).items()
                if k != "optimizer"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class _LRScheduler(LRScheduler):
    """PyTorch's older name of :class:`LRScheduler` (custom schedulers subclass it)."""


class _LambdaScheduler(LRScheduler):
    """LambdaLR's and MultiplicativeLR's shared part: one function per group. As PyTorch, a
    state dict keeps the attributes of callable objects but not functions (``None``)."""

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, type(self).__name__)
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, list | tuple) else [
            lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"{type(self).__name__}: expected {n} lr_lambdas (one per "
                             f"parameter group), got {len(self.lr_lambdas)}")
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"lr_lambda should be a function, but got {type(f).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}
        state["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(vars(f))
                               for f in self.lr_lambdas]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict({k: v for k, v in state.items() if k != "lr_lambdas"})
        for f, saved in zip(self.lr_lambdas, state.get("lr_lambdas", [])):
            if saved is not None:
                f.__dict__.update(saved)


class LambdaLR(_LambdaScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``, one function for all groups or one each
    (functions are not saved in ``state_dict()``, as in PyTorch)."""

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch)
                for base, f in zip(self.base_lrs, self.lr_lambdas, strict=True)]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply each group's current rate by ``lr_lambda(last_epoch)`` at every ``step()``."""

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [g["lr"] for g in groups]
        return [g["lr"] * f(self.last_epoch) for g, f in zip(groups, self.lr_lambdas, strict=True)]


class StepLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` every ``step_size`` calls of ``step()``.

    As ``torch.optim.lr_scheduler.StepLR`` (stepped once per epoch in PyTorch's MNIST
    example): after ``t`` steps the rate is ``base_lr * gamma ** (t // step_size)``,
    computed the same way PyTorch does (one multiplication per decay), so the numbers match.
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        decay = self.last_epoch != 0 and self.last_epoch % self.step_size == 0
        return [g["lr"] * self.gamma if decay else g["lr"] for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` when ``last_epoch`` reaches each milestone
    (twice at a milestone given twice)."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        if any(isinstance(m, bool) or not isinstance(m, int) for m in milestones):
            raise ValueError(f"MultiStepLR: milestones must be integers, got {list(milestones)}")
        self.milestones, self.gamma = Counter(int(m) for m in milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        times = self.milestones.get(self.last_epoch, 0)
        return [g["lr"] * self.gamma ** times if times else g["lr"]
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """``base_lr * factor`` for the first ``total_iters`` steps, then ``base_lr``."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return [g["lr"] for g in groups]
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        done = self.last_epoch >= self.total_iters
        return [base * (self.factor + done * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The rate goes linearly from ``base_lr * start_factor`` to ``base_lr * end_factor``
    over ``total_iters`` steps, then stays (a warm-up: ``LinearLR(opt, 0.1, 1.0, 5)``)."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups, t = self.optimizer.param_groups, self.last_epoch
        if t == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or t > self.total_iters:
            return [g["lr"] for g in groups]
        rise = self.end_factor - self.start_factor  # (the factor of step t over step t - 1)
        factor = 1.0 + rise / (self.total_iters * self.start_factor + (t - 1) * rise)
        return [g["lr"] * factor for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        done = min(self.total_iters, self.last_epoch)  # (PyTorch's order of operations)
        return [base * (self.start_factor
                        + (self.end_factor - self.start_factor) * done / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` at every ``step()``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [g["lr"] if self._is_initial else g["lr"] * self.gamma
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - t / total_iters) ** power`` for ``t <= total_iters``, then 0."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups, t, n = self.optimizer.param_groups, self.last_epoch, self.total_iters
        if self._is_initial or t > n:
            return [g["lr"] for g in groups]
        factor = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [g["lr"] * factor for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * left ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``lr_t = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``.

    ``t`` counts ``step()`` calls, so after ``T_max`` steps the rate has decayed from each
    group's ``base_lr`` to ``eta_min``; past it the rate rises again (a cosine of period
    ``2 * T_max``), as PyTorch's. Each step computes it as PyTorch does, from the current
    rate (``lr_t = eta_min + (lr_{t-1} - eta_min) * (1 + cos(pi t / T)) / (1 + cos(pi (t - 1)
    / T))``; at the bottoms, where that quotient is 0/0, by adding the step's rise), so that
    it chains with another scheduler stepped alongside and matches PyTorch's numbers. The
    first step of one made with ``last_epoch=`` uses the closed form.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        if isinstance(T_max, bool) or not isinstance(T_max, int | float) or not T_max > 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be > 0, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, groups, T = self.last_epoch, self.optimizer.param_groups, self.T_max  # noqa: N806
        if self._is_initial:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and t > 0:  # resumed with last_epoch=: the closed form
            return self._get_closed_form_lr()
        if (t - 1 - T) % (2 * T) == 0:  # the step up from a bottom (eta_min)
            rise = (1 - math.cos(math.pi / T)) / 2
            return [g["lr"] + (base - self.eta_min) * rise
                    for base, g in zip(self.base_lrs, groups, strict=True)]
        factor = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [factor * (g["lr"] - self.eta_min) + self.eta_min for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter): a cosine from ``base_lr`` down towards ``eta_min`` over
    ``T_i`` steps, then a restart at ``base_lr``; the first period is ``T_0`` steps, each
    next one ``T_mult`` times longer::

        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2

    ``T_cur`` counts the steps since the last restart. ``step(epoch)`` takes a float epoch
    (``scheduler.step(epoch + i / len(loader))`` once per batch) and places the schedule at
    it, as PyTorch's; ``step()`` adds one.
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if isinstance(T_0, bool) or not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if isinstance(T_mult, bool) or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if isinstance(eta_min, bool) or not isinstance(eta_min, float | int):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """One step further, or to ``epoch`` (a float: the fraction of a period passed)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:  # a restart
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:  # the period that holds epoch: T_0 (1 + T_mult + ... + T_mult^(n-1)) <= epoch
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        self._set(self.get_lr())


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith), stepped once per batch: each group's rate goes from
    ``base_lr`` up to ``max_lr`` over ``step_size_up`` steps and back over
    ``step_size_down`` (default: the same), the amplitude scaled by the mode:
    ``"triangular"`` (1), ``"triangular2"`` (halved each cycle), ``"exp_range"``
    (``gamma ** step``), or by ``scale_fn(x)`` of the cycle number or of the step
    (``scale_mode``). With ``cycle_momentum`` the momentum (SGD's ``momentum``, Adam's
    ``beta1``) moves the other way, between ``max_momentum`` and ``base_momentum``. As
    PyTorch's: ``base_lr`` replaces the groups' rates when the scheduler is made.
    """

    def __init__(self, optimizer: Optimizer, base_lr: float | Sequence[float],
                 max_lr: float | Sequence[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.8,
                 max_momentum: float | Sequence[float] = 0.9, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "CyclicLR")
        base_lrs = _per_group("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _per_group("CyclicLR", "max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        # the built-in modes fix what their scale is a function of
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("CyclicLR", "base_momentum", optimizer,
                                             base_momentum)
            self.max_momentums = _per_group("CyclicLR", "max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for top, low, group in zip(self.max_momentums, self.base_momentums,
                                           optimizer.param_groups, strict=True):
                    _set_momentum(group, top, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = top, low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at ``x`` (the cycle number, or the step)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle  # position in the cycle, [0, 1)
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * scale_factor * scale
               for base, top in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for group, low, top in zip(self.optimizer.param_groups, self.base_momentums,
                                       self.max_momentums, strict=True):
                _set_momentum(group, top - (top - low) * scale_factor * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """As PyTorch's: a ``scale_fn`` that is a function is not saved (``None``); a
        callable object's attributes are."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = (None if fn is None or isinstance(fn, types.FunctionType)
                                     else dict(vars(fn)))
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        fn = state.pop("_scale_fn_custom", None)
        super().load_state_dict(state)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)


def _set_momentum(group: dict[str, Any], value: float, use_beta1: bool) -> None:
    """Set a group's momentum: SGD's ``momentum``, or Adam's ``beta1``."""
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith), stepped once per batch for ``total_steps`` batches
    (or ``epochs * steps_per_epoch``).

    The rate rises from ``max_lr / div_factor`` to ``max_lr`` over the first
    ``pct_start`` of the steps, then falls to ``initial / final_div_factor``, along a
    cosine (or a line: ``anneal_strategy="linear"``); ``three_phase`` adds a symmetric
    descent to the initial rate before the final one. With ``cycle_momentum`` the momentum
    (SGD's ``momentum``, Adam's ``beta1``) moves the other way, between ``max_momentum`` and
    ``base_momentum``. Stepping past ``total_steps`` raises, as in PyTorch.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.85,
                 max_momentum: float | Sequence[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "OneCycleLR")
        if total_steps is None:
            if not epochs or not steps_per_epoch or epochs <= 0 or steps_per_epoch <= 0:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch "
                                 "(all positive)")
            total_steps = epochs * steps_per_epoch
        if not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self.phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                           (2 * up, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                           (total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                            "max_momentum")]
        else:
            self.phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                           (total_steps - 1, "max_lr", "min_lr", "base_momentum",
                            "max_momentum")]
        groups = optimizer.param_groups
        max_lrs = _per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        self.cycle_momentum = cycle_momentum
        if cycle_momentum and not any(k in optimizer.defaults for k in ("momentum", "betas")):
            raise ValueError("OneCycleLR: the optimizer has neither momentum nor betas; pass "
                             "cycle_momentum=False")
        self.use_beta1 = "betas" in optimizer.defaults
        if last_epoch == -1:  # (resumed: the groups have them, from the optimizer's state)
            for group, top in zip(groups, max_lrs, strict=True):
                group["initial_lr"] = top / div_factor
                group["max_lr"], group["min_lr"] = top, group["initial_lr"] / final_div_factor
            if cycle_momentum:  # (not cycled: the momentum lists are not read)
                highs = _per_group("OneCycleLR", "max_momentum", optimizer, max_momentum)
                lows = _per_group("OneCycleLR", "base_momentum", optimizer, base_momentum)
                for group, high, low in zip(groups, highs, lows, strict=True):
                    group["max_momentum"], group["base_momentum"] = high, low
                    _set_momentum(group, high, self.use_beta1)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times, more than total_steps "
                             f"({self.total_steps})")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr0, lr1, m0, m1) in enumerate(self.phases):
                if step <= end_step or i == len(self.phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        _set_momentum(group, self._anneal(group[m0], group[m1], pct),
                                      self.use_beta1)
                    break
                start_step = end_step
        return lrs


class _Composite(LRScheduler):
    """SequentialLR's and ChainedScheduler's shared part: the state dict holds each inner
    scheduler's own."""

    _schedulers: list[LRScheduler]

    @staticmethod
    def _check(who: str, schedulers: Sequence[Any], optimizer: Optimizer) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{who} expects at least one scheduler, but got no scheduler.")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"{who} at index {i} should have `optimizer` as its attribute.")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    f"{who} does not support `ReduceLROnPlateau` scheduler as it requires "
                    "additional kwargs to be specified when calling `step`, but got one at "
                    f"index {i} in the given schedulers sequence.")
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"{who} expects all schedulers to belong to the same optimizer, but got "
                    f"scheduler {type(s).__name__} at index {i} has {s.optimizer}, which is "
                    f"different from {type(optimizer).__name__}.")

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in super().state_dict().items() if k != "_schedulers"}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict({k: v for k, v in state.items() if k != "_schedulers"})
        for s, saved in zip(self._schedulers, state["_schedulers"]):
            s.load_state_dict(saved)


class SequentialLR(_Composite):
    """One scheduler after another: ``schedulers[i]`` runs from ``milestones[i - 1]`` on (a
    warm-up then a decay: ``SequentialLR(opt, [LinearLR(...), CosineAnnealingLR(...)],
    milestones=[5])``). At a milestone the next scheduler starts at its step 0 (from the
    groups' ``initial_lr``, through its closed form where it has one), as PyTorch's."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int], last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "SequentialLR")
        self._check("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # undo what the schedulers' constructors did
            group["lr"] = group["initial_lr"]
        for s in self._all(self):
            s.last_epoch -= 1
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()  # only the scheduler of step 0 starts now
        self._last_lr = first.get_last_lr()

    @staticmethod
    def _all(scheduler: LRScheduler) -> list[LRScheduler]:
        """The innermost schedulers (through nested SequentialLR / ChainedScheduler)."""
        if isinstance(scheduler, _Composite):
            return [s for inner in scheduler._schedulers for s in SequentialLR._all(inner)]
        return [scheduler]

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._update_lr(0)  # this scheduler's turn: its step 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step several schedulers together, each changing the rate the previous one set
    (``ChainedScheduler([ConstantLR(...), ExponentialLR(...)])``)."""

    def __init__(self, schedulers: Sequence[LRScheduler],
                 optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        self._check("ChainedScheduler", schedulers, optimizer)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def step(self) -> None:  # type: ignore[override]
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rates by ``factor`` once ``metric`` (given to ``step(metric)``, e.g. the
    validation loss) has not improved for more than ``patience`` steps, then wait
    ``cooldown`` steps before counting again; never below ``min_lr``.

    ``mode="min"`` (a loss) or ``"max"`` (an accuracy); an improvement must beat the best
    value by ``threshold``, relatively (``"rel"``) or absolutely (``"abs"``). Changes smaller
    than ``eps`` are skipped. As PyTorch's (which records no ``initial_lr``).
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float | Sequence[float] = 0.0, eps: float = 1e-8
                 ) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode "
                             f"'rel' or 'abs', got {mode!r} and {threshold_mode!r}")
        _check_optimizer(optimizer, "ReduceLROnPlateau")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        self.default_min_lr = None if isinstance(min_lr, list | tuple) else min_lr
        self.min_lrs = list(min_lr) if isinstance(min_lr, list | tuple) else [min_lr] * n
        if len(self.min_lrs) != n:
            raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs, got {len(self.min_lrs)}")
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def get_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def _is_better(self, value: float) -> bool:
        if self.threshold_mode == "rel":
            scale = 1 - self.threshold if self.mode == "min" else 1 + self.threshold
            bound = self.best * scale
        else:
            bound = self.best - self.threshold if self.mode == "min" else self.best + self.threshold
        return value < bound if self.mode == "min" else value > bound

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        value = float(metrics)
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self.get_lr()

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):  # a group added since (add_param_group)
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, floor in zip(groups, self.min_lrs):
            new = max(group["lr"] * self.factor, floor)
            if group["lr"] - new > self.eps:
                group["lr"] = new


__getattr__ = _module_getattr(__name__, {}, (
    "tinytrain.optim.lr_scheduler has " + ", ".join(__all__)
    + "; other schedules are a LambdaLR"))
