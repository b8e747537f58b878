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
# # Chapter 1 — Tensors: arrays, shapes, strides and broadcasting
#
# Every deep-learning framework is, at its bottom, a way to push large arrays of numbers
# through a chain of operations. Before we can differentiate anything (chapter 2) or
# convolve anything (chapter 3), we need to be precise about what an array *is*: a flat
# block of memory plus a little metadata that says how to walk through it.
#
# **What you will build / learn in this chapter**
#
# 1. How a NumPy array is laid out in memory: `shape`, `dtype` and `strides`, and why a
#    transpose or a slice costs nothing (it is a *view* with other strides) while a copy costs
#    time in proportion to its bytes — measured. Plus a first look at `as_strided`, the trick
#    chapter 3 uses to build `im2col` without loops.
# 2. **You build** a strided array of your own — shape, strides and an offset over a flat
#    buffer — whose transpose, slices and broadcasts are views that share the buffer, checked
#    against NumPy; and the **leading dimension** that BLAS uses to read a block of a bigger
#    matrix in place (chapter 3's convolution depends on it).
# 3. Broadcasting: the rule, a picture, the error you get when it fails, and why the
#    gradient of a broadcast op must be **summed back** to the input's shape
#    (`unbroadcast` in `tinytrain/autograd/ops.py`).
# 4. What a tinytrain `Tensor` adds on top of an array: a device, a dtype policy,
#    `requires_grad`, `grad` and `grad_fn`, and clear error messages.
# 5. Why one code path serves both NumPy (CPU) and CuPy (GPU): `get_array_module`.
#
# The package modules this chapter explains are `tinytrain/tensor.py` and
# `tinytrain/backend.py`.

# %% [markdown]
# ## 0. Set-up check
#
# First make sure the environment is sane: `tinytrain.doctor` prints the Python, NumPy,
# CuPy/GPU and MPI situation of this machine. Nothing later in this chapter needs a GPU.

# %%
import tinytrain.doctor

status = tinytrain.doctor.main()
assert status == 0

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import numpy as np

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain as tt

np.set_printoptions(precision=4, suppress=True)


def show_error(fn):
    # Run fn(), which must fail; print the error type and message, and return the exception.
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - we want to display any error
        print(f"{type(exc).__name__}: {exc}")
        return exc
    raise AssertionError("expected an error, but none was raised")


# %% [markdown]
# ## 1. A NumPy array is a buffer plus a recipe
#
# An `ndarray` owns (or borrows) one flat, contiguous block of bytes. Three pieces of
# metadata turn that block into an n-dimensional array:
#
# * `dtype` — what one element is (`float32` is 4 bytes),
# * `shape` — how many elements along each axis,
# * `strides` — how many **bytes** to jump to move one step along each axis.
#
# Element `a[i, j]` lives at byte offset `i * strides[0] + j * strides[1]` from the start of
# the buffer. That is the whole trick.

# %%
a = np.arange(6, dtype=np.float32).reshape(2, 3)
print(a)
print("shape   ", a.shape)
print("dtype   ", a.dtype, f"({a.itemsize} bytes per element)")
print("strides ", a.strides, "bytes")
assert a.strides == (3 * 4, 4)   # next row: skip 3 floats; next column: skip 1 float


# %% [markdown]
# Let us check the formula by hand: compute the byte offset of every element and read the
# element back from the flat buffer.

# %%
def byte_offset(arr, index):
    return sum(i * s for i, s in zip(index, arr.strides))


buffer = a.reshape(-1)          # the flat buffer (a view: no copy, a is contiguous)
for index in np.ndindex(a.shape):
    off = byte_offset(a, index)
    assert buffer[off // a.itemsize] == a[index]
    print(f"a{index} = {a[index]:.0f}  at byte {off:2d}")

# %% [markdown]
# ### Exercise 1.1 — the strides of a new array
#
# A new array is C-contiguous: along the last axis the next element is `itemsize` bytes
# further, and one step along any other axis jumps over everything the axes after it hold.
# Write `contiguous_strides(shape, itemsize)`, the strides NumPy gives `np.empty(shape, dtype)`.
# The checker compares your strides with NumPy's for random shapes of 0 to 4 dimensions.

# %%
def contiguous_strides(shape, itemsize):
    """The strides, in bytes, of a C-contiguous array of this shape (a tuple, like shape)."""
    ### BEGIN SOLUTION
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))
    ### END SOLUTION


# %% tags=["checker"]
got = contiguous_strides((2, 3), 4)
assert tuple(got) == a.strides, f"shape (2, 3), 4-byte items: returned {got}, NumPy's {a.strides}"
check_rng = np.random.default_rng(11)
for dtype in (np.float32, np.float64, np.int8, np.int16):
    for ndim in range(5):
        shape = tuple(int(n) for n in check_rng.integers(1, 6, ndim))
        expected = np.empty(shape, dtype).strides
        got = contiguous_strides(shape, np.dtype(dtype).itemsize)
        assert tuple(got) == expected, f"shape {shape}, {np.dtype(dtype)}: {got} != {expected}"
print("Exercise 1.1: contiguous_strides agrees with NumPy")

# %% [markdown]
# ### Transposes and slices are views
#
# `a.T` does not move a single byte: it is a new array object over **the same buffer**
# with the strides swapped. Slicing with a step (`a[:, ::2]`) multiplies a stride; picking a
# row (`a[1]`) moves the start pointer. All of these are *views*: `np.shares_memory` says so,
# and writing through a view changes the original.

# %%
t = a.T
print("a.T strides:", t.strides, "  shares memory with a:", np.shares_memory(a, t))
s = a[:, ::2]
print("a[:, ::2] =\n", s, "\nstrides:", s.strides, "  shares memory:", np.shares_memory(a, s))
r = a[1]
print("a[1] =", r, " strides:", r.strides, "  shares memory:", np.shares_memory(a, r))

assert t.strides == (4, 12) and s.strides == (12, 8)
assert np.shares_memory(a, t) and np.shares_memory(a, s) and np.shares_memory(a, r)

# fancy indexing (a list of indices) is different: it always copies
f = a[[0, 1], :]
print("a[[0, 1], :] shares memory:", np.shares_memory(a, f))
assert not np.shares_memory(a, f)

# %%
b = a.copy()
view = b.T
view[2, 0] = 100.0            # write through the transposed view ...
print(b)                      # ... and the original changed: b[0, 2] is now 100
assert b[0, 2] == 100.0


