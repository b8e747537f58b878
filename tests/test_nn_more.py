"""More of torch.nn against PyTorch: activations, distances, init, nn.utils, Conv2d's padding
modes, memory_format, and the default collate's strings (client programs' gaps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
DTYPES = [np.float32, np.float64]
# the pieces' ends (-3, 0, 3, 6), both sides of softplus's cut-off (20), large |x|
EDGES = [-40.0, -25.0, -20.5, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 20.5, 25.0, 40.0]


def inputs(dtype, *shape, seed=0):
    """A tinytrain leaf and a torch leaf with the same values (EDGES first, then normals)."""
    values = np.random.default_rng(seed).normal(0, 4, shape).astype(dtype)
    flat = values.reshape(-1)
    flat[:len(EDGES)] = np.array(EDGES[:flat.size], dtype)
    return (tt.tensor(values, requires_grad=True),
            torch.tensor(values, requires_grad=True))


def check(ours, theirs, dtype, leaves, seed=1, grad_rtol=None, sums=False):
    """Values, then gradients of ``sum(out * g)`` for a random ``g``, as torch's. ``sums``:
    each element is a long sum (a convolution), whose float32 rounding depends on the order
    of its terms, so the absolute tolerance scales with the largest element."""
    def close(a, b, tol):
        if sums:
            tol = dict(tol, atol=max(tol["atol"], tol["rtol"] * float(np.abs(b).max())))
        np.testing.assert_allclose(a, b, **tol)

    close(ours.detach().numpy(), theirs.detach().numpy(), TOL[dtype])
    assert ours.dtype == dtype and ours.shape == tuple(theirs.shape)
    g = np.random.default_rng(seed).normal(size=ours.shape).astype(dtype)
    (ours * tt.tensor(g)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    tol = TOL[dtype] if grad_rtol is None else dict(TOL[dtype], rtol=grad_rtol)
    for a, b in leaves:
        close(a.grad.numpy(), b.grad.numpy(), tol)


ACTIVATIONS = {
    "hardtanh": lambda L, x: L.nn.functional.hardtanh(x),
    "hardtanh(-3, 6)": lambda L, x: L.nn.functional.hardtanh(x, -3.0, 6.0),
    "relu6": lambda L, x: L.nn.functional.relu6(x),
    "logsigmoid": lambda L, x: L.nn.functional.logsigmoid(x),
    "mish": lambda L, x: L.nn.functional.mish(x),
    "hardswish": lambda L, x: L.nn.functional.hardswish(x),
    "hardsigmoid": lambda L, x: L.nn.functional.hardsigmoid(x),
    "selu": lambda L, x: L.nn.functional.selu(x),
    "celu": lambda L, x: L.nn.functional.celu(x),
    "celu(0.5)": lambda L, x: L.nn.functional.celu(x, alpha=0.5),
    "softmin": lambda L, x: L.nn.functional.softmin(x, dim=1),
    "softmin(0)": lambda L, x: L.nn.functional.softmin(x, 0),
    "softsign": lambda L, x: L.nn.functional.softsign(x),
    "Hardtanh": lambda L, x: L.nn.Hardtanh(-2, 2)(x),
    "ReLU6": lambda L, x: L.nn.ReLU6()(x),
    "LogSigmoid": lambda L, x: L.nn.LogSigmoid()(x),
    "Mish": lambda L, x: L.nn.Mish()(x),
    "Hardswish": lambda L, x: L.nn.Hardswish()(x),
    "Hardsigmoid": lambda L, x: L.nn.Hardsigmoid()(x),
    "SELU": lambda L, x: L.nn.SELU()(x),
    "CELU": lambda L, x: L.nn.CELU(2.0)(x),
    "Softmin": lambda L, x: L.nn.Softmin(dim=-1)(x),
    "Softsign": lambda L, x: L.nn.Softsign()(x),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_torch_values_and_gradients(name, dtype):
    x, tx = inputs(dtype, 5, 6)
    check(ACTIVATIONS[name](tt, x), ACTIVATIONS[name](torch, tx), dtype, [(x, tx)],
          grad_rtol=_float32_sixth(name, dtype))


def _float32_sixth(name, dtype):
    """PyTorch's hardsigmoid backward multiplies by the float32 constant 1.0f / 6.0f, also
    for float64 (a relative error of 3e-8); tinytrain divides by 6."""
    return 1e-7 if name.lower() == "hardsigmoid" and dtype == np.float64 else None


@pytest.mark.parametrize("dtype", DTYPES)
def test_logsigmoid_is_finite_far_out(dtype):
    x = tt.tensor([-1000.0, -200.0, 200.0, 1000.0], dtype=dtype, requires_grad=True)
    y = F.logsigmoid(x)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), [-1000, -200, 0, 0], atol=1e-30)
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 0, 0], atol=1e-30)


INPLACE = ["hardtanh", "relu6", "mish", "hardswish", "hardsigmoid", "selu", "celu"]


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_forms_write_the_input_and_keep_the_gradient(name):
    x, tx = inputs(np.float64, 4, 5)
    a, ta = x * 1, tx * 1  # (non-leaves: a leaf that requires grad refuses in-place ops)
    out = getattr(F, name)(a, inplace=True)
    tout = getattr(torch.nn.functional, name)(ta, inplace=True)
    assert out is a and tout is ta
    check(a, ta, np.float64, [(x, tx)], grad_rtol=_float32_sixth(name, np.float64))
    module = {"hardtanh": "Hardtanh", "relu6": "ReLU6", "mish": "Mish", "hardswish": "Hardswish",
              "hardsigmoid": "Hardsigmoid", "selu": "SELU", "celu": "CELU"}[name]
    b = tt.tensor([-1.0, 2.0])
    assert getattr(nn, module)(inplace=True)(b) is b
    assert repr(getattr(nn, module)(inplace=True)) == repr(
        getattr(torch.nn, module)(inplace=True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,weight", [
    ((4, 3, 2, 2), [0.1, -0.5, 2.0]),  # one slope per channel (dimension 1)
    ((4, 3), [0.3]),  # one slope
    ((6,), [0.3]),
    ((), 0.3),  # 0-d input and weight
])
def test_prelu_matches_torch_with_its_weight_gradient(shape, weight, dtype):
    x, tx = inputs(dtype, *shape)
    w = tt.tensor(weight, dtype=dtype, requires_grad=True)
    tw = torch.tensor(weight, dtype=getattr(torch, np.dtype(dtype).name), requires_grad=True)
    check(F.prelu(x, w), torch.nn.functional.prelu(tx, tw), dtype, [(x, tx), (w, tw)])


def test_prelu_module_has_a_parameter_per_channel():
    m, tm = nn.PReLU(3, init=0.1), torch.nn.PReLU(3, init=0.1)
    assert repr(m) == repr(tm) == "PReLU(num_parameters=3)"
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert isinstance(m.weight, nn.Parameter) and m.weight.tolist() == pytest.approx([0.1] * 3)
    x, tx = inputs(np.float32, 2, 3, 4)
    check(m(x), tm(tx), np.float32, [(x, tx), (m.weight, tm.weight)])
    assert repr(nn.PReLU()) == "PReLU(num_parameters=1)" and nn.PReLU().weight.shape == (1,)


@pytest.mark.parametrize("call,error", [
    (lambda L: L.nn.functional.prelu(L.ones(2, 3), L.ones(2)), "Mismatch of parameter numbers"),
    (lambda L: L.nn.functional.prelu(L.ones(3), L.ones(3)), "channel size = 1"),
    (lambda L: L.nn.functional.prelu(L.ones(2, 3), L.ones(3, 1)), "scalar or 1D"),
    (lambda L: L.nn.functional.prelu(L.ones(()), L.ones(2)), "zero-dim"),
    (lambda L: L.nn.functional.hardtanh(L.ones(2), 2.0, 1.0), "min_val cannot be greater"),
    (lambda L: L.nn.functional.celu(L.ones(2), 0.0), "alpha cannot be 0"),
])
def test_bad_arguments_fail_as_in_torch(call, error):
    with pytest.raises(Exception, match=error):
        call(torch)
    with pytest.raises(Exception, match=error):
        call(tt)


def test_module_reprs_are_torchs():
    for make in [lambda L: L.nn.Hardtanh(), lambda L: L.nn.Hardtanh(-2, 3), lambda L: L.nn.ReLU6(),
                 lambda L: L.nn.LogSigmoid(), lambda L: L.nn.Mish(), lambda L: L.nn.Hardswish(),
                 lambda L: L.nn.Hardsigmoid(), lambda L: L.nn.SELU(), lambda L: L.nn.CELU(),
                 lambda L: L.nn.CELU(0.5), lambda L: L.nn.Softmin(), lambda L: L.nn.Softmin(1),
                 lambda L: L.nn.Softsign(), lambda L: L.nn.CosineSimilarity(),
                 lambda L: L.nn.PairwiseDistance()]:
        assert repr(make(tt)) == repr(make(torch))
    with pytest.raises(ValueError, match="must be greater than min_val"):
        nn.Hardtanh(1.0, 1.0)


def test_softmin_without_dim_warns_like_softmax():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        y = F.softmin(tt.tensor([[1.0, 2.0]]))
    np.testing.assert_allclose(y.numpy(), torch.softmax(-torch.tensor([[1.0, 2.0]]), 1),
                               rtol=1e-6)


# --------------------------------------------------------------------------- distances


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s1,s2,dim", [
    ((5, 4), (5, 4), 1), ((5, 4), (4,), -1), ((2, 3, 4), (2, 1, 4), 1), ((6,), (6,), 0),
    ((3, 1, 4), (1, 5, 4), 2),
])
def test_cosine_similarity_matches_torch(s1, s2, dim, dtype):
    x1, t1 = inputs(dtype, *s1, seed=2)
    x2, t2 = inputs(dtype, *s2, seed=3)
    check(F.cosine_similarity(x1, x2, dim=dim), torch.nn.functional.cosine_similarity(
        t1, t2, dim=dim), dtype, [(x1, t1), (x2, t2)])
    check(nn.CosineSimilarity(dim)(x1, x2), torch.nn.CosineSimilarity(dim)(t1, t2), dtype, [])


@pytest.mark.parametrize("dtype", DTYPES)
def test_cosine_similarity_at_zero_and_tiny_vectors_is_torchs(dtype):
    """A norm below eps is clamped without gradient (PyTorch 2.x): the similarity with a zero
    vector is 0, and its gradient x2/|x2| / eps; a tiny vector's gradient keeps the norm's."""
    rows1 = [[0.0, 0.0, 0.0], [1e-9, 0.0, 0.0], [0.0, 0.0, 0.0], [3.0, -4.0, 0.0]]
    rows2 = [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1e-10, 0.0, 2e-10]]
    x1, t1 = (tt.tensor(rows1, dtype=dtype, requires_grad=True),
              torch.tensor(np.array(rows1, dtype), requires_grad=True))
    x2, t2 = (tt.tensor(rows2, dtype=dtype, requires_grad=True),
              torch.tensor(np.array(rows2, dtype), requires_grad=True))
    ours, theirs = F.cosine_similarity(x1, x2), torch.nn.functional.cosine_similarity(t1, t2)
    assert ours[0].item() == 0.0 and ours[2].item() == 0.0
    check(ours, theirs, dtype, [(x1, t1), (x2, t2)])
    zero = tt.zeros(1, 3, dtype=dtype, requires_grad=True)
    F.cosine_similarity(zero, tt.tensor([[0.0, 3.0, 4.0]], dtype=dtype)).sum().backward()
    np.testing.assert_allclose(zero.grad.numpy(), [[0, 0.6e8, 0.8e8]], rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s1,s2,p,keepdim", [
    ((5, 4), (5, 4), 2.0, False), ((5, 4), (4,), 1.0, True), ((2, 3, 4), (3, 4), 3.0, False),
    ((6,), (6,), 2.0, False), ((5, 4), (5, 4), math.inf, False), ((5, 4), (5, 4), 0.5, True),
])
def test_pairwise_distance_matches_torch(s1, s2, p, keepdim, dtype):
    x1, t1 = inputs(dtype, *s1, seed=4)
    x2, t2 = inputs(dtype, *s2, seed=5)
    check(F.pairwise_distance(x1, x2, p, keepdim=keepdim), torch.nn.functional.pairwise_distance(
        t1, t2, p, keepdim=keepdim), dtype, [(x1, t1), (x2, t2)])
    check(nn.PairwiseDistance(p, keepdim=keepdim)(x1, x2), torch.nn.PairwiseDistance(
        p, keepdim=keepdim)(t1, t2), dtype, [])


def test_pairwise_distance_of_equal_vectors_is_eps_based():
    a = tt.tensor([[1.0, 2.0]], requires_grad=True)
    d = F.pairwise_distance(a, tt.tensor([[1.0, 2.0]]))
    assert d.item() == pytest.approx(1e-6 * math.sqrt(2), rel=1e-4)  # |0 + eps|, not 0
    d.sum().backward()
    assert np.isfinite(a.grad.numpy()).all()


# --------------------------------------------------------------------------- nn.init


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.5, 0.02, 0.46, 0.54),
                                          (0.0, 1.0, 0.0, math.inf), (1.0, 2.0, -1.0, 1.5)])
def test_trunc_normal_has_the_truncated_normals_bounds_mean_and_std(mean, std, a, b):
    tt.manual_seed(0)  # (the bounds below are 4 standard errors wide)
    w = nn.init.trunc_normal_(tt.empty(200, 500, dtype=tt.float64), mean, std, a, b)
    x = w.numpy()
    assert a <= x.min() and x.max() <= b
    ref = torch.distributions.Normal(mean, std)  # the truncated normal's mean and std
    alpha, beta = (torch.tensor(float(v)) for v in (a, b))
    pa, pb = ref.cdf(alpha), ref.cdf(beta)
    phi = lambda v: ref.log_prob(v).exp() * std if math.isfinite(v) else 0.0  # noqa: E731
    z = (pb - pa).item()
    t_mean = mean + std * (phi(alpha) - phi(beta)) / z
    za, zb = ((v - mean) / std for v in (a, b))
    second = ((za * phi(alpha) if math.isfinite(a) else 0) -
              (zb * phi(beta) if math.isfinite(b) else 0)) / z
    t_std = std * math.sqrt(1 + second - ((phi(alpha) - phi(beta)) / z) ** 2)
    assert abs(x.mean() - float(t_mean)) < 4 * float(t_std) / math.sqrt(x.size)
    assert abs(x.std() - float(t_std)) < 0.01 * float(t_std)


def test_trunc_normal_is_reproducible_and_handles_a_far_window():
    tt.manual_seed(3)
    a = nn.init.trunc_normal_(tt.empty(50)).numpy()
    tt.manual_seed(3)
    assert (nn.init.trunc_normal_(tt.empty(50)).numpy() == a).all()
    with pytest.warns(UserWarning, match="more than 2 std"):
        far = nn.init.trunc_normal_(tt.empty(1000, dtype=tt.float64), 0.0, 1.0, 5.0, 6.0)
    x = far.numpy()
    assert 5.0 <= x.min() and x.max() <= 6.0 and 5.15 < x.mean() < 5.25  # E = 5.187
    with pytest.raises(TypeError, match="floating point"):
        nn.init.trunc_normal_(tt.zeros(3, dtype=tt.int64))


@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 3), (4, 2, 3, 3), (16, 1, 5, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_orthogonal_gives_orthonormal_rows_or_columns(shape, dtype):
    w = nn.init.orthogonal_(tt.empty(*shape, dtype=dtype), gain=2.0)
    assert w.shape == shape and w.dtype == dtype
    m = w.numpy().reshape(shape[0], -1).astype(np.float64) / 2.0
    small = min(m.shape)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5 if dtype == np.float32 else 1e-12)
    tt.manual_seed(7)
    a = nn.init.orthogonal_(tt.empty(*shape, dtype=dtype)).numpy()
    tt.manual_seed(7)
    assert (nn.init.orthogonal_(tt.empty(*shape, dtype=dtype)).numpy() == a).all()


def test_orthogonal_refuses_vectors_and_leaves_empty_tensors():
    with pytest.raises(ValueError, match="2 or more dimensions"):
        nn.init.orthogonal_(tt.empty(4))
    assert nn.init.orthogonal_(tt.empty(0, 3)).shape == (0, 3)
    # the sign fix makes Q uniform; without it LAPACK's Q of one column is -sign(x_0) x/|x|,
    # whose first entry is never positive
    tt.manual_seed(0)
    firsts = [nn.init.orthogonal_(tt.empty(4, 1)).numpy()[0, 0] for _ in range(200)]
    assert 60 < sum(f > 0 for f in firsts) < 140


# --------------------------------------------------------------------------- nn.utils


def test_parameters_to_vector_and_back_as_torch():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    vec = nn.utils.parameters_to_vector(model.parameters())
    tvec = torch.nn.utils.parameters_to_vector(twin.parameters())
    assert vec.shape == tuple(tvec.shape) == (26,)
    np.testing.assert_array_equal(vec.detach().numpy()[:12], model[0].weight.numpy().ravel())
    (vec * tt.arange(26.0)).sum().backward()  # differentiable: each parameter gets its slice
    assert model[2].bias.grad.tolist() == [24.0, 25.0]
    new = tt.arange(26.0)
    torch.nn.utils.vector_to_parameters(torch.arange(26.0), twin.parameters())
    assert nn.utils.vector_to_parameters(new, model.parameters()) is None
    for p, tp in zip(model.parameters(), twin.parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), tp.detach().numpy())
    new.data[0] = 100.0  # the parameters share the vector's memory, as in PyTorch
    assert model[0].weight[0, 0].item() == 100.0
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        nn.utils.vector_to_parameters([0.0] * 26, model.parameters())
    with pytest.raises(ValueError, match="25 elements, the parameters 26"):
        nn.utils.vector_to_parameters(tt.zeros(25), model.parameters())


# --------------------------------------------------------------------------- Conv2d padding


def _twin_convs(dtype, cin, cout, k, **kw):
    ours = nn.Conv2d(cin, cout, k, dtype=dtype, **kw)
    theirs = torch.nn.Conv2d(cin, cout, k, dtype=getattr(torch, np.dtype(dtype).name), **kw)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    return ours, theirs


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (torch's, on speed)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k,padding,mode", [
    (3, "same", "zeros"), (4, "same", "zeros"), ((2, 5), "same", "zeros"), (3, "valid", "zeros"),
    (3, 1, "reflect"), (3, (1, 2), "replicate"), (3, 2, "circular"), (4, "same", "reflect"),
    ((3, 4), "same", "circular"), ((2, 3), "same", "replicate"), (2, "valid", "reflect"),
])
def test_conv2d_padding_strings_and_modes_match_torch(k, padding, mode, dtype):
    ours, theirs = _twin_convs(dtype, 2, 3, k, padding=padding, padding_mode=mode)
    x, tx = inputs(dtype, 2, 2, 7, 6)
    out, tout = ours(x), theirs(tx)
    if padding == "same":
        assert out.shape[2:] == (7, 6)
    check(out, tout, dtype, [(x, tx), (ours.weight, theirs.weight), (ours.bias, theirs.bias)],
          sums=True)
    assert repr(ours) == repr(theirs) and ours.padding == theirs.padding


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (torch's, on speed)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [(3, 3), (4, 4), (2, 5), (1, 1)])
def test_functional_conv2d_same_and_valid_match_torch(k, dtype):
    w, tw = inputs(dtype, 3, 2, *k, seed=6)
    x, tx = inputs(dtype, 2, 2, 6, 5)
    for padding in ("same", "valid"):
        check(F.conv2d(x, w, padding=padding), torch.nn.functional.conv2d(tx, tw, padding=padding),
              dtype, [(x, tx), (w, tw)], sums=True)
        x.grad = w.grad = tx.grad = tw.grad = None
    unbatched = F.conv2d(x[0], w, padding="same")  # [C, H, W] too
    np.testing.assert_allclose(unbatched.detach().numpy(), torch.nn.functional.conv2d(
        tx[0], tw, padding="same").detach().numpy(), **TOL[dtype])


def test_conv2d_padding_errors_are_torchs():
    w = tt.ones(1, 1, 3, 3)
    with pytest.raises(RuntimeError, match="not supported for strided convolutions"):
        F.conv2d(tt.ones(1, 1, 5, 5), w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string"):
        F.conv2d(tt.ones(1, 1, 5, 5), w, padding="full")
    with pytest.raises(ValueError, match="not supported for strided convolutions"):
        nn.Conv2d(1, 1, 3, stride=(1, 2), padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of .* padding_mode='zero'"):
        nn.Conv2d(1, 1, 3, padding_mode="zero")
    with pytest.raises(ValueError, match="reflect padding"):  # wider than the input: F.pad's
        nn.Conv2d(1, 1, 3, padding=4, padding_mode="reflect")(tt.ones(1, 1, 3, 3))
    conv = nn.Conv2d(1, 1, 3, padding="same", padding_mode="reflect")
    assert conv.state_dict().keys() == {"weight", "bias"}  # nothing new to save


# --------------------------------------------------------------------------- memory_format

LIKE = {
    "zeros_like": lambda L, x, **kw: L.zeros_like(x, **kw),
    "ones_like": lambda L, x, **kw: L.ones_like(x, **kw),
    "empty_like": lambda L, x, **kw: L.empty_like(x, **kw).zero_(),
    "full_like": lambda L, x, **kw: L.full_like(x, 2.5, **kw),
    "rand_like": lambda L, x, **kw: L.rand_like(x, **kw) * 0,
    "randn_like": lambda L, x, **kw: L.randn_like(x, **kw) * 0,
    "clone": lambda L, x, **kw: L.clone(x, **kw),
    "Tensor.clone": lambda L, x, **kw: x.clone(**kw),
    "Tensor.contiguous": lambda L, x, **kw: x.contiguous(**kw),
}


@pytest.mark.parametrize("name", LIKE)
def test_memory_format_row_major_is_accepted_and_channels_last_refused(name):
    x = tt.arange(24.0).reshape(2, 3, 2, 2).permute(0, 2, 3, 1)  # (not row-major)
    tx = torch.arange(24.0).reshape(2, 3, 2, 2).permute(0, 2, 3, 1)
    if name == "Tensor.contiguous":  # (it must copy here, and copies refuse preserve_format)
        for L, t in ((tt, x), (torch, tx)):
            with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
                t.contiguous(memory_format=L.preserve_format)
        row_major = tt.ones(2, 3)  # (no copy: accepted, as in PyTorch)
        assert row_major.contiguous(memory_format=tt.preserve_format) is row_major
    for fmt in ("contiguous_format",) if name == "Tensor.contiguous" else (
            "preserve_format", "contiguous_format"):
        ours = LIKE[name](tt, x, memory_format=getattr(tt, fmt))
        theirs = LIKE[name](torch, tx, memory_format=getattr(torch, fmt))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert ours.shape == tuple(theirs.shape) and ours.dtype == np.float32
    with pytest.raises(RuntimeError, match="channels_last is not supported: tinytrain tensors "
                                           "are row-major"):
        LIKE[name](tt, x, memory_format=tt.channels_last)
    with pytest.raises(TypeError, match="must be tinytrain.memory_format, not int"):
        LIKE[name](tt, x, memory_format=1)


def test_torchs_custom_optimizer_template_runs():
    """The custom optimizer of PyTorch's docs keeps state made with preserve_format."""
    p = tt.tensor([1.0, -2.0], requires_grad=True)
    state = tt.zeros_like(p, memory_format=tt.preserve_format)
    (p * p).sum().backward()
    with tt.no_grad():
        state.mul_(0.9).add_(p.grad)
        p.add_(state, alpha=-0.1)
    assert p.tolist() == pytest.approx([0.8, -1.6])
    assert repr(tt.preserve_format) == "tinytrain.preserve_format"
    assert isinstance(tt.channels_last, tt.memory_format)


