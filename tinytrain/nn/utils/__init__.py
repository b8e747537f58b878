"""``nn.utils``: gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``) and parameters
as one vector (``parameters_to_vector``, ``vector_to_parameters``); ``stateless`` has the
deprecated ``functional_call`` (:func:`tinytrain.func.functional_call`); the submodule ``rnn``
pads and packs sequences of different lengths for the recurrent layers, ``prune`` zeroes out
parts of parameters (PyTorch's ``torch.nn.utils.prune``)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.autograd import no_grad
from tinytrain.functions import cat, stack
from tinytrain.nn.utils import prune as prune  # (tinytrain.nn.utils.prune)
from tinytrain.nn.utils import rnn as rnn  # (tinytrain.nn.utils.rnn)
from tinytrain.nn.utils import stateless as stateless  # (functional_call, deprecated there)
from tinytrain.tensor import ShapeError, Tensor, tensor


def _with_grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p for p in params if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale every gradient by ``max_norm / total_norm`` when the norm of all gradients
    together (as one vector) exceeds ``max_norm``; returns that total norm (0-d).
    ``foreach`` (PyTorch's choice of implementation) is accepted and changes nothing."""
    norm_type = float(norm_type)  # (PyTorch takes "inf" too)
    params = _with_grads(parameters)
    if not params:
        return tensor(0.0)
    norms = stack([p.grad.norm(norm_type).to(params[0].device) for p in params])  # (the
    # widest gradient dtype, as PyTorch's: float32 and float64 gradients give a float64 norm)
    total = norms.amax() if norm_type == math.inf else norms.norm(norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                           f"gradients is non-finite ({total.item()}), so it cannot be clipped")
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad.mul_(scale.to(p.grad.device, p.grad.dtype))
    return total


@no_grad()
def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]``, in place (``foreach``
    as in :func:`clip_grad_norm_`)."""
    for p in _with_grads(parameters):
        p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Every parameter flattened and concatenated, in order: ``[sum of numels]``
    (differentiable). All must be on one device."""
    params = list(parameters)
    devices = {p.device for p in params}
    if len(devices) > 1:
        raise TypeError(f"parameters_to_vector: Found two parameters on different devices "
                        f"({', '.join(sorted(map(str, devices)))}), this is currently not "
                        f"supported.")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Split ``vec [n]`` into the parameters, in order: each parameter's ``.data`` becomes its
    slice of ``vec`` reshaped, sharing ``vec``'s memory, as in PyTorch (extra elements at the
    end are ignored)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params, start = list(parameters), 0
    need = sum(p.numel() for p in params)
    if vec.numel() < need:
        raise ShapeError(f"vector_to_parameters: the vector has {vec.numel()} elements, the "
                         f"parameters {need}")
    flat = vec._data.reshape(-1)
    for p in params:
        if p.dtype.kind == "f" and vec.dtype.kind != "f":  # (a float parameter stays float)
            raise TypeError(f"vector_to_parameters: the vector is {vec.dtype}, the parameters "
                            f"{p.dtype}; pass a floating point vector")
        if p.device != vec.device:
            raise TypeError(f"vector_to_parameters: Found two parameters on different devices "
                            f"({p.device} and the vector's {vec.device}), this is currently "
                            f"not supported.")
        p.data = flat[start:start + p.numel()].reshape(p.shape)
        start += p.numel()


__getattr__ = _module_getattr(__name__, {}, (
    "tinytrain.nn.utils has clip_grad_norm_, clip_grad_value_, parameters_to_vector, "
    "vector_to_parameters and the submodules rnn, stateless and prune"))
