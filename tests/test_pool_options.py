"""Pooling's options beyond the kernels' windows, against PyTorch: ``ceil_mode``, ``dilation``,
``return_indices``, ``divisor_override``, adaptive max pooling and max unpooling (values,
indices, gradients, output shapes, refusals).

The general path: ``tinytrain/nn/pooling.py``; the functions and Modules: ``tinytrain/nn/conv.py``.
The default options' kernels are tested in ``tests/test_pool.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tinytrain as tt
import tinytrain.nn.functional as F

pytestmark = pytest.mark.usefixtures("torch_single_thread")

F32, F64 = np.float32, np.float64


def _torch():
    return pytest.importorskip("torch")


def run(name, x, grad=None, device="cpu", **kwargs):
    """tinytrain's ``F.<name>(x, **kwargs)``: ``(out, indices or None, dx or None)`` as arrays,
    the backward with ``grad`` (the output's shape)."""
    xt = tt.tensor(x, requires_grad=x.dtype.kind == "f", device=device)
    result = getattr(F, name)(xt, **kwargs)
    out, indices = result if isinstance(result, tuple) else (result, None)
    if grad is not None:
        out.backward(tt.tensor(grad, device=device))
    return (out.numpy(), None if indices is None else indices.numpy(),
            None if grad is None else xt.grad.numpy())


def torch_run(name, x, grad=None, **kwargs):
    """The same with PyTorch."""
    torch = _torch()
    tx = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    result = getattr(torch.nn.functional, name)(tx, **kwargs)
    out, indices = result if isinstance(result, tuple) else (result, None)
    if grad is not None:
        out.backward(torch.tensor(grad))
    return (out.detach().numpy(), None if indices is None else indices.numpy(),
            None if grad is None else tx.grad.numpy())


def compare(name, x, exact=False, **kwargs):
    """Forward, indices and backward (a random output gradient) equal to PyTorch's: exactly
    for max pooling (the same elements, added in the same order), to rounding for averages."""
    torch = _torch()
    try:
        result = getattr(torch.nn.functional, name)(torch.tensor(x), **kwargs)
    except RuntimeError:  # PyTorch refuses these sizes: so must tinytrain
        with pytest.raises(RuntimeError):
            run(name, x, **kwargs)
        return 0
    shape = tuple((result[0] if isinstance(result, tuple) else result).shape)
    grad = np.random.default_rng(7).standard_normal(shape).astype(x.dtype)
    ours, theirs = run(name, x, grad, **kwargs), torch_run(name, x, grad, **kwargs)
    case = f"{name} {kwargs} on {x.shape} {x.dtype}"
    assert ours[0].shape == theirs[0].shape and ours[0].dtype == x.dtype, case
    check = (np.testing.assert_array_equal if exact else
             lambda a, b, err_msg: np.testing.assert_allclose(
                 a, b, rtol=1e-5 if x.dtype == F32 else 1e-12, atol=1e-6 if x.dtype == F32
                 else 1e-12, err_msg=err_msg))
    check(ours[0], theirs[0], err_msg=f"values of {case}")
    check(ours[2], theirs[2], err_msg=f"gradient of {case}")
    if theirs[1] is not None:
        assert ours[1].dtype == np.int64, case
        np.testing.assert_array_equal(ours[1], theirs[1], err_msg=f"indices of {case}")
    return 1


KERNELS, STRIDES, PADDINGS = [1, 2, 3, (2, 3)], [None, 1, 2, (3, 2)], [0, 1, (1, 0)]
SIZES = [(5, 7), (6, 6)]


def _fits(kernel, padding):
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    ph, pw = padding if isinstance(padding, tuple) else (padding, padding)
    return 2 * ph <= kh and 2 * pw <= kw  # (else both refuse: test_bad_input)


# --------------------------------------------------------------------------- sweeps


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool2d_options_match_pytorch_values_indices_and_gradients(dtype, ceil_mode):
    rng = np.random.default_rng(0)
    done = 0
    for kernel, stride, padding, dilation, (h, w) in itertools.product(
            KERNELS, STRIDES, PADDINGS, [1, 2, (1, 3)], SIZES):
        if _fits(kernel, padding):
            x = rng.standard_normal((2, 3, h, w)).astype(dtype)
            done += compare("max_pool2d", x, exact=True, kernel_size=kernel, stride=stride,
                            padding=padding, dilation=dilation, ceil_mode=ceil_mode,
                            return_indices=True)
    assert done > 200


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_avg_pool2d_options_match_pytorch_values_and_gradients(dtype, ceil_mode):
    rng = np.random.default_rng(1)
    done = 0
    for kernel, stride, padding, (include, divisor), (h, w) in itertools.product(
            KERNELS, STRIDES, PADDINGS, [(True, None), (False, None), (True, 3), (False, -2)],
            SIZES):
        if _fits(kernel, padding):
            x = rng.standard_normal((2, 3, h, w)).astype(dtype)
            done += compare("avg_pool2d", x, kernel_size=kernel, stride=stride,
                            padding=padding, ceil_mode=ceil_mode, count_include_pad=include,
                            divisor_override=divisor)
    assert done > 200


@pytest.mark.parametrize("dtype", [F32, F64])
def test_adaptive_max_pool2d_matches_pytorch_for_any_sizes(dtype):
    """Windows that overlap, that repeat (an output larger than the input), None sizes."""
    rng = np.random.default_rng(2)
    for (h, w), size in itertools.product([(1, 3), (4, 6), (5, 3), (7, 6)],
                                          [1, 3, (2, 4), (5, None), (None, 2), (9, 8)]):
        x = rng.standard_normal((2, 3, h, w)).astype(dtype)
        compare("adaptive_max_pool2d", x, exact=True, output_size=size, return_indices=True)
        compare("adaptive_max_pool2d", x, exact=True, output_size=size)


def test_adaptive_avg_pool2d_uneven_sizes_share_the_window_rule():
    """adaptive_avg_pool2d's uneven sizes take the adaptive windows of adaptive_max_pool2d."""
    rng = np.random.default_rng(3)
    for (h, w), size in itertools.product([(5, 7), (4, 6), (2, 3)], [(3, 4), (5, None)]):
        compare("adaptive_avg_pool2d", rng.standard_normal((2, 3, h, w)), output_size=size)
    for name in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):  # size 0: an empty output
        x = rng.standard_normal((2, 3, 4, 5))
        assert run(name, x, output_size=(0, 2))[0].shape == (2, 3, 0, 2)
        assert torch_run(name, x, output_size=(0, 2))[0].shape == (2, 3, 0, 2)


