"""tt.save / tt.load: nested checkpoints, atomic writes, and bad files."""

from __future__ import annotations

import io
import json
import os
import pickle
import stat
from collections import OrderedDict
from fractions import Fraction

import numpy as np
import pytest

import tinytrain as tt
from tinytrain import nn
from tinytrain.data.idx import write_idx
from tinytrain.optim import Adam


def make_checkpoint():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9))
    model(tt.randn(5, 3)).sum().backward()
    opt.step()
    return model, opt, {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "epoch": 3,
        "best_acc": 0.9875,
        "name": "mlp",
        "note": None,
        "flags": [True, False],
        "shape": (1, 28, 28),
        "rng": tt.get_rng_state(),
        "raw": np.arange(6, dtype=np.int32).reshape(2, 3),
        "scalar": np.float32(1.5),
        "nested": {"deep": {"k": [1, 2.5, "three", tt.tensor([1.0, 2.0])]}},
    }


def test_round_trip_nested_checkpoint(tmp_path):
    model, opt, ckpt = make_checkpoint()
    path = tmp_path / "ckpt.npz"
    tt.save(ckpt, path)
    back = tt.load(path)

    assert list(back) == list(ckpt)
    assert list(back["model"]) == list(ckpt["model"])
    for k, v in ckpt["model"].items():
        assert isinstance(back["model"][k], tt.Tensor)
        assert back["model"][k].dtype == v.dtype
        np.testing.assert_array_equal(back["model"][k].numpy(), v.numpy())

    osd, bsd = ckpt["optimizer"], back["optimizer"]
    assert set(bsd["state"]) == {0, 1, 2, 3} and all(isinstance(i, int) for i in bsd["state"])
    for i, s in osd["state"].items():
        assert bsd["state"][i]["step"] == s["step"] == 1
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(bsd["state"][i][k], s[k])
    assert bsd["param_groups"][0]["betas"] == (0.8, 0.9)
    assert bsd["param_groups"][0]["params"] == [0, 1, 2, 3]

    assert back["epoch"] == 3 and isinstance(back["epoch"], int)
    assert back["best_acc"] == 0.9875 and back["name"] == "mlp" and back["note"] is None
    assert back["flags"] == [True, False] and back["shape"] == (1, 28, 28)
    assert back["scalar"] == 1.5
    assert isinstance(back["raw"], np.ndarray) and back["raw"].dtype == np.int32
    np.testing.assert_array_equal(back["raw"], ckpt["raw"])
    deep = back["nested"]["deep"]["k"]
    assert deep[:3] == [1, 2.5, "three"]
    np.testing.assert_array_equal(deep[3].numpy(), [1.0, 2.0])


def test_loaded_checkpoint_restores_training(tmp_path):
    model, opt, ckpt = make_checkpoint()
    tt.save(ckpt, tmp_path / "c.npz")
    back = tt.load(tmp_path / "c.npz")

    tt.manual_seed(99)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model2.load_state_dict(back["model"])
    opt2 = Adam(model2.parameters(), lr=1.0)
    opt2.load_state_dict(back["optimizer"])
    tt.set_rng_state(back["rng"])
    x2 = tt.randn(5, 3)
    tt.set_rng_state(ckpt["rng"])
    x1 = tt.randn(5, 3)
    np.testing.assert_array_equal(x1.numpy(), x2.numpy())  # the RNG state survived
    for m, o, x in ((model, opt, x1), (model2, opt2, x2)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_load_to_device(tmp_path, device):
    tt.save({"w": tt.tensor([1.0, 2.0])}, tmp_path / "w.npz")
    w = tt.load(tmp_path / "w.npz", map_location=device)["w"]
    assert w.device == device
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])


def test_overwrite_replaces_file(tmp_path):
    path = tmp_path / "x.npz"
    tt.save({"v": 1}, path)
    tt.save({"v": 2}, path)
    assert tt.load(path) == {"v": 2}
    assert os.listdir(tmp_path) == ["x.npz"]


