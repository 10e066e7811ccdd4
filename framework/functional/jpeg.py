"""diff_jpeg: BasicSR's DiffJPEG (basicsr/utils/diffjpeg.py), the JPEG that Real-ESRGAN's models
apply to their training batches, as one differentiable op on float images.

Forward, step by step as DiffJPEG (and with its float32 constants): zero-pad (N, 3, H, W) at the
bottom/right to multiples of 16; x 255; RGB -> YCbCr (JFIF's matrix, +128 on the chroma); Cb and
Cr averaged over 2x2 (4:2:0); each plane in 8x8 blocks, -128, DCT; divide by the quantisation
table (DiffJPEG's: the standard luminance table transposed, the chroma table padded with 99) times
the quality's factor (5000 / q below 50, 200 - 2 q from 50 on, / 100; never rounded, unlike
libjpeg's integer tables); round; multiply back; IDCT, +128; chroma repeated 2x2; YCbCr -> RGB;
clamp to [0, 255]; / 255; crop. The block transforms are one 64x64 matrix each way (K and its
transpose: DiffJPEG's DCT is orthonormal).

Rounding: `differentiable=True` is DiffJPEG's diff_round, round(q) + (q - round(q))^3, whose
derivative is 3 (q - round(q))^2; `differentiable=False` is plain rounding (gradient 0), what
Real-ESRGAN's models use. The backward is the forward's linear maps transposed around that
derivative: dL/dx = 255 A^T [round'(q) . B^T (clamp'(v) . g / 255)], A = pad, colour, pool, DCT;
B = IDCT, repeat, colour; clamp' is 1 inside (0, 255), 1/2 at exactly 0 or 255 (torch's
max/min split a tie), 0 outside.

Quality 100 gives factor 0, where DiffJPEG divides by zero (NaN); here it means no quantisation
(the limit as the factor goes to 0): the image only goes through the 4:2:0 chroma and the
transforms, with the identity as that step's derivative. One channel (a gray image) is coded as
DiffJPEG codes Y, which is what it does to that image repeated to RGB up to float rounding.
"""
from __future__ import annotations

import numpy as np

from .._check import float_array, flag, is_number
from .._jit import kernel, launch, prange
from ..autograd import Function

__all__ = ["diff_jpeg", "quality_to_factor"]

_Y_TABLE = np.array([[16, 11, 10, 16, 24, 40, 51, 61], [12, 12, 14, 19, 26, 58, 60, 55],
                     [14, 13, 16, 24, 40, 57, 69, 56], [14, 17, 22, 29, 51, 87, 80, 62],
                     [18, 22, 37, 56, 68, 109, 103, 77], [24, 35, 55, 64, 81, 104, 113, 92],
                     [49, 64, 78, 87, 103, 121, 120, 101], [72, 92, 95, 98, 112, 100, 103, 99]],
                    np.float64).T
_C_TABLE = np.full((8, 8), 99.0)
_C_TABLE[:4, :4] = np.array([[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99],
                             [47, 66, 99, 99]]).T
# (3, 64): the table of plane p (Y, Cb, Cr) at flat frequency 8 u + v
_TABLES = np.stack([_Y_TABLE.ravel(), _C_TABLE.ravel(), _C_TABLE.ravel()])

# Below this many pixels a kernel runs on one thread (_jit.launch)
_SERIAL_PIXELS = 1 << 16

# DiffJPEG's constants are float32 numbers: the same values here, in float64
_RGB_TO_YCC = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5],
                        [0.5, -0.418688, -0.081312]], np.float32).astype(np.float64)
_YCC_TO_RGB = np.array([[1.0, 0.0, 1.402], [1.0, -0.344136, -0.714136], [1.0, 1.772, 0.0]],
                       np.float32).astype(np.float64)


def _dct_matrix() -> np.ndarray:
    """K (64, 64), K[8 x + y, 8 u + v] = c_u c_v / 4 cos((2x+1) u pi / 16) cos((2y+1) v pi / 16)
    (c_0 = 1/sqrt 2, else 1): DCT = blocks @ K, IDCT = coefficients @ K^T. Each factor is
    DiffJPEG's float32 number; their product is exact in float64."""
    x = np.arange(8)
    cos = np.cos((2 * x[:, None] + 1) * x[None, :] * np.pi / 16)  # [spatial, frequency]
    prod = np.einsum("xu,yv->xyuv", cos, cos).astype(np.float32).astype(np.float64)
    alpha = np.array([1 / np.sqrt(2)] + [1.0] * 7)
    scale = (np.outer(alpha, alpha) * 0.25).astype(np.float32).astype(np.float64)
    return (prod * scale[None, None]).reshape(64, 64)


