"""GAN training on the same engine (Real-ESRGAN's RealESRGANModel / BasicSR's SRGANModel): a
generator (`model`) trained with pixel, perceptual and adversarial terms against a discriminator
(`model_d`) that has its own optimizer and scheduler. Everything else (run folder, exact resume,
Ctrl-C, validation on the generator or its EMA, MPI) is the Trainer's.

One iteration, as BasicSR (`current_iter` = iteration + 1):
1. generator: sr = G(lq); when current_iter % net_d_iters == 0 and current_iter > net_d_init_iters,
   l_g_total = l_g_pix + l_g_percep + l_g_style + l_g_gan(D(sr), real) and a G step, with D's
   parameters frozen (no gradient computed for them);
2. discriminator, always: l_d_real = gan(D(gt_gan), real), l_d_fake = gan(D(sr.detach()), fake),
   both backpropagated, one D step;
3. the EMA of G, when train.ema_decay is set.
D runs in training mode throughout (spectral norm does one power iteration per forward: three per
iteration, as in BasicSR). metrics.csv logs each term, and out_d_real / out_d_fake (D's mean output).
"""
from __future__ import annotations

from ..registry import MODELS
from .trainer import Trainer, _section, _total

__all__ = ["GANTrainer"]


class GANTrainer(Trainer):
    """Trainer for configs with `model_d` (see the module docstring)."""

    TERMS = ("l_g_pix", "l_g_percep", "l_g_style", "l_g_gan", "l_d_real", "l_d_fake",
             "out_d_real", "out_d_fake")

    def _build_discriminator(self):
        with _section("model_d"):
            self.net_d = MODELS.build(self.cfg["model_d"]).to(self.dtype)

    def _build_discriminator_optimizer(self):
        self.optimizer_d, self.scheduler_d = self._optimizer(self.net_d, "optimizer_d",
                                                             "scheduler_d")

    def _trained(self) -> dict:
        return {"model": self.model, "net_d": self.net_d}

    def _logs_terms(self) -> bool:
        return True

    def _optimizer_states(self) -> dict:
        return {"optimizer_d": self.optimizer_d.state_dict(),
                "scheduler_d": self.scheduler_d.state_dict() if self.scheduler_d else None}

    def _load_optimizers(self, state):
        super()._load_optimizers(state)
        if not state.get("optimizer_d"):
            from ..weights import CheckpointError
            raise CheckpointError("the checkpoint holds no optimizer_d state (not a GAN run's?)")
        self.optimizer_d.load_state_dict(state["optimizer_d"])
        if self.scheduler_d is not None and state.get("scheduler_d") is not None:
            self.scheduler_d.load_state_dict(state["scheduler_d"])

    def _generator_updates(self) -> bool:
        it, tcfg = self.iteration + 1, self.cfg["train"]
        return it % tcfg["net_d_iters"] == 0 and it > tcfg["net_d_init_iters"]

    def _train_step(self, batch):
        """One generator step (when due) and one discriminator step; returns every term, or
        None when a non-finite value skips the iteration."""
        lq, targets = self._tensors(batch)
        gan = self.criteria["gan"]
        values = {}
        # -- generator
        self.optimizer.zero_grad()
        self.net_d.requires_grad_(False)
        sr = self.model(lq)
        if self._generator_updates():
            terms = self._generator_terms(sr, targets)
            terms["l_g_gan"] = gan(self.net_d(sr), True, is_disc=False)
            total = _total(terms)
            total.backward()
            reduced = self._reduce_gradients([float(total.item())]
                                             + [float(t.item()) for t in terms.values()])
            values = {"loss": reduced[0], **dict(zip(terms, reduced[1:]))}
            if not self._finite(values, self.model, "iteration skipped"):
                self.net_d.requires_grad_(True)
                return None
            self._step(self.model, self.optimizer, self.scheduler, values["loss"])
        elif self.scheduler is not None:
            self.scheduler.step()  # the schedule follows the iteration, stepped or not
        self.net_d.requires_grad_(True)
        # -- discriminator: real, then fake (the generator's output, cut from its graph)
        self.optimizer_d.zero_grad()
        real = self.net_d(targets["gan"])
        l_d_real = gan(real, True, is_disc=True)
        l_d_real.backward()
        fake = self.net_d(sr.detach())
        l_d_fake = gan(fake, False, is_disc=True)
        l_d_fake.backward()
        d_values = dict(zip(("l_d_real", "l_d_fake", "out_d_real", "out_d_fake"),
                            self._reduce_gradients(
                                [float(l_d_real.item()), float(l_d_fake.item()),
                                 float(real.data.mean()), float(fake.data.mean())],
                                self.net_d.parameters())))
        if self._finite(d_values, self.net_d, "discriminator step skipped"):
            self._step(self.net_d, self.optimizer_d, self.scheduler_d, d_values["l_d_real"],
                       "optimizer_d")
        elif self.scheduler_d is not None:
            self.scheduler_d.step()
        if self.ema is not None:
            self.ema.update()
        return {**values, **d_values}
