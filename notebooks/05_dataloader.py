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
# # Chapter 5 — Data: IDX files, MNIST and the DataLoader
#
# A model only ever sees what the data pipeline hands it. If the pipeline hands it the wrong
# pixels, nothing crashes: the loss goes down a little more slowly, the accuracy ends a few points
# lower, and nobody knows why. This chapter builds the pipeline in small, checkable steps.
#
# **What you will build / learn in this chapter**
#
# 1. The **IDX format** that MNIST ships in, byte by byte: a hex dump of the header, and a
#    20-line reader.
# 2. A look at the **digits** themselves: a grid of images with their labels.
# 3. **The offset bug** that once shipped in InfiniTrain's MNIST loader: reproduced, seen,
#    fixed, and pinned down by a test.
# 4. **Batching and shuffling**: a `DataLoader` that is reproducible from a seed and different
#    every epoch.
# 5. The **shape-preserving stack**: a batch of `[1, 28, 28]` images is `[B, 1, 28, 28]`,
#    and a ragged batch is an error that names the culprits.
# 6. The **fast path**: fetching a whole batch with one fancy index instead of B calls.
# 7. **Sharding** for data-parallel training: which indices each rank gets (with a picture),
#    and what happens to the tail.
#
# Everything runs offline on **mnist-mini**, 6,000 real MNIST digits bundled with the repository
# (`assets/mnist-mini/`). The package modules this chapter explains are
# `tinytrain/data/idx.py`, `datasets.py`, `dataloader.py` and `sampler.py`.

# %%
# %matplotlib inline
import gzip
import struct

import matplotlib.pyplot as plt
import numpy as np

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain.data as data
from tinytrain.data import DataLoader, DistributedSampler, MNISTMini, TensorDataset

# %% [markdown]
# ## 1. The IDX format, byte by byte
#
# MNIST is distributed as four gzipped files in the **IDX** format, which is as simple as a file
# format gets: a 4-byte *magic number*, one 4-byte size per dimension, then the raw elements in
# row-major order. All multi-byte numbers are **big-endian** (most significant byte first).
#
# | bytes | meaning |
# | --- | --- |
# | 0–1 | always `00 00` |
# | 2 | element type: `08` uint8, `09` int8, `0B` int16, `0C` int32, `0D` float32, `0E` float64 |
# | 3 | number of dimensions *d* |
# | 4 … 4+4d | the *d* sizes, each a big-endian uint32 |
# | then | the data |
#
# The bundled mini set uses exactly the official layout, so let us open its training images and
# look at the first bytes.

# %%
mini = MNISTMini(train=True)
raw = gzip.decompress(mini.image_path.read_bytes())   # the .gz file, uncompressed
print(mini.image_path.name, f"{len(raw):,} bytes")


def hexdump(buf: bytes, start: int = 0, rows: int = 2, width: int = 16) -> None:
    for r in range(rows):
        off = start + r * width
        chunk = buf[off : off + width]
        print(f"{off:08x}  " + " ".join(f"{b:02x}" for b in chunk))


hexdump(raw, rows=2)

# %% [markdown]
# Read it left to right: `00 00` (magic), `08` (unsigned bytes), `03` (three dimensions), then
# `00 00 13 88` = 5000 images, `00 00 00 1c` = 28 rows, `00 00 00 1c` = 28 columns. The pixels
# start at byte 16. Here are the bytes around the start of the first image's middle row:
# nonzero values are ink.

# %%
hexdump(raw, start=16 + 14 * 28, rows=2, width=14)

magic, n, rows, cols = struct.unpack(">4I", raw[:16])   # ">" = big-endian, "I" = uint32
print(f"magic=0x{magic:08x}  n={n}  rows={rows}  cols={cols}")
assert magic == 0x00000803 and (n, rows, cols) == (5000, 28, 28)
assert len(raw) == 16 + n * rows * cols                 # nothing missing, nothing extra

# %% [markdown]
# ### Exercise 5.1 — parse an IDX header
#
# From the table above, write `parse_idx_header(buf)`: the element dtype (a big-endian NumPy
# dtype such as `np.dtype(">i4")`), the sizes as a tuple, and the byte offset where the
# elements start. Raise `ValueError` when the magic is not two zero bytes, the type code is not
# in the table, or `buf` is shorter than the header it declares. The checker makes IDX files
# of every type and of 1 to 4 dimensions with the package's writer and compares, then feeds
# your function broken headers.

