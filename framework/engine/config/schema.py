"""What a training config holds: the schema `srgrad-train` validates a config against, before anything
runs. Every key has a Field (a typed leaf with a default) or a Block (`{type: Name, **keywords}`,
judged by its registry against the constructor: framework.registry.Registry.check; both in
engine/config/fields.py). The keys every recipe shares are here; each training recipe adds its own
(framework/engine/recipes: the gan recipe's model_d, train.losses.gan, train.optimizer_d, ...),
merged in by `full_schema`, and checks them. All problems are reported together, each naming the
file and the dotted key, with a did-you-mean.

A config is BasicSR-like (`name`, `scale`, `model: {type: ...}`, `datasets`, `train`, `val`,
`checkpoint`, `imports`). Paths inside a config (dataset roots, `run_root`) are relative to the
current working directory (run from the repository root), not to the config file.
"""
from __future__ import annotations

import copy
import hashlib
import json
import numbers
import os

from ..._check import did_you_mean, name_problem
from ...io.config import ConfigError, apply_override, import_modules, parse_yaml, read_yaml, show
from ...card import SpecTooLarge, card, preflight
from ...registry import (BASELINES, DATASETS, LAYERS, LOSSES, METRICS, MODELS, OPTIMIZERS, RECIPES,
                        SCHEDULERS)
from .fields import REQUIRED as _REQUIRED
from .fields import Block, Field, check_pretrained, leaves, pretrained_section
from .overrides import drop_nulled_gt_usm, fit_schedules
from ..run.recipes import recipe_name
from ..run.recipes.terms import TARGETS, is_gan_type, is_list
from ..inference.zoo import load_zoo

__all__ = ["SCHEMA", "Field", "Block", "load_config", "parse_config", "validate", "config_hash",
           "keys_at", "full_schema", "resolve_section"]

