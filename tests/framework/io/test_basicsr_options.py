"""BasicSR option files -> srgrad configs: BasicSR's own train_EDSR_Mx2.yml translated, validated
and trained; every dropped key noted; untranslatable keys refused together; the semantics that
differ (filename templates, Y-channel default, Charbonnier eps, warm-up) carried over. Then GAN, EMA
and Real-ESRGAN's degradations: BasicSR's train_ESRGAN_x4.yml and train_SwinIR_SRx4_scratch.yml,
Real-ESRGAN's train_realesrnet_x4plus.yml and train_realesrgan_x4plus.yml, key by key."""
import copy
import csv

import numpy as np
import pytest
import yaml

import framework as sg
from framework import nn
from framework.io.basicsr_options import BASICSR_SPELLINGS, translate_options
from framework.engine.schema import SCHEMA, validate
from framework.engine.zoo import load_zoo
from framework.io.config import ConfigError, ConfigLoader
from framework.io.image import write_image


@pytest.fixture(autouse=True, scope="module")
def registries():
    load_zoo()  # what parse_config does before validating

# BasicSR's options/train/EDSR/train_EDSR_Mx2.yml (XPixelGroup/BasicSR master), comments dropped
EDSR_MX2 = """\
name: 201_EDSR_Mx2_f64b16_DIV2K_300k_B16G1_wandb
model_type: SRModel
scale: 2
num_gpu: 1  # set num_gpu: 0 for cpu mode
manual_seed: 10

datasets:
  train:
    name: DIV2K
    type: PairedImageDataset
    dataroot_gt: datasets/DIV2K/DIV2K_train_HR_sub
    dataroot_lq: datasets/DIV2K/DIV2K_train_LR_bicubic/X2_sub
    filename_tmpl: '{}'
    io_backend:
      type: disk

    gt_size: 96
    use_hflip: true
    use_rot: true

    num_worker_per_gpu: 6
    batch_size_per_gpu: 16
    dataset_enlarge_ratio: 100
    prefetch_mode: ~

  val:
    name: Set5
    type: PairedImageDataset
    dataroot_gt: datasets/Set5/GTmod12
    dataroot_lq: datasets/Set5/LRbicx2
    io_backend:
      type: disk

network_g:
  type: EDSR
  num_in_ch: 3
  num_out_ch: 3
  num_feat: 64
  num_block: 16
  upscale: 2
  res_scale: 1
  img_range: 255.
  rgb_mean: [0.4488, 0.4371, 0.4040]

path:
  pretrain_network_g: ~
  strict_load_g: true
  resume_state: ~

train:
  ema_decay: 0.999
  optim_g:
    type: Adam
    lr: !!float 1e-4
    weight_decay: 0
    betas: [0.9, 0.99]

  scheduler:
    type: MultiStepLR
    milestones: [200000]
    gamma: 0.5

  total_iter: 300000
  warmup_iter: -1  # no warm up

  pixel_opt:
    type: L1Loss
    loss_weight: 1.0
    reduction: mean

val:
  val_freq: !!float 5e3
  save_img: false

  metrics:
    psnr: # metric name, can be arbitrary
      type: calculate_psnr
      crop_border: 2
      test_y_channel: false

logger:
  print_freq: 100
  save_checkpoint_freq: !!float 5e3
  use_tb_logger: true
  wandb:
    project: ~
    resume_id: ~

dist_params:
  backend: nccl
  port: 29500
"""

DROPPED = ["num_gpu", "dist_params", "model_type", "datasets.train.name",
           "datasets.train.num_worker_per_gpu", "datasets.train.dataset_enlarge_ratio",
           "datasets.train.prefetch_mode", "datasets.train.io_backend", "datasets.val.name",
           "datasets.val.io_backend", "logger.use_tb_logger", "logger.wandb",
           "path.pretrain_network_g", "path.strict_load_g", "path.resume_state"]


def options(text=EDSR_MX2):
    return yaml.load(text, Loader=ConfigLoader)


def translated(change=None):
    opts = options()
    if change:
        change(opts)
    return translate_options(opts, "train_EDSR_Mx2.yml")


