"""nn.MultiheadAttention, nn.TransformerEncoderLayer / TransformerEncoder,
nn.TransformerDecoderLayer / TransformerDecoder and nn.Transformer against PyTorch 2.13: a
torch module's state_dict loaded into ours (through NumPy), then the same outputs, attention
weights, and gradients of the inputs and of every parameter; float32 and float64, every mask
kind (bool and float ``attn_mask`` 2-D and 3-D, bool and float ``key_padding_mask``),
``batch_first`` and ``norm_first`` both ways, unbatched inputs; parameter names and
initialisation; and a few training steps of a small Transformer language model (the
"Language modeling with nn.Transformer" tutorial's model) giving torch's losses. Each test on
each device (``device`` fixture)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.nn.functional as F

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}
DTYPES = [np.float32, np.float64]
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}
E, H = 8, 2  # embed_dim, heads
N, L, S = 3, 4, 5  # batch, target length, source length


@pytest.fixture(autouse=True)
def _one_thread(torch_single_thread):
    yield


def make(torch_cls, ours_cls, device, dtype, *args, seed=0, **kwargs):
    """A torch module (seeded) and ours with its state_dict, both in train mode."""
    torch.manual_seed(seed)
    theirs = torch_cls(*args, **kwargs, dtype=TORCH_DTYPE[dtype])
    ours = ours_cls(*args, **kwargs, device=device, dtype=dtype)
    load(ours, theirs, device)
    return ours, theirs


def load(ours, theirs, device):
    state = {k: tt.tensor(v.detach().numpy(), device=device)
             for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)


def leaves(device, dtype, *arrays):
    arrays = [np.asarray(a, dtype) for a in arrays]
    return ([tt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def compare(ours_out, theirs_out, dtype, inputs, modules, seed=1):
    """Same values as torch's, and the same gradients of ``sum(out * g)`` for the ``inputs``
    (pairs of leaves) and every named parameter of ``modules`` (ours, theirs)."""
    tol = TOL[dtype]
    assert ours_out.shape == tuple(theirs_out.shape)
    assert ours_out.dtype == dtype
    np.testing.assert_allclose(ours_out.detach().numpy(), theirs_out.detach().numpy(), **tol)
    g = np.random.default_rng(seed).normal(size=ours_out.shape).astype(dtype)
    (ours_out * tt.tensor(g, device=ours_out.device)).sum().backward()
    (theirs_out * torch.tensor(g)).sum().backward()
    for a, b in inputs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)
    ours_m, theirs_m = modules
    theirs_p = dict(theirs_m.named_parameters())
    ours_p = dict(ours_m.named_parameters())
    assert sorted(ours_p) == sorted(theirs_p)
    for name, p in ours_p.items():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), theirs_p[name].grad.numpy(), err_msg=name,
                                   **tol)


RNG = np.random.default_rng(8)


def normal(*shape):
    return RNG.standard_normal(shape)


def seq(batch_first, n, length, e=E):
    """A batch of ``n`` sequences of ``length``: ``[n, length, e]`` or ``[length, n, e]``."""
    return normal(n, length, e) if batch_first else normal(length, n, e)


def bool_mask(*shape):
    """Random True (masked) entries; the last dim's first entry never masked, so no query
    has nothing to attend to."""
    m = RNG.random(shape) < 0.4
    m[..., 0] = False
    return m


def float_mask(*shape):
    m = RNG.standard_normal(shape)
    m[bool_mask(*shape)] = -math.inf
    return m


def masks(kind, device, length=L, src=S):
    """``{argument: (ours, torch's)}`` for ``kind``."""
    make_ = {"attn bool 2d": ("attn_mask", lambda: bool_mask(length, src)),
             "attn float 2d": ("attn_mask", lambda: float_mask(length, src)),
             "attn bool 3d": ("attn_mask", lambda: bool_mask(N * H, length, src)),
             "attn float 3d": ("attn_mask", lambda: float_mask(N * H, length, src)),
             "padding bool": ("key_padding_mask", lambda: bool_mask(N, src)),
             "padding float": ("key_padding_mask", lambda: float_mask(N, src))}
    out = {}
    for part in kind.split(" + "):
        if part == "none":
            continue
        arg, fn = make_[part]
        m = fn()
        if m.dtype != bool:
            m = m.astype(np.float32)
        out[arg] = (tt.tensor(m, device=device), torch.tensor(m))
    return out


# --------------------------------------------------------------------------- MultiheadAttention

MASK_KINDS = ["none", "attn bool 2d", "attn float 2d", "attn bool 3d", "attn float 3d",
              "padding bool", "padding float", "attn bool 2d + padding bool",
              "attn float 3d + padding float"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mask", MASK_KINDS)
def test_mha_cross_attention_outputs_weights_and_gradients(device, dtype, batch_first, mask):
    m, tm = make(torch.nn.MultiheadAttention, nn.MultiheadAttention, device, dtype, E, H,
                 batch_first=batch_first)
    ms = masks(mask, device)
    if "float" in mask:  # a float mask in the mask's dtype: what the scores are
        ms = {k: (a.to(dtype=dtype), b.to(TORCH_DTYPE[dtype])) for k, (a, b) in ms.items()}
    (q, k, v), (tq, tk, tv) = leaves(device, dtype, seq(batch_first, N, L),
                                     seq(batch_first, N, S), seq(batch_first, N, S))
    for need_weights, average in [(True, True), (True, False), (False, True)]:
        for t in (q, k, v, tq, tk, tv, *m.parameters(), *tm.parameters()):
            t.grad = None
        out, w = m(q, k, v, need_weights=need_weights, average_attn_weights=average,
                   **{a: o for a, (o, _) in ms.items()})
        tout, tw = tm(tq, tk, tv, need_weights=need_weights, average_attn_weights=average,
                      **{a: t for a, (_, t) in ms.items()})
        if need_weights:
            assert w.shape == tuple(tw.shape)
            np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), **TOL[dtype])
        else:
            assert w is None and tw is None
        compare(out, tout, dtype, [(q, tq), (k, tk), (v, tv)], (m, tm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_self_attention_one_tensor(device, dtype, batch_first):
    """query is key is value (the layers' call): gradients of the one input add up."""
    m, tm = make(torch.nn.MultiheadAttention, nn.MultiheadAttention, device, dtype, E, H,
                 batch_first=batch_first)
    (x,), (tx,) = leaves(device, dtype, seq(batch_first, N, L))
    out, w = m(x, x, x)
    tout, tw = tm(tx, tx, tx)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), **TOL[dtype])
    compare(out, tout, dtype, [(x, tx)], (m, tm))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mha_kdim_vdim_separate_projections(device, dtype):
    m, tm = make(torch.nn.MultiheadAttention, nn.MultiheadAttention, device, dtype, E, H,
                 kdim=5, vdim=3)
    assert m.in_proj_weight is None and m.q_proj_weight.shape == (E, E)
    assert m.k_proj_weight.shape == (E, 5) and m.v_proj_weight.shape == (E, 3)
    assert list(m.state_dict()) == list(tm.state_dict())
    (q, k, v), (tq, tk, tv) = leaves(device, dtype, normal(L, N, E), normal(S, N, 5),
                                     normal(S, N, 3))
    ms = masks("padding bool", device)
    out, w = m(q, k, v, key_padding_mask=ms["key_padding_mask"][0])
    tout, tw = tm(tq, tk, tv, key_padding_mask=ms["key_padding_mask"][1])
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), **TOL[dtype])
    compare(out, tout, dtype, [(q, tq), (k, tk), (v, tv)], (m, tm))


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("options", [dict(bias=False), dict(add_bias_kv=True),
                                     dict(add_zero_attn=True),
                                     dict(add_bias_kv=True, add_zero_attn=True)])
