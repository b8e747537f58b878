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
# # Chapter 6 — MNIST, end to end
#
# Everything is in place: tensors (chapter 1), autograd (chapter 2), a convolution that is
# checked against PyTorch (chapters 3 and 4), and a data pipeline that hands out the right
# pixels (chapter 5). This chapter puts them together and trains handwritten-digit classifiers
# — and then opens them up, to see what they learned, what they get wrong, and two mistakes
# that cost nothing at first sight and a lot later.
#
# **What you will build / learn in this chapter**
#
# 1. The data in three parts: a **training** set that fits the weights, a **validation** set
#    that chooses between models, and a **test** set that is looked at once, at the end.
# 2. Three MNIST **models** of `tinytrain.models`, assembled from the package's layers:
#    InfiniTrain's `mlp` and `cnn`, and the course's default `convnet`; their parameter counts
#    and, with forward hooks, the shape of the data at every layer.
# 3. The **training loop**, written out: `zero_grad → forward → loss → backward → step`, an
#    evaluation under `no_grad` and `model.eval()`, and the epoch chosen on the validation set.
# 4. The same training in **PyTorch**, from the same initial weights on the same batches: the
#    two loss curves on one plot.
# 5. A **profile** of one training step: forward and backward time of every layer, measured
#    with module hooks and by timing each node as the autograd engine runs it.
# 6. The same thing as one call of the package's command line, `tinytrain.train.main([...])`.
# 7. What the trained model gets wrong: the **confusion matrix** and the **most confidently
#    wrong** digits.
# 8. What it learned: the first layer's **filters**, and the **feature maps** of one digit.
# 9. Two **pitfalls**, measured: `model.forward(x)` skips hooks, and evaluating without
#    `no_grad` builds a graph that keeps every activation alive.
# 10. How to train on the **full** MNIST, with a validation split of its own.
#
# Everything but the last section runs offline on **mnist-mini**, the 5,000 + 1,000 real MNIST
# digits bundled with the repository. The package modules this chapter explains are
# `tinytrain/models.py` and `tinytrain/train.py`.

# %%
# %matplotlib inline
import contextlib
import inspect
import io
import os
import re
import time
import tracemalloc
from collections import defaultdict

import matplotlib.pyplot as plt
import numpy as np
from threadpoolctl import threadpool_info

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import optim, train
from tinytrain.data import DataLoader, MNISTMini, Subset
from tinytrain.models import MNIST_MEAN, MNIST_STD, ConvNet, build_model

np.set_printoptions(precision=4, suppress=True)
SEED = 0
_ = tt.manual_seed(SEED)   # initialisation and dropout draw from this generator

# %% [markdown]
# A note on threads. Our CPU convolution (chapter 3) is a sum of many matrix products, a few
# per block of images. A multi-threaded BLAS would wake and synchronise all its threads for
# each of them, and its threads keep spinning after each call, on the cores the next op
# needs. So, like PyTorch's intra-op thread pool, every tinytrain op that calls the BLAS (the
# convolutions, the linear layers) or makes a pass over a large array (pooling, ReLU,
# dropout) splits its work over tinytrain's own threads, `tt.get_num_threads()` of them, each
# calling a one-thread BLAS; the op holds the BLAS at one thread while it runs and gives it
# back its setting when it returns.
# [tinytrain/kernels/cpu/parallel.py](../tinytrain/kernels/cpu/parallel.py) measured why. So a
# training loop needs no thread setting of its own, and your own NumPy keeps its threads.

# %%
def blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


before = blas_threads()
F.linear(F.conv2d(tt.randn(64, 1, 28, 28), tt.randn(8, 1, 3, 3)).flatten(1),
         tt.randn(10, 8 * 26 * 26))
print(f"{os.cpu_count()} cores: tinytrain's ops split their work over {tt.get_num_threads()}",
      f"thread(s); the BLAS runs on {before} thread(s) (one entry per BLAS library),",
      f"and on {blas_threads()} after a convolution and a linear layer")
assert blas_threads() == before

# %% [markdown]
# ## 1. The data: training, validation and test
#
# Chapter 5 built the pipeline; here we only use it. A batch is `x` float32 `[B, 1, 28, 28]`
# with pixels in [0, 1] and `y` int64 `[B]`.
#
# We split the data three ways, and each part has one job:
#
# * the **training** set fits the weights: the last 1,000 of mnist-mini's 5,000 training
#   images are held out of it, leaving 4,000;
# * the **validation** set (those 1,000 held-out images) *chooses*: which epoch to keep,
#   which learning rate, which model. Every choice made by looking at a score fits that score
#   a little, so after a few choices the validation accuracy is optimistic;
# * the **test** set (mnist-mini's separate 1,000 test images) *reports*: it is evaluated
#   once, after every choice is made, so its accuracy is an honest estimate of how the chosen
#   model does on digits it has never influenced. Look at it twice, to choose, and it becomes
#   a second validation set.
#
# `Subset(dataset, indices)` makes the split without copying any image. The training loader
# shuffles with a **seed**, so every run of this notebook visits the images in the same order;
# the other two do not shuffle at all.

# %%
train_set, test_set = MNISTMini(train=True), MNISTMini(train=False)
fit_set = Subset(train_set, range(4000))               # fits the weights
val_set = Subset(train_set, range(4000, 5000))         # chooses
train_loader = DataLoader(fit_set, batch_size=64, shuffle=True, seed=SEED)
val_loader = DataLoader(val_set, batch_size=500)
test_loader = DataLoader(test_set, batch_size=500)     # reports, once

x, y = next(iter(train_loader))
print(f"{len(fit_set):,} training, {len(val_set):,} validation and {len(test_set):,} test",
      f"images; {len(train_loader)} steps per epoch")
print("x:", x.shape, x.dtype, f"[{x.numpy().min():.0f}, {x.numpy().max():.0f}]", "| y:", y.shape,
      y.dtype)
print("validation images per digit:", np.bincount(val_set.get_batch(np.arange(1000))[1]))
assert (len(fit_set), len(val_set), len(test_set)) == (4000, 1000, 1000)
assert not set(fit_set.indices) & set(val_set.indices)      # disjoint
assert x.shape == (64, 1, 28, 28) and y.shape == (64,)

# %% [markdown]
# ## 2. Three models from the package's layers
#
# `tinytrain.models` holds the networks of the course by name (they are also the `--model`
# choices of the training command; a fourth, `pytorch-example`, is PyTorch's MNIST example
# net, for the benchmarks). Each is an `nn.Module` whose `__init__` assigns layers to
# attributes, which *registers* them, and whose `forward` says how data flows through them:
#
# * **`mlp`** — InfiniTrain's MLP: `Flatten`, `Linear(784, 30)`, `Sigmoid`, `Linear(30, 10)`.
#   It sees an image as 784 unrelated numbers.
# * **`cnn`** — InfiniTrain's `MnistCnn`: `Conv2d(1, 16, 3)`, `ReLU`, `Conv2d(16, 32, 3)`,
#   `ReLU`, `Flatten`, `Linear(18432, 10)`. Convolutions look at 3×3 neighbourhoods, but
#   nothing shrinks the image, so the last layer is huge.
# * **`convnet`** — the course's default: two 5×5 convolutions with padding, each followed by
#   `ReLU` and 2×2 **max pooling** (which halves the image), then `Linear(1568, 128)` with
#   **dropout** and `Linear(128, 10)`. Pooling keeps the last layers small; dropout randomly
#   zeroes a quarter of the hidden units during training so that the network cannot rely on any
#   single one.
#
# All three map `[N, 1, 28, 28]` to ten **logits** `[N, 10]`, one score per digit. Here is the
# convnet's definition, straight from the package, and the model it builds:

