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
# tensors, the way `tinytrain.autograd` does it — and then trains a small network with it.
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
# 6. A small MLP trained on two moons with `tinytrain.nn` and `tinytrain.optim`.

# %%
# %matplotlib inline
import math

import matplotlib.pyplot as plt
import numpy as np

import figures  # the course's plotting helpers, notebooks/figures.py
import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F
from tinytrain.optim import Adam

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
assert len(topological_order(chain)) == 10_001
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
# `Mul`:

# %%
import inspect

from tinytrain.autograd import ops

print(inspect.getsource(ops.Mul))

# %% [markdown]
# `Function.apply` (in `tinytrain/autograd/function.py`) is the only place where Tensors
# and graph bookkeeping appear: it unwraps the inputs, calls `forward`, wraps the output, and
# — if grad mode is on and some input requires grad — creates a context, calls
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
        assert y.dtype == y_ref.dtype, f"forward returned {y.dtype} for {y_ref.dtype} input"
        assert np.allclose(y.numpy(), y_ref.numpy(), rtol=1e-6, atol=1e-7), shape
        saved = [a for a in y.grad_fn.ctx.saved_tensors if a is not None]
        assert len(saved) == 1 and np.array_equal(saved[0], y.numpy()), \
            "setup_context should save exactly one array, the output"
        (y * tt.tensor(g)).sum().backward()
        (y_ref * tt.tensor(g)).sum().backward()
        assert np.allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-5, atol=1e-7), shape
        if torch is not None:
            x_t = torch.tensor(data, requires_grad=True)
            (torch.sigmoid(x_t) * torch.from_numpy(g)).sum().backward()
            assert np.allclose(mine.grad.numpy(), x_t.grad.numpy(), rtol=1e-5, atol=1e-7)
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
# through `grad_fn.next_functions`:

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
    assert np.array_equal(x_check, before), f"{name}: x changed"
    assert np.shape(numeric) == shape, f"{name}: gradient of shape {np.shape(numeric)}"
    leaf = tt.tensor(x_check, requires_grad=True)
    expr(leaf).backward()
    assert np.allclose(numeric, leaf.grad.numpy(), rtol=1e-5, atol=1e-7), name
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
# second backward through the same graph would silently use nothing — so it fails loudly:

# %%
w = tt.tensor([1.0, 2.0], requires_grad=True)
y = (w * w).sum()
y.backward()
e = show_error(lambda: y.backward())
assert isinstance(e, RuntimeError)

# %% [markdown]
# ### `no_grad`
#
# Recording the graph costs memory: every node keeps what its backward needs (here, `w`
# itself). During evaluation there will be no backward, so we switch recording off with
# `tt.no_grad()`, a context manager that also works as a decorator. Results made under it
# have no `grad_fn` and do not require grad.

# %%
y = w * w
kept = [s for s in y.grad_fn.ctx.saved_tensors if s is not None]
print("recorded:", y.grad_fn, "keeps", len(kept), "array(s)")

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
# ## 6. Training a small MLP
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
    return X[order].astype(np.float32), y[order]


X_np, y_np = make_moons(300, noise=0.15, seed=0)
mean, std = X_np.mean(axis=0), X_np.std(axis=0)
X = tt.tensor((X_np - mean) / std)
Y = tt.tensor(y_np)
print(X.shape, X.dtype, Y.shape, Y.dtype, "class counts:", np.bincount(y_np))

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.scatter(X_np[:, 0], X_np[:, 1], c=y_np, cmap="coolwarm", s=12, edgecolors="k", linewidths=0.3)
ax.set_title("two moons (300 points)")
plt.show()

# %% [markdown]
# ### Exercise 2.4 — the loss and its gradient
#
# The classifier below is trained with `F.cross_entropy`: for logits `z` of shape `[B, C]`
# and integer targets `y`, the mean over the batch of `logsumexp(z_i) - z_i[y_i]`, the
# negative log-probability of the right class under the softmax. Its gradient with respect to
# the logits is remarkably simple: `(softmax(z) - onehot(y)) / B`. Write both in NumPy, in
# `cross_entropy_with_grad(logits, targets)`. Subtract each row's maximum before `exp` (as the
# stable softmax of chapter 1 did), so that logits of 1000 give finite numbers. The checker
# compares with the package's `F.cross_entropy` and its backward (and PyTorch, when
# installed).

# %%
def cross_entropy_with_grad(logits, targets):
    """Mean cross-entropy of logits [B, C] for integer targets [B], and dloss/dlogits."""
    ### BEGIN SOLUTION
    b = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(b), targets].mean()
    grad = np.exp(log_probs)
    grad[np.arange(b), targets] -= 1
    return loss, grad / b
    ### END SOLUTION


