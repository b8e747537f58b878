"""torch.nn.functional / torch.nn pieces ported scripts reach for, against PyTorch 2.13:
``scaled_dot_product_attention``; ``conv1d`` / ``max_pool1d`` / ``avg_pool1d`` and
``nn.Conv1d`` / ``MaxPool1d`` / ``AvgPool1d``; ``glu``, ``threshold``, the shrinks,
``rms_norm``, ``pixel_(un)shuffle``, ``gumbel_softmax``, the in-place functional forms and
their modules; ``instance_norm`` and ``InstanceNorm1d/2d``; ``affine_grid`` and
``grid_sample``; and the losses ``poisson_nll_loss``, ``gaussian_nll_loss``,
``soft_margin_loss``, ``multilabel_soft_margin_loss``, ``multi_margin_loss``,
``triplet_margin_with_distance_loss``. Values, gradients of every input, dtypes, shapes,
module reprs and errors; each test on each device (``device`` fixture)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
# The GPU machine's PyTorch may be older than 2.13 (no bias= on the norms, other messages):
# there the reprs and error messages are not compared, the values still are.
TORCH_2_13 = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)
DTYPES = [np.float32, np.float64]
REDUCTIONS = ["mean", "sum", "none"]


def leaves(device, dtype, *arrays):
    """tinytrain leaves on ``device`` and torch leaves, of the same values."""
    arrays = [np.asarray(a, dtype) for a in arrays]
    return ([tt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def check(ours, theirs, dtype, pairs, seed=1, tol=None):
    """Same values, dtype and shape as torch's, and the same gradients of ``sum(out * g)``
    for a random ``g`` for each ``(ours, theirs)`` leaf in ``pairs``."""
    tol = tol or TOL[dtype]
    assert ours.shape == tuple(theirs.shape)
    assert ours.dtype == dtype
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **tol)
    g = np.random.default_rng(seed).normal(size=ours.shape).astype(dtype)
    (ours * tt.tensor(g, device=ours.device)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    for a, b in pairs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


def both(device, dtype, fn, *arrays, seed=1, tol=None):
    """``fn(L, *leaves)`` for L = tinytrain and torch, checked as :func:`check` does."""
    ours, theirs = leaves(device, dtype, *arrays)
    check(fn(tt, *ours), fn(torch, *theirs), dtype, list(zip(ours, theirs)), seed, tol)


def torch_error(fn):
    """The message of the error torch raises for ``fn(torch)``."""
    with pytest.raises(Exception) as info:
        fn(torch)
    return str(info.value)


RNG = np.random.default_rng(8)


def normal(*shape):
    return RNG.standard_normal(shape)


# --------------------------------------------------------------------------- attention

SDPA_CASES = {
    "plain": ({}, None),
    "causal": (dict(is_causal=True), None),
    "scale": (dict(scale=0.3), None),
    "bool mask": ({}, "bool"),
    "float mask": ({}, "float"),
    "gqa": (dict(enable_gqa=True), None),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SDPA_CASES)
def test_scaled_dot_product_attention(device, dtype, case):
    kwargs, mask = SDPA_CASES[case]
    kv_heads = 2 if kwargs.get("enable_gqa") else 4
    q, k, v = normal(2, 4, 3, 5), normal(2, kv_heads, 6, 5), normal(2, kv_heads, 6, 7)
    m = None
    if mask == "bool":
        m = RNG.random((3, 6)) > 0.4
    elif mask == "float":
        m = normal(4, 3, 6).astype(dtype)

    def fn(L, q, k, v):
        extra = {} if m is None else dict(attn_mask=L.tensor(m) if L is torch
                                          else tt.tensor(m, device=q.device))
        return L.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs, **extra)

    both(device, dtype, fn, q, k, v)


def test_scaled_dot_product_attention_unbatched_shapes_and_broadcast_batch(device):
    both(device, np.float64, lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(
        q, k, v), normal(3, 4), normal(5, 4), normal(5, 6))
    both(device, np.float64, lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True), normal(2, 3, 4), normal(1, 5, 4), normal(5, 4))


def test_attention_rows_with_no_key_give_zeros_and_zero_gradients(device):
    """PyTorch's kernel: a query that may attend to nothing gets 0, not the NaN of a softmax
    over -inf only (bool or -inf float masks alike)."""
    m = np.ones((3, 5), bool)
    m[1] = False
    fm = np.where(m, 0.0, -np.inf)
    for mask in (m, fm):
        def fn(L, q, k, v, mask=mask):
            t = torch.tensor(mask) if L is torch else tt.tensor(mask, device=q.device)
            return L.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=t)

        both(device, np.float64, fn, normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 4))


def test_attention_causal_with_a_bool_mask_applies_both(device):
    """Where PyTorch computes the pair (its fused CPU kernel: 4-D, no gradient), both masks
    apply."""
    q, k, v = (normal(1, 2, 3, 4).astype(np.float32), normal(1, 2, 5, 4).astype(np.float32),
               normal(1, 2, 5, 4).astype(np.float32))
    m = RNG.random((3, 5)) > 0.5
    ours = F.scaled_dot_product_attention(*(tt.tensor(a, device=device) for a in (q, k, v)),
                                          attn_mask=tt.tensor(m, device=device),
                                          is_causal=True)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        *map(torch.tensor, (q, k, v)), attn_mask=torch.tensor(m), is_causal=True)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **TOL[np.float32])


def test_attention_dropout_is_seeded_and_scales_the_kept_weights(device):
    q, k, v = (tt.tensor(normal(2, 3, 4), device=device), tt.tensor(normal(2, 5, 4),
               device=device), tt.tensor(normal(2, 5, 4), device=device))
    tt.manual_seed(3)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    tt.manual_seed(3)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), F.scaled_dot_product_attention(q, k, v).numpy())
    assert np.abs(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy()).max() == 0
    # identical keys: uniform weights 1/5; dropped ones 0, kept ones 2/5 (v = identity rows)
    same = tt.tensor(np.ones((1, 5, 4)), device=device)
    eye = tt.tensor(np.eye(5), device=device).unsqueeze(0)
    w = F.scaled_dot_product_attention(tt.tensor(normal(1, 300, 4), device=device), same, eye,
                                       dropout_p=0.5).numpy()
    assert set(np.round(np.unique(w), 12)) <= {0.0, 0.4}
    assert 0.4 < (w > 0).mean() < 0.6


def test_attention_errors(device):
    def sdpa(*shapes, dtypes=(np.float64,) * 3, **kw):
        ts = [tt.tensor(normal(*s).astype(d), device=device) for s, d in zip(shapes, dtypes)]
        return F.scaled_dot_product_attention(*ts, **kw)

    with pytest.raises(RuntimeError, match="Expected query, key, and value to all be  at "
                                           "least 2 dimensional"):
        sdpa((4,), (4,), (4,))
    message = torch_error(lambda L: L.nn.functional.scaled_dot_product_attention(
        L.ones(2, 3, dtype=L.float64), L.ones(2, 3), L.ones(2, 3, dtype=L.float64)))
    with pytest.raises(TypeError, match="Expected query, key, and value to have the same dtype, "
                                        "but got query.dtype: double key.dtype: float"):
        sdpa((2, 3), (2, 3), (2, 3), dtypes=(np.float64, np.float32, np.float64))
    assert "query.dtype: double key.dtype: float" in message
    with pytest.raises(RuntimeError, match=r"expected query \[\*, L, E\], key \[\*, S, E\]"):
        sdpa((2, 3, 4), (2, 5, 3), (2, 5, 4))
    with pytest.raises(RuntimeError, match="value"):  # (PyTorch reads past value's end here)
        sdpa((2, 3, 4), (2, 5, 4), (2, 4, 4))
    with pytest.raises(RuntimeError, match="Number of heads in key and value must divide"):
        sdpa((1, 4, 3, 4), (1, 3, 5, 4), (1, 3, 5, 4), enable_gqa=True)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but "
                                         "got 1.5"):
        sdpa((2, 3), (2, 3), (2, 3), dropout_p=1.5)
    q = tt.tensor(normal(1, 3, 4), device=device)
    with pytest.raises(TypeError, match="Expected attn_mask dtype to be bool or float or to "
                                        "match query dtype, but got attn_mask.dtype: long int"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tt.zeros(3, 3, dtype=tt.int64,
                                                                   device=device))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tt.zeros(4, 3, device=device,
                                                                   dtype=tt.float64))
    ints = tt.ones(2, 3, dtype=tt.int64, device=device)
    with pytest.raises(TypeError, match="floating point"):
        F.scaled_dot_product_attention(ints, ints, ints)


def test_a_causal_self_attention_block_trains_like_torchs(device):
    """nanoGPT's CausalSelfAttention forward and backward, the weights copied from torch."""
    torch.manual_seed(0)
    c_attn, c_proj = torch.nn.Linear(8, 24, dtype=torch.float64), torch.nn.Linear(
        8, 8, dtype=torch.float64)
    ours_attn, ours_proj = nn.Linear(8, 24, dtype=tt.float64), nn.Linear(8, 8, dtype=tt.float64)
    for a, b in ((ours_attn, c_attn), (ours_proj, c_proj)):
        a.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in b.state_dict().items()})
        a.to(device)

    def block(L, x, attn, proj):
        B, T, C = x.shape
        q, k, v = attn(x).split(8, dim=2)
        q, k, v = (t.reshape(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))
        y = L.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return proj(y.transpose(1, 2).contiguous().reshape(B, T, C))

    x = normal(2, 5, 8)
    ours_x, theirs_x = leaves(device, np.float64, x)
    check(block(tt, ours_x[0], ours_attn, ours_proj), block(torch, theirs_x[0], c_attn, c_proj),
          np.float64, [(ours_x[0], theirs_x[0]), (ours_attn.weight, c_attn.weight),
                       (ours_proj.bias, c_proj.bias)])


