"""srgrad-train's captured step (train.capture: auto, framework/capture) against the eager one
(train.capture: off) for every registered recipe: the same weights, EMA, optimizer states and
losses, bit for bit; the start-up summary says whether the step is captured and why not."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.config.schema import load_config
from framework.registry import RECIPES

from .conftest import config_text

# what each recipe adds to the tiny config (a new recipe needs its entry here), and whether its
# step replays (else the reason the summary gives: none now)
RECIPE_CASES = {
    "sr": (["train.ema_decay=0.9", "train.grad_clip=1.0"], None),
    "sr_terms": (["train.loss=null", "train.losses={pixel: {type: L1Loss}, "
                  "perceptual: {type: MSELoss, loss_weight: 0.5}}"], None),
    "gan": (["model_d={type: UNetDiscriminatorSN, num_in_ch: 3, num_feat: 4}",
             "train.optimizer_d={type: Adam, lr: 1.0e-3}",
             "train.losses={pixel: {type: L1Loss}, gan: {type: GANLoss, gan_type: vanilla}}"],
            None),
    "zssr": (["datasets.train={type: ZSSRDataset, path: PATH, crop_size: 8}", "train.scheduler=null",
              "train.zssr.run_test_every=2"], None),
    "fbcnn": (["scale=1", "model={type: FBCNN, nc: [4, 4, 4, 512], nb: 1}",
               "datasets.train={type: JPEGDataset, root: ROOT, gt_size: 8}", "train.loss=null",
               "train.losses={pixel: {type: L1Loss}, qf: {type: L1Loss, loss_weight: 0.001}}"],
              None),
}


def _fit(tmp_path, data, case, capture, iters=4):
    overrides, _ = RECIPE_CASES[case]
    path = tmp_path / f"{case}_{capture}.yaml"
    path.write_text(config_text(data, tmp_path / f"runs_{capture}", iters=iters, every=iters))
    image = sorted((data / "train").glob("*.png"))[0]
    cfg = load_config(path, [o.replace("PATH", str(image)).replace("ROOT", str(data / "train"))
                             for o in overrides]
                      + ["datasets.val=null", f"train.capture={capture}"])
    lines = []
    trainer = Trainer(cfg, progress=False)
    trainer._say = lambda msg: lines.append(msg)
    trainer.recipe.say = trainer._say
    trainer.fit()
    with open(trainer.run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return trainer.recipe, rows, lines


def _same(a, b, where=""):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("case", [c for c, (_, why) in RECIPE_CASES.items() if why is None])
def test_captured_training_is_bit_identical_to_eager(case, tiny_data, tmp_path):
    eager, eager_rows, _ = _fit(tmp_path, tiny_data, case, "off")
    captured, rows, lines = _fit(tmp_path, tiny_data, case, "auto")
    _same(eager.state(), captured.state())
    assert [{k: v for k, v in r.items() if k != "time_s"} for r in eager_rows] == \
        [{k: v for k, v in r.items() if k != "time_s"} for r in rows]
    summary = [line for line in lines if line.startswith("step:")]
    assert captured.capture.replays == 2  # iterations 1-2 recorded, 3-4 replayed
    assert captured.optimizer.fused is True
    assert "step: captured (train.capture: auto)" in summary[0]
    assert summary[1].startswith("step: replayed from a captured graph")


def test_an_uncaptured_recipe_says_why_and_stays_eager(tiny_data, tmp_path, monkeypatch):
    """A recipe with UNCAPTURED (every registered one captures now: the sr recipe told so here)
    runs its own eager step under train.capture: auto: one iteration, its summary, no replay."""
    from framework.engine.run.recipes.sr import SRRecipe
    monkeypatch.setattr(SRRecipe, "UNCAPTURED", "recipe sr: a reason to stay eager")
    captured, rows, lines = _fit(tmp_path, tiny_data, "sr", "auto", iters=1)
    summary = [line for line in lines if line.startswith("step:")]
    assert captured.capture.enabled is False and captured.capture.replays == 0
    assert summary == ["step: eager (recipe sr: a reason to stay eager)"]
    assert len(rows) == 1 and np.isfinite(float(rows[0]["loss"]))
    assert not captured.optimizer.fused


def test_the_gan_discriminator_step_replays_too(tiny_data, tmp_path):
    """Its own capture, two roots (l_d_real, then l_d_fake): replayed on iterations 3-4 of the
    bit-identical run above; its summary says so."""
    captured, _, lines = _fit(tmp_path, tiny_data, "gan", "auto")
    summary = [line for line in lines if line.startswith("step:")]
    assert summary[0].startswith("step: captured (train.capture: auto)")
    assert summary[0].endswith("; the discriminator's step too")
    assert captured.capture.replays == 2 and captured.capture_d.replays == 2, \
        captured.capture_d.status()


def test_every_recipe_is_covered():
    assert set(RECIPES.names()) <= set(RECIPE_CASES)


def test_capture_off_says_so(tiny_data, tmp_path):
    recipe, _, lines = _fit(tmp_path, tiny_data, "sr", "off")
    assert recipe.capture.replays == 0 and not recipe.optimizer.fused
    assert "step: eager (train.capture: off)" in lines
