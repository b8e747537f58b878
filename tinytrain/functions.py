"""Module-level forms of Tensor methods: ``tt.max(x, 1)`` as ``torch.max(x, 1)``.

Each takes the tensor first and calls the method; a NumPy/CuPy array is wrapped as a
Tensor first, so ``tt.max(x.numpy(), 1)`` works too (``torch.max(outputs.data, 1)`` from
PyTorch's tutorials passes a Tensor: ``.data`` is one, as in PyTorch).
"""

from __future__ import annotations

import builtins
import string
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinytrain import _numpy_names, backend, return_types
from tinytrain.autograd import is_grad_enabled, no_grad
from tinytrain.autograd import ops as O
from tinytrain.dtypes import DTypeError, can_cast, result_type, torch_scalar_name
from tinytrain.tensor import Tensor, _linspace_halves, where


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _first(x: Any, other: Any) -> Tensor:
    """The first operand of a binary function as a Tensor. A Python number before a Tensor
    that has no reflected operator to take it (``tt.remainder(300, t)``, ``tt.sub(2, t,
    alpha=2)``) becomes a tensor of the dtype it would make with ``other``, as PyTorch's
    wrapped numbers do: it does not promote a 0-d ``t`` (int16 stays int16), and wraps as
    ``300 // t`` does (300 is 44 in uint8)."""
    if not _number_first(x, other):
        return _t(x)
    return Tensor(np.asarray(x).astype(result_type(other, x)))


def _number_first(x: Any, other: Any) -> bool:
    """``tt.add(2, t)``: a Python number before a Tensor. It then takes part as the number
    it is (the Tensor's reflected operator, ``t.__radd__(2)``), so that it does not promote
    the tensor (``tt.mul(2, int8)`` is int8) and is not cast first (``tt.div(-1, uint8)``
    is -1 / x), as PyTorch."""
    return isinstance(other, Tensor) and isinstance(x, int | float | bool)


