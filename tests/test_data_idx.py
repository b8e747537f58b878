"""read_idx / write_idx: the IDX format, and every way a file can be wrong."""

from __future__ import annotations

import gzip
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytrain.data import parse_idx, read_idx, write_idx
from tinytrain.data.idx import IDX_TYPES

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64]


def idx_header(code: int, dims: tuple[int, ...]) -> bytes:
    return bytes([0, 0, code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- good files


def test_header_parsed_byte_by_byte(tmp_path):
    # 00 00 | 08 = uint8 | 03 dims | 2, 3, 4 big-endian | 24 bytes of data
    data = idx_header(0x08, (2, 3, 4)) + bytes(range(24))
    assert data[:16].hex() == "00000803000000020000000300000004"
    out = read_idx(write(tmp_path, "a-idx3-ubyte", data))
    assert out.shape == (2, 3, 4) and out.dtype == np.uint8
    np.testing.assert_array_equal(out.reshape(-1), np.arange(24))


def test_big_endian_elements(tmp_path):
    data = idx_header(0x0C, (3,)) + struct.pack(">3i", 1, -1, 2**31 - 1)
    out = read_idx(write(tmp_path, "ints", data))
    assert out.dtype == np.int32 and out.dtype.isnative
    assert out.tolist() == [1, -1, 2**31 - 1]
    data = idx_header(0x0D, (2,)) + struct.pack(">2f", 0.5, -3.25)
    assert read_idx(write(tmp_path, "floats", data)).tolist() == [0.5, -3.25]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_roundtrip_all_types(tmp_path, dtype, suffix):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((5, 3, 2)) * 100).astype(dtype)
    path = write_idx(tmp_path / f"x{suffix}", array)
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, array)
    out[0] = 0  # a writable copy, not a view of the file's bytes


def test_gzip_detected_by_content_too(tmp_path):
    array = np.arange(10, dtype=np.uint8)
    gz = write_idx(tmp_path / "a.gz", array).read_bytes()
    np.testing.assert_array_equal(read_idx(write(tmp_path, "no-suffix", gz)), array)


def test_write_is_deterministic(tmp_path):
    array = np.arange(100, dtype=np.int16).reshape(10, 10)
    a = write_idx(tmp_path / "a.gz", array).read_bytes()
    b = write_idx(tmp_path / "b.gz", array).read_bytes()
    assert a == b  # no name, no timestamp in the gzip header


