"""Diagnostics for the GPU performance work (bench/NOTES_gpu.md): many measurements, one run.

Each part prints its own lines and never stops the others; a summary comes last.

* ``timing``: one convnet step at batch 64 timed as chapter 4 times it (one batch, two
  warm-up steps, 200 steps, then ``loss.item()``) and as ``bench/mnist_gpu.py`` does (16
  batches, 20 warm-up steps, median of 3 runs of 200), each with and without the cyclic
  garbage collector, before and after PyTorch has initialised CUDA in the process.
* ``calls``: the host's cost of single CuPy calls and of tinytrain ops on small tensors.
* ``profile``: cProfile of 300 convnet steps at batch 64 (the host's time, by function).
* ``slices``: conv backward (GPU time, CUDA events) for several dW slice sizes, and with
  64-bit indices forced, for the course's layers at batch 64 and 512.
* ``kernels``: the kernels one convnet step launches, by name (CUPTI through PyTorch).
* ``compile``: a cold process's compile time of the kernel module (CUPY_CACHE_DIR empty).

    python bench/gpu_probe.py [timing calls profile slices kernels compile]
"""

from __future__ import annotations

import cProfile
import gc
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

# TINYTRAIN_ROOT: another checkout whose tinytrain to measure (an A/B run against old code)
ROOT = Path(os.environ.get("TINYTRAIN_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))
SUMMARY: list[str] = []


def note(line: str) -> None:
    print(line, flush=True)
    SUMMARY.append(line)


def convnet_step(batch: int = 64):
    import tinytrain as tt
    import tinytrain.nn.functional as F
    from tinytrain.data import MNISTMini
    from tinytrain.models import build_model

    tt.manual_seed(0)
    model = build_model("convnet").to("cuda")
    opt = tt.optim.Adam(model.parameters(), lr=2e-3)
    ds = MNISTMini(train=True)
    rng = np.random.default_rng(0)
    batches = [tuple(tt.tensor(a, device="cuda") for a in ds.get_batch(rng.integers(0, len(ds),
                                                                                    batch)))
               for _ in range(16)]
    state = {}

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        state["loss"] = loss

    return step, batches, state


def part_timing() -> None:
    import cupy

    sync = cupy.cuda.Device().synchronize

    def chapter_style() -> float:
        step, batches, state = convnet_step()
        x, y = batches[0]
        for _ in range(2):
            step(x, y)
        sync()
        t0 = time.perf_counter()
        for _ in range(200):
            step(x, y)
        state["loss"].item()
        return (time.perf_counter() - t0) / 200 * 1e3

    def bench_style() -> float:
        step, batches, _ = convnet_step()
        for i in range(20):
            step(*batches[i % 16])
        sync()
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(200):
                step(*batches[i % 16])
            sync()
            runs.append((time.perf_counter() - t0) / 200 * 1e3)
        return statistics.median(runs)

    for torch_state in ("no torch", "torch CUDA initialised"):
        if torch_state != "no torch":
            import torch

            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
        for gc_on in (True, False):
            if not gc_on:
                gc.collect()
                gc.disable()
            try:
                a, b = chapter_style(), bench_style()
            finally:
                gc.enable()
            note(f"timing | {torch_state}, gc {'on' if gc_on else 'off'}: chapter-style "
                 f"{a:.3f} ms/step, bench-style {b:.3f} ms/step")


def per_call(fn, n: int = 3000) -> float:
    import cupy

    for _ in range(50):
        fn()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n * 1e6
    cupy.cuda.Device().synchronize()
    return host


def part_calls() -> None:
    import cupy

    import tinytrain as tt
    from tinytrain.kernels.cuda import plans, runtime

    a = cupy.ones(1000, cupy.float32)
    b = cupy.ones((64, 1568), cupy.float32)
    w = cupy.ones((128, 1568), cupy.float32)
    out = cupy.empty((64, 128), cupy.float32)
    relu = runtime.kernel("layers", "relu_forward", np.dtype(np.float32), False)
    adam = runtime.kernel("optim", "adam_step", np.dtype(np.float32), False)
    f = np.float32(0.5)
    g = plans.Gemm(False, True, 64, 128, 1568, 1.0, b, 0, 1568, w, 0, 1568, 0.0, out, 0, 128)
    t = tt.tensor(np.ones((64, 128), np.float32), device="cuda", requires_grad=True)
    cases = {
        "cupy.empty(1000)": lambda: cupy.empty(1000, cupy.float32),
        "cupy.ascontiguousarray": lambda: cupy.ascontiguousarray(a),
        "a.astype(copy=True)": lambda: a.astype(cupy.float32, copy=True),
        "cupy ufunc a + a": lambda: a + a,
        "cupy ufunc a - np.float32": lambda: a - f,
        "cupy.ones_like": lambda: cupy.ones_like(a),
        "RawKernel, 3 args": lambda: relu((4,), (256,), (a, a, np.int32(1000))),
        "RawKernel, 13 args": lambda: adam((4,), (256,), (a, a, a, a, np.int32(1000), f, f, f,
                                                          f, f, f, f, f)),
        "runtime.gemm (cuBLAS)": lambda: runtime.gemm(g),
        "cupy.matmul": lambda: cupy.matmul(b, w.T),
        "tt relu (no grad)": lambda: t.detach().relu(),
        "tt relu (graph)": lambda: t.relu(),
    }
    for name, fn in cases.items():
        note(f"calls | {name}: {per_call(fn):.1f} us")


def part_profile() -> None:
    import cupy

    step, batches, _ = convnet_step()
    for i in range(20):
        step(*batches[i % 16])
    cupy.cuda.Device().synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for i in range(300):
        step(*batches[i % 16])
    prof.disable()
    cupy.cuda.Device().synchronize()
    note(f"profile | 300 steps under cProfile: {(time.perf_counter() - t0) / 300 * 1e3:.3f} "
         "ms/step")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    print(out.getvalue())
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
    print(out.getvalue())


def gpu_ms(fn, iters: int) -> float:
    """GPU time per call between CUDA events (the host queues all calls first)."""
    import cupy

    for _ in range(3):
        fn()
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / iters


def _slices_of_layer(name, cin, cout, ks, pad, h, needs, n, rng) -> str:
    import cupy

    from tinytrain.kernels import cuda as k
    from tinytrain.kernels.cuda import plans
    from tinytrain.kernels.shapes import Conv2dMeta

    x = cupy.asarray(rng.standard_normal((n, cin, h, h), dtype=np.float32))
    w = cupy.asarray(rng.standard_normal((cout, cin, ks, ks), dtype=np.float32))
    b = cupy.asarray(rng.standard_normal(cout, dtype=np.float32))
    meta = Conv2dMeta(x.shape, w.shape, 1, pad, b.shape)
    dy = cupy.asarray(rng.standard_normal(meta.output_shape, dtype=np.float32))
    iters = 50 if n == 64 else 20

    def fwd():
        return k.conv2d_forward(x, w, b, meta)

    def bwd():
        return k.conv2d_backward(dy, x, w, meta, needs)

    cells = [f"fwd {gpu_ms(fwd, iters):.3f}"]
    for slice_cols in (10**12, 2048, 4096, 8192, 16384):
        plans.SLICE_COLS = slice_cols
        t = gpu_ms(bwd, iters)
        cells.append(f"bwd S={plans.dw_slices(n, meta.patches)} "
                     f"({slice_cols if slice_cols < 10**12 else 'none'}) {t:.3f}")
    plans.SLICE_COLS = 4096
    saved = plans.narrow
    plans.narrow = lambda largest, threads: False
    try:
        cells.append(f"64-bit indices: fwd {gpu_ms(fwd, iters):.3f} bwd {gpu_ms(bwd, iters):.3f}")
    finally:
        plans.narrow = saved
    return f"slices | {name} N={n}: " + " | ".join(cells) + " (ms, GPU)"


def part_slices() -> None:
    layers = [("convnet conv1", 1, 16, 5, 2, 28, (False, True, True)),
              ("convnet conv2", 16, 32, 5, 2, 14, (True, True, True)),
              ("cnn conv1", 1, 16, 3, 0, 28, (False, True, True)),
              ("cnn conv2", 16, 32, 3, 0, 26, (True, True, True))]
    rng = np.random.default_rng(0)
    for layer in layers:
        for n in (64, 512):
            note(_slices_of_layer(*layer, n, rng))


def part_kernels() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    step, batches, _ = convnet_step()
    for i in range(5):
        step(*batches[i])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(4):
            step(*batches[i])
        torch.cuda.synchronize()
    counts: dict[str, list] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            entry = counts.setdefault(e.name[:70], [0, 0.0])
            entry[0] += 1
            entry[1] += e.device_time_total if hasattr(e, "device_time_total") else 0
    total = sum(c for c, _ in counts.values()) / 4
    note(f"kernels | {total:.0f} device activities per convnet step (batch 64)")
    for name, (c, us) in sorted(counts.items(), key=lambda kv: -kv[1][1]):
        print(f"  {c / 4:5.1f} x  {us / 4:8.1f} us  {name}")


def part_compile() -> None:
    code = (
        "import time, numpy as np, cupy\n"
        "cupy.zeros(1)\n"
        "from tinytrain.kernels.cuda import runtime\n"
        "t0 = time.perf_counter()\n"
        "runtime.kernel('layers', 'relu_forward', np.dtype(np.float32), False)\n"
        "t1 = time.perf_counter()\n"
        "for p in sorted(runtime.SOURCE_DIR.glob('*.cu')):\n"
        "    cupy.RawModule(code=runtime.source(p.stem, np.float32, False),\n"
        "                   options=runtime.OPTIONS).get_function(\n"
        "        {'conv2d': 'im2col', 'layers': 'relu_forward', 'loss': 'cross_entropy_forward',\n"
        "         'optim': 'adam_step', 'pool': 'max_pool_forward'}[p.stem])\n"
        "t2 = time.perf_counter()\n"
        "import tinytrain as tt, tinytrain.nn.functional as F\n"
        "from tinytrain.models import build_model\n"
        "m = build_model('convnet').to('cuda'); o = tt.optim.Adam(m.parameters())\n"
        "x = tt.tensor(np.random.rand(64, 1, 28, 28).astype(np.float32), device='cuda')\n"
        "y = tt.tensor(np.arange(64) % 10, device='cuda')\n"
        "def step():\n"
        "    o.zero_grad(); l = F.cross_entropy(m(x), y); l.backward(); o.step(); l.item()\n"
        "t3 = time.perf_counter(); step(); t4 = time.perf_counter(); step()\n"
        "t5 = time.perf_counter()\n"
        "print(f'one module {t1 - t0:.3f} s, five modules {t2 - t1:.3f} s, first step '\n"
        "      f'{t4 - t3:.3f} s (CuPy kernels compiled), second {t5 - t4:.4f} s')\n"
    )
    for label in ("cold cache", "warm cache"):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env["CUPY_CACHE_DIR"] = part_compile.cache if label == "warm cache" else (
            tempfile.mkdtemp(prefix="cupy-cache-"))
        part_compile.cache = env["CUPY_CACHE_DIR"]
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
        note(f"compile | {label}: {(r.stdout + r.stderr).strip().splitlines()[-1]}")


PARTS = {"timing": part_timing, "calls": part_calls, "profile": part_profile,
         "slices": part_slices, "kernels": part_kernels, "compile": part_compile}


def main() -> None:
    names = sys.argv[1:] or list(PARTS)
    unknown = [n for n in names if n not in PARTS]
    if unknown:  # (--help included)
        print(__doc__)
        if unknown != ["--help"] and unknown != ["-h"]:
            print(f"unknown part(s): {', '.join(unknown)}; the parts: {', '.join(PARTS)}")
            raise SystemExit(2)
        return
    for name in names:
        t0 = time.perf_counter()
        print(f"===== {name}", flush=True)
        try:
            PARTS[name]()
        except Exception:
            traceback.print_exc()
            note(f"{name} | FAILED (traceback above)")
        print(f"===== {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    print("\n===== summary")
    print("\n".join(SUMMARY))


if __name__ == "__main__":
    main()
