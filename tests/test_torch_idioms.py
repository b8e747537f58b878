"""Everyday PyTorch idioms, each run with tinytrain and with PyTorch on the same inputs.

One table of cases: each is a function ``f(lib, *tensors)`` written once in PyTorch's
words and called with ``lib`` = tinytrain and ``lib`` = torch. The test compares what the
two give back: shapes, dtypes and values of every output (tuples and named tuples
included), and, for a random upstream gradient, the gradients of every float input.
A second table does the same for errors: tinytrain must raise an exception of the type
PyTorch raises. Shapes that vary are drawn by hypothesis.
"""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given, settings
from hypothesis import strategies as st

import tinytrain as tt
import tinytrain.nn.functional as F

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5)).astype(np.float32)
Y = rng.standard_normal((4, 5)).astype(np.float32)
V = rng.standard_normal(5).astype(np.float32)
IMG = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
SEQ = rng.standard_normal((2, 3, 4)).astype(np.float32)
IDX = np.array([[0, 4, 4], [1, 1, 0], [3, 2, 2], [4, 0, 1]])  # gather index, repeats
INTS = np.array([[3, -7, 0, 5], [-2, 8, 1, -1]])
TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.5, 0.5, 0.5, -1.0, 2.0]], np.float32)
LABELS = np.array([0, 4, 2, 2])
MASK = X > 0.3


def nn_of(lib):
    return lib.nn.functional


# ------------------------------------------------------------------ the comparison


def outputs(value):
    """The tensors of a result (one tensor, or a tuple / named tuple / list of them)."""
    if isinstance(value, tuple | list):
        return [t for v in value for t in outputs(v)]
    return [value]


def as_numpy(t, lib):
    if isinstance(t, bool | int | float):
        return np.asarray(t)
    return t.detach().numpy() if lib is torch else t.numpy()


def run(lib, fn, arrays):
    inputs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray)
              else a for a in arrays]
    return inputs, fn(lib, *inputs)


def compare(fn, *arrays, rtol=1e-5, atol=1e-6, grad=True):
    ins, out = run(tt, fn, arrays)
    tins, tout = run(torch, fn, arrays)
    ours, theirs = outputs(out), outputs(tout)
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    if isinstance(tout, tuple) and hasattr(tout, "values"):  # a named tuple (max, sort, topk)
        assert out.values is ours[0] and out.indices is ours[1]
    for o, t in zip(ours, theirs):
        if isinstance(t, torch.Tensor):
            assert isinstance(o, tt.Tensor), type(o)
            assert o.shape == tuple(t.shape), (o.shape, tuple(t.shape))
            assert str(o.dtype) == str(t.dtype).removeprefix("torch."), (o.dtype, t.dtype)
        else:
            assert type(o) is type(t), (type(o), type(t))
        np.testing.assert_allclose(as_numpy(o, tt), as_numpy(t, torch), rtol=rtol, atol=atol)
    if not grad:
        return
    pairs = [(o, t) for o, t in zip(ours, theirs) if isinstance(t, torch.Tensor)
             and t.requires_grad]
    assert [o.requires_grad for o, _ in pairs] == [True] * len(pairs)
    if not pairs:
        return
    g = np.random.default_rng(1)
    total, ttotal = 0, 0
    for o, t in pairs:
        up = g.standard_normal(tuple(t.shape)).astype(np.float32)
        total = total + (o * tt.tensor(up)).sum()
        ttotal = ttotal + (t * torch.tensor(up)).sum()
    total.backward()
    ttotal.backward()
    for a, b in zip(ins, tins):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            ga = np.zeros(a.shape, np.float32) if a.grad is None else a.grad.numpy()
            gb = np.zeros(tuple(b.shape), np.float32) if b.grad is None else b.grad.numpy()
            np.testing.assert_allclose(ga, gb, rtol=rtol, atol=atol)


