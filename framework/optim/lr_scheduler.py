"""Learning-rate schedulers with torch's calling convention, in closed form.

Construct a scheduler after its optimizer: it records each group's `initial_lr` (its `lr`) and sets
the lr for iteration 0. Call `step()` once per iteration, after `optimizer.step()`; `last_epoch` is
the index of the iteration the current lr is for. Every lr is computed from `base_lrs` and
`last_epoch` alone (torch's `_get_closed_form_lr`), so a resumed run continues exactly and a
state_dict is just a few numbers.

Linear warm-up is an option of every scheduler: with `warmup_iters=W > 0` the lr of iteration `e`
is `schedule(e) * min(1, (e + 1) / W)`, i.e. base_lr / W, 2 base_lr / W, ..., base_lr at e = W - 1,
while the schedule's own clock (milestones, cosine phase) counts from iteration 0. This equals
BasicSR's `warmup_iter` whenever the schedule is flat during warm-up. In YAML:
`scheduler: {type: MultiStepLR, milestones: [200000, 400000], gamma: 0.5, warmup_iters: 100}`.
`LinearWarmupLR(optimizer, warmup_iters)` is warm-up followed by a constant lr.
"""
from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from .._check import int_arg, number
from ..registry import SCHEDULERS
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "CosineAnnealingLR", "CosineAnnealingRestartLR",
           "LinearWarmupLR", "LambdaLR", "OneCycleLR"]


