"""JPEG artifact removal data at scale 1 (FBCNN's DatasetJPEG, jiaxi-jiang/FBCNN data/dataset_jpeg.py,
after KAIR's): HR images from a folder, the LQ the same image JPEG-encoded and decoded by libjpeg
(Pillow, 4:2:0 chroma: bit-identical to the cv2.imencode FBCNN calls) at a quality factor drawn
per sample, and the QF target FBCNN's predictor learns, qf = (100 - QF) / 100. Registered in
DATASETS."""
from __future__ import annotations

import numpy as np

from .._check import int_arg, number
from ..registry import DATASETS
from .degradations import add_jpg_compression
from .denoise import RestorationDataset

__all__ = ["JPEGDataset"]

# FBCNN's draw: a quality from this list with probability 0.75, else uniform in [8, 96]
FBCNN_QUALITIES = (10, 20, 30, 40, 50, 60)
_GRID = 8  # the JPEG block: the training crop is shifted off it half the time (FBCNN's)


@DATASETS.register()
class JPEGDataset(RestorationDataset):
    """HR images from a folder (or one image file); LQ = JPEG(HR, QF), the same size (scale 1);
    each sample also holds `qf` = [(100 - QF) / 100] (float32, shape (1,)): FBCNN's QF target.

    `get(index, rng)` (training, FBCNN's order): a random crop of gt_size + 8 with random flips /
    transposition, JPEG at a QF drawn from `rng` (from `qualities` with probability `list_prob`,
    else uniform over the integers of `quality_range`), then with probability 1/2 a gt_size crop at
    a random offset (the JPEG grid no longer at the crop's corner), else at the corner. Without
    rng (validation): the whole image at `val_quality`, or, when that is None, at a QF drawn from
    default_rng(index) as in training: fixed per image, the same every time.

    Args: root, quality_range ([low, high] integers in 1..100, default [8, 96], FBCNN's),
    qualities (a list of integers in 1..100, default [10, 20, 30, 40, 50, 60]; [] for the range
    alone), list_prob (default 0.75), val_quality (None or an integer in 1..100), scale (1 only),
    gt_size (crop size; None = full images, no shift), use_flip / use_rot (default True), color
    ("rgb" or "y": a 1-channel JPEG), cache (default True), bad_files ("error" or "skip")."""

    def __init__(self, root, quality_range=(8, 96), qualities=FBCNN_QUALITIES,
                 list_prob: float = 0.75, val_quality=None, scale: int = 1,
                 gt_size: int | None = None, use_flip: bool = True, use_rot: bool = True,
                 color: str = "rgb", cache: bool = True, bad_files: str = "error"):
        name = type(self).__name__
        if not isinstance(quality_range, (list, tuple)) or len(quality_range) != 2:
            raise ValueError(f"{name}: quality_range must be [low, high], got {quality_range!r}")
        lo, hi = (int_arg(name, "quality_range", q) for q in quality_range)
        if not lo <= hi <= 100:
            raise ValueError(f"{name}: quality_range must be [low, high] with 1 <= low <= high "
                             f"<= 100, got {list(quality_range)}")
        if not isinstance(qualities, (list, tuple)):
            raise ValueError(f"{name}: qualities must be a list of integers, got {qualities!r}")
        self.qualities = tuple(int_arg(name, "qualities", q) for q in qualities)
        if any(q > 100 for q in self.qualities):
            raise ValueError(f"{name}: qualities must be in 1..100, got {list(qualities)}")
        self.list_prob = number(name, "list_prob", list_prob, 0.0, 1.0)
        if self.list_prob > 0 and not self.qualities:
            raise ValueError(f"{name}: list_prob {list_prob} draws from qualities, which is empty")
        self.val_quality = None if val_quality is None else int_arg(name, "val_quality", val_quality)
        if self.val_quality is not None and self.val_quality > 100:
            raise ValueError(f"{name}: val_quality must be in 1..100, got {val_quality}")
        self.quality_range = (lo, hi)
        super().__init__(root, scale, gt_size, use_flip, use_rot, color, cache, bad_files)

    def draw_quality(self, rng) -> int:
        """One QF, FBCNN's way (two draws: the coin, then the quality)."""
        if rng.random() < self.list_prob:
            return int(self.qualities[int(rng.integers(0, len(self.qualities)))])
        return int(rng.integers(self.quality_range[0], self.quality_range[1] + 1))

    def quality(self, index: int) -> int:
        """The QF of validation image `index`."""
        return self.val_quality or self.draw_quality(np.random.default_rng(index))

    def _degrade(self, gt: np.ndarray, rng) -> np.ndarray:
        return add_jpg_compression(gt, self.val_quality or self.draw_quality(rng))

    def get(self, index: int, rng: np.random.Generator | None = None) -> dict:
        """dict(lq=float32 (C, h, w), gt=float32 (C, h, w), qf=float32 (1,), name=str)."""
        if rng is None:
            out = super().get(index)
            return {**out, "qf": np.array([(100 - self.quality(index)) / 100], np.float32)}
        gt = self.pair(index)[1]
        size = self.gt_size
        gt = self.crop(gt, None if size is None else size + _GRID, rng)
        q = self.draw_quality(rng)
        lq = add_jpg_compression(gt, q)
        if size is not None:
            h, w = gt.shape[1:]
            shift = rng.random() < 0.5
            top = int(rng.integers(0, max(h - size, 0) + 1)) if shift else 0
            left = int(rng.integers(0, max(w - size, 0) + 1)) if shift else 0
            gt = gt[:, top:top + size, left:left + size]
            lq = lq[:, top:top + size, left:left + size]
        return {"lq": np.ascontiguousarray(lq, np.float32), "gt": np.ascontiguousarray(gt),
                "qf": np.array([(100 - q) / 100], np.float32), "name": self.names[index]}
