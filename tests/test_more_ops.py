"""The tensor functions ports from PyTorch asked for next (prod, cumprod, diff, nansum,
nanmean, roll, lerp, fmod, index_add, scatter_add, take, bernoulli, einsum, median, kl_div),
each against PyTorch: values, dtypes and shapes of the results, and the gradient of every
float input for a random upstream gradient, in float32 and float64.

Each case is a function ``f(lib, *tensors)`` written once in PyTorch's words and run with
``lib`` = tinytrain (tensors on the ``device`` under test: the ``cuda`` copies run on a GPU
machine) and ``lib`` = torch (on the CPU). Bad input must raise an error that names the
function and what was wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F

DTYPES = [np.float32, np.float64]
TOL = {np.dtype(np.float32): (2e-5, 2e-6), np.dtype(np.float64): (1e-10, 1e-12)}


def outputs(value):
    """The tensors of a result (one tensor, or a tuple / named tuple of them)."""
    if isinstance(value, tuple | list):
        return [t for v in value for t in outputs(v)]
    return [value]


def check(fn, *arrays, device, grad=True, tol=1):
    """``fn(tt, ...)`` on ``device`` against ``fn(torch, ...)``: each output's shape, dtype
    and values, then each float input's gradient for one random upstream gradient per
    float output (``grad``: for all inputs, or a tuple, one per input). ``tol`` scales the
    dtype's tolerance (long products and sums)."""
    wants = grad if isinstance(grad, tuple) else (grad,) * len(arrays)
    wants = [w and a.dtype.kind == "f" for w, a in zip(wants, arrays)]
    ins = [tt.tensor(a, device=device, requires_grad=w) for a, w in zip(arrays, wants)]
    tins = [torch.tensor(a, requires_grad=w) for a, w in zip(arrays, wants)]
    ours, theirs = outputs(fn(tt, *ins)), outputs(fn(torch, *tins))
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert isinstance(o, tt.Tensor) and o.device == device
        assert o.shape == tuple(t.shape), (o.shape, tuple(t.shape))
        assert str(o.dtype) == str(t.dtype).removeprefix("torch."), (o.dtype, t.dtype)
        rtol, atol = TOL.get(o.dtype, (0, 0))
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol * tol, atol * tol)
    pairs = [(o, t) for o, t in zip(ours, theirs) if t.requires_grad]
    assert [o.requires_grad for o, _ in pairs] == [True] * len(pairs)
    if not pairs:
        return
    rng = np.random.default_rng(1)
    total = ttotal = 0
    for o, t in pairs:
        up = rng.standard_normal(tuple(t.shape)).astype(o.dtype)
        total = total + (o * tt.tensor(up, device=device)).sum()
        ttotal = ttotal + (t * torch.tensor(up)).sum()
    total.backward()
    ttotal.backward()
    for a, b in zip(ins, tins):
        if b.requires_grad:
            assert a.grad is not None and a.grad.device == device
            gb = np.zeros(tuple(b.shape), a.dtype) if b.grad is None else b.grad.numpy()
            rtol, atol = TOL[a.dtype]
            np.testing.assert_allclose(a.grad.numpy(), gb, rtol * tol, atol * tol)


