"""Gaussian denoising data at scale 1 (KAIR's DatasetDnCNN, the data of DnCNN's, DRUNet's and
SCUNet's Gaussian experiments): HR images from a folder, the LR the same image plus white Gaussian
noise of a fixed sigma on the 0..255 scale, not clipped (KAIR adds the noise to the float image).
Registered in DATASETS."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .._check import number
from ..io.image import image_size, list_images
from ..registry import DATASETS
from .augment import augment
from .datasets import _load, _SRDataset
from .degradations import generate_gaussian_noise

__all__ = ["GaussianNoiseDataset", "RestorationDataset"]


class RestorationDataset(_SRDataset):
    """The frame of the x1 restoration datasets (GaussianNoiseDataset, JPEGDataset): HR images
    from a folder (or one image file), the LQ made from each by `_degrade(gt, rng)`; validation
    (no rng) degrades the whole image with default_rng(index), the same every time."""

    def __init__(self, root, scale, gt_size, use_flip, use_rot, color, cache, bad_files):
        name = type(self).__name__
        super().__init__(scale, gt_size, use_flip, use_rot, color, cache, bad_files)
        if self.scale != 1:
            raise ValueError(f"{name}: scale must be 1 (the degraded image has the clean one's "
                             f"size), got {scale}")
        self.root = Path(root)
        files = [self.root] if self.root.is_file() else list_images(self.root)
        items = self._scan([(p.name, p) for p in files])
        for _, path in items:
            self._check_crop_fits(str(path), *image_size(path))
        self.paths = [path for _, path in items]
        self.names = [n for n, _ in items]

    def _make_pair(self, index):
        gt = np.ascontiguousarray(_load(self.paths[index], self.color))
        return self._degrade(gt, np.random.default_rng(index)).astype(np.float32), gt

    def crop(self, gt: np.ndarray, size: int | None, rng) -> np.ndarray:
        """A random size x size crop of (C, H, W) (at most the image; None: the whole image, no
        draw), flipped / transposed."""
        if size is not None:
            h, w = gt.shape[1:]
            top = int(rng.integers(0, max(h - size, 0) + 1))
            left = int(rng.integers(0, max(w - size, 0) + 1))
            gt = gt[:, top:top + size, left:left + size]
        return np.array(augment([gt], rng, self.use_flip, self.use_rot)[0], np.float32)


@DATASETS.register()
class GaussianNoiseDataset(RestorationDataset):
    """HR images from a folder (or one image file); LR = HR + N(0, (sigma / 255)^2) per element,
    the same size (scale 1).

    `get(index, rng)`: a random gt_size crop of the HR image and random flips / transposition, then
    fresh noise from `rng` (a new draw every sample, as KAIR's training). Without rng (validation):
    the whole image with noise from default_rng(index), the same noise every time.

    Args: root, sigma (the noise level on the 0..255 scale, >= 0; e.g. 15, 25, 50, the papers'),
    scale (1 only: the top-level scale of a config), gt_size (crop size; None = full images),
    use_flip / use_rot (default True), color ("rgb" or "y"), cache (default True), bad_files
    ("error" or "skip")."""

    def __init__(self, root, sigma: float, scale: int = 1, gt_size: int | None = None,
                 use_flip: bool = True, use_rot: bool = True, color: str = "rgb", cache: bool = True,
                 bad_files: str = "error"):
        super().__init__(root, scale, gt_size, use_flip, use_rot, color, cache, bad_files)
        self.sigma = number(type(self).__name__, "sigma", sigma, 0.0)

    def _degrade(self, gt: np.ndarray, rng) -> np.ndarray:
        return gt + generate_gaussian_noise(gt, self.sigma, rng=rng)

    def get(self, index: int, rng: np.random.Generator | None = None) -> dict:
        """dict(lq=float32 (C, h, w), gt=float32 (C, h, w), name=str) (the class docstring)."""
        if rng is None:
            return super().get(index)
        gt = self.pair(index)[1]
        gt = self.crop(gt, self.gt_size, rng)
        return {"lq": self._degrade(gt, rng).astype(np.float32), "gt": gt, "name": self.names[index]}
