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
# # Chapter 2 — Reverse-mode automatic differentiation from scratch
#
# Training a network means following the gradient of a loss with respect to every parameter.
# Writing those derivatives by hand does not scale; **reverse-mode autodiff** computes all of
# them in one backward sweep whose cost is a small multiple of the forward pass. This
# chapter builds it twice — first for scalars, where every step is visible, then for
# tensors, the way `tinytrain.autograd` does it — then builds the pieces of training on top
# (modules, a layer, a loss, two optimizers) and trains a small network with them. It ends
# with gradients of gradients: what Newton's method, Hessian-vector products, gradient
# penalties and MAML need.
#
# **What you will build / learn in this chapter**
#
# 1. A scalar autograd (`Value`, in the spirit of micrograd): `+`, `*`, `**`, `exp`,
#    `tanh`, and `backward()` by topological sort; a drawing of the graph; a check against
#    finite differences.
# 2. The tensor version: `Function` with `forward` / `setup_context` / `backward`, the
#    context `ctx`, `needs_input_grad` and *selective save*; broadcasting handled by
#    `unbroadcast`.
# 3. The backward **engine**: dependency counting (Kahn's algorithm), and why a tensor used
#    twice must wait for both of its gradients.
# 4. Our engine vs. `tinytrain.autograd` vs. PyTorch on the same expression.
# 5. Hooks (`register_post_accumulate_grad_hook`, which DDP needs in chapter 7) and
#    `no_grad`.
# 6. The pieces of training, built on our engine and checked against the package and
#    PyTorch: `Module` / `Parameter` registration, `Linear` and why its initial weights are
#    drawn from `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, cross-entropy via log-sum-exp and its
#    `softmax - onehot` gradient, SGD with momentum, and Adam.
# 7. A small MLP trained on two moons three times from the same initial weights — with what
#    we built, with `tinytrain`, with PyTorch — and the scalar `Value` engine timed against
#    the tensor engine on the same network.
# 8. Gradients of gradients: `Value` closures that compute with Values, so that a gradient
#    has a graph and can be differentiated again; Newton's method with them; then the
#    package's `create_graph=True`: the derivatives of `tanh` up to the fourth, a
#    Hessian-vector product checked against finite differences and the full Hessian, and
#    how `backward_graph` and the saved arrays reconnected to the graph make it work.

# %%
# %matplotlib inline
import math

import matplotlib.pyplot as plt
import numpy as np

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

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
# ## 1. A scalar autograd
#
# The chain rule says: if `L` depends on `a` only through `out = f(a, b)`, then
# `dL/da = dL/dout * dout/da`. *Reverse* mode applies it from the output backwards: each
# value keeps a `grad` slot meaning `dL/d(this value)`, the output starts with `grad = 1`, and
# each operation knows how to pass its output's gradient to its inputs (its *local
# derivative* times the incoming gradient).
#
# A `Value` remembers the values it was computed from (`_prev`), the operation (`_op`) and a
# closure `_backward` that does that one local step. Two details matter:
#
# * gradients are **added** (`+=`), never assigned: a value used twice receives a
#   contribution from each use;
# * `backward()` must call the closures in **reverse topological order**, so that a value's
#   `grad` is complete before it is passed further down.

# %%
class Value:
    # A scalar that remembers how it was computed.

    def __init__(self, data, children=(), op="", label=""):
        self.data = float(data)
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = tuple(children)
        self._op = op
        self.label = label

    def named(self, label):
        self.label = label
        return self

    def __repr__(self):
        return f"Value({self.label or self._op}: data={self.data:.4f}, grad={self.grad:.4f})"

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad                 # d(a+b)/da = 1
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad    # d(ab)/da = b
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, k):                         # k is a plain number
        out = Value(self.data ** k, (self,), f"**{k}")

        def _backward():
            self.grad += k * self.data ** (k - 1) * out.grad

        out._backward = _backward
        return out

    def exp(self):
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward():
            self.grad += out.data * out.grad      # d(e^a)/da = e^a

        out._backward = _backward
        return out

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward():
            self.grad += (1 - t * t) * out.grad   # d(tanh a)/da = 1 - tanh(a)^2

        out._backward = _backward
        return out

    # everything else is built from the above
    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def __truediv__(self, other):
        return self * other ** -1

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def backward(self):
        topo, seen = [], set()

        def build(v):                 # depth-first: a value after everything it depends on
            if v not in seen:
                seen.add(v)
                for child in v._prev:
                    build(child)
                topo.append(v)

        build(self)
        self.grad = 1.0
        for v in reversed(topo):     # the output first, the leaves last
            v._backward()
        return topo


# %% [markdown]
# A single neuron, `o = tanh(x1*w1 + x2*w2 + b)`, micrograd's classic example:

# %%
def neuron():
    x1, x2 = Value(2.0, label="x1"), Value(0.0, label="x2")
    w1, w2 = Value(-3.0, label="w1"), Value(1.0, label="w2")
    b = Value(6.8813735870195432, label="b")
    x1w1 = (x1 * w1).named("x1*w1")
    x2w2 = (x2 * w2).named("x2*w2")
    s = (x1w1 + x2w2).named("s")
    n = (s + b).named("n")
    o = n.tanh().named("o")
    return o, dict(x1=x1, x2=x2, w1=w1, w2=w2, b=b)


o, leaves = neuron()
o.backward()
for name, v in leaves.items():
    print(f"d o / d {name:2s} = {v.grad:+.4f}")
# by hand: do/dn = 1 - tanh(n)^2 = 0.5 at this b; do/dw1 = 0.5 * x1 = 1.0, do/dx1 = 0.5 * w1
assert math.isclose(leaves["w1"].grad, 1.0, rel_tol=1e-6)
assert math.isclose(leaves["x1"].grad, -1.5, rel_tol=1e-6)
assert leaves["w2"].grad == 0.0                      # x2 = 0 kills w2's gradient


# %% [markdown]
# ### A picture of the graph
#
# We draw the graph with matplotlib only: each value is a box labelled with its name, the
# op that produced it, its `data` and its `grad`; arrows go from inputs to outputs, i.e. the
# direction of the forward pass (backward walks them the other way). Each node is placed
# one column to the left of its leftmost consumer, so the output is on the right and a
# value sits right next to where it is used.

# %%
fig, ax = plt.subplots(figsize=(10, 4.5))
figures.draw_graph(o, ax)
ax.set_title("o = tanh(x1*w1 + x2*w2 + b): blue = leaves, orange = ops")
plt.show()


# %% [markdown]
# ### Checking against finite differences
#
# A derivative is a limit, `(f(a + h) - f(a - h)) / 2h` for small `h`. That is far too slow
# to train with (one or two forward passes *per input*), but it is the perfect referee. We
# check a second expression that uses every op — `+`, `*`, `**`, `exp`, `tanh`, `/`, `-` —
# and a value (`a`) used several times.

# %%
def f(a, b, c):
    return ((a * b + a.exp()) / (c ** 2 + 1) - a).tanh() * b


def numeric_grad(fn, args, h=1e-6):
    grads = []
    for i in range(len(args)):
        up = [Value(x + (h if j == i else 0.0)) for j, x in enumerate(args)]
        dn = [Value(x - (h if j == i else 0.0)) for j, x in enumerate(args)]
        grads.append((fn(*up).data - fn(*dn).data) / (2 * h))
    return grads


args = [0.7, -1.3, 0.4]
inputs = [Value(x, label=n) for x, n in zip(args, "abc")]
f(*inputs).backward()
analytic = [v.grad for v in inputs]
numeric = numeric_grad(f, args)
for name, ga, gn in zip("abc", analytic, numeric):
    print(f"d f / d {name}: backward {ga:+.8f}   finite differences {gn:+.8f}")
assert np.allclose(analytic, numeric, rtol=1e-6, atol=1e-8)

# %% [markdown]
# Why `+=`: with `=`, a value used twice would keep only the last contribution.

# %%
a = Value(3.0, label="a")
y = a * a + a          # dy/da = 2a + 1 = 7
y.backward()
print(a)
assert a.grad == 7.0

# %% [markdown]
# ### Exercise 2.1 — the order of backward, without recursion
#
# `Value.backward` finds its order with a recursive depth-first search, so a chain of a few
# thousand operations (an RNN unrolled over a long sequence, say) exceeds Python's recursion
# limit. Write `topological_order(root)` with an explicit stack instead: every value that
# `root` depends on, each exactly once, each after all the values it was computed from, and
# `root` last. The checker tests these properties on random graphs with shared values, runs
# backward in the reverse of your order and compares the gradients with `Value.backward`, and
# finally orders a chain 5,000 operations long.

# %%
def topological_order(root):
    """Every Value root depends on (and root), each after its inputs; no recursion."""
    ### BEGIN SOLUTION
    order, done, stack = [], set(), [(root, False)]
    while stack:
        v, inputs_done = stack.pop()
        if inputs_done:
            order.append(v)
        elif id(v) not in done:
            done.add(id(v))
            stack.append((v, True))                 # come back to v after its inputs
            stack.extend((child, False) for child in v._prev)
    return order
    ### END SOLUTION


# %% tags=["checker"]
def random_graph(rng, n_leaves=4, n_ops=30):
    # leaves, then n_ops random operations on earlier values: shared values everywhere
    values = [Value(float(v), label=f"x{i}") for i, v in enumerate(rng.normal(size=n_leaves))]
    for _ in range(n_ops):
        a, b = (values[int(i)] for i in rng.integers(0, len(values), 2))
        values.append([a + b, a * b, a.tanh()][int(rng.integers(3))])
    return values[-1], values[:n_leaves]


check_rng = np.random.default_rng(21)
for _ in range(20):
    root, leaves = random_graph(check_rng)
    order = topological_order(root)
    position = {id(v): i for i, v in enumerate(order)}
    assert len(position) == len(order), "a value appears twice"
    assert order[-1] is root, "root must come last"
    for v in order:
        for child in v._prev:
            assert position[id(child)] < position[id(v)], f"{v} comes before its input {child}"
    assert set(position) == {id(v) for v in root.backward()}, "not the values root depends on"
    expected = [leaf.grad for leaf in leaves]
    for v in order:
        v.grad = 0.0
    root.grad = 1.0
    for v in reversed(order):
        v._backward()
    assert np.allclose([leaf.grad for leaf in leaves], expected)

chain = Value(0.5)
for _ in range(5000):
    chain = chain * 1.0001                   # each step: a new product and a new constant
try:
    chain_order = topological_order(chain)
except RecursionError:
    raise AssertionError("topological_order(chain) hit Python's recursion limit: the test graph "
                         "is a chain of 5,000 ops, so the topological sort must use an explicit "
                         "stack, not recursion") from None
assert len(chain_order) == 10_001, f"{len(chain_order)} values in the chain's order, not 10,001"
print("Exercise 2.1: topological_order is a valid order, gives Value.backward's gradients,",
      "and handles a chain of 5,000 ops")

