"""What `srgrad-eval CONFIG` evaluates: the sets, the model, its weights and the scoring, read from
any of three files and brought to one plan (`EvalPlan`):

- an srgrad test config (TEST_SCHEMA below): several named sets, BasicSR's `datasets.test_1`,
  `test_2`, ... layout,

      name: edsr_x2                      # results/<name>/ (results_root: results)
      scale: 2
      model: {type: EDSR, ...}           # optional: the weights' own spec, else detected
      weights: {path: net.pth, key: params}
      datasets:
        test_1: {name: Set5, type: PairedImageDataset, gt_root: ..., lq_root: ...}
        test_2: {name: Set14, type: HRImageDataset, root: ...}
        test_3: {name: mine, type: SingleImageDataset, lq_root: ...}   # no GT: images only
      val: {metrics: [psnr, ssim], y_channel: false, crop_border: 2, save_images: true,
            suffix: null}

- a BasicSR test option file (options/test/*.yml, basicsr/test.py's), translated on the fly
  (framework/engine/config/basicsr_test_options.py; its notes are the plan's notes);
- a training config (srgrad's, or a BasicSR training option file, translated): its datasets.val
  is the one set, its val section the scoring.

Each set's `name` (default: its key) names its folder of SR images, visualization/<name>/.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from ..._check import name_problem, show
from ...io.config import ConfigError, import_modules, read_yaml
from ...registry import DATASETS, LAYERS, MODELS
from .schema import SCHEMA, Block, Field, load_config, resolve_section, validate
from ..inference.zoo import load_zoo

__all__ = ["TEST_SCHEMA", "EvalPlan", "read_plan", "validate_test_config"]

# the val section of a training config without its cadence, plus BasicSR's suffix of saved images
_VAL = {k: v for k, v in SCHEMA["val"].items() if k != "every"}
# <image>_<suffix>.png: part of one file name; null: the config's name, as BasicSR
_VAL["suffix"] = Field("name_part", None, nullable=True)

TEST_SCHEMA = {
    "name": Field("name"),  # the results folder, results_root/<name>: one folder name
    "scale": Field(int, minimum=1),
    "dtype": Field(str, "float32", choices=("float32", "float64")),
    "imports": Field("str_list", []),
    "results_root": Field(str, "results"),
    "model": Block(MODELS, None, shared=("scale",)),
    "weights": {"path": Field(str, None, nullable=True), "key": Field(str, None, nullable=True)},
    "val": _VAL,
}
_OPTIONAL = ("weights", "val")


@dataclass
class EvalPlan:
    """Everything srgrad-eval needs from a file: `sets` is [(set name, dataset spec)], `model` the
    model block (or None), `weights` {path, key}, `val` the resolved val section, `notes` what a
    translation said."""
    name: str
    scale: int
    sets: list
    val: dict
    model: dict | None = None
    weights: dict = field(default_factory=lambda: {"path": None, "key": None})
    results_root: str = "results"
    dtype: str = "float32"
    notes: list = field(default_factory=list)
    kind: str = "test config"


def validate_test_config(cfg: dict, source="<config>") -> dict:
    """Check an srgrad test config against TEST_SCHEMA and its datasets (each a registered
    dataset block, with an optional display `name`); a resolved deep copy, or one ConfigError
    listing every problem."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{source}: expected a mapping of keys, got {type(cfg).__name__}")
    errors: list[str] = []
    rest = {k: v for k, v in cfg.items() if k != "datasets"}
    out = resolve_section(rest, TEST_SCHEMA, source, errors, _OPTIONAL)
    out["datasets"] = _sets(cfg.get("datasets"), out.get("scale"), source, errors)
    model = out.get("model")
    if isinstance(model, dict) and "scale" in model and model["scale"] != out.get("scale"):
        errors.append(f"{source}: model.scale: {show(model['scale'])} disagrees with the top-level "
                      f"scale {out.get('scale')}")
    if errors:
        raise ConfigError("invalid test config:\n  " + "\n  ".join(errors))
    return out


def _sets(datasets, scale, source, errors) -> dict:
    """{key: (display name, dataset block)} of the datasets section, each block checked."""
    if not isinstance(datasets, dict) or not datasets:
        errors.append(f"{source}: datasets: expected a mapping of test sets (test_1: {{name: Set5, "
                      f"type: PairedImageDataset, ...}}, ...), got {show(datasets)}")
        return {}
    out, names = {}, {}
    for key, block in datasets.items():
        where = f"{source}: datasets.{key}"
        if not isinstance(block, dict):
            errors.append(f"{where}: expected a mapping with a 'type' key, got {show(block)}")
            continue
        block = copy.deepcopy(block)
        name = block.pop("name", str(key))
        problem = name_problem(name)
        if problem:
            errors.append(f"{where}.name: {problem}")
            continue
        if name in names:
            errors.append(f"{where}.name: {name!r} is also the name of datasets.{names[name]} "
                          f"(each set gets its own folder of images)")
        names[name] = key
        for sub, message in DATASETS.check(block, shared=("scale",), nested=LAYERS):
            errors.append(f"{where}{'.' + sub if sub else ''}: {message}")
        if "scale" in block and block["scale"] != scale:
            errors.append(f"{where}.scale: {show(block['scale'])} disagrees with the top-level "
                          f"scale {scale}")
        out[key] = (name, block)
    return out


def read_plan(path) -> EvalPlan:
    """The EvalPlan of `path`: a BasicSR option file (test or training: translated, its notes in
    the plan), an srgrad training config (its val set) or an srgrad test config."""
    from .basicsr_options import is_basicsr_options
    from .options import options_kind, translate_any
    source = os.fspath(path)
    data = read_yaml(source)
    notes, kind, whose = [], None, None
    if is_basicsr_options(data):
        whose = options_kind(data)
        data, notes, kind = translate_any(data, source)
    if "train" in data:  # a training config: its validation set
        load_zoo()
        cfg = load_config(source) if kind is None else validate(data, source)
        if cfg["datasets"]["val"] is None:
            raise ConfigError(f"{source}: a training config without datasets.val: nothing to "
                              f"evaluate on (give the sets in a test config, or use --input)")
        return EvalPlan(cfg["name"], cfg["scale"], [("val", cfg["datasets"]["val"])],
                        {**cfg["val"], "suffix": None}, cfg["model"], results_root="results",
                        dtype=cfg["dtype"], notes=notes,
                        kind=f"{whose} training option file" if kind else "training config")
    import_modules(data.get("imports") or [], os.path.dirname(os.path.abspath(source)), source)
    load_zoo()
    cfg = validate_test_config(data, source)
    return EvalPlan(cfg["name"], cfg["scale"], list(cfg["datasets"].values()), cfg["val"],
                    cfg["model"], cfg["weights"], cfg["results_root"], cfg["dtype"], notes,
                    f"{whose} test option file" if kind else "test config")
