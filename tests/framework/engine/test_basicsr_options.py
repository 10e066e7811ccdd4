"""BasicSR option files -> srgrad configs: BasicSR's own train_EDSR_Mx2.yml translated, validated
and trained; every dropped key noted; untranslatable keys refused together; the semantics that
differ (filename templates, Y-channel default, Charbonnier eps, warm-up) carried over. Then GAN, EMA
and Real-ESRGAN's degradations: BasicSR's train_ESRGAN_x4.yml and train_SwinIR_SRx4_scratch.yml,
Real-ESRGAN's train_realesrnet_x4plus.yml and train_realesrgan_x4plus.yml, key by key."""
import copy
import csv
import dataclasses

import numpy as np
import pytest
import yaml

import framework as sg
from framework import nn
from framework.engine.config.basicsr_options import BASICSR_SPELLINGS
from framework.engine.config.options import translate_options
from framework.engine.config.preflight import check_training_files
from framework.engine.config.schema import SCHEMA, validate
from framework.engine.inference.zoo import load_zoo
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
           "datasets.val.io_backend", "logger.wandb",
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
    assert train["batch_size"] == 16 and train["log_every"] == 100 and train["tensorboard"] is True
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
    assert trainer.recipe.optimizer.param_groups[0]["lr"] == pytest.approx(0.5e-4)  # gamma at 2
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
        opts["frobnicate"] = 1

    with pytest.raises(ConfigError) as info:
        translated(bad)
    lines = str(info.value).splitlines()
    assert lines[0] == "train_EDSR_Mx2.yml: cannot translate these BasicSR options:"
    expected = {"train.ldl_opt": "LDL", "train.perceptual_opt.type": "'LPIPSLoss': srgrad's are "
                "PerceptualLoss", "train.pixel_opt.type": "'WeightedTVLoss'",
                "datasets.train.io_backend": "lmdb", "train.total_iter": "whole number",
                "datasets.val.type": "validation needs LR images",
                "frobnicate": "not a BasicSR option"}
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


# -- GAN, EMA and Real-ESRGAN ----------------------------------------------------------------------
# Real-ESRGAN's options/train_realesrnet_x4plus.yml (xinntao/Real-ESRGAN master), comments dropped;
# train_realesrgan_x4plus.yml repeats its degradation keys and its datasets block word for word
REAL_DEGRADATION = """\
resize_prob: [0.2, 0.7, 0.1]
resize_range: [0.15, 1.5]
gaussian_noise_prob: 0.5
noise_range: [1, 30]
poisson_scale_range: [0.05, 3]
gray_noise_prob: 0.4
jpeg_range: [30, 95]

second_blur_prob: 0.8
resize_prob2: [0.3, 0.4, 0.3]
resize_range2: [0.3, 1.2]
gaussian_noise_prob2: 0.5
noise_range2: [1, 25]
poisson_scale_range2: [0.05, 2.5]
gray_noise_prob2: 0.4
jpeg_range2: [30, 95]

gt_size: 256
queue_size: 180
"""
REAL_DATASETS = """\
datasets:
  train:
    name: DF2K+OST
    type: RealESRGANDataset
    dataroot_gt: datasets/DF2K
    meta_info: datasets/DF2K/meta_info/meta_info_DF2Kmultiscale+OST_sub.txt
    io_backend:
      type: disk

    blur_kernel_size: 21
    kernel_list: ['iso', 'aniso', 'generalized_iso', 'generalized_aniso', 'plateau_iso', 'plateau_aniso']
    kernel_prob: [0.45, 0.25, 0.12, 0.03, 0.12, 0.03]
    sinc_prob: 0.1
    blur_sigma: [0.2, 3]
    betag_range: [0.5, 4]
    betap_range: [1, 2]

    blur_kernel_size2: 21
    kernel_list2: ['iso', 'aniso', 'generalized_iso', 'generalized_aniso', 'plateau_iso', 'plateau_aniso']
    kernel_prob2: [0.45, 0.25, 0.12, 0.03, 0.12, 0.03]
    sinc_prob2: 0.1
    blur_sigma2: [0.2, 1.5]
    betag_range2: [0.5, 4]
    betap_range2: [1, 2]

    final_sinc_prob: 0.8

    gt_size: 256
    use_hflip: True
    use_rot: False

    use_shuffle: true
    num_worker_per_gpu: 5
    batch_size_per_gpu: 12
    dataset_enlarge_ratio: 1
    prefetch_mode: ~

network_g:
  type: RRDBNet
  num_in_ch: 3
  num_out_ch: 3
  num_feat: 64
  num_block: 23
  num_grow_ch: 32
"""
REAL_TAIL = """\
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
REALESRNET_X4PLUS = """\
name: train_RealESRNetx4plus_1000k_B12G4_fromESRGAN
model_type: RealESRNetModel
scale: 4
num_gpu: 4
manual_seed: 0

