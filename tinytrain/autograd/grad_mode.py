"""Switching graph recording on and off: ``no_grad``, ``enable_grad``, ``set_grad_enabled``.

All work as context managers and as decorators (``@no_grad()``, or ``@no_grad`` without
the parentheses, as in PyTorch 2); a decorated generator function runs each of its steps
in the mode (as PyTorch's do). ``set_grad_enabled(mode)`` also works as a plain call, as in
PyTorch, and ``inference_mode`` is ``no_grad`` under PyTorch's other name. Evaluation must
run under ``no_grad``: otherwise every op records a node and keeps its inputs alive.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_state = threading.local()

F = TypeVar("F", bound=Callable[..., Any])


def is_grad_enabled() -> bool:
    """True when ops record the graph (the default)."""
    return getattr(_state, "enabled", True)


def _set_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


def _decorate(fn: F, context: Callable[[], Any]) -> F:
    """``fn`` run inside ``context()``; a generator function has each of its resumptions
    run inside it (the mode must hold while its body runs, which is at ``next()``, not at
    the call that only makes the generator)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            gen = fn(*args, **kwargs)
            try:
                with context():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with context():
                            gen.close()
                        raise
                    except BaseException:
                        with context():
                            response = gen.throw(*sys.exc_info()[1:2])
                    else:
                        with context():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return generator  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with context():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


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
        return _decorate(fn, self.__class__)


class _BareDecorator(_GradMode):
    """``@no_grad`` without parentheses decorates too (PyTorch 2 allows it)."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_BareDecorator):
    """Do not record the graph: results have ``requires_grad=False`` and no ``grad_fn``."""

    mode = False


class inference_mode(no_grad):
    """``torch.inference_mode``: in tinytrain the same as :class:`no_grad` (no graph is
    recorded); ``inference_mode(False)`` records as usual."""

    def __new__(cls, mode: bool | Callable[..., Any] = True) -> Any:
        if callable(mode):  # @inference_mode without parentheses
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        _check_mode("inference_mode", mode)
        self.mode = not mode

    def __call__(self, fn: F) -> F:
        mode = self.mode
        return _decorate(fn, lambda: set_grad_enabled(mode))


def _check_mode(name: str, mode: Any) -> None:
    if not isinstance(mode, bool):
        raise TypeError(f"{name}: mode must be True or False, got {mode!r}")


class enable_grad(_BareDecorator):
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
        _check_mode("set_grad_enabled", mode)
        self.mode = mode
        self._prev = is_grad_enabled()
        _set_enabled(self.mode)

    def __enter__(self) -> None:
        pass  # __init__ has set the mode; __exit__ restores the one before it

    def __call__(self, fn: F) -> F:
        _set_enabled(self._prev)  # a decorator changes nothing until the function runs
        mode = self.mode
        return _decorate(fn, lambda: set_grad_enabled(mode))
