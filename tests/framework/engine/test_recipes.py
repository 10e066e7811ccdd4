"""Training recipes (framework/engine/recipes): which one a config trains with, each recipe's keys
checked against the others', and a new kind of training added as a recipe plus its schema block
from a user's module (a teacher for distillation), without touching the loop or the schema."""
import csv
import re
import sys
import textwrap

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.config.fields import Field
from framework.engine.run.recipes import Recipe
from framework.engine.config.schema import full_schema, load_config
from framework.weights import checkpoint as ckpt
from framework.io.config import ConfigError
from framework.registry import RECIPES

from .conftest import config_text

D = "{type: UNetDiscriminatorSN, num_in_ch: 3, num_feat: 4}"
GAN = "{type: GANLoss, gan_type: vanilla}"


@pytest.fixture
def config(make_config):
    def make(*lines, name="cfg.yaml", **kw):
        path = make_config(name, **kw)
        path.write_text(path.read_text() + "".join(line + "\n" for line in lines))
        return path
    return make


def test_the_recipe_follows_the_config_unless_it_says(config):
    assert type(Trainer(load_config(config()), progress=False).recipe).__name__ == "SRRecipe"
    gan = load_config(config(f"model_d: {D}"), ["train.optimizer_d={type: Adam, lr: 1.0e-3}",
                                                f"train.losses={{gan: {GAN}}}"])
    assert gan["recipe"] is None and type(Trainer(gan, progress=False).recipe).__name__ == \
        "GANRecipe"


@pytest.mark.parametrize("lines,overrides,message", [
    (["recipe: gan"], [], "model_d: missing: recipe gan trains a discriminator"),
    ([f"model_d: {D}", "recipe: sr"], [],
     "model_d: set, but the 'sr' recipe does not use it (a key of recipe: gan)"),
    ([], ["train.net_d_iters=3"],
     "train.net_d_iters: set, but the 'sr' recipe does not use it (a key of recipe: gan)"),
    ([], ["train.optimizer_d={type: Adam, lr: 1.0e-3}"],
     "train.optimizer_d: set, but there is no model_d to train"),
    (["recipe: gna"], [], "recipe: 'gna' is not one of ['fbcnn', 'gan', 'sr', 'zssr']; did you mean 'gan'?"),
])
def test_keys_of_another_recipe_are_errors_naming_it(config, lines, overrides, message):
    path = config(*lines)
    with pytest.raises(ConfigError) as exc:
        load_config(path, overrides)
    assert f"{path}: {message}" in str(exc.value), str(exc.value)


@pytest.mark.parametrize("model_d, message", [
    ("{type: UNetDiscriminatorSN, num_in_ch: 1, num_feat: 4}",
     "model_d: UNetDiscriminatorSN takes 1 channel(s) but the generator makes 3 (set "
     "model_d.num_in_ch to 3)"),
    ("{type: VGGStyleDiscriminator, num_in_ch: 3, num_feat: 4}",
     "model_d: VGGStyleDiscriminator takes inputs of exactly 128 px, square, but the training "
     "crops are datasets.train.gt_size 16"),
])
def test_a_discriminator_that_cannot_judge_the_generator_is_a_config_error(config, model_d,
                                                                            message):
    """The discriminator's card against the generator's and the crops (before: a shape error at
    the first step)."""
    path = config(f"model_d: {model_d}")
    with pytest.raises(ConfigError) as exc:
        load_config(path, ["train.optimizer_d={type: Adam, lr: 1.0e-3}",
                           f"train.losses={{gan: {GAN}}}"])
    assert f"{path}: {message}" in str(exc.value), str(exc.value)


def test_a_gan_checkpoint_holds_what_it_always_held(config, tmp_path):
    """The keys of the safetensors checkpoint are those the GANTrainer wrote (old checkpoints load:
    checked by resuming files written before the recipes)."""
    path = config(f"model_d: {D}", iters=1, every=1)
    cfg = load_config(path, ["train.optimizer_d={type: Adam, lr: 1.0e-3}",
                             f"train.losses={{pixel: {{type: L1Loss}}, gan: {GAN}}}",
                             "train.ema_decay=0.9", "datasets.val=null"])
    Trainer(cfg, progress=False).fit()
    state = ckpt.load_checkpoint(tmp_path / "runs" / "tiny" / "checkpoints" /
                                 "iter_00000001.safetensors")
    assert state["nets"] == ["model_ema", "net_d"] and state["states"] == ["optimizer_d",
                                                                            "scheduler_d"]
    assert state["optimizer"]["state"] and state["optimizer_d"]["state"]
    assert state["scheduler"] is not None and state["scheduler_d"] is None