# %%
print(inspect.getsource(ConvNet))
models = {name: build_model(name) for name in ("mlp", "cnn", "convnet")}
print(models["convnet"])


# %% [markdown]
# Where do the parameters live? `named_parameters()` walks the registered layers in order.
# Note the InfiniTrain CNN: 97 % of its 189,130 parameters sit in the final `Linear(18432, 10)`,
# because its feature maps are never pooled. The convnet has about as many parameters, but
# spends them on a hidden layer of 128 units instead.

# %%
def parameter_table(model):
    total = 0
    for name, p in model.named_parameters():
        print(f"  {name:<14} {str(p.shape):<18} {p.numel():>9,}")
        total += p.numel()
    return total


counts = {}
for name, model in models.items():
    print(f"{name}:")
    counts[name] = parameter_table(model)
    print(f"  {'total':<33}{counts[name]:>9,}\n")

assert counts == {"mlp": 23_860, "cnn": 189_130, "convnet": 215_370}
assert models["cnn"].fc.weight.numel() / counts["cnn"] > 0.97


# %% [markdown]
# ### Shapes through the network, with forward hooks
#
# A **forward hook** is a function that a module calls after its `forward`, with the module,
# its inputs and its output: `hook(module, args, output)`. It is how one looks inside a model
# without editing it. Here one hook per layer records the output shape; a forward pass over a
# batch of two images then prints the whole journey. In the convnet the same `ReLU` and
# `MaxPool2d` objects are *called several times*, and their hooks fire each time.

# %%
def trace_shapes(model, x):
    # Run model(x) with a hook on every layer that records (layer name, output shape).
    records, handles = [], []

    def recorder(name):
        def hook(module, args, output):
            records.append((name, type(module).__name__, output.shape))
        return hook

    for name, module in model.named_modules():
        if name and not list(module.children()):          # leaves only: the real layers
            handles.append(module.register_forward_hook(recorder(name)))
    try:
        with tt.no_grad():
            out = model(x)
    finally:
        for h in handles:
            h.remove()                                    # leave the model as we found it
    print(f"  {'input':<20} {str(x.shape)}")
    for name, kind, shape in records:
        print(f"  {name + ' (' + kind + ')':<20} {shape}")
    return records, out


x2 = x[:2]                                              # two images: [2, 1, 28, 28]
shapes = {}
for name in ("cnn", "convnet"):
    print(name)
    shapes[name], out = trace_shapes(models[name], x2)
    assert out.shape == (2, 10)

assert ("flatten", "Flatten", (2, 18432)) in shapes["cnn"]
assert [s for n, _, s in shapes["convnet"] if n == "pool"] == [(2, 16, 14, 14), (2, 32, 7, 7)]


# %% [markdown]
# Each 3×3 convolution without padding trims one pixel from every border (28 → 26 → 24), so the
# InfiniTrain CNN flattens 32 × 24 × 24 = 18,432 numbers per image. In the convnet, padding 2
# keeps 28 × 28 through the 5×5 convolution and each pooling halves the side: 28 → 14 → 7, so
# only 32 × 7 × 7 = 1,568 numbers reach the linear layers.
#
# ## 3. The training loop, written out
#
# One **step** of training is five lines, and their order matters:
#
# 1. `opt.zero_grad()` — gradients *accumulate* into `p.grad` (chapter 2), so the previous
#    step's must go first;
# 2. `logits = model(x)` — the forward pass, calling the module (not `model.forward(x)`, see
#    section 9), which records the graph;
# 3. `loss = F.cross_entropy(logits, y)` — one number: the mean over the batch of
#    −log(probability of the right digit);
# 4. `loss.backward()` — walks the graph backwards and fills `p.grad` for every parameter;
# 5. `opt.step()` — moves every parameter a little against its gradient (here with Adam).
#
# Evaluation is different: no gradients are needed, so it runs under **`tt.no_grad()`** (no
# graph is recorded, see section 9), and in **`model.eval()`** mode, which switches dropout
# off so that the prediction for an image is deterministic. `model.train()` switches it back
# on before the next epoch. This is exactly what `tinytrain/train.py` does.

# %% [markdown]
# ### Exercise 6.1 — one training step, in the right order
#
# Before reading the loop below, write `train_step(model, opt, x, y)`: one step of the five
# above on the batch `(x, y)`, returning the loss as a Python float. The checker trains two
# copies of the same MLP side by side with SGD and momentum, one with your step and one with
# the reference, and compares the losses and every parameter after each of three steps — a
# forgotten `zero_grad` or a step before `backward` shows up at once. It also counts, with a
# forward hook, that you called the model.

# %%
def train_step(model, opt, x, y):
    """One training step on the batch (x, y); returns the batch's loss as a float."""
    ### BEGIN SOLUTION
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
    ### END SOLUTION


# %% tags=["checker"]
mine_model, ref_model = build_model("mlp"), build_model("mlp")   # no dropout: deterministic
mine_model.load_state_dict(ref_model.state_dict())
mine_opt = optim.SGD(mine_model.parameters(), lr=0.1, momentum=0.9)
ref_opt = optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9)
forward_calls = []
hook = mine_model.register_forward_hook(lambda module, args, output: forward_calls.append(1))
try:
    for step, (x_check, y_check) in enumerate(DataLoader(train_set, batch_size=32)):
        if step == 3:
            break
        loss_mine = train_step(mine_model, mine_opt, x_check, y_check)
        ref_opt.zero_grad()
        loss_ref = F.cross_entropy(ref_model(x_check), y_check)
        loss_ref.backward()
        ref_opt.step()
        assert isinstance(loss_mine, float), f"return loss.item(), not {type(loss_mine)}"
        assert np.isclose(loss_mine, loss_ref.item()), f"step {step}: {loss_mine} != {loss_ref}"
        for (name, p_mine), p_ref in zip(mine_model.named_parameters(), ref_model.parameters()):
            assert np.allclose(p_mine.numpy(), p_ref.numpy(), atol=1e-6), (
                f"after step {step}: parameter {name} differs from the reference step's by up "
                f"to {np.max(np.abs(p_mine.numpy() - p_ref.numpy())):.3g}")
finally:
    hook.remove()
assert len(forward_calls) == 3, "call the model, model(x), once per step"
print("Exercise 6.1: train_step matches the reference step over three steps")

