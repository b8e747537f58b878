"""Real PyTorch client programs ported by their imports (``import tinytrain as torch``), and
what porting them found missing, each checked against torch.

Programs (CPU-sized, same initial weights and data in both frameworks, losses compared step
by step): pytorch/examples' ``vae``, ``regression``, ``mnist_forward_forward`` and ``dcgan``.
What they and their neighbours (d2l.ai's chapters, fast_neural_style, super_resolution,
siamese_network) reached for and tinytrain lacked: ``F.interpolate`` / ``nn.Upsample`` on 3-D
input (``"linear"``, ``"nearest"``) and ``"nearest-exact"``; ``torch.linalg.norm`` /
``vector_norm`` / ``matrix_norm``; ``logit``, ``var_mean``, ``std_mean``, ``argwhere``,
``dist``, ``logspace``; ``nn.Softmax2d``, ``nn.ChannelShuffle`` / ``F.channel_shuffle`` and
``nn.Bilinear`` / ``F.bilinear``.
"""

from __future__ import annotations

import math
import warnings
from itertools import count

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F

INF = math.inf


def _grad_pair(fn_tt, fn_torch, arrays, dtype=np.float64):
    """``(ours, theirs)``: the output and every input's gradient of ``fn(*inputs)``, with
    the same upstream gradient (a fixed ramp) in both frameworks."""
    results = []
    for lib, fn in ((tt, fn_tt), (torch, fn_torch)):
        xs = [lib.tensor(np.asarray(a, dtype=dtype), requires_grad=True) for a in arrays]
        out = fn(*xs)
        ramp = np.linspace(-1, 1, max(out.numel(), 1)).reshape(tuple(out.shape)).astype(dtype)
        (out * lib.tensor(ramp)).sum().backward()
        results.append((out.detach().numpy(), [x.grad.numpy() for x in xs]))
    return results


def _assert_same(fn_tt, fn_torch, arrays, dtype=np.float64, rtol=1e-7, atol=1e-9):
    (ours, our_grads), (theirs, their_grads) = _grad_pair(fn_tt, fn_torch, arrays, dtype)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
    for g, h in zip(our_grads, their_grads):
        np.testing.assert_allclose(g, h, rtol=rtol, atol=atol)


def _copy_weights(ours, theirs):
    """Load a tinytrain module's state into the torch module of the same structure."""
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in state.items()})


# ------------------------------------------------------------------ interpolate, 1-D and exact


