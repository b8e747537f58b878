"""What each rank runs in tests/test_sync_batchnorm.py: ``mpiexec -n N python
tests/sync_batchnorm_mpi.py SCENARIO [--backend mpi|nccl]``.

Every rank draws the same whole batch, takes its own slice of it (of a size of its own, some
of them 1 or 0 samples) and compares what ``nn.SyncBatchNorm`` gives it with what one
PyTorch BatchNorm gives over the whole batch, computed on each rank (float64, 1e-10). A
scenario prints ``ok <scenario> rank <r>`` when every check passed; a failed assert aborts
every rank.
"""

from __future__ import annotations

import argparse
import inspect

import numpy as np
import torch

import tinytrain as tt
import tinytrain.distributed as dist
from tinytrain import nn
from tinytrain.nn.parallel import DistributedDataParallel as DDP

torch.set_num_threads(1)
TOL = dict(rtol=1e-10, atol=1e-10)


def slices(sizes: list[int]) -> list[slice]:
    """Consecutive slices of the whole batch, of ``sizes`` (one per rank)."""
    ends = np.cumsum([0, *sizes])
    return [slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])]


def close(ours: tt.Tensor | np.ndarray, theirs: torch.Tensor, what: str) -> None:
    ours = ours.numpy() if isinstance(ours, tt.Tensor) else ours
    np.testing.assert_allclose(ours, theirs.detach().numpy(), **TOL, err_msg=what)


def summed(t: tt.Tensor) -> np.ndarray:
    """``t`` summed over every rank (a copy)."""
    total = t.detach().clone()
    dist.all_reduce(total)
    return total.numpy()


def one_layer(rank: int, world: int, device: str, shape: tuple[int, ...], sizes: list[int],
              steps: int = 2, **options) -> None:
    """Two training steps, then one in eval mode: outputs, input gradients, the weight and
    bias gradients summed over the ranks, the running statistics (the same on every rank)."""
    what = f"{len(shape)}-D {options} sizes {sizes}"
    rng = np.random.default_rng(len(shape) + len(options))
    c = shape[1]
    theirs = torch.nn.BatchNorm1d(c, **options).double()  # (any N-D input: the functional
    ours = nn.SyncBatchNorm(c, **options).to(device=device, dtype="float64")  # form is one)
    if theirs.affine:  # not ones and zeros, so that they matter
        w, b = rng.uniform(0.5, 2, c), rng.standard_normal(c)
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(w))
            if theirs.bias is not None:
                theirs.bias.copy_(torch.tensor(b))
        ours.weight.data[...] = tt.tensor(w, device=device)
        if ours.bias is not None:
            ours.bias.data[...] = tt.tensor(b, device=device)
    mine = slices(sizes)[rank]
    for step in range(steps + 1):
        train = step < steps
        theirs.train(train)
        ours.train(train)
        x = rng.standard_normal((sum(sizes), *shape[1:])) * 3 + rng.standard_normal(
            (1, c) + (1,) * (len(shape) - 2))
        dy = rng.standard_normal(x.shape)
        tx = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.batch_norm(
            tx, theirs.running_mean, theirs.running_var, theirs.weight, theirs.bias,
            train or theirs.running_mean is None,
            1.0 / (step + 1) if theirs.momentum is None else theirs.momentum, theirs.eps)
        ty.backward(torch.tensor(dy))
        rows = mine  # (of the reference's batch)
        local = not train and theirs.running_mean is None
        if local:  # eval without running statistics: each rank's own batch's, as PyTorch's
            tx = torch.tensor(x[mine], requires_grad=True)
            ty = torch.nn.functional.batch_norm(tx, None, None, theirs.weight, theirs.bias,
                                                True, 0.0, theirs.eps)
            ty.backward(torch.tensor(dy[mine]))
            rows = slice(None)
        xs = tt.tensor(x[mine], device=device, requires_grad=True)
        y = ours(xs)
        y.backward(tt.tensor(dy[mine], device=device))
        close(y.cpu(), ty[rows], f"{what}: step {step} output")
        close(xs.grad.cpu(), tx.grad[rows], f"{what}: step {step} input gradient")
        for name in ("weight", "bias"):
            p, tp = getattr(ours, name), getattr(theirs, name)
            if tp is not None and not local:
                close(summed(p.grad).astype(np.float64), tp.grad,
                      f"{what}: step {step} {name} gradient summed over ranks")
                p.grad, tp.grad = None, None
        if theirs.track_running_stats:
            for name in ("running_mean", "running_var"):
                close(getattr(ours, name).cpu(), getattr(theirs, name), f"{what}: {name}")
            assert ours.num_batches_tracked.item() == min(step + 1, steps), what