# --------------------------------------------------------------------------- exact values


def test_ceil_mode_keeps_the_overhanging_windows():
    x = np.arange(25, dtype=F32).reshape(1, 1, 5, 5)  # x[r, c] = 5r + c
    out, indices, _ = run("max_pool2d", x, kernel_size=2, ceil_mode=True, return_indices=True)
    np.testing.assert_array_equal(out[0, 0], [[6, 8, 9], [16, 18, 19], [21, 23, 24]])
    np.testing.assert_array_equal(indices[0, 0], out[0, 0])  # the plane index is the value
    # A kernel larger than the input still has a window if it starts inside (PyTorch's rule)
    x = np.arange(4.0).reshape(1, 1, 2, 2)
    compare("max_pool2d", x, exact=True, kernel_size=3, stride=2, ceil_mode=True,
            return_indices=True)
    compare("avg_pool2d", x, kernel_size=3, stride=2, ceil_mode=True)
    assert run("avg_pool2d", x, kernel_size=3, stride=2, ceil_mode=True)[0][0, 0, 0, 0] == 1.5


def test_avg_pool2d_ceil_mode_divisors_at_the_border():
    """6x6, kernel 3, stride 2, padding 1, ceil mode: window rows start at -1, 1, 3, 5 and
    hold 2, 3, 3, 1 input rows; they cover 3, 3, 3, 2 rows of the padded input (the last one
    overhangs the padding by one, which does not count)."""
    x = np.ones((1, 1, 6, 6))
    kwargs = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)
    real, covered = np.array([2, 3, 3, 1.0]), np.array([3, 3, 3, 2.0])
    out, _, _ = run("avg_pool2d", x, **kwargs)
    np.testing.assert_allclose(out[0, 0], np.outer(real / covered, real / covered))
    out, _, _ = run("avg_pool2d", x, count_include_pad=False, **kwargs)
    np.testing.assert_allclose(out[0, 0], np.ones((4, 4)))
    out, _, _ = run("avg_pool2d", x, divisor_override=4, **kwargs)
    np.testing.assert_allclose(out[0, 0], np.outer(real, real) / 4)
    for include in (True, False):
        compare("avg_pool2d", x, count_include_pad=include, **kwargs)


