"""Optimizers (SGD, Adam, AdamW, NAdam, RAdam, Adamax, RMSprop, Adagrad, Adadelta, LBFGS) and
learning-rate schedules."""

from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.optim import lr_scheduler
from tinytrain.optim.adadelta import Adadelta
from tinytrain.optim.adagrad import Adagrad
from tinytrain.optim.adam import Adam
from tinytrain.optim.adamax import Adamax
from tinytrain.optim.adamw import AdamW
from tinytrain.optim.lbfgs import LBFGS
from tinytrain.optim.nadam import NAdam
from tinytrain.optim.optimizer import Optimizer
from tinytrain.optim.radam import RAdam
from tinytrain.optim.rmsprop import RMSprop
from tinytrain.optim.sgd import SGD

__all__ = ["LBFGS", "SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam",
           "Optimizer", "RAdam", "RMSprop", "lr_scheduler"]

__getattr__ = _module_getattr(__name__, {}, "tinytrain.optim has SGD, Adam, AdamW, NAdam, RAdam, "
                             "Adamax, RMSprop, Adagrad, Adadelta and LBFGS, and lr_scheduler")
