"""Neural-network building blocks: Module, Parameter, containers, layers and losses."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.nn import functional, init, utils
from tinytrain.nn.containers import ModuleDict, ModuleList, ParameterDict, ParameterList
from tinytrain.nn.conv import AdaptiveAvgPool2d, AvgPool2d, Conv2d, MaxPool2d
from tinytrain.nn.layers import (
    ELU,
    GELU,
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Dropout2d,
    Embedding,
    Flatten,
    HuberLoss,
    Identity,
    L1Loss,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    SmoothL1Loss,
    Softmax,
    Softplus,
    Tanh,
    Unflatten,
)
from tinytrain.nn.module import Module, Parameter
from tinytrain.nn.normalization import BatchNorm1d, BatchNorm2d, LayerNorm

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "BCELoss",
    "BCEWithLogitsLoss", "Conv2d", "CrossEntropyLoss", "Dropout", "Dropout2d", "ELU",
    "Embedding", "Flatten", "functional", "GELU", "HuberLoss", "Identity", "init", "L1Loss",
    "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MaxPool2d", "Module", "ModuleDict",
    "ModuleList", "MSELoss", "NLLLoss", "Parameter", "ParameterDict", "ParameterList", "ReLU",
    "Sequential", "Sigmoid", "SiLU", "SmoothL1Loss", "Softmax", "Softplus", "Tanh", "Unflatten",
    "utils",
]

_LAYERS = ("tinytrain.nn has " + ", ".join(n for n in __all__ if n[0].isupper())
           + ", and the submodules functional, init and utils")
_CONV = ("tinytrain has 2-D convolution and pooling only (Conv2d, MaxPool2d, AvgPool2d, "
         "AdaptiveAvgPool2d); reshape to 2-D or compute the rest with tensor ops")
_RNN = ("tinytrain has no recurrent or attention layers; build them from nn.Linear and tensor "
        "ops (e.g. an RNN cell: h = (x @ W_x + h @ W_h + b).tanh())")
_hints = _module_getattr(__name__, {
    "DataParallel": "use tinytrain.distributed.DistributedDataParallel (one process per GPU)",
    "Conv1d": _CONV, "Conv3d": _CONV, "ConvTranspose2d": _CONV, "MaxPool1d": _CONV,
    "AvgPool1d": _CONV, "AdaptiveMaxPool2d": _CONV, "Upsample": _CONV,
    "RNN": _RNN, "LSTM": _RNN, "GRU": _RNN, "MultiheadAttention": _RNN, "Transformer": _RNN,
    "TransformerEncoder": _RNN, "TransformerEncoderLayer": _RNN,
    "GroupNorm": "tinytrain has BatchNorm1d/2d and LayerNorm",
    "InstanceNorm2d": "tinytrain has BatchNorm1d/2d and LayerNorm",
}, _LAYERS)


def __getattr__(name: str):
    if name == "parallel":  # loaded on first use: it brings tinytrain.distributed
        import importlib

        return importlib.import_module("tinytrain.nn.parallel")
    return _hints(name)