# %%
def parse_idx_header(buf):
    """(dtype, dims, data_offset) of the IDX file content buf; ValueError for a bad header."""
    ### BEGIN SOLUTION
    types = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if len(buf) < 4 or buf[0] != 0 or buf[1] != 0:
        raise ValueError("not an IDX file: it must start with two zero bytes")
    if buf[2] not in types:
        raise ValueError(f"unknown IDX type code 0x{buf[2]:02X}")
    ndims = buf[3]
    if len(buf) < 4 + 4 * ndims:
        raise ValueError(f"truncated header: {ndims} dimensions need {4 + 4 * ndims} bytes")
    dims = struct.unpack(f">{ndims}I", buf[4 : 4 + 4 * ndims])
    return np.dtype(types[buf[2]]), dims, 4 + 4 * ndims
    ### END SOLUTION


# %% tags=["checker"]
from tinytrain.data.idx import idx_bytes

check_rng = np.random.default_rng(51)
for dtype in (np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64):
    for ndim in range(1, 5):
        arr_check = (100 * check_rng.standard_normal(tuple(check_rng.integers(1, 5, ndim))))
        arr_check = arr_check.astype(dtype)
        blob = idx_bytes(arr_check)                          # the package's writer
        dt, dims, offset = parse_idx_header(blob)
        where = f"the IDX bytes of a {arr_check.shape} array of {np.dtype(dtype)}"
        want = np.dtype(dtype).newbyteorder(">")
        assert np.dtype(dt) == want, f"{where}: dtype {np.dtype(dt).str!r}, expected " \
            f"{want.str!r}" + (": IDX files are big-endian" if np.dtype(dt).itemsize > 1 and
                              np.dtype(dt).newbyteorder(">") == want else "")
        assert tuple(dims) == arr_check.shape, (
            f"{where}: sizes {tuple(dims)}, expected {arr_check.shape} (each a big-endian "
            f"uint32)")
        assert offset == 4 + 4 * ndim, f"{where}: data offset {offset}, expected {4 + 4 * ndim}"
        decoded = np.frombuffer(blob, np.dtype(dt), offset=offset).reshape(dims)
        assert np.array_equal(decoded, arr_check), f"{where}: the decoded values differ"
for broken in [b"\x01\x00\x08\x01\x00\x00\x00\x01\x07",    # magic is not 00 00
               b"\x00\x01\x08\x01\x00\x00\x00\x01\x07",    # nor is this one
               b"\x00\x00\x07\x01\x00\x00\x00\x01\x07",    # no type 0x07
               b"\x00\x00\x08\x03\x00\x00\x00\x02",        # 3 sizes declared, 1 present
               b"\x00\x00"]:
    try:
        parse_idx_header(broken)
    except ValueError:
        continue
    except Exception as exc:  # noqa: BLE001 (what the answer raised instead)
        raise AssertionError(
            f"{broken!r} is not a valid header: expected a ValueError that says so, got "
            f"{type(exc).__name__}: {exc} (check the header's length before unpacking it)"
        ) from None
    raise AssertionError(f"{broken!r} is not a valid header: expected a ValueError")
print("Exercise 5.1: parse_idx_header reads every IDX type and rejects broken headers")

# %% [markdown]
# A reader is now a few lines: parse the header, check that the file has exactly the bytes the
# header promises, and let NumPy view the rest. The size check matters: a truncated download or
# a file with trailing junk must be an **error**, never a silently wrong array.

# %%
DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx_simple(buf: bytes) -> np.ndarray:
    if buf[:2] != b"\x00\x00" or buf[2] not in DTYPES:
        raise ValueError("not an IDX file")
    ndims = buf[3]
    dims = struct.unpack(f">{ndims}I", buf[4 : 4 + 4 * ndims])
    dtype = np.dtype(DTYPES[buf[2]])
    expected = 4 + 4 * ndims + int(np.prod(dims)) * dtype.itemsize
    if len(buf) != expected:
        raise ValueError(f"expected {expected} bytes, got {len(buf)}")
    return np.frombuffer(buf, dtype, offset=4 + 4 * ndims).reshape(dims)


images = read_idx_simple(raw)
labels = read_idx_simple(gzip.decompress(mini.label_path.read_bytes()))
print(images.shape, images.dtype, labels.shape, labels[:10])
assert images.shape == (5000, 28, 28) and labels.shape == (5000,)

# %% [markdown]
# The package's `read_idx` does the same, plus gzip, every IDX type, and error messages that
# name the file and the problem. Let us feed it a damaged file, as a broken download would
# produce one.

