"""Adadelta (Zeiler, 2012), as PyTorch computes it: the optimizer of PyTorch's MNIST example."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class Adadelta(Optimizer):
    """For each parameter, with running averages ``v`` (of g^2) and ``u`` (of updates^2)::

        g = -g                                   (maximize)
        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g^2
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta^2
        p = p - lr * delta

    ``lr`` only scales the update (PyTorch's default is 1.0).
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        if not lr >= 0:
            raise ValueError(f"Adadelta: learning rate must be >= 0, got {lr}")
        if not 0 <= rho <= 1:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {rho}")
        if not eps >= 0 or not weight_decay >= 0:
            raise ValueError(f"Adadelta: eps ({eps}) and weight_decay ({weight_decay}) must "
                             "be >= 0")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable,
                                      foreach=foreach, differentiable=differentiable))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(_new_state):
            xp = get_array_module(p._data)
            lr, rho, eps = float(group["lr"]), group["rho"], group["eps"]
            v, u = state["square_avg"], state["acc_delta"]
            v *= rho
            v += (1 - rho) * g * g
            delta = xp.sqrt(u + eps) / xp.sqrt(v + eps) * g
            u *= rho
            u += (1 - rho) * delta * delta
            p._data -= (lr * delta).astype(p.dtype, copy=False)


def _new_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """The running means of g^2 and of the squared updates, zero."""
    xp = get_array_module(data)
    return {"square_avg": xp.zeros_like(data), "acc_delta": xp.zeros_like(data)}
