"""``torch.utils.data.dataloader``: where PyTorch defines its DataLoader, so that
``from torch.utils.data.dataloader import DataLoader`` (minGPT's trainer) ports by changing the
import. Everything here is :mod:`tinytrain.data`'s."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.data import DataLoader, default_collate, default_convert, get_worker_info

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

__getattr__ = _module_getattr(__name__, {}, f"{__name__} has {', '.join(__all__)}")
