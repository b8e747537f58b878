"""Attention and Transformer layers, as PyTorch 2.13's: ``MultiheadAttention``,
``TransformerEncoderLayer`` / ``TransformerEncoder``, ``TransformerDecoderLayer`` /
``TransformerDecoder`` and ``Transformer`` (with ``generate_square_subsequent_mask``).

The parameters, their names and their initialisation are PyTorch's, so a torch
``state_dict`` loads: ``in_proj_weight [3E, E]`` / ``in_proj_bias [3E]`` packed (or
``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` when ``kdim`` / ``vdim`` differ
from ``embed_dim``), ``out_proj`` a Linear; the layers' ``self_attn``, ``linear1``,
``dropout``, ``linear2``, ``norm1``, ``norm2``, ``dropout1``, ``dropout2`` (the decoder's
``multihead_attn``, ``norm3``, ``dropout3`` too).

Decisions:

- One code path: PyTorch's Python path (``F.multi_head_attention_forward``), composed of
  differentiable tensor ops, so autograd gives every gradient on NumPy and CuPy alike.
  PyTorch's inference fast paths (``torch._native_multi_head_attention``,
  ``torch._transformer_encoder_layer_fwd``, taken in eval mode without autograd) compute
  the same values. TransformerEncoder's nested-tensor path (evaluation, ``batch_first``, a
  left-aligned ``src_key_padding_mask`` and no ``mask``, no autograd, ``enable_nested_tensor``)
  returns zeros at the padded positions (before the final norm): tinytrain computes as usual
  and zeroes them under the same conditions, so its values are PyTorch's there too.
- Masks as PyTorch's: a bool ``attn_mask`` / ``key_padding_mask`` says where NOT to attend
  (True: masked, the opposite of ``F.scaled_dot_product_attention``'s bool mask); both are
  turned into float masks (``-inf`` where True) and added to the scores.
- ``need_weights=True`` computes ``softmax(q k^T / sqrt(d) + mask)`` itself (a query that
  may attend to nothing gets NaN, as PyTorch's); ``need_weights=False`` (what the
  Transformer layers ask for) goes through ``F.scaled_dot_product_attention`` (such a query
  gets zeros, as PyTorch's kernel). ``is_causal`` is a hint that ``attn_mask`` is the causal
  mask, as in PyTorch: it needs ``attn_mask``, and is used (the mask ignored) only without
  ``key_padding_mask`` and ``need_weights``.
- Dropout of the attention weights only in training mode, drawn from tinytrain's generator
  (so not PyTorch's random numbers).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.autograd import is_grad_enabled
from tinytrain.nn import functional as F
from tinytrain.nn import init
from tinytrain.nn.containers import ModuleList
from tinytrain.nn.layers import GELU, Dropout, Linear, ReLU
from tinytrain.nn.module import Module, Parameter, factory_tensor
from tinytrain.nn.normalization import LayerNorm
from tinytrain.tensor import DTypeError, ShapeError, Tensor, full, where

__all__ = ["MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerEncoderLayer"]


# --------------------------------------------------------------------------- masks


def _canonical_mask(mask: Tensor | None, name: str, dtype: Any, other: Tensor | None = None,
                    other_name: str = "") -> Tensor | None:
    """``mask`` as a float mask of ``dtype`` to add to the scores: a bool mask becomes
    ``-inf`` where True and 0 elsewhere; a float mask is returned as it is. ``other``: the
    mask given with it, whose dtype PyTorch warns about when it differs."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a Tensor or None, not {type(mask).__name__}")
    if mask.dtype != np.bool_ and mask.dtype.kind != "f":
        raise DTypeError(f"only bool and floating types of {name} are supported, got "
                         f"{mask.dtype}")
    if other is not None and isinstance(other, Tensor) and other.dtype != mask.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use "
                      "same type for both instead.", stacklevel=3)
    if mask.dtype.kind == "f":
        return mask
    xp = backend.get_array_module(mask._data)
    return Tensor(xp.where(mask._data, -math.inf, 0.0).astype(np.dtype(dtype)))


