"""YAML training configs: load, override, validate against a schema, resolve defaults.

A config is BasicSR-like (`name`, `scale`, `model: {type: ...}`, `datasets`, `train`, `val`,
`checkpoint`, `imports`). Everything is checked before anything runs: an unknown key is an error with
a did-you-mean, a missing key or a wrong type names the dotted key path and the file, and every
`type:` block is checked against the registered class's constructor signature.

A config is code: `imports:` names Python modules (module names, never file paths) that are imported
before the registries are used, so their registered layers and models resolve. The config file's own
folder is put on `sys.path` first, so `configs/my_layers.py` is `imports: [my_layers]`. Only load
configs you trust, as you would only run scripts you trust.

Paths inside a config (dataset roots, `run_root`) are relative to the current working directory
(run from the repository root), not to the config file.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import importlib
import inspect
import json
import numbers
import os
import re
import reprlib
import sys

import yaml

from ..registry import DATASETS, LAYERS, LOSSES, MODELS, OPTIMIZERS, SCHEDULERS

__all__ = ["ConfigError", "ConfigLoader", "load_config", "parse_config", "apply_override",
           "config_hash", "import_modules", "dump_config", "SCHEMA"]


class ConfigError(ValueError):
    """Any problem with a config: the message names the file and the dotted key path."""


class ConfigLoader(yaml.SafeLoader):
    """Still a *safe* loader (it subclasses yaml.SafeLoader: no Python object construction); it only
    adds YAML 1.2's float syntax, so `2e-4` is the float 0.0002 and not the string "2e-4" as in
    YAML 1.1, and refuses duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                  |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                  |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


# -- schema -----------------------------------------------------------------------------------------
_REQUIRED = object()


class Field:
    """A leaf key: `kind` is int, float, bool, str or "str_list"; `minimum` is inclusive unless
    `exclusive`; `choices` restricts the value; `nullable` allows null."""

    def __init__(self, kind, default=_REQUIRED, minimum=None, exclusive=False, choices=None,
                 nullable=False):
        self.kind, self.default, self.minimum = kind, default, minimum
        self.exclusive, self.choices, self.nullable = exclusive, choices, nullable


class Block:
    """A `{type: Name, **constructor keywords}` mapping resolved through `registry`. `injected` are
    keywords the trainer passes itself (first positional, e.g. an optimizer's params); `shared` are
    keywords that may be given but must agree with the top-level key of the same name (scale)."""

    def __init__(self, registry, default=_REQUIRED, injected_first=False, shared=()):
        self.registry, self.default = registry, default
        self.injected_first, self.shared = injected_first, shared


SCHEMA = {
    "name": Field(str),
    "scale": Field(int, minimum=1),
    "seed": Field(int, 0, minimum=0),
    "dtype": Field(str, "float32", choices=("float32", "float64")),
    "imports": Field("str_list", []),
    "run_root": Field(str, "runs"),
    "model": Block(MODELS, shared=("scale",)),
    "datasets": {
        "train": Block(DATASETS, shared=("scale",)),
        "val": Block(DATASETS, None, shared=("scale",)),
    },
    "train": {
        "total_iters": Field(int, minimum=1),
        "batch_size": Field(int, minimum=1),
        "optimizer": Block(OPTIMIZERS, injected_first=True),
        "scheduler": Block(SCHEDULERS, None, injected_first=True),
        "loss": Block(LOSSES, {"type": "L1Loss"}),
        "grad_clip": Field(float, None, minimum=0, exclusive=True, nullable=True),
        # what a NaN/Inf loss does: stop (leaving the last checkpoint untouched) or skip the batch
        "nonfinite_loss": Field(str, "stop", choices=("stop", "skip")),
        "log_every": Field(int, 10, minimum=1),
    },
    "val": {
        "every": Field(int, 500, minimum=1),
        "metrics": Field("str_list", ["psnr", "ssim"], choices=("psnr", "ssim")),
        "y_channel": Field(bool, True),
        "crop_border": Field(int, None, minimum=0, nullable=True),  # null = scale (BasicSR)
        # bicubic baseline: MATLAB imresize (what SR papers report) or F.interpolate bicubic
        "baseline": Field(str, "imresize", choices=("imresize", "interpolate")),
        "save_images": Field(bool, True),
        "tile": Field(int, None, minimum=8, nullable=True),
        "tile_overlap": Field(int, 16, minimum=0),
    },
    "checkpoint": {
        "every": Field(int, 500, minimum=1),
        "keep": Field(int, 3, minimum=1),
    },
}

