"""Module, Parameter, hooks, modes, state dicts, initialisation and Dropout."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.scale = nn.Parameter(np.ones(3, dtype=np.float32))
        self.fc2 = nn.Linear(3, 2, bias=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)) * self.scale)


# ------------------------------------------------------------------ registration


def test_registration_order_and_names():
    m = Block()
    assert [n for n, _ in m.named_parameters()] == [
        "scale", "fc1.weight", "fc1.bias", "fc2.weight"]  # own first, then children in order
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert m.fc2.bias is None
    assert len(list(m.parameters())) == 4


def test_named_parameters_match_torch_for_nested_sequential():
    m = nn.Sequential(nn.Linear(2, 3), nn.Sigmoid(), nn.Sequential(nn.Linear(3, 3), nn.ReLU()),
                      nn.Linear(3, 1))
    t = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Sigmoid(),
                            torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()),
                            torch.nn.Linear(3, 1))
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in t.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.0.weight", "2.0.bias", "3.weight", "3.bias"]
    assert list(m.state_dict()) == list(t.state_dict())
    assert [p.shape for p in m.parameters()] == [tuple(p.shape) for p in t.parameters()]


def test_sequential_from_ordered_dict_and_indexing():
    a, b = nn.Linear(2, 2), nn.ReLU()
    m = nn.Sequential(OrderedDict([("fc", a), ("act", b)]))
    assert [n for n, _ in m.named_parameters()] == ["fc.weight", "fc.bias"]
    assert m[0] is a and m[-1] is b and len(m) == 2 and list(m) == [a, b]


def test_shared_parameter_listed_once():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    m[1].weight = m[0].weight
    assert len(list(m.parameters())) == 3
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias", "1.bias"]


def test_reassigning_attribute_replaces_registration():
    m = Block()
    m.fc1 = nn.Linear(4, 3, bias=False)
    assert "fc1.bias" not in dict(m.named_parameters())
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]  # same place, as torch
    new_scale = nn.Parameter(np.zeros(3, np.float32))
    m.scale = new_scale
    assert m.scale is new_scale and next(iter(m.named_parameters()))[0] == "scale"
    with pytest.raises(TypeError, match="as parameter 'scale'"):
        m.scale = 3.0  # as in torch: only a Parameter (or None) replaces a parameter
    with pytest.raises(TypeError):
        torch.nn.Linear(2, 2).weight = 3.0
    m.scale = None
    assert m.scale is None and "scale" not in dict(m.named_parameters())
    del m.fc2
    assert [n for n, _ in m.named_children()] == ["fc1", "act"]


def test_plain_attribute_then_parameter_and_module():
    m = nn.Module()
    m.w = None
    m.sub = 3
    p, sub = nn.Parameter(np.zeros(2, np.float32)), nn.ReLU()
    m.w = p
    m.sub = sub
    assert m.w is p and m.sub is sub  # the old plain values must not shadow them
    assert [n for n, _ in m.named_parameters()] == ["w"]
    assert [n for n, _ in m.named_children()] == ["sub"]


def test_assign_before_init_raises():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(1, np.float32))

    with pytest.raises(AttributeError, match="super"):
        Broken()


def test_parameter_is_a_leaf_requiring_grad():
    p = nn.Parameter(np.zeros(2, np.float32))
    assert isinstance(p, tt.Tensor) and p.requires_grad and p.is_leaf


# ------------------------------------------------------------------------ hooks


def test_forward_pre_hook_replaces_args_and_can_be_removed():
    m = nn.Identity()
    seen = []

    def pre(module, args):
        seen.append((module, args))
        return (args[0] * 2.0,)

    h = m.register_forward_pre_hook(pre)
    x = tt.tensor([1.0, 2.0])
    np.testing.assert_array_equal(m(x).numpy(), [2.0, 4.0])
    assert seen[0][0] is m and seen[0][1][0] is x
    h.remove()
    np.testing.assert_array_equal(m(x).numpy(), [1.0, 2.0])
    assert len(seen) == 1


def test_forward_pre_hook_returning_single_value_and_none():
    m = nn.Identity()
    m.register_forward_pre_hook(lambda mod, args: None)           # keeps args
    m.register_forward_pre_hook(lambda mod, args: args[0] + 1.0)  # a non-tuple is wrapped
    np.testing.assert_array_equal(m(tt.tensor([1.0])).numpy(), [2.0])


def test_forward_hook_sees_args_and_output_and_replaces_output():
    m = nn.Linear(2, 2)
    seen = []

    def hook(module, args, output):
        seen.append((module, args, output))
        return output * 0.0 + 7.0

    h = m.register_forward_hook(hook)
    x = tt.tensor([[1.0, 2.0]])
    y = m(x)
    np.testing.assert_array_equal(y.numpy(), [[7.0, 7.0]])
    mod, args, out = seen[0]
    assert mod is m and args[0] is x
    np.testing.assert_allclose(out.numpy(), m.forward(x).numpy())
    h.remove()
    np.testing.assert_allclose(m(x).numpy(), m.forward(x).numpy())
    assert len(seen) == 1


def test_forward_hook_gets_args_after_pre_hook():
    m = nn.Identity()
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 3.0,))
    got = []
    m.register_forward_hook(lambda mod, args, out: got.append(args[0].numpy().copy()))
    m(tt.tensor([1.0]))
    np.testing.assert_array_equal(got[0], [3.0])


def test_hooks_not_run_by_forward():
    m = nn.Sequential(nn.Linear(2, 2))
    calls = []
    m.register_forward_pre_hook(lambda *a: calls.append("pre"))
    m.register_forward_hook(lambda *a: calls.append("post"))
    m[0].register_forward_hook(lambda *a: calls.append("child"))
    m.forward(tt.tensor([[1.0, 2.0]]))
    assert calls == ["child"]  # forward() skips m's hooks; Sequential calls its children
    m(tt.tensor([[1.0, 2.0]]))
    assert calls == ["child", "pre", "child", "post"]


def test_module_without_forward_raises():
    with pytest.raises(NotImplementedError, match="Module"):
        nn.Module()(tt.tensor([1.0]))


# ---------------------------------------------------------------- modes, grads


def test_train_eval_recursive():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5), nn.ReLU()))
    assert all(x.training for x in m.modules())
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m[1].train()
    assert not m.training and not m[0].training and m[1].training and m[1][0].training
    m.train()
    assert all(x.training for x in m.modules())


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    m = Block()
    m(tt.ones(5, 4)).sum().backward()
    grads = {n: p.grad for n, p in m.named_parameters()}
    assert all(g is not None for g in grads.values())
    m.zero_grad(set_to_none=set_to_none)
    for n, p in m.named_parameters():
        if set_to_none:
            assert p.grad is None
        else:
            assert p.grad is grads[n]  # same tensor, zeroed in place
            assert not p.grad.numpy().any()


def test_zero_grad_default_is_set_to_none():
    m = nn.Linear(2, 2)
    m(tt.ones(1, 2)).sum().backward()
    m.zero_grad()
    assert m.weight.grad is None


# ------------------------------------------------------------------- state dicts


def test_state_dict_round_trip():
    src, dst = Block(), Block()
    sd = src.state_dict()
    assert list(sd) == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert all(not v.requires_grad for v in sd.values())
    dst.load_state_dict(sd)
    for (n, a), (_, b) in zip(src.named_parameters(), dst.named_parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=n)
        assert a is not b and not np.shares_memory(a.numpy(), b.numpy())
    x = tt.randn(3, 4)
    np.testing.assert_array_equal(src(x).numpy(), dst(x).numpy())


def test_load_state_dict_keeps_parameter_objects_and_accepts_arrays():
    m = nn.Linear(2, 3)
    w = m.weight
    m.load_state_dict({"weight": np.arange(6, dtype=np.float32).reshape(3, 2),
                       "bias": [1.0, 2.0, 3.0]})
    assert m.weight is w
    np.testing.assert_array_equal(m.weight.numpy(), np.arange(6).reshape(3, 2))
    np.testing.assert_array_equal(m.bias.numpy(), [1.0, 2.0, 3.0])


def test_state_dict_loads_into_torch_and_back():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(m(tt.tensor(x)).numpy(), t(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_load_state_dict_missing_and_unexpected_keys():
    m = nn.Linear(2, 2)
    sd = m.state_dict()
    del sd["bias"]
    sd["extra"] = tt.zeros(1)
    with pytest.raises(KeyError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert "missing keys ['bias']" in msg and "unexpected keys ['extra']" in msg
    assert isinstance(info.value, RuntimeError) and not msg.startswith("'")  # torch's type


def test_load_state_dict_non_strict_loads_what_matches():
    m = nn.Linear(2, 2)
    old_bias = m.bias.numpy().copy()
    result = m.load_state_dict({"weight": np.zeros((2, 2), np.float32), "extra": np.ones(1)},
                               strict=False)
    assert not m.weight.numpy().any()
    np.testing.assert_array_equal(m.bias.numpy(), old_bias)
    theirs = torch.nn.Linear(2, 2).load_state_dict(
        {"weight": torch.zeros(2, 2), "extra": torch.ones(1)}, strict=False)
    assert (result.missing_keys, result.unexpected_keys) == (["bias"], ["extra"])
    assert tuple(result) == tuple(theirs)
    assert repr(m.load_state_dict(m.state_dict())) == "<All keys matched successfully>"


def test_load_state_dict_shape_mismatch_message():
    m = nn.Sequential(nn.Linear(2, 3))
    sd = nn.Sequential(nn.Linear(2, 4)).state_dict()
    before = m[0].weight.numpy().copy()
    with pytest.raises(ValueError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert "0.weight" in msg and "(4, 2)" in msg and "(3, 2)" in msg
    assert isinstance(info.value, RuntimeError)  # torch's type
    np.testing.assert_array_equal(m[0].weight.numpy(), before)


def test_load_state_dict_copies_nothing_when_a_later_value_does_not_fit():
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 2))
    sd = {k: tt.zeros(*v.shape) for k, v in m.state_dict().items()}
    sd["1.bias"] = tt.zeros(5)
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    with pytest.raises(ValueError, match="1.bias has shape"):
        m.load_state_dict(sd)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=k)


def test_buffers_are_state_but_not_parameters():
    m = nn.Linear(2, 2)
    m.register_buffer("running", tt.ones(2))
    assert "running" in m.state_dict() and "running" not in dict(m.named_parameters())
    m.load_state_dict({**m.state_dict(), "running": np.full(2, 5.0, np.float32)})
    np.testing.assert_array_equal(m.running.numpy(), [5.0, 5.0])


class RunningMean(nn.Module):
    """A module that replaces its buffer by assignment, as BatchNorm-like code does."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("running", tt.zeros(2))
        self.register_buffer("scratch", tt.zeros(1), persistent=False)

    def forward(self, x):
        self.running = self.running * 0.9 + x.mean(0) * 0.1  # a new tensor, same buffer
        return x - self.running


