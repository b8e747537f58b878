"""Differential fuzz of higher-order gradients (``create_graph=True``) against PyTorch.

A seeded generator builds a small random program (depth 2-5) over 1-3 float64 leaves with
random shapes (0-d, broadcasting), views (slices, transpose, reshape, expand), in-place ops
on non-leaf intermediates, diamonds (a tensor used several times), ``detach()`` in the
middle, hooks on intermediates and layers (linear, conv2d, batch/layer norm, embedding,
GRU/LSTM cells). The same program runs in tinytrain and in torch (the generator's choices
depend only on shapes, so both see the same program); then first gradients with
``create_graph``, the gradient of ``<g, v>``, ``.grad`` after two
``backward(create_graph=True)``, ``allow_unused`` / ``materialize_grads`` / ``grad_outputs``,
the freed-graph rule and ``autograd.functional`` with ``create_graph`` / ``strict`` are
compared (values, ``None``-ness, ``requires_grad`` and the error's type). Scalar chains are
compared up to the third derivative.

``python tests/test_higher_order9_fuzz.py N [START]`` runs N cases; pytest runs a seeded slice.
"""

from __future__ import annotations

import random
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF  # noqa: N812

import tinytrain as tt
import tinytrain.nn.functional as F  # noqa: N812

TOL = 1e-8


def lib(m):
    return (tt, F) if m is tt else (torch, TF)


def builtin_error(e: BaseException) -> type:
    """The first builtin exception class in ``type(e)``'s MRO (torch's own error classes
    derive from builtins: ``torch.AcceleratorError`` from RuntimeError, ...)."""
    for cls in type(e).__mro__:
        if cls.__module__ == "builtins":
            return cls
    return type(e)


def attempt(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 (compared by type below)
        return ("err", e)


class Mismatch(AssertionError):
    pass


def to_np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)  # (a ZeroTensor too)
    return t.detach().numpy()


def compare_values(what, ours, theirs, tol=TOL):
    """Tensors or (nested) tuples of them / None: same None-ness, shape, values and
    requires_grad."""
    if isinstance(theirs, (tuple, list)):
        if not isinstance(ours, (tuple, list)) or len(ours) != len(theirs):
            raise Mismatch(f"{what}: structure {type(ours)} vs {type(theirs)}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            compare_values(f"{what}[{i}]", a, b, tol)
        return
    if theirs is None or ours is None:
        if (theirs is None) != (ours is None):
            raise Mismatch(f"{what}: ours {'None' if ours is None else 'a tensor'}, torch "
                           f"{'None' if theirs is None else 'a tensor'}")
        return
    a, b = to_np(ours), to_np(theirs)
    if a.shape != b.shape:
        raise Mismatch(f"{what}: shape {a.shape} vs {b.shape}")
    lost = ~np.isfinite(b) & np.isfinite(a)  # torch overflowed where ours did not (mish's
    a, b = np.where(lost, 0, a), np.where(lost, 0, b)  # double backward at large inputs)
    scale = max(1.0, float(np.nanmax(np.abs(b)))) if b.size and not np.isnan(b).all() else 1.0
    if not np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True):
        raise Mismatch(f"{what}: values differ, max |d| "
                       f"{np.nanmax(np.abs(a - b)) if a.size else 0}\nours {a}\ntorch {b}")
    if ours.requires_grad != theirs.requires_grad and not (
            theirs.requires_grad and zero_graph(theirs)):
        raise Mismatch(f"{what}: requires_grad {ours.requires_grad} vs {theirs.requires_grad}"
                       f" ({ours.grad_fn} vs {theirs.grad_fn})")


