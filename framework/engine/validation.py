"""Validation during training: the model and the bicubic baseline scored on the full validation
images, and one labelled comparison PNG per image and validation (BasicSR's
`visualization/<name>/<name>_<iter>.png`), cropped to a detailed region when the images are large.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..metrics import measure
from .inference import bicubic, upscale
from .runlog import detail_box, labelled_strip

__all__ = ["Validator", "ValidationStopped"]


class ValidationStopped(Exception):
    """A stop signal arrived during a validation (the trainer saves and interrupts)."""


class Validator:
    """Scores models on `dataset` (a registered dataset: `len()`, `get(i)` -> lq, gt, name) with
    the `val` config section `vcfg` at `scale`. Images go to `run_dir/images` when `vcfg
    ["save_images"]` and `write`; `last_images` keeps the strips of the last call (for
    TensorBoard)."""

    def __init__(self, dataset, vcfg: dict, scale: int, run_dir, progress: bool, write: bool):
        self.dataset, self.vcfg, self.scale = dataset, vcfg, scale
        self.run_dir, self.progress, self.write = Path(run_dir), progress, write
        self.crop = scale if vcfg["crop_border"] is None else vcfg["crop_border"]
        self.key = lambda metric: f"{metric}_{'y' if vcfg['y_channel'] else 'rgb'}"
        self._baselines: dict = {}
        self._boxes: dict = {}
        self.last_images: dict = {}

    def columns(self) -> list[str]:
        return [c for m in self.vcfg["metrics"] for c in (self.key(m), "bicubic_" + self.key(m))]

    def __call__(self, model, iteration: int, stop=lambda: False) -> dict:
        """Mean of every metric (keys as `columns()`) of `model` (put in eval mode for the call)
        and of the baseline. Raises ValidationStopped when `stop()` turns true."""
        vcfg = self.vcfg
        scores = {k: [] for k in self.columns()}
        was_training = model.training
        model.eval()
        self.last_images = {}
        try:
            for i in tqdm(range(len(self.dataset)), desc="validate", leave=False, unit="img",
                          disable=not self.progress):
                if stop():
                    raise ValidationStopped
                item = self.dataset.get(i)
                sr = np.clip(upscale(model, item["lq"], vcfg["tile"], vcfg["tile_overlap"],
                                     self_ensemble=vcfg["self_ensemble"]), 0, 1)
                if i not in self._baselines:
                    self._baselines[i] = bicubic(item["lq"], self.scale, vcfg["baseline"])
                bic, gt = self._baselines[i], item["gt"]
                values = {}
                for prefix, image in (("", sr), ("bicubic_", bic)):
                    for m, value in measure(image, gt, vcfg["metrics"], self.crop,
                                            vcfg["y_channel"]).items():
                        scores[prefix + self.key(m)].append(value)
                        values[prefix + m] = value
                if vcfg["save_images"]:
                    self._save(i, str(item["name"]), iteration, bic, sr, gt, values)
        finally:
            model.train(was_training)
        return {k: float(np.mean(v)) for k, v in scores.items() if v}

    def _save(self, i, name, iteration, bic, sr, gt, values):
        if i not in self._boxes:  # the same region every validation, to compare them
            self._boxes[i] = detail_box(gt)
        y0, y1, x0, x1 = self._boxes[i]
        metric = "psnr" if "psnr" in self.vcfg["metrics"] else self.vcfg["metrics"][0]
        unit = " dB" if metric == "psnr" else ""

        def label(what, prefix):
            value = values.get(prefix + metric)
            return what if value is None else f"{what} {value:.2f}{unit}"
        strip = labelled_strip([(label("bicubic", "bicubic_"), bic[:, y0:y1, x0:x1]),
                                (label("SR", ""), sr[:, y0:y1, x0:x1]),
                                ("HR", gt[:, y0:y1, x0:x1])])
        stem = Path(name).stem
        if len(self.last_images) < 4:
            self.last_images[stem] = strip
        if not self.write:
            return
        from ..io.image import write_image
        out = self.run_dir / "images" / stem / f"{stem}_{iteration}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        write_image(out, strip)