def _torch_running_mean():
    class TorchRunningMean(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("running", torch.zeros(2))
            self.register_buffer("scratch", torch.zeros(1), persistent=False)

        def forward(self, x):
            self.running = self.running * 0.9 + x.mean(0) * 0.1
            return x - self.running

    return TorchRunningMean()


def test_reassigned_buffer_stays_registered_as_in_torch():
    m, t = RunningMean(), _torch_running_mean()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for _ in range(3):
        m(tt.tensor(x))
        t(torch.tensor(x))
    assert list(m.state_dict()) == list(t.state_dict()) == ["running"]  # scratch: not persistent
    np.testing.assert_allclose(m.state_dict()["running"].numpy(), t.state_dict()["running"],
                               rtol=1e-6)
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in t.named_buffers()]
    m.running = tt.ones(2)  # a plain assignment replaces the buffer, it stays a buffer
    t.running = torch.ones(2)
    assert "running" in m.state_dict() and "running" in t.state_dict()
    m.running = None  # None too, as in torch: then it is not in the state dict
    t.running = None
    assert list(m.state_dict()) == list(t.state_dict()) == []
    with pytest.raises(TypeError, match="as buffer 'scratch'"):
        m.scratch = 3
    with pytest.raises(TypeError):
        t.scratch = 3


