"""``tt.func`` against ``torch.func`` (torch 2.13), float64: values, shapes, structures, the
errors' types and words, and compositions (``grad(grad)``, ``vmap(grad)``, ``grad(vmap)``,
``jacrev(jacrev)``, ``vmap(jacrev)``, ``jacfwd(jacrev)``, transforms with autograd around
them). Also what vmap-by-loop cannot see (documented in tinytrain.func's DESIGN section, and
pinned here as differences), ``autograd.grad(is_grads_batched=True)``, ``autograd.functional``'s
``vectorize``/``strategy``, and einsum's matmul path (the NTK tutorial found it slow)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import torch
import torch.func as torch_func
from torch.utils._pytree import tree_flatten as torch_flatten

import tinytrain as tt
from tinytrain.func._pytree import tree_flatten

pytestmark = [pytest.mark.usefixtures("torch_single_thread"),
              pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")]

RNG = np.random.default_rng(10)


def arrays(*shapes):
    return [RNG.standard_normal(s) for s in shapes]


def lib_of(name):
    return (tt, tt.func) if name == "tt" else (torch, torch_func)


def run_both(build, *inputs, device="cpu"):
    """``build(lib, func)`` -> a callable, applied to ``inputs`` (NumPy arrays, or pytrees of
    them) as each library's tensors: both results."""
    def convert(lib, x):
        if isinstance(x, np.ndarray):
            return tt.tensor(x, device=device) if lib is tt else torch.tensor(x)
        if isinstance(x, dict):
            return {k: convert(lib, v) for k, v in x.items()}
        if isinstance(x, tuple | list):
            return type(x)(convert(lib, v) for v in x)
        return x
    out = {}
    for name in ("tt", "torch"):
        lib, func = lib_of(name)
        out[name] = build(lib, func)(*[convert(lib, x) for x in inputs])
    return out["tt"], out["torch"]


def assert_same(ours, theirs, rtol=1e-10, atol=1e-12):
    """The same pytree structure (tuples, dicts, in order), shapes, dtypes and values."""
    a, spec_a = tree_flatten(ours)
    b, spec_b = torch_flatten(theirs)
    assert len(a) == len(b), (ours, theirs)
    assert str(spec_a).replace(" ", "") == str(spec_b).replace(" ", ""), (spec_a, spec_b)
    for x, y in zip(a, b):
        if isinstance(y, torch.Tensor):
            assert isinstance(x, tt.Tensor), type(x)
            assert tuple(x.shape) == tuple(y.shape), (x.shape, y.shape)
            assert str(x.dtype) == str(y.dtype).removeprefix("torch."), (x.dtype, y.dtype)
            np.testing.assert_allclose(x.detach().numpy(), y.detach().cpu().numpy(), rtol=rtol,
                                       atol=atol)
        else:
            assert x == y


def same_error(build, *inputs, match=None):
    """Both libraries raise the same exception type (and ``match`` in both messages)."""
    errors = []
    for name in ("tt", "torch"):
        lib, func = lib_of(name)
        args = [tt.tensor(x) if lib is tt and isinstance(x, np.ndarray) else
                torch.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]
        with pytest.raises(Exception) as info:
            build(lib, func)(*args)
        errors.append(info.value)
    ours, theirs = errors
    assert type(theirs) in type(ours).__mro__, (type(ours), type(theirs), ours, theirs)
    if match is not None:
        assert match in str(ours) and match in str(theirs), (str(ours), str(theirs))
    return ours


# ------------------------------------------------------------------ grad, grad_and_value


def f_scalar(x):
    return (x.sin() * x ** 2).sum() + x.prod()


@pytest.mark.parametrize("fn", [
    lambda L: f_scalar,
    lambda L: lambda x: (x.exp() / (1 + x ** 2)).mean(),
    lambda L: lambda x: L.nn.functional.log_softmax(x, -1)[..., 0].sum(),
    lambda L: lambda x: (x @ x.T).tanh().sum(),
])
def test_grad_values_match_torch(fn):
    (x,) = arrays((3, 4))
    assert_same(*run_both(lambda L, F: F.grad(fn(L)), x))
    assert_same(*run_both(lambda L, F: F.grad_and_value(fn(L)), x))


def test_grad_argnums_pytrees_aux_and_unused_inputs():
    x, y, z = arrays((3,), (3,), (2, 3))

    def f(a, d, c):  # a dict argument, and c unused
        return (a * d["w"] + d["b"].cos()).sum() + 0 * a.sum()
    for argnums in (0, 1, (0, 1), (1, 0, 2), -2, (-1, 0)):
        assert_same(*run_both(lambda L, F, argnums=argnums: F.grad(f, argnums=argnums),
                              x, {"w": y, "b": x}, z))

    def g(a, b):
        return (a * b).sum(), {"double": a * 2, "pair": (b, b.sum())}
    assert_same(*run_both(lambda L, F: F.grad(g, argnums=(0, 1), has_aux=True), x, y))
    assert_same(*run_both(lambda L, F: F.grad_and_value(g, has_aux=True), x, y))
    # an output that does not depend on the input at all: zeros
    assert_same(*run_both(lambda L, F: F.grad(lambda a: L.tensor(1.0, dtype=L.float64)), x))
    # keyword arguments pass through, undifferentiated
    assert_same(*run_both(lambda L, F: lambda a: F.grad(lambda a, k: (a * k).sum())(a, k=a), x))