def data(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


# ------------------------------------------------------------------ prod and cumprod

WITH_ZEROS = {
    "no zero": np.array([[1.5, -2.0, 0.5, 3.0], [0.7, 1.2, -1.1, 2.0]]),
    "one zero": np.array([[1.5, 0.0, 0.5, 3.0], [0.7, 1.2, -1.1, 0.0]]),
    "two zeros": np.array([[0.0, 2.0, 0.0, 3.0], [0.0, 0.0, -1.1, 2.0]]),
    "zero first and last": np.array([[0.0, 2.0, 4.0, 0.0], [2.0, 0.0, 0.5, 0.0]]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(WITH_ZEROS))
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_prod_and_its_gradient_with_zeros_match_torch(device, dtype, case, dim, keepdim):
    x = WITH_ZEROS[case].astype(dtype)
    if dim is None:
        check(lambda L, a: L.prod(a), x, device=device)
        check(lambda L, a: a.prod(), x, device=device)
    else:
        check(lambda L, a: L.prod(a, dim, keepdim), x, device=device)
        check(lambda L, a: a.prod(dim=dim, keepdim=keepdim), x, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(WITH_ZEROS))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_and_its_gradient_with_zeros_match_torch(device, dtype, case, dim):
    x = WITH_ZEROS[case].astype(dtype)
    check(lambda L, a: L.cumprod(a, dim), x, device=device)
    check(lambda L, a: (a * 1).cumprod_(dim), x, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prod_and_cumprod_of_bigger_and_empty_and_integer_tensors(device, dtype):
    x = data((3, 4, 5), dtype, low=0.5, high=1.5)
    check(lambda L, a: (a.prod(1), a.prod(-1, True), L.cumprod(a, 2), a.cumprod(0)), x,
          device=device, tol=10)
    empty = np.zeros((0, 3), dtype)
    check(lambda L, a: (a.prod(), a.prod(0), a.prod(1), a.cumprod(0), a.cumprod(1)), empty,
          device=device)
    check(lambda L, a: (a.prod(), a.prod(0), a.cumprod(0)), np.array(2.5, dtype), device=device)
    ints = np.array([[1, -2, 3], [4, 5, 0]], np.int32)
    check(lambda L, i: (i.prod(), i.prod(1), i.cumprod(1), i.prod(dtype=L.float64),
                        i.cumprod(0, dtype=L.float64)), ints, device=device)
    check(lambda L, b: (b.prod(), b.cumprod(0)), np.array([True, True, False]), device=device)


def test_prod_and_cumprod_refuse_bad_dims():
    x = tt.ones(2, 3)
    with pytest.raises(IndexError, match="axis 2 is out of range"):
        x.prod(2)
    with pytest.raises(TypeError, match="prod.*dim.*int"):
        x.prod((0, 1))
    with pytest.raises(IndexError, match="axis -3 is out of range"):
        tt.cumprod(x, -3)


# ------------------------------------------------------------------ diff


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 2, 5])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_diff_matches_torch(device, dtype, n, dim):
    x = data((4, 5), dtype)
    check(lambda L, a: L.diff(a, n, dim), x, device=device)
    check(lambda L, a: a.diff(n=n, dim=dim), x, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_diff_with_prepend_and_append_and_of_bools_and_ints(device, dtype):
    x, before, after = data((3, 4), dtype), data((3, 2), dtype, 1), data((1, 4), dtype, 2)
    check(lambda L, a, p: L.diff(a, prepend=p), x, before, device=device)
    check(lambda L, a, q: L.diff(a, 2, 0, append=q), x, after, device=device)
    check(lambda L, a, p, q: a.diff(dim=1, prepend=p, append=q[:, :2].expand(3, 2)), x,
          before, after, device=device)
    check(lambda L, b: (L.diff(b), L.diff(b, 2)), np.array([True, False, False, True]),
          device=device)
    check(lambda L, i, p: L.diff(i, prepend=p), np.array([1, 3, 2]),
          np.array([1.5], dtype), device=device)


def test_diff_refuses_bad_input():
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        tt.diff(tt.tensor(3.0))
    with pytest.raises(RuntimeError, match="order must be non-negative but got -1"):
        tt.ones(3).diff(-1)
    with pytest.raises(RuntimeError, match=r"diff: prepend of shape \(2, 2\) does not fit the "
                                           r"input of shape \(3, 4\)"):
        tt.ones(3, 4).diff(prepend=tt.ones(2, 2))
    with pytest.raises(IndexError, match="axis 2 is out of range"):
        tt.ones(3, 4).diff(dim=2)


# ------------------------------------------------------------------ nansum, nanmean

NANS = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan],
                 [0.5, 2.0, np.nan, 4.0]])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # (0 / 0: all NaN)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False),
                                         ((0, 1), True)])