CASES = {
    # selection
    "where(cond, x, y)": (lambda L, x, y: L.where(x > 0, x, y), X, Y),
    "where(cond, x, 0.)": (lambda L, x: L.where(x > 0, x, 0.0), X),
    "where(cond, 1, x) int/float": (lambda L, x: L.where(x > 0, 1, x), X),
    "where(cond, i, j) ints": (lambda L, i: L.where(i > 0, i, -i), INTS),
    "x.where(cond, y) broadcast": (lambda L, x, v: x.where(x < 0, v), X, V),
    "where(cond) = nonzero": (lambda L, x: L.where(x > 0.5), X),
    "masked_fill": (lambda L, x: x.masked_fill(x > 0.3, -1.0), X),
    "masked_fill broadcast mask": (lambda L, x, v: x.masked_fill(v > 0, 0.0) * 2, X, V),
    "masked_fill 0-d value": (lambda L, x: x.masked_fill(x < 0, L.tensor(2.0)), X),
    "masked_fill_ of an intermediate": (lambda L, x: (x * 2).masked_fill_(x > 0, 1.0), X),
    "masked_fill int": (lambda L, i: i.masked_fill(i < 0, 0), INTS),
    "gather dim 1": (lambda L, x: x.gather(1, L.tensor(IDX[:, :2])), X),
    "gather dim 0, repeats": (lambda L, x: L.gather(x, 0, L.tensor(IDX.T[:2] % 4)), X),
    "index_select": (lambda L, x: x.index_select(1, L.tensor([4, 0, 0])), X),
    "scatter src": (lambda L, x, y: x.scatter(1, L.tensor([[0], [2], [4], [1]]), y), X,
                    Y[:, :1].copy()),
    "scatter value": (lambda L, x: x.scatter(0, L.tensor([[1, 2, 3, 0, 1]]), 5.0), X),
    "scatter_ one-hot (Transforms tutorial)": (
        lambda L: L.zeros(10, dtype=L.float).scatter_(0, L.tensor(3), value=1),),
    "x[range(n), y] (nn tutorial's nll)": (
        lambda L, x: -x[range(4), L.tensor(LABELS)].mean(), X),
    "x[mask]": (lambda L, x: x[x > 0] * 3, X),
    "bool masks & | ^ ~": (lambda L, x: ((x > 0) & (x < 1), (x > 0) | (x < -1),
                                         (x > 0) ^ (x > 1), ~(x > 0)), X),
    "logical_and / logical_or": (lambda L, x: (L.logical_and(x > 0, x < 1),
                                               L.logical_or(x > 1, x < -1)), X),
    "any / all with dim": (lambda L, x: ((x > 0).any(1), (x > -3).all(0), (x > 0).any(),
                                         L.all(x > 0, dim=1, keepdim=True)), X),
    # ordering
    "sort": (lambda L, x: x.sort(), X),
    "sort dim 0 descending": (lambda L, x: L.sort(x, 0, descending=True), X),
    "sort stable ties": (lambda L, t: t.sort(stable=True), TIES),
    "sort descending stable ties": (lambda L, t: t.sort(descending=True, stable=True), TIES),
    "argsort": (lambda L, x: (x.argsort(), x.argsort(0, descending=True)), X),
    "topk": (lambda L, x: x.topk(2), X),
    "topk dim 0 smallest": (lambda L, x: L.topk(x, 3, dim=0, largest=False), X),
    "top-5 accuracy (ImageNet example)": (
        lambda L, x: x.topk(3, 1, True, True)[1].t().eq(
            L.tensor(LABELS).view(1, -1).expand(3, 4))[:2].reshape(-1).float().sum(
            0, keepdim=True).mul_(100.0 / 4), X),
    "max / min with dim": (lambda L, x: (x.max(1), L.min(x, 0, keepdim=True)), X),
    "unique": (lambda L, t: L.unique(t.detach(), return_inverse=True, return_counts=True),
               TIES),
    "unique keeps every NaN (NaN != NaN)": (
        lambda L, t: (L.unique(t.detach()), t.detach().unique(return_inverse=True,
                                                                return_counts=True)),
        np.array([1.0, np.nan, 2.0, np.nan, 1.0], np.float32)),
    "nonzero": (lambda L, x: ((x > 0).nonzero(), L.nonzero(x > 0, as_tuple=True)), X),
    # shapes
    "expand": (lambda L, v: v.expand(3, 5) * 2, V),
    "expand -1 and new dims": (lambda L, s: s[:, :1].expand(2, -1, 6), SEQ[0]),
    "expand_as": (lambda L, x, v: v.expand_as(x) * x, X, V),
    "repeat": (lambda L, x: x.repeat(2, 3), X),
    "repeat adds dims": (lambda L, v: v.repeat(2, 1, 2), V),
    "chunk uneven": (lambda L, x: x.chunk(3, dim=1), X),
    "chunk of 2": (lambda L, x: L.chunk(x, 2), X),
    "split size": (lambda L, x: x.split(2, dim=1), X),
    "split sections": (lambda L, x: L.split(x, [1, 3, 1], dim=1), X),
    "unbind": (lambda L, x: x.unbind(1), X),
    "unflatten": (lambda L, x: x.reshape(4, 5, 1).unflatten(0, (2, 2)), X),
    "cumsum": (lambda L, x: (x.cumsum(1), L.cumsum(x, dim=0)), X),
    "cumsum int": (lambda L, i: i.cumsum(-1), INTS),
    "cat / stack out=": (lambda L, x: (L.cat([x, x], dim=1, out=L.zeros(4, 10)),
                                       L.stack([x, x], out=L.zeros(1))), X.copy() > 0),
    "matmul out= (Tensors tutorial)": (
        lambda L: L.matmul(L.ones(4, 4), L.ones(4, 4).T, out=L.rand_like(L.ones(4, 4))),),
    "mul out=": (lambda L: L.mul(L.ones(2, 2) * 3, L.ones(2, 2), out=L.zeros(2, 2)),),
    "mm / bmm": (lambda L, x, s: (L.mm(x, x.T), L.bmm(s, s.transpose(1, 2))), X, SEQ),
    "tensor @ tensor.T, tensor.matmul": (lambda L, x: (x @ x.T, x.matmul(x.T)), X),
    "einsum-free outer product": (lambda L, v: v.unsqueeze(1) * v.unsqueeze(0), V),
    "dot / outer / clone": (lambda L, v: (L.dot(v, v * 2), L.outer(v, v[:3]), L.clone(v)), V),
    "tril / triu (causal mask)": (
        lambda L, x: (L.tril(x), x.triu(1), x.tril(-1), L.triu(x, diagonal=-2),
                      x[:4, :4].masked_fill(L.tril(L.ones(4, 4)) == 0, float("-inf")).softmax(
                          -1)), X),
    # statistics
    "var / std": (lambda L, x: (x.var(), x.std(), x.var(1), x.std(0, keepdim=True)), X),
    "var unbiased=False": (lambda L, x: (x.var(unbiased=False), x.var(False),
                                         x.std(1, unbiased=False)), X),
    "var correction": (lambda L, x: (x.var(correction=0), x.var(dim=0, correction=2)), X),
    "std over dims": (lambda L, x: L.std(x, dim=(0, 1), keepdim=True), IMG[0]),
    "mean(dim tuple), sum(keepdim)": (lambda L, x: (x.mean((0, 2)), x.sum(1, keepdim=True)),
                                      IMG[0]),
    "sum keepdims= (makemore)": (lambda L, x: x.exp() / x.exp().sum(1, keepdims=True), X),
    "sum(dtype=)": (lambda L, i: i.sum(dtype=L.float32), INTS),
    "logsumexp": (lambda L, x: (x.logsumexp(1), L.logsumexp(x * 50, dim=0, keepdim=True)), X),
    "norm": (lambda L, x: (x.norm(), x.norm(dim=1), x.norm(p=1), L.norm(x, float("inf"), 0),
                           x.norm(3, dim=1, keepdim=True)), X),
    "norm of zeros has gradient 0": (lambda L, z: (z.norm(), z.norm(dim=0)),
                                     np.zeros((3, 2), np.float32)),
    "isclose / allclose": (lambda L, x, y: (L.isclose(x, x + 1e-6), x.isclose(y, atol=0.5),
                                            L.allclose(x, x * (1 + 1e-7)), x.allclose(y)),
                           X, Y),
    # element-wise
    "sin / cos": (lambda L, x: (L.sin(x), x.cos()), X),
    "floor / ceil / round / trunc / sign": (
        lambda L, x: (L.floor(x * 3), (x * 3).ceil(), (x * 3).round(), L.trunc(x * 3),
                      x.sign()), X),
    "round(decimals)": (lambda L, x: x.round(decimals=1), X),
    "neg / reciprocal / rsqrt / log1p / expm1 / log2 / log10": (
        lambda L, x: (x.neg(), x.negative(), x.reciprocal(), (x * x + 1).rsqrt(),
                      (x * 1e-4).log1p(), (x * 1e-4).expm1(), x.abs().log2(),
                      x.abs().log10()), X),
    "isnan / isinf / isfinite": (
        lambda L, x: [f(x / (x > 0) * (x > 1)) for f in (L.isnan, L.isinf, L.isfinite)]
        + [L.tensor([1, 2]).isfinite()], X),
    "in-place unary ops on an intermediate": (
        lambda L, x: [getattr(x * 1, f"{f}_")() for f in
                      ("abs", "neg", "exp", "sigmoid", "tanh", "sin", "cos", "floor", "square")]
        + [(x.abs() + 1).log_(), (x.abs() + 1).sqrt_(), (x * 2).reciprocal_()], X),
    "flip / ravel / narrow / select": (
        lambda L, s: (s.flip(0), L.flip(s, [1, 2]), s.ravel(), s.narrow(2, 1, 2),
                      s.narrow(1, -2, 2), s.select(1, 0), s.select(-1, -1)), SEQ),
    "movedim / swapaxes / broadcast_to / tile": (
        lambda L, s, v: (s.movedim(0, -1), L.movedim(s, (0, 1), (2, 0)), s.swapaxes(0, 2),
                         v[:4].broadcast_to(3, 4), s.tile(2), s.tile(2, 1, 1, 1)), SEQ, V),
    "masked_select": (lambda L, x, v: (x.masked_select(x > 0), L.masked_select(x, v > 0)),
                      X, V),
    "aliases: subtract, multiply, true_divide, greater, less_equal, remainder": (
        lambda L, x, y: (x.subtract(y), x.multiply(y), x.true_divide(y), x.greater(y),
                         x.less_equal(y), x.not_equal(y), x.remainder(0.3)), X, Y),
    "count_nonzero / logical_xor / short / byte": (
        lambda L, i: (i.count_nonzero(), i.count_nonzero(1), L.logical_xor(i > 0, i < 5),
                      i.short(), i.abs().byte(), i.ndimension()), INTS),
    "softmax / log_softmax dtype=": (
        lambda L, i: (nn_of(L).softmax(i, 1, dtype=L.float32), i.log_softmax(0, dtype=L.float64),
                      L.nn.Softmax(dim=1)(i.float())), INTS),
    "mm / dot / outer methods": (lambda L, x, v: (x.mm(x.T), v.dot(v), v.outer(v[:2])), X, V),
    "div rounding modes": (lambda L, x, y: (L.div(x * 4, y, rounding_mode="floor"),
                                            (x * 4).div(y, rounding_mode="trunc")), X, Y),
    "int div rounding modes": (lambda L, i: (i.div(2, rounding_mode="trunc"),
                                             L.div(i, 3, rounding_mode="floor"), i / 2,
                                             L.floor_divide(i, 2)), INTS),
    "square, clamp_min, clamp_max": (lambda L, x: (x.square(), x.clamp_min(0.1),
                                                   x.clamp_max(0.2)), X),
    "pow with a tensor exponent (Learning PyTorch)": (
        lambda L, v: v.unsqueeze(-1).pow(L.tensor([1, 2, 3])), V),
    "new_zeros / new_ones / new_full / new_tensor": (
        lambda L, x: (x.new_zeros(2, 3), x.new_ones((2,)), x.new_full((3,), 7.0),
                      x.new_tensor([1, 2]), L.tensor([1, 2]).new_zeros(2)), X),
    "zeros(shape tuple), full((), v)": (lambda L: (L.zeros((2, 3)), L.full((), 0.3),
                                                   L.rand((2, 3)).shape == (2, 3)),),
    "0 + sum of tensors (nn tutorial's valid_loss)": (
        lambda L, x, y: sum(a * b for a, b in zip(x, y)), X, Y),
    # activations and layers' functional forms
    "leaky_relu / elu": (lambda L, x: (nn_of(L).leaky_relu(x), nn_of(L).leaky_relu(x, 0.2),
                                       nn_of(L).elu(x), nn_of(L).elu(x, alpha=0.5)), X),
    "silu / softplus": (lambda L, x: (nn_of(L).silu(x), nn_of(L).softplus(x),
                                      nn_of(L).softplus(x * 30, beta=2, threshold=10)), X),
    "gelu exact and tanh": (lambda L, x: (nn_of(L).gelu(x * 3),
                                          nn_of(L).gelu(x * 3, approximate="tanh")), X),
    "activations as modules": (
        lambda L, x: [m(x) for m in (L.nn.LeakyReLU(0.1), L.nn.ELU(), L.nn.SiLU(), L.nn.GELU(),
                                     L.nn.Softplus(), L.nn.Unflatten(1, (5, 1)))], X),
    "F.normalize": (lambda L, x: (nn_of(L).normalize(x), nn_of(L).normalize(x, p=1, dim=0)), X),
    "one_hot": (lambda L: (nn_of(L).one_hot(L.tensor(LABELS)),
                           nn_of(L).one_hot(L.tensor([[1], [0]]), num_classes=3).float()),),
    "pad constant": (lambda L, s: nn_of(L).pad(s, (1, 2), value=0.5), SEQ),
    "pad two dims": (lambda L, i: nn_of(L).pad(i, (1, 1, 2, 0)), IMG),
    "pad negative crops": (lambda L, i: nn_of(L).pad(i, (-1, 2, 0, -3)), IMG),
    "pad reflect / replicate / circular": (
        lambda L, i: [nn_of(L).pad(i, (2, 1, 1, 3), mode=m)
                      for m in ("reflect", "replicate", "circular")], IMG),
    "embedding": (lambda L, w: nn_of(L).embedding(L.tensor([[1, 3, 1], [0, 3, 3]]), w), X),
    "embedding padding_idx": (
        lambda L, w: nn_of(L).embedding(L.tensor([[1, 2], [2, 3]]), w, padding_idx=2), X),
    "layer_norm": (lambda L, s, w: nn_of(L).layer_norm(s, (4,), w[0, :4], w[1, :4]), SEQ, X),
    "layer_norm over two dims": (lambda L, s: nn_of(L).layer_norm(s, (3, 4)), SEQ),
    "batch_norm training, running stats": (
        lambda L, i: (nn_of(L).batch_norm(i, rm := L.zeros(3), rv := L.ones(3), training=True,
                                          momentum=0.3), rm, rv), IMG),
    "batch_norm eval": (lambda L, i, v: nn_of(L).batch_norm(
        i, v[:3].detach(), v[2:].detach() ** 2 + 0.5, v[1:4], v[:3]), IMG, V),
    "adaptive_avg_pool2d": (lambda L, i: [nn_of(L).adaptive_avg_pool2d(i, s)
                                          for s in (1, (7, 3), (3, 2), (4, 5), (None, 2))], IMG),
    "AdaptiveAvgPool2d(1) (nn tutorial)": (lambda L, i: L.nn.AdaptiveAvgPool2d(1)(i), IMG),
    "avg_pool2d, flatten": (lambda L, i: nn_of(L).avg_pool2d(i, 2).flatten(1), IMG),
    "dropout2d in eval": (lambda L, i: nn_of(L).dropout2d(i, 0.5, training=False), IMG),
    # losses
    "l1 / smooth_l1 / huber": (
        lambda L, x, y: (nn_of(L).l1_loss(x, y), nn_of(L).smooth_l1_loss(x, y),
                         nn_of(L).smooth_l1_loss(x, y, beta=0.5, reduction="sum"),
                         nn_of(L).smooth_l1_loss(x, y, beta=0.0),
                         nn_of(L).huber_loss(x, y, delta=0.7, reduction="none"),
                         L.nn.L1Loss(reduction="sum")(x, y), L.nn.SmoothL1Loss()(x, y),
                         L.nn.HuberLoss(delta=2.0)(x, y)), X, Y),
    "cross_entropy label_smoothing": (
        lambda L, x: [nn_of(L).cross_entropy(x, L.tensor(LABELS), label_smoothing=0.1,
                                             reduction=r) for r in ("mean", "sum", "none")], X),
    "cross_entropy weight": (
        lambda L, x, v: [nn_of(L).cross_entropy(x, L.tensor(LABELS), weight=v.abs().detach(),
                                                reduction=r)
                         for r in ("mean", "sum", "none")], X, V),
    "cross_entropy ignore_index": (
        lambda L, x: [nn_of(L).cross_entropy(x, L.tensor([0, -100, 2, 2]), reduction=r)
                      for r in ("mean", "sum", "none")]
        + [L.nn.CrossEntropyLoss(ignore_index=2)(x, L.tensor(LABELS))], X),
    "cross_entropy all three": (
        lambda L, x, v: [nn_of(L).cross_entropy(x, L.tensor([1, 3, 1, 4]),
                                                weight=v.abs().detach(),
                                                ignore_index=3, label_smoothing=0.2,
                                                reduction=r) for r in ("mean", "sum")], X, V),
    "cross_entropy probability targets": (
        lambda L, x, y: [nn_of(L).cross_entropy(x, y.softmax(1), reduction=r,
                                                label_smoothing=s)
                         for r, s in (("mean", 0.0), ("sum", 0.3), ("none", 0.0))], X, Y),
    "nll_loss weight / ignore_index": (
        lambda L, x, v: (nn_of(L).nll_loss(x.log_softmax(1), L.tensor(LABELS),
                                           weight=v.abs().detach()),
                         L.nn.NLLLoss(ignore_index=4)(x.log_softmax(1), L.tensor(LABELS))),
        X, V),
    "dropout with p=1 drops everything": (
        lambda L, x: (nn_of(L).dropout(x, 1.0), L.nn.Dropout(1.0)(x)), X),
    "MSELoss(reduction='sum') (Learning PyTorch)": (
        lambda L, x, y: L.nn.MSELoss(reduction="sum")(x, y), X, Y),
}