# %%
import tempfile
from pathlib import Path

with tempfile.TemporaryDirectory() as tmp:
    truncated = Path(tmp) / "train-images-idx3-ubyte"
    truncated.write_bytes(raw[:100_000])                 # a download cut short
    try:
        data.read_idx(truncated)
    except ValueError as e:
        message = str(e)
    print(message.replace(tmp, "<tmp>"))
    assert "truncated data" in message and "train-images-idx3-ubyte" in message

np.testing.assert_array_equal(data.read_idx(mini.image_path), images)

# %% [markdown]
# ## 2. What the digits look like
#
# Each image is 28x28 bytes, 0 (paper) to 255 (ink). A grid of the first 32 training images with
# their labels is the quickest sanity check there is: if the labels do not match the pictures,
# stop here.

# %%
fig, axes = plt.subplots(4, 8, figsize=(8, 4.6))
for i, ax in enumerate(axes.flat):
    ax.imshow(images[i], cmap="gray_r")
    ax.set_title(str(labels[i]), fontsize=10)
    ax.axis("off")
fig.suptitle("mnist-mini: the first 32 training images and their labels")
plt.tight_layout()
plt.show()

print("images per class:", np.bincount(labels))
assert np.bincount(labels).tolist() == [500] * 10

# %% [markdown]
# ## 3. The offset bug: reproduced and fixed
#
# A network wants float32 pixels in [0, 1], so a loader converts: `pixel / 255`. Where the
# conversion happens matters. InfiniTrain's C++ loader once converted the whole buffer to
# float32 first and *then* cut it into samples, computing sample *i*'s offset as
# `i * 784 * sizeof(uint8_t)`. After the conversion every pixel takes 4 bytes, so that offset
# points a quarter of the way into the right place. Sample 0 is correct (offset 0), which is
# exactly why a quick look at the first image did not catch it.
#
# Let us write that loader in NumPy, byte offsets and all.

# %%
pixels = np.frombuffer(raw, np.uint8, offset=16)           # all images, flat
as_float = pixels.astype(np.float32) / 255                 # converted first ...
float_bytes = as_float.view(np.uint8)                      # ... as the raw memory a C++ loader sees

SAMPLE = 28 * 28


def sample_buggy(i: int) -> np.ndarray:
    offset = i * SAMPLE * np.dtype(np.uint8).itemsize      # BUG: uint8 size, float32 buffer
    return float_bytes[offset : offset + SAMPLE * 4].view(np.float32).reshape(28, 28)


def sample_fixed(i: int) -> np.ndarray:
    offset = i * SAMPLE * np.dtype(np.float32).itemsize    # the element size of the buffer
    return float_bytes[offset : offset + SAMPLE * 4].view(np.float32).reshape(28, 28)


fig, axes = plt.subplots(2, 6, figsize=(9, 3.4))
for i in range(6):
    axes[0, i].imshow(sample_buggy(i), cmap="gray_r")
    axes[1, i].imshow(sample_fixed(i), cmap="gray_r")
    axes[0, i].set_title(f"buggy #{i}", fontsize=9)
    axes[1, i].set_title(f"fixed #{i}: {labels[i]}", fontsize=9)
for ax in axes.flat:
    ax.axis("off")
plt.tight_layout()
plt.show()


# %% [markdown]
# Buggy sample *i* starts at float `i * 784 / 4 = 196 i` instead of `784 i`: samples 1–3 are
# slices that straddle images 0 and 1, sample 4 *is* image 1, sample 8 is image 2, and so on.
# Real digit strokes, under the wrong labels. A network trained on that still learns something,
# which is what makes the bug so quiet.
#
# The cure is a test that **pins every sample to the raw file**: sample *i* must equal bytes
# `16 + i*784 … 16 + (i+1)*784` of the images file, divided by 255. It cannot pass by accident,
# and it is in `tests/test_data_datasets.py` for the bundled set and for the full MNIST.

# %%
def expected_sample(i: int) -> np.ndarray:
    chunk = raw[16 + i * 784 : 16 + (i + 1) * 784]
    return (np.frombuffer(chunk, np.uint8).astype(np.float32) / 255).reshape(1, 28, 28)


for i in [0, 1, 2, 3, 1234, len(mini) - 1]:
    x, y = mini[i]
    assert x.dtype == np.float32 and x.shape == (1, 28, 28)
    np.testing.assert_array_equal(x, expected_sample(i))       # the package: right
    np.testing.assert_array_equal(sample_fixed(i), expected_sample(i)[0])