def test_nansum_and_nanmean_skip_nans_and_give_them_no_gradient(device, dtype, dim, keepdim):
    x = NANS.astype(dtype)
    check(lambda L, a: (L.nansum(a, dim, keepdim), a.nanmean(dim, keepdim)), x, device=device,
          grad=False)
    check(lambda L, a: (L.nansum(a, dim, keepdim), a.nanmean(dim, keepdim)), x[[0, 2]],
          device=device)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_nanmean_of_nans_only_is_nan_and_passes_no_gradient(device):
    x = tt.tensor(NANS, device=device, requires_grad=True)
    means = x.nanmean(1)
    assert np.isnan(means[1].item())
    means.sum().backward()  # (PyTorch's is NaN on that row: 0 * (1 / 0) of its nansum)
    np.testing.assert_array_equal(x.grad.numpy()[1], np.zeros(4, np.float32))
    np.testing.assert_allclose(x.grad.numpy()[[0, 2]], ~np.isnan(NANS[[0, 2]]) / 3.0)


def test_nansum_of_integers_is_their_sum_and_nanmean_wants_floats(device):
    check(lambda L, i: (L.nansum(i), i.nansum(0), i.nansum(dtype=L.float64)),
          np.array([[1, 2], [3, 4]]), device=device)
    with pytest.raises(TypeError, match="nanmean.*floating point"):
        tt.tensor([1, 2]).nanmean()


# ------------------------------------------------------------------ roll


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shifts,dims", [(1, None), (-7, None), (2, 0), (-1, -1), ((1, 2), (0, 1)),
                                         ((3, -1), (1, 1)), (5, (2,))])
def test_roll_matches_torch(device, dtype, shifts, dims):
    x = data((2, 3, 4), dtype)
    check(lambda L, a: L.roll(a, shifts, dims), x, device=device)
    check(lambda L, a: a.roll(shifts, dims), x, device=device)


def test_roll_refuses_shifts_and_dims_that_do_not_align():
    with pytest.raises(RuntimeError, match="roll: shifts and dimensions must align"):
        tt.ones(2, 3).roll((1, 2))
    with pytest.raises(RuntimeError, match="roll: shifts and dimensions must align"):
        tt.ones(2, 3).roll(1, (0, 1))
    with pytest.raises(IndexError, match="axis 5 is out of range"):
        tt.ones(2, 3).roll(1, 5)


