"""DistributedDataParallel's semantics against PyTorch's: one script, run under ``mpiexec -n 2``
once with tinytrain (``mpi`` backend) and once with PyTorch (``gloo``); the test compares what
each rank saved (tests/test_distributed_mpi.py).

    mpiexec -n 2 python tests/ddp_vs_torch.py {tinytrain|torch} OUT_PREFIX [FLAGS]

FLAGS: DistributedDataParallel's buffer flags, ``broadcast_buffers=False`` or
``forward_sync_buffers=False`` (default: neither).

The model has what DDP must handle beyond plain averaging: a BatchNorm (buffers broadcast from
rank 0 before a forward that follows a training one), a head only rank 0 uses (its gradient
averaged with rank 1's zeros), a head no rank uses (``find_unused_parameters=True``: its
``.grad`` stays None, so momentum and weight decay leave it alone) and a head whose use
changes: rank 0 only, then no rank after ``zero_grad(set_to_none=False)``, then no rank
without ``zero_grad`` (its averaged gradient is kept on every rank), then rank 0 only inside
``no_sync``. Both libraries start from the same weights (drawn here with NumPy) and see the
same data on each rank; three steps, then one step that accumulates two ``no_sync``
micro-batches before the one that averages.
"""

from __future__ import annotations

import os
import socket
import sys

import numpy as np
from mpi4py import MPI

library, prefix = sys.argv[1], sys.argv[2]
flags = dict((f.split("=")[0], f.split("=")[1] == "True") for f in sys.argv[3:])
comm = MPI.COMM_WORLD
rank = comm.Get_rank()

if library == "torch":
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(comm.bcast(free_port() if rank == 0 else None, root=0))
    dist.init_process_group("gloo", rank=rank, world_size=comm.Get_size())
else:
    import tinytrain as torch
    import tinytrain.distributed as dist
    from tinytrain import nn
    from tinytrain.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.bn = nn.Linear(3, 4), nn.BatchNorm1d(4)
        self.mine, self.unused, self.sometimes = nn.Linear(4, 1), nn.Linear(4, 1), nn.Linear(4, 1)
        self.use_sometimes = False  # on this rank, in this forward

    def forward(self, x):
        h = self.bn(self.body(x))
        out = self.mine(h) if rank == 0 else h.sum(dim=1, keepdim=True)
        return out + self.sometimes(h) if self.use_sometimes else out


model = Net()
init = np.random.default_rng(0)
model.load_state_dict({
    k: torch.tensor((init.uniform(0.5, 2.0, v.shape) if k.endswith("running_var")
                     else init.standard_normal(v.shape)).astype(np.float32))
    if v.dtype == torch.float32 else v for k, v in model.state_dict().items()})
ddp = DDP(model, find_unused_parameters=True, **flags)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9, weight_decay=0.01)
data = np.random.default_rng(1 + rank)  # each rank its own batches
saved: dict[str, np.ndarray] = {}
zero_grads = [lambda: opt.zero_grad(), lambda: opt.zero_grad(set_to_none=False), lambda: None]
for step in range(3):
    x = torch.tensor(data.standard_normal((8, 3)).astype(np.float32))
    zero_grads[step]()
    model.use_sometimes = step == 0 and rank == 0
    (ddp(x) ** 2).sum().backward()
    saved[f"step{step}.no_grad"] = np.array(
        sorted(n for n, p in model.named_parameters() if p.grad is None))
    for n, p in model.named_parameters():
        if p.grad is not None:
            saved[f"step{step}.grad.{n}"] = p.grad.numpy().copy()
    opt.step()
opt.zero_grad()  # gradient accumulation: two local backwards, then one that averages
for micro in range(3):
    x = torch.tensor(data.standard_normal((4, 3)).astype(np.float32))
    model.use_sometimes = micro == 0 and rank == 0
    if micro < 2:
        with ddp.no_sync():
            (ddp(x) ** 2).sum().backward()
    else:
        (ddp(x) ** 2).sum().backward()
saved["accumulated.no_grad"] = np.array(
    sorted(n for n, p in model.named_parameters() if p.grad is None))
for n, p in model.named_parameters():
    if p.grad is not None:
        saved[f"accumulated.grad.{n}"] = p.grad.numpy().copy()
opt.step()
ddp.eval()
with torch.no_grad():  # follows a training forward: rank 0's running statistics everywhere
    saved["eval"] = ddp(torch.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)))
saved["eval"] = saved["eval"].numpy()
for k, v in model.state_dict().items():
    saved[f"state.{k}"] = v.numpy().copy()
np.savez(f"{prefix}.rank{rank}.npz", **saved)
if library == "torch":  # gloo's threads can abort the interpreter's exit ("terminate called
    dist.barrier()      # without an active exception", seen once in CI): leave at once,
    comm.Barrier()      # together, with the results written
    os._exit(0)
dist.destroy_process_group()
