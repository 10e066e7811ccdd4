"""Real-ESRGAN's degradation primitives: BasicSR's basicsr/data/degradations.py (blur kernels,
noise, JPEG) and img_process_util.py (filter2D, USMSharp), on numpy (C, H, W) images in [0, 1].

Names, arguments and formulas are BasicSR's. Differences, all deliberate:
- every random function takes a keyword-only `rng` (a numpy Generator): no global RNG, no `random`;
- a value range may be degenerate (low == high: a fixed value), BasicSR asserts low < high;
- the noise follows the `*_pt` versions the models actually run: gray Poisson noise is computed
  on torchvision's gray (0.2989 R + 0.587 G + 0.114 B);
- JPEG goes through Pillow (integer quality, 4:2:0 chroma) where BasicSR's models use DiffJPEG.
Kernels are float64; images keep their dtype (float32 stays float32).
"""
from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image

from .._check import choice, int_arg, number
from .._jit import kernel as jit
from .._jit import launch, prange

__all__ = [
    "KERNEL_TYPES", "sigma_matrix2", "mesh_grid", "pdf2", "bivariate_Gaussian",
    "bivariate_generalized_Gaussian", "bivariate_plateau", "random_bivariate_Gaussian",
    "random_bivariate_generalized_Gaussian", "random_bivariate_plateau", "random_mixed_kernels",
    "check_kernel_list", "bessel_j1", "circular_lowpass_kernel", "filter2d", "gaussian_kernel1d",
    "usm_sharp", "generate_gaussian_noise", "random_add_gaussian_noise", "generate_poisson_noise",
    "random_add_poisson_noise", "poisson_cdf_table", "add_jpg_compression",
    "random_add_jpg_compression", "pick", "value_range", "probabilities",
]


# -- argument helpers (each wraps _check so the messages name the owner and the argument) ---------
def _odd_size(owner: str, name: str, value) -> int:
    k = int_arg(owner, name, value)
    if k % 2 == 0:
        raise ValueError(f"{owner}: {name} must be odd (the kernel has a centre), got {value!r}")
    return k


