"""JPEG compression artefacts: encode and decode through Pillow (BasicSR's models use DiffJPEG)."""
from __future__ import annotations

import io

import numpy as np
from PIL import Image

from ..._check import int_arg
from ._common import _chw, value_range

__all__ = ["add_jpg_compression", "random_add_jpg_compression"]


def add_jpg_compression(img, quality=90) -> np.ndarray:
    """JPEG-encode and decode (C, H, W) in [0, 1] (C = 1 or 3) with Pillow at integer `quality`
    (1..100; 4:2:0 chroma for colour, like DiffJPEG). The image is clipped and rounded to 8 bits
    first (the file format's levels); the result is in img's dtype."""
    img = _chw("add_jpg_compression", img)
    quality = int_arg("add_jpg_compression", "quality", quality)
    if quality > 100:
        raise ValueError(f"add_jpg_compression: quality must be in 1..100, got {quality}")
    if img.shape[0] not in (1, 3):
        raise ValueError(f"add_jpg_compression: img must have 1 or 3 channels, got {img.shape[0]}")
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


def random_add_jpg_compression(img, quality_range=(90, 100), *, rng,
                               trace: dict | None = None) -> np.ndarray:
    """add_jpg_compression at quality round(U(quality_range)) (DiffJPEG's quality is continuous,
    Pillow's an integer: the nearest one); `trace`, when given, receives that quality."""
    lo, hi = value_range("random_add_jpg_compression", "quality_range", quality_range, 1, 100)
    quality = int(round(rng.uniform(lo, hi)))
    if trace is not None:
        trace["quality"] = quality
    return add_jpg_compression(img, quality)
