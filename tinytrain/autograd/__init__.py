"""Reverse-mode automatic differentiation: Function, the graph nodes, the engine."""

from tinytrain.autograd.engine import queue_callback, run_backward
from tinytrain.autograd.function import AccumulateGrad, Context, Function, Node
from tinytrain.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = [
    "AccumulateGrad",
    "Context",
    "Function",
    "Node",
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "run_backward",
    "set_grad_enabled",
]
