"""The connectionist temporal classification loss: ``F.ctc_loss`` and ``nn.CTCLoss``, as
PyTorch's.

CTC scores a label sequence ``l`` (length ``L``) against per-frame class log-probabilities
``log_probs [T, N, C]`` by summing over every alignment: a path of ``T`` frames that, once
repeats are merged and blanks dropped, spells ``l``. The sum runs over the *extended*
sequence ``l'`` (length ``S = 2L + 1``): a blank, ``l[0]``, a blank, ``l[1]``, ..., a blank.
The forward variable ``alpha[t, s]`` is the log-probability of the paths through frames
``0..t`` that end at ``l'[s]``:

    alpha[t, s] = log(e^alpha[t-1, s] + e^alpha[t-1, s-1] + e^alpha[t-1, s-2]) + lp[t, l'[s]]

(the ``s - 2`` term only where ``l'[s] != l'[s-2]``: a skip over a blank between two
different labels), started by the blank or the first label at ``t = 0``. The loss is
``-log(e^alpha[T-1, S-1] + e^alpha[T-1, S-2])``, ``inf`` where no path fits the frames (a
label sequence with repeats needs a blank between them). The backward variable ``beta`` is
the same recursion from the end, and the posterior of each (frame, class) is the sum over the
``s`` with ``l'[s] = c`` of ``exp(alpha + beta - lp + loss)``.

The gradient is PyTorch's: ``exp(lp) - posterior``, which is the gradient with respect to
the *logits* of a ``log_softmax`` (its backward then adds nothing, since the posterior of a
frame sums to 1), and so assumes ``log_probs`` are normalised, as PyTorch's does.

Every recursion is vectorised over the batch and over ``s`` (a Python loop over the frames
only), with the array module of the input: the same code on NumPy and CuPy. Each sample uses
its own ``input_lengths[n]`` frames and ``target_lengths[n]`` labels.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from tinytrain.autograd import Context, Function
from tinytrain.backend import get_array_module
from tinytrain.dtypes import DTypeNotImplementedError, torch_scalar_name
from tinytrain.tensor import Tensor

__all__ = ["ctc_loss"]

_WHERE = "(while checking arguments for ctc_loss)"


def _lse3(xp: Any, a: Any, b: Any, c: Any) -> Any:
    """``log(e^a + e^b + e^c)`` elementwise, PyTorch's way (the max taken out, 0 for an
    all ``-inf`` one, which stays ``-inf``)."""
    m = xp.maximum(xp.maximum(a, b), c)
    m = xp.where(m == -np.inf, 0, m)
    return xp.log(xp.exp(a - m) + xp.exp(b - m) + xp.exp(c - m)) + m


def _shift(xp: Any, a: Any, k: int) -> Any:
    """``a [N, S]`` moved ``k`` places along ``s`` (right for ``k > 0``), ``-inf`` in the
    places left empty."""
    out = xp.full_like(a, -np.inf)
    n = a.shape[1] - abs(k)
    if n > 0:
        if k > 0:
            out[:, k:] = a[:, :n]
        else:
            out[:, :n] = a[:, -k:]
    return out


class _Lattice:
    """The extended sequences of a batch and their per-frame log-probabilities: ``lpp [N, T,
    S]`` (``-inf`` past a sample's ``2 L + 1`` states), ``prime [N, S]`` the class of each
    state, ``skip [N, S]`` where the ``s - 2`` transition is allowed."""

    def __init__(self, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
                 blank: int) -> None:
        xp = self.xp = get_array_module(log_probs)
        steps, batch, _ = log_probs.shape
        size = 2 * targets.shape[1] + 1
        self.in_len, self.tg_len = input_lengths, target_lengths
        prime = xp.full((batch, size), blank, dtype=xp.int64)
        prime[:, 1::2] = targets
        s = xp.arange(size)
        self.valid = s[None, :] <= 2 * target_lengths[:, None]
        lpp = log_probs[xp.arange(steps)[None, :, None], xp.arange(batch)[:, None, None],
                        prime[:, None, :]]
        self.lpp = xp.where(self.valid[:, None, :], lpp, -np.inf)
        skip = xp.zeros((batch, size), dtype=bool)
        skip[:, 2:] = prime[:, 2:] != prime[:, :-2]
        self.prime, self.skip, self.s = prime, skip, s

    def alpha(self) -> Any:
        """``alpha [N, T, S]`` (rows past a sample's frames are computed and not used)."""
        xp, lpp = self.xp, self.lpp
        alpha = xp.full(lpp.shape, -np.inf, dtype=lpp.dtype)
        alpha[:, 0, :2] = lpp[:, 0, :2]
        for t in range(1, lpp.shape[1]):
            prev = alpha[:, t - 1]
            jump = xp.where(self.skip, _shift(xp, prev, 2), -np.inf)
            alpha[:, t] = _lse3(xp, prev, _shift(xp, prev, 1), jump) + lpp[:, t]
        return alpha

    def nll(self, alpha: Any) -> Any:
        """The loss ``[N]``: minus the log-likelihood at each sample's last frame."""
        xp, batch = self.xp, alpha.shape[0]
        rows = xp.arange(batch)
        last = alpha[rows, xp.maximum(self.in_len - 1, 0)]
        end = 2 * self.tg_len
        l1 = last[rows, end]
        l2 = xp.where(self.tg_len > 0, last[rows, xp.maximum(end - 1, 0)], -np.inf)
        m = xp.maximum(l1, l2)
        m = xp.where(m == -np.inf, 0, m)
        ll = xp.log(xp.exp(l1 - m) + xp.exp(l2 - m)) + m
        # no frame: the empty sequence has probability 1, any other 0
        ll = xp.where(self.in_len == 0, xp.where(self.tg_len == 0, 0.0, -np.inf), ll)
        return (-ll).astype(alpha.dtype)

    def beta(self) -> Any:
        """``beta [N, T, S]``: each sample's recursion started at its own last frame."""
        xp, lpp = self.xp, self.lpp
        steps = lpp.shape[1]
        beta = xp.full(lpp.shape, -np.inf, dtype=lpp.dtype)
        end = 2 * self.tg_len[:, None]
        ends = (self.s[None, :] == end) | (self.s[None, :] == end - 1)
        skip_ahead = xp.zeros_like(self.skip)  # skip[s + 2]: the jump from s + 2 back to s
        skip_ahead[:, :-2] = self.skip[:, 2:]
        nxt = xp.full((lpp.shape[0], lpp.shape[2]), -np.inf, dtype=lpp.dtype)
        for t in range(steps - 1, -1, -1):
            jump = xp.where(skip_ahead, _shift(xp, nxt, -2), -np.inf)
            step = _lse3(xp, nxt, _shift(xp, nxt, -1), jump) + lpp[:, t]
            first = xp.where(ends, lpp[:, t], -np.inf)
            last_frame = (self.in_len - 1 == t)[:, None]
            inside = (t < self.in_len - 1)[:, None]
            nxt = xp.where(last_frame, first, xp.where(inside, step, -np.inf))
            beta[:, t] = nxt
        return beta


class CTCLossFunction(Function):
    """``(log_probs [T, N, C], targets [N, L] int64 padded, input_lengths [N], target_lengths
    [N], blank, zero_infinity) -> loss [N]`` (arrays of the input's module; ``inf`` where
    no alignment exists, 0 with ``zero_infinity``). Backward recomputes ``alpha`` and
    computes ``beta`` (nothing big is kept between the passes)."""

    @staticmethod
    def forward(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
                blank: int, zero_infinity: bool) -> Any:
        lattice = _Lattice(log_probs, targets, input_lengths, target_lengths, blank)
        with np.errstate(divide="ignore", invalid="ignore"):
            nll = lattice.nll(lattice.alpha())
        if zero_infinity:
            nll = lattice.xp.where(nll == np.inf, 0, nll).astype(nll.dtype)
        return nll

    @staticmethod
    def setup_context(ctx: Context, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(inputs[0])
        ctx.args = inputs[1:]

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, ...]:
        (log_probs,) = ctx.saved_tensors
        targets, input_lengths, target_lengths, blank, zero_infinity = ctx.args
        lattice = _Lattice(log_probs, targets, input_lengths, target_lengths, blank)
        xp = lattice.xp
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            alpha = lattice.alpha()
            nll = lattice.nll(alpha)
            both = alpha + lattice.beta()
            reached = both != -np.inf  # (also false past a sample's states)
            post = xp.where(reached, xp.exp(xp.where(reached, both - lattice.lpp, 0)
                                             + nll[:, None, None]), 0)
            classes = xp.arange(log_probs.shape[2])
            one_hot = ((lattice.prime[:, :, None] == classes) & lattice.valid[:, :, None])
            occupancy = xp.matmul(post, one_hot.astype(post.dtype))  # [N, T, C]
            out = xp.exp(log_probs.transpose(1, 0, 2)) - occupancy
            impossible = (nll == np.inf)[:, None, None]
            out = xp.where(impossible, 0 if zero_infinity else np.nan, out)
            out = out * grad[:, None, None]
        frames = xp.arange(log_probs.shape[0])[None, :, None] < input_lengths[:, None, None]
        out = xp.where(frames, out, 0).astype(log_probs.dtype)
        return (xp.ascontiguousarray(out.transpose(1, 0, 2)),) + (None,) * 5


def _lengths(name: str, value: Any) -> list[int]:
    """``input_lengths`` / ``target_lengths`` as Python ints: an integer Tensor (any shape,
    0-d for one sample) or a tuple / list of ints."""
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iu":
            raise RuntimeError(f"{name} must be integral")
        return [int(v) for v in np.asarray(value.detach().cpu().numpy()).reshape(-1)]
    if not isinstance(value, tuple | list) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        raise TypeError(f"ctc_loss(): argument '{name}' must be a tuple of ints or a Tensor, "
                        f"got {value!r}")
    return [int(v) for v in value]


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The CTC loss of label sequences under per-frame class log-probabilities, as
    ``torch.nn.functional.ctc_loss``.

    ``log_probs [T, N, C]`` (or ``[T, C]``, one unbatched sample), normally a
    ``log_softmax`` over ``C``; ``targets`` the labels, ``[N, S]`` padded (sample ``n`` uses
    ``targets[n, :target_lengths[n]]``) or 1-D, every sample's concatenated; ``input_lengths``
    and ``target_lengths`` ``[N]``: integer Tensors, or tuples of ints. Class ``blank`` is
    the blank. ``reduction``: ``"none"`` the ``[N]`` losses (``[]`` unbatched), ``"sum"``,
    or ``"mean"``: each loss divided by its target length (at least 1), then averaged.
    A sample no alignment fits (too few frames) has loss ``inf`` and NaN gradients;
    ``zero_infinity=True`` makes both 0. The gradient (with respect to ``log_probs``) is
    PyTorch's, that of the logits under a ``log_softmax`` (see the module docstring). Not
    twice differentiable (nor is PyTorch's)."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    for what, value in (("log_probs", log_probs), ("targets", targets)):
        if not isinstance(value, Tensor):
            raise TypeError(f"ctc_loss(): argument '{what}' must be a Tensor, not "
                            f"{type(value).__name__}")
    if isinstance(input_lengths, Tensor) != isinstance(target_lengths, Tensor):
        raise TypeError("ctc_loss(): input_lengths and target_lengths must both be Tensors or "
                        "both tuples of ints")
    in_len = _lengths("input_lengths", input_lengths)
    tg_len = _lengths("target_lengths", target_lengths)
    if log_probs.dtype not in (np.float32, np.float64):
        raise DTypeNotImplementedError(
            f'"ctc_loss" not implemented for \'{torch_scalar_name(log_probs.dtype)}\' '
            f"(log_probs must be float32 or float64)")
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    if lp.ndim != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {lp.ndim}-dimensional "
                           f"tensor for argument #1 'log_probs' {_WHERE} (PyTorch's count, "
                           f"after adding a batch axis to input that is not 3-D: log_probs has "
                           f"shape {tuple(log_probs.shape)}; it must be [T, N, C], or [T, C] "
                           f"unbatched)")
    if targets.ndim not in (1, 2):
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.ndim}-dimensional "
                           f"tensor for argument #2 'targets' {_WHERE}")
    steps, batch, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"blank must be in label range (got blank={blank} for {classes} "
                           f"classes)")
    if len(in_len) != batch:
        raise RuntimeError(f"input_lengths must be of size batch_size ({batch}), got "
                           f"{len(in_len)}")
    if len(tg_len) != batch:
        raise RuntimeError(f"target_lengths must be of size batch_size ({batch}), got "
                           f"{len(tg_len)}")
    for name, lengths in (("target_lengths", tg_len), ("input_lengths", in_len)):
        low = min(lengths, default=0)
        if low < 0:
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value "
                               f"{low} {_WHERE}")
    longest = max(tg_len, default=0)
    if targets.ndim == 1:
        if targets.shape[0] != sum(tg_len):
            raise RuntimeError(f"Expected tensor to have size {sum(tg_len)} at dimension 0, "
                               f"but got size {targets.shape[0]} for argument #2 'targets' "
                               f"{_WHERE} (concatenated targets: the sum of target_lengths)")
    else:
        if targets.shape[0] != batch:
            raise RuntimeError(f"Expected tensor to have size {batch} at dimension 0, but got "
                               f"size {targets.shape[0]} for argument #2 'targets' {_WHERE}")
        if targets.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension "
                               f"1, but got size {targets.shape[1]} for argument #2 'targets' "
                               f"{_WHERE}")
    high = max(in_len, default=0)
    if high > steps:
        raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got "
                           f"value {high} {_WHERE}")
    xp = get_array_module(lp._data)
    tg = targets.detach().to(log_probs.device)._data.astype(xp.int64)  # (as torch: moved)
    lengths = xp.asarray(np.asarray(tg_len, dtype=np.int64))
    position = xp.arange(longest)[None, :]
    used = position < lengths[:, None]
    if targets.ndim == 1:  # each sample's labels from its offset in the concatenation
        offsets = xp.asarray(np.cumsum([0] + tg_len[:-1], dtype=np.int64))
        tg = tg[xp.minimum(offsets[:, None] + position, max(tg.shape[0] - 1, 0))]
    else:
        tg = tg[:, :longest]
    tg = xp.where(used, tg, blank) if longest else xp.zeros((batch, 0), dtype=xp.int64)
    if tg.size and bool(((tg < 0) | (tg >= classes)).any()):
        bad = int(tg[(tg < 0) | (tg >= classes)][0])
        raise IndexError(f"ctc_loss: target {bad} is out of bounds for {classes} classes")
    loss = CTCLossFunction.apply(lp, tg, xp.asarray(np.asarray(in_len, dtype=np.int64)),
                                 lengths, int(blank), bool(zero_infinity))
    if reduction == "mean":
        divisor = xp.maximum(lengths, 1).astype(loss._data.dtype)
        return (loss / Tensor(divisor)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)
