"""Dataset, TensorDataset, Subset, ConcatDataset, IterableDataset and the DataLoader that
batches them.

A *dataset* is anything with ``len(ds)`` and ``ds[i]``; sample ``i`` is a tuple of fields
(arrays, Tensors or numbers), e.g. MNIST's ``(image: float32 Tensor [1, 28, 28], label: int)``.

The :class:`DataLoader` turns a dataset into an iterable of batches. A batch is a tuple of
Tensors, one per field, each the field's samples stacked along a new first axis:
``[B, *sample_shape]``. Stacking is *shape-preserving*: a ``[1, 28, 28]`` image field becomes
``[B, 1, 28, 28]``, never a flat ``[B * 784]`` buffer that the model must guess the shape of;
samples of different shapes or dtypes in one batch are an error that names them.

Datasets that can fetch many samples at once define
``get_batch(indices: int64 [B]) -> tuple of arrays [B, ...]``; the DataLoader then makes one
call per batch instead of B ``__getitem__`` calls and a stack (MNIST does: one fancy index).
It must return exactly what stacking the samples would. A subclass that overrides
``__getitem__`` (an augmentation) and inherits ``get_batch`` is fetched sample by sample
through its own ``__getitem__`` (:func:`batch_getter`).
"""

from __future__ import annotations

import bisect
import copy
import functools
import itertools
import math
import numbers
import operator
import re
import warnings
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    MutableSequence,
    Sequence,
)
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.data.sampler import (
    CHUNK,
    RandomSampler,
    Sampler,
    SequentialSampler,
    _seed,
    epoch_chunks,
    epoch_indices,
    epoch_items,
)
from tinytrain.random import numpy_generator


class Dataset:
    """A map-style data set: subclasses implement ``__len__`` and ``__getitem__``.

    ``__getitem__(i)`` returns sample ``i``, a tuple of arrays or scalars. Optionally,
    ``get_batch(indices)`` returns the stacked fields of many samples at once. (No
    ``__len__`` here, as in PyTorch: ``len()`` of one without it is Python's TypeError, and
    ``bool(dataset)`` and ``hasattr(dataset, "__len__")`` say what it has.)
    """

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        """``a + b``: the samples of ``a``, then those of ``b``."""
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A data set that is a stream: subclasses implement ``__iter__`` (yielding samples), and
    ``__len__`` only if they know their length (without one, ``len()`` is a TypeError, as in
    PyTorch). The DataLoader batches the stream in order: no shuffle, sampler or
    batch_sampler. ``a + b`` chains two streams (:class:`ChainDataset`)."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class ConcatDataset(Dataset):
    """Map-style data sets one after the other: sample ``i`` is sample ``i`` of the first,
    then the second's numbered on from ``len(first)``, ... (``cumulative_sizes``)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset does not support IterableDataset "
                                f"({type(d).__name__}); chain streams with ChainDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        index = sample_index(index, len(self), "ConcatDataset") % len(self)
        part = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[part - 1] if part else 0
        return self.datasets[part][index - start]


class ChainDataset(IterableDataset):
    """Streams one after the other (``IterableDataset + IterableDataset``)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got "
                                f"{type(d).__name__}")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class TensorDataset(Dataset):
    """Samples are rows of arrays: sample ``i`` is ``(a[i], b[i], ...)``.

    Args:
        *arrays: NumPy arrays (or Tensors) with the same first dimension ``N``; ``a[i]`` has
            shape ``a.shape[1:]``.

    ``get_batch(indices)`` returns ``(a[indices], b[indices], ...)``: shapes ``[B, *a.shape[1:]]``.
    Made from Tensors, ``ds[i]`` and ``ds[i:j]`` give Tensors (views), as PyTorch's does;
    made from arrays, arrays.
    """

    def __init__(self, *arrays: Any) -> None:
        if not arrays:
            raise ValueError("TensorDataset needs at least one array")
        self._as_tensors = all(hasattr(a, "requires_grad") for a in arrays)  # Tensors
        self._given = arrays if self._as_tensors else None  # (.tensors: the ones given)
        self.arrays = tuple(_as_numpy(a) for a in arrays)
        lengths = [a.shape[0] if a.ndim else None for a in self.arrays]
        if any(n is None or n != lengths[0] for n in lengths):
            shapes = ", ".join(str(a.shape) for a in self.arrays)
            raise ValueError(
                f"TensorDataset: arrays must share their first dimension, got {shapes}"
            )

    def __len__(self) -> int:
        return self.arrays[0].shape[0]

    def __getitem__(self, index: int | slice) -> tuple[Any, ...]:
        if self._as_tensors:
            return tuple(t[index] if t.requires_grad else _to_tensor(np.asarray(a[index]))
                         for t, a in zip(self._given, self.arrays))
        return tuple(a[index] for a in self.arrays)

    def get_batch(self, indices: np.ndarray) -> tuple[Any, ...]:
        """The rows ``indices`` of each array; of a Tensor that requires grad, a Tensor that
        does too (its rows taken in the graph, as PyTorch's collate stacks them)."""
        if self._as_tensors and any(t.requires_grad for t in self._given):
            from tinytrain.tensor import Tensor

            return tuple(t[Tensor(np.asarray(indices, dtype=np.int64)).to(t.device)]
                         if t.requires_grad else a.take(indices, axis=0)
                         for t, a in zip(self._given, self.arrays))
        return tuple(a.take(indices, axis=0) for a in self.arrays)

    @property
    def tensors(self) -> tuple[Any, ...]:
        """The Tensors given (PyTorch's attribute), or the arrays as Tensors (no copy)."""
        return self._given or tuple(_to_tensor(a) for a in self.arrays)


