"""Benchmark: common layers and ops, forward and backward, tinytrain against PyTorch, in one run.

A survey for finding outliers, not a target: each case builds the same module or op in both
frameworks (same shapes, float32), then times ``forward`` + ``.sum().backward()`` (the best
of ``--repeat`` runs after one warm-up) on the same threads (default one). Rows where
tinytrain takes more than ``--flag`` times PyTorch's time are marked ``<<<``.

    python bench/ops_cpu.py
    python bench/ops_cpu.py --threads 2 --repeat 3 --only gelu layer_norm

The convolutions, pooling and the MNIST steps have their own benchmarks (``conv_cpu.py``,
``mnist_cpu.py``); recurrent layers are in ``rnn_cpu.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

RNG = np.random.default_rng(0)
IMAGES = RNG.standard_normal((64, 128, 32, 32)).astype(np.float32)  # [N, C, H, W]
TOKENS = RNG.standard_normal((32, 100, 512)).astype(np.float32)  # [B, T, D]
IDS = RNG.integers(0, 10000, (32, 100))


def _cases(m):
    """{name: (what to call on the input tensor, the input array)} for library ``m``."""
    nn, F = m.nn, m.nn.functional
    cols = m.tensor(IDS[0] % 100)
    picks = m.tensor(IDS[:, :, None] % 512)
    return {
        "embedding": (nn.Embedding(10000, 256), IDS),  # ([32, 100] ids)
        "layer_norm": (nn.LayerNorm(512), TOKENS),
        "softmax": (lambda x: m.softmax(x, -1) * x, TOKENS),
        "gelu": (nn.GELU(), TOKENS),
        "gelu_tanh": (nn.GELU(approximate="tanh"), TOKENS),
        "dropout": (nn.Dropout(0.1), TOKENS),
        "cumsum": (lambda x: x.cumsum(1), TOKENS),
        "topk": (lambda x: x.topk(10, -1)[0], TOKENS),
        "sort": (lambda x: x.sort(-1)[0], TOKENS),
        "index_select": (lambda x: x.index_select(1, cols), TOKENS),
        "gather": (lambda x: x.gather(2, picks), TOKENS),
        "bmm": (lambda x: x @ x.transpose(1, 2), TOKENS),
        "cross_entropy": (lambda x: F.cross_entropy(x.reshape(-1, 512), picks.reshape(-1)),
                          TOKENS),
        "multihead_attention": ((lambda a: lambda x: a(x, x, x)[0])(
            nn.MultiheadAttention(512, 8, batch_first=True)), TOKENS),
        "transformer_layer": (nn.TransformerEncoderLayer(512, 8, batch_first=True),
                              TOKENS[:8]),
        "batch_norm2d": (nn.BatchNorm2d(128), IMAGES),
        "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d(1), IMAGES),
        "interpolate_bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
                                 IMAGES[:8]),
        "conv_transpose2d": (nn.ConvTranspose2d(128, 64, 4, 2, 1), IMAGES[:8]),
    }


def time_case(m, name: str, repeat: int) -> float:
    """Best milliseconds of forward + backward of case ``name`` in library ``m``."""
    m.manual_seed(0)
    fn, data = _cases(m)[name]
    is_ids = data.dtype.kind == "i"
    x = m.tensor(data) if is_ids else m.tensor(data, requires_grad=True)
    params = list(fn.parameters()) if hasattr(fn, "parameters") else []

    def step():
        for p in [x, *params]:
            p.grad = None
        fn(x).sum().backward()

    step()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--flag", type=float, default=4.0, help="mark rows over this ratio")
    ap.add_argument("--only", nargs="+", help="case names (default: all)")
    args = ap.parse_args()

    import torch

    import tinytrain as tt

    torch.set_num_threads(args.threads)
    tt.set_num_threads(args.threads)
    names = args.only or list(_cases(tt))
    unknown = sorted(set(names) - set(_cases(tt)))
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; the cases are {list(_cases(tt))}")
    print(f"torch {torch.__version__}, {args.threads} thread(s), best of {args.repeat}, "
          f"forward + backward, float32")
    print(f"{'case':22s} {'tinytrain ms':>13s} {'PyTorch ms':>11s} {'ratio':>7s}")
    for name in names:
        ours, theirs = time_case(tt, name, args.repeat), time_case(torch, name, args.repeat)
        flag = "  <<<" if ours > args.flag * theirs else ""
        print(f"{name:22s} {ours:13.2f} {theirs:11.2f} {ours / theirs:6.2f}x{flag}")


if __name__ == "__main__":
    main()
