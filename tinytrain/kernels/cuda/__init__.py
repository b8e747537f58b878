"""The CUDA kernel set: the functions of :mod:`tinytrain.kernels.cpu`, for CuPy arrays.

Chapter 4 (``notebooks/04_cuda_im2col.ipynb``) builds these kernels. The pieces:

* ``*.cu``: the CUDA C sources (package data, readable on their own), written in a small
  subset of CUDA C so that :mod:`~tinytrain.kernels.cuda.emulator` can run them on the CPU;
* :mod:`~tinytrain.kernels.cuda.plans`: each op as a list of kernel launches and cuBLAS
  GEMMs, with no device code (the emulator runs the same plans);
* :mod:`~tinytrain.kernels.cuda.runtime`: compiling, launching, cuBLAS, the asynchronous
  check of cross-entropy targets: the only code that touches the GPU;
* :mod:`~tinytrain.kernels.cuda.nvrtc`: compiles the sources to PTX without a GPU.

Every function below is "build the plan, run it": nothing waits for the GPU. Supported
dtypes are float32 and float64 (one compiled module each); others raise a TypeError.

Importing this package does not import CuPy; the first launch does.
"""

from __future__ import annotations

from typing import Any

from tinytrain.kernels.cpu.layers import dropout_threshold
from tinytrain.kernels.cuda import plans, runtime
from tinytrain.kernels.cuda.runtime import CHECK_DEPTH, check_errors
from tinytrain.kernels.shapes import Conv2dMeta, Pool2dMeta

__all__ = [
    "CHECK_DEPTH", "Conv2dMeta", "Pool2dMeta", "check_errors",
    "adam_step", "avg_pool2d_backward", "avg_pool2d_forward", "conv2d_backward",
    "conv2d_backward_bias", "conv2d_backward_input", "conv2d_backward_weight",
    "conv2d_forward", "cross_entropy_backward", "cross_entropy_forward", "dropout_backward",
    "dropout_forward", "linear_backward", "linear_forward", "max_pool2d_backward",
    "max_pool2d_forward", "relu_backward", "relu_forward", "sgd_step",
]


#: What runs the plans: the GPU (``runtime``), or ``emulator.Emulated()`` while
#: ``emulator.emulated_kernels()`` is active (the CPU tests run this module that way).
executor: Any = runtime


def _run(result_and_steps: tuple) -> Any:
    result, steps = result_and_steps
    executor.run(steps)
    return result


def _xp() -> Any:
    return executor.cupy()


# --------------------------------------------------------------------------- convolution


def conv2d_forward(x: Any, w: Any, b: Any | None, meta: Conv2dMeta) -> Any:
    """``[N, Cin, H, W] * [Cout, Cin, Kh, Kw] (+ [Cout]) -> [N, Cout, Ho, Wo]`` (im2col + GEMM)."""
    return _run(plans.conv2d_forward(_xp(), x, w, b, meta))


def conv2d_backward(grad_out: Any, x: Any | None, w: Any | None, meta: Conv2dMeta,
                    needs: tuple[bool, bool, bool]) -> tuple[Any, Any, Any]:
    """``(dx, dw, db)``, each only if needed; dX and dW share one layout change of dy, and db
    comes out of the dW GEMM."""
    return _run(plans.conv2d_backward(_xp(), grad_out, x, w, meta, needs))


def conv2d_backward_input(grad_out: Any, w: Any, meta: Conv2dMeta) -> Any:
    """``dx`` by GEMM then col2im (a gather, bit-reproducible)."""
    return conv2d_backward(grad_out, None, w, meta, (True, False, False))[0]


def conv2d_backward_weight(grad_out: Any, x: Any, meta: Conv2dMeta) -> Any:
    """``dw``: one GEMM over the whole batch (per chunk of images, accumulated)."""
    return conv2d_backward(grad_out, x, None, meta, (False, True, False))[1]


def conv2d_backward_bias(grad_out: Any) -> Any:
    """``db [Cout]``: a block reduction per channel."""
    dy = _xp().ascontiguousarray(grad_out)
    db, launch = plans.channel_sum(_xp(), dy, dy.shape[1], dy.shape[2] * dy.shape[3],
                                   plans.check_float("conv2d", dy))
    return _run((db, [launch]))


# --------------------------------------------------------------------------- pooling


def max_pool2d_forward(x: Any, meta: Pool2dMeta) -> tuple[Any, Any]:
    """``(out, argmax)``: the maximum of each window and its offset ``i * Kw + j`` (int16)."""
    return _run(plans.max_pool2d_forward(_xp(), x, meta))


