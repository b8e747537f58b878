"""How a tensor prints: PyTorch's formatter (``torch/_tensor_str.py``), so that a tinytrain
tensor prints as the same tensor in PyTorch does, digit for digit.

The rules, for floating tensors (with the default options: precision 4, threshold 1000,
edgeitems 3, linewidth 80):

- if every finite value is a whole number, they print as ``1., 2.`` ("int mode");
- otherwise with ``precision`` decimals (``0.2720``);
- scientific notation (``1.0000e-05``) when the largest and smallest nonzero finite
  magnitudes are more than 1000 apart, or the largest is over 1e8, or the smallest under 1e-4
  (``set_printoptions(sci_mode=True/False)`` forces it on or off);
- every value is padded to the widest one, and rows wrap at ``linewidth``;
- a tensor of more than ``threshold`` elements shows ``edgeitems`` rows at each end of
  every dimension with ``...`` between (its format is chosen from the values shown).

Integers and bools print as Python prints them. Suffixes follow the values as in PyTorch:
the device when not on the CPU, the dtype when it is not the default float dtype (float32
unless ``set_default_dtype`` chose another), int64 or bool (tinytrain spells it
``dtype=float64``, PyTorch ``dtype=torch.float64``), the size of an empty tensor
that is not 1-d, and ``grad_fn=<...>`` or ``requires_grad=True``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinytrain.dtypes import get_default_dtype

if TYPE_CHECKING:
    from tinytrain.tensor import Tensor


@dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrintOptions()
_PROFILES = {"default": _PrintOptions(), "short": _PrintOptions(precision=2, edgeitems=2),
             "full": _PrintOptions(threshold=math.inf)}


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print, as ``torch.set_printoptions``.

    ``profile`` (``"default"``, ``"short"``, ``"full"``) first resets the other options to
    that profile's; ``precision`` is the decimals, ``threshold`` the number of elements above
    which a tensor is summarised with ``...``, ``edgeitems`` the rows kept at each end, and
    ``linewidth`` where rows wrap. ``sci_mode`` True or False forces scientific notation on
    or off; as in PyTorch, every call sets it (None: chosen from the values).
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of "
                             f"{', '.join(map(repr, _PROFILES))}, got {profile!r}")
        for key, value in asdict(_PROFILES[profile]).items():
            setattr(PRINT_OPTS, key, value)
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"set_printoptions: {key} must be a non-negative number, "
                             f"got {value!r}")
        setattr(PRINT_OPTS, key, value)
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current options, as keyword arguments of :func:`set_printoptions`."""
    return asdict(PRINT_OPTS)


class _Formatter:
    """Chooses, from the values shown, one format and one width for every element."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        values = values.reshape(-1)
        if not self.floating:
            self.width = max([1, *(len(str(v)) for v in values.tolist())])
            return
        finite = values[np.isfinite(values) & (values != 0)]
        if finite.size == 0:
            return
        magnitude = np.abs(finite).astype(np.float64)
        low, high = magnitude.min(), magnitude.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = (high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
                         if PRINT_OPTS.sci_mode is None else PRINT_OPTS.sci_mode)
        p = PRINT_OPTS.precision
        if self.sci_mode:
            widths = (len(f"{v:.{p}e}") for v in finite.tolist())
        elif self.int_mode:
            widths = (len(f"{v:.0f}") + 1 for v in finite.tolist())  # (+1: the ".")
        else:
            widths = (len(f"{v:.{p}f}") for v in finite.tolist())
        self.width = max(widths)

    def format(self, value: Any) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{PRINT_OPTS.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{PRINT_OPTS.precision}f}"
        return text.rjust(self.width)


def _edges(array: Any, edgeitems: int) -> tuple[Any, tuple[bool, ...]]:
    """The summarised array: of every dimension longer than ``2 * edgeitems``, only the first
    and last ``edgeitems`` entries; and, per dimension, whether it was cut (an ``...``)."""
    cut = tuple(n > 2 * edgeitems for n in array.shape)
    for axis, is_cut in enumerate(cut):
        if is_cut:
            n = array.shape[axis]
            keep = list(range(edgeitems)) + list(range(n - edgeitems, n))
            array = array.take(keep, axis=axis)
    return array, cut


def _body(values: np.ndarray, cut: tuple[bool, ...], indent: int, fmt: _Formatter) -> str:
    """The bracketed values of an array (its summarised entries, ``cut`` as from _edges)."""
    if values.ndim == 0:
        return fmt.format(values.item())
    e = PRINT_OPTS.edgeitems
    if values.ndim == 1:
        if cut[0] and not e:
            items = ["..."]
        else:
            items = [fmt.format(v) for v in values.tolist()]
            if cut[0]:
                items[e:e] = [" ..."]
        per_line = max(1, (PRINT_OPTS.linewidth - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_body(row, cut[1:], indent + 1, fmt) for row in values]
    if cut[0]:
        rows[e:e] = ["..."]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _values_str(t: Tensor, indent: int) -> str:
    """``[...]`` of a non-empty tensor, summarised beyond ``threshold`` elements."""
    if t.numel() > PRINT_OPTS.threshold:
        array, cut = _edges(t._data, PRINT_OPTS.edgeitems)  # (on the tensor's device)
    else:
        array, cut = t._data, (False,) * t.ndim
    values = array if isinstance(array, np.ndarray) else array.get()
    return _body(values, cut, indent, _Formatter(values))


def tensor_repr(t: Tensor) -> str:
    """``tensor([...], <suffixes>)``, as PyTorch's ``repr`` of the same tensor."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device != "cpu":
        suffixes.append(f"device='cuda:{t._data.device.id}'")
    default_float = get_default_dtype()
    ordinary_dtype = t.dtype in (default_float, np.int64, np.bool_)
    if t.numel() == 0:
        body = "[]"
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype != default_float:  # (no values to tell an int64 tensor from a float one)
            suffixes.append(f"dtype={t.dtype}")
    else:
        body = _values_str(t, indent)
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(t.shape)}")
        if not ordinary_dtype:
            suffixes.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """``text, suffix, ...)``, a suffix going to a new line where it would pass linewidth.

    A dtype counts as PyTorch's longer spelling (``dtype=torch.int8``), so that lines break
    where PyTorch's do and the two texts differ only in that spelling."""
    parts = [text]
    line = len(text) - text.rfind("\n") + 1  # (PyTorch's count, one more than the line)
    for suffix in suffixes:
        width = len(suffix) + (len("torch.") if suffix.startswith("dtype=") else 0)
        if line + width + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line = indent + width
        else:
            parts.append(", " + suffix)
            line += width + 2
    return "".join(parts) + ")"
