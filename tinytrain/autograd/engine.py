"""The backward engine: run the graph's nodes in topological order.

1. Walk the graph from the root and count, for every node, how many edges
   point into it (its *dependencies*).
2. Start with the root's gradient. A node runs once all of its dependencies
   have delivered their gradient (summed in a buffer), so a node used twice
   (a diamond) runs once, with the sum. This is Kahn's algorithm.
3. Unless ``retain_graph`` is set, each node frees the arrays it saved once it ran,
   so a second backward through a node that needs them raises a clear error (one that
   kept only shapes and numbers, a sum or a view, runs again, as in PyTorch).
   The engine also tracks which buffered gradients nothing else references (its own sums,
   the outputs of Functions with ``new_grads``, its own seed): a leaf's AccumulateGrad
   keeps those as ``.grad`` instead of copying them.
4. Callbacks queued during the pass with :func:`queue_callback` run once the
   whole graph is done (DistributedDataParallel waits for its all-reduces there).

Gradients of slices (DESIGN)
----------------------------
The gradient of ``x[t]`` is zeros of ``x``'s shape with the piece's gradient at ``t``. Made
whole for every piece, an ``unbind`` into ``T`` pieces (an RNN's time steps, ``split``,
``chunk``) costs ``T`` zero-filled gradients of ``x`` and ``T`` whole-size sums: O(T^2)
for an RNN, 50x PyTorch's time on 200 steps. So ``Index``'s backward for a basic index
returns a ``SliceGrad`` (index and values, not made), and the engine adds it into the sum
it keeps for ``x`` on the slice alone, in place when that sum is its own (``owned``; a
copy otherwise: never into a gradient a caller or a hook may hold). A node receives its
sum made whole, so no backward ever sees a ``SliceGrad``. The values are those of the
whole-array sums (each element's additions in the same order). Only the first-order pass
does this; a ``create_graph`` pass differentiates ``IndexGrad`` as before.

Partial passes (``autograd.grad``, ``backward(inputs=...)``) are the same walk with a
*capture*: a table of nodes (the inputs' ``grad_fn`` or AccumulateGrad) to what to do with
the whole gradient that reaches each. Only the nodes on a path from the root to a captured
one count and run; a captured node hands its gradient over and runs itself only when another
captured node lies below it. Nothing else runs: no other leaf's ``.grad`` is touched, and the
nodes left out keep what they saved. Several outputs are one pass from a :class:`GraphRoot`.
As in PyTorch's engine, a captured node whose tensor has hooks hands over the gradient the
hooks return when it ends there, and the gradient before them when it runs on.

The pass runs under ``no_grad``, as PyTorch's (without ``create_graph``): a hook or a
callback that updates a parameter in place (an optimizer step in a post-accumulate hook)
records nothing, and a ``Function``'s backward written with Tensor ops builds no graph.

Higher-order gradients: ``create_graph=True`` (DESIGN)
------------------------------------------------------
``backward(create_graph=True)`` and ``autograd.grad(..., create_graph=True)`` run a second
mode of the same walk (:func:`_propagate_graph`), as PyTorch's: the gradients are Tensors,
the pass runs with grad mode *on*, buffers are summed with Tensor ops, so every gradient
records the graph of how it was computed and can be differentiated again (WGAN-GP's
gradient penalty, Hessian-vector products, MAML, the n-th derivative of ``tanh``).

* Each node runs ``apply_graph`` instead of ``apply``. A built-in op's
  ``backward_graph(ctx, grad, saved)`` is its backward written with differentiable
  tinytrain ops (a conv2d's dX is a ``conv_transpose2d``, its dW a ``Conv2dWeightGrad``
  whose own backward is again convolutions, so any order works). ``saved`` are the arrays
  ``setup_context`` saved, given back as Tensors *connected to the graph*
  (``Node.saved_graph``): ``Function.apply`` already matched each saved array to an input
  or the output by identity (``_saved_versions``, for the in-place version check); the same
  record says which, so an input's array comes back as that input (a leaf itself, or a
  Tensor whose ``grad_fn`` is the input's node) and the output's as a Tensor whose
  ``grad_fn`` is the node itself. The version check runs as before: a saved tensor modified
  in place still raises.
* An op *linear* in its differentiable inputs (``Tensor.unfold``, ``diagonal``,
  ``interpolate``, pooling's gathers, ``avg_pool2d``) needs no formula of its own: its
  backward becomes an ``ops.Adjoint`` op (``ops.adjoint``), whose forward is the op's
  backward and whose gradient is the op itself, so any order works (the pattern of conv2d
  and ``conv_transpose2d``, for all of them). Gathers and scatters are each other's
  gradients (``Index`` / ``IndexGrad``, ``Gather``): where an index repeats, the double
  backward adds up, as the first backward reads.
* Where PyTorch's backward of an op reads an input that its formula does not need
  (hardtanh, threshold and the shrinks, padding by reflection or replication, average,
  max and adaptive pooling, convolutions), PyTorch's gradient belongs to that input's graph
  with a zero derivative: it requires grad, and a later backward gives the input zeros (or,
  for convolutions, nothing). tinytrain's does too: ``saved.input(i, ...)`` gives the input
  as a Tensor of the graph without its values (``SavedGraph.input``; a leaf is itself) and
  ``ops.anchored`` / the ``anchor`` of ``GradMask`` and ``IndexGrad`` tie the gradient to it.
* An op without ``backward_graph`` raises a NotImplementedError that names it and lists the
  ops that have one, never a gradient whose graph is missing (SyncBatchNorm across ranks,
  whose statistics come from an all-reduce, is the only built-in one). A subclass that
  redefines ``backward`` does not inherit its parent's ``backward_graph``.
* PyTorch-style (ctx) user Functions run their backward on Tensors with grad mode on, so
  their Tensor ops record the graph (``once_differentiable`` makes a later backward
  through them raise, as PyTorch's); an output they saved comes back with their node as its
  ``grad_fn`` (PyTorch's SavedVariable of an output), so that is differentiated through too.
* A leaf's AccumulateGrad sets ``.grad`` to a copy of the first gradient, then to ``.grad +
  grad`` (out of place): ``x.grad.requires_grad`` is True when the gradient depends on
  something that requires grad, as in PyTorch; ``retain_grad`` does the same; hooks see
  and return Tensors with graphs; ``autograd.grad`` returns them.
* ``retain_graph`` defaults to ``create_graph`` (PyTorch's rule): the saved outputs above
  point back into the first-order graph, which a double backward runs through again.

The first-order path is untouched: ``Function.apply`` records the same things as before
(the saved arrays' source is one more item of the version entry it already made), and
:func:`_propagate` is not shared with the graph mode, so it has no per-node test of the
mode (its loop is benchmarked); the two loops differ only in the node call and in the
first-order one's ownership bookkeeping (``owned``), which Tensors do not need.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tinytrain.autograd import function
from tinytrain.autograd.function import (
    AccumulateGrad,
    Node,
    NodeName,
    SliceGrad,
    accumulate_graph,
    add_gradients,
)
from tinytrain.autograd.grad_mode import enable_grad, no_grad

_local = threading.local()


def _callbacks() -> list[list[Callable[[], None]]]:
    """This thread's callback lists, one per backward pass running in it (a hook may call
    backward again); two threads' backward passes never see each other's."""
    stack = getattr(_local, "callbacks", None)
    if stack is None:
        stack = _local.callbacks = []
    return stack


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` when the backward pass that is running now has finished.

    Only valid during backward (e.g. from a post-accumulate-grad hook); callbacks run in the
    order they were queued, after every node, and may queue more. As PyTorch's
    ``Variable._execution_engine.queue_callback``.
    """
    stack = _callbacks()
    if not stack:
        raise RuntimeError("queue_callback() can only be called while a backward pass runs")
    stack[-1].append(callback)


