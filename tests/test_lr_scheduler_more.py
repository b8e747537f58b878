"""The schedulers PyTorch has (LinearLR, ConstantLR, SequentialLR, ChainedScheduler,
MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR) and ``last_epoch=`` on
all, against torch.optim.lr_scheduler: rates and momenta bit for bit over 30 steps with two
parameter groups, a state-dict round trip half way, resuming with last_epoch, step(epoch),
state-dict keys and the errors."""

from __future__ import annotations

import warnings

import pytest
import torch

import tinytrain as tt
from tinytrain import optim


def twin(kind):
    """The same optimizer in tinytrain and in torch: two groups with their own rates."""
    def make(lib):
        p, q = lib.zeros(2, requires_grad=True), lib.zeros(1, requires_grad=True)
        kw = {"momentum": 0.9} if kind == "SGD" else {}
        return getattr(lib.optim, kind)([{"params": [p]}, {"params": [q], "lr": 0.03}],
                                        lr=0.1, **kw)
    return make(tt), make(torch)


SCHEDULES = {
    "LinearLR": lambda m, o, **k: m.LinearLR(o, start_factor=0.25, end_factor=0.9,
                                             total_iters=7, **k),
    "ConstantLR": lambda m, o, **k: m.ConstantLR(o, factor=0.5, total_iters=4, **k),
    "MultiplicativeLR": lambda m, o, **k: m.MultiplicativeLR(
        o, lambda e: 0.95 if e % 2 else 0.99, **k),
    "PolynomialLR": lambda m, o, **k: m.PolynomialLR(o, total_iters=9, power=2.0, **k),
    "CosineAnnealingWarmRestarts": lambda m, o, **k: m.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.001, **k),
    "CosineAnnealingWarmRestarts T_mult=1": lambda m, o, **k: m.CosineAnnealingWarmRestarts(
        o, T_0=4, **k),
    "CyclicLR triangular": lambda m, o, **k: m.CyclicLR(
        o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4, step_size_down=3, **k),
    "CyclicLR triangular2": lambda m, o, **k: m.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2", **k),
    "CyclicLR exp_range": lambda m, o, **k: m.CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.9,
        base_momentum=0.7, max_momentum=[0.95, 0.9], **k),
    "CyclicLR scale_fn": lambda m, o, **k: m.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 1 / (1 + x),
        scale_mode="iterations", cycle_momentum=False, **k),
    "StepLR": lambda m, o, **k: m.StepLR(o, 3, 0.5, **k),
    "MultiStepLR": lambda m, o, **k: m.MultiStepLR(o, [0, 2, 9, 9], 0.5, **k),
    "ExponentialLR": lambda m, o, **k: m.ExponentialLR(o, 0.9, **k),
    "CosineAnnealingLR": lambda m, o, **k: m.CosineAnnealingLR(o, 6, 0.01, **k),
    "LambdaLR": lambda m, o, **k: m.LambdaLR(o, lambda e: 1 / (e + 1), **k),
    "OneCycleLR": lambda m, o, **k: m.OneCycleLR(o, max_lr=[1.0, 0.2], total_steps=40, **k),
}
COMPOSED = {
    "SequentialLR": lambda m, o: m.SequentialLR(o, [
        m.LinearLR(o, 0.1, 1.0, 4), m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
        m.StepLR(o, 3, 0.5)], milestones=[4, 12]),
    "SequentialLR of ConstantLR, ExponentialLR": lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, 0.3, 3), m.ExponentialLR(o, 0.9)], milestones=[5]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler([
        m.ConstantLR(o, 0.5, 4), m.ExponentialLR(o, 0.9), m.CosineAnnealingLR(o, 8)]),
    "SequentialLR with a ChainedScheduler first": lambda m, o: m.SequentialLR(o, [
        m.ChainedScheduler([m.ExponentialLR(o, 0.9), m.MultiplicativeLR(o, lambda e: 0.99)]),
        m.LinearLR(o, 0.5, 1.0, 3)], milestones=[3]),
}
ALL = SCHEDULES | COMPOSED