# %%
def train_epoch(model, opt, loader, losses, sched=None):
    model.train()                                # dropout on
    for x, y in loader:
        opt.zero_grad(set_to_none=True)          # 1. forget the last step's gradients
        logits = model(x)                        # 2. forward: call the module, hooks run
        loss = F.cross_entropy(logits, y)        # 3. mean cross-entropy over the batch
        loss.backward()                          # 4. p.grad for every parameter
        opt.step()                               # 5. update the parameters
        if sched is not None:
            sched.step()                         # the learning rate for the next step
        losses.append(loss.item())


@tt.no_grad()                                    # no graph: nothing to backward through
def predict(model, loader):
    # Logits and labels of a whole loader, as NumPy arrays, in eval mode.
    was_training = model.training
    model.eval()                                 # dropout off: deterministic predictions
    logits, labels = [], []
    for x, y in loader:
        logits.append(model(x).numpy())
        labels.append(y.numpy())
    model.train(was_training)
    return np.concatenate(logits), np.concatenate(labels)


def accuracy(logits, labels):
    return float((logits.argmax(1) == labels).mean())


# %% [markdown]
# Before training, a network with random weights should be right about one time in ten, and its
# loss should be near −log(1/10) = ln 10 ≈ 2.30: it spreads its bets evenly over the ten
# digits. Checking this first catches a surprising number of bugs (a wrong loss, labels that
# do not match images).

# %%
tt.manual_seed(SEED)
model = build_model("convnet")
logits0, labels0 = predict(model, val_loader)
loss0 = F.cross_entropy(tt.tensor(logits0), tt.tensor(labels0)).item()
print(f"untrained convnet: accuracy {accuracy(logits0, labels0):.3f}, loss {loss0:.3f}",
      f"(ln 10 = {np.log(10):.3f})")
assert abs(loss0 - np.log(10)) < 0.1 and accuracy(logits0, labels0) < 0.25

# %% [markdown]
# Now three epochs over the 4,000 training images, 63 steps of up to 64 images, with the recipe
# of the training command's default run: Adam at `train.DEFAULT_LR["adam"]`, and a learning
# rate that decays along a cosine to zero over the run (`CosineAnnealingLR`, stepped after
# every batch). After each epoch the model is evaluated on the validation set, and the
# weights of the best epoch are kept: that is the choice the validation set makes here.
# Only then, once, the test set.
#
# One detail for reproducibility: each `iter(train_loader)` is one epoch, and the order of
# epoch *e* depends only on `(seed, e)`. Peeking at a batch in section 1 started epoch 0, so we
# rewind with `set_epoch(0)`: then this training sees the same batches on every run.

# %%
def fit(model, train_loader, val_loader, epochs, lr):
    # Adam with a cosine decay over the run; keeps the weights of the epoch best on validation.
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * len(train_loader))
    losses, val_acc, best = [], [], None
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        train_epoch(model, opt, train_loader, losses, sched)
        val_acc.append(accuracy(*predict(model, val_loader)))
        print(f"epoch {epoch}: mean training loss {np.mean(losses[-len(train_loader):]):.4f}",
              f"| validation accuracy {val_acc[-1]:.4f} | {time.perf_counter() - start:.0f} s")
        if best is None or val_acc[-1] > best[1]:     # keep the best epoch's weights
            best = (epoch, val_acc[-1], {k: v.numpy().copy()
                                         for k, v in model.state_dict().items()})
    model.load_state_dict(best[2])
    print(f"chosen on the validation set: epoch {best[0]} (validation accuracy {best[1]:.4f})")
    return losses, val_acc, best[0]


tt.manual_seed(SEED)
model = build_model("convnet")  # the same fresh model again: re-running this cell starts over
EPOCHS, LR = 3, train.DEFAULT_LR["adam"]
print(f"Adam, lr {LR:g} (python -m tinytrain.train's default) with cosine decay, {EPOCHS} epochs")
w1_init = model.conv1.weight.numpy().copy()      # to compare with after training (section 8)
train_loader.set_epoch(0)
losses, val_acc, best_epoch = fit(model, train_loader, val_loader, EPOCHS, LR)
best_val = val_acc[best_epoch - 1]
assert LR == 2e-3 and best_val == max(val_acc)

# %% [markdown]
# The choice is made; now, and only now, the test set:

# %%
test_logits, test_labels = predict(model, test_loader)     # the one look at the test set
test_acc = accuracy(test_logits, test_labels)
print(f"test accuracy of the chosen model: {test_acc:.3f}",
      f"(its validation accuracy: {best_val:.3f})")
assert test_acc >= 0.94, test_acc                             # measured 0.96

# %%
steps = np.arange(1, len(losses) + 1)
window = 10
smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
plt.figure(figsize=(7, 3))
plt.plot(steps, losses, lw=0.8, alpha=0.5, label="loss of each step")
plt.plot(steps[window - 1 :], smooth, lw=2, label=f"mean of the last {window} steps")
plt.axhline(np.log(10), color="gray", ls="--", lw=0.8, label="ln 10 (random guessing)")
plt.yscale("log")
plt.xlabel("step")
plt.ylabel("training loss")
for e in range(1, EPOCHS):
    plt.axvline(e * len(train_loader), color="k", lw=0.6)
plt.title(f"convnet, {EPOCHS} epochs on 4,000 mnist-mini images: validation "
          + ", ".join(f"{a:.1%}" for a in val_acc) + f"; test {test_acc:.1%}", fontsize=9)
plt.legend()
plt.tight_layout()
plt.show()

assert np.mean(losses[-10:]) < 0.3 * np.mean(losses[:10])    # the loss went down

# %% [markdown]
# From here on, everything that could lead to another decision — the package's evaluation,
# the exercises, the mistakes the model makes — looks at the **validation** set. The package's
# `tinytrain.train.evaluate` is the same evaluation as `predict` + `accuracy` (it also sums
# the loss) and must give the same count of correct answers:

# %%
val_logits, val_labels = predict(model, val_loader)         # the chosen model
result = train.evaluate(model, val_loader)
print(f"tinytrain.train.evaluate: {result.correct}/{result.total} correct,",
      f"accuracy {result.accuracy:.3f}, mean loss {result.avg_loss:.4f}")
assert result.correct == int((val_logits.argmax(1) == val_labels).sum())
assert np.isclose(result.accuracy, best_val)

# %% [markdown]
# ### Exercise 6.2 — accuracy, evaluated properly
#
# Write `evaluate_accuracy(model, loader)`: the fraction of the loader's samples that the model
# classifies right (the class of the largest logit, `np.argmax` on the NumPy logits). Run it in
# eval mode and under `tt.no_grad()`, and leave the model in the mode you found it in. The
# checker compares with `train.evaluate`, watches with a forward hook that no graph was
# recorded and dropout was off, and checks the mode afterwards.

# %%
def evaluate_accuracy(model, loader):
    """Fraction of correct predictions over loader, in eval mode and under no_grad."""
    ### BEGIN SOLUTION
    was_training = model.training
    model.eval()
    correct = total = 0
    with tt.no_grad():
        for x, y in loader:
            pred = model(x).numpy().argmax(axis=1)
            correct += int((pred == y.numpy()).sum())
            total += len(pred)
    model.train(was_training)
    return correct / total
    ### END SOLUTION


