"""conv2d and conv_transpose2d: each one's input gradient is the other's forward.

A correlation links an "image side" X (N, C, H, W) and a "feature side" Y (N, O, OH, OW) through a weight
W (O, C/groups, kh, kw). Three routines carry all the arithmetic:

    _correlate(X, W)          Y  = W @ im2col(X)            conv2d forward, conv_transpose2d's dL/dx
    _correlate_adjoint(Y, W)  X  = col2im(W^T @ Y)          conv_transpose2d forward, conv2d's dL/dx
    _weight_grad(X, Y)        dW = sum_n Y_n @ im2col(X_n)^T  both weight gradients

For conv2d, X is the input and Y the output; for conv_transpose2d the roles swap (its input is the feature
side), which is why torch's transposed weight layout (in, out/groups, kh, kw) is the same matrix. With
stride 1 each routine is also the other form on the flipped kernel (`_Geometry.flipped`), and takes the
form whose column matrix has (fewer channels) x kh x kw rows: 64->3 builds 27 rows, not 576.

Three routes compute them. A stride-1, undilated, ungrouped correlation with enough channels takes the
direct route (_direct.py: every output a fused multiply-add chain in registers, vectorised, no column
matrix; `_direct_route` says when), its input gradient the direct forward of the flipped kernel.
Depthwise, grouped and the other large-kernel stride-1 correlations take _depthwise.py's loops over
padded planes, or the frequency domain for very many multiply-adds per output (`_large_route`);
everything else takes im2col / col2im (serial numba kernels) and a product (np.matmul, BLAS).
Under `framework.autocast("bf16")` the direct route of float32 tensors takes bfloat16 operands with
float32 sums from 5 channels and 32 products per output (a first layer's forward, from the image,
stays float32): on AMX tiles (_direct_amx.py) from 16 channels on the image side where the CPU has
AMX (with any number of outputs: a last conv to 3 channels too), else AVX512-BF16
(_direct_bf16.py); the other routes stay float32 (docs/numerics.md). Where both of conv2d's
gradients take AMX, its backward reads the output gradient once for both (_direct_amx_grad.py).

The work is cut into tiles (some whole images, or a band of output rows of one image; a multiple of
the workers). The direct route runs its tiles in one numba parallel region per call (a fork/join of
~2 us); the im2col and depthwise routes run theirs on a pool of Python threads (numba.get_num_threads()
of them), each with single-threaded BLAS, one fork/join per call (_tiles.py says why), and on the
calling thread below _SERIAL_MACS. The buffers of all threads together never exceed COL_BUFFER_BYTES.
No two concurrent tasks write the same element (the adjoint's tasks own disjoint rows: `_adjoint_tasks`), and
every element gets its terms in one fixed order, so results do not depend on the thread count or on
timing; the direct route's do not depend on the CPU either.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .._check import float_array, int_arg, int_pair, number
from .. import autograd, precision
from ..autograd import Function
from . import _depthwise, _direct, _direct_amx, _direct_amx_grad, _direct_bf16, _tiles
from .activation import leaky_relu, rectify_, rectify_grad, relu
from ._im2col import col2im, im2col

__all__ = ["conv2d", "conv_transpose2d", "conv_padding"]

# Column buffers of all worker threads together (bytes). Besides bounding memory, small tiles keep
# each column matrix in the caches between im2col and the product that reads it.
COL_BUFFER_BYTES = 16 * 2**20


class _Geometry(NamedTuple):
    """Everything the kernels need; padding is (top, left): bottom/right follow from the sizes."""

    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    image: tuple  # (H, W) of the image side
    features: tuple  # (OH, OW) of the feature side

    def flat(self):
        return (*self.kernel, *self.stride, *self.padding, *self.dilation)

    def flipped(self):
        """With stride 1 a correlation's adjoint is itself a correlation, with the roles of the two
        sides swapped and the kernel flipped: this geometry (None for a stride, or a padding beyond the
        dilated kernel). Used to build the shorter column matrix: (fewer channels) x kh x kw rows."""
        (kh, kw), (dh, dw), (ph, pw) = self.kernel, self.dilation, self.padding
        if self.stride != (1, 1) or ph > dh * (kh - 1) or pw > dw * (kw - 1):
            return None
        return _Geometry(self.kernel, (1, 1), (dh * (kh - 1) - ph, dw * (kw - 1) - pw), self.dilation,
                         self.groups, self.features, self.image)

    def is_pointwise(self):
        """1x1, stride 1, no padding: im2col is the identity and the convolution a plain matmul."""
        return (self.kernel == (1, 1) and self.stride == (1, 1) and self.padding == (0, 0)
                and self.image == self.features)


# -- tiles and threads (the machinery is in _tiles.py; the policy stays here) -------------------------

def _workers():
    """Worker threads for tiles: numba's thread count, or 1 when BLAS threads cannot be limited."""
    return _tiles.default_workers()