@pytest.mark.parametrize("build,match", [
    (lambda L, F: F.grad(lambda x: x), "Expected f(*args) to return a scalar Tensor, got "
                                       "tensor with 1 dims"),
    (lambda L, F: F.grad(lambda x: 3.0), "Expected f(*args) to return a Tensor, got"),
    (lambda L, F: F.grad(lambda x: (x.sum(), x.sum())), "to return a Tensor, got"),
    (lambda L, F: F.grad(lambda x: x.sum(), has_aux=True), "should be a tuple: (output, aux)"),
    (lambda L, F: F.grad(lambda x: (x.sum(), 3), has_aux=True),
     "Expected tensors, got unsupported type"),
    (lambda L, F: F.grad(lambda x: x.sum(), argnums=5), "Got argnum=5, but only 1 positional"),
    (lambda L, F: F.grad(lambda x: x.sum(), argnums=(0, 0)), "argnums elements must be unique"),
    (lambda L, F: F.grad(lambda x: x.sum(), argnums=()), "argnums must be non-empty"),
    (lambda L, F: F.grad(lambda x: x.sum(), argnums=[0]), "argnums must be int or Tuple"),
    (lambda L, F: F.grad(lambda x: x.sum(), argnums=1.0), "argnums must be int or Tuple"),
])
def test_grad_errors_match_torch(build, match):
    (x,) = arrays((3,))
    same_error(build, x, match=match)


def test_grad_of_non_tensors_and_integer_tensors():
    same_error(lambda L, F: lambda x: F.grad(lambda x, n: (x * n).sum(), argnums=1)(x, 3),
               np.ones(3), match="Thing passed to transform API must be Tensor")
    same_error(lambda L, F: lambda x: F.grad(lambda x: x.sum())(x.long()), np.ones(3),
               match="floating point")


def test_grad_composes_with_itself_and_with_autograd():
    (x,) = arrays((4,))
    # second and third derivatives, elementwise
    for depth in (2, 3):
        def build(L, F, depth=depth):
            f = lambda v: (v.sin() * v.exp()).sum()  # noqa: E731
            for _ in range(depth):
                f = (lambda g: lambda v: F.grad(g)(v).sum())(f)
            return F.grad(f)
        assert_same(*run_both(build, x))
    # the gradient of a captured parameter through a grad transform (autograd outside)
    w, xs = arrays((4,), (4,))
    results = {}
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        wt = L.tensor(w, requires_grad=True)
        g = F.grad(lambda v, wt=wt: (v.tanh() * wt).sum() ** 2)(L.tensor(xs))
        assert g.requires_grad and g.grad_fn is not None
        g.pow(2).sum().backward()
        results[name] = (g, wt.grad)
    assert_same(results["tt"], results["torch"])


def test_grad_results_require_grad_as_torch():
    (x,) = arrays((3,))
    checks = {}
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        plain = L.tensor(x)
        leaf = L.tensor(x, requires_grad=True)
        w = L.tensor(x, requires_grad=True)
        checks[name] = [
            F.grad(lambda v: (v ** 2).sum())(plain).requires_grad,
            F.grad(lambda v: (v ** 3).sum())(leaf).requires_grad,
            F.grad(lambda v, w=w: (v * w).sum())(plain).requires_grad,
            F.grad(lambda v, w=w: (v + w).sum())(plain).requires_grad,
            F.grad_and_value(lambda v: (v ** 2).sum())(plain)[1].requires_grad,
            F.vjp(lambda v: v.sin(), plain)[1](L.ones_like(plain))[0].requires_grad,
            F.vjp(lambda v, w=w: v.sin() * w, plain)[1](L.ones_like(plain))[0].requires_grad,
            F.jvp(lambda v, w=w: v.sin() * w, (plain,), (L.ones_like(plain),))[1].requires_grad,
            F.jacrev(lambda v: v.sin())(plain).requires_grad,
        ]
    assert checks["tt"] == checks["torch"], checks


def test_grad_ignores_an_outer_no_grad_and_obeys_an_inner_one():
    (x,) = arrays((3,))

    def outer(L, F):
        def call(v):
            with L.no_grad():
                return F.grad(lambda u: (u ** 2).sum())(v)
        return call

    def inner(L, F):
        def f(v):
            with L.no_grad():
                c = v ** 2
            return (v - c).sum()
        return F.grad(f)
    assert_same(*run_both(outer, x))
    assert_same(*run_both(inner, x))


def test_in_place_writes_inside_grad():
    (x,) = arrays((3,))

    def captured(L, F):
        c = L.zeros(3, dtype=L.float64)

        def f(v):
            c.add_(1)
            return v.sum()
        return F.grad(f)
    err = same_error(captured, x, match="would mutate a captured Tensor")
    assert "add_" in str(err)
    same_error(lambda L, F: F.grad(lambda v: v.add_(1).sum()), x,
               match="a leaf Variable that requires grad is being used in an in-place operation")

    def temporary(L, F):  # a tensor made inside may be written
        def f(v):
            y = v * 1
            y.mul_(3)
            y[0] = v[1] * 2
            return (y * y).sum()
        return F.grad(f)
    assert_same(*run_both(temporary, x))

    def argument(L, F):  # an argument that is not differentiated may be written (torch wraps it)
        def f(v, buf):
            buf.add_(v.detach())
            return (v * buf).sum()
        return lambda v, b: (F.grad(f)(v, b), b)
    assert_same(*run_both(argument, x, np.ones(3)))


