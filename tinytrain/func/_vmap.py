"""``vmap``: ``torch.func.vmap``'s semantics by running the function once per sample and
stacking the results (the package's DESIGN section says what that does and does not give)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinytrain import random as _random
from tinytrain.func._grad import _name, _wraps
from tinytrain.func._levels import Level
from tinytrain.func._pytree import (
    TreeSpec,
    broadcast_to_and_flatten,
    tree_flatten,
    tree_leaves,
    tree_unflatten,
)
from tinytrain.tensor import Tensor

in_dims_t = int | tuple[Any, ...]
out_dims_t = int | tuple[Any, ...] | None


def check_randomness_arg(randomness: Any) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def vmap(func: Callable[..., Any], in_dims: in_dims_t = 0, out_dims: out_dims_t = 0,
         randomness: str = "error", *, chunk_size: int | None = None) -> Callable[..., Any]:
    """``torch.func.vmap``: a function that maps ``func`` over dimension ``in_dims`` of its
    inputs and returns the results stacked along ``out_dims``.

    ``in_dims``: an int (every input, each must then be a Tensor), or a tuple with one entry
    per positional argument, each an int, ``None`` (not mapped: every sample sees the whole
    argument) or, for a pytree argument (a dict of parameters, a tuple), a pytree of those
    matching it. Keyword arguments are not mapped. ``out_dims`` likewise for the outputs
    (``None``: an output that does not depend on the mapped inputs, returned as it is). All
    mapped inputs must have the same size ``B`` in their mapped dimension; an output of
    shape ``S`` per sample comes back with ``B`` inserted at its ``out_dim``.
    ``randomness``: ``'error'`` (a random operation inside raises), ``'different'`` (each
    sample draws its own numbers) or ``'same'`` (every sample sees the same draws).
    ``chunk_size`` is checked and changes nothing else (PyTorch's memory/speed trade-off).

    **How, and what that gives.** tinytrain has no batched tensors: ``func`` runs ``B`` times,
    on the ``B`` slices of the mapped inputs (views: in-place writes to them reach the
    inputs, as in PyTorch), and the results are stacked. The semantics are
    ``torch.func.vmap``'s (values, shapes, errors for mismatched sizes and bad dims, composition
    with ``grad``, ``vjp``, ``jacrev``... in both orders, the results' graphs); the speed is a
    Python loop's. What the loop cannot see, and PyTorch raises for (see the package's
    DESIGN section): ``.item()``, ``bool()`` or other data-dependent control flow on a
    per-sample value (here each sample simply takes its own branch), and shapes that depend
    on the data (here they must agree across samples, else RuntimeError). An output with
    ``out_dims=None`` is taken as not mapped when it is the same tensor, or equal values, in
    every sample. An in-place write to a tensor ``func`` captured (or got with
    ``in_dims=None``) raises RuntimeError: the loop would write it once per sample.
    """
    check_randomness_arg(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @_wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return _vmap_impl(func, in_dims, out_dims, randomness, args, kwargs)
    return wrapped


def _check_out_dims(out_dims: Any, func: Callable[..., Any]) -> None:
    if isinstance(out_dims, int):
        return
    for d in tree_leaves(out_dims):
        if not (d is None or isinstance(d, int)):
            raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be "
                             f"an int, None or a python collection of ints representing where "
                             f"in the outputs the vmapped dimension should appear.")


def _process_inputs(in_dims: Any, args: tuple[Any, ...], func: Callable[..., Any]
                    ) -> tuple[int, list[int | None], list[Any], TreeSpec]:
    """PyTorch's ``_process_batched_inputs``: the batch size, one in_dim per flat argument
    (non-negative), the flat arguments and their structure."""
    name = _name(func)
    if not isinstance(in_dims, int | tuple):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` "
                         f"to be int or a (potentially nested) tuple matching the structure of "
                         f"inputs, got: {type(in_dims)}.")
    if len(args) == 0:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add "
                         f"inputs, or you are trying to vmap over a function with no inputs. "
                         f"The latter is unsupported.")
    flat_args, args_spec = tree_flatten(args)
    flat_in_dims = broadcast_to_and_flatten(in_dims, args_spec)
    if flat_in_dims is None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                         f"compatible with the structure of `inputs`. in_dims has structure "
                         f"{tree_flatten(in_dims)[1]} but inputs has structure {args_spec}.")
    for i, (arg, in_dim) in enumerate(zip(flat_args, flat_in_dims)):
        if not isinstance(in_dim, int) and in_dim is not None:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got "
                             f"in_dim={in_dim} for an input but in_dim must be either an "
                             f"integer dimension or None.")
        if isinstance(in_dim, int) and not isinstance(arg, Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got "
                             f"in_dim={in_dim} for an input but the input is of type "
                             f"{type(arg)}. We cannot vmap over non-Tensor arguments, please "
                             f"use None as the respective in_dim")
        if in_dim is not None and not -arg.dim() <= in_dim < arg.dim():
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got "
                             f"in_dim={in_dim} for some input, but that input is a Tensor of "
                             f"dimensionality {arg.dim()} so expected in_dim to satisfy "
                             f"-{arg.dim()} <= in_dim < {arg.dim()}.")
        if in_dim is not None and in_dim < 0:
            flat_in_dims[i] = in_dim % arg.dim()
    sizes = [arg.shape[d] for d, arg in zip(flat_in_dims, flat_args) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0], flat_in_dims, flat_args, args_spec


def _flat_out_dims(out_dims: Any, output: Any, spec: TreeSpec, func: Callable[..., Any]
                   ) -> list[int | None]:
    """One out_dim per flat output (PyTorch's ``_unwrap_batched``), or its ValueError."""
    def incompatible() -> ValueError:
        return ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims "
                          f"is not compatible with the structure of `outputs`. out_dims has "
                          f"structure {tree_flatten(out_dims)[1]} but outputs has structure "
                          f"{spec}.")
    if isinstance(output, Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        raise incompatible()
    flat = broadcast_to_and_flatten(out_dims, spec)
    if flat is None:
        raise incompatible()
    return flat


def _same(a: Any, b: Any) -> bool:
    """Whether two per-sample outputs are the same value (for ``out_dims=None``)."""
    if a is b:
        return True
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        from tinytrain.backend import get_array_module  # noqa: PLC0415

        xp = get_array_module(a._data)
        return bool(xp.array_equal(a._data, b._data, equal_nan=a.dtype.kind == "f"))
    try:
        return bool(a == b)
    except Exception:
        return False


def _vmap_impl(func: Callable[..., Any], in_dims: Any, out_dims: Any, randomness: str,
               args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    _check_out_dims(out_dims, func)
    batch_size, flat_in_dims, flat_args, args_spec = _process_inputs(in_dims, args, func)
    batched = [a for a, d in zip(flat_args, flat_in_dims) if d is not None]
    state = _random.get_rng_state() if randomness == "same" else None
    outputs: list[list[Any]] = []
    spec = None
    with Level("vmap", batched, randomness=randomness):
        if batch_size == 0:
            return _empty_batch(func, flat_in_dims, flat_args, args_spec, out_dims, kwargs)
        for i in range(batch_size):
            if state is not None:
                _random.set_rng_state(state)
            sample = [a if d is None else a.select(d, i) for a, d in zip(flat_args, flat_in_dims)]
            output = func(*tree_unflatten(sample, args_spec), **kwargs)
            flat, out_spec = tree_flatten(output)
            if spec is None:
                spec = out_spec
                flat_out_dims = _flat_out_dims(out_dims, output, spec, func)
                _check_outputs(flat, flat_out_dims, func)
            elif out_spec != spec:
                raise RuntimeError(f"vmap({_name(func)}): the function returned outputs of "
                                   f"structure {out_spec} for sample {i} but {spec} for sample "
                                   f"0; tinytrain's vmap runs it once per sample, and the "
                                   f"structure may not depend on the data")
            outputs.append(flat)
    return tree_unflatten(_stack(outputs, flat_out_dims, func), spec)


def _check_outputs(flat: list[Any], flat_out_dims: list[int | None], func: Callable[..., Any]
                   ) -> None:
    name = _name(func)
    for out, d in zip(flat, flat_out_dims):
        if d is None:
            continue
        if not isinstance(out, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                             f"{type(out)}. Did you mean to set out_dims= to None for output?")
        n = out.dim()
        if not -(n + 1) <= d <= n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-(n + 1)}, "
                             f"{n}], but got {d})")