# ------------------------------------------------------------------ lerp


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 0.8, 1.0, -0.5, 2.0])
def test_lerp_with_a_number_matches_torch(device, dtype, weight):
    start, end = data((3, 4), dtype), data((4,), dtype, 1)
    check(lambda L, s, e: (L.lerp(s, e, weight), s.lerp(e, weight)), start, end, device=device)
    check(lambda L, s, e: (s * 1).lerp_(e, weight), start, end, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lerp_with_a_tensor_weight_broadcasts_and_sends_gradients_to_all_three(device, dtype):
    start, end = data((2, 1, 4), dtype), data((3, 1), dtype, 1)
    weight = data((3, 4), dtype, 2, low=-0.5, high=1.5)
    check(lambda L, s, e, w: L.lerp(s, e, w), start, end, weight, device=device)
    check(lambda L, s, e, w: (s * 1).lerp_(e, w), start.repeat(3, 1), end, weight,
          device=device)


def test_lerp_refuses_mixed_dtypes():
    with pytest.raises(TypeError, match="lerp: expected all operands to have the same dtype"):
        tt.ones(2).lerp(tt.ones(2, dtype=tt.float64), 0.5)
    with pytest.raises(TypeError, match="lerp.*floating point"):
        tt.ones(2, dtype=tt.int64).lerp(tt.ones(2, dtype=tt.int64), 0.5)


# ------------------------------------------------------------------ fmod

SIGNS = np.array([[5.0, -5.0, 5.5, -5.5], [0.25, -7.0, 7.0, 3.0]])
DIVISORS = np.array([3.0, 3.0, -2.0, -2.0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_fmod_keeps_the_dividends_sign_and_matches_torchs_gradients(device, dtype):
    a, b = SIGNS.astype(dtype), DIVISORS.astype(dtype)
    check(lambda L, x, y: (L.fmod(x, y), x.fmod(y), x % y), a, b, device=device)
    check(lambda L, x: (L.fmod(x, 1.5), x.fmod(-2)), a, device=device)
    check(lambda L, x, y: (x * 1).fmod_(y), a, b, device=device)


def test_fmod_of_integers_and_its_errors(device):
    check(lambda L, i, j: (L.fmod(i, j), i.fmod(3), L.fmod(i, 2.5)),
          np.array([5, -5, 7, -7]), np.array([3, 3, -2, -2]), device=device)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tt.tensor([5, 3]).fmod(0)
    with pytest.raises(TypeError, match="Fmod is not implemented for bool"):
        tt.tensor([True]).fmod(True)
    with pytest.raises(RuntimeError, match=r"fmod: shapes \(2,\) and \(3,\) cannot be broadcast"):
        tt.ones(2).fmod(tt.ones(3))


# ------------------------------------------------------------------ index_add, scatter_add, take


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_accumulates_repeated_indices_and_sends_gradients_to_both(device, dtype, dim):
    x = data((4, 5), dtype)
    index = np.array([0, 3, 3, 1, 0, 0])
    shape = [4, 5]
    shape[dim] = len(index)
    source = data(shape, dtype, 1)
    check(lambda L, a, s: L.index_add(a, dim, L.tensor(index), s), x, source, device=device)
    check(lambda L, a, s: a.index_add(dim, L.tensor(index), s, alpha=-2.5), x, source,
          device=device)
    check(lambda L, a, s: (a * 1).index_add_(dim, L.tensor(index), s), x, source, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -2])
def test_scatter_add_accumulates_and_takes_a_larger_src(device, dtype, dim):
    x = data((3, 4), dtype)
    index = np.array([[0, 2, 2], [1, 0, 2]]) if dim != 1 else np.array([[0, 3, 3], [1, 1, 0]])
    src = data((3, 5), dtype, 1)  # larger than the index: the rest is not used
    check(lambda L, a, s: L.scatter_add(a, dim, L.tensor(index), s), x, src, device=device,
          grad=(True, False))  # (PyTorch's backward refuses a src larger than the index)
    src = src[:2, :3]
    check(lambda L, a, s: L.scatter_add(a, dim, L.tensor(index), s), x, src, device=device)
    check(lambda L, a, s: (a * 1).scatter_add_(dim, L.tensor(index), s), x, src, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_take_reads_the_flattened_tensor_with_negative_and_repeated_indices(device, dtype):
    x = data((3, 4), dtype)
    index = np.array([[0, -1, 5], [5, 11, -12]])
    check(lambda L, a: (L.take(a, L.tensor(index)), a.t().take(L.tensor([1, 1, 4]))), x,
          device=device)
    check(lambda L, a: a.take(L.tensor(3)), x, device=device)


def test_index_add_scatter_add_and_take_name_what_does_not_fit():
    x = tt.zeros(3, 2)
    with pytest.raises(IndexError, match="index_add.*index 3 is out of bounds for dimension 0 "
                                         "with size 3"):
        x.index_add(0, tt.tensor([0, 3]), tt.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"index_add\(\): source of shape \[1, 3\] does not "
                                           r"fit.*\[3, 2\].*\[1, 2\]"):
        x.index_add(0, tt.tensor([1]), tt.ones(1, 3))
    with pytest.raises(RuntimeError, match="index_add.*same dtype"):
        x.index_add(0, tt.tensor([1]), tt.ones(1, 2, dtype=tt.float64))
    with pytest.raises(TypeError, match="Expected dtype int64 for index"):
        x.index_add(0, tt.tensor([1.0]), tt.ones(1, 2))
    with pytest.raises(IndexError, match="scatter_add.*index -1 is out of bounds for dimension 1"):
        x.scatter_add(1, tt.tensor([[-1]]), tt.ones(1, 1))
    with pytest.raises(RuntimeError, match=r"scatter_add\(\): index of shape \[4, 1\] does not "
                                           r"fit self of shape \[3, 2\]"):
        x.scatter_add(1, tt.zeros(4, 1, dtype=tt.int64), tt.ones(4, 1))
    with pytest.raises(TypeError, match="scatter_add.*src must be a Tensor"):
        x.scatter_add(0, tt.tensor([[0]]), 1.0)
    with pytest.raises(IndexError, match=r"take\(\): index 6 is out of range for a tensor of 6 "
                                         r"elements"):
        x.take(tt.tensor([0, 6]))
    with pytest.raises(IndexError, match="take.*index -7 is out of range"):
        x.take(tt.tensor([-7]))


# ------------------------------------------------------------------ bernoulli


def test_bernoulli_draws_from_the_seeded_generator_on_every_device(device):
    p = tt.tensor(np.linspace(0, 1, 11), dtype=tt.float32, device=device)
    tt.manual_seed(7)
    first = tt.bernoulli(p)
    tt.manual_seed(7)
    again = p.bernoulli()
    assert first.device == device and first.dtype == tt.float32
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    tt.manual_seed(7)
    np.testing.assert_array_equal(tt.bernoulli(p.cpu()).numpy(), first.numpy())  # as on the CPU
    assert first[0].item() == 0.0 and first[-1].item() == 1.0  # p = 0 and p = 1
    many = tt.bernoulli(tt.full((40000,), 0.3, device=device))
    assert set(np.unique(many.numpy())) == {0.0, 1.0}
    assert abs(many.mean().item() - 0.3) < 0.015  # (4 standard deviations: 0.0023 each)


def test_bernoulli_in_place_and_its_gradient_are_pytorchs(device):
    tt.manual_seed(1)
    filled = tt.zeros(2000, dtype=tt.int64, device=device).bernoulli_(0.25)
    assert filled.dtype == tt.int64 and abs(filled.float().mean().item() - 0.25) < 0.05
    rows = tt.ones(3, 4, dtype=tt.float64, device=device).bernoulli_(tt.tensor([[0.0], [1.0],
                                                                                [0.0]]))
    np.testing.assert_array_equal(rows.numpy(), np.repeat([[0.0], [1.0], [0.0]], 4, axis=1))
    p = tt.full((3,), 0.5, device=device, requires_grad=True)
    draw = tt.bernoulli(p)
    assert draw.requires_grad  # as PyTorch's: a zero gradient
    (draw * 3).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3, np.float32))


def test_bernoulli_refuses_probabilities_outside_0_1_and_generators():
    with pytest.raises(RuntimeError, match=r"bernoulli: probabilities must be in \[0, 1\], got "
                                           r"values from -0.5 to 0.5"):
        tt.tensor([-0.5, 0.5]).bernoulli()
    with pytest.raises(RuntimeError, match=r"bernoulli: probabilities must be in \[0, 1\]"):
        tt.ones(3).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"bernoulli: probabilities must be in \[0, 1\]"):
        tt.tensor([float("nan")]).bernoulli()
    with pytest.raises(TypeError, match="bernoulli: samples need a floating point dtype"):
        tt.bernoulli(tt.tensor([1, 0]))
    with pytest.raises(TypeError, match="bernoulli: generator must be None or a tt.Generator"):
        tt.bernoulli(tt.ones(2), generator=object())


