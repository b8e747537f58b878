"""PyTorch's ``default_collate`` / ``default_convert`` and ``DataLoader(batch_size=None)``, and a
sampler that yields lists of indices (fast.ai's "from the foundations" notebooks use both),
side by side with ``torch.utils.data``."""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import tinytrain as tt
import tinytrain.utils.data as ttd

Point = namedtuple("Point", "x y")


def _plain(value):
    """A batch as plain Python values with container types and dtypes spelled out, the same
    for torch's and tinytrain's (tensors as ("tensor", dtype, values))."""
    if isinstance(value, torch.Tensor | tt.Tensor):
        return ("tensor", str(value.dtype).removeprefix("torch."), value.tolist())
    if isinstance(value, dict):
        return (type(value).__name__, {k: _plain(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_plain(v) for v in value])
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.tolist())
    return (type(value).__name__, value)


BATCHES = {
    "ints": [1, 2, 3],
    "floats": [1.0, 2.5],
    "bools": [True, False],
    "an int, then a float": [1, 2.5],
    "a float, then an int": [1.5, 2],
    "arrays": [np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)],
    "int32 arrays": [np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32)],
    "float32 then float64 arrays": [np.zeros(2, np.float32), np.ones(2)],
    "numpy floats": [np.float32(1), np.float32(2)],
    "numpy numbers of two dtypes": [np.float32(1), np.float64(2)],
    "numpy ints": [np.int8(1), np.uint8(2)],
    "numpy bools": [np.bool_(True), np.bool_(False)],
    "strings": ["a", "b"],
    "bytes": [b"a", b"b"],
    "tuples": [(1, "a", 2.0), (2, "b", 3.0)],
    "lists": [[1, 2], [3, 4]],
    "dicts": [{"x": 1, "y": 2.0}, {"x": 3, "y": 4.0}],
    "ordered dicts": [OrderedDict(x=np.ones(2)), OrderedDict(x=np.zeros(2))],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "nested": [(np.ones(2, np.float32), {"label": 1, "path": "a"}),
               (np.zeros(2, np.float32), {"label": 0, "path": "b"})],
}


@pytest.mark.parametrize("kind", BATCHES)
def test_default_collate_gives_torchs_batches(kind):
    batch = BATCHES[kind]
    assert _plain(ttd.default_collate(batch)) == _plain(tud.default_collate(batch))


def test_default_collate_stacks_tensors_and_keeps_their_graph():
    rows = [tt.tensor([1.0, 2.0], requires_grad=True), tt.tensor([3.0, 4.0])]
    out = ttd.default_collate(rows)
    assert out.shape == (2, 2) and out.requires_grad
    out.sum().backward()
    assert rows[0].grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("batch,error,message", [
    ([None, None], TypeError, "batch must contain tensors, numpy arrays, numbers, dicts or "
                              "lists; found <class 'NoneType'>"),
    ([object(), object()], TypeError, "found <class 'object'>"),
    ([np.array(["a"]), np.array(["b"])], TypeError, "found <U1"),
    ([[1, 2], [3]], RuntimeError, "each element in list of batch should be of equal size"),
    ([np.zeros(2), np.zeros(3)], RuntimeError, "equal size"),
    ([{"a": 1}, {"b": 2}], KeyError, "'a'"),
])
def test_default_collate_refuses_what_torch_refuses(batch, error, message):
    with pytest.raises(error):
        tud.default_collate(batch)
    with pytest.raises(error, match=message):
        ttd.default_collate(batch)


@pytest.mark.parametrize("data", [
    1, 1.5, "a", b"x", None, np.zeros(2), np.float32(3.0), np.int64(2), np.bool_(True),
    np.array(3.0), np.array(["a"]), (np.zeros(1), 2), [np.zeros(1), "x"],
    {"a": np.ones(1), "b": [np.int32(1)]}, Point(np.ones(1), 3),
], ids=repr)
def test_default_convert_makes_torchs_tensors(data):
    assert _plain(ttd.default_convert(data)) == _plain(tud.default_convert(data))


def test_default_convert_shares_the_arrays_memory():
    a = np.zeros(3)
    ttd.default_convert(a)[0] = 5.0
    assert a[0] == 5.0


class _Rows:
    """fast.ai's Dataset: ``ds[i]`` with ``i`` an int or a list of ints (then stacked rows)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


X = np.random.default_rng(0).normal(size=(200, 784)).astype(np.float32)
Y = np.arange(200)


def _loaders(**kwargs):
    """The same DataLoader in each library, over fast.ai's Dataset of each library's tensors."""
    sampler = kwargs.pop("sampler", None)
    return [(L, module.DataLoader(_Rows(L.tensor(X), L.tensor(Y)), **kwargs,
                                  **({"sampler": sampler(module)} if sampler else {})))
            for L, module in ((torch, tud), (tt, ttd))]


@pytest.mark.parametrize("batch_size,shape", [(1, (1, 50, 784)), (None, (50, 784)),
                                              (2, (2, 50, 784))])
def test_a_sampler_of_lists_of_indices_fetches_each_list_whole(batch_size, shape):
    """``DataLoader(ds, sampler=BatchSampler(...), batch_size=...)``: each list goes to
    ``ds[list]``; batch_size of those make a batch (none: the list's rows as they are)."""
    (_, theirs), (_, ours) = _loaders(
        batch_size=batch_size,
        sampler=lambda m: m.BatchSampler(m.SequentialSampler(range(200)), 50, False))
    assert len(ours) == len(theirs)
    batches = list(ours)
    for a, b in zip(batches, theirs, strict=True):
        assert a[0].shape == tuple(b[0].shape) and a[1].shape == tuple(b[1].shape)
        np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
        np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())
    assert batches[0][0].shape == shape