@pytest.mark.parametrize("mode,align_corners", [("linear", None), ("linear", True),
                                                ("linear", False), ("nearest", None),
                                                ("nearest-exact", None)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_interpolate_of_sequences_matches_torch(mode, align_corners, dtype):
    """[N, C, L] resized up, down, to one sample and by scale factors that leave a remainder
    (1.7: coordinates through 1 / 1.7; recompute_scale_factor: through L / Lo)."""
    x = np.random.default_rng(0).standard_normal((2, 3, 5))
    targets = [dict(scale_factor=2), dict(scale_factor=0.5), dict(scale_factor=1.7),
               dict(scale_factor=3.0), dict(size=1), dict(size=7), dict(size=12),
               dict(scale_factor=1.7, recompute_scale_factor=True)]
    for target in targets:
        kw = dict(target, mode=mode)
        if align_corners is not None:
            kw["align_corners"] = align_corners
        _assert_same(lambda a, kw=kw: F.interpolate(a, **kw),
                     lambda a, kw=kw: torch.nn.functional.interpolate(a, **kw), [x], dtype,
                     rtol=1e-6, atol=1e-6)


def test_an_axis_a_scale_leaves_at_its_size_is_copied_or_mapped_as_torchs_kernels_do():
    """1.2 on 4 samples gives 4: PyTorch's 2-D nearest and (bi)linear kernels copy that
    axis; its 1-D nearest (0, 0, 1, 2) and its nearest-exact map it through 1 / 1.2. The
    gradient is the transpose of that map (PyTorch's 1-D nearest backward copies instead)."""
    x = np.arange(4.0)
    for shape, mode in [((1, 1, 4), "nearest"), ((1, 1, 4), "linear"),
                        ((1, 1, 4), "nearest-exact"), ((1, 1, 4, 4), "nearest"),
                        ((1, 1, 4, 4), "bilinear"), ((1, 1, 4, 4), "nearest-exact")]:
        data = np.broadcast_to(x, shape).copy()
        ours = F.interpolate(tt.tensor(data), scale_factor=1.2, mode=mode).numpy()
        theirs = torch.nn.functional.interpolate(torch.tensor(data), scale_factor=1.2,
                                                 mode=mode).numpy()
        np.testing.assert_array_equal(ours, theirs, err_msg=f"{shape} {mode}")
    a = tt.tensor(x.reshape(1, 1, 4), requires_grad=True)
    F.interpolate(a, scale_factor=1.2, mode="nearest").backward(tt.tensor([[[1.0, 2, 3, 4]]]))
    np.testing.assert_array_equal(a.grad.numpy().ravel(), [3.0, 3.0, 4.0, 0.0])


def test_upsample_modules_take_sequences_like_torch():
    x = np.arange(12.0).reshape(1, 2, 6)
    for kw in (dict(scale_factor=2), dict(scale_factor=2, mode="linear"),
               dict(size=4, mode="linear", align_corners=True),
               dict(scale_factor=1.5, mode="nearest-exact")):
        ours, theirs = tt.nn.Upsample(**kw), torch.nn.Upsample(**kw)
        assert repr(ours) == repr(theirs)
        _assert_same(ours, theirs, [x])


@pytest.mark.parametrize("shape,kw,error,message", [
    ((1, 2, 3), dict(scale_factor=2, mode="bilinear"), NotImplementedError,
     "Got 3D input.*bilinear mode needs 4D input"),
    ((1, 2, 3, 3), dict(scale_factor=2, mode="linear"), NotImplementedError,
     "Got 4D input.*linear mode needs 3D input"),
    ((1, 2, 3), dict(size=(2, 3), mode="linear"), ValueError,
     r"spatial dimensions of \[3\] and output size of \(2, 3\)"),
    ((1, 2, 3), dict(scale_factor=2, mode="nearest-exact", align_corners=True), ValueError,
     "align_corners option can only be set with the interpolating modes"),
    ((1, 2, 3), dict(size=0), RuntimeError, r"input \(W: 3\).*output \(W: 0\)"),
])
def test_interpolate_refuses_what_torch_refuses(shape, kw, error, message):
    with pytest.raises(error, match=message):
        torch.nn.functional.interpolate(torch.zeros(*shape), **kw)
    with pytest.raises(error, match=message):
        F.interpolate(tt.zeros(*shape), **kw)


# ------------------------------------------------------------------ torch.linalg norms

MATRIX = [[1.0, -2.0, 2.0], [0.0, -1.0, 3.0]]
STACK = [[[1.0, -2.0], [2.0, 0.5]], [[0.0, -1.0], [3.0, 4.0]]]
NORMS = [
    ("vector_norm", STACK, {}), ("vector_norm", STACK, dict(ord=1)),
    ("vector_norm", STACK, dict(ord=INF)), ("vector_norm", STACK, dict(ord=-INF)),
    ("vector_norm", STACK, dict(ord=3)), ("vector_norm", STACK, dict(ord=-1, dim=1)),
    ("vector_norm", STACK, dict(dim=(0, 2), keepdim=True)), ("vector_norm", [0.0, 0.0], {}),
    ("matrix_norm", STACK, {}), ("matrix_norm", STACK, dict(ord=1)),
    ("matrix_norm", STACK, dict(ord=-1)), ("matrix_norm", STACK, dict(ord=INF)),
    ("matrix_norm", STACK, dict(ord=-INF, keepdim=True)),
    ("matrix_norm", STACK, dict(ord=INF, dim=(0, 2))),
    ("matrix_norm", STACK, dict(ord=1, dim=(2, 0), keepdim=True)),
    ("norm", MATRIX, {}), ("norm", MATRIX, dict(ord=1)), ("norm", MATRIX, dict(ord=INF)),
    ("norm", MATRIX, dict(ord="fro")), ("norm", MATRIX, dict(dim=1)),
    ("norm", MATRIX, dict(ord=3, dim=0)), ("norm", STACK, {}),
    ("norm", STACK, dict(ord=1, dim=(1, 2))), ("norm", STACK, dict(ord=2, dim=-1)),
    ("norm", [3.0, 4.0, 0.0], dict(ord=1)), ("norm", [3.0, 4.0, 0.0], dict(ord=INF)),
]


@pytest.mark.parametrize("fn,value,kw", NORMS, ids=str)
def test_linalg_norms_match_torch(fn, value, kw):
    """Values and gradients (a max picks its argument, a tie splits, 0 at the zero vector)."""
    _assert_same(lambda a: getattr(tt.linalg, fn)(a, **kw),
                 lambda a: getattr(torch.linalg, fn)(a, **kw), [value])


@pytest.mark.parametrize("call,error,message", [
    (lambda L, t: L.linalg.norm(t.reshape(2, 1, 3), ord=1), RuntimeError, "must be 1D or 2D"),
    (lambda L, t: L.linalg.matrix_norm(t, ord=3), RuntimeError, "Order 3 not supported"),
    (lambda L, t: L.linalg.matrix_norm(t[0]), RuntimeError, "at least 2 dimensions"),
    (lambda L, t: L.linalg.matrix_norm(t, dim=(1, 1)), RuntimeError, "dims must be different"),
    (lambda L, t: L.linalg.vector_norm(t.long()), RuntimeError, "Expected a floating point"),
    (lambda L, t: L.linalg.vector_norm(t.double(), dtype=L.float32), RuntimeError,
     "without narrowing"),
    (lambda L, t: L.linalg.norm(t, dim=(0, 1, 0)), RuntimeError, "length 1 or 2"),
])
def test_linalg_norms_refuse_what_torch_refuses(call, error, message):
    for lib in (torch, tt):
        with pytest.raises(error, match=message):
            call(lib, lib.tensor(MATRIX))


def test_linalg_names_tinytrain_lacks_say_so():
    with pytest.raises(NotImplementedError, match="singular value decomposition"):
        tt.linalg.norm(tt.tensor(MATRIX), ord="nuc")
    with pytest.raises(AttributeError, match="tinytrain.linalg has norm, vector_norm"):
        tt.linalg.svd  # noqa: B018


def test_clip_by_linalg_vector_norm_trains_as_torch():
    """A hand-written clip (nanoGPT-style) with torch.linalg.vector_norm over all gradients."""
    losses = []
    for lib in (tt, torch):
        w = lib.tensor([[0.5, -1.0], [2.0, 0.1]], requires_grad=True)
        x = lib.tensor([[1.0, 2.0], [3.0, -1.0]])
        for _ in range(3):
            loss = ((x @ w) ** 2).mean()
            loss.backward()
            with lib.no_grad():
                total = lib.linalg.vector_norm(lib.stack([lib.linalg.vector_norm(w.grad)]))
                w -= 0.1 * w.grad * min(1.0, 1.0 / (total.item() + 1e-6))
                w.grad.zero_()
            losses.append(loss.item())
    np.testing.assert_allclose(losses[:3], losses[3:], rtol=1e-6)


# ------------------------------------------------------------------ small tensor functions


@pytest.mark.parametrize("expr,values", [
    ("L.logit(a)", [0.2, 0.5, 0.9, 0.0, 1.0]),
    ("a.logit(eps=0.1)", [0.2, 0.5, 0.9, 0.0, 1.0, 0.1]),
    ("L.logit(a, 1e-6)", [0.2, 0.0, 1.0]),
    ("L.var_mean(a.reshape(2, 3), 1)[0] + L.var_mean(a.reshape(2, 3), 1)[1]", range(6)),
    ("L.std_mean(a.reshape(2, 3), dim=0, correction=0)[0] * L.std_mean(a.reshape(2, 3))[1]",
     range(6)),
    ("L.var_mean(a, False)[0]", [1.0, 2.0, 4.0]),
    ("L.std_mean(a.reshape(2, 3), (0, 1), keepdim=True)[1]", range(6)),
    ("L.dist(a.reshape(2, 3), L.tensor([1.0, 0.0, 0.0], dtype=L.float64))", range(6)),
    ("a.reshape(2, 3).dist(L.tensor([1.0, 0.0, 0.0], dtype=L.float64), 1)", range(6)),
    ("L.dist(a, L.zeros(3, dtype=L.float64), float('inf'))", [1.0, -3.0, 2.0]),
])
def test_small_functions_match_torch(expr, values):
    """logit's gradient is 1 / (p (1 - p)): inf at 0 and 1 (no eps), 0 outside [eps, 1-eps]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        _assert_same(lambda a: eval(expr, {"L": tt, "a": a}),
                     lambda a: eval(expr, {"L": torch, "a": a}), [np.array(values, float)])


def test_argwhere_logspace_and_integer_logit_match_torch():
    for lib in (tt, torch):
        x = lib.tensor([[0.0, 1.5], [2.0, 0.0]])
        got = (lib.argwhere(x), x.argwhere(), lib.logspace(0, 2, 3), lib.logspace(-1, 1, 5, 2),
               lib.logspace(0, 3, 4, dtype=lib.float64), lib.logit(lib.tensor([0, 1])))
        if lib is tt:
            ours = got
    for a, b in zip(ours, got):
        assert str(a.dtype) == str(b.dtype).replace("torch.", "") and a.shape == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((2, 5), False), ((3, 3, 3), False)], ids=str)
def test_fill_diagonal_matches_torch(shape, wrap):
    for lib in (tt, torch):
        x = lib.zeros(*shape)
        assert x.fill_diagonal_(2.5, wrap=wrap) is x
        if lib is tt:
            ours = x.numpy()
    np.testing.assert_array_equal(ours, x.numpy())


def test_fill_diagonal_masks_a_similarity_matrix_in_the_graph_as_torch():
    """SimCLR's logits: sim.fill_diagonal_(-inf) after a product; the diagonal's gradient
    is 0 and the rest flows."""
    _assert_same(lambda w: (w @ w.T).fill_diagonal_(-INF).softmax(1),
                 lambda w: (w @ w.T).fill_diagonal_(-INF).softmax(1),
                 [np.arange(6.0).reshape(3, 2) / 5])


def test_fliplr_flipud_and_their_refusals_match_torch():
    a = np.arange(6).reshape(2, 3)
    for fn in ("fliplr", "flipud"):
        np.testing.assert_array_equal(getattr(tt, fn)(tt.tensor(a)).numpy(),
                                      getattr(torch, fn)(torch.tensor(a)).numpy())
        np.testing.assert_array_equal(getattr(tt.tensor(a), fn)().numpy(),
                                      getattr(torch.tensor(a), fn)().numpy())
    for lib in (torch, tt):
        with pytest.raises(RuntimeError, match="Input must be >= 2-d"):
            lib.fliplr(lib.arange(3))
        with pytest.raises(RuntimeError, match="dimensions must larger than 1"):
            lib.zeros(3).fill_diagonal_(1)
        with pytest.raises(RuntimeError, match="all dimensions of input must be of equal"):
            lib.zeros(3, 3, 2).fill_diagonal_(1)


def test_load_state_dict_assign_takes_the_tensors_as_torch():
    """assign=True (loading into a model made on the meta device, in PyTorch): the state
    dict's tensors become the module's, with their dtype; parameters keep requires_grad."""
    seen = []
    for lib in (tt, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        m[0].bias.requires_grad_(False)
        state = {k: v.double() + 1 for k, v in m.state_dict().items()}
        state["1.num_batches_tracked"] = lib.tensor(5)
        old = m[0].weight
        m.load_state_dict(state, assign=True)
        state["0.weight"][0, 0] = 7.0  # shared, as torch's
        seen.append((str(m[0].weight.dtype).replace("torch.", ""), m[0].weight is old,
                     type(m[0].weight).__name__, m[0].weight.requires_grad,
                     m[0].bias.requires_grad, float(m[0].weight.detach()[0, 0]),
                     int(m[1].num_batches_tracked), [n for n, _ in m.named_buffers()],
                     m(lib.ones(2, 2, dtype=lib.float64)).sum().item()))
        with pytest.raises(RuntimeError, match="weight"):
            lib.nn.Linear(2, 3).load_state_dict({"weight": lib.ones(2, 3),
                                                 "bias": lib.ones(3)}, assign=True)
    assert seen[0][:-1] == seen[1][:-1]
    np.testing.assert_allclose(seen[0][-1], seen[1][-1], rtol=1e-12)


@pytest.mark.parametrize("shape,groups", [((4, 4, 3, 3), 1), ((6, 2, 3, 5), 2), ((3, 5, 4), 1),
                                          ((2, 3, 3, 3, 3), 1), ((8, 2, 1, 1), 4)], ids=str)
def test_dirac_init_matches_torch_and_passes_the_input_through(shape, groups):
    ours, theirs = tt.nn.init.dirac_(tt.empty(*shape), groups), torch.nn.init.dirac_(
        torch.empty(*shape), groups)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    if len(shape) == 4 and shape[0] == shape[1] * groups == shape[1]:  # identity convolution
        x = tt.randn(1, shape[1], 5, 5)
        np.testing.assert_allclose(F.conv2d(x, ours, padding=(1, 1)).numpy(), x.numpy())


def test_eye_init_and_the_refusals_match_torch():
    for shape in ((3, 3), (2, 4), (4, 2)):
        np.testing.assert_array_equal(tt.nn.init.eye_(tt.empty(*shape)).numpy(),
                                      torch.nn.init.eye_(torch.empty(*shape)).numpy())
    for lib in (torch, tt):
        with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
            lib.nn.init.eye_(lib.empty(2, 2, 2))
        with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
            lib.nn.init.dirac_(lib.empty(2, 2))
        with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
            lib.nn.init.dirac_(lib.empty(3, 2, 3, 3), groups=2)


# ------------------------------------------------------------------ layers


def test_softmax2d_channel_shuffle_and_bilinear_match_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 3, 2))
    _assert_same(tt.nn.Softmax2d(), torch.nn.Softmax2d(), [x])
    _assert_same(tt.nn.Softmax2d(), torch.nn.Softmax2d(), [x[0]])
    _assert_same(tt.nn.ChannelShuffle(3), torch.nn.ChannelShuffle(3), [x])
    _assert_same(lambda a: F.channel_shuffle(a, 2), lambda a: torch.nn.functional.
                 channel_shuffle(a, 2), [x[..., 0]])
    for bias in (True, False):
        ours, theirs = tt.nn.Bilinear(3, 4, 5, bias=bias), torch.nn.Bilinear(3, 4, 5, bias=bias)
        ours.double(), theirs.double()
        _copy_weights(ours, theirs)
        assert repr(ours) == repr(theirs)
        assert [(n, p.shape) for n, p in ours.named_parameters()] == [
            (n, tuple(p.shape)) for n, p in theirs.named_parameters()]
        _assert_same(ours, theirs, [rng.standard_normal((2, 7, 3)), rng.standard_normal((2, 7, 4))])
        a, b = ours.weight.detach().numpy(), 1 / math.sqrt(3)  # U(-1/sqrt(in1), 1/sqrt(in1))
        assert a.min() >= -b and a.max() <= b and a.std() > b / 4
    assert repr(tt.nn.ChannelShuffle(3)) == repr(torch.nn.ChannelShuffle(3))


@pytest.mark.parametrize("shape", [(2, 6, 3, 2), (2, 6, 5), (1, 3, 2, 2, 2), (2, 1, 4)], ids=str)
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm_matches_torch(shape, size):
    """AlexNet's LocalResponseNorm(size, alpha, beta, k): values and gradients."""
    x = np.random.default_rng(6).standard_normal(shape) * 3
    kw = dict(alpha=1e-2, beta=0.75, k=2.0)
    ours, theirs = tt.nn.LocalResponseNorm(size, **kw), torch.nn.LocalResponseNorm(size, **kw)
    assert repr(ours) == repr(theirs)
    _assert_same(ours, theirs, [x])
    _assert_same(lambda a: F.local_response_norm(a, size),
                 lambda a: torch.nn.functional.local_response_norm(a, size), [x])


@pytest.mark.parametrize("call,error,message", [
    (lambda L: L.nn.LocalResponseNorm(2)(L.zeros(2, 3)), ValueError,
     r"Expected 3D or higher dimensionality\s+input \(got 2 dimensions\)"),
    (lambda L: L.nn.Softmax2d()(L.zeros(2, 3)), ValueError, "expected input to be 3D or 4D"),
    (lambda L: L.nn.ChannelShuffle(2)(L.zeros(1, 3, 2)), RuntimeError,
     "Number of channels must be divisible by groups. Got 3 channels and 2 groups"),
    (lambda L: L.nn.functional.channel_shuffle(L.zeros(2, 4), 2), RuntimeError,
     r"channel_shuffle expects input with > 2 dims, but got input with sizes \[2, 4\]"),
    (lambda L: L.nn.functional.channel_shuffle(L.zeros(2, 4, 3), 0), RuntimeError,
     "Number of groups to divide channels in must be positive"),
    (lambda L: L.nn.Bilinear(3, 4, 5)(L.zeros(2, 3), L.zeros(2, 3)), RuntimeError,
     r"bilinear\(\): input2 size does not match weight size: got 3 but expected 4"),
    (lambda L: L.nn.functional.bilinear(L.zeros(2, 3), L.zeros(3, 4), L.zeros(5, 3, 4)),
     RuntimeError, r"bilinear\(\): input batch dimensions do not match"),
])
def test_new_layers_refuse_what_torch_refuses(call, error, message):
    for lib in (torch, tt):
        with pytest.raises(error, match=message):
            call(lib)


@pytest.mark.parametrize("norm_type,max_norm", [(2.0, 1.0), (1.0, 0.5), (INF, 0.3),
                                                 (2.0, 100.0)], ids=str)
def test_embedding_max_norm_renormalises_the_rows_looked_up_as_torch(norm_type, max_norm):
    """Word2vec-style: Embedding(max_norm=...) rescales the rows it reads, in its weight,
    before each lookup; a few SGD steps keep weights, outputs and gradients equal."""
    rng = np.random.default_rng(5)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    batches = rng.integers(0, 10, (3, 2, 5))
    ours = tt.nn.Embedding(10, 4, max_norm=max_norm, norm_type=norm_type)
    theirs = torch.nn.Embedding(10, 4, max_norm=max_norm, norm_type=norm_type)
    assert repr(ours) == repr(theirs)
    _copy_weights(ours, theirs)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(table))
    ours.weight.data[...] = table
    runs = []
    for lib, emb in ((tt, ours), (torch, theirs)):
        opt, seen = lib.optim.SGD(emb.parameters(), lr=0.5), []
        for batch in batches:
            opt.zero_grad()
            out = emb(lib.tensor(batch))
            (out * lib.arange(4.0)).sum().backward()
            seen += [out.detach().numpy().copy(), emb.weight.grad.numpy().copy()]
            opt.step()
        runs.append(seen + [emb.weight.detach().numpy()])
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(  # the functional form renormalises its weight argument too
        F.embedding(tt.tensor(batches[-1]), ours.weight, max_norm=max_norm,
                    norm_type=norm_type).detach().numpy(),
        torch.nn.functional.embedding(torch.tensor(batches[-1]), theirs.weight,
                                      max_norm=max_norm, norm_type=norm_type).detach().numpy(),
        rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ ported programs


def _vae(nn, F_):
    class VAE(nn.Module):  # pytorch/examples vae/main.py, 784-64-8
        def __init__(self):
            super().__init__()
            self.fc1, self.fc21, self.fc22 = nn.Linear(784, 64), nn.Linear(64, 8), nn.Linear(64, 8)
            self.fc3, self.fc4 = nn.Linear(8, 64), nn.Linear(64, 784)

        def encode(self, x):
            h1 = F_.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def decode(self, z):
            return self.fc4(F_.relu(self.fc3(z))).sigmoid()

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, 784))
            std = (0.5 * logvar).exp()
            return self.decode(mu + eps * std), mu, logvar
    return VAE()


