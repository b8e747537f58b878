"""``tt.backends``: the flags PyTorch scripts set, accepted so that they run unchanged.

* ``backends.mps.is_available()`` is False (tinytrain has no Apple-GPU backend);
* ``backends.cudnn.deterministic`` / ``.benchmark`` / ``.enabled`` can be set and read but
  change nothing: tinytrain does not use cuDNN, and its kernels are deterministic.
"""

from __future__ import annotations

from types import SimpleNamespace

mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cudnn = SimpleNamespace(deterministic=False, benchmark=False, enabled=True,
                        is_available=lambda: False)

__all__ = ["cudnn", "mps"]