gt_usm: True
""" + REAL_DEGRADATION + REAL_DATASETS + """
path:
  pretrain_network_g: experiments/pretrained_models/ESRGAN_SRx4_DF2KOST_official-ff704c30.pth
  param_key_g: params_ema
  strict_load_g: true
  resume_state: ~

train:
  ema_decay: 0.999
  optim_g:
    type: Adam
    lr: !!float 2e-4
    weight_decay: 0
    betas: [0.9, 0.99]

  scheduler:
    type: MultiStepLR
    milestones: [1000000]
    gamma: 0.5

  total_iter: 1000000
  warmup_iter: -1  # no warm up

  pixel_opt:
    type: L1Loss
    loss_weight: 1.0
    reduction: mean
""" + REAL_TAIL

REALESRGAN_X4PLUS = """\
name: train_RealESRGANx4plus_400k_B12G4_fromRealESRNet
model_type: RealESRGANModel
scale: 4
num_gpu: 4
manual_seed: 0

l1_gt_usm: True
percep_gt_usm: True
gan_gt_usm: False
""" + REAL_DEGRADATION + REAL_DATASETS + """
network_d:
  type: UNetDiscriminatorSN
  num_in_ch: 3
  num_feat: 64
  skip_connection: True

path:
  pretrain_network_g: experiments/pretrained_models/RealESRNet_x4plus.pth
  param_key_g: params_ema
  strict_load_g: true
  resume_state: ~

train:
  ema_decay: 0.999
  optim_g:
    type: Adam
    lr: !!float 1e-4
    weight_decay: 0
    betas: [0.9, 0.99]
  optim_d:
    type: Adam
    lr: !!float 1e-4
    weight_decay: 0
    betas: [0.9, 0.99]

  scheduler:
    type: MultiStepLR
    milestones: [400000]
    gamma: 0.5

  total_iter: 400000
  warmup_iter: -1  # no warm up

  pixel_opt:
    type: L1Loss
    loss_weight: 1.0
    reduction: mean
  perceptual_opt:
    type: PerceptualLoss
    layer_weights:
      'conv1_2': 0.1
      'conv2_2': 0.1
      'conv3_4': 1
      'conv4_4': 1
      'conv5_4': 1
    vgg_type: vgg19
    use_input_norm: true
    perceptual_weight: !!float 1.0
    style_weight: 0
    range_norm: false
    criterion: l1
  gan_opt:
    type: GANLoss
    gan_type: vanilla
    real_label_val: 1.0
    fake_label_val: 0.0
    loss_weight: !!float 1e-1

  net_d_iters: 1
  net_d_init_iters: 0
""" + REAL_TAIL

# BasicSR's options/train/ESRGAN/train_ESRGAN_x4.yml, comments dropped
ESRGAN_X4 = """\
name: 052_ESRGAN_x4_f64b23_DIV2K_400k_B16G1_051pretrain_wandb
model_type: ESRGANModel
scale: 4
num_gpu: 1
manual_seed: 0

datasets:
  train:
    name: DIV2K
    type: PairedImageDataset
    dataroot_gt: datasets/DIV2K/DIV2K_train_HR_sub
    dataroot_lq: datasets/DIV2K/DIV2K_train_LR_bicubic/X4_sub
    filename_tmpl: '{}'
    io_backend:
      type: disk

    gt_size: 128
    use_hflip: true
    use_rot: true

    num_worker_per_gpu: 6
    batch_size_per_gpu: 16
    dataset_enlarge_ratio: 100
    prefetch_mode: ~

  val:
    name: Set14
    type: PairedImageDataset
    dataroot_gt: datasets/Set14/GTmod12
    dataroot_lq: datasets/Set14/LRbicx4
    io_backend:
      type: disk

network_g:
  type: RRDBNet
  num_in_ch: 3
  num_out_ch: 3
  num_feat: 64
  num_block: 23

network_d:
  type: VGGStyleDiscriminator
  num_in_ch: 3
  num_feat: 64

path:
  pretrain_network_g: experiments/051_RRDBNet_PSNR_x4_f64b23_DIV2K_1000k_B16G1_wandb/models/net_g_1000000.pth
  strict_load_g: true
  resume_state: ~

train:
  ema_decay: 0.999
  optim_g:
    type: Adam
    lr: !!float 1e-4
    weight_decay: 0
    betas: [0.9, 0.99]
  optim_d:
    type: Adam
    lr: !!float 1e-4
    weight_decay: 0
    betas: [0.9, 0.99]

  scheduler:
    type: MultiStepLR
    milestones: [50000, 100000, 200000, 300000]
    gamma: 0.5

  total_iter: 400000
  warmup_iter: -1  # no warm up

  pixel_opt:
    type: L1Loss
    loss_weight: !!float 1e-2
    reduction: mean
  perceptual_opt:
    type: PerceptualLoss
    layer_weights:
      'conv5_4': 1  # before relu
    vgg_type: vgg19
    use_input_norm: true
    range_norm: false
    perceptual_weight: 1.0
    style_weight: 0
    criterion: l1
  gan_opt:
    type: GANLoss
    gan_type: vanilla
    real_label_val: 1.0
    fake_label_val: 0.0
    loss_weight: !!float 5e-3

  net_d_iters: 1
  net_d_init_iters: 0

