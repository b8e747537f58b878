"""Learning-rate schedules: each ``scheduler.step()`` sets every parameter group's ``lr``.

All follow :class:`LRScheduler`, PyTorch's mechanism: ``last_epoch`` counts ``step()``
calls (0 after construction, which already sets the rate for step 0), and each call sets
the rates ``get_lr()`` computes for the new ``last_epoch``. Where PyTorch computes a rate
from the previous one (StepLR, MultiStepLR, ExponentialLR multiply the current rate),
tinytrain does the same arithmetic, so the numbers match PyTorch's bit for bit.
Step them once per epoch or once per batch, as the schedule is meant (OneCycleLR: per
batch). :class:`ReduceLROnPlateau` is the exception: ``step(metric)`` lowers the rate when
the metric stops improving.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.optim.optimizer import Optimizer


class LRScheduler:
    """Base class: subclasses define ``get_lr()``, the rates for ``self.last_epoch``."""

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__} needs an Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        # As PyTorch: the first scheduler records each group's rate as "initial_lr", and
        # every scheduler made later (a cosine after a warm-up) starts from it, not from
        # whatever rate the groups have reached by then.
        self.base_lrs = [g.setdefault("initial_lr", g["lr"]) for g in optimizer.param_groups]
        self.last_epoch = 0
        self._set(self.get_lr())

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def step(self) -> None:
        if self.last_epoch == 0 and getattr(self.optimizer, "_step_count", 1) == 0:
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`: call them in "
                "the opposite order (optimizer first), or the first value of the schedule is "
                "skipped (as PyTorch warns)", UserWarning, stacklevel=2)
        self.last_epoch += 1
        self._set(self.get_lr())

    def _set(self, lrs: Sequence[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = list(lrs)

    def get_last_lr(self) -> list[float]:
        """The rates the last ``step()`` (or the construction) set."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (and functions, which cannot be saved)."""
        return {k: v for k, v in vars(self).items()
                if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class CosineAnnealingLR(LRScheduler):
    """``lr_t = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``.

    ``t`` counts ``step()`` calls, so after ``T_max`` steps the rate has decayed from each
    group's ``base_lr`` to ``eta_min``; past it the rate rises again (a cosine of period
    ``2 * T_max``), as PyTorch's. Each step computes it as PyTorch does, from the current
    rate (``lr_t = eta_min + (lr_{t-1} - eta_min) * (1 + cos(pi t / T)) / (1 + cos(pi (t - 1)
    / T))``; at the bottoms, where that quotient is 0/0, by adding the step's rise), so that
    it chains with another scheduler stepped alongside and matches PyTorch's numbers.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803
        if isinstance(T_max, bool) or not isinstance(T_max, int | float) or not T_max > 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be > 0, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        t, groups, T = self.last_epoch, self.optimizer.param_groups, self.T_max  # noqa: N806
        if t == 0:
            return [g["lr"] for g in groups]
        if (t - 1 - T) % (2 * T) == 0:  # the step up from a bottom (eta_min)
            rise = (1 - math.cos(math.pi / T)) / 2
            return [g["lr"] + (base - self.eta_min) * rise
                    for base, g in zip(self.base_lrs, groups)]
        factor = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [self.eta_min + (g["lr"] - self.eta_min) * factor for g in groups]

    def state_dict(self) -> dict[str, Any]:
        return {"T_max": self.T_max, "eta_min": self.eta_min, "base_lrs": list(self.base_lrs),
                "last_epoch": self.last_epoch, "_last_lr": list(self._last_lr)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the schedule's position and the rates it had set (so that it continues
        even where the optimizer's own state was not loaded; a state from before the rates
        were saved gets them from the closed form)."""
        self.T_max, self.eta_min = state["T_max"], float(state["eta_min"])
        self.base_lrs, self.last_epoch = list(state["base_lrs"]), int(state["last_epoch"])
        if "_last_lr" in state:
            self._set(list(state["_last_lr"]))
        else:
            t = self.last_epoch
            self._set([self.eta_min + (base - self.eta_min)
                       * (1 + math.cos(math.pi * t / self.T_max)) / 2 for base in self.base_lrs])


class StepLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` every ``step_size`` calls of ``step()``.

    As ``torch.optim.lr_scheduler.StepLR`` (stepped once per epoch in PyTorch's MNIST
    example): after ``t`` steps the rate is ``base_lr * gamma ** (t // step_size)``,
    computed the same way PyTorch does (one multiplication per decay), so the numbers match.
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        decay = self.last_epoch > 0 and self.last_epoch % self.step_size == 0
        return [g["lr"] * self.gamma if decay else g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"step_size": self.step_size, "gamma": self.gamma,
                "base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch,
                "_last_lr": list(self._last_lr)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_size, self.gamma = int(state["step_size"]), float(state["gamma"])
        self.base_lrs, self.last_epoch = list(state["base_lrs"]), int(state["last_epoch"])
        self._last_lr = list(state.get("_last_lr", [g["lr"] for g in self.optimizer.param_groups]))


class MultiStepLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` when ``last_epoch`` reaches each milestone."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1
                 ) -> None:
        if any(isinstance(m, bool) or not isinstance(m, int) for m in milestones):
            raise ValueError(f"MultiStepLR: milestones must be integers, got {list(milestones)}")
        self.milestones, self.gamma = Counter(int(m) for m in milestones), gamma
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        times = self.milestones.get(self.last_epoch, 0)
        return [g["lr"] * self.gamma ** times if times else g["lr"]
                for g in self.optimizer.param_groups]


class ExponentialLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` at every ``step()``."""

    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        self.gamma = gamma
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [g["lr"] * self.gamma if self.last_epoch > 0 else g["lr"]
                for g in self.optimizer.param_groups]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``, one function for all groups or one each
    (functions are not saved in ``state_dict()``, as in PyTorch)."""

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]]) -> None:
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, list | tuple) else [
            lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per parameter group), "
                             f"got {len(self.lr_lambdas)}")
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]


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
                 base_momentum: float = 0.85, max_momentum: float = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False) -> None:
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

        def per_group(name: str, value: Any) -> list[Any]:
            values = list(value) if isinstance(value, list | tuple) else [value] * len(groups)
            if len(values) != len(groups):
                raise ValueError(f"OneCycleLR: expected {len(groups)} values for {name} (one "
                                 f"per parameter group), got {len(values)}")
            return values

        max_lrs = per_group("max_lr", max_lr)
        unused = [None] * len(groups)  # (momentum not cycled: its values are not read)
        max_moms = per_group("max_momentum", max_momentum) if cycle_momentum else unused
        base_moms = per_group("base_momentum", base_momentum) if cycle_momentum else unused
        self.cycle_momentum = cycle_momentum
        if cycle_momentum and not any(k in optimizer.defaults for k in ("momentum", "betas")):
            raise ValueError("OneCycleLR: the optimizer has neither momentum nor betas; pass "
                             "cycle_momentum=False")
        self.use_beta1 = "betas" in optimizer.defaults
        for group, top, high, low in zip(groups, max_lrs, max_moms, base_moms):
            group["initial_lr"] = top / div_factor
            group["max_lr"], group["min_lr"] = top, group["initial_lr"] / final_div_factor
            group["lr"] = group["initial_lr"]
            if cycle_momentum:
                group["max_momentum"], group["base_momentum"] = high, low
                self._set_momentum(group, high)
        super().__init__(optimizer)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

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
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start_step = end_step
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rates by ``factor`` once ``metric`` (given to ``step(metric)``, e.g. the
    validation loss) has not improved for more than ``patience`` steps, then wait
    ``cooldown`` steps before counting again; never below ``min_lr``.

    ``mode="min"`` (a loss) or ``"max"`` (an accuracy); an improvement must beat the best
    value by ``threshold``, relatively (``"rel"``) or absolutely (``"abs"``). Changes smaller
    than ``eps`` are skipped. As PyTorch's.
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
        n = len(optimizer.param_groups)
        self.min_lrs = list(min_lr) if isinstance(min_lr, list | tuple) else [min_lr] * n
        if len(self.min_lrs) != n:
            raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs, got {len(self.min_lrs)}")
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def _is_better(self, value: float) -> bool:
        if self.threshold_mode == "rel":
            scale = 1 - self.threshold if self.mode == "min" else 1 + self.threshold
            bound = self.best * scale
        else:
            bound = self.best - self.threshold if self.mode == "min" else self.best + self.threshold
        return value < bound if self.mode == "min" else value > bound

    def step(self, metrics: Any) -> None:  # type: ignore[override]
        value = float(metrics)
        self.last_epoch += 1
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(group["lr"] * self.factor, floor)
                if group["lr"] - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self.get_lr()


__getattr__ = _module_getattr(__name__, {}, (
    "tinytrain.optim.lr_scheduler has StepLR, MultiStepLR, ExponentialLR, LambdaLR, "
    "CosineAnnealingLR, OneCycleLR and ReduceLROnPlateau; others are a LambdaLR"))