_K = _dct_matrix()
_YCC_SHIFT = np.array([0.0, 128.0, 128.0])
_CONSTANTS: dict = {}


def _constants(dtype):
    """(K, K^T, RGB->YCbCr, YCbCr->RGB, tables, chroma shift) in `dtype`, contiguous, made once
    per dtype."""
    if dtype not in _CONSTANTS:
        _CONSTANTS[dtype] = tuple(np.ascontiguousarray(a, dtype) for a in (
            _K, _K.T, _RGB_TO_YCC, _YCC_TO_RGB, _TABLES, _YCC_SHIFT))
    return _CONSTANTS[dtype]


def quality_to_factor(quality) -> np.ndarray:
    """DiffJPEG's scale of the tables: 5000 / q / 100 for q < 50, (200 - 2 q) / 100 from 50 on
    (float64, elementwise)."""
    q = np.asarray(quality, np.float64)
    return np.where(q < 50, 5000.0 / q, 200.0 - 2 * q) / 100.0


# -- kernels: each linear piece serves the forward and, transposed, the backward -------------------

@kernel(parallel=True)
def _split(x, m, shift, scale, weight, y, cb, cr):
    """Colour planes from (N, 3, H, W) x, read as zero beyond H, W up to y's (Hp, Wp):
    p = m (scale x) + shift per pixel; y = p[0], cb / cr = weight * (2x2 sum of p[1] / p[2]).
    Forward: RGB -> YCbCr with the 4:2:0 average; backward: the adjoint of _join."""
    N, H, W = x.shape[0], x.shape[2], x.shape[3]
    h2, w2 = cb.shape[1], cb.shape[2]
    zero = scale - scale  # in x's dtype
    for t in prange(N * h2):
        n, i = t // h2, t % h2
        for j in range(w2):
            s1 = zero
            s2 = zero
            for a in range(2):
                for b in range(2):
                    r, c = 2 * i + a, 2 * j + b
                    v0 = v1 = v2 = zero
                    if r < H and c < W:
                        v0 = x[n, 0, r, c] * scale
                        v1 = x[n, 1, r, c] * scale
                        v2 = x[n, 2, r, c] * scale
                    y[n, r, c] = v0 * m[0, 0] + v1 * m[0, 1] + v2 * m[0, 2] + shift[0]
                    s1 += v0 * m[1, 0] + v1 * m[1, 1] + v2 * m[1, 2] + shift[1]
                    s2 += v0 * m[2, 0] + v1 * m[2, 1] + v2 * m[2, 2] + shift[2]
            cb[n, i, j] = s1 * weight
            cr[n, i, j] = s2 * weight


