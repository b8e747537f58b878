"""AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, as PyTorch computes it."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.adam import adam_state
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class AdamW(Optimizer):
    """For each parameter, at step ``t``::

        p = p * (1 - lr * weight_decay)          (decay the weights, not the gradient)
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Unlike ``Adam(weight_decay=...)``, whose decay is added to the gradient and then scaled
    by Adam's per-parameter step, the decay here shrinks every weight by the same factor.
    """

    inherent_options = frozenset({"decoupled_weight_decay"})  # (PyTorch's AdamW saves it)

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        if not lr >= 0:
            raise ValueError(f"AdamW: learning rate must be >= 0, got {lr}")
        if len(betas) != 2 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"AdamW: betas must be in [0, 1), got {betas}")
        if not eps >= 0 or not weight_decay >= 0:
            raise ValueError(f"AdamW: eps ({eps}) and weight_decay ({weight_decay}) must be >= 0")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(adam_state, l2=False):  # decoupled: below
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
            p.data *= 1 - lr * group["weight_decay"]
            m += (g - m) * (1 - beta1)
            v *= beta2
            v += (1 - beta2) * g * g
            denom = get_array_module(v).sqrt(v) / math.sqrt(1 - beta2 ** t) + eps
            p.data -= (lr / (1 - beta1 ** t) * m / denom).astype(p.dtype, copy=False)