# %% [markdown]
# ## 2. From scalars to tensors: `Function` and `ctx`
#
# A `Value` per number would be hopelessly slow for a network with a million weights. We
# keep the same idea but let each node of the graph be one operation on **whole arrays**:
# one matrix multiplication instead of a million multiplications. tinytrain follows
# PyTorch 2's shape for such an op, a `Function` with three static methods:
#
# * `forward(*inputs)` computes the output from **raw arrays** (NumPy or CuPy; no autograd
#   inside);
# * `setup_context(ctx, inputs, output)` stores on `ctx` **only what backward needs**;
# * `backward(ctx, grad_output)` returns one gradient per forward input (`None` where no
#   gradient is needed).
#
# `ctx.needs_input_grad` is a tuple of booleans, one per input, computed by `apply`. It enables
# **selective save**: `d(a*b)/da` needs only `b` and `d(a*b)/db` needs only `a`, so when just
# one input requires a gradient only one array is kept alive until backward. For a layer
# whose input is a large batch of images this is a real memory saving. Here is tinytrain's
# `Mul` (its last method, `backward_graph`, is for gradients of gradients: section 8):

# %%
import inspect

from tinytrain.autograd import ops

print(inspect.getsource(ops.Mul))

# %% [markdown]
# `Function.apply` (in `tinytrain/autograd/function.py`) is the only place where Tensors
# and graph bookkeeping appear: it unwraps the inputs, calls `forward`, wraps the output, and
# — if grad mode is on, some input requires grad and the result is floating (an integer
# result, such as a cast to int64, is not differentiable) — creates a context, calls
# `setup_context`, and records a graph node pointing at the inputs' nodes.
#
# Let us build a miniature version of all this in a few dozen lines: a `MiniTensor`, a
# `Fn.apply`, five ops (`+`, `*`, `@`, `tanh`, `sum`) with NumPy broadcasting, and an engine.
# Binary ops use the `unbroadcast` helper from chapter 1 to sum gradients back to each
# input's shape.

# %%
from tinytrain.autograd.ops import unbroadcast


class Ctx:
    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved = ()

    def save_for_backward(self, *arrays):
        self.saved = arrays


class Fn:
    @classmethod
    def apply(cls, *inputs):
        raw = [x.data if isinstance(x, MiniTensor) else x for x in inputs]
        out = MiniTensor(cls.forward(*raw))
        needs = tuple(isinstance(x, MiniTensor) and x.requires_grad for x in inputs)
        if any(needs):
            ctx = Ctx(needs)
            cls.setup_context(ctx, raw, out.data)
            # the graph edge: this op, its context, and the inputs that need a gradient
            out.creator = (cls, ctx, tuple(x if n else None for x, n in zip(inputs, needs)))
            out.requires_grad = True
        return out


class MiniTensor:
    def __init__(self, data, requires_grad=False, name=""):
        self.data = np.asarray(data, dtype=np.float64)
        self.requires_grad = requires_grad
        self.grad = None
        self.creator = None          # (Fn subclass, ctx, inputs) for op results, None for leaves
        self.name = name

    def named(self, name):
        self.name = name
        return self

    @staticmethod
    def wrap(x):
        return x if isinstance(x, MiniTensor) else MiniTensor(x)

    def __add__(self, other):
        return Add.apply(self, MiniTensor.wrap(other))

    def __mul__(self, other):
        return Mul.apply(self, MiniTensor.wrap(other))

    def __matmul__(self, other):
        return MatMul.apply(self, other)

    def tanh(self):
        return Tanh.apply(self)

    def sum(self):
        return Sum.apply(self)

    def backward(self, trace=None):
        run_backward(self, np.ones_like(self.data), trace)


# %%
class Add(Fn):
    @staticmethod
    def forward(a, b):
        return a + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shapes = (inputs[0].shape, inputs[1].shape)      # no arrays needed at all

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        return (unbroadcast(g, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast(g, sb) if ctx.needs_input_grad[1] else None)


class Mul(Fn):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(b if ctx.needs_input_grad[0] else None,   # selective save
                              a if ctx.needs_input_grad[1] else None)
        ctx.shapes = (a.shape, b.shape)

    @staticmethod
    def backward(ctx, g):
        b, a = ctx.saved
        sa, sb = ctx.shapes
        return (unbroadcast(g * b, sa) if ctx.needs_input_grad[0] else None,
                unbroadcast(g * a, sb) if ctx.needs_input_grad[1] else None)


class MatMul(Fn):                         # 2-D only, to keep it short
    @staticmethod
    def forward(a, b):
        return a @ b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(b if ctx.needs_input_grad[0] else None,
                              a if ctx.needs_input_grad[1] else None)

    @staticmethod
    def backward(ctx, g):                 # out = a @ b: da = g @ b.T, db = a.T @ g
        b, a = ctx.saved
        return (g @ b.T if ctx.needs_input_grad[0] else None,
                a.T @ g if ctx.needs_input_grad[1] else None)


class Tanh(Fn):
    @staticmethod
    def forward(a):
        return np.tanh(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)     # tanh' = 1 - tanh^2: the *output* is enough

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved
        return (g * (1 - t * t),)


class Sum(Fn):
    @staticmethod
    def forward(a):
        return a.sum()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, g):
        return (np.broadcast_to(g, ctx.shape).copy(),)


# %% [markdown]
# Selective save at work: when only `b` requires a gradient, `Mul` keeps `a` and drops `b`.

# %%
a = MiniTensor(np.ones((1000, 1000)))
b = MiniTensor(np.ones(1000), requires_grad=True)
out = a * b
kept = [None if s is None else s.shape for s in out.creator[1].saved]
print("needs_input_grad:", out.creator[1].needs_input_grad, "-> saved (b, a):", kept)
assert out.creator[1].saved[0] is None           # b is not needed: d(ab)/db = a


# %% [markdown]
# ### Exercise 2.2 — a `Function` of your own
#
# tinytrain's `Function` has the same three static methods as `Fn` above, and `apply` does
# the bookkeeping. Write the sigmoid, $\sigma(x) = 1 / (1 + e^{-x})$, as a subclass of
# `tinytrain.autograd.function.Function`: `forward` on a raw array, `setup_context` saving
# **only the output** (since $\sigma' = \sigma (1 - \sigma)$, the input is not needed) with
# `ctx.save_for_backward`, and `backward` reading it back from `ctx.saved_tensors`. Then
# `Sigmoid.apply(t)` works on tinytrain tensors. The checker compares values and gradients
# with the package's `Tensor.sigmoid` (and PyTorch, when it is installed), in float32 and
# float64, and looks at what your context saved.

# %%
from tinytrain.autograd.function import Function


class Sigmoid(Function):
    @staticmethod
    def forward(a):
        """The sigmoid of the raw array a, in a's dtype."""
        ### BEGIN SOLUTION
        return 1 / (1 + np.exp(-a))
        ### END SOLUTION

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Save what backward needs: the output only."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(output)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, g):
        """The gradient with respect to the input, given g = dL/d(output)."""
        ### BEGIN SOLUTION
        (s,) = ctx.saved_tensors
        return g * s * (1 - s)
        ### END SOLUTION


# %% tags=["checker"]
try:
    import torch
except ImportError:
    torch = None

check_rng = np.random.default_rng(22)
for shape in [(), (5,), (3, 4), (2, 3, 4)]:
    for dtype in (np.float32, np.float64):
        data = (3 * check_rng.standard_normal(shape)).astype(dtype)
        g = check_rng.standard_normal(shape).astype(dtype)
        mine, ref = tt.tensor(data, requires_grad=True), tt.tensor(data, requires_grad=True)
        y, y_ref = Sigmoid.apply(mine), ref.sigmoid()
        assert np.array_equal(mine.numpy(), data), "forward changed its input x in place"
        assert y.dtype == y_ref.dtype, f"forward returned {y.dtype} for {y_ref.dtype} input"
        where = f"shape {shape}, {np.dtype(dtype)}"
        assert np.allclose(y.numpy(), y_ref.numpy(), rtol=1e-6, atol=1e-7), (
            f"{where}: the forward value differs from sigmoid by up to "
            f"{np.max(np.abs(y.numpy() - y_ref.numpy())):.3g}")
        saved = [a for a in y.grad_fn.ctx.saved_tensors if a is not None]
        assert len(saved) == 1 and np.array_equal(saved[0], y.numpy()), \
            "setup_context should save exactly one array, the output"
        (y * tt.tensor(g)).sum().backward()
        (y_ref * tt.tensor(g)).sum().backward()
        assert np.allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-5, atol=1e-7), (
            f"{where}: the gradient differs from sigmoid's by up to "
            f"{np.max(np.abs(mine.grad.numpy() - ref.grad.numpy())):.3g} (backward returns "
            f"g times the derivative)")
        if torch is not None:
            x_t = torch.tensor(data, requires_grad=True)
            (torch.sigmoid(x_t) * torch.from_numpy(g)).sum().backward()
            assert np.allclose(mine.grad.numpy(), x_t.grad.numpy(), rtol=1e-5, atol=1e-7), (
                f"{where}: the gradient differs from PyTorch's")
print("Exercise 2.2: Sigmoid matches Tensor.sigmoid" + (" and PyTorch" if torch else ""),
      "and saves only its output")

# %% [markdown]
# ## 3. The engine: dependency counting (Kahn's algorithm)
#
# `backward()` must run each node **after every node that consumes its output**, because
# only then is its incoming gradient complete. The `Value` class got that order from a
# depth-first topological sort. tinytrain's engine (`tinytrain/autograd/engine.py`) gets it
# by **counting dependencies**, which is Kahn's algorithm:
#
# 1. Walk the graph from the output and count, for every node, how many edges point into it
#    (how many consumers it has inside this graph).
# 2. Keep a gradient *buffer* per node, and a list of *ready* nodes, starting with the output.
# 3. Run a ready node's backward; add each returned gradient into the input's buffer and
#    decrement that input's count. When the count hits zero, the buffer holds the full sum
#    — the input is ready.
#
# The counts also tell the engine the moment a leaf's gradient is *final*. That moment is
# what post-accumulate hooks fire on, what lets each node free its saved arrays right after
# it ran, and what lets DDP start communicating a gradient while backward is still running.

# %%
def run_backward(root, grad, trace=None):
    # 1. count the consumers of every tensor reachable from root
    deps = {root: 0}
    stack = [root]
    while stack:
        t = stack.pop()
        if t.creator is None:
            continue
        for inp in t.creator[2]:
            if inp is None:
                continue
            if inp not in deps:
                deps[inp] = 0
                stack.append(inp)
            deps[inp] += 1
    # 2./3. run nodes whose gradient is complete
    buffers = {root: grad}
    ready = [root]
    while ready:
        t = ready.pop()
        g = buffers.pop(t)
        if trace is not None:
            trace.append(t.name)
        if t.creator is None:                       # a leaf: accumulate into .grad
            t.grad = g.copy() if t.grad is None else t.grad + g
            continue
        fn, ctx, inputs = t.creator
        for inp, gi in zip(inputs, fn.backward(ctx, g)):
            if inp is None:
                continue
            buffers[inp] = gi if inp not in buffers else buffers[inp] + gi
            deps[inp] -= 1
            if deps[inp] == 0:
                ready.append(inp)
    return deps


# %% [markdown]
# ### The diamond
#
# `h = tanh(x)` is used twice, by `u = h * a` and `v = h * c`, and `L = sum(u + v)`. The
# graph is a diamond: two paths from `L` down to `h`. `h` has two consumers, so the engine
# must not run `h`'s backward until both `u` and `v` have delivered their share — then it
# runs **once**, with the sum.

