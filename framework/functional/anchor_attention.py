"""GRL's attention ops (Li et al., "Efficient and Explicit Modelling of Image Hierarchies for Image
Restoration", CVPR 2023; ofsoundof/GRL-Image-Restoration as spandrel 0.4.2 ships it), composed
from `attention` (fused, differentiable, exported to ONNX), so they need no kernel, backward or
converter of their own:

- `cosine_attention(q, k, v, heads, logit_scale, bias, mask)`: SwinV2's scaled cosine attention
  (Swin2SR's): per head softmax(exp(min(logit_scale, log 100)) cos(q, k) + bias + mask) v, q and k
  L2-normalised per head (GRL's AffineTransform around its Attention.attn).
- `anchor_stripe_attention(q, k, v, anchor, heads, ...)`: GRL's anchored stripe attention, in two
  stages through the anchors (a downsampled projection of the features, one anchor window per
  stripe): the anchors attend to the stripe's keys and values (anchor -> window, "a2w"), then the
  stripe's queries attend to the anchors, whose values are the first stage's output
  (window -> anchor, "w2a"). Each stage has its own logit scale, bias and mask. N stripe tokens
  and M anchors cost 2 N M, not N^2.
- The constants of a window of ws = (h, w) tokens and its anchor window ws // df (the original's
  get_relative_coords_table_all, get_relative_position_index_simple, calculate_mask_all, value
  for value): `anchor_coords_table` (the continuous position bias MLP's input),
  `anchor_position_index` (its row for each token pair) and `anchor_shift_mask` (the -100 / 0 mask
  of shifted stripes). With df = 1 they are SwinV2's square-window table and index (GRL's window
  attention uses them so).

Tokens (B, N, C), each head's channels side by side along C (as `attention`). The tables, indices
and masks are numpy constants of one input size (fixed-size ONNX graphs, as the window partition).
"""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from .attention import attention
from .elementwise import clamp, exp, sqrt
from .reduce import sum as _sum
from .shape import reshape

__all__ = ["cosine_attention", "anchor_stripe_attention", "anchor_coords_table",
           "anchor_position_index", "anchor_shift_mask"]

_MAX_LOGIT = math.log(1.0 / 0.01)


