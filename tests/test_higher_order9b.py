"""Double backward of the remaining built-in ops against PyTorch 2.13, in float64.

One table, one entry per op (``OPS``): ``f(m, x, w)`` spelled the same for tinytrain and
torch (``m`` is either module), with the shapes and the value range of its two inputs. For
each entry, gradgradcheck's quantities are compared with torch's:

* the gradients ``g = d<f(x, w), v>/d(x, w)`` for a random cotangent ``v``
  (``create_graph=True``), then the derivatives of ``<g, u>`` (random ``u``) with respect to
  ``x``, ``w`` *and* ``v`` (the double backward is linear in the incoming gradient: the
  last is the first backward again, through the double backward's graph);
* whether ``g`` requires grad and has a ``grad_fn``, for ``g = d f(x).sum() / dx`` with ``w``
  a constant (PyTorch's gradient of hardtanh, of reflect padding, of average pooling reads
  the input: its gradient belongs to the input's graph even where its derivative is 0);
* for the small entries, the second derivatives against central finite differences of
  tinytrain's own first derivatives (gradgradcheck without torch).

The table runs on the ``device`` fixture: on CUDA too when CuPy sees a GPU.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
import torch.nn.functional as TF  # noqa: N812

import tinytrain as tt
import tinytrain.nn.functional as F  # noqa: N812


def fn(m):
    return F if m is tt else TF


#: The device of the test that runs (the ``device`` fixture's): tinytrain's constants go there.
ON = {"device": "cpu"}


def idx(m, values):
    """An int64 index tensor of ``m``."""
    return tensor(m, np.asarray(values, dtype=np.int64))


def const(m, values):
    return tensor(m, np.asarray(values, dtype=np.float64))


def tensor(m, array):
    return tt.tensor(array, device=ON["device"]) if m is tt else torch.tensor(array)


def ones(m, x, *shape):
    return m.ones(*shape, dtype=x.dtype, device=x.device)


# ------------------------------------------------------------------------------ the table
#
# name: (f(m, x, w), x's shape, w's shape or None, domain of the values: "normal", "pos"
# (0.5 .. 2), "unit" (-0.9 .. 0.9), "prob" (0.1 .. 0.9))

S = (3, 4)
IMG = (1, 2, 5, 6)

OPS = {
    # the erf family, binary element-wise ops of more_ops, zero-derivative ops
    "erf": (lambda m, x, w: m.erf(x) * w, S, S, "normal"),
    "erfc": (lambda m, x, w: m.erfc(x) * w, S, S, "normal"),
    "erfinv": (lambda m, x, w: m.erfinv(x) * w, S, S, "unit"),
    "atan2": (lambda m, x, w: m.atan2(x, w), S, S, "pos"),
    "hypot": (lambda m, x, w: m.hypot(x, w), S, S, "normal"),
    "logaddexp": (lambda m, x, w: m.logaddexp(x, w), S, S, "normal"),
    "xlogy": (lambda m, x, w: m.xlogy(x, w), S, S, "pos"),
    "copysign": (lambda m, x, w: m.copysign(x, w) * x, S, S, "normal"),
    "logit": (lambda m, x, w: m.logit(x) * w, S, S, "prob"),
    "logit_eps": (lambda m, x, w: m.logit(x, eps=0.3) * w, S, S, "prob"),
    "nan_to_num": (lambda m, x, w: m.nan_to_num(x * w), S, S, "normal"),
    "frac": (lambda m, x, w: m.frac(x * 3) * w, S, S, "pos"),
    "fmod": (lambda m, x, w: m.fmod(x * 3, w) * x, S, S, "pos"),
    "remainder": (lambda m, x, w: m.remainder(x * 3, w) * x, S, S, "pos"),
    "sign_round": (lambda m, x, w: (x.sign() + m.round(x * 2) + x.floor()) * w, S, S, "normal"),
    "lerp": (lambda m, x, w: x.lerp(w, 0.3) * x + m.lerp(w, x, 0.8), S, S, "normal"),
    "lerp_tensor": (lambda m, x, w: x.lerp(w, const(m, np.linspace(0, 1, 12).reshape(S))) * w,
                    S, S, "normal"),
    # reductions and scans
    "prod_all": (lambda m, x, w: (x * w).prod(), S, S, "pos"),
    "prod_dim": (lambda m, x, w: (x * w).prod(1), S, S, "normal"),
    "prod_zero": (lambda m, x, w: (x * const(m, [[1, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 1]])
                                  ).prod(1) * w[:, 0], S, S, "normal"),
    "cumprod": (lambda m, x, w: (x * w).cumprod(1), S, S, "normal"),
    "cumprod_zero": (lambda m, x, w: (x * const(m, [[1, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 1]])
                                      ).cumprod(1) * w, S, S, "normal"),
    "median_dim": (lambda m, x, w: (x * w).median(1).values, S, S, "normal"),
    "kthvalue": (lambda m, x, w: m.kthvalue(x * w, 2, 1).values, S, S, "normal"),
    "sort_topk": (lambda m, x, w: (x * w).sort(1).values * x + (x * w).topk(2, 0).values.sum(),
                  S, S, "normal"),
    "max_min_dim": (lambda m, x, w: (x * w).max(1).values + (x * w).min(0).values.sum(),
                    S, S, "normal"),
    "logcumsumexp": (lambda m, x, w: m.logcumsumexp(x * w, 1), S, S, "normal"),
    "cummax": (lambda m, x, w: m.cummax(x * w, 1).values, S, S, "normal"),
    "var_std": (lambda m, x, w: (x * w).var(1) * x.std(0).sum(), S, S, "normal"),
    "trace": (lambda m, x, w: m.trace(x * w) * x, S, S, "normal"),
    "dist": (lambda m, x, w: m.dist(x, w, 3), S, S, "normal"),
    # linear algebra
    "einsum_mm": (lambda m, x, w: m.einsum("ij,kj->ik", x, w), S, S, "normal"),
    "einsum_batch": (lambda m, x, w: m.einsum("ij,ij,i->j", x, w, x[:, 0]), S, S, "normal"),
    "einsum_diag": (lambda m, x, w: m.einsum("ii,ij->ij", x[:, :3], w), S, S, "normal"),
    "einsum_sum": (lambda m, x, w: m.einsum("ij->", x * w) * x, S, S, "normal"),
    "outer": (lambda m, x, w: m.outer(x[0], w[1]) ** 2, S, S, "normal"),
    "kron": (lambda m, x, w: m.kron(x[:2, :2], w[:2]) * m.kron(x[0], x[1]).sum(), S, S,
             "normal"),
    "cross": (lambda m, x, w: m.cross(x[:, :3], w[:, 1:], dim=1) * x[:, :3], S, S, "normal"),
    "tensordot": (lambda m, x, w: m.tensordot(x, w.T, 1) ** 2, S, S, "normal"),
    "addmm_addcmul": (lambda m, x, w: m.addmm(x[:, :3], x, w.T, beta=0.5, alpha=2)
                      * m.addcdiv(x[:, :3], w[:, :3], x[:, 1:] ** 2 + 1, value=0.3)
                      + m.addcmul(x[:, 1:], x[:, :3], w[:, 1:]), S, S, "normal"),
    "bmm_baddbmm": (lambda m, x, w: m.baddbmm(x.reshape(3, 2, 2), x.reshape(3, 2, 2),
                                               w.reshape(3, 2, 2)).tanh(), S, S, "normal"),
    # views and shapes
    "unfold_overlap": (lambda m, x, w: x.unfold(1, 3, 1) ** 2 * w.unfold(1, 3, 1), S, S,
                       "normal"),
    "unfold_step": (lambda m, x, w: x.unfold(1, 2, 2) * w.unfold(1, 2, 1)[:, :2], S, S,
                    "normal"),
    "diagonal": (lambda m, x, w: x.diagonal(1) * w.diagonal(-1).sum() + m.diagonal(x * w),
                 S, S, "normal"),
    "diag_embed": (lambda m, x, w: m.diag_embed(x, 1) * m.diag_embed(w * x, 1), S, S, "normal"),
    "diag": (lambda m, x, w: m.diag(x[0] * w[0]) ** 2 + m.diag(x[:, :3]).sum(), S, S,
             "normal"),
    "tril_triu": (lambda m, x, w: (x * w).tril(1) ** 2 + m.triu(x * w, -1), S, S, "normal"),
    "rot90_narrow": (lambda m, x, w: m.rot90(x * w, 1, (0, 1)) ** 2
                     + m.narrow(x, 1, 1, 3).sum(), S, S, "normal"),
    "take_index_select": (lambda m, x, w: m.take(x * w, idx(m, [0, 5, 5, 11])) ** 2
                          + m.index_select(x, 1, idx(m, [3, 0, 3])).sum(), S, S, "normal"),
    "take_along_dim": (lambda m, x, w: m.take_along_dim(x * w, idx(m, [[0], [3], [1]]), 1)
                       ** 2, S, S, "normal"),
    "masked": (lambda m, x, w: (x * w).masked_fill(x.detach() > 0, 0.5) ** 2
               + m.masked_select(x * w, w.detach() > 0).sum(), S, S, "normal"),
    "repeat_interleave": (lambda m, x, w: m.repeat_interleave(x * w, 2, dim=0) ** 2, S, S,
                          "normal"),
    # scatter and index writes (out of place and in place on a copy)
    "scatter": (lambda m, x, w: (x * x).scatter(1, idx(m, [[1, 0], [2, 3], [0, 0]]), w[:, :2] ** 2),
                S, S, "normal"),
    "scatter_value": (lambda m, x, w: (x * w).scatter(1, idx(m, [[1], [2], [0]]), 0.5), S, S,
                      "normal"),
    "scatter_add": (lambda m, x, w: (x * x).scatter_add(0, idx(m, [[1, 0, 2, 2], [1, 1, 0, 0]]),
                                                         w[:2] ** 2), S, S, "normal"),
    "scatter_reduce_sum_mean": (
        lambda m, x, w: (x * x).scatter_reduce(1, idx(m, [[1, 1], [2, 3], [0, 0]]), w[:, :2] ** 2,
                                               "sum")
        + (x * x).scatter_reduce(1, idx(m, [[1, 1], [2, 3], [0, 0]]), w[:, :2] ** 2, "mean",
                                 include_self=False), S, S, "normal"),
    "scatter_reduce_amax": (
        lambda m, x, w: (x * x).scatter_reduce(1, idx(m, [[1, 1], [2, 3], [0, 0]]), w[:, :2] ** 2,
                                               "amax"), S, S, "normal"),
    "scatter_reduce_prod": (
        lambda m, x, w: (x * 2).scatter_reduce(1, idx(m, [[1, 1], [2, 3], [0, 0]]), w[:, :2] * 3,
                                               "prod"), S, S, "normal"),
    "index_add": (lambda m, x, w: (x * x).index_add(1, idx(m, [0, 2, 0]), w[:, :3] ** 2,
                                                     alpha=2), S, S, "normal"),
    "index_put": (lambda m, x, w: (x * x).index_put((idx(m, [0, 2]), idx(m, [1, 3])), w[0, :2])
                  + (x * x).index_put((idx(m, [0, 0]),), w[1] ** 2, accumulate=True), S, S,
                  "normal"),
    "setitem_copy": (lambda m, x, w: _setitem_copy(m, x, w), S, S, "normal"),
    # pooling, unpooling, resampling, padding
    "max_pool2d_ceil_dilated": (lambda m, x, w: fn(m).max_pool2d(x * w, 2, 2, ceil_mode=True)
                                + fn(m).max_pool2d(x * w, 2, 1, dilation=2).sum(), IMG, IMG,
                                "normal"),
    "max_pool2d_indices": (lambda m, x, w: fn(m).max_pool2d(x * w, 2, return_indices=True)[0],
                           IMG, IMG, "normal"),
    "avg_pool2d_general": (lambda m, x, w: fn(m).avg_pool2d(x * w, 2, 2, ceil_mode=True)
                           + fn(m).avg_pool2d(x * w, 3, 2, 1, divisor_override=2).sum(),
                           IMG, IMG, "normal"),
    "avg_pool2d": (lambda m, x, w: fn(m).avg_pool2d(x * w, 2, 1, 1) ** 2, IMG, IMG, "normal"),
    "adaptive_avg_pool2d": (lambda m, x, w: fn(m).adaptive_avg_pool2d(x * w, (3, 4)) ** 2
                            + fn(m).adaptive_avg_pool2d(x, 1).sum(), IMG, IMG, "normal"),
    "adaptive_max_pool2d": (lambda m, x, w: fn(m).adaptive_max_pool2d(x * w, (3, 4)) ** 2,
                            IMG, IMG, "normal"),
    "adaptive_pool1d": (lambda m, x, w: fn(m).adaptive_avg_pool1d(x * w, 3) ** 2
                        + fn(m).adaptive_max_pool1d(x * w, 3), (2, 3, 7), (2, 3, 7), "normal"),
    "pool1d": (lambda m, x, w: fn(m).avg_pool1d(x * w, 3, 2) ** 2
               + fn(m).max_pool1d(x * w, 2, 1, ceil_mode=True).sum(), (2, 3, 7), (2, 3, 7),
               "normal"),
    "max_unpool2d": (lambda m, x, w: _unpool(m, x, w), IMG, IMG, "normal"),
    "interpolate_nearest": (lambda m, x, w: fn(m).interpolate(x * w, scale_factor=2) ** 2
                            + fn(m).interpolate(x, size=(3, 4)).sum(), IMG, IMG, "normal"),
    "interpolate_nearest_exact": (lambda m, x, w: fn(m).interpolate(
        x * w, size=(7, 4), mode="nearest-exact") ** 2, IMG, IMG, "normal"),
    "interpolate_bilinear": (lambda m, x, w: fn(m).interpolate(
        x * w, size=(7, 9), mode="bilinear", align_corners=False) ** 2
        + fn(m).interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=True).sum(),
        IMG, IMG, "normal"),
    "interpolate_linear": (lambda m, x, w: fn(m).interpolate(
        x * w, size=11, mode="linear", align_corners=False) ** 2, (2, 3, 7), (2, 3, 7),
        "normal"),
    "pad_reflect": (lambda m, x, w: fn(m).pad(x * w, (2, 1, 1, 2), mode="reflect") ** 2,
                    IMG, IMG, "normal"),
    "pad_replicate": (lambda m, x, w: fn(m).pad(x * w, (2, 1, 1, 3), mode="replicate") ** 2,
                      IMG, IMG, "normal"),
    "pad_circular": (lambda m, x, w: fn(m).pad(x * w, (2, 1, 1, 2), mode="circular") ** 2,
                     IMG, IMG, "normal"),
    "pixel_shuffle": (lambda m, x, w: fn(m).pixel_shuffle((x * w).reshape(1, 4, 3, 5), 2) ** 2
                      + fn(m).pixel_unshuffle(x.reshape(1, 1, 6, 10), 2).sum(), (1, 2, 5, 6),
                      (1, 2, 5, 6), "normal"),
    "conv1d": (lambda m, x, w: fn(m).conv1d(x, w[:2, :, :3], padding=1, stride=2) ** 2
               + fn(m).conv_transpose1d(x, w[:3, :2, :2], stride=2).sum(), (2, 3, 7),
               (3, 3, 7), "normal"),
    "grid_sample": (lambda m, x, w: fn(m).grid_sample(
        x, w.reshape(1, 3, 4, 2).tanh(), align_corners=False) ** 2, (1, 2, 4, 5), (3, 8),
        "normal"),
    "affine_grid": (lambda m, x, w: fn(m).affine_grid(x.reshape(1, 2, 3), (1, 1, 3, 4),
                                                      align_corners=False) ** 2 * w.sum(),
                    (2, 3), (2, 3), "normal"),
    # element-wise activations of nn.functional
    "hardtanh_relu6": (lambda m, x, w: fn(m).hardtanh(x * w, -0.5, 0.7) ** 2
                       + fn(m).relu6(x * 6) * w, S, S, "normal"),
    "hardswish_softsign": (lambda m, x, w: fn(m).hardswish(x * 4) ** 2 + fn(m).softsign(x) * w,
                           S, S, "normal"),
    "shrink_threshold": (lambda m, x, w: fn(m).softshrink(x * w, 0.3) ** 2
                         + fn(m).hardshrink(x * w, 0.3) + fn(m).threshold(x, 0.1, -1.0) * w
                         + fn(m).tanhshrink(x * w), S, S, "normal"),
    "smooth_activations": (lambda m, x, w: fn(m).mish(x * w) + fn(m).celu(x * w, 0.7)
                           + fn(m).selu(x) * w, S, S, "normal"),
    "glu_prelu": (lambda m, x, w: fn(m).glu(x * w, 1) ** 2 + fn(m).prelu(x, w[0, :1]).sum(),
                  S, S, "normal"),
    "softmin_logsigmoid_normalize": (lambda m, x, w: fn(m).softmin(x * w, 1) ** 2
                                     + fn(m).logsigmoid(x) * w + fn(m).normalize(x * w, dim=1),
                                     S, S, "normal"),
    # distances and losses
    "cosine_similarity": (lambda m, x, w: fn(m).cosine_similarity(x, w, 1) ** 2, S, S,
                          "normal"),
    "pairwise_distance": (lambda m, x, w: fn(m).pairwise_distance(x, w) ** 2, S, S, "normal"),
    "cdist": (lambda m, x, w: m.cdist(x, w[:2], 2, "use_mm_for_euclid_dist") ** 2, S, S,
              "normal"),
    "smooth_l1_huber": (lambda m, x, w: fn(m).smooth_l1_loss(x, w, beta=0.5) * 5
                        + fn(m).huber_loss(x, w, delta=0.7, reduction="sum"), S, S, "normal"),
    "kl_div": (lambda m, x, w: fn(m).kl_div(x.log_softmax(1), w.softmax(1),
                                            reduction="batchmean")
               + fn(m).kl_div(x, w, reduction="sum", log_target=True), S, S, "normal"),
    "poisson_nll": (lambda m, x, w: fn(m).poisson_nll_loss(x, w.abs())
                    + fn(m).poisson_nll_loss(x.exp(), w.abs(), log_input=False, full=True),
                    S, S, "normal"),
    "gaussian_nll": (lambda m, x, w: fn(m).gaussian_nll_loss(x, w, x[:, :1] ** 2 + 0.5), S, S,
                     "normal"),
    "margin_losses": (lambda m, x, w: fn(m).margin_ranking_loss(
        x[0], w[0], const(m, [1, -1, 1, -1]), margin=0.2)
        + fn(m).cosine_embedding_loss(x, w, const(m, [1, -1, 1]), margin=0.1)
        + fn(m).hinge_embedding_loss(x, const(m, [[1, -1, 1, -1]] * 3), margin=0.5)
        + fn(m).soft_margin_loss(x, w.detach().sign()), S, S, "normal"),
    "triplet_margin": (lambda m, x, w: fn(m).triplet_margin_loss(x, w, x.flip(0) * 0.5,
                                                                 margin=2.0), S, S, "normal"),
    "multilabel_soft_margin": (lambda m, x, w: fn(m).multilabel_soft_margin_loss(
        x * w, (w.detach() > 0).double()), S, S, "normal"),
    "bce_weighted_ce": (lambda m, x, w: fn(m).binary_cross_entropy(
        x.sigmoid(), w.sigmoid(), weight=const(m, [1.0, 2.0, 0.5, 1.0]))
        + fn(m).cross_entropy(x * w, idx(m, [1, 0, 3]), label_smoothing=0.2,
                              weight=const(m, [1.0, 2.0, 0.5, 1.0])), S, S, "normal"),
    # normalization
    "instance_norm": (lambda m, x, w: fn(m).instance_norm(x * w) ** 3, IMG, IMG, "normal"),
    "rms_norm": (lambda m, x, w: fn(m).rms_norm(x * w, (4,), w[0]) ** 2, S, S, "normal"),
    "local_response_norm": (lambda m, x, w: fn(m).local_response_norm(x * w, 2) ** 2, IMG,
                            IMG, "normal"),
    "batch_norm_eval": (lambda m, x, w: fn(m).batch_norm(
        x * w, const(m, [0.1, -0.2]), const(m, [1.5, 0.7]), w[0, :, 0, 0], x[0, :, 0, 0],
        training=False) ** 2, IMG, IMG, "normal"),
    "sdpa": (lambda m, x, w: fn(m).scaled_dot_product_attention(
        x.reshape(1, 3, 4), w.reshape(1, 3, 4), (x * w).reshape(1, 3, 4)) ** 2, S, S, "normal"),
    "bilinear": (lambda m, x, w: fn(m).bilinear(x, w, (x[:2, :, None] * w[:2, None, :]),
                                                w[:2, 0]) ** 2, S, S, "normal"),
    # recurrent cells (compositions; the weights are constants here)
    "lstm_cell": (lambda m, x, w: _cell(m, "LSTMCell", x, (w, w.flip(0) * 0.5)), S, S, "normal"),
    "gru_cell": (lambda m, x, w: _cell(m, "GRUCell", x, w), S, S, "normal"),
    "rnn_cell_relu": (lambda m, x, w: _cell(m, "RNNCell", x, w, nonlinearity="relu"), S, S,
                      "normal"),
}


def _cell(m, name, x, state, **options):
    """``name`` (4 -> 4) of ``m`` on ``x [3, 4]`` and ``state``, with the same weights in both
    libraries; the new state (LSTM: ``h * c``)."""
    cell = getattr(m.nn, name)(4, 4, **options).to(device=x.device, dtype=x.dtype)
    rng = np.random.default_rng(4)
    for p in cell.parameters():
        p.requires_grad_(False).copy_(tensor(m, rng.uniform(-0.6, 0.6, tuple(p.shape))))
    out = cell(x, state)
    return out[0] * out[1] if isinstance(out, tuple) else out


def _setitem_copy(m, x, w):
    y = x * x
    y[1] = w[0] ** 2  # (an index write: copy_ onto a view)
    y[0, :2] = 1.5
    return y * w


def _unpool(m, x, w):
    """Unpooling at fixed indices, with no index twice (where an index repeats, the gradient
    of every value written there is not the derivative: one of them stays, in torch too)."""
    _, indices = fn(m).max_pool2d(const(m, np.arange(60.0).reshape(IMG)), 2, 2,
                                  return_indices=True)
    return fn(m).max_unpool2d((x * w)[:, :, :2, :3], indices, 2, 2, output_size=(5, 6)) ** 2


# ------------------------------------------------------------------------------- helpers


def values(shape, domain, rng):
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "unit":
        return rng.uniform(-0.9, 0.9, shape)
    if domain == "prob":
        return rng.uniform(0.1, 0.9, shape)
    return rng.standard_normal(shape)


def leaf(m, array, device="cpu", requires_grad=True):
    if m is tt:
        return tt.tensor(array, dtype=tt.float64, device=device, requires_grad=requires_grad)
    return torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad)


def numpy(t):
    if t is None:
        return None
    return t.detach().cpu().numpy() if m_of(t) is tt else t.detach().numpy()


def m_of(t):
    return tt if isinstance(t, tt.Tensor) else torch


def draw(name):
    f, xs, ws, domain = OPS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    return f, values(xs, domain, rng), values(ws, domain, rng), rng


@contextlib.contextmanager
def torch_may_lack_it():
    """Skip where the installed torch has no double backward for an op (2.11's
    grid_sampler_2d_backward, on the GPU machine); the pinned 2.13 of CI has it."""
    try:
        yield
    except RuntimeError as error:
        if "is not implemented" not in str(error) or torch.__version__.startswith("2.13"):
            raise
        pytest.skip(f"torch {torch.__version__}: {error}")


def gradgrad(m, f, xv, wv, vv, uv, device="cpu"):
    """``(g_x, g_w, d<g, u>/dx, d<g, u>/dw, d<g, u>/dv)``, Nones as zeros."""
    x, w = leaf(m, xv, device), leaf(m, wv, device)
    out = f(m, x, w)
    v = leaf(m, vv(out.shape), device)
    gs = m.autograd.grad(out, (x, w), v, create_graph=True, allow_unused=True)
    us = [leaf(m, uv(g.shape), device, False) if g is not None else None for g in gs]
    s = sum((g * u).sum() for g, u in zip(gs, us) if g is not None and g.requires_grad)
    second = (None, None, None) if isinstance(s, int) else m.autograd.grad(
        s, (x, w, v), allow_unused=True)
    shapes = (x.shape, w.shape, v.shape)
    firsts = [numpy(g) if g is not None else np.zeros(xw.shape)
              for g, xw in zip(gs, (x, w))]
    seconds = [numpy(g) if g is not None else np.zeros(tuple(sh))
               for g, sh in zip(second, shapes)]
    return firsts + seconds


@pytest.mark.parametrize("name", sorted(OPS))
def test_double_backward_matches_torch(name, device):
    ON["device"] = device
    f, xv, wv, rng = draw(name)
    cache = {}

    def cotangent(key):
        def make(shape):
            if (key, tuple(shape)) not in cache:
                cache[key, tuple(shape)] = rng.standard_normal(tuple(shape))
            return cache[key, tuple(shape)]
        return make

    vv, uv = cotangent("v"), cotangent("u")
    ours = gradgrad(tt, f, xv, wv, vv, uv, device)
    with torch_may_lack_it():
        theirs = gradgrad(torch, f, xv, wv, vv, uv)
    for what, a, b in zip(("dx", "dw", "d2x", "d2w", "d2v"), ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9, err_msg=f"{name}: {what}")


def directional(f, xv, wv, vv, uv, dx, dw, device, create_graph):
    """``<g, u>`` for ``g = d<f(x, w), v>/d(x, w)`` and, with ``create_graph``, its derivative
    along ``(dx, dw)`` (tinytrain's double backward); without, ``<g, u>`` alone."""
    x, w = leaf(tt, xv, device), leaf(tt, wv, device)
    gs = tt.autograd.grad(f(tt, x, w), (x, w), leaf(tt, vv, device, False),
                          create_graph=create_graph, allow_unused=True)
    s = sum((g * leaf(tt, u, device, False)).sum() for g, u in zip(gs, uv) if g is not None)
    if not create_graph:
        return s.item()
    if not s.requires_grad:
        return 0.0
    hs = tt.autograd.grad(s, (x, w), allow_unused=True)
    return sum((h * leaf(tt, d, device, False)).sum().item()
               for h, d in zip(hs, (dx, dw)) if h is not None)


@pytest.mark.parametrize("name", sorted(OPS))
def test_double_backward_matches_finite_differences(name, device):
    """gradgradcheck without torch: the derivative of ``<g, u>`` along a random direction,
    from the double backward, against central differences of first-order gradients."""
    ON["device"] = device
    f, xv, wv, rng = draw(name)
    vv = rng.standard_normal(tuple(f(tt, leaf(tt, xv, device), leaf(tt, wv, device)).shape))
    uv = (rng.standard_normal(xv.shape), rng.standard_normal(wv.shape))
    dx, dw = rng.standard_normal(xv.shape), rng.standard_normal(wv.shape)
    exact = directional(f, xv, wv, vv, uv, dx, dw, device, True)
    eps = 1e-6
    ahead, behind = (directional(f, xv + e * dx, wv + e * dw, vv, uv, dx, dw, device, False)
                     for e in (eps, -eps))
    assert exact == pytest.approx((ahead - behind) / (2 * eps), rel=1e-5, abs=1e-6)


def graph_of_gradient(m, f, xv, wv, device="cpu"):
    """``(requires_grad, has grad_fn)`` of ``d f(x, w).sum() / dx``, ``w`` a constant."""
    x, w = leaf(m, xv, device), leaf(m, wv, device, requires_grad=False)
    (g,) = m.autograd.grad(f(m, x, w).sum(), x, create_graph=True)
    return g.requires_grad, g.grad_fn is not None


@pytest.mark.parametrize("name", sorted(OPS))
def test_gradient_requires_grad_as_torchs(name, device):
    ON["device"] = device
    f, xv, wv, _ = draw(name)
    assert graph_of_gradient(tt, f, xv, wv, device) == graph_of_gradient(torch, f, xv, wv)


# Single ops, for ``requires_grad`` / ``grad_fn`` of their gradient (x's values: normal).
# PyTorch's gradients of hardtanh and its kin, reflection and replication padding, average,
# max and adaptive pooling and convolutions read the input: they are in its graph.
L = (2, 3, 7)
PARITY = {
    "hardtanh": (lambda m, x: fn(m).hardtanh(x, -0.5, 0.7), S),
    "relu6": (lambda m, x: fn(m).relu6(x * 6), S),
    "hardsigmoid": (lambda m, x: fn(m).hardsigmoid(x * 4), S),
    "hardswish": (lambda m, x: fn(m).hardswish(x * 4), S),
    "softshrink": (lambda m, x: fn(m).softshrink(x, 0.3), S),
    "hardshrink": (lambda m, x: fn(m).hardshrink(x, 0.3), S),
    "threshold": (lambda m, x: fn(m).threshold(x, 0.1, -1.0), S),
    "relu": (lambda m, x: fn(m).relu(x), S),
    "prelu": (lambda m, x: fn(m).prelu(x, const(m, [0.2])), S),
    "elu": (lambda m, x: fn(m).elu(x), S),
    "selu": (lambda m, x: fn(m).selu(x), S),
    "celu": (lambda m, x: fn(m).celu(x), S),
    "pad_constant": (lambda m, x: fn(m).pad(x, (1, 2, 2, 1)), IMG),
    "pad_reflect": (lambda m, x: fn(m).pad(x, (1, 2, 2, 1), mode="reflect"), IMG),
    "pad_replicate": (lambda m, x: fn(m).pad(x, (1, 2, 2, 1), mode="replicate"), IMG),
    "pad_circular": (lambda m, x: fn(m).pad(x, (1, 2, 2, 1), mode="circular"), IMG),
    "pad_reflect1d": (lambda m, x: fn(m).pad(x, (2, 1), mode="reflect"), L),
    "avg_pool2d": (lambda m, x: fn(m).avg_pool2d(x, 2), IMG),
    "avg_pool2d_pad": (lambda m, x: fn(m).avg_pool2d(x, 3, 2, 1), IMG),
    "avg_pool2d_ceil": (lambda m, x: fn(m).avg_pool2d(x, 2, 2, ceil_mode=True), IMG),
    "avg_pool1d": (lambda m, x: fn(m).avg_pool1d(x, 2), L),
    "max_pool2d": (lambda m, x: fn(m).max_pool2d(x, 2), IMG),
    "max_pool2d_ceil": (lambda m, x: fn(m).max_pool2d(x, 2, 2, ceil_mode=True), IMG),
    "max_pool1d": (lambda m, x: fn(m).max_pool1d(x, 2), L),
    "adaptive_avg_pool2d": (lambda m, x: fn(m).adaptive_avg_pool2d(x, (3, 4)), IMG),
    "adaptive_avg_pool2d_1": (lambda m, x: fn(m).adaptive_avg_pool2d(x, 1), IMG),
    "adaptive_max_pool2d": (lambda m, x: fn(m).adaptive_max_pool2d(x, (3, 4)), IMG),
    "adaptive_avg_pool1d": (lambda m, x: fn(m).adaptive_avg_pool1d(x, 3), L),
    "adaptive_max_pool1d": (lambda m, x: fn(m).adaptive_max_pool1d(x, 3), L),
    "interp_nearest": (lambda m, x: fn(m).interpolate(x, scale_factor=2), IMG),
    "interp_bilinear": (lambda m, x: fn(m).interpolate(x, size=(7, 9), mode="bilinear"), IMG),
    "interp_linear": (lambda m, x: fn(m).interpolate(x, size=9, mode="linear"), L),
    "pixel_shuffle": (lambda m, x: fn(m).pixel_shuffle(x.reshape(1, 4, 3, 5), 2), IMG),
    "unfold_nn": (lambda m, x: fn(m).unfold(x, 2), IMG),
    "conv2d_x": (lambda m, x: fn(m).conv2d(x, ones(m, x, 3, 2, 2, 2), stride=2), IMG),
    "conv2d_w": (lambda m, x: fn(m).conv2d(ones(m, x, 1, 2, 3, 3),
                                           x.reshape(3, 2, 2, 5)[..., :2]), IMG),
    "conv_transpose2d": (lambda m, x: fn(m).conv_transpose2d(x, ones(m, x, 2, 3, 2, 2),
                                                             stride=2), IMG),
    "conv1d": (lambda m, x: fn(m).conv1d(x, ones(m, x, 2, 3, 2)), L),
    "tensor_unfold": (lambda m, x: x.unfold(1, 3, 1), S),
    "diagonal": (lambda m, x: x.diagonal(), S),
    "diag_embed": (lambda m, x: m.diag_embed(x), S),
    "trace": (lambda m, x: m.trace(x), S),
    "tril": (lambda m, x: x.tril(), S),
    "triu": (lambda m, x: m.triu(x, 1), S),
    "sort": (lambda m, x: x.sort(1).values, S),
    "topk": (lambda m, x: x.topk(2, 1).values, S),
    "kthvalue": (lambda m, x: m.kthvalue(x, 2, 1).values, S),
    "median_dim": (lambda m, x: x.median(1).values, S),
    "median": (lambda m, x: x.median(), S),
    "max_dim": (lambda m, x: x.max(1).values, S),
    "max": (lambda m, x: x.max(), S),
    "amax": (lambda m, x: x.amax(1), S),
    "cummax": (lambda m, x: m.cummax(x, 1).values, S),
    "gather": (lambda m, x: x.gather(1, idx(m, [[0, 1], [2, 2], [3, 0]])), S),
    "index_select": (lambda m, x: x.index_select(1, idx(m, [0, 2, 2])), S),
    "take": (lambda m, x: m.take(x, idx(m, [0, 5, 5])), S),
    "getitem_adv": (lambda m, x: x[idx(m, [0, 2, 2])], S),
    "masked_fill": (lambda m, x: x.masked_fill(x.detach() > 0, 0.5), S),
    "masked_select": (lambda m, x: x.masked_select(x.detach() > 0), S),
    "scatter": (lambda m, x: x.scatter(1, idx(m, [[1], [2], [0]]), 0.5), S),
    "scatter_add": (lambda m, x: x.scatter_add(1, idx(m, [[1], [2], [0]]), ones(m, x, 3, 1)), S),
    "scatter_reduce_amax": (lambda m, x: x.scatter_reduce(1, idx(m, [[1], [2], [0]]),
                                                          ones(m, x, 3, 1), "amax"), S),
    "scatter_reduce_prod": (lambda m, x: x.scatter_reduce(1, idx(m, [[1], [2], [0]]),
                                                          ones(m, x, 3, 1) * 2, "prod"), S),
    "index_put": (lambda m, x: x.index_put((idx(m, [0, 2]), ), (ones(m, x, 4) * 0)), S),
    "index_add": (lambda m, x: x.index_add(1, idx(m, [0, 2]), ones(m, x, 3, 2)), S),
    "max_unpool2d": (lambda m, x: fn(m).max_unpool2d(
        *fn(m).max_pool2d(x, 2, return_indices=True), 2), IMG),
    "max_unpool2d_alone": (lambda m, x: fn(m).max_unpool2d(
        x[..., :3], idx(m, np.arange(30).reshape(1, 2, 5, 3) % 20), 2), IMG),
    "clamp": (lambda m, x: x.clamp(-0.5, 0.5), S),
    "clamp_min": (lambda m, x: x.clamp(min=0.1), S),
    "abs": (lambda m, x: x.abs(), S),
    "sign": (lambda m, x: x.sign(), S),
    "floor": (lambda m, x: x.floor(), S),
    "frac": (lambda m, x: m.frac(x), S),
    "fmod": (lambda m, x: m.fmod(x, 0.7), S),
    "remainder": (lambda m, x: m.remainder(x, 0.7), S),
    "copysign": (lambda m, x: m.copysign(x, -1.0), S),
    "nan_to_num": (lambda m, x: m.nan_to_num(x), S),
    "where": (lambda m, x: m.where(x > 0, x, 0.0), S),
    "maximum": (lambda m, x: m.maximum(x, (ones(m, x, 4) * 0)), S),
    "flip": (lambda m, x: x.flip(0), S),
    "roll": (lambda m, x: x.roll(1, 0), S),
    "repeat": (lambda m, x: x.repeat(2, 1), S),
    "repeat_interleave": (lambda m, x: m.repeat_interleave(x, 2, dim=0), S),
    "cumsum": (lambda m, x: x.cumsum(1), S),
    "cat": (lambda m, x: m.cat([x, x], 0), S),
    "lerp_const": (lambda m, x: x.lerp((ones(m, x, 3, 4) * 0), 0.3), S),
    "embedding_w": (lambda m, x: fn(m).embedding(idx(m, [0, 2, 2]), x), S),
    "l1_loss": (lambda m, x: fn(m).l1_loss(x, (ones(m, x, 3, 4) * 0)), S),
    "smooth_l1": (lambda m, x: fn(m).smooth_l1_loss(x, (ones(m, x, 3, 4) * 0)), S),
    "huber": (lambda m, x: fn(m).huber_loss(x, (ones(m, x, 3, 4) * 0)), S),
    "hinge": (lambda m, x: fn(m).hinge_embedding_loss(x, ones(m, x, 3, 4)), S),
    "margin_ranking": (lambda m, x: fn(m).margin_ranking_loss(x[0], x[1], ones(m, x, 4)), S),
    "dropout_eval": (lambda m, x: fn(m).dropout(x, 0.5, training=False), S),
    "mse": (lambda m, x: fn(m).mse_loss(x, (ones(m, x, 3, 4) * 0)), S),
    "softmax": (lambda m, x: x.softmax(1), S),
    "mean": (lambda m, x: x.mean(1), S),
    "std": (lambda m, x: x.std(1), S),
    "norm1": (lambda m, x: x.norm(1), S),
    "pairwise_distance": (lambda m, x: fn(m).pairwise_distance(x, (ones(m, x, 3, 4) * 0)), S),
    "grid_sample_in": (lambda m, x: fn(m).grid_sample(x.reshape(1, 2, 2, 3), ones(m, x, 1, 2, 2, 2)
                                                      * 0.3, align_corners=False), S),
    "affine_grid": (lambda m, x: fn(m).affine_grid(x[:2, :3].reshape(1, 2, 3), (1, 1, 3, 4),
                                                   align_corners=False), S),
}
#: PARITY entries whose gradient is in the input's graph in torch, not in tinytrain's (both
#: compositions of other ops here, whose gradients do not read the input).
NOT_IN_GRAPH = {"prelu", "grid_sample_in"}


@pytest.mark.parametrize("name", sorted(PARITY))
def test_single_op_gradient_is_in_the_graph_as_torchs(name, device):
    ON["device"] = device
    f, shape = PARITY[name]
    xv = np.random.default_rng(sum(map(ord, name))).standard_normal(shape)
    seen = {}
    for m in (tt, torch):
        x = leaf(m, xv, device if m is tt else "cpu")
        (g,) = m.autograd.grad(f(m, x).sum(), x, create_graph=True)
        seen[m] = g.requires_grad, g.grad_fn is not None
        if g.requires_grad and name != "hardsigmoid":  # (torch: no double backward) a later
            # backward: zeros where the derivative is 0, or None, as torch's
            with torch_may_lack_it():
                (gg,) = m.autograd.grad((g * g.detach()).sum(), x, allow_unused=True)
            seen[m] += (None if gg is None else numpy(gg + x.detach() * 0),)
    if name in NOT_IN_GRAPH:
        assert seen[tt][0] is False and seen[torch][0] is True
        return
    assert seen[tt][:2] == seen[torch][:2]
    if len(seen[tt]) > 2:
        ours, theirs = seen[tt][2], seen[torch][2]
        assert (ours is None) == (theirs is None)
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)