# The keys every recipe shares; each registered recipe adds its own (framework/engine/recipes:
# a GAN's model_d, train.losses.gan, train.optimizer_d, ...), merged in by full_schema().
_BASE = {
    "name": Field("name"),  # the run folder, run_root/<name>: one folder name
    "scale": Field(int, minimum=1),
    "seed": Field(int, 0, minimum=0),
    "dtype": Field(str, "float32", choices=("float32", "float64")),
    "imports": Field("str_list", []),
    "run_root": Field(str, "runs"),
    # what one training step is (RECIPES): null = the recipe whose own keys the config sets (gan:
    # model_d), else sr
    "recipe": Field(str, None, nullable=True, choices=RECIPES),
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
        # the pixel loss (BasicSR's pixel_opt), short for losses.pixel; L1Loss when no loss is given
        "loss": Block(LOSSES, None),
        # several terms, each weighted by its loss_weight: by role (BasicSR's pixel_opt,
        # perceptual_opt; a recipe adds its own roles, gan: train.losses.gan), or as one list of
        # LOSSES entries, each with its `target` (traiNNer-redux's; recipes/terms.py)
        "losses": {
            "pixel": Block(LOSSES, None),
            "perceptual": Block(LOSSES, None),
        },
        # the roles whose target is the USM-sharpened GT (Real-ESRGAN's l1_gt_usm, percep_gt_usm,
        # gan_gt_usm): the dataset must produce gt_usm (choices: the roles of train.losses)
        "gt_usm": Field("str_list", []),
        # weights to start from (BasicSR's path.pretrain_network_g, param_key_g, strict_load_g);
        # ignored when a run resumes from its own checkpoint
        "pretrained": pretrained_section(),
        # an exponential moving average of the weights (0: none); validation, net_best and the
        # weights files' params_ema use it
        "ema_decay": Field(float, 0.0, minimum=0),
        # its warm-up (traiNNer-redux's ema_power): decay min(ema_decay, 1 - k^-ema_power) at step
        # k, the first two steps copied; null: ema_decay from the first step (BasicSR)
        "ema_power": Field(float, None, minimum=0, exclusive=True, nullable=True),
        "grad_clip": Field(float, None, minimum=0, exclusive=True, nullable=True),
        # what a NaN/Inf loss does: stop (leaving the last checkpoint untouched) or skip the batch
        "nonfinite_loss": Field(str, "stop", choices=("stop", "skip")),
        # the matmul-like ops' operands (framework.autocast; traiNNer-redux's amp_bf16): fp32, or
        # bf16 operands with float32 sums where the CPU has AVX512-BF16 / AMX; weights, optimizer
        # state, losses, metrics and checkpoints stay float32 (docs/numerics.md)
        "precision": Field(str, "fp32", choices=("fp32", "bf16")),
        # auto: the step is recorded on its first two iterations and replayed from a captured graph
        # when it is static (framework/capture), with the same bits as eager; off: always eager
        "capture": Field(str, "auto", choices=("auto", "off")),
        "log_every": Field(int, 10, minimum=1),
        # background batch loading (framework.data.Prefetcher): threads that decode, crop and
        # degrade the next `prefetch` batches while a step runs; 0 workers = load in the step
        "loader": {"workers": Field(int, 1, minimum=0), "prefetch": Field(int, 2, minimum=1)},
        # TensorBoard event files in <run>/tensorboard (scalars and validation images)
        "tensorboard": Field(bool, False),
    },
    "val": {
        "every": Field(int, 500, minimum=1),
        "metrics": Field("str_list", ["psnr", "ssim"], choices=METRICS),
        "y_channel": Field(bool, True),
        "crop_border": Field(int, None, minimum=0, nullable=True),  # null = scale (BasicSR)
        # how the LR image is upscaled for comparison: MATLAB imresize (what SR papers report)
        "baseline": Field(str, "imresize", choices=BASELINES),
        "save_images": Field(bool, True),
        "tile": Field(int, None, minimum=8, nullable=True),
        "tile_overlap": Field(int, 16, minimum=0),
        # test-time self-ensemble x8 (flips and transposes averaged: EDSR+, RCAN+): 8x the time
        "self_ensemble": Field(bool, False),
    },
    "checkpoint": {
        "every": Field(int, 500, minimum=1),
        "keep": Field(int, 3, minimum=1),
    },
}

# sections that may instead be a list of LOSSES entries (each with `target`): the loss terms as
# data (recipes/terms.py)
_LIST_SECTIONS = ("train.losses",)
_BASE_OPTIONAL = ("val", "checkpoint", "train.losses", "train.pretrained", "train.loader")
_MERGED: dict = {}  # the registered recipes' names -> (schema, optional sections)


def full_schema() -> tuple[dict, tuple]:
    """(the schema with every registered recipe's SCHEMA merged in, its optional sections: the
    base's and every section a recipe adds). Recomputed when a recipe registers (a user's, through
    `imports:`); ValueError when two recipes claim the same key."""
    recipes = tuple((name, RECIPES.get(name)) for name in RECIPES.names())
    if recipes not in _MERGED:
        schema = _sections_copy(_BASE)
        optional = list(_BASE_OPTIONAL)
        for name, recipe in recipes:
            _merge(schema, recipe.SCHEMA, name, "", optional)
        train = schema["train"]
        train["gt_usm"] = Field("str_list", [], choices=tuple(train["losses"]))
        _MERGED[recipes] = schema, tuple(optional)
    return _MERGED[recipes]


def _sections_copy(schema: dict) -> dict:
    return {k: _sections_copy(v) if isinstance(v, dict) else v for k, v in schema.items()}


