"""Containers that register what they hold: ModuleList, ModuleDict, ParameterList, ParameterDict.

A plain Python list of layers on a module is invisible to ``parameters()``, ``to()`` and
``state_dict()``; these containers register each entry under its index or key, as
PyTorch's do, so ``self.blocks = nn.ModuleList([...])`` trains every block. They have no
``forward``: the owning module decides how to use what they hold.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tinytrain.nn.module import Module, Parameter, _addindent
from tinytrain.tensor import Tensor


def _index(i: int, n: int, what: str) -> int:
    i = operator.index(i)  # a str or float: PyTorch's TypeError ("... as an integer")
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range for a {what} of {n}")
    return i % n


class ModuleList(Module):
    """A list of modules, registered as ``"0"``, ``"1"``, ...: ``append``, ``extend``,
    ``insert``, indexing (a slice gives a ModuleList), ``len``, iteration, ``+=``."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __repr__(self) -> str:
        """As PyTorch's: a run of children that print the same is one line, ``(0-2): 3 x
        Linear(...)``."""
        runs: list[list[Any]] = []  # [first index, last index, repr]
        for i, m in enumerate(self):
            text = repr(m)
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        if not runs:
            return f"{type(self).__name__}()"
        lines = [_addindent(f"({a}): {text}" if a == b else f"({a}-{b}): {b - a + 1} x {text}", 2)
                 for a, b, text in runs]
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def _renumber(self, modules: list[Module]) -> None:
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __getitem__(self, i: int | slice) -> Any:
        values = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(values[i])
        return values[_index(i, len(values), "ModuleList")]

    def __setitem__(self, i: int, module: Module) -> None:
        self.add_module(str(_index(i, len(self), "ModuleList")), module)

    def __delitem__(self, i: int | slice) -> None:
        values = list(self._modules.values())
        del values[i if isinstance(i, slice) else _index(i, len(values), "ModuleList")]
        self._renumber(values)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if not isinstance(modules, Iterable):
            raise TypeError(f"ModuleList.extend should be called with an iterable of modules, "
                            f"but got {type(modules).__name__} (wrap one module in a list: "
                            f"ModuleList([module]))")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        if not isinstance(module, Module):  # before anything changes
            raise TypeError(f"ModuleList.insert: {type(module).__name__} is not a Module")
        values = list(self._modules.values())
        values.insert(index, module)
        self._renumber(values)

    def pop(self, key: int | slice) -> Module:
        """Remove and return the module at ``key`` (the rest are numbered again)."""
        value = self[key]
        del self[key]
        return value


class ModuleDict(Module):
    """A dict of modules, registered under their keys (in insertion order)."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
                 ) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add (or replace) the modules of a ModuleDict, a mapping or ``(key, module)`` pairs."""
        for key, m in _pairs("ModuleDict", modules):
            self.add_module(key, m)


def _pairs(what: str, values: Any) -> Iterable[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of a ModuleDict / ParameterDict, any mapping, or an iterable
    of pairs (PyTorch's ``update``), checked."""
    if isinstance(values, Mapping | ModuleDict | ParameterDict):
        return list(values.items())
    if not isinstance(values, Iterable):
        raise TypeError(f"{what}.update should be called with a mapping or an iterable of "
                        f"key/value pairs, but got {type(values).__name__}")
    pairs = [tuple(p) if isinstance(p, Iterable) else p for p in values]
    for j, p in enumerate(pairs):
        if not isinstance(p, tuple) or len(p) != 2:
            raise ValueError(f"{what}.update: element #{j} of the sequence should be a "
                             f"(key, value) pair, got {p!r:.60}")
    return pairs


def _as_parameter(value: Any) -> Parameter:
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"ParameterList/ParameterDict hold Parameters (or Tensors, which become "
                    f"Parameters), got {type(value).__name__}")


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ... (Tensors become Parameters)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    def __getitem__(self, i: int | slice) -> Any:
        values = list(self._parameters.values())
        if isinstance(i, slice):
            return ParameterList(values[i])
        return values[_index(i, len(values), "ParameterList")]

    def __setitem__(self, i: int, value: Any) -> None:
        self.register_parameter(str(_index(i, len(self), "ParameterList")), _as_parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p)}" for k, p in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters, registered under their keys (Tensors become Parameters)."""

    def __init__(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None
                 ) -> None:
        super().__init__()
        if values is not None:
            self.update(values)

    def update(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Add (or replace) the parameters of a ParameterDict, a mapping or ``(key, value)``
        pairs."""
        for key, v in _pairs("ParameterDict", values):
            self[key] = v

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p)}" for k, p in self.items())

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_parameter(value))

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def keys(self) -> Iterable[str]:
        return self._parameters.keys()

    def values(self) -> Iterable[Parameter]:
        return self._parameters.values()

    def items(self) -> Iterable[tuple[str, Parameter]]:
        return self._parameters.items()


def _describe(p: Tensor) -> str:
    """A ParameterList / ParameterDict entry as PyTorch prints it (``Parameter containing:
    [float32 of size 2x3]``, the device added when not the CPU)."""
    device = "" if p.device == "cpu" else f" ({p.device})"
    size = "x".join(str(n) for n in p.shape)
    return f"Parameter containing: [{p.dtype} of size {size}{device}]"