# a user's module: a recipe for distillation from a frozen teacher, with its own keys
DISTILL = '''
from framework.engine.config.fields import Block, Field
from framework.engine.run.recipes import SRRecipe, total
from framework.registry import LOSSES, MODELS, RECIPES


@RECIPES.register("distill")
class DistillRecipe(SRRecipe):
    SCHEMA = {"teacher": Block(MODELS, None, shared=("scale",)),
              "train": {"losses": {"distill": Block(LOSSES, None)},
                        "teacher_weight": Field(float, 1.0, minimum=0)}}
    TERMS = ("l_g_pix", "l_distill")

    @classmethod
    def claims(cls, cfg):
        return cfg.get("teacher") is not None

    @classmethod
    def check_config(cls, cfg, where, chosen):
        if chosen and cfg["train"]["losses"]["distill"] is None:
            return [f"{where('train.losses.distill')}: missing: the teacher's loss"]
        return []

    def build(self):
        self.teacher = MODELS.build({**self.cfg["teacher"], "scale": self.scale}).to(self.dtype)
        self.teacher.eval()

    def step(self, batch, iteration, dry=False):
        lq, targets = self.tensors(batch)
        self.optimizer.zero_grad()
        sr = self.model(lq)
        terms = self.generator_terms(sr, targets)
        weight = self.cfg["train"]["teacher_weight"]
        terms["l_distill"] = self.criteria["distill"](sr, self.teacher(lq).detach()) * weight
        loss = total(terms)
        loss.backward()
        values, stepped = self.update(
            "optimizer", {"loss": float(loss.item()), **{k: float(t.item())
                                                         for k, t in terms.items()}},
            iteration, "batch skipped", dry)
        return values if stepped else None
'''


@pytest.fixture
def distill_module(tmp_path):
    (tmp_path / "my_distill.py").write_text(DISTILL)
    yield "my_distill"
    RECIPES._items.pop("distill", None)  # the registry is process-wide: leave it as it was
    sys.modules.pop("my_distill", None)


def test_a_new_kind_of_training_is_a_recipe_plus_its_schema_block(distill_module, tiny_data,
                                                                 tmp_path):
    text = config_text(tiny_data, tmp_path / "runs", iters=2, every=2, extra=textwrap.dedent(f"""\
        imports: [{distill_module}]
        teacher: {{type: FSRCNN, d: 8, s: 4, m: 1}}
        """)).replace("  log_every: 1\n", "  log_every: 1\n  losses: {pixel: {type: L1Loss}, "
                                           "distill: {type: MSELoss}}\n  teacher_weight: 0.5\n")
    path = tmp_path / "distill.yaml"
    path.write_text(text)
    cfg = load_config(path)
    assert "teacher" in full_schema()[0] and cfg["train"]["teacher_weight"] == 0.5
    t = Trainer(cfg, progress=False)
    assert type(t.recipe).__name__ == "DistillRecipe"
    teacher = {k: v.copy() for k, v in t.recipe.teacher.state_dict().items()}
    assert t.fit()["iteration"] == 2
    with open(tmp_path / "runs" / "tiny" / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["iteration"] for r in rows] == ["1", "2"]
    assert all(float(r["l_distill"]) > 0 and float(r["l_g_pix"]) > 0 for r in rows)
    for k, v in t.recipe.teacher.state_dict().items():  # frozen: the student alone trains
        np.testing.assert_array_equal(v, teacher[k])
    # its keys in a config that trains with another recipe: an error naming the recipe
    other = tmp_path / "other.yaml"
    other.write_text(text.replace("teacher: {type: FSRCNN, d: 8, s: 4, m: 1}\n", "recipe: sr\n"
                                  "teacher: {type: FSRCNN, d: 8, s: 4, m: 1}\n"))
    with pytest.raises(ConfigError, match="teacher: set, but the 'sr' recipe does not use it "
                                          r"\(a key of recipe: distill\)"):
        load_config(other)


@pytest.mark.parametrize("schema,message", [
    ({"train": {"optimizer": object()}}, "recipe bad: config key train.optimizer is already taken"),
    ({"teacher": Field(str)}, "recipe bad: config key teacher needs a default (the configs of "
                              "other recipes do not set it)"),
])
def test_a_recipe_whose_keys_clash_or_have_no_default_is_refused(config, schema, message):
    RECIPES.register("bad", type("BadRecipe", (Recipe,), {"SCHEMA": schema}))
    try:
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(config())
    finally:
        RECIPES._items.pop("bad")
