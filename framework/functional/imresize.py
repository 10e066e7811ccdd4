"""MATLAB's imresize, differentiable: the degradation SR papers use to make low-resolution images.

Only MATLAB's table rule (`contributions`) lives here; the filters, the table builder, the kernels
and the Function are resample.py's.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._check import flag
from .resample import FILTERS, ResampleFunction, Table, image_input, output_geometry, weight_table

# MATLAB's kernel names -> resample.py's FILTERS (every resampling filter lives in that one table);
# MATLAB's kernel width is twice the filter's support.
MATLAB_KERNELS = {
    "cubic": FILTERS["cubic"],
    "box": FILTERS["box"],
    "triangle": FILTERS["triangle"],
    "lanczos2": FILTERS["matlab_lanczos2"],
    "lanczos3": FILTERS["matlab_lanczos3"],
}
_MATLAB_ALIASES = {"bicubic": "cubic", "bilinear": "triangle"}


@functools.lru_cache(maxsize=256)
def matlab_table(n, m, scale, kernel_name, antialias) -> Table:
    """MATLAB imresize's `contributions`: u = (o + 0.5) / scale - 0.5; when shrinking with antialias
    the kernel is stretched by 1/scale; ceil(width) + 2 taps from floor(u - width / 2); weights
    normalised; taps outside the image folded back symmetrically (edge pixel repeated)."""
    filt = MATLAB_KERNELS[kernel_name]
    width = 2.0 * filt.support
    if scale < 1.0 and antialias:
        h, width = (lambda d: scale * filt.fn(scale * d)), width / scale
    else:
        h = filt.fn
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
    x = image_input(x, "imresize", ndims=(3, 4))
    name = _MATLAB_ALIASES.get(kernel, kernel)
    if name not in MATLAB_KERNELS:
        known = ", ".join(list(MATLAB_KERNELS) + list(_MATLAB_ALIASES))
        raise ValueError(f"imresize: unknown kernel {kernel!r}; known kernels: {known}")
    flag("imresize", "antialias", antialias)
    in_hw = x.shape[-2:]
    out_hw, sfs = output_geometry(in_hw, size, scale_factor, "imresize", lambda n, s: math.ceil(n * s))
    scales = tuple(s if s is not None else m / n for n, m, s in zip(in_hw, out_hw, sfs))
    tables = tuple(matlab_table(n, m, s, name, antialias) for n, m, s in zip(in_hw, out_hw, scales))
    call = ("imresize", dict(kernel=name, antialias=antialias, scales=scales))
    return ResampleFunction.apply(x, tables=tables, call=call)
