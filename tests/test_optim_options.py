"""PyTorch's optimizer options (amsgrad, maximize, decoupled_weight_decay, foreach, fused,
capturable, differentiable), NAdam, RAdam and Adamax, against torch.optim: trajectories over
20 steps with two parameter groups in float64 to 1e-12 with a state-dict round trip half way,
the groups' keys, the state's keys, and the errors; nn.DataParallel as PyTorch runs it on the
CPU (and one GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import kernels, optim

SHAPES = [(4, 3), (3,), (2, 2)]

CASES = {
    "SGD maximize": ("SGD", dict(lr=0.1, maximize=True)),
    "SGD momentum maximize": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1,
                                          maximize=True)),
    "SGD nesterov fused": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, fused=True)),
    "Adam amsgrad": ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    "Adam maximize": ("Adam", dict(lr=0.05, maximize=True)),
    "Adam decoupled": ("Adam", dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True)),
    "Adam everything": ("Adam", dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True,
                                     amsgrad=True, maximize=True, foreach=False)),
    "Adam fused": ("Adam", dict(lr=0.05, fused=True)),
    "AdamW amsgrad maximize": ("AdamW", dict(lr=0.05, amsgrad=True, maximize=True)),
    "Adagrad maximize": ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                         maximize=True)),
    "Adadelta maximize": ("Adadelta", dict(weight_decay=0.1, maximize=True, foreach=True)),
    "RMSprop maximize": ("RMSprop", dict(centered=True, momentum=0.5, maximize=True)),
    "NAdam default": ("NAdam", dict()),
    "NAdam": ("NAdam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01,
                            maximize=True)),
    "NAdam decoupled": ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    "RAdam default": ("RAdam", dict()),
    "RAdam": ("RAdam", dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.1, maximize=True)),
    "RAdam decoupled": ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    "Adamax default": ("Adamax", dict()),
    "Adamax": ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
                              maximize=True)),
}


def twins(dtype, device="cpu", seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    return ([tt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def groups(ps):
    """Two groups: the second with its own rate (and, for every optimizer, no decay)."""
    return [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.003, "weight_decay": 0.0}]


def run(name, dtype, device="cpu", steps=20, reload_at=10):
    cls, config = CASES[name]
    ours, ref = twins(dtype, device)
    make = getattr(optim, cls)
    opt, topt = make(groups(ours), **config), getattr(torch.optim, cls)(groups(ref), **config)
    rng = np.random.default_rng(1)
    for step in range(steps):
        for p, t in zip(ours, ref):
            g = rng.standard_normal(t.shape).astype(dtype)
            p.grad, t.grad = tt.tensor(g, device=device), torch.from_numpy(g)
        opt.step()
        topt.step()
        if step == reload_at:  # a new optimizer continues from the state dict
            opt2 = make(groups(ours), **config)
            opt2.load_state_dict(opt.state_dict())
            opt = opt2
    return opt, topt, ours, ref


@pytest.mark.parametrize("name", list(CASES))
def test_trajectory_matches_torch_in_float64(name):
    opt, topt, ours, ref = run(name, np.float64)
    for p, t in zip(ours, ref):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert [set(g) for g in opt.param_groups] == [set(g) for g in topt.param_groups]
    if not name.startswith("SGD"):
        assert set(opt.state_dict()["state"][0]) == set(topt.state_dict()["state"][0])
        for key, value in topt.state_dict()["state"][0].items():  # every buffer, step too
            np.testing.assert_allclose(np.asarray(opt.state_dict()["state"][0][key]),
                                       value.numpy(), rtol=1e-12, atol=1e-14, err_msg=key)


@pytest.mark.parametrize("name", ["Adam amsgrad", "Adam everything", "NAdam", "RAdam",
                                  "Adamax", "RMSprop maximize"])
def test_trajectory_matches_torch_in_float32_on_each_device(device, name):
    _, _, ours, ref = run(name, np.float32, device)
    for p, t in zip(ours, ref):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "RMSprop",
                                 "NAdam", "RAdam", "Adamax"])
def test_defaults_are_pytorchs(cls):
    kwargs = {"lr": 0.1} if cls == "SGD" else {}
    ours = getattr(optim, cls)([tt.zeros(1, requires_grad=True)], **kwargs)
    theirs = getattr(torch.optim, cls)([torch.zeros(1, requires_grad=True)], **kwargs)
    assert ours.defaults == theirs.defaults
    assert ours.param_groups[0].keys() == theirs.param_groups[0].keys()


def test_maximize_ascends():
    for cls in ("SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop",
                "Adadelta"):
        w = tt.zeros(1, requires_grad=True)
        opt = getattr(optim, cls)([w], lr=0.1, maximize=True)
        w.grad = tt.ones(1)
        opt.step()
        assert w.item() > 0, cls


def test_amsgrad_keeps_the_largest_second_moment():
    w = tt.zeros(1, requires_grad=True)
    opt = optim.Adam([w], amsgrad=True)
    for g in (10.0, 0.1):
        w.grad = tt.tensor([g])
        opt.step()
    state = opt.state[w]
    assert state["max_exp_avg_sq"][0] > state["exp_avg_sq"][0]
    assert state["max_exp_avg_sq"][0] == pytest.approx(0.001 * 100)


def test_the_default_adam_and_sgd_keep_the_kernels(monkeypatch):
    """The options take a separate path only when asked for (issue 12: the CPU kernels)."""
    calls = []
    for name in ("adam_step", "sgd_step"):
        real = getattr(kernels.cpu, name)
        monkeypatch.setattr(kernels.cpu, name,
                            lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    w = tt.zeros(3, requires_grad=True)
    w.grad = tt.ones(3)
    for opt in (optim.Adam([w]), optim.AdamW([w]), optim.Adam([w], maximize=True),
                optim.SGD([w], lr=0.1, momentum=0.9, maximize=True)):
        opt.step()
    assert calls == ["adam_step", "adam_step", "adam_step", "sgd_step"]
    optim.Adam([w], amsgrad=True).step()
    assert len(calls) == 4


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_is_a_speed_option_with_pytorchs_errors(cls):
    w = tt.zeros(2, requires_grad=True)
    assert optim.SGD([w], lr=0.1, fused=True).defaults["fused"] is True
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        getattr(optim, cls)([w], lr=0.1, fused=True, foreach=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        getattr(torch.optim, cls)([torch.zeros(2, requires_grad=True)], lr=0.1, fused=True,
                                  foreach=True)


@pytest.mark.parametrize("cls,option", [
    ("Adam", "capturable"), ("AdamW", "capturable"), ("NAdam", "capturable"),
    ("RMSprop", "capturable"), ("Adadelta", "capturable"), ("Adamax", "capturable"),
    ("RAdam", "capturable"), ("SGD", "differentiable"), ("Adam", "differentiable"),
    ("Adagrad", "differentiable"), ("NAdam", "differentiable")])
def test_capturable_and_differentiable_are_refused_clearly(cls, option):
    w = tt.zeros(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"{cls}: {option}=True"):
        getattr(optim, cls)([w], lr=0.1, **{option: True})
    opt = getattr(optim, cls)([w], lr=0.1)
    with pytest.raises(NotImplementedError, match=f"{option}=True"):  # a group of its own
        opt.add_param_group({"params": [tt.zeros(1, requires_grad=True)], option: True})
    saved = opt.state_dict()
    saved["param_groups"][0][option] = True
    with pytest.raises(NotImplementedError, match=f"{option}=True"):
        opt.load_state_dict(saved)
    assert opt.param_groups[0][option] is False  # unchanged


def test_options_pytorch_lacks_are_refused_by_python():
    w = tt.zeros(2, requires_grad=True)
    for cls, option in (("SGD", "capturable"), ("Adadelta", "fused"), ("Adamax", "fused"),
                        ("Adamax", "decoupled_weight_decay"), ("RMSprop", "amsgrad")):
        for lib, ps in ((optim, [w]), (torch.optim, [torch.zeros(2, requires_grad=True)])):
            with pytest.raises(TypeError, match=option):
                getattr(lib, cls)(ps, lr=0.1, **{option: False})


@pytest.mark.parametrize("cls,bad,error", [
    ("NAdam", dict(lr=-1.0), "learning rate"), ("NAdam", dict(momentum_decay=-0.1),
                                                "momentum_decay"),
    ("RAdam", dict(betas=(0.9, 1.0)), "betas"), ("Adamax", dict(eps=-1.0), "eps"),
    ("Adamax", dict(weight_decay=-1.0), "weight_decay")])
def test_bad_hyper_parameters_are_refused(cls, bad, error):
    with pytest.raises(ValueError, match=f"{cls}: .*{error}"):
        getattr(optim, cls)([tt.zeros(1, requires_grad=True)], **bad)
    with pytest.raises(ValueError):  # (PyTorch refuses them too)
        getattr(torch.optim, cls)([torch.zeros(1, requires_grad=True)], **bad)


@pytest.mark.parametrize("cls", ["NAdam", "RAdam", "Adamax", "Adam"])
def test_pytorchs_state_dict_loads_mid_run_and_continues_as_torch(cls):
    config = dict(lr=0.01, weight_decay=0.1) | ({"amsgrad": True} if cls == "Adam" else {})
    ours, ref = twins(np.float64)
    topt = getattr(torch.optim, cls)(groups(ref), **config)
    rng = np.random.default_rng(2)
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(12)]
    for step, gs in enumerate(grads):
        if step == 6:  # take over from torch: its weights and its state dict
            for p, t in zip(ours, ref):
                p.data[...] = t.detach().numpy()
            opt = getattr(optim, cls)(groups(ours), **config)
            opt.load_state_dict(topt.state_dict())
        for p, t, g in zip(ours, ref, gs):
            t.grad = torch.from_numpy(g)
            p.grad = tt.tensor(g)
        topt.step()
        if step >= 6:
            opt.step()
    for p, t in zip(ours, ref):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_adamw_stays_decoupled_after_loading_an_adam_state():
    w = tt.ones(2, requires_grad=True)
    opt = optim.AdamW([w], weight_decay=0.5)
    opt.load_state_dict(optim.Adam([tt.ones(2, requires_grad=True)]).state_dict())
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
    w.grad = tt.zeros(2)
    opt.step()
    np.testing.assert_allclose(w.numpy(), 1 - 0.001 * 0)  # the loaded decay (0) shrinks nothing


# ------------------------------------------------------------------ nn.DataParallel


def test_data_parallel_on_the_cpu_is_pytorchs():
    torch.manual_seed(0)
    tmodel = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 4))
    twrapped = torch.nn.DataParallel(tmodel)
    model = tt.nn.Sequential(tt.nn.BatchNorm1d(3), tt.nn.Linear(3, 4))
    wrapped = tt.nn.DataParallel(model)
    assert wrapped.module is model and wrapped.device_ids == twrapped.device_ids == []
    assert list(wrapped.state_dict()) == list(twrapped.state_dict())  # module. prefix
    assert repr(wrapped) == repr(twrapped)
    wrapped.load_state_dict({k: v.numpy() for k, v in twrapped.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    out, tout = wrapped(tt.tensor(x)), twrapped(torch.from_numpy(x))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(model[1].weight.grad.numpy(), tmodel[1].weight.grad.numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model[0].running_mean.numpy(), tmodel[0].running_mean.numpy(),
                               rtol=1e-5, atol=1e-7)
    assert isinstance(wrapped, tt.nn.Module) and tt.nn.parallel.DataParallel is tt.nn.DataParallel
    assert list(wrapped.parameters()) == list(model.parameters())


@pytest.mark.parametrize("device_ids", [None, [0, 1], ["cuda:0", "cuda:1"]])
def test_data_parallel_over_several_gpus_points_to_ddp(monkeypatch, device_ids):
    from tinytrain import backend, cuda

    monkeypatch.setattr(backend, "cuda_is_available", lambda: True)  # a host with two GPUs
    monkeypatch.setattr(cuda, "device_count", lambda: 2)
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        tt.nn.DataParallel(tt.nn.Linear(2, 2), device_ids=device_ids)


@pytest.mark.cuda
def test_data_parallel_on_one_gpu_moves_the_module_and_the_inputs():
    if not tt.cuda.is_available():
        pytest.skip("needs a GPU")
    model = tt.nn.Linear(3, 2)
    wrapped = tt.nn.DataParallel(model, device_ids=[0])
    assert model.weight.device == "cuda" and wrapped.device_ids == [0]
    out = wrapped(tt.ones(4, 3))  # a CPU input goes to the GPU, as PyTorch's scatter
    assert out.device == "cuda" and out.shape == (4, 2)
    model.to("cpu")
    with pytest.raises(RuntimeError, match="on device cuda:0"):
        wrapped(tt.ones(4, 3))
