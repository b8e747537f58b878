"""``torch.nn.parallel`` names: PyTorch's DDP scripts import
``from torch.nn.parallel import DistributedDataParallel`` and port by changing that line.

The class is :class:`tinytrain.distributed.DistributedDataParallel` (one process per CPU
core group or per GPU, started by MPI). PyTorch's single-process ``DataParallel`` runs here
on the CPU or one GPU only (:mod:`tinytrain.nn.data_parallel`).
"""

from tinytrain.distributed.ddp import DistributedDataParallel
from tinytrain.nn.data_parallel import DataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
