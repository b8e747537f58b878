"""Two API gaps real programs hit, each against PyTorch 2.13: ``F.interpolate`` /
``nn.Upsample`` with ``mode="bicubic"`` (``tinytrain/nn/upsampling.py``: values, gradients,
the gradient's own gradient) and the CTC loss, ``F.ctc_loss`` / ``nn.CTCLoss``
(``tinytrain/nn/ctc.py``: values, gradients, finite differences, errors). Comparisons run on
the ``device`` fixture's devices."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

pytestmark = pytest.mark.usefixtures("torch_single_thread")

TOL = {np.float64: 1e-11, np.float32: 2e-5}


def close(ours, theirs, dtype, what, equal_nan=False):
    a = ours.numpy() if isinstance(ours, tt.Tensor) else np.asarray(ours)
    r = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert a.shape == r.shape, what
    assert a.dtype == r.dtype, what
    finite = r[np.isfinite(r)]
    scale = max(1.0, float(np.abs(finite).max(initial=0)))
    np.testing.assert_allclose(a, r, rtol=TOL[dtype], atol=TOL[dtype] * scale, err_msg=what,
                               equal_nan=equal_nan)


# ------------------------------------------------------------------------------- bicubic

BICUBIC = [  # (input shape, interpolate's keywords)
    ((2, 3, 5, 7), dict(size=(9, 13))),
    ((2, 3, 5, 7), dict(size=(3, 4))),      # down: source coordinates below 0, taps clamped
    ((1, 2, 6, 6), dict(size=4)),
    ((1, 2, 4, 5), dict(scale_factor=2)),
    ((1, 2, 5, 7), dict(scale_factor=(1.7, 0.6))),
    ((1, 2, 5, 7), dict(scale_factor=(1.7, 0.6), recompute_scale_factor=True)),
    ((1, 2, 5, 7), dict(scale_factor=0.45)),
    ((1, 1, 1, 1), dict(size=(4, 3))),      # one pixel: every tap is it
    ((1, 1, 4, 4), dict(size=(1, 1))),
    ((1, 2, 2, 9), dict(size=(5, 2))),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape,kw", BICUBIC, ids=[str(k) for _, k in BICUBIC])
def test_bicubic_matches_torch(device, dtype, align_corners, shape, kw):
    rng = np.random.default_rng(len(str(kw)) + 7 * shape[-1])
    x = rng.standard_normal(shape).astype(dtype)
    ours = tt.tensor(x, requires_grad=True, device=device)
    theirs = torch.tensor(x, requires_grad=True)
    y = F.interpolate(ours, mode="bicubic", align_corners=align_corners, **kw)
    y_t = TF.interpolate(theirs, mode="bicubic", align_corners=align_corners, **kw)
    close(y, y_t, dtype, f"bicubic {shape} {kw}")
    g = rng.standard_normal(tuple(y_t.shape)).astype(dtype)
    y.backward(tt.tensor(g, device=device))
    y_t.backward(torch.tensor(g))
    close(ours.grad, theirs.grad, dtype, f"bicubic gradient {shape} {kw}")


def test_bicubic_random_shapes_match_torch(device):
    rng = np.random.default_rng(10)
    for _ in range(12):
        shape = (1, 2, *rng.integers(1, 9, size=2))
        size = tuple(int(s) for s in rng.integers(1, 15, size=2))
        align = bool(rng.integers(2))
        x = rng.standard_normal(shape)
        y = F.interpolate(tt.tensor(x, device=device), size=size, mode="bicubic",
                          align_corners=align)
        y_t = TF.interpolate(torch.tensor(x), size=size, mode="bicubic", align_corners=align)
        close(y, y_t, np.float64, f"{shape} -> {size}, align_corners={align}")


def test_bicubic_gradient_is_the_adjoint_where_torch_copies(device):
    """A scale that keeps the size (1.2 on 3 rows, 4 columns): PyTorch's forward maps the
    rows through ``1 / 1.2``, its backward copies the gradient (the transpose of another
    map). Ours is the transpose of the forward: ``<g, f(x)> = <f^T g, x>``."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 3, 4))
    g = rng.standard_normal((1, 2, 3, 4))
    ours = tt.tensor(x, requires_grad=True, device=device)
    y = F.interpolate(ours, scale_factor=1.2, mode="bicubic")
    theirs = torch.tensor(x, requires_grad=True)
    y_t = TF.interpolate(theirs, scale_factor=1.2, mode="bicubic")
    close(y, y_t, np.float64, "forward")
    assert not np.allclose(y.numpy(), x)  # (not a copy)
    y.backward(tt.tensor(g, device=device))
    y_t.backward(torch.tensor(g))
    np.testing.assert_allclose(theirs.grad.numpy(), g)  # torch: the copy
    np.testing.assert_allclose(np.sum(g * y.numpy()), np.sum(ours.grad.numpy() * x),
                               rtol=1e-12)
    # and each column of the map, from unit inputs
    for i in range(3):
        e = np.zeros((1, 1, 3, 4))
        e[0, 0, i, 1] = 1
        column = F.interpolate(tt.tensor(e, device=device), scale_factor=1.2,
                               mode="bicubic").numpy()
        np.testing.assert_allclose(ours.grad.numpy()[0, 0, i, 1], np.sum(column * g[0, :1]),
                                   rtol=1e-12)


