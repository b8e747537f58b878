"""Losses as PyTorch 2.13 has them beyond the everyday ones: the legacy ``size_average`` /
``reduce`` arguments of every loss (function and module) that takes them, with PyTorch's
mapping to ``reduction`` and its warning; ``cosine_embedding_loss``, ``margin_ranking_loss``,
``hinge_embedding_loss`` and ``triplet_margin_loss`` (values, gradients, reductions, errors);
and the warnings of ``kl_div(reduction="mean")`` and of ``softmax`` / ``log_softmax`` /
``softmin`` without ``dim``. Each against torch."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytrain as tt
import tinytrain.nn.functional as F

RNG = np.random.default_rng(6)
REDUCTIONS = ["mean", "sum", "none"]
LEGACY = [(s, r) for s, r in itertools.product([None, True, False], repeat=2)
          if (s, r) != (None, None)]
LEGACY_MESSAGE = "size_average and reduce args will be deprecated, please use reduction='{}'"


def legacy_string(size_average, reduce):
    """PyTorch's own rule, as the reference."""
    return torch.nn._reduction.legacy_get_string(size_average, reduce, emit_warning=False)


# ----------------------------------------------------------- the losses' inputs, by name

def _probs(*shape):
    return RNG.uniform(0.05, 0.95, shape)


def loss_inputs(name):
    """Arrays for loss ``name``: the inputs that get gradients first, then the others."""
    x, y = RNG.standard_normal((5, 4)), RNG.standard_normal((5, 4))
    return {
        "nll_loss": ([np.log(_probs(5, 4))], [np.array([0, 3, 1, 3, 2])]),
        "cross_entropy": ([x], [np.array([0, 3, 1, 3, 2])]),
        "binary_cross_entropy": ([_probs(5, 4)], [_probs(5, 4)]),
        "binary_cross_entropy_with_logits": ([x], [_probs(5, 4)]),
        "mse_loss": ([x, y], []),
        "l1_loss": ([x, y], []),
        "smooth_l1_loss": ([x, y], []),
        "kl_div": ([np.log(_probs(5, 4))], [_probs(5, 4)]),
        "cosine_embedding_loss": ([x, y], [np.array([1, -1, 1, -1, 1])]),
        "margin_ranking_loss": ([x[:, 0], y[:, 0]], [np.array([1.0, -1, 1, -1, 1])]),
        "hinge_embedding_loss": ([x], [np.array([1.0, -1, -1, 1])]),
        "triplet_margin_loss": ([x, y, RNG.standard_normal((5, 4))], []),
    }[name]


LEGACY_LOSSES = ["nll_loss", "cross_entropy", "binary_cross_entropy",
                 "binary_cross_entropy_with_logits", "mse_loss", "l1_loss", "smooth_l1_loss",
                 "kl_div", "cosine_embedding_loss", "margin_ranking_loss",
                 "hinge_embedding_loss", "triplet_margin_loss"]


def run_both(name, kwargs, grad=True):
    """``F.<name>`` of both libraries on the same inputs: (ours, theirs, our leaves, theirs)."""
    leaves, others = loss_inputs(name)
    ours = [tt.tensor(a, requires_grad=grad) for a in leaves]
    theirs = [torch.tensor(a, requires_grad=grad) for a in leaves]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = getattr(F, name)(*ours, *[tt.tensor(a) for a in others], **kwargs)
        ref = getattr(TF, name)(*theirs, *[torch.tensor(a) for a in others], **kwargs)
    return out, ref, ours, theirs


def assert_same(out, ref, ours, theirs, rtol=1e-10, atol=1e-12):
    """Same values and dtype as torch, and the same gradients for a random upstream one."""
    assert out.shape == tuple(ref.shape)
    assert str(out.dtype) == str(ref.dtype).removeprefix("torch.")
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = RNG.standard_normal(tuple(ref.shape))
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


# ------------------------------------------------------------ size_average / reduce

@pytest.mark.parametrize("name", LEGACY_LOSSES)
@pytest.mark.parametrize("size_average,reduce", LEGACY)
def test_legacy_arguments_give_pytorchs_reduction_values_and_warning(name, size_average,
                                                                     reduce):
    kwargs = {"size_average": size_average, "reduce": reduce}
    out, ref, ours, theirs = run_both(name, kwargs)
    assert_same(out, ref, ours, theirs)
    expected = legacy_string(size_average, reduce)
    leaves, others = loss_inputs(name)
    with pytest.warns(UserWarning, match=LEGACY_MESSAGE.format(expected)) as record:
        getattr(F, name)(*[tt.tensor(a) for a in leaves + others], **kwargs)
    assert record[0].filename == __file__  # (the caller's line, not tinytrain's)
    if not (name == "kl_div" and expected == "mean"):  # (which warns for itself)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # reduction= alone: no warning
            getattr(F, name)(*[tt.tensor(a) for a in leaves + others], reduction=expected)


