"""A test-only stand-in for ``matplotlib.pyplot`` in the tutorial copies next to this file.

Plotting is outside tinytrain's scope and the tests draw nothing; where a program imported
pyplot it imports this module, whose every function records its call in :data:`calls`
(array-like arguments as NumPy arrays, through ``np.asarray`` as matplotlib converts them),
so a test compares what the tinytrain run and the PyTorch run would have plotted. Calls
return a stand-in object on which any attribute is again a recording function (``fig, ax =
plt.subplots()``, ``ax.plot(...)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: ``(name, args, kwargs)`` of each call since the test emptied it.
calls: list[tuple[str, list[Any], dict[str, Any]]] = []


def _value(a: Any) -> Any:
    if isinstance(a, _Figure):
        return "<figure part>"
    if hasattr(a, "shape") or (isinstance(a, list) and a and not isinstance(a[0], str)):
        return np.asarray(a)
    return a


class _Recorder:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        calls.append((self.name, [_value(a) for a in args], kwargs))
        return _Figure()

    def __iter__(self):  # fig, ax = plt.subplots()
        return iter((_Figure(), _Figure()))

    def __getattr__(self, name: str) -> _Recorder:  # ax.xaxis.set_major_locator(...)
        if name.startswith("__"):
            raise AttributeError(name)
        return _Recorder(f"{self.name}.{name}")


class _Figure:
    def __getattr__(self, name: str) -> _Recorder:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Recorder(name)

    def __iter__(self):
        return iter((_Figure(), _Figure()))

    def __getitem__(self, i: int) -> _Figure:  # axarr[0].imshow(...)
        return _Figure()


def __getattr__(name: str) -> _Recorder:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Recorder(name)
