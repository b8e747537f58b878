"""What real PyTorch programs (nanoGPT's ``train.py``, d2l's TextCNN) set up before training,
against PyTorch 2.13: ``backends.cuda.matmul.allow_tf32`` and
``set/get_float32_matmul_precision``; ``cuda.is_bf16_supported``; ``tt.amp.GradScaler`` /
``autocast`` (and the deprecated ``cuda.amp`` / ``cpu.amp`` spellings) switched off;
``tt.bfloat16`` as a name that is refused when used; ``version.cuda``; the DataLoader's
``timeout`` / ``in_order`` / ``pin_memory_device``; the 1-D adaptive pools."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

TORCH_2_13 = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)
HAS_CUDA = tt.cuda.is_available()


def _caught(make):
    """``make()``'s result and the (category, message) of each warning it gave."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = make()
    return out, [(w.category, str(w.message)) for w in got]


# --- 1. nanoGPT's set-up lines -------------------------------------------------------------

@pytest.fixture
def matmul_precision():
    """Leave both libraries' float32 matmul precision as the test found it."""
    before = tt.get_float32_matmul_precision(), torch.get_float32_matmul_precision()
    yield
    tt.set_float32_matmul_precision(before[0])
    torch.set_float32_matmul_precision(before[1])


def test_nanogpt_tf32_flags_are_accepted_and_read_back_as_pytorch(matmul_precision):
    for lib in (tt, torch):
        m = lib.backends.cuda.matmul
        assert (m.allow_tf32, m.allow_fp16_reduced_precision_reduction,
                m.allow_bf16_reduced_precision_reduction) == (False, True, True)
        assert lib.get_float32_matmul_precision() == "highest"
    for lib in (tt, torch):
        lib.backends.cuda.matmul.allow_tf32 = True  # nanoGPT's two lines
        lib.backends.cudnn.allow_tf32 = True
    assert tt.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "high"
    for precision in ("highest", "medium", "high", "highest"):
        for lib in (tt, torch):
            lib.set_float32_matmul_precision(precision)
        assert tt.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
        assert (tt.backends.cuda.matmul.allow_tf32
                == torch.backends.cuda.matmul.allow_tf32 == (precision != "highest"))
    tt.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    assert tt.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is False
    tt.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    assert tt.backends.cudnn.allow_tf32 is True


def test_matmul_precision_errors_as_pytorch(matmul_precision):
    for lib in (tt, torch):
        with pytest.raises(RuntimeError, match="set_float32_matmul_precision expects a str, "
                                               "but got int"):
            lib.set_float32_matmul_precision(3)
        with pytest.warns(UserWarning, match="low is not one of 'highest', 'high', or "
                                             "'medium'"):
            lib.set_float32_matmul_precision("low")
        assert lib.get_float32_matmul_precision() == "highest"
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            lib.backends.cuda.matmul.foo  # noqa: B018
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            lib.backends.cuda.matmul.foo = 1


def test_is_bf16_supported_is_false_and_version_cuda():
    assert tt.cuda.is_bf16_supported() is False
    assert tt.cuda.is_bf16_supported(including_emulation=False) is False
    assert tt.__version__ == tt.version.__version__
    if HAS_CUDA:
        major, minor = tt.version.cuda.split(".")
        assert int(major) >= 11 and minor.isdigit()
    else:
        try:
            import cupy  # noqa: F401
        except ImportError:
            assert tt.version.cuda is None and torch.version.cuda is None  # CPU builds


def test_disabled_grad_scaler_passes_through_as_pytorch():
    model_t, model_p = nn.Linear(3, 1), torch.nn.Linear(3, 1)
    model_p.load_state_dict({k: torch.tensor(v.numpy()) for k, v in
                             model_t.state_dict().items()})
    opt_t = tt.optim.SGD(model_t.parameters(), lr=0.1)
    opt_p = torch.optim.SGD(model_p.parameters(), lr=0.1)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for lib, model, opt, scaler in (
            (tt, model_t, opt_t, tt.amp.GradScaler("cuda", enabled=False)),
            (torch, model_p, opt_p, torch.amp.GradScaler("cuda", enabled=False))):
        loss = model(lib.tensor(x)).pow(2).mean()
        assert scaler.scale(loss) is loss
        scaler.scale(loss).backward()
        assert scaler.unscale_(opt) is None
        assert scaler.step(opt) is None
        assert scaler.update() is None and scaler.update(4.0) is None
        assert (scaler.get_scale(), scaler.is_enabled(), scaler.state_dict()) == (1.0, False, {})
        scaler.load_state_dict({"scale": 8.0})
        assert scaler.get_scale() == 1.0
    np.testing.assert_allclose(model_t.weight.detach().numpy(),
                               model_p.weight.detach().numpy(), rtol=1e-6)
    scaler = tt.amp.GradScaler(enabled=False)
    assert scaler.step(type("Opt", (), {"step": lambda self, closure=None: 7})()) == 7


