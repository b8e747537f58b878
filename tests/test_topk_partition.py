"""``Tensor.topk`` on the CPU picks its candidates with ``argpartition`` and sorts only them;
it must return exactly what the first ``k`` of the stable sort are (ties in index order, NaN
the largest), also where ties straddle the cut, and PyTorch's values and indices where
there are no ties."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt


def _first_k_of_sort(a, k, dim, largest):
    order = tt.tensor(a).argsort(dim, descending=largest).numpy()
    return np.take(order, np.arange(k), axis=dim)


def _random_case(rng):
    shape = tuple(int(n) for n in rng.integers(1, 7, rng.integers(1, 4)))
    shape = shape[:-1] + (int(rng.integers(8, 48)),)
    kind = int(rng.integers(0, 4))
    if kind == 0:  # no ties
        a = rng.standard_normal(shape)
    elif kind == 1:  # many ties
        a = rng.integers(0, 4, shape).astype(np.float32)
    elif kind == 2:  # NaNs, some rows all NaN
        a = rng.standard_normal(shape)
        a[rng.random(shape) < 0.3] = np.nan
        a[(0,) * (len(shape) - 1)] = np.nan
    else:  # integers
        a = rng.integers(-3, 3, shape)
    dim = int(rng.integers(-len(shape), len(shape)))
    n = shape[dim]
    k = int(rng.integers(1, max(2, n // 4 + 1)))  # the partition's range
    return a, k, dim, bool(rng.integers(0, 2))


@pytest.mark.parametrize("seed", range(4))
def test_topk_is_the_first_k_of_the_stable_sort(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        a, k, dim, largest = _random_case(rng)
        values, indices = tt.tensor(a).topk(k, dim, largest)
        expected = _first_k_of_sort(a, k, dim, largest)
        np.testing.assert_array_equal(indices.numpy(), expected)
        assert indices.dtype == tt.int64
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, expected, dim))


def test_ties_on_both_sides_of_the_cut_come_in_index_order():
    a = np.array([[5.0, 1, 3, 3, 0, 3, 2, 3, 3, 1, 0, 0, 0, 0, 0, 0]])  # top 3: 5, then two 3s
    _, idx = tt.tensor(a).topk(3)
    assert idx.numpy().tolist() == [[0, 2, 3]]
    _, idx = tt.tensor(a).topk(3, largest=False)  # 0 at 4, 10, 11 (of seven zeros)
    assert idx.numpy().tolist() == [[4, 10, 11]]


def test_matches_torch_without_ties_and_carries_the_gradient():
    x = np.random.default_rng(3).standard_normal((4, 50, 64))
    g = np.random.default_rng(4).standard_normal((4, 5, 64))
    t, tt_x = torch.tensor(x, requires_grad=True), tt.tensor(x, requires_grad=True)
    tv, ti = t.topk(5, 1)
    v, i = tt_x.topk(5, 1)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(v.detach().numpy(), tv.detach().numpy())
    tv.backward(torch.tensor(g))
    v.backward(tt.tensor(g))
    np.testing.assert_array_equal(tt_x.grad.numpy(), t.grad.numpy())
