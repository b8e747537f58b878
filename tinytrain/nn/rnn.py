"""Recurrent layers: RNNCell / LSTMCell / GRUCell (one time step) and RNN / LSTM / GRU (a whole
sequence, several layers, either direction), as PyTorch's.

Everything is built from differentiable tensor ops (``F.linear``, ``sigmoid``, ``tanh``,
``chunk``, ``stack``, ``cat``), so autograd does the backward through time and the same code
runs on NumPy and CuPy. The input projection ``x @ W_ih.T + b_ih`` of a layer is one matrix
product over all time steps; only ``h @ W_hh.T + b_hh`` and the gates run step by step.

The equations and gate order are PyTorch's, so a torch layer's ``state_dict()`` loads into
tinytrain's and gives the same outputs:

- RNN:  ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or ``relu``)
- LSTM: rows of ``W_ih`` / ``W_hh`` are the gates ``i, f, g, o``;
  ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')`` (then
  ``h' = W_hr h'`` with ``proj_size``)
- GRU:  rows are ``r, z, n``; ``r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)``, ``z`` alike,
  ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``

Parameters are named ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
``bias_hh_l{k}`` (and ``weight_hr_l{k}``), with the suffix ``_reverse`` for the backward
direction, in PyTorch's order, all drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))
with tinytrain's seeded generator.

The layers also take a ``nn.utils.rnn.PackedSequence`` (sequences of different lengths,
longest first, time-major without padding) and return one: a packed step holds fewer
sequences as the shorter ones end, so only the first rows of the state advance there, and
each sequence's final state is the one after its own last step (the reverse direction
starts there), as in PyTorch.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tinytrain.autograd.function import Function
from tinytrain.backend import get_array_module
from tinytrain.functions import cat, stack
from tinytrain.nn import functional as F
from tinytrain.nn import init
from tinytrain.nn.module import Module, Parameter, factory_tensor
from tinytrain.nn.utils.rnn import PackedSequence
from tinytrain.tensor import Tensor


def _check_tensor(owner: str, what: str, value: Any) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{owner}: {what} must be a Tensor, not {type(value).__name__}")


# ---------------------------------------------------------------- one time step, batched
# ``gi`` is the input projection ``x @ W_ih.T + b_ih`` of this step, ``[B, G * hidden]``.

def _rnn_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None,
              relu: bool) -> Tensor:
    pre = gi + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def _lstm_step(gi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None,
               w_hr: Tensor | None = None) -> tuple[Tensor, Tensor]:
    h, c = LSTMGates.apply(gi + F.linear(h, w_hh, b_hh), c, []).unbind(0)
    return (h if w_hr is None else F.linear(h, w_hr)), c


class LSTMGates(Function):
    """The element-wise part of an LSTM step in one node: the gates before their
    nonlinearities, ``pre [*, 4H]`` (rows ``i, f, g, o``), and the cell ``c [*, H]`` give
    ``[2, *, H]``: the new ``h`` and ``c``, stacked (a Function has one output)::

        c' = sigmoid(f) c + sigmoid(i) tanh(g),   h' = sigmoid(o) tanh(c')

    Written with tensor ops, that is eleven nodes per time step (``chunk``'s four, three
    sigmoids, two tanh, the products and the sum), and their Python cost is most of a
    small LSTM's step (``bench/rnn_cpu.py``). Here forward leaves the activated gates in the
    list ``keep`` (PyTorch keeps them too), and backward applies the chain rule by hand, with
    ``s' = s (1 - s)`` for a sigmoid and ``t' = 1 - t^2`` for a tanh::

        dc~ = dc + dh o (1 - tanh(c')^2)          (all of c's gradient)
        di = dc~ g i (1 - i),   df = dc~ c f (1 - f),   dg = dc~ i (1 - g^2)
        do = dh tanh(c') o (1 - o),   dc_prev = dc~ f
    """

    @staticmethod
    def forward(pre, c, keep):
        xp = get_array_module(pre)
        hidden = c.shape[-1]
        if pre.shape[-1] != 4 * hidden or pre.shape[:-1] != c.shape[:-1]:
            raise ValueError(f"LSTM gates: expected gates [*, {4 * hidden}] for a cell state "
                             f"{list(c.shape)}, got {list(pre.shape)}")
        dtype = xp.result_type(pre, c)
        act = xp.empty(pre.shape, dtype=dtype)
        _sigmoid(xp, pre[..., : 2 * hidden], act[..., : 2 * hidden])  # i, f
        xp.tanh(pre[..., 2 * hidden : 3 * hidden], out=act[..., 2 * hidden : 3 * hidden])
        _sigmoid(xp, pre[..., 3 * hidden :], act[..., 3 * hidden :])  # o
        i, f, g, o = _gates(act, hidden)
        out = xp.empty((2, *c.shape), dtype=dtype)
        xp.multiply(f, c, out=out[1])
        out[1] += i * g
        xp.tanh(out[1], out=out[0])
        out[0] *= o
        keep[:] = [act]
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        pre, c, keep = inputs
        ctx.act = keep[0]
        ctx.save_for_backward(pre, c, output)

    @staticmethod
    def backward(ctx, grad):
        _, c, out = ctx.saved_tensors
        xp = get_array_module(c)
        i, f, g, o = _gates(ctx.act, c.shape[-1])
        dh, dc = grad[0], grad[1]
        tc = xp.tanh(out[1])  # tanh(c')
        dct = dh * o
        dct *= 1 - tc * tc
        dct += dc
        d_pre = xp.empty(ctx.act.shape, dtype=ctx.act.dtype)
        di, df, dg, do = _gates(d_pre, c.shape[-1])
        xp.multiply(dct * g, i * (1 - i), out=di)
        xp.multiply(dct * c, f * (1 - f), out=df)
        xp.multiply(dct * i, 1 - g * g, out=dg)
        xp.multiply(dh * tc, o * (1 - o), out=do)
        needs = ctx.needs_input_grad
        return (d_pre if needs[0] else None), (dct * f if needs[1] else None), None

    @staticmethod
    def backward_graph(ctx, grad, saved):
        pre, c, _ = saved
        i, f, g, o = pre.chunk(4, -1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        tc = (f * c + i * g).tanh()
        dh, dc = grad[0], grad[1]
        dct = dc + dh * o * (1 - tc * tc)
        d_pre = cat([dct * g * i * (1 - i), dct * c * f * (1 - f), dct * i * (1 - g * g),
                     dh * tc * o * (1 - o)], -1)
        return d_pre, dct * f, None


def _gates(a: Any, hidden: int) -> tuple[Any, Any, Any, Any]:
    """The four ``[*, H]`` gate blocks ``i, f, g, o`` of ``a [*, 4H]`` (views)."""
    return tuple(a[..., k * hidden : (k + 1) * hidden] for k in range(4))  # type: ignore[return-value]


def _sigmoid(xp: Any, a: Any, out: Any) -> None:
    """``out = 1 / (1 + exp(-a))``, in place in ``out``."""
    xp.negative(a, out=out)
    with np.errstate(over="ignore"):  # (exp(-a) = inf below a = -88: sigmoid 0, as it is)
        xp.exp(out, out=out)
    out += 1
    xp.reciprocal(out, out=out)


def _gru_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return (1 - z) * n + z * h


# ---------------------------------------------------------------- cells

class RNNCellBase(Module):
    """What the three cells share: ``weight_ih [chunks * hidden, input]``,
    ``weight_hh [chunks * hidden, hidden]``, ``bias_ih`` / ``bias_hh [chunks * hidden]``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(factory_tensor(name, (num_chunks * hidden_size, input_size),
                                                  device=device, dtype=dtype))
        self.weight_hh = Parameter(factory_tensor(name, (num_chunks * hidden_size, hidden_size),
                                                  device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(factory_tensor(name, (num_chunks * hidden_size,),
                                                    device=device, dtype=dtype))
            self.bias_hh = Parameter(factory_tensor(name, (num_chunks * hidden_size,),
                                                    device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every parameter again from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, x: Tensor, states: tuple[Tensor | None, ...], hidden_names: tuple[str, ...]
                 ) -> tuple[Tensor, list[Tensor], bool]:
        """Checks as PyTorch's; returns ``x [B, input]``, the states ``[B, hidden]`` (zeros
        where None) and whether the input was batched."""
        name = type(self).__name__
        _check_tensor(name, "input", x)
        if x.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {x.ndim}D instead")
        for what, h in zip(hidden_names, states, strict=True):
            if h is not None:
                _check_tensor(name, "hidden state", h)
                if h.ndim not in (1, 2):
                    raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.ndim}D "
                                     f"instead")
        batched = x.ndim == 2
        if not batched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected "
                               f"{self.input_size}")
        if x.dtype != self.weight_ih.dtype:
            raise RuntimeError(f"{name}: the input is {x.dtype}, the weights "
                               f"{self.weight_ih.dtype}; convert one with .to(dtype)")
        out = []
        for k, h in enumerate(states):
            if h is None:
                h = x.new_zeros((x.shape[0], self.hidden_size))
            elif not batched:
                h = h.unsqueeze(0)
            if h.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{k} "
                                   f"batch size {h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.shape[1]}, "
                                   f"expected {self.hidden_size}")
            if h.dtype != x.dtype:
                raise RuntimeError(f"{name}: the hidden state is {h.dtype}, the input "
                                   f"{x.dtype}; convert one with .to(dtype)")
            out.append(h)
        return x, out, batched


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)`` (or ``relu``).

    ``input [B, input_size]`` (or unbatched ``[input_size]``), ``hx [B, hidden_size]``
    (zeros if None) -> ``h' [B, hidden_size]``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, (h,), batched = self._prepare(input, (hx,), ("hidden",))
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (gates ``i, f, g, o`` in the rows of the weights).

    ``input [B, input_size]`` (or ``[input_size]``), ``hx = (h, c)``, each
    ``[B, hidden_size]`` (zeros if None) -> ``(h', c')``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None  # noqa: A002
                ) -> tuple[Tensor, Tensor]:
        if hx is None:
            hx = (None, None)
        elif isinstance(hx, Tensor) or len(hx) != 2:
            raise TypeError("LSTMCell: hx must be a tuple (h_0, c_0) of two tensors")
        x, (h, c), batched = self._prepare(input, tuple(hx), ("hx[0]", "hx[1]"))
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (gates ``r, z, n``; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).

    ``input [B, input_size]`` (or ``[input_size]``), ``hx [B, hidden_size]`` (zeros if
    None) -> ``h' [B, hidden_size]``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, (h,), batched = self._prepare(input, (hx,), ("hidden",))
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh)
        return h if batched else h.squeeze(0)


