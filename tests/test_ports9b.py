"""Real PyTorch programs that differentiate gradients (``create_graph=True``) or run recurrent
layers, ported by their imports, run with tinytrain and with PyTorch on the same data and the
same random numbers (``Draws`` of tests/test_ports9.py: the runs' random draws, layer inits,
dropout masks and shuffles are tinytrain's, replayed in PyTorch), and what porting found.

Programs (whole scripts in ``tests/tutorials/``, changed lines marked ``# tinytrain:``):
Erik Linder-Noren's WGAN-GP (PyTorch-GAN), ...
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
import torch
from test_ports9 import _diff, _same_but_for_rounding, _same_plots, numbers, run_both
from test_tutorials import TUTORIALS

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")


def _losses(pattern: str, text: str) -> np.ndarray:
    return np.array([[float(x) for x in m] for m in re.findall(pattern, text)])


def test_wgan_gp(tmp_path, monkeypatch, capsys):
    """PyTorch-GAN's ``wgan_gp.py``: ``Variable(Tensor(np.random.random(...)))``,
    ``imgs.type(Tensor)``, ``Tensor(B, 1).fill_(1.0)`` as ``grad_outputs`` of
    ``autograd.grad(..., create_graph=True, retain_graph=True, only_inputs=True)``, the
    penalty ``((gradients.norm(2, dim=1) - 1) ** 2).mean()`` backpropagated into the critic
    (through its LeakyReLUs twice), BatchNorm1d(out, 0.8) in the generator, n_critic = 5. One
    epoch of 20 batches, float32: the same losses and the same sampled images as PyTorch."""
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import torchvision_shim

    torchvision_shim.saved_images.clear()
    runs = run_both("gan_wgan_gp.py", tmp_path, monkeypatch, capsys,
                    argv=["--n_epochs", "1", "--img_size", "14", "--latent_dim", "16"])
    (ours, _, _), (theirs, _, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    pattern = r"\[D loss: (-?[\d.]+)\] \[G loss: (-?[\d.]+)\]"
    a, b = _losses(pattern, ours), _losses(pattern, theirs)
    assert a.shape == (4, 2), ours
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert a[-1, 0] < a[0, 0] - 3, a  # the critic learns to tell real from generated
    (path, ours, kw), (path2, theirs, _) = torchvision_shim.saved_images  # one in each run
    assert path == path2 == "images/0.png" and kw == {"nrow": 5, "normalize": True}
    assert ours.shape == (25, 1, 14, 14) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_autograd_variable_is_a_detached_tensor(lib):
    """``torch.autograd.Variable`` (GAN and RL repositories still import it): a Tensor that is
    ``data.detach()`` (the same memory, a new leaf) with ``requires_grad`` as asked."""
    from_lib = lib.autograd.Variable
    a = lib.ones(2)
    v = from_lib(a)
    assert type(v) is lib.Tensor and v is not a and not v.requires_grad
    v[0] = 5.0  # the same memory
    assert a[0].item() == 5.0
    w = from_lib(a, requires_grad=True)
    assert w.is_leaf and w.requires_grad and not a.requires_grad
    b = a * lib.ones(2, requires_grad=True)
    assert from_lib(b).grad_fn is None and from_lib(b, True).requires_grad
    assert isinstance(a, from_lib) and not isinstance([1.0], from_lib)
    empty = from_lib()
    assert tuple(empty.shape) == (0,) and str(empty.dtype).endswith("float32")
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        from_lib([1.0, 2.0])
    with pytest.raises(RuntimeError, match="(?i)only Tensors of floating point"):
        from_lib(lib.ones(2, dtype=lib.int64), requires_grad=True)
    with pytest.warns(UserWarning, match="volatile was removed"):
        from_lib(a, volatile=True)


def test_maml_sine(tmp_path, monkeypatch, capsys):
    """MAML on sines: ``parameterised(x, weights)`` through ``F.linear``, the inner step
    ``torch.autograd.grad(loss, temp_weights, create_graph=True)`` on clones of the
    parameters, fast weights ``w - inner_lr * g``, a meta-loss summed over tasks and
    backpropagated through the inner step into the Adam-optimised weights (second order), and
    first-order MAML; tasks and points from ``np.random``, inputs as ``torch.Tensor(ndarray)``.
    float64: the same losses as PyTorch's to 1e-9, and MAML's initial weights adapt in one step
    better than first-order MAML's and a model pretrained on all tasks."""
    runs = run_both("maml_sine.py", tmp_path, monkeypatch, capsys, dtype="float64")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    assert ours == theirs or _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)
    _same_plots(our_plots, their_plots)
    for name in ("maml", "fomaml"):
        for a, b in zip(v[name].weights, w[name].weights):
            assert a.dtype == tt.float64
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                       atol=1e-12)
    maml, fomaml, pretrained = (np.array([float(x) for x in re.findall(
        rf"^{name} ([\d. ]+)$", ours, re.M)[0].split()]) for name in
        ("MAML", "first-order MAML", "pretrained"))
    assert len(v["maml"].meta_losses) == len(v["fomaml"].meta_losses) == 10
    # after one inner step from MAML's weights the test tasks are fitted best
    assert maml[1] < maml[0] - 0.2 and maml[1] < fomaml[1] - 1 and maml[1] < pretrained[1] - 1


