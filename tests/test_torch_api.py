"""The PyTorch names that ported scripts use: losses and functions against torch, devices,
``tt.cuda`` / ``tt.accelerator`` / ``tt.backends``, ``tt.utils.data``, and the errors for
names outside tinytrain's scope."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import nn

rng = np.random.default_rng(0)
LOGITS = rng.standard_normal((5, 4)).astype(np.float32)
TARGETS = np.array([0, 3, 1, 3, 2])


def pair(a, requires_grad=True):
    return tt.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def check(out, ref, inputs, rtol=1e-5, atol=1e-6):
    """Same values as torch, and the same gradients for a random upstream gradient."""
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    assert str(out.dtype) == str(ref.dtype).removeprefix("torch.")
    g = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    for x, t in inputs:
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_of_log_softmax_matches_torch_and_cross_entropy(reduction):
    (x, t) = pair(LOGITS)
    out = F.nll_loss(F.log_softmax(x, dim=1), tt.tensor(TARGETS), reduction=reduction)
    ref = TF.nll_loss(TF.log_softmax(t, dim=1), torch.tensor(TARGETS), reduction=reduction)
    check(out, ref, [(x, t)])
    np.testing.assert_allclose(
        out.numpy(), F.cross_entropy(tt.tensor(LOGITS), TARGETS, reduction=reduction).numpy(),
        rtol=1e-6)
    module = nn.NLLLoss(reduction=reduction)(tt.tensor(LOGITS), tt.tensor(TARGETS))
    np.testing.assert_allclose(module.numpy(), TF.nll_loss(
        torch.tensor(LOGITS), torch.tensor(TARGETS), reduction=reduction).numpy(), rtol=1e-6)


def test_nll_loss_rejects_bad_targets():
    with pytest.raises(ValueError, match=r"nll_loss: targets must lie in \[0, 4\)"):
        F.nll_loss(tt.tensor(LOGITS), tt.tensor([0, 1, 2, 3, 4]))
    with pytest.raises(ValueError, match="nll_loss: targets must be"):
        F.nll_loss(tt.tensor(LOGITS), tt.tensor([0, 1]))
    with pytest.raises(ValueError, match="unknown reduction"):
        F.nll_loss(tt.tensor(LOGITS), tt.tensor(TARGETS), reduction="avg")


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_matches_torch(dim):
    x, t = pair(LOGITS * 30)  # large values: must not overflow
    check(F.softmax(x, dim=dim), TF.softmax(t, dim=dim), [(x, t)])
    y, u = pair(LOGITS)
    check(nn.Softmax(dim)(y) * 2 + nn.LogSoftmax(dim)(y), TF.softmax(u, dim) * 2 +
          TF.log_softmax(u, dim), [(y, u)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction):
    (x, t), (y, u) = pair(LOGITS), pair(LOGITS[::-1].copy())
    check(F.mse_loss(x, y, reduction=reduction), TF.mse_loss(t, u, reduction=reduction),
          [(x, t), (y, u)])
    assert nn.MSELoss()(tt.ones(3), tt.zeros(3)).item() == 1.0


def test_mse_loss_warns_on_broadcast_like_torch():
    with pytest.warns(UserWarning, match="target"):
        TF.mse_loss(torch.ones(2, 3), torch.ones(3))
    with pytest.warns(UserWarning, match="target"):
        F.mse_loss(tt.ones(2, 3), tt.ones(3))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_losses_match_torch(reduction):
    y = (rng.random((3, 4)) > 0.5).astype(np.float32)
    z, tz = pair(LOGITS[:3] * 4)
    check(F.binary_cross_entropy_with_logits(z, tt.tensor(y), reduction=reduction),
          TF.binary_cross_entropy_with_logits(tz, torch.tensor(y), reduction=reduction), [(z, tz)])
    probs = np.array([[0.0, 0.3, 1.0, 0.5]] * 3, np.float32)  # 0 and 1 included: finite
    p, tp = pair(probs)
    check(nn.BCELoss(reduction=reduction)(p, tt.tensor(y)),
          torch.nn.BCELoss(reduction=reduction)(tp, torch.tensor(y)), [(p, tp)], rtol=1e-5)
    for lib, L in ((torch, torch.nn), (tt, nn)):  # bool targets: a RuntimeError, as torch's
        with pytest.raises(RuntimeError):
            L.BCEWithLogitsLoss()(lib.tensor(LOGITS), lib.tensor(LOGITS > 0))
    q = nn.BCEWithLogitsLoss()(tt.tensor(LOGITS), tt.tensor(LOGITS > 0).float())
    assert q.dtype == tt.float32 and q.item() > 0
    with pytest.raises(ValueError, match="probabilities"):
        F.binary_cross_entropy(tt.tensor(LOGITS), tt.zeros(5, 4))


def test_floor_division_and_remainder_match_torch():
    a, ta = pair(np.array([5.5, -5.5, 3.0], np.float32))
    b, tb = pair(np.array([2.0, 1.5, -4.0], np.float32))
    check(a % 2.0 + a % b, ta % 2.0 + ta % tb, [(a, ta), (b, tb)])
    assert (tt.tensor([7, -7]) // 2).tolist() == (torch.tensor([7, -7]) // 2).tolist()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tt.tensor([1, 2]) % tt.tensor([1, 0])
    with pytest.raises(RuntimeError, match="derivative for floor"):
        (a // 2).sum().backward()


def test_creation_functions_match_torch():
    np.testing.assert_array_equal(tt.eye(2, 3).numpy(), torch.eye(2, 3).numpy())
    np.testing.assert_allclose(tt.linspace(0, 1, 5).numpy(), torch.linspace(0, 1, 5).numpy())
    assert tt.rand_like(tt.zeros(2), dtype=tt.float64).dtype == tt.float64
    assert tt.tensor([1.5]).type(tt.int64).tolist() == [1]
    for dtype in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                  "bool"):  # the legacy names ported code compares type() with
        ours = tt.zeros(2, dtype=getattr(tt, "bool_" if dtype == "bool" else dtype))
        theirs = torch.zeros(2, dtype=getattr(torch, dtype))
        assert ours.type() == theirs.type()
        assert tt.ones(1).type(theirs.type()).dtype == ours.dtype
    with pytest.raises(RuntimeError, match="unknown tensor type 'torch.FooTensor'"):
        tt.ones(1).type("torch.FooTensor")
    for name in ("add", "sub", "mul", "div", "pow"):
        x, t = tt.tensor([1.0, 4.0]), torch.tensor([1.0, 4.0])
        assert getattr(tt, name)(x, 2).tolist() == getattr(torch, name)(t, 2).tolist()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack_match_torch(dim):
    a, ta = pair(LOGITS[:, :2].copy())
    b, tb = pair(LOGITS[:, 2:].copy())
    check(tt.cat([a, b], dim=dim), torch.cat([ta, tb], dim=dim), [(a, ta), (b, tb)])
    c, tc = pair(LOGITS[:, :2].copy())
    d, td = pair(LOGITS[:, 2:].copy())
    check(tt.stack([c, d], dim), torch.stack([tc, td], dim), [(c, tc), (d, td)])
    mixed = tt.cat([tt.ones(2, dtype=tt.int64), tt.ones(3)])
    assert mixed.dtype == tt.float32 and mixed.shape == (5,)
    with pytest.raises(ValueError, match="sizes must match except in dimension 0"):
        tt.cat([tt.ones(2, 3), tt.ones(2, 4)])
    with pytest.raises(ValueError, match="equal size"):
        tt.stack([tt.ones(2), tt.ones(3)])


def test_clamp_abs_flatten_match_torch():
    data = np.array([[-2.0, -0.5, 0.0], [0.5, 1.0, 3.0]], np.float32)
    x, t = pair(data)
    check(tt.clamp(x, -0.5, 1.0) + x.clip(min=0.0) + tt.abs(x) * 2,
          torch.clamp(t, -0.5, 1.0) + t.clip(min=0.0) + torch.abs(t) * 2, [(x, t)])
    assert tt.clamp(tt.tensor([1, 5]), max=3).tolist() == [1, 3]
    assert tt.flatten(tt.zeros(2, 3, 4), 1).shape == tuple(torch.flatten(torch.zeros(2, 3, 4),
                                                                         1).shape)
    with pytest.raises(ValueError, match="at least one of min and max"):
        tt.ones(2).clamp()


def test_module_level_functions_accept_raw_arrays():
    arr = LOGITS.copy()
    assert tt.argmax(arr, 1).tolist() == torch.argmax(torch.tensor(arr), 1).tolist()
    np.testing.assert_allclose(tt.sum(arr, 0).numpy(), arr.sum(0), rtol=1e-6)
    assert tt.eq(tt.tensor([1, 2]), 2).tolist() == [False, True]
    assert tt.equal(tt.tensor([1, 2]), tt.tensor([1, 2]))


def test_comparison_methods_match_operators():
    a, b = tt.tensor([1, 2, 3]), tt.tensor([3, 2, 1])
    ta, tb = torch.tensor([1, 2, 3]), torch.tensor([3, 2, 1])
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert getattr(a, name)(b).tolist() == getattr(ta, name)(tb).tolist()
        assert getattr(tt, name)(a, 2).tolist() == getattr(torch, name)(ta, 2).tolist()
    pred, target = tt.tensor([[1], [0], [3]]), tt.tensor([1, 2, 3])
    assert pred.eq(target.view_as(pred)).sum().item() == 2  # PyTorch's MNIST example line


def test_devices_as_in_torch():
    cpu = tt.device("cpu")
    assert cpu == "cpu" and cpu.type == "cpu" and str(cpu) == "cpu"
    assert repr(cpu) == repr(torch.device("cpu")) == "device(type='cpu')"
    assert tt.device("cuda:0") == tt.device("cuda") == "cuda"
    assert tt.device("cuda", 0).type == "cuda"
    x = tt.ones(2).to(cpu)
    assert x.device == cpu and x.device == "cpu" and isinstance(x.device, tt.device)
    model = nn.Linear(2, 2).to(cpu)
    assert model.weight.device == "cpu"
    with pytest.raises(ValueError, match="unknown device 'mps'"):
        tt.device("mps")


def test_device_helpers_agree_with_cuda_is_available():
    has_gpu = tt.cuda_is_available()
    assert tt.cuda.is_available() == tt.accelerator.is_available() == has_gpu
    assert tt.accelerator.current_accelerator() == ("cuda" if has_gpu else None)
    assert (tt.cuda.device_count() > 0) == has_gpu
    assert tt.backends.mps.is_available() is False
    tt.backends.cudnn.deterministic = True  # accepted; changes nothing
    tt.cuda.manual_seed(1)
    tt.cuda.synchronize()


def test_torch_utils_data_names():
    assert tt.utils.data.DataLoader is tt.data.DataLoader
    assert tt.utils.data.TensorDataset is tt.data.TensorDataset
    from tinytrain.utils.data.distributed import DistributedSampler

    assert DistributedSampler is tt.data.DistributedSampler


def test_torch_nn_parallel_is_the_distributed_wrapper():
    import tinytrain.distributed as dist

    assert tt.nn.parallel.DistributedDataParallel is dist.DistributedDataParallel
    from tinytrain.nn.parallel import DistributedDataParallel

    assert DistributedDataParallel is dist.DistributedDataParallel


@pytest.mark.parametrize("module,name,hint", [
    (tt, "compile", "call the model directly"),
    (tt, "jit", "no TorchScript"),
    (tt.autograd, "gradcheck", "finite differences"),
    (tt, "complex64", "no bfloat16 or complex"),
    (tt, "no_such_thing", "the part of PyTorch"),
    (nn, "AdaptiveLogSoftmaxWithLoss", "tinytrain.nn has AdaptiveAvgPool"),
    (nn, "LPPool2d", "tinytrain has 2-D convolution and pooling (Conv2d"),
    (F, "embedding_bag", "tinytrain.nn.functional has adaptive_avg_pool"),
    (nn.init, "sparse_", "kaiming_normal_"),
    (nn.utils, "weight_norm", "clip_grad_norm_"),
    (tt.optim, "SparseAdam", "Adadelta and LBFGS"),
    (tt.optim, "Rprop", "AdamW, NAdam, RAdam"),
    (tt.optim.lr_scheduler, "WarmupLR", "CyclicLR, ExponentialLR"),
])
def test_names_outside_the_scope_say_what_to_use(module, name, hint):
    with pytest.raises(AttributeError, match=name) as info:
        getattr(module, name)
    assert hint in str(info.value)
    assert not hasattr(module, name)  # hasattr / getattr with a default still work
    assert getattr(module, "__no_dunder__", None) is None


def test_dtype_aliases_and_conversions():
    assert tt.float is tt.float32 and tt.long is tt.int64 and tt.double is tt.float64
    assert tt.bool is tt.bool_ and tt.half is tt.float16 and tt.int is tt.int32
    x = tt.tensor([1.5, -2.0])
    assert x.long().dtype == tt.long and x.int().tolist() == [1, -2]
    assert x.bool().dtype == tt.bool and x.half().dtype == tt.half
    assert tt.zeros(2, dtype=tt.long).dtype == np.int64
