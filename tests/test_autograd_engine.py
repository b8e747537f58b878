"""The backward engine, grad modes, hooks, Function/ctx, and the error messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain.autograd import Function


def leaf(values, device="cpu", dtype=np.float32):
    return tt.tensor(np.asarray(values, dtype=dtype), device=device, requires_grad=True)


X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)


# ------------------------------------------------------------------ graph shapes


def test_node_used_twice_in_one_op(device):
    x = leaf(X, device)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * X, rtol=1e-6)


def test_same_tensor_added_to_itself(device):
    a = leaf(X, device)
    (a + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full_like(X, 2.0))


def test_diamond_matches_torch(device):
    def f(x, lib):
        s = x * 3.0 - 1.0                     # shared subexpression
        left = s.exp() if lib is tt else torch.exp(s)
        right = s.sigmoid()
        return (left * right + s * s).sum()   # s feeds three paths

    x = leaf(X, device)
    t = torch.tensor(X, requires_grad=True)
    y, ref = f(x, tt), f(t, torch)
    np.testing.assert_allclose(y.numpy(), ref.detach().numpy(), rtol=1e-5)
    y.backward()
    ref.backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5)


def test_diamond_node_runs_once():
    calls = []

    class Record(Function):
        @staticmethod
        def forward(a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(g.copy())
            return g * 2

    x = leaf([1.0, 2.0])
    s = Record.apply(x)
    (s * 3.0 + s * 4.0).sum().backward()
    assert len(calls) == 1  # both branches' gradients arrived summed, in one call
    np.testing.assert_array_equal(calls[0], [7.0, 7.0])
    np.testing.assert_array_equal(x.grad.numpy(), [14.0, 14.0])


def test_grads_accumulate_over_two_backward_calls(device):
    x = leaf(X, device)
    (x * x).sum().backward()
    first = x.grad
    (x * 3.0).sum().backward()
    assert x.grad is first  # accumulated in place into the same tensor
    np.testing.assert_allclose(x.grad.numpy(), 2 * X + 3.0, rtol=1e-6)


def test_grad_bound_to_a_view_stays_bound():
    """DDP binds .grad to a view of a bucket; accumulation must write through it."""
    bucket = np.zeros(8, dtype=np.float32)
    x = leaf([1.0, 2.0, 3.0])
    x.grad = tt.Tensor(bucket[2:5])
    (x * x).sum().backward()
    np.testing.assert_array_equal(bucket, [0, 0, 2, 4, 6, 0, 0, 0])


def test_branch_without_grad_is_not_recorded():
    x = leaf([1.0, 2.0])
    c = tt.tensor([3.0, 4.0])
    y = c * 2.0
    assert y.grad_fn is None and not y.requires_grad
    z = (x * y).sum()
    z.backward()
    assert c.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 8.0])


def test_backward_on_leaf_with_gradient():
    x = leaf([1.0, 2.0])
    x.backward(tt.tensor([3.0, 4.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])


def test_function_returning_none_stops_gradient_in_deep_graph():
    """A Function may return None for an input that needs grad: nothing flows below it,
    however deep the graph below is."""

    class Stop(Function):
        @staticmethod
        def forward(a):
            return a.copy()

        @staticmethod
        def backward(ctx, g):
            return None

    x = leaf([1.0, 2.0])
    h = x
    for _ in range(3000):
        h = h * 1.0
    w = leaf([5.0, 6.0])
    (Stop.apply(h) * w).sum().backward()
    assert x.grad is None
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])


def test_deep_chain_backward():
    x = leaf([1.0, -2.0])
    h = x
    for _ in range(5000):
        h = h + 1.0
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


# ----------------------------------------------------------- post-accumulate hooks


def test_post_accumulate_hook_fires_once_per_accumulation_after_grad_is_in_place(device):
    x = leaf(X, device)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append((t is x, t.grad.numpy().copy())))
    y = x * x + x  # x reaches its AccumulateGrad through three paths: still one accumulation
    y.sum().backward()
    assert len(seen) == 1
    assert seen[0][0]
    np.testing.assert_allclose(seen[0][1], 2 * X + 1, rtol=1e-6)
    (x * 2.0).sum().backward()
    assert len(seen) == 2
    np.testing.assert_allclose(seen[1][1], 2 * X + 3, rtol=1e-6)  # sees the accumulated sum


def test_post_accumulate_hooks_order_and_removal():
    x = leaf([1.0])
    calls = []
    h1 = x.register_post_accumulate_grad_hook(lambda t: calls.append("first"))
    x.register_post_accumulate_grad_hook(lambda t: calls.append("second"))
    (x * 2.0).sum().backward()
    assert calls == ["first", "second"]
    h1.remove()
    h1.remove()  # removing twice is harmless
    (x * 2.0).sum().backward()
    assert calls == ["first", "second", "second"]


def test_post_accumulate_hook_matches_torch_count():
    counts = {"tt": 0, "torch": 0}
    x = leaf([1.0, 2.0])
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda _: counts.__setitem__("tt", counts["tt"] + 1))
    t.register_post_accumulate_grad_hook(
        lambda _: counts.__setitem__("torch", counts["torch"] + 1))
    for lib_x in (x, t):
        for _ in range(2):
            ((lib_x * lib_x) + lib_x).sum().backward()
    assert counts["tt"] == counts["torch"] == 2


def test_post_accumulate_hook_only_on_leaves():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="leaves"):
        (x * 2.0).register_post_accumulate_grad_hook(lambda t: None)


# ---------------------------------------------------------------------- grad mode


def test_no_grad_builds_no_graph(device):
    x = leaf(X, device)
    with tt.no_grad():
        assert not tt.is_grad_enabled()
        y = (x * 2.0).exp().sum()
    assert tt.is_grad_enabled()
    assert y.grad_fn is None and not y.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_enable_grad_inside_no_grad(device):
    x = leaf(X, device)
    with tt.no_grad():
        with tt.enable_grad():
            y = x * 2.0
        z = x * 2.0
        assert not tt.is_grad_enabled()
    assert y.grad_fn is not None and y.requires_grad
    assert z.grad_fn is None


def test_no_grad_as_decorator_and_restores_on_exception():
    x = leaf([1.0])

    @tt.no_grad()
    def f(t):
        return t * 2.0

    @tt.no_grad()
    def boom():
        raise KeyError("x")

    y = f(x)
    assert y.grad_fn is None and not y.requires_grad
    assert tt.is_grad_enabled()
    with pytest.raises(KeyError):
        boom()
    assert tt.is_grad_enabled()

    @tt.enable_grad()
    def g(t):
        return t * 2.0

    with tt.no_grad():
        assert g(x).grad_fn is not None


def test_a_ctrl_c_just_after_no_grad_switched_the_mode_leaves_it_restored(monkeypatch):
    """Python may raise KeyboardInterrupt just after a call returns: if that call was the
    switch in ``no_grad().__enter__``, the with-block never starts and its ``__exit__``
    never runs; graph recording stayed off for the rest of the program."""
    from tinytrain.autograd import grad_mode

    real = grad_mode._set_enabled
    calls = []

    def switch_then_interrupt(mode):
        real(mode)
        calls.append(mode)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(grad_mode, "_set_enabled", switch_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        with tt.no_grad():
            pass  # pragma: no cover - not reached
    assert tt.is_grad_enabled() and calls == [False, True]


def test_set_grad_enabled():
    x = leaf([1.0])
    try:
        tt.set_grad_enabled(False)
        assert (x * 2.0).grad_fn is None
    finally:
        tt.set_grad_enabled(True)
    assert (x * 2.0).grad_fn is not None


# ------------------------------------------------------------------- retain_graph


SECOND_BACKWARD = {  # expression of x [2, 3] and w [3, 2]; does PyTorch free something?
    "mul": lambda L, x, w: (x * x).sum(), "matmul": lambda L, x, w: (x @ w).sum(),
    "exp": lambda L, x, w: x.exp().mean(), "relu of a view": lambda L, x, w: x[:, 1:].relu().sum(),
    "add_sum": lambda L, x, w: (x + x).sum(), "mean of a view": lambda L, x, w: x.T[1:].mean(),
    "reshape, permute, expand": lambda L, x, w: x.reshape(3, 2).permute(1, 0)[:, :1]
    .expand(2, 5).sum(),
    "cat, neg, sub": lambda L, x, w: (L.cat([-x, x - 1.0]) - 2.0).sum(),
}


@pytest.mark.parametrize("expr", list(SECOND_BACKWARD))
def test_a_second_backward_without_retain_graph_as_pytorch(device, expr):
    """A second backward without retain_graph raises where a node needs an array it freed
    (a product, an exp), and runs as in PyTorch where the graph kept only shapes and
    numbers (a sum, a view, an add): the gradients accumulate to twice the first."""
    make = SECOND_BACKWARD[expr]
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (X, X.T))
    ty = make(torch, tx, tw)
    ty.backward()
    try:
        ty.backward()
        torch_raised = False
    except RuntimeError:
        torch_raised = True
    x, w = leaf(X, device), leaf(X.T, device)
    y = make(tt, x, w)
    y.backward()
    if torch_raised:
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
    else:
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    assert torch_raised == (expr in ("mul", "matmul", "exp", "relu of a view"))


def test_backward_twice_with_retain_graph_doubles_grads(device):
    x = leaf(X, device)
    y = (x * x).exp().mean()
    y.backward(retain_graph=True)
    once = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * once, rtol=1e-6)
    t = torch.tensor(X, requires_grad=True)
    (t * t).exp().mean().backward()
    np.testing.assert_allclose(once, t.grad.numpy(), rtol=1e-5)


# ----------------------------------------------------------------- Function, ctx


class RecordingMul(Function):
    """``a * b`` that records which gradients backward was asked for and computed."""

    log: list = []

    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        RecordingMul.log.append((need_a, need_b))
        return (g * b if need_a else None), (g * a if need_b else None)


@pytest.mark.parametrize("a_grad,b_grad", [(True, False), (False, True), (True, True)])
def test_needs_input_grad(a_grad, b_grad):
    RecordingMul.log = []
    a = tt.tensor([2.0, 3.0], requires_grad=a_grad)
    b = tt.tensor([5.0, 7.0], requires_grad=b_grad)
    RecordingMul.apply(a, b).sum().backward()
    assert RecordingMul.log == [(a_grad, b_grad)]
    assert (a.grad is not None) == a_grad and (b.grad is not None) == b_grad
    if a_grad:
        np.testing.assert_array_equal(a.grad.numpy(), [5.0, 7.0])
    if b_grad:
        np.testing.assert_array_equal(b.grad.numpy(), [2.0, 3.0])


def test_needs_input_grad_is_false_for_non_tensor_inputs():
    seen = []

    class Scale(Function):
        @staticmethod
        def forward(a, k):
            return a * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(ctx.needs_input_grad)
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = leaf([1.0, 2.0])
    Scale.apply(x, 3.0).sum().backward()
    assert seen == [(True, False)]
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_wrong_number_of_gradients_is_reported():
    class Bad(Function):
        @staticmethod
        def forward(a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match=r"function BadBackward returned an incorrect "
                                           r"number of gradients \(expected 2, got 1\)"):
        Bad.apply(leaf([1.0]), leaf([2.0])).sum().backward()  # (PyTorch's words)


def test_mul_saves_only_what_is_needed():
    a, b = leaf([1.0, 2.0]), tt.tensor([3.0, 4.0])
    saved = (a * b).grad_fn.ctx.saved_tensors  # d/da needs b; d/db is not needed: a not kept
    np.testing.assert_array_equal(saved[0], [3.0, 4.0])
    assert saved[1] is None
    saved = (b * a).grad_fn.ctx.saved_tensors
    assert saved[0] is None
    np.testing.assert_array_equal(saved[1], [3.0, 4.0])
    saved = (a * leaf([5.0, 6.0])).grad_fn.ctx.saved_tensors
    assert all(s is not None for s in saved)


def test_matmul_and_linear_save_selectively():
    from tinytrain.nn import functional as F

    x, w = tt.tensor(X), leaf(X)
    saved = (x @ w.T).grad_fn.ctx.saved_tensors
    assert saved[0] is None and saved[1] is not None  # only x, for dw
    saved = F.linear(x, w).grad_fn.ctx.saved_tensors
    assert saved[0] is None and saved[1] is not None
    saved = F.linear(leaf(X), tt.tensor(X)).grad_fn.ctx.saved_tensors
    assert saved[0] is not None and saved[1] is None


def test_saved_arrays_are_freed_after_backward():
    x = leaf([1.0, 2.0])
    y = x * x
    node = y.grad_fn
    y.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        node.ctx.saved_tensors  # noqa: B018


# ------------------------------------------------------------ detach, requires_grad_


def test_detach_shares_memory_and_cuts_graph():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert d.grad_fn is None and not d.requires_grad
    d.data[0] = 10.0  # (d.data: a third tensor on the same memory)
    assert x.numpy()[0] == 10.0  # shares memory, like torch
    y = (x * x.detach()).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [10.0, 2.0])  # not 2x: one path is cut


def test_requires_grad_flag_and_grad_fn_name():
    x = leaf([1.0])
    y = x * 2.0
    assert x.is_leaf and not y.is_leaf
    assert y.requires_grad and y.grad_fn.name == "MulBackward"


def test_requires_grad_false_on_non_leaf_raises():
    y = leaf([1.0]) * 2.0
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


def test_requires_grad_on_int_tensor_raises():
    with pytest.raises(TypeError, match="int64"):
        tt.tensor([1, 2]).requires_grad_()
    with pytest.raises(TypeError, match="floating"):
        tt.tensor([1, 2], requires_grad=True)


def test_requires_grad_false_on_leaf_stops_recording():
    x = leaf([1.0])
    x.requires_grad_(False)
    assert (x * 2.0).grad_fn is None


# ------------------------------------------------------------------------ errors


def test_backward_non_scalar_without_gradient_names_shape():
    y = leaf(X) * 2.0
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\)"):
        y.backward()


def test_backward_gradient_of_wrong_shape_names_both():
    y = leaf(X) * 2.0
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        y.backward(tt.zeros(3, 2))


def test_matrix_products_refuse_mixed_dtypes_naming_both():
    # element-wise ops promote (tests/test_dtypes.py); matrix products raise, as PyTorch's do
    a = tt.tensor(np.ones((2, 3), np.float32))
    b = tt.tensor(np.ones((3, 2), np.float64))
    x4 = tt.tensor(np.ones((1, 1, 4, 4), np.float64))
    w4 = tt.tensor(np.ones((1, 1, 3, 3), np.float32))
    for op in (lambda: a @ b, lambda: F.linear(a, b.T), lambda: F.conv2d(x4, w4),
               lambda: F.conv2d(w4, w4, tt.zeros(1, dtype=tt.float64))):
        with pytest.raises(RuntimeError) as info:
            op()
        assert "float32" in str(info.value) and "float64" in str(info.value)
        assert isinstance(info.value, TypeError)  # also a TypeError, as before


@pytest.mark.parametrize("sa,sb", [((2, 3), (4,)), ((2, 3), (3, 2)), ((5, 1, 4), (2, 3, 1, 5))])
def test_broadcast_shape_error_names_both_shapes(sa, sb):
    a, b = tt.zeros(*sa), tt.zeros(*sb)
    with pytest.raises(ValueError) as info:
        a + b
    msg = str(info.value)
    assert str(sa) in msg and str(sb) in msg
    with np.testing.assert_raises(ValueError):  # and numpy agrees it cannot broadcast
        np.broadcast_shapes(sa, sb)


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)),
                                   ((2, 4, 3), (5, 3, 2))])
def test_matmul_shape_error_names_both_shapes(sa, sb):
    with pytest.raises(ValueError) as info:
        tt.zeros(*sa) @ tt.zeros(*sb)
    msg = str(info.value)
    assert str(sa) in msg and str(sb) in msg


def test_matmul_0d_operand_raises():
    with pytest.raises(ValueError, match="at least 1 dimension"):
        tt.tensor(2.0) @ tt.zeros(3)


@pytest.mark.cuda
@pytest.mark.skipif(not tt.cuda_is_available(), reason="needs CuPy and an NVIDIA GPU")
def test_mixing_devices_names_both():
    a, b = tt.zeros(3), tt.zeros(3, device="cuda")
    with pytest.raises(RuntimeError) as info:
        a + b
    assert "cpu" in str(info.value) and "cuda" in str(info.value)


def test_to_device_and_dtype_is_differentiable(device):
    x = leaf(X, device)
    y = x.to(device).double()
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.device == device
    np.testing.assert_allclose(x.grad.numpy(), 2 * X, rtol=1e-6)


# --------------------------------------------------------------------------- gradient ownership


def test_a_kernels_new_gradient_becomes_grad_without_a_copy(monkeypatch):
    """Linear's backward returns arrays its kernel allocated (``new_grads``): the leaves keep
    them as ``.grad`` (a copy per parameter and step saved), and later backwards still add
    into them in place."""
    from tinytrain.kernels import cpu

    made = {}
    original = cpu.linear_backward

    def recording(grad, x, w, needs):
        out = original(grad, x, w, needs)
        made["dw"], made["db"] = out[1], out[2]
        return out

    monkeypatch.setattr(cpu, "linear_backward", recording)
    layer = tt.nn.Linear(3, 2)
    x = tt.randn(4, 3)
    layer(x).sum().backward()
    assert layer.weight.grad._data is made["dw"] and layer.bias.grad._data is made["db"]
    first = layer.weight.grad.numpy().copy()
    layer(x).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), 2 * first, rtol=1e-6)
    assert layer.weight.grad._data is not made["dw"]  # the second one was added, not kept


def test_a_gradient_reaching_two_leaves_is_never_shared_between_them():
    """Add passes one array to both inputs (no ``new_grads``): each leaf gets its own copy, so
    accumulating into one cannot change the other. Likewise a user's gradient, and a view."""
    a, b = tt.randn(3, requires_grad=True), tt.randn(3, requires_grad=True)
    (a + b).backward(tt.ones(3))
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    (a * 2).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3, 3, 3])
    np.testing.assert_array_equal(b.grad.numpy(), [1, 1, 1])
    g = tt.ones(3)
    c = tt.randn(3, requires_grad=True)
    c.backward(g)
    g.data[...] = 7
    np.testing.assert_array_equal(c.grad.numpy(), [1, 1, 1])
    d = tt.randn(2, 3, requires_grad=True)
    w = tt.nn.Linear(3, 3)
    (w(d.reshape(6)[None].reshape(2, 3)).sum() + d.sum()).backward()
    assert d.grad.numpy().flags.c_contiguous and d.grad.shape == (2, 3)