# ------------------------------------------------------------------ vjp, jvp


def test_vjp_values_structures_and_reuse():
    x, y = arrays((2, 3), (3,))

    def build(L, F):
        def call(a, b):
            out, fn = F.vjp(lambda p, q: {"s": (p * q).sin(), "t": (p.sum(), q.exp())}, a, b)
            cts = {"s": L.ones_like(out["s"]) * 0.5,
                   "t": (L.ones_like(out["t"][0]), L.arange(3, dtype=L.float64))}
            return out, fn(cts), fn(cts)  # called twice: the graph is kept
        return call
    assert_same(*run_both(build, x, y))

    def aux(L, F):
        def call(a):
            out, fn, extra = F.vjp(lambda p: (p.cos(), {"a": p * 2}), a, has_aux=True)
            return out, fn(L.ones_like(out)), extra
        return call
    assert_same(*run_both(aux, x))


def test_vjp_errors_match_torch():
    (x,) = arrays((3,))
    same_error(lambda L, F: lambda a: F.vjp(lambda p: p.sin(), a)[1]((L.ones_like(a),)), x,
               match="Expected pytree structure of cotangents to be the same")
    same_error(lambda L, F: lambda a: F.vjp(lambda p: (p > 0).long(), a), x,
               match="All outputs of f must be floating-point")
    same_error(lambda L, F: lambda a: F.vjp(lambda p: 3.0, a), x,
               match="expected f(*primals) to return only tensors")
    same_error(lambda L, F: lambda a: F.vjp(lambda p: p.sin(), a)[1](L.ones(2, dtype=L.float64)),
               x, match="Mismatch in shape")
    same_error(lambda L, F: lambda a: F.vjp(lambda p: p.sin(), a, has_aux=True), x,
               match="output of function f should be a tuple")


def test_jvp_values_structures_and_strictness():
    x, y, t, u = arrays((3,), (3,), (3,), (3,))

    def build(L, F):
        return lambda a, b, ta, tb: F.jvp(
            lambda p, q: ((p * q).sin(), {"sum": (p ** 3).sum(), "q": q.exp()}),
            (a, b), (ta, tb))
    assert_same(*run_both(build, x, y, t, u))

    def independent(L, F):  # an output independent of the primals: zeros; an int one too
        return lambda a, ta: F.jvp(lambda p: (p * 2, L.ones(2, dtype=L.float64),
                                              (p > 0).long()), (a,), (ta,))
    assert_same(*run_both(independent, x, t))
    same_error(lambda L, F: lambda a, ta: F.jvp(lambda p: L.ones(2, dtype=L.float64), (a,),
                                                (ta,), strict=True), x, t,
               match="The output of f is independent of the inputs")

    def aux(L, F):
        return lambda a, ta: F.jvp(lambda p: (p.sin(), p.cos()), (a,), (ta,), has_aux=True)
    assert_same(*run_both(aux, x, t))
    # a dict primal (the NTK tutorial's parameters)
    assert_same(*run_both(lambda L, F: lambda a, ta: F.jvp(
        lambda d: (d["w"] * d["b"]).tanh(), ({"w": a, "b": a},), ({"w": ta, "b": ta},)), x, t))


@pytest.mark.parametrize("call,match", [
    (lambda L, F, a: F.jvp(L.sin, a, a), "Expected primals to be a tuple"),
    (lambda L, F, a: F.jvp(L.sin, (a,), (a, a)), "Expected primals and tangents to have the "
                                                 "same python structure"),
    (lambda L, F, a: F.jvp(L.sin, (a,), (a[:2],)), "different size than that of the original"),
    (lambda L, F, a: F.jvp(L.sin, (), ()), "Expected primals to contain at least one Tensor"),
    (lambda L, F, a: F.jvp(lambda p: p, (3.0,), (1.0,)), "to only contain Tensors"),
    (lambda L, F, a: F.jvp(lambda p: 3.0, (a,), (a,)), "to return only tensors"),
])
def test_jvp_errors_match_torch(call, match):
    (x,) = arrays((3,))
    same_error(lambda L, F: functools.partial(call, L, F), x, match=match)


# ------------------------------------------------------------------ jacrev, jacfwd, hessian


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians_match_torch(jac):
    x, y, w = arrays((3,), (2, 2), (4, 3))

    def build(argnums, has_aux=False):
        def b(L, F):
            def f(a, m, d):
                out = ((d["w"] @ a).tanh(), {"m": (m * a[:2]).exp(), "s": (a ** 2).sum()})
                return (out, a.sum()) if has_aux else out
            return getattr(F, jac)(f, argnums=argnums, has_aux=has_aux)
        return b
    for argnums in (0, 1, 2, (0, 2), (2, 0, 1)):
        assert_same(*run_both(build(argnums), x, y, {"w": w}))
    assert_same(*run_both(build((0, 1), has_aux=True), x, y, {"w": w}))


def test_hessians_by_every_composition_match_torch():
    (x,) = arrays((4,))

    def f(v):
        return (v.sin() * v.roll(1)).sum() * v.norm()

    def vector(v):
        return v.tanh() * v.sum()
    for make in (lambda F: F.hessian(f), lambda F: F.jacrev(F.jacrev(f)),
                 lambda F: F.jacfwd(F.jacfwd(f)), lambda F: F.jacfwd(F.jacrev(f)),
                 lambda F: F.hessian(vector), lambda F: F.jacrev(F.jacfwd(vector))):
        assert_same(*run_both(lambda L, F, make=make: make(F), x), rtol=1e-9)
    assert_same(*run_both(lambda L, F: F.hessian(lambda a, b: (a * b.exp()).sum() ** 2,
                                                 argnums=(0, 1)), x, x[::-1].copy()), rtol=1e-9)