def max_pool2d_backward(grad_out: Any, x: Any, meta: Pool2dMeta) -> Any:
    """``dx`` from ``dy`` and the forward input (the arg-max is found again in the kernel)."""
    return _run(plans.max_pool2d_backward(_xp(), grad_out, x, meta))


def avg_pool2d_forward(x: Any, meta: Pool2dMeta, count_include_pad: bool = True) -> Any:
    return _run(plans.avg_pool2d_forward(_xp(), x, meta, count_include_pad))


def avg_pool2d_backward(grad_out: Any, meta: Pool2dMeta, count_include_pad: bool = True) -> Any:
    return _run(plans.avg_pool2d_backward(_xp(), grad_out, meta, count_include_pad))


# --------------------------------------------------------------------------- layers


def relu_forward(a: Any) -> Any:
    if a.dtype not in plans.FLOATS or not a.flags.c_contiguous:  # integers, or a layout to
        xp = _xp()  # keep (a transposed input): CuPy's maximum into an array of a's layout
        return xp.maximum(a, a.dtype.type(0), out=xp.empty_like(a, order="K"))
    return _run(plans.relu_forward(_xp(), a))


def relu_backward(grad: Any, out: Any) -> Any:
    return _run(plans.relu_backward(_xp(), grad, out))


def dropout_forward(x: Any, p: float, seed: int) -> Any:
    """The CPU set's mask (same hash of ``(seed, index)``), drawn in the kernel."""
    return _run(plans.dropout(_xp(), x, p, seed, dropout_threshold(p)))


def dropout_backward(grad: Any, p: float, seed: int) -> Any:
    return _run(plans.dropout(_xp(), grad, p, seed, dropout_threshold(p)))


def linear_forward(x: Any, w: Any, b: Any | None) -> Any:
    if x.size == 0 or w.size == 0:  # nothing to multiply (cuBLAS refuses empty matrices)
        out = _xp().zeros((*x.shape[:-1], w.shape[0]), x.dtype)
        return out if b is None else out + b
    return _run(plans.linear_forward(_xp(), x, w, b))


def linear_backward(grad: Any, x: Any | None, w: Any | None,
                    needs: tuple[bool, bool, bool]) -> tuple[Any, Any, Any]:
    in_f = w.shape[1] if w is not None else x.shape[-1]
    if grad.size == 0 or in_f == 0:  # empty products: zeros, as the sums of nothing
        xp, lead = _xp(), grad.shape[:-1]
        return (xp.zeros((*lead, in_f), grad.dtype) if needs[0] else None,
                xp.zeros((grad.shape[-1], in_f), grad.dtype) if needs[1] else None,
                grad.sum(axis=tuple(range(grad.ndim - 1))) if needs[2] else None)
    return _run(plans.linear_backward(_xp(), grad, x, w, needs))


def cross_entropy_forward(logits: Any, targets: Any, reduction: str) -> Any:
    """One kernel. Bad targets are raised by a later call (see ``runtime.TargetChecks``)."""
    checks = executor.target_checks()
    slot, err = checks.acquire(logits.shape[1])
    out = _run(plans.cross_entropy_forward(_xp(), logits, targets, reduction, err))
    checks.record(slot)
    return out


def cross_entropy_backward(logits: Any, targets: Any, grad: Any, reduction: str) -> Any:
    return _run(plans.cross_entropy_backward(_xp(), logits, targets, grad, reduction))


# --------------------------------------------------------------------------- optimizers


def adam_step(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, step: int, lr: float,
              betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """One fused kernel updates ``param``, ``exp_avg`` and ``exp_avg_sq`` in place."""
    _in_place(lambda p, m, v: _run(plans.adam_step(_xp(), p, grad, m, v, step, lr, betas, eps,
                                                   weight_decay)),
              param, exp_avg, exp_avg_sq)


def sgd_step(param: Any, grad: Any, buf: Any | None, lr: float, momentum: float,
             dampening: float, weight_decay: float, nesterov: bool, first: bool) -> None:
    """One fused kernel updates ``param`` (and the momentum buffer) in place."""
    _in_place(lambda p, b: _run(plans.sgd_step(_xp(), p, grad, b, lr, momentum, dampening,
                                               weight_decay, nesterov, first)),
              param, buf)


def _in_place(update: Any, *arrays: Any) -> None:
    """``update(*arrays)`` for kernels that index flat, in place: a non-contiguous array (a
    parameter made from a transposed view, say) is updated through a contiguous copy, which
    is then written back."""
    work = [a if a is None or a.flags.c_contiguous else _xp().ascontiguousarray(a)
            for a in arrays]
    update(*work)
    for a, w in zip(arrays, work):
        if w is not a:
            a[...] = w
