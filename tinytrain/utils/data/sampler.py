"""``torch.utils.data.sampler``: PyTorch's module of samplers, so that
``from torch.utils.data.sampler import SubsetRandomSampler`` ports by changing the import.
Everything here is :mod:`tinytrain.data`'s."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.data import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]

__getattr__ = _module_getattr(__name__, {}, f"{__name__} has {', '.join(__all__)}")
