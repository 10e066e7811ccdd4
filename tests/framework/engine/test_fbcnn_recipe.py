"""recipe fbcnn (FBCNN's ModelFBCNN): a config with train.losses.qf trains with it; one step is
FBCNN's (L1 on the image + 0.001 L1 on the predicted qf against the batch's (100 - QF) / 100, then
Adam) against the torch twin of the original network on the same batch; its config errors."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.config.schema import load_config
from framework.io.config import ConfigError

FBCNN = "{type: FBCNN, nc: [4, 4, 4, 512], nb: 1}"


def _config(tmp_path, tiny_data, model=FBCNN, losses="{pixel: {type: L1Loss}, qf: {type: L1Loss, "
            "loss_weight: 0.001}}", train_data=None):
    path = tmp_path / "fbcnn.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: fbcnn
        scale: 1
        seed: 3
        run_root: {tmp_path / 'runs'}
        model: {model}
        datasets:
          train: {train_data or f'{{type: JPEGDataset, root: {tiny_data / "train"}, gt_size: 8}}'}
        train:
          total_iters: 1
          batch_size: 2
          optimizer: {{type: Adam, lr: 1.0e-3}}
          losses: {losses}
        """))
    return path


def test_one_step_is_fbcnns(tmp_path, tiny_data):
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    cfg = load_config(_config(tmp_path, tiny_data))
    trainer = Trainer(cfg, progress=False)
    recipe = trainer.recipe
    assert type(recipe).__name__ == "FBCNNRecipe"
    batch = trainer.loader.get_batch(0)
    assert batch["qf"].shape == (2, 1)
    spec = {**cfg["model"], "scale": 1}
    twin = twins.twin_of(recipe.model, spec, dtype=torch.float32)
    values = recipe.step(batch, 0)
    lq, gt, qf = (torch.from_numpy(np.asarray(batch[k], np.float32)) for k in ("lq", "gt", "qf"))
    image, qf_est = twin.forward_qf(lq)
    l_pix = torch.nn.functional.l1_loss(image, gt)
    l_qf = 0.001 * torch.nn.functional.l1_loss(qf_est, qf)
    opt = torch.optim.Adam(twin.parameters(), lr=1e-3)
    opt.zero_grad()
    (l_pix + l_qf).backward()
    opt.step()
    np.testing.assert_allclose([values["l_g_pix"], values["l_g_qf"], values["loss"]],
                               [l_pix.item(), l_qf.item(), (l_pix + l_qf).item()], rtol=1e-5)
    theirs = dict(twin.named_parameters())
    for k in ("qf_pred.7.weight", "qf_embed.0.weight", "m_tail.bias", "to_beta_1.0.bias"):
        moved = np.abs(theirs[k].detach().numpy() - recipe.model.state_dict()[k]).max()
        assert moved < 1e-6, k
    assert np.abs(recipe.model.state_dict()["qf_pred.7.bias"]).max() > 0  # the QF loss reached it
    assert recipe.columns() == ["l_g_pix", "l_g_qf"]


@pytest.mark.parametrize("kw,message", [
    ({"losses": "[{type: L1Loss}, {type: L1Loss, loss_weight: 0.001}]"}, None),
    ({"model": "{type: ESPCN, num_feat: [4, 4]}"}, "recipe fbcnn: model ESPCN predicts no quality"),
    ({"train_data": "{{type: GaussianNoiseDataset, root: {root}, sigma: 25, gt_size: 8}}"},
     "recipe fbcnn: the training batches carry no qf"),
])
def test_errors(tmp_path, tiny_data, kw, message):
    if "train_data" in kw:
        kw["train_data"] = kw["train_data"].format(root=tiny_data / "train")
    path = _config(tmp_path, tiny_data, **kw)
    if message is None:  # the list spelling has no qf role: recipe sr, and a plain L1 pair
        cfg = load_config(path)
        assert type(Trainer(cfg, progress=False).recipe).__name__ == "SRRecipe"
        with pytest.raises(ConfigError, match=r"recipe fbcnn takes its QF loss as the role"):
            load_config(path, ["recipe=fbcnn"])
        return
    with pytest.raises((ValueError, ConfigError), match=message):
        trainer = Trainer(load_config(path), progress=False)
        trainer.recipe.step(trainer.loader.get_batch(0), 0)
