"""InfiniTrain's MNIST models against PyTorch: 10 SGD steps from identical weights.

Same initial parameters, the same batches of real digits (the bundled mini
set), plain SGD at lr 0.01 as in InfiniTrain's run: logits, loss, every
gradient and every parameter must agree with PyTorch at every step.
"""

from __future__ import annotations

import numpy as np
import pytest

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import optim
from tinytrain.data import DataLoader, MNISTMini
from tinytrain.models import build_model

torch = pytest.importorskip("torch")

# float64 checks that the arithmetic is the same, at 1e-9 on everything.
# float32 checks 1e-5 on logits, loss and parameters. Its gradients get 3e-4 absolute:
# a conv bias gradient sums 64*26*26 = 43,264 terms whose absolute values add up to
# ~1e2 while the sum is ~1e-3, so float32 rounding alone (in PyTorch as in tinytrain,
# which sum in different orders) moves it by up to ~1e-4.
TOLERANCES = {"float32": (1e-5, 1e-5, 3e-4), "float64": (1e-9, 1e-9, 1e-9)}


def torch_model(name: str):
    nn = torch.nn
    if name == "mlp":
        return nn.ModuleDict(dict(fc1=nn.Linear(784, 30), fc2=nn.Linear(30, 10)))
    return nn.ModuleDict(dict(conv1=nn.Conv2d(1, 16, 3), conv2=nn.Conv2d(16, 32, 3),
                              fc=nn.Linear(18432, 10)))


def torch_forward(name: str, m, x):
    if name == "mlp":
        return m["fc2"](torch.sigmoid(m["fc1"](x.flatten(1))))
    x = torch.relu(m["conv2"](torch.relu(m["conv1"](x))))
    return m["fc"](x.flatten(1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_ten_sgd_steps_match_pytorch(name, dtype):
    rtol, atol, grad_atol = TOLERANCES[dtype]
    torch.set_num_threads(1)
    tt.manual_seed(0)
    ours = build_model(name).to(dtype)
    ref = torch_model(name).to(getattr(torch, dtype))
    with torch.no_grad():
        for k, v in ours.state_dict().items():
            ref.get_parameter(k).copy_(torch.from_numpy(v.numpy().copy()))
    opt = optim.SGD(ours.parameters(), lr=0.01)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    loader = DataLoader(MNISTMini(train=True), batch_size=64, shuffle=True, seed=1)
    for step, (x, y) in enumerate(loader):
        if step == 10:
            break
        opt.zero_grad()
        x = x.to(dtype)
        logits = ours(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()

        ref_opt.zero_grad()
        ref_logits = torch_forward(name, ref, torch.from_numpy(x.numpy()))
        ref_loss = torch.nn.functional.cross_entropy(ref_logits, torch.from_numpy(y.numpy()))
        ref_loss.backward()
        ref_opt.step()

        where = f"{name}, step {step}"
        np.testing.assert_allclose(logits.numpy(), ref_logits.detach().numpy(), rtol, atol,
                                   err_msg=f"logits, {where}")
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol, atol,
                                   err_msg=f"loss, {where}")
        for k, p in ours.named_parameters():
            rp = ref.get_parameter(k)
            np.testing.assert_allclose(p.grad.numpy(), rp.grad.numpy(), rtol, grad_atol,
                                       err_msg=f"grad of {k}, {where}")
            np.testing.assert_allclose(p.numpy(), rp.detach().numpy(), rtol, atol,
                                       err_msg=f"{k}, {where}")
    assert step == 10
