"""``tt.save`` / ``tt.load``: state dicts and checkpoints as NumPy ``.npz`` files.

An object is any nesting of dicts (str or int keys), lists, tuples, Tensors,
NumPy arrays and plain Python values (numbers, strings, bools, None). Arrays go
into the archive as ``a0, a1, ...``; the nesting is stored as JSON next to them.
No pickle: loading a file never runs code.

Saving is atomic: the archive is written to a temporary file in the same
folder, flushed to disk, then renamed over the target. A run interrupted while
saving leaves the previous file intact.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.tensor import Tensor

_FORMAT = "tinytrain-save-v1"


def _encode(obj: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, Tensor) or isinstance(obj, np.ndarray) or hasattr(obj,
                                                                        "__cuda_array_interface__"):
        key = f"a{len(arrays)}"
        kind = "tensor" if isinstance(obj, Tensor) else "ndarray"
        data = obj.data if isinstance(obj, Tensor) else obj
        arrays[key] = backend.to_device(data, "cpu")
        return {"t": kind, "k": key}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str | int) or isinstance(k, bool):
                raise TypeError(f"save: dict keys must be str or int, got {k!r}")
        return {"t": "dict", "items": [[k, _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, list | tuple):
        return {"t": type(obj).__name__, "items": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, np.generic):
        return {"t": "py", "v": obj.item()}
    if obj is None or isinstance(obj, bool | int | float | str):
        return {"t": "py", "v": obj}
    raise TypeError(f"save: cannot store an object of type {type(obj).__name__}")


def _decode(node: Any, arrays: Any, device: str | None) -> Any:
    t = node["t"]
    if t in ("tensor", "ndarray"):
        arr = arrays[node["k"]]
        if t == "ndarray":
            return arr
        return Tensor(backend.to_device(arr, device) if device else arr)
    if t == "dict":
        return {k: _decode(v, arrays, device) for k, v in node["items"]}
    if t in ("list", "tuple"):
        items = [_decode(v, arrays, device) for v in node["items"]]
        return items if t == "list" else tuple(items)
    if t == "py":
        return node["v"]
    raise ValueError(f"unknown node type {t!r}")


def save(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` to ``path`` (an ``.npz`` archive) atomically."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    structure = json.dumps({"format": _FORMAT, "root": _encode(obj, arrays)})
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __structure__=np.frombuffer(structure.encode(), dtype=np.uint8), **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | os.PathLike, map_location: str | None = None,
         weights_only: bool = True) -> Any:
    """Read an object written by :func:`save`. Tensors land on ``map_location`` (default cpu).

    ``weights_only`` is accepted for PyTorch's signature and changes nothing: a tinytrain
    file holds no pickle, so loading one never runs code.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"load: no such file: {path}")
    if not zipfile.is_zipfile(path):  # text, .npy, pickle, truncated: never reach np.load
        raise ValueError(f"load: {path} is not a tinytrain file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            if "__structure__" not in archive.files:
                raise ValueError(f"load: {path} is an .npz file but not one written by tt.save")
            meta = json.loads(archive["__structure__"].tobytes().decode())
            if meta.get("format") != _FORMAT:
                raise ValueError(f"load: {path} has unknown format {meta.get('format')!r}")
            arrays = {k: archive[k] for k in archive.files if k != "__structure__"}
    except (zipfile.BadZipFile, OSError, EOFError, UnicodeDecodeError,
            json.JSONDecodeError) as exc:
        raise ValueError(f"load: {path} is not a readable tinytrain file ({exc})") from None
    return _decode(meta["root"], arrays, backend.normalize_device(map_location)
                   if map_location else None)
