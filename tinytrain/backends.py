"""``tt.backends``: the flags PyTorch scripts set, accepted so that they run unchanged.

* ``backends.mps.is_available()`` is False (tinytrain has no Apple-GPU backend);
* ``backends.cudnn.deterministic`` / ``.benchmark`` / ``.enabled`` / ``.allow_tf32`` can be
  set and read but change nothing: tinytrain does not use cuDNN, and its kernels are
  deterministic.
* ``backends.cuda.matmul.allow_tf32`` (nanoGPT sets it), ``.allow_fp16_reduced_precision_
  reduction`` and ``.allow_bf16_reduced_precision_reduction`` can be set and read, with
  PyTorch's defaults, and change nothing either. tinytrain's float32 matrix products are
  CuPy's (cuBLAS), and CuPy computes them in TF32 only when the environment variable
  ``CUPY_TF32=1`` was set before it started; tinytrain never sets it, so its float32 products
  are full float32 whatever this flag says. As in PyTorch, ``allow_tf32`` and
  :func:`tinytrain.set_float32_matmul_precision` are one setting (``"high"`` is
  ``allow_tf32 = True``, ``"highest"`` is False); it is recorded, not acted on.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cudnn = SimpleNamespace(deterministic=False, benchmark=False, enabled=True,
                        is_available=lambda: False, allow_tf32=True)

#: ``torch.get_float32_matmul_precision()``: "highest", "high" or "medium" (recorded only).
_float32_matmul_precision = "highest"


class _Matmul:
    """``backends.cuda.matmul``: cuBLAS's switches, recorded and read back; they change
    nothing in tinytrain (see the module docstring). Other names are refused, as PyTorch's
    ``Unknown attribute``."""

    _FLAGS = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        object.__setattr__(self, "_flags", dict.fromkeys(self._FLAGS, True))

    @property
    def allow_tf32(self) -> bool:
        return _float32_matmul_precision != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        global _float32_matmul_precision
        _float32_matmul_precision = "high" if value else "highest"

    def __getattr__(self, name: str) -> Any:
        if name in self._FLAGS:
            return self._flags[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "allow_tf32":
            object.__setattr__(self, name, value)
        elif name in self._FLAGS:
            self._flags[name] = bool(value)
        else:
            raise AttributeError(f"Unknown attribute {name}")


cuda = SimpleNamespace(matmul=_Matmul())


def set_float32_matmul_precision(precision: str) -> None:
    """Record ``precision`` (``"highest"``, ``"high"`` or ``"medium"``), as
    ``torch.set_float32_matmul_precision``; it has no effect in tinytrain, whose float32
    matrix products are full float32 on the CPU and on the GPU (CuPy uses TF32 only with
    ``CUPY_TF32=1``). As in PyTorch, a name that is not a string is a RuntimeError and another
    string is ignored with a warning; ``"high"``/``"medium"`` read back as
    ``backends.cuda.matmul.allow_tf32 == True``."""
    global _float32_matmul_precision
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got "
                           f"{type(precision).__name__}")
    if precision not in ("highest", "high", "medium"):
        import warnings

        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _float32_matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """What :func:`set_float32_matmul_precision` recorded (``"highest"`` at first)."""
    return _float32_matmul_precision


__all__ = ["cuda", "cudnn", "mps"]
