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
    with pytest.raises(ValueError, match="unknown tensor type 'torch.QInt8Tensor'"):
        tt.ones(2).type("torch.QInt8Tensor")
    assert tt.ones(2).type("torch.CharTensor").dtype == tt.int8  # (PyTorch's name of int8)


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


# ------------------------------------------------ names fast.ai's miniai reaches for


@pytest.mark.parametrize("dtype", FLOATS)
def test_histc_counts_as_pytorch(dtype, device):
    rng = np.random.default_rng(0)
    for trial in range(60):
        n, bins = int(rng.integers(0, 40)), int(rng.integers(1, 12))
        values = [rng.normal(size=n), np.round(rng.normal(size=n) * 4) / 4,  # (on the edges)
                  rng.integers(0, 5, n) / bins * 3][trial % 3].astype(dtype)
        lo, hi = [(0, 0), (-1, 1), (0.1, 0.7), (-2.5, 3), (0, 1)][trial % 5]
        theirs = torch.histc(torch.from_numpy(values), bins, lo, hi)
        ours = tt.tensor(values, device=device).histc(bins, lo, hi)
        assert str(ours.dtype) == dtype
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    same = tt.histc(tt.tensor([2.0, 2.0, 2.0]), bins=3)  # one value: its range widened by 1
    assert same.tolist() == torch.histc(torch.tensor([2.0, 2.0, 2.0]), bins=3).tolist()
    nan_free = tt.histc(tt.tensor([1.0, float("inf")]), 4, 0, 2)  # outside: not counted
    assert nan_free.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_histc_is_not_differentiable_and_refuses_what_pytorch_refuses():
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x.histc(3)
    assert not h.requires_grad and h.grad_fn is None  # (PyTorch's: no gradient)
    out = tt.zeros(3)
    assert tt.histc(x, 3, out=out) is out and out.tolist() == [1.0, 1.0, 1.0]
    for call, error, message in [
        (lambda L: L.histc(L.tensor([1.0, float("nan")]), 4), RuntimeError, r"range of \[nan"),
        (lambda L: L.histc(L.tensor([1.0, 2.0]), 4, min=3, max=1), RuntimeError,
         "max must be larger than min"),
        (lambda L: L.histc(L.tensor([1.0, 2.0]), 0), RuntimeError, "bins must be > 0"),
        (lambda L: L.histc(L.tensor([1.0, 2.0]), 2.5), TypeError, "'bins' must be int"),
        (lambda L: L.histc(L.tensor([1, 2]), 4), NotImplementedError, "int64"),
    ]:
        with pytest.raises(error):
            call(torch)
        with pytest.raises(error, match=message):
            call(tt)


def test_clamp_min_and_clamp_max_in_place_and_bmm_method_as_pytorch():
    data = [-1.5, 0.25, 2.0]
    for name, bound in (("clamp_min_", 0.0), ("clamp_max_", 1.0)):
        ours, theirs = tt.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        a, b = ours * 2, theirs * 2
        version = a._version
        assert getattr(a, name)(bound) is a and a._version == version + 1  # the same tensor
        getattr(b, name)(bound)
        assert a.tolist() == b.tolist()
        (a * a).sum().backward()
        (b * b).sum().backward()
        assert ours.grad.tolist() == theirs.grad.tolist()
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            getattr(tt.tensor(data, requires_grad=True), name)(bound)
        ints = tt.tensor([1, 5])
        getattr(ints, name)(3)
        assert ints.tolist() == getattr(torch.tensor([1, 5]), name)(3).tolist()
        assert ints.dtype == tt.int64
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    np.testing.assert_allclose(tt.tensor(a).bmm(tt.tensor(b)).numpy(),
                               torch.tensor(a).bmm(torch.tensor(b)).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="bmm: expected 3-D tensors"):
        tt.ones(2, 3).bmm(tt.ones(3, 2))


LAYERS_NOT_IMPLEMENTED = ["Conv3d", "ConvTranspose3d",
                          "BatchNorm3d", "MaxPool3d", "AvgPool3d", "AlphaDropout"]


@pytest.mark.parametrize("name", LAYERS_NOT_IMPLEMENTED)
def test_layers_tinytrain_lacks_are_classes_for_isinstance_and_refuse_to_be_made(name):
    layer = getattr(tt.nn, name)
    assert issubclass(layer, tt.nn.Module) and layer.__name__ == name
    assert not isinstance(tt.nn.Conv2d(1, 1, 1), layer)
    with pytest.raises(NotImplementedError, match=f"nn.{name} is not implemented in tinytrain: "
                                                  "tinytrain has"):
        layer(3, 4)
    assert name not in tt.nn.__all__  # (not offered in what tinytrain.nn has)


def test_an_initialisation_loop_of_pytorch_code_runs():
    """miniai's ``init_weights``: isinstance of a tuple of conv (and norm) classes."""
    model = tt.nn.Sequential(tt.nn.Conv2d(1, 4, 3), tt.nn.BatchNorm2d(4), tt.nn.ReLU())
    seen = []
    for m in model.modules():
        if isinstance(m, (tt.nn.Conv1d, tt.nn.Conv2d, tt.nn.Conv3d)):
            tt.nn.init.kaiming_normal_(m.weight)
            seen.append("conv")
        elif isinstance(m, (tt.nn.BatchNorm1d, tt.nn.BatchNorm2d, tt.nn.BatchNorm3d)):
            seen.append("norm")
    assert seen == ["conv", "norm"]