def torch_leaves(t):
    seen, stack, leaves = set(), [t.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        stack.extend(n for n, _ in node.next_functions)
    return leaves


def zero_graph(t) -> bool:
    """torch's ``t`` requires grad but its derivative with respect to every leaf is zero: the
    graph of a fused double backward (layer/batch norm, a convolution's bias, the threshold
    ops' anchors), which tinytrain composes from ops that know the derivative is zero.
    Accepted where tinytrain's does not require grad (documented in the engine's DESIGN)."""
    leaves = torch_leaves(t)
    if not leaves:
        return True
    try:
        grads = torch.autograd.grad(t.sum(), leaves, allow_unused=True, retain_graph=True)
    except Exception:  # noqa: BLE001 (its graph was freed, a hook refused None: cannot tell)
        return False
    return all(g is None or not g.abs().sum().item() for g in grads)


def compare(what, ours, theirs, tol=TOL):
    """Two ``attempt`` results: same outcome (error types or values)."""
    if theirs[0] == "err" or ours[0] == "err":
        if ours[0] != theirs[0]:
            raise Mismatch(f"{what}: ours {ours[0]} {ours[1]!r}, torch {theirs[0]} "
                           f"{theirs[1]!r}")
        if builtin_error(ours[1]) is not builtin_error(theirs[1]):
            raise Mismatch(f"{what}: error types {type(ours[1]).__name__} ({ours[1]}) vs "
                           f"{type(theirs[1]).__name__} ({theirs[1]})")
        return False
    compare_values(what, ours[1], theirs[1], tol)
    return True


# ----------------------------------------------------------------------------- programs

UNARY = {
    "sin": lambda m, x: x.sin(),
    "tanh": lambda m, x: x.tanh(),
    "sigmoid": lambda m, x: x.sigmoid(),
    "square": lambda m, x: x * x,
    "cube": lambda m, x: x ** 3,
    "exp": lambda m, x: (x * 0.5).exp(),
    "log1p2": lambda m, x: (x * x + 1).log(),
    "sqrt": lambda m, x: (x * x + 1).sqrt(),
    "recip": lambda m, x: 1 / (x * x + 1),
    "relu": lambda m, x: x.relu(),
    "abs": lambda m, x: x.abs(),
    "softplus": lambda m, x: lib(m)[1].softplus(x),
    "elu": lambda m, x: lib(m)[1].elu(x),
    "leaky": lambda m, x: lib(m)[1].leaky_relu(x, 0.2),
    "gelu": lambda m, x: lib(m)[1].gelu(x),
    "silu": lambda m, x: lib(m)[1].silu(x),
    "clamp": lambda m, x: x.clamp(-0.7, 0.9),
    "hardtanh": lambda m, x: lib(m)[1].hardtanh(x, -0.5, 0.8),
    "cos": lambda m, x: x.cos(),
    "neg": lambda m, x: -x,
    "pow_t": lambda m, x: (x * x + 1) ** (x.sin() * 0.5 + 1),
    "erf": lambda m, x: x.erf(),
    "mish": lambda m, x: lib(m)[1].mish(x),
    "logsig": lambda m, x: lib(m)[1].logsigmoid(x),
    "div_scalar": lambda m, x: 2.0 / (x.abs() + 1),
    "rsub": lambda m, x: 1.5 - x,
}

BINARY = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / (b * b + 1),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "where": lambda m, a, b: m.where(a > b, a * b, a - b),
    "pow": lambda m, a, b: (a * a + 0.5) ** b,
    "atan2": lambda m, a, b: m.atan2(a, b * b + 0.1),
    "hypot_like": lambda m, a, b: (a * a + b * b + 1e-3).sqrt(),
}

INPLACE = {
    "add_": lambda m, y, o: y.add_(o),
    "mul_": lambda m, y, o: y.mul_(o),
    "sub_": lambda m, y, o: y.sub_(o * 0.5),
    "mul_s": lambda m, y, o: y.mul_(1.5),
    "clamp_": lambda m, y, o: y.clamp_(-0.6, 0.8),
    "relu_": lambda m, y, o: y.relu_(),
    "sigmoid_": lambda m, y, o: y.sigmoid_(),
    "tanh_": lambda m, y, o: y.tanh_(),
    "div_": lambda m, y, o: y.div_(o * o + 1),
    "pow_": lambda m, y, o: y.pow_(2),
    "F.relu_ip": lambda m, y, o: lib(m)[1].relu(y, inplace=True),
    "F.hardtanh_": lambda m, y, o: lib(m)[1].hardtanh(y, -0.3, 0.4, inplace=True),
    "F.leaky_ip": lambda m, y, o: lib(m)[1].leaky_relu(y, 0.1, inplace=True),
    "F.elu_ip": lambda m, y, o: lib(m)[1].elu(y, inplace=True),
    "exp_": lambda m, y, o: y.mul_(0.3).exp_(),
}