def test_deprecated_cuda_amp_grad_scaler_warns_as_pytorch():
    for lib in (tt, torch):
        scaler, got = _caught(lambda lib=lib: lib.cuda.amp.GradScaler(enabled=False))
        assert not scaler.is_enabled() and isinstance(scaler, lib.amp.GradScaler)
        assert got[0][0] is FutureWarning
        if TORCH_2_13:
            assert got[0][1] == ("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                                 "`torch.amp.GradScaler('cuda', args...)` instead.")


@pytest.mark.skipif(HAS_CUDA, reason="without a GPU only")
def test_enabled_cuda_scaler_without_a_gpu_switches_off_as_pytorch():
    # nanoGPT's `GradScaler(enabled=(dtype == 'float16'))` on a machine without a GPU
    for lib in (tt, torch):
        scaler, got = _caught(lambda lib=lib: lib.amp.GradScaler("cuda"))
        assert not scaler.is_enabled()
        assert got == [(UserWarning, "torch.cuda.amp.GradScaler is enabled, but CUDA is not "
                                     "available.  Disabling.")]


def test_enabled_scaler_is_refused_saying_there_is_no_mixed_precision():
    with pytest.raises(RuntimeError, match="no mixed precision.*enabled=False"):
        tt.amp.GradScaler("cpu")  # (PyTorch's is enabled: tinytrain cannot scale)
    if HAS_CUDA:
        with pytest.raises(RuntimeError, match="no mixed precision"):
            tt.amp.GradScaler()
        with pytest.raises(RuntimeError, match="no mixed precision"):
            tt.cuda.amp.GradScaler(enabled=True)


def test_autocast_switched_off_is_a_no_op_context_and_decorator():
    x = tt.ones(2, 2)
    for make in (lambda: tt.amp.autocast("cuda", enabled=False),
                 lambda: tt.autocast("cpu", dtype=tt.bfloat16, enabled=False),
                 lambda: tt.autocast(device_type="cuda", dtype=tt.float32, enabled=False)):
        with make():
            y = x @ x
        assert y.dtype == tt.float32

        @make()
        def f(a):
            return a @ a

        assert f(x).dtype == tt.float32
    assert tt.autocast is tt.amp.autocast
    if HAS_CUDA:
        with tt.autocast("cuda", dtype=tt.float32):
            assert (x.to("cuda") @ x.to("cuda")).dtype == tt.float32


def test_autocast_warnings_and_errors_as_pytorch():
    # CPU autocast to float32: PyTorch warns and switches off; so does tinytrain
    for lib in (tt, torch):
        ctx, got = _caught(lambda lib=lib: lib.autocast("cpu", dtype=lib.float32))
        with ctx:
            pass
        assert [c for c, _ in got] == [UserWarning]
        if TORCH_2_13:
            assert got[0][1].startswith("In CPU autocast, but the target dtype is not supported.")
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
            lib.autocast(0)
        for deprecated in (lambda lib=lib: lib.cpu.amp.autocast(enabled=False),
                           lambda lib=lib: lib.cuda.amp.autocast(enabled=False)):
            _, got = _caught(deprecated)
            assert [c for c, _ in got] == [FutureWarning]
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        tt.autocast("tpu")
    with pytest.raises(RuntimeError, match="no mixed precision"):
        tt.autocast("cpu")  # (PyTorch's autocasts to bfloat16)
    with pytest.raises(RuntimeError, match="no mixed precision"):
        tt.autocast("cpu", dtype=tt.float16)
    if HAS_CUDA:
        with pytest.raises(RuntimeError, match="no mixed precision"):
            tt.autocast("cuda", dtype=tt.float16)
    else:
        for lib in (tt, torch):
            _, got = _caught(lambda lib=lib: lib.autocast("cuda", dtype=lib.float16))
            assert got == [(UserWarning, "CUDA is not available or torch_xla is imported. "
                                         "Disabling autocast.")]


def test_bfloat16_is_a_name_as_pytorch_dtype():
    ptdtype = {"float32": tt.float32, "bfloat16": tt.bfloat16,
               "float16": tt.float16}["bfloat16"]  # nanoGPT's table
    assert repr(ptdtype) == "tinytrain.bfloat16" == repr(torch.bfloat16).replace("torch",
                                                                                 "tinytrain")
    for attr in ("is_floating_point", "is_complex", "is_signed", "itemsize"):
        assert getattr(tt.bfloat16, attr) == getattr(torch.bfloat16, attr), attr
    assert tt.bfloat16 == tt.bfloat16 and tt.bfloat16 != tt.float32
    assert tt.float32 != tt.bfloat16 and tt.ones(2).dtype != tt.bfloat16
    assert hash(tt.bfloat16) == hash(tt.bfloat16)
    import pickle

    assert pickle.loads(pickle.dumps(tt.bfloat16)) is tt.bfloat16


@pytest.mark.parametrize("use", [
    lambda d, dev: tt.tensor([1.0], dtype=d, device=dev),
    lambda d, dev: tt.zeros(2, dtype=d, device=dev),
    lambda d, dev: tt.ones(2, 3, dtype=d, device=dev),
    lambda d, dev: tt.full((2,), 1.0, dtype=d, device=dev),
    lambda d, dev: tt.randn(2, dtype=d, device=dev),
    lambda d, dev: tt.arange(3, dtype=d, device=dev),
    lambda d, dev: tt.ones(2, device=dev).to(d),
    lambda d, dev: tt.ones(2, device=dev).to(dev, d),
    lambda d, dev: tt.ones(2, device=dev).to(dtype=d),
    lambda d, dev: tt.ones(2, device=dev).type(d),
    lambda d, dev: tt.zeros_like(tt.ones(2, device=dev), dtype=d),
    lambda d, dev: tt.ones(2, device=dev).new_zeros(2, dtype=d),
    lambda d, dev: tt.ones(2, device=dev).sum(dtype=d),
    lambda d, dev: nn.Linear(2, 2, device=dev, dtype=d),
    lambda d, dev: nn.Linear(2, 2).to(dev).to(d),
    lambda d, dev: tt.set_default_dtype(d),
    lambda d, dev: tt.finfo(d),
], ids=["tensor", "zeros", "ones", "full", "randn", "arange", "to", "to-device-dtype",
        "to-dtype", "type", "zeros_like", "new_zeros", "sum", "Linear", "module-to",
        "set_default_dtype", "finfo"])
def test_bfloat16_is_refused_the_moment_it_makes_or_converts_a_tensor(use, device):
    with pytest.raises(RuntimeError, match="tinytrain.bfloat16 cannot be used to make or "
                                           "convert a tensor: tinytrain has bool, .* no "
                                           "bfloat16 or complex"):
        use(tt.bfloat16, device)
    assert tt.get_default_dtype() == tt.float32


# --- 2. DataLoader arguments with PyTorch's defaults ----------------------------------------

def test_dataloader_takes_pytorchs_defaults_of_timeout_in_order_pin_memory_device():
    from torch.utils.data import DataLoader as TorchLoader
    from torch.utils.data import TensorDataset as TorchSet

    from tinytrain.data import DataLoader, TensorDataset

    x = np.arange(6.0, dtype=np.float32)
    for kw in (dict(timeout=0, in_order=True, pin_memory_device="",
                    multiprocessing_context=None),
               dict(in_order=False), dict(pin_memory_device="cuda"),
               dict(num_workers=2, timeout=5.0, in_order=False)):
        ours = DataLoader(TensorDataset(x), batch_size=4, **kw)
        theirs = TorchLoader(TorchSet(torch.tensor(x)), batch_size=4, **kw)
        for name in ("timeout", "in_order", "pin_memory_device"):
            assert getattr(ours, name) == getattr(theirs, name), (kw, name)
        if kw.get("num_workers", 0) == 0:  # (no worker processes in a unit test)
            assert [b[0].numpy().tolist() for b in ours] == [
                b[0].numpy().tolist() for b in theirs]
        else:
            assert [b[0].numpy().tolist() for b in ours] == [[0, 1, 2, 3], [4, 5]]


def test_dataloader_timeout_errors_as_pytorch():
    from torch.utils.data import DataLoader as TorchLoader

    from tinytrain.data import DataLoader, TensorDataset

    ds = TensorDataset(np.arange(6.0))
    for Loader in (DataLoader, TorchLoader):
        with pytest.raises(ValueError, match="timeout option should be non-negative"):
            Loader(ds, batch_size=2, timeout=-1)
    with pytest.raises(AssertionError, match="requires timeout == 0"):
        iter(TorchLoader(ds, batch_size=2, timeout=5))  # (PyTorch: on iter())
    with pytest.raises(ValueError, match="timeout=5 .* needs num_workers > 0"):
        DataLoader(ds, batch_size=2, timeout=5)
    with pytest.raises(TypeError, match="DataLoader: timeout must be a number"):
        DataLoader(ds, batch_size=2, timeout="5")
    with pytest.raises(TypeError, match="DataLoader: in_order must be True or False, got int"):
        DataLoader(ds, batch_size=2, in_order=3)
    with pytest.raises(TypeError, match="DataLoader: pin_memory_device must be a str"):
        DataLoader(ds, batch_size=2, pin_memory_device=0)
    with pytest.raises(TypeError, match="'multiprocessing_context': .*only None"):
        DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="spawn")
    with pytest.warns(UserWarning, match="pin_memory_device is deprecated, the current "
                                         "accelerator will be used as the device,ignore "
                                         "pin_memory_device='cuda'"):
        DataLoader(ds, batch_size=2, pin_memory=True, pin_memory_device="cuda")


