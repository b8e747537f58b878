"""Idioms and mistakes of client programs, against PyTorch: what a learner's script does
(a ``-1``/``1`` label into BCE, a list where a tensor goes, a list of one-element losses,
an accumulator started as ``tensor([])``), each giving PyTorch's result or a clear error."""

from __future__ import annotations

import numpy as np
import pytest

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain.tensor import ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(7)
X = (RNG.normal(size=(5, 4)) * 3).astype(np.float32)
Y = (RNG.random((5, 4)) > 0.5).astype(np.float32)


def _both(fn_tt, fn_torch, x=X):
    a, b = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    la, lb = fn_tt(a), fn_torch(b)
    la.sum().backward()
    lb.sum().backward()
    np.testing.assert_allclose(la.numpy(), lb.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weights", [{}, {"weight": (5, 1)}, {"pos_weight": (4,)},
                                     {"weight": (4,), "pos_weight": (1,)}])
def test_bce_with_logits_weight_and_pos_weight_match_torch(reduction, weights):
    w = {k: RNG.random(s).astype(np.float32) * 3 for k, s in weights.items()}
    _both(lambda a: F.binary_cross_entropy_with_logits(
              a, tt.tensor(Y), reduction=reduction, **{k: tt.tensor(v) for k, v in w.items()}),
          lambda b: TF.binary_cross_entropy_with_logits(
              b, torch.tensor(Y), reduction=reduction,
              **{k: torch.tensor(v) for k, v in w.items()}))
    module = tt.nn.BCEWithLogitsLoss(**{k: tt.tensor(v) for k, v in w.items()},
                                     reduction=reduction)
    reference = torch.nn.BCEWithLogitsLoss(**{k: torch.tensor(v) for k, v in w.items()},
                                           reduction=reduction)
    assert sorted(module.state_dict()) == sorted(reference.state_dict())
    np.testing.assert_allclose(module(tt.tensor(X), tt.tensor(Y)).numpy(),
                               reference(torch.tensor(X), torch.tensor(Y)).numpy(), rtol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_bce_weight_matches_torch(reduction):
    p, w = 1 / (1 + np.exp(-X)), RNG.random((5, 1)).astype(np.float32)
    _both(lambda a: F.binary_cross_entropy(a, tt.tensor(Y), tt.tensor(w), reduction=reduction),
          lambda b: TF.binary_cross_entropy(b, torch.tensor(Y), torch.tensor(w),
                                            reduction=reduction), p)
    module = tt.nn.BCELoss(weight=tt.tensor(w), reduction=reduction)
    np.testing.assert_allclose(
        module(tt.tensor(p), tt.tensor(Y)).numpy(),
        torch.nn.BCELoss(torch.tensor(w), reduction=reduction)(torch.tensor(p),
                                                               torch.tensor(Y)).numpy(),
        rtol=1e-5)


@pytest.mark.parametrize("target", [[1.0, -1.0], [255.0, 0.0], [0.0, 2.0]])
def test_bce_refuses_targets_outside_0_1_like_torch(target):
    with pytest.raises(RuntimeError):
        TF.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor(target))
    with pytest.raises(ValueError, match="target should be between 0 and 1"):
        F.binary_cross_entropy(tt.tensor([0.5, 0.5]), tt.tensor(target))


def test_bce_weights_that_do_not_broadcast_name_the_argument():
    with pytest.raises(ShapeError, match=r"pos_weight of shape \(3,\).*\(5, 4\)"):
        F.binary_cross_entropy_with_logits(tt.tensor(X), tt.tensor(Y), pos_weight=tt.ones(3))


@pytest.mark.parametrize("shape", [(-2, 3), (-3,), (2, -5)])
def test_view_and_reshape_refuse_negative_sizes_other_than_minus_one(shape):
    with pytest.raises(RuntimeError):
        torch.arange(6).reshape(shape)
    for method in ("reshape", "view"):
        with pytest.raises(ShapeError, match="invalid size"):
            getattr(tt.arange(6), method)(shape)
    assert tt.arange(6).view(-1, 3).shape == (2, 3)