def value_range(owner: str, name: str, value, low=None, high=None) -> tuple[float, float]:
    """A [low, high] pair of numbers with low <= high, each within the given bounds."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{owner}: {name} must be a [low, high] pair, got {value!r}")
    lo, hi = (number(owner, name, v, low, high) for v in value)
    if lo > hi:
        raise ValueError(f"{owner}: {name} must have low <= high, got {value!r}")
    return lo, hi


def probabilities(owner: str, name: str, value, length: int | None = None) -> np.ndarray:
    """Probabilities in [0, 1] summing to 1 (to 1e-6), as an array; `length` entries if given."""
    if not isinstance(value, (list, tuple)) or not value or (length is not None
                                                             and len(value) != length):
        count = f"{length} " if length is not None else ""
        raise ValueError(f"{owner}: {name} must be a list of {count}probabilities, got {value!r}")
    p = np.array([number(owner, name, v, 0.0, 1.0) for v in value])
    if abs(p.sum() - 1.0) > 1e-6:
        raise ValueError(f"{owner}: {name} must sum to 1, got {value!r} (sum {p.sum():.6g})")
    return p


def pick(rng: np.random.Generator, items, probs):
    """One of `items` drawn with probabilities `probs` (one uniform draw: inverse CDF)."""
    cdf = np.cumsum(probs)
    return items[min(int(np.searchsorted(cdf / cdf[-1], rng.random(), side="right")),
                     len(items) - 1)]


def _image(owner: str, img) -> np.ndarray:
    """A float32/float64 image (C, H, W) (or (..., H, W) where noted)."""
    arr = np.asarray(img)
    if arr.dtype not in (np.float32, np.float64) or arr.ndim < 2:
        raise ValueError(f"{owner}: img must be a float32 or float64 array (C, H, W), got "
                         f"{arr.dtype} array of shape {arr.shape}")
    return arr


# -- blur kernels --------------------------------------------------------------------------------
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
                   beta_range, noise_range, isotropic, rng):
    """BasicSR's draw order: sig_x, then (anisotropic only) sig_y and the rotation, then beta (a
    coin, then U(low, 1) or U(1, high): BasicSR assumes low < 1 < high), then the multiplicative
    kernel noise U(noise_range) per tap; the kernel is renormalised."""
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
    kern = make(k, sig_x, sig_y, theta, *extra, isotropic=isotropic)
    if noise_range is not None:
        kern = kern * rng.uniform(*value_range(owner, "noise_range", noise_range), size=kern.shape)
    return kern / np.sum(kern)


def random_bivariate_Gaussian(kernel_size, sigma_x_range, sigma_y_range, rotation_range,
                              noise_range=None, isotropic=True, *, rng) -> np.ndarray:
    """A Gaussian kernel with sig_x ~ U(sigma_x_range) (and sig_y, theta when anisotropic)."""
    return _random_kernel("random_bivariate_Gaussian", bivariate_Gaussian, kernel_size,
                          sigma_x_range, sigma_y_range, rotation_range, None, noise_range,
                          isotropic, rng)


def random_bivariate_generalized_Gaussian(kernel_size, sigma_x_range, sigma_y_range,
                                          rotation_range, beta_range, noise_range=None,
                                          isotropic=True, *, rng) -> np.ndarray:
    """A generalized Gaussian kernel with random shape and beta (see `_random_kernel`)."""
    return _random_kernel("random_bivariate_generalized_Gaussian", bivariate_generalized_Gaussian,
                          kernel_size, sigma_x_range, sigma_y_range, rotation_range, beta_range,
                          noise_range, isotropic, rng)


def random_bivariate_plateau(kernel_size, sigma_x_range, sigma_y_range, rotation_range,
                             beta_range, noise_range=None, isotropic=True, *, rng) -> np.ndarray:
    """A plateau kernel with random shape and beta (see `_random_kernel`)."""
    return _random_kernel("random_bivariate_plateau", bivariate_plateau, kernel_size,
                          sigma_x_range, sigma_y_range, rotation_range, beta_range, noise_range,
                          isotropic, rng)


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
    """Every entry a known kernel type (ValueError with a did-you-mean otherwise)."""
    if not isinstance(kernel_list, (list, tuple)) or not kernel_list:
        raise ValueError(f"{owner}: {name} must be a non-empty list of kernel types, got "
                         f"{kernel_list!r}")
    for t in kernel_list:
        choice(owner, name, t, tuple(KERNEL_TYPES))
    return tuple(kernel_list)


def random_mixed_kernels(kernel_list, kernel_prob, kernel_size=21, sigma_x_range=(0.6, 5),
                         sigma_y_range=(0.6, 5), rotation_range=(-math.pi, math.pi),
                         betag_range=(0.5, 8), betap_range=(0.5, 8), noise_range=None, *,
                         rng) -> np.ndarray:
    """A (k, k) kernel of a type drawn from `kernel_list` with `kernel_prob` (which must sum to 1).
    Plateau kernels never get multiplicative noise (as in BasicSR)."""
    owner = "random_mixed_kernels"
    kernel_list = check_kernel_list(owner, "kernel_list", kernel_list)
    probs = probabilities(owner, "kernel_prob", kernel_prob, len(kernel_list))
    sampler, isotropic, beta = KERNEL_TYPES[pick(rng, kernel_list, probs)]
    args = (kernel_size, sigma_x_range, sigma_y_range, rotation_range)
    if beta is None:
        return sampler(*args, noise_range=noise_range, isotropic=isotropic, rng=rng)
    if beta == "betag":
        return sampler(*args, betag_range, noise_range=noise_range, isotropic=isotropic, rng=rng)
    return sampler(*args, betap_range, noise_range=None, isotropic=isotropic, rng=rng)


# -- the sinc kernel and its Bessel function -----------------------------------------------------
@jit
def _j1_scalar(x):
    """J1(x) to ~1e-16 absolute: power series (|x| <= 1), Miller's backward recurrence normalised
    by J0 + 2 sum J_2k = 1 (|x| <= 25), Hankel's asymptotic expansion beyond (error < e^-2x)."""
    a = abs(x)
    sign = -1.0 if x < 0 else 1.0
    if a <= 1.0:  # terms (-1)^k (a/2)^(2k+1) / (k! (k+1)!) shrink by >= 8x: no cancellation
        term = 0.5 * a
        total = term
        q = -0.25 * a * a
        for k in range(1, 12):
            term *= q / (k * (k + 1))
            total += term
        return sign * total
    if a <= 25.0:
        n = 2 * ((int(a) + 32) // 2)  # even start, J_n(a) negligible below 1e-17 of the result
        j_next, j, norm, j1 = 0.0, 1e-30, 2e-30, 0.0
        for k in range(n, 0, -1):  # J_{k-1} = (2k / a) J_k - J_{k+1}
            j_prev = (2.0 * k / a) * j - j_next
            j_next, j = j, j_prev
            if k == 2:
                j1 = j
            if k > 1 and (k - 1) % 2 == 0:
                norm += 2.0 * j
            if abs(j) > 1e250:  # rescale (growth is fast when n >> a)
                j, j_next, norm, j1 = j * 1e-250, j_next * 1e-250, norm * 1e-250, j1 * 1e-250
        return sign * j1 / (norm + j)
    # J1 = sqrt(2 / (pi a)) (P cos chi - Q sin chi), chi = a - 3 pi / 4, mu = 4
    p, q, term = 1.0, 0.0, 1.0
    for k in range(1, 60):
        term *= (4.0 - (2 * k - 1) ** 2) / (8.0 * k * a)
        if k % 4 == 0:
            p += term
        elif k % 4 == 1:
            q += term
        elif k % 4 == 2:
            p -= term
        else:
            q -= term
        if abs(term) < 1e-17:
            break
    s, c = math.sin(a), math.cos(a)
    cos_chi, sin_chi = (s - c) / math.sqrt(2.0), -(s + c) / math.sqrt(2.0)
    return sign * math.sqrt(2.0 / (math.pi * a)) * (p * cos_chi - q * sin_chi)


@jit
def _j1_flat(x, out):
    for i in range(x.size):
        out[i] = _j1_scalar(x[i])


def bessel_j1(x) -> np.ndarray:
    """The Bessel function of the first kind of order 1 (scipy.special.j1), float64, elementwise."""
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("bessel_j1: x must be finite")
    out = np.empty(arr.size)
    _j1_flat(np.ascontiguousarray(arr).ravel(), out)
    return out.reshape(arr.shape)


def circular_lowpass_kernel(cutoff, kernel_size, pad_to=0) -> np.ndarray:
    """The 2D sinc (circular low-pass) kernel: cutoff J1(cutoff r) / (2 pi r) at distance r from the
    centre, cutoff^2 / (4 pi) at r = 0, normalised to sum 1, then zero-padded to `pad_to` (odd, or 0
    / anything <= kernel_size for no padding). cutoff in radians (pi is Nyquist). (k, k) float64."""
    owner = "circular_lowpass_kernel"
    cutoff = number(owner, "cutoff", cutoff, 0.0, low_open=True)
    k = _odd_size(owner, "kernel_size", kernel_size)
    pad_to = int_arg(owner, "pad_to", int(pad_to) if isinstance(pad_to, bool) else pad_to, 0)
    if pad_to > k and pad_to % 2 == 0:
        raise ValueError(f"{owner}: pad_to must be odd or 0, got {pad_to}")
    ax = np.arange(k) - (k - 1) / 2
    r = np.sqrt(ax[:, None] ** 2 + ax[None, :] ** 2)
    r[k // 2, k // 2] = 1.0  # placeholder: the centre is set from the limit below
    kern = cutoff * bessel_j1(cutoff * r) / (2 * np.pi * r)
    kern[k // 2, k // 2] = cutoff ** 2 / (4 * np.pi)
    kern = kern / np.sum(kern)
    if pad_to > k:
        kern = np.pad(kern, (pad_to - k) // 2)
    return kern


# -- filtering ----------------------------------------------------------------------------------
@jit(parallel=True)
def _correlate(padded, kern, out):
    """out[p, i, j] += sum_{u, v} kern[u, v] padded[p, i + u, j + v]: one task per output row.
    Taps go four at a time (the rest one at a time), so the output row is read and written once
    per four: twice as fast as one at a time (groups of 2, 3 or 8 vectorise worse)."""
    planes, h, w = out.shape
    kh, kw = kern.shape
    for task in prange(planes * h):
        p, i = task // h, task % h
        row = out[p, i]
        for u in range(kh):
            src = padded[p, i + u]
            v = 0
            while v + 4 <= kw:
                a, b, c, d = kern[u, v], kern[u, v + 1], kern[u, v + 2], kern[u, v + 3]
                for j in range(w):
                    row[j] += (a * src[j + v] + b * src[j + v + 1] + c * src[j + v + 2]
                               + d * src[j + v + 3])
                v += 4
            for t in range(v, kw):
                a = kern[u, t]
                for j in range(w):
                    row[j] += a * src[j + t]


def _fast_len(n: int) -> int:
    """The smallest m >= n with prime factors 2, 3, 5, 7 only (fast sizes for pocketfft)."""
    while True:
        m = n
        for f in (2, 3, 5, 7):
            while m % f == 0:
                m //= f
        if m == 1:
            return n
        n += 1


def _fft_correlate(padded, kern, h, w):
    """The same correlation through rfft2: the valid outputs i < h never wrap around, so the padded
    size (rounded up to a fast length) is enough. In float64 (numpy's float32 rfft2 is slower)."""
    size = (_fast_len(padded.shape[-2]), _fast_len(padded.shape[-1]))
    spec = (np.fft.rfft2(padded.astype(np.float64, copy=False), s=size)
            * np.conj(np.fft.rfft2(kern.astype(np.float64, copy=False), s=size)))
    return np.fft.irfft2(spec, s=size)[..., :h, :w]


# Direct correlation costs k^2 multiply-adds per pixel, the FFT route a near-constant amount; on
# (3, 40..400, 40..400) float32 planes they cost about the same at 21 x 21 (BasicSR's largest blur).
_DIRECT_MAX_TAPS = 21 * 21


def _trim(kern: np.ndarray, dtype) -> np.ndarray:
    """Drop the border rows/columns that are zero in `dtype`, in equal numbers from both sides
    (stays odd and centred): zero taps add nothing, so the result is bit-identical and a narrow
    Gaussian gets cheap."""
    zero = kern.astype(dtype) == 0

    def margin(nonzero):  # zero lines at each end of an axis, the smaller of the two
        idx = np.flatnonzero(nonzero)
        return 0 if idx.size == 0 else min(idx[0], nonzero.size - 1 - idx[-1])
    r, c = margin(~zero.all(axis=1)), margin(~zero.all(axis=0))
    return kern[r:kern.shape[0] - r, c:kern.shape[1] - c]


def _rank1(kern: np.ndarray):
    """(column, row) factors with kern = outer(column, row) to 1e-13 of its largest tap, or None.
    The factors are the kernel's column and row through its largest tap (no LAPACK call: an SVD
    of a tiny matrix costs milliseconds when BLAS threads compete for the cores)."""
    if min(kern.shape) == 1:
        return None
    i, j = np.unravel_index(np.argmax(np.abs(kern)), kern.shape)
    column, row = kern[:, j], kern[i, :] / kern[i, j]
    if np.max(np.abs(kern - np.outer(column, row))) > 1e-13 * abs(kern[i, j]):
        return None
    return column, row


def _correlate_direct(planes, kern):
    h, w = planes.shape[1:]
    kh, kw = kern.shape
    padded = np.pad(planes, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)), mode="reflect")
    if kw > 1 and kw % 4:  # zero taps up to a multiple of 4 (and zero columns to read): exact
        extra = -kw % 4
        kern = np.pad(kern, ((0, 0), (0, extra)))
        padded = np.pad(padded, ((0, 0), (0, 0), (0, extra)))
    out = np.zeros_like(planes)
    launch(_correlate, planes.shape[0] * h * w * kh * kw < 1 << 20, padded,
           np.ascontiguousarray(kern, dtype=planes.dtype), out)
    return out


def filter2d(img: np.ndarray, kernel: np.ndarray, method: str = "auto") -> np.ndarray:
    """BasicSR's filter2D: every (H, W) plane of `img` (..., H, W) cross-correlated with `kernel`
    (kh, kw), both odd, after reflect padding by (kh // 2, kw // 2) (torch's 'reflect'; where torch
    refuses a pad >= the size, numpy's reflect keeps reflecting). Same shape and dtype as `img`;
    the kernel is taken in img's dtype, as BasicSR's float32 kernels.

    method: "direct" (a numba loop over the taps), "fft" (rfft2), or "auto": taps that are zero in
    img's dtype are trimmed off the border (exact), a rank-1 kernel (a Gaussian's outer product)
    runs as a row then a column pass (reflect padding is per axis, so this is the same sum in
    another order), a large one through the FFT. All agree to float rounding (~1e-7 relative in
    float32, ~1e-15 in float64)."""
    img = _image("filter2d", img)
    kern = np.asarray(kernel)
    if kern.ndim != 2 or kern.shape[0] % 2 == 0 or kern.shape[1] % 2 == 0:
        raise ValueError(f"filter2d: kernel must be 2-D with odd sizes, got shape {kern.shape}")
    if not np.all(np.isfinite(kern)):
        raise ValueError("filter2d: kernel must be finite")
    method = choice("filter2d", "method", method, ("auto", "direct", "fft"))
    h, w = img.shape[-2:]
    planes = img.reshape(-1, h, w)
    if method == "direct":
        return _correlate_direct(planes, kern).reshape(img.shape)
    if method == "fft":
        kh, kw = kern.shape
        padded = np.pad(planes, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)), mode="reflect")
        return _fft_correlate(padded, kern.astype(img.dtype), h, w).astype(img.dtype).reshape(
            img.shape)
    kern = _trim(kern.astype(np.float64), img.dtype)
    factors = _rank1(kern)  # on the float64 kernel: a float32 cast is rank 1 only to ~1e-8
    if factors is not None:
        out = _correlate_direct(planes, factors[1][None, :].astype(img.dtype))
        return _correlate_direct(out, factors[0][:, None].astype(img.dtype)).reshape(img.shape)
    return filter2d(img, kern, "fft" if kern.size > _DIRECT_MAX_TAPS else "direct")


