"""PyTorch API that ported client programs reach for (helper port8d): ``torch.distributions``
(Categorical, Bernoulli, Normal, kl_divergence), ``scatter_reduce``, ``index_put``, and small
names (``Tensor.new``, ``transpose_``, ``fmax``, ``nanmedian``, ``nn.RReLU``, ...), each
against torch: values, dtypes, shapes, gradients and error types."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

D, TD = tt.distributions, torch.distributions


def pair(a, requires_grad=False, dtype=np.float32):
    a = np.asarray(a, dtype=dtype)
    return (tt.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def close(ours, theirs, rtol=1e-5, atol=1e-6):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    assert ours.shape == tuple(np.shape(theirs))
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((4, 5))
LOGITS[1, 2] = -np.inf  # a category that is impossible: entropy and KL must cope


# ------------------------------------------------------------------ Categorical


@pytest.mark.parametrize("by", ["logits", "probs"])
def test_categorical_log_prob_entropy_and_their_gradients_match_torch(by):
    raw = LOGITS if by == "logits" else np.exp(LOGITS) * 3  # probs unnormalised: normalised
    x, tx = pair(raw, requires_grad=True)
    ours, theirs = D.Categorical(**{by: x}), TD.Categorical(**{by: tx})
    assert ours.batch_shape == tuple(theirs.batch_shape) == (4,)
    assert ours.event_shape == tuple(theirs.event_shape) == ()
    close(ours.probs, theirs.probs)
    close(ours.logits.clamp(min=-100), theirs.logits.clamp(min=-100))
    actions = [[0, 1, 3, 4], [2, 0, 0, 1]]  # (a zero-probability action: -inf, as torch's)
    a, ta = tt.tensor(actions), torch.tensor(actions)
    lp, tlp = ours.log_prob(a), theirs.log_prob(ta)
    close(lp, tlp)
    weights = np.array([[1.0, -2.0, 0.5, 3.0], [0.0, 1.5, -1.0, 2.0]], np.float32)
    finite = np.isfinite(tlp.detach().numpy())
    loss = (lp * tt.tensor(weights * finite)).masked_fill(tt.tensor(~finite), 0).sum() \
        + ours.entropy().sum()
    tloss = (tlp * torch.tensor(weights * finite)).masked_fill(torch.tensor(~finite), 0).sum() \
        + theirs.entropy().sum()
    close(ours.entropy(), theirs.entropy())
    loss.backward()
    tloss.backward()
    close(x.grad, tx.grad, atol=1e-5)


def test_categorical_samples_have_the_distribution_of_probs():
    tt.manual_seed(0)
    probs = tt.tensor([[0.1, 0.6, 0.3, 0.0], [0.25, 0.25, 0.25, 0.25]])
    dist = D.Categorical(probs=probs)
    s = dist.sample((20000,))
    assert s.shape == (20000, 2) and s.dtype == tt.int64
    assert dist.sample().shape == (2,)
    for row in range(2):
        freq = np.bincount(s[:, row].numpy(), minlength=4) / 20000
        np.testing.assert_allclose(freq, probs[row].numpy(), atol=0.02)  # 4+ sigma
    assert not (s[:, 0] == 3).any()  # never a zero-probability category


def test_categorical_reinforce_gradients_match_torch_for_the_same_actions():
    tt.manual_seed(1)
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    net.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    states = RNG.standard_normal((8, 4)).astype(np.float32)
    returns = RNG.standard_normal(8).astype(np.float32)
    dist = D.Categorical(logits=net(tt.tensor(states)))
    actions = dist.sample()
    loss = -(dist.log_prob(actions) * tt.tensor(returns)).sum()
    loss.backward()
    tdist = TD.Categorical(logits=ref(torch.tensor(states)))
    tloss = -(tdist.log_prob(torch.tensor(actions.numpy())) * torch.tensor(returns)).sum()
    tloss.backward()
    close(loss, tloss)
    for p, tp in zip(net.parameters(), ref.parameters()):
        close(p.grad, tp.grad, atol=1e-5)


def test_categorical_refuses_what_torch_refuses():
    for kwargs in ({}, {"probs": tt.ones(3), "logits": tt.ones(3)}):
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
            D.Categorical(**kwargs)
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
            TD.Categorical(**{k: torch.ones(3) for k in kwargs})
    with pytest.raises(ValueError, match="must be at least one-dimensional"):
        D.Categorical(probs=tt.tensor(1.0))
    bad = [0.5, -0.1, 0.6]
    with pytest.raises(ValueError, match=r"Expected parameter probs \(Tensor of shape \(3,\)\) "
                                         r"of distribution Categorical.* Simplex\(\)"):
        D.Categorical(probs=tt.tensor(bad))
    with pytest.raises(ValueError, match="Simplex"):
        TD.Categorical(probs=torch.tensor(bad))
    D.Categorical(probs=tt.tensor(bad), validate_args=False)  # not checked when asked
    c, tc = D.Categorical(logits=tt.zeros(2, 3)), TD.Categorical(logits=torch.zeros(2, 3))
    for value in ([3, 0], [-1, 0]):
        with pytest.raises(ValueError, match=r"within the support \(IntegerInterval"
                                             r"\(lower_bound=0, upper_bound=2\)\)"):
            c.log_prob(tt.tensor(value))
        with pytest.raises(ValueError, match="within the support"):
            tc.log_prob(torch.tensor(value))
    with pytest.raises(ValueError, match="Value is not broadcastable"):
        c.log_prob(tt.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="must be a Tensor"):
        c.log_prob(1)
    with pytest.raises(NotImplementedError):
        c.rsample()
    assert c.mean.isnan().all() and c.mean.shape == (2,)


# ------------------------------------------------------------------ Bernoulli


@pytest.mark.parametrize("by", ["logits", "probs"])
def test_bernoulli_matches_torch(by):
    raw = RNG.standard_normal(6) if by == "logits" else RNG.uniform(0.05, 0.95, 6)
    x, tx = pair(raw, requires_grad=True)
    ours, theirs = D.Bernoulli(**{by: x}), TD.Bernoulli(**{by: tx})
    assert ours.batch_shape == tuple(theirs.batch_shape) == (6,)
    value = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    for got, ref in ((ours.probs, theirs.probs), (ours.logits, theirs.logits),
                     (ours.mean, theirs.mean), (ours.variance, theirs.variance),
                     (ours.stddev, theirs.stddev), (ours.entropy(), theirs.entropy()),
                     (ours.log_prob(tt.tensor(value)), theirs.log_prob(torch.tensor(value)))):
        close(got, ref, atol=1e-5)
    (ours.log_prob(tt.tensor(value)).sum() + ours.entropy().sum()).backward()
    (theirs.log_prob(torch.tensor(value)).sum() + theirs.entropy().sum()).backward()
    close(x.grad, tx.grad, atol=1e-5)
    close(D.kl_divergence(ours, D.Bernoulli(probs=0.3)),
          TD.kl_divergence(theirs, TD.Bernoulli(probs=0.3)), atol=1e-5)


def test_bernoulli_samples_and_refusals():
    tt.manual_seed(0)
    dist = D.Bernoulli(probs=tt.tensor([0.2, 0.9]))
    s = dist.sample((20000,))
    assert s.shape == (20000, 2) and s.dtype == tt.float32
    np.testing.assert_allclose(s.mean(0).numpy(), [0.2, 0.9], atol=0.02)
    assert D.Bernoulli(probs=0.5).batch_shape == () and D.Bernoulli(0.5).sample().shape == ()
    with pytest.raises(ValueError, match=r"to satisfy the constraint Interval\(lower_bound=0.0, "
                                         r"upper_bound=1.0\)"):
        D.Bernoulli(probs=tt.tensor([1.5]))
    with pytest.raises(ValueError, match="Interval"):
        TD.Bernoulli(probs=torch.tensor([1.5]))
    with pytest.raises(ValueError, match=r"within the support \(Boolean\(\)\)"):
        dist.log_prob(tt.tensor([0.5, 1.0]))


# ------------------------------------------------------------------ Normal


def test_normal_log_prob_entropy_cdf_and_kl_match_torch_with_gradients():
    loc, tloc = pair(RNG.standard_normal(5), requires_grad=True)
    scale, tscale = pair(RNG.uniform(0.5, 2.0, 5), requires_grad=True)
    ours, theirs = D.Normal(loc, scale), TD.Normal(tloc, tscale)
    assert ours.batch_shape == tuple(theirs.batch_shape) == (5,)
    value = RNG.standard_normal((3, 5)).astype(np.float32)
    q, tq = D.Normal(0.5, 1.5), TD.Normal(0.5, 1.5)
    outs = [ours.log_prob(tt.tensor(value)), ours.entropy(), ours.cdf(tt.tensor(value)),
            D.kl_divergence(ours, q), D.kl_divergence(q, ours), ours.icdf(tt.tensor(0.3))]
    refs = [theirs.log_prob(torch.tensor(value)), theirs.entropy(),
            theirs.cdf(torch.tensor(value)), TD.kl_divergence(theirs, tq),
            TD.kl_divergence(tq, theirs), theirs.icdf(torch.tensor(0.3))]
    for got, ref in zip(outs, refs):
        close(got, ref, atol=1e-5)
    sum(o.sum() for o in outs).backward()
    sum(r.sum() for r in refs).backward()
    close(loc.grad, tloc.grad, atol=1e-4)
    close(scale.grad, tscale.grad, atol=1e-4)
    for got, ref in ((ours.mean, theirs.mean), (ours.stddev, theirs.stddev),
                     (ours.variance, theirs.variance)):
        close(got, ref)


def test_normal_rsample_is_reparameterised_and_distributed_as_normal():
    tt.manual_seed(0)
    loc = tt.tensor([1.0, -2.0], requires_grad=True)
    scale = tt.tensor([0.5, 3.0], requires_grad=True)
    dist = D.Normal(loc, scale)
    x = dist.rsample((40000,))
    assert x.shape == (40000, 2) and dist.has_rsample
    np.testing.assert_allclose(x.mean(0).detach().numpy(), [1.0, -2.0], atol=0.06)
    np.testing.assert_allclose(x.std(0).detach().numpy(), [0.5, 3.0], rtol=0.03)
    x.sum().backward()  # d(loc + eps * scale): 1 per sample for loc, eps for scale
    np.testing.assert_allclose(loc.grad.numpy(), [40000, 40000])
    eps = (x - loc) / scale
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).detach().numpy(), rtol=1e-4)
    s = dist.sample((3,))
    assert s.shape == (3, 2) and not s.requires_grad


def test_normal_refusals_and_shapes_as_torch():
    with pytest.raises(ValueError, match=r"parameter scale .* GreaterThan\(lower_bound=0.0\)"):
        D.Normal(0.0, tt.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="GreaterThan"):
        TD.Normal(0.0, torch.tensor([1.0, 0.0]))
    assert D.Normal(0.0, 1.0).batch_shape == tuple(TD.Normal(0.0, 1.0).batch_shape) == ()
    assert D.Normal(tt.zeros(3, 1), tt.ones(2)).batch_shape == (3, 2)
    with pytest.raises(ValueError, match="Value is not broadcastable"):
        D.Normal(tt.zeros(3), 1.0).log_prob(tt.zeros(4))
    with pytest.raises(AttributeError, match="'Uniform': tinytrain.distributions has "
                                             "Categorical, Bernoulli and Normal"):
        D.Uniform(0.0, 1.0)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5))
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)  # unchecked, as torch's with validation off
    finally:
        D.Distribution.set_default_validate_args(True)


def test_categorical_kl_matches_torch_with_gradients_and_an_impossible_category():
    p, tp = pair(RNG.standard_normal((3, 4)), requires_grad=True)
    raw = RNG.standard_normal((3, 4))
    raw[0, 1] = -np.inf  # q cannot give category 1 where p can: KL = inf
    q, tq = pair(raw, requires_grad=True)
    kl = D.kl_divergence(D.Categorical(logits=p), D.Categorical(logits=q))
    tkl = TD.kl_divergence(TD.Categorical(logits=tp), TD.Categorical(logits=tq))
    close(kl, tkl)
    kl[1:].sum().backward()
    tkl[1:].sum().backward()
    close(p.grad, tp.grad)
    close(q.grad, tq.grad)


# ------------------------------------------------------------------ scatter_reduce


SR_INDEX = [[0, 1, 0, 3, 1], [2, 2, 2, 0, 4], [4, 4, 1, 1, 0]]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_reduce_values_and_gradients_match_torch(reduce, include_self, dim):
    rng = np.random.default_rng(3)
    base = rng.uniform(0.5, 2.0, (5, 5))
    base[1, 1] = base[0, 4] = 1.25  # ties with src values: amax/amin share their gradient
    src = rng.uniform(0.5, 2.0, (3, 5))
    src[0, 1] = src[1, 0] = src[2, 2] = 1.25
    index = np.array(SR_INDEX) if dim == 1 or dim == -1 else np.array(SR_INDEX) % 3
    x, tx = pair(base, requires_grad=True, dtype=np.float64)
    s, ts = pair(src, requires_grad=True, dtype=np.float64)
    out = x.scatter_reduce(dim, tt.tensor(index), s, reduce, include_self=include_self)
    ref = tx.scatter_reduce(dim, torch.tensor(index), ts, reduce, include_self=include_self)
    close(out, ref, rtol=1e-12, atol=0)
    weight = rng.standard_normal((5, 5))
    (out * tt.tensor(weight)).sum().backward()
    (ref * torch.tensor(weight)).sum().backward()
    close(x.grad, tx.grad, rtol=1e-10, atol=1e-12)
    close(s.grad, ts.grad, rtol=1e-10, atol=1e-12)


def test_scatter_reduce_prod_gradient_with_one_zero_as_torch():
    base = np.array([2.0, 3.0, 0.0, 4.0])
    src = np.array([0.0, 5.0, 6.0, 7.0])  # a zero reaching place 0; place 2 has one in self
    index = [0, 0, 2, 1]
    x, tx = pair(base, requires_grad=True, dtype=np.float64)
    s, ts = pair(src, requires_grad=True, dtype=np.float64)
    out = tt.scatter_reduce(x, 0, tt.tensor(index), s, "prod")
    ref = torch.scatter_reduce(tx, 0, torch.tensor(index), ts, "prod")
    close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    close(x.grad, tx.grad)
    close(s.grad, ts.grad)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_of_integers_and_in_place_as_torch(reduce):
    base = np.array([[3, -7, 2], [5, 1, -4]], np.int64)
    src = np.array([[-3, 4, 9], [2, -5, 6]], np.int64)
    index = np.array([[0, 0, 2], [1, 1, 1]])
    for include_self in (True, False):
        ref = torch.tensor(base).scatter_reduce(1, torch.tensor(index), torch.tensor(src),
                                                reduce, include_self=include_self)
        out = tt.tensor(base)
        assert out.scatter_reduce_(1, tt.tensor(index), tt.tensor(src), reduce,
                                   include_self=include_self) is out
        assert out.dtype == tt.int64 and out.tolist() == ref.tolist()


def test_scatter_reduce_refusals_as_torch():
    x = tt.zeros(3)
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, "
                                           "amax or amin, got max"):
        x.scatter_reduce(0, tt.tensor([0]), tt.ones(1), "max")
    with pytest.raises(TypeError, match="argument 'src' .* must be Tensor, not float"):
        x.scatter_reduce(0, tt.tensor([0]), 1.0, "sum")
    with pytest.raises(RuntimeError, match="dtype"):
        x.scatter_reduce(0, tt.tensor([0]), tt.ones(1, dtype=tt.float64), "sum")
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        x.scatter_reduce(0, tt.tensor([3]), tt.ones(1), "sum")


def test_scatter_multiply_as_torch():
    index = [[0, 0, 1], [1, 2, 2]]
    src = np.array([[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]], np.float32)
    with pytest.warns(UserWarning, match="deprecated"):
        out = tt.ones(2, 3).scatter(1, tt.tensor(index), tt.tensor(src), reduce="multiply")
    with pytest.warns(UserWarning):
        ref = torch.ones(2, 3).scatter(1, torch.tensor(index), torch.tensor(src),
                                       reduce="multiply")
    close(out, ref)
    out = tt.full((2, 3), 3.0).scatter_(1, tt.tensor(index), 2.0, reduce="multiply")
    ref = torch.full((2, 3), 3.0).scatter_(1, torch.tensor(index), 2.0, reduce="multiply")
    close(out, ref)


# ------------------------------------------------------------------ index_put


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_values_and_gradients_as_torch(accumulate):
    base = RNG.standard_normal((4, 3, 2))
    x, tx = pair(base, requires_grad=True, dtype=np.float64)
    v, tv = pair(RNG.standard_normal((3, 2)), requires_grad=True, dtype=np.float64)
    rows, cols = [0, 2, -1], [1, 1, 0]
    for idx, tidx in (((tt.tensor(rows), tt.tensor(cols)),
                       (torch.tensor(rows), torch.tensor(cols))),):
        out = (x * 1).index_put(idx, v, accumulate=accumulate)
        ref = (tx * 1).index_put(tidx, tv, accumulate=accumulate)
        close(out, ref)
        w = RNG.standard_normal((4, 3, 2))
        (out * tt.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        close(x.grad, tx.grad)
        close(v.grad, tv.grad)


def test_index_put_accumulates_repeats_broadcasts_and_takes_masks_as_torch():
    x, tx = tt.zeros(3, 4), torch.zeros(3, 4)
    idx = (tt.tensor([0, 0, 2, 0]), tt.tensor([1, 1, 3, 1]))
    tidx = (torch.tensor([0, 0, 2, 0]), torch.tensor([1, 1, 3, 1]))
    assert x.index_put_(idx, tt.tensor(1.5), accumulate=True) is x
    close(x, tx.index_put_(tidx, torch.tensor(1.5), accumulate=True))
    mask = [True, False, True]
    close(tt.index_put(x, (tt.tensor(mask),), tt.tensor([1.0, 2, 3, 4]), accumulate=True),
          torch.index_put(tx, (torch.tensor(mask),), torch.tensor([1.0, 2, 3, 4]),
                          accumulate=True))
    close(x.index_put((tt.tensor([1]),), tt.tensor(7.0)),
          tx.index_put((torch.tensor([1]),), torch.tensor(7.0)))
    with pytest.raises(RuntimeError, match="Index put requires the source and destination "
                                           "dtypes match, got Float for the destination and "
                                           "Double for the source"):
        x.index_put_(idx, tt.tensor(1.0, dtype=tt.float64))
    with pytest.raises(RuntimeError, match="Index put requires"):
        tx.index_put_(tidx, torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(IndexError, match="out of bounds"):
        x.index_put_((tt.tensor([3]),), tt.tensor(1.0), accumulate=True)
    with pytest.raises(TypeError, match="must be tuple of Tensors"):
        x.index_put_(tt.tensor([0]), tt.tensor(1.0))


# ------------------------------------------------------------------ small names


def test_tensor_new_as_torch():
    x, tx = tt.ones(2, dtype=tt.float64), torch.ones(2, dtype=torch.float64)
    for args in ((), (2, 3), ([1, 2],), ((2, 3),)):
        if args == ((2, 3),):  # tinytrain's sizes are tuples: a tuple is a shape (as Size)
            got, ref = x.new(*args), tx.new(torch.Size([2, 3]))
        else:
            got, ref = x.new(*args), tx.new(*args)
        assert got.shape == tuple(ref.shape) and str(got.dtype) == "float64"
        if args == ([1, 2],):
            assert got.tolist() == ref.tolist()
    with pytest.raises(TypeError):
        tx.new(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="not a DoubleTensor"):
        x.new(tt.tensor([1, 2]))


def test_in_place_view_ops_as_torch():
    a, ta = pair(RNG.standard_normal((2, 1, 3)), requires_grad=True)
    y, ty = a * 2, ta * 2
    v, tv = y._version, ty._version
    for op, args in (("squeeze_", (1,)), ("t_", ()), ("unsqueeze_", (0,)),
                     ("transpose_", (0, 2)), ("swapaxes_", (1, 2))):
        assert getattr(y, op)(*args) is y
        getattr(ty, op)(*args)
        assert y.shape == tuple(ty.shape)
    assert y._version > v and ty._version > tv
    close(y, ty)
    w = RNG.standard_normal(y.shape).astype(np.float32)
    (y * tt.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    close(a.grad, ta.grad)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.transpose_(0, 1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ta.transpose_(0, 1)
    with pytest.raises(RuntimeError, match=r"t_\(\) expects a tensor with <= 2 dimensions, "
                                           r"but self is 3D"):
        tt.ones(2, 2, 2).t_()
    z = tt.zeros(3, 2)
    view = z[1:]
    z.t_()[0, 2] = 5.0  # still the same memory
    assert view.tolist() == [[0.0, 0.0], [5.0, 0.0]]


def test_storage_offset_as_torch():
    a, ta = tt.arange(24.0).reshape(4, 6), torch.arange(24.0).reshape(4, 6)
    for f in (lambda t: t, lambda t: t[1:, 2:], lambda t: t[2], lambda t: t[1:][1:, 3],
              lambda t: t.t()[1], lambda t: t[:, 4:5], lambda t: t.reshape(6, 4)[3]):
        assert f(a).storage_offset() == f(ta).storage_offset()
    assert tt.ones(3).storage_offset() == 0


def test_fmax_fmin_as_torch():
    nan = math.nan
    a, ta = pair([1.0, nan, 3.0, nan, 2.0], requires_grad=True)
    b, tb = pair([2.0, 2.0, nan, nan, 2.0], requires_grad=True)
    for name in ("fmax", "fmin"):
        out, ref = getattr(tt, name)(a, b), getattr(torch, name)(ta, tb)
        np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
        out.sum().backward()
        ref.sum().backward()
        close(a.grad, ta.grad)
        close(b.grad, tb.grad)
    mixed = tt.fmax(tt.tensor([1, 5]), tt.tensor([2.0, 3.0]))
    ref = torch.fmax(torch.tensor([1, 5]), torch.tensor([2.0, 3.0]))
    assert str(mixed.dtype) == "float32" and mixed.tolist() == ref.tolist()
    assert tt.tensor([1, 5]).fmin(tt.tensor([2, 3])).tolist() == [1, 3]


def test_nanmedian_values_indices_and_gradients_as_torch():
    nan = math.nan
    data = [[1.0, nan, 3.0, 2.0], [4.0, 4.0, nan, 1.0], [5.0, 4.0, nan, 4.0]]
    x, tx = pair(data, requires_grad=True)
    close(x.nanmedian(), tx.nanmedian())
    x.nanmedian().backward()
    tx.nanmedian().backward()
    close(x.grad, tx.grad)
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        x.grad = None
        tx.grad = None
        out, ref = tt.nanmedian(x, dim, keepdim), torch.nanmedian(tx, dim, keepdim)
        close(out.values, ref.values)
        assert out.indices.tolist() == ref.indices.tolist()
        out.values.sum().backward()
        ref.values.sum().backward()
        close(x.grad, tx.grad)
    assert tt.tensor([nan, nan]).nanmedian().isnan().item()
    assert tt.tensor([3, 1, 2]).nanmedian().item() == 2


def test_rrelu_eval_exact_and_training_random_slopes():
    x, tx = pair(RNG.standard_normal((4, 5)), requires_grad=True)
    layer, ref = nn.RReLU(0.1, 0.3).eval(), torch.nn.RReLU(0.1, 0.3).eval()
    assert repr(layer) == repr(ref) and repr(nn.RReLU(inplace=True)) == repr(
        torch.nn.RReLU(inplace=True))
    close(layer(x), ref(tx))
    close(F.rrelu(x), torch.nn.functional.rrelu(tx))  # functional: training=False by default
    layer(x).sum().backward()
    ref(tx).sum().backward()
    close(x.grad, tx.grad)
    tt.manual_seed(0)
    big = tt.tensor(-np.ones((200, 100), np.float32), requires_grad=True)
    out = nn.RReLU(0.1, 0.3).train()(big)
    slopes = -out.detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and len(np.unique(slopes)) > 1000
    assert abs(slopes.mean() - 0.2) < 0.005  # 0.2 +- 0.058/sqrt(20000): 17 sigma
    out.sum().backward()
    np.testing.assert_allclose(-big.grad.numpy(), -slopes)  # each slope is its gradient
    assert F.rrelu(tt.tensor([2.0, 0.5]), training=True).tolist() == [2.0, 0.5]
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
        F.rrelu(big, 0.5, 0.1, training=True)
    with pytest.raises(NotImplementedError):
        F.rrelu(tt.tensor([1, 2]))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce_values_and_gradients_match_torch(reduce, include_self):
    base = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    src = np.array([[2.0, 2.0], [7.0, 0.5], [1.5, 3.0]])  # a tie with self at [0, 1]
    x, tx = pair(base, requires_grad=True, dtype=np.float64)
    s, ts = pair(src, requires_grad=True, dtype=np.float64)
    out = tt.index_reduce(x, 0, tt.tensor([0, 0, 2]), s, reduce, include_self=include_self)
    with warnings.catch_warnings():  # (torch's "in beta" warning, once a process)
        warnings.simplefilter("ignore")
        ref = tx.index_reduce(0, torch.tensor([0, 0, 2]), ts, reduce, include_self=include_self)
    close(out, ref)
    (out * tt.tensor(base)).sum().backward()
    (ref * torch.tensor(base)).sum().backward()
    close(x.grad, tx.grad)
    close(s.grad, ts.grad)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or "
                                           "amin but got sum"):
        tt.tensor(base).index_reduce_(0, tt.tensor([0]), tt.ones(1, 2, dtype=tt.float64), "sum")


def test_scatter_reduce_with_an_index_smaller_than_src_gives_src_a_padded_gradient():
    """(A README difference: PyTorch's backward raises for it.)"""
    x, tx = pair([1.0, 1.0, 1.0], requires_grad=True)
    s, ts = pair([2.0, 3.0, 4.0], requires_grad=True)
    out = x.scatter_reduce(0, tt.tensor([0, 0]), s, "sum")
    ref = tx.scatter_reduce(0, torch.tensor([0, 0]), ts, "sum")
    close(out, ref)
    out.sum().backward()
    assert s.grad.tolist() == [1.0, 1.0, 0.0] and x.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="invalid gradient"):
        ref.sum().backward()


