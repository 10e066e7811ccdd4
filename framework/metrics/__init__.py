"""Image-quality metrics with BasicSR's conventions, registered in METRICS as "psnr" and "ssim",
and the BT.601 colour conversions they (and Y-channel training) use."""
from .color import rgb_to_y, rgb_to_ycbcr, ycbcr_to_rgb
from .psnr import psnr
from .ssim import gaussian_window, ssim

__all__ = ["psnr", "ssim", "gaussian_window", "rgb_to_y", "rgb_to_ycbcr", "ycbcr_to_rgb"]
