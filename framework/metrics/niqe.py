"""NIQE, the "completely blind" (no-reference) quality of Mittal, Soundararajan and Bovik (2013), with
BasicSR's conventions (`basicsr/metrics/niqe.py`, `calculate_niqe`): lower is better.

The image (8-bit quantised as every srgrad metric, border cropped) goes to BT.601 Y on [0, 255] in
float32 and is rounded, as BasicSR does before NIQE. It is cut into 96 x 96 blocks (the remainder
dropped); each block's mean-subtracted contrast-normalised (MSCN) coefficients give 18 features (an
asymmetric generalised Gaussian fitted to the coefficients and to the products of each pair of
neighbours in 4 directions), at full size and after MATLAB's bicubic halving: 36 per block. NIQE is
the Mahalanobis-like distance between the multivariate Gaussian of the image's blocks and that of
pristine natural images:

    sqrt((mu_p - mu) pinv((cov_p + cov) / 2) (mu_p - mu)^T)

`niqe_pris_params.npz` beside this file holds the pristine model (mu_pris_param (1, 36),
cov_pris_param (36, 36)) and the 7x7 Gaussian window of the local statistics (sigma 7/6): the
parameters of the official MATLAB release (LIVE, `modelparameters.mat`, niqe_release.zip) as BasicSR
1.4.2 ships them (`basicsr/metrics/niqe_pris_params.npz`, Apache-2.0; sha256 below, checked at load).
An image smaller than one block (96 x 96 after the crop) has no NIQE: an error says so.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os

import numpy as np

from .._check import int_arg
from ..autograd import no_grad
from ..functional.imresize import imresize
from ..registry import METRICS
from ._common import _as_image, quantise_8bit

__all__ = ["niqe", "niqe_of_y"]

PARAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "niqe_pris_params.npz")
PARAMS_SHA256 = "2a7c182a68c9e7f1b2e2e5ec723279d6f65d912b6fcaf37eb2bf03d7367c4296"
BLOCK = 96
# The AGGD shape alpha is found by table look-up over 0.2, 0.201, ..., 10 (BasicSR's and MATLAB's grid).
_ALPHAS = np.arange(0.2, 10.001, 0.001)


@functools.lru_cache(maxsize=1)
def _pristine():
    with open(PARAMS, "rb") as f:
        raw = f.read()
    if hashlib.sha256(raw).hexdigest() != PARAMS_SHA256:
        raise OSError(f"niqe: {PARAMS} is not the file srgrad ships (sha256 differs); reinstall srgrad")
    with np.load(PARAMS, allow_pickle=False) as p:
        return p["mu_pris_param"], p["cov_pris_param"], p["gaussian_window"]


@functools.lru_cache(maxsize=1)
def _ratio_table():
    """r(alpha) = Gamma(2/alpha)^2 / (Gamma(1/alpha) Gamma(3/alpha)) on the alpha grid."""
    g = np.vectorize(math.gamma, otypes=[np.float64])
    inv = 1.0 / _ALPHAS
    return np.square(g(2 * inv)) / (g(inv) * g(3 * inv))


def _aggd(x: np.ndarray):
    """(alpha, beta_left, beta_right) of an asymmetric generalised Gaussian fitted to x by moments
    (the paper's eq. 7), alpha from the look-up grid."""
    x = x.ravel()
    left = np.sqrt(np.mean(x[x < 0] ** 2))
    right = np.sqrt(np.mean(x[x > 0] ** 2))
    gammahat = left / right
    rhat = np.mean(np.abs(x)) ** 2 / np.mean(x ** 2)
    rhatnorm = rhat * (gammahat ** 3 + 1) * (gammahat + 1) / (gammahat ** 2 + 1) ** 2
    alpha = _ALPHAS[np.argmin((_ratio_table() - rhatnorm) ** 2)]
    spread = math.sqrt(math.gamma(1 / alpha) / math.gamma(3 / alpha))
    return alpha, left * spread, right * spread


def _block_features(block: np.ndarray) -> list:
    """The 18 features of one block of MSCN coefficients: (alpha, mean beta) of the block, then
    (alpha, mean, beta_l, beta_r) of its products with each neighbour (right, down, two diagonals;
    the block wraps around, as np.roll)."""
    alpha, bl, br = _aggd(block)
    feats = [alpha, (bl + br) / 2]
    for shift in ((0, 1), (1, 0), (1, 1), (1, -1)):
        alpha, bl, br = _aggd(block * np.roll(block, shift, axis=(0, 1)))
        feats += [alpha, (br - bl) * math.gamma(2 / alpha) / math.gamma(1 / alpha), bl, br]
    return feats


def _local(img: np.ndarray, window: np.ndarray) -> np.ndarray:
    """The window-weighted local sum of a float32 image, borders replicated (scipy.ndimage's
    convolve, mode 'nearest', which BasicSR uses: computed in float64, returned in the input's
    float32). The window is symmetric, so correlation and convolution agree."""
    k = window.shape[0] // 2
    pad = np.pad(img.astype(np.float64), k, mode="edge")
    h, w = img.shape
    out = np.zeros((h, w))
    for i in range(window.shape[0]):
        for j in range(window.shape[1]):
            out += window[i, j] * pad[i:i + h, j:j + w]
    return out.astype(img.dtype)


def niqe_of_y(y: np.ndarray) -> float:
    """NIQE of a Y image (H, W) on [0, 255], float32, at least 96 x 96 (the blocks' size)."""
    mu_p, cov_p, window = _pristine()
    h, w = y.shape
    nh, nw = h // BLOCK, w // BLOCK
    if nh == 0 or nw == 0:
        raise ValueError(f"niqe: the image must be at least {BLOCK}x{BLOCK} after the border crop, "
                         f"got {h}x{w}")
    img = y[:nh * BLOCK, :nw * BLOCK]
    per_scale = []
    for scale in (1, 2):
        mu = _local(img, window)
        sigma = np.sqrt(np.abs(_local(np.square(img), window) - np.square(mu)))
        mscn = (img - mu) / (sigma + 1)
        b = BLOCK // scale
        per_scale.append(np.array([_block_features(mscn[r * b:(r + 1) * b, c * b:(c + 1) * b])
                                   for c in range(nw) for r in range(nh)]))
        if scale == 1:  # MATLAB's bicubic halving with antialiasing, on [0, 1]
            with no_grad():
                half = imresize((img / np.float32(255))[None], scale_factor=0.5, antialias=True)
            img = half.data[0] * np.float32(255)
    feats = np.concatenate(per_scale, axis=1)
    mu_d = np.nanmean(feats, axis=0)
    cov_d = np.cov(feats[~np.isnan(feats).any(axis=1)], rowvar=False)
    diff = mu_p - mu_d
    return float(np.sqrt(np.squeeze(diff @ np.linalg.pinv((cov_p + cov_d) / 2) @ diff.T)))


def _to_y(img: np.ndarray) -> np.ndarray:
    """(C, H, W) on [0, 255] (8-bit values) -> BasicSR's rounded float32 Y (H, W): its to_y_channel
    (float32 / 255, BT.601 dot product in float64, back to float32) and round."""
    if img.shape[0] == 1:
        y = img[0].astype(np.float32)
    elif img.shape[0] == 3:
        rgb = (img.astype(np.float32) / np.float32(255)).transpose(1, 2, 0)
        y = ((np.dot(rgb, [65.481, 128.553, 24.966]) + 16.0) / 255.0).astype(np.float32) * np.float32(255)
    else:
        raise ValueError(f"niqe: needs 1 or 3 channels (Y or RGB), got {img.shape[0]}")
    return np.round(y)


@METRICS.register("niqe")
def niqe(sr, hr=None, crop_border: int = 0, y_channel: bool = True) -> float:
    """NIQE of the float image sr (C, H, W) or (H, W) in [0, 1]; lower is better. No reference:
    `hr` is ignored (the METRICS signature). 8-bit quantised as every srgrad metric, `crop_border`
    pixels removed from each side, measured on Y (1-channel images are taken as Y; `y_channel` is
    accepted for the common signature: NIQE is defined on luminance only)."""
    img = quantise_8bit(_as_image(sr, "niqe: sr"))
    crop_border = int_arg("niqe", "crop_border", crop_border, 0)
    if crop_border:
        img = img[:, crop_border:-crop_border, crop_border:-crop_border]
    return niqe_of_y(_to_y(img))


niqe.higher_is_better = False
niqe.no_reference = True
niqe.channels = "y"  # metrics.csv: niqe_y, whatever --rgb