def bshape_ok(a, b):
    try:
        np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        return True
    except ValueError:
        return False


def rand_shape(r: random.Random):
    kind = r.random()
    if kind < 0.15:
        return ()
    if kind < 0.4:
        return (r.randint(1, 4),)
    if kind < 0.85:
        return (r.randint(1, 4), r.randint(1, 4))
    return (r.randint(1, 3), r.randint(1, 3), r.randint(1, 3))


class Program:
    """One random program; ``run(m)`` builds it in tinytrain (``m is tt``) or torch.
    ``hook_mode``: 0 none, 1 a hook that scales by 2, 2 a hook that returns a function of
    the gradient with a graph (g * g.detach() + g) on one intermediate."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        r = random.Random(seed)
        self.n_leaves = r.randint(1, 3)
        base = rand_shape(r)
        self.shapes = []
        for _ in range(self.n_leaves):  # broadcast-compatible shapes with the first one
            if r.random() < 0.5 or not base:
                self.shapes.append(base if r.random() < 0.7 else rand_shape(r))
            else:
                s = list(base)
                for i in range(len(s)):
                    if r.random() < 0.3:
                        s[i] = 1
                self.shapes.append(tuple(s[r.randint(0, len(s)):]))
        rng = np.random.default_rng(seed)
        self.values = [rng.standard_normal(s) for s in self.shapes]
        self.depth = r.randint(2, 5)
        self.hook_mode = r.choice([0, 0, 1, 2])
        self.log: list[str] = []

    def leaves(self, m):
        return [m.tensor(v, dtype=m.float64, requires_grad=True) for v in self.values]

    def run(self, m, leaves=None, record=False):
        """(leaves and parameters, pool of intermediates, the last value)."""
        T, Fm = lib(m)  # noqa: N806
        r = random.Random(self.seed * 7919 + 1)
        rng = np.random.default_rng(self.seed + 10_000)
        if leaves is None:
            leaves = self.leaves(m)
        params = list(leaves)
        pool = list(leaves)
        log = []

        def param(shape):
            p = T.tensor(rng.standard_normal(shape) * 0.5, dtype=T.float64, requires_grad=True)
            params.append(p)
            return p

        def nonleaf():
            c = [t for t in pool if t.grad_fn is not None and t.requires_grad]
            return r.choice(c) if c else None

        hooked = False
        for _step in range(self.depth):
            x = r.choice(pool)
            k = r.random()
            if k < 0.3:
                name = r.choice(sorted(UNARY))
                y = UNARY[name](m, x)
            elif k < 0.5:
                cands = [t for t in pool if bshape_ok(t, x)]
                o = r.choice(cands)
                name = r.choice(sorted(BINARY))
                y = BINARY[name](m, x, o)
            elif k < 0.62:
                name, y = self.view(m, r, x)
            elif k < 0.74:
                t = nonleaf()
                if t is None:
                    t = x * 1.0
                    pool.append(t)
                if r.random() < 0.3 and t.dim() >= 1 and t.shape[0] >= 1:
                    t = t[0] if r.random() < 0.5 else t[..., :1]  # in place on a view
                cands = [o for o in pool if bshape_ok(o, t)
                         and np.broadcast_shapes(tuple(o.shape), tuple(t.shape))
                         == tuple(t.shape)]
                o = r.choice(cands) if cands else 1.25
                name = r.choice(sorted(INPLACE))
                y = INPLACE[name](m, t, o)
            elif k < 0.84:
                name, y = self.reduce(m, r, x)
            elif k < 0.88:
                name = "detach"
                y = x.detach() * r.choice(pool).sum() + x
            else:
                name, y = self.layer(m, r, rng, x, param)
            log.append(f"{name}{tuple(x.shape)}->{tuple(y.shape)}")
            if (self.hook_mode and not hooked and y.requires_grad and y.grad_fn is not None
                    and r.random() < 0.5):
                hooked = True
                if self.hook_mode == 1:
                    y.register_hook(lambda g: g * 2)
                else:
                    y.register_hook(lambda g: g * g.detach() + g)
                log.append("hook")
            pool.append(y)
        if record:
            self.log = log
        return params, pool, pool[-1]

    @staticmethod
    def view(m, r, x):
        nd = x.dim()
        opts = ["reshape", "unsqueeze_expand", "view_as"]
        if nd >= 2:
            opts += ["transpose", "permute", "T"]
        if nd >= 1:
            opts += ["slice", "select", "flip", "narrow", "expand_lead"]
            if x.shape[-1] >= 2:
                opts += ["step"]
        name = r.choice(opts)
        if name == "reshape":
            return name, x.reshape(-1) if r.random() < 0.5 else x.reshape(1, *x.shape)
        if name == "unsqueeze_expand":
            return name, x.unsqueeze(0).expand(2, *x.shape)
        if name == "view_as":
            return name, x.view_as(x) if x.is_contiguous() else x.reshape(x.shape)
        if name == "transpose":
            return name, x.transpose(0, 1)
        if name == "permute":
            return name, x.permute(*reversed(range(nd)))
        if name == "T":
            return name, x.mT
        if name == "slice":
            return name, x[1:] if x.shape[0] > 1 else x[:1]
        if name == "select":
            return name, x[x.shape[0] - 1] if x.shape[0] else x.sum()
        if name == "flip":
            return name, x.flip(0)
        if name == "narrow":
            return name, x.narrow(nd - 1, 0, max(1, x.shape[-1] - 1))
        if name == "expand_lead":
            return name, x.expand(3, *x.shape)
        return name, x[..., ::2]

    @staticmethod
    def reduce(m, r, x):
        T, Fm = lib(m)  # noqa: N806
        nd = x.dim()
        opts = ["sum", "mean", "norm", "prod", "amax_all"]
        if nd >= 1:
            opts += ["sum_dim", "softmax", "log_softmax", "logsumexp", "cumsum", "max_dim",
                     "var", "std"]
        name = r.choice(opts)
        d = r.randrange(nd) if nd else 0
        if name == "sum":
            return name, x.sum()
        if name == "mean":
            return name, x.mean()
        if name == "norm":
            return name, (x * x + 0.1).sum().sqrt()
        if name == "prod":
            return name, (x.tanh() + 2).prod()
        if name == "amax_all":
            return name, x.amax()
        if name == "sum_dim":
            return name, x.sum(d, keepdim=r.random() < 0.5)
        if name == "softmax":
            return name, Fm.softmax(x, dim=d)
        if name == "log_softmax":
            return name, Fm.log_softmax(x, dim=d)
        if name == "logsumexp":
            return name, x.logsumexp(d)
        if name == "cumsum":
            return name, x.cumsum(d)
        if name == "max_dim":
            return name, x.max(d)[0]
        if name == "var":
            return name, x.var(d, correction=0)
        return name, (x * x + 1).std(d, correction=0)

    @staticmethod
    def layer(m, r, rng, x, param):
        T, Fm = lib(m)  # noqa: N806
        nd = x.dim()
        x2 = x.reshape(-1, x.shape[-1]) if nd >= 2 else x.reshape(1, -1)
        n, c = x2.shape
        opts = ["linear", "layer_norm", "embedding", "gru", "lstm", "matmul"]
        if n >= 2:
            opts.append("batch_norm")
        if n * c >= 4:
            opts.append("conv2d")
        name = r.choice(opts)
        if name == "linear":
            k = r.randint(1, 3)
            w, b = param((k, c)), (param((k,)) if r.random() < 0.7 else None)
            return name, Fm.linear(x2, w, b)
        if name == "matmul":
            w = param((c, r.randint(1, 3)))
            return name, x2 @ w if r.random() < 0.5 else T.matmul(x2, w).t()
        if name == "layer_norm":
            return name, Fm.layer_norm(x2, (c,), param((c,)), param((c,)), eps=1e-3)
        if name == "batch_norm":
            return name, Fm.batch_norm(x2, None, None, param((c,)), param((c,)), training=True,
                                       eps=1e-3)
        if name == "embedding":
            idx = T.tensor(rng.integers(0, n, size=(r.randint(1, 4),)))
            return name, Fm.embedding(idx, x2)
        if name == "conv2d":
            h = 2
            while (n * c) % h or h > n * c:
                h -= 1
            img = x2.reshape(1, 1, h, (n * c) // h)
            kh, kw = min(2, h), min(2, (n * c) // h)
            return name, Fm.conv2d(img, param((2, 1, kh, kw)), param((2,)),
                                   padding=r.choice([0, 1]))
        hidden = r.randint(1, 3)
        cell = (T.nn.GRUCell if name == "gru" else T.nn.LSTMCell)(c, hidden,
                                                                 dtype=T.float64)
        chunks = 3 if name == "gru" else 4
        ws = [param((chunks * hidden, c)), param((chunks * hidden, hidden)),
              param((chunks * hidden,)), param((chunks * hidden,))]
        h0 = param((n, hidden))
        cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh = (None,) * 4
        del cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh
        cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh = ws
        if name == "gru":
            return name, cell(x2, h0)
        c0 = param((n, hidden))
        hn, cn = cell(x2, (h0, c0))
        return name, hn * cn + hn


# ------------------------------------------------------------------------------ checks

def both(prog, fn):
    """``fn(m, params, pool, out)`` on a fresh build in each library."""
    res = []
    for m in (tt, torch):
        built = attempt(lambda m=m: prog.run(m, record=m is tt))
        if built[0] == "err":
            res.append(built)
            continue
        res.append(attempt(lambda m=m, b=built[1]: fn(m, *b)))
    return res


def weights(prog, shape, salt):
    return np.random.default_rng(prog.seed * 31 + salt).standard_normal(shape)


def scalar_out(m, prog, pool, last):
    w = m.tensor(weights(prog, tuple(last.shape), 1), dtype=m.float64)
    out = (last * w).sum()
    if len(pool) > 2:  # a diamond: an earlier value feeds the output twice
        out = out + (pool[len(pool) // 2] ** 2).sum() * 0.1
    return out


def check_program(seed: int) -> list[str]:
    prog = Program(seed)
    issues = []

    def run_check(name, fn, tol=TOL):
        ours, theirs = both(prog, fn)
        try:
            compare(f"seed {seed} {name} {prog.log}", ours, theirs, tol)
        except Mismatch as e:
            issues.append(str(e))

    def first_and_second(m, params, pool, last):
        out = scalar_out(m, prog, pool, last)
        g = m.autograd.grad(out, params, create_graph=True, allow_unused=True)
        s = None
        for i, gi in enumerate(g):
            if gi is not None and gi.requires_grad:
                term = (gi * m.tensor(weights(prog, tuple(gi.shape), 10 + i),
                                      dtype=m.float64)).sum()
                s = term if s is None else s + term
        if s is None:
            return g, None
        mat = prog.seed % 2 == 0
        h = m.autograd.grad(s, params, allow_unused=True, materialize_grads=mat,
                            retain_graph=True)  # (kept for zero_graph)
        return g, h

    def backward_twice(m, params, pool, last):
        out = scalar_out(m, prog, pool, last)
        out.backward(create_graph=True)
        out.backward(create_graph=True)
        grads = [p.grad for p in params]
        s = None
        for gi in grads:
            if gi is not None and gi.requires_grad:
                term = (gi * gi).sum() * 0.5
                s = term if s is None else s + term
        if s is not None:
            for p in params:
                p.grad = None
            s.backward(retain_graph=True)
        return grads, [p.grad for p in params]

    def grad_outputs(m, params, pool, last):
        v = m.tensor(weights(prog, tuple(last.shape), 3), dtype=m.float64, requires_grad=True)
        g = m.autograd.grad(last, params, grad_outputs=v, create_graph=True,
                            allow_unused=True)
        s = sum((gi * gi).sum() for gi in g if gi is not None)
        if not isinstance(s, (torch.Tensor, tt.Tensor)) or not s.requires_grad:
            return g, None
        return g, m.autograd.grad(s, [v, *params], allow_unused=True, retain_graph=True)

    def unused_rules(m, params, pool, last):
        out = scalar_out(m, prog, pool, last)
        extra = m.tensor(1.0, dtype=m.float64, requires_grad=True)
        return m.autograd.grad(out, [*params, extra], create_graph=True,
                               allow_unused=prog.seed % 3 == 0)

    def freed(m, params, pool, last):
        out = scalar_out(m, prog, pool, last)
        g1 = m.autograd.grad(out, params, allow_unused=True)
        g2 = m.autograd.grad(out, params, allow_unused=True)
        return g1, g2

    def intermediate_inputs(m, params, pool, last):
        out = scalar_out(m, prog, pool, last)
        mids = [t for t in pool if t.grad_fn is not None][:2]
        if not mids:
            return None
        g = m.autograd.grad(out, mids, create_graph=True, allow_unused=True)
        s = sum((gi * gi).sum() for gi in g if gi is not None)
        if not isinstance(s, (torch.Tensor, tt.Tensor)) or not s.requires_grad:
            return g, None
        return g, m.autograd.grad(s, params, allow_unused=True, retain_graph=True)

    run_check("grad+second", first_and_second)
    run_check("backward twice", backward_twice)
    run_check("grad_outputs", grad_outputs)
    run_check("allow_unused", unused_rules)
    run_check("freed graph", freed)
    run_check("intermediate inputs", intermediate_inputs)
    issues += check_functional(prog)
    return issues


def functional_results(m, prog, strict: bool) -> dict:
    """``autograd.functional``'s five products of ``prog`` (as a function of its leaves) in
    library ``m``, with ``create_graph=True``: each an ``attempt`` result."""
    leaves = tuple(m.tensor(v, dtype=m.float64) for v in prog.values)
    vs = tuple(m.tensor(weights(prog, v.shape, 20 + i), dtype=m.float64)
               for i, v in enumerate(prog.values))

    def f(*xs):
        params, pool, last = prog.run(m, leaves=list(xs))
        return scalar_out(m, prog, pool, last)

    def fv(*xs):
        return prog.run(m, leaves=list(xs))[2]

    AF = m.autograd.functional  # noqa: N806
    out = {
        "jac": attempt(lambda: AF.jacobian(fv, leaves, create_graph=True, strict=strict)),
        "hes": attempt(lambda: AF.hessian(f, leaves, create_graph=True, strict=strict)),
        "hvp": attempt(lambda: AF.hvp(f, leaves, vs, create_graph=True, strict=strict)),
        "jvp": attempt(lambda: AF.jvp(fv, leaves, vs, create_graph=True, strict=strict)),
    }
    shape = tuple(fv(*[m.tensor(v, dtype=m.float64) for v in prog.values]).shape)
    u = m.tensor(weights(prog, shape, 40), dtype=m.float64)
    out["vjp"] = attempt(lambda: AF.vjp(fv, leaves, u, create_graph=True, strict=strict))
    return out


def check_functional(prog) -> list[str]:
    issues = []
    strict = random.Random(prog.seed + 5).random() < 0.4
    ours, theirs = (attempt(lambda m=m: functional_results(m, prog, strict))
                    for m in (tt, torch))
    if ours[0] == "err" or theirs[0] == "err":
        try:
            compare(f"seed {prog.seed} functional", ours, theirs)
        except Mismatch as e:
            issues.append(str(e))
        return issues
    for key in theirs[1]:
        try:
            compare(f"seed {prog.seed} functional {key} strict={strict} {prog.log}",
                    ours[1][key], theirs[1][key], 1e-7)
        except Mismatch as e:
            issues.append(str(e))
    return issues


def check_chain(seed: int) -> list[str]:
    """A scalar chain of elementwise ops on one leaf: derivatives of order 1, 2, 3."""
    r = random.Random(seed)
    names = [r.choice(sorted(UNARY)) for _ in range(r.randint(2, 5))]
    x0 = np.random.default_rng(seed).standard_normal(r.choice([(), (3,), (2, 2)]))
    res = []
    for m in (tt, torch):
        def go(m=m):
            x = m.tensor(x0, dtype=m.float64, requires_grad=True)
            y = x
            for n in names:
                y = UNARY[n](m, y)
            y, ds = y.sum(), []
            for _ in range(3):
                if not y.requires_grad:
                    break
                (y,) = m.autograd.grad(y, x, create_graph=True)
                ds.append(y)
                y = y.sum()
            return ds
        res.append(attempt(go))
    try:
        compare(f"seed {seed} chain {names} x={x0}", res[0], res[1], 1e-7)
    except Mismatch as e:
        return [str(e)]
    return []


#: A known difference, not fixed: PyTorch's backward of some ops saves an input it does not
#: need (hardtanh, threshold, the layer norms' input, ...), so an in-place write to that
#: input afterwards raises there; tinytrain saves what the formula reads (a mask, the
#: statistics) and gives the right gradient. Counted, reported, not failed.
KNOWN = "ours ok", "modified by an inplace operation"


def known(issue: str) -> bool:
    return all(k in issue for k in KNOWN)


def fuzz(n: int, start: int = 0) -> tuple[list[str], list[str]]:
    """(issues, known differences) over seeds ``start .. start + n``."""
    issues = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(start, start + n):
            issues += check_program(seed)
            issues += check_chain(seed)
    return [i for i in issues if not known(i)], [i for i in issues if known(i)]


@pytest.mark.parametrize("start", [0, 1000])
def test_fuzz_slice_matches_torch(start):
    issues, _ = fuzz(15, start)
    assert not issues, "\n\n".join(issues[:5])


if __name__ == "__main__":
    found, skipped = fuzz(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    for item in found:
        print(item[:1500], "\n")
    print(len(found), "issues,", len(skipped), "known (in-place write to an input torch saves)")


# ------------------------------------------------------- regressions the fuzzer found

def test_sign_of_a_0d_tensor_and_abs_double_backward():
    """NumPy's sign of a 0-d array is a scalar: sign(nan)=0 was written into it in place."""
    for value in (1.57, -0.3, float("nan")):
        ours = tt.tensor(value, dtype=tt.float64).sign()
        assert ours.shape == () and np.array_equal(
            ours.numpy(), torch.tensor(value, dtype=torch.float64).sign().numpy(), equal_nan=True)
    res = []
    for m in (tt, torch):
        x = m.tensor(1.57, dtype=m.float64, requires_grad=True)
        (g,) = m.autograd.grad(x.abs() ** 3, x, create_graph=True)
        res.append((g, *m.autograd.grad(g, x)))
    compare_values("abs", res[0], res[1])