# %% [markdown]
# ### A picture of the memory layout
#
# Below: the flat buffer (top), `a` as a 2x3 grid and `a.T` as a 3x2 grid. Each cell shows
# its value and, underneath, the byte offset where it lives. The colour is the position in
# memory. In `a` the colours run along the rows (*row-major*, "C order"); in `a.T` the same
# colours run down the columns — same bytes, different walk.

# %%
fig = plt.figure(figsize=(9, 5))
ax0 = fig.add_axes([0.05, 0.72, 0.9, 0.2])
figures.draw_memory_grid(ax0, a.reshape(1, -1), a,
                         "the buffer: what is really in memory (6 x 4 = 24 bytes)",
                         show_meta=False)
figures.draw_memory_grid(fig.add_axes([0.08, 0.05, 0.4, 0.55]), a, a, "a")
figures.draw_memory_grid(fig.add_axes([0.58, 0.05, 0.3, 0.55]), a.T, a, "a.T (a view)")
plt.show()

# %% [markdown]
# ### Contiguous or not
#
# An array is **C-contiguous** when walking it in row-major order visits the buffer in
# order, with no gaps. `a` is; `a.T` and `a[:, ::2]` are not. Many kernels (our CUDA kernels
# in chapter 4, for one) want contiguous inputs, so a framework sometimes has to make a
# contiguous *copy* — `np.ascontiguousarray` — and NumPy's `reshape` silently copies too
# when the new shape cannot be walked with strides over the same buffer (flattening a
# transpose, say). Copies cost memory and time, so it pays to know when they happen.

# %%
for name, arr in [("a", a), ("a.T", a.T), ("a[:, ::2]", a[:, ::2])]:
    print(f"{name:10s} C-contiguous: {arr.flags['C_CONTIGUOUS']}")

c = np.ascontiguousarray(a.T)
print("\nascontiguousarray(a.T): strides", c.strides, " shares memory:", np.shares_memory(a, c))
assert c.flags["C_CONTIGUOUS"] and not np.shares_memory(a, c)

# reshape is a view when it can be, a copy when it must be
assert np.shares_memory(a, a.reshape(3, 2))          # contiguous: a view
assert not np.shares_memory(a, a.T.reshape(-1))      # transposed: must copy
print("a.reshape(3, 2) is a view; a.T.reshape(-1) is a copy:", a.T.reshape(-1))

# %% [markdown]
# tinytrain follows PyTorch here, which makes the difference explicit: `reshape` is a view
# when the strides allow it and a copy otherwise, while `view` is **always** a view and raises
# when the strides do not allow one. (A tinytrain tensor's transpose, slices and views are
# NumPy views of the tensor's array, so `np.shares_memory` can tell.)

# %%
ta = tt.arange(6.0).reshape(2, 3)
assert np.shares_memory(ta.numpy(), ta.T.numpy())                 # a transpose is a view
assert np.shares_memory(ta.numpy(), ta.view(3, 2).numpy())        # contiguous: view works
assert not np.shares_memory(ta.numpy(), ta.T.reshape(-1).numpy())  # reshape had to copy
e = show_error(lambda: ta.T.view(-1))                              # view refuses to copy
assert isinstance(e, RuntimeError)

# %% [markdown]
# ### What a copy costs
#
# A view costs the same whatever the array's size: it is a new small object with other
# metadata. A copy reads and writes every byte, so its cost grows with the size, and a copy
# that reads in another order than it writes (`np.ascontiguousarray(a.T)`: it reads down the
# columns) is slower still, because consecutive reads land far apart in memory and each cache
# line brought in is mostly wasted. Let us time them on square float32 matrices from 4 KiB to
# 16 MiB (best of five runs; the numbers depend on the machine and on what else it is doing).

# %%
import timeit


def best_seconds(fn, number):
    # the best of five timings of `number` calls, per call: the least disturbed run
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


