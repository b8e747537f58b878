"""A data-parallel training script written the way PyTorch's DDP tutorial writes one, with its
imports changed (tests/test_distributed_mpi.py runs it under ``mpiexec -n 2``).

It uses PyTorch's import paths (``nn.parallel``, ``utils.data.distributed``), ``ReduceOp``,
``device_ids``, a sampler with ``set_epoch``, and saves from rank 0; it prints each rank's
parameter digest, and the test compares them.
"""

import hashlib
import sys

import numpy as np

import tinytrain as torch
import tinytrain.distributed as dist
import tinytrain.nn as nn
import tinytrain.nn.functional as F
from tinytrain.nn.parallel import DistributedDataParallel as DDP
from tinytrain.utils.data import DataLoader, TensorDataset
from tinytrain.utils.data.distributed import DistributedSampler

dist.init_process_group(backend="mpi")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
try:
    DDP(model, device_ids=[0])
except ValueError as e:
    print(f"rank {rank}: device_ids refused on the CPU: {e}")
ddp = DDP(model, device_ids=None)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)

torch.manual_seed(0)  # the same data on every rank; the sampler shards it
x = torch.randn(256, 10)
y = (x[:, 0] > 0).long()
dataset = TensorDataset(x, y)
sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=16, sampler=sampler)
for epoch in range(4):
    sampler.set_epoch(epoch)
    total = torch.zeros(2)
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(xb), yb)
        loss.backward()
        optimizer.step()
        total += torch.tensor([loss.item() * len(yb), len(yb)])
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"epoch {epoch}: mean loss {(total[0] / total[1]).item():.4f} over "
              f"{int(total[1].item())} samples")
if rank == 0:
    torch.save(ddp.module.state_dict(), sys.argv[1])
dist.barrier()
digest = hashlib.sha256(b"".join(np.ascontiguousarray(p.detach().numpy()).tobytes()
                                 for p in model.parameters())).hexdigest()[:16]
print(f"rank {rank}: parameters {digest}")
dist.destroy_process_group()