# ------------------------------------------------------------------ einsum

EINSUMS = {
    # equation: shapes of the operands
    "ij,jk->ik": [(2, 3), (3, 4)],
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
    "ij,jk": [(2, 3), (3, 4)],                 # implicit output: ik
    "ba": [(2, 3)],                            # implicit: a transpose
    "ij->ji": [(2, 3)],                        # a view in NumPy: a new tensor here
    "ij->": [(2, 3)],
    "ij->j": [(2, 3)],
    "i,i->": [(4,), (4,)],
    "i,j->ij": [(3,), (4,)],
    "ii": [(3, 3)],                            # the trace
    "ii->i": [(3, 3)],                         # the diagonal
    "iij->ji": [(3, 3, 2)],
    "ii,i->i": [(3, 3), (3,)],
    "ij,k->i": [(2, 3), (4,)],                 # k summed away in one operand only
    "ij,jk,kl->il": [(2, 3), (3, 4), (4, 2)],
    "bn,anm,bm->ba": [(2, 3), (4, 3, 5), (2, 5)],  # bilinear
    "...ij,...jk->...ik": [(2, 1, 3, 4), (5, 4, 2)],  # ellipsis dims broadcast
    "...ij,...jk": [(2, 3, 4), (4, 5)],
    "i...->i": [(2, 3, 4)],                    # the ellipsis summed away
    "...->...": [(2, 3)],
    "b...,b->...": [(2, 3, 4), (2,)],
    "ij,jk->ik ": [(2, 1), (3, 4)],            # a label of size 1 broadcasts
    "Ab , bA": [(2, 3), (3, 2)],               # capitals, spaces
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("equation", list(EINSUMS))
def test_einsum_and_its_gradients_match_torch(device, dtype, equation):
    arrays = [data(shape, dtype, seed) for seed, shape in enumerate(EINSUMS[equation])]
    check(lambda L, *xs: L.einsum(equation, *xs), *arrays, device=device, tol=5)


def test_einsum_takes_the_operands_as_one_list_and_integers(device):
    a, b = data((2, 3), np.float64), data((3, 2), np.float64, 1)
    check(lambda L, x, y: L.einsum("ij,jk->ik", [x, y]), a, b, device=device)
    check(lambda L, i, j: L.einsum("ij,jk", (i, j)), np.arange(6).reshape(2, 3),
          np.arange(6).reshape(3, 2), device=device)


@pytest.mark.parametrize("equation,shapes,message", [
    ("ij,jk->ik", [(2, 3)], "the equation has 2 operands, but 1 were given"),
    ("ij,jk->ii", [(2, 2), (2, 2)], "output subscript i appears more than once"),
    ("ij->ik", [(2, 2)], "output subscript k does not appear in the equation for any input"),
    ("ijk->i", [(2, 2)], "operand 0 has 2 dimensions, but 'ijk' names 3"),
    ("...ijk->i", [(2, 2)], "operand 0 has 2 dimensions, but '...ijk' names 3"),
    ("ij,jk->ik", [(2, 3), (2, 2)], "subscript j has size 2 for operand 1 which does not "
                                    "broadcast with previously seen size 3"),
    ("ii->i", [(3, 2)], "subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    ("i1->i", [(2, 2)], r"invalid subscripts 'i1'"),
    ("a.b", [(2, 2)], r"invalid subscripts 'a.b'"),
])
def test_einsum_names_the_equation_and_what_is_wrong(equation, shapes, message):
    with pytest.raises(RuntimeError, match=message) as info:
        tt.einsum(equation, *[tt.ones(*s) for s in shapes])
    assert repr(equation) in str(info.value)


def test_einsum_refuses_mixed_dtypes():
    with pytest.raises(RuntimeError, match=r"einsum\(\): operands must have one dtype, got "
                                           r"\['float32', 'float64'\]"):
        tt.einsum("i,i", tt.ones(2), tt.ones(2, dtype=tt.float64))


# ------------------------------------------------------------------ median

UNIQUE = np.array([[3.0, -1.0, 2.5, 0.5, 7.0], [1.0, 4.0, -2.0, 6.0, 0.0],
                   [9.0, 8.0, -3.0, 1.5, 2.0], [-4.0, 5.0, 3.5, -0.5, 1.25]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False), (-2, True)])
def test_median_along_a_dim_gives_the_lower_median_and_its_index(device, dtype, dim, keepdim):
    check(lambda L, a: (L.median(a, dim, keepdim), a.median(dim=dim, keepdim=keepdim)),
          UNIQUE.astype(dtype), device=device)
    nan = UNIQUE.astype(dtype)
    nan[1, 3] = np.nan
    check(lambda L, a: L.median(a, dim, keepdim), nan, device=device)  # NaN's index


@pytest.mark.parametrize("dtype", DTYPES)
def test_median_of_all_values_shares_the_gradient_among_ties(device, dtype):
    check(lambda L, a: (L.median(a), a[:, :4].median()), UNIQUE.astype(dtype), device=device)
    ties = np.array([[2.0, 1.0, 2.0], [5.0, 2.0, 0.0]], dtype)
    check(lambda L, a: L.median(a), ties, device=device)
    check(lambda L, a: L.median(a), np.array([1.0, np.nan, 2.0, np.nan], dtype), device=device)
    check(lambda L, a: (a.median(), L.median(a, 0)), np.array(2.5, dtype), device=device)
    check(lambda L, a: L.median(a), np.zeros((0, 2), dtype), device=device)
    check(lambda L, i: (i.median(), i.median(0)), np.array([[4, 1, 3], [2, 6, 5]]),
          device=device)


def test_median_result_is_a_named_pair_and_empty_dims_are_refused():
    values, indices = tt.tensor([[1.0, 3.0, 2.0]]).median(1)
    assert tt.tensor([[1.0, 3.0, 2.0]]).median(1).values.item() == values.item() == 2.0
    assert indices.item() == 2 and indices.dtype == tt.int64
    with pytest.raises(RuntimeError, match="median.*cannot reduce an empty dimension"):
        tt.zeros(0, 3).median(0)
    with pytest.raises(IndexError, match="axis 2 is out of range"):
        tt.zeros(2, 3).median(2)


# ------------------------------------------------------------------ kl_div


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # (PyTorch's warning)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(device, dtype, reduction, log_target):
    logits, other = data((4, 5), dtype), data((4, 5), dtype, 1)
    logp = torch.tensor(logits).log_softmax(1).numpy()
    target = torch.tensor(other).log_softmax(1).numpy()
    target = target if log_target else np.exp(target)
    check(lambda L, x, t: L.nn.functional.kl_div(x, t, reduction=reduction,
                                                 log_target=log_target), logp, target,
          device=device)
    check(lambda L, x, t: L.nn.KLDivLoss(reduction=reduction, log_target=log_target)(x, t),
          logp, target, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_div_with_zero_targets_is_finite_and_broadcasts(device, dtype):
    logp = data((3, 4), dtype, low=-3, high=-0.1)
    target = np.array([[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]],
                      dtype)
    check(lambda L, x, t: (F_of(L).kl_div(x, t, reduction="sum"),
                           F_of(L).kl_div(x, t, reduction="none")),
          logp, target, device=device, grad=(True, False))  # (PyTorch's target gradient is
    #                                                        NaN at the zeros; tinytrain's not)
    check(lambda L, x, t: F_of(L).kl_div(x, t, reduction="batchmean"), logp, target[2],
          device=device)
    check(lambda L, x, t: F_of(L).kl_div(x, t, reduction="batchmean"), np.array(-1.5, dtype),
          np.array(0.3, dtype), device=device)


def F_of(lib):  # noqa: N802
    return lib.nn.functional


def test_kl_div_refuses_unknown_reductions_and_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="kl_div: unknown reduction 'bad'"):
        F.kl_div(tt.zeros(2), tt.zeros(2), reduction="bad")
    with pytest.raises(RuntimeError, match=r"kl_div: shapes \(2, 3\) and \(4,\) cannot be "
                                           r"broadcast"):
        F.kl_div(tt.zeros(2, 3), tt.ones(4))


# ------------------------------------------------------------------ empty tensors


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_tensors_where_pytorch_takes_them(device, dtype):
    empty = np.zeros((0, 3), dtype)
    check(lambda L, a: (L.diff(a, dim=0), a.diff(), a.roll(1), a.roll((1, 2), (0, 1)),
                        a.nansum(), a.nansum(0), a.take(L.tensor([], dtype=L.int64)),
                        L.einsum("ij,jk->ik", a, a.t()), L.einsum("ij->j", a),
                        L.lerp(a, a * 2, 0.25), L.fmod(a, 2.0)), empty, device=device)
    check(lambda L, a: (a.index_add(0, L.tensor([], dtype=L.int64), a[:0]),
                        a.scatter_add(1, L.zeros(0, 3, dtype=L.int64), a[:0])),
          data((2, 3), dtype), device=device)


# ------------------------------------------------------------------ names


NEW = "prod cumprod diff nansum nanmean roll lerp fmod index_add scatter_add take bernoulli median"


def test_the_names_are_where_pytorch_has_them():
    for name in NEW.split() + ["einsum"]:
        assert callable(getattr(tt, name)) and name in tt.__all__
        assert hasattr(torch, name)
    for name in NEW.split() + "cumprod_ lerp_ fmod_ index_add_ scatter_add_ bernoulli_".split():
        assert callable(getattr(tt.ones(1), name)), name
        assert hasattr(torch.ones(1), name)
    assert "kl_div" in F.__all__ and "KLDivLoss" in tt.nn.__all__
    assert tt.nn.KLDivLoss()(tt.zeros(2), tt.ones(2)).item() == 0.0
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])  # NumPy's axis= / keepdims=, as PyTorch takes them
    assert x.prod(axis=1, keepdims=True).shape == (2, 1)
    assert tt.median(x, axis=0).values.tolist() == [1.0, 2.0]


