"""``Module`` and ``Parameter``: the containers that layers and models are built from.

Assigning a :class:`Parameter` or a :class:`Module` to an attribute registers
it, in order, so that ``parameters()``, ``state_dict()`` and ``to()`` find it.
Buffers (``register_buffer``) are state that is not trained; as in PyTorch,
assigning a Tensor (or None) to a buffer's name replaces the buffer and keeps
it registered, and assigning a plain Tensor to a parameter's name is an error.
Calling a module (``model(x)``) runs its forward pre-hooks, ``forward``, then
its forward hooks, and sets up its backward hooks; calling ``model.forward(x)``
directly skips the hooks.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from tinytrain import _missing, backend
from tinytrain.autograd.ops import ShapeError
from tinytrain.dtypes import get_default_dtype
from tinytrain.tensor import RemovableHandle, Tensor
from tinytrain.utils.hooks import BackwardHook


class StateDictKeyError(RuntimeError, KeyError):
    """``load_state_dict`` with missing or unexpected keys (``strict``): PyTorch's
    RuntimeError, and the KeyError tinytrain always raised."""

    def __str__(self) -> str:  # KeyError's would quote the message
        return str(self.args[0]) if self.args else ""


class _IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: PyTorch's ``_IncompatibleKeys``, its name and its
    printout (``IncompatibleKeys`` is the same class)."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")


IncompatibleKeys = _IncompatibleKeys


class Parameter(Tensor):
    """A leaf tensor that a Module registers as trainable (``requires_grad=True``)."""

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        super().__init__(data._data if isinstance(data, Tensor) else data,
                         requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __getstate__(self) -> dict[str, Any]:
        """A copy (``copy.deepcopy(model)``, pickle) starts without ``.grad``, as PyTorch's
        Parameter: a model copied to be fine-tuned must not carry the original's gradient
        into its first step."""
        state = super().__getstate__()
        state["_grad"] = None
        return state


class UninitializedTensorMixin:
    """A lazy module's placeholder, before its first forward: no values and no shape, only a
    dtype and a device (``.to()`` changes them), as PyTorch's. Its ``data`` is an empty array
    of that dtype on that device; any use of its values raises, naming the layer.
    :meth:`materialize` gives it a shape and makes it the regular class, the same object (an
    optimizer made over the placeholders keeps working)."""

    cls_to_become: type[Tensor]
    owner = "a lazy module"  # the layer, for errors

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None,
                 *, owner: str | None = None) -> None:
        super().__init__(factory_tensor(owner or self.owner, (0,), device=device, dtype=dtype),
                         requires_grad=requires_grad)
        if owner:
            self.owner = owner

    @property
    def _data(self) -> Any:  # what every op reads
        raise ValueError(
            f"Attempted to use an uninitialized parameter or buffer of {self.owner}: a lazy "
            f"module learns its sizes from its first input; call the model once on a dummy "
            f"batch (net(X)) before using its parameters")

    @_data.setter
    def _data(self, value: Any) -> None:
        self.__dict__["_data"] = value

    data = property(lambda self: Tensor(self.__dict__["_data"]), Tensor.data.fset,
                    doc="A Tensor of the empty placeholder array (its dtype and device only).")
    dtype = property(lambda self: self.__dict__["_data"].dtype)
    device = property(lambda self: backend.device_of(self.__dict__["_data"]))

    @property
    def shape(self) -> tuple[int, ...]:
        raise RuntimeError(
            f"Can't access the shape of an uninitialized parameter or buffer of {self.owner}; "
            f"call the model once on a dummy batch (net(X)) to initialize it")

    def materialize(self, shape: tuple[int, ...]) -> None:
        """Become a regular tensor of ``shape`` (zeros; the layer then initialises it)."""
        placeholder = self.__dict__["_data"]
        self.__class__ = self.cls_to_become
        self.data = backend.get_array_module(placeholder).zeros(shape, placeholder.dtype)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A lazy layer's weight or bias before its first forward (see the mixin)."""

    cls_to_become = Parameter


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A lazy layer's buffer (BatchNorm's running statistics) before its first forward."""

    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None,
                 *, owner: str | None = None) -> None:
        super().__init__(requires_grad, device, dtype, owner=owner)


def _check_name(module: Module, name: Any, kind: str, registry: dict[str, Any]) -> None:
    """A parameter's, buffer's or submodule's name must be a key of ``state_dict()`` on its
    own: a non-empty string without '.', not already another kind of attribute."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__} {name!r}")
    if not name or "." in name:
        raise KeyError(f"{kind} name can't be empty or contain '.', got {name!r}")
    others = [r for r in (module._parameters, module._buffers, module._modules)
              if r is not registry]
    if any(name in r for r in others) or (name in module.__dict__ and name not in registry):
        raise KeyError(f"attribute {name!r} already exists")


