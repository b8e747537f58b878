"""Benchmark: the host side of a GPU training step, on any machine (no GPU needed).

A GPU step at batch 64 is bound by the host: the Python that builds the graph, plans the
launches and calls CuPy, not the GPU's work. This script measures that Python alone. It
replaces CuPy by a stand-in whose arrays are NumPy arrays (of a subclass that tinytrain
takes for CuPy's) and whose kernel launches and GEMMs do nothing, then times training
steps and profiles them. What it measures is tinytrain's own host cost; CuPy's per call
(about 6 us a RawKernel launch, 10-20 us a ufunc or a matmul on an H200's host, as
``bench/op_overhead.py --device cuda`` measures) comes on top, once per launch it counts.

    python bench/gpu_host.py                    # ms per step, and launches per step
    python bench/gpu_host.py --profile 25       # and the 25 costliest functions (cProfile)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class FakeArray(np.ndarray):
    """A NumPy array that tinytrain takes for a CuPy array (its class's module is 'cupy...')."""

    __cuda_array_interface__ = None


FakeArray.__module__ = "cupy_standin"


def _wrap(value: Any) -> Any:
    return value.view(FakeArray) if type(value) is np.ndarray else value


class _Standin(types.ModuleType):
    """``cupy`` with NumPy underneath: every function that returns an array returns a FakeArray."""

    ndarray = FakeArray

    def __getattr__(self, name: str) -> Any:
        attr = getattr(np, name)
        if callable(attr) and not isinstance(attr, type):
            return lambda *a, **k: _wrap(attr(*a, **k))
        return attr


class _Checks:
    def acquire(self, classes: int) -> tuple[int, Any]:
        return 0, np.zeros(3, np.int64).view(FakeArray)

    def record(self, slot: int) -> None:
        pass


class NoGPU:
    """An executor of :mod:`tinytrain.kernels.cuda` that counts launches and runs none."""

    def __init__(self, xp: Any) -> None:
        self.xp, self.launches, self.gemms = xp, 0, 0
        self.checks = _Checks()

    def cupy(self) -> Any:
        return self.xp

    def run(self, steps: list) -> None:
        for s in steps:
            if type(s).__name__ == "Gemm":
                self.gemms += 1
            else:
                self.launches += 1

    def target_checks(self) -> _Checks:
        return self.checks


def install() -> NoGPU:
    """Make tinytrain's "cuda" device this stand-in; returns the counting executor.

    tinytrain tells NumPy from CuPy arrays with ``isinstance(a, np.ndarray)``, which a
    FakeArray passes: the three functions that decide are replaced, wherever imported, by
    versions that look at FakeArray first.
    """
    import tinytrain.optim  # noqa: F401 (loads every module whose names are patched below)
    from tinytrain import backend, kernels
    from tinytrain.kernels import cuda

    xp = _Standin("cupy_standin")
    backend._cupy = xp
    executor = NoGPU(xp)
    cuda.executor = executor
    originals = {
        backend.device_of: lambda a: backend.CUDA if type(a) is FakeArray else old_device(a),
        backend.get_array_module: lambda a: xp if type(a) is FakeArray else old_module(a),
        kernels.for_array: lambda a: cuda if type(a) is FakeArray else kernels.cpu,
    }
    old_device, old_module = backend.device_of, backend.get_array_module
    for name, module in list(sys.modules.items()):
        if name.startswith("tinytrain"):
            for attr, value in list(vars(module).items()):
                if callable(value) and value in originals:
                    setattr(module, attr, originals[value])
    return executor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="print the N costliest functions by own time")
    args = ap.parse_args()

    executor = install()
    import tinytrain as tt
    import tinytrain.nn.functional as F
    from tinytrain.models import build_model

    tt.manual_seed(0)
    model = build_model(args.model).to("cuda")
    opt = tt.optim.Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.random((args.batch, 1, 28, 28), dtype=np.float32), device="cuda")
    y = tt.tensor(rng.integers(0, 10, args.batch), device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    executor.launches = executor.gemms = 0
    step()
    per_step = (executor.launches, executor.gemms)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        runs.append((time.perf_counter() - t0) / args.steps * 1e3)
    print(f"{args.model} batch {args.batch}: host {statistics.median(runs):.3f} ms/step "
          f"(median of 5 runs of {args.steps}; min {min(runs):.3f}), the GPU replaced by "
          f"no-ops; per step {per_step[0]} kernel launches + {per_step[1]} GEMMs")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