def burgers_shock_mat(nx: int = 64, nt: int = 26) -> bytes:
    """``data/burgers_shock.mat`` for the PINN (``t [nt, 1]``, ``x [nx, 1]``, ``usol [nx, nt]``,
    as the original file, smaller): Burgers' equation with nu = 0.01/pi from u(x, 0) =
    -sin(pi x) on [-1, 1] x [0, 0.99], by the Cole-Hopf formula with Gauss-Hermite
    quadrature, as the file was made; in ``np.savez`` format (``scipy_shim.loadmat``)."""
    nu = 0.01 / np.pi
    x, t = np.linspace(-1, 1, nx), np.linspace(0, 0.99, nt)
    z, weights = np.polynomial.hermite.hermgauss(120)
    u = np.empty((nx, nt))
    u[:, 0] = -np.sin(np.pi * x)
    for j, tj in enumerate(t[1:], 1):
        y = x[:, None] - np.sqrt(4 * nu * tj) * z[None, :]
        f = np.exp(-np.cos(np.pi * y) / (2 * np.pi * nu))
        u[:, j] = -(weights * np.sin(np.pi * y) * f).sum(1) / (weights * f).sum(1)
    buffer = io.BytesIO()
    np.savez(buffer, t=t[:, None], x=x[:, None], usol=u)
    return buffer.getvalue()


def test_pinn_burgers(tmp_path, monkeypatch, capsys):
    """A PINN for Burgers' equation: u_t, u_x by ``torch.autograd.grad(u, t, grad_outputs=
    torch.ones_like(u), retain_graph=True, create_graph=True)``, u_xx from u_x, inputs made by
    ``torch.tensor(X[:, 0:1], requires_grad=True).float()`` (non-leaves), the loss of the data
    and the residual backpropagated through the second derivatives, LBFGS with the strong
    Wolfe line search. float32, so the runs part ways slowly (L-BFGS amplifies the last
    bits); the residual of tinytrain's trained network equals PyTorch's for the same weights."""
    runs = run_both("pinn_burgers.py", tmp_path, monkeypatch, capsys,
                    files={"data/burgers_shock.mat": burgers_shock_mat()})
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    pattern = r"Iter (\d+), Loss: ([\d.e+-]+), Loss_u: ([\d.e+-]+), Loss_f: ([\d.e+-]+)"
    a, b = _losses(pattern, ours), _losses(pattern, theirs)
    assert a.shape == (10, 4) and b.shape == (10, 4), (ours, theirs)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-4)  # iteration 10; at 20 they differ ~1e-3
    assert a[-1, 1] < a[0, 1] / 2 and b[-1, 1] < b[0, 1] / 2, (a, b)  # both learn
    ours_model, theirs_model = v["model"], w["model"]
    assert v["u_pred"].dtype == np.float32 and v["u_pred"].shape == (64 * 26, 1)
    assert v["error_u"] < 0.7 and abs(v["error_u"] - w["error_u"]) < 0.15, (v["error_u"],
                                                                             w["error_u"])
    theirs_model.dnn.load_state_dict({k: torch.from_numpy(np.array(p.numpy())) for k, p in
                                      ours_model.dnn.state_dict().items()})
    x_f = v["X_f_train"]
    for lib, model in (("tinytrain", ours_model), ("torch", theirs_model)):
        x = (tt if lib == "tinytrain" else torch).tensor(x_f[:, 0:1], requires_grad=True)
        t = (tt if lib == "tinytrain" else torch).tensor(x_f[:, 1:2], requires_grad=True)
        model.dnn.zero_grad()  # (the last closure's gradients differ)
        f = model.net_f(x.float(), t.float())
        f.pow(2).mean().backward()
        model.residual = f.detach().numpy(), x.grad.numpy(), [
            p.grad.numpy() for p in model.dnn.parameters()]
    (f1, gx1, gp1), (f2, gx2, gp2) = ours_model.residual, theirs_model.residual
    np.testing.assert_allclose(f1, f2, rtol=1e-4, atol=1e-6)
    assert gx1.dtype == np.float64  # through .float(): the gradient of the float64 leaf
    np.testing.assert_allclose(gx1, gx2, rtol=1e-3, atol=1e-6)  # third derivatives
    for p, q in zip(gp1, gp2):
        np.testing.assert_allclose(p, q, rtol=1e-3, atol=1e-6)
