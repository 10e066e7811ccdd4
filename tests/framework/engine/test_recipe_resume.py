"""Every registered recipe resumes exactly: a run stopped by a signal after a checkpoint and
continued with `--resume auto` (the Trainer's resume="auto") ends bit-identical to one that never
stopped (every network, EMA, optimizer and scheduler state, the recipe's own state, metrics.csv's
losses). Driven by framework.registry.RECIPES: a recipe registered later fails here until TINY has
a config for it. A user's recipe, registered from a module a config imports, is covered too (a
`zssr` run could not resume at all: its load_state took one argument fewer than the base's)."""
import csv
import os
import re
import signal
import sys

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.config.schema import load_config
from framework.registry import RECIPES

from .conftest import config_text

USER = "user_counting"  # the user's recipe of USER_MODULE

# a user's module: an SR recipe with its own checkpointed state (a step counter), as ZSSR's policy
USER_MODULE = f'''
from framework.engine.run.recipes import SRRecipe
from framework.registry import RECIPES


@RECIPES.register("{USER}")
class CountingRecipe(SRRecipe):
    def build(self):
        self.count = 0

    def step(self, batch, iteration, dry=False):
        values = super().step(batch, iteration, dry)
        if not dry:
            self.count += 1
        return values

    def state(self):
        nets, states = super().state()
        states["counter"] = {{"count": self.count}}
        return nets, states

    def load_state(self, state, path):
        super().load_state(state, path)
        self.count = int(state["counter"]["count"])
'''

# what each recipe adds to the tiny config (conftest.config_text, FSRCNN d=8 on 16 px crops of
# 48 px images): the top-level keys and the train: keys
TINY = {
    "sr": ("", "  ema_decay: 0.9\n"),
    "gan": ("model_d: {type: UNetDiscriminatorSN, num_in_ch: 3, num_feat: 4}\n",
            "  optimizer_d: {type: Adam, lr: 1.0e-3}\n"
            "  scheduler_d: {type: MultiStepLR, milestones: [2], gamma: 0.5}\n"
            "  losses: {pixel: {type: L1Loss}, gan: {type: GANLoss, gan_type: vanilla}}\n"
            "  ema_decay: 0.9\n"),
    # a 32 px image; the policy records the error every step and, with change ratio 0, cuts the
    # rate at its check after step 6 from the records of steps 3-6 (two before the stop, two after)
    "zssr": ("recipe: zssr\n",
             "  zssr: {run_test_every: 1, learning_rate_policy_check_every: 3, min_iters: 1,\n"
             "         learning_rate_slope_range: 4, learning_rate_change_ratio: 0.0}\n"),
    "fbcnn": ("", "  loss: null\n"
                  "  losses: {pixel: {type: L1Loss}, qf: {type: L1Loss, loss_weight: 0.001}}\n"),
    USER: (f"recipe: {USER}\n", ""),
}
ITERS, STOP_AFTER = 6, 3  # checkpoints every 2 iterations; the signal arrives during step 3


def _config(tiny_data, tmp_path, recipe):
    top, train = TINY[recipe]
    text = config_text(tiny_data, tmp_path / "runs", iters=ITERS, every=2, extra=top)
    text = text.replace("  log_every: 1\n", "  log_every: 1\n  loader: {workers: 0}\n" + train)
    text = text.replace("val: {every: 2}\n", "")
    if recipe == "zssr":
        image = sorted((tiny_data / "val").glob("v_rgb.png"))[0]
        text = text.replace(
            f"train: {{type: HRImageDataset, root: {tiny_data / 'train'}, gt_size: 16}}",
            f"train: {{type: ZSSRDataset, path: {image}, crop_size: 16}}")
        text = text.replace("  scheduler: {type: CosineAnnealingLR, T_max: 6, eta_min: 1e-4}\n", "")
    if recipe == "fbcnn":  # FBCNN at x1 on JPEG-compressed crops (their quality is its target)
        text = text.replace("scale: 2\n", "scale: 1\n").replace(
            f"train: {{type: HRImageDataset, root: {tiny_data / 'train'}, gt_size: 16}}",
            f"train: {{type: JPEGDataset, root: {tiny_data / 'train'}, gt_size: 8}}")
        text = re.sub(r"model: .*\n", "model: {type: FBCNN, nc: [4, 4, 4, 512], nb: 1}\n", text, count=1)
    if recipe == USER:
        (tmp_path / "user_recipes.py").write_text(USER_MODULE)
        text = "imports: [user_recipes]\n" + text
    path = tmp_path / f"{recipe}.yaml"
    path.write_text(text)
    return load_config(path, ["datasets.val=null"])