class Subset(Dataset):
    """The samples ``indices`` of ``dataset``, renumbered ``0 .. len(indices) - 1``.

    ``subset.indices`` is the sequence given, as PyTorch's (a list stays a list), read at
    every use: editing it in place, or setting it again, changes the subset. ``get_batch``
    maps a batch's indices through it (an array by fancy indexing, another sequence one
    lookup per sample, as PyTorch's ``__getitems__``) and calls ``dataset.get_batch`` when
    the dataset has it.
    """

    def __init__(self, dataset: Any, indices: Sequence[int] | np.ndarray) -> None:
        self.dataset = dataset
        self.indices = indices

    @property
    def indices(self) -> Sequence[int] | np.ndarray:
        return self._indices

    @indices.setter
    def indices(self, indices: Sequence[int] | np.ndarray) -> None:
        array = np.asarray(indices)
        if array.size and (array.ndim != 1 or array.dtype.kind not in "iu"):
            raise TypeError(f"Subset: indices must be a 1-D sequence of integers, got dtype "
                            f"{array.dtype} and shape {array.shape}")
        n = len(self.dataset)
        if array.size and (array.min() < -n or array.max() >= n):
            raise IndexError(f"Subset: indices out of range for a dataset of {n} samples")
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, index: int | list[int]) -> Any:
        """Sample ``index`` of the subset; a list of indices is passed on to the dataset as
        one list of its own indices, as PyTorch's ``Subset`` does."""
        if isinstance(index, list):
            return self.dataset[[int(self._indices[sample_index(i, len(self), "Subset")])
                                 for i in index]]
        return self.dataset[int(self._indices[sample_index(index, len(self), "Subset")])]

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, ...] | np.ndarray:
        own = self._indices
        if isinstance(own, np.ndarray):
            inner = own.astype(np.int64, copy=False)[np.asarray(indices)]
        else:
            inner = np.fromiter((own[i] for i in np.asarray(indices).tolist()), np.int64,
                                len(indices))
        get_batch = batch_getter(self.dataset)
        if get_batch is not None:
            return get_batch(inner)
        return collate([self.dataset[int(i)] for i in inner], inner)


def batch_getter(dataset: Any) -> Callable[[np.ndarray], Any] | None:
    """``dataset.get_batch`` where it gives what stacking ``dataset[i]`` would, else None.

    It does when the class that defines ``get_batch`` is the one that defines
    ``__getitem__``, or a subclass of it. A subclass that overrides ``__getitem__`` (an
    augmentation, an extra field) but inherits ``get_batch`` has its samples fetched one by
    one through its own ``__getitem__``, as PyTorch's DataLoader fetches them: the inherited
    fast path would skip the override silently."""
    get_batch = getattr(dataset, "get_batch", None)
    if get_batch is None:
        return None
    mro = type(dataset).__mro__
    owners = [next((k for k in mro if name in vars(k)), None)
              for name in ("get_batch", "__getitem__")]
    if None in owners:  # set on the instance, or no __getitem__ of its own: trust it
        return get_batch
    return get_batch if issubclass(owners[0], owners[1]) else None


def sample_index(index: Any, size: int, what: str) -> int:
    """``index`` as an int in ``[-size, size)``, or a clear error naming ``what``."""
    try:
        if isinstance(index, bool | np.bool_):
            raise TypeError
        index = operator.index(index)  # ints, NumPy integers, one-element integer tensors
    except TypeError:
        raise TypeError(f"{what}: a sample index must be an integer, got {index!r}") from None
    if not -size <= index < size:
        raise IndexError(f"{what}: index {index} out of range for {size} samples")
    return int(index)