def test_buffer_moves_with_to_and_loads_from_state_dict():
    m = RunningMean()
    m.running = tt.full((2,), 3.0)
    m.to(tt.float64)
    assert m.running.dtype == tt.float64 and m.scratch.dtype == tt.float64
    m2 = RunningMean()
    m2.to(tt.float64)
    m2.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(m2.running.numpy(), [3.0, 3.0])


def test_register_buffer_rejects_what_torch_rejects():
    m, t = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    for lib_m in (m, t):
        with pytest.raises(KeyError):
            lib_m.register_buffer("weight", None)  # a parameter's name
        with pytest.raises(KeyError):
            lib_m.register_buffer("a.b", None)
        with pytest.raises(TypeError):
            lib_m.register_buffer("x", 3.0)


# ---------------------------------------------------------------- initialisation


@pytest.mark.parametrize("fan_in,fan_out", [(1, 5), (16, 64), (784, 30), (300, 200)])
def test_linear_default_init_statistics(fan_in, fan_out):
    tt.manual_seed(fan_in)
    m = nn.Linear(fan_in, fan_out)
    bound = 1 / math.sqrt(fan_in)  # PyTorch: kaiming_uniform_(a=sqrt(5)) and bias U(+-bound)
    for p in (m.weight, m.bias):
        v = p.numpy()
        assert p.dtype == np.float32
        assert np.all(np.abs(v) <= bound)
        assert len(np.unique(v)) > 0.9 * v.size
        if v.size >= 1000:  # uniform on [-b, b]: mean 0, std b/sqrt(3), reaches the edges
            assert abs(v.mean()) < 0.05 * bound
            assert abs(v.std() - bound / math.sqrt(3)) < 0.05 * bound
            assert np.abs(v).max() > 0.98 * bound
    t = torch.nn.Linear(fan_in, fan_out)
    assert np.abs(t.weight.detach().numpy()).max() <= bound  # the same rule in torch
    if fan_in * fan_out >= 1000:
        t_std = t.weight.detach().numpy().std()
        assert abs(m.weight.numpy().std() - t_std) < 0.1 * t_std