# %%
x = MiniTensor([0.5, -1.0], requires_grad=True, name="x")
h = x.tanh().named("h")
u = (h * np.array([2.0, 3.0])).named("u")
v = (h * np.array([-1.0, 4.0])).named("v")
s = (u + v).named("u+v")
L = s.sum().named("L")

trace = []
L.backward(trace)
print("order in which backward ran:", " -> ".join(trace))
assert trace.count("h") == 1
assert trace.index("h") > max(trace.index("u"), trace.index("v"))

# dL/dx = (a + c) * (1 - tanh(x)^2)
expected = (np.array([2.0, 3.0]) + np.array([-1.0, 4.0])) * (1 - np.tanh(x.data) ** 2)
print("x.grad =", x.grad)
assert np.allclose(x.grad, expected)


# %% [markdown]
# What if we did not count, and simply recursed — "call backward on each input as soon as you
# have a gradient for it"? By linearity the final sums would still be right, but every
# shared node would run once **per path** through it. Stack `k` diamonds and there are
# `2**k` paths: the work explodes. Counting runs every node exactly once.

# %%
def naive_backward(t, g, counter):
    counter[t.name] = counter.get(t.name, 0) + 1
    if t.creator is None:
        t.grad = g.copy() if t.grad is None else t.grad + g
        return
    fn, ctx, inputs = t.creator
    for inp, gi in zip(inputs, fn.backward(ctx, g)):
        if inp is not None:
            naive_backward(inp, gi, counter)


def stacked_diamonds(k):
    x = MiniTensor([0.3, -0.2], requires_grad=True, name="x")
    h = x
    for i in range(k):
        h = (h * 0.9 + h * 0.5).tanh().named(f"h{i}")     # h is used twice: one diamond
    return x, h.sum().named("L")


ks = list(range(1, 13))
naive_calls, kahn_calls = [], []
for k in ks:
    x1, L1 = stacked_diamonds(k)
    counter = {}
    naive_backward(L1, np.ones(()), counter)
    naive_calls.append(sum(counter.values()))
    x2, L2 = stacked_diamonds(k)
    trace = []
    L2.backward(trace)
    kahn_calls.append(len(trace))
    assert np.allclose(x1.grad, x2.grad)          # same answer ...
print("k = 12: naive recursion ran", naive_calls[-1], "node backwards; Kahn ran", kahn_calls[-1])
assert kahn_calls[-1] < 100 < naive_calls[-1]     # ... very different work

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(ks, naive_calls, "o-", label="naive recursion (once per path)")
ax.semilogy(ks, kahn_calls, "s-", label="dependency counting (once per node)")
ax.set_xlabel("number of stacked diamonds k")
ax.set_ylabel("node backward calls")
ax.legend()
ax.grid(True, which="both", alpha=0.3)
plt.show()

# %% [markdown]
# ## 4. Three implementations, one answer
#
# Now the same expression, with broadcasting in two places (`b` of shape `(5,)` is added
# to every row; `x2` of shape `(4, 1)` multiplies every column), through
#
# 1. our notebook engine,
# 2. `tinytrain.autograd` (the package),
# 3. PyTorch, the golden reference (if it is installed).
#
# We use float64 so the three agree to ~1e-12.

# %%
rng = np.random.default_rng(0)
xs = {"x": rng.standard_normal((4, 3)), "w": rng.standard_normal((3, 5)),
      "b": rng.standard_normal(5), "x2": rng.standard_normal((4, 1))}


def expression(x, w, b, x2):
    return ((x @ w + b).tanh() * x2).sum()


# 1. the notebook's engine
mini = {k: MiniTensor(v, requires_grad=True, name=k) for k, v in xs.items()}
out_mini = expression(**mini)
out_mini.backward()

# 2. tinytrain
tiny = {k: tt.tensor(v, requires_grad=True) for k, v in xs.items()}
out_tiny = expression(**tiny)
out_tiny.backward()

for k in xs:
    assert mini[k].grad.shape == xs[k].shape
    assert np.allclose(mini[k].grad, tiny[k].grad.numpy(), rtol=1e-12, atol=1e-12), k
assert np.isclose(out_mini.data, out_tiny.item())
print("notebook engine == tinytrain:", {k: tiny[k].grad.shape for k in xs})

# %%
try:
    import torch
except ImportError:
    torch = None
    print("PyTorch is not installed: skipping the comparison with PyTorch.")

if torch is not None:
    ref = {k: torch.tensor(v, requires_grad=True) for k, v in xs.items()}
    out_ref = expression(**ref)
    out_ref.backward()
    for k in xs:
        assert np.allclose(tiny[k].grad.numpy(), ref[k].grad.numpy(), rtol=1e-12, atol=1e-12), k
    assert np.isclose(out_tiny.item(), out_ref.item())
    print("tinytrain == PyTorch for the gradients of", list(xs))


# %% [markdown]
# tinytrain's graph is made of `Node` objects, separate from the tensors (so a tensor can be
# freed while its node lives on), and each leaf that requires grad gets an
# **`AccumulateGrad`** node that adds the incoming gradient into `.grad`. We can walk it
# through `grad_fn.next_functions` (which holds the nodes themselves; PyTorch's holds
# `(node, input_number)` pairs):

# %%
def print_graph(node, depth=0):
    extra = f"  (leaf of shape {node.tensor.shape})" if node.name == "AccumulateGrad" else ""
    print("    " * depth + node.name + extra)
    for child in node.next_functions:
        if child is not None:
            print_graph(child, depth + 1)


out = expression(**tiny)
print_graph(out.grad_fn)

# %% [markdown]
# ### Exercise 2.3 — a gradient check for any function
#
# The finite differences of section 1 worked on `Value`s. Write `numerical_grad(f, x, eps)`
# for arrays: `f` maps a float64 array to a number, and the result is an array of `x`'s shape
# whose element `i` is `(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`. Nudge `x` in place and
# put each element back, so that `x` is unchanged at the end. The checker compares your
# numbers with tinytrain's autograd on a few functions, from a scalar to a 3-D array.

# %%
def numerical_grad(f, x, eps=1e-6):
    """Central differences of f (float64 array -> number) at x: an array shaped like x."""
    ### BEGIN SOLUTION
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + eps
        up = f(x)
        x[index] = old - eps
        down = f(x)
        x[index] = old
        grad[index] = (up - down) / (2 * eps)
    return grad
    ### END SOLUTION


# %% tags=["checker"]
check_rng = np.random.default_rng(23)
w_check = tt.tensor(check_rng.standard_normal((4, 3)))
labels_check = tt.tensor([0, 2, 1])
expressions = {                       # tinytrain expressions; each gives one number
    "sum(x^3)": ((2, 3, 4), lambda t: (t * t * t).sum()),
    "sum(tanh(x @ w))": ((5, 4), lambda t: (t @ w_check).tanh().sum()),
    "cross_entropy(x, labels)": ((3, 3), lambda t: F.cross_entropy(t, labels_check)),
    "tanh(x)^2 of a scalar": ((), lambda t: t.tanh() * t.tanh()),
}
for name, (shape, expr) in expressions.items():
    x_check = check_rng.standard_normal(shape)
    before = x_check.copy()
    numeric = numerical_grad(lambda arr, expr=expr: expr(tt.tensor(arr)).item(), x_check)
    # with a larger step, central differences stay within 1e-5; forward ones do not
    coarse = numerical_grad(lambda arr, expr=expr: expr(tt.tensor(arr)).item(), x_check,
                            eps=1e-3)
    assert np.array_equal(x_check, before), (
        f"{name}: x changed; save each element and put the saved value back (x + eps - eps "
        "is not always x: rounding)")
    assert np.shape(numeric) == shape, f"{name}: gradient of shape {np.shape(numeric)}"
    leaf = tt.tensor(x_check, requires_grad=True)
    expr(leaf).backward()
    assert np.allclose(numeric, leaf.grad.numpy(), rtol=1e-5, atol=1e-7), (
        f"{name}, x of shape {shape}: differs from autograd's gradient by up to "
        f"{np.max(np.abs(numeric - leaf.grad.numpy())):.3g}")
    assert np.allclose(coarse, leaf.grad.numpy(), rtol=1e-5, atol=1e-5), \
        f"{name}: with eps=1e-3 the error is too large for central differences"
print("Exercise 2.3: numerical_grad agrees with autograd on", ", ".join(expressions))

# %% [markdown]
# ## 5. Hooks and `no_grad`
#
# ### `register_post_accumulate_grad_hook`
#
# A hook registered on a leaf runs every time a gradient has been added into its `.grad` —
# i.e. the moment that parameter's gradient for this backward is final. Watch the order for a
# two-layer model: the **last** layer's parameters are ready first, because backward runs
# from the output towards the input.
#
# This is exactly what data-parallel training (chapter 7) exploits: as soon as a group of
# gradients is final, it can be averaged across processes *while backward is still computing
# the earlier layers*. That is why DDP groups parameters into buckets in **reverse**
# registration order.

# %%
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
ready_order = []
handles = [
    p.register_post_accumulate_grad_hook(
        lambda p, name=name: ready_order.append((name, float(np.abs(p.grad.numpy()).sum()))))
    for name, p in model.named_parameters()
]

inputs, targets = tt.randn(5, 2), tt.tensor([0, 1, 0, 1, 1])
F.cross_entropy(model(inputs), targets).backward()
for name, grad_abs_sum in ready_order:
    print(f"ready: {name:9s} sum|grad| = {grad_abs_sum:.4f}")
names = [name for name, _ in ready_order]
assert sorted(names) == sorted(n for n, _ in model.named_parameters())
assert max(names.index("2.weight"), names.index("2.bias")) < min(names.index("0.weight"),
                                                                names.index("0.bias"))
for handle in handles:
    handle.remove()

# %% [markdown]
# Gradients **accumulate**: a second backward adds to `.grad`. That is useful (gradient
# accumulation over micro-batches) but means every training step must start by resetting
# them — `zero_grad()`.

# %%
model.zero_grad()
for _ in range(2):
    F.cross_entropy(model(inputs), targets).backward()
twice = model[0].weight.grad.numpy().copy()
model.zero_grad()
F.cross_entropy(model(inputs), targets).backward()
once = model[0].weight.grad.numpy()
assert np.allclose(twice, 2 * once)
print("two backwards without zero_grad give twice the gradient")

# %% [markdown]
# Without `retain_graph=True`, each node frees its saved arrays as soon as it has run. A
# second backward through a node that needs them would silently use nothing — so it fails
# loudly. (A node that saved no array, a sum or a reshape, has lost nothing and runs again,
# as in PyTorch.)

# %%
w = tt.tensor([1.0, 2.0], requires_grad=True)
y = (w * w).sum()
y.backward()
e = show_error(lambda: y.backward())
assert isinstance(e, RuntimeError)

# %% [markdown]
# ### `no_grad`
#
# Recording the graph costs memory: every node keeps what its backward needs (here, both
# factors of `w * w`: two references to `w`'s array, not copies). During evaluation there
# will be no backward, so we switch recording off with `tt.no_grad()`, a context manager that
# also works as a decorator. Results made under it have no `grad_fn` and do not require grad.

