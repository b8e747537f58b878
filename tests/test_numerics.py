"""Values at the edges (inf, NaN, exact powers, 0), against PyTorch: where an earlier version
was wrong (from a differential fuzz of edge values)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tinytrain as tt

INF = float("inf")


@pytest.mark.parametrize("bad", [-INF, float("nan")])
@pytest.mark.parametrize("kind", ["cross_entropy", "nll_loss", "smoothing", "weight", "seq"])
def test_an_ignored_row_with_inf_or_nan_logits_counts_for_nothing(device, kind, bad):
    """A padding row (target -100) whose logits hold -inf (a masked vocabulary) or NaN: the
    loss and the other rows' gradients are PyTorch's, not NaN (-inf * 0 was NaN)."""
    x = np.array([[2.0, 1.0, 0.5], [bad, 0.0, 1.0], [0.3, -1.0, 2.0]], np.float32)
    y = np.array([0, -100, 2])
    if kind == "seq":  # [N, C, L]: the same rows as positions of one sequence
        x, y = x.T[None].copy(), y[None]
    kwargs = {"smoothing": {"label_smoothing": 0.1},
              "weight": {"weight": np.array([1.0, 2.0, 0.5], np.float32)}}.get(kind, {})

    def run(lib, tensor):
        fn = lib.nn.functional
        args = {k: tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        a = tensor(x).requires_grad_(True)
        logits = a.log_softmax(1) if kind == "nll_loss" else a
        loss = (fn.nll_loss if kind == "nll_loss" else fn.cross_entropy)(logits, tensor(y),
                                                                          **args)
        loss.backward()
        return loss.item(), a.grad

    ours, ours_grad = run(tt, lambda v: tt.tensor(v, device=device))
    ref, ref_grad = run(torch, torch.tensor)
    assert np.isfinite(ours) and ours == pytest.approx(ref, rel=1e-6)
    rows = [0, 2] if kind != "seq" else (slice(None), slice(None), [0, 2])
    got = ours_grad.numpy()[rows] if kind != "seq" else ours_grad.numpy()[rows]
    np.testing.assert_allclose(got, ref_grad.numpy()[rows], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log2_and_log10_are_exact_at_powers_like_torch(dtype):
    """``log(x) / log(b)`` missed: log10(1000) = 2.9999999999999996, log2(32768) =
    14.999999 in float32; floor() of them counted a digit or a bit too few."""
    exact = [1.0, 8.0, 1024.0, 8192.0, 32768.0, 2.0**40, 1e3, 1e10]  # exact in float32
    x = np.array(exact + ([1e19, 1e22] if dtype == np.float64 else []), dtype=dtype)
    for name in ("log2", "log10"):
        ours = getattr(tt.tensor(x), name)().numpy()
        ref = getattr(torch.tensor(x), name)().numpy()
        np.testing.assert_array_equal(np.floor(ours), np.floor(ref), err_msg=name)
        np.testing.assert_allclose(ours, ref, rtol=2e-7 if dtype == np.float32 else 1e-15)
        a = tt.tensor(x, requires_grad=True)
        getattr(a, name)().sum().backward()
        b = torch.tensor(x, requires_grad=True)
        getattr(b, name)().sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_remainders_gradient_follows_its_own_floor_division_like_torch(device, dtype):
    """d(a % b)/db = -(a // b): 1.0 % 0.1 is 1 - 9 * 0.1, so the gradient is -9, not
    -floor(1.0 / 0.1) = -10 (nor CuPy's floor_divide, which is floor(a / b))."""
    a_np = np.array([1.0, 7.5, -3.0, 5.0], dtype)
    b_np = np.array([0.1, 2.0, 2.0, -0.3], dtype)
    a = tt.tensor(a_np, requires_grad=True, device=device)
    b = tt.tensor(b_np, requires_grad=True, device=device)
    (a % b).sum().backward()
    ta, tb = torch.tensor(a_np, requires_grad=True), torch.tensor(b_np, requires_grad=True)
    (ta % tb).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())


def test_floating_point_edge_values_compute_silently_like_torch():
    """log(0), x / 0, exp(1000) and inf - inf give -inf, inf and NaN without NumPy's
    RuntimeWarnings (which pointed into tinytrain's ops); a user's own NumPy still warns."""
    script = textwrap.dedent("""
        import warnings
        import numpy as np
        import tinytrain as tt
        with warnings.catch_warnings(record=True) as caught:
            p = tt.tensor([0.0, 0.5, 0.5], requires_grad=True)
            (-(p * p.log()).sum()).backward()
            x = tt.tensor([1.0, 0.0, 1000.0, float("inf")], requires_grad=True)
            y = (x / 0).sum() + x.exp().sum() + x.sqrt().sum() + (x - float("inf")).sum()
            y.backward()
            tt.log10(tt.zeros(2)), tt.tensor([1e30]).float() * 1e30
            s = tt.tensor([float("inf"), -float("inf")])
            s.sum(), s.mean(), s.norm(), tt.tensor([3e38, 3e38]).sum()  # (NumPy's own code)
        assert not caught, [str(w.message) for w in caught]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")  # NumPy's own warning outside tinytrain stays
            np.log(np.zeros(1))
        assert caught and "divide by zero" in str(caught[0].message)
        print("silent")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "silent", out.stderr


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floor_division_and_remainder_of_floats_are_pytorchs_on_every_device(device, dtype):
    """Computed from fmod, which is exact: 1.0 // 0.1 is 9 and 1.0 % 0.1 is 0.0999...; CuPy's
    own floor division is floor(a / b), 10, which the GPU gave before."""
    vals = [1.0, -1.0, 0.1, -0.1, 7.5, -7.5, 0.3, 3.0, -0.0, 0.0, 1e30, float("inf")]
    a_np = np.array([p for p in vals for _ in vals], dtype)
    b_np = np.array([q for _ in vals for q in vals], dtype)
    a, b = tt.tensor(a_np, device=device), tt.tensor(b_np, device=device)
    ta, tb = torch.tensor(a_np), torch.tensor(b_np)
    for ours, ref in ((a // b, ta // tb), (a % b, ta % tb),
                      (tt.div(a, b, rounding_mode="floor"),
                       torch.div(ta, tb, rounding_mode="floor"))):
        got, want = ours.numpy(), ref.numpy()
        np.testing.assert_array_equal(got, want)
        same_sign = np.signbit(got) == np.signbit(want)
        assert (same_sign | np.isnan(want)).all()


@pytest.mark.parametrize("program", [
    lambda L, a, b: L.maximum(a, b).backward(L.tensor([float("nan"), float("inf"), 1.0])),
    lambda L, a, b: L.minimum(a, b).backward(L.tensor([float("nan"), float("inf"), 1.0])),
    lambda L, a, b: a.clamp(min=1.5).backward(L.tensor([float("inf"), float("nan"), 1.0])),
    lambda L, a, b: a.clamp(min=b).backward(L.tensor([float("inf"), float("nan"), 1.0])),
    lambda L, a, b: a.min().std().backward(),  # the std of one value: a NaN gradient
    lambda L, a, b: a.max().reshape(1).var().backward(),
    lambda L, a, b: L.maximum(a, b).var().backward(),
])
def test_inputs_an_op_did_not_pick_get_no_nan_gradient_like_torch(program):
    """maximum/minimum/clamp/min()/max() multiplied a NaN or inf gradient by a 0 mask: NaN
    reached the inputs that were not picked, where PyTorch gives 0."""
    import warnings

    import torch

    grads = []
    for lib in (tt, torch):
        a = lib.tensor([1.0, 3.0, 2.0], requires_grad=True)
        b = lib.tensor([2.0, 1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program(lib, a, b)
        grads.append([None if t.grad is None else np.array(t.grad.tolist()) for t in (a, b)])
    for got, ref in zip(*grads):
        assert (got is None) == (ref is None)
        if ref is not None:  # NaN where PyTorch has NaN, 0 where it has 0
            np.testing.assert_allclose(got, ref, rtol=1e-6, equal_nan=True)


def test_logsumexp_gradient_with_infinities_is_pytorchs():
    """A row with +inf and a large finite value gave NaN to the finite one (exp overflowed
    in the composed formula); an all -inf row: PyTorch's NaNs."""
    import torch

    rows = [[float("-inf")] * 3, [2.0, float("inf"), 1000.0], [1.0, 2.0, 3.0],
            [float("nan"), 1.0, 2.0], [float("-inf"), 0.5, float("-inf")]]
    got = []
    for lib in (tt, torch):
        x = lib.tensor(rows, requires_grad=True)
        y = x.logsumexp(1)
        y.sum().backward()
        got.append((np.array(y.tolist()), np.array(x.grad.tolist())))
    for ours, ref in zip(*got):
        np.testing.assert_allclose(ours, ref, rtol=1e-6, equal_nan=True)


def test_remainder_and_fmod_by_a_number_survive_a_later_write_to_the_dividend_like_torch():
    """h % 1.5 kept h for backward though its gradient is 1: a later h.add_(1) made the
    backward fail with 'modified by an inplace operation'; PyTorch keeps nothing."""
    import torch

    for lib in (tt, torch):
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = a * 1
        ys = [lib.fmod(h, 1.5), lib.remainder(h, 1.5), h % 1.5]
        h.add_(1)
        sum(y.sum() for y in ys).backward()
        assert a.grad.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool"):
        tt.sub(True, tt.tensor([1, 2]), alpha=2)