def test_dilation_spreads_the_window():
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    out, indices, dx = run("max_pool2d", x, np.ones((1, 1, 2, 2), F32), kernel_size=2,
                           stride=1, dilation=2, return_indices=True)
    np.testing.assert_array_equal(out[0, 0], [[10, 11], [14, 15]])  # rows {0, 2}, {1, 3}
    np.testing.assert_array_equal(indices[0, 0], [[10, 11], [14, 15]])
    np.testing.assert_array_equal(dx[0, 0], np.isin(x[0, 0], [10, 11, 14, 15]).astype(F32))


def test_ties_nan_and_infinities_pick_pytorchs_element():
    """The first maximum of a tie, the last of several NaN, a window of -inf its first input
    element (never the padding): the indices and the gradient follow PyTorch's scan."""
    rng = np.random.default_rng(4)
    x = rng.integers(0, 3, size=(2, 3, 7, 6)).astype(F32)  # values 0..2: many ties
    x[0, 0] = 1.0
    x[1, 1, 2, 2] = x[1, 1, 3, 3] = x[1, 1, 2, 4] = np.nan
    x[1, 2, :4, :4] = -np.inf
    x[0, 1, 5, 5] = np.inf
    for kwargs in (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                   dict(kernel_size=2, stride=1, padding=1, dilation=2),
                   dict(kernel_size=(3, 2), stride=(1, 2), dilation=(2, 1), ceil_mode=True),
                   dict(kernel_size=2, stride=2, padding=1)):  # default windows, with indices
        compare("max_pool2d", x, exact=True, return_indices=True, **kwargs)
    for size in ((3, 4), (4, 3), 2, (8, 7)):
        compare("adaptive_max_pool2d", x, exact=True, output_size=size, return_indices=True)


def test_integer_input_pools_like_pytorch():
    x = np.random.default_rng(5).integers(-9, 9, size=(2, 2, 5, 5))
    for kwargs in (dict(kernel_size=2, ceil_mode=True), dict(kernel_size=2, dilation=2)):
        ours, theirs = (run("max_pool2d", x, return_indices=True, **kwargs),
                        torch_run("max_pool2d", x, return_indices=True, **kwargs))
        for a, b in zip(ours[:2], theirs[:2]):
            np.testing.assert_array_equal(a, b)
        assert ours[0].dtype == np.int64


# --------------------------------------------------------------------------- max_unpool2d


