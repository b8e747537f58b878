"""Neural-network building blocks: Module, Parameter and layers."""

from tinytrain.nn import functional, init
from tinytrain.nn.conv import AvgPool2d, Conv2d, MaxPool2d
from tinytrain.nn.layers import (
    CrossEntropyLoss,
    Dropout,
    Flatten,
    Identity,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from tinytrain.nn.module import Module, Parameter

__all__ = [
    "AvgPool2d", "Conv2d", "CrossEntropyLoss", "Dropout", "Flatten", "Identity", "Linear",
    "MaxPool2d", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional",
    "init",
]
