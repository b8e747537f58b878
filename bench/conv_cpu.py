"""Benchmark tinytrain's CPU conv2d kernels against PyTorch on the same threads.

Times forward and the three backward ops (dX, dW, db) of two convolutions:

* PyTorch's MNIST example, second conv: x [64, 32, 26, 26], w [64, 32, 3, 3];
* tinytrain's ``cnn``, second conv:     x [64, 16, 26, 26], w [32, 16, 3, 3];

and prints milliseconds (best of ``--repeat``) and the ratio tinytrain / torch.
PyTorch's backward ops are timed one at a time with ``torch.ops.aten.convolution_backward``
and an output mask, which is what autograd calls for one conv.

Run it with the BLAS thread count pinned and without this machine's OpenBLAS
workarounds, which slow a current NumPy down::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/conv_cpu.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np

CASES = {
    "mnist-example conv2": ((64, 32, 26, 26), (64, 32, 3, 3)),
    "tinytrain cnn conv2": ((64, 16, 26, 26), (32, 16, 3, 3)),
}


def interleaved_best_ms(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best time of each function in milliseconds, timing them in turn for ``rounds`` rounds.

    Taking turns (rather than timing one function ``rounds`` times, then the next)
    spreads a noisy neighbour's bursts over every function alike.
    """
    for fn in fns.values():  # warm up: allocator, BLAS thread pool, oneDNN primitives
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: 1e3 * t for name, t in best.items()}


def blas_description(threads: int) -> str:
    """Which BLAS NumPy runs and with how many threads (threadpoolctl when installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return f"threadpoolctl not installed; BLAS threads set by env vars to {threads}"
    parts = []
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            parts.append(
                f"{info.get('internal_api')} {info.get('version')} "
                f"({info.get('architecture')}), {info.get('num_threads')} threads"
            )
    return "; ".join(parts) or "no BLAS found by threadpoolctl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    # Pin the thread count of both libraries before they start their pools.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    except ImportError:
        pass
    import torch

    import tinytrain as tt
    import tinytrain.nn.functional as F
    from tinytrain.kernels.cpu.conv2d import (
        Conv2dMeta,
        conv2d_backward_bias,
        conv2d_backward_input,
        conv2d_backward_weight,
        conv2d_forward,
    )

    torch.set_num_threads(args.threads)
    print(f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}")
    print(f"numpy BLAS: {blas_description(args.threads)}")
    mkldnn = torch.backends.mkldnn.is_available()
    print(f"torch: {torch.get_num_threads()} threads, oneDNN (mkldnn) available: {mkldnn}")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        print(f"{var}={os.environ.get(var, '(unset)')}")
    print(f"best of {args.rounds} interleaved rounds, float32, stride 1, no padding\n")

    rng = np.random.default_rng(0)
    header = f"{'case':21s} {'op':16s} {'tinytrain ms':>12s} {'torch ms':>9s} {'ratio':>6s}"
    print(header)
    print("-" * len(header))
    for name, (x_shape, w_shape) in CASES.items():
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = rng.standard_normal(w_shape, dtype=np.float32) * 0.1
        b = rng.standard_normal(w_shape[0], dtype=np.float32)
        meta = Conv2dMeta(x.shape, w.shape, 1, 0, b.shape)
        dy = rng.standard_normal(meta.output_shape, dtype=np.float32)
        xt, wt, bt, dyt = (torch.from_numpy(a) for a in (x, w, b, dy))
        txg, twg, tbg = (t.clone().requires_grad_() for t in (xt, wt, bt))

        def torch_bwd(mask: list[bool], xt=xt, wt=wt, dyt=dyt) -> object:
            # What autograd calls for one conv's backward; the mask picks dX, dW, db.
            return torch.ops.aten.convolution_backward(
                dyt, xt, wt, [wt.shape[0]], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask
            )

        def torch_autograd(txg=txg, twg=twg, tbg=tbg, dyt=dyt) -> object:
            out = torch.nn.functional.conv2d(txg, twg, tbg)
            return torch.autograd.grad(out, (txg, twg, tbg), dyt)

        def ours_autograd(x=x, w=w, b=b, dy=dy) -> object:
            tx, tw, tb = (tt.tensor(a, requires_grad=True) for a in (x, w, b))
            F.conv2d(tx, tw, tb).backward(tt.tensor(dy))
            return tx.grad, tw.grad, tb.grad

        pairs = {
            "forward": (
                lambda x=x, w=w, b=b, m=meta: conv2d_forward(x, w, b, m),
                lambda xt=xt, wt=wt, bt=bt: torch.nn.functional.conv2d(xt, wt, bt),
            ),
            "dX": (
                lambda dy=dy, w=w, m=meta: conv2d_backward_input(dy, w, m),
                lambda: torch_bwd([True, False, False]),
            ),
            "dW": (
                lambda dy=dy, x=x, m=meta: conv2d_backward_weight(dy, x, m),
                lambda: torch_bwd([False, True, False]),
            ),
            "db": (lambda dy=dy: conv2d_backward_bias(dy), lambda: torch_bwd([False, False, True])),
            "fwd+bwd autograd": (ours_autograd, torch_autograd),
        }
        fns = {}
        for op, (ours, theirs) in pairs.items():
            fns[("tinytrain", op)], fns[("torch", op)] = ours, theirs
        ms = interleaved_best_ms(fns, args.rounds)
        for op in pairs:
            a, t = ms[("tinytrain", op)], ms[("torch", op)]
            print(f"{name:21s} {op:16s} {a:12.2f} {t:9.2f} {a / t:6.2f}")
        a = sum(ms[("tinytrain", op)] for op in ("forward", "dX", "dW", "db"))
        print(f"{name:21s} {'sum of 4 kernels':16s} {a:12.2f} {'':9s} "
              f"{a / ms[('torch', 'fwd+bwd autograd')]:6.2f}  (vs torch autograd fwd+bwd)")
        print()


if __name__ == "__main__":
    main()