_TOP_SECTIONS_OPTIONAL = ("val", "checkpoint")


# -- loading ----------------------------------------------------------------------------------------
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 160
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def _show(value) -> str:
    """repr for messages, bounded: a value built from YAML aliases can expand to billions of
    items, and its full repr would exhaust memory before the error is shown."""
    return _REPR.repr(value)


def _where(source, path):
    return f"{source}: {path}" if path else str(source)


def _did_you_mean(name, known):
    known = [str(k) for k in known]
    same_letters = [k for k in known if k.lower() == str(name).lower()]  # Adamw -> AdamW
    hint = same_letters or difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
    return f"; did you mean {hint[0]!r}?" if hint else ""


def _parse_yaml(text, source):
    try:
        data = yaml.load(text, Loader=ConfigLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:  # PyYAML composes nested nodes recursively
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got "
                          f"{type(data).__name__}")
    return data


def parse_scalar(text: str):
    """A `--set` value, parsed as a YAML scalar with the config's loader (`2e-4` -> float)."""
    try:
        return yaml.load(text, Loader=ConfigLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"--set: cannot parse value {_show(text)}: {exc}") from None


def _schema_at(path):
    """The schema node at a dotted path, or None when the path leaves the schema."""
    node = SCHEMA
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def apply_override(cfg: dict, assignment: str, source="--set") -> None:
    """Apply `key.path=value` in place. The path must name a key of the config or of the schema,
    or a keyword inside a `type:` block (checked against the constructor during validation)."""
    if "=" not in assignment:
        raise ConfigError(f"{source} {assignment!r}: expected key.path=value")
    key, value = assignment.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"{source} {assignment!r}: empty key in path {key!r}")
    node, schema = cfg, SCHEMA
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        known_here = set(node) | (set(schema) if isinstance(schema, dict) else set())
        in_block = isinstance(schema, Block)
        if part not in known_here and not (in_block and last):
            where = ".".join(parts[:i + 1])
            raise ConfigError(f"{source} {assignment!r}: unknown key path {where!r}"
                              f"{_did_you_mean(part, known_here)} Known keys here: "
                              f"{', '.join(sorted(map(str, known_here)))}")
        schema = schema.get(part) if isinstance(schema, dict) else None
        if last:
            node[part] = parse_scalar(value)
        else:
            child = node.get(part)
            if child is None:
                child = {}
                node[part] = child
            elif not isinstance(child, dict):
                raise ConfigError(f"{source} {assignment!r}: {'.'.join(parts[:i + 1])} is not a "
                                  f"mapping")
            node = child


def load_config(path, overrides=(), do_imports: bool = True) -> dict:
    """Read, override, validate and resolve a config file. Returns a plain dict with every default
    filled in. Raises ConfigError naming the file and the key on any problem."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config {source}: {exc.strerror}") from None
    return parse_config(text, source=source, overrides=overrides, do_imports=do_imports,
                        base_dir=os.path.dirname(os.path.abspath(source)))


def parse_config(text: str, source="<string>", overrides=(), do_imports=True, base_dir=None):
    """`load_config` on YAML text; `base_dir` goes on sys.path for `imports:`."""
    cfg = _parse_yaml(text, source)
    for assignment in overrides:
        apply_override(cfg, assignment)
    if do_imports:
        imports = cfg.get("imports", [])
        if isinstance(imports, list) and all(isinstance(m, str) for m in imports):
            import_modules(imports, base_dir, source)
    import_builtin_registries()
    return validate(cfg, source)


def import_builtin_registries() -> None:
    """Import the packages whose classes register themselves (layers, losses, optimizers,
    datasets, models) so the registries are complete before they are searched."""
    for name in ("framework.nn", "framework.optim", "framework.data", "models"):
        importlib.import_module(name)


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def import_modules(names, base_dir=None, source="<config>") -> None:
    """Import user modules by name (never by file path); `base_dir` (the config's folder) is put on
    sys.path first. This runs the modules' code: a config is code."""
    for name in names:
        # "my_layers.py" would pass as package "my_layers", submodule "py": it is a file name
        if not _MODULE_NAME.match(name) or name.endswith(".py"):
            raise ConfigError(f"{source}: imports: {name!r} is not a module name (a config imports "
                              f"modules by name, e.g. 'my_layers', never by file path)")
    # only when there is something to import: a config folder (maybe /tmp, maybe a run folder)
    # first on sys.path could shadow any module the process imports later
    if names and base_dir and base_dir not in sys.path:
        sys.path.insert(0, base_dir)
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"{source}: imports: cannot import module {name!r}: {exc} (looked in "
                              f"{base_dir or 'sys.path'} and sys.path)") from None