@pytest.mark.parametrize("name", ["mse_loss", "nll_loss", "kl_div"])
def test_legacy_arguments_win_over_reduction_as_in_pytorch(name):
    kwargs = {"size_average": False, "reduction": "none"}
    out, ref, ours, theirs = run_both(name, kwargs)
    assert out.ndim == 0
    assert_same(out, ref, ours, theirs)


def test_kl_div_batchmean_still_divides_after_legacy_arguments_as_in_pytorch():
    for kwargs in ({"size_average": False, "reduction": "batchmean"},
                   {"reduce": False, "reduction": "batchmean"}):
        out, ref, ours, theirs = run_both("kl_div", kwargs)
        assert_same(out, ref, ours, theirs)


MODULES = {
    "NLLLoss": {}, "CrossEntropyLoss": {}, "BCELoss": {}, "BCEWithLogitsLoss": {},
    "MSELoss": {}, "L1Loss": {}, "SmoothL1Loss": {"beta": 0.5}, "KLDivLoss": {},
    "CosineEmbeddingLoss": {"margin": 0.1}, "MarginRankingLoss": {"margin": 0.2},
    "HingeEmbeddingLoss": {"margin": 0.5}, "TripletMarginLoss": {"margin": 0.5},
}
MODULE_INPUTS = dict(zip(MODULES, LEGACY_LOSSES, strict=True))


@pytest.mark.parametrize("cls", list(MODULES))
@pytest.mark.parametrize("size_average,reduce", LEGACY)
def test_loss_modules_take_the_legacy_arguments_as_pytorch(cls, size_average, reduce):
    kwargs = {"size_average": size_average, "reduce": reduce, **MODULES[cls]}
    expected = legacy_string(size_average, reduce)
    with pytest.warns(UserWarning, match=LEGACY_MESSAGE.format(expected)) as record:
        ours = getattr(tt.nn, cls)(**kwargs)
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn, cls)(**kwargs)
    assert ours.reduction == theirs.reduction == expected
    leaves, others = loss_inputs(MODULE_INPUTS[cls])
    a = [tt.tensor(v, requires_grad=True) for v in leaves]
    b = [torch.tensor(v, requires_grad=True) for v in leaves]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (KLDivLoss's "mean" warns on every call)
        out = ours(*a, *[tt.tensor(v) for v in others])
        ref = theirs(*b, *[torch.tensor(v) for v in others])
    assert_same(out, ref, a, b)


def test_loss_modules_keep_pytorchs_argument_order():
    # PyTorch's NLLLoss / CrossEntropyLoss take (weight, size_average, ignore_index, reduce,
    # reduction); positional calls must land in the same places
    w = np.array([1.0, 2.0, 0.5, 1.0])
    ours, theirs = tt.nn.CrossEntropyLoss(tt.tensor(w), None, 3), torch.nn.CrossEntropyLoss(
        torch.tensor(w), None, 3)
    assert ours.ignore_index == theirs.ignore_index == 3
    x, y = loss_inputs("cross_entropy")
    np.testing.assert_allclose(ours(tt.tensor(x[0]), tt.tensor(y[0])).item(),
                               theirs(torch.tensor(x[0]), torch.tensor(y[0])).item(),
                               rtol=1e-12)
    assert tt.nn.HuberLoss("sum").reduction == torch.nn.HuberLoss("sum").reduction == "sum"


def test_a_reduction_string_in_the_legacy_place_is_refused_with_the_fix():
    x = tt.tensor(RNG.standard_normal(3))
    # PyTorch's third argument of mse_loss is size_average: "sum" there would be taken as a
    # true size_average, and quietly give the mean
    with pytest.raises(TypeError, match=r"mse_loss: size_average must be a bool or None, got "
                                        r"the string 'sum'; pass the reduction by keyword: "
                                        r"reduction='sum'"):
        F.mse_loss(x, x, "sum")
    with pytest.raises(TypeError, match=r"MSELoss: size_average .* reduction='none'"):
        tt.nn.MSELoss("none")
    with pytest.raises(TypeError, match=r"reduce must be a bool or None"):
        F.l1_loss(x, x, None, "sum")


# ------------------------------------------------------------ the four new losses

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.5])
def test_cosine_embedding_loss_matches_torch(reduction, margin):
    x1, x2 = RNG.standard_normal((6, 5)), RNG.standard_normal((6, 5))
    x2[1] = -0.5 * x1[1]  # cos = -1
    x2[2] = 0.0  # a zero vector: PyTorch's 1e-12 keeps it finite
    target = np.array([1, -1, -1, 1, 0, 2])  # other targets count for nothing
    a, b = [tt.tensor(v, requires_grad=True) for v in (x1, x2)]
    c, d = [torch.tensor(v, requires_grad=True) for v in (x1, x2)]
    out = F.cosine_embedding_loss(a, b, tt.tensor(target), margin, reduction=reduction)
    ref = TF.cosine_embedding_loss(c, d, torch.tensor(target), margin, reduction=reduction)
    # (the zero vector's gradient is ~1e6, through 1 / sqrt(1e-12): rounding differs by 1e-9)
    assert_same(out, ref, [a, b], [c, d], rtol=1e-8)
    module = tt.nn.CosineEmbeddingLoss(margin, reduction=reduction)
    np.testing.assert_allclose(module(a, b, tt.tensor(target)).detach().numpy(),
                               ref.detach().numpy(), rtol=1e-12)


