"""Test-only stand-in for ``pyDOE.lhs`` (not installed here): pyDOE's classic Latin hypercube,
``lhs(n, samples)`` -> ``[samples, n]`` in [0, 1), one point in each of ``samples`` intervals
of each dimension, drawn from NumPy's global generator as pyDOE's."""

from __future__ import annotations

import numpy as np


def lhs(n: int, samples: int) -> np.ndarray:
    cut = np.linspace(0, 1, samples + 1)
    u = np.random.rand(samples, n)
    a, b = cut[:samples], cut[1:samples + 1]
    rdpoints = u * (b - a)[:, None] + a[:, None]
    H = np.zeros_like(rdpoints)
    for j in range(n):
        order = np.random.permutation(range(samples))
        H[:, j] = rdpoints[order, j]
    return H
