"""``autograd.grad`` and ``autograd.backward``: the engine run from one or more outputs.

``backward(tensors)`` adds the gradients into the leaves' ``.grad`` (``Tensor.backward`` is
this for one tensor); ``grad(outputs, inputs)`` *returns* the gradients with respect to
``inputs`` and touches no ``.grad``. Both are one pass of the engine
(:func:`~tinytrain.autograd.engine.run_backward`): ``grad`` and ``backward(inputs=...)`` give it
a *capture*, the nodes of the inputs (a leaf's AccumulateGrad, an intermediate's
``grad_fn``) and what to do with the gradient that reaches each; only the part of the graph
between the outputs and those nodes runs. ``create_graph=True`` makes the pass record the
graph of the gradients themselves, so that they can be differentiated again (higher-order
gradients; the engine's docstring says how); ``retain_graph`` then defaults to True, as in
PyTorch. ``is_grads_batched`` runs one pass per row of the batched ``grad_outputs``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tinytrain.autograd import engine, function
from tinytrain.autograd.function import Node
from tinytrain.backend import get_array_module

__all__ = ["backward", "grad"]

def _tensors(what: str, value: Any) -> tuple[Any, ...]:
    """A Tensor or a sequence of them as a tuple; a non-Tensor item is a TypeError."""
    Tensor = function.Tensor  # noqa: N806
    items = (value,) if isinstance(value, Tensor) else tuple(value)
    for item in items:
        if not isinstance(item, Tensor):
            raise TypeError(f"all {what} have to be Tensors, but got {type(item).__name__}")
    return items


def _inputs(fn: str, inputs: Any) -> tuple[Any, ...]:
    """PyTorch's ways to give ``inputs``: a Tensor, a sequence, or a dict's values."""
    if isinstance(inputs, Mapping) and type(inputs) is not dict:
        raise TypeError(f"`inputs` argument to `{fn}()` must be a dict, not "
                        f"{type(inputs).__name__}. Other Mapping types are not supported.")
    inputs = _tensors("inputs", inputs.values() if type(inputs) is dict else inputs)
    if not inputs:
        raise RuntimeError(f"`inputs` argument to `{fn}()` cannot be empty.")
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    return inputs


def _seeds(outputs: tuple[Any, ...], grads: Any, graph: bool = False) -> list[Any]:
    """The gradient of each output, as an array of its shape and dtype (PyTorch's
    ``_make_grads``): the given one, or ones for a one-element output. ``graph``: as Tensors
    (a create_graph pass; a given gradient keeps its own graph)."""
    Tensor = function.Tensor  # noqa: N806
    if grads is None:
        grads = (None,) * len(outputs)
    elif isinstance(grads, Tensor):
        grads = (grads,)
    elif not isinstance(grads, Sequence):
        raise TypeError(f"gradients can be either Tensors or None, but got "
                        f"{type(grads).__name__}")
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    seeds = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if not out.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               f"have a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            ones = get_array_module(out._data).ones_like(out._data)
            seeds.append(Tensor(ones) if graph else ones)
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
        if g.shape != out.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                               f"{list(g.shape)} and output[{i}] has a shape of "
                               f"{list(out.shape)}.")
        if g.device != out.device:
            raise RuntimeError(f"invalid gradient at index {i} - expected device "
                               f"{out.device} but got {g.device}")
        if graph:
            seeds.append(g if g.dtype == out.dtype else g.to(dtype=out.dtype))
        else:
            seeds.append(g._data if g.dtype == out.dtype else g._data.astype(out.dtype))
    return seeds


def _run(outputs: tuple[Any, ...], seeds: list[Any], retain_graph: bool,
         capture: Mapping[Node, Callable[[Any], None]] | None,
         create_graph: bool = False) -> None:
    """One engine pass from ``outputs`` (a :class:`~engine.GraphRoot` over several)."""
    if len(outputs) == 1 and capture is None:  # Tensor.backward's path
        engine.run_backward(outputs[0]._grad_node(), seeds[0], retain_graph,
                            create_graph=create_graph)
        return
    root = engine.GraphRoot([out._grad_node() for out in outputs], seeds)
    engine.run_backward(root, None, retain_graph, capture=capture, create_graph=create_graph)


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, grad_variables: Any = None,
             inputs: Any = None) -> None:
    """Add d(sum of ``tensors``)/d(leaf) into every leaf's ``.grad``, as PyTorch's.

    ``tensors``: a Tensor or a sequence; ``grad_tensors``: the gradient of each (None for
    a one-element tensor: ones), a Tensor or a sequence. ``retain_graph`` as in
    ``Tensor.backward``. ``inputs`` (a Tensor, a sequence or a dict of them): only these
    get ``.grad`` (an intermediate one too), and only the graph above them runs.
    ``grad_variables`` is the deprecated name of ``grad_tensors``. ``create_graph``: the
    ``.grad`` Tensors get graphs of their own (higher-order gradients; ``retain_graph``
    defaults to it).
    """
    if retain_graph is None:
        retain_graph = create_graph
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.",
                      FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments "
                               "both passed to `backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    capture = None
    if inputs is not None:
        if isinstance(inputs, Mapping) and type(inputs) is dict:
            inputs = list(inputs.values())
        capture = {}
        for t in _tensors("inputs", inputs):
            if not t.requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            if t.grad_fn is not None:  # an intermediate keeps its gradient from now on, as
                t.retain_grad()       # PyTorch's backward(inputs=) makes it (retains_grad)
            capture[t._grad_node()] = _accumulate_into(t, create_graph)
        if not capture:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    outputs = _tensors("outputs", tensors)
    _run(outputs, _seeds(outputs, grad_tensors, create_graph), bool(retain_graph), capture,
         create_graph)


def _accumulate_into(t: Any, create_graph: bool = False) -> Callable[[Any], None]:
    """What ``backward(inputs=...)`` does with ``t``'s gradient: a leaf's AccumulateGrad
    adds it into ``.grad`` (and runs the post-accumulate hooks); an intermediate adds it
    into its ``.grad`` (once: a ``retain_grad()`` on it has done so already)."""
    node = t._grad_node()
    if t.grad_fn is None:
        return node.apply_graph if create_graph else node.apply
    if create_graph:
        return lambda g: None if t.retains_grad else function.accumulate_graph(t, g)
    return lambda g: None if t.retains_grad else engine._retain(t, g)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None,
         retain_graph: bool | None = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False
         ) -> tuple[Any, ...] | dict[str, Any]:
    """The gradients of ``outputs`` with respect to ``inputs``, as PyTorch's
    ``torch.autograd.grad``: a tuple with one Tensor per input, of its shape and dtype
    (a dict with the same keys when ``inputs`` is a dict). No ``.grad`` is touched.

    ``outputs``, ``inputs``: a Tensor or a sequence of them (inputs may be intermediate
    tensors, not only leaves); ``grad_outputs``: each output's gradient, None only for
    one-element outputs (ones). ``retain_graph``: keep the graph's saved arrays for another
    pass (default: freed, as ``backward``). An input the outputs do not depend on is an
    error unless ``allow_unused`` (its gradient is then None) or ``materialize_grads``
    (zeros). ``only_inputs`` is deprecated and ignored, as in PyTorch. ``create_graph``: the
    gradients returned have graphs of their own, to be differentiated again (higher-order
    gradients; ``retain_graph`` defaults to it). ``is_grads_batched``: the first dim of each
    ``grad_outputs`` tensor is a batch, and each gradient comes back with it in front
    (PyTorch vmaps over it; tinytrain runs one pass per row, as ``tt.func.vmap`` would).
    """
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        return _batched(outputs, inputs, grad_outputs, bool(retain_graph), create_graph,
                        allow_unused, materialize_grads)
    outputs = _tensors("outputs", outputs)
    tensors = _inputs("grad", inputs)
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to "
                      "True). To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    seeds = _seeds(outputs, grad_outputs, create_graph)
    nodes = [t._grad_node() for t in tensors]
    found: dict[Node, Any] = {}
    _run(outputs, seeds, bool(retain_graph),
         {node: (lambda g, node=node: found.__setitem__(node, g)) for node in nodes},
         create_graph)
    results = []
    for i, (t, node) in enumerate(zip(tensors, nodes)):
        g = found.get(node)
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not "
                                   f"have been used in the graph. Set allow_unused=True if "
                                   f"this is the desired behavior.")
            results.append(None if not materialize_grads else
                           function.Tensor(get_array_module(t._data).zeros_like(t._data)))
            continue
        if create_graph:  # (a Tensor with its graph)
            results.append(g if g.dtype == t.dtype else g.to(dtype=t.dtype))
        else:
            results.append(function.Tensor(g if g.dtype == t.dtype else g.astype(t.dtype)))
    if type(inputs) is dict:
        return dict(zip(inputs.keys(), results))
    return tuple(results)


def _batched(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool,
             create_graph: bool, allow_unused: bool, materialize_grads: bool) -> Any:
    """``grad(..., is_grads_batched=True)``: one pass per row ``i`` of the grad_outputs (the
    graph kept until the last), each gradient the stack of its rows (None for an unused
    input; ``materialize_grads``: zeros of the input's shape, as PyTorch's)."""
    from tinytrain.functions import stack  # noqa: PLC0415 (functions imports autograd)

    Tensor = function.Tensor  # noqa: N806
    outs = _tensors("outputs", outputs)
    batches = ((grad_outputs,) if isinstance(grad_outputs, Tensor)
               else (None,) * len(outs) if grad_outputs is None else tuple(grad_outputs))
    if len(batches) != len(outs):
        raise RuntimeError(f"got {len(outs)} tensors and {len(batches)} gradients")
    for i, (out, g) in enumerate(zip(outs, batches)):
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            raise RuntimeError("grad(is_grads_batched=True): each grad_output must be a "
                               "Tensor whose first dimension is the batch")
        if g.ndim == 0 or g.shape[1:] != out.shape:
            raise RuntimeError(
                f"If `is_grads_batched=True`, we interpret the first dimension of each "
                f"grad_output as the batch dimension. The sizes of the remaining dimensions "
                f"are expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {tuple(g.shape[1:])} and "
                f"output[{i}] has a shape of {tuple(out.shape)}. If you only want some tensors "
                f"in `grad_output` to be considered batched, consider using vmap.")
    size = batches[0].shape[0]
    if any(g.shape[0] != size for g in batches) or size == 0:
        raise RuntimeError(f"grad(is_grads_batched=True): the grad_outputs' batch sizes "
                           f"{[g.shape[0] for g in batches]} must be one size, at least 1")
    rows = [grad(outs, inputs, [g[k] for g in batches],
                 retain_graph=retain_graph or k < size - 1, create_graph=create_graph,
                 allow_unused=allow_unused or materialize_grads)
            for k in range(size)]
    named = type(inputs) is dict
    keys = list(inputs.keys()) if named else None
    columns = [[r[k] for r in rows] for k in keys] if named else list(zip(*rows))
    tensors = list(inputs.values()) if named else list(_tensors("inputs", inputs))
    results = []
    for column, t in zip(columns, tensors):
        if column[0] is None:
            results.append(None if not materialize_grads else
                           Tensor(get_array_module(t._data).zeros_like(t._data)))
        else:
            results.append(stack(list(column)))
    return dict(zip(keys, results)) if named else tuple(results)