def test_jacobian_errors_and_randomness():
    (x,) = arrays((3,))
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        with pytest.raises(ValueError, match="jacrev: `chunk_size` should be greater than 0"):
            F.jacrev(L.sin, chunk_size=0)
        jac = F.jacrev(L.sin, chunk_size=2)(L.tensor(x))  # chunks: the same Jacobian
        np.testing.assert_allclose(np.asarray(jac.detach()), np.diag(np.cos(x)), rtol=1e-12)
    same_error(lambda L, F: F.jacfwd(lambda a: a * L.rand(3, dtype=L.float64)), x,
               match="called random operation while in randomness error mode")
    same_error(lambda L, F: F.jacfwd(L.sin, randomness="sometimes"), x,
               match="Only allowed values for randomness are")
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        jac = F.jacfwd(lambda a, L=L: a * L.rand(3, dtype=L.float64),
                       randomness="same")(L.tensor(x))
        assert jac.shape == (3, 3) and jac.diagonal().min() >= 0
        np.testing.assert_array_equal(np.asarray(jac.detach()), np.diag(np.diag(jac.detach())))
        jac = F.jacrev(lambda a, L=L: a * L.rand(3, dtype=L.float64))(L.tensor(x))  # no vmap
        assert jac.shape == (3, 3)


# ------------------------------------------------------------------ vmap


def g3(x, y):
    return (x * y.sum()).sin(), x.sum(-1)


@pytest.mark.parametrize("in_dims,shapes", [
    (0, [(4, 3), (4, 2)]), (1, [(3, 4), (2, 4)]), (-1, [(3, 4), (2, 4)]),
    ((0, None), [(4, 3), (2,)]), ((None, 1), [(3,), (2, 5)]), ((2, 0), [(3, 1, 5), (5, 2)]),
])
def test_vmap_in_dims_match_torch(in_dims, shapes):
    inputs = arrays(*shapes)
    assert_same(*run_both(lambda L, F: F.vmap(g3, in_dims=in_dims), *inputs))


@pytest.mark.parametrize("out_dims", [0, 1, -1, (1, 0), (2, 0), [0, -1]])
def test_vmap_out_dims_match_torch(out_dims):
    x, y = arrays((4, 3, 2), (2,))

    def f(a, b):
        return a * b, b * 2 + 0 * a.sum()
    if isinstance(out_dims, list):
        out_dims = tuple(out_dims)
    assert_same(*run_both(lambda L, F: F.vmap(f, in_dims=(0, None), out_dims=out_dims), x, y))


def test_vmap_nested_pytrees_kwargs_and_chunks():
    x, y, z = arrays((5, 3), (3, 5), (2,))

    def f(d, pair, scale=1.0):
        return {"a": d["x"] * scale + pair[0].sum(), "b": [pair[1] * d["y"][0], d["x"].max()]}
    in_dims = ({"x": 0, "y": None}, (1, None))
    for chunk in (None, 1, 2, 7):
        assert_same(*run_both(lambda L, F, chunk=chunk: lambda a, b, c: F.vmap(
            f, in_dims=in_dims, out_dims={"a": 1, "b": [0, 0]}, chunk_size=chunk)(
            {"x": a, "y": c}, (b, c), scale=c[0]), x, y, z))
    # nested vmap: an outer product of rows
    assert_same(*run_both(lambda L, F: F.vmap(F.vmap(lambda a, b: a * b, (None, 0)), (0, None)),
                          x[:, 0].copy(), y[0].copy()))


def test_vmap_of_an_empty_batch():
    (x,) = arrays((0, 3))
    assert_same(*run_both(lambda L, F: F.vmap(lambda a: (a.sum(), a[None] * 2), out_dims=(0, 2)),
                          x))


def test_vmap_out_dim_of_a_0d_output():
    """A 0-d output per sample: out_dims in [-1, 0] (PyTorch checks it for a mapped output,
    and for an unmapped one returns a tensor of garbage sizes; tinytrain checks both)."""
    (x,) = arrays((4, 3))
    same_error(lambda L, F: F.vmap(lambda a: a.sum(), out_dims=1), x,
               match="Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    assert_same(*run_both(lambda L, F: F.vmap(lambda a: a.sum(), out_dims=-1), x))
    with pytest.raises(IndexError, match="expected to be in range of"):
        tt.vmap(lambda a, c: c.sum(), in_dims=(0, None), out_dims=1)(tt.tensor(x), tt.ones(2))


def test_vmap_returns_unmapped_outputs_as_torch():
    x, c = arrays((3, 2), (2,))
    assert_same(*run_both(lambda L, F: lambda a, b: F.vmap(lambda r: b, out_dims=0)(a), x, c))
    assert_same(*run_both(lambda L, F: lambda a, b: F.vmap(lambda r: (r, b * 2),
                                                          out_dims=(0, None))(a), x, c))
    # an unmapped output at out_dim 1: expanded there (PyTorch 2.13 returns garbage sizes)
    out = tt.vmap(lambda r, b: b, in_dims=(0, None), out_dims=1)(tt.tensor(x), tt.tensor(c))
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(c[:, None], (2, 3)))
    for name in ("tt", "torch"):  # a Python number with out_dims=None
        L, F = lib_of(name)
        assert F.vmap(lambda r: 3.0, out_dims=None)(L.tensor(x)) == 3.0


