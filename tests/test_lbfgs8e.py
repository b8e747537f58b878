"""``tt.optim.LBFGS`` against PyTorch 2.13's ``torch.optim.LBFGS``, in float64 from the same
initial weights: parameters, losses and the state's counters after each ``step(closure)`` on
the Rosenbrock function (fixed step and strong-Wolfe line search, a history that wraps),
least-squares and logistic regression through ``nn.Linear``, pytorch/examples'
``time_sequence_prediction`` (two LSTMCells on sine waves, lr=0.8) made tiny, a
neural-style-transfer loop that optimises an input image, a ``max_eval`` limit, parameters
without gradients, a state-dict round trip mid-run (ours and torch's), and PyTorch's errors.

The two agree to rounding: PyTorch's ``add_(alpha=)`` and its dot products round a little
differently (a fused multiply-add), so long runs of an ill-conditioned problem drift apart;
the runs here are short enough to agree to ~1e-10."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F
from tinytrain.tensor import ShapeError

TOL = dict(rtol=1e-10, atol=1e-12)
pytestmark = pytest.mark.usefixtures("torch_single_thread")  # (tiny tensors)


def leaves(device, *arrays):
    """The same float64 arrays as tinytrain leaves (on ``device``) and torch leaves."""
    arrays = [np.asarray(a, np.float64) for a in arrays]
    return ([tt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def twin_module(ours, theirs, device="cpu", seed=0):
    """``ours`` with ``theirs``'s float64 weights (reset from ``seed``: the runs do not depend
    on the tests' order), loaded through the state dict."""
    torch.manual_seed(seed)
    for module in theirs.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    theirs.double()
    ours.load_state_dict({k: tt.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours.double().to(device), theirs


def closures(opt, topt, loss_fn, tloss_fn):
    """PyTorch's closure for each optimizer: zero the gradients, the loss, backward."""
    calls = [0, 0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    def tclosure():
        calls[1] += 1
        topt.zero_grad()
        loss = tloss_fn()
        loss.backward()
        return loss

    return closure, tclosure, calls


def assert_same(ours, theirs, tol=TOL):
    for p, t in zip(ours, theirs, strict=True):
        assert p.dtype == np.float64 and p.shape == tuple(t.shape)
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), **tol)


def assert_same_state(opt, topt):
    """The counters and the history's length, as torch's."""
    (state,), (tstate,) = opt.state.values(), topt.state.values()
    assert set(state) == set(tstate)
    for key in ("func_evals", "n_iter"):
        assert state[key] == tstate[key], key
    assert len(state["old_dirs"]) == len(tstate["old_dirs"])
    np.testing.assert_allclose(tt.backend.to_device(state["d"], "cpu"), tstate["d"].numpy(),
                               **TOL)


def run(opt, topt, closure, tclosure, ours, theirs, steps, tol=TOL):
    """``steps`` steps of both; after each, the returned losses and the parameters agree."""
    for _ in range(steps):
        loss, tloss = opt.step(closure), topt.step(tclosure)
        assert isinstance(loss, tt.Tensor)  # the closure's own first loss, as torch's
        np.testing.assert_allclose(loss.item(), tloss.item(), **tol)
        assert_same(ours, theirs, tol)


def rosenbrock(x):
    """(1 - x0)^2 + 100 (x1 - x0^2)^2 of a [2] vector (either library)."""
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_rosenbrock_as_torch_with_a_history_that_wraps(device, line_search_fn):
    (x,), (tx,) = leaves(device, [-1.5, 2.0])
    config = dict(max_iter=3, history_size=3, line_search_fn=line_search_fn)
    opt, topt = tt.optim.LBFGS([x], **config), torch.optim.LBFGS([tx], **config)
    closure, tclosure, calls = closures(opt, topt, lambda: rosenbrock(x), lambda: rosenbrock(tx))
    run(opt, topt, closure, tclosure, [x], [tx], steps=6)
    assert_same_state(opt, topt)
    assert opt.state[x]["n_iter"] > 4 and len(opt.state[x]["old_dirs"]) == 3  # (wrapped)
    assert calls[0] == calls[1]
    assert rosenbrock(tx).item() < 6  # (it descends: from 12.5)


def test_defaults_and_groups_as_torch():
    (x,), (tx,) = leaves("cpu", [1.0, 2.0])
    opt, topt = tt.optim.LBFGS([x]), torch.optim.LBFGS([tx])
    group, tgroup = opt.param_groups[0], topt.param_groups[0]
    assert {k: v for k, v in group.items() if k != "params"} == {
        k: v for k, v in tgroup.items() if k != "params"}
    assert group["max_eval"] == 25 and opt.defaults == topt.defaults
    assert tt.optim.LBFGS([x], max_iter=7).defaults["max_eval"] == 8  # max_iter * 5 // 4
    assert repr(opt) == repr(topt).replace("    decoupled_weight_decay: False\n", "")


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_least_squares_through_linear(device, line_search_fn):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((32, 5)), rng.standard_normal((32, 2))
    model, tmodel = twin_module(nn.Linear(5, 2), torch.nn.Linear(5, 2), device)
    opt = tt.optim.LBFGS(model.parameters(), line_search_fn=line_search_fn)
    topt = torch.optim.LBFGS(tmodel.parameters(), line_search_fn=line_search_fn)
    x, y = tt.tensor(X, device=device), tt.tensor(Y, device=device)
    closure, tclosure, calls = closures(
        opt, topt, lambda: F.mse_loss(model(x), y),
        lambda: torch.nn.functional.mse_loss(tmodel(torch.tensor(X)), torch.tensor(Y)))
    run(opt, topt, closure, tclosure, list(model.parameters()), list(tmodel.parameters()), 3)
    assert_same_state(opt, topt)
    assert calls[0] == calls[1]
    # the least-squares minimum (torch's lstsq on [X, 1]) is reached, to the tolerances
    A = torch.cat([torch.tensor(X), torch.ones(32, 1, dtype=torch.float64)], 1)
    best = ((A @ torch.linalg.lstsq(A, torch.tensor(Y)).solution - torch.tensor(Y)) ** 2).mean()
    assert 0 <= closure().item() - best.item() < 1e-9


def test_logistic_regression_through_linear(device):
    rng = np.random.default_rng(1)
    X, labels = rng.standard_normal((40, 4)), rng.integers(0, 3, 40)
    model, tmodel = twin_module(nn.Linear(4, 3), torch.nn.Linear(4, 3), device)
    config = dict(lr=0.5, max_iter=10, history_size=4, line_search_fn="strong_wolfe")
    opt = tt.optim.LBFGS(model.parameters(), **config)
    topt = torch.optim.LBFGS(tmodel.parameters(), **config)
    x, y = tt.tensor(X, device=device), tt.tensor(labels, device=device)
    closure, tclosure, _ = closures(
        opt, topt, lambda: F.cross_entropy(model(x), y) + 0.01 * (model.weight ** 2).sum(),
        lambda: (torch.nn.functional.cross_entropy(tmodel(torch.tensor(X)),
                                                   torch.tensor(labels))
                 + 0.01 * (tmodel.weight ** 2).sum()))
    run(opt, topt, closure, tclosure, list(model.parameters()), list(tmodel.parameters()), 3)
    assert_same_state(opt, topt)


def sequence_class(lib, hidden):
    """pytorch/examples' ``time_sequence_prediction`` model (two LSTMCells and a Linear,
    predicting a sine wave's next value), of either library, with ``hidden`` units."""

    class Sequence(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = lib.nn.LSTMCell(1, hidden)
            self.lstm2 = lib.nn.LSTMCell(hidden, hidden)
            self.linear = lib.nn.Linear(hidden, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = lib.zeros(input.size(0), hidden, dtype=lib.double)
            c_t = lib.zeros(input.size(0), hidden, dtype=lib.double)
            h_t2 = lib.zeros(input.size(0), hidden, dtype=lib.double)
            c_t2 = lib.zeros(input.size(0), hidden, dtype=lib.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for _ in range(future):  # predicting the future
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return lib.cat(outputs, dim=1)

    return Sequence()


@pytest.mark.parametrize("max_iter,steps,tol", [
    (5, 3, TOL),
    # the example's max_iter: 40 fixed steps of lr=0.8 amplify the rounding to ~1e-7
    (20, 2, dict(rtol=1e-5, atol=1e-8))])
def test_time_sequence_prediction_example_made_tiny(max_iter, steps, tol):
    # the example's data (generate_sine_wave.py), 5 waves of 16 points instead of 100 of 1000
    T, L, N = 20, 16, 5
    rng = np.random.default_rng(0)
    data = np.sin((np.arange(L) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)) / 1.0 / T)
    inputs, targets = data[2:, :-1], data[2:, 1:]
    test_input = data[:2, :-1]
    seq, tseq = twin_module(sequence_class(tt, 6), sequence_class(torch, 6))
    opt = tt.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=max_iter)
    topt = torch.optim.LBFGS(tseq.parameters(), lr=0.8, max_iter=max_iter)
    closure, tclosure, calls = closures(
        opt, topt, lambda: F.mse_loss(seq(tt.tensor(inputs)), tt.tensor(targets)),
        lambda: torch.nn.functional.mse_loss(tseq(torch.tensor(inputs)), torch.tensor(targets)))
    run(opt, topt, closure, tclosure, list(seq.parameters()), list(tseq.parameters()), steps,
        tol)
    assert calls[0] == calls[1] == steps * max_iter  # (no line search: one call an iteration)
    with tt.no_grad(), torch.no_grad():
        pred, tpred = seq(tt.tensor(test_input), future=4), tseq(torch.tensor(test_input),
                                                                future=4)
    assert pred.shape == (2, L - 1 + 4)
    np.testing.assert_allclose(pred.numpy(), tpred.numpy(), **tol)


def gram(lib, features):
    """The style loss's gram matrix of ``[N, C, H, W]`` features: ``[N*C, N*C]``."""
    n, c, h, w = features.size()
    flat = features.view(n * c, h * w)
    return lib.mm(flat, flat.t()) / (n * c * h * w)


def test_neural_style_transfer_loop_optimises_the_input_image():
    """As PyTorch's neural-style tutorial: LBFGS([input_img]) over a frozen conv net, a
    content loss and a style (gram) loss, the image clamped to [0, 1] in the closure."""
    rng = np.random.default_rng(2)
    content, style, start = (rng.random((1, 3, 12, 12)) for _ in range(3))
    net, tnet = twin_module(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3)),
                            torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                                torch.nn.Conv2d(4, 4, 3)))
    net.requires_grad_(False)
    tnet.requires_grad_(False)
    (img,), (timg,) = leaves("cpu", start)
    opt, topt = tt.optim.LBFGS([img], max_iter=5), torch.optim.LBFGS([timg], max_iter=5)

    def style_loss(lib, functional, model, image):
        with lib.no_grad():
            image.clamp_(0, 1)
        target_content = model(lib.tensor(content)).detach()
        target_gram = gram(lib, model(lib.tensor(style))).detach()
        features = model(image)
        return (functional.mse_loss(features, target_content)
                + 1e3 * functional.mse_loss(gram(lib, features), target_gram))

    closure, tclosure, _ = closures(opt, topt, lambda: style_loss(tt, F, net, img),
                                    lambda: style_loss(torch, torch.nn.functional, tnet, timg))
    first = style_loss(torch, torch.nn.functional, tnet, timg).item()
    for _ in range(3):  # (PyTorch's tutorial: while run[0] <= num_steps: step(closure))
        run(opt, topt, closure, tclosure, [img], [timg], 1)
    with tt.no_grad(), torch.no_grad():
        img.clamp_(0, 1)
        timg.clamp_(0, 1)
    assert_same([img], [timg])
    assert net[0].weight.grad is None  # the frozen net has no gradients
    assert style_loss(torch, torch.nn.functional, tnet, timg).item() < first


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_max_eval_limits_the_closure_calls(line_search_fn):
    rng = np.random.default_rng(3)
    A, b = rng.standard_normal((6, 6)), rng.standard_normal(6)
    (x,), (tx,) = leaves("cpu", np.zeros(6))
    config = dict(max_iter=50, max_eval=7, line_search_fn=line_search_fn)
    opt, topt = tt.optim.LBFGS([x], **config), torch.optim.LBFGS([tx], **config)
    closure, tclosure, calls = closures(
        opt, topt, lambda: ((tt.tensor(A) @ x - tt.tensor(b)) ** 2).sum(),
        lambda: ((torch.tensor(A) @ tx - torch.tensor(b)) ** 2).sum())
    run(opt, topt, closure, tclosure, [x], [tx], 2)
    assert_same_state(opt, topt)
    assert calls[0] == calls[1] and opt.state[x]["func_evals"] == calls[0]
    assert opt.state[x]["n_iter"] < 2 * 50  # stopped by max_eval, not max_iter


