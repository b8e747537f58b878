"""``nn.utils.stateless``: PyTorch's older home of ``functional_call``, deprecated there since
PyTorch 2.0 in favour of :func:`tinytrain.func.functional_call` (a drop-in replacement)."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["functional_call"]


def functional_call(module: Any, parameters_and_buffers: dict[str, Any], args: Any = None,
                    kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """``torch.nn.utils.stateless.functional_call``: :func:`tinytrain.func.functional_call`
    with one dict, after PyTorch's FutureWarning that it is deprecated."""
    from tinytrain.func._module import _functional_call  # noqa: PLC0415 (func imports nn)

    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