# --------------------------------------------------------------------------- 1-D conv and pools

CONV1D_CASES = [dict(), dict(stride=2, padding=1), dict(dilation=2, padding="same"),
                dict(padding="valid", stride=(3,)), dict(groups=2),
                dict(groups=2, dilation=(2,), stride=2, padding=(2,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", CONV1D_CASES, ids=str)
def test_conv1d(device, dtype, kwargs):
    w = normal(6, 2 if kwargs.get("groups") else 4, 3)
    both(device, dtype, lambda L, x, w, b: L.nn.functional.conv1d(x, w, b, **kwargs),
         normal(2, 4, 11), w, normal(6))


def test_conv1d_unbatched_and_even_same_padding(device):
    both(device, np.float64, lambda L, x, w: L.nn.functional.conv1d(x, w), normal(4, 9),
         normal(3, 4, 2))
    with warnings.catch_warnings():  # (torch's note that it pads a copy)
        warnings.simplefilter("ignore")
        both(device, np.float64, lambda L, x, w: L.nn.functional.conv1d(x, w, padding="same"),
             normal(2, 4, 9), normal(3, 4, 4))


def test_conv1d_errors_say_what_pytorch_says(device):
    x = tt.ones(2, 3, 10, device=device)

    def same(fn, ours_error=RuntimeError):
        message = torch_error(fn)
        with pytest.raises(ours_error) as info:
            fn(tt)
        assert message in str(info.value)

    def conv(L, x_shape, w_shape, **kw):
        return L.nn.functional.conv1d(L.ones(*x_shape), L.ones(*w_shape), **kw)

    same(lambda L: conv(L, (2, 3, 4, 5), (4, 3, 3)))
    same(lambda L: conv(L, (2, 5, 10), (4, 3, 3)))
    same(lambda L: conv(L, (2, 3, 2), (4, 3, 3)))
    same(lambda L: conv(L, (2, 3, 10), (4, 3, 3), stride=0))
    same(lambda L: conv(L, (2, 3, 10), (4, 3, 3), padding=-1))
    same(lambda L: conv(L, (2, 3, 10), (4, 3, 3), padding="same", stride=2))
    same(lambda L: L.nn.functional.conv1d(L.ones(2, 3, 10), L.ones(4, 3, 3), L.ones(5)))
    with pytest.raises(RuntimeError, match=r"expected stride to be a single integer value or a "
                                           r"list of 1 values"):
        F.conv1d(x, tt.ones(4, 3, 3, device=device), stride=(2, 2))
    with pytest.raises(RuntimeError, match=r"expected weight \[Cout, Cin / groups, K\]"):
        F.conv1d(x, tt.ones(4, 3, 3, 3, device=device))
    with pytest.raises(TypeError, match="float64"):
        F.conv1d(x, tt.ones(4, 3, 3, device=device, dtype=tt.float64))


MAXPOOL1D_CASES = [dict(kernel_size=3), dict(kernel_size=3, stride=2, padding=1),
                   dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True),
                   dict(kernel_size=(2,), ceil_mode=True)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", MAXPOOL1D_CASES, ids=str)
def test_max_pool1d(device, dtype, kwargs):
    x = normal(2, 3, 11)
    both(device, dtype, lambda L, x: L.nn.functional.max_pool1d(x, **kwargs), x)
    ours = F.max_pool1d(tt.tensor(x, device=device), **kwargs, return_indices=True)
    theirs = torch.nn.functional.max_pool1d(torch.tensor(x), **kwargs, return_indices=True)
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    assert ours[1].dtype == tt.int64
    with_indices = F.max_pool1d_with_indices(tt.tensor(x, device=device), **kwargs)
    np.testing.assert_array_equal(with_indices[1].numpy(), theirs[1].numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3), dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=4, stride=3, ceil_mode=True)], ids=str)
def test_avg_pool1d(device, dtype, kwargs):
    both(device, dtype, lambda L, x: L.nn.functional.avg_pool1d(x, **kwargs), normal(2, 3, 11))


