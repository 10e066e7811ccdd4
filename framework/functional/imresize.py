"""MATLAB's imresize, differentiable: the degradation SR papers use to make low-resolution images.

Only MATLAB's table rule (`contributions`) lives here; the filters, the table builder, the kernels
and the Function are resample.py's. A numeric kernel (an image's own blur kernel, e.g. KernelGAN's
estimate) is ZSSR's imresize rule instead: the kernel is centred on each s x s block
(`kernel_shift`), the image correlated with it (mirrored borders) and every s-th pixel kept, a
strided convolution of the existing ops (so it is differentiable as they are).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._check import flag
from .conv import conv2d
from .resample import (FILTERS, ResampleFunction, Table, _cubic, image_input, output_geometry,
                       weight_table)
from .shape import getitem, reshape

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
    a=-0.5; alias "bicubic"), "triangle" ("bilinear"), "box", "lanczos2", "lanczos3"; or a numeric
    blur kernel (kh, kw) for a downscale by an integer factor s (scale_factor=1/s): see
    `kernel_downscale`. antialias (default True): when shrinking, the kernel is widened by 1/scale
    (a low-pass). Borders are mirrored (MATLAB's symmetric padding). Differentiable; float32 stays
    float32."""
    x = image_input(x, "imresize", ndims=(3, 4))
    if not isinstance(kernel, str):
        if size is not None:
            raise ValueError("imresize: a numeric kernel takes scale_factor=1/s (an integer s), "
                             "not size")
        return kernel_downscale(x, kernel, _integer_factor(scale_factor))
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


# -- a numeric kernel (ZSSR's imresize with a given kernel) ----------------------------------------
def _integer_factor(scale_factor) -> int:
    """s from scale_factor = 1/s (a float or an equal pair), s a positive integer."""
    sf = scale_factor if isinstance(scale_factor, (int, float)) else None
    if isinstance(scale_factor, (tuple, list)) and len(scale_factor) == 2 \
            and scale_factor[0] == scale_factor[1]:
        sf = scale_factor[0]
    s = round(1.0 / sf) if isinstance(sf, (int, float)) and 0 < sf <= 1 else 0
    if s < 1 or abs(sf * s - 1.0) > 1e-9:
        raise ValueError(f"imresize: a numeric kernel downscales by an integer factor s "
                         f"(scale_factor=1/s, e.g. 0.5), got scale_factor={scale_factor!r}")
    return s


def check_kernel(kernel, owner: str = "imresize", name: str = "kernel") -> np.ndarray:
    """`kernel` as a float64 (kh, kw) array, finite, with a positive sum, else a ValueError."""
    k = np.asarray(kernel.data if hasattr(kernel, "data") and not isinstance(kernel, np.ndarray)
                   else kernel)
    if k.ndim != 2 or min(k.shape) < 1 or not np.issubdtype(k.dtype, np.number):
        raise ValueError(f"{owner}: {name} must be a 2-D numeric array (kh, kw), got "
                         f"{k.dtype} {k.shape}")
    k = k.astype(np.float64)
    if not np.all(np.isfinite(k)):
        raise ValueError(f"{owner}: {name} must be finite")
    if not k.sum() > 0:
        raise ValueError(f"{owner}: {name} must have a positive sum, got {k.sum():.4g}")
    return k


def _shift_axis(k: np.ndarray, t: float, axis: int) -> np.ndarray:
    """k moved by t (fractional) pixels along `axis`: out[i] = sum_j k[j] w(i - t - j), w the
    Keys cubic (a=-0.5), which keeps the sum and moves the centre of mass by exactly t (it
    reproduces linear functions). The caller leaves room for the shift and the 4 taps."""
    n = k.shape[axis]
    w = _cubic(-0.5)(np.arange(n)[:, None] - t - np.arange(n)[None, :])  # (out i, in j)
    return np.moveaxis(np.tensordot(w, np.moveaxis(k, axis, 0), axes=1), 0, axis)


def kernel_shift(kernel, s: int) -> np.ndarray:
    """ZSSR's kernel_shift: `kernel` (kh, kw) zero-padded to an odd square and moved so that its
    centre of mass is (s - 1) / 2 pixels past its centre tap on both axes: correlated at every
    s-th pixel, each output pixel is then centred on its s x s block, as MATLAB's imresize places
    it (the image's degradation cannot tell a shift, so none is assumed). The move is the Keys
    cubic interpolation of the kernel (`_shift_axis`; ZSSR's code uses a cubic spline): the sum
    is kept exactly, and a whole-pixel move is exact. float64."""
    k = check_kernel(kernel, "kernel_shift")
    com = [float((k.sum(axis=1 - a) * np.arange(k.shape[a])).sum() / k.sum()) for a in (0, 1)]
    want = [(n - 1) / 2 + (s - 1) / 2 for n in k.shape]  # in k's own coordinates
    pad = int(math.ceil(max(abs(w - c) for w, c in zip(want, com)))) + 3
    size = max(k.shape) + 2 * pad
    size += 1 - size % 2
    out = np.zeros((size, size))
    top, left = (size - k.shape[0]) // 2, (size - k.shape[1]) // 2
    out[top:top + k.shape[0], left:left + k.shape[1]] = k
    centre = size // 2 + (s - 1) / 2
    out = _shift_axis(out, centre - (com[0] + top), 0)
    return _shift_axis(out, centre - (com[1] + left), 1)


def _mirror(n: int, lo: int, m: int) -> np.ndarray:
    """Indices lo, lo + 1, ..., lo + m - 1 folded into 0..n-1 by MATLAB's symmetric padding (the
    edge pixel repeated: -1 -> 0, n -> n - 1)."""
    period = np.concatenate([np.arange(n), np.arange(n - 1, -1, -1)])
    return period[np.arange(lo, lo + m) % (2 * n)]


def kernel_downscale(x, kernel, s: int):
    """Downscale (N, C, H, W) or (C, H, W) by the integer factor `s` with blur kernel `kernel`
    (kh, kw; ZSSR's imresize with a numeric kernel): the kernel is centred (`kernel_shift`), every
    plane correlated with it over MATLAB's mirrored borders, and every s-th pixel kept, so output
    pixel (i, j) is centred on the input block (s i .. s i + s - 1, s j .. s j + s - 1). Output
    ceil(H / s) x ceil(W / s), as imresize. Differentiable in x (pad by indexing, then a strided
    conv2d); the kernel is a constant."""
    x = image_input(x, "imresize", ndims=(3, 4))
    k = kernel_shift(kernel, s)
    size = k.shape[0]
    c = size // 2
    h, w = x.shape[-2:]
    ho, wo = -(-h // s), -(-w // s)
    rows = _mirror(h, -c, (ho - 1) * s + size)
    cols = _mirror(w, -c, (wo - 1) * s + size)
    lead = x.shape[:-2]
    padded = getitem(x, (Ellipsis, rows[:, None], cols[None, :]))
    planes = reshape(padded, -1, 1, len(rows), len(cols))
    weight = k.astype(x.dtype)[None, None]
    y = conv2d(planes, weight, stride=s)
    return reshape(y, *lead, ho, wo)