@pytest.mark.parametrize("name", list(CASES))
def test_idiom_matches_pytorch(name):
    fn, *arrays = CASES[name]
    compare(fn, *arrays, rtol=2e-5, atol=2e-6)


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(CASES))
def test_idiom_on_the_gpu_matches_pytorch(name):
    """The same table with tinytrain's tensors on the GPU (made there by the default
    device, as ``torch.set_default_device("cuda")`` would), against PyTorch on the CPU."""
    if not tt.cuda_is_available():
        pytest.skip("needs CuPy and an NVIDIA GPU")
    fn, *arrays = CASES[name]
    tt.set_default_device("cuda")
    try:
        compare(fn, *arrays, rtol=1e-4, atol=1e-5)
    finally:
        tt.set_default_device("cpu")


def test_device_predicates_match_pytorch():
    for ours, theirs in ((tt.ones(2), torch.ones(2)), (tt.tensor([1]), torch.tensor([1]))):
        assert (ours.is_cpu, ours.is_cuda) == (theirs.is_cpu, theirs.is_cuda) == (True, False)
        assert str(ours.device) == str(theirs.device) == "cpu"


def test_named_tuples_unpack_and_print_like_torch():
    x, t = tt.tensor(X), torch.tensor(X)
    for ours, theirs in ((x.sort(1), t.sort(1)), (x.topk(2), t.topk(2))):
        assert type(ours).__name__ == type(theirs).__name__  # "sort", "topk"
        values, indices = ours
        assert values is ours.values and indices is ours[1]


