"""Smaller API points compared with PyTorch 2.13: Subset/random_split indices, DataLoader's
worker options, calculate_gain's edge cases, refusals PyTorch makes, histogram/bincount."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.data as torch_data

import tinytrain as tt
import tinytrain.utils.data as data


def test_subset_indices_are_the_sequence_given():
    ds = data.TensorDataset(tt.arange(10))
    for indices in ([3, 1, 4], (2, 7), range(5), np.array([0, 9])):
        ours = data.Subset(ds, indices)
        theirs = torch_data.Subset(torch_data.TensorDataset(torch.arange(10)), indices)
        assert ours.indices is indices and theirs.indices is indices
    sub = data.Subset(ds, [3, 1, 4])
    assert int(sub[1][0]) == 1
    sub.indices = [5, 6]  # (set again: the samples follow)
    assert len(sub) == 2 and int(sub[0][0]) == 5


def test_random_split_gives_lists_of_ints():
    ds = data.TensorDataset(tt.arange(10))
    a, b = data.random_split(ds, [7, 3], generator=tt.Generator().manual_seed(0))
    ta, tb = torch_data.random_split(range(10), [7, 3],
                                     generator=torch.Generator().manual_seed(0))
    for ours, theirs in ((a, ta), (b, tb)):
        assert type(ours.indices) is type(theirs.indices) is list
        assert all(type(i) is int for i in ours.indices)
    joined = a.indices + b.indices  # (list concatenation, not element-wise addition)
    assert sorted(joined) == list(range(10))
    assert [int(a[i][0]) for i in range(len(a))] == a.indices


def test_dataloader_worker_init_fn_and_prefetch_factor_as_torch():
    calls = []
    for loader in (data.DataLoader, torch_data.DataLoader):
        plain = loader(range(4), worker_init_fn=calls.append)
        assert plain.worker_init_fn == calls.append and plain.prefetch_factor is None
        assert loader(range(4), num_workers=2).prefetch_factor == 2
        assert loader(range(4), num_workers=2, prefetch_factor=4).prefetch_factor == 4
        with pytest.raises(ValueError, match=r"^prefetch_factor option could only be specified "
                           r"in multiprocessing\.let num_workers > 0 to enable multiprocessing, "
                           r"otherwise set prefetch_factor to None\.$"):
            loader(range(4), prefetch_factor=2)
        with pytest.raises(ValueError, match="prefetch_factor option should be non-negative"):
            loader(range(4), num_workers=1, prefetch_factor=-1)
        assert [int(b) for b in plain] == [0, 1, 2, 3]  # (num_workers=0: never called)
    assert calls == []
    # tinytrain makes batches in the main process: no workers, so no call either
    loader = data.DataLoader(range(4), num_workers=2, worker_init_fn=calls.append)
    assert [int(b) for b in loader] == [0, 1, 2, 3] and calls == []


@pytest.mark.parametrize("args", [("conv_transpose1d",), ("conv_transpose2d",),
                                  ("conv_transpose3d",)])
def test_calculate_gain_as_torch(args):
    assert tt.nn.init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))


@pytest.mark.parametrize("args, message", [
    (("leaky_relu", True), "negative_slope True not a valid number"),
    (("leaky_relu", "0.2"), "negative_slope 0.2 not a valid number"),
    (("swish",), "Unsupported nonlinearity swish"),
])
def test_calculate_gain_errors_as_torch(args, message):
    for init in (tt.nn.init, torch.nn.init):
        with pytest.raises(ValueError, match=f"^{message}$"):
            init.calculate_gain(*args)


@pytest.mark.parametrize("call, error, message", [
    (lambda L: L.multinomial(L.tensor([1, 2, 3]), 2), RuntimeError,
     "multinomial only supports floating-point dtypes for input, got: Long"),
    (lambda L: L.tensor([True, False]).multinomial(1), RuntimeError,
     "multinomial only supports floating-point dtypes for input, got: Bool"),
    (lambda L: L.nn.functional.cross_entropy(L.zeros(3, 4), L.tensor([0, 1, 2], dtype=L.int32)),
     RuntimeError, "expected target dtype to be Long or Byte, but got Int"),
    (lambda L: L.nn.functional.nll_loss(L.zeros(3, 4, 5), L.zeros(3, 5, dtype=L.int16)),
     RuntimeError, "expected target dtype to be Long or Byte, but got Short"),
    (lambda L: L.nn.CrossEntropyLoss()(L.zeros(3, 4), L.tensor([0, 1, 2], dtype=L.int32)),
     RuntimeError, "expected target dtype to be Long or Byte, but got Int"),
    (lambda L: L.randint(0, 5, 3), TypeError, "randint"),
    (lambda L: L.randint(0, 5, size=3), TypeError, "randint"),
    (lambda L: L.ones(3).mT, RuntimeError,
     r"tensor\.mT is only supported on matrices or batches of matrices\. Got 1-D tensor\."),
])
def test_refusals_as_torch(call, error, message):
    for lib in (tt, torch):
        with pytest.raises(error, match=message):
            call(lib)


def test_class_targets_long_or_byte_only():
    """uint8 (Byte) and int64 (Long) class targets give torch's loss; int32 is refused."""
    logits = np.random.default_rng(0).standard_normal((3, 4))
    for dtype in ("uint8", "int64"):
        ours = tt.nn.functional.cross_entropy(tt.tensor(logits),
                                              tt.tensor([0, 3, 1], dtype=getattr(tt, dtype)))
        theirs = torch.nn.functional.cross_entropy(
            torch.tensor(logits), torch.tensor([0, 3, 1], dtype=getattr(torch, dtype)))
        assert float(ours) == pytest.approx(float(theirs), rel=1e-12)
    with pytest.raises(RuntimeError, match="but got Int"):
        tt.nn.functional.cross_entropy(tt.tensor(logits), tt.tensor([0, 3, 1], dtype=tt.int32))