# ---------------------------------------------------------------- whole sequences

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters of every layer and direction, the
    argument checks and the loop over layers, directions and time steps."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: "
                            f"{type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        directions = 2 if bidirectional else 1
        name = type(self).__name__
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                shapes = [(gate_size, layer_input), (gate_size, real_hidden)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    shapes += [(gate_size,), (gate_size,)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    shapes.append((proj_size, hidden_size))
                    names.append("weight_hr_l{}{}")
                suffix = "_reverse" if direction == 1 else ""
                names = [n.format(layer, suffix) for n in names]
                for n, shape in zip(names, shapes, strict=True):
                    setattr(self, n, Parameter(factory_tensor(name, shape, device=device,
                                                              dtype=dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every parameter again from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def _flat_weights(self) -> list[Parameter]:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters of each layer and direction, as lists in PyTorch's order."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch packs the weights into one buffer for cuDNN; tinytrain's
        layers use the parameters as they are."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # -------------------------------------------------------------- forward

    def _check_input(self, x: Tensor) -> None:
        if x.dtype != self._flat_weights[0].dtype:
            w = self._flat_weights[0].dtype
            raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype ({w}). "
                             f"Convert input: input.to({w}), or convert model: "
                             f"model.to({x.dtype})")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")

    def _expected_hidden(self, batch: int, size: int) -> tuple[int, int, int]:
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def _check_hidden(self, h: Tensor, expected: tuple[int, int, int], x: Tensor,
                      msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(h.shape) != expected:
            raise RuntimeError(msg.format(expected, list(h.shape)))
        if h.dtype != x.dtype:
            raise RuntimeError(f"{type(self).__name__}: the hidden state is {h.dtype}, the "
                               f"input {x.dtype}; convert one with .to(dtype)")
        if h.device != x.device:
            raise RuntimeError(f"{type(self).__name__}: the hidden state is on {h.device}, "
                               f"the input on {x.device}; move one with .to(device)")

    def _sequence(self, input: Tensor | PackedSequence  # noqa: A002
                  ) -> tuple[Tensor, bool, list[int] | None]:
        """``(x, batched, batch_sizes)``: ``x [T, B, input_size]``, time-major, or for a
        PackedSequence its ``data [N, input_size]`` and its batch sizes as a list."""
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            x = input.data
            _check_tensor(name, "the PackedSequence's data", x)
            if x.ndim != 2:
                raise RuntimeError(f"input must have 2 dimensions, got {x.ndim}")
            self._check_input(x)
            return x, True, [int(n) for n in input.batch_sizes.tolist()]
        _check_tensor(name, "input", input)
        if input.ndim not in (2, 3):
            tail = " tensor instead" if self.mode.startswith("RNN") else " instead"
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D{tail}")
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(0 if self.batch_first else 1)
        if self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        self._check_input(x)
        return x, batched, None

    def _initial(self, input: Any, x: Tensor, batched: bool,  # noqa: A002
                 batch_sizes: list[int] | None, hx: list[Tensor] | None, sizes: list[int],
                 messages: list[str]) -> list[Tensor]:
        """The initial states ``[layers * directions, B, size]`` (zeros for None), checked,
        and in the sorted order of a PackedSequence."""
        batch = batch_sizes[0] if batch_sizes is not None else x.shape[1]
        expected = [self._expected_hidden(batch, size) for size in sizes]
        if hx is None:
            return [x.new_zeros(e) for e in expected]
        if not batched:
            hx = [h.unsqueeze(1) for h in hx]
        for h, e, msg in zip(hx, expected, messages, strict=True):
            self._check_hidden(h, e, x, msg)
        if isinstance(input, PackedSequence) and input.sorted_indices is not None:
            hx = [h.index_select(1, input.sorted_indices.to(h.device)) for h in hx]
        return hx

    def _results(self, input: Any, out: Tensor, finals: list[Tensor],  # noqa: A002
                 batched: bool) -> tuple[Any, list[Tensor]]:
        """The output in the input's layout (a PackedSequence for one) and the final states
        in the caller's order."""
        if isinstance(input, PackedSequence):
            if input.unsorted_indices is not None:
                finals = [f.index_select(1, input.unsorted_indices.to(f.device)) for f in finals]
            return PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                  input.unsorted_indices), finals
        if self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            return out.squeeze(0 if self.batch_first else 1), [f.squeeze(1) for f in finals]
        return out, finals

    def _run(self, x: Tensor, states: list[Tensor], batch_sizes: list[int] | None
             ) -> tuple[Tensor, list[Tensor]]:
        """The stack of layers over ``x`` (``[T, B, input]``, or packed ``[N, input]``) from
        ``states`` (each ``[layers * directions, B, *]``): the last layer's output (``[T, B,
        directions * H]`` or ``[N, directions * H]``) and the final states, stacked as the
        initial ones."""
        directions = 2 if self.bidirectional else 1
        finals: list[list[Tensor]] = [[] for _ in states]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                weights = [getattr(self, n) for n in self._all_weights[k]]
                out, last = self._direction(x, [s[k] for s in states], weights, direction == 1,
                                            batch_sizes)
                outs.append(out)
                for f, s in zip(finals, last, strict=True):
                    f.append(s)
            x = outs[0] if directions == 1 else cat(outs, -1)
        return x, [stack(f) for f in finals]

    def _direction(self, x: Tensor, state: list[Tensor], weights: list[Tensor], reverse: bool,
                   batch_sizes: list[int] | None) -> tuple[Tensor, list[Tensor]]:
        """One layer in one direction: its outputs in time order and the states after the
        last step it takes (the first time step when ``reverse``). At a packed step with
        fewer sequences (the longest come first) only the first rows of the state advance:
        each sequence's state stops at its own length, and the reverse direction starts
        there."""
        w_ih, w_hh = weights[0], weights[1]
        b_ih, b_hh = (weights[2], weights[3]) if self.bias else (None, None)
        w_hr = weights[-1] if self.proj_size > 0 else None
        gi = F.linear(x, w_ih, b_ih)  # the input projection of every step at once
        gis = gi.unbind(0) if batch_sizes is None else gi.split(batch_sizes)
        step: Callable[..., list[Tensor]]
        if self.mode == "LSTM":
            step = lambda g, h, c: list(_lstm_step(g, h, c, w_hh, b_hh, w_hr))  # noqa: E731
        elif self.mode == "GRU":
            step = lambda g, h: [_gru_step(g, h, w_hh, b_hh)]  # noqa: E731
        else:
            relu = self.mode == "RNN_RELU"
            step = lambda g, h: [_rnn_step(g, h, w_hh, b_hh, relu)]  # noqa: E731
        outs: list[Tensor] = [None] * len(gis)  # type: ignore[list-item]
        for t in (range(len(gis) - 1, -1, -1) if reverse else range(len(gis))):
            n = gis[t].shape[0]
            if n == state[0].shape[0]:
                state = step(gis[t], *state)
                outs[t] = state[0]
            else:
                new = step(gis[t], *(s[:n] for s in state))
                state = [cat([a, s[n:]]) for a, s in zip(new, state, strict=True)]
                outs[t] = new[0]
        return (stack(outs) if batch_sizes is None else cat(outs)), state

    def _forward_single(self, input: Tensor | PackedSequence, hx: Tensor | None  # noqa: A002
                        ) -> tuple[Any, Tensor]:
        """RNN and GRU: one state ``h``."""
        if hx is not None:
            _check_tensor(type(self).__name__, "hx", hx)
            if isinstance(input, Tensor) and input.ndim == 2 and hx.ndim != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                   f"{hx.ndim}-D tensor")
            if isinstance(input, Tensor) and input.ndim == 3 and hx.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{hx.ndim}-D tensor")
        x, batched, batch_sizes = self._sequence(input)
        states = self._initial(input, x, batched, batch_sizes, None if hx is None else [hx],
                               [self.hidden_size], ["Expected hidden size {}, got {}"])
        out, finals = self._run(x, states, batch_sizes)
        out, (h_n,) = self._results(input, out, finals, batched)
        return out, h_n


class RNN(RNNBase):
    """A multi-layer Elman RNN, ``h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh)`` (or
    ``relu`` with ``nonlinearity="relu"``).

    ``input [T, B, input_size]`` (``[B, T, input_size]`` with ``batch_first``, or unbatched
    ``[T, input_size]``), ``hx [num_layers * directions, B, hidden_size]`` (zeros if None)
    -> ``(output [T, B, directions * hidden_size], h_n)`` with ``h_n`` shaped as ``hx``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                             f"or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None  # noqa: A002
                ) -> tuple[Any, Tensor]:
        return self._forward_single(input, hx)


class GRU(RNNBase):
    """A multi-layer GRU (gates ``r, z, n``, PyTorch's
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``).

    Shapes as :class:`RNN`: ``(output, h_n)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None  # noqa: A002
                ) -> tuple[Any, Tensor]:
        return self._forward_single(input, hx)


class LSTM(RNNBase):
    """A multi-layer LSTM (gates ``i, f, g, o``); with ``proj_size > 0`` each step's ``h`` is
    projected by ``weight_hr_l{k} [proj_size, hidden_size]``.

    ``input`` as :class:`RNN`'s, ``hx = (h_0, c_0)``: ``h_0 [num_layers * directions, B,
    proj_size or hidden_size]``, ``c_0 [num_layers * directions, B, hidden_size]`` (zeros if
    None) -> ``(output [T, B, directions * (proj_size or hidden_size)], (h_n, c_n))``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor | PackedSequence,  # noqa: A002
                hx: tuple[Tensor, Tensor] | None = None) -> tuple[Any, tuple[Tensor, Tensor]]:
        name = type(self).__name__
        if hx is not None:
            if isinstance(hx, Tensor) or not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0) of two tensors, got "
                                f"{type(hx).__name__}")
            for h in hx:
                _check_tensor(name, "hx", h)
        x, batched, batch_sizes = self._sequence(input)
        if hx is not None and isinstance(input, Tensor):
            want = 3 if batched else 2
            if hx[0].ndim != want or hx[1].ndim != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but "
                                   f"got ({hx[0].ndim}-D, {hx[1].ndim}-D) tensors")
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        states = self._initial(input, x, batched, batch_sizes, None if hx is None else list(hx),
                               [real_hidden, self.hidden_size],
                               ["Expected hidden[0] size {}, got {}",
                                "Expected hidden[1] size {}, got {}"])
        out, finals = self._run(x, states, batch_sizes)
        out, (h_n, c_n) = self._results(input, out, finals, batched)
        return out, (h_n, c_n)