def test_mha_bias_options(device, options):
    dtype = np.float64
    m, tm = make(torch.nn.MultiheadAttention, nn.MultiheadAttention, device, dtype, E, H,
                 **options)
    assert list(m.state_dict()) == list(tm.state_dict())
    (q, k, v), (tq, tk, tv) = leaves(device, dtype, normal(L, N, E), normal(S, N, E),
                                     normal(S, N, E))
    ms = masks("attn float 3d + padding bool", device)
    ms["attn_mask"] = tuple(x.to(dtype=dtype) if isinstance(x, tt.Tensor) else x.double()
                            for x in ms["attn_mask"])
    for need_weights in (True, False):
        for t in (q, k, v, tq, tk, tv, *m.parameters(), *tm.parameters()):
            t.grad = None
        out, w = m(q, k, v, need_weights=need_weights, **{a: o for a, (o, _) in ms.items()})
        tout, tw = tm(tq, tk, tv, need_weights=need_weights,
                      **{a: t for a, (_, t) in ms.items()})
        if need_weights:
            np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), **TOL[dtype])
        compare(out, tout, dtype, [(q, tq), (k, tk), (v, tv)], (m, tm))


@pytest.mark.parametrize("mask", ["none", "attn bool 2d", "attn float 3d", "padding bool"])
@pytest.mark.parametrize("average", [True, False])
def test_mha_unbatched(device, mask, average):
    dtype = np.float64
    m, tm = make(torch.nn.MultiheadAttention, nn.MultiheadAttention, device, dtype, E, H,
                 batch_first=True)
    ms = masks(mask, device)
    for arg, (o, t) in list(ms.items()):  # unbatched masks: [S] padding, [H, L, S] 3-D
        if arg == "key_padding_mask":
            ms[arg] = (o[0], t[0])
        elif o.ndim == 3:
            ms[arg] = (o[:H].to(dtype=dtype), t[:H].double())
    (q, k, v), (tq, tk, tv) = leaves(device, dtype, normal(L, E), normal(S, E), normal(S, E))
    out, w = m(q, k, v, average_attn_weights=average, **{a: o for a, (o, _) in ms.items()})
    tout, tw = tm(tq, tk, tv, average_attn_weights=average,
                  **{a: t for a, (_, t) in ms.items()})
    assert w.shape == tuple(tw.shape)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), **TOL[dtype])
    compare(out, tout, dtype, [(q, tq), (k, tk), (v, tv)], (m, tm))


