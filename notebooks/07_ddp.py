# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 7 — Data parallelism across processes
#
# One process trains on one batch at a time. With two processes — two CPU core groups, or two
# GPUs — each can take half of a bigger batch, and if they *average their gradients* before
# every step they compute exactly what one process would on the whole batch, in about half
# the time. That is data parallelism, and `DistributedDataParallel` (DDP) is the wrapper that
# does the averaging, overlapped with backward so that it costs little.
#
# It is also where a training run can go wrong *silently*: each process runs happily on its
# own, and if the averaging misses one gradient the processes drift apart without a single
# error. InfiniTrain hit exactly that. This chapter builds the idea, measures it, and shows the
# bugs being caught.
#
# **What you will build / learn in this chapter**
#
# 1. Why data parallelism is **exact** (the gradient of the mean over 2B samples is the mean of
#    two shard gradients), measured; and where it stops being exact.
# 2. **Processes, ranks and the rendezvous**: `mpiexec`, and what MPI and NCCL do at start-up;
#    **broadcast before wrap**.
# 3. **Ring all-reduce**, simulated over R ranks in NumPy, with its bytes-moved and
#    latency-bandwidth cost.
# 4. From one all-reduce per parameter, to one flat buffer, to **buckets** filled by chapter 2's
#    post-accumulate hooks in reverse order, with a timeline of communication overlapping
#    backward.
# 5. Gradients as **bucket views**, and InfiniTrain's `zero_grad`-after-forward bug,
#    reproduced (ranks diverge) and caught (DDP raises).
# 6. Other classic bugs: calling `model.forward`, a missing `set_epoch`, averaging per-rank
#    accuracies, saving on every rank.
# 7. A **real two-process run** through `mpiexec`, checked against one process with twice the
#    batch, and an honest timing on this machine's cores.
#
# Four exercises (7.1-7.4) ask you to write the central pieces; each is followed by a cell that
# checks your function against the package or an exact computation. The package modules this
# chapter explains are in `tinytrain/distributed/`.

# %%
# %matplotlib inline
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import figures
import tinytrain as tt
import tinytrain.distributed as dist
import tinytrain.nn.functional as F
from tinytrain.data import DataLoader, DistributedSampler, MNISTMini
from tinytrain.distributed.ddp import assign_buckets as package_assign_buckets
from tinytrain.models import build_model

np.set_printoptions(precision=4, suppress=True)
ROOT = Path(tt.__file__).resolve().parent.parent  # the repository (for the worker processes)
train_set, test_set = MNISTMini(train=True), MNISTMini(train=False)

# %% [markdown]
# ## 1. Why data parallelism is exact
#
# The loss of a batch is the **mean** of the per-sample losses, and a gradient is linear: the
# gradient of a mean is the mean of the gradients. Split a batch of 2B samples into two shards
# of B, and
#
# $$\nabla \frac{1}{2B}\sum_{i=1}^{2B} \ell_i = \frac{1}{2}\Big(\nabla \frac{1}{B}\sum_{i=1}^{B}
# \ell_i + \nabla \frac{1}{B}\sum_{i=B+1}^{2B} \ell_i\Big).$$
#
# So two processes that each compute the mean-loss gradient of *their* shard, and then average
# the two gradients, hold exactly the gradient of the whole batch. Let us check it with the
# `mlp` in float64, on 64 real digits split in two.

# %%
x, y = next(iter(DataLoader(train_set, batch_size=64)))
x = x.to(dtype=tt.float64)
tt.manual_seed(0)
net = build_model("mlp").to(dtype=tt.float64)


def gradients(model, x, y):
    """The gradient of the mean cross-entropy over (x, y), one array per parameter."""
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


whole = gradients(net, x, y)
halves = [gradients(net, x[:32], y[:32]), gradients(net, x[32:], y[32:])]
averaged = [(a + b) / 2 for a, b in zip(*halves)]
error = max(np.abs(w - a).max() for w, a in zip(whole, averaged))
print(f"largest difference, whole batch vs the average of two halves: {error:.1e}")
assert error < 1e-15

# %% [markdown]
# The difference is float64 rounding (the two sides add the same numbers in another order).
#
# **Where it stops being exact.**
#
# * **Uneven shards.** If one rank has 40 samples and the other 24, the plain average of the
#   two shard gradients weights each of the 24 samples more than each of the 40: it is no
#   longer the whole batch's gradient. DDP's average is plain (every rank counts the same),
#   which is why `DistributedSampler` gives every rank the *same number* of samples (padding
#   with a few repeats, or dropping the tail). Exercise 7.1 makes it exact anyway.
# * **Randomness inside the model.** Dropout draws a mask per sample. One process with batch
#   2B draws 2B masks from one generator; two ranks draw B each from their own generators. Both
#   are valid, but they are different runs, and if the ranks were seeded alike their masks
#   would be *identical*, which correlates the noise:

# %%
ones = tt.ones(2, 8)
masks = []
for _rank in range(2):  # two ranks that both called tt.manual_seed(0)
    tt.manual_seed(0)
    masks.append((F.dropout(ones, 0.5, training=True).numpy() > 0).astype(int))
print("rank 0's mask:\n", masks[0], "\nrank 1's mask:\n", masks[1])
assert np.array_equal(masks[0], masks[1])

# %% [markdown]
# So the training command reseeds every rank but rank 0 from `(seed, rank)` after the model is
# built (`reseed_for_rank` in [tinytrain/train.py](../tinytrain/train.py)), and saves every
# rank's generator in its checkpoints, so that a resumed run is bit-exact.

# %% [markdown]
# ### Exercise 7.1 — combine shard gradients exactly
#
# Write `combine_shard_gradients(grads, sizes)`: `grads[k]` is the gradient of the **mean**
# loss over shard `k` (all of the same shape), `sizes[k]` the number of samples in that shard.
# Return the gradient of the mean loss over all the samples together. (Hint: undo each mean,
# add, divide once.)

# %%
def combine_shard_gradients(grads, sizes):
    """The whole batch's mean-loss gradient from per-shard mean-loss gradients.

    grads: list of arrays, all of one shape; sizes: list of positive ints, one per shard.
    """
    ### BEGIN SOLUTION
    total = sum(sizes)
    return sum(g * (n / total) for g, n in zip(grads, sizes))
    ### END SOLUTION


