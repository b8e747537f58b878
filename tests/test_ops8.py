"""The tensor ops of ``tinytrain.more_ops`` (repeat_interleave, addcmul/addcdiv, the BLAS-style
addmm family, atan2 ... nan_to_num, erf/erfc/erfinv, meshgrid ... isin, kthvalue, cummax /
cummin, logcumsumexp, rot90, cdist), each against PyTorch: values, dtypes and shapes, the
gradient of every float input for a random upstream gradient, and PyTorch's refusals.

Each case is ``f(lib, *tensors)`` written once in PyTorch's words and run with ``lib`` =
tinytrain on the ``device`` under test and ``lib`` = torch on the CPU.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain.more_ops import erf_array, erfc_array, erfinv_array

DTYPES = [np.float32, np.float64]
TOL = {np.dtype(np.float32): (2e-5, 2e-6), np.dtype(np.float64): (1e-10, 1e-12),
       np.dtype(np.float16): (2e-3, 1e-3)}


def outputs(value):
    if isinstance(value, tuple | list):
        return [t for v in value for t in outputs(v)]
    return [value]


def check(fn, *arrays, device, grad=True, tol=1):
    """``fn(tt, ...)`` on ``device`` against ``fn(torch, ...)``: shapes, dtypes, values, and
    each float input's gradient for one random upstream gradient per float output."""
    wants = [grad and a.dtype.kind == "f" for a in arrays]
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
            gb = np.zeros(tuple(b.shape), a.dtype) if b.grad is None else (b.grad + 0).numpy()
            rtol, atol = TOL[a.dtype]
            np.testing.assert_allclose(a.grad.numpy(), gb, rtol * tol, atol * tol)