def test_init_helpers():
    from tinytrain.nn import init

    t = tt.zeros(200, 50)
    assert init.calculate_fan_in_and_fan_out(tt.zeros(8, 3, 5, 5)) == (75, 200)
    init.xavier_uniform_(t)
    assert np.abs(t.numpy()).max() <= math.sqrt(6 / 250)
    init.kaiming_uniform_(t, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 50)
    assert np.abs(t.numpy()).max() <= bound and np.abs(t.numpy()).max() > 0.95 * bound
    init.normal_(t, 1.0, 0.1)
    assert abs(t.numpy().mean() - 1.0) < 0.01 and abs(t.numpy().std() - 0.1) < 0.01
    init.zeros_(t)
    assert not t.numpy().any()
    with pytest.raises(ValueError, match="2 dimensions"):
        init.calculate_fan_in_and_fan_out(tt.zeros(3))


def test_manual_seed_reproducible():
    tt.manual_seed(123)
    a = nn.Linear(5, 4)
    r1 = tt.randn(3).numpy()
    tt.manual_seed(123)
    b = nn.Linear(5, 4)
    r2 = tt.randn(3).numpy()
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())
    np.testing.assert_array_equal(r1, r2)
    tt.manual_seed(124)
    assert not np.array_equal(nn.Linear(5, 4).weight.numpy(), a.weight.numpy())


def test_rng_state_round_trip():
    tt.manual_seed(7)
    state = tt.get_rng_state()
    a = tt.rand(4).numpy()
    tt.randn(10)
    tt.set_rng_state(state)
    np.testing.assert_array_equal(tt.rand(4).numpy(), a)


# ------------------------------------------------------------------------ dropout


def test_dropout_train_vs_eval():
    tt.manual_seed(0)
    d = nn.Dropout(0.25)
    x = tt.ones(200, 100)
    y = d(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)  # survivors scaled by 1/(1-p)
    d.eval()
    np.testing.assert_array_equal(d(x).numpy(), x.numpy())


def test_dropout_gradient_uses_same_mask():
    tt.manual_seed(1)
    x = tt.ones(50, 40, requires_grad=True)
    y = nn.Dropout(0.5)(x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())  # d(x*mask)/dx = mask = y here


def test_dropout_reproducible_and_p_validation():
    tt.manual_seed(3)
    a = nn.Dropout(0.5)(tt.ones(10, 10)).numpy()
    tt.manual_seed(3)
    b = nn.Dropout(0.5)(tt.ones(10, 10)).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(nn.Dropout(0.0)(tt.ones(3)).numpy(), np.ones(3))
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="dropout probability"):
            nn.Dropout(p)
    np.testing.assert_array_equal(nn.Dropout(1.0)(tt.ones(3)).numpy(), np.zeros(3))  # as torch


# ------------------------------------------------------------------------ devices


def test_module_to_device_keeps_parameter_objects(device):
    m = Block()
    params = list(m.parameters())
    m.to(device)
    assert [p is q for p, q in zip(params, m.parameters())] == [True] * 4
    assert all(p.device == device for p in m.parameters())
    y = m(tt.ones(2, 4, device=device))
    assert y.device == device
    y.sum().backward()
    assert all(p.grad.device == device for p in m.parameters())


