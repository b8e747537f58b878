"""PyTorch's ``torch.func`` tutorials, ported by their imports to :mod:`tinytrain.func`, run
with tinytrain and with PyTorch on the same random numbers (``Draws``/``run_both`` of
tests/test_ports9.py: tinytrain's draws and layer inits replayed in PyTorch).

Programs (whole in ``tests/tutorials/``, changed lines marked ``# tinytrain:``): per-sample
gradients (``vmap(grad(loss), in_dims=(None, None, 0, 0))`` over ``functional_call``), model
ensembling (``stack_module_state``, ``vmap`` with ``in_dims=(0, 0, None)``), Jacobians and
Hessians (``vjp`` under ``vmap``, ``jacrev``/``jacfwd`` with ``argnums``, ``hessian``,
``jacfwd(jacfwd)``, ``jacrev(jacrev)``, batched Jacobians and Hessians, HVPs by
``jvp(grad(f))`` and ``vjp(grad(f))``) and neural tangent kernels (``vmap(jacrev)`` over a
CNN's parameters, and ``vmap(vmap(...))`` of ``vjp``/``jvp`` products). Their timing cells use
``benchmark_shim.Timer`` (each statement runs once) in both runs; the printed timings are
left out of the comparisons, everything else is compared.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from test_ports9 import _diff, _same_but_for_rounding, run_both

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")

_TIMING = re.compile(r"^.*Measurement object at .*$\n|^\s+[\d.]+ ms$\n|^\s+1 measurement, .*$\n"
                     r"|^\s*Performance delta: .*$\n", re.M)


@pytest.fixture(autouse=True, scope="module")
def _torch_func_loaded():
    """PyTorch's torch.func loads its decompositions at the first vmap/jvp, warning that
    ``torch.jit.script`` is deprecated: loaded here, so that the runs compare the programs'
    own warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.func.hessian(lambda x: x.sin().sum())(torch.ones(2))
        torch.func.jvp(torch.sin, (torch.ones(2),), (torch.ones(2),))


def _untimed(text: str) -> str:
    """A run's output without what the benchmark cells measured (the statements stay)."""
    return _TIMING.sub("", text)


def _close(a, b, rtol: float, atol: float = 0.0, name: str = "") -> None:
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (name, a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)


def _timed(text: str) -> list[str]:
    return re.findall(r"^(\S.*)\n\s+[\d.]+ ms$", text, re.M)