def data(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def both_raise(fn, *arrays, error, match, device="cpu"):
    """PyTorch refuses ``fn`` and tinytrain raises ``error`` with ``match``."""
    with pytest.raises(Exception):  # noqa: B017 (PyTorch's type varies; ours is checked)
        fn(torch, *(torch.tensor(a) for a in arrays))
    with pytest.raises(error, match=match):
        fn(tt, *(tt.tensor(a, device=device) for a in arrays))


# ------------------------------------------------------------------ repeat_interleave


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_interleave_matches_torch(device, dtype):
    x = data((2, 3), dtype)
    check(lambda L, a: (L.repeat_interleave(a, 2), a.repeat_interleave(3, dim=1),
                        L.repeat_interleave(a, 0, dim=0), a.repeat_interleave(2, -2)), x,
          device=device)
    reps = [(np.array([1, 0, 2]), 1), (np.array([2, 1]), 0), (np.array([3]), 1),
            (np.array(2), 0), (np.arange(6), None)]
    for r, dim in reps:
        check(lambda L, a, r=r, dim=dim: L.repeat_interleave(a, L.tensor(r), dim=dim), x,
              device=device)
    check(lambda L, a: a.repeat_interleave(L.tensor([2, 1]), dim=0, output_size=3), x,
          device=device)
    check(lambda L, a: L.repeat_interleave(a, 2), np.array(1.5, dtype), device=device)
    check(lambda L, c: L.repeat_interleave(c), np.array([1, 0, 3]), device=device)
    check(lambda L, i: i.repeat_interleave(2, dim=0), np.array([[1, 2]], np.int32),
          device=device)


def test_repeat_interleave_refuses_what_torch_refuses(device):
    x = data((2, 3))

    def rep(r, **kw):
        return lambda L, a: L.repeat_interleave(a, L.tensor(r) if isinstance(r, list) else r,
                                                **kw)

    both_raise(rep([1, 2, 3], dim=0), x, error=RuntimeError,
               match=r"repeats must have the same size as input along dim, but got "
                     r"repeats.size\(0\) = 3 and input.size\(0\) = 2", device=device)
    both_raise(rep([1, -2], dim=0), x, error=RuntimeError, match="repeats can not be negative",
               device=device)
    both_raise(rep(-1), x, error=RuntimeError, match="Repeats must be non-negative",
               device=device)
    both_raise(rep([1.0, 2.0], dim=0), x, error=NotImplementedError,
               match="int64 or int32 tensor, got Float", device=device)
    both_raise(rep(2.0), x, error=TypeError, match="'repeats' must be int or Tensor, not float",
               device=device)
    both_raise(rep(2, dim=5), x, error=IndexError, match="out of range", device=device)
    both_raise(rep(2, dim=0, output_size=3), x, error=RuntimeError,
               match="Invalid output_size, expected 4 but got 3", device=device)
    both_raise(rep([1, 2], dim=0, output_size=4), x, error=RuntimeError,
               match="allocated size does not match required size", device=device)
    with pytest.raises(RuntimeError, match="repeats must be 0-dim or 1-dim tensor"):
        tt.repeat_interleave(tt.tensor(x, device=device), tt.tensor([[1, 2]]), dim=0)


# ------------------------------------------------------------------ addcmul, addcdiv


@pytest.mark.parametrize("dtype", DTYPES)
def test_addcmul_and_addcdiv_match_torch_with_broadcasting_and_value(device, dtype):
    a, b, c = data((2, 3), dtype), data((3,), dtype, 1), data((2, 1), dtype, 2, 0.5, 2)
    check(lambda L, a, b, c: (L.addcmul(a, b, c), L.addcmul(a, b, c, value=-0.3),
                              a.addcdiv(b, c), a.addcdiv(b, c, value=2.5)), a, b, c,
          device=device)
    check(lambda L, a, b, c: (a * 1).addcmul_(b, c, value=0.5).addcdiv_(b, c, value=-1), a,
          b, c, device=device)


def test_addcmul_promotes_and_truncates_an_integer_value_as_torch(device):
    f, d, i = np.ones(3, np.float32), np.full(3, 2.0), np.array([1, 2, 3])
    h = np.ones(3, np.float16)
    check(lambda L, f, d: L.addcmul(f, d, f), f, d, device=device)
    check(lambda L, f, i: (L.addcmul(f, i, i), L.addcdiv(i, f, f)), f, i, device=device)
    check(lambda L, i: (L.addcmul(i, i, i, value=2), L.addcmul(i, i, i, value=0.5)), i,
          device=device)
    check(lambda L, h, f: L.addcmul(h, f, f, value=1e5), h, f, device=device)
    check(lambda L, f, d: (f * 1).addcmul_(d, d, value=2), f, d, device=device)


def test_addcmul_and_addcdiv_refuse_what_torch_refuses(device):
    i, f = np.array([1, 2, 3]), np.ones(3, np.float32)
    both_raise(lambda L, i: L.addcdiv(i, i, i), i, error=RuntimeError,
               match="Integer division with addcdiv is no longer supported", device=device)
    both_raise(lambda L, i: i.clone().addcmul_(i.float(), i.float(), value=2), i,
               error=TypeError, match="can't be cast to the desired output type", device=device)
    both_raise(lambda L, f: L.addcmul(f, f, L.ones(2)), f, error=ValueError,
               match=r"shapes \(3,\) and \(2,\) cannot be broadcast", device=device)
    both_raise(lambda L, f: L.addcmul(f, f, 2), f, error=TypeError,
               match="argument 'tensor2' .position 3. must be Tensor, not int", device=device)
    both_raise(lambda L, f: f[:1].clone().addcmul_(f, f), f, error=RuntimeError,
               match=r"output with shape \[1\] doesn't match the broadcast shape \[3\]",
               device=device)


# ------------------------------------------------------------------ addmm, baddbmm, addmv, addr


@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm_baddbmm_addmv_addr_match_torch(device, dtype):
    m1, m2, bias = data((2, 3), dtype), data((3, 4), dtype, 1), data((4,), dtype, 2)
    check(lambda L, i, a, b: (L.addmm(i, a, b), L.addmm(i, a, b, beta=0.5, alpha=-2),
                              i.addmm(a, b, alpha=3)), bias, m1, m2, device=device)
    check(lambda L, i, a, b: i.expand(2, 4).clone().addmm_(a, b, beta=2), bias, m1, m2,
          device=device)
    b1, b2 = data((2, 2, 3), dtype, 3), data((2, 3, 4), dtype, 4)
    check(lambda L, i, a, b: (L.baddbmm(i, a, b), i.baddbmm(a, b, beta=0.25, alpha=0.5)),
          bias, b1, b2, device=device)
    vec = data((3,), dtype, 5)
    check(lambda L, i, a, v: (L.addmv(i, a, v), i.addmv(a, v, beta=-1, alpha=2)),
          data((2,), dtype, 6), m1, vec, device=device)
    check(lambda L, i, a, v: L.addmv(i, a, v), data((1,), dtype, 6), m1, vec, device=device)
    check(lambda L, i, a, v: (L.addr(i, a, v), i.addr(a, v, beta=2, alpha=0.5),
                              (i * 1).addr_(a, v)), data((2, 3), dtype, 7), data((2,), dtype, 8),
          vec, device=device)


def test_beta_zero_ignores_nan_and_gives_a_zero_gradient_as_torch(device):
    nan = np.full((2, 4), np.nan, np.float32)
    check(lambda L, i, a, b: L.addmm(i, a, b, beta=0), nan, data((2, 3)), data((3, 4), seed=1),
          device=device)
    check(lambda L, i, a, b: L.addmm(i, a, b, beta=0), data((2, 4)), data((2, 3)),
          data((3, 4), seed=1), device=device)


def test_blas_ops_with_integers_and_bools_as_torch(device):
    ones = np.ones((2, 4), np.int64)
    m, n = np.ones((2, 3), np.int64), np.ones((3, 4), np.int64)
    check(lambda L, i, a, b: (L.addmm(i, a, b), L.addmm(i, a, b, beta=0.5),
                              L.addmm(i, a, b, alpha=0.5)), ones, m, n, device=device)
    check(lambda L, i, a, b: L.addr(i, a, b), np.ones((2, 3), np.float32), np.ones(2),
          np.ones(3, np.float32), device=device, grad=False)  # (dtypes promote; torch's
    # backward of mixed dtypes fails)
    bools = np.array([[True, False, True], [False, False, True]])
    check(lambda L, i, a, b: (L.addr(i, a, b), L.addr(i, a, b, beta=False)), bools,
          np.array([True, False]), np.array([False, True, True]), device=device)


def test_blas_ops_refuse_what_torch_refuses(device):
    i, a, b = np.ones((2, 4), np.float32), np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    both_raise(lambda L, i, a, b: L.addmm(i[0, :3], a, b), i, a, b, error=RuntimeError,
               match=r"The expanded size of the tensor \(4\) must match the existing size "
                     r"\(3\) at non-singleton dimension 1", device=device)
    both_raise(lambda L, i, a, b: L.addmm(i, a, b[:2]), i, a, b, error=RuntimeError,
               match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x4\)", device=device)
    both_raise(lambda L, i, a, b: L.addmm(i, a.double(), b), i, a, b, error=RuntimeError,
               match="mat1 and mat2 must have the same dtype, but got Double and Float",
               device=device)
    both_raise(lambda L, i, a, b: L.addmm(i.double(), a, b), i, a, b, error=RuntimeError,
               match="self and mat2 must have the same dtype, but got Double and Float",
               device=device)
    both_raise(lambda L, i, a, b: L.addmm(i, a[0], b), i, a, b, error=RuntimeError,
               match="mat1 must be a matrix, got 1-D tensor", device=device)
    both_raise(lambda L, i, a, b: L.baddbmm(i, a, b), i, a, b, error=RuntimeError,
               match="batch1 must be a 3D tensor", device=device)
    both_raise(lambda L, i, a, b: L.baddbmm(i, a[None], b[None, :2]), i, a, b,
               error=RuntimeError, match=r"Expected size for first two dimensions of batch2 "
                                         r"tensor to be: \[1, 3\] but got: \[1, 2\]",
               device=device)
    both_raise(lambda L, i, a, b: L.addmv(i[0, :2], a, b[0]), i, a, b, error=RuntimeError,
               match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)", device=device)
    both_raise(lambda L, i, a, b: L.addmv(i[0, :3], a, b[:, 0]), i, a, b, error=RuntimeError,
               match=r"size mismatch, got input \(3\), mat \(2x3\), vec \(3\)", device=device)
    both_raise(lambda L, i, a, b: L.addmv(i[0, :2], a[0], b[:, 0]), i, a, b,
               error=RuntimeError, match="vector \\+ matrix @ vector expected, got 1, 1, 1",
               device=device)
    both_raise(lambda L, i, a, b: L.addr(i[:, :3], a, b[:, 0]), i, a, b, error=RuntimeError,
               match="addr: Expected 1-D argument vec1, but got 2-D", device=device)
    both_raise(lambda L, i: L.addr(i.long(), i[0].long(), i[0].long(), beta=0.5), i,
               error=RuntimeError, match="For integral input tensors, argument beta must not",
               device=device)
    with pytest.raises(RuntimeError, match="Bad in-place call|doesn't match the broadcast"):
        torch.ones(4).addmm_(torch.tensor(a), torch.tensor(b))
    with pytest.raises(RuntimeError, match=r"output with shape \[4\] doesn't match"):
        tt.ones(4, device=device).addmm_(tt.tensor(a, device=device), tt.tensor(b, device=device))


# ------------------------------------------------------------------ element-wise


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_float_ops_and_their_gradients_match_torch(device, dtype):
    a, b = data((2, 3), dtype), data((3,), dtype, 1)
    b[1] = -0.0
    check(lambda L, a, b: (L.atan2(a, b), L.arctan2(b, a), a.atan2(b), L.hypot(a, b),
                           a.hypot(b), L.logaddexp(a, b), a.logaddexp(b * 30),
                           L.copysign(a, b), a.copysign(-0.5)), a, b, device=device)
    check(lambda L, a, b: (L.xlogy(a, b.abs() + 0.1), a.xlogy(2.5),
                           L.xlogy(3, b.abs() + 0.1)), a, b, device=device)
    check(lambda L, a, b: [getattr(a * 1, f"{n}_")(b.abs()) for n in ("atan2", "arctan2",
                                                                        "hypot", "xlogy",
                                                                        "copysign")], a, b,
          device=device)


def test_xlogy_copysign_edge_values_and_gradients_as_torch(device):
    x = np.array([0.0, 0.0, 1.0, 0.0, 2.0, 0.0], np.float64)
    y = np.array([0.0, np.nan, 0.0, 3.0, 0.5, -1.0], np.float64)
    check(lambda L, x, y: L.xlogy(x, y), x, y, device=device)
    check(lambda L, a, b: (L.atan2(a, b), L.hypot(a, b)), np.array([0.0, 1e-30, 0.0, 1.0],
                                                                   np.float32),
          np.array([0.0, 0.0, -0.0, 0.0], np.float32), device=device)
    check(lambda L, x, y: L.copysign(x, y), np.array([0.0, -2.0, 3.0]),
          np.array([-1.0, 1.0, -0.0]), device=device)


@pytest.mark.parametrize("name", ["atan2", "hypot", "logaddexp", "xlogy", "copysign"])
@pytest.mark.parametrize("pair", [("int64", "int64"), ("float32", "int64"), ("float16", "float32"),
                                  ("int64", "float64"), ("bool", "bool"), ("uint8", "uint8"),
                                  ("float16", "0d")])
def test_binary_float_ops_promote_or_refuse_as_torch(device, name, pair):
    values = np.array([1, 0, -2])
    a = values.astype(pair[0])
    b = np.array(2.0, np.float32) if pair[1] == "0d" else values.astype(pair[1])
    try:
        getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="floating point tensors only"):
            getattr(tt, name)(tt.tensor(a, device=device), tt.tensor(b, device=device))
        return
    check(lambda L, a, b: getattr(L, name)(a, b), a, b, device=device)


