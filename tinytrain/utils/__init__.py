"""``tinytrain.utils.data`` is :mod:`tinytrain.data`, where PyTorch keeps its DataLoader."""

from tinytrain.utils import data

__all__ = ["data"]