def test_pool1d_unbatched_and_errors(device):
    both(device, np.float64, lambda L, x: L.nn.functional.max_pool1d(x, 3), normal(3, 10))
    both(device, np.float64, lambda L, x: L.nn.functional.avg_pool1d(x, 3), normal(3, 10))
    for fn in (lambda L: L.nn.functional.max_pool1d(L.ones(2, 3, 10), 4, padding=3),
               lambda L: L.nn.functional.max_pool1d(L.ones(2, 3, 10), 0),
               lambda L: L.nn.functional.max_pool1d(L.ones(2, 3, 4, 5), 2),
               lambda L: L.nn.functional.max_pool1d(L.ones(2, 3, 10), 20),
               lambda L: L.nn.functional.avg_pool1d(L.ones(2, 3, 10), 20),
               lambda L: L.nn.functional.avg_pool1d(L.ones(2, 3, 4, 5), 2)):
        message = torch_error(fn)
        with pytest.raises(RuntimeError) as info:
            fn(tt)
        assert message in str(info.value)


def _copy_parameters(ours, theirs, device):
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours.to(device)


@pytest.mark.parametrize("kwargs", [
    dict(), dict(stride=2, padding=1, dilation=2, groups=2, bias=False, padding_mode="reflect"),
    dict(padding="same", padding_mode="circular", kernel_size=4),
    dict(padding="same", padding_mode="replicate", dilation=2)], ids=str)
def test_conv1d_module(device, kwargs):
    kwargs = dict(dict(kernel_size=3), **kwargs)
    ours, theirs = nn.Conv1d(4, 6, **kwargs), torch.nn.Conv1d(4, 6, **kwargs)
    assert repr(ours) == repr(theirs)
    assert ours.weight.shape == tuple(theirs.weight.shape)
    fan_in = 4 // ours.groups * ours.kernel_size[0]  # (PyTorch's init: U(+-1/sqrt(fan_in)))
    assert np.abs(ours.weight.numpy()).max() <= 1 / math.sqrt(fan_in)
    ours = _copy_parameters(ours, theirs.double(), device).to(dtype=tt.float64)
    x_ours, x_theirs = leaves(device, np.float64, normal(2, 4, 10))
    pairs = [(x_ours[0], x_theirs[0]), (ours.weight, theirs.weight)]
    if ours.bias is not None:
        pairs.append((ours.bias, theirs.bias))
    check(ours(x_ours[0]), theirs(x_theirs[0]), np.float64, pairs)


def test_pool1d_modules(device):
    for ours, theirs in ((nn.MaxPool1d(3, 2, 1), torch.nn.MaxPool1d(3, 2, 1)),
                         (nn.MaxPool1d(3, 2, 1, 2, True, True),
                          torch.nn.MaxPool1d(3, 2, 1, 2, True, True)),
                         (nn.AvgPool1d(3), torch.nn.AvgPool1d(3)),
                         (nn.AvgPool1d(3, 2, 1, True, False),
                          torch.nn.AvgPool1d(3, 2, 1, True, False))):
        assert repr(ours) == repr(theirs)
        x = normal(2, 3, 10)
        a, b = ours(tt.tensor(x, device=device)), theirs(torch.tensor(x))
        a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
        for s, t in zip(a, b):
            np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-12)
    assert nn.AvgPool1d(3).kernel_size == (3,) and nn.MaxPool1d(3).stride == 3
    assert not isinstance(nn.MaxPool1d(3), nn.MaxPool2d)
    assert not isinstance(nn.AvgPool1d(3), nn.AvgPool2d)


def test_conv1d_module_errors():
    for kwargs, message in ((dict(groups=3), "in_channels must be divisible by groups"),
                            (dict(padding_mode="zero"), "padding_mode must be one of"),
                            (dict(padding="same", stride=2),
                             "padding='same' is not supported for strided convolutions")):
        with pytest.raises(ValueError, match=message):
            nn.Conv1d(4, 6, 3, **kwargs)
        with pytest.raises(ValueError, match=message):
            torch.nn.Conv1d(4, 6, 3, **kwargs)


# --------------------------------------------------------------------------- activations

EDGES = np.array([np.nan, 0.5, -0.5, 0.6, -0.6, 0.1, np.inf, -np.inf, 3.0, -2.0, 0.0])

ELEMENTWISE = {
    "softshrink": lambda L, x: L.nn.functional.softshrink(x),
    "softshrink(1)": lambda L, x: L.nn.functional.softshrink(x, 1.0),
    "hardshrink": lambda L, x: L.nn.functional.hardshrink(x),
    "hardshrink(-1)": lambda L, x: L.nn.functional.hardshrink(x, -1.0),
    "tanhshrink": lambda L, x: L.nn.functional.tanhshrink(x),
    "threshold": lambda L, x: L.nn.functional.threshold(x, 0.5, 9.0),
    "Softshrink": lambda L, x: L.nn.Softshrink(0.3)(x),
    "Hardshrink": lambda L, x: L.nn.Hardshrink()(x),
    "Tanhshrink": lambda L, x: L.nn.Tanhshrink()(x),
    "Threshold": lambda L, x: L.nn.Threshold(0.1, 20.0)(x),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_shrinks_and_threshold_with_their_edges(device, dtype, name):
    """Values and gradients at the bounds, at infinities and at NaN (PyTorch's: a NaN stays
    NaN; its gradient is 0 for the shrinks, 1 for threshold)."""
    ours, theirs = leaves(device, dtype, np.concatenate([EDGES, normal(20)]))
    a, b = ELEMENTWISE[name](tt, ours[0]), ELEMENTWISE[name](torch, theirs[0])
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL[dtype])
    a.backward(tt.ones_like(a))  # (not a sum: inf + -inf would warn)
    b.backward(torch.ones_like(b))
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy(), **TOL[dtype])


INPLACE = {
    "relu_": lambda L, x: L.nn.functional.relu_(x),
    "elu_": lambda L, x: L.nn.functional.elu_(x, 0.7),
    "leaky_relu_": lambda L, x: L.nn.functional.leaky_relu_(x, 0.2),
    "hardtanh_": lambda L, x: L.nn.functional.hardtanh_(x, -0.5, 0.8),
    "celu_": lambda L, x: L.nn.functional.celu_(x, 0.5),
    "selu_": lambda L, x: L.nn.functional.selu_(x),
    "threshold_": lambda L, x: L.nn.functional.threshold_(x, 0.1, 2.0),
    "Threshold(inplace)": lambda L, x: L.nn.Threshold(0.1, 2.0, True)(x),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_functional_forms_write_into_the_input_with_autograd(device, name):
    ours, theirs = leaves(device, np.float64, normal(4, 5))
    a, b = ours[0] * 1, theirs[0] * 1  # (a non-leaf to write into)
    out_a, out_b = INPLACE[name](tt, a), INPLACE[name](torch, b)
    assert out_a is a and out_b is b
    check(a, b, np.float64, [(ours[0], theirs[0])])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        INPLACE[name](tt, tt.ones(3, requires_grad=True, device=device))


def test_threshold_of_integers_and_shrink_errors(device):
    ints = tt.arange(5, device=device)
    assert F.threshold(ints, 2, -1.5).tolist() == torch.nn.functional.threshold(
        torch.arange(5), 2, -1.5).tolist()
    assert F.threshold(ints, 2, -1.5).dtype == tt.int64
    for dtype, name in ((np.float32, "Float"), (np.float64, "Double")):
        message = torch_error(lambda L, dtype=dtype: L.nn.functional.softshrink(
            L.ones(3, dtype=getattr(L, np.dtype(dtype).name)), -1))
        assert f"for input dtype {name}, but found -1" in message
        with pytest.raises(ValueError, match=f"lambda must be in range .* for input dtype "
                                             f"{name}, but found -1"):
            F.softshrink(tt.ones(3, dtype=dtype, device=device), -1)
    with pytest.raises(TypeError, match="floating point"):
        F.hardshrink(ints)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 0, 1, 2])
