"""LayerNorm, BatchNorm, GroupNorm and InstanceNorm run on one fused node (``ops.Normalize``):
forward, the closed-form backward and its double backward, checked against PyTorch on
parameters present or not, several normalised shapes, non-contiguous inputs, broadcast and
random output gradients; BatchNorm's running statistics step by step; and the memory the
node keeps for backward (the input, as PyTorch's, not the five temporaries of the composed
ops)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain.kernels.cpu import memory


def _pair(a, device, grad=True):
    return (tt.tensor(a, device=device, requires_grad=grad),
            torch.tensor(a, requires_grad=grad))


def _close(a, t, rtol=1e-10):
    if t is None:
        assert a is None
        return
    np.testing.assert_allclose(a.detach().cpu().numpy(), t.detach().numpy(), rtol=rtol,
                               atol=rtol)


RNG = np.random.default_rng(7)

# name: (x shape, parameter shape or None, call(F, x, w, b) for either library)
CASES = {
    "layer_norm, last dim": ((4, 6, 10), (10,), lambda f, x, w, b: f.layer_norm(
        x, (10,), w, b)),
    "layer_norm, last two dims": ((3, 5, 4, 6), (4, 6), lambda f, x, w, b: f.layer_norm(
        x, (4, 6), w, b, eps=1e-3)),
    "layer_norm, no parameters": ((7, 9), None, lambda f, x, w, b: f.layer_norm(x, (9,))),
    "layer_norm, one feature": ((5, 1), (1,), lambda f, x, w, b: f.layer_norm(x, (1,), w, b)),
    "layer_norm of a transposed input": ((6, 4, 8), (4,), lambda f, x, w, b: f.layer_norm(
        x.transpose(1, 2), (4,), w, b)),
    "group_norm": ((4, 6, 5, 5), (6,), lambda f, x, w, b: f.group_norm(x, 3, w, b)),
    "instance_norm": ((3, 4, 6, 6), (4,), lambda f, x, w, b: f.instance_norm(
        x, weight=w, bias=b)),
    "batch_norm 2-D input, training": ((16, 5), (5,), lambda f, x, w, b: f.batch_norm(
        x, None, None, w, b, training=True)),
    "batch_norm 4-D, training, no parameters": ((4, 3, 5, 6), None, lambda f, x, w, b:
                                                f.batch_norm(x, None, None, training=True)),
    "batch_norm 4-D, training, of a permuted input": ((4, 5, 6, 3), (3,), lambda f, x, w, b:
                                                      f.batch_norm(x.permute(0, 3, 1, 2),
                                                                   None, None, w, b,
                                                                   training=True)),
}


def _build(lib_f, name, x, w, b):
    return CASES[name][2](lib_f, x, w, b)


@pytest.mark.parametrize("seeded", ["random", "sum"])
@pytest.mark.parametrize("name", CASES)
def test_forward_backward_match_torch(device, name, seeded):
    shape, pshape, _ = CASES[name]
    x, tx = _pair(RNG.standard_normal(shape) * 3 + 1.5, device)
    params = [_pair(RNG.standard_normal(pshape), device) if pshape else (None, None)
              for _ in range(2)]
    (w, tw), (b, tb) = params
    out, tout = _build(F, name, x, w, b), _build(torch.nn.functional, name, tx, tw, tb)
    _close(out, tout)
    if seeded == "sum":  # a broadcast (stride-0) gradient, as loss.sum() gives
        out.sum().backward()
        tout.sum().backward()
    else:
        g = RNG.standard_normal(tuple(tout.shape))
        out.backward(tt.tensor(g, device=device))
        tout.backward(torch.tensor(g))
    _close(x.grad, tx.grad, 1e-9)
    for a, t in params:
        if a is not None:
            _close(a.grad, t.grad, 1e-9)


@pytest.mark.parametrize("name", ["layer_norm, last two dims", "group_norm",
                                  "batch_norm 2-D input, training",
                                  "layer_norm of a transposed input"])
def test_double_backward_matches_torch(device, name):
    shape, pshape, _ = CASES[name]
    xa, wa = RNG.standard_normal(shape), RNG.standard_normal(pshape)
    ga = RNG.standard_normal(tuple(_build(torch.nn.functional, name, torch.tensor(xa),
                                          torch.tensor(wa), None).shape))
    results = []
    for lib, f, wrap in ((tt, F, lambda a: tt.tensor(a, device=device, requires_grad=True)),
                         (torch, torch.nn.functional, lambda a: torch.tensor(
                             a, requires_grad=True))):
        x, w, b = wrap(xa), wrap(wa), wrap(wa[::-1].copy())
        g = lib.tensor(ga) if lib is torch else tt.tensor(ga, device=device)
        loss = (_build(f, name, x, w, b) * g).sum()
        gx, gw = lib.autograd.grad(loss, (x, w), create_graph=True)
        second = lib.autograd.grad((gx * gx).sum() + (gw ** 3).sum(), (x, w, b),
                                   allow_unused=True)
        results.append((gx, gw, *second))
    for a, t in zip(*results):
        _close(a, t, 1e-8)


def test_batch_norm_running_statistics_follow_torch(device):
    bn, tbn = tt.nn.BatchNorm2d(4, momentum=0.3).to(device), torch.nn.BatchNorm2d(4, momentum=0.3)
    tbn.double()
    bn.to(dtype=tt.float64)
    for step in range(3):
        xa = RNG.standard_normal((5, 4, 3, 3)) * (step + 1) + step
        _close(bn(tt.tensor(xa, device=device)), tbn(torch.tensor(xa)))
    _close(bn.running_mean, tbn.running_mean)
    _close(bn.running_var, tbn.running_var)
    bn.eval()
    tbn.eval()
    x, tx = _pair(RNG.standard_normal((2, 4, 3, 3)), device)
    out, tout = bn(x), tbn(tx)
    _close(out, tout)
    g = RNG.standard_normal((2, 4, 3, 3))
    out.backward(tt.tensor(g, device=device))
    tout.backward(torch.tensor(g))
    _close(x.grad, tx.grad)
    _close(bn.weight.grad, tbn.weight.grad)
    _close(bn.bias.grad, tbn.bias.grad)


def test_float32_statistics_keep_their_digits():
    """64 x 32 x 32 positions per channel, far from zero mean (100 +- 0.1): the variance is
    taken around the mean (two passes), never as E[x^2] - E[x]^2, whose cancellation in
    float32 (an ulp of 1e4 against a variance of 0.01) would be off by ~10%."""
    xa = (RNG.standard_normal((64, 3, 32, 32)) * 0.1 + 100).astype(np.float32)
    for f in (lambda x: F.batch_norm(x, None, None, training=True),
              lambda x: F.layer_norm(x, x.shape[1:])):
        out = f(tt.tensor(xa)).numpy()
        ref = f(tt.tensor(xa.astype(np.float64))).numpy()
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-3)
    ref = torch.nn.functional.batch_norm(torch.tensor(xa.astype(np.float64)), None, None,
                                         training=True).numpy()
    np.testing.assert_allclose(F.batch_norm(tt.tensor(xa), None, None, training=True).numpy(),
                               ref, rtol=0, atol=1e-3)


def test_the_node_keeps_only_the_input():
    """After forward, a LayerNorm over ``[256, 1024]`` float64 (2 MiB) holds its output and the
    input it saved, not the centred copy, its squares and the scaled copies the composed ops
    kept (that was ~5 more arrays of x's size)."""
    x = tt.tensor(RNG.standard_normal((256, 1024)), requires_grad=True)
    ln = tt.nn.LayerNorm(1024).to(dtype=tt.float64)
    memory.empty_cache()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = ln(x)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1.25 * out.numpy().nbytes, held
    out.sum().backward()
    assert x.grad is not None