def test_vae_example_trains_as_torch():
    """binary_cross_entropy(reduction='sum') + the KL term, Adam; randn_like's noise given
    to both (each framework draws its own numbers)."""
    rng = np.random.default_rng(0)
    images = (rng.random((4, 16, 1, 28, 28)) < 0.3).astype(np.float32)
    noise = rng.standard_normal((4, 16, 8)).astype(np.float32)
    ours, theirs = _vae(tt.nn, F), _vae(torch.nn, torch.nn.functional)
    _copy_weights(ours, theirs)
    losses = []
    for lib, model, F_ in ((tt, ours, F), (torch, theirs, torch.nn.functional)):
        optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
        for data, eps in zip(images, noise):
            data = lib.tensor(data)
            optimizer.zero_grad()
            recon, mu, logvar = model(data, lib.tensor(eps))
            bce = F_.binary_cross_entropy(recon, data.view(-1, 784), reduction="sum")
            loss = bce - 0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        with lib.no_grad():
            losses.append(model.decode(lib.tensor(noise[0])).view(16, 1, 28, 28).mean().item())
    np.testing.assert_allclose(losses[:5], losses[5:], rtol=1e-5)


def test_regression_example_fits_as_torch():
    """pytorch/examples regression/main.py: polynomial features by cat, smooth_l1_loss, an
    update of p.data, and its printout of fc.weight.view(-1) through '{:+.2f}'.format."""
    outputs = []
    for lib in (tt, torch):
        rng = np.random.default_rng(0)
        w_target = lib.tensor(rng.normal(size=(4, 1)).astype(np.float32)) * 5
        b_target = lib.tensor(rng.normal(size=1).astype(np.float32)) * 5

        def make_features(x, lib=lib):
            x = x.unsqueeze(1)
            return lib.cat([x ** i for i in range(1, 5)], 1)

        def poly_desc(W, b):
            result = "y = "
            for i, w in enumerate(W):
                result += "{:+.2f} x^{} ".format(w, i + 1)  # noqa: UP032 (the example's)
            return result + "{:+.2f}".format(b[0])  # noqa: UP032

        fc = lib.nn.Linear(4, 1)
        with lib.no_grad():
            fc.weight.copy_(lib.tensor([[0.1, -0.2, 0.3, -0.4]]))
            fc.bias.fill_(0.05)
        losses = []
        for batch_idx in count(1):
            batch_x = make_features(lib.tensor(rng.normal(size=32).astype(np.float32)))
            batch_y = batch_x.mm(w_target) + b_target.item()
            fc.zero_grad()
            output = lib.nn.functional.smooth_l1_loss(fc(batch_x), batch_y)
            loss = output.item()
            output.backward()
            for param in fc.parameters():
                param.data.add_(param.grad.data, alpha=-0.01)  # the example's own line
            losses.append(loss)
            if loss < 1e-3 or batch_idx >= 40:
                break
        outputs.append((losses, poly_desc(fc.weight.view(-1), fc.bias)))
    (ours, our_desc), (theirs, their_desc) = outputs
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert our_desc == their_desc


