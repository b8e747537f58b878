"""``torch.utils.hooks``: :class:`RemovableHandle`, and the machinery of a module's backward
hooks (``Module.register_full_backward_hook`` / ``register_full_backward_pre_hook``), built as
PyTorch builds it.

A module's backward hook wants the gradients with respect to the module's inputs and outputs,
*together*, once per call. Autograd only knows ops, so PyTorch wraps the call in two identity
ops of several tensors (``BackwardHookFunction``): one around the tensors passed in, one around
the tensors returned. Each has a single graph node for all of its tensors, which runs once
every one of their gradients has arrived:

* the outputs' node runs first: it keeps ``grad_output`` (after the backward pre-hooks, which
  may replace it) and passes it on into the module's graph;
* the inputs' node runs when the module's graph has delivered ``grad_input``: it calls the
  backward hooks with ``(module, grad_input, grad_output)`` (a hook may return a new
  ``grad_input``) and passes the gradients on to whatever made the inputs.

tinytrain's :class:`~tinytrain.autograd.Function` has one output, so the identity op is made
here from two kinds of nodes: one :class:`BackwardHookNode` for the call, and a small
:class:`OutputNode` per tensor that hands its gradient to it tagged with the tensor's position
(:class:`Grads`, which the engine adds up as it adds any gradients). The engine is unchanged.
As in PyTorch, ``grad_input`` holds None for arguments that are not Tensors and zeros for
Tensors that got no gradient (one that does not require grad, beside one that does);
``grad_output`` holds None for outputs that got no gradient. Without any input that requires
grad, the hooks run at the outputs' node, with ``grad_input`` all None (PyTorch warns).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tinytrain.autograd.function import Node, NodeName
from tinytrain.autograd.grad_mode import is_grad_enabled
from tinytrain.backend import get_array_module
from tinytrain.tensor import RemovableHandle, Tensor

__all__ = ["BackwardHook", "BackwardHookFunction", "RemovableHandle"]

_NAME = NodeName("BackwardHookFunctionBackward")


class Grads(dict):
    """The gradients that reach a :class:`BackwardHookNode`, by tensor position. The engine
    adds up everything that reaches a node (``+``); these add position by position."""

    def __add__(self, other: Grads) -> Grads:
        total = Grads(self)
        for i, g in other.items():
            total[i] = total[i] + g if i in total else g
        return total


class BackwardHookNode(Node):
    """The one graph node of a :class:`BackwardHookFunction` call: it runs once, when the
    gradients of all of its tensors have arrived, calls ``hook(grads)`` (grads: one per
    tensor, None where none arrived), and passes what the hook returns on to the tensors'
    own nodes."""

    def __init__(self, tensors: Sequence[Tensor],
                 hook: Callable[[tuple[Any, ...]], tuple[Any, ...]]) -> None:
        self.next_functions = tuple(t._grad_node() if t.requires_grad else None
                                    for t in tensors)
        self.hook = hook

    name = property(lambda self: _NAME)

    def apply(self, grads: Grads) -> tuple[Any, ...]:
        return self.hook(tuple(grads.get(i) for i in range(len(self.next_functions))))

    def release(self) -> None:
        pass  # (nothing saved)


class OutputNode(Node):
    """The node of tensor ``index`` of a :class:`BackwardHookFunction` call: hands its
    gradient to the call's node, tagged with its position."""

    def __init__(self, node: BackwardHookNode, index: int) -> None:
        self.next_functions = (node,)
        self.index = index

    name = property(lambda self: _NAME)

    def apply(self, grad: Any) -> tuple[Grads]:
        return (Grads({self.index: grad}),)

    def release(self) -> None:
        pass


class BackwardHookFunction:
    """PyTorch's identity op of several tensors, for module backward hooks (module
    docstring)."""

    @staticmethod
    def apply(hook: Callable[[tuple[Any, ...]], tuple[Any, ...]], *tensors: Tensor
              ) -> tuple[Tensor, ...]:
        """New tensors sharing the memory (and version counter) of ``tensors``; those that
        require grad get one shared :class:`BackwardHookNode` that calls ``hook``. They are
        views of ``tensors``, so an in-place op on one with autograd is refused (it would
        write the original's memory around the node), as PyTorch refuses it."""
        node = BackwardHookNode(tensors, hook)
        outputs = []
        for i, t in enumerate(tensors):
            out = Tensor(t)
            out._base = t if t._base is None else t._base  # a view: in-place writes refused
            if t.requires_grad:
                out.grad_fn, out._requires_grad = OutputNode(node, i), True
            outputs.append(out)
        return tuple(outputs)


def _pack_with_none(indices: Sequence[int], values: Sequence[Any], size: int) -> tuple:
    """``values`` at positions ``indices`` of a tuple of ``size``, None elsewhere."""
    out: list[Any] = [None] * size
    for i, v in zip(indices, values):
        out[i] = v
    return tuple(out)


