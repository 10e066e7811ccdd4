"""The generator's loss as data (framework/engine/run/recipes/terms.py): `train.losses` as one list of
typed entries (traiNNer-redux's), the old spellings read into the same terms, GAN losses known by
their class's `is_gan`, and train.ema_power's warm-up."""
import csv

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.run.recipes.terms import loss_terms
from framework.engine.config.schema import config_hash, load_config
from framework.io.config import ConfigError
from framework.nn import Linear
from framework.optim import EMA
from framework.registry import LOSSES

D = "{type: UNetDiscriminatorSN, num_in_ch: 3, num_feat: 4}"


@pytest.fixture
def config(make_config):
    def make(*lines, **kw):
        path = make_config("cfg.yaml", **kw)
        path.write_text(path.read_text() + "".join(line + "\n" for line in lines))
        return path
    return make


def _rows(tmp_path):
    with open(tmp_path / "runs" / "tiny" / "metrics.csv") as fh:
        return list(csv.DictReader(fh))


def test_an_extra_term_is_one_list_entry(config, tmp_path):
    """pixel + MSE: one more entry, no recipe; a weight-0 entry is off (traiNNer-redux's rule);
    each term is logged under traiNNer-redux's label and the loss is their sum."""
    cfg = load_config(config(iters=2, every=2), [
        "train.losses=[{type: L1Loss, loss_weight: 1.0}, {type: MSELoss, loss_weight: 0.5}, "
        "{type: CharbonnierLoss, loss_weight: 0}]", "datasets.val=null"])
    assert [t.column for t in loss_terms(cfg["train"])] == ["l_g_l1", "l_g_mse"]
    Trainer(cfg, progress=False).fit()
    rows = _rows(tmp_path)
    assert "l_g_charbonnier" not in rows[0] and len(rows) == 2
    for row in rows:
        assert float(row["loss"]) == pytest.approx(float(row["l_g_l1"]) + float(row["l_g_mse"]),
                                                   rel=1e-6)
        assert float(row["l_g_mse"]) > 0


def test_every_spelling_of_the_pixel_loss_trains_the_same(config, tmp_path):
    """No loss (L1Loss), train.loss, train.losses.pixel and the one-entry list: one term, the same
    weights after two steps."""
    weights = []
    for i, spelling in enumerate([[], ["train.loss={type: L1Loss}"],
                                  ["train.losses={pixel: {type: L1Loss}}"],
                                  ["train.losses=[{type: L1Loss, loss_weight: 1.0}]"]]):
        cfg = load_config(config(iters=2, every=2), [*spelling, "datasets.val=null",
                                                     f"run_root={tmp_path / str(i)}"])
        terms = loss_terms(cfg["train"])
        assert [(t.spec["type"], t.target, t.gan) for t in terms] == [("L1Loss", "gt", False)]
        t = Trainer(cfg, progress=False)
        t.fit()
        weights.append(np.concatenate([p.data.ravel() for p in t.model.parameters()]))
    for w in weights[1:]:
        np.testing.assert_array_equal(w, weights[0])


def test_the_roles_spelling_resolves_and_hashes_as_before(config):
    """An old config's resolved train section is what it always was (config_hash, hence resume
    without a note, depends on it): train.loss kept, the roles' mapping kept, no list."""
    cfg = load_config(config(), ["train.loss={type: L1Loss}"])
    assert cfg["train"]["loss"] == {"type": "L1Loss"}
    # the roles of the registered recipes (gan, fbcnn's qf), unset; the trainer's hash leaves the
    # keys added since out at their neutral values (ema_power, precision, losses.qf)
    assert cfg["train"]["losses"] == {"pixel": None, "perceptual": None, "gan": None, "qf": None}
    assert cfg["train"]["ema_power"] is None
    again = load_config(config(), ["train.losses={pixel: {type: L1Loss}}"])
    assert config_hash(again) != config_hash(cfg)  # the key written differs; the terms do not
    assert loss_terms(again["train"])[0].column == loss_terms(cfg["train"])[0].column == "l_g_pix"