def random_split(dataset: Any, lengths: Sequence[float], generator: Any = None, *,
                 seed: int | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given lengths.

    ``lengths`` must sum to ``len(dataset)``, or be fractions that sum to 1 (``[0.8, 0.2]``:
    each gets ``floor(n * fraction)`` and the rest is dealt out one by one, as PyTorch
    does; an empty split warns, as PyTorch's). The permutation is drawn from ``generator``
    (a :class:`tinytrain.Generator`, as PyTorch's ``generator=``), or made from tinytrain's
    ``seed`` (the same split for the same seed), or else drawn from the global stream
    (``tt.manual_seed``). Each Subset's ``indices`` is a list of ints, as PyTorch's
    (``a.indices + b.indices`` joins them). Lengths that are neither raise ValueError, or
    TypeError where they sum to ``len(dataset)`` but are not integers.
    """
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:  # fractions, as PyTorch reads them
        for i, k in enumerate(lengths):
            if not 0 <= k <= 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1: "
                                 f"{k} in {list(lengths)}")
        counts = [math.floor(n * k) for k in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
        for i, k in enumerate(lengths):
            if k == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              f"empty dataset.", stacklevel=2)
    if sum(lengths) != n or any(k < 0 for k in lengths):
        raise ValueError(f"random_split: lengths {list(lengths)} do not sum to len(dataset) = {n}")
    if not all(isinstance(k, numbers.Integral) for k in lengths):
        raise TypeError(f"random_split: lengths must be integers that sum to len(dataset) = "
                        f"{n}, or fractions that sum to 1, got {list(lengths)}")
    perm = (RandomSampler(range(n), generator=generator, seed=seed).indices() if n
            else np.zeros(0, np.int64))  # (a sampler refuses an empty data set)
    bounds = np.cumsum([0, *lengths])
    return [Subset(dataset, perm[a:b].tolist()) for a, b in zip(bounds[:-1], bounds[1:])]


def collate(
    samples: Sequence[Any], indices: Sequence[int] | np.ndarray | None = None
) -> Any:
    """Stack samples field by field: B samples of fields ``[*s_k]`` -> arrays ``[B, *s_k]``.

    Args:
        samples: B samples, each a tuple (or list) of fields, a dict of fields (the same keys
            in every sample), or a single array/scalar/string; a field may itself be a
            tuple, list or dict of fields.
        indices: the samples' dataset indices, only used in error messages.

    Returns:
        The samples' structure with each field stacked: a tuple of fields (a namedtuple
        stays one), a dict with one per key (as PyTorch's default collate), or a single
        array when the samples are single values. Python ints become int64, floats float64,
        bools bool, as in PyTorch (a field of ints and floats: float64 when the first is a
        float, the default float dtype when it is an int). Strings and bytes (file names,
        say) are not stacked: the batch keeps them as PyTorch's ``default_collate`` does,
        a tuple of the B strings for a field of a tuple (or list) sample, a list otherwise
        (a dict's field, single strings).
        (PyTorch returns a list where tinytrain returns a tuple of fields.)

    Raises:
        ValueError: two samples of a batch differ in number of fields (or keys), or a field's
            shape or dtype; the message names both samples, their dataset indices, and what
            differs.
        TypeError: a field is none of these (None, an object); the message names it.
    """
    if len(samples) == 0:
        raise ValueError("collate: empty batch")
    def who(j: int) -> str:  # (samples of a stream have no dataset index)
        return f"sample {j} of the batch" + ("" if indices is None else
                                             f" (dataset index {indices[j]})")

    return _collate(list(samples), "", who)


def _collate(values: Sequence[Any], field: str, who: Callable[[int], str]) -> Any:
    """The batch of one field (``""``: the whole samples) of every sample, recursively."""
    first, where = values[0], f" in field {field}" if field else ""
    if isinstance(first, dict):
        keys = list(first)  # (in the first sample's order, as PyTorch)
        for j, v in enumerate(values):
            if not isinstance(v, dict) or v.keys() != first.keys():
                got = list(v) if isinstance(v, dict) else type(v).__name__
                raise ValueError(f"collate: {who(j)} has fields {got} but {who(0)} has "
                                 f"{keys}{where}")
        return {key: _collate([v[key] for v in values], _name(field, repr(key)), who)
                for key in keys}
    if isinstance(first, (tuple, list)):
        for j, v in enumerate(values):
            if not isinstance(v, (tuple, list)) or len(v) != len(first):
                got = len(v) if isinstance(v, (tuple, list)) else type(v).__name__
                raise ValueError(f"collate: {who(j)} has {got} fields but {who(0)} has "
                                 f"{len(first)}{where}")
        fields = [_collate(tuple(v[k] for v in values), _name(field, str(k)), who)
                  for k in range(len(first))]
        return type(first)(*fields) if _is_namedtuple(first) else tuple(fields)
    if isinstance(first, str | bytes):
        for j, v in enumerate(values):
            if not isinstance(v, type(first)):
                raise TypeError(f"collate: field {field or 0} of {who(j)} is a "
                                f"{type(v).__name__} but {who(0)} has a "
                                f"{type(first).__name__} there")
        return values  # (a tuple from a tuple's field, a list otherwise, as PyTorch)
    return _stack(values, f"field {field or 0}", who)


def _name(field: str, part: str) -> str:
    """A nested field's name for error messages: ``0``, ``'x'``, ``1['y']``, ``'x'[0]``."""
    return part if not field else f"{field}[{part}]"


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def _stack(raw: Sequence[Any], field: str, who: Callable[[int], str]) -> np.ndarray:
    """One field of every sample of a batch, stacked: ``[B, *shape]``; shapes and dtypes
    must agree (the error names the first sample that differs)."""
    if all(isinstance(v, bool | int | float) and not isinstance(v, np.generic) for v in raw):
        return default_collate(list(raw)).numpy()  # (PyTorch's dtypes for Python numbers)
    values = [_as_field(value, field, who(j)) for j, value in enumerate(raw)]
    shape, dtype = values[0].shape, values[0].dtype
    for j, v in enumerate(values):
        if v.shape != shape:
            raise ValueError(
                f"collate: cannot stack {field}: {who(j)} has shape {v.shape} but "
                f"{who(0)} has shape {shape} (all samples of a batch need the same shape)"
            )
        if v.dtype != dtype:
            raise ValueError(
                f"collate: cannot stack {field}: {who(j)} has dtype {v.dtype} but "
                f"{who(0)} has dtype {dtype} (all samples of a batch need the same dtype)"
            )
    return np.stack(values)


def default_convert(data: Any) -> Any:
    """PyTorch's ``default_convert``: ``data`` with each NumPy array and NumPy number in it made
    a Tensor (an array's memory shared), recursing into dicts, namedtuples, tuples (which
    become lists, as in PyTorch) and lists; anything else (Python numbers, strings, Tensors,
    arrays of strings or objects) as it is. What :class:`DataLoader` with ``batch_size=None``
    does to each sample."""
    from tinytrain.tensor import as_tensor

    if isinstance(data, np.ndarray | np.bool_ | np.number):
        return data if _STRINGS_OR_OBJECTS.search(data.dtype.str) else as_tensor(data)
    if isinstance(data, Mapping):
        return _rebuild(data, {key: default_convert(value) for key, value in data.items()})
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        return _rebuild(data, [default_convert(d) for d in data])
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """PyTorch's ``default_collate``: a list of samples -> one batch of Tensors.

    Tensors are stacked (``[B, *shape]``, ``tt.stack``); NumPy arrays likewise, as Tensors;
    NumPy numbers make a ``[B]`` Tensor (their dtypes promoted as PyTorch's); Python floats
    float64, ints int64 (a float after a first int: the default float dtype), bools bool;
    strings and bytes stay as they are (a list, or a tuple within a tuple's field). Samples
    that are dicts, namedtuples, tuples or lists are collated field by field: a dict of
    batches, a namedtuple, and a *list* for tuples and lists, as PyTorch's. (The
    DataLoader's own default, :func:`collate`, gives tuples, refuses mixed dtypes and names
    the samples in its errors.)

    Raises:
        RuntimeError: sequences of different lengths, or Tensors of different shapes.
        TypeError: a sample is none of these (None, an object, an array of strings).
    """
    from tinytrain.dtypes import promote_types
    from tinytrain.functions import stack
    from tinytrain.tensor import Tensor, as_tensor, tensor

    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if _STRINGS_OR_OBJECTS.search(elem.dtype.str):
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return default_collate([as_tensor(b) for b in batch])
    if isinstance(elem, np.bool_ | np.number):
        dtype = functools.reduce(promote_types, (np.asarray(b).dtype for b in batch))
        return as_tensor(np.array(batch, dtype=dtype))
    if isinstance(elem, float):
        return tensor(batch, dtype=np.float64)
    if isinstance(elem, int):  # (and bools: tt.tensor's dtype, as torch.tensor's)
        return tensor(batch)
    if isinstance(elem, str | bytes):
        return batch
    if isinstance(elem, Mapping):
        return _rebuild(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if isinstance(elem, Sequence):
        if not _is_namedtuple(elem) and any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return _rebuild(elem, [default_collate(field) for field in zip(*batch)])
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


#: A ``dtype.str`` of strings, bytes or objects (PyTorch's ``np_str_obj_array_pattern``).
_STRINGS_OR_OBJECTS = re.compile("[SaUO]")
_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                  "lists; found {}")


def _rebuild(like: Any, values: dict[Any, Any] | list[Any]) -> Any:
    """``values`` (a dict for a mapping, a list for a sequence) in a container like ``like``, as
    PyTorch's collate functions rebuild one: a copy of a mutable one with them put in, another
    type called with them (a plain dict or list where that fails), a namedtuple of its type, a
    list for a plain tuple."""
    if _is_namedtuple(like):
        return type(like)(*values)
    if isinstance(like, tuple):
        return values
    try:
        if isinstance(like, MutableMapping | MutableSequence):
            clone = copy.copy(like)
            for key, value in (values.items() if isinstance(values, dict) else enumerate(values)):
                clone[key] = value
            return clone
        return type(like)(values)
    except TypeError:
        return values


class _SingleProcessDataLoaderIter:
    """``iter(loader)``: the batches of one epoch (made in this process, as PyTorch's
    iterator of the same name makes them without workers). ``len()`` is the epoch's number of
    batches (``len(loader)``, also after some were taken, as in PyTorch)."""

    def __init__(self, loader: DataLoader) -> None:
        self._loader = loader
        self._batches = loader._epoch()

    def __iter__(self) -> _SingleProcessDataLoaderIter:
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)


class DataLoader:
    """Iterate over a dataset in batches of Tensors.

    Args:
        dataset: a map-style dataset (``len`` and ``[i]``; ``get_batch`` is used when present),
            or an :class:`IterableDataset`, batched in the order it yields samples.
        batch_size: samples per batch, ``B``. ``None`` turns batching off, as in PyTorch: each
            sample comes on its own, through :func:`default_convert` (its NumPy arrays become
            Tensors; a tuple becomes a list) or ``collate_fn(sample)``; ``len(loader)`` is then
            the number of samples (not with ``drop_last`` or ``device``).
        shuffle: visit the samples in a new random order every epoch.
        drop_last: drop the last batch when it has fewer than ``B`` samples (default: keep it).
        sampler: where the indices come from (a :class:`Sampler` or any iterable of ints with a
            length), e.g. a :class:`DistributedSampler`. Not together with ``shuffle``/``seed``.
            Each epoch's indices are checked: integers within the data set (a float or bool
            index is an error, not a truncated other sample). A sampler may also yield lists
            of indices (``BatchSampler(SequentialSampler(ds), 50, False)``), as PyTorch allows:
            the data set then gets each list whole (``ds[[i, j, ...]]``, which must return
            the 50 samples stacked), and ``batch_size`` of those make a batch (``[1, 50,
            784]`` for ``batch_size=1``, ``[50, 784]`` for ``batch_size=None``).
        batch_sampler: instead of ``batch_size``/``shuffle``/``sampler``/``drop_last``, an
            iterable of lists of indices, one list per batch (e.g. :class:`BatchSampler`).
        seed: makes ``shuffle`` reproducible: epoch ``e``'s order depends only on
            ``(seed, e)`` (tinytrain's; :class:`RandomSampler`).
        generator: PyTorch's: a :class:`tinytrain.Generator` that ``shuffle`` draws each
            epoch's order from (the loader's :class:`RandomSampler`'s), not together with
            ``seed``. With neither, orders come from the global stream
            (``tinytrain.manual_seed``). Kept as ``loader.generator``; with a sampler of
            your own it is unused (PyTorch seeds worker processes from it).
        collate_fn: turns a list of samples into a batch (default: :func:`collate`); when
            given, ``get_batch`` is not used, and what it returns is the batch, as in PyTorch,
            except that NumPy arrays in it (alone, in a tuple or list, or a dict's values)
            become Tensors.
        device: ``"cuda"`` keeps the whole data set on the GPU: the first epoch stacks every
            sample once (``get_batch`` of all indices) and copies the fields to the GPU;
            from then on each epoch copies only its order (int64 ``[n]``) and each batch is
            one gather on the GPU. Batches are then on the GPU. Default: the CPU, as
            stacked by the dataset. Not together with ``collate_fn``.
        num_workers, persistent_workers, pin_memory, worker_init_fn, prefetch_factor:
            accepted so that PyTorch scripts run unchanged, validated as PyTorch does, and
            otherwise without effect: batches are always made in the main process (the
            in-memory fast path is faster than worker processes would be;
            bench/dataloader.py), and CPU memory is not pinned (``pin_memory=True`` without
            a GPU warns on each ``iter()``, as PyTorch's does). So ``worker_init_fn`` is
            never called, whatever ``num_workers`` says (PyTorch calls it once in each worker
            process, and not at all with ``num_workers=0``): seed or set up the main process
            yourself. ``prefetch_factor`` is PyTorch's: None with ``num_workers=0`` (a value
            there is a ValueError), 2 by default with workers; kept as
            ``loader.prefetch_factor``, as ``worker_init_fn`` is kept.
        timeout, in_order, pin_memory_device: PyTorch's, accepted and kept
            (``loader.timeout`` ...), without effect for the same reason: ``timeout`` (seconds
            to wait for a worker's batch) must be >= 0, and as in PyTorch only 0 with
            ``num_workers=0``; batches always come in order, which ``in_order=False``
            allows too; ``pin_memory_device`` (deprecated in PyTorch) warns as PyTorch's
            when given with ``pin_memory=True``. ``multiprocessing_context`` may be None.

    Each ``iter(loader)`` is one epoch and yields ``len(loader)`` batches: a tuple of Tensors,
    one per field, each ``[B, *sample_shape]`` (MNIST: ``x`` float32 ``[B, 1, 28, 28]``, ``y``
    int64 ``[B]``); a dataset whose samples are single arrays gives single Tensors, and
    one whose samples are dicts gives a dict of Tensors (nested fields stay nested; a field
    of strings stays strings, as in PyTorch: :func:`collate`). Differences from PyTorch: no
    worker processes (the fast path makes them unnecessary for in-memory data), and tuples
    where PyTorch's default collate gives lists.
    ``loader.dataset`` is the dataset.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool | None = False,
        drop_last: bool = False,
        sampler: Sampler | Iterable[int] | None = None,
        seed: int | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        *,
        device: str | None = None,
        batch_sampler: Iterable[Sequence[int]] | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        persistent_workers: bool = False,
        generator: Any = None,
        worker_init_fn: Callable[[int], None] | None = None,
        prefetch_factor: int | None = None,
        timeout: float = 0,
        in_order: bool = True,
        pin_memory_device: str = "",
        **unsupported: Any,
    ) -> None:
        if batch_size is None:  # PyTorch's automatic batching off: one sample at a time
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is "
                                 "mutually exclusive with drop_last")
            if device is not None and backend.normalize_device(device) != "cpu":
                raise ValueError("DataLoader: device='cuda' moves whole batches; with "
                                 "batch_size=None (single samples) move each one with .to()")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        elif batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if unsupported.get("multiprocessing_context", 0) is None:  # (PyTorch's default)
            del unsupported["multiprocessing_context"]
        if unsupported:
            name = next(iter(unsupported))
            raise TypeError(f"DataLoader got an unexpected keyword argument {name!r}: "
                            + _UNSUPPORTED.get(name, "not one of tinytrain's DataLoader's"))
        shuffle = False if shuffle is None else shuffle  # (PyTorch's default, None)
        for name, flag in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(flag, bool | np.bool_):  # e.g. PyTorch's order, sampler 4th
                raise TypeError(
                    f"DataLoader: {name} must be True or False, got {type(flag).__name__}; "
                    "the order is DataLoader(dataset, batch_size, shuffle, drop_last, "
                    "sampler, ...), so pass the others by keyword (sampler=...)")
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or \
                num_workers < 0:
            raise ValueError(f"num_workers option should be a non-negative integer, got "
                             f"{num_workers!r}; use num_workers=0 to disable multiprocessing")
        if num_workers == 0 and prefetch_factor is not None:  # (PyTorch's checks and text)
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
            raise TypeError(f"DataLoader: timeout must be a number of seconds, got "
                            f"{type(timeout).__name__}")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if timeout != 0 and num_workers == 0:  # (PyTorch's fails on iter(): same condition)
            raise ValueError(f"DataLoader: timeout={timeout!r} is how long to wait for a "
                             f"worker process's batch and needs num_workers > 0 (PyTorch's "
                             f"single-process loader requires timeout == 0)")
        if not isinstance(in_order, bool | np.bool_):
            raise TypeError(f"DataLoader: in_order must be True or False, got "
                            f"{type(in_order).__name__}")
        if not isinstance(pin_memory_device, str):
            raise TypeError(f"DataLoader: pin_memory_device must be a str, got "
                            f"{type(pin_memory_device).__name__}")
        if pin_memory and pin_memory_device:  # (PyTorch's warning, given there on iter())
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be "
                          f"used as the device,ignore pin_memory_device='{pin_memory_device}'.",
                          stacklevel=2)
        if seed is not None:
            _seed(seed)
            if generator is not None:
                raise ValueError("DataLoader: give seed= or generator=, not both (each makes "
                                 "the shuffle reproducible)")
        numpy_generator(generator, "DataLoader")
        stream = isinstance(dataset, IterableDataset)
        for name, value in (("shuffle", shuffle or None), ("sampler", sampler),
                            ("batch_sampler", batch_sampler), ("seed", seed)):
            if stream and value is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} "
                                 f"option, but got {name}={value}")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                          or drop_last or seed is not None):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                             "shuffle, sampler, and drop_last (and seed)")
        if sampler is not None and (shuffle or seed is not None):
            raise ValueError(
                "DataLoader: give either a sampler or shuffle/seed, not both (the sampler "
                "decides the order; e.g. DistributedSampler(ds, shuffle=True, seed=...))"
            )
        self.device = backend.normalize_device(device)
        if self.device != "cpu" and collate_fn is not None:
            raise ValueError("DataLoader: device='cuda' keeps the stacked data set on the GPU "
                             "and cannot call a collate_fn per batch; give one or the other")
        self._resident: tuple[bool, tuple[Any, ...]] | None = None
        self.dataset = dataset
        self._unbatched = batch_size is None and batch_sampler is None
        self.batch_size = None if batch_size is None or batch_sampler is not None \
            else int(batch_size)  # (PyTorch's)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed, self.generator = seed, generator
        self.collate_fn = collate_fn
        self.num_workers, self.pin_memory = int(num_workers), bool(pin_memory)
        self.persistent_workers = bool(persistent_workers)
        self.worker_init_fn, self.prefetch_factor = worker_init_fn, prefetch_factor
        self.timeout, self.in_order = timeout, bool(in_order)
        self.pin_memory_device = pin_memory_device
        if sampler is None and not stream:
            sampler = (RandomSampler(dataset, generator=generator, seed=seed) if shuffle
                       else SequentialSampler(dataset))
        self.sampler, self.batch_sampler = sampler, batch_sampler

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch of the next iteration (forwarded to the sampler, or the batch
        sampler's, if it has epochs)."""
        sampler = getattr(self.batch_sampler, "sampler", None) if self.batch_sampler else None
        for s in (self.sampler, sampler):
            if hasattr(s, "set_epoch"):
                s.set_epoch(epoch)

    def __len__(self) -> int:
        """Number of batches per epoch: ``ceil(n / B)``, or ``floor(n / B)`` with drop_last
        (a TypeError for an IterableDataset without a length, as in PyTorch)."""
        if self.batch_sampler is not None:
            return len(self.batch_sampler)  # type: ignore[arg-type]
        stream = isinstance(self.dataset, IterableDataset)
        n = len(self.dataset if stream else self.sampler)
        if self._unbatched:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> _SingleProcessDataLoaderIter:
        """One epoch's batches: an iterator with PyTorch's ``len()`` (the epoch's number of
        batches) and, as PyTorch's since 1.13, no ``.next()`` method (use ``next(it)``). As
        PyTorch's, each ``iter()`` with ``pin_memory=True`` and no GPU warns that no memory
        is pinned (tinytrain never pins it: see the class)."""
        if self.pin_memory and not backend.cuda_is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=2)
        return _SingleProcessDataLoaderIter(self)

    def _epoch(self) -> Iterator[Any]:
        B = self.batch_size
        stream = isinstance(self.dataset, IterableDataset)
        if self._unbatched:  # each sample on its own (a sampler's list of indices fetches one)
            if stream:
                samples = iter(self.dataset)
            elif _draws_in_chunks(self.sampler):  # (an epoch of 10**10 draws: as drawn)
                samples = (self.dataset[int(i)] for chunk in epoch_chunks(
                    self.sampler, len(self.dataset)) for i in chunk)
            else:
                samples = (self.dataset[i if isinstance(i, list) else int(i)]
                           for i in epoch_items(self.sampler, len(self.dataset)))
            for sample in samples:
                yield self._converted(sample)
            return
        if stream:  # batches of the stream, in order
            stream = iter(self.dataset)
            while samples := list(itertools.islice(stream, B)):
                if self.drop_last and len(samples) < B:
                    return
                yield _moved(self._collated(samples), self.device)
            return
        if self.batch_sampler is not None:
            for batch in self.batch_sampler:
                idx = epoch_indices(batch, len(self.dataset))
                yield _moved(self._batch(idx), self.device)
            return
        if _draws_in_chunks(self.sampler):  # an epoch too long to hold: batched as drawn
            orders = epoch_chunks(self.sampler, len(self.dataset))
        else:
            order = epoch_items(self.sampler, len(self.dataset))
            if isinstance(order, list):  # a sampler of lists: dataset[list] is each sample
                stop = len(order) - len(order) % B if self.drop_last else len(order)
                for start in range(0, stop, B):
                    batch = [self.dataset[i] for i in order[start : start + B]]
                    yield _moved(self._collated(batch), self.device)
                return
            orders = iter([order])
        if self.device != "cpu" and _has_transform(self.dataset):
            # a transform may be random (augmentation): it must run every epoch, so each
            # batch is made on the CPU and moved, not taken from the stacked data set
            for idx, _ in self._index_batches(orders, "cpu"):
                yield _moved(self._batch(idx), self.device)
            return
        if self.device != "cpu":
            fields = self._on_device()
            for host, idx in self._index_batches(orders, self.device):
                yield _map_fields(lambda f, idx=idx: _to_tensor(f.take(idx, axis=0)), fields,
                                  lambda s, host=host: type(s)(s[i] for i in host))
            return
        for idx, _ in self._index_batches(orders, "cpu"):
            yield self._batch(idx)

    def _index_batches(self, orders: Iterator[np.ndarray],
                       device: str) -> Iterator[tuple[np.ndarray, Any]]:
        """The batches of an epoch given as consecutive int64 pieces (``orders``): each
        batch's indices ``[B]`` (the last one shorter, or dropped with ``drop_last``), in host
        memory and on ``device`` (each piece is copied there once: the whole epoch's order,
        unless the sampler draws it in chunks)."""
        B = self.batch_size
        carry: tuple[np.ndarray, Any] | None = None  # the indices short of a batch, so far
        for order in orders:
            if carry is not None:
                order = np.concatenate([carry[0], order])
            there = order if device == "cpu" else backend.to_device(order, device)
            full = len(order) - len(order) % B
            for start in range(0, full, B):
                yield order[start : start + B], there[start : start + B]
            carry = (order[full:], there[full:]) if full < len(order) else None
        if carry is not None and not self.drop_last:
            yield carry

    def _on_device(self) -> Any:
        """Every field of the whole data set on ``self.device`` (strings stay in host
        memory), made once."""
        if self._resident is None:
            everything = np.arange(len(self.dataset), dtype=np.int64)
            get_batch = batch_getter(self.dataset)
            fields = (get_batch(everything) if get_batch is not None
                      else collate([self.dataset[int(i)] for i in everything], everything))
            self._resident = _map_fields(
                lambda f: backend.to_device(np.ascontiguousarray(f), self.device), fields)
        return self._resident

    def _batch(self, idx: np.ndarray) -> Any:
        """Fetch and stack the samples ``idx`` (int64 ``[B]``) and wrap them as Tensors."""
        get_batch = batch_getter(self.dataset)
        if get_batch is not None and self.collate_fn is None:
            return _map_fields(_to_tensor, get_batch(idx))
        return self._collated([self.dataset[int(i)] for i in idx], idx)

    def _converted(self, sample: Any) -> Any:
        """One sample, not batched (``batch_size=None``): ``collate_fn(sample)`` with its NumPy
        arrays as Tensors, or by default :func:`default_convert`'s, as PyTorch's."""
        if self.collate_fn is not None:
            return _tensors_for_arrays(self.collate_fn(sample))
        return default_convert(sample)

    def _collated(self, samples: list[Any], idx: np.ndarray | None = None) -> Any:
        """A batch of ``samples`` (of dataset indices ``idx``, for error messages).

        A ``collate_fn``'s result is returned as PyTorch returns it, except that its NumPy
        arrays (alone, in a tuple or list, or the values of a dict) become Tensors."""
        if self.collate_fn is not None:
            return _tensors_for_arrays(self.collate_fn(samples))
        return _map_fields(_to_tensor, collate(samples, idx))


def _draws_in_chunks(sampler: Any) -> bool:
    """Whether the DataLoader batches ``sampler``'s epoch as it is drawn, a chunk at a time:
    a :class:`RandomSampler` (not a subclass with an epoch of its own) of more than ``CHUNK``
    indices, e.g. minGPT's ``num_samples=int(1e10)``. (Shorter epochs are drawn whole: the
    same indices.)"""
    kind = type(sampler)
    return isinstance(sampler, RandomSampler) and sampler.num_samples > CHUNK \
        and (kind.chunks, kind.indices, kind.__iter__) == (
            RandomSampler.chunks, RandomSampler.indices, Sampler.__iter__)


_MAIN_PROCESS = "tinytrain's DataLoader makes batches in the calling process (num_workers=0)"
_UNSUPPORTED = {
    "multiprocessing_context": _MAIN_PROCESS + "; only None, its default, is accepted",
}


def _map_fields(fn: Callable[[Any], Any], fields: Any,
                strings: Callable[[Any], Any] = lambda s: s, top: bool = True) -> Any:
    """A batch (an array, or a tuple, namedtuple or dict of fields, nested; at the top a list
    of fields too) with ``fn`` applied to each array and ``strings`` to each field of strings
    (a tuple or list of ``str``); lists of fields become tuples. (A list inside is one field,
    numbers from a data set's own ``get_batch``.)"""
    if isinstance(fields, dict):
        return {k: _map_fields(fn, v, strings, False) for k, v in fields.items()}
    if isinstance(fields, (tuple, list)) and fields and all(isinstance(v, str | bytes)
                                                              for v in fields):
        return strings(fields)
    if isinstance(fields, tuple) or top and isinstance(fields, list):
        parts = [_map_fields(fn, f, strings, False) for f in fields]
        return type(fields)(*parts) if _is_namedtuple(fields) else tuple(parts)
    return fn(fields)


def _to_tensor(array: Any) -> Any:
    """Wrap a stacked batch field as a tinytrain Tensor, without copying it."""
    from tinytrain.tensor import Tensor

    if isinstance(array, Tensor):  # (rows of a Tensor that requires grad: TensorDataset)
        return array
    if not isinstance(getattr(array, "dtype", None), np.dtype):  # lists, PyTorch's tensors
        array = np.asarray(array)
    if array.dtype.kind not in "biufc":  # (a data set's own get_batch, say, of strings)
        raise TypeError(f"DataLoader: a batch field has dtype {array.dtype} (shape "
                        f"{array.shape}); a batch field must be numbers (bool, integer or float)")
    return Tensor(array)


def _has_transform(dataset: Any) -> bool:
    """True if ``dataset``, or one it wraps (a Subset's ``dataset``, a ConcatDataset's
    ``datasets``), runs a transform on each sample."""
    if callable(getattr(dataset, "transform", None)) or callable(
            getattr(dataset, "target_transform", None)):
        return True
    inner = list(getattr(dataset, "datasets", None) or [])
    if getattr(dataset, "dataset", None) is not None:
        inner.append(dataset.dataset)
    return any(_has_transform(d) for d in inner)


def _moved(batch: Any, device: str) -> Any:
    """A CPU batch (a Tensor, or a tuple or dict of them) on ``device``."""
    return batch if device == "cpu" else _map_fields(lambda t: t.to(device), batch)


def _as_numpy(a: Any) -> np.ndarray:
    """A NumPy view of an array or Tensor (``.numpy()``)."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "numpy"):
        return np.asarray(a.numpy())
    return np.asarray(a)


def _tensors_for_arrays(out: Any) -> Any:
    """What a ``collate_fn`` returned, with its NumPy arrays (alone, in a tuple or list, or a
    dict's values) as Tensors; a namedtuple, an ``OrderedDict`` or another subclass keeps
    its type (built again where one of its values changes)."""
    if isinstance(out, dict):
        converted = {k: _tensor_if_array(v) for k, v in out.items()}
        if all(converted[k] is v for k, v in out.items()):
            return out
        try:
            return converted if type(out) is dict else type(out)(converted)
        except TypeError:  # a subclass whose constructor takes other arguments
            return converted
    if isinstance(out, list | tuple):
        parts = [_tensor_if_array(v) for v in out]
        if all(p is v for p, v in zip(parts, out)):
            return out
        if _is_namedtuple(out):
            return type(out)(*parts)
        try:
            return type(out)(parts)
        except TypeError:
            return list(parts) if isinstance(out, list) else tuple(parts)
    return _tensor_if_array(out)


def _tensor_if_array(value: Any) -> Any:
    """A NumPy array of numbers as a Tensor; anything else as it is."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        return _to_tensor(value)
    return value


def _as_field(value: Any, field: str, who: str) -> np.ndarray:
    """One field of one sample as an array; Python scalars get PyTorch's collate dtypes."""
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"collate: {field} of {who} has dtype {value.dtype}; a batch "
                            "field must be numbers (bool, integer or float)")
        return np.asarray(value)
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, numbers.Integral):
        return np.asarray(value, dtype=np.int64)
    if isinstance(value, numbers.Real):
        return np.asarray(value, dtype=np.float64)
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    if isinstance(value, str | tuple | list | dict):  # (the first sample's field is numbers)
        raise TypeError(f"collate: {field} of {who} is a {type(value).__name__}, but the first "
                        f"sample's is a number or array; a field must be of one kind in "
                        f"every sample")
    raise TypeError(
        f"collate: {field} of {who} is a {type(value).__name__}; a field must be an array, a "
        f"Tensor, a number or a string, or a tuple, list or dict of such fields"
    )
