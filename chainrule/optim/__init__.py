"""Optimizers (``cr.optim``) and learning-rate schedules, following ``torch.optim``."""
from chainrule.optim import lr_scheduler
from chainrule.optim.adam import Adam, AdamW
from chainrule.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR
from chainrule.optim.optimizer import Optimizer
from chainrule.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "CosineAnnealingLR", "LRScheduler", "Optimizer", "StepLR",
           "lr_scheduler"]
