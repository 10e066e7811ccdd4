"""ZSSR (Shocher, Cohen, Irani, CVPR 2018): train an image-specific network on the test image alone.

The data are a ZSSRDataset (framework/data/zssr.py: fathers from the image's pyramid, sons
downscaled by its kernel); one step is an L1 step on one pair (train.loss, L1Loss by default; Adam,
lr 1e-3 in ZSSR's configs); the learning rate follows ZSSR's policy (`LearningRatePolicy`, the
official `learning_rate_policy`), which also decides when training is over (`done`: the loop
stops there, before train.total_iters, ZSSR's max_iters).

The policy needs the reconstruction error of the image itself: every `run_test_every` iterations
the network upscales the son of the whole image (the image downscaled by its kernel) and the MSE
against the image is recorded (ZSSR's quick_test, mse_rec). The recipe builds that image from
datasets.train (or is handed the dataset: `recipe.data = ...`, the srgrad-zssr command's way).
Its state (the records and the changes) is checkpointed with the networks, so a resumed run makes
the same decisions.
"""
from __future__ import annotations

import numpy as np

from ....autograd import no_grad
from ....registry import DATASETS, RECIPES
from ....tensor import Tensor
from ...config.fields import Field
from .base import Recipe, config_key
from .terms import loss_terms

__all__ = ["ZSSRRecipe", "LearningRatePolicy"]

_TEST_STREAM = 0x7E57  # the son of the test image draws its noise from (seed, iteration, this)


class LearningRatePolicy:
    """ZSSR's learning_rate_policy. `record(iteration, mse)` every `run_test_every` iterations;
    then `update(iteration, lr)` after each step returns the learning rate to use: every
    `check_every` iterations (at iteration + 1 divisible by it), once more than `min_iters` passed
    since the last change, a line is fitted to the last slope_range / run_test_every records
    (np.polyfit with its covariance, as ZSSR); when -change_ratio x slope < the slope's standard
    deviation (the error no longer falls clearly) the rate is divided by 10. Training is over
    (`done(lr)`) once the rate is below `min_lr`."""

    def __init__(self, check_every: int = 60, slope_range: int = 256, run_test_every: int = 50,
                 change_ratio: float = 1.5, min_iters: int = 256, min_lr: float = 9e-6):
        self.check_every, self.slope_range, self.run_test_every = check_every, slope_range, \
            run_test_every
        self.change_ratio, self.min_iters, self.min_lr = change_ratio, min_iters, min_lr
        self.steps: list[int] = []
        self.mse: list[float] = []
        self.changes: list[int] = [0]  # iterations where the rate changed (0: the start)

    def due(self, iteration: int) -> bool:
        """Whether the reconstruction test runs after step `iteration` (0-based)."""
        return iteration % self.run_test_every == 0

    def record(self, iteration: int, mse: float) -> None:
        self.steps.append(int(iteration))
        self.mse.append(float(mse))

    def update(self, iteration: int, lr: float) -> float:
        if (iteration + 1) % self.check_every or iteration - self.changes[-1] <= self.min_iters:
            return lr
        n = int(self.slope_range / self.run_test_every)
        x, y = np.array(self.steps[-n:], np.float64), np.array(self.mse[-n:], np.float64)
        if len(x) < 4:  # polyfit's covariance needs 4 points (ZSSR's ranges always give 5)
            return lr
        (slope, _), cov = np.polyfit(x, y, 1, cov=True)
        if -self.change_ratio * slope < np.sqrt(cov[0, 0]):
            self.changes.append(int(iteration))
            return lr / 10
        return lr

    def done(self, lr: float) -> bool:
        return lr < self.min_lr

    def state_dict(self) -> dict:
        return {"steps": list(self.steps), "mse": list(self.mse), "changes": list(self.changes)}

    def load_state_dict(self, state: dict) -> None:
        self.steps = [int(v) for v in state["steps"]]
        self.mse = [float(v) for v in state["mse"]]
        self.changes = [int(v) for v in state["changes"]]


