"""Optimizers (``cr.optim``) and learning-rate schedules, following ``torch.optim``."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "CosineAnnealingLR", "LRScheduler", "Optimizer", "StepLR",
           "lr_scheduler"]