# -- validation -------------------------------------------------------------------------------------
def validate(cfg: dict, source="<config>") -> dict:
    """Check `cfg` against SCHEMA; return a deep copy with defaults filled in. All problems are
    reported together in one ConfigError."""
    errors: list[str] = []
    out = _validate_section(cfg, SCHEMA, "", source, errors, top=True)
    if not errors:
        _cross_checks(out, source, errors)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
    return out


def _validate_section(cfg, schema, prefix, source, errors, top=False):
    if not isinstance(cfg, dict):
        errors.append(f"{_where(source, prefix)}: expected a mapping, got "
                      f"{type(cfg).__name__} {_show(cfg)}")
        return {}
    out = {}
    for key in cfg:
        if key not in schema:
            path = f"{prefix}.{key}" if prefix else str(key)
            errors.append(f"{_where(source, path)}: unknown key{_did_you_mean(key, schema)} "
                          f"Known keys: {', '.join(schema)}")
    for key, spec in schema.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(spec, dict):
            if key not in cfg and top and key in _TOP_SECTIONS_OPTIONAL:
                value = {}
            elif key not in cfg:
                errors.append(f"{_where(source, path)}: missing section (keys: {', '.join(spec)})")
                continue
            else:
                value = cfg[key]
            out[key] = _validate_section(value, spec, path, source, errors)
        elif isinstance(spec, Block):
            if key not in cfg or cfg[key] is None:
                if spec.default is _REQUIRED:
                    errors.append(f"{_where(source, path)}: missing required key (a mapping with "
                                  f"type: one of {', '.join(spec.registry.names())})")
                    continue
                out[key] = copy.deepcopy(spec.default)
                if out[key] is not None:
                    _validate_block(out[key], spec, path, source, errors)
                continue
            out[key] = copy.deepcopy(cfg[key])
            _validate_block(out[key], spec, path, source, errors)
        else:
            if key not in cfg:
                if spec.default is _REQUIRED:
                    errors.append(f"{_where(source, path)}: missing required key "
                                  f"({_kind_name(spec.kind)})")
                    continue
                out[key] = copy.deepcopy(spec.default)
                continue
            out[key] = _check_field(cfg[key], spec, path, source, errors)
    return out


def _kind_name(kind):
    return "a list of strings" if kind == "str_list" else f"{'an' if kind is int else 'a'} " \
        f"{kind.__name__}"


def _check_field(value, spec, path, source, errors):
    where = _where(source, path)
    if value is None and spec.nullable:
        return None
    kind = spec.kind
    if kind == "str_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append(f"{where}: expected a list of strings, got {_show(value)}")
            return value
        bad = [v for v in value if spec.choices and v not in spec.choices]
        if bad:
            errors.append(f"{where}: unknown entries {bad}; choose from {list(spec.choices)}")
        return list(value)
    ok = {
        int: isinstance(value, numbers.Integral) and not isinstance(value, bool),
        float: isinstance(value, numbers.Real) and not isinstance(value, bool),
        bool: isinstance(value, bool),
        str: isinstance(value, str),
    }[kind]
    if not ok:
        errors.append(f"{where}: expected {_kind_name(kind)}, got {type(value).__name__} "
                      f"{_show(value)}")
        return value
    if kind is float:
        value = float(value)
    if kind is int:
        value = int(value)
    if spec.choices and value not in spec.choices:
        errors.append(f"{where}: {_show(value)} is not one of {list(spec.choices)}"
                      f"{_did_you_mean(value, spec.choices)}")
    if spec.minimum is not None and (value < spec.minimum or
                                     (spec.exclusive and value == spec.minimum)):
        relation = ">" if spec.exclusive else ">="
        errors.append(f"{where}: must be {relation} {spec.minimum}, got {value!r}")
    return value


def _signature(cls):
    try:
        return inspect.signature(cls)
    except (TypeError, ValueError):
        return None


