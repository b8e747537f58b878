"""Kernels: the array code behind the ops, one *kernel set* per device.

``tinytrain.kernels.cpu`` holds NumPy kernels; ``tinytrain.kernels.cuda`` holds CUDA C
sources and their thin CuPy launchers. Both export the same functions (``conv2d_forward``,
``max_pool2d_backward``, ``cross_entropy_forward``, ``adam_step``, ...; the list is
``tinytrain.kernels.cpu.KERNELS``), and :func:`for_array` is the one place that picks a set:
ops call ``kernels.for_array(x).conv2d_forward(...)`` and never ask which device they are on.
The shape bookkeeping both sets share is :mod:`tinytrain.kernels.shapes`.

Importing this package never imports CuPy: the CUDA set is imported the first time an
array on the GPU asks for it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from tinytrain.kernels import cpu

__all__ = ["cpu", "for_array"]


_cuda: ModuleType | None = None


def for_array(array: Any) -> ModuleType:
    """The kernel set of the device ``array`` lives on: ``kernels.cpu`` or ``kernels.cuda``."""
    global _cuda
    if isinstance(array, np.ndarray | np.generic) or not type(array).__module__.startswith("cupy"):
        return cpu
    if _cuda is None:  # imported once (an import statement per call cost ~2 us on the GPU host)
        from tinytrain.kernels import cuda

        _cuda = cuda
    return _cuda