def test_mha_is_causal_hint_and_fully_masked_rows(device):
    dtype = np.float64
    m, tm = make(torch.nn.MultiheadAttention, nn.MultiheadAttention, device, dtype, E, H)
    (x,), (tx,) = leaves(device, dtype, normal(L, N, E))
    causal = nn.Transformer.generate_square_subsequent_mask(L, device=device, dtype=dtype)
    tcausal = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    np.testing.assert_array_equal(causal.numpy(), tcausal.numpy())
    out, _ = m(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    tout, _ = tm(tx, tx, tx, attn_mask=tcausal, is_causal=True, need_weights=False)
    compare(out, tout, dtype, [(x, tx)], (m, tm))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    # A query that may attend to nothing: NaN with the weights, zeros without (as torch).
    kpm = np.zeros((N, L), bool)
    kpm[1] = True
    with torch.no_grad():
        for need_weights in (True, False):
            ours = m(x, x, x, key_padding_mask=tt.tensor(kpm, device=device),
                     need_weights=need_weights)[0].numpy()
            theirs = tm(tx, tx, tx, key_padding_mask=torch.tensor(kpm),
                        need_weights=need_weights)[0].numpy()
            np.testing.assert_allclose(ours, theirs, **TOL[dtype])
            assert np.isnan(ours[:, 1]).all() == need_weights


def test_mha_parameters_and_initialisation(device):
    m = nn.MultiheadAttention(16, 4, device=device)
    tm = torch.nn.MultiheadAttention(16, 4)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert isinstance(m.out_proj, nn.Linear)
    assert (m.in_proj_bias.numpy() == 0).all() and (m.out_proj.bias.numpy() == 0).all()
    bound = math.sqrt(6 / (16 + 48))  # xavier_uniform_ of [48, 16]
    w = m.in_proj_weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(m.out_proj.weight.numpy()).max() <= 1 / math.sqrt(16)  # Linear's own
    assert m.bias_k is None and m.bias_v is None and m.q_proj_weight is None
    assert m.in_proj_weight.dtype == np.float32
    mk = nn.MultiheadAttention(16, 4, add_bias_kv=True, device=device, dtype=np.float64)
    assert mk.bias_k.shape == (1, 1, 16) and mk.bias_k.dtype == np.float64
    assert mk.bias_k.numpy().std() > 0  # xavier_normal_
    assert (m.embed_dim, m.num_heads, m.head_dim, m.batch_first) == (16, 4, 4, False)


def test_mha_dropout_only_in_training(device):
    m = nn.MultiheadAttention(E, H, dropout=0.5, device=device)
    x = tt.tensor(normal(L, N, E).astype(np.float32), device=device)
    m.eval()
    a, wa = m(x, x, x)
    b, wb = m(x, x, x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    m.train()
    tt.manual_seed(0)
    c, wc = m(x, x, x, average_attn_weights=False)
    w = wc.numpy()
    assert ((w == 0).mean() > 0.2) and not np.allclose(c.numpy(), a.numpy())
    kept = w[w != 0]  # the weights kept are scaled by 1 / (1 - p)
    assert kept.max() > 1 / L
    d, _ = m(x, x, x, need_weights=False)
    assert not np.allclose(d.numpy(), a.numpy())


def test_mha_errors(device):
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="must be greater than 0"):
        nn.MultiheadAttention(0, 1)
    m = nn.MultiheadAttention(E, H, device=device)
    x = tt.zeros(L, N, E, device=device)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is \[3, 3\], but "
                                           r"should be \[4, 4\]"):
        m(x, x, x, attn_mask=tt.zeros(3, 3, dtype=tt.bool, device=device))
    with pytest.raises(RuntimeError, match="3D attn_mask"):
        m(x, x, x, attn_mask=tt.zeros(2, L, L, device=device))
    with pytest.raises(RuntimeError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=tt.zeros(N, L + 1, dtype=tt.bool, device=device))
    with pytest.raises(RuntimeError, match="only bool and floating types of attn_mask"):
        m(x, x, x, attn_mask=tt.zeros(L, L, dtype=tt.int64, device=device))
    with pytest.raises(RuntimeError, match="query should be unbatched 2D or batched 3D"):
        m(x[0, 0], x[0, 0], x[0, 0])
    with pytest.raises(RuntimeError, match="expecting embedding dimension of 8, but got 4"):
        y = tt.zeros(L, N, 4, device=device)
        m(y, x, x)
    with pytest.raises(RuntimeError, match=r"expected key and value with embed_dim 8"):
        m(x, y, y)
    with pytest.raises(TypeError, match="must have the query's dtype float32"):
        m(x, x, x, attn_mask=tt.zeros(L, L, dtype=tt.float64, device=device))
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "
                                         "attn_mask is deprecated"):
        m(x, x, x, attn_mask=tt.zeros(L, L, device=device),
          key_padding_mask=tt.zeros(N, L, dtype=tt.bool, device=device))


