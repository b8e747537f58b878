"""Every differentiable op, forward and backward, against PyTorch (float32) and
against central differences (float64).

Each test runs on every ``device`` (see conftest.py): tinytrain computes on the
device, PyTorch on the CPU, and the results are compared after ``.numpy()``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import tinytrain as tt

HYP = settings(max_examples=30, deadline=None)


# ----------------------------------------------------------------------------- helpers


def leaf(arr: np.ndarray, device: str) -> tt.Tensor:
    return tt.tensor(arr, device=device, requires_grad=True)


def tleaf(arr: np.ndarray) -> torch.Tensor:
    return torch.tensor(arr, requires_grad=True)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    actual = actual.numpy() if isinstance(actual, tt.Tensor) else np.asarray(actual)
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def compare(tt_fn, torch_fn, arrays, device, rtol=1e-5, atol=1e-6, seed=0):
    """Run both functions on the same float32 inputs; compare output and every input grad.

    Backward uses the same random upstream gradient on both sides, so each
    gradient is checked as a full vector-Jacobian product, not only for ones.
    """
    xs = [leaf(a, device) for a in arrays]
    ts = [tleaf(a) for a in arrays]
    out, ref = tt_fn(*xs), torch_fn(*ts)
    assert_close(out, ref, rtol, atol)
    g = np.random.default_rng(seed).standard_normal(ref.shape).astype(ref.detach().numpy().dtype)
    out.backward(tt.tensor(g, device=device))
    ref.backward(torch.from_numpy(g))
    for x, t in zip(xs, ts):
        assert x.grad is not None
        assert x.grad.device == device
        assert_close(x.grad, t.grad, rtol, atol)


def gradcheck(fn, arrays, device, eps=1e-6, rtol=1e-6, atol=1e-7, seed=1):
    """Analytic vs central-difference gradients of ``sum(fn(*xs) * w)`` in float64."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    xs = [leaf(a, device) for a in arrays]
    out = fn(*xs)
    w = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(tt.tensor(w, device=device))

    def f(values):
        with tt.no_grad():
            y = fn(*[tt.tensor(v, device=device) for v in values])
        return float((y.numpy() * w).sum())

    for i, a in enumerate(arrays):
        numeric = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            plus = [v.copy() for v in arrays]
            minus = [v.copy() for v in arrays]
            plus[i][j] += eps
            minus[i][j] -= eps
            numeric[j] = (f(plus) - f(minus)) / (2 * eps)
        analytic = xs[i].grad.numpy()
        assert analytic.dtype == np.float64
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


def rand(rng, shape, low=-2.0, high=2.0, dtype=np.float32):
    return rng.uniform(low, high, size=shape).astype(dtype)


def away_from_zero(rng, shape, dtype=np.float32):
    """Values with |x| in [0.5, 2]: safe denominators, and no kinks of relu nearby."""
    sign = rng.choice([-1.0, 1.0], size=shape)
    return (sign * rng.uniform(0.5, 2.0, size=shape)).astype(dtype)


# ------------------------------------------------------------------ binary, broadcasting

BINARY = {
    "add": (lambda a, b: a + b),
    "sub": (lambda a, b: a - b),
    "mul": (lambda a, b: a * b),
    "div": (lambda a, b: a / b),
}


@pytest.mark.parametrize("op", list(BINARY))
@HYP
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
       seed=st.integers(0, 2**16))