def _generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
    """``[sz, sz]``: ``-inf`` above the diagonal, 0 on and below it (query ``i`` sees keys
    ``0..i``)."""
    return full((sz, sz), -math.inf, dtype=dtype, device=device).triu(1)


def _detect_is_causal_mask(mask: Tensor | None, is_causal: bool | None = None,
                           size: int | None = None) -> bool:
    """``is_causal`` when given; else whether ``mask`` equals the causal float mask (PyTorch's
    check, so a bool causal mask does not count)."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.shape[-2]
        causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
        make_causal = (tuple(mask.shape) == tuple(causal.shape)
                       and bool((mask == causal).all().item()))
    return make_causal


# --------------------------------------------------------------------------- attention


def _check_shapes(query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
                  attn_mask: Tensor | None, num_heads: int) -> bool:
    """PyTorch's shape checks; True for batched (3-D) inputs, False for unbatched (2-D)."""
    for what, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"MultiheadAttention: argument '{what}' must be a Tensor, not "
                            f"{type(t).__name__}")
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise ShapeError("For batched (3-D) `query`, expected `key` and `value` to be 3-D "
                             f"but found {key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise ShapeError("For batched (3-D) `query`, expected `key_padding_mask` to be "
                             f"`None` or 2-D but found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise ShapeError("For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D "
                             f"or 3-D but found {attn_mask.ndim}-D tensor instead")
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise ShapeError("For unbatched (2-D) `query`, expected `key` and `value` to be "
                             f"2-D but found {key.ndim}-D and {value.ndim}-D tensors "
                             "respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise ShapeError("For unbatched (2-D) `query`, expected `key_padding_mask` to be "
                             f"`None` or 1-D but found {key_padding_mask.ndim}-D tensor "
                             "instead")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise ShapeError("For unbatched (2-D) `query`, expected `attn_mask` to be "
                                 f"`None`, 2-D or 3-D but found {attn_mask.ndim}-D tensor "
                                 "instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
                raise ShapeError(f"Expected `attn_mask` shape to be {expected} but got "
                                 f"{tuple(attn_mask.shape)}")
        return False
    raise ShapeError("query should be unbatched 2D or batched 3D tensor but received "
                     f"{query.ndim}-D query tensor")


def _multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None,
        bias_k: Tensor | None, bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float,
        out_proj_weight: Tensor, out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, q_proj_weight: Tensor | None = None,
        k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """PyTorch's ``F.multi_head_attention_forward`` on sequence-first inputs: ``query
    [L, N, E]``, ``key [S, N, Ek]``, ``value [S, N, Ev]`` (or unbatched ``[L, E]``, ...).

    Returns ``([L, N, E], weights)``: the weights ``[N, L, S]`` (averaged over the heads) or
    ``[N, num_heads, L, S]``, without N for unbatched inputs, or None without
    ``need_weights``. The separate ``q/k/v_proj_weight`` are used when ``in_proj_weight`` is
    None.
    """
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    S = key.shape[0]
    if query.dtype.kind != "f":
        raise DTypeError(f"MultiheadAttention: expected a floating point query, got "
                         f"{query.dtype}")
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype,
                                       attn_mask, "attn_mask")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the hint: causal attention instead of the (causal) mask
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False
    if E != out_proj_weight.shape[1]:
        raise ShapeError(f"was expecting embedding dimension of {out_proj_weight.shape[1]}, "
                         f"but got {E}")
    if E % num_heads:
        raise ShapeError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    head_dim = E // num_heads
    if in_proj_weight is None:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise ShapeError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not "
                             f"match value's {tuple(value.shape[:2])}")
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
        if w_k.shape[1] != key.shape[-1] or w_v.shape[1] != value.shape[-1]:
            raise ShapeError(f"MultiheadAttention: expected key [S, N, {w_k.shape[1]}] and "
                             f"value [S, N, {w_v.shape[1]}] (kdim, vdim), got key "
                             f"{list(key.shape)} and value {list(value.shape)}")
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise ShapeError(f"key shape {list(key.shape)} does not match value shape "
                             f"{list(value.shape)}")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
        if key.shape[-1] != E:
            raise ShapeError(f"MultiheadAttention: expected key and value with embed_dim {E} "
                             f"features (pass kdim=/vdim= for others), got key "
                             f"{list(key.shape)}")
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise ShapeError(f"The shape of the 2D attn_mask is {list(attn_mask.shape)}, "
                                 f"but should be {[L, S]}.")
        elif tuple(attn_mask.shape) != (N * num_heads, L, S):
            raise ShapeError(f"The shape of the 3D attn_mask is {list(attn_mask.shape)}, but "
                             f"should be {[N * num_heads, L, S]}.")
        if attn_mask.device != query.device:
            raise RuntimeError(f"MultiheadAttention: attn_mask is on {attn_mask.device}, the "
                               f"query on {query.device}")
    if key_padding_mask is not None and key_padding_mask.device != query.device:
        raise RuntimeError(f"MultiheadAttention: key_padding_mask is on "
                           f"{key_padding_mask.device}, the query on {query.device}")

    if (bias_k is None) != (bias_v is None):
        raise ValueError("MultiheadAttention: bias_k and bias_v must be given together")
    if bias_k is not None:  # add_bias_kv: one more key and value, learnt
        k = _cat([k, bias_k.expand(1, N, E)], 0)
        v = _cat([v, bias_v.expand(1, N, E)], 0)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    # [L, N, E] -> [N, heads, L, head_dim]
    q = q.reshape(L, N, num_heads, head_dim).permute(1, 2, 0, 3)
    k = k.reshape(k.shape[0], N, num_heads, head_dim).permute(1, 2, 0, 3)
    v = v.reshape(v.shape[0], N, num_heads, head_dim).permute(1, 2, 0, 3)
    if add_zero_attn:  # one more key and value, zeros
        zeros = Tensor(backend.get_array_module(k._data).zeros((N, num_heads, 1, head_dim),
                                                              dtype=k.dtype))
        k, v = _cat([k, zeros], 2), _cat([v, zeros], 2)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    S = k.shape[2]

    if attn_mask is not None and attn_mask.ndim == 3:
        attn_mask = attn_mask.reshape(N, num_heads, L, S)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (N, S):
            raise ShapeError(f"Expected key_padding_mask of shape {[N, S]} ([batch, source "
                             f"length]), but got {list(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(N, 1, 1, S)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / head_dim)
        scores = q_scaled @ k.transpose(-2, -1)
        if attn_mask is not None:
            if attn_mask.dtype != scores.dtype:  # PyTorch's baddbmm refuses it
                raise DTypeError(f"MultiheadAttention: a float attn_mask / key_padding_mask "
                                 f"must have the query's dtype {scores.dtype} (or be bool), "
                                 f"got {attn_mask.dtype}")
            scores = scores + attn_mask
        with np.errstate(invalid="ignore"):  # a row of -inf only: NaN, as PyTorch's
            weights = scores.softmax(-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p)
        out = weights @ v
    else:
        weights = None
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                             is_causal=is_causal and attn_mask is None)
    out = F.linear(out.permute(2, 0, 1, 3).reshape(L, N, E), out_proj_weight, out_proj_bias)
    if weights is not None and average_attn_weights:
        weights = weights.mean(1)
    if not batched:
        out = out.squeeze(1)
        if weights is not None:
            weights = weights.squeeze(0)
    return out, weights