def test_layers_match_torch(device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    for ours, ref in [(nn.Flatten(), torch.nn.Flatten()), (nn.Sigmoid(), torch.nn.Sigmoid()),
                      (nn.Tanh(), torch.nn.Tanh()), (nn.ReLU(), torch.nn.ReLU()),
                      (nn.Flatten(0, 2), torch.nn.Flatten(0, 2))]:
        np.testing.assert_allclose(ours(tt.tensor(x, device=device)).numpy(),
                                   ref(torch.from_numpy(x)).numpy(), rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- registration and
# containers as PyTorch has them (a review's client programs; each case was silently wrong)


def test_sequential_renumbers_after_delete_so_append_keeps_every_layer():
    ours = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 3))
    for s, sig in ((ours, nn.Sigmoid()), (theirs, torch.nn.Sigmoid())):
        del s[0]
        s.append(sig)
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    assert list(ours._modules) == list(theirs._modules) == ["0", "1", "2"]
    with pytest.raises(IndexError, match="out of range for a Sequential of 3"):
        ours[5] = nn.ReLU()


@pytest.mark.parametrize("make", [lambda: nn.Sequential(nn.Linear(2, 2), nn.ReLU()),
                                  lambda: nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])])
def test_insert_of_a_non_module_changes_nothing(make):
    container = make()
    with pytest.raises(TypeError, match="int is not a Module"):
        container.insert(0, 5)
    assert len(container) == 2 and isinstance(container[0], nn.Linear)


def test_names_and_kinds_are_checked_as_pytorch_does():
    m = nn.Module()
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.register_parameter("w", tt.zeros(3))  # a plain Tensor would be neither trained nor saved
    with pytest.raises(TypeError, match="module name should be a string"):
        m.add_module(0, nn.ReLU())
    for bad in ("a.b", ""):
        with pytest.raises(KeyError, match="can't be empty or contain"):
            m.add_module(bad, nn.ReLU())
    m.fc = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="as child module 'fc'"):
        m.fc = tt.zeros(3)
    m.plain = 1
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_parameter("plain", nn.Parameter(np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train("no")


def test_to_refuses_integer_dtypes_and_names_an_unknown_device():
    m = nn.Linear(2, 2)
    before = m.weight.numpy().copy()
    for dtype in (np.int32, bool, tt.int64):
        with pytest.raises(TypeError, match="only accepts floating point dtypes"):
            m.to(dtype)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        m.to("tpu")
    np.testing.assert_array_equal(m.weight.numpy(), before)
    assert m.to(np.float64).weight.dtype == np.float64


def test_load_state_dict_checks_every_value_before_copying_any():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    for bad in (np.array(["a", "b"]), None):
        sd = {k: np.ones(v.shape, np.float32) for k, v in m.state_dict().items()}
        sd["1.bias"] = bad
        with pytest.raises(TypeError, match="1.bias is"):
            m.load_state_dict(sd)
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(v.numpy(), before[k])


def test_tied_weights_are_in_the_state_dict_under_both_names_like_torch():
    def tied(lib):
        a, b = lib.Linear(3, 3), lib.Linear(3, 3)
        b.weight = a.weight
        return lib.Sequential(a, b)

    ours, theirs = tied(nn), tied(torch.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 3
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    np.testing.assert_array_equal(ours[1].weight.numpy(), theirs[1].weight.detach().numpy())


def test_batchnorm_loads_a_state_dict_without_its_batch_count_like_torch():
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    sd = {k: v for k, v in theirs.state_dict().items() if k != "num_batches_tracked"}
    theirs.load_state_dict(sd)  # strict, and accepted
    ours.load_state_dict({k: v.numpy() for k, v in sd.items()})
    assert int(ours.num_batches_tracked.item()) == 0
    with pytest.raises(KeyError, match="missing keys \\['running_var'\\]"):
        ours.load_state_dict({k: v.numpy() for k, v in sd.items() if k != "running_var"})


@pytest.mark.parametrize("args", [(2, 1), (5,), (0, 3)])
def test_flatten_refuses_dimensions_out_of_range_like_torch(args):
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(Exception) as theirs:
        torch.nn.Flatten(*args)(torch.from_numpy(x))
    with pytest.raises((IndexError, ValueError, RuntimeError)):
        nn.Flatten(*args)(tt.tensor(x))
    assert theirs.type in (IndexError, RuntimeError)


def test_linear_with_no_input_features_gives_the_bias_like_torch():
    ours, theirs = nn.Linear(0, 3), torch.nn.Linear(0, 3)
    ours.bias.data[...] = theirs.bias.detach().numpy()
    y = ours(tt.zeros((2, 0)))
    np.testing.assert_array_equal(y.numpy(), theirs(torch.zeros(2, 0)).detach().numpy())
    y.sum().backward()
    assert ours.weight.grad.shape == (3, 0) and ours.bias.grad.numpy().tolist() == [2, 2, 2]


@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1},
                                    {"weight": np.arange(1, 5, dtype=np.float32)}])
