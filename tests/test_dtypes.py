"""One dtype-promotion rule, PyTorch's: ``tt.result_type`` and the dtype and values of every
element-wise binary op, over a grid of (dtype, dtype / 0-d tensor / Python number, op),
against ``torch.result_type`` and torch's actual results."""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F

# x / False is inf and x % False nan in both libraries; NumPy also warns
pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")]

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]
OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "**": operator.pow, "//": operator.floordiv, "%": operator.mod, "==": operator.eq,
    "<": operator.lt, ">=": operator.ge,
}
VALUES = {"bool": [True, False, True], "default": [1, 2, 3]}
OTHER = {"bool": [True, True, False], "default": [2, 1, 3]}


def arrays(dtype: str, values: dict) -> np.ndarray:
    return np.array(values["bool" if dtype == "bool" else "default"], dtype=dtype)


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def both(dtype: str, values: dict, zero_d: bool = False):
    a = arrays(dtype, values)
    if zero_d:
        a = a[1]
    return tt.tensor(np.asarray(a)), torch.tensor(np.asarray(a))


def check_same(ours_fn, torch_fn):
    """Same dtype and values as torch, or an error where torch raises one."""
    try:
        ref = torch_fn()
    except (RuntimeError, TypeError, ValueError):
        with pytest.raises((RuntimeError, TypeError, ValueError)):
            ours_fn()
        return
    out = ours_fn()
    assert str(out.dtype) == str(ref.dtype).removeprefix("torch."), (out.dtype, ref.dtype)
    assert out.shape == tuple(ref.shape)
    rtol = 2e-3 if out.dtype == np.float16 else 1e-6
    np.testing.assert_allclose(out.numpy().astype(np.float64),
                               ref.numpy().astype(np.float64), rtol=rtol)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("b", DTYPES)
@pytest.mark.parametrize("a", DTYPES)
def test_tensor_op_tensor(a, b, op):
    (x, tx), (y, ty) = both(a, VALUES), both(b, OTHER)
    assert tt.result_type(x, y) == np.dtype(str(torch.result_type(tx, ty)).removeprefix("torch."))
    check_same(lambda: OPS[op](x, y), lambda: OPS[op](tx, ty))


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("b", DTYPES)
@pytest.mark.parametrize("a", DTYPES)
def test_tensor_op_zero_dim_tensor(a, b, op):
    """0-d tensors are weaker than dimensioned ones of the same category."""
    (x, tx), (y, ty) = both(a, VALUES), both(b, OTHER, zero_d=True)
    assert tt.result_type(x, y) == np.dtype(str(torch.result_type(tx, ty)).removeprefix("torch."))
    check_same(lambda: OPS[op](x, y), lambda: OPS[op](tx, ty))
    check_same(lambda: OPS[op](y, x), lambda: OPS[op](ty, tx))


@pytest.mark.parametrize("scalar", [True, 2, 3.5, -1], ids=["True", "2", "3.5", "-1"])
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("a", DTYPES)
def test_tensor_op_python_number(a, op, scalar):
    """Python numbers are weak: they raise the category only (int * 0.5 is float32)."""
    x, tx = both(a, VALUES)
    assert tt.result_type(x, scalar) == np.dtype(
        str(torch.result_type(tx, scalar)).removeprefix("torch."))
    check_same(lambda: OPS[op](x, scalar), lambda: OPS[op](tx, scalar))
    check_same(lambda: OPS[op](scalar, x), lambda: OPS[op](scalar, tx))


def test_the_issue_examples():
    assert (tt.tensor([4, 9]) ** 0.5).tolist() == [2.0, 3.0]
    assert (tt.tensor([4, 9]) ** 0.5).dtype == tt.float32
    assert (tt.arange(4) / 2).dtype == tt.float32
    assert (tt.arange(4) * 0.5).tolist() == [0.0, 0.5, 1.0, 1.5]
    img = tt.tensor(np.array([[0, 51, 255]], dtype=np.uint8))
    scaled = img / 255.0
    assert scaled.dtype == tt.float32 and np.allclose(scaled.numpy(), [[0, 0.2, 1]])
    assert (img + 1).dtype == tt.uint8
    assert (tt.tensor([1.0, 2.0], dtype=tt.float16) * 2.0).dtype == tt.float16
    assert (tt.ones(3) + tt.tensor(1.0, dtype=tt.float64)).dtype == tt.float32
    assert (tt.tensor([3, 4]) / tt.tensor([2, 2])).tolist() == [1.5, 2.0]


def test_numpy_scalars_are_weak_like_python_numbers():
    x = tt.ones(2)
    assert (x * np.float64(2.0)).dtype == tt.float32
    assert (tt.tensor([1, 2]) * np.float64(0.5)).dtype == tt.float32
    assert (torch.ones(2) * np.float64(2.0)).dtype == torch.float32  # torch agrees