class GraphRoot(Node):
    """The start of a pass from several outputs (PyTorch's ``GraphRoot``): its "backward"
    hands each output's node that output's gradient."""

    def __init__(self, roots: Sequence[Node], grads: Sequence[Any]) -> None:
        self.next_functions = tuple(roots)
        self.grads = tuple(grads)

    @property
    def name(self) -> NodeName:
        return NodeName("GraphRoot")

    def apply(self, grad: Any) -> tuple[Any, ...]:
        return self.grads

    apply_graph = apply  # (the seeds are Tensors in a create_graph pass)

    def release(self) -> None:
        pass


def _count_dependencies(root: Node, capture: Mapping[Node, Any] | None = None
                        ) -> dict[Node, int]:
    """For every node below ``root``, how many edges point into it; with ``capture``, only
    the nodes on a path to a captured node, and only the edges between them."""
    deps: dict[Node, int] = {root: 0}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.next_functions:
            if child is None:
                continue
            if child not in deps:
                deps[child] = 0
                stack.append(child)
            deps[child] += 1
    if capture is None:
        return deps
    parents: dict[Node, list[Node]] = {}
    for node in deps:
        for child in node.next_functions:
            if child is not None:
                parents.setdefault(child, []).append(node)
    needed = {node for node in capture if node in deps}
    stack = list(needed)
    while stack:  # everything above a captured node
        for parent in parents.get(stack.pop(), ()):
            if parent not in needed:
                needed.add(parent)
                stack.append(parent)
    needed.add(root)
    return {node: sum(1 for p in parents.get(node, ()) if p in needed)
            for node in needed}


