"""Real-ESRGAN's degradation primitives: BasicSR's basicsr/data/degradations.py (blur kernels,
noise, JPEG) and img_process_util.py (filter2D, USMSharp), on numpy (C, H, W) images in [0, 1].
One family per module: kernels (Gaussian, generalized, plateau, mixed), sinc (circular low-pass and
its Bessel J1), filtering (filter2d, usm_sharp), noise (Gaussian, Poisson), jpeg (DiffJPEG and
Pillow), kernel_file (a kernel as a .npy file: an image's own, e.g. KernelGAN's estimate); every
public name is importable from here.

Names, arguments and formulas are BasicSR's. Differences, all deliberate:
- every random function takes a keyword-only `rng` (a numpy Generator): no global RNG, no `random`;
- a value range may be degenerate (low == high: a fixed value), BasicSR asserts low < high;
- the noise follows the `*_pt` versions the models actually run: gray Poisson noise is computed
  on torchvision's gray (0.2989 R + 0.587 G + 0.114 B);
- JPEG is either DiffJPEG (add_diffjpeg_compression: F.diff_jpeg, as BasicSR's models run it) or
  Pillow (add_jpg_compression: libjpeg at an integer quality, as BasicSR's cv2 path);
  random_add_jpg_compression takes `method`.
Kernels are float64; images keep their dtype (float32 stays float32).
"""
from ._common import pick, probabilities, value_range
from .filtering import filter2d, gaussian_kernel1d, usm_sharp
from .kernel_file import (analytic_kernel, centre_kernel, is_kernel_file, load_kernel,
                          save_kernel, zeroize_negligible)
from .jpeg import (JPEG_METHODS, add_diffjpeg_compression, add_jpg_compression,
                   random_add_jpg_compression)
from .kernels import (KERNEL_TYPES, bivariate_Gaussian, bivariate_generalized_Gaussian,
                      bivariate_plateau, check_kernel_list, mesh_grid, pdf2,
                      random_bivariate_Gaussian, random_bivariate_generalized_Gaussian,
                      random_bivariate_plateau, random_mixed_kernels, sigma_matrix2)
from .noise import (generate_gaussian_noise, generate_poisson_noise, poisson_cdf_table,
                    random_add_gaussian_noise, random_add_poisson_noise)
from .sinc import bessel_j1, circular_lowpass_kernel

__all__ = [
    "KERNEL_TYPES", "sigma_matrix2", "mesh_grid", "pdf2", "bivariate_Gaussian",
    "bivariate_generalized_Gaussian", "bivariate_plateau", "random_bivariate_Gaussian",
    "random_bivariate_generalized_Gaussian", "random_bivariate_plateau", "random_mixed_kernels",
    "check_kernel_list", "bessel_j1", "circular_lowpass_kernel", "filter2d", "gaussian_kernel1d",
    "usm_sharp", "generate_gaussian_noise", "random_add_gaussian_noise", "generate_poisson_noise",
    "random_add_poisson_noise", "poisson_cdf_table", "JPEG_METHODS", "add_jpg_compression",
    "add_diffjpeg_compression", "random_add_jpg_compression", "pick", "value_range",
    "probabilities", "analytic_kernel", "centre_kernel", "is_kernel_file", "load_kernel",
    "save_kernel", "zeroize_negligible",
]
