"""Benchmark: recurrent work on the CPU, tinytrain against PyTorch, in one run.

A recurrent network takes its input apart one time step at a time (``unbind``, ``x[t]``)
and its gates apart with ``chunk``; the backward pass puts every piece's gradient back.
Cases, forward and backward, both frameworks on the same threads (default one):

* ``unbind``: ``x [T, 64, 256]`` into ``T`` pieces, a weighted sum of each piece's squares;
* ``nn.LSTM(64, 128)`` over ``[T, 32, 64]``, the sum of its outputs;
* ``nn.GRU(64, 128)``, the same.

    python bench/rnn_cpu.py                 # T = 50 and 200, best of 5 each
    python bench/rnn_cpu.py --steps 100 --threads 2

The ratio column is tinytrain / PyTorch. PyTorch runs its fused recurrent kernels; tinytrain
runs the cell's dozen ops per step through autograd (``tinytrain.nn.rnn``), so its fixed cost
per op (``bench/op_overhead.py``) is most of an LSTM step here.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_ms(fn, repeat: int) -> float:
    fn()  # warm-up (caches, the kernels' memory)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def cases(lib, steps: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, 64, 256)).astype(np.float32)
    w = [float(v) for v in rng.uniform(0.5, 2.0, steps)]
    seq = lib.tensor(rng.standard_normal((steps, 32, 64)).astype(np.float32))

    def unbind():
        t = lib.tensor(x, requires_grad=True)
        sum((wi * p * p).sum() for wi, p in zip(w, t.unbind(0))).backward()

    out = {"unbind": best_ms(unbind, repeat)}
    for name in ("LSTM", "GRU"):
        lib.manual_seed(0)
        layer = getattr(lib.nn, name)(64, 128)

        def run(layer=layer):
            layer.zero_grad()
            layer(seq)[0].sum().backward()

        out[f"nn.{name}(64, 128)"] = best_ms(run, repeat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[50, 200], help="sequence lengths T")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import torch

    import tinytrain as tt

    torch.set_num_threads(args.threads)
    tt.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), best of {args.repeat}, "
          f"forward + backward")
    print(f"{'case':24s} {'T':>5s} {'tinytrain ms':>13s} {'PyTorch ms':>11s} {'ratio':>7s}")
    for steps in args.steps:
        ours, theirs = cases(tt, steps, args.repeat), cases(torch, steps, args.repeat)
        for name in ours:
            print(f"{name:24s} {steps:5d} {ours[name]:13.1f} {theirs[name]:11.1f} "
                  f"{ours[name] / theirs[name]:6.2f}x")


if __name__ == "__main__":
    main()
