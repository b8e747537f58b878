"""``Tensor``: an array on a device, plus what autograd needs.

A Tensor wraps one array of its device's module (``numpy`` on ``"cpu"``,
``cupy`` on ``"cuda"``) and adds:

* ``requires_grad`` and, after ``backward()``, ``grad`` (itself a Tensor);
* ``grad_fn``: the graph node of the op that made it (None for leaves).

Every op is a :class:`~tinytrain.autograd.Function`; the methods here only
check their arguments and call ``Function.apply``.

Differences from PyTorch, on purpose: ``.data`` is the raw array (as in
micrograd and DeZero), and ``view`` is an alias of ``reshape``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.autograd import engine
from tinytrain.autograd import ops as O
from tinytrain.autograd.function import AccumulateGrad, Function, Node
from tinytrain.autograd.grad_mode import no_grad
from tinytrain.random import default_generator

float16, float32, float64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")
int32, int64, uint8, bool_ = np.dtype("int32"), np.dtype("int64"), np.dtype("uint8"), np.dtype(bool)


class RemovableHandle:
    """Returned by ``register_*_hook``; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict[int, Any]) -> None:
        self._hooks = hooks
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)


class Tensor:
    """An n-dimensional array on ``"cpu"`` or ``"cuda"`` that can record gradients."""

    __array_priority__ = 1000  # make ``ndarray + Tensor`` call Tensor.__radd__

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        if isinstance(data, Tensor):
            data = data.data
        if not (hasattr(data, "__array_interface__")
                or hasattr(data, "__cuda_array_interface__")):
            data = np.asarray(data, dtype=_default_dtype(data))  # lists: float32 / int64
        elif isinstance(data, np.generic):
            data = np.asarray(data)
        self.data = data
        self.grad: Tensor | None = None
        self.grad_fn: Node | None = None
        self._acc_node: AccumulateGrad | None = None
        self._post_accumulate_grad_hooks: dict[int, Callable[[Tensor], None]] = {}
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    # ------------------------------------------------------------ properties

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def device(self) -> str:
        return backend.device_of(self.data)

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def dim(self) -> int:
        return self.data.ndim

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return int(self.data.size)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def T(self) -> Tensor:  # noqa: N802
        return self.permute(*reversed(range(self.ndim)))

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = "" if self.device == "cpu" else f", device='{self.device}'"
        if self.dtype not in (float32, int64, bool_):
            extra += f", dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __hash__ = object.__hash__

    # ------------------------------------------------------------ conversion

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (copied from the GPU for ``"cuda"``)."""
        return self.data if self.device == "cpu" else self.data.get()

    def item(self) -> float | int | bool:
        if self.data.size != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return self.data.reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def to(self, device: str | None = None, dtype: Any = None) -> Tensor:
        """A copy on another device and/or with another dtype (self if nothing changes).

        ``to(dtype)`` with a dtype as the only argument works too. The result is
        differentiable: gradients flow back to the original device and dtype.
        """
        if device is not None and not backend.is_device(device):
            device, dtype = None, device
        device = backend.normalize_device(device) if device is not None else self.device
        dtype = np.dtype(dtype) if dtype is not None else self.dtype
        if device == self.device and dtype == self.dtype:
            return self
        return _To.apply(self, device, dtype)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self) -> Tensor:
        return self.to("cuda")

    def float(self) -> Tensor:
        return self.to(dtype=float32)

    def double(self) -> Tensor:
        return self.to(dtype=float64)

    def long(self) -> Tensor:
        return self.to(dtype=int64)

    # ------------------------------------------------------------ autograd

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Mark a leaf as needing ``.grad`` (in place; returns self)."""
        if not self.is_leaf:
            raise RuntimeError("requires_grad_ can only change leaf tensors; use detach() first")
        if requires_grad and self.dtype.kind != "f":
            raise TypeError(f"only floating-point tensors can require grad, not {self.dtype}")
        self.requires_grad = requires_grad
        return self

    def detach(self) -> Tensor:
        """The same array, cut from the graph (shares memory, like PyTorch)."""
        return Tensor(self.data)

    def _grad_node(self) -> Node:
        """The node gradients flow into: ``grad_fn``, or the leaf's AccumulateGrad."""
        if self.grad_fn is not None:
            return self.grad_fn
        if self._acc_node is None:
            self._acc_node = AccumulateGrad(self)
        return self._acc_node

    def backward(self, gradient: Tensor | None = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``gradient`` is required unless self has one element. Without
        ``retain_graph`` the graph's saved arrays are freed as it runs, and a
        second backward through it raises.
        """
        if not self.requires_grad:
            raise RuntimeError(
                "backward() on a tensor that does not require grad: nothing in its graph "
                "has requires_grad=True (or it was computed under no_grad)"
            )
        if gradient is None:
            if self.data.size != 1:
                raise RuntimeError(
                    f"backward() without a gradient works only on a scalar, but this tensor has "
                    f"shape {self.shape}; call .sum() first or pass gradient= of that shape"
                )
            grad = backend.get_array_module(self.data).ones_like(self.data)
        else:
            grad = gradient.data if isinstance(gradient, Tensor) else gradient
            if tuple(grad.shape) != self.shape:
                raise ValueError(
                    f"backward(): gradient has shape {tuple(grad.shape)} but the tensor has "
                    f"shape {self.shape}"
                )
        engine.run_backward(self._grad_node(), grad, retain_graph=retain_graph)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Call ``hook(self)`` each time a gradient has been added into ``self.grad``."""
        if not self.is_leaf:
            raise RuntimeError("post-accumulate-grad hooks can only be registered on leaves")
        handle = RemovableHandle(self._post_accumulate_grad_hooks)
        self._post_accumulate_grad_hooks[handle.id] = hook
        return handle

    # ------------------------------------------------------------ arithmetic

    def _binary(self, op: type, other: Any, name: str, reverse: bool = False) -> Tensor:
        other = self._coerce(other, name)
        a, b = (other, self) if reverse else (self, other)
        O.broadcast_shapes(name, a.shape, b.shape)
        return op.apply(a, b)

    def _coerce(self, other: Any, name: str) -> Tensor:
        """Python numbers take self's dtype; tensors must share dtype and device."""
        if isinstance(other, Tensor):
            if other.dtype != self.dtype:
                raise TypeError(
                    f"{name}: dtypes differ ({self.dtype} and {other.dtype}); convert one "
                    f"with .to(dtype) first"
                )
            if other.device != self.device:
                raise RuntimeError(
                    f"{name}: tensors are on different devices ({self.device} and "
                    f"{other.device}); move one with .to(device) first"
                )
            return other
        xp = backend.get_array_module(self.data)
        arr = xp.asarray(other)
        if arr.dtype.kind in "biuf" and self.dtype.kind == "f":
            arr = arr.astype(self.dtype)
        elif isinstance(other, int) and self.dtype.kind in "iu":  # int32 + 1 stays int32
            arr = arr.astype(self.dtype)
        elif arr.dtype != self.dtype:
            raise TypeError(f"{name}: cannot combine a {self.dtype} tensor with {arr.dtype}")
        return Tensor(arr)

    def __add__(self, o: Any) -> Tensor:
        return self._binary(O.Add, o, "add")

    def __radd__(self, o: Any) -> Tensor:
        return self._binary(O.Add, o, "add", reverse=True)

    def __sub__(self, o: Any) -> Tensor:
        return self._binary(O.Sub, o, "sub")

    def __rsub__(self, o: Any) -> Tensor:
        return self._binary(O.Sub, o, "sub", reverse=True)

    def __mul__(self, o: Any) -> Tensor:
        return self._binary(O.Mul, o, "mul")

    def __rmul__(self, o: Any) -> Tensor:
        return self._binary(O.Mul, o, "mul", reverse=True)

    def __truediv__(self, o: Any) -> Tensor:
        return self._binary(O.Div, o, "div")

    def __rtruediv__(self, o: Any) -> Tensor:
        return self._binary(O.Div, o, "div", reverse=True)

    def __neg__(self) -> Tensor:
        return O.Neg.apply(self)

    def __pow__(self, p: float) -> Tensor:
        if isinstance(p, Tensor):
            return (p * self.log()).exp()
        return O.Pow.apply(self, p)

    def __rpow__(self, base: float) -> Tensor:
        return (self * float(np.log(base))).exp()

    def __matmul__(self, other: Tensor) -> Tensor:
        other = self._coerce(other, "matmul")
        _check_matmul(self.shape, other.shape)
        return O.MatMul.apply(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        other = self._coerce(other, "matmul")
        return other @ self

    def matmul(self, other: Tensor) -> Tensor:
        return self @ other

    # comparisons give boolean tensors, never part of the graph
    def _compare(self, other: Any, fn: Callable) -> Tensor:
        o = other.data if isinstance(other, Tensor) else other
        return Tensor(fn(self.data, o))

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(o, lambda a, b: a == b)

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(o, lambda a, b: a != b)

    def __lt__(self, o: Any) -> Tensor:
        return self._compare(o, lambda a, b: a < b)

    def __le__(self, o: Any) -> Tensor:
        return self._compare(o, lambda a, b: a <= b)

    def __gt__(self, o: Any) -> Tensor:
        return self._compare(o, lambda a, b: a > b)

    def __ge__(self, o: Any) -> Tensor:
        return self._compare(o, lambda a, b: a >= b)

    # ------------------------------------------------------------ unary

    def exp(self) -> Tensor:
        return O.Exp.apply(self)

    def log(self) -> Tensor:
        return O.Log.apply(self)

    def sqrt(self) -> Tensor:
        return O.Sqrt.apply(self)

    def relu(self) -> Tensor:
        return O.ReLU.apply(self)

    def sigmoid(self) -> Tensor:
        return O.Sigmoid.apply(self)

    def tanh(self) -> Tensor:
        return O.Tanh.apply(self)

    def log_softmax(self, dim: int = -1) -> Tensor:
        (axis,) = O._normalize_axis(dim, self.ndim)
        return O.LogSoftmax.apply(self, axis)

    # ------------------------------------------------------------ reductions

    def sum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return O.Sum.apply(self, O._normalize_axis(dim, self.ndim), keepdim)

    def mean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return O.Mean.apply(self, O._normalize_axis(dim, self.ndim), keepdim)

    def max(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """Maximum values (not PyTorch's (values, indices) pair; see :meth:`argmax`)."""
        if self.data.size == 0:
            raise ValueError("max() of an empty tensor")
        return O.Max.apply(self, O._normalize_axis(dim, self.ndim), keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        out = self.data.argmax(axis=dim)
        if keepdim and dim is not None:
            out = backend.get_array_module(out).expand_dims(out, dim)
        return Tensor(out.astype(int64, copy=False))

    # ------------------------------------------------------------ shapes

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        shape = _shape_arg(shape)
        known = int(np.prod([s for s in shape if s >= 0]))  # NumPy's rule: one negative size
        unknown = sum(s < 0 for s in shape)                 # is inferred from the rest
        if unknown > 1 or (
                self.numel() != known if unknown == 0 else known == 0 or self.numel() % known):
            raise ValueError(
                f"reshape: cannot reshape a tensor of shape {self.shape} ({self.numel()} "
                f"elements) into {tuple(shape)}"
            )
        return O.Reshape.apply(self, tuple(shape))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = start_dim % self.ndim, end_dim % self.ndim
        new = self.shape[:s] + (int(np.prod(self.shape[s:e + 1])),) + self.shape[e + 1:]
        return self.reshape(new)

    def permute(self, *dims: int | Sequence[int]) -> Tensor:
        dims = tuple(d % self.ndim for d in _shape_arg(dims))
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"permute: {dims} is not a permutation of the {self.ndim} dims")
        return O.Permute.apply(self, dims)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        dims = list(range(self.ndim))
        dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
        return self.permute(dims)

    def __getitem__(self, index: Any) -> Tensor:
        return O.Index.apply(self, _raw_index(index))


class _To(Function):
    """Move to another device and/or dtype; backward moves the gradient back."""

    @staticmethod
    def forward(a, device, dtype):
        return backend.to_device(a, device).astype(dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.device, ctx.dtype = backend.device_of(inputs[0]), inputs[0].dtype

    @staticmethod
    def backward(ctx, g):
        return backend.to_device(g, ctx.device).astype(ctx.dtype, copy=False), None, None


def _check_matmul(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    if not sa or not sb:
        raise ValueError(f"matmul: both operands need at least 1 dimension, got {sa} and {sb}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {sa} and {sb} are not aligned: the first has {ka} columns but "
            f"the second has {kb} rows"
        )
    if len(sa) > 2 and len(sb) > 2:
        try:
            O.broadcast_shapes("matmul", sa[:-2], sb[:-2])
        except ValueError:
            raise ValueError(
                f"matmul: shapes {sa} and {sb} have batch dimensions {sa[:-2]} and {sb[:-2]} "
                f"that cannot be broadcast together"
            ) from None


def _shape_arg(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], Sequence | np.ndarray):
        return tuple(int(s) for s in shape[0])
    return tuple(int(s) for s in shape)


def _raw_index(index: Any) -> Any:
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    return index


# ------------------------------------------------------------------ creation


def _default_dtype(data: Any) -> np.dtype:
    arr = np.asarray(data) if not hasattr(data, "dtype") else data
    if isinstance(data, np.ndarray | np.generic) or hasattr(data, "__cuda_array_interface__"):
        return arr.dtype
    # Python lists and scalars: floats become float32 and ints int64, as in PyTorch
    return float32 if arr.dtype.kind == "f" else int64 if arr.dtype.kind in "iu" else arr.dtype


def tensor(data: Any, dtype: Any = None, device: str = "cpu",
           requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (a list, number, NumPy or CuPy array).

    NumPy arrays keep their dtype; Python floats become float32 and ints int64.
    """
    if isinstance(data, Tensor):
        data = data.data
    dtype = np.dtype(dtype) if dtype is not None else _default_dtype(data)
    xp = backend.array_module(device)
    arr = xp.array(backend.to_device(data, device) if hasattr(data, "dtype") else data,
                   dtype=dtype, copy=True)
    return Tensor(arr, requires_grad=requires_grad)


def _full(shape: tuple, fill: float, dtype: Any, device: str, requires_grad: bool) -> Tensor:
    xp = backend.array_module(device)
    return Tensor(xp.full(_shape_arg(shape), fill, dtype=np.dtype(dtype)),
                  requires_grad=requires_grad)


def zeros(*shape: int, dtype: Any = float32, device: str = "cpu",
          requires_grad: bool = False) -> Tensor:
    return _full(shape, 0, dtype, device, requires_grad)


def ones(*shape: int, dtype: Any = float32, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    return _full(shape, 1, dtype, device, requires_grad)


def full(shape: Sequence[int], fill_value: float, dtype: Any = float32, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    return _full((shape,), fill_value, dtype, device, requires_grad)


def zeros_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    return zeros(t.shape, dtype=t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    return ones(t.shape, dtype=t.dtype, device=t.device, requires_grad=requires_grad)


def randn(*shape: int, dtype: Any = float32, device: str = "cpu",
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples from the package generator (same on every device)."""
    arr = default_generator().standard_normal(_shape_arg(shape)).astype(dtype)
    return Tensor(backend.to_device(arr, backend.normalize_device(device)),
                  requires_grad=requires_grad)


def rand(*shape: int, dtype: Any = float32, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) from the package generator."""
    arr = default_generator().random(_shape_arg(shape)).astype(dtype)
    return Tensor(backend.to_device(arr, backend.normalize_device(device)),
                  requires_grad=requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None,
           device: str = "cpu") -> Tensor:
    if end is None:
        start, end = 0, start
    xp = backend.array_module(device)
    arr = xp.arange(start, end, step)
    if dtype is None:
        dtype = int64 if arr.dtype.kind in "iu" else float32
    return Tensor(arr.astype(dtype))


__all__ = [
    "Tensor", "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "rand",
    "arange", "no_grad", "float16", "float32", "float64", "int32", "int64", "uint8", "bool_",
]
