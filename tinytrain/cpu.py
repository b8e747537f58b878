"""``tt.cpu``: ``torch.cpu``'s names that CPU scripts use: ``is_available()`` (True) and
``amp.autocast`` (PyTorch's deprecated spelling of ``tt.amp.autocast('cpu')``, see
:mod:`tinytrain.amp`)."""

from __future__ import annotations

from tinytrain._missing import module_getattr
from tinytrain.amp import _cpu_amp as amp


def is_available() -> bool:
    """True: tinytrain always runs on the CPU."""
    return True


__getattr__ = module_getattr("tinytrain.cpu", {})
__all__ = ["amp", "is_available"]
