"""Benchmark tinytrain's CPU conv2d kernels against PyTorch on the same threads.

Times forward and the three backward ops (dX, dW, db) of two convolutions:

* PyTorch's MNIST example, second conv: x [64, 32, 26, 26], w [64, 32, 3, 3];
* tinytrain's ``cnn``, second conv:     x [64, 16, 26, 26], w [32, 16, 3, 3];

and prints milliseconds (best of ``--rounds`` in each of ``--runs`` runs) and the ratio
tinytrain / torch, on each thread count of ``--threads`` (default: 1 and 2), then the rows
of issue 12's table (forward and fwd+bwd through autograd of both convolutions) with
their target, 1.5x. PyTorch's backward ops are timed one at a time with
``torch.ops.aten.convolution_backward`` and an output mask, which is what autograd calls
for one conv; "fwd+bwd autograd" is ``conv2d(x, w, b).backward(dy)`` into fresh ``.grad``s of
all three, in both frameworks.

Each framework runs in its own process, one thread count at a time, the runs taking
turns: PyTorch's OpenMP threads keep spinning after each of its ops, so timing the two
frameworks in turn inside one process slowed whichever ran after PyTorch (tinytrain's
two-thread forward of the example's conv2: 5 ms alone, 9-15 ms right after a PyTorch op).

Run it without this machine's OpenBLAS workarounds, which slow a current NumPy down::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/conv_cpu.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

CASES = {
    "mnist-example conv2": ((64, 32, 26, 26), (64, 32, 3, 3)),
    "tinytrain cnn conv2": ((64, 16, 26, 26), (32, 16, 3, 3)),
}
TARGET = 1.5  # issue 12: every conv row within 1.5x of PyTorch


def interleaved_best_ms(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best time of each function in milliseconds, timing them in turn for ``rounds`` rounds.

    Taking turns (rather than timing one function ``rounds`` times, then the next)
    spreads a noisy neighbour's bursts over every function alike.
    """
    for fn in fns.values():  # warm up: allocator, thread pools, oneDNN primitives
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: 1e3 * t for name, t in best.items()}


def blas_description() -> str:
    """Which BLAS NumPy runs (threadpoolctl when installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    parts = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')})"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(parts) or "no BLAS found by threadpoolctl"


def time_case(framework: str, x_shape: tuple, w_shape: tuple, rounds: int) -> dict[str, float]:
    """{op: best ms} of one framework on one convolution, on the current threads."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32) * 0.1
    b = rng.standard_normal(w_shape[0], dtype=np.float32)
    if framework == "torch":
        import torch

        xt, wt, bt = (torch.from_numpy(a) for a in (x, w, b))
        dyt = torch.from_numpy(rng.standard_normal(
            tuple(torch.nn.functional.conv2d(xt, wt).shape), dtype=np.float32))
        txg, twg, tbg = (t.clone().requires_grad_() for t in (xt, wt, bt))

        def bwd(mask: list[bool]) -> object:
            # What autograd calls for one conv's backward; the mask picks dX, dW, db.
            return torch.ops.aten.convolution_backward(
                dyt, xt, wt, [wt.shape[0]], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)

        def autograd() -> object:
            txg.grad = twg.grad = tbg.grad = None
            torch.nn.functional.conv2d(txg, twg, tbg).backward(dyt)
            return txg.grad, twg.grad, tbg.grad

        fns = {"forward": lambda: torch.nn.functional.conv2d(xt, wt, bt),
               "dX": lambda: bwd([True, False, False]), "dW": lambda: bwd([False, True, False]),
               "db": lambda: bwd([False, False, True]), "fwd+bwd autograd": autograd}
    else:
        import tinytrain as tt
        import tinytrain.nn.functional as F
        from tinytrain.kernels.cpu.conv2d import (
            Conv2dMeta,
            conv2d_backward_bias,
            conv2d_backward_input,
            conv2d_backward_weight,
            conv2d_forward,
        )

        meta = Conv2dMeta(x.shape, w.shape, 1, 0, b.shape)
        dy = rng.standard_normal(meta.output_shape, dtype=np.float32)

        tx, tw, tb = (tt.tensor(a, requires_grad=True) for a in (x, w, b))
        tdy = tt.tensor(dy)

        def autograd() -> object:
            tx.grad = tw.grad = tb.grad = None
            F.conv2d(tx, tw, tb).backward(tdy)
            return tx.grad, tw.grad, tb.grad

        fns = {"forward": lambda: conv2d_forward(x, w, b, meta),
               "dX": lambda: conv2d_backward_input(dy, w, meta),
               "dW": lambda: conv2d_backward_weight(dy, x, meta),
               "db": lambda: conv2d_backward_bias(dy), "fwd+bwd autograd": autograd}
    return interleaved_best_ms(fns, rounds)


