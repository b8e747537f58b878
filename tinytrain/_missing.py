"""Errors for PyTorch names tinytrain does not have, saying what to use instead.

A ported script that reaches for ``torch.compile`` or ``nn.BatchNorm2d`` should not get a
bare ``AttributeError``: each package module's ``__getattr__`` (made here) says that the
name is outside tinytrain and, where there is one, what to use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SCOPE = ("tinytrain implements the part of PyTorch its course builds (README: 'Differences "
         "from PyTorch')")


def module_getattr(module: str, hints: dict[str, str], offer: str = ""
                   ) -> Callable[[str], Any]:
    """A module ``__getattr__`` that raises AttributeError naming ``module.name`` and
    ``hints[name]`` (or ``offer``, what the module has, for names without a hint)."""

    def __getattr__(name: str) -> Any:
        message = f"module {module!r} has no attribute {name!r}"
        if not name.startswith("__"):
            message += f": {hints.get(name) or offer or SCOPE}"
        raise AttributeError(message)

    return __getattr__


_NUMPY = "not part of tinytrain; compute on x.numpy() with NumPy"
_DTYPES = ("tinytrain has bool, uint8, int32, int64, float16, float32 and float64 tensors; "
           "no bfloat16 or complex")

TORCH_HINTS = {
    "compile": "tinytrain has no compiler; call the model directly: model(x)",
    "jit": "tinytrain has no TorchScript; call the model directly, and save weights with "
           "tt.save(model.state_dict(), path)",
    "autocast": "tinytrain has no mixed precision (autocast/amp); it trains in float32",
    "amp": "tinytrain has no mixed precision (autocast/amp); it trains in float32",
    "FloatTensor": "use tt.tensor(data, dtype=tt.float32)",
    "DoubleTensor": "use tt.tensor(data, dtype=tt.float64)",
    "LongTensor": "use tt.tensor(data, dtype=tt.int64)",
    "IntTensor": "use tt.tensor(data, dtype=tt.int32)",
    "BoolTensor": "use tt.tensor(data, dtype=tt.bool)",
    "ByteTensor": "use tt.tensor(data, dtype=tt.uint8)",
    "einsum": "not in tinytrain; write it with @, * and sum (e.g. 'ij,jk->ik' is a @ b)",
    "Generator": "tinytrain has one random generator: seed it with tt.manual_seed(seed); "
                 "DataLoader(..., seed=...) makes shuffling reproducible on its own",
    "bfloat16": _DTYPES, "complex64": _DTYPES, "complex128": _DTYPES, "cfloat": _DTYPES,
    "distributions": _NUMPY, "fft": _NUMPY, "linalg": _NUMPY, "special": _NUMPY,
    "sparse": _NUMPY,
    "mps": "tinytrain runs on 'cpu' and 'cuda' (an NVIDIA GPU through CuPy)",
    "xpu": "tinytrain runs on 'cpu' and 'cuda' (an NVIDIA GPU through CuPy)",
    "hub": "tinytrain has no model hub; its models are in tinytrain.models",
    "onnx": "tinytrain cannot export models; save weights with tt.save(model.state_dict(), path)",
    "export": "tinytrain cannot export models; save weights with tt.save(model.state_dict(), "
              "path)",
    "multiprocessing": "tinytrain starts one process per GPU with MPI (see tinytrain.distributed)",
}

#: What a missing Tensor method's AttributeError says (``Tensor.__getattr__``).
TENSOR_OFFER = ("tinytrain's Tensor has the methods its course uses (README: 'Differences from "
                "PyTorch'); for anything else compute on t.numpy() with NumPy and wrap the "
                "result with tt.tensor(...)")
_HOOKS = ("tinytrain has no tensor hooks; use register_post_accumulate_grad_hook on a leaf, or "
          "a module's register_forward_hook")
_STORAGE = "a tinytrain Tensor wraps one NumPy/CuPy array: use t.data (the array) or t.numpy()"
TENSOR_HINTS = {
    "register_hook": _HOOKS, "retain_grad": "tinytrain keeps .grad for leaves only; to see a "
    "non-leaf's gradient make it a leaf: y = y.detach().requires_grad_()",
    "storage": _STORAGE, "untyped_storage": _STORAGE, "storage_offset": _STORAGE,
    "as_strided": _STORAGE,
    "pin_memory": "tinytrain does not pin CPU memory; .to('cuda') copies directly",
    "is_pinned": "tinytrain does not pin CPU memory; .to('cuda') copies directly",
    "share_memory_": "tinytrain has no worker processes to share memory with",
    "to_sparse": "tinytrain has dense tensors only",
    "is_sparse": "tinytrain has dense tensors only",
    "bfloat16": _DTYPES, "cfloat": _DTYPES, "cdouble": _DTYPES, "complex": _DTYPES,
    "prod": "not in tinytrain; for a constant, t.numpy().prod(); for a gradient, "
            "x.log().sum().exp() of positive x",
    "cumprod": _NUMPY, "bincount": _NUMPY, "histc": _NUMPY, "kthvalue": _NUMPY,
    "median": _NUMPY, "mode": _NUMPY, "unfold": _NUMPY, "roll": _NUMPY, "flip": _NUMPY,
    "index_add_": "not in tinytrain; under tt.no_grad(), np.add.at(t.data, index, values)",
    "scatter_add_": "not in tinytrain; under tt.no_grad(), np.add.at(t.data, index, values)",
    "bernoulli_": "not in tinytrain; (tt.rand(*t.shape) < p).float() draws the same",
    "multinomial": "not in tinytrain; sample with NumPy: np.random.default_rng().choice(n, p=...)",
}

#: Methods of PyTorch's ``nn.Module`` that tinytrain's lacks (``Module.__getattr__``).
_BACKWARD_HOOKS = ("tinytrain modules have forward hooks (register_forward_hook, "
                   "register_forward_pre_hook); for gradients, a parameter's "
                   "register_post_accumulate_grad_hook")
MODULE_HINTS = {
    "register_full_backward_hook": _BACKWARD_HOOKS, "register_backward_hook": _BACKWARD_HOOKS,
    "register_full_backward_pre_hook": _BACKWARD_HOOKS,
    "compile": TORCH_HINTS["compile"],
    "bfloat16": _DTYPES,
    "share_memory": "tinytrain has no worker processes to share memory with",
    "to_empty": "tinytrain creates parameters with their values; use model.to(device)",
    "register_load_state_dict_post_hook": "not in tinytrain; change the state dict before "
                                          "load_state_dict",
    "register_state_dict_pre_hook": "not in tinytrain; change the state dict after state_dict()",
}
