"""``autograd.grad``, ``autograd.backward`` and ``Tensor.backward(inputs=...)``, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], dtype=np.float32)


def pair(values, device="cpu", requires_grad=True):
    """The same leaf in tinytrain (on ``device``) and in PyTorch."""
    return (tt.tensor(values, device=device, requires_grad=requires_grad),
            torch.tensor(values, requires_grad=requires_grad))


def close(ours, theirs, rtol=1e-5):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == tuple(b.shape) and str(a.dtype) == str(b.dtype).split(".")[-1]
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=1e-6)


def graph(x, w, lib):
    h = (x @ w).tanh()                       # an intermediate, used twice below
    return h, (h * h).sum() + (h.exp() if lib is tt else torch.exp(h)).mean()


def test_grad_of_leaves_and_intermediates_matches_torch_and_touches_no_grad(device):
    x, tx = pair(X, device)
    w, tw = pair(W, device)
    (h, y), (th, ty) = graph(x, w, tt), graph(tx, tw, torch)
    h.retain_grad(), th.retain_grad()
    ours = tt.autograd.grad(y, [x, w, h], retain_graph=True)
    close(ours, torch.autograd.grad(ty, [tx, tw, th], retain_graph=True))
    assert isinstance(ours, tuple)
    assert x.grad is None and w.grad is None and tx.grad is None and tw.grad is None
    np.testing.assert_allclose(h.grad.numpy(), th.grad.numpy(), rtol=1e-5)  # (retained: set)
    close(tt.autograd.grad(y, h), torch.autograd.grad(ty, th))  # one tensor, not a list
    with pytest.raises(RuntimeError, match="second time"):  # freed, as backward frees it
        tt.autograd.grad(y, x)


def test_grad_with_grad_outputs_and_several_outputs_matches_torch(device):
    x, tx = pair(X, device)
    w, tw = pair(W, device)
    (h, y), (th, ty) = graph(x, w, tt), graph(tx, tw, torch)
    g = np.array([[1.0, -1.0], [0.5, 2.0]], dtype=np.float32)
    close(tt.autograd.grad(h, x, tt.tensor(g, device=device), retain_graph=True),
          torch.autograd.grad(th, tx, torch.tensor(g), retain_graph=True))
    close(tt.autograd.grad([y, h], [w, x], [None, tt.tensor(g, device=device)],
                           retain_graph=True),
          torch.autograd.grad([ty, th], [tw, tx], [None, torch.tensor(g)], retain_graph=True))
    # a float64 grad_output is cast to the output's dtype, as PyTorch's
    close(tt.autograd.grad(y, x, tt.tensor(2.0, dtype=tt.float64, device=device),
                           retain_graph=True),
          torch.autograd.grad(ty, tx, torch.tensor(2.0, dtype=torch.float64),
                              retain_graph=True))
    ours = tt.autograd.grad(y, {"x": x, "w": w}, retain_graph=True)
    assert list(ours) == ["x", "w"]  # (a dict of inputs is PyTorch 2.13's: compared as a list)
    close(list(ours.values()), torch.autograd.grad(ty, [tx, tw], retain_graph=True))
    close(tt.autograd.grad(y, [x, x]), torch.autograd.grad(ty, [tx, tx]))


def test_grad_of_unused_inputs_like_torch():
    x, tx = pair(X)
    z, tz = pair([1.0, 2.0])
    y, ty = (x * 2).sum(), (tx * 2).sum()
    message = ("The differentiated Tensor at index 1 appears to not have been used in the "
               "graph. Set allow_unused=True if this is the desired behavior.")
    with pytest.raises(RuntimeError) as ours:
        tt.autograd.grad(y, [x, z], retain_graph=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.grad(ty, [tx, tz], retain_graph=True)
    assert str(ours.value) == str(theirs.value) == message
    for options in ({"allow_unused": True}, {"materialize_grads": True},
                    {"allow_unused": True, "materialize_grads": True}):
        close(tt.autograd.grad(y, [x, z], retain_graph=True, **options),
              torch.autograd.grad(ty, [tx, tz], retain_graph=True, **options))
    with pytest.raises(ValueError, match="Expected allow_unused to be True or not passed"):
        tt.autograd.grad(y, [x, z], materialize_grads=True, allow_unused=False)
    # reached only through a Function whose backward passes no gradient: unused too
    for lib in (tt, torch):
        class Stop(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return None

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="index 0 appears to not have been used"):
            lib.autograd.grad(Stop.apply(a).sum(), a)


def test_grad_refuses_what_torch_refuses():
    x, tx = pair(X)
    h, th = x * 2, tx * 2
    cases = [
        (lambda m, a, b: m.autograd.grad(b, a, retain_graph=True),
         "grad can be implicitly created only for scalar outputs"),
        (lambda m, a, b: m.autograd.grad(b, a, m.ones(3), retain_graph=True),
         "Mismatch in shape: grad_output[0] has a shape of"),
        (lambda m, a, b: m.autograd.grad(b.sum(), m.tensor(1.0)),
         "One of the differentiated Tensors does not require grad"),
        (lambda m, a, b: m.autograd.grad(m.tensor(1.0), a),
         "element 0 of tensors does not require grad and does not have a grad_fn"),
        (lambda m, a, b: m.autograd.grad(b.sum(), []),
         "`inputs` argument to `grad()` cannot be empty."),
        (lambda m, a, b: m.autograd.grad([b.sum(), b.sum()], a, [None], retain_graph=True),
         "got 2 tensors and 1 gradients"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError) as ours:
            call(tt, x, h)
        with pytest.raises(RuntimeError) as theirs:
            call(torch, tx, th)
        assert message in str(ours.value) and message in str(theirs.value), message


def test_grad_batched_grads_and_only_inputs_warning():
    x = tt.tensor(X, requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(RuntimeError, match="is_grads_batched=True"):  # [2, 1]: not [2]
        tt.autograd.grad(y, x, grad_outputs=tt.ones(2, 1), is_grads_batched=True)
    (rows,) = tt.autograd.grad(y, x, grad_outputs=tt.tensor([1.0, 3.0]), is_grads_batched=True,
                               retain_graph=True)
    assert rows.shape == (2, *X.shape)
    np.testing.assert_allclose(rows.numpy(), [2 * X, 6 * X], rtol=1e-6)
    with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
        (g,) = tt.autograd.grad(y, x, only_inputs=False)
    np.testing.assert_allclose(g.numpy(), 2 * X)


def test_grad_runs_only_the_graph_above_its_inputs_like_torch():
    """Below the inputs nothing runs: no post-accumulate hook, no .grad, and the nodes there
    keep what they saved (a later backward through them works), as in PyTorch."""
    for lib in (tt, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        calls = []
        x.register_post_accumulate_grad_hook(lambda t, calls=calls: calls.append(1))
        a = x.exp()
        b = a * 2
        (g,) = lib.autograd.grad(b.sum(), b)
        assert g.tolist() == [1.0, 1.0, 1.0] and x.grad is None and not calls
        b.sum().backward()  # the exp and mul nodes did not run: they still hold their arrays
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0, 3.0]), rtol=1e-6)
        assert calls == [1]


def test_module_backward_hooks_on_the_path_run_in_grad_like_torch():
    def run(lib):
        lib.manual_seed(0)
        layer = lib.nn.Linear(3, 2)
        with lib.no_grad():
            layer.weight.copy_(lib.tensor(W.T.copy()))
            layer.bias.fill_(0.5)
        seen = []
        layer.register_full_backward_hook(
            lambda m, gin, gout: seen.append((gin[0].numpy().copy(), gout[0].numpy().copy())))
        x = lib.tensor(X, requires_grad=True)
        y = layer(x).sigmoid().sum()
        grads = lib.autograd.grad(y, [x, layer.weight])
        assert layer.weight.grad is None and x.grad is None
        return grads, seen

    (ours, seen), (theirs, theirs_seen) = run(tt), run(torch)
    close(ours, theirs)
    assert len(seen) == len(theirs_seen) == 1
    for a, b in zip(seen[0], theirs_seen[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_backward_with_inputs_accumulates_only_into_them_like_torch(device):
    x, tx = pair(X, device)
    w, tw = pair(W, device)
    (h, y), (th, ty) = graph(x, w, tt), graph(tx, tw, torch)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    y.backward(inputs=[w], retain_graph=True)
    ty.backward(inputs=[tw], retain_graph=True)
    assert x.grad is None and tx.grad is None and calls == [1]
    close([w.grad], [tw.grad])
    y.backward(inputs=h, retain_graph=True)  # an intermediate: its .grad, without a warning
    ty.backward(inputs=th, retain_graph=True)
    close([h.grad, w.grad], [th.grad, tw.grad])
    tt.autograd.backward([y, h], [None, tt.ones(2, 2, device=device)], inputs=[x, w])
    torch.autograd.backward([ty, th], [None, torch.ones(2, 2)], inputs=[tx, tw])
    close([x.grad, w.grad], [tx.grad, tw.grad])


def test_autograd_backward_matches_torch_and_refuses_what_it_refuses():
    x, tx = pair(X)
    (h, y), (th, ty) = graph(x, x.T.clone(), tt), graph(tx, tx.T.clone(), torch)
    tt.autograd.backward(y, retain_graph=True)
    torch.autograd.backward(ty, retain_graph=True)
    tt.autograd.backward((y, h), grad_tensors=[tt.tensor(2.0), tt.ones(2, 2)],
                         retain_graph=True)
    torch.autograd.backward((ty, th), grad_tensors=[torch.tensor(2.0), torch.ones(2, 2)],
                            retain_graph=True)
    close([x.grad], [tx.grad])
    for call, message in [
        (lambda m, a, b: m.autograd.backward([a, b], retain_graph=True),
         "grad can be implicitly created only for scalar outputs"),
        (lambda m, a, b: m.autograd.backward(m.tensor(1.0)),
         "element 0 of tensors does not require grad and does not have a grad_fn"),
        (lambda m, a, b: a.backward(inputs=[], retain_graph=True),
         "`inputs` argument to `backward()` cannot be empty."),
        (lambda m, a, b: a.backward(inputs=[m.tensor(1.0)], retain_graph=True),
         "can't retain_grad on Tensor that has requires_grad=False"),
    ]:
        with pytest.raises(RuntimeError) as ours:
            call(tt, y, h)
        with pytest.raises(RuntimeError) as theirs:
            call(torch, ty, th)
        assert message in str(ours.value) and message in str(theirs.value), message
    z, tz = pair([1.0])
    y.backward(inputs=[z], retain_graph=True)  # unused: nothing happens, as in PyTorch
    ty.backward(inputs=[tz], retain_graph=True)
    assert z.grad is None and tz.grad is None


def test_a_model_parameters_gradients_by_grad_equal_backwards():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = tt.tensor(X)
    loss = model(x).square().mean()
    grads = tt.autograd.grad(loss, list(model.parameters()), retain_graph=True)
    assert all(p.grad is None for p in model.parameters())
    loss.backward()
    for g, p in zip(grads, model.parameters()):
        np.testing.assert_array_equal(g.numpy(), p.grad.numpy())


def test_backward_inputs_makes_an_intermediate_keep_its_gradient():
    """As PyTorch: a non-leaf in ``inputs`` retains its gradient from then on, so a later
    full backward adds into it."""
    results = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        (y * y).sum().backward(inputs=[y], retain_graph=True)
        assert y.retains_grad and x.grad is None
        (y * y).sum().backward()
        results.append((y.grad, x.grad))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())
