"""The NumPy-style spellings that d2l.ai and lecture code use with PyTorch, against PyTorch.

``axis=`` / ``keepdims=`` for ``dim=`` / ``keepdim=`` (exactly where PyTorch takes them,
found by calling every tinytrain function and method that has a ``dim`` or ``keepdim``
argument both ways), ``size=`` on the creation functions, ``tt.normal``, ``tt.mv`` and
PyTorch's ``grad_fn.name()``.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5)).astype(np.float32)
Y = rng.standard_normal((4, 5)).astype(np.float32)
IDX = np.array([[0, 4], [1, 1], [3, 2], [4, 0]])  # gather / scatter index along dim 1


# ------------------------------------------------------------------ the comparison


def outputs(value):
    if isinstance(value, tuple | list):
        return [t for v in value for t in outputs(v)]
    return [value]


def as_numpy(t):
    if isinstance(t, bool | int | float):
        return np.asarray(t)
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def compare(fn, *arrays, grad=True):
    """``fn(lib, *tensors)`` with tinytrain and with PyTorch: the same shapes, dtypes and
    values, and (``grad``) the same gradients of the float inputs for a random upstream."""
    results = []
    for lib in (tt, torch):
        ins = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        results.append((ins, outputs(fn(lib, *ins))))
    (ins, ours), (tins, theirs) = results
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        if isinstance(t, torch.Tensor):
            assert isinstance(o, tt.Tensor) and o.shape == tuple(t.shape), (o, t)
            assert str(o.dtype) == str(t.dtype).removeprefix("torch."), (o.dtype, t.dtype)
        else:
            assert type(o) is type(t), (o, t)
        np.testing.assert_allclose(as_numpy(o), as_numpy(t), rtol=1e-5, atol=1e-6)
    pairs = [(o, t) for o, t in zip(ours, theirs)
             if isinstance(t, torch.Tensor) and t.requires_grad]
    if not grad or not pairs:
        return
    assert all(o.requires_grad for o, _ in pairs)
    g = np.random.default_rng(1)
    total, ttotal = 0, 0
    for o, t in pairs:
        up = g.standard_normal(tuple(t.shape)).astype(np.float32)
        total, ttotal = total + (o * tt.tensor(up)).sum(), ttotal + (t * torch.tensor(up)).sum()
    total.backward()
    ttotal.backward()
    for a, b in zip(ins, tins):
        if b.grad is None:
            assert a.grad is None
        else:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ axis= and keepdims=


def _takes_dim(fn) -> set[str]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return set()
    return {"dim", "keepdim"} & set(params)


def _with_dim():
    """Every public tinytrain function and Tensor method with a dim or keepdim argument."""
    found = []
    for owner, names in (("Tensor", dir(tt.Tensor)), ("tt", tt.__all__), ("F", F.__all__)):
        space = {"Tensor": tt.Tensor, "tt": tt, "F": F}[owner]
        for name in names:
            fn = getattr(space, name, None)  # (None: a PyTorch name tinytrain lacks)
            if not name.startswith("_") and callable(fn) and not isinstance(fn, type):
                params = _takes_dim(fn)
                if params:
                    found.append(pytest.param(owner, name, params, id=f"{owner}.{name}"))
    return found


WITH_DIM = _with_dim()


def test_the_survey_finds_the_names_it_must():
    names = {p.id for p in WITH_DIM}
    assert {"Tensor.sum", "Tensor.argmax", "Tensor.size", "tt.cat", "tt.stack", "tt.softmax",
            "F.softmax", "F.pairwise_distance", "Tensor.norm", "tt.split"} <= names
    assert len(names) > 70, len(names)


#: The other arguments each needs (a function of the library, for its index tensors).
EXTRA = {
    "topk": lambda L: ((2,), {}), "chunk": lambda L: ((2,), {}), "split": lambda L: ((2,), {}),
    "select": lambda L: ((), {"index": 1}), "narrow": lambda L: ((), {"start": 1, "length": 3}),
    "gather": lambda L: ((), {"index": L.tensor(IDX)}),
    "index_select": lambda L: ((), {"index": L.tensor([0, 3])}),
    "scatter": lambda L: ((), {"index": L.tensor(IDX), "value": 0.5}),
    "scatter_": lambda L: ((), {"index": L.tensor(IDX), "value": 0.5}),
    "unflatten": lambda L: ((), {"sizes": (5, 1)}),
    "index_add": lambda L: ((), {"index": L.tensor([0, 3, 3]), "source": L.ones(4, 3)}),
    "index_add_": lambda L: ((), {"index": L.tensor([0, 3, 3]), "source": L.ones(4, 3)}),
    "scatter_add": lambda L: ((), {"index": L.tensor(IDX), "src": L.ones(4, 2)}),
    "scatter_add_": lambda L: ((), {"index": L.tensor(IDX), "src": L.ones(4, 2)}),
    "kthvalue": lambda L: ((2,), {}), "repeat_interleave": lambda L: ((2,), {}),
    "tensor_split": lambda L: ((2,), {}),
    "take_along_dim": lambda L: ((), {"indices": L.tensor(IDX)}),
}


def call(owner: str, name: str, **kwargs):
    """``fn(lib, x, y)`` calling ``owner.name`` with ``kwargs`` (and what else it needs)."""

    def fn(lib, x, y):
        args, extra = EXTRA.get(name, lambda L: ((), {}))(lib)
        if name in ("all", "any"):
            x = x > 0
        if name.endswith("_"):
            x = x + 0  # (an in-place op on a non-leaf)
        if name == "cross":  # (3-vectors along dim 1)
            x, extra = x[:, :3], {"other": y[:, :3]}
        if owner == "Tensor":
            return getattr(x, name)(*args, **extra, **kwargs)
        space = {"tt": lib, "F": lib.nn.functional}[owner]
        first = (([x, y],) if name in ("cat", "concat", "concatenate", "stack")
                 else (x, y) if name in ("cosine_similarity", "pairwise_distance") else (x,))
        return getattr(space, name)(*first, *args, **extra, **kwargs)

    return fn


def outcome(fn, lib):
    """What ``fn`` gives, or the exception's type."""
    try:
        return fn(lib, *(lib.tensor(a) for a in (X, Y)))
    except Exception as e:  # noqa: BLE001 (the type is what is compared)
        return type(e)


