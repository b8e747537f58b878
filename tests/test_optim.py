"""SGD and Adam against torch.optim, step by step, and optimizer state dicts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import nn
from tinytrain.optim import SGD, Adadelta, Adam

SHAPES = [(4, 3), (3,), (2, 2, 2)]
STEPS = 5


def make_params(device, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    ours = [tt.tensor(a, device=device, requires_grad=True) for a in arrays]
    ref = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ours, ref


def grads_for_step(step, seed=100):
    rng = np.random.default_rng(seed + step)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def set_grads(ours, ref, grads, device):
    for p, t, g in zip(ours, ref, grads):
        p.grad = tt.tensor(g, device=device)
        t.grad = torch.from_numpy(g.copy())


def assert_params_close(ours, ref, atol=1e-6):
    for p, t in zip(ours, ref):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-6, atol=atol)


SGD_CONFIGS = {
    "plain": dict(lr=0.1),
    "momentum": dict(lr=0.1, momentum=0.9),
    "dampening": dict(lr=0.05, momentum=0.9, dampening=0.3),
    "weight_decay": dict(lr=0.1, weight_decay=0.01),
    "momentum_wd": dict(lr=0.1, momentum=0.9, weight_decay=0.05),
    "nesterov": dict(lr=0.1, momentum=0.9, nesterov=True),
    "nesterov_wd": dict(lr=0.03, momentum=0.8, nesterov=True, weight_decay=0.1),
}

ADAM_CONFIGS = {
    "default": dict(lr=1e-3),
    "large_lr": dict(lr=0.1),
    "betas_eps": dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
    "weight_decay": dict(lr=0.01, weight_decay=0.1),
}


def run_parity(device, ours_cls, ref_cls, config):
    ours, ref = make_params(device)
    opt, topt = ours_cls(ours, **config), ref_cls(ref, **config)
    for step in range(STEPS):
        set_grads(ours, ref, grads_for_step(step), device)
        opt.step()
        topt.step()
        assert_params_close(ours, ref)
    return ours, opt


@pytest.mark.parametrize("name", list(SGD_CONFIGS))
def test_sgd_matches_torch(device, name):
    run_parity(device, SGD, torch.optim.SGD, SGD_CONFIGS[name])


@pytest.mark.parametrize("name", list(ADAM_CONFIGS))
def test_adam_matches_torch(device, name):
    run_parity(device, Adam, torch.optim.Adam, ADAM_CONFIGS[name])


ADADELTA_CONFIGS = {
    "default": dict(),
    "pytorch_example": dict(lr=1.0),
    "rho_eps": dict(lr=0.5, rho=0.5, eps=1e-4),
    "weight_decay": dict(lr=0.7, weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(ADADELTA_CONFIGS))
def test_adadelta_matches_torch(device, name):
    ours, opt = run_parity(device, Adadelta, torch.optim.Adadelta, ADADELTA_CONFIGS[name])
    assert set(opt.state_dict()["state"][0]) == {"step", "square_avg", "acc_delta"}  # torch's


def test_adadelta_rejects_bad_hyperparameters_like_torch():
    p, t = tt.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    for kw in (dict(lr=-1.0), dict(rho=1.5), dict(eps=-1.0), dict(weight_decay=-0.1)):
        with pytest.raises(ValueError):
            torch.optim.Adadelta([t], **kw)
        with pytest.raises(ValueError):
            Adadelta([p], **kw)


@pytest.mark.parametrize("cls,config", [(SGD, SGD_CONFIGS["momentum_wd"]),
                                        (Adam, ADAM_CONFIGS["default"]),
                                        (Adadelta, ADADELTA_CONFIGS["default"])])
def test_frozen_layers_are_accepted_and_skipped_as_in_torch(cls, config):
    def run(lib, module, opt_cls):
        model = module.Sequential(module.Linear(3, 4), module.ReLU(), module.Linear(4, 2))
        with lib.no_grad():  # the same starting point in both libraries
            for i, p in enumerate(model.parameters()):
                p.copy_(lib.tensor(np.linspace(-1, 1, p.numel(), dtype=np.float32)
                                   .reshape(tuple(p.shape)) * (i + 1)))
        for p in model[0].parameters():
            p.requires_grad_(False)  # freeze the first layer
        opt = opt_cls(model.parameters(), **config)  # all parameters, frozen ones included
        x = lib.tensor(np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3))
        for _ in range(3):
            opt.zero_grad()
            (model(x) ** 2).mean().backward()
            opt.step()
        return model

    ours = run(tt, nn, cls)
    ref = run(torch, torch.nn, {SGD: torch.optim.SGD, Adam: torch.optim.Adam,
                                Adadelta: torch.optim.Adadelta}[cls])
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=n)
        assert p.grad is None if n.startswith("0.") else p.grad is not None
    np.testing.assert_array_equal(ours[0].weight.numpy(),  # untouched
                                  np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))


def test_plain_sgd_by_hand():
    p = tt.tensor([1.0, 2.0], requires_grad=True)
    p.grad = tt.tensor([0.5, -1.0])
    SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.numpy(), [0.95, 2.1], rtol=1e-7)


def test_param_without_grad_is_skipped(device):
    ours, ref = make_params(device)
    opt = Adam(ours, lr=0.1)
    before = ours[1].numpy().copy()
    ours[0].grad = tt.ones(*SHAPES[0], device=device)
    opt.step()
    np.testing.assert_array_equal(ours[1].numpy(), before)
    assert not np.array_equal(ours[0].numpy(), ref[0].detach().numpy())


def test_step_does_not_record_graph():
    p = tt.tensor([1.0], requires_grad=True)
    p.grad = tt.tensor([1.0])
    SGD([p], lr=0.1, momentum=0.9).step()
    assert p.is_leaf and p.requires_grad


@pytest.mark.parametrize("cls", [SGD, Adam])
@pytest.mark.parametrize("lr", [-0.1, -1e-8, float("nan")])
def test_invalid_lr_raises(cls, lr):
    p = tt.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="learning rate"):
        cls([p], lr=lr)
    if lr < 0:  # torch agrees (a NaN learning rate it lets through)
        with pytest.raises(ValueError):
            {SGD: torch.optim.SGD, Adam: torch.optim.Adam}[cls]([torch.zeros(1)], lr=lr)


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_a_zero_learning_rate_leaves_the_parameters_as_pytorch_does(cls):
    p = tt.tensor([1.0, -2.0], requires_grad=True)
    tp = torch.tensor([1.0, -2.0], requires_grad=True)
    p.grad, tp.grad = tt.tensor([0.5, 0.5]), torch.tensor([0.5, 0.5])
    cls([p], lr=0.0).step()
    {SGD: torch.optim.SGD, Adam: torch.optim.Adam}[cls]([tp], lr=0.0).step()
    np.testing.assert_array_equal(p.numpy(), tp.detach().numpy())


def test_other_invalid_arguments():
    p = tt.tensor([1.0], requires_grad=True)
    for kwargs in (dict(eps=-1e-8), dict(weight_decay=-0.1)):
        with pytest.raises(ValueError, match="must be >= 0"):
            Adam([p], **kwargs)
        with pytest.raises(ValueError):  # torch agrees
            torch.optim.Adam([torch.zeros(1)], **kwargs)
    with pytest.raises(ValueError, match="momentum"):
        SGD([p], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="nesterov"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        Adam([p], betas=(1.0, 0.999))
    with pytest.raises(ValueError, match="empty"):
        SGD([], lr=0.1)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        SGD([np.ones(2)], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([tt.tensor([1.0], requires_grad=True) * 2], lr=0.1)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_optimizer_zero_grad(set_to_none):
    p = tt.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    g = p.grad
    SGD([p], lr=0.1).zero_grad(set_to_none=set_to_none)
    if set_to_none:
        assert p.grad is None
    else:
        assert p.grad is g and not g.numpy().any()


def test_param_groups_with_own_lr():
    a = tt.tensor([1.0], requires_grad=True)
    b = tt.tensor([1.0], requires_grad=True)
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    a.grad, b.grad = tt.tensor([1.0]), tt.tensor([1.0])
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.9])
    np.testing.assert_allclose(b.numpy(), [0.5])


@pytest.mark.parametrize("cls,config", [(SGD, SGD_CONFIGS["momentum_wd"]),
                                        (SGD, SGD_CONFIGS["nesterov"]),
                                        (Adam, ADAM_CONFIGS["weight_decay"])])
def test_state_dict_round_trip_continues_identically(device, cls, config):
    def step(params, opt, i):
        for p, g in zip(params, grads_for_step(i)):
            p.grad = tt.tensor(g, device=device)
        opt.step()

    a, _ = make_params(device)  # run A: 6 uninterrupted steps
    opt_a = cls(a, **config)
    b, _ = make_params(device)  # run B: 3 steps, then its state moves to a new optimizer
    opt_b = cls(b, **config)
    for i in range(3):
        step(a, opt_a, i)
        step(b, opt_b, i)
    sd = opt_b.state_dict()
    assert set(sd["state"]) == {0, 1, 2}  # parameters referred to by index
    c = [tt.tensor(p.numpy(), device=device, requires_grad=True) for p in b]
    opt_c = cls(c, lr=123.0)  # the hyper-parameters come from the state dict
    opt_c.load_state_dict(sd)
    assert opt_c.param_groups[0]["lr"] == config["lr"]
    for i in range(3, 6):
        step(a, opt_a, i)
        step(b, opt_b, i)  # must not disturb opt_c's state: the state dict holds copies
        step(c, opt_c, i)
    for p, q, r in zip(a, b, c):
        np.testing.assert_array_equal(q.numpy(), p.numpy())
        np.testing.assert_array_equal(r.numpy(), p.numpy())


def test_state_dict_matches_torch_layout():
    ours, ref = make_params("cpu")
    opt, topt = Adam(ours, lr=0.01), torch.optim.Adam(ref, lr=0.01)
    set_grads(ours, ref, grads_for_step(0), "cpu")
    opt.step()
    topt.step()
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"])
    assert sd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
    for i in sd["state"]:
        assert int(sd["state"][i]["step"]) == int(tsd["state"][i]["step"])
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(sd["state"][i][k], tsd["state"][i][k].numpy(), rtol=1e-6)


def test_load_state_dict_wrong_group_sizes():
    opt = SGD([tt.tensor([1.0], requires_grad=True)], lr=0.1)
    other = SGD([tt.tensor([1.0], requires_grad=True), tt.tensor([2.0], requires_grad=True)],
                lr=0.1)
    with pytest.raises(ValueError, match=r"\[2\].*\[1\]"):
        opt.load_state_dict(other.state_dict())
