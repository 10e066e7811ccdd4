"""Noise, with the semantics of BasicSR's `*_pt` versions (the ones the models run), per image:
Gaussian (sigma on the 0..255 scale) and Poisson (shot) noise, each optionally gray (one field
shared by every channel), and their random_add_* versions that draw the level and the gray coin."""
from __future__ import annotations

import math

import numpy as np

from ..._check import number
from ..._jit import kernel as jit
from ._common import _chw, value_range

__all__ = ["generate_gaussian_noise", "random_add_gaussian_noise", "generate_poisson_noise",
           "random_add_poisson_noise", "poisson_cdf_table"]


def _clip_round(out, clip, rounds):
    if rounds:
        out = np.round(out * 255) / out.dtype.type(255)
    return np.clip(out, 0, 1) if clip else out


def generate_gaussian_noise(img, sigma=10, gray_noise=False, *, rng) -> np.ndarray:
    """N(0, 1) * sigma / 255 per element, in img's dtype and shape (C, H, W); gray_noise: one (H, W)
    field shared by every channel. sigma is on the 0..255 scale."""
    img = _chw("generate_gaussian_noise", img)
    sigma = number("generate_gaussian_noise", "sigma", sigma, 0.0)
    shape = img.shape[1:] if gray_noise else img.shape
    cast = img.dtype.type
    noise = rng.standard_normal(shape, dtype=img.dtype) * cast(sigma) / cast(255)
    return np.broadcast_to(noise, img.shape) if gray_noise else noise


def random_add_gaussian_noise(img, sigma_range=(0, 1.0), gray_prob=0, clip=True, rounds=False, *,
                              rng, trace: dict | None = None) -> np.ndarray:
    """img + generate_gaussian_noise(sigma ~ U(sigma_range), gray with probability gray_prob), then
    clip to [0, 1] (and round to 8-bit levels with rounds). Draws: sigma, the gray coin, noise;
    `trace`, when given, receives sigma and gray."""
    owner = "random_add_gaussian_noise"
    sigma = rng.uniform(*value_range(owner, "sigma_range", sigma_range, 0.0))
    gray = rng.uniform() < number(owner, "gray_prob", gray_prob, 0.0, 1.0)
    if trace is not None:
        trace.update(sigma=sigma, gray=bool(gray))
    return _clip_round(img + generate_gaussian_noise(img, sigma, gray, rng=rng), clip, rounds)


# torchvision's rgb_to_grayscale, which BasicSR's generate_poisson_noise_pt uses
_GRAY = (0.2989, 0.587, 0.114)


@jit
def _levels_used(q):
    """How many of the 256 8-bit levels occur in q (uint8): BasicSR's len(unique(rounded img))."""
    seen = np.zeros(256, np.bool_)
    for v in q:
        seen[v] = True
    return seen.sum()


_POISSON_CDF: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def poisson_cdf_table(vals: int) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, guide) for the means L / 255 * vals, L = 0..255. cdf (256, n) float64: row L is the
    Poisson CDF at 0..n-1, n past the mean by > 12 standard deviations (the tail left out is below
    1e-30); guide (256, n) int32: guide[L, b] = the first k with cdf[L, k] > b / n, where a search
    for u in [b / n, (b + 1) / n) can start. Cached per vals (a power of 2)."""
    if vals not in _POISSON_CDF:
        lam = np.arange(256) / 255.0 * vals
        n = int(vals + 12 * math.sqrt(vals) + 30)
        # pmf(k) = e^-lam lam^k / k!, built as a running product (lam <= 256: no under/overflow)
        steps = lam[:, None] / np.arange(1, n)[None, :]
        pmf = np.exp(-lam)[:, None] * np.concatenate([np.ones((256, 1)), np.cumprod(steps, 1)], 1)
        cdf = np.cumsum(pmf, axis=1)
        starts = np.arange(n) / n
        guide = np.array([np.minimum(np.searchsorted(row, starts, side="right"), n - 1)
                          for row in cdf], np.int32)
        cdf.flags.writeable = guide.flags.writeable = False
        _POISSON_CDF[vals] = cdf, guide
    return _POISSON_CDF[vals]


@jit
def _poisson_by_cdf(levels, u, cdf, guide, out):
    """out[i] = the first k with cdf[levels[i], k] > u[i] (inverse-CDF sampling; the guide table
    leaves ~1 step of linear search)."""
    last = cdf.shape[1] - 1
    for i in range(levels.size):
        row = levels[i]
        k = guide[row, int(u[i] * cdf.shape[1])]
        while k < last and cdf[row, k] <= u[i]:
            k += 1
        out[i] = k


def generate_poisson_noise(img, scale=1.0, gray_noise=False, *, rng) -> np.ndarray:
    """Poisson (shot) noise: round img to 8-bit levels (r), count the levels used, vals = 2^ceil(
    log2(count)), noise = scale (Poisson(r vals) / vals - r), in img's dtype. gray_noise: computed
    once on the gray image (0.2989 R + 0.587 G + 0.114 B) and shared by every channel.

    The means take at most 256 values, so each pixel is drawn by inverse CDF from a tabulated
    Poisson CDF (`poisson_cdf_table`) with one `rng.random()` uniform, in C order: exact in
    distribution and faster than rng.poisson (docs/benchmarks.md)."""
    img = _chw("generate_poisson_noise", img)
    scale = number("generate_poisson_noise", "scale", scale, 0.0)
    src = img
    if gray_noise and img.shape[0] == 3:
        src = sum(img.dtype.type(w) * img[c] for c, w in enumerate(_GRAY))[None]
    levels = np.clip(np.round(src * 255), 0, 255).astype(np.uint8)
    vals = int(2 ** math.ceil(math.log2(_levels_used(levels.ravel()))))
    counts = np.empty(levels.shape, np.float64)
    _poisson_by_cdf(levels.ravel(), rng.random(levels.size), *poisson_cdf_table(vals),
                    counts.reshape(-1))
    noise = (counts / vals - levels / 255.0).astype(img.dtype)
    return np.broadcast_to(noise * img.dtype.type(scale), img.shape)


def random_add_poisson_noise(img, scale_range=(0, 1.0), gray_prob=0, clip=True, rounds=False, *,
                             rng, trace: dict | None = None) -> np.ndarray:
    """img + generate_poisson_noise(scale ~ U(scale_range), gray with probability gray_prob), then
    clip (and round). Draws: scale, the gray coin, the noise; `trace`, when given, receives scale
    and gray."""
    owner = "random_add_poisson_noise"
    scale = rng.uniform(*value_range(owner, "scale_range", scale_range, 0.0))
    gray = rng.uniform() < number(owner, "gray_prob", gray_prob, 0.0, 1.0)
    if trace is not None:
        trace.update(scale=scale, gray=bool(gray))
    return _clip_round(img + generate_poisson_noise(img, scale, gray, rng=rng), clip, rounds)
