"""LDA-AQU ("learnable deformable attention for adaptive query upsampling"), the `lda` kind of FDAT's
UniUpsampleV3, as spandrel 0.4.2 reads it (its defaults: reduction 4, 1 head, 2 offset groups,
3x3 sampling (k_u), 3x3 offset conv (k_e), offsets up to 11 pixels, a learned bias on the keys).

On (B, C, H, W) -> (B, C, sH, sW), hidden = C / 4, per offset group g of 2:

    n = LayerNorm(x) (channels, eps 1e-6); q = proj_q(n), k = proj_k(n)     (1x1, no bias)
    q = bilinear(q, (sH, sW), align_corners)                                the queries at HR
    o = tanh(conv_offset(q of group g)) 11 + base (the 3x3 grid's (dy, dx))   conv_offset:
        depthwise 3x3 (no bias), LayerNorm, SiLU, 3x3 conv to 2 * 9 offsets
    per HR pixel (i, j) and tap t: the point (i + o_y, j + o_x) in HR units, normalised by
        (sH - 1, sW - 1) onto the LR map: k and x (the values, unnormalised) of group g sampled
        there (bilinear, zeros outside, align_corners)
    out = sum_t softmax_t(hidden^-0.5 q . (k_t + bias_t)) v_t                (B, C, sH, sW)

All of it composes differentiable ops (interpolate, grid_sample, tanh, softmax, the norms): its
gradients are theirs. The sampling grid is built for one size: an ONNX graph of it is fixed-size.
"""
from __future__ import annotations

import numpy as np

import framework.functional as F
from framework import nn
from framework.nn import init

_REDUCTION, _GROUPS, _KU, _KE, _RANGE = 4, 2, 3, 3, 11.0


def _base_offset() -> np.ndarray:
    """(1, 2 k_u^2, 1, 1): the 3x3 grid's (dy, dx) per tap, taps row-major (the original's)."""
    base = np.arange(-(_KU // 2), _KU // 2 + 1, dtype=np.float32)
    pairs = np.stack([np.repeat(base, _KU), np.tile(base, _KU)], axis=1)
    return pairs.reshape(1, -1, 1, 1)


class LDA_AQU(nn.Module):  # noqa: N801 (the original's name)
    """LDA-AQU (module docstring) at an integer `scale_factor`; in_channels a multiple of 8."""

    def __init__(self, in_channels: int, scale_factor: int):
        super().__init__()
        if in_channels % (_REDUCTION * _GROUPS):
            raise ValueError(f"LDA_AQU: in_channels must be a multiple of {_REDUCTION * _GROUPS} "
                             f"(a quarter of them in {_GROUPS} offset groups), got {in_channels}")
        self.scale_factor = scale_factor
        self.hidden = hidden = in_channels // _REDUCTION
        self.scale = hidden ** -0.5
        gc = hidden // _GROUPS
        self.relative_position_bias_table = nn.Parameter(np.zeros((1, 1, 1, _KU ** 2, hidden), np.float32))
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.proj_q = nn.Conv2d(in_channels, hidden, 1, bias=False)
        self.proj_k = nn.Conv2d(in_channels, hidden, 1, bias=False)
        self.conv_offset = nn.Sequential(
            nn.Conv2d(gc, gc, 3, padding=1, groups=gc, bias=False), nn.LayerNorm2d(gc), nn.SiLU(),
            nn.Conv2d(gc, 2 * _KU ** 2, _KE, padding=_KE // 2))
        self.layer_norm = nn.LayerNorm2d(in_channels)

    def _grid(self, offset, oh: int, ow: int):
        """(b, 2 k^2, oh, ow) offsets -> the grid (b, k oh, k ow, 2) of (x, y) in [-1, 1] (align
        corners) of each tap's point: row t_y oh + i, column t_x ow + j."""
        b, k = offset.shape[0], _KU
        o = F.permute(F.reshape(offset, (b, k, k, 2, oh, ow)), (0, 1, 4, 2, 5, 3))  # b kh h kw w d
        index = np.stack(np.meshgrid(np.arange(oh), np.arange(ow), indexing="ij"), -1)
        index = index.reshape(1, 1, oh, 1, ow, 2).astype(offset.dtype)
        norm = np.array([2.0 / (oh - 1), 2.0 / (ow - 1)], offset.dtype)
        yx = F.reshape(o + index, (b, k * oh, k * ow, 2)) * norm - 1.0
        return F.flip(yx, (-1,))  # (x, y), grid_sample's order

    def _taps(self, t, grid, oh: int, ow: int):
        """t (b, c, H, W) sampled at the grid -> (b, k^2, c, oh, ow)."""
        s = F.grid_sample(t, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
        b, c = s.shape[:2]
        s = F.permute(F.reshape(s, (b, c, _KU, oh, _KU, ow)), (0, 2, 4, 1, 3, 5))
        return F.reshape(s, (b, _KU * _KU, c, oh, ow))

    def forward(self, x):
        b, c, h, w = x.shape
        oh, ow = h * self.scale_factor, w * self.scale_factor
        n = self.layer_norm(x)
        q = F.interpolate(self.proj_q(n), size=(oh, ow), mode="bilinear", align_corners=True)
        k = self.proj_k(n)
        g, hd = _GROUPS, self.hidden
        pred = self.conv_offset(F.reshape(q, (b * g, hd // g, oh, ow)))
        grid = self._grid(F.tanh(pred) * _RANGE + _base_offset().astype(x.dtype), oh, ow)
        taps = _KU * _KU
        kk = self._taps(F.reshape(k, (b * g, hd // g, h, w)), grid, oh, ow)
        vv = self._taps(F.reshape(x, (b * g, c // g, h, w)), grid, oh, ow)

        def per_pixel(t, ch):  # (b g, taps, ch, oh, ow) -> (b, oh ow, taps, g ch)
            t = F.permute(F.reshape(t, (b, g, taps, ch, oh * ow)), (0, 4, 2, 1, 3))
            return F.reshape(t, (b, oh * ow, taps, g * ch))

        kk = per_pixel(kk, hd // g) + F.reshape(self.relative_position_bias_table, (1, 1, taps, hd))
        vv = per_pixel(vv, c // g)
        qq = F.reshape(F.permute(F.reshape(q, (b, hd, oh * ow)), (0, 2, 1)), (b, oh * ow, 1, hd))
        attn = F.softmax(F.sum(qq * self.scale * kk, axis=-1, keepdims=True), dim=2)
        out = F.sum(attn * vv, axis=2)  # (b, oh ow, c)
        return F.reshape(F.permute(out, (0, 2, 1)), (b, c, oh, ow))
