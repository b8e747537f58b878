"""The only code that touches the GPU: compile the ``.cu`` files, launch plans, call cuBLAS.

* :func:`kernel` compiles the ``.cu`` files once per process, dtype and index width: all of
  them as one ``cupy.RawModule``, with ``typedef float real;`` (or ``double``) and
  ``typedef int index_t;`` (or ``long long``) in front, and returns one of its kernels.
  One module, not one per file: each NVRTC call has a fixed cost, and a cold process
  (CuPy caches binaries on disk, but a fresh machine has none) pays it once.
* :func:`run` executes a plan from :mod:`tinytrain.kernels.cuda.plans`: a ``Launch`` is
  one kernel call, a ``Gemm`` one cuBLAS call (:func:`cublas_call`). Nothing here waits
  for the GPU: every call is queued on the current stream.
* :class:`TargetChecks` reports bad cross-entropy targets found on the GPU without a host
  sync per call.

Set ``TINYTRAIN_CUDA_CHECK=1`` to check every launch's arguments against the kernel's C
signature (the emulator's checks: dtypes, contiguity, scalar types) and to synchronise
after each step, so that a failing kernel is reported where it was launched. The cuda
tests run that way.

CuPy is imported on first use, never at import time.
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from tinytrain.kernels.cuda import emulator
from tinytrain.kernels.cuda.plans import Gemm, Launch

SOURCE_DIR = Path(__file__).resolve().parent
#: NVRTC options on top of CuPy's own (-arch for this GPU, -ftz=true, ...): no contraction
#: of a*b + c into one fused multiply-add, so element-wise results round like NumPy's.
OPTIONS = ("--std=c++17", "--fmad=false")
CHECK = os.environ.get("TINYTRAIN_CUDA_CHECK", "") not in ("", "0")

_modules: dict[tuple[str, bool], Any] = {}
_kernels: dict[tuple[str, Any, bool], Any] = {}
_scalars: dict[tuple[str, float], np.ndarray] = {}


_cupy: Any = None


def cupy() -> Any:
    """The ``cupy`` module (looked up once: every plan asks for it)."""
    global _cupy
    if _cupy is None:
        from tinytrain.backend import cupy_module

        _cupy = cupy_module()
    return _cupy


def _typedefs(dtype: Any, wide: bool) -> str:
    real = {"float32": "float", "float64": "double"}[np.dtype(dtype).name]
    return (f"#define TINYTRAIN_TYPES\ntypedef {real} real;\n"
            f"typedef {'long long' if wide else 'int'} index_t;\n")


def source(file: str, dtype: Any, wide: bool = True) -> str:
    """The text compiled for ``file.cu`` with ``real`` = ``dtype`` and ``index_t`` = ``long
    long`` (``wide``) or ``int``."""
    return _typedefs(dtype, wide) + (SOURCE_DIR / f"{file}.cu").read_text()


def module_source(dtype: Any, wide: bool) -> str:
    """Every ``.cu`` file in one text (their kernel and helper names are distinct)."""
    return _typedefs(dtype, wide) + "\n".join(
        f"// ---- {path.name}\n{path.read_text()}" for path in sorted(SOURCE_DIR.glob("*.cu")))


def kernel(file: str, name: str, dtype: Any, wide: bool = True) -> Any:
    """The compiled kernel ``name`` of ``file.cu`` for ``dtype`` and index width (compiled
    once, cached). Every ``.cu`` file is compiled into one module; ``file`` says where the
    kernel is written, and a kernel that is not there is refused (ValueError)."""
    key = (name, dtype, wide)
    k = _kernels.get(key)
    if k is None:
        if f"void {name}(" not in (SOURCE_DIR / f"{file}.cu").read_text():
            raise ValueError(f"no kernel {name!r} in {file}.cu")
        k = _kernels[key] = _module(dtype, wide).get_function(name)
    return k


_compiling = threading.Lock()


def _module(dtype: Any, wide: bool) -> Any:
    """The module of every kernel for ``dtype`` and index width, compiled on first use (by
    one thread: a launch waits for a compilation that :func:`compile_in_background` began)."""
    mkey = (np.dtype(dtype).name, wide)
    module = _modules.get(mkey)
    if module is None:
        with _compiling:
            module = _modules.get(mkey)
            if module is None:
                module = cupy().RawModule(code=module_source(dtype, wide), options=OPTIONS)
                module.get_function("relu_forward")  # CuPy compiles (and loads) lazily: now
                _modules[mkey] = module
    return module


def compile_in_background(dtype: Any = np.float32, wide: bool = False) -> threading.Thread:
    """Start compiling the module a training run will launch from, in a thread, so that a cold
    process (no binary in CuPy's disk cache: NVRTC takes about a second) compiles while it
    loads its data and builds its model. A failure is left for the first launch to raise."""

    def work() -> None:
        try:
            _module(dtype, wide)
        except Exception:  # noqa: S110 (the launch that needs the module raises it)
            pass

    thread = threading.Thread(target=work, name="tinytrain-nvrtc", daemon=True)
    thread.start()
    return thread


def compile_all() -> list[str]:
    """Compile and load every kernel for float32 and float64, both index widths (``doctor``
    uses this)."""
    names = []
    for path in sorted(SOURCE_DIR.glob("*.cu")):
        for dtype in (np.float32, np.float64):
            for wide in (False, True):
                for name in emulator.load(path.stem, dtype, wide).kernels:
                    kernel(path.stem, name, dtype, wide)
                    names.append(f"{path.stem}.{name}")
    return sorted(set(names))


# --------------------------------------------------------------------------- cuBLAS


def cublas_call(g: Gemm) -> tuple:
    """The column-major cuBLAS call that computes the row-major :class:`~plans.Gemm` ``g``.

    cuBLAS stores matrices by columns. A row-major ``r x c`` matrix with leading dimension
    ``ld`` *is* the column-major ``c x r`` matrix (its transpose) with the same ``ld``, so
    ``C = op(A) op(B)`` (row-major) is computed as ``C^T = op(B)^T op(A)^T`` (column-major):
    swap the operands and ``m``/``n``, keep the transpose flags. Returns
    ``(transa, transb, m, n, k, alpha, (A, off), lda, (B, off), ldb, beta, (C, off), ldc,
    strideA, strideB, strideC, batch)`` in cuBLAS's terms; ``emulator.gemm_colmajor`` runs
    such a call in NumPy.
    """
    return (g.transb, g.transa, g.n, g.m, g.k, g.alpha, (g.b, g.b_off), g.ldb,
            (g.a, g.a_off), g.lda, g.beta, (g.c, g.c_off), g.ldc, g.stride_b, g.stride_a,
            g.stride_c, g.batch)


def _scalar_ptr(dtype: Any, value: float) -> int:
    """A host pointer to ``value`` (cuBLAS's alpha/beta in host pointer mode), kept alive."""
    key = (dtype.char, value)
    ptr = _scalars.get(key)
    if ptr is None:
        arr = np.array([value], dtype=dtype)
        _keep.append(arr)
        ptr = _scalars[key] = arr.ctypes.data
    return ptr


_keep: list[np.ndarray] = []  # the arrays behind the pointers of _scalars
_cublas: Any = None


def gemm(g: Gemm) -> None:
    """One cuBLAS call (``gemmStridedBatched`` for a batch) on the current stream."""
    global _cublas
    if _cublas is None:
        from cupy_backends.cuda.libs import cublas

        _cublas = cublas
    (ta, tb, m, n, k, alpha, (a, a_off), lda, (b, b_off), ldb, beta, (c, c_off), ldc,
     stride_a, stride_b, stride_c, batch) = cublas_call(g)
    dtype = c.dtype
    item = dtype.itemsize
    single = dtype == np.float32
    handle = cupy().cuda.device.get_cublas_handle()  # CuPy's, per thread and device
    _cublas.setPointerMode(handle, _cublas.CUBLAS_POINTER_MODE_HOST)
    pa, pb, pc = (a.data.ptr + a_off * item, b.data.ptr + b_off * item,
                  c.data.ptr + c_off * item)
    alpha, beta = _scalar_ptr(dtype, alpha), _scalar_ptr(dtype, beta)
    if batch == 1:
        fn = _cublas.sgemm if single else _cublas.dgemm
        fn(handle, int(ta), int(tb), m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
    else:
        fn = _cublas.sgemmStridedBatched if single else _cublas.dgemmStridedBatched
        fn(handle, int(ta), int(tb), m, n, k, alpha, pa, lda, stride_a, pb, ldb, stride_b,
           beta, pc, ldc, stride_c, batch)


# --------------------------------------------------------------------------- plans


def run(steps: list) -> None:
    """Queue a plan's steps on the current stream (no synchronisation, unless CHECK)."""
    for step in steps:
        if type(step) is Launch:
            if CHECK:
                emulator.check_args(emulator.load(step.file, step.dtype, step.wide)[step.kernel],
                                    step.args)
            kernel(step.file, step.kernel, step.dtype, step.wide)((step.grid,), (step.block,),
                                                                  step.args)
        else:
            gemm(step)
        if CHECK:
            cupy().cuda.get_current_stream().synchronize()


# --------------------------------------------------------------------------- target checks

#: How many cross-entropy calls may pass before a bad target found on the GPU is raised.
CHECK_DEPTH = 4


class TargetChecks:
    """A ring of ``CHECK_DEPTH`` slots: where each cross-entropy launch reports bad targets.

    Each call gets a slot: a 3-int64 device buffer that its kernel writes (count, first
    row, value), followed by an asynchronous copy into pinned host memory and an event.
    Later calls look at the slots whose event has completed (a query, no wait) and raise
    for a bad one. Before a slot is reused, ``CHECK_DEPTH`` calls later, its event is
    waited for, so an error surfaces at most ``CHECK_DEPTH`` calls after the call that
    caused it; that wait also keeps the host at most ``CHECK_DEPTH`` steps ahead of the GPU,
    which is enough to keep the GPU busy.
    """

    def __init__(self) -> None:
        cp = cupy()
        self.device = cp.zeros((CHECK_DEPTH, 3), dtype=cp.int64)
        self.pinned = cp.cuda.alloc_pinned_memory(CHECK_DEPTH * 3 * 8)
        self.host = np.frombuffer(self.pinned, np.int64, CHECK_DEPTH * 3).reshape(CHECK_DEPTH, 3)
        self.events = [cp.cuda.Event(block=False, disable_timing=True)
                       for _ in range(CHECK_DEPTH)]
        self.classes = [0] * CHECK_DEPTH
        self.pending: collections.deque[int] = collections.deque()
        self.next = 0

    def acquire(self, classes: int) -> tuple[int, Any]:
        """A free slot ``(index, device buffer)`` for the next launch; checks what is done."""
        self.poll()
        i = self.next
        if self.pending and self.pending[0] == i:  # the ring came round: wait for that call
            self.events[i].synchronize()
            self.poll()
        self.next = (i + 1) % CHECK_DEPTH
        self.classes[i] = classes
        return i, self.device[i]

    def record(self, i: int) -> None:
        """After the launch: copy the slot to the host asynchronously, mark it with an event."""
        cp = cupy()
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memcpyAsync(self.host[i].ctypes.data, self.device[i].data.ptr, 24,
                                    cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        self.events[i].record(stream)
        self.pending.append(i)

    def poll(self, wait: bool = False) -> None:
        """Check every slot whose copy has arrived (``wait``: all of them); raise for a bad one."""
        while self.pending:
            i = self.pending[0]
            if wait:
                self.events[i].synchronize()
            elif not self.events[i].done:
                return
            self.pending.popleft()
            count, row, value = (int(v) for v in self.host[i])
            if count:
                self.pending.clear()
                raise ValueError(
                    f"cross_entropy: {count} target(s) outside [0, {self.classes[i]}) in a "
                    f"call on the GPU (the first at row {row}: {value}). Targets are checked "
                    f"on the GPU without waiting for it, so this is reported by a later call: "
                    f"the bad call was at most {CHECK_DEPTH} calls ago, and its loss was NaN."
                )


_checks: TargetChecks | None = None


def target_checks() -> TargetChecks:
    global _checks
    if _checks is None:
        _checks = TargetChecks()
    return _checks


def check_errors() -> None:
    """Wait for every pending cross-entropy target check and raise if one failed."""
    if _checks is not None:
        _checks.poll(wait=True)