def layers(rank: int, world: int, device: str) -> None:
    uneven = [3, 5, 1, 4][:world]  # (a rank of 1 sample: legal, the whole batch has more)
    with_empty = [0, 4, 2, 1][:world]  # (rank 0 has no sample)
    one_layer(rank, world, device, (0, 3), uneven)
    one_layer(rank, world, device, (0, 2, 5), with_empty, momentum=None)
    one_layer(rank, world, device, (0, 4, 3, 5), uneven, eps=1e-3, momentum=0.3)
    one_layer(rank, world, device, (0, 2, 2, 3, 2), uneven, affine=False)
    one_layer(rank, world, device, (0, 3, 4), uneven, track_running_stats=False)
    if "bias" in inspect.signature(torch.nn.BatchNorm1d.__init__).parameters:  # (2.13's)
        one_layer(rank, world, device, (0, 3, 2, 2), with_empty, bias=False)
    # an input that needs no gradient: the weight's still right (and no backward all-reduce)
    layer = nn.SyncBatchNorm(2).to(device=device, dtype="float64")
    ref = torch.nn.BatchNorm2d(2).double()
    x = np.random.default_rng(5).standard_normal((sum(uneven), 2, 3, 3))
    dy = np.random.default_rng(6).standard_normal(x.shape)
    ref(torch.tensor(x)).backward(torch.tensor(dy))
    mine = slices(uneven)[rank]
    layer(tt.tensor(x[mine], device=device)).backward(tt.tensor(dy[mine], device=device))
    close(summed(layer.weight.grad), ref.weight.grad, "weight gradient, x without grad")
    print(f"ok layers rank {rank}", flush=True)


def errors(rank: int, world: int, device: str) -> None:
    """One value per channel over all ranks raises on every rank (none is left waiting)."""
    layer = nn.SyncBatchNorm(3).to(device=device)
    x = tt.zeros((1 if rank == 0 else 0, 3), device=device)
    try:
        layer(x)
    except ValueError as exc:
        assert "Expected more than 1 value per channel when training" in str(exc), exc
    else:
        raise AssertionError("no error for one value per channel over all ranks")
    try:
        layer(tt.zeros((2, 4), device=device))
    except Exception as exc:
        assert "SyncBatchNorm(3)" in str(exc) and "[2, 4]" in str(exc).replace("(", "["). \
            replace(")", "]"), exc
    else:
        raise AssertionError("no error for 4 channels into SyncBatchNorm(3)")
    # the same layer still works afterwards (no collective was left half-done)
    y = layer(tt.ones((2, 3), device=device) * (rank + 1))
    expect = (rank + 1 - (world + 1) / 2) / np.sqrt(
        np.var(np.arange(1, world + 1)) + layer.eps)
    np.testing.assert_allclose(y.cpu().numpy(), np.full((2, 3), expect), rtol=1e-5)
    print(f"ok errors rank {rank}", flush=True)


def ddp_training(rank: int, world: int, device: str) -> None:
    """A conv net with BatchNorm2d and BatchNorm1d, converted and wrapped in DDP, trained
    with SGD (momentum) for 4 steps on per-rank batches of 6: after each step its weights
    and running statistics are those of PyTorch's BatchNorm net trained on the whole batch
    of 6 x ranks in one process."""

    def net(lib):
        return lib.nn.Sequential(
            lib.nn.Conv2d(2, 4, 3, padding=1), lib.nn.BatchNorm2d(4), lib.nn.ReLU(),
            lib.nn.Conv2d(4, 4, 3), lib.nn.BatchNorm2d(4, momentum=None), lib.nn.ReLU(),
            lib.nn.Flatten(), lib.nn.Linear(4 * 4 * 4, 8), lib.nn.BatchNorm1d(8),
            lib.nn.ReLU(), lib.nn.Linear(8, 3))

    rng = np.random.default_rng(0)
    theirs = net(torch).double()
    state = {k: (rng.standard_normal(v.shape) * 0.5 if v.dtype == torch.float64 and
                 "running" not in k else v.numpy()) for k, v in theirs.state_dict().items()}
    theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    ours = net(tt).to(dtype="float64")
    ours.load_state_dict({k: tt.tensor(v) for k, v in state.items()})
    ours = nn.SyncBatchNorm.convert_sync_batchnorm(ours).to(device)
    assert sum(isinstance(m, nn.SyncBatchNorm) for m in ours.modules()) == 3
    model = DDP(ours)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    per_rank = 6
    mine = slices([per_rank] * world)[rank]
    for step in range(4):
        x = rng.standard_normal((per_rank * world, 2, 6, 6)) + 1.0
        labels = rng.integers(0, 3, per_rank * world)
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.tensor(x)),
                                          torch.tensor(labels)).backward()
        ref_opt.step()
        opt.zero_grad()
        loss = tt.nn.functional.cross_entropy(model(tt.tensor(x[mine], device=device)),
                                              tt.tensor(labels[mine], device=device))
        loss.backward()
        opt.step()
        for k, v in theirs.state_dict().items():
            close(ours.state_dict()[k].cpu().numpy().astype(np.float64), v.double(),
                  f"step {step}: {k}")
    print(f"ok ddp_training rank {rank}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["layers", "errors", "ddp_training"])
    parser.add_argument("--backend", default="mpi")
    args = parser.parse_args()
    dist.init_process_group(args.backend)
    device = "cuda" if args.backend == "nccl" else "cpu"
    globals()[args.scenario](dist.get_rank(), dist.get_world_size(), device)
    dist.destroy_process_group()