# --------------------------------------------------------------------------- collate strings


def _plain(batch):
    """A batch as plain Python: numbers as lists, strings in their container (tuple or list
    as given), other containers as lists (tinytrain gives tuples where torch gives lists)."""
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)) and batch and all(isinstance(s, str) for s in batch):
        return type(batch).__name__, list(batch)
    if isinstance(batch, (tuple, list)):
        return [_plain(v) for v in batch]
    return ("tensor", batch.tolist(), str(batch.dtype).removeprefix("torch."))


SAMPLES = {
    "names beside images": [(np.full(2, i, np.float32), f"img{i}.png") for i in range(5)],
    "single names": [f"file{i}" for i in range(5)],
    "a dict with a name": [{"x": np.full(3, i, np.float32), "name": f"n{i}", "y": i}
                           for i in range(5)],
    "nested": [(i, {"path": f"p{i}", "pair": (float(i), f"q{i}")}) for i in range(5)],
    "a list sample": [[np.int64(i), f"s{i}"] for i in range(5)],
}


@pytest.mark.parametrize("device", ["cpu", "resident"])
@pytest.mark.parametrize("kind", SAMPLES)
def test_string_fields_collate_as_torchs_default_collate(kind, device, monkeypatch):
    samples = SAMPLES[kind]
    if device == "resident":  # the data set stacked once "on the device" (the move faked)
        from tinytrain import backend

        monkeypatch.setattr(backend, "to_device", lambda a, device: a)
        monkeypatch.setattr(backend, "normalize_device", lambda device: device or "cpu")
    loader = tt.utils.data.DataLoader(samples, batch_size=2, shuffle=True, seed=1,
                                      device="cuda" if device == "resident" else None)
    ours = list(loader)
    order = [i for b in tt.utils.data.DataLoader(list(range(5)), batch_size=2, shuffle=True,
                                                 seed=1) for i in b.tolist()]
    theirs = list(torch.utils.data.DataLoader([samples[i] for i in order], batch_size=2))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs, strict=True):
        assert _plain(a) == _plain(b)


