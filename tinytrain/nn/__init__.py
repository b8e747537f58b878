"""Neural-network building blocks: Module, Parameter and layers."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.nn import functional, init
from tinytrain.nn.conv import AvgPool2d, Conv2d, MaxPool2d
from tinytrain.nn.layers import (
    BCELoss,
    BCEWithLogitsLoss,
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
    "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "Conv2d", "CrossEntropyLoss", "Dropout",
    "Flatten", "functional", "Identity", "init", "Linear", "LogSoftmax", "MaxPool2d", "Module",
    "MSELoss", "NLLLoss", "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh",
]

_OFFER = ("tinytrain.nn has Linear, Conv2d, MaxPool2d, AvgPool2d, ReLU, Sigmoid, Tanh, Softmax, "
          "LogSoftmax, Flatten, Dropout, Identity, Sequential, CrossEntropyLoss, NLLLoss, "
          "MSELoss, BCELoss, BCEWithLogitsLoss, Module and Parameter")
__getattr__ = _module_getattr(__name__, {
    "DataParallel": "use tinytrain.distributed.DistributedDataParallel (one process per GPU)",
    "parallel": "use tinytrain.distributed.DistributedDataParallel (one process per GPU)",
    "utils": "nn.utils (clip_grad_norm_, ...) is not in tinytrain; clip by hand under "
             "tt.no_grad() if you need it",
}, _OFFER)
