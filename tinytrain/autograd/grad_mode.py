"""Switching graph recording on and off: ``no_grad`` and ``enable_grad``.

Both work as context managers and as decorators. Evaluation must run under
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


def set_grad_enabled(mode: bool) -> None:
    """Turn graph recording on or off for this thread."""
    _state.enabled = bool(mode)


class _GradMode:
    mode: bool

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        set_grad_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        set_grad_enabled(self._prev)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):
    """Do not record the graph: results have ``requires_grad=False`` and no ``grad_fn``."""

    mode = False


class enable_grad(_GradMode):
    """Record the graph again, e.g. inside a ``no_grad`` block."""

    mode = True