# %% tags=["checker"]
seen = []                                   # (output records a graph?, model in train mode?)
hook = model.register_forward_hook(
    lambda module, args, output: seen.append((output.requires_grad, module.training)))
mode_before = model.training
uneven_loader = DataLoader(val_set, batch_size=300)   # 1000 = 300 + 300 + 300 + 100
try:
    for start_in_train_mode in (True, False):
        model.train(start_in_train_mode)
        acc_mine = evaluate_accuracy(model, val_loader)
        assert model.training == start_in_train_mode, "leave the model in the mode it was in"
        assert seen, ("no forward hook ran: call the model as model(x) (model.forward(x) "
                      "skips the hooks, in PyTorch too)")
        assert not any(graph for graph, _ in seen), "evaluate under tt.no_grad()"
        assert not any(training for _, training in seen), "evaluate in eval mode (dropout off)"
        expected_acc = train.evaluate(model, val_loader).accuracy
        assert np.isclose(acc_mine, expected_acc), f"accuracy {acc_mine}, expected {expected_acc}"
        acc_uneven = evaluate_accuracy(model, uneven_loader)   # a mean of batch accuracies
        assert np.isclose(acc_uneven, acc_mine), "count correct answers over all samples"
        assert tt.is_grad_enabled(), ("grad mode is still off after evaluate_accuracy: use "
                                      "`with tt.no_grad():`, which turns it back on, not "
                                      "tt.set_grad_enabled(False)")
finally:
    tt.set_grad_enabled(True)  # (for the cells below, whatever the answer did)
    hook.remove()
    model.train(mode_before)
assert seen and not any(graph for graph, _ in seen), "evaluate under tt.no_grad()"
assert not any(training for _, training in seen), "evaluate in eval mode (dropout off)"
print(f"Exercise 6.2: evaluate_accuracy = {acc_mine:.3f}, as train.evaluate, without a graph")

# %% [markdown]
# ## 4. The same training in PyTorch
#
# Chapter 3 checked one layer against PyTorch, forward and backward. Training checks the whole
# stack at once: the layers, the loss, backward through all of them, and Adam's update, step
# after step. So build PyTorch's twin of the convnet (the same layers under the same names, so
# the two state dicts line up), copy tinytrain's *initial* weights into it, and train both on
# the **same batches** with the same optimizer.
#
# Two sources of difference that are not arithmetic are switched off, for both: dropout (its
# random masks come from two different generators, so both train in eval mode, which in this
# network changes nothing else) and the cosine schedule (a constant learning rate). What is
# left is float32 rounding: the two curves should start equal and drift apart only slowly,
# as rounding differences pass through Adam's updates. (Adam divides each gradient by the
# root of its running square: where a gradient is nearly zero, a rounding difference in it
# can move that weight's step by up to the learning rate, so within ten steps the losses
# can differ by ~1e-4 and still be the same arithmetic.)

# %%
try:
    import torch
except ImportError:
    torch = None

if torch:
    class TorchConvNet(torch.nn.Module):
        # tinytrain.models.ConvNet, layer for layer, in PyTorch
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 16, 5, padding=2)
            self.conv2 = torch.nn.Conv2d(16, 32, 5, padding=2)
            self.pool, self.relu = torch.nn.MaxPool2d(2), torch.nn.ReLU()
            self.flatten, self.dropout = torch.nn.Flatten(1), torch.nn.Dropout(0.25)
            self.fc1, self.fc2 = torch.nn.Linear(32 * 7 * 7, 128), torch.nn.Linear(128, 10)

        def forward(self, x):
            x = (x - MNIST_MEAN) / MNIST_STD            # ConvNet standardises its input
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            x = self.dropout(self.relu(self.fc1(self.flatten(x))))
            return self.fc2(x)

    tt.manual_seed(SEED)
    ours = build_model("convnet")
    theirs = TorchConvNet()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in ours.state_dict().items()})
    ours.eval()                                        # dropout off in both
    theirs.eval()
    opt_ours = optim.Adam(ours.parameters(), lr=LR)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=LR)
    loss_ours, loss_theirs = [], []
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)                           # the curves are the point, not speed
    try:
        train_loader.set_epoch(0)
        for x, y in train_loader:                      # one epoch, the same batches for both
            opt_ours.zero_grad()
            loss = F.cross_entropy(ours(x), y)
            loss.backward()
            opt_ours.step()
            loss_ours.append(loss.item())

            opt_theirs.zero_grad()
            loss_t = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x.numpy())),
                                                       torch.from_numpy(y.numpy()))
            loss_t.backward()
            opt_theirs.step()
            loss_theirs.append(loss_t.item())
    finally:
        torch.set_num_threads(threads_before)

    gap = np.abs(np.array(loss_ours) - np.array(loss_theirs))
    figures.draw_loss_overlay(loss_ours, loss_theirs,
                              f"one epoch, same initial weights and batches, Adam {LR:g}")
    plt.tight_layout()
    plt.show()
    print(f"step 1: tinytrain {loss_ours[0]:.6f}, PyTorch {loss_theirs[0]:.6f};",
          f"largest difference in the first 10 steps {gap[:10].max():.1e},",
          f"over the epoch {gap.max():.1e}")
    print(f"mean of the last 10 steps: tinytrain {np.mean(loss_ours[-10:]):.4f},",
          f"PyTorch {np.mean(loss_theirs[-10:]):.4f}")
    assert gap[0] < 1e-5 and gap[:10].max() < 5e-4           # the same arithmetic, at first
    assert abs(np.mean(loss_ours[-10:]) - np.mean(loss_theirs[-10:])) < 0.05
    assert np.mean(loss_ours[-10:]) < 0.3 * loss_ours[0]      # and both learn
else:
    print("PyTorch is not installed: the comparison with it is skipped")

# %% [markdown]
# ## 5. Where a training step spends its time
#
# Which layers does a training step spend its time in? Time one step layer by layer, without
# changing the model:
#
# * **forward**: a forward pre-hook on every layer notes the time, a forward hook takes the
#   difference. The convnet calls its `relu` and `pool` modules more than once, so each call
#   gets its own row (`relu #1`, ...).
# * **backward**: the forward hook also collects the graph nodes that the call recorded
#   (walking back from its output's `grad_fn` until it reaches its inputs' nodes, chapter 2),
#   and wraps each node's `apply` in a timer. The engine calls `node.apply(grad)` when it runs
#   a node, so the timers measure exactly the backward of that layer, including the
#   `AccumulateGrad` nodes that add its parameters' gradients into `.grad`.
#
# The loss gets a row too; the optimizer's step is timed as a whole. A few steps are profiled
# after a warm-up, and the median of each number is kept (a busy machine adds outliers).

