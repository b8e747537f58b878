"""Optimizers: SGD (momentum, weight decay) and Adam."""

from tinytrain.optim.adam import Adam
from tinytrain.optim.optimizer import Optimizer
from tinytrain.optim.sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer"]
