"""Neural-network building blocks: Module, Parameter and layers."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.nn import functional, init
from tinytrain.nn.conv import AvgPool2d, Conv2d, MaxPool2d
from tinytrain.nn.layers import (
    CrossEntropyLoss,
    Dropout,
    Flatten,
    Identity,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from tinytrain.nn.module import Module, Parameter

__all__ = [
    "AvgPool2d", "Conv2d", "CrossEntropyLoss", "Dropout", "Flatten", "Identity", "Linear",
    "LogSoftmax", "MSELoss", "MaxPool2d", "Module", "NLLLoss", "Parameter", "ReLU",
    "Sequential", "Sigmoid", "Softmax", "Tanh", "functional", "init",
]

_OFFER = ("tinytrain.nn has Linear, Conv2d, MaxPool2d, AvgPool2d, ReLU, Sigmoid, Tanh, Softmax, "
          "LogSoftmax, Flatten, Dropout, Identity, Sequential, CrossEntropyLoss, NLLLoss, "
          "MSELoss, Module and Parameter")
__getattr__ = _module_getattr(__name__, {
    "DataParallel": "use tinytrain.distributed.DistributedDataParallel (one process per GPU)",
    "parallel": "use tinytrain.distributed.DistributedDataParallel (one process per GPU)",
    "utils": "nn.utils (clip_grad_norm_, ...) is not in tinytrain; clip by hand under "
             "tt.no_grad() if you need it",
}, _OFFER)
