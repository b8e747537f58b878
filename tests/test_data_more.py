"""PyTorch's other data set and sampler classes (ConcatDataset and ``+``, IterableDataset,
SubsetRandomSampler, WeightedRandomSampler, BatchSampler and ``DataLoader(batch_sampler=)``),
each against torch.utils.data."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import tinytrain as tt
import tinytrain.utils.data as ttd


def _sets(n=5, start=0):
    """The same map-style data set, as tinytrain's and as PyTorch's: sample i is (x_i, i)."""
    x = np.arange(start, start + 2 * n, dtype=np.float32).reshape(n, 2)
    return ttd.TensorDataset(x, np.arange(start, start + n)), tud.TensorDataset(
        torch.tensor(x), torch.arange(start, start + n))


def _same_batches(ours, theirs):
    ours, theirs = list(ours), list(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert [f.numpy().tolist() for f in a] == [f.numpy().tolist() for f in b]


class Stream(ttd.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return ((np.float32(i) * np.ones(2, np.float32), i) for i in range(self.n))


class StreamWithLen(Stream):
    def __len__(self):
        return self.n


class TorchStream(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return ((torch.ones(2) * i, i) for i in range(self.n))


def test_concat_and_plus_number_the_samples_on():
    (a, ta), (b, tb) = _sets(3), _sets(4, start=10)
    for ours in (ttd.ConcatDataset([a, b]), a + b):
        theirs = tud.ConcatDataset([ta, tb])
        assert isinstance(ours, ttd.ConcatDataset) and len(ours) == len(theirs) == 7
        assert ours.cumulative_sizes == theirs.cumulative_sizes == [3, 7]
        for i in [*range(7), -1, -7]:
            assert [np.asarray(f).tolist() for f in ours[i]] == [f.tolist() for f in theirs[i]]
        _same_batches(ttd.DataLoader(ours, batch_size=3), tud.DataLoader(theirs, batch_size=3))
    with pytest.raises(IndexError, match="ConcatDataset: index 7 out of range for 7 samples"):
        (a + b)[7]
    with pytest.raises(ValueError, match="empty iterable"):
        ttd.ConcatDataset([])
    with pytest.raises(TypeError, match="does not support IterableDataset"):
        ttd.ConcatDataset([a, Stream(3)])


def test_subset_random_sampler_permutes_its_indices_each_epoch():
    ds, tds = _sets(10)
    indices = [7, 2, 9, 4]
    tt.manual_seed(0)
    sampler = ttd.SubsetRandomSampler(indices)
    epochs = [list(sampler) for _ in range(6)]
    assert all(sorted(e) == sorted(indices) for e in epochs) and len(sampler) == 4
    assert len({tuple(e) for e in epochs}) > 1          # a new order each epoch
    tt.manual_seed(0)
    assert [list(sampler) for _ in range(6)] == epochs  # ... reproducible from the seed
    seeded = [list(ttd.SubsetRandomSampler(indices, np.random.default_rng(3))) for _ in "ab"]
    assert seeded[0] == seeded[1]
    loader = ttd.DataLoader(ds, batch_size=3, sampler=ttd.SubsetRandomSampler(indices))
    reference = tud.DataLoader(tds, batch_size=3, sampler=tud.SubsetRandomSampler(indices))
    assert len(loader) == len(reference) == 2
    assert sorted(y for _, ys in loader for y in ys.tolist()) == sorted(indices)
    with pytest.raises(TypeError, match="SubsetRandomSampler: generator must be None or a "
                                        "tt.Generator .*, got torch._C.Generator"):
        ttd.SubsetRandomSampler(indices, generator=torch.Generator())


def test_weighted_random_sampler_draws_by_weight():
    weights = [0.1, 0.0, 0.6, 0.3]
    draws = np.array(list(ttd.WeightedRandomSampler(weights, 20000,
                                                    generator=np.random.default_rng(0))))
    assert draws.shape == (20000,) and 1 not in draws
    assert np.allclose(np.bincount(draws, minlength=4) / 20000, weights, atol=0.02)
    once = list(ttd.WeightedRandomSampler(weights, 3, replacement=False))
    assert sorted(once) == [0, 2, 3] and len(ttd.WeightedRandomSampler(weights, 7)) == 7
    tt.manual_seed(5)
    first = list(ttd.WeightedRandomSampler(tt.tensor(weights), 50))
    tt.manual_seed(5)
    assert list(ttd.WeightedRandomSampler(weights, 50)) == first


@pytest.mark.parametrize("args", [([0.5, 0.5], 0), ([0.5, 0.5], 2.0), ([0.5, 0.5], True),
                                  ([0.5, 0.5], 2, 1), ([[0.5], [0.5]], 2)])
def test_weighted_random_sampler_refuses_as_pytorch(args):
    with pytest.raises(ValueError) as theirs:
        tud.WeightedRandomSampler(*args)
    with pytest.raises(ValueError) as ours:
        ttd.WeightedRandomSampler(*args)
    assert str(ours.value) == str(theirs.value).replace("torch.Size([2, 1])", "(2, 1)")


def test_weighted_random_sampler_refuses_weights_it_cannot_draw_from():
    for weights in ([0.0, 0.0], [1.0, -1.0], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="finite, non-negative and not all zero"):
            ttd.WeightedRandomSampler(weights, 2)
    with pytest.raises(ValueError, match="cannot draw 3 samples without replacement from 2"):
        ttd.WeightedRandomSampler([1.0, 0.0, 1.0], 3, replacement=False)


def test_batch_sampler_gives_the_batches():
    ds, tds = _sets(10)
    batches = [[3, 1], [0, 9, 8], [5]]
    _same_batches(ttd.DataLoader(ds, batch_sampler=batches),
                  tud.DataLoader(tds, batch_sampler=batches))
    for drop_last in (False, True):
        ours = ttd.BatchSampler(ttd.SequentialSampler(range(10)), 3, drop_last)
        theirs = tud.BatchSampler(tud.SequentialSampler(range(10)), 3, drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
        _same_batches(ttd.DataLoader(ds, batch_sampler=ours),
                      tud.DataLoader(tds, batch_sampler=theirs))
    with pytest.raises(IndexError, match="gave index 10, out of range for a data set of 10"):
        list(ttd.DataLoader(ds, batch_sampler=[[0, 10]]))


@pytest.mark.parametrize("other", [dict(batch_size=2), dict(shuffle=True), dict(drop_last=True),
                                   dict(sampler=[0, 1])])
def test_batch_sampler_excludes_the_other_batching_options_as_pytorch(other):
    ds, tds = _sets(4)
    with pytest.raises(ValueError) as theirs:
        tud.DataLoader(tds, batch_sampler=[[0, 1]], **other)
    with pytest.raises(ValueError, match=str(theirs.value)):
        ttd.DataLoader(ds, batch_sampler=[[0, 1]], **other)


@pytest.mark.parametrize("drop_last", [False, True])
def test_an_iterable_dataset_is_batched_in_order(drop_last):
    _same_batches(ttd.DataLoader(Stream(10), batch_size=3, drop_last=drop_last),
                  tud.DataLoader(TorchStream(10), batch_size=3, drop_last=drop_last))
    assert len(ttd.DataLoader(StreamWithLen(10), batch_size=3, drop_last=drop_last)) == (
        3 if drop_last else 4)
    chained = [y for _, ys in ttd.DataLoader(Stream(2) + Stream(3), batch_size=2)
               for y in ys.tolist()]
    assert chained == [0, 1, 0, 1, 2]


def test_an_iterable_dataset_has_no_length_or_order_options_as_pytorch():
    with pytest.raises(TypeError) as theirs:
        len(tud.DataLoader(TorchStream(3)))
    with pytest.raises(TypeError, match=str(theirs.value).replace("TorchStream", "Stream")):
        len(ttd.DataLoader(Stream(3)))
    for name, value in (("shuffle", True), ("sampler", [0]), ("batch_sampler", [[0]])):
        with pytest.raises(ValueError) as theirs:
            tud.DataLoader(TorchStream(3), **{name: value})
        with pytest.raises(ValueError, match=str(theirs.value).replace("[", r"\[")
                           .replace("]", r"\]")):
            ttd.DataLoader(Stream(3), **{name: value})


def test_regressions_of_the_new_data_classes_like_torch():
    """A stream data set without __len__: bool() and hasattr as in PyTorch (its base raised);
    DataLoader.set_epoch reaches a batch sampler's DistributedSampler (every epoch repeated
    the first shuffle) and batch_size is None with a batch sampler; huge weights draw (the
    sum overflowed); a stream's sample is not given a dataset index in a collate error."""
    from tinytrain.data import (
        BatchSampler,
        DataLoader,
        DistributedSampler,
        IterableDataset,
        WeightedRandomSampler,
    )

    class Stream(IterableDataset):
        def __iter__(self):
            return iter([np.zeros(2), np.zeros(3)])

    assert bool(Stream()) and not hasattr(Stream(), "__len__")
    with pytest.raises(ValueError, match="sample 1 of the batch has shape"):
        next(iter(DataLoader(Stream(), batch_size=2)))

    items = np.arange(8)
    sampler = DistributedSampler(items, num_replicas=2, rank=0, shuffle=True, seed=0)
    loader = DataLoader(items, batch_sampler=BatchSampler(sampler, 2, drop_last=False))
    assert loader.batch_size is None
    epochs = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        epochs.append([b.tolist() for b in loader])
    assert epochs[0] != epochs[1] or epochs[1] != epochs[2]

    draws = list(WeightedRandomSampler([1e308, 1e308], 50))
    assert set(draws) <= {0, 1} and len(draws) == 50