# OpenCV's fixed tables for ksize <= 7 with sigma <= 0 (getGaussianKernel's small-kernel branch).
_SMALL_GAUSSIAN = {1: [1.0], 3: [0.25, 0.5, 0.25], 5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
                   7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125]}


def gaussian_kernel1d(ksize: int, sigma: float = 0.0) -> np.ndarray:
    """cv2.getGaussianKernel(ksize, sigma): exp(-(i - (ksize - 1) / 2)^2 / (2 sigma^2)) normalised,
    (ksize,) float64; sigma <= 0 means 0.3 ((ksize - 1) / 2 - 1) + 0.8 (and OpenCV's fixed tables
    for ksize <= 7)."""
    k = _odd_size("gaussian_kernel1d", "ksize", ksize)
    sigma = number("gaussian_kernel1d", "sigma", sigma)
    if sigma <= 0 and k in _SMALL_GAUSSIAN:
        return np.array(_SMALL_GAUSSIAN[k])
    if sigma <= 0:
        sigma = 0.3 * ((k - 1) * 0.5 - 1) + 0.8
    g = np.exp(-((np.arange(k) - (k - 1) / 2) ** 2) / (2 * sigma * sigma))
    return g / g.sum()


def usm_sharp(img: np.ndarray, weight: float = 0.5, radius: int = 50, threshold: float = 10,
              sigma: float = 0.0) -> np.ndarray:
    """BasicSR's USMSharp (unsharp masking) of (..., H, W) in [0, 1], dtype kept:
    blur = img * G (G = outer(g, g), g = gaussian_kernel1d(radius | 1, sigma), reflect borders),
    mask = G * [255 |img - blur| > threshold], out = mask clip(img + weight (img - blur), 0, 1)
    + (1 - mask) img. radius 50 becomes 51, as in BasicSR (an even size gets + 1)."""
    img = _image("usm_sharp", img)
    radius = int_arg("usm_sharp", "radius", radius)
    number("usm_sharp", "weight", weight)
    number("usm_sharp", "threshold", threshold)
    g = gaussian_kernel1d(radius + 1 - radius % 2, sigma)
    kern = np.outer(g, g)  # rank 1: filter2d runs it as two 1-D passes
    residual = img - filter2d(img, kern)
    mask = (np.abs(residual) * 255 > threshold).astype(img.dtype)
    soft = filter2d(mask, kern)
    sharp = np.clip(img + img.dtype.type(weight) * residual, 0, 1)
    return soft * sharp + (1 - soft) * img