def test_bicubic_double_backward_matches_torch(device):
    """``create_graph=True``: the gradient is itself differentiable (through the taps'
    adjoint), as PyTorch's."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 4, 5))
    w = rng.standard_normal((1, 2, 7, 3))
    results = []
    for lib, make in ((tt, lambda a: tt.tensor(a, requires_grad=True, device=device)),
                      (torch, lambda a: torch.tensor(a, requires_grad=True))):
        fn = F.interpolate if lib is tt else TF.interpolate
        xs = make(x)
        y = fn(xs, size=(7, 3), mode="bicubic", align_corners=False)
        loss = (y * y * (make(w) if lib is tt else torch.tensor(w))).sum()
        (gx,) = lib.autograd.grad(loss, xs, create_graph=True)
        (gx * gx).sum().backward()
        results.append((gx, xs.grad))
    close(results[0][0], results[1][0], np.float64, "first gradient")
    close(results[0][1], results[1][1], np.float64, "gradient of the gradient")


def test_upsample_bicubic_module_matches_torch(device):
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 6)).astype(np.float32)
    for ours, theirs in [
            (nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True),
             torch.nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True)),
            (nn.Upsample(size=(5, 3), mode="bicubic"),
             torch.nn.Upsample(size=(5, 3), mode="bicubic"))]:
        assert repr(ours) == repr(theirs)
        close(ours(tt.tensor(x, device=device)), theirs(torch.tensor(x)), np.float32,
              repr(ours))


def test_bicubic_refuses_what_it_does_not_do():
    with pytest.raises(NotImplementedError, match="antialias=True.*'bicubic'"):
        F.interpolate(tt.zeros(1, 1, 4, 4), size=2, mode="bicubic", antialias=True)
    with pytest.raises(NotImplementedError, match=r"3D input .*bicubic mode needs 4D"):
        F.interpolate(tt.zeros(1, 2, 4), size=3, mode="bicubic")
    with pytest.raises(NotImplementedError):  # torch's type too
        TF.interpolate(torch.zeros(1, 2, 4), size=3, mode="bicubic")


# ----------------------------------------------------------------------------------- CTC

def ctc_case(rng, T, N, C, blank=0, impossible=False):
    """Random logits ``[T, N, C]``, padded targets ``[N, S]`` (labels avoid ``blank``; some
    repeated, one sample empty), and the lengths. ``impossible``: one sample with too few
    frames (a repeated label needs a blank between)."""
    labels = [c for c in range(C) if c != blank]
    target_lengths = [int(v) for v in rng.integers(0, max(1, T // 2), size=N)]
    target_lengths[0] = 0 if N > 1 else target_lengths[0]
    if impossible:
        target_lengths[1] = 2
    S = max(target_lengths + [1])
    targets = rng.choice(labels, size=(N, S))
    if N > 2 and S > 1:  # repeats
        targets[-1, :] = targets[-1, 0]
        target_lengths[-1] = S
    input_lengths = [int(rng.integers(max(2 * L + 1, 1), T + 1)) if 2 * L + 1 <= T else T
                     for L in target_lengths]
    input_lengths[-1] = T
    if impossible:
        targets[1, :2] = targets[1, 0]
        input_lengths[1] = 2  # needs 3 frames
    targets = np.where(np.arange(S)[None, :] < np.array(target_lengths)[:, None], targets,
                       -1)  # (padding that is no class: never read)
    return (rng.standard_normal((T, N, C)), targets, input_lengths, target_lengths)


def run_ctc(lib, logits, targets, input_lengths, target_lengths, dtype, device, *,
            concatenated=False, lengths_as_tensors=False, grad_of="logits", **kw):
    """The loss and the gradient (of ``logits`` through ``log_softmax``, or of the log-probs
    themselves) under a fixed upstream gradient."""
    if concatenated:
        targets = np.concatenate([t[:n] for t, n in zip(targets, target_lengths)])
    if lib is tt:
        make = lambda a, **k: tt.tensor(a, device=device, **k)  # noqa: E731
        fn = F.ctc_loss
    else:
        make, fn = torch.tensor, TF.ctc_loss
    leaf = make(logits.astype(dtype), requires_grad=True)
    lp = leaf.log_softmax(-1) if grad_of == "logits" else leaf
    il, tl = input_lengths, target_lengths
    if lengths_as_tensors:
        il, tl = make(np.array(il)), make(np.array(tl))
    loss = fn(lp, make(targets), il, tl, **kw)
    up = np.random.default_rng(9).standard_normal(tuple(loss.shape)).astype(dtype)
    loss.backward(make(up))
    return loss, leaf.grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("form", ["padded", "concatenated", "tensor lengths"])
def test_ctc_loss_matches_torch(device, dtype, reduction, zero_infinity, form):
    rng = np.random.default_rng([len(reduction), zero_infinity, len(form)])
    for T, N, C, blank in [(12, 5, 6, 0), (7, 3, 4, 3), (20, 4, 9, 2), (3, 2, 3, 1)]:
        case = ctc_case(rng, T, N, C, blank, impossible=zero_infinity)
        kw = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity,
                  concatenated=form == "concatenated",
                  lengths_as_tensors=form == "tensor lengths")
        for grad_of in ("logits", "log_probs"):
            ours = run_ctc(tt, *case, dtype, device, grad_of=grad_of, **kw)
            theirs = run_ctc(torch, *case, dtype, device, grad_of=grad_of, **kw)
            what = f"T={T} N={N} C={C} blank={blank} {grad_of}"
            close(ours[0], theirs[0], dtype, "loss " + what)
            close(ours[1], theirs[1], dtype, "gradient " + what)


def test_ctc_impossible_alignment_is_inf_and_zero_infinity_zeroes_it(device):
    rng = np.random.default_rng(2)
    logits, targets, il, tl = ctc_case(rng, 8, 3, 5, impossible=True)
    for zero_infinity in (False, True):
        ours = run_ctc(tt, logits, targets, il, tl, np.float64, device, reduction="none",
                       zero_infinity=zero_infinity)
        theirs = run_ctc(torch, logits, targets, il, tl, np.float64, device,
                         reduction="none", zero_infinity=zero_infinity)
        loss, grad = ours[0].numpy(), ours[1].numpy()
        if zero_infinity:
            assert loss[1] == 0 and not grad[:, 1].any()
        else:
            assert loss[1] == np.inf and np.isnan(grad[:2, 1]).all()
            assert not grad[2:, 1].any()  # (frames past the input length: 0, as torch)
        assert np.isfinite(loss[[0, 2]]).all() and np.isfinite(grad[:, [0, 2]]).all()
        close(ours[0], theirs[0], np.float64, "loss")
        close(ours[1], theirs[1], np.float64, "gradient", equal_nan=True)


def test_ctc_no_frames_and_empty_targets_match_torch(device):
    """A sample with 0 frames: loss 0 for an empty target, inf otherwise (as torch)."""
    logits = np.random.default_rng(1).standard_normal((6, 3, 5))
    targets = np.array([[1, 2, 2], [3, 0, 0], [1, 1, 1]])
    for lengths in ([0, 0, 3], [6, 6, 5]):
        args = (logits, targets, lengths, [0, 1, 3], np.float64, device)
        ours = run_ctc(tt, *args, reduction="none")
        theirs = run_ctc(torch, *args, reduction="none")
        close(ours[0], theirs[0], np.float64, f"loss {lengths}")
        close(ours[1], theirs[1], np.float64, f"gradient {lengths}", equal_nan=True)


@pytest.mark.parametrize("lengths", ["tuples", "0-d tensors", "1-element tensors"])
def test_ctc_unbatched_matches_torch(device, lengths):
    rng = np.random.default_rng(8)
    logits, target = rng.standard_normal((9, 5)), np.array([2, 2, 4, 1])
    for reduction in ("none", "mean", "sum"):
        results = []
        for lib, fn in ((tt, F.ctc_loss), (torch, TF.ctc_loss)):
            make = ((lambda a, **k: tt.tensor(a, device=device, **k)) if lib is tt  # noqa: E731
                    else torch.tensor)
            x = make(logits, requires_grad=True)
            if lengths == "tuples":
                il, tl = (9,), (4,)
            elif lengths == "0-d tensors":
                il, tl = make(np.array(9)), make(np.array(4))
            else:
                il, tl = make(np.array([9])), make(np.array([4]))
            loss = fn(x.log_softmax(-1), make(target), il, tl, reduction=reduction)
            loss.backward()
            results.append((loss, x.grad))
        assert tuple(results[0][0].shape) == tuple(results[1][0].shape) == ()
        close(results[0][0], results[1][0], np.float64, reduction)
        close(results[0][1], results[1][1], np.float64, reduction)


def test_ctc_gradient_matches_finite_differences(device):
    """The gradient of the loss of ``log_softmax(z)`` with respect to ``z`` against central
    differences (PyTorch's gradient formula assumes normalised log-probs: through the
    ``log_softmax`` it is the true one)."""
    rng = np.random.default_rng(11)
    logits, targets, il, tl = ctc_case(rng, 7, 3, 4)
    targets = np.where(targets < 0, 0, targets)
    weights = rng.standard_normal(3)

    def loss_of(z, requires_grad=False):
        x = tt.tensor(z, requires_grad=requires_grad, device=device)
        loss = F.ctc_loss(x.log_softmax(-1), tt.tensor(targets, device=device), il, tl,
                          reduction="none")
        return x, (loss * tt.tensor(weights, device=device)).sum()

    x, loss = loss_of(logits, True)
    loss.backward()
    h, numeric = 1e-6, np.zeros_like(logits)
    for i in np.ndindex(*logits.shape):
        up, down = logits.copy(), logits.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (loss_of(up)[1].item() - loss_of(down)[1].item()) / (2 * h)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_ctc_loss_module_matches_torch(device):
    rng = np.random.default_rng(12)
    logits, targets, il, tl = ctc_case(rng, 10, 4, 6, blank=5)
    targets = np.where(targets < 0, 0, targets)
    ours = nn.CTCLoss(blank=5, zero_infinity=True)
    theirs = torch.nn.CTCLoss(blank=5, zero_infinity=True)
    assert repr(ours) == repr(theirs) == "CTCLoss()"
    lp = torch.tensor(logits).log_softmax(-1)
    close(ours(tt.tensor(lp.numpy(), device=device), tt.tensor(targets, device=device), il, tl),
          theirs(lp, torch.tensor(targets), il, tl), np.float64, "module")
    assert isinstance(ours, nn.Module) and ours.reduction == "mean"


def test_ctc_gradient_is_not_differentiable_again():
    lp = tt.randn(5, 2, 4, requires_grad=True)
    loss = F.ctc_loss(lp.log_softmax(-1), tt.tensor([[1, 2], [3, 3]]), (5, 5), (2, 2))
    with pytest.raises(NotImplementedError, match="CTCLossFunction"):  # (torch: at the next)
        tt.autograd.grad(loss, lp, create_graph=True)


def _lp(shape=(6, 2, 5)):
    return np.log(np.full(shape, 1 / shape[-1]))


CTC_ERRORS = [  # (log_probs shape, targets, input_lengths, target_lengths, keywords, message)
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [3, 1], dict(reduction="bad"),
     "bad is not a valid value for reduction"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 7], [3, 1], {},
     "Expected input_lengths to have value at most 6, but got value 7"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, -1], [3, 1], {},
     "Expected input_lengths to have value at least 0, but got value -1"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [3, -1], {},
     "Expected target_lengths to have value at least 0, but got value -1"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [4, 1], {},
     "Expected tensor to have size at least 4 at dimension 1, but got size 3"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5, 4], [3, 1], {},
     "input_lengths must be of size batch_size"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [3, 1, 2], {},
     "target_lengths must be of size batch_size"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [3, 1], dict(blank=5),
     "blank must be in label range"),
    ((6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [3, 1], dict(blank=-1),
     "blank must be in label range"),
    ((6, 2, 5), [[1, 2, 2]], [6, 5], [3, 1], {},
     "Expected tensor to have size 2 at dimension 0, but got size 1"),
    ((6, 2, 5), [1, 2, 2, 3], [6, 5], [3, 2], {},
     "Expected tensor to have size 5 at dimension 0, but got size 4"),
    ((1, 6, 2, 5), [[1, 2, 2], [3, 0, 0]], [6, 5], [3, 1], {},
     "Expected 3-dimensional tensor, but got 5-dimensional tensor"),  # (torch's count)
    ((6, 2, 5), [[[1, 2, 2], [3, 0, 0]]], [6, 5], [3, 1], {},
     "Expected 1 to 2 dimensions, but got 3-dimensional tensor"),
    ((0, 2, 5), [[1, 2, 2], [3, 0, 0]], [0, 0], [3, 1], {},
     "log_probs tensor must not be empty"),
]


@pytest.mark.parametrize("shape,targets,il,tl,kw,message", CTC_ERRORS,
                         ids=[e[-1][:40] for e in CTC_ERRORS])
def test_ctc_bad_input_raises_torchs_error(shape, targets, il, tl, kw, message):
    lp = _lp(shape)
    with pytest.raises(Exception) as theirs:
        TF.ctc_loss(torch.tensor(lp), torch.tensor(targets), il, tl, **kw)
    assert message in str(theirs.value)  # (the reference still says this)
    with pytest.raises(type(theirs.value), match=message):
        F.ctc_loss(tt.tensor(lp), tt.tensor(targets), il, tl, **kw)


def test_ctc_bad_argument_types_raise_torchs_types():
    lp, tg = _lp(), [[1, 2, 2], [3, 0, 0]]
    cases = [  # (input_lengths, target_lengths, log_probs dtype, message of ours)
        (np.array([6.0, 5.0]), np.array([3, 1]), None, "input_lengths must be integral"),
        (np.array([6, 5]), np.array([3.0, 1.0]), None, "target_lengths must be integral"),
        (np.array([6, 5]), [3, 1], None, "both be Tensors"),
        ([6, 5.5], [3, 1], None, "'input_lengths' must be a tuple of ints"),
        (6, 3, None, "'input_lengths' must be a tuple of ints"),
        ([6, 5], [3, 1], np.int64, "not implemented for 'Long'"),
        ([6, 5], [3, 1], np.float16, "not implemented for 'Half'"),
    ]
    for il, tl, dtype, message in cases:
        args = []
        for lib in (torch, tt):
            make = torch.tensor if lib is torch else tt.tensor
            x = lp.astype(dtype) if dtype else lp
            args.append([make(x), make(np.array(tg))]
                        + [make(v) if isinstance(v, np.ndarray) else v for v in (il, tl)])
        with pytest.raises(Exception) as theirs:
            TF.ctc_loss(*args[0])
        with pytest.raises(type(theirs.value), match=message):
            F.ctc_loss(*args[1])
    with pytest.raises(IndexError, match="target 7 is out of bounds for 5 classes"):
        # (torch reads past the class axis: no error, an undefined value)
        F.ctc_loss(tt.tensor(lp), tt.tensor([[1, 7, 2], [3, 0, 0]]), [6, 5], [3, 1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ctc_long_sequences_stay_finite_and_match_torch(device, dtype):
    """150 frames: path probabilities far below the smallest float (log space keeps them).
    In float32 the loss agrees to ~1e-7 relative; the gradients (probabilities, at most 1) to
    ~2e-4, PyTorch's own float32 error against float64."""
    rng = np.random.default_rng(13)
    T, N, C, S = 150, 6, 20, 40
    logits = 3 * rng.standard_normal((T, N, C))
    targets = rng.integers(1, C, size=(N, S))
    tl = [int(v) for v in rng.integers(10, S + 1, size=N)]
    il = [int(v) for v in rng.integers(100, T + 1, size=N)]
    ours = run_ctc(tt, logits, targets, il, tl, dtype, device, reduction="sum")
    theirs = run_ctc(torch, logits, targets, il, tl, dtype, device, reduction="sum")
    assert np.isfinite(ours[0].item()) and ours[0].item() > 1000
    np.testing.assert_allclose(ours[0].item(), theirs[0].item(), rtol=TOL[dtype])
    atol = 1e-11 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), rtol=0, atol=atol)