def test_cross_entropy_of_an_all_ignored_batch_has_zero_gradients_like_torch(kwargs):
    """The mean is NaN (0 / 0) in both, but PyTorch's gradient is zero: one optimizer step on
    an all-padding batch must not turn the weights NaN."""
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ours = tt.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    t = np.full(3, -100)
    kw_t = {k: tt.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
    kw_p = {k: torch.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
    loss = nn.functional.cross_entropy(ours, tt.tensor(t), **kw_t)
    ref = torch.nn.functional.cross_entropy(theirs, torch.tensor(t), **kw_p)
    loss.backward()
    ref.backward()
    assert np.isnan(loss.item()) and torch.isnan(ref)
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        nn.functional.cross_entropy(ours, tt.tensor(np.zeros(3, np.int64)), label_smoothing=1.5)


def test_random_init_refuses_integer_tensors():
    for init in (nn.init.normal_, nn.init.uniform_, nn.init.kaiming_uniform_):
        with pytest.raises(TypeError, match="expects a floating point tensor"):
            init(tt.zeros((3, 3), dtype=tt.int64))


def test_functional_argument_checks_match_torch():
    w = tt.zeros((5, 2), requires_grad=True)
    idx = tt.tensor([0, 1])
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.functional.embedding(idx, w, padding_idx=5)
    with pytest.raises(ValueError, match="'weight' must be 2-D"):
        nn.functional.embedding(idx, tt.zeros(5))
    a, b = tt.zeros(3), tt.ones(3)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values"):
        nn.functional.huber_loss(a, b, delta=-1.0)  # (PyTorch's RuntimeError and message)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values"):
        nn.functional.smooth_l1_loss(a, b, beta=-1.0)
    x = np.arange(12.0).reshape(1, 2, 6)
    for args in (((-4, -4),), ((6, 0), "reflect"), ((7, 0), "circular"), ((1, 1), "reflect", 1.0)):
        with pytest.raises(RuntimeError):
            torch.nn.functional.pad(torch.tensor(x), *args)
        with pytest.raises(ValueError):
            nn.functional.pad(tt.tensor(x), *args)
    for args in (((-3, -3),), ((5, 0), "reflect"), ((6, 0), "circular")):
        assert (tuple(nn.functional.pad(tt.tensor(x), *args).shape)
                == tuple(torch.nn.functional.pad(torch.tensor(x), *args).shape))


def test_a_tied_weight_saved_under_one_name_still_loads_strictly():
    """Before tinytrain listed tied weights under every name, its state dicts had one."""
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight
    model = nn.Sequential(a, b)
    older = {k: v.numpy() + 1 for k, v in model.state_dict().items() if k != "1.weight"}
    model.load_state_dict(older)
    np.testing.assert_array_equal(model[1].weight.numpy(), older["0.weight"])
    with pytest.raises(KeyError, match="missing keys \\['0.bias'\\]"):
        model.load_state_dict({k: v for k, v in older.items() if k != "0.bias"})


# ------------------------------------------------------------------ fifth review round


def _both(lib):
    """Sequential(shared, ReLU, shared) with a BatchNorm shared twice, in either library."""
    shared, bn = lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2)
    return lib.nn.Sequential(shared, lib.nn.ReLU(), shared, bn, bn), shared


def test_a_module_registered_twice_is_visited_once_like_torch():
    for lib in (tt, torch):
        net, shared = _both(lib)
        linear = lib.nn.Linear
        with lib.no_grad():
            shared.weight.fill_(1.0)
            net.apply(lambda m, linear=linear: m.weight.mul_(0.5) if isinstance(m, linear)
                      else None)
        assert float(shared.weight.sum()) == 2.0  # halved once, not twice
        assert len(list(net.modules())) == 4 and len(list(net.children())) == 3
        assert len(list(net.buffers())) == 3 and len(list(net.named_buffers())) == 3
    ours, theirs = _both(tt)[0], _both(torch)[0]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert ([n for n, _ in ours.named_modules(remove_duplicate=False)]
            == [n for n, _ in theirs.named_modules(remove_duplicate=False)])
    assert list(ours.state_dict()) == list(theirs.state_dict())  # every name still there
    assert repr(ours).count("Linear(") == repr(theirs).count("Linear(") == 2


def test_train_goes_through_each_childs_own_train_like_torch():
    class FrozenBN(nn.BatchNorm1d):
        def train(self, mode=True):
            return super().train(False)

    net = nn.Sequential(nn.Sequential(nn.Linear(2, 2), FrozenBN(2)), nn.Dropout())
    net.eval()
    net.train()
    assert net.training and net[0].training and net[1].training
    assert not net[0][1].training  # its override kept it in eval mode


def test_assigning_over_a_parameter_or_a_none_module_like_torch():
    m = nn.Module()
    m.w = nn.Parameter(tt.zeros(2))
    with pytest.raises(TypeError, match="cannot assign 'Linear' as parameter 'w'"):
        m.w = nn.Linear(1, 1)
    ours, theirs = nn.Module(), torch.nn.Module()
    for mod, lib in ((ours, nn), (theirs, torch.nn)):
        mod.a, mod.c = lib.Linear(1, 1), lib.Linear(1, 1)
        mod.a = None  # keeps its slot
        mod.a = lib.Linear(1, 1)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "a.weight", "a.bias", "c.weight", "c.bias"]


