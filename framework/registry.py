"""Registries: every YAML `type:` resolves through one of these, never through an if/elif chain.

`Registry.check(spec)` judges a `{type: Name, **keywords}` spec against Name's constructor before
anything is built (a config is validated whole, then run): the name, each keyword against the
signature (with a did-you-mean), each value against its default's type, the required keywords, nested
layer specs, and the class's own argument checks when it offers them cheaply (`check_kwargs`).
"""
from __future__ import annotations

import inspect
import numbers

from ._check import did_you_mean, show


class Registry:
    """Name -> class (or factory). `@REG.register()` registers under the class name,
    `@REG.register("alias")` under another; registering a taken name is an error."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, object] = {}
        # callable(spec) run by build() before the constructor, raising to refuse the spec (MODELS:
        # framework/card.py's preflight, which refuses a model too large to fit in memory before
        # any of it is allocated)
        self.preflight = None

    def register(self, name: str | None = None, obj=None):
        if obj is not None or (name is not None and not isinstance(name, str)):
            target = obj if obj is not None else name
            self._add(getattr(target, "__name__", None) if obj is None else name, target)
            return target

        def deco(target):
            self._add(name or target.__name__, target)
            return target
        return deco

    def _add(self, name, target):
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} registry: cannot register {target!r} without a name")
        if name in self._items and self._items[name] is not target:
            raise KeyError(f"{self.kind} registry: {name!r} is already registered "
                           f"(by {self._items[name]!r})")
        self._items[name] = target

    def get(self, name: str):
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise KeyError(self._unknown(name)) from None

    def _unknown(self, name) -> str:
        return (f"unknown {self.kind} {show(name)}{did_you_mean(name, self._items)} Known: "
                f"{', '.join(sorted(self._items))}")

    def build(self, spec: dict, **extra):
        """Instantiate `{type: Name, **kwargs}`; `extra` keywords are added (spec wins on conflict)."""
        if not isinstance(spec, dict) or "type" not in spec:
            raise ValueError(f"{self.kind} spec must be a mapping with a 'type' key, got {show(spec)}")
        kwargs = {k: v for k, v in spec.items() if k != "type"}
        target = self.get(spec["type"])
        if self.preflight is not None:
            self.preflight({"type": spec["type"], **extra, **kwargs})
        return target(**{**extra, **kwargs})

    def check(self, spec, *, injected=(), shared=(), nested=None) -> list[tuple[str, str]]:
        """Problems with `spec` as (dotted key below the spec, message) pairs; [] when it is fine.

        injected: keywords the caller passes itself (an optimizer's params): refused in the spec.
        shared: keywords the caller adds when absent (scale), so not required here.
        nested: the Registry of `{type: ...}` values inside the spec (e.g. EDSR's `block:`)."""
        if not isinstance(spec, dict):
            return [("", f"expected a mapping with a 'type' key, got {show(spec)}")]
        if "type" not in spec:
            return [("type", f"missing (one of {', '.join(self.names())})")]
        name = spec["type"]
        if not isinstance(name, str) or name not in self._items:
            return [("type", self._unknown(name))]
        target = self._items[name]
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            return []
        params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        by_name = {p.name: p for p in params if p.name not in injected}
        problems = []
        for key, value in spec.items():
            if key == "type":
                continue
            if key in injected:
                problems.append((key, "set by the trainer, remove it from the config"))
            elif key not in by_name and not takes_any:
                problems.append((key, f"unknown keyword for {name}{did_you_mean(key, by_name)} Known "
                                      f"keywords: {', '.join(by_name)}"))
            elif key in by_name and not _fits_default(value, by_name[key].default):
                default = by_name[key].default
                problems.append((key, f"expected {type(default).__name__} (like the default "
                                      f"{default!r}), got {type(value).__name__} {show(value)}"))
            if nested is not None and isinstance(value, dict) and "type" in value:
                problems += [(f"{key}.{k}" if k else key, m) for k, m in nested.check(value)]
        for p in by_name.values():
            if p.default is p.empty and p.name not in shared and p.name not in spec:
                problems.append((p.name, f"missing required keyword of {name} (known keywords: "
                                         f"{', '.join(by_name)})"))
        check_kwargs = getattr(target, "check_kwargs", None)
        if not problems and check_kwargs is not None:
            try:
                check_kwargs({k: v for k, v in spec.items() if k != "type"})
            except (ValueError, TypeError) as exc:
                problems.append(("", str(exc)))
        return problems

    def __contains__(self, name) -> bool:
        return name in self._items

    def __iter__(self):
        return iter(sorted(self._items))

    def names(self) -> list[str]:
        return sorted(self._items)

    def __repr__(self):
        return f"Registry({self.kind!r}, {self.names()})"


def _fits_default(value, default) -> bool:
    """A light type check from the default's type: a number where a number is expected, a bool
    where a bool is (catches `lr: "2e-4"` and `scale: two`); anything goes without a typed default."""
    if default is inspect.Parameter.empty or default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, numbers.Integral):
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if isinstance(default, numbers.Real):
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (tuple, list)):
        return isinstance(value, (tuple, list))
    return True


LAYERS = Registry("layer")
MODELS = Registry("model")
LOSSES = Registry("loss")
OPTIMIZERS = Registry("optimizer")
SCHEDULERS = Registry("scheduler")
DATASETS = Registry("dataset")
METRICS = Registry("metric")
BASELINES = Registry("baseline")  # how validation and srgrad-eval upscale the LR input for comparison
RECIPES = Registry("recipe")  # what one training step is (framework/engine/recipes): sr, gan, ...
