"""``Function``: one differentiable op, and the graph nodes it leaves behind.

A Function is three static methods, as in PyTorch 2:

* ``forward(*inputs)`` computes the output from raw arrays (NumPy or CuPy);
* ``setup_context(ctx, inputs, output)`` saves on ``ctx`` only what backward
  needs ("selective save"), reading ``ctx.needs_input_grad`` to skip the rest;
* ``backward(ctx, grad_output)`` returns one gradient per forward input
  (``None`` where the input needs none).

Inside a Function everything is a raw array of the device's array module; the
Tensor wrapping happens once, in ``apply``. This keeps the ops free of autograd
bookkeeping and lets one implementation serve NumPy and CuPy. **This is where
tinytrain differs from PyTorch's current docs**, which write the same three methods
on Tensors: here a Function with ``setup_context`` sees arrays, so Tensor methods
such as ``x.mm(w.t())`` raise AttributeError (with a note saying so; write
``x @ w.T``, or use the classic style below), and ``forward`` returns *one* array:
Functions with several outputs (PyTorch's ``return x ** 3, 3 * x ** 2``) are not
supported, and returning a tuple raises.

**PyTorch's classic style works too**, as PyTorch's tutorials write it::

    class LegendrePolynomial3(Function):
        @staticmethod
        def forward(ctx, input):                 # Tensors in, a Tensor out
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):          # a Tensor in, one Tensor per input out
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

A Function is in this style when it has no ``setup_context`` of its own and its
``forward`` takes ``ctx`` first (PyTorch's rule is the first half; the second lets
tinytrain's own ops that save nothing omit ``setup_context``). It is decided once,
when the class is defined. A user's Function without ``setup_context`` is in this style
also when forward's first parameter is called ``self`` or ``context`` (older tutorials);
with another name, ``forward``'s signature decides at each call, taking ``ctx`` first only
when the inputs alone do not fit it.
``apply`` then runs ``forward(ctx, *inputs)`` on the Tensors themselves under
``no_grad``, and the node calls ``backward`` with a Tensor (also under ``no_grad``; with
grad mode on in a ``create_graph=True`` pass, so that its Tensor ops are differentiated
again, as in PyTorch, a saved output then coming back with the node as its ``grad_fn``)
and unwraps the Tensors it returns. Everything else is
shared: the same ``Context`` (``save_for_backward``, ``saved_tensors`` with its version
check, ``needs_input_grad``), the same graph nodes and engine. The array style stays
the faster one (no Tensor wrapping inside), which is why tinytrain's ops use it.

In this style forward may also modify an input in place and return it, after
``ctx.mark_dirty(input)``, as in PyTorch: the returned Tensor *is* the input, and its
history moves onto the Function's node (the same mechanism as ``x.mul_(k)``:
``Tensor._inplace``), so gradients through it are right. An input that requires grad
and that forward modified without ``mark_dirty`` raises (PyTorch computes wrong
gradients silently); a leaf that requires grad cannot be marked dirty (PyTorch's error).

``apply`` takes keyword arguments too (``F.apply(x, scale=3.0)``): as in PyTorch they
become positional inputs in forward's order (defaults filled in where they leave a gap),
so a Tensor passed by keyword is tracked like any other input.

``apply`` records a :class:`Node` when grad mode is on and some input requires
grad. The node's ``next_functions`` point at the nodes of its inputs: another
op's node, or an :class:`AccumulateGrad` for a leaf that requires grad.

``apply`` also keeps in-place writes honest, with one rule each:

* **Views share a version counter.** Every Tensor has a version counter
  (``t._version``) that in-place ops bump. When ``forward`` returns a view of an
  input's memory (reshape, permute, basic indexing), the output shares that
  input's counter, so a write through either is seen by both.
* **Saved arrays remember their version.** When ``setup_context`` saves an input
  or the output, its version is recorded; if it changed before backward reads
  it, backward raises PyTorch's "modified by an inplace operation" error instead
  of computing a wrong gradient.

Higher-order gradients: a Function may also define ``backward_graph(ctx, grad, saved)``,
its backward written with differentiable tinytrain ops on Tensors, which a
``create_graph=True`` pass runs instead of ``backward``; ``saved`` are the saved arrays as
Tensors connected to the graph (an input's is that input, the output's has the node as its
``grad_fn``: the record above says which), and ``saved.input(i, shape, like)`` gives an
input that was not saved, without its values, to anchor a gradient in its graph. See the
DESIGN section of :mod:`tinytrain.autograd.engine`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from tinytrain.autograd.grad_mode import is_grad_enabled, no_grad
from tinytrain.backend import get_array_module

#: The Tensor class; :mod:`tinytrain.tensor` (which imports this module) sets it once it
#: exists, so that ``apply`` needs no import on every call.
Tensor: Any = None


_FREED_MESSAGE = (
    "Trying to backward through the graph a second time: its saved arrays were freed after "
    "the first backward. Call .backward(retain_graph=True) the first time if you need to "
    "backward twice."
)


class Context:
    """What a node keeps between forward and backward."""

    _non_differentiable = False  # set by mark_non_differentiable (a class default: no cost)
    _dirty: tuple = ()  # set by mark_dirty (ctx-style Functions)

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self._saved: tuple[Any, ...] | None = ()
        self._versions: tuple[Any, ...] = ()  # per saved array: (counter, version) or None
        self._freed = False

    def save_for_backward(self, *arrays: Any) -> None:
        """Keep ``arrays`` (raw arrays or None; Tensors in the ctx style) for backward."""
        self._saved = arrays

    def mark_dirty(self, *tensors: Any) -> None:
        """PyTorch's: forward modified these inputs in place (and returns them); a
        ctx-style Function's only (module docstring). A tinytrain Function has one output,
        so at most one Tensor can be marked, the one forward returns."""
        self._dirty = tensors

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """PyTorch's: the output gets no gradient (and records no node); a tinytrain
        Function has one output, so marking any marks it."""
        if outputs:
            self._non_differentiable = True

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted for PyTorch's API; nothing changes: a tinytrain Function has one output,
        and its backward always receives that output's gradient as an array."""

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        if self._freed:
            raise RuntimeError(_FREED_MESSAGE)
        for array, entry in zip(self._saved, self._versions):  # type: ignore[arg-type]
            if entry is not None and entry[0][0] != entry[1]:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: [{array.dtype} {list(array.shape)}] is at version "
                    f"{entry[0][0]}; expected version {entry[1]} instead. Hint: an in-place op "
                    "(x += ..., x.add_(...), x.data = ..., an optimizer step) changed it after "
                    "this op used it; use an out-of-place op (x = x + ...) or x.clone() instead."
                )
        return self._saved  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        # only called for missing attributes: after free(), those set in setup_context
        if self.__dict__.get("_freed"):
            raise RuntimeError(_FREED_MESSAGE)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def free(self) -> None:
        """Drop the arrays kept for backward (after a backward without ``retain_graph``).

        As PyTorch frees its saved tensors and keeps the rest: what only describes the
        inputs (shapes, numbers, dtypes, slices) stays, so a node that needs no array (a
        sum, an add, a view) runs again in a second backward, and one that needs an array
        (a product, an exp) raises the error that says to pass ``retain_graph=True``."""
        keep = ("needs_input_grad", "_saved", "_versions", "_freed")
        dropped = [k for k, v in vars(self).items() if k not in keep and not _describes(v)]
        for name in dropped:
            delattr(self, name)
        if self._saved or dropped:
            self._saved, self._versions, self._freed = None, (), True