def test_product_with_own_detach_double_backward():
    """``x * x.detach()``: detach() gives a new array object, so the double backward knows
    which factor is constant (it raised NotImplementedError)."""
    res = []
    for m in (tt, torch):
        x = m.tensor([1.0, -2.0, 0.5], dtype=m.float64, requires_grad=True)
        (g,) = m.autograd.grad((x * x.detach() * x).sum(), x, create_graph=True)
        res.append((g, *m.autograd.grad(g.sum(), x)))
    compare_values("x * x.detach() * x", res[0], res[1])
    t = tt.tensor([1.0, 2.0])
    d = t.detach()
    assert d.data_ptr() == t.data_ptr() and d._version_counter is t._version_counter
    d.add_(1)
    assert t.tolist() == [2.0, 3.0] and t._version == 1


def test_hook_and_capture_order_as_torch():
    """``grad(z, [y, x])`` with a hook on ``y``: y's node runs on (x is below), so y's
    gradient is the one before the hook; ``grad(z, y)`` alone gives the hooked one."""
    for create_graph in (False, True):
        res = []
        for m in (tt, torch):
            x = m.tensor([0.5, -1.0], dtype=m.float64, requires_grad=True)
            y = x * x
            y.register_hook(lambda g: g * 2)
            z = (y * 3).sum()
            res.append((*m.autograd.grad(z, [y], retain_graph=True, create_graph=create_graph),
                        *m.autograd.grad(z, [y, x], create_graph=create_graph)))
        compare_values("hook capture", res[0], res[1])


