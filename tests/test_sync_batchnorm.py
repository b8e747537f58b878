"""``nn.SyncBatchNorm`` and ``convert_sync_batchnorm`` against PyTorch 2.13.

In one process (no group): eval and training equal PyTorch's SyncBatchNorm (which is then
BatchNorm), the synchronised path's arithmetic equals BatchNorm's (its all-reduce made the
identity), and the conversion keeps the model's tensors and state dict. Under ``mpiexec -n
1/2/3`` (tests/sync_batchnorm_mpi.py): each rank's slice of one batch, of sizes of its own,
gives the outputs, gradients and running statistics of one BatchNorm over the whole batch,
and a DDP conv net trains as PyTorch's BatchNorm net on the concatenated batch.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import nn
from tinytrain.nn import sync_batchnorm
from tinytrain.tensor import ShapeError

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(ROOT / "tests" / "sync_batchnorm_mpi.py")
SHAPES = [(6, 3), (5, 3, 4), (4, 3, 5, 2), (3, 3, 2, 3, 2)]


#: ``bias=False`` on batch norm is PyTorch 2.13's (the GPU machine's PyTorch may be older).
TORCH_HAS_BIAS = "bias" in inspect.signature(torch.nn.BatchNorm1d.__init__).parameters


def pair(**options):
    """The same SyncBatchNorm in both libraries, float64, with weights that matter."""
    if "bias" in options and not TORCH_HAS_BIAS:
        pytest.skip(f"bias= needs PyTorch 2.13 (this is {torch.__version__})")
    theirs = torch.nn.SyncBatchNorm(3, **options).double()
    ours = nn.SyncBatchNorm(3, **options).to(dtype="float64")
    if theirs.affine:
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor([0.5, 2.0, -1.5]))
            if theirs.bias is not None:
                theirs.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        ours.load_state_dict({k: tt.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def run_both(ours, theirs, shape, steps=3, seed=0, device="cpu"):
    """A few steps of forward and backward; every output, gradient and buffer compared."""
    rng = np.random.default_rng(seed)
    for step in range(steps):
        x = rng.standard_normal(shape) * 2 + 0.5
        dy = rng.standard_normal(shape)
        xs = tt.tensor(x, requires_grad=True, device=device)
        tx = torch.tensor(x, requires_grad=True)
        y, ty = ours(xs), theirs(tx)
        y.backward(tt.tensor(dy, device=device))
        ty.backward(torch.tensor(dy))
        where = f"{shape} step {step}"
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), 1e-10, 1e-10, err_msg=where)
        np.testing.assert_allclose(xs.grad.numpy(), tx.grad.numpy(), 1e-10, 1e-10,
                                   err_msg=where)
        for (k, v), (tk, tv) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert k == tk
            np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), 1e-10, 1e-10,
                                       err_msg=f"{where} {k}")
            v.grad, tv.grad = None, None
        state, ref = ours.state_dict(), theirs.state_dict()
        assert list(state) == list(ref)
        for k in ref:
            np.testing.assert_allclose(state[k].numpy(), ref[k].numpy(), 1e-10, 1e-10,
                                       err_msg=f"{where} {k}")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{len(s)}d")
@pytest.mark.parametrize("options", [{}, {"momentum": None}, {"affine": False},
                                     {"track_running_stats": False}, {"bias": False}],
                         ids=str)
def test_without_a_process_group_it_is_pytorchs_in_training_and_eval(shape, options):
    ours, theirs = pair(**options)
    run_both(ours, theirs, shape)
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, shape, steps=1, seed=1)


@pytest.fixture
def one_rank_synchronising(monkeypatch):
    """The synchronised path in this process: a "group" of two whose all-reduce returns
    this rank's sums, so the statistics are this batch's and BatchNorm's are the reference."""
    reduced = []

    def identity(array, group):
        reduced.append(array.shape)
        return array

    monkeypatch.setattr(sync_batchnorm, "_world_size", lambda group: 2)
    monkeypatch.setattr(sync_batchnorm, "_all_reduce_sum", identity)
    return reduced


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{len(s)}d")
@pytest.mark.parametrize("options", [{}, {"momentum": None, "eps": 1e-3}, {"affine": False},
                                     {"track_running_stats": False}, {"bias": False}],
                         ids=str)
