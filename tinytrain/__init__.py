"""tinytrain: a small deep-learning training framework, built chapter by chapter.

    import tinytrain as tt
    x = tt.tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward(); x.grad

The names follow PyTorch's, so a PyTorch script whose features are in tinytrain's scope
runs with its imports changed (``import tinytrain as torch``); names outside the scope
raise an AttributeError that says what to use instead.
"""

import importlib as _importlib

# the subpackages too, as `torch.nn` and `torch.optim` are reachable from `import torch`
from tinytrain import accelerator, backends, cuda, data, nn, optim, utils
from tinytrain._missing import TORCH_HINTS as _HINTS
from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tinytrain.backend import Device as device
from tinytrain.backend import cuda_is_available
from tinytrain.dtypes import can_cast, promote_types, result_type
from tinytrain.functions import (
    abs,
    add,
    amax,
    amin,
    argmax,
    argmin,
    cat,
    clamp,
    clip,
    div,
    eq,
    equal,
    exp,
    flatten,
    ge,
    gt,
    le,
    log,
    log_softmax,
    lt,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    ne,
    permute,
    pow,
    relu,
    reshape,
    sigmoid,
    softmax,
    sqrt,
    squeeze,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    unsqueeze,
)
from tinytrain.kernels.cpu.parallel import get_num_threads, set_num_threads
from tinytrain.random import get_rng_state, manual_seed, set_rng_state
from tinytrain.serialization import load, save
from tinytrain.tensor import (
    Tensor,
    arange,
    as_tensor,
    bool_,
    empty,
    eye,
    float16,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    int32,
    int64,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    tensor,
    uint8,
    zeros,
    zeros_like,
)

# PyTorch's other names for the dtypes (these shadow the builtins only inside this module)
bool, half, float, double, int, long = bool_, float16, float32, float64, int32, int64  # noqa: A001

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("distributed", "models")


def __getattr__(name: str):
    """``tt.distributed`` / ``tt.models`` load on first use; other missing names get a hint."""
    if name in _LAZY_SUBMODULES:
        try:
            return _importlib.import_module(f"tinytrain.{name}")
        except ModuleNotFoundError:
            pass
    return _module_getattr("tinytrain", _HINTS)(name)


# as torch's, this includes names that shadow builtins (max, float, ...)
__all__ = [
    "abs", "accelerator", "add", "amax", "amin", "arange", "argmax", "argmin", "as_tensor",
    "backends", "bool", "bool_", "can_cast", "cat", "clamp", "clip", "cuda",
    "cuda_is_available", "data", "device", "div", "double", "empty", "enable_grad", "eq",
    "equal", "exp", "eye", "flatten", "float", "float16", "float32", "float64", "from_numpy",
    "full", "full_like", "ge", "get_num_threads", "get_rng_state", "gt", "half", "int", "int32",
    "int64", "is_grad_enabled", "le", "linspace", "load", "log", "log_softmax", "long", "lt",
    "manual_seed", "matmul", "max", "maximum", "mean", "min", "minimum", "mul", "ne", "nn",
    "no_grad", "ones", "ones_like", "optim", "permute", "pow", "promote_types", "rand",
    "rand_like", "randint", "randn", "randn_like", "relu", "reshape", "result_type", "save",
    "set_grad_enabled", "set_num_threads", "set_rng_state", "sigmoid", "softmax", "sqrt",
    "squeeze", "stack", "sub", "sum", "tanh", "Tensor", "tensor", "transpose", "uint8",
    "unsqueeze", "utils", "zeros", "zeros_like",
]
