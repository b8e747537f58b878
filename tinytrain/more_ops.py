"""Tensor ops that ported PyTorch scripts reach for beyond the course's core.

``repeat_interleave``; the fused forms of hand-written optimizers and layers (``addcmul``,
``addcdiv``, ``addmm``, ``baddbmm``, ``addmv``, ``addr``); element-wise math (``atan2``,
``hypot``, ``logaddexp``, ``xlogy``, ``erf``/``erfc``/``erfinv``, ``copysign``, ...);
shape helpers (``meshgrid``, ``broadcast_tensors``, the ``*stack``s, ``tensor_split``,
...); and ``kthvalue``, ``cummax``/``cummin``, ``logcumsumexp``, ``rot90``, ``cdist``.

Each is ``tt.<name>`` and, where PyTorch has one, the method ``Tensor.<name>`` (attached
here, so that :mod:`tinytrain.tensor` keeps the course's core). Most are written with the
Tensor's own differentiable ops, so autograd comes with them; the ones whose derivative
those would get wrong (``0 * inf`` at a boundary, a NaN where PyTorch gives 0) or compute
slowly are :class:`Function`\\ s below, written once against ``xp`` for NumPy and CuPy.

NumPy has no error function: :func:`erf_array` is W. J. Cody's rational approximations
(Math. Comp. 1969; the SPECFUN ``CALERF`` routine), evaluated in float64 for every input
dtype, accurate to about 1e-16 relative; :func:`erfinv_array` starts from M. Giles'
single-precision approximation and polishes it with Newton steps on ``erf``/``erfc``.
"""

from __future__ import annotations

import builtins
import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinytrain import _numpy_names, backend, return_types
from tinytrain.autograd import ops as O
from tinytrain.autograd.function import Function, _check_same_device
from tinytrain.autograd.ops import (
    IndexRangeError,
    InvalidArgument,
    ShapeError,
    unbroadcast,
    unbroadcast_graph,
)
from tinytrain.dtypes import (
    DTypeError,
    DTypeNotImplementedError,
    bool_,
    float16,
    float32,
    float64,
    get_default_dtype,
    int64,
    promote_types,
    result_type,
    scalar_array,
    torch_scalar_name,
)
from tinytrain.functions import _out, _t, _tensor_seq, cat
from tinytrain.tensor import Tensor, _int_dim_arg, linspace, tensor, where

# ------------------------------------------------------------------ the error function

_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _erf_parts(x: Any) -> tuple[Any, Any, Any]:
    """Cody's three intervals for float64 ``x``: ``(small, erf_small, erfc_far)``, where
    ``small`` is ``|x| <= 0.46875``, ``erf_small`` is erf there and ``erfc_far`` is
    ``erfc(|x|)`` elsewhere (NaN where it does not apply, and for NaN). Each interval's
    rational function is evaluated on its own elements only; ``exp(-x^2)`` is split as in
    CALERF, so that it keeps its digits."""
    xp = backend.get_array_module(x)
    y = xp.abs(x)
    small = y <= 0.46875
    erf_small = xp.full(x.shape, xp.nan)
    erfc_far = xp.full(x.shape, xp.nan)
    ys = y[small]
    z = ys * ys
    num, den = _ERF_A[4] * z, z
    for i in range(3):
        num, den = (num + _ERF_A[i]) * z, (den + _ERF_B[i]) * z
    erf_small[small] = xp.sign(x[small]) * ys * (num + _ERF_A[3]) / (den + _ERF_B[3])
    middle = ~small & (y <= 4.0)
    ym = y[middle]
    num, den = _ERF_C[8] * ym, ym
    for i in range(7):
        num, den = (num + _ERF_C[i]) * ym, (den + _ERF_D[i]) * ym
    erfc_far[middle] = _gauss(xp, ym) * (num + _ERF_C[7]) / (den + _ERF_D[7])
    far = y > 4.0
    yf = y[far]
    z = 1 / (yf * yf)
    num, den = _ERF_P[5] * z, z
    for i in range(4):
        num, den = (num + _ERF_P[i]) * z, (den + _ERF_Q[i]) * z
    erfc_far[far] = _gauss(xp, yf) * (1 / math.sqrt(math.pi) - z * (num + _ERF_P[4])
                                      / (den + _ERF_Q[4])) / yf
    return small, erf_small, erfc_far


def _gauss(xp: Any, y: Any) -> Any:
    """``exp(-y^2)`` to full precision: ``y^2`` split into an exact part and a small rest."""
    y = xp.minimum(y, 28.0)  # (exp(-28^2) is 0 already: no inf - inf below)
    head = xp.trunc(y * 16) / 16
    return xp.exp(-head * head) * xp.exp(-(y - head) * (y + head))


#: erf and erfc take ~40 whole-array float64 passes: on the CPU, in pieces of this many
#: elements (256 KiB, in a core's L2 cache), 1.6M of them take 2.2x less time than at once.
ERF_PIECE = 1 << 15


def _in_pieces(fn: Any, a: Any) -> Any:
    """``fn(a)`` (element-wise) on NumPy arrays piece by piece (:data:`ERF_PIECE`)."""
    if backend.get_array_module(a) is not np or a.size <= ERF_PIECE:
        return fn(a)
    flat = a.reshape(-1)
    out = np.empty(flat.shape, dtype=a.dtype)
    for start in range(0, flat.size, ERF_PIECE):
        out[start : start + ERF_PIECE] = fn(flat[start : start + ERF_PIECE])
    return out.reshape(a.shape)


def erf_array(a: Any) -> Any:
    """The error function of a floating array, in its dtype (computed in float64)."""
    return _in_pieces(_erf, a)


def _erf(a: Any) -> Any:
    xp = backend.get_array_module(a)
    with np.errstate(all="ignore"):
        x = a.astype(float64)
        small, erf_small, erfc_far = _erf_parts(x)
        out = xp.where(small, erf_small, xp.sign(x) * (1 - erfc_far))
    return out.astype(a.dtype, copy=False)


#: GELU on the CPU (float32, float16): ``erfc(t) = exp(-t^2) * Q(s)`` for ``t >= 0``, ``s = 1 /
#: (1 + 0.3275911 t)`` (the substitution of Abramowitz & Stegun 7.1.26), ``Q`` of degree 10
#: fitted (least squares, relative, on Chebyshev points) to mpmath's ``exp(t^2) erfc(t)`` on
#: ``[0, 10.5]``, within 8.3e-10 relative; past 10.5 float32's erfc is 0. One polynomial and one
#: ``exp`` that Φ and φ share, instead of Cody's three intervals and two ``exp``: evaluated in
#: float64, GELU is within 0.52 float32 ulp of mpmath's value on 220K points (PyTorch's CPU
#: kernel, A&S 7.1.26 in float32, is off by up to 1.7e7 ulp in the far negative tail).
_ERFCX_Q = (1.1284658150090277e-05, 0.1845338867423505, 0.18812135947083466,
            0.1529284352196851, 0.2501729297806781, -0.15290328831523348, 0.6618582793440119,
            -0.7277182269263573, 0.7393645678074608, -0.36039103557174773, 0.0640218082825822)
_ERFCX_S = 0.3275911
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _normal_cdf_pdf(x: Any) -> tuple[Any, Any]:
    """``Φ(x)`` and ``φ(x)`` (the standard normal CDF and density) of a float array, in float64
    (see :data:`_ERFCX_Q`)."""
    shape, x = x.shape, x.reshape(-1)  # (1-d: NumPy makes 0-d results scalars, no ``out=``)
    t = np.abs(x).astype(float64)
    t *= _SQRT_HALF
    np.minimum(t, 30.0, out=t)  # (exp(-900) is 0: -inf gives Φ = 0 and inf's pdf 0, as erf's)
    s = _ERFCX_S * t
    s += 1
    np.reciprocal(s, out=s)
    q = np.full_like(s, _ERFCX_Q[-1])
    for c in _ERFCX_Q[-2::-1]:
        q *= s
        q += c
    np.multiply(t, t, out=t)
    np.negative(t, out=t)
    pdf = np.exp(t, out=t)  # exp(-x^2 / 2)
    q *= pdf
    q *= 0.5  # erfc(|x| / sqrt 2) / 2: Φ(-|x|)
    pdf *= _INV_SQRT_2PI
    np.subtract(1, q, out=q, where=x >= 0)  # Φ(x) = 1 - Φ(-x); below 0 q is Φ(x) itself
    return q.reshape(shape), pdf.reshape(shape)


def gelu_array(x: Any) -> Any:
    """``x Φ(x)`` of a float32 or float16 NumPy array, in its dtype, on L2-sized pieces."""
    def piece(a: Any) -> Any:
        with np.errstate(invalid="ignore"):  # (-inf * 0: NaN, as PyTorch's, without a warning)
            return (a * _normal_cdf_pdf(a)[0]).astype(a.dtype, copy=False)
    return _in_pieces(piece, x)


def gelu_slope_array(x: Any) -> Any:
    """``d/dx x Φ(x) = Φ(x) + x φ(x)`` of a float32 or float16 NumPy array, in its dtype."""
    def piece(a: Any) -> Any:
        cdf, pdf = _normal_cdf_pdf(a)
        with np.errstate(invalid="ignore"):
            pdf *= a
        pdf += cdf
        return pdf.astype(a.dtype, copy=False)
    return _in_pieces(piece, x)


