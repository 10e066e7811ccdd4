"""Registries: every YAML `type:` resolves through one of these, never through an if/elif chain."""
from __future__ import annotations

import difflib


class Registry:
    """Name -> class (or factory). `@REG.register()` registers under the class name,
    `@REG.register("alias")` under another; registering a taken name is an error."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, object] = {}

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
            hint = difflib.get_close_matches(str(name), self._items, n=1)
            more = f"; did you mean {hint[0]!r}?" if hint else ""
            raise KeyError(f"unknown {self.kind} {name!r}{more} Known: {', '.join(sorted(self._items))}"
                           ) from None

    def build(self, spec: dict, **extra):
        """Instantiate `{type: Name, **kwargs}`; `extra` keywords are added (spec wins on conflict)."""
        if not isinstance(spec, dict) or "type" not in spec:
            raise ValueError(f"{self.kind} spec must be a mapping with a 'type' key, got {spec!r}")
        kwargs = {k: v for k, v in spec.items() if k != "type"}
        return self.get(spec["type"])(**{**extra, **kwargs})

    def __contains__(self, name) -> bool:
        return name in self._items

    def __iter__(self):
        return iter(sorted(self._items))

    def names(self) -> list[str]:
        return sorted(self._items)

    def __repr__(self):
        return f"Registry({self.kind!r}, {self.names()})"


LAYERS = Registry("layer")
MODELS = Registry("model")
LOSSES = Registry("loss")
OPTIMIZERS = Registry("optimizer")
SCHEDULERS = Registry("scheduler")
DATASETS = Registry("dataset")
METRICS = Registry("metric")
