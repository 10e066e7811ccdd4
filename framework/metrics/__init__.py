"""Image-quality metrics with BasicSR's conventions, registered in METRICS: "psnr" and "ssim"
(full-reference, higher is better), "lpips", "lpips_vgg" and "dists" (learned perceptual distances,
lower is better; the networks' weight files are the user's), "niqe" (no-reference, lower is better)."""
from .measure import higher_is_better, measure
from .niqe import niqe
from .perceptual import dists, lpips, lpips_vgg
from .psnr import psnr
from .ssim import gaussian_window, ssim

__all__ = ["psnr", "ssim", "gaussian_window", "niqe", "lpips", "lpips_vgg", "dists", "measure", "higher_is_better"]