def test_a_class_weight_of_a_loss_is_a_buffer_like_torch():
    w = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    for ours, theirs in ((nn.CrossEntropyLoss(weight=tt.tensor(w)),
                          torch.nn.CrossEntropyLoss(weight=torch.tensor(w))),
                         (nn.NLLLoss(weight=tt.tensor(w)),
                          torch.nn.NLLLoss(weight=torch.tensor(w))),
                         (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss())):
        assert list(ours.state_dict()) == list(theirs.state_dict())
    loss = nn.CrossEntropyLoss(weight=tt.tensor(w))
    loss.load_state_dict({"weight": tt.tensor(w * 2)})
    np.testing.assert_array_equal(loss.weight.numpy(), w * 2)


def test_load_state_dict_takes_a_pytorch_state_dict():
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    ours = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    ours.load_state_dict(theirs.state_dict())
    for name, t in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[name].numpy(), t.numpy())


@pytest.mark.parametrize("shape,target_shape", [((4,), ()), ((5, 4, 3), (5, 3)),
                                                ((2, 4, 3, 2), (2, 3, 2))])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1}, {"weight": [1.0, 2, 3, 4]},
                                    {"ignore_index": 1}])
def test_cross_entropy_and_nll_take_unbatched_and_k_dim_inputs_like_torch(
        shape, target_shape, reduction, kwargs):
    rng = np.random.default_rng(len(shape))
    x, t = rng.standard_normal(shape), rng.integers(0, 4, target_shape)
    losses = [("cross_entropy", kwargs)]
    if "label_smoothing" not in kwargs:
        losses.append(("nll_loss", kwargs))
    for name, kw in losses:
        ours, theirs = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ko = {k: tt.tensor(v) if k == "weight" else v for k, v in kw.items()}
        kt = {k: torch.tensor(v, dtype=torch.float64) if k == "weight" else v
              for k, v in kw.items()}
        a = getattr(nn.functional, name)(ours, tt.tensor(t), reduction=reduction, **ko)
        b = getattr(torch.nn.functional, name)(theirs, torch.tensor(t), reduction=reduction, **kt)
        assert a.shape == tuple(b.shape), name
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, err_msg=name)
        g = rng.standard_normal(a.shape)
        (a * tt.tensor(g)).sum().backward()
        (b * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
    probs = rng.random(shape)
    a = nn.functional.cross_entropy(tt.tensor(x), tt.tensor(probs), reduction=reduction)
    b = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(probs),
                                          reduction=reduction)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)


def test_class_losses_name_themselves_and_the_shapes_in_errors():
    with pytest.raises(ValueError, match=r"nll_loss: weight must be \[C\] = \[4\]"):
        nn.functional.nll_loss(tt.zeros(3, 4), tt.zeros(3, dtype=tt.int64), weight=tt.ones(3))
    with pytest.raises(ValueError, match=r"targets must be class indices of shape \(5, 3\)"):
        nn.functional.cross_entropy(tt.zeros(5, 4, 3), tt.zeros(5, dtype=tt.int64))