sides = [32, 64, 128, 256, 512, 1024, 2048]
ways = {
    "view: a.T": lambda m, t: m.T,
    "view: a[:, ::2]": lambda m, t: m[:, ::2],
    "view: tinytrain t.T": lambda m, t: t.T,
    "copy: a.copy()": lambda m, t: m.copy(),
    "copy: ascontiguousarray(a.T)": lambda m, t: np.ascontiguousarray(m.T),
}
times = {name: [] for name in ways}
for n in sides:
    m = np.ones((n, n), dtype=np.float32)
    t = tt.tensor(m)
    for name, way in ways.items():
        number = 1000 if name.startswith("view") else max(1, 2_000_000 // (n * n))
        times[name].append(best_seconds(lambda way=way, m=m, t=t: way(m, t), number))
nbytes = [4 * n * n for n in sides]

big = {name: ts[-1] for name, ts in times.items()}
print(f"at {nbytes[-1] / 2**20:.0f} MiB:")
for name, s in big.items():
    print(f"  {name:30s} {s * 1e6:10.2f} us")
copy, slow_copy = big["copy: a.copy()"], big["copy: ascontiguousarray(a.T)"]
print(f"a.copy() moves {2 * nbytes[-1] / copy / 1e9:.1f} GB/s (read + write) and takes "
      f"{copy / big['view: a.T']:,.0f}x as long as a view; the transposing copy takes "
      f"{slow_copy / copy:.1f}x as long as the plain one")
print(f"a tinytrain transpose costs {big['view: tinytrain t.T'] * 1e6:.1f} us at every size; "
      f"at {nbytes[0] / 1024:.0f} KiB, a.copy() takes {times['copy: a.copy()'][0] * 1e6:.2f} us")

fig, ax = plt.subplots(figsize=(7, 4))
figures.draw_timings(ax, nbytes, times, "array size (bytes)", "view vs copy, float32 n x n")
plt.show()

# %% [markdown]
# Read the chart from left to right. The views are flat lines: their cost does not depend on
# the size. tinytrain's transpose is the same NumPy view plus a `Tensor` object and a trip
# through its op machinery, a constant too but a larger one (compare it with the printed cost
# of copying the smallest matrix): Python overhead per op, which is why a framework wants few,
# large ops. The plain copy grows with the bytes, and once the matrix no longer fits in the
# caches it runs at the speed of memory. The transposing copy falls further behind as the
# matrix grows: by the time its walk down one column comes back for the rest of a cache line,
# the line has been evicted. This is why kernels ask for contiguous inputs only where they
# must, and why the package's convolution (chapter 3) changes the layout once per op, not
# once per step of its inner loop.

# %% [markdown]
# ### Teaser: `as_strided`, or how to get sliding windows for free
#
# If strides are just numbers, we can choose them ourselves. `np.lib.stride_tricks.as_strided`
# builds a view with *any* shape and strides over an existing buffer. Give a 1-D signal the
# shape `(windows, width)` and the strides `(4, 4)`: row `k` starts one element after row
# `k-1`, so the rows are overlapping windows, and no data was copied.
#
# (`as_strided` does no bounds checking — a wrong stride reads memory that is not yours. The
# safe wrapper `np.lib.stride_tricks.sliding_window_view` computes the strides for you.)

# %%
from numpy.lib.stride_tricks import as_strided, sliding_window_view

x = np.arange(8, dtype=np.float32)
width = 3
windows = as_strided(x, shape=(len(x) - width + 1, width), strides=(x.strides[0], x.strides[0]))
print(windows)
assert np.shares_memory(x, windows)
assert np.array_equal(windows, sliding_window_view(x, width))

# %% [markdown]
# The same idea in 2-D gives every `k x k` patch of an image as a 4-D view
# `[out_h, out_w, k, k]`. A convolution is then one `einsum` (or, after a reshape, one
# matrix multiplication) of the patches with the kernel. This is **im2col**, and chapter 3
# builds the CPU convolution and its checks from exactly this view.

# %%
img = np.arange(16, dtype=np.float32).reshape(4, 4)
k = 2
sh, sw = img.strides
patches = as_strided(img, shape=(4 - k + 1, 4 - k + 1, k, k), strides=(sh, sw, sh, sw))
print("patch at (1, 2):\n", patches[1, 2])

kernel = np.array([[1, 0], [0, 2]], dtype=np.float32)
out = np.einsum("hwij,ij->hw", patches, kernel)

# the slow, obvious definition, to check against
ref = np.zeros((3, 3), dtype=np.float32)
for i in range(3):
    for j in range(3):
        ref[i, j] = (img[i:i + k, j:j + k] * kernel).sum()
print("convolution via strided patches:\n", out)
assert np.array_equal(out, ref)


# %% [markdown]
# ## 2. Build it: a strided array of your own
#
# Everything NumPy did above fits in a small class. A `StridedArray` is a flat buffer (a 1-D
# NumPy array standing in for raw memory) plus `shape`, `strides` and an `offset`, the
# position of element `[0, 0, ...]` in the buffer. We count strides and offset in
# **elements**, not bytes (NumPy's byte strides are ours times the item size). Element
# `[i0, i1, ...]` lives at
#
# $$\text{offset} + i_0\,\text{strides}_0 + i_1\,\text{strides}_1 + \dots$$
#
# A view is a new `StridedArray` over **the same buffer object**: sharing memory is nothing
# more than that. Unlike `as_strided`, reading an element checks the index against the shape.

# %%
class StridedArray:
    # shape, strides and an offset over a flat buffer; views share the buffer object

    def __init__(self, buffer, shape, strides, offset=0):
        self.buffer = buffer                  # a 1-D NumPy array: the memory
        self.shape = tuple(int(n) for n in shape)
        self.strides = tuple(int(s) for s in strides)   # in elements, not bytes
        self.offset = int(offset)             # where element [0, 0, ...] lives

    @classmethod
    def from_values(cls, values):
        # a new, C-contiguous array holding a copy of values
        values = np.array(values, order="C")
        return cls(values.reshape(-1), values.shape,
                   [s // values.itemsize for s in values.strides])

    def address(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(self.shape) or not all(0 <= i < n for i, n in zip(index, self.shape)):
            raise IndexError(f"index {index} is out of bounds for shape {self.shape}")
        return self.offset + sum(i * s for i, s in zip(index, self.strides))

    def __getitem__(self, index):             # one element: a full tuple of ints
        return self.buffer[self.address(index)]

    def __setitem__(self, index, value):
        self.buffer[self.address(index)] = value

    def transpose(self, *axes):
        # axis k of the view is axis axes[k] of self: reorder shape and strides, move nothing
        axes = axes or tuple(reversed(range(len(self.shape))))
        return StridedArray(self.buffer, [self.shape[k] for k in axes],
                            [self.strides[k] for k in axes], self.offset)

    def numpy(self):
        # a new NumPy array with the values, read element by element: the definition
        out = np.empty(self.shape, self.buffer.dtype)
        for index in np.ndindex(self.shape):
            out[index] = self[index]
        return out

    def byte_strides(self):
        return tuple(s * self.buffer.itemsize for s in self.strides)

    def __repr__(self):
        return (f"StridedArray(shape={self.shape}, strides={self.strides}, "
                f"offset={self.offset}, buffer of {self.buffer.size})")


# %% [markdown]
# Its transpose against NumPy's: the same values, the same strides (in bytes, NumPy's unit),
# the same buffer — and a write through the view lands in the original.

# %%
values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
s = StridedArray.from_values(values)
st = s.transpose(2, 0, 1)
print(s, "\n", st)
expected = values.transpose(2, 0, 1)
assert np.array_equal(st.numpy(), expected) and st.byte_strides() == expected.strides
assert st.buffer is s.buffer                       # a view: the very same memory
st[3, 1, 2] = -1.0                                 # write through the view ...
assert s[1, 2, 3] == -1.0                          # ... and the original sees it
_ = show_error(lambda: s[2, 0, 0])                 # outside the shape: an error, not a read

# %% [markdown]
# ### Exercise 1.2 — slicing: the offset moves
#
# A slice `start:stop:step` along an axis of stride `s` starts `start * s` elements further
# into the buffer and walks with stride `step * s` (a negative step walks backwards); an
# integer index `i` moves the offset by `i * s` and removes the axis. Write
# `slice_view(arr, index)`: `index` is a tuple of ints and slices, one per leading axis (axes
# it does not mention are taken whole), negative ints count from the end as in NumPy, and the
# result is a `StridedArray` over `arr`'s buffer. `slice.indices(n)` gives a slice's
# `(start, stop, step)` for an axis of length `n`, and `len(range(start, stop, step))` its
# length. The checker compares shape, strides, offset and values with NumPy's view on random
# slices of random (also transposed) arrays, and writes through your view.

# %%
def slice_view(arr, index):
    """arr[index] as a StridedArray over arr's buffer; index: a tuple of ints and slices."""
    ### BEGIN SOLUTION
    index = tuple(index) + (slice(None),) * (len(arr.shape) - len(index))
    shape, strides, offset = [], [], arr.offset
    for k, n, s in zip(index, arr.shape, arr.strides):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            shape.append(len(range(start, stop, step)))
            strides.append(step * s)
            offset += start * s
        elif -n <= k < n:
            offset += (k % n) * s
        else:
            raise IndexError(f"index {k} is out of bounds for an axis of length {n}")
    return StridedArray(arr.buffer, shape, strides, offset)
    ### END SOLUTION


# %% tags=["checker"]
def element_offset(view, base):
    # where a NumPy view's first element sits in base's buffer, in elements
    return (view.__array_interface__["data"][0]
            - base.__array_interface__["data"][0]) // base.itemsize


def random_index(rng, shape):
    # a random, non-empty NumPy basic index over the leading axes of shape
    index = []
    for n in shape[:int(rng.integers(1, len(shape) + 1))]:
        if rng.random() < 0.3:
            index.append(int(rng.integers(-n, n)))
        else:
            step = int(rng.choice([1, 2, 3, -1, -2]))
            start = int(rng.integers(0, n))
            stop = int(rng.integers(start + 1, n + 1)) if step > 0 else int(rng.integers(-1, start))
            index.append(slice(start, None if stop < 0 else stop, step))
    return tuple(index)


example = slice_view(StridedArray.from_values(np.arange(12.0).reshape(3, 4)), (1, slice(0, 4, 2)))
print("arange(12).reshape(3, 4)[1, 0:4:2] ->", example)
assert (example.shape, example.strides, example.offset) == ((2,), (2,), 4), (
    f"[1, 0:4:2] of a (3, 4) array: shape {example.shape}, strides {example.strides}, offset "
    f"{example.offset}; expected shape (2,), strides (2,) (in elements), offset 4")

check_rng = np.random.default_rng(12)
for _ in range(200):
    root = check_rng.standard_normal(tuple(int(n) for n in check_rng.integers(1, 6, 3)))
    arr, base = StridedArray.from_values(root), root
    if check_rng.random() < 0.5:                            # also slice non-contiguous arrays
        arr, base = arr.transpose(2, 0, 1), root.transpose(2, 0, 1)
    index = random_index(check_rng, base.shape)
    mine, expected = slice_view(arr, index), base[index + (...,)]   # (a view, even if 0-d)
    assert isinstance(mine, StridedArray) and mine.buffer is arr.buffer, "not a view of arr"
    where = f"index {index} of a {base.shape} array with strides {arr.strides}"
    assert (mine.shape, mine.byte_strides()) == (expected.shape, expected.strides), (
        f"{where}: shape {mine.shape}, strides {mine.strides}; expected shape "
        f"{expected.shape}, strides {tuple(s // 8 for s in expected.strides)} (in elements)")
    assert mine.offset == element_offset(expected, root), (
        f"{where}: offset {mine.offset}, expected {element_offset(expected, root)}")
    assert np.array_equal(mine.numpy(), expected), f"{where}: the values differ from NumPy's"
    if expected.ndim:                                 # a write through both views ...
        written = root.copy()
        written[np.unravel_index(element_offset(expected, root), root.shape)] = 7.5
        mine[(0,) * expected.ndim] = 7.5
        assert np.array_equal(arr.buffer.reshape(root.shape), written)   # ... lands alike
# slices of views that already have an offset, and bounds that slice.indices must clip
root = np.arange(60.0).reshape(3, 4, 5)
for first, second in [((1,), (slice(1, 3),)), ((2, slice(1, None)), (slice(-3, None),)),
                      ((slice(None), 1), (slice(0, 9),)), ((0,), (slice(-1, None, -2),)),
                      ((slice(1, None),), (slice(-7, 2), -1))]:
    inner = slice_view(StridedArray.from_values(root), first)
    mine, expected = slice_view(inner, second), root[first][second + (...,)]
    where = f"index {first}, then {second} of that view, of a {root.shape} array"
    assert mine.offset == element_offset(expected, root), (
        f"{where}: offset {mine.offset}, expected {element_offset(expected, root)}")
    assert mine.shape == expected.shape and np.array_equal(mine.numpy(), expected), (
        f"{where}: shape {mine.shape}, expected {expected.shape}, or the values differ")
print("Exercise 1.2: slice_view agrees with NumPy on 200 random slices and slices of slices")

# %% [markdown]
# ### A matrix inside a bigger buffer: the leading dimension
#
# BLAS, the library that does the `@` on NumPy arrays, describes matrices the same way, with
# one restriction. Its matrix product (GEMM) takes each matrix as a pointer to its first
# element (our `offset`), its numbers of rows and columns, and one more number, the
# **leading dimension** `lda`: how many elements apart two neighbouring rows start. Within a
# row the elements must be adjacent. So a BLAS matrix is exactly a 2-D strided array with
# strides `(lda, 1)`, and `lda` may be larger than the number of columns: the elements
# between the end of one row and the start of the next are skipped, whatever they hold. (BLAS
# was written for Fortran, whose matrices are stored column by column, so there `lda`
# separates columns; a row-major matrix is the transpose of a column-major one, and GEMM
# takes a flag per operand to read it transposed. So strides `(1, lda)`, a transposed view,
# are fine too.)
#
# This is what lets BLAS compute with a block of a bigger matrix **without copying it**. Take
# an `R x C` matrix `M` and its window of `n` columns starting at column `k`, `M[:, k:k + n]`:
# its rows are still `C` elements apart, so it is the matrix `(offset k, R x n, lda = C)`.
# Sliding the window one column to the right moves the pointer by one element and changes
# nothing else. Chapter 3's convolution uses exactly this: the image, stored as one matrix,
# is read by one GEMM per kernel offset (nine for a 3 x 3 kernel), each through a window of
# columns shifted by a different amount.

# %%
R, C = 4, 10
M = StridedArray.from_values(np.arange(R * C, dtype=np.float32).reshape(R, C))
Mn = M.numpy()
k, n = 3, 5
window = StridedArray(M.buffer, (R, n), strides=(C, 1), offset=k)  # (pointer k, R x n, lda C)
print(window)
print(window.numpy())
assert np.array_equal(window.numpy(), Mn[:, k:k + n])
assert Mn[:, k:k + n].strides == Mn.strides          # NumPy's window: the same row stride, lda = C

shifted = StridedArray(M.buffer, (R, n), strides=(C, 1), offset=k + 1)   # one column right
assert np.array_equal(shifted.numpy(), Mn[:, k + 1:k + 1 + n])

fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(10, 4.2), gridspec_kw={"height_ratios": [1, 3]})
figures.draw_leading_dimension(ax0, ax1, R, C, k, n)
plt.show()

# %% [markdown]
# The window is a matrix BLAS can read in place; NumPy passes it to BLAS as it is, and the
# product is the product with a contiguous copy. A view with a step inside the rows,
# `M[:, ::2]`, is not: its elements within a row are 2 apart, which no `lda` can describe, so
# NumPy falls back to its own, slower loops for it, and a library that wants BLAS's speed
# copies it first.

# %%
W = np.random.default_rng(1).standard_normal((3, R)).astype(np.float32)
assert np.allclose(W @ Mn[:, k:k + n], W @ np.ascontiguousarray(Mn[:, k:k + n]))
print("M[:, k:k+n] strides (elements):", tuple(s // 4 for s in Mn[:, k:k + n].strides),
      "-> lda =", Mn[:, k:k + n].strides[0] // 4)
print("M[:, ::2]   strides (elements):", tuple(s // 4 for s in Mn[:, ::2].strides),
      "-> no lda: the elements of a row are not adjacent")
assert Mn[:, ::2].strides[1] != Mn.itemsize


# %% [markdown]
# ## 3. Broadcasting
#
# Adding a bias of shape `(4,)` to a batch of shape `(3, 4)` "just works" in NumPy. The rule
# that makes it work is short:
#
# > Line the two shapes up **from the right**. Two dimensions are compatible when they are
# > equal or one of them is 1; a missing dimension counts as 1. The result has, in each
# > position, the size that is not 1 (the larger one, except that a 0 against a 1 gives 0:
# > an empty axis stays empty). Otherwise it is an error.
#
# So `(3, 1) + (1, 4)` gives `(3, 4)`: the column is repeated 4 times to the right, the row 3
# times downwards.
#
# ### Exercise 1.3 — the broadcast rule as code
#
# Write `broadcast_shape(sa, sb)`: the shape of `a + b` for arrays of shapes `sa` and `sb`,
# or a `ValueError` when they do not broadcast. The checker compares it with
# `np.broadcast_shapes` on the examples below and on random pairs of shapes.

# %%
def broadcast_shape(sa, sb):
    """The shape of a + b for arrays of shapes sa and sb; ValueError if they do not broadcast."""
    ### BEGIN SOLUTION
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    out = []
    for da, db in zip(sa, sb):
        if da != db and 1 not in (da, db):
            raise ValueError(f"shapes {sa} and {sb}: {da} and {db} are neither equal nor 1")
        out.append(db if da == 1 else da)  # (not max: a 0 meets a 1 as a 0)
    return tuple(out)
    ### END SOLUTION


# %% tags=["checker"]
examples = [((3, 1), (1, 4)), ((3, 4), (4,)), ((2, 1, 5), (3, 1)), ((), (2, 2)),
            ((8, 1, 6, 1), (7, 1, 5))]
for sa, sb in examples:
    try:
        ours = broadcast_shape(sa, sb)
    except ValueError as exc:
        raise AssertionError(f"{sa} and {sb} broadcast to {np.broadcast_shapes(sa, sb)} "
                             f"(NumPy), but broadcast_shape raised: {exc}") from None
    assert tuple(ours) == np.broadcast_shapes(sa, sb), (
        f"{sa} and {sb}: returned {ours}, expected {np.broadcast_shapes(sa, sb)}")
    print(f"{str(sa):14s} + {str(sb):10s} -> {ours}")

check_rng = np.random.default_rng(13)
for _ in range(300):
    sa, sb = (tuple(int(n) for n in check_rng.integers(0, 4, check_rng.integers(0, 5)))
              for _ in range(2))   # sizes 0 to 3: a 0 broadcasts against a 1, as NumPy
    try:
        expected = np.broadcast_shapes(sa, sb)
    except ValueError:
        expected = None
    if expected is not None:
        try:
            got = broadcast_shape(sa, sb)
        except ValueError as exc:
            raise AssertionError(f"{sa} and {sb} broadcast to {expected} (NumPy), but "
                                 f"broadcast_shape raised: {exc}") from None
        assert tuple(got) == expected, f"{sa} and {sb}: returned {got}, expected {expected}"
        continue
    try:
        broadcast_shape(sa, sb)
    except ValueError:
        continue
    raise AssertionError(f"{sa} and {sb} do not broadcast: expected a ValueError")
print("Exercise 1.3: broadcast_shape agrees with np.broadcast_shapes")

# %% [markdown]
# Broadcasting is not a copy either: `np.broadcast_to` returns a view whose stride along a
# stretched axis is **0** — every step along that axis reads the same bytes again.

# %%
col = np.array([[0.0], [10.0], [20.0]], dtype=np.float32)    # (3, 1)
row = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)     # (1, 4)
stretched = np.broadcast_to(col, (3, 4))
print("col stretched to (3, 4): strides", stretched.strides, "(0 bytes along the columns)")
assert stretched.strides == (4, 0)
total = col + row
print(total)
assert total.shape == (3, 4) and total[2, 3] == 24.0


# %%
figures.draw_broadcast_sum(col, row)
plt.show()

# %% [markdown]
# ### Exercise 1.4 — `broadcast_to` for the strided array
#
# Write `broadcast_to(arr, shape)` for a `StridedArray`: the view NumPy's `np.broadcast_to`
# makes. Axes that broadcasting adds in front, and axes where `arr` has size 1, read the same
# element at every step (stride 0); the others keep their stride; the offset stays. Raise
# `ValueError` when `arr` cannot be stretched to `shape`. The checker compares strides and
# values with NumPy on random (also non-contiguous) arrays, and checks that a write into `arr`
# shows up in every copy the broadcast pretends to hold.

# %%
def broadcast_to(arr, shape):
    """The StridedArray view of arr stretched to shape (stride 0 along stretched axes)."""
    ### BEGIN SOLUTION
    lead = len(shape) - len(arr.shape)
    if lead < 0:
        raise ValueError(f"cannot broadcast shape {arr.shape} to fewer dimensions {shape}")
    strides = [0] * lead
    for n, step, target in zip(arr.shape, arr.strides, shape[lead:]):
        if n not in (1, target):
            raise ValueError(f"cannot broadcast shape {arr.shape} to {shape}")
        strides.append(0 if n == 1 else step)
    return StridedArray(arr.buffer, shape, strides, arr.offset)
    ### END SOLUTION


# %% tags=["checker"]
check_rng = np.random.default_rng(14)
for _ in range(30):
    ndim = int(check_rng.integers(0, 4))
    full = check_rng.standard_normal(tuple(int(n) for n in check_rng.integers(1, 5, ndim)))
    steps = tuple(int(k) for k in check_rng.integers(1, 3, ndim))
    np_arr = full[tuple(slice(None, None, k) for k in steps) + (...,)]  # maybe not contiguous
    arr = StridedArray(full.reshape(-1), np_arr.shape, [s // 8 for s in np_arr.strides])
    lead = tuple(int(n) for n in check_rng.integers(1, 4, check_rng.integers(0, 3)))
    target = lead + tuple(int(check_rng.integers(2, 4)) if n == 1 else n for n in np_arr.shape)
    given = (tuple(arr.shape), tuple(arr.strides), arr.offset)
    mine, expected = broadcast_to(arr, target), np.broadcast_to(np_arr, target)
    where = f"shape {np_arr.shape}, strides {given[1]}, to {target}"
    assert (tuple(arr.shape), tuple(arr.strides), arr.offset) == given, (
        f"{where}: broadcast_to changed arr itself; return a new StridedArray, a view")
    assert isinstance(mine, StridedArray) and mine.buffer is arr.buffer, "not a view of arr"
    assert (mine.shape, mine.byte_strides()) == (expected.shape, expected.strides), (
        f"{where}: shape {mine.shape}, strides {mine.strides}; expected shape "
        f"{expected.shape}, strides {tuple(s // 8 for s in expected.strides)} (in elements)")
    assert np.array_equal(mine.numpy(), expected), f"{where}: the values differ from NumPy's"
    arr[(0,) * np_arr.ndim] = 99.0                    # one write into arr ...
    assert np.array_equal(mine.numpy(), np.broadcast_to(np_arr, target))   # ... seen everywhere
row = StridedArray(np.arange(12.0), (4,), (1,), 4)  # row 1 of a 3x4 array: offset 4
assert np.array_equal(broadcast_to(row, (2, 4)).numpy(), [[4, 5, 6, 7]] * 2), (
    f"a row at offset 4 to (2, 4): got {broadcast_to(row, (2, 4)).numpy().tolist()}, "
    f"expected [[4, 5, 6, 7]] * 2 (offset lost?)")
for shape, target in [((3,), (4,)), ((2, 3), (3,)), ((2, 1), (3, 3)), ((1, 3), (3,))]:
    try:
        broadcast_to(StridedArray.from_values(np.zeros(shape)), target)
    except ValueError:
        continue
    raise AssertionError(f"{shape} cannot be broadcast to {target}: expected a ValueError")
print("Exercise 1.4: broadcast_to agrees with np.broadcast_to")

# %% [markdown]
# When the rule fails, NumPy says so. tinytrain checks shapes *before* computing and names the
# op and both shapes in its message (`broadcast_shapes` in `tinytrain/autograd/ops.py`).

# %%
show_error(lambda: np.ones((2, 3)) + np.ones((3, 2)))
e = show_error(lambda: tt.ones(2, 3) + tt.ones(3, 2))
assert "(2, 3) and (3, 2)" in str(e)

# %% [markdown]
# ### Why the gradient of a broadcast op is a sum
#
# Take `y = x + b` with `x` of shape `(3, 4)` and a bias `b` of shape `(4,)`, and a loss
# `L = sum(w * y)` for some weights `w`. Each `b[j]` was *copied* into the three entries
# `y[0, j], y[1, j], y[2, j]`, so nudging `b[j]` nudges all three, and by the chain rule
#
# $$\frac{\partial L}{\partial b_j} = \sum_i \frac{\partial L}{\partial y_{ij}}.$$
#
# The gradient flowing back, `dL/dy`, has the *output's* shape `(3, 4)`; to become the
# gradient of `b` it must be **summed over the broadcast axes** back to `(4,)`. Copying in
# forward is summing in backward. In tinytrain every binary op does this with one helper,
# `unbroadcast(grad, shape)`.

# %%
from tinytrain.autograd.ops import unbroadcast

rng = np.random.default_rng(0)
x = rng.standard_normal((3, 4))
b = rng.standard_normal(4)
w = rng.standard_normal((3, 4))
def L(b):
    return np.sum(w * (x + b))



# dL/dy = w; summed back to b's shape
g_b = unbroadcast(w, b.shape)
assert g_b.shape == (4,) and np.allclose(g_b, w.sum(axis=0))

# finite differences agree
eps = 1e-6
numeric = np.array([(L(b + eps * e) - L(b - eps * e)) / (2 * eps) for e in np.eye(4)])
print("unbroadcast:       ", g_b)
print("finite differences:", numeric)
assert np.allclose(g_b, numeric, atol=1e-6)

# a (3, 1) column was stretched along axis 1: sum that axis, keep the 1
assert np.allclose(unbroadcast(w, (3, 1)), w.sum(axis=1, keepdims=True))
# a scalar was stretched everywhere: sum everything
assert np.allclose(unbroadcast(w, ()), w.sum())

# %% [markdown]
# And the package's autograd does the same when we let it differentiate (chapter 2 explains
# how):

# %%
tb = tt.tensor(b, requires_grad=True)
(tt.tensor(w) * (tt.tensor(x) + tb)).sum().backward()
print(tb.grad)
assert np.allclose(tb.grad.numpy(), g_b)

# %% [markdown]
# ### Exercise 1.5 — summing a gradient back to its input's shape
#
# Write `sum_to_shape(grad, shape)`, your own `unbroadcast`: `grad` has the shape of a result
# that an input of shape `shape` was broadcast into; sum it over the axes broadcasting added
# in front, and over the axes where `shape` has a 1 (keeping them, with size 1). The checker
# compares it with the package's `unbroadcast`, and with the definition: the derivative of
# `sum(grad * broadcast_to(x, grad.shape))` with respect to each element of `x`.

# %%
def sum_to_shape(grad, shape):
    """Sum grad, the gradient of a broadcast result, back to the input's shape."""
    ### BEGIN SOLUTION
    lead = grad.ndim - len(shape)
    g = grad.sum(axis=tuple(range(lead))) if lead else grad
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g
    ### END SOLUTION


# %% tags=["checker"]
check_rng = np.random.default_rng(15)
for _ in range(30):
    out_shape = tuple(int(n) for n in check_rng.integers(1, 4, check_rng.integers(0, 4)))
    keep = int(check_rng.integers(0, len(out_shape) + 1))    # the input's number of dims
    tail = out_shape[len(out_shape) - keep:]
    in_shape = tuple(1 if check_rng.random() < 0.5 else n for n in tail)
    grad = check_rng.standard_normal(out_shape)
    mine = np.asarray(sum_to_shape(grad, in_shape))
    assert mine.shape == in_shape, f"{out_shape} -> {in_shape}: got shape {mine.shape}"
    assert np.allclose(mine, unbroadcast(grad, in_shape)), (
        f"{out_shape} -> {in_shape}: differs from unbroadcast by up to "
        f"{np.max(np.abs(mine - unbroadcast(grad, in_shape))):.3g} (a sum, not a mean?)")
    for index in np.ndindex(in_shape):                        # the definition, element by element
        one_hot = np.zeros(in_shape)
        one_hot[index] = 1.0
        expected = (grad * np.broadcast_to(one_hot, out_shape)).sum()
        assert np.isclose(mine[index], expected), (
            f"{out_shape} -> {in_shape}: element {index} is {mine[index]}, expected {expected}")
print("Exercise 1.5: sum_to_shape agrees with unbroadcast and with the definition")

# %% [markdown]
# ## 4. What a `Tensor` adds
#
# A tinytrain `Tensor` wraps exactly one array — a NumPy array on `"cpu"`, a CuPy array on
# `"cuda"`, never a mix — and adds what training needs:
#
# | attribute | meaning |
# |---|---|
# | `device` | `"cpu"` or `"cuda"`, read off the array's type |
# | `dtype` | the array's dtype, with PyTorch's rules for Python numbers |
# | `requires_grad` | should backward compute a gradient for this tensor? |
# | `grad` | after `backward()`, the gradient (itself a Tensor) |
# | `grad_fn` | the graph node of the op that made this tensor (`None` for leaves) |
# | `data` | a Tensor on the same memory, outside autograd (as PyTorch's `.data`; see below) |

# %%
x = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
print(x)
print("shape", x.shape, "| dtype", x.dtype, "| device", x.device)
print("requires_grad", x.requires_grad, "| grad", x.grad, "| grad_fn", x.grad_fn,
      "| is_leaf", x.is_leaf)
print("data is a", type(x.data).__name__, "| its requires_grad", x.data.requires_grad)
assert x.dtype == tt.float32 and x.device == "cpu" and x.grad is None

# %% [markdown]
# `x.data` is PyTorch's `.data`: a new Tensor on `x`'s memory (no copy) that is cut from
# autograd: `requires_grad=False`, no `grad_fn`, and its own version counter. Ported
# programs use it to change a parameter's values without recording anything:
# `m.weight.data.normal_(0, 0.02)` initialises a layer, `p.data.add_(p.grad, alpha=-lr)` is
# a hand-written SGD step. Writes through it reach `x`, but autograd does not see them: a
# graph that saved `x` runs its backward on the new values without a word, exactly as
# PyTorch's does, so use it for updates outside any computation you differentiate. (Many
# small engines, micrograd and DeZero among them, call the raw array `.data`; in PyTorch,
# and here, the raw NumPy array is what `x.numpy()` gives on the CPU. Inside the package
# the array a Tensor wraps is `x._data`.)

# %%
d = x.data
print("same memory:", d.data_ptr() == x.data_ptr(), "| requires_grad", d.requires_grad,
      "| grad_fn", d.grad_fn)
d.mul_(10)                      # writes x's values, unrecorded
print("x after x.data.mul_(10):", x)
d.div_(10)
assert d.data_ptr() == x.data_ptr() and not d.requires_grad and d.grad_fn is None
assert x.requires_grad and np.allclose(x.numpy(), [[1, 2, 3], [4, 5, 6]])
assert isinstance(x.numpy(), np.ndarray)

# %%
x.grad = None                  # gradients add up over backward calls: start from none
y = (x * x).sum()              # an op on a tensor that requires grad records a node
print(y, "  grad_fn:", y.grad_fn)
y.backward()
print("x.grad =", x.grad)      # d(sum x^2)/dx = 2x
assert np.allclose(x.grad.numpy(), 2 * x.numpy())

# %% [markdown]
# ### Creating tensors
#
# The creation functions mirror PyTorch. Random ones draw from the package generator, so
# `tt.manual_seed` makes them reproducible (and, because draws happen on the CPU, the same
# seed gives the same numbers on every device).

# %%
print(tt.zeros(2, 3))
print(tt.ones(2, dtype=tt.float64))
print(tt.arange(5), tt.arange(0, 1, 0.25))

tt.manual_seed(0)
r1 = tt.randn(2, 3)
tt.manual_seed(0)
r2 = tt.randn(2, 3)
print(r1)
assert np.array_equal(r1.numpy(), r2.numpy())
assert tt.arange(5).dtype == tt.int64 and tt.arange(0, 1, 0.25).dtype == tt.float32

# %% [markdown]
# ### dtype rules
#
# * Python floats (and lists of them) become **float32**, Python ints become **int64** — as
#   in PyTorch, because float32 is what we train in.
# * A NumPy array **keeps its dtype**: `np.zeros(3)` is float64 and stays float64. Pass
#   `dtype=` to choose.
# * `tt.tensor` always **copies** its input; `x.numpy()` on the CPU returns the tensor's own
#   array (no copy, as in PyTorch), so writing into it writes into the tensor. (PyTorch
#   refuses `.numpy()` on a tensor that requires grad and asks for `x.detach().numpy()`;
#   tinytrain allows it, because the chapters read parameters often.)

# %%
cases = {
    "tt.tensor(1.5)": tt.tensor(1.5),
    "tt.tensor([1, 2])": tt.tensor([1, 2]),
    "tt.tensor(np.zeros(3))": tt.tensor(np.zeros(3)),
    "tt.tensor(np.zeros(3, np.float32))": tt.tensor(np.zeros(3, np.float32)),
    "tt.tensor([1, 2], dtype=tt.float64)": tt.tensor([1, 2], dtype=tt.float64),
}
for expr, t in cases.items():
    print(f"{expr:38s} -> {t.dtype}")
expected = [tt.float32, tt.int64, tt.float64, tt.float32, tt.float64]
assert [t.dtype for t in cases.values()] == expected

src = np.ones(3, dtype=np.float32)
t = tt.tensor(src)
assert not np.shares_memory(src, t.numpy())     # tt.tensor copies
t.numpy()[0] = 5.0                               # .numpy() does not (on the CPU):
assert t[0].item() == 5.0                        # writing into it writes into t

# %% [markdown]
# ### `.to()`: devices and dtypes
#
# `x.to(dtype)`, `x.to("cuda")` and `x.to("cpu", dtype)` return a converted copy — or `x`
# itself when nothing changes. The conversion is differentiable: gradients flow back to the
# original device and dtype. Asking for `"cuda"` on a machine without CuPy or a GPU raises an
# error that says what to install.

# %%
x64 = x.to(tt.float64)
print(x64.dtype, "| same object when nothing changes:", x.to("cpu") is x)
assert x64.dtype == tt.float64 and x.to("cpu") is x

if tt.cuda_is_available():
    xg = x.to("cuda")
    print(xg.device, type(xg._data))                 # (the CuPy array it wraps)
    assert np.array_equal(xg.numpy(), x.numpy())
else:
    print("No CUDA GPU here; this is what asking for one says:\n")
    show_error(lambda: x.to("cuda"))

# %% [markdown]
# ### Errors that say what went wrong
#
# Mixed dtypes follow one rule, PyTorch's `result_type` ([dtypes.py](../tinytrain/dtypes.py)):
# floats beat integers, and a Python number never widens a tensor's dtype. NumPy's rule
# differs: `int64 * 0.5` is float64 there, float32 here, so a model stays in float32.
# Matrix products are stricter: like PyTorch's, they refuse mixed dtypes and say what to
# do. Shape errors name both shapes.

# %%
print("int64 * 0.5 -> NumPy:", (np.arange(3) * 0.5).dtype,
      "| tinytrain:", (tt.arange(3) * 0.5).dtype)
assert (tt.arange(3) * 0.5).dtype == tt.float32
show_error(lambda: tt.ones(2, 3) @ tt.ones(3, 2, dtype=tt.float64))
show_error(lambda: tt.ones(2, 3) @ tt.ones(2, 3))
show_error(lambda: tt.ones(2, 3, requires_grad=True).sum(dim=1).backward())
e = show_error(lambda: tt.tensor([1, 2], requires_grad=True))
assert isinstance(e, TypeError)

# %% [markdown]
# ## 5. One code path for NumPy and CuPy
#
# CuPy copies NumPy's API almost name for name: `cupy.exp`, `cupy.matmul`, `arr.sum(axis=...)`
# all exist with the same meaning. So instead of writing every op twice, we write it once
# against a module variable `xp` and ask the *input* which module it belongs to. CuPy itself
# provides the function, `cupy.get_array_module` (DeZero, too, writes its ops this way);
# `tinytrain.backend.get_array_module(arr)` is the same without needing CuPy installed: it
# returns `numpy` for a NumPy array and `cupy` for a CuPy array.
#
# Every op in `tinytrain/autograd/ops.py` is written this way, for example:

# %%
import inspect

from tinytrain.autograd import ops

print(inspect.getsource(ops.Exp))

# %% [markdown]
# Let us write one function in that style: a **numerically stable softmax**. The naive
# `exp(x) / sum(exp(x))` overflows as soon as an input is larger than about 88 in float32.
# Subtracting the row maximum first changes nothing mathematically (the factor `exp(-max)`
# cancels) but keeps every exponent `<= 0`.

# %%
from tinytrain.backend import get_array_module


def softmax(x, axis=-1):
    xp = get_array_module(x)           # numpy or cupy: whichever owns x
    z = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def naive_softmax(x, axis=-1):
    xp = get_array_module(x)
    e = xp.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


logits = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 1002.0]], dtype=np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    print("naive: ", naive_softmax(logits))
p = softmax(logits)
print("stable:", p)
assert np.allclose(p.sum(axis=-1), 1.0)
assert np.allclose(p[0], p[1])                  # softmax does not care about a shift
assert np.allclose(p[0], np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())

# %%
if tt.cuda_is_available():
    import cupy as cp

    p_gpu = softmax(cp.asarray(logits))       # the very same function, now on the GPU
    print("CuPy result:", type(p_gpu), "\n", cp.asnumpy(p_gpu))
    assert np.allclose(cp.asnumpy(p_gpu), p, atol=1e-6)
else:
    print("No CUDA GPU / CuPy on this machine: skipping the CuPy run of softmax.")
    print("On a GPU machine this cell runs softmax on a cupy array and compares with NumPy.")

# %% [markdown]
# ## Summary
#
# * An array is a **buffer + dtype + shape + strides** (+ the offset of its first element).
#   Transposes, slices with steps, broadcasts (stride 0) and `as_strided` windows are all
#   *views*: new strides and offset, same bytes. Fancy indexing copies, and so does NumPy's
#   `reshape` when strides cannot express the new shape (flattening a transpose);
#   tinytrain's `view` refuses to copy, its `reshape` copies when it must. A view costs
#   the same at every size; a copy costs time in proportion to its bytes, and a copy that
#   reads across the layout (a transpose) much more.
# * Your `StridedArray` does all of that in a few dozen lines, and agrees with NumPy on
#   values, strides and offsets. A BLAS matrix is such a view with strides `(lda, 1)`: a
#   window of columns of a bigger matrix keeps its `lda`, which is how chapter 3 multiplies
#   shifted windows of an image without copying them.
# * **Broadcasting** lines shapes up from the right; sizes must be equal or 1. Because
#   forward *copies* along broadcast axes, backward must **sum** the gradient back to the
#   input's shape: `unbroadcast`.
# * A tinytrain **Tensor** is one array on one device plus `requires_grad`, `grad` and
#   `grad_fn`; Python floats become float32, NumPy arrays keep their dtype, mixed dtypes
#   promote as PyTorch's do (a matrix product refuses them), and mixed devices or bad shapes
#   fail early with a message naming the problem.
# * Ops are written once against `xp = get_array_module(x)`, so the same code runs on NumPy
#   and CuPy.
#
# **Where this lives in the package**
#
# * [tinytrain/tensor.py](../tinytrain/tensor.py) — `Tensor`, `tensor`, `zeros`, `ones`,
#   `randn`, `arange`, `.to()`, the dtype rules and error checks
# * [tinytrain/backend.py](../tinytrain/backend.py) — devices, `get_array_module`,
#   `cuda_is_available`, lazy CuPy import
# * [tinytrain/autograd/ops.py](../tinytrain/autograd/ops.py) — `unbroadcast`,
#   `broadcast_shapes`, and every op written against `xp`
# * [tinytrain/random.py](../tinytrain/random.py) — `manual_seed` and the package generator
#
# **Previous:** [Chapter 0 — orientation](../notebooks/00_introduction.ipynb) · **Next:**
# [Chapter 2 — reverse-mode autodiff from scratch](02_autograd.ipynb) turns `grad_fn` into a
# working backward pass.