def worker(framework: str, threads: int, rounds: int) -> None:
    """In a subprocess: time every op of every case, print one JSON line."""
    if framework == "torch":
        import torch

        torch.set_num_threads(threads)
    else:
        import tinytrain as tt

        tt.set_num_threads(threads)
    print(json.dumps({name: time_case(framework, x_shape, w_shape, rounds)
                      for name, (x_shape, w_shape) in CASES.items()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cores = os.cpu_count() or 1
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, min(2, cores)}),
                        help="thread counts to run on, in turn (default: 1 2)")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per run")
    parser.add_argument("--runs", type=int, default=2, help="runs of each framework, in turn")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]), args.rounds)

    import torch

    print(f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}")
    print(f"numpy BLAS: {blas_description()}; torch oneDNN (mkldnn) available: "
          f"{torch.backends.mkldnn.is_available()}")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        print(f"{var}={os.environ.get(var, '(unset)')}")
    print(f"best of {args.rounds} interleaved rounds x {args.runs} runs, float32, stride 1, "
          f"no padding; load average {os.getloadavg()[0]:.2f} at the start\n")

    best: dict[tuple, float] = {}
    for _ in range(args.runs):
        for threads in args.threads:
            for fw in ("torch", "tinytrain"):
                # Both libraries size their pools from these when they load.
                env = dict(os.environ, OMP_NUM_THREADS=str(threads),
                           OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
                cmd = [sys.executable, __file__, "--worker", fw, str(threads),
                       "--rounds", str(args.rounds)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
                for name, ops in json.loads(out.stdout.strip().splitlines()[-1]).items():
                    for op, ms in ops.items():
                        key = (fw, threads, name, op)
                        best[key] = min(best.get(key, float("inf")), ms)

    header = (f"{'case':21s} {'threads':>7s} {'op':16s} {'tinytrain ms':>12s} {'torch ms':>9s} "
              f"{'ratio':>6s}")
    print(header)
    print("-" * len(header))
    for threads in args.threads:
        for name in CASES:
            for op in ("forward", "dX", "dW", "db", "fwd+bwd autograd"):
                a, t = best["tinytrain", threads, name, op], best["torch", threads, name, op]
                print(f"{name:21s} {threads:7d} {op:16s} {a:12.2f} {t:9.2f} {a / t:6.2f}")
            print()

    print(f"issue 12's rows (target: tinytrain / PyTorch <= {TARGET}x); load average "
          f"{os.getloadavg()[0]:.2f} at the end")
    print(f"{'work':44s} {'threads':>7s} {'tinytrain ms':>12s} {'torch ms':>9s} {'ratio':>6s}")
    for name in CASES:
        for op, label in (("forward", "forward"), ("fwd+bwd autograd", "fwd+bwd (autograd)")):
            for threads in args.threads:
                a, t = best["tinytrain", threads, name, op], best["torch", threads, name, op]
                verdict = "ok" if a / t <= TARGET else "MISSED"
                print(f"{name + ', ' + label:44s} {threads:7d} {a:12.2f} {t:9.2f} {a / t:6.2f}  "
                      f"{verdict}")


if __name__ == "__main__":
    main()