def run_backward(root: Node, grad: Any, retain_graph: bool = False,
                 owned: bool = False,
                 capture: Mapping[Node, Callable[[Any], None]] | None = None,
                 create_graph: bool = False) -> None:
    """Propagate ``grad`` (the gradient of the root's output) to every leaf, then run the
    callbacks queued meanwhile. ``owned``: the caller made ``grad`` and keeps no reference.
    ``capture``: only the nodes on a path to these run; each gets ``capture[node](gradient)``
    with its whole gradient, and runs itself only if another captured node is below it.
    ``create_graph``: ``grad`` is a Tensor and so is every gradient of the pass, with its
    graph (the module docstring's second mode)."""
    stack = _callbacks()
    stack.append([])
    try:
        # inf and NaN gradients, silently, as PyTorch (tinytrain/__init__)
        with (enable_grad() if create_graph else no_grad()), np.errstate(all="ignore"):
            if create_graph:
                _propagate_graph(root, grad, retain_graph, capture)
            else:
                _propagate(root, grad, retain_graph, owned, capture)
            queued = stack[-1]
            while queued:
                queued.pop(0)()
    finally:
        stack.pop()


def _propagate(root: Node, grad: Any, retain_graph: bool, owned: bool,
               capture: Mapping[Node, Callable[[Any], None]] | None = None) -> None:
    deps = _count_dependencies(root, capture)  # (the nodes that run: the keys)
    buffers: dict[Node, Any] = {root: grad}
    mine = {root} if owned else set()  # nodes whose buffered gradient nothing else holds
    ready = [root]
    while ready:
        node = ready.pop()
        grad_out = buffers.pop(node)
        if type(grad_out) is SliceGrad:  # one slice's gradient alone: made whole now
            grad_out = grad_out.dense()
            mine.add(node)
        ends = False
        if capture is not None and node in capture:  # (PyTorch's order: a node that runs on
            ends = _ends_here(node, deps)             # is captured before its tensor's hooks,
            if not ends:                              # one that ends here after them)
                capture[node](grad_out)
        if node.pre_hooks:  # register_hook() on the tensor this node makes (or the leaf)
            grad_out = _run_hooks(node.pre_hooks, grad_out)
            mine.discard(node)  # (a hook may have kept the gradient it was given)
        if node.retained is not None:  # retain_grad(): this is the output's whole gradient
            _retain(node.retained(), grad_out)
        if ends:
            capture[node](grad_out)
            continue  # nothing below needs it: it does not run (nor free what it saved)
        if type(node) is AccumulateGrad:
            grads = node.apply(grad_out, node in mine)
        else:
            grads = node.apply(grad_out)
        if not retain_graph:
            node.release()
        new = type(node) is Node and node.fn.new_grads
        for child, g in zip(node.next_functions, grads):
            if child not in deps:  # (None, or off the paths to the captured nodes)
                continue
            if g is not None:
                if child in buffers:
                    buffers[child] = add_gradients(buffers[child], g, child in mine)
                    mine.add(child)  # a new array, or one of the engine's own
                else:
                    buffers[child] = g
                    if new:
                        mine.add(child)
            deps[child] -= 1
            if deps[child] == 0:
                if child in buffers:
                    ready.append(child)
                else:  # every path into it returned None: nothing flows below
                    _skip(child, deps, buffers, ready, retain_graph, capture)


