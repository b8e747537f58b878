"""Devices and their array modules.

A tinytrain Tensor lives on a device: ``"cpu"`` holds a NumPy array, ``"cuda"``
holds a CuPy array. Ops are written once against the *array module* ``xp`` of
their inputs (CuPy's ``get_array_module``, which DeZero uses too), so the same code runs on both.
Only the kernels under ``tinytrain/kernels/`` know which device they are on.

CuPy is imported lazily: without it everything on the CPU works, and asking for
``"cuda"`` raises an error that says what to install.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

DEVICES = ("cpu", "cuda")

_INSTALL_HINT = (
    "device='cuda' needs CuPy and an NVIDIA GPU. Install the extra that matches your CUDA "
    "driver: pip install -e '.[cuda12]' (CUDA 12) or pip install -e '.[cuda13]' (CUDA 13). "
    "Run `python -m tinytrain.doctor` to see what this machine has."
)

_cupy: ModuleType | None = None
_cupy_error: str | None = None


def _import_cupy() -> ModuleType | None:
    """Import CuPy once; remember why it failed if it did."""
    global _cupy, _cupy_error
    if _cupy is None and _cupy_error is None:
        try:
            import cupy  # noqa: PLC0415 (lazy on purpose)

            cupy.cuda.runtime.getDeviceCount()  # raises without a driver / GPU
            _cupy = cupy
        except Exception as exc:  # ImportError, CUDARuntimeError, ...
            _cupy_error = f"{type(exc).__name__}: {exc}"
    return _cupy


def cuda_is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    cp = _import_cupy()
    return cp is not None and cp.cuda.runtime.getDeviceCount() > 0


def cupy_module() -> ModuleType:
    """Return the ``cupy`` module, or raise a RuntimeError saying how to get it."""
    cp = _import_cupy()
    if cp is None:
        raise RuntimeError(f"{_INSTALL_HINT} (import failed with {_cupy_error})")
    return cp


class DeviceError(RuntimeError, ValueError):
    """An unknown device name: PyTorch's RuntimeError, and the ValueError tinytrain raised."""


class Device(str):
    """A device, as ``torch.device``: ``Device("cuda")``, ``Device("cuda", 1)``,
    ``Device("cuda:1")``, ``Device(1)``, ``Device("cpu")``.

    It *is* the string ``"cpu"`` or ``"cuda"`` (a ``str`` subclass), so it compares equal
    to the name and works wherever a device name does; ``.type`` and ``.index`` are
    PyTorch's, and one made with an index prints with it, as PyTorch's (``print(device)``:
    ``cuda:0``). ``tinytrain.device`` is this class, and ``Tensor.device`` returns one.
    tinytrain uses one GPU per process: an index is kept (``tt.cuda.set_device(device)``
    reads it) and checked against this process's GPU only where a tensor is put there.
    """

    _index: int | None = None

    def __new__(cls, type: Any, index: int | None = None) -> Device:  # noqa: A002 (torch's name)
        name, parsed = split_device(type)
        if index is not None:
            if name != "cuda" or parsed is not None:
                raise ValueError(f"device({type!r}, {index!r}): an index goes with 'cuda' only")
            parsed = _gpu_index(index)
        device = super().__new__(cls, name)
        device._index = parsed
        return device

    @property
    def type(self) -> str:
        return str.__str__(self)

    @property
    def index(self) -> int | None:
        return self._index

    def __repr__(self) -> str:
        index = "" if self._index is None else f", index={self._index}"
        return f"device(type='{self.type}'{index})"

    def __str__(self) -> str:
        return self.type if self._index is None else f"{self.type}:{self._index}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _gpu_index(index: Any) -> int:
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"a GPU index must be a non-negative int, got {index!r}")
    return index


def split_device(device: Any) -> tuple[str, int | None]:
    """``(name, index)`` of a device given as a name, ``"cuda:N"``, an int N (PyTorch's
    ``model.to(rank)``) or a Device."""
    if isinstance(device, Device):
        return device.type, device._index
    if isinstance(device, int) and not isinstance(device, bool):
        return "cuda", _gpu_index(device)
    name = str(device)
    if name.startswith("cuda:") and name[5:].isdigit():
        return "cuda", int(name[5:])
    if name not in DEVICES:
        raise DeviceError(f"unknown device {device!r}; expected one of {DEVICES}")
    return name, None


def normalize_device(device: Any) -> str:
    """Turn ``"cpu"``, ``"cuda"``, ``"cuda:N"``, an int N or a Device into ``"cpu"``/``"cuda"``
    (an index must name this process's GPU)."""
    if device is None:
        return "cpu"
    name, index = split_device(device)
    return _this_process_gpu(index) if index is not None else name


def _this_process_gpu(index: int) -> str:
    """``"cuda:N"`` is ``"cuda"`` when N is this process's GPU (CuPy's current device: 0, or
    what ``tt.cuda.set_device`` or DDP's local rank chose). Another index is refused: tinytrain
    runs one GPU per process. Without a GPU any index reads as ``"cuda"``, whose use then
    says that there is none."""
    if not cuda_is_available():
        return "cuda"
    current = cupy_module().cuda.Device().id
    if index != current:
        raise ValueError(
            f"device 'cuda:{index}': tinytrain runs one GPU per process, and this process's "
            f"GPU is cuda:{current}; call tt.cuda.set_device({index}) first (as DDP scripts do "
            f"with their local rank), or use 'cuda'")
    return "cuda"