def _forward_forward(lib, seed_weights=None):
    """pytorch/examples mnist_forward_forward: a Linear subclass that overrides train() with
    its own optimisation loop and takes PyTorch's positional (bias, device, dtype)."""
    nn = lib.nn

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = nn.ReLU()
            self.opt = lib.optim.Adam(self.parameters(), lr=0.03)
            self.threshold, self.num_epochs = 2.0, 5

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(lib.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train(self, x_pos, x_neg):
            for _ in range(self.num_epochs):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = lib.log(1 + lib.exp(lib.cat([-g_pos + self.threshold,
                                                    g_neg - self.threshold]))).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    return [Layer(64, 32).to(lib.device("cpu")), Layer(32, 32)]


def test_forward_forward_example_trains_as_torch():
    rng = np.random.default_rng(2)
    x_np, y_np = rng.random((48, 64)).astype(np.float32), rng.integers(0, 10, 48)
    perm = rng.permutation(48)
    results = []
    ours, theirs = _forward_forward(tt), _forward_forward(torch)
    for a, b in zip(ours, theirs):
        _copy_weights(a, b)
    for lib, layers in ((tt, ours), (torch, theirs)):
        def overlay_y_on_x(x, y):
            x_ = x.clone()
            x_[:, :10] *= 0.0
            x_[range(x.shape[0]), y] = x.max()
            return x_
        x, y = lib.tensor(x_np), lib.tensor(y_np)
        h_pos, h_neg = overlay_y_on_x(x, y), overlay_y_on_x(x, y[lib.tensor(perm)])
        for layer in layers:
            h_pos, h_neg = layer.train(h_pos, h_neg)
        goodness_per_label = []
        for label in range(10):
            h, goodness = overlay_y_on_x(x, label), []
            for layer in layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = lib.cat(goodness_per_label, 1)
        error = 1.0 - goodness_per_label.argmax(1).eq(y).float().mean().item()
        results.append([error, h_pos.sum().item(), goodness_per_label.sum().item()])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5)