def test_the_new_ops_run_on_each_device_with_the_cpu_results(device):
    """One path for NumPy and CuPy: every op above on ``device`` gives the CPU's values and
    gradients (the CPU's are checked against torch above)."""
    rng = np.random.default_rng(5)
    base, src = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    index = np.array(SR_INDEX) % 4

    def run(dev):
        x = tt.tensor(base, device=dev, requires_grad=True)
        s = tt.tensor(src, device=dev, requires_grad=True)
        idx = tt.tensor(index, device=dev)
        outs = [x.scatter_reduce(0, idx, s, r, include_self=i)
                for r in ("sum", "prod", "mean", "amax", "amin") for i in (True, False)]
        outs += [x.index_put((tt.tensor([0, 0, 3], device=dev),), s, accumulate=True),
                 x.index_reduce(0, tt.tensor([1, 1, 2], device=dev), s, "amax"),
                 tt.fmax(x, s.sum(0)), x.nanmedian(1).values, x.nanmedian().reshape(1),
                 F.rrelu(x), x.t().clone().t_(),
                 D.Categorical(logits=x).log_prob(tt.tensor([0, 4, 2, 1], device=dev)),
                 D.Categorical(logits=x).entropy(), D.Normal(x, s.exp().sum(0)).log_prob(x),
                 D.Bernoulli(logits=x).entropy()]
        sum(o.sum() for o in outs).backward()
        return [o.detach().cpu().numpy() for o in outs] + [x.grad.cpu().numpy(),
                                                           s.grad.cpu().numpy()]

    for k, (got, ref) in enumerate(zip(run(device), run("cpu"), strict=True)):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=f"output {k}")
    tt.manual_seed(0)
    drawn = D.Categorical(probs=tt.tensor([0.2, 0.8], device=device)).sample((1000,))
    assert drawn.device == device and 700 < int(drawn.sum()) < 900  # mean 800, sd 13
