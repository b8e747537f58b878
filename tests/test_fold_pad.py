"""``F.unfold`` / ``F.fold`` (``nn.Unfold`` / ``nn.Fold``) and the padding layers
(``nn.ZeroPad2d``, ``nn.ConstantPad2d``, ``nn.ReflectionPad2d``, ... and their 1-D and 3-D
forms), against PyTorch: values, gradients, shapes, reprs and argument errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

rng = np.random.default_rng(0)

# kernel, dilation, padding, stride: ints and pairs, each option off and on
BLOCKS = list(itertools.product([1, 2, (2, 3)], [1, (2, 1)], [0, 1, (0, 2)], [1, 2, (1, 3)]))


def _pair(x, dtype, device="cpu"):
    """The same values as a torch tensor and a tinytrain one, both requiring grad."""
    return (torch.tensor(x, requires_grad=True),
            tt.tensor(x, requires_grad=True, device=device))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,d,p,s", BLOCKS)
def test_unfold_and_fold_values_and_gradients_match_torch(k, d, p, s, dtype, device):
    x = rng.normal(size=(2, 3, 7, 8)).astype(dtype)
    tx, ox = _pair(x, dtype, device)
    theirs, ours = TF.unfold(tx, k, d, p, s), F.unfold(ox, k, d, p, s)
    assert ours.shape == tuple(theirs.shape) and ours.dtype == dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    g = rng.normal(size=tuple(theirs.shape)).astype(dtype)
    theirs.backward(torch.tensor(g))
    ours.backward(tt.tensor(g, device=device))
    np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)

    cols = rng.normal(size=tuple(theirs.shape)).astype(dtype)
    tc, oc = _pair(cols, dtype, device)
    theirs, ours = TF.fold(tc, (7, 8), k, d, p, s), F.fold(oc, (7, 8), k, d, p, s)
    assert ours.shape == tuple(theirs.shape) == (2, 3, 7, 8)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = rng.normal(size=(2, 3, 7, 8)).astype(dtype)
    theirs.backward(torch.tensor(g))
    ours.backward(tt.tensor(g, device=device))
    np.testing.assert_array_equal(oc.grad.numpy(), tc.grad.numpy())


def test_unbatched_input_layers_reprs_and_fold_of_unfold():
    x = rng.normal(size=(3, 5, 6)).astype(np.float32)
    np.testing.assert_array_equal(F.unfold(tt.tensor(x), 2).numpy(),
                                  TF.unfold(torch.tensor(x), 2).numpy())  # [C*k*k, L]
    cols = F.unfold(tt.tensor(x[None]), 2, padding=1)
    np.testing.assert_allclose(  # fold(unfold(x)): x times how many blocks cover each pixel
        F.fold(cols[0], (5, 6), 2, padding=1).numpy(),
        TF.fold(TF.unfold(torch.tensor(x[None]), 2, padding=1)[0], (5, 6), 2, padding=1).numpy(),
        rtol=1e-6)
    for ours, theirs in ((nn.Unfold(2), torch.nn.Unfold(2)),
                         (nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2)),
                          torch.nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2))),
                         (nn.Fold((4, 5), 2), torch.nn.Fold((4, 5), 2))):
        assert repr(ours) == repr(theirs)
    layer = nn.Unfold(3, padding=1)
    assert layer(tt.ones(2, 4, 6, 6)).shape == (2, 36, 36)
    assert nn.Fold((6, 6), 3, padding=1)(layer(tt.ones(2, 4, 6, 6))).shape == (2, 4, 6, 6)
    assert F.unfold(tt.zeros(0, 3, 5, 6), 2).shape == (0, 12, 20)  # an empty batch
    assert F.fold(tt.zeros(0, 12, 20), (5, 6), 2).shape == (0, 3, 5, 6)


@pytest.mark.parametrize("call,message", [
    (lambda L: L.unfold(_ones(L, 5, 6), 2), "3-D or 4-D"),
    (lambda L: L.unfold(_ones(L, 2, 0, 5, 6), 2), "3-D or 4-D"),
    (lambda L: L.unfold(_ones(L, 2, 3, 5, 6), 7), r"sliding blocks as \(-1, 0\)"),
    (lambda L: L.unfold(_ones(L, 2, 3, 5, 6), 0), "kernel_height: 0 kernel_width: 0"),
    (lambda L: L.unfold(_ones(L, 2, 3, 5, 6), 2, stride=0), "stride_height: 0"),
    (lambda L: L.unfold(_ones(L, 2, 3, 5, 6), 2, padding=-1), "pad_height: -1"),
    (lambda L: L.unfold(_ones(L, 2, 3, 5, 6), 2, dilation=0), "dilation_height: 0"),
    (lambda L: L.fold(_ones(L, 2, 12, 20), (5, 7), 2), r"4 \* 6 = 24, but got input.size\(2\)=20"),
    (lambda L: L.fold(_ones(L, 2, 11, 20), (5, 6), 2), "divisible by the product of kernel_size"),
    (lambda L: L.fold(_ones(L, 2, 3, 5, 6), (5, 6), 2), "2D or 3D|2-D or 3-D"),
    (lambda L: L.fold(_ones(L, 2, 12, 20), (1, 1), 2), r"0 \* 0 = 0"),
])
def test_unfold_and_fold_refuse_what_torch_refuses(call, message):
    with pytest.raises((RuntimeError, IndexError)):  # (torch: an IndexError for 2-D input)
        call(TF)
    with pytest.raises(RuntimeError, match=message):
        call(F)


def _ones(functional, *shape):  # (the same call on either library)
    return torch.ones(*shape) if functional is TF else tt.ones(*shape)


def test_unfold_of_integers_and_bad_sizes_are_errors():
    with pytest.raises(NotImplementedError, match="int32"):
        F.unfold(tt.ones(1, 1, 3, 3, dtype=tt.int32), 2)
    with pytest.raises(ValueError, match="kernel_size must be an int or a pair"):
        F.unfold(tt.ones(1, 1, 3, 3), (2, 2, 2))


PADS = [("ZeroPad2d", (1,)), ("ZeroPad2d", ((1, -1, 2, 0),)), ("ConstantPad2d", (2, 3.5)),
        ("ConstantPad2d", ((1, 2, -3, 4), -1.0)), ("ZeroPad1d", (2,)),
        ("ConstantPad1d", ((1, -2), 1.0)), ("ReflectionPad2d", (1,)),
        ("ReplicationPad2d", ((1, 2, 0, -1),)), ("ReflectionPad1d", ((2, 3),)),
        ("ReplicationPad1d", (1,)), ("CircularPad2d", ((1, 2, 2, 1),)), ("CircularPad1d", (1,)),
        ("ZeroPad3d", (1,)), ("ConstantPad3d", ((1, 0, 0, 1, 2, -1), 2.0)),
        ("ReflectionPad3d", (1,)), ("ReplicationPad3d", ((1, 0, 2, 1, 0, 1),)),
        ("CircularPad3d", (1,))]


@pytest.mark.parametrize("name,args", PADS)
def test_padding_layers_match_torch(name, args, device):
    theirs, ours = getattr(torch.nn, name)(*args), getattr(nn, name)(*args)
    assert repr(ours) == repr(theirs) and ours.padding == theirs.padding
    assert [c.__name__ for c in type(ours).__mro__][:2] == [
        c.__name__ for c in type(theirs).__mro__][:2]  # ZeroPad2d is a ConstantPad2d
    for shape in [(2, 3, 4, 5), (3, 4, 5), (4, 5), (1, 2, 3, 4, 5)]:
        x = rng.normal(size=shape)
        tx, ox = _pair(x, np.float64, device)
        try:
            expected = theirs(tx)
        except (RuntimeError, ValueError):  # (a dimension count torch refuses: so must we)
            with pytest.raises(RuntimeError):
                ours(ox)
            continue
        got = ours(ox)
        assert got.shape == tuple(expected.shape), shape
        np.testing.assert_array_equal(got.numpy(), expected.detach().numpy())
        g = rng.normal(size=tuple(expected.shape))
        expected.backward(torch.tensor(g))
        got.backward(tt.tensor(g, device=device))
        np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_pad_refuses_non_integer_sizes_and_dimensions_torch_refuses():
    with pytest.raises(TypeError, match="must be tuple of ints, but found element of type float"):
        F.pad(tt.ones(2, 3), (1.5, 1.5))  # (was padded by 1)
    with pytest.raises(NotImplementedError, match="padding size 4 is not supported for a 2D"):
        F.pad(tt.ones(2, 3), (1, 1, 1, 1), mode="reflect")  # (padded the batch dimension)
    with pytest.raises(RuntimeError, match="must be smaller than dimension"):
        nn.ReflectionPad2d(4)(tt.ones(2, 3, 4, 5))
    with pytest.raises(TypeError):
        nn.ConstantPad2d(1)  # the value is required, as in torch
