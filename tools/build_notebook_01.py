"""Write ``notebooks/01_tensors.ipynb`` (chapter 1) from the cells below.

The notebook is generated so that it can be reviewed as plain Python and rebuilt
reproducibly: cell ids are fixed, and it is saved without outputs.

Usage::

    python tools/build_notebook_01.py            # writes notebooks/01_tensors.ipynb
    python tools/build_notebook_01.py --check    # exit 1 if the notebook is out of date
"""

from __future__ import annotations

import sys

from nbbuild import Notebook

nb = Notebook("01_tensors.ipynb", __doc__)
md, code = nb.md, nb.code

# =============================================================================== cells

md(r"""
# Chapter 1 — Tensors: arrays, shapes, strides and broadcasting

Every deep-learning framework is, at its bottom, a way to push large arrays of numbers
through a chain of operations. Before we can differentiate anything (chapter 2) or
convolve anything (chapter 3), we need to be precise about what an array *is*: a flat
block of memory plus a little metadata that says how to walk through it.

**What you will build / learn in this chapter**

1. How a NumPy array is laid out in memory: `shape`, `dtype` and `strides`, and why a
   transpose or a slice costs nothing (it is a *view* with other strides).
2. A first look at `as_strided`, the trick chapter 3 uses to build `im2col` without loops.
3. Broadcasting: the rule, a picture, the error you get when it fails, and why the
   gradient of a broadcast op must be **summed back** to the input's shape
   (`unbroadcast` in `tinytrain/autograd/ops.py`).
4. What a tinytrain `Tensor` adds on top of an array: a device, a dtype policy,
   `requires_grad`, `grad` and `grad_fn`, and clear error messages.
5. Why one code path serves both NumPy (CPU) and CuPy (GPU): `get_array_module`.

The package modules this chapter explains are `tinytrain/tensor.py` and
`tinytrain/backend.py`.
""")

md(r"""
## 0. Set-up check

First make sure the environment is sane: `tinytrain.doctor` prints the Python, NumPy,
CuPy/GPU and MPI situation of this machine. Nothing later in this chapter needs a GPU.
""")

code(r"""
import tinytrain.doctor

status = tinytrain.doctor.main()
assert status == 0
""")

code(r"""
%matplotlib inline
import numpy as np
import matplotlib.pyplot as plt

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
""")

# ----------------------------------------------------------------------------- arrays
md(r"""
## 1. A NumPy array is a buffer plus a recipe

An `ndarray` owns (or borrows) one flat, contiguous block of bytes. Three pieces of
metadata turn that block into an n-dimensional array:

* `dtype` — what one element is (`float32` is 4 bytes),
* `shape` — how many elements along each axis,
* `strides` — how many **bytes** to jump to move one step along each axis.

Element `a[i, j]` lives at byte offset `i * strides[0] + j * strides[1]` from the start of
the buffer. That is the whole trick.
""")

code(r"""
a = np.arange(6, dtype=np.float32).reshape(2, 3)
print(a)
print("shape   ", a.shape)
print("dtype   ", a.dtype, f"({a.itemsize} bytes per element)")
print("strides ", a.strides, "bytes")
assert a.strides == (3 * 4, 4)   # next row: skip 3 floats; next column: skip 1 float
""")

md(r"""
Let us check the formula by hand: compute the byte offset of every element and read the
element back from the flat buffer.
""")

code(r"""
def byte_offset(arr, index):
    return sum(i * s for i, s in zip(index, arr.strides))


buffer = a.reshape(-1)          # the flat buffer (a view: no copy, a is contiguous)
for index in np.ndindex(a.shape):
    off = byte_offset(a, index)
    assert buffer[off // a.itemsize] == a[index]
    print(f"a{index} = {a[index]:.0f}  at byte {off:2d}")
""")

md(r"""
### Transposes and slices are views

`a.T` does not move a single byte: it is a new array object over **the same buffer**
with the strides swapped. Slicing with a step (`a[:, ::2]`) multiplies a stride; picking a
row (`a[1]`) moves the start pointer. All of these are *views*: `np.shares_memory` says so,
and writing through a view changes the original.
""")

code(r"""
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
""")

code(r"""
b = a.copy()
view = b.T
view[2, 0] = 100.0            # write through the transposed view ...
print(b)                      # ... and the original changed: b[0, 2] is now 100
assert b[0, 2] == 100.0
""")

