"""AdamW, RMSprop and Adagrad against torch.optim, step by step, on every device; parameter
groups added later; and each new schedule against torch.optim.lr_scheduler, step by step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import optim

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def params(device, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    return ([tt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


CONFIGS = {
    "AdamW default": ("AdamW", dict()),
    "AdamW": ("AdamW", dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.3)),
    "AdamW no decay": ("AdamW", dict(lr=0.01, weight_decay=0.0)),
    "RMSprop default": ("RMSprop", dict()),
    "RMSprop momentum, decay": ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.8,
                                                weight_decay=0.1)),
    "RMSprop centered": ("RMSprop", dict(lr=0.003, centered=True, eps=1e-5)),
    "RMSprop centered momentum": ("RMSprop", dict(lr=0.003, centered=True, momentum=0.5)),
    "Adagrad default": ("Adagrad", dict()),
    "Adagrad": ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.2,
                                initial_accumulator_value=0.3, eps=1e-8)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_optimizer_matches_torch_step_by_step(device, name):
    cls, config = CONFIGS[name]
    ours, ref = params(device)
    frozen, tfrozen = tt.ones(2, device=device, requires_grad=True), torch.ones(
        2, requires_grad=True)  # never gets a gradient: skipped by both
    opt = getattr(optim, cls)(ours + [frozen], **config)
    topt = getattr(torch.optim, cls)(ref + [tfrozen], **config)
    rng = np.random.default_rng(7)
    for _ in range(6):
        for p, t in zip(ours, ref):
            g = rng.standard_normal(t.shape).astype(np.float32)
            p.grad, t.grad = tt.tensor(g, device=device), torch.from_numpy(g)
        opt.step()
        topt.step()
        for p, t in zip(ours, ref):
            np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert frozen.numpy().tolist() == [1.0, 1.0]
    assert set(opt.state_dict()["state"][0]) == set(topt.state_dict()["state"][0])


@pytest.mark.parametrize("cls", ["AdamW", "RMSprop", "Adagrad"])
def test_state_dict_round_trip_continues_identically(cls):
    (a, _), (b, _) = params("cpu"), params("cpu")
    opt_a, opt_b = getattr(optim, cls)(a, lr=0.01), getattr(optim, cls)(b, lr=0.01)
    for step in range(4):
        if step == 2:
            opt_b.load_state_dict(opt_a.state_dict())
            for p, q in zip(a, b):
                q.data[...] = p.data
        for p, q in zip(a, b):
            p.grad = tt.ones(p.shape) * (step + 1)
            q.grad = tt.ones(q.shape) * (step + 1)
        opt_a.step()
        opt_b.step()
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_adamw_decay_is_decoupled_from_the_gradient():
    p = tt.ones(1, requires_grad=True)
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = tt.zeros(1)
    opt.step()  # no gradient: Adam's step is 0, the weight shrinks by lr * decay only
    assert p.item() == pytest.approx(1 - 0.1 * 0.5)


@pytest.mark.parametrize("cls,bad", [("AdamW", dict(betas=(1.0, 0.9))),
                                     ("RMSprop", dict(alpha=-0.1)),
                                     ("Adagrad", dict(lr_decay=-1.0))])
def test_bad_hyper_parameters_are_refused(cls, bad):
    with pytest.raises(ValueError, match=cls):
        getattr(optim, cls)([tt.ones(1, requires_grad=True)], **bad)


def test_add_param_group_trains_the_new_group_with_its_own_rate():
    a, b = tt.ones(2, requires_grad=True), tt.ones(3, requires_grad=True)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    opt, topt = optim.SGD([a], lr=0.1, momentum=0.9), torch.optim.SGD([ta], lr=0.1,
                                                                        momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.5})
    topt.add_param_group({"params": tb, "lr": 0.5})
    assert [(g["lr"], g["momentum"]) for g in opt.param_groups] == [
        (g["lr"], g["momentum"]) for g in topt.param_groups]
    for _ in range(2):
        for p, t in ((a, ta), (b, tb)):
            p.grad, t.grad = tt.ones(p.shape), torch.ones(t.shape)
        opt.step()
        topt.step()
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


# ------------------------------------------------------------------ schedules


def twin_optimizers(kind="SGD", **kw):
    p, q = tt.zeros(2, requires_grad=True), tt.zeros(1, requires_grad=True)
    tp, tq = torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)
    groups = lambda x, y: [{"params": [x]}, {"params": [y], "lr": 0.03}]  # noqa: E731
    return (getattr(optim, kind)(groups(p, q), lr=0.1, **kw),
            getattr(torch.optim, kind)(groups(tp, tq), lr=0.1, **kw))


SCHEDULES = {
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.8),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda epoch: 0.95 ** epoch / (1 + epoch % 3)),
    "LambdaLR per group": lambda m, o: m.LambdaLR(o, [lambda e: e + 1, lambda e: 0.5 ** e]),
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.3),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=20, eta_min=0.001),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.2], total_steps=14),
    "OneCycleLR linear three-phase": lambda m, o: m.OneCycleLR(
        o, max_lr=0.5, epochs=2, steps_per_epoch=7, anneal_strategy="linear",
        three_phase=True, pct_start=0.25, div_factor=10, final_div_factor=100),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_schedule_matches_torch_step_by_step(name, kind):
    opt, topt = twin_optimizers(kind, **({"momentum": 0.9} if kind == "SGD" else {}))
    sched = SCHEDULES[name](optim.lr_scheduler, opt)
    tsched = SCHEDULES[name](torch.optim.lr_scheduler, topt)
    for _ in range(14):
        assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-12)
        for g, tg in zip(opt.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12)
            key = "momentum" if kind == "SGD" else "betas"
            assert g[key] == pytest.approx(tg[key], rel=1e-12)  # OneCycleLR cycles momentum
        topt.step()
        opt.step()
        tsched.step()
        sched.step()
    if name.startswith("OneCycle"):
        with pytest.raises(ValueError, match="total_steps"):
            sched.step()


@pytest.mark.parametrize("name", ["MultiStepLR", "ExponentialLR", "OneCycleLR"])
def test_schedule_state_dict_round_trip(name):
    opt, _ = twin_optimizers()
    sched = SCHEDULES[name](optim.lr_scheduler, opt)
    for _ in range(4):
        sched.step()
    opt2, _ = twin_optimizers()
    resumed = SCHEDULES[name](optim.lr_scheduler, opt2)
    opt2.load_state_dict(opt.state_dict())
    resumed.load_state_dict(sched.state_dict())
    for _ in range(3):
        sched.step()
        resumed.step()
        assert resumed.get_last_lr() == sched.get_last_lr()


PLATEAU = {
    "min rel": dict(),
    "max abs, cooldown": dict(mode="max", threshold_mode="abs", threshold=0.05, cooldown=2,
                              patience=1, factor=0.5),
    "min_lr per group": dict(patience=0, factor=0.2, min_lr=[0.01, 0.02], eps=1e-3),
}


@pytest.mark.parametrize("name", list(PLATEAU))
def test_reduce_lr_on_plateau_matches_torch(name):
    opt, topt = twin_optimizers()
    sched = optim.lr_scheduler.ReduceLROnPlateau(opt, **PLATEAU[name])
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **PLATEAU[name])
    metrics = [1.0, 0.9, 0.95, 0.91, 0.9, 0.92, 0.93, 0.99, 0.5, 0.6, 0.6, 0.6] * 3
    for m in metrics:
        sched.step(tt.tensor(m))  # a 0-d tensor, as a validation loss is
        tsched.step(m)
        assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-12)
        assert sched.num_bad_epochs == tsched.num_bad_epochs
    assert sched.get_last_lr() != [0.1, 0.03]  # it did lower the rates


def test_schedules_refuse_bad_settings():
    opt, _ = twin_optimizers()
    with pytest.raises(ValueError, match="factor"):
        optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match="total_steps"):
        optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="2 lr_lambdas"):
        optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(TypeError, match="needs an Optimizer"):
        optim.lr_scheduler.ExponentialLR([tt.ones(1)], gamma=0.5)
    adadelta = optim.Adadelta([tt.ones(1, requires_grad=True)])
    with pytest.raises(ValueError, match="cycle_momentum=False"):
        optim.lr_scheduler.OneCycleLR(adadelta, max_lr=0.1, total_steps=5)


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta"])
def test_a_step_writes_in_place_and_graphs_that_saved_the_weights_see_it(cls):
    """As in PyTorch, whose step bumps each parameter's version: a backward through a graph
    made before the step would use the new weights, so it raises instead."""
    for lib in (tt, torch):
        w = lib.ones(3, requires_grad=True)
        opt = getattr(lib.optim, cls)([w], lr=0.1)
        (w * w).sum().backward()
        y = (w * w).sum()  # saves w
        opt.step()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


# --------------------------------------------------------------------------- late, raw errors
# turned into early, clear ones (a review's client programs)


def test_a_gradient_of_the_wrong_shape_is_refused_when_assigned_or_named_at_step():
    w = tt.nn.Parameter(np.zeros((3, 4), np.float32))
    for bad, error in ((tt.zeros((4, 3)), "different size"), (tt.zeros((3, 4), dtype=tt.float64),
                       "different type"), (np.zeros((3, 4), np.float32), "a Tensor or None")):
        with pytest.raises((ValueError, TypeError), match=error):
            w.grad = bad  # refused, as PyTorch refuses it
    assert w.grad is None
    for make in (lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: optim.Adam(p)):
        w.grad = tt.zeros((3, 4))
        w.grad.data = tt.zeros((4, 3))  # the memory behind it replaced, as PyTorch allows
        with pytest.raises(ValueError, match="shape \\(3, 4\\) has a .grad of shape \\(4, 3\\)"):
            make([w]).step()


def test_load_state_dict_checks_shapes_and_indices_before_changing_anything():
    small = tt.nn.Linear(4, 3)
    opt = optim.Adam(small.parameters(), lr=0.5)
    small(tt.ones((2, 4))).sum().backward()
    opt.step()
    saved = opt.state_dict()
    big = tt.nn.Linear(5, 3)
    other = optim.Adam(big.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="parameter 0 has shape \\(3, 5\\) but its saved"):
        other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == 0.1 and not other.state  # unchanged
    saved["state"][7] = saved["state"][0]
    with pytest.raises(ValueError, match="parameter index 7, but this optimizer has 2"):
        optim.Adam(small.parameters()).load_state_dict(saved)


def test_duplicate_parameters_in_a_group_warn_like_torch():
    w = tt.nn.Parameter(np.zeros(2, np.float32))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([w, w], lr=0.1)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam([w], betas=(0.9,))


# ------------------------------------------------------------------ fifth review round


def test_adagrad_state_and_accumulator_as_torch():
    a0, b0 = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    runs = {}
    for lib, opt_mod in ((tt, tt.optim), (torch, torch.optim)):
        a, b = lib.tensor(a0.copy(), requires_grad=True), lib.tensor(b0.copy(),
                                                                    requires_grad=True)
        opt = opt_mod.Adagrad([{"params": [a]},
                               {"params": [b], "initial_accumulator_value": 0.1}], lr=0.1)
        fresh = opt.state_dict()["state"]
        assert sorted(fresh) == [0, 1] and all(float(s["step"]) == 0 for s in fresh.values())
        for g in ([0.5, -0.5], [1.0, 2.0]):
            for p in (a, b):
                p.grad = lib.tensor(np.array(g))
            opt.step()
        runs[lib.__name__] = (a.detach().numpy(), b.detach().numpy())
    for ours, theirs in zip(runs["tinytrain"], runs["torch"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_params_as_a_tensor_named_parameters_and_inf_as_a_string_like_torch():
    p = tt.zeros(3, 3, requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        tt.optim.SGD(p, lr=0.1)
    model = tt.nn.Linear(2, 2)
    opt = tt.optim.SGD(model.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["params"] == [model.weight, model.bias]
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                 "RAdam"):
        ours = getattr(tt.optim, name)(model.named_parameters(), lr=0.1).state_dict()
        theirs = getattr(torch.optim, name)(torch.nn.Linear(2, 2).named_parameters(),
                                            lr=0.1).state_dict()
        assert list(ours["param_groups"][0]) == list(theirs["param_groups"][0])  # key order
        assert ours["param_groups"][0]["param_names"] == ["weight", "bias"]
        unnamed = getattr(tt.optim, name)(model.parameters(), lr=0.1)  # as torch: the saved
        unnamed.load_state_dict(ours)                                  # names are loaded
        assert unnamed.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    p.grad = tt.tensor(np.full((3, 3), -4.0, dtype=np.float32))
    assert float(tt.nn.utils.clip_grad_norm_([p], 1.0, norm_type="inf")) == 4.0


def test_one_cycle_takes_a_momentum_per_group_like_torch():
    lrs = {}
    for lib in (tt, torch):
        groups = [{"params": [lib.zeros(1, requires_grad=True)]},
                  {"params": [lib.zeros(1, requires_grad=True)]}]
        opt = lib.optim.SGD(groups, lr=0.1, momentum=0.9)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10,
                                                  base_momentum=[0.8, 0.85],
                                                  max_momentum=[0.9, 0.95])
        seen = []
        for _ in range(9):
            opt.step()
            sched.step()
            seen.append([(g["lr"], g["momentum"]) for g in opt.param_groups])
        lrs[lib.__name__] = seen
    np.testing.assert_allclose(lrs["tinytrain"], lrs["torch"], rtol=1e-12)


def test_a_loaded_state_is_the_optimizers_own_and_pytorchs_state_dict_loads():
    p = tt.tensor(1.0, requires_grad=True)  # 0-d: its buffers are 0-d too
    opt = tt.optim.Adam([p], lr=0.1)
    p.grad = tt.tensor(0.5)
    opt.step()
    saved = opt.state_dict()
    before = float(saved["state"][0]["exp_avg"])
    other = tt.optim.Adam([tt.tensor(1.0, requires_grad=True)], lr=0.1)
    other.load_state_dict(saved)
    other.param_groups[0]["params"][0].grad = tt.tensor(3.0)
    other.step()
    assert float(saved["state"][0]["exp_avg"]) == before  # not moved by the other's step
    # PyTorch's Adam state dict: its tensors and its extra (off) flags load
    w = torch.ones(2, requires_grad=True)
    topt = torch.optim.Adam([w], lr=0.1)
    w.grad = torch.tensor([0.5, -0.5])
    topt.step()
    ours = tt.optim.Adam([tt.ones(2, requires_grad=True)], lr=0.1)
    ours.load_state_dict(topt.state_dict())
    assert ours.state_dict()["state"][0]["step"] == 1
    amsgrad = torch.optim.Adam([torch.ones(1, requires_grad=True)], amsgrad=True).state_dict()
    loaded = tt.optim.Adam([tt.ones(1, requires_grad=True)])
    loaded.load_state_dict(amsgrad)  # tinytrain's Adam has amsgrad now: it is switched on
    assert loaded.param_groups[0]["amsgrad"] is True


def test_a_state_dict_with_a_schedulers_keys_loads_before_the_scheduler_is_made():
    model = tt.nn.Linear(2, 2)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    tt.optim.lr_scheduler.StepLR(opt, 1)  # adds initial_lr to the groups
    saved = opt.state_dict()
    saved["param_groups"][0]["note"] = np.array([1.0, 2.0])  # any key of the user's
    fresh = tt.optim.SGD(tt.nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["initial_lr"] == 0.1
    tm = torch.nn.Linear(2, 2)
    topt = torch.optim.Adam(tm.named_parameters())  # saves param_names
    tm(torch.ones(1, 2)).sum().backward()
    topt.step()
    tt.optim.Adam(tt.nn.Linear(2, 2).parameters()).load_state_dict(topt.state_dict())


def test_one_cycle_without_cycling_momentum_ignores_the_momentum_lists():
    groups = [{"params": [tt.zeros(1, requires_grad=True)]},
              {"params": [tt.zeros(1, requires_grad=True)]}]
    opt = tt.optim.SGD(groups, lr=0.1)
    tt.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=5, cycle_momentum=False,
                                     base_momentum=[0.8])


def test_pytorchs_adamw_state_dict_loads_and_foreach_is_accepted():
    tm = torch.nn.Linear(2, 2)
    topt = torch.optim.AdamW(tm.parameters())  # saves decoupled_weight_decay=True
    tm(torch.ones(1, 2)).sum().backward()
    topt.step()
    ours = tt.optim.AdamW(tt.nn.Linear(2, 2).parameters())
    ours.load_state_dict(topt.state_dict())
    assert ours.state_dict()["state"][0]["step"] == 1
    saved = tt.optim.Adam(tt.nn.Linear(2, 2).parameters()).state_dict()
    saved["param_groups"][0]["amsgrad"] = np.True_  # (any true value, not only True)

    class Plain(tt.optim.Optimizer):  # an optimizer of one's own, without PyTorch's options
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

    with pytest.raises(ValueError, match="amsgrad=True"):
        Plain(tt.nn.Linear(2, 2).parameters()).load_state_dict(saved)
    with pytest.raises(ValueError, match="decoupled_weight_decay=True"):
        Plain(tt.nn.Linear(2, 2).parameters()).load_state_dict(
            torch.optim.Adam(tm.parameters(), decoupled_weight_decay=True).state_dict())
    adam = tt.optim.Adam(tt.nn.Linear(2, 2).parameters())
    adam.load_state_dict(torch.optim.Adam(tm.parameters(), decoupled_weight_decay=True,
                                          fused=True).state_dict())
    assert adam.param_groups[0]["decoupled_weight_decay"] and adam.param_groups[0]["fused"]
    p = tt.ones(2, requires_grad=True)
    p.grad = tt.tensor([3.0, 4.0])
    assert float(tt.nn.utils.clip_grad_norm_([p], 1.0, foreach=True)) == 5.0
    tt.nn.utils.clip_grad_value_([p], 0.1, foreach=None)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "NAdam", "RAdam", "Adamax"])
def test_print_optimizer_as_pytorch(name):
    """Every key of PyTorch's groups, its implementation options (foreach, fused, ...) too."""
    mine, theirs = params("cpu")
    groups = lambda ps: [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}]  # noqa: E731
    kwargs = {"lr": 1e-3, "momentum": 0.9} if name == "SGD" else {"lr": 1e-3}
    ours = getattr(optim, name)(groups(mine), **kwargs)
    ref = getattr(torch.optim, name)(groups(theirs), **kwargs)
    tt.optim.lr_scheduler.StepLR(ours, 2)  # (a scheduler adds initial_lr to each group)
    torch.optim.lr_scheduler.StepLR(ref, 2)
    assert set(ref.param_groups[0]) == set(ours.param_groups[0])
    assert repr(ours) == str(ours) == repr(ref)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "SGD", "Adam", "AdamW"])
def test_a_tensor_learning_rate_under_a_scheduler_as_pytorch(name):
    """lr=torch.tensor(0.05) (PyTorch accepts a Tensor lr): six optimizers failed with
    "'Tensor' object has no attribute 'astype'"; the trajectories under StepLR are torch's."""
    result = []
    for L in (torch, tt):
        p = L.nn.Parameter(L.tensor([1.0, -2.0, 3.0], dtype=L.float64))
        opt = getattr(L.optim, name)([p], lr=L.tensor(0.05))
        scheduler = L.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        for _ in range(5):
            opt.zero_grad()
            (p ** 2).sum().backward()
            opt.step()
            scheduler.step()
        result.append(p.detach().numpy().copy())
    np.testing.assert_allclose(result[1], result[0], rtol=1e-8, atol=1e-10)