def test_a_leaf_used_by_two_layers_gets_the_sum_as_its_own_array():
    """The engine's sum of two kernel gradients is a new array too: kept, and correct."""
    torch_w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    w = tt.tensor(torch_w.detach().numpy(), requires_grad=True)
    x = np.random.default_rng(0).standard_normal((4, 3))
    F.linear(F.linear(tt.tensor(x), w).relu(), w).sum().backward()
    tx = torch.tensor(x)
    torch.nn.functional.linear(torch.nn.functional.linear(tx, torch_w).relu(),
                               torch_w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), torch_w.grad.numpy(), rtol=1e-12)


# ------------------------------------------------- PyTorch's ctx-style Functions


def legendre(lib):
    """The custom Function of PyTorch's "Learning PyTorch with Examples", for ``lib``."""

    class LegendrePolynomial3(lib.autograd.Function):
        @staticmethod
        def forward(ctx, input):  # noqa: A002
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors  # noqa: A001
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    return LegendrePolynomial3


def test_ctx_style_function_matches_torch(device):
    x, t = leaf(X, device), torch.tensor(X, requires_grad=True)
    p3, tp3 = legendre(tt).apply, legendre(torch).apply
    y, ty = p3(x * 0.5 + p3(x)), tp3(t * 0.5 + tp3(t))  # two nodes, the inner used twice
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5)
    assert y.grad_fn.name == "LegendrePolynomial3Backward" and y.requires_grad
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5)


