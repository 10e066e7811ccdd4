"""Optimizer base class: torch's param_groups / state / state_dict layout, pickle-free.

A state_dict holds only nested dicts and lists of Python scalars, str, None and numpy arrays, so a
checkpoint writer can put the arrays in safetensors and the rest in JSON:

    {"state": {0: {"step": 3, "exp_avg": ndarray, ...}, ...},
     "param_groups": [{"lr": 0.001, "betas": [0.9, 0.999], ..., "params": [0, 1, 2]}, ...]}

Parameters are numbered in the order they appear across the groups, as in torch. Tuples (betas)
are written as lists and turned back into tuples on load; integer state keys may come back from
JSON as strings ("0") and are accepted.
"""
from __future__ import annotations

import numbers
from collections import defaultdict

import numpy as np

from ..autograd import enable_grad
from ..tensor import Tensor


class Optimizer:
    """Base class. Subclasses set `defaults` (group options), implement `_check_group(group)`
    (raise ValueError naming a bad option) and `_update(group, p, grad, state)` (one parameter).

    Args:
        params: an iterable of float Parameters/Tensors, or of dicts `{"params": [...], **options}`
            whose options override `defaults` for that group.
        defaults (dict): default options of every group.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self._check_group(self.defaults)
        self.state: dict = defaultdict(dict)  # Parameter -> its state (keyed by identity)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got a single {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # -- groups --------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Append a group `{"params": [...], **options}`; missing options take `defaults`."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group.get("params")
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs; "
                            "use a list instead")
        elif params is None:
            raise ValueError("param_group needs a 'params' entry")
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor) or p.dtype.kind != "f":
                what = type(p).__name__ if not isinstance(p, Tensor) else f"Tensor of dtype {p.dtype}"
                raise TypeError(f"optimizer can only optimize float Tensors, but params[{i}] is a "
                                f"{what}")
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (params[{i}])")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a parameter group contains the same parameter more than once")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        unknown = set(param_group) - set(self.defaults) - {"params", "initial_lr"}
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown option(s) {sorted(unknown)} in a "
                             f"parameter group; known: {sorted(self.defaults)}")
        group = {**self.defaults, **{k: v for k, v in param_group.items() if k != "params"}}
        self._check_group(group)
        group["params"] = params
        self.param_groups.append(group)

    def _check_group(self, group: dict) -> None:
        """Raise ValueError / TypeError for an invalid option (subclasses)."""

    @classmethod
    def check_kwargs(cls, kwargs: dict) -> None:
        """The constructor's own option checks, on one throwaway parameter: a config is judged
        before anything is built (framework.registry.Registry.check)."""
        cls([Tensor(np.zeros(1, np.float32), requires_grad=True)], **kwargs)

    # -- stepping ------------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (set to None, or zero it in place)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.data[...] = 0

    def step(self, closure=None):
        """Update every parameter that has a gradient, in place (`p.data` keeps its identity).
        `closure` (optional) re-evaluates the model and returns the loss, which is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._step_all()
        return loss

    def _step_all(self) -> None:
        """`_update` on every parameter that has a gradient (a fused optimizer overrides this)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data if isinstance(p.grad, Tensor) else np.asarray(p.grad)
                if grad.shape != p.shape:
                    raise ValueError(f"{type(self).__name__}.step: gradient shape {grad.shape} "
                                     f"does not match parameter shape {p.shape}")
                self._update(group, p.data, grad.astype(p.dtype, copy=False), self.state[p])

    def _update(self, group: dict, p: np.ndarray, grad: np.ndarray, state: dict) -> None:
        raise NotImplementedError

    # -- serialisation -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Plain-data copy of the state (see the module docstring for the layout)."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: _plain(v, k) for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) in index and self.state.get(p):
                    state[index[id(p)]] = {k: _plain(v, k) for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict()` (arrays are copied into the parameters' dtype). The group and
        parameter counts and every array's shape must match, else ValueError."""
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            raise ValueError("optimizer state_dict must be a dict with keys 'state' and "
                             "'param_groups'")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, the "
                             f"optimizer has {len(self.param_groups)}")
        by_index = {}
        for gi, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"parameter group {gi}: the loaded state dict has "
                                 f"{len(saved['params'])} parameters, the optimizer has "
                                 f"{len(group['params'])}")
            by_index.update({int(i): p for i, p in zip(saved["params"], group["params"])})
        new_state = defaultdict(dict)
        for key, pstate in state_dict["state"].items():
            if int(key) not in by_index:
                raise ValueError(f"loaded state refers to parameter {key}, which no group lists")
            p = by_index[int(key)]
            new_state[p] = {k: _restore_value(v, p, k, key) for k, v in pstate.items()}
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            restored = {k: tuple(v) if isinstance(group.get(k), tuple) else v
                        for k, v in saved.items() if k != "params"}
            new = {**restored, "params": group["params"]}
            self._check_group(new)
            new_groups.append(new)
        self.state, self.param_groups = new_state, new_groups

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines + [")"])


def _plain(value, key):
    """A copy of `value` made of dict/list/int/float/bool/str/None/ndarray only."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v, key) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, key) for k, v in value.items()}
    raise TypeError(f"optimizer state_dict: {key!r} holds a {type(value).__name__}, which is not "
                    "plain data")


def _restore_value(value, p: Tensor, name: str, index):
    """State entry as stored in the optimizer: arrays copied in p's dtype, with p's shape."""
    if isinstance(value, np.ndarray):
        if value.shape != p.shape:
            raise ValueError(f"loaded state {name!r} of parameter {index} has shape {value.shape}, "
                             f"the parameter has shape {p.shape}")
        return np.array(value, dtype=p.dtype, copy=True)
    if isinstance(value, numbers.Number) or value is None:
        return value
    raise ValueError(f"loaded state {name!r} of parameter {index} is a {type(value).__name__}, "
                     "expected a numpy array or a number")
