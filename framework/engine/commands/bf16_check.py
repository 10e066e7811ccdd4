"""`--bf16` for srgrad-infer and srgrad-eval: run the model's convolutions with bfloat16 operands
(framework.autocast), after measuring, once per model, what that costs against float32 on a crop
of the first image, and saying it (OpenVINO's precision hint, made visible)."""
from __future__ import annotations

import numpy as np

from ... import precision

__all__ = ["bf16_arg", "measure", "announce"]

CROP = 64  # LR pixels per side of the crop both precisions run on (the whole image when smaller)


def bf16_arg(p):
    p.add_argument("--bf16", action="store_true", help="bfloat16 operands in the convolutions, float32 "
                   "sums (AMX or AVX512-BF16; refused with the reason on a CPU without them); the "
                   "largest difference to float32 on a crop of the first image is printed first")


def measure(model, img: np.ndarray, scale: int, in_ch: int, self_ensemble: bool = False) -> tuple:
    """(max |bf16 - fp32| of the SR clipped to [0, 1], crop shape (h, w)) on the centre crop of
    CROP x CROP LR pixels of img (C, H, W), the model run whole on it both ways."""
    from ..inference.upscale import channel_fn
    _, H, W = img.shape
    h, w = min(H, CROP), min(W, CROP)
    y0, x0 = (H - h) // 2, (W - w) // 2
    crop = np.ascontiguousarray(img[None, :, y0:y0 + h, x0:x0 + w], np.float32)
    fn = channel_fn(model, in_ch, scale, self_ensemble)
    ref = fn(crop)
    with precision.autocast("bf16"):
        low = fn(crop)
    return float(np.abs(low.astype(np.float64) - ref).max()), (h, w)


def announce(model, img: np.ndarray, scale: int, in_ch: int, source, self_ensemble: bool = False,
             say=print) -> None:
    """Refuse (PrecisionError with the reason) where bfloat16 cannot run, else print the route and
    the measured difference on `source`'s crop."""
    precision.require_bf16("--bf16")
    diff, (h, w) = measure(model, img, scale, in_ch, self_ensemble)
    say(f"bf16 ({precision.route()}): max |bf16 - fp32| = {diff:.4g} on [0, 1] over a {h}x{w} LR crop "
        f"of {source}")