def test_glu(device, dtype, dim):
    x = normal(4, 6, 2)
    if x.shape[dim] % 2:
        return
    both(device, dtype, lambda L, x: L.nn.functional.glu(x, dim), x)
    both(device, dtype, lambda L, x: L.nn.GLU(dim)(x), x)
    assert repr(nn.GLU(dim)) == repr(torch.nn.GLU(dim))


def test_glu_errors(device):
    for fn, error in ((lambda L: L.nn.functional.glu(L.ones(3, 5)), RuntimeError),
                      (lambda L: L.nn.functional.glu(L.ones(3, 4), dim=2), IndexError),
                      (lambda L: L.nn.functional.glu(L.ones(())), RuntimeError)):
        message = torch_error(fn)
        with pytest.raises(error) as info:
            fn(tt)
        assert message in str(info.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm(device, dtype):
    x = normal(3, 4, 6)
    both(device, dtype, lambda L, x, w: L.nn.functional.rms_norm(x, (4, 6), w), x, normal(4, 6))
    both(device, dtype, lambda L, x: L.nn.functional.rms_norm(x, [6], eps=0.1), x)
    # eps=None: the dtype's machine epsilon, which matters for tiny inputs
    both(device, dtype, lambda L, x: L.nn.functional.rms_norm(x, [6]), x * 1e-5,
         tol=dict(rtol=1e-4, atol=0) if dtype == np.float32 else None)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")  # (torch's)
def test_rms_norm_of_float16_is_computed_in_float32(device):
    """PyTorch's opmath: 300 squared would overflow float16; and eps=None is float32's."""
    for scale in (300.0, 1.0, 1e-3):
        x = (normal(3, 4) * scale).astype(np.float16)
        w = normal(4).astype(np.float32)
        ours, theirs = leaves(device, np.float16, x)
        a = F.rms_norm(ours[0], [4], tt.tensor(w, device=device))
        b = torch.nn.functional.rms_norm(theirs[0], [4], torch.tensor(w))
        assert a.dtype == tt.float16
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-3)
        a.sum().backward()
        b.sum().backward()
        np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy(), rtol=2e-3,
                                   atol=1e-3)


NORMS_FP16 = {
    "batch_norm": lambda L, x: L.nn.functional.batch_norm(x, None, None, training=True),
    "layer_norm": lambda L, x: L.nn.functional.layer_norm(x, [8]),
    "layer_norm(float32 weight)": lambda L, x: L.nn.functional.layer_norm(
        x, [8], L.linspace(0.5, 2, 8, device=x.device)),
    "group_norm": lambda L, x: L.nn.functional.group_norm(x, 1),
    "instance_norm": lambda L, x: L.nn.functional.instance_norm(x),
}


@pytest.mark.parametrize("scale", [300.0, 1e-3])
@pytest.mark.parametrize("name", NORMS_FP16)
def test_float16_normalisations_compute_in_float32(device, name, scale):
    """Values of 300 in float16: their squares overflow it, and a variance of inf normalised
    every value to 0 (silently); PyTorch computes in float32 and rounds once."""
    ours, theirs = leaves(device, np.float16, normal(4, 3, 8) * scale)
    a, b = NORMS_FP16[name](tt, ours[0]), NORMS_FP16[name](torch, theirs[0])
    assert a.dtype == tt.float16
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-3, atol=2e-3)
    g = normal(*a.shape).astype(np.float16)
    a.backward(tt.tensor(g, device=device))
    b.backward(torch.tensor(g))
    top = float(np.abs(theirs[0].grad.numpy()).max())
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy(), rtol=0,
                               atol=2e-3 * top)


def test_rms_norm_module(device):
    for args, kwargs in (((6,), {}), (([4, 6],), dict(eps=1e-3, elementwise_affine=False))):
        ours, theirs = nn.RMSNorm(*args, **kwargs), torch.nn.RMSNorm(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
    ours, theirs = nn.RMSNorm(6, dtype=tt.float64).to(device), torch.nn.RMSNorm(
        6, dtype=torch.float64)
    with torch.no_grad():
        theirs.weight.uniform_()
    with tt.no_grad():
        ours.weight.copy_(tt.tensor(theirs.weight.detach().numpy(), device=device))
    x_ours, x_theirs = leaves(device, np.float64, normal(3, 6))
    check(ours(x_ours[0]), theirs(x_theirs[0]), np.float64,
          [(x_ours[0], x_theirs[0]), (ours.weight, theirs.weight)])


def test_rms_norm_errors(device):
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with "
                                           r"shape \[\*, 4\], but got input of size \[2, 3\]"):
        F.rms_norm(tt.ones(2, 3, device=device), (4,))
    message = torch_error(lambda L: L.nn.functional.rms_norm(L.ones(2, 3), (3,), L.ones(4)))
    with pytest.raises(RuntimeError) as info:
        F.rms_norm(tt.ones(2, 3, device=device), (3,), tt.ones(4, device=device))
    assert message in str(info.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 12, 2, 3), (12, 2, 3), (2, 1, 8, 4, 1)])
def test_pixel_shuffle_and_unshuffle(device, dtype, shape):
    r = 2
    both(device, dtype, lambda L, x: L.nn.functional.pixel_shuffle(x, r), normal(*shape))
    both(device, dtype, lambda L, x: L.nn.PixelShuffle(r)(x), normal(*shape))
    small = shape[:-3] + (shape[-3] // 4, shape[-2] * 2, shape[-1] * 2)
    both(device, dtype, lambda L, x: L.nn.functional.pixel_unshuffle(x, r), normal(*small))
    both(device, dtype, lambda L, x: L.nn.PixelUnshuffle(r)(x), normal(*small))
    x = tt.tensor(normal(*shape), device=device)
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2).numpy(),
                                  x.numpy())
    assert repr(nn.PixelShuffle(3)) == repr(torch.nn.PixelShuffle(3))
    assert repr(nn.PixelUnshuffle(3)) == repr(torch.nn.PixelUnshuffle(3))


def test_pixel_shuffle_errors(device):
    for fn in (lambda L: L.nn.functional.pixel_shuffle(L.ones(1, 5, 2, 2), 2),
               lambda L: L.nn.functional.pixel_shuffle(L.ones(5, 2), 2),
               lambda L: L.nn.functional.pixel_unshuffle(L.ones(1, 1, 3, 4), 2),
               lambda L: L.nn.functional.pixel_unshuffle(L.ones(1, 1, 4, 3), 2)):
        message = torch_error(fn)
        with pytest.raises(RuntimeError) as info:
            fn(tt)
        assert message in str(info.value)
    with pytest.raises(ValueError, match="pixel_shuffle expects a positive upscale_factor, but "
                                         "got 0"):
        F.pixel_shuffle(tt.ones(1, 4, 2, 2, device=device), 0)


