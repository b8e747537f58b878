"""Adagrad (Duchi et al.), as PyTorch computes it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class Adagrad(Optimizer):
    """For each parameter, with the sum ``s`` of every g^2 so far, at step ``t``::

        g = g + weight_decay * p
        s = s + g^2
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10) -> None:
        for name, value in (("lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value),
                            ("eps", eps)):
            if not value >= 0:
                raise ValueError(f"Adagrad: {name} must be >= 0, got {value}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(_new_state):
            clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
            s = state["sum"]
            s += g * g
            p.data -= (clr * g / (get_array_module(s).sqrt(s) + group["eps"])).astype(
                p.dtype, copy=False)


def _new_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """The sum of g^2, starting at the group's initial_accumulator_value."""
    return {"sum": get_array_module(data).full_like(data, group["initial_accumulator_value"])}
