"""The transforms of :mod:`tinytrain.func` that are running, for the few hot paths that must
ask them (a module of its own, importing nothing, so that ``tensor.py`` and ``random.py`` can
import it).

``levels`` holds one entry per active ``grad``/``vjp``/``jvp``/``jacrev``/``jacfwd`` or
``vmap`` call, the innermost last (a :class:`tinytrain.func._levels.Level`); it is empty
outside every transform, which is all that the hot paths test:

* ``Tensor.__init__`` tells the innermost level about every array born while it runs
  (``levels[-1].born(array)``), so that an in-place write can tell a tensor the transformed
  function made from one it captured;
* ``Tensor._write`` (every in-place write ends there) asks ``check_write(tensor, name)``;
* the random functions ask ``check_random(who)`` (vmap's ``randomness='error'``).
"""

from __future__ import annotations

from typing import Any

#: The active levels, innermost last (never rebound: the hot paths import the list itself).
levels: list[Any] = []


def check_write(tensor: Any, name: str) -> None:
    """Raise if ``tensor``'s memory may not be written by an in-place op inside the active
    transforms (see :meth:`tinytrain.func._levels.Level.check_write`)."""
    levels[-1].check_write(tensor, name)


def check_random(who: str) -> None:
    """Raise PyTorch's RuntimeError if a ``vmap`` with ``randomness='error'`` is active."""
    for level in levels:
        if getattr(level, "randomness", None) == "error":
            raise RuntimeError(
                "vmap: called random operation while in randomness error mode. Please either "
                "use the 'same' or 'different' randomness flags on vmap or perform the "
                f"randomness operation out of vmap (the random operation: {who})")