def test_module_reprs_as_torch():
    for ours, theirs in ((nn.Threshold(0.1, 20.0), torch.nn.Threshold(0.1, 20.0)),
                         (nn.Threshold(0.1, 2, True), torch.nn.Threshold(0.1, 2, True)),
                         (nn.Softshrink(), torch.nn.Softshrink()),
                         (nn.Hardshrink(0.3), torch.nn.Hardshrink(0.3)),
                         (nn.Tanhshrink(), torch.nn.Tanhshrink()), (nn.GLU(), torch.nn.GLU())):
        assert repr(ours) == repr(theirs)


def test_gumbel_softmax(device):
    logits = tt.tensor(np.log([[0.1, 0.2, 0.7]] * 4000), device=device, requires_grad=True)
    tt.manual_seed(0)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1, rtol=1e-12)
    tt.manual_seed(0)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    # the sample's argmax as a one-hot: the category drawn with the logits' probabilities
    assert set(np.unique(hard.detach().numpy())) == {0.0, 1.0}
    np.testing.assert_array_equal(hard.detach().numpy().argmax(-1),
                                  soft.detach().numpy().argmax(-1))
    np.testing.assert_allclose(hard.detach().numpy().mean(0), [0.1, 0.2, 0.7], atol=0.03)
    # straight through: the hard sample's gradient is the soft one's
    g = tt.tensor(normal(4000, 3), device=device)
    (soft * g).sum().backward()
    soft_grad = logits.grad.numpy().copy()
    logits.grad = None
    (hard * g).sum().backward()
    np.testing.assert_allclose(logits.grad.numpy(), soft_grad, rtol=1e-10, atol=1e-12)
    # ... equal to PyTorch's formula on the same Gumbel noise
    x = torch.tensor(np.log([[0.1, 0.2, 0.7]] * 4000), requires_grad=True)
    noise = torch.tensor(np.log(soft.detach().numpy()) * 0.5) - x.detach()  # (+ a constant)
    ((((x + noise) / 0.5).softmax(-1)) * torch.tensor(g.numpy())).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), soft_grad, rtol=1e-8, atol=1e-10)
    assert F.gumbel_softmax(tt.ones(2, 3, device=device), dim=0).shape == (2, 3)


# --------------------------------------------------------------------------- instance norm

@pytest.mark.parametrize("dtype", DTYPES)
def test_instance_norm_functional(device, dtype):
    x, w, b = normal(2, 3, 5, 4), normal(3), normal(3)
    both(device, dtype, lambda L, x, w, b: L.nn.functional.instance_norm(x, weight=w, bias=b),
         x, w, b)
    both(device, dtype, lambda L, x: L.nn.functional.instance_norm(x, eps=0.1), x[:, :, 0])
    mean, var = normal(3), np.abs(normal(3)) + 0.5
    ours = [tt.tensor(a.astype(dtype), device=device) for a in (mean, var)]
    theirs = [torch.tensor(a.astype(dtype)) for a in (mean, var)]
    both(device, dtype, lambda L, x: L.nn.functional.instance_norm(
        x, *(ours if L is tt else theirs), momentum=0.3), x)
    for a, t in zip(ours, theirs):  # (updated in place, with the per-sample average)
        np.testing.assert_allclose(a.numpy(), t.numpy(), **TOL[dtype])
    both(device, dtype, lambda L, x: L.nn.functional.instance_norm(
        x, *(ours if L is tt else theirs), use_input_stats=False), x)


@pytest.mark.parametrize("kwargs", [dict(), dict(affine=True),
                                    dict(track_running_stats=True),
                                    dict(affine=True, track_running_stats=True, momentum=0.3),
                                    dict(track_running_stats=True, momentum=None),
                                    dict(affine=True, bias=False)], ids=str)
def test_instance_norm_modules(device, kwargs):
    if "bias" in kwargs and not TORCH_2_13:
        pytest.skip(f"bias= needs PyTorch 2.13 (this is {torch.__version__})")
    ours = nn.InstanceNorm2d(3, dtype=tt.float64, **kwargs)
    theirs = torch.nn.InstanceNorm2d(3, dtype=torch.float64, **kwargs)
    assert repr(ours) == repr(theirs) or not TORCH_2_13
    assert list(ours.state_dict()) == list(theirs.state_dict())
    if theirs.weight is not None:
        with torch.no_grad():
            theirs.weight.uniform_()
    ours = _copy_parameters(ours, theirs, device)
    for step in (1, 2):  # training: batch statistics, and the running ones updated
        x_ours, x_theirs = leaves(device, np.float64, normal(2, 3, 5, 4) * step)
        pairs = [(x_ours[0], x_theirs[0])]
        if ours.weight is not None:
            ours.weight.grad, theirs.weight.grad = None, None
            pairs.append((ours.weight, theirs.weight))
        check(ours(x_ours[0]), theirs(x_theirs[0]), np.float64, pairs)
        for name, buffer in theirs.named_buffers():
            np.testing.assert_allclose(getattr(ours, name).numpy(), buffer.numpy(),
                                       **TOL[np.float64])
    ours.eval()
    theirs.eval()
    x = normal(2, 3, 5, 4)
    np.testing.assert_allclose(ours(tt.tensor(x, device=device)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), **TOL[np.float64])


def test_instance_norm_unbatched_and_errors(device):
    for ours, theirs, x in ((nn.InstanceNorm1d(3), torch.nn.InstanceNorm1d(3), normal(3, 6)),
                            (nn.InstanceNorm3d(3), torch.nn.InstanceNorm3d(3),
                             normal(3, 2, 3, 4))):
        np.testing.assert_allclose(ours(tt.tensor(x, device=device)).numpy(),
                                   theirs(torch.tensor(x)).numpy(), **TOL[np.float64])
    with pytest.warns(UserWarning, match="input's size at dim=1 does not match num_features"):
        nn.InstanceNorm1d(4)(tt.ones(2, 3, 5, device=device))
    for fn, error in ((lambda L: L.nn.InstanceNorm2d(3)(L.ones(3, 5)), ValueError),
                      (lambda L: L.nn.InstanceNorm1d(4, affine=True)(L.ones(2, 3, 5)),
                       ValueError),
                      (lambda L: L.nn.functional.instance_norm(L.ones(2, 3, 4),
                                                               use_input_stats=False),
                       RuntimeError)):
        message = torch_error(fn)
        with pytest.raises(error) as info:
            fn(tt)
        assert message in str(info.value)
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(tt.ones(2, 3, 1, device=device))
    assert not isinstance(nn.InstanceNorm2d(3), nn.BatchNorm2d)