# ------------------------------------------------------------------ errors


ERRORS = {
    "int tensor requires_grad=True": lambda L: L.tensor([1, 2], requires_grad=True),
    "int requires_grad_()": lambda L: L.tensor([1, 2]).requires_grad_(),
    "expand a non-singleton dim": lambda L: L.ones(3).expand(2, 4),
    "repeat with too few sizes": lambda L: L.ones(2, 3).repeat(2),
    "split sizes not summing": lambda L: L.ones(2, 3).split([1, 1], 1),
    "chunk(0)": lambda L: L.ones(3).chunk(0),
    "topk k too large": lambda L: L.ones(2, 3).topk(5),
    "gather index out of range": lambda L: L.ones(2, 3).gather(1, L.tensor([[5]])),
    "scatter index out of range": lambda L: L.ones(2, 3).scatter(1, L.tensor([[5]]), 1.0),
    "where with a float condition": lambda L: L.where(L.ones(2), L.ones(2), L.zeros(2)),
    "masked_fill with a float mask": lambda L: L.ones(2).masked_fill(L.ones(2), 0.0),
    "var of an int tensor": lambda L: L.tensor([1, 2]).var(),
    "isclose float32 vs float64": lambda L: L.isclose(L.ones(2), L.ones(2, dtype=L.float64)),
    "div rounding_mode 'x'": lambda L: L.div(L.ones(2), 2, rounding_mode="x"),
    "one_hot of a negative class": lambda L: L.nn.functional.one_hot(L.tensor([-1])),
    "one_hot past num_classes": lambda L: L.nn.functional.one_hot(L.tensor([3]), 2),
    "pad of odd length": lambda L: L.nn.functional.pad(L.ones(2, 3), (1,)),
    "layer_norm shape": lambda L: L.nn.functional.layer_norm(L.ones(2, 3), (4,)),
    "BatchNorm1d training on one sample": lambda L: L.nn.BatchNorm1d(3)(L.ones(1, 3)),
    "BatchNorm2d of 2-D input": lambda L: L.nn.BatchNorm2d(3)(L.ones(2, 3)),
    "Embedding index out of range": lambda L: L.nn.Embedding(3, 2)(L.tensor([3])),
    "cross_entropy target out of range": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.tensor([0, 5])),
    "mm of non-matching shapes": lambda L: L.mm(L.ones(2, 3), L.ones(2, 3)),
    "bmm of 2-D": lambda L: L.bmm(L.ones(2, 3), L.ones(3, 2)),
    "linear of non-matching shapes": lambda L: L.nn.functional.linear(L.ones(2, 3),
                                                                      L.ones(3, 4)),
    "conv2d channel mismatch": lambda L: L.nn.functional.conv2d(L.ones(1, 1, 4, 4),
                                                                L.ones(1, 2, 3, 3)),
    "cat of non-matching shapes": lambda L: L.cat([L.ones(2, 3), L.ones(2, 2)]),
    "broadcast failure": lambda L: L.ones(2, 3) + L.ones(2),
    "reshape to a wrong size": lambda L: L.ones(2, 3).reshape(4),
    "item of many": lambda L: L.ones(2, 3).item(),
    "float() of many": lambda L: float(L.ones(2)),
    "sum over a missing dim": lambda L: L.ones(2, 3).sum(3),
    "clamp without bounds": lambda L: L.ones(2).clamp(),
    "exp_ of an int tensor": lambda L: L.tensor([1, 2]).exp_(),
    "narrow past the end": lambda L: L.ones(2, 3).narrow(1, 2, 2),
    "in-place on a leaf that requires grad": lambda L: L.ones(2, requires_grad=True).add_(1),
    "backward of a constant": lambda L: L.ones(2).sum().backward(),
    "missing tensor method": lambda L: L.ones(2).no_such_method(),
    "missing module attribute": lambda L: L.nn.Linear(2, 2).no_such_layer,
    "zeros with a negative size": lambda L: L.zeros(2, -1),
    "randn of a float size": lambda L: L.randn(2.5),
    "tensor of strings": lambda L: L.tensor(["a"]),
    "to an unknown device": lambda L: L.zeros(2).to("tpu"),
    "dropout probability above 1": lambda L: L.nn.Dropout(1.5),
    "Adam with a negative eps": lambda L: L.optim.Adam([L.zeros(1, requires_grad=True)],
                                                       eps=-1e-8),
    "optimizer given a parameter twice": lambda L: L.optim.SGD(
        [{"params": [p := L.ones(1, requires_grad=True)]}, {"params": [p]}], lr=0.1),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_have_pytorch_types(name):
    fn = ERRORS[name]
    with pytest.raises(Exception) as theirs:  # noqa: PT011 (the type is what we learn here)
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(tt)
    assert str(ours.value)  # and a message