def _merge(into: dict, block: dict, owner: str, prefix: str, optional: list) -> None:
    for key, spec in block.items():
        path = prefix + key
        if isinstance(spec, dict) and isinstance(into.get(key), dict):
            _merge(into[key], spec, owner, path + ".", optional)
        elif key in into:
            raise ValueError(f"recipe {owner}: config key {path} is already taken")
        elif any(leaf.default is _REQUIRED for _, leaf in leaves({key: spec})):
            raise ValueError(f"recipe {owner}: config key {path} needs a default (the configs of "
                             f"other recipes do not set it)")
        else:
            into[key] = _sections_copy(spec) if isinstance(spec, dict) else spec
            if isinstance(spec, dict):  # a recipe's own sections are optional, like its keys
                optional += _section_paths(spec, path)


def _section_paths(schema: dict, path: str) -> list[str]:
    return [path] + [p for k, v in schema.items() if isinstance(v, dict)
                     for p in _section_paths(v, f"{path}.{k}")]


SCHEMA = full_schema()[0]  # with the built-in recipes (sr, gan)


# -- loading -------------------------------------------------------------------------------------
def load_config(path, overrides=(), do_imports: bool = True, notes: list | None = None,
                fit_schedule: bool = False) -> dict:
    """Read, override, validate and resolve a config file. Returns a plain dict with every default
    filled in. Raises ConfigError naming the file and the key on any problem.

    A BasicSR / Real-ESRGAN training option file (basicsr_options.is_basicsr_options) is translated
    first, as `srgrad-convert options` does; overrides then use srgrad's keys. A BasicSR test
    option file is a ConfigError pointing at srgrad-eval. What an override changes beyond its
    value (engine/config/overrides.py: gt_usm roles of a nulled loss; with `fit_schedule`, the schedules
    scaled to a new total_iters) is done here. Every such change, and the translation, is said in
    `notes` when it is given (its first note says that the file was translated)."""
    source = os.fspath(path)
    cfg = read_yaml(source)
    from .basicsr_options import is_basicsr_options, is_test_options
    from .options import options_kind, translate_options
    if is_test_options(cfg):
        kind = options_kind(cfg)
        raise ConfigError(f"{source} is a {kind} test option file"
                          f"{' (for basicsr/test.py)' if kind == 'BasicSR' else ''}: evaluate "
                          f"with srgrad-eval {source}")
    if is_basicsr_options(cfg):
        kind = options_kind(cfg)
        cfg, said = translate_options(cfg, source)
        from .basicsr_options import PathsNote
        said = [n.overridden(overrides) if isinstance(n, PathsNote) else n for n in said]
        said = [n for n in said if n is not None]
        if notes is not None:
            notes.append(f"{source} is a {kind} option file: translated as srgrad-convert options "
                         f"does ({len(said)} note(s) below; srgrad-convert options {source} -o "
                         f"X.yaml writes the translation to edit)")
            notes.extend(said)
    return _resolve(cfg, source, overrides, do_imports, os.path.dirname(os.path.abspath(source)),
                    fit_schedule, notes)


def parse_config(text: str, source="<string>", overrides=(), do_imports=True, base_dir=None):
    """`load_config` on YAML text; `base_dir` goes on sys.path for `imports:`."""
    return _resolve(parse_yaml(text, source), source, overrides, do_imports, base_dir)


def _resolve(cfg, source, overrides, do_imports, base_dir, fit_schedule=False, notes=None):
    train = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    total = train.get("total_iters")  # the file's, for --fit-schedule
    for assignment in overrides:
        apply_override(cfg, assignment, keys_at)
    said = drop_nulled_gt_usm(cfg, overrides) + (fit_schedules(cfg, total) if fit_schedule else [])
    if notes is not None:
        notes.extend(said)
    if do_imports:
        imports = cfg.get("imports", [])
        if isinstance(imports, list) and all(isinstance(m, str) for m in imports):
            import_modules(imports, base_dir, source)
    load_zoo()
    return validate(cfg, source)


def keys_at(parts):
    """(the schema's keys at a dotted path, whether the path is a `type:` block that takes any
    keyword): what `--set` accepts there."""
    node = full_schema()[0]
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return set(), False
        node = node[part]
    if isinstance(node, Block):
        return set(), True
    return (set(node) if isinstance(node, dict) else set()), False


