"""Stochastic gradient descent with momentum and weight decay (PyTorch's formulation)."""

from __future__ import annotations

from collections.abc import Iterable

from tinytrain import kernels
from tinytrain.autograd import no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor


class SGD(Optimizer):
    """For each parameter ``p`` with gradient ``g``::

        g = -g                                   (maximize: ascend)
        g = g + weight_decay * p
        buf = g                                  (first step)
        buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g

    The update is the kernel set's ``sgd_step`` (one fused kernel per parameter on the GPU).
    ``foreach`` and ``fused`` are accepted and change nothing (the same numbers);
    ``differentiable`` must stay False.
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0,
                 nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        if not lr >= 0:  # 0 is allowed (a frozen run), as in PyTorch; NaN is not
            raise ValueError(f"SGD: learning rate must be >= 0, got {lr}")
        if momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: momentum ({momentum}) and weight_decay ({weight_decay}) "
                             "must be >= 0")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    @no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
            wd, nesterov = group["weight_decay"], group["nesterov"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf, first = None, False
                if mom:
                    state = self.state.setdefault(p, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:  # the first step fills it with the gradient
                        buf = state["momentum_buffer"] = get_array_module(p._data).empty_like(
                            p._data)
                        first = True
                g = -self._grad(p) if group["maximize"] else self._grad(p)
                kernels.for_array(p._data).sgd_step(p._data, g, buf, lr, mom, damp, wd, nesterov,
                                                   first)
                p._version_counter[0] += 1  # written in place: a graph that saved p must see it
