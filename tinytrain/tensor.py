"""``Tensor``: an array on a device, plus what autograd needs.

A Tensor wraps one array of its device's module (``numpy`` on ``"cpu"``,
``cupy`` on ``"cuda"``) and adds:

* ``requires_grad`` and, after ``backward()``, ``grad`` (itself a Tensor);
* ``grad_fn``: the graph node of the op that made it (None for leaves);
* ``_version``: a counter that in-place ops bump, shared by tensors that share
  memory (views, ``detach()``), so that backward can refuse values that changed
  after an op saved them.

Every op is a :class:`~tinytrain.autograd.Function`; the methods here only
check their arguments, apply the one dtype rule (:func:`tinytrain.dtypes.result_type`)
and call ``Function.apply``. In-place ops (``add_``, ``x += y``, ``x[i] = v``, ...)
all go through :meth:`Tensor._inplace`.

``.data``, as PyTorch's. ``t.data`` is a new Tensor on ``t``'s memory (the same array,
no copy) that does not require grad, has no ``grad_fn`` and keeps its own version
counter: in-place writes through it (``p.data.add_(g, alpha=-lr)``,
``m.weight.data.normal_(0, 0.02)``) change ``t``'s values without autograd seeing them, so
a backward that saved ``t`` runs on the new values, as in PyTorch. Assigning
(``t.data = other``, a Tensor or an array) gives ``t`` other memory and bumps ``t``'s
version, so a backward that saved the old values raises (PyTorch's runs on the new ones);
``t.data += 1`` writes in place and puts the same memory back, which is not a new one.
The raw NumPy/CuPy array is ``t._data`` inside the package; users get it with
``t.numpy()`` on the CPU (or ``np.asarray(t)``).
"""

from __future__ import annotations

import builtins
import copy
import functools
import math
import numbers
import operator
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from tinytrain import _missing, _numpy_names, backend, printing, return_types
from tinytrain._func_state import check_write as _func_check_write
from tinytrain._func_state import levels as _func_levels
from tinytrain.autograd import engine, function, gradients
from tinytrain.autograd import ops as O
from tinytrain.autograd.function import (
    AccumulateGrad,
    Function,
    Node,
    input_shapes,
    on_one_device,
)
from tinytrain.autograd.grad_mode import is_grad_enabled, no_grad
from tinytrain.autograd.ops import IndexRangeError, InvalidArgument, ShapeError
from tinytrain.dtypes import (
    DTypeError,
    DTypeNotImplementedError,
    bool_,
    can_cast,
    float16,
    float32,
    float64,
    get_default_dtype,
    int32,
    int64,
    promote_types,
    result_type,
    scalar_array,
    scalar_in,
    torch_scalar_name,
    uint8,
)
from tinytrain.printing import set_printoptions
from tinytrain.random import numpy_generator

#: What ``max(dim)`` / ``min(dim)`` return: a named pair, ``tinytrain.return_types.max``.
MaxResult = return_types.max
MinResult = return_types.min
SortResult = return_types.sort
TopkResult = return_types.topk
MedianResult = return_types.median

_LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
#: Whether ``float()`` of a tensor that requires grad still warns (once per process, as
#: PyTorch's ``TORCH_WARN_ONCE``).
_SCALAR_WARNING = [True]


class FlagError(RuntimeError, TypeError):
    """A flag that must be a bool got another value (``t.requires_grad = 1``): PyTorch's
    RuntimeError, and the TypeError tinytrain raised."""


def _int_tuple(fn: str, name: str, value: Any) -> tuple[int, ...]:
    """An int or a sequence of ints (0-d integer tensors too) as a tuple, else PyTorch's
    TypeError naming the argument."""
    items = value.tolist() if isinstance(value, Tensor) else value
    items = items if isinstance(items, list | tuple) else (items,)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, builtins.bool)
               for v in items):
        raise TypeError(f"{fn}(): argument '{name}' must be tuple of ints, not "
                        f"{type(value).__name__} ({value!r})")
    return tuple(int(v) for v in items)


def _int_dim_arg(fn: str, name: str, value: Any) -> None:
    """PyTorch's TypeError for an argument ``name`` that must be one int."""
    if isinstance(value, builtins.bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(value).__name__}")


def _int_dim(fn: str, dim: Any) -> None:
    """PyTorch's TypeError for a ``dim`` that must be one int (not a tuple or list)."""
    _int_dim_arg(fn, "dim", dim)


class _Rearranged(NamedTuple):
    """A view that holds all of ``parent``, rearranged: ``view.reshape(-1)[order]`` is the
    parent's elements in its own row-major order. An in-place op with autograd on the view
    writes the parent whole from it (``parent.copy_``), so the parent's graph records it."""

    parent: Tensor
    order: Tensor


