"""``torch.utils.data.dataset``: PyTorch's module of datasets, so that
``from torch.utils.data.dataset import Dataset`` ports by changing the import. Everything here
is :mod:`tinytrain.data`'s."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.data import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "Subset",
           "TensorDataset", "random_split"]

__getattr__ = _module_getattr(__name__, {}, f"{__name__} has {', '.join(__all__)}")