@pytest.mark.parametrize(("owner", "name", "params"), WITH_DIM)
def test_axis_is_accepted_exactly_where_pytorch_accepts_it(owner, name, params):
    spellings = []
    if "dim" in params:
        spellings.append({"axis": 1})
    if "keepdim" in params:
        spellings.append({"keepdims": True} | ({"dim": 1} if "dim" in params else {}))
    for kwargs in spellings:
        fn = call(owner, name, **kwargs)
        theirs = outcome(fn, torch)
        if theirs is TypeError:  # PyTorch does not take this spelling: neither does tinytrain
            assert outcome(fn, tt) is TypeError, (name, kwargs)
        else:
            assert not isinstance(theirs, type), (name, kwargs, theirs)  # (a valid call)
            compare(fn, X, Y)


def test_the_aliases_pytorch_refuses_are_refused():
    refused = {p.id for p in WITH_DIM if "dim" in p.values[2]
               and outcome(call(p.values[0], p.values[1], axis=1), torch) is TypeError}
    # PyTorch's functions written in Python (and Tensor.unflatten, scatter_reduce,
    # index_reduce) do not take axis=
    assert refused == {"Tensor.norm", "Tensor.split", "Tensor.unique", "Tensor.unflatten",
                       "Tensor.scatter_reduce", "Tensor.scatter_reduce_",
                       "Tensor.index_reduce", "Tensor.index_reduce_",
                       "tt.norm", "tt.split", "tt.unique", "F.log_softmax", "F.softmax",
                       "F.softmin", "F.normalize", "F.glu", "F.gumbel_softmax"}


def test_d2l_spellings_match_pytorch():
    compare(lambda L, x, y: (x.argmax(axis=1), x.sum(axis=0, keepdim=True),
                             L.cat([x, y], axis=1), x.mean(axis=1), x.sum(axis=(0, 1)),
                             x.max(axis=1, keepdims=True), L.stack((x, y), axis=-1),
                             x.exp() / x.exp().sum(1, keepdims=True), L.concat([x, y], axis=0),
                             L.softmax(x, axis=0), x.std(axis=1, unbiased=False),
                             x.var(axis=0, keepdims=True, correction=0),
                             x.cumsum(axis=0, dtype=L.float64)), X, Y)


