"""JPEG compression artefacts, two ways: DiffJPEG (what Real-ESRGAN's models apply to their
training batches: BasicSR's DiffJPEG on unrounded floats, continuous quality) and Pillow (libjpeg
at an integer quality: bit-identical to BasicSR's cv2 path, which its datasets use)."""
from __future__ import annotations

import io

import numpy as np
from PIL import Image

from ..._check import choice, int_arg, number
from ...functional.jpeg import diff_jpeg
from ._common import _chw, value_range

__all__ = ["JPEG_METHODS", "add_jpg_compression", "add_diffjpeg_compression",
           "random_add_jpg_compression"]

# how random_add_jpg_compression (and RealESRGANDataset's `jpeg` key) compresses
JPEG_METHODS = ("diffjpeg", "pillow")


def _channels(owner: str, img) -> np.ndarray:
    img = _chw(owner, img)
    if img.shape[0] not in (1, 3):
        raise ValueError(f"{owner}: img must have 1 or 3 channels, got {img.shape[0]}")
    return img


def add_jpg_compression(img, quality=90) -> np.ndarray:
    """JPEG-encode and decode (C, H, W) in [0, 1] (C = 1 or 3) with Pillow at integer `quality`
    (1..100; 4:2:0 chroma for colour, like DiffJPEG). The image is clipped and rounded to 8 bits
    first (the file format's levels); the result is in img's dtype."""
    img = _channels("add_jpg_compression", img)
    quality = int_arg("add_jpg_compression", "quality", quality)
    if quality > 100:
        raise ValueError(f"add_jpg_compression: quality must be in 1..100, got {quality}")
    q8 = np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)
    buf = io.BytesIO()
    if img.shape[0] == 3:
        Image.fromarray(np.ascontiguousarray(q8.transpose(1, 2, 0)), "RGB").save(
            buf, format="JPEG", quality=quality, subsampling=2)
    else:
        Image.fromarray(q8[0], "L").save(buf, format="JPEG", quality=quality)
    with Image.open(buf) as im:
        out = np.asarray(im)
    out = out.transpose(2, 0, 1) if out.ndim == 3 else out[None]
    return out.astype(img.dtype) / img.dtype.type(255)


def add_diffjpeg_compression(img, quality=90.0) -> np.ndarray:
    """Real-ESRGAN's JPEG of (C, H, W) in [0, 1] (C = 1 or 3): clip to [0, 1], then BasicSR's
    DiffJPEG with plain rounding (F.diff_jpeg(differentiable=False)) at a quality in [1, 100]
    (continuous, no 8-bit rounding anywhere). In img's dtype."""
    img = _channels("add_diffjpeg_compression", img)
    quality = number("add_diffjpeg_compression", "quality", quality, 1, 100)
    return diff_jpeg(np.clip(img, 0, 1)[None], quality, differentiable=False).data[0]


def random_add_jpg_compression(img, quality_range=(90, 100), *, rng, trace: dict | None = None,
                               method: str = "pillow") -> np.ndarray:
    """JPEG at a quality drawn from U(quality_range) (one draw either way): method "pillow"
    (default, BasicSR's cv2 path): add_jpg_compression at the nearest integer quality; "diffjpeg"
    (Real-ESRGAN's models): add_diffjpeg_compression at the drawn quality. `trace`, when given,
    receives the quality used (an int with Pillow, a float with DiffJPEG)."""
    owner = "random_add_jpg_compression"
    lo, hi = value_range(owner, "quality_range", quality_range, 1, 100)
    method = choice(owner, "method", method, JPEG_METHODS)
    quality = rng.uniform(lo, hi)
    if method == "pillow":
        quality = int(round(quality))
    if trace is not None:
        trace["quality"] = quality
    if method == "pillow":
        return add_jpg_compression(img, quality)
    return add_diffjpeg_compression(img, quality)