# %%
y = w * w
kept = [s for s in y.grad_fn.ctx.saved_tensors if s is not None]
print("recorded:", y.grad_fn, "keeps", len(kept), "array(s)")
assert len(kept) == 2 and all(np.shares_memory(s, w.numpy()) for s in kept)

with tt.no_grad():
    y = w * w
print("under no_grad: requires_grad =", y.requires_grad, ", grad_fn =", y.grad_fn)
assert not y.requires_grad and y.grad_fn is None
assert tt.is_grad_enabled()                           # switched back on at the end of the block


@tt.no_grad()
def evaluate(model, x):
    return model(x)


assert evaluate(model, inputs).grad_fn is None
e = show_error(lambda: y.sum().backward())


# %% [markdown]
# ## 6. Build the pieces of training
#
# A training loop needs four more things: **modules** that hold parameters, a **layer** with a
# sensible initialisation, a **loss**, and an **optimizer**. We build each on the notebook's
# own engine (`MiniTensor`), check each against `tinytrain` and PyTorch, and then train the
# same network three times — with our pieces, with the package, with PyTorch — from the same
# initial weights.
#
# ### Parameters and modules
#
# A model is a tree of modules: an MLP holds layers, a layer holds parameters. The optimizer
# needs the list of every parameter in the tree, and saving a model needs a name for each.
# PyTorch's answer, which tinytrain copies, is to **register on assignment**: a `Module`
# overrides `__setattr__`, so that `self.weight = Parameter(...)` files the value under
# `"weight"` in the module's parameter dictionary and `self.hidden = Linear(...)` files a
# sub-module; `parameters()` then walks the tree. A layer's code says nothing about
# bookkeeping, and the dictionaries keep the order of assignment, which fixes the order of the
# parameters (and so of the optimizer's state) and their dotted names (`hidden.weight`).

# %%
class Parameter(MiniTensor):
    # a MiniTensor that a Module registers as trainable
    def __init__(self, data):
        super().__init__(data, requires_grad=True)


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", {})   # plain attributes: no registration
        object.__setattr__(self, "_modules", {})

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def named_parameters(self, prefix=""):
        # own parameters first, then each sub-module's, in the order they were assigned
        for name, p in self._parameters.items():
            yield prefix + name, p
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def __call__(self, *inputs):
        return self.forward(*inputs)


# %% [markdown]
# ### `Linear` and its initialisation
#
# `Linear(in_features, out_features)` computes `y = x @ W.T + b` with `W` of shape
# `[out, in]` (PyTorch's layout), so our engine needs one more op, the transpose, whose
# gradient is the transposed gradient. The interesting part is the initialisation. PyTorch
# draws `W` with `kaiming_uniform_(W, a=sqrt(5))`: uniform on `[-bound, bound]` with
#
# $$\text{bound} = \text{gain}\cdot\sqrt{\frac{3}{\text{fan\_in}}},\qquad
#   \text{gain} = \sqrt{\frac{2}{1 + a^2}} = \sqrt{\frac{2}{6}} = \frac{1}{\sqrt 3}
#   \quad\Longrightarrow\quad \text{bound} = \frac{1}{\sqrt{\text{fan\_in}}},$$
#
# and the bias from the same range. Why these numbers: a uniform variable on `[-b, b]` has
# variance `b^2 / 3`, so `kaiming_uniform_` gives the weights the standard deviation
# `gain / sqrt(fan_in)` (the `3` under the root is there to cancel this `1/3`). An output
# `y_i = sum_j W_ij x_j` of `fan_in` independent terms then has
#
# $$\operatorname{Var}(y_i) = \text{fan\_in}\cdot\operatorname{Var}(W)\cdot E[x^2]
#   = \text{gain}^2\, E[x^2] = \tfrac{1}{3}\, E[x^2],$$
#
# the same for a layer of 10 inputs as for one of 1000: without the `1/sqrt(fan_in)`, wide
# layers would blow their outputs up and saturate every `tanh`. (The gain `1/sqrt(3)` comes
# from `a = sqrt(5)`, a choice PyTorch kept to reproduce the `1/sqrt(fan_in)` rule of its
# predecessor, Lua Torch; `kaiming_uniform_` with the ReLU gain `sqrt(2)` keeps the variance
# through deep ReLU networks.)

# %%
class Transpose(Fn):
    @staticmethod
    def forward(a):
        return a.T

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass                                    # nothing to save

    @staticmethod
    def backward(ctx, g):
        return (g.T,)


MiniTensor.T = property(lambda self: Transpose.apply(self))
init_rng = np.random.default_rng(0)            # our layers draw their initial weights here


class Linear(Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        a = math.sqrt(5)
        gain = math.sqrt(2 / (1 + a * a))
        bound = gain * math.sqrt(3 / in_features)          # = 1 / sqrt(in_features)
        self.weight = Parameter(init_rng.uniform(-bound, bound, (out_features, in_features)))
        self.bias = Parameter(init_rng.uniform(-bound, bound, out_features))

    def forward(self, x):
        return x @ self.weight.T + self.bias


# %% [markdown]
# The bound against the package's and PyTorch's layers: on a large layer the largest `|w|`
# sits just under the bound and the standard deviation is `bound / sqrt(3)`. Then
# the point of it all: `x` of unit variance through layers from 10 to 1000 inputs wide
# comes out with variance `1/3` every time.

# %%
fan_in = 2000
layers = {"ours": Linear(fan_in, 2000).weight.data,
          "tinytrain": nn.Linear(fan_in, 2000).weight.numpy()}
if torch is not None:
    layers["PyTorch"] = torch.nn.Linear(fan_in, 2000).weight.detach().numpy()
bound = 1 / math.sqrt(fan_in)
for name, w in layers.items():
    print(f"{name:9s} max |w| * sqrt(fan_in) = {np.abs(w).max() / bound:.5f}   "
          f"std * sqrt(3 * fan_in) = {w.std() / bound * math.sqrt(3):.4f}")
    assert 0.999 < np.abs(w).max() / bound <= 1 and abs(w.std() * math.sqrt(3) / bound - 1) < 0.01

x_unit = np.random.default_rng(1).standard_normal((2000, 1000))
for width in (10, 100, 1000):
    y_var = (MiniTensor(x_unit[:, :width]) @ Linear(width, 64).weight.T).data.var()
    print(f"fan_in {width:4d}: Var(x @ W.T) = {y_var:.3f}")
    assert abs(y_var - 1 / 3) < 0.05

# %% [markdown]
# Registration at work: the same class body, written once, builds the same tree on our
# `Module`, on `tinytrain.nn.Module` and on `torch.nn.Module` (the `lib` argument supplies
# each library's `Module` and `Linear`), and all three name the parameters alike, in the
# same order. The package's `Module` registers buffers too, and adds hooks, `state_dict`,
# `train()`/`eval()` and `to()`; the registration itself is what you see here.

# %%
from types import SimpleNamespace

ours = SimpleNamespace(Module=Module, Linear=Linear)


def make_mlp(lib):
    # a 2-32-32-2 tanh MLP on the Module/Linear of lib (ours, tinytrain.nn or torch.nn)
    class MLP(lib.Module):
        def __init__(self):
            super().__init__()
            self.hidden1 = lib.Linear(2, 32)
            self.hidden2 = lib.Linear(32, 32)
            self.out = lib.Linear(32, 2)

        def forward(self, x):
            return self.out(self.hidden2(self.hidden1(x).tanh()).tanh())

    return MLP()


mine = make_mlp(ours)
names = [name for name, _ in mine.named_parameters()]
print(names)
assert names == [name for name, _ in make_mlp(nn).named_parameters()]
if torch is not None:
    assert names == [name for name, _ in make_mlp(torch.nn).named_parameters()]
assert [p.data.shape for p in mine.parameters()] == [(32, 2), (32,), (32, 32), (32,), (2, 32), (2,)]

# %% [markdown]
# ### Cross-entropy, via log-sum-exp
#
# A classifier outputs a row of **logits** `z` (one per class) per example; the softmax
# `p_c = e^{z_c} / sum_k e^{z_k}` turns them into probabilities, and the loss is the negative
# log-probability of the right class `y`, averaged over the batch:
#
# $$\ell(z, y) = -\log p_y = \log\sum_k e^{z_k} - z_y = \operatorname{logsumexp}(z) - z_y.$$
#
# Written this way it never forms `p` (whose `log` would be `-inf` once `p_y` underflows), and
# `logsumexp` is computed stably by pulling out the row's maximum `m`:
# `logsumexp(z) = m + log sum_k e^{z_k - m}`, where every exponent is `<= 0`.
#
# The gradient is the reason every framework fuses softmax and this loss into one op. The
# derivative of `logsumexp(z)` with respect to `z_c` is `e^{z_c} / sum_k e^{z_k} = p_c`, and
# that of `z_y` is 1 for `c = y` and 0 otherwise, so
#
# $$\frac{\partial \ell}{\partial z_c} = p_c - [c = y], \qquad
#   \frac{\partial \ell}{\partial z} = \operatorname{softmax}(z) - \operatorname{onehot}(y),$$
#
# divided by the batch size `B` for the mean: no `log`, no division by a small `p`, bounded by
# 1 in absolute value. Backward needs only the logits (and the targets): like the package's
# op, ours saves the logits and recomputes the softmax in backward.

# %%
class CrossEntropy(Fn):
    @staticmethod
    def forward(logits, targets):          # logits [B, C], integer targets [B]
        m = logits.max(axis=1, keepdims=True)
        logsumexp = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
        return (logsumexp - logits[np.arange(len(targets)), targets]).mean()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        logits, targets = ctx.saved
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)               # softmax
        p[np.arange(len(targets)), targets] -= 1         # - onehot
        return g * p / len(targets), None


def cross_entropy(logits, targets):
    return CrossEntropy.apply(logits, targets)


# %%
check_rng = np.random.default_rng(6)
for scale in (1.0, 1000.0):                            # ordinary logits, and huge ones
    z = scale * check_rng.standard_normal((8, 5))
    y = check_rng.integers(0, 5, 8)
    z_mine = MiniTensor(z, requires_grad=True)
    loss = cross_entropy(z_mine, y)
    loss.backward()
    z_tt = tt.tensor(z, requires_grad=True)
    loss_tt = F.cross_entropy(z_tt, tt.tensor(y))
    loss_tt.backward()
    assert np.isfinite(loss.data) and np.isclose(loss.data, loss_tt.item(), rtol=1e-12)
    assert np.allclose(z_mine.grad, z_tt.grad.numpy(), atol=1e-15)
    if torch is not None:
        z_t = torch.tensor(z, requires_grad=True)
        torch.nn.functional.cross_entropy(z_t, torch.from_numpy(y)).backward()
        assert np.allclose(z_mine.grad, z_t.grad.numpy(), atol=1e-15)
    print(f"logits of scale {scale:6.0f}: loss {loss.data:10.4f} "
          f"(tinytrain {loss_tt.item():10.4f})")
with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
    p_naive = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    print("the naive -log(softmax) on the huge logits:", -np.log(p_naive[np.arange(8), y]).mean())

