"""``nn.DataParallel``: PyTorch's single-process wrapper, for the cases tinytrain can run as
PyTorch does: on the CPU and on one GPU, where PyTorch too runs the module as it is.

Scripts wrap a model with it out of habit (``model = nn.DataParallel(model)``) and then save
``model.state_dict()``, whose keys get the ``module.`` prefix; both work here. Splitting a
batch over several GPUs in one process is not in tinytrain: its multi-GPU training is
:class:`tinytrain.distributed.DistributedDataParallel`, one process per GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinytrain import backend
from tinytrain.nn.module import Module
from tinytrain.tensor import Tensor


def _gpu_id(device: Any) -> int:
    """A device id as PyTorch takes it: an int, ``"cuda:N"`` or a cuda device with an index."""
    name, index = backend.split_device(device)
    if name != "cuda" or index is None:
        raise ValueError(f"DataParallel: expected a GPU id (an int or 'cuda:N'), got {device!r}")
    return index


def _to_device(obj: Any, device: str) -> Any:
    """``obj`` with every Tensor in it (through tuples, lists and dicts) moved to ``device``,
    as PyTorch's scatter does for one device."""
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, tuple | list):
        return type(obj)(_to_device(x, device) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


class DataParallel(Module):
    """Run ``module`` as it is, as PyTorch's ``DataParallel`` does without a GPU or on one.

    Args:
        module: the model. ``wrapper.module`` is it; ``wrapper.state_dict()`` has its
            entries with the ``module.`` prefix.
        device_ids: GPU ids. Without a GPU they are ignored (PyTorch's rule: the module
            runs on the CPU). With GPUs, ``None`` means all of them; one id moves the module
            there, and each call moves its tensor inputs there. More than one id is a
            NotImplementedError: use ``DistributedDataParallel``, one process per GPU.
        output_device: the GPU of the outputs, PyTorch's: with one GPU the outputs are
            where the module puts them.
        dim: the dimension PyTorch splits the batch along (kept; one device never splits).
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.dim = dim
        if not backend.cuda_is_available():  # (PyTorch: no accelerator, no device ids)
            self.device_ids: list[int] = []
            self.output_device = None
            return
        from tinytrain import cuda

        ids = list(range(cuda.device_count())) if device_ids is None else list(device_ids)
        self.device_ids = [_gpu_id(d) for d in ids]
        if len(self.device_ids) > 1:
            raise NotImplementedError(
                f"DataParallel over {len(self.device_ids)} GPUs (device_ids="
                f"{self.device_ids}) is not in tinytrain: it runs one GPU per process. Train "
                "on several GPUs with tinytrain.distributed.DistributedDataParallel (one "
                "process per GPU, as PyTorch recommends over DataParallel), or pass "
                "device_ids=[0] to run on one GPU")
        if not self.device_ids:
            raise RuntimeError("DataParallel: no available devices were found")
        self.output_device = _gpu_id(output_device if output_device is not None
                                     else self.device_ids[0])
        self.src_device = f"cuda:{self.device_ids[0]}"
        self.module.to(self.src_device)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """``module(*inputs, **kwargs)``; on a GPU, with the tensor inputs moved to it."""
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for t in (*self.module.parameters(), *self.module.buffers()):
            if t.device != "cuda":
                raise RuntimeError(f"module must have its parameters and buffers on device "
                                   f"{self.src_device} (device_ids[0]) but found one of them "
                                   f"on device: {t.device}")
        return self.module(*_to_device(inputs, self.src_device),
                           **_to_device(kwargs, self.src_device))