def test_binary_ops_refuse_numbers_where_torch_does(device):
    f = tt.ones(3, device=device)
    for name in ("atan2", "hypot", "logaddexp"):
        with pytest.raises(TypeError, match=rf"{name}\(\): argument 'other' .position 2. must be "
                                            f"Tensor, not int"):
            getattr(tt, name)(f, 2)
        with pytest.raises(TypeError, match="argument 'input' .position 1. must be Tensor"):
            getattr(tt, name)(2, f)
    with pytest.raises(TypeError, match=r"xlogy\(\): expected a Tensor"):
        tt.xlogy(2, 3)
    with pytest.raises(ValueError, match=r"hypot: shapes \(3,\) and \(2,\) cannot be broadcast"):
        tt.hypot(f, tt.ones(2, device=device))
    with pytest.raises(TypeError, match="can't be cast to the desired output type"):
        tt.tensor([1, 2], device=device).atan2_(tt.ones(2, device=device))


def test_heaviside_as_torch_and_its_backward_refuses(device):
    x = np.array([1.0, 0.0, -2.0, np.nan, -0.0], np.float32)
    check(lambda L, x: (L.heaviside(x, L.tensor(0.5)), x.heaviside(L.tensor([0.25])),
                        L.heaviside(x.long(), L.tensor(3))), x, device=device, grad=False)
    check(lambda L, b: L.heaviside(b, b), np.array([True, False]), device=device)
    with pytest.raises(RuntimeError, match="heaviside is not yet implemented for tensors with "
                                           "different dtypes"):
        tt.heaviside(tt.ones(2, device=device), tt.tensor(1, device=device))
    with pytest.raises(TypeError, match="'values' .position 2. must be Tensor, not float"):
        tt.heaviside(tt.ones(2, device=device), 0.5)
    leaf = tt.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="the derivative for 'heaviside' is not implemented"):
        tt.heaviside(leaf, tt.tensor(0.5, device=device)).sum().backward()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "uint8", "bool"])