def test_softmax_of_integers_is_refused_as_in_pytorch():
    with pytest.raises(RuntimeError):  # torch: NotImplementedError, a RuntimeError
        torch.tensor([1, 2]).softmax(0)
    for f in (lambda x: x.softmax(0), lambda x: tt.nn.functional.log_softmax(x, 0)):
        with pytest.raises(RuntimeError, match="must be floating point, got int64"):
            f(tt.tensor([1, 2]))


def test_requires_grad_on_ints_is_runtime_and_type_error_with_torch_words():
    for make in (lambda: tt.tensor([1, 2], requires_grad=True),
                 lambda: tt.arange(3).requires_grad_(),
                 lambda: tt.zeros(2, dtype=tt.int64, requires_grad=True)):
        with pytest.raises(RuntimeError, match="floating point") as info:
            make()
        assert isinstance(info.value, TypeError) and "int64" in str(info.value)


def test_a_missing_tensor_method_says_what_to_do_and_underscores_stay_plain():
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'mode': "
                                             ".*numpy"):
        tt.ones(2).mode()
    with pytest.raises(AttributeError, match="no attribute 'logdet': .*NumPy"):
        tt.ones(2).logdet  # noqa: B018
    with pytest.raises(AttributeError, match="^'Parameter' object has no attribute 'logdet'"):
        tt.nn.Parameter(tt.ones(1)).logdet  # noqa: B018
    with pytest.raises(AttributeError) as info:  # not PyTorch's either: Python's message
        tt.ones(2).frobnicate  # noqa: B018
    assert str(info.value) == "'Tensor' object has no attribute 'frobnicate'"
    with pytest.raises(AttributeError) as info:
        tt.ones(2).__cuda_array_interface__  # noqa: B018
    assert str(info.value) == "'Tensor' object has no attribute '__cuda_array_interface__'"
    assert not hasattr(tt.ones(2), "_secret") and not hasattr(tt.ones(2), "storage")
    assert not hasattr(tt.Tensor, "mode") and "__getattr__" not in vars(tt.Tensor)  # fast
    assert getattr(tt.nn.Parameter(tt.ones(1)), "no_such", 7) == 7


# ------------------------------------------------------------------ varying shapes


def shapes(min_dims=1, max_dims=3):
    return st.lists(st.integers(1, 4), min_size=min_dims, max_size=max_dims).map(tuple)


@settings(max_examples=40, deadline=None)
@given(shape=shapes(), data=st.data())
def test_reductions_and_ordering_over_any_dim_match_pytorch(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    k = data.draw(st.integers(0, shape[dim]))
    compare(lambda L, x: (x.var(dim, keepdim=keepdim), x.std(dim, unbiased=False),
                          x.cumsum(dim), x.sort(dim, descending=keepdim),
                          x.topk(k, dim, largest=keepdim), x.logsumexp(dim, keepdim),
                          x.norm(dim=dim, keepdim=keepdim)), a, rtol=1e-4, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(shape=shapes(), data=st.data())
def test_expand_repeat_split_and_where_match_pytorch(shape, data):
    a = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    reps = tuple(lead) + tuple(data.draw(st.integers(1, 3)) for _ in shape)
    size = tuple(lead) + tuple(data.draw(st.sampled_from([n, -1])) if n != 1 else
                               data.draw(st.integers(1, 3)) for n in shape)
    dim = data.draw(st.integers(0, len(shape) - 1))
    piece = data.draw(st.integers(1, shape[dim]))
    compare(lambda L, x: (x.expand(*size) * 1, x.repeat(*reps), x.split(piece, dim),
                          x.chunk(piece, dim), L.where(x > 0, x, x * 2)), a,
            rtol=1e-4, atol=1e-5)  # gradients summed over copies, in another order


@settings(max_examples=30, deadline=None)
@given(shape=shapes(2, 3), data=st.data())
def test_gather_and_scatter_match_pytorch(shape, data):
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    dim = data.draw(st.integers(0, len(shape) - 1))
    index_shape = tuple(data.draw(st.integers(1, n)) for n in shape)
    index = np.random.default_rng(4).integers(0, shape[dim], index_shape)
    unique = np.argsort(np.random.default_rng(5).random(shape), axis=dim)  # no repeats
    unique = unique[tuple(slice(0, n) for n in index_shape)]
    src = np.random.default_rng(6).standard_normal(index_shape).astype(np.float32)
    compare(lambda L, x, s: (x.gather(dim, L.tensor(index)),
                             x.scatter(dim, L.tensor(unique), s)), a, src)


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 9), oh=st.integers(1, 5), ow=st.integers(1, 5))
def test_adaptive_avg_pool2d_matches_pytorch_for_any_sizes(h, w, oh, ow):
    a = np.random.default_rng(h * 10 + w).standard_normal((2, 3, h, w)).astype(np.float32)
    compare(lambda L, x: L.nn.functional.adaptive_avg_pool2d(x, (oh, ow)), a)


# ------------------------------------------------------------------ modules


def test_batchnorm2d_trains_with_batch_statistics_and_evaluates_with_running_ones():
    x = rng.standard_normal((6, 3, 4, 5)).astype(np.float32) * 2 + 1
    ours, theirs = tt.nn.BatchNorm2d(3, momentum=0.2), torch.nn.BatchNorm2d(3, momentum=0.2)
    for step in range(3):
        compare(lambda L, a: (ours if L is tt else theirs)(a * (step + 1)), x)  # noqa: B023
    for name, value in theirs.state_dict().items():  # buffers: mean, var, batches tracked
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), value.numpy(), rtol=1e-5)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.eval()
    theirs.eval()
    compare(lambda L, a: (ours if L is tt else theirs)(a[:1]), x)  # one sample: running stats
    cumulative = tt.nn.BatchNorm1d(2, momentum=None)
    tcumulative = torch.nn.BatchNorm1d(2, momentum=None)
    for k in range(3):
        batch = rng.standard_normal((4, 2)).astype(np.float32) + k
        cumulative(tt.tensor(batch))
        tcumulative(torch.tensor(batch))
    np.testing.assert_allclose(cumulative.running_var.numpy(),
                               tcumulative.running_var.numpy(), rtol=1e-5)


