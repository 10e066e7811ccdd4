"""Inference: build a model from weights (+ optional config), upscale arrays in overlapping tiles,
upscale image files of any supported mode.

Tiling: the LR image is cut into `tile` x `tile` blocks; each block is run with `overlap` extra LR
pixels of context on every side (clamped at the image border) and only its centre is written. When
`overlap` covers the network's receptive-field radius the result equals untiled inference (to float
rounding) while memory is bounded by one tile, so a 4000x3000 image runs on a small machine.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import functional as F
from ..autograd import no_grad
from ..io.checkpoint import CheckpointError, load_model_weights, load_weights
from ..registry import BASELINES, MODELS
from ..tensor import Tensor

__all__ = ["build_model", "load_model", "upscale", "bicubic", "upscale_file", "model_in_channels"]


def build_model(spec: dict, scale: int | None = None):
    """MODELS.build on a `{type, **kwargs}` spec; `scale` is added when the spec lacks it."""
    spec = dict(spec)
    if scale is not None:
        spec.setdefault("scale", scale)
    try:
        return MODELS.build(spec)
    except KeyError as exc:  # an unregistered model or layer (e.g. EDSR's block: spec)
        raise ValueError(f"{exc.args[0]} (a custom model or layer? pass --config with its "
                         f"imports:, or --import MODULE)") from None


def load_model(weights, model_spec: dict | None = None, scale: int | None = None,
               fallback_spec: dict | None = None):
    """(model in eval mode, info). The model spec is, in this order: `model_spec` (given on the
    command line), the weights file's metadata (srgrad's trainer writes it: it describes these
    weights exactly), `fallback_spec` (a config's `model:` block, for weights from elsewhere)."""
    from .zoo import load_zoo
    load_zoo()
    _, info = load_weights(weights)
    spec = model_spec or info.get("model") or fallback_spec
    if not spec:
        raise CheckpointError(f"{weights} carries no model spec: pass --config CONFIG or "
                              f"--model TYPE --scale S")
    if scale and spec.get("scale") and scale != spec["scale"]:
        raise ValueError(f"{weights}: the model is x{spec['scale']}, --scale {scale} disagrees")
    scale = scale or spec.get("scale") or info.get("scale")
    if scale is None:
        raise ValueError("the model's scale is unknown: pass --scale")
    try:
        model = build_model(spec, scale)
    except ValueError as exc:
        if not info.get("imports"):
            raise
        raise ValueError(f"{exc} The weights were trained with imports: {info['imports']}") \
            from None
    dtype = info.get("dtype")
    if dtype:
        model.to(np.dtype(dtype))
    load_model_weights(model, weights)
    model.eval()
    info = {**info, "model": {**spec, "scale": int(scale)}, "scale": int(scale)}
    return model, info


def model_in_channels(info: dict) -> int:
    """Channels the model expects (its `num_in_ch`, 3 by default as in every bundled model)."""
    return int(info.get("model", {}).get("num_in_ch", 3))


def _model_dtype(model):
    for p in model.parameters():
        return p.data.dtype
    return np.dtype(np.float32)


def upscale(model, lq: np.ndarray, tile: int | None = None, overlap: int = 16) -> np.ndarray:
    """SR of one LR image `lq` (C, H, W) -> (C', H*s, W*s) with the model in eval mode, under
    no_grad. `tile` (LR pixels) bounds memory; `overlap` LR pixels of context per side."""
    if lq.ndim != 3:
        raise ValueError(f"upscale: lq must be (C, H, W), got shape {lq.shape}")
    if tile is not None and tile < 1:
        raise ValueError(f"upscale: tile must be >= 1, got {tile}")
    if overlap < 0:
        raise ValueError(f"upscale: tile overlap must be >= 0, got {overlap}")
    dtype = _model_dtype(model)
    _, h, w = lq.shape
    with no_grad():
        if tile is None or (h <= tile and w <= tile):
            return model(Tensor(lq[None].astype(dtype, copy=False))).data[0]
        out = None
        for y0 in range(0, h, tile):
            for x0 in range(0, w, tile):
                y1, x1 = min(y0 + tile, h), min(x0 + tile, w)
                ey0, ex0 = max(y0 - overlap, 0), max(x0 - overlap, 0)
                ey1, ex1 = min(y1 + overlap, h), min(x1 + overlap, w)
                patch = np.ascontiguousarray(lq[None, :, ey0:ey1, ex0:ex1], dtype=dtype)
                res = model(Tensor(patch)).data[0]
                s = res.shape[1] // (ey1 - ey0)
                if out is None:
                    out = np.empty((res.shape[0], h * s, w * s), res.dtype)
                out[:, y0 * s:y1 * s, x0 * s:x1 * s] = \
                    res[:, (y0 - ey0) * s:(y1 - ey0) * s, (x0 - ex0) * s:(x1 - ex0) * s]
        return out


@BASELINES.register("imresize")
def _imresize_baseline(x: Tensor, scale: int) -> Tensor:
    """MATLAB's imresize bicubic: what SR papers report as "Bicubic"."""
    return F.imresize(x, scale_factor=scale)


@BASELINES.register("interpolate")
def _interpolate_baseline(x: Tensor, scale: int) -> Tensor:
    """F.interpolate(mode="bicubic", align_corners=False), PyTorch's bicubic."""
    return F.interpolate(x, scale_factor=scale, mode="bicubic", align_corners=False)


def bicubic(lq: np.ndarray, scale: int, method: str = "imresize") -> np.ndarray:
    """Upscale (C, H, W) by a registered baseline (BASELINES: "imresize", MATLAB's bicubic, or
    "interpolate", PyTorch's), clipped to [0, 1]."""
    try:
        fn = BASELINES.get(method)
    except KeyError as exc:
        raise ValueError(f"bicubic: method: {exc.args[0]}") from None
    with no_grad():
        y = fn(Tensor(np.ascontiguousarray(lq[None])), scale)
    return np.clip(y.data[0], 0.0, 1.0)


def super_resolve(model, img: np.ndarray, scale: int, in_ch: int, tile=None, overlap=16):
    """SR of an image whatever its channel count vs the model's: a 1-channel model on RGB runs on
    Y (Cb, Cr bicubic), a 3-channel model on gray runs on the gray replicated and averages back."""
    c = img.shape[0]
    if c == in_ch:
        sr = upscale(model, img, tile, overlap)
        return np.clip(sr, 0.0, 1.0, out=sr)  # in place: the HR image can be hundreds of MB
    if in_ch == 1 and c == 3:
        from ..color import rgb_to_ycbcr, ycbcr_to_rgb
        ycc = rgb_to_ycbcr(img).astype(np.float32)
        y = upscale(model, ycc[:1], tile, overlap)
        cbcr = bicubic(ycc[1:], scale, "interpolate")
        return np.clip(ycbcr_to_rgb(np.concatenate([y, cbcr.astype(y.dtype)])), 0, 1)
    if in_ch == 3 and c == 1:
        sr = upscale(model, np.repeat(img, 3, axis=0), tile, overlap)
        return np.clip(sr.mean(axis=0, keepdims=True), 0.0, 1.0)
    raise ValueError(f"cannot run a {in_ch}-channel model on a {c}-channel image")


_SIXTEEN_BIT_FORMATS = (".png", ".tif", ".tiff")


def upscale_file(model, info: dict, src, dst, tile=None, overlap=16) -> tuple:
    """Read `src`, super-resolve, write `dst` (same mode family: RGB stays RGB, gray stays gray,
    alpha is upscaled with bicubic interpolation and clipped; 16-bit in -> 16-bit out where the
    output format and Pillow allow). Returns the output (C, H, W) shape."""
    from ..io.image import read_image, write_image
    img, meta = read_image(src)
    scale = int(info["scale"])
    sr = super_resolve(model, img, scale, model_in_channels(info), tile, overlap)
    alpha = meta.get("alpha")
    if alpha is not None:
        alpha = bicubic(alpha, scale, "interpolate")
    bits = 8
    if meta.get("bits") == 16 and Path(dst).suffix.lower() in _SIXTEEN_BIT_FORMATS \
            and sr.shape[0] == 1 and alpha is None:
        bits = 16
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    write_image(dst, sr, bits=bits, alpha=alpha)
    return sr.shape