def _out(result: Tensor, out: Tensor | None, name: str, exact: bool = False) -> Tensor:
    """PyTorch's ``out=`` argument: write ``result`` into ``out`` (resized if need be).

    As PyTorch, ``out``'s dtype may not lose the result's kind (a float result into an
    integer ``out``, anything but bool into a bool one): a DTypeError, not a silent
    truncation. With ``exact`` (matmul, the arg- and min/max reductions, any/all, and sum,
    which sums in out's dtype) it must be the result's dtype. An ``out`` of another shape is
    resized, with PyTorch's warning when it was not empty."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError("functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    have, want = np.dtype(result.dtype), np.dtype(out.dtype)
    if (have != want) if exact else not can_cast(have, want):
        rule = "must have the result's dtype" if exact else "cannot hold it"
        raise DTypeError(f"{name}(out=...): the result is {have}, and an out tensor of dtype "
                        f"{want} {rule}")
    if out.shape != result.shape:  # resized, in its own memory when that is large enough
        if out.numel():  # (PyTorch's warning: resizing a non-empty out is deprecated there)
            warnings.warn(f"An output with one or more elements was resized since it had "
                          f"shape {list(out.shape)}, which does not match the required output "
                          f"shape {list(result.shape)}.", UserWarning, stacklevel=3)
        flat = out._data.reshape(-1) if out.is_contiguous() else None
        if flat is not None and flat.size >= result.numel():
            out.data = flat[: result.numel()].reshape(result.shape)  # (a view of the same memory)
        else:
            out.data = result._data.astype(out.dtype)  # a new array of the new shape
            return out
    with no_grad():
        out.copy_(result)
    return out


def max(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002
    """``max(x)``: the largest value; ``max(x, dim)``: ``(values, indices)``;
    ``max(x, y)``: element-wise maximum (see :meth:`Tensor.max`)."""
    return _t(input).max(dim, keepdim)


def min(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002
    return _t(input).min(dim, keepdim)


def argmax(input: Any, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
           out: Tensor | None = None) -> Tensor:
    return _out(_t(input).argmax(dim, keepdim), out, "argmax", exact=True)


def argmin(input: Any, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
           out: Tensor | None = None) -> Tensor:
    return _out(_t(input).argmin(dim, keepdim), out, "argmin", exact=True)


def amax(input: Any, dim: Any = (), keepdim: bool = False, *,  # noqa: A002
         out: Tensor | None = None) -> Tensor:
    return _out(_t(input).amax(dim, keepdim), out, "amax", exact=True)


def amin(input: Any, dim: Any = (), keepdim: bool = False, *,  # noqa: A002
         out: Tensor | None = None) -> Tensor:
    return _out(_t(input).amin(dim, keepdim), out, "amin", exact=True)


def maximum(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input).maximum(other)


def minimum(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input).minimum(other)


def sum(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A001, A002
        dtype: Any = None, out: Tensor | None = None) -> Tensor:
    if out is not None and dtype is None and isinstance(out, Tensor):
        dtype = out.dtype  # (PyTorch sums in out's dtype; with dtype= they must agree)
    return _out(_t(input).sum(dim, keepdim, dtype=dtype), out, "sum", exact=out is not None)


def mean(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
         dtype: Any = None, out: Tensor | None = None) -> Tensor:
    return _out(_t(input).mean(dim, keepdim, dtype=dtype), out, "mean")


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


def matmul(input: Any, other: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    return _out(_t(input) @ other, out, "matmul", exact=True)


def mm(input: Any, mat2: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """Matrix product of two 2-D tensors ``[n, k] @ [k, m]``."""
    if _t(input).ndim != 2 or _t(mat2).ndim != 2:
        raise O.ShapeError(f"mm: both arguments must be 2-D, got shapes {_t(input).shape} and "
                           f"{_t(mat2).shape}")
    return matmul(input, mat2, out=out)


def mv(input: Any, vec: Tensor) -> Tensor:  # noqa: A002
    """Matrix times vector: ``[n, m]`` and ``[m]`` -> ``[n]`` (see :meth:`Tensor.mv`)."""
    return _t(input).mv(vec)


def bmm(input: Any, mat2: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """Batched matrix product of two 3-D tensors ``[b, n, k] @ [b, k, m]``."""
    return _out(_t(input).bmm(_t(mat2)), out, "bmm", exact=True)


def add(input: Any, other: Any, alpha: float = 1, *,  # noqa: A002
        out: Tensor | None = None) -> Tensor:
    if alpha == 1 and _number_first(input, other):
        return _out(other.__radd__(input), out, "add")
    return _out(_first(input, other).add(other, alpha), out, "add")


def sub(input: Any, other: Any, alpha: float = 1, *,  # noqa: A002
        out: Tensor | None = None) -> Tensor:
    if _number_first(input, other):
        other._refuse_bool(input, "Subtraction")  # (True - t is refused; so with alpha)
        if alpha == 1:
            return _out(other.__rsub__(input), out, "sub")
    return _out(_first(input, other).sub(other, alpha), out, "sub")


def mul(input: Any, other: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    if _number_first(input, other):
        return _out(other.__rmul__(input), out, "mul")
    return _out(_t(input) * other, out, "mul")


def div(input: Any, other: Any, *, rounding_mode: str | None = None,  # noqa: A002
        out: Tensor | None = None) -> Tensor:
    """``input / other`` (true division), or rounded: ``rounding_mode="trunc"`` / ``"floor"``."""
    if rounding_mode is None and _number_first(input, other):
        return _out(other.__rtruediv__(input), out, "div")
    return _out(_first(input, other).div(other, rounding_mode=rounding_mode), out, "div")


def true_divide(input: Any, other: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input / other``, as :func:`div` without a rounding mode."""
    return div(input, other, out=out)


def floor_divide(input: Any, other: Any) -> Tensor:  # noqa: A002
    return other.__rfloordiv__(input) if _number_first(input, other) else _t(input) // other


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001, A002
    return exponent.__rpow__(input) if _number_first(input, exponent) else _t(input) ** exponent