val:
  val_freq: !!float 5e3
  save_img: true

  metrics:
    psnr:
      type: calculate_psnr
      crop_border: 4
      test_y_channel: false
""" + REAL_TAIL

# BasicSR's options/train/SwinIR/train_SwinIR_SRx4_scratch.yml (its name: is the brief's
# train_SwinIR_SRx4_scratch_P48W8_DIV2K_500k_B4G8), comments dropped
SWINIR_X4 = """\
name: train_SwinIR_SRx4_scratch_P48W8_DIV2K_500k_B4G8
model_type: SwinIRModel
scale: 4
num_gpu: auto
manual_seed: 0

datasets:
  train:
    name: DIV2K
    type: PairedImageDataset
    dataroot_gt: datasets/DF2K/DIV2K_train_HR_sub
    dataroot_lq: datasets/DF2K/DIV2K_train_LR_bicubic_X4_sub
    meta_info_file: basicsr/data/meta_info/meta_info_DIV2K800sub_GT.txt
    filename_tmpl: '{}'
    io_backend:
      type: disk

    gt_size: 192
    use_hflip: true
    use_rot: true

    num_worker_per_gpu: 6
    batch_size_per_gpu: 4
    dataset_enlarge_ratio: 1
    prefetch_mode: ~

  val:
    name: Set5
    type: PairedImageDataset
    dataroot_gt: datasets/Set5/GTmod12
    dataroot_lq: datasets/Set5/LRbicx4
    io_backend:
      type: disk

network_g:
  type: SwinIR
  upscale: 4
  in_chans: 3
  img_size: 48
  window_size: 8
  img_range: 1.
  depths: [6, 6, 6, 6, 6, 6]
  embed_dim: 180
  num_heads: [6, 6, 6, 6, 6, 6]
  mlp_ratio: 2
  upsampler: 'pixelshuffle'
  resi_connection: '1conv'

path:
  pretrain_network_g: ~
  strict_load_g: true
  resume_state: ~

train:
  ema_decay: 0.999
  optim_g:
    type: Adam
    lr: !!float 2e-4
    weight_decay: 0
    betas: [0.9, 0.99]

  scheduler:
    type: MultiStepLR
    milestones: [250000, 400000, 450000, 475000]
    gamma: 0.5

  total_iter: 500000
  warmup_iter: -1  # no warm up

  pixel_opt:
    type: L1Loss
    loss_weight: 1.0
    reduction: mean

val:
  val_freq: !!float 5e3
  save_img: false

  metrics:
    psnr:
      type: calculate_psnr
      crop_border: 4
      test_y_channel: false