def test_cosine_embedding_loss_unbatched_and_float32():
    x1, x2 = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    for target in (1, -1):
        a, b = [tt.tensor(v, requires_grad=True) for v in (x1, x2)]
        c, d = [torch.tensor(v, requires_grad=True) for v in (x1, x2)]
        out = F.cosine_embedding_loss(a, b, tt.tensor(target), margin=-0.2)
        ref = TF.cosine_embedding_loss(c, d, torch.tensor(target), margin=-0.2)
        assert_same(out, ref, [a, b], [c, d], rtol=1e-5, atol=1e-6)


def _both_raise(fn, error, match):
    """``fn(F)`` raises ``error`` (PyTorch's type) matching ``match``, with both libraries."""
    with pytest.raises(error, match=match):
        fn(F, tt)
    with pytest.raises(error):
        fn(TF, torch)


def test_cosine_embedding_loss_shape_errors_as_pytorch():
    x = RNG.standard_normal((4, 3))

    def call(x1, x2, t):
        return lambda f, lib: f.cosine_embedding_loss(lib.tensor(x1), lib.tensor(x2),
                                                      lib.tensor(t))

    _both_raise(call(x, x, np.ones((2, 2))), RuntimeError,
                "0D or 1D target tensor expected, multi-target not supported")
    _both_raise(call(x[0], x[0], np.ones(1)), RuntimeError,
                r"1D target tensor expects 2D input tensors, but found inputs with sizes "
                r"\[3\] and \[3\]")
    _both_raise(call(x[None], x[None], np.ones(4)), RuntimeError,
                r"1D target tensor expects 2D input tensors")
    _both_raise(call(x, x, np.ones(3)), RuntimeError, "cannot be broadcast|match")
    _both_raise(call(x, x[:3], np.ones(4)), RuntimeError, "cannot be broadcast|match")
    with pytest.raises(TypeError, match="argument 'target' must be a Tensor, not list"):
        F.cosine_embedding_loss(tt.tensor(x), tt.tensor(x), [1, 1, 1, 1])
    with pytest.raises(ValueError, match="unknown reduction 'avg'"):
        F.cosine_embedding_loss(tt.tensor(x), tt.tensor(x), tt.ones(4), reduction="avg")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking_loss_matches_torch(reduction, margin):
    x1, x2 = RNG.standard_normal(7), RNG.standard_normal(7)
    x2[0] = x1[0]  # a tie: the clamp at 0 passes the gradient, as PyTorch's
    target = np.array([1.0, 1, -1, -1, 1, -1, 0])
    a, b = [tt.tensor(v, requires_grad=True) for v in (x1, x2)]
    c, d = [torch.tensor(v, requires_grad=True) for v in (x1, x2)]
    out = F.margin_ranking_loss(a, b, tt.tensor(target), margin, reduction=reduction)
    ref = TF.margin_ranking_loss(c, d, torch.tensor(target), margin, reduction=reduction)
    assert_same(out, ref, [a, b], [c, d])
    # integer targets, [N, 1] inputs, the module
    t_int = np.array([[1], [-1], [1], [-1], [1], [-1], [1]])
    a, b = [tt.tensor(v[:, None], requires_grad=True) for v in (x1, x2)]
    c, d = [torch.tensor(v[:, None], requires_grad=True) for v in (x1, x2)]
    out = tt.nn.MarginRankingLoss(margin, reduction=reduction)(a, b, tt.tensor(t_int))
    ref = torch.nn.MarginRankingLoss(margin, reduction=reduction)(c, d, torch.tensor(t_int))
    assert_same(out, ref, [a, b], [c, d])


