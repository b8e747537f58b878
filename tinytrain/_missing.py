"""Errors for PyTorch names tinytrain does not have, saying what to use instead.

A ported script that reaches for ``torch.compile`` or ``nn.BatchNorm2d`` should not get a
bare ``AttributeError``: each package module's ``__getattr__`` (made here) says that the
name is outside tinytrain and, where there is one, what to use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SCOPE = ("tinytrain implements the part of PyTorch its course builds (README: 'Differences "
         "from PyTorch')")


def module_getattr(module: str, hints: dict[str, str], offer: str = ""
                   ) -> Callable[[str], Any]:
    """A module ``__getattr__`` that raises AttributeError naming ``module.name`` and
    ``hints[name]`` (or ``offer``, what the module has, for names without a hint)."""

    def __getattr__(name: str) -> Any:
        message = f"module {module!r} has no attribute {name!r}"
        if not name.startswith("__"):
            message += f": {hints.get(name) or offer or SCOPE}"
        raise AttributeError(message)

    return __getattr__


def layer_placeholder(name: str, hint: str, base: type) -> type:
    """PyTorch's layer ``nn.<name>``, which tinytrain does not implement, as a real subclass of
    ``base`` (``nn.Module``): ``isinstance(m, (nn.Conv1d, nn.Conv2d))`` works in a ported
    script, and making one raises NotImplementedError naming the layer and ``hint``."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"nn.{name} is not implemented in tinytrain: {hint}")

    doc = f"PyTorch's ``nn.{name}``, not implemented in tinytrain: {hint}."
    return type(name, (base,), {"__init__": __init__, "__doc__": doc,
                                "__module__": "tinytrain.nn", "__qualname__": name})


_NUMPY = "not part of tinytrain; compute on x.numpy() with NumPy"
_DTYPES = ("tinytrain has bool, uint8, int32, int64, float16, float32 and float64 tensors; "
           "no bfloat16 or complex")

TORCH_HINTS = {
    "compile": "tinytrain has no compiler; call the model directly: model(x)",
    "jit": "tinytrain has no TorchScript; call the model directly, and save weights with "
           "tt.save(model.state_dict(), path)",
    "set_default_tensor_type": "deprecated in PyTorch: tt.set_default_dtype(tt.float64) sets "
                               "the default float dtype, tt.set_default_device(...) the device",
    "complex64": _DTYPES, "complex128": _DTYPES, "cfloat": _DTYPES,
    "fft": _NUMPY, "special": _NUMPY,
    "sparse": _NUMPY,
    "mps": "tinytrain runs on 'cpu' and 'cuda' (an NVIDIA GPU through CuPy)",
    "xpu": "tinytrain runs on 'cpu' and 'cuda' (an NVIDIA GPU through CuPy)",
    "hub": "tinytrain has no model hub; its models are in tinytrain.models",
    "onnx": "tinytrain cannot export models to ONNX; save weights with "
            "tt.save(model.state_dict(), path)",
    "export": "tinytrain cannot export models; save weights with tt.save(model.state_dict(), "
              "path)",
    "multiprocessing": "tinytrain starts one process per GPU with MPI (see tinytrain.distributed)",
}

#: What a missing Tensor method's AttributeError says (``Tensor.__getattr__``).
TENSOR_OFFER = ("tinytrain's Tensor has the methods its course uses (README: 'Differences from "
                "PyTorch'); for anything else compute on t.numpy() with NumPy and wrap the "
                "result with tt.tensor(...)")
_STORAGE = "a tinytrain Tensor wraps one NumPy/CuPy array: use t.numpy() (its array, on the CPU)"
TENSOR_HINTS = {
    "storage": _STORAGE, "untyped_storage": _STORAGE,
    "as_strided": _STORAGE,
    "share_memory_": "tinytrain has no worker processes to share memory with",
    "to_sparse": "tinytrain has dense tensors only",
    "is_sparse": "tinytrain has dense tensors only",
    "bfloat16": _DTYPES, "cfloat": _DTYPES, "cdouble": _DTYPES, "complex": _DTYPES,
    "bincount": _NUMPY, "mode": _NUMPY,
    "flip": _NUMPY,
    "multinomial": "not in tinytrain; sample with NumPy: np.random.default_rng().choice(n, p=...)",
}