def _dcgan(nn):
    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)
    generator = nn.Sequential(
        nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
        nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False), nn.Tanh())
    discriminator = nn.Sequential(
        nn.Conv2d(1, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(8, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    return generator.apply(weights_init), discriminator.apply(weights_init)


def test_dcgan_example_trains_as_torch():
    """D on real (label torch.full of real_label), on fake.detach() (label.fill_), then G;
    BCELoss and Adam(betas=(0.5, 0.999)) as pytorch/examples dcgan/main.py."""
    rng = np.random.default_rng(3)
    data = rng.random((3, 4, 1, 8, 8)).astype(np.float32) * 2 - 1
    noise = rng.standard_normal((3, 4, 8, 1, 1)).astype(np.float32)
    (g, d), (tg, td) = _dcgan(tt.nn), _dcgan(torch.nn)
    _copy_weights(g, tg)
    _copy_weights(d, td)
    out = []
    for lib, netG, netD in ((tt, g, d), (torch, tg, td)):
        criterion = lib.nn.BCELoss()
        optD = lib.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        optG = lib.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        for real, z in zip(data, noise):
            netD.zero_grad()
            real = lib.tensor(real)
            label = lib.full((real.size(0),), 1, dtype=real.dtype)
            errD_real = criterion(netD(real).view(-1), label)
            errD_real.backward()
            fake = netG(lib.tensor(z))
            label.fill_(0)
            errD_fake = criterion(netD(fake.detach()).view(-1), label)
            errD_fake.backward()
            optD.step()
            netG.zero_grad()
            label.fill_(1)
            errG = criterion(netD(fake).view(-1), label)
            errG.backward()
            optG.step()
            out.append([(errD_real + errD_fake).item(), errG.item()])
    np.testing.assert_allclose(out[:3], out[3:], rtol=1e-5)


def test_siamese_style_head_with_softmax2d_and_bilinear_trains_as_torch():
    """A two-tower head of the new layers: Softmax2d attention over channels, a channel
    shuffle, AdaptiveAvgPool2d, and Bilinear to compare the towers; BCEWithLogitsLoss."""
    rng = np.random.default_rng(4)
    a, b = (rng.random((3, 4, 8, 1, 6, 6)).astype(np.float32) for _ in range(2))
    target = rng.integers(0, 2, (3, 8)).astype(np.float32)

    def build(nn):
        tower = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Softmax2d(), nn.ChannelShuffle(2),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten())
        return nn.ModuleList([tower, nn.Bilinear(4, 4, 1)])
    ours, theirs = build(tt.nn), build(torch.nn)
    _copy_weights(ours, theirs)
    losses = []
    for lib, model in ((tt, ours), (torch, theirs)):
        opt = lib.optim.SGD(model.parameters(), lr=0.5)
        for x1, x2, y in zip(a[0], b[0], target):
            opt.zero_grad(set_to_none=True)
            logits = model[1](model[0](lib.tensor(x1)), model[0](lib.tensor(x2))).squeeze(1)
            loss = lib.nn.BCEWithLogitsLoss()(logits, lib.tensor(y))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    np.testing.assert_allclose(losses[:3], losses[3:], rtol=1e-5)


def test_no_warnings_from_the_new_paths():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.interpolate(tt.ones(1, 1, 4), scale_factor=2, mode="linear")
        tt.linalg.norm(tt.ones(3))
        tt.logit(tt.tensor([0.5]))


# ------------------------------------------------------------------ activation checkpointing


def _blocks(nn):
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 3), nn.ReLU(), nn.Linear(3, 2))


