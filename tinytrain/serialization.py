"""``tt.save`` / ``tt.load``: state dicts and checkpoints as NumPy ``.npz`` files.

An object is any nesting of dicts (str or int keys; an OrderedDict stays one),
lists, tuples, sets, Tensors, NumPy arrays, dtypes and plain Python values
(numbers, complex numbers, strings, bytes, bools, None), at most ``MAX_DEPTH``
containers deep. Arrays go into the archive as ``a0, a1, ...``;
the nesting is stored as JSON next to them. Loading such a file never runs code,
and a file that is not exactly what :func:`save` writes (a crafted or damaged
structure) raises a ``ValueError`` that names it.

Any other object (a whole Module, an optimizer) is stored pickled, as
``torch.save`` stores everything; as ``torch.load`` since PyTorch 2.6, loading it
needs ``weights_only=False``, which runs the pickle's code: only for files from a
trusted source. A ``state_dict()`` needs no pickle and is what to save.

Saving is atomic: the archive is written to a temporary file in the same
folder, flushed to disk, then renamed over the target. A run interrupted while
saving leaves the previous file intact and no temporary file behind. The file
gets the permissions a plain ``open(path, "wb")`` would give it: those of the
file it replaces, or for a new file ``0o666`` less the user's umask.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import zipfile
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from tinytrain import backend
from tinytrain.data.idx import atomic_file
from tinytrain.tensor import Tensor

_FORMAT = "tinytrain-save-v1"
#: The dtypes a ``dtype`` node may name (NumPy's numeric ones; tinytrain's are among them).
_DTYPE_NAMES = {np.dtype(c).name for c in "?bhilqBHILQefdgFDG"}
MAX_DEPTH = 100  #: containers nested deeper than this are refused by save and load


def _encode(obj: Any, arrays: dict[str, np.ndarray], depth: int = 0) -> Any:
    if isinstance(obj, Tensor) or isinstance(obj, np.ndarray) or hasattr(obj,
                                                                        "__cuda_array_interface__"):
        key = f"a{len(arrays)}"
        kind = "tensor" if isinstance(obj, Tensor) else "ndarray"
        data = obj._data if isinstance(obj, Tensor) else obj
        if data.dtype.hasobject:  # np.savez would pickle it, and load refuses pickles
            raise TypeError(f"save: cannot store an array of dtype {data.dtype} (Python "
                            "objects); only numbers, strings and bools")
        arrays[key] = backend.to_device(data, "cpu")
        node = {"t": kind, "k": key}
        if kind == "tensor" and backend.device_of(data) != "cpu":  # where it was, for
            node["d"] = f"cuda:{data.device.id}"                  # map_location (a GPU id)
        if isinstance(obj, _parameter_class()):  # a Parameter stays one, as in PyTorch
            node["grad"] = "parameter" if obj.requires_grad else "frozen parameter"
        elif kind == "tensor" and obj.requires_grad:
            node["grad"] = True
        return node
    if isinstance(obj, dict | list | tuple | set) and depth >= MAX_DEPTH:
        raise ValueError(f"save: containers nested more than {MAX_DEPTH} deep (or a cycle)")
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str | int | np.integer) or isinstance(k, bool | np.bool_):
                raise TypeError(f"save: dict keys must be str or int, got {k!r}")
        node = {"t": "dict", "items": [[int(k) if isinstance(k, np.integer) else k,
                                        _encode(v, arrays, depth + 1)] for k, v in obj.items()]}
        if isinstance(obj, OrderedDict):  # (a state_dict(): loads as one, as in PyTorch)
            node["ordered"] = True
        return node
    if isinstance(obj, list | tuple | set):
        return {"t": type(obj).__name__, "items": [_encode(v, arrays, depth + 1) for v in obj]}
    if isinstance(obj, np.generic) and obj.dtype.kind in "biufcU":
        obj = obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return {"t": "py", "v": obj}
    if isinstance(obj, complex):
        return {"t": "complex", "v": [obj.real, obj.imag]}
    if isinstance(obj, bytes | bytearray):  # (the bytes as a uint8 array)
        key = f"a{len(arrays)}"
        arrays[key] = np.frombuffer(bytes(obj), dtype=np.uint8)
        return {"t": type(obj).__name__, "k": key}
    if isinstance(obj, np.dtype) and obj.kind in "biufc" and obj.isnative:  # (tt.float32)
        return {"t": "dtype", "v": obj.name}
    kind = type(obj)
    if kind.__module__.split(".")[0] == "torch":  # (not a user's torch_utils, torchvision_x)
        raise TypeError(f"save: cannot store an object of type {kind.__module__}."
                        f"{kind.__qualname__} (a PyTorch tensor or object: save tinytrain "
                        f"tensors, e.g. tt.tensor(x.numpy()))")
    try:  # anything else (a whole Module, an optimizer): pickled, as torch.save does
        pickled = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise TypeError(f"save: cannot store an object of type {kind.__module__}."
                        f"{kind.__qualname__}: it cannot be pickled ({type(exc).__name__}: "
                        f"{exc})") from None
    key = f"a{len(arrays)}"
    arrays[key] = np.frombuffer(pickled, dtype=np.uint8)
    return {"t": "pickle", "k": key, "type": f"{kind.__module__}.{kind.__qualname__}"}


def _movable_classes() -> tuple[type, ...]:
    from tinytrain.nn.module import Module  # nn imports this module

    return Module, Tensor


def _parameter_class() -> type:
    from tinytrain.nn.module import Parameter  # nn imports this module

    return Parameter


class _Decoder:
    """Rebuilds the object from the JSON structure, trusting nothing in it.

    Every node must be exactly what :func:`_encode` writes; anything else raises
    ``ValueError`` with the node's place in the object (``root['model'][2]``).
    """

    def __init__(self, arrays: dict[str, np.ndarray], map_location: Any,
                 weights_only: bool = True) -> None:
        self.arrays, self.map_location, self.used = arrays, map_location, set()
        self.weights_only = weights_only

    def node(self, node: Any, where: str, depth: int) -> Any:
        if not isinstance(node, dict) or not isinstance(node.get("t"), str):
            raise ValueError(f"{where}: expected a node {{'t': type, ...}}, got {node!r:.60}")
        t = node["t"]
        if t in ("tensor", "ndarray"):
            return self.array(node, t, where)
        if t == "pickle":
            return self.unpickle(node, where)
        if t in ("bytes", "bytearray"):
            data = self.array({"k": node.get("k")}, "ndarray", where)
            if data.dtype != np.uint8 or data.ndim != 1:
                raise ValueError(f"{where}: {t} must be a 1-D uint8 array, got {data.dtype} "
                                 f"{data.shape}")
            return (bytes if t == "bytes" else bytearray)(data.tobytes())
        if t == "complex":
            v = node.get("v")
            if (not isinstance(v, list) or len(v) != 2
                    or not all(isinstance(x, float) for x in v)):
                raise ValueError(f"{where}: a complex node needs 'v': [real, imag], got "
                                 f"{v!r:.60}")
            return complex(*v)
        if t == "dtype":
            name = node.get("v")
            if not isinstance(name, str) or name not in _DTYPE_NAMES:
                raise ValueError(f"{where}: unknown dtype {name!r:.40}")
            return np.dtype(name)
        if t == "py":
            if "v" not in node:
                raise ValueError(f"{where}: a plain value node needs 'v'")
            v = node["v"]
            if v is not None and not isinstance(v, bool | int | float | str):
                raise ValueError(f"{where}: a plain value must be a number, string, bool or "
                                 f"null, got {v!r:.60}")
            return v
        if t not in ("dict", "list", "tuple", "set"):
            raise ValueError(f"{where}: unknown node type {t!r}")
        if depth >= MAX_DEPTH:
            raise ValueError(f"{where}: containers nested more than {MAX_DEPTH} deep")
        items = node.get("items")
        if not isinstance(items, list):
            raise ValueError(f"{where}: a {t} node needs a list of items")
        if t != "dict":
            out = [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(items)]
            if t == "set":
                try:
                    return set(out)
                except TypeError:
                    raise ValueError(f"{where}: a set of unhashable items") from None
            return out if t == "list" else tuple(out)
        ordered = node.get("ordered", False)
        if ordered not in (False, True):
            raise ValueError(f"{where}: bad 'ordered' {ordered!r:.40}")
        result = OrderedDict() if ordered else {}
        for item in items:
            if (not isinstance(item, list) or len(item) != 2 or isinstance(item[0], bool)
                    or not isinstance(item[0], str | int)):
                raise ValueError(f"{where}: a dict item must be [str or int key, node], "
                                 f"got {item!r:.60}")
            key, value = item
            result[key] = self.node(value, f"{where}[{key!r}]", depth + 1)
        return result

    def unpickle(self, node: dict, where: str) -> Any:
        """A pickled object: refused unless ``weights_only=False`` (unpickling runs code)."""
        what = node.get("type", "object")
        if self.weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: {where} is a pickled {what!s:.80} (saved whole, not "
                f"as a state_dict). Re-running tt.load with weights_only=False will likely "
                f"succeed, but it can result in arbitrary code execution. Do it only if you got "
                f"the file from a trusted source; better, save and load obj.state_dict()")
        key = node.get("k")
        if not isinstance(key, str) or key not in self.arrays or key in self.used:
            raise ValueError(f"{where}: refers to array {key!r}, which is not in the archive "
                             f"or is used twice")
        self.used.add(key)
        obj = pickle.loads(self.arrays[key].tobytes())
        device = self.map_location
        if isinstance(device, str) and isinstance(obj, _movable_classes()):
            obj = obj.to(device)  # (a whole Module or Tensor; other objects as they were)
        return obj

    def array(self, node: dict, t: str, where: str) -> Any:
        key = node.get("k")
        if not isinstance(key, str) or key not in self.arrays:
            raise ValueError(f"{where}: refers to array {key!r}, which is not in the archive")
        if key in self.used:  # two Tensors would share (and silently co-modify) one buffer
            raise ValueError(f"{where}: array {key!r} is used twice")
        self.used.add(key)
        arr = self.arrays[key]
        if t == "ndarray":
            return arr
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{where}: a Tensor cannot hold dtype {arr.dtype}")
        saved = node.get("d", "cpu")
        if saved != "cpu" and not (isinstance(saved, str) and saved.startswith("cuda:")
                                   and saved[5:].isdigit()):
            raise ValueError(f"{where}: bad saved device {saved!r:.40}")
        data = _place(arr, saved, self.map_location)
        grad = node.get("grad", False)
        if (grad not in (False, True, "parameter", "frozen parameter")
                or (grad in (True, "parameter") and arr.dtype.kind != "f")):
            raise ValueError(f"{where}: bad 'grad' {grad!r:.40} for a {arr.dtype} Tensor")
        if grad in ("parameter", "frozen parameter"):
            return _parameter_class()(Tensor(data), requires_grad=grad == "parameter")
        return Tensor(data, requires_grad=bool(grad))


def save(obj: Any, path: str | os.PathLike | BinaryIO) -> None:
    """Write ``obj`` to ``path`` (an ``.npz`` archive) atomically; or into an open binary
    file object (``io.BytesIO``, a file opened ``"wb"``), as it is: no rename there.

    ``obj`` is tensors, arrays, numbers, strings, None and dicts, lists and tuples of them
    (a ``state_dict()``, a checkpoint). Each tensor is stored on its own: two names for one
    tensor (tied weights) or a view of another load as separate copies, where
    ``torch.load`` keeps them shared. Other objects (a whole Module) are pickled, and load
    only with ``load(..., weights_only=False)``. The folder must exist, as for ``torch.save``.
    """
    arrays: dict[str, np.ndarray] = {}
    structure = json.dumps({"format": _FORMAT, "root": _encode(obj, arrays)})
    arrays["__structure__"] = np.frombuffer(structure.encode(), dtype=np.uint8)
    if hasattr(path, "write"):
        np.savez(path, **arrays)
        return
    with atomic_file(path, what="save") as f:  # a mistyped folder is an error, as in torch
        np.savez(f, **arrays)


def load(path: str | os.PathLike | BinaryIO, map_location: Any = None,
         weights_only: bool = True) -> Any:
    """Read an object written by :func:`save`. Tensors land on ``map_location`` (default cpu).

    ``map_location`` is a device (``"cpu"``, ``"cuda"``, ``"cuda:0"``, a ``tt.device``) or, as
    in PyTorch, a dict from saved to wanted device (``{"cuda:0": f"cuda:{rank}"}``) or a
    function ``f(tensor, saved_device)`` that returns the tensor to use (``tensor`` is on the
    CPU; ``lambda storage, loc: storage`` keeps it there). A file records where each tensor
    was saved from, ``"cpu"`` or ``"cuda:N"``. Unlike ``torch.load``, whatever
    ``map_location`` leaves open (None, a dict without that device) loads on the CPU, so a
    GPU checkpoint opens on a machine without a GPU.

    ``weights_only`` (default True, as PyTorch's since 2.6): a file of tensors, arrays and
    plain values never runs code; an object :func:`save` had to pickle (a whole Module)
    is refused unless ``weights_only=False`` (only for files from a trusted source). A
    device ``map_location`` moves such a Module or Tensor with ``.to``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not one :func:`save` wrote, or its structure is damaged or
            crafted (the message names the file and what is wrong).
        OSError: the file cannot be read (e.g. PermissionError).
    """
    if not (hasattr(path, "read") or isinstance(path, str | os.PathLike)):
        raise TypeError(f"load: expected a file path or an open binary file, got "
                        f"{type(path).__name__}")
    map_location = _check_map_location(map_location)
    if hasattr(path, "read") and hasattr(path, "seek"):  # an open binary file object
        return _load(path, Path(str(getattr(path, "name", "<file object>"))), map_location,
                     weights_only)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"load: no such file: {path}")
    if path.is_dir():
        raise ValueError(f"load: {path} is a directory, not a file written by tt.save")
    if not path.is_file():  # a device or a pipe: /dev/zero would be read forever
        raise ValueError(f"load: {path} is not a regular file, not one written by tt.save")
    with open(path, "rb") as file:  # an unreadable file raises its OSError (PermissionError)
        return _load(file, path, map_location, weights_only)


def _check_map_location(map_location: Any) -> Any:
    """``map_location`` with its devices as ``"cpu"``/``"cuda"``, checked before the file is
    read: a bad device, or a GPU on a machine without one, is not a damaged file."""
    if map_location is None or (callable(map_location) and not isinstance(map_location, str)):
        return map_location
    if isinstance(map_location, dict):  # names checked now; a GPU only if a tensor goes
        for device in map_location.values():  # there (a CPU file opens without one, as in
            if device is not None:            # PyTorch's DDP idiom {"cuda:0": "cuda:1"})
                backend.split_device(device)
        return map_location
    device = backend.normalize_device(map_location)  # raises on what is not a device
    if device == "cuda":
        backend.array_module(device)  # no GPU here: say so now
    return device


def _place(arr: np.ndarray, saved: str, map_location: Any) -> Any:
    """The loaded array ``arr`` on the device ``map_location`` says for a tensor saved on
    ``saved`` (``"cpu"`` or ``"cuda:N"``), as ``torch.load`` reads it: a device for all, a
    dict from saved to wanted device, or ``f(tensor, saved)`` returning the tensor to use.
    What it leaves open (None, a dict without ``saved``, ``f`` returning None) is the CPU.
    Its errors (no GPU, the function's own) are raised as they are, not as a damaged file."""
    try:
        if isinstance(map_location, dict):
            map_location = map_location.get(saved)
        elif callable(map_location):
            moved = map_location(Tensor(arr), saved)
            if moved is not None and not isinstance(moved, Tensor):
                raise TypeError(f"load: map_location returned a {type(moved).__name__}, "
                                f"expected a Tensor or None")
            return arr if moved is None else moved._data
        return backend.to_device(arr, map_location) if map_location else arr
    except Exception as exc:
        raise _Placement(exc) from None


class _Placement(Exception):
    """An error of ``map_location``'s, carried out of :func:`_load` unchanged."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _check_sizes(zf: zipfile.ZipFile) -> None:
    """Each member's array header must declare exactly the bytes the member holds, so a
    crafted header (shape ``(10**12,)``) is refused before anything is allocated."""
    for info in zf.infolist():
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"{info.filename}: unsupported .npy version {version}")
            size = math.prod(shape) * dtype.itemsize
            if dtype.hasobject or size != info.file_size - f.tell():
                raise ValueError(f"{info.filename}: its header declares {dtype} {shape} but it "
                                 f"holds {info.file_size - f.tell()} bytes")


def _load(file: Any, path: Path, map_location: Any, weights_only: bool = True) -> Any:
    try:
        if not getattr(file, "seekable", lambda: True)():
            raise ValueError("the stream is not seekable (an .npz archive is read from its "
                             "end); read it into io.BytesIO(stream.read()) first")
        if not zipfile.is_zipfile(file):  # text, .npy, pickle, truncated: never reach np.load
            file.seek(0)
            zip_start = file.read(4) == b"PK\x03\x04"
            raise ValueError("truncated or incomplete (an .npz archive without its end)"
                             if zip_start else "not an .npz archive")
        file.seek(0)
        with np.load(file, allow_pickle=False) as archive:
            if any(n.endswith("data.pkl") for n in archive.zip.namelist()):
                raise ValueError("it is a PyTorch file (torch.save's archive, which holds "
                                 "pickles); load it with torch.load and pass "
                                 "{k: v.numpy() for k, v in state_dict.items()} to tinytrain")
            _check_sizes(archive.zip)
            if "__structure__" not in archive.files:
                raise ValueError("an .npz file but not one written by tt.save")
            meta = json.loads(archive["__structure__"].tobytes().decode())
            if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
                fmt = meta.get("format") if isinstance(meta, dict) else None
                raise ValueError(f"unknown format {fmt!r}")
            arrays = {k: archive[k] for k in archive.files if k != "__structure__"}
        return _Decoder(arrays, map_location, weights_only).node(meta.get("root"), "root", 0)
    except _Placement as placement:
        raise placement.error from None
    except pickle.UnpicklingError as exc:  # weights_only refused a pickled object
        raise pickle.UnpicklingError(f"load: {path}: {exc}") from None
    except ValueError as exc:  # also json.JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"load: {path} is not a readable tinytrain file: {exc}") from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, RuntimeError,
            NotImplementedError) as exc:  # RuntimeError: an 'encrypted' or too deep entry
        raise ValueError(f"load: {path} is not a readable tinytrain file: "
                         f"{type(exc).__name__}: {exc}") from None
