"""An exponential moving average of a model's weights: BasicSR's `net_g_ema` (`train.ema_decay`),
torch's `swa_utils.AveragedModel` with an EMA rule. Real-ESRGAN publishes (and infers with) these
averaged weights as `params_ema`; they are smoother than the last step's.
"""
from __future__ import annotations

import copy

import numpy as np

from .._check import number

__all__ = ["EMA"]


class EMA:
    """`EMA(model, decay)`: `module` is a copy of `model` in eval mode, without gradients. After each
    optimizer step, `update()` sets, for every parameter,

        ema = decay * ema + (1 - decay) * weight      (BasicSR's model_ema: mul_ then add_)

    and copies every buffer (BasicSR leaves the EMA's buffers at their first values, which is wrong
    for a network with BatchNorm running statistics; SR generators have none, so the two agree).
    decay is in [0, 1): 0.999 averages over roughly the last thousand steps.

    `power` (traiNNer-redux's ema_power, the ema-pytorch package's warm-up): the decay of the k-th
    update (k = the optimizer steps taken, 1-based) is min(decay, 1 - k ** -power), and the first
    two updates copy the weights, so a run from scratch is not averaged with its random start.
    None (default): decay at every update, as BasicSR."""

    def __init__(self, model, decay: float, power: float | None = None):
        self.decay = number("EMA", "decay", decay, 0.0, 1.0, high_open=True)
        self.power = None if power is None else number("EMA", "power", power, 0.0, low_open=True)
        self.model = model
        self.module = copy.deepcopy(model).eval()
        self.module.requires_grad_(False)

    def current_decay(self, step: int | None) -> float:
        """The decay of update number `step` (1-based; needed with `power`)."""
        if self.power is None:
            return self.decay
        if step is None:
            raise ValueError("EMA.update: step is needed with power (the warm-up follows it)")
        return 0.0 if step <= 2 else min(self.decay, max(0.0, 1.0 - step ** -self.power))

    def update(self, step: int | None = None) -> None:
        """One averaging step, after optimizer step number `step` (1-based)."""
        decay = self.current_decay(step)
        ema = dict(self.module.named_parameters())
        for name, p in self.model.named_parameters():
            e = ema[name].data
            np.multiply(e, decay, out=e, casting="same_kind")
            e += (1 - decay) * p.data
        ema_buffers = dict(self.module.named_buffers())
        for name, b in self.model.named_buffers():
            ema_buffers[name].data[...] = b.data

    def state_dict(self) -> dict:
        return self.module.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state)
