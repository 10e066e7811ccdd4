"""YAML config files: the safe loader, `--set key.path=value` overrides and the `imports:` policy.

What a training config must contain, and the checks against it, live beside the trainer
(framework/engine/config/schema.py); this module only turns text into plain data, safely.

A config is code: `imports:` names Python modules (module names, never file paths) that are imported
before the registries are used, so their registered layers and models resolve. The config file's own
folder is put on `sys.path` first, so `configs/my_layers.py` is `imports: [my_layers]`. Only load
configs you trust, as you would only run scripts you trust.
"""
from __future__ import annotations

import importlib
import os
import re
import sys

import yaml

from .._check import clip_message, did_you_mean, show

__all__ = ["ConfigError", "ConfigLoader", "parse_yaml", "read_yaml", "parse_scalar", "apply_override",
           "import_modules", "dump_config", "show", "MAX_ITEMS"]

# values in one YAML document (or one --set value) once its aliases are expanded: a real config has
# a few hundred; a "billion laughs" (a list of aliases to lists of aliases ...) has billions
MAX_ITEMS = 100_000


class ConfigError(ValueError):
    """Any problem with a config: the message names the file and the dotted key path. The message is
    bounded (framework._check.clip_message), whatever value it quotes."""

    def __init__(self, message: str = ""):
        super().__init__(clip_message(message))


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


def parse_yaml(text: str, source: str = "<string>") -> dict:
    """YAML text -> a dict (an empty document is {}); ConfigError naming `source` otherwise."""
    try:
        data = yaml.load(text, Loader=ConfigLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:  # PyYAML composes nested nodes recursively
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    check_size(data, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got "
                          f"{type(data).__name__}")
    return data


def read_yaml(path) -> dict:
    """parse_yaml of a file; a missing or unreadable file is a ConfigError naming it."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config {source}: {exc.strerror}") from None
    return parse_yaml(text, source)


def parse_scalar(text: str, source: str = "--set"):
    """A `--set` value, parsed as YAML with the config's loader (`2e-4` -> float, `[a, b]` -> a
    list, `{type: L1Loss}` -> a mapping). Two rules spare the shell's quoting: a value YAML cannot
    parse is taken as the string it is (`{name}x2`), and so is a mapping without a colon
    (`{name}`: a file-name template, which YAML reads as {name: null}). A value YAML parses but
    refuses (a `!!python/...` tag) stays an error."""
    try:
        value = yaml.load(text, Loader=ConfigLoader)
    except (yaml.scanner.ScannerError, yaml.parser.ParserError):
        return text  # not YAML: the text itself
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"{source}: cannot parse value {show(text)}: {exc}") from None
    if isinstance(value, dict) and value and ":" not in text and \
            all(v is None for v in value.values()):
        return text  # {name}: a template, not a mapping of nulls
    check_size(value, source)
    return value


def check_size(data, source: str) -> None:
    """ConfigError unless `data` (parsed YAML) holds at most MAX_ITEMS values once its aliases are
    expanded, and no value contains itself. A YAML alias repeats a node without copying it, so a
    small file can stand for a value too big to print, hash or save (a "billion laughs"); checked
    here, before anything renders it. Counts shared nodes once each: linear in the file's size."""
    sizes, open_nodes = {}, set()

    def where(path):
        return f"{source}: {'.'.join(k[:80] if isinstance(k, str) else show(k) for k in path)}" \
            if path else source

    def size(node, path):
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ConfigError(f"{where(path)}: the value contains itself (a recursive YAML alias)")
        open_nodes.add(key)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        n = 1 + len(node) * isinstance(node, dict) + sum(size(v, path + (k,)) for k, v in items)
        open_nodes.discard(key)
        if n > MAX_ITEMS:
            raise ConfigError(f"{where(path)}: holds {n:,} values once its YAML aliases are "
                              f"expanded, more than the {MAX_ITEMS:,} a config may hold (a "
                              f"'billion laughs'?)")
        sizes[key] = n
        return n

    try:
        size(data, ())
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply") from None


def apply_override(cfg: dict, assignment: str, keys_at=None, source: str = "--set") -> None:
    """Apply `key.path=value` to `cfg` in place. `keys_at(parts) -> (known keys, open)` tells which
    keys a schema knows at a path and whether it takes any key there (a `type:` block, whose keywords
    the constructor's signature judges later); without it only existing keys are known."""
    if "=" not in assignment:
        raise ConfigError(f"{source} {assignment!r}: expected key.path=value")
    key, value = assignment.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"{source} {assignment!r}: empty key in path {key!r}")
    node = cfg
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        schema_keys, open_block = keys_at(parts[:i]) if keys_at else (set(), False)
        known_here = set(map(str, node)) | set(schema_keys)
        if part not in known_here and not (open_block and last):
            raise ConfigError(f"{source} {assignment!r}: unknown key path {'.'.join(parts[:i + 1])!r}"
                              f"{did_you_mean(part, known_here)} Known keys here: "
                              f"{', '.join(sorted(known_here))}")
        if last:
            node[part] = parse_scalar(value, f"{source} {key.strip()}")
            return
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{source} {assignment!r}: {'.'.join(parts[:i + 1])} is not a mapping")
        node = child


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def import_modules(names, base_dir=None, source="<config>") -> None:
    """Import user modules by name (never by file path); `base_dir` (the config's folder) is put on
    sys.path first. This runs the modules' code: a config is code."""
    for name in names:
        # "my_layers.py" would pass as package "my_layers", submodule "py": it is a file name
        if not isinstance(name, str) or not _MODULE_NAME.match(name) or name.endswith(".py"):
            raise ConfigError(f"{source}: imports: {show(name)} is not a module name (a config "
                              f"imports modules by name, e.g. 'my_layers', never by file path)")
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


def dump_config(cfg: dict) -> str:
    """A config as YAML (what a run folder's config.yaml holds)."""
    return yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None)
