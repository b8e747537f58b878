"""Data-set errors say what is wrong and carry it as fields, for callers that word their own."""

from __future__ import annotations

import shutil

import pytest

from tinytrain.data import MNIST, CorruptDataError, DownloadError, MissingDataError
from tinytrain.data.datasets import ASSETS_DIR

FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")


@pytest.mark.parametrize("where", ["mnist", "root"])
def test_a_plain_file_where_a_folder_should_be_is_named(tmp_path, where):
    root = tmp_path / "root"
    if where == "root":
        root.write_text("not a folder")
    else:
        root.mkdir()
        (root / "mnist").write_text("not a folder")
    bad = root if where == "root" else root / "mnist"
    for download in (False, True):
        with pytest.raises(NotADirectoryError, match=f"{bad} is a file, not a folder"):
            MNIST(root=root, download=download)


def test_missing_files_say_which_and_whether_any_are_there(tmp_path):
    with pytest.raises(MissingDataError) as info:
        MNIST(root=tmp_path, download=False)
    e = info.value
    assert isinstance(e, FileNotFoundError)
    assert (e.file, e.data_dir, e.found) == (FILES[0], tmp_path / "mnist", [])
    (tmp_path / "mnist").mkdir()
    shutil.copy(ASSETS_DIR / "mnist-mini" / FILES[1], tmp_path / "mnist" / FILES[1])
    with pytest.raises(MissingDataError) as info:
        MNIST(root=tmp_path, download=False)
    assert info.value.found == [tmp_path / "mnist" / FILES[1]]


def test_a_corrupt_file_is_named(tmp_path):
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / FILES[0]).write_bytes(b"junk")
    with pytest.raises(CorruptDataError) as info:
        MNIST(root=tmp_path, download=False)
    assert isinstance(info.value, ValueError)
    assert info.value.path == tmp_path / "mnist" / FILES[0] and info.value.file == FILES[0]


def test_a_failed_download_lists_each_mirror(tmp_path, monkeypatch):
    monkeypatch.setattr(MNIST, "mirrors", ((tmp_path / "nowhere").as_uri() + "/",))
    with pytest.raises(DownloadError) as info:
        MNIST(root=tmp_path, download=True)
    e = info.value
    assert e.file == FILES[0] and e.found == [] and len(e.errors) == 1
    assert e.errors[0][0].endswith(FILES[0])
    assert list(tmp_path.iterdir()) == []  # no empty mnist/ folder left behind


def test_arguments_in_pytorchs_positional_order_are_refused_not_misread():
    """DataLoader(ds, 100, False, sampler) (PyTorch's order: sampler 4th) would put the
    sampler in drop_last, and MNISTMini(root, train, transform) (torchvision's order) the
    transform in download; both are refused with the order to use instead."""
    import numpy as np

    from tinytrain.data import DataLoader, DistributedSampler, MNISTMini

    ds = MNISTMini()
    sampler = DistributedSampler(ds, np.int64(2), np.int64(1))  # NumPy ints, as PyTorch
    assert len(DataLoader(ds, 100, sampler=sampler)) == len(ds) // 200
    with pytest.raises(TypeError, match="drop_last must be True or False.*sampler="):
        DataLoader(ds, 100, False, sampler)
    with pytest.raises(TypeError, match="download must be True or False.*transform="):
        MNISTMini(None, False, lambda image: image)
    with pytest.raises(TypeError, match="download must be True or False"):
        MNIST(None, True, lambda image: image)


def test_a_mini_folder_of_ones_own_is_not_told_to_git_checkout(tmp_path):
    from tinytrain.data import MNISTMini

    with pytest.raises(MissingDataError) as info:
        MNISTMini(tmp_path)
    assert "git checkout" not in str(info.value) and str(tmp_path) in str(info.value)
