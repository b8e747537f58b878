"""Creation functions as PyTorch 2.13 takes them: the ``*_like`` family with ``dtype=``,
``device=``, ``requires_grad=`` and ``memory_format=`` (keyword-only, as there),
``randint_like``, ``requires_grad=`` on ``arange`` / ``linspace`` / ``randint`` / ``randperm``;
PyTorch's once-per-process warning for ``float()`` of a tensor that requires grad; and
torchvision's label names on MNIST and Fashion-MNIST. Each against torch."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain.data import MNIST, FashionMNIST, MNISTMini

LIKE = {  # name -> extra positional arguments after the input
    "zeros_like": (), "ones_like": (), "empty_like": (), "full_like": (2.5,),
    "rand_like": (), "randn_like": (), "randint_like": (3, 9),
}
DETERMINISTIC = {"zeros_like", "ones_like", "full_like"}


def same_kind(ours, theirs):
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert str(ours.device) == str(theirs.device)
    assert (ours.requires_grad, ours.is_leaf) == (theirs.requires_grad, theirs.is_leaf)


@pytest.mark.parametrize("name", list(LIKE))
@pytest.mark.parametrize("kwargs", [
    {"device": "cpu"},
    {"dtype": "float64", "device": "cpu", "requires_grad": True},
    {"dtype": "float16", "memory_format": "preserve_format", "device": "cpu"},
    {"requires_grad": True, "memory_format": "contiguous_format", "device": "device:cpu"},
    {"dtype": "int64", "device": "cpu"},
])
def test_like_functions_take_pytorchs_keywords(name, kwargs):
    if name in ("rand_like", "randn_like") and kwargs.get("dtype") == "int64":
        pytest.skip("samples need a float dtype (both refuse)")

    def spelled(lib):  # the names as each library spells them
        return {k: getattr(lib, v) if k in ("dtype", "memory_format") else
                lib.device(v.removeprefix("device:")) if str(v).startswith("device:") else v
                for k, v in kwargs.items()}

    ours = getattr(tt, name)(tt.ones(2, 3), *LIKE[name], **spelled(tt))
    theirs = getattr(torch, name)(torch.ones(2, 3), *LIKE[name], **spelled(torch))
    same_kind(ours, theirs)
    if name in DETERMINISTIC:
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


@pytest.mark.parametrize("name", list(LIKE))
def test_like_functions_keep_the_inputs_dtype_and_device_and_refuse_what_pytorch_does(name):
    x = tt.ones(2, 2, dtype=tt.float64)
    out = getattr(tt, name)(x, *LIKE[name], device=tt.device("cpu"))
    assert out.dtype == tt.float64 and out.device == x.device and not out.requires_grad
    # dtype is keyword-only, as in PyTorch
    with pytest.raises(TypeError):
        getattr(torch, name)(torch.ones(2), *LIKE[name], torch.float64)
    with pytest.raises(TypeError):
        getattr(tt, name)(tt.ones(2), *LIKE[name], tt.float64)
    with pytest.raises(TypeError, match=rf"{name}\(\): argument 'input' must be Tensor, not "
                                        r"list"):
        getattr(tt, name)([1.0, 2.0], *LIKE[name])
    with pytest.raises(RuntimeError, match="floating point"):  # (rand_like: "samples need...")
        getattr(tt, name)(tt.ones(2), *LIKE[name], dtype=tt.int64, requires_grad=True)
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.ones(2), *LIKE[name], dtype=torch.int64, requires_grad=True)


def test_randint_like_as_pytorch():
    for call in (lambda L, x: L.randint_like(x, 5),  # (high only: low = 0)
                 lambda L, x: L.randint_like(x, 3, 6, dtype=L.int32),
                 lambda L, x: L.randint_like(x, high=4)):
        ours = call(tt, tt.zeros(200, dtype=tt.float64))
        theirs = call(torch, torch.zeros(200, dtype=torch.float64))
        same_kind(ours, theirs)
        # every value of the range in 200 draws, and no other
        assert set(np.unique(ours.numpy())) == set(np.unique(theirs.numpy()))
    x = tt.zeros(50)
    g1, g2 = tt.Generator().manual_seed(3), tt.Generator().manual_seed(3)
    assert tt.equal(tt.randint_like(x, 100, generator=g1), tt.randint_like(x, 100, generator=g2))
    with pytest.raises(RuntimeError, match="low .5. must be less than high .5."):
        tt.randint_like(x, 5, 5)


@pytest.mark.parametrize("make", [
    lambda L: L.arange(3.0, requires_grad=True),
    lambda L: L.arange(0, 5, 2, dtype=L.float64, requires_grad=True),
    lambda L: L.linspace(0, 1, 5, requires_grad=True),
    lambda L: L.randint(0, 4, (3,), dtype=L.float32, requires_grad=True),
    lambda L: L.randperm(4, dtype=L.float64, requires_grad=True),
])
def test_creation_functions_take_requires_grad_as_pytorch(make):
    ours, theirs = make(tt), make(torch)
    same_kind(ours, theirs)
    assert ours.requires_grad and ours.is_leaf and ours.grad_fn is None
    (ours * ours).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), 2 * ours.detach().numpy())


@pytest.mark.parametrize("make", [
    lambda L: L.arange(3, requires_grad=True),
    lambda L: L.randint(0, 4, (3,), requires_grad=True),
    lambda L: L.randperm(4, requires_grad=True),
])
def test_integer_results_cannot_require_grad_as_in_pytorch(make):
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can "
                                           "require gradients"):
        make(torch)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can "
                                           "require gradients"):
        make(tt)


# ------------------------------------------------------------ float() of a graph tensor

SCALAR_MESSAGE = ("Converting a tensor with requires_grad=True to a scalar may lead to "
                  "unexpected behavior.\nConsider using tensor.detach() first.")


@pytest.fixture
def fresh_scalar_warning(monkeypatch):
    """The once-per-process warning not yet given (as in a new process)."""
    # (tinytrain.tensor the module: the attribute tt.tensor is the function)
    monkeypatch.setattr(importlib.import_module("tinytrain.tensor"), "_SCALAR_WARNING", [True])


@pytest.mark.parametrize("convert", [float, math.exp, complex, lambda t: f"{float(t):.2f}"])
def test_float_of_a_tensor_that_requires_grad_warns_once_as_pytorch(fresh_scalar_warning,
                                                                    convert):
    x = tt.tensor([1.5], requires_grad=True)
    with pytest.warns(UserWarning) as record:
        convert(x * 2)
        convert(x)  # once per process: no second warning
        convert(tt.tensor(2.0, requires_grad=True))
    assert [str(r.message) for r in record] == [SCALAR_MESSAGE]
    assert record[0].filename == __file__


@pytest.mark.parametrize("convert", [
    lambda t: t.item(), int, bool, lambda t: f"{t.reshape(()):.3f}", lambda t: t.tolist(),
    lambda t: float(t.detach()), lambda t: float(tt.tensor([1.5])),
])
def test_conversions_pytorch_does_not_warn_for_do_not_warn(fresh_scalar_warning, convert):
    x = tt.tensor([1.5], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convert(x)
    with pytest.warns(UserWarning, match="Converting a tensor with requires_grad=True"):
        float(x)  # (still to come: the warning was not spent)


def test_float_under_no_grad_does_not_warn_as_pytorch(fresh_scalar_warning):
    x = tt.tensor([1.5], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tt.no_grad():
            assert float(x) == 1.5
    with pytest.warns(UserWarning, match="Converting a tensor with requires_grad=True"):
        float(x)
    # PyTorch, in a fresh process (its warning is spent once given): the same message, once,
    # not under no_grad nor for item(), int(), bool() or a detached tensor
    script = textwrap.dedent("""
        import warnings, torch
        warnings.simplefilter("always")
        x = torch.tensor([1.5], requires_grad=True)
        with warnings.catch_warnings(record=True) as record:
            with torch.no_grad():
                float(x)
            x.item(); int(x); bool(x); float(x.detach())
            float(x * 2); float(x)
        print(repr([str(r.message) for r in record]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    (message,) = eval(out)
    assert message.startswith(SCALAR_MESSAGE + " (Triggered internally")


# ------------------------------------------------------------ label names

MNIST_NAMES = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]
FASHION_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                 "Sneaker", "Bag", "Ankle boot"]


def test_mnist_label_names_are_torchvisions():
    """torchvision's lists (torchvision.datasets.MNIST / FashionMNIST .classes), and its
    ``class_to_idx``."""
    assert MNIST.classes == MNIST_NAMES and FashionMNIST.classes == FASHION_NAMES
    ds = MNISTMini(train=False)
    assert ds.classes == MNIST_NAMES
    assert ds.class_to_idx == {name: i for i, name in enumerate(MNIST_NAMES)}
    image, label = ds[0]
    assert ds.class_to_idx[ds.classes[label]] == label
    assert ds.classes[tt.tensor(label)] == MNIST_NAMES[label]  # (a label tensor indexes too)
