"""``Tensor.data`` is PyTorch's: a Tensor on the same memory, outside autograd.

Each idiom of ported PyTorch programs runs in both libraries and the results are compared:
weights filled through ``.data``, SGD written as ``p.data.add_(g, alpha=-lr)``, predictions
taken from ``out.data``, in-place writes through ``.data`` that autograd does not see.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt


def host(t) -> np.ndarray:
    """A tinytrain or torch tensor's values as a NumPy array (tinytrain's from any device)."""
    return t.detach().cpu().numpy()


def pair(values, device, requires_grad=False):
    a = np.asarray(values, np.float32)
    return (tt.tensor(a, device=device, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def test_data_is_a_tensor_on_the_same_memory_outside_autograd(device):
    for lib, t in zip((tt, torch), pair([[1.0, 2.0], [3.0, 4.0]], device, True)):
        y = t * 2
        for x in (t, y):
            d = x.data
            assert isinstance(d, lib.Tensor) and d is not x
            assert not d.requires_grad and d.grad_fn is None and d.is_leaf
            assert d.data_ptr() == x.data_ptr() and d.shape == x.shape and d.dtype == x.dtype
            assert d.device == x.device
        assert t.data._version == 0
    p = tt.nn.Parameter(tt.ones(3, device=device))
    assert type(p.data) is tt.Tensor and type(torch.nn.Parameter(torch.ones(3)).data) is \
        torch.Tensor
    assert p.data._data is p._data  # zero-copy: the very array


def test_dcgan_weights_init_through_data(device):
    """The DCGAN tutorial's weights_init: ``m.weight.data.normal_(0.0, 0.02)`` and
    ``m.bias.data.fill_(0)`` fill the layer's own parameters."""
    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            m.weight.data.normal_(0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            m.weight.data.normal_(1.0, 0.02)
            m.bias.data.fill_(0)

    for lib in (tt, torch):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv2d(3, 64, 4, bias=False), lib.nn.BatchNorm2d(64))
        net[1].bias.data.fill_(5.0)
        if lib is tt:
            net = net.to(device)
        net.apply(weights_init)
        w, bn_w, bn_b = host(net[0].weight), host(net[1].weight), host(net[1].bias)
        assert abs(w.std() - 0.02) < 0.002 and abs(w.mean()) < 0.002
        assert abs(bn_w.mean() - 1.0) < 0.01 and (bn_b == 0).all()
        assert net[0].weight.requires_grad and net[0].weight._version > 0


@pytest.mark.parametrize("idiom", ["fill_", "zero_", "uniform_", "copy_"])
def test_filling_through_data_changes_the_parameter_as_torch(device, idiom):
    ours, theirs = pair(np.arange(6.0).reshape(2, 3), device, True)
    source = np.full((2, 3), 7.5, np.float32)
    for t, lib in ((ours, tt), (theirs, torch)):
        d = t.data
        if idiom == "fill_":
            d.fill_(0.25)
        elif idiom == "zero_":
            d.zero_()
        elif idiom == "uniform_":
            d.uniform_(2.0, 3.0)
        else:
            d.copy_(lib.tensor(source, device=device) if lib is tt else lib.tensor(source))
    if idiom == "uniform_":  # random: the range, not the draws
        v = host(ours)
        assert ((v >= 2.0) & (v <= 3.0)).all() and v.std() > 0
    else:
        np.testing.assert_array_equal(host(ours), host(theirs))
    assert ours.requires_grad and ours.is_leaf and ours._version == theirs._version == 0


