"""RMSprop (Hinton), as PyTorch computes it: the optimizer of "Learning PyTorch with Examples"."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class RMSprop(Optimizer):
    """For each parameter, with a running average ``v`` of g^2::

        g = -g                                   (maximize)
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g^2
        avg = sqrt(v - mean_g^2) + eps           (centered: mean_g = running average of g)
        avg = sqrt(v) + eps                      (otherwise)
        buf = momentum * buf + g / avg;  p = p - lr * buf      (momentum > 0)
        p = p - lr * g / avg                                   (otherwise)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        for name, value in (("lr", lr), ("alpha", alpha), ("eps", eps),
                            ("weight_decay", weight_decay), ("momentum", momentum)):
            if not value >= 0:
                raise ValueError(f"RMSprop: {name} must be >= 0, got {value}")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(_new_state):
            xp = get_array_module(p._data)
            lr, alpha = float(group["lr"]), group["alpha"]  # (a Tensor lr too)
            eps, momentum = group["eps"], group["momentum"]
            v = state["square_avg"]
            v *= alpha
            v += (1 - alpha) * g * g
            if group["centered"]:
                mean_g = state["grad_avg"]
                mean_g += (g - mean_g) * (1 - alpha)
                avg = xp.sqrt(v - mean_g * mean_g) + eps
            else:
                avg = xp.sqrt(v) + eps
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf *= momentum
                buf += g / avg
                p._data -= (lr * buf).astype(p.dtype, copy=False)
            else:
                p._data -= (lr * g / avg).astype(p.dtype, copy=False)


def _new_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """The running mean of g^2, and the momentum buffer and mean of g if the group uses them."""
    xp = get_array_module(data)
    state = {"square_avg": xp.zeros_like(data)}
    if group["momentum"] > 0:
        state["momentum_buffer"] = xp.zeros_like(data)
    if group["centered"]:
        state["grad_avg"] = xp.zeros_like(data)
    return state