@pytest.mark.parametrize("expr", [
    "x.sum(dim=0, axis=1)", "x.sum(0, axis=1)", "L.sum(x, 0, axis=1)",
    "x.sum(1, keepdim=True, keepdims=True)", "L.mean(x, 1, keepdim=False, keepdims=True)",
    "L.cat([x, x], 0, axis=1)", "L.cat([x, x], dim=0, axis=0)", "L.stack([x], 0, axis=0)",
    "x.argmax(0, axis=1)", "x.cumsum(1, axis=1)", "L.softmax(x, dim=1, axis=1)",
    "x.unsqueeze(0, axis=0)", "x.max(1, keepdim=True, keepdims=True)",
    "L.nn.functional.cosine_similarity(x, x, dim=1, axis=1)",
])
def test_both_spellings_at_once_is_a_type_error_as_in_pytorch(expr):
    for L in (torch, tt):
        with pytest.raises(TypeError) as info:
            eval(expr, {"L": L, "x": L.tensor(X)})
    assert "both" in str(info.value) and "NumPy's name" in str(info.value)


def test_the_wrapped_functions_keep_their_signature_and_docstring():
    assert list(inspect.signature(tt.Tensor.sum).parameters) == [
        "self", "dim", "keepdim", "dtype"]
    assert "axis" not in inspect.signature(tt.cat).parameters
    assert tt.Tensor.sum.__name__ == "sum" and "Sum over" in tt.Tensor.sum.__doc__
    assert tt.cat.__doc__ == tt.functions.cat.__doc__ and "Join tensors" in tt.cat.__doc__


def test_functional_softmax_refuses_axis_as_pytorch_but_torch_softmax_takes_it():
    for L in (torch, tt):
        with pytest.raises(TypeError):
            L.nn.functional.softmax(L.tensor(X), axis=1)
    compare(lambda L, x: (L.softmax(x, axis=1), L.log_softmax(x, axis=0), x.softmax(axis=1)),
            X)


# ------------------------------------------------------------------ size= on creation


@pytest.mark.parametrize("expr", [
    "L.zeros(size=(2, 3))", "L.ones(size=[2, 3], dtype=L.int64)", "L.empty(size=(0, 4))",
    "L.zeros(size=())", "L.ones(size=(2,), requires_grad=True)",
    "L.full(size=(2, 3), fill_value=7)", "L.full(size=[2], fill_value=1.5, dtype=L.float64)",
    "L.full(fill_value=True, size=(1, 2))",
])
def test_size_keyword_makes_the_tensor_pytorch_makes(expr):
    ours, theirs = (eval(expr, {"L": L}) for L in (tt, torch))
    assert ours.shape == tuple(theirs.shape) and ours.requires_grad == theirs.requires_grad
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())


@pytest.mark.parametrize("expr", [
    "L.rand(size=(2, 4))", "L.randn(size=(2, 4), dtype=L.float64)",
    "L.randn(size=[3], requires_grad=True)", "L.randint(0, 10, size=(3, 2))",
    "L.randint(10, size=(4,))", "L.randint(low=2, high=5, size=(2,))",
    "L.randint(high=5, size=(6,), dtype=L.int32)",
])
def test_size_keyword_draws_the_shape_and_dtype_pytorch_draws(expr):
    ours, theirs = (eval(expr, {"L": L}) for L in (tt, torch))
    assert ours.shape == tuple(theirs.shape) and ours.requires_grad == theirs.requires_grad
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    if ours.dtype.kind in "iu":
        assert 0 <= ours.numpy().min() and ours.numpy().max() < 10


@pytest.mark.parametrize("make", ["randn", "rand"])
def test_size_keyword_draws_what_the_positional_sizes_draw(make):
    tt.manual_seed(3)
    a = getattr(tt, make)(size=(2, 3))
    tt.manual_seed(3)
    np.testing.assert_array_equal(a.numpy(), getattr(tt, make)(2, 3).numpy())


@pytest.mark.parametrize("expr", [
    "L.zeros(2, size=(3,))", "L.rand(2, size=(2,))", "L.randn(2, 3, size=(2, 3))",
    "L.full((2,), 1.0, size=(3,))", "L.zeros(size=2)", "L.ones(size=2.0)",
])
def test_sizes_given_twice_or_not_as_a_sequence_are_type_errors_as_in_pytorch(expr):
    for L in (torch, tt):
        with pytest.raises(TypeError, match="size"):
            eval(expr, {"L": L})


# ------------------------------------------------------------------ tt.normal


def describe(t):
    return (tuple(t.shape), str(t.dtype).removeprefix("torch."), t.requires_grad, t.is_leaf)


