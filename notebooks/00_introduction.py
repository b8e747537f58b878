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
# # Chapter 0 — Orientation: where this course comes from, and how to take it
#
# This course builds a small deep-learning training framework, **tinytrain**, from scratch,
# in Python: tensors, automatic differentiation, a convolution on the CPU and in CUDA, a data
# pipeline, MNIST training, and training across several processes. Each chapter builds one
# part in plain, slow, visible code, checks it against PyTorch, and then shows the package's
# production version of the same part giving the same numbers, faster on real sizes. At the
# end you have written every idea of a framework that trains for real, and you can read every
# line of it.
#
# This chapter says where the course comes from, what each chapter asks of you and gives you,
# how to set up, and how the exercises work. Its one piece of code is a preview: a
# convolutional network trained in one short cell with the finished package, every line of
# which a later chapter takes apart.

# %% [markdown]
# ## 1. Where this comes from: InfiniTrain's small-model work
#
# InfiniTrain is a training framework written in C++ and CUDA. A piece of work on it, "small
# model training support", made it train the classic small models end to end. It added:
#
# * **`Conv2d`, twice**: a direct convolution on the CPU, simple enough to trust, as the
#   reference; and a CUDA path that unfolds the input into columns (*im2col*) and multiplies
#   them by the weights in one GEMM. The two cross-check each other, forward and backward.
# * a **shape-preserving DataLoader**: a batch of `[1, 28, 28]` images is `[B, 1, 28, 28]`,
#   not a flat vector that each model has to reshape;
# * **MNIST training** of two models: an MLP (`Flatten, Linear(784, 30), Sigmoid,
#   Linear(30, 10)`) and a CNN (`Conv2d(1, 16, 3), ReLU, Conv2d(16, 32, 3), ReLU, Flatten,
#   Linear(18432, 10)`);
# * **data-parallel training over several processes** (DDP): each process trains on its part
#   of the batch, and their gradients are averaged before every step.
#
# Two bugs it met are of the worst kind, the kind that crashes nothing:
#
# * The **MNIST loader's offset**: the loader converted all pixels to float32 and then cut
#   the buffer into samples, computing sample *i*'s offset with the size of a `uint8`. After
#   the conversion every pixel takes 4 bytes, so every sample but the first was read from the
#   wrong place. Sample 0 looked right, which is why a first glance missed it.
# * **`zero_grad` after forward under DDP**: DDP binds every parameter's `.grad` to a view
#   of a flat bucket, which it all-reduces during backward. `zero_grad(set_to_none=True)`
#   called *after* the forward pass throws those views away; the next backward writes fresh
#   gradients that no bucket holds, nothing is averaged, and the processes silently train
#   different models.
#
# ## 2. What this course rebuilds
#
# Every piece of that work, and every lesson it learned the hard way, is a chapter here, a
# test in `tests/`, or both:
#
# * **Tensors and backward**, underneath everything: [tensor.py](../tinytrain/tensor.py)
#   and [autograd/](../tinytrain/autograd), in chapters [1](01_tensors.ipynb) and
#   [2](02_autograd.ipynb).
# * **The CPU `Conv2d`, the reference**: a direct convolution (the windows of a few images
#   packed, one matrix product per image), checked against PyTorch:
#   [kernels/cpu/conv2d.py](../tinytrain/kernels/cpu/conv2d.py), in
#   [chapter 3](03_conv2d_cpu.ipynb).
# * **The CUDA `Conv2d`**: im2col, cuBLAS, and col2im written as a gather, cross-checked with
#   the CPU kernels over a grid of shapes: [kernels/cuda/](../tinytrain/kernels/cuda), in
#   [chapter 4](04_cuda_im2col.ipynb).
# * **The MNIST loader and its offset bug**, reproduced, and a test that pins every sample to
#   the raw file; **the shape-preserving DataLoader**, for which a ragged batch is an error:
#   [data/](../tinytrain/data), in [chapter 5](05_dataloader.ipynb).
# * **MNIST training**: InfiniTrain's `mlp` and `cnn` and a stronger `convnet` in
#   [models.py](../tinytrain/models.py); [train.py](../tinytrain/train.py), whose
#   `--preset infinitrain` reruns InfiniTrain's recipe; in [chapter 6](06_mnist.ipynb).
# * **DDP and the `zero_grad` bug**: processes over MPI or NCCL, gradient buckets, and a DDP
#   that detects the bug and raises: [distributed/](../tinytrain/distributed), in
#   [chapter 7](07_ddp.ipynb).
#
# What the course adds is the *why*: each chapter derives its piece, builds it naively first,
# then better, and checks every step against the one before and against PyTorch.