def test_unary_ops_values_and_dtypes_match_torch(device, dtype):
    x = np.array([1.5, 0.0, -2.25, 0.75, 3.0, -0.0]).astype(dtype)
    names = ["erf", "erfc", "sgn", "deg2rad", "rad2deg", "signbit", "nan_to_num"]
    if dtype.startswith("float"):
        names.append("frac")
    check(lambda L, x: [getattr(L, n)(x) for n in names] + [getattr(x, n)() for n in names], x,
          device=device, grad=False)
    p = np.array([0.5, 0.0, -0.999, 0.25, 1.0, -1.0, 1.5]).astype(dtype)
    check(lambda L, p: (L.erfinv(p), p.erfinv()), p, device=device, grad=False)
    if dtype in ("int64", "uint8", "bool"):
        with pytest.raises(NotImplementedError, match="frac: floating point tensors only"):
            tt.tensor(x, device=device).frac()


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_ops_gradients_match_torch(device, dtype):
    x = data((2, 5), dtype, low=-3, high=3)
    check(lambda L, x: (L.erf(x), x.erfc(), L.frac(x), x.deg2rad(), L.rad2deg(x), L.sgn(x),
                        L.nan_to_num(x)), x, device=device)
    check(lambda L, p: (L.erfinv(p), (p * 1).erfinv_().erf_()), data((7,), dtype, 3, -0.99, 0.99),
          device=device, tol=10)
    check(lambda L, x: (x * 1).erfc_().frac_().deg2rad_().rad2deg_().sgn_(), x, device=device)


def test_erf_erfc_erfinv_are_float64_accurate_against_torch():
    x = np.concatenate([np.linspace(-30, 30, 60001), [0.46875, -0.46875, 4.0, -4.0, 1e-300,
                                                       -1e-20, 6.7e7, np.inf, -np.inf, np.nan]])
    np.testing.assert_allclose(erf_array(x), torch.erf(torch.tensor(x)).numpy(), 1e-15, 1e-300)
    np.testing.assert_allclose(erfc_array(x), torch.erfc(torch.tensor(x)).numpy(), 2e-15,
                               1e-300)
    p = np.concatenate([np.linspace(-1, 1, 20001), 1 - np.logspace(-16, -1, 200),
                        -1 + np.logspace(-16, -1, 200), [1.5, -2.0, np.nan, 1e-300, -0.0]])
    ours, theirs = erfinv_array(p), torch.erfinv(torch.tensor(p)).numpy()
    np.testing.assert_allclose(ours, theirs, 2e-15, 1e-300)
    assert np.signbit(ours[-1])  # erfinv(-0.0) is -0.0
    p32 = p.astype(np.float32)
    np.testing.assert_allclose(erfinv_array(p32), torch.erfinv(torch.tensor(p32)).numpy(), 3e-7)


def test_nan_to_num_defaults_options_and_gradient_as_torch(device):
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    check(lambda L, x: (L.nan_to_num(x), x.nan_to_num(2.0, posinf=1e60),
                        x.nan_to_num(nan=-1, neginf=-7.5), x.half().nan_to_num(posinf=1e6)), x,
          device=device)
    check(lambda L, x: (x * 1).nan_to_num_(nan=3.0), x, device=device)
    check(lambda L, i: L.nan_to_num(i, nan=2.5), np.array([1, -2]), device=device)


def test_signbit_and_sgn_of_signed_zeros_and_nans_as_torch(device):
    x = np.array([-0.0, 0.0, np.nan, -np.nan, -3.0, np.inf], np.float32)
    check(lambda L, x: (L.signbit(x), L.sgn(x)), x, device=device, grad=False)


# ------------------------------------------------------------------ shapes


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_as_torch(device, indexing):
    a, b, c = np.arange(3.0), np.arange(2.0), np.arange(4.0)
    check(lambda L, a, b, c: L.meshgrid(a, b, c, indexing=indexing), a, b, c, device=device)
    check(lambda L, a, b: L.meshgrid([a, b], indexing=indexing), a, b, device=device)
    check(lambda L, a, b: L.meshgrid(a[0], b, indexing=indexing), a, b, device=device)
    check(lambda L, a: L.meshgrid(a, indexing=indexing), a, device=device)