def _cat(tensors: list[Tensor], dim: int) -> Tensor:
    from tinytrain.functions import cat

    return cat(tensors, dim)


class MultiheadAttention(Module):
    """Attention of ``num_heads`` heads: each projects ``query``, ``key``, ``value`` to
    ``embed_dim / num_heads`` features, attends (``softmax(q k^T / sqrt(d)) v``), and
    ``out_proj`` maps the heads' concatenated outputs back to ``embed_dim``.

    ``forward(query [L, N, E], key [S, N, kdim], value [S, N, vdim])`` (``[N, L, E]`` ... with
    ``batch_first=True``; ``[L, E]`` ... unbatched) returns ``(output [L, N, E], weights)``,
    the weights ``[N, L, S]`` averaged over heads, ``[N, num_heads, L, S]`` with
    ``average_attn_weights=False``, None with ``need_weights=False``.
    ``key_padding_mask [N, S]`` and ``attn_mask [L, S]`` or ``[N * num_heads, L, S]``: bool
    (True: do not attend) or float (added to the scores).

    Parameters as PyTorch's: ``in_proj_weight [3E, E]`` and ``in_proj_bias [3E]`` (query,
    key, value stacked), or ``q_proj_weight [E, E]``, ``k_proj_weight [E, kdim]``,
    ``v_proj_weight [E, vdim]`` when ``kdim`` / ``vdim`` differ from ``embed_dim``;
    ``out_proj`` (a Linear); ``bias_k`` / ``bias_v`` ``[1, 1, E]`` with ``add_bias_kv``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"embed_dim must be divisible by num_heads, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout}")

        def param(*shape: int) -> Parameter:
            return Parameter(factory_tensor("MultiheadAttention", shape, device=device,
                                            dtype=dtype))

        if not self._qkv_same_embed_dim:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, embed_dim), param(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: xavier_uniform_ on the input projections, zeros on the biases,
        xavier_normal_ on ``bias_k`` / ``bias_v``; ``out_proj.weight`` keeps Linear's."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """``(output, weights)``: shapes in the class docstring."""
        batched = isinstance(query, Tensor) and query.ndim == 3
        if self.batch_first and batched:
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) if isinstance(x, Tensor) else x
                                     for x in (query, key, value))
        out, weights = _multi_head_attention_forward(
            query, key, value, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights


# --------------------------------------------------------------------------- layers


def _get_activation_fn(activation: str) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _get_clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _seq_len(src: Tensor, batch_first: bool) -> int:
    return src.shape[0] if src.ndim == 2 else src.shape[1 if batch_first else 0]


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (``linear2(dropout(activation(linear1(x))))``),
    each with a residual connection and a LayerNorm: after the sum (``norm_first=False``,
    the original Transformer) or on the block's input (``norm_first=True``, pre-norm).

    ``forward(src [S, N, d_model] ([N, S, d_model] with batch_first, [S, d_model]
    unbatched), src_mask [S, S] or [N * nhead, S, S], src_key_padding_mask [N, S],
    is_causal)`` returns the shape of ``src``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        dtype = src.dtype if isinstance(src, Tensor) else None
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               dtype, src_mask, "src_mask")
        src_mask = _canonical_mask(src_mask, "src_mask", dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool = False) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention on ``tgt``, attention to ``memory`` (the encoder's output), then a
    feed-forward block, each with a residual connection and a LayerNorm (after the sum, or
    before the block with ``norm_first=True``).

    ``forward(tgt [T, N, d_model], memory [S, N, d_model], tgt_mask [T, T], memory_mask
    [T, S], tgt_key_padding_mask [N, T], memory_key_padding_mask [N, S], tgt_is_causal,
    memory_is_causal)`` returns the shape of ``tgt`` (batch first with ``batch_first``).
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = (_get_activation_fn(activation) if isinstance(activation, str)
                           else activation)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool = False) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x: Tensor, mem: Tensor, attn_mask: Tensor | None,
                   key_padding_mask: Tensor | None, is_causal: bool = False) -> Tensor:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers.0``, ``layers.1``, ...)
    applied in order, then ``norm`` if given.

    ``forward(src, mask, src_key_padding_mask, is_causal)``: shapes as
    :class:`TransformerEncoderLayer`'s. ``is_causal=None`` (the default) checks whether
    ``mask`` is the causal float mask, as PyTorch. With ``enable_nested_tensor`` (and the
    conditions of PyTorch's nested-tensor inference path: evaluation, ``batch_first``, no
    ``mask``, nothing needing a gradient), the positions a left-aligned
    ``src_key_padding_mask`` pads come out 0 (before ``norm``), as PyTorch's; it warns, as
    PyTorch, when the layer rules that path out.
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module, not "
                            f"{type(encoder_layer).__name__}")
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        self.use_nested_tensor = enable_nested_tensor
        why_not = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        dtype = src.dtype if isinstance(src, Tensor) else None
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               dtype, mask, "mask")
        mask = _canonical_mask(mask, "mask", dtype)
        output = src
        batch_first = getattr(getattr(self.layers[0], "self_attn", None), "batch_first", False)
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, batch_first))
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if self._nested_path(src, mask, src_key_padding_mask):
            # PyTorch runs the layers on a nested tensor of the unpadded positions and pads
            # it back with zeros: the padded positions come out 0 (before the norm)
            valid = (src_key_padding_mask == 0).unsqueeze(-1)
            output = where(valid, output, 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output


    def _nested_path(self, src: Tensor, mask: Tensor | None,
                     key_padding_mask: Tensor | None) -> bool:
        """Whether PyTorch 2.13 takes its nested-tensor inference path here: evaluation,
        batched input, a left-aligned ``key_padding_mask`` and no ``mask``, nothing that
        needs a gradient, and a first layer that allows it (:func:`_why_not_nested`)."""
        first = self.layers[0]
        if not (getattr(self, "use_nested_tensor", False) and not first.training
                and src.ndim == 3 and key_padding_mask is not None and mask is None):
            return False
        attn = first.self_attn
        args = (src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                attn.out_proj.bias, first.norm1.weight, first.norm1.bias, first.norm2.weight,
                first.norm2.bias, first.linear1.weight, first.linear1.bias,
                first.linear2.weight, first.linear2.bias)
        if is_grad_enabled() and any(t is not None and t.requires_grad for t in args):
            return False
        if getattr(self, "mask_check", True):  # unpadded positions first in each row
            valid = (key_padding_mask == 0)._data
            if bool((valid[:, 1:] > valid[:, :-1]).any()):
                return False
        return True


def _why_not_nested(layer: Module) -> str:
    """Why PyTorch's TransformerEncoder of ``layer`` cannot use its nested-tensor path
    (empty: it can), in PyTorch's words."""
    if not isinstance(layer, TransformerEncoderLayer):
        return "encoder_layer was not TransformerEncoderLayer"
    if layer.norm_first:
        return "encoder_layer.norm_first was True"
    if not layer.self_attn.batch_first:
        return ("encoder_layer.self_attn.batch_first was not True(use batch_first for better "
                "inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return "encoder_layer.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return "encoder_layer.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return "encoder_layer.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return "encoder_layer.self_attn.num_heads is odd"
    return ""


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in order, each attending to
    ``memory``, then ``norm`` if given. ``forward``'s arguments: those of
    :class:`TransformerDecoderLayer`; ``tgt_is_causal=None`` checks ``tgt_mask``."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError(f"TransformerDecoder: decoder_layer must be a Module, not "
                            f"{type(decoder_layer).__name__}")
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        output = tgt
        batch_first = getattr(getattr(self.layers[0], "self_attn", None), "batch_first", False)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal,
                                               _seq_len(tgt, batch_first))
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """The encoder-decoder Transformer ("Attention Is All You Need"): ``encoder`` (a
    :class:`TransformerEncoder` of ``num_encoder_layers`` with a final LayerNorm) and
    ``decoder`` (likewise), or ``custom_encoder`` / ``custom_decoder``. Every parameter of
    more than one dimension is then re-drawn with xavier_uniform_, as PyTorch's.

    ``forward(src [S, N, d_model], tgt [T, N, d_model], src_mask, tgt_mask, memory_mask,
    src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask, src_is_causal,
    tgt_is_causal, memory_is_causal)`` returns ``[T, N, d_model]`` (batch first with
    ``batch_first=True``).
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu,
                 custom_encoder: Any = None, custom_decoder: Any = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        batched = src.ndim == 3
        if batched and src.shape[0 if self.batch_first else 1] != tgt.shape[
                0 if self.batch_first else 1]:
            raise RuntimeError(f"the batch number of src and tgt must be equal, got src "
                               f"{list(src.shape)} and tgt {list(tgt.shape)} (batch_first="
                               f"{self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model "
                               f"({self.d_model}), got src {list(src.shape)} and tgt "
                               f"{list(tgt.shape)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None,
                                        dtype: Any = None) -> Tensor:
        """The causal mask ``[sz, sz]``: ``-inf`` above the diagonal, 0 elsewhere (the default
        float dtype by default, as PyTorch's)."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