@kernel(parallel=True)
def _join(y, cb, cr, m, shift, scale, weight, out, slope):
    """(N, 3, H, W) out, H and W up to y's: v = scale * m (p + shift) per pixel, p = (y, weight
    * cb, weight * cr), the chroma repeated 2x2. Backward (slope empty): out = v, the adjoint of
    _split (scale 255, weight 1/4). Forward (YCbCr -> RGB, scale 1, weight 1): out = clamp(v, 0,
    255) / 255 and slope = the clamp's derivative as torch's min(255, max(0, v)) has it: 1
    inside, 1/2 at a tie (exactly 0 or 255), 0 outside."""
    N, H, W = out.shape[0], out.shape[2], out.shape[3]
    clamp = slope.shape[0] > 0
    zero = scale - scale  # in out's dtype
    top = zero + 255
    half = zero + 0.5
    for t in prange(N * 3 * H):
        n, k, r = t // (3 * H), t // H % 3, t % H
        m0, m1, m2 = m[k, 0], m[k, 1], m[k, 2]
        yr, cbr, crr, o = y[n, r], cb[n, r // 2], cr[n, r // 2], out[n, k, r]
        for c in range(W):
            p0 = yr[c] + shift[0]
            p1 = cbr[c // 2] * weight + shift[1]
            p2 = crr[c // 2] * weight + shift[2]
            o[c] = (p0 * m0 + p1 * m1 + p2 * m2) * scale
        if clamp:
            s = slope[n, k, r]
            for c in range(W):
                v = o[c]
                s[c] = (zero < v) * (v < top) + half * ((v == zero) + (v == top))
                o[c] = min(max(v, zero), top) / top


@kernel
def _times(v, matrix, out):
    """out = v @ matrix for a (64,) vector and a (64, 64) matrix."""
    for k in range(64):
        out[k] = 0
    for a in range(64):
        x = v[a]
        row = matrix[a]
        for k in range(64):
            out[k] += x * row[k]


@kernel(parallel=True)
def _blockwise(src, offset, K, KT, step, cubic, slope, dst):
    """Per 8x8 block b of src (N, H, W): c = (b - offset) @ K (the DCT), then with step (N, 64)
    given (forward) quantise c: q = c / step, c = (round(q) [+ (q - round(q))^3 when cubic]) step
    and slope = d c / d (the DCT's c); a step of 0 keeps c (slope 1). With step empty (backward)
    c *= slope. dst block = c @ K^T (the IDCT) + offset."""
    N, H, W = src.shape
    bh, bw = H // 8, W // 8
    forward = step.shape[0] > 0
    for t in prange(N * bh):
        n, i = t // bh, t % bh
        block = np.empty(64, src.dtype)
        coef = np.empty(64, src.dtype)
        for j in range(bw):
            for a in range(8):
                row = src[n, 8 * i + a]
                for b in range(8):
                    block[8 * a + b] = row[8 * j + b] - offset
            _times(block, K, coef)
            s = slope[n, i * bw + j]
            for k in range(64):
                if not forward:
                    coef[k] *= s[k]
                elif step[n, k] == 0:
                    s[k] = 1
                else:
                    q = coef[k] / step[n, k]
                    r = np.rint(q)
                    d = q - r
                    if cubic:
                        coef[k] = (r + d * d * d) * step[n, k]
                        s[k] = 3 * d * d
                    else:
                        coef[k] = r * step[n, k]
                        s[k] = 0
            _times(coef, KT, block)
            for a in range(8):
                row = dst[n, 8 * i + a]
                for b in range(8):
                    row[8 * j + b] = block[8 * a + b] + offset


# -- forward and backward --------------------------------------------------------------------------

def _planes(x, m, shift, scale, weight, hp, wp):
    """[Y, Cb, Cr] of (N, 3, H, W) x at (hp, wp) (chroma at half size), or [Y] of (N, 1, H, W)."""
    n = x.shape[0]
    if x.shape[1] == 1:
        y = np.zeros((n, hp, wp), x.dtype)
        y[:, :x.shape[2], :x.shape[3]] = x[:, 0] * scale
        return [y]
    y = np.empty((n, hp, wp), x.dtype)
    cb, cr = np.empty((n, hp // 2, wp // 2), x.dtype), np.empty((n, hp // 2, wp // 2), x.dtype)
    _launch(_split, n * hp * wp, np.ascontiguousarray(x), m, shift, x.dtype.type(scale),
            x.dtype.type(weight), y, cb, cr)
    return [y, cb, cr]


def _image(planes, m, shift, scale, weight, shape, slope):
    """The (N, C, H, W) image of _planes' planes (the inverse map's structure); with slope (N, C,
    H, W) given, clamped to [0, 255] and / 255, slope = the clamp's derivative (see _join)."""
    n, c, h, w = shape
    y = planes[0]
    if c == 1:
        v = (y[:, :h, :w] * scale)[:, None]
        if slope.shape[0] == 0:
            return v
        slope[:] = np.where((v > 0) & (v < 255), 1.0, np.where((v == 0) | (v == 255), 0.5, 0.0))
        return np.clip(v, 0, 255) / y.dtype.type(255)
    out = np.empty(shape, y.dtype)
    _launch(_join, n * h * w, *planes, m, shift, y.dtype.type(scale), y.dtype.type(weight), out,
            slope)
    return out


def _launch(kern, pixels, *args):
    launch(kern, pixels < _SERIAL_PIXELS, *args)


def _jpeg_forward(x, factor, differentiable):
    """(the decoded image (N, C, H, W), the slopes backward needs)."""
    n, c, h, w = x.shape
    K, KT, to_ycc, to_rgb, tables, shift = _constants(x.dtype)
    planes = _planes(x, to_ycc, shift, 255, 0.25, h + -h % 16, w + -w % 16)
    steps = tables[:, None, :] * factor.astype(x.dtype)[None, :, None]  # (3, N, 64)
    slopes = []
    for p, plane in enumerate(planes):
        slope = np.empty((n, plane.size // n // 64, 64), x.dtype)
        decoded = np.empty_like(plane)
        _launch(_blockwise, plane.size, plane, x.dtype.type(128), K, KT,
                np.ascontiguousarray(steps[p]), differentiable, slope, decoded)
        planes[p] = decoded
        slopes.append(slope)
    clamp_slope = np.empty(x.shape, x.dtype)
    return _image(planes, to_rgb, -shift, 1, 1, x.shape, clamp_slope), (clamp_slope, slopes)


def _jpeg_backward(g, clamp_slope, slopes):
    """dL/dx for dL/d(out) = g (N, C, H, W): the forward's linear maps transposed."""
    n, c, h, w = g.shape
    K, KT, to_ycc, to_rgb, _, shift = _constants(g.dtype)
    hp, wp = h + -h % 16, w + -w % 16
    zero = np.zeros(3, g.dtype)
    planes = _planes(g * clamp_slope, to_rgb.T.copy(), zero, 1 / 255, 1, hp, wp)
    no_step = np.empty((0, 64), g.dtype)
    for p, plane in enumerate(planes):
        out = np.empty_like(plane)
        _launch(_blockwise, plane.size, plane, g.dtype.type(0), K, KT, no_step, False,
                slopes[p], out)
        planes[p] = out
    return _image(planes, to_ycc.T.copy(), zero, 255, 0.25, g.shape, np.empty((0, 0, 0, 0),
                                                                             g.dtype))


class DiffJPEGFunction(Function):
    @staticmethod
    def forward(ctx, x, *, factor, differentiable):
        out, ctx.saved = _jpeg_forward(x, factor, differentiable)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx = 255 A^T [round'(q) . B^T (clamp'(v) . g / 255)]
        return _jpeg_backward(np.ascontiguousarray(g), *ctx.saved)


def _qualities(quality, n: int) -> np.ndarray:
    """quality (a number, or one per image: a sequence, array or Tensor of N) as (N,) float64."""
    q = getattr(quality, "data", quality)
    if is_number(q):
        q = np.full(n, float(q))
    else:
        try:
            q = np.array(q, dtype=np.float64)
        except (TypeError, ValueError):
            q = None
        if q is None or q.shape not in ((), (n,)):
            raise ValueError(f"diff_jpeg: quality must be a number or {n} numbers (one per "
                             f"image), got {quality!r}")
        q = np.broadcast_to(q, (n,))
    if not np.all((q >= 1) & (q <= 100)):
        raise ValueError(f"diff_jpeg: quality must be in [1, 100], got {quality!r}")
    return q


def diff_jpeg(x, quality, differentiable: bool = True):
    """JPEG-compress and decode (N, C, H, W) images in [0, 1] as BasicSR's DiffJPEG, C = 3 (RGB)
    or 1 (gray, coded as Y); any H, W (zero-padded to multiples of 16 and cropped back). Returns
    the same shape and dtype, in [0, 1]; differentiable w.r.t. x.

    quality: a number in [1, 100] (continuous, as DiffJPEG's) or one per image (a sequence, numpy
    array or Tensor of N; no gradient flows to it). 100 means no quantisation (DiffJPEG gives NaN
    there). differentiable (default True): DiffJPEG's cubic rounding, whose gradient is 3 (q -
    round(q))^2; False: plain rounding (the forward without the cubic term), gradient 0, what
    Real-ESRGAN's models use."""
    a = float_array("diff_jpeg", "input", x)
    if a.ndim != 4 or a.shape[1] not in (1, 3):
        raise ValueError(f"diff_jpeg: expected (N, 3, H, W) or (N, 1, H, W) images, got shape "
                         f"{a.shape}")
    if 0 in a.shape:
        raise ValueError(f"diff_jpeg: input must not be empty, got shape {a.shape}")
    factor = quality_to_factor(_qualities(quality, a.shape[0]))
    differentiable = flag("diff_jpeg", "differentiable", differentiable)
    return DiffJPEGFunction.apply(x, factor=factor, differentiable=differentiable)
