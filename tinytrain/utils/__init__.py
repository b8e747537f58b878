"""``tinytrain.utils.data`` is :mod:`tinytrain.data`, where PyTorch keeps its DataLoader;
``tinytrain.utils.hooks`` has ``RemovableHandle`` and the machinery of module backward hooks;
``tinytrain.utils.checkpoint`` is PyTorch's activation checkpointing (without the memory
saving)."""

from tinytrain.utils import checkpoint, data, hooks

__all__ = ["checkpoint", "data", "hooks"]
