"""Optimizers (``cr.optim``) and learning-rate schedules (``cr.optim.lr_scheduler``), following ``torch.optim``."""
from chainrule.optim import lr_scheduler
from chainrule.optim.adagrad import Adagrad
from chainrule.optim.adam import Adam, AdamW
from chainrule.optim.adam_variants import Adamax, NAdam, RAdam
from chainrule.optim.lbfgs import LBFGS
from chainrule.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR
from chainrule.optim.optimizer import Optimizer
from chainrule.optim.rmsprop import RMSprop
from chainrule.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Adagrad", "Adamax", "LBFGS", "NAdam", "RAdam", "RMSprop", "CosineAnnealingLR",
           "LRScheduler", "Optimizer", "StepLR", "lr_scheduler"]