""" + REAL_TAIL

KERNELS = ["iso", "aniso", "generalized_iso", "generalized_aniso", "plateau_iso", "plateau_aniso"]
KERNEL_PROB = [0.45, 0.25, 0.12, 0.03, 0.12, 0.03]
# Real-ESRGAN's keys and values, as srgrad's RealESRGANDataset takes them: the kernel keys from its
# datasets.train block, the others from its top level
REAL_DATASET = {
    "type": "RealESRGANDataset", "root": "datasets/DF2K",
    "blur_kernel_size": 21, "kernel_list": KERNELS, "kernel_prob": KERNEL_PROB, "sinc_prob": 0.1,
    "blur_sigma": [0.2, 3], "betag_range": [0.5, 4], "betap_range": [1, 2],
    "blur_kernel_size2": 21, "kernel_list2": KERNELS, "kernel_prob2": KERNEL_PROB,
    "sinc_prob2": 0.1, "blur_sigma2": [0.2, 1.5], "betag_range2": [0.5, 4], "betap_range2": [1, 2],
    "final_sinc_prob": 0.8,
    "resize_prob": [0.2, 0.7, 0.1], "resize_range": [0.15, 1.5], "gaussian_noise_prob": 0.5,
    "noise_range": [1, 30], "poisson_scale_range": [0.05, 3], "gray_noise_prob": 0.4,
    "jpeg_range": [30, 95], "second_blur_prob": 0.8, "resize_prob2": [0.3, 0.4, 0.3],
    "resize_range2": [0.3, 1.2], "gaussian_noise_prob2": 0.5, "noise_range2": [1, 25],
    "poisson_scale_range2": [0.05, 2.5], "gray_noise_prob2": 0.4, "jpeg_range2": [30, 95],
    "gt_size": 256, "use_flip": True, "use_rot": False, "gt_usm": True}
ADAM = {"type": "Adam", "weight_decay": 0, "betas": [0.9, 0.99]}
VGG_NOTE = ("train.perceptual_opt -> train.losses.perceptual: srgrad's PerceptualLoss reads "
            "torchvision's VGG19 weights (vgg19-dcbb9e9d.pth) from a file")


def translate(text, name="options.yml", change=None):
    opts = options(text)
    if change:
        change(opts)
    return translate_options(opts, name)


def dropped(notes, key):
    """The one note dropping `key`."""
    found = [n for n in notes if n.startswith(f"{key}: dropped, ")]
    assert len(found) == 1, (key, notes)
    return found[0]


# stand-ins with BasicSR's constructor keywords, registered only while a test runs and only when
# the real class is missing on this branch (another helper adds them this session)
class _GANLoss:
    def __init__(self, gan_type, real_label_val=1.0, fake_label_val=0.0, loss_weight=1.0):
        pass

    def forward(self, input, target_is_real, is_disc=False):
        pass


class _PerceptualLoss:
    def __init__(self, layer_weights, vgg_type="vgg19", use_input_norm=True, range_norm=False,
                 perceptual_weight=1.0, style_weight=0.0, criterion="l1", weights=None):
        pass


class _VGGStyleDiscriminator:
    def __init__(self, num_in_ch, num_feat, input_size=128):
        pass


class _UNetDiscriminatorSN:
    def __init__(self, num_in_ch, num_feat=64, skip_connection=True):
        pass


class _SwinIR:
    def __init__(self, img_size=64, patch_size=1, in_chans=3, embed_dim=96, depths=(6, 6, 6, 6),
                 num_heads=(6, 6, 6, 6), window_size=7, mlp_ratio=4.0, qkv_bias=True,
                 qk_scale=None, drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.1, ape=False,
                 patch_norm=True, scale=2, img_range=1.0, upsampler="", resi_connection="1conv"):
        pass


STAND_INS = {"GANLoss": ("LOSSES", _GANLoss), "PerceptualLoss": ("LOSSES", _PerceptualLoss),
             "VGGStyleDiscriminator": ("MODELS", _VGGStyleDiscriminator),
             "UNetDiscriminatorSN": ("MODELS", _UNetDiscriminatorSN), "SwinIR": ("MODELS", _SwinIR)}
FILES = {"realesrnet": (REALESRNET_X4PLUS, ()),
         "realesrgan": (REALESRGAN_X4PLUS, ("GANLoss", "PerceptualLoss", "UNetDiscriminatorSN")),
         "esrgan": (ESRGAN_X4, ("GANLoss", "PerceptualLoss", "VGGStyleDiscriminator")),
         "swinir": (SWINIR_X4, ("SwinIR",))}


def _registry(kind):
    from framework import registry
    return getattr(registry, kind)


def _missing(names):
    load_zoo()
    return [n for n in names if n not in _registry(STAND_INS[n][0])]


@pytest.mark.parametrize("which", list(FILES))
def test_translations_validate_with_stand_ins(which, monkeypatch, tmp_path):
    """The schema accepts each translation (its cross-checks of model_d, the loss terms, the
    optimizers and gt_usm included); missing registrations are stood in by BasicSR's signatures."""
    text, needs = FILES[which]
    monkeypatch.delenv("SRGRAD_VGG19_WEIGHTS", raising=False)  # not needed to validate
    for name in _missing(needs):
        kind, cls = STAND_INS[name]
        monkeypatch.setitem(_registry(kind)._items, name, cls)
    cfg, _ = translate(text)
    resolved = validate(copy.deepcopy(cfg), which)
    assert resolved["train"]["ema_decay"] == 0.999


@pytest.mark.parametrize("which", list(FILES))
def test_translations_validate_with_the_real_classes(which, monkeypatch, tmp_path):
    text, needs = FILES[which]
    if _missing(needs):
        pytest.skip(f"not registered on this branch yet: {', '.join(_missing(needs))}")
    cfg = translate(text)[0]
    # without VGG weights on disk too: srgrad-train asks for them when it starts (preflight)
    monkeypatch.delenv("SRGRAD_VGG19_WEIGHTS", raising=False)
    resolved = validate(cfg, which)
    if (cfg.get("train", {}).get("losses") or {}).get("perceptual"):
        with pytest.raises(ConfigError, match="train.losses.perceptual: PerceptualLoss: no VGG19 "
                                              "weights given.*SRGRAD_VGG19_WEIGHTS=/path/to/"
                                              "vgg19-dcbb9e9d.pth"):
            check_training_files(resolved, which)
        _vgg_weights_present(monkeypatch, tmp_path)
    check_training_files(resolved, which)


def _vgg_weights_present(monkeypatch, tmp_path):
    """srgrad-train's check only asks that the file exists (it is read when the loss is built)."""
    path = tmp_path / "vgg19-dcbb9e9d.pth"
    path.write_bytes(b"")
    monkeypatch.setenv("SRGRAD_VGG19_WEIGHTS", str(path))


