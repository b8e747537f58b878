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


def test_subset_indices_edited_in_place_are_used_as_torch():
    """PyTorch reads ``indices`` at every use: an edit in place changes the samples, the
    length and the loader's batches (a copy made when set would go stale silently)."""
    for indices in ([3, 1, 7], np.array([3, 1, 7])):
        results = []
        for lib, d in ((tt, data), (torch, torch_data)):
            ds = d.TensorDataset(lib.arange(20))
            sub = d.Subset(ds, indices.copy())
            sub.indices[0] = 9
            if isinstance(sub.indices, list):
                sub.indices.append(5)
            batches = [b[0].tolist() for b in d.DataLoader(sub, batch_size=3)]
            results.append((len(sub), int(sub[0][0]), batches))
        assert results[0] == results[1]
        assert results[0][1] == 9


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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bins, kwargs", [
    (7, {}), (50, {}), (13, dict(range=(-1.0, 2.5))), (4, dict(density=True)),
    (9, dict(weight=True)), (6, dict(weight=True, density=True, range=(-2.0, 2.0))),
    ("edges", {}), ("edges", dict(weight=True, density=True)),
])
def test_histogram_as_torch(dtype, bins, kwargs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(2000).astype(dtype).reshape(40, 50)
    if bins == "edges" or "range" in kwargs:
        x[0, 0] = np.nan  # (not counted; without a range it is PyTorch's error)
    if bins == "edges":  # values on given edges (a linspace's edges round as PyTorch's CPU
        x[0, 1:5] = [2.5, -1.0, 0.0, 0.0]  # vectorises: values placed on them are not tested)
    w = rng.random(x.shape).astype(dtype)
    edges = np.array([-3.0, -1.0, -0.25, 0.0, 0.5, 2.5], dtype)
    ours_kw = {**kwargs, "weight": tt.tensor(w)} if kwargs.get("weight") else kwargs
    theirs_kw = {**kwargs, "weight": torch.tensor(w)} if kwargs.get("weight") else kwargs
    ours = tt.histogram(tt.tensor(x), tt.tensor(edges) if bins == "edges" else bins, **ours_kw)
    theirs = torch.histogram(torch.tensor(x), torch.tensor(edges) if bins == "edges" else bins,
                             **theirs_kw)
    for a, b in zip(ours, theirs):  # (to a few units in the last place of the largest:
        assert a.dtype == getattr(tt, dtype)  # PyTorch's linspace rounds as its CPU vectorises)
        b = b.numpy()
        np.testing.assert_allclose(a.numpy(), b, rtol=0,
                                   atol=8 * np.finfo(dtype).eps * np.abs(b).max())
    assert ours.hist.shape == tuple(theirs.hist.shape)
    if not kwargs.get("weight") and not kwargs.get("density"):
        np.testing.assert_array_equal(ours.hist.numpy(), theirs.hist.numpy())  # (counts)


def test_histogram_edge_cases_and_errors_as_torch():
    for values, bins in (([2.0, 2.0], 2), ([], 3), ([1.0, 4.0], 1)):
        ours = tt.histogram(tt.tensor(values), bins)
        theirs = torch.histogram(torch.tensor(values), bins)
        np.testing.assert_array_equal(ours.hist.numpy(), theirs.hist.numpy())
        np.testing.assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy(), rtol=1e-7)
    x = [1.0, 2.0]
    for call, error in ((lambda L: L.histogram(L.tensor(x), 0), RuntimeError),
                        (lambda L: L.histogram(L.tensor(x), 2, range=(3.0, 1.0)), RuntimeError),
                        (lambda L: L.histogram(L.tensor([1.0, float("nan")]), 2), RuntimeError),
                        (lambda L: L.histogram(L.tensor([1, 2]), 2), NotImplementedError)):
        for lib in (tt, torch):
            with pytest.raises(error):
                call(lib)


