"""The layers of ported autoencoders, DCGAN generators and U-Nets: ConvTranspose2d,
interpolate / Upsample, GroupNorm, checked against PyTorch (forward and every gradient).

``tinytrain/nn/conv.py`` (the transposed convolution, from the conv kernels),
``tinytrain/nn/upsampling.py`` and ``tinytrain/nn/normalization.py``. Every comparison runs
on the ``device`` fixture's devices: the CPU here, the GPU where the ``cuda`` marker runs.
The CUDA kernels behind the transposed convolution are also run through the emulator here.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F
from tinytrain.data import MNISTMini
from tinytrain.dtypes import DTypeError
from tinytrain.kernels import cpu
from tinytrain.kernels.cuda import plans
from tinytrain.kernels.cuda.emulator import emulated_kernels
from tinytrain.nn.conv import _transposed_meta
from tinytrain.tensor import ShapeError

pytestmark = pytest.mark.usefixtures("torch_single_thread")

TOL = {np.float32: 2e-5, np.float64: 1e-12}


def close(ours, theirs, what, dtype):
    """``ours`` (a tinytrain Tensor) equals ``theirs`` (a torch tensor) in shape, dtype, values."""
    a, r = ours.numpy(), theirs.detach().numpy()
    assert a.shape == r.shape and a.dtype == r.dtype, (what, a.shape, r.shape, a.dtype, r.dtype)
    tol = TOL[dtype] * max(1.0, float(np.abs(r).max(initial=0)))
    np.testing.assert_allclose(a, r, rtol=TOL[dtype], atol=tol, err_msg=what)


def both(fn_ours, fn_theirs, arrays, device, dtype, what):
    """Run the op on both libraries with ``arrays`` as inputs that require grad, back-propagate
    the same random gradient, compare the output and every input gradient."""
    ours = [None if a is None else tt.tensor(a, requires_grad=True, device=device)
            for a in arrays]
    theirs = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    y_t = fn_theirs(*theirs)
    grad = np.random.default_rng(len(what)).standard_normal(tuple(y_t.shape)).astype(dtype)
    y_t.backward(torch.tensor(grad))
    y = fn_ours(*ours)
    y.backward(tt.tensor(grad, device=device))
    close(y, y_t, "output " + what, dtype)
    for name, a, t in zip("xwb", ours, theirs):
        if a is not None:
            close(a.grad, t.grad, f"d{name} " + what, dtype)


# --------------------------------------------------------------------------- conv_transpose2d

# kernel x stride: each with padding 0-2, every output_padding below the stride, batch 1 and 3,
# odd and even sizes, float32 and float64
KERNELS = [1, 2, 3, 5, (2, 5), (4, 1)]
STRIDES = [1, 2, 3, (2, 1), (1, 3)]


@pytest.mark.parametrize("stride", STRIDES, ids=str)
@pytest.mark.parametrize("kernel", KERNELS, ids=str)
def test_conv_transpose2d_matches_pytorch(device, kernel, stride):
    rng = np.random.default_rng(KERNELS.index(kernel) * 10 + STRIDES.index(stride))
    (kh, kw), (sh, sw) = ((k, k) if isinstance(k, int) else k for k in (kernel, stride))
    cases = 0
    for padding, (n, c_in, c_out, hw), dtype, bias in itertools.product(
            [0, 1, 2, (2, 1)], [(1, 1, 2, (5, 4)), (3, 4, 3, (3, 7))], [np.float32, np.float64],
            [True, False]):
        ph, pw = (padding, padding) if isinstance(padding, int) else padding
        for out_pad in itertools.product(range(sh), range(sw)):
            sizes = [(i - 1) * s - 2 * p + k + o for i, s, p, k, o in
                     zip(hw, (sh, sw), (ph, pw), (kh, kw), out_pad)]
            if min(sizes) < 1:  # PyTorch refuses these too (tested below)
                continue
            x = rng.standard_normal((n, c_in, *hw)).astype(dtype)
            w = rng.standard_normal((c_in, c_out, kh, kw)).astype(dtype)
            b = rng.standard_normal(c_out).astype(dtype) if bias else None
            what = f"x {x.shape} w {w.shape} s {stride} p {padding} op {out_pad} bias {bias}"
            args = (stride, padding, out_pad)
            both(lambda x_, w_, b_, a=args: F.conv_transpose2d(x_, w_, b_, *a),
                 lambda x_, w_, b_, a=args: torch.nn.functional.conv_transpose2d(x_, w_, b_, *a),
                 [x, w, b], device, dtype, what)
            cases += 1
    assert cases >= 16


def test_conv_transpose2d_is_the_input_gradient_of_conv2d():
    """The identity the implementation rests on, checked through autograd alone."""
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal((2, 3, 10, 8)), requires_grad=True)
    w = tt.tensor(rng.standard_normal((4, 3, 3, 2)))
    y = F.conv2d(x, w, stride=2, padding=1)
    dy = tt.tensor(rng.standard_normal(y.shape))
    y.backward(dy)
    # 10 rows at stride 2 give 5 outputs, as 9 would: output_padding picks the 10 (not 9)
    up = F.conv_transpose2d(dy, w, stride=2, padding=1, output_padding=(1, 0))
    assert up.shape == x.shape
    np.testing.assert_allclose(up.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_conv_transpose2d_unbatched_and_empty_batch(device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    both(lambda x_, w_, b_: F.conv_transpose2d(x_, w_, b_, 2, 1, 1),
         lambda x_, w_, b_: torch.nn.functional.conv_transpose2d(x_, w_, b_, 2, 1, 1),
         [x, w, b], device, np.float32, "unbatched")
    empty = tt.zeros(0, 2, 4, 5, device=device, requires_grad=True)
    wt = tt.tensor(w, requires_grad=True, device=device)
    bt = tt.tensor(b, requires_grad=True, device=device)
    y = F.conv_transpose2d(empty, wt, bt, stride=2)
    assert y.shape == torch.nn.functional.conv_transpose2d(
        torch.zeros(0, 2, 4, 5), torch.tensor(w), stride=2).shape == (0, 3, 9, 11)
    y.sum().backward()
    assert empty.grad.shape == (0, 2, 4, 5)
    assert not wt.grad.numpy().any() and not bt.grad.numpy().any()


def test_conv_transpose2d_module_matches_pytorch_with_copied_weights(device):
    ours = nn.ConvTranspose2d(3, 2, (3, 4), stride=2, padding=1, output_padding=1).to(device)
    theirs = torch.nn.ConvTranspose2d(3, 2, (3, 4), stride=2, padding=1, output_padding=1)
    assert ours.weight.shape == tuple(theirs.weight.shape) == (3, 2, 3, 4)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 5)).astype(np.float32)
    close(ours(tt.tensor(x, device=device)), theirs(torch.tensor(x)), "module", np.float32)


def test_conv_transpose2d_output_size_picks_the_output_padding():
    ours = nn.ConvTranspose2d(2, 2, 3, stride=3)
    theirs = torch.nn.ConvTranspose2d(2, 2, 3, stride=3)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 5)).astype(np.float32)
    for size in ([12, 15], [13, 17], [14, 16], (1, 2, 14, 17)):  # the batch and channels too
        close(ours(tt.tensor(x), output_size=size), theirs(torch.tensor(x), output_size=size),
              f"output_size {size}", np.float32)
    with pytest.raises(ValueError, match=r"valid sizes range from \[12, 15\] to \[14, 17\]"):
        ours(tt.tensor(x), output_size=[15, 15])
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        ours(tt.tensor(x), output_size=[12])


def test_conv_transpose2d_initialisation_uses_pytorchs_fan():
    """fan_in = weight.shape[1] * Kh * Kw = out_channels * 9 for the [in, out, Kh, Kw] layout."""
    tt.manual_seed(0)
    layer = nn.ConvTranspose2d(2, 50, 3)
    bound = 1 / math.sqrt(50 * 9)  # (in_channels' fan would allow 1/sqrt(18), 5x more)
    w = np.abs(layer.weight.numpy())
    assert w.max() <= bound and w.max() > 0.95 * bound
    assert np.abs(layer.bias.numpy()).max() <= bound
    assert nn.ConvTranspose2d(2, 3, 3, bias=False).bias is None


def test_conv_transpose2d_bad_input_says_what_is_wrong():
    x, w = tt.zeros(1, 4, 5, 5), tt.zeros(4, 3, 3, 3)
    with pytest.raises(ShapeError, match=r"expected input\[1, 5, 5, 5\] to have 4 channels, but "
                                         r"got 5"):
        F.conv_transpose2d(tt.zeros(1, 5, 5, 5), w)
    with pytest.raises(ShapeError, match=r"expected bias to be 1-dimensional with 3 elements, "
                                         r"but got bias of size \[4\]"):
        F.conv_transpose2d(x, w, tt.zeros(4))
    with pytest.raises(ShapeError, match="output padding must be smaller than either stride"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ShapeError, match=r"Calculated output size per channel: \(-3 x -3\)"):
        F.conv_transpose2d(tt.zeros(1, 4, 1, 1), w, padding=3)
    with pytest.raises(ShapeError, match=r"weight must be 4-D \[Cin, Cout, Kh, Kw\]"):
        F.conv_transpose2d(x, tt.zeros(4, 3, 3))
    with pytest.raises(ShapeError, match="input must be 4-D"):
        F.conv_transpose2d(tt.zeros(4, 5), w)
    with pytest.raises(TypeError, match="argument 'input' must be a Tensor, not list"):
        F.conv_transpose2d([[1.0]], w)
    with pytest.raises(NotImplementedError, match="groups=2"):
        F.conv_transpose2d(x, w, groups=2)
    with pytest.raises(NotImplementedError, match="dilation=2"):
        nn.ConvTranspose2d(4, 3, 3, dilation=2)
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(4, 3, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="output_padding .* must be smaller than the stride"):
        nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=(0, 2))
    with pytest.raises(DTypeError, match="conv_transpose2d"):
        F.conv_transpose2d(x.double(), w)


# The CUDA kernel set computes the transposed convolution through the same three conv ops; its
# col2im must leave the output_padding rows (no window reaches them) at zero, as the CPU does.
@pytest.mark.parametrize("stride,out_pad", [(2, 1), (3, 2), ((3, 2), (1, 1)), (2, 0)])
def test_the_cuda_kernels_compute_transposed_convs_as_the_cpu(monkeypatch, stride, out_pad):
    monkeypatch.setattr(plans, "THREADS", 32)
    monkeypatch.setattr(plans, "MAX_BLOCKS", 3)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    meta = _transposed_meta(x.shape, w.shape, None, stride, 1, out_pad)
    dy = rng.standard_normal(meta.input_shape).astype(np.float32)
    with emulated_kernels() as k:
        for name, ours, ref in [
                ("y", k.conv2d_backward_input(x, w, meta), cpu.conv2d_backward_input(x, w, meta)),
                ("dx", k.conv2d_forward(dy, w, None, meta), cpu.conv2d_forward(dy, w, None, meta)),
                ("dw", k.conv2d_backward_weight(x, dy, meta),
                 cpu.conv2d_backward_weight(x, dy, meta))]:
            np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5, err_msg=name)


# --------------------------------------------------------------------------- interpolate

SIZES = [(1, 1), (3, 5), (4, 4), (7, 6)]
TARGETS = [dict(size=(8, 8)), dict(size=(2, 3)), dict(size=5), dict(size=(1, 9)),
           dict(scale_factor=2), dict(scale_factor=1.5), dict(scale_factor=0.5),
           dict(scale_factor=(1.7, 0.8)), dict(scale_factor=1.2), dict(scale_factor=3),
           dict(scale_factor=1.5, recompute_scale_factor=True)]
MODES = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True),
         ("bilinear", None)]


@pytest.mark.parametrize("mode,align_corners", MODES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_interpolate_matches_pytorch(device, mode, align_corners, dtype):
    """Sizes up and down, scale factors 2 and 1.5 (output floor(H * s), coordinates through
    1 / s, as PyTorch's default recompute_scale_factor=None), and an axis a scale leaves at
    its size (3 * 1.2 -> 3: copied)."""
    rng = np.random.default_rng(5)
    for (h, w), target in itertools.product(SIZES, TARGETS):
        x = rng.standard_normal((2, 3, h, w)).astype(dtype)
        kw = dict(target, mode=mode, align_corners=align_corners)
        if min(math.floor(n * s) for n in (h, w) for s in np.atleast_1d(
                target.get("scale_factor", 1))) < 1:
            continue
        both(lambda x_, kw=kw: F.interpolate(x_, **kw),
             lambda x_, kw=kw: torch.nn.functional.interpolate(x_, **kw), [x], device, dtype,
             f"{(h, w)} {kw}")


def test_a_float_scale_factor_maps_through_its_inverse_as_pytorch():
    """5 rows * 1.7 = 8 rows: PyTorch maps output row j to floor(j / 1.7), not
    floor(j * 5 / 8) (that is recompute_scale_factor=True); 3 rows * 1.2 = 3 rows are copied."""
    def rows(n, scale, **kw):
        ours = F.interpolate(tt.arange(float(n)).reshape(1, 1, n, 1), scale_factor=(scale, 1),
                             **kw).flatten().tolist()
        theirs = torch.nn.functional.interpolate(torch.arange(float(n)).reshape(1, 1, n, 1),
                                                 scale_factor=(scale, 1), **kw)
        assert ours == theirs.flatten().tolist()
        return ours

    assert rows(5, 1.7) == [math.floor(j / 1.7) for j in range(8)] == [0, 0, 1, 1, 2, 2, 3, 4]
    assert rows(5, 1.7, recompute_scale_factor=True) == [j * 5 // 8 for j in range(8)]
    assert rows(3, 1.2) == [0, 1, 2]  # (floor(j / 1.2) would be [0, 0, 1])


def test_upsample_modules_are_interpolate(device):
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)
    for ours, theirs in [
            (nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2)),
            (nn.Upsample(size=(7, 3), mode="bilinear"),
             torch.nn.Upsample(size=(7, 3), mode="bilinear")),
            (nn.UpsamplingNearest2d(size=6), torch.nn.UpsamplingNearest2d(size=6)),
            (nn.UpsamplingBilinear2d(scale_factor=2),
             torch.nn.UpsamplingBilinear2d(scale_factor=2))]:
        assert repr(ours) == repr(theirs)
        with warnings.catch_warnings():  # (torch's Upsampling*2d say they are deprecated)
            warnings.simplefilter("ignore")
            both(ours, theirs, [x], device, np.float32, repr(ours))


def test_interpolate_bad_input_says_what_is_wrong():
    x = tt.zeros(1, 2, 4, 4)
    for kw, error, message in [
            (dict(), ValueError, "either size or scale_factor should be defined"),
            (dict(size=3, scale_factor=2), ValueError, "only one of size or scale_factor"),
            (dict(size=3, mode="trilinear"), NotImplementedError,
             "'trilinear' is not in tinytrain"),
            (dict(size=3, mode="cubic"), NotImplementedError, "'cubic' is not a mode"),
            (dict(size=3, align_corners=True), ValueError, "align_corners option can only"),
            (dict(size=(3, 3, 3)), ValueError, r"output size of \(3, 3, 3\)"),
            (dict(scale_factor=0.1), ShapeError, r"output \(H: 0, W: 0\)"),
            (dict(size=3, antialias=True), NotImplementedError, "antialias")]:
        with pytest.raises(error, match=message):
            F.interpolate(x, **kw)
    with pytest.raises(NotImplementedError, match=r"3D input of shape \(2, 4, 4\).*bilinear"):
        F.interpolate(tt.zeros(2, 4, 4), size=3, mode="bilinear")
    with pytest.raises(DTypeError, match="floating point"):
        F.interpolate(tt.zeros(1, 1, 2, 2, dtype=tt.int64), size=3)
    with pytest.raises(TypeError, match="must be a Tensor, not ndarray"):
        F.interpolate(np.zeros((1, 1, 2, 2)), size=3)


# --------------------------------------------------------------------------- group_norm


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 4), 3), ((2, 6, 5, 4), 1), ((3, 6, 7), 6),
                                          ((4, 8), 2), ((1, 4, 3, 3), 2)], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_pytorch(device, shape, groups, affine):
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(7)
        x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
        w = rng.standard_normal(shape[1]).astype(dtype) if affine else None
        b = rng.standard_normal(shape[1]).astype(dtype) if affine else None
        both(lambda x_, w_, b_: F.group_norm(x_, groups, w_, b_),
             lambda x_, w_, b_: torch.nn.functional.group_norm(x_, groups, w_, b_),
             [x, w, b], device, dtype, f"{shape} groups {groups}")


def test_group_norm_module_and_errors():
    layer, ref = nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert nn.GroupNorm(2, 4, affine=False).weight is None
    assert nn.GroupNorm(2, 4, bias=False).bias is None
    x = np.random.default_rng(8).standard_normal((3, 4, 2, 2)).astype(np.float32)
    close(layer(tt.tensor(x)), ref(torch.tensor(x)), "module", np.float32)
    with pytest.raises(ValueError, match=r"num_channels \(8\) must be divisible by num_groups "
                                         r"\(3\)"):
        nn.GroupNorm(3, 8)
    with pytest.raises(ShapeError, match=r"input of shape \[2, 8, 3\] and num_groups=3"):
        F.group_norm(tt.zeros(2, 8, 3), 3)
    with pytest.raises(ShapeError, match=r"GroupNorm\(2, 4\): expected input \[N, 4, \*\], got "
                                         r"shape \(3, 6, 2\)"):
        layer(tt.zeros(3, 6, 2))
    with pytest.raises(ShapeError, match="weight of shape"):
        F.group_norm(tt.zeros(2, 4), 2, tt.ones(3))


# --------------------------------------------------------------------------- models


def _autoencoder(L):
    """Conv2d down twice, ConvTranspose2d up twice (28 -> 14 -> 7 -> 14 -> 28)."""
    return L.Sequential(
        L.Conv2d(1, 4, 3, stride=2, padding=1), L.ReLU(),
        L.Conv2d(4, 8, 3, stride=2, padding=1), L.ReLU(),
        L.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), L.ReLU(),
        L.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1), L.Sigmoid())


def _unet_ish(L):
    """GroupNorm and both Upsample modes between convolutions (without a bias before a norm,
    which would remove it: its gradient is rounding noise, which Adam would amplify)."""
    return L.Sequential(
        L.Conv2d(1, 8, 3, stride=2, padding=1, bias=False), L.GroupNorm(2, 8), L.ReLU(),
        L.MaxPool2d(2), L.Upsample(scale_factor=2, mode="bilinear"),
        L.Conv2d(8, 4, 3, padding=1, bias=False), L.GroupNorm(4, 4), L.ReLU(),
        L.Upsample(scale_factor=2), L.Conv2d(4, 1, 3, padding=1), L.Sigmoid())


@pytest.mark.parametrize("make", [_autoencoder, _unet_ish], ids=["autoencoder", "unet-ish"])
def test_a_tiny_model_trains_step_by_step_as_pytorch(device, make):
    images = np.stack([MNISTMini(train=False)[i][0] for i in range(16)]).astype(np.float32)
    torch.manual_seed(0)
    theirs, ours = make(torch.nn), make(nn)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    ours.to(device)
    opt_t = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    opt = tt.optim.Adam(ours.parameters(), lr=1e-2)
    x_t, x = torch.tensor(images), tt.tensor(images, device=device)
    losses = []
    for step in range(6):
        opt_t.zero_grad()
        loss_t = torch.nn.functional.mse_loss(theirs(x_t), x_t)
        loss_t.backward()
        opt_t.step()
        opt.zero_grad()
        loss = F.mse_loss(ours(x), x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        assert loss.item() == pytest.approx(loss_t.item(), rel=1e-4), step
    for (name, p), (_, p_t) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.numpy(), p_t.detach().numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=name)
    assert losses[-1] < losses[0]  # it learns


@pytest.mark.parametrize("make,shape", [
    (lambda L: L.nn.Sequential(L.nn.Conv2d(1, 4, 3), L.nn.ReLU(inplace=True)), (1, 12, 12)),
    (lambda L: L.nn.Sequential(L.nn.ConvTranspose2d(1, 4, 2, stride=2), L.nn.ReLU(inplace=True)),
     (1, 12, 12)),
    (lambda L: L.nn.Sequential(L.nn.MaxPool2d(2), L.nn.Hardtanh(-0.5, 0.5, inplace=True)),
     (1, 12, 12)),
    (lambda L: L.nn.Sequential(L.nn.Conv2d(1, 8, 3), L.nn.GroupNorm(4, 8, affine=False),
                               L.nn.ReLU(inplace=True)), (2, 1, 12, 12)),
])
def test_an_in_place_layer_after_one_whose_result_is_a_view_works_like_torch(make, shape):
    """An unbatched image through Conv2d / ConvTranspose2d / MaxPool2d (a squeezed result),
    or GroupNorm without affine (a reshaped one), then ReLU(inplace=True): the in-place op on
    that view was refused; it writes through now, as in PyTorch."""
    x = np.random.default_rng(0).standard_normal(shape)
    ours, theirs = make(tt).double(), make(torch).double()
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    results = []
    for lib, model in ((tt, ours), (torch, theirs)):
        xt = lib.tensor(x, requires_grad=True)
        y = model(xt)
        (y * y).sum().backward()
        results.append((y.detach().numpy(), xt.grad.numpy()))
    for got, ref in zip(*results):
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("rows,scale,dtype", [(16, 2.006, "float32"), (3, 2.3, "float32"),
                                              (34, 1.36, "float64"), (15, 3.7, "float64"),
                                              (7, 2.0, "float64"), (5, 0.7, "float64")])
def test_nearest_with_a_scale_factor_reads_pytorchs_rows(rows, scale, dtype):
    """PyTorch's nearest takes exactly twice the size as dst // 2 whatever the scale, and
    computes the source row in float32 for every dtype: tinytrain read other rows (16 x
    2.006: rows 0..14 where PyTorch reads 1..15), and its gradients followed."""
    x = np.random.default_rng(0).standard_normal((1, 1, rows, 3)).astype(dtype)
    got = []
    for lib in (tt, torch):
        xt = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.interpolate(xt, scale_factor=(scale, 1.0), mode="nearest")
        (y * lib.arange(y.numel(), dtype=xt.dtype).reshape(y.shape)).sum().backward()
        got.append((y.detach().numpy(), xt.grad.numpy()))
    for ours, ref in zip(*got):
        np.testing.assert_array_equal(ours, ref)


def test_group_norm_of_an_empty_batch_and_refused_sizes_like_torch():
    """GroupNorm of [0, C, H, W] raised an internal reshape error; interpolate's size=8.5
    and ConvTranspose2d's output_size=(10.7, 12) were truncated; size= with
    recompute_scale_factor=True was accepted. PyTorch: a [0, C, H, W] result, and errors."""
    for lib in (tt, torch):
        norm = lib.nn.GroupNorm(3, 6)
        y = norm(lib.zeros(0, 6, 4, 4, requires_grad=True))
        y.sum().backward()
        assert tuple(y.shape) == (0, 6, 4, 4) and norm.weight.grad.tolist() == [0.0] * 6
        x = lib.ones(1, 1, 4, 4)
        with pytest.raises(TypeError):
            lib.nn.functional.interpolate(x, size=(8.5, 9))
        with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
            lib.nn.functional.interpolate(x, size=8, recompute_scale_factor=True)
        with pytest.raises((TypeError, ValueError)):  # (PyTorch: a ValueError on the range)
            lib.nn.ConvTranspose2d(1, 1, 3, stride=2)(x, output_size=(10.7, 12))


def test_pooling_takes_pytorchs_arguments_in_pytorchs_order():
    """ceil_mode=False (the default, which d2l and torchvision code pass) was a TypeError,
    and F.avg_pool2d's fifth positional argument is ceil_mode, as in PyTorch. The other
    values (ceil_mode, dilation, return_indices, divisor_override) raised a
    NotImplementedError; now they pool as PyTorch does (tests/test_pool_options.py)."""
    x = np.arange(50.0).reshape(1, 2, 5, 5)
    for lib in (tt, torch):
        t = lib.tensor(x)
        results = (lib.nn.MaxPool2d(2, 2, 0, 1, False, False)(t),
                   lib.nn.AvgPool2d(2, 2, 0, False, True, None)(t),
                   lib.nn.functional.avg_pool2d(t, 2, 2, 0, False, True),
                   lib.nn.functional.max_pool2d(t, 2, 2, 0, 1, False, False),
                   *lib.nn.MaxPool2d(2, 1, 1, 2, True, True)(t),  # dilation, indices, ceil
                   lib.nn.AvgPool2d(2, 2, 1, True, False, 3)(t),  # ceil, no pad, divisor
                   lib.nn.functional.avg_pool2d(t, 3, 2, 1, True, False, 2),
                   *lib.nn.functional.max_pool2d(t, 2, 2, 0, 1, True, True))
        if lib is tt:
            ours = [a.numpy() for a in results]
        else:
            for got, ref in zip(ours, results, strict=True):
                np.testing.assert_array_equal(got, ref.numpy())
