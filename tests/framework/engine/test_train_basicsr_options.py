"""srgrad-train given a BasicSR option file: translated on the fly (said once, first, with the
notes of srgrad-convert options) instead of ~35 schema errors; BasicSR's `-opt X.yml
--auto_resume` read as `X.yml --resume auto`; a test option file points at srgrad-eval."""
import numpy as np
import yaml
from PIL import Image

from framework.engine.commands.cli import train_main

from tests.conftest import smooth_image


def _options(tmp_path):
    rng = np.random.default_rng(0)
    for sub in ("gt", "lq"):
        (tmp_path / sub).mkdir(exist_ok=True)
    for name in ("a", "b"):
        hr = smooth_image(rng, 16, 16)
        Image.fromarray(hr).save(tmp_path / "gt" / f"{name}.png")
        Image.fromarray(hr).resize((8, 8), Image.BICUBIC).save(tmp_path / "lq" / f"{name}.png")
    text = f"""\
name: 001_tiny_MSRResNet_x2
model_type: SRModel
scale: 2
num_gpu: 1  # set num_gpu: 0 for cpu mode
manual_seed: 0
datasets:
  train:
    name: tiny
    type: PairedImageDataset
    dataroot_gt: {tmp_path / 'gt'}
    dataroot_lq: {tmp_path / 'lq'}
    filename_tmpl: '{{}}'
    io_backend:
      type: disk
    gt_size: 8
    use_hflip: true
    use_rot: true
    num_worker_per_gpu: 6
    batch_size_per_gpu: 2
network_g:
  type: MSRResNet
  num_in_ch: 3
  num_out_ch: 3
  num_feat: 4
  num_block: 1
  upscale: 2
path:
  pretrain_network_g: ~
  resume_state: ~
  experiments_root: {tmp_path / 'experiments'}
train:
  optim_g:
    type: Adam
    lr: !!float 2e-4
    betas: [0.9, 0.99]
  total_iter: 2
  warmup_iter: -1  # no warm up
  pixel_opt:
    type: L1Loss
    loss_weight: 1.0
    reduction: mean
logger:
  print_freq: 1
  save_checkpoint_freq: !!float 5e3
"""
    path = tmp_path / "train_tiny_MSRResNet_x2.yml"
    path.write_text(text)
    return path


