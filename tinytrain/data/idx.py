"""The IDX file format: read and write the files MNIST ships in.

An IDX file is a tiny header followed by one C-order array::

    byte 0-1   0x00 0x00           magic: two zero bytes
    byte 2     type code           0x08 uint8, 0x09 int8, 0x0B int16,
                                   0x0C int32, 0x0D float32, 0x0E float64
    byte 3     ndims               number of dimensions
    then       ndims x uint32      the sizes, big-endian
    then       the data            prod(sizes) elements, big-endian, row-major

``train-images-idx3-ubyte`` is therefore ``00 00 08 03`` + ``60000 28 28`` + 47,040,000
pixels, and sample ``i`` starts at byte ``16 + i * 784``.

:func:`read_idx` trusts nothing: every way a file can be wrong (magic, type code,
truncated data, trailing bytes, a corrupt gzip) raises a :class:`ValueError` that names the
file and the problem, so a bad download never becomes a silently wrong array.
Chapter 5 (``notebooks/05_dataloader.ipynb``) takes the format apart byte by byte.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import secrets
import stat
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

#: IDX type code -> big-endian NumPy dtype of one element.
IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

#: NumPy dtype (native byte order) -> IDX type code, for :func:`write_idx`.
_CODES: dict[np.dtype, int] = {dt.newbyteorder("="): code for code, dt in IDX_TYPES.items()}

_GZIP_MAGIC = b"\x1f\x8b"


def parse_idx(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an (uncompressed) IDX file into an array.

    Args:
        data: the whole file content.
        name: what to call the data in error messages (usually its path).

    Returns:
        A new, writable array of shape ``dims`` in native byte order, with the dtype the
        type code names (``uint8`` for MNIST images and labels).

    Raises:
        ValueError: naming ``name`` and the problem, when the bytes are not a valid IDX file.
    """
    if len(data) < 4:
        raise ValueError(f"{name}: not an IDX file: {len(data)} bytes, shorter than the header")
    zero0, zero1, code, ndims = data[0], data[1], data[2], data[3]
    if zero0 != 0 or zero1 != 0:
        raise ValueError(
            f"{name}: not an IDX file: wrong magic {data[:4].hex(' ')} "
            f"(an IDX file starts with two zero bytes)"
        )
    if code not in IDX_TYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_TYPES)
        raise ValueError(f"{name}: unknown IDX type code 0x{code:02X} (known: {known})")
    if ndims == 0:
        raise ValueError(f"{name}: IDX header declares 0 dimensions")
    header_size = 4 + 4 * ndims
    if len(data) < header_size:
        raise ValueError(
            f"{name}: truncated header: {ndims} dimensions need {header_size} bytes, "
            f"file has {len(data)}"
        )
    dims = struct.unpack(f">{ndims}I", data[4:header_size])
    dtype = IDX_TYPES[code]
    expected = header_size + int(np.prod(dims, dtype=object)) * dtype.itemsize
    if len(data) < expected:
        raise ValueError(
            f"{name}: truncated data: shape {dims} of {dtype.newbyteorder('=').name} needs "
            f"{expected} bytes, file has {len(data)}"
        )
    if len(data) > expected:
        raise ValueError(
            f"{name}: {len(data) - expected} trailing bytes after the data of shape {dims} "
            f"({expected} bytes expected)"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header_size).reshape(dims)
    return array.astype(dtype.newbyteorder("="))  # a native-order, writable copy


def _gunzip(raw: bytes, name: str) -> bytes:
    """Decompress a whole gzip stream, turning every failure into a ValueError."""
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise ValueError(f"{name}: corrupt gzip file ({exc})") from None


def read_bytes(path: str | os.PathLike) -> bytes:
    """The uncompressed content of ``path``: gunzipped when it is a gzip file.

    A file is treated as gzip when it starts with the gzip magic ``1f 8b`` (no IDX file can:
    IDX files start with two zero bytes) or when its name ends in ``.gz``.
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC or path.suffix == ".gz":
        return _gunzip(raw, str(path))
    return raw


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file, plain or gzipped, into a NumPy array.

    Args:
        path: an IDX file such as ``train-images-idx3-ubyte`` or ``train-images-idx3-ubyte.gz``.

    Returns:
        An array of the shape stored in the header, e.g. ``uint8 [60000, 28, 28]`` for the MNIST
        training images and ``uint8 [60000]`` for its labels.

    Raises:
        FileNotFoundError: when ``path`` does not exist (and other ``OSError`` s as Python
            raises them, e.g. ``IsADirectoryError``, each naming the path).
        ValueError: naming the file and the problem: wrong magic, unknown type code, truncated
            header or data, trailing bytes, or a corrupt gzip stream.
    """
    return parse_idx(read_bytes(path), str(path))