class LRScheduler:
    """Base class: subclasses implement `_schedule(base_lr, epoch) -> lr` (a closed form).

    Args:
        optimizer (Optimizer): whose groups' "lr" this sets.
        last_epoch (int): -1 (default) starts a new run; resuming is done with load_state_dict.
        warmup_iters (int): linear warm-up length in iterations, 0 (default) for none.
    """

    def __init__(self, optimizer, last_epoch: int = -1, warmup_iters: int = 0):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        self.warmup_iters = int_arg(type(self).__name__, "warmup_iters", warmup_iters, 0)
        last_epoch = int_arg(type(self).__name__, "last_epoch", last_epoch, -1)
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when "
                               "resuming a scheduler with last_epoch >= 0")
        self.base_lrs = [float(group["initial_lr"]) for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def horizon_mismatch(self, total_iters: int) -> str | None:
        """Why this schedule does not fit a run of `total_iters` iterations (e.g. after
        `--set train.total_iters=20`), or None. Base: warm-up longer than the run."""
        if self.warmup_iters >= total_iters:
            return (f"warmup_iters {self.warmup_iters} >= total_iters {total_iters}: the run ends "
                    f"before the warm-up does")
        return None

    @classmethod
    def check_kwargs(cls, kwargs: dict) -> None:
        """The constructor's own checks, on a throwaway optimizer (see Optimizer.check_kwargs)."""
        from .sgd import SGD
        cls(SGD([Tensor(np.zeros(1, np.float32), requires_grad=True)], lr=1.0), **kwargs)

    def _schedule(self, base_lr: float, epoch: int) -> float:
        raise NotImplementedError

    def get_lr(self) -> list[float]:
        """The lrs of iteration `last_epoch`, one per group."""
        e, factor = self.last_epoch, self._warmup()
        return [self._schedule(base_lr, e) * factor for base_lr in self.base_lrs]

    def _warmup(self) -> float:
        """The linear warm-up factor of iteration `last_epoch` (1 after warmup_iters)."""
        e = self.last_epoch
        return (e + 1) / self.warmup_iters if e + 1 < self.warmup_iters else 1.0

    def get_last_lr(self) -> list[float]:
        """The lrs most recently set (a copy)."""
        return list(self._last_lr)

    def step(self) -> None:
        """Advance one iteration and set every group's lr."""
        self.last_epoch += 1
        self._apply(self.get_lr())

    def _apply(self, lrs) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = list(lrs)

    # -- serialisation -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Every attribute but the optimizer, as plain data (lists, numbers)."""
        return {k: list(v) if isinstance(v, (list, tuple)) else v
                for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict()` and write its last lrs into the optimizer's groups, so the
        order of loading optimizer and scheduler does not matter."""
        unknown = set(state_dict) - set(self.__dict__)
        if unknown:
            raise ValueError(f"{type(self).__name__}.load_state_dict: unknown keys {sorted(unknown)}")
        if len(state_dict.get("base_lrs", self.base_lrs)) != len(self.optimizer.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: {len(state_dict['base_lrs'])} "
                             f"base_lrs for {len(self.optimizer.param_groups)} parameter groups")
        self.__dict__.update({k: list(v) if isinstance(v, (list, tuple)) else v
                              for k, v in state_dict.items()})
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs):
            group["initial_lr"] = base_lr
        self._apply(self._last_lr)

    def __repr__(self):
        args = ", ".join(f"{k}={v}" for k, v in self.state_dict().items()
                         if not k.startswith("_") and k not in ("base_lrs", "last_epoch"))
        return f"{type(self).__name__}({args}, last_epoch={self.last_epoch})"


@SCHEDULERS.register()
class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size). Args: step_size (int > 0), gamma (default 0.1),
    warmup_iters (default 0)."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1,
                 warmup_iters: int = 0):
        self.step_size = int_arg("StepLR", "step_size", step_size, 1)
        self.gamma = number("StepLR", "gamma", gamma, low=0)
        super().__init__(optimizer, last_epoch, warmup_iters)

    def _schedule(self, base_lr, epoch):
        return base_lr * self.gamma ** (epoch // self.step_size)

    def horizon_mismatch(self, total_iters):
        if self.step_size >= total_iters:
            return (f"step_size {self.step_size} >= total_iters {total_iters}: the lr never "
                    f"decays")
        return super().horizon_mismatch(total_iters)


@SCHEDULERS.register()
class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= epoch); a milestone listed twice decays
    twice, as torch. Args: milestones (list of int), gamma (default 0.1), warmup_iters (default 0)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1,
                 warmup_iters: int = 0):
        self.milestones = sorted(int_arg("MultiStepLR", f"milestones[{i}]", m, 0)
                                 for i, m in enumerate(milestones))
        self.gamma = number("MultiStepLR", "gamma", gamma, low=0)
        super().__init__(optimizer, last_epoch, warmup_iters)

    def _schedule(self, base_lr, epoch):
        return base_lr * self.gamma ** bisect_right(self.milestones, epoch)

    def horizon_mismatch(self, total_iters):
        late = [m for m in self.milestones if m >= total_iters]
        if late:
            return (f"milestones {late} are at or past total_iters {total_iters}: they never "
                    f"take effect")
        return super().horizon_mismatch(total_iters)


@SCHEDULERS.register()
class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (periodic past T_max,
    like torch's recursive form). Args: T_max (int > 0), eta_min (default 0), warmup_iters."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1,
                 warmup_iters: int = 0):
        self.T_max = int_arg("CosineAnnealingLR", "T_max", T_max, 1)
        self.eta_min = number("CosineAnnealingLR", "eta_min", eta_min, low=0)
        super().__init__(optimizer, last_epoch, warmup_iters)

    def _schedule(self, base_lr, epoch):
        cosine = 1 + math.cos(math.pi * epoch / self.T_max)
        return self.eta_min + (base_lr - self.eta_min) * cosine / 2

    def horizon_mismatch(self, total_iters):
        if self.T_max != total_iters:
            return (f"T_max {self.T_max} differs from total_iters {total_iters}: the cosine "
                    + ("rises again after T_max" if self.T_max < total_iters else
                       f"is cut off at {total_iters / self.T_max:.0%} of its descent"))
        return super().horizon_mismatch(total_iters)


@SCHEDULERS.register()
class CosineAnnealingRestartLR(LRScheduler):
    """BasicSR's cosine annealing with restarts. Cycle i lasts periods[i] iterations and peaks at
    restart_weights[i] * base_lr; with c_i the cumulative period end, iteration e belongs to the
    first cycle with e <= c_i (right-closed, as BasicSR) and

        lr = eta_min + w_i * (base_lr - eta_min) * (1 + cos(pi * (e - c_{i-1}) / periods[i])) / 2.

    Past the last cycle the lr stays at eta_min (BasicSR fails there).
    Args: periods (list of int > 0), restart_weights (same length; default (1,)), eta_min (0),
    warmup_iters (0)."""

    def __init__(self, optimizer, periods, restart_weights=(1,), eta_min: float = 0.0,
                 last_epoch: int = -1, warmup_iters: int = 0):
        periods, restart_weights = list(periods), list(restart_weights)
        if not periods or len(periods) != len(restart_weights):
            raise ValueError(f"CosineAnnealingRestartLR: periods {periods} and restart_weights "
                             f"{restart_weights} must be non-empty and have the same length")
        owner = "CosineAnnealingRestartLR"
        self.periods = [int_arg(owner, f"periods[{i}]", p, 1) for i, p in enumerate(periods)]
        self.restart_weights = [number(owner, f"restart_weights[{i}]", w, low=0)
                                for i, w in enumerate(restart_weights)]
        self.eta_min = number(owner, "eta_min", eta_min, low=0)
        self.cumulative_period = [sum(self.periods[:i + 1]) for i in range(len(self.periods))]
        super().__init__(optimizer, last_epoch, warmup_iters)

    def _schedule(self, base_lr, epoch):
        if epoch > self.cumulative_period[-1]:
            return self.eta_min
        idx = next(i for i, c in enumerate(self.cumulative_period) if epoch <= c)
        start = self.cumulative_period[idx - 1] if idx > 0 else 0
        phase = math.pi * ((epoch - start) / self.periods[idx])
        return self.eta_min + self.restart_weights[idx] * 0.5 * (base_lr - self.eta_min) * (
            1 + math.cos(phase))

    def horizon_mismatch(self, total_iters):
        end = self.cumulative_period[-1]
        if end != total_iters:
            return (f"periods {self.periods} add up to {end}, not total_iters {total_iters}: "
                    + ("the lr sits at eta_min after them" if end < total_iters else
                       "the last cycle is cut off"))
        return super().horizon_mismatch(total_iters)


@SCHEDULERS.register()
class LinearWarmupLR(LRScheduler):
    """Linear warm-up over `warmup_iters` iterations, then the constant base lr."""

    def __init__(self, optimizer, warmup_iters: int, last_epoch: int = -1):
        super().__init__(optimizer, last_epoch, warmup_iters)

    def _schedule(self, base_lr, epoch):
        return base_lr


@SCHEDULERS.register()
class LambdaLR(LRScheduler):
    """torch's LambdaLR: lr = base_lr * lr_lambda(epoch), one function or one per group. From
    Python only: a YAML config cannot hold a function, so `type: LambdaLR` in a config is refused
    when the config is checked, pointing to the registered closed forms. state_dict() leaves the
    functions out (as torch's does for plain functions): construct it with them, then load."""

    def __init__(self, optimizer, lr_lambda=None, last_epoch: int = -1, warmup_iters: int = 0):
        n = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 1
        fns = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if not all(callable(f) for f in fns):
            raise TypeError(f"LambdaLR: lr_lambda must be a Python function (or a list of one per "
                            f"parameter group), got {lr_lambda!r}; a YAML config cannot hold one: "
                            f"use a registered schedule there (StepLR, MultiStepLR, "
                            f"CosineAnnealingLR, OneCycleLR, ...)")
        if len(fns) != n:
            raise ValueError(f"LambdaLR: {len(fns)} lr_lambdas for {n} parameter groups")
        self.lr_lambdas = fns
        super().__init__(optimizer, last_epoch, warmup_iters)

    def get_lr(self):
        e, factor = self.last_epoch, self._warmup()
        return [base * float(fn(e)) * factor for base, fn in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        state = super().state_dict()
        state.pop("lr_lambdas")
        return state


@SCHEDULERS.register()
class OneCycleLR(LRScheduler):
    """torch's OneCycleLR (the 1cycle policy): the lr rises from max_lr / div_factor to max_lr over
    the first pct_start of total_steps, then anneals to initial_lr / final_div_factor ("cos" or
    "linear"); three_phase comes back to the initial lr before the final descent. With
    cycle_momentum (default True) the momentum (SGD) or beta1 (Adam) moves inversely between
    max_momentum and base_momentum. total_steps, or epochs * steps_per_epoch; stepping past it is
    an error, as in torch. max_lr is one number or one per group."""

    def __init__(self, optimizer, max_lr=None, total_steps=None, epochs=None,
                 steps_per_epoch=None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum: float = 0.85,
                 max_momentum: float = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
        name = "OneCycleLR"
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{name}: {type(optimizer).__name__} is not an Optimizer")
        groups = optimizer.param_groups
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError(f"{name}: give total_steps, or epochs and steps_per_epoch")
            total_steps = int_arg(name, "epochs", epochs, 1) * int_arg(
                name, "steps_per_epoch", steps_per_epoch, 1)
        self.total_steps = int_arg(name, "total_steps", total_steps, 1)
        maxes = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        if len(maxes) != len(groups) or any(m is None for m in maxes):
            raise ValueError(f"{name}: max_lr must be a number or one per parameter group "
                             f"({len(groups)}), got {max_lr!r}")
        self.max_lrs = [number(name, "max_lr", m, low=0) for m in maxes]
        self.pct_start = number(name, "pct_start", pct_start, low=0, high=1)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{name}: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        self.div_factor = number(name, "div_factor", div_factor, low=0)
        self.final_div_factor = number(name, "final_div_factor", final_div_factor, low=0)
        self.three_phase = bool(three_phase)
        self.cycle_momentum = bool(cycle_momentum)
        self.base_momentum = number(name, "base_momentum", base_momentum, low=0)
        self.max_momentum = number(name, "max_momentum", max_momentum, low=0)
        if self.cycle_momentum and any("momentum" not in g and "betas" not in g for g in groups):
            raise ValueError(f"{name}: the optimizer has no momentum or betas to cycle; pass "
                             f"cycle_momentum=False")
        if last_epoch == -1:
            for g, m in zip(groups, self.max_lrs):
                g["initial_lr"] = m / self.div_factor  # torch's: the schedule's start
        super().__init__(optimizer, last_epoch)

    def _phases(self):
        """(end step, start key, end key) per phase, torch's."""
        t, p = self.total_steps, self.pct_start
        if self.three_phase:
            return [(p * t - 1, "initial", "max"), (2 * p * t - 2, "max", "initial"),
                    (t - 1, "initial", "min")]
        return [(p * t - 1, "initial", "max"), (t - 1, "max", "min")]

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _at(self, step, values):
        begin = 0.0
        for i, (end, a, b) in enumerate(self._phases()):
            if step <= end or i == len(self._phases()) - 1:
                pct = (step - begin) / (end - begin) if end != begin else 1.0
                return self._anneal(values[a], values[b], pct)
            begin = end
        raise AssertionError("unreachable")

    def get_lr(self):
        step = self.last_epoch
        if step >= self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is "
                             f"{self.total_steps}")
        lrs = []
        for base, top in zip(self.base_lrs, self.max_lrs):
            lrs.append(self._at(step, {"initial": base, "max": top,
                                       "min": base / self.final_div_factor}))
        return lrs

    def _apply(self, lrs):
        super()._apply(lrs)
        if not self.cycle_momentum:
            return
        m = self._at(self.last_epoch, {"initial": self.max_momentum, "max": self.base_momentum,
                                       "min": self.max_momentum})
        for g in self.optimizer.param_groups:
            if "betas" in g:
                g["betas"] = (m, *tuple(g["betas"])[1:])
            else:
                g["momentum"] = m

    def horizon_mismatch(self, total_iters):
        if self.total_steps < total_iters:
            return (f"total_steps {self.total_steps} < total_iters {total_iters}: the schedule "
                    f"ends (and refuses to step) before the run does")
        return super().horizon_mismatch(total_iters)