assert np.array_equal(sample_buggy(0), expected_sample(0)[0])   # the bug hides at i = 0 ...
assert not np.array_equal(sample_buggy(1), expected_sample(1)[0])  # ... and shows at i = 1
assert np.array_equal(sample_buggy(4), expected_sample(1)[0])   # image 1, labelled labels[4]
print("sample offsets pinned to the raw file")


# %% [markdown]
# ## 4. Batching and shuffling
#
# Training uses *mini-batches*: B samples at a time. A data loader has three jobs:
#
# 1. decide the **order** of the indices of one epoch (in order for evaluation, shuffled for
#    training);
# 2. cut that order into batches of B (the last one may be smaller: keep it, or `drop_last`);
# 3. fetch the samples of each batch and **stack** them into arrays.
#
# Shuffling must be *reproducible* (the same seed gives the same run) and yet *different every
# epoch* (or the network sees the same sequence of batches over and over). Both follow if the
# order of epoch *e* is a pure function of `(seed, e)`. Here is the whole loader in a few lines.

# %%
def simple_loader(dataset, batch_size, shuffle=False, seed=0, epoch=0, drop_last=False):
    n = len(dataset)
    order = np.random.default_rng((seed, epoch)).permutation(n) if shuffle else np.arange(n)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        batch = [dataset[int(i)] for i in order[start : start + batch_size]]
        yield tuple(np.stack(field) for field in zip(*batch))


batches = list(simple_loader(mini, batch_size=64, shuffle=True, seed=0))
x, y = batches[0]
print(len(batches), "batches;", "x", x.shape, x.dtype, "| y", y.shape, y.dtype,
      "| last batch", batches[-1][0].shape[0], "samples")