# %% [markdown]
# ## 3. The chapters
#
# Each chapter says what it needs from earlier ones. The times are estimates for reading
# every cell, running the chapter and doing its exercises. *You build* is what you write, or
# watch being written; *you use* is what the chapter takes ready-made from the package, to
# compare with or to build on.
#
# * **[Chapter 1 — Tensors](01_tensors.ipynb)**, 2 h; before it: Python, NumPy indexing and
#   shapes. *You build* a strided array (shape, strides and offset over a flat buffer) whose
#   views share memory, and broadcasting with its gradient summed back. *You use* the
#   package's `Tensor`, and `get_array_module` for NumPy or CuPy.
# * **[Chapter 2 — Autograd](02_autograd.ipynb)**, 3–4 h; before it: chapter 1, the chain
#   rule. *You build* a scalar autograd, then `Function`, `ctx` and the backward engine;
#   `Module`, `Linear`, cross-entropy, SGD and Adam; and train a small MLP with them; then
#   gradients of gradients, for Newton's method. *You use* `tinytrain.autograd` (its
#   `create_graph=True` for a Hessian-vector product), `nn` and `optim`, to compare with.
# * **[Chapter 3 — Conv2d on the CPU](03_conv2d_cpu.ipynb)**, 4 h; before it: chapters 1–2.
#   *You build* naive loops, one matrix product per kernel offset, im2col as a view, the
#   column-shift kernel (which the package's dX runs; its forward and dW pack windows
#   instead), then what blocks, packing and sharding add, the backward pass as convolutions,
#   the `Conv2d` `Function` and pooling. *You use* the package's threaded kernels, to time
#   against.
# * **[Chapter 4 — CUDA im2col](04_cuda_im2col.ipynb)**, 3 h; before it: chapter 3, reading
#   C; a GPU is optional. *You build* a CUDA kernel (a grid-stride loop) and the index maps
#   of im2col, col2im as a gather and a block reduction, checked against the package's
#   kernels. *You use* the emulator that runs CUDA C on the CPU, the
#   launcher, and cuBLAS through CuPy.
# * **[Chapter 5 — DataLoader](05_dataloader.ipynb)**, 1.5 h; before it: chapter 1 (dtypes
#   and bytes). *You build* an IDX reader, the offset bug and its fix, batching and
#   shuffling, the shape-preserving stack, a rank's shard. *You use* `tinytrain.data`'s
#   production loader.
# * **[Chapter 6 — MNIST](06_mnist.ipynb)**, 2 h; before it: chapters 2, 3 and 5. *You
#   build* the training loop, evaluation under `no_grad` on a validation split, a confusion
#   matrix, a per-layer profile, the loss curve against PyTorch's. *You use* the
#   package's models, layers and optimizers, and `python -m tinytrain.train`.
# * **[Chapter 7 — DDP](07_ddp.ipynb)**, 2.5 h; before it: chapters 2 (hooks), 5 (shards)
#   and 6 (the loop). *You build* gradients combined from shards, a ring all-reduce, bucket
#   assignment, metrics from shards. *You use* `tinytrain.distributed` over MPI (in the dev
#   extra), and `mpiexec`.
#
# Chapters 1, 2, 3, 5 and 6 run on any CPU. Chapter 4 runs its kernels' CUDA C on an emulator
# without a GPU, and on the GPU when there is one; chapter 7 starts real processes with MPI
# on the CPU, and on GPUs with NCCL when there are some. A cell that needs what this machine
# lacks says what it skips, and the rest of the chapter runs.

# %% [markdown]
# ## 4. Setting up
#
# From a clone of the repository, with Python 3.10 or newer:
#
# ```bash
# make lab      # creates .venv, installs tinytrain and the course's tools, opens JupyterLab
# make doctor   # what this machine can run, and what to install for what is missing
# ```
#
# `make lab` installs the package in *editable* mode, so a notebook's `import tinytrain` is
# the code in `tinytrain/` you can read and change. The data sets come with it: **mnist-mini**
# (5,000 training and 1,000 test digits of the real MNIST) is in the repository, so every
# chapter runs offline; the full MNIST is downloaded on first use, or read from
# `$TINYTRAIN_DATA`. A GPU (`pip install -e ".[cuda12]"`) and MPI (in the dev extra) are
# optional. The doctor's report, run from here:

# %%
# %matplotlib inline
import numpy as np

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain.doctor

status = tinytrain.doctor.main()
assert status == 0, "a required line is not OK: see its '->' for what to install"

