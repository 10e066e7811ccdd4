"""Overlapping windows and the relative-position tables of the window-attention models that go
beyond SwinIR's square, non-overlapping windows (window_partition, shift_mask and SwinIR's
relative_position_index live in attention.py, beside the attention they feed).

- `overlap_windows(x, window_size, overlap_size)`: (B, H, W, C) -> (B nW, o^2, C), the o x o
  neighbourhood of every w x w window (o >= w), zero outside the image: the keys and values of HAT's
  overlapping cross-attention (its `nn.Unfold(o, stride=w, padding=(o - w) // 2)` on the qkv
  features). Windows in window_partition's order, tokens row-major. The backward gathers (each pixel
  sums the window slots that hold it): no scatter races, the same bits whatever the thread count.
- `overlap_position_index(w, o)`: (w^2, o^2) rows of HAT's OCA bias table, its
  relative_position_index_OCA buffer.
- `log_coords_table(wh, ww, pretrained)`: Swin2SR's (SwinV2's) (1, 2wh-1, 2ww-1, 2) log-spaced
  relative coordinates, its relative_coords_table buffer, the input of the continuous position
  bias MLP.

The ONNX converter (framework/onnx/ops/windows.py) is a Pad and a Gather: fixed-size graphs, as the
window partition's.
"""
from __future__ import annotations

import numpy as np

from .._check import float_array, int_arg
from .._jit import kernel, launch, prange
from ..autograd import Function
from .rows import SERIAL_ELEMS

__all__ = ["overlap_windows", "overlap_position_index", "log_coords_table",
           "OverlapWindowsFunction"]


