"""im2col / col2im, the column kernels of conv.py's im2col routines (serial numba kernels: each call
fills one tile; the tiles run in parallel on conv.py's worker threads)."""
from __future__ import annotations

from .._jit import kernel


@kernel
def valid_range(off, step, size, count):
    """The indices i in [i0, i1) of [0, count) whose source i * step + off lies inside [0, size)."""
    i0 = min(count, 0 if off >= 0 else (-off + step - 1) // step)
    i1 = max(i0, min(count, (size - off + step - 1) // step))
    return i0, i1


@kernel
def im2col(x, col, b0, r0, OW, kh, kw, sh, sw, ph, pw, dh, dw):
    """col[b, (c, p, q), (i, j)] = x[b0 + b, c, (r0 + i) sh + p dh - ph, j sw + q dw - pw] (0 outside)."""
    nb, K, n = col.shape
    nr = n // OW
    H, W = x.shape[2], x.shape[3]
    for t in range(nb * K):
        b, k = t // K, t % K
        c, p, q = k // (kh * kw), (k // kw) % kh, k % kw
        dst, src = col[b, k], x[b0 + b, c]
        yoff, xoff = r0 * sh + p * dh - ph, q * dw - pw
        i0, i1 = valid_range(yoff, sh, H, nr)
        j0, j1 = valid_range(xoff, sw, W, OW)
        dst[:i0 * OW] = 0
        dst[i1 * OW:] = 0
        if sh == 1 and sw == 1 and OW == W and i1 > i0:
            # Consecutive output rows read consecutive input rows: one flat copy of the band; what it
            # takes from beyond a row's ends lands in the padding columns, zeroed below.
            a = (yoff + i0) * W + xoff
            lo, hi = max(a, 0), min(a + (i1 - i0) * W, H * W)
            d = i0 * OW - a
            if hi > lo:  # else the band's every column is padding
                dst[d + lo:d + hi] = src.reshape(H * W)[lo:hi]
            for i in range(i0, i1):
                dst[i * OW:i * OW + j0] = 0
                dst[i * OW + j1:(i + 1) * OW] = 0
            continue
        for i in range(i0, i1):
            row, srow = dst[i * OW:(i + 1) * OW], src[i * sh + yoff]
            row[:j0] = 0
            for j in range(j0, j1):
                row[j] = srow[j * sw + xoff]
            row[j1:] = 0


@kernel
def col2im(col, x, b0, r0, OW, row_lo, row_hi, kh, kw, sh, sw, ph, pw, dh, dw):
    """The adjoint of im2col, restricted to rows [row_lo, row_hi) of x: x[b0 + b, c, ...] += every
    column entry im2col copied from there. Each element receives its terms in (p, q) order, whatever
    the row window, so a task that owns a window adds exactly what one serial pass adds there.
    `col` is scratch: its padding entries are zeroed."""
    nb, K, n = col.shape
    nr = n // OW
    C, W = x.shape[1], x.shape[3]
    for t in range(nb * C):
        b, c = t // C, t % C
        dst = x[b0 + b, c]
        for p in range(kh):
            for q in range(kw):
                src = col[b, (c * kh + p) * kw + q]
                yoff, xoff = r0 * sh + p * dh - ph, q * dw - pw
                i0, i1 = valid_range(yoff - row_lo, sh, row_hi - row_lo, nr)
                j0, j1 = valid_range(xoff, sw, W, OW)
                if sh == 1 and sw == 1 and OW == W:
                    # The flat band add of im2col's fast path; padding columns add zero. The range
                    # stays inside the band's own rows: shifted by xoff it would wrap one
                    # read-modify-write into a row outside the window, which another task may own.
                    for i in range(i0, i1):
                        src[i * OW:i * OW + j0] = 0
                        src[i * OW + j1:(i + 1) * OW] = 0
                    a = (yoff + i0) * W + xoff
                    lo, hi = max(a, (yoff + i0) * W), min(a + (i1 - i0) * W, (yoff + i1) * W)
                    d = i0 * OW - a
                    flat = dst.reshape(dst.shape[0] * W)
                    for m in range(lo, hi):
                        flat[m] += src[d + m]
                    continue
                for i in range(i0, i1):
                    row, drow = src[i * OW:(i + 1) * OW], dst[i * sh + yoff]
                    for j in range(j0, j1):
                        drow[j * sw + xoff] += row[j]
