"""Optimizers (SGD, Adam, AdamW) and learning-rate schedulers, with torch's names and update rules;
all registered in framework.registry.OPTIMIZERS / SCHEDULERS under their class names."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .lr_scheduler import (CosineAnnealingLR, CosineAnnealingRestartLR, LinearWarmupLR, LRScheduler,
                           MultiStepLR, StepLR)
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler", "LRScheduler", "StepLR",
           "MultiStepLR", "CosineAnnealingLR", "CosineAnnealingRestartLR", "LinearWarmupLR"]