def test_ctx_style_sees_tensors_and_needs_input_grad():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen["forward"] = (type(a), type(b), k, tt.is_grad_enabled())
            ctx.k = k
            ctx.save_for_backward(a, b)
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen["backward"] = (type(g), ctx.needs_input_grad, tt.is_grad_enabled())
            return g * b * ctx.k, None, None  # b needs none: None is allowed

    a, b = leaf([1.0, 2.0]), tt.tensor([3.0, 4.0])
    Scale.apply(a, b, 2.0).sum().backward()
    assert seen == {"forward": (tt.Tensor, tt.Tensor, 2.0, False),
                    "backward": (tt.Tensor, (True, False, False), False)}
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 8.0])
    assert b.grad is None
    with tt.no_grad():
        assert Scale.apply(a, b, 1.0).grad_fn is None


def test_ctx_style_checks_saved_tensors_and_frees_them():
    x = leaf([0.5, 1.0])
    h = x * 1.0
    y = legendre(tt).apply(h)
    h.add_(1.0)  # changes what forward saved
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    y = legendre(tt).apply(x * 1.0)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_ctx_style_forward_may_return_its_input():
    class Identity(Function):
        @staticmethod
        def forward(ctx, a):
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = leaf([1.0, 2.0])
    h = x * 1.0
    y = Identity.apply(h)
    assert y is not h and h.grad_fn.name == "MulBackward"  # h's own node is untouched
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_a_function_uses_one_style():
    with pytest.raises(TypeError, match="use one style"):
        class Both(Function):  # noqa: F841
            @staticmethod
            def forward(ctx, a):
                return a

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

    class Pair(Function):
        @staticmethod
        def forward(ctx, a):
            return a, a

    with pytest.raises(TypeError, match="return one Tensor"):
        Pair.apply(leaf([1.0]))
    from tinytrain.autograd import ops  # tinytrain's own ops keep the array style

    assert not any(op._ctx_style for op in vars(ops).values()
                   if isinstance(op, type) and issubclass(op, Function))