# %% tags=["checker"]
for cuts in ([40], [10, 30], [1, 2, 60], [32]):
    bounds = [0, *cuts, 64]
    shards = [gradients(net, x[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    sizes = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
    for i, w in enumerate(whole):
        given = [s[i].copy() for s in shards]
        mine = combine_shard_gradients(given, list(sizes))
        assert all(np.array_equal(g, s[i]) for g, s in zip(given, shards)), (
            "combine_shard_gradients changed its input arrays; compute into new ones")
        where = f"shards of {sizes} samples, parameter {i}"
        assert mine.shape == w.shape, f"{where}: shape {mine.shape}, expected {w.shape}"
        np.testing.assert_allclose(mine, w, rtol=0, atol=1e-14,
                                   err_msg=f"{where}: not the whole batch's gradient")
    plain = [np.mean([s[i] for s in shards], axis=0) for i in range(len(whole))]
    plain_error = max(np.abs(p - w).max() for p, w in zip(plain, whole))
    print(f"shards {sizes}: plain average off by {plain_error:.1e}; weighted: exact")
print("Exercise 7.1: combine_shard_gradients matches the whole batch's gradient on 4 ways of "
      "cutting 64 samples into shards")

# %% [markdown]
# ## 2. Processes, ranks and the rendezvous
#
# tinytrain does not start processes: MPI does. `mpiexec -n 2 python train.py` starts two
# copies of the same program; each learns its **rank** (0 or 1) and the **world size** (2)
# from the environment that `mpiexec` gives it, and `MPI_Init` connects them: that meeting is
# the **rendezvous**. On several machines the command is the same with a host file
# (`mpiexec -n 8 -f hosts.txt ...`), and each process also has a **local rank**, its index
# among the processes of its own machine, which picks its GPU.
# `python -m tinytrain.distributed.launch --nproc_per_node 2 train.py` runs the same mpiexec
# for you and takes `torchrun`'s options; under either, importing `tinytrain.distributed`
# sets torchrun's `RANK`, `LOCAL_RANK`, `WORLD_SIZE` and `LOCAL_WORLD_SIZE`, so a script
# written for torchrun can read `int(os.environ["LOCAL_RANK"])` before
# `init_process_group`. (`torchrun` itself and `mp.spawn` start processes that MPI does not
# connect: `init_process_group` refuses them and says so.)
#
# `tinytrain.distributed.init_process_group(backend)` joins that world:
#
# * `"mpi"` moves NumPy arrays between the processes through MPI (shared memory on one
#   machine, the network between machines);
# * `"nccl"` moves CuPy arrays between GPUs through NCCL. NCCL needs its own rendezvous: rank 0
#   asks NCCL for a *unique id*, MPI broadcasts those 128 bytes to every rank, and every rank
#   joins the NCCL communicator with it, on the GPU of its local rank.
#
# This notebook is one process. Started alone, a program is a world of one:

# %%
from tinytrain.distributed.launch import find_mpiexec, launched_world_size

try:
    MPIEXEC = find_mpiexec() if dist.is_available() else None
except FileNotFoundError:
    MPIEXEC = None
print("processes started by a launcher:", launched_world_size())
print("mpi4py:", "yes" if dist.is_available() else "no (pip install mpi4py mpich)",
      "| mpiexec:", MPIEXEC or "none: the runs through mpiexec below are skipped")
assert launched_world_size() == 1

# %% [markdown]
# With `mpiexec` we can start a real world of two and ask each process who it is:

# %%
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def mpirun(n, *args, timeout=180):
    """Run `python ARGS` as n MPI processes; returns the completed process."""
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=ROOT)


HELLO = ("import tinytrain.distributed as dist; g = dist.init_process_group('mpi'); "
         "print(f'rank {g.rank} of {g.world_size}, local rank {g.local_rank}', flush=True)")
if MPIEXEC:
    r = mpirun(2, "-c", HELLO)
    print(r.stdout)
    assert r.returncode == 0 and "rank 0 of 2" in r.stdout and "rank 1 of 2" in r.stdout
else:
    print("skipped: no mpiexec")

# %% [markdown]
# The two lines may come in either order, or even run together on one line (MPICH's
# `mpiexec` passes on each process's output as it arrives, not line by line): the processes
# run independently and only meet in *collective* operations, which every rank must call, in
# the same order, with arrays of the same shape. The two DDP needs:
#
# * `all_reduce(t, op)`: every rank ends with the element-wise sum (or average, max, min) of
#   every rank's `t`, in place;
# * `broadcast(t, src)`: every rank ends with rank `src`'s `t`.
#
# (`tinytrain.distributed` also has PyTorch's other collectives, `reduce`, `all_gather`,
# `gather`, `scatter`, `reduce_scatter`, `all_to_all` and the object versions, for gathering
# metrics and predictions, and its point-to-point calls, `send`/`recv` and their async
# `isend`/`irecv`; DDP itself needs only these two.)
#
# For the rest of the chapter this notebook joins a world of one (MPI works without `mpiexec`
# for a single process), so that the real `DistributedDataParallel` runs here, in-process;
# without mpi4py those cells are skipped and the simulations still teach the idea.

# %%
GROUP = dist.init_process_group("mpi") if dist.is_available() else None
if GROUP:
    t = tt.tensor([1.0, 2.0, 3.0])
    dist.all_reduce(t, "avg")  # the average over a world of one: itself
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}; all_reduce(avg) ->", t.numpy())

# %% [markdown]
# ### Broadcast before wrap
#
# Averaged gradients keep ranks identical only if they *start* identical. Two processes that
# build the same model draw their initial weights independently; unless every rank calls
# `manual_seed` with the same seed (easy to forget, and not enough once ranks reseed for
# dropout), they start apart and stay apart. So DDP, when it wraps the model, broadcasts rank
# 0's parameters and buffers to every rank. Simulated with two "ranks" in this process:

# %%
ranks = []
for seed in (1, 2):  # what two processes without a common seed would build
    tt.manual_seed(seed)
    ranks.append(build_model("mlp"))
before = np.abs(ranks[0].fc1.weight.numpy() - ranks[1].fc1.weight.numpy()).max()
for p0, p1 in zip(ranks[0].parameters(), ranks[1].parameters()):
    p1.data[...] = p0.data  # broadcast(p, src=0), as DistributedDataParallel does on wrapping
after = max(np.abs(p0.numpy() - p1.numpy()).max()
            for p0, p1 in zip(ranks[0].parameters(), ranks[1].parameters()))
print(f"fc1.weight differs by up to {before:.3f} before the broadcast, {after} after")
assert before > 0 and after == 0

# %% [markdown]
# Parameters then stay identical by themselves (every rank applies the same averaged
# gradient), but *buffers* do not: BatchNorm's running mean and variance are updated in
# forward from each rank's own batch. So, as in PyTorch (`forward_sync_buffers`, on by
# default; its older name `broadcast_buffers`, deprecated in PyTorch 2.13, is accepted too),
# the wrapper broadcasts rank 0's buffers again before the forward that follows a training
# step (and before the first one): every training step starts from rank 0's statistics, and
# an evaluation right after training uses them on every rank.

# %% [markdown]
# ## 3. Ring all-reduce
#
# How do R processes add their arrays of N numbers so that every one gets the sum? The
# obvious way sends everything to rank 0, which adds and sends the sum back: rank 0's link then
# carries 2(R-1)N numbers, and the others wait for it. The **ring** algorithm (what NCCL and
# MPI use for large arrays) keeps every link equally busy. Each array is cut into R chunks and
# the ranks form a ring, each sending only to its right-hand neighbour:
#
# 1. **Reduce-scatter**, R-1 steps: at step s, rank r sends chunk `(r - s) mod R` to rank r+1,
#    which *adds* it to its own copy of that chunk. After R-1 steps, rank r holds the complete
#    sum of chunk `(r + 1) mod R`.
# 2. **All-gather**, R-1 steps: at step s, rank r sends chunk `(r + 1 - s) mod R`, now complete,
#    to rank r+1, which *copies* it. After R-1 more steps, every rank has every summed chunk.
#
# Every rank sends 2(R-1) messages of N/R numbers: about 2N in all, **whatever R is**.

# %%
fig = figures.draw_ring_schedule(4)

# %% [markdown]
# ### Exercise 7.2 — a ring all-reduce in NumPy
#
# Write `ring_all_reduce(arrays)`: `arrays` holds one 1-d float array of length N per rank
# (R of them). Simulate the two phases above, with `np.array_split(a, R)` for the chunks (N
# need not be a multiple of R, and may be smaller than R). Do not modify the inputs. Return
# `(results, sent)`: the R result arrays (each the element-wise sum) and, per rank, how many
# numbers it sent.

# %%
def ring_all_reduce(arrays):
    """Sum R 1-d arrays with the ring algorithm; returns (results, numbers sent per rank)."""
    ### BEGIN SOLUTION
    R = len(arrays)
    chunks = [[c.copy() for c in np.array_split(np.asarray(a, dtype=np.float64), R)]
              for a in arrays]
    sent = [0] * R
    for s in range(R - 1):  # reduce-scatter: add the neighbour's chunk
        outgoing = [(r, (r - s) % R, chunks[r][(r - s) % R].copy()) for r in range(R)]
        for r, k, data in outgoing:
            chunks[(r + 1) % R][k] += data
            sent[r] += data.size
    for s in range(R - 1):  # all-gather: copy the neighbour's complete chunk
        outgoing = [(r, (r + 1 - s) % R, chunks[r][(r + 1 - s) % R].copy()) for r in range(R)]
        for r, k, data in outgoing:
            chunks[(r + 1) % R][k] = data
            sent[r] += data.size
    return [np.concatenate(c) for c in chunks], sent
    ### END SOLUTION


# %% tags=["checker"]
rng = np.random.default_rng(7)
for R, N in [(1, 5), (2, 8), (3, 10), (4, 3), (5, 1000), (6, 17)]:
    arrays = [rng.standard_normal(N) for _ in range(R)]
    copies = [a.copy() for a in arrays]
    results, sent = ring_all_reduce(arrays)
    assert len(results) == R and all(np.array_equal(a, c) for a, c in zip(arrays, copies)), \
        "the inputs must not change"
    where = f"{R} ranks, {N} elements each"
    for rank, res in enumerate(results):
        np.testing.assert_allclose(res, np.sum(arrays, axis=0), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{where}: rank {rank} does not hold the sum")
        assert np.array_equal(res, results[0]), f"{where}: every rank must hold the same bits"
    # every chunk travels R - 1 times in each phase
    assert sum(sent) == 2 * (R - 1) * N, (
        f"{where}: sent {sent} elements per rank, {sum(sent)} in all; expected "
        f"2 * (R - 1) * N = {2 * (R - 1) * N} in all (count elements, not messages)")
    # at step s, rank r sends chunk (r - s) % R, then in the all-gather (r + 1 - s) % R
    size = [len(c) for c in np.array_split(arrays[0], R)]
    expected = [sum(size[(r - s) % R] + size[(r + 1 - s) % R] for s in range(R - 1))
                for r in range(R)]
    assert len(sent) == R, f"{where}: sent has {len(sent)} entries, expected one per rank"
    for rank, (got, want) in enumerate(zip(sent, expected)):
        assert got == want, (
            f"{where}: rank {rank} sent {got} elements, expected {want} (per rank: {list(sent)}, "
            f"expected {expected}; count each message on the rank that sends it)")
print("Exercise 7.2: ring_all_reduce matches np.sum on every rank, and the elements each rank "
      "sends match its chunks (2(R-1)N in all), for 1 to 6 ranks")

# %% [markdown]
# Why is every rank's result *bit-identical*, although floating-point addition is not
# associative? Each chunk is summed once, on one rank, in one order, and then *copied* to the
# others. That matters: DDP keeps ranks identical only because every rank applies the
# same bits.
#
# **Cost.** A message of n bytes takes about α + nβ: a latency α (start-up) plus n times the
# inverse bandwidth β of one link. For an all-reduce of N bytes over R ranks:
#
# | algorithm | messages in a row | bytes through the busiest link | time |
# | --- | ---: | ---: | --- |
# | to rank 0 and back | 2(R-1) | 2(R-1)N | 2(R-1)α + 2(R-1)Nβ |
# | ring | 2(R-1) | 2(R-1)N/R | 2(R-1)α + 2(R-1)/R · Nβ |
#
# The ring's bandwidth term stays below 2Nβ however many ranks there are; its latency term
# grows with R, which is why small arrays use other algorithms (trees) and why DDP groups many
# small gradients into a few big messages (next section). For our `convnet`'s gradients
# (their size is printed below) on links of 25 GB/s with α = 5 µs:

# %%
weights = [p.numpy() for p in build_model("convnet").parameters()]  # a gradient has its shape
N = sum(w.nbytes for w in weights)   # bytes of convnet's gradients
print(f"convnet's gradients: {N / 1e3:.0f} KB ({sum(w.size for w in weights):,} "
      f"{weights[0].dtype} numbers)")
alpha, beta = 5e-6, 1 / 25e9         # 5 us per message, 25 GB/s per link
Rs = [2, 4, 8, 16, 32]
latency = [1e6 * 2 * (R - 1) * alpha for R in Rs]
ring_bw = [1e6 * 2 * (R - 1) / R * N * beta for R in Rs]
naive_bw = [1e6 * 2 * (R - 1) * N * beta for R in Rs]
fig = figures.draw_allreduce_cost(Rs, {
    "to rank 0 and back": [a + b for a, b in zip(latency, naive_bw)],
    "ring": [a + b for a, b in zip(latency, ring_bw)],
    "ring, bandwidth term only": ring_bw}, "time (µs)",
    f"all-reduce of {N / 1e3:.0f} KB: α + nβ model")
for R, lat, rb, nb in zip(Rs, latency, ring_bw, naive_bw):
    print(f"R={R:2d}: ring {lat + rb:5.0f} µs ({rb:3.0f} of them bandwidth) | "
          f"to rank 0 and back {lat + nb:5.0f} µs")
assert all(b < 1e6 * 2 * N * beta for b in ring_bw) and naive_bw[-1] > 10 * naive_bw[0]

# %% [markdown]
# ## 4. From one all-reduce per parameter to buckets
#
# DDP must all-reduce every parameter's gradient once per step. Three ways to do it:
#
# 1. **One all-reduce per parameter**, as soon as that gradient is ready. Simple, but a model
#    has hundreds of parameters in big networks, and each all-reduce pays the latency α (and a
#    kernel launch on a GPU).
# 2. **One flat buffer**: copy all gradients into one array and reduce it once, after
#    backward. One latency, but nothing is communicated while backward computes, and the
#    whole transfer is added to the step.
# 3. **Buckets**: a few flat buffers, each reduced as soon as all its gradients are ready,
#    while backward computes the rest. Since backward produces gradients roughly from the
#    *last* layer to the first, buckets take the parameters in **reverse registration order**.
#
# Chapter 2's **post-accumulate-grad hooks** say when a gradient is ready: the engine calls
# them right after adding into a leaf's `.grad`. Let us record, for one backward of `convnet`
# at batch 64, when each gradient arrives:

# %%
tt.manual_seed(0)
convnet = build_model("convnet")
xb, yb = next(iter(DataLoader(train_set, batch_size=64)))
ready = {}
for name, p in convnet.named_parameters():
    p.register_post_accumulate_grad_hook(
        lambda p, name=name: ready.setdefault(name, time.perf_counter()))
F.cross_entropy(convnet(xb), yb).backward()  # a first pass warms up the kernels
convnet.zero_grad()
ready.clear()
loss = F.cross_entropy(convnet(xb), yb)
t0 = time.perf_counter()
loss.backward()
t_end = 1e3 * (time.perf_counter() - t0)
ready = {name: 1e3 * (t - t0) for name, t in ready.items()}
names = [n for n, _ in convnet.named_parameters()]
print("registration order:", names)
print("ready order:       ", list(ready))
print(f"backward took {t_end:.1f} ms on this CPU")
assert list(ready)[0].startswith("fc2") and list(ready)[-1].startswith("conv1")

# %% [markdown]
# Gradients indeed arrive from the last layer to the first. Here are `convnet`'s buckets, with
# caps scaled down to its gradients (less than 1 MiB): the classifier's, ready first, then the
# convolutions'.

# %%
sizes = {n: p.nbytes for n, p in convnet.named_parameters()}
FIRST_CAP, CAP = int(0.05 * 2**20), int(0.25 * 2**20)  # small caps: convnet's N is < 1 MiB
layout = package_assign_buckets([sizes[n] for n in names], FIRST_CAP, CAP)  # reverse order
buckets = [[names[i] for i in b] for b in layout]
print("buckets:", buckets)
assert buckets[0][-1] == "fc1.weight" and buckets[-1][-1] == "conv1.weight"

# %% [markdown]
# Which strategy wins depends on three durations: the backward pass, the latency of all the
# messages, and the transfer of all the bytes. On this CPU `convnet`'s backward takes tens of
# milliseconds (measured above) and has eight gradients to send: eight latencies of a few tens
# of microseconds hide behind it however they are sent. Buckets matter when backward is fast
# and gradients are many: a deep model on a GPU. So we simulate one with the α + nβ model: 24
# blocks of equal cost, each a 256x256 float32 weight and its bias (48 gradients, 6.3 MB), a
# backward of 2 ms in which block b's gradients are ready once the blocks after it are done,
# and two machines linked at 100 Gbit/s with α = 25 µs per all-reduce (a NCCL call: its launch
# and its handshake). An all-reduce starts when its gradients are ready and the link is free.
# Every time below is computed by the model, none is measured, so the numbers are the same on
# every machine.

# %%
BLOCKS, T_BWD = 24, 2.0                   # blocks; the backward pass in ms
alpha_link, beta_link = 25e-6, 8 / 100e9  # 25 us per all-reduce, 100 Gbit/s
deep = {}                                 # gradient -> (ready ms, bytes), registration order
for b in range(BLOCKS):
    ready_at = T_BWD * (BLOCKS - b) / BLOCKS  # the last block is done first
    deep[f"{b}.weight"], deep[f"{b}.bias"] = (ready_at, 256 * 256 * 4), (ready_at, 256 * 4)
deep_names = list(deep)


def link_schedule(messages):
    """[(ready ms, bytes)] in launch order -> [(start, end)] ms on one link (2 ranks: the ring
    moves N bytes per direction)."""
    busy, out = 0.0, []
    for t, n in messages:
        start = max(t, busy)
        busy = start + 1e3 * (2 * alpha_link + n * beta_link)
        out.append((start, busy))
    return out


def bucket_message(bucket):
    """(ready ms, bytes) of a bucket of gradient indices: ready when its last gradient is."""
    return (max(deep[deep_names[i]][0] for i in bucket),
            sum(deep[deep_names[i]][1] for i in bucket))


lanes = {"per parameter": link_schedule([deep[n] for n in reversed(deep_names)]),
         "one flat buffer": link_schedule([(T_BWD, sum(n for _, n in deep.values()))]),
         "buckets": link_schedule([bucket_message(b) for b in package_assign_buckets(
             [n for _, n in deep.values()], 2**18, 2**20)])}  # caps 256 KiB, then 1 MiB
exposed = {label: lane[-1][1] - T_BWD for label, lane in lanes.items()}
for label, lane in lanes.items():
    print(f"{label:16s} {len(lane):2d} all-reduces, {1e3 * len(lane) * 2 * alpha_link:4.2f} ms "
          f"of latency; all gradients averaged {exposed[label]:.2f} ms after backward")
fig = figures.draw_overlap_timeline(
    (0.0, T_BWD), {f"block {b}": deep[f"{b}.weight"][0] for b in range(BLOCKS)}, lanes,
    label_every=4)
assert 1e3 * 2 * BLOCKS * 2 * alpha_link > T_BWD     # per parameter: more latency than backward
assert lanes["one flat buffer"][0][0] == T_BWD       # the flat buffer waits for all of backward
assert exposed["buckets"] < exposed["one flat buffer"] < exposed["per parameter"]
assert exposed["buckets"] < 0.25 * exposed["one flat buffer"]  # buckets hide most of it

# %% [markdown]
# Per parameter, the 48 all-reduces pay 2.4 ms of latency against a 2 ms backward: the link
# falls behind and the last gradient is averaged about 1 ms after backward. The flat buffer
# pays one latency but cannot start before backward ends, and then sends all 6.3 MB. The
# buckets send seven messages, each as soon as its blocks are done, while backward computes
# the rest; only the last bucket (the first three blocks, ready last) is exposed, about a fifth
# of the flat buffer's wait. A slower link makes the bandwidth term grow for all three (try
# `beta_link = 8 / 10e9`); a backward much longer than all the messages, as `convnet`'s on this
# CPU, hides the per-parameter and bucketed messages alike, and only the flat buffer's transfer
# shows.
#
# PyTorch's rule, which tinytrain follows: the **first** bucket is small (1 MiB) so that
# communication starts early; the others are capped at `bucket_cap_mb` (25 MiB); a bucket is
# closed as soon as it reaches its cap, so one big parameter can exceed it, alone.

# %% [markdown]
# ### Exercise 7.3 — bucket assignment
#
# Write `assign_buckets(nbytes, first_cap, cap)`: `nbytes[i]` is the size of parameter `i`
# in registration order. Take the parameters in **reverse** order; add each to the current
# bucket; close the bucket once it holds **at least** its cap (`first_cap` for the first
# bucket, `cap` for every later one). Return the buckets as lists of parameter indices.

# %%
def assign_buckets(nbytes, first_cap, cap):
    """Group parameter indices into buckets, in reverse order, closed at their caps."""
    ### BEGIN SOLUTION
    buckets, current, size = [], [], 0
    for i in reversed(range(len(nbytes))):
        current.append(i)
        size += nbytes[i]
        if size >= (cap if buckets else first_cap):
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets
    ### END SOLUTION


# %% tags=["checker"]
rng = np.random.default_rng(3)
cases = [([10, 20, 30], 25, 25), ([100], 1, 1), ([1, 1, 1, 1], 100, 100),
         ([10, 20, 30], 30, 30),                            # a bucket that reaches its cap exactly
         ([sizes[n] for n in names], 2**20, 25 * 2**20), ([sizes[n] for n in names], 1000, 5000)]
cases += [(list(rng.integers(1, 5000, rng.integers(1, 30))), int(rng.integers(1, 8000)),
           int(rng.integers(1, 20000))) for _ in range(200)]
for nbytes, first_cap, cap in cases:
    got = assign_buckets(nbytes, first_cap, cap)
    expected = package_assign_buckets(nbytes, first_cap, cap)
    assert got == expected, (f"nbytes={nbytes}, first_cap={first_cap}, cap={cap}: got {got}, "
                             f"expected {expected}")
print(f"Exercise 7.3: assign_buckets matches tinytrain.distributed.ddp.assign_buckets on "
      f"{len(cases)} cases (convnet's gradients and random sizes and caps)")

# %% [markdown]
# ### The real thing: gradients as bucket views
#
# `DistributedDataParallel(model)` does all of the above: it broadcasts rank 0's weights,
# assigns the buckets, allocates one flat buffer per bucket and, in each forward that records
# a graph, **binds every parameter's `.grad` to a view of its bucket** (until then `.grad`
# stays `None`, as in PyTorch). The engine's `AccumulateGrad` adds each
# new gradient *in place* into an existing `.grad` (chapter 2), so backward writes straight into
# the buckets, with no copy. A hook per parameter counts the ready gradients; a full bucket's
# all-reduce (`"avg"`) starts at once, asynchronously; a callback that the engine runs at the
# end of backward (`tinytrain.autograd.queue_callback`) waits for them all. Here, in our world
# of one, with small caps to get several buckets:

# %%
if GROUP:
    tt.manual_seed(0)
    ddp = dist.DistributedDataParallel(build_model("convnet"), bucket_cap_mb=CAP / 2**20,
                                       first_bucket_cap_mb=FIRST_CAP / 2**20)
    print(ddp)
    out = ddp(tt.randn(2, 1, 28, 28))  # a forward that records a graph binds the .grads
    for b in ddp.buckets:
        views = all(np.shares_memory(p.grad.numpy(), b.buffer) for p in b.params)
        print(f"bucket {b.index}: {b.nbytes / 1024:7.1f} KiB, every .grad a view of it: "
              f"{views} — {', '.join(b.names)}")
        assert views
    assert [b.names for b in ddp.buckets] == buckets
else:
    print("skipped: needs mpi4py (the real DistributedDataParallel)")

# %% [markdown]
# And the overlap, observed: we log each gradient's arrival and each all-reduce's start. The
# first bucket's all-reduce starts while backward still has the convolutions to do.

# %%
if GROUP:
    events = []
    for name, p in ddp.module.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: events.append(f"ready {name}"))
    real_all_reduce = GROUP.all_reduce

    def logged_all_reduce(array, op="sum"):
        events.append(f"ALL-REDUCE {array.nbytes / 1024:.0f} KiB starts")
        return real_all_reduce(array, op)

    GROUP.all_reduce = logged_all_reduce
    opt = tt.optim.SGD(ddp.parameters(), lr=0.01)
    opt.zero_grad()
    F.cross_entropy(ddp(xb), yb).backward()
    GROUP.all_reduce = real_all_reduce
    print("\n".join(events))
    first = next(i for i, e in enumerate(events) if e.startswith("ALL-REDUCE"))
    assert first < events.index("ready conv2.weight")  # started while backward went on

# %% [markdown]
# (The log shows the order; in it, DDP's hook runs before ours, so a bucket's start is logged
# just before the arrival of its last gradient.)
#
# ## 5. InfiniTrain's bug: `zero_grad` after forward
#
# The binding is the weak point. `zero_grad(set_to_none=True)` — the default in PyTorch and
# here — *drops* every `.grad`. Called at the start of the step, before forward, that is fine:
# DDP's forward binds the views again. Called **after forward**, between forward and backward,
# the `.grad`s are `None` when backward starts, so `AccumulateGrad` creates fresh arrays that
# are in no bucket. The buckets are averaged — but they hold zeros, and no one reads them; each
# rank steps with its *own* gradient. No error, no NaN: the ranks simply drift apart.
#
# Reproduced with two ranks simulated in this process — two replicas, one flat buffer each,
# `.grad` bound to views, and the "all-reduce" averaging the two buffers:

# %%
def simulate(bug, steps=30):
    """Two replicas of the mlp trained in lockstep; returns max |w0 - w1| after each step."""
    replicas, buffers, optimizers = [], [], []
    for _ in range(2):
        tt.manual_seed(0)  # same start (broadcast before wrap)
        m = build_model("mlp")
        buffer = np.zeros(sum(p.numel() for p in m.parameters()), np.float32)
        offset = 0
        for p in m.parameters():
            p.grad = tt.Tensor(buffer[offset:offset + p.numel()].reshape(p.shape))
            offset += p.numel()
        replicas.append(m)
        buffers.append(buffer)
        optimizers.append(tt.optim.SGD(m.parameters(), lr=0.1))
    loader = iter(DataLoader(train_set, batch_size=32, shuffle=True, seed=0))
    gaps = []
    for _ in range(steps):
        for m, opt in zip(replicas, optimizers):
            xr, yr = next(loader)  # each rank its own shard
            out = m(xr)
            if bug:
                opt.zero_grad(set_to_none=True)  # after forward!
            F.cross_entropy(out, yr).backward()
        mean = (buffers[0] + buffers[1]) / 2   # the all-reduce of the buckets
        for b in buffers:
            b[...] = mean
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=False)     # in place: views stay bound
        gaps.append(max(float(np.abs(p.numpy() - q.numpy()).max())
                        for p, q in zip(replicas[0].parameters(), replicas[1].parameters())))
    return gaps