def _zero_d_einsum(L):
    x, scale = L.tensor([1.0, 2.0, 3.0], requires_grad=True), L.tensor(0.5, requires_grad=True)
    return L.einsum("i,->i", x, scale), (x, scale), 1.0


def _lone_scalar_einsum(L):
    s = L.tensor(2.0, requires_grad=True)
    return L.einsum("->", s), (s,), 1.0


def _product_with_two_zeros(L):
    x = L.tensor([0.0, 0.0, 3.0], requires_grad=True)
    return x.prod(), (x,), float("inf")


@pytest.mark.parametrize("case", [_zero_d_einsum, _lone_scalar_einsum, _product_with_two_zeros])
def test_gradients_of_0d_einsum_operands_and_a_product_with_zeros_like_torch(case):
    """einsum's gradient of a 0-d operand came back 1-d (a backward error); a full product
    with two zeros gave NaN for an inf upstream gradient, where PyTorch gives exact zeros."""
    grads = []
    for lib in (tt, torch):
        out, leaves, upstream = case(lib)
        out.backward(lib.full(tuple(out.shape), upstream))
        grads.append([leaf.grad.numpy() for leaf in leaves])
    for got, ref in zip(*grads):
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref)


def test_new_ops_refuse_what_pytorch_refuses_and_take_what_it_takes():
    """take() read a uint8 index as a mask; diff(n=0) returned the input itself; cumprod and
    median took a tuple dim apart; roll refused a 0-d tensor shift; bernoulli(p) was missing;
    scatter_add cast a float64 src silently; an empty index raised."""
    x = tt.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="Expected dtype int64 for index, got uint8"):
        x.take(tt.tensor([0, 2], dtype=tt.uint8))
    d = tt.diff(tt.tensor([1.0, 2.0, 4.0]), n=0)
    d.mul_(10)
    assert d.tolist() == [10.0, 20.0, 40.0]
    for bad in (lambda: x.cumprod((0, 1)), lambda: x.median((0, 1)), lambda: x.roll(1.0, 0),
                lambda: tt.diff(x, n=1.0)):
        with pytest.raises(TypeError, match="argument '(dim|shifts|n)' must be"):
            bad()
    np.testing.assert_array_equal(x.roll(tt.tensor(1), 0).numpy(),
                                  torch.arange(12.0).reshape(3, 4).roll(1, 0).numpy())
    tt.manual_seed(0)
    draws = tt.bernoulli(tt.zeros(10000), 0.3)
    assert draws.shape == (10000,) and 0.27 < float(draws.mean()) < 0.33
    with pytest.raises(RuntimeError, match="same dtype"):
        tt.zeros(3, 4).scatter_add(0, tt.tensor([[0, 1]]), tt.ones(1, 2, dtype=tt.float64))
    assert tt.zeros(3, 4).scatter_add_(0, tt.tensor([], dtype=tt.int64), tt.ones(3, 4)).sum() == 0