def test_parameters_without_gradients_stay_and_count_as_zero():
    (a, unused, frozen), (ta, tunused, tfrozen) = leaves("cpu", [0.5, -1.0], [3.0, 4.0], [2.0])
    frozen.requires_grad_(False)
    tfrozen.requires_grad_(False)
    opt = tt.optim.LBFGS([a, unused, frozen], max_iter=5)
    topt = torch.optim.LBFGS([ta, tunused, tfrozen], max_iter=5)
    closure, tclosure, _ = closures(opt, topt, lambda: ((a - frozen) ** 4).sum() + (a ** 2).sum(),
                                    lambda: ((ta - tfrozen) ** 4).sum() + (ta ** 2).sum())
    run(opt, topt, closure, tclosure, [a, unused, frozen], [ta, tunused, tfrozen], 3)
    assert unused.tolist() == [3.0, 4.0] and frozen.tolist() == [2.0]
    assert unused.grad is None and frozen.grad is None
    assert opt.state[a]["d"].shape == (5,)  # flat over all the parameters, zeros where none


def test_already_optimal_returns_at_once():
    (x,), (tx,) = leaves("cpu", [1.0, 1.0])  # rosenbrock's minimum: gradient 0
    opt, topt = tt.optim.LBFGS([x]), torch.optim.LBFGS([tx])
    closure, tclosure, calls = closures(opt, topt, lambda: rosenbrock(x), lambda: rosenbrock(tx))
    run(opt, topt, closure, tclosure, [x], [tx], 2)
    assert calls == [2, 2]
    assert opt.state[x] == {"func_evals": 2, "n_iter": 0} == topt.state[tx]