# --------------------------------------------------------------------------- layers


ACTIVATIONS = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
               "callable": (F.silu, torch.nn.functional.silu),
               "module": (nn.GELU(), torch.nn.GELU())}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer(device, dtype, batch_first, norm_first):
    m, tm = make(torch.nn.TransformerEncoderLayer, nn.TransformerEncoderLayer, device, dtype,
                 E, H, 16, 0.0, batch_first=batch_first, norm_first=norm_first)
    assert list(m.state_dict()) == list(tm.state_dict())
    ms = masks("attn bool 2d + padding bool", device, S, S)
    (x,), (tx,) = leaves(device, dtype, seq(batch_first, N, S))
    out = m(x, src_mask=ms["attn_mask"][0], src_key_padding_mask=ms["key_padding_mask"][0])
    tout = tm(tx, src_mask=ms["attn_mask"][1], src_key_padding_mask=ms["key_padding_mask"][1])
    compare(out, tout, dtype, [(x, tx)], (m, tm))


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("options", [dict(), dict(bias=False, layer_norm_eps=1e-3)])
def test_encoder_layer_activation_bias_eps_and_unbatched(device, activation, options):
    dtype = np.float64
    ours_act, theirs_act = ACTIVATIONS[activation]
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoderLayer(E, H, 16, 0.0, theirs_act, dtype=torch.float64,
                                          **options)
    m = nn.TransformerEncoderLayer(E, H, 16, 0.0, ours_act, device=device, dtype=dtype,
                                   **options)
    load(m, tm, device)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert m.norm1.eps == tm.norm1.eps
    (x,), (tx,) = leaves(device, dtype, normal(S, E))  # unbatched
    ms = masks("attn float 2d", device, S, S)
    out = m(x, src_mask=ms["attn_mask"][0])
    tout = tm(tx, src_mask=ms["attn_mask"][1])
    compare(out, tout, dtype, [(x, tx)], (m, tm))


