"""Benchmark: the fixed cost of one op and of one small training step, tinytrain against PyTorch.

On tiny tensors the arithmetic is nothing and what is timed is bookkeeping: wrapping the
result in a Tensor, the dtype rule, recording the graph node (``Function.apply``), and the
backward engine. A training step runs ~50 such ops, so microseconds here are the floor of a
GPU step (~2 ms budget) whatever the kernels do.

    python bench/op_overhead.py                  # CPU, best of 7 repeats of each case
    python bench/op_overhead.py --device cuda    # the same on the GPU (launch overheads)

Cases: ``a + b`` on two float32 ``[4]`` tensors without grad, the same with ``a`` requiring
grad (a node is recorded), ``a * 0.5`` (a Python scalar), a reduction ``m.sum(1)`` of a
``[4, 4]`` tensor and the same spelled ``m.sum(axis=1)``, ``a += b`` under ``no_grad``, and
one step of a small MLP (``Linear(32, 64)``, ReLU, ``Linear(64, 10)``, batch 16:
zero_grad, forward, cross-entropy, backward, SGD step). Both frameworks on one CPU thread;
on the GPU each timed run ends with a synchronize.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np


def _timer(sync):
    def time(fn, number: int, repeat: int = 7) -> float:
        """Microseconds per call of ``fn``: the best of ``repeat`` runs (the least disturbed)."""

        def run():
            for _ in range(number):
                fn()
            sync()

        run()
        return min(timeit.repeat(run, number=1, repeat=repeat)) / number * 1e6

    return time


def cases(lib, device: str, sync) -> dict[str, float]:
    time = _timer(sync)
    nn, F = lib.nn, lib.nn.functional
    rng = np.random.default_rng(0)

    def t(array, **kw):
        return lib.tensor(array, device=device, **kw)

    a = t(rng.standard_normal(4).astype(np.float32))
    b = t(rng.standard_normal(4).astype(np.float32))
    ag = t(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    m = t(rng.standard_normal((4, 4)).astype(np.float32))
    out = {
        "a + b": time(lambda: a + b, 20000),
        "a + b (a requires grad)": time(lambda: ag + b, 20000),
        "a * 0.5": time(lambda: a * 0.5, 20000),
        "m.sum(1)": time(lambda: m.sum(1), 20000),
        "m.sum(axis=1) (NumPy's name)": time(lambda: m.sum(axis=1), 20000),
    }

    def iadd():
        nonlocal a
        with lib.no_grad():
            a += b

    out["a += b under no_grad"] = time(iadd, 20000)

    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = t(rng.standard_normal((16, 32)).astype(np.float32))
    y = t(rng.integers(0, 10, 16))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    out["MLP step (2 Linear, batch 16)"] = time(step, 1000)
    return out


def main() -> None:
    import torch

    import tinytrain as tt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    device = parser.parse_args().device
    torch.set_num_threads(1)
    tt.set_num_threads(1)
    ours = cases(tt, device, tt.cuda.synchronize if device == "cuda" else lambda: None)
    theirs = cases(torch, device, torch.cuda.synchronize if device == "cuda" else lambda: None)
    print(f"{'case (' + device + ')':32} {'tinytrain':>11} {'PyTorch':>11} {'ratio':>7}")
    for name in ours:
        print(f"{name:32} {ours[name]:9.2f}us {theirs[name]:9.2f}us "
              f"{ours[name] / theirs[name]:6.2f}x")


if __name__ == "__main__":
    main()
