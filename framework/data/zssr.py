"""ZSSR's training pairs from the test image alone (Shocher et al., CVPR 2018, section 4): HR
"fathers" are crops of the image and of its downscaled versions (a pyramid), LR "sons" are the
fathers downscaled by the SR factor with the image's own kernel (MATLAB bicubic, or a numeric blur
kernel: a given one, or KernelGAN's estimate), so the network learns the image's internal
recurrence across scales. Registered in DATASETS as ZSSRDataset.

One sample: a pyramid level drawn with probability proportional to its area (the larger versions
hold more distinct patches), a crop of `crop_size` at a uniform position, one of the 8 rotations /
flips when `augment` (ZSSR turns them off for a kernel that is not symmetric under them:
rotating the father rotates the kernel its son should have), then the son, plus N(0, noise_std)
noise for a noisy image (ZSSR's noise_std, clipped to [0, 1]).

Where ZSSR's code draws a continuous scale and warps with a random affine map (shear, any angle,
cubic interpolation), the pyramid here is a fixed set of levels, each downscaled once by MATLAB's
imresize: the paper's description, and nothing interpolated per sample. After a gradual stage
(x2 of an x4 run) the stage's output joins as another source of fathers, with levels between its
own size and the previous source's (ZSSR's hr_fathers_sources and base_scales).
"""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .._check import int_arg, number
from ..autograd import no_grad
from ..color import rgb_to_y
from ..io.image import read_image
from ..registry import DATASETS
from ..tensor import Tensor
from .augment import apply_flags
from .degradations.kernel_file import is_kernel_file, load_kernel

__all__ = ["ZSSRDataset", "downscale"]

BICUBIC = "bicubic"


def downscale(img: np.ndarray, scale: int, kernel=BICUBIC) -> np.ndarray:
    """(C, H, W) -> (C, ceil(H / scale), ceil(W / scale)) float32: MATLAB's bicubic imresize, or a
    numeric kernel by imresize's rule (framework.functional.imresize.kernel_downscale)."""
    with no_grad():
        x = Tensor(np.ascontiguousarray(img, np.float32))
        y = F.imresize(x, 1.0 / scale) if isinstance(kernel, str) else \
            F.imresize(x, 1.0 / scale, kernel=kernel)
    return y.data