def erfc_array(a: Any) -> Any:
    """``1 - erf(a)``, accurate where erf is close to 1 (large ``a``)."""
    return _in_pieces(_erfc, a)


def _erfc(a: Any) -> Any:
    xp = backend.get_array_module(a)
    with np.errstate(all="ignore"):
        x = a.astype(float64)
        small, erf_small, erfc_far = _erf_parts(x)
        out = xp.where(small, 1 - erf_small, xp.where(x < 0, 2 - erfc_far, erfc_far))
    return out.astype(a.dtype, copy=False)


def erfinv_array(a: Any) -> Any:
    """The inverse of erf on ``[-1, 1]`` (±inf at ±1, NaN outside): Giles' approximation
    (about 1e-7 relative in the middle, rougher in the far tails), then Newton steps on erf,
    and for ``|a| > 0.5`` on ``log(erfc)`` against ``log(1 - |a|)`` (exact there, where
    erf's residual would lose digits; nearly linear in the tails, so it converges fast)."""
    xp = backend.get_array_module(a)
    with np.errstate(all="ignore"):
        x = a.astype(float64)
        ax = xp.abs(x)
        inside = ax < 1
        x = xp.where(inside, x, 0.0)
        ax = xp.abs(x)
        w = -xp.log((1 - x) * (1 + x))
        wc = w - 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * wc
        wt = xp.sqrt(w) - 3
        q = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
            q = c + q * wt
        ay = xp.where(w < 5, p, q) * ax
        tail = ax > 0.5
        log_target = xp.log(xp.where(tail, 1 - ax, 0.5))  # (1 - |a| is exact there)
        for _ in range(4):
            small, erf_small, erfc_far = _erf_parts(ay)
            erfc_y = xp.where(small, 1 - erf_small, erfc_far)
            slope = _TWO_OVER_SQRT_PI * xp.exp(-ay * ay)
            central = (xp.where(small, erf_small, 1 - erfc_far) - ax) / slope
            ay = ay - xp.where(tail, (log_target - xp.log(erfc_y)) * erfc_y / slope, central)
        y = xp.copysign(ay, x)
        y = xp.where(inside, y, xp.where(xp.abs(a) == 1, xp.sign(a) * xp.inf, xp.nan))
    return y.astype(a.dtype, copy=False)


class Erf(Function):
    """``erf(a)``; the derivative is ``2/sqrt(pi) exp(-a^2)``."""

    @staticmethod
    def forward(a):
        return erf_array(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * (_TWO_OVER_SQRT_PI * backend.get_array_module(a).exp(-a * a))

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        return g * (_TWO_OVER_SQRT_PI * O.Exp.apply(-a * a))


class Erfc(Erf):
    @staticmethod
    def forward(a):
        return erfc_array(a)

    @staticmethod
    def backward(ctx, g):
        return -Erf.backward(ctx, g)

    @staticmethod
    def backward_graph(ctx, g, saved):
        return -Erf.backward_graph(ctx, g, saved)


class Erfinv(Function):
    """``erfinv(a)``; the derivative is ``sqrt(pi)/2 exp(erfinv(a)^2)``. It saves ``a`` and
    computes ``erfinv(a)`` again, as PyTorch does: its result is not saved, so writing to it
    in place (``p.erfinv_().erf_()``) leaves the backward valid, as in PyTorch."""

    @staticmethod
    def forward(a):
        return erfinv_array(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        out = erfinv_array(a)
        with np.errstate(all="ignore"):
            return g * (0.5 * math.sqrt(math.pi) * backend.get_array_module(out).exp(out * out))

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        out = Erfinv.apply(a)
        return g * (0.5 * math.sqrt(math.pi) * O.Exp.apply(out * out))


# ------------------------------------------------------------------ element-wise Functions


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x))