# --------------------------------------------------------------------------- spatial transformer

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 5), (2, 3, 6, 1)], ids=str)
def test_affine_grid(device, dtype, align_corners, size):
    with warnings.catch_warnings():  # (both warn about unit-size grids with align_corners)
        warnings.simplefilter("ignore")
        both(device, dtype, lambda L, theta: L.nn.functional.affine_grid(
            theta, size, align_corners=align_corners), normal(2, 2, 3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample(device, dtype, mode, padding_mode, align_corners):
    """Points inside, on the edges and corners, and far outside (several reflections)."""
    grid = RNG.uniform(-1.6, 1.6, (2, 4, 7, 2))
    grid[0, 0, :4] = [[-1, -1], [1, 1], [3.5, -2.7], [-3.2, 0.3]]
    both(device, dtype, lambda L, x, grid: L.nn.functional.grid_sample(
        x, grid, mode, padding_mode, align_corners), normal(2, 3, 5, 6), grid)


def test_grid_sample_nearest_gives_the_grid_a_zero_gradient(device):
    grid = tt.tensor(RNG.uniform(-1, 1, (1, 2, 3, 2)), device=device, requires_grad=True)
    F.grid_sample(tt.tensor(normal(1, 2, 3, 3), device=device), grid, "nearest",
                  align_corners=False).sum().backward()
    assert grid.grad is not None and not grid.grad.numpy().any()


def test_a_spatial_transformer_step_matches_torch(device):
    """The tutorial's transform: theta from a localisation layer, the grid, the sample; the
    gradients of the input, the layer's weight (through theta) and its bias."""
    torch.manual_seed(0)
    theirs = torch.nn.Linear(12, 6, dtype=torch.float64)
    ours = _copy_parameters(nn.Linear(12, 6, dtype=tt.float64), theirs, device)

    def stn(L, x, fc):
        theta = fc(x.reshape(x.shape[0], -1)[:, :12]).reshape(-1, 2, 3)
        grid = L.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
        return L.nn.functional.grid_sample(x, grid, align_corners=False)

    x_ours, x_theirs = leaves(device, np.float64, normal(2, 1, 6, 5))
    check(stn(tt, x_ours[0], ours), stn(torch, x_theirs[0], theirs), np.float64,
          [(x_ours[0], x_theirs[0]), (ours.weight, theirs.weight), (ours.bias, theirs.bias)])


def test_affine_grid_and_grid_sample_warn_and_refuse_as_torch(device):
    theta, x = tt.zeros(1, 2, 3, device=device), tt.zeros(1, 1, 3, 3, device=device)
    grid = tt.zeros(1, 2, 2, 2, device=device)
    with pytest.warns(UserWarning, match="changed to align_corners=False since 1.3.0"):
        F.affine_grid(theta, (1, 1, 2, 2))
    with pytest.warns(UserWarning, match="changed to align_corners=False since 1.3.0"):
        F.grid_sample(x, grid)
    for fn, error in (
            (lambda L: L.nn.functional.affine_grid(L.zeros(1, 2, 3, dtype=L.int64),
                                                   (1, 1, 2, 2), False), ValueError),
            (lambda L: L.nn.functional.affine_grid(L.zeros(1, 3, 3), (1, 1, 2, 2), False),
             ValueError),
            (lambda L: L.nn.functional.affine_grid(L.zeros(1, 2, 3), (1, 2, 2), False),
             NotImplementedError),
            (lambda L: L.nn.functional.affine_grid(L.zeros(1, 2, 3), (1, 1, 0, 2), False),
             ValueError),
            (lambda L: L.nn.functional.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 2),
                                                   "cubic", align_corners=False), ValueError),
            (lambda L: L.nn.functional.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 2),
                                                   padding_mode="wrap", align_corners=False),
             ValueError),
            (lambda L: L.nn.functional.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 3),
                                                   align_corners=False), RuntimeError),
            (lambda L: L.nn.functional.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(2, 2, 2, 2),
                                                   align_corners=False), RuntimeError)):
        message = torch_error(fn)
        with pytest.raises(error) as info:
            fn(tt)
        # (the sizes printed in their own spelling: torch.Size([...]) or [...])
        assert message.split(" but ")[0].split(" Got ")[0].removesuffix(",") in str(info.value)
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.grid_sample(x, grid, "bicubic", align_corners=False)
    with pytest.raises(NotImplementedError, match="2-D"):
        F.grid_sample(tt.zeros(1, 1, 2, 2, 2, device=device), tt.zeros(1, 1, 1, 1, 3,
                                                                       device=device),
                      align_corners=False)
    with pytest.raises(TypeError, match="same floating point dtype"):
        F.grid_sample(x, grid.to(dtype=tt.float64), align_corners=False)


# --------------------------------------------------------------------------- losses

def _loss_inputs(name):
    x, y = normal(5, 4), normal(5, 4)
    return {
        # (counts 0 and 1 too, where full=True's Stirling term is left out)
        "poisson_nll_loss": ([x], [RNG.poisson(2, (5, 4)).astype(float)]),
        "poisson_nll_loss(log_input=False)": ([np.abs(x) + 0.1], [RNG.poisson(2, (5, 4))
                                                                  .astype(float)]),
        "gaussian_nll_loss": ([x, y, np.abs(normal(5, 4))], []),
        "gaussian_nll_loss(var [N])": ([x, y, np.abs(normal(5))], []),
        "gaussian_nll_loss(var [N, 1])": ([x, y, np.abs(normal(5, 1))], []),
        "soft_margin_loss": ([x], [np.sign(y)]),
        "multilabel_soft_margin_loss": ([x], [(y > 0).astype(float)]),
        "multilabel_soft_margin_loss(weight)": ([x, RNG.random(4)], [(y > 0).astype(float)]),
        "multi_margin_loss": ([x], [np.array([0, 3, 1, 2, 3])]),
        "triplet_margin_with_distance_loss": ([x, y, normal(5, 4)], []),
    }[name]


