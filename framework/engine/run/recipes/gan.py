"""GAN training (Real-ESRGAN's RealESRGANModel / BasicSR's SRGANModel): a generator (`model`)
trained with pixel, perceptual and adversarial terms against a discriminator (`model_d`) that has
its own optimizer and scheduler.

One iteration, as BasicSR (`current_iter` = iteration + 1):
1. generator: sr = G(lq); when current_iter % net_d_iters == 0 and current_iter > net_d_init_iters,
   l_g_total = l_g_pix + l_g_percep + l_g_style + l_g_gan(D(sr), real) and a G step, with D's
   parameters frozen (no gradient computed for them);
2. discriminator, always: l_d_real = gan(D(gt_gan), real), l_d_fake = gan(D(sr.detach()), fake),
   both backpropagated, one D step;
3. the EMA of G, when train.ema_decay is set.
D runs in training mode throughout (spectral norm does one power iteration per forward: three per
iteration, as in BasicSR). metrics.csv logs each term, and out_d_real / out_d_fake (D's mean
output).

Under train.capture: auto both steps are captured: the generator's (G, its terms, D on sr with D
frozen, the backward into G) as the sr recipe's step, and the discriminator's (D on the real
target and on the detached sr, then the backward of l_d_real and of l_d_fake in turn, as BasicSR's
two .backward() calls: a Capture with two roots). Spectral norm's power iteration is an op with
state (nn/spectral_norm.py), so a replay updates D's u and v too. Both forwards of D run before
the two backward passes (BasicSR interleaves them): nothing the backward passes write is read by
the second forward, so the results are the same bits, eager or captured.

The sharpened target (train.gt_usm) is RealESRGANModel's: the USM of the cropped GT (its feed_data
sharpens self.gt again after paired_random_crop), not the crop of the sharpened HR image that
RealESRNetModel (the sr recipe) trains against; the two differ within the blur radius (25 px) of
the crop's border. The LR is degraded from the sharpened HR image in both (datasets.train.gt_usm).
"""
from __future__ import annotations

import numpy as np

from .... import nn
from ....capture import Capture
from ....card import card
from ....data.degradations import usm_sharp
from ....registry import LOSSES, MODELS, OPTIMIZERS, RECIPES, SCHEDULERS
from ...config.fields import Block, Field, check_pretrained, pretrained_section
from .base import Recipe, total
from .terms import is_gan_type, is_list, loss_terms

__all__ = ["GANRecipe", "is_gan_loss"]

_NO_D = "set, but there is no model_d to train"


def is_gan_loss(spec) -> bool:
    """Whether a LOSSES block is an adversarial loss (its class has `is_gan = True`: GANLoss),
    called (prediction, target_is_real, is_disc) as BasicSR's GANLoss."""
    return is_gan_type(spec["type"])


