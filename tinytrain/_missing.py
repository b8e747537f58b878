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
    "inference_mode": "use tt.no_grad()",
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