@RECIPES.register("zssr")
class ZSSRRecipe(Recipe):
    """`recipe: zssr`, the recipe of a config whose datasets.train is a ZSSRDataset (see the module
    docstring). metrics.csv logs the L1 loss; the reconstruction MSE goes to `policy.mse`."""

    SCHEMA = {"train": {"zssr": {  # ZSSR's configs.py names and defaults
        "learning_rate_policy_check_every": Field(int, 60, minimum=1),
        "learning_rate_slope_range": Field(int, 256, minimum=1),
        "run_test_every": Field(int, 50, minimum=1),
        "learning_rate_change_ratio": Field(float, 1.5, minimum=0),
        "min_iters": Field(int, 256, minimum=0),
        "min_learning_rate": Field(float, 9e-6, minimum=0),
    }}}
    UNUSED = {f"train.zssr.{k}": "set, but only recipe: zssr (a ZSSRDataset) uses it"
              for k in SCHEMA["train"]["zssr"]}

    def build(self) -> None:
        z = self.cfg["train"]["zssr"]
        self.policy = LearningRatePolicy(
            z["learning_rate_policy_check_every"], z["learning_rate_slope_range"],
            z["run_test_every"], z["learning_rate_change_ratio"], z["min_iters"],
            z["min_learning_rate"])
        self._data = None

    @property
    def data(self):
        """The ZSSRDataset whose image the reconstruction test uses (built from datasets.train
        on first use unless handed one)."""
        if self._data is None:
            with config_key("datasets.train"):
                self._data = DATASETS.build(self.cfg["datasets"]["train"], scale=self.scale)
        return self._data

    @data.setter
    def data(self, dataset) -> None:
        self._data = dataset

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def done(self) -> bool:
        return self.policy.done(self.lr)

    def step(self, batch: dict, iteration: int, dry: bool = False):
        lq, targets = self.tensors(batch)
        self.optimizer.zero_grad()
        loss, terms = self.generator_backward(lq, targets)
        (loss,) = terms.values()  # one term (the check): the pixel loss, which is also the sum
        values, stepped = self.update("optimizer", {"loss": float(loss.item())}, iteration,
                                      "pair skipped", dry)
        if dry or not stepped:
            return None if not stepped else values
        if self.ema is not None:
            self.ema.update(iteration + 1)
        if self.policy.due(iteration):
            self.policy.record(iteration, self.reconstruction_mse(iteration))
        self.set_lr(self.policy.update(iteration, self.lr))
        return values

    def reconstruction_mse(self, iteration: int) -> float:
        """MSE between the image and the network's SR of its son (ZSSR's mse_rec)."""
        data = self.data
        image = data.sources[-1][0]  # the current input (a gradual stage's: the last output)
        son = data.son(image, np.random.default_rng([self.cfg["seed"], iteration, _TEST_STREAM]))
        self.model.eval()
        try:
            with no_grad():
                sr = self.model(Tensor(son[None].astype(self.dtype))).data[0]
        finally:
            self.model.train()
        h, w = image.shape[1:]
        return float(np.mean((np.clip(sr[:, :h, :w], 0, 1) - image) ** 2))

    # -- state: the policy's records ride along with the optimizer's -------------------------
    def state(self):
        nets, states = super().state()
        states["lr_policy"] = self.policy.state_dict()
        return nets, states

    def check_state(self, state: dict, path) -> None:
        super().check_state(state, path)
        if not state.get("lr_policy"):
            from ....weights import CheckpointError
            raise CheckpointError(f"{path} holds no lr_policy state (not a checkpoint of a ZSSR "
                                  f"run?)")

    def load_state(self, state: dict, path) -> None:
        super().load_state(state, path)
        self.policy.load_state_dict(state["lr_policy"])

    # -- the config -----------------------------------------------------------------------------
    @classmethod
    def claims(cls, cfg: dict) -> bool:
        return (cfg.get("datasets") or {}).get("train", {}).get("type") == "ZSSRDataset"

    @classmethod
    def check_config(cls, cfg: dict, where, chosen: bool) -> list[str]:
        if not chosen:
            return []
        t, errors = cfg["train"], []
        if cfg["datasets"]["train"]["type"] != "ZSSRDataset":
            errors.append(f"{where('datasets.train')}: recipe zssr trains on one image's "
                          f"father/son pairs: type ZSSRDataset")
        if t["scheduler"] is not None:
            errors.append(f"{where('train.scheduler')}: the learning rate follows ZSSR's policy "
                          f"(train.zssr); remove the scheduler")
        for term in loss_terms(t)[1:]:
            errors.append(f"{where(term.key)}: ZSSR trains with the pixel loss only")
        return errors
