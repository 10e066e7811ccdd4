"""srgrad-eval CONFIG: BasicSR's `basicsr/test.py -opt` carried over. A BasicSR test option file
(translated on the fly, notes and all), an srgrad test config with several sets, or a training
config (its val set); SR images saved as BasicSR saves them, scores per set in one CSV."""
import csv

import numpy as np
import pytest
import yaml
from PIL import Image

from framework.engine.commands.cli import eval_main
from framework.engine.commands.convert import main as convert_main
from framework.engine.inference.upscale import super_resolve
from framework.engine.inference.zoo import load_zoo
from framework.metrics import psnr
from framework.nn import init
from framework.registry import MODELS
from framework.weights import write_pth

from tests.conftest import smooth_image

EDSR = {"type": "EDSR", "num_feat": 4, "num_block": 1, "scale": 2}
load_zoo()


@pytest.fixture
def data(tmp_path):
    """Set5-like pairs (LR named as HR), DIV2K-like pairs (0001x2.png), LR-only images, and
    BasicSR's `{"params": ...}` .pth of a tiny EDSR."""
    rng = np.random.default_rng(0)
    for folder, names, lr_name in (("Set5", ("baby", "bird"), "{}"), ("DIV2K", ("0801",), "{}x2")):
        (tmp_path / folder / "GT").mkdir(parents=True)
        (tmp_path / folder / "LR").mkdir()
        for name in names:
            hr = smooth_image(rng, 16, 20)
            Image.fromarray(hr).save(tmp_path / folder / "GT" / f"{name}.png")
            lr = Image.fromarray(hr).resize((10, 8), Image.BICUBIC)
            lr.save(tmp_path / folder / "LR" / f"{lr_name.format(name)}.png")
    (tmp_path / "mine").mkdir()
    Image.fromarray(smooth_image(rng, 6, 7)).save(tmp_path / "mine" / "cat.png")
    init.manual_seed(0)
    model = MODELS.build(EDSR)
    write_pth(tmp_path / "net_g.pth", {"params": model.state_dict()})
    return tmp_path


def basicsr_test_file(root):
    """options/test/EDSR/test_EDSR_Mx2.yml's layout, pointed at the tiny data."""
    return f"""\
name: EDSR_tiny_x2
model_type: SRModel
scale: 2
num_gpu: 1  # set num_gpu: 0 for cpu mode
manual_seed: 0

datasets:
  test_1:  # the 1st test dataset
    name: Set5
    type: PairedImageDataset
    dataroot_gt: {root}/Set5/GT
    dataroot_lq: {root}/Set5/LR
    io_backend:
      type: disk
  test_2:
    name: DIV2K100
    type: PairedImageDataset
    dataroot_gt: {root}/DIV2K/GT
    dataroot_lq: {root}/DIV2K/LR
    filename_tmpl: '{{}}x2'
    io_backend:
      type: disk
  test_3:
    name: mine
    type: SingleImageDataset
    dataroot_lq: {root}/mine
    io_backend:
      type: disk

network_g:
  type: EDSR
  num_in_ch: 3
  num_out_ch: 3
  num_feat: 4
  num_block: 1
  upscale: 2
  res_scale: 1
  img_range: 255.
  rgb_mean: [0.4488, 0.4371, 0.4040]

path:
  pretrain_network_g: {root}/net_g.pth
  strict_load_g: true

val:
  save_img: true
  suffix: ~  # add suffix to saved images, if None, use exp name

  metrics:
    psnr: # metric name, can be arbitrary
      type: calculate_psnr
      crop_border: 2
      test_y_channel: false
    fid:  # a metric srgrad lacks (its NIQE would refuse these tiny images: 96 px blocks)
      type: calculate_fid
      crop_border: 2
"""


def _read(path):
    return np.asarray(Image.open(path)).transpose(2, 0, 1).astype(np.float64) / 255