def test_realesrnet_x4plus():
    cfg, notes = translate(REALESRNET_X4PLUS, "train_realesrnet_x4plus.yml")
    assert cfg["name"] == "train_RealESRNetx4plus_1000k_B12G4_fromESRGAN"
    assert cfg["scale"] == 4 and cfg["seed"] == 0 and "model_d" not in cfg
    assert cfg["model"] == {"type": "RRDBNet", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64,
                            "num_block": 23, "num_grow_ch": 32}
    assert cfg["datasets"] == {"train": REAL_DATASET}
    assert cfg["train"] == {
        "total_iters": 1000000, "optimizer": {**ADAM, "lr": 2e-4},
        "scheduler": {"type": "MultiStepLR", "milestones": [1000000], "gamma": 0.5},
        "loss": {"type": "L1Loss", "loss_weight": 1.0, "reduction": "mean"}, "ema_decay": 0.999,
        "batch_size": 12, "gt_usm": ["pixel"], "log_every": 100, "tensorboard": True,
        "pretrained": {"path": "experiments/pretrained_models/ESRGAN_SRx4_DF2KOST_official-"
                               "ff704c30.pth", "key": "params_ema", "strict": True}}
    assert cfg["checkpoint"] == {"every": 5000} and "val" not in cfg
    assert "pool" in dropped(notes, "queue_size")
    assert "subfolders" in dropped(notes, "datasets.train.meta_info")
    assert "top-level gt_size" in dropped(notes, "datasets.train.gt_size")
    for key in ("num_gpu", "dist_params", "model_type", "datasets.train.use_shuffle",
                "datasets.train.io_backend", "path.resume_state"):
        dropped(notes, key)
    assert not any(n.startswith("train.ema_decay") for n in notes)  # key params_ema: as BasicSR
    # the translation is what srgrad-convert writes, and it reads back as a valid config
    from framework.engine.config.schema import parse_config
    from framework.io.config import dump_config
    resolved = parse_config(dump_config(cfg), "written.yaml", do_imports=False)
    assert resolved["datasets"]["train"] == REAL_DATASET
    assert resolved["train"]["gt_usm"] == ["pixel"]


def test_every_degradation_key_reaches_the_dataset(tmp_path):
    """Each of Real-ESRGAN's keys lands in datasets.train with its value, wherever Real-ESRGAN's
    file keeps it, and srgrad's RealESRGANDataset built from the block holds exactly those
    values."""
    from framework.data.realesrgan import REDUX_KEYS, DegradationOptions
    from framework.registry import DATASETS
    opts = options(REALESRNET_X4PLUS)
    block = translate(REALESRNET_X4PLUS)[0]["datasets"]["train"]
    fields = [f.name for f in dataclasses.fields(DegradationOptions) if f.name not in REDUX_KEYS]
    in_dataset = [k for k in fields if k in opts["datasets"]["train"]]
    at_top = [k for k in fields if k in opts]
    assert len(in_dataset) == 15 and len(at_top) == 15 and not set(in_dataset) & set(at_top)
    for key in in_dataset:
        assert block[key] == opts["datasets"]["train"][key], key
    for key in at_top:
        assert block[key] == opts[key], key
    write_image(tmp_path / "0001.png", np.full((3, 8, 8), 0.5))
    dataset = DATASETS.build({**block, "root": str(tmp_path)}, scale=4)
    for key in fields:
        value, want = getattr(dataset.opts, key), block[key]
        if key.startswith("kernel_list"):
            assert list(value) == want, key
        else:
            assert np.array_equal(np.asarray(value, float), np.asarray(want, float)), key
    assert dataset.gt_size == 256 and dataset.gt_usm is True and dataset.crop_pad_size == 400
    assert dataset.use_flip is True and dataset.use_rot is False


def test_realesrgan_x4plus():
    cfg, notes = translate(REALESRGAN_X4PLUS, "train_realesrgan_x4plus.yml")
    assert cfg["name"] == "train_RealESRGANx4plus_400k_B12G4_fromRealESRNet"
    assert cfg["model_d"] == {"type": "UNetDiscriminatorSN", "num_in_ch": 3, "num_feat": 64,
                              "skip_connection": True}
    assert cfg["datasets"] == {"train": REAL_DATASET}  # LR degraded from the sharpened GT
    train = cfg["train"]
    scheduler = {"type": "MultiStepLR", "milestones": [400000], "gamma": 0.5}
    assert train == {
        "total_iters": 400000, "optimizer": {**ADAM, "lr": 1e-4}, "scheduler": scheduler,
        "losses": {
            "pixel": {"type": "L1Loss", "loss_weight": 1.0, "reduction": "mean"},
            "perceptual": {"type": "PerceptualLoss", "layer_weights": {
                "conv1_2": 0.1, "conv2_2": 0.1, "conv3_4": 1, "conv4_4": 1, "conv5_4": 1},
                "vgg_type": "vgg19", "use_input_norm": True, "perceptual_weight": 1.0,
                "style_weight": 0, "range_norm": False, "criterion": "l1"},
            "gan": {"type": "GANLoss", "gan_type": "vanilla", "real_label_val": 1.0,
                    "fake_label_val": 0.0, "loss_weight": 0.1}},
        "ema_decay": 0.999, "optimizer_d": {**ADAM, "lr": 1e-4}, "scheduler_d": scheduler,
        "net_d_iters": 1, "net_d_init_iters": 0, "batch_size": 12,
        "gt_usm": ["pixel", "perceptual"], "log_every": 100, "tensorboard": True,  # gan_gt_usm: False
        "pretrained": {"path": "experiments/pretrained_models/RealESRNet_x4plus.pth",
                       "key": "params_ema", "strict": True}}
    assert train["scheduler_d"] is not train["scheduler"]
    assert "pretrained_d" not in train
    assert any(n.startswith(VGG_NOTE) and "SRGRAD_VGG19_WEIGHTS" in n for n in notes)
    assert any(n.startswith("train.scheduler -> train.scheduler and train.scheduler_d")
               for n in notes)
    assert not any("relativistic" in n for n in notes)  # RealESRGANModel is an SRGANModel
    dropped(notes, "queue_size")


