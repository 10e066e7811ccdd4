"""Paired random crop and the 8 dihedral augmentations, applied identically to LR and HR (BasicSR's
`paired_random_crop` and `augment`). Images are numpy (C, H, W); randomness comes only from the
`np.random.Generator` passed in, so a sample is a pure function of that generator's seed."""
from __future__ import annotations

import numpy as np

__all__ = ["paired_random_crop", "random_flags", "apply_flags", "augment"]


def paired_random_crop(lq: np.ndarray, gt: np.ndarray, gt_size: int, scale: int,
                       rng: np.random.Generator, name: str = "image"):
    """Crop a random (gt_size / scale)^2 LR patch at (top, left) and the HR patch at
    (top * scale, left * scale), so the pair stays aligned.

    lq (C, h, w), gt (C, h * scale, w * scale) -> lq (C, p, p), gt (C, p * scale, p * scale) with
    p = gt_size // scale. Raises ValueError naming `name` when the image is smaller than the crop.
    """
    if gt_size % scale:
        raise ValueError(f"gt_size={gt_size} must be a multiple of scale={scale}")
    patch = gt_size // scale
    h, w = lq.shape[-2:]
    if gt.shape[-2:] != (h * scale, w * scale):
        raise ValueError(f"{name}: HR size {gt.shape[-2:]} is not scale={scale} x LR size {(h, w)}")
    if h < patch or w < patch:
        raise ValueError(f"{name}: image is {w * scale}x{h * scale} (HR, after mod-crop), smaller "
                         f"than the {gt_size}x{gt_size} crop (gt_size)")
    # inclusive upper bounds, as BasicSR's random.randint(0, h - patch)
    top = int(rng.integers(0, h - patch + 1))
    left = int(rng.integers(0, w - patch + 1))
    lq_patch = lq[:, top:top + patch, left:left + patch]
    gt_patch = gt[:, top * scale:(top + patch) * scale, left * scale:(left + patch) * scale]
    return lq_patch, gt_patch


def random_flags(rng: np.random.Generator, use_flip: bool = True, use_rot: bool = True):
    """Draw (hflip, vflip, transpose) like BasicSR: hflip with use_flip, vflip and transpose with
    use_rot, each with probability 1/2. Together they give all 8 flips/rotations by 90 degrees.
    Three draws are always made, so the generator advances the same way whatever the options."""
    draws = rng.random(3) < 0.5
    return bool(draws[0] and use_flip), bool(draws[1] and use_rot), bool(draws[2] and use_rot)


def apply_flags(img: np.ndarray, flags) -> np.ndarray:
    """Apply (hflip, vflip, transpose) to (C, H, W) in that order; transpose swaps H and W (what
    BasicSR calls rot90; composed with the flips it yields every rotation)."""
    hflip, vflip, transpose = flags
    if hflip:
        img = img[:, :, ::-1]
    if vflip:
        img = img[:, ::-1, :]
    if transpose:
        img = img.transpose(0, 2, 1)
    return img


def augment(imgs, rng: np.random.Generator, use_flip: bool = True, use_rot: bool = True):
    """The same random flips/transposition applied to every (C, H, W) array in `imgs`; returns a
    list (views, not copies)."""
    flags = random_flags(rng, use_flip, use_rot)
    return [apply_flags(img, flags) for img in imgs]
