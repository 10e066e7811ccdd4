"""Blur kernels: BasicSR's isotropic / anisotropic Gaussian, generalized Gaussian and plateau
kernels (basicsr/data/degradations.py), their random versions, and `random_mixed_kernels`, which
draws the kernel type. (k, k) float64, k odd, normalised to sum 1."""
from __future__ import annotations

import math

import numpy as np

from ..._check import choice, int_arg, number
from ._common import _odd_size, pick, probabilities, sequence, value_range
from .kernel_file import is_kernel_file, load_kernel

__all__ = ["KERNEL_TYPES", "sigma_matrix2", "mesh_grid", "pdf2", "bivariate_Gaussian",
           "bivariate_generalized_Gaussian", "bivariate_plateau", "random_bivariate_Gaussian",
           "random_bivariate_generalized_Gaussian", "random_bivariate_plateau",
           "random_mixed_kernels", "check_kernel_list"]


def sigma_matrix2(sig_x, sig_y, theta) -> np.ndarray:
    """The covariance U diag(sig_x^2, sig_y^2) U^T of a Gaussian rotated by `theta` radians."""
    d = np.array([[sig_x ** 2, 0.0], [0.0, sig_y ** 2]])
    u = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    return u @ d @ u.T


def mesh_grid(kernel_size: int):
    """(xy (k, k, 2), xx (k, k), yy (k, k)): offsets -(k // 2)..k // 2, x along the columns."""
    k = int_arg("mesh_grid", "kernel_size", kernel_size)
    ax = np.arange(-k // 2 + 1.0, k // 2 + 1.0)
    xx, yy = np.meshgrid(ax, ax)
    return np.stack([xx, yy], axis=-1), xx, yy


def _covariance(owner, kernel_size, sig_x, sig_y, theta, grid, isotropic):
    """(Sigma (2, 2), grid (k, k, 2)); Sigma = sig_x^2 I when isotropic (sig_y, theta ignored)."""
    if grid is None:
        grid, _, _ = mesh_grid(_odd_size(owner, "kernel_size", kernel_size))
    number(owner, "sig_x", sig_x, 0.0, low_open=True)
    if isotropic:
        return np.diag([sig_x ** 2, sig_x ** 2]), grid
    number(owner, "sig_y", sig_y, 0.0, low_open=True)
    return sigma_matrix2(sig_x, sig_y, theta), grid


def _quadratic_form(sigma_matrix, grid) -> np.ndarray:
    """q = d^T Sigma^-1 d at every grid offset d, (k, k)."""
    return np.sum((grid @ np.linalg.inv(sigma_matrix)) * grid, axis=2)


def pdf2(sigma_matrix, grid) -> np.ndarray:
    """exp(-q / 2) on `grid` (k, k, 2): the unnormalised bivariate Gaussian."""
    return np.exp(-0.5 * _quadratic_form(sigma_matrix, grid))


def bivariate_Gaussian(kernel_size, sig_x, sig_y, theta, grid=None, isotropic=True) -> np.ndarray:
    """exp(-q / 2), q = d^T Sigma^-1 d, normalised to sum 1: (k, k) float64, k odd. Sigma is
    sigma_matrix2(sig_x, sig_y, theta), or sig_x^2 I when isotropic."""
    kern = pdf2(*_covariance("bivariate_Gaussian", kernel_size, sig_x, sig_y, theta, grid,
                             isotropic))
    return kern / np.sum(kern)


def bivariate_generalized_Gaussian(kernel_size, sig_x, sig_y, theta, beta, grid=None,
                                   isotropic=True) -> np.ndarray:
    """exp(-q^beta / 2), normalised (beta = 1: the Gaussian)."""
    owner = "bivariate_generalized_Gaussian"
    beta = number(owner, "beta", beta, 0.0, low_open=True)
    q = _quadratic_form(*_covariance(owner, kernel_size, sig_x, sig_y, theta, grid, isotropic))
    kern = np.exp(-0.5 * np.power(q, beta))
    return kern / np.sum(kern)


def bivariate_plateau(kernel_size, sig_x, sig_y, theta, beta, grid=None,
                      isotropic=True) -> np.ndarray:
    """1 / (q^beta + 1), normalised: a plateau-shaped kernel."""
    owner = "bivariate_plateau"
    beta = number(owner, "beta", beta, 0.0, low_open=True)
    q = _quadratic_form(*_covariance(owner, kernel_size, sig_x, sig_y, theta, grid, isotropic))
    kern = np.reciprocal(np.power(q, beta) + 1)
    return kern / np.sum(kern)


def _random_kernel(owner, make, kernel_size, sigma_x_range, sigma_y_range, rotation_range,
                   beta_range, noise_range, isotropic, rng, trace):
    """BasicSR's draw order: sig_x, then (anisotropic only) sig_y and the rotation, then beta (a
    coin, then U(low, 1) or U(1, high): BasicSR assumes low < 1 < high), then the multiplicative
    kernel noise U(noise_range) per tap; the kernel is renormalised. `trace` (a dict or None)
    receives sigma_x, sigma_y, theta and beta (None without beta_range)."""
    k = _odd_size(owner, "kernel_size", kernel_size)
    sig_x = sig_y = rng.uniform(*value_range(owner, "sigma_x_range", sigma_x_range, 0.0))
    theta = 0.0
    if not isotropic:
        sig_y = rng.uniform(*value_range(owner, "sigma_y_range", sigma_y_range, 0.0))
        theta = rng.uniform(*value_range(owner, "rotation_range", rotation_range))
    extra = ()
    if beta_range is not None:
        lo, hi = value_range(owner, "beta_range", beta_range, 0.0)
        extra = (rng.uniform(lo, 1.0) if rng.uniform() < 0.5 else rng.uniform(1.0, hi),)
    if trace is not None:
        trace.update(sigma_x=sig_x, sigma_y=sig_y, theta=theta, beta=extra[0] if extra else None)
    kern = make(k, sig_x, sig_y, theta, *extra, isotropic=isotropic)
    if noise_range is not None:
        kern = kern * rng.uniform(*value_range(owner, "noise_range", noise_range), size=kern.shape)
    return kern / np.sum(kern)


def random_bivariate_Gaussian(kernel_size, sigma_x_range, sigma_y_range, rotation_range,
                              noise_range=None, isotropic=True, *, rng,
                              trace: dict | None = None) -> np.ndarray:
    """A Gaussian kernel with sig_x ~ U(sigma_x_range) (and sig_y, theta when anisotropic);
    `trace`, when given, receives the draws (see `_random_kernel`)."""
    return _random_kernel("random_bivariate_Gaussian", bivariate_Gaussian, kernel_size,
                          sigma_x_range, sigma_y_range, rotation_range, None, noise_range,
                          isotropic, rng, trace)


def random_bivariate_generalized_Gaussian(kernel_size, sigma_x_range, sigma_y_range,
                                          rotation_range, beta_range, noise_range=None,
                                          isotropic=True, *, rng,
                                          trace: dict | None = None) -> np.ndarray:
    """A generalized Gaussian kernel with random shape and beta (see `_random_kernel`)."""
    return _random_kernel("random_bivariate_generalized_Gaussian", bivariate_generalized_Gaussian,
                          kernel_size, sigma_x_range, sigma_y_range, rotation_range, beta_range,
                          noise_range, isotropic, rng, trace)


def random_bivariate_plateau(kernel_size, sigma_x_range, sigma_y_range, rotation_range,
                             beta_range, noise_range=None, isotropic=True, *, rng,
                             trace: dict | None = None) -> np.ndarray:
    """A plateau kernel with random shape and beta (see `_random_kernel`)."""
    return _random_kernel("random_bivariate_plateau", bivariate_plateau, kernel_size,
                          sigma_x_range, sigma_y_range, rotation_range, beta_range, noise_range,
                          isotropic, rng, trace)


# Kernel types are data: name -> (sampler, isotropic, takes beta_range from betag or betap).
KERNEL_TYPES = {
    "iso": (random_bivariate_Gaussian, True, None),
    "aniso": (random_bivariate_Gaussian, False, None),
    "generalized_iso": (random_bivariate_generalized_Gaussian, True, "betag"),
    "generalized_aniso": (random_bivariate_generalized_Gaussian, False, "betag"),
    "plateau_iso": (random_bivariate_plateau, True, "betap"),
    "plateau_aniso": (random_bivariate_plateau, False, "betap"),
}


def check_kernel_list(owner: str, name: str, kernel_list) -> tuple[str, ...]:
    """Every entry (of a list, tuple or array) a known kernel type (ValueError with a did-you-mean
    otherwise) or a kernel file (.npy, kernel_file.py: e.g. srgrad-zssr's estimate of a camera's
    kernel; read and checked here), as a tuple of str."""
    items = sequence(kernel_list)
    if not items:
        raise ValueError(f"{owner}: {name} must be a non-empty list of kernel types, got "
                         f"{kernel_list!r}")
    for t in items:
        if is_kernel_file(t):
            load_kernel(t, f"{owner}: {name}: kernel file")
        else:
            choice(owner, name, t, tuple(KERNEL_TYPES))
    return tuple(str(t) for t in items)


def random_mixed_kernels(kernel_list, kernel_prob, kernel_size=21, sigma_x_range=(0.6, 5),
                         sigma_y_range=(0.6, 5), rotation_range=(-math.pi, math.pi),
                         betag_range=(0.5, 8), betap_range=(0.5, 8), noise_range=None, *,
                         rng, trace: dict | None = None) -> np.ndarray:
    """A (k, k) kernel of a type drawn from `kernel_list` with `kernel_prob` (which must sum to 1);
    a kernel file drawn is returned as it is (its own size).
    Plateau kernels never get multiplicative noise (as in BasicSR). `trace`, when given, receives
    the draws: kernel (the type), sigma_x, sigma_y, theta, beta (None for a Gaussian)."""
    owner = "random_mixed_kernels"
    kernel_list = check_kernel_list(owner, "kernel_list", kernel_list)
    probs = probabilities(owner, "kernel_prob", kernel_prob, len(kernel_list))
    kind = pick(rng, kernel_list, probs)
    if trace is not None:
        trace["kernel"] = kind
    if is_kernel_file(kind):  # used as it is: kernel_size and the ranges do not apply
        if trace is not None:
            trace.update(sigma_x=None, sigma_y=None, theta=None, beta=None)
        return load_kernel(kind, f"{owner}: kernel file")
    sampler, isotropic, beta = KERNEL_TYPES[kind]
    args = (kernel_size, sigma_x_range, sigma_y_range, rotation_range)
    draws = dict(isotropic=isotropic, rng=rng, trace=trace)
    if beta is None:
        return sampler(*args, noise_range=noise_range, **draws)
    if beta == "betag":
        return sampler(*args, betag_range, noise_range=noise_range, **draws)
    return sampler(*args, betap_range, noise_range=None, **draws)
