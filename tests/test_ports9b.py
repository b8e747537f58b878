"""Real PyTorch programs that differentiate gradients (``create_graph=True``) or run recurrent
layers, ported by their imports, run with tinytrain and with PyTorch on the same data and the
same random numbers (``Draws`` of tests/test_ports9.py: the runs' random draws, layer inits,
dropout masks and shuffles are tinytrain's, replayed in PyTorch), and what porting found.

Programs (whole scripts in ``tests/tutorials/``, changed lines marked ``# tinytrain:``):
Erik Linder-Noren's WGAN-GP (PyTorch-GAN, MLPs), MAML and first-order MAML on sine waves, the
Burgers PINN of the PINNs PyTorch ports (L-BFGS), and second-order snippets (``hessian``,
HVPs, Newton's method for logistic regression, ``jacobian``). They found: ``autograd.Variable``
missing, ``linalg.solve`` / ``inv`` missing, and the dtype of ``binary_cross_entropy_with_logits``
with targets of another float dtype (PyTorch's is the target's); tests for each against torch.
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
    # f = u_t + u u_x - nu u_xx: a difference of float32 terms through second derivatives,
    # so its small values carry the terms' absolute rounding (atol 1e-6 passed on AVX-512
    # CPUs; with OpenBLAS's AVX2 kernels one value of 616 was 1.4e-6 off, at 8.3e-4)
    np.testing.assert_allclose(f1, f2, rtol=1e-4, atol=1e-5)
    assert gx1.dtype == np.float64  # through .float(): the gradient of the float64 leaf
    np.testing.assert_allclose(gx1, gx2, rtol=1e-3, atol=1e-6)  # third derivatives
    for p, q in zip(gp1, gp2):
        np.testing.assert_allclose(p, q, rtol=1e-3, atol=1e-6)


def test_hessian_snippets(tmp_path, monkeypatch, capsys):
    """``autograd.functional.hessian`` of one and of two inputs, an HVP by
    ``autograd.grad(grad, x, grad_outputs=v)`` and by ``(grad @ v).backward()``, the Hessian
    row by row, ``hvp`` / ``vhp``, the Hessian of an MLP's loss in its flattened parameters,
    Newton's method for logistic regression with ``torch.linalg.solve`` and with
    ``torch.inverse`` of ``hessian(nll, w)``, and ``jacobian`` of a network (of a batch, of its
    weights). float64: the same numbers as PyTorch's to 1e-9; Newton converges quadratically."""
    runs = run_both("hessian_snippets.py", tmp_path, monkeypatch, capsys, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    # the Newton losses are float32 (``y`` is ``.float()``: the loss has the target's dtype)
    losses = [np.array([float(x) for x in re.findall(r"loss ([\d.]+)", out)])
              for out in (ours, theirs)]
    assert len(losses[0]) == 6
    np.testing.assert_allclose(*losses, rtol=1e-6)
    mine, torch_numbers = (numbers(re.sub(r"loss [\d.]+", "", out)) for out in (ours, theirs))
    assert len(mine) == len(torch_numbers) > 40
    np.testing.assert_allclose(mine, torch_numbers, rtol=1e-9, atol=1e-12)
    for name in ("H", "H_full", "H_params", "J", "J_batch", "Jw", "w", "w2"):
        assert v[name].dtype == tt.float64, name
        newton = name in ("H", "w", "w2")  # from the float32 loss's gradient: float32 digits
        np.testing.assert_allclose(v[name].detach().numpy(), w[name].detach().numpy(),
                                   rtol=1e-6 if newton else 1e-9, atol=1e-12, err_msg=name)
    assert ours.count("True") == 7 and "False" not in ours  # 6 allclose, requires_grad=True
    gradients = [float(g) for g in re.findall(r"\|grad\| ([\d.e+-]+)", ours)]
    assert gradients[-1] < 1e-5 and gradients[-1] < gradients[-2] ** 2 * 20, gradients


def _both(array: np.ndarray, requires_grad: bool = False):
    return (tt.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


@pytest.mark.parametrize("a_shape,b_shape", [((3, 3), (3,)), ((3, 3), (3, 2)),
                                             ((2, 3, 3), (2, 3)), ((2, 3, 3), (3, 4)),
                                             ((3, 3), (2, 3, 1))])
def test_linalg_solve_and_inv_as_torch(a_shape, b_shape):
    """``linalg.solve`` (vector right-hand sides by PyTorch's rule, broadcast batches),
    ``linalg.inv`` / ``torch.inverse`` / ``Tensor.inverse``: values, gradients and second
    derivatives (float64) as torch's."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(a_shape) + 3 * np.eye(a_shape[-1])
    b = rng.standard_normal(b_shape)
    (A, tA), (B, tB) = _both(a, True), _both(b, True)
    outs = [(tt.linalg.solve(A, B), torch.linalg.solve(tA, tB)),
            (tt.linalg.inv(A), torch.linalg.inv(tA)), (tt.inverse(A), torch.inverse(tA)),
            (A.inverse(), tA.inverse())]
    for ours, theirs in outs:
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    for lib, (X, Y) in (("tt", (A, B)), ("torch", (tA, tB))):
        mod = tt if lib == "tt" else torch
        out = (mod.linalg.solve(X, Y) ** 2).sum() + mod.linalg.inv(X).sin().sum()
        gA, gB = mod.autograd.grad(out, (X, Y), create_graph=True)
        second = mod.autograd.grad((gA ** 2).sum() + gB.sum(), (X, Y))
        results = [gA, gB, *second]
        if lib == "tt":
            ours = [r.detach().numpy() for r in results]
        else:
            for o, t in zip(ours, results):
                np.testing.assert_allclose(o, t.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_linalg_solve_errors_as_torch():
    for lib in (tt, torch):
        with pytest.raises(lib.linalg.LinAlgError, match="singular"):
            lib.linalg.solve(lib.ones(2, 2, dtype=lib.float64), lib.ones(2, dtype=lib.float64))
        with pytest.raises(lib.linalg.LinAlgError, match="singular"):
            lib.linalg.inv(lib.zeros(2, 2))
        with pytest.raises(RuntimeError, match="batches of square matrices, but they are 2 by 3"):
            lib.linalg.solve(lib.ones(2, 3), lib.ones(2))
        with pytest.raises(RuntimeError, match="Incompatible shapes of A and B"):
            lib.linalg.solve(lib.eye(3), lib.ones(4, 1))
        with pytest.raises(RuntimeError, match="Expected A and B to have the same dtype"):
            lib.linalg.solve(lib.eye(3), lib.ones(3, dtype=lib.float64))
        with pytest.raises(RuntimeError, match="Expected a floating point"):
            lib.linalg.inv(lib.ones(2, 2, dtype=lib.int64))
        assert issubclass(lib.linalg.LinAlgError, RuntimeError)
    x = np.random.default_rng(0).standard_normal((3, 3)) + 2 * np.eye(3)
    b = np.ones((2, 3))
    np.testing.assert_allclose(tt.linalg.solve(tt.tensor(x), tt.tensor(b), left=False).numpy(),
                               torch.linalg.solve(torch.tensor(x), torch.tensor(b),
                                                  left=False).numpy(), rtol=1e-12)


@pytest.mark.parametrize("in_dtype,target_dtype", [("float64", "float32"),
                                                   ("float32", "float64"),
                                                   ("float64", "float16")])
def test_bce_with_logits_has_the_targets_dtype(in_dtype, target_dtype):
    """``F.binary_cross_entropy_with_logits(logits, labels.float())`` of float64 logits: a
    float32 loss in PyTorch (it found the Newton snippet's losses differing at 1e-9: PyTorch
    rounds the loss to the target's dtype); the gradient keeps the logits' dtype."""
    x = np.array([0.3, -1.2, 2.0, 0.0])
    y = np.array([1.0, 0.0, 1.0, 1.0])
    got = {}
    for lib in (tt, torch):
        logits = lib.tensor(x, dtype=getattr(lib, in_dtype), requires_grad=True)
        labels = lib.tensor(y, dtype=getattr(lib, target_dtype))
        for reduction in ("none", "sum", "mean"):
            loss = lib.nn.functional.binary_cross_entropy_with_logits(
                logits, labels, reduction=reduction, pos_weight=lib.tensor([2.0]))
            (grad,) = lib.autograd.grad(loss.sum(), logits)
            got.setdefault(reduction, []).append((str(loss.dtype).removeprefix("torch."),
                                                  str(grad.dtype).removeprefix("torch."),
                                                  loss.detach().double().numpy()))
    for (d1, g1, v1), (d2, g2, v2) in got.values():
        assert d1 == d2 == target_dtype and g1 == g2 == in_dtype
        np.testing.assert_allclose(v1, v2, rtol=2e-3 if "float16" in target_dtype else 1e-6)