def idx_bytes(array: np.ndarray) -> bytes:
    """Serialise ``array`` as the bytes of an (uncompressed) IDX file."""
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _CODES:
        names = ", ".join(sorted(d.name for d in _CODES))
        raise ValueError(f"IDX cannot store dtype {array.dtype} (it stores {names})")
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"IDX stores 1 to 255 dimensions, got an array of shape {array.shape}")
    if any(n >= 2**32 for n in array.shape):
        raise ValueError(f"IDX dimensions must be < 2**32, got shape {array.shape}")
    header = struct.pack(f">BBBB{array.ndim}I", 0, 0, _CODES[native], array.ndim, *array.shape)
    big_endian = IDX_TYPES[_CODES[native]]
    return header + np.ascontiguousarray(array, dtype=big_endian).tobytes()


def write_idx(path: str | os.PathLike, array: np.ndarray, compresslevel: int = 9) -> Path:
    """Write ``array`` as an IDX file, gzipped when ``path`` ends in ``.gz``.

    The gzip stream carries no file name and a zero timestamp, so the same array always gives
    the same bytes with the same zlib. The file appears atomically (temporary file + rename).

    Args:
        path: where to write.
        array: any shape ``[d0, ..., dk]`` (1 to 255 dims) of uint8, int8, int16, int32, float32
            or float64.
        compresslevel: gzip level for ``.gz`` paths.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    payload = idx_bytes(array)
    if path.suffix == ".gz":
        buf = io.BytesIO()
        with gzip.GzipFile(
            filename="", mode="wb", fileobj=buf, compresslevel=compresslevel, mtime=0
        ) as gz:
            gz.write(payload)
        payload = buf.getvalue()
    atomic_write_bytes(path, payload)
    return path


def atomic_write_bytes(path: str | os.PathLike, payload: bytes) -> None:
    """Write ``payload`` to ``path`` with :func:`atomic_file`, making its folder if needed."""
    with atomic_file(path, make_folder=True) as f:
        f.write(payload)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, make_folder: bool = False,
                what: str = "write") -> Iterator[BinaryIO]:
    """A new file for ``path`` that readers see whole or not at all: ``with atomic_file(p) as
    f: f.write(...)``.

    The block writes into a hidden temporary file in the same folder. When it ends without
    an error, the file is flushed to disk, given the permission bits of the regular file it
    replaces (else those of a plain ``open(path, "wb")``: ``0o666`` less the umask), renamed
    over ``path`` (``os.replace``, atomic on POSIX and Windows; a symbolic link is written
    through, not replaced) and the rename itself flushed. On an error or a Ctrl-C the
    temporary file is removed and ``path`` is untouched. The folder must exist unless
    ``make_folder``: a mistyped folder is an error (FileNotFoundError, ``what`` first).
    """
    target = replaceable_target(path)
    if make_folder:
        target.parent.mkdir(parents=True, exist_ok=True)
    elif not target.parent.is_dir():
        raise FileNotFoundError(f"{what}: the folder of {path} does not exist "
                                f"({target.parent}); create it first")
    tmp = temp_path_for(target)
    try:
        with open(tmp, "xb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            _keep_mode_of(target, f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _keep_mode_of(path: Path, fd: int) -> None:
    """Give the new file the permission bits of the regular file it replaces, if any."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replaceable_target(path: str | os.PathLike) -> Path:
    """The file an atomic write should replace: ``path`` with symbolic links resolved.

    Writing atomically means renaming a new file over the target, which would replace a
    special file (``/dev/null``, a FIFO, a socket) with a plain file and cannot replace a
    directory: both are refused with a ValueError that names the path.
    """
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        kind = "a directory" if target.is_dir() else "not a regular file"
        raise ValueError(f"{path} is {kind}; tinytrain writes files atomically (a new file "
                         "renamed over the old one) and only replaces regular files")
    return target


#: The longest file name most file systems take (bytes, NAME_MAX).
_NAME_MAX = 255


def temp_path_for(path: Path) -> Path:
    """A fresh hidden name next to ``path`` for writing it atomically (``.name.<random>.part``;
    the name cut short, so that a name near the file system's limit still gets one)."""
    suffix = f".{secrets.token_hex(6)}.part"
    name = path.name.encode()[: _NAME_MAX - 1 - len(suffix)].decode(errors="ignore")
    return path.with_name(f".{name}{suffix}")