@pytest.mark.parametrize("call,kind,match", [
    (lambda F, x, y: F.vmap(lambda a, b: a + b)(x, y[:2]), ValueError,
     "Expected all tensors to have the same size in the mapped dimension, got sizes [3, 2]"),
    (lambda F, x, y: F.vmap(lambda a, b: a, in_dims=(0,))(x, y), ValueError,
     "in_dims is not compatible with the structure of `inputs`"),
    (lambda F, x, y: F.vmap(lambda a: a, in_dims=2)(x), ValueError,
     "expected in_dim to satisfy -2 <= in_dim < 2"),
    (lambda F, x, y: F.vmap(lambda a: a, in_dims=[0])(x), ValueError,
     "expected `in_dims` to be int or a (potentially nested) tuple"),
    (lambda F, x, y: F.vmap(lambda a: a, in_dims=None)(x), ValueError,
     "expected `in_dims` to be int or a (potentially nested) tuple"),
    (lambda F, x, y: F.vmap(lambda a: a, in_dims=(0.5,))(x), ValueError,
     "in_dim must be either an integer dimension or None"),
    (lambda F, x, y: F.vmap(lambda a, n: a)(x, 3), ValueError,
     "We cannot vmap over non-Tensor arguments"),
    (lambda F, x, y: F.vmap(lambda a: a, in_dims=(None,))(x), ValueError,
     "Expected at least one Tensor to vmap over"),
    (lambda F, x, y: F.vmap(lambda: 1)(), ValueError, "got no inputs"),
    (lambda F, x, y: F.vmap(lambda a: a, randomness="foo"), RuntimeError,
     "Only allowed values for randomness are 'error', 'different', or 'same'. Got foo"),
    (lambda F, x, y: F.vmap(lambda a: a, chunk_size=0), ValueError,
     "chunk_size should be None or greater than 0. (got 0)"),
    (lambda F, x, y: F.vmap(lambda a: a, out_dims="a")(x), ValueError,
     "`out_dims` must be an int, None or a python collection of ints"),
    (lambda F, x, y: F.vmap(lambda a: a, out_dims=None)(x), ValueError,
     "can not return a BatchedTensor when out_dim is None"),
    (lambda F, x, y: F.vmap(lambda a: a, out_dims=2)(x), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda F, x, y: F.vmap(lambda a: a, out_dims=(0, 1))(x), ValueError,
     "out_dims is not compatible with the structure of `outputs`"),
    (lambda F, x, y: F.vmap(lambda a: (a, a), out_dims=(0, 1, 2))(x), ValueError,
     "out_dims is not compatible with the structure of `outputs`"),
    (lambda F, x, y: F.vmap(lambda a: 3.0)(x), ValueError,
     "must only return Tensors, got type <class 'float'>"),
])
def test_vmap_errors_match_torch(call, kind, match):
    x, y = arrays((3, 2), (3, 3))
    err = same_error(lambda L, F: functools.partial(call, F), x, y, match=match)
    assert isinstance(err, kind)


def test_vmap_randomness():
    (x,) = arrays((4, 3))
    same_error(lambda L, F: F.vmap(lambda a: a + L.rand(3, dtype=L.float64)), x,
               match="vmap: called random operation while in randomness error mode")
    same_error(lambda L, F: F.vmap(lambda a: L.nn.functional.dropout(a, 0.5)), x,
               match="randomness error mode")
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        z = L.zeros(4, 3, dtype=L.float64)
        same = F.vmap(lambda a, L=L: a + L.rand(3, dtype=L.float64), randomness="same")(z)
        different = F.vmap(lambda a, L=L: a + L.rand(3, dtype=L.float64),
                           randomness="different")(z)
        assert same.shape == different.shape == (4, 3)
        assert bool((same == same[0]).all()) and not bool((different == different[0]).all())
        eval_mode = F.vmap(lambda a, L=L: L.nn.functional.dropout(a, 0.5, training=False))(z)
        assert bool((eval_mode == 0).all())


def test_vmap_in_place_writes():
    """Writes to a mapped input reach it (as PyTorch's); a write to a captured tensor raises
    (PyTorch raises when the value is batched, and writes once when not: the loop would
    write once per sample, so tinytrain raises in both cases)."""
    results = {}
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        xb = L.zeros(2, 3)
        out = F.vmap(lambda a: a.add_(1))(xb)
        results[name] = (out, xb)
    assert_same(results["tt"], results["torch"])
    c = tt.zeros(3)
    with pytest.raises(RuntimeError, match="vmap: in-place operation .*captured"):
        tt.vmap(lambda r: c.add_(r))(tt.ones(2, 3))
    with pytest.raises(RuntimeError, match="once per sample"):
        tt.vmap(lambda r: c.add_(1) * r)(tt.ones(2, 3))
    assert c.sum().item() == 0  # nothing written
    with pytest.raises(RuntimeError, match="once per sample"):  # in_dims=None: captured too
        tt.vmap(lambda r, u: u.mul_(2) * r, in_dims=(0, None))(tt.ones(2, 3), tt.ones(3))
    torch_c = torch.zeros(3)
    torch.func.vmap(lambda r: torch_c.add_(1) * r)(torch.ones(2, 3))
    assert torch_c.sum().item() == 3  # PyTorch: once