LOSSES = {
    "poisson_nll_loss": lambda L, x, t, **kw: L.nn.functional.poisson_nll_loss(x, t, **kw),
    "poisson_nll_loss(full)": lambda L, x, t, **kw: L.nn.functional.poisson_nll_loss(
        x, t, full=True, **kw),
    "poisson_nll_loss(log_input=False)": lambda L, x, t, **kw: L.nn.functional
    .poisson_nll_loss(x, t, log_input=False, full=True, **kw),
    "gaussian_nll_loss": lambda L, x, t, v, **kw: L.nn.functional.gaussian_nll_loss(x, t, v,
                                                                                    **kw),
    "gaussian_nll_loss(var [N])": lambda L, x, t, v, **kw: L.nn.functional.gaussian_nll_loss(
        x, t, v, full=True, **kw),
    "gaussian_nll_loss(var [N, 1])": lambda L, x, t, v, **kw: L.nn.functional
    .gaussian_nll_loss(x, t, v, eps=0.5, **kw),
    "gaussian_nll_loss(float var)": lambda L, x, t, **kw: L.nn.functional.gaussian_nll_loss(
        x, t, 0.3, **kw),
    "soft_margin_loss": lambda L, x, y, **kw: L.nn.functional.soft_margin_loss(x, y, **kw),
    "multilabel_soft_margin_loss": lambda L, x, y, **kw: L.nn.functional
    .multilabel_soft_margin_loss(x, y, **kw),
    "multilabel_soft_margin_loss(weight)": lambda L, x, w, y, **kw: L.nn.functional
    .multilabel_soft_margin_loss(x, y, w, **kw),
    "multi_margin_loss": lambda L, x, y, **kw: L.nn.functional.multi_margin_loss(
        x, y, margin=0.7, **kw),
    "multi_margin_loss(p=2, weight)": lambda L, x, y, **kw: L.nn.functional.multi_margin_loss(
        x, y, p=2, weight=L.linspace(0.5, 2, 4, dtype=x.dtype, device=x.device), **kw),
    "triplet_margin_with_distance_loss": lambda L, a, p, n, **kw: L.nn.functional
    .triplet_margin_with_distance_loss(a, p, n, **kw),
    "triplet_margin_with_distance_loss(cosine, swap)": lambda L, a, p, n, **kw: L.nn.functional
    .triplet_margin_with_distance_loss(a, p, n, distance_function=lambda u, v: 1 - L.nn
                                       .functional.cosine_similarity(u, v), swap=True, **kw),
}
INPUTS_OF = {"poisson_nll_loss(full)": "poisson_nll_loss",
             "gaussian_nll_loss(float var)": "gaussian_nll_loss",
             "multi_margin_loss(p=2, weight)": "multi_margin_loss",
             "triplet_margin_with_distance_loss(cosine, swap)":
             "triplet_margin_with_distance_loss"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", LOSSES)
def test_losses(device, dtype, reduction, name):
    grads, others = _loss_inputs(INPUTS_OF.get(name, name))
    if name == "gaussian_nll_loss(float var)":
        grads = grads[:2]
    ours, theirs = leaves(device, dtype, *grads)
    other_ours = [tt.tensor(a if a.dtype.kind in "iu" else a.astype(dtype), device=device)
                  for a in others]
    other_theirs = [torch.tensor(a if a.dtype.kind in "iu" else a.astype(dtype))
                    for a in others]
    a = LOSSES[name](tt, *ours, *other_ours, reduction=reduction)
    b = LOSSES[name](torch, *theirs, *other_theirs, reduction=reduction)
    check(a, b, dtype, list(zip(ours, theirs)))


@pytest.mark.parametrize("log_input", [True, False])
def test_poisson_nll_loss_gradient_of_the_target(device, log_input):
    """The target's gradient as PyTorch's; with ``full=True`` where the target is above 1
    (where it is 0, PyTorch's is NaN, ``0 * log(0)``'s; tinytrain's is finite: the Stirling
    term is not there)."""
    x = np.abs(normal(5, 4)) + 0.1
    for full, t in ((False, RNG.poisson(2, (5, 4)) + 0.0), (True, RNG.uniform(1.5, 6, (5, 4)))):
        both(device, np.float64, lambda L, x, t, full=full: L.nn.functional.poisson_nll_loss(
            x, t, log_input=log_input, full=full), x, t)
    t = tt.tensor(np.array([0.0, 1.0, 3.0]), device=device, requires_grad=True)
    F.poisson_nll_loss(tt.ones(3, device=device), t, full=True).backward()
    assert np.isfinite(t.grad.numpy()).all()


def test_loss_modules_as_torch(device):
    x, y = normal(5, 4), normal(5, 4)
    t = np.array([0, 3, 1, 2, 3])
    cases = [
        (nn.PoissonNLLLoss(), torch.nn.PoissonNLLLoss(), [x], [np.abs(y)]),
        (nn.PoissonNLLLoss(log_input=False, full=True, reduction="sum"),
         torch.nn.PoissonNLLLoss(log_input=False, full=True, reduction="sum"),
         [np.abs(x)], [np.abs(y) * 3]),
        (nn.GaussianNLLLoss(full=True), torch.nn.GaussianNLLLoss(full=True),
         [x], [y, np.abs(y)]),
        (nn.SoftMarginLoss(reduction="none"), torch.nn.SoftMarginLoss(reduction="none"),
         [x], [np.sign(y)]),
        (nn.MultiLabelSoftMarginLoss(weight=tt.tensor(np.arange(1.0, 5))),
         torch.nn.MultiLabelSoftMarginLoss(weight=torch.arange(1.0, 5, dtype=torch.float64)),
         [x], [(y > 0).astype(float)]),
        (nn.MultiMarginLoss(p=2, margin=0.5), torch.nn.MultiMarginLoss(p=2, margin=0.5),
         [x], [t]),
        (nn.TripletMarginWithDistanceLoss(margin=2.0),
         torch.nn.TripletMarginWithDistanceLoss(margin=2.0), [x, y, normal(5, 4)], []),
    ]
    for ours, theirs, grads, others in cases:
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        ours.to(device)
        a_leaves, b_leaves = leaves(device, np.float64, *grads)
        a = ours(*a_leaves, *(tt.tensor(o, device=device) for o in others))
        b = theirs(*b_leaves, *map(torch.tensor, others))
        check(a, b, np.float64, list(zip(a_leaves, b_leaves)))


def test_legacy_reduction_arguments_of_the_new_losses(device):
    x, y = tt.tensor(normal(5, 4), device=device), tt.tensor(np.abs(normal(5, 4)),
                                                             device=device)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        ours = F.poisson_nll_loss(x, y, size_average=False)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        theirs = torch.nn.functional.poisson_nll_loss(torch.tensor(x.numpy()),
                                                      torch.tensor(y.numpy()),
                                                      size_average=False)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.SoftMarginLoss(reduce=False)(x, y).shape == (5, 4)


def test_loss_errors(device):
    x = tt.tensor(normal(3, 4), device=device)
    t = tt.tensor(np.array([0, 1, 2]), device=device)
    with pytest.raises(IndexError, match="target out of range"):
        F.multi_margin_loss(x, tt.tensor(np.array([0, 1, 4]), device=device))
    message = torch_error(lambda L: L.nn.functional.multi_margin_loss(L.ones(3, 4),
                                                                      L.tensor([0, 1])))
    with pytest.raises(RuntimeError) as info:
        F.multi_margin_loss(x, t[:2])
    assert message in str(info.value) or not TORCH_2_13
    assert "Expected target size [3], but got [2]" in str(info.value)
    with pytest.raises(RuntimeError, match="Expected non-empty vector or matrix"):
        F.multi_margin_loss(tt.ones(2, 3, 4, device=device), t[:2])
    with pytest.raises(TypeError, match="expected scalar type Long but found Int"):
        F.multi_margin_loss(x, t.to(dtype=tt.int32))
    with pytest.raises(RuntimeError, match=r"inconsistent weight size, expected 4 but got \[3\]"):
        F.multi_margin_loss(x, t, weight=tt.ones(3, device=device))
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        F.multi_margin_loss(x, t, p=3)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -tt.ones(3, 1, device=device))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -1.0)
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, x, tt.ones(2, 4, device=device))
    for fn in (lambda: F.poisson_nll_loss(x, x, reduction="avg"),
               lambda: F.gaussian_nll_loss(x, x, 1.0, reduction="avg"),
               lambda: F.multi_margin_loss(x, t, reduction="avg"),
               lambda: F.triplet_margin_with_distance_loss(x, x, x, reduction="avg")):
        with pytest.raises(ValueError, match="avg"):
            fn()
    with pytest.raises(ValueError, match="margin must be greater than 0, got 0"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=0)
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        nn.TripletMarginWithDistanceLoss(margin=-1)
    with pytest.raises(RuntimeError, match="same number of dimensions, but got: anchor 2D"):
        F.triplet_margin_with_distance_loss(x, x, x[0])


# --------------------------------------------------------------------------- names