def test_max_unpool2d_undoes_max_pool2d_as_pytorch():
    """Values back at their indices (zeros elsewhere); odd sizes need output_size; the
    gradient reads dy at the indices."""
    torch = _torch()
    rng = np.random.default_rng(6)
    for shape, kwargs, size in (((2, 3, 6, 8), dict(kernel_size=2), None),
                                ((2, 3, 5, 7), dict(kernel_size=2), (5, 7)),
                                ((2, 3, 5, 7), dict(kernel_size=2), (2, 3, 5, 7)),
                                ((1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1), None),
                                ((1, 2, 7, 6), dict(kernel_size=(3, 2), stride=1), None),
                                ((3, 6, 6), dict(kernel_size=2), None)):  # unbatched
        x = rng.standard_normal(shape)
        pooled, indices = F.max_pool2d(tt.tensor(x), return_indices=True, **kwargs)
        tp, ti = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
        leaf, tleaf = tt.tensor(pooled.numpy(), requires_grad=True), tp.requires_grad_()
        out = F.max_unpool2d(leaf, indices, output_size=size, **kwargs)
        ref = torch.nn.functional.max_unpool2d(tleaf, ti, output_size=size, **kwargs)
        grad = rng.standard_normal(tuple(ref.shape))
        out.backward(tt.tensor(grad))
        ref.backward(torch.tensor(grad))
        np.testing.assert_array_equal(out.numpy(), ref.detach().numpy(), err_msg=str(kwargs))
        np.testing.assert_array_equal(leaf.grad.numpy(), tleaf.grad.numpy(), err_msg=str(kwargs))


def test_max_unpool_module_round_trip_segnet_style():
    """An encoder's MaxPool2d(return_indices=True) feeding a decoder's MaxUnpool2d."""
    torch = _torch()
    x = np.random.default_rng(7).standard_normal((2, 3, 9, 9)).astype(F32)
    results = []
    for lib in (tt, torch):
        pool, unpool = lib.nn.MaxPool2d(2, return_indices=True), lib.nn.MaxUnpool2d(2)
        leaf = lib.tensor(x, requires_grad=True)
        y, indices = pool(leaf)
        z = unpool(y * 2, indices, output_size=leaf.shape)
        z.sum().backward()
        results.append((z.detach().numpy(), indices.numpy(), leaf.grad.numpy(), repr(unpool),
                        repr(pool)))
    for ours, theirs in zip(*results):
        if isinstance(ours, str):
            assert ours == theirs
        else:
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("call, match", [
    (lambda L: L.nn.functional.max_unpool2d(L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, 16]]]]),
                                            2), "invalid max index 16"),
    (lambda L: L.nn.functional.max_unpool2d(L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, -1]]]]),
                                            2), "invalid max index -1"),
    (lambda L: L.nn.functional.max_unpool2d(L.ones(1, 1, 2, 2), L.tensor([[[0, 1, 2, 3]]]), 2),
     r"indices must have the input's shape \(1, 1, 2, 2\)"),
    (lambda L: L.nn.functional.max_unpool2d(
        L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, 3]]]]).int(), 2), "int64"),
    (lambda L: L.nn.functional.max_unpool2d(L.ones(2, 2), L.tensor([[0, 1], [2, 3]]), 2),
     "3-D"),
    (lambda L: L.nn.functional.max_unpool2d(
        L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, 3]]]]), 2, output_size=(6, 4)),
     r"invalid output_size .*dim 0 must be between 2 and 6"),
    (lambda L: L.nn.functional.max_unpool2d(
        L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, 3]]]]), 2, output_size=(1, 4, 4)),
     "2 or 4 elements"),
])
def test_max_unpool2d_refuses_what_pytorch_refuses(call, match):
    torch = _torch()
    with pytest.raises((RuntimeError, ValueError)):
        call(torch)
    with pytest.raises((RuntimeError, ValueError, TypeError), match=match):
        call(tt)


# --------------------------------------------------------------------------- modules, shapes


