"""``tinytrain.utils.checkpoint``: PyTorch's activation checkpointing, by name and by
gradient, without its memory saving.

PyTorch's ``checkpoint(fn, *args)`` drops ``fn``'s intermediate activations after the
forward pass and recomputes them in backward, trading compute for memory. tinytrain runs
``fn`` once and keeps its graph, as without checkpointing: the outputs and gradients are the
same (with dropout inside too, which PyTorch replays with the same random state), only the
memory is not saved. PyTorch's reentrant variant (its default, ``use_reentrant=True``) gives
no gradient when no input tensor requires one (the outputs are then made outside the graph,
with PyTorch's warning), and takes no keyword arguments for ``fn``: both as there.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tinytrain.autograd import no_grad
from tinytrain.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def _reentrant(use_reentrant: bool | None, name: str, text: str) -> bool:
    """``use_reentrant``, PyTorch's default True with its warning when not given."""
    if use_reentrant is None:
        warnings.warn(f"torch.utils.checkpoint{name}: the use_reentrant parameter should be "
                      f"passed explicitly. {text} use_reentrant=False is recommended, but if "
                      f"you need to preserve the current default behavior, you can pass "
                      f"use_reentrant=True. Refer to docs for more details on the differences "
                      f"between the two variants.", UserWarning, stacklevel=3)
        return True
    return use_reentrant


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None,
               context_fn: Any = None, determinism_check: str = "default",
               debug: bool = False, early_stop: bool = True, preserve_rng_state: bool = True,
               **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, as ``torch.utils.checkpoint.checkpoint`` computes it
    (see the module docstring: the same values and gradients, no memory saved)."""
    reentrant = _reentrant(use_reentrant, "", "Starting in PyTorch 2.9, calling checkpoint "
                           "without use_reentrant will raise an exception.")
    if reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not None:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          UserWarning, stacklevel=2)
            with no_grad():
                return function(*args)
    return function(*args, **kwargs)


def checkpoint_sequential(functions: Any, segments: int, input: Any,  # noqa: A002
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Run ``functions`` (an ``nn.Sequential`` or a list of modules) in ``segments`` chunks,
    each but the last through :func:`checkpoint`, as PyTorch's ``checkpoint_sequential``."""
    reentrant = _reentrant(use_reentrant, ".checkpoint_sequential", "In version 2.9 we will "
                           "raise an exception if use_reentrant is not passed.")
    if not isinstance(functions, Sequence):
        functions = list(functions.children())
    size = len(functions) // segments

    def run(start: int, end: int) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=reentrant,  # noqa: A001
                           **kwargs)
    return run(end + 1, len(functions) - 1)(input)
