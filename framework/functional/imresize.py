"""MATLAB's imresize, differentiable: the degradation SR papers use to make low-resolution images.

Only the weight-table rules live here (MATLAB's `contributions`); the table builder, the kernels and
the Function are resample.py's.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .resample import Resample, Table, _as_image, _cubic, _geometry, _triangle, weight_table

# -- MATLAB's imresize as data ---------------------------------------------------------------------
_EPS = np.finfo(np.float64).eps


def _matlab_lanczos(a):
    def f(d):  # MATLAB's own formula, eps terms included (they make f(0) = 1 without a branch)
        return ((np.sin(np.pi * d) * np.sin(np.pi * d / a) + _EPS)
                / (np.pi ** 2 * d * d / a + _EPS) * (np.abs(d) < a))
    return f


def _box(d):
    # MATLAB's box is 1 on -0.5 <= x < 0.5 with x = u - j, i.e. -d
    return ((d > -0.5) & (d <= 0.5)).astype(np.float64)


# kernel name -> (filter, width in input pixels), as in MATLAB's imresize.m
MATLAB_KERNELS = {
    "cubic": (_cubic(-0.5), 4.0),
    "box": (_box, 1.0),
    "triangle": (_triangle, 2.0),
    "lanczos2": (_matlab_lanczos(2.0), 4.0),
    "lanczos3": (_matlab_lanczos(3.0), 6.0),
}
_MATLAB_ALIASES = {"bicubic": "cubic", "bilinear": "triangle"}


@functools.lru_cache(maxsize=256)
def matlab_table(n, m, scale, kernel_name, antialias) -> Table:
    """MATLAB imresize's `contributions`: u = (o + 0.5) / scale - 0.5; when shrinking with antialias
    the kernel is stretched by 1/scale; ceil(width) + 2 taps from floor(u - width / 2); weights
    normalised; taps outside the image folded back symmetrically (edge pixel repeated)."""
    filt, width = MATLAB_KERNELS[kernel_name]
    if scale < 1.0 and antialias:
        h, width = (lambda d: scale * filt(scale * d)), width / scale
    else:
        h = filt
    u = (np.arange(m) + 0.5) / scale - 0.5
    lo = np.floor(u - width / 2.0).astype(np.int64)
    taps = math.ceil(width) + 2
    return weight_table(n, u, lo, lo + taps, taps, h, "mirror", True)


def imresize(x, scale_factor=None, size=None, kernel="cubic", antialias=True):
    """MATLAB's imresize on (N, C, H, W) or (C, H, W): the standard way SR papers make LR images.

    scale_factor: float or (sh, sw), output = ceil(in * scale) and the factor drives the mapping;
    or size: int or (H_out, W_out) (scale = out / in per axis). kernel: "cubic" (default, Keys
    a=-0.5; alias "bicubic"), "triangle" ("bilinear"), "box", "lanczos2", "lanczos3". antialias
    (default True): when shrinking, the kernel is widened by 1/scale (a low-pass). Borders are
    mirrored (MATLAB's symmetric padding). Differentiable; float32 stays float32."""
    x = _as_image(x, "imresize", ndims=(3, 4))
    name = _MATLAB_ALIASES.get(kernel, kernel)
    if name not in MATLAB_KERNELS:
        known = ", ".join(list(MATLAB_KERNELS) + list(_MATLAB_ALIASES))
        raise ValueError(f"imresize: unknown kernel {kernel!r}; known kernels: {known}")
    if not isinstance(antialias, bool):
        raise TypeError(f"imresize: antialias must be a bool, got {antialias!r}")
    in_hw = x.shape[-2:]
    out_hw, sfs = _geometry(in_hw, size, scale_factor, "imresize", lambda n, s: math.ceil(n * s))
    scales = tuple(s if s is not None else m / n for n, m, s in zip(in_hw, out_hw, sfs))
    tables = tuple(matlab_table(n, m, s, name, antialias) for n, m, s in zip(in_hw, out_hw, scales))
    return Resample.apply(x, tables=tables)
