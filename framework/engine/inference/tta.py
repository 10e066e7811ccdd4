"""Test-time self-ensemble x8 (EDSR+/RCAN+; BasicSR's SRModel.test_selfensemble): run the network on
the 8 flips/transposes of an LR patch, undo each on its output, and average.

The 8 transforms are the dihedral group of the square, numbered as BasicSR builds them: bit 0 a
vertical flip (rows reversed), bit 1 a horizontal flip (columns reversed), bit 2 a transpose (H and
W swapped), applied in that order to the last two axes. A transposed patch has H and W swapped:
non-square patches work. The ensemble wraps the function that maps LR patches to their SR patches,
so tiled inference applies it per tile (each tile's ensemble is local: tiles still assemble
seamlessly).
"""
from __future__ import annotations

import numpy as np

__all__ = ["dihedral", "undo_dihedral", "self_ensemble"]

TRANSFORMS = 8


def dihedral(x: np.ndarray, k: int) -> np.ndarray:
    """Transform k (0..7) of a (..., H, W) array (a patch (C, H, W) or a batch (N, C, H, W)), a
    view: v-flip if k & 1, then h-flip if k & 2, then a transpose to (..., W, H) if k & 4."""
    if k & 1:
        x = x[..., ::-1, :]
    if k & 2:
        x = x[..., ::-1]
    if k & 4:
        x = x.swapaxes(-1, -2)
    return x


def undo_dihedral(y: np.ndarray, k: int) -> np.ndarray:
    """The inverse of `dihedral(., k)` on a (..., H', W') array: the same steps in reverse order
    (each step is its own inverse; the transpose does not commute with the flips)."""
    if k & 4:
        y = y.swapaxes(-1, -2)
    if k & 2:
        y = y[..., ::-1]
    if k & 1:
        y = y[..., ::-1, :]
    return y


def self_ensemble(fn):
    """patches (..., C, h, w) -> mean over the 8 transforms T of T^-1(fn(T(patches))), shape
    (..., C', h s, w s), in fn's float dtype (the average is taken before any clipping or
    quantising). `fn` must accept (..., C, w, h) patches as well: the transposed runs swap H and
    W."""

    def ensembled(patch):
        acc = np.array(fn(np.ascontiguousarray(patch)), copy=True)
        for k in range(1, TRANSFORMS):
            res = fn(np.ascontiguousarray(dihedral(patch, k)))
            expected = acc.shape[:-2] + (acc.shape[:-3:-1] if k & 4 else acc.shape[-2:])
            if res.shape != expected:
                raise ValueError(f"self-ensemble: the model maps transform {k} of the patch "
                                 f"{patch.shape} to {res.shape}, inconsistent with {acc.shape}")
            acc += undo_dihedral(res, k)
        acc /= TRANSFORMS  # a power of two: the mean is exact up to the sum's rounding
        return acc
    return ensembled