def test_a_basicsr_test_option_file_runs_as_basicsr_test_py(data, capsys):
    options = data / "test_EDSR_tiny_x2.yml"
    options.write_text(basicsr_test_file(data))
    results = data / "results"
    assert eval_main([str(options), "--results", str(results), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert f"{options} is a BasicSR test option file: translated as srgrad-convert options does" \
        in err
    assert "note: val.metrics.fid: dropped, 'calculate_fid' is not among srgrad's metrics" in err
    assert "mine: 1 image(s) upscaled (no GT: nothing measured)" in out
    folder = results / "EDSR_tiny_x2" / "visualization"  # BasicSR's layout and default suffix
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.png")) == [
        "DIV2K100/0801_EDSR_tiny_x2.png", "Set5/baby_EDSR_tiny_x2.png",
        "Set5/bird_EDSR_tiny_x2.png", "mine/cat_EDSR_tiny_x2.png"]
    init.manual_seed(0)
    model = MODELS.build(EDSR)
    model.eval()
    rows = list(csv.DictReader(open(results / "EDSR_tiny_x2" / "metrics.csv")))
    assert [(r["set"], r["image"]) for r in rows] == [
        ("Set5", "baby.png"), ("Set5", "bird.png"), ("Set5", "mean"), ("DIV2K100", "0801.png"),
        ("DIV2K100", "mean")]
    assert list(rows[0]) == ["set", "image", "psnr_rgb", "bicubic_psnr_rgb", "delta_psnr_rgb",
                             "tta"]  # test_y_channel: false -> RGB
    for (set_name, name, lr_name), row in zip(
            (("Set5", "baby", "baby"), ("Set5", "bird", "bird"), ("DIV2K", "0801", "0801x2")),
            (rows[0], rows[1], rows[3])):
        lq = _read(data / set_name / "LR" / f"{lr_name}.png").astype(np.float32)
        sr = super_resolve(model, lq, 2, 3)
        saved = _read(folder / ("DIV2K100" if set_name == "DIV2K" else set_name) /
                      f"{name}_EDSR_tiny_x2.png")
        np.testing.assert_array_equal(saved, np.rint(sr.astype(np.float64) * 255) / 255)
        gt = _read(data / set_name / "GT" / f"{name}.png").astype(np.float32)
        assert float(row["psnr_rgb"]) == pytest.approx(psnr(sr, gt, crop_border=2,
                                                            y_channel=False), abs=1e-4)


def test_an_srgrad_test_config_with_several_sets(data, capsys):
    config = data / "sets.yaml"
    config.write_text(yaml.safe_dump({
        "name": "tiny", "scale": 2, "model": EDSR,
        "weights": {"path": str(data / "net_g.pth"), "key": "params"},
        "results_root": str(data / "out"),
        "datasets": {"test_1": {"name": "Set5", "type": "PairedImageDataset",
                                "gt_root": str(data / "Set5" / "GT"),
                                "lq_root": str(data / "Set5" / "LR")},
                     "test_2": {"type": "HRImageDataset", "root": str(data / "DIV2K" / "GT")}},
        "val": {"metrics": ["psnr", "ssim"], "suffix": "edsr"}}))
    assert eval_main([str(config), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Set5: x2, Y channel, crop_border=2, LR from" in out
    assert "test_2: x2, Y channel, crop_border=2, LR made by MATLAB imresize" in out
    first = data / "out" / "tiny"
    assert (first / "visualization" / "Set5" / "baby_edsr.png").is_file()
    assert (first / "visualization" / "test_2" / "0801_edsr.png").is_file()  # named by its key
    rows = list(csv.DictReader(open(first / "metrics.csv")))
    assert [r["set"] for r in rows] == ["Set5"] * 3 + ["test_2"] * 2
    assert "psnr_y" in rows[0] and "ssim_y" in rows[0]
    # a second run keeps the first's results (a new folder), --overwrite reuses it
    assert eval_main([str(config), "--no-progress"]) == 0
    assert (data / "out" / "tiny_2" / "metrics.csv").is_file()
    assert eval_main([str(config), "--no-progress", "--overwrite", "--no-save"]) == 0
    assert not (data / "out" / "tiny_3").exists()
    assert sorted(p.name for p in (first / "visualization" / "Set5").iterdir()) == \
        ["baby_edsr.png", "bird_edsr.png"]


def test_a_training_config_is_scored_on_its_val_set(data, capsys, tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "name": "trained", "scale": 2, "model": EDSR,
        "datasets": {"train": {"type": "HRImageDataset", "root": str(data / "Set5" / "GT")},
                     "val": {"type": "HRImageDataset", "root": str(data / "Set5" / "GT")}},
        "train": {"total_iters": 1, "batch_size": 1, "optimizer": {"type": "Adam", "lr": 1e-3}},
        "val": {"y_channel": False}}))
    assert eval_main([str(config), "--weights", str(data / "net_g.pth"), "--key", "params",
                      "--results", str(tmp_path / "r"), "--no-progress"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "r" / "trained" / "metrics.csv")))
    assert [r["image"] for r in rows] == ["baby.png", "bird.png", "mean"] and "psnr_rgb" in rows[0]
    assert (tmp_path / "r" / "trained" / "visualization" / "val" / "baby_trained.png").is_file()