# %% [markdown]
# ## 5. A preview: the whole game in one cell
#
# Here is where the course is going: a small convolutional network, trained for one pass
# over mnist-mini with the finished package. Read it as you would PyTorch, which it
# imitates on purpose: the names, arguments and results are PyTorch's, so what you learn here
# transfers.

# %%
import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F
from tinytrain.data import DataLoader, MNISTMini

tt.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(8 * 13 * 13, 10))
opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
losses = []
for x, y in DataLoader(MNISTMini(train=True), batch_size=64, shuffle=True, seed=0):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())

# %% [markdown]
# And how well it does on the 1,000 test digits it has never seen, evaluated without
# recording a graph (`no_grad`):

# %%
test = MNISTMini(train=False)
model.eval()
with tt.no_grad():
    predicted = np.concatenate([model(x).argmax(1).numpy()
                                for x, _ in DataLoader(test, batch_size=500)])
accuracy = (predicted == test.labels).mean()
print(f"{len(losses)} steps; loss {losses[0]:.2f} at the first, {losses[-1]:.2f} at the last")
print(f"test accuracy: {accuracy:.1%} (guessing: 10%)")
assert losses[0] > 2 and accuracy > 0.8

images, labels = test.get_batch(np.arange(8))
fig = figures.draw_first_run(losses, images[:, 0], labels, predicted[:8])

# %% [markdown]
# Every line of that cell is a chapter:
#
# * `tt.manual_seed`, and the tensors flowing through it all: **chapter 1**;
# * `loss.backward()`, `nn.Linear`, `F.cross_entropy`, `opt.step()`: **chapter 2**;
# * `nn.Conv2d` and `nn.MaxPool2d` on the CPU: **chapter 3**; on a GPU: **chapter 4**;
# * `DataLoader(MNISTMini(...), shuffle=True, seed=0)`: **chapter 5**;
# * the loop itself, evaluation, and what the model gets right and wrong: **chapter 6**;
# * the same loop on several processes at once: **chapter 7**.

# %% [markdown]
# ## 6. How the exercises work
#
# Every chapter after this one has 3 to 5 exercises. In each, you write a function the
# chapter is about (a transpose's strides, a `Function`'s backward, im2col, a rank's shard, a
# training step...), and a *checker* cell right after it compares your function with the
# package, NumPy or PyTorch, on random inputs and edge cases.
#
# * Your copy of chapter *N* is `exercises/NN_slug.ipynb` (e.g.
#   [exercises/03_conv2d_cpu.ipynb](../exercises/03_conv2d_cpu.ipynb)). There, every
#   exercise's body is `raise NotImplementedError("Exercise 3.2: ...")`.
# * Replace the stub with your code, run the cell, then the checker: it prints what it
#   checked when you are right, and an `AssertionError` says which input went wrong. The rest
#   of the chapter runs whether or not you solved an exercise: it uses the package, not your
#   answers.
# * `make check-exercises CH=03` runs your saved copy in a fresh kernel and says, per
#   exercise, passed, not done yet, or failed and why.
# * The chapters in `notebooks/` hold the reference solutions, between `### BEGIN SOLUTION`
#   and `### END SOLUTION`: look when you are stuck, or afterwards, to compare.
#
# The [README](../README.md#doing-the-exercises) has the details, including how to keep your
# answers when the course is updated.
#
# ## 7. How the course checks itself
#
# Every chapter is executed by the tests (`make test` runs each notebook under nbval), so an
# `assert` in a chapter is a check that runs in CI, and the numbers a chapter measures are
# computed in its cells (a few sizes in the text, such as a GPU's 132 multiprocessors, are
# quoted). The learner copies are run too: each checker must fail on
# its stub, and every other cell must pass. `make book` executes every chapter and renders it,
# outputs and figures included, as a static web site in `build/book/`, to read without
# running anything.

# %% [markdown]
# ## Summary
#
# * InfiniTrain's small-model work added a CPU and a CUDA `Conv2d` that check each other, a
#   shape-preserving DataLoader, MNIST training and multi-process DDP, and met two silent
#   bugs: a sample offset computed with the wrong element size, and `zero_grad` after
#   forward unbinding DDP's gradient views. This course rebuilds all of it, bugs included.
# * Each chapter builds one part of the package in plain code, checks it against PyTorch, and
#   then uses the package's version: [tinytrain/](../tinytrain) is what the chapters produce.
# * Set up with `make lab`; ask `make doctor` what this machine can run; do the exercises in
#   [exercises/](../exercises) and check them with `make check-exercises`.
#
# **Next:** [Chapter 1 — Tensors](01_tensors.ipynb): what an array is, and why a transpose
# costs nothing.
