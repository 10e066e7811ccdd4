"""Scoring a model against the bicubic baseline, written once for training validation (`Validator`)
and srgrad-eval: the model and the baseline scored on the full images (`score_images`), the columns
named as metrics.csv names them (`column`), the metric that picks net_best (`main_metric`); during
training also one labelled comparison PNG per image and validation (BasicSR's
`visualization/<name>/<name>_<iter>.png`), cropped to a detailed region when the images are large.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ...metrics import measure
from ..inference.upscale import bicubic, upscale
from .runlog import detail_box, labelled_strip

__all__ = ["Validator", "ValidationStopped", "score_images", "column", "main_metric"]


class ValidationStopped(Exception):
    """A stop signal arrived during a validation (the trainer saves and interrupts)."""


def column(metric: str, y_channel: bool) -> str:
    """metrics.csv's column of a metric: `psnr_y` on the Y channel, `psnr_rgb` on RGB (the
    baseline's: `bicubic_` + that). A metric measured on one kind only says so (`channels = "rgb"`
    on the function: LPIPS and DISTS take colour, `"y"`: NIQE), whatever y_channel is."""
    from ...registry import METRICS
    try:
        fixed = getattr(METRICS.get(metric), "channels", None)
    except KeyError:
        fixed = None
    return f"{metric}_{fixed or ('y' if y_channel else 'rgb')}"


def main_metric(metrics) -> str:
    """The metric that picks net_best and labels the comparison images: psnr when it is measured,
    else the first one listed."""
    return "psnr" if "psnr" in metrics else metrics[0]


def score_images(dataset, sr_of, scale: int, metrics, crop: int, y_channel: bool,
                 baseline: str = "imresize", bicubics: dict | None = None, progress: bool = False,
                 stop=lambda: False, desc: str = "validate"):
    """For each item of `dataset` (`len()`, `get(i)` -> lq, gt, name): (i, item, sr, bic, values),
    sr = sr_of(lq) (C, H s, W s) in [0, 1], bic the registered `baseline` upscale of lq (kept in
    `bicubics` by index when given, to reuse), values {metric: SR's, "bicubic_" + metric:
    baseline's} for each registered metric name in `metrics`. Raises ValidationStopped when
    `stop()` turns true."""
    bicubics = {} if bicubics is None else bicubics
    for i in tqdm(range(len(dataset)), desc=desc, leave=False, unit="img", disable=not progress):
        if stop():
            raise ValidationStopped
        item = dataset.get(i)
        sr = sr_of(item["lq"])
        if i not in bicubics:
            bicubics[i] = bicubic(item["lq"], scale, baseline)
        values = {}
        for prefix, image in (("", sr), ("bicubic_", bicubics[i])):
            for m, value in measure(image, item["gt"], metrics, crop, y_channel).items():
                values[prefix + m] = value
        yield i, item, sr, bicubics[i], values


class Validator:
    """Scores models on `dataset` (a registered dataset: `len()`, `get(i)` -> lq, gt, name) with
    the `val` config section `vcfg` at `scale`. Images go to `run_dir/images` when `vcfg
    ["save_images"]` and `write`; `last_images` keeps the strips of the last call (for
    TensorBoard)."""

    def __init__(self, dataset, vcfg: dict, scale: int, run_dir, progress: bool, write: bool):
        self.dataset, self.vcfg, self.scale = dataset, vcfg, scale
        self.run_dir, self.progress, self.write = Path(run_dir), progress, write
        self.crop = scale if vcfg["crop_border"] is None else vcfg["crop_border"]
        self.key = lambda metric: column(metric, vcfg["y_channel"])
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

        def sr_of(lq):
            return np.clip(upscale(model, lq, vcfg["tile"], vcfg["tile_overlap"],
                                   self_ensemble=vcfg["self_ensemble"]), 0, 1)
        try:
            for i, item, sr, bic, values in score_images(
                    self.dataset, sr_of, self.scale, vcfg["metrics"], self.crop, vcfg["y_channel"],
                    vcfg["baseline"], self._baselines, self.progress, stop):
                for m in vcfg["metrics"]:
                    scores[self.key(m)].append(values[m])
                    scores["bicubic_" + self.key(m)].append(values["bicubic_" + m])
                if vcfg["save_images"]:
                    self._save(i, str(item["name"]), iteration, bic, sr, item["gt"], values)
        finally:
            model.train(was_training)
        return {k: float(np.mean(v)) for k, v in scores.items() if v}

    def _save(self, i, name, iteration, bic, sr, gt, values):
        if i not in self._boxes:  # the same region every validation, to compare them
            self._boxes[i] = detail_box(gt)
        y0, y1, x0, x1 = self._boxes[i]
        metric = main_metric(self.vcfg["metrics"])
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
        from ...io.image import write_image
        out = self.run_dir / "images" / stem / f"{stem}_{iteration}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        write_image(out, strip)
