"""KernelGAN's crops (sefibk/KernelGAN's data.py and util.py): where the image has edges, by
probability. The generator downscales crops of `g_size` (64) and the discriminator compares its
output with real crops of the generator's output size (26 for x2) of the same image; both are drawn
with probability following a map of the image's gradient magnitude (create_gradient_map: the top
3% of |d/dy|, |d/dx| and |grad| as three equal-weight masks, box-blurred; then
create_probability_map: the map's mean over the crop around each centre, zero where a crop would
leave the image). The generator's map is made on the bicubic x1/s image and blown up (nearest) to
the image's size, as KernelGAN's.

Every draw comes from (seed, iteration): `crops(iteration)` is a pure function of them (KernelGAN
draws all the indices up front from numpy's global generator)."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from ..autograd import no_grad
from ..tensor import Tensor

__all__ = ["gradient_map", "probability_map", "KernelGANCrops"]


def _gray(img: np.ndarray) -> np.ndarray:
    """(C, H, W) -> (H, W): KernelGAN's rgb2gray (0.299, 0.587, 0.114), or the one plane."""
    if img.shape[0] == 3:
        return np.tensordot(np.array([0.299, 0.587, 0.114]), img.astype(np.float64), axes=1)
    return img[0].astype(np.float64)


def _zero_edges(m: np.ndarray, edge: int) -> np.ndarray:
    """KernelGAN's pad_edges: the outer `edge` pixels set to 0."""
    out = np.zeros_like(m)
    if 2 * edge < min(m.shape):
        out[edge:-edge, edge:-edge] = m[edge:-edge, edge:-edge]
    return out


def _clip_extreme(m: np.ndarray, percent: float) -> np.ndarray:
    """KernelGAN's clip_extreme: 0 up to the `percent` quantile, the next step above it (the
    values in between kept): nearly a mask of the top 1 - percent."""
    flat = np.sort(m.ravel())
    pivot = int(percent * flat.size)
    lo = flat[pivot]
    hi = flat[pivot + 1] if flat[pivot + 1] > lo else lo + 10e-6
    return np.clip(m, lo, hi) - lo


def _box_same(m: np.ndarray, size: int) -> np.ndarray:
    """scipy.signal.convolve2d(m, ones((size, size)), 'same') of m >= 0: the sum over rows
    i - size // 2 .. i + (size - 1) // 2 (and columns likewise), zeros outside, through an
    integral image."""
    lo, hi = size // 2, (size - 1) // 2
    pad = np.pad(m, ((lo + 1, hi), (lo + 1, hi)))
    s = pad.cumsum(0).cumsum(1)
    h, w = m.shape
    out = s[size:size + h, size:size + w] - s[:h, size:size + w] - s[size:size + h, :w] \
        + s[:h, :w]
    return np.maximum(out, 0.0)  # a sum of non-negatives: no rounding below 0


def gradient_map(img: np.ndarray, window: int = 5, percent: float = 0.97) -> np.ndarray:
    """KernelGAN's create_gradient_map of (C, H, W): (H, W) float64 with mean 1."""
    gy, gx = np.gradient(_gray(img))
    gmag, gx, gy = np.sqrt(gx ** 2 + gy ** 2), np.abs(gx), np.abs(gy)
    maps = [_clip_extreme(_zero_edges(m, window), percent) for m in (gx, gy, gmag)]
    comb = sum(m / m.sum() if m.sum() > 0 else m for m in maps)
    out = _box_same(comb, window) / window ** 2
    mean = out.mean()
    return out / mean if mean > 0 else np.ones_like(out)


def probability_map(loss_map: np.ndarray, crop: int) -> np.ndarray:
    """KernelGAN's create_probability_map: flat (H W,) probabilities of each crop centre, the map
    averaged over a (crop // 2)-box around it, 0 within crop // 2 of the border; uniform when
    nothing is left."""
    half = crop // 2
    blurred = _box_same(loss_map, half) / half ** 2
    prob = _zero_edges(blurred, half).ravel()
    total = prob.sum()
    return prob / total if total > 0 else np.full(prob.size, 1.0 / prob.size)


class KernelGANCrops:
    """The crops of `image` (C, H, W) in [0, 1] for KernelGAN at factor `scale`: `crops(iteration)`
    -> (g_in (1, C, g_size, g_size), d_in (1, C, d_size, d_size)), both float32 in [-1, 1] as
    KernelGAN feeds them (x 2 - 1), d_in with N(0, 1/255) noise (in [0, 1] units) added. The image
    is first trimmed: 10 pixels off every side of a synthetic image (not `real_image`: KernelGAN's
    guard against the border effects of the synthetic degradation), then to a multiple of the
    scale."""

    def __init__(self, image: np.ndarray, scale: int, g_size: int, d_size: int, seed: int = 0,
                 real_image: bool = False):
        img = np.asarray(image, np.float32)
        if not real_image and min(img.shape[1:]) > 20 + g_size:
            img = img[:, 10:-10, 10:-10]
        h, w = img.shape[1:]
        img = img[:, :h - h % scale, :w - w % scale]
        if min(img.shape[1:]) < g_size:
            raise ValueError(f"KernelGAN: the image ({w}x{h}) is smaller than its "
                             f"{g_size}x{g_size} crops")
        self.image, self.scale, self.seed = img, scale, seed
        self.g_size, self.d_size = g_size, d_size
        with no_grad():
            small = F.imresize(Tensor(img), 1.0 / scale).data
        big = gradient_map(img)
        sml = np.repeat(np.repeat(gradient_map(small), scale, 0), scale, 1)[:img.shape[1],
                                                                            :img.shape[2]]
        self.prob_g = probability_map(sml, g_size)
        self.prob_d = probability_map(big, d_size)

    def _crop(self, centre: int, size: int) -> np.ndarray:
        h, w = self.image.shape[1:]
        row, col = divmod(int(centre), w)
        top = min(max(0, row - size // 2), h - size)
        left = min(max(0, col - size // 2), w - size)
        top, left = top - top % 2, left - left % 2  # even, aligned with the x1/s map
        return self.image[:, top:top + size, left:left + size]

    def crops(self, iteration: int):
        rng = np.random.default_rng([self.seed, iteration, 0xC12])
        g = self._crop(rng.choice(self.prob_g.size, p=self.prob_g), self.g_size)
        d = self._crop(rng.choice(self.prob_d.size, p=self.prob_d), self.d_size)
        d = d + rng.standard_normal(d.shape).astype(np.float32) / 255.0
        return ((g * 2 - 1)[None].astype(np.float32), (d * 2 - 1)[None].astype(np.float32))
