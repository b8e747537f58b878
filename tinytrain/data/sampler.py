"""Samplers: which sample indices an epoch visits, and in what order.

A sampler is an iterable of dataset indices with a length, as in PyTorch. tinytrain's samplers
also have ``indices() -> int64 [n]``, the whole epoch as one array, which the DataLoader slices
into batches without a Python loop over samples, and ``chunks()``, the same epoch in pieces: a
:class:`RandomSampler` of a huge ``num_samples`` (minGPT's ``RandomSampler(ds, replacement=True,
num_samples=int(1e10))``, an endless stream of batches) draws it a chunk at a time, as PyTorch
draws it lazily, instead of holding 10**10 indices.

* :class:`SequentialSampler`: 0, 1, ..., n-1.
* :class:`RandomSampler`: a permutation, reproducible from a seed or a generator and different
  every epoch (or ``num_samples`` draws, with or without replacement).
* :class:`DistributedSampler`: one rank's disjoint shard of the (shuffled) indices, the same
  length on every rank.
* :class:`SubsetRandomSampler`, :class:`WeightedRandomSampler` and :class:`BatchSampler`:
  PyTorch's, drawing from the global stream (``tt.manual_seed``) or a given generator.

``generator=`` is a :class:`tinytrain.Generator` (``tt.Generator().manual_seed(k)``), or a
``numpy.random.Generator``: the sampler draws from it, and from nothing else.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np

from tinytrain.random import numpy_generator

#: Indices a :class:`RandomSampler` with replacement draws at a time (``chunks()``).
CHUNK = 1 << 16


class Sampler:
    """Base class: subclasses implement ``__len__`` and either :meth:`indices` (the whole
    epoch as one array: tinytrain's samplers) or ``__iter__`` (as in PyTorch); the
    DataLoader uses whichever the subclass defines."""

    def indices(self) -> np.ndarray:
        """The indices of one epoch, int64 ``[len(self)]``."""
        if _iterates(self):  # (checked: no float or bool index truncated into another)
            return _as_indices(list(self), self)
        raise NotImplementedError(f"{type(self).__name__} must implement indices() or "
                                  "__iter__ (the indices of one epoch)")

    def chunks(self) -> Iterator[np.ndarray]:
        """The indices of one epoch in consecutive pieces, int64 ``[k]`` each, drawn as they
        are asked for (their concatenation is what :meth:`indices` gives); by default one
        piece, :meth:`indices`."""
        yield self.indices()

    def __iter__(self) -> Iterator[int]:
        for chunk in _pieces(self):
            yield from chunk.tolist()

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")


def epoch_indices(sampler: Sampler | Iterable[int], size: int) -> np.ndarray:
    """One epoch of ``sampler`` as int64 ``[n]``, checked: integers (not floats or bools,
    which NumPy would silently truncate into other samples), within a data set of ``size``.

    A tinytrain :class:`Sampler` gives the epoch as one array (:meth:`Sampler.indices`);
    anything else is iterated, as PyTorch does (e.g. a list, ``SubsetRandomSampler``).
    """
    if (isinstance(sampler, Sampler) and callable(sampler.indices)  # (not a list it keeps)
            and not _iterates(sampler)):
        order = _integer_indices(np.asarray(sampler.indices()), sampler)
    else:
        order = _as_indices(list(sampler), sampler)  # (the sampler's own errors as they are)
    return _within(order, size, sampler)


def epoch_chunks(sampler: Sampler | Iterable[int], size: int) -> Iterator[np.ndarray]:
    """One epoch of ``sampler`` as consecutive int64 pieces, each checked as
    :func:`epoch_indices` checks an epoch: a tinytrain :class:`Sampler`'s ``chunks()``, drawn
    as they are asked for (an epoch of ``RandomSampler(ds, True, num_samples=10**10)`` costs
    the memory of one chunk), anything else's whole epoch as one piece."""
    if isinstance(sampler, Sampler) and callable(sampler.indices) and not _iterates(sampler):
        for chunk in _pieces(sampler):
            yield _within(_integer_indices(np.asarray(chunk), sampler), size, sampler)
    else:
        yield epoch_indices(sampler, size)


def _pieces(sampler: Sampler) -> Iterator[np.ndarray]:
    """``sampler.chunks()``, or its ``indices()`` whole when a subclass overrides ``indices``
    below the class whose ``chunks`` it inherits (its epoch is then its ``indices()``)."""
    mro = type(sampler).__mro__
    owner = {name: next(i for i, c in enumerate(mro) if name in c.__dict__)
             for name in ("chunks", "indices")}
    return sampler.chunks() if owner["chunks"] <= owner["indices"] else iter([sampler.indices()])


def epoch_items(sampler: Sampler | Iterable[Any], size: int) -> np.ndarray | list[list[int]]:
    """One epoch of a DataLoader's ``sampler``: int64 ``[n]`` (:func:`epoch_indices`), or, from
    a sampler that yields lists of indices (a :class:`BatchSampler` given as ``sampler=``, as
    PyTorch allows; the data set then gets each list whole: ``dataset[[i, j, ...]]``), those
    lists, each checked as :func:`epoch_indices` checks indices."""
    if isinstance(sampler, Sampler) and callable(sampler.indices) and not _iterates(sampler):
        return epoch_indices(sampler, size)
    items = list(sampler)
    if items and all(isinstance(i, list | tuple) or getattr(i, "ndim", 0) == 1 for i in items):
        return [_within(_as_indices(list(i), sampler), size, sampler).tolist() for i in items]
    return _within(_as_indices(items, sampler), size, sampler)


def _within(order: np.ndarray, size: int, sampler: object) -> np.ndarray:
    """``order`` if its indices are within a data set of ``size``, else an IndexError."""
    if order.size == 0:
        return order
    low, high = int(order.min()), int(order.max())
    if low < -size or high >= size:
        bad = high if high >= size else low
        raise IndexError(f"sampler {type(sampler).__name__} gave index {bad}, out of range for "
                         f"a data set of {size} samples")
    return order


def _iterates(sampler: Sampler) -> bool:
    """True when the sampler's class defines ``__iter__`` below the class that defines
    :meth:`Sampler.indices` (a subclass in PyTorch's style, also of one of tinytrain's
    samplers): then its ``__iter__`` is the epoch, not the ``indices()`` it inherits."""
    mro = type(sampler).__mro__
    owner = {name: next(i for i, c in enumerate(mro) if name in c.__dict__)
             for name in ("__iter__", "indices")}
    return owner["__iter__"] < owner["indices"]


def _as_indices(items: list, sampler: object) -> np.ndarray:
    """What a sampler yielded, as int64 ``[n]``, checked (:func:`_integer_indices`)."""
    try:
        order = np.asarray(items)
    except ValueError:  # lists of different lengths
        raise TypeError(f"sampler {type(sampler).__name__} gave lists of indices, not single "
                        f"indices: a batch sampler? pass it as DataLoader(batch_sampler=...)"
                        ) from None
    return _integer_indices(order, sampler)


def _integer_indices(order: np.ndarray, sampler: object) -> np.ndarray:
    """``order`` as int64 ``[n]``, or a TypeError if ``sampler`` gave anything but integers."""
    if order.size == 0:
        return np.zeros(0, dtype=np.int64)
    if order.ndim != 1 or order.dtype.kind not in "iu":
        first = order.reshape(-1)[0] if order.ndim else order
        raise TypeError(f"sampler {type(sampler).__name__} gave indices of dtype {order.dtype} "
                        f"and shape {order.shape} (e.g. {first!r}); a sampler yields integer "
                        "indices, one at a time")
    return order.astype(np.int64, copy=False)


def _seed(value: object, name: str = "seed") -> int:
    """A seed or epoch as a non-negative integer for NumPy's generator (PyTorch accepts
    negative seeds too: they are taken modulo 2**64)."""
    if not _integer(value):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return int(value) % (1 << 64)


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``, every epoch."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def indices(self) -> np.ndarray:
        return np.arange(len(self.data_source), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of ``range(len(data_source))``, a new one every epoch (PyTorch's,
    with tinytrain's ``seed=``).

    Args:
        data_source: anything with ``len()``.
        replacement: draw ``num_samples`` indices independently, with repeats (default: no
            repeats: whole permutations).
        num_samples: indices per epoch (default ``len(data_source)``). Without replacement,
            more than ``len(data_source)`` gives permutations one after another, the last cut
            short, as PyTorch does.
        generator: a :class:`tinytrain.Generator` each epoch draws from (and advances).
        seed: tinytrain's: epoch ``e``'s order is a pure function of ``(seed, e)``, so two
            samplers with the same seed give the same sequence of epochs, and a resumed run
            continues the order (:meth:`set_epoch`). Not together with ``generator``.

    With neither, each epoch draws from the global stream, so ``tinytrain.manual_seed`` makes
    it reproducible. Each call of :meth:`indices` (each ``iter()``) is one epoch and advances
    the epoch counter; :meth:`set_epoch` chooses the next epoch explicitly (e.g. when resuming
    from a checkpoint), which matters only with a ``seed``.
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None, *,
                 seed: int | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if num_samples is not None and (not _integer(num_samples) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if seed is not None:
            _seed(seed)
            if generator is not None:
                raise ValueError("RandomSampler: give seed= or generator=, not both")
        numpy_generator(generator, "RandomSampler")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = None if num_samples is None else int(num_samples)
        if self.num_samples <= 0:  # an empty data source, as PyTorch (a DataLoader's shuffle)
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")
        self.generator = generator
        self.seed = seed
        self.epoch = 0

    @property
    def num_samples(self) -> int:
        """Indices per epoch: ``num_samples``, or the data set's length now."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next :meth:`indices` call produce epoch ``epoch``'s order."""
        _seed(epoch, "epoch")
        self.epoch = epoch

    def indices(self) -> np.ndarray:
        return np.concatenate([np.zeros(0, dtype=np.int64), *self.chunks()])

    def chunks(self) -> Iterator[np.ndarray]:
        """The epoch drawn a piece at a time when asked for: with replacement ``CHUNK``
        indices, without one permutation (the last cut short). The generator is chosen, and
        the epoch advanced, when the first piece is asked for."""
        n, count = len(self.data_source), self.num_samples
        if n == 0 and count > 0:
            raise ValueError(f"RandomSampler: cannot draw num_samples={count} indices from an "
                             "empty data source")
        if self.seed is not None:
            rng = np.random.default_rng((_seed(self.seed), _seed(self.epoch, "epoch")))
        else:
            rng = numpy_generator(self.generator, "RandomSampler")
        self.epoch += 1
        step = CHUNK if self.replacement else max(n, 1)  # (n = 0: an empty epoch)
        for start in range(0, count, step):
            size = min(count - start, step)
            if self.replacement:
                yield rng.integers(0, n, size=size, dtype=np.int64)
            else:  # permutations one after another, the last one cut short
                yield rng.permutation(n)[:size].astype(np.int64, copy=False)

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a new random order every epoch (PyTorch's): e.g. a
    validation split of one data set, ``DataLoader(ds, sampler=SubsetRandomSampler(val))``;
    drawn from ``generator`` (a :class:`tinytrain.Generator`; default: the global stream)."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        numpy_generator(generator, "SubsetRandomSampler")
        self.indices = indices  # (PyTorch's attribute: the epoch is drawn by __iter__)
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = numpy_generator(self.generator, "SubsetRandomSampler")
        order = rng.permutation(len(self.indices))
        return (self.indices[i] for i in order.tolist())

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices of ``range(len(weights))``, index ``i`` drawn with probability
    ``weights[i] / sum(weights)`` (PyTorch's; e.g. to oversample a rare class).

    Args:
        weights: float ``[n]``, non-negative, not all zero (need not sum to one).
        num_samples: indices per epoch.
        replacement: draw with replacement (default); without, ``num_samples`` may not
            exceed the number of nonzero weights.
        generator: a :class:`tinytrain.Generator` to draw from (default: the global stream).
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        if not _integer(num_samples) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ValueError(f"WeightedRandomSampler: weights must be finite, non-negative and "
                             f"not all zero, got {w.tolist()[:8]}{' ...' if w.size > 8 else ''}")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without "
                             f"replacement from {np.count_nonzero(w)} nonzero weights")
        numpy_generator(generator, "WeightedRandomSampler")
        self.weights, self.num_samples = w, int(num_samples)
        self.replacement, self.generator = replacement, generator

    def indices(self) -> np.ndarray:
        rng = numpy_generator(self.generator, "WeightedRandomSampler")
        p = self.weights / self.weights.max()  # (scaled first: a sum of 1e308s overflows)
        return rng.choice(self.weights.size, size=self.num_samples, replace=self.replacement,
                          p=p / p.sum()).astype(np.int64)

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices of ``sampler`` (the last one shorter unless
    ``drop_last``): PyTorch's, for ``DataLoader(batch_sampler=...)``."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        if not _integer(batch_size) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self) -> Iterator[list[int]]:
        order = list(self.sampler)
        stop = len(order) - len(order) % self.batch_size if self.drop_last else len(order)
        return (order[i:i + self.batch_size] for i in range(0, stop, self.batch_size))

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def _integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class DistributedSampler(Sampler):
    """Rank ``rank``'s shard of a data set split over ``num_replicas`` processes.

    Every epoch, all ranks compute the same order of ``range(n)`` (shuffled from
    ``(seed, epoch)`` when ``shuffle``), and rank ``r`` takes positions ``r, r + R, r + 2R, ...``
    of it (``R = num_replicas``). The shards are therefore disjoint, together cover the data,
    and have the same length on every rank, which DDP needs: every rank must run the same number
    of steps, or the collective operations of the last step wait forever.

    **The tail.** When ``n`` is not a multiple of ``R``:

    * ``drop_last=False`` (default): the order is padded with its own first ``R - n % R``
      indices, so every rank gets ``ceil(n / R)`` samples; those few samples are seen twice in
      the epoch (the padding is the last sample of the last ranks: :meth:`padding_mask` marks
      it, so that evaluation can leave it out of its counts).
    * ``drop_last=True``: the last ``n % R`` indices of the order are dropped, every rank gets
      ``n // R`` samples, and no sample is repeated (with ``shuffle``, a different few are
      dropped each epoch).

    This is PyTorch's ``torch.utils.data.DistributedSampler``: with the same arguments and
    ``shuffle=False`` the shards are identical (the shuffled orders differ: another RNG).

    Args:
        dataset: anything with ``len()``.
        num_replicas: number of ranks (default: ``tinytrain.distributed.get_world_size()``).
        rank: this process's rank, ``0 <= rank < num_replicas`` (default: ``get_rank()``).
        shuffle: shuffle the order every epoch.
        seed: the shuffle seed; must be the same on all ranks.
        drop_last: drop the tail instead of padding (see above).

    Unlike :class:`RandomSampler`, the epoch does **not** advance by itself: call
    ``set_epoch(epoch)`` at the start of every epoch (as in PyTorch), or every epoch has the
    same order. The epoch must come from the training loop, which all ranks share.
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            num_replicas, rank = _world(num_replicas, rank)
        if not _integer(num_replicas) or num_replicas < 1:
            raise ValueError(f"num_replicas must be a positive integer, got {num_replicas!r}")
        if not _integer(rank) or not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, {num_replicas - 1}], got {rank!r}")
        _seed(seed)
        self.dataset = dataset
        self.num_replicas = int(num_replicas)  # NumPy integers too, as in PyTorch
        self.rank = int(rank)
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = self._size = len(dataset)
        if drop_last:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = -(-n // num_replicas)  # ceil
        #: Length of the padded (or cut) order that is dealt out to the ranks.
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffled order the next iteration uses (same on all ranks)."""
        _seed(epoch, "epoch")
        self.epoch = epoch

    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if n != self._size:  # the shards were sized for another length: they would miss some
            raise ValueError(
                f"DistributedSampler: the data set has {n} samples now but {self._size} when "
                "the sampler was made (its shards were sized for that); make a new sampler")
        if self.shuffle:
            seeds = (_seed(self.seed), _seed(self.epoch, "epoch"))
            order = np.random.default_rng(seeds).permutation(n)
        else:
            order = np.arange(n)
        if self.total_size > n:  # pad with the first indices, wrapping if n < padding
            order = np.resize(order, self.total_size)
        return order[: self.total_size].astype(np.int64, copy=False)

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch, int64 ``[num_samples]``."""
        return self._order()[self.rank : self.total_size : self.num_replicas]

    def padding_mask(self) -> np.ndarray:
        """bool ``[num_samples]``: True where this rank's sample is padding (a repeat).

        All False with ``drop_last=True`` or when ``R`` divides ``n``; otherwise at most the last
        entry is True, on the last ``total_size - n`` ranks.
        """
        positions = np.arange(self.rank, self.total_size, self.num_replicas)
        return positions >= self._size

    def __len__(self) -> int:
        return self.num_samples


def _world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """Fill in world size and rank from ``tinytrain.distributed`` when not given."""
    try:
        from tinytrain import distributed as dist

        world = dist.get_world_size() if num_replicas is None else num_replicas
        me = dist.get_rank() if rank is None else rank
    except Exception as exc:  # no distributed package, or no process group yet
        raise ValueError(
            "DistributedSampler needs num_replicas and rank: pass them, or call "
            f"tinytrain.distributed.init_process_group() first ({type(exc).__name__}: {exc})"
        ) from None
    return world, me