@pytest.mark.parametrize("use_reentrant", [True, False])
@pytest.mark.parametrize("input_grad", [True, False])
def test_checkpoint_gives_torchs_values_and_gradients(use_reentrant, input_grad):
    """The reentrant form (PyTorch's default) gives no gradient when no input requires one;
    the other always does. checkpoint_sequential checkpoints all segments but the last."""
    x = np.random.default_rng(7).standard_normal((5, 4))
    ours, theirs = _blocks(tt.nn), _blocks(torch.nn)
    ours.double(), theirs.double()
    _copy_weights(ours, theirs)
    grads = []
    for lib, model in ((tt, ours), (torch, theirs)):
        inp = lib.tensor(x, requires_grad=input_grad)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mid = lib.utils.checkpoint.checkpoint(model[:4], inp, use_reentrant=use_reentrant)
            out = lib.utils.checkpoint.checkpoint_sequential(model[4:], 2, mid,
                                                             use_reentrant=use_reentrant)
        (out * lib.arange(2.0, dtype=lib.float64)).sum().backward()
        grads.append(([None if p.grad is None else p.grad.numpy() for p in model.parameters()],
                      out.detach().numpy(), [str(w.message) for w in caught]))
    (ours_g, ours_out, our_warn), (their_g, their_out, their_warn) = grads
    np.testing.assert_allclose(ours_out, their_out, rtol=1e-12)
    assert [g is None for g in ours_g] == [g is None for g in their_g]
    for a, b in zip(ours_g, their_g):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10)
    assert our_warn == their_warn