# %% [markdown]
# ### SGD with momentum
#
# Plain gradient descent moves each parameter by `-lr * grad`. **Momentum** keeps a running
# sum of past gradients, a velocity `buf`, and moves along it instead: along a direction where
# the gradients agree from step to step, `buf` grows to `1 / (1 - momentum)` times the
# gradient (10x for the usual 0.9); across a ravine, where they flip sign, they cancel.
# PyTorch's formulation, which tinytrain's `SGD` follows exactly:
#
# $$\text{buf} \leftarrow \text{momentum}\cdot\text{buf} + g \quad(\text{buf} = g
#   \text{ on the first step}),\qquad p \leftarrow p - \text{lr}\cdot\text{buf}.$$
#
# (Many papers write `v = momentum * v - lr * g; p += v`, the same steps as long as `lr` is
# constant, but not when a schedule changes it.) The state lives in the optimizer, one buffer
# per parameter, and `zero_grad` drops the gradients so the next backward starts afresh.

# %%
class SGD:
    def __init__(self, params, lr, momentum=0.0):
        self.params, self.lr, self.momentum = list(params), lr, momentum
        self.bufs = [None] * len(self.params)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            if self.momentum:
                buf = self.bufs[i]
                self.bufs[i] = g.copy() if buf is None else self.momentum * buf + g
                g = self.bufs[i]
            p.data -= self.lr * g                     # in place: the same array, new values


# %% [markdown]
# Step by step against `tinytrain.optim.SGD` and `torch.optim.SGD`: the same starting values,
# the same gradients fed to all three, the parameters compared after every step.

# %%
def same_steps(make_mine, make_tt, make_torch, n_steps=8, seed=7):
    # run the three optimizers on the same parameters and gradients; compare after each step
    rng = np.random.default_rng(seed)
    starts = [rng.standard_normal((3, 4)), rng.standard_normal(4)]
    ps_mine = [Parameter(s.copy()) for s in starts]
    ps_tt = [tt.tensor(s.copy(), requires_grad=True) for s in starts]
    ps_t = [torch.tensor(s.copy(), requires_grad=True) for s in starts] if torch else []
    opts = [make_mine(ps_mine), make_tt(ps_tt)] + ([make_torch(ps_t)] if torch else [])
    for step in range(1, n_steps + 1):
        grads = [rng.standard_normal(s.shape) * rng.uniform(0.1, 10) for s in starts]
        for p, g in zip(ps_mine, grads):
            p.grad = g.copy()
        for p, g in zip(ps_tt, grads):
            p.grad = tt.tensor(g)
        for p, g in zip(ps_t, grads):
            p.grad = torch.tensor(g)
        for opt in opts:
            opt.step()
        for who, theirs in (("tinytrain's", [b.numpy() for b in ps_tt]),
                            ("PyTorch's", [b.detach().numpy() for b in ps_t])):
            for i, (a, b) in enumerate(zip(ps_mine, theirs)):
                assert np.allclose(a.data, b, rtol=1e-13, atol=1e-13), (
                    f"after step {step}, parameter {i} (shape {a.data.shape}) differs from "
                    f"{who} by up to {np.abs(a.data - b).max():.3g}")
    return n_steps


n = same_steps(lambda ps: SGD(ps, lr=0.05, momentum=0.9),
               lambda ps: tt.optim.SGD(ps, lr=0.05, momentum=0.9),
               lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9))
print("SGD with momentum: the same parameters as tinytrain's" + (" and PyTorch's" if torch else ""),
      f"after each of {n} steps")

# %% [markdown]
# Our `step` writes `p.data -= ...` into the array behind the parameter. On a tinytrain (or
# PyTorch) tensor the same line works on the tensor itself, as an in-place op, inside
# `no_grad()`: the update is not part of the model's computation, so it must not be recorded.
# Outside `no_grad()` it is refused, as in PyTorch: the parameter is a leaf that requires a
# gradient, and writing into it while recording would change a value the graph may have saved.
# So the plain SGD step is three lines:

# %%
tt.manual_seed(0)
model_a = nn.Linear(3, 2)
model_b = nn.Linear(3, 2)
model_b.load_state_dict(model_a.state_dict())
xb, yb = tt.randn(5, 3), tt.tensor([0, 1, 1, 0, 1])
for m in (model_a, model_b):
    F.cross_entropy(m(xb), yb).backward()

with tt.no_grad():                              # the hand-written step ...
    for p in model_a.parameters():
        p -= 0.1 * p.grad
tt.optim.SGD(model_b.parameters(), lr=0.1).step()   # ... and the package's
for pa, pb in zip(model_a.parameters(), model_b.parameters()):
    assert np.allclose(pa.numpy(), pb.numpy())


def step_outside_no_grad():
    p = model_a.weight
    p -= 0.1 * p.grad


e = show_error(step_outside_no_grad)
assert isinstance(e, RuntimeError)

# %% [markdown]
# ### Exercise 2.4 — Adam
#
# Adam (Kingma and Ba, 2015) keeps two running averages per parameter, of the gradient
# (`m`, the momentum) and of its square (`v`, the scale), and divides one by the square root
# of the other, so that every parameter moves by about `lr` per step, whatever the size of
# its gradients. Both averages start at zero and so are too small in the first steps; dividing
# by `1 - beta^t` at step `t` corrects that bias:
#
# $$m \leftarrow \beta_1 m + (1-\beta_1)\,g, \qquad v \leftarrow \beta_2 v + (1-\beta_2)\,g^2,
#   \qquad p \leftarrow p - \text{lr}\,
#   \frac{m / (1-\beta_1^t)}{\sqrt{v / (1-\beta_2^t)} + \epsilon}.$$
#
# Write `Adam.step` for our parameters (`p.data` and `p.grad` are NumPy arrays): count the
# step, update `m` and `v` in place and the parameter, and skip parameters whose `grad` is
# `None`. The checker runs it step by step against `tinytrain.optim.Adam` and
# `torch.optim.Adam` (when installed), with gradients of very different sizes.

# %%
class Adam:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        self.m = [np.zeros_like(p.data) for p in self.params]
        self.v = [np.zeros_like(p.data) for p in self.params]
        self.t = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        """One Adam update of every parameter that has a gradient."""
        ### BEGIN SOLUTION
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m *= b1
            m += (1 - b1) * p.grad
            v *= b2
            v += (1 - b2) * p.grad ** 2
            m_hat, v_hat = m / (1 - b1 ** self.t), v / (1 - b2 ** self.t)
            p.data -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        ### END SOLUTION


# %% tags=["checker"]
n = same_steps(lambda ps: Adam(ps, lr=0.01), lambda ps: tt.optim.Adam(ps, lr=0.01),
               lambda ps: torch.optim.Adam(ps, lr=0.01), n_steps=12, seed=24)
frozen = Parameter(np.ones(3))                   # a parameter without a gradient ...
Adam([frozen, Parameter(np.ones(2))], lr=0.1).step()
assert np.array_equal(frozen.data, np.ones(3)), "a parameter whose grad is None must not move"
frozen.grad = np.ones(3)                         # ... and one whose gradient goes away after a
opt = Adam([frozen], lr=0.1)                     # step: its m is not zero, and None is not a
opt.step()                                       # zero gradient (PyTorch skips it too)
after_one = frozen.data.copy()
frozen.grad = None
opt.step()
assert np.array_equal(frozen.data, after_one), (
    "a parameter whose grad is None must not move, also after earlier steps (skip it: "
    "do not treat None as a zero gradient)")
print("Exercise 2.4: Adam gives tinytrain's" + (" and PyTorch's" if torch else ""),
      f"parameters after each of {n} steps")


# %% [markdown]
# ## 7. Training the MLP three ways
#
# Everything is in place to train. The data: two interleaving half-moons in 2-D, 300
# points, generated here with a fixed seed. A straight line cannot separate them; a small
# MLP with `tanh` hidden layers can.

# %%
def make_moons(n, noise, seed):
    rng = np.random.default_rng(seed)
    n0 = n // 2
    t0, t1 = rng.uniform(0, np.pi, n0), rng.uniform(0, np.pi, n - n0)
    upper = np.stack([np.cos(t0), np.sin(t0)], axis=1)
    lower = np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], axis=1)
    X = np.concatenate([upper, lower]) + rng.normal(0, noise, (n, 2))
    y = np.concatenate([np.zeros(n0), np.ones(n - n0)]).astype(np.int64)
    order = rng.permutation(n)
    return X[order], y[order]


X_np, y_np = make_moons(300, noise=0.15, seed=0)
X_np = (X_np - X_np.mean(axis=0)) / X_np.std(axis=0)
print(X_np.shape, X_np.dtype, y_np.shape, y_np.dtype, "class counts:", np.bincount(y_np))

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.scatter(X_np[:, 0], X_np[:, 1], c=y_np, cmap="coolwarm", s=12, edgecolors="k", linewidths=0.3)
ax.set_title("two moons (300 points)")
plt.show()

# %% [markdown]
# The training step, in the order every chapter uses: `zero_grad` → forward (call the model,
# `model(x)`) → loss → `backward` → `step`. First with everything built in this chapter: our
# `MiniTensor` engine, `Module`, `Linear`, `cross_entropy` and `SGD` with momentum. Full
# batches, float64.

# %%
STEPS, LR, MOMENTUM = 300, 0.1, 0.9
init_rng = np.random.default_rng(0)
model_mine = make_mlp(ours)
initial = {name: p.data.copy() for name, p in model_mine.named_parameters()}

opt = SGD(model_mine.parameters(), lr=LR, momentum=MOMENTUM)
X_mine = MiniTensor(X_np)
losses_mine = []
for _ in range(STEPS):
    opt.zero_grad()
    loss = cross_entropy(model_mine(X_mine), y_np)
    loss.backward()
    opt.step()
    losses_mine.append(float(loss.data))
acc_mine = float((model_mine(X_mine).data.argmax(axis=1) == y_np).mean())
print(f"our engine: loss {losses_mine[0]:.4f} -> {losses_mine[-1]:.4f}, "
      f"training accuracy {acc_mine:.3f}")
assert losses_mine[-1] < 0.2 * losses_mine[0] and acc_mine >= 0.95

# %% [markdown]
# Then the same network from the same initial weights with the package — the same
# `make_mlp`, now on `tinytrain.nn`, loaded with our initial weights by name — and with
# PyTorch. The three loops differ only in their imports.

# %%
model_tt = make_mlp(nn).to(tt.float64)
model_tt.load_state_dict(initial)
opt_tt = tt.optim.SGD(model_tt.parameters(), lr=LR, momentum=MOMENTUM)
X_tt, Y_tt = tt.tensor(X_np), tt.tensor(y_np)
losses_tt = []
for _ in range(STEPS):
    opt_tt.zero_grad()
    loss = F.cross_entropy(model_tt(X_tt), Y_tt)
    loss.backward()
    opt_tt.step()
    losses_tt.append(loss.item())

losses = {"our engine": losses_mine, "tinytrain": losses_tt}
if torch is not None:
    model_t = make_mlp(torch.nn).double()
    model_t.load_state_dict({name: torch.from_numpy(w) for name, w in initial.items()})
    opt_t = torch.optim.SGD(model_t.parameters(), lr=LR, momentum=MOMENTUM)
    X_t, Y_t = torch.from_numpy(X_np), torch.from_numpy(y_np)
    losses["PyTorch"] = []
    for _ in range(STEPS):
        opt_t.zero_grad()
        loss = torch.nn.functional.cross_entropy(model_t(X_t), Y_t)
        loss.backward()
        opt_t.step()
        losses["PyTorch"].append(loss.item())

