"""``torch.nn.parallel`` names: PyTorch's DDP scripts import
``from torch.nn.parallel import DistributedDataParallel`` and port by changing that line.

The class is :class:`tinytrain.distributed.DistributedDataParallel` (one process per CPU
core group or per GPU, started by MPI). PyTorch's single-process ``DataParallel`` has no
counterpart here.
"""

from tinytrain.distributed.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
