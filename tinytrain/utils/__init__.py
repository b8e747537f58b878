"""``tinytrain.utils.data`` is :mod:`tinytrain.data`, where PyTorch keeps its DataLoader;
``tinytrain.utils.hooks`` has ``RemovableHandle`` and the machinery of module backward hooks."""

from tinytrain.utils import data, hooks

__all__ = ["data", "hooks"]
