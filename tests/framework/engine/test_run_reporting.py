"""What a run tells: TensorBoard tags grouped as BasicSR's (losses/l_pix, metrics/<set>/psnr), and
counts spelled right ("1 validation image")."""
import shutil

import pytest

from framework.engine import Trainer
from framework.engine.run import tensorboard
from framework.engine.config.schema import load_config
from framework.engine.run.tensorboard import scalar_tag


class Recorder:
    """Stands in for tensorboard.SummaryWriter (tensorboardX is optional): the calls it gets."""
    calls: list = []

    def __init__(self, logdir):
        Recorder.calls = []

    def add_scalar(self, tag, value, step):
        Recorder.calls.append((step, tag, value))

    def add_image(self, tag, image, step):
        pass

    def close(self):
        pass


def test_scalar_tags_follow_basicsr():
    metrics = ["psnr_y", "bicubic_psnr_y", "ssim_y", "bicubic_ssim_y"]
    assert scalar_tag("l_g_pix", metrics) == "losses/l_g_pix"
    assert scalar_tag("l_d_fake", metrics) == "losses/l_d_fake"
    assert scalar_tag("loss", metrics) == "losses/loss"  # srgrad's total
    assert scalar_tag("psnr_y", metrics) == "metrics/val/psnr_y"
    assert scalar_tag("bicubic_ssim_y", metrics, "Set5") == "metrics/Set5/bicubic_ssim_y"
    assert scalar_tag("lr", metrics) == "lr" and scalar_tag("out_d_real", metrics) == "out_d_real"


def test_a_run_tags_its_scalars_and_counts_one_image(make_config, tmp_path, tiny_data,
                                                    monkeypatch, capsys):
    one = tmp_path / "one_val"
    one.mkdir()
    shutil.copy(tiny_data / "val" / "v_rgb.png", one)
    monkeypatch.setattr(tensorboard, "SummaryWriter", Recorder)
    path = make_config(iters=2, every=2)
    cfg = load_config(path, [f"datasets.val.root={one}", "train.tensorboard=true"])
    Trainer(cfg, progress=False).fit()
    err = capsys.readouterr().err
    assert "data: 3 training images (HRImageDataset, patches gt 16x16 -> lq 8x8, batch 2), " \
           "1 validation image\n" in err, err
    tags = {(step, tag) for step, tag, _ in Recorder.calls}
    assert tags == {(1, "losses/loss"), (1, "lr"), (2, "losses/loss"), (2, "lr"),
                    (2, "metrics/val/psnr_y"), (2, "metrics/val/bicubic_psnr_y"),
                    (2, "metrics/val/ssim_y"), (2, "metrics/val/bicubic_ssim_y")}
    psnr = [v for step, tag, v in Recorder.calls if tag == "metrics/val/psnr_y"]
    assert len(psnr) == 1 and 10 < psnr[0] < 60