def _propagate_graph(root: Node, grad: Any, retain_graph: bool,
                     capture: Mapping[Node, Callable[[Any], None]] | None = None) -> None:
    """:func:`_propagate` with Tensor gradients that keep their graph (``create_graph``):
    each node runs ``apply_graph``; nothing is owned or written in place."""
    deps = _count_dependencies(root, capture)
    buffers: dict[Node, Any] = {root: grad}
    ready = [root]
    while ready:
        node = ready.pop()
        grad_out = buffers.pop(node)
        ends = False
        if capture is not None and node in capture:  # (before the hooks unless it ends here)
            ends = _ends_here(node, deps)
            if not ends:
                capture[node](grad_out)
        if node.pre_hooks:
            grad_out = _run_hooks(node.pre_hooks, grad_out, graph=True)
        if node.retained is not None:
            t = node.retained()
            if t is not None:
                accumulate_graph(t, grad_out)
        if ends:
            capture[node](grad_out)
            continue
        grads = node.apply_graph(grad_out)
        if not retain_graph:
            node.release()
        for child, g in zip(node.next_functions, grads):
            if child not in deps:
                continue
            if g is not None:
                buffers[child] = buffers[child] + g if child in buffers else g
            deps[child] -= 1
            if deps[child] == 0:
                if child in buffers:
                    ready.append(child)
                else:
                    _skip(child, deps, buffers, ready, retain_graph, capture)


def _ends_here(node: Node, deps: dict[Node, int]) -> bool:
    """In a partial pass: no node that runs is below this (captured) one."""
    return not any(child in deps for child in node.next_functions)


def _run_hooks(hooks: Mapping[int, Callable[[Any], Any]], grad: Any, graph: bool = False) -> Any:
    """``grad`` through a tensor's hooks in order; a Tensor one returns replaces it.
    (``graph``: a create_graph pass, where ``grad`` is a Tensor with its graph.)"""
    for hook in list(hooks.values()):
        result = hook(grad if graph else function.Tensor(grad))
        if result is None:
            continue
        name = getattr(hook, "__name__", type(hook).__name__)
        if not isinstance(result, function.Tensor):
            raise TypeError(f"expected Tensor, but hook '{name}' returned "
                            f"'{type(result).__name__}'")
        if result.shape != tuple(grad.shape):
            raise RuntimeError(f"hook '{name}' has changed the size of value: it returned "
                               f"shape {result.shape} for a gradient of shape "
                               f"{tuple(grad.shape)}")
        given = function.Tensor(grad)  # (a 0-d gradient may be a NumPy scalar, not an array)
        if result.dtype != grad.dtype or result.device != given.device:
            raise RuntimeError(f"hook '{name}' has changed the type of value (was {grad.dtype} "
                               f"on {given.device}, got {result.dtype} on {result.device})")
        grad = result if graph else result._data
    return grad


def _retain(t: Any, grad: Any) -> None:
    """Add ``grad`` into the ``.grad`` of a non-leaf that asked for it (if still alive)."""
    if t is None:
        return
    if t._grad is None:
        t._grad = type(t)(grad.astype(t.dtype, order="C", copy=True))
    else:
        t._grad._data += grad
        t._grad._version_counter[0] += 1  # written in place


def _skip(node: Node, deps: dict, buffers: dict, ready: list, retain_graph: bool,
          capture: Mapping[Node, Any] | None = None) -> None:
    """A node that received no gradient still counts down its children (a captured node
    gets none: its gradient stays None).

    Iterative (an explicit stack, not recursion): the graph below can be deep.
    """
    stack = [node]
    while stack:
        node = stack.pop()
        if capture is not None and node in capture and _ends_here(node, deps):
            continue
        if not retain_graph:
            node.release()
        for child in node.next_functions:
            if child not in deps:
                continue
            deps[child] -= 1
            if deps[child] == 0:
                if child in buffers:
                    ready.append(child)
                else:
                    stack.append(child)