def _run(cfg, run_dir, resume=None, stop_after=None):
    """Trainer.fit() in `run_dir`; with stop_after, a real SIGTERM to this process during that
    step (the trainer's handler: finish the step, save, raise TrainingInterrupted)."""
    trainer = Trainer(cfg, run_dir=run_dir, resume=resume, progress=False)
    if stop_after is not None:
        step = trainer.recipe.step

        def signalled(batch, iteration, dry=False):
            if iteration + 1 == stop_after:
                os.kill(os.getpid(), signal.SIGTERM)
            return step(batch, iteration, dry)
        trainer.recipe.step = signalled
    trainer.fit()
    return trainer


def _flat(tree, prefix=""):
    """{dotted key: leaf} of nested dicts/lists (a checkpoint's state)."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, sub in enumerate(tree) for k, v in _flat(sub, f"{prefix}{i}.").items()}
    return {prefix[:-1]: tree}


def _losses(run_dir):
    with open(run_dir / "metrics.csv") as fh:
        return [{k: v for k, v in row.items() if k != "time_s"} for row in csv.DictReader(fh)]


@pytest.fixture
def user_module():
    yield
    RECIPES._items.pop(USER, None)  # the registry is process-wide: leave it as it was
    sys.modules.pop("user_recipes", None)


def test_every_recipe_has_a_tiny_config():
    missing = sorted(set(RECIPES.names()) - set(TINY))
    assert not missing, f"add a tiny config for recipe(s) {missing} to TINY"


@pytest.mark.parametrize("recipe", sorted(set(RECIPES.names()) | {USER}))
def test_every_recipe_resumes_bit_identical(recipe, tiny_data, tmp_path, user_module):
    from framework.engine.run.runfolder import TrainingInterrupted
    assert recipe in TINY, f"recipe {recipe!r} has no tiny config in TINY"
    cfg = _config(tiny_data, tmp_path, recipe)
    whole = _run(cfg, tmp_path / "whole")
    assert type(whole.recipe) is RECIPES.get(recipe)
    with pytest.raises(TrainingInterrupted):
        _run(cfg, tmp_path / "cut", stop_after=STOP_AFTER)
    cut = sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir())
    assert cut == ["iter_00000002.safetensors", f"iter_{STOP_AFTER:08d}.safetensors"]
    resumed = _run(cfg, tmp_path / "cut", resume="auto")
    assert whole.iteration == resumed.iteration == ITERS
    expected, got = (_flat(dict(zip(("nets", "states"), t.recipe.state())))
                     for t in (whole, resumed))
    assert sorted(expected) == sorted(got)
    assert any(k.startswith("states.optimizer.state.") for k in expected)
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == got[key].dtype and value.tobytes() == got[key].tobytes(), key
        else:
            assert value == got[key], key
    if recipe == "zssr":  # the policy's records came through the checkpoint
        assert resumed.recipe.policy.steps == list(range(ITERS))
        assert resumed.recipe.policy.changes == [0, 5] and resumed.recipe.lr == 1e-3
    if recipe == USER:
        assert resumed.recipe.count == ITERS
    assert _losses(tmp_path / "whole") == _losses(tmp_path / "cut")