@pytest.mark.parametrize("op", ["sigmoid_", "exp_", "tanh_"])
def test_in_place_op_that_saves_its_output_is_version_checked(op):
    """``y.sigmoid_()`` saves its output, which is ``y``: a later write to ``y`` makes the
    backward raise (it gave a gradient where PyTorch refuses)."""
    for m in (tt, torch):
        x = m.tensor([0.5, -1.0], dtype=m.float64, requires_grad=True)
        y = x * 1.0
        getattr(y, op)()
        y.sub_(0.5)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
        y = x * 1.0
        getattr(y, op)()
        (y * 2).sum().backward()  # no write after it: fine
    res = []
    for m in (tt, torch):
        x = m.tensor([0.5, -1.0], dtype=m.float64, requires_grad=True)
        y = (x * 1.0)
        getattr(y[0:1], op)()  # on a slice of a non-leaf
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        res.append((g, *m.autograd.grad(g.sum(), x)))
    compare_values(op, res[0], res[1])


def hooked(m, x):
    y = x * x.sum()
    y.register_hook(lambda g: g * g.detach() + g)  # the gradient is no true gradient
    return (y.sin() * x).sum()


def test_functional_hvp_is_the_double_backward_trick_and_strict_as_torch():
    """hvp differentiates through a dummy (PyTorch's trick), so it is ``H v`` also where the
    "Hessian" is not symmetric; strict mode raises where PyTorch's does."""
    xv, vv = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -2.0])
    res = []
    for m in (tt, torch):
        x, v = m.tensor(xv, dtype=m.float64), m.tensor(vv, dtype=m.float64)
        AF = m.autograd.functional  # noqa: N806
        f = lambda x, m=m: hooked(m, x)  # noqa: E731
        res.append((AF.hvp(f, x, v, create_graph=True)[1], AF.vhp(f, x, v)[1]))
    compare_values("hvp", res[0], res[1])
    for m in (tt, torch):
        AF = m.autograd.functional  # noqa: N806
        x, v = m.tensor(xv, dtype=m.float64), m.tensor(vv, dtype=m.float64)
        linear = lambda x, y: (x * 2).sum() + (y * y).sum()  # noqa: E731
        for fn in (AF.hvp, AF.vhp):  # the Hessian does not depend on the inputs
            with pytest.raises(RuntimeError, match="independent of input 0. This is not "
                                                   "allowed in strict mode when create_graph"):
                fn(lambda x: (x * x).sum(), x, v, create_graph=True, strict=True)
            with pytest.raises(RuntimeError, match="jacobian of the user-provided function "
                                                   "with respect to input 0"):
                fn(linear, (x, x), (v, v), strict=True)
        with pytest.raises(RuntimeError, match="jacobian of the user-provided function with "
                                               "respect to input 0"):
            AF.hessian(linear, (x, x), strict=True)
        with pytest.raises(RuntimeError, match="does not require gradients"):
            AF.vjp(lambda x: x.detach() * 2, x, v, strict=True)
        with pytest.raises(RuntimeError, match="The output of the user-provided function "
                                               "is independent of input 0"):
            AF.jvp(lambda x, y: y * 2, (x, x), (v, v), strict=True)
        with pytest.raises(RuntimeError, match="The jacobian of the user-provided function is "
                                               "independent of input 0. This is not allowed in "
                                               "strict mode when create_graph=True"):
            AF.jacobian(lambda x: x * 2, x, create_graph=True, strict=True)
