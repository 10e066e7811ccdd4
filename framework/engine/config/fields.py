"""The two kinds of config key, shared by engine/config/schema.py and the training recipes' own schema
blocks (framework/engine/recipes): a `Field` (a typed leaf with a default) and a `Block` (a
`{type: Name, **keywords}` mapping judged by its registry)."""
from __future__ import annotations

import inspect

__all__ = ["Field", "Block", "REQUIRED", "pretrained_section", "check_pretrained", "leaves"]

REQUIRED = object()  # the default of a key the config must give


class Field:
    """A leaf key: `kind` is int, float, bool, str, "str_list", "name" (a string srgrad makes a
    file or folder of: one path component, framework._check.name_problem) or "name_part" (a
    string joined into one: no separator); `minimum` is inclusive unless
    `exclusive`; `choices` (a tuple, or a Registry whose names are the choices) restricts the value;
    `nullable` allows null."""

    def __init__(self, kind, default=REQUIRED, minimum=None, exclusive=False, choices=None,
                 nullable=False):
        self.kind, self.default, self.minimum = kind, default, minimum
        self.exclusive, self.choices, self.nullable = exclusive, choices, nullable

    def allowed(self):
        return self.choices.names() if hasattr(self.choices, "names") else self.choices


class Block:
    """A `{type: Name, **constructor keywords}` mapping resolved through `registry`. `injected_first`:
    the constructor's first parameter is passed by the trainer (an optimizer's params); `shared`:
    keywords that may be given but must agree with the top-level key of the same name (scale)."""

    def __init__(self, registry, default=REQUIRED, injected_first=False, shared=()):
        self.registry, self.default = registry, default
        self.injected_first, self.shared = injected_first, shared

    def injected(self, name):
        if not self.injected_first or name not in self.registry:
            return ()
        params = list(inspect.signature(self.registry.get(name)).parameters)
        return tuple(params[:1])


def pretrained_section() -> dict:
    """Weights a network starts from (BasicSR's path.pretrain_network_*, param_key_*,
    strict_load_*)."""
    return {"path": Field(str, None, nullable=True), "key": Field(str, None, nullable=True),
            "strict": Field(bool, True)}


def check_pretrained(train: dict, key: str, where) -> list[str]:
    """The problem with a filled-in train.<key> pretrained section, if any (`where(dotted key)`
    names the file and key)."""
    spec = train[key]
    if spec["path"] is None and (spec["key"] is not None or not spec["strict"]):
        return [f"{where(f'train.{key}')}: key/strict are set but path is not"]
    return []


def leaves(schema: dict, prefix: str = ""):
    """(dotted key, Field or Block) of every leaf of a schema (or a recipe's schema block)."""
    for key, spec in schema.items():
        path = f"{prefix}{key}"
        if isinstance(spec, dict):
            yield from leaves(spec, path + ".")
        else:
            yield path, spec
