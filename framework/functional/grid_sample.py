"""grid_sample: torch.nn.functional.grid_sample's bilinear mode, differentiable in the input and in
the grid, with its three padding modes and both align_corners conventions (RealPLKSR's DySample
upsampler samples its features at learnt offsets with it).

For each output position the grid holds (x, y) in [-1, 1] (-1: the left/top edge, 1: the
right/bottom). ATen's rules, in its order of operations (so float32 rounds as torch does):

    unnormalise   align_corners: ix = (x + 1) / 2 (W - 1);  else: ix = ((x + 1) W - 1) / 2
    padding       zeros: corners outside the input read 0; border: ix clipped to [0, W - 1];
                  reflection: ix reflected about the edges (align_corners: 0 and W - 1, else -0.5
                  and W - 0.5), then clipped
    bilinear      y = sum of the four neighbours (floor(ix), floor(iy)) .. (+1, +1) in bounds, each
                  weighted by the area of the opposite rectangle

The gradient in the grid is the derivative of those weights times the neighbours' values, times the
unnormalisation's scale and the padding rule's derivative (0 where a coordinate is clipped, the
border itself included; -1 through a reflection), as ATen's grid_sampler_2d_backward. The input's
gradient scatters each output's gradient back to its four neighbours: one sample owns its slice of
it, so the samples run in parallel and each adds in a fixed order.
"""
from __future__ import annotations

import numpy as np

from .._check import choice, flag, float_array
from .._jit import kernel, prange
from ..autograd import Function
from .rows import like

__all__ = ["grid_sample"]

PADDING_MODES = ("zeros", "border", "reflection")
_PADDING = {m: i for i, m in enumerate(PADDING_MODES)}


@kernel
def _reflect(c, twice_low, twice_high):
    """(reflected coordinate, d reflected / d c) about [twice_low / 2, twice_high / 2] (floats of
    c's type), as ATen's reflect_coordinates_set_grad."""
    zero = c * 0
    if twice_low == twice_high:
        return zero, zero
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = c - lo
    sign = zero + 1
    if c < 0:
        sign, c = -sign, -c
    extra = np.fmod(c, span)
    flips = np.floor(c / span)
    if np.fmod(flips, 2) == 0:
        return extra + lo, sign
    return span - extra + lo, -sign


@kernel
def _source(coord, size, align, padding):
    """(the source coordinate of a normalised grid value, its derivative) in coord's float type,
    as ATen's grid_sampler_compute_source_index_set_grad."""
    one = like(1.0, coord)
    two = one + one
    n = like(size, coord)
    if align:
        c, d = (coord + one) / two * (n - one), (n - one) / two
    else:
        c, d = ((coord + one) * n - one) / two, n / two
    if padding == 2:  # reflection: about the edges, then clipped below
        if align:
            c, r = _reflect(c, c * 0, two * (n - one))
        else:
            c, r = _reflect(c, -one, two * n - one)
        d = d * r
    if padding >= 1:  # border (and reflection's clip): the border itself counts as clipped
        if c <= 0:
            return c * 0, d * 0
        if c >= n - one:
            return n - one, d * 0
    return c, d


@kernel
def _corners(ix, iy):
    """The north-west neighbour (x0, y0) as ints, the fractions (fx, fy) and their complements
    (hx, hy) = (x0 + 1 - ix, y0 + 1 - iy), as ATen forms them; weights nw = hx hy, ne = fx hy,
    sw = hx fy, se = fx fy."""
    x0, y0 = np.floor(ix), np.floor(iy)
    one = ix * 0 + 1
    return int(x0), int(y0), ix - x0, iy - y0, (x0 + one) - ix, (y0 + one) - iy


@kernel(parallel=True)
def _forward_kernel(x, grid, y, align, padding):
    """y[n, c, i, j] = bilinear sample of x[n, c] at grid[n, i, j] (module docstring)."""
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    for t in prange(N * Ho):
        n, i = t // Ho, t % Ho
        for j in range(Wo):
            ix, _ = _source(grid[n, i, j, 0], W, align, padding)
            iy, _ = _source(grid[n, i, j, 1], H, align, padding)
            x0, y0, fx, fy, hx, hy = _corners(ix, iy)
            nw, ne, sw, se = hx * hy, fx * hy, hx * fy, fx * fy
            in_x0, in_x1 = 0 <= x0 < W, 0 <= x0 + 1 < W
            in_y0, in_y1 = 0 <= y0 < H, 0 <= y0 + 1 < H
            for c in range(C):
                acc = ix * 0
                if in_y0 and in_x0:
                    acc += x[n, c, y0, x0] * nw
                if in_y0 and in_x1:
                    acc += x[n, c, y0, x0 + 1] * ne
                if in_y1 and in_x0:
                    acc += x[n, c, y0 + 1, x0] * sw
                if in_y1 and in_x1:
                    acc += x[n, c, y0 + 1, x0 + 1] * se
                y[n, c, i, j] = acc