def test_a_string_beside_a_number_is_an_error_naming_both():
    with pytest.raises(TypeError, match=r"field 1\['k'\] of sample 1 .* is a int but sample 0"):
        tt.data.collate([(1, {"k": "a"}), (2, {"k": 3})])
    with pytest.raises(ValueError, match="has 1 fields but sample 0 .* has 2 in field 1"):
        tt.data.collate([(1, (2, 3)), (1, (2,))])


def test_trunc_normal_far_in_either_tail_has_the_truncated_normals_mean():
    """Far from the mean, the inverse CDF works in the lower tail (an upper interval is
    mirrored) with the CDF from erfc: [8, 9] drew six distinct values before."""
    for a, b, mean in ((8.0, 9.0, 8.1212), (-9.0, -8.0, -8.1212), (-20.0, -19.0, -19.0526)):
        tt.manual_seed(0)
        t = nn.init.trunc_normal_(tt.empty(20000, dtype=tt.float64), a=a, b=b)
        v = t.numpy()
        assert a <= v.min() and v.max() <= b and len(np.unique(v)) > 19000
        assert abs(v.mean() - mean) < 0.01


def test_hardswish_gradient_at_infinity_is_one_like_torch():
    x = tt.tensor([1e30, float("inf"), 5.0, -float("inf")], requires_grad=True)
    F.hardswish(x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 0.0]


def test_hardtanh_and_relu6_clamp_integer_tensors_like_torch():
    x = [-3, -1, 0, 1, 5, 9]
    assert F.hardtanh(tt.tensor(x)).tolist() == torch.nn.functional.hardtanh(
        torch.tensor(x)).tolist()
    got = F.relu6(tt.tensor(x))
    assert got.dtype == tt.int64 and got.tolist() == [0, 0, 0, 1, 5, 6]
