"""``tinytrain.linalg``: the parts of ``torch.linalg`` that training scripts use.

``vector_norm`` (gradient clipping, normalising embeddings), ``matrix_norm`` and ``norm``
(which picks one of them, as PyTorch's), written with the Tensor's differentiable
reductions; ``solve`` and ``inv`` (Newton steps, natural gradients), one differentiable
``Solve`` op whose gradients are again solves, so they can be differentiated again. The
matrix norms that need a singular value decomposition (``ord`` 2, -2 and ``"nuc"``) and the
rest of ``torch.linalg`` (``svd``, ``eigh``, ...) are not in tinytrain: they raise, naming
what to use instead.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from tinytrain import _missing
from tinytrain.autograd.function import Function
from tinytrain.autograd.ops import InvalidArgument, unbroadcast, unbroadcast_graph
from tinytrain.backend import get_array_module
from tinytrain.dtypes import DTypeError
from tinytrain.tensor import Tensor

__all__ = ["LinAlgError", "inv", "matrix_norm", "norm", "solve", "vector_norm"]


class LinAlgError(RuntimeError):
    """PyTorch's ``torch.linalg.LinAlgError``: a singular matrix in ``solve`` / ``inv``."""

_SVD = ("needs a singular value decomposition, which tinytrain does not have; compute it on "
        "x.numpy() with numpy.linalg")


def _floating(fn: str, x: Any, dtype: Any) -> Tensor:
    """``x`` as a floating Tensor (in ``dtype`` when given), or PyTorch's errors."""
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{fn}(): argument 'input' must be a Tensor, not "
                        f"{type(x).__name__}")
    if dtype is not None:
        if np.promote_types(x.dtype, np.dtype(dtype)) != np.dtype(dtype):
            raise DTypeError(f"linalg.{fn}: the dtype of the input ({x.dtype}) should be "
                             f"convertible without narrowing to the specified dtype "
                             f"({np.dtype(dtype)})")
        x = x.to(dtype=dtype)
    if x.dtype.kind != "f":
        raise DTypeError(f"linalg.{fn}: Expected a floating point tensor as input. Got "
                         f"{x.dtype}")
    return x