class RemovableHandle:
    """Returned by ``register_*_hook``; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict[int, Any], extra_dict: Any = None) -> None:
        self._hooks = hooks
        # dicts that also hold this hook's id (its options: with_kwargs, always_call)
        self._extra = [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict or ())
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        for hooks in (self._hooks, *self._extra):
            hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _accumulates_in_float32(method: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A reduction of a float16 tensor computed in float32 and cast back, as PyTorch
    accumulates them (``std`` of [0, 1e4] overflows float16 on the way)."""
    @functools.wraps(method)
    def reduction(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if self.dtype == np.float16 and kwargs.get("dtype") is None:  # (dtype= decides)
            return method(self.float(), *args, **kwargs).to(dtype=self.dtype)
        return method(self, *args, **kwargs)

    return reduction


def _warn_user(message: str) -> None:
    """A UserWarning that points at the line that called into tinytrain (the user's), however
    many of tinytrain's own frames lie between (``nn.functional._warn`` is this one)."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tinytrain"):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def _saved_output_is(out: Tensor, target: Tensor) -> None:
    """An in-place op ran out of place into ``out``, then wrote it into ``target``: if its
    node saved its output (``sigmoid_``, ``exp_``), that is ``target`` from now on, so a later
    in-place write to ``target`` makes its backward raise, as PyTorch's (the version check
    follows ``target``'s counter)."""
    ctx = getattr(out.grad_fn, "ctx", None)
    versions = getattr(ctx, "_versions", None)
    if not versions:
        return
    old, counter = out._version_counter, target._version_counter
    ctx._versions = tuple(e if e is None or e[0] is not old else (counter, counter[0], *e[2:])
                          for e in versions)


def _alias(array: Any) -> Any:
    """A new array object on ``array``'s memory (NumPy's and CuPy's ``view()``)."""
    view = getattr(array, "view", None)
    return array if view is None else view()


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """True if ``shape`` broadcasts to ``target`` (as a value written there)."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


class Tensor:
    """An n-dimensional array on ``"cpu"`` or ``"cuda"`` that can record gradients."""

    __array_priority__ = 1000  # make ``ndarray + Tensor`` call Tensor.__radd__

    # defaults shared by every instance until set (creating a tensor is on the hot path)
    _grad: Tensor | None = None
    grad_fn: Node | None = None
    _requires_grad: bool = False
    _acc_ref: Callable[[], AccumulateGrad | None] = staticmethod(lambda: None)  # (weak)
    _base: Tensor | None = None  # the tensor whose memory this one is a view of
    # A recorded view: how it was made (Function, inputs, their shapes then) and the
    # version it was made at (see _refresh_view).
    _view_replay: tuple[Any, tuple[Any, ...], tuple[Any, ...]] | None = None
    _view_version: int = 0
    _view_without_grad: bool = False  # a view made under no_grad: never written with autograd
    _post_accumulate_grad_hooks: Mapping[int, Callable[[Tensor], None]] = MappingProxyType({})
    _grad_hooks: Mapping[int, Callable[[Tensor], Any]] = MappingProxyType({})  # a leaf's

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        if not isinstance(requires_grad, bool | np.bool_):
            raise TypeError(f"Tensor(data, requires_grad) wraps data; got requires_grad="
                            f"{requires_grad!r}. For a new tensor of a shape, use tt.zeros(...) "
                            "or tt.empty(...); for data, tt.tensor(data)")
        counter = None
        if type(data) is not np.ndarray:
            if isinstance(data, Tensor):
                data, counter = data._data, data._version_counter  # same memory, same counter
            elif isinstance(data, np.generic):
                data = np.asarray(data)
            elif isinstance(data, list | tuple):  # the legacy constructor torch.Tensor([1, 2]):
                data = np.asarray(data)            # numbers become the default float dtype
                data = data.astype(get_default_dtype() if data.dtype.kind in "biuf"
                                   else data.dtype, copy=False)
            elif not (isinstance(data, np.ndarray)
                      or hasattr(type(data), "__cuda_array_interface__")):  # CuPy
                data = np.asarray(data, dtype=_default_dtype(data))  # numbers: floats, int64
        self._data = data
        self._version_counter = counter if counter is not None else [0]
        if _func_levels:  # inside a tinytrain.func transform: it learns what is new
            _func_levels[-1].born(data)
        if requires_grad:
            if data.dtype.kind != "f":
                raise DTypeError(f"Only Tensors of floating point and complex dtype can require "
                                 f"gradients (tinytrain has no complex dtype), not {data.dtype}; "
                                 f"give a float dtype, e.g. dtype=tt.float32")
            self._requires_grad = True

    # ------------------------------------------------------------ properties

    @property
    def requires_grad(self) -> bool:
        """Whether ops on this tensor record the graph (and a leaf gets ``.grad``); a view
        whose base joined a graph after the view was made says so too."""
        if self._view_replay is not None:
            self._refresh_view()
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        """As PyTorch: a leaf's flag only (a computed tensor's would cut or fake the graph;
        ``detach()`` is the way to leave it), a bool, and True only for floating dtypes."""
        if not isinstance(value, builtins.bool | np.bool_):  # (PyTorch's RuntimeError)
            raise FlagError(f"requires_grad must be a bool (True or False), got {value!r}")
        if self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables" + (
                    ". If you want to use a computed variable in a subgraph that doesn't "
                    "require differentiation use var_no_grad = var.detach()"
                    if not value else ""))
        if value and self.dtype.kind != "f":
            raise DTypeError(f"only Tensors of floating point dtype can require gradients, "
                             f"not {self.dtype}; convert it first: .float()")
        self._requires_grad = builtins.bool(value)

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by ``backward()`` (None until then). A non-leaf keeps
        one only after :meth:`retain_grad`; reading it otherwise warns, as PyTorch."""
        if self._grad is None and self.grad_fn is not None and not self.retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor.", UserWarning, stacklevel=2)
        return self._grad

    @property
    def retains_grad(self) -> bool:
        """True after :meth:`retain_grad` on a non-leaf."""
        node = self.grad_fn
        return node is not None and node.retained is not None and node.retained() is self

    def retain_grad(self) -> None:
        """Keep this non-leaf's gradient in ``.grad`` during ``backward()`` (a leaf keeps
        its own already): the gradient that reaches its ``grad_fn`` is the loss's gradient
        with respect to this tensor, summed over every path."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None:
            self.grad_fn.retained = weakref.ref(self)

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        """Checked as PyTorch checks it: a Tensor of this tensor's shape, dtype and device
        (a wrong one would fail later, deep in an optimizer or the next accumulation)."""
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"{type(value).__name__}")
            if value.shape != self.shape:
                raise ShapeError(f"assigned grad has data of a different size: shape "
                                 f"{value.shape}, the tensor's {self.shape}")
            if value.dtype != self.dtype:
                raise DTypeError(f"assigned grad has data of a different type: {value.dtype}, "
                                 f"the tensor's {self.dtype}")
            if type(value._data) is not type(self._data):
                raise RuntimeError(f"assigned grad has data located on a different device: "
                                   f"{value.device}, the tensor's {self.device}")
        self._grad = value

    @property
    def data(self) -> Tensor:
        """A new Tensor on this tensor's memory (the same array, no copy), outside autograd:
        ``requires_grad=False``, no ``grad_fn``, its own version counter, as PyTorch's
        ``.data``. Writing in place through it changes this tensor unseen by autograd.
        Assigning a Tensor (or a NumPy/CuPy array) gives this tensor that memory, any shape,
        and bumps its version; the same memory put back (``t.data += 1``) does not."""
        return Tensor(self._data)  # an array: a fresh version counter

    @data.setter
    def data(self, value: Tensor | Any) -> None:
        array = value._data if isinstance(value, Tensor) else value
        if array is not vars(self).get("_data"):  # (vars: a lazy placeholder's ._data raises)
            self._data = array
            self._version_counter[0] += 1

    @property
    def _version(self) -> int:
        """How many in-place writes this tensor's memory has seen (as ``torch.Tensor._version``)."""
        return self._version_counter[0]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def device(self) -> backend.Device:
        return backend.device_of(self._data)

    def get_device(self) -> int:
        """-1 for a tensor on the CPU, else its GPU's index (as PyTorch's)."""
        return getattr(getattr(self._data, "device", None), "id", -1)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or the size of dimension ``dim`` (negative counts from the end)."""
        if dim is None:
            return self.shape
        axis = self._dim("size", dim)
        return self.shape[axis]

    def numel(self) -> int:
        return int(self._data.size)

    def is_floating_point(self) -> bool:
        return self.dtype.kind == "f"

    def is_contiguous(self) -> bool:
        """True when the elements lie in memory in row-major order without gaps."""
        return bool(self._data.flags.c_contiguous)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def is_cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def T(self) -> Tensor:  # noqa: N802
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:  # noqa: N802
        """The last two dims swapped (a batch of matrices transposed), as PyTorch's; fewer
        than two dims is an error (PyTorch's message; its 0-d identity is deprecated)."""
        if self.ndim < 2:
            raise ShapeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                             f"Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        """The sub-tensors along dimension 0 (``for label, pred in zip(labels, preds)``)."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, element: Any) -> bool:
        """``element in t``: True if any entry of ``t`` equals ``element``."""
        return bool((self == element).any())

    def __repr__(self) -> str:
        return printing.tensor_repr(self)

    __hash__ = object.__hash__  # by identity: tensors are dict keys (optimizer state)

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``), as in PyTorch."""
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    # ------------------------------------------------------------ conversion

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (copied from the GPU for ``"cuda"``)."""
        return self._data if self.device == "cpu" else self._data.get()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """NumPy's view of the values, as with PyTorch's CPU tensors: ``np.asarray(t)``
        shares the tensor's memory, ``np.array(t)`` (``copy=True``) is a copy of it."""
        arr = self.numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"cannot view a {arr.dtype} Tensor as {np.dtype(dtype)} "
                                 "without a copy (copy=False)")
            return arr.astype(dtype)
        if copy and arr is self._data:  # from the GPU, numpy() already made a new array
            return arr.copy()
        return arr

    def __array_wrap__(self, arr: np.ndarray, context: Any = None,
                       return_scalar: bool = False) -> Tensor:
        """A NumPy ufunc of a tensor gives a tensor, as PyTorch's (``np.exp(t)``, a 0-d
        tensor for a 0-d input, a bool result as uint8 as PyTorch's). NumPy computed it, so
        it has no graph: a ufunc of a tensor that requires grad raises, as PyTorch's."""
        if context is not None and any(isinstance(a, Tensor) and a.requires_grad
                                       for a in context[1]):
            raise RuntimeError(
                f"numpy.{context[0].__name__} of a Tensor that requires grad: NumPy's result "
                "would not be part of the graph. Use the tinytrain function, or "
                "tensor.detach() first")
        if arr.dtype == np.bool_:
            arr = arr.astype(np.uint8)
        return Tensor(arr)

    def item(self) -> float | int | bool:
        if self._data.size != 1:
            raise InvalidArgument(
                f"item(): a Tensor with {self._data.size} elements cannot be converted to "
                f"Scalar (shape {self.shape}); only one element tensors can be"
            )
        return self._data.reshape(()).item()

    def __bool__(self) -> bool:
        """``if t:`` for a one-element tensor; more elements are ambiguous, as in PyTorch."""
        n = self._data.size
        if n != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {'no values' if n == 0 else 'more than one value'}"
                f" is ambiguous (shape {self.shape}); use .any() or .all(), or compare one "
                f"element"
            )
        return builtins.bool(self._data.reshape(()).item())

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __float__(self) -> float:
        """``float(t)`` of a one-element tensor. Of one that requires grad (with grad mode
        on), PyTorch warns once per process that the number leaves the graph: so does this
        (``t.item()`` and ``int(t)`` do not warn, in PyTorch neither)."""
        if _SCALAR_WARNING[0] and self.requires_grad and is_grad_enabled():
            _SCALAR_WARNING[0] = False
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to "
                          "unexpected behavior.\nConsider using tensor.detach() first.",
                          UserWarning, stacklevel=2)
        return float(self._scalar("float"))

    def __index__(self) -> int:
        """A one-element integer tensor used as an index: ``classes[label]``."""
        if self.dtype.kind not in "biu" or self._data.size != 1:
            raise TypeError(
                f"only integer tensors of a single element can be converted to an index, got "
                f"{self.dtype} of shape {self.shape}"
            )
        return int(self._data.reshape(()).item())

    def _scalar(self, what: str) -> Any:
        if self._data.size != 1:
            raise InvalidArgument(
                f"{what}(): only one element tensors can be converted to Python scalars, got "
                f"shape {self.shape}"
            )
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def to(self, device: Any = None, dtype: Any = None, non_blocking: bool = False,
           copy: bool = False, *, memory_format: Any = None) -> Tensor:
        """A copy on another device and/or with another dtype (self if nothing changes,
        unless ``copy``).

        ``to(dtype)`` with a dtype as the only argument works too, and ``to(other)`` takes
        ``other``'s device and dtype. The result is differentiable: gradients flow back to
        the original device and dtype. ``non_blocking`` is accepted and has no effect;
        ``memory_format`` as in :meth:`clone` (row-major ones only).
        """
        if memory_format is not None:
            check_memory_format("to", memory_format)
        if isinstance(device, Tensor):
            device, dtype = device.device, device.dtype
        elif device is not None and not backend.is_device(device):
            device, dtype = None, device
        device = backend.normalize_device(device) if device is not None else self.device
        try:
            dtype = np.dtype(dtype) if dtype is not None else self.dtype
        except TypeError:
            raise InvalidArgument(f"to(): {dtype!r} is neither a device ('cpu', 'cuda', "
                                  "'cuda:N') nor a dtype") from None
        if device == self.device and dtype == self.dtype:
            return self.clone() if copy else self
        return _To.apply(self, device, dtype)

    def type(self, dtype: Any = None) -> Any:
        """``type()`` is PyTorch's legacy type name (``"torch.FloatTensor"``, on a GPU
        ``"torch.cuda.FloatTensor"``), which ported code compares with; ``type(dtype)``
        converts, as ``to(dtype)`` (also to a legacy type, ``tt.FloatTensor`` or a name as
        ``type()`` gives it, ``cuda.`` moving the tensor to the GPU)."""
        if dtype is None:
            on_gpu = "cuda." if self.device.type == "cuda" else ""
            return f"torch.{on_gpu}{torch_scalar_name(self.dtype)}Tensor"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            from tinytrain.tensor_types import BY_NAME

            name = dtype.replace(".cuda.", ".", 1)
            if name not in BY_NAME:
                raise InvalidArgument(f"type(): unknown tensor type {dtype!r}; the legacy "
                                      f"types are {', '.join(sorted(BY_NAME))}, with "
                                      f"'cuda.' after the first dot on the GPU")
            device = "cuda" if ".cuda." in dtype else "cpu"
            return self.to(device=device, dtype=BY_NAME[name].dtype)
        return self.to(dtype=dtype)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(dtype=other.dtype)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        return self.to("cuda" if device is None else device)  # (an index: this process's GPU)

    def pin_memory(self) -> Tensor:
        """The tensor itself: tinytrain copies batches to the GPU from ordinary memory
        (``DataLoader(device="cuda")`` moves whole data sets once), so there is nothing to
        pin; accepted so that PyTorch scripts run."""
        return self

    def is_pinned(self) -> bool:
        return False

    def float(self) -> Tensor:
        return self.to(dtype=float32)

    def double(self) -> Tensor:
        return self.to(dtype=float64)

    def half(self) -> Tensor:
        return self.to(dtype=float16)

    def long(self) -> Tensor:
        return self.to(dtype=int64)

    def int(self) -> Tensor:
        return self.to(dtype=int32)

    def bool(self) -> Tensor:
        return self.to(dtype=bool_)

    # ------------------------------------------------------------ autograd

    #: What a computed tensor (a non-leaf) leaves out when pickled or copied: its graph.
    _GRAPH_STATE = ("grad_fn", "_base", "_view_of", "_view_replay", "_view_version",
                    "_view_without_grad")

    def __getstate__(self) -> dict[str, Any]:
        """What copy.deepcopy and pickle keep: everything but the weak reference to the
        leaf's gradient node (a copy gets a node of its own when it is first used; with the
        reference, a deep copy's gradients went into the original). A computed tensor
        (``grad_fn`` set) loads as a leaf with its ``requires_grad``, as PyTorch's pickles
        (and ``copy.copy``): the graph behind it is not saved (a pruned module's ``weight``,
        ``mask * weight_orig``, is one; its hook computes it again at the next forward)."""
        state = self.__dict__.copy()
        state.pop("_acc_ref", None)
        state.pop("_grad_hooks", None)  # (as PyTorch's copies: hooks are not copied or saved)
        if self.grad_fn is not None:
            for name in self._GRAPH_STATE:
                state.pop(name, None)
        return state

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A deep copy of a leaf (its values, ``requires_grad``; not its ``.grad`` for a
        Parameter, not its hooks); a computed tensor raises RuntimeError, as PyTorch's (a
        module that holds one, e.g. pruned by ``nn.utils.prune``, cannot be deep-copied:
        copy it before pruning, or after ``prune.remove``)."""
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a module, "
                "this may be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001")
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__getstate__(), memo))
        return new

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Mark a leaf as needing ``.grad`` (in place; returns self)."""
        if not isinstance(requires_grad, builtins.bool):
            raise TypeError(f"requires_grad_ takes True or False, got {requires_grad!r}")
        if not self.is_leaf:
            if requires_grad:  # (a computed tensor of a graph requires grad already)
                return self
            raise RuntimeError("requires_grad_ can only change leaf tensors; use detach() first")
        if requires_grad and self.dtype.kind != "f":
            raise DTypeError(f"only Tensors of floating point dtype can require gradients, "
                             f"not {self.dtype}; convert it first: .float()")
        self._requires_grad = requires_grad
        return self

    def _refresh_view(self) -> None:
        """A view whose memory was written in place since it was made (through its base or
        another view: the version they share moved) takes its graph node anew from its
        parent's current graph, so that gradients see the write, as PyTorch regenerates a
        view's ``grad_fn``. The view op runs again on the same parent (a new view of the
        same memory, whose node is all that is kept). Nothing to do if it was not written
        since, or without grad (nothing is recorded now; a later use with grad refreshes)."""
        if self._version_counter[0] == self._view_version or not is_grad_enabled():
            return
        self._view_version = self._version_counter[0]
        fresh = _view_again(self)
        if fresh is self:  # an input's array was replaced (``.data = ...``)
            return
        if fresh.shape == self.shape:
            if fresh.grad_fn is not None:
                self._take_node(fresh.grad_fn)
            else:
                self.grad_fn, self._requires_grad = None, fresh.requires_grad

    def detach(self) -> Tensor:
        """The same memory, cut from the graph (shares memory and version, like PyTorch).

        Its array is a new view object on that memory, never this tensor's own array: a
        Function tells its inputs' saved arrays apart by identity, so that in ``x *
        x.detach()`` a double backward differentiates the one and not the other."""
        t = Tensor(_alias(self._data))
        t._version_counter = self._version_counter
        return t

    def detach_(self) -> Tensor:
        """Cut this tensor itself from the graph: it becomes a leaf that does not require
        grad (PyTorch's ``detach_``; views of other tensors refuse, as there)."""
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn, self._requires_grad = None, False
        return self

    def clone(self, *, memory_format: Any = None) -> Tensor:
        """A copy in new (row-major) memory; differentiable. ``memory_format``: PyTorch's,
        row-major ones only (:func:`check_memory_format`)."""
        check_memory_format("clone", preserve_format if memory_format is None else memory_format)
        return O.Clone.apply(self)

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """Self if row-major already, else a row-major copy (``clone()``); ``memory_format``
        as in :meth:`clone` (``preserve_format`` refused for a copy, as in PyTorch)."""
        memory_format = contiguous_format if memory_format is None else memory_format
        check_memory_format("contiguous", memory_format)
        if self.is_contiguous():
            return self
        if memory_format is preserve_format:
            raise InvalidArgument("contiguous: preserve memory format is unsupported by the "
                                  "contiguous operator")
        return self.clone()

    def _grad_node(self) -> Node:
        """The node gradients flow into: ``grad_fn``, or the leaf's AccumulateGrad."""
        if self._view_replay is not None:
            self._refresh_view()
        if self.grad_fn is not None:
            return self.grad_fn
        # The graph holds the leaf's node and the node holds the leaf; the leaf holds its node
        # weakly (as PyTorch), or the two would be a cycle that only the garbage collector
        # frees: a new input with requires_grad each step would pile up, data and .grad.
        node = self._acc_ref()
        if node is None:
            node = AccumulateGrad(self)
            self._acc_ref = weakref.ref(node)
        return node

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``gradient`` is required unless self has one element. Without
        ``retain_graph`` the graph's saved arrays are freed as it runs, and a
        second backward through it raises. ``inputs`` (a tensor or a sequence): only
        these accumulate ``.grad``, as :func:`tinytrain.autograd.backward`. ``create_graph``:
        the ``.grad`` Tensors get graphs of their own, to be differentiated again
        (higher-order gradients; ``retain_graph`` then defaults to True, as in PyTorch).
        """
        if inputs is not None or create_graph:
            if gradient is not None and not isinstance(gradient, Tensor):
                gradient = tensor(gradient, dtype=self.dtype, device=self.device)
            gradients.backward(self, gradient, retain_graph, create_graph, inputs=inputs)
            return
        retain_graph = builtins.bool(retain_graph)
        if not self.requires_grad:
            raise RuntimeError(
                "backward() on a tensor that does not require grad: nothing in its graph "
                "has requires_grad=True (or it was computed under no_grad)"
            )
        if gradient is None:
            if self._data.size != 1:
                raise RuntimeError(
                    f"backward() without a gradient works only on a scalar, but this tensor has "
                    f"shape {self.shape}; call .sum() first or pass gradient= of that shape"
                )
            grad = backend.get_array_module(self._data).ones_like(self._data)
            owned = True
        else:
            owned = False
            if not isinstance(gradient, Tensor):  # a list, a number or an array
                gradient = tensor(gradient, dtype=self.dtype, device=self.device)
            grad = gradient._data
            if tuple(grad.shape) != self.shape:
                raise ShapeError(
                    f"backward(): gradient has shape {tuple(grad.shape)} but the tensor has "
                    f"shape {self.shape}"
                )
        engine.run_backward(self._grad_node(), grad, retain_graph=retain_graph, owned=owned)

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Call ``hook(grad)`` with the gradient with respect to this tensor whenever a
        backward pass computes it. A Tensor the hook returns (of the same shape and dtype)
        replaces the gradient for all that follows: the rest of the pass, ``.grad`` (of a
        leaf, or with ``retain_grad``) and ``autograd.grad``; None keeps it. Hooks run in
        the order they were registered, each on the previous one's result.

        On a non-leaf the hook belongs to the node that made the tensor's current value: after
        an in-place write it still sees the gradient with respect to the value before the
        write, and one registered after the write sees the new value's (as PyTorch). Copies
        (``copy.deepcopy``, ``tt.save``) do not keep hooks."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None and self._view_replay is None:  # a leaf: its own table
            if "_grad_hooks" not in self.__dict__:
                self._grad_hooks = {}
            hooks = self._grad_hooks
        else:
            node = self._grad_node()
            if node.pre_hooks is None:
                node.pre_hooks = {}
            hooks = node.pre_hooks
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Call ``hook(self)`` each time a gradient has been added into ``self.grad``."""
        if not self.is_leaf:
            raise RuntimeError("post-accumulate-grad hooks can only be registered on leaves")
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient (it would never run)")
        if "_post_accumulate_grad_hooks" not in self.__dict__:
            self._post_accumulate_grad_hooks = {}
        handle = RemovableHandle(self._post_accumulate_grad_hooks)
        self._post_accumulate_grad_hooks[handle.id] = hook
        return handle

    # ------------------------------------------------------------ dtype promotion

    def _cast(self, dtype: np.dtype) -> Tensor:
        return self if self.dtype == dtype else _To.apply(self, self.device, dtype)

    def _promote(self, other: Any, float_result: bool = False) -> tuple[Tensor, Any]:
        """``(self, other)`` converted to their :func:`result_type` (to the default float
        dtype if ``float_result`` and it is not floating). ``other`` comes back as a Tensor, or a
        NumPy scalar for a Python number; NotImplemented for types that are neither."""
        if isinstance(other, Tensor):
            if other.dtype == self.dtype and not (float_result and self.dtype.kind != "f"):
                return self, other
            dtype = result_type(self, other)
            if float_result and dtype.kind != "f":
                dtype = get_default_dtype()
            return self._cast(dtype), other._cast(dtype)
        if isinstance(other, numbers.Real | np.generic):
            if self.dtype.kind == "f" and not isinstance(other, builtins.bool):
                dtype = self.dtype  # the common case, decided without the general rule
            else:
                dtype = result_type(self, other)
                if float_result and dtype.kind != "f":
                    dtype = get_default_dtype()
            return self._cast(dtype), scalar_array(other, dtype)
        if hasattr(other, "__array_interface__") or hasattr(other, "__cuda_array_interface__"):
            return self._promote(Tensor(other), float_result)  # an array acts as a tensor
        return self, NotImplemented

    def _binary(self, op: type[Function], other: Any, reverse: bool = False,
                float_result: bool = False) -> Tensor:
        a, b = self._promote(other, float_result)
        if b is NotImplemented:
            return NotImplemented
        if (op is O.Mul or op is O.Div) and a._data.dtype == float16 and _is_scalar_operand(other):
            return a._binary_opmath(op, other, reverse)
        if reverse:
            a, b = b, a
        try:
            return op.apply(a, b)
        except ValueError:
            O.broadcast_shapes(op.__name__.lower(), _shape_of(a), _shape_of(b))  # names both
            raise

    def _binary_opmath(self, op: type[Function], scalar: Any, reverse: bool) -> Tensor:
        """A float16 tensor times or divided by a number (or a 0-d tensor): computed in
        float32 and rounded to float16 once, as PyTorch's "opmath" does; the number is not
        rounded to float16 first (``x / 65536`` would divide by inf, ``x * 1e-7`` be 19% off).
        PyTorch's add and sub round the number to float16 first, so they do not come here;
        its ``number / x`` is ``x.reciprocal() * number``."""
        if reverse and op is O.Div:
            recip = O.Div.apply(scalar_array(1, float16), self)
            return recip._binary_opmath(O.Mul, scalar, False)
        b = scalar._cast(float32) if isinstance(scalar, Tensor) else scalar_array(scalar, float32)
        a = self._cast(float32)
        return (op.apply(b, a) if reverse else op.apply(a, b))._cast(float16)

    def __add__(self, o: Any) -> Tensor:
        return self._binary(O.Add, o)

    def __radd__(self, o: Any) -> Tensor:
        return self._binary(O.Add, o, reverse=True)

    def _refuse_bool(self, other: Any, what: str) -> None:
        if self.dtype == bool_ or isinstance(other, builtins.bool | np.bool_) or (
                isinstance(other, Tensor) and other.dtype == bool_):
            raise RuntimeError(
                f"{what}, the `-` operator, with a bool tensor is not supported. If you are "
                f"trying to invert a mask, use the `~` or `logical_not()` operator instead."
            )

    def __sub__(self, o: Any) -> Tensor:
        self._refuse_bool(o, "Subtraction")
        return self._binary(O.Sub, o)

    def __rsub__(self, o: Any) -> Tensor:
        self._refuse_bool(o, "Subtraction")
        return self._binary(O.Sub, o, reverse=True)

    def __mul__(self, o: Any) -> Tensor:
        return self._binary(O.Mul, o)

    def __rmul__(self, o: Any) -> Tensor:
        return self._binary(O.Mul, o, reverse=True)

    def __truediv__(self, other: Any) -> Tensor:  # (other: PyTorch's keyword, true_divide)
        return self._binary(O.Div, other, float_result=True)

    def __rtruediv__(self, o: Any) -> Tensor:
        return self._binary(O.Div, o, reverse=True, float_result=True)

    def _floor_op(self, op: type[Function], other: Any, reverse: bool = False) -> Tensor:
        """``//``, ``%`` and ``fmod``: as PyTorch, integer division by zero raises, bool is
        refused."""
        a, b = self._promote(other)
        if b is NotImplemented:
            return NotImplemented
        if a.dtype == bool_:
            raise DTypeError(f"{op.__name__} is not implemented for bool tensors")
        divisor = (a if reverse else b)
        divisor = divisor._data if isinstance(divisor, Tensor) else divisor
        if a.dtype.kind in "iu":  # (an empty result divides nothing: nothing to refuse)
            x, y = (b, a) if reverse else (a, b)
            shape = O.broadcast_shapes(op.__name__.lower(), _shape_of(x), _shape_of(y))
            if math.prod(shape) and builtins.bool((divisor == 0).any()):
                raise RuntimeError("ZeroDivisionError: integer division or modulo by zero")
        return self._binary(op, other, reverse)

    def __floordiv__(self, other: Any) -> Tensor:
        return self._floor_op(O.FloorDiv, other)

    def __rfloordiv__(self, o: Any) -> Tensor:
        return self._floor_op(O.FloorDiv, o, reverse=True)

    def __mod__(self, other: Any) -> Tensor:  # (other: PyTorch's keyword, remainder)
        return self._floor_op(O.Remainder, other)

    def __rmod__(self, o: Any) -> Tensor:
        return self._floor_op(O.Remainder, o, reverse=True)

    def __pow__(self, p: Any) -> Tensor:
        a, b = self._promote(p)
        if b is NotImplemented:
            return NotImplemented
        if a.dtype == bool_:  # PyTorch: a bool base with a bool number stays bool
            if isinstance(b, Tensor):
                raise DTypeError("pow is not implemented for bool tensors; convert with .int()")
            return (self.to(dtype=uint8) ** p).to(dtype=bool_)
        if a.dtype.kind in "iu" and isinstance(p, numbers.Real) and p < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if a.dtype == float16 and isinstance(p, numbers.Real):  # as PyTorch: 1e10 is refused
            scalar_in(p, float16, "pow")  # (not made inf) for a float16 base
        return _named("pow", O.Pow.apply, a, b)

    def __rpow__(self, base: Any) -> Tensor:
        if self.dtype == bool_ and result_type(self, base) == bool_:
            raise DTypeError("pow is not implemented for bool tensors; convert with .int()")
        return self._binary(O.Pow, base, reverse=True)

    def __neg__(self) -> Tensor:
        self._refuse_bool(None, "Negation")
        return O.Neg.apply(self)

    def __abs__(self) -> Tensor:
        return O.Abs.apply(self)

    def abs(self) -> Tensor:
        return O.Abs.apply(self)

    def add(self, other: Any, alpha: float = 1) -> Tensor:
        return self + other if alpha == 1 else self._alpha(other, alpha, Tensor.__add__)

    def sub(self, other: Any, alpha: float = 1) -> Tensor:
        if alpha == 1:
            return self - other
        self._refuse_bool(other, "Subtraction")
        return self._alpha(other, alpha, Tensor.__sub__)

    def _alpha(self, other: Any, alpha: Any, op: Callable) -> Tensor:
        """``op(self, other * alpha)`` in the dtype of ``op(self, other)``, as PyTorch:
        ``alpha`` scales, it does not promote (``int8.add(int8, alpha=2)`` stays int8), and
        the product is taken in that dtype (``f32.add(u8 200, alpha=2)`` is 401, not 400
        wrapped in uint8)."""
        dtype = result_type(self, other)
        if dtype.kind in "biu" and not isinstance(alpha, numbers.Integral):
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number.")
        if isinstance(other, Tensor) and other.dtype != dtype:
            other = other.to(dtype=dtype)
        out = op(self, other * alpha)
        return out if out.dtype == dtype else out.to(dtype=dtype)

    def mul(self, other: Any) -> Tensor:
        return self * other

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self / other``; with ``rounding_mode`` ``"trunc"`` (toward zero) or ``"floor"``
        (down) the quotient is rounded, in the operands' promoted dtype (integers stay
        integers), and its gradient is zero, as in PyTorch."""
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise InvalidArgument(f"div expected rounding_mode to be one of None, 'trunc', or "
                                  f"'floor' but found {rounding_mode!r}")
        a, b = self._promote(other)
        if b is NotImplemented:
            raise TypeError(f"div: expected a Tensor or a number, got {type(other).__name__}")
        if a.dtype == bool_:
            raise DTypeError("div with a rounding_mode is not implemented for bool tensors")
        divisor = b._data if isinstance(b, Tensor) else b
        shape = O.broadcast_shapes("div", a.shape, np.shape(divisor))
        if a.dtype.kind in "iu" and math.prod(shape) and builtins.bool((divisor == 0).any()):
            raise RuntimeError("ZeroDivisionError: integer division by zero")
        return O.DivRounded.apply(a, b, rounding_mode)

    def divide(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return self.div(other, rounding_mode=rounding_mode)

    def pow(self, exponent: Any) -> Tensor:
        return self ** exponent

    def maximum(self, other: Tensor) -> Tensor:
        """Element-wise maximum (``torch.maximum``); ties split the gradient."""
        return self._binary(O.Maximum, other)

    def fmax(self, other: Any) -> Tensor:
        """Element-wise maximum that ignores NaN (the other value where one is NaN; NaN
        where both are); ties give self the gradient, as PyTorch's."""
        a, b = self._promote(other, False)
        return where((a >= b) | b.isnan(), a, b)

    def fmin(self, other: Any) -> Tensor:
        """Element-wise minimum that ignores NaN (see :meth:`fmax`)."""
        a, b = self._promote(other, False)
        return where((a <= b) | b.isnan(), a, b)

    def minimum(self, other: Tensor) -> Tensor:
        return self._binary(O.Minimum, other)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 (torch's names)
        """Values limited to ``[min, max]`` (either may be None); ``clip`` is the same."""
        if min is None and max is None:
            raise InvalidArgument("clamp: at least one of min and max must not be None")
        dtype = result_type(self, *(b for b in (min, max) if b is not None))
        if isinstance(min, Tensor) or isinstance(max, Tensor):  # bounds with gradients
            lo, hi = (None if b is None else b._cast(dtype) if isinstance(b, Tensor)
                      else tensor(b, dtype=dtype, device=self.device) for b in (min, max))
            shape = self.shape
            for b in (lo, hi):
                if b is not None:
                    shape = O.broadcast_shapes("clamp", shape, b.shape)
            return O.ClampTensor.apply(self._cast(dtype), lo, hi)
        lo, hi = (None if b is None else scalar_in(b, dtype, "clamp") for b in (min, max))
        return O.Clamp.apply(self._cast(dtype), lo, hi)

    clip = clamp

    def __matmul__(self, other: Tensor) -> Tensor:
        other = _as_operand(other, self, "matmul")
        check_same_dtype("matmul", self, other)
        _check_matmul(self.shape, other.shape)
        return O.MatMul.apply(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _as_operand(other, self, "matmul") @ self

    def matmul(self, other: Tensor) -> Tensor:
        return self @ other

    # comparisons give boolean tensors, never part of the graph
    def _compare(self, other: Any, fn: Callable) -> Tensor:
        """``fn`` (``operator.eq``, ``operator.lt``, ...) of the promoted operands."""
        a, b = self._promote(other)
        if b is NotImplemented:
            return NotImplemented
        if isinstance(b, Tensor) and b._data.__class__ is not a._data.__class__:
            a, b = on_one_device(fn.__name__, (a, b))  # (a CPU 0-d tensor joins the GPU)
        return Tensor(_named(fn.__name__, fn, a._data, b._data if isinstance(b, Tensor) else b))

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(o, operator.eq)

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(o, operator.ne)

    def __lt__(self, o: Any) -> Tensor:
        return self._compare(o, operator.lt)

    def __le__(self, o: Any) -> Tensor:
        return self._compare(o, operator.le)

    def __gt__(self, o: Any) -> Tensor:
        return self._compare(o, operator.gt)

    def __ge__(self, o: Any) -> Tensor:
        return self._compare(o, operator.ge)

    def eq(self, other: Any) -> Tensor:
        return self == other

    def ne(self, other: Any) -> Tensor:
        return self != other

    def lt(self, other: Any) -> Tensor:
        return self < other

    def le(self, other: Any) -> Tensor:
        return self <= other

    def gt(self, other: Any) -> Tensor:
        return self > other

    def ge(self, other: Any) -> Tensor:
        return self >= other

    def equal(self, other: Tensor) -> bool:
        """True if both have the same shape and values (``torch.equal``)."""
        return self.shape == other.shape and builtins.bool((self == other).all())

    def __invert__(self) -> Tensor:
        if self.dtype.kind not in "biu":
            raise TypeError(f"~ (bitwise not) needs a bool or integer tensor, not {self.dtype}")
        return Tensor(~self._data)

    def logical_not(self) -> Tensor:
        return Tensor(self._data == 0)

    def any(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """True where any element over ``dim`` (all dims if None; none for ``()``, as
        PyTorch's any/all) is non-zero."""
        axes = () if isinstance(dim, tuple | list) and not dim else self._reduction_axes(dim)
        return self._truth(self._data.any(axis=axes, keepdims=keepdim))

    def all(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """True where every element over ``dim`` (all dims if None; none for ``()``)."""
        axes = () if isinstance(dim, tuple | list) and not dim else self._reduction_axes(dim)
        return self._truth(self._data.all(axis=axes, keepdims=keepdim))

    def _truth(self, result: Any) -> Tensor:
        """any/all's bool result; of a uint8 tensor, uint8 0 or 1, as PyTorch's."""
        return Tensor(result.astype(uint8) if self.dtype == uint8 else result)

    # ------------------------------------------------------------ in-place ops

    def _inplace(self, name: str, compute: Callable[[Tensor], Tensor], *args: Any,
                 any_dtype: bool = False) -> Tensor:
        """Write ``compute(self)`` into self's memory; the one mechanism of every in-place op.

        ``compute`` is the out-of-place op; ``args`` are its other operands. Its result
        must have self's shape, and (unless ``any_dtype``, for copy_/fill_) a dtype that
        casts to self's: not float into an integer tensor, not a number into bool.
        Then, as in PyTorch:

        * not recording (``no_grad``, or nothing requires grad): the values are written
          into the existing array, so views see them, and the version is bumped;
        * recording: a leaf that requires grad refuses (PyTorch's error); otherwise the
          op runs on a copy of the old values (what its backward may save) and self
          takes over the op's graph node, continuing the graph through the write. On a
          slice ``x[i]`` the write goes through ``x[i] = result``, so that ``x``'s graph
          records it too (PyTorch's CopySlices); other views (reshape, permute) refuse.
        """
        if self._view_replay is not None:
            self._refresh_view()  # written through its base since it was made (with grad only)
        recording = is_grad_enabled() and (
            self._requires_grad or builtins.any(isinstance(a, Tensor) and a._requires_grad
                                                for a in args))
        self._check_no_grad_view(name, recording)
        source, view_of = self, None
        if recording:
            base = self._base
            if self.requires_grad and self.grad_fn is None:
                raise RuntimeError(f"{name}: {_LEAF_INPLACE}")
            if base is not None and base.requires_grad and base.grad_fn is None:
                raise RuntimeError(f"{name}: a view of {_LEAF_INPLACE}")
            if base is not None:
                # (parent, index) for a slice or a pick; (parent, order) for a rearrangement
                view_of = self.__dict__.get("_view_of") or self._rearranged_from()
                if view_of is None:
                    raise RuntimeError(
                        f"{name}: in-place op with autograd on a view of another tensor "
                        f"(shape {base.shape}) that holds some of its elements more than once "
                        f"(an expand, unfold windows that overlap) or is not made by a view op "
                        f"(a module's input or output seen through its backward hooks); apply "
                        f"the op to the base, use an out-of-place op, or clone() the view first"
                    )
            source = Tensor(self._data.copy())
            source.grad_fn, source._requires_grad = self.grad_fn, self.requires_grad
        out = compute(source)
        if out.shape != self.shape:
            raise RuntimeError(
                f"{name}: output with shape {list(self.shape)} doesn't match the broadcast "
                f"shape {list(out.shape)}"
            )
        if not any_dtype and not can_cast(out.dtype, self.dtype):
            raise DTypeError(
                f"{name}: result type {out.dtype} can't be cast to the desired output type "
                f"{self.dtype} (in-place ops keep the tensor's dtype; use the out-of-place "
                f"form, e.g. x = x + y)"
            )
        if out._requires_grad:
            out = out._cast(self.dtype)
        # The write first: if the parent refuses it (an expand), nothing has changed.
        if isinstance(view_of, _Rearranged):  # the parent, written whole, in its own layout
            view_of.parent.copy_(out.reshape(-1)[view_of.order].reshape(view_of.parent.shape))
        elif view_of is not None:
            parent, index = view_of
            parent[index] = out  # writes our memory and records the write in parent's graph
        else:
            self._write(name, Ellipsis, out._data)
            self._version_counter[0] += 1
        if out._requires_grad:
            _saved_output_is(out, self)
        if view_of is not None and self._view_replay is not None:
            self._refresh_view()  # our node: this view of the parent's new graph (PyTorch's
            # view of its CopySlices), so a retained .grad sees only our own uses
        elif out._requires_grad:
            self._take_node(out.grad_fn)
        return self

    def _take_node(self, node: Node) -> None:
        """Make ``node`` this tensor's ``grad_fn`` (an in-place write's, or a view's made
        again); a ``retain_grad()`` moves with it, as PyTorch moves its retain hook: ``.grad``
        is the gradient of the value the tensor now holds."""
        retained = self.retains_grad
        if retained:
            self.grad_fn.retained = None
        self.grad_fn, self._requires_grad = node, True
        if retained:
            node.retained = weakref.ref(self)

    def _rearranged_from(self) -> _Rearranged | tuple[Tensor, tuple] | None:
        """How an in-place op with autograd on this view writes the tensor it was made from.

        If the view holds every element of it once (a reshape, permute, transpose,
        squeeze, ...): that tensor and where each of its flat elements is in this view
        (:class:`_Rearranged`). If it holds some of them, each once (a diagonal, windows of
        ``unfold`` that do not overlap): ``(parent, index)``, the integer arrays that pick
        them in the view's layout, so the write is ``parent[index] = result``, as for a slice.
        Else (an expand repeats elements) None. Found by making the same view of the
        parent's flat positions, so it holds for any such view op without a list of them."""
        if self._view_replay is None:
            return None
        cls, inputs, _ = self._view_replay
        parent = inputs[0]
        if not isinstance(parent, Tensor):
            return None
        positions = np.arange(parent.numel()).reshape(parent.shape)
        raw = [positions] + [x._data if isinstance(x, Tensor) else x for x in inputs[1:]]
        try:
            where = np.asarray(cls.forward(*raw))
        except Exception:  # a view op that works only on its own array type
            return None
        flat = where.reshape(-1)
        order = np.argsort(flat, kind="stable")
        ranked = flat[order]
        if np.any(ranked[1:] == ranked[:-1]):  # repeats (expand)
            return None
        if flat.size == parent.numel():
            return _Rearranged(parent, Tensor(backend.to_device(order, self.device)))
        index = np.unravel_index(where, parent.shape)
        return parent, tuple(backend.to_device(i, self.device) for i in index)

    def _check_no_grad_view(self, name: str, recording: bool) -> None:
        """A view made under ``no_grad`` is not written with grad mode on when the write would
        be recorded, or when its base has a graph (which would miss it), as PyTorch refuses."""
        if self._view_without_grad and is_grad_enabled() and (
                recording or (self._base is not None and self._base.requires_grad)):
            raise RuntimeError(
                f"{name}: a view was created in no_grad mode and is being modified in place "
                "with grad mode enabled: the write could not be part of the base's graph. "
                "Make the view with grad mode enabled, or write under no_grad")

    def _write(self, name: str, index: Any, values: Any) -> None:
        """``self._data[index] = values``. An expanded view (``expand``, ``broadcast_to``)
        has many elements on one memory location, and NumPy makes it read-only: say so, as
        PyTorch does, not NumPy's "assignment destination is read-only" (checked only when
        the write fails: it costs nothing on the way that works). Inside a
        :mod:`tinytrain.func` transform, the transform first checks that the function may
        write this memory (not a tensor it captured)."""
        if _func_levels:
            _func_check_write(self, name)
        try:
            self._data[index] = values
        except ValueError:
            if getattr(getattr(self._data, "flags", None), "writeable", True):
                raise
            raise RuntimeError(
                f"{name}: unsupported operation: more than one element of the written-to "
                f"tensor refers to a single memory location (an expand() or broadcast_to() "
                f"view, or a read-only array); clone() it before writing") from None

    def add_(self, other: Any, alpha: float = 1) -> Tensor:
        return self._inplace("add_", lambda s: s.add(other, alpha), other)

    def sub_(self, other: Any, alpha: float = 1) -> Tensor:
        return self._inplace("sub_", lambda s: s.sub(other, alpha), other)

    def mul_(self, other: Any) -> Tensor:
        return self._inplace("mul_", lambda s: s * other, other)

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return self._inplace("div_", lambda s: s.div(other, rounding_mode=rounding_mode), other)

    def pow_(self, exponent: Any) -> Tensor:
        return self._inplace("pow_", lambda s: s ** exponent, exponent)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        return self._inplace("clamp_", lambda s: s.clamp(min, max))

    clip_ = clamp_

    def relu_(self) -> Tensor:
        return self._inplace("relu_", lambda s: s.relu())

    def copy_(self, src: Any) -> Tensor:
        """Write ``src`` (broadcast to self's shape, converted to self's dtype and device)."""
        if not isinstance(src, Tensor):
            src = tensor(src, device=self.device)
        src = src.to(self.device, self.dtype)
        if O.broadcast_shapes("copy_", self.shape, src.shape) != self.shape:
            raise ShapeError(f"copy_: the source's shape {src.shape} does not broadcast to the "
                             f"destination's shape {self.shape}")
        return self._inplace("copy_", lambda s: O.Copy.apply(s, src), src, any_dtype=True)

    def fill_(self, value: Any) -> Tensor:
        """Set every element to ``value`` (a number or a 0-d tensor)."""
        if isinstance(value, Tensor):
            if value.ndim:  # (PyTorch's rule: also a one-element [1] tensor is refused)
                raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got "
                                   f"tensor with {value.ndim} dimensions.")
            return self.copy_(value)
        fill = scalar_in(value, self.dtype, "fill_")
        return self._inplace("fill_", lambda s: O.Copy.apply(s, fill), any_dtype=True)

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def __iadd__(self, other: Any) -> Tensor:
        return self.add_(other)

    def __isub__(self, other: Any) -> Tensor:
        return self.sub_(other)

    def __imul__(self, other: Any) -> Tensor:
        return self.mul_(other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self.div_(other)

    def __ipow__(self, other: Any) -> Tensor:
        return self.pow_(other)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``t[index] = value``: an in-place write (PyTorch's ``index_put_``)."""
        index = _raw_index(index)
        first = _integers_first(index)
        if first is not None:  # the layout __getitem__ reads: select, then write the rest
            self[first[0]][first[1]] = value
            return
        if self.device == "cuda":
            _check_gpu_index(self.shape, index)
        if isinstance(value, Tensor):
            value = value.to(self.device, self.dtype)
        else:
            value = tensor(value, dtype=self.dtype, device=self.device)
        lead = 0  # leading size-1 dims of the value broadcast away (NumPy refuses [1] -> [])
        while lead < value.ndim and value.shape[lead] == 1:
            lead += 1
        if lead:
            value = value.reshape(value.shape[lead:])
        try:
            if not (is_grad_enabled() and (self.requires_grad or value._requires_grad)):
                # (self.requires_grad: a view made before its base joined a graph asks it)
                self._check_no_grad_view("__setitem__", False)
                self._write("__setitem__", index, value._data)  # nothing to record: just those
                self._version_counter[0] += 1
                return
            self._inplace("__setitem__", lambda s: O.IndexPut.apply(s, value, index), value,
                          any_dtype=True)
        except ValueError as e:  # NumPy's "could not broadcast", said with the shapes
            if type(e) is not ValueError or _broadcasts(value.shape, self._data[index].shape):
                raise
            raise ShapeError(f"__setitem__: a value of shape {value.shape} does not broadcast "
                             f"to the {tuple(self._data[index].shape)} indexed (tensor shape "
                             f"{self.shape})") from None

    # ------------------------------------------------------------ unary

    def _float_op(self, op: type[Function]) -> Tensor:
        """Ops defined on reals: integer and bool inputs become the default float dtype
        first (float32 unless :func:`set_default_dtype` chose another), as in PyTorch."""
        return op.apply(self if self.dtype.kind == "f" else self._cast(get_default_dtype()))

    def exp(self) -> Tensor:
        return self._float_op(O.Exp)

    def log(self) -> Tensor:
        return self._float_op(O.Log)

    def sqrt(self) -> Tensor:
        return self._float_op(O.Sqrt)

    def relu(self) -> Tensor:
        return O.ReLU.apply(self)

    def sigmoid(self) -> Tensor:
        return self._float_op(O.Sigmoid)

    def tanh(self) -> Tensor:
        return self._float_op(O.Tanh)

    def log_softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """``log(softmax(x))`` along ``dim``, computed stably; floating input (``dtype``
        converts first, as in PyTorch)."""
        x = self._float_for("log_softmax", dtype)
        if x.ndim == 0 or x.numel() == 0:  # one value: log(1) = 0; nothing: nothing
            x._reduction_axes(dim)
            return x - x
        (axis,) = O._normalize_axis(dim, self.ndim)
        return O.LogSoftmax.apply(x, axis)

    def softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """``exp(x) / sum(exp(x))`` along ``dim``, computed stably; floating input
        (``dtype`` converts first, as in PyTorch)."""
        x = self._float_for("softmax", dtype)
        if x.ndim == 0 or x.numel() == 0:  # one value: 1 (its gradient 0); nothing: nothing
            x._reduction_axes(dim)
            return (x - x).exp()
        (axis,) = O._normalize_axis(dim, self.ndim)
        return O.Softmax.apply(x, axis)

    def _float_for(self, name: str, dtype: Any) -> Tensor:
        """``self`` converted to ``dtype`` if given; a DTypeError unless it is floating."""
        x = self if dtype is None else self.to(dtype=dtype)
        if x.dtype.kind != "f":
            raise DTypeError(f"{name}(): the input must be floating point, got {x.dtype}; use "
                             f".float().{name}(...) or pass dtype=")
        return x

    # ------------------------------------------------------------ reductions

    def sum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
            dtype: Any = None) -> Tensor:
        """Sum over ``dim`` (all if None); bool and integer tensors sum to int64.
        ``dtype`` converts first."""
        x = self if dtype is None else self.to(dtype=dtype)
        out = O.Sum.apply(x, self._reduction_axes(dim), keepdim)
        return out if dtype is None or out.dtype == dtype else out.to(dtype=dtype)

    def mean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
             dtype: Any = None) -> Tensor:
        """Mean over ``dim`` (all if None) of a floating tensor (``dtype`` converts first)."""
        x = self._float_for("mean", dtype)
        return O.Mean.apply(x, self._reduction_axes(dim), keepdim)

    def _dim(self, name: str, dim: Any) -> int:
        """``dim`` as a non-negative axis of this tensor, for an op that works along one
        dimension; a 0-d tensor has none (an IndexError that says so, as PyTorch's)."""
        (axis,) = O._normalize_axis(dim, self.ndim)
        if self.ndim == 0:
            raise IndexError(f"{name}: dimension specified as {dim} but the tensor has no "
                             f"dimensions (0-d); reshape(1) it first")
        return axis

    def _reduction_axes(self, dim: Any) -> tuple[int, ...] | None:
        """The axes a reduction over ``dim`` reduces, as PyTorch reads ``dim``: None and an
        empty tuple or list mean every axis, and a 0-d tensor takes ``dim`` 0 or -1 (its
        one value: None here)."""
        if dim is None or (isinstance(dim, tuple | list) and len(dim) == 0):
            return None
        if self.ndim == 0:
            O._normalize_axis(dim, 1)  # 0 or -1, else an IndexError naming it
            return None
        return O._normalize_axis(dim, self.ndim)

    def _reduce_check(self, name: str, dim: Any) -> tuple[int, ...] | None:
        axes = self._reduction_axes(dim)
        if self._data.size == 0 and (axes is None or builtins.any(
                self.shape[a] == 0 for a in axes)):
            raise RuntimeError(f"{name}(): cannot reduce an empty dimension (shape {self.shape})")
        return axes

    def amax(self, dim: int | Sequence[int] | None = (), keepdim: bool = False) -> Tensor:
        """Maximum over ``dim`` (all dims if ``()`` or None); ties share the gradient."""
        axes = self._reduce_check("amax", None if dim == () else dim)
        return O.Amax.apply(self, axes, keepdim)

    def amin(self, dim: int | Sequence[int] | None = (), keepdim: bool = False) -> Tensor:
        """Minimum over ``dim`` (all dims if ``()`` or None); ties share the gradient."""
        axes = self._reduce_check("amin", None if dim == () else dim)
        return O.Amin.apply(self, axes, keepdim)

    def _extreme(self, name: str, dim: Any, keepdim: bool) -> Any:
        if isinstance(dim, Tensor):  # torch.max(a, b): element-wise
            return self.maximum(dim) if name == "max" else self.minimum(dim)
        if dim is None:
            return (self.amax if name == "max" else self.amin)()
        if self.ndim == 0:  # its one value, at index 0
            self._reduction_axes(dim)
            index = Tensor(backend.array_module(self.device).zeros((), dtype=int64))
            return (MaxResult if name == "max" else MinResult)(O.Clone.apply(self), index)
        (axis,) = self._reduce_check(name, dim)
        find = self._data.argmax if name == "max" else self._data.argmin
        index = backend.get_array_module(self._data).expand_dims(find(axis=axis), axis)
        values = O.TakeAlongDim.apply(self, index, axis, keepdim)
        indices = Tensor((index if keepdim else index.squeeze(axis)).astype(int64, copy=False))
        return (MaxResult if name == "max" else MinResult)(values, indices)

    def max(self, dim: int | Tensor | None = None, keepdim: bool = False) -> Any:
        """As ``torch.max``: without ``dim`` the largest value (0-d; ties share the gradient);
        with ``dim`` a named pair ``(values, indices)`` over that dimension (the first
        maximum's index; its value gets the gradient); with a Tensor, ``maximum``."""
        return self._extreme("max", dim, keepdim)

    def min(self, dim: int | Tensor | None = None, keepdim: bool = False) -> Any:
        """As :meth:`max`, for the smallest values."""
        return self._extreme("min", dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum over ``dim`` (of the flattened tensor if None), int64."""
        return self._arg("argmax", dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return self._arg("argmin", dim, keepdim)

    def _arg(self, name: str, dim: int | None, keepdim: bool) -> Tensor:
        if dim is not None and not isinstance(dim, numbers.Integral):  # (a tuple: PyTorch's
            raise TypeError(f"{name}(): argument 'dim' must be an int, not "  # TypeError)
                            f"{type(dim).__name__}")
        axes = self._reduce_check(name, dim)
        axis = None if axes is None else axes[0]
        out = getattr(self._data, name)(axis=axis)
        if keepdim:  # (no dim: every dim kept, of size 1, as in PyTorch)
            out = (out.reshape((1,) * self.ndim) if axis is None
                   else backend.get_array_module(out).expand_dims(out, axis))
        return Tensor(backend.get_array_module(out).asarray(out).astype(int64, copy=False))

    # ------------------------------------------------------------ shapes

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """The same elements in ``shape`` (one size may be -1): a view when the memory
        allows it, else a copy."""
        shape = _shape_arg(shape)
        if builtins.any(s < -1 for s in shape):  # (NumPy would infer any negative size)
            raise ShapeError(f"reshape: invalid size {builtins.min(shape)} in {tuple(shape)}: "
                             f"sizes must be >= 0, or -1 for the one inferred from the rest")
        known = int(np.prod([s for s in shape if s >= 0]))  # one -1 is inferred from the rest
        unknown = shape.count(-1)
        if unknown > 1 or (
                self.numel() != known if unknown == 0 else known == 0 or self.numel() % known):
            raise ShapeError(
                f"reshape: cannot reshape a tensor of shape {self.shape} ({self.numel()} "
                f"elements) into {tuple(shape)}"
            )
        return O.Reshape.apply(self, tuple(shape))

    def view(self, *shape: int | Sequence[int]) -> Tensor:
        """As :meth:`reshape`, but always a view: raises, as PyTorch, when the strides do
        not allow one (e.g. ``x.T.view(-1)``); use ``reshape`` (copies) then."""
        if len(shape) == 1 and isinstance(shape[0], np.dtype | type | str):
            if np.dtype(shape[0]) == self.dtype:  # (str/type: np.dtype reads them too)
                return self.view(self.shape)
            raise TypeError(f"view({shape[0]!r}): reinterpreting the bytes as another dtype "
                            f"is not supported; convert the values with .to(dtype)")
        out = self.reshape(*shape)
        if self.numel() and out._base is None:  # Reshape had to copy
            raise RuntimeError(
                f"view size is not compatible with input tensor's size and stride (at least "
                f"one dimension spans across two contiguous subspaces): shape {self.shape} "
                f"with strides {self._data.strides} cannot be viewed as {tuple(_shape_arg(shape))}."
                f" Use .reshape(...) instead."
            )
        return out

    def view_as(self, other: Tensor) -> Tensor:
        return self.view(other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Merge dimensions ``start_dim .. end_dim`` (inclusive) into one (a 0-d tensor
        becomes ``[1]``)."""
        (s,), (e,) = (O._normalize_axis(d, max(self.ndim, 1)) for d in (start_dim, end_dim))
        if s > e:
            raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                             f"for a tensor with {self.ndim} dimensions")
        if self.ndim == 0:
            return self.reshape(1)
        new = self.shape[:s] + (int(np.prod(self.shape[s:e + 1])),) + self.shape[e + 1:]
        return self.reshape(new)

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        """Drop dimensions of size 1 (only those in ``dim`` if given; others stay)."""
        axes = range(self.ndim) if dim is None else O._normalize_axis(dim, self.ndim)
        return self.reshape([n for i, n in enumerate(self.shape) if not (i in axes and n == 1)])

    def unsqueeze(self, dim: int) -> Tensor:
        """Insert a dimension of size 1 at ``dim`` (``-1`` appends one)."""
        (axis,) = O._normalize_axis(dim, self.ndim + 1)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def _reshaped_in_place(self, name: str, view: Tensor) -> Tensor:
        """Make self the view ``view`` of itself (transpose_, squeeze_, ...): the same memory
        in a new shape, and, when recording, the view's graph node."""
        if is_grad_enabled() and self.requires_grad:
            if self.grad_fn is None:
                raise RuntimeError(f"{name}: {_LEAF_INPLACE}")
            if self._base is not None:
                raise RuntimeError(f"{name}: in-place view op with autograd on a view of another "
                                   f"tensor; use the out-of-place {name[:-1]}() instead")
        self._data = view._data
        self._version_counter[0] += 1
        if view._requires_grad:
            self._take_node(view.grad_fn)
        return self

    def squeeze_(self, dim: int | Sequence[int] | None = None) -> Tensor:
        return self._reshaped_in_place("squeeze_", self.squeeze(dim))

    def unsqueeze_(self, dim: int) -> Tensor:
        return self._reshaped_in_place("unsqueeze_", self.unsqueeze(dim))

    def transpose_(self, dim0: int, dim1: int) -> Tensor:
        return self._reshaped_in_place("transpose_", self.transpose(dim0, dim1))

    swapaxes_ = swapdims_ = transpose_

    def t_(self) -> Tensor:
        if self.ndim > 2:
            raise ShapeError(f"t_() expects a tensor with <= 2 dimensions, but self is "
                             f"{self.ndim}D")
        return self._reshaped_in_place("t_", self.t())

    def permute(self, *dims: int | Sequence[int]) -> Tensor:
        dims = O._normalize_axis(tuple(_shape_arg(dims)), self.ndim) or ()
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute: {dims} is not a permutation of the {self.ndim} dims")
        return O.Permute.apply(self, dims)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        (d0,), (d1,) = (O._normalize_axis(d, builtins.max(self.ndim, 1)) for d in (dim0, dim1))
        if self.ndim == 0:
            return self
        dims = list(range(self.ndim))
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return self.permute(dims)

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dimensions, got {self.shape}")
        return self.T

    def __getitem__(self, index: Any) -> Tensor:
        index = _raw_index(index)
        first = _integers_first(index)
        if first is not None:  # PyTorch's order: the integers select, then the rest
            return self[first[0]][first[1]]
        if self.device == "cuda":
            _check_gpu_index(self.shape, index)
        out = O.Index.apply(self, index)
        if out._base is not None:  # a slice: in-place ops on it write through self
            out._view_of = (self, index)
        return out

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """Split dimension ``dim`` into ``sizes`` (one may be -1): ``[N, 12]`` -> ``[N, 3, 4]``."""
        axis = self._dim("unflatten", dim)
        sizes, n = list(sizes), self.shape[axis]
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) == 1 and known:  # inferred from this dim (also when it is empty)
            sizes[sizes.index(-1)] = n // known
        if sizes.count(-1) > 1 or math.prod(sizes) != n:
            raise ShapeError(f"unflatten: sizes {tuple(sizes)} do not multiply to dimension "
                             f"{axis}'s size {n} (shape {self.shape})")
        return self.reshape(self.shape[:axis] + tuple(sizes) + self.shape[axis + 1:])

    def expand(self, *sizes: int | Sequence[int]) -> Tensor:
        """A view with size-1 dimensions repeated to ``sizes`` (-1 keeps a size; new
        dimensions may be added in front), without copying; backward sums the copies."""
        sizes = _shape_arg(sizes)
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater "
                             f"or equal to the number of dimensions in the tensor ({self.ndim})")
        target = list(sizes[:lead])
        if builtins.any(n < 0 for n in target):
            raise ShapeError(f"expand: -1 is not allowed in a leading, non-existing dimension "
                             f"(sizes {list(sizes)} for shape {list(self.shape)})")
        for n, old in zip(sizes[lead:], self.shape):
            if n != -1 and old != 1 and n != old:
                raise ShapeError(
                    f"The expanded size of the tensor ({n}) must match the existing size ({old}) "
                    f"at non-singleton dimension {len(target)}.  Target sizes: {list(sizes)}.  "
                    f"Tensor sizes: {list(self.shape)}")
            target.append(old if n == -1 else n)
        if tuple(target) == self.shape:  # nothing repeated: a plain (writable) view
            return self[...]
        return O.Expand.apply(self, tuple(target))

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def repeat(self, *sizes: int | Sequence[int]) -> Tensor:
        """Tile the tensor ``sizes[d]`` times along each dimension (a copy; extra leading
        sizes add dimensions): ``[2, 3].repeat(2, 1, 1)`` is ``[2, 2, 3]``."""
        reps = _shape_arg(sizes)
        if builtins.any(r < 0 for r in reps):
            raise ShapeError(f"repeat: sizes must be >= 0, got {reps}")
        if len(reps) < self.ndim:
            raise ShapeError(f"Number of dimensions of repeat dims ({len(reps)}) can not be "
                             f"smaller than number of dimensions of tensor ({self.ndim})")
        return O.Repeat.apply(self, reps)

    def split(self, split_size_or_sections: int | Sequence[int], dim: int = 0
              ) -> tuple[Tensor, ...]:
        """Views of consecutive pieces along ``dim``: of ``split_size`` each (the last may be
        smaller), or of the given sizes, which must add up to the dimension's size."""
        axis = self._dim("split", dim)
        n = self.shape[axis]
        if isinstance(split_size_or_sections, numbers.Integral):
            size = int(split_size_or_sections)
            if size <= 0:
                raise ShapeError(f"split: split_size must be positive, got {size}")
            sizes = [size] * (n // size) + ([n % size] if n % size or n == 0 else [])
        else:
            sizes = [int(k) for k in split_size_or_sections]
            if builtins.sum(sizes) != n or builtins.any(k < 0 for k in sizes):
                raise ShapeError(
                    f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's "
                    f"size at dimension {axis}), but got split_sizes={sizes}")
        before, start, out = (slice(None),) * axis, 0, []
        for k in sizes:
            out.append(self[before + (slice(start, start + k),)])
            start += k
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` views of ``ceil(size / chunks)`` each along ``dim``."""
        if chunks <= 0:
            raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        axis = self._dim("chunk", dim)
        if self.shape[axis] == 0:  # as PyTorch: ``chunks`` empty pieces
            return tuple(self.narrow(dim, 0, 0) for _ in range(chunks))
        return self.split(builtins.max(-(-self.shape[axis] // chunks), 1), dim)

    def flip(self, *dims: int | Sequence[int]) -> Tensor:
        """A copy with the order of ``dims`` reversed."""
        axes = O._normalize_axis(_shape_arg(dims), self.ndim)  # (0-d: dim 0 or -1, as torch)
        return O.Flip.apply(self, axes if self.ndim else ())

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
             ) -> Tensor:
        """The entries shifted cyclically by ``shifts`` along ``dims`` (an int or a tuple of
        each, as many shifts as dims); with ``dims`` None the flattened tensor is shifted by
        one int and takes self's shape again."""
        shifts, dims = (_int_tuple("roll", "shifts", shifts),
                        None if dims is None else _int_tuple("roll", "dims", dims))
        if dims is None:
            if len(shifts) != 1:
                raise InvalidArgument(f"roll: shifts and dimensions must align: {len(shifts)} "
                                      f"shifts {shifts} without dims (one shift rolls the "
                                      f"flattened tensor)")
            return O.Roll.apply(self, int(shifts[0]), None)
        if len(dims) != len(shifts):
            raise InvalidArgument(f"roll: shifts and dimensions must align: shifts {shifts}, "
                                  f"dims {dims}")
        axes = tuple(self._dim("roll", d) for d in dims)  # (a dim may repeat, as in PyTorch)
        return O.Roll.apply(self, tuple(int(s) for s in shifts), axes)

    def ravel(self) -> Tensor:
        return self.reshape(-1)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """The view ``start:start + length`` along ``dim``."""
        axis = self._dim("narrow", dim)
        if start < 0:
            start += self.shape[axis]
        if not 0 <= start <= start + length <= self.shape[axis]:
            raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension "
                             f"size ({self.shape[axis]})")
        return self[(slice(None),) * axis + (slice(start, start + length),)]

    def select(self, dim: int, index: int) -> Tensor:
        """The slice at ``index`` along ``dim``, without that dimension."""
        axis = self._dim("select", dim)
        return self[(slice(None),) * axis + (index,)]

    def unfold(self, dimension: int, size: int, step: int) -> Tensor:
        """The windows of ``size`` elements along ``dimension``, one every ``step``, as a view
        with one more dimension, the window, last: ``[4, 10].unfold(1, 3, 2)`` is
        ``[4, 4, 3]``. A write through it reaches self (refused when windows overlap,
        ``step < size``: one element would be written twice). Gradients of overlapping
        windows add up. (Not ``F.unfold``, the im2col of images.)"""
        for name, value in (("dimension", dimension), ("size", size), ("step", step)):
            _int_dim_arg("unfold", name, value)
        (axis,) = O._normalize_axis(dimension, self.ndim)  # (a 0-d tensor: dim 0 or -1)
        length = self.shape[axis] if self.ndim else 1
        if size < 0:
            raise RuntimeError(f"size is {size} but must be >= 0")
        if size > length:
            raise RuntimeError(f"maximum size for tensor at dimension {axis} is {length} but "
                               f"size is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        if self.ndim == 0:  # (one element: one window of it, or an empty one)
            return self.reshape(1)[:size]
        return O.Unfold.apply(self, axis, size, step)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal ``[i, i + offset]`` of each ``dim1`` x ``dim2`` plane, as a view with
        the diagonal last: ``[B, n, n].diagonal(0, 1, 2)`` is ``[B, n]``. ``offset`` > 0 is
        above the main diagonal, < 0 below. Writes through it reach self
        (``x.diagonal().fill_(0)``), as PyTorch's."""
        for name, value in (("offset", offset), ("dim1", dim1), ("dim2", dim2)):
            _int_dim_arg("diagonal", name, value)
        if self.ndim < 2:
            O._normalize_axis(1, self.ndim)  # (PyTorch's IndexError: dim 1 out of range)
        d1, d2 = (self._dim("diagonal", d) for d in (dim1, dim2))
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        return O.Diagonal.apply(self, int(offset), d1, d2)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
        """A tensor with one more dimension whose ``(dim1, dim2)`` diagonals (at ``offset``)
        hold self's last dimension, zeros elsewhere: ``[B, n]`` -> ``[B, n, n]``. A copy;
        differentiable."""
        for name, value in (("offset", offset), ("dim1", dim1), ("dim2", dim2)):
            _int_dim_arg("diag_embed", name, value)
        if self.ndim == 0:
            O._normalize_axis(-2, 1)  # (PyTorch's IndexError: no last dimension to embed)
        d1, d2 = O._normalize_axis(dim1, self.ndim + 1)[0], O._normalize_axis(dim2,
                                                                            self.ndim + 1)[0]
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        return O.DiagEmbed.apply(self, int(offset), d1, d2)

    def diag(self, diagonal: int = 0) -> Tensor:
        """A 1-D tensor as the ``diagonal``-th diagonal of a square matrix (zeros elsewhere),
        or a 2-D tensor's ``diagonal``-th diagonal (a copy, unlike :meth:`diagonal`), as
        ``torch.diag``."""
        _int_dim_arg("diag", "diagonal", diagonal)
        if self.ndim == 1:
            return self.diag_embed(diagonal)
        if self.ndim == 2:
            return self.diagonal(diagonal).clone()
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {self.ndim}D")

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]
                ) -> Tensor:
        """Move dimension(s) ``source`` to position(s) ``destination``."""
        src = O._normalize_axis(source, self.ndim)
        dst = O._normalize_axis(destination, self.ndim)
        if self.ndim == 0:  # (dims 0 and -1 of a 0-d tensor: nothing moves)
            return self.view(())
        order = [d for d in range(self.ndim) if d not in src]
        for s, d in sorted(zip(dst, src)):
            order.insert(s, d)
        return self.permute(order)

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Tensor:
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def broadcast_to(self, *size: int | Sequence[int]) -> Tensor:
        return self.expand(*size)

    def tile(self, *dims: int | Sequence[int]) -> Tensor:
        """``repeat`` with ones put in front when ``dims`` is shorter than the shape."""
        reps = _shape_arg(dims)
        return self.repeat((1,) * (self.ndim - len(reps)) + reps)

    def masked_select(self, mask: Any) -> Tensor:
        """The entries where the bool ``mask`` is True, as a 1-D tensor (both broadcast)."""
        mask = _bool_condition("masked_select", mask)
        shape = O.broadcast_shapes("masked_select", self.shape, mask.shape)
        return self.expand(shape)[mask.expand(shape)._data]

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        """The slices along ``dim``, each without that dimension."""
        axis = self._dim("unbind", dim)
        return tuple(self[(slice(None),) * axis + (i,)] for i in range(self.shape[axis]))

    # ------------------------------------------------------------ selection and ordering

    def where(self, condition: Any, other: Any) -> Tensor:
        """``tt.where(condition, self, other)``."""
        return where(condition, self, other)

    def masked_fill(self, mask: Any, value: Any) -> Tensor:
        """A copy with ``value`` wherever the bool ``mask`` is True (the two broadcast
        together, as in PyTorch; ``masked_fill_`` keeps self's shape); the dtype stays self's.
        ``value`` is a number or a 0-d tensor."""
        mask = _bool_condition("masked_fill", mask)
        O.broadcast_shapes("masked_fill", self.shape, mask.shape)
        if isinstance(value, Tensor):
            if value.ndim:
                raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, but "
                                 f"got tensor with {value.ndim} dimension(s).")
            value = value.to(self.device, self.dtype)
        else:
            value = scalar_in(value, self.dtype, "masked_fill")
        return O.Where.apply(mask, value, self).contiguous()  # (a new tensor, as PyTorch's)

    def masked_fill_(self, mask: Any, value: Any) -> Tensor:
        mask = _bool_condition("masked_fill_", mask)
        if O.broadcast_shapes("masked_fill_", self.shape, mask.shape) != self.shape:
            raise ShapeError(f"masked_fill_: mask of shape {mask.shape} does not broadcast to "
                             f"the tensor's shape {self.shape}")
        return self._inplace("masked_fill_", lambda s: s.masked_fill(mask, value), value)

    def _index_array(self, name: str, index: Any) -> Any:
        idx = index._data if isinstance(index, Tensor) else np.asarray(index)
        if idx.dtype.kind != "i":  # (not uint8 or bool: indexing would read them as a mask)
            raise DTypeError(f"{name}(): Expected dtype int64 for index, got {idx.dtype}")
        return backend.to_device(idx, self.device)

    def _one_element(self, op: Callable, dim: Any, index: Any, *src: Any, **kw: Any) -> Tensor:
        """``op`` (gather, scatter, scatter_add) on this 0-d tensor, which PyTorch treats as
        one of shape (1,) along dim 0 or -1: 0-d index and src become 1-D, and the result
        takes the shape of a gather's index, or stays 0-d."""
        O._normalize_axis(dim, 0)  # 0 or -1, else an IndexError

        def as_1d(t: Any) -> Any:
            return t.reshape(1) if isinstance(t, Tensor) and t.ndim == 0 else t

        index = Tensor(self._index_array(op.__name__, index))
        out = op(self.reshape(1), 0, as_1d(index), *map(as_1d, src), **kw)
        return out.reshape(index.shape if op is Tensor.gather else ())

    def _check_index_range(self, name: str, idx: Any, axis: int) -> None:
        n = self.shape[axis]
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
            raise IndexRangeError(f"{name}(): index {bad} is out of bounds for dimension {axis} "
                                  f"with size {n}")

    def gather(self, dim: int, index: Tensor) -> Tensor:
        """``out[i][j] = self[i][index[i][j]]`` for ``dim=1`` (likewise for any dim): ``out``
        has ``index``'s shape, which may be smaller than self's except along ``dim``."""
        if self.ndim == 0:
            return self._one_element(Tensor.gather, dim, index)
        axis = self._dim("gather", dim)
        idx = self._index_array("gather", index)
        if idx.ndim != self.ndim or builtins.any(
                k > n for d, (k, n) in enumerate(zip(idx.shape, self.shape)) if d != axis):
            raise ShapeError(f"gather(): index of shape {list(idx.shape)} does not fit input of "
                             f"shape {list(self.shape)}: same number of dimensions, and no "
                             f"larger apart from dimension {axis}")
        self._check_index_range("gather", idx, axis)
        return O.Gather.apply(self, idx, axis)

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        """The entries ``index`` (1-D integers) along ``dim``."""
        axis = self._dim("index_select", dim)
        idx = self._index_array("index_select", index)
        if idx.ndim > 1:
            raise ShapeError(f"index_select(): Index is supposed to be a vector, got shape "
                             f"{list(idx.shape)}")
        self._check_index_range("index_select", idx, axis)
        return self[(slice(None),) * axis + (idx.reshape(-1),)]

    def scatter(self, dim: int, index: Tensor, src: Any = None, value: Any = None, *,
                reduce: str | None = None) -> Tensor:
        """A copy with ``src[i][j]`` (or the number ``value``) written at
        ``[i][index[i][j]]`` for ``dim=1`` (likewise for any dim). ``reduce="add"`` adds
        them instead (:meth:`scatter_add`), ``"multiply"`` multiplies (:meth:`scatter_reduce`
        with ``"prod"``)."""
        if src is None:
            src = value
        if src is None:
            raise TypeError("scatter() needs src (a tensor) or value (a number)")
        if self.ndim == 0:
            return self._one_element(Tensor.scatter, dim, index, src, reduce=reduce)
        if reduce is not None:
            if reduce not in ("add", "multiply"):
                raise InvalidArgument("reduce argument must be either add or multiply.")
            if isinstance(src, Tensor):
                warnings.warn("The reduce argument of torch.scatter with Tensor src is "
                              "deprecated and will be removed in a future PyTorch release. Use "
                              "scatter_add instead.", UserWarning, stacklevel=2)
            else:  # a number: added (multiplied) at every index
                src = full(self._index_array("scatter", index).shape, src, dtype=self.dtype,
                           device=self.device)
            if reduce == "multiply":
                return self.scatter_reduce(dim, index, src, "prod")
            return self.scatter_add(dim, index, src)
        return O.Scatter.apply(self, *self._scatter_args("scatter", dim, index, src))

    def scatter_(self, dim: int, index: Tensor, src: Any = None, value: Any = None, *,
                 reduce: str | None = None) -> Tensor:
        return self._inplace("scatter_", lambda s: s.scatter(dim, index, src, value,
                                                             reduce=reduce), src)

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy with ``src[i][j]`` added at ``[i][index[i][j]]`` for ``dim=1`` (likewise for
        any dim); repeated indices add up. ``src`` is a tensor at least of ``index``'s shape."""
        if not isinstance(src, Tensor):
            raise TypeError(f"scatter_add(): src must be a Tensor, got {type(src).__name__}")
        if self.ndim == 0:
            return self._one_element(Tensor.scatter_add, dim, index, src)
        return O.ScatterAdd.apply(self, *self._scatter_args("scatter_add", dim, index, src))

    def scatter_add_(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        return self._inplace("scatter_add_", lambda s: s.scatter_add(dim, index, src), src)

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                       include_self: bool = True) -> Tensor:
        """A copy where each place ``index`` points at along ``dim`` (as :meth:`scatter`)
        holds the ``reduce`` of the ``src`` values sent there: ``"sum"``, ``"prod"``,
        ``"mean"`` (integers round down), ``"amax"`` or ``"amin"``, taking self's value in
        too if ``include_self``. ``index`` and ``src`` as :meth:`scatter_add`'s; gradients as
        PyTorch's (amax/amin share it among equal maxima)."""
        if reduce not in ("sum", "prod", "mean", "amax", "amin"):
            raise InvalidArgument(f"reduce argument must be either sum, prod, mean, amax or "
                                  f"amin, got {reduce}")
        if not isinstance(src, Tensor):
            raise TypeError(f"scatter_reduce(): argument 'src' (position 3) must be Tensor, not "
                            f"{type(src).__name__}")
        if self.ndim == 0:
            return self._one_element(Tensor.scatter_reduce, dim, index, src, reduce=reduce,
                                     include_self=include_self)
        idx, src, axis = self._scatter_args("scatter_reduce", dim, index, src)
        return O.ScatterReduce.apply(self, idx, src, axis, reduce, builtins.bool(include_self))

    def scatter_reduce_(self, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                        include_self: bool = True) -> Tensor:
        return self._inplace("scatter_reduce_", lambda s: s.scatter_reduce(
            dim, index, src, reduce, include_self=include_self), src)

    def _scatter_args(self, name: str, dim: int, index: Any, src: Any) -> tuple:
        """``(index, src, axis)`` of a scatter, checked: ``index`` has self's number of
        dimensions, is no larger than ``src`` (a tensor, or a number) and, apart from
        ``dim``, than self; its values are in range along ``dim``."""
        axis = self._dim(name, dim)
        idx = self._index_array(name, index)
        if idx.ndim == 0:
            idx = idx.reshape((1,) * builtins.max(self.ndim, 1))
        elif idx.size == 0:  # nothing to write, whatever its shape (as PyTorch)
            idx = idx.reshape((0,) * self.ndim)
        limits = [n if d != axis else None for d, n in enumerate(self.shape)]
        if isinstance(src, Tensor):
            check_same_dtype(f"{name}()", self, src)  # (PyTorch casts a number, not a tensor)
            src = src.to(self.device)
            limits = [m if n is None else builtins.min(n, m) for n, m in zip(limits, src.shape)]
        else:
            src = scalar_array(src, self.dtype)
        if idx.ndim != self.ndim or builtins.any(
                n is not None and k > n for k, n in zip(idx.shape, limits)):
            raise ShapeError(f"{name}(): index of shape {list(idx.shape)} does not fit self of "
                             f"shape {list(self.shape)} (and src): same number of dimensions, "
                             f"and no larger apart from dimension {axis}")
        self._check_index_range(name, idx, axis)
        return idx, src, axis

    def index_add(self, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
        """A copy with ``alpha * source`` added at the entries ``index`` (1-D integers) along
        ``dim``: ``source`` has self's shape but ``index``'s length along ``dim``; repeated
        indices add up. (A ``scatter_add`` with the index repeated across ``source``.)"""
        idx, source, axis = self._index_args("index_add", dim, index, source)
        if not (isinstance(alpha, numbers.Number) and alpha == 1):
            source = source * scalar_array(alpha, self.dtype)
        return O.ScatterAdd.apply(self, idx, source, axis)

    def _index_args(self, name: str, dim: int, index: Any, source: Any) -> tuple:
        """``(index, source, axis)`` of index_add / index_reduce, checked, with the 1-D
        ``index`` repeated across ``source`` (self's shape but the index's length along
        ``dim``): the scatter that does the same."""
        axis = self._dim(name, dim)
        idx = self._index_array(name, index)
        if idx.ndim > 1:
            raise ShapeError(f"{name}(): index must be a vector (1-D), got shape "
                             f"{list(idx.shape)}")
        idx = idx.reshape(-1)
        source = _as_operand(source, self, f"{name}()").to(self.device)
        check_same_dtype(f"{name}()", self, source)
        want = self.shape[:axis] + (idx.size,) + self.shape[axis + 1:]
        if source.shape != want:
            raise ShapeError(f"{name}(): source of shape {list(source.shape)} does not fit: "
                             f"it must be self's shape {list(self.shape)} with dimension "
                             f"{axis} the index's length {idx.size}, {list(want)}")
        self._check_index_range(name, idx, axis)
        xp = backend.get_array_module(idx)
        place = [1] * self.ndim
        place[axis] = idx.size
        return xp.broadcast_to(idx.reshape(place), want), source, axis

    def index_reduce(self, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                     include_self: bool = True) -> Tensor:
        """:meth:`index_add`'s placement (the slices ``index`` along ``dim``) with
        :meth:`scatter_reduce`'s reductions: ``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``."""
        if reduce not in ("prod", "mean", "amax", "amin"):
            raise InvalidArgument(f"index_reduce(): Expected reduce to be one of prod, mean, "
                                  f"amax or amin but got {reduce}.")
        idx, source, axis = self._index_args("index_reduce", dim, index, source)
        return O.ScatterReduce.apply(self, idx, source, axis, reduce,
                                     builtins.bool(include_self))

    def index_reduce_(self, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                      include_self: bool = True) -> Tensor:
        return self._inplace("index_reduce_", lambda s: s.index_reduce(
            dim, index, source, reduce, include_self=include_self), source)

    def index_add_(self, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
        return self._inplace("index_add_", lambda s: s.index_add(dim, index, source, alpha=alpha),
                             source)

    def index_put(self, indices: Sequence[Any], values: Any, accumulate: bool = False
                  ) -> Tensor:
        """A copy with ``self[indices] = values`` (``indices`` a tuple of index tensors, one
        per leading dimension; ``values`` broadcasts to ``self[indices]``'s shape), or with
        them added if ``accumulate``, where repeated indices add up."""
        if not isinstance(indices, tuple | list):
            raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not "
                            f"{type(indices).__name__}")
        if not isinstance(values, Tensor):
            values = tensor(values, dtype=self.dtype, device=self.device)
        if values.dtype != self.dtype:
            raise DTypeError(f"Index put requires the source and destination dtypes match, got "
                             f"{torch_scalar_name(self.dtype)} for the destination and "
                             f"{torch_scalar_name(values.dtype)} for the source.")
        if not accumulate:
            out = self.clone()
            out[tuple(indices)] = values
            return out
        arrays = []
        for i in indices:  # a bool mask stands for the indices of its True entries
            i = i if isinstance(i, Tensor) else tensor(i)
            arrays += [t._data for t in i.nonzero(as_tuple=True)] if i.dtype == bool_ else [
                self._index_array("index_put", i)]
        if len(arrays) > self.ndim:
            raise IndexRangeError(f"index_put(): too many indices for tensor of dimension "
                                  f"{self.ndim} (got {len(arrays)})")
        xp = backend.get_array_module(self._data)
        arrays = xp.broadcast_arrays(*arrays)
        flat, rest = 0, self.shape[len(arrays):]
        for axis, idx in enumerate(arrays):  # the position in the leading dims, row-major
            self._check_index_range("index_put", idx + (idx < 0) * self.shape[axis], axis)
            flat = flat * self.shape[axis] + idx % builtins.max(self.shape[axis], 1)
        values = values.to(self.device).expand(arrays[0].shape + rest).reshape((-1,) + rest)
        lead = self.reshape((-1,) + rest)
        return lead.index_add(0, Tensor(flat.reshape(-1)), values).reshape(self.shape)

    def index_put_(self, indices: Sequence[Any], values: Any, accumulate: bool = False
                   ) -> Tensor:
        return self._inplace("index_put_", lambda s: s.index_put(indices, values, accumulate),
                             values)

    def take(self, index: Tensor) -> Tensor:
        """The entries of the flattened tensor at ``index`` (any shape; negative counts from
        the end), in ``index``'s shape."""
        idx = self._index_array("take", index)
        n = self.numel()
        if idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
            bad = int(idx.min()) if int(idx.min()) < -n else int(idx.max())
            raise IndexRangeError(f"take(): index {bad} is out of range for a tensor of {n} "
                                  f"elements (shape {self.shape})")
        return self.reshape(-1)[Tensor(idx)]

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        """The indices that sort ``dim``, int64. Always stable (equal values keep their
        order), which ``stable=False`` in PyTorch allows too; NaN counts as the largest."""
        (axis,) = O._normalize_axis(dim, self.ndim)
        a, xp = self._data, backend.get_array_module(self._data)
        if a.ndim == 0:  # (its one value: sort, argsort and topk of a 0-d tensor work)
            return Tensor(xp.zeros((), dtype=int64))
        stable = {"kind": "stable"} if xp is np else {}  # CuPy's argsort is always stable
        if not descending:
            return Tensor(xp.argsort(a, axis=axis, **stable).astype(int64, copy=False))
        # descending and stable: sort the reversed array, reverse the order, map indices back
        order = xp.flip(xp.argsort(xp.flip(a, axis), axis=axis, **stable), axis)
        return Tensor((a.shape[axis] - 1 - order).astype(int64, copy=False))

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """``(values, indices)`` sorted along ``dim`` (see :meth:`argsort`); the gradient
        goes back to where each value came from."""
        indices = self.argsort(dim, descending)
        if self.ndim == 0:
            return SortResult(self.clone(), indices)
        (axis,) = O._normalize_axis(dim, self.ndim)
        return SortResult(O.Gather.apply(self, indices._data, axis), indices)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
        """``(values, indices)`` of the ``k`` largest (or smallest) entries along ``dim``,
        in order. Top-5 accuracy: ``_, pred = out.topk(5, 1)``."""
        (axis,) = O._normalize_axis(dim, self.ndim)
        n = self.shape[axis] if self.ndim else 1
        if not 0 <= k <= n:
            raise ShapeError(f"topk: selected index k out of range: k = {k} but dimension "
                             f"{axis} has size {n}")
        if self.ndim == 0:
            return TopkResult(self.clone(), self.argsort(dim, descending=largest))
        idx = _topk_indices(self._data, k, axis, largest)
        if idx is None:  # a full sort: on the GPU, or k a large part of the axis
            order = self.argsort(dim, descending=largest)._data
            idx = order[(slice(None),) * axis + (slice(0, k),)]
        return TopkResult(O.Gather.apply(self, idx, axis), Tensor(idx))

    @_accumulates_in_float32
    def cumsum(self, dim: int, *, dtype: Any = None) -> Tensor:
        """Running sums along ``dim``; integer and bool tensors sum in int64, float16 ones
        in float32 (as PyTorch accumulates; the result is float16 again). ``dtype``
        converts first."""
        return self._scan(O.Cumsum, dim, dtype)

    @_accumulates_in_float32
    def cumprod(self, dim: int, *, dtype: Any = None) -> Tensor:
        """Running products along ``dim``, with :meth:`cumsum`'s dtypes; zeros get
        PyTorch's gradient (:class:`~tinytrain.autograd.ops.Cumprod`)."""
        return self._scan(O.Cumprod, dim, dtype)

    def cumprod_(self, dim: int, *, dtype: Any = None) -> Tensor:
        return self._inplace("cumprod_", lambda s: s.cumprod(dim, dtype=dtype))

    def _scan(self, op: type[Function], dim: int, dtype: Any) -> Tensor:
        _int_dim(op.__name__.lower(), dim)
        if dtype is not None:  # (the scan in that dtype, as PyTorch: int32 stays int32)
            out = self.to(dtype=dtype)._scan(op, dim, None)
            return out if out.dtype == np.dtype(dtype) else out.to(dtype=dtype)
        (axis,) = O._normalize_axis(dim, self.ndim)
        if self.ndim == 0:
            return op.apply(self.reshape(1), 0).reshape(())
        return op.apply(self, axis)

    def diff(self, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
             append: Tensor | None = None) -> Tensor:
        """The ``n``-th forward difference along ``dim``, ``x[1:] - x[:-1]`` taken ``n`` times
        (``!=`` for bool tensors), after ``prepend`` and ``append`` are joined at the ends
        (tensors of self's shape apart from ``dim``). Each step is one shorter along ``dim``."""
        if self.ndim == 0:
            raise InvalidArgument("diff expects input to be at least one-dimensional")
        if isinstance(n, builtins.bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"diff(): argument 'n' must be int, not {type(n).__name__}")
        if n < 0:
            raise InvalidArgument(f"diff: order must be non-negative but got {n}")
        axis = self._dim("diff", dim)
        ends = {}
        for name, end in (("prepend", prepend), ("append", append)):
            if end is None:
                continue
            end = ends[name] = _as_operand(end, self, "diff")
            if end.ndim != self.ndim or builtins.any(
                    a != b for d, (a, b) in enumerate(zip(end.shape, self.shape)) if d != axis):
                raise ShapeError(f"diff: {name} of shape {end.shape} does not fit the input of "
                                 f"shape {self.shape}: the same apart from dimension {axis}")
        x = self
        if ends:
            parts = [p for p in (ends.get("prepend"), self, ends.get("append")) if p is not None]
            dtype = result_type(*parts)
            x = O.Cat.apply(axis, *(p.to(self.device, dtype) for p in parts))
        later = (slice(None),) * axis + (slice(1, None),)
        earlier = (slice(None),) * axis + (slice(0, -1),)
        for _ in range(n):
            x = x[later] != x[earlier] if x.dtype == bool_ else x[later] - x[earlier]
        return O.Clone.apply(x) if x is self else x  # (n=0: a new tensor, as PyTorch's)

    def nonzero(self, as_tuple: bool = False) -> Any:
        """Indices of the non-zero entries: int64 ``[count, ndim]``, or one 1-D tensor per
        dimension with ``as_tuple=True`` (what ``t[mask]`` indexes with)."""
        xp = backend.get_array_module(self._data)
        if as_tuple:  # (a 0-d tensor as one of shape (1,), as PyTorch)
            data = self._data if self.ndim else self._data.reshape(1)
            return tuple(Tensor(i.astype(int64, copy=False)) for i in xp.nonzero(data))
        return Tensor(xp.argwhere(self._data).astype(int64, copy=False))

    def unique(self, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
               return_counts: bool = False, dim: int | None = None) -> Any:
        """The distinct values, sorted (the whole tensor flattened, or slices along ``dim``);
        with ``return_inverse`` / ``return_counts`` also where each entry went and how often
        each value occurs. Not differentiable."""
        xp = backend.get_array_module(self._data)
        nans = {} if dim is not None else {"equal_nan": False}  # NaN != NaN, as PyTorch's
        out = xp.unique(self._data, return_inverse=return_inverse,
                        return_counts=return_counts, axis=dim, **nans)
        if not isinstance(out, tuple):
            return Tensor(out)
        parts = [Tensor(out[0])]
        if return_inverse:
            inverse = out[1].astype(int64, copy=False)
            parts.append(Tensor(inverse.reshape(self.shape) if dim is None else inverse))
        if return_counts:
            parts.append(Tensor(out[-1].astype(int64, copy=False)))
        return tuple(parts)

    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
        """A histogram: ``[bins]`` counts of the values in ``[min, max]``, in equal-width bins,
        of this tensor's dtype. ``min == max`` (the default, 0 and 0) takes the range of the
        data (widened by 1 on either side when that is one value); values outside the range
        and NaN are not counted, ``max`` goes in the last bin. As PyTorch's: value ``v``
        goes in bin ``int((v - min) * bins / (max - min))``, computed in the tensor's dtype;
        floating point tensors only; not differentiable (the result never requires grad)."""
        if isinstance(bins, builtins.bool) or not isinstance(bins, numbers.Integral):
            raise TypeError(f"histc(): argument 'bins' must be int, not {type(bins).__name__}")
        if self.dtype.kind != "f":
            raise NotImplementedError(f"histc is not implemented for {self.dtype} tensors (it "
                                      f"counts floating point values); convert with .float()")
        if bins <= 0:
            raise InvalidArgument(f"histc: bins must be > 0, but got {bins}")
        xp = backend.get_array_module(self._data)
        lo, hi = builtins.float(min), builtins.float(max)
        if lo == hi and self.numel():
            lo, hi = builtins.float(self._data.min()), builtins.float(self._data.max())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise InvalidArgument(f"histc: range of [{lo:g}, {hi:g}] is not finite")
        if lo > hi:
            raise InvalidArgument("histc: max must be larger than min")
        values = self._data.reshape(-1)
        lo_, hi_ = self.dtype.type(lo), self.dtype.type(hi)  # (the edges in the tensor's dtype)
        values = values[(values >= lo_) & (values <= hi_)]  # (NaN is neither)
        with np.errstate(all="ignore"):
            index = ((values - lo_) * self.dtype.type(bins) / (hi_ - lo_)).astype(int64)
        index = xp.minimum(index, bins - 1)  # (max itself: the last bin)
        return Tensor(xp.bincount(index, minlength=bins).astype(self.dtype))

    # ------------------------------------------------------------ statistics

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """Variance over ``dim`` (all if None): ``sum((x - mean)^2) / (N - correction)``.

        ``correction`` defaults to 1 (Bessel's, the unbiased estimate); ``unbiased=False``
        (or ``var(False)``) means 0. Fewer than ``correction + 1`` values give nan or inf,
        with PyTorch's warning ("degrees of freedom is <= 0").
        """
        return self._variance("var", dim, unbiased, keepdim, correction)

    @_accumulates_in_float32
    def _variance(self, name: str, dim: Any, unbiased: bool | None, keepdim: bool,
                  correction: float | None) -> Tensor:
        """:meth:`var` for ``name`` (``var``, ``std``, ``var_mean`` or ``std_mean``: the
        warning names it, as PyTorch's)."""
        if isinstance(dim, builtins.bool):  # var(unbiased), PyTorch's old positional form
            dim, unbiased = None, dim
        if unbiased is not None and correction is not None:
            raise TypeError("var/std: give unbiased or correction, not both")
        if correction is None:
            correction = 0 if unbiased is False else 1
        if self.dtype.kind != "f":
            raise DTypeError(f"std and var only support floating point dtypes, got {self.dtype}")
        axes = self._reduction_axes(dim)
        count = self.numel() if axes is None else int(np.prod([self.shape[a] for a in axes]))
        # PyTorch's "reduction factor" (numel in / numel out) is 0 for any empty input
        if (count if self.numel() else 0) - correction <= 0:  # (REINFORCE: a one-step episode)
            _warn_user(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                       "less than the reduction factor (input numel divided by output numel).")
        centered = self - self.mean(axes, keepdim=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (centered * centered).sum(axes, keepdim) / builtins.max(count - correction, 0)

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """Standard deviation: ``sqrt(var(...))`` with the same arguments."""
        return self._std("std", dim, unbiased, keepdim, correction)

    @_accumulates_in_float32  # (float16: the square root of the float32 variance)
    def _std(self, name: str, dim: Any, unbiased: bool | None, keepdim: bool,
             correction: float | None) -> Tensor:
        """:meth:`std` for ``name`` (``std`` or ``std_mean``), as :meth:`_variance`."""
        return O.StdFromVar.apply(self._variance(name, dim, unbiased, keepdim, correction))

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        """``log(sum(exp(x)))`` over ``dim``, computed stably (the max taken out first)."""
        x = self if self.dtype.kind == "f" else self._cast(get_default_dtype())
        axes = x._reduction_axes(dim)
        if x.numel() == 0:  # an empty sum: log(0) = -inf, as in PyTorch
            return x.exp().sum(axes, keepdim).log()
        return O.LogSumExp.apply(x, axes, keepdim)

    @_accumulates_in_float32
    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None
             ) -> Tensor:
        """Product over ``dim`` (one dim; all if None); bool and integer tensors multiply in
        int64. ``dtype`` converts first. Zeros get PyTorch's gradient (the product of the
        other entries: :class:`~tinytrain.autograd.ops.Prod`)."""
        if dim is not None and not isinstance(dim, numbers.Integral):
            raise TypeError(f"prod(): argument 'dim' must be an int, not {type(dim).__name__}")
        x = self if dtype is None else self.to(dtype=dtype)
        out = O.Prod.apply(x, x._reduction_axes(dim), keepdim)
        return out if dtype is None or out.dtype == dtype else out.to(dtype=dtype)

    def nansum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
               dtype: Any = None) -> Tensor:
        """:meth:`sum` with NaNs counted as 0 (they get no gradient)."""
        x = self.masked_fill(self.isnan(), 0) if self.dtype.kind == "f" else self
        return x.sum(dim, keepdim, dtype=dtype)

    def nanmean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
        """:meth:`mean` of the values that are not NaN (NaN where all are); floating input."""
        x = self._float_for("nanmean", dtype)
        return x.nansum(dim, keepdim) / (~x.isnan()).sum(dim, keepdim)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """As ``torch.median``: without ``dim`` the lower median of all values (the lower of
        the two middle values for an even count; NaN if there is a NaN; entries equal to it
        share the gradient); with ``dim`` a named pair ``(values, indices)`` of the lower
        medians along it (a NaN's where the slice has one; the chosen entry gets the
        gradient)."""
        if dim is None:
            if self.numel() == 0:  # (as PyTorch: NaN)
                return self.sum() * math.nan
            return O.Median.apply(self, None, False)
        _int_dim("median", dim)
        if self.ndim == 0:  # its one value, at index 0
            self._reduction_axes(dim)
            index = Tensor(backend.array_module(self.device).zeros((), dtype=int64))
            return MedianResult(O.Clone.apply(self), index)
        (axis,) = self._reduce_check("median", dim)
        middle = (self.shape[axis] - 1) // 2
        index = self.argsort(axis)._data[(slice(None),) * axis + (slice(middle, middle + 1),)]
        if self.dtype.kind == "f":  # (argsort puts NaNs last; the median is then NaN)
            nan, xp = self.isnan()._data, backend.get_array_module(self._data)
            first_nan = xp.expand_dims(nan.argmax(axis=axis), axis)
            index = xp.where(nan.any(axis=axis, keepdims=True), first_nan, index)
        values = O.TakeAlongDim.apply(self, index, axis, keepdim)
        indices = Tensor((index if keepdim else index.squeeze(axis)).astype(int64, copy=False))
        return MedianResult(values, indices)

    def nanmedian(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """:meth:`median` of the values that are not NaN (NaN where all are): without
        ``dim`` one value, with ``dim`` the pair ``(values, indices)``, as PyTorch's."""
        if dim is None:
            return O.NanMedian.apply(self, None, False)
        _int_dim("nanmedian", dim)
        if self.ndim == 0 or self.dtype.kind != "f":  # (nothing can be NaN)
            return return_types.nanmedian(*self.median(dim, keepdim))
        (axis,) = self._reduce_check("nanmedian", dim)
        xp = backend.get_array_module(self._data)
        count = (~self.isnan()).sum(axis, keepdim=True)._data
        middle = xp.maximum(count - 1, 0) // 2
        index = xp.take_along_axis(self.argsort(axis)._data, middle, axis)  # (NaNs last)
        values = O.TakeAlongDim.apply(self, index, axis, keepdim)
        indices = Tensor((index if keepdim else index.squeeze(axis)).astype(int64, copy=False))
        return return_types.nanmedian(values, indices)

    def inverse(self) -> Tensor:
        """The inverse of each matrix ``[*, n, n]``: ``tinytrain.linalg.inv(self)``."""
        from tinytrain.linalg import inv

        return inv(self)

    @_accumulates_in_float32
    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Tensor:
        """The ``p``-norm over ``dim`` (all entries if None): 2 / ``"fro"`` / None (default),
        1, ``inf``, ``-inf``, 0 (count of non-zeros) or any other number. As PyTorch's,
        ``"fro"`` over three dims or more, and every other string (``"nuc"``), is a matrix
        norm (:func:`tinytrain.linalg.matrix_norm`), which needs exactly two dims."""
        x = self if self.dtype.kind == "f" else self._cast(get_default_dtype())
        if isinstance(p, str) and (p != "fro" or not (
                dim is None or isinstance(dim, numbers.Integral) or len(dim) <= 2)):
            from tinytrain.linalg import matrix_norm

            return matrix_norm(x, p, tuple(range(x.ndim)) if dim is None else dim, keepdim)
        axes = x._reduction_axes(dim)
        if p is None or p in ("fro", 2):
            return O.Norm.apply(x, 2, axes, keepdim)
        if p == 1:
            return x.abs().sum(axes, keepdim)
        if p in (np.inf, -np.inf):
            return (x.abs().amax if p > 0 else x.abs().amin)(axes, keepdim)
        if p == 0:  # a count: no gradient, but in the graph (its gradient 0), as PyTorch's
            count = (x != 0).sum(axes, keepdim).to(dtype=x.dtype)
            if not x.requires_grad:
                return count
            no = Tensor(backend.get_array_module(count._data).zeros((), bool_))
            return where(no, x.sum(axes, keepdim), count)
        return O.Norm.apply(x, p, axes, keepdim)

    def isclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Tensor:
        """``|self - other| <= atol + rtol * |other|`` element-wise (a bool tensor); both
        must have the same dtype, as in PyTorch."""
        other = _as_operand(other, self, "isclose")
        if other.dtype != self.dtype:
            raise DTypeError(f"isclose: {self.dtype} did not match {other.dtype} (compare "
                             f"tensors of one dtype; convert one with .to(dtype))")
        O.broadcast_shapes("isclose", self.shape, other.shape)
        xp = backend.get_array_module(self._data)
        return Tensor(xp.isclose(self._data, other._data, rtol=rtol, atol=atol,
                                 equal_nan=equal_nan))

    def allclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """True if every element :meth:`isclose` to ``other``'s."""
        return builtins.bool(self.isclose(other, rtol, atol, equal_nan).all())

    # ------------------------------------------------------------ more element-wise

    def sin(self) -> Tensor:
        return self._float_op(O.Sin)

    def cos(self) -> Tensor:
        return self._float_op(O.Cos)

    def square(self) -> Tensor:
        x = self._cast(int64) if self.dtype == bool_ else self  # (bool squares to int64)
        return x * x

    def _rounding(self, name: str) -> Tensor:
        if self.dtype.kind != "f" and name != "sign" or self.dtype == bool_:
            return self.clone()  # integers are already whole
        return O.Rounding.apply(self, name)

    def floor(self) -> Tensor:
        """Round down (gradient zero, as every rounding op)."""
        return self._rounding("floor")

    def ceil(self) -> Tensor:
        return self._rounding("ceil")

    def trunc(self) -> Tensor:
        return self._rounding("trunc")

    def sign(self) -> Tensor:
        return self._rounding("sign")

    def round(self, decimals: int = 0) -> Tensor:
        """Round half to even (as PyTorch and NumPy), to ``decimals`` places."""
        if decimals:
            scale = 10.0 ** decimals
            return (self * scale)._rounding("round") / scale
        return self._rounding("round")

    def tril(self, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two dims (entries above ``diagonal`` set to 0)."""
        return self._triangle(diagonal, lower=True)

    def triu(self, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two dims (entries below ``diagonal`` set to 0)."""
        return self._triangle(diagonal, lower=False)

    def _triangle(self, diagonal: int, lower: bool) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"tril/triu: input tensor must have at least 2 dimensions, got "
                             f"shape {self.shape}")
        xp = backend.get_array_module(self._data)
        n, m = self.shape[-2:]
        keep = xp.tri(n, m, k=diagonal, dtype=bool)
        keep = keep if lower else ~xp.tri(n, m, k=diagonal - 1, dtype=bool)
        return O.Where.apply(Tensor(keep), self, scalar_array(0, self.dtype))

    def multinomial(self, num_samples: int, replacement: bool = False, *,
                    generator: Any = None) -> Tensor:
        """``tt.multinomial(self, ...)``."""
        return multinomial(self, num_samples, replacement, generator=generator)

    def neg(self) -> Tensor:
        return -self

    negative = neg

    def reciprocal(self) -> Tensor:
        """``1 / self`` (float for integer tensors)."""
        return 1 / self

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def log1p(self) -> Tensor:
        return self._float_op(O.Log1p)

    def expm1(self) -> Tensor:
        return self._float_op(O.Expm1)

    def log2(self) -> Tensor:
        return self._float_op(O.Log2)

    def log10(self) -> Tensor:
        return self._float_op(O.Log10)

    def _test(self, fn: str) -> Tensor:
        xp = backend.get_array_module(self._data)
        if self.dtype.kind != "f":  # integers are finite, never nan
            return Tensor(xp.full(self.shape, fn == "isfinite"))
        return Tensor(getattr(xp, fn)(self._data))

    def isnan(self) -> Tensor:
        """Where the values are NaN (a bool tensor; ``x.isnan().any()`` checks a loss)."""
        return self._test("isnan")

    def isinf(self) -> Tensor:
        return self._test("isinf")

    def isfinite(self) -> Tensor:
        return self._test("isfinite")

    def clamp_min(self, min: Any) -> Tensor:  # noqa: A002
        return self.clamp(min=min)

    def clamp_max(self, max: Any) -> Tensor:  # noqa: A002
        return self.clamp(max=max)

    def clamp_min_(self, min: Any) -> Tensor:  # noqa: A002
        """In-place :meth:`clamp_min` (the tensor keeps its dtype)."""
        return self._inplace("clamp_min_", lambda s: s.clamp_min(min), min)

    def clamp_max_(self, max: Any) -> Tensor:  # noqa: A002
        """In-place :meth:`clamp_max` (the tensor keeps its dtype)."""
        return self._inplace("clamp_max_", lambda s: s.clamp_max(max), max)

    def _bitwise(self, other: Any, op: str, reverse: bool = False) -> Tensor:
        """``&``, ``|``, ``^`` of bool or integer tensors (masks); not differentiable."""
        a, b = self._promote(other)
        if b is NotImplemented:
            return NotImplemented
        if a.dtype.kind not in "biu":
            raise DTypeError(f"bitwise {op} needs bool or integer tensors, not {a.dtype}")
        x, y = a._data, b._data if isinstance(b, Tensor) else b
        x, y = (y, x) if reverse else (x, y)
        fn = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}[op]
        return Tensor(_named(f"bitwise_{op}", fn, x, y))

    def __and__(self, other: Any) -> Tensor:
        return self._bitwise(other, "and")

    def __rand__(self, other: Any) -> Tensor:
        return self._bitwise(other, "and", reverse=True)

    def __or__(self, other: Any) -> Tensor:
        return self._bitwise(other, "or")

    def __ror__(self, other: Any) -> Tensor:
        return self._bitwise(other, "or", reverse=True)

    def __xor__(self, other: Any) -> Tensor:
        return self._bitwise(other, "xor")

    def __rxor__(self, other: Any) -> Tensor:
        return self._bitwise(other, "xor", reverse=True)

    def logical_and(self, other: Any) -> Tensor:
        return Tensor(_named("logical_and", operator.and_, self._data != 0,
                             _as_operand(other, self, "logical_and")._data != 0))

    def logical_or(self, other: Any) -> Tensor:
        return Tensor(_named("logical_or", operator.or_, self._data != 0,
                             _as_operand(other, self, "logical_or")._data != 0))

    def logical_xor(self, other: Any) -> Tensor:
        return Tensor(_named("logical_xor", operator.xor, self._data != 0,
                             _as_operand(other, self, "logical_xor")._data != 0))

    def count_nonzero(self, dim: int | Sequence[int] | None = None) -> Tensor:
        return (self != 0).sum(dim)

    # PyTorch's other names
    subtract, multiply, true_divide = sub, mul, __truediv__
    greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
    remainder, floor_divide = __mod__, __floordiv__
    bitwise_and, bitwise_or, bitwise_xor = __and__, __or__, __xor__

    def fmod(self, other: Any) -> Tensor:
        """``self - trunc(self / other) * other``: the remainder with the sign of ``self``
        (C's ``fmod``; ``%`` and :meth:`remainder` take the sign of ``other``)."""
        return self._floor_op(O.Fmod, other)

    def fmod_(self, other: Any) -> Tensor:
        return self._inplace("fmod_", lambda s: s.fmod(other), other)

    def lerp(self, end: Tensor, weight: Any) -> Tensor:
        """``self + weight * (end - self)``, all three broadcast together (``weight`` a number
        or a tensor), of floating tensors of one dtype. Computed as PyTorch does, from
        ``end`` back where ``weight >= 0.5``, so that a weight of 1 gives ``end`` exactly."""
        x = self._float_for("lerp", None)
        end = _as_operand(end, self, "lerp")
        check_same_dtype("lerp", x, end)
        if isinstance(weight, Tensor) and weight.ndim:
            check_same_dtype("lerp", x, weight)
        step = end - x
        if isinstance(weight, Tensor):
            weight = weight._cast(x.dtype)
            return where(weight < 0.5, x + weight * step, end - step * (1 - weight))
        return x + weight * step if weight < 0.5 else end - step * (1 - weight)

    def lerp_(self, end: Tensor, weight: Any) -> Tensor:
        return self._inplace("lerp_", lambda s: s.lerp(end, weight), end, weight)

    def floor_divide_(self, other: Any) -> Tensor:
        return self._inplace("floor_divide_", lambda s: s // other, other)

    def remainder_(self, other: Any) -> Tensor:
        return self._inplace("remainder_", lambda s: s % other, other)

    def bitwise_and_(self, other: Any) -> Tensor:
        return self._inplace("bitwise_and_", lambda s: s & other, other)

    def bitwise_or_(self, other: Any) -> Tensor:
        return self._inplace("bitwise_or_", lambda s: s | other, other)

    def bitwise_xor_(self, other: Any) -> Tensor:
        return self._inplace("bitwise_xor_", lambda s: s ^ other, other)

    # x //= y, x %= y, x &= y...: in place, as in PyTorch (without these Python rebinds x to
    # a new tensor, so a view's base kept its values and an int tensor became float)
    __ifloordiv__, __imod__ = floor_divide_, remainder_
    __iand__, __ior__, __ixor__ = bitwise_and_, bitwise_or_, bitwise_xor_

    def short(self) -> Tensor:
        return self.to(dtype=np.int16)

    def char(self) -> Tensor:
        return self.to(dtype=np.int8)

    def byte(self) -> Tensor:
        return self.to(dtype=uint8)

    def ndimension(self) -> int:
        return self.ndim

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    def mm(self, mat2: Tensor) -> Tensor:
        if self.ndim != 2 or getattr(mat2, "ndim", 0) != 2:
            raise ShapeError(f"mm: both arguments must be 2-D, got shapes {self.shape} and "
                             f"{_shape_of(mat2)}")
        return self @ mat2

    def bmm(self, mat2: Tensor) -> Tensor:
        """Batched matrix product of two 3-D tensors: ``[b, n, k] @ [b, k, m]`` -> ``[b, n, m]``
        (``tt.bmm``)."""
        other = _shape_of(mat2)
        if self.ndim != 3 or len(other) != 3 or other[0] != self.shape[0]:
            raise ShapeError(f"bmm: expected 3-D tensors with the same batch size, got shapes "
                             f"{self.shape} and {other}")
        return self @ mat2

    def mv(self, vec: Tensor) -> Tensor:
        """Matrix times vector: ``[n, m]`` and ``[m]`` -> ``[n]`` (one dtype, as PyTorch's)."""
        if not isinstance(vec, Tensor):
            raise TypeError(f"mv(): argument 'vec' must be a Tensor, not {type(vec).__name__}")
        if self.ndim != 2 or vec.ndim != 1:
            raise ShapeError(f"mv: expected a 2-D matrix and a 1-D vector, got shapes "
                             f"{self.shape} and {vec.shape}")
        if self.shape[1] != vec.shape[0]:
            raise ShapeError(f"mv: size mismatch, got matrix {self.shape[0]}x{self.shape[1]} "
                             f"and vector of size {vec.shape[0]}")
        check_same_dtype("mv", self, vec)
        return O.MatMul.apply(self, vec)

    def dot(self, other: Tensor) -> Tensor:
        if self.ndim != 1 or _shape_of(other) != self.shape:
            raise ShapeError(f"dot: expected two 1-D tensors of the same size, got shapes "
                             f"{self.shape} and {_shape_of(other)}")
        return self @ other

    def outer(self, vec2: Tensor) -> Tensor:
        """``[n]`` and ``[m]`` -> ``[n, m]`` of all products."""
        vec2 = _as_operand(vec2, self, "outer")
        if self.ndim != 1 or vec2.ndim != 1:
            raise ShapeError(f"outer: expected two 1-D tensors, got shapes {self.shape} and "
                             f"{vec2.shape}")
        return self.unsqueeze(1) * vec2.unsqueeze(0)

    # ------------------------------------------------------------ new tensors like this one

    def new_tensor(self, data: Any, dtype: Any = None, device: Any = None,
                   requires_grad: bool = False) -> Tensor:
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                      requires_grad=requires_grad)

    def new_full(self, size: Sequence[int], fill_value: float, dtype: Any = None,
                 device: Any = None, requires_grad: bool = False) -> Tensor:
        return _full((size,), fill_value, dtype or self.dtype, device or self.device,
                     requires_grad)

    def _new_filled(self, name: str, fill: float, shape: tuple, size: Any, dtype: Any,
                    device: Any, requires_grad: bool) -> Tensor:
        shape = shape if size is None else _sizes(name, shape, size)
        return self.new_full(_shape_arg(shape), fill, dtype, device, requires_grad)

    def new_zeros(self, *shape: Any, size: Sequence[int] | None = None, dtype: Any = None,
                  device: Any = None, requires_grad: bool = False) -> Tensor:
        """Zeros of ``self``'s dtype and device (unless given): ``x.new_zeros(2, 3)``,
        ``new_zeros((2, 3))`` or ``new_zeros(size=(2, 3))``."""
        return self._new_filled("new_zeros", 0, shape, size, dtype, device, requires_grad)

    def new_empty(self, *shape: Any, size: Sequence[int] | None = None, dtype: Any = None,
                  device: Any = None, requires_grad: bool = False) -> Tensor:
        """Like :meth:`new_zeros` (tinytrain fills "uninitialised" memory with zeros)."""
        return self._new_filled("new_empty", 0, shape, size, dtype, device, requires_grad)

    def new_ones(self, *shape: Any, size: Sequence[int] | None = None, dtype: Any = None,
                 device: Any = None, requires_grad: bool = False) -> Tensor:
        """Ones of ``self``'s dtype and device (unless given), sizes as :meth:`new_zeros`."""
        return self._new_filled("new_ones", 1, shape, size, dtype, device, requires_grad)

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with samples of U(a, b) from ``generator`` (default: the global stream),
        in place."""
        rng = numpy_generator(generator, "uniform_")
        _floating_samples("uniform_", self.dtype)
        values = rng.uniform(a, b, size=self.shape).astype(self.dtype)
        return self.copy_(Tensor(values))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None
                ) -> Tensor:
        """Fill with samples of N(mean, std^2) from ``generator`` (default: the global
        stream), in place."""
        rng = numpy_generator(generator, "normal_")
        _floating_samples("normal_", self.dtype)
        return self.copy_(Tensor(_normal_samples(rng, mean, std, self.shape, self.dtype)))

    def bernoulli(self, p: Any = None, *, generator: Any = None) -> Tensor:
        """0/1 samples of self's dtype and device: 1 with probability ``self`` (each in
        [0, 1]), or ``p`` when given (PyTorch's ``bernoulli(input, p)``: self gives only the
        shape), drawn from ``generator`` (default: the global stream, which
        ``tt.manual_seed`` makes reproducible; the same on every device). They pass zero
        gradient back, as PyTorch's."""
        if p is not None:
            return self.detach().clone().bernoulli_(p, generator=generator)
        rng = numpy_generator(generator, "bernoulli")
        _floating_samples("bernoulli", self.dtype)
        if self.numel() and not builtins.bool(((self >= 0) & (self <= 1)).all()):
            raise InvalidArgument(f"bernoulli: probabilities must be in [0, 1], got values from "
                                  f"{self.min().item()} to {self.max().item()}")
        uniform = rng.random(self.shape)
        return O.Bernoulli.apply(self, backend.to_device(uniform, self.device))

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> Tensor:
        """Fill with 0/1 samples, 1 with probability ``p`` (a number, or a tensor that
        broadcasts to self's shape); see :meth:`bernoulli`."""
        numpy_generator(generator, "bernoulli_")  # (checked before the probabilities)
        if isinstance(p, Tensor):
            probs = p.detach().to(self.device)
            probs = probs if probs.dtype.kind == "f" else probs.double()
        else:
            probs = full((), p, dtype=float64, device=self.device)
        return self.copy_(probs.expand(self.shape).bernoulli(generator=generator))

    # ------------------------------------------------------------ memory

    def stride(self, dim: int | None = None) -> Any:
        """Steps in elements (not bytes, unlike NumPy's ``strides``) between neighbours. A
        size-1 axis that NumPy gives a 0 step (one added with ``None``) reports PyTorch's
        for an added axis: the next axis's size times its step (1 at the end)."""
        steps = [s // self._data.itemsize for s in self._data.strides]
        for i in reversed(range(self.ndim)):
            if self.shape[i] == 1 and steps[i] == 0:
                steps[i] = steps[i + 1] * self.shape[i + 1] if i + 1 < self.ndim else 1
        steps = tuple(steps)
        return steps if dim is None else steps[O._normalize_axis(dim, self.ndim)[0]]

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def nelement(self) -> int:
        return self.numel()

    def storage_offset(self) -> int:
        """How many elements into its base tensor's memory this view starts (0 for a tensor
        that is not a view), as PyTorch's, for views made by view ops (slicing, ``view``,
        ``t()``, ...; a ``detach()`` of a view starts again at 0)."""
        root = self
        while root._base is not None:
            root = root._base
        if root is self or not self.numel():
            return 0
        return (self.data_ptr() - root.data_ptr()) // self.element_size()

    def new(self, *args: Any, device: Any = None) -> Tensor:
        """PyTorch's legacy constructor: ``x.new()`` empty, ``x.new(2, 3)`` (or
        ``x.new(x.size())``) of that shape, ``x.new([1, 2])`` of that data, in ``x``'s dtype
        and on its device (as ``tt.FloatTensor(...)`` for a float32 ``x``)."""
        from tinytrain.tensor_types import TensorType

        kind = TensorType(f"{torch_scalar_name(self.dtype)}Tensor", (), {"dtype": self.dtype})
        return kind(*args, device=device or self.device)

    def data_ptr(self) -> int:
        """The address of the first element (equal for tensors that share memory there)."""
        return int(self._data.data.ptr if self.is_cuda else self._data.ctypes.data)



def _inplace_unary(name: str) -> Callable[[Tensor], Tensor]:
    def op(self: Tensor) -> Tensor:
        return self._inplace(f"{name}_", lambda s: getattr(s, name)())

    op.__name__ = op.__qualname__ = f"{name}_"
    op.__doc__ = f"In-place :meth:`{name}` (the tensor keeps its dtype)."
    return op


for _name in ("abs", "neg", "exp", "log", "sqrt", "sigmoid", "tanh", "sin", "cos", "floor",
              "ceil", "round", "trunc", "sign", "reciprocal", "square"):
    setattr(Tensor, f"{_name}_", _inplace_unary(_name))

# NumPy's axis= / keepdims= wherever PyTorch's Tensor methods take them (not norm, split,
# unique, flip, flatten, unflatten, transpose: PyTorch refuses them there)
_numpy_names.accept(Tensor, "sum mean max min argmax argmin amax amin std var logsumexp all "
                    "any count_nonzero cumsum softmax log_softmax squeeze unsqueeze sort "
                    "argsort topk chunk unbind select narrow gather index_select scatter "
                    "scatter_ size stride prod cumprod nansum nanmean median diff scatter_add "
                    "scatter_add_ index_add index_add_ cumprod_ nanmedian squeeze_ unsqueeze_")


class _Missing:
    """A Tensor method of PyTorch's that tinytrain lacks: reading it raises the
    AttributeError Python would, with a hint. A class attribute, so that tensors need no
    ``__getattr__`` (which would slow every attribute read on the hot path)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        cls = type(obj).__name__ if obj is not None else owner.__name__
        raise AttributeError(f"{cls!r} object has no attribute {self.name!r}: "
                             + _missing.TENSOR_HINTS.get(self.name, _missing.TENSOR_OFFER))


for _name in _missing.TORCH_TENSOR_NAMES.split():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _Missing(_name))

function.Tensor = Tensor  # Function.apply wraps its results in this class


class _To(Function):
    """Move to another device and/or dtype; backward moves the gradient back."""

    @staticmethod
    def forward(a, device, dtype):
        return backend.to_device(a, device).astype(dtype, copy=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.device, ctx.dtype = backend.device_of(inputs[0]), inputs[0].dtype

    @staticmethod
    def backward(ctx, g):
        return backend.to_device(g, ctx.device).astype(ctx.dtype, copy=False), None, None

    @staticmethod
    def backward_graph(ctx, g, saved):
        return _To.apply(g, ctx.device, ctx.dtype), None, None


def _is_scalar_operand(x: Any) -> bool:
    """A number or a 0-d tensor: the operand PyTorch keeps in float32 when the other is a
    float16 tensor (its "CPU scalar")."""
    return x.ndim == 0 if isinstance(x, Tensor) else isinstance(x, numbers.Real | np.generic)


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(getattr(x, "shape", ()))


def _as_operand(other: Any, like: Tensor, op: str) -> Tensor:
    """``other`` as a Tensor for ops that take tensors only (arrays are wrapped)."""
    if isinstance(other, Tensor):
        return other
    if hasattr(other, "__array_interface__") or hasattr(other, "__cuda_array_interface__"):
        return Tensor(other)
    raise TypeError(f"{op}: expected a Tensor, got {type(other).__name__}")


def check_same_dtype(op: str, *tensors: Tensor | None) -> None:
    """Matrix products need one dtype: PyTorch raises rather than promote, and so do we."""
    dtypes = [t.dtype for t in tensors if t is not None]
    if builtins.any(d != dtypes[0] for d in dtypes):
        raise DTypeError(
            f"{op}: expected all operands to have the same dtype, got "
            f"{' and '.join(str(d) for d in dtypes)}; convert one with .to(dtype) (e.g. "
            f".float()) first"
        )


def _check_matmul(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    if not sa or not sb:
        raise ShapeError(f"matmul: both operands need at least 1 dimension, got {sa} and {sb}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ShapeError(
            f"matmul: shapes {sa} and {sb} are not aligned: the first has {ka} columns but "
            f"the second has {kb} rows"
        )
    if len(sa) > 2 and len(sb) > 2:
        try:
            O.broadcast_shapes("matmul", sa[:-2], sb[:-2])
        except ValueError:
            raise ShapeError(
                f"matmul: shapes {sa} and {sb} have batch dimensions {sa[:-2]} and {sb[:-2]} "
                f"that cannot be broadcast together"
            ) from None


def _named(name: str, fn: Callable, a: Any, b: Any) -> Any:
    """``fn(a, b)``; where NumPy refuses the two shapes, a ShapeError naming the op and both
    shapes instead (checked only then: the common case pays nothing)."""
    try:
        return fn(a, b)
    except ValueError:
        O.broadcast_shapes(name, _shape_of(a), _shape_of(b))
        raise


def _shape_arg(shape: tuple) -> tuple[int, ...]:
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, as ints (``2.5`` is refused, not cut)."""
    dims = shape[0] if len(shape) == 1 and isinstance(shape[0], Sequence | np.ndarray) else shape
    try:
        return tuple(operator.index(s) for s in dims)
    except TypeError:
        raise TypeError(f"sizes must be integers, got {tuple(dims)!r}") from None


def _new_shape(shape: tuple) -> tuple[int, ...]:
    """The shape of a new tensor: :func:`_shape_arg`, and no size below 0."""
    dims = _shape_arg(shape)
    if builtins.any(d < 0 for d in dims):
        raise ShapeError(f"negative dimension in shape {dims}: sizes must be >= 0")
    return dims


def _raw_index(index: Any) -> Any:
    """An index with Tensors replaced by their arrays (and ``range`` by an array:
    ``x[range(n), y]`` picks one entry per row, as in PyTorch's tutorials)."""
    if isinstance(index, tuple):
        return tuple(_raw_index(i) for i in index)
    if isinstance(index, Tensor):
        if index.dtype == uint8:  # a mask, as PyTorch (NumPy would read positions 0 and 1)
            warnings.warn("indexing with dtype uint8 is deprecated, please use a dtype bool "
                          "instead", UserWarning, stacklevel=3)
            return index._data.astype(bool_)
        if index.ndim == 0 and index.dtype.kind in "iu":  # an int, as PyTorch: x[y[k]] is a
            return int(index._data)  # view of a row (NumPy would copy, as for an array)
        return index._data
    return np.asarray(index) if isinstance(index, range) else index


def _check_gpu_index(shape: tuple[int, ...], index: Any) -> None:
    """Refuse integer-array indices out of range, as NumPy and PyTorch do: CuPy would wrap
    them (``x[[1, 7]]`` of 3 rows reads row 1) and read or write the wrong element silently.
    Reading an array's min and max waits for the GPU: the price of a correct answer."""
    parts = index if isinstance(index, tuple) else (index,)
    arrays = [np.asarray(p) if isinstance(p, list) else p for p in parts]
    widths = [0 if p is None or p is Ellipsis else
              np.ndim(p) if getattr(p, "dtype", None) is not None and p.dtype.kind == "b"
              else 1 for p in arrays]
    axis = 0
    for p, width in zip(arrays, widths):
        if p is Ellipsis:
            axis += len(shape) - builtins.sum(widths)
            continue
        if (getattr(p, "dtype", None) is not None and p.dtype.kind in "iu" and p.size
                and axis < len(shape)):
            n, lo, hi = shape[axis], int(p.min()), int(p.max())
            if lo < -n or hi >= n:
                raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for dimension "
                                 f"{axis} with size {n}")
        axis += width


def _integers_first(index: Any) -> tuple[tuple, tuple] | None:
    """``(integers, rest)`` when an index mixes integers and array indices that a slice
    separates, e.g. ``x[0, :, [1, 2]]``; else None.

    PyTorch applies integer indices first, as a select (``[2,3,4] -> [3, 2]`` here); NumPy
    counts them with the array indices, whose broadcast dimension then goes first
    (``[2, 3]``). Indexing in two steps, the integers then the rest, gives PyTorch's
    layout. When the integers and arrays sit side by side, both orders agree.
    """
    if not isinstance(index, tuple):
        return None
    def is_int(i: Any) -> bool:  # (a 0-d integer tensor, y[k] or t.argmax(), is one too)
        return (isinstance(i, int | np.integer) and not isinstance(i, bool | np.bool_)) or (
            getattr(i, "ndim", None) == 0 and i.dtype.kind in "iu")
    def is_array(i: Any) -> bool:  # a list, a NumPy or a CuPy array of indices or a mask
        return (isinstance(i, list) or hasattr(i, "dtype") and not isinstance(i, np.generic)
                ) and np.ndim(i) > 0
    advanced = [k for k, i in enumerate(index) if is_int(i) or is_array(i)]
    if (not builtins.any(is_int(index[k]) for k in advanced)
            or not builtins.any(is_array(index[k]) for k in advanced)
            or advanced[-1] - advanced[0] == len(advanced) - 1):  # side by side
        return None
    ints: list[Any] = []
    for i in index:
        if is_int(i) or i is Ellipsis or i is None:  # None: the new axis, made in step one
            ints.append(i)
        else:  # one slice per dimension it indexes (a bool mask: one per mask dimension)
            mask = is_array(i) and (i.dtype if hasattr(i, "dtype") else np.asarray(i).dtype
                                    ).kind == "b"
            ints.extend([slice(None)] * (np.ndim(i) if mask else 1))
    return tuple(ints), tuple(slice(None) if i is None else i for i in index if not is_int(i))


def _bool_condition(name: str, condition: Any) -> Tensor:
    cond = condition if isinstance(condition, Tensor) else Tensor(np.asarray(condition))
    if cond.dtype != bool_:
        raise DTypeError(f"{name} expected a boolean condition/mask, got dtype {cond.dtype}; "
                         f"compare first (e.g. x > 0) or convert with .bool()")
    return cond


def where(condition: Any, input: Any = None, other: Any = None) -> Any:  # noqa: A002
    """``input`` where the bool ``condition`` is True, else ``other`` (broadcast together;
    either may be a number, and the dtype follows :func:`result_type`). Gradients flow to
    each side where it was chosen. ``where(condition)`` alone is
    ``condition.nonzero(as_tuple=True)``, for a condition of any dtype (non-zero: True)."""
    if input is None and other is None:  # any dtype, as nonzero
        cond = condition if isinstance(condition, Tensor) else Tensor(np.asarray(condition))
        return cond.nonzero(as_tuple=True)
    if input is None or other is None:  # (None would become a NaN tensor: filled gaps)
        raise TypeError("where() takes a condition alone, or a condition, input and other; "
                        f"got {'input' if other is None else 'other'} only")
    cond = _bool_condition("where", condition)
    input, other = (x if isinstance(x, Tensor | numbers.Number) else Tensor(x)  # arrays
                    for x in (input, other))
    dtype = result_type(input, other)
    a, b = (x.to(dtype=dtype) if isinstance(x, Tensor)  # (300 into uint8 is refused; -1e9
            else scalar_in(x, dtype, "where") if dtype.kind in "iu"  # into float16 is -inf,
            else scalar_array(x, dtype) for x in (input, other))     # both as PyTorch)
    shape = O.broadcast_shapes("where", cond.shape, _shape_of(a))
    O.broadcast_shapes("where", shape, _shape_of(b))
    return O.Where.apply(cond, a, b)


# ------------------------------------------------------------------ creation


def _device(device: Any) -> str:
    """``device``, or the default device (:func:`tinytrain.set_default_device`) for None."""
    return backend.default_device() if device is None else backend.normalize_device(device)


def _view_again(t: Any) -> Any:
    """``t``, or for a view a new view of the same memory made again from its *root* base (the
    chain of view ops replayed): what a view made again after a write hangs from. Not from
    ``t``'s own node: a view ``w = v[1:]`` of a view ``v`` is, after a write, a view of the
    base, as PyTorch regenerates it, so ``v.retain_grad()`` sees only ``v``'s own uses."""
    if not isinstance(t, Tensor) or t._view_replay is None:
        return t
    cls, inputs, shapes = t._view_replay
    if input_shapes(inputs) != shapes:  # (an input's array was replaced: t as it is)
        return t
    return cls.apply(_view_again(inputs[0]), *inputs[1:])


def _default_dtype(data: Any) -> np.dtype:
    arr = np.asarray(data) if not hasattr(data, "dtype") else data
    if isinstance(data, np.ndarray | np.generic) or hasattr(data, "__cuda_array_interface__"):
        return arr.dtype
    # Python lists and scalars: floats become the default float dtype and ints int64, as in
    # PyTorch
    kind = arr.dtype.kind
    return get_default_dtype() if kind == "f" else int64 if kind in "iu" else arr.dtype


def tensor(data: Any, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (a list, number, NumPy or CuPy array).

    NumPy and CuPy arrays keep their dtype; Python floats become the default float dtype
    (float32 unless :func:`tinytrain.set_default_dtype` chose another) and ints int64.
    ``device=None``: a CuPy array stays on the GPU, the rest lands on the default device
    (the CPU unless :func:`tinytrain.set_default_device` chose another).
    """
    if isinstance(data, Tensor):
        data = data._data
    elif isinstance(data, list | tuple):
        if dtype is None:
            dtype = _sequence_dtype(data)
        if _holds_arrays(data):
            data = _tensors_as_scalars(data)
    if device is None:
        on_gpu = hasattr(data, "dtype") and backend.device_of(data) == "cuda"
        device = backend.CUDA if on_gpu else _device(None)
    try:
        dtype = np.dtype(dtype) if dtype is not None else _default_dtype(data)
        xp = backend.array_module(_device(device))
        source = backend.to_device(data, device) if hasattr(data, "dtype") else data
        try:
            arr = xp.array(source, dtype=dtype, copy=True)
        except OverflowError:  # Python ints outside the dtype: -1 into uint8 wraps, as PyTorch,
            arr = _wrapped_ints(source, dtype)  # 300 is refused
    except ValueError as exc:
        if "inhomogeneous" not in str(exc) and "sequence" not in str(exc):
            raise
        raise InvalidArgument(f"tensor(): the nested lists have different lengths (a tensor "
                              f"is rectangular): {str(data)[:80]}") from None
    if arr.dtype.kind not in "biuf":
        raise InvalidArgument(f"tensor(): can't make a Tensor of {arr.dtype} data; tinytrain "
                              "tensors hold bool, integer or floating-point numbers")
    return Tensor(arr, requires_grad=requires_grad)


def _sequence_dtype(seq: list | tuple) -> np.dtype | None:
    """The dtype of ``tensor(seq)`` as PyTorch infers it: each item's own (a Python float: the
    default float dtype, an int: int64, a bool: bool; a Tensor, NumPy array or NumPy scalar:
    its dtype), promoted together (:func:`promote_types`). ``[t64, 3 * t64]`` of float64
    0-d tensors is float64, ``[np.float32(1), 2.0]`` float32. None for an item of another type
    (NumPy's conversion decides, or refuses)."""
    dtypes = set()
    for kind in set(map(type, seq)):  # (C speed for a list of numbers: one pass)
        if issubclass(kind, list | tuple):
            dtypes.update(_sequence_dtype(v) for v in seq if type(v) is kind)
        elif issubclass(kind, Tensor | np.ndarray | np.generic):
            dtypes.update(v.dtype for v in seq if type(v) is kind)
        elif issubclass(kind, builtins.bool):
            dtypes.add(bool_)
        elif issubclass(kind, numbers.Integral):
            dtypes.add(int64)
        elif issubclass(kind, numbers.Real):
            dtypes.add(get_default_dtype())
        elif hasattr(kind, "__cuda_array_interface__"):  # CuPy arrays
            dtypes.update(np.dtype(v.dtype) for v in seq if type(v) is kind)
        else:
            return None
    if None in dtypes:
        return None
    return functools.reduce(promote_types, dtypes) if dtypes else get_default_dtype()


def _holds_arrays(seq: list | tuple) -> bool:
    """Whether nested lists hold arrays or Tensors (not only numbers): NumPy's conversion
    then has more dimensions than the lists' nesting (which is read along the first items:
    a cheap check before the Python walk of :func:`_tensors_as_scalars`)."""
    depth, x = 0, seq
    while isinstance(x, list | tuple):
        depth += 1
        if not x:
            break
        x = x[0]
    try:
        return np.ndim(seq) != depth or builtins.any(isinstance(x, Tensor) for x in seq)
    except ValueError:  # ragged (Tensors of several shapes, or lists the conversion refuses)
        return True


def _tensors_as_scalars(seq: list | tuple) -> Any:
    """Nested lists with Tensors in them, each Tensor as its one number (as PyTorch: a list
    of ``[1]``-shaped losses becomes a 1-d tensor, not ``[n, 1]``)."""
    types = set(map(type, seq))  # (C speed: plain lists of numbers cost one pass)
    if builtins.any(issubclass(t, Tensor) for t in types):
        return [_tensor_item(v) if isinstance(v, Tensor) else
                _tensors_as_scalars(v) if isinstance(v, list | tuple) else v for v in seq]
    if list in types or tuple in types:
        inner = [_tensors_as_scalars(v) if isinstance(v, list | tuple) else v for v in seq]
        return seq if builtins.all(map(operator.is_, inner, seq)) else inner
    return seq


def _tensor_item(t: Tensor) -> Any:
    if t.numel() != 1:
        raise ValueError(f"tensor(): only one-element tensors can be converted to numbers in a "
                         f"list, got one of shape {t.shape}; use tt.stack or tt.cat for those")
    return t.item()


def _wrapped_ints(values: Any, dtype: np.dtype) -> np.ndarray:
    """Nested Python ints as ``dtype``, each checked as :func:`scalar_in` checks one."""
    flat = np.array(values, dtype=object)
    for v in flat.reshape(-1):
        scalar_in(v, dtype, "tensor")
    return flat.astype(np.int64).astype(dtype) if flat.size else np.zeros(flat.shape, dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory (``torch.from_numpy``)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a NumPy array, got {type(array).__name__}")
    return Tensor(array)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like :func:`tensor`, but without a copy when ``data`` is already an array of that
    dtype on that device (``torch.as_tensor``)."""
    if isinstance(data, Tensor):
        return data.to(device if device is not None else data.device, dtype)
    if hasattr(data, "dtype") and (dtype is None or np.dtype(dtype) == data.dtype) and (
            device is None or backend.normalize_device(device) == backend.device_of(data)):
        return Tensor(data)
    return tensor(data, dtype=dtype, device=device)


def _full(shape: tuple, fill: float, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    xp, dtype = backend.array_module(_device(device)), np.dtype(dtype)
    fill = fill.item() if isinstance(fill, Tensor) else fill
    if dtype.kind in "iu":  # (as PyTorch's full: -1 into uint8 wraps, 300 or NaN is refused)
        fill = scalar_in(fill, dtype, "full")
    return Tensor(xp.full(_new_shape(shape), fill, dtype=dtype), requires_grad=requires_grad)


def _sizes(name: str, shape: tuple, size: Any) -> tuple:
    """The sizes of a new tensor, given as ``f(2, 3)``, ``f((2, 3))`` or, as PyTorch also
    takes them, ``f(size=(2, 3))`` (a sequence, as there; not both ways at once)."""
    if shape:
        raise TypeError(f"{name}() got multiple values for argument 'size': {shape} and "
                        f"size={size!r}; give the sizes one way")
    if not isinstance(size, Sequence | np.ndarray):
        raise TypeError(f"{name}(): argument 'size' must be a tuple of ints, not "
                        f"{type(size).__name__}")
    return (size,)


def _default(dtype: Any, default: Any = None) -> Any:
    """``dtype``, or the creation function's default for None: ``default``, else the default
    float dtype (:func:`tinytrain.get_default_dtype`)."""
    if dtype is not None:
        return dtype
    return get_default_dtype() if default is None else default


def zeros(*shape: int, size: Sequence[int] | None = None, dtype: Any = None,
          device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros: ``zeros(2, 3)``, ``zeros((2, 3))`` or ``zeros(size=(2, 3))``."""
    shape = shape if size is None else _sizes("zeros", shape, size)
    return _full(shape, 0, _default(dtype), device, requires_grad)


def empty(*shape: int, size: Sequence[int] | None = None, dtype: Any = None,
          device: Any = None, requires_grad: bool = False) -> Tensor:
    """Like :func:`zeros` (tinytrain fills "uninitialised" memory with zeros)."""
    shape = shape if size is None else _sizes("empty", shape, size)
    return _full(shape, 0, _default(dtype), device, requires_grad)


def ones(*shape: int, size: Sequence[int] | None = None, dtype: Any = None,
         device: Any = None, requires_grad: bool = False) -> Tensor:
    shape = shape if size is None else _sizes("ones", shape, size)
    return _full(shape, 1, _default(dtype), device, requires_grad)


def full(size: Sequence[int], fill_value: float, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """``size`` filled with ``fill_value``; the dtype defaults to the value's (the default
    float dtype, int64 or bool), as in PyTorch."""
    if dtype is None:
        dtype = result_type(fill_value)
    return _full((size,), fill_value, dtype, device, requires_grad)


class MemoryFormat:
    """PyTorch's names for memory layouts (``torch.memory_format``). A tinytrain tensor is
    always row-major (NCHW for images): ``preserve_format`` and ``contiguous_format`` are
    accepted and mean just that; ``channels_last`` (NHWC in memory) is refused."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"tinytrain.{self.name}"


preserve_format = MemoryFormat("preserve_format")
contiguous_format = MemoryFormat("contiguous_format")
channels_last = MemoryFormat("channels_last")
channels_last_3d = MemoryFormat("channels_last_3d")


def check_memory_format(name: str, memory_format: Any) -> None:
    """Accept the row-major formats; refuse the others, saying why."""
    if memory_format is preserve_format or memory_format is contiguous_format:
        return
    if isinstance(memory_format, MemoryFormat):
        raise InvalidArgument(
            f"{name}: memory_format={memory_format} is not supported: tinytrain tensors are "
            f"row-major (NCHW); leave memory_format out (or pass tt.contiguous_format)")
    raise TypeError(f"{name}(): argument 'memory_format' must be tinytrain.memory_format, not "
                    f"{type(memory_format).__name__}")


def _like(name: str, input: Tensor, dtype: Any, device: Any,  # noqa: A002
          memory_format: Any) -> tuple[tuple[int, ...], Any, Any]:
    """The shape, dtype and device of a new tensor like ``input`` (``dtype`` and ``device``
    win when given): what every ``*_like`` function starts from."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    check_memory_format(name, memory_format)
    return (input.shape, input.dtype if dtype is None else dtype,
            input.device if device is None else device)


def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None,  # noqa: A002
               requires_grad: bool = False,
               memory_format: MemoryFormat = preserve_format) -> Tensor:
    """Zeros of ``input``'s shape, dtype and device (unless ``dtype`` / ``device``)."""
    shape, dtype, device = _like("zeros_like", input, dtype, device, memory_format)
    return zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None,  # noqa: A002
               requires_grad: bool = False,
               memory_format: MemoryFormat = preserve_format) -> Tensor:
    """Like :func:`zeros_like` (tinytrain fills "uninitialised" memory with zeros)."""
    shape, dtype, device = _like("empty_like", input, dtype, device, memory_format)
    return zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None,  # noqa: A002
              requires_grad: bool = False,
              memory_format: MemoryFormat = preserve_format) -> Tensor:
    """Ones of ``input``'s shape, dtype and device (unless ``dtype`` / ``device``)."""
    shape, dtype, device = _like("ones_like", input, dtype, device, memory_format)
    return ones(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(input: Tensor, fill_value: float, *, dtype: Any = None,  # noqa: A002
              device: Any = None, requires_grad: bool = False,
              memory_format: MemoryFormat = preserve_format) -> Tensor:
    """``fill_value`` in ``input``'s shape, dtype and device (unless ``dtype`` /
    ``device``)."""
    shape, dtype, device = _like("full_like", input, dtype, device, memory_format)
    return full(shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def randn(*shape: int, size: Sequence[int] | None = None, dtype: Any = None,
          device: Any = None, requires_grad: bool = False, generator: Any = None) -> Tensor:
    """Standard normal samples from ``generator`` (default: the global stream; the same on
    every device)."""
    shape = shape if size is None else _sizes("randn", shape, size)
    rng = numpy_generator(generator, "randn")
    dtype = _default(dtype)
    _floating_samples("randn", dtype)
    arr = rng.standard_normal(_new_shape(shape)).astype(dtype)
    return Tensor(backend.to_device(arr, _device(device)),
                  requires_grad=requires_grad)


def rand(*shape: int, size: Sequence[int] | None = None, dtype: Any = None,
         device: Any = None, requires_grad: bool = False, generator: Any = None) -> Tensor:
    """Uniform samples in [0, 1) from ``generator`` (default: the global stream)."""
    shape = shape if size is None else _sizes("rand", shape, size)
    rng = numpy_generator(generator, "rand")
    dtype = _default(dtype)
    _floating_samples("rand", dtype)
    arr = _below_one(rng.random(_new_shape(shape)).astype(dtype))
    return Tensor(backend.to_device(arr, _device(device)),
                  requires_grad=requires_grad)


def _below_one(samples: np.ndarray) -> np.ndarray:
    """Samples of [0, 1) rounded to a narrower dtype stay below 1, as PyTorch's: the few that
    rounded up to 1.0 (float16: 1 in ~4096; float32: 1 in ~2**25) become the largest value
    below it. The others are unchanged."""
    if samples.dtype != np.float64:
        np.minimum(samples, np.nextafter(samples.dtype.type(1), samples.dtype.type(0)),
                   out=samples)
    return samples


def _topk_indices(a: Any, k: int, axis: int, largest: bool) -> Any:
    """The indices :meth:`Tensor.topk` returns (the first ``k`` of the stable sort, ties in
    index order, NaN the largest), found without sorting the whole axis: ``argpartition``
    picks ``k`` candidates per row in linear time and only they are sorted (a [3200, 512]
    top-10: 5x faster). Where values equal to the k-th one lie on both sides of the cut
    (ties, which argpartition splits in no particular order), that row is sorted whole, so
    the result is always the full sort's. None where a full sort is as cheap: on the GPU, or
    when ``k`` is more than a quarter of the axis."""
    n = a.shape[axis]
    if backend.get_array_module(a) is not np or not 0 < k <= n // 4:
        return None
    rows = np.moveaxis(a, axis, -1).reshape(-1, n)
    picked = np.argpartition(rows, n - k if largest else k - 1, axis=1)
    picked = np.sort(picked[:, n - k :] if largest else picked[:, :k], axis=1)  # index order
    values = np.take_along_axis(rows, picked, 1)
    idx = np.take_along_axis(picked, _stable_order(values, largest), 1)
    # the k-th value and how often it occurs among the picks and in the whole row
    kth = np.take_along_axis(rows, idx[:, -1:], 1)
    def same(v):
        return (v == kth) | (np.isnan(v) & np.isnan(kth))
    split = same(values).sum(1) < same(rows).sum(1)
    if split.any():
        idx[split] = _stable_order(rows[split], largest)[:, :k]
    return np.moveaxis(idx.reshape(*np.moveaxis(a, axis, -1).shape[:-1], k), -1, axis)


def _stable_order(values: Any, largest: bool) -> Any:
    """``argsort`` along the last axis, stable, ascending or descending (ties in index order
    either way: :meth:`Tensor.argsort`'s rule)."""
    if not largest:
        return np.argsort(values, axis=-1, kind="stable")
    n = values.shape[-1]
    return n - 1 - np.flip(np.argsort(np.flip(values, -1), axis=-1, kind="stable"), -1)


def _normal_samples(rng: np.random.Generator, mean: Any, std: Any, shape: tuple,
                    dtype: Any) -> np.ndarray:
    """N(mean, std^2) samples of ``shape`` from ``rng``, as ``dtype``: the one draw behind
    :func:`normal` and :meth:`Tensor.normal_`."""
    if not std >= 0:  # (NaN too, as PyTorch)
        raise InvalidArgument(f"normal expects std >= 0.0, but found std {std}")
    return rng.normal(mean, std, size=shape).astype(dtype)


def normal(mean: Any, std: Any = None, size: Sequence[int] | None = None, *,
           generator: Any = None, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Samples of N(mean, std^2) from ``generator`` (default: the global stream), in
    PyTorch's forms:

    * ``normal(0.0, 0.01, size=(2, 3))``: two numbers and a size; ``dtype`` (the default
      float dtype by default), ``device`` and ``requires_grad`` as for :func:`randn`;
    * ``normal(mean, std)`` with tensors (broadcast together), or a tensor and a number
      (``std`` 1 by default): one sample per element, of the first tensor's dtype and
      device. The samples pass zero gradient back to ``mean`` and ``std``, as PyTorch's.

    ``std`` must be >= 0. ``tt.manual_seed`` makes the draws reproducible.
    """
    rng = numpy_generator(generator, "normal")
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if size is not None or not tensors:  # normal(mean: float, std: float, size)
        if size is None or std is None or builtins.any(t.ndim for t in tensors):
            raise TypeError("normal(): give normal(mean, std, size) with numbers mean and std "
                            "and a size, or normal(mean, std) with a tensor mean and/or std")
        dtype = np.dtype(_default(dtype))
        _floating_samples("normal", dtype)
        shape = _new_shape(_sizes("normal", (), size))
        values = _normal_samples(rng, float(mean), float(std), shape, dtype)
        return Tensor(backend.to_device(values, _device(device)), requires_grad=requires_grad)
    if dtype is not None or device is not None or requires_grad:
        raise TypeError("normal(): dtype=, device= and requires_grad= go with the form "
                        "normal(mean, std, size) of two numbers; a tensor's samples take its "
                        "dtype and device")
    std = 1.0 if std is None else std
    first = tensors[0]
    _floating_samples("normal", first.dtype)
    if not bool((std >= 0).all() if isinstance(std, Tensor) else std >= 0):
        raise InvalidArgument("normal expects all elements of std >= 0.0")
    shape = O.broadcast_shapes("normal", _shape_of(mean), _shape_of(std))
    noise = rng.standard_normal(shape).astype(first.dtype)
    return O.Normal.apply(mean, std, backend.to_device(noise, first.device))


def _floating_samples(name: str, dtype: Any) -> None:
    """Real-valued samples cast to integers would be mostly zeros: refused, as in PyTorch
    (its NotImplementedError, ``"normal_kernel_cpu" not implemented for 'Long'``)."""
    if np.dtype(dtype).kind != "f":
        raise DTypeNotImplementedError(
            f"{name}: samples need a floating point dtype, not implemented for "
            f"'{torch_scalar_name(dtype)}' ({np.dtype(dtype)}; for random integers use randint)")


def randn_like(input: Tensor, *, generator: Any = None, dtype: Any = None,  # noqa: A002
               device: Any = None, requires_grad: bool = False,
               memory_format: MemoryFormat = preserve_format) -> Tensor:
    """:func:`randn` samples in ``input``'s shape, dtype and device (unless given)."""
    shape, dtype, device = _like("randn_like", input, dtype, device, memory_format)
    return randn(shape, dtype=dtype, device=device, requires_grad=requires_grad,
                 generator=generator)


def rand_like(input: Tensor, *, generator: Any = None, dtype: Any = None,  # noqa: A002
              device: Any = None, requires_grad: bool = False,
              memory_format: MemoryFormat = preserve_format) -> Tensor:
    """:func:`rand` samples in ``input``'s shape, dtype and device (unless given)."""
    shape, dtype, device = _like("rand_like", input, dtype, device, memory_format)
    return rand(shape, dtype=dtype, device=device, requires_grad=requires_grad,
                generator=generator)


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *,  # noqa: A002
                 generator: Any = None, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False,
                 memory_format: MemoryFormat = preserve_format) -> Tensor:
    """:func:`randint` integers in ``[low, high)`` in ``input``'s shape, dtype and device
    (unless given); ``randint_like(x, high)`` means ``low = 0``, as in PyTorch."""
    if high is None:
        low, high = 0, low
    shape, dtype, device = _like("randint_like", input, dtype, device, memory_format)
    return randint(low, high, shape, dtype=dtype, device=device, generator=generator,
                   requires_grad=requires_grad)


def eye(n: int, m: int | None = None, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """The ``[n, m]`` identity matrix (``m`` defaults to ``n``)."""
    if n < 0 or (m is not None and m < 0):
        raise ShapeError(f"eye: sizes must be >= 0, got n={n}, m={m}")
    xp = backend.array_module(_device(device))
    return Tensor(xp.eye(n, m, dtype=np.dtype(_default(dtype))), requires_grad=requires_grad)


def linspace(start: float, end: float, steps: int, dtype: Any = None,
             device: Any = None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end``, both included. For an
    integer ``dtype``, as PyTorch: ``start`` and ``end`` are truncated to integers first,
    the first half of the values counts up from ``start`` and the second half down from
    ``end`` (in float64), and each is truncated (``linspace(2.5, 10, 7)``: 2, 3, 4, 6, ...)."""
    if isinstance(steps, builtins.bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise InvalidArgument(f"linspace: steps must be a non-negative integer, got {steps!r}")
    xp = backend.array_module(_device(device))
    dtype = np.dtype(_default(dtype))
    if dtype.kind not in "iu":
        return Tensor(xp.linspace(start, end, steps).astype(dtype), requires_grad=requires_grad)
    values = _linspace_halves(int(start), int(end), steps, np.dtype(float64), xp)
    return Tensor(values.astype(dtype), requires_grad=requires_grad)


def _linspace_halves(start: float, end: float, steps: int, dtype: np.dtype, xp: Any) -> Any:
    """PyTorch's linspace in ``dtype``'s arithmetic: the first half counted up from
    ``start``, the second down from ``end`` (so both ends are exact; one step: ``start``)."""
    lo, hi = dtype.type(start), dtype.type(end)
    step = (hi - lo) / dtype.type(builtins.max(steps - 1, 1))
    i = xp.arange(steps, dtype=dtype)
    return xp.where(i < builtins.max(steps // 2, 1), lo + step * i,
                    hi - step * (steps - 1 - i)).astype(dtype)


def randint(low: int = 0, high: int | None = None, size: Sequence[int] = (),
            dtype: Any = int64, device: Any = None, generator: Any = None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in ``[low, high)`` (``randint(high, size)`` and
    ``randint(high=h, size=s)`` mean ``low = 0``); a floating ``dtype`` holds the same whole
    numbers, as in PyTorch. Drawn from ``generator`` (default: the global stream)."""
    rng = numpy_generator(generator, "randint")
    if isinstance(high, tuple | list) and size == ():  # randint(high, size), positionally
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if not isinstance(size, tuple | list):  # (randint(0, 5, 3): PyTorch's TypeError)
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, builtins.bool) or not isinstance(bound, numbers.Integral):
            raise TypeError(f"randint: {name} must be an integer, got {bound!r}")
    if not low < high:
        raise InvalidArgument(f"randint: low ({low}) must be less than high ({high})")
    dtype = np.dtype(_default(dtype, int64))
    if dtype.kind in "iu" and (low < np.iinfo(dtype).min or high - 1 > np.iinfo(dtype).max):
        raise InvalidArgument(f"randint: [{low}, {high}) does not fit in {dtype}")
    arr = rng.integers(int(low), int(high), size=_shape_arg((size,)),
                       dtype=np.int64).astype(dtype)
    return Tensor(backend.to_device(np.asarray(arr), _device(device)),
                  requires_grad=requires_grad)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False,  # noqa: A002
                generator: Any = None) -> Tensor:
    """Draw ``num_samples`` category indices from the weights ``input`` (``[C]``, or
    ``[N, C]`` for one draw per row; non-negative, normalised here), from ``generator``
    (default: the global stream): int64 ``[num_samples]`` or ``[N, num_samples]``."""
    rng = numpy_generator(generator, "multinomial")
    if input.dtype.kind != "f":  # (PyTorch's refusal of integer and bool weights)
        raise DTypeError(f"multinomial only supports floating-point dtypes for input, got: "
                         f"{torch_scalar_name(input.dtype)}")
    weights = np.asarray(input.numpy(), dtype=np.float64)
    if weights.ndim not in (1, 2) or not weights.shape[-1]:
        raise ShapeError(f"multinomial: prob_dist must be 1 or 2 dim with a category, got "
                         f"shape {weights.shape}")
    if num_samples <= 0:
        raise InvalidArgument("cannot sample n_sample <= 0 samples")
    rows = weights.reshape(-1, weights.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(1) <= 0).any():
        raise InvalidArgument("multinomial: probabilities must be finite, non-negative, and "
                              "not all zero in a row")
    if not replacement and num_samples > int((rows > 0).sum(1).min()):
        raise InvalidArgument(f"multinomial: cannot sample {num_samples} > number of "
                              f"categories with non-zero weight without replacement")
    drawn = np.stack([rng.choice(rows.shape[1], size=num_samples, replace=replacement,
                                 p=row / row.sum()) for row in rows])
    out = drawn.reshape(weights.shape[:-1] + (num_samples,)).astype(int64)
    return Tensor(backend.to_device(out, input.device))


def randperm(n: int, dtype: Any = int64, device: Any = None, generator: Any = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` from ``generator`` (default: the global
    stream)."""
    rng = numpy_generator(generator, "randperm")
    if isinstance(n, builtins.bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise InvalidArgument(f"randperm: n must be a non-negative integer, got {n!r}")
    arr = rng.permutation(int(n)).astype(_default(dtype, int64))
    return Tensor(backend.to_device(arr, _device(device)), requires_grad=requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    """Values from ``start`` (default 0) up to ``end`` (excluded) by ``step``. For an integer
    ``dtype``, as PyTorch: the values count from ``start`` by ``step`` truncated to integers;
    for int64 ``end`` is truncated too (``arange(2.5, dtype=int64)`` is ``[0, 1]``, and a step
    of 0.3 is 0: an error), for other integer dtypes the count is that of the numbers given
    (``arange(2.5, dtype=int32)`` is ``[0, 1, 2]``)."""
    if end is None:
        start, end = 0, start
    integer = dtype is not None and np.dtype(_default(dtype)).kind in "iu"
    if integer and np.dtype(dtype) == int64:
        start, end, step = int(start), int(end), int(step)
    if step == 0 or (end - start) * step < 0:
        raise InvalidArgument(f"arange: start {start}, end {end} and step {step} are "
                              "inconsistent (step must be non-zero and point from start to end)")
    xp = backend.array_module(_device(device))
    if integer:
        arr = int(start) + int(step) * xp.arange(math.ceil((end - start) / step))
    else:
        arr = xp.arange(start, end, step)
    if dtype is None:
        dtype = int64 if arr.dtype.kind in "iu" else get_default_dtype()
    return Tensor(arr.astype(dtype), requires_grad=requires_grad)


__all__ = [
    "arange", "as_tensor", "bool_", "empty", "eye", "float16", "float32", "float64",
    "from_numpy", "full", "full_like", "IndexRangeError", "int32", "int64", "InvalidArgument",
    "linspace", "MaxResult", "MedianResult", "MinResult", "multinomial", "no_grad", "normal",
    "ones", "ones_like",
    "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm",
    "set_printoptions",
    "ShapeError", "SortResult", "Tensor", "tensor", "TopkResult", "uint8", "where", "zeros",
    "zeros_like",
]
