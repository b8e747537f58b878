"""Benchmark: MNIST training steps on the CPU, tinytrain against PyTorch, in one run.

For each model (``cnn``, InfiniTrain's MnistCnn, and ``pytorch-example``, the network of
PyTorch's ``examples/mnist``), one training step at batch 64 — ``zero_grad``, forward,
cross-entropy, backward, SGD step — is timed in tinytrain and in PyTorch with the same
architecture, the same batches of real digits and the same number of threads. Each
framework runs in its own subprocess so that its peak memory (peak RSS, and the growth
over the process after imports) is its own. Per-epoch time is the median step time times
the 938 steps of an MNIST epoch at batch 64.

    python bench/mnist_cpu.py                      # both models, 40 timed steps each
    python bench/mnist_cpu.py --models cnn --steps 100 --threads 2

For NumPy's BLAS, this machine may set OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, which slow a
current NumPy; run with ``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`` to compare fairly
(the script prints which BLAS kernel NumPy runs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

STEPS_PER_EPOCH = 938  # ceil(60000 / 64)


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _batches(n: int) -> list:
    from tinytrain.data import DataLoader, MNISTMini

    loader = DataLoader(MNISTMini(train=True), batch_size=64, shuffle=True, seed=0,
                        drop_last=True)
    out = []
    while len(out) < n:
        for x, y in loader:
            out.append((x.numpy(), y.numpy()))
            if len(out) == n:
                break
    return out


def worker_tinytrain(model_name: str, batches: list, warmup: int) -> list[float]:
    import tinytrain as tt
    import tinytrain.nn.functional as F
    from tinytrain import optim
    from tinytrain.models import build_model

    tt.manual_seed(0)
    model = build_model(model_name)
    opt = optim.SGD(model.parameters(), lr=0.01)
    times = []
    for i, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(tt.Tensor(x)), tt.Tensor(y))
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def torch_model(name: str):
    import torch
    from torch import nn

    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(),
                             nn.Flatten(1), nn.Linear(18432, 10))
    if name == "pytorch-example":
        return nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(1),
                             nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                             nn.Linear(128, 10))
    raise SystemExit(f"no PyTorch twin for model {name!r}")
    return torch


def worker_torch(model_name: str, batches: list, warmup: int) -> list[float]:
    import torch

    torch.manual_seed(0)
    model = torch_model(model_name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for i, (x, y) in enumerate(batches):
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def worker(args: argparse.Namespace) -> None:
    """Runs in a subprocess: time one framework on one model, print a JSON line."""
    threads = args.threads
    if args.framework == "torch":
        import torch

        torch.set_num_threads(threads)
    else:
        import numpy  # noqa: F401  (load BLAS before limiting it)
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
    batches = _batches(args.warmup + args.steps)
    base = _rss_mb()
    fn = worker_torch if args.framework == "torch" else worker_tinytrain
    times = fn(args.model, batches, args.warmup)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"median_ms": 1e3 * statistics.median(times),
                      "mean_ms": 1e3 * statistics.fmean(times),
                      "peak_rss_mb": peak, "growth_mb": peak - base}))


def blas_info() -> str:
    try:
        import numpy  # noqa: F401
        from threadpoolctl import threadpool_info

        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        return ", ".join(f"{p['internal_api']} {p.get('version')} ({p.get('architecture')})"
                         for p in pools) or "unknown"
    except Exception as exc:
        return f"unknown ({exc})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["cnn", "pytorch-example"])
    ap.add_argument("--steps", type=int, default=40, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--framework", choices=["tinytrain", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.framework:
        return worker(args)

    import torch

    print(f"threads: {args.threads} | NumPy BLAS: {blas_info()} | torch {torch.__version__} | "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"{'model':<16} {'framework':<10} {'step ms':>8} {'epoch s':>8} "
          f"{'peak RSS MB':>12} {'growth MB':>10}")
    for model in args.models:
        res = {}
        for fw in ("torch", "tinytrain"):
            cmd = [sys.executable, __file__, "--framework", fw, "--model", model,
                   "--steps", str(args.steps), "--warmup", str(args.warmup),
                   "--threads", str(args.threads)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            res[fw] = r = json.loads(out.strip().splitlines()[-1])
            print(f"{model:<16} {fw:<10} {r['median_ms']:8.1f} "
                  f"{r['median_ms'] * STEPS_PER_EPOCH / 1e3:8.1f} {r['peak_rss_mb']:12.0f} "
                  f"{r['growth_mb']:10.0f}", flush=True)
        ratio = res["tinytrain"]["median_ms"] / res["torch"]["median_ms"]
        mem = res["tinytrain"]["growth_mb"] / max(res["torch"]["growth_mb"], 1e-9)
        print(f"{model:<16} ratio tinytrain/torch: time {ratio:.2f}x, memory growth {mem:.2f}x "
              f"(target: time <= 1.5x)")


if __name__ == "__main__":
    main()
