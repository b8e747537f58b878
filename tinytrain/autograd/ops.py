"""The differentiable ops, each a :class:`Function` on raw arrays.

Every op is written once against the array module ``xp`` of its input, so it
runs unchanged on NumPy (CPU) and CuPy (CUDA). Binary ops broadcast as NumPy
does; their backward sums the gradient back to each input's shape
(:func:`unbroadcast`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinytrain import kernels
from tinytrain.autograd import function as _function
from tinytrain.autograd.function import Function, _root
from tinytrain.backend import get_array_module, index_add, index_reduce

# --------------------------------------------------------------------- helpers


class InvalidArgument(RuntimeError, ValueError):
    """An argument that does not fit (a size, a mode, a value): a RuntimeError, as PyTorch
    raises, and a ValueError, as tinytrain always did, so ``except`` of either catches it."""


class ShapeError(InvalidArgument):
    """Operand shapes that do not go together."""


class IndexRangeError(IndexError, InvalidArgument):
    """An index or a class number out of range: an IndexError, and PyTorch's RuntimeError."""


def unbroadcast(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``grad`` down to ``shape``: the adjoint of NumPy broadcasting."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        i + extra for i, n in enumerate(shape) if n == 1 and grad.shape[i + extra] != 1
    )
    return grad.sum(axis=axes, keepdims=True).reshape(shape)


