"""``tt.amp``: PyTorch's mixed-precision tools, for scripts that switch them off.

tinytrain trains in float32 (or the dtype the tensors have): it has no automatic mixed
precision, so there is nothing to cast and no loss to scale. Scripts such as nanoGPT's
``train.py`` still make a :class:`GradScaler` and an :class:`autocast` context and switch
them on or off with a flag; here:

* ``GradScaler(enabled=False)`` passes everything through, as PyTorch's disabled scaler:
  ``scale(loss)`` is ``loss``, ``unscale_`` and ``update`` do nothing, ``step(opt)`` is
  ``opt.step()``, ``get_scale()`` is 1.0, ``state_dict()`` is ``{}``;
* ``autocast(device_type, enabled=False)`` (or ``dtype=tt.float32``) is a context manager
  and decorator that does nothing;
* switched on, both raise a RuntimeError saying that tinytrain has no mixed precision
  (pass ``enabled=False``), since they cannot do what they promise. As in PyTorch, a
  ``'cuda'`` scaler or autocast on a machine without a GPU warns and switches itself off
  (PyTorch's CPU build does that, so such scripts run on the CPU unchanged).

``tt.cuda.amp.GradScaler`` / ``tt.cuda.amp.autocast`` and ``tt.cpu.amp.autocast`` are
PyTorch's deprecated spellings: they warn ``FutureWarning`` as PyTorch does, then act as the
``tt.amp`` ones for ``'cuda'`` / ``'cpu'``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import SimpleNamespace, TracebackType
from typing import Any

from tinytrain import backend
from tinytrain.dtypes import float32

_NO_AMP = ("tinytrain has no mixed precision: it trains in float32, so there is nothing to "
           "autocast and no loss to scale; pass enabled=False (nanoGPT: --dtype=float32)")


def _caller(obj: Any) -> int:
    """The stack level of the line that made ``obj`` (one more through a deprecated class)."""
    return 2 if type(obj) in (GradScaler, autocast) else 3


def _cuda_missing() -> bool:
    return not backend.cuda_is_available()


class GradScaler:
    """``torch.amp.GradScaler``: usable with ``enabled=False`` (a pass-through); switched on,
    a RuntimeError (tinytrain has no mixed precision; module docstring). A ``'cuda'`` scaler
    without a GPU warns and switches off, as PyTorch's."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        if enabled and device == "cuda" and _cuda_missing():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=_caller(self))
            enabled = False
        if enabled:
            raise RuntimeError(f"GradScaler(enabled=True): {_NO_AMP}")
        self._enabled = False

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a loss, or tensors) unchanged: scaling is disabled."""
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        """Nothing to unscale: scaling is disabled."""

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)``, and its result."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        """Nothing to update: scaling is disabled."""

    def get_scale(self) -> float:
        """1.0, as PyTorch's disabled scaler."""
        return 1.0

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``{}``, as PyTorch's disabled scaler."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to load: scaling is disabled (PyTorch's disabled scaler ignores it too)."""


class autocast:  # noqa: N801 (PyTorch's name)
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager (and decorator) that does nothing when ``enabled=False`` or ``dtype`` is
    float32; float16/bfloat16 autocasting is a RuntimeError (module docstring). As PyTorch,
    ``'cuda'`` without a GPU and a ``'cpu'`` dtype autocast does not support warn and switch
    off."""

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in ("cpu", "cuda"):
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}' (tinytrain has 'cpu' and 'cuda')")
        self.device = device_type
        if enabled and device_type == "cuda" and _cuda_missing():
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          stacklevel=_caller(self))
            enabled = False
        elif enabled and device_type == "cpu" and dtype is not None and \
                _is_float32(dtype):  # (PyTorch: CPU autocast takes only float16/bfloat16)
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling "
                          "autocast.\nCPU Autocast only supports dtypes of torch.bfloat16, "
                          "torch.float16 currently.", stacklevel=_caller(self))
            enabled = False
        if enabled and not (dtype is not None and _is_float32(dtype)):
            raise RuntimeError(f"autocast({device_type!r}, dtype={dtype}): {_NO_AMP}")
        self._enabled = False

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper


def _is_float32(dtype: Any) -> bool:
    try:
        return bool(dtype == float32)
    except TypeError:
        return False


def _deprecated(old: str, new: str) -> None:
    """PyTorch's FutureWarning for its deprecated ``torch.cuda.amp``/``torch.cpu.amp`` names."""
    warnings.warn(f"`torch.{old}(args...)` is deprecated. Please use `torch.{new}` instead.",
                  FutureWarning, stacklevel=3)


class _CudaGradScaler(GradScaler):
    """``torch.cuda.amp.GradScaler``: deprecated in PyTorch for ``tt.amp.GradScaler('cuda')``."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        _deprecated("cuda.amp.GradScaler", "amp.GradScaler('cuda', args...)")
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class _CudaAutocast(autocast):
    """``torch.cuda.amp.autocast``: deprecated in PyTorch for ``tt.amp.autocast('cuda')``."""

    def __init__(self, enabled: bool = True, dtype: Any = None,
                 cache_enabled: bool = True) -> None:
        _deprecated("cuda.amp.autocast", "amp.autocast('cuda', args...)")
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _CpuAutocast(autocast):
    """``torch.cpu.amp.autocast``: deprecated in PyTorch for ``tt.amp.autocast('cpu')``."""

    def __init__(self, enabled: bool = True, dtype: Any = None,
                 cache_enabled: bool = True) -> None:
        _deprecated("cpu.amp.autocast", "amp.autocast('cpu', args...)")
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


for _cls, _name in ((_CudaGradScaler, "GradScaler"), (_CudaAutocast, "autocast"),
                    (_CpuAutocast, "autocast")):
    _cls.__name__ = _cls.__qualname__ = _name

#: ``tt.cuda.amp`` and ``tt.cpu.amp``: PyTorch's deprecated spellings.
_cuda_amp = SimpleNamespace(GradScaler=_CudaGradScaler, autocast=_CudaAutocast)
_cpu_amp = SimpleNamespace(autocast=_CpuAutocast)

__all__ = ["GradScaler", "autocast"]