def test_encoder_layer_bad_activation():
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer(device, dtype, batch_first, norm_first):
    m, tm = make(torch.nn.TransformerDecoderLayer, nn.TransformerDecoderLayer, device, dtype,
                 E, H, 16, 0.0, "gelu", batch_first=batch_first, norm_first=norm_first)
    assert list(m.state_dict()) == list(tm.state_dict())
    self_ms = masks("attn float 2d + padding float", device, L, L)
    mem_ms = masks("attn bool 2d + padding bool", device, L, S)
    self_ms = {k: (a.to(dtype=dtype), b.to(TORCH_DTYPE[dtype])) for k, (a, b) in self_ms.items()}
    (t, mem), (tt_, tmem) = leaves(device, dtype, seq(batch_first, N, L), seq(batch_first, N, S))

    def args(i):
        return dict(tgt_mask=self_ms["attn_mask"][i],
                    tgt_key_padding_mask=self_ms["key_padding_mask"][i],
                    memory_mask=mem_ms["attn_mask"][i],
                    memory_key_padding_mask=mem_ms["key_padding_mask"][i])

    compare(m(t, mem, **args(0)), tm(tt_, tmem, **args(1)), dtype, [(t, tt_), (mem, tmem)],
            (m, tm))


@pytest.mark.filterwarnings("ignore:Support for mismatched src_key_padding_mask")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_stack_causal_and_padding(device, dtype, batch_first):
    torch.manual_seed(0)
    tlayer = torch.nn.TransformerEncoderLayer(E, H, 16, 0.0, batch_first=batch_first,
                                              dtype=TORCH_DTYPE[dtype])
    tm = torch.nn.TransformerEncoder(tlayer, 2, torch.nn.LayerNorm(E, dtype=TORCH_DTYPE[dtype]),
                                     enable_nested_tensor=False)
    layer = nn.TransformerEncoderLayer(E, H, 16, 0.0, batch_first=batch_first, device=device,
                                       dtype=dtype)
    m = nn.TransformerEncoder(layer, 2, nn.LayerNorm(E, device=device, dtype=dtype),
                              enable_nested_tensor=False)
    assert m.layers[0].linear1.weight is not m.layers[1].linear1.weight  # deep copies
    assert m.layers[0].linear1.weight is not layer.linear1.weight
    assert list(m.state_dict()) == list(tm.state_dict())
    load(m, tm, device)
    causal = nn.Transformer.generate_square_subsequent_mask(S, device=device, dtype=dtype)
    tcausal = torch.nn.Transformer.generate_square_subsequent_mask(S, dtype=TORCH_DTYPE[dtype])
    kpm = bool_mask(N, S)
    (x,), (tx,) = leaves(device, dtype, seq(batch_first, N, S))
    for kwargs, tkwargs in [
            (dict(mask=causal), dict(mask=tcausal)),  # is_causal detected
            (dict(mask=causal, is_causal=True), dict(mask=tcausal, is_causal=True)),
            (dict(mask=causal, src_key_padding_mask=tt.tensor(kpm, device=device)),
             dict(mask=tcausal, src_key_padding_mask=torch.tensor(kpm))),
            (dict(src_key_padding_mask=tt.tensor(kpm, device=device)),
             dict(src_key_padding_mask=torch.tensor(kpm)))]:
        for p in (x, tx, *m.parameters(), *tm.parameters()):
            p.grad = None
        compare(m(x, **kwargs), tm(tx, **tkwargs), dtype, [(x, tx)], (m, tm))


