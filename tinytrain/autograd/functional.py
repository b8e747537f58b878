"""``tt.autograd.functional``: Jacobians, Hessians and their products with vectors, as
PyTorch's ``torch.autograd.functional``, in reverse mode, from :func:`~tinytrain.autograd.grad`
with ``create_graph=True`` (higher-order gradients: the engine's docstring).

``func`` takes Tensors (one per input) and returns a Tensor or a tuple of Tensors; ``inputs``
is a Tensor or a tuple of them, and each result has the matching structure (a Tensor for a
Tensor, a tuple for a tuple). The inputs are used through copies that require grad, so
``func`` may get inputs that do not; with ``create_graph=False`` the results are detached,
with ``create_graph=True`` they keep their graph back to the inputs. An output that does not
depend on an input gives zeros there (``strict=True`` raises instead, as PyTorch).

* ``vjp(func, inputs, v)``: ``v^T J``; ``jvp(func, inputs, v)``: ``J v`` (PyTorch's
  "double-vjp" trick: the vjp's gradient with respect to its ``v``);
* ``jacobian(func, inputs)``: ``[*output, *input]`` per pair, one backward per output element;
* ``hessian(func, inputs)``: the Jacobian of the gradient of a one-element ``func``;
* ``vhp(func, inputs, v)`` / ``hvp(func, inputs, v)``: ``v^T H`` / ``H v`` of a one-element
  ``func`` without forming ``H`` (two backward passes).

``vectorize=True`` and ``strategy="forward-mode"`` (which PyTorch allows only with
``vectorize=True``) are accepted, with PyTorch's checks of the combinations, and give the same
Jacobian, computed as above: tinytrain's ``vmap`` (:mod:`tinytrain.func`) is a loop, so
vectorizing would change nothing but the cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinytrain.autograd import function
from tinytrain.autograd.grad_mode import enable_grad
from tinytrain.autograd.gradients import grad
from tinytrain.backend import get_array_module

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(value: Any, what: str, fn: str) -> tuple[bool, tuple[Any, ...]]:
    """``(was_tuple, value as a tuple)``; every item must be a Tensor (PyTorch's TypeError)."""
    is_tuple = isinstance(value, tuple | list)
    items = tuple(value) if is_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, function.Tensor):
            where = f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors"
            raise TypeError(f"{where} but the value at index {i} has type {type(item).__name__}"
                            if is_tuple else f"{where} but the given {what} has type "
                            f"{type(item).__name__}.")
    return is_tuple, items


def _untuple(value: tuple[Any, ...], was_tuple: bool) -> Any:
    return value if was_tuple else value[0]


