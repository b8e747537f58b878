"""A tensor prints as the same tensor does in PyTorch (tinytrain/printing.py), apart from the
dtype's spelling (``dtype=float64`` for PyTorch's ``dtype=torch.float64``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = [np.array(3.5, np.float32), np.array(7), np.array(True), np.array(1e-7, np.float64),
           np.zeros((0,), np.float32), np.zeros((0, 3), np.float32), np.zeros((2, 0), np.int64),
           np.zeros((0,), np.int64), np.zeros((0, 2), bool)]
    for scale in (1e-9, 1e-5, 1e-3, 1.0, 10.0, 1e3, 1e5, 1e9, 1e12):
        for shape in ((5,), (3, 4), (2, 3, 4), (2, 2, 2, 2), (30,), (7, 13)):
            out.append((rng.standard_normal(shape) * scale).astype(np.float32))
    out += [
        np.array([0.27202106, 0.25569987, 0.29775923], np.float32),
        np.array([1e-5, 1.0, 1000.0], np.float32),            # ratio > 1000: scientific
        np.array([1.0, 2.0, 3.0], np.float32),                # whole numbers: "1., 2."
        np.array([-0.0, 0.0, 1e10], np.float32),
        np.array([np.nan, 1.0, np.inf, -np.inf], np.float32),
        np.array([np.nan, 1.5, -np.inf], np.float32), np.array([np.nan, np.nan], np.float32),
        np.zeros((2, 3), np.float32), np.array([0.0, np.inf]),
        np.array([1e-5, np.nan, 3.0], np.float64), np.array([123456.5, 0.5], np.float32),
        rng.standard_normal(2000).astype(np.float32),         # beyond threshold: "..."
        rng.standard_normal((40, 50)).astype(np.float32),
        rng.standard_normal((10, 20, 30)).astype(np.float32),
        rng.standard_normal((5, 300)), np.arange(1001),
        rng.integers(-1000, 1000, (40, 40)).astype(np.int32),
        rng.standard_normal((7, 3)).astype(np.float16), np.array([65504, 1e-3], np.float16),
        rng.integers(0, 255, (3, 5)).astype(np.uint8), rng.integers(-5, 5, (4, 4)).astype(np.int8),
        rng.integers(-5, 5, (4,)).astype(np.int16), rng.standard_normal((4, 4)) > 0,
        rng.standard_normal(100).astype(np.float32) * 100, np.arange(100, dtype=np.float32),
    ]
    return out


def _same_text(a: np.ndarray, **kwargs: object) -> None:
    expected = str(torch.tensor(a, **kwargs)).replace("dtype=torch.", "dtype=")
    assert str(tt.tensor(a, **kwargs)) == expected
    assert repr(tt.tensor(a, **kwargs)) == expected


@pytest.fixture(autouse=True)
def _default_options():
    yield
    tt.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


@pytest.mark.parametrize("index", range(len(_arrays())))
def test_prints_as_pytorch(index: int) -> None:
    a = _arrays()[index]
    _same_text(a)
    if a.dtype.kind == "f" and a.size:
        _same_text(a, requires_grad=True)


@pytest.mark.parametrize("options", [
    {"precision": 2}, {"sci_mode": True}, {"sci_mode": False}, {"threshold": 5, "edgeitems": 1},
    {"edgeitems": 0, "threshold": 3}, {"linewidth": 40}, {"profile": "short"},
    {"profile": "full"}, {"precision": 6, "linewidth": 120},
])
def test_print_options_as_pytorch(options: dict) -> None:
    tt.set_printoptions(**options)
    torch.set_printoptions(**options)
    for a in _arrays():
        _same_text(a)


def test_profile_default_restores_precision_4() -> None:
    tt.set_printoptions(precision=8, sci_mode=True)
    tt.set_printoptions(profile="default")
    assert str(tt.tensor([0.27202106, 0.25569987])) == "tensor([0.2720, 0.2557])"
    assert tt.printing.get_printoptions() == {"precision": 4, "threshold": 1000,
                                               "edgeitems": 3, "linewidth": 80,
                                               "sci_mode": None}


def test_grad_fn_and_parameter_suffixes() -> None:
    w = tt.tensor([0.27202106, 0.25569987, 0.29775923], requires_grad=True)
    assert str(w[:2]) == f"tensor([0.2720, 0.2557], grad_fn=<{w[:2].grad_fn.name}>)"
    with tt.no_grad():
        assert str(w * 2) == "tensor([0.5440, 0.5114, 0.5955])"
    p = tt.nn.Parameter(tt.tensor([[1.5, -2.0]]))
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([[1.5, -2.0]])))


def test_bad_print_options_say_what() -> None:
    with pytest.raises(ValueError, match="profile must be one of 'default', 'short', "
                                         "'full', got 'long'"):
        tt.set_printoptions(profile="long")
    with pytest.raises(ValueError, match="precision must be a non-negative number, got -1"):
        tt.set_printoptions(precision=-1)


def test_a_gpu_tensor_names_its_device(device: str) -> None:
    suffix = "" if device == "cpu" else ", device='cuda:0'"
    assert str(tt.tensor([1.0, 2.5], device=device)) == f"tensor([1.0000, 2.5000]{suffix})"
