"""The differentiable ops, each a :class:`Function` on raw arrays.

Every op is written once against the array module ``xp`` of its input, so it
runs unchanged on NumPy (CPU) and CuPy (CUDA). Binary ops broadcast as NumPy
does; their backward sums the gradient back to each input's shape
(:func:`unbroadcast`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytrain import kernels
from tinytrain.autograd.function import Function
from tinytrain.backend import get_array_module, index_add

# --------------------------------------------------------------------- helpers


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
        raise ValueError(
            f"{op}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast together "
            "(trailing dimensions must be equal or 1)"
        ) from None


def _normalize_axis(axis: Any, ndim: int) -> tuple[int, ...] | None:
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise IndexError(f"axis {a} is out of range for a tensor with {ndim} dimensions")
        out.append(a % max(ndim, 1))
    return tuple(out)


def _expand_reduced(grad: Any, shape: tuple[int, ...], axis: tuple[int, ...] | None,
                    keepdims: bool) -> Any:
    """Reshape the gradient of a reduction so that it broadcasts against the input."""
    if axis is None:
        return grad.reshape((1,) * len(shape)) if not keepdims else grad
    if not keepdims:
        grad = grad.reshape([1 if i in axis else n for i, n in enumerate(shape)])
    return grad


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


class Div(Function):
    @staticmethod
    def forward(a, b):
        return a / b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(b, output if ctx.needs_input_grad[1] else None)
        ctx.shapes = (a.shape, b.shape)

    @staticmethod
    def backward(ctx, g):
        b, out = ctx.saved_tensors
        sa, sb = ctx.shapes
        ga = unbroadcast(g / b, sa) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(-g * out / b, sb) if ctx.needs_input_grad[1] else None
        return ga, gb


class Pow(Function):
    """``a ** p`` for a tensor ``a`` and a Python number ``p``."""

    @staticmethod
    def forward(a, p):
        return a ** a.dtype.type(p)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.p = inputs[1]

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        if ctx.p == 0:  # a ** 0 is constant; a ** -1 would turn a = 0 into 0 * inf = nan
            return get_array_module(g).zeros_like(g), None
        p = a.dtype.type(ctx.p)
        return g * p * a ** (p - 1), None


# ------------------------------------------------------------ elementwise, unary


class Neg(Function):
    @staticmethod
    def forward(a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return -g


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


# ------------------------------------------------------------------ reductions


class Sum(Function):
    @staticmethod
    def forward(a, axis, keepdims):
        return a.sum(axis=axis, keepdims=keepdims)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, axis, keepdims = inputs
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.axis, ctx.keepdims)
        return get_array_module(g).broadcast_to(g, ctx.shape).copy(), None, None


class Mean(Function):
    @staticmethod
    def forward(a, axis, keepdims):
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


class Max(Function):
    """Maximum over ``axis``. Ties share the gradient equally (like ``torch.amax``)."""

    @staticmethod
    def forward(a, axis, keepdims):
        return a.max(axis=axis, keepdims=keepdims)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, axis, keepdims = inputs
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        out = _expand_reduced(output, a.shape, axis, keepdims)
        ctx.save_for_backward(a == out)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        g = _expand_reduced(g, ctx.shape, ctx.axis, ctx.keepdims)
        count = mask.sum(axis=ctx.axis, keepdims=True)
        return (g * mask / count).astype(g.dtype, copy=False), None, None


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
        if ctx.needs_input_grad[1]:
            gb = (a[None, :] if a.ndim == 1 else a).swapaxes(-1, -2) @ g  # [..., K, M]
            gb = unbroadcast(gb[..., 0] if len(sb) == 1 else gb, sb)
        return ga, gb


class Linear(Function):
    """``x @ w.T + b`` in one node: ``x [*, in]``, ``w [out, in]``, ``b [out]``.

    Fusing the three ops saves two graph nodes and two temporaries per layer,
    and shows selective save at its clearest: ``w`` is kept only for ``dx``,
    ``x`` only for ``dw``, and ``db`` needs nothing.
    """

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


class Index(Function):
    """``a[index]`` for basic and advanced (integer array / boolean) indices."""

    @staticmethod
    def forward(a, index):
        return a[index]

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, index = inputs
        ctx.shape, ctx.dtype, ctx.index = a.shape, a.dtype, index

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        grad = xp.zeros(ctx.shape, dtype=ctx.dtype)
        index_add(grad, ctx.index, g)  # repeated indices accumulate
        return grad, None


# -------------------------------------------------------------------- softmax, loss


def log_softmax_array(a: Any, axis: int) -> Any:
    """Numerically stable ``log(softmax(a))`` along ``axis`` (subtract the max first)."""
    xp = get_array_module(a)
    shifted = a - a.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


class LogSoftmax(Function):
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


__all__ = [name for name, obj in list(globals().items())
           if isinstance(obj, type) and issubclass(obj, Function) and obj is not Function]
__all__ += ["broadcast_shapes", "log_softmax_array", "unbroadcast"]