# --- 3. the 1-D adaptive pools ---------------------------------------------------------------

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,size", [((2, 3, 7), 3), ((2, 3, 8), 4), ((1, 2, 5), 1),
                                        ((2, 3, 5), 8), ((3, 6), (4,)), ((2, 1, 9), [2]),
                                        ((2, 3, 4), 0), ((0, 3, 4), 2)])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pool1d_matches_pytorch(kind, shape, size, dtype, device):
    rng = np.random.default_rng(0)
    x = (np.round(rng.standard_normal(shape) * 2) / 2).astype(dtype)  # (ties for max)
    g = rng.standard_normal(torch.nn.functional.adaptive_avg_pool1d(
        torch.tensor(x), size).shape).astype(dtype)
    xt, xp = tt.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    if kind == "avg":
        ours, theirs = F.adaptive_avg_pool1d(xt, size), torch.nn.functional.adaptive_avg_pool1d(
            xp, size)
        mods = nn.AdaptiveAvgPool1d(size), torch.nn.AdaptiveAvgPool1d(size)
    else:
        (ours, oi), (theirs, ti) = (F.adaptive_max_pool1d(xt, size, return_indices=True),
                                    torch.nn.functional.adaptive_max_pool1d(xp, size, True))
        assert oi.dtype == tt.int64 and oi.device == device
        np.testing.assert_array_equal(oi.numpy(), ti.numpy())
        oi2 = F.adaptive_max_pool1d_with_indices(xt, size)[1]
        np.testing.assert_array_equal(oi2.numpy(), ti.numpy())
        mods = nn.AdaptiveMaxPool1d(size), torch.nn.AdaptiveMaxPool1d(size)
    assert ours.shape == tuple(theirs.shape) and ours.dtype == xt.dtype
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **TOL[dtype])
    np.testing.assert_allclose(mods[0](xt).detach().numpy(),
                               mods[1](xp).detach().numpy(), **TOL[dtype])
    assert repr(mods[0]) == repr(mods[1])
    if ours.numel():
        ours.backward(tt.tensor(g, device=device))
        theirs.backward(torch.tensor(g))
        np.testing.assert_allclose(xt.grad.numpy(), xp.grad.numpy(), **TOL[dtype])