def test_decoder_stack_and_transformer(device):
    dtype = np.float64
    m, tm = make(torch.nn.Transformer, nn.Transformer, device, dtype, E, H, 2, 2, 16, 0.0,
                 batch_first=True)
    assert list(m.state_dict()) == list(tm.state_dict())
    (src, tgt), (tsrc, ttgt) = leaves(device, dtype, normal(N, S, E), normal(N, L, E))
    causal = nn.Transformer.generate_square_subsequent_mask(L, device=device, dtype=dtype)
    tcausal = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    kpm = bool_mask(N, S)
    out = m(src, tgt, tgt_mask=causal, src_key_padding_mask=tt.tensor(kpm, device=device),
            memory_key_padding_mask=tt.tensor(kpm, device=device))
    tout = tm(tsrc, ttgt, tgt_mask=tcausal, src_key_padding_mask=torch.tensor(kpm),
              memory_key_padding_mask=torch.tensor(kpm))
    compare(out, tout, dtype, [(src, tsrc), (tgt, ttgt)], (m, tm))
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        m(src, tgt[:1])
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal "
                                           "to d_model"):
        m(src[..., :4], tgt)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_transformer_initialisation_and_mask(device):
    m = nn.Transformer(16, 4, 1, 1, 32, device=device)
    tm = torch.nn.Transformer(16, 4, 1, 1, 32)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    w = m.encoder.layers[0].linear1.weight.numpy()  # xavier_uniform_ redrawn: [32, 16]
    assert np.abs(w).max() <= math.sqrt(6 / 48) and np.abs(w).max() > 1 / 4
    assert (m.d_model, m.nhead, m.batch_first) == (16, 4, False)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype == np.float32 and mask.device == tt.device("cpu")
    np.testing.assert_array_equal(mask.numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    assert isinstance(nn.TransformerEncoderLayer(4, 2), nn.Module)
    assert "MultiheadAttention" in nn.__all__


# --------------------------------------------------------------------------- training


def test_transformer_language_model_trains_as_torch(device):
    """The "Language modeling with nn.Transformer" tutorial's model, small: embedding *
    sqrt(d), sinusoidal positions, a causal TransformerEncoder, a Linear decoder; Adam steps
    give torch's losses."""
    ntokens, d, nhead, nlayers, bptt, batch = 20, 16, 2, 2, 6, 4

    def model(L, dev=None):
        kw = {} if dev is None else dict(device=dev)

        class LM(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = L.nn.Embedding(ntokens, d, **kw)
                layer = L.nn.TransformerEncoderLayer(d, nhead, 32, 0.0, **kw)
                self.transformer_encoder = L.nn.TransformerEncoder(layer, nlayers,
                                                                   enable_nested_tensor=False)
                self.linear = L.nn.Linear(d, ntokens, **kw)

            def forward(self, src, pe, mask):
                x = self.embedding(src) * math.sqrt(d) + pe
                return self.linear(self.transformer_encoder(x, mask))

        return LM()

    torch.manual_seed(0)
    theirs = model(torch)
    ours = model(tt, device)
    load(ours, theirs, device)
    pos = np.arange(bptt)[:, None]
    div = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = np.zeros((bptt, 1, d), np.float32)
    pe[:, 0, 0::2], pe[:, 0, 1::2] = np.sin(pos * div), np.cos(pos * div)
    mask = nn.Transformer.generate_square_subsequent_mask(bptt, device=device)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(bptt)
    opt = tt.optim.Adam(ours.parameters(), lr=1e-2)
    topt = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    losses, tlosses = [], []
    data = rng.integers(0, ntokens, (bptt + 1, batch))
    for _ in range(5):
        src, target = data[:-1], data[1:].reshape(-1)
        out = ours(tt.tensor(src, device=device), tt.tensor(pe, device=device), mask)
        loss = F.cross_entropy(out.reshape(-1, ntokens), tt.tensor(target, device=device))
        opt.zero_grad()
        loss.backward()
        tt.nn.utils.clip_grad_norm_(ours.parameters(), 0.5)
        opt.step()
        tout = theirs(torch.tensor(src), torch.tensor(pe), tmask)
        tloss = torch.nn.functional.cross_entropy(tout.reshape(-1, ntokens),
                                                  torch.tensor(target))
        topt.zero_grad()
        tloss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        topt.step()
        losses.append(loss.item())
        tlosses.append(tloss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-4)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("left_aligned", [True, False])
@pytest.mark.parametrize("float_mask", [False, True])
def test_encoder_inference_padded_positions_as_torch(device, left_aligned, float_mask):
    """PyTorch's nested-tensor inference path (eval, batch_first, no autograd, padding mask
    only) gives 0 at the padded positions before the norm; in training, with autograd or
    with a mask too, the layers' values."""
    dtype = np.float32
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, 16, batch_first=True),
                                     2, torch.nn.LayerNorm(E))
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16, batch_first=True,
                                                         device=device), 2,
                              nn.LayerNorm(E, device=device))
    load(m, tm, device)
    tm.eval()
    m.eval()
    kpm = np.zeros((N, S), bool)
    kpm[1, 3:] = True
    kpm[2, -1] = True
    if not left_aligned:
        kpm[0, 0] = True
    kpm = np.where(kpm, -np.inf, 0).astype(dtype) if float_mask else kpm
    x = normal(N, S, E).astype(dtype)
    with torch.no_grad():
        theirs = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm)).numpy()
    with tt.no_grad():
        ours = m(tt.tensor(x, device=device),
                 src_key_padding_mask=tt.tensor(kpm, device=device)).numpy()
    np.testing.assert_allclose(ours, theirs, **TOL[dtype])
    # with autograd (a leaf that requires grad), the values at the padded positions
    (xl,), (txl,) = leaves(device, dtype, x)
    compare(m(xl, src_key_padding_mask=tt.tensor(kpm, device=device)),
            tm(txl, src_key_padding_mask=torch.tensor(kpm)), dtype, [(xl, txl)], (m, tm))