def test_binary_broadcast_matches_torch(device, op, shapes, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a = rand(rng, sa)
    b = away_from_zero(rng, sb) if op == "div" else rand(rng, sb)
    fn = BINARY[op]
    compare(fn, fn, [a, b], device, seed=seed)


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_gradcheck(device, op):
    rng = np.random.default_rng(3)
    a = rand(rng, (2, 1, 3), dtype=np.float64)
    b = away_from_zero(rng, (4, 1), dtype=np.float64)
    gradcheck(BINARY[op], [a, b], device)


@pytest.mark.parametrize("op", ["radd", "rsub", "rmul", "rdiv", "add", "sub", "mul", "div"])
def test_binary_with_python_scalar(device, op):
    scalar = 2.5
    fns = {
        "radd": lambda x: scalar + x, "rsub": lambda x: scalar - x,
        "rmul": lambda x: scalar * x, "rdiv": lambda x: scalar / x,
        "add": lambda x: x + scalar, "sub": lambda x: x - scalar,
        "mul": lambda x: x * scalar, "div": lambda x: x / scalar,
    }
    x = away_from_zero(np.random.default_rng(4), (3, 4))
    compare(fns[op], fns[op], [x], device)
    gradcheck(fns[op], [x], device)


def test_same_node_on_both_sides(device):
    x = rand(np.random.default_rng(5), (3, 2))
    compare(lambda a: a * a + a / (a * a + 1), lambda a: a * a + a / (a * a + 1), [x], device)


# ------------------------------------------------------------------------- unary

UNARY = {
    # name: (tinytrain fn, torch fn, input maker)
    "neg": (lambda x: -x, lambda x: -x, rand),
    "exp": (lambda x: x.exp(), torch.exp, rand),
    "log": (lambda x: x.log(), torch.log, lambda r, s, **k: rand(r, s, 0.1, 3.0, **k)),
    "sqrt": (lambda x: x.sqrt(), torch.sqrt, lambda r, s, **k: rand(r, s, 0.1, 3.0, **k)),
    "relu": (lambda x: x.relu(), torch.relu, away_from_zero),
    "sigmoid": (lambda x: x.sigmoid(), torch.sigmoid, lambda r, s, **k: rand(r, s, -6, 6, **k)),
    "tanh": (lambda x: x.tanh(), torch.tanh, lambda r, s, **k: rand(r, s, -3, 3, **k)),
    "pow2": (lambda x: x ** 2, lambda x: x ** 2, rand),
    "pow3": (lambda x: x ** 3, lambda x: x ** 3, rand),
    "pow_neg_int": (lambda x: x ** -2, lambda x: x ** -2, away_from_zero),
    "pow_half": (lambda x: x ** 0.5, lambda x: x ** 0.5,
                 lambda r, s, **k: rand(r, s, 0.1, 3.0, **k)),
    "pow_frac_neg": (lambda x: x ** -1.5, lambda x: x ** -1.5,
                     lambda r, s, **k: rand(r, s, 0.2, 3.0, **k)),
    "rpow2": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, rand),
    "rpow_half": (lambda x: 0.5 ** x, lambda x: 0.5 ** x, rand),
    "rpow_e": (lambda x: math.e ** x, lambda x: math.e ** x, rand),
}


@pytest.mark.parametrize("name", list(UNARY))
@HYP
@given(shape=array_shapes(min_dims=0, max_dims=3, max_side=5), seed=st.integers(0, 2**16))
def test_unary_matches_torch(device, name, shape, seed):
    tt_fn, torch_fn, make = UNARY[name]
    compare(tt_fn, torch_fn, [make(np.random.default_rng(seed), shape)], device, seed=seed)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_gradcheck(device, name):
    tt_fn, _, make = UNARY[name]
    gradcheck(tt_fn, [make(np.random.default_rng(6), (2, 3), dtype=np.float64)], device)


def test_tensor_pow_tensor(device):
    rng = np.random.default_rng(7)
    a, p = rand(rng, (3, 4), 0.2, 3.0), rand(rng, (4,), -2.0, 2.0)
    compare(lambda x, y: x ** y, lambda x, y: x ** y, [a, p], device)
    gradcheck(lambda x, y: x ** y, [a, p], device)


@pytest.mark.parametrize("p", [0, 1, 2, 3, 0.0, 2.0])
def test_pow_at_zero_base(device, p):
    x = np.array([0.0, 1.5, -2.0], dtype=np.float32)
    compare(lambda t: t ** p, lambda t: t ** p, [x], device)


def test_sigmoid_large_inputs(device):
    x = np.array([-1000.0, -200.0, -100.0, -88.0, -50.0, -20.0, 0.0, 20.0, 50.0, 88.0, 100.0,
                  1000.0], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise"):  # no overflow or nan on the CPU
        compare(lambda t: t.sigmoid(), torch.sigmoid, [x], device, atol=1e-30)
    out = tt.tensor(x, device=device).sigmoid().numpy()
    assert np.all(np.isfinite(out)) and out[0] == 0.0 and out[-1] == 1.0


def test_tanh_large_inputs(device):
    x = np.array([-1000.0, -30.0, 0.0, 30.0, 1000.0], dtype=np.float32)
    compare(lambda t: t.tanh(), torch.tanh, [x], device)


def test_relu_gradient_is_zero_at_negative_and_one_at_positive(device):
    x = leaf(np.array([-2.0, -0.5, 0.5, 3.0], dtype=np.float32), device)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0, 1.0])


