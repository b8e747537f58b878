"""Adam (Kingma & Ba), with bias correction, as PyTorch computes it; its options AMSGrad,
``maximize`` and decoupled weight decay (AdamW)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tinytrain import kernels
from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class Adam(Optimizer):
    """For each parameter, at step ``t``::

        g = -g                                   (maximize)
        g = g + weight_decay * p                 (p = p * (1 - lr * weight_decay) when
                                                  decoupled_weight_decay: AdamW)
        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
        v_max = max(v_max, v); v = v_max         (amsgrad: the largest v so far)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    The update is the kernel set's ``adam_step`` (one fused kernel per parameter on the GPU);
    with ``amsgrad`` it is :func:`amsgrad_step` (array code). ``foreach`` and ``fused`` are
    accepted and change nothing (PyTorch's fused CPU Adam gives the same numbers);
    ``capturable`` and ``differentiable`` must stay False.
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        check_arguments(type(self).__name__, lr, betas, eps, weight_decay)
        super().__init__(params, dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
            maximize=maximize, foreach=foreach, capturable=capturable,
            differentiable=differentiable, fused=fused,
            decoupled_weight_decay=decoupled_weight_decay))

    @no_grad()
    def step(self) -> None:
        for group, p, g, state in self._updates(adam_state, l2=False):  # decay: below
            lr, weight_decay = float(group["lr"]), group["weight_decay"]  # (a Tensor lr too)
            if group["decoupled_weight_decay"] and weight_decay:  # shrink the weights instead
                p._data *= 1 - lr * weight_decay
                weight_decay = 0
            if group["amsgrad"]:
                amsgrad_step(p._data, g, state["exp_avg"], state["exp_avg_sq"],
                             state["max_exp_avg_sq"], state["step"], lr, group["betas"],
                             group["eps"], weight_decay)
            else:
                kernels.for_array(p._data).adam_step(
                    p._data, g, state["exp_avg"], state["exp_avg_sq"], state["step"], lr,
                    group["betas"], group["eps"], weight_decay)


def check_arguments(name: str, lr: float, betas: tuple[float, float], eps: float,
                    weight_decay: float) -> None:
    """The checks of Adam and its variants (NAdam, RAdam, Adamax): ValueError naming the
    optimizer and the argument."""
    if not lr >= 0:  # 0 is allowed (a frozen run), as in PyTorch; NaN is not
        raise ValueError(f"{name}: learning rate must be >= 0, got {lr}")
    if len(betas) != 2 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
        raise ValueError(f"{name}: betas must be in [0, 1), got {betas}")
    if not eps >= 0 or not weight_decay >= 0:
        raise ValueError(f"{name}: eps ({eps}) and weight_decay ({weight_decay}) must be >= 0")


def adam_state(data: Any, group: dict[str, Any]) -> dict[str, Any]:
    """Adam's and AdamW's state: the two moment estimates, zero (and, with ``amsgrad``, the
    largest second moment so far, ``max_exp_avg_sq``, as PyTorch names it)."""
    xp = get_array_module(data)
    state = {"exp_avg": xp.zeros_like(data), "exp_avg_sq": xp.zeros_like(data)}
    if group.get("amsgrad"):
        state["max_exp_avg_sq"] = xp.zeros_like(data)
    return state


def amsgrad_step(p: Any, g: Any, m: Any, v: Any, v_max: Any, step: int, lr: float,
                 betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """One AMSGrad update (Reddi et al.), in place, on NumPy or CuPy arrays of one shape:
    Adam's, with the running maximum ``v_max`` of ``v`` in the denominator, so that the
    step of a parameter never grows because its gradients got smaller."""
    xp = get_array_module(p)
    beta1, beta2 = betas
    if weight_decay:
        g = g + weight_decay * p
    m += (g - m) * (1 - beta1)
    v *= beta2
    v += (1 - beta2) * g * g
    xp.maximum(v_max, v, out=v_max)
    denom = xp.sqrt(v_max) / math.sqrt(1 - beta2 ** step) + eps
    p -= (lr / (1 - beta1 ** step) * m / denom).astype(p.dtype, copy=False)
