"""Image-quality metrics with BasicSR's conventions, registered in METRICS as "psnr" and "ssim"."""
from .measure import higher_is_better, measure
from .psnr import psnr
from .ssim import gaussian_window, ssim

__all__ = ["psnr", "ssim", "gaussian_window", "measure", "higher_is_better"]
