"""Benchmark: MNIST training steps on one GPU, tinytrain against PyTorch, in one run.

For ``convnet`` (the default recipe's model) and ``cnn`` (InfiniTrain's), at batch 64 and
512: the time of one training step (``zero_grad``, forward, cross-entropy, backward, Adam
step) in tinytrain and in PyTorch eager with the same architecture, the same batches of
real digits already on the GPU, and the same optimizer; their ratio (target: at most 1.0);
and, as a reference, PyTorch's whole step captured and replayed as one CUDA graph. A step
is timed as the mean over many steps between two synchronisations (the GPU and the host
overlap as in training). With ``--count`` (default on) PyTorch's profiler (CUPTI, which sees
every kernel of the process, CuPy's too) counts the kernels one step launches.

    python bench/mnist_gpu.py                  # the step table
    python bench/mnist_gpu.py --epoch          # and one epoch of the default recipe in
                                               # PyTorch eager on full MNIST ($TINYTRAIN_DATA)
    python bench/mnist_gpu.py --epoch-only     # just that epoch (compare with
                                               # python -m tinytrain.train --device cuda)

Kernel launches of one tinytrain ``convnet`` training step at batch 64, as CUPTI counted
them on an H200 (bench/NOTES_gpu.md):

    forward   19: input standardisation 2 (CuPy ufuncs with a scalar), conv 3 each (im2col,
                  GEMM, NCHW + bias), ReLU 1 each (3), max pool 1 each (2), linear 2 each
                  (GEMM, bias), dropout 1, cross-entropy 1 (+ one async 24-byte copy of the
                  target check)
    backward  24: the seed gradient 1 (ones_like), cross-entropy 1, linear 3 each (two GEMMs,
                  bias reduction), dropout 1, ReLU 1 each (3), max pool 1 each (2), conv2 6
                  (dy layout, im2col with a ones row, dW + db as one batched GEMM over slices,
                  the sum of the slices, dcol GEMM, col2im), conv1 4 (no dX: its input needs
                  no gradient)
    optimizer  8: one fused Adam kernel per parameter
    total     51, plus the split-K reductions cuBLAS adds to 3 of the GEMMs: 54.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEAN, STD = 0.1307, 0.3081


def real_batches(batch: int, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from tinytrain.data import MNISTMini

    ds = MNISTMini(train=True)
    rng = np.random.default_rng(0)
    return [ds.get_batch(rng.integers(0, len(ds), batch)) for _ in range(n)]


def timed(step, sync, batches, warmup: int, steps: int, repeat: int = 3) -> float:
    """Median over ``repeat`` runs of the mean time per step, in ms.

    Before timing, everything alive is frozen out of Python's garbage collector
    (``gc.freeze``), as ``python -m tinytrain.train`` does: otherwise a full collection of the
    hundreds of thousands of objects PyTorch and CuPy hold may land in one framework's runs
    and not the other's (it moved a convnet step by up to 1.4 ms; bench/NOTES_gpu.md)."""
    for i in range(warmup):
        step(*batches[i % len(batches)])
    sync()
    gc.collect()
    gc.freeze()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for i in range(steps):
            step(*batches[i % len(batches)])
        sync()
        runs.append((time.perf_counter() - t0) / steps * 1e3)
    return statistics.median(runs)