class BackwardHook:
    """One module call's backward hooks (PyTorch's ``torch.utils.hooks.BackwardHook``):
    :meth:`setup_input_hook` wraps the call's arguments, :meth:`setup_output_hook` its result,
    each in a :class:`BackwardHookFunction` (module docstring)."""

    def __init__(self, module: Any, user_hooks: list[Callable[..., Any]],
                 user_pre_hooks: list[Callable[..., Any]]) -> None:
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.grad_outputs: tuple | None = None  # from the outputs' node to the inputs'
        self.n_inputs = self.n_outputs = -1
        self.input_tensors_index: list[int] | None = None  # None: no node (nothing needs grad)
        self.output_tensors_index: list[int] | None = None
        self.input_like: list[tuple] = []  # (shape, dtype, array module) of each tensor input
        self.output_like: list[tuple] = []

    def _apply_on_tensors(self, args: tuple, hook: Callable[[tuple], tuple]
                          ) -> tuple[Any, list[int] | None, list[tuple]]:
        """``args`` with its Tensors replaced by a BackwardHookFunction's, their positions and
        (shape, dtype, array module) - or ``args`` as they are and None when none requires
        grad."""
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return args, None, []
        new = list(args)
        for i, t in zip(index, BackwardHookFunction.apply(hook, *tensors)):
            new[i] = t
        like = [(t.shape, t.dtype, get_array_module(t._data)) for t in tensors]
        return (tuple(new) if type(args) is tuple else type(args)(*new)), index, like

    def setup_input_hook(self, args: tuple) -> tuple:
        args, self.input_tensors_index, self.input_like = self._apply_on_tensors(
            args, self._input_hook)
        self.n_inputs = len(args)
        return args

    def setup_output_hook(self, result: Any) -> Any:
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        outputs, self.output_tensors_index, self.output_like = self._apply_on_tensors(
            outputs, self._output_hook)
        self.n_outputs = len(outputs)
        return outputs[0] if single else outputs

    def _output_hook(self, grads: tuple) -> tuple:
        """At the outputs' node: keep ``grad_output`` (after the pre-hooks) and pass it on."""
        assert self.output_tensors_index is not None
        self.grad_outputs = _pack_with_none(self.output_tensors_index, _tensors(grads),
                                            self.n_outputs)
        for pre_hook in self.user_pre_hooks:
            out = pre_hook(self.module, self.grad_outputs)
            if out is None:
                continue
            out = (out,) if isinstance(out, Tensor) else tuple(out)
            if len(out) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(out)}, but expected "
                                   f"{len(self.grad_outputs)}")
            self.grad_outputs = out
        grad_outputs = self.grad_outputs
        if self.input_tensors_index is None:  # no input node will run: the hooks run here
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients.",
                          UserWarning, stacklevel=6)  # (the caller of backward())
            for hook in self.user_hooks:
                res = hook(self.module, (None,) * self.n_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple)
                                            and all(g is None for g in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return self._arrays(grad_outputs, self.output_tensors_index, self.output_like,
                            "grad_output")

    def _input_hook(self, grads: tuple) -> tuple:
        """At the inputs' node: call the hooks with ``grad_input`` and ``grad_output``."""
        assert self.input_tensors_index is not None
        if self.grad_outputs is None:  # (the gradient reached the inputs another way)
            return grads
        grads = tuple(xp.zeros(shape, dtype) if g is None else g  # (PyTorch's zeros)
                      for g, (shape, dtype, xp) in zip(grads, self.input_like))
        res = _pack_with_none(self.input_tensors_index, _tensors(grads), self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            out = (out,) if isinstance(out, Tensor) else tuple(out)
            if len(out) != len(res):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                   f"got {len(out)}, but expected {len(res)}")
            res = out
        self.grad_outputs = None
        return self._arrays(res, self.input_tensors_index, self.input_like, "grad_input")

    def _arrays(self, grads: tuple, index: list[int], like: list[tuple], what: str) -> tuple:
        """The hooks' gradients at ``index`` as arrays for the engine, each None or of its
        tensor's shape (cast to its dtype)."""
        out = []
        for i, (shape, dtype, _) in zip(index, like):
            g = grads[i]
            if g is not None:
                g = g._data if isinstance(g, Tensor) else g
                if tuple(g.shape) != shape:
                    raise RuntimeError(f"backward hook of {type(self.module).__name__}: "
                                       f"{what}[{i}] has shape {tuple(g.shape)}, but the "
                                       f"tensor has shape {shape}")
                g = g if g.dtype == dtype else g.astype(dtype)
            out.append(g)
        return tuple(out)


def _tensors(arrays: tuple) -> tuple:
    return tuple(None if a is None else Tensor(a) for a in arrays)