correct, buggy = simulate(bug=False), simulate(bug=True)
plt.figure(figsize=(6, 3))
plt.plot(buggy, label="zero_grad(set_to_none=True) after forward")
plt.plot(correct, label="zero_grad before forward")
plt.gca().set(xlabel="step", ylabel="max |w rank0 - w rank1|", title="two ranks, same start")
plt.legend()
print(f"after 30 steps the replicas differ by {correct[-1]:.1e} (correct) and "
      f"{buggy[-1]:.1e} (bug)")
assert correct[-1] == 0 and buggy[-1] > 1e-3

# %% [markdown]
# The correct run stays **bit-identical**; the buggy one drifts and would keep drifting. A
# silent bug like this one must be *detected*. DDP's hook checks, for every gradient that
# arrives, that the parameter's `.grad` is still its bucket view; a fresh `.grad` raises at
# once, naming the parameter and the rank:

# %%
if GROUP:
    opt = tt.optim.SGD(ddp.parameters(), lr=0.01)
    out = ddp(xb)
    opt.zero_grad(set_to_none=True)  # the bug
    try:
        F.cross_entropy(out, yb).backward()
        raise AssertionError("the bug went unnoticed")
    except RuntimeError as exc:
        message = str(exc)
    print(message)
    assert "zero_grad(set_to_none=True) between forward and backward" in message