def _validate_block(block, spec, path, source, errors):
    """`{type: Name, **kwargs}` against Name's constructor signature."""
    where = _where(source, path)
    if not isinstance(block, dict):
        errors.append(f"{where}: expected a mapping with a 'type' key, got {_show(block)}")
        return
    known_names = spec.registry.names()
    if "type" not in block:
        errors.append(f"{where}.type: missing (one of {', '.join(known_names)})")
        return
    name = block["type"]
    if not isinstance(name, str) or name not in spec.registry:
        errors.append(f"{where}.type: unknown {spec.registry.kind} {_show(name)}"
                      f"{_did_you_mean(name, known_names)} Known: {', '.join(known_names)}")
        return
    sig = _signature(spec.registry.get(name))
    if sig is None:
        return
    params = [p for p in sig.parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    injected = {params[0].name} if spec.injected_first and params else set()
    keywords = [p.name for p in params if p.name not in injected]
    by_name = {p.name: p for p in params}
    for key, value in block.items():
        if key == "type":
            continue
        if key in injected:
            errors.append(f"{where}.{key}: set by the trainer, remove it from the config")
        elif key not in by_name and not takes_any:
            errors.append(f"{where}.{key}: unknown keyword for {name}"
                          f"{_did_you_mean(key, keywords)} Known keywords: {', '.join(keywords)}")
        elif key in by_name:
            _check_keyword_type(value, by_name[key], f"{where}.{key}", errors)
        if isinstance(value, dict) and "type" in value:
            # a nested layer spec (e.g. EDSR's `block: {type: ChannelScale, channels: 64}`)
            _validate_block(value, Block(LAYERS), f"{path}.{key}", source, errors)
    for p in params:
        required = p.default is p.empty and p.name not in injected and p.name not in spec.shared
        if required and p.name not in block:
            errors.append(f"{where}.{p.name}: missing required keyword of {name} "
                          f"(known keywords: {', '.join(keywords)})")


def _check_keyword_type(value, param, where, errors):
    """Light type check from the default's type: a number where a number is expected, a bool where
    a bool is expected (catches `lr: "2e-4"` and `scale: two`)."""
    default = param.default
    if default is param.empty or default is None or value is None:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, numbers.Integral):
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif isinstance(default, numbers.Real):
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, (tuple, list)):
        ok = isinstance(value, (tuple, list))
    else:
        return
    if not ok:
        errors.append(f"{where}: expected {type(default).__name__} (like the default "
                      f"{default!r}), got {type(value).__name__} {_show(value)}")
    elif isinstance(default, numbers.Real) and not isinstance(default, bool) and value < 0 and \
            param.name in ("lr", "eps", "weight_decay", "loss_weight", "res_scale"):
        errors.append(f"{where}: must be >= 0, got {value!r}")


def _cross_checks(cfg, source, errors):
    scale = cfg["scale"]
    for path, block in (("model", cfg["model"]), ("datasets.train", cfg["datasets"]["train"]),
                        ("datasets.val", cfg["datasets"]["val"])):
        if block is not None and "scale" in block and block["scale"] != scale:
            errors.append(f"{_where(source, path + '.scale')}: {block['scale']!r} disagrees with "
                          f"the top-level scale {scale}")
    _check_channels(cfg, source, errors)
    lr = cfg["train"]["optimizer"].get("lr")
    if isinstance(lr, numbers.Real) and not lr > 0:
        errors.append(f"{_where(source, 'train.optimizer.lr')}: must be > 0, got {lr!r}")


def _check_channels(cfg, source, errors):
    """Y-channel data (`color: y`) needs a 1-channel model and RGB data a 3-channel one; caught
    here rather than as a shape error deep inside the first convolution."""
    sig = _signature(MODELS.get(cfg["model"]["type"]))
    params = sig.parameters if sig is not None else {}
    if "num_in_ch" not in params:
        return
    default = params["num_in_ch"].default
    in_ch = cfg["model"].get("num_in_ch", None if default is inspect.Parameter.empty else default)
    for name in ("train", "val"):
        block = cfg["datasets"][name]
        if block is None or not isinstance(in_ch, int):
            continue
        color = block.get("color", "rgb")
        needed = {"y": 1, "rgb": 3}.get(color)
        if needed is not None and needed != in_ch:
            errors.append(f"{_where(source, f'datasets.{name}.color')}: {color!r} data has "
                          f"{needed} channel(s) but the model takes num_in_ch={in_ch} (set "
                          f"model.num_in_ch and model.num_out_ch to {needed})")


# -- helpers ----------------------------------------------------------------------------------------
def config_hash(cfg: dict) -> str:
    """sha256 of the resolved config's canonical JSON: stored in checkpoints to spot a changed
    config on resume."""
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def dump_config(cfg: dict) -> str:
    """The resolved config as YAML (what a run folder's config.yaml holds)."""
    return yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None)