def test_tensor_of_a_list_of_one_element_tensors_is_flat_like_torch():
    losses = [tt.ones(1) * 2, tt.ones(1, 1) * 3, tt.tensor(4.0)]
    got = tt.tensor(losses)
    want = torch.tensor([torch.ones(1) * 2, torch.ones(1, 1) * 3, torch.tensor(4.0)])
    assert got.shape == tuple(want.shape) == (3,)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tt.tensor([[tt.tensor(1), 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError):
        torch.tensor([torch.ones(2)])
    with pytest.raises(ValueError, match=r"one-element tensors.*shape \(2,\).*stack"):
        tt.tensor([tt.ones(2)])


@pytest.mark.parametrize("fn", ["cat", "stack"])
def test_cat_and_stack_of_one_tensor_instead_of_a_list_raise_like_torch(fn):
    with pytest.raises(TypeError):
        getattr(torch, fn)(torch.ones(2, 3))
    with pytest.raises(TypeError, match=rf"{fn}\(\): .*list of Tensors, not a Tensor"):
        getattr(tt, fn)(tt.ones(2, 3))


def test_cat_skips_an_empty_1d_accumulator_like_torch():
    acc, ref = tt.tensor([]), torch.tensor([])
    for i in range(3):
        acc = tt.cat((acc, tt.full((2, 4), i, dtype=tt.int64)))
        ref = torch.cat((ref, torch.full((2, 4), i, dtype=torch.int64)))
    assert acc.shape == tuple(ref.shape) == (6, 4)
    assert str(acc.dtype) == str(ref.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(acc.numpy(), ref.numpy())
    assert tt.cat([tt.tensor([]), tt.ones(3)]).shape == (3,)


@pytest.mark.parametrize("expr", [
    lambda T: T.zeros(2, 3).copy_(T.ones(4)),
    lambda T: T.zeros(3).copy_(T.ones(1, 3)),
    lambda T: T.ones(2, 3) ** T.ones(4),
    lambda T: T.ones(2, 3) == T.ones(4),
    lambda T: T.ones(2, 3) > T.ones(4),
    lambda T: T.ones(2, 3).logical_and(T.ones(4)),
    lambda T: T.ones(2, 3, dtype=T.bool) ^ T.ones(4, dtype=T.bool),
], ids=["copy_", "copy_grow", "pow", "eq", "gt", "logical_and", "xor"])
def test_shapes_that_do_not_broadcast_raise_a_shape_error_naming_both(expr):
    with pytest.raises(RuntimeError):
        expr(torch)
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4,\)|\(1, 3\).*\(3,\)"):
        expr(tt)


@pytest.mark.parametrize("call, message", [
    (lambda: tt.linspace(0, 1, -1), "steps must be a non-negative integer"),
    (lambda: tt.linspace(0, 1, 2.5), "steps must be a non-negative integer"),
    (lambda: tt.nn.init.uniform_(tt.ones(3), 1.0, 0.0), "a <= b"),
    (lambda: tt.load(None), "expected a file path"),
    (lambda: tt.nn.Linear(3, 2).load_state_dict("model.pt"), "dict-like, got str.*tt.load"),
    (lambda: tt.nn.Linear(3, 2).load_state_dict([1, 2]), "dict-like, got list"),
    (lambda: F.conv2d([[1.0]], tt.ones(1, 1, 1, 1)), "conv2d.*'input' must be a Tensor, not list"),
    (lambda: F.conv2d(tt.ones(1, 1, 3, 3), None), "'weight' must be a Tensor, not NoneType"),
    (lambda: tt.nn.Linear(3, 2)([1.0, 2.0, 3.0]), "linear.*'input' must be a Tensor, not list"),
    (lambda: F.avg_pool2d(tt.ones(1, 1, 4, 4, dtype=tt.int32), 2), "not implemented for .Int."),
])
def test_bad_arguments_get_a_message_that_names_them(call, message):
    with pytest.raises((TypeError, ValueError, RuntimeError), match=message):
        call()


def test_files_of_pytorch_are_named_as_such(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(ValueError, match="a PyTorch file"):
        tt.load(path)
    with pytest.raises(TypeError, match="torch.Tensor.*PyTorch tensor"):
        tt.save({"w": torch.ones(2)}, tmp_path / "x.tt")


@pytest.mark.parametrize("op, kwargs", [("conv2d", {"padding": 1}), ("max_pool2d", {}),
                                        ("avg_pool2d", {}), ("adaptive_avg_pool2d", {})])
def test_unbatched_chw_input_works_like_torch(op, kwargs):
    x = RNG.random((3, 6, 6)).astype(np.float32)
    if op == "conv2d":
        w = RNG.random((4, 3, 3, 3)).astype(np.float32)
        _both(lambda a: F.conv2d(a, tt.tensor(w), **kwargs),
              lambda b: TF.conv2d(b, torch.tensor(w), **kwargs), x)
    else:
        size = 3 if op == "adaptive_avg_pool2d" else 2
        _both(lambda a: getattr(F, op)(a, size), lambda b: getattr(TF, op)(b, size), x)


def test_cuda_n_devices_name_the_process_gpu():
    if tt.cuda.is_available():
        pytest.skip("without a GPU: the GPU case is in tests/test_cuda_device.py")
    assert tt.device("cuda:1") == "cuda" and tt.device("cuda:1").type == "cuda"
    with pytest.raises(RuntimeError, match="needs CuPy and an NVIDIA GPU"):
        tt.ones(2).to("cuda:1")
    with pytest.raises(RuntimeError, match="needs CuPy and an NVIDIA GPU"):
        tt.cuda.set_device(1)
    assert tt.cuda.current_device() == 0


def _custom_function(T, grad_shape, leaf):
    """A custom Function whose backward returns a gradient of ``grad_shape`` for its
    ``[3]`` input; returns the leaf's gradient, or raises."""

    class Fn(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return T.ones(grad_shape) if grad_shape is not None else 1.0

    w = T.ones(3, requires_grad=True)
    Fn.apply(w if leaf else w * 1.0).sum().backward()
    return w.grad


@pytest.mark.parametrize("leaf", [True, False])
@pytest.mark.parametrize("grad_shape", [(1, 3), (2, 3), (3,)])
def test_custom_backward_broadcast_gradients_are_summed_back_like_torch(grad_shape, leaf):
    np.testing.assert_array_equal(_custom_function(tt, grad_shape, leaf).numpy(),
                                  _custom_function(torch, grad_shape, leaf).numpy())


@pytest.mark.parametrize("leaf", [True, False])
@pytest.mark.parametrize("grad_shape", [(1,), (3, 1), (2,), None])
def test_custom_backward_gradients_of_a_wrong_shape_or_type_raise_like_torch(grad_shape, leaf):
    with pytest.raises(RuntimeError):
        _custom_function(torch, grad_shape, leaf)
    with pytest.raises(RuntimeError, match="Fn.backward returned"):
        _custom_function(tt, grad_shape, leaf)


@pytest.mark.parametrize("make", [
    lambda T, x, w: x / w,
    lambda T, x, w: T.maximum(x, w),
    lambda T, x, w: T.minimum(x, w),
    lambda T, x, w: T.nn.functional.elu(x - w),
    lambda T, x, w: T.nn.functional.layer_norm(x * w, (3,)),
    lambda T, x, w: (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5).sqrt() * w,
], ids=["div", "maximum", "minimum", "elu", "layer_norm", "hand-made norm"])
def test_in_place_ops_on_an_output_whose_backward_needs_only_inputs_work_like_torch(make):
    x0 = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
    w0 = np.array([2.0, 3.0, -0.5])
    grads = []
    for T in (tt, torch):
        x, w = T.tensor(x0, requires_grad=True), T.tensor(w0, requires_grad=True)
        y = make(T, x, w)
        y.mul_(3)
        (y * T.tensor(x0)).sum().backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("write", [lambda y: y.fill_(7), lambda y: y.zero_(),
                                   lambda y: y.copy_(y.new_ones(y.shape))],
                         ids=["fill_", "zero_", "copy_"])
def test_overwriting_a_non_leaf_gives_its_leaf_a_zero_grad_like_torch(write):
    for T in (tt, torch):
        x = T.ones(2, requires_grad=True)
        y = x * 2
        write(y)
        y.sum().backward()
        assert x.grad is not None and x.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("expand", [lambda x: x.expand(2, 3), lambda x: x.expand_as(x),
                                    lambda x: x.expand(-1, -1), lambda x: x.broadcast_to(2, 3)])
def test_expand_to_the_own_shape_is_a_writable_view_like_torch(expand):
    for T in (tt, torch):
        x = T.ones(2, 3)
        expand(x).mul_(2)
        assert x.tolist() == [[2.0] * 3] * 2


@pytest.mark.parametrize("a, b", [(1.0, 0.1), (-0.3, 0.1), (7.0, -2.0), (-7.5, 2.0)])
def test_float_floor_division_rounds_like_python_and_torch(a, b):
    got = tt.tensor([a], dtype=tt.float64).div(b, rounding_mode="floor").item()
    assert got == torch.tensor([a], dtype=torch.float64).div(b, rounding_mode="floor").item()
    assert got == a // b == (tt.tensor([a], dtype=tt.float64) // b).item()


@pytest.mark.parametrize("call", [
    lambda T: T.ones(2, dtype=T.int8).add(T.tensor([True, False]), alpha=2),
    lambda T: T.tensor([True, False]).add(T.tensor([True, False]), alpha=2),
    lambda T: T.add(2, T.tensor(5, dtype=T.int8)),
    lambda T: T.mul(3, T.tensor(5, dtype=T.int16)),
    lambda T: T.sub(1.5, T.tensor(0.5, dtype=T.float16)),
], ids=["alpha-int8", "alpha-bool", "number-first-add", "number-first-mul", "number-first-f16"])
def test_alpha_and_numbers_first_do_not_promote_like_torch(call):
    got, want = call(tt), call(torch)
    assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
    assert got.tolist() == want.tolist()


def test_float_alpha_with_integer_tensors_and_bool_subtraction_raise_like_torch():
    for T in (tt, torch):
        with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
            T.ones(2, dtype=T.int64).add(T.ones(2, dtype=T.int64), alpha=0.5)
        with pytest.raises(RuntimeError, match="Subtraction.*bool"):
            T.ones(2, dtype=T.int16).sub(T.tensor([True, False]), alpha=3)


def test_pin_memory_is_accepted():
    x = tt.ones(2)
    assert x.pin_memory() is x and not x.is_pinned()


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta"])
def test_optimizer_step_takes_a_closure_like_torch(name):
    """``step(closure)`` re-evaluates the loss with gradients on, then steps; it returns the
    closure's loss (L-BFGS-style code and some tutorials use it)."""
    w0 = np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32)
    results = []
    for T in (tt, torch):
        w = T.tensor(w0, requires_grad=True)
        opt = getattr(T.optim, name)([w], lr=0.1)

        def closure(opt=opt, w=w):
            opt.zero_grad()
            loss = (w * w).sum()
            loss.backward()
            return loss

        with T.no_grad():  # the closure still computes gradients
            losses = [float(opt.step(closure)) for _ in range(3)]
        results.append((losses, w.detach().numpy().copy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-7)


def test_sgd_default_lr_and_pytorch_spellings():
    assert tt.optim.SGD([tt.ones(1, requires_grad=True)]).defaults["lr"] == \
        torch.optim.SGD([torch.ones(1, requires_grad=True)]).defaults["lr"]
    from tinytrain.autograd.function import once_differentiable

    class Square(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = tt.tensor([3.0], requires_grad=True)
    Square.apply(x).sum().backward()
    assert x.grad.tolist() == [6.0]
    with pytest.raises(TypeError, match="generator must be None or a tt.Generator"):
        tt.utils.data.random_split(list(range(10)), [5, 5], generator=object())


class _MatT(tt.autograd.Function):
    """tinytrain's own style (forward on arrays + setup_context), with a backward that
    returns a wrong-shaped gradient on purpose."""

    @staticmethod
    def forward(a):
        return a * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g.T.copy()


def test_setup_context_style_functions_have_their_gradients_checked_too():
    x = tt.arange(6.0).requires_grad_()
    with pytest.raises(RuntimeError, match=r"_MatT.backward returned an invalid gradient.*"
                                           r"\(3, 2\).*\(2, 3\)"):
        _MatT.apply(x.reshape(2, 3)).sum().backward()


def test_a_leaf_grad_is_contiguous_even_through_a_transpose_like_torch():
    for T in (tt, torch):
        w = T.ones(2, 3, requires_grad=True)
        (T.ones(4, 3) @ w.T).sum().backward()
        assert w.grad.is_contiguous()
        assert w.grad.view(-1).shape == (6,)


def test_retain_grad_and_the_non_leaf_grad_warning_like_torch():
    results = []
    for T in (tt, torch):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        z = y * y
        with pytest.warns(UserWarning, match="not a leaf Tensor"):
            assert z.grad is None
        y.retain_grad()
        assert y.retains_grad and not z.retains_grad
        (z.sum() + y.sum()).backward()
        results.append((y.grad.tolist(), x.grad.tolist()))
    assert results[0] == results[1]


def test_detach_in_place_and_pytorch_backward_arguments():
    x = tt.ones(2, requires_grad=True)
    y = x * 2
    assert y.detach_() is y and y.grad_fn is None and not y.requires_grad
    with pytest.raises(RuntimeError, match="views in-place"):
        (x * 2)[0:1].detach_()
    (x * x).sum().backward(create_graph=True)  # higher-order gradients (test_higher_order9)
    assert x.grad.tolist() == [2.0, 2.0] and x.grad.requires_grad
    w = tt.ones(3, requires_grad=True)
    w.grad = tt.zeros(1).expand(3)  # a read-only broadcast view: accumulating replaces it
    (w * 2).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("expr", [
    "T.cat([a, a])", "T.stack([a, a])", "a.softmax(1)", "a.log_softmax(0)", "a.cumsum(0)",
    "a.masked_fill(a > 2, 0.0)", "a[:, [0, 1]]", "a.index_select(1, T.tensor([1, 0]))",
    "a.repeat(1, 1)", "T.nn.functional.pad(a, (1, 1))", "T.nn.functional.layer_norm(a, (2,))",
    "b.mean(1, keepdim=True)", "b.std(0, keepdim=True)"])
def test_new_results_of_transposed_inputs_can_be_viewed_like_torch(expr):
    got = []
    for T in (tt, torch):
        names = {"T": T, "a": T.arange(6.0).reshape(2, 3).t(),
                 "b": T.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1)}
        r = eval(expr, names)
        assert r.is_contiguous()
        got.append(r.reshape(-1).tolist() if T is torch else r.view(-1).tolist())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-5, atol=1e-6)


def test_transposes_stay_views():
    a = tt.arange(6.0).reshape(2, 3)
    at = a.t()
    at[0, 1] = 7.0  # written through: a view, not a row-major copy
    assert a[1, 0].item() == 7.0 and not at.is_contiguous()


def test_a_0d_integer_tensor_indexes_like_an_int_like_torch():
    for T in (tt, torch):
        x = T.arange(24.0).reshape(2, 3, 4)
        i = T.tensor(1)
        assert x[i, :, [1, 2]].tolist() == [[13.0, 14.0], [17.0, 18.0], [21.0, 22.0]]
        y = T.zeros(2, 3, 4)
        y[i, :, [1, 2]] = T.tensor([10.0, 20.0])
        assert y[1, :, 1:3].tolist() == [[10.0, 20.0]] * 3 and y[0].sum().item() == 0
        z = T.zeros(3, 2)
        z[T.tensor(2)].fill_(5)  # a view of the row, as with an int
        assert z.tolist() == [[0, 0], [0, 0], [5, 5]]


def test_a_uint8_index_is_a_mask_like_torch():
    for T in (tt, torch):
        x = T.tensor([10.0, 20.0, 30.0, 40.0])
        with pytest.warns(UserWarning, match="uint8"):
            assert x[(x > 25).to(T.uint8)].tolist() == [30.0, 40.0]


def test_reduction_dtype_arguments_and_pytorch_names():
    for T in (tt, torch):
        x = T.tensor([[1, 0, 3], [4, 5, 0]])
        assert str(T.sum(x, dtype=T.float32).dtype).endswith("float32")
        assert T.mean(x, dtype=T.float64).item() == pytest.approx(13 / 6)
        assert str(x.cumsum(0, dtype=T.float32).dtype).endswith("float32")
        assert tuple((x > 2).any(dim=()).shape) == (2, 3)  # nothing reduced, as PyTorch
        assert tuple((x > 2).all(dim=[]).shape) == (2, 3)
        assert tuple(T.unflatten(T.ones(2, 6), 1, (2, 3)).shape) == (2, 2, 3)
        assert tuple(T.ones(4, 2, 3).mT.shape) == (4, 3, 2)


def test_devices_keep_their_index_like_torch():
    for T in (tt, torch):
        d = T.device("cuda", 1)
        assert (d.type, d.index) == ("cuda", 1) and repr(d) == "device(type='cuda', index=1)"
        assert T.device("cuda:2").index == 2 and T.device("cpu").index is None
        assert T.device("cuda").index is None
    assert tt.device(0).index == 0  # (torch.device(0) needs an accelerator present)
    assert tt.device("cuda", 1) == "cuda"  # still the name wherever a name is expected
    with pytest.raises(ValueError, match="index goes with 'cuda'"):
        tt.device("cpu", 1)


def test_random_functions_take_generator_none_and_name_a_generator_otherwise():
    assert tt.randn(2, 3, generator=None).shape == (2, 3)
    for make in (lambda g: tt.randn(2, generator=g), lambda g: tt.randint(0, 5, (2,), generator=g),
                 lambda g: tt.randperm(4, generator=g), lambda g: tt.rand(2, generator=g)):
        with pytest.raises(TypeError, match=r"generator must be None or a tt.Generator \(e.g. "
                                            r"tt.Generator\(\).manual_seed\(0\)\), got "
                                            r"builtins.object"):
            make(object())


@pytest.mark.parametrize("call", [
    lambda T: T.div(-1, T.tensor([3, 250], dtype=T.uint8)),
    lambda T: T.add(300, T.tensor([3, 250], dtype=T.uint8)),
    lambda T: T.sub(100000, T.tensor([3], dtype=T.int16)),
    lambda T: T.div(1000, T.tensor([3, -2], dtype=T.int8)),
    lambda T: T.floor_divide(-7, T.tensor([3], dtype=T.uint8)),
    lambda T: T.pow(2, T.tensor([3.0, 4.0])),
], ids=["div", "add-wrap", "sub-wrap", "div-int8", "floor_divide", "pow"])
def test_a_number_first_is_the_number_it_is_like_torch(call):
    got, want = call(tt), call(torch)
    assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_elementwise_ops_keep_a_transposed_layout_like_torch():
    for T in (tt, torch):
        x = T.arange(12.0).reshape(3, 4)
        assert tuple(x.t().exp().t().view(-1).shape) == (12,)
        assert tuple(x.t().relu().t().view(-1).shape) == (12,)  # (relu made it row-major)
        assert tuple(F.relu(x.t()).t().view(-1).shape) == (12,) if T is tt else True
        assert (x.permute(1, 0).sigmoid().permute(1, 0)).is_contiguous()
        x4 = T.arange(120.0).reshape(2, 3, 4, 5)
        assert tuple((x4.permute(0, 2, 3, 1) + 1).permute(0, 3, 1, 2).view(2, -1).shape) == (2, 60)


@pytest.mark.parametrize("dtype, want", [("int32", "int32"), ("float32", "float32"),
                                         ("float64", "float64")])
def test_cumsum_dtype_is_the_result_dtype_like_torch(dtype, want):
    x = tt.tensor([1, 2, 3], dtype=tt.int32 if dtype == "int32" else tt.float16)
    assert str(x.cumsum(0, dtype=getattr(tt, dtype)).dtype) == want


def test_tensor_of_many_short_rows_takes_the_fast_path():
    rows = [[i, i + 1] for i in range(1000)]
    assert tt.tensor(rows).shape == (1000, 2)
    from tinytrain.tensor import _holds_arrays
    assert not _holds_arrays(rows) and _holds_arrays([tt.ones(1)]) and _holds_arrays([[1], [2, 3]])


def test_optimizer_subclasses_with_their_own_step_arguments_still_work():
    class Scaled(tt.optim.SGD):
        def step(self, scale=1.0):
            for g in self.param_groups:
                g["lr"] *= scale
            return super().step()

    class Multi(tt.optim.SGD):
        def step(self, closure):
            return [closure() for _ in range(3)][-1]

    w = tt.ones(2, requires_grad=True)
    opt = Scaled([w], lr=0.1)
    (w * w).sum().backward()
    opt.step(2.0)
    opt.step(scale=1.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.2)
    calls = []
    assert Multi([w], lr=0.1).step(lambda: calls.append(1) or 5.0) == 5.0 and len(calls) == 3


def test_numpy_scalars_in_an_optimizer_state_are_not_taken_for_a_moved_model():
    w = tt.ones(2, requires_grad=True)
    opt = tt.optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    opt.state[w]["step"] = np.int64(opt.state[w]["step"])
    opt.state[w]["note"] = np.float32(1.5)
    opt.step()


def test_reduction_passed_where_pytorchs_weight_goes_is_named():
    x, y = tt.tensor([0.2, 0.7]), tt.tensor([0.0, 1.0])
    with pytest.raises(TypeError, match="reduction='sum'"):
        F.binary_cross_entropy(x, y, "sum")
    with pytest.raises(TypeError, match="reduction='sum'"):
        tt.nn.BCELoss("sum")
    assert F.binary_cross_entropy(x, y, weight=np.ones(2)).item() == pytest.approx(
        TF.binary_cross_entropy(torch.tensor([0.2, 0.7]), torch.tensor([0.0, 1.0])).item())


def test_functional_softmax_without_dim_is_pytorchs_implicit_dim():
    x = RNG.random((2, 3, 4)).astype(np.float32)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        got = F.softmax(tt.tensor(x))
    with pytest.warns(UserWarning):
        want = TF.softmax(torch.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_gradients_with_ties_and_nan_like_torch(op):
    a0 = np.array([1.0, 2.0, np.nan, 3.0, np.nan])
    b0 = np.array([2.0, 2.0, 1.0, np.nan, np.nan])
    grads = []
    for T in (tt, torch):
        a, b = T.tensor(a0, requires_grad=True), T.tensor(b0, requires_grad=True)
        (getattr(T, op)(a, b) * T.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=T.float64)).sum() \
            .backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1]


@pytest.mark.parametrize("first", ["self", "context"])
def test_a_classic_function_whose_first_parameter_is_not_called_ctx_works_like_torch(first):
    """PyTorch's rule: no setup_context means forward(ctx, *inputs), whatever ctx is called."""
    source = f"""
class Square(tt.autograd.Function):
    @staticmethod
    def forward({first}, x):
        {first}.save_for_backward(x)
        return x * x

    @staticmethod
    def backward({first}, g):
        (x,) = {first}.saved_tensors
        return 2 * x * g
"""
    scope = {"tt": tt, "__name__": "client"}
    exec(source, scope)
    x = tt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = scope["Square"].apply(x)
    y.sum().backward()
    np.testing.assert_array_equal(y.numpy(), [1.0, 4.0, 9.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, -4.0, 6.0])
    exec(source.replace("x):", "x, p=2):").replace("x * x", "x ** p"), scope)  # defaults
    for p, want in ((None, [1.0, 4.0, 9.0]), (3, [1.0, -8.0, 27.0])):
        got = scope["Square"].apply(*([x] if p is None else [x, p]))
        np.testing.assert_array_equal(got.detach().numpy(), want)


def test_a_tinytrain_style_function_that_saves_nothing_needs_no_setup_context():
    class Double(tt.autograd.Function):
        @staticmethod
        def forward(x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = tt.tensor([1.0, 2.0], requires_grad=True)
    Double.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_where_with_a_condition_alone_takes_any_dtype_like_torch():
    x = tt.tensor([[0, 3], [-1, 0]])
    rows, cols = tt.where(x)
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0]
    (i,) = tt.where(tt.tensor([0.0, 2.5, 0.0, -1.0]))
    assert i.tolist() == [1, 3]


def test_view_as_a_dtype_is_refused_by_name():
    with pytest.raises(TypeError, match="reinterpreting the bytes"):
        tt.ones(3).view(tt.int32)
    x = tt.ones(3)
    same = x.view(tt.float32)  # its own dtype: a view, as in torch
    same[0] = 5.0
    assert x.tolist() == [5.0, 1.0, 1.0]


def test_cuda_manual_seed_checks_its_seed_as_torch_does():
    tt.cuda.manual_seed(1234)
    tt.cuda.manual_seed_all(5)
    for bad in ("abc", None, [1]):
        with pytest.raises(TypeError, match="seed must be an integer"):
            tt.cuda.manual_seed(bad)


def test_pad_names_an_unknown_mode_before_its_value():
    with pytest.raises(ValueError, match="unknown mode 'bogus'"):
        F.pad(tt.ones(1, 2, 3), (1, 1), mode="bogus", value=1.0)


def _momentum_sgd():
    """PyTorch's documented pattern for an optimizer of one's own, state kept as Tensors."""

    class MySGD(tt.optim.Optimizer):
        def __init__(self, params, lr=0.1, momentum=0.9):
            super().__init__(params, {"lr": lr, "momentum": momentum})

        @tt.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]  # a new dict the first time, as in PyTorch
                    if len(state) == 0:
                        state["momentum_buffer"] = tt.zeros_like(p)
                    state["momentum_buffer"].mul_(group["momentum"]).add_(p.grad)
                    p.add_(state["momentum_buffer"], alpha=-group["lr"])

    return MySGD


def test_an_optimizer_of_ones_own_keeps_tensor_state_through_a_resume(tmp_path):
    """self.state[p] is a defaultdict(dict) (it raised KeyError), and load_state_dict keeps a
    subclass's Tensor state Tensors (it turned them into arrays, so .mul_ failed)."""
    straight, resumed = tt.nn.Parameter(tt.ones(3)), tt.nn.Parameter(tt.ones(3))
    opt, opt2 = _momentum_sgd()([straight]), _momentum_sgd()([resumed])
    for i in range(3):
        for p, o in ((straight, opt), (resumed, opt2)):
            o.zero_grad()
            (p * p).sum().backward()
            o.step()
        if i == 0:  # a resume from a file
            tt.save(opt2.state_dict(), tmp_path / "opt.npz")
            opt2 = _momentum_sgd()([resumed])
            opt2.load_state_dict(tt.load(tmp_path / "opt.npz"))
            assert isinstance(opt2.state[resumed]["momentum_buffer"], tt.Tensor)
    np.testing.assert_array_equal(resumed.numpy(), straight.numpy())
    w, buf = 1.0, 0.0  # the same three steps by hand
    for _ in range(3):
        buf = 0.9 * buf + 2 * w
        w -= 0.1 * buf
    np.testing.assert_allclose(straight.numpy(), [w] * 3, rtol=1e-6)


def test_a_function_whose_view_is_of_a_later_input_works_like_torch():
    """A user Function ``forward(i, x): return x[i]``: its output is a view of the second
    input, the first is a number (a regression of this stop crashed on the number's shape)."""

    class Row(tt.autograd.Function):
        @staticmethod
        def forward(i, x):
            return x[i]

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.i, ctx.shape = inputs[0], inputs[1].shape

        @staticmethod
        def backward(ctx, g):
            out = np.zeros(ctx.shape, g.dtype)
            out[ctx.i] = g
            return None, out

    x = tt.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], requires_grad=True)
    y = Row.apply(1, x)
    y.sum().backward()
    assert y.tolist() == [3.0, 4.0, 5.0]
    assert x.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def test_an_optimizer_with_factored_tensor_state_resumes():
    """A subclass's own Tensor state need not have its parameter's shape (Adafactor keeps a
    row vector): load_state_dict keeps it (it raised a ShapeError meant for built-ins)."""

    class RowScaled(tt.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        @tt.no_grad()
        def step(self, closure=None):
            for p in self.param_groups[0]["params"]:
                state = self.state[p]
                if not state:
                    state["row"] = tt.zeros(p.shape[0], 1)
                state["row"].add_((p.grad * p.grad).mean(1, keepdim=True))
                p.sub_(0.1 * p.grad / (state["row"].sqrt() + 1e-8))

    p = tt.nn.Parameter(tt.arange(6.0).reshape(2, 3))
    opt = RowScaled([p])
    (p * p).sum().backward()
    opt.step()
    again = RowScaled([p])
    again.load_state_dict(opt.state_dict())
    row = again.state[p]["row"]
    assert isinstance(row, tt.Tensor) and row.shape == (2, 1)
    np.testing.assert_allclose(row.numpy(), opt.state[p]["row"].numpy())


def test_floor_division_remainder_and_bitwise_assignments_are_in_place_like_torch():
    """Without __ifloordiv__ & co. Python rebound the name: a view's base kept its values and
    an integer tensor silently became float."""
    x = tt.tensor([7, -7, 5, 1])
    v, w = x[:2], x[2:]
    v //= 2
    w %= 3
    assert x.tolist() == [3, -4, 2, 1] and x.dtype == tt.int64
    with pytest.raises(TypeError, match="can't be cast"):
        x //= 2.5
    m = tt.tensor([True, False, True])
    alias = m
    m &= tt.tensor([True, True, False])
    m |= tt.tensor([False, True, False])
    m ^= tt.tensor([True, False, False])
    assert alias is m and m.tolist() == [False, True, False]
    assert tt.tensor([7.5]).floor_divide(2).tolist() == [3.0]


def test_new_zeros_ones_empty_take_size_like_torch():
    x = tt.ones(2, dtype=tt.float64)
    for name, fill in (("new_zeros", 0.0), ("new_ones", 1.0), ("new_empty", 0.0)):
        t = getattr(x, name)(size=(2, 3))
        assert t.shape == (2, 3) and t.dtype == tt.float64 and (t.numpy() == fill).all()
        with pytest.raises(TypeError, match="one way"):
            getattr(x, name)(2, size=(3,))


def test_embedding_takes_pytorchs_arguments_and_names_the_options_it_lacks():
    e = tt.nn.Embedding(5, 2, None, None, 2.0, False, False)  # PyTorch's positional order
    assert e.weight.shape == (5, 2)
    assert not tt.nn.Embedding.from_pretrained(tt.ones(3, 2)).weight.requires_grad
    assert tt.nn.Embedding.from_pretrained(tt.ones(3, 2), freeze=False).weight.requires_grad
    for option in ({"sparse": True}, {"scale_grad_by_freq": True}):
        with pytest.raises(ValueError, match=f"{next(iter(option))} is not supported"):
            tt.nn.Embedding(5, 2, **option)
    assert tt.ones(2).to(memory_format=tt.contiguous_format).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="row-major"):
        tt.ones(1, 1, 2, 2).to(memory_format=tt.channels_last)


