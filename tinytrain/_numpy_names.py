"""NumPy's argument names where PyTorch takes them: ``axis=`` for ``dim=``, ``keepdims=`` for
``keepdim=`` (``y_hat.argmax(axis=1)``, ``X.sum(axis=0, keepdims=True)``,
``torch.cat(ts, axis=1)``, as d2l.ai writes them).

PyTorch's argument parser accepts these two aliases for its built-in ops that have a ``dim``
or ``keepdim`` argument, not for the functions written in Python (``norm``, ``split``,
``unique``, ``F.softmax``, ...); both names at once is a TypeError. :func:`accept` does the
same for the functions it is given, by one wrapper: a call without an alias pays one extra
Python call (about 0.1 us), the renaming only when an alias is used.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

ALIASES = {"axis": "dim", "keepdims": "keepdim"}


def numpy_names(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that also takes ``axis=`` / ``keepdims=`` for its ``dim`` / ``keepdim``."""
    params = inspect.signature(fn).parameters
    # alias -> (its parameter, the number of positional arguments that reach that parameter)
    renames = {alias: (name, list(params).index(name)
                       if params[name].kind is params[name].POSITIONAL_OR_KEYWORD else math.inf)
               for alias, name in ALIASES.items() if name in params}
    if not renames:
        raise TypeError(f"{fn.__qualname__} has no dim or keepdim argument to alias")

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):
            for alias, (name, position) in renames.items():
                if alias in kwargs:
                    if name in kwargs or len(args) > position:
                        raise TypeError(f"{fn.__name__}() got both {name!r} and {alias!r} "
                                        f"(NumPy's name for {name}); give one of them")
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)

    return call


def accept(owner: Any, names: str) -> None:
    """Wrap each function ``owner.<name>`` (a class or a module's namespace dict) in
    :func:`numpy_names`."""
    for name in names.split():
        if isinstance(owner, dict):
            owner[name] = numpy_names(owner[name])
        else:
            setattr(owner, name, numpy_names(getattr(owner, name)))