def test_modules_take_the_options_and_print_as_pytorch():
    torch = _torch()
    x = np.random.default_rng(8).standard_normal((2, 3, 7, 9)).astype(F32)
    makers = [lambda L: L.nn.MaxPool2d(3, 2, 1, dilation=2, ceil_mode=True),
              lambda L: L.nn.MaxPool2d((2, 3), return_indices=True, ceil_mode=True),
              lambda L: L.nn.AvgPool2d(3, 2, 1, ceil_mode=True, divisor_override=2),
              lambda L: L.nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
              lambda L: L.nn.AdaptiveMaxPool2d((3, None), return_indices=True),
              lambda L: L.nn.AdaptiveMaxPool2d(4)]
    for make in makers:
        ours, theirs = make(tt), make(torch)
        assert repr(ours) == repr(theirs)
        assert list(ours.parameters()) == []
        got, ref = ours(tt.tensor(x)), theirs(torch.tensor(x))
        got, ref = (got, ref) if isinstance(got, tuple) else ((got,), (ref,))
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=repr(ours))


@pytest.mark.parametrize("name, kwargs", [
    ("max_pool2d", dict(kernel_size=3, stride=2, ceil_mode=True, return_indices=True)),
    ("max_pool2d", dict(kernel_size=2, dilation=2, padding=1)),
    ("max_pool2d_with_indices", dict(kernel_size=2)),
    ("avg_pool2d", dict(kernel_size=3, stride=2, ceil_mode=True, divisor_override=5)),
    ("adaptive_max_pool2d", dict(output_size=(3, 2), return_indices=True)),
    ("adaptive_max_pool2d_with_indices", dict(output_size=4)),
])
def test_unbatched_input_and_empty_batches_like_pytorch(name, kwargs):
    rng = np.random.default_rng(9)
    compare(name, rng.standard_normal((3, 7, 6)), exact="max" in name, **kwargs)  # [C, H, W]
    x = np.zeros((0, 3, 7, 6))
    ours, theirs = run(name, x, **kwargs), torch_run(name, x, **kwargs)
    assert ours[0].shape == theirs[0].shape
    if theirs[1] is not None:
        assert ours[1].shape == theirs[1].shape and ours[1].dtype == np.int64


def test_the_default_windows_keep_the_kernels(monkeypatch):
    """Default options, and ceil_mode=True where it gives the same windows (even sizes),
    never reach the general path: the kernels stay as fast as they were."""
    from tinytrain.nn import pooling

    def refuse(*args, **kwargs):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(pooling, "max_pool", refuse)
    monkeypatch.setattr(pooling, "avg_pool", refuse)
    x = tt.tensor(np.random.default_rng(10).standard_normal((2, 3, 8, 8)), requires_grad=True)
    for y in (F.max_pool2d(x, 2), F.max_pool2d(x, 2, ceil_mode=True),
              F.max_pool2d(x, 3, 1, 1, dilation=1, ceil_mode=True), F.avg_pool2d(x, 2),
              F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False),
              F.adaptive_avg_pool2d(x, 4), tt.nn.MaxPool2d(2, ceil_mode=True)(x)):
        y.sum().backward()
    with pytest.raises(AssertionError, match="the general path ran"):
        F.max_pool2d(x, 3, ceil_mode=True)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("call, match", [
    (lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 3, dilation=2),
     r"kernel 3x3 with dilation 2x2 \(spanning 5x5\) does not fit the padded input 4x4"),
    (lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 1, 1), 3, 2, ceil_mode=True),
     "does not fit"),
    (lambda L: L.nn.functional.avg_pool2d(L.ones(1, 1, 1, 1), 3, 2, ceil_mode=True),
     "does not fit"),
    (lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 9, 9), 2, padding=2, dilation=3),
     "padding should be at most half the kernel size"),
    (lambda L: L.nn.functional.avg_pool2d(L.ones(1, 1, 5, 5), 3, padding=2, ceil_mode=True),
     "padding should be at most half the kernel size"),
    (lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, dilation=0),
     "dilation must be positive"),
    (lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, dilation=(1, 2, 3)),
     "dilation must be an int or a pair"),
    (lambda L: L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, divisor_override=0),
     "divisor_override must not be zero"),
    (lambda L: L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, divisor_override=2.5),
     "divisor_override' must be int, not float"),
    (lambda L: L.nn.functional.adaptive_max_pool2d(L.ones(5, 5), 2), r"\[N, C, H, W\]"),
    (lambda L: L.nn.functional.adaptive_max_pool2d(L.ones(1, 0, 5, 5), 2), "empty dimension"),
    (lambda L: L.nn.functional.adaptive_max_pool2d(L.ones(1, 1, 5, 5), (2, 2, 2)),
     "output_size must be an int or 2 sizes"),
    (lambda L: L.nn.functional.adaptive_max_pool2d(L.ones(1, 1, 5, 5), -1),
     "output_size must be non-negative"),
])
def test_bad_input_is_refused_as_pytorch_refuses_it(call, match):
    """(The default options' refusals: tests/test_pool.py.)"""
    torch = _torch()
    with pytest.raises((RuntimeError, TypeError)):
        call(torch)
    with pytest.raises((RuntimeError, ValueError, TypeError), match=match):
        call(tt)