@pytest.mark.parametrize("expr", [
    "L.normal(0, 0.01, size=(2, 3), requires_grad=True)", "L.normal(0.0, 1.0, (2, 3))",
    "L.normal(mean=0.0, std=1.0, size=[4])", "L.normal(1, 2, size=(0, 2))",
    "L.normal(0.0, 1.0, size=(2,), dtype=L.float64)", "L.normal(2, 3, (2,), generator=None)",
    "L.normal(L.tensor(0.5), 1.0, size=(3,))",
    "L.normal(L.zeros(3), L.ones(3))", "L.normal(L.zeros(3, 1), L.ones(4))",
    "L.normal(L.zeros(3), 2.0)", "L.normal(L.zeros(3))", "L.normal(mean=L.zeros(2, 2))",
    "L.normal(1.0, L.ones(3))", "L.normal(L.zeros(3, dtype=L.float64), L.ones(3))",
    "L.normal(L.zeros(3), L.ones(3, dtype=L.float64))", "L.normal(2.0, L.ones(2, 2).double())",
    "L.normal(L.zeros(3).half(), 1.0)", "L.normal(L.zeros(3), 1)",
    "L.normal(L.zeros(3, requires_grad=True), 2.0)",
    "L.normal(0.0, L.ones(3, requires_grad=True))",
])
def test_normal_forms_give_pytorch_shapes_dtypes_and_graph(expr):
    ours, theirs = (eval(expr, {"L": L}) for L in (tt, torch))
    assert describe(ours) == describe(theirs)


