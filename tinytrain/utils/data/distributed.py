"""``torch.utils.data.distributed``: where PyTorch keeps ``DistributedSampler``."""

from tinytrain.data.sampler import DistributedSampler

__all__ = ["DistributedSampler"]