def test_bincount_as_torch():
    x = np.array([0, 1, 1, 3, 7, 3, 3])
    for dtype in ("int64", "int32", "uint8"):
        for kwargs in ({}, dict(minlength=10), dict(minlength=2)):
            ours = tt.bincount(tt.tensor(x.astype(dtype)), **kwargs)
            theirs = torch.bincount(torch.tensor(x.astype(dtype)), **kwargs)
            assert ours.dtype == tt.int64 and ours.tolist() == theirs.tolist()
    for wdtype in ("float32", "float64", "int64"):
        w = np.arange(7).astype(wdtype) / 3 if wdtype != "int64" else np.arange(7)
        ours = tt.bincount(tt.tensor(x), tt.tensor(w))
        theirs = torch.bincount(torch.tensor(x), torch.tensor(w))
        assert ours.dtype == getattr(tt, str(theirs.dtype).removeprefix("torch."))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    assert tt.bincount(tt.tensor([], dtype=tt.int64)).tolist() == []
    for call, error, message in (
            (lambda L: L.bincount(L.tensor([0, -1])), RuntimeError, "1-d non-negative integral"),
            (lambda L: L.bincount(L.tensor([[0, 1]])), RuntimeError, "1-d non-negative integral"),
            (lambda L: L.bincount(L.tensor([1]), minlength=-1), RuntimeError,
             "minlength should be >= 0"),
            (lambda L: L.bincount(L.tensor([1, 2]), L.ones(3)), RuntimeError,
             "weights should be 1-d and have the same length as input"),
            (lambda L: L.bincount(L.tensor([0.0, 1.0])), NotImplementedError, "bincount")):
        for lib in (tt, torch):
            with pytest.raises(error, match=message):
                call(lib)


def test_get_device_as_torch(device):
    """-1 on the CPU, the GPU's index on a GPU."""
    expected = torch.ones(1).get_device() if device == "cpu" else 0
    assert tt.ones(2, device=device).get_device() == expected
    assert tt.ones(2, device=device)[:1].get_device() == expected


@pytest.mark.filterwarnings("ignore:__array_wrap__ must accept:DeprecationWarning")  # torch's
@pytest.mark.parametrize("ufunc, args", [
    (np.exp, ([1.0, 2.0],)), (np.exp, (1.5,)), (np.exp, ([1, 2],)), (np.add, ([1.0, 2.0], 1)),
    (np.maximum, ([1.0, -2.0], [0.5, 0.5])), (np.greater, ([1.0, 2.0], 1.5)),
    (np.isnan, ([1.0, float("nan")],)), (np.sqrt, ([4.0, 9.0],)),
])
def test_numpy_ufuncs_of_tensors_give_tensors_as_torch(ufunc, args):
    """``np.exp(t)`` is a tensor in PyTorch (its ``__array_wrap__``), 0-d for a 0-d input,
    NumPy's dtype (float64 for an int64 input) and uint8 for a bool result."""
    def call(lib):
        return ufunc(*(lib.tensor(a) if isinstance(a, (list, float)) else a for a in args))
    ours, theirs = call(tt), call(torch)
    assert isinstance(ours, tt.Tensor) and isinstance(theirs, torch.Tensor)
    assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.filterwarnings("ignore:__array_wrap__ must accept:DeprecationWarning")  # torch's
def test_numpy_ufunc_of_a_tensor_that_requires_grad_raises_as_torch():
    with pytest.raises(RuntimeError):
        np.exp(torch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="numpy.exp of a Tensor that requires grad"):
        np.exp(tt.ones(2, requires_grad=True))
    assert isinstance(np.exp(tt.ones(2, requires_grad=True).detach()), tt.Tensor)


@pytest.mark.parametrize("padding_idx", [3, -4, 10])
def test_embedding_padding_idx_out_of_range_raises_as_torch(padding_idx):
    for lib in (torch, tt):
        with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
            lib.nn.Embedding(3, 2, padding_idx=padding_idx)
        with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
            lib.nn.functional.embedding(lib.tensor([0, 1]), lib.zeros(3, 2),
                                        padding_idx=padding_idx)