# %% tags=["checker"]
check_rng = np.random.default_rng(24)
cases = [(int(check_rng.integers(1, 9)), int(check_rng.integers(2, 11)), 1.0) for _ in range(10)]
cases += [(4, 3, 1000.0), (1, 2, 1.0)]                     # huge logits; a batch of one
for batch, classes, scale in cases:
    z = scale * check_rng.standard_normal((batch, classes))
    y = check_rng.integers(0, classes, batch)
    loss, grad = cross_entropy_with_grad(z, y)
    assert np.isfinite(loss) and np.all(np.isfinite(grad)), f"not finite for scale {scale}"
    z_tt = tt.tensor(z, requires_grad=True)
    loss_tt = F.cross_entropy(z_tt, tt.tensor(y))
    loss_tt.backward()
    assert np.isclose(loss, loss_tt.item(), rtol=1e-10), (batch, classes, scale)
    assert np.shape(grad) == z.shape and np.allclose(grad, z_tt.grad.numpy(), atol=1e-12)
    if torch is not None:
        z_t = torch.tensor(z, requires_grad=True)
        torch.nn.functional.cross_entropy(z_t, torch.from_numpy(y)).backward()
        assert np.allclose(grad, z_t.grad.numpy(), atol=1e-12)
print("Exercise 2.4: cross_entropy_with_grad matches F.cross_entropy"
      + (" and PyTorch" if torch else ""))

# %% [markdown]
# The training step, in the order every chapter uses:
# `zero_grad` → forward (call the model, `model(x)`, so that module hooks run) → loss →
# `backward` → `step`.

# %%
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2))
opt = Adam(model.parameters(), lr=0.01)
print(model)

losses = []
for _ in range(300):
    opt.zero_grad()
    logits = model(X)
    loss = F.cross_entropy(logits, Y)
    loss.backward()
    opt.step()
    losses.append(loss.item())


@tt.no_grad()
def accuracy(model, X, Y):
    model.eval()
    pred = model(X).argmax(dim=1)
    model.train()
    return float((pred.numpy() == Y.numpy()).mean())


acc = accuracy(model, X, Y)
print(f"loss: {losses[0]:.4f} -> {losses[-1]:.4f}   training accuracy: {acc:.3f}")
assert losses[-1] < 0.2 * losses[0]
assert acc >= 0.95

# %%
gx, gy = np.meshgrid(np.linspace(-2.5, 2.5, 200), np.linspace(-2.5, 2.5, 200))
grid = tt.tensor(np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32))
with tt.no_grad():
    prob1 = np.exp(model(grid).log_softmax(dim=1).numpy()[:, 1]).reshape(gx.shape)

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
ax0.plot(losses)
ax0.set_yscale("log")
ax0.set_xlabel("step")
ax0.set_ylabel("cross-entropy loss")
ax0.set_title("training loss")
ax0.grid(True, alpha=0.3)
ax1.contourf(gx, gy, prob1, levels=20, cmap="coolwarm", alpha=0.6)
ax1.contour(gx, gy, prob1, levels=[0.5], colors="k", linewidths=1.5)
Xs = X.numpy()
ax1.scatter(Xs[:, 0], Xs[:, 1], c=y_np, cmap="coolwarm", s=12, edgecolors="k", linewidths=0.3)
ax1.set_title(f"decision boundary (training accuracy {acc:.1%})")
plt.show()

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
# * Our ~150-line engine, `tinytrain.autograd` and PyTorch agree on the gradients of the same
#   expression.
# * `register_post_accumulate_grad_hook` fires when a leaf's gradient is final — the last
#   layer first — which is what DDP builds on; `no_grad` turns recording off for evaluation.
# * With `nn.Sequential`, `F.cross_entropy` and `Adam`, the step `zero_grad → model(x) →
#   loss → backward → step` fits two moons.
#
# **Where this lives in the package**
#
# * [tinytrain/autograd/function.py](../tinytrain/autograd/function.py) — `Function`,
#   `Context` (`needs_input_grad`, `save_for_backward`), `Node`, `AccumulateGrad`
# * [tinytrain/autograd/engine.py](../tinytrain/autograd/engine.py) — `run_backward`:
#   dependency counting, buffers, freeing saved arrays
# * [tinytrain/autograd/ops.py](../tinytrain/autograd/ops.py) — every differentiable op, and
#   `unbroadcast`
# * [tinytrain/autograd/grad_mode.py](../tinytrain/autograd/grad_mode.py) — `no_grad`,
#   `enable_grad`
# * [tinytrain/tensor.py](../tinytrain/tensor.py) — `Tensor.backward`,
#   `register_post_accumulate_grad_hook`
# * [tinytrain/nn/](../tinytrain/nn/) — `Module`, `Linear`, `Tanh`, `Sequential`,
#   `functional.cross_entropy`; [tinytrain/optim/](../tinytrain/optim/) — `SGD`, `Adam`
#
# **Previous:** [Chapter 1 — tensors](01_tensors.ipynb). **Next:** [Chapter 3 — Conv2d on the
# CPU](03_conv2d_cpu.ipynb).
