"""Data: IDX files, MNIST-style data sets, and the DataLoader that batches them.

Chapter 5 (``notebooks/05_dataloader.ipynb``) builds these ideas step by step:

* :mod:`tinytrain.data.idx`: :func:`read_idx` / :func:`write_idx` for the IDX format;
* :mod:`tinytrain.data.datasets`: :class:`MNIST`, :class:`FashionMNIST`, the bundled
  :class:`MNISTMini` (offline), download with MD5 checks, :func:`default_data_root`;
* :mod:`tinytrain.data.dataloader`: :class:`Dataset`, :class:`TensorDataset`, :class:`Subset`,
  :class:`ConcatDataset`, :class:`IterableDataset`, :class:`ChainDataset`, :func:`collate`
  (shape-preserving stacking), PyTorch's :func:`default_collate` and :func:`default_convert`,
  and :class:`DataLoader`;
* :mod:`tinytrain.data.sampler`: sequential, random, subset, weighted, batch and distributed
  samplers.

Example::

    from tinytrain.data import DataLoader, MNISTMini
    loader = DataLoader(MNISTMini(train=True), batch_size=64, shuffle=True, seed=0)
    for x, y in loader:          # x: float32 [64, 1, 28, 28], y: int64 [64]
        ...
"""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.data.dataloader import (
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    collate,
    default_collate,
    default_convert,
    random_split,
)
from tinytrain.data.datasets import (
    DATASETS,
    ENV_VAR,
    MNIST,
    CorruptDataError,
    DataFileError,
    DownloadError,
    FashionMNIST,
    MissingDataError,
    MNISTMini,
    default_data_root,
    load_dataset,
)
from tinytrain.data.idx import parse_idx, read_idx, write_idx
from tinytrain.data.sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "DATASETS",
    "ENV_VAR",
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "DistributedSampler",
    "CorruptDataError",
    "DataFileError",
    "DownloadError",
    "FashionMNIST",
    "MNIST",
    "MNISTMini",
    "MissingDataError",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "collate",
    "default_collate",
    "default_convert",
    "default_data_root",
    "get_worker_info",
    "load_dataset",
    "parse_idx",
    "random_split",
    "read_idx",
    "write_idx",
]

_OFFER = ("tinytrain.data has Dataset, IterableDataset, TensorDataset, Subset, ConcatDataset, "
          "ChainDataset, random_split, DataLoader, collate, default_collate, default_convert, "
          "SequentialSampler, RandomSampler, "
          "SubsetRandomSampler, WeightedRandomSampler, BatchSampler, DistributedSampler, MNIST, "
          "FashionMNIST and MNISTMini")
__getattr__ = _module_getattr(__name__, {}, _OFFER)


def get_worker_info() -> None:
    """None, as PyTorch's in the main process: tinytrain's DataLoader makes every batch in the
    calling process (``num_workers`` is accepted), so code never runs in a worker. An
    ``IterableDataset`` that splits its stream with ``get_worker_info()`` reads all of it."""
    return None