gaps = {name: np.abs(np.array(curve) - losses_mine) for name, curve in losses.items()
        if name != "our engine"}
for name, gap in gaps.items():
    print(f"largest |loss - our loss| over {STEPS} steps, {name}: {gap.max():.1e}")
    assert gap.max() < 1e-9

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
figures.draw_loss_curves(ax0, ax1, losses, gaps)
plt.show()

# %% [markdown]
# The curves lie on top of each other: in float64 the three implementations differ only in
# the order of their floating-point sums, and the right panel shows those rounding
# differences (their largest values are printed above), many orders of magnitude below the
# loss itself. Here is what the package's model learned:

# %%
@tt.no_grad()
def accuracy(model, X, Y):
    model.eval()
    pred = model(X).argmax(dim=1)
    model.train()
    return float((pred.numpy() == Y.numpy()).mean())


acc = accuracy(model_tt, X_tt, Y_tt)
gx, gy = np.meshgrid(np.linspace(-2.5, 2.5, 200), np.linspace(-2.5, 2.5, 200))
grid = tt.tensor(np.stack([gx.ravel(), gy.ravel()], axis=1))
with tt.no_grad():
    prob1 = F.softmax(model_tt(grid), dim=1).numpy()[:, 1].reshape(gx.shape)
assert acc == acc_mine

fig, ax = plt.subplots(figsize=(5.5, 4))
ax.contourf(gx, gy, prob1, levels=20, cmap="coolwarm", alpha=0.6)
ax.contour(gx, gy, prob1, levels=[0.5], colors="k", linewidths=1.5)
ax.scatter(X_np[:, 0], X_np[:, 1], c=y_np, cmap="coolwarm", s=12, edgecolors="k",
           linewidths=0.3)
ax.set_title(f"decision boundary (training accuracy {acc:.1%})")
plt.show()

# %% [markdown]
# ### One number at a time: the `Value` engine on the same MLP
#
# Why did we leave `Value` behind? It can train the same MLP — every weight a `Value`, every
# multiply-add a node — and compute the same numbers. Below, one step of the MLP on a batch
# of 8 points, with both engines, from the same weights: the losses and the updated weights
# agree; then each engine's time per step. (`Value` gets a `log` for the cross-entropy:
# `d log(a) / da = 1 / a`.) The garbage collector is switched off while timing: the `Value`
# engine's closures form reference cycles, and collecting them would otherwise dominate its
# time.

# %%
def value_log(self):
    out = Value(math.log(self.data), (self,), "log")

    def _backward():
        self.grad += out.grad / self.data

    out._backward = _backward
    return out


Value.log = value_log


def value_mlp_loss(params, X, y):
    # the MLP's cross-entropy, scalar by scalar; params: [W1, b1, W2, b2, W3, b3] of Values
    def linear(x, W, b):
        return [sum((w * xi for w, xi in zip(row, x)), bias) for row, bias in zip(W, b)]

    W1, b1, W2, b2, W3, b3 = params
    total = Value(0.0)
    for xs, target in zip(X, y):
        h = [v.tanh() for v in linear([Value(float(a)) for a in xs], W1, b1)]
        h = [v.tanh() for v in linear(h, W2, b2)]
        z = linear(h, W3, b3)
        m = max(v.data for v in z)
        total = total + sum(((v - m).exp() for v in z), Value(0.0)).log() + m - z[target]
    return total * (1 / len(X))


def to_values(arrays):
    return [np.vectorize(Value, otypes=[object])(a) for a in arrays]


def value_step(params, X, y, lr):
    loss = value_mlp_loss(params, X, y)
    nodes = len(loss.backward())
    for p in params:
        for v in p.flat:
            v.data -= lr * v.grad
            v.grad = 0.0
    return loss.data, nodes


def tensor_step(model, X, y, lr):
    opt = SGD(model.parameters(), lr=lr)
    loss = cross_entropy(model(X), y)
    trace = []
    loss.backward(trace)
    opt.step()
    return float(loss.data), len(trace)


Xs, ys = X_np[:8], y_np[:8]
init_rng = np.random.default_rng(0)
model_small = make_mlp(ours)                       # the same initial weights as above
value_params = to_values([p.data for p in model_small.parameters()])
loss_v, nodes_v = value_step(value_params, Xs, ys, LR)
loss_m, nodes_m = tensor_step(model_small, MiniTensor(Xs), ys, LR)
assert math.isclose(loss_v, loss_m, rel_tol=1e-12)
for p_values, p in zip(value_params, model_small.parameters()):
    assert np.allclose(np.vectorize(lambda v: v.data)(p_values), p.data, rtol=1e-12, atol=1e-14)
print(f"one step on {len(Xs)} points: loss {loss_v:.6f} with both; "
      f"{nodes_v:,} Value nodes against {nodes_m} tensor nodes")

# %%
import gc
import time


def seconds_per_step(step, repeats):
    times = []
    gc.collect()
    gc.disable()  # the Value engine's closures form reference cycles (see above)
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return float(np.median(times))


model_tt_small = make_mlp(nn).to(tt.float64)
model_tt_small.load_state_dict({n: p.data for n, p in model_small.named_parameters()})
X_small_tt, y_small_tt = tt.tensor(Xs), tt.tensor(ys)
opt_small = tt.optim.SGD(model_tt_small.parameters(), lr=LR)


def tinytrain_step():
    opt_small.zero_grad()
    F.cross_entropy(model_tt_small(X_small_tt), y_small_tt).backward()
    opt_small.step()


per_step = {
    "Value engine": seconds_per_step(lambda: value_step(value_params, Xs, ys, LR), 2),
    "our tensor engine": seconds_per_step(
        lambda: tensor_step(model_small, MiniTensor(Xs), ys, LR), 50),
    "tinytrain": seconds_per_step(tinytrain_step, 50),
}
if torch is not None:  # PyTorch on the same batch, from the same weights, in the same run
    model_t_small = make_mlp(torch.nn).double()
    model_t_small.load_state_dict({n: torch.from_numpy(p.data.copy())
                                   for n, p in model_small.named_parameters()})
    opt_t_small = torch.optim.SGD(model_t_small.parameters(), lr=LR)
    X_small_t, y_small_t = torch.from_numpy(Xs), torch.from_numpy(ys)

    def torch_step():
        opt_t_small.zero_grad()
        torch.nn.functional.cross_entropy(model_t_small(X_small_t), y_small_t).backward()
        opt_t_small.step()

    per_step["PyTorch"] = seconds_per_step(torch_step, 50)
for name, s in per_step.items():
    print(f"{name:18s} {s * 1e3:9.3f} ms per step")
ratio = per_step["Value engine"] / per_step["our tensor engine"]
print(f"the Value engine takes {ratio:,.0f}x as long per step; it builds "
      f"{nodes_v / nodes_m:,.0f}x as many nodes, "
      f"{per_step['Value engine'] / nodes_v * 1e6:.1f} us per Value node against "
      f"{per_step['our tensor engine'] / nodes_m * 1e6:.1f} us per tensor node")

# %% [markdown]
# The printed ratio is the whole argument for tensors. The two engines do the same
# arithmetic; the difference is how many times the Python interpreter is involved. The
# `Value` engine creates a Python object, a closure and a graph entry for every single
# multiply and add (the node count printed above, for this toy network on 8 points), and
# each costs interpreter time, forward and backward. The tensor engine creates one node per
# matrix operation, and each hands its whole loop to NumPy's compiled code: a tensor node
# costs a few times what a `Value` node does (the per-node times printed above), but it does
# a whole matrix operation for that, and there are far fewer of them. The gap grows with the
# batch and the width — the `Value` count grows with both, the tensor count with neither —
# which is why every framework is built on tensor ops, and why the rest of this course is
# about making a few large ops fast.
#
# The table has a second surprise: the package is slower per step than our small tensor
# engine (chapter 0's "the same numbers, faster" is about ops of real size, not this toy).
# A step here is a few dozen ops on arrays of at most 32x32 numbers, so its time is
# Python bookkeeping, not arithmetic, and the package does more bookkeeping per op than our
# engine: it checks every operand's dtype and device (to raise an error that names them),
# bumps a version counter on every in-place write (so that backward can refuse a saved tensor
# that was changed), looks up the grad mode (`no_grad`, `inference_mode`) and the hooks,
# dispatches to the NumPy or CuPy kernel, and its optimizer checks its state. PyTorch, printed
# last when it is installed, pays the same kind of per-op cost, in C++. That cost is fixed per
# op, so it fades as the ops grow: in chapter 6 a training step spends most of its time in
# the convolutions' matrix products, where a few microseconds per op no longer show.


# %% [markdown]
# ## 8. Gradients of gradients
#
# Everything so far needed the gradient as a *number*: an optimizer reads it and moves the
# weights. Some methods need to differentiate the gradient itself:
#
# * **Newton's method** jumps to the minimum of the parabola that has the function's value,
#   slope and curvature at the current point, $x \leftarrow x - f'(x) / f''(x)$: it needs the
#   second derivative. With many parameters $f''$ is the Hessian $H$, a $P \times P$ matrix
#   that nobody forms for a real network (a million weights: a million million entries), but
#   its product with a vector, $Hv$, costs about two backward passes. Hessian-free
#   optimisation, and the measures of how sharp a minimum is (its largest curvatures), are
#   built on such products.
# * **Gradient penalties.** WGAN-GP trains its critic $D$ with a loss that contains the
#   critic's gradient with respect to its input, $\lambda (\lVert \nabla_{\hat x} D(\hat x)
#   \rVert - 1)^2$ at points $\hat x$ between real and generated samples; the critic's weights
#   follow the gradient of that loss: a derivative of a derivative.
# * **MAML** learns initial weights $w$ that adapt to a new task in one gradient step,
#   $w' = w - \alpha \nabla L(w)$. The gradient of the loss after the step, $L_2(w')$, with
#   respect to $w$ goes through that inner gradient, so it contains the Hessian of $L$ (times
#   a vector).
#
# All three need the same thing: a gradient that backward can run through again, i.e. a
# gradient that carries the graph of how it was computed.
#
# ### The idea, on `Value`
#
# Look at section 1's `Value.__mul__` again. Its closure computes
# `self.grad += other.data * out.grad`, with the *float* `other.data`: the gradient is a
# float that has forgotten that it depends on `other`. Write the same line with the *Value*
# `other`, `self.grad += other * out.grad`, and the gradient is computed by `Value`
# operations: it is a `Value` with a graph, which `backward` can differentiate like any
# other. That is the whole trick, and it is what PyTorch's `create_graph=True` asks for.
# Only the closures that read `.data` change; `+`'s reads nothing (its local derivative is
# 1), and `Value2` repeats it only so that its result is a `Value2` too.

# %%
class Value2(Value):
    # Value whose closures compute with Values, not floats (`.data` dropped in * and **):
    # each gradient is then a Value2 with a graph of its own.
    def __add__(self, other):
        other = other if isinstance(other, Value) else Value2(other)
        out = Value2(self.data + other.data, (self, other), "+")
        def _backward():
            self.grad += out.grad                 # as in Value
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value2(other)
        out = Value2(self.data * other.data, (self, other), "*")
        def _backward():
            self.grad += other * out.grad         # Value: other.data * out.grad
            other.grad += self * out.grad
        out._backward = _backward
        return out

    def __pow__(self, k):
        out = Value2(self.data ** k, (self,), f"**{k}")
        def _backward():
            self.grad += k * self ** (k - 1) * out.grad   # Value: k * self.data ** (k - 1)
        out._backward = _backward
        return out


