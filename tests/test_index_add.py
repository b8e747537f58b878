"""``backend.index_add``: ``target[index] += values`` with repeated indices accumulating.

On NumPy, one integer array on one axis with large rows (index_select's, an embedding's,
``x[:, idx]``'s backward) is added row by row instead of by ``np.add.at``: checked bitwise
against ``np.add.at`` itself (the same additions in the same order), including the errors,
and end to end against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import backend


def _random_case(rng, trial):
    nd = int(rng.integers(1, 4))
    shape = tuple(int(v) for v in rng.integers(1, 6, nd))
    axis = int(rng.integers(0, nd))
    n = shape[axis]
    ishape = tuple(int(v) for v in rng.integers(0, 4, int(rng.integers(1, 3))))
    # now and then an index just out of range on either side
    idx = rng.integers(-n - (trial % 7 == 0), n + (trial % 11 == 0), ishape)
    dtype = [np.float32, np.float64, np.float16, np.int64][trial % 4]
    target = (rng.standard_normal(shape) * 3).astype(dtype)
    index = idx if axis == 0 and trial % 3 == 0 else (slice(None),) * axis + (idx,)
    values = (rng.standard_normal(shape[:axis] + ishape + shape[axis + 1:]) * 100).astype(dtype)
    if trial % 5 == 0 and values.ndim and values.shape[-1]:
        values = values[..., :1]  # broadcast along the last axis
    if trial % 13 == 0:
        values = values.astype(np.float64)  # another dtype: left to add.at
    return target, index, values


def _outcome(fn, target, index, values):
    try:
        fn(target, index, values)
    except (IndexError, ValueError, TypeError) as exc:
        return type(exc)
    return None


@pytest.mark.parametrize("row_min", [1, backend.ROW_LOOP_MIN])
def test_equals_numpys_add_at_bit_for_bit(row_min, monkeypatch):
    monkeypatch.setattr(backend, "ROW_LOOP_MIN", row_min)
    rng = np.random.default_rng(0)
    by_rows = 0
    for trial in range(1500):
        target, index, values = _random_case(rng, trial)
        expected = target.copy()
        error = _outcome(np.add.at, expected, index, values)
        if error is None:
            by_rows += backend._add_rows(target.copy(), index, values)
        assert _outcome(backend.index_add, target, index, values) is error, trial
        np.testing.assert_array_equal(target, expected, err_msg=f"case {trial}")
    if row_min == 1:
        assert by_rows > 500  # the row path really ran


def test_values_that_alias_the_target_are_left_to_add_at():
    u = np.arange(4 * 300, dtype=np.float64).reshape(4, 300)
    expected = u.copy()
    np.add.at(expected, np.array([2, 3, 3]), expected[:3])
    assert not backend._add_rows(u.copy(), np.array([2, 3, 3]), u[:3].copy()[:0])  # (empty)
    assert not backend._add_rows(u, np.array([2, 3, 3]), u[:3])  # a view of the target
    backend.index_add(u, np.array([2, 3, 3]), u[:3])
    np.testing.assert_array_equal(u, expected)


@pytest.mark.parametrize("op", ["index_select", "embedding", "columns"])
def test_gradients_through_repeated_rows_equal_pytorchs(op):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 50, 300))
    ids = rng.integers(0, 50, 120)  # repeats
    grads = []
    for m in (tt, torch):
        a = m.tensor(x, requires_grad=True)
        if op == "index_select":
            y = a.index_select(1, m.tensor(ids))
        elif op == "embedding":
            y = m.nn.functional.embedding(m.tensor(ids.reshape(12, 10) % 8), a.reshape(8, -1))
        else:
            y = a[:, m.tensor(ids)]
        weights = np.random.default_rng(2).standard_normal(tuple(y.shape))
        (y * m.tensor(weights)).sum().backward()
        grads.append(a.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)
