"""``torch.onnx``'s name, so that ported scripts that ``import torch.onnx`` (pytorch/examples'
word_language_model exports only on request) import; tinytrain cannot export a model, and
:func:`export` says so."""

from __future__ import annotations

from typing import Any

from tinytrain._missing import TORCH_HINTS, module_getattr

__all__ = ["export"]


def export(model: Any, args: Any = (), f: Any = None, *more: Any, **kwargs: Any) -> None:
    """``torch.onnx.export``: raises NotImplementedError (no ONNX export in tinytrain)."""
    raise NotImplementedError(f"torch.onnx.export: {TORCH_HINTS['onnx']}")


__getattr__ = module_getattr("tinytrain.onnx", {}, TORCH_HINTS["onnx"])