def _prepare(inputs: tuple[Any, ...], create_graph: bool) -> tuple[Any, ...]:
    """The inputs ``func`` sees, each requiring grad: with ``create_graph`` an input that
    requires grad stays connected to its graph (a view of it), else a detached copy."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(True) for x in inputs)


def _zeros_like(x: Any) -> Any:
    return function.Tensor(get_array_module(x._data).zeros_like(x._data))


def _grads(outputs: tuple, inputs: tuple, grad_outputs: tuple | None, create_graph: bool
           ) -> tuple[Any, ...]:
    """``autograd.grad`` over the outputs that require grad (None per input if none does),
    unused inputs None; the graph is retained (the caller may differentiate again)."""
    keep = [i for i, out in enumerate(outputs) if out is not None and out.requires_grad]
    if not keep:
        return (None,) * len(inputs)
    return grad([outputs[i] for i in keep], inputs,
                None if grad_outputs is None else [grad_outputs[i] for i in keep],
                retain_graph=True, create_graph=create_graph, allow_unused=True)


def _check_requires_grad(items: tuple, kind: str, strict: bool) -> None:
    """``strict``: each item must exist and require grad (PyTorch's ``_check_requires_grad``:
    an output computed without the inputs, a gradient independent of them)."""
    if not strict:
        return
    for i, t in enumerate(items):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "jacobian":
            raise RuntimeError(f"While computing the hessian, found that the jacobian of the "
                               f"user-provided function with respect to input {i} is "
                               f"independent of the input. This is not allowed in strict mode. "
                               f"You should ensure that your function is twice differentiable "
                               f"and that the jacobian depends on the inputs (this would be "
                               f"violated by a linear function for example).")
        if kind == "grad_inputs":
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the "
                               f"inputs of the user-provided function. This is not allowed in "
                               f"strict mode.")
        raise RuntimeError(f"Output {i} of the user-provided function does not require "
                           f"gradients. The outputs must be computed in a differentiable manner "
                           f"from the input when running in strict mode.")


_INDEPENDENT = {  # what strict mode says of a missing gradient, per stage (PyTorch's words)
    "back": "The output of the user-provided function is independent of input {i}.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian.",
}


def _fill(grads: tuple, like: tuple, strict: bool, stage: str, create_graph: bool) -> tuple:
    """Each gradient (zeros where None), detached unless ``create_graph`` (PyTorch's
    ``_fill_in_zeros`` and ``_grad_postprocess``). ``strict`` raises for a missing gradient,
    and with ``create_graph`` for one that does not require grad (it would have no graph)."""
    out = []
    for i, (g, x) in enumerate(zip(grads, like)):
        if g is None:
            if strict:
                raise RuntimeError(f"{_INDEPENDENT[stage].format(i=i)} This is not allowed in "
                                   f"strict mode.")
            g = _zeros_like(x)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               f"create_graph=True.")
        out.append(g if create_graph else g.detach())
    return tuple(out)


def _vector(v: Any, like: tuple, fn: str, name: str = "v") -> tuple[Any, ...]:
    """``v`` as a tuple of Tensors of ``like``'s shapes; None only for one one-element item
    (ones), as PyTorch's ``_validate_v``."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(f"The vector {name} can only be None if the input to the "
                               f"user-provided function is a single Tensor with a single "
                               f"element.")
        return (function.Tensor(get_array_module(like[0]._data).ones_like(like[0]._data)),)
    _, vs = _as_tuple(v, name, fn)
    if len(vs) != len(like):
        raise RuntimeError(f"{name} is a tuple of invalid length: should be {len(like)} but "
                           f"got {len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if a.shape != b.shape:
            raise RuntimeError(f"Entry {i} in {name} has invalid size: should be {b.shape} but "
                               f"got {a.shape}.")
    return vs


def _call(func: Callable[..., Any], inputs: tuple, fn: str) -> tuple[bool, tuple[Any, ...]]:
    return _as_tuple(func(*inputs), "outputs of the user-provided function", fn)


def vjp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), v^T J)``: ``v`` has the outputs' shapes (None for one one-element
    output), the product the inputs'."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _call(func, xs, "vjp")
        _check_requires_grad(outs, "outputs", strict)
        vs = _vector(v, outs, "vjp")
        grads = _grads(outs, xs, vs, create_graph)
        result = _fill(grads, xs, strict, "back", create_graph)
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _untuple(outs, out_tuple), _untuple(result, in_tuple)


def jvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), J v)``: ``v`` has the inputs' shapes, the product the outputs'. In
    reverse mode by the double-vjp trick: ``J v`` is the gradient of ``u -> u^T J v`` with
    respect to a dummy ``u`` (the vjp differentiated once more)."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    vs = _vector(v, xs, "jvp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _call(func, xs, "jvp")
        _check_requires_grad(outs, "outputs", strict)
        dummies = tuple(_zeros_like(o).requires_grad_(True) for o in outs)
        back = _grads(outs, xs, dummies, create_graph=True)
        _check_requires_grad(back, "grad_inputs", strict)
        grads = _grads(back, dummies, vs, create_graph)
        result = _fill(grads, outs, strict, "back_trick", create_graph)
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _untuple(outs, out_tuple), _untuple(result, out_tuple)


