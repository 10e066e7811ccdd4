"""FBCNN's training (jiaxi-jiang/FBCNN models/model_fbcnn.py, ModelFBCNN): the image loss plus a
loss on the predicted quality factor.

One step, as ModelFBCNN.optimize_parameters: (image, qf_est) = model.forward_qf(lq) (the original's
pair: FBCNN's forward returns the image only); G_loss = the generator's terms on the image
(train.loss, or train.losses.pixel / perceptual: G_lossfn, L1 in FBCNN's options), QF_loss =
train.losses.qf(qf_est, qf) with qf = (100 - QF) / 100 from the dataset (JPEGDataset; FBCNN's
options: QF_lossfn l1, QF_lossfn_weight 0.001, so `{type: L1Loss, loss_weight: 0.001}`); their sum
is backpropagated and one optimizer step taken, then the EMA. A batch without a finite qf trains on
G_loss alone (FBCNN's NaN check). metrics.csv logs `loss`, l_g_pix and l_g_qf. Under train.capture:
auto the step (forward_qf, the terms, the backward) is captured as the sr recipe's, one graph with
the QF term and one without (the batch's qf decides which, outside the graph).
"""
from __future__ import annotations

import numpy as np

from ....registry import LOSSES, RECIPES
from ....tensor import Tensor
from ...config.fields import Block
from .base import Recipe, total
from .terms import is_list

__all__ = ["FBCNNRecipe"]


@RECIPES.register("fbcnn")
class FBCNNRecipe(Recipe):
    """`recipe: fbcnn`, the recipe of every config with train.losses.qf (the module docstring)."""

    SCHEMA = {"train": {"losses": {"qf": Block(LOSSES, None)}}}
    UNUSED = {"train.losses.qf": "a QF loss needs a model that predicts the quality factor and a "
                                 "dataset that gives it: recipe fbcnn (FBCNN, JPEGDataset)"}
    TERMS = ("l_g_pix", "l_g_percep", "l_g_style", "l_g_qf")

    def build(self) -> None:
        if not callable(getattr(self.model, "forward_qf", None)):
            raise ValueError(f"recipe fbcnn: model {self.model_spec['type']} predicts no quality "
                             f"factor (no forward_qf): use FBCNN")

    def columns(self) -> list[str]:
        return [c for c in self.TERMS if c in ("l_g_qf", "l_g_pix") or
                c == "l_g_percep" and "perceptual" in self.criteria or
                c == "l_g_style" and "perceptual" in self.criteria]

    def step(self, batch: dict, iteration: int, dry: bool = False):
        if "qf" not in batch:
            raise ValueError("recipe fbcnn: the training batches carry no qf (the JPEG quality "
                             "target): use datasets.train: {type: JPEGDataset, ...}")
        lq, targets = self.tensors(batch)
        qf_gt = np.asarray(batch["qf"], dtype=self.dtype).reshape(-1, 1)
        self.optimizer.zero_grad()
        roles, with_qf = tuple(targets), bool(np.isfinite(qf_gt).all())

        def run(lq, qf, *ts):
            image, qf_est = self.model.forward_qf(lq)
            terms = self.generator_terms(image, dict(zip(roles, ts)))
            if with_qf:
                terms["l_g_qf"] = self.criteria["qf"](qf_est, qf)
            return {"loss": total(terms), **terms}

        # the loss and its backward, captured or eager (base.generator_backward's way); with_qf
        # is part of the key: a batch without a finite qf has a graph of its own
        terms = self.capture(run, lq, Tensor(qf_gt), *targets.values(), key=(roles, with_qf))
        loss = terms.pop("loss")
        values = {"loss": float(loss.item()), **{k: float(t.item()) for k, t in terms.items()}}
        values, stepped = self.update("optimizer", values, iteration, "batch skipped", dry)
        if not stepped:
            return None
        if self.ema is not None:
            self.ema.update(iteration + 1)
        return values

    @classmethod
    def claims(cls, cfg: dict) -> bool:
        losses = (cfg.get("train") or {}).get("losses")
        return isinstance(losses, dict) and losses.get("qf") is not None

    @classmethod
    def check_config(cls, cfg: dict, where, chosen: bool) -> list[str]:
        """With this recipe: train.losses.qf set, in the roles' spelling (its own role)."""
        if not chosen:
            return []
        t = cfg["train"]
        if is_list(t):
            return [f"{where('train.losses')}: recipe fbcnn takes its QF loss as the role "
                    f"train.losses.qf (the roles' spelling: losses: {{pixel: ..., qf: ...}})"]
        if (t.get("losses") or {}).get("qf") is None:
            return [f"{where('train.losses.qf')}: recipe fbcnn trains the QF predictor: give its "
                    f"loss (FBCNN's: {{type: L1Loss, loss_weight: 0.001}})"]
        return []