md(r"""
### A picture of the memory layout

Below: the flat buffer (top), `a` as a 2x3 grid and `a.T` as a 3x2 grid. Each cell shows
its value and, underneath, the byte offset where it lives. The colour is the position in
memory. In `a` the colours run along the rows (*row-major*, "C order"); in `a.T` the same
colours run down the columns — same bytes, different walk.
""")

code(r"""
def start(arr):
    # the address of arr's first element (only differences of two of these are shown)
    return arr.__array_interface__["data"][0]


def draw_grid(ax, arr, title, show_meta=True):
    # Draw a 2-D array as a grid; each cell: value, and its byte offset in the buffer.
    cmap = plt.get_cmap("viridis")
    nbytes = a.size * a.itemsize
    rows, cols = arr.shape
    for i in range(rows):
        for j in range(cols):
            off = (start(arr) - start(a)) + byte_offset(arr, (i, j))
            ax.add_patch(plt.Rectangle((j, rows - 1 - i), 1, 1,
                                       facecolor=cmap(off / nbytes), edgecolor="white", lw=2))
            ax.text(j + 0.5, rows - 1 - i + 0.6, f"{arr[i, j]:.0f}", ha="center",
                    va="center", fontsize=14, color="white", weight="bold")
            ax.text(j + 0.5, rows - 1 - i + 0.25, f"byte {off}", ha="center", va="center",
                    fontsize=8, color="white")
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"{title}\nshape {arr.shape}, strides {arr.strides}" if show_meta else title,
                 fontsize=10)


fig = plt.figure(figsize=(9, 5))
ax0 = fig.add_axes([0.05, 0.72, 0.9, 0.2])
draw_grid(ax0, a.reshape(1, -1), "the buffer: what is really in memory (6 x 4 = 24 bytes)",
          show_meta=False)
draw_grid(fig.add_axes([0.08, 0.05, 0.4, 0.55]), a, "a")
draw_grid(fig.add_axes([0.58, 0.05, 0.3, 0.55]), a.T, "a.T (a view)")
plt.show()
""")

md(r"""
### Contiguous or not

An array is **C-contiguous** when walking it in row-major order visits the buffer in
order, with no gaps. `a` is; `a.T` and `a[:, ::2]` are not. Most kernels (BLAS, our CUDA
kernels in chapter 4) want contiguous inputs, so a framework sometimes has to make a
contiguous *copy* — `np.ascontiguousarray` — and `reshape` of a non-contiguous array
silently copies too. Copies cost memory and time, so it pays to know when they happen.
""")

code(r"""
for name, arr in [("a", a), ("a.T", a.T), ("a[:, ::2]", a[:, ::2])]:
    print(f"{name:10s} C-contiguous: {arr.flags['C_CONTIGUOUS']}")

c = np.ascontiguousarray(a.T)
print("\nascontiguousarray(a.T): strides", c.strides, " shares memory:", np.shares_memory(a, c))
assert c.flags["C_CONTIGUOUS"] and not np.shares_memory(a, c)

# reshape is a view when it can be, a copy when it must be
assert np.shares_memory(a, a.reshape(3, 2))          # contiguous: a view
assert not np.shares_memory(a, a.T.reshape(-1))      # transposed: must copy
print("a.reshape(3, 2) is a view; a.T.reshape(-1) is a copy:", a.T.reshape(-1))
""")

md(r"""
### Teaser: `as_strided`, or how to get sliding windows for free

If strides are just numbers, we can choose them ourselves. `np.lib.stride_tricks.as_strided`
builds a view with *any* shape and strides over an existing buffer. Give a 1-D signal the
shape `(windows, width)` and the strides `(4, 4)`: row `k` starts one element after row
`k-1`, so the rows are overlapping windows, and no data was copied.

(`as_strided` does no bounds checking — a wrong stride reads memory that is not yours. The
safe wrapper `np.lib.stride_tricks.sliding_window_view` computes the strides for you.)
""")

code(r"""
from numpy.lib.stride_tricks import as_strided, sliding_window_view

x = np.arange(8, dtype=np.float32)
width = 3
windows = as_strided(x, shape=(len(x) - width + 1, width), strides=(x.strides[0], x.strides[0]))
print(windows)
assert np.shares_memory(x, windows)
assert np.array_equal(windows, sliding_window_view(x, width))
""")

