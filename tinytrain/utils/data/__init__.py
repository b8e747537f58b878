"""``torch.utils.data`` names, so ``torch.utils.data.DataLoader`` ports by changing imports.

Everything here is :mod:`tinytrain.data`'s.
"""

from tinytrain.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)
from tinytrain.data import __getattr__ as _data_getattr
from tinytrain.utils.data import (  # noqa: F401 (d.sampler etc. without an import, as PyTorch's)
    dataloader,
    dataset,
    distributed,
    sampler,
)


def __getattr__(name: str):
    try:
        return _data_getattr(name)
    except AttributeError as exc:
        raise AttributeError(str(exc).replace("tinytrain.data'", "tinytrain.utils.data'", 1)) \
            from None

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
    "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler",
    "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "default_collate",
    "default_convert", "get_worker_info", "random_split",
]
