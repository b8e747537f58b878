"""``python -m tinytrain.doctor``: reports data as ok only when it is valid, rejects bad arguments,
and fails (exit 1) only when something required is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tinytrain import doctor
from tinytrain.data.datasets import ASSETS_DIR

MINI = ASSETS_DIR / "mnist-mini"
SHARED = Path(os.environ.get("TINYTRAIN_DATA", "/nonexistent")) / "mnist"
FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def rows(root: Path) -> dict[str, tuple[str, str]]:
    return {name: (status, detail) for name, status, detail, _ in doctor.report(root)}


def test_unknown_arguments_are_rejected():
    r = subprocess.run([sys.executable, "-m", "tinytrain.doctor", "--frobnicate"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "unrecognized arguments: --frobnicate" in r.stderr and "Traceback" not in r.stderr


def test_the_bundled_mini_set_is_checked_and_ok(tmp_path):
    status, detail = rows(tmp_path)["mnist-mini"]
    assert status == doctor.OK and "5,000 + 1,000 images, checksums ok" in detail


@pytest.mark.parametrize("damage", ["missing", "corrupt", "truncated", "folder is a file"])
def test_data_is_ok_only_when_every_file_is_there_and_valid(tmp_path, damage):
    """A copy of the mini set's files laid out as a data root's mnist/: their checksums are
    not MNIST's, so the doctor must say so, as it must for a missing or cut file."""
    folder = tmp_path / "mnist"
    if damage == "folder is a file":
        folder.write_text("not a folder")
    else:
        folder.mkdir()
        for name in FILES[:3] if damage == "missing" else FILES:
            shutil.copy(MINI / name, folder / name)
        if damage == "truncated":
            data = (MINI / FILES[0]).read_bytes()
            (folder / FILES[0]).write_bytes(data[: len(data) // 2])
    status, detail = rows(tmp_path)["mnist"]
    assert status == doctor.MISSING
    expected = {"missing": FILES[0], "corrupt": "wrong checksum", "truncated": "wrong checksum",
                "folder is a file": "is a file, not a folder"}[damage]
    assert expected in detail


@pytest.mark.skipif(not (SHARED / FILES[0]).is_file(), reason="needs full MNIST in $TINYTRAIN_DATA")
def test_full_mnist_is_ok_and_a_missing_test_split_is_not(tmp_path):
    status, detail = rows(SHARED.parent)["mnist"]
    assert status == doctor.OK and "60,000 + 10,000 images" in detail
    (tmp_path / "mnist").mkdir()
    for name in FILES[:2]:  # the training split only
        os.symlink(SHARED / name, tmp_path / "mnist" / name)
    status, detail = rows(tmp_path)["mnist"]
    assert status == doctor.MISSING and FILES[2] in detail and "2 of its files found" in detail


def test_exit_status_is_1_only_when_something_required_is_missing(tmp_path, monkeypatch,
                                                                  capsys):
    assert doctor.main(["--data-dir", str(tmp_path)]) == 0  # no data: optional
    out = capsys.readouterr().out
    assert "[--] mnist" in out

    def broken() -> str:
        raise ImportError("numpy is not installed")

    checks = [(n, broken if n == "numpy" else fn, fix) for n, fn, fix in doctor.CHECKS]
    monkeypatch.setattr(doctor, "CHECKS", checks)
    assert doctor.main(["--data-dir", str(tmp_path)]) == 1


def test_main_called_from_python_ignores_the_host_programs_arguments(monkeypatch, capsys):
    """A notebook calls doctor.main(); sys.argv there is the kernel's (``-f kernel.json``)."""
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/tmp/kernel.json"])
    assert doctor.main() == 0
    assert "[ok] python" in capsys.readouterr().out


def test_a_data_root_that_is_a_file_gets_a_whole_reason_and_a_command_for_that_root(tmp_path):
    root = tmp_path / "afile.txt"
    root.write_text("hi")
    (row,) = [r for r in doctor.report(root) if r[0] == "mnist"]
    _, status, detail, fix = row
    assert status == doctor.MISSING and detail.endswith("choose another data root.")
    assert f"--data-dir {root}" in fix


def test_a_data_root_that_does_not_exist_is_named_and_the_fix_makes_it_first(tmp_path):
    root = tmp_path / "no" / "such"
    (row,) = [r for r in doctor.report(root) if r[0] == "mnist"]
    _, status, detail, fix = row
    assert status == doctor.MISSING and detail == f"the data root {root} does not exist"
    assert fix.startswith(f"mkdir -p {root}, then python -m tinytrain.train --dataset mnist "
                          f"--data-dir {root}")


def test_a_data_root_with_a_tilde_is_the_users_folder_as_for_train(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "my data").mkdir()
    (row,) = [r for r in doctor.report(Path("~/my data")) if r[0] == "mnist"]
    assert "does not exist" not in row[2] and str(tmp_path / "my data") in row[2]
    (row,) = [r for r in doctor.report(Path("~/no such")) if r[0] == "mnist"]
    assert row[3].startswith(f"mkdir -p '{tmp_path}/no such', then ")  # quoted for a shell


INSUFFICIENT = ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
                "runtime version")


@pytest.mark.parametrize("devices, libcuda, says_no_gpu", [
    ([], False, True),                     # no driver at all: CuPy's "insufficient" misleads
    (["/dev/nvidia0"], False, False),      # a GPU device but no loadable libcuda
    ([], True, False),                     # libcuda loads (e.g. a container without devices)
], ids=["no-driver", "device-only", "libcuda-only"])
def test_cupy_without_any_nvidia_driver_says_no_gpu_not_upgrade(monkeypatch, devices, libcuda,
                                                                says_no_gpu):
    """CuPy reports a missing driver as cudaErrorInsufficientDriver, which reads as "upgrade
    your driver": the doctor says there is no GPU when no driver is installed, and keeps
    CuPy's words when one is (then it is the real insufficient-driver case)."""
    def device_count() -> int:
        raise RuntimeError(INSUFFICIENT)

    def cdll(name: str) -> object:
        if libcuda:
            return object()
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    runtime = types.SimpleNamespace(getDeviceCount=device_count)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=runtime), __version__="13.6.0"))
    monkeypatch.setattr(doctor.glob, "glob", lambda pattern: devices)
    monkeypatch.setattr(doctor.ctypes, "CDLL", cdll)
    status, detail = doctor._probe(doctor._cupy)
    assert status == doctor.MISSING
    if says_no_gpu:
        assert detail == ("no NVIDIA GPU/driver found (a GPU is optional: chapters 4 and 7's "
                          "GPU parts are skipped)")
    else:
        assert detail == f"RuntimeError: {INSUFFICIENT}"