# -- noise (the *_pt versions' semantics, per image) -----------------------------------------------
def _clip_round(out, clip, rounds):
    if rounds:
        out = np.round(out * 255) / out.dtype.type(255)
    return np.clip(out, 0, 1) if clip else out


def _chw(owner: str, img) -> np.ndarray:
    arr = _image(owner, img)
    if arr.ndim != 3:
        raise ValueError(f"{owner}: img must be (C, H, W), got shape {arr.shape}")
    return arr


def generate_gaussian_noise(img, sigma=10, gray_noise=False, *, rng) -> np.ndarray:
    """N(0, 1) * sigma / 255 per element, in img's dtype and shape (C, H, W); gray_noise: one (H, W)
    field shared by every channel. sigma is on the 0..255 scale."""
    img = _chw("generate_gaussian_noise", img)
    sigma = number("generate_gaussian_noise", "sigma", sigma, 0.0)
    shape = img.shape[1:] if gray_noise else img.shape
    cast = img.dtype.type
    noise = rng.standard_normal(shape, dtype=img.dtype) * cast(sigma) / cast(255)
    return np.broadcast_to(noise, img.shape) if gray_noise else noise


def random_add_gaussian_noise(img, sigma_range=(0, 1.0), gray_prob=0, clip=True, rounds=False, *,
                              rng) -> np.ndarray:
    """img + generate_gaussian_noise(sigma ~ U(sigma_range), gray with probability gray_prob), then
    clip to [0, 1] (and round to 8-bit levels with rounds). Draws: sigma, the gray coin, noise."""
    owner = "random_add_gaussian_noise"
    sigma = rng.uniform(*value_range(owner, "sigma_range", sigma_range, 0.0))
    gray = rng.uniform() < number(owner, "gray_prob", gray_prob, 0.0, 1.0)
    return _clip_round(img + generate_gaussian_noise(img, sigma, gray, rng=rng), clip, rounds)