# %%
def profile_step(model, opt, x, y):
    # One training step; returns {layer call: [forward ms, backward ms]} and the step's totals.
    times = defaultdict(lambda: [0.0, 0.0])
    names = {id(m): name for name, m in model.named_modules() if name and not list(m.children())}
    calls, started, handles, wrapped = defaultdict(int), {}, [], []

    def timed(label, apply):
        def run(*args):  # the gradient (and, for a leaf, whether it may keep it)
            start = time.perf_counter()
            grads = apply(*args)
            times[label][1] += 1e3 * (time.perf_counter() - start)
            return grads
        return run

    def claim(label, output, inputs):
        # Wrap the nodes this call recorded: from its output back to its inputs' nodes.
        stop = {id(t.grad_fn) for t in inputs if isinstance(t, tt.Tensor) and t.grad_fn}
        stack, seen = [output.grad_fn], set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in stop or id(node) in seen:
                continue
            seen.add(id(node))
            node.apply = timed(label, node.apply)
            wrapped.append(node)
            stack.extend(node.next_functions)

    def pre_hook(module, args):
        started[id(module)] = time.perf_counter()

    def hook(module, args, output):
        elapsed = 1e3 * (time.perf_counter() - started[id(module)])
        name = names[id(module)]
        calls[name] += 1
        label = f"{name} #{calls[name]}" if name in ("relu", "pool") else name
        times[label][0] += elapsed
        claim(label, output, args)

    for m in model.modules():
        if id(m) in names:
            handles += [m.register_forward_pre_hook(pre_hook), m.register_forward_hook(hook)]
    try:
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        logits = model(x)
        t1 = time.perf_counter()
        loss = F.cross_entropy(logits, y)
        times["loss"][0] += 1e3 * (time.perf_counter() - t1)
        claim("loss", loss, [logits])
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
    finally:
        for h in handles:
            h.remove()
        # A parameter's AccumulateGrad node lives as long as a graph holds it, and a later
        # step may reuse it: unwrap every node, or that step would be timed twice.
        for node in wrapped:
            vars(node).pop("apply", None)
    totals = {"forward": t2 - t0, "backward": t3 - t2, "optimizer step": t4 - t3}
    return dict(times), {k: 1e3 * v for k, v in totals.items()}


chosen = {k: v.numpy().copy() for k, v in model.state_dict().items()}
model.train()
x, y = next(iter(train_loader))
opt = optim.Adam(model.parameters(), lr=LR)
runs = [profile_step(model, opt, x, y) for _ in range(6)][1:]       # the first one warms up
labels = list(runs[0][0])
fwd = np.median([[r[0][k][0] for k in labels] for r in runs], axis=0)
bwd = np.median([[r[0][k][1] for k in labels] for r in runs], axis=0)
totals = {k: float(np.median([r[1][k] for r in runs])) for k in runs[0][1]}
model.load_state_dict(chosen)                      # undo the profiled steps' updates

print(f"{'layer call':<12}{'forward ms':>12}{'backward ms':>13}{'share':>8}")
step_ms = sum(totals.values())
for label, f, b in zip(labels, fwd, bwd):
    print(f"{label:<12}{f:12.2f}{b:13.2f}{(f + b) / step_ms:8.0%}")
print(", ".join(f"{k} {v:.1f} ms" for k, v in totals.items()), f"= {step_ms:.1f} ms per step")
top = sorted(zip(fwd + bwd, labels), reverse=True)[:4]
pool_ms = sum(f + b for label, f, b in zip(labels, fwd, bwd) if label.startswith("pool"))
print("the four most expensive:", ", ".join(label for _, label in top),
      f"= {sum(t for t, _ in top) / step_ms:.0%} of the step; max pooling alone",
      f"{pool_ms / step_ms:.0%}")

fig, ax = plt.subplots(figsize=(7.5, 4))
figures.draw_layer_profile(ax, labels, fwd, bwd)
ax.set_title(f"one training step of the convnet, batch {len(x)}: {step_ms:.0f} ms", fontsize=10)
plt.tight_layout()
plt.show()

assert labels == ["conv1", "relu #1", "pool #1", "conv2", "relu #2", "pool #2", "flatten",
                  "fc1", "relu #3", "dropout", "fc2", "loss"]
assert (fwd > 0).all() and (bwd[[0, 2, 3, 5, 7, 10]] > 0).all()

# %% [markdown]
# Read the table from the top. The convolutions and the max poolings work on the image-sized
# activations (conv1's output alone is `[64, 16, 28, 28]`) and take most of the step; the
# printout gives their share. The linear layers see 1,568 and 128 numbers per image and are
# cheap, and so are the loss and Adam's step over 215,370 parameters; the first ReLU is not
# free, as it too passes over conv1's whole output. (`flatten`'s backward is a reshape of a
# gradient: close to nothing.)
#
# Notice what max pooling costs next to the convolutions, for an op without a single
# multiplication: forward scans the `2 * 2` window offsets, each a pass over an image-sized
# tensor; backward scans them again to find the arg-max, then once more to scatter the
# gradient. Memory traffic again, as in chapter 3.
#
# The forward and backward totals are measured around `model(x)` and `loss.backward()`; what
# they hold beyond the sum of the rows is Python: the engine's bookkeeping and the model's own
# `forward` between its layers.

# %% [markdown]
# ## 6. The same, as one command
#
# `python -m tinytrain.train` is this loop with the bookkeeping around it: options, a progress
# bar, checkpoints (`--save`, `--resume`), curves (`--plot`). From Python it is
# `tinytrain.train.main(argv)`, which returns the exit status. Here it trains InfiniTrain's MLP
# for three epochs on the mini set; the shell equivalent is
#
# ```
# python -m tinytrain.train --model mlp --dataset mnist-mini --epochs 3 --lr 0.01
# ```
#
# The progress bar goes to stderr; we capture it so that this page stays readable, and keep the
# printed summary.

# %%
argv = ["--model", "mlp", "--dataset", "mnist-mini", "--epochs", "3", "--lr", "0.01"]
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    status = train.main(argv)
print(out.getvalue())
assert status == 0, err.getvalue()
mlp_acc = float(re.search(r"accuracy ([\d.]+)%", out.getvalue()).group(1)) / 100
print(f"test accuracy: the mlp {mlp_acc:.1%} (5,000 training images, 3 epochs),",
      f"the convnet {test_acc:.1%} (4,000 images, 3 epochs)")
assert 0.90 <= mlp_acc < test_acc, mlp_acc                    # measured 0.91-0.93

# %% [markdown]
# The MLP (23,860 parameters) lands well below the convnet (printed above), although it saw
# more images: seeing the image as a 2-D grid, with the same small filters applied everywhere,
# is worth a lot. (`--preset infinitrain` reproduces InfiniTrain's own run: the `cnn`, plain
# SGD at 0.01, batch 64, one epoch.)
#
# ## 7. What the model gets wrong
#
# Accuracy is one number; the **confusion matrix** shows *which* digits are mistaken for which.
# Row *t*, column *p* counts the images of digit *t* that the model called *p*: the diagonal
# holds the right answers, everything else is a mistake.
#
# We study the mistakes on the **validation** set. What we learn from them is exactly what
# leads to the next decision (another model, more epochs, augmenting the 7s), and the test
# set must stay out of every decision.

