"""Lazy layers (LazyConv2d, LazyLinear, LazyBatchNorm1d/2d) against PyTorch's."""

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn


def lenet(fw):
    """d2l 1.0's LeNet, written with lazy layers."""
    n = fw.nn
    return n.Sequential(
        n.LazyConv2d(6, kernel_size=5, padding=2), n.Sigmoid(), n.AvgPool2d(2, stride=2),
        n.LazyConv2d(16, kernel_size=5), n.Sigmoid(), n.AvgPool2d(kernel_size=2, stride=2),
        n.Flatten(), n.LazyLinear(120), n.Sigmoid(), n.LazyLinear(84), n.Sigmoid(),
        n.LazyLinear(10))


def test_lenet_trains_as_torchs_step_by_step():
    x = np.random.default_rng(0).standard_normal((4, 1, 28, 28)).astype(np.float32)
    y = np.array([1, 3, 5, 7])
    ours, theirs = lenet(tt), lenet(torch)
    ours(tt.tensor(x)), theirs(torch.tensor(x))  # dry runs
    assert [type(ours[i]) for i in (0, 3, 7, 9, 11)] == [nn.Conv2d] * 2 + [nn.Linear] * 3
    with torch.no_grad():
        for (name, p), (tname, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == tname and p.shape == tuple(q.shape)
            p.data[...] = q.numpy()
    opt = tt.optim.SGD(ours.parameters(), lr=0.5)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.5)
    for _ in range(3):
        loss = nn.functional.cross_entropy(ours(tt.tensor(x)), tt.tensor(y))
        tloss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad(), topt.zero_grad()
        loss.backward(), tloss.backward()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
        for p, q in zip(ours.parameters(), theirs.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
        opt.step(), topt.step()


@pytest.mark.parametrize("make, x", [
    (lambda n: n.LazyConv2d(6, kernel_size=5, padding=2), np.ones((2, 3, 8, 8))),
    (lambda n: n.LazyConv2d(4, 3, stride=2, bias=False), np.ones((3, 9, 9))),
    (lambda n: n.LazyLinear(10), np.ones((2, 7))),
    (lambda n: n.LazyLinear(2, bias=False), np.ones(5)),
    (lambda n: n.LazyBatchNorm2d(), np.ones((2, 3, 4, 4))),
    (lambda n: n.LazyBatchNorm1d(eps=1e-3, momentum=None, affine=False), np.ones((2, 5))),
    (lambda n: n.LazyBatchNorm2d(affine=False, track_running_stats=False), np.ones((2, 3, 2, 2))),
])
def test_reprs_types_and_state_before_and_after_the_first_call(make, x):
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs) and type(ours).__name__ == type(theirs).__name__
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [repr(v) for v in ours.state_dict().values()] == [
        repr(v) if "Uninitialized" in type(v).__name__ else repr(tt.tensor(v.numpy()))
        for v in theirs.state_dict().values()]
    ours(tt.tensor(x.astype(np.float32))), theirs(torch.tensor(x, dtype=torch.float32))
    assert type(ours).__name__ == type(theirs).__name__ and type(ours) is getattr(
        nn, type(theirs).__name__)
    # PyTorch leaves a BatchNorm without parameters or statistics at num_features=0 (nothing
    # was lazy); tinytrain records the size, which its BatchNorm checks every input against
    assert repr(ours) == repr(theirs).replace("(0,", f"({x.shape[min(1, x.ndim - 1)]},")
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()}


def test_the_first_call_draws_as_the_regular_layer_from_the_seeded_generator():
    tt.manual_seed(3)
    lazy = nn.LazyConv2d(6, 5, padding=2)
    lazy(tt.ones(1, 2, 8, 8))
    tt.manual_seed(3)
    regular = nn.Conv2d(2, 6, 5, padding=2)
    np.testing.assert_array_equal(lazy.weight.numpy(), regular.weight.numpy())
    np.testing.assert_array_equal(lazy.bias.numpy(), regular.bias.numpy())
    tt.manual_seed(4)
    net = nn.Sequential(nn.Flatten(), nn.LazyLinear(3))
    net(tt.ones(2, 2, 2))
    tt.manual_seed(4)
    np.testing.assert_array_equal(net[1].weight.numpy(), nn.Linear(4, 3).weight.numpy())