def test_what_the_vmap_loop_does_not_detect():
    """PyTorch raises for ``.item()``, data-dependent control flow on a batched tensor, and
    an in-place write of a batched value into an unbatched tensor made inside the function;
    tinytrain's per-sample loop runs them, each sample on its own value (DESIGN section)."""
    x = np.array([[1.0, -2.0], [-3.0, 4.0]])
    with pytest.raises(RuntimeError, match=r"calling \.item\(\) on a Tensor"):
        torch.func.vmap(lambda r: r.sum() * r.sum().item())(torch.tensor(x))
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        torch.func.vmap(lambda r: r if r.sum() > 0 else -r)(torch.tensor(x))
    np.testing.assert_allclose(tt.vmap(lambda r: r.sum() * r.sum().item())(tt.tensor(x)).numpy(),
                               [1.0, 1.0])
    np.testing.assert_allclose(tt.vmap(lambda r: r if r.sum() > 0 else -r)(tt.tensor(x)).numpy(),
                               [[-1.0, 2.0], [-3.0, 4.0]])
    # out_dims=None for an output computed from the mapped input but equal in every sample
    with pytest.raises(ValueError, match="can not return a BatchedTensor"):
        torch.func.vmap(lambda r: 0 * r, out_dims=None)(torch.tensor(x))
    np.testing.assert_array_equal(tt.vmap(lambda r: 0 * r, out_dims=None)(tt.tensor(x)).numpy(),
                                  [0.0, 0.0])
    with pytest.raises(RuntimeError):
        torch.func.vmap(lambda r: torch.zeros(2, dtype=r.dtype).add_(r))(torch.tensor(x))
    np.testing.assert_allclose(tt.vmap(lambda r: tt.zeros(2, dtype=r.dtype).add_(r))(
        tt.tensor(x)).numpy(), x)


# ------------------------------------------------------------------ compositions


def test_compositions_match_torch():
    x, w, ys = arrays((5, 3), (3,), (5,))

    def loss(p, a, y):
        return ((a * p).sum().tanh() - y) ** 2
    # per-sample gradients, and their mean = the batch gradient
    assert_same(*run_both(lambda L, F: F.vmap(F.grad(loss), in_dims=(None, 0, 0)), w, x, ys))
    # grad of a vmapped function, with respect to the unmapped parameter
    assert_same(*run_both(lambda L, F: F.grad(lambda p, a, y: F.vmap(
        loss, in_dims=(None, 0, 0))(p, a, y).mean()), w, x, ys))
    # batched Jacobians and Hessians
    assert_same(*run_both(lambda L, F: F.vmap(F.jacrev(lambda a: a.sin() * a.sum())), x))
    assert_same(*run_both(lambda L, F: F.vmap(F.hessian(lambda a: a.sin().sum() * a.norm())), x),
                rtol=1e-9)
    # vjp under vmap (the Jacobian tutorial's vmap(vjp_fn)(unit_vectors))
    assert_same(*run_both(lambda L, F: lambda a: F.vmap(F.vjp(L.sin, a[0])[1])(
        L.eye(3, dtype=L.float64)), x))
    # jvp of grad: a Hessian-vector product
    assert_same(*run_both(lambda L, F: lambda a, t: F.jvp(F.grad(lambda v: v.sin().sum() ** 2),
                                                          (a,), (t,)), w, x[0].copy()))
    # grad of a function that takes a jacobian inside
    assert_same(*run_both(lambda L, F: F.grad(lambda a: F.jacrev(L.sin)(a).sum() ** 2), w))


def test_vmap_output_is_differentiable_by_autograd():
    x, w = arrays((4, 3), (3,))
    results = {}
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        p = L.tensor(w, requires_grad=True)
        out = F.vmap(lambda r, p=p: (r * p).sin().sum())(L.tensor(x))
        out.pow(2).sum().backward()
        results[name] = (out, p.grad)
    assert_same(results["tt"], results["torch"])


