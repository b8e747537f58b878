"""Adamax (Kingma & Ba): Adam with the infinity norm in place of the second moment, as
PyTorch computes it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.adam import check_arguments
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class Adamax(Optimizer):
    """For each parameter, at step ``t``::

        g = -g                                   (maximize)
        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)            (a decaying maximum of |g|)
        p = p - lr / (1 - beta1^t) * m / u
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        check_arguments("Adamax", lr, betas, eps, weight_decay)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
            maximize=maximize, differentiable=differentiable, capturable=capturable))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(_new_state):
            xp = get_array_module(p._data)
            lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
            m, u = state["exp_avg"], state["exp_inf"]
            m += (g - m) * (1 - beta1)
            u *= beta2
            xp.maximum(u, xp.abs(g) + eps, out=u)
            p._data -= (lr / (1 - beta1 ** state["step"]) * m / u).astype(p.dtype, copy=False)


def _new_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """The first moment and the decaying maximum of |g|, zero (PyTorch's names)."""
    xp = get_array_module(data)
    return {"exp_avg": xp.zeros_like(data), "exp_inf": xp.zeros_like(data)}
