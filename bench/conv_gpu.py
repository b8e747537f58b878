"""Benchmark: Conv2d forward and backward on one GPU, tinytrain's kernels against cuDNN.

For the convolution layers of the course's models at batch 64 and 512: the forward
(``kernels.cuda.conv2d_forward``: im2col + cuBLAS GEMM + bias) and the backward (dX, dW
and db: ``kernels.cuda.conv2d_backward``) against PyTorch's ``F.conv2d`` and its
``convolution_backward`` (cuDNN), each the mean over many calls between two
synchronisations. PyTorch runs twice: with its defaults (cuDNN may use TF32 tensor cores
for convolutions) and in strict float32 (``allow_tf32 = False``, what tinytrain computes).

    python bench/conv_gpu.py
    python bench/conv_gpu.py --batches 64 --iters 200
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (name, Cin, Cout, kernel, padding, H): x [N, Cin, H, H], w [Cout, Cin, k, k]
LAYERS = [
    ("convnet conv1", 1, 16, 5, 2, 28),
    ("convnet conv2", 16, 32, 5, 2, 14),
    ("cnn conv2", 16, 32, 3, 0, 26),
    ("pytorch-example conv2", 32, 64, 3, 0, 26),
]


def timed(fn, sync, iters: int, repeat: int = 3) -> float:
    """Median over ``repeat`` runs of the mean time per call, in ms (after a warm-up)."""
    for _ in range(5):
        fn()
    sync()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(runs)


def bench_layer(c_in: int, c_out: int, ks: int, pad: int, h: int, n: int, iters: int) -> tuple:
    """(tinytrain fwd, bwd, cuDNN fwd, bwd, cuDNN fp32 fwd, bwd) in ms for one layer."""
    import cupy
    import torch

    from tinytrain.kernels import cuda as k
    from tinytrain.kernels.shapes import Conv2dMeta

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c_in, h, h), dtype=np.float32)
    w = rng.standard_normal((c_out, c_in, ks, ks), dtype=np.float32)
    b = rng.standard_normal(c_out, dtype=np.float32)
    meta = Conv2dMeta(x.shape, w.shape, 1, pad, b.shape)
    dy = rng.standard_normal(meta.output_shape, dtype=np.float32)
    gx, gw, gb, gdy = (cupy.asarray(a) for a in (x, w, b, dy))
    tx, tw, tb, tdy = (torch.from_numpy(a).cuda() for a in (x, w, b, dy))
    sync = cupy.cuda.Device().synchronize
    times = [timed(lambda: k.conv2d_forward(gx, gw, gb, meta), sync, iters),
             timed(lambda: k.conv2d_backward(gdy, gx, gw, meta, (True, True, True)), sync, iters)]

    def th_fwd():
        return torch.nn.functional.conv2d(tx, tw, tb, 1, pad)

    def th_bwd():
        return torch.ops.aten.convolution_backward(tdy, tx, tw, [c_out], [1, 1], [pad, pad],
                                                   [1, 1], False, [0, 0], 1, [True, True, True])

    default = torch.backends.cudnn.allow_tf32
    for tf32 in (default, False):
        torch.backends.cudnn.allow_tf32 = tf32
        times += [timed(th_fwd, torch.cuda.synchronize, iters),
                  timed(th_bwd, torch.cuda.synchronize, iters)]
    torch.backends.cudnn.allow_tf32 = default
    return tuple(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", nargs="+", type=int, default=[64, 512])
    ap.add_argument("--iters", type=int, default=100)
    args = ap.parse_args()

    import cupy
    import torch

    print(f"GPU: {torch.cuda.get_device_name()} | torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()} (conv TF32 by default: "
          f"{torch.backends.cudnn.allow_tf32}) | CuPy {cupy.__version__}")
    rows = []
    for name, c_in, c_out, ks, pad, h in LAYERS:
        for n in args.batches:
            iters = args.iters if n <= 64 else max(10, args.iters // 4)
            t = bench_layer(c_in, c_out, ks, pad, h, n, iters)
            rows.append((name, n, *t))
            print(f"  {name} N={n}: tinytrain fwd {t[0]:.3f} bwd {t[1]:.3f} ms | cuDNN fwd "
                  f"{t[2]:.3f} bwd {t[3]:.3f} ms", flush=True)

    print("\n| layer | batch | fwd tinytrain | fwd cuDNN | ratio | fwd cuDNN fp32 | ratio | "
          "bwd tinytrain | bwd cuDNN | ratio | bwd cuDNN fp32 | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, n, of, ob, tf, tb, ff, fb in rows:
        print(f"| {name} | {n} | {of:.3f} | {tf:.3f} | {of / tf:.2f}x | {ff:.3f} | {of / ff:.2f}x"
              f" | {ob:.3f} | {tb:.3f} | {ob / tb:.2f}x | {fb:.3f} | {ob / fb:.2f}x |")
    print("(ms per call; ratio = tinytrain / PyTorch; backward = dX, dW and db together)")


if __name__ == "__main__":
    main()