assert len(batches) == -(-5000 // 64) and batches[-1][0].shape[0] == 5000 % 64

# %% [markdown]
# The package's `DataLoader` has the same semantics. Every `for` loop over it is one epoch,
# `len(loader)` is the number of batches, and batches are tinytrain Tensors. With the same seed
# it produces exactly our batches.
#
# Its arguments are PyTorch's *names*, not PyTorch's *order*. The names the two share
# (`batch_size`, `shuffle`, `sampler`, `drop_last`, `collate_fn`, ...) mean the same thing, but
# `torch.utils.data.DataLoader` takes `sampler` before `drop_last` (with other arguments in
# between), makes a shuffle reproducible with a `generator` object (or the global
# `torch.manual_seed`) where tinytrain takes `generator=` too (a `tt.Generator`: NumPy's
# PCG64, so not PyTorch's numbers) and also an integer `seed` (not both at once), and has no
# `device`: tinytrain's `device="cuda"` keeps the whole
# stacked data set on the GPU, so that a batch is one gather there. So pass everything after
# `batch_size` **by keyword**; the same call then means the same in both (a seed aside). The
# cell prints both signatures (the second only when PyTorch is installed) and checks these
# differences.

# %%
import inspect

ours = list(inspect.signature(DataLoader).parameters)
print("tinytrain:", inspect.signature(DataLoader))
assert ours.index("drop_last") < ours.index("sampler") and {"seed", "device"} <= set(ours)
try:
    import torch.utils.data

    theirs = list(inspect.signature(torch.utils.data.DataLoader).parameters)
    print("PyTorch:  ", inspect.signature(torch.utils.data.DataLoader))
    print("names in both:", [name for name in ours if name in theirs])
    assert theirs.index("sampler") < theirs.index("drop_last")
    assert "generator" in theirs and not {"seed", "device"} & set(theirs)
except ImportError:
    print("PyTorch is not installed: its signature is not shown")

# %%
loader = DataLoader(mini, batch_size=64, shuffle=True, seed=0)
print("len(loader) =", len(loader))
for (xa, ya), (xb, yb) in zip(loader, batches, strict=True):
    np.testing.assert_array_equal(xa.numpy(), xb)
    np.testing.assert_array_equal(ya.numpy(), yb)

# every epoch is a new permutation, the sequence of epochs is reproducible
index_ds = TensorDataset(np.arange(20))
a = DataLoader(index_ds, batch_size=20, shuffle=True, seed=7)
b = DataLoader(index_ds, batch_size=20, shuffle=True, seed=7)
epochs_a = [next(iter(a))[0].numpy() for _ in range(3)]
epochs_b = [next(iter(b))[0].numpy() for _ in range(3)]
for e, order in enumerate(epochs_a):
    print(f"epoch {e}: {order}")
assert all(np.array_equal(p, q) for p, q in zip(epochs_a, epochs_b))
assert not np.array_equal(epochs_a[0], epochs_a[1])
assert len(DataLoader(mini, 64, drop_last=True)) == 5000 // 64

# %% [markdown]
# ### Exercise 5.2 — the batches of an epoch
#
# Write `epoch_batches(order, batch_size, drop_last)`: the epoch's `order` of indices (a NumPy
# array) cut into consecutive batches of `batch_size`, the last one smaller, or left out with
# `drop_last=True` when it is not full. The checker compares your batches with the
# package's `DataLoader` over a data set whose samples are their own indices, with and
# without shuffling, including an epoch shorter than one batch.

# %%
def epoch_batches(order, batch_size, drop_last=False):
    """The list of index batches (arrays) of one epoch that visits the indices in order."""
    ### BEGIN SOLUTION
    stop = len(order) - len(order) % batch_size if drop_last else len(order)
    return [order[start:start + batch_size] for start in range(0, stop, batch_size)]
    ### END SOLUTION


# %% tags=["checker"]
for n_check, batch_size, drop_last in [(20, 6, False), (20, 6, True), (18, 6, True),
                                       (5, 8, False), (5, 8, True), (64, 64, False)]:
    for shuffle in (False, True):
        order = (np.random.default_rng((3, 0)).permutation(n_check) if shuffle
                 else np.arange(n_check))                    # epoch 0 of seed 3
        loader_check = DataLoader(TensorDataset(np.arange(n_check)), batch_size,
                                  shuffle=shuffle, drop_last=drop_last, seed=3)
        expected = [batch.numpy() for (batch,) in loader_check]
        mine = [np.asarray(b) for b in epoch_batches(order, batch_size, drop_last)]
        where = (f"{n_check} samples, batch_size={batch_size}, drop_last={drop_last}, "
                 f"shuffle={shuffle}")
        assert len(mine) == len(expected) == len(loader_check), (
            f"{where}: {len(mine)} batches, expected {len(expected)}")
        for k, (got, want) in enumerate(zip(mine, expected)):
            assert np.array_equal(got, want), (
                f"{where}: batch {k} is {got.tolist()}, expected {want.tolist()}")
print("Exercise 5.2: epoch_batches cuts epochs as the DataLoader does")

# %% [markdown]
# ## 5. The shape-preserving stack
#
# What shape should a batch have? A sample is an image `[1, 28, 28]` (one channel, 28 rows, 28
# columns) and a label `[]`. Stacking keeps the sample's shape and adds the batch axis in front:
# `[B, 1, 28, 28]` and `[B]`. A convolution needs exactly that layout (NCHW), and a model that
# wants flat vectors says so itself with a `Flatten` layer.
#
# The alternative, concatenating samples into one flat buffer `[B * 784]` and letting every
# consumer guess the shape, loses information the data set had; InfiniTrain's first loader did
# that, and its CNN had to know that 784 means 1x28x28.

# %%
samples = [mini[i][0] for i in range(4)]
stacked = np.stack(samples)                 # keeps [1, 28, 28], adds B in front
flat = np.concatenate([s.reshape(-1) for s in samples])
print("stack:", stacked.shape, "  flat concatenation:", flat.shape)
assert stacked.shape == (4, 1, 28, 28)
np.testing.assert_array_equal(stacked.reshape(-1), flat)   # same numbers, but the shape is kept

# %% [markdown]
# Stacking also checks: all samples of a batch must have the same shape and dtype. When they do
# not (a ragged batch: one image was cropped), the package's `collate` refuses and names both
# samples, their data set indices and both shapes, instead of a NumPy error from deep inside.

# %%
ragged = [(np.zeros((1, 28, 28), np.float32), 3), (np.zeros((1, 28, 27), np.float32), 5)]
try:
    data.collate(ragged, indices=[10, 11])
except ValueError as e:
    message = str(e)
print(message)
assert "(1, 28, 27)" in message and "(1, 28, 28)" in message and "dataset index 11" in message

# %% [markdown]
# ### Exercise 5.3 — a shape-preserving collate
#
# Write `stack_batch(samples)`: `samples` is a list of B tuples with the same number of fields
# (an image array, an integer label, ...); the result is a tuple with one array per field,
# of shape `[B, *field shape]`. When two samples' fields differ in shape, raise a
# `ValueError` whose message names both shapes. The checker compares with the package's
# `collate` on random samples and on the mini set, and tries a ragged batch.

# %%
def stack_batch(samples):
    """Stack B samples (tuples of fields) field by field: one array [B, *shape] per field."""
    ### BEGIN SOLUTION
    fields = []
    for k, column in enumerate(zip(*samples)):
        arrays = [np.asarray(v) for v in column]
        for arr in arrays:
            if arr.shape != arrays[0].shape:
                raise ValueError(f"field {k}: shapes {arrays[0].shape} and {arr.shape} differ")
        fields.append(np.stack(arrays))
    return tuple(fields)
    ### END SOLUTION


# %% tags=["checker"]
check_rng = np.random.default_rng(53)
batches_check = [[mini[i] for i in range(7)]]                   # (image, label) pairs
for _ in range(5):
    shape = tuple(int(v) for v in check_rng.integers(1, 4, check_rng.integers(0, 4)))
    batches_check.append([(check_rng.standard_normal(shape).astype(np.float32),
                           int(check_rng.integers(10)), float(check_rng.random()))
                          for _ in range(int(check_rng.integers(1, 6)))])
for batch in batches_check:
    mine = stack_batch(batch)
    expected = data.collate(batch)
    assert len(mine) == len(expected), f"{len(mine)} fields, expected {len(expected)}"
    for k, (got, want) in enumerate(zip(mine, expected)):
        got = np.asarray(got)
        assert got.shape == want.shape, f"field {k}: shape {got.shape}, expected {want.shape}"
        assert got.dtype == want.dtype, (f"field {k}: dtype {got.dtype}, expected {want.dtype} "
                                         "(Python ints stack to int64, floats to float64)")
        assert np.array_equal(got, want), f"field {k}: the values differ from collate's"
assert stack_batch([mini[0], mini[1]])[0].shape == (2, 1, 28, 28)
try:
    stack_batch([(np.zeros((1, 28, 28)), 3), (np.zeros((1, 28, 27)), 5)])
except ValueError as err:
    assert "(1, 28, 28)" in str(err) and "(1, 28, 27)" in str(err), f"message: {err}"
else:
    raise AssertionError("a ragged batch must raise ValueError")
print("Exercise 5.3: stack_batch matches collate and refuses ragged batches")

# %% [markdown]
# ## 6. The fast path: one fancy index per batch
#
# `simple_loader` calls `dataset[i]` B times per batch (each a small Tensor and an int, as
# torchvision's MNIST gives) and then stacks B small arrays: for
# MNIST that is ~60,000 Python calls per epoch, each doing a tiny bit of work. But MNIST keeps
# all images in one uint8 array `[N, 28, 28]`, so a whole batch is a single NumPy *fancy index*
# `images[indices]`, converted to float32 in one go. A data set that can do this offers
# `get_batch(indices)`, and the `DataLoader` uses it whenever it exists.
#
# One rule keeps it honest: the fast path must return **exactly** what the slow path returns
# (same numbers, same dtype: both divide the same bytes by the same float32 255), and a test
# checks that it does. The same rule decides when it is *not* used: a subclass that
# overrides `__getitem__` (to augment a sample, or to add its index) but inherits
# `get_batch` would get batches that skip its own code, so the `DataLoader` fetches its
# samples one by one instead. (Why keep uint8 and convert per batch rather than store float32
# once? A quarter of the memory, and no conversion of the whole set before the first batch:
# the cell below measures both on mini-MNIST. On the development machine a shuffled epoch
# of full MNIST was also faster that way; `bench/dataloader.py` measures it on yours.)

# %%
import time


class GetItemOnly(data.Dataset):
    # the same samples, but only through __getitem__: the DataLoader must take the slow path
    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return self.ds[i]


def epoch_time(loader) -> float:
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - t0


fast = DataLoader(mini, batch_size=64, shuffle=True, seed=1)
slow = DataLoader(GetItemOnly(mini), batch_size=64, shuffle=True, seed=1)
for (xf, yf), (xs, ys) in zip(fast, slow, strict=True):
    assert xf.dtype == xs.dtype and yf.dtype == ys.dtype
    np.testing.assert_array_equal(xf.numpy(), xs.numpy())
    np.testing.assert_array_equal(yf.numpy(), ys.numpy())
print("fast path == slow path, batch for batch")

t_fast, t_slow = min(epoch_time(fast) for _ in range(3)), min(epoch_time(slow) for _ in range(3))
print(f"one epoch of mnist-mini: fast path {t_fast * 1e3:.0f} ms, slow path {t_slow * 1e3:.0f} ms "
      f"(about {t_slow / t_fast:.0f}x)")

t0 = time.perf_counter()
as_float = mini.images.astype(np.float32) / np.float32(255)  # what storing float32 would cost
t_convert = time.perf_counter() - t0
print(f"stored as float32, mnist-mini's {len(mini):,} images would take "
      f"{as_float.nbytes / mini.images.nbytes:.0f}x the memory ({as_float.nbytes / 2**20:.1f} MiB) "
      f"and {t_convert * 1e3:.0f} ms to convert before the first batch (x12 for full MNIST)")
assert as_float.nbytes == 4 * mini.images.nbytes

# %% [markdown]
# `bench/dataloader.py` runs the same comparison on the full 60,000-image MNIST training set,
# against `torch.utils.data.DataLoader` over a `TensorDataset` of the same arrays.
#
# ## 7. Sharding for several ranks
#
# In data-parallel training ([chapter 7](07_ddp.ipynb)) R processes, the *ranks*, each train on
# their own part of every epoch and average their gradients. The `DistributedSampler` deals the
# indices out:
# all ranks compute the same order (the same `(seed, epoch)`), and rank *r* takes positions
# `r, r + R, r + 2R, …`. Three properties matter:
#
# * **disjoint**: no two ranks see the same sample in an epoch (except the few padded
#   repeats of the tail below; with `drop_last=True` exactly disjoint);
# * **same length on every rank**: every rank runs the same number of steps, otherwise the
#   gradient all-reduce of the last step waits forever for a rank that has already finished;
# * a **documented tail**: when R does not divide n, either *pad* the order with its first few
#   indices (`drop_last=False`, the default: a few samples appear twice) or *drop* the last
#   `n % R` (`drop_last=True`).
#
# Here is which rank gets which index, for 22 samples and 4 ranks.

# %%
n, R = 22, 4
fig, axes = plt.subplots(3, 1, figsize=(9, 4.2))
settings = [
    ("shuffle=False, drop_last=False (padded)", dict(shuffle=False, drop_last=False)),
    ("shuffle=True, drop_last=False (padded)", dict(shuffle=True, drop_last=False)),
    ("shuffle=True, drop_last=True (tail dropped)", dict(shuffle=True, drop_last=True)),
]
for ax, (title, kw) in zip(axes, settings):
    shards = [DistributedSampler(range(n), num_replicas=R, rank=r, seed=0, **kw) for r in range(R)]
    figures.draw_shards(ax, shards, n, title + f": {len(shards[0])} samples per rank")
figures.rank_legend(fig, R)
plt.tight_layout(rect=(0, 0.08, 1, 1))
plt.show()

# %% [markdown]
# Top row: without shuffling, rank *r* gets *r, r+4, r+8, …*; 22 = 5·4 + 2, so the order is
# padded with indices 0 and 1 (hatched, below): ranks 2 and 3 get them, though ranks 0 and 1
# have them already, so samples 0 and 1 are seen twice in this epoch.
# Middle: the same after a shuffle. Bottom: with `drop_last=True`, two samples (white) are left
# out of this epoch instead. `padding_mask()` tells a rank which of its samples are padding, so
# an evaluation can leave them out of its counts. Let us check the properties on the mini set.

# %%
for drop_last in (False, True):
    shards = [DistributedSampler(mini, num_replicas=3, rank=r, seed=0, drop_last=drop_last)
              for r in range(3)]
    for s in shards:
        s.set_epoch(2)                                 # like PyTorch: call it every epoch
    parts = [s.indices() for s in shards]
    lengths = {len(p) for p in parts}
    real = np.concatenate([p[~s.padding_mask()] for p, s in zip(parts, shards)])
    print(f"drop_last={drop_last}: {lengths.pop()} samples per rank,",
          f"{len(real)} distinct samples seen of {len(mini)}")
    assert len({len(p) for p in parts}) == 1           # same length on every rank
    assert len(set(real.tolist())) == len(real)        # disjoint
    assert len(real) == (len(mini) if not drop_last else len(mini) // 3 * 3)

loaders = [DataLoader(mini, batch_size=64, sampler=DistributedSampler(mini, 3, r, seed=0))
           for r in range(3)]
assert len({len(dl) for dl in loaders}) == 1           # the same number of steps on every rank
print("batches per rank:", [len(dl) for dl in loaders])

# %% [markdown]
# ### Exercise 5.4 — one rank's shard
#
# Write `shard(order, num_replicas, rank, drop_last)`: given the epoch's `order` (the same
# on every rank), make its length a multiple of `num_replicas` — by appending its own first
# indices again (wrapping around if the order is very short), or with `drop_last=True` by
# cutting the tail — and return the positions `rank, rank + R, rank + 2R, ...` of the result.
# The checker compares with the package's `DistributedSampler`, shuffled and not, for data
# sets larger and smaller than the number of ranks.

# %%
def shard(order, num_replicas, rank, drop_last=False):
    """Rank `rank`'s indices of an epoch's order, padded (or cut) to a multiple of R."""
    ### BEGIN SOLUTION
    n = len(order)
    total = (n // num_replicas if drop_last else -(-n // num_replicas)) * num_replicas
    padded = np.resize(order, total)              # repeats the order from its start
    return padded[rank:total:num_replicas]
    ### END SOLUTION


# %% tags=["checker"]
for n_check, replicas in [(22, 4), (24, 4), (10, 3), (3, 5), (2, 7), (1, 2), (101, 8)]:
    for shuffle in (False, True):
        for drop_last in (False, True):
            order = (np.random.default_rng((0, 2)).permutation(n_check) if shuffle
                     else np.arange(n_check))                # seed 0, epoch 2
            for r in range(replicas):
                sampler = DistributedSampler(range(n_check), replicas, r, shuffle=shuffle,
                                             seed=0, drop_last=drop_last)
                sampler.set_epoch(2)
                got = np.asarray(shard(order, replicas, r, drop_last))
                assert np.array_equal(got, sampler.indices()), (
                    f"{n_check} samples, num_replicas={replicas}, rank={r}, "
                    f"shuffle={shuffle}, drop_last={drop_last}: got {got.tolist()}, "
                    f"expected {sampler.indices().tolist()}")
print("Exercise 5.4: shard matches DistributedSampler")

# %% [markdown]
# ## Summary
#
# * An IDX file is a 4-byte magic (`00 00`, type, ndims), big-endian sizes and the raw data;
#   a reader must check that the file has exactly the bytes its header promises.
# * Sample offsets must be computed in the element size of the buffer they index. A test that
#   pins every sample to the raw file bytes catches the InfiniTrain bug, which a look at sample
#   0 cannot.
# * A `DataLoader` is: an order (seeded per epoch), batches of B (keep or drop the tail), and a
#   shape-preserving stack `[B, *sample_shape]` that refuses ragged batches.
# * Fetching a batch with one fancy index gives the same numbers many times faster.
# * `DistributedSampler` gives every rank a disjoint shard of the same length, padding (a few
#   repeats) or dropping the tail.
#
# **What the package has that we did not build here:** downloads from several mirrors with MD5
# checks, a progress bar and atomic writes; Fashion-MNIST (also found where Debian's
# `dataset-fashion-mnist` puts it); `Subset`, `random_split` and the samplers; and
# `device="cuda"`, which keeps the stacked data set on the GPU.
#
# The package modules this chapter produced:
#
# * [`tinytrain/data/idx.py`](../tinytrain/data/idx.py): `read_idx`, `write_idx`
# * [`tinytrain/data/datasets.py`](../tinytrain/data/datasets.py): `MNIST`, `FashionMNIST`,
#   `MNISTMini`, downloads
# * [`tinytrain/data/dataloader.py`](../tinytrain/data/dataloader.py): `Dataset`,
#   `TensorDataset`, `Subset`, `collate`, `DataLoader`
# * [`tinytrain/data/sampler.py`](../tinytrain/data/sampler.py): `RandomSampler`,
#   `DistributedSampler`
# * tests: [`tests/test_data_idx.py`](../tests/test_data_idx.py),
#   [`tests/test_data_datasets.py`](../tests/test_data_datasets.py),
#   [`tests/test_data_dataloader.py`](../tests/test_data_dataloader.py); benchmark:
#   [`bench/dataloader.py`](../bench/dataloader.py); the bundled set:
#   [`assets/mnist-mini/`](../assets/mnist-mini/README.md)
#
# **Previous:** [Chapter 4 — CUDA im2col](04_cuda_im2col.ipynb) · **Next:** [Chapter 6 —
# training on MNIST](06_mnist.ipynb) feeds these batches to an MLP and a CNN.
