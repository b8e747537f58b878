"""Modules as functions: ``functional_call`` (a module called with other parameters and
buffers) and ``stack_module_state`` (the states of several copies stacked, for ``vmap``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from tinytrain.nn.module import Module
from tinytrain.tensor import Tensor

_MISSING = object()


def functional_call(module: Module, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """``torch.func.functional_call``: ``module(*args, **kwargs)`` with its parameters and
    buffers replaced, for this call only, by the tensors of ``parameter_and_buffer_dicts``
    (a dict ``{dotted name: Tensor}``, or a tuple/list of dicts with distinct keys), which
    need not be Parameters (detached copies, a transform's inputs, per-model slices of
    :func:`stack_module_state`'s stacks). ``args`` that is not a tuple is one argument.

    Names the dicts leave out keep the module's own tensors (``strict=True``: missing or
    unexpected keys raise RuntimeError). ``tie_weights=True``: a tensor the module holds
    under several names (tied weights) takes the value given for any of them (two different
    values raise ValueError). An in-place write by the module to a replaced tensor (a
    running statistic) reaches the tensor given, and stays in the dict."""
    if isinstance(parameter_and_buffer_dicts, dict):
        parameters_and_buffers = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence) and not isinstance(
            parameter_and_buffer_dicts, str):
        dicts = parameter_and_buffer_dicts
        if not all(isinstance(d, dict) for d in dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        counts: dict[str, int] = {}
        for d in dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             f"functional call is ambiguous")
        parameters_and_buffers = {k: v for d in dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(parameter_and_buffer_dicts)}")
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)


def _functional_call(module: Module, parameters_and_buffers: dict[str, Any], args: Any,
                     kwargs: dict[str, Any] | None, *, tie_weights: bool, strict: bool) -> Any:
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    kwargs = {} if kwargs is None else kwargs
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _reparametrize(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **kwargs)


def _named_tensors(module: Module) -> dict[str, Tensor]:
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def _untie(module: Module, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with each tied name of the module filled in from the value given for any of
    its names (PyTorch's ``_untie_named_tensors_map``)."""
    by_tensor: dict[int, set[str]] = {}
    for name, t in _named_tensors(module).items():
        by_tensor.setdefault(id(t), set()).add(name)
    tied = {name: names for names in by_tensor.values() if len(names) > 1 for name in names}
    given_tied = {name for name in given if name in tied}
    for name in given_tied:
        names = tied[name]
        if len(names & given_tied) > 1 and len({id(given[n]) for n in names & given_tied}) != 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             f"which are tied. Consider using tie_weights=False")
    untied = dict(given)
    for name in given_tied:
        for other in tied[name]:
            untied[other] = given[name]
    return untied


def _owner(module: Module, name: str) -> tuple[Module, str]:
    """The submodule that holds ``name`` (dotted) and the last part of the name."""
    prefix, _, attr = name.rpartition(".")
    owner = module
    if prefix:
        for part in prefix.split("."):
            try:
                owner = getattr(owner, part)
            except AttributeError as error:
                raise AttributeError(f"{type(owner).__name__} has no attribute "
                                     f"`{part}`") from error
            if not isinstance(owner, Module):
                raise TypeError(f"submodule `{prefix}`: {owner} is not an instance of "
                                f"torch.nn.Module")
    return owner, attr


def _swap(module: Module, name: str, value: Any) -> Any:
    """Put ``value`` (``_MISSING``: remove) under ``name``; return what was there."""
    owner, attr = _owner(module, name)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    for registry in (owner._parameters, owner._buffers):
        if attr in registry:
            old = registry[attr]
            if value is _MISSING:
                del registry[attr]
            else:
                registry[attr] = value
            return old
    old = owner.__dict__.get(attr, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{attr}`: {old} is not an instance of torch.Tensor")
    if value is _MISSING:
        owner.__dict__.pop(attr, None)
    else:
        object.__setattr__(owner, attr, value)
    return old


@contextlib.contextmanager
def _reparametrize(module: Module, given: dict[str, Any], tie_weights: bool, strict: bool
                   ) -> Iterator[None]:
    tensors = _untie(module, given) if tie_weights else given
    if strict:
        valid = set(_named_tensors(module))
        missing, unexpected = sorted(valid - set(tensors)), sorted(set(tensors) - valid)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(errors))
    originals: dict[str, Any] = {}
    try:
        for name, value in tensors.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        current = {name: _swap(module, name, old) for name, old in originals.items()}
        # a module that replaced a tensor in its registry (not in place) during the call:
        # the new one goes back to the caller's dict, as PyTorch's
        given.update({k: current[k] for k in given if k in current})


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """``torch.func.stack_module_state``: ``(params, buffers)``, each parameter and buffer of
    ``M`` models of one class stacked by name (``[M, *shape]``), for :func:`vmap` over
    :func:`functional_call`. Stacked parameters are new leaves (detached from the models'),
    requiring grad when the models' do, so an optimizer can train them."""
    from tinytrain.functions import stack  # noqa: PLC0415

    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors: list[Tensor], name: str) -> Tensor:
        needs = [t.requires_grad for t in tensors]
        if any(needs) and not all(needs):
            raise RuntimeError(f"Expected {name} from each model to have the same "
                               f".requires_grad")
        result = stack(tensors)
        return result.detach().requires_grad_() if all(needs) else result

    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: stacked([p[k] for p in all_params], k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: stacked([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers
