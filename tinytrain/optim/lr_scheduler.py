"""Learning-rate schedules, stepped once per training step (``scheduler.step()``)."""

from __future__ import annotations

import math
from typing import Any

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.optim.optimizer import Optimizer


class CosineAnnealingLR:
    """``lr_t = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``.

    PyTorch's closed form: ``t`` counts ``step()`` calls, so after ``T_max`` steps the
    rate has decayed from each group's ``base_lr`` to ``eta_min``. Unlike PyTorch's, it
    then stays at ``eta_min`` instead of rising again.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be > 0, got {T_max}")
        self.optimizer, self.T_max, self.eta_min = optimizer, T_max, eta_min
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = 0
        self._apply()

    def _apply(self) -> None:
        t = min(self.last_epoch, self.T_max)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = self.eta_min + (base - self.eta_min) * (
                1 + math.cos(math.pi * t / self.T_max)) / 2

    def step(self) -> None:
        self.last_epoch += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"T_max": self.T_max, "eta_min": self.eta_min, "base_lrs": list(self.base_lrs),
                "last_epoch": self.last_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.T_max, self.eta_min = int(state["T_max"]), float(state["eta_min"])
        self.base_lrs, self.last_epoch = list(state["base_lrs"]), int(state["last_epoch"])
        self._apply()


class StepLR:
    """Multiply each group's rate by ``gamma`` every ``step_size`` calls of ``step()``.

    As ``torch.optim.lr_scheduler.StepLR`` (stepped once per epoch in PyTorch's MNIST
    example): after ``t`` steps the rate is ``base_lr * gamma ** (t // step_size)``,
    computed the same way PyTorch does (one multiplication per decay), so the numbers match.
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.optimizer, self.step_size, self.gamma = optimizer, step_size, gamma
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = 0

    def step(self) -> None:
        self.last_epoch += 1
        if self.last_epoch % self.step_size == 0:
            for group in self.optimizer.param_groups:
                group["lr"] *= self.gamma

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"step_size": self.step_size, "gamma": self.gamma,
                "base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_size, self.gamma = int(state["step_size"]), float(state["gamma"])
        self.base_lrs, self.last_epoch = list(state["base_lrs"]), int(state["last_epoch"])


__getattr__ = _module_getattr(
    __name__, {}, "tinytrain.optim.lr_scheduler has StepLR and CosineAnnealingLR")