def test_the_synchronised_path_computes_batch_norm(one_rank_synchronising, shape, options,
                                                   device):
    ours, theirs = pair(**options)
    run_both(ours.to(device), theirs, shape, device=device)
    # per step: [sum, sum of squares, count] forward, [sum dy, sum dy * xhat] backward
    assert one_rank_synchronising == [(7,), (6,)] * 3


def test_the_synchronised_path_in_float32_and_without_input_gradient(one_rank_synchronising):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 3, 4, 4)) * 3 + 100).astype(np.float32)  # (a large mean)
    ours, theirs = nn.SyncBatchNorm(3), torch.nn.SyncBatchNorm(3)
    y, ty = ours(tt.tensor(x)), theirs(torch.tensor(x))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)
    assert one_rank_synchronising == [(7,)]  # x needs no gradient: no backward all-reduce


def test_the_synchronised_path_refuses_one_value_per_channel(one_rank_synchronising):
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.SyncBatchNorm(3)(tt.ones((1, 3)))
    with pytest.raises(ShapeError, match=r"SyncBatchNorm\(3\): expected input \[N, 3, \*\]"):
        nn.SyncBatchNorm(3)(tt.ones((2, 4)))


def test_bad_inputs_raise_pytorchs_errors():
    for bad in (tt.ones(3), tt.tensor(1.0)):
        with pytest.raises(ValueError, match=rf"expected at least 2D input \(got {bad.ndim}D "):
            nn.SyncBatchNorm(3)(bad)
    with pytest.raises(ValueError, match="SyncBatchNorm number of input channels should be "
                                         "non-zero"):
        nn.SyncBatchNorm(3)(tt.ones((2, 0)))
    with pytest.raises(ShapeError, match="SyncBatchNorm"):
        nn.SyncBatchNorm(3)(tt.ones((2, 4)))


def test_constructor_and_repr_are_pytorchs():
    ours, theirs = nn.SyncBatchNorm(5, 1e-3, 0.2, process_group=None), \
        torch.nn.SyncBatchNorm(5, 1e-3, 0.2, process_group=None)
    assert repr(ours) == repr(theirs)
    assert ours.process_group is None and isinstance(ours, nn.Module)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(nn.SyncBatchNorm(2, affine=False, track_running_stats=False)) == repr(
        torch.nn.SyncBatchNorm(2, affine=False, track_running_stats=False))


def model(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.norm = lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4, momentum=None)

        def forward(self, x):
            return self.norm(self.conv(x))

    return lib.nn.Sequential(
        Block(), lib.nn.ReLU(),
        lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Linear(16, 6),
                          lib.nn.BatchNorm1d(6, affine=False)),
        lib.nn.BatchNorm1d(6, eps=1e-3, track_running_stats=False), lib.nn.Linear(6, 2))


def test_convert_sync_batchnorm_replaces_every_batchnorm_as_pytorch_does():
    theirs = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model(torch))
    plain = model(tt)
    plain[0].norm.weight.requires_grad_(False)
    plain[0].norm.running_mean.fill_(0.5)
    plain[0].norm.num_batches_tracked.fill_(7)
    plain[2].eval()
    kept = {k: v for k, v in plain.state_dict().items()}
    tensors = dict(plain.named_parameters()) | dict(plain.named_buffers())
    ours = nn.SyncBatchNorm.convert_sync_batchnorm(plain)
    assert ours is plain  # (the containers are kept, their BatchNorm children replaced)
    assert [(k, type(m).__name__) for k, m in ours.named_modules()] == \
        [(k, type(m).__name__) for k, m in theirs.named_modules()]
    for (k, m), (_, tm) in zip(ours.named_modules(), theirs.named_modules()):
        assert repr(m) == repr(tm), k
    assert list(ours.state_dict()) == list(kept) == list(theirs.state_dict())
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), kept[k].numpy(), err_msg=k)
    for k, v in (dict(ours.named_parameters()) | dict(ours.named_buffers())).items():
        assert v is tensors[k], k  # the same tensors (an optimiser made before still works)
    assert not ours[0].norm.weight.requires_grad and ours[0].norm.bias.requires_grad
    assert [m.training for m in ours.modules()] == [True] * 5 + [False] * 4 + [True] * 2
    assert ours[0].norm.num_batches_tracked.item() == 7 and ours[0].norm.momentum is None
    assert ours[3].eps == 1e-3 and ours[3].running_mean is None


