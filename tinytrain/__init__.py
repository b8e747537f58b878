"""tinytrain: a small deep-learning training framework, built chapter by chapter.

    import tinytrain as tt
    x = tt.tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward(); x.grad

The names follow PyTorch's, so a PyTorch script whose features are in tinytrain's scope
runs with its imports changed (``import tinytrain as torch``); names outside the scope
raise an AttributeError that says what to use instead.
"""

import importlib as _importlib
import warnings as _warnings

# the subpackages too, as `torch.nn` and `torch.optim` are reachable from `import torch`
from tinytrain import (
    accelerator,
    amp,
    backends,
    cpu,
    cuda,
    data,
    distributions,
    func,
    linalg,
    nn,
    optim,
    return_types,
    utils,
    version,
)
from tinytrain._missing import TORCH_HINTS as _HINTS
from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.amp import autocast
from tinytrain.autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from tinytrain.backend import Device as device
from tinytrain.backend import cuda_is_available, set_default_device
from tinytrain.backend import default_device as get_default_device
from tinytrain.backends import get_float32_matmul_precision, set_float32_matmul_precision
from tinytrain.dtypes import (
    bfloat16,
    can_cast,
    finfo,
    get_default_dtype,
    iinfo,
    int8,
    int16,
    promote_types,
    result_type,
    set_default_dtype,
)
from tinytrain.func import vmap
from tinytrain.functions import (
    abs,
    add,
    all,
    allclose,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    bernoulli,
    bincount,
    bmm,
    broadcast_to,
    cat,
    ceil,
    chunk,
    clamp,
    clip,
    clone,
    concat,
    concatenate,
    cos,
    count_nonzero,
    cumprod,
    cumsum,
    diag,
    diag_embed,
    diagonal,
    diff,
    div,
    dot,
    einsum,
    eq,
    equal,
    exp,
    expm1,
    flatten,
    flip,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    gather,
    ge,
    greater,
    greater_equal,
    gt,
    histc,
    histogram,
    index_add,
    index_put,
    index_reduce,
    index_select,
    is_floating_point,
    is_tensor,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    lerp,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    lt,
    masked_fill,
    masked_select,
    matmul,
    max,
    maximum,
    mean,
    median,
    min,
    minimum,
    mm,
    moveaxis,
    movedim,
    mul,
    multiply,
    mv,
    nanmean,
    nanmedian,
    nansum,
    narrow,
    ne,
    neg,
    negative,
    nonzero,
    norm,
    not_equal,
    numel,
    outer,
    permute,
    pow,
    prod,
    ravel,
    reciprocal,
    relu,
    remainder,
    reshape,
    roll,
    round,
    rsqrt,
    scatter,
    scatter_add,
    scatter_reduce,
    select,
    sigmoid,
    sign,
    sin,
    softmax,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    sub,
    subtract,
    sum,
    swapaxes,
    swapdims,
    take,
    tanh,
    tile,
    topk,
    transpose,
    tril,
    triu,
    true_divide,
    trunc,
    unbind,
    unflatten,
    unique,
    unsqueeze,
    var,
    where,
)
from tinytrain.kernels.cpu.parallel import get_num_threads, set_num_threads
from tinytrain.linalg import inv as inverse
from tinytrain.more_ops import (
    addcdiv,
    addcmul,
    addmm,
    addmv,
    addr,
    arctan2,
    argwhere,
    atan2,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    baddbmm,
    broadcast_tensors,
    cdist,
    column_stack,
    copysign,
    cross,
    cummax,
    cummin,
    deg2rad,
    dist,
    dstack,
    erf,
    erfc,
    erfinv,
    fliplr,
    flipud,
    frac,
    heaviside,
    hstack,
    hypot,
    isin,
    kron,
    kthvalue,
    logaddexp,
    logcumsumexp,
    logit,
    logspace,
    meshgrid,
    nan_to_num,
    rad2deg,
    repeat_interleave,
    rot90,
    row_stack,
    sgn,
    signbit,
    std_mean,
    take_along_dim,
    tensor_split,
    tensordot,
    trace,
    tril_indices,
    triu_indices,
    var_mean,
    vstack,
    xlogy,
)
from tinytrain.random import (
    Generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from tinytrain.random import _default as default_generator  # the global stream, a Generator
from tinytrain.serialization import load, save
from tinytrain.tensor import MemoryFormat as memory_format
from tinytrain.tensor import (
    Tensor,
    arange,
    as_tensor,
    bool_,
    channels_last,
    channels_last_3d,
    contiguous_format,
    empty,
    empty_like,
    eye,
    float16,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    int32,
    int64,
    linspace,
    multinomial,
    normal,
    ones,
    ones_like,
    preserve_format,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    set_printoptions,
    tensor,
    uint8,
    zeros,
    zeros_like,
)
from tinytrain.tensor_types import (
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)

# log(0), x / 0, exp(1000), inf - inf: PyTorch computes inf or NaN without a word, and NumPy
# would warn from the line inside tinytrain that called it, not the learner's. NumPy's
# floating-point warnings are ignored where tinytrain's own modules raise them, nowhere else
# (a filter costs nothing per op; the reductions, whose warnings NumPy's own code raises,
# and the whole backward pass turn them off with np.errstate instead). pytest resets the
# filters of a test session, so there the forward ops may warn.
_warnings.filterwarnings("ignore", r"(overflow|underflow|invalid value|divide by zero) "
                         "encountered", RuntimeWarning, module=r"tinytrain\.")

# PyTorch's other names for the dtypes (these shadow the builtins only inside this module)
bool, half, float, double, int, long = bool_, float16, float32, float64, int32, int64  # noqa: A001
short = int16

#: ``torch.Size``: tinytrain's shapes are plain tuples.
Size = tuple

__version__ = version.__version__

_deterministic = False


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted for PyTorch's scripts: tinytrain's kernels are deterministic already (the
    GPU's col2im gathers instead of adding atomically; see docs/design.md)."""
    global _deterministic
    _deterministic = True if mode else False  # (bool is the dtype in this module)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic


_LAZY_SUBMODULES = ("distributed", "models", "onnx")


def __getattr__(name: str):
    """``tt.distributed`` / ``tt.models`` / ``tt.onnx`` load on first use; other missing names
    get a hint."""
    if name in _LAZY_SUBMODULES:
        try:
            return _importlib.import_module(f"tinytrain.{name}")
        except ModuleNotFoundError:
            pass
    return _module_getattr("tinytrain", _HINTS)(name)


# as torch's, this includes names that shadow builtins (max, float, ...)
__all__ = [
    "abs", "accelerator", "add", "all", "allclose", "amax", "amin", "any", "arange",
    "are_deterministic_algorithms_enabled", "argmax", "argmin", "argsort", "as_tensor",
    "bernoulli",
    "BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor",
    "LongTensor", "CharTensor", "ShortTensor", "finfo", "iinfo",
    "amp", "autocast", "bfloat16", "cpu", "linalg", "get_float32_matmul_precision",
    "set_float32_matmul_precision", "version",
    "autograd", "backends", "bmm", "bool", "bool_", "broadcast_to", "can_cast", "cat", "ceil",
    "chunk", "clamp", "clip", "clone", "concat", "concatenate", "cos", "count_nonzero", "cuda",
    "cumprod",
    "channels_last", "channels_last_3d", "contiguous_format", "cuda_is_available", "cumsum",
    "data", "default_generator", "device", "div", "dot", "double", "empty", "empty_like",
    "distributions", "func", "vmap",
    "diag", "diag_embed", "diagonal", "diff",
    "einsum",
    "enable_grad", "eq", "equal", "exp", "expm1", "eye", "flatten", "flip", "float", "float16",
    "float32", "float64", "floor", "floor_divide", "from_numpy", "full", "full_like", "gather",
    "fmod", "fmax", "fmin", "index_put", "index_reduce", "nanmedian", "scatter_reduce",
    "Generator",
    "ge", "get_default_device", "get_default_dtype", "get_num_threads", "get_rng_state",
    "greater", "greater_equal", "gt", "half", "index_select", "inference_mode", "int", "int8",
    "index_add", "initial_seed", "inverse", "histc", "histogram", "bincount",
    "int16", "int32", "int64", "is_floating_point", "is_grad_enabled", "is_tensor", "isclose",
    "isfinite", "isinf", "isnan", "le", "less", "less_equal", "linspace", "load", "log",
    "lerp",
    "log10", "log1p",
    "log2", "log_softmax", "logical_and", "logical_not", "logical_or", "logical_xor",
    "logsumexp", "long", "lt", "manual_seed", "masked_fill", "masked_select", "matmul", "max",
    "maximum", "mean", "memory_format", "min", "minimum", "mm", "moveaxis", "movedim", "mul",
    "median",
    "multinomial",
    "multiply", "mv", "narrow", "ne", "neg", "negative", "nn", "no_grad", "nonzero", "norm",
    "nanmean", "nansum",
    "normal",
    "not_equal", "numel", "ones", "ones_like", "optim", "outer", "permute", "pow",
    "prod",
    "preserve_format",
    "promote_types", "rand", "rand_like", "randint", "randn", "randn_like", "randperm",
    "randint_like",
    "ravel", "reciprocal", "relu", "remainder", "reshape", "result_type", "return_types",
    "round", "rsqrt",
    "roll",
    "save", "scatter", "select", "set_default_device", "set_default_dtype", "set_grad_enabled",
    "seed",
    "scatter_add",
    "set_num_threads", "set_printoptions", "set_rng_state", "short", "sigmoid", "sign", "sin",
    "Size",
    "softmax", "sort", "split", "sqrt", "square", "squeeze", "stack", "std", "sub", "subtract",
    "sum", "swapaxes", "swapdims", "tanh", "Tensor", "tensor", "tile", "topk", "transpose",
    "take",
    "tril", "triu", "true_divide", "trunc", "uint8", "unbind", "unflatten", "unique", "unsqueeze",
    "use_deterministic_algorithms", "utils", "var", "where", "zeros", "zeros_like",
]
__all__ += [  # tinytrain.more_ops
    "addcdiv", "addcmul", "addmm", "addmv", "addr", "arctan2", "argwhere", "atan2",
    "atleast_1d", "atleast_2d", "atleast_3d", "baddbmm", "broadcast_tensors", "cdist",
    "column_stack", "copysign", "cross", "cummax", "cummin", "deg2rad", "dist", "dstack", "erf",
    "erfc", "erfinv", "fliplr", "flipud", "frac", "heaviside", "hstack", "hypot", "isin", "kron",
    "kthvalue",
    "logaddexp", "logcumsumexp", "logit", "logspace", "meshgrid", "nan_to_num", "rad2deg",
    "repeat_interleave", "rot90", "row_stack", "sgn", "signbit", "std_mean", "take_along_dim",
    "tensor_split", "tensordot", "tril_indices", "triu_indices", "trace", "var_mean", "vstack",
    "xlogy",
]