# -- validation ----------------------------------------------------------------------------------
def validate(cfg: dict, source="<config>") -> dict:
    """Check `cfg` against SCHEMA; return a deep copy with defaults filled in. All problems are
    reported together in one ConfigError."""
    errors: list[str] = []
    try:
        schema, optional = full_schema()
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    out = _section(cfg, schema, "", source, errors, optional)
    if not errors:
        _cross_checks(out, source, errors)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
    return out


def _where(source, path):
    return f"{source}: {path}" if path else str(source)


def resolve_section(cfg, schema: dict, source, errors: list, optional=()) -> dict:
    """`cfg` checked against `schema` (Fields, Blocks and nested sections, as SCHEMA's), defaults
    filled in; each problem appended to `errors` (file and dotted key named). `optional`: the
    dotted paths of sections that may be left out. For the other kind of config built from the
    same pieces (engine/config/testconfig.py: what srgrad-eval reads)."""
    return _section(cfg, schema, "", source, errors, tuple(optional))


def _section(cfg, schema, prefix, source, errors, optional):
    if not isinstance(cfg, dict):
        errors.append(f"{_where(source, prefix)}: expected a mapping, got "
                      f"{type(cfg).__name__} {show(cfg)}")
        return {}
    out = {}
    for key in cfg:
        if key not in schema:
            path = f"{prefix}.{key}" if prefix else str(key)
            errors.append(f"{_where(source, path)}: unknown key{_hint(key, schema)} "
                          f"Known keys: {', '.join(schema)}")
    for key, spec in schema.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(spec, dict) and path in _LIST_SECTIONS and isinstance(cfg.get(key), list):
            out[key] = _term_list(cfg[key], path, source, errors)
        elif isinstance(spec, dict):
            if key not in cfg and path not in optional:
                errors.append(f"{_where(source, path)}: missing section (keys: {', '.join(spec)})")
                continue
            given = cfg.get(key)
            out[key] = _section({} if given is None and path in optional else
                                given if key in cfg else {}, spec, path, source, errors, optional)
        elif isinstance(spec, Block):
            if cfg.get(key) is None:
                if spec.default is _REQUIRED:
                    errors.append(f"{_where(source, path)}: missing required key (a mapping with "
                                  f"type: one of {', '.join(spec.registry.names())})")
                    continue
                out[key] = copy.deepcopy(spec.default)
            else:
                out[key] = copy.deepcopy(cfg[key])
            if out[key] is not None:
                _block(out[key], spec, path, source, errors)
        elif key not in cfg:
            if spec.default is _REQUIRED:
                errors.append(f"{_where(source, path)}: missing required key ({_kind_name(spec.kind)})")
                continue
            out[key] = copy.deepcopy(spec.default)
        else:
            out[key] = _field(cfg[key], spec, path, source, errors)
    return out


def _basicsr_key(key):
    from .basicsr_options import BASICSR_SPELLINGS
    return BASICSR_SPELLINGS.get(key)


def _hint(key, known) -> str:
    """A did-you-mean, or for a BasicSR option name (network_g, total_iter, optim_g, ...) the
    srgrad key that holds it."""
    if _basicsr_key(key):
        from .basicsr_options import BASICSR_SPELLINGS
        return (f"; {key!r} is BasicSR's spelling, srgrad's key is {BASICSR_SPELLINGS[key]!r} "
                f"(srgrad-convert options translates a whole BasicSR option file).")
    return did_you_mean(key, known)


def _block(block, spec, path, source, errors):
    name = block.get("type") if isinstance(block, dict) else None
    problems = spec.registry.check(block, injected=spec.injected(name), shared=spec.shared,
                                   nested=LAYERS)
    for key, message in problems:
        leaf = key.rsplit(".", 1)[-1]
        if message.startswith("unknown keyword") and _basicsr_key(leaf):
            message = f"unknown keyword for {name}{_hint(leaf, ())} {message.split(' Known ')[-1]}"
            message = message.replace("keywords:", "Known keywords:", 1)
        errors.append(f"{_where(source, f'{path}.{key}' if key else path)}: {message}")