def test_crash_mid_write_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    tt.save({"epoch": 1, "w": tt.tensor([1.0, 2.0])}, path)
    before = path.read_bytes()

    def crashing_savez(file, *args, **kwargs):
        file.write(b"PK\x03\x04 half an archive")
        file.flush()
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crashing_savez)
    with pytest.raises(OSError, match="disk full"):
        tt.save({"epoch": 2, "w": tt.tensor([3.0, 4.0])}, path)
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.npz"]  # no temporary file left behind
    back = tt.load(path)
    assert back["epoch"] == 1
    np.testing.assert_array_equal(back["w"].numpy(), [1.0, 2.0])


def test_interrupt_mid_write_cleans_up(tmp_path, monkeypatch):
    def interrupted(file, *args, **kwargs):
        file.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tt.save({"a": 1}, tmp_path / "new.npz")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["text", "npy", "plain_npz", "empty", "truncated", "pickle"])
def test_load_non_tinytrain_file_names_path(tmp_path, kind):
    path = tmp_path / f"bad.{kind}"
    if kind == "text":
        path.write_text("hello, this is not a checkpoint\n")
    elif kind == "npy":
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    elif kind == "plain_npz":
        with open(path, "wb") as f:
            np.savez(f, x=np.zeros(3))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        tt.save({"w": tt.zeros(100)}, tmp_path / "good.npz")
        path.write_bytes((tmp_path / "good.npz").read_bytes()[:200])
    elif kind == "pickle":
        import pickle

        path.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError) as info:
        tt.load(path)
    assert str(path) in str(info.value)


def test_file_objects_round_trip_and_parameters_stay_parameters():
    import io

    model = nn.Linear(3, 2)
    buffer = io.BytesIO()
    tt.save({"w": model.weight, "t": tt.ones(2, requires_grad=True), "plain": tt.zeros(2),
             "state": model.state_dict()}, buffer)
    buffer.seek(0)
    got = tt.load(buffer)
    assert type(got["w"]) is nn.Parameter and got["w"].requires_grad  # as torch.load
    np.testing.assert_array_equal(got["w"].numpy(), model.weight.numpy())
    assert type(got["t"]) is tt.Tensor and got["t"].requires_grad
    assert not got["plain"].requires_grad and not got["state"]["weight"].requires_grad


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        tt.load(tmp_path / "nope.npz")


def test_save_rejects_unsupported_objects(tmp_path):
    with pytest.raises(TypeError, match="keys"):
        tt.save({(1, 2): 3}, tmp_path / "a.npz")
    with pytest.raises(TypeError, match="cannot be pickled"):
        tt.save({"f": lambda x: x}, tmp_path / "a.npz")
    assert not any(tmp_path.iterdir())


def test_sets_load_as_sets_and_other_objects_only_with_weights_only_false(tmp_path):
    # As torch.save / torch.load (2.6+): a set is data; any other object (a fraction, a
    # whole Module) is pickled, and refused unless the caller trusts the file.
    tt.save({"s": {1, 2.5, "a"}, "c": Fraction(1, 3)}, tmp_path / "a.npz")
    with pytest.raises(pickle.UnpicklingError, match=r"root\['c'\] is a pickled "
                                                     r"fractions.Fraction.*weights_only=False"):
        tt.load(tmp_path / "a.npz")
    got = tt.load(tmp_path / "a.npz", weights_only=False)
    assert got == {"s": {1, 2.5, "a"}, "c": Fraction(1, 3)}