@RECIPES.register("gan")
class GANRecipe(Recipe):
    """`recipe: gan`, the recipe of every config with `model_d` (see the module docstring)."""

    SCHEMA = {
        # a discriminator (BasicSR's network_d)
        "model_d": Block(MODELS, None),
        "train": {
            "losses": {"gan": Block(LOSSES, None)},
            # BasicSR's optim_d, scheduler (its own copy), pretrain_network_d, net_d_iters,
            # net_d_init_iters
            "optimizer_d": Block(OPTIMIZERS, None, injected_first=True),
            "scheduler_d": Block(SCHEDULERS, None, injected_first=True),
            "pretrained_d": pretrained_section(),
            "net_d_iters": Field(int, 1, minimum=1),
            "net_d_init_iters": Field(int, 0, minimum=0),
        },
    }
    UNUSED = {
        "train.losses.gan": "a GAN loss needs a discriminator: add model_d (e.g. {type: "
                            "UNetDiscriminatorSN, num_in_ch: 3})",
        "train.optimizer_d": _NO_D,
        "train.scheduler_d": _NO_D,
        "train.pretrained_d.path": "set, but there is no model_d",
    }
    TERMS = ("l_g_pix", "l_g_percep", "l_g_style", "l_g_gan", "l_d_real", "l_d_fake",
             "out_d_real", "out_d_fake")
    PRETRAINED = {"model": "pretrained", "net_d": "pretrained_d"}

    def build(self) -> None:
        self.net_d = self.add_network("net_d", self.cfg["model_d"], "model_d")
        self.optimizer_d, self.scheduler_d = self.add_optimizer("optimizer_d", self.net_d)

    def build_capture(self):
        capture = super().build_capture()
        modules = [self.net_d] + [c for c in self.criteria.values() if isinstance(c, nn.Module)]
        # the discriminator's step: the backward of l_d_real, then of l_d_fake
        self.capture_d = Capture(modules, enabled=capture.enabled, roots=("l_d_real", "l_d_fake"))
        self.capture_d.reason = capture.reason
        return capture

    def capture_modules(self) -> list:
        return super().capture_modules() + [self.net_d]  # D judges sr inside the generator's step

    def capture_summary(self) -> str:
        text = super().capture_summary()
        return text if not self.capture.enabled else f"{text}; the discriminator's step too"

    def columns(self) -> list[str]:
        if not is_list(self.cfg["train"]):
            return list(self.TERMS)
        return [c for t in self.terms for c in (t.column, *t.extras)] + list(self.TERMS[-4:])

    def sharpened(self, batch: dict, gt: np.ndarray) -> np.ndarray:
        return usm_sharp(gt)

    def generator_updates(self, iteration: int) -> bool:
        it, tcfg = iteration + 1, self.cfg["train"]
        return it % tcfg["net_d_iters"] == 0 and it > tcfg["net_d_init_iters"]

    def step(self, batch: dict, iteration: int, dry: bool = False):
        """One generator step (when due) and one discriminator step; returns every term, or None
        when a non-finite value skips the iteration."""
        lq, targets = self.tensors(batch)
        adversarial = next(t for t in self.terms if t.gan)
        gan = self.criteria[adversarial.role]
        values = {}
        # -- generator
        self.optimizer.zero_grad()
        self.net_d.requires_grad_(False)
        if dry or self.generator_updates(iteration):
            roles = tuple(targets)

            def run(lq, *ts):
                sr = self.model(lq)
                terms = self.generator_terms(sr, dict(zip(roles, ts)))
                terms[adversarial.column] = gan(self.net_d(sr), True, is_disc=False)
                return {"loss": total(terms), **terms, "sr": sr}

            # G's loss and its backward, captured or eager (base.generator_backward's way)
            terms = self.capture(run, lq, *targets.values(), key=roles)
            loss, sr = terms.pop("loss"), terms.pop("sr")
            values, stepped = self.update(
                "optimizer", {"loss": float(loss.item()), **{k: float(t.item())
                                                             for k, t in terms.items()}},
                iteration, "iteration skipped", dry)
            if not stepped:
                self.net_d.requires_grad_(True)
                return None
        else:
            sr = self.model(lq)
            if self.scheduler is not None:
                self.scheduler.step()  # the schedule follows the iteration, stepped or not
        self.net_d.requires_grad_(True)
        # -- discriminator: real, then fake (the generator's output, cut from its graph)
        self.optimizer_d.zero_grad()

        def run_d(target, sr):
            real, fake = self.net_d(target), self.net_d(sr)
            return {"l_d_real": gan(real, True, is_disc=True),
                    "l_d_fake": gan(fake, False, is_disc=True), "real": real, "fake": fake}

        out = self.capture_d(run_d, targets[adversarial.target], sr.detach())
        l_d_real, l_d_fake, real, fake = out["l_d_real"], out["l_d_fake"], out["real"], out["fake"]
        d_values, stepped = self.update(
            "optimizer_d", {"l_d_real": float(l_d_real.item()), "l_d_fake": float(l_d_fake.item()),
                            "out_d_real": float(real.data.mean()),
                            "out_d_fake": float(fake.data.mean())},
            iteration, "discriminator step skipped", dry)
        if not stepped and self.scheduler_d is not None:
            self.scheduler_d.step()
        if self.ema is not None:
            self.ema.update(iteration + 1)
        return {**values, **d_values}

    # -- the config -----------------------------------------------------------------------------
    @classmethod
    def claims(cls, cfg: dict) -> bool:
        return cfg.get("model_d") is not None

    @classmethod
    def check_config(cls, cfg: dict, where, chosen: bool) -> list[str]:
        """GAN losses only under train.losses.gan (in any config); with this recipe: model_d, its
        GAN loss and its optimizer."""
        t, errors = cfg["train"], []
        if is_list(t):
            gans = [term for term in loss_terms(t) if term.gan]
            for term in gans[1:]:
                errors.append(f"{where(term.key)}: a second GAN loss; the generator trains "
                              f"against one discriminator with one GAN loss")
            if gans and cfg["model_d"] is None:
                errors.append(f"{where(gans[0].key)}: {cls.UNUSED['train.losses.gan']}")
            if chosen and cfg["model_d"] is not None and not gans:
                errors.append(f"{where('model_d')}: a discriminator needs a GAN loss in "
                              f"train.losses (e.g. {{type: GANLoss, gan_type: vanilla, "
                              f"loss_weight: 0.1}})")
        else:
            for term, spec in t["losses"].items():
                if spec is not None and is_gan_loss(spec) != (term == "gan"):
                    errors.append(f"{where(f'train.losses.{term}')}: {spec['type']} " + (
                        "is not a GAN loss (type GANLoss)"
                        if term == "gan" else "is a GAN loss: it belongs under train.losses.gan"))
            if t["loss"] is not None and is_gan_loss(t["loss"]):
                errors.append(f"{where('train.loss')}: {t['loss']['type']} is a GAN loss: put it "
                              f"under train.losses.gan, with model_d")
        if not chosen:
            return errors
        if cfg["model_d"] is None:
            errors.append(f"{where('model_d')}: missing: recipe gan trains a discriminator (e.g. "
                          f"{{type: UNetDiscriminatorSN, num_in_ch: 3}})")
        elif not is_list(t) and t["losses"]["gan"] is None:
            errors.append(f"{where('model_d')}: a discriminator needs train.losses.gan (e.g. "
                          f"{{type: GANLoss, gan_type: vanilla, loss_weight: 0.1}})")
        if cfg["model_d"] is not None:
            errors += _discriminator_fits(cfg, where)
        if t["optimizer_d"] is None:
            errors.append(f"{where('train.optimizer_d')}: missing: model_d is trained by its own "
                          f"optimizer (e.g. {{type: Adam, lr: 1e-4, betas: [0.9, 0.99]}})")
        return errors + check_pretrained(t, "pretrained_d", where)


