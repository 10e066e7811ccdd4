"""Optimizers (SGD, Adam, AdamW) and learning-rate schedulers, with torch's names and update rules,
all registered in framework.registry.OPTIMIZERS / SCHEDULERS under their class names; the weights'
EMA (BasicSR's net_g_ema)."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .ema import EMA
from .lr_scheduler import (CosineAnnealingLR, CosineAnnealingRestartLR, LambdaLR, LinearWarmupLR,
                           LRScheduler, MultiStepLR, OneCycleLR, StepLR)
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["EMA", "Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler", "LRScheduler", "StepLR",
           "MultiStepLR", "CosineAnnealingLR", "CosineAnnealingRestartLR", "LinearWarmupLR",
           "LambdaLR", "OneCycleLR"]