def test_write_rejects_what_idx_cannot_store(tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        write_idx(tmp_path / "x", np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="dimensions"):
        write_idx(tmp_path / "x", np.zeros((), dtype=np.uint8))
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- bad files

GOOD = idx_header(0x08, (2, 3)) + bytes(6)


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"", "shorter than the header"),
        (b"\x00\x00\x08", "shorter than the header"),
        (b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"x", "wrong magic"),
        (b"\x00\x07\x08\x01" + struct.pack(">I", 1) + b"x", "wrong magic"),
        (idx_header(0x0A, (1,)) + b"x", "unknown IDX type code 0x0A"),
        (idx_header(0x07, (1,)) + b"x", "unknown IDX type code 0x07"),
        (b"\x00\x00\x08\x00", "0 dimensions"),
        (b"\x00\x00\x08\x03" + struct.pack(">2I", 2, 3), "truncated header"),
        (GOOD[:-1], "truncated data"),
        (idx_header(0x08, (60000, 28, 28)) + bytes(784), "truncated data"),
        (idx_header(0x0C, (2,)) + bytes(7), "truncated data"),
        (GOOD + b"\x00", "1 trailing bytes"),
        (GOOD + bytes(100), "100 trailing bytes"),
        (idx_header(0x08, (0,)) + b"\x00", "trailing bytes"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_files_raise_value_error_naming_file_and_problem(tmp_path, data, problem):
    path = write(tmp_path, "bad-idx-file", data)
    with pytest.raises(ValueError, match="bad-idx-file") as info:
        read_idx(path)
    assert problem in str(info.value)
    # the same problem through a gzip wrapper
    gz = write(tmp_path, "bad-idx-file.gz", gzip.compress(data))
    with pytest.raises(ValueError, match=r"bad-idx-file\.gz") as info:
        read_idx(gz)
    assert problem in str(info.value)


def test_corrupt_gzip(tmp_path):
    payload = idx_header(0x08, (100, 100)) + np.random.default_rng(0).bytes(10_000)
    gz = bytearray(gzip.compress(payload))
    flipped = bytearray(gz)
    flipped[len(gz) // 2] ^= 0xFF  # damage the deflate stream or its CRC
    cases = {
        "flipped.gz": bytes(flipped),
        "truncated.gz": bytes(gz[: len(gz) // 2]),
        "header-only.gz": bytes(gz[:10]),
        "crc.gz": bytes(gz[:-8]) + b"\x00\x00\x00\x00" + bytes(gz[-4:]),
        "not-gzip.gz": payload,  # named .gz, but plain bytes
        "garbage-after.gz": bytes(gz) + b"garbage",
    }
    for name, data in cases.items():
        with pytest.raises(ValueError, match=rf"{name}: corrupt gzip"):
            read_idx(write(tmp_path, name, data))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "nope.gz")


# --------------------------------------------------------------------------- fuzzing


def oracle(data: bytes) -> np.ndarray | None:
    """An independent, slow reading of the IDX spec: the array, or None if invalid."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_TYPES or data[3] == 0:
        return None
    ndims = data[3]
    if len(data) < 4 + 4 * ndims:
        return None
    dims = [int.from_bytes(data[4 + 4 * k : 8 + 4 * k], "big") for k in range(ndims)]
    count = 1
    for d in dims:
        count *= d
    itemsize = IDX_TYPES[data[2]].itemsize
    if len(data) != 4 + 4 * ndims + count * itemsize:
        return None
    body = data[4 + 4 * ndims :]
    items = [body[i * itemsize : (i + 1) * itemsize] for i in range(count)]
    values = [np.frombuffer(b, dtype=IDX_TYPES[data[2]])[0] for b in items]
    return np.array(values, dtype=IDX_TYPES[data[2]].newbyteorder("=")).reshape(dims)


def check_against_oracle(data: bytes) -> None:
    expected = oracle(data)
    try:
        out = parse_idx(data, "fuzz")
    except ValueError as exc:
        assert expected is None, f"rejected a valid file: {exc}"
        assert str(exc).startswith("fuzz: ")
        return
    assert expected is not None, "accepted an invalid file"
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


@st.composite
def idx_like(draw) -> bytes:
    """Mostly-plausible IDX files: valid ones and near misses."""
    magic = draw(st.sampled_from([b"\x00\x00", b"\x00\x00", b"\x00\x01", b"\x08\x00"]))
    code = draw(st.sampled_from([*IDX_TYPES, 0x00, 0x0A, 0x10, 0xFF]))
    dims = draw(st.lists(st.integers(0, 4), min_size=0, max_size=4))
    ndims = draw(st.one_of(st.just(len(dims)), st.integers(0, 255)))
    itemsize = IDX_TYPES[code].itemsize if code in IDX_TYPES else 1
    count = int(np.prod(dims)) if dims else 1
    size = count * itemsize + draw(st.sampled_from([0, 0, 0, -1, 1, -itemsize, 3]))
    body = draw(st.binary(min_size=max(size, 0), max_size=max(size, 0)))
    header = magic + bytes([code, ndims]) + b"".join(d.to_bytes(4, "big") for d in dims)
    cut = draw(st.one_of(st.none(), st.integers(0, len(header))))
    data = header + body
    return data if cut is None else data[:cut]


@settings(max_examples=400, deadline=None)
@given(idx_like())
def test_fuzz_plausible_headers(data):
    check_against_oracle(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_random_bytes(data):
    check_against_oracle(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.integers(0, 15))
def test_fuzz_mutated_mnist_header(noise, n_bytes):
    # a 4x2x3 uint8 "image file" whose first n_bytes header bytes are replaced by noise
    data = bytearray(idx_header(0x08, (4, 2, 3)) + bytes(range(24)))
    data[:n_bytes] = noise[:n_bytes]
    check_against_oracle(bytes(data))


@settings(max_examples=60, deadline=None)
@given(data=idx_like(), gz=st.booleans())
def test_fuzz_through_files(data, gz):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("f.gz" if gz else "f")
        path.write_bytes(gzip.compress(data) if gz else data)
        expected = oracle(data)
        try:
            out = read_idx(path)
        except ValueError as exc:
            assert expected is None and str(path) in str(exc)
        else:
            assert expected is not None
            np.testing.assert_array_equal(out, expected)