@kernel(parallel=True)
def _overlap_gather(x, ws, ow, pad, out):
    """out[b nW + i nw + j, r ow + s, :] = x[b, i ws - pad + r, j ws - pad + s, :] (0 outside)."""
    B, H, W, C = x.shape
    nh, nw = H // ws, W // ws
    for t in prange(out.shape[0]):
        b, rest = t // (nh * nw), t % (nh * nw)
        y0, x0 = (rest // nw) * ws - pad, (rest % nw) * ws - pad
        win = out[t]
        for r in range(ow):
            y = y0 + r
            for s in range(ow):
                xx = x0 + s
                row = win[r * ow + s]
                if 0 <= y < H and 0 <= xx < W:
                    src = x[b, y, xx]
                    for c in range(C):
                        row[c] = src[c]
                else:
                    for c in range(C):
                        row[c] = 0


@kernel(parallel=True)
def _overlap_gather_grad(g, ws, ow, pad, gx):
    """gx[b, y, x, :] = sum over the windows (i, j) whose neighbourhood holds (y, x) of
    g[b nW + i nw + j, (y - i ws + pad) ow + (x - j ws + pad), :]; one task per image row."""
    B, H, W, C = gx.shape
    nh, nw = H // ws, W // ws
    for task in prange(B * H):
        b, y = task // H, task % H
        # windows i with i ws - pad <= y < i ws - pad + ow
        i_lo = max(0, -((ow - 1 - y - pad) // ws))
        i_hi = min(nh - 1, (y + pad) // ws)
        for xx in range(W):
            out = gx[b, y, xx]
            for c in range(C):
                out[c] = 0
            j_lo = max(0, -((ow - 1 - xx - pad) // ws))
            j_hi = min(nw - 1, (xx + pad) // ws)
            for i in range(i_lo, i_hi + 1):
                r = y - i * ws + pad
                for j in range(j_lo, j_hi + 1):
                    src = g[b * nh * nw + i * nw + j, r * ow + xx - j * ws + pad]
                    for c in range(C):
                        out[c] += src[c]


class OverlapWindowsFunction(Function):
    """(B, H, W, C) -> (B nW, o^2, C): every window's o x o neighbourhood, zero outside."""

    @staticmethod
    def forward(ctx, x, *, window, overlap):
        x = np.ascontiguousarray(x)
        b, h, w, c = x.shape
        pad = (overlap - window) // 2
        out = np.empty((b * (h // window) * (w // window), overlap * overlap, c), x.dtype)
        launch(_overlap_gather, out.size < SERIAL_ELEMS, x, window, overlap, pad, out)
        ctx.meta = (x.shape, window, overlap, pad)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx[p] = sum of g over the window slots that copied p
        shape, window, overlap, pad = ctx.meta
        gx = np.empty(shape, g.dtype)
        launch(_overlap_gather_grad, gx.size < SERIAL_ELEMS, np.ascontiguousarray(g), window,
               overlap, pad, gx)
        return gx


def overlap_windows(x, window_size: int, overlap_size: int):
    """(B, H, W, C) -> (B * H/w * W/w, o^2, C) for window w = window_size, o = overlap_size >= w:
    window (i, j) takes rows i w - p ... i w - p + o - 1 and the same columns, p = (o - w) // 2,
    zeros outside the image (HAT's `nn.Unfold(o, stride=w, padding=p)`; when o - w is odd the extra
    row and column fall at the bottom and right, which the Unfold cannot cover: it has one window
    too few there). H and W multiples of w."""
    owner = "overlap_windows"
    w = int_arg(owner, "window_size", window_size)
    o = int_arg(owner, "overlap_size", overlap_size)
    if o < w:
        raise ValueError(f"{owner}: overlap_size {o} is smaller than window_size {w}")
    shape = float_array(owner, "x", x).shape
    if len(shape) != 4 or shape[1] % w or shape[2] % w or 0 in shape:
        raise ValueError(f"{owner}: expected (B, H, W, C) with H and W multiples of {w} "
                         f"(non-empty), got {shape}")
    return OverlapWindowsFunction.apply(x, window=w, overlap=o)


def overlap_position_index(window: int, overlap: int) -> np.ndarray:
    """(w^2, o^2) int64, HAT's relative_position_index_OCA (calculate_rpi_oca), value for value: for
    query token p of a w x w window and key token q of its o x o neighbourhood, with
    dy = q_y - p_y + w - o + 1 (likewise dx), the row dy (w + o - 1) + dx of the (w + o - 1)^2-row
    OCA bias table. Values run from -(o - 2)(w + o) to w (w + o): the negative ones count from the
    table's end (torch's and numpy's indexing), which makes the map onto the rows one to one."""
    w, o = int(window), int(overlap)
    ys, xs = (a.ravel() for a in np.meshgrid(np.arange(w), np.arange(w), indexing="ij"))
    ye, xe = (a.ravel() for a in np.meshgrid(np.arange(o), np.arange(o), indexing="ij"))
    dy = ye[None, :] - ys[:, None] + w - o + 1
    dx = xe[None, :] - xs[:, None] + w - o + 1
    return (dy * (w + o - 1) + dx).astype(np.int64)


def log_coords_table(wh: int, ww: int, pretrained=(0, 0), dtype=np.float32) -> np.ndarray:
    """(1, 2wh - 1, 2ww - 1, 2): SwinV2's log-spaced relative coordinates (dy, dx) of a wh x ww
    window, each normalised by (window - 1) (or by pretrained - 1 when pretrained > 0), scaled by
    8, then sign(t) log2(|t| + 1) / log2(8). A window of one token gives 0 / 0 along that axis, as
    the original (NaN)."""
    dy = np.arange(-(wh - 1), wh, dtype=np.float32)
    dx = np.arange(-(ww - 1), ww, dtype=np.float32)
    table = np.stack(np.meshgrid(dy, dx, indexing="ij"), axis=-1)[None]
    ph, pw = pretrained
    with np.errstate(divide="ignore", invalid="ignore"):
        table[..., 0] /= np.float32((ph if ph > 0 else wh) - 1)
        table[..., 1] /= np.float32((pw if pw > 0 else ww) - 1)
        table *= np.float32(8)
        table = np.sign(table) * np.log2(np.abs(table) + np.float32(1)) / np.float32(np.log2(8))
    return table.astype(dtype)