def test_adaptive_max_pool1d_module_returns_indices_and_reprs_as_pytorch():
    ours, theirs = nn.AdaptiveMaxPool1d(3, return_indices=True), torch.nn.AdaptiveMaxPool1d(
        3, return_indices=True)
    assert repr(ours) == repr(theirs) == "AdaptiveMaxPool1d(output_size=3)"
    x = np.random.default_rng(1).standard_normal((2, 4, 10)).astype(np.float32)
    (o, i), (to, ti) = ours(tt.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(o.numpy(), to.numpy())
    assert repr(nn.AdaptiveAvgPool1d((2,))) == repr(torch.nn.AdaptiveAvgPool1d((2,)))
    assert isinstance(nn.AdaptiveAvgPool1d(1), nn.Module)


def test_textcnn_pooling_over_time():
    # d2l's TextCNN: Conv1d then AdaptiveAvgPool1d(1) (global pooling over the sequence)
    x = np.random.default_rng(2).standard_normal((2, 5, 9)).astype(np.float32)
    ours = nn.Sequential(nn.Conv1d(5, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten())
    theirs = torch.nn.Sequential(torch.nn.Conv1d(5, 4, 3), torch.nn.ReLU(),
                                 torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten())
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    np.testing.assert_allclose(ours(tt.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("args,error,message", [
    (((1, 2, 3, 4), 2), RuntimeError, "Expected 2 to 3 dimensions, but got 4-dimensional tensor "
                                      "for argument #1 'self' (while checking arguments for "
                                      "adaptive_{kind}_pool1d)"),
    (((4,), 2), RuntimeError, "Expected 2 to 3 dimensions, but got 1-dimensional tensor for "
                              "argument #1 'self' (while checking arguments for "
                              "adaptive_{kind}_pool1d)"),
    (((2, 3, 7), (2, 3)), RuntimeError, "adaptive_{kind}_pool1d() argument 'output_size' should "
                                        "contain one int (got 2)"),
    (((2, 3, 7), None), TypeError, "adaptive_{kind}_pool1d(): argument 'output_size' "
                                   "(position 2) must be tuple of ints, not NoneType"),
    (((2, 3, 7), 2.5), TypeError, "adaptive_{kind}_pool1d(): argument 'output_size' "
                                  "(position 2) must be tuple of ints, not float"),
    (((2, 3, 0), 2), RuntimeError, "Expected input to have non-zero size for non-batch "
                                   "dimensions, but input has sizes"),
])
def test_adaptive_pool1d_errors_as_pytorch(kind, args, error, message, device):
    shape, size = args
    ours = getattr(F, f"adaptive_{kind}_pool1d")
    theirs = getattr(torch.nn.functional, f"adaptive_{kind}_pool1d")
    message = message.format(kind=kind)
    with pytest.raises(error) as got:
        theirs(torch.zeros(shape), size)
    assert message in str(got.value)
    with pytest.raises(error) as got:
        ours(tt.zeros(shape, device=device), size)
    assert message in str(got.value)


def test_adaptive_pool1d_edge_errors(device):
    x = tt.zeros(2, 3, 7, device=device)
    for kind in ("avg", "max"):
        pool = getattr(F, f"adaptive_{kind}_pool1d")
        with pytest.raises(RuntimeError, match="greater than or equal to 0 but received -1"):
            pool(x, -1)  # (PyTorch's messages speak of its 2-D pool here)
        with pytest.raises(RuntimeError, match=f'"adaptive_{kind}_pool1d" not implemented for '
                                               "'Long'"):
            pool(tt.zeros(1, 1, 8, dtype=tt.int64, device=device), 2)
    with pytest.raises(RuntimeError, match="dimension 1 being empty"):
        F.adaptive_max_pool1d(tt.zeros(2, 0, 4, device=device), 2)
    out = F.adaptive_avg_pool1d(tt.zeros(2, 0, 4, device=device), 3)  # (PyTorch's too)
    assert out.shape == tuple(torch.nn.functional.adaptive_avg_pool1d(
        torch.zeros(2, 0, 4), 3).shape) == (2, 0, 3)
    with pytest.raises(TypeError, match="argument 'input' must be a Tensor"):
        F.adaptive_avg_pool1d([1.0, 2.0], 1)


# --- 4. binary_cross_entropy's clamp at p = 0 or 1 ---------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bce_gradient_at_zero_and_one_is_pytorchs_exactly(dtype, device):
    p = np.array([0.0, 1.0, 0.5, 1e-13, 1.0, 0.0, 1e-7], dtype=dtype)
    y = np.array([1.0, 0.0, 0.2, 1.0, 1.0, 0.0, 0.3], dtype=dtype)
    for reduction in ("mean", "sum"):
        pt, pp = tt.tensor(p, device=device, requires_grad=True), torch.tensor(
            p, requires_grad=True)
        F.binary_cross_entropy(pt, tt.tensor(y, device=device), reduction=reduction).backward()
        torch.nn.functional.binary_cross_entropy(pp, torch.tensor(y),
                                                 reduction=reduction).backward()
        # (float64 at p = 0: -1.0000000039958029e12 in PyTorch, whose 1e-12 is a float32)
        np.testing.assert_allclose(pt.grad.numpy(), pp.grad.numpy(), rtol=1e-14 if
                                   dtype == np.float64 else 1e-7, atol=0)