@pytest.mark.parametrize("source", ["ours", "torch's"])
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_state_dict_round_trip_mid_run_continues_as_torch(device, source, line_search_fn):
    (x, w), (tx, tw) = leaves(device, [-1.2, 1.0], [[0.3, -0.2], [0.1, 0.4]])
    config = dict(max_iter=4, history_size=5, line_search_fn=line_search_fn)

    def loss(lib, x, w):
        return rosenbrock(x) + ((w @ x) ** 2).sum() + (w ** 4).sum()

    opt, topt = tt.optim.LBFGS([x, w], **config), torch.optim.LBFGS([tx, tw], **config)
    closure, tclosure, _ = closures(opt, topt, lambda: loss(tt, x, w), lambda: loss(torch, tx, tw))
    run(opt, topt, closure, tclosure, [x, w], [tx, tw], 2)

    saved = opt.state_dict() if source == "ours" else topt.state_dict()
    assert set(saved["state"]) == {0} and set(saved["state"][0]) == set(
        topt.state_dict()["state"][0])
    opt = tt.optim.LBFGS([x, w], **config)  # a new optimizer continues from the state
    opt.load_state_dict(saved)
    state = opt.state[x]
    assert state["d"].shape == (6,) and tt.backend.device_of(state["d"]) == x.device
    assert all(tt.backend.device_of(y) == x.device for y in state["old_dirs"])
    closure, tclosure, _ = closures(opt, topt, lambda: loss(tt, x, w), lambda: loss(torch, tx, tw))
    run(opt, topt, closure, tclosure, [x, w], [tx, tw], 3)
    assert_same_state(opt, topt)