def test_bytes_complex_numbers_dtypes_and_ordered_dicts_are_data_as_in_torch(tmp_path):
    """What ``torch.load(weights_only=True)`` opens, ``tt.load`` opens, with the same types
    (a checkpoint with a tokenizer's bytes, a dtype in its config, a state_dict's
    OrderedDict); NumPy scalars load as Python numbers."""
    torch = pytest.importorskip("torch")
    values = {"bytes": b"\x00ab\xff", "bytearray": bytearray(b"xy"),
              "complex": complex(1.5, -2.0), "ordered": OrderedDict(b=1, a=[2.0])}
    for name, value in values.items():
        tt.save({name: value}, tmp_path / "v.npz")
        got = tt.load(tmp_path / "v.npz")[name]
        buffer = io.BytesIO()
        torch.save({name: value}, buffer)
        buffer.seek(0)
        theirs = torch.load(buffer, weights_only=True)[name]
        assert got == value and type(got) is type(theirs)
        if isinstance(value, OrderedDict):
            assert list(got) == ["b", "a"]
    # (torch's own pickle of b"" and NumPy scalars are refused by its weights_only load)
    tt.save([b"", bytearray(), np.complex64(3 - 1j)], tmp_path / "e.npz")
    assert tt.load(tmp_path / "e.npz") == [b"", bytearray(), 3 - 1j]
    dtypes = [tt.float16, tt.float32, tt.float64, tt.int32, tt.int64, tt.uint8, tt.bool_]
    tt.save({"dtypes": dtypes}, tmp_path / "d.npz")
    assert tt.load(tmp_path / "d.npz")["dtypes"] == dtypes
    model = nn.Linear(2, 3)
    tt.save(model.state_dict(), tmp_path / "m.npz")
    assert type(tt.load(tmp_path / "m.npz")) is type(model.state_dict())


# ---------------------------------------------------------------- crafted and damaged files


def write_structure(path, structure, raw: bytes | None = None, **arrays) -> None:
    """An .npz with the given ``__structure__`` (JSON-encoded, or raw bytes) and arrays."""
    payload = raw if raw is not None else json.dumps(structure).encode()
    with open(path, "wb") as f:
        np.savez(f, __structure__=np.frombuffer(payload, dtype=np.uint8), **arrays)


def wrap(root):
    return {"format": "tinytrain-save-v1", "root": root}


def nested_lists(depth: int) -> dict:
    node = {"t": "py", "v": 1}
    for _ in range(depth):
        node = {"t": "list", "items": [node]}
    return node


W = {"w": np.zeros(3, np.float32)}
CRAFTED = {
    "root is not a node": (wrap(5), {}),
    "root is missing": ({"format": "tinytrain-save-v1"}, {}),
    "structure is a list": ([1, 2], {}),
    "format missing": ({"root": {"t": "py", "v": 1}}, {}),
    "node without type": (wrap({"items": []}), {}),
    "type is not a string": (wrap({"t": ["dict"]}), {}),
    "unknown node type": (wrap({"t": "exec", "v": "os.system"}), {}),
    "dict without items": (wrap({"t": "dict"}), {}),
    "dict items not a list": (wrap({"t": "dict", "items": {"a": 1}}), {}),
    "dict item not a pair": (wrap({"t": "dict", "items": [["a"]]}), {}),
    "dict key is a list": (wrap({"t": "dict", "items": [[["a"], {"t": "py", "v": 1}]]}), {}),
    "dict key is a bool": (wrap({"t": "dict", "items": [[True, {"t": "py", "v": 1}]]}), {}),
    "list item not a node": (wrap({"t": "list", "items": [3]}), {}),
    "tuple items missing": (wrap({"t": "tuple"}), {}),
    "py value missing": (wrap({"t": "py"}), {}),
    "py value is a list": (wrap({"t": "py", "v": [1, 2]}), {}),
    "py value is a dict": (wrap({"t": "py", "v": {"a": 1}}), {}),
    "array key missing": (wrap({"t": "tensor"}), {}),
    "array key not in the archive": (wrap({"t": "tensor", "k": "a7"}), W),
    "array key not a string": (wrap({"t": "ndarray", "k": 0}), W),
    "array used twice": (wrap({"t": "list", "items": [{"t": "tensor", "k": "w"},
                                                      {"t": "tensor", "k": "w"}]}), W),
    "tensor of strings": (wrap({"t": "tensor", "k": "s"}), {"s": np.array(["abc"])}),
    "bytes of float32": (wrap({"t": "bytes", "k": "w"}), W),
    "bytes of a missing array": (wrap({"t": "bytes", "k": "a9"}), W),
    "complex of strings": (wrap({"t": "complex", "v": ["1", "2"]}), {}),
    "complex of three parts": (wrap({"t": "complex", "v": [1.0, 2.0, 3.0]}), {}),
    "dtype of an object": (wrap({"t": "dtype", "v": "object"}), {}),
    "dtype not a name": (wrap({"t": "dtype", "v": ["float32"]}), {}),
    "ordered is a string": (wrap({"t": "dict", "items": [], "ordered": "yes"}), {}),
    "nested 150 deep": (wrap(nested_lists(150)), {}),
    "nested 100000 deep (JSON parser)": (None, {}),
    "structure not UTF-8": (None, {}),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_crafted_structure_raises_value_error_naming_the_file(tmp_path, case):
    path = tmp_path / "crafted.npz"
    structure, arrays = CRAFTED[case]
    if case.startswith("nested 100000"):
        write_structure(path, None, raw=b'{"format": "tinytrain-save-v1", "root": '
                        + b'{"t": "list", "items": [' * 100000 + b"]}" * 100000 + b"}")
    elif case == "structure not UTF-8":
        write_structure(path, None, raw=b"\xff\xfe{}")
    else:
        write_structure(path, structure, **arrays)
    with pytest.raises(ValueError) as info:
        tt.load(path)
    assert str(path) in str(info.value)


def test_nesting_up_to_the_limit_round_trips_and_deeper_is_refused_on_save(tmp_path):
    from tinytrain.serialization import MAX_DEPTH

    obj: list = [1]
    for _ in range(MAX_DEPTH - 1):
        obj = [obj]
    tt.save(obj, tmp_path / "deep.npz")
    back = tt.load(tmp_path / "deep.npz")
    for _ in range(MAX_DEPTH - 1):
        back = back[0]
    assert back == [1]
    with pytest.raises(ValueError, match="nested more than"):
        tt.save([obj], tmp_path / "deeper.npz")
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="nested more than"):
        tt.save({"c": cycle}, tmp_path / "cycle.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.npz"]


