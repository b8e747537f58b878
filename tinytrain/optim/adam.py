"""Adam (Kingma & Ba), with bias correction, as PyTorch computes it."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class Adam(Optimizer):
    """For each parameter, at step ``t``::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        if lr <= 0:
            raise ValueError(f"Adam: learning rate must be > 0, got {lr}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"Adam: betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                xp = get_array_module(p.data)
                g = p.grad.data
                if wd:
                    g = g + wd * p.data
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = xp.zeros_like(p.data)
                    state["exp_avg_sq"] = xp.zeros_like(p.data)
                state["step"] += 1
                t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                m *= b1
                m += (1 - b1) * g
                v *= b2
                v += (1 - b2) * g * g
                step_size = lr / (1 - b1**t)
                denom = xp.sqrt(v) / math.sqrt(1 - b2**t) + eps
                p.data -= (step_size * m / denom).astype(p.dtype, copy=False)
