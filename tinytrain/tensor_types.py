"""PyTorch's legacy tensor types (``tt.FloatTensor``, ``tt.LongTensor``, ...), which older
tutorials and torchvision still use. Each stands for one dtype, as in PyTorch:

- ``isinstance(t, tt.FloatTensor)`` is True when ``t`` is a float32 Tensor;
- ``t.type(tt.FloatTensor)`` (or ``t.type("torch.FloatTensor")``) converts to float32;
- ``tt.FloatTensor([1, 2])`` makes a float32 tensor of the data, ``tt.FloatTensor(2, 3)``
  one of that shape (zeros: tinytrain has no uninitialised memory), ``tt.FloatTensor()`` an
  empty one. A tuple of ints is a shape, as ``torch.Size`` is in PyTorch: tinytrain's
  ``x.size()`` and ``x.shape`` are plain tuples, and the legacy idiom
  ``tt.FloatTensor(x.size())`` must make a tensor of x's shape, not one holding its sizes
  (data given as a tuple, ``(2, 3)``, is the one case read differently from PyTorch).

They are not subclasses of :class:`~tinytrain.tensor.Tensor`: every tinytrain tensor is a
``Tensor``, and these names only check and choose its dtype. (They carry a ``dtype``
attribute, so NumPy, and with it every ``dtype=`` argument of tinytrain, reads them as it.)
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from tinytrain.dtypes import bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from tinytrain.tensor import Tensor, empty, tensor


class TensorType(type):
    """The type of ``tt.FloatTensor`` and its siblings (``torch.tensortype``)."""

    dtype: np.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        if (len(args) == 1 and type(args[0]) is tuple and args[0]
                and all(isinstance(a, numbers.Integral) for a in args[0])):
            args = args[0]  # x.size() / x.shape: a shape (tinytrain's sizes are tuples)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=cls.dtype, device=device) if args else tensor(
                [], dtype=cls.dtype, device=device)
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}(): give one sequence of data or the sizes as "
                            f"ints, got {', '.join(type(a).__name__ for a in args)}")
        data = args[0]
        if isinstance(data, Tensor) and data.dtype != cls.dtype:  # (PyTorch refuses it too)
            raise TypeError(f"{cls.__name__}(): a {data.dtype} Tensor is not a {cls.__name__}; "
                            f"convert it with t.type(tt.{cls.__name__})")
        if isinstance(data, str | bytes | dict):
            raise TypeError(f"{cls.__name__}(): invalid data type {type(data).__name__!r}")
        return tensor(data, dtype=cls.dtype, device=device)

    def __repr__(cls) -> str:
        return f"<class 'tinytrain.{cls.__name__}'>"


def _type(name: str, dtype: np.dtype) -> TensorType:
    return TensorType(name, (), {"dtype": dtype, "__doc__": f"A {dtype} Tensor (PyTorch's "
                                                            f"legacy name)."})


FloatTensor = _type("FloatTensor", float32)
DoubleTensor = _type("DoubleTensor", float64)
HalfTensor = _type("HalfTensor", float16)
LongTensor = _type("LongTensor", int64)
IntTensor = _type("IntTensor", int32)
ByteTensor = _type("ByteTensor", uint8)
BoolTensor = _type("BoolTensor", bool_)
CharTensor = _type("CharTensor", int8)
ShortTensor = _type("ShortTensor", int16)

#: ``"torch.FloatTensor"`` -> FloatTensor, ... (``t.type("torch.FloatTensor")``).
BY_NAME = {f"{prefix}.{t.__name__}": t for t in (FloatTensor, DoubleTensor, HalfTensor,
                                                 LongTensor, IntTensor, ShortTensor, CharTensor,
                                                 ByteTensor, BoolTensor)
           for prefix in ("torch", "tinytrain")}

__all__ = ["BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor",
           "HalfTensor", "IntTensor", "LongTensor", "ShortTensor", "TensorType"]
