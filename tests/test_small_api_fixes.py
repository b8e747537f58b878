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