@pytest.mark.skipif(not TORCH_HAS_BIAS, reason="bias= needs PyTorch 2.13")
def test_convert_sync_batchnorm_of_a_batchnorm_returns_a_new_layer():
    bn = nn.BatchNorm2d(4, affine=True, bias=False)
    sync = nn.SyncBatchNorm.convert_sync_batchnorm(bn, process_group=None)
    assert type(sync) is nn.SyncBatchNorm and sync is not bn
    assert sync.weight is bn.weight and sync.bias is None and sync.running_var is bn.running_var
    assert repr(sync) == repr(torch.nn.SyncBatchNorm.convert_sync_batchnorm(
        torch.nn.BatchNorm2d(4, affine=True, bias=False)))
    x = np.random.default_rng(0).standard_normal((3, 4, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(sync.eval()(tt.tensor(x)).numpy(),
                               bn.eval()(tt.tensor(x)).numpy())
    linear = nn.Linear(2, 2)
    assert nn.SyncBatchNorm.convert_sync_batchnorm(linear) is linear


# ------------------------------------------------------------------ several ranks (mpiexec)


def mpirun(n: int, *args: str) -> subprocess.CompletedProcess:
    try:
        import mpi4py  # noqa: F401

        from tinytrain.distributed.launch import find_mpiexec

        mpiexec = find_mpiexec()
    except (ImportError, FileNotFoundError) as exc:
        pytest.skip(f"needs MPI (pip install mpi4py mpich): {exc}")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get(
               "PYTHONPATH")])])}
    return subprocess.run([mpiexec, "-n", str(n), sys.executable, SCRIPT, *args],
                          capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)


def run_ranks(n: int, scenario: str, backend: str = "mpi") -> None:
    if backend == "nccl":
        if not tt.cuda_is_available():
            pytest.skip("the nccl backend needs CuPy and GPUs")
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < n:
            pytest.skip(f"needs {n} GPUs")
    r = mpirun(n, scenario, "--backend", backend)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in range(n):
        assert f"ok {scenario} rank {rank}" in r.stdout, r.stdout


BACKENDS = [pytest.param("mpi", id="mpi"), pytest.param("nccl", id="nccl",
                                                        marks=pytest.mark.cuda)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_ranks_of_uneven_slices_equal_one_batchnorm_over_the_whole_batch(n, backend):
    """1-D to 5-D inputs, affine or not, running statistics or not, momentum None, ranks of
    1 or 0 samples: outputs, input gradients, the weight and bias gradients summed over the
    ranks and the running statistics equal PyTorch's BatchNorm over the whole batch (float64,
    1e-10), on every rank; eval mode uses the running statistics."""
    run_ranks(n, "layers", backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_value_per_channel_over_all_ranks_raises_on_every_rank(backend):
    run_ranks(3 if backend == "mpi" else 2, "errors", backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ddp_training_with_synced_batchnorm_equals_pytorch_on_the_whole_batch(backend):
    """convert_sync_batchnorm, DDP, SGD with momentum for 4 steps: every weight and running
    statistic equals PyTorch's BatchNorm net trained on the concatenated batch (1e-10)."""
    run_ranks(2, "ddp_training", backend)