def test_pooling_and_softmax_print_their_arguments_like_torch():
    for ours, theirs in ((nn.MaxPool2d(3), torch.nn.MaxPool2d(3)),
                         (nn.AvgPool2d(2), torch.nn.AvgPool2d(2))):
        assert ours.stride == theirs.stride == ours.kernel_size
        assert f"stride={theirs.stride}" in repr(ours)
    assert repr(nn.LogSoftmax(dim=1)) == repr(torch.nn.LogSoftmax(dim=1)) == "LogSoftmax(dim=1)"


def test_named_modules_memo_holds_the_modules_like_torch():
    for lib in (nn, torch.nn):
        inner = lib.Linear(2, 2)
        net, memo = lib.Sequential(inner, lib.ReLU()), set()
        assert [n for n, _ in net.named_modules(memo)] == ["", "0", "1"]
        assert inner in memo
        assert list(net.named_modules(memo)) == []  # every one seen already


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_pad_with_negative_sizes_crops_as_torch(mode):
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(400):
        x = rng.standard_normal(tuple(int(v) for v in rng.integers(1, 6, 3)))
        pad = tuple(int(v) for v in rng.integers(-4, 5, 2 * int(rng.integers(1, 3))))
        try:
            ref = torch.nn.functional.pad(torch.tensor(x), pad, mode=mode).numpy()
        except RuntimeError:
            continue
        if ref.size == 0:  # (reflect/replicate: PyTorch refuses an empty result)
            continue
        out = nn.functional.pad(tt.tensor(x), pad, mode=mode).numpy()
        assert out.shape == ref.shape, (x.shape, pad)
        np.testing.assert_array_equal(out, ref)
        checked += 1
    assert checked > 100
    with pytest.raises(ValueError, match=r"crops more than the 5 elements there"):
        nn.functional.pad(tt.ones(1, 1, 5), (3, -6))
    empty = nn.functional.pad(tt.zeros(0, 2, 4, 4), (1, 1, 1, 1), mode=mode)  # empty batch
    assert empty.shape == (0, 2, 6, 6)


@pytest.mark.parametrize("call,match", [
    (lambda L: L.nn.functional.dropout(L.arange(10), 0.3), "float"),
    (lambda L: L.nn.functional.layer_norm(L.ones(7), (7,), weight=L.ones(7, 1)),
     "same shape as normalized_shape"),
    (lambda L: L.nn.functional.layer_norm(L.ones(2, 7), (7,), weight=L.ones(7).double()),
     "dtype"),
    (lambda L: L.nn.functional.batch_norm(L.ones(2, 3), L.zeros(3), L.ones(3),
                                          weight=L.ones(4)), "should contain 3 elements"),
    (lambda L: L.nn.functional.batch_norm(L.ones(2, 3), L.zeros(5), L.ones(3),
                                          training=True), "should contain 3 elements"),
    (lambda L: L.nn.functional.adaptive_avg_pool2d(L.ones(1, 1, 4, 4), (2, 2, 2)),
     "output_size must be"),
])
def test_layer_functionals_refuse_what_torch_refuses(call, match):
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        call(torch)
    with pytest.raises((RuntimeError, ValueError, TypeError), match=match):
        call(tt)


def test_softmax_without_a_dim_takes_torchs_implicit_one():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    for shape in ((4,), (2, 3), (2, 3, 4), (2, 3, 4, 1)):
        v = x.reshape(-1)[: math.prod(shape)].reshape(shape)
        with pytest.warns(UserWarning, match="Implicit dimension"):
            ours = nn.functional.softmax(tt.tensor(v), None)
        with pytest.warns(UserWarning):
            theirs = torch.nn.functional.softmax(torch.tensor(v), None)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_normalization_and_dropout_accept_what_torch_accepts():
    x = tt.ones(2, 3)
    for layer in (nn.LayerNorm(3), nn.BatchNorm1d(3)):  # float16 input, float32 parameters
        assert layer(x.half()).shape == (2, 3)
    out = nn.functional.batch_norm(x, None, None, weight=tt.ones(3, 1), training=True)
    assert out.shape == (2, 3)  # (PyTorch checks the number of elements only)
    dropped = nn.functional.dropout(tt.arange(4), 1.0)
    assert dropped.dtype == tt.int64 and dropped.tolist() == [0, 0, 0, 0]