def test_layernorm_and_embedding_modules_match_pytorch():
    torch.manual_seed(0)
    ln, tln = tt.nn.LayerNorm(4), torch.nn.LayerNorm(4)
    emb, temb = tt.nn.Embedding(6, 4, padding_idx=0), torch.nn.Embedding(6, 4, padding_idx=0)
    emb.load_state_dict({"weight": temb.weight.detach().numpy()})
    idx = np.array([[0, 3, 5], [3, 3, 0]])
    compare(lambda L, i: (ln if L is tt else tln)((emb if L is tt else temb)(L.tensor(idx))) * i,
            SEQ)
    np.testing.assert_allclose(emb.weight.grad.numpy(), temb.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-6)
    assert np.all(emb.weight.grad.numpy()[0] == 0)  # the padding row gets no gradient
    assert tt.nn.Embedding(5, 2, padding_idx=1).weight.numpy()[1].tolist() == [0.0, 0.0]
    pre = tt.nn.Embedding.from_pretrained(tt.tensor(X))
    assert not pre.weight.requires_grad and pre(tt.tensor([2])).tolist() == [X[2].tolist()]


def test_containers_register_what_they_hold():
    class Net(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = tt.nn.ModuleList([tt.nn.Linear(3, 3) for _ in range(2)])
            self.heads = tt.nn.ModuleDict({"a": tt.nn.Linear(3, 1), "b": tt.nn.Linear(3, 2)})
            self.scales = tt.nn.ParameterList([tt.nn.Parameter(tt.ones(3)) for _ in range(2)])
            self.extra = tt.nn.ParameterDict({"bias": tt.zeros(3)})

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(2)])
            self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 1),
                                              "b": torch.nn.Linear(3, 2)})
            self.scales = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3))
                                                  for _ in range(2)])
            self.extra = torch.nn.ParameterDict({"bias": torch.nn.Parameter(torch.zeros(3))})

    net, tnet = Net(), TNet()
    assert list(net.state_dict()) == list(tnet.state_dict())
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in tnet.named_parameters()]
    net.blocks.append(tt.nn.ReLU())
    net.blocks.insert(0, tt.nn.Identity())
    assert len(net.blocks) == 4 and isinstance(net.blocks[-1], tt.nn.ReLU)
    assert isinstance(net.blocks[1:3], tt.nn.ModuleList) and len(net.blocks[1:3]) == 2
    assert "a" in net.heads and list(net.heads.keys()) == ["a", "b"]
    assert net.get_parameter("heads.b.weight") is net.heads["b"].weight
    assert net.get_submodule("blocks.1") is net.blocks[1]
    with pytest.raises(AttributeError, match="no submodule 'c'"):
        net.get_submodule("heads.c")
    seq = tt.nn.Sequential(tt.nn.Linear(2, 3), tt.nn.ReLU(), tt.nn.Linear(3, 1))
    head = seq[1:]
    assert isinstance(head, tt.nn.Sequential) and list(head.state_dict()) == ["2.weight",
                                                                             "2.bias"]
    assert seq[-1] is head[1]


def test_module_apply_requires_grad_and_dtype_conversions():
    def init_weights(m):  # the DCGAN tutorial's idiom: .data shares the weight's memory
        if isinstance(m, tt.nn.Linear):
            tt.nn.init.normal_(m.weight.data, 0.0, 0.02)
            tt.nn.init.constant_(m.bias.data, 0)

    seen = []
    model = tt.nn.Sequential(tt.nn.Linear(4, 8), tt.nn.Sequential(tt.nn.Linear(8, 2)))
    assert model.apply(lambda m: seen.append(type(m).__name__)) is model
    assert seen == ["Linear", "Linear", "Sequential", "Sequential"]  # children first, as torch
    model.apply(init_weights)
    assert model[0].bias.numpy().tolist() == [0.0] * 8 and model[0].weight.numpy().std() < 0.05
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    model[1].requires_grad_()
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]
    assert model.double()[0].weight.dtype == tt.float64 and model.float()[0].weight.dtype == \
        tt.float32
    assert model.half()[0].weight.dtype == tt.float16
    assert model.type(tt.float32)[0].weight.dtype == tt.float32
    assert len(list(model.parameters(recurse=False))) == 0
    with pytest.raises(AttributeError, match="register_backward_hook.*deprecated.*use "
                                             "register_full_backward_hook"):
        model.register_backward_hook(print)


def test_clip_grad_norm_and_value_match_pytorch():
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5)
    for norm_type, max_norm in ((2.0, 0.5), (1.0, 100.0), (math.inf, 0.1)):
        ps = [tt.tensor(a, requires_grad=True), tt.tensor(b.astype(np.float32),
                                                          requires_grad=True)]
        tps = [torch.tensor(a, requires_grad=True), torch.tensor(b.astype(np.float32),
                                                                 requires_grad=True)]
        for p, tp in zip(ps, tps):
            (p * p * 3).sum().backward()
            (tp * tp * 3).sum().backward()
        total = tt.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
        ttotal = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
        np.testing.assert_allclose(total.item(), ttotal.item(), rtol=1e-5)
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)
    p, tp = tt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (p * 5).sum().backward()
    (tp * 5).sum().backward()
    tt.nn.utils.clip_grad_value_([p], 1.5)
    torch.nn.utils.clip_grad_value_([tp], 1.5)
    assert p.grad.numpy().tolist() == tp.grad.numpy().tolist()


def test_dropout2d_drops_whole_channels():
    tt.manual_seed(0)
    x = tt.ones(8, 16, 3, 3)
    out = tt.nn.Dropout2d(0.5)(x).numpy()
    per_channel = out.reshape(8, 16, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(2) == per_channel.max(2)).all()  # a channel is all 0 or all 2
    assert 0.3 < (per_channel[:, :, 0] == 0).mean() < 0.7
    assert tt.nn.Dropout2d(0.5).eval()(x) is x


def test_randperm_and_default_device():
    tt.manual_seed(3)
    p = tt.randperm(10)
    assert p.dtype == tt.int64 and sorted(p.tolist()) == list(range(10))
    assert tt.get_default_device() == "cpu"
    tt.set_default_device("cpu")
    assert tt.zeros(2).device == "cpu" and tt.tensor([1.0]).device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        tt.set_default_device("mps")


def test_same_results_through_module_functions_and_methods():
    x = tt.tensor(X)
    pairs = [(tt.where(x > 0, x, 0.0), x.where(x > 0, 0.0)), (tt.sin(x), x.sin()),
             (tt.cumsum(x, 1), x.cumsum(1)), (tt.var(x, 0), x.var(0)),
             (tt.gather(x, 1, tt.tensor(IDX)), x.gather(1, tt.tensor(IDX))),
             (tt.masked_fill(x, x > 0, 1.0), x.masked_fill(x > 0, 1.0)),
             (tt.square(x), x * x), (tt.numel(x), 20), (tt.is_tensor(x), True)]
    for a, b in pairs:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert F.silu is tt.nn.functional.silu and not tt.is_tensor(X)
    assert TF.gelu(torch.tensor(0.0)).item() == F.gelu(tt.tensor(0.0)).item() == 0.0


def test_grad_mode_spellings_of_pytorch():
    x = tt.ones(2, requires_grad=True)

    @tt.inference_mode()
    def called(t):
        return t * 2

    assert not called(x).requires_grad
    with tt.inference_mode():
        assert not (x * 2).requires_grad
    with tt.inference_mode(False):
        assert (x * 2).requires_grad
    assert tt.is_grad_enabled()