# -------------------------------------------------------------------------- matmul

MATMUL_SHAPES = [
    ((4,), (4,)),            # dot product -> 0-d
    ((4,), (4, 3)),          # vector @ matrix
    ((5, 4), (4,)),          # matrix @ vector
    ((5, 4), (4, 3)),        # matrix @ matrix
    ((2, 5, 4), (4, 3)),     # batched @ matrix
    ((5, 4), (2, 4, 3)),     # matrix @ batched
    ((2, 1, 5, 4), (3, 4, 2)),  # broadcast batch dims
    ((2, 5, 4), (4,)),       # batched @ vector
    ((4,), (2, 4, 3)),       # vector @ batched
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_matches_torch(device, sa, sb):
    rng = np.random.default_rng(8)
    a, b = rand(rng, sa), rand(rng, sb)
    compare(lambda x, y: x @ y, torch.matmul, [a, b], device, atol=1e-5)


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_gradcheck(device, sa, sb):
    rng = np.random.default_rng(9)
    gradcheck(lambda x, y: x.matmul(y), [rand(rng, sa, dtype=np.float64),
                                          rand(rng, sb, dtype=np.float64)], device)


@HYP
@given(shapes=mutually_broadcastable_shapes(signature="(m?,n),(n,p?)->(m?,p?)", max_dims=4,
                                            max_side=4),
       seed=st.integers(0, 2**16))
def test_matmul_random_shapes(device, shapes, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    compare(lambda x, y: x @ y, torch.matmul, [rand(rng, sa), rand(rng, sb)], device,
            atol=1e-5, seed=seed)


def test_matmul_with_one_operand_not_requiring_grad(device):
    rng = np.random.default_rng(10)
    a = leaf(rand(rng, (3, 4)), device)
    b = tt.tensor(rand(rng, (4, 2)), device=device)
    (a @ b).sum().backward()
    assert b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), np.broadcast_to(b.numpy().sum(1), (3, 4)),
                               rtol=1e-6)


# ---------------------------------------------------------------------- reductions


def _axis_strategy(ndim: int):
    axes = st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                    unique_by=lambda a: a % ndim)
    return st.one_of(st.none(), st.integers(-ndim, ndim - 1), axes.map(tuple))


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@HYP
@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=4, max_side=4),
       keepdim=st.booleans(), seed=st.integers(0, 2**16))
def test_reduction_matches_torch(device, op, data, shape, keepdim, seed):
    axis = data.draw(_axis_strategy(len(shape)))
    rng = np.random.default_rng(seed)
    # amax/amin: few distinct values, so ties happen and must share the gradient like torch's
    x = (rng.integers(-3, 4, size=shape).astype(np.float32) if op.startswith("am")
         else rand(rng, shape))
    dims = tuple(range(len(shape))) if axis is None else axis

    def tt_fn(t):
        return getattr(t, op)(axis, keepdim)

    def torch_fn(t):
        return getattr(torch, op)(t, dim=dims, keepdim=keepdim)

    compare(tt_fn, torch_fn, [x], device, atol=1e-5, seed=seed)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("axis,keepdim", [(None, False), (None, True), (1, False), (-1, True),
                                          ((0, 2), False), ((2, 0), True)])
def test_reduction_gradcheck(device, op, axis, keepdim):
    x = np.random.default_rng(11).permutation(24).reshape(2, 3, 4) / 7.0  # distinct: no ties
    gradcheck(lambda t: getattr(t, op)(axis, keepdim), [x], device)


def test_reduction_default_reduces_everything(device):
    x = rand(np.random.default_rng(12), (3, 4))
    compare(lambda t: t.sum(), torch.sum, [x], device)
    compare(lambda t: t.mean(), torch.mean, [x], device)
    compare(lambda t: t.max(), torch.amax, [x], device)


def test_max_of_all_equal_values_splits_gradient(device):
    x = leaf(np.full((2, 2), 3.0, dtype=np.float32), device)
    x.max().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 0.25, dtype=np.float32))


