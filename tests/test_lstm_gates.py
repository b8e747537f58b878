"""The LSTM step's element-wise part as one node (``nn.rnn.LSTMGates``): its values, its
gradients and its double backward against PyTorch's ``LSTMCell`` equations written with
torch ops, on gates large enough that an unshifted ``exp`` overflows; and a whole
``nn.LSTM`` (batched, unbatched, projected, bidirectional) against ``torch.nn.LSTM``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain.nn.rnn import LSTMGates


def _torch_cell(pre, c):
    i, f, g, o = pre.chunk(4, -1)
    c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return torch.stack([o.sigmoid() * c2.tanh(), c2])


@pytest.mark.parametrize("scale", [1.0, 60.0])
def test_values_gradients_and_double_backward_match_torch(device, scale):
    rng = np.random.default_rng(int(scale))
    pre_a, c_a = rng.standard_normal((3, 5, 24)) * scale, rng.standard_normal((3, 5, 6))
    g_a = rng.standard_normal((2, 3, 5, 6))
    pre, c = (tt.tensor(a, device=device, requires_grad=True) for a in (pre_a, c_a))
    tpre, tc = (torch.tensor(a, requires_grad=True) for a in (pre_a, c_a))
    out, ref = LSTMGates.apply(pre, c, []), _torch_cell(tpre, tc)
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    grads = tt.autograd.grad((out * tt.tensor(g_a, device=device)).sum(), (pre, c),
                             create_graph=True)
    tgrads = torch.autograd.grad((ref * torch.tensor(g_a)).sum(), (tpre, tc), create_graph=True)
    for a, t in zip(grads, tgrads):
        np.testing.assert_allclose(a.detach().cpu().numpy(), t.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    second = tt.autograd.grad(sum((a * a).sum() for a in grads), (pre, c))
    tsecond = torch.autograd.grad(sum((t * t).sum() for t in tgrads), (tpre, tc))
    for a, t in zip(second, tsecond):
        np.testing.assert_allclose(a.cpu().numpy(), t.numpy(), rtol=1e-9, atol=1e-12)


def test_gates_of_the_wrong_width_are_refused():
    with pytest.raises(ValueError, match=r"expected gates \[\*, 24\] for a cell state \[5, 6\]"):
        LSTMGates.apply(tt.zeros(5, 20), tt.zeros(5, 6), [])


@pytest.mark.parametrize("kwargs, shape", [
    ({}, (7, 3, 4)),
    ({"batch_first": True, "num_layers": 2}, (3, 7, 4)),
    ({"proj_size": 3, "bidirectional": True}, (7, 3, 4)),
    ({}, (7, 4)),  # unbatched
])
def test_lstm_matches_torch(kwargs, shape):
    torch.manual_seed(0)
    ref = torch.nn.LSTM(4, 5, **kwargs).double()
    ours = tt.nn.LSTM(4, 5, **kwargs).to(dtype=tt.float64)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    xa = np.random.default_rng(1).standard_normal(shape)
    x, tx = tt.tensor(xa, requires_grad=True), torch.tensor(xa, requires_grad=True)
    (out, (h, c)), (tout, (th, tc)) = ours(x), ref(tx)
    for a, t in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)
    (out.sum() + (h * h).sum() + (c * 3).sum()).backward()
    (tout.sum() + (th * th).sum() + (tc * 3).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, p), (_, tp) in zip(ours.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)