def test_module_level_settings_of_pytorch():
    tt.use_deterministic_algorithms(True)
    assert tt.are_deterministic_algorithms_enabled()
    tt.use_deterministic_algorithms(False)
    assert tt.get_default_dtype() == tt.float32 and tt.ones(2).shape == tt.Size([2])
    tt.set_default_dtype(tt.float32)
    with pytest.raises(TypeError, match="only floating-point types are supported"):
        tt.set_default_dtype(tt.int64)  # (float64 and float16 are: tests/test_default_dtype.py)
    try:
        tt.set_printoptions(precision=2)
        assert repr(tt.tensor([1.23456])) == "tensor([1.23])"
        tt.set_printoptions(profile="full")
        assert "..." not in repr(tt.zeros(2000))
    finally:
        tt.set_printoptions(profile="default")
    assert "..." in repr(tt.zeros(2000)) and repr(tt.tensor([1.23456])) == "tensor([1.2346])"


def test_multinomial_draws_by_weight():
    tt.manual_seed(0)
    draws = tt.multinomial(tt.tensor([0.1, 0.0, 0.9]), 2000, replacement=True)
    counts = np.bincount(draws.numpy(), minlength=3)
    assert draws.dtype == tt.int64 and counts[1] == 0 and 0.85 < counts[2] / 2000 < 0.95
    rows = tt.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 5.0, 5.0, 0.0]]).multinomial(2)
    assert rows.shape == (2, 2) and sorted(rows[1].tolist()) == [1, 2]  # no repeats
    assert len(set(rows[0].tolist())) == 2 and 2 not in rows[0].tolist()
    with pytest.raises(RuntimeError, match="without replacement"):
        tt.multinomial(tt.tensor([1.0, 0.0]), 2)
    with pytest.raises(TypeError, match="multinomial: generator must be None or a tt.Generator"):
        tt.multinomial(tt.tensor([1.0]), 1, generator=object())


def test_random_split_by_fractions_as_pytorch():
    for fractions in ([0.8, 0.2], [0.34, 0.33, 0.33], [0.5, 0.5]):
        ours = tt.utils.data.random_split(list(range(11)), fractions, seed=0)
        theirs = torch.utils.data.random_split(list(range(11)), fractions)
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(i for s in ours for i in s) == list(range(11))


def test_a_whole_model_saves_and_loads_only_with_weights_only_false_like_torch(tmp_path):
    # As PyTorch 2.6+: torch.save(model) pickles it; torch.load refuses the pickle unless
    # weights_only=False (which runs the file's code). The state_dict way needs neither.
    x = tt.randn(3, 2)
    model = tt.nn.Sequential(tt.nn.Linear(2, 4), tt.nn.ReLU(), tt.nn.Linear(4, 1))
    tt.save(model, tmp_path / "model.pth")
    with pytest.raises(pickle.UnpicklingError, match=r"model.pth: Weights only load failed: "
                                                     r"root is a pickled tinytrain.*Sequential"):
        tt.load(tmp_path / "model.pth")
    whole = tt.load(tmp_path / "model.pth", weights_only=False)
    assert type(whole) is tt.nn.Sequential and whole(x).tolist() == model(x).tolist()
    tt.save(model.state_dict(), tmp_path / "weights.pth")
    fresh = tt.nn.Sequential(tt.nn.Linear(2, 4), tt.nn.ReLU(), tt.nn.Linear(4, 1))
    fresh.load_state_dict(tt.load(tmp_path / "weights.pth", weights_only=True))
    assert fresh(x).tolist() == model(x).tolist()


def _into_out(lib, op, res, want):
    """``op`` of a ``res`` tensor with itself into an out= of dtype ``want``: the values as
    float64, or "refused"."""
    a = lib.tensor([[1, 0], [1, 1]], dtype=getattr(lib, res)) * (
        1.5 if res.startswith("float") else 1)
    out = lib.zeros((4, 2) if op == "cat" else (2, 2), dtype=getattr(lib, want))
    try:
        if op == "cat":
            result = lib.cat([a, a], out=out)
        else:
            result = getattr(lib, op)(a, a, out=out)
    except (RuntimeError, TypeError):  # (torch.cat says TypeError; tinytrain's is both)
        return "refused"
    return np.asarray(result.tolist(), dtype=np.float64)


@pytest.mark.parametrize("op", ["add", "mul", "cat", "matmul"])
def test_out_of_another_dtype_is_refused_or_accepted_as_in_pytorch(op):
    """A float result into an integer out= was silently truncated ([0.5, 3.7] -> [0, 3])."""
    dtypes = ("bool", "uint8", "int32", "int64", "float32", "float64")
    for res, want in itertools.product(dtypes, dtypes):
        if op == "matmul" and res == "bool":
            continue  # PyTorch has no bool matmul on the CPU
        got, ref = _into_out(tt, op, res, want), _into_out(torch, op, res, want)
        assert isinstance(got, str) == isinstance(ref, str), (op, res, want, got, ref)
        if not isinstance(ref, str):
            np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("case", [
    lambda L: L.tensor([1.0, 2.0]).add(L.tensor([200, 3], dtype=L.uint8), alpha=2),
    lambda L: L.sub(L.tensor([1.0, 2.0]), L.tensor([100, 1], dtype=L.int8), alpha=3),
    lambda L: L.tensor([70000, 1], dtype=L.int32).add(L.tensor([200, 3], dtype=L.uint8), alpha=2),
    lambda L: L.tensor([1.0, 2.0]).add_(L.tensor([200, 3], dtype=L.uint8), alpha=2),
    lambda L: L.tensor([1.0]).add(L.tensor([40000.0], dtype=L.float16), alpha=2),
    lambda L: L.tensor([1.0], dtype=L.float64).add(L.tensor([0.1]), alpha=1 / 3),
    lambda L: L.remainder(300, L.tensor(7, dtype=L.int16)),
    lambda L: L.div(7, L.tensor(2, dtype=L.int16), rounding_mode="trunc"),
    lambda L: L.div(300, L.tensor(100, dtype=L.uint8), rounding_mode="floor"),
    lambda L: L.sub(2, L.tensor(7, dtype=L.int16), alpha=2),
    lambda L: L.add(2.5, L.tensor([1, 2], dtype=L.int8), alpha=3),
    lambda L: L.true_divide(300, L.tensor([1, 2], dtype=L.uint8)),
    lambda L: L.true_divide(2**40, L.tensor([1, 2], dtype=L.int32)),
    lambda L: L.multiply(3, other=L.tensor(2, dtype=L.int16)),
    lambda L: L.remainder(L.tensor([7, 9]), other=L.tensor([3, 4])),
    lambda L: L.tensor([7.0, 9.0]).true_divide(other=L.tensor([2.0, 4.0])),
])
def test_alpha_and_a_number_first_compute_in_the_result_dtype_like_torch(case):
    """alpha * other was taken in other's own dtype (200 * 2 wrapped in uint8: 145, not 401),
    and a number before a 0-d integer tensor made an int64 result (PyTorch keeps int16)."""
    got, ref = case(tt), case(torch)
    assert str(got.dtype) == str(ref.dtype).replace("torch.", "")
    np.testing.assert_array_equal(np.asarray(got.tolist()), np.asarray(ref.tolist()))


