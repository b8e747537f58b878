"""Data types, and the one rule that decides the dtype of a mixed operation.

tinytrain's dtypes are NumPy's (``tt.float32 is np.dtype("float32")``). When an element-wise
op mixes dtypes, the result's dtype is :func:`result_type` of the operands, which is
PyTorch's ``torch.result_type``:

1. dtypes fall in categories ``bool < integer < floating``;
2. operands have priorities: tensors with dimensions, then 0-d tensors, then Python numbers;
3. the result comes from the highest-priority operands, and a lower-priority operand can
   only raise the *category*, not the size. A Python float raises an integer result to the
   default float dtype (:func:`get_default_dtype`: ``float32`` unless
   :func:`set_default_dtype` chose another).

So ``int64 tensor * 0.5`` is ``float32``, ``float16 tensor * 2.0`` stays ``float16``,
``uint8 tensor + 1`` stays ``uint8``, and ``float32 [3] + float64 0-d`` is ``float32``.
This differs from NumPy, whose ``int64 array * 0.5`` is ``float64`` and whose
``float16 + int16`` is ``float32``.

Ops then add their own step: true division and ``sqrt``-like ops turn an integer result
into the default float dtype (``int / int`` is ``float32``), comparisons compute in the
common dtype and return ``bool``. Python numbers out of the result's range wrap around as in PyTorch
(``uint8 tensor < -1`` compares with 255).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

float16, float32, float64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")
int8, int16, int32, int64 = (np.dtype(f"int{n}") for n in (8, 16, 32, 64))
uint8, bool_ = np.dtype("uint8"), np.dtype(bool)

#: What using ``tt.bfloat16`` says (as ``tt._missing``'s hint for the dtypes tinytrain lacks).
NO_BFLOAT16 = ("tinytrain has bool, uint8, int32, int64, float16, float32 and float64 tensors; "
               "no bfloat16 or complex")


class UnsupportedDTypeError(RecursionError):
    """A dtype tinytrain has a name for but no tensors of (``tt.bfloat16``) was used to make or
    convert a tensor. A RuntimeError, as PyTorch's errors; a RecursionError only because that
    is the one error NumPy lets out of ``np.dtype(obj)`` when ``obj.dtype`` raises (it hides
    the others and says "Cannot interpret ... as a data type"), see :class:`_BFloat16`."""


class _BFloat16:
    """``tt.bfloat16``: a name, so that ported scripts can mention it (nanoGPT's
    ``{'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': ...}[dtype]``,
    ``x.dtype == torch.bfloat16``), with torch.dtype's ``is_floating_point``, ``is_complex``,
    ``is_signed`` and ``itemsize``. tinytrain has no bfloat16 tensors, and refuses the dtype
    the moment a tensor would be made or converted with it.

    The refusal is one check, here: every place tinytrain (and NumPy, and CuPy) turns a
    ``dtype=`` argument into a dtype calls ``np.dtype(value)``, which reads ``value.dtype``;
    this object's ``dtype`` raises :class:`UnsupportedDTypeError` with the hint, so
    ``tt.tensor(x, dtype=tt.bfloat16)``, ``t.to(tt.bfloat16)``, ``tt.zeros(2, dtype=...)``
    and the rest all say what is wrong. Comparisons with real dtypes are False."""

    is_floating_point, is_complex, is_signed, itemsize = True, False, True, 2

    @property
    def dtype(self) -> np.dtype:
        raise UnsupportedDTypeError(f"tinytrain.bfloat16 cannot be used to make or convert a "
                                    f"tensor: {NO_BFLOAT16}; use tt.float32 (or tt.float16)")

    def __repr__(self) -> str:
        return "tinytrain.bfloat16"

    def __reduce__(self) -> str:
        return "bfloat16"


bfloat16 = _BFloat16()

#: The dtype Python floats become: read with get_default_dtype(), set with set_default_dtype().
_default_float = float32


def get_default_dtype() -> np.dtype:
    """The dtype Python floats become (``torch.get_default_dtype()``): what ``tt.tensor(1.5)``,
    ``int_tensor / 2``, the creation functions without ``dtype=`` (``zeros``, ``randn``,
    ``arange(0.0, 3.0)``, ...) and layers' new parameters are. ``float32`` unless
    :func:`set_default_dtype` chose another."""
    return _default_float


def set_default_dtype(dtype: np.dtype) -> None:
    """Make ``dtype`` (``tt.float16``, ``tt.float32`` or ``tt.float64``) the dtype Python floats
    become, for the whole process, as ``torch.set_default_dtype``: tensors made from Python
    floats, integer tensors turned floating (``/``, ``* 0.5``, ``exp``), creation functions
    without ``dtype=`` and parameters and buffers of layers made afterwards. Tensors that
    exist keep their dtype; NumPy arrays, ``tt.FloatTensor``, ``.float()`` and integer
    results (``arange(3)``, ``randint``) do not follow it. Other dtypes are refused, as in
    PyTorch (tinytrain has no bfloat16)."""
    global _default_float
    if dtype is bfloat16:
        bfloat16.dtype  # raises UnsupportedDTypeError with the hint  # noqa: B018
    if not isinstance(dtype, np.dtype):  # (as PyTorch: a dtype object, not a name or a type)
        raise TypeError(f"set_default_dtype({dtype!r}): invalid dtype object: only "
                        f"floating-point types are supported as the default type: "
                        f"tt.float16, tt.float32 or tt.float64 (tinytrain has no bfloat16)")
    if dtype not in (float16, float32, float64):
        raise TypeError(f"set_default_dtype({dtype}): only floating-point types are supported "
                        f"as the default type: tt.float16, tt.float32 or tt.float64")
    _default_float = dtype


class DTypeError(RuntimeError, TypeError):
    """Operand dtypes that do not go together. A RuntimeError as in PyTorch, and a TypeError."""


class DTypeNotImplementedError(DTypeError, NotImplementedError):
    """An op that has no kernel for a dtype (an integer tensor into a float-only activation):
    PyTorch's NotImplementedError (``"elu_cpu" not implemented for 'Long'``), and a
    DTypeError."""


#: PyTorch's scalar type names (``at::ScalarType``), which its error messages use.
_TORCH_SCALAR_NAMES = {"bool": "Bool", "int8": "Char", "int16": "Short", "int32": "Int",
                       "int64": "Long", "uint8": "Byte", "uint16": "UInt16",
                       "uint32": "UInt32", "uint64": "UInt64", "float16": "Half",
                       "float32": "Float", "float64": "Double", "complex64": "ComplexFloat",
                       "complex128": "ComplexDouble"}


def torch_scalar_name(dtype: Any) -> str:
    """PyTorch's name of ``dtype`` in its messages: ``int32 -> "Int"``, ``int64 -> "Long"``."""
    name = np.dtype(dtype).name
    return _TORCH_SCALAR_NAMES.get(name, name)


