"""The sinc (circular low-pass) kernel Real-ESRGAN uses for ringing and overshoot, and the Bessel
function J1 it needs (scipy.special.j1, written here so srgrad needs no scipy)."""
from __future__ import annotations

import math

import numpy as np

from ..._check import int_arg, number
from ..._jit import kernel as jit
from ._common import _odd_size

__all__ = ["bessel_j1", "circular_lowpass_kernel"]


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