def broadcast_shapes(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``a`` and ``b``, or a ValueError that names both."""
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise ShapeError(
            f"{op}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast together "
            "(trailing dimensions must be equal or 1)"
        ) from None


def _normalize_axis(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (an int or a sequence) as non-negative axes of an ``ndim``-d tensor; None
    stays None. Out of range: an IndexError; twice the same: an InvalidArgument."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(_dims_of(axis))
    out = []
    for a in axes:
        if not isinstance(a, int | np.integer) or isinstance(a, bool):
            raise TypeError(f"dim must be an int or a sequence of ints, got {axis!r}")
        if not -max(ndim, 1) <= a < max(ndim, 1):  # (a 0-d tensor takes 0 and -1, as torch)
            raise IndexError(f"axis {a} is out of range for a tensor with {ndim} dimensions")
        out.append(a % max(ndim, 1))
    if len(set(out)) != len(out):
        raise InvalidArgument(f"dims {axes}: a dimension appears more than once (a tensor with "
                              f"{ndim} dimensions)")
    return tuple(out)


def _dims_of(axis: Any) -> Any:
    try:
        return iter(axis)
    except TypeError:
        raise TypeError(f"dim must be an int or a sequence of ints, got {axis!r}") from None


def _expand_reduced(grad: Any, shape: tuple[int, ...], axis: tuple[int, ...] | None,
                    keepdims: bool) -> Any:
    """Reshape the gradient of a reduction so that it broadcasts against the input."""
    if axis is None:
        return grad.reshape((1,) * len(shape)) if not keepdims else grad
    if not keepdims:
        grad = grad.reshape([1 if i in axis else n for i, n in enumerate(shape)])
    return grad


# ------------------------------------- Tensor-level helpers of backward_graph (create_graph)
#
# A ``backward_graph(ctx, g, saved)`` is the op's backward written with differentiable ops on
# Tensors (``g`` and the saved arrays as Tensors of the graph: ``Node.saved_graph``), for a
# ``create_graph=True`` pass (the engine's docstring). They call the ops' ``apply`` directly
# (the arguments are already checked) or Tensor operators, never NumPy-only functions.


def _const(array: Any) -> Any:
    """A constant Tensor (no graph) on ``array``: a mask, an index, a one-hot matrix."""
    return _function.Tensor(array)


def unbroadcast_graph(grad: Any, shape: tuple[int, ...]) -> Any:
    """:func:`unbroadcast` of a Tensor, with differentiable ops."""
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        i + extra for i, n in enumerate(shape) if n == 1 and grad.shape[i + extra] != 1
    )
    return Reshape.apply(Sum.apply(grad, axes, True), shape)


def expand_reduced_graph(grad: Any, shape: tuple[int, ...], axis: tuple[int, ...] | None,
                         keepdims: bool) -> Any:
    """:func:`_expand_reduced` of a Tensor: the reduced axes put back, of size 1."""
    if axis is None:
        kept = (1,) * len(shape)
    elif keepdims:
        return grad
    else:
        kept = tuple(1 if i in axis else n for i, n in enumerate(shape))
    return grad if grad.shape == kept else Reshape.apply(grad, kept)


def _broadcast_graph(grad: Any, shape: tuple[int, ...]) -> Any:
    return grad if grad.shape == tuple(shape) else Expand.apply(grad, tuple(shape))


def masked_graph(g: Any, weight: Any, anchor: Any = None) -> Any:
    """:func:`_masked` of a Tensor ``g`` (:class:`GradMask`): ``g * weight`` where the
    constant array ``weight`` (a mask, or 0 / 0.5 / 1) is nonzero, 0 elsewhere; ``anchor``,
    the op's saved input or output, gets a zero gradient (see GradMask)."""
    return GradMask.apply(g, weight, anchor)


class GradMask(Function):
    """``g * weight`` where ``weight`` is nonzero, 0 elsewhere (:func:`_masked`): the
    backward of a piecewise-linear op (ReLU, leaky ReLU, clamp, maximum) in a
    ``create_graph`` pass. Its derivative is the same mask; ``anchor`` (the op's input or
    output, or None) gets zeros: PyTorch's double backward of ReLU, leaky ReLU, abs and max
    pooling reads the input, so their gradients belong to the input's graph
    (``requires_grad``, and a later backward gives the input zeros, not nothing); so do
    these (clamp's, maximum's and where's do not, in both)."""

    @staticmethod
    def forward(g, weight, anchor):
        return _masked(g, weight)

    @staticmethod
    def setup_context(ctx, inputs, output):
        g, ctx.weight, anchor = inputs
        ctx.like = None if anchor is None else (anchor.shape, anchor.dtype)
        ctx.shape = g.shape  # (the weight may broadcast g: h is summed back)

    @staticmethod
    def backward(ctx, h):
        zero = (get_array_module(h).zeros(*ctx.like) if ctx.needs_input_grad[2] else None)
        return unbroadcast(_masked(h, ctx.weight), ctx.shape), None, zero

    @staticmethod
    def backward_graph(ctx, h, saved):
        zero = (_const(get_array_module(h._data).zeros(*ctx.like))
                if ctx.needs_input_grad[2] else None)
        return unbroadcast_graph(GradMask.apply(h, ctx.weight, None), ctx.shape), None, zero


class PiecewiseLinear(Function):
    """An element-wise op of linear pieces whose result the caller computed from ``a``'s
    array: ``value``, and ``slope``, its derivative (piecewise constant: a mask, or 0 / 1/6
    / 1): hardtanh, threshold, the shrinks. The gradient is ``g * slope`` (0 where the slope
    is 0, also for a NaN ``g``); in a ``create_graph`` pass it stays in ``a``'s graph with a
    zero derivative (an anchor, as :class:`GradMask`'s), as PyTorch's backward of these
    reads the input."""

    @staticmethod
    def forward(a, value, slope):
        return value

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.slope, ctx.shape = inputs[2], inputs[0].shape

    @staticmethod
    def backward(ctx, g):
        return _masked(g, ctx.slope), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return masked_graph(g, ctx.slope, saved.input(0, ctx.shape, g)), None, None


class Anchor(Function):
    """``t`` (a copy) with a second input, ``anchor``, whose derivative is 0: a gradient
    that an op computes without reading its input (average pooling's, a convolution's dX
    without X), put into that input's graph as PyTorch's is, whose backward reads the input
    (see :meth:`~tinytrain.autograd.function.SavedGraph.input`). A later backward gives the
    anchor zeros (``zeros``), or no gradient at all (PyTorch's convolutions: an undefined
    one), as PyTorch's."""

    @staticmethod
    def forward(t, anchor, zeros):
        return t.copy()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.like = (inputs[1].shape, inputs[1].dtype) if inputs[2] else None

    @staticmethod
    def backward(ctx, h):
        zero = get_array_module(h).zeros(*ctx.like) if ctx.like is not None else None
        return h, zero, None

    @staticmethod
    def backward_graph(ctx, h, saved):
        zero = _const(get_array_module(h._data).zeros(*ctx.like)) if ctx.like is not None else None
        return h, zero, None


def anchored(t: Any, anchor: Any, zeros: bool = True) -> Any:
    """``t`` in ``anchor``'s graph with a zero derivative (:class:`Anchor`); ``t`` itself
    when ``anchor`` is None (an input that needs no gradient)."""
    return t if anchor is None else Anchor.apply(t, anchor, zeros)


class Adjoint(Function):
    """The backward of an op that is linear in its differentiable inputs (the others
    fixed: an index, a size, a mode) as an op of its own, for a ``create_graph`` pass:
    ``g -> op.backward(state, g)[i]``, input ``i``'s gradient. It is linear too, and its own
    gradient is its adjoint, the op itself: ``op.forward(*args)`` with ``h`` as input ``i``
    (``args`` holds op's other arguments, zeros for its other linear inputs). In a
    ``create_graph`` pass that is ``op.apply``, whose ``backward_graph`` is this again, so any
    order works: the pattern of conv2d / ``conv_transpose2d`` and ``fold`` / ``unfold``, for
    every linear op at once (:func:`adjoint` makes one)."""

    @staticmethod
    def forward(g, op, state, i, args):
        grad = op.backward(state, g)[i]
        return grad.copy() if _root(grad) is _root(g) else grad  # (a new array, not a view)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, ctx.op, _, ctx.i, ctx.args = inputs

    @staticmethod
    def backward(ctx, h):
        return ctx.op.forward(*_put(ctx.args, ctx.i, h)), None, None, None, None

    @staticmethod
    def backward_graph(ctx, h, saved):
        return ctx.op.apply(*_put(ctx.args, ctx.i, h)), None, None, None, None


def _put(args: tuple, i: int, value: Any) -> tuple:
    return args[:i] + (value,) + args[i + 1:]


def adjoint(op: type[Function], ctx: Any, g: Any, i: int, args: tuple) -> Any:
    """Input ``i``'s gradient of the linear ``op`` as an :class:`Adjoint` of ``g`` (a
    ``backward_graph``'s). ``args``: op's forward arguments (input ``i``'s place ignored,
    zeros for its other linear inputs). The op's backward runs on a copy of ``ctx`` that asks
    for input ``i``'s gradient alone (and outlives ``ctx``, which a backward may free)."""
    state = _function.Context(tuple(j == i for j in range(len(ctx.needs_input_grad))))
    state.__dict__.update({k: v for k, v in vars(ctx).items() if k != "needs_input_grad"})
    return Adjoint.apply(g, op, state, i, args)


def _zero_grads_graph(ctx: Any, g: Any, shapes: tuple) -> tuple:
    """Zero gradients (constants) of the given shapes, where needed: piecewise-constant ops."""
    xp = get_array_module(g._data)
    return tuple(_const(xp.zeros(shape, g.dtype)) if need else None
                 for shape, need in zip(shapes, ctx.needs_input_grad))


def _one_hot(targets: Any, shape: tuple[int, int], dtype: Any) -> Any:
    """``[N, C]`` rows of 0 with 1 at each target, and the ``[N, 1]`` rows not ignored
    (target -100, which the CUDA kernel skips): arrays, no host sync."""
    xp = get_array_module(targets)
    keep = targets != -100
    safe = xp.where(keep, targets, 0)
    return ((xp.arange(shape[1]) == safe[:, None]).astype(dtype),
            keep[:, None].astype(dtype))


# ------------------------------------------------------------ elementwise, binary


class Add(Function):
    @staticmethod
    def forward(a, b):
        return a + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shapes = (inputs[0].shape, inputs[1].shape)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        return (unbroadcast(g, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast(g, sb) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        sa, sb = ctx.shapes
        return (unbroadcast_graph(g, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(g, sb) if ctx.needs_input_grad[1] else None)


class Sub(Function):
    @staticmethod
    def forward(a, b):
        return a - b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shapes = (inputs[0].shape, inputs[1].shape)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        return (unbroadcast(g, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast(-g, sb) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        sa, sb = ctx.shapes
        return (unbroadcast_graph(g, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(-g, sb) if ctx.needs_input_grad[1] else None)


class Mul(Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        # selective save: d(ab)/da needs only b, d(ab)/db needs only a
        ctx.save_for_backward(b if ctx.needs_input_grad[0] else None,
                              a if ctx.needs_input_grad[1] else None)
        ctx.shapes = (a.shape, b.shape)

    @staticmethod
    def backward(ctx, g):
        b, a = ctx.saved_tensors
        sa, sb = ctx.shapes
        return (unbroadcast(g * b, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast(g * a, sb) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        b, a = saved
        sa, sb = ctx.shapes
        return (unbroadcast_graph(g * b, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(g * a, sb) if ctx.needs_input_grad[1] else None)


class Div(Function):
    @staticmethod
    def forward(a, b):
        return a / b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs  # (the inputs, not the output, as PyTorch: the output may be
        ctx.save_for_backward(b, a if ctx.needs_input_grad[1] else None)  # written in place)
        ctx.shapes = (a.shape, b.shape)

    @staticmethod
    def backward(ctx, g):
        b, a = ctx.saved_tensors
        sa, sb = ctx.shapes
        ga = unbroadcast(g / b, sa) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(-g * (a / b) / b, sb) if ctx.needs_input_grad[1] else None
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        b, a = saved
        sa, sb = ctx.shapes
        ga = unbroadcast_graph(g / b, sa) if ctx.needs_input_grad[0] else None
        gb = unbroadcast_graph(-g * (a / b) / b, sb) if ctx.needs_input_grad[1] else None
        return ga, gb


class Pow(Function):
    """``a ** b``; either may be a scalar (a NumPy scalar of the result's dtype)."""

    @staticmethod
    def forward(a, b):
        if b.dtype.kind == "i":  # (b: an array or a NumPy scalar, of a's dtype)
            return _int_pow(a, b)
        return a ** b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(a, b, output if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        xp = get_array_module(g)
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ctx.needs_input_grad[0]:
                # d(a^b)/da = b a^(b-1), and 0 where b == 0 (a^0 is constant; a^-1 at
                # a = 0 would make 0 * inf = nan)
                ga = xp.where(b == 0, 0, g * b * a ** (b - 1)).astype(g.dtype, copy=False)
                ga = unbroadcast(ga, a.shape)
            if ctx.needs_input_grad[1]:
                # d(a^b)/db = a^b log(a), and 0 where a == 0 and b >= 0 (as PyTorch)
                gb = xp.where((a == 0) & (b >= 0), 0, g * out * xp.log(a))
                gb = unbroadcast(gb.astype(g.dtype, copy=False), b.shape)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, b, out = saved
        xp, zero = get_array_module(g._data), g.dtype.type(0)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = Where.apply(xp.asarray(b._data == 0), zero, g * b * a ** (b - 1))
            ga = unbroadcast_graph(ga, a.shape)
        if ctx.needs_input_grad[1]:
            at_zero = xp.asarray((a._data == 0) & (b._data >= 0))
            gb = unbroadcast_graph(Where.apply(at_zero, zero, g * out * Log.apply(a)), b.shape)
        return ga, gb


def _int_pow(a: Any, b: Any) -> Any:
    """``a ** b`` of signed integers as PyTorch: a negative exponent gives 1 for a base of 1,
    1 or -1 for a base of -1 (by the exponent's parity) and 0 for any other base (0 too),
    where NumPy raises "Integers to negative integer powers are not allowed"."""
    xp = get_array_module(b if isinstance(a, np.generic) else a)  # (one may be a scalar)
    negative = b < 0
    if not negative.any():
        return a ** b
    power = a ** xp.where(negative, 0, b)  # (the exponent 0 where the answer is below)
    odd_sign = 1 - 2 * (b & 1)  # -1 ** b: -1 for an odd b, 1 for an even one
    small = xp.where(a == 1, 1, xp.where(a == -1, odd_sign, 0))
    return xp.where(negative, small, power).astype(power.dtype, copy=False)


def _module_and_floats(a: Any, b: Any) -> tuple[Any, bool]:
    """The array module of ``a`` or ``b`` (one may be a Python number), and whether their
    result is floating point."""
    xp = get_array_module(a if hasattr(a, "dtype") else b)
    return xp, any(np.dtype(getattr(x, "dtype", type(x))).kind == "f" for x in (a, b))


def _fmod_floor(xp: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """``(a // b, a % b)`` of floats as PyTorch computes them on every device (c10's
    ``div_floor_floating``, NumPy's ``divmod``): from ``fmod``, which is exact, so ``1.0 //
    0.1`` is 9 and ``1.0 % 0.1`` is 0.0999..., where ``floor(1.0 / 0.1)`` (CuPy's floor
    division) is 10."""
    with np.errstate(all="ignore"):
        mod = xp.fmod(a, b)
        across = (mod != 0) & ((b < 0) != (mod < 0))  # fmod has a's sign; floor: b's
        div = (a - mod) / b - across
        floor = xp.floor(div)
        floor = xp.where(div - floor > 0.5, floor + 1, floor)  # (a - mod) / b rounded
        quotient = a / b
        floor = xp.where(div == 0, xp.copysign(0 * quotient, quotient), floor)
        floor = xp.where(b == 0, quotient, floor)  # IEEE's inf or NaN
        return floor.astype(quotient.dtype, copy=False), xp.where(across, mod + b, mod)


class FloorDiv(Function):
    """``a // b``, rounding down (as Python and PyTorch); it has no derivative."""

    @staticmethod
    def forward(a, b):
        xp, floats = _module_and_floats(a, b)
        return _fmod_floor(xp, a, b)[0] if floats else a // b

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for floor division (//) is not implemented (as in "
                           "PyTorch); use / for a differentiable division")

    @staticmethod
    def backward_graph(ctx, g, saved):
        FloorDiv.backward(ctx, g)


class Remainder(Function):
    """``a % b`` with the sign of ``b`` (Python's and PyTorch's rule)."""

    @staticmethod
    def forward(a, b):
        xp, floats = _module_and_floats(a, b)
        return _fmod_floor(xp, a, b)[1] if floats else a % b

    @staticmethod
    def setup_context(ctx, inputs, output):
        _save_for_divisor(ctx, inputs)

    @staticmethod
    def backward(ctx, g):
        ga = unbroadcast(g, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:  # minus the quotient a % b took (1.0 % 0.1: -9)
            a, b = ctx.saved_tensors
            gb = unbroadcast(-g * _fmod_floor(get_array_module(g), a, b)[0], b.shape)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        ga = unbroadcast_graph(g, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:  # (the quotient is piecewise constant: a constant here)
            a, b = (t._data for t in saved)
            gb = unbroadcast_graph(-g * _const(_fmod_floor(get_array_module(a), a, b)[0]),
                                   b.shape)
        return ga, gb


def _save_for_divisor(ctx: Any, inputs: tuple) -> None:
    """``%`` and ``fmod``: the dividend's gradient is ``g`` itself, so the operands are kept
    only for the divisor's (as PyTorch keeps nothing for ``h % 2``: a later write to ``h``
    does not break the backward)."""
    ctx.shapes = tuple(np.shape(x) for x in inputs)
    if ctx.needs_input_grad[1]:
        ctx.save_for_backward(*inputs)


def _masked(g: Any, weight: Any) -> Any:
    """``g * weight`` where ``weight`` (a mask, or 0 / 0.5 / 1) is nonzero, and 0 where it is
    zero, also where ``g`` is NaN or inf: the inputs an op did not pick get no gradient at
    all, as in PyTorch (a multiplication by 0 made NaN of a NaN gradient)."""
    xp = get_array_module(g)
    return xp.where(weight != 0, g * weight, g.dtype.type(0)).astype(g.dtype, copy=False)


class Fmod(Function):
    """C's ``fmod``: ``a - trunc(a / b) * b``, with the sign of ``a`` (``torch.fmod``; ``%``
    takes the sign of ``b``). Its gradients, as PyTorch's: 1 for ``a``, ``-trunc(a / b)``
    for ``b``."""

    @staticmethod
    def forward(a, b):
        with np.errstate(all="ignore"):  # (x fmod 0.0 is NaN, silently, as in PyTorch)
            return _module_and_floats(a, b)[0].fmod(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _save_for_divisor(ctx, inputs)

    @staticmethod
    def backward(ctx, g):
        ga = unbroadcast(g, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            a, b = ctx.saved_tensors
            with np.errstate(all="ignore"):
                gb = unbroadcast(-g * get_array_module(g).trunc(a / b), b.shape)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        ga = unbroadcast_graph(g, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:  # (trunc(a / b) is piecewise constant)
            a, b = (t._data for t in saved)
            with np.errstate(all="ignore"):
                gb = unbroadcast_graph(-g * _const(get_array_module(a).trunc(a / b)), b.shape)
        return ga, gb


class Maximum(Function):
    """Element-wise ``max(a, b)``; where ``a == b`` each gets half the gradient (as PyTorch)."""

    pick = staticmethod(lambda xp: xp.maximum)
    wins = staticmethod(lambda a, b: a > b)  # (the inputs decide: the output may be
                                             # written in place before backward)

    @classmethod
    def forward(cls, a, b):
        return cls.pick(get_array_module(a))(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @classmethod
    def backward(cls, ctx, g):
        # PyTorch's rule: the whole gradient unless the other input wins (half on a tie);
        # so where a NaN compares false both ways, each input gets all of it
        a, b = ctx.saved_tensors
        one, share = g.dtype.type(1), (a == b) * g.dtype.type(0.5)  # (g's dtype throughout)
        ga = unbroadcast(_masked(g, one - cls.wins(b, a) - share), a.shape) \
            if ctx.needs_input_grad[0] else None
        gb = unbroadcast(_masked(g, one - cls.wins(a, b) - share), b.shape) \
            if ctx.needs_input_grad[1] else None
        return ga, gb

    @classmethod
    def backward_graph(cls, ctx, g, saved):
        a, b = (t._data for t in saved)
        one, share = g.dtype.type(1), (a == b) * g.dtype.type(0.5)
        ga = unbroadcast_graph(masked_graph(g, one - cls.wins(b, a) - share), a.shape) \
            if ctx.needs_input_grad[0] else None
        gb = unbroadcast_graph(masked_graph(g, one - cls.wins(a, b) - share), b.shape) \
            if ctx.needs_input_grad[1] else None
        return ga, gb


class Minimum(Maximum):
    pick = staticmethod(lambda xp: xp.minimum)
    wins = staticmethod(lambda a, b: a < b)


class Clamp(Function):
    """``a`` limited to ``[lo, hi]`` (either may be None); the gradient passes where
    ``lo <= a <= hi``, bounds included, as in PyTorch."""

    @staticmethod
    def forward(a, lo, hi):
        return get_array_module(a).clip(a, lo, hi)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.lo, ctx.hi = inputs[1], inputs[2]

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        keep = True
        if ctx.lo is not None:
            keep = keep & (a >= ctx.lo)
        if ctx.hi is not None:
            keep = keep & (a <= ctx.hi)
        return _masked(g, keep), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        a = saved[0]._data
        keep = get_array_module(a).ones(a.shape, bool)
        if ctx.lo is not None:
            keep = keep & (a >= ctx.lo)
        if ctx.hi is not None:
            keep = keep & (a <= ctx.hi)
        return masked_graph(g, keep), None, None  # (PyTorch's: not in a's graph)


class ClampTensor(Function):
    """``a`` limited to tensor bounds ``lo``/``hi`` (broadcast together; either may be
    None), with PyTorch's gradients: ``a`` where ``lo <= a <= hi``; ``lo`` where ``a < lo``
    (and ``lo < hi``); ``hi`` where ``a > hi`` (or ``hi < lo``: the result is ``hi`` then)."""

    @staticmethod
    def forward(a, lo, hi):
        xp = get_array_module(a)
        out = a if lo is None else xp.maximum(a, lo)
        return out if hi is None else xp.minimum(out, hi)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def masks(ctx: Any, a: Any, lo: Any, hi: Any) -> tuple[Any, Any, Any]:
        """Where each input gets the gradient, None for one that needs none: ``a`` where
        ``lo <= a <= hi``, ``lo`` where ``a < lo`` (and ``lo < hi``), ``hi`` where ``a > hi``
        (or ``hi < lo``). At least one bound is given (:meth:`Tensor.clamp` checks)."""
        keep = below = above = None
        if ctx.needs_input_grad[0]:
            keep = True
            if lo is not None:
                keep = keep & (a >= lo)
            if hi is not None:
                keep = keep & (a <= hi)
        if lo is not None and ctx.needs_input_grad[1]:
            below = (a < lo) & (lo < hi) if hi is not None else a < lo
        if hi is not None and ctx.needs_input_grad[2]:
            above = (a > hi) | (hi < lo) if lo is not None else a > hi
        return keep, below, above

    @staticmethod
    def backward(ctx, g):
        a, lo, hi = ctx.saved_tensors
        return tuple(None if m is None else unbroadcast(_masked(g, m), x.shape)
                     for m, x in zip(ClampTensor.masks(ctx, a, lo, hi), (a, lo, hi)))

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, lo, hi = (None if t is None else t._data for t in saved)
        return tuple(None if m is None else unbroadcast_graph(masked_graph(g, m), x.shape)
                     for m, x in zip(ClampTensor.masks(ctx, a, lo, hi), (a, lo, hi)))


# ------------------------------------------------------------ elementwise, unary


class Neg(Function):
    @staticmethod
    def forward(a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return -g

    @staticmethod
    def backward_graph(ctx, g, saved):
        return -g


class Abs(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).abs(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * get_array_module(a).sign(a)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved  # (sign(a): in a's graph with a zero gradient, as PyTorch's sgn)
        return g * Rounding.apply(a, "sign")


class Exp(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).exp(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out

    @staticmethod
    def backward_graph(ctx, g, saved):
        (out,) = saved
        return g * out


class Log(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).log(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g / a

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return g / a


class Log2(Log):
    """``log2`` itself (not ``log(x) / log(2)``, which misses exact powers: 14.999999)."""

    @staticmethod
    def forward(a):
        return get_array_module(a).log2(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g / (a * math.log(2))

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return g / (a * math.log(2))


class Log10(Log):
    """``log10`` itself (``log(1000) / log(10)`` is 2.9999999999999996)."""

    @staticmethod
    def forward(a):
        return get_array_module(a).log10(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g / (a * math.log(10))

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return g / (a * math.log(10))


class Sqrt(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).sqrt(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g / (2 * out)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (out,) = saved
        return g / (2 * out)


class StdFromVar(Sqrt):
    """``std = sqrt(var)``: where the variance is 0 (all values equal) the gradient is 0, as
    PyTorch's ``std_backward`` has it; sqrt's own would be ``inf``, and ``0 * inf`` through
    the variance NaN."""

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            return get_array_module(out).where(out == 0, 0, g / (2 * out)).astype(out.dtype)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (out,) = saved
        zero = out._data == 0
        safe = Where.apply(zero, out.dtype.type(1), out)  # (no inf, whose gradient is NaN)
        return Where.apply(zero, g.dtype.type(0), g / (2 * safe))


class Normal(Function):
    """``mean + std * noise``: a draw of ``torch.normal(mean, std)`` from standard normal
    ``noise`` (an array of the output's dtype). As PyTorch's, the draw sends zeros back to
    ``mean`` and ``std`` (no reparameterisation): the samples are data, not a function."""

    @staticmethod
    def forward(mean, std, noise):
        return (mean + std * noise).astype(noise.dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.like = [(getattr(x, "shape", ()), getattr(x, "dtype", None)) for x in inputs[:2]]

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        return tuple(xp.zeros(shape, dtype) if need else None
                     for (shape, dtype), need in zip(ctx.like, ctx.needs_input_grad)) + (None,)

    @staticmethod
    def backward_graph(ctx, g, saved):
        return _zero_grads_graph(ctx, g, [shape for shape, _ in ctx.like]) + (None,)


class Bernoulli(Function):
    """1 where ``uniform < p``, else 0, in ``p``'s dtype: a draw of ``torch.bernoulli(p)``
    from ``uniform`` samples in [0, 1). As PyTorch's, it sends zeros back to ``p``."""

    @staticmethod
    def forward(p, uniform):
        return (uniform < p).astype(p.dtype)

    @staticmethod
    def backward(ctx, g):
        return get_array_module(g).zeros_like(g), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return _const(get_array_module(g._data).zeros_like(g._data)), None


class ReLU(Function):
    @staticmethod
    def forward(a):
        return kernels.for_array(a).relu_forward(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)  # out > 0 exactly where a > 0

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return kernels.for_array(g).relu_backward(g, out)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (out,) = saved
        return masked_graph(g, out._data > 0, out)


class Dropout(Function):
    """``x * mask / (1 - p)``; the mask is a hash of ``(seed, index)``, recomputed in backward.

    Nothing is saved but the seed (see :mod:`tinytrain.kernels.cpu.layers`).
    """

    @staticmethod
    def forward(x, p, seed):
        return kernels.for_array(x).dropout_forward(x, p, seed)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, ctx.p, ctx.seed = inputs

    @staticmethod
    def backward(ctx, g):
        return kernels.for_array(g).dropout_backward(g, ctx.p, ctx.seed), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return Dropout.apply(g, ctx.p, ctx.seed), None, None  # (linear: the same mask)


class Sigmoid(Function):
    @staticmethod
    def forward(a):
        xp = get_array_module(a)
        # split by sign so that exp never overflows
        e = xp.exp(-xp.abs(a))
        return xp.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return g * s * (1 - s)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (s,) = saved
        return g * s * (1 - s)


class Tanh(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).tanh(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * (1 - t * t)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (t,) = saved
        return g * (1 - t * t)


# ------------------------------------------------------------------ reductions


class Sum(Function):
    """Sum over ``axis``; integer and bool inputs sum in int64 (as PyTorch)."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis, keepdims):
        dtype = "int64" if a.dtype.kind in "biu" else None
        if isinstance(a, np.ndarray):  # ndarray.sum's own code would raise its warnings (inf -
            # inf) where tinytrain/__init__.py's filter cannot see them; the same sum, here
            return np.add.reduce(a, axis=axis, dtype=dtype, keepdims=keepdims)
        return a.sum(axis=axis, keepdims=keepdims, dtype=dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, axis, keepdims = inputs
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.axis, ctx.keepdims)
        return get_array_module(g).broadcast_to(g, ctx.shape).copy(), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        g = expand_reduced_graph(g, ctx.shape, ctx.axis, ctx.keepdims)
        return _broadcast_graph(g, ctx.shape), None, None


class LogSumExp(Function):
    """``log(sum(exp(a)))`` over ``axis``, with the largest value taken out first (so that
    ``exp`` does not overflow; an infinite one is left in, ``inf - inf`` would be NaN).
    Gradient ``exp(a - out)``, PyTorch's formula: its NaNs and zeros where ``a`` or ``out``
    is infinite are PyTorch's too."""

    row_major = True

    @staticmethod
    def forward(a, axis, keepdims):
        xp = get_array_module(a)
        with np.errstate(all="ignore"):
            top = a.max(axis=axis, keepdims=True)
            top = xp.where(xp.isinf(top), 0, top)
            out = xp.log(xp.exp(a - top).sum(axis=axis, keepdims=True)) + top
        return out if keepdims else out.squeeze(axis=axis)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.axis, ctx.keepdims = inputs
        ctx.save_for_backward(a, output)

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_tensors
        axis, keepdims = ctx.axis, ctx.keepdims
        with np.errstate(all="ignore"):
            weight = get_array_module(a).exp(a - _expand_reduced(out, a.shape, axis, keepdims))
        return _expand_reduced(g, a.shape, axis, keepdims) * weight, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, out = saved
        axis, keepdims = ctx.axis, ctx.keepdims
        weight = Exp.apply(a - expand_reduced_graph(out, a.shape, axis, keepdims))
        return expand_reduced_graph(g, a.shape, axis, keepdims) * weight, None, None


class Mean(Function):
    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis, keepdims):
        with np.errstate(all="ignore"):  # inf - inf: NaN, silently (tinytrain/__init__.py)
            if a.size == 0:  # NaN, silently too (NumPy warns "Mean of empty slice")
                total = a.sum(axis=axis, keepdims=keepdims)
                count = a.size if axis is None else math.prod(a.shape[i] for i in axis)
                return total / total.dtype.type(count)
            return a.mean(axis=axis, keepdims=keepdims)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, axis, keepdims = inputs
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        ctx.count = a.size // max(output.size, 1)

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.axis, ctx.keepdims) / g.dtype.type(ctx.count)
        return get_array_module(g).broadcast_to(g, ctx.shape).copy(), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        g = expand_reduced_graph(g, ctx.shape, ctx.axis, ctx.keepdims) / g.dtype.type(ctx.count)
        return _broadcast_graph(g, ctx.shape), None, None


class Amax(Function):
    """Maximum over ``axis`` (``torch.amax``). Ties share the gradient equally."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    reduce = "max"

    @classmethod
    def forward(cls, a, axis, keepdims):
        return getattr(a, cls.reduce)(axis=axis, keepdims=keepdims)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, axis, keepdims = inputs
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        out = _expand_reduced(output, a.shape, axis, keepdims)
        mask = a == out
        nan_out = out != out  # (the reduced shape: small)
        if get_array_module(a) is not np or nan_out.any():  # (no GPU sync to ask)
            # a NaN result came from the NaNs: they share the gradient (PyTorch's max())
            mask |= (a != a) & nan_out
        ctx.save_for_backward(mask)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        g = _expand_reduced(g, ctx.shape, ctx.axis, ctx.keepdims)
        count = mask.sum(axis=ctx.axis, keepdims=True)
        return _masked(g / count.astype(g.dtype, copy=False), mask), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        mask = saved[0]._data
        g = expand_reduced_graph(g, ctx.shape, ctx.axis, ctx.keepdims)
        count = mask.sum(axis=ctx.axis, keepdims=True).astype(g.dtype)
        return masked_graph(g / _const(count), mask), None, None


class Amin(Amax):
    """Minimum over ``axis`` (``torch.amin``). Ties share the gradient equally."""

    reduce = "min"


class Median(Amax):
    """The lower median of all of ``a`` (``torch.median()`` without a dim): the middle of
    the sorted values, the lower one of the two middles for an even count; NaN if any value
    is. As for ``max()``, entries equal to it share the gradient (``axis`` None only)."""

    @staticmethod
    def forward(a, axis, keepdims):
        xp = get_array_module(a)
        ordered = xp.sort(a.reshape(-1))  # (NaNs last)
        last = ordered[-1]
        return xp.where(last != last, last, ordered[(a.size - 1) // 2])


class NanMedian(Amax):
    """The lower median of the values of ``a`` that are not NaN (``torch.nanmedian()``
    without a dim; NaN if all are); entries equal to it share the gradient, as for
    :class:`Median`."""

    @staticmethod
    def forward(a, axis, keepdims):
        xp = get_array_module(a)
        ordered = xp.sort(a.reshape(-1))  # (NaNs last)
        count = int((ordered == ordered).sum())
        return ordered[max(count - 1, 0) // 2] if a.size else xp.asarray(xp.nan, a.dtype)


class Prod(Function):
    """Product over ``axis`` (a 1-tuple, or all if None); integer and bool inputs multiply in
    int64 (as PyTorch). The gradient of an entry is the product of the others: the running
    products before it and after it. So nothing divides and zeros need no special case (one
    zero: its gradient is the product of the rest, the others' 0; two or more: all 0)."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis, keepdims):
        return a.prod(axis=axis, keepdims=keepdims,
                      dtype="int64" if a.dtype.kind in "biu" else None)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.axis, ctx.keepdims = inputs
        ctx.save_for_backward(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        xp = get_array_module(g)
        flat, axis = (a.reshape(-1), 0) if ctx.axis is None else (a, ctx.axis[0])
        before = _exclusive_cumprod(flat, axis)
        after = xp.flip(_exclusive_cumprod(xp.flip(flat, axis), axis), axis)
        g = _expand_reduced(g, a.shape, ctx.axis, ctx.keepdims)
        grad = g * (before * after).reshape(a.shape)
        if ctx.axis is None:  # PyTorch's full product: exact zeros with two or more zeros in
            # `a` (an inf or NaN upstream gradient times the zero products would be NaN)
            grad = xp.where((a == 0).sum() > 1, grad.dtype.type(0), grad)
        return grad, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        """The same products of the others, by differentiable running products
        (:class:`Cumprod`, whose double backward handles the zeros)."""
        (a,) = saved
        zeros = a._data == 0
        if zeros.size == 0 or (ctx.axis is None and int(zeros.sum()) > 1):  # (PyTorch's zeros)
            return _const(get_array_module(zeros).zeros(a.shape, g.dtype)), None, None
        flat, axis = (Reshape.apply(a, (zeros.size,)), 0) if ctx.axis is None else (a, ctx.axis[0])
        before = _exclusive_cumprod_graph(flat, axis)
        after = Flip.apply(_exclusive_cumprod_graph(Flip.apply(flat, (axis,)), axis), (axis,))
        g = expand_reduced_graph(g, a.shape, ctx.axis, ctx.keepdims)
        return g * Reshape.apply(before * after, a.shape), None, None


def _exclusive_cumprod(a: Any, axis: int) -> Any:
    """The running product along ``axis`` of the entries *before* each one (1 for the first)."""
    if a.shape[axis] == 0:
        return a.copy()
    running = a.cumprod(axis=axis)
    widths = [(0, 0)] * a.ndim
    widths[axis] = (1, 0)
    drop_last = tuple(slice(0, -1) if d == axis else slice(None) for d in range(a.ndim))
    return get_array_module(a).pad(running[drop_last], widths, constant_values=1)


def _exclusive_cumprod_graph(a: Any, axis: int) -> Any:
    """:func:`_exclusive_cumprod` of a Tensor, with differentiable ops."""
    drop_last = tuple(slice(0, -1) if d == axis else slice(None) for d in range(a.ndim))
    widths = tuple((1, 0) if d == axis else (0, 0) for d in range(a.ndim))
    return Pad.apply(Index.apply(Cumprod.apply(a, axis), drop_last), widths, a.dtype.type(1))


class TakeAlongDim(Function):
    """``a``'s entries at ``index`` along ``axis`` (one per slice): the values of
    ``max(dim)`` / ``min(dim)``. The whole gradient goes to the chosen entry, as in PyTorch.

    ``index`` has ``a``'s shape with ``axis`` of size 1; the output drops that axis
    unless ``keepdims``.
    """

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, index, axis, keepdims):
        out = get_array_module(a).take_along_axis(a, index, axis)
        return out if keepdims else out.squeeze(axis)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, index, axis, keepdims = inputs
        ctx.shape, ctx.index, ctx.axis, ctx.keepdims = a.shape, index, axis, keepdims

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        if not ctx.keepdims:
            g = xp.expand_dims(g, ctx.axis)
        place = [1] * len(ctx.shape)
        place[ctx.axis] = ctx.shape[ctx.axis]
        chosen = xp.arange(ctx.shape[ctx.axis]).reshape(place) == ctx.index
        return xp.where(chosen, g, g.dtype.type(0)), None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        xp = get_array_module(g._data)
        if not ctx.keepdims:
            g = Reshape.apply(g, g.shape[:ctx.axis] + (1,) + g.shape[ctx.axis:])
        place = [1] * len(ctx.shape)
        place[ctx.axis] = ctx.shape[ctx.axis]
        chosen = xp.arange(ctx.shape[ctx.axis]).reshape(place) == ctx.index
        return masked_graph(g, chosen), None, None, None


# ---------------------------------------------------------------------- linear algebra


class MatMul(Function):
    """``a @ b`` with NumPy's rules: 1-D operands, batched (broadcast) leading dims."""

    @staticmethod
    def forward(a, b):
        return a @ b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(b if ctx.needs_input_grad[0] else None,
                              a if ctx.needs_input_grad[1] else None)
        ctx.shapes = (a.shape, b.shape)

    @staticmethod
    def backward(ctx, g):
        b, a = ctx.saved_tensors
        sa, sb = ctx.shapes
        # matmul promoted 1-D operands to matrices and dropped the added axis from
        # the output; put it back so that one rule serves every case (b's axis
        # first: for 1-D @ 1-D the output is 0-d and has no axis to index yet)
        if len(sb) == 1:
            g = g[..., None]
        if len(sa) == 1:
            g = g[..., None, :]
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = g @ (b[:, None] if b.ndim == 1 else b).swapaxes(-1, -2)  # [..., N, K]
            ga = unbroadcast(ga[..., 0, :] if len(sa) == 1 else ga, sa)
        if ctx.needs_input_grad[1] and len(sb) == 2 and len(sa) > 2:
            # [..., N, K] @ [K, M] (a Linear on a sequence): one product over all the rows,
            # not one per leading index summed afterwards (3.5x faster at [32, 4, 48])
            gb = a.reshape(-1, sa[-1]).T @ g.reshape(-1, g.shape[-1])
        elif ctx.needs_input_grad[1]:
            gb = (a[None, :] if a.ndim == 1 else a).swapaxes(-1, -2) @ g  # [..., K, M]
            gb = unbroadcast(gb[..., 0] if len(sb) == 1 else gb, sb)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        b, a = saved
        sa, sb = ctx.shapes
        if len(sb) == 1:  # (the same rule as backward: the dropped axes put back)
            g = Reshape.apply(g, g.shape + (1,))
        if len(sa) == 1:
            g = Reshape.apply(g, g.shape[:-1] + (1,) + g.shape[-1:])
        ga = gb = None
        if ctx.needs_input_grad[0]:
            bm = Reshape.apply(b, (b.shape[0], 1)) if b.ndim == 1 else b
            ga = MatMul.apply(g, _swap_last(bm))  # [..., N, K]
            if len(sa) == 1:
                ga = Reshape.apply(ga, ga.shape[:-2] + ga.shape[-1:])
            ga = unbroadcast_graph(ga, sa)
        if ctx.needs_input_grad[1]:
            am = Reshape.apply(a, (1, a.shape[0])) if a.ndim == 1 else a
            gb = MatMul.apply(_swap_last(am), g)  # [..., K, M]
            if len(sb) == 1:
                gb = Reshape.apply(gb, gb.shape[:-1])
            gb = unbroadcast_graph(gb, sb)
        return ga, gb


def _swap_last(t: Any) -> Any:
    """A Tensor with its last two dims swapped (``swapaxes(-1, -2)``), differentiable."""
    dims = list(range(t.ndim))
    dims[-2], dims[-1] = dims[-1], dims[-2]
    return Permute.apply(t, tuple(dims))


class Einsum(Function):
    """``einsum(equation, *operands)`` for an explicit equation of letters (``"ij,jk->ik"``:
    no ``...``, each label of one size in every operand; ``tinytrain.functions.einsum``
    makes it so). The gradient of an operand is the einsum of the output's gradient with
    the other operands, onto that operand's labels; a label summed away in this operand
    alone (in no other operand, not in the output) did not change the result along it, so
    the gradient is broadcast along it; a label repeated in one operand (``"ii->i"``, the
    diagonal) receives the gradient on that diagonal, and zeros elsewhere."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(equation, *operands):
        xp = get_array_module(operands[0])
        out = xp.asarray(_einsum_arrays(xp, equation, *operands))
        if any(_root(out) is _root(x) for x in operands):  # "ij->ji": a view; a new array,
            out = out.copy()  # as the gradient of the other ops' results assumes
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.equation = inputs[0]
        ctx.save_for_backward(*inputs[1:])

    @staticmethod
    def backward(ctx, g):
        operands = ctx.saved_tensors
        lhs, out = ctx.equation.split("->")
        labels = lhs.split(",")
        grads = [None]
        for i, need in enumerate(ctx.needs_input_grad[1:]):
            grads.append(_einsum_grad(g, out, labels, operands, i) if need else None)
        return tuple(grads)

    @staticmethod
    def backward_graph(ctx, g, saved):
        lhs, out = ctx.equation.split("->")
        labels = lhs.split(",")
        return (None, *(_einsum_grad(g, out, labels, saved, i, graph=True) if need else None
                        for i, need in enumerate(ctx.needs_input_grad[1:])))


def _einsum_arrays(xp: Any, equation: str, *operands: Any) -> Any:
    """``xp.einsum(equation, *operands)`` for an explicit equation whose labels have one size
    each (:class:`Einsum`'s). Two operands without a repeated label are one batched matmul
    (transposes and reshapes around ``xp.matmul``, as PyTorch's einsum contracts): NumPy 2's
    own einsum, even with ``optimize=True``, can be 100 times slower than BLAS on a long
    contraction (``"Naf,Mbf->NMab"`` with 200 000 ``f``: 14 s against 0.1 s). Anything else
    goes to ``xp.einsum``."""
    lhs, out = equation.split("->")
    terms = lhs.split(",")
    if (len(terms) != 2 or any(len(set(t)) != len(t) for t in (*terms, out))
            or any(x.dtype.kind == "b" for x in operands)):
        return xp.einsum(equation, *operands, optimize=True)
    (sa, sb), (a, b) = terms, operands
    drop_a = tuple(i for i, c in enumerate(sa) if c not in sb and c not in out)
    if drop_a:  # a label of one operand alone that the output does not keep: summed first
        a, sa = a.sum(axis=drop_a), "".join(c for c in sa if c in sb or c in out)
    drop_b = tuple(i for i, c in enumerate(sb) if c not in sa and c not in out)
    if drop_b:
        b, sb = b.sum(axis=drop_b), "".join(c for c in sb if c in sa or c in out)
    size = {**dict(zip(sa, a.shape)), **dict(zip(sb, b.shape))}
    batch = [c for c in sa if c in sb and c in out]
    summed = [c for c in sa if c in sb and c not in out]
    only_a, only_b = [c for c in sa if c not in sb], [c for c in sb if c not in sa]

    def count(labels: list[str]) -> int:
        return math.prod(size[c] for c in labels)

    left = a.transpose([sa.index(c) for c in batch + only_a + summed]).reshape(
        count(batch), count(only_a), count(summed))
    right = b.transpose([sb.index(c) for c in batch + only_b + summed]).reshape(
        count(batch), count(only_b), count(summed)).swapaxes(-1, -2)  # (BLAS reads it so)
    labels = batch + only_a + only_b
    result = xp.matmul(left, right).reshape([size[c] for c in labels])
    return result.transpose([labels.index(c) for c in out])


def _einsum_grad(g: Any, out: str, labels: list[str], operands: tuple, i: int,
                 graph: bool = False) -> Any:
    """The gradient of operand ``i`` of ``einsum(",".join(labels) + "->" + out, *operands)``
    (``graph``: of Tensors, with differentiable ops: an :class:`Einsum`, a broadcast, and an
    :class:`IndexGrad` onto a repeated label's diagonal)."""
    xp = get_array_module(g._data if graph else g)
    mine = labels[i]
    others = [s for j, s in enumerate(labels) if j != i]
    size = dict(zip(mine, operands[i].shape))
    letters = "".join(dict.fromkeys(mine))  # each label once, in the operand's order
    kept = "".join(c for c in letters if c in out or any(c in s for s in others))
    rest = [x for j, x in enumerate(operands) if j != i]
    equation = ",".join([out, *others]) + "->" + kept
    kept_shape = [size[c] if c in kept else 1 for c in letters]
    full = tuple(size[c] for c in letters)
    if graph:
        part = Reshape.apply(Einsum.apply(equation, g, *rest), tuple(kept_shape))
        part = _broadcast_graph(part, full)
    else:
        part = xp.asarray(_einsum_arrays(xp, equation, g, *rest))
        part = xp.broadcast_to(part.reshape(kept_shape), full)
    if len(letters) == len(mine):
        return part if graph else part.copy()  # (row-major; ascontiguousarray would make a
    # 0-d operand's 1-d). A repeated label: the part goes on the operand's diagonal
    diagonal = tuple(xp.arange(size[c]).reshape([-1 if d == letters.index(c) else 1
                                                 for d in range(len(letters))]) for c in mine)
    if graph:
        return IndexGrad.apply(part, operands[i].shape, diagonal)
    grad = xp.zeros(operands[i].shape, dtype=g.dtype)
    grad[diagonal] = part
    return grad


class Linear(Function):
    """``x @ w.T + b`` in one node: ``x [*, in]``, ``w [out, in]``, ``b [out]``.

    Fusing the three ops saves two graph nodes and two temporaries per layer,
    and shows selective save at its clearest: ``w`` is kept only for ``dx``,
    ``x`` only for ``dw``, and ``db`` needs nothing.
    """

    new_grads = True  # the kernels allocate dx, dw and db

    @staticmethod
    def forward(x, w, b):
        return kernels.for_array(x).linear_forward(x, w, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, b = inputs
        ctx.save_for_backward(w if ctx.needs_input_grad[0] else None,
                              x if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward(ctx, g):
        w, x = ctx.saved_tensors
        return kernels.for_array(g).linear_backward(g, x, w, ctx.needs_input_grad)

    @staticmethod
    def backward_graph(ctx, g, saved):
        w, x = saved
        need_x, need_w, need_b = ctx.needs_input_grad
        gx = MatMul.apply(g, w) if need_x else None  # [*, out] @ [out, in]
        gw = gb = None
        if need_w or need_b:
            rows = math.prod(g.shape[:-1])
            g2 = Reshape.apply(g, (rows, g.shape[-1]))
            if need_w:
                gw = MatMul.apply(Permute.apply(g2, (1, 0)), Reshape.apply(x, (rows, x.shape[-1])))
            if need_b:
                gb = Sum.apply(g2, (0,), False)
        return gx, gw, gb


# ------------------------------------------------------------------------ shapes


class Reshape(Function):
    @staticmethod
    def forward(a, shape):
        return a.reshape(shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return Reshape.apply(g, ctx.shape), None


class Permute(Function):
    @staticmethod
    def forward(a, dims):
        return a.transpose(dims)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.inverse = tuple(np.argsort(inputs[1]))

    @staticmethod
    def backward(ctx, g):
        return g.transpose(ctx.inverse), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return Permute.apply(g, ctx.inverse), None


def is_basic_index(index: Any) -> bool:
    """True for NumPy *basic* indexing (ints, slices, None, ``...``): the result is a view
    and no position is selected twice."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(
        p is None or p is Ellipsis or isinstance(p, slice)
        or (isinstance(p, int | np.integer) and not isinstance(p, bool | np.bool_))
        for p in parts
    )


class Index(Function):
    """``a[index]`` for basic and advanced (integer array / boolean) indices.

    Backward writes the gradient into zeros at ``index``: a plain add for basic indices,
    where every position appears once, and ``add.at`` for advanced ones, where an index may
    repeat and its gradients must accumulate.
    """

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, index):
        out = a[index]
        if isinstance(out, np.generic):
            # Every dimension taken by an integer: NumPy gives a scalar, a copy. With a
            # trailing `...` it gives a 0-d view instead, as PyTorch's x[i, j] is one, so
            # that x[i, j].fill_(v) or p[0].zero_() under no_grad writes into x.
            out = a[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, index = inputs
        ctx.shape, ctx.dtype, ctx.index = a.shape, a.dtype, index

    @staticmethod
    def backward(ctx, g):
        if is_basic_index(ctx.index):  # the engine adds it into its sum on the slice alone
            return _function.SliceGrad(ctx.shape, ctx.index, g), None
        return IndexGrad.forward(g, ctx.shape, ctx.index), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return IndexGrad.apply(g, ctx.shape, ctx.index), None


class PadIndex(Index):
    """:class:`Index` as padding by reflection or replication (``F.pad``) uses it: the same
    op, whose gradient stays in the input's graph in a ``create_graph`` pass, as PyTorch's
    (its backward of these paddings reads the input: a later backward gives it zeros)."""

    @staticmethod
    def backward_graph(ctx, g, saved):
        return IndexGrad.apply(g, ctx.shape, ctx.index, saved.input(0, ctx.shape, g)), None


class IndexGrad(Function):
    """The gradient of ``a[index]``: zeros of ``a``'s ``shape`` with ``g`` added at ``index``
    (a plain add for basic indices, ``add.at`` for advanced ones, where an index may repeat
    and its gradients accumulate). Index's backward; as an op of its own, Index's backward
    in a ``create_graph`` pass, whose gradient is ``g[index]`` again. ``anchor``: as in
    :class:`GradMask` (max pooling's input, whose arg-max chose the places)."""

    @staticmethod
    def forward(g, shape, index, anchor=None):
        grad = get_array_module(g).zeros(shape, dtype=g.dtype)
        if is_basic_index(index):
            grad[index] += g
        else:
            index_add(grad, index, g)  # repeated indices accumulate
        return grad

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.index = inputs[2]
        ctx.like = (inputs[3].shape, inputs[3].dtype) if len(inputs) > 3 else None

    @staticmethod
    def backward(ctx, h):
        zero = (get_array_module(h).zeros(*ctx.like),) if ctx.like is not None else ()
        return Index.forward(h, ctx.index), None, None, *zero

    @staticmethod
    def backward_graph(ctx, h, saved):
        zero = (_const(get_array_module(h._data).zeros(*ctx.like)),) if ctx.like else ()
        return Index.apply(h, ctx.index), None, None, *zero


class IndexPut(Function):
    """``a`` with ``a[index] = v``: the gradient at ``index`` goes to ``v``, the rest to ``a``."""

    @staticmethod
    def forward(a, v, index):
        out = a.copy()
        out[index] = v
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.v_shape, ctx.index = inputs[1].shape, inputs[2]

    @staticmethod
    def backward(ctx, g):
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = get_array_module(g).array(g)  # a copy, and an array also when g is 0-d
            ga[ctx.index] = 0
        if ctx.needs_input_grad[1]:
            gv = unbroadcast(g[ctx.index], ctx.v_shape)
        return ga, gv, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        ga = gv = None
        if ctx.needs_input_grad[0]:  # (a mask: where v was written, 0)
            keep = get_array_module(g._data).ones(g.shape, bool)
            keep[ctx.index] = False
            ga = masked_graph(g, keep)
        if ctx.needs_input_grad[1]:  # (Index: its gradient adds up repeated places)
            gv = unbroadcast_graph(Index.apply(g, ctx.index), ctx.v_shape)
        return ga, gv, None


class Copy(Function):
    """The values of ``b`` broadcast to ``a``'s shape (``a.copy_(b)``); ``a``'s old values
    get a zero gradient (as PyTorch: a leaf below then has ``.grad`` zeros, not None)."""

    @staticmethod
    def forward(a, b):
        xp = get_array_module(a)
        if isinstance(b, np.generic | int | float):  # a number (CuPy broadcasts arrays only)
            return xp.full(a.shape, b, dtype=a.dtype)
        return xp.broadcast_to(b, a.shape).astype(a.dtype, copy=True)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.b_shape = inputs[1].shape

    @staticmethod
    def backward(ctx, g):
        return (get_array_module(g).zeros_like(g) if ctx.needs_input_grad[0] else None,
                unbroadcast(g, ctx.b_shape) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        return (_const(get_array_module(g._data).zeros_like(g._data))
                if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(g, ctx.b_shape) if ctx.needs_input_grad[1] else None)


class Clone(Function):
    """A C-contiguous copy (``clone()``, ``contiguous()``); the gradient passes unchanged."""

    @staticmethod
    def forward(a):
        return a.copy(order="C")

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def backward_graph(ctx, g, saved):
        return g


class Cat(Function):
    """Arrays joined along ``axis`` (``torch.cat``); backward splits the gradient again."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(axis, *arrays):
        return get_array_module(arrays[0]).concatenate(arrays, axis=axis)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.axis = inputs[0]
        ctx.bounds = np.cumsum([a.shape[inputs[0]] for a in inputs[1:]])[:-1].tolist()

    @staticmethod
    def backward(ctx, g):
        parts = get_array_module(g).split(g, ctx.bounds, axis=ctx.axis)
        return (None, *(p if need else None
                        for p, need in zip(parts, ctx.needs_input_grad[1:])))

    @staticmethod
    def backward_graph(ctx, g, saved):
        axis = ctx.axis
        bounds = [0, *ctx.bounds, g.shape[axis]]
        return (None, *(Index.apply(g, (slice(None),) * axis + (slice(lo, hi),)) if need else None
                        for lo, hi, need in zip(bounds, bounds[1:], ctx.needs_input_grad[1:])))


# -------------------------------------------------------------------- softmax, loss


def log_softmax_array(a: Any, axis: int) -> Any:
    """Numerically stable ``log(softmax(a))`` along ``axis`` (subtract the max first)."""
    xp = get_array_module(a)
    shifted = a - a.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


class LogSoftmax(Function):
    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis):
        return log_softmax_array(a, axis)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.axis = inputs[1]

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        xp = get_array_module(g)
        return g - xp.exp(out) * g.sum(axis=ctx.axis, keepdims=True), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        (out,) = saved
        return g - Exp.apply(out) * Sum.apply(g, (ctx.axis,), True), None


class Softmax(Function):
    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis):
        xp = get_array_module(a)
        e = xp.exp(a - a.max(axis=axis, keepdims=True))
        e /= e.sum(axis=axis, keepdims=True)
        return e

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.axis = inputs[1]

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        return p * (g - (g * p).sum(axis=ctx.axis, keepdims=True)), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        (p,) = saved
        return p * (g - Sum.apply(g * p, (ctx.axis,), True)), None


class Normalize(Function):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` in one node: the core of LayerNorm,
    BatchNorm, GroupNorm and InstanceNorm (:mod:`tinytrain.nn.functional` builds them on it).

    ``x [*]``; ``weight`` and ``bias`` (or None) broadcast against ``x``; ``axes`` are the
    axes the statistics are taken over. ``stats=None``: the batch's own, the mean and the
    biased variance over ``axes`` (two passes: the mean, then the mean square of ``x -
    mean``), which forward also puts in the list ``moments`` (BatchNorm's running averages
    need them); the gradient flows through them. ``stats=(mean, var)`` (arrays that broadcast
    against ``x``): constants, as BatchNorm's running statistics in eval mode.

    Why one node: composed of ops, a LayerNorm is ten nodes, each a whole-array pass that
    allocates, and keeps five arrays of ``x``'s size for backward (5.5x PyTorch's time on
    ``[32, 100, 512]``). Here backward is the closed form, with ``xhat = (x - mean) * rstd``,
    ``gy = g * weight`` and the means over ``axes``::

        dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat))
        dweight = sum(g * xhat),  dbias = sum(g)     (over the axes they broadcast along)

    and only ``x``, ``weight`` and the small ``mean`` and ``rstd`` are kept, as PyTorch's.
    (With constant statistics, ``dx = g * weight * rstd``.)
    """

    new_grads = True  # backward's arrays are its own

    @staticmethod
    def forward(x, weight, bias, axes, eps, stats, moments):
        xp = get_array_module(x)
        out = _scratch(xp, x.shape, x.dtype)
        if stats is None:
            mean = x.mean(axis=axes, keepdims=True)
            xp.subtract(x, mean, out=out)
            var = _dot_over(out, out, axes) / _count(x.shape, axes)
            moments[:] = [mean, var]
        else:
            mean, var = stats
            xp.subtract(x, mean, out=out)
        rstd = 1 / xp.sqrt(var + eps)
        if weight is not None and math.prod(np.broadcast_shapes(rstd.shape, weight.shape)) < x.size:
            out *= rstd * weight  # (BatchNorm: one factor per channel)
        else:
            out *= rstd
            if weight is not None:
                out *= weight
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias, ctx.axes, eps, stats, moments = inputs
        ctx.constant = stats is not None
        mean, var = moments if stats is None else stats
        ctx.mean, ctx.rstd = mean, 1 / get_array_module(x).sqrt(var + eps)
        ctx.eps, ctx.bias_shape = eps, None if bias is None else bias.shape
        ctx.save_for_backward(x, weight)

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        xp = get_array_module(g)
        shape = weight.shape if weight is not None else ctx.bias_shape
        along = _broadcast_axes(x.ndim, shape)  # the axes weight and bias are broadcast along
        xhat = _scratch(xp, x.shape, x.dtype)
        xp.subtract(x, ctx.mean, out=xhat)
        xhat *= ctx.rstd
        dw = _dot_over(g, xhat, along).reshape(shape) if need_w else None
        db = g.sum(axis=along).reshape(shape) if need_b else None
        dx = None
        if need_x:
            dx = _scratch(xp, x.shape, g.dtype)
            scale = ctx.rstd if weight is None else ctx.rstd * weight
            if ctx.constant:
                xp.multiply(g, scale, out=dx)
                return dx, dw, db, None, None, None, None
            n = _count(x.shape, ctx.axes)
            per_channel = weight is None or set(ctx.axes) <= set(along)  # constant along axes
            gy = g if per_channel else xp.multiply(g, weight, out=_scratch(xp, x.shape, dx.dtype))
            xhat *= _dot_over(gy, xhat, ctx.axes) / n
            xp.subtract(gy, gy.mean(axis=ctx.axes, keepdims=True), out=dx)
            dx -= xhat
            dx *= scale if per_channel else ctx.rstd
        return dx, dw, db, None, None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        x, weight = saved
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        axes = ctx.axes
        shape = weight.shape if weight is not None else ctx.bias_shape
        along = _broadcast_axes(x.ndim, shape)
        if ctx.constant:
            mean, rstd = _const(ctx.mean), _const(ctx.rstd)
        else:
            mean = x.mean(axes, keepdim=True)
            rstd = (((x - mean) * (x - mean)).mean(axes, keepdim=True) + ctx.eps).rsqrt()
        xhat = (x - mean) * rstd

        def total(t):  # summed along the parameters' broadcast axes (none: as it is)
            return (t.sum(along) if along else t).reshape(shape)

        dw = total(g * xhat) if need_w else None
        db = total(g) if need_b else None
        dx = None
        if need_x:
            gy = g if weight is None else g * weight
            dx = gy * rstd if ctx.constant else rstd * (
                gy - gy.mean(axes, keepdim=True) - xhat * (gy * xhat).mean(axes, keepdim=True))
        return dx, dw, db, None, None, None, None


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    """How many elements each statistic over ``axes`` of an array of ``shape`` averages."""
    return math.prod(shape[a] for a in axes)


def _broadcast_axes(ndim: int, shape: tuple[int, ...] | None) -> tuple[int, ...]:
    """The axes of an ``ndim``-d array that an array of ``shape`` is broadcast along."""
    if shape is None:  # (no parameters)
        return ()
    lead = ndim - len(shape)
    return tuple(a for a in range(ndim) if a < lead or shape[a - lead] == 1)


def _dot_over(a: Any, b: Any, axes: tuple[int, ...]) -> Any:
    """``(a * b).sum(axes, keepdims=True)`` through ``einsum``, without the product's
    temporary (3x faster on ``[3200, 512]``). When the last axis is one of ``axes`` it is
    summed first, then the others by NumPy's pairwise sum: a row (one token's features, one
    image plane) is short enough for einsum's running sum to keep float32's digits."""
    xp = get_array_module(a)
    letters = "abcdefghijklmnopqrstuvwxyz"[: a.ndim]
    last = a.ndim - 1
    if last not in axes:
        kept = "".join(c for i, c in enumerate(letters) if i not in axes)
        return xp.einsum(f"{letters},{letters}->{kept}", a, b).reshape(
            [1 if i in axes else n for i, n in enumerate(a.shape)])
    rows = xp.einsum(f"{letters},{letters}->{letters[:-1]}", a, b)[..., None]
    rest = tuple(ax for ax in axes if ax != last)
    return rows.sum(axis=rest, keepdims=True) if rest else rows


def _scratch(xp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """An uninitialised array; on the CPU from the kernels' cache of large blocks (its pages
    are already mapped: a fresh 32 MiB array costs ~3 ms of page faults on the course VM)."""
    if xp is np:
        from tinytrain.kernels.cpu import memory  # noqa: PLC0415

        return memory.empty(shape, dtype=dtype)
    return xp.empty(shape, dtype=dtype)


class NLLLoss(Function):
    """Mean (or sum, or none) of ``-logp[i, targets[i]]`` for log-probabilities ``logp [N, C]``."""

    @staticmethod
    def forward(logp, targets, reduction):
        xp = get_array_module(logp)
        nll = -logp[xp.arange(logp.shape[0]), targets]
        return nll.mean() if reduction == "mean" else nll.sum() if reduction == "sum" else nll

    @staticmethod
    def setup_context(ctx, inputs, output):
        logp, targets, reduction = inputs
        ctx.shape, ctx.dtype, ctx.reduction = logp.shape, logp.dtype, reduction
        ctx.save_for_backward(targets)

    @staticmethod
    def backward(ctx, g):
        (targets,) = ctx.saved_tensors
        xp = get_array_module(g)
        n = ctx.shape[0]
        grad = xp.zeros(ctx.shape, dtype=ctx.dtype)
        scale = -g / g.dtype.type(n) if ctx.reduction == "mean" else -g
        grad[xp.arange(n), targets] = scale
        return grad, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        onehot, _ = _one_hot(saved[0]._data, ctx.shape, ctx.dtype)
        n = ctx.shape[0]
        scale = (-g / g.dtype.type(n) if ctx.reduction == "mean" else -g if ctx.reduction == "sum"
                 else Reshape.apply(-g, (n, 1)))
        return _const(onehot) * scale, None, None


class BCEWithLogits(Function):
    """Binary cross-entropy of targets ``y`` in [0, 1] under logits ``z`` (same shape),
    per element: ``max(z, 0) - z y + log(1 + exp(-|z|))``, stable for any ``z``; its
    derivative is ``sigmoid(z) - y``."""

    @staticmethod
    def forward(z, y):
        xp = get_array_module(z)
        return xp.maximum(z, 0) - z * y + xp.log1p(xp.exp(-xp.abs(z)))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        z, y = ctx.saved_tensors
        xp = get_array_module(z)
        e = xp.exp(-xp.abs(z))
        sig = xp.where(z >= 0, 1 / (1 + e), e / (1 + e)).astype(z.dtype, copy=False)
        gz = g * (sig - y) if ctx.needs_input_grad[0] else None
        gy = -g * z if ctx.needs_input_grad[1] else None
        return gz, gy

    @staticmethod
    def backward_graph(ctx, g, saved):
        z, y = saved
        gz = g * (Sigmoid.apply(z) - y) if ctx.needs_input_grad[0] else None
        gy = -g * z if ctx.needs_input_grad[1] else None
        return gz, gy


class BinaryCrossEntropy(Function):
    """Binary cross-entropy of targets ``y`` under probabilities ``p`` (same shape), per
    element, as PyTorch computes it: each log clamped at -100, and the derivative
    ``(p - y) / max(p (1 - p), 1e-12)`` so that p = 0 or 1 gives finite numbers. PyTorch's
    1e-12 is a float32 constant (9.999999960041972e-13) in every dtype, so float64's
    gradient at p = 0, y = 1 is -1.0000000039958029e12, not -1e12; so is this one's."""

    @staticmethod
    def forward(p, y):
        xp = get_array_module(p)
        with np.errstate(divide="ignore"):
            log_p, log_q = xp.maximum(xp.log(p), -100), xp.maximum(xp.log(1 - p), -100)
        return -(y * log_p + (1 - y) * log_q)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        p, y = ctx.saved_tensors
        xp = get_array_module(p)
        gp = gy = None
        if ctx.needs_input_grad[0]:
            gp = g * (p - y) / xp.maximum(p * (1 - p), p.dtype.type(np.float32(1e-12)))
        if ctx.needs_input_grad[1]:
            with np.errstate(divide="ignore"):
                gy = g * (xp.maximum(xp.log(1 - p), -100) - xp.maximum(xp.log(p), -100))
        return gp, gy

    @staticmethod
    def backward_graph(ctx, g, saved):
        p, y = saved
        gp = gy = None
        if ctx.needs_input_grad[0]:
            floor = p.dtype.type(np.float32(1e-12))
            gp = g * (p - y) / Maximum.apply(p * (1 - p), floor)
        if ctx.needs_input_grad[1]:
            low = p.dtype.type(-100)
            gy = g * (Maximum.apply(Log.apply(1 - p), low) - Maximum.apply(Log.apply(p), low))
        return gp, gy


class CrossEntropy(Function):
    """Mean (or sum) negative log-likelihood of integer ``targets [N]`` under ``logits [N, C]``.

    Fused log-softmax + NLL: backward needs only the softmax, ``(p - onehot) / N``.
    The logits are saved (they are alive anyway, as the previous layer's output) and
    the softmax is computed in backward, so forward computes the log-softmax once. The
    kernels also check the targets: at once on the CPU, without a host sync on the GPU
    (see ``F.cross_entropy``).
    """

    @staticmethod
    def forward(logits, targets, reduction):
        return kernels.for_array(logits).cross_entropy_forward(logits, targets, reduction)

    @staticmethod
    def setup_context(ctx, inputs, output):
        logits, targets, reduction = inputs
        ctx.save_for_backward(logits, targets)
        ctx.reduction = reduction

    @staticmethod
    def backward(ctx, g):
        logits, targets = ctx.saved_tensors
        k = kernels.for_array(logits)
        return k.cross_entropy_backward(logits, targets, g, ctx.reduction), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        logits, targets = saved
        onehot, kept = _one_hot(targets._data, logits.shape, logits.dtype)
        diff = (Softmax.apply(logits, 1) - _const(onehot)) * _const(kept)
        if ctx.reduction == "none":
            return diff * Reshape.apply(g, (g.shape[0], 1)), None, None
        if ctx.reduction == "mean":  # over the rows not ignored (all of them on the CPU)
            g = g / _const(get_array_module(kept).maximum(kept.sum(), 1).astype(g.dtype))
        return diff * g, None, None


# ------------------------------------------------------- more element-wise ops


class Sin(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).sin(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * get_array_module(a).cos(a)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return g * Cos.apply(a)


class Cos(Function):
    @staticmethod
    def forward(a):
        return get_array_module(a).cos(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return -g * get_array_module(a).sin(a)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return -g * Sin.apply(a)


class Log1p(Function):
    """``log(1 + a)``, accurate for small ``a``."""

    @staticmethod
    def forward(a):
        return get_array_module(a).log1p(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g / (1 + a)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return g / (1 + a)


class Expm1(Function):
    """``exp(a) - 1``, accurate for small ``a``."""

    @staticmethod
    def forward(a):
        return get_array_module(a).expm1(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (out + 1)

    @staticmethod
    def backward_graph(ctx, g, saved):
        (out,) = saved
        return g * (out + 1)


class Rounding(Function):
    """``floor``, ``ceil``, ``round``, ``trunc``, ``sign`` (by name): piecewise constant, so
    the gradient is zero everywhere (PyTorch's choice)."""

    @staticmethod
    def forward(a, name):
        xp = get_array_module(a)
        out = getattr(xp, name)(a)
        if name == "sign" and a.dtype.kind == "f":  # PyTorch's sign(nan) is 0 (not in
            out = xp.where(xp.isnan(a), xp.zeros((), out.dtype), out)  # place: a 0-d
            # ``a`` gives a NumPy scalar, which cannot be written in place)
        return out

    @staticmethod
    def backward(ctx, g):
        return get_array_module(g).zeros_like(g), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return _const(get_array_module(g._data).zeros_like(g._data)), None


class DivRounded(Function):
    """``a / b`` rounded toward zero (``"trunc"``) or down (``"floor"``): ``torch.div`` with a
    ``rounding_mode``. As in PyTorch its gradient is zero."""

    @staticmethod
    def forward(a, b, mode):
        xp = get_array_module(a)
        if a.dtype.kind == "f":  # floor as Python's // (1.0 // 0.1 is 9, not floor(10.0))
            return _fmod_floor(xp, a, b)[0] if mode == "floor" else xp.trunc(a / b)
        q = a // b  # integers: floor division, then one up where trunc rounds toward zero
        if mode == "trunc":
            q = q + ((q < 0) & (q * b != a))
        return q

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shapes = (getattr(inputs[0], "shape", ()), getattr(inputs[1], "shape", ()))

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        return (xp.zeros(ctx.shapes[0], g.dtype) if ctx.needs_input_grad[0] else None,
                xp.zeros(ctx.shapes[1], g.dtype) if ctx.needs_input_grad[1] else None, None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        return _zero_grads_graph(ctx, g, ctx.shapes) + (None,)


class Where(Function):
    """``where(cond, a, b)``: ``a`` where ``cond`` holds, else ``b`` (all broadcast; ``a``
    or ``b`` may be a scalar). Each side gets the gradient where it was chosen."""

    @staticmethod
    def forward(cond, a, b):
        return get_array_module(cond).where(cond, a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        cond, a, b = inputs
        ctx.save_for_backward(cond)
        ctx.shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        xp, zero = get_array_module(g), g.dtype.type(0)
        ga = gb = None
        if ctx.needs_input_grad[1]:
            ga = unbroadcast(xp.where(cond, g, zero), ctx.shapes[0])
        if ctx.needs_input_grad[2]:
            gb = unbroadcast(xp.where(cond, zero, g), ctx.shapes[1])
        return None, ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        cond, zero = saved[0]._data, g.dtype.type(0)
        ga = gb = None
        if ctx.needs_input_grad[1]:
            ga = unbroadcast_graph(Where.apply(cond, g, zero), ctx.shapes[0])
        if ctx.needs_input_grad[2]:
            gb = unbroadcast_graph(Where.apply(cond, zero, g), ctx.shapes[1])
        return None, ga, gb


class LeakyReLU(Function):
    """``a`` where ``a > 0``, else ``slope * a``; also ``nn.ELU``'s negative side with
    ``elu=True``: ``alpha * (exp(a) - 1)``, whose derivative is ``alpha * exp(a)``
    (from the input, as PyTorch: the output may be written in place before backward)."""

    @staticmethod
    def forward(a, slope, elu):
        if elu:
            xp = get_array_module(a)
            return xp.where(a > 0, a, slope * xp.expm1(a)).astype(a.dtype, copy=False)
        return get_array_module(a).where(a > 0, a, a * a.dtype.type(slope))

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.slope, ctx.elu = inputs
        ctx.save_for_backward(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        xp, slope = get_array_module(g), g.dtype.type(ctx.slope)
        below = g * (slope * xp.exp(xp.minimum(a, 0))) if ctx.elu else g * slope
        return xp.where(a > 0, g, below), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        slope = g.dtype.type(ctx.slope)
        if not ctx.elu:
            xp = get_array_module(a._data)
            return masked_graph(g, xp.where(a._data > 0, 1, slope).astype(g.dtype), a), None, None
        # (exp of min(a, 0): no inf on the side where() drops, whose gradient would be NaN)
        below = g * (slope * Exp.apply(Clamp.apply(a, None, a.dtype.type(0))))
        return Where.apply(a._data > 0, g, below), None, None


class SiLU(Function):
    """``a * sigmoid(a)`` (swish); its derivative is ``s (1 + a (1 - s))``."""

    @staticmethod
    def forward(a):
        return a * Sigmoid.forward(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        s = Sigmoid.forward(a)
        return g * s * (1 + a * (1 - s))

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        s = Sigmoid.apply(a)
        return g * s * (1 + a * (1 - s))


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


class GELU(Function):
    """``a * Phi(a)``, Phi the standard normal CDF (``"none"``, with ``erf``), or PyTorch's
    ``"tanh"`` approximation ``0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))``."""

    @staticmethod
    def forward(a, approximate):
        xp = get_array_module(a)
        if approximate == "tanh":
            # a * a * a, as PyTorch's kernel: NumPy's a ** 3 is pow() per element, 4x slower
            return 0.5 * a * (1 + xp.tanh(_SQRT_2_OVER_PI * (a + 0.044715 * (a * a * a))))
        if xp is np and a.dtype.itemsize < 8:  # one fitted polynomial, one exp (more_ops)
            from tinytrain.more_ops import gelu_array  # noqa: PLC0415 (more_ops imports ops)

            return gelu_array(a)
        return (0.5 * a * (1 + erf(a * math.sqrt(0.5)))).astype(a.dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.approximate = inputs
        ctx.save_for_backward(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        xp = get_array_module(a)
        if ctx.approximate == "tanh":
            inner = _SQRT_2_OVER_PI * (a + 0.044715 * (a * a * a))
            t = xp.tanh(inner)
            d_inner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a * a)
            return g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * d_inner), None
        if xp is np and a.dtype.itemsize < 8:
            from tinytrain.more_ops import gelu_slope_array  # noqa: PLC0415

            return (g * gelu_slope_array(a)).astype(g.dtype, copy=False), None
        cdf = 0.5 * (1 + erf(a * math.sqrt(0.5)))
        pdf = xp.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        return (g * (cdf + a * pdf)).astype(g.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        if ctx.approximate == "tanh":
            t = Tanh.apply(_SQRT_2_OVER_PI * (a + 0.044715 * a ** 3))
            d_inner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a * a)
            return g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * d_inner), None
        from tinytrain.more_ops import Erf  # noqa: PLC0415 (more_ops imports this module)

        cdf = 0.5 * (1 + Erf.apply(a * math.sqrt(0.5)))
        pdf = Exp.apply(-0.5 * a * a) / math.sqrt(2 * math.pi)
        return g * (cdf + a * pdf), None


def erf(a: Any) -> Any:
    """The error function, element-wise, in ``a``'s dtype. NumPy has none: on the CPU,
    float64 takes ``math.erf`` per element (the C library's, within an ulp), float32 and
    float16 ``more_ops.erf_array`` (Cody's rational functions in float64, whole-array passes
    on L2-sized pieces: 4x faster, and within float64's few ulps of ``math.erf``, which the
    rounding to float32 hides); CuPy's ``erf`` kernel on the GPU."""
    if get_array_module(a) is np:
        if a.dtype.itemsize < 8:
            from tinytrain.more_ops import erf_array  # noqa: PLC0415 (more_ops imports ops)

            return erf_array(a)
        return np.fromiter(map(math.erf, a.ravel().tolist()), dtype=a.dtype,
                           count=a.size).reshape(a.shape)
    import cupyx.scipy.special  # noqa: PLC0415 (only on the GPU)

    return cupyx.scipy.special.erf(a)


class Softplus(Function):
    """``log(1 + exp(beta a)) / beta``, and ``a`` itself where ``beta a > threshold``
    (PyTorch's cut-off); the derivative is ``sigmoid(beta a)`` (1 past the cut-off)."""

    @staticmethod
    def forward(a, beta, threshold):
        xp = get_array_module(a)
        z = a * a.dtype.type(beta)
        soft = (xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))) / a.dtype.type(beta)
        return xp.where(z > threshold, a, soft)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.beta, ctx.threshold = inputs
        ctx.save_for_backward(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        z = a * a.dtype.type(ctx.beta)
        return get_array_module(g).where(z > ctx.threshold, g, g * Sigmoid.forward(z)), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        z = a * a.dtype.type(ctx.beta)
        return Where.apply(z._data > ctx.threshold, g, g * Sigmoid.apply(z)), None, None


class Norm(Function):
    """The ``p``-norm over ``axis`` (all if None), ``p != 0``: ``sum(|a|^p)^(1/p)``. Its
    gradient ``sign(a) (|a| / norm)^(p-1)`` is taken as 0 where ``a`` or the norm is 0
    (PyTorch's subgradient; for ``p < 1`` the formula is infinite there)."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, p, axis, keepdims):
        xp = get_array_module(a)
        with np.errstate(all="ignore"):  # p < 0: a zero makes the norm 0, as in PyTorch;
            if p == 2:                   # overflow to inf, silently (tinytrain/__init__.py)
                return xp.sqrt((a * a).sum(axis=axis, keepdims=keepdims))
            return (xp.abs(a) ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.p, ctx.axis, ctx.keepdims = inputs
        ctx.save_for_backward(a, output)

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_tensors
        xp, p = get_array_module(g), ctx.p
        g = _expand_reduced(g, a.shape, ctx.axis, ctx.keepdims)
        out = _expand_reduced(out, a.shape, ctx.axis, ctx.keepdims)
        zero = (out == 0) if p == 2 else (out == 0) | (a == 0)
        safe = xp.where(out == 0, 1, out)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            d = a / safe if p == 2 else xp.sign(a) * (xp.abs(a) / safe) ** (p - 1)
            return xp.where(zero, 0, g * d).astype(g.dtype, copy=False), None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, out = saved
        p = ctx.p
        g = expand_reduced_graph(g, a.shape, ctx.axis, ctx.keepdims)
        out = expand_reduced_graph(out, a.shape, ctx.axis, ctx.keepdims)
        at_zero = out._data == 0
        zero = at_zero if p == 2 else at_zero | (a._data == 0)
        safe = Where.apply(at_zero, out.dtype.type(1), out)
        if p == 2:
            d = a / safe
        else:
            d = _const(get_array_module(a._data).sign(a._data)) * (Abs.apply(a) / safe) ** (p - 1)
        return Where.apply(zero, g.dtype.type(0), g * d), None, None, None


# -------------------------------------------------------- shapes: expand, repeat, pad


class Expand(Function):
    """``a`` broadcast to ``shape`` (a view that repeats memory); backward sums back."""

    @staticmethod
    def forward(a, shape):
        return get_array_module(a).broadcast_to(a, shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shape), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return unbroadcast_graph(g, ctx.shape), None


def strided_view(a: Any, shape: tuple[int, ...], strides: tuple[int, ...],
                 writeable: bool = True) -> Any:
    """A view of ``a``'s memory with the given shape and strides (in bytes), NumPy's or
    CuPy's ``lib.stride_tricks.as_strided``; NumPy's is made read-only unless
    ``writeable`` (a view whose elements overlap, where a write would land twice)."""
    view = get_array_module(a).lib.stride_tricks.as_strided(a, shape, strides)
    if not writeable and hasattr(view, "flags") and hasattr(view.flags, "writeable"):
        view.flags.writeable = False  # (CuPy's arrays have no such flag)
    return view


class Unfold(Function):
    """``a.unfold(axis, size, step)``: the windows of ``size`` elements along ``axis``, one
    every ``step``, as a view ``[..., n_windows, ..., size]`` (the window last). Backward adds
    each window's gradient back where it came from (overlapping windows sum)."""

    as_strided_view = True

    @staticmethod
    def forward(a, axis, size, step):
        n = (a.shape[axis] - size) // step + 1
        shape = a.shape[:axis] + (n,) + a.shape[axis + 1:] + (size,)
        strides = (a.strides[:axis] + (a.strides[axis] * step,) + a.strides[axis + 1:]
                   + (a.strides[axis],))
        return strided_view(a, shape, strides, writeable=step >= size)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.axis, _, ctx.step = inputs
        ctx.shape, ctx.dtype = a.shape, a.dtype

    @staticmethod
    def backward(ctx, g):
        grad = get_array_module(g).zeros(ctx.shape, dtype=ctx.dtype)
        n, before = g.shape[ctx.axis], (slice(None),) * ctx.axis
        for k in range(g.shape[-1]):  # position k of every window: one strided slice
            grad[before + (slice(k, k + ctx.step * (n - 1) + 1, ctx.step),)] += g[..., k]
        return grad, None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):  # (linear: its adjoint is the windows again)
        return adjoint(Unfold, ctx, g, 0, (None, ctx.axis, g.shape[-1], ctx.step)), None, None, None


class Diagonal(Function):
    """``a.diagonal(offset, dim1, dim2)``: the entries ``[i, i + offset]`` of the ``dim1`` x
    ``dim2`` planes, as a view with the diagonal as the last dimension (NumPy's own
    ``diagonal`` is read-only; this one writes through, as PyTorch's). Backward puts the
    gradient on the diagonal of zeros."""

    as_strided_view = True

    @staticmethod
    def forward(a, offset, dim1, dim2):
        start = [0] * a.ndim
        start[dim2 if offset >= 0 else dim1] = min(abs(offset), a.shape[dim2 if offset >= 0
                                                                        else dim1])
        corner = a[tuple(slice(s, None) for s in start)]
        length = min(corner.shape[dim1], corner.shape[dim2])
        rest = [d for d in range(a.ndim) if d not in (dim1, dim2)]
        return strided_view(corner, tuple(a.shape[d] for d in rest) + (length,),
                            tuple(a.strides[d] for d in rest)
                            + (a.strides[dim1] + a.strides[dim2],))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape, ctx.dtype, ctx.args = inputs[0].shape, inputs[0].dtype, inputs[1:]

    @staticmethod
    def backward(ctx, g):
        grad = get_array_module(g).zeros(ctx.shape, dtype=ctx.dtype)
        Diagonal.forward(grad, *ctx.args)[...] = g
        return grad, None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return adjoint(Diagonal, ctx, g, 0, (None, *ctx.args)), None, None, None


class DiagEmbed(Function):
    """``diag_embed(a, offset, dim1, dim2)``: zeros whose ``(dim1, dim2)`` diagonals hold
    ``a``'s last dimension (the inverse layout of :class:`Diagonal`); backward reads the
    gradient's diagonal."""

    @staticmethod
    def forward(a, offset, dim1, dim2):
        n = a.shape[-1] + abs(offset)
        shape = list(a.shape[:-1])
        for d in sorted((dim1, dim2)):
            shape.insert(d, n)
        out = get_array_module(a).zeros(shape, dtype=a.dtype)
        Diagonal.forward(out, offset, dim1, dim2)[...] = a
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.args = inputs[1:]

    @staticmethod
    def backward(ctx, g):
        return Diagonal.forward(g, *ctx.args).copy(), None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return adjoint(DiagEmbed, ctx, g, 0, (None, *ctx.args)), None, None, None


class Flip(Function):
    """``a`` reversed along ``axes`` (a copy, as in PyTorch); backward reverses the gradient."""

    @staticmethod
    def forward(a, axes):
        return get_array_module(a).flip(a, axes).copy()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.axes = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return get_array_module(g).flip(g, ctx.axes), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return Flip.apply(g, ctx.axes), None


class Repeat(Function):
    """``a`` tiled ``reps`` times per dimension (``Tensor.repeat``; ``len(reps) >= a.ndim``,
    extra leading reps add dimensions). Backward sums the copies."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, reps):
        return get_array_module(a).tile(a, reps)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, reps = inputs
        ctx.shape = (1,) * (len(reps) - a.ndim) + a.shape
        ctx.reps, ctx.in_shape = reps, a.shape

    @staticmethod
    def backward(ctx, g):
        split = [n for pair in zip(ctx.reps, ctx.shape) for n in pair]  # (r0, s0, r1, s1, ...)
        summed = g.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return summed.reshape(ctx.in_shape), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        split = tuple(n for pair in zip(ctx.reps, ctx.shape) for n in pair)
        summed = Sum.apply(Reshape.apply(g, split), tuple(range(0, len(split), 2)), False)
        return Reshape.apply(summed, ctx.in_shape), None


class Pad(Function):
    """Constant padding: ``widths`` is one ``(before, after)`` pair per dimension."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, widths, value):
        return get_array_module(a).pad(a, widths, constant_values=value)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.crop = tuple(slice(lo, n - hi) for (lo, hi), n in zip(inputs[1], output.shape))

    @staticmethod
    def backward(ctx, g):
        return g[ctx.crop], None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return Index.apply(g, ctx.crop), None, None


class Cumsum(Function):
    """Running sum along ``axis``; integer and bool inputs sum in int64 (as PyTorch).
    The gradient is the reversed running sum of the gradient."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis):
        return a.cumsum(axis=axis, dtype="int64" if a.dtype.kind in "biu" else None)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.axis = inputs[1]

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        return xp.flip(xp.flip(g, ctx.axis).cumsum(axis=ctx.axis), ctx.axis), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        axes = (ctx.axis,)
        return Flip.apply(Cumsum.apply(Flip.apply(g, axes), ctx.axis), axes), None


class Cumprod(Function):
    """Running product along ``axis``; integer and bool inputs multiply in int64.

    The gradient, as PyTorch's ``cumprod_backward``: ``d out_j / d a_i`` is the product of
    ``a_0..a_j`` but ``a_i``. Before the first zero of a slice that is ``out_j / a_i``, so the
    gradient is the reversed running sum of ``g * out`` over ``a_i`` (the outputs from the
    zero on are 0 and add nothing). At the first zero it is the running product with that
    zero taken as 1 (later zeros end it). After the first zero it is 0."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, axis):
        return a.cumprod(axis=axis, dtype="int64" if a.dtype.kind in "biu" else None)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.axis = inputs[1]
        ctx.save_for_backward(inputs[0], output)

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_tensors
        xp, axis = get_array_module(g), ctx.axis

        def reversed_cumsum(x: Any) -> Any:
            return xp.flip(xp.flip(x, axis).cumsum(axis=axis), axis)

        zero = a == 0
        zeros_so_far = zero.cumsum(axis=axis)
        before, first = zeros_so_far == 0, zero & (zeros_so_far == 1)
        with np.errstate(all="ignore"):
            grad = xp.where(before, reversed_cumsum(g * out) / xp.where(before, a, 1), 0)
        through_zero = xp.where(first, 1, a).cumprod(axis=axis)
        grad = xp.where(first, reversed_cumsum(g * through_zero), grad)
        return grad.astype(g.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        """``backward``'s three cases with differentiable ops (the masks are constants)."""
        a, out = saved
        axis, one, zero = ctx.axis, a.dtype.type(1), g.dtype.type(0)

        def reversed_cumsum(x: Any) -> Any:
            return Flip.apply(Cumsum.apply(Flip.apply(x, (axis,)), axis), (axis,))

        zeros = a._data == 0
        zeros_so_far = zeros.cumsum(axis=axis)
        before, first = zeros_so_far == 0, zeros & (zeros_so_far == 1)
        grad = Where.apply(before, reversed_cumsum(g * out) / Where.apply(before, a, one), zero)
        if not first.any():
            return grad, None
        through_zero = Cumprod.apply(Where.apply(first, one, a), axis)
        return Where.apply(first, reversed_cumsum(g * through_zero), grad), None


class Roll(Function):
    """``a`` shifted cyclically by ``shifts`` along ``axes`` (``torch.roll``; ``axes`` None:
    the flattened tensor, one shift). Backward rolls the gradient back."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, shifts, axes):
        return get_array_module(a).roll(a, shifts, axes)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, shifts, ctx.axes = inputs
        ctx.back = -shifts if ctx.axes is None else tuple(-s for s in shifts)

    @staticmethod
    def backward(ctx, g):
        return get_array_module(g).roll(g, ctx.back, ctx.axes), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return Roll.apply(g, ctx.back, ctx.axes), None, None


# ------------------------------------------------------------ gather and scatter


def _full_index(index: Any, axis: int) -> tuple[Any, ...]:
    """The advanced index that picks ``a[i0, .., index[i0, .., ik], .., ik]`` for every
    position of ``index`` (``index`` at ``axis``, the position itself elsewhere)."""
    xp = get_array_module(index)
    nd = index.ndim
    return tuple(index if d == axis else
                 xp.arange(n).reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
                 for d, n in enumerate(index.shape))


class Gather(Function):
    """``out[..i..] = a[..index[..i..] along axis..]``, ``out`` of ``index``'s shape
    (``torch.gather``). Backward adds the gradient back at those places (``add.at``:
    an index may repeat)."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, index, axis):
        return a[_full_index(index, axis)]

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.index, ctx.axis = inputs
        ctx.shape = a.shape

    @staticmethod
    def backward(ctx, g):
        grad = get_array_module(g).zeros(ctx.shape, dtype=g.dtype)
        index_add(grad, _full_index(ctx.index, ctx.axis), g)
        return grad, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return IndexGrad.apply(g, ctx.shape, _full_index(ctx.index, ctx.axis)), None, None


class Scatter(Function):
    """A copy of ``a`` with ``src`` (an array of ``index``'s shape at least, or a scalar)
    written at ``index`` along ``axis`` (``torch.scatter``). The written places pass no
    gradient to ``a``; ``src`` gets the gradient of the places it was written to."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, index, src, axis):
        out = a.copy()
        where = _full_index(index, axis)
        if getattr(src, "ndim", 0):
            src = src[tuple(slice(0, n) for n in index.shape)]
        out[where] = src
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, ctx.index, src, ctx.axis = inputs
        ctx.src_shape = getattr(src, "shape", ())

    @staticmethod
    def backward(ctx, g):
        where = _full_index(ctx.index, ctx.axis)
        ga = gs = None
        if ctx.needs_input_grad[0]:
            ga = g.copy()
            ga[where] = 0
        if ctx.needs_input_grad[2]:
            gs = get_array_module(g).zeros(ctx.src_shape, dtype=g.dtype)
            gs[tuple(slice(0, n) for n in ctx.index.shape)] = g[where]
        return ga, None, gs, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        where = _full_index(ctx.index, ctx.axis)
        ga = None
        if ctx.needs_input_grad[0]:
            keep = get_array_module(g._data).ones(g.shape, bool)
            keep[where] = False
            ga = masked_graph(g, keep)
        return ga, None, _scattered_src_grad(ctx, g) if ctx.needs_input_grad[2] else None, None


class ScatterAdd(Function):
    """A copy of ``a`` with ``src`` (an array of ``index``'s shape at least) added at
    ``index`` along ``axis`` (``torch.scatter_add``; ``index_add`` is the same with one index
    per slice, broadcast). Repeated indices accumulate (``add.at``). ``a`` gets the whole
    gradient, ``src`` the gradient of the places it was added to."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, index, src, axis):
        out = a.copy()
        index_add(out, _full_index(index, axis), src[tuple(slice(0, n) for n in index.shape)])
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, ctx.index, src, ctx.axis = inputs
        ctx.src_shape = src.shape

    @staticmethod
    def backward(ctx, g):
        gs = None
        if ctx.needs_input_grad[2]:
            gs = get_array_module(g).zeros(ctx.src_shape, dtype=g.dtype)
            gs[tuple(slice(0, n) for n in ctx.index.shape)] = g[_full_index(ctx.index, ctx.axis)]
        return g if ctx.needs_input_grad[0] else None, None, gs, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return (g if ctx.needs_input_grad[0] else None, None,
                _scattered_src_grad(ctx, g) if ctx.needs_input_grad[2] else None, None)


def _scattered_src_grad(ctx: Any, g: Any, src_grad: Any = None) -> Any:
    """A scatter's ``src`` gradient in a ``create_graph`` pass: ``g`` (or ``src_grad``,
    already gathered) read where each value went, into the part of ``src`` that ``index``
    covers (gather-style: its own gradient adds back at those places)."""
    if src_grad is None:
        src_grad = Index.apply(g, _full_index(ctx.index, ctx.axis))
    return IndexGrad.apply(src_grad, ctx.src_shape, tuple(slice(0, n) for n in ctx.index.shape))


def scatter_reduce_array(a: Any, index: Any, src: Any, axis: int, reduce: str,
                         include_self: bool) -> Any:
    """``torch.scatter_reduce`` on arrays: a copy of ``a`` where every place ``index`` points
    at along ``axis`` holds the ``reduce`` (sum, prod, mean, amax, amin) of the ``src``
    entries sent there, and of ``a``'s own value if ``include_self``; other places keep
    ``a``'s. The mean of integers rounds down, as PyTorch's."""
    where = _full_index(index, axis)
    values = src[tuple(slice(0, n) for n in index.shape)]
    out = a.copy()
    ufunc = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum",
             "amin": "minimum"}[reduce]
    if not include_self:  # the places written start from the reduction's identity
        if reduce in ("amax", "amin"):
            info = np.finfo(a.dtype) if a.dtype.kind == "f" else np.iinfo(a.dtype)
            low = -np.inf if a.dtype.kind == "f" else info.min
            high = np.inf if a.dtype.kind == "f" else info.max
            out[where] = low if reduce == "amax" else high
        else:
            out[where] = 1 if reduce == "prod" else 0
    index_reduce(out, where, values, ufunc)
    if reduce == "mean":
        count = _scatter_count(a, where, include_self)
        out = out // count if a.dtype.kind in "iu" else (out / count).astype(a.dtype)
    return out


def _scatter_count(a: Any, where: Any, include_self: bool) -> Any:
    """How many values a scatter's mean divides by at each place of ``a`` (at least 1)."""
    xp = get_array_module(a)
    count = xp.ones(a.shape, dtype=a.dtype)
    if not include_self:
        count[where] = 0
    index_add(count, where, xp.ones(where[0].shape, dtype=a.dtype))
    return xp.maximum(count, 1)


class ScatterReduce(Function):
    """:func:`scatter_reduce_array` with PyTorch's gradients (``scatter_reduce_backward``):
    sum and mean pass the gradient (divided by the count) to every value reduced; amax and
    amin share it evenly among the values equal to the result; prod gives each value the
    product of the others (the result over it; PyTorch's rule where a zero is involved). With
    ``include_self=False`` the places written pass nothing back to ``a``."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(a, index, src, axis, reduce, include_self):
        return scatter_reduce_array(a, index, src, axis, reduce, include_self)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, ctx.index, src, ctx.axis, ctx.reduce, ctx.include_self = inputs
        ctx.save_for_backward(a, src, output)  # (saved: an in-place write raises, as PyTorch's)
        ctx.src_shape = src.shape

    @staticmethod
    def backward(ctx, g):
        a, src, out = ctx.saved_tensors
        reduce, include_self = ctx.reduce, ctx.include_self
        xp = get_array_module(g)
        where = _full_index(ctx.index, ctx.axis)
        used = tuple(slice(0, n) for n in ctx.index.shape)
        values = src[used]
        if reduce == "sum":
            ga, gv = g, g[where]
        elif reduce == "mean":
            ga = g / _scatter_count(g, where, include_self)
            gv = ga[where]
        elif reduce in ("amax", "amin"):
            self_is = (a == out).astype(g.dtype)
            src_is = (values == out[where]).astype(g.dtype)
            n = self_is.copy()
            index_add(n, where, src_is)
            shared = g / xp.where(n == 0, 1, n)
            ga, gv = self_is * shared, src_is * shared[where]
        else:  # prod
            axis = ctx.axis
            masked_a = xp.where(a == 0, 1, a)
            ga = g * scatter_reduce_array(masked_a, ctx.index, src, axis, reduce,
                                          include_self) / masked_a
            src_zero = values == 0
            zeros = xp.zeros(a.shape, dtype=g.dtype)
            index_add(zeros, where, src_zero.astype(g.dtype))
            single = src_zero & (zeros[where] == 1)
            masked_src = src.copy()
            masked_src[used] = xp.where(single, 1, values)
            without = scatter_reduce_array(a, ctx.index, masked_src, axis, reduce, include_self)
            gv = xp.where(single, (g * without)[where],
                          (g * out)[where] / xp.where(src_zero, 1, values))
        if not include_self:
            ga = ga.copy() if ga is g else ga
            ga[where] = 0
        gs = None
        if ctx.needs_input_grad[2]:
            gs = xp.zeros(src.shape, dtype=g.dtype)
            gs[used] = gv
        return (ga if ctx.needs_input_grad[0] else None), None, gs, None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        """``backward``'s formulas with differentiable ops: the counts, the masks of the
        values equal to the result (amax, amin) and of the zeros (prod) are constants."""
        a, src, out = saved
        reduce, include_self, index, axis = ctx.reduce, ctx.include_self, ctx.index, ctx.axis
        xp, one = get_array_module(g._data), g.dtype.type(1)
        where = _full_index(index, axis)
        used = tuple(slice(0, n) for n in index.shape)
        if reduce == "sum":
            ga, gv = g, Index.apply(g, where)
        elif reduce == "mean":
            ga = g / _const(_scatter_count(g._data, where, include_self))
            gv = Index.apply(ga, where)
        elif reduce in ("amax", "amin"):
            self_is = (a._data == out._data).astype(g.dtype)
            src_is = (src._data[used] == out._data[where]).astype(g.dtype)
            n = self_is.copy()
            index_add(n, where, src_is)
            shared = g / _const(xp.where(n == 0, 1, n))
            ga, gv = shared * _const(self_is), Index.apply(shared, where) * _const(src_is)
        else:  # prod
            masked_a = Where.apply(a._data == 0, one, a)
            ga = g * ScatterReduce.apply(masked_a, index, src, axis, reduce, include_self) \
                / masked_a
            values = src._data[used]
            src_zero = values == 0
            zeros = xp.zeros(a.shape, dtype=g.dtype)
            index_add(zeros, where, src_zero.astype(g.dtype))
            single = src_zero & (zeros[where] == 1)
            single_at = xp.zeros(src.shape, bool)
            single_at[used] = single
            without = ScatterReduce.apply(a, index, Where.apply(single_at, one, src), axis,
                                          reduce, include_self)
            gv = Where.apply(single, Index.apply(g * without, where),
                             Index.apply(g * out, where) / Where.apply(src_zero, one,
                                                                       Index.apply(src, used)))
        if not include_self:
            keep = xp.ones(a.shape, bool)
            keep[where] = False
            ga = masked_graph(ga, keep)
        return (ga if ctx.needs_input_grad[0] else None, None,
                _scattered_src_grad(ctx, g, gv) if ctx.needs_input_grad[2] else None,
                None, None, None)


class Embedding(Function):
    """``weight[indices]``: rows of ``weight [num, dim]`` for integer ``indices`` of any
    shape. Backward adds each row's gradient into its row (repeats accumulate), except
    the ``padding_idx`` row, which never gets a gradient (PyTorch's rule)."""

    row_major = True  # a new layout, as PyTorch's (Function.apply)

    @staticmethod
    def forward(weight, indices, padding_idx):
        return weight[indices]

    @staticmethod
    def setup_context(ctx, inputs, output):
        weight, ctx.indices, ctx.padding_idx = inputs
        ctx.shape = weight.shape

    @staticmethod
    def backward(ctx, g):
        grad = get_array_module(g).zeros(ctx.shape, dtype=g.dtype)
        index_add(grad, ctx.indices, g)
        if ctx.padding_idx is not None:
            grad[ctx.padding_idx] = 0
        return grad, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        grad = IndexGrad.apply(g, ctx.shape, ctx.indices)
        if ctx.padding_idx is not None:
            xp = get_array_module(g._data)
            rows = (xp.arange(ctx.shape[0]) != ctx.padding_idx)[:, None]
            grad = masked_graph(grad, xp.broadcast_to(rows, ctx.shape))
        return grad, None, None


__all__ = [name for name, obj in list(globals().items())
           if isinstance(obj, type) and issubclass(obj, Function) and obj is not Function]
__all__ += ["broadcast_shapes", "log_softmax_array", "unbroadcast"]