# Below this many multiply-adds OpenBLAS runs a GEMM on one thread itself (its threshold is 4 x 65536),
# so the tiles run without limiting BLAS's threads: threadpoolctl's two calls cost more than such a
# product (RCAN's channel attention: 1x1 convs on 1x1 maps, 128 multiply-adds).
_BLAS_SERIAL_MACS = 1 << 16


def _run(tasks, work, buffer_elems, dtype, macs=None):
    """[work(task, buffer) for task in tasks] on the worker threads (_tiles.run); on the calling
    thread, BLAS's threads untouched, below _BLAS_SERIAL_MACS multiply-adds."""
    workers = 1 if macs is not None and macs < _BLAS_SERIAL_MACS else _workers()
    return _tiles.run(tasks, work, buffer_elems, dtype, workers)


def _split(n_images, out_rows, row_bytes, workers=1):
    """Tiles whose column matrix fits COL_BUFFER_BYTES / workers (_tiles.split): (tiles, bytes per
    buffer), each tile (b0, b1, r0, r1)."""
    return _tiles.split(n_images, out_rows, row_bytes, COL_BUFFER_BYTES // workers, workers)


# Below this many multiply-adds an im2col correlation is one tile on the calling thread: a fork/join
# of the thread pool (70-90 us here) costs more than a second thread saves (RCAN's channel
# attention: 1x1 convs on 1x1 maps).
_SERIAL_MACS = 1 << 22


def _column_tiles(x_side, geo, o):
    """Tiles over the feature side, elements per column buffer and the column height K, for an image
    side of shape (N, C, ...) and dtype x_side = (N, C, dtype) and o channels on the feature side."""
    N, C, dtype = x_side
    OH, OW = geo.features
    K = C * geo.kernel[0] * geo.kernel[1]
    itemsize = np.dtype(dtype).itemsize
    whole = N * OH * OW * K
    if 0 < N and whole * o // geo.groups < _SERIAL_MACS and whole * itemsize <= COL_BUFFER_BYTES:
        return [(0, N, 0, OH)], whole, K
    tiles, nbytes = _split(N, OH, K * OW * itemsize, _workers())
    return tiles, nbytes // itemsize, K


# -- the three routines ------------------------------------------------------------------------------

def _columns(x, tile, buf, K, geo):
    """The column matrix of one tile as (nb, groups, K/groups, n): a view of x for a pointwise conv,
    else im2col into buf."""
    b0, b1, r0, r1 = tile
    g, OW = geo.groups, geo.features[1]
    if geo.is_pointwise():
        return x.reshape(x.shape[0], g, K // g, -1)[b0:b1, :, :, r0 * OW:r1 * OW]
    nb, n = b1 - b0, (r1 - r0) * OW
    col = buf[:nb * K * n].reshape(nb, K, n)
    im2col(_planes(x), x.shape[3], col, b0, r0, OW, *geo.flat())
    return col.reshape(nb, g, K // g, n)


def _planes(x):
    """(N, C, H, W) -> its flat planes (N, C, H W), the im2col kernels' view of an image side."""
    return x.reshape(x.shape[0], x.shape[1], x.shape[2] * x.shape[3])


def _flip(w, groups, c):
    """W (O, C/g, kh, kw) -> the flipped, transposed kernel (C, O/g, kh, kw) of the flipped geometry."""
    O, _, kh, kw = w.shape
    wf = w.reshape(groups, O // groups, c // groups, kh, kw)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(wf).reshape(c, O // groups, kh, kw)


# The direct route (_direct.py) takes stride-1, undilated, ungrouped, non-pointwise correlations with
# at least _DIRECT_MIN_CHANNELS on the output side and _DIRECT_MIN_TAPS products per output (C kh kw):
# below them im2col's GEMM was faster (8 outputs, a last layer's 3); a first layer's 3 x 3 x 3 taps
# (and a grey image's 9) run direct 1.4-2.8x faster than im2col's GEMM of 27 or 9 rows; a 1x1 conv is
# one GEMM (docs/benchmarks.md, "Where the code's thresholds come from"). A function of shapes only,
# never of the batch or the CPU, so that every machine takes the same route.
_DIRECT_MIN_CHANNELS = 12
_DIRECT_MIN_TAPS = 8
# The weight gradient has no GEMM-friendly side for a first layer (3 x 3 x 3 taps against 32-64
# gradient channels over every pixel of the batch): from 8 taps it takes the direct route, which
# was 2x faster than im2col's at 16-24 px (docs/benchmarks.md, issue 29's second session).
_DIRECT_MIN_TAPS_WEIGHT_GRAD = 8
# Under autocast("bf16") a forward from an image (at most _IMAGE_CHANNELS channels: grey, RGB, RGBA)
# or with fewer than _BF16_MIN_TAPS products stays float32: bfloat16 keeps 8 significant bits,
# coarser than an 8-bit image's steps above 0.5, and its products are not where the time goes.
# Rounded, the quickstart's ESPCN (a 5 x 5 first layer) ended 0.04-0.10 dB of PSNR-Y below its
# float32 run on two seeds of three; in float32, within +0.015 on all three (docs/benchmarks.md).
_BF16_MIN_TAPS = 32
_IMAGE_CHANNELS = 4


def _direct_route(geo, c, o, min_taps=_DIRECT_MIN_TAPS):
    """Whether the correlation from a side of c channels to one of o (its forward, or with
    min_taps=_DIRECT_MIN_TAPS_WEIGHT_GRAD its weight gradient) takes the direct route."""
    return (geo.stride == (1, 1) and geo.dilation == (1, 1) and geo.groups == 1 and not geo.is_pointwise()
            and o >= _DIRECT_MIN_CHANNELS and c * geo.kernel[0] * geo.kernel[1] >= min_taps)


def _large_route(geo, c, o):
    """Whether _depthwise.py computes the correlation: depthwise and grouped convs, and dense large
    kernels on few channels that the direct route does not take."""
    return _depthwise.applies(geo, c, o, dense_direct=_direct_route(geo, c, o))


def _direct_tiles(x_side, geo):
    """Tiles over the feature side for the direct forward and elements per buffer, for an image side
    of shape (N, C, ...) and dtype x_side = (N, C, dtype): the split counts each output row's padded
    input row, and twice that for the band's halo and its last vector's spill."""
    N, C, dtype = x_side
    (kh, kw), (OH, OW) = geo.kernel, geo.features
    row = _direct.row_elems(C, OW, kw)
    tiles, _ = _split(N, OH, 2 * row * np.dtype(dtype).itemsize, _workers())
    return tiles, _direct.buffer_elems(tiles, C, OW, kh, kw, dtype)


def _amx_route(c):
    """Whether a bfloat16 direct correlation with c channels on its image side runs on AMX tiles
    (_direct_amx.py), else on AVX512-BF16 (_direct_bf16.py)."""
    return c >= _direct_amx.MIN_CHANNELS and precision.support().amx_bf16


def _few_outputs_amx(geo, c, o, dtype):
    """Whether a correlation that the direct route leaves to im2col only for its few outputs (a
    network's last conv, 32 or 64 -> 3) runs on AMX tiles under bf16, its forward and its weight
    gradient: their 1 x 3 and 2 x 1 blocks spend 3 of 16 rows or columns on them, and still beat
    float32 im2col 2x and the flipped kernel's AVX512-BF16 weight gradient 1.4-2.3x
    (docs/benchmarks.md)."""
    return (o < _DIRECT_MIN_CHANNELS and _direct_route(geo, c, _DIRECT_MIN_CHANNELS)
            and precision.bf16_active(dtype) and _amx_route(c))


def _bf16_direct(geo, c, dtype):
    """Whether a direct forward from c channels takes bfloat16 operands: under autocast("bf16"),
    from more than _IMAGE_CHANNELS channels and _BF16_MIN_TAPS products per output."""
    return (precision.bf16_active(dtype) and c > _IMAGE_CHANNELS
            and c * geo.kernel[0] * geo.kernel[1] >= _BF16_MIN_TAPS)


def _direct_correlate(x, w, geo, bias, slope):
    """_correlate by the direct route, the activation fused (_direct.correlate; under
    autocast('bf16') with bfloat16 operands, on AMX or AVX512-BF16)."""
    if _bf16_direct(geo, x.shape[1], x.dtype):
        if _amx_route(x.shape[1]):
            return _direct_amx.correlate(x, w, geo.features, geo.padding, bias, slope, _workers())
        return _direct_bf16.correlate(x, w, geo.features, geo.padding, bias, slope,
                                      _direct_tiles((x.shape[0], x.shape[1], x.dtype), geo)[0])
    tiles, elems = _direct_tiles((x.shape[0], x.shape[1], x.dtype), geo)
    return _direct.correlate(x, w, geo.features, geo.padding, bias, slope, tiles, elems)


def _direct_weight_grad(x, y, geo):
    """_weight_grad by the direct route (_direct.weight_grad; bfloat16 operands under autocast)."""
    if precision.bf16_active(x.dtype):
        if _amx_route(x.shape[1]):
            return _direct_amx.weight_grad(x, y, geo.padding, geo.kernel)
        return _direct_bf16.weight_grad(x, y, geo.padding, geo.kernel, _workers())
    return _direct.weight_grad(x, y, geo.padding, geo.kernel, _workers())


def _fused_backward(geo, c, o, needs):
    """Whether conv2d's backward takes _direct_amx_grad.py (one pass over the gradient for the
    activation's derivative, the bias sum and both tile layouts): where its input gradient (the
    flipped correlation) and its weight gradient both take the direct route on AMX."""
    flipped = geo.flipped()
    return (flipped is not None and _direct_amx_grad.applies(c, o, needs)
            and _direct_route(geo, c, o, _DIRECT_MIN_TAPS_WEIGHT_GRAD) and not _large_route(geo, c, o)
            and _direct_route(flipped, o, c) and not _large_route(flipped, o, c))


def _correlate(x, w, geo, bias=None, slope=None):
    """Y = act(W @ im2col(X) + bias): X (N, C, H, W), W (O, C/g, kh, kw) -> Y (N, O, OH, OW); slope:
    None (no activation), 0 (relu) or the leaky relu's slope, applied to the fresh output."""
    if _large_route(geo, x.shape[1], w.shape[0]):
        y = _depthwise.correlate(x, w, geo, bias, _run, _workers())
        if slope is not None and not y.flags.c_contiguous:  # channels last (_depthwise.channels_together)
            rectify_(y.transpose(0, 2, 3, 1), slope)
            return y
    elif _direct_route(geo, x.shape[1], w.shape[0]):
        return _direct_correlate(x, w, geo, bias, slope)
    elif _few_outputs_amx(geo, x.shape[1], w.shape[0], x.dtype):
        return _direct_amx.correlate(x, w, geo.features, geo.padding, bias, slope, _workers())
    else:
        y = _correlate_gemm(x, w, geo, bias)
    return y if slope is None else rectify_(y, slope)


def _correlate_gemm(x, w, geo, bias=None):
    """_correlate by im2col and BLAS, without an activation."""
    N, g, O = x.shape[0], geo.groups, w.shape[0]
    flipped = geo.flipped()
    if flipped is not None and O < x.shape[1]:  # the flipped adjoint builds O kh kw rows, not C kh kw
        return _correlate_adjoint(x, _flip(w, g, x.shape[1]), flipped, O, bias)
    OH, OW = geo.features
    y = np.empty((N, O, OH, OW), x.dtype)
    wm = w.reshape(g, O // g, -1)
    yv = y.reshape(N, g, O // g, OH * OW)
    tiles, elems, K = _column_tiles((N, x.shape[1], x.dtype), geo, O)

    def work(tile, buf):
        b0, b1, r0, r1 = tile
        out = yv[b0:b1, :, :, r0 * OW:r1 * OW]
        np.matmul(wm, _columns(x, tile, buf, K, geo), out=out)
        if bias is not None:  # while the tile is still in cache
            out += bias.reshape(g, O // g, 1)

    _run(tiles, work, elems, x.dtype, N * OH * OW * K * O // g)
    return y


def _correlate_adjoint(y, w, geo, c_out, bias=None):
    """X = col2im(W^T @ Y) (+ bias): Y (N, O, OH, OW), W (O, C/g, kh, kw) -> X (N, C, H, W)."""
    N, g, O = y.shape[0], geo.groups, w.shape[0]
    if _large_route(geo, c_out, O):
        return _depthwise.adjoint(y, w, geo, c_out, bias, _run, _workers())
    flipped = geo.flipped()
    if flipped is not None and (O <= c_out or _direct_route(flipped, O, c_out)):
        return _correlate(y, _flip(w, g, c_out), flipped, bias)  # O kh kw rows, or no col2im at all
    H, W = geo.image
    OH, OW = geo.features
    wt = w.reshape(g, O // g, -1).transpose(0, 2, 1)  # (g, C/g * kh * kw, O/g)
    yv = y.reshape(N, g, O // g, OH * OW)
    x = np.zeros((N, c_out, H, W), y.dtype)
    xv, xp = x.reshape(N, g, c_out // g, H * W), _planes(x)
    tiles, elems, K = _column_tiles((N, c_out, y.dtype), geo, O)

    def work(task, buf):
        row_lo, row_hi, tiles_ = task
        for b0, b1, r0, r1 in tiles_:
            nb, n = b1 - b0, (r1 - r0) * OW
            src = yv[b0:b1, :, :, r0 * OW:r1 * OW]
            if geo.is_pointwise():  # col2im is the identity (and a halo is never needed)
                np.matmul(wt, src, out=xv[b0:b1, :, :, r0 * OW:r1 * OW])
                continue
            col = buf[:nb * K * n].reshape(nb, K, n)
            np.matmul(wt, src, out=col.reshape(nb, g, K // g, n))
            col2im(col, xp, W, b0, r0, OW, row_lo, row_hi, *geo.flat())

    _run(_adjoint_tasks(tiles, geo, _workers()), work, elems, y.dtype, N * OH * OW * K * O // g)
    if bias is not None:
        x += bias.reshape(1, c_out, 1, 1)
    return x


def _adjoint_tasks(tiles, geo, workers):
    """Tasks (row_lo, row_hi, tiles) for _correlate_adjoint: a task adds only into rows
    [row_lo, row_hi) of x, and no two tasks of one image share a row, so they run in parallel without
    a race. Bands of one image add into overlapping rows, so normally one task per image. With fewer
    images than workers (inference on one image) each image's bands are cut into chunks that own
    consecutive rows of x; a chunk also runs the feature rows of the bands before it that reach into
    its rows (a halo of about kh - 1 rows, recomputed). Every element then receives its terms in the
    order of one serial pass (band, then kernel offset): the result is bit-identical to a batch."""
    H = geo.image[0]
    by_image = [[t for t in tiles if t[0] == b] for b in sorted({t[0] for t in tiles})]
    if len(by_image) >= workers or all(len(bands) == 1 for bands in by_image):
        return [(0, H, bands) for bands in by_image]
    (kh, _), (sh, _), (ph, _), (dh, _) = geo.kernel, geo.stride, geo.padding, geo.dilation
    tasks = []
    for bands in by_image:
        n = min(len(bands), 2 * workers)  # a few chunks per worker, for balance
        starts = [len(bands) * j // n for j in range(n)]
        # chunk j owns the rows from the first row its first band touches to the next chunk's
        owned = [0] + [min(max(bands[s][2] * sh - ph, 0), H) for s in starts[1:]] + [H]
        for j, s in enumerate(starts):
            lo, hi = owned[j], owned[j + 1]
            # feature rows i of earlier bands whose last written row i sh - ph + dh (kh - 1) >= lo
            first = max(0, -(-(lo + ph - dh * (kh - 1)) // sh))
            halo = [(b0, b1, max(r0, first), r1) for b0, b1, r0, r1 in bands[:s] if r1 > max(r0, first)]
            end = starts[j + 1] if j + 1 < n else len(bands)
            if lo < hi:  # an empty window (bands wholly in the padding) adds nothing
                tasks.append((lo, hi, halo + bands[s:end]))
    return tasks


def _weight_grad(x, y, geo, w_shape):
    """dW = sum_n Y_n @ im2col(X_n)^T: X (N, C, H, W), Y (N, O, OH, OW) -> dW (O, C/g, kh, kw)."""
    N, g, O = x.shape[0], geo.groups, y.shape[1]
    C, (kh, kw) = x.shape[1], geo.kernel
    if _large_route(geo, C, O):
        return _depthwise.weight_grad(x, y, geo, w_shape, _run, _workers())
    if _direct_route(geo, C, O, _DIRECT_MIN_TAPS_WEIGHT_GRAD):
        return _direct_weight_grad(x, y, geo)
    if _few_outputs_amx(geo, C, O, x.dtype):  # its 2 x 1 block: 2x the flipped kernel's AVX512-BF16 route
        return _direct_amx.weight_grad(x, y, geo.padding, geo.kernel)
    flipped = geo.flipped()
    if flipped is not None and O < C:  # im2col of Y (O kh kw rows): the flipped kernel's gradient
        dwf = _weight_grad(y, x, flipped, (C, O // g, kh, kw))
        return _flip(dwf, g, O)
    OH, OW = geo.features
    yv = y.reshape(N, g, O // g, OH * OW)
    tiles, elems, K = _column_tiles((N, x.shape[1], x.dtype), geo, O)

    def work(tile, buf):  # dW^T = im2col(X) @ Y^T: BLAS is faster in this orientation
        b0, b1, r0, r1 = tile
        gt = yv[b0:b1, :, :, r0 * OW:r1 * OW].transpose(0, 1, 3, 2)
        return np.matmul(_columns(x, tile, buf, K, geo), gt).sum(axis=0)

    # Partial sums added in tile order, whatever thread made them: the result is deterministic.
    dwt = functools.reduce(np.add, _run(tiles, work, elems, x.dtype, N * OH * OW * K * O // g),
                           np.zeros((g, K // g, O // g), x.dtype))  # (g, C/g kh kw, O/g)
    return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape(w_shape)


# -- Functions ---------------------------------------------------------------------------------------

class Conv2dFunction(Function):
    # relu_slope: leaky_relu(., slope) (0: relu) applied in place to the fresh output, which is then
    # saved: its sign gives the activation's derivative.
    @staticmethod
    def forward(ctx, x, w, b=None, *, geo, relu_slope=None):
        w = np.ascontiguousarray(w)
        if not (_depthwise.reads_in_place(x, w.shape) and _large_route(geo, x.shape[1], w.shape[0])):
            x = np.ascontiguousarray(x)
        y = _correlate(x, w, geo, b, relu_slope)
        ctx.save_for_backward(x, w, y if relu_slope is not None else None)
        ctx.geo, ctx.relu_slope, ctx.precision = geo, relu_slope, precision.current()
        return y

    @staticmethod
    def backward(ctx, g):  # dL/dx = col2im(W^T g), dL/dW = sum_n g_n im2col(x_n)^T, dL/db = sum g
        x, w, y = ctx.saved_tensors  # g first through the fused activation: g [y > 0] (or slope)
        x = np.ascontiguousarray(x)  # a channels-together x of the depthwise forward: planes here
        nx, nw, nb = ctx.needs_input_grad
        with precision.autocast(ctx.precision):  # the forward's precision (as torch's autocast)
            if _fused_backward(ctx.geo, x.shape[1], w.shape[0], ctx.needs_input_grad):
                gx, gw, gb = _direct_amx_grad.backward(x, g, y, ctx.relu_slope, w,
                                                       ctx.geo.padding, ctx.geo.flipped().padding, _workers())
                return gx, gw, (gb if nb else None)
        g = np.ascontiguousarray(g) if y is None else rectify_grad(g, y, ctx.relu_slope)
        with precision.autocast(ctx.precision):
            gx = _correlate_adjoint(g, w, ctx.geo, x.shape[1]) if nx else None
            gw = _weight_grad(x, g, ctx.geo, w.shape) if nw else None
        gb = g.sum(axis=(0, 2, 3)) if nb else None
        return gx, gw, gb


class ConvTranspose2dFunction(Function):
    @staticmethod
    def forward(ctx, x, w, b=None, *, geo):
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        ctx.save_for_backward(x, w)
        ctx.geo, ctx.precision = geo, precision.current()
        return _correlate_adjoint(x, w, geo, w.shape[1] * geo.groups, b)

    @staticmethod
    def backward(ctx, g):  # dL/dx = W im2col(g) (= conv2d), dL/dW = sum_n x_n im2col(g_n)^T, dL/db = sum g
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        g = np.ascontiguousarray(g)
        with precision.autocast(ctx.precision):
            gx = _correlate(g, w, ctx.geo) if nx else None
            gw = _weight_grad(g, x, ctx.geo, w.shape) if nw else None
        gb = g.sum(axis=(0, 2, 3)) if nb else None
        return gx, gw, gb


# -- validation and the public wrappers ---------------------------------------------------------------

def _check_operands(name, x, w, b):
    """4-D float input and weight of one dtype; bias 1-D of that dtype. Returns the three arrays."""
    xa, wa = float_array(name, "input", x), float_array(name, "weight", w)
    ba = None if b is None else float_array(name, "bias", b)
    if xa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got input of shape {xa.shape} "
                         f"(weight {wa.shape})")
    if wa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D weight, got weight of shape {wa.shape} "
                         f"(input {xa.shape})")
    for arg, a in (("weight", wa), ("bias", ba)):
        if a is not None and a.dtype != xa.dtype:
            raise TypeError(f"{name}: {arg} dtype {a.dtype} differs from input dtype {xa.dtype}")
    return xa, wa, ba


def _check_bias(name, ba, channels, wa):
    if ba is not None and ba.shape != (channels,):
        raise ValueError(f"{name}: bias of shape {ba.shape} must have shape ({channels},) to match "
                         f"weight {wa.shape}")


def _check_groups(name, groups, xa, wa, dividend, what):
    groups = int_arg(name, "groups", groups)
    if dividend % groups:
        raise ValueError(f"{name}: groups={groups} does not divide the {dividend} {what} of weight "
                         f"{wa.shape} (input {xa.shape})")
    return groups


def conv_padding(name, padding, kernel, dilation, stride=(1, 1)):
    """((top, bottom), (left, right)) zero padding for conv2d's `padding`: an int or (h, w) (both
    sides), "valid" (none) or "same" (total d (k - 1) per axis, the odd pixel at the bottom/right as
    torch; stride 1 only). nn.Conv2d pads with this too for its other padding modes."""
    if not isinstance(padding, str):
        ph, pw = int_pair(name, "padding", padding, 0)
        return (ph, ph), (pw, pw)
    if padding not in ("same", "valid"):
        raise ValueError(f"{name}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
    if padding == "valid":
        return (0, 0), (0, 0)
    if tuple(stride) != (1, 1):
        raise ValueError(f"{name}: padding='same' is not supported for strided convolutions "
                         f"(stride={tuple(stride)})")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return tuple((t // 2, t - t // 2) for t in totals)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, relu_slope=None):
    """2-D cross-correlation, as torch.nn.functional.conv2d.

    x (N, C, H, W); weight (O, C/groups, kh, kw); bias (O,) or None -> (N, O, OH, OW) with
    OH = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1. stride, dilation: int or (h, w), default 1;
    padding: int or (h, w) (zeros, default 0), "valid" (= 0) or "same" (output size = input size,
    stride 1 only; an odd total padding puts the extra pixel at the bottom/right, as torch).
    relu_slope (srgrad's extension, default None): leaky_relu(conv2d(...), relu_slope) fused into
    the convolution (0: relu; >= 0), with no second output array and no second pass in Python."""
    name = "conv2d"
    xa, wa, ba = _check_operands(name, x, weight, bias)
    stride = int_pair(name, "stride", stride, 1)
    dilation = int_pair(name, "dilation", dilation, 1)
    kernel = wa.shape[2:]
    groups = _check_groups(name, groups, xa, wa, wa.shape[0], "output channels")
    if xa.shape[1] != wa.shape[1] * groups:
        raise ValueError(f"{name}: input {xa.shape} has {xa.shape[1]} channels but weight {wa.shape} "
                         f"with groups={groups} expects {wa.shape[1] * groups}")
    _check_bias(name, ba, wa.shape[0], wa)
    H, W = xa.shape[2:]
    (top, bottom), (left, right) = conv_padding(name, padding, kernel, dilation, stride)
    # the kernels pad top/left explicitly; bottom/right follow from the output size
    padded = (H + top + bottom, W + left + right)
    extent = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if padded[0] < extent[0] or padded[1] < extent[1]:
        raise ValueError(f"{name}: kernel {tuple(kernel)} with dilation {dilation} spans {extent}, larger "
                         f"than the padded input {padded} (input {xa.shape}, weight {wa.shape})")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, extent, stride))
    geo = _Geometry(tuple(kernel), stride, (top, left), dilation, groups, (H, W), out)
    if relu_slope is None:
        return Conv2dFunction.apply(x, weight, bias, geo=geo)
    relu_slope = number(name, "relu_slope", relu_slope, 0.0)
    if autograd._tracer is not None:  # the ONNX tracer records the two ops ONNX has: Conv, Relu
        y = Conv2dFunction.apply(x, weight, bias, geo=geo)
        return relu(y) if relu_slope == 0 else leaky_relu(y, relu_slope)
    return Conv2dFunction.apply(x, weight, bias, geo=geo, relu_slope=relu_slope)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution (the adjoint of conv2d in its input), as torch's conv_transpose2d.

    x (N, C, H, W); weight (C, O/groups, kh, kw); bias (O,) or None -> (N, O, OH, OW) with
    OH = (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1. stride, dilation: int or (h, w), default 1;
    padding: int or (h, w), default 0; output_padding (default 0) must be smaller than stride or
    dilation."""
    name = "conv_transpose2d"
    xa, wa, ba = _check_operands(name, x, weight, bias)
    stride = int_pair(name, "stride", stride, 1)
    dilation = int_pair(name, "dilation", dilation, 1)
    pad = int_pair(name, "padding", padding, 0)
    out_pad = int_pair(name, "output_padding", output_padding, 0)
    kernel = wa.shape[2:]
    groups = _check_groups(name, groups, xa, wa, wa.shape[0], "input channels")
    if xa.shape[1] != wa.shape[0]:
        raise ValueError(f"{name}: input {xa.shape} has {xa.shape[1]} channels but weight {wa.shape} "
                         f"expects {wa.shape[0]}")
    c_out = wa.shape[1] * groups
    _check_bias(name, ba, c_out, wa)
    for op, s, d in zip(out_pad, stride, dilation):
        if op >= max(s, d):
            raise ValueError(f"{name}: output_padding {out_pad} must be smaller than stride {stride} "
                             f"or dilation {dilation}")
    H, W = xa.shape[2:]
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                for i, s, p, d, k, op in zip((H, W), stride, pad, dilation, kernel, out_pad))
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"{name}: output size {out} is below 1 (input {xa.shape}, weight {wa.shape}, "
                         f"stride {stride}, padding {pad}, dilation {dilation})")
    geo = _Geometry(tuple(kernel), stride, pad, dilation, groups, out, (H, W))
    return ConvTranspose2dFunction.apply(x, weight, bias, geo=geo)