def test_a_dilated_window_of_padding_only_is_refused():
    """Kernel 2, dilation 3, padding 1 on a 2x2 input: the window reads rows -1 and 2, none of
    the input. PyTorch returns -inf there with the index 6 (outside the 4-element plane),
    and its backward writes out of bounds; tinytrain refuses, naming the window."""
    x = tt.ones(1, 1, 2, 2, requires_grad=True)
    with pytest.raises(ValueError, match="with dilation 3 the window of output row 0 reads "
                                         "only padding"):
        F.max_pool2d(x, 2, 1, 1, dilation=3)


# --------------------------------------------------------------------------- GPU


@pytest.mark.cuda
def test_the_general_path_on_the_gpu_gives_the_cpu_results():
    """The new options are array code through get_array_module: on CuPy they must give the
    CPU's values and indices, and its gradients up to the order of the atomic adds."""
    if not tt.cuda_is_available():
        pytest.skip("needs CuPy and an NVIDIA GPU")
    rng = np.random.default_rng(11)
    x = rng.integers(0, 4, size=(3, 4, 9, 10)).astype(F32)  # ties
    x[1, 2, 3, 3] = x[1, 2, 4, 4] = np.nan
    x[2, 1, :5, :5] = -np.inf
    cases = [("max_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                 return_indices=True)),
             ("max_pool2d", dict(kernel_size=2, dilation=(2, 3), padding=1)),
             ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                 count_include_pad=False)),
             ("avg_pool2d", dict(kernel_size=2, ceil_mode=True, divisor_override=3)),
             ("adaptive_max_pool2d", dict(output_size=(4, 7), return_indices=True)),
             ("adaptive_avg_pool2d", dict(output_size=(4, 7)))]
    for dtype in (F32, F64):
        for name, kwargs in cases:
            xd = x.astype(dtype)
            out, _, _ = run(name, xd, **kwargs)
            grad = rng.standard_normal(out.shape).astype(dtype)
            cpu, gpu = run(name, xd, grad, **kwargs), run(name, xd, grad, "cuda", **kwargs)
            case = f"{name} {kwargs} {dtype.__name__}"
            if "max" in name:  # the same elements: exactly; sums: up to their order
                np.testing.assert_array_equal(gpu[0], cpu[0], err_msg=case)
            np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-6, atol=1e-6, err_msg=case)
            if cpu[1] is not None:
                np.testing.assert_array_equal(gpu[1], cpu[1], err_msg=case)
            np.testing.assert_allclose(gpu[2], cpu[2], rtol=1e-5, atol=1e-6, err_msg=case)
    pooled, indices = F.max_pool2d(tt.tensor(x, device="cuda"), 2, return_indices=True)
    leaf = pooled.detach().requires_grad_()
    out = F.max_unpool2d(leaf, indices, 2, output_size=(9, 10))
    out.backward(tt.ones(*out.shape, device="cuda"))
    ref = F.max_unpool2d(tt.tensor(pooled.numpy()), tt.tensor(indices.numpy()), 2,
                         output_size=(9, 10))
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(leaf.grad.numpy(), np.ones(pooled.shape, F32))