md(r"""
The same idea in 2-D gives every `k x k` patch of an image as a 4-D view
`[out_h, out_w, k, k]`. A convolution is then one `einsum` (or, after a reshape, one
matrix multiplication) of the patches with the kernel. This is **im2col**, and chapter 3
builds the CPU convolution and its checks from exactly this view.
""")

code(r"""
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
""")

# ----------------------------------------------------------------------------- broadcasting
md(r"""
## 2. Broadcasting

Adding a bias of shape `(4,)` to a batch of shape `(3, 4)` "just works" in NumPy. The rule
that makes it work is short:

> Line the two shapes up **from the right**. Two dimensions are compatible when they are
> equal or one of them is 1; a missing dimension counts as 1. The result has, in each
> position, the larger of the two sizes. Otherwise it is an error.

So `(3, 1) + (1, 4)` gives `(3, 4)`: the column is repeated 4 times to the right, the row 3
times downwards. Let us write the rule as code and check it against NumPy.
""")

code(r"""
def broadcast_shape(sa, sb):
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    out = []
    for da, db in zip(sa, sb):
        if da != db and 1 not in (da, db):
            raise ValueError(f"shapes {sa} and {sb}: {da} and {db} are neither equal nor 1")
        out.append(max(da, db))
    return tuple(out)


examples = [((3, 1), (1, 4)), ((3, 4), (4,)), ((2, 1, 5), (3, 1)), ((), (2, 2)),
            ((8, 1, 6, 1), (7, 1, 5))]
for sa, sb in examples:
    ours = broadcast_shape(sa, sb)
    assert ours == np.broadcast_shapes(sa, sb)
    print(f"{str(sa):14s} + {str(sb):10s} -> {ours}")
""")

md(r"""
Broadcasting is not a copy either: `np.broadcast_to` returns a view whose stride along a
stretched axis is **0** — every step along that axis reads the same bytes again.
""")

code(r"""
col = np.array([[0.0], [10.0], [20.0]], dtype=np.float32)    # (3, 1)
row = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)     # (1, 4)
stretched = np.broadcast_to(col, (3, 4))
print("col stretched to (3, 4): strides", stretched.strides, "(0 bytes along the columns)")
assert stretched.strides == (4, 0)
total = col + row
print(total)
assert total.shape == (3, 4) and total[2, 3] == 24.0
""")

code(r"""
def draw_values(ax, arr, title, ghost_shape=None):
    # Draw arr; with ghost_shape, draw the broadcast copies faded.
    shown = np.broadcast_to(arr, ghost_shape) if ghost_shape else arr
    rows, cols = shown.shape
    for i in range(rows):
        for j in range(cols):
            real = i < arr.shape[0] and j < arr.shape[1]
            ax.add_patch(plt.Rectangle((j, rows - 1 - i), 1, 1, edgecolor="black",
                                       facecolor="tab:blue" if real else "lightsteelblue",
                                       alpha=1.0 if real else 0.5))
            ax.text(j + 0.5, rows - 0.5 - i, f"{shown[i, j]:.0f}", ha="center", va="center",
                    color="white" if real else "black", fontsize=12)
    ax.set_xlim(0, 4)
    ax.set_ylim(0, 3)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)


fig, axes = plt.subplots(1, 5, figsize=(11, 3), gridspec_kw={"width_ratios": [4, 1, 4, 1, 4]})
draw_values(axes[0], col, "col (3, 1)\nstretched along axis 1", ghost_shape=(3, 4))
draw_values(axes[2], row, "row (1, 4)\nstretched along axis 0", ghost_shape=(3, 4))
draw_values(axes[4], total, "col + row (3, 4)")
for ax, symbol in [(axes[1], "+"), (axes[3], "=")]:
    ax.text(0.5, 0.5, symbol, fontsize=28, ha="center", va="center")
    ax.axis("off")
plt.show()
""")

md(r"""
When the rule fails, NumPy says so. tinytrain checks shapes *before* computing and names the
op and both shapes in its message (`broadcast_shapes` in `tinytrain/autograd/ops.py`).
""")

code(r"""
show_error(lambda: np.ones((2, 3)) + np.ones((3, 2)))
e = show_error(lambda: tt.ones(2, 3) + tt.ones(3, 2))
assert "(2, 3) and (3, 2)" in str(e)
""")