def _category(dtype: np.dtype) -> int:
    """0 for bool, 1 for integers, 2 for floating point."""
    kind = dtype.kind
    if kind == "b":
        return 0
    if kind in "iu":
        return 1
    if kind == "f":
        return 2
    raise DTypeError(f"tinytrain supports bool, integer and floating dtypes, not {dtype}")


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """The smallest dtype both ``a`` and ``b`` convert to (``torch.promote_types``).

    Across categories the higher category wins as it is (``int64, float16 -> float16``);
    within one, NumPy's rule (``uint8, int8 -> int16``; ``float16, float32 -> float32``).
    """
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """PyTorch's ``combine_categories``: ``lower`` only matters if its category is higher."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _category(higher) == 2:
        return higher
    if _category(higher) == 0 or _category(lower) == 2:
        return promote_types(higher, lower)
    return higher


def scalar_dtype(value: Any) -> np.dtype:
    """The dtype a Python (or NumPy) number stands for: bool, int64, or the default float."""
    if isinstance(value, bool | np.bool_):
        return bool_
    if isinstance(value, numbers.Integral):
        return int64
    if isinstance(value, numbers.Real):
        return _default_float
    raise DTypeError(f"expected a tensor or a real number, got {type(value).__name__}")


def result_type(*operands: Any) -> np.dtype:
    """The dtype of an element-wise op on ``operands`` (``torch.result_type``).

    ``operands`` are Tensors, arrays (treated as tensors) or Python/NumPy numbers ("weak":
    they only raise the category, see the module docstring).
    """
    dim = zero = weak = None
    for x in operands:
        dtype = getattr(x, "dtype", None)
        if dtype is None or isinstance(x, np.generic):
            weak = promote_types(weak, scalar_dtype(x)) if weak is not None else scalar_dtype(x)
        elif x.ndim:
            dim = promote_types(dim, dtype) if dim is not None else dtype
        else:
            zero = promote_types(zero, dtype) if zero is not None else dtype
    out = _combine(dim, _combine(zero, weak))
    if out is None:
        raise DTypeError("result_type needs at least one operand")
    return out


def can_cast(src: np.dtype, dst: np.dtype) -> bool:
    """May an op's ``src`` result be written into a ``dst`` tensor (``torch.can_cast``)?

    Only the category matters: not floating into integer or bool, not integer into bool.
    """
    return _category(src) <= _category(dst)


def scalar_in(value: Any, dtype: np.dtype, op: str) -> np.generic:
    """A number written into a tensor of ``dtype`` (``fill_``, ``masked_fill``, ``clamp``
    bounds, ``full``, ``tensor``): as PyTorch, a value the dtype cannot hold is an error, not a
    wrapped-around number (``fill_(300)`` of uint8 gave 44): NaN, inf or an out-of-range
    float into an integer dtype, an int outside the integer dtype's range, a finite number
    beyond a float dtype's largest. PyTorch's one exception: a negative int down to
    ``-max`` into an unsigned dtype wraps around (-1 into uint8 is 255)."""
    if dtype.kind in "iu" and not isinstance(value, bool | np.bool_):
        info = np.iinfo(dtype)
        if isinstance(value, numbers.Integral):
            low = -int(info.max) if dtype.kind == "u" else int(info.min)
            fits = low <= int(value) <= int(info.max)
        else:
            v = float(value)
            fits = math.isfinite(v) and int(info.min) <= v <= int(info.max)
    elif dtype.kind == "f" and not isinstance(value, bool | np.bool_):
        v = float(value)  # (inf and NaN are floats; a finite value must fit)
        fits = not math.isfinite(v) or abs(v) <= float(np.finfo(dtype).max)
    else:
        fits = True
    if not fits:
        raise RuntimeError(f"{op}: value {value!r} cannot be converted to type {dtype} "
                           f"without overflow")
    return scalar_array(value, dtype)


def scalar_array(value: Any, dtype: np.dtype) -> np.generic:
    """A Python number as a NumPy scalar of ``dtype``, wrapping out-of-range integers (an
    operand of arithmetic: ``uint8 + 300`` wraps in PyTorch too) and floats beyond the dtype
    becoming inf (``float16`` and ``-1e9``, an attention mask's value)."""
    try:
        with np.errstate(over="ignore"):
            return dtype.type(value)
    except OverflowError:  # e.g. uint8 and 300 or -1: wrap around, as PyTorch does
        return np.asarray(value).astype(dtype)[()]


class finfo:  # noqa: N801 (PyTorch's name)
    """The limits of a floating dtype, as ``torch.finfo`` (default: the default float dtype):
    ``bits``, ``eps`` (the gap above 1), ``max``, ``min``, ``tiny`` = ``smallest_normal``,
    ``resolution`` (``10 ** -decimal digits``), and ``dtype`` (its name), as Python numbers."""

    def __init__(self, type: Any = None) -> None:  # noqa: A002 (PyTorch's name)
        dtype = _default_float if type is None else _dtype_of(type, "finfo")
        if dtype.kind != "f":
            raise TypeError(f"finfo() requires a floating point input type, got {dtype}. "
                            f"Use iinfo to handle {dtype}")
        info = np.finfo(dtype)
        self.bits, self.dtype = int(info.bits), str(dtype)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 (PyTorch's name)
    """The limits of an integer dtype, as ``torch.iinfo``: ``bits``, ``max``, ``min`` (ints)
    and ``dtype`` (its name)."""

    def __init__(self, type: Any) -> None:  # noqa: A002 (PyTorch's name)
        dtype = _dtype_of(type, "iinfo")
        if dtype.kind not in "iu":
            raise TypeError(f"iinfo() requires an integer input type, got {dtype}. "
                            + ("bool has no iinfo" if dtype.kind == "b" else
                               f"Use finfo to handle {dtype}"))
        info = np.iinfo(dtype)
        self.bits, self.max, self.min = int(info.bits), int(info.max), int(info.min)
        self.dtype = str(dtype)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def _dtype_of(value: Any, who: str) -> np.dtype:
    """``value`` (a tinytrain dtype, a NumPy one, a name, ``tt.FloatTensor``) as a dtype."""
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise TypeError(f"{who}() takes a dtype such as tt.float32, got {value!r}")
    return dtype
