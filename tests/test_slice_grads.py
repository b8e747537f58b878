"""Gradients of slices (``x[t]``, ``split``, ``chunk``, ``unbind``): the engine adds each
piece's gradient into the sliced tensor's sum on the slice alone (``SliceGrad``), so a
backward through ``T`` pieces costs one whole gradient, not ``T``. Checked against PyTorch
on every way the pieces' gradients can meet: alone, with each other, overlapping, with a
whole gradient from another use, through hooks, ``autograd.grad``, ``retain_grad`` and a
second backward."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

import tinytrain as tt


def _both(device, shape=(6, 5, 4), seed=0, dtype="float64"):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return (tt.tensor(x, device=device, requires_grad=True),
            torch.tensor(x, requires_grad=True))


def _weights(n, seed=1):
    return [float(w) for w in np.random.default_rng(seed).uniform(0.5, 2.0, n)]


def _close(a, t):
    np.testing.assert_allclose(a.detach().cpu().numpy(), t.detach().numpy(), rtol=1e-12,
                               atol=1e-15)


# Each case builds a loss from pieces of x the same way in both frameworks.
CASES = {
    "unbind, every piece": lambda x: sum(
        (w * p ** 2).sum() for w, p in zip(_weights(6), x.unbind(0))),
    "unbind along the last dim, some pieces unused": lambda x: sum(
        (w * p.sin()).sum() for w, p in list(zip(_weights(4), x.unbind(-1)))[::2]),
    "split of uneven sizes": lambda x: sum(
        (w * p.exp()).sum() for w, p in zip(_weights(3), x.split([1, 3, 1], dim=1))),
    "chunk and a whole use of x": lambda x: sum(
        (w * p * p).sum() for w, p in zip(_weights(3), x.chunk(3, 0))) + (x * 3).tanh().sum(),
    "overlapping and strided slices, None and ...": lambda x: (
        (x[0:3] * 2).sum() + (x[1:4] ** 2).sum() + (x[1::2] * 5).sum()
        + (x[None, 1] * x[None, 1]).sum() + x[..., 0].exp().sum()),
    "single elements (0-d pieces)": lambda x: x[1, 2, 3] * 4 + x[1, 2, 3] ** 2 + x[-1, 0, 0],
    "a broadcast gradient (sum) met by pieces": lambda x: (
        x.sum() + (x[0] * 2).sum() + x.sum() + (x[2] ** 3).sum()),
    "pieces of a non-leaf, used twice": lambda x: sum(
        (p * q).sum() for p, q in zip((x * 2).unbind(1), (x * 2).unbind(1)[::-1])),
    "a piece cast to another dtype": lambda x: (
        x[0].float().sum() * 2 + x[1].double().sum() + (x[2] * x[3]).sum()),
}


@pytest.mark.parametrize("case", CASES)
def test_gradients_of_pieces_equal_pytorchs(case, device):
    x, xt = _both(device)
    CASES[case](x).backward()
    CASES[case](xt).backward()
    _close(x.grad, xt.grad)
    assert x.grad.dtype == tt.float64 and x.grad.shape == (6, 5, 4)


def test_float32_pieces_and_a_float64_use_accumulate_like_pytorch(device):
    x, xt = _both(device, dtype="float32")
    for v in (x, xt):
        (sum((p * w).sum() for w, p in zip(_weights(6), v.unbind(0))) + v.double().sum()
         ).backward()
    assert x.grad.dtype == tt.float32
    np.testing.assert_allclose(x.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-6)


def test_hooks_see_the_whole_gradient_and_pieces_their_own(device):
    x, xt = _both(device)
    seen, seen_t = [], []
    x.register_hook(lambda g: seen.append(g.cpu().numpy().copy()))
    xt.register_hook(lambda g: seen_t.append(g.numpy().copy()))
    pieces, pieces_t = x.unbind(0), xt.unbind(0)
    pieces[2].register_hook(lambda g: g * 10)  # a hook that changes one piece's gradient
    pieces_t[2].register_hook(lambda g: g * 10)
    sum((p ** 2).sum() for p in pieces).backward()
    sum((p ** 2).sum() for p in pieces_t).backward()
    assert len(seen) == len(seen_t) == 1 and seen[0].shape == (6, 5, 4)
    np.testing.assert_allclose(seen[0], seen_t[0], rtol=1e-12)
    _close(x.grad, xt.grad)


def test_autograd_grad_retain_grad_and_a_second_backward(device):
    x, xt = _both(device)
    grads = []
    for m, v in ((tt, x), (torch, xt)):
        h = v * 1.5
        h.retain_grad()
        loss = sum((w * p ** 2).sum() for w, p in zip(_weights(5), h.unbind(1)))
        (g,) = m.autograd.grad(loss, [h], retain_graph=True)
        loss.backward(retain_graph=True)
        loss.backward()  # a second pass: .grad accumulates
        grads.append((g, h.grad, v.grad))
    for a, t in zip(*grads):
        _close(a, t)


def test_a_piece_never_writes_into_a_gradient_the_caller_gave(device):
    # y and its row y[0] are both roots: y's node gets the caller's seed and the row's
    # gradient. The sum goes into a copy; the seed stays as it was.
    x, xt = _both(device, shape=(4, 3))
    seed = np.arange(12.0).reshape(4, 3)
    given = tt.tensor(seed, device=device)
    y, yt = x * 1.5, xt * 1.5
    tt.autograd.backward([y, y[0]], [given, tt.ones(3, device=device, dtype=tt.float64)])
    torch.autograd.backward([yt, yt[0]], [torch.tensor(seed), torch.ones(3, dtype=torch.float64)])
    np.testing.assert_array_equal(given.cpu().numpy(), seed)
    _close(x.grad, xt.grad)


def test_a_backward_through_many_pieces_holds_one_whole_gradient_at_a_time():
    # 200 pieces of an 800 KB tensor: each piece's gradient goes into one buffer in place.
    # A zero-filled whole gradient per piece (what the engine did before) peaks at 3x.
    x = tt.tensor(np.random.default_rng(0).standard_normal((200, 500)), requires_grad=True)
    loss = sum((w * p).sum() for w, p in zip(_weights(200), x.unbind(0)))
    whole = x.numel() * 8
    tracemalloc.start()
    try:
        loss.backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * whole, f"backward peaked at {peak / whole:.2f}x the whole gradient"
    np.testing.assert_allclose(x.grad.numpy(), np.repeat(_weights(200), 500).reshape(200, 500))