def test_per_sample_grads(tmp_path, monkeypatch, capsys):
    """A CNN's gradients one sample at a time (``torch.autograd.grad`` in a loop) and by
    ``vmap(grad(compute_loss), in_dims=(None, None, 0, 0))`` over ``functional_call(model,
    (params, buffers), (batch,))`` with detached parameters: the program's own
    ``allclose(atol=3e-3)`` holds for every parameter, and both are PyTorch's numbers.
    float64 (the default dtype of both runs)."""
    runs = run_both("func_per_sample_grads.py", tmp_path, monkeypatch, capsys, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(_untimed(ours), _untimed(theirs)), _diff(ours, theirs)
    assert "(4, 32, 1, 3, 3)" in ours and "mismatch" not in ours
    assert _timed(ours) == _timed(theirs) == ["compute_sample_grads(data, targets)",
                                              "ft_compute_sample_grad(params, buffers, data, "
                                              "targets)"]
    names = [name for name, _ in v["model"].named_parameters()]
    assert list(v["ft_per_sample_grads"]) == names == list(w["ft_per_sample_grads"])
    for k, (loop, ft) in enumerate(zip(v["per_sample_grads"], v["ft_per_sample_grads"].values())):
        assert loop.shape == ft.shape == (4, *v["model"].get_parameter(names[k]).shape)
        assert not ft.requires_grad  # (the parameters were detached: nothing outside)
        _close(ft, loop, rtol=1e-10, atol=1e-13, name=names[k])
        _close(ft, w["ft_per_sample_grads"][names[k]], rtol=1e-9, atol=1e-12, name=names[k])
        _close(loop, w["per_sample_grads"][k], rtol=1e-9, atol=1e-12, name=names[k])
    # the per-sample gradients average to the batch's gradient (nll_loss's mean)
    for name, p in v["model"].named_parameters():
        _close(v["ft_per_sample_grads"][name].mean(0), p.grad, rtol=1e-9, atol=1e-13, name=name)


def test_ensembling(tmp_path, monkeypatch, capsys):
    """Ten MLPs: ``stack_module_state(models)`` (stacked leaves ``[10, ...]`` that require
    grad), ``vmap(fmodel)`` over the models and their minibatches and ``vmap(fmodel,
    in_dims=(0, 0, None))`` with one minibatch, against the loops over the models; float64."""
    runs = run_both("func_ensembling.py", tmp_path, monkeypatch, capsys, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(_untimed(ours), _untimed(theirs)), _diff(ours, theirs)
    assert "[10, 10, 10, 10, 10, 10]" in ours
    assert _timed(ours) == _timed(theirs) and len(_timed(ours)) == 2
    params, buffers = v["params"], v["buffers"]
    assert list(params) == list(w["params"]) and buffers == {} == w["buffers"]
    for name, p in params.items():
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
        _close(p, w["params"][name], rtol=0, name=name)
    for name in ("predictions1_vmap", "predictions2_vmap"):
        assert v[name].shape == (10, 64, 10)
        _close(v[name], w[name], rtol=1e-9, atol=1e-12, name=name)
    _close(v["predictions1_vmap"], tt.stack(v["predictions_diff_minibatch_loop"]), rtol=1e-12,
           atol=1e-14)
    _close(v["predictions2_vmap"], tt.stack(v["predictions2"]), rtol=1e-12, atol=1e-14)
    # the stacked parameters train: the ensemble's outputs depend on them
    assert v["predictions1_vmap"].requires_grad and v["predictions1_vmap"].grad_fn is not None


def test_jacobians_hessians(tmp_path, monkeypatch, capsys):
    """``vmap(vjp_fn)(unit_vectors)`` against ``autograd.grad`` row by row, ``jacrev`` with
    ``argnums=2`` and ``(0, 1)``, ``jacfwd`` on tall and wide Jacobians, ``hessian``,
    ``jacfwd(jacfwd)``, ``jacrev(jacrev)``, ``vmap(jacrev)`` / ``vmap(hessian)`` over a batch,
    ``movedim`` of the summed output's Jacobian, and HVPs by ``jvp(grad(f))`` and
    ``vjp(grad(f))``: PyTorch's numbers in float64 (sizes made smaller, marked)."""
    runs = run_both("func_jacobians_hessians.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(_untimed(ours), _untimed(theirs)), _diff(ours, theirs)
    assert len(_timed(ours)) == 6 and _timed(ours) == _timed(theirs)
    shapes = {"jacobian": (16, 16), "ft_jacobian": (16, 16), "ft_jac_weight": (16, 16, 16),
              "ft_jac_bias": (16, 16), "jacfwd_timing": None, "hess_api": (8, 16, 16),
              "hess_fwdfwd": (8, 16, 16), "hess_revrev": (8, 16, 16),
              "batch_jacobian0": (4, 33, 31), "batch_jacobian1": (4, 33, 31),
              "batch_hess": (4, 33, 31, 31), "result": (2048,), "result_hvp_revrev": None}
    for name, shape in shapes.items():
        if shape is None:
            continue
        assert v[name].shape == shape, (name, v[name].shape)
        assert not v[name].requires_grad, name  # nothing outside required grad
        _close(v[name], w[name], rtol=1e-9, atol=1e-12, name=name)
    _close(v["result_hvp_revrev"][0], w["result_hvp_revrev"][0], rtol=1e-9, atol=1e-12)
    # the three Hessians agree, and are symmetric in their last two dims
    _close(v["hess_api"], v["hess_fwdfwd"], rtol=1e-10, atol=1e-13)
    _close(v["hess_api"], v["hess_revrev"], rtol=1e-10, atol=1e-13)
    _close(v["hess_api"], v["hess_api"].transpose(1, 2), rtol=1e-10, atol=1e-13)
    # the HVP of sum(sin(x)): -sin(x) * tangent
    _close(v["result"], -v["x"].sin() * v["tangent"], rtol=1e-12, atol=1e-14)


def test_neural_tangent_kernels(tmp_path, monkeypatch, capsys):
    """The empirical NTK of a CNN by Jacobian contraction (``vmap(jacrev(fnet_single), (None,
    0))`` over a dict of parameters, ``einsum('Naf,Mbf->NMab')``, the trace) and by NTK-vector
    products (``vmap(vmap(get_ntk, (None, 0)), (0, None))`` of ``vjp`` then ``jvp`` over the
    parameters): the program's own ``allclose`` of the two, and PyTorch's numbers (float64;
    fewer data points, marked)."""
    runs = run_both("func_neural_tangent_kernels.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    assert "(2, 1, 10, 10)" in ours and "(2, 1)" in ours
    for name in ("result_from_jacobian_contraction", "result_from_ntk_vps"):
        assert v[name].shape == (1, 2, 10, 10)
        _close(v[name], w[name], rtol=1e-8, atol=1e-10, name=name)
    _close(v["result"], w["result"], rtol=1e-8, atol=1e-10)  # the trace's