def test_a_setup_context_forward_returning_several_outputs_raises():
    """PyTorch's docs' MyCube returns (x ** 3, 3 * x ** 2); tinytrain's array-style forward
    returns one array: a tuple was silently stacked into one (2, N) array."""
    def my_cube(lib):
        class MyCube(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x ** 3, 3 * x ** 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0], output[1])

            @staticmethod
            def backward(ctx, grad_output, grad_dx):
                x, dx = ctx.saved_tensors
                return grad_output * dx + grad_dx * 6 * x

        return MyCube

    t = torch.tensor([0.5, 1.0], requires_grad=True)
    my_cube(torch).apply(t)[0].sum().backward()  # two Tensors in PyTorch
    assert t.grad.tolist() == [0.75, 3.0]
    with pytest.raises(TypeError, match=r"MyCube.forward returned a tuple of 2 outputs; "
                                        r"tinytrain's Functions return one array: Functions "
                                        r"with several outputs are not supported"):
        my_cube(tt).apply(leaf([0.5, 1.0]))


def _linear_function(lib, tensor_methods_in):
    """PyTorch's docs' LinearFunction in the setup_context style; ``tensor_methods_in``
    ("forward", "backward" or None) uses Tensor methods (``mm``, ``t``), the others ``@``."""

    class LinearFunction(lib.autograd.Function):
        @staticmethod
        def forward(input, weight):  # noqa: A002
            if tensor_methods_in == "forward":
                return input.mm(weight.t())
            return input @ weight.T

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors  # noqa: A001
            if tensor_methods_in == "backward":
                return grad_output.mm(weight), grad_output.t().mm(input)
            return grad_output @ weight, grad_output.T @ input

    return LinearFunction


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_tensor_methods_in_a_setup_context_function_explain_the_array_style(where):
    """PyTorch's current docs write setup_context-style Functions on Tensors; tinytrain's
    run on raw arrays (by design): the AttributeError says so and what to write instead."""
    x, w = np.ones((2, 3)), np.full((4, 3), 2.0)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    _linear_function(torch, where).apply(tx, tw).sum().backward()  # fine on Tensors
    a, b = tt.tensor(x, requires_grad=True), tt.tensor(w, requires_grad=True)
    with pytest.raises(AttributeError, match=rf"no attribute 'mm'\. In tinytrain, a Function "
                                             rf"with setup_context .* runs {where} on raw "
                                             rf"NumPy/CuPy arrays.*forward\(ctx, \*inputs\)"):
        _linear_function(tt, where).apply(a, b).sum().backward()
    a.grad = b.grad = None
    _linear_function(tt, None).apply(a, b).sum().backward()  # with `@` throughout: torch's
    np.testing.assert_array_equal(b.grad.numpy(), tw.grad.numpy())


