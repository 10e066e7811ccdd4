"""BT.601 colour conversions on float images in [0, 1], the SR literature's (and MATLAB's, and
BasicSR's) convention: Y = 16 + 65.481 R + 128.553 G + 24.966 B in [16, 235] of 255.

Arrays are (..., 3, H, W) (channel axis -3, so (C, H, W) and (N, C, H, W) both work); dtype is
preserved (float32 stays float32). Results stay in [0, 1] units, i.e. divided by 255.
"""
from __future__ import annotations

import numpy as np

__all__ = ["rgb_to_y", "rgb_to_ycbcr", "ycbcr_to_rgb"]

# Rows: Y, Cb, Cr; columns: R, G, B (ITU-R BT.601 for 8-bit studio range, on [0, 1] input).
_RGB_TO_YCBCR = np.array([[65.481, 128.553, 24.966],
                          [-37.797, -74.203, 112.0],
                          [112.0, -93.786, -18.214]]) / 255.0
_OFFSET = np.array([16.0, 128.0, 128.0]) / 255.0
# The exact inverse (BasicSR rounds it to 8 digits), so rgb -> ycbcr -> rgb is the identity.
_YCBCR_TO_RGB = np.linalg.inv(_RGB_TO_YCBCR)


def _check_rgb(img, name: str) -> np.ndarray:
    arr = np.asarray(img)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name}: expected a float image in [0, 1], got dtype {arr.dtype}")
    if arr.ndim < 3 or arr.shape[-3] != 3:
        raise ValueError(f"{name}: expected 3 channels on axis -3, (3, H, W) or (N, 3, H, W), "
                         f"got shape {arr.shape}")
    return arr


def _mix(arr: np.ndarray, matrix: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """out[..., i, :, :] = sum_j matrix[i, j] * arr[..., j, :, :] + offset[i], in arr's dtype."""
    m = matrix.astype(arr.dtype)
    o = offset.astype(arr.dtype)
    out = np.einsum("ij,...jhw->...ihw", m, arr)
    return out + o[:, None, None]


def rgb_to_y(img) -> np.ndarray:
    """BT.601 luma: (..., 3, H, W) RGB in [0, 1] -> (..., 1, H, W) Y in [16/255, 235/255]."""
    arr = _check_rgb(img, "rgb_to_y")
    return _mix(arr, _RGB_TO_YCBCR[:1], _OFFSET[:1])


def rgb_to_ycbcr(img) -> np.ndarray:
    """(..., 3, H, W) RGB in [0, 1] -> (..., 3, H, W) YCbCr (BT.601, divided by 255)."""
    arr = _check_rgb(img, "rgb_to_ycbcr")
    return _mix(arr, _RGB_TO_YCBCR, _OFFSET)


def ycbcr_to_rgb(img) -> np.ndarray:
    """Inverse of `rgb_to_ycbcr` (not clipped: out-of-gamut YCbCr gives RGB outside [0, 1])."""
    arr = _check_rgb(img, "ycbcr_to_rgb")
    return _mix(arr, _YCBCR_TO_RGB, -_YCBCR_TO_RGB @ _OFFSET)
