"""A small MLP trained with SGD (momentum) gives PyTorch's losses and parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import nn
from tinytrain.optim import SGD

STEPS = 10


def batches(seed=0, n=16):
    """Fixed batches of a learnable task: the label is the argmax of a fixed linear map."""
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((8, 4))
    out = []
    for _ in range(STEPS):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        out.append((x, (x @ teacher).argmax(1)))
    return out


@pytest.mark.parametrize("act", ["sigmoid", "relu"])
def test_mlp_sgd_momentum_matches_torch(device, act):
    tt.manual_seed(0)
    act_tt = nn.Sigmoid() if act == "sigmoid" else nn.ReLU()
    act_torch = torch.nn.Sigmoid() if act == "sigmoid" else torch.nn.ReLU()
    model = nn.Sequential(nn.Linear(8, 16), act_tt, nn.Linear(16, 4)).to(device)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), act_torch, torch.nn.Linear(16, 4))
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                         for k, v in model.state_dict().items()})
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)

    losses, ref_losses = [], []
    for x, y in batches():
        opt.zero_grad()
        loss = F.cross_entropy(model(tt.tensor(x, device=device)), tt.tensor(y, device=device))
        loss.backward()
        opt.step()
        losses.append(loss.item())

        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(y))
        tloss.backward()
        topt.step()
        ref_losses.append(tloss.item())

    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    assert np.mean(losses[-3:]) < np.mean(losses[:3])  # and it learns
    ours = model.state_dict()
    for name, p in ref.state_dict().items():
        np.testing.assert_allclose(ours[name].numpy(), p.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=name)


def test_eval_under_no_grad_matches_torch():
    tt.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                         for k, v in model.state_dict().items()})
    x, y = batches(seed=5)[0]
    model.eval()
    with tt.no_grad():
        out = model(tt.tensor(x))
        loss = F.cross_entropy(out, y, reduction="sum")
    assert out.grad_fn is None and loss.grad_fn is None
    with torch.no_grad():
        tout = ref(torch.from_numpy(x))
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.argmax(1).numpy(), tout.argmax(1).numpy())
    np.testing.assert_allclose(
        loss.item(), torch.nn.functional.cross_entropy(tout, torch.from_numpy(y),
                                                       reduction="sum").item(), rtol=1e-5)
