"""SGD with momentum, dampening, Nesterov and L2 weight decay: torch's update rule exactly."""
from __future__ import annotations

import numpy as np

from .._check import number
from ..registry import OPTIMIZERS
from .optimizer import Optimizer


@OPTIMIZERS.register()
class SGD(Optimizer):
    """Stochastic gradient descent, as torch.optim.SGD (for-loop CPU implementation):

        g = grad (negated if maximize) + weight_decay * p
        buf = g                                       on the first step (no dampening)
        buf = momentum * buf + (1 - dampening) * g    afterwards
        g = g + momentum * buf if nesterov else buf   (only when momentum != 0)
        p -= lr * g

    Args:
        params: iterable of Parameters or of group dicts.
        lr (float): learning rate. Default 1e-3.
        momentum (float): default 0. dampening (float): default 0.
        weight_decay (float): L2 penalty added to the gradient. Default 0.
        nesterov (bool): needs momentum > 0 and dampening == 0. Default False.
        maximize (bool): ascend instead of descend. Default False.
    State per parameter: "momentum_buffer" (array like p) when momentum != 0.
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        number("SGD", "lr", group["lr"], low=0)
        number("SGD", "momentum", group["momentum"], low=0)
        number("SGD", "weight_decay", group["weight_decay"], low=0)
        number("SGD", "dampening", group["dampening"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov=True requires a momentum > 0 and zero dampening, got "
                             f"momentum={group['momentum']}, dampening={group['dampening']}")

    def _update(self, group: dict, p: np.ndarray, grad: np.ndarray, state: dict) -> None:
        dt = p.dtype.type  # every scalar in p's dtype: float32 stays float32
        g = -grad if group["maximize"] else grad
        if group["weight_decay"] != 0:
            g = g + dt(group["weight_decay"]) * p
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(g, copy=True)
            else:
                buf *= dt(momentum)
                buf += dt(1 - group["dampening"]) * g
            g = g + dt(momentum) * buf if group["nesterov"] else buf
        p += dt(-group["lr"]) * g