_default_device = "cpu"


def set_default_device(device: Any) -> None:
    """Where creation functions (``tensor`` of a list, ``zeros``, ``randn``, ``arange``, ...)
    put tensors when no ``device`` is given (``torch.set_default_device``). Layers still
    create their parameters on the CPU: move a model with ``model.to(device)``."""
    global _default_device
    _default_device = normalize_device(device if device is not None else "cpu")


def default_device() -> Device:
    """The device creation functions use when none is given (``"cpu"`` unless set)."""
    return CPU if _default_device == "cpu" else CUDA


def is_device(value: Any) -> bool:
    """True for a device (``"cpu"``, ``"cuda"``, ``"cuda:N"``, an int N, a Device), False for
    e.g. a dtype."""
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and (value in DEVICES or (
        value.startswith("cuda:") and value[5:].isdigit()))


def array_module(device: str) -> ModuleType:
    """The array module of a device: ``numpy`` for ``"cpu"``, ``cupy`` for ``"cuda"``."""
    return np if normalize_device(device) == "cpu" else cupy_module()


def device_of(array: Any) -> Device:
    """The device an array lives on (a CuPy array is on ``"cuda"``)."""
    return CPU if isinstance(array, np.ndarray | np.generic) else (
        CUDA if type(array).__module__.startswith("cupy") else CPU
    )


CPU, CUDA = Device("cpu"), Device("cuda")


def get_array_module(array: Any) -> ModuleType:
    """``numpy`` or ``cupy``, whichever owns ``array`` (as ``cupy.get_array_module``)."""
    if isinstance(array, np.ndarray | np.generic):
        return np
    if type(array).__module__.startswith("cupy"):
        return cupy_module()
    return np


def to_device(array: Any, device: str) -> Any:
    """Copy ``array`` to ``device`` (no copy when it is already there)."""
    device = normalize_device(device)
    if device_of(array) == device:
        return array
    if device == "cpu":
        return array.get()
    return cupy_module().asarray(array)


#: NumPy's ``add.at`` costs ~20 ns per element outside its 1-D fast path; a Python loop that
#: adds one whole row (all the other axes) per index costs ~2 us plus the row's add: from
#: rows of this many elements on, the loop wins (the backward of ``index_select`` by 100
#: indices on axis 1 of ``[32, 100, 512]``, rows of 16K: 36 -> 3.5 ms).
ROW_LOOP_MIN = 256


def index_add(target: Any, index: Any, values: Any) -> None:
    """``target[index] += values`` that also accumulates repeated indices (``np.add.at``).

    On NumPy, an index that is one integer array on one axis (the others whole, as
    ``index_select``'s, an embedding's or ``x[:, idx]``'s backward makes) with rows of at least
    :data:`ROW_LOOP_MIN` elements is added one row per index entry, in the index's order:
    the same additions in the same order as ``add.at``, ~10x faster for large rows."""
    xp = get_array_module(target)
    if xp is np and _add_rows(target, index, values):
        return
    xp.add.at(target, index, values)


def _add_rows(target: Any, index: Any, values: Any) -> bool:
    """:func:`index_add` by rows where it applies (see there); False where it does not."""
    parts = index if isinstance(index, tuple) else (index,)
    arrays = [i for i, p in enumerate(parts) if not (isinstance(p, slice) and p == slice(None))]
    if len(arrays) != 1 or len(parts) > target.ndim:
        return False
    axis = arrays[0]
    idx = parts[axis]
    n = target.shape[axis]  # (a 0-d target has no axis: refused above)
    if (not isinstance(idx, np.ndarray) or idx.dtype.kind not in "iu" or idx.size == 0
            or not isinstance(values, np.ndarray | np.generic) or values.dtype != target.dtype
            or target.size // max(n, 1) < ROW_LOOP_MIN or np.may_share_memory(target, values)):
        return False
    flat = idx.reshape(-1)
    if flat.min() < -n or flat.max() >= n:  # add.at raises its IndexError, before any add
        return False
    full = target.shape[:axis] + idx.shape + target.shape[axis + 1:]
    try:
        v = np.broadcast_to(values, full)
    except ValueError:  # add.at's own error
        return False
    rows = np.moveaxis(v.reshape(target.shape[:axis] + (flat.size,) + target.shape[axis + 1:]),
                       axis, 0)
    into = np.moveaxis(target, axis, 0)
    for i, p in enumerate(flat.tolist()):
        into[p] += rows[i]
    return True


def index_reduce(target: Any, index: Any, values: Any, ufunc: str) -> None:
    """``target[index] = ufunc(target[index], values)`` accumulating repeated indices, for
    ``ufunc`` in add / multiply / maximum / minimum (``np.maximum.at``). On the GPU only
    ``add`` runs there (``cupy.add.at``): CuPy's ufuncs have no ``multiply.at``, and its
    ``maximum.at`` / ``minimum.at`` gave float64 results rounded to float32 (CuPy 14, seen
    on an H200), so those are done on the host and copied back."""
    xp = get_array_module(target)
    if xp is np or ufunc == "add":
        getattr(xp, ufunc).at(target, index, values)
        return
    host = target.get()
    getattr(np, ufunc).at(host, tuple(i.get() if hasattr(i, "get") else i for i in index),
                          values.get() if hasattr(values, "get") else values)
    target[...] = xp.asarray(host)