def test_margin_ranking_loss_errors_as_pytorch():
    x = RNG.standard_normal(4)
    _both_raise(lambda f, lib: f.margin_ranking_loss(lib.tensor(x), lib.tensor(x[None]),
                                                     lib.tensor(x)),
                RuntimeError, r"margin_ranking_loss : All input tensors should have same "
                              r"dimension but got sizes: input1: \(4,\), input2: \(1, 4\), "
                              r"target: \(4,\)")
    _both_raise(lambda f, lib: f.margin_ranking_loss(lib.tensor(x), lib.tensor(x),
                                                     lib.tensor(x[:3])),
                RuntimeError, "cannot be broadcast|match")
    with pytest.raises(TypeError, match="argument 'target' must be a Tensor, not int"):
        F.margin_ranking_loss(tt.tensor(x), tt.tensor(x), 1)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [1.0, 0.25])
def test_hinge_embedding_loss_matches_torch(reduction, margin):
    x = RNG.standard_normal((3, 5))
    x[0, 0] = margin  # at the hinge
    target = np.array([[1.0, -1, -1, 1, 0], [-1, -1, 1, 1, 2], [1, 1, -1, -1, -1]])
    a, c = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = F.hinge_embedding_loss(a, tt.tensor(target), margin, reduction=reduction)
    ref = TF.hinge_embedding_loss(c, torch.tensor(target), margin, reduction=reduction)
    assert_same(out, ref, [a], [c])
    # a target that broadcasts (PyTorch's formula broadcasts too), and the module
    a, c = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = tt.nn.HingeEmbeddingLoss(margin, reduction=reduction)(a, tt.tensor(target[:1]))
    ref = torch.nn.HingeEmbeddingLoss(margin, reduction=reduction)(c, torch.tensor(target[:1]))
    assert_same(out, ref, [a], [c])


def test_hinge_embedding_loss_shape_error_as_pytorch():
    _both_raise(lambda f, lib: f.hinge_embedding_loss(lib.ones(4), lib.ones(3)), RuntimeError,
                "cannot be broadcast|match")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2, False), (2, True), (1, True), (3, False),
                                    (float("inf"), True)])
def test_triplet_margin_loss_matches_torch(reduction, p, swap):
    an, po, ne = (RNG.standard_normal((6, 4)) for _ in range(3))
    ne[0] = an[0] + 0.01  # swapped distance smaller / larger in different rows
    po[1] = ne[1] + 0.01
    ours = [tt.tensor(v, requires_grad=True) for v in (an, po, ne)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (an, po, ne)]
    kwargs = {"margin": 0.7, "p": p, "eps": 1e-6, "swap": swap, "reduction": reduction}
    out = F.triplet_margin_loss(*ours, **kwargs)
    ref = TF.triplet_margin_loss(*theirs, **kwargs)
    assert_same(out, ref, ours, theirs)
    ours = [tt.tensor(v, requires_grad=True) for v in (an, po, ne)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (an, po, ne)]
    out = tt.nn.TripletMarginLoss(**kwargs)(*ours)
    ref = torch.nn.TripletMarginLoss(**kwargs)(*theirs)
    assert_same(out, ref, ours, theirs)


def test_triplet_margin_loss_unbatched_and_float32():
    an, po, ne = (RNG.standard_normal(5).astype(np.float32) for _ in range(3))
    ours = [tt.tensor(v, requires_grad=True) for v in (an, po, ne)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (an, po, ne)]
    out, ref = F.triplet_margin_loss(*ours, margin=5.0), TF.triplet_margin_loss(*theirs,
                                                                                margin=5.0)
    assert_same(out, ref, ours, theirs, rtol=1e-5, atol=1e-6)


