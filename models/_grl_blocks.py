"""GRL's blocks (models/grl.py holds the network, its card and its detect rule): the mixed
attention block (window attention and anchored stripe attention on the two halves of one qkv
projection, then a projection), its anchor projections, the stage; the original's module names and
keys (ofsoundof/GRL-Image-Restoration's mixed_attn_block_efficient.py as spandrel 0.4.2 ships it).
The per-size constants (coordinate tables, indices, shift masks) are cached per size and shared by
every block."""
from __future__ import annotations

import functools
import math

import numpy as np

import framework as sg
import framework.functional as F
from framework import nn
from framework.functional.anchor_attention import (anchor_coords_table, anchor_position_index,
                                                   anchor_shift_mask, anchor_stripe_attention,
                                                   cosine_attention)
from framework.functional.attention import shift_mask

from .hat import CAB
from .swinir import Mlp, _resi_conv


def stripe_info(sizes, groups, size):
    """(stripe, shift) along each axis: a fixed stripe s shifts by s // 2; with g groups the
    stripe is the grid's side // g, shifted by side // 2g (0 for one group): the original's
    get_stripe_info with stripe_shift on."""
    stripe, shift = [], []
    for s, g, d in zip(sizes, groups, size):
        if g is None:
            stripe.append(s)
            shift.append(s // 2)
        else:
            stripe.append(d // g)
            shift.append(0 if g == 1 else d // (g * 2))
    return tuple(stripe), tuple(shift)


def _frozen(*arrays):
    for a in arrays:
        if a is not None:
            a.flags.writeable = False  # shared by every block through the caches below
    return arrays


@functools.lru_cache(maxsize=32)
def _window_constants(window, pretrained):
    """The window attention's coordinates table and index (SwinV2's: down factor 1)."""
    return _frozen(anchor_coords_table((window, window), 1, pretrained),
                   anchor_position_index((window, window)))


@functools.lru_cache(maxsize=32)
def _stripe_constants(size, stripe, shift, df, pretrained, shifted):
    """The stripe attention's table, (a2w, w2a) indices and (a2w, w2a) masks (None unshifted)."""
    table = anchor_coords_table(stripe, df, pretrained)
    index = (anchor_position_index(stripe, df, False), anchor_position_index(stripe, df, True))
    masks = ((anchor_shift_mask(size, stripe, shift, df, False),
              anchor_shift_mask(size, stripe, shift, df, True)) if shifted else (None, None))
    _frozen(table, *index, *masks)
    return table, index, masks


class AffineTransform(nn.Module):
    """A cosine attention's learnt terms: the per-head logit scale (log 10 at init) and the
    continuous position bias MLP (cpb_mlp: 2 -> 512 -> heads, ReLU)."""

    def __init__(self, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.logit_scale = nn.Parameter(np.log(10 * np.ones((num_heads, 1, 1), np.float32)))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512), nn.ReLU(), nn.Linear(512, num_heads, bias=False))

    def bias(self, table, index, dtype):
        """(heads, N, M): 16 sigmoid of the MLP on the coordinates table, gathered by `index` (N, M)."""
        n, m = index.shape
        rows = F.reshape(self.cpb_mlp(sg.tensor(table.astype(dtype, copy=False))), (-1, self.num_heads))
        rows = F.reshape(F.getitem(rows, index.reshape(-1)), (n, m, self.num_heads))
        return F.sigmoid(F.permute(rows, (2, 0, 1))) * 16.0


def _split3(t):
    c = t.shape[-1] // 3
    return t[..., :c], t[..., c:2 * c], t[..., 2 * c:]


class WindowAttention(nn.Module):
    """Cosine attention in square windows of qkv (B, H*W, 3C') -> (B, H*W, C'), the windows
    shifted by half a window when `shift`."""

    def __init__(self, window_size: int, num_heads: int, shift: bool, pretrained_window_size):
        super().__init__()
        self.window_size, self.num_heads = window_size, num_heads
        self.shift_size = window_size // 2 if shift else 0
        self.pretrained = tuple(pretrained_window_size)
        self.attn_transform = AffineTransform(num_heads)

    def forward(self, qkv, x_size):
        (h, w), ws, s = x_size, self.window_size, self.shift_size
        b, _, c3 = qkv.shape
        t = F.reshape(qkv, (b, h, w, c3))
        if s:
            t = F.roll(t, (-s, -s), (1, 2))
        q, k, v = _split3(F.window_partition(t, ws))
        bias = self.attn_transform.bias(*_window_constants(ws, self.pretrained), qkv.dtype)
        mask = shift_mask(h, w, ws, s, qkv.dtype) if s else None
        y = cosine_attention(q, k, v, self.num_heads, self.attn_transform.logit_scale, bias, mask)
        y = F.window_reverse(y, ws, h, w)
        if s:
            y = F.roll(y, (s, s), (1, 2))
        return F.reshape(y, (b, h * w, c3 // 3))


class AnchorStripeAttention(nn.Module):
    """Anchored stripe attention of qkv (B, H*W, 3C') with anchors (B, H/df, W/df, C') ->
    (B, H*W, C'): each stripe's tokens through its anchor window, in two stages
    (framework.functional.anchor_attention)."""

    def __init__(self, stripe_size, stripe_groups, stripe_shift: bool, num_heads: int, df: int,
                 pretrained_stripe_size):
        super().__init__()
        self.stripe_size, self.stripe_groups = tuple(stripe_size), tuple(stripe_groups)
        self.stripe_shift, self.num_heads, self.df = stripe_shift, num_heads, df
        self.pretrained = tuple(pretrained_stripe_size)
        self.attn_transform1 = AffineTransform(num_heads)
        self.attn_transform2 = AffineTransform(num_heads)

    def forward(self, qkv, anchor, x_size):
        (h, w), df = x_size, self.df
        b, _, c3 = qkv.shape
        stripe, shift = stripe_info(self.stripe_size, self.stripe_groups, x_size)
        for n, s in zip(x_size, stripe):
            if s < df or s % df or n % s:
                raise ValueError(f"GRL: a {h}x{w} token grid cannot hold stripes of {stripe[0]}x"
                                 f"{stripe[1]} with anchors at 1/{df} (stripe_size, stripe_groups "
                                 f"and anchor_window_down_factor must tile the padded input)")
        table, (i_a2w, i_w2a), masks = _stripe_constants(
            (h, w), stripe, shift, df, self.pretrained, self.stripe_shift)
        astripe, ashift = [s // df for s in stripe], [s // df for s in shift]
        t = F.reshape(qkv, (b, h, w, c3))
        if self.stripe_shift:
            t = F.roll(t, (-shift[0], -shift[1]), (1, 2))
            anchor = F.roll(anchor, (-ashift[0], -ashift[1]), (1, 2))
        q, k, v = _split3(F.window_partition(t, stripe))
        a = F.window_partition(anchor, astripe)
        dtype = qkv.dtype
        masks = tuple(None if m is None else m.astype(dtype, copy=False) for m in masks)
        biases = (self.attn_transform1.bias(table, i_a2w, dtype),
                  self.attn_transform2.bias(table, i_w2a, dtype))
        y = anchor_stripe_attention(q, k, v, a, self.num_heads, (self.attn_transform1.logit_scale,
                                    self.attn_transform2.logit_scale), biases, masks)
        y = F.window_reverse(y, stripe, h, w)
        if self.stripe_shift:
            y = F.roll(y, shift, (1, 2))
        return F.reshape(y, (b, h * w, c3 // 3))


class SeparableConv(nn.Sequential):
    """A depthwise k x k conv (stride, padding k // 2), then a 1x1 conv to out_channels."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, bias: bool):
        super().__init__(nn.Conv2d(cin, cin, k, stride, k // 2, groups=cin, bias=bias),
                         nn.Conv2d(cin, cout, 1, bias=bias))


def tokens_to_image(x, x_size):
    """Tokens (B, H*W, C) -> (B, C, H, W)."""
    return F.reshape(F.transpose(x, 1, 2), (x.shape[0], x.shape[2], *x_size))


def image_to_tokens(x):
    """(B, C, H, W) -> tokens (B, H*W, C)."""
    return F.transpose(F.flatten(x, 2), 1, 2)


class QKVProjection(nn.Module):
    """Tokens (B, L, C) -> (B, L, 3C): a linear, or a separable conv on the image."""

    def __init__(self, dim: int, bias: bool, proj_type: str):
        super().__init__()
        self.proj_type = proj_type
        self.body = (nn.Linear(dim, 3 * dim, bias=bias) if proj_type == "linear"
                     else SeparableConv(dim, 3 * dim, 3, 1, bias))

    def forward(self, x, x_size):
        if self.proj_type == "linear":
            return self.body(x)
        return image_to_tokens(self.body(tokens_to_image(x, x_size)))


class PatchMerging(nn.Module):
    """Tokens (B, H*W, C) -> (B, H/2*W/2, out): each 2x2 patch's four tokens concatenated (top-left,
    bottom-left, top-right, bottom-right), then a linear without bias."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.reduction = nn.Linear(4 * in_dim, out_dim, bias=False)

    def forward(self, x, x_size):
        (h, w), b, c = x_size, x.shape[0], x.shape[2]
        if h % 2 or w % 2:
            raise ValueError(f"GRL: patch merging needs an even token grid, got {h}x{w}")
        t = F.permute(F.reshape(x, (b, h // 2, 2, w // 2, 2, c)), (0, 1, 3, 4, 2, 5))
        return self.reduction(F.reshape(t, (b, (h // 2) * (w // 2), 4 * c)))


class AnchorLinear(nn.Module):
    """Pooling (avg or max, df x df) then a linear C -> C/2: tokens -> anchors (B, H/df, W/df, C/2)."""

    def __init__(self, cin: int, cout: int, df: int, mode: str):
        super().__init__()
        self.df = df
        self.pooling = nn.MaxPool2d(df, df) if mode == "maxpool" else nn.AvgPool2d(df, df)
        self.reduction = nn.Linear(cin, cout)

    def forward(self, x, x_size):
        y = self.reduction(image_to_tokens(self.pooling(tokens_to_image(x, x_size))))
        return F.reshape(y, (x.shape[0], x_size[0] // self.df, x_size[1] // self.df, y.shape[-1]))


class AnchorProjection(nn.Module):
    """Tokens (B, H*W, C) -> anchors (B, H/df, W/df, C/2): one operator (one_stage) or log2(df)
    x2 steps (conv2d / separable conv 3x3 stride 2, patch merging)."""

    def __init__(self, dim: int, proj_type: str, one_stage: bool, df: int):
        super().__init__()
        self.proj_type = proj_type
        half = dim // 2
        self.body = nn.ModuleList()
        if one_stage:
            if proj_type == "patchmerging":
                self.body.append(PatchMerging(dim, half))
            elif proj_type == "conv2d":
                self.body.append(nn.Conv2d(dim, half, df + 1, df, (df + 1) // 2))
            elif proj_type == "separable_conv":
                self.body.append(SeparableConv(dim, half, df + 1, df, True))
            else:
                self.body.append(AnchorLinear(dim, half, df, proj_type))
        else:
            for i in range(int(math.log2(df))):
                cin = dim if i == 0 else half
                if proj_type == "patchmerging":
                    self.body.append(PatchMerging(cin, half))
                elif proj_type == "conv2d":
                    self.body.append(nn.Conv2d(cin, half, 3, 2, 1))
                else:
                    self.body.append(SeparableConv(cin, half, 3, 2, True))

    def forward(self, x, x_size):
        if "conv" in self.proj_type:
            y = tokens_to_image(x, x_size)
            for m in self.body:
                y = m(y)
            return F.permute(y, (0, 2, 3, 1))
        if "pool" in self.proj_type:
            return self.body[0](x, x_size)
        size = x_size
        for m in self.body:
            x = m(x, size)
            size = (size[0] // 2, size[1] // 2)
        return F.reshape(x, (x.shape[0], size[0], size[1], x.shape[-1]))


class MixedAttention(nn.Module):
    """qkv once, window attention on the first half of its channels, anchored stripe attention on
    the second, concatenated and projected: tokens (B, L, C) -> (B, L, C)."""

    def __init__(self, dim, heads_w, heads_s, window_size, window_shift, stripe_size, stripe_groups,
                 stripe_shift, qkv_bias, qkv_proj_type, anchor_proj_type, anchor_one_stage, df,
                 proj_drop, pretrained_window_size, pretrained_stripe_size):
        super().__init__()
        self.qkv = QKVProjection(dim, qkv_bias, qkv_proj_type)
        self.anchor = AnchorProjection(dim, anchor_proj_type, anchor_one_stage, df)
        self.window_attn = WindowAttention(window_size, heads_w, window_shift, pretrained_window_size)
        self.stripe_attn = AnchorStripeAttention(stripe_size, stripe_groups, stripe_shift, heads_s, df,
                                                 pretrained_stripe_size)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, x_size):
        c = x.shape[-1]
        qkv = self.qkv(x, x_size)
        half = 3 * c // 2
        y = F.cat([self.window_attn(qkv[..., :half], x_size),
                   self.stripe_attn(qkv[..., half:], self.anchor(x, x_size), x_size)], -1)
        return self.proj_drop(self.proj(y))


class MixedAttentionBlock(nn.Module):
    """The original's EfficientMixAttnTransformerBlock on tokens (B, H*W, C): block i shifts its
    windows when even, takes horizontal stripes when even (vertical: stripe_size and
    stripe_groups reversed) and shifts them when i % 4 is 2 or 3 (with stripe_shift)."""

    def __init__(self, dim, i, heads_w, heads_s, window_size, stripe_size, stripe_groups,
                 stripe_shift, mlp_ratio, qkv_bias, qkv_proj_type, anchor_proj_type,
                 anchor_one_stage, df, drop, drop_path, local_connection, res_scale,
                 pretrained_window_size, pretrained_stripe_size):
        super().__init__()
        vertical = i % 2 == 1
        self.res_scale = res_scale
        self.attn = MixedAttention(
            dim, heads_w, heads_s, window_size, i % 2 == 0,
            tuple(stripe_size)[::-1] if vertical else tuple(stripe_size),
            tuple(stripe_groups)[::-1] if vertical else tuple(stripe_groups),
            stripe_shift and i % 4 in (2, 3), qkv_bias, qkv_proj_type, anchor_proj_type,
            anchor_one_stage, df, drop, pretrained_window_size, pretrained_stripe_size)
        self.norm1 = nn.LayerNorm(dim)
        if local_connection:
            self.conv = CAB(dim, 4, 18)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)
        self.norm2 = nn.LayerNorm(dim)

    def _scaled(self, y):
        return y if self.res_scale == 1 else y * self.res_scale

    def forward(self, x, x_size):
        y = x + self._scaled(self.drop_path(self.norm1(self.attn(x, x_size))))
        if "conv" in self._modules:
            y = y + image_to_tokens(self.conv(tokens_to_image(x, x_size)))
        return y + self._scaled(self.drop_path(self.norm2(self.mlp(y))))


class LinearConv(nn.Linear):
    """conv_type "linear": a linear over the channels of (B, C, H, W)."""

    def forward(self, x):
        return tokens_to_image(super().forward(image_to_tokens(x)), x.shape[2:])


def last_conv(dim: int, conv_type: str) -> nn.Module:
    """conv_type's conv on (B, dim, H, W): "1conv" 3x3, "3conv" (SwinIR's), "1conv1x1", "linear"."""
    if conv_type in ("1conv", "3conv"):
        return _resi_conv(dim, conv_type)
    if conv_type == "1conv1x1":
        return nn.Conv2d(dim, dim, 1)
    return LinearConv(dim, dim)


class TransformerStage(nn.Module):
    """`depth` mixed-attention blocks, then conv_type's conv on the image and a residual."""

    def __init__(self, dim, depth, drop_path, conv_type, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([MixedAttentionBlock(dim, i, drop_path=drop_path[i], **kw)
                                     for i in range(depth)])
        self.conv = last_conv(dim, conv_type)

    def forward(self, x, x_size):
        res = x
        for blk in self.blocks:
            res = blk(res, x_size)
        return image_to_tokens(self.conv(tokens_to_image(res, x_size))) + x