def _mul_inplace(lib, mark=True):
    """``x.mul_(k)`` as a ctx-style Function, marking x dirty (or not)."""

    class MulInplace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            x.mul_(k)
            if mark:
                ctx.mark_dirty(x)
            ctx.k = k
            return x

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    return MulInplace


def test_mark_dirty_moves_the_input_history_onto_the_node_like_torch():
    results = []
    for lib in (tt, torch):
        mul_inplace, w = _mul_inplace(lib).apply, lib.tensor([1.0, 10.0, 100.0, 1000.0])
        leaf_ = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        a = leaf_ * 1.0
        version = a._version
        out = mul_inplace(a, 3.0)
        got = [out is a, a._version - version, a.grad_fn.name(), a.tolist()]
        (a * w).sum().backward()  # through the input itself: its history was moved
        got.append(leaf_.grad.tolist())
        leaf_.grad = None
        a = leaf_ * 1.0
        mul_inplace(a[1:3], 5.0)  # a slice: its base records the write
        (a * w).sum().backward()
        got += [a.tolist(), leaf_.grad.tolist()]
        b = lib.tensor([1.0, 2.0])  # nothing requires grad: written, returned, no graph
        got += [mul_inplace(b, 2.0) is b, b.requires_grad, b.tolist()]

        class SquareInplace(lib.autograd.Function):  # saves the dirty input: its new value
            @staticmethod
            def forward(ctx, x):
                x.mul_(x)
                ctx.mark_dirty(x)
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, g):
                (squared,) = ctx.saved_tensors
                return 2 * squared.sqrt() * g

        a = leaf_ * 1.0
        SquareInplace.apply(a)
        leaf_.grad = None
        (a * w).sum().backward()
        got.append(leaf_.grad.tolist())
        results.append(got)
    assert results[0] == results[1]
    assert results[0][-1] == [2.0, 40.0, 600.0, 8000.0]
    assert results[0][4] == [3.0, 30.0, 300.0, 3000.0]