#: Methods of PyTorch's ``nn.Module`` that tinytrain's lacks (``Module.__getattr__``).
MODULE_HINTS = {
    "register_backward_hook": "deprecated in PyTorch, and not in tinytrain: use "
                              "register_full_backward_hook",
    "compile": TORCH_HINTS["compile"],
    "bfloat16": _DTYPES,
    "share_memory": "tinytrain has no worker processes to share memory with",
    "to_empty": "tinytrain creates parameters with their values; use model.to(device)",
    "register_load_state_dict_post_hook": "not in tinytrain; change the state dict before "
                                          "load_state_dict",
    "register_state_dict_pre_hook": "not in tinytrain; change the state dict after state_dict()",
}
#: The public names of ``torch.Tensor`` (2.x) that tinytrain's Tensor lacks: reading one raises
#: an AttributeError with a hint (``TENSOR_HINTS``, else ``TENSOR_OFFER``).
TORCH_TENSOR_NAMES = """
H absolute absolute_ acos acos_ acosh acosh_ addbmm addbmm_ adjoint aminmax angle apply_
arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan_ arctanh
arctanh_ as_strided as_strided_ as_strided_scatter as_subclass asin asin_ asinh asinh_ atan
atan_ atanh atanh_ bfloat16 bincount bitwise_and bitwise_and_ bitwise_left_shift
bitwise_left_shift_ bitwise_not bitwise_not_ bitwise_or bitwise_or_ bitwise_right_shift
bitwise_right_shift_ bitwise_xor bitwise_xor_ cauchy_ ccol_indices cdouble cfloat chalf
cholesky cholesky_inverse cholesky_solve coalesce col_indices conj conj_physical
conj_physical_ const_data_ptr corrcoef cosh cosh_ cov crow_indices cumsum_ dense_dim
dequantize det diagflat diagonal_scatter digamma digamma_ dim_order divide_ dsplit eig eq_
exp2 exp2_ expm1_ exponential_ fix fix_ float_power float_power_ floor_divide floor_divide_
frexp gcd gcd_ ge_ geometric_ geqrf ger grad_dtype greater_ greater_equal_ gt_ hardshrink
hash_tensor histogram hsplit i0 i0_ igamma igamma_ igammac igammac_ imag index index_copy
index_copy_ index_fill index_fill_ indices inner int_repr
ipu is_coalesced is_complex is_conj is_distributed is_inference is_ipu is_maia is_meta
is_mkldnn is_mps is_mtia is_neg is_nested is_nonzero is_quantized is_same_size is_set_to
is_shared is_signed is_sparse is_sparse_csr is_vulkan is_xla is_xpu isneginf isposinf isreal
istft layout lcm lcm_ ldexp ldexp_ le_ less_ less_equal_ lgamma lgamma_ log10_ log1p_ log2_
log_normal_ logaddexp2 logdet logical_and_ logical_not_ logical_or_ logical_xor_ lstsq lt_
lu lu_solve mH map2_ map_ masked_scatter masked_scatter_ matrix_exp matrix_power mode
module_load msort mtia multiply_ mvlgamma mvlgamma_ name nanquantile narrow_copy ne_
negative_ new_empty_strided nextafter nextafter_ nonzero_static not_equal_ orgqr ormqr
output_nr pinverse polygamma polygamma_ positive prelu put put_ q_per_channel_axis
q_per_channel_scales q_per_channel_zero_points q_scale q_zero_point qr qscheme quantile
random_ real record_stream reinforce remainder_ renorm renorm_ resize resize_ resize_as
resize_as_ resize_as_sparse_ resolve_conj resolve_neg row_indices rsqrt_ select_scatter set_
share_memory_ sinc sinc_ sinh sinh_ slice_inverse slice_scatter slogdet smm solve sparse_dim
sparse_mask sparse_resize_ sparse_resize_and_clear_ split_with_sizes sspaddmm stft storage
storage_type subtract_ sum_to_size svd symeig tan tan_ to_dense to_mkldnn to_padded_tensor
to_sparse to_sparse_bsc to_sparse_bsr to_sparse_coo to_sparse_csc to_sparse_csr
triangular_solve tril_ triu_ true_divide_ unique_consecutive unsafe_chunk unsafe_split
unsafe_split_with_sizes untyped_storage values vdot volatile vsplit xpu
"""
