"""CosineAnnealingLR and StepLR against PyTorch's, step by step, and through a state dict."""

from __future__ import annotations

import numpy as np
import pytest

import tinytrain as tt
from tinytrain import optim

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("eta_min", [0.0, 1e-4])
def test_cosine_matches_pytorch(eta_min):
    p = tt.zeros(3, requires_grad=True)
    opt = optim.Adam([p], lr=2e-3)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=17, eta_min=eta_min)
    tp = torch.zeros(3, requires_grad=True)
    topt = torch.optim.Adam([tp], lr=2e-3)
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=17, eta_min=eta_min)
    ours, ref = [], []
    for _ in range(60):  # past T_max the rate rises again, as PyTorch's (it stayed at eta_min)
        ours.append(sched.get_last_lr()[0])
        ref.append(tsched.get_last_lr()[0])
        topt.step()
        tsched.step()
        sched.step()
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-15)
    assert ours[0] == 2e-3 and ours[17] == pytest.approx(eta_min, abs=1e-15)
    assert ours[34] == pytest.approx(2e-3, rel=1e-12)


def test_state_dict_round_trip_continues_identically():
    p = tt.zeros(2, requires_grad=True)
    a = optim.lr_scheduler.CosineAnnealingLR(optim.SGD([p], lr=0.1), T_max=10)
    for _ in range(4):
        a.optimizer.step()
        a.step()
    b = optim.lr_scheduler.CosineAnnealingLR(optim.SGD([p], lr=0.1), T_max=10)
    b.optimizer.load_state_dict(a.optimizer.state_dict())  # the rates, as PyTorch needs
    b.load_state_dict(a.state_dict())
    for _ in range(3):
        a.step()
        b.step()
        assert a.get_last_lr() == b.get_last_lr()


def test_bad_horizon_is_refused():
    with pytest.raises(ValueError, match="T_max must be > 0"):
        optim.lr_scheduler.CosineAnnealingLR(optim.SGD([tt.zeros(1, requires_grad=True)],
                                                       lr=0.1), T_max=0)


@pytest.mark.parametrize("step_size,gamma", [(1, 0.7), (3, 0.1), (2, 0.5)])
def test_step_lr_matches_pytorch(step_size, gamma):
    p, tp = tt.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    q, tq = tt.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    opt = optim.Adadelta([{"params": [p]}, {"params": [q], "lr": 0.3}], lr=1.0)
    topt = torch.optim.Adadelta([{"params": [tp]}, {"params": [tq], "lr": 0.3}], lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, step_size=step_size, gamma=gamma)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=step_size, gamma=gamma)
    for _ in range(10):
        assert sched.get_last_lr() == tsched.get_last_lr()  # bit for bit: same arithmetic
        topt.step()
        tsched.step()
        sched.step()
    resumed = optim.lr_scheduler.StepLR(opt, step_size=99)
    resumed.load_state_dict(sched.state_dict())
    resumed.step()
    tsched.step()
    assert resumed.get_last_lr() == tsched.get_last_lr()


def test_step_lr_rejects_bad_step_size():
    opt = optim.SGD([tt.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="step_size"):
        optim.lr_scheduler.StepLR(opt, step_size=0)


# --------------------------------------------------------------------------- chaining and
# resuming as PyTorch does (a review's client programs)


def _two(lr=0.1):
    return (optim.SGD([tt.zeros(2, requires_grad=True)], lr=lr),
            torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=lr))


def test_a_cosine_after_a_warm_up_starts_from_the_initial_rate_like_torch():
    ours, theirs = _two()
    rates = []
    for opt, lib in ((ours, optim.lr_scheduler), (theirs, torch.optim.lr_scheduler)):
        warm = lib.LambdaLR(opt, lambda e: (e + 1) / 5)
        cos = lib.CosineAnnealingLR(opt, T_max=20)
        seq = []
        for step in range(12):
            opt.step()
            (warm if step < 4 else cos).step()
            seq.append(opt.param_groups[0]["lr"])
        rates.append(seq)
    np.testing.assert_allclose(rates[0], rates[1], rtol=1e-12)
    assert rates[0][4] > 0.099  # the cosine starts from 0.1 (from 0.02 before: 0.0199)


def test_cosine_chains_with_another_scheduler_like_torch():
    ours, theirs = _two()
    rates = []
    for opt, lib in ((ours, optim.lr_scheduler), (theirs, torch.optim.lr_scheduler)):
        both = [lib.CosineAnnealingLR(opt, T_max=20), lib.ExponentialLR(opt, 0.9)]
        seq = []
        for _ in range(8):
            opt.step()
            for s in both:
                s.step()
            seq.append(opt.param_groups[0]["lr"])
        rates.append(seq)
    np.testing.assert_allclose(rates[0], rates[1], rtol=1e-12)


def test_step_lr_reports_its_last_rate_after_a_resume_like_torch():
    opt, topt = _two()
    a = optim.lr_scheduler.StepLR(opt, 2, 0.5)
    for _ in range(5):
        opt.step()
        a.step()
    fresh = optim.lr_scheduler.StepLR(optim.SGD([tt.zeros(2, requires_grad=True)], lr=0.1), 2, 0.5)
    fresh.load_state_dict(a.state_dict())
    assert fresh.get_last_lr() == a.get_last_lr() == [0.025]


@pytest.mark.parametrize("make, error", [
    (lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=[1.0], total_steps=10), "expected 2"),
    (lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=[1, 1, 1], total_steps=10), "expected 2"),
    (lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=2.5), "total_steps"),
    (lambda o: optim.lr_scheduler.StepLR(o, "3"), "step_size"),
    (lambda o: optim.lr_scheduler.CosineAnnealingLR(o, None), "T_max"),
    (lambda o: optim.lr_scheduler.MultiStepLR(o, ["a"]), "milestones"),
])
def test_scheduler_arguments_are_checked(make, error):
    opt = optim.SGD([{"params": [tt.zeros(1, requires_grad=True)]},
                     {"params": [tt.zeros(1, requires_grad=True)]}], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=error):
        make(opt)


def test_stepping_the_scheduler_before_the_optimizer_warns_like_torch():
    import warnings

    p = tt.nn.Parameter(np.ones(2, np.float32))
    opt = optim.SGD([p], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 1)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt2 = optim.SGD([p], lr=0.1)
    sched2 = optim.lr_scheduler.StepLR(opt2, 1)
    p.grad = tt.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.step()
        sched2.step()  # the right order: no warning
    assert opt2._step_count == 1