md(r"""
### Why the gradient of a broadcast op is a sum

Take `y = x + b` with `x` of shape `(3, 4)` and a bias `b` of shape `(4,)`, and a loss
`L = sum(w * y)` for some weights `w`. Each `b[j]` was *copied* into the three entries
`y[0, j], y[1, j], y[2, j]`, so nudging `b[j]` nudges all three, and by the chain rule

$$\frac{\partial L}{\partial b_j} = \sum_i \frac{\partial L}{\partial y_{ij}}.$$

The gradient flowing back, `dL/dy`, has the *output's* shape `(3, 4)`; to become the
gradient of `b` it must be **summed over the broadcast axes** back to `(4,)`. Copying in
forward is summing in backward. In tinytrain every binary op does this with one helper,
`unbroadcast(grad, shape)`.
""")

code(r"""
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
""")

md(r"""
And the package's autograd does the same when we let it differentiate (chapter 2 explains
how):
""")

code(r"""
tb = tt.tensor(b, requires_grad=True)
(tt.tensor(w) * (tt.tensor(x) + tb)).sum().backward()
print(tb.grad)
assert np.allclose(tb.grad.numpy(), g_b)
""")

# ----------------------------------------------------------------------------- Tensor
md(r"""
## 3. What a `Tensor` adds

A tinytrain `Tensor` wraps exactly one array — a NumPy array on `"cpu"`, a CuPy array on
`"cuda"`, never a mix — and adds what training needs:

| attribute | meaning |
|---|---|
| `device` | `"cpu"` or `"cuda"`, read off the array's type |
| `dtype` | the array's dtype, with PyTorch's rules for Python numbers |
| `requires_grad` | should backward compute a gradient for this tensor? |
| `grad` | after `backward()`, the gradient (itself a Tensor) |
| `grad_fn` | the graph node of the op that made this tensor (`None` for leaves) |
| `data` | the raw array (as in micrograd and DeZero) |
""")

code(r"""
x = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
print(x)
print("shape", x.shape, "| dtype", x.dtype, "| device", x.device)
print("requires_grad", x.requires_grad, "| grad", x.grad, "| grad_fn", x.grad_fn,
      "| is_leaf", x.is_leaf)
print("data is a", type(x.data).__module__ + "." + type(x.data).__name__)
assert x.dtype == tt.float32 and x.device == "cpu" and x.grad is None
""")

code(r"""
y = (x * x).sum()              # an op on a tensor that requires grad records a node
print(y, "  grad_fn:", y.grad_fn)
y.backward()
print("x.grad =", x.grad)      # d(sum x^2)/dx = 2x
assert np.allclose(x.grad.numpy(), 2 * x.numpy())
""")

md(r"""
### Creating tensors

The creation functions mirror PyTorch. Random ones draw from the package generator, so
`tt.manual_seed` makes them reproducible (and, because draws happen on the CPU, the same
seed gives the same numbers on every device).
""")

code(r"""
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
""")

md(r"""
### dtype rules

* Python floats (and lists of them) become **float32**, Python ints become **int64** — as
  in PyTorch, because float32 is what we train in.
* A NumPy array **keeps its dtype**: `np.zeros(3)` is float64 and stays float64. Pass
  `dtype=` to choose.
* `tt.tensor` always **copies** its input; `x.numpy()` on the CPU returns the tensor's own
  array (no copy, as in PyTorch), so writing into it writes into the tensor.
""")

code(r"""
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
assert t.numpy() is t.data                      # .numpy() does not (on the CPU)
""")

md(r"""
### `.to()`: devices and dtypes

`x.to(dtype)`, `x.to("cuda")` and `x.to("cpu", dtype)` return a converted copy — or `x`
itself when nothing changes. The conversion is differentiable: gradients flow back to the
original device and dtype. Asking for `"cuda"` on a machine without CuPy or a GPU raises an
error that says what to install.
""")

code(r"""
x64 = x.to(tt.float64)
print(x64.dtype, "| same object when nothing changes:", x.to("cpu") is x)
assert x64.dtype == tt.float64 and x.to("cpu") is x

if tt.cuda_is_available():
    xg = x.to("cuda")
    print(xg.device, type(xg.data))
    assert np.array_equal(xg.numpy(), x.numpy())
else:
    print("No CUDA GPU here; this is what asking for one says:\n")
    show_error(lambda: x.to("cuda"))
""")

