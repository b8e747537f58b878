"""Benchmark: MNIST training steps on the CPU, tinytrain against PyTorch, in one run.

For each model (``cnn``, InfiniTrain's MnistCnn, and ``pytorch-example``, the network of
PyTorch's ``examples/mnist``), one training step at batch 64 — ``zero_grad``, forward,
cross-entropy, backward, optimizer step (SGD, or ``--optimizer adam``) — is timed in
tinytrain and in PyTorch with the same architecture, the same batches of real digits and
the same number of threads, for each thread count of ``--threads`` (default: 1 and 2).

Each framework runs in its own process (``--runs`` times, the two frameworks taking turns),
so that its timing and its peak memory are its own: the step time is the median over a
run's steps, and the table shows the range of that median over the runs; per-epoch time is
it times the 938 steps of an MNIST epoch. Peak memory is what the training loop adds to the
process at its peak (the peak resident set, reset just before the first step, minus the
resident set then, when the model, its parameters and the batches are already there).

    python bench/mnist_cpu.py                      # both models, 1 and 2 threads, 3 runs each
    python bench/mnist_cpu.py --models cnn --threads 2 --runs 5 --steps 100

For NumPy's BLAS, this machine may set OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, which slow a
current NumPy; run with ``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`` to compare fairly
(the script prints which BLAS kernel NumPy runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

STEPS_PER_EPOCH = 938  # ceil(60000 / 64)
TIME_TARGET = 1.3  # issue 12: every training-step row within 1.3x of PyTorch ...
MEMORY_TARGET = 1.0  # ... and peak memory no more than PyTorch's


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux: write 5 to clear_refs); False if it can't."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


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


def setup_tinytrain(model_name: str, optimizer: str):
    import tinytrain as tt
    import tinytrain.nn.functional as F
    from tinytrain import optim
    from tinytrain.models import build_model

    tt.manual_seed(0)
    model = build_model(model_name)
    opt = (optim.SGD(model.parameters(), lr=0.01) if optimizer == "sgd"
           else optim.Adam(model.parameters(), lr=1e-3))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(tt.Tensor(x)), tt.Tensor(y))
        loss.backward()
        opt.step()

    return step


def torch_model(name: str):
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


def setup_torch(model_name: str, optimizer: str):
    import torch

    torch.manual_seed(0)
    model = torch_model(model_name)
    opt = (torch.optim.SGD(model.parameters(), lr=0.01) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-3))

    def step(x, y):
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()

    return step


def worker(args: argparse.Namespace) -> None:
    """Runs in a subprocess: time one framework on one model, print a JSON line."""
    (threads,) = args.threads
    if args.framework == "torch":
        import torch

        torch.set_num_threads(threads)
        step = setup_torch(args.model, args.optimizer)
    else:
        import tinytrain as tt

        tt.set_num_threads(threads)
        step = setup_tinytrain(args.model, args.optimizer)
    batches = _batches(args.warmup + args.steps)
    base = _status_mb("VmRSS")
    exact = _reset_peak()
    times = []
    for i, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        step(x, y)
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    peak = _status_mb("VmHWM")
    print(json.dumps({"median_ms": 1e3 * statistics.median(times), "peak_growth_mb": peak - base,
                      "exact_peak": exact}))


def blas_info() -> str:
    try:
        import numpy  # noqa: F401
        from threadpoolctl import threadpool_info

        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        return ", ".join(f"{p['internal_api']} {p.get('version')} ({p.get('architecture')})"
                         for p in pools) or "unknown"
    except Exception as exc:
        return f"unknown ({exc})"


def span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}}-{hi:{fmt}}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cores = os.cpu_count() or 1
    ap.add_argument("--models", nargs="+", default=["cnn", "pytorch-example"])
    ap.add_argument("--threads", type=int, nargs="+", default=sorted({1, min(2, cores)}))
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="runs of each framework, in turn")
    ap.add_argument("--framework", choices=["tinytrain", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.framework:
        return worker(args)

    import torch

    print(f"NumPy BLAS: {blas_info()} | torch {torch.__version__} | "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} | "
          f"{args.optimizer}, batch 64, {args.steps} steps x {args.runs} runs | "
          f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    res: dict[tuple, list[dict]] = {}
    for model in args.models:
        for threads in args.threads:
            for _ in range(args.runs):
                for fw in ("torch", "tinytrain"):
                    env = dict(os.environ, OMP_NUM_THREADS=str(threads),
                               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
                    cmd = [sys.executable, __file__, "--framework", fw, "--model", model,
                           "--steps", str(args.steps), "--warmup", str(args.warmup),
                           "--threads", str(threads), "--optimizer", args.optimizer]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                         env=env).stdout
                    res.setdefault((model, threads, fw), []).append(
                        json.loads(out.strip().splitlines()[-1]))

    print(f"\n{'model':<16} {'threads':>7} {'framework':<10} {'step ms':>11} {'epoch s':>11} "
          f"{'peak MB':>9}")
    for model in args.models:
        for threads in args.threads:
            for fw in ("torch", "tinytrain"):
                runs = res[model, threads, fw]
                step = [r["median_ms"] for r in runs]
                print(f"{model:<16} {threads:>7} {fw:<10} {span(step, '.1f'):>11} "
                      f"{span([s * STEPS_PER_EPOCH / 1e3 for s in step], '.1f'):>11} "
                      f"{span([r['peak_growth_mb'] for r in runs], '.0f'):>9}")
    if not all(r["exact_peak"] for runs in res.values() for r in runs):
        print("(peak MB is the whole process's peak: /proc/self/clear_refs could not be reset)")

    print(f"\nissue 12's rows, ratio tinytrain / PyTorch over the runs (targets: time <= "
          f"{TIME_TARGET}x, peak memory <= {MEMORY_TARGET}x); load average "
          f"{os.getloadavg()[0]:.2f} at the end")
    print(f"{'work':<34} {'threads':>7} {'time':>11} {'memory':>11}")
    for model in args.models:
        for threads in args.threads:
            ours, theirs = res[model, threads, "tinytrain"], res[model, threads, "torch"]
            t_ratio = [a["median_ms"] / b["median_ms"] for a, b in zip(ours, theirs)]
            m_ratio = [a["peak_growth_mb"] / max(b["peak_growth_mb"], 1e-9)
                       for a, b in zip(ours, theirs)]
            verdict = " ".join(
                f"{what} {'ok' if statistics.median(r) <= target else 'MISSED'}"
                for what, r, target in (("time", t_ratio, TIME_TARGET),
                                        ("memory", m_ratio, MEMORY_TARGET)))
            print(f"{'step, ' + model + ', batch 64':<34} {threads:>7} "
                  f"{span(t_ratio, '.2f') + 'x':>11} {span(m_ratio, '.2f') + 'x':>11}  {verdict}")


if __name__ == "__main__":
    main()