# torchvision's rgb_to_grayscale, which BasicSR's generate_poisson_noise_pt uses
_GRAY = (0.2989, 0.587, 0.114)


@jit
def _levels_used(q):
    """How many of the 256 8-bit levels occur in q (uint8): BasicSR's len(unique(rounded img))."""
    seen = np.zeros(256, np.bool_)
    for v in q:
        seen[v] = True
    return seen.sum()


_POISSON_CDF: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def poisson_cdf_table(vals: int) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, guide) for the means L / 255 * vals, L = 0..255. cdf (256, n) float64: row L is the
    Poisson CDF at 0..n-1, n past the mean by > 12 standard deviations (the tail left out is below
    1e-30); guide (256, n) int32: guide[L, b] = the first k with cdf[L, k] > b / n, where a search
    for u in [b / n, (b + 1) / n) can start. Cached per vals (a power of 2)."""
    if vals not in _POISSON_CDF:
        lam = np.arange(256) / 255.0 * vals
        n = int(vals + 12 * math.sqrt(vals) + 30)
        # pmf(k) = e^-lam lam^k / k!, built as a running product (lam <= 256: no under/overflow)
        steps = lam[:, None] / np.arange(1, n)[None, :]
        pmf = np.exp(-lam)[:, None] * np.concatenate([np.ones((256, 1)), np.cumprod(steps, 1)], 1)
        cdf = np.cumsum(pmf, axis=1)
        starts = np.arange(n) / n
        guide = np.array([np.minimum(np.searchsorted(row, starts, side="right"), n - 1)
                          for row in cdf], np.int32)
        cdf.flags.writeable = guide.flags.writeable = False
        _POISSON_CDF[vals] = cdf, guide
    return _POISSON_CDF[vals]


@jit
def _poisson_by_cdf(levels, u, cdf, guide, out):
    """out[i] = the first k with cdf[levels[i], k] > u[i] (inverse-CDF sampling; the guide table
    leaves ~1 step of linear search)."""
    last = cdf.shape[1] - 1
    for i in range(levels.size):
        row = levels[i]
        k = guide[row, int(u[i] * cdf.shape[1])]
        while k < last and cdf[row, k] <= u[i]:
            k += 1
        out[i] = k


def generate_poisson_noise(img, scale=1.0, gray_noise=False, *, rng) -> np.ndarray:
    """Poisson (shot) noise: round img to 8-bit levels (r), count the levels used, vals = 2^ceil(
    log2(count)), noise = scale (Poisson(r vals) / vals - r), in img's dtype. gray_noise: computed
    once on the gray image (0.2989 R + 0.587 G + 0.114 B) and shared by every channel.

    The means take at most 256 values, so each pixel is drawn by inverse CDF from a tabulated
    Poisson CDF (`poisson_cdf_table`) with one `rng.random()` uniform, in C order: exact in
    distribution and ~5x faster than rng.poisson."""
    img = _chw("generate_poisson_noise", img)
    scale = number("generate_poisson_noise", "scale", scale, 0.0)
    src = img
    if gray_noise and img.shape[0] == 3:
        src = sum(img.dtype.type(w) * img[c] for c, w in enumerate(_GRAY))[None]
    levels = np.clip(np.round(src * 255), 0, 255).astype(np.uint8)
    vals = int(2 ** math.ceil(math.log2(_levels_used(levels.ravel()))))
    counts = np.empty(levels.shape, np.float64)
    _poisson_by_cdf(levels.ravel(), rng.random(levels.size), *poisson_cdf_table(vals),
                    counts.reshape(-1))
    noise = (counts / vals - levels / 255.0).astype(img.dtype)
    return np.broadcast_to(noise * img.dtype.type(scale), img.shape)


def random_add_poisson_noise(img, scale_range=(0, 1.0), gray_prob=0, clip=True, rounds=False, *,
                             rng) -> np.ndarray:
    """img + generate_poisson_noise(scale ~ U(scale_range), gray with probability gray_prob), then
    clip (and round). Draws: scale, the gray coin, the noise."""
    owner = "random_add_poisson_noise"
    scale = rng.uniform(*value_range(owner, "scale_range", scale_range, 0.0))
    gray = rng.uniform() < number(owner, "gray_prob", gray_prob, 0.0, 1.0)
    return _clip_round(img + generate_poisson_noise(img, scale, gray, rng=rng), clip, rounds)


# -- JPEG ------------------------------------------------------------------------------------------
def add_jpg_compression(img, quality=90) -> np.ndarray:
    """JPEG-encode and decode (C, H, W) in [0, 1] (C = 1 or 3) with Pillow at integer `quality`
    (1..100; 4:2:0 chroma for colour, like DiffJPEG). The image is clipped and rounded to 8 bits
    first (the file format's levels); the result is in img's dtype."""
    img = _chw("add_jpg_compression", img)
    quality = int_arg("add_jpg_compression", "quality", quality)
    if quality > 100:
        raise ValueError(f"add_jpg_compression: quality must be in 1..100, got {quality}")
    if img.shape[0] not in (1, 3):
        raise ValueError(f"add_jpg_compression: img must have 1 or 3 channels, got {img.shape[0]}")
    q8 = np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)
    buf = io.BytesIO()
    if img.shape[0] == 3:
        Image.fromarray(np.ascontiguousarray(q8.transpose(1, 2, 0)), "RGB").save(
            buf, format="JPEG", quality=quality, subsampling=2)
    else:
        Image.fromarray(q8[0], "L").save(buf, format="JPEG", quality=quality)
    with Image.open(buf) as im:
        out = np.asarray(im)
    out = out.transpose(2, 0, 1) if out.ndim == 3 else out[None]
    return out.astype(img.dtype) / img.dtype.type(255)


def random_add_jpg_compression(img, quality_range=(90, 100), *, rng) -> np.ndarray:
    """add_jpg_compression at quality round(U(quality_range)) (DiffJPEG's quality is continuous,
    Pillow's an integer: the nearest one)."""
    lo, hi = value_range("random_add_jpg_compression", "quality_range", quality_range, 1, 100)
    return add_jpg_compression(img, int(round(rng.uniform(lo, hi))))