# %% [markdown]
# `value_grad(y, x)` runs section 1's `backward`, unchanged, and takes `x.grad`. Then it sets
# every `grad` that pass touched back to 0: the next pass, through the gradient's graph,
# goes through some of the same nodes again (`x`, and the factors the closures used), and
# must start from zero, as a training step starts from `zero_grad`. The test function is
# DeZero's, $f(x) = x^4 - 2x^2$; at $x = 2$ its derivatives are $f' = 4x^3 - 4x = 24$,
# $f'' = 12x^2 - 4 = 44$, $f''' = 24x = 48$ and $f'''' = 24$.

# %%
def value_grad(y, x):
    """dy/dx as a Value2, whose graph can be differentiated again."""
    order = y.backward()        # the closures build the gradient's graph as they run
    gx = x.grad
    for v in order:             # every grad back to 0 for the next pass
        v.grad = 0.0
    return gx if isinstance(gx, Value) else Value2(gx)   # (0.0 if y does not use x)


def quartic(x):
    return x ** 4 - 2 * x ** 2


x = Value2(2.0, label="x")
derivatives = [quartic(x)]
for _ in range(4):
    derivatives.append(value_grad(derivatives[-1], x))
print("f, f', f'', f''', f'''' at x = 2:", [d.data for d in derivatives])
assert [d.data for d in derivatives] == [8.0, 24.0, 44.0, 48.0, 24.0]

# %% [markdown]
# The gradient of a smaller function, $x^3$ at $x = 1.5$, drawn as section 1 drew a graph:
# `x**2 * 3 * 1 + 0`, where the `1` is the seed `out.grad` and the `0` the `grad` it was
# added to. It is an ordinary graph with `x` among its leaves, so it has a gradient of its
# own, $6x = 9$.

# %%
x = Value2(1.5, label="x")
gx = value_grad(x ** 3, x)
assert gx.data == 3 * 1.5 ** 2 and value_grad(gx, x).data == 6 * 1.5
fig, ax = plt.subplots(figsize=(10, 3.2))
figures.draw_graph(gx.named("dy/dx"), ax)
ax.set_title("the gradient of y = x**3, built by backward: a graph that contains x")
plt.show()

# %% [markdown]
# ### Newton's method
#
# With $f'$ and $f''$ in hand, Newton's method is three lines (DeZero's step 33 runs it on
# this function): differentiate twice at the current `x`, step by $-f'/f''$. Both
# derivatives are checked against their formulas at every step. For comparison, gradient
# descent (step size 0.01, section 1's plain `Value`, first derivatives only) from the same
# start.

# %%
newton = [2.0]
for _ in range(7):
    x = Value2(newton[-1])
    gx = value_grad(quartic(x), x)
    gx2 = value_grad(gx, x)
    assert math.isclose(gx.data, 4 * x.data ** 3 - 4 * x.data, rel_tol=1e-14)
    assert math.isclose(gx2.data, 12 * x.data ** 2 - 4, rel_tol=1e-14)
    newton.append(x.data - gx.data / gx2.data)
print("Newton:", " -> ".join(f"{v:.12f}" for v in newton))
assert abs(newton[-1] - 1.0) < 1e-15       # f'(1) = 0 and f''(1) = 8 > 0: the minimum

descent = [2.0]
while abs(descent[-1] - 1.0) > 1e-12:
    x = Value(descent[-1])
    quartic(x).backward()
    descent.append(x.data - 0.01 * x.grad)
print(f"gradient descent needs {len(descent) - 1} steps to get within 1e-12 of the minimum")

# %% [markdown]
# Near the minimum Newton's error is roughly squared at every step (the number of correct
# digits doubles), where gradient descent's shrinks by the same factor at every step,
# $1 - 0.01 f''(1) = 0.92$: a straight line on a log scale. The price is the second
# derivative and, with $P$ parameters, a $P \times P$ linear system to solve at each step.

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.6))
grid_x = np.linspace(-1.6, 2.1, 300)
ax0.plot(grid_x, quartic(grid_x), color="gray", label="f(x) = x^4 - 2x^2")
for path, marker, name in [(np.array(descent), "o", "gradient descent"),
                           (np.array(newton), "s", "Newton")]:
    ax0.plot(path, quartic(path), marker + "-", ms=3, label=name)
    error = np.abs(path - 1)
    steps = np.flatnonzero(error)                 # (Newton lands on 1.0 exactly)
    ax1.semilogy(steps, error[steps], marker + "-", ms=3, label=name)
ax0.set_xlabel("x")
ax0.legend()
ax1.set_xlabel("step")
ax1.set_ylabel("|x - 1|")
ax1.legend()
ax1.grid(True, which="both", alpha=0.3)
plt.show()

# %% [markdown]
# One more op, whose derivative is written with its *output*: $\tanh' = 1 - \tanh^2$.
# Section 1's closure used the float `t`; this one uses the Value `out` (as `1 + -out * out`:
# `Value` has no `1 - v`), so the gradient's graph goes through the `tanh` node itself, and
# the next pass differentiates that `tanh` again. Remember this one: it is what the package
# has to arrange for the arrays that a `Function` saved.

# %%
def value2_tanh(self):
    out = Value2(math.tanh(self.data), (self,), "tanh")

    def _backward():
        self.grad += (1 + -out * out) * out.grad    # Value: (1 - t * t) * out.grad

    out._backward = _backward
    return out


Value2.tanh = value2_tanh

x = Value2(0.7)
t = math.tanh(0.7)
gx2 = value_grad(value_grad(x.tanh(), x), x)
print(f"tanh''(0.7) = {gx2.data:.12f}; -2 tanh (1 - tanh^2) = {-2 * t * (1 - t * t):.12f}")
assert math.isclose(gx2.data, -2 * t * (1 - t * t), rel_tol=1e-14)

# %% [markdown]
# ### The package: `create_graph=True`
#
# tinytrain spells it as PyTorch does. `tt.autograd.grad(y, x, create_graph=True)` returns
# the gradient as a Tensor with a `grad_fn`, and a second `grad` (or `backward`) runs through
# it; `y.backward(create_graph=True)` does the same into `x.grad`. The same function, at the
# same point:

# %%
x = tt.tensor(2.0, dtype=tt.float64, requires_grad=True)
y = x ** 4 - 2 * x ** 2
(gx,) = tt.autograd.grad(y, x, create_graph=True)
print("f'(2) =", gx)                     # a grad_fn: it can be differentiated
(gx2,) = tt.autograd.grad(gx, x)
print("f''(2) =", gx2)                   # create_graph=False: a plain number again
assert gx.item() == 24.0 and gx2.item() == 44.0 and gx2.grad_fn is None

# %% [markdown]
# Now `tanh`'s first four derivatives, at 401 points at once: the `i`-th output depends only
# on the `i`-th input, so the gradient of their *sum* holds each point's own derivative, and
# each derivative, kept with its graph, is differentiated again for the next. The formulas
# to check against follow from $\tanh' = 1 - \tanh^2$ and the chain rule; with
# $t = \tanh x$ and $s = 1 - t^2$ they are $s$, $-2ts$, $-2s(1 - 3t^2)$ and
# $8ts(2 - 3t^2)$.

# %%
xs = tt.linspace(-4, 4, 401, dtype=tt.float64, requires_grad=True)
curves = [xs.tanh()]
for _ in range(4):
    (d,) = tt.autograd.grad(curves[-1].sum(), xs, create_graph=True)
    curves.append(d)
t = np.tanh(xs.detach().numpy())
s = 1 - t * t
formulas = [t, s, -2 * t * s, -2 * s * (1 - 3 * t * t), 8 * t * s * (2 - 3 * t * t)]
for k, (curve, formula) in enumerate(zip(curves, formulas)):
    assert np.allclose(curve.detach().numpy(), formula, rtol=1e-12, atol=1e-14), k

fig, ax = plt.subplots(figsize=(7, 3.8))
for curve, name in zip(curves, ["tanh(x)", "1st", "2nd", "3rd", "4th derivative"]):
    ax.plot(xs.detach().numpy(), curve.detach().numpy(), label=name)
ax.set_xlabel("x")
ax.legend()
ax.grid(True, alpha=0.3)
ax.set_title("tanh and its first four derivatives, each the gradient of the one before")
plt.show()

# %% [markdown]
# ### A Hessian-vector product
#
# For a loss $L(w)$ of $P$ parameters with gradient $g(w)$ and a constant vector $v$,
# $\partial (g \cdot v) / \partial w_i = \sum_j H_{ij} v_j$: the gradient of the *number*
# $g \cdot v$ is $Hv$. Two passes compute it, the gradient with its graph
# (`create_graph=True`), then the gradient of one number made from it; nothing of size
# $P \times P$ is ever formed. To see every number, the model is a tiny MLP, 2-4-2 with
# `tanh`, on the two moons, and its loss is written as a function of one flat vector `w` of
# its 22 parameters (the form `tt.autograd.functional` takes, below). The referee is a finite
# difference, of two gradients this time: $Hv \approx (g(w + \epsilon v) - g(w - \epsilon
# v)) / 2\epsilon$.

# %%
shapes = [(4, 2), (4,), (2, 4), (2,)]                # W1, b1, W2, b2
sizes = [math.prod(shape) for shape in shapes]


def mlp_loss(w, F, X, Y):
    # the loss of the 2-4-2 MLP whose parameters are the flat w (F: either library's)
    W1, b1, W2, b2 = (part.reshape(shape) for part, shape in zip(w.split(sizes), shapes))
    return F.cross_entropy(F.linear(F.linear(X, W1, b1).tanh(), W2, b2), Y)


def loss_of(w):
    return mlp_loss(w, F, X_tt, Y_tt)


def gradient_at(w_np):
    w = tt.tensor(w_np, requires_grad=True)
    return tt.autograd.grad(loss_of(w), w)[0].numpy()


rng = np.random.default_rng(8)
w_np, v_np = rng.standard_normal(sum(sizes)) / 2, rng.standard_normal(sum(sizes))
w, v = tt.tensor(w_np, requires_grad=True), tt.tensor(v_np)
(g,) = tt.autograd.grad(loss_of(w), w, create_graph=True)
(hv,) = tt.autograd.grad((g * v).sum(), w)           # v is a constant: d(g . v)/dw = H v
eps = 1e-5
finite = (gradient_at(w_np + eps * v_np) - gradient_at(w_np - eps * v_np)) / (2 * eps)
print(f"H v: {np.abs(hv.numpy()).max():.4f} at most; differs from the finite difference by "
      f"{np.abs(hv.numpy() - finite).max():.1e}")
assert np.allclose(hv.numpy(), finite, rtol=1e-6, atol=1e-8)

# %% [markdown]
# `tt.autograd.functional` packages the same passes under PyTorch's names: `hvp(f, w, v)`,
# and `hessian(f, w)`, which builds the whole $22 \times 22$ matrix, one row per backward
# pass through the gradient (affordable here, never for a real network). Times `v` it must
# give our product, and it must be symmetric ($H_{ij}$ and $H_{ji}$ are the same mixed
# derivative). PyTorch, when it is installed, computes the same product from the same
# function.