# %% [markdown]
# The checks beside it, in [tinytrain/distributed/ddp.py](../tinytrain/distributed/ddp.py)
# (the last in [tinytrain/distributed/process_group.py](../tinytrain/distributed/process_group.py)):
#
# * a parameter that got **no gradient** in a step leaves its bucket incomplete: at the end of
#   backward DDP raises and names it (or, with `find_unused_parameters=True`, averages it
#   with zeros when another rank has one, and leaves `.grad` unset when no rank has, as
#   PyTorch does) — never a hang;
# * ranks that built **different models** are refused when wrapping (names and shapes are
#   compared first; mismatched collectives would hang or corrupt);
# * `check_every=K` compares a digest of every parameter across ranks every K steps, and
#   catches divergence of any other cause; the training command runs this check once at the
#   end of a multi-rank run and prints "parameters bit-identical on all N ranks";
# * a rank that **leaves early** (`destroy_process_group()`, or the end of its program, which
#   calls it) sends every peer a "leaving" notice, so a peer waiting in an MPI collective
#   raises `PeerLeft`, naming the rank that left, within seconds (`LEAVE_GRACE`) instead of
#   waiting out the 30-minute timeout; and the checks that every rank makes the same call run
#   on a communicator of their own, so they are never matched with a bucket's all-reduce,
#   and compare how many collectives each rank has started: under NCCL a rank one batch
#   ahead still has its last bucket queued on the GPU, which NCCL would pair with the
#   other rank's `all_reduce` of a metric;
# * when the group is left (`destroy_process_group()`, or the end of the program), the
#   "leaving" notices carry each rank's count of collectives, and every rank compares them:
#   different counts raise `UnevenCollectives`, naming each rank's count and the likely
#   causes. A collective that one rank made and another never matched can otherwise
#   *complete*: an MPI broadcast from rank 0 returns as soon as its data is sent, so rank 0
#   goes on alone and both ranks end with exit code 0 and different weights or buffers.
#
# ## 6. Other classic bugs
#
# **Calling `model.forward(x)`** (or `ddp.module(x)`) skips DDP's forward, which is where
# the `.grad`s are bound again. After a `zero_grad(set_to_none=True)` at the start of the step,
# backward therefore finds unbound gradients — and, here, the error above instead of silent
# divergence:

# %%
if GROUP:
    opt.zero_grad(set_to_none=True)
    try:
        F.cross_entropy(ddp.module(xb), yb).backward()  # bypasses DDP's forward
        raise AssertionError("the bug went unnoticed")
    except RuntimeError as exc:
        print(str(exc)[:160], "...")

# %% [markdown]
# **Evaluating with the wrapper on rank 0 only.** `if rank == 0: ddp.eval(); ddp(x_val)`
# looks harmless, but a DDP forward of a model with buffers (BatchNorm's running statistics)
# first broadcasts rank 0's buffers to every rank, as PyTorch's does: a collective that
# rank 0 alone makes. Rank 0's send completes, rank 1 never receives, and nothing fails
# until the counts are compared when the group is left, where every rank raises
# `UnevenCollectives` and names this cause. To evaluate on one rank, call the wrapped
# model itself, `ddp.module(x_val)`, which makes no collective; or evaluate on every rank,
# each on its shard, and add the counts (below).
#
# **Forgetting `set_epoch`.** `DistributedSampler` shuffles from `(seed, epoch)`, and the
# epoch comes from the training loop, which all ranks share (each rank must draw the *same*
# permutation, or the shards overlap). Without `sampler.set_epoch(epoch)` every epoch visits
# the samples in the same order:

# %%
sampler = DistributedSampler(train_set, num_replicas=2, rank=0, shuffle=True, seed=0)
epoch0 = sampler.indices()
same = sampler.indices()          # the next epoch, set_epoch forgotten
sampler.set_epoch(1)
epoch1 = sampler.indices()
print("epoch 0:", epoch0[:8], "\nno set_epoch:", same[:8], "\nset_epoch(1):", epoch1[:8])
assert np.array_equal(epoch0, same) and not np.array_equal(epoch0, epoch1)

# %% [markdown]
# **Averaging per-rank accuracies.** Evaluation is sharded too: each rank evaluates its part of
# the test set. Shards can differ in size (1,000 digits on 3 ranks: 334, 333, 333), so the mean
# of the ranks' accuracies is not the accuracy. The right reduction adds the *counts* —
# (loss sum, correct, count) — over the ranks, with one all-reduce per evaluation, and divides
# once. Exercise 7.4.
#
# **Saving on every rank.** All ranks hold the same weights, so one file is enough; N ranks
# writing the same path at once waste N-1 writes and, without atomic writes, can leave a torn
# file. Rank 0 alone prints, plots and writes checkpoints (`Ranks.main` in
# [tinytrain/train.py](../tinytrain/train.py)); the checkpoint holds every rank's random state,
# gathered first.