def _term_list(entries, path, source, errors) -> list:
    """A list of LOSSES entries, each `{type: Name, **keywords, target: gt|gt_usm}`; returned with
    target written out."""
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            errors.append(f"{_where(source, where)}: expected a mapping {{type: Name, ...}}, got "
                          f"{show(entry)}")
            continue
        entry = copy.deepcopy(entry)
        target = entry.pop("target", "gt")
        if target not in TARGETS:
            errors.append(f"{_where(source, where + '.target')}: {show(target)} is not one of "
                          f"{list(TARGETS)} (gt_usm: the USM-sharpened GT)")
        _block(entry, Block(LOSSES), where, source, errors)
        out.append({**entry, "target": target})
    return out


def _kind_name(kind):
    if kind == "str_list":
        return "a list of strings"
    if kind in ("name", "name_part"):
        return "a name"
    return f"{'an' if kind is int else 'a'} {kind.__name__}"


def _field(value, spec, path, source, errors):
    where = _where(source, path)
    if value is None and spec.nullable:
        return None
    kind, allowed = spec.kind, spec.allowed()
    if kind == "str_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append(f"{where}: expected a list of strings, got {show(value)}")
            return value
        bad = [v for v in value if allowed and v not in allowed]
        if bad:
            errors.append(f"{where}: unknown entries {bad}; choose from {list(allowed)}")
        return list(value)
    if kind in ("name", "name_part"):  # a file or folder name srgrad makes: one path component
        problem = name_problem(value, part=kind == "name_part")
        if problem:
            errors.append(f"{where}: {problem}")
        return value
    if kind is str and value is False and allowed and "off" in allowed:
        value = "off"  # YAML 1.1 reads an unquoted `off` as false
    ok = {
        int: isinstance(value, numbers.Integral) and not isinstance(value, bool),
        float: isinstance(value, numbers.Real) and not isinstance(value, bool),
        bool: isinstance(value, bool),
        str: isinstance(value, str),
    }[kind]
    if not ok:
        errors.append(f"{where}: expected {_kind_name(kind)}, got {type(value).__name__} {show(value)}")
        return value
    value = kind(value)
    if allowed and value not in allowed:
        errors.append(f"{where}: {show(value)} is not one of {list(allowed)}"
                      f"{did_you_mean(value, allowed)}")
    if spec.minimum is not None and (value < spec.minimum or (spec.exclusive and value == spec.minimum)):
        errors.append(f"{where}: must be {'>' if spec.exclusive else '>='} {spec.minimum}, got {value!r}")
    return value


def _cross_checks(cfg, source, errors):
    scale = cfg["scale"]
    for path, block in (("model", cfg["model"]), ("datasets.train", cfg["datasets"]["train"]),
                        ("datasets.val", cfg["datasets"]["val"])):
        if block is not None and "scale" in block and block["scale"] != scale:
            errors.append(f"{_where(source, path + '.scale')}: {show(block['scale'])} disagrees with "
                          f"the top-level scale {scale}")
    _check_channels(cfg, source, errors)
    _check_size(cfg, source, errors)
    _check_dataset_protocol(cfg, source, errors)
    _check_training(cfg, source, errors)
    lr = cfg["train"]["optimizer"].get("lr")
    if isinstance(lr, numbers.Real) and not lr > 0:  # allowed by the optimizers; a mistake in a run
        errors.append(f"{_where(source, 'train.optimizer.lr')}: must be > 0, got {lr!r}")