#: What a context may keep after a backward: values that describe the inputs, no arrays.
_DESCRIPTIONS = (type(None), bool, int, float, str, slice, type(Ellipsis), np.dtype, np.generic,
                 type)


def _describes(value: Any, depth: int = 0) -> bool:
    """True for a value with no array in it (see :meth:`Context.free`)."""
    if isinstance(value, _DESCRIPTIONS):
        return True
    return (depth < 4 and isinstance(value, tuple | list)
            and all(_describes(v, depth + 1) for v in value))


_NOT_A_TENSOR = "not a Tensor"  # Node.input_meta of an input that was a number (or None)


def no_double_backward(name: str) -> str:
    """The message for a node without ``backward_graph`` in a ``create_graph`` pass."""
    return (f"backward(create_graph=True) through {name}: tinytrain has no double backward "
            f"for this op yet; supported: {', '.join(double_backward_ops())}")


def double_backward_ops() -> list[str]:
    """The names of the Functions that have a ``backward_graph`` (tinytrain's own)."""
    names, stack = set(), [Function]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.backward_graph is not None and not cls._user and not cls.__name__.startswith("_"):
            names.add(cls.__name__)
    return sorted(names)


def explain_array_error(cls: type[Function], method: str, error: AttributeError) -> None:
    """If a user's array-style Function called a Tensor method on a raw array, raise the
    error again with what to do instead (PyTorch's docs write these methods on Tensors)."""
    obj = getattr(error, "obj", None)
    if cls._user and type(obj).__module__.split(".")[0] in ("numpy", "cupy"):
        raise AttributeError(
            f"{error}. In tinytrain, a Function with setup_context (tinytrain's style) runs "
            f"{method} on raw NumPy/CuPy arrays, not Tensors: use the array's own operations "
            f"in {cls.__name__}.{method} (x @ w.T for x.mm(w.t())). For PyTorch's "
            f"Tensor-level style, drop setup_context and write forward(ctx, *inputs), "
            f"saving with ctx.save_for_backward (see tinytrain.autograd.function's docstring)",
            name=error.name, obj=obj) from error


class SliceGrad:
    """A gradient that is zero except on one basic index: ``zeros(shape)`` with ``values``
    added at ``index``, not made yet (DESIGN, in engine.py: "Gradients of slices").

    :class:`~tinytrain.autograd.ops.Index` returns it for a basic index (``x[t]``,
    ``x[:, 2:5]``, the pieces of ``split``, ``chunk`` and ``unbind``). The engine adds it
    into the gradient it is summing for the sliced tensor, in place, on the slice alone; a
    node receives it made whole (:meth:`dense`). Without it, the ``T`` pieces of an
    ``unbind`` would each make a whole zero-filled gradient: ``T`` times the work.
    """

    __slots__ = ("shape", "index", "values")

    def __init__(self, shape: tuple[int, ...], index: Any, values: Any) -> None:
        self.shape, self.index, self.values = shape, index, values

    def dense(self) -> Any:
        """The gradient as a new array (shape ``self.shape``, the values' dtype)."""
        out = get_array_module(self.values).zeros(self.shape, dtype=self.values.dtype)
        out[self.index] += self.values  # (+=, as IndexGrad: -0.0 becomes 0.0 alike)
        return out

    def add_to(self, buffer: Any, owned: bool) -> Any:
        """``buffer + self`` (a NumPy/CuPy array): in place when the engine owns ``buffer``
        and it can hold the sum (its dtype, writeable), else in a new array."""
        xp = get_array_module(buffer)
        dtype = xp.result_type(buffer, self.values)
        if not (owned and dtype == buffer.dtype and isinstance(buffer, xp.ndarray)
                and getattr(buffer.flags, "writeable", True)):
            buffer = xp.array(buffer, dtype=dtype)  # (a copy; also of a NumPy scalar)
        buffer[self.index] += self.values
        return buffer


