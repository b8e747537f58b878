"""Matrix products in column chunks, where that puts them on the BLAS's small-matrix path.

OpenBLAS has *small-matrix kernels* for its AVX-512 targets (``SkylakeX``, ``Cooperlake``,
``SapphireRapids``; AMD Zen 4 and 5 run the SkylakeX ones): a GEMM whose ``M * N * K`` is at
most 10^6 is computed straight from the operands, skipping the copy into packed panels that
the general path makes first. For the convolutions' GEMMs with few output channels the
general path is slow: ``cnn``'s conv2 forward, ``[32, 144] @ [144, 622]`` per image, runs at
~170 GF/s, and the same product cut into three column chunks (each within the limit) at
~215 GF/s (``bench/NOTES_cpu.md``, v11). Chunks narrower than ``MIN_CHUNK`` columns were no
faster (``[64, 288]`` operands leave 54-column chunks: 0.83x), and where the BLAS has no such
kernels (OpenBLAS's Haswell target, other BLAS libraries) chunks only add calls (0.95x), so
:func:`chunk_width` cuts a product only where both conditions hold.

Cutting the columns changes nothing in the arithmetic: each output column is the same dot
products either way. Cutting the contracted axis (:func:`matmul_sum`) changes only the order
of a sum.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tinytrain.kernels.cpu import memory

#: The largest ``M * N * K`` that OpenBLAS's small-matrix kernels take (its
#: ``gemm_small_kernel_permit`` for the AVX-512 targets).
SMALL_MNK = 10**6

#: Narrower chunks are not worth a call each.
MIN_CHUNK = 128

#: OpenBLAS targets (``threadpoolctl``'s "architecture", lower case) with those kernels.
SMALL_KERNEL_TARGETS = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


@functools.cache
def small_gemm_mnk() -> int:
    """``M * N * K`` up to which NumPy's BLAS takes its small-matrix path; 0 if it has none
    (or it cannot be told: then every product is one call, as NumPy would make it)."""
    try:
        from threadpoolctl import threadpool_info

        for lib in threadpool_info():
            if lib.get("user_api") != "blas":
                continue
            target = str(lib.get("architecture") or "").lower()
            if lib.get("internal_api") == "openblas" and target in SMALL_KERNEL_TARGETS:
                return SMALL_MNK
        return 0
    except Exception:  # threadpoolctl missing or a BLAS it does not know
        return 0


def chunk_width(fixed: int, cols: int) -> int | None:
    """Columns per call for a product of ``cols`` columns whose other two dimensions
    multiply to ``fixed``, or None to make it one call.

    The chunks are as even as they can be, and each call stays within the small-matrix
    limit; no chunking without small-matrix kernels or when chunks would be narrower than
    ``MIN_CHUNK``."""
    limit = small_gemm_mnk()
    widest = limit // max(fixed, 1)
    if not limit or widest < MIN_CHUNK or widest >= cols:
        return None
    calls = -(-cols // widest)
    return -(-cols // calls)


def _chunks(a: Any, width: int) -> Any:
    """``a [..., R, cols]`` seen as ``[..., cols // width, R, width]`` (a view, no copy:
    splitting one axis is always a view; 0.4 us against 2.9 for ``as_strided``)."""
    return a.reshape(*a.shape[:-1], a.shape[-1] // width, width).swapaxes(-3, -2)


def matmul_cols(a: Any, b: Any, out: Any) -> Any:
    """``out = a @ b``, ``[..., M, K] @ [..., K, cols] -> [..., M, cols]``, in column chunks
    where :func:`chunk_width` says so. ``a`` may be 2-D (broadcast over ``b``'s batch)."""
    cols = b.shape[-1]
    width = chunk_width(a.shape[-2] * a.shape[-1], cols)
    if width is None:
        return np.matmul(a, b, out=out)
    whole = cols // width * width
    head = a if a.ndim == 2 else a[..., None, :, :]
    np.matmul(head, _chunks(b[..., :whole], width), out=_chunks(out[..., :whole], width))
    if whole < cols:
        np.matmul(a, b[..., whole:], out=out[..., whole:])
    return out


def matmul_sum(a: Any, b: Any) -> Any:
    """``sum_n a[n] @ b[n]``, ``[n, M, L] @ [n, L, N] -> [M, N]``, the contracted axis ``L``
    in chunks where :func:`chunk_width` says so (each chunk's product, then their sum)."""
    length = a.shape[-1]
    width = chunk_width(a.shape[-2] * b.shape[-1], length)
    if width is None:
        return np.matmul(a, b, out=memory.empty((a.shape[0], a.shape[-2], b.shape[-1]),
                                                dtype=np.result_type(a, b))).sum(axis=0)
    whole = length // width * width
    n, m, k = a.shape[0], a.shape[-2], whole // width
    dtype = np.result_type(a, b)
    heads = np.matmul(_chunks(a[..., :whole], width),
                      b[:, :whole].reshape(n, k, width, b.shape[-1]),
                      out=memory.empty((n, k, m, b.shape[-1]), dtype=dtype))
    total = heads.sum(axis=(0, 1))
    if whole < length:
        tail = np.matmul(a[..., whole:], b[:, whole:],
                         out=memory.empty((n, m, b.shape[-1]), dtype=dtype))
        total += tail.sum(axis=0)
    return total
