"""Filtering: BasicSR's filter2D (every plane cross-correlated with a kernel, reflect borders) and
USMSharp (unsharp masking, basicsr/utils/img_process_util.py), with OpenCV's getGaussianKernel."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..._check import choice, int_arg, number
from ..._jit import kernel as jit
from ..._jit import launch, prange
from ._common import _image

__all__ = ["filter2d", "gaussian_kernel1d", "usm_sharp"]


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


# OpenCV's fixed tables, in 1/256ths, for sigma <= 0 and ksize 1..9 (getGaussianKernelBitExact's
# small-kernel branch: binomial-like rows, not samples of the Gaussian it would compute).
_FIXED_GAUSSIAN = {1: (256,), 3: (64, 128, 64), 5: (16, 64, 96, 64, 16),
                   7: (8, 28, 56, 72, 56, 28, 8), 9: (4, 13, 30, 51, 60, 51, 30, 13, 4)}


def gaussian_kernel1d(ksize: int, sigma: float = 0.0) -> np.ndarray:
    """cv2.getGaussianKernel(ksize, sigma) as OpenCV 4 computes it, (ksize,) float64.

    sigma <= 0 with ksize 1, 3, 5, 7 or 9: OpenCV's fixed tables (e.g. 9: [4, 13, 30, 51, 60, 51,
    30, 13, 4] / 256). Otherwise w_i = exp(-(i - (ksize - 1) / 2)^2 / (2 sigma^2)) times 1 / (the
    sum), sigma <= 0 meaning 0.15 ksize + 0.35 (= 0.3 ((ksize - 1) / 2 - 1) + 0.8), in OpenCV's
    order of operations. An even ksize follows OpenCV too: its two centre taps get weight 1 before
    normalising (as if at distance 0). Equal to OpenCV's float64 kernel to an ulp or two (its
    softfloat exp against numpy's)."""
    k = int_arg("gaussian_kernel1d", "ksize", ksize)
    sigma = number("gaussian_kernel1d", "sigma", sigma)
    if sigma <= 0 and k in _FIXED_GAUSSIAN:
        return np.array(_FIXED_GAUSSIAN[k], np.float64) / 256
    if sigma <= 0:  # OpenCV's fused multiply-add k * 0.15 + 0.35, rounded once
        sigma = float(Fraction(k) * Fraction(0.15) + Fraction(0.35))
    scale2x = -0.125 / (sigma * sigma)  # the offsets below are doubled: (2 d)^2 / 8 = d^2 / 2
    half = (k - 1) // 2
    doubled = np.arange(1 - k, 1 - k + 2 * half, 2, dtype=np.float64)
    values = np.exp(doubled * doubled * scale2x)
    total = 0.0
    for v in values:  # sequential, as OpenCV sums
        total += float(v)
    total = total * 2 + 1 + (k % 2 == 0)
    mul = 1 / total
    out = np.full(k, mul)
    out[:half] = values * mul
    out[k - half:] = out[:half][::-1]
    return out


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
