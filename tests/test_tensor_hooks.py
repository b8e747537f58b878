"""``Tensor.register_hook``, against PyTorch: what a hook sees, what its result replaces."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import tinytrain as tt

V = [0.5, -1.0, 2.0]
C = [1.0, 2.0, 3.0]


def both(device="cpu"):
    """The same leaf in tinytrain (on ``device``) and in PyTorch."""
    return tt.tensor(V, device=device, requires_grad=True), torch.tensor(V, requires_grad=True)


def same(ours, theirs):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-6)


def test_hooks_on_a_non_leaf_and_a_leaf_change_what_follows(device):
    results = []
    for lib, x in zip((tt, torch), both(device)):
        seen = []
        y = x * 2
        def look(g, seen=seen):
            seen.append(g.numpy().copy())         # sees, returns None

        y.register_hook(look)
        y.register_hook(lambda g: g * 10)         # replaces ...
        y.register_hook(look)                     # ... for the next hook
        y.retain_grad()                           # .grad: after the hooks
        x.register_hook(lambda g: g + 1)          # a leaf: before .grad
        c = tt.tensor(C, device=device) if lib is tt else torch.tensor(C)
        (y * c).sum().backward()
        results.append((x.grad, y.grad, seen))
    (xg, yg, seen), (txg, tyg, tseen) = results
    same(xg, txg), same(yg, tyg)
    np.testing.assert_allclose(np.array(seen), np.array(tseen))
    np.testing.assert_allclose(xg.numpy(), [21, 41, 61])  # (10 * 2 * [1, 2, 3]) + 1


def test_a_hook_runs_each_pass_and_on_the_summed_gradient_of_a_tensor_used_twice():
    x, tx = both()
    calls, tcalls = [], []
    for t, log in ((x, calls), (tx, tcalls)):
        y = t.exp()
        y.register_hook(lambda g, log=log: log.append(g.numpy().copy()))
        ((y * y).sum() + y.sum()).backward()      # two paths into y: one call, their sum
        t.grad = None
        z = t * 3
        z.register_hook(lambda g, log=log: log.append(g.numpy().copy()))
        z.sum().backward(retain_graph=True)
        z.sum().backward()                          # a second pass: a second call
    assert len(calls) == len(tcalls) == 3
    for a, b in zip(calls, tcalls):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_autograd_grad_sees_the_hooks_result():
    x, tx = both()
    outs = []
    for lib, t in ((tt, x), (torch, tx)):
        h = t * 2
        h.register_hook(lambda g: g * 7)
        t.register_hook(lambda g: g * 100)
        loss = (h * h).sum()
        outs.append((lib.autograd.grad(loss, h, retain_graph=True)[0],
                     lib.autograd.grad(loss, t)[0]))
    same(outs[0][0], outs[1][0]), same(outs[0][1], outs[1][1])
    assert x.grad is None


def test_hooks_and_in_place_writes_as_pytorch():
    """A hook registered before an in-place write sees the gradient with respect to the
    value before it; one registered after, the new value's."""
    logs = []
    for lib, x in zip((tt, torch), both()):
        log = []
        y = x * 2
        y.register_hook(lambda g, log=log: log.append(("before", g.numpy().copy())))
        y.mul_(3)
        y.register_hook(lambda g, log=log: log.append(("after", g.numpy().copy())))
        (y * (lib.tensor(C) if lib is tt else torch.tensor(C))).sum().backward()
        logs.append((log, x.grad))
    (log, xg), (tlog, txg) = logs
    assert [k for k, _ in log] == [k for k, _ in tlog] == ["after", "before"]
    for (_, a), (_, b) in zip(log, tlog):
        np.testing.assert_allclose(a, b)
    same(xg, txg)


def test_remove_and_the_handle_as_a_context_manager():
    x = tt.tensor(V, requires_grad=True)
    handle = x.register_hook(lambda g: g * 0)
    handle.remove()
    with x.register_hook(lambda g: g * 5):
        (x * 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5, 5, 5])
    (x * 1).sum().backward()  # removed on leaving the block
    np.testing.assert_allclose(x.grad.numpy(), [6, 6, 6])


def test_a_hooks_gradient_is_not_taken_as_grad():
    """A hook that keeps the gradient it saw: the leaf's .grad must not be that array (a
    later accumulation would change what the hook kept)."""
    x = tt.tensor(V, requires_grad=True)
    kept = []
    x.register_hook(lambda g: kept.append(g))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    np.testing.assert_allclose(kept[0].numpy(), [2, 2, 2])
    np.testing.assert_allclose(x.grad.numpy(), [4, 4, 4])


def test_errors_as_pytorch():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tt.ones(3).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        torch.ones(3).register_hook(lambda g: g)
    for bad, kind, message in ((lambda g: tt.ones(4), RuntimeError, "changed the size"),
                               (lambda g: g.double(), RuntimeError, "changed the type"),
                               (lambda g: 5, TypeError, "expected Tensor.*returned 'int'")):
        x = tt.tensor(V, requires_grad=True)
        y = x * 2
        y.register_hook(bad)
        with pytest.raises(kind, match=message):
            y.sum().backward()


def test_copies_do_not_keep_hooks():
    x = tt.tensor(V, requires_grad=True)
    x.register_hook(lambda g: g * 2)   # a lambda: pickling it would fail
    for y in (copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        (y * 1).sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), [1, 1, 1])


def test_a_hook_on_a_parameter_clips_its_gradient_in_training():
    """The common use: clamp a layer's gradient with a hook; the step then matches."""
    torch.manual_seed(0)
    tlayer = torch.nn.Linear(3, 2)
    layer = tt.nn.Linear(3, 2)
    layer.load_state_dict({k: tt.tensor(v.detach().numpy())
                           for k, v in tlayer.state_dict().items()})
    for m in (layer, tlayer):
        m.weight.register_hook(lambda g: g.clamp(-0.1, 0.1))
    x = np.array([[1.0, -2.0, 3.0]], dtype=np.float32)
    layer(tt.tensor(x)).pow(2).sum().backward()
    tlayer(torch.tensor(x)).pow(2).sum().backward()
    same(layer.weight.grad, tlayer.weight.grad)
    assert np.abs(layer.weight.grad.numpy()).max() <= 0.1
    same(layer.bias.grad, tlayer.bias.grad)


def test_a_hook_on_a_0d_tensor_may_return_a_tensor():
    """The gradient of a 0-d result can be a NumPy scalar inside the engine: a hook's Tensor
    result must still be taken (it raised 'changed the type of value')."""
    grads = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, 1.0, 1.0], requires_grad=True)
        s = (x * 2).sum()
        s.register_hook(lambda g: g * 2)
        (s * 3).backward()
        leaf = lib.tensor(2.0, requires_grad=True)
        leaf.register_hook(lambda g: g * 2)
        (leaf * 3).backward()
        grads.append((x.grad, leaf.grad))
    same(grads[0][0], grads[1][0]), same(grads[0][1], grads[1][1])
