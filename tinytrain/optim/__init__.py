"""Optimizers (SGD with momentum and weight decay, Adam, Adadelta) and learning-rate schedules."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.optim import lr_scheduler
from tinytrain.optim.adadelta import Adadelta
from tinytrain.optim.adam import Adam
from tinytrain.optim.optimizer import Optimizer
from tinytrain.optim.sgd import SGD

__all__ = ["SGD", "Adadelta", "Adam", "Optimizer", "lr_scheduler"]

__getattr__ = _module_getattr(__name__, {
    "AdamW": "not in tinytrain; optim.Adam(params, weight_decay=...) is the closest (its decay "
             "is added to the gradient, not decoupled as in AdamW)",
}, "tinytrain.optim has SGD, Adam and Adadelta, and lr_scheduler.StepLR / CosineAnnealingLR")