def test_reduction_axis_out_of_range(device):
    x = tt.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match="axis 2"):
        x.sum(2)


# --------------------------------------------------------------------------- shapes

SHAPE_OPS = {
    "reshape": (lambda t: t.reshape(4, 6), lambda t: t.reshape(4, 6)),
    "reshape_tuple_neg": (lambda t: t.reshape((3, -1)), lambda t: t.reshape((3, -1))),
    "view": (lambda t: t.view(24), lambda t: t.view(24)),
    "view_neg": (lambda t: t.view(-1, 2, 3), lambda t: t.view(-1, 2, 3)),
    "transpose": (lambda t: t.transpose(0, 2), lambda t: t.transpose(0, 2)),
    "transpose_neg": (lambda t: t.transpose(-1, -2), lambda t: t.transpose(-1, -2)),
    "permute": (lambda t: t.permute(1, 2, 0), lambda t: t.permute(1, 2, 0)),
    "permute_seq": (lambda t: t.permute((2, 0, 1)), lambda t: t.permute((2, 0, 1))),
    "flatten": (lambda t: t.flatten(), lambda t: t.flatten()),
    "flatten_1": (lambda t: t.flatten(1), lambda t: t.flatten(1)),
    "flatten_0_1": (lambda t: t.flatten(0, 1), lambda t: t.flatten(0, 1)),
    "T": (lambda t: t.T, lambda t: t.permute(2, 1, 0)),
    "T_after_reshape": (lambda t: t.reshape(6, 4).T, lambda t: t.reshape(6, 4).T),
}


@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_op_matches_torch(device, name):
    tt_fn, torch_fn = SHAPE_OPS[name]
    x = rand(np.random.default_rng(13), (2, 3, 4))
    compare(tt_fn, torch_fn, [x], device, rtol=0, atol=0)
    # a non-uniform function after the reshaping catches any element mix-up in backward
    compare(lambda t: tt_fn(t) * tt_fn(t).exp(), lambda t: torch_fn(t) * torch_fn(t).exp(),
            [x], device)


@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_op_gradcheck(device, name):
    tt_fn, _ = SHAPE_OPS[name]
    x = rand(np.random.default_rng(14), (2, 3, 4), dtype=np.float64)
    gradcheck(tt_fn, [x], device)


def test_T_of_1d_and_0d(device):
    x = rand(np.random.default_rng(15), (5,))
    compare(lambda t: t.T, lambda t: t * 1, [x], device, rtol=0, atol=0)  # identity, as torch
    compare(lambda t: t.T, lambda t: t * 1, [np.full((), 2.0, np.float32)], device)


def test_reshape_error_names_shapes(device):
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 2\)"):
        tt.zeros(2, 3, device=device).reshape(4, 2)


# ------------------------------------------------------------------------- indexing


def _idx(a):  # numpy index arrays, converted per library
    return np.asarray(a)


INDEX_CASES = {
    "int": lambda T: 1,
    "neg_int": lambda T: -1,
    "slice": lambda T: slice(1, 3),
    "step_slice": lambda T: (slice(None), slice(None, None, 2)),
    "ellipsis": lambda T: (Ellipsis, 1),
    "int_and_slice": lambda T: (1, slice(1, None)),
    "newaxis": lambda T: (None, slice(1, 3), 0),
    "int_array_repeats": lambda T: T(_idx([0, 2, 0, 0, 3])),
    "int_array_2d": lambda T: T(_idx([[1, 0], [1, 1]])),
    "two_int_arrays": lambda T: (T(_idx([0, 1, 1, 3])), T(_idx([2, 2, 0, 2]))),
    "slice_and_array": lambda T: (slice(1, None), T(_idx([0, 0, 4]))),
    "int_list": lambda T: [3, 3, 1],
    "bool_rows": lambda T: T(_idx([True, False, True, True])),
    "bool_full": lambda T: T(_idx(np.arange(20).reshape(4, 5) % 3 == 0)),
}


