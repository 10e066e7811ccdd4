"""Losses as modules (BasicSR style): `(reduction="mean", loss_weight=1.0)`, forward(pred, target)
returns loss_weight * loss. Registered in LOSSES under their class names (YAML `type: L1Loss`)."""
from __future__ import annotations

from .. import functional as F
from ..registry import LOSSES
from .module import Module

__all__ = ["L1Loss", "MSELoss", "CharbonnierLoss"]

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    def __init__(self, reduction: str = "mean", loss_weight: float = 1.0):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, "
                             f"got {reduction!r}")
        self.reduction, self.loss_weight = reduction, float(loss_weight)

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
        if not eps > 0:
            raise ValueError(f"CharbonnierLoss: eps must be positive, got {eps!r}")
        self.eps = float(eps)

    def forward(self, pred, target):
        return self._weighted(F.charbonnier_loss(pred, target, eps=self.eps, reduction=self.reduction))

    def extra_repr(self):
        return super().extra_repr() + f", eps={self.eps}"