def _stack(outputs: list[list[Any]], flat_out_dims: list[int | None],
           func: Callable[..., Any]) -> list[Any]:
    from tinytrain.functions import stack  # noqa: PLC0415

    name = _name(func)
    result = []
    for k, d in enumerate(flat_out_dims):
        column = [flat[k] for flat in outputs]
        if d is None:
            if not all(_same(column[0], c) for c in column[1:]):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 f"when out_dim is None")
            result.append(column[0])
            continue
        first = column[0]
        for i, c in enumerate(column[1:], 1):
            if c.shape != first.shape or c.dtype != first.dtype:
                raise RuntimeError(f"vmap({name}): output {k} has shape {c.shape} and dtype "
                                   f"{c.dtype} for sample {i} but {first.shape} and "
                                   f"{first.dtype} for sample 0; tinytrain's vmap runs the "
                                   f"function once per sample, and shapes may not depend on "
                                   f"the data")
        result.append(stack(column, dim=d))
    return result


def _empty_batch(func: Callable[..., Any], flat_in_dims: list[int | None], flat_args: list[Any],
                 args_spec: TreeSpec, out_dims: Any, kwargs: dict[str, Any]) -> Any:
    """A batch of size 0: ``func`` runs once on zeros of a sample's shapes (with the random
    stream put back afterwards), for the shapes of the outputs, which come back with 0 at
    their ``out_dim``."""
    state = _random.get_rng_state()
    try:
        sample = [a if d is None else
                  a.detach().new_zeros(tuple(s for j, s in enumerate(a.shape) if j != d))
                  for a, d in zip(flat_args, flat_in_dims)]
        output = func(*tree_unflatten(sample, args_spec), **kwargs)
    finally:
        _random.set_rng_state(state)
    flat, spec = tree_flatten(output)
    flat_out_dims = _flat_out_dims(out_dims, output, spec, func)
    _check_outputs(flat, flat_out_dims, func)
    result = []
    for out, d in zip(flat, flat_out_dims):
        if d is None:
            result.append(out)
            continue
        shape = list(out.shape)
        shape.insert(d % (len(shape) + 1), 0)
        result.append(out.detach().new_zeros(tuple(shape)))
    return tree_unflatten(result, spec)
