"""Optimizers (SGD with momentum and weight decay, Adam) and learning-rate schedules."""

from tinytrain.optim import lr_scheduler
from tinytrain.optim.adam import Adam
from tinytrain.optim.optimizer import Optimizer
from tinytrain.optim.sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer", "lr_scheduler"]