def test_meshgrid_warns_without_indexing_and_refuses_what_torch_refuses(device):
    a, b = np.arange(3.0), np.arange(2.0)
    with pytest.warns(UserWarning, match="in an upcoming release, it will be required to pass "
                                         "the indexing argument"):
        grid = tt.meshgrid(tt.tensor(a, device=device), tt.tensor(b, device=device))
    assert [g.shape for g in grid] == [(3, 2), (3, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tt.meshgrid(tt.tensor(a), indexing="ij")
    both_raise(lambda L, a, b: L.meshgrid(a, b, indexing="foo"), a, b, error=RuntimeError,
               match='indexing must be one of "xy" or "ij", but received: foo')
    both_raise(lambda L, a, b: L.meshgrid(a, b.long(), indexing="ij"), a, b,
               error=RuntimeError, match="meshgrid expects all tensors to have the same dtype")
    both_raise(lambda L, a: L.meshgrid(a, a.reshape(1, 3), indexing="ij"), a,
               error=RuntimeError, match="Expected 0D or 1D tensor")
    with pytest.raises(RuntimeError, match="meshgrid expects a non-empty TensorList"):
        tt.meshgrid(indexing="ij")


def test_broadcast_tensors_and_the_stacks_as_torch(device):
    a, b = data((3, 1)), data((2,), seed=1)
    check(lambda L, a, b: L.broadcast_tensors(a, b, a[0, 0]), a, b, device=device)
    both_raise(lambda L, a, b: L.broadcast_tensors(a[:, 0], b), a, b, error=ValueError,
               match="cannot be broadcast")
    v, w, m = data((3,)), data((3,), seed=2), data((3, 2), seed=3)
    check(lambda L, v, w, m: (L.hstack([v, w]), L.hstack((m, v[:, None])), L.vstack([v, w]),
                              L.vstack([m.T, v]), L.dstack([v, w]),
                              L.dstack([m, m]), L.column_stack([v, m, w]),
                              L.row_stack([v, w]), L.hstack([v[0], w[1]]),
                              L.column_stack([v[0], v[1:2]])), v, w, m, device=device)
    check(lambda L, v, i: L.hstack([v, i]), v, np.arange(2), device=device)
    check(lambda L, v: (L.atleast_1d(v[0]), L.atleast_2d(v), L.atleast_3d(v),
                        L.atleast_3d(v[0]), L.atleast_1d(v, v[0])), v, device=device)
    both_raise(lambda L, v, w: L.vstack([v, w[:2]]), v, w, error=ValueError,
               match="sizes must match except in dimension 0")
    with pytest.raises(TypeError, match="must be a tuple or list of Tensors, not a Tensor"):
        tt.hstack(tt.ones(2))
    with pytest.raises(RuntimeError, match="non-empty"):
        tt.hstack([])


def test_tensor_split_as_torch(device):
    x = data((10, 4))
    for split in (3, (1, 6), [1, 6, 20, 3], 1, 10, 12):
        check(lambda L, x, split=split: L.tensor_split(x, split), x, device=device)
    check(lambda L, x: (x.tensor_split(3, dim=1), x.tensor_split(L.tensor(4)),
                        L.tensor_split(x, L.tensor([2, 5]), dim=0)), x, device=device)
    both_raise(lambda L, x: L.tensor_split(x, 0), x, error=RuntimeError,
               match="number of sections must be larger than 0, got 0")
    both_raise(lambda L, x: L.tensor_split(x[0, 0], 2), x, error=RuntimeError,
               match="expected at least a 1-dimensional tensor")
    both_raise(lambda L, x: L.tensor_split(x, L.tensor([1.0])), x, error=RuntimeError,
               match="to have dtype of long, but got Float")
    both_raise(lambda L, x: L.tensor_split(x, L.tensor([[1]])), x, error=RuntimeError,
               match="zero-dimensional or one-dimensional tensor, but got a tensor with 2 dims")
    both_raise(lambda L, x: L.tensor_split(x, 2.5), x, error=TypeError, match="must be int")


def test_tril_and_triu_indices_as_torch(device):
    for args in [(3, 3), (3, 4, 1), (4, 3, -1), (0, 3), (3, 3, 10), (3, 3, -10), (5, 2, 0)]:
        for name in ("tril_indices", "triu_indices"):
            ours = getattr(tt, name)(*args, device=device)
            theirs = getattr(torch, name)(*args)
            assert ours.device == device and ours.dtype == tt.int64
            assert ours.shape == tuple(theirs.shape) and ours.tolist() == theirs.tolist()
    assert tt.triu_indices(4, 3, 1, dtype=tt.int32).dtype == tt.int32
    with pytest.raises(RuntimeError, match="row must be non-negative, got -1"):
        tt.tril_indices(-1, 3)
    with pytest.raises(NotImplementedError, match="int64 or int32, got Float"):
        tt.tril_indices(3, 3, dtype=tt.float32)


def test_take_along_dim_as_torch(device):
    x = data((2, 3))
    arg = np.array([[0], [2]])
    check(lambda L, x, i: (L.take_along_dim(x, i, dim=1), x.take_along_dim(i, 1),
                           L.take_along_dim(x, i)), x, arg, device=device)
    check(lambda L, x, i: L.take_along_dim(x, i, dim=1), x, np.array([[0, 1, 1, 2]]),
          device=device)
    check(lambda L, x, i: L.take_along_dim(x, i, dim=0), x, np.array([[1], [0], [1]]),
          device=device)
    check(lambda L, x: L.take_along_dim(x, x.argsort(1), 1), x, device=device)
    both_raise(lambda L, x, i: L.take_along_dim(x, i[:, 0], dim=1), x, arg, error=RuntimeError,
               match="input and indices should have the same number of dimensions, but got 2 "
                     "dimensions for input, and 1 dimensions for indices")
    both_raise(lambda L, x, i: L.take_along_dim(x, i.float(), dim=1), x, arg,
               error=RuntimeError, match="dtype of indices should be Long but got Float")
    both_raise(lambda L, x: L.take_along_dim(x, L.tensor([[0, 2]]), dim=0), x,
               error=ValueError, match="cannot be broadcast")
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        tt.take_along_dim(tt.tensor(x, device=device), tt.tensor([[3]]), dim=1)


def test_trace_cross_tensordot_kron_isin_as_torch(device):
    m = data((3, 4))
    check(lambda L, m: (L.trace(m), m.trace(), m[:2].trace(), m[:0, :0].trace()), m,
          device=device)
    check(lambda L, i: (L.trace(i), L.trace(i.to(L.uint8))), np.arange(6).reshape(2, 3),
          device=device)
    both_raise(lambda L, m: L.trace(m[0]), m, error=RuntimeError,
               match="trace: expected a matrix, but got tensor with dim 1")
    u, v = data((2, 3)), data((2, 3), seed=1)
    check(lambda L, u, v: (L.cross(u, v, dim=1), u.cross(v, dim=-1), L.cross(u.T, v.T, dim=0),
                           L.cross(u, v[:1], dim=1)), u, v, device=device)
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg is "
                                         "deprecated"):
        tt.cross(tt.tensor(u, device=device), tt.tensor(v, device=device))
    check(lambda L, u, v: L.cross(u.long(), v.long(), dim=1), u * 3, v * 3, device=device)
    both_raise(lambda L, u, v: L.cross(u, v, dim=0), u, v, error=RuntimeError,
               match="inputs dimension 0 must have length 3. Got 2 and 2")
    both_raise(lambda L, u, v: L.cross(u, v[0], dim=-1), u, v, error=RuntimeError,
               match="inputs must have the same number of dimensions")
    both_raise(lambda L, u, v: L.cross(u, v.double(), dim=1), u, v, error=TypeError,
               match="expected scalar type Float but found Double")
    a, b = data((2, 3, 4)), data((3, 4, 5), seed=1)
    check(lambda L, a, b: (L.tensordot(a, b), L.tensordot(a, b.permute(1, 0, 2),
                                                          dims=([1, 2], [1, 0])),
                           L.tensordot(a, b, dims=1 if False else ([1], [0])),
                           L.tensordot(a[0], b[0], dims=0), L.tensordot(a, b, dims=L.tensor(2)),
                           L.tensordot(a, b, dims=[[2], [1]])), a, b, device=device)
    both_raise(lambda L, a, b: L.tensordot(a, b, dims=1), a, b, error=RuntimeError,
               match="contracted dimensions need to match, but first has size 4 in dim -1 and "
                     "second has size 3 in dim 0")
    both_raise(lambda L, a, b: L.tensordot(a, b.double()), a, b, error=TypeError,
               match="same dtype")
    both_raise(lambda L, a, b: L.tensordot(a, b, dims=-1), a, b, error=RuntimeError,
               match="tensordot expects dims >= 0, but got dims=-1")
    both_raise(lambda L, a, b: L.tensordot(a, b, dims=([1], [0, 1])), a, b,
               error=RuntimeError, match="both dimension lists should have same length")
    k1, k2 = data((2, 2)), data((2, 3), seed=1)
    check(lambda L, k1, k2: (L.kron(k1, k2), k1.kron(k2[0]), L.kron(k1[0, 0], k2),
                             L.kron(k1.double(), k2)), k1, k2, device=device)
    check(lambda L, i, b: (L.kron(i, i.to(L.uint8)), L.kron(b, b)), np.array([[1, 2], [3, 4]],
                                                                              np.int32),
          np.array([True, False]), device=device)
    e, t = np.array([[1, 2], [3, 4]]), np.array([2, 5])
    check(lambda L, e, t: (L.isin(e, t), L.isin(e, t, invert=True), L.isin(e, 2),
                           L.isin(3, t), L.isin(e.double(), t),
                           L.isin(e, t, assume_unique=True)), e, t, device=device)
    check(lambda L, e: L.isin(e, e[1:]), np.array([1.0, np.nan]), device=device)


# ------------------------------------------------------------------ order statistics, scans


@pytest.mark.parametrize("dtype", DTYPES)
def test_kthvalue_as_torch(device, dtype):
    x = data((3, 5), dtype)
    check(lambda L, x: (L.kthvalue(x, 2), x.kthvalue(1, dim=0, keepdim=True),
                        L.kthvalue(x, 5, -1), x[0, 0].kthvalue(1)), x, device=device)
    check(lambda L, x: L.kthvalue(x, 3), np.array([1.0, np.nan, 0.0], dtype), device=device)
    result = tt.kthvalue(tt.tensor(x, device=device), 2)
    assert type(result).__name__ == "kthvalue" and result.values is result[0]
    both_raise(lambda L, x: L.kthvalue(x, 6), x, error=IndexError,
               match="selected number k out of range for dimension 1")
    both_raise(lambda L, x: L.kthvalue(x, 0), x, error=IndexError, match="out of range")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cummax_cummin_values_indices_and_gradient_as_torch(device, dtype):
    x = data((4, 9), dtype)
    x[0, 3] = x[0, 1] = 5.0  # ties: the later index
    x[1, 4] = np.nan
    x[2, :] = 1.0
    check(lambda L, x: (L.cummax(x, 1), L.cummin(x, 1), x.cummax(0), x.cummin(-2)), x,
          device=device)
    check(lambda L, x: (L.cummax(x[0, 0], 0), L.cummin(x[:0], 1)), x, device=device)
    check(lambda L, i: (L.cummax(i, 1), L.cummin(i, 0)), np.array([[1, 3, 3], [2, 2, 0]]),
          device=device)
    check(lambda L, b: (L.cummax(b, 0), L.cummin(b, 0)), np.array([True, False, True]),
          device=device)
    assert type(tt.cummax(tt.tensor(x), 0)).__name__ == "cummax"
    both_raise(lambda L, x: L.cummax(x, 2), x, error=IndexError, match="out of range")


@pytest.mark.parametrize("dtype", DTYPES)
def test_logcumsumexp_is_stable_and_differentiable_as_torch(device, dtype):
    x = data((3, 7), dtype, low=-5, high=5)
    check(lambda L, x: (L.logcumsumexp(x, 1), x.logcumsumexp(0), x[0, 0].logcumsumexp(0)), x,
          device=device, tol=5)
    wide = np.array([-1000.0, 0.0, 1000.0, 1.0, -np.inf], dtype)
    check(lambda L, x: L.logcumsumexp(x, 0), wide, device=device, grad=False)
    check(lambda L, x: L.logcumsumexp(x, 0), np.array([-np.inf, -np.inf, 0.0, np.nan], dtype),
          device=device, grad=False)
    both_raise(lambda L, i: L.logcumsumexp(i, 0), np.array([1, 2]), error=NotImplementedError,
               match="floating point tensors only")


def test_rot90_as_torch(device):
    x = data((2, 3, 4))
    check(lambda L, x: [L.rot90(x, k) for k in (-3, -1, 0, 1, 2, 3, 5)]
          + [x.rot90(1, [1, 2]), x.rot90(-1, (2, 0))], x, device=device)
    both_raise(lambda L, x: L.rot90(x, 1, [0, 0]), x, error=RuntimeError,
               match="expected rotation dims to be different, but got dim0 = 0 and dim1 = 0")
    both_raise(lambda L, x: L.rot90(x, 1, [0]), x, error=RuntimeError,
               match="expected total rotation dims == 2, but got dims = 1")
    both_raise(lambda L, x: L.rot90(x[0, 0], 1), x, error=RuntimeError,
               match="expected total dims >= 2, but got total dims = 1")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cdist_values_and_gradients_as_torch(device, dtype):
    a, b = data((5, 3), dtype), data((4, 3), dtype, 1)
    b[0] = a[0]  # a zero distance: gradient 0, as PyTorch
    check(lambda L, a, b: [L.cdist(a, b, p=p) for p in (2.0, 1.0, 3.0)]
          + [L.cdist(a[None].expand(2, 5, 3), b)], a, b, device=device)
    check(lambda L, a, b: [L.cdist(a, b, p=p) for p in (0.0, float("inf"))], a, b,
          device=device, grad=False)
    both_raise(lambda L, a, b: L.cdist(a, b[:, :2]), a, b, error=RuntimeError,
               match="X1 and X2 must have the same number of columns. X1: 3 X2: 2")
    both_raise(lambda L, a, b: L.cdist(a[0], b), a, b, error=RuntimeError,
               match="cdist only supports at least 2D tensors, X1 got: 1D")
    both_raise(lambda L, a, b: L.cdist(a, b, p=-1), a, b, error=RuntimeError,
               match="cdist only supports non-negative p values")
    both_raise(lambda L, a, b: L.cdist(a.long(), b.long()), a, b, error=TypeError,
               match="float32 and float64 tensors, X1 got: Long")


def test_the_new_names_are_tensor_methods_and_not_missing_hints():
    for name in ("repeat_interleave", "addcmul_", "addcdiv_", "addmm", "baddbmm_", "atan2",
                 "erfinv_", "kthvalue", "cummax", "logcumsumexp", "rot90", "take_along_dim",
                 "tensor_split", "trace", "cross", "kron", "nan_to_num_"):
        assert callable(getattr(tt.Tensor, name)), name
    assert tt.Tensor.addcmul_.__name__ == "addcmul_" and tt.Tensor.atan2.__name__ == "atan2"


def test_float16_fused_ops_compute_in_float32_and_round_once_as_torch(device):
    h = np.random.default_rng(0).standard_normal(500).astype(np.float16)
    m = np.random.default_rng(1).standard_normal((4, 500)).astype(np.float16)
    exact = [lambda L, a, b: L.addcmul(a, a, a, value=0.1),
             lambda L, a, b: L.addcdiv(a, a, a.abs() + 1, value=0.1),
             lambda L, a, b: L.logcumsumexp(a, 0),
             lambda L, a, b: L.addmm(a[:4], b, b.T, beta=0.3, alpha=0.7),
             lambda L, a, b: L.baddbmm(a[:4], b[None], b.T[None], beta=0.3, alpha=0.7)]
    for fn in exact:  # (rounded once from float32: bit for bit PyTorch's)
        ours = fn(tt, tt.tensor(h, device=device), tt.tensor(m, device=device))
        theirs = fn(torch, torch.tensor(h), torch.tensor(m))
        assert ours.dtype == tt.float16
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    check(lambda L, a, b: (L.addr(a[:5], a[:4], a[:5], beta=0.3, alpha=0.7),
                           L.addmv(a[:4], b, a, beta=0.3, alpha=0.7)), h, m, device=device,
          grad=False)


# ------------------------------------------------------------------ found by a differential fuzz


def test_take_along_dim_counts_negative_indices_from_the_end_as_torch(device):
    """With ``dim``, PyTorch reads an index in ``[-size, 0)`` from the end (tinytrain refused
    it); without ``dim`` it does not, and both refuse."""
    x = data((2, 3), np.float64)
    check(lambda L, x, i: L.take_along_dim(x, i, dim=1), x, np.array([[-1], [-3]]),
          device=device)
    check(lambda L, x, i: x.take_along_dim(i, -2), x, np.array([[-2, 1, -1]]), device=device)
    both_raise(lambda L, x, i: L.take_along_dim(x, i), x, np.array([-1]), error=IndexError,
               match="index -1 is out of bounds", device=device)
    with pytest.raises(IndexError, match="index -4 is out of bounds"):  # (PyTorch reads past)
        tt.take_along_dim(tt.tensor(x, device=device), tt.tensor([[-4], [0]], device=device), 1)


def test_kthvalue_k_out_of_range_is_torchs_runtime_error(device):
    for k in (0, 4):
        with pytest.raises(RuntimeError, match="selected number k out of range"):
            torch.kthvalue(torch.ones(3), k)
        with pytest.raises(RuntimeError, match="selected number k out of range"):
            tt.kthvalue(tt.ones(3, device=device), k)


def test_repeat_interleave_of_a_0d_tensor_along_a_dim_is_refused_as_torch(device):
    """PyTorch flattens a 0-d input only when no ``dim`` is given (tinytrain flattened it
    for any dim)."""
    for repeats in (2, np.array([1])):
        with pytest.raises(IndexError):
            torch.repeat_interleave(torch.tensor(1.5), torch.tensor(repeats)
                                    if isinstance(repeats, np.ndarray) else repeats, dim=0)
        arg = tt.tensor(repeats, device=device) if isinstance(repeats, np.ndarray) else repeats
        for dim in (0, -1):
            with pytest.raises(IndexError, match="Dimension specified as .* but tensor has no "
                                                 "dimensions"):
                tt.repeat_interleave(tt.tensor(1.5, device=device), arg, dim=dim)
    check(lambda L, s: L.repeat_interleave(s, 3), np.array(1.5), device=device)


def test_kron_promotes_a_0d_operand_as_a_dimensioned_one(device):
    """PyTorch's kron promotes dtypes as if both had dimensions (float32 kron a 0-d float64
    is float64; tinytrain gave float32)."""
    v, s = data((3,), np.float32), np.array(2.5)
    check(lambda L, v, s: (L.kron(v, s), L.kron(s, v), L.kron(v.half(), s.float())), v, s,
          device=device)


def test_cdist_without_coordinates_and_p_0_gradient_as_torch(device):
    """No columns: every distance is 0, the inf-norm's too (tinytrain raised); p=0 counts,
    and stays in the graph with a zero gradient (tinytrain's result needed no grad)."""
    check(lambda L, a, b: [L.cdist(a, b, p=p) for p in (float("inf"), 2.0, 0.0, 1.0)],
          data((3, 0), np.float64), data((2, 0), np.float64), device=device)
    check(lambda L, a, b: (L.cdist(a, b, p=0.0), a.norm(0), a.norm(0, dim=1)),
          data((3, 2), np.float64), data((4, 2), np.float64), device=device)
    both_raise(lambda L, a, b: L.cdist(a.half(), b.half()), data((3, 2)), data((4, 2)),
               error=NotImplementedError, match="X1 got: Half", device=device)


def test_the_gemms_and_tensordot_want_out_of_the_results_dtype_as_torch(device):
    """PyTorch's addmm/baddbmm/addmv/tensordot refuse an ``out`` of another dtype (tinytrain
    cast into it); addr, as PyTorch, casts."""
    a, m, w, v = data((2, 2)), data((2, 3)), data((3, 2)), data((3,))
    calls = [lambda L, o: L.addmm(L.tensor(a), L.tensor(m), L.tensor(w), out=o),
             lambda L, o: L.baddbmm(L.tensor(a[None]), L.tensor(m[None]), L.tensor(w[None]),
                                    out=o),
             lambda L, o: L.addmv(L.tensor(a[:, 0]), L.tensor(m), L.tensor(v), out=o),
             lambda L, o: L.tensordot(L.tensor(m), L.tensor(v), 1, out=o)]
    for call in calls:
        with pytest.raises(RuntimeError):
            call(torch, torch.zeros(0, dtype=torch.float64))
        with pytest.raises(RuntimeError, match="must have the result's dtype"):
            call(tt, tt.zeros(0, dtype=tt.float64, device=device))
        same = tt.zeros(0, dtype=tt.float32, device=device)
        assert call(tt, same) is same
        np.testing.assert_allclose(same.numpy(), call(torch, torch.zeros(0)).numpy(), 1e-5, 1e-6)
    check(lambda L, x, y, z: L.addr(x, y, z, out=L.zeros(0, dtype=L.float64)), m, a[:, 0],
          v, device=device, grad=False)