def test_triplet_margin_loss_errors_as_pytorch():
    x = RNG.standard_normal((4, 3))
    _both_raise(lambda f, lib: f.triplet_margin_loss(lib.tensor(x), lib.tensor(x),
                                                     lib.tensor(x[0])),
                RuntimeError, "The anchor, positive, and negative tensors are expected to have "
                              "the same number of dimensions, but got: anchor 2D, positive 2D, "
                              "and negative 1D inputs")
    _both_raise(lambda f, lib: f.triplet_margin_loss(lib.tensor(x), lib.tensor(x),
                                                     lib.tensor(x[:3])),
                RuntimeError, "cannot be broadcast|match")
    for margin in (0, -1.0):
        _both_raise(lambda f, lib, m=margin: f.triplet_margin_loss(
            lib.tensor(x), lib.tensor(x), lib.tensor(x), margin=m),
            ValueError, f"margin must be greater than 0, got {margin}")
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater "
                                         "than 0, got 0 instead"):
        tt.nn.TripletMarginLoss(margin=0)
    with pytest.raises(TypeError, match="argument 'negative' must be a Tensor"):
        F.triplet_margin_loss(tt.tensor(x), tt.tensor(x), x)


def test_the_new_losses_train_a_siamese_step_like_torch():
    """One SGD step of a shared encoder under the four losses together, as both libraries."""
    w0 = RNG.standard_normal((4, 3)) * 0.5
    a, b, c = (RNG.standard_normal((8, 4)) for _ in range(3))
    y = np.where(RNG.random(8) < 0.5, 1.0, -1.0)
    results = []
    for lib in (tt, torch):
        f = F if lib is tt else TF
        w = lib.tensor(w0, requires_grad=True)
        ea, eb, ec = (lib.tensor(v) @ w for v in (a, b, c))
        loss = (f.cosine_embedding_loss(ea, eb, lib.tensor(y), 0.1)
                + f.triplet_margin_loss(ea, eb, ec, swap=True)
                + f.margin_ranking_loss(ea.sum(1), eb.sum(1), lib.tensor(y), 0.5)
                + f.hinge_embedding_loss((ea - eb).norm(dim=1), lib.tensor(y)))
        loss.backward()
        results.append((loss.item(), w.grad.numpy()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)


def test_the_new_names_are_public():
    for name in ("cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss",
                 "triplet_margin_loss"):
        assert name in F.__all__
    for name in ("CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
                 "TripletMarginLoss"):
        assert name in tt.nn.__all__
        assert repr(getattr(tt.nn, name)()) == repr(getattr(torch.nn, name)())


# ------------------------------------------------------------ warnings PyTorch gives

def test_kl_div_mean_warns_as_pytorch():
    x, t = tt.tensor(np.log(_probs(2, 3))), tt.tensor(_probs(2, 3))
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss by both the "
                                         "batch size and the support size") as record:
        F.kl_div(x, t)
    assert record[0].filename == __file__
    with pytest.warns(UserWarning) as theirs:
        TF.kl_div(torch.tensor(np.log(_probs(2, 3))), torch.tensor(_probs(2, 3)))
    assert str(record[0].message) == str(theirs[0].message)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        tt.nn.KLDivLoss()(x, t)


SOFTMAX_SHAPES = [(), (5,), (3, 4), (2, 3, 4), (2, 3, 4, 5)]


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
@pytest.mark.parametrize("name,cls", [("softmax", "Softmax"), ("log_softmax", "LogSoftmax"),
                                      ("softmin", "Softmin")])
def test_softmax_family_without_dim_warns_at_the_callers_line_and_picks_pytorchs_dim(
        shape, name, cls):
    x = RNG.standard_normal(shape)
    a, c = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    message = (f"Implicit dimension choice for {name} has been deprecated. Change the call to "
               f"include dim=X as an argument.")
    with pytest.warns(UserWarning, match=message) as record:
        out = getattr(F, name)(a)
    with pytest.warns(UserWarning) as theirs:
        ref = getattr(TF, name)(c)
    assert str(record[0].message) == str(theirs[0].message)
    assert_same(out, ref, [a], [c])
    # the module too, its warning pointing at this line rather than into tinytrain
    with pytest.warns(UserWarning, match=message) as record:
        out = getattr(tt.nn, cls)()(tt.tensor(x))
    assert [r.filename for r in record] == [__file__]
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12)


def test_softmax_family_takes_pytorchs_signature():
    x = RNG.standard_normal((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (with dim: no warning)
        for name in ("softmax", "log_softmax", "softmin"):
            # PyTorch's third positional parameter is _stacklevel; dtype comes after it
            out = getattr(F, name)(input=tt.tensor(x), dim=1, _stacklevel=5, dtype=tt.float32)
            ref = getattr(TF, name)(input=torch.tensor(x), dim=1, _stacklevel=5,
                                    dtype=torch.float32)
            assert out.dtype == tt.float32
            np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