def ctx_functions(m):
    """Two ctx-style Functions of ``m`` whose backward reads their saved output."""

    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class TanhOfProduct(m.autograd.Function):  # saves its inputs and its output
        @staticmethod
        def forward(ctx, x, w):
            y = (x * w).tanh()
            ctx.save_for_backward(x, w, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, w, y = ctx.saved_tensors
            d = g * (1 - y * y)
            return d * w, d * x

    return Exp, TanhOfProduct


def test_ctx_style_function_that_saves_its_output_is_differentiated_through_it():
    """PyTorch's SavedVariable of an output comes back with the Function's node as its
    ``grad_fn``: a backward written with that output is differentiated through it (the
    n-th derivative of an exp that saves its result is exp, not 0), and the in-place check
    still guards it."""
    results = {}
    for m in (tt, torch):
        exp, tanh_of_product = ctx_functions(m)
        x, w = leaf(m, [0.3, -1.2, 0.8]), leaf(m, [0.5, 1.5, -0.7])
        out, y = [], exp.apply(x).sum()
        for _ in range(3):
            (y,) = m.autograd.grad(y, x, create_graph=True)
            out.append(y)
            y = y.sum()
        gx, gw = m.autograd.grad(tanh_of_product.apply(x, w).sum(), (x, w), create_graph=True)
        out += [gx, gw, *m.autograd.grad((gx * gw).sum(), (x, w))]
        y = exp.apply(x)
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        assert g.requires_grad and g.grad_fn is not None
        with m.no_grad():
            y.mul_(2)  # the saved output written in place: the double backward refuses
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            m.autograd.grad(g.sum(), x)
        results[m] = [numpy(t) for t in out]
    for a, b in zip(results[tt], results[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(results[tt][2], np.exp([0.3, -1.2, 0.8]), rtol=1e-12)
