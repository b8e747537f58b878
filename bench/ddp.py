"""Benchmark: data-parallel training on 1 and N ranks, tinytrain's DDP and PyTorch's.

Every rank trains the same model (default: the default recipe's ``convnet`` with Adam) on
its own fixed batch of ``--batch-size`` samples: the per-rank batch stays the same as ranks
are added (weak scaling). With ``--strong`` the *global* batch stays ``--batch-size`` and each
of N ranks takes ``--batch-size // N`` (strong scaling). For each rank count the script starts
``mpiexec -n N`` and reports:

* throughput in samples/s over all ranks, and the step time;
* scaling: throughput on N ranks / throughput on 1 rank (ideal: N), and efficiency
  (scaling / N);
* waiting: the share of the step a rank spends blocked in ``wait()`` for the all-reduces at
  the end of backward (communication that did not overlap backward, plus waiting for
  slower ranks). On GPUs it is the time the compute stream stalls on NCCL, from CUDA events.

PyTorch's DistributedDataParallel (gloo on CPUs, NCCL on GPUs) trains the same network in the
same run, for the ratio; its waiting share is not observable from outside and is not shown.

    python bench/ddp.py                                   # CPU ranks (mpi): 1 and 2
    python bench/ddp.py --backend nccl --nproc 1 2 4 8    # GPUs, one per rank
    python bench/ddp.py --backend nccl --nproc 2 4 8 --strong --batch-size 512
    python bench/ddp.py --bucket-cap-mb 0.25 --first-bucket-cap-mb 0.05   # more buckets

CPU ranks get the same number of threads in every run, ``--threads`` (default: the cores
divided by the largest rank count), so that 1 rank and N ranks have the same resources per
rank, as one GPU per rank does. On a machine whose cores are busy with other work the
numbers measure the sharing too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _worker_tinytrain(args: argparse.Namespace) -> dict:
    import numpy as np

    import tinytrain as tt
    import tinytrain.distributed as dist
    import tinytrain.nn.functional as F
    from tinytrain.models import build_model

    g = dist.init_process_group(args.backend)
    device = "cuda" if args.backend == "nccl" else "cpu"
    tt.manual_seed(0)
    model = dist.DistributedDataParallel(
        build_model(args.model).to(device), bucket_cap_mb=args.bucket_cap_mb,
        first_bucket_cap_mb=args.first_bucket_cap_mb)
    opt = tt.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(g.rank)
    x = tt.tensor(rng.random((args.batch_size, 1, 28, 28), dtype=np.float32), device=device)
    y = tt.tensor(rng.integers(0, 10, args.batch_size), device=device)

    def sync() -> None:
        if device == "cuda":
            tt.backend.cupy_module().cuda.get_current_stream().synchronize()

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    sync()
    dist.barrier()
    model.measure_comm_wait = True
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    seconds = time.perf_counter() - t0
    waiting = model.comm_wait_seconds()
    mine = {"seconds": seconds, "waiting": waiting, "buckets": len(model.buckets)}
    everyone = g.allgather_object(mine)
    dist.destroy_process_group()
    return {"world": g.world_size, "rank": g.rank, "per_rank": everyone}


def _torch_net():
    from torch import nn

    class ConvNet(nn.Module):  # tinytrain.models.ConvNet
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 16, 5, padding=2), nn.Conv2d(16, 32, 5, padding=2)
            self.pool, self.relu, self.dropout = nn.MaxPool2d(2), nn.ReLU(), nn.Dropout(0.25)
            self.fc1, self.fc2 = nn.Linear(32 * 7 * 7, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = (x - 0.1307) / 0.3081
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            return self.fc2(self.dropout(self.relu(self.fc1(x.flatten(1)))))

    return ConvNet()


def _worker_torch(args: argparse.Namespace) -> dict:
    import torch
    import torch.distributed as tdist
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(comm.bcast(29500 + os.getpid() % 2000, root=0))
    cuda = args.backend == "nccl"
    device = torch.device(f"cuda:{local}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    tdist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        _torch_net().to(device), bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    x = torch.rand(args.batch_size, 1, 28, 28, generator=gen).to(device)
    y = torch.randint(0, 10, (args.batch_size,), generator=gen).to(device)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    everyone = comm.allgather({"seconds": seconds, "waiting": float("nan"), "buckets": 0})
    tdist.destroy_process_group()
    return {"world": world, "rank": rank, "per_rank": everyone}


def worker(args: argparse.Namespace) -> None:
    """Runs on every rank under mpiexec; rank 0 prints one JSON line."""
    out = (_worker_torch if args.framework == "torch" else _worker_tinytrain)(args)
    if out["rank"] == 0:
        print("RESULT " + json.dumps(out), flush=True)


def run(args: argparse.Namespace, framework: str, n: int) -> dict | None:
    from tinytrain.distributed.launch import mpiexec_command, rank_environment

    threads = args.threads if args.backend == "mpi" else None
    per_rank = args.batch_size // n if args.strong else args.batch_size
    forwarded = ["--backend", args.backend, "--model", args.model, "--batch-size",
                 str(per_rank), "--steps", str(args.steps), "--warmup", str(args.warmup),
                 "--bucket-cap-mb", str(args.bucket_cap_mb), "--first-bucket-cap-mb",
                 str(args.first_bucket_cap_mb)]
    cmd = mpiexec_command(n, [__file__, "--framework", framework, *forwarded])
    env = rank_environment(threads) if threads else dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        print(f"{framework} on {n} rank(s) failed (exit {r.returncode}):\n{r.stderr[-2000:]}",
              file=sys.stderr)
        return None
    res = json.loads(lines[-1][len("RESULT "):])
    slowest = max(p["seconds"] for p in res["per_rank"])
    res["step_ms"] = 1e3 * slowest / args.steps
    res["samples_s"] = n * per_rank * args.steps / slowest
    res["waiting"] = max(p["waiting"] / p["seconds"] for p in res["per_rank"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["mpi", "nccl"], default="mpi")
    ap.add_argument("--nproc", type=int, nargs="+", default=[2],
                    help="rank counts to compare with 1 rank (default: 2)")
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--batch-size", type=int, default=64,
                    help="per rank (default 64); with --strong, over all ranks")
    ap.add_argument("--strong", action="store_true",
                    help="keep the global batch fixed instead of the per-rank batch")
    ap.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--first-bucket-cap-mb", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads per rank (default: cores // the largest --nproc)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch's DDP")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per mpiexec run")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--framework", choices=["tinytrain", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.framework:
        return worker(args)

    frameworks = ["tinytrain"]
    if not args.no_torch and args.model == "convnet":
        try:
            import torch  # noqa: F401

            frameworks.append("torch")
        except ImportError:
            print("(PyTorch not installed: tinytrain only)")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    args.threads = args.threads or max(1, (cores or 1) // max(args.nproc))
    if args.strong and args.batch_size < max(args.nproc):
        sys.exit(f"--strong: --batch-size {args.batch_size} is below {max(args.nproc)} ranks")
    batch = (f"global batch {args.batch_size}" if args.strong
             else f"batch {args.batch_size} per rank")
    print(f"{args.model}, Adam, {batch}, {args.steps} timed steps, "
          f"backend {args.backend}" + (f", {args.threads} thread(s) per rank on {cores} cores"
                                       if args.backend == "mpi" else ""))
    print(f"{'framework':<10} {'ranks':>5} {'samples/s':>10} {'step ms':>8} {'scaling':>8} "
          f"{'efficiency':>10} {'waiting':>8} {'buckets':>7}")
    results: dict[str, dict[int, dict]] = {}
    failed = 0
    for fw in frameworks:
        for n in sorted({1, *args.nproc}):
            res = run(args, fw, n)
            if res is None:
                failed += 1
                continue
            results.setdefault(fw, {})[n] = res
            base = results[fw].get(1)
            scaling = res["samples_s"] / base["samples_s"] if base else float("nan")
            res["scaling"], res["efficiency"] = scaling, scaling / n
            waiting = "" if fw == "torch" else f"{100 * res['waiting']:7.1f}%"
            buckets = "" if fw == "torch" else str(res["per_rank"][0]["buckets"])
            print(f"{fw:<10} {n:5d} {res['samples_s']:10.0f} {res['step_ms']:8.2f} "
                  f"{scaling:7.2f}x {100 * res['efficiency']:9.0f}% {waiting:>8} {buckets:>7}",
                  flush=True)
    if "torch" in results:
        for n, res in results["tinytrain"].items():
            if n in results["torch"]:
                print(f"ratio tinytrain/torch on {n} rank(s): step time "
                      f"{res['step_ms'] / results['torch'][n]['step_ms']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if failed:
        sys.exit(f"{failed} run(s) failed")


if __name__ == "__main__":
    main()
