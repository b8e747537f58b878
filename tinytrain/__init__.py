"""tinytrain: a small deep-learning training framework, built chapter by chapter.

    import tinytrain as tt
    x = tt.tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward(); x.grad
"""

# the subpackages too, as `torch.nn` and `torch.optim` are reachable from `import torch`
from tinytrain import data, nn, optim
from tinytrain.autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tinytrain.backend import cuda_is_available
from tinytrain.kernels.cpu.parallel import get_num_threads, set_num_threads
from tinytrain.random import get_rng_state, manual_seed, set_rng_state
from tinytrain.serialization import load, save
from tinytrain.tensor import (
    Tensor,
    arange,
    bool_,
    float16,
    float32,
    float64,
    full,
    int32,
    int64,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    uint8,
    zeros,
    zeros_like,
)

__version__ = "0.1.0"

__all__ = [
    "Tensor", "arange", "bool_", "cuda_is_available", "data", "enable_grad", "float16",
    "float32", "float64", "full", "get_num_threads", "get_rng_state", "int32", "int64",
    "is_grad_enabled", "load", "manual_seed", "nn", "no_grad", "ones", "ones_like", "optim",
    "rand", "randn", "save", "set_grad_enabled", "set_num_threads", "set_rng_state", "tensor",
    "uint8", "zeros", "zeros_like",
]