def _same_as_torch(case):
    """``case(lib)`` with tinytrain and with torch: the same values and dtypes (tuples too)."""
    got, ref = case(tt), case(torch)
    if isinstance(ref, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(ref), (got, ref)
        for g, r in zip(got, ref):
            _same_as_torch(lambda L, g=g, r=r: g if L is tt else r)
        return
    assert str(got.dtype) == str(ref.dtype).replace("torch.", ""), (got, ref)
    assert tuple(got.shape) == tuple(ref.shape), (got, ref)
    np.testing.assert_array_equal(np.asarray(got.tolist()), np.asarray(ref.tolist()))


@pytest.mark.parametrize("case", [
    lambda L: L.tensor([3.0, -7.0]).div_(2, rounding_mode="floor"),
    lambda L: L.tensor([3, -7]).div_(2, rounding_mode="trunc"),
    lambda L: L.tensor([3, -7]).div_(L.tensor([2, 2]), rounding_mode="floor"),
    lambda L: L.cumsum(L.tensor([1, 2], dtype=L.int8), 0, dtype=L.float32),
    lambda L: L.cumsum(L.tensor([100, 100], dtype=L.int8), dim=0, dtype=L.int16),
    lambda L: L.arange(6.0).reshape(2, 3).norm(None),
    lambda L: L.arange(6.0).reshape(2, 3).norm(p=None, dim=1),
    lambda L: L.norm(L.arange(6.0).reshape(2, 3), None, dim=0, keepdim=True),
], ids=["div_floor", "div_trunc_int", "div_tensor_floor", "cumsum_dtype", "cumsum_int16",
        "norm_none", "norm_none_dim", "fn_norm_none"])
def test_keyword_forms_of_pytorch_ops(case):
    _same_as_torch(case)


@pytest.mark.parametrize("case", [
    lambda L: L.zeros(3).scatter(0, L.tensor([0, 0, 2]), L.tensor([1.0, 2.0, 4.0]), reduce="add"),
    lambda L: L.ones(2, 3).scatter(1, L.tensor([[0, 0]]), 1.5, reduce="add"),
    lambda L: L.ones(3).scatter_(0, L.tensor([0, 0]), 2.0, reduce="add"),
    lambda L: L.scatter(L.zeros(3, dtype=L.int64), 0, L.tensor([1, 1]), L.tensor([5, 6]),
                        reduce="add"),
], ids=["tensor_src", "value", "inplace", "function_int"])
@pytest.mark.filterwarnings("ignore:The reduce argument")
def test_scatter_with_reduce_add_like_torch(case):
    _same_as_torch(case)
    with pytest.raises(RuntimeError, match="either add or multiply"):
        tt.zeros(3).scatter(0, tt.tensor([0]), 1.0, reduce="sum")


@pytest.mark.parametrize("case", [
    lambda L: L.tensor(3.0).flip(0),
    lambda L: L.tensor(3.0).flip(-1),
    lambda L: L.tensor(3.0).nonzero(as_tuple=True),
    lambda L: L.tensor(0.0).nonzero(as_tuple=True),
    lambda L: L.tensor(3.0).gather(0, L.tensor(0)),
    lambda L: L.tensor(3.0).gather(-1, L.tensor([0, 0])),
    lambda L: L.tensor(3.0).scatter(0, L.tensor(0), L.tensor(5.0)),
    lambda L: L.tensor(3.0).scatter_(0, L.tensor(0), 7.0),
    lambda L: L.tensor(3.0).scatter_add(0, L.tensor(0), L.tensor(5.0)),
], ids=["flip", "flip_-1", "nonzero_tuple", "nonzero_tuple_zero", "gather", "gather_1d_index",
        "scatter", "scatter_value", "scatter_add"])
def test_zero_dim_tensor_acts_as_one_element_along_dim_0_like_torch(case):
    _same_as_torch(case)
    with pytest.raises(IndexError):
        tt.tensor(3.0).gather(1, tt.tensor(0))
    with pytest.raises(RuntimeError, match="out of bounds"):
        tt.tensor(3.0).gather(0, tt.tensor(1))


@pytest.mark.parametrize("case", [
    lambda L: L.tensor([float("nan"), 1.0, -2.0, 0.0]).sign(),
    lambda L: L.tensor([float("nan")], dtype=L.float16).sign(),
    lambda L: L.tensor([[1, 0], [2, 3]], dtype=L.uint8).all(),
    lambda L: L.tensor([[1, 0], [2, 3]], dtype=L.uint8).any(1, keepdim=True),
    lambda L: L.all(L.tensor([[1, 0], [2, 3]], dtype=L.uint8), 0),
    lambda L: L.arange(2.5, dtype=L.int64),
    lambda L: L.arange(0.5, 3.7, dtype=L.int64),
    lambda L: L.arange(-2.7, 5.2, 1.5, dtype=L.int64),
    lambda L: L.arange(-2, 5, 1.5, dtype=L.int32),
    lambda L: L.arange(-2.7, 5.2, 1.5, dtype=L.uint8),
    lambda L: L.arange(0.5, 3.7, 0.9, dtype=L.int16),
    lambda L: L.linspace(2.5, 10, 7, dtype=L.int64),
    lambda L: L.linspace(10, 2.5, 4, dtype=L.int64),
], ids=["sign_nan", "sign_nan_f16", "all_uint8", "any_uint8_dim", "fn_all_uint8",
        "arange_end", "arange_start_end", "arange_step", "arange_int32", "arange_uint8",
        "arange_int16_step_below_1", "linspace", "linspace_down"])
def test_sign_any_all_and_integer_ranges_like_torch(case):
    _same_as_torch(case)


def test_arange_int64_truncates_the_step_like_torch():
    torch.arange(0, 5, 1.5, dtype=torch.int64)  # (1.5 truncates to 1: accepted)
    with pytest.raises(ValueError, match="step must be nonzero"):
        torch.arange(-2, 5, 0.3, dtype=torch.int64)
    with pytest.raises(ValueError, match="step"):
        tt.arange(-2, 5, 0.3, dtype=tt.int64)


def test_clip_grad_norm_of_float32_and_float64_gradients_is_float64_as_pytorch():
    g32, g64 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(4)
    ps = [tt.tensor(g32 * 0, requires_grad=True), tt.tensor(g64 * 0, requires_grad=True)]
    tps = [torch.tensor(g32 * 0, requires_grad=True), torch.tensor(g64 * 0, requires_grad=True)]
    for p, tp, g in zip(ps, tps, (g32, g64)):
        p.grad, tp.grad = tt.tensor(g), torch.tensor(g)
    total = tt.nn.utils.clip_grad_norm_(ps, 0.5)
    ttotal = torch.nn.utils.clip_grad_norm_(tps, 0.5)
    assert total.dtype == tt.float64 and ttotal.dtype == torch.float64
    np.testing.assert_allclose(total.item(), ttotal.item(), rtol=1e-12)
    for p, tp in zip(ps, tps):
        assert p.grad.dtype.name == str(tp.grad.dtype).removeprefix("torch.")
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