@pytest.mark.parametrize("name", list(INDEX_CASES))
def test_indexing_matches_torch(device, name):
    make = INDEX_CASES[name]
    x = rand(np.random.default_rng(16), (4, 5))

    def tt_conv(a):
        return tt.tensor(a, device=device)

    def torch_conv(a):
        return torch.from_numpy(a)

    compare(lambda t: t[make(tt_conv)], lambda t: t[make(torch_conv)], [x], device,
            rtol=0, atol=0)
    gradcheck(lambda t: t[make(tt_conv)], [x.astype(np.float64)], device)


def test_negative_step_slice(device):  # torch has no negative steps: compare with flip
    x = rand(np.random.default_rng(16), (4, 5))
    compare(lambda t: t[:, ::-1], lambda t: t.flip(1), [x], device, rtol=0, atol=0)
    gradcheck(lambda t: t[:, ::-1], [x.astype(np.float64)], device)


def test_index_with_mask_from_comparison(device):
    x = rand(np.random.default_rng(17), (3, 4))
    compare(lambda t: t[t > 0] * 3, lambda t: t[t > 0] * 3, [x], device)


def test_repeated_index_accumulates_gradient(device):
    x = leaf(np.arange(4, dtype=np.float32), device)
    x[tt.tensor([1, 1, 1, 3], device=device)].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 3.0, 0.0, 1.0])


# ---------------------------------------------------------------- softmax, losses, linear


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_log_softmax_matches_torch(device, dim):
    x = rand(np.random.default_rng(18), (3, 5), -4, 4)
    compare(lambda t: t.log_softmax(dim), lambda t: torch.log_softmax(t, dim), [x], device)
    gradcheck(lambda t: t.log_softmax(dim), [x.astype(np.float64)], device)


def test_log_softmax_functional_3d_and_large_values(device):
    from tinytrain.nn import functional as F

    x = rand(np.random.default_rng(19), (2, 3, 4), -4, 4) + np.float32(1000.0)
    x[1] -= 2000.0
    compare(lambda t: F.log_softmax(t, dim=1), lambda t: torch.log_softmax(t, 1), [x], device,
            atol=1e-5)
    out = F.log_softmax(tt.tensor(x, device=device), dim=1).numpy()
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(device, reduction):
    from tinytrain.nn import functional as F

    rng = np.random.default_rng(20)
    logits = rand(rng, (6, 4), -3, 3)
    logits[0] *= 500.0  # large logits stay finite
    targets = np.array([0, 3, 1, 1, 2, 3], dtype=np.int64)
    compare(lambda t: F.cross_entropy(t, tt.tensor(targets, device=device),
                                      reduction=reduction),
            lambda t: TF.cross_entropy(t, torch.from_numpy(targets), reduction=reduction),
            [logits], device, atol=1e-5)
    gradcheck(lambda t: F.cross_entropy(t, targets, reduction=reduction),
              [logits.astype(np.float64) / 500.0], device)


def test_cross_entropy_module(device):
    from tinytrain import nn

    rng = np.random.default_rng(21)
    logits = rand(rng, (5, 3))
    targets = rng.integers(0, 3, size=5)
    compare(lambda t: nn.CrossEntropyLoss()(t, tt.tensor(targets, device=device)),
            lambda t: torch.nn.CrossEntropyLoss()(t, torch.from_numpy(targets)),
            [logits], device)


