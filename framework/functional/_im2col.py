"""im2col / col2im, the column kernels of conv.py's im2col routines (serial numba kernels: each call
fills one tile; the tiles run in parallel on conv.py's worker threads).

The image side comes as flat planes (N, C, H W) with its width W, so that a stride-1 band is one
flat copy. The inner loops run over 1-D views from 0 (_jit.py: how kernels stay fast to run and to
compile)."""
from __future__ import annotations

from .._jit import kernel


@kernel
def valid_range(off, step, size, count):
    """The indices i in [i0, i1) of [0, count) whose source i * step + off lies inside [0, size)."""
    i0 = min(count, 0 if off >= 0 else (-off + step - 1) // step)
    i1 = max(i0, min(count, (size - off + step - 1) // step))
    return i0, i1


@kernel
def _zero(dst, lo, hi):
    d = dst[lo:hi]
    for m in range(d.shape[0]):
        d[m] = 0


@kernel
def im2col(x, W, col, b0, r0, OW, kh, kw, sh, sw, ph, pw, dh, dw):
    """col[b, (c, p, q), (i, j)] = x[b0 + b, c, (r0 + i) sh + p dh - ph, j sw + q dw - pw] (0 outside),
    x given as flat planes (N, C, H W) of width W."""
    nb, K, n = col.shape
    nr = n // OW
    H = x.shape[2] // W
    for t in range(nb * K):
        b, k = t // K, t % K
        c, p, q = k // (kh * kw), (k // kw) % kh, k % kw
        dst, src = col[b, k], x[b0 + b, c]
        yoff, xoff = r0 * sh + p * dh - ph, q * dw - pw
        i0, i1 = valid_range(yoff, sh, H, nr)
        j0, j1 = valid_range(xoff, sw, W, OW)
        _zero(dst, 0, i0 * OW)
        _zero(dst, i1 * OW, n)
        if sh == 1 and sw == 1 and OW == W:
            # Consecutive output rows read consecutive input rows: one flat copy of the band; what it
            # takes from beyond a row's ends lands in the padding columns, zeroed after.
            e = (yoff + i0) * W + xoff - i0 * OW  # src index - dst index
            lo, hi = max(i0 * OW, -e), min(i1 * OW, H * W - e)
            if hi > lo:
                d, s = dst[lo:hi], src[lo + e:hi + e]
                for m in range(d.shape[0]):
                    d[m] = s[m]
            for i in range(i0, i1):
                _zero(dst, i * OW, i * OW + j0)
                _zero(dst, i * OW + j1, (i + 1) * OW)
            continue
        for i in range(i0, i1):
            row = i * OW
            _zero(dst, row, row + j0)
            d, s = dst[row + j0:row + j1], src[(i * sh + yoff) * W + xoff + j0 * sw:]
            for j in range(d.shape[0]):
                d[j] = s[j * sw]
            _zero(dst, row + j1, row + OW)


@kernel
def col2im(col, x, W, b0, r0, OW, row_lo, row_hi, kh, kw, sh, sw, ph, pw, dh, dw):
    """The adjoint of im2col, restricted to rows [row_lo, row_hi) of x (flat planes (N, C, H W) of
    width W): x[b0 + b, c, ...] += every column entry im2col copied from there. Each element receives
    its terms in (p, q) order, whatever the row window, so a task that owns a window adds exactly
    what one serial pass adds there."""
    nb, K, n = col.shape
    nr = n // OW
    C = x.shape[1]
    for t in range(nb * C):
        b, c = t // C, t % C
        dst = x[b0 + b, c]
        for p in range(kh):
            for q in range(kw):
                src = col[b, (c * kh + p) * kw + q]
                yoff, xoff = r0 * sh + p * dh - ph, q * dw - pw
                i0, i1 = valid_range(yoff - row_lo, sh, row_hi - row_lo, nr)
                j0, j1 = valid_range(xoff, sw, W, OW)
                if j1 <= j0:
                    continue
                for i in range(i0, i1):
                    s, d = src[i * OW + j0:i * OW + j1], dst[(i * sh + yoff) * W + xoff + j0 * sw:]
                    if sw == 1:  # contiguous: vectorised
                        for j in range(s.shape[0]):
                            d[j] += s[j]
                    else:
                        for j in range(s.shape[0]):
                            d[j * sw] += s[j]