# %% [markdown]
# ### Exercise 6.3 — the confusion matrix
#
# Write `confusion_matrix(labels, preds, num_classes)`: an integer array
# `[num_classes, num_classes]` whose entry `[t, p]` counts the samples of class `t` that were
# predicted as `p`. The checker compares with a count done another way (`np.bincount` of
# `t * num_classes + p`) on random labels, including classes that never occur, and on the
# model's validation predictions, whose diagonal must hold `train.evaluate`'s correct answers.

# %%
def confusion_matrix(labels, preds, num_classes):
    """Counts [num_classes, num_classes]: entry [t, p] = samples of class t predicted as p."""
    ### BEGIN SOLUTION
    counts = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(counts, (labels, preds), 1)
    return counts
    ### END SOLUTION


# %% tags=["checker"]
check_rng = np.random.default_rng(63)
for n_check, k_check in [(50, 3), (200, 10), (1, 4), (7, 12)]:
    labels_check = check_rng.integers(0, k_check // 2 + 1, n_check)   # the top classes never occur
    preds_check = check_rng.integers(0, k_check, n_check)
    expected = np.bincount(labels_check * k_check + preds_check,
                           minlength=k_check * k_check).reshape(k_check, k_check)
    given = labels_check.copy(), preds_check.copy()
    got = np.asarray(confusion_matrix(labels_check, preds_check, k_check))
    where = f"{n_check} labels, num_classes={k_check}"
    assert np.array_equal(labels_check, given[0]) and np.array_equal(preds_check, given[1]), (
        f"{where}: confusion_matrix changed its labels or preds argument; count without "
        f"writing into them (the caller still needs them)")
    assert got.shape == (k_check, k_check), (
        f"{where}: shape {got.shape}, expected {(k_check, k_check)}")
    wrong = np.argwhere(got != expected)
    assert not wrong.size, (
        f"{where}: {len(wrong)} counts differ; row {wrong[0][0]} (true label), column "
        f"{wrong[0][1]} (prediction) is {got[tuple(wrong[0])]}, expected "
        f"{expected[tuple(wrong[0])]}")
    assert got.dtype.kind in "iu", f"counts are integers, got {got.dtype}"
model_confusion = np.asarray(confusion_matrix(val_labels.copy(), val_logits.argmax(1), 10))
assert model_confusion.sum() == len(val_set) and np.trace(model_confusion) == result.correct
print("Exercise 6.3: confusion_matrix counts right")

# %%
pred = val_logits.argmax(1)
confusion = np.zeros((10, 10), dtype=np.int64)
np.add.at(confusion, (val_labels, pred), 1)

fig, ax = plt.subplots(figsize=(5.2, 4.6))
figures.draw_confusion(ax, confusion, "confusion matrix (the validation set)")
plt.tight_layout()
plt.show()

off = confusion - np.diag(np.diag(confusion))
t, p = np.unravel_index(off.argmax(), off.shape)
print(f"most common mistake: {t} read as {p} ({off[t, p]} times)")
print("per-digit recall:", np.round(np.diag(confusion) / confusion.sum(1), 3))
assert confusion.sum() == len(val_set) and np.trace(confusion) == result.correct

# %% [markdown]
# The softmax of the logits turns them into probabilities; the largest is the model's
# **confidence** in its answer. The mistakes it makes with high confidence are the most
# instructive: some are sloppy digits that a human would also hesitate over, some are
# labelling errors in MNIST itself, and some are plain failures of the model.

# %%
probs = np.exp(F.log_softmax(tt.tensor(val_logits), dim=1).numpy())
confidence = probs.max(1)
wrong = np.flatnonzero(pred != val_labels)
worst = wrong[np.argsort(-confidence[wrong])][:12]

fig, axes = plt.subplots(2, 6, figsize=(9, 3.6))
for ax, i in zip(axes.flat, worst):
    ax.imshow(val_set[i][0][0], cmap="gray_r")
    ax.set_title(f"pred {pred[i]} ({confidence[i]:.0%})\ntrue {val_labels[i]}", fontsize=9)
    ax.axis("off")
fig.suptitle("the most confidently wrong validation digits")
plt.tight_layout()
plt.show()

assert np.allclose(probs.sum(1), 1, atol=1e-5)
assert len(wrong) == len(val_set) - result.correct

# %% [markdown]
# ## 8. What the network learned
#
# The first convolution has 16 filters of 1 × 5 × 5 weights. Each is slid over the image and
# answers "how much does this patch look like me?". They started as random noise (top rows).
# Three epochs on 4,000 images is not much, and the trained filters (bottom rows) are still
# noisy, but most have moved far from where they started, and several show the beginnings of
# **edge and stroke detectors**: a positive band next to a negative one, at some angle. (Blue
# is positive, red negative; trained for longer on the full data set, they become cleaner.)

# %%
w1 = model.conv1.weight.numpy()                  # [16, 1, 5, 5]
fig = figures.draw_filters(w1_init, w1)
fig.suptitle("conv1 filters: initial (top two rows) and after training (bottom two rows)")
plt.tight_layout()
plt.show()

change = np.linalg.norm((w1 - w1_init).reshape(16, -1), axis=1) / np.linalg.norm(
    w1_init.reshape(16, -1), axis=1)
print("relative change of each filter:", np.round(change, 2))
assert w1.shape == (16, 1, 5, 5) and np.median(change) > 0.3

# %% [markdown]
# A **feature map** is what one filter produces over a whole image. To get conv1's output we do
# not change the model: we register a forward hook on `model.conv1` that keeps a copy of its
# output, run the model as usual, and remove the hook. Each of the 16 maps lights up where its
# filter's pattern occurs in the digit (after the ReLU that follows conv1, only the positive
# part survives).

# %%
captured = {}
handle = model.conv1.register_forward_hook(
    lambda module, args, output: captured.update(conv1=output.numpy().copy()))
digit, label = val_set[0]
model.eval()
with tt.no_grad():
    logits = model(tt.tensor(digit[None]))       # [1, 1, 28, 28] -> [1, 10]
handle.remove()
maps = np.maximum(captured["conv1"][0], 0)       # ReLU, as in the model: [16, 28, 28]

fig = figures.draw_feature_maps(digit[0], f"input: {label}", maps)
fig.suptitle("conv1 feature maps of one validation digit (after ReLU)")
plt.tight_layout()
plt.show()

assert captured["conv1"].shape == (1, 16, 28, 28)
assert int(logits.argmax(1).item()) == pred[0]

# %% [markdown]
# ## 9. Two pitfalls, measured
#
# Both of these mistakes give the *right numbers* at first, which is what makes them dangerous.
#
# ### Pitfall 1: `model.forward(x)` instead of `model(x)`
#
# `Module.__call__` runs the forward pre-hooks, then `forward`, then the forward hooks.
# Calling `forward` directly runs only the middle part, so every hook registered **on that
# module** is silently skipped. Hooks are not a curiosity: the feature maps above came from
# one, and frameworks use them for activation statistics, profiling, quantisation and
# distributed training. Let us count.

# %%
calls = {"model": 0, "conv1": 0}


def counter(key):
    def hook(module, args, output):
        calls[key] += 1
    return hook


h_model = model.register_forward_hook(counter("model"))
h_conv1 = model.conv1.register_forward_hook(counter("conv1"))
xb = tt.tensor(digit[None])

with tt.no_grad():
    out_call = model(xb)
    print("after model(x):        ", calls)
    out_forward = model.forward(xb)
    print("after model.forward(x):", calls)
h_model.remove()
h_conv1.remove()

assert np.array_equal(out_call.numpy(), out_forward.numpy())   # same numbers...
assert calls == {"model": 1, "conv1": 2}                       # ...but the model's hook ran once


# %% [markdown]
# The two outputs are identical, yet the model's own hook fired only for `model(x)`. The hook
# on `conv1` fired both times, because `ConvNet.forward` calls `self.conv1(x)` — through
# `__call__`. What is skipped is exactly the hooks of the module whose `forward` you call,
# and nothing warns you. The rule: **call modules, never their `forward`** (inside a `forward`
# too: write `self.conv1(x)`, not `self.conv1.forward(x)`).
#
# ### Pitfall 2: evaluating without `no_grad`
#
# With grad mode on, every op whose input requires a gradient records a node, and each node
# keeps what its backward needs (chapter 2's *selective save*). The model's parameters require
# gradients, so *every* layer records — even in evaluation, where nobody will ever call
# `backward`. All those arrays stay alive as long as the output does.
#
# How much is that? Starting from `out.grad_fn`, we walk the graph through `next_functions`,
# list what each node's context holds, and add up the bytes, leaving out the parameters
# themselves (they are alive anyway) and counting an array that two nodes share once.

# %%
def graph_memory(t, exclude=()):
    # (nodes [(name, shapes of the arrays it keeps)], bytes of saved arrays) from t.grad_fn.
    skip = {id(a) for a in exclude}
    seen_nodes, seen_arrays, nodes = set(), set(), []
    nbytes = 0
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        ctx = getattr(node, "ctx", None)          # AccumulateGrad (a leaf) has no context
        if ctx is not None:
            held = [a for a in list(ctx._saved or ()) + list(vars(ctx).values())
                    if isinstance(a, np.ndarray) and id(a) not in skip]
            nodes.append((node.name, [a.shape for a in held]))
            for a in held:
                if id(a) not in seen_arrays:
                    seen_arrays.add(id(a))
                    nbytes += a.nbytes
        stack.extend(node.next_functions)
    return nodes, nbytes


model.eval()
params = [p._data for p in model.parameters()]      # the arrays (graphs save arrays)
xe, ye = next(iter(val_loader))                   # 500 validation images
out_graph = model(xe)                             # grad mode on: a graph is recorded
loss_graph = F.cross_entropy(out_graph, ye)
nodes, saved = graph_memory(out_graph, exclude=params)
for name, shapes in nodes:
    print(f"  {name:<28} keeps {shapes}")
print(f"without no_grad: {len(nodes)} nodes, {saved / 2**20:.1f} MiB of saved arrays",
      f"({saved / len(xe) / 1024:.0f} KiB per image)")

with tt.no_grad():
    out_plain = model(xe)
print(f"with no_grad:    grad_fn = {out_plain.grad_fn}, requires_grad = {out_plain.requires_grad}")

assert out_plain.grad_fn is None and not out_plain.requires_grad
assert np.allclose(out_graph.numpy(), out_plain.numpy())       # same predictions
assert saved > 100 * out_plain.numpy().nbytes                  # the graph dwarfs the output
first = {}
for name, shapes in reversed(nodes):              # from the input up: the first of each kind
    first.setdefault(name, shapes)
assert first["MaxPool2dFunctionBackward"] == [(500, 16, 28, 28)]     # pool #1 keeps its input
assert first["Conv2dFunctionBackward"] == [(500, 1, 28, 28)]         # conv1 keeps x (for dW)
assert loss_graph.grad_fn.ctx.saved_tensors[0] is out_graph._data    # the loss: the logits
assert not any("Dropout" in name for name, _ in nodes)                 # eval: nothing recorded
h = model.relu(model.conv1(xe))                   # (without the model's input standardisation)
pooled = model.pool(h)
assert pooled.grad_fn.ctx.saved_tensors[0] is h.grad_fn.ctx.saved_tensors[0] is h._data
del h, pooled

# %% [markdown]
# Read the list from the output back to the input: each linear layer keeps its input (for its
# weight's gradient), each ReLU its output, each max pooling its input — the very array the
# ReLU before it keeps, so it costs nothing more; its backward finds the arg-max again from it
# (chapter 3). The convolutions keep their input, for `dW`; `conv1` does not even keep its
# weight, which only `dX` would read, and the images need no gradient. Dropout, in eval mode,
# records nothing.
# A loss on top would keep the logits (and the targets) and compute the softmax again in
# backward; the last assert checks that it holds the logits array itself, not a copy.

# %% [markdown]
# The predictions are the same; the difference is tens of megabytes of activations for 500
# small images, held for as long as `out` lives (and, in a loop that appends outputs to a list,
# for the whole evaluation). `tracemalloc` confirms it from the outside: it measures how much
# memory is still allocated after the forward pass, with and without a graph. One thing to
# subtract: the CPU kernels keep the memory of dead arrays for the next step's arrays (a cache,
# [`tinytrain/kernels/cpu/memory.py`](../tinytrain/kernels/cpu/memory.py), which saves a
# training step thousands of page faults), so that memory is still allocated but holds nothing.

# %%
from tinytrain.kernels.cpu import memory


def retained_bytes(fn):
    # Bytes still allocated after fn() returns, while its result is alive, not counting the
    # blocks the kernels' cache keeps for reuse (emptied first, so that every block is new).
    memory.empty_cache()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = fn()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before - memory.cached_bytes(), result


out_graph = out_plain = loss_graph = None   # the graph above is freed (not `del`: re-runnable)
with_graph, kept = retained_bytes(lambda: model(xe))
del kept
with tt.no_grad():
    without_graph, kept = retained_bytes(lambda: model(xe))
del kept
print(f"memory kept alive by the output: {with_graph / 2**20:.1f} MiB with a graph,",
      f"{without_graph / 2**20:.2f} MiB under no_grad")
assert with_graph > 0.9 * saved and without_graph < 0.01 * with_graph

# %% [markdown]
# Under `no_grad` little is left: the output, 500 × 10 float32 (20,000 bytes), and a few
# small objects of the call, against the megabytes a graph keeps. What
# recording costs in *time* is small: a context and a few references per op, no extra
# arithmetic (the max pooling's arg-max is found again only if backward runs). The cell
# measures both forward passes; the price of a forgotten `no_grad` is memory.

# %%
def best_ms(fn, repeat=3):
    # The fastest of `repeat` runs, in milliseconds (after one warm-up run).
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


t_graph = best_ms(lambda: model(xe))
with tt.no_grad():
    t_plain = best_ms(lambda: model(xe))
    out_bytes = model(xe).numpy().nbytes
print(f"forward of 500 images: {t_graph:.0f} ms recording a graph, {t_plain:.0f} ms under no_grad;",
      f"the output alone: {out_bytes:,} bytes")
assert out_bytes == 500 * 10 * 4

# %% [markdown]
# A related slip is forgetting **`model.eval()`**. Dropout then keeps zeroing random hidden
# units during evaluation: the same images get different predictions on every call.

# %%
with tt.no_grad():
    model.train()                                 # the mistake: dropout still on
    a, b = model(xe).numpy(), model(xe).numpy()
    model.eval()
    c, d = model(xe).numpy(), model(xe).numpy()
print("train mode: identical on two calls?", np.array_equal(a, b),
      f"| predictions that differ: {(a.argmax(1) != b.argmax(1)).sum()} of {len(a)}")
print("eval mode:  identical on two calls?", np.array_equal(c, d))
assert not np.array_equal(a, b) and np.array_equal(c, d)

# %% [markdown]
# ## 10. The full MNIST
#
# The mini set is 1/12 of MNIST's training images, and one epoch is a short lesson. With the
# full data set (60,000 + 10,000 images) the same code trains the real thing. The package
# finds it in `$TINYTRAIN_DATA/mnist/` (or a per-user cache folder), and downloads it with
# MD5 checks when it is missing and a network is available (chapter 5). From a shell:
#
# ```
# export TINYTRAIN_DATA=/path/to/data       # a folder that holds mnist/
# python -m tinytrain.train --epochs 3      # the default: convnet, Adam 2e-3 with cosine decay
# python -m tinytrain.train --preset infinitrain   # InfiniTrain's run: cnn, SGD 0.01, 1 epoch
# ```
#
# What these reach on full MNIST, and how long they take on two CPU cores, is in
# [the README's table](../README.md#results-on-full-mnist-cpu-2-cores-seed-0). InfiniTrain
# reported 0.60 (MLP) and ~0.90 (CNN) after one epoch of its own recipe (plain SGD at lr 0.01),
# and the `--preset infinitrain` runs land next to those: one epoch of that recipe is not
# enough for either model.
#
# The command reports the test accuracy after every epoch, which is harmless as long as
# nothing is chosen by it; it has no validation split. Here we choose, so we split, with
# section 3's `fit`: the last 5,000 of the 60,000 training images are held out as the
# validation set, the model trains on the other 55,000, the epoch is chosen on the validation
# set, and the 10,000 test images are evaluated once, at the end.
#
# The cell looks for the full data set without downloading it. When it is there, it trains
# one epoch (the slowest cell of the chapter: it prints its time) and checks the 98.5% the
# default recipe promises; with `TINYTRAIN_FULL=1` it trains three epochs and checks 99%.
# Without the data set it says what it skipped.

# %%
from tinytrain.data import MNIST

try:
    full_test = MNIST(train=False, download=False)   # $TINYTRAIN_DATA/mnist, or the cache folder
    full_train = MNIST(train=True, download=False)
except (OSError, ValueError) as exc:
    full_test = None
    print("full MNIST not found here:", str(exc).splitlines()[0][:120])

if full_test is not None:
    epochs = 3 if os.environ.get("TINYTRAIN_FULL") == "1" else 1
    n_val = 5_000
    full_fit = Subset(full_train, range(len(full_train) - n_val))
    full_val = Subset(full_train, range(len(full_train) - n_val, len(full_train)))
    tt.manual_seed(SEED)
    full_model = build_model("convnet")
    fit(full_model, DataLoader(full_fit, batch_size=64, shuffle=True, seed=SEED),
        DataLoader(full_val, batch_size=1000), epochs, LR)
    final = train.evaluate(full_model, DataLoader(full_test, batch_size=1000))   # once
    print(f"{len(full_fit):,} training / {len(full_val):,} validation images, {epochs} epoch(s):",
          f"test accuracy {final.accuracy:.2%} ({final.correct:,}/{final.total:,})")
    assert final.total == 10_000 and final.accuracy >= (0.99 if epochs == 3 else 0.985), final
    if epochs == 1:
        print("set TINYTRAIN_FULL=1 to train three epochs here")
else:
    print("skipped: point TINYTRAIN_DATA at a folder holding mnist/ (or allow a download) to",
          "train on the full data set here.")

# %% [markdown]
# ## Summary
#
# * A model is a `Module` that registers its layers; `tinytrain.models` has InfiniTrain's `mlp`
#   and `cnn` and the default `convnet`. Forward hooks show the shape at every layer: the
#   unpooled CNN flattens 18,432 numbers per image, the convnet 1,568.
# * Three data sets, three jobs: the training set fits the weights, the validation set
#   chooses (here: the epoch), the test set reports, once, after every choice is made.
#   `Subset` splits without copying.
# * The training step is `zero_grad → model(x) → loss → backward → step`; evaluation runs
#   under `no_grad` and `model.eval()`. Seeds (`tt.manual_seed`, the DataLoader's `seed=`) make
#   every run the same. `tinytrain.train.main([...])` does the same job from one line.
# * From the same initial weights, on the same batches, tinytrain and PyTorch trace the same
#   loss curve: equal at first, then apart by float32 rounding only.
# * A profile of one step, from module hooks (forward) and timers around each node the engine
#   runs (backward), puts the convolutions at the top, then the passes over image-sized
#   activations that do no multiplication at all (max pooling, ReLU).
# * The confusion matrix and the confident mistakes show *where* the errors are; the conv1
#   filters become edge detectors, and a hook shows their feature maps.
# * `model.forward(x)` gives the same numbers as `model(x)` but silently skips that module's
#   hooks. Evaluating without `no_grad` gives the same predictions but keeps a graph with tens
#   of megabytes of activations alive; without `model.eval()`, dropout makes predictions
#   random.
#
# The package modules this chapter used:
#
# * [`tinytrain/models.py`](../tinytrain/models.py): `MnistMLP`, `MnistCNN`, `ConvNet`,
#   `build_model`
# * [`tinytrain/train.py`](../tinytrain/train.py): the training command, `evaluate`,
#   checkpoints and curves
# * [`tinytrain/nn/`](../tinytrain/nn/): `Module` and its hooks
#   ([`module.py`](../tinytrain/nn/module.py)), `Conv2d` and `MaxPool2d`
#   ([`conv.py`](../tinytrain/nn/conv.py)), `Linear`, `ReLU`, `Dropout`
#   ([`layers.py`](../tinytrain/nn/layers.py)), `cross_entropy`
#   ([`functional.py`](../tinytrain/nn/functional.py))
# * [`tinytrain/optim/`](../tinytrain/optim/): `Adam`, `SGD`
# * [`tinytrain/data/`](../tinytrain/data/): `MNISTMini`, `MNIST`, `DataLoader`
#
# **Previous:** [Chapter 5 — DataLoader](05_dataloader.ipynb) · **Next:** [Chapter 7 —
# data-parallel training](07_ddp.ipynb) runs this loop on several processes at once and keeps
# their models identical.
