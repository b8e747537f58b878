"""NAdam (Dozat, 2016): Adam with Nesterov momentum, as PyTorch computes it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tinytrain import dtypes
from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.adam import adam_state, check_arguments
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class NAdam(Optimizer):
    """For each parameter, at step ``t``::

        g = -g                                   (maximize)
        g = g + weight_decay * p                 (p = p * (1 - lr * weight_decay) when
                                                  decoupled_weight_decay)
        mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))      (the momentum schedule)
        mu_product = mu_1 * mu_2 * ... * mu_t
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        denom = sqrt(v / (1 - beta2^t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom
              - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    The second line of the update is the Nesterov look-ahead: the momentum of the next step.
    As PyTorch, ``mu_product`` is kept in the state as a 0-d array of float32 (float64 when
    that is the default dtype).
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_arguments("NAdam", lr, betas, eps, weight_decay)
        if not momentum_decay >= 0:
            raise ValueError(f"NAdam: momentum_decay must be >= 0, got {momentum_decay}")
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize, foreach=foreach, capturable=capturable,
            differentiable=differentiable))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(_new_state, l2=False):  # decay: below
            xp = get_array_module(p._data)
            lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
            t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
            weight_decay = group["weight_decay"]
            if weight_decay and group["decoupled_weight_decay"]:
                p._data *= 1 - lr * weight_decay
            elif weight_decay:
                g = g + weight_decay * p._data
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * group["momentum_decay"]))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * group["momentum_decay"]))
            state["mu_product"] *= mu  # (a 0-d array: in place, in its own dtype)
            mu_product = float(state["mu_product"])
            m += (g - m) * (1 - beta1)
            v *= beta2
            v += (1 - beta2) * g * g
            denom = xp.sqrt(v / (1 - beta2 ** t)) + eps
            p._data -= (lr * (1.0 - mu) / (1.0 - mu_product) * g / denom).astype(
                p.dtype, copy=False)
            p._data -= (lr * mu_next / (1.0 - mu_product * mu_next) * m / denom).astype(
                p.dtype, copy=False)


def _new_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """The running product of the momentum schedule (1), and Adam's two moments (zero)."""
    scalar = np.float64 if dtypes.get_default_dtype() == dtypes.float64 else np.float32
    return {"mu_product": np.array(1.0, dtype=scalar), **adam_state(data, group)}