def count_kernels(step, batches, steps: int = 5) -> float | None:
    """Kernels launched per step, counted by CUPTI through PyTorch's profiler."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        for i in range(3):
            step(*batches[i])
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(steps):
                step(*batches[i])
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                   and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
        return len(kernels) / steps
    except Exception as exc:  # the count is a bonus; never fail the benchmark for it
        print(f"  (kernel count unavailable: {type(exc).__name__}: {exc})")
        return None


# --------------------------------------------------------------------------- tinytrain


def tinytrain_step(model_name: str):
    import tinytrain as tt
    import tinytrain.nn.functional as F
    from tinytrain.models import build_model

    tt.manual_seed(0)
    model = build_model(model_name).to("cuda")
    opt = tt.optim.Adam(model.parameters(), lr=2e-3)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


# --------------------------------------------------------------------------- PyTorch


def torch_model(name: str):
    import torch
    from torch import nn

    class Standardize(nn.Module):
        def forward(self, x):
            return (x - MEAN) / STD

    if name == "convnet":
        return nn.Sequential(
            Standardize(), nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(1),
            nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(),
                             nn.Flatten(1), nn.Linear(18432, 10))
    raise SystemExit(f"no PyTorch twin for {name!r}")
    return torch


def torch_step(model_name: str, capturable: bool = False):
    import torch

    torch.manual_seed(0)
    model = torch_model(model_name).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, capturable=capturable)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def torch_graph_step(model_name: str, x0, y0):
    """The whole step captured once as a CUDA graph; each step copies the batch in, replays."""
    import torch

    step = torch_step(model_name, capturable=True)
    static_x, static_y = x0.clone(), y0.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(static_x, static_y)

    def replay(x, y):
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()

    return replay


# --------------------------------------------------------------------------- epoch


def torch_epoch(batch: int = 64, seed: int = 0) -> None:
    """One epoch of the default recipe (convnet, Adam 2e-3, cosine to 0, batch 64) in PyTorch
    eager on full MNIST kept on the GPU, then the test accuracy: the counterpart of
    ``python -m tinytrain.train --device cuda`` (whose epoch time also includes putting the
    data set on the GPU, as here)."""
    import torch

    from tinytrain.data import MNIST

    torch.manual_seed(seed)
    root = None
    train, test = MNIST(root, train=True, download=False), MNIST(root, train=False,
                                                                 download=False)
    model = torch_model("convnet").cuda()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    steps = -(-len(train) // batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    xs, ys = (torch.from_numpy(a).cuda() for a in train.get_batch(np.arange(len(train))))
    order = torch.randperm(len(train), device="cuda")
    running = torch.zeros((), device="cuda")
    for i in range(steps):
        idx = order[i * batch:(i + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xs[idx]), ys[idx])
        loss.backward()
        opt.step()
        sched.step()
        running += loss.detach()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        tx, ty = (torch.from_numpy(a).cuda() for a in test.get_batch(np.arange(len(test))))
        for i in range(0, len(test), 1000):
            correct += int((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum())
    print(f"PyTorch eager, one epoch of the default recipe: {seconds:.2f} s "
          f"({len(train) / seconds:.0f} samples/s), train loss {float(running) / steps:.4f}, "
          f"test accuracy {100 * correct / len(test):.2f}%", flush=True)


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["convnet", "cnn"])
    ap.add_argument("--batches", nargs="+", type=int, default=[64, 512])
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run (x3 runs)")
    ap.add_argument("--no-count", dest="count", action="store_false")
    ap.add_argument("--epoch", action="store_true", help="also one PyTorch epoch (full MNIST)")
    ap.add_argument("--epoch-only", action="store_true")
    args = ap.parse_args()

    import cupy
    import torch

    import tinytrain as tt

    if args.epoch_only:
        torch_epoch()
        return
    print(f"GPU: {torch.cuda.get_device_name()} | torch {torch.__version__} (cuDNN "
          f"{torch.backends.cudnn.version()}, conv TF32 {torch.backends.cudnn.allow_tf32}, "
          f"matmul TF32 {torch.backends.cuda.matmul.allow_tf32}) | CuPy {cupy.__version__} | "
          f"tinytrain float32 GEMMs without TF32")
    sync_tt = cupy.cuda.Device().synchronize
    rows, data = [], {}
    for name in args.models:
        for batch in args.batches:
            steps = args.steps if batch <= 64 else max(20, args.steps // 2)
            host = real_batches(batch, 16)
            tt_data = [(tt.tensor(x, device="cuda"), tt.tensor(y, device="cuda"))
                       for x, y in host]
            th_data = [(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) for x, y in host]
            data[name, batch] = tt_data, th_data
            ours = timed(tinytrain_step(name), sync_tt, tt_data, 20, steps)
            eager = timed(torch_step(name), torch.cuda.synchronize, th_data, 20, steps)
            graph = timed(torch_graph_step(name, *th_data[0]), torch.cuda.synchronize, th_data,
                          5, steps)
            rows.append([name, batch, ours, eager, graph, None, None])
            print(f"  {name} batch {batch}: tinytrain {ours:.3f} ms, PyTorch eager {eager:.3f} ms"
                  f", graph {graph:.3f} ms", flush=True)
    if args.count:  # after all the timings: the profiler (CUPTI) may stay attached
        for row in rows:
            tt_data, th_data = data[row[0], row[1]]
            row[5] = count_kernels(tinytrain_step(row[0]), tt_data)
            row[6] = count_kernels(torch_step(row[0]), th_data)

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    print("\n| model | batch | tinytrain ms/step | PyTorch eager ms/step | ratio (target <= 1.0) "
          "| PyTorch CUDA graph ms/step | kernels/step tinytrain / PyTorch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, batch, ours, eager, graph, k_ours, k_eager in rows:
        print(f"| {name} | {batch} | {ours:.3f} | {eager:.3f} | {ours / eager:.2f}x | "
              f"{graph:.3f} | {fmt(k_ours)} / {fmt(k_eager)} |")
    if args.epoch:
        torch_epoch()


if __name__ == "__main__":
    main()