def add_gradients(a: Any, b: Any, a_owned: bool) -> Any:
    """The engine's sum of two gradients for one node, either a :class:`SliceGrad`;
    ``a_owned``: nothing but the engine holds ``a`` (it may be written in place)."""
    if type(b) is SliceGrad:
        return b.add_to(a.dense() if type(a) is SliceGrad else a,
                        owned=a_owned or type(a) is SliceGrad)
    if type(a) is SliceGrad:
        return a.add_to(b, owned=False)
    return a + b


class NodeName(str):
    """A node's name, ``"MulBackward"``: a string, as ``node.name`` always gave it in
    tinytrain, that can also be called as PyTorch's method (``node.name()``; PyTorch's
    names end in a version number, ``"MulBackward0"``, tinytrain's do not)."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class Node:
    """A recorded op in the graph: its Function, its context and its inputs' nodes.

    The gradients a user's Function returns are checked as PyTorch checks them
    (:meth:`_fit`): each is None, or of its input's shape, or of a shape that input
    broadcasts to (then summed back to it); anything else raises, naming the Function and
    the input. tinytrain's own ops are trusted (``input_meta`` None: no check per node).
    """

    input_meta: tuple | None = None  # (shape, dtype) per input that needs a gradient
    retained: Any = None  # a weak reference to the output that called retain_grad()
    pre_hooks: dict[int, Callable[[Any], Any]] | None = None  # its output's register_hook()s

    def __init__(self, fn: type[Function], ctx: Context, next_functions: tuple) -> None:
        self.fn = fn
        self.ctx = ctx
        self.next_functions = next_functions  # one entry per forward input: Node or None

    @property
    def name(self) -> NodeName:
        return NodeName(f"{self.fn.__name__}Backward")

    def apply(self, grad: Any) -> tuple[Any, ...]:
        try:
            grads = self._check(self.fn.backward(self.ctx, grad))
        except AttributeError as error:  # (a try costs nothing until it catches)
            explain_array_error(self.fn, "backward", error)
            raise
        return grads if self.input_meta is None else self._fitted(grads)

    def apply_graph(self, grad: Tensor) -> tuple[Any, ...]:
        """``apply`` in a ``create_graph=True`` pass: the Function's ``backward_graph`` on the
        Tensor ``grad`` and the saved arrays as Tensors of the graph (:meth:`saved_graph`),
        with grad mode on, so that the gradients it returns (Tensors) have a graph too. A
        Function without one raises (never a gradient without its graph)."""
        backward_graph = self.fn.backward_graph
        if backward_graph is None:
            if self.fn._user:
                raise NotImplementedError(
                    f"backward(create_graph=True) through {self.name}: a Function in "
                    f"tinytrain's array style (setup_context) has no double backward; write "
                    f"it in PyTorch's style (forward(ctx, ...), backward on Tensors), whose "
                    f"backward is differentiated, or give it a backward_graph(ctx, grad, saved)")
            raise NotImplementedError(no_double_backward(self.name))
        grads = self._check(backward_graph(self.ctx, grad, self.saved_graph()))
        return grads if self.input_meta is None else self._fitted(grads, graph=True)

    def saved_graph(self) -> SavedGraph:
        """The saved arrays as Tensors connected to the graph (PyTorch's SavedVariable
        unpacked in a double backward): an input's array is that input (a leaf itself, or a
        Tensor whose ``grad_fn`` is the input's node), the output's has this node as its
        ``grad_fn``; anything else (an index, a mask) is a constant Tensor. The version check
        of ``saved_tensors`` runs first, and the Tensors share the counters it checks."""
        saved = self.ctx.saved_tensors
        tensors = []
        for s, entry in zip(saved, self.ctx._versions):
            source = None if entry is None else entry[2]
            node = self if source == _OUTPUT else None
            if source is not None and source >= 0:
                node = self.next_functions[source]
                if type(node) is AccumulateGrad:
                    tensors.append(node.tensor)  # the leaf itself
                    continue
            if source == _AMBIGUOUS:
                raise NotImplementedError(
                    f"backward(create_graph=True) through {self.name}: one of its saved arrays "
                    f"was given as two different tensors on one array (Tensor(x) and x.data "
                    f"wrap x's own array); its double backward cannot tell them apart: use "
                    f"x.detach()")
            if s is None:
                tensors.append(None)
                continue
            t = Tensor(s)
            if entry is not None:
                t._version_counter = entry[0]
            if node is not None:
                t.grad_fn, t._requires_grad = node, True
            tensors.append(t)
        return SavedGraph(tensors, self)

    def input_graph(self, i: int, shape: tuple[int, ...], like: Any) -> Any:
        """Input ``i`` as a Tensor that carries only its history, for a zero derivative
        (:meth:`SavedGraph.input`): a leaf is itself; another input is a broadcast zero of
        ``shape`` (no memory; ``like``'s dtype and device) whose ``grad_fn`` is the input's
        node; None when the input needs no gradient."""
        node = self.next_functions[i]
        if node is None:
            return None
        if type(node) is AccumulateGrad:
            return node.tensor
        like = like._data if isinstance(like, Tensor) else like
        xp = get_array_module(like)
        t = Tensor(xp.broadcast_to(xp.zeros((), like.dtype), tuple(shape)))
        t.grad_fn, t._requires_grad = node, True
        return t

    def check_inputs(self, inputs: tuple) -> Node:
        """A user's Function: check what forward saved (PyTorch's error for a number),
        and record the inputs' shapes and dtypes, so that backward's gradients are checked
        (a non-Tensor input gets ``_NOT_A_TENSOR``: its gradient must be None)."""
        for i, s in enumerate(self.ctx._saved):
            if s is not None and not hasattr(s, "shape"):  # a Tensor, an array, or None
                raise TypeError(f"save_for_backward can only save variables, but argument {i} "
                                f"is of type {type(s).__name__}")
        self.input_meta = tuple((x.shape, x.dtype) if n else
                                None if isinstance(x, Tensor) else _NOT_A_TENSOR
                                for x, n in zip(inputs, self.next_functions))
        return self

    def _fitted(self, grads: tuple, graph: bool = False) -> tuple:
        return tuple(self._fit(i, g, graph) for i, g in enumerate(grads))

    def _fit(self, i: int, g: Any, graph: bool = False) -> Any:
        """Gradient ``i`` as an array of its input's shape and dtype (``graph``: as a Tensor,
        its graph kept, in a ``create_graph`` pass)."""
        meta = self.input_meta[i]
        if g is None or meta is None:  # (a Tensor that needs no gradient may get anything)
            return None
        if meta is _NOT_A_TENSOR:
            raise RuntimeError(f"function {self.name} returned a gradient different than None "
                               f"at position {i + 1}, but the corresponding forward input was "
                               f"not a Variable")
        if not isinstance(g, Tensor) and not hasattr(g, "__array__"):
            raise RuntimeError(f"{self.fn.__name__}.backward returned {type(g).__name__} as the "
                               f"gradient of input {i}; expected a Tensor or None")
        shape, dtype = meta
        if graph:
            g = g if isinstance(g, Tensor) else Tensor(g)
        else:
            g = g._data if isinstance(g, Tensor) else g
        if g.shape != shape:
            try:
                fits = np.broadcast_shapes(shape, g.shape) == g.shape
            except ValueError:
                fits = False
            if not fits:
                raise RuntimeError(
                    f"{self.fn.__name__}.backward returned an invalid gradient at index {i}: "
                    f"got shape {g.shape} but expected a shape compatible with {shape}")
            from tinytrain.autograd import ops  # (ops imports this module)

            # the broadcast dims summed back, as PyTorch
            g = ops.unbroadcast_graph(g, shape) if graph else ops.unbroadcast(g, shape)
        if g.dtype == dtype:
            return g
        return g.to(dtype=dtype) if graph else g.astype(dtype)

    def _check(self, grads: Any) -> tuple[Any, ...]:
        if not isinstance(grads, tuple):
            grads = (grads,)
        n = len(self.next_functions)
        if len(grads) > n and all(g is None for g in grads[n:]):
            grads = grads[:n]  # surplus Nones (for non-tensor arguments): ignored, as PyTorch
        if len(grads) != n:
            raise RuntimeError(
                f"function {self.name} returned an incorrect number of gradients (expected "
                f"{n}, got {len(grads)}): backward returns one gradient (or None) per input "
                f"of forward"
            )
        return grads

    def release(self) -> None:
        self.ctx.free()

    def __repr__(self) -> str:
        """PyTorch's (Python's default) form, ``<AddBackward object at 0x7f...>``: what
        ``print(z.grad_fn)`` shows; the name has no version digit (a tensor's printout
        names its node ``grad_fn=<AddBackward>``)."""
        return f"<{self.name} object at {id(self):#x}>"


class SavedGraph(tuple):
    """``saved`` of a ``backward_graph``: the saved arrays as Tensors of the graph
    (:meth:`Node.saved_graph`), and :meth:`input`."""

    node: Node

    def __new__(cls, tensors: list, node: Node) -> SavedGraph:
        self = super().__new__(cls, tensors)
        self.node = node
        return self

    def input(self, i: int, shape: tuple[int, ...], like: Any) -> Any:
        """Input ``i`` in the graph without its values (:meth:`Node.input_graph`): the
        *anchor* of an op whose gradient PyTorch computes from that input although its
        derivative there is 0 (``hardtanh``, padding by reflection, average pooling read the
        input in PyTorch's backward): an anchor gets a zero gradient, so the gradient
        requires grad and a later backward gives the input zeros, as torch's."""
        return self.node.input_graph(i, shape, like)


class CtxNode(Node):
    """The node of a ctx-style Function: ``backward`` sees and returns Tensors (a user's,
    so its gradients are always checked: see :class:`Node`)."""

    def apply(self, grad: Any) -> tuple[Any, ...]:
        with no_grad():
            grads = self._check(self.fn.backward(self.ctx, Tensor(grad)))
        return self._fitted(grads)

    def apply_graph(self, grad: Tensor) -> tuple[Any, ...]:
        """In a ``create_graph`` pass the user's backward runs on Tensors with grad mode on
        (as in PyTorch), so its Tensor ops record the graph of the gradients. A saved output
        comes back with this node as its ``grad_fn`` (PyTorch's SavedVariable of an output),
        so that the gradient is differentiated through it too."""
        ctx = self.ctx
        outputs, saved = ctx.__dict__.get("_saved_outputs"), ctx._saved
        if not outputs or not saved:
            return self._fitted(self._check(self.fn.backward(ctx, grad)), graph=True)
        ctx._saved = tuple(self._connected(t) if i in outputs else t for i, t in enumerate(saved))
        try:
            grads = self.fn.backward(ctx, grad)
        finally:
            ctx._saved = saved  # (the node is not kept in its own context: no cycle)
        return self._fitted(self._check(grads), graph=True)

    def _connected(self, t: Tensor) -> Tensor:
        """The saved output ``t`` as a Tensor on its memory, with this node as its
        ``grad_fn`` (and its version counter, for the in-place check)."""
        out = Tensor(t._data)
        out._version_counter = t._version_counter
        out.grad_fn, out._requires_grad = self, True
        return out


class AccumulateGrad(Node):
    """The node of a leaf tensor: adds the incoming gradient into ``tensor.grad``.

    The first gradient becomes ``.grad``: the array itself when the engine says nothing
    else holds it (``owned``: a sum the engine made, or the result of a Function whose
    backward returns new arrays), as PyTorch steals a gradient nobody else references;
    otherwise a copy. Later ones are added *in place*, so a ``.grad`` that was bound to a
    view of a larger buffer (as DDP does with its buckets) stays bound. Post-accumulate
    hooks run after every accumulation. (Taking ownership saves a copy per parameter and
    step: on a GPU, a kernel launch each, 8 of a convnet step's ~60.)
    """

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor
        self.next_functions = ()

    @property
    def name(self) -> NodeName:
        return NodeName("AccumulateGrad")

    @property
    def pre_hooks(self) -> Any:  # (the leaf keeps them: this node is made again when needed)
        return self.tensor._grad_hooks

    def apply(self, grad: Any, owned: bool = False) -> tuple[Any, ...]:
        t = self.tensor
        if not t._requires_grad:  # requires_grad_(False) since the forward: as PyTorch, skip
            return ()
        if grad.shape != t.shape:
            raise RuntimeError(
                f"gradient of shape {grad.shape} does not match the leaf's shape {t.shape}"
            )
        if t._grad is None:  # (the shape is checked above, the dtype made: no setter checks)
            own = owned and grad.dtype == t.dtype and grad.flags.c_contiguous
            # (a C-contiguous copy, as PyTorch lays out .grad like its parameter: a gradient
            # that came through a transpose would otherwise make p.grad.view(-1) fail)
            t._grad = Tensor(grad if own else grad.astype(t.dtype, order="C", copy=True))
        elif getattr(t._grad._data.flags, "writeable", True):  # (CuPy's arrays have no flag)
            t._grad._data += grad
            t._grad._version_counter[0] += 1  # written in place, as PyTorch's accumulation
        else:  # a .grad assigned as a read-only broadcast view: replaced, not written
            t._grad = Tensor(t._grad._data + grad)
        for hook in list(t._post_accumulate_grad_hooks.values()):
            hook(t)
        return ()

    def apply_graph(self, grad: Tensor) -> tuple[Any, ...]:
        """``apply`` in a ``create_graph`` pass: ``.grad`` becomes a Tensor with a graph, as
        PyTorch's (a copy of the first gradient, then ``grad + new``, out of place)."""
        t = self.tensor
        if not t._requires_grad:
            return ()
        if grad.shape != t.shape:
            raise RuntimeError(
                f"gradient of shape {grad.shape} does not match the leaf's shape {t.shape}"
            )
        accumulate_graph(t, grad)
        for hook in list(t._post_accumulate_grad_hooks.values()):
            hook(t)
        return ()

    def release(self) -> None:
        pass


def accumulate_graph(t: Tensor, grad: Tensor) -> None:
    """Add ``grad`` into ``t.grad`` keeping its graph (a ``create_graph`` pass: a leaf's
    AccumulateGrad, or ``retain_grad``), as PyTorch: a copy of the first gradient (a Tensor
    with a ``grad_fn`` when ``grad`` requires grad), then ``t.grad + grad``."""
    if grad.dtype != t.dtype:
        grad = grad.to(dtype=t.dtype)
    t._grad = grad.clone() if t._grad is None else t._grad + grad


class Function:
    """Base class of differentiable ops. Subclasses define three static methods.

    A subclass whose ``backward`` returns arrays it has just allocated, one per input and
    referenced nowhere else (kernel outputs), sets ``new_grads = True``: the engine may then
    make them a leaf's ``.grad`` without a copy.
    """

    new_grads: bool = False
    #: ``backward_graph(ctx, grad, saved)``: backward written with differentiable Tensor ops,
    #: for ``create_graph=True`` (engine.py's docstring); None: no double backward (a class
    #: that redefines ``backward`` without it gets None, not its parent's).
    backward_graph: Callable[..., Any] | None = None
    _ctx_style: bool = False  # PyTorch's forward(ctx, *inputs) (module docstring); per class
    _user: bool = False  # defined outside tinytrain: its backward's gradients are checked
    row_major: bool = False  # a new layout (not elementwise): the result made row-major
    as_strided_view: bool = False  # the result views input 0 via as_strided (CuPy: no .base)
    _forward_signature: inspect.Signature | None = None
    _fills_defaults: bool = False  # a user's setup_context style with defaults in forward

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._forward_signature = inspect.signature(cls.forward)  # (read again by apply: once)
        first = next(iter(cls._forward_signature.parameters), None)
        takes_ctx = first == "ctx"
        own_setup = cls.setup_context is not Function.setup_context
        if takes_ctx and own_setup:
            raise TypeError(
                f"{cls.__name__}: forward takes ctx first (PyTorch's classic style) but the "
                f"class also defines setup_context (tinytrain's style, where forward takes the "
                f"inputs only); use one style: drop setup_context, or ctx from forward"
            )
        cls._user = not cls.__module__.startswith("tinytrain.")  # (gradients checked)
        if cls._user and not own_setup:  # PyTorch's rule: ctx first, whatever its name...
            # ...(forward(self, x) in older tutorials), unless the first parameter is an
            # input's, as in tinytrain's style for a Function that saves nothing: decided
            # at each apply by what forward's signature accepts
            takes_ctx = takes_ctx or first in ("self", "context") or None
        cls._ctx_style = takes_ctx
        if cls._user and "apply" not in vars(cls):
            cls.apply = classmethod(_apply_with_arguments)  # type: ignore[method-assign]
        cls._fills_defaults = cls._user and own_setup and any(
            p.default is not p.empty for p in cls._forward_signature.parameters.values())
        if "backward" in vars(cls) and "backward_graph" not in vars(cls):
            cls.backward_graph = None  # (a parent's would differentiate the wrong formula)

    @staticmethod
    def forward(*inputs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        pass

    @staticmethod
    def backward(ctx: Context, grad_output: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Any) -> Tensor:
        """Run ``forward`` on raw arrays, wrap the result, and record the graph. (A user's
        Function takes keyword arguments too: :func:`_apply_with_arguments`.)"""
        if cls._ctx_style or (cls._ctx_style is None and _forward_wants_ctx(cls, inputs)):
            return _apply_ctx_style(cls, inputs)
        raw, needs = [], []
        array_type, mixed, any_needs = None, False, False
        for x in inputs:  # one pass: raw arrays, which need grad, whether devices may differ
            if isinstance(x, Tensor):
                if x._view_replay is not None:
                    x._refresh_view()  # a view whose memory was written since it was made
                data = x._data
                if array_type is None:
                    array_type = type(data)
                elif type(data) is not array_type:
                    mixed = True
                raw.append(data)
                need = x._requires_grad
                needs.append(need)
                any_needs |= need
            else:
                raw.append(x)
                needs.append(False)
        if mixed:  # CPU 0-d tensors join a GPU op (as PyTorch); other mixes raise
            return cls.apply(*on_one_device(cls.__name__, inputs))
        try:
            out = cls.forward(*raw)
        except AttributeError as error:  # (a try costs nothing until it catches)
            explain_array_error(cls, "forward", error)
            raise
        if cls._user and isinstance(out, tuple | list):
            raise TypeError(_several_outputs(cls, out, "array"))
        shared = (getattr(out, "base", None) is not None or any(r is out for r in raw)
                  or (cls.as_strided_view and not isinstance(out, np.ndarray)))
        if cls.row_major and not getattr(out, "flags", _ROW_MAJOR).c_contiguous and (
                not shared or not any(_root(r) is _root(out) for r in raw)):
            out = _row_major(out)  # a new array, not a view of an input
        output = Tensor(out)
        if shared:
            _share_version_if_view(output, out, inputs, raw, cls.as_strided_view)
            if output._base is not None:  # a view: how to make its node again (_refresh_view)
                if is_grad_enabled():
                    output._view_replay = (cls, inputs, input_shapes(inputs))
                    output._view_version = output._version_counter[0]
                else:
                    output._view_without_grad = True
        # Integer and bool results are not differentiable (a cast to int64, an argmax):
        # they never require grad, as in PyTorch.
        if any_needs and is_grad_enabled() and _differentiable(out):
            ctx = Context(tuple(needs))
            raw = tuple(raw)
            try:  # (the wrapped array: a NumPy scalar result became a 0-d array, which
                # a saved output must be to be recognised as the output: _saved_versions)
                cls.setup_context(ctx, raw, output._data)
            except AttributeError as error:
                explain_array_error(cls, "setup_context", error)
                raise
            if ctx._saved:
                ctx._versions = _saved_versions(ctx._saved, inputs, raw, output)
            nexts = tuple(x._grad_node() if n else None for x, n in zip(inputs, needs))
            node = Node(cls, ctx, nexts)
            if cls._user:
                if ctx._dirty:
                    raise RuntimeError(
                        f"{cls.__name__}: ctx.mark_dirty works in PyTorch's ctx style only "
                        f"(forward(ctx, *inputs) on Tensors, no setup_context): in tinytrain's "
                        f"style forward gets raw arrays, whose in-place writes are not seen; "
                        f"write forward(ctx, *inputs), or return a new array")
                node.check_inputs(inputs)
            output.grad_fn = node
            output._requires_grad = True
        return output


_FUNCTION_APPLY = Function.apply.__func__  # (the method itself, for a user's subclass)


def input_shapes(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The shape of each input that has one (None for numbers): a view's record of what it
    was made from (``Tensor._refresh_view``)."""
    return tuple(getattr(x, "shape", None) for x in inputs)


def _forward_wants_ctx(cls: type[Function], inputs: tuple[Any, ...],
                       kwargs: dict | None = None) -> bool:
    """For a user's Function with neither ``setup_context`` nor a first parameter called
    ``ctx``, ``self`` or ``context``: PyTorch's rule calls ``forward(ctx, *inputs)``; a
    Function in tinytrain's style that saves nothing takes ``forward(*inputs)``. The one its
    signature accepts wins (the inputs alone, when both do)."""
    signature = cls._forward_signature
    kwargs = kwargs or {}
    try:
        signature.bind(*inputs, **kwargs)
        return False
    except TypeError:
        pass
    try:
        signature.bind(None, *inputs, **kwargs)
        return True
    except TypeError:
        return False  # neither: forward(*inputs) raises its own TypeError


def _apply_with_arguments(cls: type[Function], *inputs: Any, **kwargs: Any) -> Tensor:
    """``apply`` of a user's Function (``__init_subclass__`` sets it): PyTorch's handling of
    the arguments (:func:`_bind_arguments`), then :meth:`Function.apply`. tinytrain's own
    ops, always called with positional arguments, skip this step (and its cost)."""
    if kwargs or (cls._fills_defaults and len(inputs) < len(cls._forward_signature.parameters)):
        inputs = _bind_arguments(cls, inputs, kwargs)
    return _FUNCTION_APPLY(cls, *inputs)


def _bind_arguments(cls: type[Function], inputs: tuple, kwargs: dict) -> tuple:
    """``inputs`` with ``kwargs`` placed where forward's signature puts them, as PyTorch's
    ``apply`` does: every argument is a positional input of forward (and gets a gradient
    from backward: a Tensor passed by keyword is tracked). Defaults fill the parameters
    skipped before a keyword; in the setup_context style all of them (PyTorch's
    ``bind_default_args``: ``inputs`` in setup_context then has one entry per parameter)."""
    ctx_first = cls._ctx_style or (cls._ctx_style is None
                                   and _forward_wants_ctx(cls, inputs, kwargs))
    signature = cls._forward_signature
    try:
        bound = signature.bind(*((None,) if ctx_first else ()), *inputs, **kwargs)
    except TypeError as error:
        raise TypeError(f"{cls.__name__}.apply: {error} (the arguments of forward)") from None
    params = signature.parameters.values()
    keyword_only = [p.name for p in params if p.name in bound.arguments
                    and p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
    if keyword_only:
        raise TypeError(f"{cls.__name__}.apply: forward's keyword-only arguments "
                        f"{keyword_only} are not supported: apply passes every argument to "
                        f"forward as a positional input, as PyTorch does")
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    given = [name in bound.arguments for name in positional]
    bound.apply_defaults()
    args = bound.args
    if not cls._fills_defaults and True in given:  # the defaults after the last given: left out
        args = args[:len(args) - given[::-1].index(True)]
    return args[1:] if ctx_first else args


def _apply_ctx_style(cls: type[Function], inputs: tuple[Any, ...]) -> Tensor:
    """``apply`` of a ctx-style Function: ``forward(ctx, *inputs)`` on the Tensors.

    The output is a new Tensor sharing ``forward``'s result, or, when forward marked the
    input it returns dirty (modified in place), that input itself, its history moved onto
    this Function's node. An input that requires grad must not change otherwise."""
    # (reading requires_grad remakes a view's node if its memory was written since)
    needs = tuple(isinstance(x, Tensor) and x.requires_grad for x in inputs)
    versions = tuple(x._version if n else None for x, n in zip(inputs, needs))
    ctx = Context(needs)
    with no_grad():
        out = cls.forward(ctx, *inputs)
    if not isinstance(out, Tensor):
        if isinstance(out, tuple | list):
            raise TypeError(_several_outputs(cls, out, "Tensor"))
        out = Tensor(out)
    dirty = _dirty_input(cls, ctx, out, inputs)
    if is_grad_enabled():
        _check_unmarked_writes(cls, inputs, versions, dirty)
    if not (any(needs) and is_grad_enabled() and _differentiable(out)
            and not ctx._non_differentiable):
        if dirty is None:
            return Tensor(out)  # shares out's memory and version; never an input's own object
        dirty._version_counter[0] += 1  # (PyTorch's mark_dirty bumps it)
        return dirty
    _check_same_device(cls.__name__, inputs)
    nexts = tuple(x._grad_node() if n else None for x, n in zip(inputs, needs))
    node = CtxNode(cls, ctx, nexts).check_inputs(inputs)
    if dirty is None:
        output = Tensor(out)
        output.grad_fn, output._requires_grad = node, True
        if ctx._saved and not any(out is x for x in inputs):  # (which saved ones are the
            # output: CtxNode.apply_graph gives them back in the graph)
            ctx._saved_outputs = tuple(i for i, t in enumerate(ctx._saved) if t is out) or None
    else:  # written in place: the input takes the node, as in x.mul_(k)
        if dirty.requires_grad and dirty.grad_fn is None:
            raise RuntimeError(f"{cls.__name__}: a leaf Variable that requires grad has been "
                               f"used in an in-place operation.")
        result = Tensor(dirty._data.copy())
        result.grad_fn, result._requires_grad = node, True
        output = dirty._inplace(cls.__name__, lambda _: result, result)
    # (versions read now: a saved dirty input is saved as the value it holds now)
    ctx._versions = tuple((t._version_counter, t._version_counter[0])
                          if isinstance(t, Tensor) else None for t in ctx._saved)
    return output


def _several_outputs(cls: type[Function], out: tuple | list, kind: str) -> str:
    return (f"{cls.__name__}.forward returned a {type(out).__name__} of {len(out)} outputs; "
            f"tinytrain's Functions return one {kind}: Functions with several outputs are not "
            f"supported (write one Function per output)")


def _dirty_input(cls: type[Function], ctx: Context, out: Tensor, inputs: tuple) -> Tensor | None:
    """The input forward marked dirty (``ctx.mark_dirty``) and returned, or None."""
    marked, ctx._dirty = ctx._dirty, ()  # (kept, it would make a cycle output-node-ctx)
    if not marked:
        return None
    for i, t in enumerate(marked):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"mark_dirty can only accept variables, but argument {i} is of "
                            f"type {type(t).__name__}")
    if len(marked) > 1 or marked[0] is not out:
        raise RuntimeError(
            f"{cls.__name__}: Some elements marked as dirty during the forward method were not "
            f"returned as output. The inputs that are modified inplace must all be outputs of "
            f"the Function (a tinytrain Function has one output: mark only the input it "
            f"returns)")
    return out if any(out is x for x in inputs) else None  # (a new tensor: nothing to move)


def _check_unmarked_writes(cls: type[Function], inputs: tuple, versions: tuple,
                           dirty: Tensor | None) -> None:
    """An input that requires grad and that forward modified in place without mark_dirty
    would give wrong gradients (its history still describes the old values): refused."""
    for i, (x, v) in enumerate(zip(inputs, versions)):
        if v is not None and x._version != v and (
                dirty is None or x._version_counter is not dirty._version_counter):
            raise RuntimeError(
                f"{cls.__name__}.forward modified input {i} (a tensor that requires grad) in "
                f"place without telling autograd: its gradient would be wrong. Call "
                f"ctx.mark_dirty(input) and return that input, or modify a clone() instead")


def _differentiable(out: Any) -> bool:
    """Whether a Function's result can carry a gradient: floating (not integer or bool)."""
    dtype = getattr(out, "dtype", None)
    return dtype is None or dtype.kind == "f"


_ROW_MAJOR = np.ones(1).flags  # (for results without flags: Python numbers)


def _row_major(out: Any) -> Any:
    """A new result of a ``row_major`` op in row-major order. NumPy keeps its input's order
    (``cat`` or ``softmax`` of a transposed tensor comes out transposed), where PyTorch
    makes these contiguous, so that ``torch.cat([a.t(), b.t()]).view(-1)`` works; so here
    too. Elementwise ops keep their input's layout, in both (``x.t().exp().t()`` is
    contiguous again), and views of inputs are never copied."""
    return get_array_module(out).ascontiguousarray(out)


def _root(array: Any) -> Any:
    """The object that owns an array's memory (follows ``.base`` of NumPy/CuPy views)."""
    while (base := getattr(array, "base", None)) is not None:
        array = base
    return array


def _share_version_if_view(output: Tensor, out: Any, inputs: tuple, raw: tuple,
                           strided: bool = False) -> None:
    """If ``out`` is (a view of) an input's memory, the output shares that input's counter.
    (``strided``: a view of the first input's memory by construction, which CuPy's
    ``as_strided`` makes without ``.base``.)"""
    root = _root(out)
    for x, r in zip(inputs, raw):
        if isinstance(x, Tensor) and (strided or r is out or _root(r) is root):
            output._version_counter = x._version_counter
            output._base = x if x._base is None else x._base
            return


#: Where a saved array came from (the third item of its version entry), besides an input's
#: index: the output, or two different input Tensors on that one array (``x * Tensor(x)``;
#: ``x.data`` is x's own array too; ``detach()`` makes a new array object, told apart).
_OUTPUT, _AMBIGUOUS = -1, -2


def _saved_versions(saved: tuple, inputs: tuple, raw: tuple, output: Tensor) -> tuple:
    """For each saved array that is an input's or the output's: (its counter, its version,
    where it came from: the input's index, ``_OUTPUT``, or ``_AMBIGUOUS``). The version guards
    in-place writes; where it came from lets a ``create_graph`` pass give it back as a Tensor
    connected to the graph (:meth:`Node.saved_graph`)."""
    entries = []
    for s in saved:
        entry = None
        if s is output._data:
            entry = (output._version_counter, output._version_counter[0], _OUTPUT)
        elif s is not None:
            for i, (x, r) in enumerate(zip(inputs, raw)):
                if r is s and isinstance(x, Tensor):
                    if entry is None:
                        entry = (x._version_counter, x._version_counter[0], i)
                    elif x is not inputs[entry[2]]:
                        entry = (*entry[:2], _AMBIGUOUS)
        entries.append(entry)
    return tuple(entries)


def once_differentiable(backward: Callable) -> Callable:
    """PyTorch's decorator for a ctx-style ``backward`` that is not itself differentiable.

    The backward runs under ``no_grad``. In a ``create_graph=True`` pass whose incoming
    gradient requires grad, its results are returned through a node that raises PyTorch's
    RuntimeError if a later backward reaches it ("trying to differentiate twice ..."):
    never a silently wrong higher derivative. Elsewhere it changes nothing."""
    @functools.wraps(backward)
    def wrapped(ctx: Context, *grads: Any) -> Any:
        with no_grad():
            results = backward(ctx, *grads)
        if not is_grad_enabled() or not any(isinstance(g, Tensor) and g.requires_grad
                                            for g in grads):
            return results
        single = not isinstance(results, tuple)
        results = tuple(None if r is None else
                        _DelayedError.apply(Tensor(r).detach().requires_grad_(True))
                        for r in ((results,) if single else results))
        return results[0] if single else results

    return wrapped


class _DelayedError(Function):
    """The result of a ``@once_differentiable`` backward in a ``create_graph`` pass: a copy
    whose own backward raises (PyTorch's ``DelayedError``)."""

    @staticmethod
    def forward(a):
        return a.copy()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")

    @staticmethod
    def backward_graph(ctx, g, saved):
        _DelayedError.backward(ctx, g)


def on_one_device(name: str, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """``inputs`` with CPU 0-d tensors moved to the GPU when the others are there (PyTorch
    treats them as numbers: ``x_cuda * torch.tensor(2.0)``); the move is differentiable.
    Any other mix of devices raises, naming the op and the two inputs."""
    devices = {x.device for x in inputs if isinstance(x, Tensor)}
    if devices == {"cpu", "cuda"} and all(x.ndim == 0 for x in inputs
                                          if isinstance(x, Tensor) and x.device == "cpu"):
        return tuple(x.to("cuda") if isinstance(x, Tensor) and x.device == "cpu" else x
                     for x in inputs)
    _check_same_device(name, inputs)
    return inputs


def _check_same_device(name: str, inputs: tuple[Any, ...]) -> None:
    first = None
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            if first is None:
                first = (i, x.device)
            elif x.device != first[1]:
                raise RuntimeError(
                    f"{name}: expected all tensors on one device, but input {first[0]} "
                    f"is on {first[1]} and input {i} is on {x.device}; move one with .to()"
                )
