"""RAdam (Liu et al., 2019): Adam whose adaptive step is switched on, and rectified, only once
the variance estimate is trustworthy; as PyTorch computes it."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.adam import adam_state, check_arguments
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class RAdam(Optimizer):
    """For each parameter, at step ``t``::

        g = -g                                   (maximize)
        g = g + weight_decay * p                 (p = p * (1 - lr * weight_decay) when
                                                  decoupled_weight_decay)
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        m_hat = m / (1 - beta1^t)
        rho_inf = 2 / (1 - beta2) - 1            rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
        if rho_t > 5:                            (the variance is tractable)
            r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            p = p - lr * m_hat * sqrt(1 - beta2^t) / (sqrt(v) + eps) * r
        else:                                    (the first few steps: SGD with momentum)
            p = p - lr * m_hat
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        check_arguments("RAdam", lr, betas, eps, weight_decay)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
            maximize=maximize, foreach=foreach, capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(adam_state, l2=False):  # decay: below
            xp = get_array_module(p._data)
            lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
            t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
            weight_decay = group["weight_decay"]
            if weight_decay and group["decoupled_weight_decay"]:
                p._data *= 1 - lr * weight_decay
            elif weight_decay:
                g = g + weight_decay * p._data
            m += (g - m) * (1 - beta1)
            v *= beta2
            v += (1 - beta2) * g * g
            bias_correction2 = 1 - beta2 ** t
            m_hat = m / (1 - beta1 ** t)
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * t * beta2 ** t / bias_correction2
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                 / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                adaptive = math.sqrt(bias_correction2) / (xp.sqrt(v) + eps)
                p._data -= (m_hat * lr * adaptive * rect).astype(p.dtype, copy=False)
            else:
                p._data -= (m_hat * lr).astype(p.dtype, copy=False)
