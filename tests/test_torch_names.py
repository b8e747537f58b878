"""Names a reader of PyTorch's "Learn the Basics" reaches for: ``tt.finfo`` / ``tt.iinfo``,
the legacy tensor types (``tt.FloatTensor``, ...), and ``out=`` of the reductions, each
against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt

FLOATS = ["float16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_as_pytorch(name):
    ours, theirs = tt.finfo(getattr(tt, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
        assert type(getattr(ours, attr)) is type(getattr(theirs, attr)), attr
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", INTS)
def test_iinfo_as_pytorch(name):
    ours, theirs = tt.iinfo(getattr(tt, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.max, ours.min, ours.dtype) == (
        theirs.bits, theirs.max, theirs.min, theirs.dtype)
    assert repr(ours) == repr(theirs)


def test_finfo_defaults_and_refusals():
    assert tt.finfo().dtype == "float32" and tt.finfo(tt.FloatTensor).eps == 2.0 ** -23
    with pytest.raises(TypeError, match="finfo.. requires a floating point input type, got "
                                        "int64. Use iinfo"):
        tt.finfo(tt.int64)
    with pytest.raises(TypeError, match="iinfo.. requires an integer input type, got float32. "
                                        "Use finfo"):
        tt.iinfo(tt.float32)
    with pytest.raises(TypeError, match="bool has no iinfo"):
        tt.iinfo(tt.bool)
    with pytest.raises(TypeError, match=r"finfo\(\) takes a dtype such as tt.float32, got "
                                        r"\[1.0\]"):
        tt.finfo([1.0])


LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ByteTensor",
          "BoolTensor"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_types_convert_check_and_construct_as_pytorch(name):
    ours, theirs = getattr(tt, name), getattr(torch, name)
    data = [1.7, 0.0, 2.0]
    x, tx = tt.tensor(data), torch.tensor(data)
    for converted, reference in ((x.type(ours), tx.type(theirs)),
                                 (x.type(f"torch.{name}"), tx.type(f"torch.{name}"))):
        assert str(converted.dtype) == str(reference.dtype).removeprefix("torch.")
        assert converted.tolist() == reference.tolist()
    for t, tref in ((x, tx), (x.type(ours), tx.type(theirs)), (x.long(), tx.long())):
        assert isinstance(t, ours) == isinstance(tref, theirs)
    assert not isinstance(np.zeros(2), ours)
    made, ref = ours([1, 0, 3]), theirs([1, 0, 3])
    assert str(made.dtype) == str(ref.dtype).removeprefix("torch.")
    assert made.tolist() == ref.tolist()
    assert ours(2, 3).shape == tuple(theirs(2, 3).shape) and ours().shape == (0,)
    assert isinstance(ours(2), ours)


def test_legacy_types_refuse_what_pytorch_refuses():
    with pytest.raises(TypeError, match="a int64 Tensor is not a FloatTensor; convert it with "
                                        r"t.type\(tt.FloatTensor\)"):
        tt.FloatTensor(tt.tensor([1, 2]))
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        tt.FloatTensor("a")
    with pytest.raises(ValueError, match="unknown tensor type 'torch.CharTensor'"):
        tt.ones(2).type("torch.CharTensor")


@pytest.mark.parametrize("name,args", [
    ("sum", (1,)), ("sum", ((0, 1),)), ("mean", (0,)), ("amax", (1,)), ("amin", (0,)),
    ("argmax", (1,)), ("argmin", (0,)), ("std", (1,)), ("var", (0,)), ("logsumexp", (1,)),
    ("norm", (2, 1)), ("cumsum", (1,)), ("any", (1,)), ("all", (0,)),
])
def test_reductions_write_into_out_as_pytorch(name, args):
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    if name in ("any", "all"):
        a = a > 0
    expected = getattr(torch, name)(torch.tensor(a), *args)
    for shape in (tuple(expected.shape), (7,)):  # the right shape, or one to be resized
        out = tt.zeros(*shape, dtype=getattr(tt, str(expected.dtype).removeprefix("torch.")))
        got = getattr(tt, name)(tt.tensor(a), *args, out=out)
        assert got is out and out.shape == tuple(expected.shape)
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_out_refuses_a_result_that_needs_a_gradient():
    w = tt.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        tt.sum(w, 1, out=tt.zeros(2))


def test_out_of_a_reduction_refuses_a_dtype_that_cannot_hold_the_result():
    with pytest.raises(tt.dtypes.DTypeError, match=r"mean\(out=...\): the result is float32"):
        tt.mean(tt.ones(2, 2), 1, out=tt.zeros(2, dtype=tt.int64))


def test_a_legacy_type_of_a_shape_tuple_makes_that_shape():
    """tt.FloatTensor(x.size()) (an old idiom; tinytrain's sizes are tuples) made a tensor
    holding [2., 3.]; PyTorch's makes one of shape (2, 3)."""
    x = tt.ones(2, 3)
    assert tt.FloatTensor(x.size()).shape == (2, 3)
    assert tt.LongTensor(x.shape).zero_().dtype == tt.int64
    assert tt.FloatTensor([2, 3]).tolist() == [2.0, 3.0]


@pytest.mark.parametrize("call", [
    lambda L: L.sum(L.tensor([[1.5, 2.5], [3.5, 4.5]]), 1, out=L.zeros(2, dtype=L.int64)),
    lambda L: L.sum(L.ones(2, 2), 1, dtype=L.float64, out=L.zeros(2)),
    lambda L: L.argmax(L.ones(2, 2), 1, out=L.zeros(2, dtype=L.int32)),
    lambda L: L.amax(L.ones(2, 2, dtype=L.int64), 1, out=L.zeros(2)),
    lambda L: L.any(L.ones(2, 2), 1, out=L.zeros(2)),
    lambda L: L.all(L.ones(2, 2), 1, out=L.zeros(2, dtype=L.int64)),
])
def test_out_of_reductions_follows_pytorchs_dtype_rules(call):
    """sum sums in out's dtype (it was refused), the others need out of the result's dtype
    (they accepted any that could hold it)."""
    results = []
    for lib in (tt, torch):
        try:
            results.append(call(lib).tolist())
        except (RuntimeError, TypeError):
            results.append("refused")
    assert results[0] == results[1]


def test_an_out_of_another_shape_is_resized_in_its_own_memory_like_torch():
    base = tt.zeros(2, 3)
    out = base[0]
    with pytest.warns(UserWarning, match="was resized"):
        tt.add(tt.ones(2), 2.0, out=out)
    assert out.tolist() == [3.0, 3.0] and base[0].tolist() == [3.0, 3.0, 0.0]
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not tuple"):
        tt.sum(tt.ones(2), out=(tt.zeros(()),))