def test_edsr_mx2_values():
    cfg, notes = translated()
    assert cfg["name"] == "201_EDSR_Mx2_f64b16_DIV2K_300k_B16G1_wandb"
    assert cfg["scale"] == 2 and cfg["seed"] == 10
    assert cfg["model"] == {"type": "EDSR", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64,
                            "num_block": 16, "scale": 2, "res_scale": 1, "img_range": 255.0,
                            "rgb_mean": [0.4488, 0.4371, 0.4040]}
    train = cfg["train"]
    assert train["optimizer"] == {"type": "Adam", "lr": 1e-4, "weight_decay": 0,
                                  "betas": [0.9, 0.99]}
    assert train["scheduler"] == {"type": "MultiStepLR", "milestones": [200000], "gamma": 0.5}
    assert train["total_iters"] == 300000 and type(train["total_iters"]) is int
    assert train["loss"] == {"type": "L1Loss", "loss_weight": 1.0, "reduction": "mean"}
    assert train["batch_size"] == 16 and train["log_every"] == 100
    assert train["ema_decay"] == 0.999 and type(train["ema_decay"]) is float
    assert "pretrained" not in train and "model_d" not in cfg
    assert cfg["datasets"]["train"] == {
        "type": "PairedImageDataset", "gt_root": "datasets/DIV2K/DIV2K_train_HR_sub",
        "lq_root": "datasets/DIV2K/DIV2K_train_LR_bicubic/X2_sub", "filename_tmpl": "{name}",
        "gt_size": 96, "use_flip": True, "use_rot": True}
    assert cfg["datasets"]["val"] == {
        "type": "PairedImageDataset", "gt_root": "datasets/Set5/GTmod12",
        "lq_root": "datasets/Set5/LRbicx2", "filename_tmpl": "{name}"}  # BasicSR's default '{}'
    assert cfg["val"] == {"every": 5000, "save_images": False, "metrics": ["psnr"],
                          "crop_border": 2, "y_channel": False}
    assert cfg["checkpoint"] == {"every": 5000} and type(cfg["val"]["every"]) is int
    for key in DROPPED:
        assert sum(n.startswith(f"{key}: dropped, ") for n in notes) == 1, (key, notes)
    paths = [n for n in notes if n.startswith("paths used as written")]
    assert len(paths) == 1 and "datasets.val.lq_root=datasets/Set5/LRbicx2" in paths[0]
    # the translation is a valid srgrad config as it stands (defaults filled in)
    resolved = validate(copy.deepcopy(cfg), "translated")
    assert resolved["val"]["y_channel"] is False and resolved["train"]["optimizer"]["lr"] == 1e-4