def vector_norm(x: Tensor, ord: float = 2, dim: Any = None,  # noqa: A002
                keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The ``ord``-norm of ``x``'s entries over ``dim`` (an int, a tuple, or None: all of
    them, whatever ``x``'s shape): ``sum(|x|^ord)^(1/ord)``, ``max(|x|)`` for ``inf``,
    ``min(|x|)`` for ``-inf``, the count of non-zeros for 0. Floating input only."""
    x = _floating("vector_norm", x, dtype)
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"linalg.vector_norm(): argument 'ord' must be a number, not "
                        f"{type(ord).__name__}")
    return x.norm(float(ord), dim, keepdim)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1),  # noqa: A002
                keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The matrix norm of the matrices ``A[..., i, j]`` (``dim`` names the row and column
    axes): ``"fro"`` (Frobenius), 1 / -1 (largest / smallest column sum of ``|A|``), ``inf``
    / ``-inf`` (row sums). ``2``, ``-2`` and ``"nuc"`` are not in tinytrain."""
    A = _floating("matrix_norm", A, dtype)
    if A.ndim < 2:
        raise InvalidArgument(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                              f"dimensions, got shape {tuple(A.shape)}")
    if not isinstance(dim, tuple | list) or len(dim) != 2:
        raise InvalidArgument(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim!r}")
    rows, cols = (d % A.ndim for d in dim)
    if rows == cols:
        raise InvalidArgument(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                              f"{dim[1]})")
    if ord == "fro":
        return A.norm(2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm(ord={ord!r}) {_SVD}")
    if ord not in (1, -1, math.inf, -math.inf):
        raise InvalidArgument(f"linalg.matrix_norm: Order {ord!r} not supported.")
    # ord 1: the largest column sum (sum over the rows); inf: the largest row sum
    over, across = (rows, cols) if abs(ord) == 1 else (cols, rows)
    sums = A.abs().sum(over, keepdim=True)
    out = (sums.amax if ord > 0 else sums.amin)(across, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False,  # noqa: A002
         *, dtype: Any = None) -> Tensor:
    """PyTorch's ``linalg.norm``: a vector norm over an int ``dim`` (or of a 1-D ``A``), a
    matrix norm over a pair of dims (or of a 2-D ``A``); with neither ``ord`` nor ``dim``,
    the 2-norm of all entries."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) not in (1, 2):
        raise InvalidArgument(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                              f"Got {list(dim)}")
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    ndim = len(dim) if dim is not None else getattr(A, "ndim", 0)
    if dim is None and ndim not in (1, 2):
        raise InvalidArgument(f"linalg.norm: If dim is not specified but ord is, the input "
                              f"must be 1D or 2D. Got {ndim}D.")
    if ndim == 2:
        return matrix_norm(A, ord, (-2, -1) if dim is None else tuple(dim), keepdim,
                           dtype=dtype)
    if isinstance(ord, str):
        raise InvalidArgument(f"linalg.vector_norm: ord {ord!r} is a matrix norm; give two "
                              f"dims")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


class Solve(Function):
    """``X = A^-1 B`` for ``A [*, n, n]`` and ``B [*, n, k]`` (batch dims broadcast). Its
    gradients are ``gB = A^-T g`` (a solve again) and ``gA = -gB X^T``."""

    @staticmethod
    def forward(A, B, fn):
        xp = get_array_module(A)
        try:
            X = xp.linalg.solve(A, B)
        except np.linalg.LinAlgError:  # NumPy: LAPACK's getrf found a zero pivot
            X = None
        # CuPy does not raise by default (cuSOLVER's info stays on the GPU): the zero pivot
        # shows as inf / NaN in X. One host sync, as PyTorch's CUDA solve checks its info.
        if X is not None and (xp is np or bool(xp.isfinite(X).all())):
            return X
        if not (bool(xp.isfinite(A).all()) and bool(xp.isfinite(B).all())):
            if X is None:  # NaN or inf in A or B: NaN out, not an error, as PyTorch's
                shape = np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:]
                X = xp.full(shape, np.nan, dtype=A.dtype)
            return X
        what = ("The solver failed because the input matrix is singular." if fn == "solve"
                else "The inversion could not be completed because the input matrix is "
                "singular.")
        raise LinAlgError(f"linalg.{fn}: {what}")

    @staticmethod
    def setup_context(ctx, inputs, output):
        A, B, _ = inputs
        ctx.save_for_backward(A, output)
        ctx.shapes = (A.shape, B.shape)

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        xp = get_array_module(g)
        gB = xp.linalg.solve(xp.swapaxes(A, -1, -2), g)
        gA = -(gB @ xp.swapaxes(X, -1, -2)) if ctx.needs_input_grad[0] else None
        sa, sb = ctx.shapes
        return (None if gA is None else unbroadcast(gA, sa),
                unbroadcast(gB, sb) if ctx.needs_input_grad[1] else None, None)

    @staticmethod
    def backward_graph(ctx, g, saved):
        A, X = saved
        gB = Solve.apply(A.transpose(-1, -2), g, "solve")
        gA = -(gB @ X.transpose(-1, -2)) if ctx.needs_input_grad[0] else None
        sa, sb = ctx.shapes
        return (None if gA is None else unbroadcast_graph(gA, sa),
                unbroadcast_graph(gB, sb) if ctx.needs_input_grad[1] else None, None)


def _square(fn: str, A: Any) -> Tensor:
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.{fn}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dtype.kind != "f":
        raise DTypeError(f"linalg.{fn}: Expected a floating point or complex tensor as input. "
                         f"Got {A.dtype}")
    if A.ndim < 2:
        raise InvalidArgument(f"linalg.{fn}: The input tensor A must have at least 2 "
                              f"dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise InvalidArgument(f"linalg.{fn}: A must be batches of square matrices, but they "
                              f"are {A.shape[-2]} by {A.shape[-1]} matrices")
    return A


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``), differentiable in
    ``A`` and ``B`` (to any order).

    Shapes: ``A [*, n, n]``; ``B [*, n, k]`` gives ``X [*, n, k]``, and ``B`` is a batch of
    vectors, ``X [*, n]``, when it is 1-D or ``B.shape == A.shape[:-1]`` (PyTorch's rule);
    batch dims broadcast. A singular ``A`` raises :class:`LinAlgError`, on the CPU and on
    CUDA (where finding it costs a host sync, as in PyTorch)."""
    A = _square("solve", A)
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.solve(): argument 'B' must be Tensor, not {type(B).__name__}")
    if B.dtype != A.dtype:
        raise InvalidArgument(f"linalg.solve: Expected A and B to have the same dtype, but "
                              f"found A of type {A.dtype} and B of type {B.dtype} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if not left:
        if vector:
            raise InvalidArgument("linalg.solve: Vector broadcasting of the left hand side "
                                  "is not supported for left=False. In this case "
                                  "linalg.solve is equivalent to B / A.squeeze(-1)")
        return solve(A.transpose(-1, -2), B.transpose(-1, -2)).transpose(-1, -2)
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-1]:
        raise InvalidArgument(f"linalg.solve: Incompatible shapes of A and B for the equation "
                              f"AX = B ({A.shape[-2]}x{A.shape[-1]} and "
                              f"{'x'.join(str(d) for d in B.shape[-2:])})")
    X = Solve.apply(A, Bm, "solve")
    return X.squeeze(-1) if vector else X


def inv(A: Tensor) -> Tensor:
    """The inverse of each matrix ``A [*, n, n]`` -> ``[*, n, n]`` (``solve(A, I)``),
    differentiable to any order; :class:`LinAlgError` for a singular one."""
    A = _square("inv", A)
    xp = get_array_module(A._data)
    eye = Tensor(xp.eye(A.shape[-1], dtype=A.dtype))
    return Solve.apply(A, eye, "inv")


__getattr__ = _missing.module_getattr(__name__, {}, "tinytrain.linalg has norm, vector_norm, "
                                      "matrix_norm, solve and inv; " + _missing._NUMPY)