def test_one_set_saves_its_images_too(data, capsys):
    assert eval_main(["--weights", str(data / "net_g.pth"), "--key", "params", "--model", "EDSR",
                      "--model-arg", "num_feat=4", "--model-arg", "num_block=1", "--scale", "2",
                      "--input", str(data / "Set5" / "GT"), "--results", str(data / "res"),
                      "--no-progress"]) == 0
    folder = data / "res" / "net_g" / "visualization" / "GT"  # <weights>/<input>
    assert sorted(p.name for p in folder.iterdir()) == ["baby_net_g.png", "bird_net_g.png"]


@pytest.mark.parametrize("argv, message", [
    (["CONFIG", "--input", "x"], "give either CONFIG (its sets) or --input (one set), not both"),
    ([], "give CONFIG (a test config or option file), --input HR (one set) or --benchmark SET"),
    (["--input", "x"], "--weights or -n NAME is required with --input"),
])
def test_bad_combinations_are_one_line_errors(data, capsys, argv, message):
    options = data / "o.yml"
    options.write_text(basicsr_test_file(data))
    assert eval_main([str(options) if a == "CONFIG" else a for a in argv]) == 2
    assert message in capsys.readouterr().err


def test_a_file_without_weights_asks_for_them(data, capsys):
    options = data / "o.yml"
    options.write_text(basicsr_test_file(data).replace(f"  pretrain_network_g: {data}/net_g.pth\n",
                                                       ""))
    assert eval_main([str(options), "--results", str(data / "r"), "--no-progress"]) == 2
    assert f"{options} names no weights: pass --weights" in capsys.readouterr().err


def test_convert_writes_a_test_config_that_srgrad_eval_runs(data, capsys):
    options = data / "test_EDSR.yml"
    options.write_text(basicsr_test_file(data))
    out = data / "edsr_test.yaml"
    assert convert_main(["options", str(options), "-o", str(out)]) == 0
    text = out.read_text()
    assert "srgrad-eval " + str(out) in text.splitlines()[1]
    cfg = yaml.safe_load(text)
    assert cfg["datasets"]["test_1"]["name"] == "Set5" and cfg["val"]["metrics"] == ["psnr"]
    assert cfg["datasets"]["test_3"] == {"name": "mine", "type": "SingleImageDataset",
                                         "lq_root": f"{data}/mine"}
    assert eval_main([str(out), "--results", str(data / "r"), "--no-progress"]) == 0
    assert (data / "r" / "EDSR_tiny_x2" / "metrics.csv").is_file()


@pytest.mark.parametrize("old,new,key", [
    ("name: EDSR_tiny_x2", "name: ../../../x", "name"),
    ("name: EDSR_tiny_x2", "name: ABS", "name"),  # an absolute path (in tmp_path)
    ("name: EDSR_tiny_x2", "name: ..", "name"),
    ("name: EDSR_tiny_x2", "name: a/b", "name"),
    ("  suffix: ~", "  suffix: x/../../../../../../../y", "val.suffix"),
    ("  suffix: ~", "  suffix: ABS", "val.suffix"),
    ("    name: Set5", "    name: ../up", "datasets.test_1.name"),
    ("    name: Set5", "    name: a\\\\b", "datasets.test_1.name"),
])
def test_names_that_become_paths_are_one_folder_name(data, capsys, old, new, key):
    """Issue 37: a test option file's name and val.suffix wrote wherever they pointed (7 levels
    above the results folder, or at the file-system root); each is one path component, refused in
    one line naming the key before anything is written."""
    options = data / "opt.yml"
    new = new.replace("ABS", str(data / "abs"))
    options.write_text(basicsr_test_file(data).replace(old, new, 1))
    before = sorted(p for p in data.parent.rglob("*"))
    assert eval_main([str(options), "--results", str(data / "results"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f": {key}: " in err and ("is not a name" in err or "is a path, not" in err
                                         or "would make a path" in err), err
    assert err.count("\n") <= 3 and "Traceback" not in err
    assert sorted(p for p in data.parent.rglob("*")) == before