def test_normal_sends_zero_gradients_to_mean_and_std_as_pytorch():
    results = []
    for L in (tt, torch):
        m, s = L.zeros(3, requires_grad=True), L.ones(2, 1, requires_grad=True)
        (L.normal(m, s) * 3).sum().backward()
        results.append((m.grad.numpy(), s.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)
        assert not ours.any()


@pytest.mark.parametrize("form", ["numbers", "tensors", "tensor and number", "number and tensor"])
def test_normal_draws_the_distribution_asked_for_reproducibly(form):
    n = 40_000
    means, stds = np.array([-5.0, 0.0, 3.0]), np.array([0.5, 1.0, 2.0])

    def draw():
        if form == "numbers":
            return np.stack([tt.normal(m, s, size=(n,)).numpy() for m, s in zip(means, stds)])
        if form == "tensors":  # [3, n] means, [3, 1] stds: broadcast
            return tt.normal(tt.tensor(means, dtype=tt.float32)[:, None].expand(3, n),
                             tt.tensor(stds[:, None], dtype=tt.float32)).numpy()
        if form == "tensor and number":
            return np.stack([tt.normal(tt.full((n,), m), s).numpy() for m, s in zip(means, stds)])
        return np.stack([tt.normal(m, tt.full((n,), s)).numpy() for m, s in zip(means, stds)])

    tt.manual_seed(11)
    a = draw()
    assert a.shape == (3, n) and a.dtype == np.float32
    # the sample mean is within 5 standard errors, the sample std within 3%
    np.testing.assert_array_less(np.abs(a.mean(1) - means), 5 * stds / np.sqrt(n))
    np.testing.assert_allclose(a.std(1), stds, rtol=0.03)
    tt.manual_seed(11)
    np.testing.assert_array_equal(draw(), a)
    assert not np.array_equal(draw(), a)  # (the generator moved on)


@pytest.mark.parametrize(("expr", "error"), [
    ("L.normal(0.0, -1.0, (2,))", RuntimeError), ("L.normal(0.0, float('nan'), (2,))",
                                                  RuntimeError),
    ("L.normal(L.zeros(3), -L.ones(3))", RuntimeError),
    ("L.normal(L.zeros(3), L.ones(4))", RuntimeError),
    ("L.normal(0.0, 1.0)", TypeError), ("L.normal(0.0, size=(2,))", TypeError),
    ("L.normal(0.0, 1.0, size=2)", TypeError), ("L.normal(0.0, 1.0, 2, 3)", TypeError),
    ("L.normal(L.zeros(3), L.ones(3), size=(3,))", TypeError),
    ("L.normal(L.zeros(3), 1.0, size=(3,))", TypeError),
    ("L.normal(0.0, L.ones(3), size=(3,))", TypeError),
    ("L.normal(L.zeros(3), L.ones(3), dtype=L.float64)", TypeError),
    ("L.normal(L.zeros(3), 2.0, requires_grad=True)", TypeError),
    ("L.zeros(3).normal_(0, -1)", RuntimeError),
])
def test_normal_errors_have_pytorch_types(expr, error):
    for L in (torch, tt):
        with pytest.raises(error):
            eval(expr, {"L": L})


def test_normal_refuses_integer_dtypes_and_generators_saying_why():
    with pytest.raises(RuntimeError, match="floating point"):
        tt.normal(tt.zeros(3, dtype=tt.int64), tt.ones(3))
    with pytest.raises(RuntimeError, match="floating point"):
        tt.normal(0.0, 1.0, (2,), dtype=tt.int64)
    with pytest.raises(RuntimeError, match="floating point"):
        tt.zeros(3, dtype=tt.int64).normal_()
    with pytest.raises(TypeError, match="normal: generator must be None or a tt.Generator"):
        tt.normal(0.0, 1.0, (2,), generator=object())


def test_normal_in_place_fills_from_the_package_generator():
    x = tt.zeros(50_000, dtype=tt.float64)
    tt.manual_seed(5)
    assert x.normal_(mean=1.0, std=2.0, generator=None) is x and x.dtype == tt.float64
    assert abs(x.numpy().mean() - 1.0) < 5 * 2.0 / np.sqrt(x.numel())
    np.testing.assert_allclose(x.numpy().std(), 2.0, rtol=0.03)
    tt.manual_seed(5)
    np.testing.assert_array_equal(tt.normal(1.0, 2.0, size=(50_000,), dtype=tt.float64).numpy(),
                                  x.numpy())


def test_normal_makes_its_samples_on_the_device_asked_for(device):
    assert tt.normal(0.0, 1.0, (2,), device=device).device == device
    mean = tt.zeros(3, device=device)
    out = tt.normal(mean, tt.ones(3, device=device))
    assert out.device == device and out.shape == (3,)


# ------------------------------------------------------------------ tt.mv


def test_mv_matches_pytorch_with_gradients():
    a, v = X[:, :3], Y[0, :3].copy()
    compare(lambda L, a, v: (L.mv(a, v), a.mv(v), a.mv(vec=v), L.mv(input=a, vec=v)), a, v)
    compare(lambda L, a, v: L.mv(a, v), a.astype(np.float64), v.astype(np.float64))
    compare(lambda L, a, v: L.mv(a, v), np.ones((2, 0), np.float32), np.ones(0, np.float32))
    compare(lambda L, a, v: a.mv(v), np.arange(6).reshape(2, 3), np.array([1, -2, 3]))


@pytest.mark.parametrize(("expr", "error"), [
    ("L.mv(L.ones(2, 3), L.ones(4))", RuntimeError), ("L.mv(L.ones(3), L.ones(3))", RuntimeError),
    ("L.mv(L.ones(2, 3), L.ones(3, 1))", RuntimeError),
    ("L.mv(L.ones(2, 3), L.ones(3, dtype=L.float64))", RuntimeError),
    ("L.ones(2, 3).mv([1.0, 2.0, 3.0])", TypeError),
])
def test_mv_errors_have_pytorch_types(expr, error):
    for L in (torch, tt):
        with pytest.raises(error):
            eval(expr, {"L": L})


# ------------------------------------------------------------------ grad_fn.name()


def test_grad_fn_name_is_callable_as_pytorch_and_still_a_string():
    for op in ("sum", "mean", "exp", "sigmoid", "tanh", "abs"):
        ours, theirs = (getattr(L.ones(2, requires_grad=True), op)().grad_fn for L in (tt, torch))
        # PyTorch's names end in a version number ("SumBackward0"); tinytrain's do not
        assert ours.name() == theirs.name().removesuffix("0") == f"{op.capitalize()}Backward"
        assert type(ours.name()) is str
    node = (tt.ones(2, requires_grad=True) * 2).grad_fn
    # print(z.grad_fn) shows PyTorch's form, "<MulBackward0 object at 0x7f...>", less the digit
    assert node.name == "MulBackward" and repr(node) == f"<MulBackward object at {id(node):#x}>"
    theirs = (torch.ones(2, requires_grad=True) * 2).grad_fn
    assert re.fullmatch(r"<MulBackward0 object at 0x[\da-f]+>", repr(theirs))
    assert f"{node.name}" == "MulBackward" and node.name().lower() == "mulbackward"
    assert repr(node.next_functions[0]).startswith("<AccumulateGrad object at 0x")
    assert node.next_functions[0].name() == node.next_functions[0].name == "AccumulateGrad"
    assert repr(tt.ones(2, requires_grad=True) * 2).endswith("grad_fn=<MulBackward>)")
