"""PyTorch API that ported client programs reach for (helper port8d): ``torch.distributions``
(Categorical, Bernoulli, Normal, kl_divergence), ``scatter_reduce``, ``index_put``, and small
names (``Tensor.new``, ``transpose_``, ``fmax``, ``nanmedian``, ``nn.RReLU``, ...), each
against torch: values, dtypes, shapes, gradients and error types."""

from __future__ import annotations

import math

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