def test_dtype_none_is_the_creation_functions_default_like_torch():
    """``def make(n, dtype=None): return torch.zeros(n, dtype=dtype)``: None means the default
    (float32; int64 for randint/randperm), not NumPy's float64."""
    for make in (lambda: tt.zeros(2, dtype=None), lambda: tt.ones(2, dtype=None),
                 lambda: tt.empty(2, dtype=None), lambda: tt.rand(2, dtype=None),
                 lambda: tt.randn(2, dtype=None), lambda: tt.eye(2, dtype=None),
                 lambda: tt.linspace(0, 1, 3, dtype=None)):
        assert make().dtype == tt.float32
    assert tt.randperm(3, dtype=None).dtype == tt.int64
    assert tt.randint(0, 3, (2,), dtype=None).dtype == tt.int64


def test_wrong_arguments_of_this_stops_names_are_refused_like_torch():
    with pytest.raises(TypeError, match="must be an int"):
        tt.ones(2, 3).argmax(dim=(0, 1))
    with pytest.raises(TypeError, match="input and other"):
        tt.where(tt.tensor([True, False]), tt.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="negative limits"):
        F.hardtanh(tt.tensor([0, 200], dtype=tt.uint8))
    with pytest.raises(TypeError, match="must be a Tensor, not list"):
        F.mish([1.0, 2.0])
    with pytest.raises(TypeError, match="floating point vector"):
        tt.nn.utils.vector_to_parameters(tt.arange(3), tt.nn.Linear(1, 1).parameters())
    for bad in ({"mean": float("nan")}, {"std": float("nan")}, {"std": float("inf")}):
        with pytest.raises(ValueError, match="finite"):
            tt.nn.init.trunc_normal_(tt.empty(3), **bad)


def test_a_builtin_optimizer_loads_tensor_state_as_its_arrays():
    """A hand-built or converted checkpoint whose Adam state holds Tensors steps as before
    (only an optimizer of one's own keeps Tensors)."""
    p = tt.nn.Parameter(tt.ones(2, 2))
    opt = tt.optim.Adam([p], lr=0.1)
    opt.load_state_dict({"state": {0: {"step": 3, "exp_avg": tt.zeros(2, 2),
                                       "exp_avg_sq": tt.ones(2, 2)}},
                         "param_groups": opt.state_dict()["param_groups"]})
    (p * p).sum().backward()
    opt.step()
    assert not isinstance(opt.state[p]["exp_avg"], tt.Tensor)
    assert np.isfinite(p.numpy()).all() and (p.numpy() < 1).all()