def _discriminator_fits(cfg: dict, where) -> list[str]:
    """model_d judges what the generator makes: its card's channels are the generator's output
    channels, and the training crops (datasets.train.gt_size) meet its size requirements (a
    VGG-style discriminator takes exactly its input_size, the U-Net multiples of 8). Caught here,
    not as a shape error at the first step; specs the model checks refuse are left to them."""
    try:
        gen = card({**cfg["model"], "scale": cfg["scale"]})
        disc = card(cfg["model_d"])
    except (KeyError, ValueError, TypeError, ArithmeticError, LookupError, AttributeError):
        return []
    errors, name = [], cfg["model_d"]["type"]
    if disc.in_channels != gen.out_channels:
        keys = " and ".join(f"model_d.{k}" for k in disc.channel_keys) or "its channels"
        errors.append(f"{where('model_d')}: {name} takes {disc.in_channels} channel(s) but the "
                      f"generator makes {gen.out_channels} (set {keys} to {gen.out_channels})")
    size = (cfg["datasets"]["train"] or {}).get("gt_size")
    if isinstance(size, int) and not disc.size.check(size, size):
        errors.append(f"{where('model_d')}: {name} takes inputs of {disc.size}, but the training "
                      f"crops are datasets.train.gt_size {size}")
    return errors
