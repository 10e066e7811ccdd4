"""Dense large-kernel correlations by FFT, for conv.py's large-kernel route (_depthwise.py decides when):
PLKSR's 17x17 kernel on 16 channels costs 16 x 289 multiply-adds per output value directly, and a
few hundred flops per value through the frequency domain.

The output is cut into tiles of T x T; each tile reads an F x F patch of the (zero-padded) input,
F = T + k - 1 a 5-smooth FFT size. Per patch (correlation theorem, no wrap-around inside a tile):

    forward       Y_o = sum_c X_c conj(W_oc)        y = irfft2(Y)[:T, :T]
    weight grad   R_oc = sum_patches X_c conj(G_o)  dW = irfft2(R)[:kh, :kw]   (G: the tile of dL/dy)

with X, W, G the rfft2 of the patch, of the kernel and of the gradient tile, each zero-padded to
F x F at its top-left. The input gradient is the forward on the flipped kernel (_depthwise.adjoint).
numpy's pocketfft does the transforms (in the input's precision: complex64 for float32), two numba
kernels the sums over channels, one output (b, o) or (o, c) per task, summing in a fixed order.
"""
from __future__ import annotations

import numpy as np

from .._jit import kernel, prange

# The largest FFT side: a large map is cut into tiles of FFT_SIDE - k + 1 outputs per side.
FFT_SIDE = 96


def _smooth(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (the sizes pocketfft transforms fastest)."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _plan(out: int, k: int):
    """(FFT side F, tile T, tiles) along one axis of `out` outputs for a kernel of k taps."""
    F = _smooth(out + k - 1)
    if F > FFT_SIDE and out + k - 1 > FFT_SIDE:
        F = _smooth(max(FFT_SIDE, 2 * k))  # at least half the patch is output
    T = F - k + 1
    return F, T, -(-out // T)


def _patches(x, pad, plans):
    """The tiles' input patches (N nth ntw, C, Fh, Fw) of x (N, C, H, W) padded by pad = (top,
    left) (negative: cropped) and with zeros beyond it."""
    N, C, H, W = x.shape
    (Fh, Th, nth), (Fw, Tw, ntw) = plans
    rows, cols = (nth - 1) * Th + Fh, (ntw - 1) * Tw + Fw
    xp = np.zeros((N, C, rows, cols), x.dtype)
    (ph, pw) = pad
    r0, r1 = max(0, ph), min(rows, ph + H)
    c0, c1 = max(0, pw), min(cols, pw + W)
    if r1 > r0 and c1 > c0:
        xp[:, :, r0:r1, c0:c1] = x[:, :, r0 - ph:r1 - ph, c0 - pw:c1 - pw]
    s = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, (N, nth, ntw, C, Fh, Fw), (s[0], s[2] * Th, s[3] * Tw, s[1], s[2], s[3]), writeable=False)
    return np.ascontiguousarray(view).reshape(N * nth * ntw, C, Fh, Fw)


def _split(z):
    """A complex array as contiguous (real, imag) arrays of its float type, flattened per row."""
    z = z.reshape(z.shape[0], z.shape[1], -1)
    return np.ascontiguousarray(z.real), np.ascontiguousarray(z.imag)


@kernel
def _add_conj_product(ar, ai, pr, pi, qr, qi):
    """a += p conj(q) on rows of nf, complex as (real, imag) rows."""
    for f in range(ar.shape[0]):
        ar[f] += pr[f] * qr[f] + pi[f] * qi[f]
        ai[f] += pi[f] * qr[f] - pr[f] * qi[f]


@kernel(parallel=True)
def _mac(xr, xi, wr, wi, yr, yi):
    """y[b, o] = sum_c x[b, c] conj(w[o, c]), complex as (real, imag) arrays of (.., nf)."""
    B, C = xr.shape[:2]
    O = wr.shape[0]
    for t in prange(B * O):
        b, o = t // O, t % O
        yr[b, o, :] = 0
        yi[b, o, :] = 0
        for c in range(C):
            _add_conj_product(yr[b, o], yi[b, o], xr[b, c], xi[b, c], wr[o, c], wi[o, c])


@kernel(parallel=True)
def _mac_grad(xr, xi, gr, gi, rr, ri):
    """r[o, c] = sum_b x[b, c] conj(g[b, o]), complex as (real, imag) arrays of (.., nf)."""
    B, C = xr.shape[:2]
    O = gr.shape[1]
    for t in prange(O * C):
        o, c = t // C, t % C
        rr[o, c, :] = 0
        ri[o, c, :] = 0
        for b in range(B):
            _add_conj_product(rr[o, c], ri[o, c], xr[b, c], xi[b, c], gr[b, o], gi[b, o])


def _join(re, im, shape):
    z = np.empty(shape, np.result_type(re.dtype, np.complex64))
    z.real, z.imag = re.reshape(shape), im.reshape(shape)
    return z


def correlate(x, w, pad, out_hw, bias=None):
    """y (N, O, *out_hw): x (N, C, H, W) correlated with w (O, C, kh, kw), padded by pad (top, left),
    + bias."""
    N = x.shape[0]
    O, C, kh, kw = w.shape
    plans = (_plan(out_hw[0], kh), _plan(out_hw[1], kw))
    (Fh, Th, nth), (Fw, Tw, ntw) = plans
    xf = np.fft.rfft2(_patches(x, pad, plans))
    wf = np.fft.rfft2(w, s=(Fh, Fw))
    B, nf = xf.shape[0], xf.shape[2] * xf.shape[3]
    yr, yi = np.empty((B, O, nf), x.dtype), np.empty((B, O, nf), x.dtype)
    _mac(*_split(xf), *_split(wf), yr, yi)
    yt = np.fft.irfft2(_join(yr, yi, (B, O) + xf.shape[2:]), s=(Fh, Fw))[..., :Th, :Tw]
    y = yt.reshape(N, nth, ntw, O, Th, Tw).transpose(0, 3, 1, 4, 2, 5).reshape(N, O, nth * Th, ntw * Tw)
    y = np.ascontiguousarray(y[:, :, :out_hw[0], :out_hw[1]], x.dtype)
    if bias is not None:
        y += bias.reshape(1, O, 1, 1).astype(x.dtype, copy=False)
    return y


def weight_grad(x, g, pad, w_shape):
    """dW w_shape (O, C, kh, kw) of y = correlate(x, w, pad): x (N, C, H, W), g = dL/dy (N, O, OH, OW)."""
    N, O, OH, OW = g.shape
    kh, kw = w_shape[2:]
    plans = (_plan(OH, kh), _plan(OW, kw))
    (Fh, Th, nth), (Fw, Tw, ntw) = plans
    xf = np.fft.rfft2(_patches(x, pad, plans))
    gp = np.zeros((N, O, nth * Th, ntw * Tw), g.dtype)
    gp[:, :, :OH, :OW] = g
    tiles = gp.reshape(N, O, nth, Th, ntw, Tw).transpose(0, 2, 4, 1, 3, 5).reshape(N * nth * ntw, O, Th, Tw)
    gf = np.fft.rfft2(tiles, s=(Fh, Fw))
    nf = xf.shape[2] * xf.shape[3]
    rr, ri = np.empty((O, w_shape[1], nf), x.dtype), np.empty((O, w_shape[1], nf), x.dtype)
    _mac_grad(*_split(xf), *_split(gf), rr, ri)
    r = np.fft.irfft2(_join(rr, ri, (O, w_shape[1]) + xf.shape[2:]), s=(Fh, Fw))[..., :kh, :kw]
    return np.ascontiguousarray(r, x.dtype)