def test_apply_after_a_dry_run_sees_regular_layers_and_an_early_optimizer_still_works():
    net = lenet(tt)
    opt = tt.optim.SGD(net.parameters(), lr=0.1)  # over the placeholders, as torch allows
    net.to(np.float64)
    net(tt.zeros(1, 1, 28, 28, dtype=tt.float64))
    seen = []
    net.apply(lambda m: seen.append(type(m)) if type(m) in (nn.Linear, nn.Conv2d) else None)
    assert seen == [nn.Conv2d, nn.Conv2d, nn.Linear, nn.Linear, nn.Linear]
    assert net[0].weight.dtype == np.float64 and net[0].weight.shape == (6, 1, 5, 5)
    before = net[-1].bias.numpy().copy()
    net(tt.ones(2, 1, 28, 28, dtype=tt.float64)).sum().backward()
    opt.step()
    np.testing.assert_allclose(net[-1].bias.numpy(), before - 0.1 * 2)  # d(sum)/d(bias) = 2


def test_state_dict_round_trips():
    full = nn.Sequential(nn.LazyConv2d(2, 3), nn.Flatten(), nn.LazyLinear(4))
    full(tt.ones(1, 3, 5, 5))
    lazy = nn.Sequential(nn.LazyConv2d(2, 3), nn.Flatten(), nn.LazyLinear(4))
    lazy.load_state_dict(full.state_dict())  # materialises with the loaded shapes
    assert type(lazy[0]) is nn.LazyConv2d and lazy[0].weight.shape == (2, 3, 3, 3)
    x = tt.randn(2, 3, 5, 5)
    np.testing.assert_array_equal(lazy(x).numpy(), full(x).numpy())  # loaded, not redrawn
    assert type(lazy[0]) is nn.Conv2d and repr(lazy[0]) == repr(full[0])
    empty = nn.Sequential(nn.LazyConv2d(2, 3), nn.Flatten(), nn.LazyLinear(4))
    empty.load_state_dict(nn.Sequential(nn.LazyConv2d(2, 3), nn.Flatten(),
                                        nn.LazyLinear(4)).state_dict())  # lazy into lazy
    assert empty[0].has_uninitialized_params()
    with pytest.raises(RuntimeError, match="weight is uninitialized in the state dict"):
        full.load_state_dict(empty.state_dict())
    tlazy = torch.nn.LazyLinear(4)
    tlazy.load_state_dict({k: torch.tensor(v.numpy()) for k, v in full[2].state_dict().items()})
    assert tuple(tlazy.weight.shape) == full[2].weight.shape  # (what PyTorch does too)


def test_using_placeholders_is_a_clear_error_naming_the_layer():
    lin = nn.LazyLinear(3)
    assert repr(lin.weight) == "<UninitializedParameter>" and lin.in_features == 0
    assert isinstance(lin.weight, nn.UninitializedParameter)
    with pytest.raises(ValueError, match="uninitialized parameter or buffer of LazyLinear"):
        sum(p.numel() for p in lin.parameters())
    with pytest.raises(RuntimeError, match="shape of an uninitialized .* of LazyLinear"):
        _ = lin.weight.shape
    with pytest.raises(ValueError, match="LazyLinear.*net\\(X\\)"):
        lin.forward(tt.ones(2, 2))  # forward skips the call that initialises
    with pytest.raises(ValueError, match="LazyConv2d: expected 3-D or 4-D input"):
        nn.LazyConv2d(4, 3)(tt.ones(3, 3))
    with pytest.raises(ValueError, match="LazyBatchNorm2d: expected 4-D input"):
        nn.LazyBatchNorm2d()(tt.ones(2, 3))
    bn = nn.LazyBatchNorm2d()
    with pytest.raises(RuntimeError, match="LazyBatchNorm2d"):
        bn.running_mean + 1
    assert type(bn) is nn.LazyBatchNorm2d  # a failed first call leaves it lazy
