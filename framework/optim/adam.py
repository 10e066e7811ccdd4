"""Adam and AdamW: torch's for-loop CPU update, computed in the parameter's dtype."""
from __future__ import annotations


import numpy as np

from .._check import is_number, number
from ..registry import OPTIMIZERS
from . import fused as _fused
from .optimizer import Optimizer


@OPTIMIZERS.register()
class Adam(Optimizer):
    """Adam (Kingma & Ba), as torch.optim.Adam with foreach=False on CPU:

        t += 1
        g = grad (negated if maximize)
        p *= 1 - lr * weight_decay        if decoupled (AdamW)
        g = g + weight_decay * p          otherwise (L2 penalty)
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        vmax = max(vmax, v)               if amsgrad, and v below means vmax
        p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Args:
        params: iterable of Parameters or of group dicts.
        lr (float): default 1e-3. betas (float, float): default (0.9, 0.999), each in [0, 1).
        eps (float): default 1e-8. weight_decay (float): default 0.
        amsgrad (bool): default False. maximize (bool): default False.
        decoupled_weight_decay (bool): AdamW's decay. Default False.
        fused (bool or None): update every parameter in one numba pass (optim/fused.py), with the
            same bits as the per-parameter update; None (default) or False: per parameter. Not part
            of the state_dict (a way of computing, not an option of the method).
    State per parameter: "step" (int), "exp_avg", "exp_avg_sq" and, with amsgrad, "max_exp_avg_sq".
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 decoupled_weight_decay: bool = False, fused: bool | None = None):
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        if fused is not None and not isinstance(fused, (bool, np.bool_)):
            raise TypeError(f"{type(self).__name__}: fused must be a bool or None, got {fused!r}")
        self.fused = None if fused is None else bool(fused)

    def _step_all(self) -> None:
        if not (self.fused and _fused.step(self)):
            super()._step_all()

    def _check_group(self, group: dict) -> None:
        name = type(self).__name__
        number(name, "lr", group["lr"], low=0)
        number(name, "eps", group["eps"], low=0)
        group["betas"] = _betas(group["betas"])
        for i, beta in enumerate(group["betas"]):
            number(name, f"betas[{i}]", beta, low=0, high=1.0, high_open=True)
        number(name, "weight_decay", group["weight_decay"], low=0)

    def _update(self, group: dict, p: np.ndarray, grad: np.ndarray, state: dict) -> None:
        dt = p.dtype.type  # every scalar in p's dtype: float32 stays float32
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p)
            state["exp_avg_sq"] = np.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(p)
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        state["step"] += 1
        step = state["step"]

        g = -grad if group["maximize"] else grad
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p *= dt(1 - lr * wd)
            else:
                g = g + dt(wd) * p
        _lerp_(exp_avg, g, dt(1 - beta1))
        exp_avg_sq *= dt(beta2)
        exp_avg_sq += dt(1 - beta2) * g * g

        bias_correction1 = 1 - beta1 ** step  # Python floats (double), as torch
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        step_size = lr / bias_correction1
        if group["amsgrad"]:
            if "max_exp_avg_sq" not in state:  # amsgrad switched on mid-run
                state["max_exp_avg_sq"] = np.zeros_like(p)
            np.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
            denom = np.sqrt(state["max_exp_avg_sq"])
        else:
            denom = np.sqrt(exp_avg_sq)
        denom /= dt(bias_correction2_sqrt)
        denom += dt(eps)
        update = dt(-step_size) * exp_avg  # torch's addcdiv: p + (value * m) / denom
        update /= denom
        p += update


@OPTIMIZERS.register()
class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): `p *= 1 - lr * weight_decay` before
    the Adam step. Same arguments as Adam, but weight_decay defaults to 1e-2."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True, fused=fused)

    def _check_group(self, group: dict) -> None:
        if not group.get("decoupled_weight_decay", True):
            raise ValueError("AdamW: decoupled_weight_decay must stay True (use Adam for L2)")
        super()._check_group(group)


def _lerp_(start: np.ndarray, end: np.ndarray, weight) -> None:
    """start += weight * (end - start) in place, with torch's two branches for accuracy."""
    diff = end - start
    if abs(weight) < 0.5:
        diff *= weight
        start += diff
    else:
        diff *= weight - type(weight)(1)
        np.add(end, diff, out=start)


def _betas(betas):
    """(beta1, beta2) as a tuple (YAML and JSON give lists)."""
    if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        if not is_number(b):
            raise TypeError(f"betas[{i}] must be a number, got {type(b).__name__} {b!r}")
    return tuple(betas)
