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

        g = -g                                   (maximize)
        g = g + weight_decay * p
        s = s + g^2
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    As PyTorch's: ``s`` starts at the constructor's ``initial_accumulator_value`` for every
    parameter (a group's own value is not used), and the state is made when the optimizer
    is, so ``state_dict()`` has it before the first step.
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        for name, value in (("lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value),
                            ("eps", eps)):
            if not value >= 0:
                raise ValueError(f"Adagrad: {name} must be >= 0, got {value}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for p in self._params():
            self.state[p] = {"step": 0, **_new_state(p._data, self.defaults)}

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(lambda data, _: _new_state(data, self.defaults)):
            clr = float(group["lr"]) / (1 + (state["step"] - 1) * group["lr_decay"])
            s = state["sum"]
            s += g * g
            p._data -= (clr * g / (get_array_module(s).sqrt(s) + group["eps"])).astype(
                p.dtype, copy=False)


def _new_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """The sum of g^2, starting at the constructor's initial_accumulator_value (``group``:
    the defaults, also for a group added later, as PyTorch)."""
    return {"sum": get_array_module(data).full_like(data, group["initial_accumulator_value"])}
