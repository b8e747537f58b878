"""``nn.utils.rnn``: batches of sequences of different lengths, as PyTorch's.

``pad_sequence`` stacks sequences ``[L_i, *]`` into one padded tensor; a ``PackedSequence``
holds them time-major without the padding: ``data [sum(L_i), *]`` is step 0 of every
sequence, then step 1 of those at least 2 long, ..., with ``batch_sizes[t]`` (an int64 CPU
tensor) the number of sequences at step ``t``. The sequences are ordered longest first;
``sorted_indices`` / ``unsorted_indices`` (None when the input was already sorted, with
``enforce_sorted=True``) map between that order and the caller's. The recurrent layers
(``nn.RNN`` / ``LSTM`` / ``GRU``) take a PackedSequence and stop each sequence at its own
length, so its final state is the one after its last real step.

Everything is slicing, ``cat`` and ``stack`` of tensors, so gradients flow through packing
and padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from tinytrain.functions import cat, stack
from tinytrain.tensor import ShapeError, Tensor, tensor


class PackedSequence(NamedTuple):
    """Sequences of different lengths without padding (see the module docstring):
    ``data [sum of lengths, *]``, ``batch_sizes [max length]`` (int64, on the CPU),
    ``sorted_indices`` / ``unsorted_indices [batch]`` or None."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(...)``; the indices follow data's device, ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))  # noqa: E731
        return PackedSequence(data, self.batch_sizes, move(self.sorted_indices),
                              move(self.unsorted_indices))

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> PackedSequence:
        return self.to("cuda" if device is None else device)

    def double(self) -> PackedSequence:
        return self.to(dtype=np.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=np.float32)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def _int_list(what: str, values: Any) -> list[int]:
    if isinstance(values, Tensor):
        if values.ndim != 1:
            raise ShapeError(f"'{what}' argument should be a 1D CPU int64 tensor, but got "
                             f"{values.ndim}D tensor")
        values = values.tolist()
    return [int(v) for v in values]


def _invert(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for position, i in enumerate(order):
        inverse[i] = position
    return inverse


def pad_sequence(sequences: Tensor | Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Sequences ``[L_i, *]`` padded with ``padding_value`` to the longest and stacked:
    ``[max L, B, *]`` (``[B, max L, *]`` with ``batch_first``); ``padding_side="left"`` puts
    the padding first. The result has the first sequence's dtype."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    seqs = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    for k, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: sequence {k} is a {type(s).__name__}, not a Tensor")
        if s.ndim < 1 or s.shape[1:] != seqs[0].shape[1:]:
            raise ShapeError(f"pad_sequence: every sequence must be [L, *] with the same "
                             f"trailing shape; sequence 0 is {list(seqs[0].shape)}, sequence "
                             f"{k} {list(s.shape)}")
    dtype = seqs[0].dtype
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        s = s.to(dtype=dtype)
        missing = longest - s.shape[0]
        if missing:
            pad = s.new_full((missing, *s.shape[1:]), padding_value)
            s = cat([s, pad] if padding_side == "right" else [pad, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def pack_padded_sequence(input: Tensor, lengths: Tensor | Sequence[int],  # noqa: A002
                         batch_first: bool = False, enforce_sorted: bool = True
                         ) -> PackedSequence:
    """Pack a padded batch ``[T, B, *]`` (``[B, T, *]`` with ``batch_first``) whose sequence
    ``i`` is ``lengths[i]`` long. With ``enforce_sorted`` the lengths must be decreasing;
    otherwise the batch is sorted here and ``sorted_indices`` records how."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: input must be a Tensor, not "
                        f"{type(input).__name__}")
    lengths = _int_list("lengths", lengths)
    if input.ndim < 2:
        raise ShapeError(f"pack_padded_sequence: input must be [T, B, *] (or [B, T, *] with "
                         f"batch_first), got {list(input.shape)}")
    x = input.transpose(0, 1) if batch_first else input
    if len(lengths) != x.shape[1]:
        raise ShapeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{len(lengths)} (batch_size={x.shape[1]})")
    if lengths and min(lengths) <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if lengths and max(lengths) > x.shape[0]:
        raise ShapeError(f"pack_padded_sequence: a length of {max(lengths)} for sequences of "
                         f"{x.shape[0]} steps (the input's {'second' if batch_first else 'first'}"
                         f" dimension)")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        sorted_indices = unsorted_indices = None
    else:
        order = [int(i) for i in np.argsort(-np.asarray(lengths), kind="stable")]
        sorted_indices = tensor(order, device=x.device)
        unsorted_indices = tensor(_invert(order), device=x.device)
        x = x.index_select(1, sorted_indices)
        lengths = [lengths[i] for i in order]
    batch_sizes = [sum(n > t for n in lengths) for t in range(lengths[0] if lengths else 0)]
    data = cat([x[t, :n] for t, n in enumerate(batch_sizes)])
    return PackedSequence(data, tensor(batch_sizes, dtype=np.int64), sorted_indices,
                          unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None
                        ) -> tuple[Tensor, Tensor]:
    """The inverse of :func:`pack_padded_sequence`: ``(padded [T, B, *], lengths [B])`` in
    the caller's order (``[B, T, *]`` with ``batch_first``; ``T`` is ``total_length`` if
    given, else the longest length); ``lengths`` is an int64 CPU tensor."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got "
                        f"{type(sequence).__name__}")
    data, batch_sizes = sequence.data, _int_list("batch_sizes", sequence.batch_sizes)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    batch = batch_sizes[0]
    pieces, start = [], 0
    for n in batch_sizes:
        piece = data[start:start + n]
        if n < batch:
            piece = cat([piece, data.new_full((batch - n, *data.shape[1:]), padding_value)])
        pieces.append(piece)
        start += n
    pieces += [data.new_full((batch, *data.shape[1:]), padding_value)] * (steps - len(pieces))
    padded = stack(pieces)
    lengths = [sum(n > i for n in batch_sizes) for i in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = [lengths[i] for i in _int_list("unsorted_indices", sequence.unsorted_indices)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, tensor(lengths, dtype=np.int64)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``[L_i, *]`` (longest first unless ``enforce_sorted=False``)."""
    seqs = list(sequences)
    return pack_padded_sequence(pad_sequence(seqs), [s.shape[0] for s in seqs],
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor | Sequence[int],
                   batch_first: bool = False) -> list[Tensor]:
    """The sequences ``[lengths[i], *]`` of a padded batch ``[T, B, *]`` (or ``[B, T, *]``)."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(_int_list("lengths", lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The sequences of a PackedSequence, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence",
           "pad_sequence", "unpack_sequence", "unpad_sequence"]