def _check_training(cfg, source, errors):
    """The loss terms, EMA and gt_usm fit together; then the recipes' own checks."""
    t, where = cfg["train"], lambda key: _where(source, key)
    if is_list(t):
        _check_term_list(cfg, where, errors)
    else:
        _check_roles(cfg, where, errors)
    if not t["ema_decay"] < 1:
        errors.append(f"{where('train.ema_decay')}: must be < 1 (0 turns the EMA off), got "
                      f"{t['ema_decay']!r}")
    errors += check_pretrained(t, "pretrained", where)
    _check_precision(cfg, where, errors)
    _check_recipes(cfg, where, errors)


def _check_roles(cfg, where, errors):
    """train.loss / train.losses.<role>: the pixel loss once, L1Loss when no loss is given, the
    gt_usm roles present and produced by the training set."""
    t = cfg["train"]
    if t["loss"] is not None and t["losses"]["pixel"] is not None:
        errors.append(f"{where('train.loss')}: give the pixel loss once, as train.loss or as "
                      f"train.losses.pixel, not both")
    if t["loss"] is None and all(v is None for v in t["losses"].values()):
        t["loss"] = {"type": "L1Loss"}
    for role in t["gt_usm"]:
        if t["losses"][role] is None and not (role == "pixel" and t["loss"] is not None):
            errors.append(f"{where('train.gt_usm')}: {role!r} is listed but there is no "
                          f"train.losses.{role}")
    if t["gt_usm"] and not cfg["datasets"]["train"].get("gt_usm", False):
        errors.append(f"{where('train.gt_usm')}: the targets {t['gt_usm']} are the sharpened GT, "
                      f"which the training set must produce: set datasets.train.gt_usm: true "
                      f"(RealESRGANDataset)")


def _check_term_list(cfg, where, errors):
    """train.losses as a list: no second spelling beside it, at least one term on, each gt_usm
    target produced by the training set."""
    t = cfg["train"]
    if t["loss"] is not None:
        errors.append(f"{where('train.loss')}: train.losses is a list, so the pixel loss is one "
                      f"of its entries: move train.loss into it")
    if t["gt_usm"]:
        errors.append(f"{where('train.gt_usm')}: train.losses is a list: say `target: gt_usm` on "
                      f"each entry that compares with the sharpened GT")
    on = [e for e in t["losses"] if e.get("loss_weight", 1) != 0]
    if not any(not is_gan_type(e["type"]) for e in on):
        errors.append(f"{where('train.losses')}: no generator loss with a loss_weight other than "
                      f"0 (e.g. {{type: L1Loss, loss_weight: 1.0}})")
    sharp = [i for i, e in enumerate(t["losses"]) if e["target"] == "gt_usm"]
    if sharp and not cfg["datasets"]["train"].get("gt_usm", False):
        errors.append(f"{where(f'train.losses[{sharp[0]}].target')}: gt_usm is the sharpened GT, "
                      f"which the training set must produce: set datasets.train.gt_usm: true "
                      f"(RealESRGANDataset)")


def _check_precision(cfg, where, errors):
    """train.precision: bf16 needs float32 tensors and a CPU (and kernels) with bfloat16."""
    if cfg["train"]["precision"] != "bf16":
        return
    from ... import precision
    if cfg["dtype"] != "float32":
        errors.append(f"{where('train.precision')}: bf16 rounds float32 operands; dtype is {cfg['dtype']}")
    elif not precision.support().avx512_bf16:
        errors.append(f"{where('train.precision')}: bf16 is not available: {precision.support().reason}")


def _check_recipes(cfg, where, errors):
    """Every recipe's own checks; a key of a recipe the config does not train with, when set, is
    an error (the recipe's UNUSED says why, else which recipe it belongs to)."""
    try:
        chosen = recipe_name(cfg)
    except ValueError as exc:
        errors.append(f"{where('recipe')}: {exc}")
        return
    for name in RECIPES.names():
        recipe = RECIPES.get(name)
        errors += recipe.check_config(cfg, where, name == chosen)
        if name == chosen:
            continue
        for key, spec in leaves(recipe.SCHEMA):
            value = cfg
            for part in key.split("."):
                value = value[part] if isinstance(value, dict) else spec.default
            if value != spec.default:  # (a role inside the list form: the recipe checks it)
                errors.append(f"{where(key)}: " + recipe.UNUSED.get(
                    key, f"set, but the {chosen!r} recipe does not use it (a key of recipe: "
                         f"{name})"))