@DATASETS.register()
class ZSSRDataset:
    """Father/son pairs of one image (module docstring). `get(index, rng)` -> dict(lq=son float32
    (C, crop/scale, crop/scale), gt=father float32 (C, crop, crop), name); every draw comes from
    `rng`, so with BatchLoader a batch is a pure function of (seed, iteration). Its length is 1.

    Args:
        scale: the SR factor s (father -> son).
        path: the image file; or `image`, an array (C, H, W) in [0, 1] (the command's way).
        kernel: "bicubic" (default: MATLAB's imresize), a kernel file (.npy), or an array.
        crop_size: fathers' side, default 128 (ZSSR's); smaller when the smallest pyramid level
            is, rounded down to a multiple of s.
        min_scale: the smallest level, relative to the image, default 0.5 (ZSSR's
            augment_min_scale); levels: how many, default 6 (1, 0.9, ..., 0.5).
        augment: the 8 rotations/flips, default True.
        noise_std: Gaussian noise added to the sons, default 0.
        color: "rgb" (default; gray replicated) or "y".
    """

    def __init__(self, scale: int, path=None, image=None, kernel=BICUBIC, crop_size: int = 128,
                 min_scale: float = 0.5, levels: int = 6, augment: bool = True,
                 noise_std: float = 0.0, color: str = "rgb"):
        name = "ZSSRDataset"
        self.scale = int_arg(name, "scale", scale)
        if (path is None) == (image is None):
            raise ValueError(f"{name}: give exactly one of path (an image file) or image (an array)")
        if color not in ("rgb", "y"):
            raise ValueError(f"{name}: color must be 'rgb' or 'y', got {color!r}")
        if image is None:
            image, _ = read_image(path)
            if image.shape[0] == 1:
                image = np.repeat(image, 3, axis=0)
            if color == "y":
                image = rgb_to_y(image)
        image = np.asarray(image, np.float32)
        if image.ndim != 3 or not np.all(np.isfinite(image)):
            raise ValueError(f"{name}: image must be a finite (C, H, W) array, got {image.shape}")
        self.kernel = self._kernel(kernel)
        self.crop_size = int_arg(name, "crop_size", crop_size, self.scale)
        self.min_scale = number(name, "min_scale", min_scale, 0.0, 1.0, low_open=True)
        self.levels = int_arg(name, "levels", levels)
        self.augment = bool(augment)
        self.noise_std = number(name, "noise_std", noise_std, 0.0)
        self.name = str(path) if path is not None else "image"
        self.sources: list[tuple[np.ndarray, float]] = []
        self.pyramid: list[np.ndarray] = []
        self.add_source(image, 1.0)

    @staticmethod
    def _kernel(kernel):
        if isinstance(kernel, str) and not is_kernel_file(kernel):
            if kernel != BICUBIC:
                raise ValueError(f"ZSSRDataset: kernel must be 'bicubic', a .npy kernel file or an "
                                 f"array, got {kernel!r}")
            return BICUBIC
        k = load_kernel(kernel, "ZSSRDataset: kernel file") if isinstance(kernel, str) else \
            np.asarray(kernel, np.float64)
        F.imresize(np.zeros((1, 4, 4)), 0.5, kernel=k)  # checks it (shape, finite, sum)
        return k

    def add_source(self, image: np.ndarray, base_scale: float) -> None:
        """Another source of fathers: `image` is the original at `base_scale` (a gradual stage's
        output); its levels span its own size down to the previous source's (min_scale of the
        first), as ZSSR's base_scales."""
        image = np.asarray(image, np.float32)
        low = self.min_scale if not self.sources else self.sources[-1][1] / base_scale
        self.sources.append((image, float(base_scale)))
        h, w = image.shape[1:]
        for r in np.linspace(1.0, low, self.levels if self.levels > 1 else 1):
            if r == 1.0:
                self.pyramid.append(image)
                continue
            size = (max(1, round(h * r)), max(1, round(w * r)))
            with no_grad():
                level = F.imresize(Tensor(image), size=size).data
            self.pyramid.append(np.clip(level, 0.0, 1.0))
        side = min(min(p.shape[1:]) for p in self.pyramid)
        self.crop = min(self.crop_size, side - side % self.scale)
        if self.crop < self.scale:
            raise ValueError(f"ZSSRDataset: the image ({w}x{h}) is too small: its smallest "
                             f"pyramid level ({side} px) holds no {self.scale}x{self.scale} father")
        areas = np.array([p.shape[1] * p.shape[2] for p in self.pyramid], np.float64)
        self.probabilities = areas / areas.sum()

    def __len__(self) -> int:
        return 1

    def father(self, rng: np.random.Generator) -> np.ndarray:
        """A father: a level by area, a crop, a rotation/flip (float32 (C, crop, crop))."""
        level = self.pyramid[int(rng.choice(len(self.pyramid), p=self.probabilities))]
        h, w = level.shape[1:]
        top = int(rng.integers(h - self.crop + 1))
        left = int(rng.integers(w - self.crop + 1))
        out = level[:, top:top + self.crop, left:left + self.crop]
        if self.augment:
            flags = int(rng.integers(8))
            out = apply_flags(out, (bool(flags & 1), bool(flags & 2), bool(flags & 4)))
        return np.ascontiguousarray(out)

    def son(self, father: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """`father` downscaled by the scale with the kernel, plus the noise (drawn from `rng`)."""
        son = downscale(father, self.scale, self.kernel)
        if self.noise_std > 0 and rng is not None:
            son = np.clip(son + rng.standard_normal(son.shape) * self.noise_std, 0, 1)
        return son.astype(np.float32)

    def get(self, index: int, rng: np.random.Generator | None = None) -> dict:
        if index != 0:
            raise IndexError(f"index {index} out of range for a dataset of 1 image")
        rng = rng if rng is not None else np.random.default_rng(0)
        gt = self.father(rng)
        return {"lq": self.son(gt, rng), "gt": gt, "name": self.name}

    def __getitem__(self, index: int) -> dict:
        return self.get(index)