# %% [markdown]
# ### Exercise 7.4 — metrics from shards
#
# Write `global_metrics(per_rank)`: `per_rank[k] = (loss_sum, correct, count)` from rank k's
# shard. Return `(accuracy, mean_loss)` over all the samples of all the shards.

# %%
def global_metrics(per_rank):
    """(accuracy, mean loss) of the whole set from per-rank (loss sum, correct, count)."""
    ### BEGIN SOLUTION
    loss_sum = sum(r[0] for r in per_rank)
    correct = sum(r[1] for r in per_rank)
    count = sum(r[2] for r in per_rank)
    return correct / count, loss_sum / count
    ### END SOLUTION


# %% tags=["checker"]
from tinytrain.data import Subset
from tinytrain.distributed.utils import shard_dataset
from tinytrain.train import evaluate

tt.manual_seed(1)
model = build_model("mlp")
opt = tt.optim.SGD(model.parameters(), lr=0.5)
for xt, yt in DataLoader(train_set, batch_size=100):
    opt.zero_grad()
    F.cross_entropy(model(xt), yt).backward()
    opt.step()
for n, world in [(1000, 3), (999, 2), (10, 4), (1000, 7)]:
    data = Subset(test_set, np.arange(n))
    whole = evaluate(model, DataLoader(data, batch_size=250))
    shards = [evaluate(model, DataLoader(shard_dataset(data, r, world), batch_size=250))
              for r in range(world)]
    acc, loss = global_metrics([(s.loss_sum, s.correct, s.total) for s in shards])
    assert np.isclose(acc, whole.correct / whole.total, rtol=0, atol=1e-12), (
        f"{n} samples on {world} ranks: accuracy {acc}, expected "
        f"{whole.correct}/{whole.total} = {whole.correct / whole.total}")
    assert abs(loss - whole.loss_sum / whole.total) < 1e-6, (
        f"{n} samples on {world} ranks: mean loss {loss}, expected the sum of the per-rank loss "
        f"sums over the total count, {whole.loss_sum / whole.total} (not the mean of the "
        f"per-rank means)")
    averaged = np.mean([s.accuracy for s in shards])
    print(f"{n} samples on {world} ranks: accuracy {100 * acc:.2f}%, mean of per-rank "
          f"accuracies {100 * averaged:.4f}%")
print("Exercise 7.4: global_metrics matches the accuracy and mean loss of the whole set on 4 "
      "(samples, ranks) splits")

# %% [markdown]
# ## 7. A real run on two processes
#
# `python -m tinytrain.distributed.demo` runs a few SGD steps of the `mlp` in float64. Under
# `mpiexec -n 2`, each rank takes its batch of B from its `DistributedSampler` shard and DDP
# averages the gradients; started alone, the same loop runs in one process without DDP. Both
# draw the epoch's order from the same seed, so 2 ranks with batch 32 see, step by step, the
# samples of one process with batch 64. If data parallelism is exact, the weights agree up to
# rounding:

