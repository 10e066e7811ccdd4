"""PyTorch twin of the degradation in Real-ESRGAN's RealESRNetModel.feed_data
(realesrgan/models/realesrnet_model.py; RealESRGANModel's is the same) with every random draw
given instead of drawn: the blur kernels, resize factors and modes, noise fields, JPEG qualities
and the order of the last two steps. Written without importing basicsr or realesrgan; filter2D
and USMSharp follow basicsr/utils/img_process_util.py, the JPEG is tests/twins/diffjpeg.py.

    lq = degrade(gt, draws, scale=4)    # gt (B, C, H, W) tensor; draws: see `degrade`
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

from .diffjpeg import DiffJPEG


def filter2D(img, kernel):
    """Every plane of img (B, C, H, W) cross-correlated with one odd (k, k) kernel (reflect pad)."""
    k = kernel.size(-1)
    b, c, h, w = img.size()
    img = F.pad(img, (k // 2, k // 2, k // 2, k // 2), mode="reflect")
    ph, pw = img.size()[-2:]
    out = F.conv2d(img.view(b * c, 1, ph, pw), kernel.view(1, 1, k, k), padding=0)
    return out.view(b, c, h, w)


def usm_sharp(img, kernel, weight=0.5, threshold=10):
    """BasicSR's USMSharp.forward with its (radius, radius) Gaussian `kernel` given."""
    blur = filter2D(img, kernel)
    residual = img - blur
    mask = (torch.abs(residual) * 255 > threshold).to(img.dtype)
    soft_mask = filter2D(mask, kernel)
    sharp = torch.clip(img + weight * residual, 0, 1)
    return soft_mask * sharp + (1 - soft_mask) * img


@torch.no_grad()  # as feed_data
def degrade(gt, draws: dict, scale: int, jpeger=None):
    """feed_data's two orders of degradation, then the rounding to 8-bit levels.

    draws: kernel1, kernel2 (None: no second blur), sinc (None: the pulse, no change) as (k, k)
    tensors; resize1_scale / resize1_mode, resize2_scale / resize2_mode, final_resize_mode
    (resize modes; a first-order mode of None keeps the size); noise1, noise2 (the noise fields,
    added then clamped as random_add_*_noise_pt with clip=True, rounds=False); jpeg1_quality,
    jpeg2_quality (numbers); final_order ("resize_sinc_then_jpeg" or "jpeg_then_resize_sinc").
    jpeger: DiffJPEG(differentiable=False) in gt's dtype unless given."""
    if jpeger is None:
        jpeger = DiffJPEG(differentiable=False).to(gt.dtype)
    ori_h, ori_w = gt.size()[2:4]

    def jpeg(out, quality):
        out = torch.clamp(out, 0, 1)  # "otherwise JPEGer will result in unpleasant artifacts"
        return jpeger(out, quality=out.new_zeros(out.size(0)) + quality)

    def resize_sinc(out):
        out = F.interpolate(out, size=(ori_h // scale, ori_w // scale),
                            mode=draws["final_resize_mode"])
        return out if draws["sinc"] is None else filter2D(out, draws["sinc"])

    # the first degradation process
    out = filter2D(gt, draws["kernel1"])
    if draws["resize1_mode"] is not None:
        out = F.interpolate(out, scale_factor=draws["resize1_scale"], mode=draws["resize1_mode"])
    out = torch.clamp(out + draws["noise1"], 0, 1)
    out = jpeg(out, draws["jpeg1_quality"])
    # the second degradation process
    if draws["kernel2"] is not None:
        out = filter2D(out, draws["kernel2"])
    factor = draws["resize2_scale"]
    out = F.interpolate(out, size=(int(ori_h / scale * factor), int(ori_w / scale * factor)),
                        mode=draws["resize2_mode"])
    out = torch.clamp(out + draws["noise2"], 0, 1)
    if draws["final_order"] == "resize_sinc_then_jpeg":
        out = jpeg(resize_sinc(out), draws["jpeg2_quality"])
    else:
        out = resize_sinc(jpeg(out, draws["jpeg2_quality"]))
    return torch.clamp((out * 255.0).round(), 0, 255) / 255.
