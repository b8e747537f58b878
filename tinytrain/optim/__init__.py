"""Optimizers (SGD, Adam, AdamW, NAdam, RAdam, Adamax, RMSprop, Adagrad, Adadelta) and
learning-rate schedules."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.optim import lr_scheduler
from tinytrain.optim.adadelta import Adadelta
from tinytrain.optim.adagrad import Adagrad
from tinytrain.optim.adam import Adam
from tinytrain.optim.adamax import Adamax
from tinytrain.optim.adamw import AdamW
from tinytrain.optim.nadam import NAdam
from tinytrain.optim.optimizer import Optimizer
from tinytrain.optim.radam import RAdam
from tinytrain.optim.rmsprop import RMSprop
from tinytrain.optim.sgd import SGD

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "lr_scheduler"]

__getattr__ = _module_getattr(__name__, {
    "LBFGS": "not in tinytrain: it needs a closure that re-evaluates the loss; use Adam or SGD",
}, "tinytrain.optim has SGD, Adam, AdamW, NAdam, RAdam, Adamax, RMSprop, Adagrad and "
   "Adadelta, and lr_scheduler")