def test_per_sample_grads_of_a_module(device):
    """The tutorial's pattern on ``device``: ``vmap(grad(loss over functional_call))`` equals
    one autograd.grad per sample (CuPy arrays through the same code on "cuda")."""
    tt.manual_seed(0)
    model = tt.nn.Sequential(tt.nn.Linear(4, 5), tt.nn.Tanh(), tt.nn.Linear(5, 3)).double()
    model.to(device)
    x = tt.tensor(RNG.standard_normal((6, 4)), device=device)
    y = tt.tensor(RNG.integers(0, 3, 6), device=device)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, a, t):
        return tt.nn.functional.cross_entropy(tt.func.functional_call(model, p, (a[None],)),
                                              t[None])
    per_sample = tt.func.vmap(tt.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(6):
        grads = tt.autograd.grad(loss(dict(model.named_parameters()), x[i], y[i]),
                                 list(model.parameters()))
        for g, ref in zip(per_sample.values(), grads):
            assert g.device == device and g.shape == (6, *ref.shape)
            np.testing.assert_allclose(g[i].numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    hess = tt.func.vmap(tt.func.hessian(lambda a: a.sin().sum() * a.norm()))(x)
    assert hess.shape == (6, 4, 4) and hess.device == device
    ref = torch.func.vmap(torch.func.hessian(lambda a: a.sin().sum() * a.norm()))(
        torch.tensor(x.numpy()))
    np.testing.assert_allclose(hess.numpy(), ref.numpy(), rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ functional_call


class Tied(tt.nn.Module):
    def __init__(self, lib):
        lib.nn.Module.__init__(self)
        self.a = lib.nn.Linear(2, 2).double()
        self.b = self.a  # the same module under two names

    def forward(self, x):
        return self.b(x)


def _both_modules(make):
    tt.manual_seed(0)
    ours = make(tt)
    theirs = make(torch)
    with torch.no_grad():
        for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert n == m
            q.copy_(torch.tensor(p.detach().numpy()))
    return ours, theirs


def test_functional_call_matches_torch_and_leaves_the_module_alone():
    ours, theirs = _both_modules(lambda L: L.nn.Sequential(L.nn.Linear(3, 4), L.nn.ReLU(),
                                                          L.nn.Linear(4, 2)).double())
    w0, b1, x = arrays((4, 3), (2,), (5, 3))
    before = ours[0].weight.detach().numpy().copy()
    results = {}
    for name, m in (("tt", ours), ("torch", theirs)):
        L, F = lib_of(name)
        new = {"0.weight": L.tensor(w0), "2.bias": L.tensor(b1)}
        results[name] = (F.functional_call(m, new, L.tensor(x)),
                         F.functional_call(m, ({"0.weight": new["0.weight"]},
                                               {"2.bias": new["2.bias"]}), (L.tensor(x),)),
                         F.functional_call(m, {}, args=(L.tensor(x),), kwargs={}),
                         m(L.tensor(x)))
    assert_same(results["tt"], results["torch"])
    np.testing.assert_array_equal(ours[0].weight.detach().numpy(), before)
    assert isinstance(ours[0].weight, tt.nn.Parameter)


def test_functional_call_buffers_are_written_as_torch():
    """BatchNorm in training mode updates the running statistics given in the dict (in
    place), not the module's."""
    ours, theirs = _both_modules(lambda L: L.nn.BatchNorm1d(3).double())
    (x,) = arrays((4, 3))
    results = {}
    for name, m in (("tt", ours), ("torch", theirs)):
        L, F = lib_of(name)
        buffers = {k: v.clone() for k, v in m.named_buffers()}
        out = F.functional_call(m, buffers, L.tensor(x))
        results[name] = (out, buffers, dict(m.named_buffers()))
    assert_same(results["tt"], results["torch"])


def test_functional_call_tied_weights_strict_and_errors():
    ours, theirs = _both_modules(lambda L: Tied(L) if L is tt else TorchTied())
    x = np.ones((1, 2))
    for tie in (True, False):
        assert_same(*run_both(lambda L, F, tie=tie: lambda a: F.functional_call(
            ours if L is tt else theirs, {"a.weight": L.zeros(2, 2, dtype=L.float64)}, a,
            tie_weights=tie), x))

    def call(dicts, **kw):
        return lambda L, F: lambda a: F.functional_call(ours if L is tt else theirs,
                                                        dicts(L), a, **kw)
    same_error(call(lambda L: {"a.weight": L.zeros(2, 2), "b.weight": L.ones(2, 2)}), x,
               match="functional_call got multiple values for keys ['a.weight', 'b.weight'], "
                     "which are tied")
    same_error(call(lambda L: {"a.weight": L.zeros(2, 2)}, strict=True), x,
               match="Error(s) in reparametrizing for")
    err = same_error(call(lambda L: {"a.weight": L.zeros(2, 2), "zz": L.zeros(1)}, strict=True),
                     x, match="Unexpected key(s): 'zz'.")
    assert "Missing key(s): 'a.bias', 'b.bias'." in str(err)
    same_error(call(lambda L: ({"a.weight": L.zeros(2, 2)}, {"a.weight": L.zeros(2, 2)})), x,
               match="['a.weight'] appeared in multiple dictionaries")
    same_error(call(lambda L: 3), x, match="Expected parameter_and_buffer_dicts to be a dict")
    same_error(call(lambda L: ({}, 3)), x,
               match="Expected all elements of parameter_and_buffer_dicts to be dictionaries")
    same_error(call(lambda L: {"a.weight": 3}), x, match="is not an instance of torch.Tensor")
    same_error(call(lambda L: {"c.weight": L.zeros(2, 2)}), x, match="has no attribute `c`")


class TorchTied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(2, 2).double()
        self.b = self.a

    def forward(self, x):
        return self.b(x)


def _scaled(L):
    class Scaled(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = L.nn.Parameter(L.ones(2, dtype=L.float64))

        def forward(self, x, scale=1.0):
            return self.w * x * scale
    return Scaled()


def test_functional_call_passes_keyword_arguments():
    results = {}
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        x = L.tensor([1.0, 2.0], dtype=L.float64)
        results[name] = F.functional_call(_scaled(L), {"w": x * 3}, x, {"scale": 2.0})
    assert_same(results["tt"], results["torch"])


def test_stateless_functional_call_is_deprecated_as_torch():
    m = tt.nn.Linear(2, 1)
    with pytest.warns(FutureWarning, match="is deprecated as of PyTorch 2.0"):
        out = tt.nn.utils.stateless.functional_call(m, {"bias": tt.zeros(1)}, tt.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), m.weight.detach().numpy().sum(1)[None],
                               rtol=1e-6)


def test_stack_module_state_matches_torch():
    ours = [tt.nn.Linear(3, 2) for _ in range(4)]
    with_buffers = [tt.nn.BatchNorm1d(2) for _ in range(3)]
    params, buffers = tt.func.stack_module_state(ours)
    assert list(params) == ["weight", "bias"] and buffers == {}
    assert params["weight"].shape == (4, 2, 3) and params["weight"].is_leaf
    assert params["weight"].requires_grad and params["weight"].grad_fn is None
    np.testing.assert_array_equal(params["weight"][2].detach().numpy(),
                                  ours[2].weight.detach().numpy())
    params, buffers = tt.func.stack_module_state(with_buffers)
    assert buffers["running_var"].shape == (3, 2) and not buffers["running_var"].requires_grad
    assert buffers["num_batches_tracked"].shape == (3,)
    frozen = tt.nn.Linear(3, 2)
    frozen.weight.requires_grad_(False)
    for make, match in [(lambda L: [], "Expected at least one model, got 0."),
                        (lambda L: [L.nn.Linear(2, 2), L.nn.Linear(2, 2).eval()],
                         "Expected all models to have the same training/eval mode."),
                        (lambda L: [L.nn.Linear(2, 2), L.nn.Tanh()],
                         "Expected all models to be of the same class."),
                        (lambda L: [L.nn.Linear(2, 2), L.nn.Linear(2, 2).requires_grad_(False)],
                         "Expected weight from each model to have the same .requires_grad")]:
        same_error(lambda L, F, make=make: lambda: F.stack_module_state(make(L)), match=match)


# ------------------------------------------------------------------ around tt.func


def test_autograd_grad_is_grads_batched_matches_torch():
    x, z = arrays((3,), (2,))
    results = {}
    for name in ("tt", "torch"):
        L, F = lib_of(name)
        a, b = L.tensor(x, requires_grad=True), L.tensor(z, requires_grad=True)
        y = a ** 2 * b.sum()
        eye = L.eye(3, dtype=L.float64)
        results[name] = (
            L.autograd.grad(y, a, eye, is_grads_batched=True, retain_graph=True),
            L.autograd.grad(y, (a, b), eye * 2, is_grads_batched=True, retain_graph=True),
            L.autograd.grad(a.sin(), (a, b), eye, is_grads_batched=True, allow_unused=True,
                            retain_graph=True)[1] is None)
    assert_same(results["tt"], results["torch"])
    same_error(lambda L, F: lambda v: L.autograd.grad(
        v.requires_grad_() ** 2, v, L.ones(2, 2, dtype=L.float64), is_grads_batched=True),
        x, match="we interpret the first dimension of each grad_output as the batch")


def test_autograd_functional_vectorize_and_strategies():
    (x,) = arrays((3,))

    def f(v):
        return v.sin() * v.sum()
    for kw in ({"vectorize": True}, {"vectorize": True, "strategy": "forward-mode"}):
        assert_same(*run_both(lambda L, F, kw=kw: lambda v: L.autograd.functional.jacobian(
            f, v, **kw), x))
    assert_same(*run_both(lambda L, F: lambda v: L.autograd.functional.hessian(
        lambda u: f(u).sum(), v, vectorize=True, outer_jacobian_strategy="forward-mode"), x))
    for kw, match in [({"strategy": "forward-mode"}, "only implemented for `vectorize=True`"),
                      ({"strategy": "forward-mode", "vectorize": True, "create_graph": True},
                       "`create_graph=True` and `strategy=\"forward-mode\"` are not supported"),
                      ({"strategy": "forward-mode", "vectorize": True, "strict": True},
                       "`strict=True` and `strategy=\"forward-mode\"` are not supported"),
                      ({"vectorize": True, "strict": True}, "are not supported together"),
                      ({"strategy": "sideways"}, "Expected strategy to be either")]:
        same_error(lambda L, F, kw=kw: lambda v: L.autograd.functional.jacobian(f, v, **kw), x,
                   match=match)


@pytest.mark.parametrize("equation,shapes", [
    ("Naf,Mbf->NMab", [(3, 4, 7), (2, 5, 7)]), ("Naf,Maf->NM", [(3, 4, 7), (2, 4, 7)]),
    ("Naf,Maf->NMa", [(3, 4, 7), (2, 4, 7)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ijk,jl->lk", [(2, 3, 4), (3, 5)]), ("ij,kl->", [(2, 3), (4, 5)]),
    ("i,j->ji", [(3,), (4,)]), ("ab,ab->ab", [(2, 3), (2, 3)]), ("ij,jk->ik", [(3, 1), (4, 5)]),
])
def test_einsum_of_two_operands_by_matmul_matches_torch(equation, shapes, device):
    """The NTK tutorial's ``einsum('Naf,Mbf->NMab')`` took 14 s in NumPy 2's einsum; two
    operands now contract by one batched matmul: values and gradients as PyTorch's."""
    inputs = arrays(*shapes)
    results = {}
    for name in ("tt", "torch"):
        L, _ = lib_of(name)
        ts = [L.tensor(a, requires_grad=True, **({"device": device} if L is tt else {}))
              for a in inputs]
        out = L.einsum(equation, *ts)
        g = L.autograd.grad(out, ts, L.ones_like(out) * 1.5, create_graph=True)
        gg = L.autograd.grad(sum((gi ** 2).sum() for gi in g), ts)
        results[name] = (out, g, gg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(results["tt"], results["torch"])