def test_a_basicsr_option_file_trains_with_its_notes_said_first(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/<name> under the current folder, as srgrad's run_root
    options = _options(tmp_path)
    assert train_main(["-opt", str(options), "--auto_resume", "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"note: BasicSR's flags, read as srgrad-train's: -opt {options} -> "
                      f"{options}; --auto_resume -> --resume auto")
    assert err[1].startswith(f"note: {options} is a BasicSR option file: translated as "
                             f"srgrad-convert "
                             f"options does (")
    assert "note: datasets.train.num_worker_per_gpu: dropped, a torch DataLoader setting; " \
           "srgrad's loader has none" in err
    assert not any(line.startswith("error") for line in err)
    run = tmp_path / "runs" / "001_tiny_MSRResNet_x2"
    saved = yaml.safe_load((run / "config.yaml").read_text())  # srgrad's config, not BasicSR's
    assert saved["model"]["type"] == "MSRResNet" and saved["train"]["total_iters"] == 2
    assert saved["datasets"]["train"]["filename_tmpl"] == "{name}"
    # --resume auto again (BasicSR's --auto_resume): the same translation, the run continues;
    # --set takes srgrad's keys
    assert train_main([str(options), "--resume", "auto", "--set", "train.total_iters=3",
                       "--no-progress"]) == 0
    assert f"resumed from {run.relative_to(tmp_path)}/checkpoints/iter_00000002.safetensors at " \
           f"iteration 2" in capsys.readouterr().err


def test_a_basicsr_test_option_file_points_at_srgrad_eval(tmp_path, capsys):
    path = tmp_path / "test_x.yml"
    path.write_text("name: x\nmodel_type: SRModel\nscale: 2\nnetwork_g: {type: EDSR}\n"
                    "datasets:\n  test_1: {name: Set5, type: PairedImageDataset}\n")
    assert train_main([str(path), "--no-progress"]) == 2
    assert f"{path} is a BasicSR test option file (for basicsr/test.py): evaluate with " \
           f"srgrad-eval {path}" in capsys.readouterr().err


MSRRESNET_X4 = (
    # BasicSR's options/train/SRResNet_SRGAN/train_MSRResNet_x4.yml, its best-known example
    "name: 001_MSRResNet_x4_f64b16_DIV2K_1000k_B16G1_wandb\nmodel_type: SRModel\nscale: 4\n"
    "num_gpu: 1\nmanual_seed: 0\n"
    "datasets:\n  train:\n    name: DIV2K\n    type: PairedImageDataset\n"
    "    dataroot_gt: datasets/DF2K/DIV2K_train_HR_sub\n"
    "    dataroot_lq: datasets/DF2K/DIV2K_train_LR_bicubic_X4_sub\n"
    "    meta_info_file: basicsr/data/meta_info/meta_info_DIV2K800sub_GT.txt\n"
    "    filename_tmpl: '{}'\n    io_backend:\n      type: disk\n    gt_size: 128\n"
    "    use_hflip: true\n    use_rot: true\n    num_worker_per_gpu: 6\n"
    "    batch_size_per_gpu: 16\n    dataset_enlarge_ratio: 100\n    prefetch_mode: ~\n"
    "  val:\n    name: Set5\n    type: PairedImageDataset\n    dataroot_gt: datasets/Set5/GTmod12\n"
    "    dataroot_lq: datasets/Set5/LRbicx4\n    io_backend:\n      type: disk\n"
    "  val_2:\n    name: Set14\n    type: PairedImageDataset\n"
    "    dataroot_gt: datasets/Set14/GTmod12\n    dataroot_lq: datasets/Set14/LRbicx4\n"
    "    io_backend:\n      type: disk\n"
    "network_g:\n  type: MSRResNet\n  num_in_ch: 3\n  num_out_ch: 3\n  num_feat: 64\n"
    "  num_block: 16\n  upscale: 4\n"
    "path:\n  pretrain_network_g: ~\n  param_key_g: params\n  strict_load_g: true\n"
    "  resume_state: ~\n"
    "train:\n  ema_decay: 0.999\n  optim_g:\n    type: Adam\n    lr: !!float 2e-4\n"
    "    weight_decay: 0\n    betas: [0.9, 0.99]\n  scheduler:\n    type: CosineAnnealingRestartLR\n"
    "    periods: [250000, 250000, 250000, 250000]\n    restart_weights: [1, 1, 1, 1]\n"
    "    eta_min: !!float 1e-7\n  total_iter: 1000000\n  warmup_iter: -1  # no warm up\n"
    "  pixel_opt:\n    type: L1Loss\n    loss_weight: 1.0\n    reduction: mean\n"
    "val:\n  val_freq: !!float 5e3\n  save_img: false\n  metrics:\n    psnr:\n"
    "      type: calculate_psnr\n      crop_border: 4\n      test_y_channel: false\n"
    "      better: higher\n    niqe:\n      type: calculate_niqe\n      crop_border: 4\n"
    "      better: lower\n"
    "logger:\n  print_freq: 100\n  save_checkpoint_freq: !!float 5e3\n  use_tb_logger: true\n"
    "  wandb:\n    project: ~\n    resume_id: ~\n"
    "dist_params:\n  backend: nccl\n  port: 29500\n")


def test_basicsrs_best_known_example_translates_with_niqe(tmp_path, capsys):
    """The whole file was refused for its NIQE validation metric (then NIQE was dropped, when
    srgrad had none); now it translates to psnr and niqe, NIQE's crop_border shared, its
    `better: lower` known."""
    from framework.engine.commands.convert import main as convert_main
    src = tmp_path / "train_MSRResNet_x4.yml"
    src.write_text(MSRRESNET_X4)
    out = tmp_path / "msrresnet_x4.yaml"
    assert convert_main(["options", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "val.metrics.niqe: dropped" not in err
    assert "note: val.metrics.niqe.better: dropped, srgrad knows each metric's direction" in err
    cfg = yaml.safe_load(out.read_text())
    assert cfg["val"] == {"every": 5000, "save_images": False, "metrics": ["psnr", "niqe"],
                          "crop_border": 4, "y_channel": False}


def test_only_unknown_metrics_leave_srgrads_defaults_with_a_note():
    from framework.engine.config.options import translate_options
    opts = yaml.safe_load(MSRRESNET_X4)
    del opts["val"]["metrics"]["psnr"]
    opts["val"]["metrics"]["niqe"]["type"] = "calculate_fid"  # one srgrad lacks
    cfg, notes = translate_options(opts, "x.yml")
    assert "metrics" not in cfg["val"]
    assert "val.metrics: none srgrad has, so validation measures srgrad's default psnr and ssim" \
        in notes


def test_which_files_are_basicsr_options():
    from framework.engine.config.basicsr_options import is_basicsr_options, is_test_options
    basicsr = yaml.safe_load(MSRRESNET_X4)
    assert is_basicsr_options(basicsr) and not is_test_options(basicsr)
    test = {"name": "x", "model_type": "SRModel", "network_g": {"type": "EDSR"},
            "datasets": {"test_1": {}}}
    assert is_basicsr_options(test) and is_test_options(test)
    # an srgrad config with a BasicSR spelling is srgrad's (its errors point at srgrad's key)
    assert not is_basicsr_options({"network_g": {}, "model": {}})
    assert not is_basicsr_options({"network_g": {}, "train": {"total_iters": 5}})
    assert not is_basicsr_options({"name": "x", "model": {"type": "EDSR"}}) and \
        not is_basicsr_options([1])