def test_finetune_realesrgan_loads_the_discriminator():
    """Real-ESRGAN's finetune_realesrgan_x4plus.yml: train_realesrgan_x4plus.yml plus these keys."""
    def finetune(o):
        o["path"].update(pretrain_network_d="experiments/pretrained_models/RealESRGAN_x4plus_netD"
                                            ".pth", param_key_d="params", strict_load_d=True)

    cfg, notes = translate(REALESRGAN_X4PLUS, change=finetune)
    assert cfg["train"]["pretrained_d"] == {
        "path": "experiments/pretrained_models/RealESRGAN_x4plus_netD.pth", "key": "params",
        "strict": True}
    assert "train.pretrained_d.path=experiments/pretrained_models/RealESRGAN_x4plus_netD.pth" \
        in notes[-1]
    cfg, _ = translate(REALESRGAN_X4PLUS, change=lambda o: (finetune(o), o["path"].pop(
        "param_key_d"), o["path"].update(strict_load_d=False)))
    assert cfg["train"]["pretrained_d"]["key"] == "params"  # BasicSR's default
    assert cfg["train"]["pretrained_d"]["strict"] is False


def test_esrgan_x4():
    cfg, notes = translate(ESRGAN_X4, "train_ESRGAN_x4.yml")
    assert cfg["model"] == {"type": "RRDBNet", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64,
                            "num_block": 23}
    assert cfg["model_d"] == {"type": "VGGStyleDiscriminator", "num_in_ch": 3, "num_feat": 64}
    assert cfg["datasets"]["train"] == {
        "type": "PairedImageDataset", "gt_root": "datasets/DIV2K/DIV2K_train_HR_sub",
        "lq_root": "datasets/DIV2K/DIV2K_train_LR_bicubic/X4_sub", "filename_tmpl": "{name}",
        "gt_size": 128, "use_flip": True, "use_rot": True}
    train = cfg["train"]
    scheduler = {"type": "MultiStepLR", "milestones": [50000, 100000, 200000, 300000],
                 "gamma": 0.5}
    assert train["scheduler"] == scheduler == train["scheduler_d"]
    assert train["losses"] == {
        "pixel": {"type": "L1Loss", "loss_weight": 0.01, "reduction": "mean"},
        "perceptual": {"type": "PerceptualLoss", "layer_weights": {"conv5_4": 1},
                       "vgg_type": "vgg19", "use_input_norm": True, "range_norm": False,
                       "perceptual_weight": 1.0, "style_weight": 0, "criterion": "l1"},
        "gan": {"type": "GANLoss", "gan_type": "vanilla", "real_label_val": 1.0,
                "fake_label_val": 0.0, "loss_weight": 5e-3}}
    assert "loss" not in train and "gt_usm" not in train
    assert train["optimizer"] == train["optimizer_d"] == {**ADAM, "lr": 1e-4}
    assert (train["net_d_iters"], train["net_d_init_iters"], train["ema_decay"]) == (1, 0, 0.999)
    assert train["batch_size"] == 16 and train["total_iters"] == 400000
    assert train["pretrained"] == {"path": "experiments/051_RRDBNet_PSNR_x4_f64b23_DIV2K_1000k_"
                                           "B16G1_wandb/models/net_g_1000000.pth",
                                   "key": "params", "strict": True}
    assert cfg["val"] == {"every": 5000, "save_images": True, "metrics": ["psnr"],
                          "crop_border": 4, "y_channel": False}
    assert any(n.startswith("model_type: ESRGANModel trains a relativistic average GAN") and
               "standard GAN loss" in n for n in notes)
    assert any(n.startswith("train.ema_decay: BasicSR starts its EMA copy from the pretrained "
                            "file's params_ema") for n in notes)
    assert any(n.startswith(VGG_NOTE) for n in notes)