def test_encoder_warns_as_torch_when_nested_tensors_are_ruled_out():
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but "
                                         "self.use_nested_tensor is False because "
                                         "encoder_layer.self_attn.batch_first was not True"):
        m = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16), 2)
    assert m.use_nested_tensor is False and m.enable_nested_tensor is True
    with pytest.warns(UserWarning, match="encoder_layer.norm_first was True"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, norm_first=True,
                                                         batch_first=True), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, batch_first=True), 1)
        nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H), 1, enable_nested_tensor=False)
    assert m.use_nested_tensor is True


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.filterwarnings("ignore:divide by zero")
def test_word_language_model_transformer_subclass(device):
    """PyTorch's examples/word_language_model ``TransformerModel``: a subclass of
    nn.Transformer that replaces ``decoder`` with a Linear, and a causal mask made as
    ``log(tril(ones))`` (detected as causal); log-softmax outputs and gradients as torch's."""
    ntoken, ninp, nhead, nhid, nlayers, bptt, batch = 11, 8, 2, 16, 2, 5, 3
    pe = np.zeros((bptt, 1, ninp), np.float32)
    pe[:, 0, :] = np.sin(np.arange(bptt)[:, None] * 0.5 + np.arange(ninp))

    def model(L, **kw):
        class TransformerModel(L.nn.Transformer):
            def __init__(self):
                super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                                 num_encoder_layers=nlayers, dropout=0.0, **kw)
                self.input_emb = L.nn.Embedding(ntoken, ninp, **kw)
                self.decoder = L.nn.Linear(ninp, ntoken, **kw)
                self.src_mask = None

            def forward(self, src, pe):
                mask = L.log(L.tril(L.ones(len(src), len(src), device=src.device)))
                x = self.input_emb(src) * math.sqrt(ninp) + pe
                output = self.decoder(self.encoder(x, mask=mask))
                return L.nn.functional.log_softmax(output, dim=-1)

        return TransformerModel()

    torch.manual_seed(0)
    theirs = model(torch)
    ours = model(tt, device=device)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    load(ours, theirs, device)
    src = np.random.default_rng(1).integers(0, ntoken, (bptt, batch))
    out = ours(tt.tensor(src, device=device), tt.tensor(pe, device=device))
    tout = theirs(torch.tensor(src), torch.tensor(pe))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), **TOL[np.float32])
    g = np.random.default_rng(2).normal(size=out.shape).astype(np.float32)
    (out * tt.tensor(g, device=device)).sum().backward()
    (tout * torch.tensor(g)).sum().backward()
    ours_p = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(ours_p[name].grad.numpy(), p.grad.numpy(), err_msg=name,
                                   **TOL[np.float32])