class Atan2(Function):
    """``atan2(a, b)``, the angle of the point ``(b, a)``; the gradient is
    ``b / (a^2 + b^2)``, ``-a / (a^2 + b^2)``, and 0 where ``a^2 + b^2`` is 0 (PyTorch's
    choice at the origin)."""

    @staticmethod
    def forward(a, b):
        return backend.get_array_module(a).arctan2(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with np.errstate(all="ignore"):
            recip = 1 / (a * a + b * b)
            recip = backend.get_array_module(g).where(recip == np.inf, 0, recip).astype(
                recip.dtype, copy=False)
            return (unbroadcast(g * b * recip, _shape(a)) if ctx.needs_input_grad[0] else None,
                    unbroadcast(g * -a * recip, _shape(b)) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, b = saved
        square = a * a + b * b
        origin = square._data == 0  # (0 there: the reciprocal of a safe 1, masked)
        recip = O.Where.apply(origin, g.dtype.type(0), 1 / O.Where.apply(origin, g.dtype.type(1),
                                                                          square))
        return (unbroadcast_graph(g * b * recip, a.shape) if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(g * -a * recip, b.shape) if ctx.needs_input_grad[1] else None)


class Hypot(Function):
    """``sqrt(a^2 + b^2)`` without overflow; the gradient is ``a / out``, ``b / out``."""

    @staticmethod
    def forward(a, b):
        return backend.get_array_module(a).hypot(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs, output)

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        with np.errstate(all="ignore"):
            return (unbroadcast(g * a / out, _shape(a)) if ctx.needs_input_grad[0] else None,
                    unbroadcast(g * b / out, _shape(b)) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, b, out = saved
        return (unbroadcast_graph(g * a / out, a.shape) if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(g * b / out, b.shape) if ctx.needs_input_grad[1] else None)


class LogAddExp(Function):
    """``log(exp(a) + exp(b))``, computed without overflow; the gradient is each input's
    softmax weight ``1 / (1 + exp(other - self))``."""

    @staticmethod
    def forward(a, b):
        with np.errstate(invalid="ignore"):  # (inf - inf inside: NaN in, NaN out)
            return backend.get_array_module(a).logaddexp(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        xp = backend.get_array_module(g)
        with np.errstate(all="ignore"):
            return (unbroadcast(g / (1 + xp.exp(b - a)), _shape(a))
                    if ctx.needs_input_grad[0] else None,
                    unbroadcast(g / (1 + xp.exp(a - b)), _shape(b))
                    if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, b = saved
        return (unbroadcast_graph(g / (1 + O.Exp.apply(b - a)), a.shape)
                if ctx.needs_input_grad[0] else None,
                unbroadcast_graph(g / (1 + O.Exp.apply(a - b)), b.shape)
                if ctx.needs_input_grad[1] else None)


class XLogY(Function):
    """``a * log(b)``, and 0 where ``a == 0`` (unless ``b`` is NaN), as PyTorch; the
    gradients are ``log(b)`` (0 where ``a == 0`` and ``b <= 0``, as PyTorch's) and
    ``a / b``."""

    @staticmethod
    def forward(a, b):
        xp = backend.get_array_module(a)
        with np.errstate(all="ignore"):
            out = a * xp.log(b)
        return xp.where((a == 0) & ~xp.isnan(b), 0, out).astype(out.dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        xp = backend.get_array_module(g)
        ga = gb = None
        with np.errstate(all="ignore"):
            if ctx.needs_input_grad[0]:
                ga = xp.where((a == 0) & (b <= 0), 0, g * xp.log(b)).astype(g.dtype)
                ga = unbroadcast(ga, _shape(a))
            if ctx.needs_input_grad[1]:
                gb = unbroadcast(g * a / b, _shape(b))
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, b = saved
        ga = gb = None
        if ctx.needs_input_grad[0]:
            skip = (a._data == 0) & (b._data <= 0)
            ga = unbroadcast_graph(O.Where.apply(skip, g.dtype.type(0), g * O.Log.apply(b)),
                                   a.shape)
        if ctx.needs_input_grad[1]:
            gb = unbroadcast_graph(g * a / b, b.shape)
        return ga, gb


class Copysign(Function):
    """``|a|`` with ``b``'s sign; the gradient of ``a`` is ``out / a`` (0 at ``a == 0``),
    of ``b`` zero, as PyTorch."""

    @staticmethod
    def forward(a, b):
        return backend.get_array_module(a).copysign(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)
        ctx.b_shape = _shape(inputs[1])

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_tensors
        xp = backend.get_array_module(g)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            with np.errstate(all="ignore"):
                ga = xp.where(a == 0, 0, g * out / a).astype(g.dtype, copy=False)
            ga = unbroadcast(ga, _shape(a))
        if ctx.needs_input_grad[1]:
            gb = xp.zeros(ctx.b_shape, g.dtype)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g, saved):
        a, out = saved
        ga = None
        if ctx.needs_input_grad[0]:
            at_zero = a._data == 0
            ratio = out / O.Where.apply(at_zero, a.dtype.type(1), a)  # (no 0 / 0)
            ga = unbroadcast_graph(O.Where.apply(at_zero, g.dtype.type(0), g * ratio), a.shape)
        return ga, O._zero_grads_graph(ctx, g, ((), ctx.b_shape))[1]


class Heaviside(Function):
    """The step function: 0 below zero, ``values`` at zero, 1 above. PyTorch has no
    derivative for it, and neither has tinytrain: backward through it raises."""

    @staticmethod
    def forward(a, values):
        xp = backend.get_array_module(a)
        return xp.where(a == 0, values, (a > 0).astype(a.dtype))

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("the derivative for 'heaviside' is not implemented")

    @staticmethod
    def backward_graph(ctx, g, saved):
        Heaviside.backward(ctx, g)


class NanToNum(Function):
    """NaN, +inf and -inf replaced by numbers; the gradient passes where the input was
    finite, and is 0 where it was replaced (PyTorch's ``grad * isfinite(x)``)."""

    @staticmethod
    def forward(a, nan, posinf, neginf):
        xp = backend.get_array_module(a)
        out = xp.where(xp.isnan(a), nan, a)
        out = xp.where(out == xp.inf, posinf, out)
        return xp.where(out == -xp.inf, neginf, out).astype(a.dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * backend.get_array_module(a).isfinite(a), None, None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        a = saved[0]._data  # (a mask: PyTorch's grad * isfinite(x), not in x's graph)
        return g * O._const(backend.get_array_module(a).isfinite(a).astype(g.dtype)), \
            None, None, None


class Frac(Function):
    """``a - trunc(a)`` (the sign of ``a``); the gradient passes unchanged."""

    @staticmethod
    def forward(a):
        with np.errstate(invalid="ignore"):
            return a - backend.get_array_module(a).trunc(a)

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def backward_graph(ctx, g, saved):
        return g


class Logit(Function):
    """``log(p / (1 - p))`` of ``p`` clamped to ``[eps, 1 - eps]`` (``eps`` None: not
    clamped); the gradient is ``g / (p (1 - p))`` inside that range (inf at 0 and 1, as
    PyTorch's) and 0 outside it."""

    @staticmethod
    def forward(a, eps):
        xp = backend.get_array_module(a)
        p = a if eps is None else xp.clip(a, eps, 1 - eps)
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.log(p / (1 - p))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.eps = inputs[1]

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = g / (a * (1 - a))
        if ctx.eps is not None:
            grad = backend.get_array_module(a).where((a < ctx.eps) | (a > 1 - ctx.eps), 0, grad)
        return grad.astype(a.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g, saved):
        (a,) = saved
        grad = g / (a * (1 - a))
        if ctx.eps is not None:
            outside = (a._data < ctx.eps) | (a._data > 1 - ctx.eps)
            grad = O.Where.apply(outside, g.dtype.type(0), grad)
        return grad, None


# ------------------------------------------------------------------ argument checks


def _tensor_arg(fn: str, name: str, value: Any, position: int) -> Tensor:
    """PyTorch's TypeError for an argument that must be a Tensor (arrays are wrapped)."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "__array_interface__") or hasattr(value, "__cuda_array_interface__"):
        return Tensor(value)
    raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not "
                    f"{type(value).__name__}")


def _floating_only(fn: str, dtype: np.dtype) -> None:
    if dtype.kind != "f":
        raise NotImplementedError(f"{fn}: floating point tensors only (PyTorch's "
                                  f"\"{fn}_cpu\" is not implemented for "
                                  f"'{torch_scalar_name(dtype)}'); convert with .float()")


def _broadcast(fn: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    shape: tuple[int, ...] = ()
    for s in shapes:
        shape = O.broadcast_shapes(fn, shape, s)
    return shape


def _float_pair(fn: str, input: Any, other: Any, tensors_only: bool = True,  # noqa: A002
                floating: bool = False) -> tuple[Tensor, Any]:
    """Both operands of a binary float op in their promoted dtype (integer and bool become
    the default float dtype, or with ``floating`` are refused as PyTorch does)."""
    a = _tensor_arg(fn, "input", input, 1) if tensors_only else _t(input)
    b = _tensor_arg(fn, "other", other, 2) if tensors_only else other
    dtype = result_type(a, b)
    if floating:
        _floating_only(fn, dtype)
    elif dtype.kind != "f":
        dtype = get_default_dtype()
    if isinstance(b, Tensor):
        b = b._cast(dtype)
        _broadcast(fn, a.shape, b.shape)
    elif isinstance(b, numbers.Real | np.generic):
        b = scalar_array(b, dtype)
    else:
        raise TypeError(f"{fn}(): argument 'other' must be Tensor or Number, not "
                        f"{type(b).__name__}")
    return a._cast(dtype), b


def atan2(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The angle of ``(other, input)`` in radians, in ``[-pi, pi]``, element-wise
    (broadcast; integers give the default float dtype)."""
    return _out(Atan2.apply(*_float_pair("atan2", input, other)), out, "atan2")


def hypot(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """``sqrt(input^2 + other^2)`` element-wise (floating tensors, broadcast)."""
    return _out(Hypot.apply(*_float_pair("hypot", input, other, floating=True)), out, "hypot")


def logaddexp(input: Tensor, other: Tensor, *, out: Tensor | None = None  # noqa: A002
              ) -> Tensor:
    """``log(exp(input) + exp(other))`` element-wise, without overflow (floating tensors)."""
    return _out(LogAddExp.apply(*_float_pair("logaddexp", input, other, floating=True)), out,
                "logaddexp")


def xlogy(input: Any, other: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN): the
    entropy term. Either may be a number; integers give the default float dtype."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"xlogy(): expected a Tensor as input or other, got "
                        f"{type(input).__name__} and {type(other).__name__}")
    if not isinstance(input, Tensor):  # a number first: a tensor of the result's dtype
        dtype = result_type(other, input)
        dtype = dtype if dtype.kind == "f" else get_default_dtype()
        input = tensor(input, dtype=dtype, device=other.device)  # noqa: A001
    return _out(XLogY.apply(*_float_pair("xlogy", input, other, tensors_only=False)), out,
                "xlogy")


def copysign(input: Tensor, other: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """``|input|`` with the sign of ``other`` (a tensor or a number; -0.0 counts as
    negative); integers give the default float dtype."""
    a = _tensor_arg("copysign", "input", input, 1)
    return _out(Copysign.apply(*_float_pair("copysign", a, other, tensors_only=False)), out,
                "copysign")


def heaviside(input: Tensor, values: Tensor, *, out: Tensor | None = None  # noqa: A002
              ) -> Tensor:
    """The step function: 0 where ``input < 0``, ``values`` where it is 0, 1 where it is
    greater (NaN gives 0); ``values`` broadcasts and must have ``input``'s dtype. Not
    differentiable (PyTorch raises in backward; so does tinytrain)."""
    a = _tensor_arg("heaviside", "input", input, 1)
    v = _tensor_arg("heaviside", "values", values, 2)
    if a.dtype != v.dtype:
        raise DTypeError(f"heaviside is not yet implemented for tensors with different dtypes "
                         f"(input {a.dtype}, values {v.dtype}); convert one with .to(dtype)")
    _broadcast("heaviside", a.shape, v.shape)
    return _out(Heaviside.apply(a, v.to(a.device)), out, "heaviside")


def _unary_float(op: type[Function]) -> Any:
    def method(self: Tensor) -> Tensor:
        return self._float_op(op)

    return method


def erf(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``, element-wise."""
    return _out(_t(input).erf(), out, "erf")


def erfc(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """``1 - erf(x)``, accurate where erf is near 1."""
    return _out(_t(input).erfc(), out, "erfc")


def erfinv(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The inverse error function on ``[-1, 1]`` (±inf at ±1, NaN outside)."""
    return _out(_t(input).erfinv(), out, "erfinv")


def sgn(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The sign (-1, 0, 1; 0 for NaN) in the input's dtype: :func:`sign` for real tensors
    (PyTorch's ``sgn`` differs only on complex ones, which tinytrain has not)."""
    return _out(_t(input).sgn(), out, "sgn")


def frac(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The fractional part ``x - trunc(x)`` (with x's sign; floating tensors)."""
    return _out(_t(input).frac(), out, "frac")


def deg2rad(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    return _out(_t(input).deg2rad(), out, "deg2rad")


def rad2deg(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    return _out(_t(input).rad2deg(), out, "rad2deg")


def signbit(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """Where the sign bit is set (a bool tensor: -0.0 and -NaN too)."""
    return _out(_t(input).signbit(), out, "signbit")


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,  # noqa: A002
               neginf: float | None = None, *, out: Tensor | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and
    the dtype's largest and lowest finite values); integer and bool tensors come back as
    they are."""
    return _out(_t(input).nan_to_num(nan, posinf, neginf), out, "nan_to_num")


def _t_erf(self: Tensor) -> Tensor:
    """The error function, element-wise (integers give the default float dtype)."""
    return self._float_op(Erf)


def _t_erfc(self: Tensor) -> Tensor:
    """``1 - erf(self)``, accurate where erf is near 1."""
    return self._float_op(Erfc)


def _t_erfinv(self: Tensor) -> Tensor:
    """The inverse error function on ``[-1, 1]`` (±inf at ±1, NaN outside)."""
    return self._float_op(Erfinv)


def _t_sgn(self: Tensor) -> Tensor:
    """:meth:`sign` (real tensors only in tinytrain)."""
    return self.sign()


def _t_frac(self: Tensor) -> Tensor:
    """``self - trunc(self)``: floating tensors only, as in PyTorch."""
    _floating_only("frac", self.dtype)
    return Frac.apply(self)


def _t_deg2rad(self: Tensor) -> Tensor:
    """Degrees to radians (integers give the default float dtype)."""
    return self._float_input() * (math.pi / 180)


def _t_rad2deg(self: Tensor) -> Tensor:
    """Radians to degrees (integers give the default float dtype)."""
    return self._float_input() * (180 / math.pi)


def _float_input(self: Tensor) -> Tensor:
    return self if self.dtype.kind == "f" else self._cast(get_default_dtype())


def _t_signbit(self: Tensor) -> Tensor:
    """Where the sign bit is set: a bool tensor (-0.0 and -NaN count; unsigned and bool
    tensors have none). Not differentiable."""
    xp = backend.get_array_module(self._data)
    if self.dtype.kind == "f":
        return Tensor(xp.signbit(self._data))
    return Tensor(self._data < 0) if self.dtype.kind == "i" else Tensor(
        xp.zeros(self.shape, bool_))


def _t_nan_to_num(self: Tensor, nan: float = 0.0, posinf: float | None = None,
                  neginf: float | None = None) -> Tensor:
    """NaN, +inf, -inf replaced by ``nan``, ``posinf``, ``neginf`` (default: 0 and the
    dtype's largest and lowest finite values); the gradient is 0 at replaced entries."""
    if self.dtype.kind != "f":
        return self.clone()
    info = np.finfo(self.dtype)
    fills = [info.max if posinf is None else posinf, info.min if neginf is None else neginf]
    with np.errstate(over="ignore"):  # (PyTorch casts out-of-range values to ±inf too)
        nan, posinf, neginf = (np.asarray(v, dtype=np.float64).astype(self.dtype)[()]
                               for v in (0.0 if nan is None else nan, *fills))
    return NanToNum.apply(self, nan, posinf, neginf)


def _t_atan2(self: Tensor, other: Tensor) -> Tensor:
    """The angle of ``(other, self)``; see :func:`tinytrain.atan2`."""
    return atan2(self, other)


def _t_hypot(self: Tensor, other: Tensor) -> Tensor:
    return hypot(self, other)


def _t_logaddexp(self: Tensor, other: Tensor) -> Tensor:
    return logaddexp(self, other)


def _t_xlogy(self: Tensor, other: Any) -> Tensor:
    return xlogy(self, other)


def _t_copysign(self: Tensor, other: Any) -> Tensor:
    return copysign(self, other)


def _t_heaviside(self: Tensor, values: Tensor) -> Tensor:
    return heaviside(self, values)


# ------------------------------------------------------------------ repeat_interleave


def _repeat_counts(name: str, repeats: Tensor) -> Tensor:
    if repeats.dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
        raise NotImplementedError(f"{name}: repeats must be an int64 or int32 tensor, got "
                                  f"{torch_scalar_name(repeats.dtype)} ({repeats.dtype})")
    if repeats.ndim > 1:
        raise InvalidArgument("repeats must be 0-dim or 1-dim tensor")
    if repeats.numel() and builtins.bool((repeats._data < 0).any()):
        raise InvalidArgument("repeats can not be negative")
    return repeats


def _interleave_index(counts: Any, total: int | None) -> Any:
    """``[0]*counts[0] + [1]*counts[1] + ...`` on the counts' device (a sorted search of the
    running totals, so that CuPy needs no host copy of the counts)."""
    xp = backend.get_array_module(counts)
    ends = xp.cumsum(counts.astype(np.int64))
    total = int(ends[-1]) if total is None and ends.size else (total or 0)
    return xp.searchsorted(ends, xp.arange(total), side="right").astype(np.int64)


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Tensor:
    """Each element repeated: ``repeats`` times (an int), or ``repeats[i]`` times for the
    ``i``-th slice along ``dim`` (a 1-D integer tensor of that dimension's size, or of one
    element). Without ``dim`` the input is flattened first. ``output_size`` (the result's
    size along ``dim``) is checked. ``repeat_interleave(counts)`` alone gives
    ``[0]*counts[0] + [1]*counts[1] + ...``. The gradient sums the copies."""
    if repeats is None:
        counts = _repeat_counts("repeat_interleave", _t(input))
        counts = counts.reshape(-1) if counts.ndim == 0 else counts
        return Tensor(_interleave_index(counts._data, output_size))
    x = _t(input)
    if dim is None:
        x, axis = x.reshape(-1), 0
    else:
        _int_dim_arg("repeat_interleave", "dim", dim)
        if x.ndim == 0:  # (PyTorch flattens a 0-d input only when no dim is given)
            raise IndexRangeError(f"repeat_interleave: Dimension specified as {dim} but tensor "
                                  f"has no dimensions")
        (axis,) = O._normalize_axis(dim, x.ndim)
    n = x.shape[axis]
    if isinstance(repeats, Tensor):
        counts = _repeat_counts("repeat_interleave", repeats).to(x.device)
        if counts.ndim == 0 or counts.numel() == 1:
            repeats = int(counts.reshape(-1)[0].item()) if counts.numel() else 0
        elif counts.numel() != n:
            raise InvalidArgument(f"repeats must have the same size as input along dim, but "
                                  f"got repeats.size(0) = {counts.numel()} and "
                                  f"input.size({axis}) = {n}")
        else:
            total = int(counts._data.sum())
            if output_size is not None and output_size != total:
                raise InvalidArgument(f"repeat_interleave: output_size {output_size} does not "
                                      f"match the sum of repeats {total} (PyTorch: allocated "
                                      f"size does not match required size)")
            return x.index_select(axis, Tensor(_interleave_index(counts._data, total)))
    if isinstance(repeats, builtins.bool) or not isinstance(repeats, numbers.Integral):
        raise TypeError(f"repeat_interleave(): argument 'repeats' must be int or Tensor, not "
                        f"{type(repeats).__name__}")
    if repeats < 0:
        raise InvalidArgument("Repeats must be non-negative")
    if output_size is not None and output_size != n * repeats:
        raise InvalidArgument(f"repeat_interleave: Invalid output_size, expected "
                              f"{n * repeats} but got {output_size}")
    xp = backend.get_array_module(x._data)
    return x.index_select(axis, Tensor(xp.arange(n * int(repeats)) // int(repeats)
                                       if repeats else xp.zeros(0, np.int64)))


# ------------------------------------------------------------------ addcmul and the GEMMs


def _value_in(fn: str, name: str, value: Any, dtype: np.dtype) -> Any:
    """A scale (``value``, ``beta``, ``alpha``) for a result of ``dtype``: truncated to an
    integer for integer results, as PyTorch casts it (``value=0.5`` is 0 there)."""
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, numbers.Number):
        raise TypeError(f"{fn}(): argument '{name}' must be Number, not {type(value).__name__}")
    return int(value) if dtype.kind in "iu" else value


def addcmul(input: Any, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1,  # noqa: A002
            out: Tensor | None = None) -> Tensor:
    """``input + value * tensor1 * tensor2``, all three broadcast, in their promoted dtype
    (Adam's second moment: ``v.mul_(beta2).addcmul_(g, g, value=1 - beta2)``)."""
    return _out(_t(input).addcmul(tensor1, tensor2, value=value), out, "addcmul")


def addcdiv(input: Any, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1,  # noqa: A002
            out: Tensor | None = None) -> Tensor:
    """``input + value * tensor1 / tensor2`` (Adam's step: ``p.addcdiv_(m, v.sqrt() + eps,
    value=-lr)``); integer ``tensor1`` and ``tensor2`` are refused, as PyTorch does."""
    return _out(_t(input).addcdiv(tensor1, tensor2, value=value), out, "addcdiv")


def _addc(self: Tensor, name: str, tensor1: Any, tensor2: Any, value: Any) -> Tensor:
    t1 = _tensor_arg(name, "tensor1", tensor1, 2)
    t2 = _tensor_arg(name, "tensor2", tensor2, 3)
    if name == "addcdiv" and result_type(t1, t2).kind in "biu":
        raise InvalidArgument(
            "Integer division with addcdiv is no longer supported, and in a future release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic "
            "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
            "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    dtype = result_type(self, t1, t2)
    if dtype == bool_:
        raise NotImplementedError(f"{name}: not implemented for bool tensors")
    _broadcast(name, self.shape, t1.shape, t2.shape)
    work = float32 if dtype == float16 else dtype  # (float16 in float32, rounded once,
    a, b, c = (t._cast(work) for t in (self, t1, t2))  # as PyTorch's opmath)
    value = _value_in(name, "value", value, dtype)
    if value != 1:  # (value * tensor1 first, as PyTorch's kernel rounds)
        b = b * value
    return (a + (b * c if name == "addcmul" else b / c))._cast(dtype)


def _t_addcmul(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``self + value * tensor1 * tensor2`` (see :func:`tinytrain.addcmul`)."""
    return _addc(self, "addcmul", tensor1, tensor2, value)


def _t_addcdiv(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``self + value * tensor1 / tensor2`` (see :func:`tinytrain.addcdiv`)."""
    return _addc(self, "addcdiv", tensor1, tensor2, value)


def _scaled_sum(fn: str, input: Tensor, product: Tensor, beta: Any, alpha: Any  # noqa: A002
                ) -> Tensor:
    """``beta * input + alpha * product``, ``input`` expanded to the product's shape (a
    ShapeError in PyTorch's words where it does not), and ignored when ``beta`` is 0 (its
    NaNs too; its gradient is then 0), as PyTorch's BLAS-style ops."""
    dtype = product.dtype
    expanded = input.expand(product.shape)
    beta = _value_in(fn, "beta", beta, dtype)
    alpha = _value_in(fn, "alpha", alpha, dtype)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        if not input.requires_grad:
            return product
        xp = backend.get_array_module(product._data)  # (a 0 gradient for input, as PyTorch)
        expanded = where(Tensor(xp.zeros(product.shape, bool_)), expanded,
                         scalar_array(0, product.dtype))
        return product + expanded
    return product + (expanded if beta == 1 else expanded * beta)


def _same_dtype(fn: str, pairs: Sequence[tuple[str, Tensor, str, Tensor]]) -> None:
    for name1, t1, name2, t2 in pairs:
        if t1.dtype != t2.dtype:
            raise DTypeError(f"{name1} and {name2} must have the same dtype, but got "
                             f"{torch_scalar_name(t1.dtype)} and {torch_scalar_name(t2.dtype)}")


def _t_addmm(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1
             ) -> Tensor:
    """``beta * self + alpha * (mat1 @ mat2)``: ``mat1 [n, m]``, ``mat2 [m, p]``, ``self``
    broadcast to ``[n, p]`` (``F.linear``'s ``bias + x @ W.T``); one dtype, as PyTorch."""
    m1 = _tensor_arg("addmm", "mat1", mat1, 2)
    m2 = _tensor_arg("addmm", "mat2", mat2, 3)
    for name, m in (("mat1", m1), ("mat2", m2)):
        if m.ndim != 2:
            raise ShapeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if m1.shape[1] != m2.shape[0]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({m1.shape[0]}x"
                         f"{m1.shape[1]} and {m2.shape[0]}x{m2.shape[1]})")
    _same_dtype("addmm", [("mat1", m1, "mat2", m2), ("self", self, "mat2", m2)])
    if self.dtype == float16:  # (in float32, rounded once, as PyTorch's opmath)
        return _t_addmm(*(t._cast(float32) for t in (self, m1, m2)), beta=beta,
                       alpha=alpha)._cast(float16)
    return _scaled_sum("addmm", self, m1 @ m2, beta, alpha)


def _t_baddbmm(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
               alpha: Any = 1) -> Tensor:
    """``beta * self + alpha * (batch1 @ batch2)``: ``batch1 [b, n, m]``,
    ``batch2 [b, m, p]``, ``self`` broadcast to ``[b, n, p]`` (attention's scores)."""
    b1 = _tensor_arg("baddbmm", "batch1", batch1, 2)
    b2 = _tensor_arg("baddbmm", "batch2", batch2, 3)
    for name, b in (("batch1", b1), ("batch2", b2)):
        if b.ndim != 3:
            raise ShapeError(f"{name} must be a 3D tensor, got shape {list(b.shape)}")
    want = [b1.shape[0], b1.shape[2]]
    if list(b2.shape[:2]) != want:
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                         f"{want} but got: {list(b2.shape[:2])}.")
    _same_dtype("baddbmm", [("batch1", b1, "batch2", b2), ("self", self, "batch2", b2)])
    if self.dtype == float16:  # (in float32, rounded once, as PyTorch's opmath)
        return _t_baddbmm(*(t._cast(float32) for t in (self, b1, b2)), beta=beta,
                       alpha=alpha)._cast(float16)
    return _scaled_sum("baddbmm", self, b1 @ b2, beta, alpha)


def _t_addmv(self: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1
             ) -> Tensor:
    """``beta * self + alpha * (mat @ vec)``: ``mat [n, m]``, ``vec [m]``, ``self``
    broadcast to ``[n]``."""
    m = _tensor_arg("addmv", "mat", mat, 2)
    v = _tensor_arg("addmv", "vec", vec, 3)
    if m.ndim != 2 or v.ndim != 1 or self.ndim > 1:
        raise ShapeError(f"vector + matrix @ vector expected, got {self.ndim}, {m.ndim}, "
                         f"{v.ndim}")
    if m.shape[1] != v.shape[0] or self.numel() not in (1, m.shape[0]):
        raise ShapeError(f"size mismatch, got input ({self.numel()}), mat ({m.shape[0]}x"
                         f"{m.shape[1]}), vec ({v.shape[0]})")
    _same_dtype("addmv", [("mat", m, "vec", v), ("self", self, "vec", v)])
    if self.dtype == float16:  # (in float32, rounded once, as PyTorch's opmath)
        return _t_addmv(*(t._cast(float32) for t in (self, m, v)), beta=beta,
                       alpha=alpha)._cast(float16)
    return _scaled_sum("addmv", self, m @ v, beta, alpha)


def _t_addr(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1
            ) -> Tensor:
    """``beta * self + alpha * outer(vec1, vec2)``: ``vec1 [n]``, ``vec2 [m]``, ``self``
    broadcast to ``[n, m]``; dtypes promote (bool tensors: ``and``/``or``, as PyTorch)."""
    v1 = _tensor_arg("addr", "vec1", vec1, 2)
    v2 = _tensor_arg("addr", "vec2", vec2, 3)
    for name, v in (("vec1", v1), ("vec2", v2)):
        if v.ndim != 1:
            raise ShapeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    dtype = result_type(self, v1, v2)
    for name, scale in (("beta", beta), ("alpha", alpha)):
        if dtype == bool_ and not isinstance(scale, builtins.bool | int):
            raise DTypeError(f"Boolean {name} only supported for Boolean results.")
        if dtype.kind in "iu" and not isinstance(scale, numbers.Integral):
            raise InvalidArgument(f"For integral input tensors, argument {name} must not be a "
                                  f"floating point number.")
    a, x, y = (t._cast(dtype) for t in (self, v1, v2))
    if dtype == bool_:
        outer = x.unsqueeze(1) & y.unsqueeze(0)
        expanded = a.expand(outer.shape)
        return (expanded & builtins.bool(beta)) | (outer & builtins.bool(alpha))
    if dtype.kind == "f" and alpha != 1:  # ((alpha * vec1) * vec2, as PyTorch's kernel rounds)
        x, alpha = x * alpha, 1
    return _scaled_sum("addr", a, x.unsqueeze(1) * y.unsqueeze(0), beta, alpha)


def _blas(name: str, method: Any) -> Any:
    def fn(input: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1, alpha: Any = 1,  # noqa: A002
           out: Tensor | None = None) -> Tensor:
        return _out(method(_t(input), a, b, beta=beta, alpha=alpha), out, name,
                    exact=name != "addr")  # (PyTorch's GEMMs want out of the result's dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = method.__doc__.replace("self", "input")
    return fn


addmm, baddbmm, addmv, addr = (_blas(n, m) for n, m in (
    ("addmm", _t_addmm), ("baddbmm", _t_baddbmm), ("addmv", _t_addmv), ("addr", _t_addr)))


# ------------------------------------------------------------------ shapes


def _tensor_list(name: str, tensors: tuple) -> list[Tensor]:
    """``f(a, b)`` or ``f([a, b])`` as a list of Tensors."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if not tensors:
        raise InvalidArgument(f"{name} expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected Tensors, got {type(t).__name__} at position {i}")
    return list(tensors)


def meshgrid(*tensors: Tensor, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids of N 1-D (or 0-d) tensors of one dtype: with ``indexing='ij'``
    each output has shape ``[len(t0), len(t1), ...]``; with ``'xy'`` the first two sizes
    are swapped (NumPy's default). Without ``indexing``: ``'ij'``, with PyTorch's warning
    that it will be required. The outputs are expanded views (do not write into them)."""
    ts = _tensor_list("meshgrid", tensors)
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise InvalidArgument(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                              f'received: {indexing}')
    if builtins.any(t.dtype != ts[0].dtype for t in ts):
        raise DTypeError(f"meshgrid expects all tensors to have the same dtype, got "
                         f"{', '.join(str(t.dtype) for t in ts)}")
    if builtins.any(t.ndim > 1 for t in ts):
        raise ShapeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got "
                         f"shapes {[list(t.shape) for t in ts]}")
    ts = [t.reshape(-1) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    grids = [t.reshape([-1 if d == i else 1 for d in range(len(ts))]).expand(shape)
             for i, t in enumerate(ts)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape (views; each keeps its dtype)."""
    ts = [_t(t) for t in (tensors[0] if len(tensors) == 1 and isinstance(tensors[0], list | tuple)
                          else tensors)]
    shape = _broadcast("broadcast_tensors", *(t.shape for t in ts))
    return tuple(t.expand(shape) for t in ts)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least 1 dimension (a 0-d one becomes ``[1]``)."""
    return _atleast(tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least 2 dimensions (``[n]`` becomes ``[1, n]``)."""
    return _atleast(tensors, lambda t: t.reshape(1, -1) if t.ndim < 2 else t)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least 3 dimensions: ``[]`` -> ``[1, 1, 1]``, ``[n]`` ->
    ``[1, n, 1]``, ``[m, n]`` -> ``[m, n, 1]``."""
    def three(t: Tensor) -> Tensor:
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        return t.unsqueeze(-1) if t.ndim == 2 else t

    return _atleast(tensors, three)


def _atleast(tensors: tuple, fn: Any) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fn(tensors[0])
    seq = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], list | tuple) else tensors
    return tuple(fn(_t(t)) for t in seq)


def hstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Join along dim 1 (dim 0 when all are 1-D; 0-d tensors count as ``[1]``)."""
    ts = [atleast_1d(t) for t in _tensor_seq("hstack", tensors)]
    return cat(ts, 0 if builtins.all(t.ndim == 1 for t in ts) else 1, out=out)


def vstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Join as rows: :func:`atleast_2d` of each, joined along dim 0."""
    return cat([atleast_2d(t) for t in _tensor_seq("vstack", tensors)], 0, out=out)


def dstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Join along the third dim: :func:`atleast_3d` of each, joined along dim 2."""
    return cat([atleast_3d(t) for t in _tensor_seq("dstack", tensors)], 2, out=out)


def column_stack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Join as columns: 0-d and 1-d tensors become ``[n, 1]`` columns, joined along dim 1."""
    ts = _tensor_seq("column_stack", tensors)
    return cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in ts], 1, out=out)


row_stack = vstack


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0  # noqa: A002
                 ) -> tuple[Tensor, ...]:
    """Split into views along ``dim``: an int ``n`` gives ``n`` parts as equal as can be
    (the first ``size % n`` one longer); a sequence of indices splits before each (as
    NumPy's ``array_split``; indices past the end give empty parts). A 0-d integer tensor
    counts as ``n``, a 1-D one as indices."""
    x = _t(input)
    if x.ndim == 0:
        raise InvalidArgument("tensor_split expected at least a 1-dimensional tensor, but got "
                              "a tensor with 0 dims")
    _int_dim_arg("tensor_split", "dim", dim)
    (axis,) = O._normalize_axis(dim, x.ndim)
    split = indices_or_sections
    if isinstance(split, Tensor):
        if split.dtype != np.dtype(np.int64):
            raise DTypeError(f"tensor_split expected tensor_indices_or_sections to have dtype "
                             f"of long, but got {torch_scalar_name(split.dtype)}")
        if split.ndim > 1:
            raise InvalidArgument(f"tensor_split expected tensor_indices_or_sections to be a "
                                  f"zero-dimensional or one-dimensional tensor, but got a "
                                  f"tensor with {split.ndim} dims")
        split = split.item() if split.ndim == 0 else split.tolist()
    n = x.shape[axis]
    if isinstance(split, numbers.Integral) and not isinstance(split, builtins.bool):
        if split <= 0:
            raise InvalidArgument(f"number of sections must be larger than 0, got {split}")
        size, extra = divmod(n, int(split))
        bounds = [i * size + builtins.min(i, extra) for i in range(1, int(split))]
    elif isinstance(split, list | tuple) and builtins.all(
            isinstance(i, numbers.Integral) and not isinstance(i, builtins.bool) for i in split):
        bounds = [int(i) for i in split]
    else:
        raise TypeError(f"tensor_split(): argument 'indices_or_sections' must be int, a "
                        f"sequence of ints or a Tensor, not {type(split).__name__}")
    starts, stops = [0, *bounds], [*bounds, n]
    lead = (slice(None),) * axis
    return tuple(x[(*lead, slice(a, b))] for a, b in zip(starts, stops))


def _indices(name: str, row: int, col: int, offset: int, dtype: Any, device: Any,
             lower: bool) -> Tensor:
    for arg, v in (("row", row), ("col", col), ("offset", offset)):
        _int_dim_arg(name, arg, v)
    if row < 0 or col < 0:
        raise InvalidArgument(f"{'row' if row < 0 else 'col'} must be non-negative, got "
                              f"{row if row < 0 else col}")
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or dtype == np.dtype(np.uint8):
        raise NotImplementedError(f"{name}: dtype must be int64 or int32, got "
                                  f"{torch_scalar_name(dtype)} ({dtype})")
    xp = backend.array_module(backend.default_device() if device is None
                              else backend.normalize_device(device))
    keep = xp.tri(row, col, k=offset, dtype=bool) if lower else ~xp.tri(
        row, col, k=offset - 1, dtype=bool)
    return Tensor(xp.stack(xp.nonzero(keep)).astype(dtype).reshape(2, -1))


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = int64,
                 device: Any = None) -> Tensor:
    """``[2, N]``: the row and column indices of the lower triangle of a ``row x col``
    matrix (on and below diagonal ``offset``), row by row."""
    return _indices("tril_indices", row, col, offset, dtype, device, lower=True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = int64,
                 device: Any = None) -> Tensor:
    """``[2, N]``: the indices of the upper triangle (on and above diagonal ``offset``)."""
    return _indices("triu_indices", row, col, offset, dtype, device, lower=False)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None  # noqa: A002
                   ) -> Tensor:
    """The entries at ``indices`` along ``dim`` (``x.take_along_dim(x.argmax(1, keepdim=True),
    1)``): ``indices`` has ``input``'s number of dimensions, and the two broadcast in the
    others. Without ``dim`` both are flattened. With ``dim`` a negative index counts from the
    end (down to ``-size``), as PyTorch's; one out of range is an IndexError (PyTorch's CPU
    kernel reads past the row instead)."""
    x = _t(input)
    idx = _tensor_arg("take_along_dim", "indices", indices, 2)
    if idx.dtype != np.dtype(np.int64):
        raise DTypeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                         f"{torch_scalar_name(idx.dtype)}")
    if dim is None:
        return x.reshape(-1).gather(0, idx.reshape(-1))  # (no wrapping here, as PyTorch)
    _int_dim_arg("take_along_dim", "dim", dim)
    if idx.ndim != x.ndim:
        raise ShapeError(f"torch.take_along_dim(): input and indices should have the same "
                         f"number of dimensions, but got {x.ndim} dimensions for input, and "
                         f"{idx.ndim} dimensions for indices")
    if x.ndim == 0:
        return x.gather(dim, idx)
    (axis,) = O._normalize_axis(dim, x.ndim)
    shape = list(_broadcast("take_along_dim", [1 if d == axis else n for d, n in
                                               enumerate(x.shape)],
                            [1 if d == axis else n for d, n in enumerate(idx.shape)]))
    x = x.expand([x.shape[axis] if d == axis else n for d, n in enumerate(shape)])
    idx = idx.expand([idx.shape[axis] if d == axis else n for d, n in enumerate(shape)])
    return x.gather(axis, _wrapped(idx, x.shape[axis]))


def _wrapped(idx: Tensor, n: int) -> Tensor:
    """Indices in ``[-n, 0)`` counted from the end, as PyTorch's ``take_along_dim`` does
    (others are left for ``gather``'s range check)."""
    xp = backend.get_array_module(idx._data)
    d = idx._data
    return Tensor(xp.where((d < 0) & (d >= -n), d + n, d))


def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of a 2-D tensor's main diagonal (integers sum to int64)."""
    x = _t(input)
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    if x.dtype == bool_:
        raise NotImplementedError("trace: not implemented for bool tensors")
    return x.diagonal().sum()


def cross(input: Tensor, other: Tensor, dim: int | None = None, *,  # noqa: A002
          out: Tensor | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (both tensors of one dtype and number of
    dimensions, broadcast in the others). Without ``dim``: the first dimension of size 3,
    with PyTorch's deprecation warning."""
    a = _tensor_arg("cross", "input", input, 1)
    b = _tensor_arg("cross", "other", other, 2)
    if a.ndim != b.ndim:
        raise ShapeError("linalg.cross: inputs must have the same number of dimensions.")
    if a.dtype != b.dtype:
        raise DTypeError(f"cross: expected scalar type {torch_scalar_name(a.dtype)} but found "
                         f"{torch_scalar_name(b.dtype)}")
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross."
                      "\nThe default value of dim will change to agree with that of "
                      "linalg.cross in a future release.", UserWarning, stacklevel=2)
        sizes = [d for d, n in enumerate(_broadcast("cross", a.shape, b.shape)) if n == 3]
        if not sizes:
            raise ShapeError("no dimension of size 3 in input")
        axis = sizes[0]
    else:
        _int_dim_arg("cross", "dim", dim)
        (axis,) = O._normalize_axis(dim, a.ndim)
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {axis} must have length 3. Got "
                         f"{a.shape[axis]} and {b.shape[axis]}")
    _broadcast("cross", a.shape, b.shape)
    a0, a1, a2 = (a.narrow(axis, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(axis, i, 1) for i in range(3))
    return _out(cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis), out,
                "cross")


def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Tensor | None = None) -> Tensor:
    """Sum of products over dimensions: ``dims=n`` contracts ``a``'s last ``n`` with ``b``'s
    first ``n``; ``dims=([1, 2], [0, 1])`` names them. The result's dims are ``a``'s free
    ones, then ``b``'s. One dtype, as PyTorch."""
    a = _tensor_arg("tensordot", "a", a, 1)
    b = _tensor_arg("tensordot", "b", b, 2)
    if isinstance(dims, Tensor):
        dims = dims.item() if dims.ndim == 0 else dims.tolist()
    if isinstance(dims, numbers.Integral) and not isinstance(dims, builtins.bool):
        if dims < 0:
            raise InvalidArgument(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise InvalidArgument(f"tensordot expects dims < ndim_a or ndim_b, but got "
                                  f"dims={dims}")
        da, db = list(range(-dims, 0)), list(range(dims))  # (PyTorch names a's as -n..-1)
    elif isinstance(dims, list | tuple) and len(dims) == 2:
        da, db = ([d] if isinstance(d, numbers.Integral) else list(d) for d in dims)
        if len(da) != len(db):
            raise InvalidArgument("both dimension lists should have same length")
    else:
        raise TypeError(f"tensordot(): argument 'dims' must be an int, a pair of lists of "
                        f"ints or a Tensor, not {dims!r}")
    if a.dtype != b.dtype:
        raise DTypeError(f"tensordot: both inputs should have same dtype, got {a.dtype} and "
                         f"{b.dtype}")
    da_n = list(O._normalize_axis(da, a.ndim) or ()) if da else []
    db_n = list(O._normalize_axis(db, b.ndim) or ()) if db else []
    for i, j, di, dj in zip(da_n, db_n, da, db):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"contracted dimensions need to match, but first has size "
                             f"{a.shape[i]} in dim {di} and second has size {b.shape[j]} in "
                             f"dim {dj}")
    free_a = [d for d in range(a.ndim) if d not in da_n]
    free_b = [d for d in range(b.ndim) if d not in db_n]
    k = math.prod(a.shape[d] for d in da_n)
    left = a.permute(*free_a, *da_n).reshape(-1, k)
    right = b.permute(*db_n, *free_b).reshape(k, -1)
    result = (left @ right).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])
    return _out(result, out, "tensordot", exact=True)


def kron(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The Kronecker product: block ``(i, j, ...)`` is ``input[i, j, ...] * other``; the
    shapes are aligned on the right (missing leading dims are 1); dtypes promote."""
    a = _tensor_arg("kron", "input", input, 1)
    b = _tensor_arg("kron", "other", other, 2)
    dtype = promote_types(a.dtype, b.dtype)  # (a 0-d operand counts as dimensioned here)
    a, b = a._cast(dtype), b._cast(dtype)
    nd = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    left = a.reshape([v for n in sa for v in (n, 1)])
    right = b.reshape([v for n in sb for v in (1, n)])
    product = left & right if dtype == bool_ else left * right
    return _out(product.reshape([m * n for m, n in zip(sa, sb)]), out, "kron")


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each of ``elements`` is among ``test_elements`` (a bool tensor of
    ``elements``' shape; either may be a number, not both; NaN is in nothing)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): expected a Tensor as elements or test_elements, got two "
                        "numbers")
    for name, v in (("elements", elements), ("test_elements", test_elements)):
        if not isinstance(v, Tensor | numbers.Number):
            raise TypeError(f"isin(): argument '{name}' must be Tensor or Number, not "
                            f"{type(v).__name__}")
    like = elements if isinstance(elements, Tensor) else test_elements
    _check_same_device("isin", (elements, test_elements))
    dtype = result_type(elements, test_elements)
    e, t = (v._cast(dtype)._data if isinstance(v, Tensor) else
            backend.get_array_module(like._data).asarray(v, dtype=dtype)
            for v in (elements, test_elements))
    xp = backend.get_array_module(e)
    found = xp.isin(e.reshape(-1), t.reshape(-1), assume_unique=assume_unique)
    return Tensor((~found if invert else found).reshape(e.shape))


# ------------------------------------------------------------------ order statistics, scans

KthvalueResult = return_types.kthvalue
CummaxResult = return_types.cummax
CumminResult = return_types.cummin


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False  # noqa: A002
             ) -> KthvalueResult:
    """The ``k``-th smallest value along ``dim`` (1-based; NaN counts as the largest) and
    its index: ``(values, indices)``; the gradient goes to the chosen entries. Which index
    of tied values is returned is not specified (as in PyTorch)."""
    x = _t(input)
    _int_dim_arg("kthvalue", "k", k)
    _int_dim_arg("kthvalue", "dim", dim)
    (axis,) = O._normalize_axis(dim, x.ndim)
    n = x.shape[axis] if x.ndim else 1
    if not 1 <= k <= n:
        raise IndexRangeError(f"kthvalue(): selected number k out of range for dimension {axis} "
                         f"(k={k}, size {n})")
    if x.ndim == 0:
        return KthvalueResult(x.clone(), Tensor(np.asarray(0, np.int64)).to(x.device))
    xp = backend.get_array_module(x._data)
    order = xp.argsort(x._data, axis=axis, kind="stable")
    index = order[(slice(None),) * axis + (slice(k - 1, k),)]
    values = x.gather(axis, Tensor(index))
    if not keepdim:
        values, index = values.squeeze(axis), index.squeeze(axis)
    return KthvalueResult(values, Tensor(index))


def _scan(x: Tensor, axis: int, combine: Any) -> Any:
    """An inclusive scan along ``axis`` in ``log2(n)`` doubling steps (Hillis-Steele),
    ``combine(earlier, later)`` associative; NumPy and CuPy alike, no per-element loop."""
    n, step = x.shape[axis], 1
    lead = (slice(None),) * axis
    while step < n:
        later = x[(*lead, slice(step, None))]
        earlier = x[(*lead, slice(0, n - step))]
        x = cat([x[(*lead, slice(0, step))], combine(earlier, later)], axis)
        step *= 2
    return x


def _cumextreme(name: str, input: Any, dim: int, largest: bool) -> Any:  # noqa: A002
    x = _t(input)
    _int_dim_arg(name, "dim", dim)
    (axis,) = O._normalize_axis(dim, x.ndim)
    result = CummaxResult if largest else CumminResult
    if x.ndim == 0:
        return result(x.clone(), Tensor(np.asarray(0, np.int64)).to(x.device))
    xp = backend.get_array_module(x._data)
    place = [1] * x.ndim
    place[axis] = x.shape[axis]
    index = xp.broadcast_to(xp.arange(x.shape[axis]).reshape(place), x.shape)
    values = x._data

    def combine(earlier: Any, later: Any) -> Any:
        (v0, i0), (v1, i1) = earlier, later
        nan0, nan1 = (v != v for v in (v0, v1))  # (ties go to the later index, as PyTorch;
        take = ~nan0 & (nan1 | ((v1 >= v0) if largest else (v1 <= v0)))  # NaN to the first)
        return xp.where(take, v1, v0), xp.where(take, i1, i0)

    n, step = x.shape[axis], 1
    lead = (slice(None),) * axis
    pair = (values, index)
    while step < n:
        head = tuple(p[(*lead, slice(0, step))] for p in pair)
        merged = combine(tuple(p[(*lead, slice(0, n - step))] for p in pair),
                         tuple(p[(*lead, slice(step, None))] for p in pair))
        pair = tuple(xp.concatenate([h, m], axis=axis) for h, m in zip(head, merged))
        step *= 2
    index = Tensor(xp.ascontiguousarray(pair[1]).astype(np.int64))
    return result(x.gather(axis, index) if x.numel() else x.clone(), index)


def cummax(input: Tensor, dim: int) -> CummaxResult:  # noqa: A002
    """The running maximum along ``dim`` and where it was found: ``(values, indices)``
    (the last of equal values; a NaN stays, at its first index). The gradient goes to the
    entries found."""
    return _cumextreme("cummax", input, dim, largest=True)


def cummin(input: Tensor, dim: int) -> CumminResult:  # noqa: A002
    """The running minimum along ``dim``: ``(values, indices)`` (see :func:`cummax`)."""
    return _cumextreme("cummin", input, dim, largest=False)


def logcumsumexp(input: Tensor, dim: int, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """``log(cumsum(exp(x)))`` along ``dim``, without overflow (a scan of
    :func:`logaddexp`; floating tensors), differentiable."""
    x = _t(input)
    _floating_only("logcumsumexp", x.dtype)
    _int_dim_arg("logcumsumexp", "dim", dim)
    (axis,) = O._normalize_axis(dim, x.ndim)
    if x.ndim == 0:
        return _out(x.clone(), out, "logcumsumexp")
    work = x._cast(float32) if x.dtype == float16 else x  # (float16 in float32, as PyTorch)
    return _out(_scan(work, axis, logaddexp)._cast(x.dtype), out, "logcumsumexp")


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:  # noqa: A002
    """Rotate by ``k * 90`` degrees in the plane of ``dims``, from the first toward the
    second (``k`` may be negative)."""
    x = _t(input)
    dims = list(dims)
    if len(dims) != 2:
        raise InvalidArgument(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise ShapeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = (O._normalize_axis(d, x.ndim)[0] for d in dims)
    if d0 == d1:
        raise InvalidArgument(f"expected rotation dims to be different, but got dim0 = {d0} and "
                              f"dim1 = {d1}")
    _int_dim_arg("rot90", "k", k)
    k %= 4
    if k == 1:
        return x.flip(d1).transpose(d0, d1)
    if k == 2:
        return x.flip(d0, d1)
    if k == 3:
        return x.flip(d0).transpose(d0, d1)
    return x.clone()


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distances between the rows of ``x1 [..., P, M]`` and ``x2 [..., R, M]``:
    ``[..., P, R]`` (batch dims broadcast; float32/float64 of one dtype). Computed on the
    ``[..., P, R, M]`` differences (exact; no ``|a|^2 + |b|^2 - 2ab`` cancellation, so
    ``compute_mode`` changes nothing); the gradient at a zero distance is 0, as PyTorch's."""
    a = _tensor_arg("cdist", "x1", x1, 1)
    b = _tensor_arg("cdist", "x2", x2, 2)
    for name, t in (("X1", a), ("X2", b)):
        if t.ndim < 2:
            raise ShapeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
        if t.dtype.kind != "f" or t.dtype == np.dtype(np.float16):
            raise DTypeNotImplementedError(f"cdist only supports float32 and float64 tensors, "
                                           f"{name} got: {torch_scalar_name(t.dtype)}")
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} "
                         f"X2: {b.shape[-1]}")
    if a.dtype != b.dtype:
        raise DTypeError(f"cdist: expected scalar type {torch_scalar_name(a.dtype)} but found "
                         f"{torch_scalar_name(b.dtype)}")
    if not isinstance(p, numbers.Real) or p < 0:
        raise InvalidArgument(f"cdist only supports non-negative p values, got {p}")
    _broadcast("cdist", a.shape[:-2], b.shape[:-2])
    differences = a.unsqueeze(-2) - b.unsqueeze(-3)
    if a.shape[-1] == 0:  # (no coordinates: every distance 0, the inf-norm's too, as PyTorch)
        return differences.sum(-1)
    return differences.norm(p, dim=-1)


# ------------------------------------------------------------------ attach to Tensor

# ------------------------------------------------------------------ statistics, logit, ...


def logit(input: Tensor, eps: float | None = None, *,  # noqa: A002
          out: Tensor | None = None) -> Tensor:
    """``log(p / (1 - p))`` element-wise, the inverse of ``sigmoid``; with ``eps``, ``p`` is
    first clamped to ``[eps, 1 - eps]`` (its gradient is 0 outside, as PyTorch's). Integer
    input gives the default float dtype."""
    return _out(_t_logit(_tensor_arg("logit", "input", input, 1), eps), out, "logit")


def _t_logit(self: Tensor, eps: float | None = None) -> Tensor:
    """``log(self / (1 - self))``; ``eps`` clamps ``self`` to ``[eps, 1 - eps]`` first."""
    return Logit.apply(_float_input(self), None if eps is None else float(eps))


def var_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None,  # noqa: A002
             keepdim: bool = False, *, correction: float | None = None) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` over ``dim`` with :meth:`Tensor.var`'s arguments (``correction``
    1 by default)."""
    x = _tensor_arg("var_mean", "input", input, 1)
    return (x._variance("var_mean", dim, unbiased, keepdim, correction),
            x.mean(None if isinstance(dim, builtins.bool) else dim, keepdim))


def std_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None,  # noqa: A002
             keepdim: bool = False, *, correction: float | None = None) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` over ``dim`` with :meth:`Tensor.std`'s arguments."""
    x = _tensor_arg("std_mean", "input", input, 1)
    return (x._std("std_mean", dim, unbiased, keepdim, correction),
            x.mean(None if isinstance(dim, builtins.bool) else dim, keepdim))


def argwhere(input: Tensor) -> Tensor:  # noqa: A002
    """The indices of the non-zero entries, int64 ``[count, ndim]``: ``nonzero(input)``."""
    return _tensor_arg("argwhere", "input", input, 1).nonzero()


def dist(input: Tensor, other: Tensor, p: float = 2.0) -> Tensor:  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcast), over all entries."""
    return (_tensor_arg("dist", "input", input, 1) - other).norm(p)


def logspace(start: float, end: float, steps: int, base: float = 10.0, *,
             dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """``base ** linspace(start, end, steps)``: ``steps`` values spaced evenly on a log
    scale from ``base**start`` to ``base**end`` (computed in float64, then cast to ``dtype``,
    the default float dtype when None)."""
    exponents = linspace(start, end, steps, dtype=float64, device=device)
    values = (float(base) ** exponents).to(dtype=dtype if dtype is not None
                                           else get_default_dtype())
    return values.requires_grad_(requires_grad) if requires_grad else values


def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    """``input.flip(1)``: the columns in reverse order (at least 2-D)."""
    x = _tensor_arg("fliplr", "input", input, 1)
    if x.ndim < 2:
        raise InvalidArgument("Input must be >= 2-d.")
    return x.flip(1)


def flipud(input: Tensor) -> Tensor:  # noqa: A002
    """``input.flip(0)``: the rows in reverse order (at least 1-D)."""
    x = _tensor_arg("flipud", "input", input, 1)
    if x.ndim < 1:
        raise InvalidArgument("Input must be >= 1-d.")
    return x.flip(0)


def _t_fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Write ``fill_value`` on the main diagonal (``self[i, i, ...]``), in place; a tall
    matrix with ``wrap`` starts the diagonal again below each ``N x N`` block (NumPy's
    ``fill_diagonal``). Through ``masked_fill_``, so the diagonal's gradient is 0."""
    if self.ndim < 2:
        raise InvalidArgument("dimensions must larger than 1")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise InvalidArgument("all dimensions of input must be of equal length")
    xp = backend.get_array_module(self._data)
    mask = xp.zeros(self.shape, dtype=bool)
    xp.fill_diagonal(mask, True, wrap=wrap)
    return self.masked_fill_(Tensor(mask), fill_value)


_METHODS = {
    "repeat_interleave": repeat_interleave,
    "addcmul": _t_addcmul, "addcdiv": _t_addcdiv, "addmm": _t_addmm, "baddbmm": _t_baddbmm,
    "addmv": _t_addmv, "addr": _t_addr,
    "atan2": _t_atan2, "arctan2": _t_atan2, "hypot": _t_hypot, "logaddexp": _t_logaddexp,
    "xlogy": _t_xlogy, "erf": _t_erf, "erfc": _t_erfc, "erfinv": _t_erfinv, "sgn": _t_sgn,
    "frac": _t_frac, "copysign": _t_copysign, "heaviside": _t_heaviside,
    "deg2rad": _t_deg2rad, "rad2deg": _t_rad2deg, "signbit": _t_signbit,
    "nan_to_num": _t_nan_to_num, "_float_input": _float_input,
    "tensor_split": tensor_split, "take_along_dim": take_along_dim, "trace": trace,
    "cross": cross, "kron": kron, "kthvalue": kthvalue, "cummax": cummax, "cummin": cummin,
    "logcumsumexp": logcumsumexp, "rot90": rot90,
    "logit": _t_logit, "argwhere": argwhere, "dist": dist, "fliplr": fliplr,
    "flipud": flipud, "fill_diagonal_": _t_fill_diagonal_,
}


def _inplace(name: str) -> Any:
    method = _METHODS[name]

    def op(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        operands = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        return self._inplace(f"{name}_", lambda s: method(s, *args, **kwargs), *operands)

    op.__name__ = op.__qualname__ = f"{name}_"
    op.__doc__ = f"In-place :meth:`{name}` (the tensor keeps its dtype)."
    return op


def _attach() -> None:
    for name, method in _METHODS.items():
        if not name.startswith("_") and method.__name__.startswith("_t_"):
            method.__name__ = method.__qualname__ = name
        setattr(Tensor, name, method)
    for name in ("addcmul addcdiv addmm baddbmm addmv addr atan2 arctan2 hypot xlogy erf "
                 "erfc erfinv sgn frac copysign heaviside deg2rad rad2deg nan_to_num "
                 "logit").split():
        setattr(Tensor, f"{name}_", _inplace(name))


_attach()
arctan2 = atan2

# NumPy's axis= / keepdims= where PyTorch's (built-in) ops take them
_ALONG_DIM = ("repeat_interleave tensor_split take_along_dim cross kthvalue cummax cummin "
              "logcumsumexp")
_numpy_names.accept(Tensor, _ALONG_DIM)
_numpy_names.accept(globals(), _ALONG_DIM + " var_mean std_mean")

__all__ = [
    "addcdiv", "addcmul", "addmm", "addmv", "addr", "arctan2", "argwhere", "atan2",
    "atleast_1d", "atleast_2d", "atleast_3d", "baddbmm", "broadcast_tensors", "cdist",
    "column_stack", "copysign", "cross", "cummax", "cummin", "deg2rad", "dist", "dstack", "erf",
    "erfc", "erfinv", "fliplr", "flipud", "frac", "heaviside", "hstack", "hypot", "isin", "kron",
    "kthvalue",
    "logaddexp", "logcumsumexp", "logit", "logspace", "meshgrid", "nan_to_num", "rad2deg",
    "repeat_interleave", "rot90", "row_stack", "sgn", "signbit", "std_mean", "take_along_dim",
    "tensor_split", "tensordot", "tril_indices", "triu_indices", "trace", "var_mean", "vstack",
    "xlogy",
]
