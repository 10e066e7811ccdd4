"""The default recipe: one network and its losses (BasicSR's SRModel; Real-ESRGAN's stage 1,
RealESRNetModel, with a RealESRGANDataset and train.gt_usm)."""
from __future__ import annotations

from ....registry import RECIPES
from .base import Recipe

__all__ = ["SRRecipe"]


@RECIPES.register("sr")
class SRRecipe(Recipe):
    """`recipe: sr` (the default when no other recipe claims the config): sr = model(lq), the sum
    of the pixel loss and optionally the perceptual (and style) loss, one optimizer step, then the
    EMA. metrics.csv logs `loss`, and each term when there are several."""

    TERMS = ("l_g_pix", "l_g_percep", "l_g_style")

    def step(self, batch: dict, iteration: int, dry: bool = False):
        lq, targets = self.tensors(batch)
        self.optimizer.zero_grad()
        loss, terms = self.generator_backward(lq, targets)
        values = {"loss": float(loss.item())}
        if len(terms) > 1:
            values.update({k: float(t.item()) for k, t in terms.items()})
        values, stepped = self.update("optimizer", values, iteration, "batch skipped", dry)
        if not stepped:
            return None
        if self.ema is not None:
            self.ema.update(iteration + 1)
        return values
