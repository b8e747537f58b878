"""Switching graph recording on and off: ``no_grad``, ``enable_grad``, ``set_grad_enabled``.

All work as context managers and as decorators (``@no_grad()``, with the parentheses);
``set_grad_enabled(mode)`` also works as a plain call, as in PyTorch, and
``inference_mode`` is ``no_grad`` under PyTorch's other name. Evaluation must run under
``no_grad``: otherwise every op records a node and keeps its inputs alive.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_state = threading.local()

F = TypeVar("F", bound=Callable[..., Any])


def is_grad_enabled() -> bool:
    """True when ops record the graph (the default)."""
    return getattr(_state, "enabled", True)


def _set_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


class _GradMode:
    mode: bool

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        try:
            _set_enabled(self.mode)
        except BaseException:  # a Ctrl-C just after the switch: the with-block never
            _set_enabled(self._prev)  # starts, so __exit__ would not restore the mode
            raise

    def __exit__(self, *exc: object) -> None:
        _set_enabled(self._prev)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):
    """Do not record the graph: results have ``requires_grad=False`` and no ``grad_fn``."""

    mode = False


class inference_mode(no_grad):
    """``torch.inference_mode``: in tinytrain the same as :class:`no_grad` (no graph is
    recorded); ``inference_mode(False)`` records as usual."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class enable_grad(_GradMode):
    """Record the graph again, e.g. inside a ``no_grad`` block."""

    mode = True


class set_grad_enabled(_GradMode):
    """Turn graph recording on or off for this thread, as ``torch.set_grad_enabled``.

    * ``set_grad_enabled(False)``: takes effect at once and stays;
    * ``with set_grad_enabled(False): ...``: takes effect at once, restored on exit;
    * ``@set_grad_enabled(False)``: the decorated function runs in that mode (decorating
      leaves the current mode as it was).
    """

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._prev = is_grad_enabled()
        _set_enabled(self.mode)

    def __enter__(self) -> None:
        pass  # __init__ has set the mode; __exit__ restores the one before it

    def __call__(self, fn: F) -> F:
        _set_enabled(self._prev)  # a decorator changes nothing until the function runs
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