def _write_pairs(root, names, hr, scale, rng):
    for name in names:
        img = rng.uniform(0.2, 0.8, (3, 1, 1)) + 0.1 * rng.standard_normal((3, hr, hr))
        write_image(root / "gt" / f"{name}.png", np.clip(img, 0, 1))
        small = img.reshape(3, hr // scale, scale, hr // scale, scale).mean(axis=(2, 4))
        write_image(root / "lq" / f"{name}.png", np.clip(small, 0, 1))


def test_edsr_mx2_trains(tmp_path):
    """The translated file, with the data roots pointed at small folders and tiny sizes, trains 3
    iterations through the real Trainer and validates on the Y-less PSNR BasicSR asked for."""
    rng = np.random.default_rng(0)
    _write_pairs(tmp_path / "train", ["0001", "0002", "0003"], 24, 2, rng)
    _write_pairs(tmp_path / "val", ["baby", "bird"], 12, 2, rng)
    cfg, _ = translated()
    for split in ("train", "val"):
        cfg["datasets"][split].update(gt_root=str(tmp_path / split / "gt"),
                                      lq_root=str(tmp_path / split / "lq"))
    cfg["datasets"]["train"]["gt_size"] = 8
    cfg["model"].update(num_feat=4, num_block=1)
    cfg["train"].update(batch_size=2, total_iters=3, log_every=1)
    cfg["train"]["scheduler"]["milestones"] = [2]
    cfg.update(run_root=str(tmp_path / "runs"), val={**cfg["val"], "every": 3},
               checkpoint={"every": 3})
    cfg = validate(cfg, "translated")
    from framework.engine import Trainer
    trainer = Trainer(cfg, progress=False)
    result = trainer.fit()
    assert result["iteration"] == 3
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.5e-4)  # gamma at 2
    with open(tmp_path / "runs" / cfg["name"] / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert "psnr_rgb" in rows[-1] and float(rows[-1]["psnr_rgb"]) > 10  # RGB, not Y


def test_untranslatable_keys_are_refused_together():
    def bad(opts):
        opts["train"]["ldl_opt"] = {"type": "L1Loss", "loss_weight": 1.0}
        opts["train"]["perceptual_opt"] = {"type": "LPIPSLoss", "loss_weight": 1.0}
        opts["train"]["pixel_opt"]["type"] = "WeightedTVLoss"
        opts["datasets"]["train"]["io_backend"] = {"type": "lmdb"}
        opts["datasets"]["val"]["type"] = "RealESRGANDataset"
        opts["train"]["total_iter"] = 2.5e5 + 0.5
        opts["val"]["metrics"]["niqe"] = {"type": "calculate_niqe", "crop_border": 2}
        opts["frobnicate"] = 1

    with pytest.raises(ConfigError) as info:
        translated(bad)
    lines = str(info.value).splitlines()
    assert lines[0] == "train_EDSR_Mx2.yml: cannot translate these BasicSR options:"
    expected = {"train.ldl_opt": "LDL", "train.perceptual_opt.type": "'LPIPSLoss': srgrad's are "
                "PerceptualLoss", "train.pixel_opt.type": "'WeightedTVLoss'",
                "datasets.train.io_backend": "lmdb", "train.total_iter": "whole number",
                "datasets.val.type": "validation needs LR images",
                "val.metrics.niqe.type": "calculate_niqe", "frobnicate": "not a BasicSR option"}
    assert len(lines) == 1 + len(expected)
    for key, why in expected.items():
        assert any(line.startswith(f"  {key}: ") and why in line for line in lines), (key, lines)


def test_empty_untranslatable_keys_are_only_dropped():
    cfg, notes = translated(lambda o: o["train"].update(perceptual_opt=None, gan_opt=None))
    assert "train.perceptual_opt: dropped, empty" in notes
    assert "train.gan_opt: dropped, empty" in notes


@pytest.mark.parametrize("tmpl, out", [("{}", "{name}"), ("{}x2", "{name}x2"),
                                       ("{0}_x4", "{name}_x4"), ("{}_{{}}", "{name}_{{}}")])
def test_filename_templates(tmpl, out):
    cfg, _ = translated(lambda o: o["datasets"]["train"].update(filename_tmpl=tmpl))
    assert cfg["datasets"]["train"]["filename_tmpl"] == out
    assert out.format(name="0001", scale=2) == tmpl.format("0001")  # the same LR file


@pytest.mark.parametrize("tmpl", ["{basename}x2", "{:>4}", "{", "{}{}x", "{!r}"])
def test_bad_filename_templates(tmpl):
    with pytest.raises(ConfigError, match="datasets.train.filename_tmpl: .*expected one '{}'"):
        translated(lambda o: o["datasets"]["train"].update(filename_tmpl=tmpl))


@pytest.mark.parametrize("eps", [None, 1e-6, 1e-3])
def test_charbonnier_eps_gives_the_same_loss(eps):
    def change(o):
        o["train"]["pixel_opt"] = {"type": "CharbonnierLoss", "loss_weight": 2.0,
                                   "reduction": "mean", **({} if eps is None else {"eps": eps})}

    cfg, notes = translated(change)
    loss = cfg["train"]["loss"]
    basicsr_eps = 1e-12 if eps is None else eps
    assert loss["eps"] == pytest.approx(basicsr_eps ** 0.5, rel=1e-15)
    assert any(n.startswith("train.pixel_opt.eps:") for n in notes)
    rng = np.random.default_rng(0)
    pred, target = rng.standard_normal((2, 2, 3, 5, 5)) * 1e-3
    basicsr = 2.0 * np.mean(np.sqrt((pred - target) ** 2 + basicsr_eps))
    ours = nn.CharbonnierLoss(reduction="mean", loss_weight=2.0, eps=loss["eps"])(
        sg.tensor(pred), sg.tensor(target))
    assert float(ours.data) == pytest.approx(basicsr, rel=1e-12)


def test_schedulers_and_warmup():
    def cosine(o):
        o["train"]["scheduler"] = {"type": "CosineAnnealingRestartLR",
                                   "periods": [250000, 250000], "restart_weights": [1, 0.5],
                                   "eta_min": 1e-7}
        o["train"]["warmup_iter"] = 100

    cfg, notes = translated(cosine)
    assert cfg["train"]["scheduler"] == {"type": "CosineAnnealingRestartLR",
                                         "periods": [250000, 250000], "restart_weights": [1, 0.5],
                                         "eta_min": 1e-7, "warmup_iters": 100}
    assert any(n.startswith("train.warmup_iter ->") for n in notes)
    cfg, _ = translated(lambda o: (o["train"].pop("scheduler"), o["train"].update(warmup_iter=50)))
    assert cfg["train"]["scheduler"] == {"type": "LinearWarmupLR", "warmup_iters": 50}
    cfg, _ = translated(lambda o: o["train"]["scheduler"].update(type="MultiStepRestartLR",
                                                                 restarts=[0], restart_weights=[1]))
    assert cfg["train"]["scheduler"] == {"type": "MultiStepLR", "milestones": [200000],
                                         "gamma": 0.5}
    validate(cfg, "translated")
    for key, change in (("restarts", dict(restarts=[0, 100000], restart_weights=[1, 1])),
                        ("type", dict(type="CosineAnnealingRestartCyclicLR"))):
        with pytest.raises(ConfigError, match=f"train.scheduler.{key}: "):
            translated(lambda o: o["train"]["scheduler"].update(change))


def test_pretrained_weights():
    cfg, notes = translated(lambda o: o["path"].update(
        pretrain_network_g="experiments/pretrained_models/EDSR_Mx2.pth", param_key_g="params_ema",
        strict_load_g=False))
    assert cfg["train"]["pretrained"] == {"path": "experiments/pretrained_models/EDSR_Mx2.pth",
                                          "key": "params_ema", "strict": False}
    assert "train.pretrained.path=experiments/pretrained_models/EDSR_Mx2.pth" in notes[-1]
    cfg, _ = translated(lambda o: o["path"].update(pretrain_network_g="w.pth"))
    assert cfg["train"]["pretrained"] == {"path": "w.pth", "key": "params", "strict": True}


def test_metrics_and_extra_validation_sets():
    def change(o):
        o["val"]["metrics"] = {"psnr": {"type": "calculate_psnr", "crop_border": 4,
                                        "test_y_channel": True, "better": "higher"},
                               "ssim": {"type": "calculate_ssim", "crop_border": 4,
                                        "test_y_channel": True}}
        o["datasets"]["val_2"] = dict(o["datasets"]["val"], name="Set14")
        o["datasets"]["train"]["color"] = "y"

    cfg, notes = translated(change)
    assert cfg["val"]["metrics"] == ["psnr", "ssim"] and cfg["val"]["y_channel"] is True
    assert cfg["val"]["crop_border"] == 4 and cfg["datasets"]["train"]["color"] == "y"
    assert any(n.startswith("datasets.val_2: dropped") for n in notes)
    assert any(n.startswith("val.metrics.psnr.better: dropped") for n in notes)
    cfg, _ = translated(lambda o: o["val"]["metrics"]["psnr"].pop("test_y_channel"))
    assert cfg["val"]["y_channel"] is False  # BasicSR's default, written out
    with pytest.raises(ConfigError, match="one crop_border"):
        translated(lambda o: o["val"]["metrics"].update(
            ssim={"type": "calculate_ssim", "crop_border": 3}))


def test_no_val_section_means_no_validation():
    cfg, notes = translated(lambda o: o.pop("val"))
    assert cfg["datasets"]["val"] is None and "val" not in cfg
    assert any(n.startswith("datasets.val: dropped") for n in notes)


def test_translation_is_pure():
    opts = options()
    before = copy.deepcopy(opts)
    translate_options(opts)
    assert opts == before
    with pytest.raises(ConfigError, match="a mapping"):
        translate_options(["not", "a", "mapping"], "x.yml")


def test_spellings_point_at_srgrad_keys():
    assert BASICSR_SPELLINGS["total_iter"] == "train.total_iters"
    assert BASICSR_SPELLINGS["network_g"] == "model"
    assert BASICSR_SPELLINGS["dataroot_gt"] == "datasets.*.gt_root"
    assert BASICSR_SPELLINGS["network_d"] == "model_d"
    assert BASICSR_SPELLINGS["optim_d"] == "train.optimizer_d"
    assert BASICSR_SPELLINGS["gan_opt"] == "train.losses.gan"
    assert BASICSR_SPELLINGS["perceptual_opt"] == "train.losses.perceptual"
    assert BASICSR_SPELLINGS["pretrain_network_d"] == "train.pretrained_d.path"
    assert BASICSR_SPELLINGS["param_key_d"] == "train.pretrained_d.key"
    assert BASICSR_SPELLINGS["strict_load_d"] == "train.pretrained_d.strict"
    assert {BASICSR_SPELLINGS[k] for k in ("l1_gt_usm", "percep_gt_usm", "gan_gt_usm")} == \
        {"train.gt_usm"}
    for dotted in BASICSR_SPELLINGS.values():
        node = SCHEMA
        for part in dotted.replace("*", "train").split("."):
            if not isinstance(node, dict):  # keywords of a type: block
                break
            assert part in node, dotted
            node = node[part]
