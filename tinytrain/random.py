"""The package's random number generator.

One NumPy ``Generator`` serves every random draw of tinytrain (``randn``,
parameter initialisation, dropout, shuffling without an explicit seed). Draws
happen on the CPU and are then moved to the tensor's device, so a seed gives
the same numbers on ``"cpu"`` and ``"cuda"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the package generator (like ``torch.manual_seed``) and return it. Any integer in
    PyTorch's range, ``[-2**63, 2**64)``, works (a negative one is taken modulo 2**64, as
    PyTorch does), also a one-element tensor."""
    global _generator
    _generator = np.random.default_rng(seed_value(seed))
    return _generator


def seed_value(seed: Any) -> int:
    """``seed`` as the generator's seed in ``[0, 2**64)``, or a TypeError/ValueError that says
    what was wrong with it (see :func:`manual_seed`)."""
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise TypeError(f"manual_seed: the seed must be an integer, got {seed!r}") from None
    if not -(1 << 63) <= value < 1 << 64:  # (taken modulo 2**64 it would alias another seed)
        raise ValueError(f"manual_seed: seed {value} is out of range: it must be in "
                         f"[-2**63, 2**64)")
    return value % (1 << 64)


def default_generator() -> np.random.Generator:
    """The generator that tinytrain's random functions draw from."""
    return _generator


def get_rng_state() -> dict[str, Any]:
    """The generator's state, a plain dict (checkpoints save it)."""
    return _generator.bit_generator.state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a state returned by :func:`get_rng_state`."""
    _generator.bit_generator.state = state
