"""Losses as modules (BasicSR style): `(reduction="mean", loss_weight=1.0)`, forward(pred, target)
returns loss_weight * loss. Registered in LOSSES under their class names (YAML `type: L1Loss`)."""
from __future__ import annotations

from .. import functional as F
from .._check import choice, number
from ..functional.loss import REDUCTIONS
from ..registry import LOSSES
from .module import Module

__all__ = ["L1Loss", "MSELoss", "CharbonnierLoss"]

class _Loss(Module):
    def __init__(self, reduction: str = "mean", loss_weight: float = 1.0):
        super().__init__()
        name = type(self).__name__
        self.reduction = choice(name, "reduction", reduction, REDUCTIONS)
        self.loss_weight = number(name, "loss_weight", loss_weight, low=0)

    @classmethod
    def check_kwargs(cls, kwargs: dict) -> None:
        """The constructor's own checks (a loss is cheap to build): for config validation."""
        cls(**kwargs)

    def _weighted(self, loss):
        # skip the multiply at weight 1 so the common case is bit-identical to the plain functional
        return loss if self.loss_weight == 1.0 else loss * self.loss_weight

    def extra_repr(self):
        return f"reduction={self.reduction!r}, loss_weight={self.loss_weight}"


@LOSSES.register()
class L1Loss(_Loss):
    """loss_weight * mean|pred - target| (or sum / elementwise by `reduction`)."""

    def forward(self, pred, target):
        return self._weighted(F.l1_loss(pred, target, reduction=self.reduction))


@LOSSES.register()
class MSELoss(_Loss):
    """loss_weight * mean (pred - target)^2 (or sum / elementwise by `reduction`)."""

    def forward(self, pred, target):
        return self._weighted(F.mse_loss(pred, target, reduction=self.reduction))


@LOSSES.register()
class CharbonnierLoss(_Loss):
    """loss_weight * mean sqrt((pred - target)^2 + eps^2), eps default 1e-3."""

    def __init__(self, reduction: str = "mean", loss_weight: float = 1.0, eps: float = 1e-3):
        super().__init__(reduction, loss_weight)
        self.eps = number("CharbonnierLoss", "eps", eps, low=0, low_open=True)

    def forward(self, pred, target):
        return self._weighted(F.charbonnier_loss(pred, target, eps=self.eps, reduction=self.reduction))

    def extra_repr(self):
        return super().extra_repr() + f", eps={self.eps}"