# %%
work = Path(tempfile.mkdtemp())
demo = ["-m", "tinytrain.distributed.demo", "--steps", "10"]
if MPIEXEC:
    two = mpirun(2, *demo, "--batch-size", "32", "--save", str(work / "two.npz"))
    one = subprocess.run([sys.executable, *demo, "--batch-size", "64", "--save",
                          str(work / "one.npz")], capture_output=True, text=True, timeout=180,
                         env=ENV, cwd=ROOT)
    assert two.returncode == 0 and one.returncode == 0, two.stderr + one.stderr
    print([line for line in two.stdout.splitlines() if "parameters" in line])
    a, b = tt.load(work / "two.npz"), tt.load(work / "one.npz")
    gap = max(float(np.abs(a[k].numpy() - b[k].numpy()).max()) for k in a)
    print(f"2 ranks x batch 32 vs 1 process x batch 64, after 10 steps: max difference {gap:.1e}")
    # the two ranks' reports may share a line (their output is interleaved): find both
    digests = re.findall(r"parameters ([0-9a-f]+)", two.stdout)
    assert gap < 1e-9 and len(digests) == 2 and digests[0] == digests[1], digests
else:
    print("skipped: no mpiexec (pip install mpi4py mpich)")

# %% [markdown]
# Both ranks print the same digest of their parameters: after 10 steps they hold
# **bit-identical** weights, and those match the single process's to float64 rounding (the
# difference printed above).
#
# ### The training command, and an honest timing
#
# `python -m tinytrain.train --nproc 2` re-runs itself under `mpiexec` with 2 processes
# (or start it yourself: `mpiexec -n 2 python -m tinytrain.train`). `--batch-size` is **per
# rank**: the global batch is twice as big, and each rank does half as many steps per epoch.
# CPU ranks split the cores between them. One epoch of `convnet` on the mini set, one process
# against two:

# %%
def samples_per_second(*extra):
    r = subprocess.run([sys.executable, "-m", "tinytrain.train", "--dataset", "mnist-mini",
                        "--no-download", "--model", "convnet", "--epochs", "1", *extra],
                       capture_output=True, text=True, timeout=600, env=ENV, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("epoch 1/1"))
    return float(line.split("|")[-1].split()[0]), r.stdout


if MPIEXEC:
    one_rank, _ = samples_per_second()
    two_ranks, out = samples_per_second("--nproc", "2")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(out.splitlines()[0])
    print(f"{cores} cores: 1 process {one_rank:.0f} samples/s, 2 ranks {two_ranks:.0f} "
          f"samples/s: {two_ranks / one_rank:.2f}x")
    assert "parameters bit-identical on all 2 ranks" in out
else:
    print("skipped: no mpiexec")

# %% [markdown]
# Read the ratio with care. On a machine with 2 cores, one process already uses both (the
# convolution shards the batch over them, chapter 3); two ranks get one core each, and also
# pay for the gradient average and for waiting on each other. Whatever the ratio shows here,
# it is a measure of *sharing* two cores, not of adding hardware: the speed-up of data
# parallelism comes from ranks that bring their own cores or their own GPU.
# `bench/ddp.py` measures that properly — throughput at the same per-rank batch on 1 and N
# ranks, and the share of each step spent waiting in `wait()` — on CPU ranks with MPI and on
# GPUs with NCCL.
#
# ### GPUs: NCCL, one per rank
#
# With `--device cuda` each rank takes the GPU of its local rank and the gradients move
# through NCCL. The training step's kernels run on the current CUDA stream; DDP's all-reduces
# run on a *side stream* so that they overlap backward. Events order the two: before an
# all-reduce, the side stream waits for an event recorded on the compute stream (the gradients
# are written); after it, `wait()` makes the compute stream wait for an event recorded on the
# side stream (the optimizer reads the average). The host never blocks.

# %%
print("GPU:", "yes" if tt.cuda_is_available() else
      "none here: `python -m tinytrain.train --nproc 2 --device cuda` runs on a machine with "
      "2 GPUs")

# %%
if GROUP:
    dist.destroy_process_group()

# %% [markdown]
# ## Summary
#
# * Data parallelism is exact because the gradient of a mean is the mean of the shard
#   gradients — for shards of equal size; dropout makes a parallel run a different (valid) run.
# * `mpiexec` starts the processes; MPI's rendezvous connects them; NCCL's unique id travels
#   over MPI. DDP broadcasts rank 0's weights when it wraps the model.
# * A ring all-reduce moves about 2N bytes per rank whatever the number of ranks; latency grows
#   with R, so many small gradients go into a few **buckets**, in reverse order, each reduced as
#   soon as backward has filled it, overlapping the rest of backward.
# * `.grad`s are views of the buckets. Unbinding them (`zero_grad(set_to_none=True)` after
#   forward, `model.forward`) would make ranks diverge silently; DDP raises instead. Unused
#   parameters, different models and diverged weights are errors too, never hangs; a rank
#   that leaves early makes a peer waiting in an MPI collective raise `PeerLeft`, naming it,
#   within seconds, not after the 30-minute timeout; ranks that made different numbers of
#   collectives (a wrapper's forward on rank 0 only) are named when the group is left.
# * Evaluation reduces counts, not accuracies; rank 0 alone writes.
#
# The package modules of this chapter:
# [tinytrain/distributed/process_group.py](../tinytrain/distributed/process_group.py) (MPI
# collectives, "leaving" notices and `PeerLeft`, the checks' own communicator),
# [tinytrain/distributed/nccl.py](../tinytrain/distributed/nccl.py) (NCCL, side
# stream and events), [tinytrain/distributed/ddp.py](../tinytrain/distributed/ddp.py)
# (buckets, hooks, checks), [tinytrain/distributed/launch.py](../tinytrain/distributed/launch.py)
# (`mpiexec`, `--nproc`, torchrun's options),
# [tinytrain/distributed/job.py](../tinytrain/distributed/job.py) (torchrun's variables,
# aborting every rank on an error),
# [tinytrain/distributed/demo.py](../tinytrain/distributed/demo.py) (the run above), the
# engine's end-of-backward callback in
# [tinytrain/autograd/engine.py](../tinytrain/autograd/engine.py), and the multi-rank training
# command in [tinytrain/train.py](../tinytrain/train.py). `bench/ddp.py` measures the scaling.
#
# **Previous:** [Chapter 6 — MNIST](06_mnist.ipynb) · **Next:** the README's
# [Training MNIST](../README.md#training-mnist) and [Several processes: data-parallel
# training](../README.md#several-processes-data-parallel-training): the package's command
# line, on one process and on several.