def cat(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor:
    """Join tensors along an existing ``dim`` (other dims must match); dtypes promote.
    As in PyTorch, empty 1-d tensors (``tt.tensor([])``, an accumulator's start) are
    skipped next to tensors of more dimensions."""
    tensors = _tensor_seq("cat", tensors)
    dtype = result_type(*tensors)
    if builtins.any(t.ndim > 1 for t in tensors):
        tensors = [t for t in tensors if t.shape != (0,)]
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise O.ShapeError(f"cat: zero-dimensional tensor (at position {i}) cannot be "
                               f"concatenated; stack() makes a new dimension")
    (axis,) = O._normalize_axis(dim, tensors[0].ndim)
    for i, t in enumerate(tensors):
        if t.ndim != tensors[0].ndim or builtins.any(
                a != b for d, (a, b) in enumerate(zip(t.shape, tensors[0].shape)) if d != axis):
            raise O.ShapeError(
                f"cat: sizes must match except in dimension {axis}: tensor 0 has shape "
                f"{tensors[0].shape}, tensor {i} has shape {t.shape}"
            )
    return _out(O.Cat.apply(axis, *(t._cast(dtype) for t in tensors)), out, "cat")


concat = concatenate = cat


def _tensor_seq(name: str, tensors: Any) -> list[Tensor]:
    if isinstance(tensors, Tensor):  # (iterating it would join its rows)
        raise TypeError(f"{name}(): argument 'tensors' must be a tuple or list of Tensors, not "
                        f"a Tensor (write {name}([x, y]), not {name}(x))")
    tensors = [_t(t) for t in tensors]
    if not tensors:
        raise O.InvalidArgument(f"{name}: expected a non-empty sequence of tensors")
    return tensors


def stack(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor:
    """Join same-shape tensors along a new ``dim``: N of ``[*s]`` -> ``[N, *s]`` for dim 0."""
    tensors = _tensor_seq("stack", tensors)
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise O.ShapeError(f"stack: expects each tensor to be equal size, but got "
                             f"{tensors[0].shape} at entry 0 and {t.shape} at entry {i}")
    return cat([t.unsqueeze(dim) for t in tensors], dim, out=out)


def _unary(name: str):
    def fn(input: Any) -> Tensor:  # noqa: A002
        return getattr(_t(input), name)()

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``tt.{name}(x)`` is ``x.{name}()``."
    return fn


exp, log, sqrt, abs, relu, sigmoid, tanh = (  # noqa: A001
    _unary(n) for n in ("exp", "log", "sqrt", "abs", "relu", "sigmoid", "tanh"))
sin, cos, square, floor, ceil, trunc, sign, logical_not = (
    _unary(n) for n in ("sin", "cos", "square", "floor", "ceil", "trunc", "sign", "logical_not"))


def _method(name: str):
    def fn(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        other = args[0] if args else kwargs.get("other")
        return getattr(_first(input, other), name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``tt.{name}(x, ...)`` is ``x.{name}(...)``."
    return fn


(isnan, isinf, isfinite, neg, negative, reciprocal, rsqrt, log1p, expm1, log2, log10, flip,
 ravel, narrow, select, movedim, moveaxis, swapaxes, swapdims, broadcast_to, tile,
 masked_select, logical_xor, count_nonzero, remainder, subtract, multiply,
 greater, greater_equal, less, less_equal, not_equal) = (_method(n) for n in (
    "isnan", "isinf", "isfinite", "neg", "negative", "reciprocal", "rsqrt", "log1p", "expm1",
    "log2", "log10", "flip", "ravel", "narrow", "select", "movedim", "moveaxis", "swapaxes",
    "swapdims", "broadcast_to", "tile", "masked_select", "logical_xor", "count_nonzero",
    "remainder", "subtract", "multiply", "greater", "greater_equal", "less",
    "less_equal", "not_equal"))


(prod, cumprod, nansum, nanmean, median, diff, roll, lerp, fmod, index_add, scatter_add, take,
 bernoulli, diagonal, diag_embed, diag) = (_method(n) for n in (
    "prod", "cumprod", "nansum", "nanmean", "median", "diff", "roll", "lerp", "fmod",
    "index_add", "scatter_add", "take", "bernoulli", "diagonal", "diag_embed", "diag"))


(scatter_reduce, index_reduce, index_put, fmax, fmin, nanmedian) = (_method(n) for n in (
    "scatter_reduce", "index_reduce", "index_put", "fmax", "fmin", "nanmedian"))


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation, as ``torch.einsum``: ``einsum("ij,jk->ik", a, b)`` is ``a @ b``,
    ``einsum("bij->bji", x)`` a transpose, ``einsum("ii", m)`` the trace (operands may also
    come as one list: ``einsum(eq, [a, b])``). Labels are letters; ``...`` stands for the
    dimensions not named (right-aligned, broadcast across operands); labels missing from
    the output are summed. Without ``->`` the output is ``...`` and then the labels used
    once, in alphabetical order. A label's size must agree across operands, or be 1
    (broadcast). The gradient: :class:`~tinytrain.autograd.ops.Einsum`."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    operands = [_t(x) for x in operands]
    labels, out = _einsum_labels(equation, [x.ndim for x in operands])
    if builtins.any(x.dtype != operands[0].dtype for x in operands):
        raise O.InvalidArgument(f"einsum(): operands must have one dtype, got "
                                f"{[str(x.dtype) for x in operands]} (equation {equation!r}); "
                                f"convert with .to(dtype) first")
    size: dict[str, int] = {}
    for i, (term, x) in enumerate(zip(labels, operands)):
        mine: dict[str, int] = {}
        for c, n in zip(term, x.shape):
            if mine.setdefault(c, n) != n:
                raise O.ShapeError(f"einsum(): subscript {c} is repeated for operand {i} but the "
                                   f"sizes don't match, {mine[c]} != {n} (equation {equation!r})")
            if size.get(c, 1) not in (1, n) and n != 1:
                raise O.ShapeError(f"einsum(): subscript {c} has size {n} for operand {i} which "
                                   f"does not broadcast with previously seen size {size[c]} "
                                   f"(equation {equation!r})")
            if size.get(c, 1) == 1:
                size[c] = n
    operands = [x if x.shape == tuple(size[c] for c in term) else  # size-1 labels broadcast
                x.expand(*(size[c] for c in term)) for term, x in zip(labels, operands)]
    return O.Einsum.apply(",".join(labels) + "->" + out, *operands)


def _einsum_labels(equation: str, ndims: list[int]) -> tuple[list[str], str]:
    """The labels of each operand and of the output of ``equation``, with ``...`` written
    out as letters the equation does not use; an InvalidArgument naming what is wrong."""
    def bad(what: str) -> O.InvalidArgument:
        return O.InvalidArgument(f"einsum(): {what} (equation {equation!r})")

    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the equation must be a string, got {type(equation).__name__}")
    lhs, arrow, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise bad(f"the equation has {len(terms)} operands, but {len(ndims)} were given")
    for term in [*terms, out]:
        if not builtins.all(c in string.ascii_letters for c in term.replace("...", "", 1)):
            raise bad(f"invalid subscripts {term!r}: letters a-z, A-Z and at most one '...'")
    named = [len(t.replace("...", "")) for t in terms]
    for i, (term, k, nd) in enumerate(zip(terms, named, ndims)):
        if nd != k and ("..." not in term or nd < k):
            raise bad(f"operand {i} has {nd} dimensions, but {term!r} names {k}")
    free = [c for c in string.ascii_letters if c not in equation]
    ellipsis = "".join(free[:builtins.max([nd - k for nd, k in zip(ndims, named)], default=0)])
    labels = [t.replace("...", ellipsis[len(ellipsis) - (nd - k):])
              for t, k, nd in zip(terms, named, ndims)]
    if not arrow:  # the labels used once, sorted, after the ellipsis's
        used = "".join(labels)
        return labels, ellipsis + "".join(sorted(c for c in set(used) - set(ellipsis)
                                                 if used.count(c) == 1))
    out = out.replace("...", ellipsis)
    for c in out:
        if out.count(c) > 1:
            raise bad(f"output subscript {c} appears more than once in the output")
        if not builtins.any(c in t for t in labels):
            raise bad(f"output subscript {c} does not appear in the equation for any input "
                      f"operand")
    return labels, out


def unflatten(input: Any, dim: int, sizes: Sequence[int]) -> Tensor:  # noqa: A002
    """``dim`` split into ``sizes``: ``[N, 12]`` with ``(3, 4)`` at dim 1 -> ``[N, 3, 4]``."""
    return _t(input).unflatten(dim, sizes)


def round(input: Any, decimals: int = 0) -> Tensor:  # noqa: A001, A002
    return _t(input).round(decimals)


def cumsum(input: Any, dim: int, *, dtype: Any = None,  # noqa: A002
           out: Tensor | None = None) -> Tensor:
    return _out(_t(input).cumsum(dim, dtype=dtype), out, "cumsum")


def std(input: Any, dim: Any = None, unbiased: bool | None = None,  # noqa: A002
        keepdim: bool = False, *, correction: float | None = None,
        out: Tensor | None = None) -> Tensor:
    return _out(_t(input).std(dim, unbiased, keepdim, correction=correction), out, "std")


def var(input: Any, dim: Any = None, unbiased: bool | None = None,  # noqa: A002
        keepdim: bool = False, *, correction: float | None = None,
        out: Tensor | None = None) -> Tensor:
    return _out(_t(input).var(dim, unbiased, keepdim, correction=correction), out, "var")


def logsumexp(input: Any, dim: Any, keepdim: bool = False, *,  # noqa: A002
              out: Tensor | None = None) -> Tensor:
    return _out(_t(input).logsumexp(dim, keepdim), out, "logsumexp")


def norm(input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False, *,  # noqa: A002
         out: Tensor | None = None) -> Tensor:
    return _out(_t(input).norm(p, dim, keepdim), out, "norm")


def sort(input: Any, dim: int = -1, descending: bool = False,  # noqa: A002
         stable: bool = False) -> Any:
    return _t(input).sort(dim, descending, stable)


def argsort(input: Any, dim: int = -1, descending: bool = False,  # noqa: A002
            stable: bool = False) -> Tensor:
    return _t(input).argsort(dim, descending, stable)


def topk(input: Any, k: int, dim: int = -1, largest: bool = True,  # noqa: A002
         sorted: bool = True) -> Any:  # noqa: A002
    return _t(input).topk(k, dim, largest, sorted)


def gather(input: Any, dim: int, index: Any) -> Tensor:  # noqa: A002
    return _t(input).gather(dim, index)


def index_select(input: Any, dim: int, index: Any) -> Tensor:  # noqa: A002
    return _t(input).index_select(dim, index)


def scatter(input: Any, dim: int, index: Any, src: Any = None,  # noqa: A002
            value: Any = None, *, reduce: str | None = None) -> Tensor:
    return _t(input).scatter(dim, index, src, value, reduce=reduce)


def masked_fill(input: Any, mask: Any, value: Any) -> Tensor:  # noqa: A002
    return _t(input).masked_fill(mask, value)


def chunk(input: Any, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    return _t(input).chunk(chunks, dim)


def split(tensor: Any, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    return _t(tensor).split(split_size_or_sections, dim)


def unbind(input: Any, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    return _t(input).unbind(dim)


def nonzero(input: Any, as_tuple: bool = False) -> Any:  # noqa: A002
    return _t(input).nonzero(as_tuple)


def histc(input: Any, bins: int = 100, min: float = 0, max: float = 0, *,  # noqa: A002
          out: Tensor | None = None) -> Tensor:
    """``[bins]`` counts of ``input``'s values in ``[min, max]`` (see :meth:`Tensor.histc`)."""
    return _out(_t(input).histc(bins, min, max), out, "histc", exact=True)


HistogramResult = return_types.histogram


def histogram(input: Tensor, bins: int | Tensor = 100, *,  # noqa: A002
              range: Sequence[float] | None = None,  # noqa: A002
              weight: Tensor | None = None, density: bool = False) -> HistogramResult:
    """A histogram of ``input``'s values, as ``torch.histogram``: ``(hist, bin_edges)``.

    ``bins`` is a count of equal-width bins (100 by default, as PyTorch's) over ``range``
    (default: the data's min and max; one value, or no data, widened by 0.5 each side) or a
    1-D tensor of increasing edges.
    Value ``v`` goes in bin ``i`` when ``edges[i] <= v < edges[i + 1]``, the last edge in the
    last bin; values outside the edges (and NaN) are not counted. ``weight`` (the input's
    shape) adds its values instead of ones; ``density`` divides by the total and the bin
    widths, so the histogram integrates to 1. ``hist [nbins]`` and ``bin_edges [nbins + 1]``
    have the input's dtype (floating point only); not differentiable.
    """
    x = _t(input)
    if x.dtype.kind != "f":
        raise NotImplementedError(f"histogram: floating point input only, got "
                                  f"{torch_scalar_name(x.dtype)} ({x.dtype}); convert with "
                                  f".float()")
    xp = backend.get_array_module(x._data)
    values = x._data.reshape(-1)
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram(): range= goes with a number of bins, not with a bins "
                            "tensor (the edges are given)")
        if bins.ndim != 1 or bins.dtype != x.dtype:
            raise O.InvalidArgument(f"histogram: a bins tensor must be 1-D of the input's dtype "
                                    f"{x.dtype}, got shape {bins.shape} and dtype {bins.dtype}")
        if bins.numel() < 2:
            raise O.InvalidArgument(f"histogram: bins must be > 0, but got {bins.numel() - 1} "
                                    f"(a bins tensor holds nbins + 1 edges)")
        edges = bins._data
        if bool((edges[1:] < edges[:-1]).any()):
            raise O.InvalidArgument("histogram: the bin edges must increase monotonically")
    else:
        if isinstance(bins, builtins.bool) or not isinstance(bins, int | np.integer):
            raise TypeError(f"histogram(): argument 'bins' must be int or Tensor, not "
                            f"{type(bins).__name__}")
        if bins < 1:
            raise O.InvalidArgument(f"torch.histogram(): bins must be > 0, but got {bins} for "
                                    f"dimension 0")
        if range is not None:
            lo, hi = (builtins.float(v) for v in range)
        elif values.size:
            lo, hi = builtins.float(values.min()), builtins.float(values.max())
        else:
            lo, hi = 0.0, 1.0
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise O.InvalidArgument(f"histogram: range [{lo:g}, {hi:g}] is not finite")
        if lo > hi:
            raise O.InvalidArgument(f"histogram: min should not exceed max, but got min {lo:g} "
                                    f"max {hi:g}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = _linspace_halves(lo, hi, int(bins) + 1, x.dtype, xp)
    nbins = edges.shape[0] - 1
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.shape != x.shape or weight.dtype != x.dtype:
            raise O.InvalidArgument(
                f"histogram: weight must be a tensor of the input's shape {x.shape} and dtype "
                f"{x.dtype}, got {getattr(weight, 'shape', type(weight).__name__)} and "
                f"{getattr(weight, 'dtype', '-')}")
    index = xp.searchsorted(edges, values, side="right") - 1
    index[values == edges[-1]] = nbins - 1  # (the last edge belongs to the last bin)
    inside = (index >= 0) & (index < nbins)
    counted = None if weight is None else weight._data.reshape(-1)[inside]
    hist = xp.bincount(index[inside], weights=counted, minlength=nbins).astype(x.dtype)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return HistogramResult(Tensor(hist), Tensor(xp.array(edges, copy=True)))


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0  # noqa: A002
             ) -> Tensor:
    """How often each value ``0 .. max(input)`` occurs in the non-negative integers
    ``input [N]``, as ``torch.bincount``: ``[max(max(input) + 1, minlength)]``, int64; with
    ``weights [N]`` the sum of their values instead of counts (float32 for float32 weights,
    else float64, as PyTorch). Not differentiable."""
    x = _t(input)
    if x.dtype.kind not in "iu":
        raise NotImplementedError(f"bincount: integer input only, got "
                                  f"{torch_scalar_name(x.dtype)} ({x.dtype})")
    if isinstance(minlength, builtins.bool) or not isinstance(minlength, int | np.integer):
        raise TypeError(f"bincount(): argument 'minlength' must be int, not "
                        f"{type(minlength).__name__}")
    if minlength < 0:
        raise O.InvalidArgument("minlength should be >= 0")
    if x.ndim != 1 or (x.numel() and int(x._data.min()) < 0):
        raise O.InvalidArgument("bincount only supports 1-d non-negative integral inputs.")
    xp = backend.get_array_module(x._data)
    if weights is None:
        return Tensor(xp.bincount(x._data, minlength=int(minlength)).astype(np.int64))
    w = _t(weights)
    if w.shape != x.shape:
        raise O.InvalidArgument("weights should be 1-d and have the same length as input")
    dtype = np.float32 if w.dtype == np.float32 else np.float64
    return Tensor(xp.bincount(x._data, weights=w._data.astype(np.float64),
                              minlength=int(minlength)).astype(dtype))


def unique(input: Any, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    return _t(input).unique(sorted, return_inverse, return_counts, dim)


def any(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A001, A002
        out: Tensor | None = None) -> Tensor:
    return _out(_t(input).any(dim, keepdim), out, "any", exact=True)


def all(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A001, A002
        out: Tensor | None = None) -> Tensor:
    return _out(_t(input).all(dim, keepdim), out, "all", exact=True)


def isclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    return _t(input).isclose(other, rtol, atol, equal_nan)


def allclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    return _t(input).allclose(other, rtol, atol, equal_nan)


def logical_and(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input).logical_and(other)


def logical_or(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _t(input).logical_or(other)


def dot(input: Any, tensor: Any) -> Tensor:  # noqa: A002
    """The inner product of two 1-D tensors of one size."""
    a, b = _t(input), _t(tensor)
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise O.ShapeError(f"dot: expected two 1-D tensors of the same size, got shapes "
                           f"{a.shape} and {b.shape}")
    return a @ b


def outer(input: Any, vec2: Any) -> Tensor:  # noqa: A002
    """``[n]`` and ``[m]`` -> ``[n, m]`` of all products."""
    return _t(input).outer(_t(vec2))


def tril(input: Any, diagonal: int = 0) -> Tensor:  # noqa: A002
    return _t(input).tril(diagonal)


def triu(input: Any, diagonal: int = 0) -> Tensor:  # noqa: A002
    return _t(input).triu(diagonal)


def clone(input: Any, *, memory_format: Any = None) -> Tensor:  # noqa: A002
    return _t(input).clone(memory_format=memory_format)


def numel(input: Any) -> int:  # noqa: A002
    return _t(input).numel()


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(input: Any) -> bool:  # noqa: A002
    return _t(input).is_floating_point()


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


# NumPy's axis= / keepdims= where PyTorch's functions take them (select, narrow and
# count_nonzero above pass them on to the Tensor methods, which take them too)
_numpy_names.accept(globals(), "max min argmax argmin amax amin sum mean std var logsumexp "
                    "any all cumsum softmax log_softmax squeeze unsqueeze unflatten cat "
                    "concat concatenate stack sort argsort topk gather index_select scatter "
                    "chunk unbind")  # (the _method()s pass axis= on to their Tensor methods)


__all__ = [
    "abs", "add", "all", "allclose", "amax", "amin", "any", "argmax", "argmin", "argsort",
    "bernoulli", "bmm", "broadcast_to", "cat", "ceil", "chunk", "clamp", "clip", "clone",
    "concat", "concatenate", "cos", "count_nonzero", "cumprod", "cumsum", "diag", "diag_embed",
    "diagonal", "diff", "div", "dot",
    "einsum", "eq", "equal", "exp", "expm1", "flatten", "flip", "floor", "floor_divide", "fmod",
    "gather", "ge", "greater", "greater_equal", "gt", "histc", "index_add", "index_select",
    "is_floating_point", "is_tensor", "isclose", "isfinite", "isinf", "isnan", "le", "lerp",
    "less", "less_equal", "log", "log10", "log1p", "log2", "log_softmax", "logical_and",
    "logical_not", "logical_or", "logical_xor", "logsumexp", "lt", "masked_fill",
    "masked_select", "matmul", "max", "maximum", "mean", "median", "min", "minimum", "mm",
    "moveaxis", "movedim", "mul", "multiply", "mv", "nanmean", "nansum", "narrow", "ne", "neg",
    "negative", "nonzero", "norm", "not_equal", "numel", "outer", "permute", "pow", "prod",
    "ravel", "reciprocal", "relu", "remainder", "reshape", "roll", "round", "rsqrt", "scatter",
    "scatter_add", "select", "sigmoid", "sign", "sin", "softmax", "sort", "split", "sqrt",
    "square", "squeeze", "stack", "std", "sub", "subtract", "sum", "swapaxes", "swapdims",
    "take", "tanh", "tile", "topk", "transpose", "tril", "triu", "true_divide", "trunc",
    "unbind", "unique", "unsqueeze", "var", "where",
]
__all__ += ["bincount", "histogram", "scatter_reduce", "index_reduce", "index_put", "fmax", "fmin",
            "nanmedian"]