@pytest.mark.parametrize("wrap", ["plain", "subset"])
def test_a_subclass_that_overrides_getitem_is_batched_through_it_as_torch(wrap):
    """A TensorDataset subclass with its own __getitem__ (an augmentation) inherits
    get_batch: the DataLoader used it and skipped the override silently. Its batches are
    now those of its __getitem__, as PyTorch's; the fast path stays for the classes that
    define both."""

    def make(lib, data):
        class Augmented(data.TensorDataset):
            def __getitem__(self, i):
                x, y = super().__getitem__(i)
                return x * 100, y

        ds = Augmented(lib.arange(6.0).reshape(6, 1), lib.arange(6))
        return data.Subset(ds, [5, 0, 3]) if wrap == "subset" else ds

    ours = [b[0].numpy().ravel().tolist() for b in ttd.DataLoader(make(tt, ttd), batch_size=2)]
    theirs = [b[0].numpy().ravel().tolist() for b in tud.DataLoader(
        make(torch, tud), batch_size=2)]
    assert ours == theirs and max(max(b) for b in ours) >= 100
    from tinytrain.data.dataloader import batch_getter

    assert batch_getter(ttd.TensorDataset(tt.ones(2), tt.ones(2))) is not None
    assert batch_getter(ttd.Subset(ttd.TensorDataset(tt.ones(2)), [1])) is not None