def _check_strategy(strategy: str, vectorize: bool, create_graph: bool, strict: bool) -> None:
    """PyTorch's checks of ``jacobian``'s ``strategy`` and ``vectorize`` (its errors, its
    exception types); the computation itself is the same in every case (module docstring)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, '
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` '
                                      'and `strategy="forward-mode"` are not supported together '
                                      '(yet). Please either set `create_graph=False` or '
                                      '`strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and '
                               '`strategy="forward-mode"` are not supported together (yet). '
                               'Please either set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-"
                                      "reverse Hessian is only implemented for "
                                      "`vectorize=True`.")
    elif vectorize and strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                           "`vectorized=True` are not supported together. Please either set "
                           "`strict=False` or `vectorize=False`.")


def jacobian(func: Callable[..., Any], inputs: Any, create_graph: bool = False,
             strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a Tensor
    ``[*outputs[i].shape, *inputs[j].shape]``; a Tensor for one output and one input, a
    tuple over the inputs (or the outputs), a tuple of tuples ``[i][j]`` for both."""
    _check_strategy(strategy, vectorize, create_graph, strict)
    from tinytrain.functions import stack  # noqa: PLC0415 (functions imports autograd)

    in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _call(func, xs, "jacobian")
        _check_requires_grad(outs, "outputs", strict)
        jac = []
        for i, out in enumerate(outs):
            flat = out.reshape(-1)
            rows: list[list[Any]] = [[] for _ in xs]
            for k in range(flat.shape[0]):
                grads = _grads((flat[k],), xs, None, create_graph)
                for j, (g, x) in enumerate(zip(grads, xs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is "
                                               f"independent of input {j}. This is not allowed "
                                               f"in strict mode.")
                        g = _zeros_like(x)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(f"The jacobian of the user-provided function is "
                                           f"independent of input {i}. This is not allowed in "
                                           f"strict mode when create_graph=True.")
                    rows[j].append(g if create_graph else g.detach())
            jac.append(tuple(
                (stack(r) if r else _zeros_like(x).reshape(0, *x.shape)).reshape(
                    *out.shape, *x.shape) for r, x in zip(rows, xs)))
    return _untuple(tuple(_untuple(row, in_tuple) for row in jac), out_tuple)


def _scalar_output(func: Callable[..., Any], fn: str, strict: bool) -> Callable[..., Any]:
    """``func`` checked to return one one-element Tensor (squeezed to 0-d); ``strict``: one
    that requires grad."""
    def scalar(*inputs: Any) -> Any:
        out_tuple, outs = _call(func, inputs, fn)
        _check_requires_grad(outs, "outputs", strict)
        if out_tuple and len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(f"The function given to {fn} should return a single Tensor "
                               f"with a single element")
        return outs[0].reshape(())

    return scalar


def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False,
            strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of a one-element ``func`` at ``inputs``: ``[*inputs[i].shape,
    *inputs[j].shape]`` per pair (a Tensor for one input, a tuple of tuples for several):
    the Jacobian of its gradient, computed with ``create_graph=True``."""
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")
    scalar = _scalar_output(func, "hessian", strict)

    def gradient(*inp: Any) -> tuple[Any, ...]:  # (not strict: checked here, as PyTorch's)
        g = jacobian(scalar, inp, create_graph=True)
        g = g if isinstance(g, tuple) else (g,)
        _check_requires_grad(g, "jacobian", strict)
        return g

    res = jacobian(gradient, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _untuple(tuple(_untuple(row, in_tuple) for row in res), in_tuple)


def vhp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), v^T H)`` for a one-element ``func``: the gradient of ``grad(func) .
    v`` (a Hessian-vector product without the Hessian)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), H v)`` for a one-element ``func``, by PyTorch's double-backward
    trick: ``H v`` is the gradient of ``u -> (u^T H) v`` with respect to a dummy ``u`` (one
    backward pass more than :func:`vhp`). Equal to ``vhp`` where ``H`` is symmetric, not
    where the gradient is not a true gradient (a hook that changes it)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool,
                     strict: bool, fn: str) -> tuple[Any, Any]:
    in_tuple, xs = _as_tuple(inputs, "inputs", fn)
    vs = _vector(v, xs, fn)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = _scalar_output(func, fn, strict)(*xs)
        first = _grads((out,), xs, None, create_graph=True)
        _check_requires_grad(first, "jacobian", strict)
        if fn == "vhp":
            grads = _grads(first, xs, vs, create_graph)
        else:
            dummies = tuple(_zeros_like(x).requires_grad_(True) for x in xs)
            back = _grads(first, xs, dummies, create_graph=True)
            grads = _grads(back, dummies, vs, create_graph)
        stage = "double_back" if fn == "vhp" else "double_back_trick"
        result = _fill(grads, xs, strict, stage, create_graph)
    return out if create_graph else out.detach(), _untuple(result, in_tuple)