def test_swinir_x4():
    cfg, notes = translate(SWINIR_X4, "train_SwinIR_SRx4_scratch.yml")
    assert cfg["name"] == "train_SwinIR_SRx4_scratch_P48W8_DIV2K_500k_B4G8"
    assert cfg["model"] == {"type": "SwinIR", "scale": 4, "in_chans": 3, "img_size": 48,
                            "window_size": 8, "img_range": 1.0, "depths": [6] * 6,
                            "embed_dim": 180, "num_heads": [6] * 6, "mlp_ratio": 2,
                            "upsampler": "pixelshuffle", "resi_connection": "1conv"}
    assert cfg["datasets"]["train"]["gt_size"] == 192 and cfg["train"]["batch_size"] == 4
    assert cfg["train"]["loss"] == {"type": "L1Loss", "loss_weight": 1.0, "reduction": "mean"}
    assert cfg["train"]["scheduler"]["milestones"] == [250000, 400000, 450000, 475000]
    assert cfg["train"]["ema_decay"] == 0.999 and cfg["train"]["optimizer"]["lr"] == 2e-4
    assert "model_d" not in cfg and "losses" not in cfg["train"]
    assert dropped(notes, "model_type").startswith("model_type: dropped, SwinIRModel: srgrad "
                                                   "trains one network")
    dropped(notes, "num_gpu")  # `auto`
    dropped(notes, "datasets.train.meta_info_file")


def test_safmn_upscaling_factor_is_the_scale():
    """SAFMN's option files (sunny2109/SAFMN, BasicSR-based) name the scale upscaling_factor."""
    def safmn(opts):
        opts["network_g"] = {"type": "SAFMN", "dim": 36, "n_blocks": 8, "ffn_scale": 2.0,
                             "upscaling_factor": 2}
    cfg, _ = translated(safmn)
    assert cfg["model"] == {"type": "SAFMN", "dim": 36, "n_blocks": 8, "ffn_scale": 2.0, "scale": 2}


def test_keys_a_model_type_does_not_read_are_dropped():
    """BasicSR's SRModel builds no discriminator and no degradation: their keys change nothing."""
    def extra(o):
        o["network_d"] = {"type": "VGGStyleDiscriminator", "num_in_ch": 3, "num_feat": 64}
        o["train"].update(optim_d={"type": "Adam", "lr": 1e-4}, net_d_iters=1,
                          gan_opt={"type": "GANLoss", "gan_type": "vanilla"})
        o["path"].update(pretrain_network_d="d.pth", strict_load_d=True)
        o.update(resize_prob=[0.2, 0.7, 0.1], queue_size=180, gt_usm=True, l1_gt_usm=True,
                 gt_size=256, high_order_degradation=True)

    cfg, notes = translated(extra)
    for key in ("network_d", "train.optim_d", "train.net_d_iters", "train.gan_opt",
                "path.pretrain_network_d", "path.strict_load_d"):
        assert "SRModel does not read it (only SRGANModel, ESRGANModel and RealESRGANModel" \
            in dropped(notes, key)
    for key in ("resize_prob", "queue_size", "gt_usm", "l1_gt_usm", "gt_size",
                "high_order_degradation"):
        assert "(only RealESRNetModel and RealESRGANModel do)" in dropped(notes, key)
    assert cfg == translated()[0]
    validate(cfg, "translated")


def test_gan_models_need_their_discriminator_optimizer_and_loss():
    with pytest.raises(ConfigError) as info:
        translated(lambda o: o.update(model_type="SRGANModel"))
    lines = str(info.value).splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == ["network_d", "train.gan_opt",
                                                              "train.optim_d"]
    assert all("SRGANModel" in line and "BasicSR fails without it" in line for line in lines)


def test_real_models_need_their_dataset_and_crop_size():
    def paired(o):
        o["datasets"]["train"] = options(EDSR_MX2)["datasets"]["train"]
        del o["gt_size"]

    with pytest.raises(ConfigError) as info:
        translate(REALESRNET_X4PLUS, change=paired)
    text = str(info.value)
    assert "datasets.train.type: 'PairedImageDataset': RealESRNetModel degrades HR images" in text
    assert "gt_size: missing: RealESRNetModel crops" in text
    with pytest.raises(ConfigError, match="datasets.train.type: 'RealESRGANDataset': it gives HR "
                                          "images only, which BasicSR degrades in RealESRNetModel"):
        translate(REALESRNET_X4PLUS, change=lambda o: o.update(model_type="SRModel"))


@pytest.mark.parametrize("flags, terms", [
    ((True, True, False), ["pixel", "perceptual"]), ((False, False, False), None),
    ((True, True, True), ["pixel", "perceptual", "gan"]), ((False, False, True), ["gan"])])
def test_realesrgan_usm_flags_pick_the_targets(flags, terms):
    cfg, _ = translate(REALESRGAN_X4PLUS, change=lambda o: o.update(
        l1_gt_usm=flags[0], percep_gt_usm=flags[1], gan_gt_usm=flags[2]))
    assert cfg["train"].get("gt_usm") == terms
    assert cfg["datasets"]["train"]["gt_usm"] is True  # RealESRGANModel degrades the sharpened GT