@pytest.mark.parametrize("overrides,message", [
    (["train.loss={type: L1Loss}", "train.losses=[{type: MSELoss}]"],
     "train.loss: train.losses is a list, so the pixel loss is one of its entries"),
    (["train.losses=[{type: L1Loss, target: sharp}]"],
     "train.losses[0].target: 'sharp' is not one of ['gt', 'gt_usm']"),
    (["train.losses=[{type: L1Loss, target: gt_usm}]"],
     "train.losses[0].target: gt_usm is the sharpened GT, which the training set must produce"),
    (["train.losses=[{type: L1Loss, los_weight: 2}]"], "train.losses[0].los_weight: unknown"),
    (["train.losses=[{type: L1Loss, loss_weight: 0}]"],
     "train.losses: no generator loss with a loss_weight other than 0"),
    (["train.losses=[{type: L1Loss}, {type: GANLoss, gan_type: vanilla}]"],
     "train.losses[1]: a GAN loss needs a discriminator: add model_d"),
    (["train.losses=[{type: L1Loss}]", "train.gt_usm=[pixel]"],
     "train.gt_usm: train.losses is a list: say `target: gt_usm` on each entry"),
    (["train.losses=[7]"], "train.losses[0]: expected a mapping"),
])
def test_the_list_is_checked_entry_by_entry(config, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        load_config(config(), overrides)


class _Hinge:
    """A user's adversarial loss: known as one by its attribute, whatever its forward's names."""
    is_gan = True

    def __init__(self, loss_weight=1.0):
        self.loss_weight = loss_weight

    def __call__(self, pred, real, is_disc=False):
        x = -pred if real else pred
        return (1.0 + x).relu().mean() * (1.0 if is_disc else self.loss_weight)


@pytest.fixture
def hinge():
    LOSSES.register("UserHinge")(_Hinge)
    yield
    LOSSES._items.pop("UserHinge")


def test_a_gan_loss_is_known_by_its_class_attribute(config, tmp_path, hinge):
    cfg = load_config(config(f"model_d: {D}", iters=1, every=1), [
        "train.optimizer_d={type: Adam, lr: 1.0e-3}", "datasets.val=null",
        "train.losses=[{type: L1Loss}, {type: UserHinge, loss_weight: 0.1}]"])
    terms = loss_terms(cfg["train"])
    assert [(t.column, t.gan) for t in terms] == [("l_g_l1", False), ("l_g_userhinge", True)]
    t = Trainer(cfg, progress=False)
    assert t.recipe.columns() == ["l_g_l1", "l_g_userhinge", "l_d_real", "l_d_fake", "out_d_real",
                                  "out_d_fake"]
    t.fit()
    row = _rows(tmp_path)[0]
    assert float(row["loss"]) == pytest.approx(float(row["l_g_l1"]) + float(row["l_g_userhinge"]),
                                               rel=1e-6)


def test_ema_power_warms_the_decay_up_as_ema_pytorch():
    """ema-pytorch's EMA (traiNNer-redux's, update_after_step 0, inv_gamma 1): updates 1 and 2
    copy the weights, update k then lerps with decay min(beta, 1 - k^-power)."""
    net = Linear(2, 1)
    ema = EMA(net, 0.999, power=0.75)
    expected = net.weight.data.astype(np.float64).copy()
    for k in range(1, 7):
        net.weight.data[...] = k * 0.5 + net.weight.data
        ema.update(k)
        w = net.weight.data.astype(np.float64)
        decay = 0.0 if k <= 2 else min(0.999, 1 - k ** -0.75)
        expected = decay * expected + (1 - decay) * w
        np.testing.assert_allclose(ema.module.weight.data, expected, rtol=1e-6)
    assert EMA(net, 0.9).current_decay(None) == 0.9  # BasicSR's: constant
    with pytest.raises(ValueError, match="step is needed with power"):
        ema.update()


def test_target_gt_usm_in_the_list_is_gt_usm_of_the_roles(tmp_path, tiny_data):
    """`target: gt_usm` on a list entry compares with the sharpened GT exactly as the roles'
    train.gt_usm: [pixel] does (the same weights after a step), and not as the plain GT."""
    def run(i, losses):
        path = tmp_path / f"usm{i}.yaml"
        path.write_text(f"""\
name: usm
scale: 2
run_root: {tmp_path / str(i)}
model: {{type: FSRCNN, d: 8, s: 4, m: 1}}
datasets:
  train: {{type: RealESRGANDataset, root: {tiny_data / 'train'}, gt_size: 32, crop_pad_size: 48,
           gt_usm: true}}
train:
  total_iters: 1
  batch_size: 2
  optimizer: {{type: Adam, lr: 1.0e-2}}
{losses}""")
        t = Trainer(load_config(path), progress=False)
        t.fit()
        return np.concatenate([p.data.ravel() for p in t.model.parameters()])

    roles = run(0, "  losses: {pixel: {type: L1Loss}}\n  gt_usm: [pixel]\n")
    listed = run(1, "  losses: [{type: L1Loss, target: gt_usm}]\n")
    plain = run(2, "  losses: [{type: L1Loss}]\n")
    np.testing.assert_array_equal(listed, roles)
    assert np.abs(plain - roles).max() > 1e-6


def test_the_resume_hash_leaves_the_unset_qf_role_out(config):
    """recipe fbcnn added the role train.losses.qf (null unless set): a checkpoint written before
    it existed must resume without the "config differs" note, so the hash leaves it out."""
    import copy
    from types import SimpleNamespace

    from framework.engine.run.trainer import Trainer
    cfg = load_config(config(), ["train.loss={type: L1Loss}"])
    before = copy.deepcopy(cfg)
    del before["train"]["losses"]["qf"]
    hashed = Trainer._hashed_config(SimpleNamespace(cfg=cfg))
    assert "qf" not in hashed["train"]["losses"]
    assert config_hash(hashed) == config_hash(Trainer._hashed_config(SimpleNamespace(cfg=before)))
    given = load_config(config(), ["train.losses={pixel: {type: L1Loss}, qf: {type: L1Loss}}"])
    assert Trainer._hashed_config(SimpleNamespace(cfg=given))["train"]["losses"]["qf"] is not None