def test_cross_entropy_rejects_bad_targets(device):
    from tinytrain.nn import functional as F

    logits = tt.zeros(3, 4, device=device)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        F.cross_entropy(logits, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match="shape"):
        F.cross_entropy(logits, np.array([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(logits, np.array([0.0, 1.0, 2.0]))


@pytest.mark.parametrize("xshape", [(3,), (5, 3), (2, 4, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(device, xshape, bias):
    from tinytrain.nn import functional as F

    rng = np.random.default_rng(22)
    arrays = [rand(rng, xshape), rand(rng, (2, 3))] + ([rand(rng, (2,))] if bias else [])
    compare(lambda *a: F.linear(*a), lambda *a: TF.linear(*a), arrays, device)
    gradcheck(lambda *a: F.linear(*a), [a.astype(np.float64) for a in arrays], device)


def test_linear_shape_error_names_shapes(device):
    from tinytrain.nn import functional as F

    with pytest.raises(ValueError, match=r"\(5, 4\).*\(2, 3\)"):
        F.linear(tt.zeros(5, 4, device=device), tt.zeros(2, 3, device=device))


# ---------------------------------------------------------------------- dtype handling


def test_float64_stays_float64(device):
    x = leaf(np.ones((2, 3)), device)
    y = ((x * 2.0 + 1.0) / 3.0).exp().sigmoid().sum()
    assert y.dtype == np.float64
    y.backward()
    assert x.grad.dtype == np.float64


def test_python_scalars_keep_float32(device):
    x = tt.ones(2, device=device)
    for y in (x + 1, 1 - x, x * 2.5, 3 / x, x ** 2, 2.0 ** x, -x):
        assert y.dtype == np.float32, y


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_tensor_with_python_int_keeps_dtype(device, dtype):
    x = tt.tensor(np.array([1, 2, 3], dtype=dtype), device=device)
    for y, expected in ((x + 1, [2, 3, 4]), (2 * x, [2, 4, 6]), (x - 1, [0, 1, 2])):
        assert y.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(y.numpy(), expected)


FP16_SCALAR_OPS = {  # float16 times / divided by a number: computed in float32, rounded once
    "div_65536": lambda L, x: x / 65536,
    "mul_1e-7": lambda L, x: x * 1e-7,
    "rmul_1e-7": lambda L, x: 1e-7 * x,
    "rdiv_70000": lambda L, x: 70000.0 / x,
    "div_0d": lambda L, x: x / L.tensor(65536.0),
    "mul_0d_int": lambda L, x: x * L.tensor(70000),
    "mul_": lambda L, x: x.clone().mul_(65536.0),
    "div_": lambda L, x: x.clone().div_(1e7),
    "add_rounds_first": lambda L, x: x + 70000.0,  # PyTorch rounds the number here (inf)
    "0d_first_rounds": lambda L, x: L.tensor(70000.0) / x,
}


@pytest.mark.parametrize("op", list(FP16_SCALAR_OPS))
def test_float16_with_a_number_computes_in_float32(device, op):
    values = [1.5, -3.0, 0.29, -0.29, 1e-3, -60000.0, 2.0]
    fn = FP16_SCALAR_OPS[op]
    expected = fn(torch, torch.tensor(values, dtype=torch.float16))
    actual = fn(tt, tt.tensor(values, dtype=tt.float16, device=device))
    assert actual.dtype == tt.float16
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_float16_scalar_gradient_and_pow_overflow(device):
    x = tt.tensor([1.5], dtype=tt.float16, device=device, requires_grad=True)
    (x / 65536).sum().backward()
    tx = torch.tensor([1.5], dtype=torch.float16, requires_grad=True)
    (tx / 65536).sum().backward()
    assert x.grad.dtype == tt.float16
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    with pytest.raises(RuntimeError, match="cannot be converted to type float16 without overflow"):
        x.detach() ** 1e10
    with pytest.raises(RuntimeError, match="without overflow"):
        x.detach().pow(65536.0)
    np.testing.assert_array_equal((x.detach() ** 65504.0).numpy(), [np.inf])


INT_NEGATIVE_POWERS = {  # integer base, integer tensor exponent (a number exponent raises)
    "tensor": ([2, 1, -1, 3, -2, 0, -1], [-1, -2, -3, 0, -1, -1, -2], "int64"),
    "0d_exponent": ([2, 1, -1], -3, "int64"),
    "int8": ([2, 1, -1, -1], [-1, -2, -3, 4], "int8"),
    "0d_base": (-1, [-1, -2, 3], "int64"),
}


@pytest.mark.parametrize("case", list(INT_NEGATIVE_POWERS))
def test_integer_to_negative_integer_power(device, case):
    base, exponent, dtype = INT_NEGATIVE_POWERS[case]
    tdt = getattr(torch, dtype)
    expected = torch.tensor(base, dtype=tdt) ** torch.tensor(exponent, dtype=tdt)
    a, b = (tt.tensor(v, dtype=dtype, device=device) for v in (base, exponent))
    assert (a ** b).dtype == np.dtype(dtype)
    np.testing.assert_array_equal((a ** b).numpy(), expected.numpy())
    if a.shape == tuple(expected.shape):  # the in-place form too
        np.testing.assert_array_equal(a.clone().pow_(b).numpy(), expected.numpy())
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        a ** -1  # a number exponent: PyTorch refuses
