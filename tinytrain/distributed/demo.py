"""A few SGD steps with DistributedDataParallel, to compare with one process (chapter 7).

    mpiexec -n 2 python -m tinytrain.distributed.demo --batch-size 32 --save two.npz
    python -m tinytrain.distributed.demo --batch-size 64 --save one.npz
    mpiexec -n 2 python -m tinytrain.distributed.demo --device cuda     # NCCL, a GPU per rank

Under ``mpiexec`` every rank takes ``--batch-size`` samples per step from its
:class:`~tinytrain.data.DistributedSampler` shard and DDP averages the gradients; started
alone, the same loop runs in one process without DDP. Both draw the epoch's order from the
same seed, so R ranks with batch B see, step by step, exactly the samples of one process with
batch R*B, and (in float64) end with the same weights up to rounding.

Rank 0 saves the final weights (``--save``); every rank prints a digest of its parameters,
so the output shows whether all ranks hold bit-identical weights.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import distributed as dist
from tinytrain.data import DataLoader, DistributedSampler
from tinytrain.data.datasets import load_dataset
from tinytrain.distributed.launch import launched_world_size
from tinytrain.models import build_model


def parameter_digest(model: tt.nn.Module) -> str:
    """A short hash of every parameter's bytes: equal digests mean bit-identical weights."""
    h = hashlib.blake2b(digest_size=8)
    for p in model.parameters():
        h.update(np.ascontiguousarray(p.numpy()).tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tinytrain.distributed.demo",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10, help="SGD steps (default 10)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per step per rank")
    p.add_argument("--model", default="mlp", help="model of tinytrain.models (default mlp)")
    p.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cpu: MPI between the ranks; cuda: NCCL, one GPU per rank")
    p.add_argument("--save", metavar="PATH", help="rank 0 writes the final weights here")
    args = p.parse_args(argv)

    distributed = launched_world_size() > 1
    if distributed:
        dist.init_process_group("nccl" if args.device == "cuda" else "mpi")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    tt.manual_seed(args.seed)
    model = build_model(args.model).to(args.device, args.dtype)
    data = load_dataset("mnist-mini", train=True)
    if distributed:
        model = dist.DistributedDataParallel(model)
        model.measure_comm_wait = True
        loader = DataLoader(data, batch_size=args.batch_size,
                            sampler=DistributedSampler(data, shuffle=True, seed=args.seed))
    else:
        loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    opt = tt.optim.SGD(model.parameters(), lr=args.lr)
    batches = iter(loader)
    if distributed:
        dist.barrier()  # start the clocks together
    t0 = time.perf_counter()
    for step in range(args.steps):
        x, y = next(batches)
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(args.device, args.dtype)), y.to(args.device))
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step + 1:3d}  loss {loss.item():.6f}", flush=True)
    seconds = time.perf_counter() - t0
    net = model.module if distributed else model
    wait = f", {model.comm_wait_seconds() * 1e3:.1f} ms waiting" if distributed else ""
    if distributed:
        dist.barrier()  # print the digests after every rank's log line above
    print(f"rank {rank} of {world}: parameters {parameter_digest(net)} | {seconds:.2f} s for "
          f"{args.steps} steps{wait}", flush=True)
    if args.save and rank == 0:
        Path(args.save).expanduser().parent.mkdir(parents=True, exist_ok=True)
        tt.save(net.state_dict(), args.save)
    if distributed:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