def test_sgd_written_with_data_add_gives_torch_parameters(device):
    """The hand-written SGD of PyTorch's tutorials, ``p.data.add_(p.grad, alpha=-lr)``:
    three steps of a Linear layer end at torch's parameters."""
    rng = np.random.default_rng(0)
    w0, b0 = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    x, y = rng.normal(size=(8, 4)).astype(np.float32), rng.normal(size=(8, 3)).astype(np.float32)
    results = []
    for lib in (tt, torch):
        dev = {"device": device} if lib is tt else {}
        fc = lib.nn.Linear(4, 3)
        if lib is tt:
            fc = fc.to(device)
        fc.weight.data.copy_(lib.tensor(w0, **dev))
        fc.bias.data.copy_(lib.tensor(b0, **dev))
        for _ in range(3):
            fc.zero_grad()
            loss = ((fc(lib.tensor(x, **dev)) - lib.tensor(y, **dev)) ** 2).mean()
            loss.backward()
            for p in fc.parameters():
                p.data.add_(p.grad, alpha=-0.1)
        results.append([host(p) for p in fc.parameters()] + [loss.data.item()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_d_equals_p_data_then_minus_equals_updates_p(device):
    """``d = p.data; d -= lr * p.grad`` writes p (with a raw array it rebound d only)."""
    ours, theirs = pair([1.0, -2.0, 3.0], device, True)
    for p in (ours, theirs):
        (p * p).sum().backward()
        d = p.data
        d -= 0.1 * p.grad
    np.testing.assert_allclose(host(ours), host(theirs), rtol=1e-6)
    np.testing.assert_allclose(host(ours), [0.8, -1.6, 2.4], rtol=1e-6)


def test_predictions_from_out_data_max_keepdim(device):
    """MNIST examples: ``pred = output.data.max(1, keepdim=True)[1]`` and its comparison."""
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 10)).astype(np.float32)
    target = rng.integers(0, 10, 6)
    out = []
    for lib in (tt, torch):
        dev = {"device": device} if lib is tt else {}
        output = lib.tensor(logits, **dev, requires_grad=True) * 2
        pred = output.data.max(1, keepdim=True)[1]
        assert not pred.requires_grad and pred.shape == (6, 1)
        correct = pred.eq(lib.tensor(target, **dev).view_as(pred)).sum()
        out.append((host(pred), int(correct)))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    assert out[0][0].dtype == np.int64 and out[0][1] == out[1][1]


def test_data_cpu_numpy_and_item(device):
    ours, theirs = pair([[0.5, 1.5]], device, True)
    a, b = (ours * 3).data.cpu().numpy(), (theirs * 3).data.cpu().numpy()
    assert isinstance(a, np.ndarray) and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)
    assert (ours.sum() * 2).data.item() == (theirs.sum() * 2).data.item() == 4.0


def test_in_place_through_data_is_unseen_by_autograd_as_torch(device):
    """``x.data.mul_(2)`` after an op saved x: the backward runs without an error on the new
    values, as PyTorch's does (the version of x itself does not move)."""
    grads = []
    for x in pair([1.0, 2.0, 3.0], device, True):
        y = (x * x).sum()  # saves x
        x.data.mul_(2)
        assert x._version == 0
        y.backward()
        grads.append(host(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    np.testing.assert_allclose(grads[0], [4.0, 8.0, 12.0], rtol=1e-6)  # 2 * the new x
    ours = tt.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = ours.exp()
    y.add_(1)  # through the tensor itself: seen, as in PyTorch
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_assigning_data_replaces_the_memory(device):
    """``t.data = other``: t takes other's memory (any shape), keeps requires_grad and its
    identity; tinytrain also bumps t's version (README, Differences)."""
    ours, theirs = pair([1.0, 2.0], device, True)
    new_ours, new_theirs = pair([[5.0, 6.0, 7.0]], device)
    was = ours._version
    ours.data, theirs.data = new_ours, new_theirs
    for t, new in ((ours, new_ours), (theirs, new_theirs)):
        assert t.data_ptr() == new.data_ptr() and t.shape == (1, 3)
        assert t.requires_grad and t.is_leaf
    np.testing.assert_array_equal(host(ours), host(theirs))
    assert ours._version == was + 1
    ours.data = np.zeros((2,), np.float32) if device == "cpu" else tt.zeros(2, device=device)
    assert ours.shape == (2,) and ours.device == new_ours.device
    (ours * 3).sum().backward()
    np.testing.assert_array_equal(host(ours.grad), [3.0, 3.0])


def test_data_of_a_non_leaf_and_of_data(device):
    ours, theirs = pair([1.0, 2.0], device, True)
    for t in ((ours + 1), (theirs + 1)):
        d = t.data.data
        assert d.is_leaf and not d.requires_grad and d.data_ptr() == t.data_ptr()
        d[0] = 9.0
        assert host(t)[0] == 9.0