def _check_dataset_protocol(cfg, source, errors):
    """A dataset class must have srgrad's get(index, rng): a torch-style one (only __getitem__)
    would pass the keyword checks and fail later, in the loader's thread."""
    for name, block in cfg["datasets"].items():
        cls = DATASETS.get(block["type"]) if block is not None else None
        if cls is not None and getattr(cls, "has_gt", True) is False:
            errors.append(f"{_where(source, f'datasets.{name}.type')}: {block['type']} holds LR "
                          f"images only, with nothing to train or validate against: it is for "
                          f"srgrad-eval's test sets")
        elif cls is not None and not callable(getattr(cls, "get", None)):
            errors.append(
                f"{_where(source, f'datasets.{name}.type')}: {block['type']} has no get(index, "
                f"rng) method. srgrad's loader calls get(index, rng) -> {{'lq': (C, h, w), 'gt': "
                f"(C, H, W), 'name': str}}, every random crop or flip drawn from rng (so a run "
                f"resumes exactly); a torch-style __getitem__ returning (lq, gt) is not enough. "
                f"Add to the class: def get(self, index, rng=None): lq, gt = self[index]; return "
                f"{{'lq': lq, 'gt': gt, 'name': str(index)}} (and draw any randomness from rng)")


def _check_size(cfg, source, errors):
    """A model too large for this machine (its card's parameters or largest activation) is a
    config error, before the run starts or anything is allocated (framework/card.py preflight)."""
    for key in ("model", "model_d"):
        if isinstance(cfg.get(key), dict) and "type" in cfg[key]:
            try:
                preflight({"scale": cfg["scale"], **cfg[key]} if key == "model" else cfg[key])
            except SpecTooLarge as exc:
                errors.append(f"{_where(source, key)}: {exc}")


def _check_channels(cfg, source, errors):
    """Y-channel data (`color: y`) needs a 1-channel model and RGB data a 3-channel one, as the
    model's card says (framework/card.py: whatever its channel keyword); caught here rather than
    as a shape error deep inside the first convolution. A model without a card, or whose
    keywords are wrong (reported by the model check), is not judged here."""
    spec = {"scale": cfg["scale"], **cfg["model"]}
    try:
        c = card(spec)
    except (KeyError, ValueError, TypeError, ArithmeticError, LookupError, AttributeError):
        return
    for name in ("train", "val"):
        block = cfg["datasets"][name]
        if block is None:
            continue
        color = block.get("color", "rgb")
        needed = {"y": 1, "rgb": 3}.get(color)
        if needed is None or needed == c.in_channels:
            continue
        keys, extra = c.channel_keys, c.key_extra_in
        takes = f"{keys[0]}={c.in_channels + extra}" if keys else f"{c.in_channels}"
        if extra:
            takes += f": {c.in_channels} image channel(s) and {extra} more"
        fix = (f"set {' and '.join('model.' + k for k in keys)} to {needed}" if keys and not extra else
               f"set model.{keys[0]} to {needed + extra}" + "".join(
                   f" and model.{k} to {needed}" for k in keys[1:]) if keys else
               f"{cfg['model']['type']} has no channel keyword: it takes RGB only")
        errors.append(f"{_where(source, f'datasets.{name}.color')}: {show(color)} data has "
                      f"{needed} channel(s) but the model takes {takes} ({fix})")


def config_hash(cfg: dict) -> str:
    """sha256 of the resolved config's canonical JSON: stored in checkpoints to spot a changed
    config on resume."""
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]
