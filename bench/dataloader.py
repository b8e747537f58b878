"""Benchmark: one shuffled epoch over MNIST's 60,000 training samples at batch 64.

tinytrain's DataLoader against ``torch.utils.data.DataLoader`` over a ``TensorDataset`` of the
same arrays, in one run. Three tinytrain variants:

* ``tinytrain MNIST``: the dataset as the training command uses it (uint8 images in memory,
  converted to float32 per batch by ``MNIST.get_batch``);
* ``tinytrain TensorDataset``: the very float32 ``[60000, 1, 28, 28]`` / int64 arrays torch gets;
* ``tinytrain slow path``: the same, through ``__getitem__`` + stack (no ``get_batch``), to show
  where the speed comes from.

Every loader yields ``(x float32 [64, 1, 28, 28], y int64 [64])`` batches and the time is the
best of ``--repeats`` epochs. Usage::

    python bench/dataloader.py --data-dir ../shared/data      # or TINYTRAIN_DATA=...
    python bench/dataloader.py --dataset mnist-mini           # offline smoke run (5,000 samples)
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.utils.data as tud

from tinytrain.data import DataLoader, Dataset, TensorDataset, load_dataset


class GetItemOnly(Dataset):
    """Hides ``get_batch``: the DataLoader falls back to ``__getitem__`` + stack."""

    def __init__(self, ds: Dataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int):
        return self.ds[i]


def time_epoch(make_loader: Callable[[], Iterable], repeats: int) -> tuple[float, int]:
    """Best wall time (s) of one full epoch, and the number of samples it yielded."""
    loader = make_loader()
    best, seen = float("inf"), 0
    for _ in range(repeats):
        seen = 0
        t0 = time.perf_counter()
        for x, _y in loader:
            seen += x.shape[0]
        best = min(best, time.perf_counter() - t0)
    return best, seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data-dir",
        default=os.environ.get("TINYTRAIN_DATA"),
        help="data root holding mnist/ (default: $TINYTRAIN_DATA or the cache)",
    )
    ap.add_argument("--dataset", default="mnist", choices=["mnist", "fashion-mnist", "mnist-mini"])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--download", action="store_true", help="download MNIST if missing")
    ap.add_argument("--skip-slow", action="store_true", help="skip the tinytrain slow path")
    args = ap.parse_args()

    ds = load_dataset(args.dataset, root=args.data_dir, train=True, download=args.download)
    n, B = len(ds), args.batch_size
    x, y = ds.get_batch(np.arange(n))  # float32 [n, 1, 28, 28], int64 [n]
    torch_ds = tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))

    candidates: dict[str, Callable[[], Iterable]] = {
        "torch.utils.data.DataLoader": lambda: tud.DataLoader(
            torch_ds, batch_size=B, shuffle=True, generator=torch.Generator().manual_seed(0)
        ),
        "tinytrain MNIST (uint8 -> float32 per batch)": lambda: DataLoader(
            ds, batch_size=B, shuffle=True, seed=0
        ),
        "tinytrain TensorDataset (same float32 arrays)": lambda: DataLoader(
            TensorDataset(x, y), batch_size=B, shuffle=True, seed=0
        ),
    }
    if not args.skip_slow:
        candidates["tinytrain slow path (__getitem__ + stack)"] = lambda: DataLoader(
            GetItemOnly(ds), batch_size=B, shuffle=True, seed=0
        )

    print(f"{args.dataset} train: {n} samples, batch {B}, shuffled, best of {args.repeats} epochs")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}")
    times = {}
    for name, make in candidates.items():
        seconds, seen = time_epoch(make, args.repeats)
        assert seen == n, f"{name}: an epoch yielded {seen} samples, not {n}"
        times[name] = seconds
    ref = times["torch.utils.data.DataLoader"]
    for name, seconds in times.items():
        print(f"  {name:48s} {seconds * 1e3:9.1f} ms   torch / this = {ref / seconds:6.1f}x")
    best = times["tinytrain MNIST (uint8 -> float32 per batch)"]
    verdict = "meets" if ref / best >= 5 else "MISSES"
    print(f"tinytrain MNIST loader is {ref / best:.1f}x faster than PyTorch's ({verdict} >= 5x)")


if __name__ == "__main__":
    main()