@kernel(parallel=True)
def _backward_kernel(g, x, grid, gx, ggrid, need_x, align, padding):
    """gx[n] += each output gradient times its neighbours' weights; ggrid[n, i, j] = the gradient
    in the grid. One sample per task: gx[n] is written by that task alone."""
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    for n in prange(N):
        for i in range(Ho):
            for j in range(Wo):
                ix, mx = _source(grid[n, i, j, 0], W, align, padding)
                iy, my = _source(grid[n, i, j, 1], H, align, padding)
                x0, y0, fx, fy, hx, hy = _corners(ix, iy)
                nw, ne, sw, se = hx * hy, fx * hy, hx * fy, fx * fy
                in_x0, in_x1 = 0 <= x0 < W, 0 <= x0 + 1 < W
                in_y0, in_y1 = 0 <= y0 < H, 0 <= y0 + 1 < H
                gix, giy = ix * 0, ix * 0
                for c in range(C):
                    go = g[n, c, i, j]
                    if in_y0 and in_x0:
                        v = x[n, c, y0, x0]
                        gix -= v * hy * go
                        giy -= v * hx * go
                        if need_x:
                            gx[n, c, y0, x0] += nw * go
                    if in_y0 and in_x1:
                        v = x[n, c, y0, x0 + 1]
                        gix += v * hy * go
                        giy -= v * fx * go
                        if need_x:
                            gx[n, c, y0, x0 + 1] += ne * go
                    if in_y1 and in_x0:
                        v = x[n, c, y0 + 1, x0]
                        gix -= v * fy * go
                        giy += v * hx * go
                        if need_x:
                            gx[n, c, y0 + 1, x0] += sw * go
                    if in_y1 and in_x1:
                        v = x[n, c, y0 + 1, x0 + 1]
                        gix += v * fy * go
                        giy += v * fx * go
                        if need_x:
                            gx[n, c, y0 + 1, x0 + 1] += se * go
                ggrid[n, i, j, 0] = mx * gix
                ggrid[n, i, j, 1] = my * giy


class GridSampleFunction(Function):
    @staticmethod
    def forward(ctx, x, grid, *, align_corners, padding):
        x, grid = np.ascontiguousarray(x), np.ascontiguousarray(grid)
        N, C = x.shape[:2]
        y = np.empty((N, C, grid.shape[1], grid.shape[2]), x.dtype)
        _forward_kernel(x, grid, y, align_corners, padding)
        ctx.save_for_backward(x, grid)
        ctx.options = (align_corners, padding)
        return y

    @staticmethod
    def backward(ctx, g):  # dL/dx = the bilinear weights' scatter of g; dL/dgrid = d weights / d grid . x g
        x, grid = ctx.saved_tensors
        need_x, need_grid = ctx.needs_input_grad
        gx = np.zeros(x.shape if need_x else (x.shape[0], 0, 0, 0), x.dtype)
        ggrid = np.empty(grid.shape, grid.dtype)
        _backward_kernel(np.ascontiguousarray(g, x.dtype), x, grid, gx, ggrid, need_x, *ctx.options)
        return (gx if need_x else None), (ggrid if need_grid else None)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """torch.nn.functional.grid_sample, bilinear: input (N, C, H, W), grid (N, Ho, Wo, 2) of
    normalised (x, y) -> (N, C, Ho, Wo). padding_mode "zeros" (default), "border" or "reflection";
    align_corners: whether -1 and 1 are the centres of the corner pixels (True) or their outer
    edges (False; None means False, torch's default). Differentiable in input and grid."""
    name = "grid_sample"
    xa, ga = float_array(name, "input", input), float_array(name, "grid", grid)
    if xa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got shape {xa.shape}")
    if ga.ndim != 4 or ga.shape[3] != 2 or ga.shape[0] != xa.shape[0]:
        raise ValueError(f"{name}: grid must be (N, Ho, Wo, 2) with the input's N = {xa.shape[0]}, "
                         f"got shape {ga.shape}")
    if ga.dtype != xa.dtype:
        raise TypeError(f"{name}: grid dtype {ga.dtype} differs from input dtype {xa.dtype}")
    if xa.shape[2] < 1 or xa.shape[3] < 1:
        raise ValueError(f"{name}: input of shape {xa.shape} has no pixel to sample")
    choice(name, "mode", mode, ("bilinear",))
    padding = _PADDING[choice(name, "padding_mode", padding_mode, PADDING_MODES)]
    align = False if align_corners is None else flag(name, "align_corners", align_corners)
    return GridSampleFunction.apply(input, grid, align_corners=align, padding=padding)
