"""Bad configs: every wrong type, unknown key and out-of-range value is a ConfigError naming the
file and the dotted key, found before anything runs; checks only a constructor can make surface the
same way through srgrad-train (exit 2)."""
import copy
import re

import pytest
import yaml

from framework.engine.commands.cli import train_main
from framework.engine.config.schema import SCHEMA, Field, load_config
from framework.engine.inference.zoo import load_zoo
from framework.io import config as config_mod
from framework.io.config import ConfigError
from framework.registry import DATASETS, LAYERS, LOSSES, MODELS, OPTIMIZERS, SCHEDULERS

from tests.conftest import tiny_config_text

load_zoo()  # every registry complete (models, datasets, ...)


@pytest.fixture
def base(tmp_path, tiny_train):
    """The tiny test config as a dict, with a validation set and every optional section."""
    cfg = yaml.load(tiny_config_text(tiny_train, tmp_path / "runs"), Loader=config_mod.ConfigLoader)
    cfg["train"]["loss"] = {"type": "L1Loss"}
    cfg["datasets"]["val"] = {"type": "HRImageDataset", "root": str(tiny_train)}
    cfg["val"] = {"every": 5}
    return cfg


def write(tmp_path, cfg, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def set_key(cfg, dotted, value):
    cfg = copy.deepcopy(cfg)
    node = cfg
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return cfg


def errors_of(tmp_path, cfg, overrides=()):
    path = write(tmp_path, cfg)
    with pytest.raises(ConfigError) as exc:
        load_config(path, overrides)
    return path, str(exc.value)


def leaves(schema=SCHEMA, prefix=""):
    for key, spec in schema.items():
        path = f"{prefix}{key}"
        if isinstance(spec, dict):
            yield from leaves(spec, path + ".")
        elif isinstance(spec, Field):
            yield path, spec


def wrong_values(spec):
    """Values of the wrong type for a field (YAML-representable)."""
    kind = spec.kind
    if kind is int:
        return ["seven", 1.5, True, [1]]
    if kind is float:
        return ["fast", True, {"a": 1}]
    if kind is bool:
        return [3, "maybe", 0.5]
    if kind in (str, "name", "name_part"):
        return [5, 1.5, ["a"], True]
    return ["psnr", [1, 2], {"a": "b"}]  # str_list


LEAVES = list(leaves())


@pytest.mark.parametrize("dotted,spec", LEAVES, ids=[p for p, _ in LEAVES])
def test_every_field_with_a_wrong_type_names_file_and_key(tmp_path, base, dotted, spec):
    for value in wrong_values(spec):
        path, msg = errors_of(tmp_path, set_key(base, dotted, value))
        assert f"{path}: {dotted}: expected " in msg, (value, msg)
        assert repr(value) in msg, msg


@pytest.mark.parametrize("section", ["", "train.", "val.", "checkpoint.", "datasets."])
def test_unknown_key_in_every_section_has_a_did_you_mean(tmp_path, base, section):
    known = {"": "seed", "train.": "batch_size", "val.": "every", "checkpoint.": "keep",
             "datasets.": "train"}[section]
    typo = known[:-1] + known[-1].upper() + "x"
    cfg = set_key(base, section + typo, 1)
    path, msg = errors_of(tmp_path, cfg)
    assert f"{path}: {section}{typo}: unknown key; did you mean '{known}'?" in msg, msg
    assert "Known keys: " in msg


@pytest.mark.parametrize("block,key,hint", [
    ("model", "num_feats", "num_feat"),
    ("train.optimizer", "betas2", "betas"),
    ("train.scheduler", "T_mx", "T_max"),
    ("train.loss", "reductin", "reduction"),
    ("datasets.train", "gtsize", "gt_size"),
])
def test_unknown_keyword_in_every_type_block(tmp_path, base, block, key, hint):
    path, msg = errors_of(tmp_path, set_key(base, f"{block}.{key}", 1))
    assert re.search(rf"{re.escape(str(path))}: {block}\.{key}: unknown keyword for \w+; did you "
                     rf"mean '{hint}'\? Known keywords: ", msg), msg


@pytest.mark.parametrize("dotted,value,match", [
    # the optimizer's own checks, run on a throwaway parameter before anything is built
    ("train.optimizer.lr", -1e-3, "train.optimizer: Adam: lr must be >= 0, got -0.001"),
    ("train.optimizer.lr", 0.0, "train.optimizer.lr: must be > 0, got 0.0"),
    ("train.optimizer.weight_decay", -1.0, "train.optimizer: Adam: weight_decay must be >= 0"),
    ("train.optimizer.betas", [1.5, 0.9], "train.optimizer: Adam: betas[0] must be in [0, 1.0), "
                                          "got 1.5"),
    ("train.scheduler.T_max", 0, "train.scheduler: CosineAnnealingLR: T_max must be a positive int"),
    ("train.loss", {"type": "L1Loss", "loss_weight": -1.0},
     "train.loss: L1Loss: loss_weight must be >= 0, got -1.0"),
    ("scale", 0, "scale: must be >= 1, got 0"),
    ("scale", -2, "scale: must be >= 1, got -2"),
    ("train.batch_size", 0, "train.batch_size: must be >= 1, got 0"),
    ("train.total_iters", 0, "train.total_iters: must be >= 1, got 0"),
    ("train.grad_clip", 0.0, "train.grad_clip: must be > 0, got 0.0"),
    ("train.log_every", 0, "train.log_every: must be >= 1, got 0"),
    ("train.nonfinite_loss", "ignore", "train.nonfinite_loss: 'ignore' is not one of "
                                      "['stop', 'skip']"),
    ("seed", -1, "seed: must be >= 0, got -1"),
    ("dtype", "float16", "dtype: 'float16' is not one of ['float32', 'float64']"),
    ("checkpoint.every", 0, "checkpoint.every: must be >= 1, got 0"),
    ("checkpoint.keep", 0, "checkpoint.keep: must be >= 1, got 0"),
    ("val.every", 0, "val.every: must be >= 1, got 0"),
    ("val.tile", 4, "val.tile: must be >= 8, got 4"),
    ("val.tile_overlap", -1, "val.tile_overlap: must be >= 0, got -1"),
    ("val.crop_border", -1, "val.crop_border: must be >= 0, got -1"),
    ("val.metrics", ["psnr", "fid"], "val.metrics: unknown entries ['fid']"),
    ("val.baseline", "nearest", "val.baseline: 'nearest' is not one of"),
    ("model.scale", 3, "model.scale: 3 disagrees with the top-level scale 2"),
    ("datasets.train.scale", 4, "datasets.train.scale: 4 disagrees with the top-level scale 2"),
    ("datasets.val.scale", 3, "datasets.val.scale: 3 disagrees with the top-level scale 2"),
])
def test_out_of_range_or_inconsistent_values(tmp_path, base, dotted, value, match):
    path, msg = errors_of(tmp_path, set_key(base, dotted, value))
    assert f"{path}: {match}" in msg, msg


def test_the_same_checks_apply_to_command_line_overrides(tmp_path, base, capsys):
    path = write(tmp_path, base)
    for assignment, match in [("train.batch_size=0", "train.batch_size: must be >= 1, got 0"),
                              ("train.optimizer.lr=-2e-4", "train.optimizer: Adam: lr must be >= 0"),
                              ("scale=two", "scale: expected an int, got str 'two'")]:
        assert train_main([str(path), "--set", assignment, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"{path}: {match}" in err and "Traceback" not in err, err
    assert train_main([str(path), "--set", "train.batch_sise=4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--set 'train.batch_sise=4': unknown key path 'train.batch_sise'; did you mean " \
           "'batch_size'?" in err, err


@pytest.mark.parametrize("block,registry,bad,hint", [
    ("model", MODELS, "ESPCNN", "ESPCN"),
    ("train.optimizer", OPTIMIZERS, "Adamw", "AdamW"),
    ("train.scheduler", SCHEDULERS, "CosineAnnealing", "CosineAnnealingLR"),
    ("train.loss", LOSSES, "L1loss", "L1Loss"),
    ("datasets.train", DATASETS, "HRImageDatset", "HRImageDataset"),
])
def test_unknown_registry_name_lists_the_known_names(tmp_path, base, block, registry, bad, hint):
    path, msg = errors_of(tmp_path, set_key(base, f"{block}.type", bad))
    assert f"{path}: {block}.type: unknown {registry.kind} {bad!r}; did you mean {hint!r}? " \
           f"Known: {', '.join(registry.names())}" in msg, msg


def test_unknown_nested_layer_name_lists_the_layers(tmp_path, base):
    cfg = set_key(base, "model", {"type": "EDSR", "num_feat": 8, "num_block": 1,
                                  "block": {"type": "ResBlok"}})
    path, msg = errors_of(tmp_path, cfg)
    assert f"{path}: model.block.type: unknown {LAYERS.kind} 'ResBlok'" in msg, msg
    assert "Known: " in msg and "Conv2d" in msg


def test_all_problems_are_reported_together(tmp_path, base):
    cfg = set_key(base, "scale", 0)
    cfg = set_key(set_key(cfg, "train.batch_size", "2"), "train.optimizer.type", "Adamm")
    path, msg = errors_of(tmp_path, cfg)
    assert msg.startswith("invalid config:\n")
    for part in ("scale: must be >= 1", "train.batch_size: expected an int",
                 "train.optimizer.type: unknown optimizer 'Adamm'"):
        assert f"{path}: {part}" in msg, msg


def test_numbers_are_numbers(tmp_path, base):
    """YAML 1.1 reads 2e-4 as a string; the config loader uses YAML 1.2 floats."""
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(base).replace("lr: 0.01", "lr: 2e-4"))
    assert load_config(path)["train"]["optimizer"]["lr"] == 2e-4
    path.write_text(yaml.safe_dump(base).replace("lr: 0.01", "lr: '2e-4'"))  # quoted: a string
    with pytest.raises(ConfigError, match=r"train.optimizer.lr: expected float .*got str '2e-4'"):
        load_config(path)


# -- checks only a constructor can make: still named by key and file, exit 2 ----------------------
@pytest.mark.parametrize("dotted,value,match", [
    ("model.num_feat", [0, 4], r"model: .*num_feat"),
    ("datasets.train.gt_size", 7, r"datasets.train: gt_size=7 must be a multiple of scale=2"),
    ("datasets.train.root", "/no/such/folder", r"datasets.train: image folder not found: "
                                                r"/no/such/folder"),
    ("datasets.train.color", "cmyk", r"datasets.train: color must be one of \('rgb', 'y'\), "
                                     r"got 'cmyk'"),
])
def test_constructor_checks_name_the_file_and_key(tmp_path, base, capsys, dotted, value, match):
    path = write(tmp_path, set_key(base, dotted, value))
    assert train_main([str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"^error: {re.escape(str(path))}: {match}", err), err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # refused before anything was written


def test_paired_data_at_another_scale_than_the_config(tmp_path, base, capsys):
    """LR files made for x3 under a x2 config: named, with the expected size."""
    from PIL import Image
    gt, lq = tmp_path / "gt", tmp_path / "lq"
    gt.mkdir()
    lq.mkdir()
    Image.new("RGB", (24, 24)).save(gt / "a.png")
    Image.new("RGB", (8, 8)).save(lq / "a.png")  # 24 / 3, but the config says x2
    cfg = set_key(base, "datasets.train", {"type": "PairedImageDataset", "gt_root": str(gt),
                                           "lq_root": str(lq), "gt_size": 8})
    path = write(tmp_path, cfg)
    assert train_main([str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: datasets.train: {lq / 'a.png'}: LR size 8x8 should be 12x12 (HR a.png is " \
           f"24x24, scale 2)" in err, err


# -- not YAML, not a mapping, missing -------------------------------------------------------------
@pytest.mark.parametrize("text,match", [
    ("name: [unclosed\n", r"not valid YAML: .*line 1"),
    ("name: a\n\tscale: 2\n", r"not valid YAML"),
    ("- a\n- b\n", r"the top level must be a mapping of keys, got list"),
    ("name: a\nname: b\n", r"not valid YAML: .*found duplicate key 'name'"),
])
def test_unparseable_configs(tmp_path, text, match):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"(?s)^{re.escape(str(path))}: {match}"):
        load_config(path)


def test_empty_and_missing_config(tmp_path, capsys):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}: name: missing required key"):
        load_config(path)
    assert train_main([str(tmp_path / "nope.yaml")]) == 2
    assert f"error: cannot read config {tmp_path / 'nope.yaml'}: No such file or directory" in \
        capsys.readouterr().err


@pytest.mark.parametrize("dotted,value,match", [
    ("model.num_in_ch", "3", r"model.num_in_ch: expected int \(like the default 3\), got str '3'"),
    ("model.num_feat", 64, r"model.num_feat: expected tuple \(like the default \(64, 32\)\), "
                           r"got int 64"),
    ("train.optimizer.lr", "fast", r"train.optimizer.lr: expected float .*got str 'fast'"),
    ("train.optimizer.betas", 0.9, r"train.optimizer.betas: expected tuple .*got float 0.9"),
    ("train.loss.reduction", 1, r"train.loss.reduction: expected str .*got int 1"),
    ("datasets.train.use_flip", "no", r"datasets.train.use_flip: expected bool .*got str 'no'"),
])
def test_wrong_types_of_constructor_keywords(tmp_path, base, dotted, value, match):
    path, msg = errors_of(tmp_path, set_key(base, dotted, value))
    assert re.search(rf"{re.escape(str(path))}: {match}", msg), msg


@pytest.mark.parametrize("dotted,value,match", [
    # keywords whose default is None get no type from the schema: the constructor checks them
    ("datasets.train.gt_size", "8", r"datasets.train: HRImageDataset: gt_size must be a positive int, got '8'"),
    ("datasets.train.gt_size", 0, r"datasets.train: HRImageDataset: gt_size must be a positive int, got 0"),
])
def test_keywords_without_a_typed_default_are_checked_by_the_constructor(tmp_path, base, capsys,
                                                                         dotted, value, match):
    path = write(tmp_path, set_key(base, dotted, value))
    assert train_main([str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"^error: {re.escape(str(path))}: {match}", err), err


def test_yaml_nested_too_deeply(tmp_path, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text("name: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: not valid YAML: nested too "
                                          rf"deeply"):
        load_config(path)
    assert train_main([str(path)]) == 2
    assert "nested too deeply" in capsys.readouterr().err


def test_alias_expansion_does_not_blow_up_the_message(tmp_path, base):
    """YAML aliases share one object (11,111 values from 40 written, below the refusal limit); a
    value made of them in the wrong place is reported with a bounded repr."""
    laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 4))
    path = tmp_path / "cfg.yaml"
    path.write_text(laughs + yaml.safe_dump(base, sort_keys=False).replace(
        "name: tiny", "name: *a3"))
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    msg = str(exc.value)
    line = next(x for x in msg.split("\n") if ": name: " in x)
    assert line.startswith(f"  {path}: name: expected a str, got list [[[") and len(line) < 400
    assert f"{path}: a3: unknown key" in msg


@pytest.mark.parametrize("dotted,value,match", [
    ("train.losses.pixel", {"type": "MSELoss"},
     "train.loss: give the pixel loss once, as train.loss or as train.losses.pixel, not both"),
    ("train.gt_usm", ["pixel"], "train.gt_usm: the targets ['pixel'] are the sharpened GT, which "
                                "the training set must produce: set datasets.train.gt_usm: true"),
    ("train.gt_usm", ["perceptual"], "train.gt_usm: 'perceptual' is listed but there is no "
                                     "train.losses.perceptual"),
    ("train.optimizer_d", {"type": "Adam", "lr": 1e-4},
     "train.optimizer_d: set, but there is no model_d to train"),
    ("train.pretrained_d", {"path": "d.pth"}, "train.pretrained_d.path: set, but there is no model_d"),
    ("train.pretrained", {"key": "params_ema"}, "train.pretrained: key/strict are set but path is not"),
    ("train.ema_decay", 1.0, "train.ema_decay: must be < 1 (0 turns the EMA off), got 1.0"),
    ("train.ema_decay", -0.5, "train.ema_decay: must be >= 0, got -0.5"),
    ("train.net_d_iters", 0, "train.net_d_iters: must be >= 1, got 0"),
    ("train.gt_usm", ["l1"], "train.gt_usm: unknown entries ['l1']"),
])
def test_training_terms_fit_together(tmp_path, base, dotted, value, match):
    path, msg = errors_of(tmp_path, set_key(base, dotted, value))
    assert f"{path}: {match}" in msg, msg


@pytest.mark.parametrize("dotted,value,pointer", [
    ("network_g", {"type": "EDSR"}, "'network_g' is BasicSR's spelling, srgrad's key is 'model'"),
    ("train.total_iter", 10, "'total_iter' is BasicSR's spelling, srgrad's key is "
                             "'train.total_iters'"),
    ("train.optim_g", {"type": "Adam"}, "srgrad's key is 'train.optimizer'"),
    ("val.val_freq", 5, "srgrad's key is 'val.every'"),
    ("datasets.train.dataroot_gt", "x", "unknown keyword for HRImageDataset; 'dataroot_gt' is "
                                        "BasicSR's spelling, srgrad's key is 'datasets.*.gt_root'"),
])
def test_basicsr_spellings_point_to_srgrads_key(tmp_path, base, dotted, value, pointer):
    path, msg = errors_of(tmp_path, set_key(base, dotted, value))
    assert f"{path}: {dotted}: " in msg and pointer in msg, msg
    assert "srgrad-convert options" in msg and "Known " in msg, msg


def test_a_null_optional_section_is_its_defaults(tmp_path, base):
    cfg = load_config(write(tmp_path, set_key(base, "train.pretrained", None)))
    assert cfg["train"]["pretrained"] == {"path": None, "key": None, "strict": True}
    assert cfg["train"]["loss"] == {"type": "L1Loss"}  # given explicitly in `base`
    cfg = load_config(write(tmp_path, set_key(base, "train.loss", None)))
    assert cfg["train"]["loss"] == {"type": "L1Loss"}  # the default pixel loss
    assert cfg["train"]["losses"] == {"pixel": None, "perceptual": None, "gan": None, "qf": None}
