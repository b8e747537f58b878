"""Adam (Kingma & Ba), with bias correction, as PyTorch computes it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytrain import kernels
from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class Adam(Optimizer):
    """For each parameter, at step ``t``::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    The update is the kernel set's ``adam_step`` (one fused kernel per parameter on the GPU).
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0) -> None:
        if not lr >= 0:  # 0 is allowed (a frozen run), as in PyTorch; NaN is not
            raise ValueError(f"Adam: learning rate must be >= 0, got {lr}")
        if len(betas) != 2 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"Adam: betas must be in [0, 1), got {betas}")
        if not eps >= 0 or not weight_decay >= 0:
            raise ValueError(f"Adam: eps ({eps}) and weight_decay ({weight_decay}) must be >= 0")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(adam_state, l2=False):  # the kernel adds the decay
            kernels.for_array(p.data).adam_step(
                p.data, g, state["exp_avg"], state["exp_avg_sq"], state["step"], group["lr"],
                group["betas"], group["eps"], group["weight_decay"])


def adam_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """Adam's and AdamW's state: the two moment estimates, zero."""
    xp = get_array_module(data)
    return {"exp_avg": xp.zeros_like(data), "exp_avg_sq": xp.zeros_like(data)}