def test_an_mnist_subclass_with_a_field_more_keeps_it_in_its_batches():
    class WithIndex(tt.data.MNISTMini):
        def __getitem__(self, i):
            x, y = super().__getitem__(i)
            return x, y, i

    ds = WithIndex()
    x, y, idx = next(iter(ttd.DataLoader(ds, batch_size=4)))
    assert idx.tolist() == [0, 1, 2, 3] and x.shape == (4, 1, 28, 28)
    np.testing.assert_array_equal(x[2].numpy(), ds[2][0].numpy())


def test_a_collate_fn_result_keeps_its_namedtuple_or_dict_type():
    from collections import OrderedDict, namedtuple

    Batch = namedtuple("Batch", "x y")
    ds = ttd.TensorDataset(tt.arange(6.0).reshape(6, 1), tt.arange(6))
    b = next(iter(ttd.DataLoader(ds, batch_size=2, collate_fn=lambda s: Batch(
        np.stack([x.numpy() for x, _ in s]), [int(y) for _, y in s]))))
    assert type(b) is Batch and b.x.shape == (2, 1) and b.y == [0, 1]
    o = next(iter(ttd.DataLoader(ds, batch_size=2, collate_fn=lambda s: OrderedDict(
        x=np.stack([x.numpy() for x, _ in s]), n=len(s)))))
    assert type(o) is OrderedDict and list(o) == ["x", "n"] and o["x"].shape == (2, 1)
