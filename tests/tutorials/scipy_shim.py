"""Test-only stand-ins for the SciPy functions the PINN program (pinn_burgers.py) calls.

``io.loadmat(path)`` reads the arrays of a ``.mat`` file that the test wrote with
``np.savez`` (SciPy is not installed here); ``interpolate.griddata(points, values, xi)``
handles the one case the program has: values given on the grid ``xi`` itself, so they are
put back in place. Nothing here depends on the library under test.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def loadmat(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f, np.load(f) as data:
        return {name: data[name] for name in data.files}


def griddata(points, values, xi, method="linear"):
    X, T = xi
    grid = np.hstack((X.flatten()[:, None], T.flatten()[:, None]))
    if not np.array_equal(grid, points):
        raise NotImplementedError("scipy_shim.griddata: only values on the grid xi itself")
    return values.reshape(X.shape)


io = SimpleNamespace(loadmat=loadmat)
interpolate = SimpleNamespace(griddata=griddata)