md(r"""
### Errors that say what went wrong

Mixed dtypes follow one rule, PyTorch's `result_type` ([dtypes.py](../tinytrain/dtypes.py)):
floats beat integers, and a Python number never widens a tensor's dtype. NumPy's rule
differs: `int64 * 0.5` is float64 there, float32 here, so a model stays in float32.
Matrix products are stricter: like PyTorch's, they refuse mixed dtypes and say what to
do. Shape errors name both shapes.
""")

code(r"""
print("int64 * 0.5 -> NumPy:", (np.arange(3) * 0.5).dtype,
      "| tinytrain:", (tt.arange(3) * 0.5).dtype)
assert (tt.arange(3) * 0.5).dtype == tt.float32
show_error(lambda: tt.ones(2, 3) @ tt.ones(3, 2, dtype=tt.float64))
show_error(lambda: tt.ones(2, 3) @ tt.ones(2, 3))
show_error(lambda: tt.ones(2, 3, requires_grad=True).sum(dim=1).backward())
e = show_error(lambda: tt.tensor([1, 2], requires_grad=True))
assert isinstance(e, TypeError)
""")

# ----------------------------------------------------------------------------- backend
md(r"""
## 4. One code path for NumPy and CuPy

CuPy copies NumPy's API almost name for name: `cupy.exp`, `cupy.matmul`, `arr.sum(axis=...)`
all exist with the same meaning. So instead of writing every op twice, we write it once
against a module variable `xp` and ask the *input* which module it belongs to. This is
DeZero's idea, and `tinytrain.backend.get_array_module(arr)` returns `numpy` for a NumPy
array and `cupy` for a CuPy array.

Every op in `tinytrain/autograd/ops.py` is written this way, for example:
""")

code(r"""
import inspect

from tinytrain.autograd import ops

print(inspect.getsource(ops.Exp))
""")

md(r"""
Let us write one function in that style: a **numerically stable softmax**. The naive
`exp(x) / sum(exp(x))` overflows as soon as an input is larger than about 88 in float32.
Subtracting the row maximum first changes nothing mathematically (the factor `exp(-max)`
cancels) but keeps every exponent `<= 0`.
""")

code(r"""
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
""")

code(r"""
if tt.cuda_is_available():
    import cupy as cp

    p_gpu = softmax(cp.asarray(logits))       # the very same function, now on the GPU
    print("CuPy result:", type(p_gpu), "\n", cp.asnumpy(p_gpu))
    assert np.allclose(cp.asnumpy(p_gpu), p, atol=1e-6)
else:
    print("No CUDA GPU / CuPy on this machine: skipping the CuPy run of softmax.")
    print("On a GPU machine this cell runs softmax on a cupy array and compares with NumPy.")
""")

# ----------------------------------------------------------------------------- summary
md(r"""
## Summary

* An array is a **buffer + dtype + shape + strides**. Transposes, slices with steps,
  broadcasts (stride 0) and `as_strided` windows are all *views*: new strides, same bytes.
  `reshape` of a non-contiguous array and fancy indexing copy.
* **Broadcasting** lines shapes up from the right; sizes must be equal or 1. Because
  forward *copies* along broadcast axes, backward must **sum** the gradient back to the
  input's shape: `unbroadcast`.
* A tinytrain **Tensor** is one array on one device plus `requires_grad`, `grad` and
  `grad_fn`; Python floats become float32, NumPy arrays keep their dtype, and mixed dtypes,
  devices or bad shapes fail early with a message naming the problem.
* Ops are written once against `xp = get_array_module(x)`, so the same code runs on NumPy
  and CuPy.

**Where this lives in the package**

* [tinytrain/tensor.py](../tinytrain/tensor.py) — `Tensor`, `tensor`, `zeros`, `ones`,
  `randn`, `arange`, `.to()`, the dtype rules and error checks
* [tinytrain/backend.py](../tinytrain/backend.py) — devices, `get_array_module`,
  `cuda_is_available`, lazy CuPy import
* [tinytrain/autograd/ops.py](../tinytrain/autograd/ops.py) — `unbroadcast`,
  `broadcast_shapes`, and every op written against `xp`
* [tinytrain/random.py](../tinytrain/random.py) — `manual_seed` and the package generator

**Next:** [Chapter 2 — reverse-mode autodiff from scratch](02_autograd.ipynb) turns
`grad_fn` into a working backward pass.
""")


if __name__ == "__main__":
    sys.exit(nb.main())