# %%
H = tt.autograd.functional.hessian(loss_of, w.detach()).numpy()
_, hv_functional = tt.autograd.functional.hvp(loss_of, w.detach(), v)
assert H.shape == (22, 22) and np.allclose(H, H.T, rtol=0, atol=1e-15)
assert np.allclose(H @ v_np, hv.numpy(), rtol=1e-12, atol=1e-15)
assert np.allclose(hv_functional.numpy(), hv.numpy(), rtol=1e-12, atol=1e-15)
if torch is not None:
    _, hv_torch = torch.autograd.functional.hvp(
        lambda w: mlp_loss(w, torch.nn.functional, X_t, Y_t), torch.from_numpy(w_np),
        torch.from_numpy(v_np))
    assert np.allclose(hv_torch.numpy(), hv.numpy(), rtol=1e-12, atol=1e-15)
curvatures = np.linalg.eigvalsh(H)
print(f"H @ v == H v{' == PyTorch' if torch is not None else ''}; eigenvalues of H from "
      f"{curvatures[0]:.3f} to {curvatures[-1]:.3f}, {np.sum(curvatures < 0)} of 22 negative")
assert curvatures[0] < 0 < curvatures[-1]              # (the text below reads them)

fig, ax = plt.subplots(figsize=(4.6, 4))
limit = np.abs(H).max()
image = ax.imshow(H, cmap="RdBu_r", vmin=-limit, vmax=limit)
for edge in np.cumsum(sizes)[:-1] - 0.5:             # the blocks of W1, b1, W2, b2
    ax.axhline(edge, color="k", lw=0.6)
    ax.axvline(edge, color="k", lw=0.6)
centres = np.cumsum(sizes) - np.array(sizes) / 2 - 0.5
ax.set_xticks(centres, ["W1", "b1", "W2", "b2"])
ax.set_yticks(centres, ["W1", "b1", "W2", "b2"])
fig.colorbar(image, ax=ax)
ax.set_title("the Hessian of the MLP's loss")
plt.show()

# %% [markdown]
# The negative eigenvalues say that at these random weights the loss curves *down* along
# some directions. Newton's step, $-H^{-1} g$, goes to the stationary point of the local
# quadratic, which along those directions is a maximum: one reason why second-order methods
# for networks damp or replace $H$ (with the Gauss-Newton matrix, say), besides its size.
#
# ### How the package does it
#
# The package does what `Value2` does, with one difference that speed imposes. Section 2's
# `Function.backward` computes on raw arrays (`Mul.backward` returns `g * b`, a NumPy array),
# and an array carries no graph. So each built-in op has a second method,
# `backward_graph(ctx, grad, saved)`: the same formula written with tinytrain's
# differentiable ops on Tensors, as `Value2`'s closures are `Value`'s with `.data` dropped.
# `saved` holds the arrays that `setup_context` saved, given back as Tensors *connected to
# the graph* (`Node.saved_graph`). `Function.apply` already matches every saved array to an
# input or to the output, by identity, for the in-place version check of section 5; the same
# record says which, so an input's array comes back as that input, and the output's as a
# Tensor whose `grad_fn` is the node itself: `Value2.tanh`'s `out`. With `create_graph=True`
# the engine runs a second loop over the same dependency counts, with grad mode on: it calls
# `backward_graph` instead of `backward` and sums gradients with Tensor ops. An op that has
# no `backward_graph` raises a `NotImplementedError` that names it, rather than return a
# gradient without its graph. `Tanh`'s two backwards read alike; the second one's `t` and
# `g` are Tensors:

# %%
print(inspect.getsource(ops.Tanh))

# %% [markdown]
# Why two methods and two loops, rather than one backward on Tensors for everything? A
# training step never differentiates twice, and gradients made of Tensors cost more than
# gradients made of arrays: a Tensor around every intermediate gradient, a graph node
# recorded for every op of the backward pass, and everything they hold kept alive. So the
# first-order path, which every training step takes, stays on arrays, and the mode is chosen
# once per pass, not tested at every node. The gradients of section 7's MLP, on its 300
# points, both ways:

# %%
params_tt = list(model_tt.parameters())
passes = {"forward only": lambda: F.cross_entropy(model_tt(X_tt), Y_tt),
          "backward on arrays": lambda: tt.autograd.grad(passes["forward only"](), params_tt),
          "backward with create_graph": lambda: tt.autograd.grad(passes["forward only"](),
                                                                 params_tt, create_graph=True)}
times = {name: [] for name in passes}
gc.disable()                                         # as in section 7's timing
for _ in range(100):                                 # interleaved: the same load for all three
    for name, run in passes.items():
        start = time.perf_counter()
        run()
        times[name].append(time.perf_counter() - start)
gc.enable()
ms = {name: float(np.median(t)) * 1e3 for name, t in times.items()}
for name in list(passes)[1:]:
    print(f"{name:27s} {ms[name] - ms['forward only']:.3f} ms (after a {ms['forward only']:.3f} "
          "ms forward)")


# %% [markdown]
# On the 2-core development machine the pass with `create_graph` took about 1.6 times as
# long as the pass on arrays (0.77 against 0.49 ms in one run of the cell above): a cost
# that every training step would pay for nothing if backward always built a graph.
#
# Where to read more: the DESIGN section of the docstring of
# [tinytrain/autograd/engine.py](../tinytrain/autograd/engine.py) (`_propagate_graph`, and
# why `retain_graph` defaults to `create_graph`);
# [tinytrain/autograd/function.py](../tinytrain/autograd/function.py) (`Node.apply_graph`,
# `Node.saved_graph`); the `backward_graph` methods of
# [tinytrain/autograd/ops.py](../tinytrain/autograd/ops.py) and
# [tinytrain/nn/conv.py](../tinytrain/nn/conv.py) (a convolution's gradients are convolutions
# again, so any order works);
# [tinytrain/autograd/gradients.py](../tinytrain/autograd/gradients.py) (`grad`) and
# [tinytrain/autograd/functional.py](../tinytrain/autograd/functional.py) (`jacobian`,
# `hessian`, `vjp`, `jvp`, `hvp`, `vhp`). Whole programs that use them, which the tests run
# with tinytrain and with PyTorch and compare: a WGAN-GP
# ([tests/tutorials/gan_wgan_gp.py](../tests/tutorials/gan_wgan_gp.py)), MAML on sine waves
# ([maml_sine.py](../tests/tutorials/maml_sine.py)), a physics-informed network whose loss
# holds $u_{xx}$ ([pinn_burgers.py](../tests/tutorials/pinn_burgers.py)) and second-order
# snippets, Newton's method for logistic regression among them
# ([hessian_snippets.py](../tests/tutorials/hessian_snippets.py)).


# %% [markdown]
# ## Summary
#
# * **Reverse mode**: every value carries `grad = dL/d(value)`; each op passes its output's
#   gradient to its inputs times the local derivative; contributions are **added**.
# * The order matters: a node may run only when all of its consumers have delivered their
#   gradients. tinytrain's engine counts dependencies (Kahn's algorithm); each node runs
#   exactly once, frees its saved arrays right after (unless `retain_graph=True`), and a
#   leaf's gradient is final when its count reaches zero.
# * A tensor op is a **`Function`**: `forward` on raw arrays, `setup_context` saving only what
#   backward needs (guided by `ctx.needs_input_grad`), `backward` returning one gradient per
#   input — summed back to each input's shape with `unbroadcast`.
# * Our engine, `tinytrain.autograd` and PyTorch agree on the gradients of the same
#   expression.
# * `register_post_accumulate_grad_hook` fires when a leaf's gradient is final — the last
#   layer first — which is what DDP builds on; `no_grad` turns recording off for evaluation
#   and for hand-written updates (`p -= lr * p.grad`).
# * A `Module` registers parameters and sub-modules on assignment (`__setattr__`), which
#   gives `parameters()` and the dotted names; `Linear`'s `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`
#   is `kaiming_uniform_` with `a = sqrt(5)` and keeps a third of the input's variance at any
#   width; cross-entropy is `logsumexp(z) - z_y`, with gradient `(softmax(z) - onehot(y)) / B`;
#   SGD's momentum buffer is `momentum * buf + g`; Adam divides a bias-corrected average of
#   the gradient by the root of one of its square.
# * Built from those pieces, our engine trains the two-moons MLP to the same losses as
#   `tinytrain` and PyTorch from the same weights, to rounding. The scalar `Value` engine
#   computes the same numbers with one Python object per multiply-add, and is slower by the
#   ratio printed in section 7: tensors exist to hand whole loops to compiled code.
# * **Gradients of gradients**: a backward that computes with the graph's own values
#   (`other * out.grad`, not `other.data * out.grad`) returns a gradient with a graph, which
#   backward differentiates again: Newton's method, Hessian-vector products ($Hv$ is the
#   gradient of $g \cdot v$: two passes, no $P \times P$ matrix), gradient penalties, MAML.
#   tinytrain's `create_graph=True` runs each op's `backward_graph` (its backward in Tensor
#   ops) on saved arrays given back as Tensors of the graph; the first-order pass stays on
#   arrays, because it is faster and every training step takes it.
#
# **Where this lives in the package**
#
# * [tinytrain/autograd/function.py](../tinytrain/autograd/function.py) — `Function`,
#   `Context` (`needs_input_grad`, `save_for_backward`), `Node`, `AccumulateGrad`
# * [tinytrain/autograd/engine.py](../tinytrain/autograd/engine.py) — `run_backward`:
#   dependency counting, buffers, freeing saved arrays; `create_graph`'s second loop
# * [tinytrain/autograd/ops.py](../tinytrain/autograd/ops.py) — every differentiable op
#   (`backward`, and `backward_graph` for gradients of gradients), and `unbroadcast`
# * [tinytrain/autograd/gradients.py](../tinytrain/autograd/gradients.py) — `autograd.grad`;
#   [tinytrain/autograd/functional.py](../tinytrain/autograd/functional.py) — `hessian`,
#   `hvp`, `jacobian`, ...
# * [tinytrain/autograd/grad_mode.py](../tinytrain/autograd/grad_mode.py) — `no_grad`,
#   `enable_grad`
# * [tinytrain/tensor.py](../tinytrain/tensor.py) — `Tensor.backward`,
#   `register_post_accumulate_grad_hook`
# * [tinytrain/nn/module.py](../tinytrain/nn/module.py) — `Module`, `Parameter`;
#   [tinytrain/nn/layers.py](../tinytrain/nn/layers.py) — `Linear`;
#   [tinytrain/nn/init.py](../tinytrain/nn/init.py) — `kaiming_uniform_`;
#   [tinytrain/nn/functional.py](../tinytrain/nn/functional.py) — `cross_entropy`
# * [tinytrain/optim/sgd.py](../tinytrain/optim/sgd.py) and
#   [tinytrain/optim/adam.py](../tinytrain/optim/adam.py) — `SGD`, `Adam`; their update
#   arithmetic is in [tinytrain/kernels/cpu/optim.py](../tinytrain/kernels/cpu/optim.py)
#
# **Previous:** [Chapter 1 — tensors](01_tensors.ipynb) · **Next:** [Chapter 3 — Conv2d on the
# CPU](03_conv2d_cpu.ipynb).