def factory_tensor(owner: str, shape: tuple[int, ...], fill: float = 0.0, device: Any = None,
                   dtype: Any = None) -> Tensor:
    """A layer's new parameter or buffer: ``shape`` filled with ``fill``, ``dtype`` (the default
    float dtype, :func:`tinytrain.get_default_dtype`, by default) on ``device`` (the CPU by
    default): what its constructor's ``device=`` and ``dtype=`` ask for, as PyTorch's
    ``factory_kwargs``. ``owner`` (the layer's name) is in the error a negative size or a
    dtype that cannot be trained raises."""
    if any(n < 0 for n in shape):
        raise RuntimeError(f"{owner}: trying to create a tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    dtype = np.dtype(get_default_dtype() if dtype is None else dtype)
    if dtype.kind != "f":
        raise TypeError(f"{owner}: dtype must be a floating point dtype (parameters are "
                        f"trained), got {dtype}")
    return Tensor(backend.to_device(np.full(shape, fill, dtype=dtype), device))


def _is_dtype(value: Any) -> bool:
    try:
        np.dtype(value)
    except TypeError:
        return False
    return value is not None


#: A module's hook tables and their types: the hooks in calling order, then the ids of the
#: hooks registered with_kwargs / always_call.
_HOOK_TABLES = (("_forward_pre_hooks", OrderedDict), ("_forward_hooks", OrderedDict),
                ("_backward_hooks", OrderedDict), ("_backward_pre_hooks", OrderedDict),
                ("_forward_pre_hooks_with_kwargs", dict), ("_forward_hooks_with_kwargs", dict),
                ("_forward_hooks_always_called", dict))


class Module:
    """Base class of every layer and model."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        for name, table in _HOOK_TABLES:
            object.__setattr__(self, name, table())
        object.__setattr__(self, "training", True)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling: a module pickled by an earlier tinytrain lacks the hook tables added
        since (backward hooks, hook options); they start empty, as PyTorch's
        ``Module.__setstate__`` does for old checkpoints."""
        self.__dict__.update(state)
        for name, table in _HOOK_TABLES:
            self.__dict__.setdefault(name, table())

    # ------------------------------------------------------------ registration

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() was called: call "
                f"super().__init__() first in {type(self).__name__}.__init__"
            )
        if name in self._parameters and value is not None and not isinstance(value, Parameter):
            hint = "; wrap it: nn.Parameter(value)" if isinstance(value, Tensor) else ""
            raise TypeError(f"cannot assign {type(value).__name__!r} as parameter {name!r} "
                            f"(an nn.Parameter or None expected){hint}")
        if not isinstance(value, Parameter | Module):
            if name in self._buffers:  # a Tensor or None replaces the buffer, as in torch
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(f"cannot assign {type(value).__name__!r} as buffer "
                                    f"{name!r} (a Tensor or None expected)")
                self._buffers[name] = value
                return
            if name in self._modules and value is not None:
                raise TypeError(f"cannot assign {type(value).__name__!r} as child module "
                                f"{name!r} (an nn.Module or None expected)")
        target = (self._parameters if isinstance(value, Parameter)
                  else self._modules if isinstance(value, Module)
                  else self._parameters if name in self._parameters
                  else self._modules if name in self._modules else None)  # None keeps the slot
        for registry in (self._parameters, self._modules, self._buffers):
            if registry is not target:
                registry.pop(name, None)
        self._non_persistent_buffers.discard(name)
        if target is not None:
            self.__dict__.pop(name, None)  # a plain attribute of that name would shadow it
            target[name] = value  # replacing keeps the name's place in the order, as in torch
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        for registry in ("_parameters", "_modules", "_buffers"):
            d = self.__dict__.get(registry)
            if d is not None and name in d:
                return d[name]
        message = f"{type(self).__name__!r} object has no attribute {name!r}"
        if name in _missing.MODULE_HINTS:  # a method of PyTorch's Module that tinytrain lacks
            message += ": " + _missing.MODULE_HINTS[name]
        raise AttributeError(message)

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._modules, self._buffers):
            if name in registry:
                del registry[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        _check_name(self, name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__!r} as parameter {name!r} (an "
                            f"nn.Parameter or None expected); wrap it: nn.Parameter(value)")
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state (moved with ``to``) but not trained. Persistent buffers
        are in ``state_dict()``; ``persistent=False`` ones are not."""
        _check_name(self, name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__!r} as buffer {name!r} "
                            f"(a Tensor or None expected)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass (add_module "
                            f"{name!r})")
        _check_name(self, name, "module", self._modules)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` (``"features.0"``; ``""`` is self)."""
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r} "
                                     f"(looking up {target!r})")
            module = child
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``"fc.weight"``)."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._parameters or module._parameters[name] is None:
            raise AttributeError(f"{type(module).__name__} has no parameter {name!r} (looking "
                                 f"up {target!r})")
        return module._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target`` (``"bn.running_mean"``)."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._buffers or module._buffers[name] is None:
            raise AttributeError(f"{type(module).__name__} has no buffer {name!r} (looking up "
                                 f"{target!r})")
        return module._buffers[name]

    # ------------------------------------------------------------ calling

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks):
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        """``forward`` with the hooks, as PyTorch's ``Module._call_impl``: the forward
        pre-hooks (which may replace the arguments), the backward hooks' identity nodes around
        the arguments (:mod:`tinytrain.utils.hooks`), ``forward``, the forward hooks (which may
        replace the result), the identity nodes around the result. When something raises,
        the forward hooks registered with ``always_call=True`` that have not run yet run
        before the error goes on."""
        result, called = None, set()
        try:
            for hook_id, hook in list(self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    new = hook(self, args, kwargs)
                    if new is not None:
                        if not (isinstance(new, tuple) and len(new) == 2):
                            raise RuntimeError(f"forward pre-hook must return None or a tuple "
                                               f"of (new_args, new_kwargs), but got {new}.")
                        args, kwargs = new
                else:
                    new = hook(self, args)
                    if new is not None:
                        args = new if isinstance(new, tuple) else (new,)
            backward_hook = None
            if self._backward_hooks or self._backward_pre_hooks:
                backward_hook = BackwardHook(self, list(self._backward_hooks.values()),
                                             list(self._backward_pre_hooks.values()))
                args = backward_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called:
                    called.add(hook_id)
                new = self._run_forward_hook(hook_id, hook, args, kwargs, result)
                if new is not None:
                    result = new
            if backward_hook is not None:
                if not isinstance(result, Tensor | tuple):
                    warnings.warn(f"For backward hooks to be called, module output should be a "
                                  f"Tensor or a tuple of Tensors but received {type(result)}",
                                  stacklevel=3)
                result = backward_hook.setup_output_hook(result)
            return result
        except Exception:
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        new = self._run_forward_hook(hook_id, hook, args, kwargs, result)
                        if new is not None:
                            result = new
                    except Exception as e:
                        warnings.warn(f"module forward hook with ``always_call=True`` raised an "
                                      f"exception that was silenced as another error was "
                                      f"raised in forward: {e}", stacklevel=3)
            raise

    def _run_forward_hook(self, hook_id: int, hook: Callable[..., Any], args: tuple,
                          kwargs: dict[str, Any], result: Any) -> Any:
        if hook_id in self._forward_hooks_with_kwargs:
            return hook(self, args, kwargs, result)
        return hook(self, args, result)

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` runs before forward; returning a value replaces ``args`` (a
        non-tuple is made a 1-tuple). With ``with_kwargs``, ``hook(module, args, kwargs)``,
        which may return ``(new_args, new_kwargs)``. ``prepend``: run before the hooks
        registered so far. ``handle.remove()`` unregisters it."""
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                              with_kwargs: bool = False, always_call: bool = False
                              ) -> RemovableHandle:
        """``hook(module, args, output)`` runs after forward; a returned value replaces
        ``output``. With ``with_kwargs``, ``hook(module, args, kwargs, output)``;
        ``always_call``: it runs also when forward (or a hook before it) raises; ``prepend``:
        before the hooks registered so far."""
        handle = RemovableHandle(self._forward_hooks, extra_dict=[
            self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False
                                    ) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs each time the gradients with respect
        to this call's inputs have been computed; ``grad_input`` and ``grad_output`` are
        tuples over the positional inputs and the outputs (None for what is not a Tensor, or
        an output that got no gradient; zeros for an input Tensor that got none), and a
        returned tuple replaces ``grad_input``. Without an input that requires grad it runs
        at the outputs, with ``grad_input`` all None (and must return None). As PyTorch's,
        forward gets (and the caller receives) new tensors sharing the inputs' (outputs')
        memory (:mod:`tinytrain.utils.hooks`)."""
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False
                                        ) -> RemovableHandle:
        """``hook(module, grad_output)`` runs each time the gradients with respect to this
        call's outputs have been computed, before the backward hooks; a returned tuple
        replaces ``grad_output`` (for the module's own backward and the hooks)."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    # ------------------------------------------------------------ traversal

    def named_modules(self, memo: set[Module] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for this module and every submodule, depth first; a module
        registered under several names comes once (its first name), as in PyTorch, unless
        ``remove_duplicate=False``. ``memo``: modules to leave out (filled on the way)."""
        if remove_duplicate:
            memo = set() if memo is None else memo
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """The direct submodules, each once (a module under two names: its first)."""
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs in registration order, names starting with ``prefix``;
        a parameter shared by several modules comes once (its first name) unless
        ``remove_duplicate=False``; only this module's own with ``recurse=False``."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(name, buffer)`` pairs, as :meth:`named_parameters`."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """The parameters or buffers of the modules, by dotted name (each tensor once, unless
        ``remove_duplicate=False``), as PyTorch's ``_named_members``."""
        seen: set[int] = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for mod_name, m in modules:
            for name, t in getattr(m, registry).items():
                if t is not None and id(t) not in seen:
                    if remove_duplicate:
                        seen.add(id(t))
                    yield (f"{mod_name}.{name}" if mod_name else name), t

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn(m)`` on every submodule, children first, then on self (the idiom for a
        custom weight initialisation: ``model.apply(init_weights)``). Returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ state

    def state_dict(self, destination: dict[str, Tensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Tensor]:
        """Every parameter and persistent buffer by dotted name (after ``prefix``), detached
        (sharing memory; the Parameters themselves with ``keep_vars=True``), in PyTorch's
        order: module by module, each one's parameters, then its buffers. A parameter shared
        by two modules (tied weights) is there under both names, as in PyTorch
        (``named_parameters()`` gives it once). ``destination``: a dict to fill and return."""
        destination = OrderedDict() if destination is None else destination
        for name, t in self._named_state():
            lazy = isinstance(t, UninitializedTensorMixin)  # (no values to detach)
            destination[prefix + name] = t if keep_vars or lazy else t.detach()
        return destination

    def _named_state(self) -> Iterator[tuple[str, Tensor]]:
        """``state_dict()``'s names and the tensors themselves (not detached)."""
        for mod_name, m in self.named_modules(remove_duplicate=False):
            prefix = f"{mod_name}." if mod_name else ""
            for name, p in m._parameters.items():
                if p is not None:
                    yield prefix + name, p
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent_buffers:
                    yield prefix + name, b

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy values into this module's parameters and buffers, in place; with ``assign``,
        make the state dict's tensors the module's own instead (their dtype and device; a
        parameter keeps its ``requires_grad``), as PyTorch's ``assign=True``.

        Values may be Tensors or arrays on any device. With ``strict``, missing or
        unexpected names raise (a RuntimeError and a KeyError, listing both); a value whose
        shape differs raises a ShapeError (a RuntimeError and a ValueError) naming it. Every
        check runs before anything is copied: an error leaves the module as it was.
        Returns ``(missing_keys, unexpected_keys)``, as PyTorch does.
        """
        if not isinstance(state_dict, Mapping):
            hint = (f"; load the file first: model.load_state_dict(tt.load({state_dict!r}))"
                    if isinstance(state_dict, str | os.PathLike) else "")
            raise TypeError(f"load_state_dict: expected state_dict to be dict-like, got "
                            f"{type(state_dict).__name__}{hint}")
        own = dict(self._named_state())
        # keys a state dict may lack (older PyTorch BatchNorm checkpoints)
        optional = {f"{mod_name}.{n}" if mod_name else n for mod_name, m in
                    self.named_modules(remove_duplicate=False)
                    for n in getattr(m, "_optional_state", ())}
        # A tied weight is under several names; a state dict that has it under one of them
        # (tinytrain's before it listed every name, or a hand-made one) loads it there.
        present = {id(own[k]) for k in own if k in state_dict}
        missing = [k for k in own
                   if k not in state_dict and k not in optional and id(own[k]) not in present]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise StateDictKeyError(
                f"load_state_dict for {type(self).__name__}: missing keys {missing}, "
                f"unexpected keys {unexpected}"
            )
        values = {}
        for name, target in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            if isinstance(value, UninitializedTensorMixin):  # saved before a dry run
                if isinstance(target, UninitializedTensorMixin):
                    continue  # nothing to load: the lazy layer stays lazy, as in PyTorch
                raise RuntimeError(
                    f"load_state_dict for {type(self).__name__}: {name} is uninitialized in "
                    f"the state dict (saved from a lazy module before its first forward); "
                    f"call that model once on a dummy batch (net(X)) before state_dict()")
            value = value._data if isinstance(value, Tensor) else value
            if not isinstance(getattr(value, "dtype", None), np.dtype):  # lists, torch's...
                try:
                    value = np.asarray(value)
                except Exception:  # (ragged lists, say): refused just below
                    value = None
            if value is None or value.dtype.kind not in "biuf":
                raise TypeError(
                    f"load_state_dict for {type(self).__name__}: {name} is "
                    f"{type(state_dict[name]).__name__} {state_dict[name]!r:.60} in the state "
                    f"dict; a Tensor or an array of numbers is expected")
            if (not isinstance(target, UninitializedTensorMixin)  # (takes value's shape)
                    and tuple(value.shape) != target.shape):
                raise ShapeError(
                    f"load_state_dict for {type(self).__name__}: {name} has shape "
                    f"{tuple(value.shape)} in the state dict but {target.shape} in the model"
                )
            values[name] = value
        for name, value in values.items():
            if assign:
                self._assign_state(name, state_dict[name], own[name])
                continue
            if isinstance(own[name], UninitializedTensorMixin):
                own[name].materialize(tuple(value.shape))  # as PyTorch's lazy load hook
            own[name]._data[...] = backend.to_device(value, own[name].device)
            own[name]._version_counter[0] += 1  # in place: a graph that saved it must not run
        return IncompatibleKeys(missing, unexpected)

    def _assign_state(self, name: str, value: Any, old: Tensor) -> None:
        """``load_state_dict(assign=True)`` of one entry: ``value`` (a Tensor is taken as it
        is, an array wrapped) replaces the parameter or buffer ``name``."""
        owner_name, _, attr = name.rpartition(".")
        owner = self.get_submodule(owner_name) if owner_name else self
        new = value if isinstance(value, Tensor) else Tensor(np.asarray(value))
        if isinstance(old, Parameter):
            new = Parameter(new, requires_grad=old.requires_grad)
        setattr(owner, attr, new)

    # ------------------------------------------------------------ modes, devices, grads

    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        object.__setattr__(self, "training", mode)
        for m in self.children():  # through each child's own train(), which may override it
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def to(self, device: str | None = None, dtype: Any = None, non_blocking: bool = False
           ) -> Module:
        """Move every parameter and buffer to ``device`` and/or cast floating ones to ``dtype``,
        in place (the Parameter objects stay the same). ``to(dtype)`` alone works too, and
        ``to(tensor)`` takes the tensor's device and dtype."""
        if isinstance(device, Tensor):
            device, dtype = device.device, device.dtype
        if device is not None and not backend.is_device(device):
            if isinstance(device, str) and not _is_dtype(device):
                backend.normalize_device(device)  # raises: unknown device, naming it
            device, dtype = None, device
        device = backend.normalize_device(device) if device is not None else None
        if dtype is not None:
            if not _is_dtype(dtype) or np.dtype(dtype).kind != "f":
                raise TypeError(f"nn.Module.to only accepts floating point dtypes, got "
                                f"{dtype!r} (integer weights could not be trained)")
            dtype = np.dtype(dtype)
        for t in list(self.parameters()) + [b for _, b in self.named_buffers()]:
            for holder in (t, t._grad):  # (._grad: a non-leaf buffer's .grad would warn)
                if holder is None:
                    continue
                array = holder.__dict__["_data"]  # (a lazy placeholder's too: not ._data)
                if device is not None:
                    holder.data = array = backend.to_device(array, device)
                if dtype is not None and holder.dtype.kind == "f":
                    holder.data = array.astype(dtype, copy=False)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Module:
        return self.to("cuda" if device is None else device)  # (an index: this process's GPU)

    def float(self) -> Module:
        """Cast floating parameters and buffers to float32 (in place; returns self)."""
        return self.to(dtype=np.float32)

    def double(self) -> Module:
        return self.to(dtype=np.float64)

    def half(self) -> Module:
        return self.to(dtype=np.float16)

    def type(self, dst_type: Any) -> Module:
        """Cast floating parameters and buffers to ``dst_type`` (as :meth:`to`)."""
        return self.to(dtype=dst_type)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` of every parameter (freeze a model with False)."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset gradients: drop them (default) or fill them with zeros in place."""
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad._data[...] = 0

    # ------------------------------------------------------------ printing

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        """PyTorch's layout: ``Name(extra)`` on one line, or, with children or a multi-line
        ``extra_repr``, one line per extra line and per child, indented by two."""
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): " + _addindent(repr(m), 2) for name, m in self._modules.items()]
        if len(lines) == 1 and not children:
            return f"{type(self).__name__}({lines[0]})"
        body = lines + children
        return type(self).__name__ + "(" + ("\n  " + "\n  ".join(body) + "\n" if body else "") + ")"

    def __dir__(self) -> list[str]:
        """Attributes, parameters, submodules and buffers (what a notebook's tab completion
        offers), as PyTorch's ``Module.__dir__``: names that start with a digit left out."""
        keys = [*dir(type(self)), *self.__dict__, *self._parameters, *self._modules,
                *self._buffers]
        return sorted({k for k in keys if not k[0].isdigit()})


def _addindent(text: str, spaces: int) -> str:
    """Indent every line of ``text`` but the first by ``spaces`` (blank lines stay empty), as
    PyTorch's ``_addindent``: a child's repr nested in its parent's."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line if line.strip() else "" for line in rest])