def test_ctc_trains_a_small_model_as_torch(device):
    """The way programs use it: a per-frame classifier on ``[N, T, F]`` features,
    ``log_softmax`` then ``permute`` to ``[T, N, C]`` (a non-contiguous view), ``nn.CTCLoss``
    with tensor lengths, SGD: the same losses and weights as PyTorch, step after step."""
    rng = np.random.default_rng(14)
    N, T, Fe, C = 3, 10, 6, 5
    x = rng.standard_normal((N, T, Fe))
    targets = np.array([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 4, 0]])
    il, tl = np.array([10, 8, 9]), np.array([4, 2, 3])
    w, b = 0.3 * rng.standard_normal((C, Fe)), 0.1 * rng.standard_normal(C)
    losses = {}
    for lib in (tt, torch):
        make = ((lambda a: tt.tensor(a, device=device)) if lib is tt  # noqa: E731
                else torch.tensor)
        model = (nn.Linear(Fe, C) if lib is tt else torch.nn.Linear(Fe, C)).double()
        if lib is tt:
            model = model.to(device)
        with lib.no_grad():
            model.weight.copy_(make(w))
            model.bias.copy_(make(b))
        loss_fn = (nn.CTCLoss if lib is tt else torch.nn.CTCLoss)(blank=0)
        opt = (tt.optim.SGD if lib is tt else torch.optim.SGD)(model.parameters(), lr=0.5)
        losses[lib] = []
        for _ in range(5):
            opt.zero_grad()
            log_probs = model(make(x)).log_softmax(2).permute(1, 0, 2)
            loss = loss_fn(log_probs, make(targets), make(il), make(tl))
            loss.backward()
            opt.step()
            losses[lib].append(loss.item())
        losses[lib].append(model.weight.detach().cpu().numpy().copy())
    np.testing.assert_allclose(losses[tt][:5], losses[torch][:5], rtol=1e-12)
    assert losses[tt][4] < losses[tt][0]  # (it learns)
    np.testing.assert_allclose(losses[tt][5], losses[torch][5], rtol=1e-10, atol=1e-12)