def test_mark_dirty_errors_like_torch():
    for lib in (tt, torch):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been "
                                               "used in an in-place operation"):
            _mul_inplace(lib).apply(lib.tensor([1.0], requires_grad=True), 2.0)

        class NotReturned(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2.0)
                ctx.mark_dirty(x)
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(RuntimeError, match="Some elements marked as dirty during the "
                                               "forward method were not returned as output"):
            NotReturned.apply(lib.tensor([1.0], requires_grad=True) * 1.0)


def test_an_input_modified_without_mark_dirty_raises_where_torch_is_silently_wrong():
    grads = []
    for lib in (tt, torch):
        leaf_ = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        a = leaf_ * 1.0
        try:
            _mul_inplace(lib, mark=False).apply(a, 3.0)
        except RuntimeError as error:
            grads.append(str(error))
            continue
        (a * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
        grads.append(leaf_.grad.tolist())
    assert grads[1] == [1.0, 10.0, 100.0]  # PyTorch: wrong, a is 3 * leaf
    assert "MulInplace.forward modified input 0" in grads[0] and "ctx.mark_dirty" in grads[0]
    counter = tt.zeros(1)  # an input that requires no grad (a buffer) may change

    class CountCalls(Function):
        @staticmethod
        def forward(ctx, x, calls):
            calls.add_(1)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    x = leaf([1.0])
    CountCalls.apply(x, counter).sum().backward()
    assert counter.tolist() == [1.0] and x.grad.tolist() == [2.0]


@pytest.mark.parametrize("style", ["ctx", "setup_context"])
def test_apply_takes_keyword_arguments_like_torch(style):
    def scaled_product(lib):
        if style == "ctx":
            class ScaledProduct(lib.autograd.Function):
                @staticmethod
                def forward(ctx, x, w=None, scale=2.0):
                    ctx.save_for_backward(x, w)
                    ctx.scale = scale
                    seen.append(ctx.needs_input_grad)
                    return x * w * scale

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return g * w * ctx.scale, g * x * ctx.scale, None
        else:
            class ScaledProduct(lib.autograd.Function):
                @staticmethod
                def forward(x, w=None, scale=2.0):
                    return x * w * scale

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, w, scale = inputs  # all three, defaults filled in (as PyTorch)
                    ctx.save_for_backward(x, w)
                    ctx.scale = scale
                    seen.append(ctx.needs_input_grad)

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return g * w * ctx.scale, g * x * ctx.scale, None
        return ScaledProduct

    results, seen = [], []
    for lib in (tt, torch):
        fn = scaled_product(lib)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)  # by keyword: tracked, as in torch
        y = fn.apply(x, w=w, scale=5.0)
        y.sum().backward()
        results.append((y.tolist(), x.grad.tolist(), w.grad.tolist()))
        if style == "setup_context":
            results.append(fn.apply(x, w).tolist())  # scale's default: 3 inputs, as torch
    assert results[:len(results) // 2] == results[len(results) // 2:]
    assert results[0] == ([15.0, 40.0], [15.0, 20.0], [5.0, 10.0])
    assert [tuple(s) for s in seen] == [(True, True, False)] * len(seen)
    with pytest.raises(TypeError, match="ScaledProduct.apply: got an unexpected keyword "
                                        "argument 'sc'"):
        scaled_product(tt).apply(leaf([1.0]), sc=3.0)


def test_a_gradient_for_a_non_tensor_input_and_saving_a_number_raise_like_torch():
    for lib in (tt, torch):
        class GradForNumber(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g * 2, g * 0  # (a Tensor: not None)

        with pytest.raises(RuntimeError, match="function GradForNumberBackward returned a "
                                               "gradient different than None at position 2, "
                                               "but the corresponding forward input was not a "
                                               "Variable"):
            GradForNumber.apply(lib.tensor([1.0, 2.0], requires_grad=True), 2).sum().backward()

        class SaveNumber(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, None, 3)
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(TypeError, match="save_for_backward can only save variables, but "
                                            "argument 2 is of type int"):
            SaveNumber.apply(lib.tensor([1.0], requires_grad=True))


def test_grad_mode_decorators_cover_generators_and_the_bare_form_like_torch():
    @tt.no_grad()
    def steps():
        for _ in range(2):
            yield tt.is_grad_enabled()

    assert list(steps()) == [False, False]  # the body runs at next(), in the mode

    @tt.no_grad
    def bare(x):
        return (x * 2).requires_grad

    @tt.inference_mode
    def inferred(x):
        return x * 2

    x = tt.ones(2, requires_grad=True)
    assert bare(x) is False and inferred(x).requires_grad is False
    assert tt.is_grad_enabled()

    def echo():
        got = yield 1
        yield got * 10

    gen = tt.no_grad()(echo)()
    assert next(gen) == 1 and gen.send(3) == 30
    with pytest.raises(TypeError, match="mode must be True or False"):
        tt.set_grad_enabled("no")
    assert tt.is_grad_enabled()
    with pytest.raises(TypeError, match="True or False"):
        x.requires_grad_("False")
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tt.zeros(2).register_post_accumulate_grad_hook(lambda t: None)


def test_random_functions_take_pytorchs_forms_and_refuse_bad_arguments():
    tt.manual_seed(0)
    a = tt.randint(2, (5,))  # randint(high, size)
    assert a.shape == (5,) and set(a.tolist()) <= {0, 1}
    assert tt.randint(0, 5, (3,), dtype=tt.float32).dtype == tt.float32
    for seed in (-1, tt.tensor(3), 1.5):
        tt.manual_seed(seed)
    tt.manual_seed(7)
    first = tt.randn(3).tolist()
    tt.manual_seed(7)
    assert tt.randn(3).tolist() == first
    for call, error in ((lambda: tt.randint(5, 5), "less than"), (lambda: tt.randint(0, 2.5),
                        "integer"), (lambda: tt.randperm(-1), "non-negative"),
                        (lambda: tt.randint(0, 300, (2,), dtype=tt.uint8), "does not fit")):
        with pytest.raises((ValueError, TypeError), match=error):
            call()


def test_requires_grad_is_checked_when_set_like_torch():
    x = tt.ones(2, requires_grad=True)
    y = x * 2
    for value in (False, True):
        with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
            y.requires_grad = value  # False would silently cut the graph
    assert y.requires_grad and y.grad_fn is not None
    with pytest.raises(TypeError, match="floating point"):
        tt.zeros(2, dtype=tt.int64).requires_grad = True
    with pytest.raises(TypeError, match="True or False"):
        tt.zeros(2).requires_grad = "yes"
    leaf = tt.zeros(2)
    leaf.requires_grad = True
    (leaf * 3).sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0]


# ------------------------------------------------------------------ fifth review round


def test_a_leaf_is_freed_by_reference_counting_after_its_graph_like_torch():
    """The leaf's node holds the leaf and the leaf held its node: a cycle only the garbage
    collector freed, so a new input with requires_grad each step piled up."""
    import gc
    import weakref

    gc.disable()
    try:
        w = tt.ones(4, 3, requires_grad=True)
        refs = []
        for _ in range(5):
            x = tt.ones(2, 4, requires_grad=True)
            (x @ w).sum().backward()
            refs.append(weakref.ref(x))
            assert x.grad is not None
        del x
        assert sum(r() is not None for r in refs) == 0
        np.testing.assert_array_equal(w.grad.numpy(), np.full((4, 3), 10.0))  # 5 steps of 2
    finally:
        gc.enable()


def test_a_hook_during_backward_runs_without_grad_and_can_step_in_place_like_torch():
    seen = []
    for lib in (tt, torch):
        p = lib.tensor([1.0, 2.0], requires_grad=True)

        def hook(t, lib=lib):
            seen.append(lib.is_grad_enabled())
            t.sub_(0.1 * t.grad)  # an optimizer step in the hook

        p.register_post_accumulate_grad_hook(hook)
        (p * p).sum().backward()
        np.testing.assert_allclose(p.detach().numpy(), [0.8, 1.6], rtol=1e-6)
    assert seen == [False, False]


def test_callbacks_of_two_threads_backward_passes_stay_in_their_thread():
    import threading

    from tinytrain.autograd import queue_callback

    ran, barrier = {}, threading.Barrier(2)

    def run(name):
        p = tt.ones(2, requires_grad=True)

        def hook(t):
            queue_callback(lambda: ran.setdefault(name, threading.current_thread().name))
            barrier.wait(timeout=10)  # both backward passes are running now

        p.register_post_accumulate_grad_hook(hook)
        (p * 2).sum().backward()

    threads = [threading.Thread(target=run, args=(n,), name=n) for n in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert ran == {"A": "A", "B": "B"}


def test_requires_grad_false_after_the_forward_leaves_grad_unset_like_torch():
    for lib in (tt, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        x.requires_grad_(False)
        y.sum().backward()
        assert x.grad is None


def test_surplus_none_gradients_and_requires_grad_on_a_computed_tensor_like_torch():
    class Twice(Function):
        @staticmethod
        def forward(ctx, x, scale):
            return x * scale

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None  # one None more than inputs: PyTorch ignores it

    x = tt.ones(3, requires_grad=True)
    y = Twice.apply(x, 2.0)
    assert y.requires_grad_(True) is y  # a computed tensor: nothing to change
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="can only change leaf tensors"):
        y.requires_grad_(False)


def test_a_hook_handle_is_a_context_manager_like_torch():
    p, calls = tt.ones(2, requires_grad=True), []
    with p.register_post_accumulate_grad_hook(lambda t: calls.append(1)):
        (p * 1).sum().backward()
    (p * 1).sum().backward()
    assert calls == [1]


def test_writing_with_grad_through_a_no_grad_view_of_a_graph_is_refused_like_torch():
    for lib in (tt, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 1
        with lib.no_grad():
            v = h[0:1]
        with pytest.raises(RuntimeError, match="(?i)view was created in no_grad mode"):
            v.mul_(2)  # its value needs no grad, but h's graph would miss the write


def test_a_deep_copy_or_pickle_of_a_model_with_a_live_graph_is_its_own_like_torch():
    import copy
    import pickle

    from tinytrain import nn

    model = nn.Linear(2, 1)
    loss = model(tt.ones(1, 2)).sum()  # (kept: its graph holds the leaves' nodes)
    loss.backward()
    model.zero_grad(set_to_none=True)
    for snap in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        snap(tt.ones(1, 2)).sum().backward()
        assert model.weight.grad is None  # nothing went into the original
        np.testing.assert_array_equal(snap.weight.grad.numpy(), [[1.0, 1.0]])
    pickle.dumps(tt.optim.SGD(model.parameters(), lr=0.1))


def test_ctx_mark_non_differentiable_and_set_materialize_grads_like_torch():
    class Argmax(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            out = x.argmax().float()
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("never called")

    out = Argmax.apply(tt.tensor([1.0, 3.0, 2.0], requires_grad=True))
    assert float(out) == 1.0 and not out.requires_grad and out.grad_fn is None


def test_a_copied_parameter_starts_without_the_originals_grad_like_torch():
    """`copy.deepcopy(model)` to fine-tune: the copy's first backward gave [[2, 2]] (its
    weight carried the original's .grad); PyTorch's Parameter copies start at None. A plain
    tensor's deep copy keeps its .grad, in both."""
    import copy
    import pickle

    import torch

    for lib in (tt, torch):
        model = lib.nn.Linear(2, 1)
        model(lib.ones(1, 2)).sum().backward()
        for snap in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            assert snap.weight.grad is None and model.weight.grad is not None
            snap(lib.ones(1, 2)).sum().backward()
            np.testing.assert_array_equal(snap.weight.grad.numpy(), [[1.0, 1.0]])
        t = lib.ones(2, requires_grad=True)
        t.grad = lib.ones(2)
        assert copy.deepcopy(t).grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("write", [
    lambda h, L: h.mul_(3),
    lambda h, L: h.clamp_(-1, 2.5),
    lambda h, L: (h.mul_(2), h.add_(1)),
    lambda h, L: h.__setitem__(slice(0, 2), L.tensor([5.0, 6.0])),
    lambda h, L: h[1:].__iadd__(1.0),
])
def test_retain_grad_then_an_in_place_write_keeps_the_new_values_gradient_like_torch(write):
    """h.retain_grad(); h.mul_(3): h.grad is the gradient of h after the write, as PyTorch
    moves the retain hook to the new grad_fn (it was the old version's, [3, 3, 3])."""
    import torch

    got = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        h = x * 2
        h.retain_grad()
        write(h, lib)
        (h * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        assert h.retains_grad
        got.append((h.grad.tolist(), x.grad.tolist()))
    assert got[0] == got[1]


def test_the_result_of_logsumexp_over_a_dim_takes_an_in_place_op_like_torch():
    """logsumexp(dim) was a squeezed view of its keepdim result, so y.add_(w) was refused as
    'an in-place op on a reshaped or permuted view' of a tensor the user never made."""
    x = tt.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    w = tt.ones(3, requires_grad=True)
    y = x.logsumexp(0)
    y.add_(w)
    y.sum().backward()
    assert y._base is None and w.grad.tolist() == [1.0, 1.0, 1.0]