def momentum(group):
    return group["momentum"] if "momentum" in group else group["betas"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (PyTorch warns about step(epoch) and such)
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_rates_and_momenta_match_torch_bit_for_bit(name, kind):
    opt, topt = twin(kind)
    sched, tsched = ALL[name](optim.lr_scheduler, opt), ALL[name](torch.optim.lr_scheduler, topt)
    for step in range(30):
        assert sched.get_last_lr() == tsched.get_last_lr(), step
        assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in topt.param_groups]
        assert [momentum(g) for g in opt.param_groups] == [momentum(g)
                                                           for g in topt.param_groups]
        opt.step()
        topt.step()
        if name == "OneCycleLR" and step == 29:
            break
        sched.step()
        tsched.step()
        if step == 12:  # resume half way: a new optimizer and scheduler load both states
            opt2, _ = twin(kind)
            sched2 = ALL[name](optim.lr_scheduler, opt2)
            opt2.load_state_dict(opt.state_dict())
            sched2.load_state_dict(sched.state_dict())
            opt, sched = opt2, sched2


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_last_epoch_resumes_as_torch(name):
    runs = []
    for i, module in enumerate((optim.lr_scheduler, torch.optim.lr_scheduler)):
        opt = twin("SGD")[i]
        sched = SCHEDULES[name](module, opt)
        for _ in range(7):
            opt.step()
            sched.step()
        resumed_opt = twin("SGD")[i]
        resumed_opt.load_state_dict(opt.state_dict())  # (it has each group's initial_lr)
        resumed = SCHEDULES[name](module, resumed_opt, last_epoch=7)
        seen = [resumed.get_last_lr()]
        for _ in range(5):
            resumed_opt.step()
            resumed.step()
            seen.append(resumed.get_last_lr())
        for epoch in (3, 0, 11):  # step(epoch): the closed form where there is one
            resumed.step(epoch)
            seen.append(resumed.get_last_lr())
        seen.append(resumed.last_epoch)
        runs.append(seen)
    assert runs[0] == runs[1]


def test_last_epoch_without_initial_lr_is_pytorchs_key_error():
    messages = []
    for lib in (tt, torch):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
        with pytest.raises(KeyError) as info:
            lib.optim.lr_scheduler.StepLR(opt, 2, last_epoch=4)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "param 'initial_lr' is not specified in param_groups[0]" in messages[0]


def test_step_with_an_epoch_warns_as_torch():
    opt, _ = twin("SGD")
    sched = optim.lr_scheduler.StepLR(opt, 2, 0.5)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
            sched.step(5)
    assert sched.get_last_lr() == pytest.approx([0.1 * 0.25, 0.03 * 0.25], rel=1e-15)


def test_warm_restarts_take_float_epochs_as_torch():
    seen = []
    for lib in (tt, torch):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.05)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3,
                                                                  eta_min=1e-4)
        rates, iters = [], 7
        for epoch in range(6):  # per batch, as PyTorch's docs show
            for i in range(iters):
                opt.step()
                sched.step(epoch + i / iters)
                rates.append((sched.get_last_lr()[0], sched.T_cur, sched.T_i,
                              sched.last_epoch))
        sched.step(26)  # then interleaved with plain steps
        sched.step()
        rates.append((sched.get_last_lr()[0], sched.T_cur, sched.T_i, sched.last_epoch))
        with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
            sched.step(-1)
        seen.append(rates)
    assert seen[0] == seen[1]


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "LinearLR",
                                  "CosineAnnealingWarmRestarts", "CyclicLR triangular"])
def test_state_dict_has_torchs_keys_and_torchs_state_loads(name):
    opt, topt = twin("SGD")
    sched, tsched = (SCHEDULES[name](optim.lr_scheduler, opt),
                     SCHEDULES[name](torch.optim.lr_scheduler, topt))
    for _ in range(5):
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
    state = sched.state_dict()
    assert {"_step_count", "_is_initial", "last_epoch", "base_lrs", "_last_lr"} <= set(state)
    assert set(tsched.state_dict()) - set(state) == {"_get_lr_called_within_step"}
    assert state["_step_count"] == tsched.state_dict()["_step_count"]  # (0: CAWR counts none)
    ours_from_torch = SCHEDULES[name](optim.lr_scheduler, twin("SGD")[0])
    ours_from_torch.optimizer.load_state_dict(topt.state_dict())
    ours_from_torch.load_state_dict(tsched.state_dict())
    for _ in range(6):
        ours_from_torch.optimizer.step()
        topt.step()
        ours_from_torch.step()
        tsched.step()
        assert ours_from_torch.get_last_lr() == tsched.get_last_lr()


def test_a_sequential_schedule_resumes_mid_warm_up():
    """A CosineAnnealingLR that is not running yet must not set the rates when loaded."""
    rates = []
    for resume in (False, True):
        opt, _ = twin("SGD")
        sched = COMPOSED["SequentialLR"](optim.lr_scheduler, opt)
        seen = []
        for step in range(16):
            opt.step()
            sched.step()
            seen.append(sched.get_last_lr())
            if resume and step == 1:
                opt2, _ = twin("SGD")
                sched2 = COMPOSED["SequentialLR"](optim.lr_scheduler, opt2)
                opt2.load_state_dict(opt.state_dict())
                sched2.load_state_dict(sched.state_dict())
                opt, sched = opt2, sched2
        rates.append(seen)
    assert rates[0] == rates[1]


def test_lambda_state_keeps_a_callable_objects_attributes_as_torch():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    opt, _ = twin("SGD")
    sched = optim.lr_scheduler.LambdaLR(opt, [Decay(0.5), lambda e: 1.0])
    sched.lr_lambdas[0].rate = 0.8
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"rate": 0.8}, None]
    fresh = optim.lr_scheduler.LambdaLR(twin("SGD")[0], [Decay(0.5), lambda e: 1.0])
    fresh.load_state_dict(state)
    assert fresh.lr_lambdas[0].rate == 0.8