def test_checkpoint_warns_and_refuses_as_torch():
    for lib in (torch, tt):
        layer = lib.nn.Linear(2, 2)
        with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
            lib.utils.checkpoint.checkpoint(layer, lib.ones(1, 2, requires_grad=True))
        with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
            lib.utils.checkpoint.checkpoint(lambda x, scale: x * scale, lib.ones(1),
                                            use_reentrant=True, scale=2)
        out = lib.utils.checkpoint.checkpoint(lambda x, scale: x * scale,
                                              lib.ones(1, requires_grad=True),
                                              use_reentrant=False, scale=2)
        assert out.item() == 2.0 and out.requires_grad


# ------------------------------------------------------------------ ConvTranspose1d


@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(stride=2, padding=1),
                                dict(stride=3, padding=1, output_padding=2),
                                dict(kernel_size=(1,), bias=False)], ids=str)
@pytest.mark.parametrize("batched", [True, False])
def test_conv_transpose1d_matches_torch(kw, batched):
    """A 1-D decoder's upsampling: values, the input's and parameters' gradients, the
    initialisation's range, repr, and output_size choosing the output padding."""
    kw = dict(dict(kernel_size=4), **kw)
    ours, theirs = tt.nn.ConvTranspose1d(3, 5, **kw), torch.nn.ConvTranspose1d(3, 5, **kw)
    assert repr(ours) == repr(theirs)
    assert ours.weight.shape == tuple(theirs.weight.shape)
    bound = 1 / math.sqrt(5 * ours.kernel_size[0])
    assert ours.weight.detach().numpy().max() <= bound
    ours.double(), theirs.double()
    _copy_weights(ours, theirs)
    x = np.random.default_rng(8).standard_normal((2, 3, 6) if batched else (3, 6))
    _assert_same(ours, theirs, [x])
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12)
    _assert_same(lambda a: F.conv_transpose1d(a, ours.weight, ours.bias, ours.stride,
                                              ours.padding, ours.output_padding),
                 lambda a: torch.nn.functional.conv_transpose1d(
                     a, theirs.weight, theirs.bias, theirs.stride, theirs.padding,
                     theirs.output_padding), [x])
    low = (6 - 1) * ours.stride[0] - 2 * ours.padding[0] + ours.kernel_size[0]
    size = [low + ours.stride[0] - 1]
    _assert_same(lambda a: ours(a, output_size=size), lambda a: theirs(a, output_size=size), [x])
