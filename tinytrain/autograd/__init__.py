"""Reverse-mode automatic differentiation: Function, the graph nodes, the engine."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.autograd import functional
from tinytrain.autograd.engine import queue_callback, run_backward
from tinytrain.autograd.function import AccumulateGrad, Context, Function, Node
from tinytrain.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from tinytrain.autograd.gradients import backward, grad
from tinytrain.autograd.variable import Variable

__all__ = [
    "AccumulateGrad",
    "Context",
    "Function",
    "Node",
    "Variable",
    "backward",
    "enable_grad",
    "functional",
    "grad",
    "inference_mode",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "run_backward",
    "set_grad_enabled",
]

__getattr__ = _module_getattr(__name__, {
    "gradcheck": "not in tinytrain; compare with finite differences in float64, or with "
                 "PyTorch (as tests/test_ops.py does)",
}, "tinytrain.autograd has Function, grad, backward, no_grad, enable_grad, set_grad_enabled "
   "and inference_mode")