ERRORS = [
    (lambda m, o: m.ConstantLR(o, factor=1.5),
     ValueError, "Constant multiplicative factor expected to be between 0 and 1."),
    (lambda m, o: m.LinearLR(o, start_factor=0),
     ValueError, "Starting multiplicative factor expected to be greater than 0"),
    (lambda m, o: m.LinearLR(o, end_factor=1.5),
     ValueError, "Ending multiplicative factor expected to be between 0 and 1."),
    (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0),
     ValueError, "Expected positive integer T_0, but got 0"),
    (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5),
     ValueError, "Expected integer T_mult >= 1, but got 1.5"),
    (lambda m, o: m.CyclicLR(o, 0.01, 0.1, mode="sine"),
     ValueError, "mode is invalid and scale_fn is None"),
    (lambda m, o: m.CyclicLR(o, [0.01], 0.1),
     ValueError, "base_lr must have the same length as optimizer.param_groups"),
    (lambda m, o: m.MultiplicativeLR(o, [lambda e: 1.0, 0.5]),
     TypeError, "lr_lambda should be a function, but got float"),
    (lambda m, o: m.SequentialLR(o, [m.ConstantLR(o), m.ExponentialLR(o, 0.9)], [2, 4]),
     ValueError, "expects number of schedulers provided to be one more than the number of "
                 "milestone points"),
    (lambda m, o: m.SequentialLR(o, [], []),
     ValueError, "SequentialLR expects at least one scheduler"),
    (lambda m, o: m.SequentialLR(o, [m.ConstantLR(o), m.ReduceLROnPlateau(o)], [2]),
     ValueError, "SequentialLR does not support `ReduceLROnPlateau`"),
    (lambda m, o: m.ChainedScheduler([m.ConstantLR(o), m.ExponentialLR(
        type(o)([o.param_groups[0]["params"][0].detach()], lr=0.1), 0.9)]),
     ValueError, "ChainedScheduler expects all schedulers to belong to the same optimizer"),
]


@pytest.mark.parametrize("make,error,message", ERRORS)
def test_errors_are_pytorchs(make, error, message):
    for lib in (tt, torch):
        opt = twin("SGD")[0 if lib is tt else 1]
        with pytest.raises(error, match=message.replace("(", "\\(").replace("[", "\\[")):
            make(lib.optim.lr_scheduler, opt)


def test_cycling_momentum_needs_momentum_or_betas():
    opt = optim.Adadelta([tt.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1)
    optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, cycle_momentum=False)


def test_custom_schedulers_subclass_either_base_name():
    class Halving(optim.lr_scheduler._LRScheduler):
        def get_lr(self):
            return [base * 0.5 ** self.last_epoch for base in self.base_lrs]

    opt, _ = twin("SGD")
    sched = Halving(opt)
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.05, 0.015]
    assert isinstance(sched, optim.lr_scheduler.LRScheduler)


def _group_added_after_the_scheduler(lib, name):
    a, b = lib.zeros(1, requires_grad=True), lib.zeros(1, requires_grad=True)
    sched = lib.optim.lr_scheduler
    make = {"LambdaLR": lambda o: sched.LambdaLR(o, lambda e: 0.5 ** e),
            "CosineAnnealingLR": lambda o: sched.CosineAnnealingLR(o, 3),
            "CosineAnnealingWarmRestarts": lambda o: sched.CosineAnnealingWarmRestarts(o, 3),
            "LinearLR": lambda o: sched.LinearLR(o, 0.2, 0.9, 6)}[name]
    opt = lib.optim.SGD([a], lr=1.0)
    s = make(opt)
    opt.step()
    s.step()
    opt.add_param_group({"params": [b], "lr": 1.0})
    try:
        for _ in range(6):
            opt.step()
            s.step()
    except ValueError as error:
        return str(error)
    return [g["lr"] for g in opt.param_groups]


@pytest.mark.parametrize("name", ["LambdaLR", "CosineAnnealingLR",
                                  "CosineAnnealingWarmRestarts", "LinearLR"])
def test_a_group_added_after_the_scheduler_is_refused_or_scheduled_like_torch(name):
    """A group added after a scheduler that works from base_lrs was silently left
    unscheduled ([0.0078125, 1.0]); PyTorch's strict zips refuse it."""
    assert _group_added_after_the_scheduler(tt, name) == \
        _group_added_after_the_scheduler(torch, name)


def test_linear_lr_closed_form_rounds_like_torch():
    """step(epoch) gave 0.05500000000000001 where PyTorch's order of operations gives
    0.05499999999999999."""
    rates = []
    for lib in (tt, torch):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
        sched = lib.optim.lr_scheduler.LinearLR(opt, 0.2, 0.9, 6)
        with pytest.warns(UserWarning):
            sched.step(3)
        rates.append(opt.param_groups[0]["lr"])
    assert rates[0] == rates[1]
