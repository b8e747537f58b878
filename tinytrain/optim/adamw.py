"""AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, as PyTorch computes it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytrain.optim.adam import Adam
from tinytrain.tensor import Tensor


class AdamW(Adam):
    """``Adam(decoupled_weight_decay=True)``, with a default decay of 0.01. For each
    parameter, at step ``t``::

        p = p * (1 - lr * weight_decay)          (decay the weights, not the gradient)
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Unlike ``Adam(weight_decay=...)``, whose decay is added to the gradient and then scaled
    by Adam's per-parameter step, the decay here shrinks every weight by the same factor.
    ``amsgrad`` and ``maximize`` as in :class:`Adam`.
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As :meth:`Optimizer.load_state_dict`; the decay stays decoupled whatever the saved
        groups say (PyTorch's AdamW does the same)."""
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