def _normalize_heads(x, heads: int):
    """(B, N, C) -> the same with each head's d = C / heads channels divided by their L2 norm
    (at least 1e-12: torch's F.normalize)."""
    b, n, c = x.shape
    t = reshape(x, (b, n, heads, c // heads))
    t = t / clamp(sqrt(_sum(t * t, axis=-1, keepdims=True)), min=1e-12)
    return reshape(t, (b, n, c))


def _check(owner, heads, logit_scale, *arrays):
    if not isinstance(heads, int) or heads < 1:
        raise ValueError(f"{owner}: heads must be a positive int, got {heads!r}")
    for name, a in arrays:
        if len(a.shape) != 3 or a.shape[2] % heads:
            raise ValueError(f"{owner}: {name} {tuple(a.shape)} is not (B, N, C) with C a multiple "
                             f"of heads {heads}")
    if not isinstance(logit_scale, Tensor) or math.prod(logit_scale.shape) != heads:
        raise ValueError(f"{owner}: logit_scale must be a Tensor of {heads} values (one per head), "
                         f"got {getattr(logit_scale, 'shape', logit_scale)!r}")


def cosine_attention(q, k, v, heads: int, logit_scale, bias=None, mask=None, *,
                     normalized: tuple = (False, False)):
    """Scaled cosine attention: q (B, N, C), k (B, M, C), v (B, M, Cv) -> (B, N, Cv), per head
    softmax(exp(min(logit_scale, log 100)) q_h k_h^T / (|q_h| |k_h|) + bias[h] + mask[b % nW]) v_h.

    logit_scale: a Tensor of `heads` values (any shape: the original's (heads, 1, 1)).
    bias: (heads, N, M) Tensor or None; mask: (nW, N, M) numpy array or None.
    normalized: (q already normalised, k already normalised): skips that normalisation (an
        anchor used as queries in one stage and keys in the next is normalised once)."""
    _check("cosine_attention", heads, logit_scale, ("q", q), ("k", k), ("v", v))
    q = q if normalized[0] else _normalize_heads(q, heads)
    k = k if normalized[1] else _normalize_heads(k, heads)
    scale = exp(clamp(reshape(logit_scale, (heads,)), max=_MAX_LOGIT))
    return attention(q, k, v, heads, scale, bias, mask)


def anchor_stripe_attention(q, k, v, anchor, heads: int, logit_scales, biases, masks=(None, None)):
    """GRL's anchored stripe attention: q, k, v (B, N, C) of a stripe's N tokens, anchor (B, M, C)
    its anchor window's M tokens -> (B, N, C):

        y = cos_attn(anchor, k, v; logit_scales[0], biases[0], masks[0])     (B, M, C), a2w
        out = cos_attn(q, anchor, y; logit_scales[1], biases[1], masks[1])   (B, N, C), w2a

    biases: ((heads, M, N), (heads, N, M)) Tensors; masks: ((nW, M, N), (nW, N, M)) numpy arrays
    or None each."""
    owner = "anchor_stripe_attention"
    _check(owner, heads, logit_scales[0], ("q", q), ("k", k), ("v", v), ("anchor", anchor))
    if anchor.shape[0] != q.shape[0] or anchor.shape[2] != q.shape[2]:
        raise ValueError(f"{owner}: anchor {tuple(anchor.shape)} does not pair with q "
                         f"{tuple(q.shape)} (one anchor window of C channels per stripe)")
    anchor = _normalize_heads(anchor, heads)
    y = cosine_attention(anchor, k, v, heads, logit_scales[0], biases[0], masks[0],
                         normalized=(True, False))
    return cosine_attention(q, anchor, y, heads, logit_scales[1], biases[1], masks[1],
                            normalized=(False, True))


def _pair(owner, name, value):
    try:
        h, w = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: {name} must be an (h, w) pair of ints, got {value!r}") from None
    if h < 1 or w < 1:
        raise ValueError(f"{owner}: {name} must be positive, got {value!r}")
    return h, w


def anchor_coords_table(window, down_factor: int = 1, pretrained=(0, 0)) -> np.ndarray:
    """(1, wh + ah - 1, ww + aw - 1, 2) float32, a = window // down_factor: the log-spaced relative
    coordinates of a window's tokens to its anchors, from -(a - 1) - (w - a) // 2 to
    w - 1 - (w - a) // 2 along each axis, divided by the larger end (or by a pretrained window's
    when pretrained > 0), times 8, then sign(t) log2(|t| + 1) / log2(8). down_factor 1: SwinV2's
    square-window table. A 1-token axis divides 0 by 0, as the original (NaN)."""
    owner = "anchor_coords_table"
    ws = _pair(owner, "window", window)
    aws = [w // down_factor for w in ws]
    pws = [int(p) for p in pretrained]
    ends = [w1 - 1 - (w1 - w2) // 2 for w1, w2 in zip(ws, aws)]
    starts = [-(w2 - 1) - (w1 - w2) // 2 for w1, w2 in zip(ws, aws)]
    pends = [p - 1 - (p - p // down_factor) // 2 for p in pws]
    axes = [np.arange(s, e + 1, dtype=np.float32) for s, e in zip(starts, ends)]
    table = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)[None]
    div = pends if pends[0] > 0 else ends
    with np.errstate(divide="ignore", invalid="ignore"):
        table[..., 0] /= np.float32(div[0])
        table[..., 1] /= np.float32(div[1])
        table *= np.float32(8)
        table = np.sign(table) * np.log2(np.abs(table) + np.float32(1)) / np.float32(np.log2(8))
    return table.astype(np.float32)


def anchor_position_index(window, down_factor: int = 1, window_to_anchor: bool = True) -> np.ndarray:
    """int64 rows of anchor_coords_table: (N, M) for window_to_anchor (a window token p, an anchor
    q: (p_y - q_y + ah - 1) (aw + ww - 1) + p_x - q_x + aw - 1), else (M, N) (anchor q, token p:
    (q_y - p_y + wh - 1) (aw + ww - 1) + q_x - p_x + ww - 1); N = wh ww, M = ah aw, a = w // df,
    the anchors' coordinates on their own grid (the original's)."""
    owner = "anchor_position_index"
    ws = _pair(owner, "window", window)
    aws = [w // down_factor for w in ws]
    grid = [a.ravel() for a in np.meshgrid(np.arange(ws[0]), np.arange(ws[1]), indexing="ij")]
    agrid = [a.ravel() for a in np.meshgrid(np.arange(aws[0]), np.arange(aws[1]), indexing="ij")]
    width = aws[1] + ws[1] - 1
    if window_to_anchor:
        first, second, offset = grid, agrid, [a - 1 for a in aws]
    else:
        first, second, offset = agrid, grid, [w - 1 for w in ws]
    dy = first[0][:, None] - second[0][None, :] + offset[0]
    dx = first[1][:, None] - second[1][None, :] + offset[1]
    return (dy * width + dx).astype(np.int64)


def _regions(size, window, shift) -> np.ndarray:
    """(nW, wh ww): the region of every token of every window after the cyclic shift (the
    original's _fill_window: the slices as Python reads them, a shift of 0 included)."""
    img = np.zeros(size)
    cnt = 0
    for hs in (slice(0, -window[0]), slice(-window[0], -shift[0]), slice(-shift[0], None)):
        for wsl in (slice(0, -window[1]), slice(-window[1], -shift[1]), slice(-shift[1], None)):
            img[hs, wsl] = cnt
            cnt += 1
    h, w = size
    return img.reshape(h // window[0], window[0], w // window[1], window[1]).transpose(
        0, 2, 1, 3).reshape(-1, window[0] * window[1])


def anchor_shift_mask(size, window, shift, down_factor: int = 1, window_to_anchor: bool = True,
                      dtype=np.float32) -> np.ndarray:
    """(nW, N, M) for window_to_anchor, else (nW, M, N): -100 where a window token and an anchor
    come from different regions of the cyclically shifted (h, w) grid (the anchors' grid, window
    and shift divided by down_factor), else 0. Every side a multiple of its window."""
    owner = "anchor_shift_mask"
    size, window = _pair(owner, "size", size), _pair(owner, "window", window)
    shift = tuple(int(s) for s in shift)
    df = int(down_factor)
    aws = [w // df for w in window]
    if min(aws) < 1 or size[0] % window[0] or size[1] % window[1] \
            or (size[0] // df) % aws[0] or (size[1] // df) % aws[1]:
        raise ValueError(f"{owner}: the grid {size} is not made of {window} windows with "
                         f"{tuple(aws)} anchor windows (down factor {df})")
    tokens = _regions(size, window, shift)
    anchors = _regions([s // df for s in size], aws, [s // df for s in shift])
    if window_to_anchor:
        diff = tokens[:, :, None] - anchors[:, None, :]
    else:
        diff = anchors[:, :, None] - tokens[:, None, :]
    return np.where(diff != 0, -100.0, 0.0).astype(dtype)
