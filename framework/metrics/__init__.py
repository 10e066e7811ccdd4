"""Image-quality metrics with BasicSR's conventions, registered in METRICS: "psnr" and "ssim"
(full-reference, higher is better), "lpips" and "lpips_vgg" (learned perceptual distance, lower is
better; the network's weight files are the user's), "niqe" (no-reference, lower is better)."""
from .lpips import lpips, lpips_vgg
from .measure import higher_is_better, measure
from .niqe import niqe
from .psnr import psnr
from .ssim import gaussian_window, ssim

__all__ = ["psnr", "ssim", "gaussian_window", "niqe", "lpips", "lpips_vgg", "measure", "higher_is_better"]