def test_a_folder_is_not_a_file(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        tt.load(tmp_path)


# ---------------------------------------------------------------- permissions


@pytest.fixture
def umask():
    def set_umask(mask: int) -> None:
        os.umask(mask)

    old = os.umask(0o022)
    yield set_umask
    os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_new_files_get_the_users_umask(tmp_path, umask, mask):
    umask(mask)
    tt.save({"w": tt.zeros(2)}, tmp_path / "new.npz")
    assert stat.S_IMODE(os.stat(tmp_path / "new.npz").st_mode) == 0o666 & ~mask


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_an_overwritten_file_keeps_its_permissions(tmp_path, umask):
    path = tmp_path / "ck.npz"
    tt.save({"v": 1}, path)
    os.chmod(path, 0o640)
    umask(0o000)
    tt.save({"v": 2}, path)
    assert tt.load(path) == {"v": 2}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_an_array_header_larger_than_its_data_is_refused_before_allocating(tmp_path):
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    structure = io.BytesIO()
    np.save(structure, np.frombuffer(json.dumps(wrap({"t": "ndarray", "k": "a0"})).encode(),
                                     np.uint8))
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("__structure__.npy", structure.getvalue())
        z.writestr("a0.npy", header.getvalue() + bytes(64))
    with pytest.raises(ValueError, match="declares float64") as info:  # not MemoryError
        tt.load(path)
    assert str(path) in str(info.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_save_refuses_to_replace_a_special_file_or_a_directory(tmp_path):
    """An atomic save renames a new file over the target: over /dev/null or a FIFO that would
    silently turn the special file into a plain one (seen once with /dev/null, as root)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        tt.save({"a": 1}, fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(ValueError, match="is a directory"):
        tt.save({"a": 1}, tmp_path)
    assert not list(tmp_path.glob(".*.part"))


def test_save_through_a_symlink_replaces_the_file_it_points_to(tmp_path):
    real = tmp_path / "real.npz"
    tt.save({"a": 1}, real)
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    tt.save({"a": 2}, link)
    assert link.is_symlink() and tt.load(real)["a"] == 2


def test_what_load_would_refuse_is_refused_by_save_and_odd_but_valid_input_works(tmp_path):
    with pytest.raises(TypeError, match="dtype object"):  # np.savez would pickle it
        tt.save({"o": np.array([1, "a"], dtype=object)}, tmp_path / "o.npz")
    assert not list(tmp_path.iterdir())
    tt.save({np.int64(3): np.float32(2.5)}, tmp_path / "k.npz")  # NumPy keys and scalars
    assert tt.load(tmp_path / "k.npz") == {3: 2.5}
    long_name = tmp_path / ("n" * 245 + ".npz")  # 249 bytes: the temporary name is cut short
    tt.save([1], long_name)
    assert tt.load(long_name) == [1] and sorted(tmp_path.iterdir())[-1] == long_name


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_load_refuses_a_device_instead_of_reading_it_forever():
    with pytest.raises(ValueError, match="not a regular file"):
        tt.load("/dev/zero")


def test_an_archive_entry_flagged_encrypted_is_a_clear_error_naming_the_file(tmp_path):
    """A flipped bit in a zip header's flags marks an entry encrypted: zipfile raises a bare
    RuntimeError about the entry; the error must name the file on disk."""
    path = tmp_path / "enc.npz"
    tt.save({"w": np.arange(4.0)}, path)
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x03\x04")
    data[at + 6] |= 1  # general purpose flags, bit 0: encrypted
    central = data.find(b"PK\x01\x02")
    while central >= 0:
        data[central + 8] |= 1
        central = data.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="not a readable tinytrain file") as info:
        tt.load(path)
    assert str(path) in str(info.value)


# ------------------------------------------------------------------ fifth review round


def test_a_frozen_parameter_stays_a_parameter_like_torch(tmp_path):
    frozen, trained = nn.Parameter(tt.ones(2), requires_grad=False), nn.Parameter(tt.ones(2))
    tt.save({"f": frozen, "t": trained, "i": tt.arange(3)}, tmp_path / "p.npz")
    back = tt.load(tmp_path / "p.npz")
    assert type(back["f"]) is nn.Parameter and not back["f"].requires_grad
    assert type(back["t"]) is nn.Parameter and back["t"].requires_grad
    assert type(back["i"]) is tt.Tensor and not back["i"].requires_grad


@pytest.mark.parametrize("map_location", [{"cuda:0": "cpu"}, lambda storage, loc: storage,
                                          {"cpu": "cpu"}, lambda storage, loc: storage.cpu()])
def test_map_location_as_a_dict_or_a_function_like_torch(tmp_path, map_location):
    tt.save({"w": tt.arange(3.0)}, tmp_path / "w.npz")
    w = tt.load(tmp_path / "w.npz", map_location=map_location)["w"]
    assert w.device == "cpu"
    np.testing.assert_array_equal(w.numpy(), [0.0, 1.0, 2.0])


def test_save_into_a_missing_folder_is_an_error_like_torch(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tt.save({"a": 1}, tmp_path / "typo" / "deep" / "x.npz")
    assert list(tmp_path.iterdir()) == []  # no folder made on the way


def test_a_truncated_file_and_a_pipe_say_what_is_wrong(tmp_path):
    import subprocess
    import sys

    tt.save({"w": tt.zeros(100)}, tmp_path / "w.npz")
    data = (tmp_path / "w.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:-10])
    with pytest.raises(ValueError, match="truncated or incomplete"):
        tt.load(tmp_path / "cut.npz")
    r = subprocess.run([sys.executable, "-c", "import sys, tinytrain as tt; "
                        "tt.load(sys.stdin.buffer)"], input=data, capture_output=True,
                       timeout=120)
    assert b"the stream is not seekable" in r.stderr


def test_a_pipe_opened_as_a_file_says_it_is_not_seekable(tmp_path):
    tt.save({"w": tt.zeros(3)}, tmp_path / "w.npz")
    r, w = os.pipe()
    os.write(w, (tmp_path / "w.npz").read_bytes())
    os.close(w)
    with os.fdopen(r, "rb") as stream, pytest.raises(ValueError, match="not seekable"):
        tt.load(stream)


def test_map_location_sees_where_each_tensor_was_saved(tmp_path, device):
    """As torch.load: a dict maps the saved device ("cpu" or "cuda:N") to the wanted one and
    a function gets it as ``loc``; what neither names loads on the CPU."""
    tt.save({"w": tt.arange(3.0, device=device), "c": tt.ones(2)}, tmp_path / "w.npz")
    saved = "cpu" if device == "cpu" else f"cuda:{tt.cuda.current_device()}"
    seen = []
    back = tt.load(tmp_path / "w.npz", map_location=lambda s, loc: seen.append(loc) or s)
    assert sorted(seen) == sorted([saved, "cpu"])
    assert back["w"].device == "cpu" and back["c"].device == "cpu"
    back = tt.load(tmp_path / "w.npz", map_location={saved: device})
    assert back["w"].device == device
    np.testing.assert_array_equal(back["w"].numpy(), [0.0, 1.0, 2.0])
    back = tt.load(tmp_path / "w.npz", map_location={"cuda:7": device})
    assert back["w"].device == "cpu"  # a dict that does not name it: the CPU
    back = tt.load(tmp_path / "w.npz", map_location=lambda s, loc: s.to(device))
    assert back["w"].device == device and back["c"].device == device


def test_a_bad_map_location_is_named_not_taken_for_a_damaged_file(tmp_path):
    tt.save({"w": tt.ones(2)}, tmp_path / "w.npz")
    for bad in ("gpu", {"cpu": "tpu"}):
        with pytest.raises(ValueError, match="unknown device") as info:
            tt.load(tmp_path / "w.npz", map_location=bad)
        assert "not a readable" not in str(info.value)
    with pytest.raises(TypeError, match="map_location returned a ndarray"):
        tt.load(tmp_path / "w.npz", map_location=lambda s, loc: s.numpy())


def _plot(path):
    from tinytrain import train

    history = train.History()
    history.step_index, history.step_loss, history.epoch_acc = [1, 2], [1.0, 0.5], [0.9]
    train.save_plot(history, str(path))


# every file tinytrain writes for a user goes through one atomic write (data.idx.atomic_file)
WRITERS = {
    "tt.save": lambda path: tt.save({"w": tt.ones(2)}, path),
    "write_idx": lambda path: write_idx(path, np.arange(6, dtype=np.uint8)),
    "save_plot": _plot,
}


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions and links")
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_keeps_permissions_and_writes_through_a_link(tmp_path, umask, writer):
    real = tmp_path / "results" / "out.png"
    real.parent.mkdir()
    real.write_bytes(b"old")
    os.chmod(real, 0o600)
    link = tmp_path / "out.png"
    link.symlink_to(real)
    umask(0o000)
    WRITERS[writer](link)
    assert link.is_symlink() and real.read_bytes() != b"old"
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o600
    assert sorted(p.name for p in real.parent.iterdir()) == ["out.png"]  # no temp file left


def test_pytorchs_ddp_resume_idiom_opens_a_cpu_file_on_a_machine_without_a_gpu(tmp_path):
    """map_location={"cuda:0": "cuda:1"} names GPUs, but no tensor of a CPU file goes there:
    it loads (it raised 'needs CuPy and an NVIDIA GPU' when every device was checked first)."""
    tt.save({"w": tt.ones(2)}, tmp_path / "ck.npz")
    back = tt.load(tmp_path / "ck.npz", map_location={"cuda:0": "cuda:1"})
    assert back["w"].device == "cpu" and back["w"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="unknown device"):
        tt.load(tmp_path / "ck.npz", map_location={"cuda:0": "gpu1"})


@pytest.mark.skipif(tt.cuda_is_available(), reason="what a machine without a GPU says")
def test_a_gpu_tensor_mapped_to_a_gpu_without_one_says_so_not_damaged(tmp_path):
    path = tmp_path / "gpu.npz"
    write_structure(path, wrap({"t": "dict", "items": [["w", {"t": "tensor", "k": "w",
                                                               "d": "cuda:0"}]]}), **W)
    seen = []
    assert tt.load(path, map_location=lambda s, loc: seen.append(loc))["w"].device == "cpu"
    assert seen == ["cuda:0"]
    for where in ({"cuda:0": "cuda"}, lambda s, loc: s.to("cuda")):
        with pytest.raises(RuntimeError, match="NVIDIA GPU") as info:
            tt.load(path, map_location=where)
        assert "not a readable" not in str(info.value)