def test_out_of_range_python_ints_wrap_as_in_torch():
    x, t = tt.tensor(np.array([44, 255], np.uint8)), torch.tensor([44, 255], dtype=torch.uint8)
    assert (x == 300).tolist() == (t == 300).tolist() == [True, False]
    assert (x < -1).tolist() == (t < -1).tolist()
    assert (x + 300).tolist() == (t + 300).tolist()


def test_integer_to_negative_integer_power_raises_like_torch():
    with pytest.raises(RuntimeError, match="negative integer powers"):
        tt.tensor([2, 3]) ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.tensor([2, 3]) ** -1
    assert (tt.tensor([2.0]) ** -1).tolist() == [0.5]


@pytest.mark.parametrize("dtype", DTYPES[1:4])
@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "sigmoid", "tanh"])
def test_float_functions_of_integers_are_float32(dtype, fn):
    x, t = tt.tensor(np.array([1, 4], dtype)), torch.tensor(np.array([1, 4], dtype))
    check_same(lambda: getattr(x, fn)(), lambda: getattr(t, fn)())


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_of_integers_and_bools_is_int64(dtype):
    x, t = both(dtype, VALUES)
    check_same(lambda: x.sum(), lambda: t.sum())
    check_same(lambda: (x == x).sum(), lambda: (t == t).sum())


def test_mixed_dtype_gradients_come_back_in_each_inputs_dtype():
    a = tt.tensor([1.0, 2.0], dtype=tt.float16, requires_grad=True)
    b = tt.tensor([3.0, 4.0], dtype=tt.float64, requires_grad=True)
    c = tt.tensor(2.0, requires_grad=True)  # 0-d float32: weaker, the result stays float64
    y = a * b * c
    ta = torch.tensor([1.0, 2.0], dtype=torch.float16, requires_grad=True)
    tb = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    tc = torch.tensor(2.0, requires_grad=True)
    ty = ta * tb * tc
    assert str(y.dtype) == str(ty.dtype).removeprefix("torch.") == "float64"
    y.sum().backward()
    ty.sum().backward()
    for ours, ref in ((a, ta), (b, tb), (c, tc)):
        assert str(ours.grad.dtype) == str(ref.grad.dtype).removeprefix("torch.")
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=1e-3)


def test_matrix_products_raise_one_clear_error_each():
    a32, a64 = tt.ones(2, 3), tt.ones(3, 2, dtype=tt.float64)
    with pytest.raises(RuntimeError, match=r"matmul: .*float32 and float64"):
        a32 @ a64
    with pytest.raises(RuntimeError, match=r"linear: .*float64 and float32"):
        F.linear(a64.T, tt.ones(4, 3))
    with pytest.raises(RuntimeError, match=r"conv2d: .*float64 and float32"):
        F.conv2d(tt.ones(1, 1, 4, 4, dtype=tt.float64), tt.ones(1, 1, 3, 3))
    with pytest.raises(RuntimeError):  # torch raises for each of them too
        torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4, dtype=torch.float64),
                                   torch.ones(1, 1, 3, 3))


def test_promote_types_and_can_cast_match_torch():
    for a in DTYPES:
        for b in DTYPES:
            ours = tt.promote_types(np.dtype(a), np.dtype(b))
            ref = torch.promote_types(torch_dtype(a), torch_dtype(b))
            assert str(ours) == str(ref).removeprefix("torch."), (a, b)
            assert tt.can_cast(np.dtype(a), np.dtype(b)) == torch.can_cast(torch_dtype(a),
                                                                           torch_dtype(b))


def _lists_of_mixed_items(lib):
    f64, i32 = lib.tensor(0.1, dtype=lib.float64), lib.tensor(1, dtype=lib.int32)
    return [[f64, f64 * 3], [np.float64(0.1)], [i32], [np.float64(0.1), 1.0],
            [np.float32(0.1), 1.0], [np.int32(1), 2], [1.0, np.int32(1)], [i32, 2.5],
            [lib.tensor(1.0, dtype=lib.float16), 2.5], [f64, lib.tensor(1.0, dtype=lib.float16)],
            [True, 1], [True, False], [[np.float64(1)], [2.0]], [], [[], []], (1, 2.0),
            [lib.tensor(True), 0], [np.uint8(3), np.int8(2)], [lib.tensor(2, dtype=lib.uint8), -1],
            [np.float16(1), 1], [[1, 2], [np.int16(3), 4]]]


@pytest.mark.parametrize("case", range(21))
def test_tensor_of_a_list_takes_its_items_dtypes_promoted_like_torch(case):
    """tensor([a, a * 3]) of float64 0-d tensors was float32 (the values rounded), as were
    lists of NumPy float64 scalars; PyTorch promotes the items' own dtypes."""
    assert len(_lists_of_mixed_items(tt)) == 21  # (the parametrisation's range)
    ours, theirs = tt.tensor(_lists_of_mixed_items(tt)[case]), torch.tensor(
        _lists_of_mixed_items(torch)[case])
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert ours.tolist() == theirs.tolist()