def test_the_new_names_are_offered_and_no_longer_placeholders():
    for name in ("Conv1d", "MaxPool1d", "AvgPool1d", "GLU", "RMSNorm", "PixelShuffle",
                 "PixelUnshuffle", "Threshold", "Softshrink", "Hardshrink", "Tanhshrink",
                 "PoissonNLLLoss", "GaussianNLLLoss", "SoftMarginLoss", "MultiMarginLoss",
                 "MultiLabelSoftMarginLoss", "TripletMarginWithDistanceLoss", "InstanceNorm1d",
                 "InstanceNorm2d", "InstanceNorm3d"):
        assert name in nn.__all__ and getattr(nn, name).__module__.startswith("tinytrain.nn.")
    for name in ("scaled_dot_product_attention", "conv1d", "max_pool1d", "avg_pool1d", "glu",
                 "rms_norm", "pixel_shuffle", "pixel_unshuffle", "threshold", "threshold_",
                 "relu_", "elu_", "leaky_relu_", "hardtanh_", "softshrink", "hardshrink",
                 "tanhshrink", "gumbel_softmax", "poisson_nll_loss", "gaussian_nll_loss",
                 "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
                 "triplet_margin_with_distance_loss", "instance_norm", "affine_grid",
                 "grid_sample"):
        assert name in F.__all__ and callable(getattr(F, name))
    nn.Conv1d(2, 3, 3)  # (a real layer now, not the placeholder that refused to be made)


# --------------------------------------------------------------------------- found by a fuzz

FLOAT_ONLY = {
    "hardshrink": lambda L, x: L.nn.functional.hardshrink(x),
    "softshrink": lambda L, x: L.nn.functional.softshrink(x),
    "glu": lambda L, x: L.nn.functional.glu(x),
    "rms_norm": lambda L, x: L.nn.functional.rms_norm(x, (2,)),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x),
    "elu": lambda L, x: L.nn.functional.elu(x),
    "multilabel_soft_margin_loss": lambda L, x: L.nn.functional.multilabel_soft_margin_loss(
        x, x),
}


@pytest.mark.parametrize("name", FLOAT_ONLY)
def test_float_only_functions_refuse_integers_with_torchs_not_implemented_error(device, name):
    """PyTorch raises NotImplementedError ('"elu_cpu" not implemented for 'Long''); tinytrain
    raised a DTypeError that was not one (it still is a DTypeError and a TypeError)."""
    assert "not implemented for 'Long'" in torch_error(
        lambda L: FLOAT_ONLY[name](L, L.tensor([[1, 2], [3, 4]])))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'") as info:
        FLOAT_ONLY[name](tt, tt.tensor([[1, 2], [3, 4]], device=device))
    assert isinstance(info.value, TypeError)


def test_tanhshrink_of_integers_and_the_shrink_and_pixel_argument_errors_as_torch(device):
    ours, theirs = F.tanhshrink(tt.arange(-3, 4, device=device)), \
        torch.nn.functional.tanhshrink(torch.arange(-3, 4))
    assert ours.dtype == tt.float32 and theirs.dtype == torch.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    for fn in (lambda L: L.nn.functional.softshrink(L.ones(3), -1.0),
               lambda L: L.nn.functional.pixel_shuffle(L.ones(1, 4, 2, 2), 0),
               lambda L: L.nn.functional.pixel_unshuffle(L.ones(1, 1, 2, 2), 0)):
        with pytest.raises(RuntimeError) as theirs:
            fn(torch)
        with pytest.raises(RuntimeError) as info:  # (and a ValueError, as tinytrain's was)
            fn(tt)
        assert isinstance(info.value, ValueError)
        assert str(theirs.value).split(",")[0] in str(info.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_with_nan_and_infinite_grid_values_as_torch(device, dtype, padding_mode,
                                                                align_corners):
    """A NaN grid coordinate (or an infinite one, reflected) is clipped to 0 by PyTorch's
    border and reflection padding; tinytrain's clamp kept the NaN, and the output was NaN."""
    image = normal(2, 3, 4, 5).astype(dtype)
    grid = np.random.default_rng(3).uniform(-1.5, 1.5, (2, 6, 7, 2))
    grid[0, :, 0] = [[np.nan, 0.1], [np.inf, 0.2], [-np.inf, 0.3], [0.2, np.nan],
                     [np.nan, np.nan], [-np.inf, np.inf]]
    grid = grid.astype(dtype)
    for mode in ("bilinear", "nearest"):
        ours = F.grid_sample(tt.tensor(image, device=device), tt.tensor(grid, device=device),
                             mode, padding_mode, align_corners)
        theirs = torch.nn.functional.grid_sample(torch.tensor(image), torch.tensor(grid), mode,
                                                 padding_mode, align_corners)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **TOL[dtype])


def test_sdpa_with_empty_embeddings_and_its_dropout_error_as_torch(device):
    """E = 0: the scores are empty sums, 0, and every query averages the values (tinytrain
    divided by sqrt(0)); a dropout_p outside [0, 1] is PyTorch's RuntimeError."""
    both(device, np.float64, lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(
        q, k, v), normal(2, 3, 0), normal(2, 4, 0), normal(2, 4, 2))
    both(device, np.float64, lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True), normal(3, 0), normal(4, 0), normal(4, 2))
    fn = lambda L: L.nn.functional.scaled_dot_product_attention(  # noqa: E731
        L.ones(1, 2, 3), L.ones(1, 2, 3), L.ones(1, 2, 3), dropout_p=1.5)
    message = torch_error(fn)
    with pytest.raises(RuntimeError, match=message):  # (and a ValueError, as before)
        fn(tt)


@pytest.mark.parametrize("options", [dict(), dict(count_include_pad=False),
                                     dict(ceil_mode=True), dict(divisor_override=2)])
def test_average_pools_of_int64_truncate_toward_zero_as_torch(device, options):
    """PyTorch averages int64 tensors in integers, rounding toward zero (tinytrain refused
    them); other integer dtypes, and the adaptive pools, raise its NotImplementedError."""
    x = np.random.default_rng(5).integers(-9, 10, (2, 3, 4, 7))
    pools = [lambda L, t: L.nn.functional.avg_pool2d(t, (2, 3), (1, 2), (1, 1), **options)]
    if "divisor_override" not in options:
        pools.append(lambda L, t: L.nn.functional.avg_pool1d(t[:, :, 0], 3, 2, 1, **options))
        pools.append(lambda L, t: L.nn.AvgPool1d(2, **options)(t[0]))
    for pool in pools:
        ours, theirs = pool(tt, tt.tensor(x, device=device)), pool(torch, torch.tensor(x))
        assert ours.dtype == tt.int64 and theirs.dtype == torch.int64
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    for fn in (lambda L: L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4, dtype=L.int32), 2),
               lambda L: L.nn.functional.adaptive_avg_pool2d(L.ones(1, 1, 4, 4, dtype=L.int64),
                                                             2),
               lambda L: L.nn.functional.adaptive_avg_pool1d(L.ones(1, 1, 4, dtype=L.int64),
                                                             2)):
        assert "not implemented for" in torch_error(fn)
        with pytest.raises(NotImplementedError, match="not implemented for"):
            fn(tt)