def test_batch_size_none_passes_each_sample_through_default_convert():
    class Samples:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return np.ones(2) * i, i, "s", {"a": np.float32(i)}

    for shuffle in (False, True):
        ours = ttd.DataLoader(Samples(), batch_size=None, shuffle=shuffle, seed=0)
        theirs = tud.DataLoader(Samples(), batch_size=None)
        assert len(ours) == len(theirs) == 3 and ours.batch_size is None
        got = sorted((_plain(b) for b in ours), key=repr)
        assert got == sorted((_plain(b) for b in theirs), key=repr)

    (_, theirs), (_, ours) = _loaders(batch_size=None)
    assert _plain(next(iter(ours))) == _plain(next(iter(theirs)))  # a list [x [784], y]
    with_fn = ttd.DataLoader(Samples(), batch_size=None, collate_fn=lambda s: s[0])
    assert [b.tolist() for b in with_fn] == [[0, 0], [1, 1], [2, 2]]  # an array: a Tensor

    class Stream(ttd.IterableDataset):
        def __iter__(self):
            yield from (np.ones(2), np.zeros(2))

    assert [b.tolist() for b in ttd.DataLoader(Stream(), batch_size=None)] == [[1, 1], [0, 0]]


def test_batch_size_none_refuses_what_torch_refuses():
    ds = ttd.TensorDataset(np.arange(6.0))
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching and "
                                         "is mutually exclusive with drop_last"):
        ttd.DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        ttd.DataLoader(ds, batch_size=None, batch_sampler=[[0, 1]])
    with pytest.raises(TypeError, match="integer"):  # (a float index inside a list, too)
        list(ttd.DataLoader(ds, batch_size=None, sampler=[[0, 1.5]]))
    with pytest.raises(IndexError, match="index 9, out of range"):
        list(ttd.DataLoader(ds, sampler=[[0, 9]]))


FIELDS = {
    "an int, then floats": [1, 0.5, 2, 0.25],
    "a float, then ints": [0.5, 1, 2, 3],
    "ints": [1, 2, 3, 4],
    "a bool, then ints": [True, 2, 3, 0],
    "bools": [True, False, True, True],
    "strings": ["a", "bb", "c", "d"],
    "bytes": [b"a", b"bb", b"c", b"d"],
}


@pytest.mark.parametrize("kind", FIELDS)
def test_the_dataloaders_own_collate_gives_torchs_dtypes_for_python_values(kind):
    """DataLoader's default (``collate``, not ``default_collate``) batches a field of Python
    numbers with PyTorch's dtypes also when ints and floats mix, and keeps bytes as strings."""
    values = FIELDS[kind]

    class Pairs:
        def __len__(self):
            return len(values)

        def __getitem__(self, i):
            return np.full(2, i, np.float32), values[i]

    class TorchPairs(Pairs, tud.Dataset):
        pass

    ours = next(iter(tt.data.DataLoader(Pairs(), batch_size=4)))
    theirs = next(iter(tud.DataLoader(TorchPairs(), batch_size=4)))
    assert isinstance(ours, tuple)
    assert _plain(list(ours)) == _plain(theirs)


def test_a_tensor_dataset_of_a_tensor_that_requires_grad_gives_batches_that_do():
    x = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    ours, theirs = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    labels = np.arange(6)
    ds, tds = ttd.TensorDataset(ours, tt.tensor(labels)), tud.TensorDataset(theirs,
                                                                            torch.tensor(labels))
    assert ds[1][0].requires_grad and not ds[1][1].requires_grad
    order = [4, 0, 5]
    batch = next(iter(ttd.DataLoader(ds, batch_size=3, sampler=order)))
    tbatch = next(iter(tud.DataLoader(tds, batch_size=3, sampler=order)))
    assert batch[0].requires_grad and tbatch[0].requires_grad
    assert batch[0].tolist() == tbatch[0].tolist() and batch[1].tolist() == tbatch[1].tolist()
    (batch[0] * batch[0]).sum().backward()
    (tbatch[0] * tbatch[0]).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_get_worker_info_is_none_as_in_the_main_process():
    assert ttd.get_worker_info() is None and tt.data.get_worker_info() is None
    assert tud.get_worker_info() is None  # (torch's, outside a worker)