def test_state_dict_is_a_copy():
    (x,), _ = leaves("cpu", [-1.2, 1.0])
    opt = tt.optim.LBFGS([x], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = rosenbrock(x)
        loss.backward()
        return loss

    opt.step(closure)
    saved = opt.state_dict()
    frozen = {k: (list(v) if isinstance(v, list) else np.copy(v))
              for k, v in saved["state"][0].items() if k != "al"}
    opt.step(closure)
    for k, v in frozen.items():  # the next step changed nothing saved
        if isinstance(v, list):
            assert len(saved["state"][0][k]) == len(v)
            assert all(np.array_equal(a, b) for a, b in zip(saved["state"][0][k], v))
        else:
            assert np.array_equal(saved["state"][0][k], v), k


def test_load_state_dict_of_another_size_is_refused():
    (x,), _ = leaves("cpu", [-1.2, 1.0])
    (y, z), _ = leaves("cpu", [-1.2, 1.0, 3.0], np.ones((2, 2)))
    opt = tt.optim.LBFGS([x], max_iter=2)
    opt.step(lambda: (opt.zero_grad(), rosenbrock(x).backward(), rosenbrock(x))[-1])
    with pytest.raises(ShapeError, match=r"parameter 0 .*'d' has shape \(2,\) \(expected "
                                           r"\(7,\)\)"):  # (flat over y and z)
        tt.optim.LBFGS([y, z]).load_state_dict({**opt.state_dict(), "param_groups": [
            {**opt.state_dict()["param_groups"][0], "params": [0, 1]}]})


def test_errors_as_torch():
    (x,), (tx,) = leaves("cpu", [1.0, 2.0])
    opt, topt = tt.optim.LBFGS([x]), torch.optim.LBFGS([tx])
    with pytest.raises(TypeError) as theirs:
        topt.step()
    with pytest.raises(TypeError, match=str(theirs.value).replace("(", r"\(").replace(")", r"\)")):
        opt.step()
    with pytest.raises(TypeError, match="closure must be a function that re-evaluates the loss"):
        opt.step(None)  # (torch: 'NoneType' object is not callable)
    message = r"LBFGS doesn't support per-parameter options \(parameter groups\)"
    (y,), (ty,) = leaves("cpu", [3.0])
    with pytest.raises(ValueError, match=message):
        torch.optim.LBFGS([{"params": [tx]}, {"params": [ty]}])
    with pytest.raises(ValueError, match=message):
        tt.optim.LBFGS([{"params": [x]}, {"params": [y]}])
    with pytest.raises(ValueError, match=message):  # (torch adds it, then its step fails)
        opt.add_param_group({"params": [y]})
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        torch.optim.LBFGS([tx], lr=-1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        tt.optim.LBFGS([x], lr=-1)
    bad, tbad = tt.optim.LBFGS([x], line_search_fn="wolfe"), torch.optim.LBFGS(
        [tx], line_search_fn="wolfe")
    closure, tclosure, _ = closures(bad, tbad, lambda: (x ** 2).sum(), lambda: (tx ** 2).sum())
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        tbad.step(tclosure)
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        bad.step(closure)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_float32_stays_float32(device, line_search_fn):
    rng = np.random.default_rng(4)
    A, b = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    x, tx = tt.zeros(4, device=device, requires_grad=True), torch.zeros(4, requires_grad=True)
    opt = tt.optim.LBFGS([x], max_iter=5, line_search_fn=line_search_fn)
    topt = torch.optim.LBFGS([tx], max_iter=5, line_search_fn=line_search_fn)
    closure, tclosure, _ = closures(
        opt, topt, lambda: ((tt.tensor(A, device=device) @ x - tt.tensor(b, device=device)) ** 2
                            ).sum(),
        lambda: ((torch.tensor(A) @ tx - torch.tensor(b)) ** 2).sum())
    for _ in range(2):
        np.testing.assert_allclose(opt.step(closure).item(), topt.step(tclosure).item(),
                                   rtol=1e-5)
        np.testing.assert_allclose(x.numpy(), tx.detach().numpy(), rtol=1e-4, atol=1e-4)
    state = opt.state[x]
    assert x.dtype == np.float32 and state["d"].dtype == state["prev_flat_grad"].dtype == x.dtype
    assert all(y.dtype == np.float32 for y in state["old_dirs"] + state["old_stps"])