def test_realesrgan_usm_flags_without_their_term_or_missing():
    def change(o):
        del o["train"]["perceptual_opt"], o["l1_gt_usm"]
        o["gt_usm"] = True

    cfg, notes = translate(REALESRGAN_X4PLUS, change=change)
    assert cfg["train"]["gt_usm"] == ["pixel"]  # BasicSR: the sharpened GT unless `is False`
    assert any(n.startswith("l1_gt_usm: missing (BasicSR needs it): the sharpened GT")
               for n in notes)
    assert "there is no perceptual loss" in dropped(notes, "percep_gt_usm")
    assert "always degrades the sharpened GT" in dropped(notes, "gt_usm")
    assert cfg["train"]["losses"].keys() == {"pixel", "gan"}


@pytest.mark.parametrize("sharp", [True, False])
def test_realesrnet_gt_usm(sharp):
    def change(o):
        o["gt_usm"] = sharp
        o["train"]["perceptual_opt"] = {"type": "PerceptualLoss", "layer_weights": {"conv5_4": 1}}
        o["l1_gt_usm"] = True

    cfg, notes = translate(REALESRNET_X4PLUS, change=change)
    assert cfg["datasets"]["train"]["gt_usm"] is sharp
    assert cfg["train"].get("gt_usm") == (["pixel", "perceptual"] if sharp else None)
    assert cfg["train"]["losses"]["pixel"]["type"] == "L1Loss" and "loss" not in cfg["train"]
    assert "RealESRNetModel reads gt_usm" in dropped(notes, "l1_gt_usm")


def test_paired_finetuning_without_high_order_degradation():
    """Real-ESRGAN's finetune_realesrgan_x4plus_pairdata.yml trains on the dataset's LR images; its
    sharpened targets would need the paired GT sharpened, which srgrad does not do."""
    def pairdata(o, *flags):
        o["high_order_degradation"] = False
        o["datasets"]["train"] = options(EDSR_MX2)["datasets"]["train"]
        o.update(l1_gt_usm=flags[0], percep_gt_usm=flags[1], gan_gt_usm=flags[2])

    with pytest.raises(ConfigError) as info:
        translate(REALESRGAN_X4PLUS, change=lambda o: pairdata(o, True, True, False))
    lines = str(info.value).splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == ["l1_gt_usm", "percep_gt_usm"]
    cfg, notes = translate(REALESRGAN_X4PLUS, change=lambda o: pairdata(o, False, False, False))
    assert cfg["datasets"]["train"]["type"] == "PairedImageDataset"
    assert "gt_usm" not in cfg["train"] and cfg["model_d"]["type"] == "UNetDiscriminatorSN"
    for key in ("resize_prob", "jpeg_range2", "gt_size", "queue_size"):
        assert "unused with high_order_degradation: false" in dropped(notes, key)
    for key in ("l1_gt_usm", "percep_gt_usm", "gan_gt_usm"):
        assert "false: the target is the dataset's GT" in dropped(notes, key)
    with pytest.raises(ConfigError, match="gan_gt_usm: a sharpened target"):  # missing: sharpened
        translate(REALESRGAN_X4PLUS, change=lambda o: (pairdata(o, False, False, False),
                                                       o.pop("gan_gt_usm")))
    cfg, notes = translate(REALESRNET_X4PLUS, change=lambda o: o.update(
        high_order_degradation=True))
    assert "true is what srgrad's RealESRGANDataset does" in dropped(notes,
                                                                     "high_order_degradation")


def test_misplaced_degradation_keys_follow_basicsr():
    """Real-ESRGAN's model reads resize/noise/JPEG keys at the top level only: a copy in the dataset
    block is ignored, as BasicSR ignores it."""
    cfg, notes = translate(REALESRNET_X4PLUS, change=lambda o: o["datasets"]["train"].update(
        resize_prob=[0, 1, 0], color="y"))
    assert cfg["datasets"]["train"]["resize_prob"] == [0.2, 0.7, 0.1]
    assert "reads it from the top level" in dropped(notes, "datasets.train.resize_prob")
    assert "HR images only, in RGB" in dropped(notes, "datasets.train.color")


@pytest.mark.parametrize("config, text", [("realesrnet_compact_x4.yaml", REALESRNET_X4PLUS),
                                          ("realesrgan_compact_x4.yaml", REALESRGAN_X4PLUS)])
def test_bundled_real_world_configs_augment_as_real_esrgan_s(config, text):
    """Real-ESRGAN's option files flip (use_hflip: True) but never rotate (use_rot: False); the
    bundled CPU-sized configs of both stages do the same."""
    import pathlib
    real = translate(text)[0]["datasets"]["train"]
    path = pathlib.Path(__file__).resolve().parents[3] / "configs" / config
    ours = yaml.safe_load(path.read_text())["datasets"]["train"]
    assert ours["type"] == real["type"] == "RealESRGANDataset"
    assert (ours["use_flip"], ours["use_rot"]) == (real["use_flip"], real["use_rot"]) == (True, False)
