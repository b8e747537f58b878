"""Module-level forms of Tensor methods: ``tt.max(x, 1)`` as ``torch.max(x, 1)``.

Each takes the tensor first and calls the method; an array (e.g. ``outputs.data``,
which is the raw array in tinytrain) is wrapped as a Tensor first, so
``torch.max(outputs.data, 1)`` from PyTorch's tutorials works too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinytrain.autograd import ops as O
from tinytrain.dtypes import result_type
from tinytrain.tensor import Tensor


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def max(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002
    """``max(x)``: the largest value; ``max(x, dim)``: ``(values, indices)``;
    ``max(x, y)``: element-wise maximum (see :meth:`Tensor.max`)."""
    return _t(input).max(dim, keepdim)


def min(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002
    return _t(input).min(dim, keepdim)


def argmax(input: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _t(input).argmax(dim, keepdim)


def argmin(input: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _t(input).argmin(dim, keepdim)


def amax(input: Any, dim: Any = (), keepdim: bool = False) -> Tensor:  # noqa: A002
    return _t(input).amax(dim, keepdim)


def amin(input: Any, dim: Any = (), keepdim: bool = False) -> Tensor:  # noqa: A002
    return _t(input).amin(dim, keepdim)


def maximum(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input).maximum(other)


def minimum(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input).minimum(other)


def sum(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    return _t(input).sum(dim, keepdim)


def mean(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _t(input).mean(dim, keepdim)


def clamp(input: Any, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    return _t(input).clamp(min, max)


clip = clamp


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002
    """Merge dims ``start_dim..end_dim`` into one (``torch.flatten(x, 1)``: ``[N, C*H*W]``)."""
    return _t(input).flatten(start_dim, end_dim)


def reshape(input: Any, shape: Sequence[int]) -> Tensor:  # noqa: A002
    return _t(input).reshape(shape)


def squeeze(input: Any, dim: Any = None) -> Tensor:  # noqa: A002
    return _t(input).squeeze(dim)


def unsqueeze(input: Any, dim: int) -> Tensor:  # noqa: A002
    return _t(input).unsqueeze(dim)


def permute(input: Any, dims: Sequence[int]) -> Tensor:  # noqa: A002
    return _t(input).permute(dims)


def transpose(input: Any, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    return _t(input).transpose(dim0, dim1)


def matmul(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input) @ other


def add(input: Any, other: Any, alpha: float = 1) -> Tensor:  # noqa: A002
    return _t(input).add(other, alpha)


def sub(input: Any, other: Any, alpha: float = 1) -> Tensor:  # noqa: A002
    return _t(input).sub(other, alpha)


def mul(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input) * other


def div(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input) / other


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001, A002
    return _t(input) ** exponent


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along an existing ``dim`` (other dims must match); dtypes promote."""
    tensors = [_t(t) for t in tensors]
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    (axis,) = O._normalize_axis(dim, tensors[0].ndim)
    for i, t in enumerate(tensors):
        if t.ndim != tensors[0].ndim or any(
                a != b for d, (a, b) in enumerate(zip(t.shape, tensors[0].shape)) if d != axis):
            raise ValueError(
                f"cat: sizes must match except in dimension {axis}: tensor 0 has shape "
                f"{tensors[0].shape}, tensor {i} has shape {t.shape}"
            )
    dtype = result_type(*tensors)
    return O.Cat.apply(axis, *(t._cast(dtype) for t in tensors))


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join same-shape tensors along a new ``dim``: N of ``[*s]`` -> ``[N, *s]`` for dim 0."""
    tensors = [_t(t) for t in tensors]
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise ValueError(f"stack: expects each tensor to be equal size, but got "
                             f"{tensors[0].shape} at entry 0 and {t.shape} at entry {i}")
    return cat([t.unsqueeze(dim) for t in tensors], dim)


def _unary(name: str):
    def fn(input: Any) -> Tensor:  # noqa: A002
        return getattr(_t(input), name)()

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``tt.{name}(x)`` is ``x.{name}()``."
    return fn


exp, log, sqrt, abs, relu, sigmoid, tanh = (  # noqa: A001
    _unary(n) for n in ("exp", "log", "sqrt", "abs", "relu", "sigmoid", "tanh"))


def softmax(input: Any, dim: int) -> Tensor:  # noqa: A002
    return _t(input).softmax(dim)


def log_softmax(input: Any, dim: int) -> Tensor:  # noqa: A002
    return _t(input).log_softmax(dim)


def _compare(name: str):
    def fn(input: Any, other: Any) -> Tensor:  # noqa: A002
        return getattr(_t(input), name)(other)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``tt.{name}(x, y)`` is ``x.{name}(y)``: a bool tensor."
    return fn


eq, ne, lt, le, gt, ge = (_compare(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


def equal(input: Any, other: Any) -> bool:  # noqa: A002
    return _t(input).equal(_t(other))


__all__ = [
    "abs", "add", "amax", "amin", "argmax", "argmin", "cat", "clamp", "clip", "div", "eq",
    "equal", "exp", "flatten", "ge", "gt", "le", "log", "log_softmax", "lt", "matmul", "max",
    "maximum", "mean", "min", "minimum", "mul", "ne", "permute", "pow", "relu", "reshape",
    "sigmoid", "softmax", "sqrt", "squeeze", "stack", "sub", "sum", "tanh", "transpose",
    "unsqueeze",
]
