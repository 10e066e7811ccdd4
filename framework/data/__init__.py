"""SR data: datasets (registered in DATASETS; ZSSR's father/son pairs of one image), paired crop / augmentation, Real-ESRGAN's
degradations, the seeded loader (BatchLoader, the trainer's) with its background Prefetcher, and
torch's DataLoader."""
from .augment import apply_flags, augment, paired_random_crop, random_flags
from .dataloader import DataLoader, default_collate
from .datasets import HRImageDataset, PairedImageDataset, SingleImageDataset, mod_crop
from .denoise import GaussianNoiseDataset
from .jpeg_artifacts import JPEGDataset
from .degradations import (add_diffjpeg_compression, add_jpg_compression, bessel_j1,
                           bivariate_Gaussian, bivariate_generalized_Gaussian, bivariate_plateau,
                           circular_lowpass_kernel, filter2d, gaussian_kernel1d,
                           generate_gaussian_noise, generate_poisson_noise, mesh_grid, pdf2,
                           random_add_gaussian_noise, random_add_jpg_compression,
                           random_add_poisson_noise, random_bivariate_Gaussian,
                           random_bivariate_generalized_Gaussian, random_bivariate_plateau,
                           random_mixed_kernels, sigma_matrix2, usm_sharp)
from .loader import BatchLoader
from .prefetch import Prefetcher
from .realesrgan import DegradationOptions, RealESRGANDataset, degrade
from .zssr import ZSSRDataset

__all__ = ["HRImageDataset", "PairedImageDataset", "SingleImageDataset", "RealESRGANDataset",
           "GaussianNoiseDataset", "JPEGDataset",
           "ZSSRDataset", "BatchLoader",
           "Prefetcher", "DataLoader", "default_collate", "mod_crop",
           "augment", "paired_random_crop", "random_flags", "apply_flags", "DegradationOptions",
           "degrade", "sigma_matrix2", "mesh_grid", "pdf2", "bivariate_Gaussian",
           "bivariate_generalized_Gaussian", "bivariate_plateau", "random_bivariate_Gaussian",
           "random_bivariate_generalized_Gaussian", "random_bivariate_plateau",
           "random_mixed_kernels", "bessel_j1", "circular_lowpass_kernel", "filter2d",
           "gaussian_kernel1d", "usm_sharp", "generate_gaussian_noise", "generate_poisson_noise",
           "random_add_gaussian_noise", "random_add_poisson_noise", "add_jpg_compression",
           "add_diffjpeg_compression", "random_add_jpg_compression"]
