"""OmniSR (Wang et al., "Omni Aggregation Networks for Lightweight Image Super-Resolution", CVPR 2023;
github.com/Francis0625/Omni-SR, as spandrel 0.4.2's OmniSR architecture reads it): a 3x3 conv, res_num
OSAGs, a 3x3 conv plus the long skip, a pixel-shuffle tail. An OSAG is block_num OSA blocks and a
1x1 conv with a skip, then ESA (enhanced spatial attention). An OSA block, on (N, C, H, W):

    MBConv (1x1, GELU, depthwise 3x3, GELU, squeeze-excitation, 1x1) + skip
    window attention over window_size^2 blocks   (LayerNorm, relative position bias) + skip
    gated conv FFN, channel attention within each window, gated conv FFN (LayerNorm2d) + skips
    grid attention over tokens window_size apart (LayerNorm, relative position bias) + skip
    gated conv FFN, channel attention across windows, gated conv FFN (LayerNorm2d) + skips

Attention has C / (C / 4) = 4 heads. The image is padded with zeros to a multiple of window_size (the
original's check_image_size) after spandrel's size requirement (16 pixels at least, reflected).
Keys are the original's (input, residual_layer.i.residual_layer.j.layer.k..., esa.conv1, output,
up.0); the relative-position indices are not in the state_dict (a non-persistent buffer there).
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import flag, int_arg
from framework.functional.attention import relative_position_index
from framework.nn import init
from framework.registry import MODELS
from framework.card import conv, image_card, linear, norm

from ._blocks import pad_to_requirement
from framework.detect import NoMatch, count, need, split_shuffle

_HEADS = 4  # both attentions: dim_head = C // 4 and Channel_Attention(heads=4)
_MINIMUM = 16  # spandrel's size requirement (ESA's stride-2 conv and 7x7 max pool need it)


# -- the rearrangements (einops in the original) ---------------------------------------------------
class BlockPartition(nn.Module):
    """(N, C, X w, Y w) -> (N, X, Y, w, w, C): windows of w x w neighbours ("b d (x w1) (y w2) ->
    b x y w1 w2 d"); grid=True takes tokens X apart instead ("b d (w1 x) (w2 y) -> ...")."""

    def __init__(self, w: int, grid: bool = False):
        super().__init__()
        self.w, self.grid = w, grid

    def forward(self, x):
        n, c, h, wd = x.shape
        w, X, Y = self.w, h // self.w, wd // self.w
        if self.grid:
            return x.reshape(n, c, w, X, w, Y).permute(0, 3, 5, 2, 4, 1)
        return x.reshape(n, c, X, w, Y, w).permute(0, 2, 4, 3, 5, 1)


class BlockMerge(nn.Module):
    """BlockPartition's inverse: (N, X, Y, w, w, C) -> (N, C, H, W)."""

    def __init__(self, grid: bool = False):
        super().__init__()
        self.grid = grid

    def forward(self, x):
        n, X, Y, w, _, c = x.shape
        dims = (0, 5, 3, 1, 4, 2) if self.grid else (0, 5, 1, 3, 2, 4)
        return x.permute(*dims).reshape(n, c, X * w, Y * w)


# -- MBConv ------------------------------------------------------------------------------------------
class SqueezeExcitation(nn.Module):
    """x * sigmoid(W2 silu(W1 mean_hw(x))) with bias-free linears C -> C/4 -> C (keys gate.1, gate.3)."""

    def __init__(self, dim: int, shrinkage_rate: float = 0.25):
        super().__init__()
        hidden = int(dim * shrinkage_rate)
        self.gate = nn.Sequential(nn.Identity(), nn.Linear(dim, hidden, bias=False), nn.Identity(),
                                  nn.Linear(hidden, dim, bias=False))

    def forward(self, x):
        s = self.gate[1](F.mean(x, axis=(2, 3)))
        s = F.sigmoid(self.gate[3](s * F.sigmoid(s)))  # SiLU, then the gate
        return x * s.reshape(*s.shape, 1, 1)


class MBConvResidual(nn.Module):
    """x + fn(x), fn = 1x1 conv, GELU, depthwise 3x3, GELU, SE, 1x1 conv (expansion 1)."""

    def __init__(self, dim: int):
        super().__init__()
        self.fn = nn.Sequential(nn.Conv2d(dim, dim, 1), nn.GELU(),
                                nn.Conv2d(dim, dim, 3, padding=1, groups=dim), nn.GELU(),
                                SqueezeExcitation(dim), nn.Conv2d(dim, dim, 1))

    def forward(self, x):
        return self.fn(x) + x


# -- attention ---------------------------------------------------------------------------------------
class RelPosBias(nn.Module):
    """The original's nn.Embedding((2w - 1)^2, heads): `weight`, N(0, 1) as torch's Embedding."""

    def __init__(self, num: int, heads: int):
        super().__init__()
        self.weight = nn.Parameter(np.empty((num, heads), np.float32))
        init.normal_(self.weight)


class Attention(nn.Module):
    """Multi-head self-attention within each window of (N, X, Y, w, w, C): softmax(q k^T / sqrt(d)
    + bias) v, 4 heads, bias-free qkv and output linears, the relative position bias if with_pe."""

    def __init__(self, dim: int, window_size: int, with_pe: bool = True):
        super().__init__()
        self.heads, self.scale = _HEADS, (dim // _HEADS) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(dim, dim, bias=False))
        self.with_pe, self.window_size = with_pe, window_size
        if with_pe:
            self.rel_pos_bias = RelPosBias((2 * window_size - 1) ** 2, _HEADS)
        n = window_size * window_size
        self.index = relative_position_index(window_size, window_size).reshape(n, n)

    def forward(self, x):
        b, X, Y, w1, w2, c = x.shape
        n = w1 * w2
        qkv = self.to_qkv(x.reshape(b * X * Y, n, c))
        bias = self.rel_pos_bias.weight[self.index].permute(2, 0, 1) if self.with_pe else None
        out = F.window_attention(qkv, self.heads, self.scale, bias)  # bias: (heads, n, n)
        return self.to_out(out).reshape(b, X, Y, w1, w2, c)


class ChannelAttention(nn.Module):
    """Attention between channels (per head: C/4 x C/4 matrices of L2-normalised rows, scaled by a
    learned temperature) on 1x1 + depthwise 3x3 conv projections. grid=False: within each w x w
    window (rows of w^2 pixels); grid=True: across windows (rows of HW / w^2 pixels, one per
    in-window position)."""

    def __init__(self, dim: int, window_size: int, grid: bool = False):
        super().__init__()
        self.heads, self.ps, self.grid = _HEADS, window_size, grid
        self.temperature = nn.Parameter(np.ones((_HEADS, 1, 1), np.float32))
        self.qkv = nn.Conv2d(dim, dim * 3, 1, bias=False)
        self.qkv_dwconv = nn.Conv2d(dim * 3, dim * 3, 3, padding=1, groups=dim * 3, bias=False)
        self.project_out = nn.Conv2d(dim, dim, 1, bias=False)

    def forward(self, x):
        b, c, h, w = x.shape
        p, heads, d = self.ps, self.heads, c // self.heads
        t = self.qkv_dwconv(self.qkv(x)).reshape(b, 3, heads, d, h // p, p, w // p, p)
        # (3, b, groups, heads, d, tokens): groups = windows (tokens = their pixels) or, for the
        # grid, in-window positions (tokens = the windows)
        if self.grid:
            t = t.permute(1, 0, 5, 7, 2, 3, 4, 6).reshape(3, b, p * p, heads, d, h * w // (p * p))
        else:
            t = t.permute(1, 0, 4, 6, 2, 3, 5, 7).reshape(3, b, h * w // (p * p), heads, d, p * p)
        q, k, v = _l2_normalize(t[0]), _l2_normalize(t[1]), t[2]
        attn = F.softmax(F.matmul(q, k.transpose(-2, -1)) * self.temperature, dim=-1)
        out = F.matmul(attn, v)  # (b, groups, heads, d, tokens)
        if self.grid:
            out = out.reshape(b, p, p, heads, d, h // p, w // p).permute(0, 3, 4, 5, 1, 6, 2)
        else:
            out = out.reshape(b, h // p, w // p, heads, d, p, p).permute(0, 3, 4, 1, 5, 2, 6)
        return self.project_out(out.reshape(b, c, h, w))


def _l2_normalize(x):
    """torch.nn.functional.normalize(x, dim=-1): x / max(||x||_2, 1e-12) along the last axis."""
    return x / F.clamp(F.sqrt(F.sum(x * x, axis=-1, keepdims=True)), min=1e-12)


class GatedConvFeedForward(nn.Module):
    """1x1 conv C -> 2C, depthwise 3x3, GELU(first half) * second half, 1x1 conv back; no biases."""

    def __init__(self, dim: int):
        super().__init__()
        self.project_in = nn.Conv2d(dim, dim * 2, 1, bias=False)
        self.dwconv = nn.Conv2d(dim * 2, dim * 2, 3, padding=1, groups=dim * 2, bias=False)
        self.project_out = nn.Conv2d(dim, dim, 1, bias=False)

    def forward(self, x):
        a, b = F.chunk(self.dwconv(self.project_in(x)), 2, dim=1)
        return self.project_out(F.gelu(a) * b)


class PreNormResidual(nn.Module):
    """fn(norm(x)) + x; norm = LayerNorm over the last axis (windows) or LayerNorm2d (images)."""

    def __init__(self, dim: int, fn, image: bool):
        super().__init__()
        self.norm = nn.LayerNorm2d(dim) if image else nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x)) + x


class OSABlock(nn.Module):
    """The OSA block: `layer` numbered as the original's Sequential (rearrangements included)."""

    def __init__(self, dim: int, window_size: int, with_pe: bool):
        super().__init__()
        w = window_size

        def ffn():
            return PreNormResidual(dim, GatedConvFeedForward(dim), image=True)

        self.layer = nn.Sequential(
            MBConvResidual(dim),
            BlockPartition(w), PreNormResidual(dim, Attention(dim, w, with_pe), image=False),
            BlockMerge(), ffn(),
            PreNormResidual(dim, ChannelAttention(dim, w), image=True), ffn(),
            BlockPartition(w, grid=True), PreNormResidual(dim, Attention(dim, w, with_pe), image=False),
            BlockMerge(grid=True), ffn(),
            PreNormResidual(dim, ChannelAttention(dim, w, grid=True), image=True), ffn())

    def forward(self, x):
        return self.layer(x)


# -- ESA, OSAG, OmniSR ------------------------------------------------------------------------------
class ESA(nn.Module):
    """Enhanced spatial attention: x * sigmoid(conv4(up(conv3(maxpool7/3(conv2_s2(c1)))) +
    conv_f(c1))), c1 = conv1(x) with f = esa_channels features; up = bilinear to (H, W)."""

    def __init__(self, esa_channels: int, n_feats: int):
        super().__init__()
        f = esa_channels
        self.conv1 = nn.Conv2d(n_feats, f, 1)
        self.conv_f = nn.Conv2d(f, f, 1)
        self.conv2 = nn.Conv2d(f, f, 3, stride=2)
        self.conv3 = nn.Conv2d(f, f, 3, padding=1)
        self.conv4 = nn.Conv2d(f, n_feats, 1)

    def forward(self, x):
        c1 = self.conv1(x)
        c3 = self.conv3(F.max_pool2d(self.conv2(c1), 7, 3))
        c3 = F.interpolate(c3, size=tuple(x.shape[2:]), mode="bilinear", align_corners=False)
        return x * F.sigmoid(self.conv4(c3 + self.conv_f(c1)))


class OSAG(nn.Module):
    """block_num OSA blocks and a 1x1 conv, plus the input; then ESA."""

    def __init__(self, channel_num: int, bias: bool, block_num: int, window_size: int, pe: bool):
        super().__init__()
        blocks = [OSABlock(channel_num, window_size, pe) for _ in range(block_num)]
        self.residual_layer = nn.Sequential(*blocks, nn.Conv2d(channel_num, channel_num, 1, bias=bias))
        self.esa = ESA(max(channel_num // 4, 16), channel_num)

    def forward(self, x):
        return self.esa(self.residual_layer(x) + x)


@MODELS.register()
class OmniSR(nn.Module):
    """OmniSR: (N, num_in_ch, h, w) -> (N, num_out_ch, h*scale, w*scale), any h, w >= 1.

    Args:
        num_in_ch, num_out_ch: image channels, default 3.
        num_feat: features, default 64 (a multiple of 4: 4 attention heads).
        block_num: OSA blocks per OSAG, default 1.
        pe: relative position bias in the window and grid attentions, default True.
        window_size: the attention windows' side, default 8 (images are padded to a multiple).
        res_num: OSAGs, default 1 (the published OmniSR: 5).
        scale: the pixel-shuffle factor (the original's up_scale / upsampling), default 4.
        bias: biases on the first, last, tail and OSAG-end convs, default True.
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64, block_num: int = 1,
                 pe: bool = True, window_size: int = 8, res_num: int = 1, scale: int = 4,
                 bias: bool = True):
        super().__init__()
        name = "OmniSR"
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        if num_feat % _HEADS:
            raise ValueError(f"{name}: num_feat must be a multiple of {_HEADS} (the attentions' heads), "
                             f"got {num_feat}")
        block_num = int_arg(name, "block_num", block_num, 0)
        res_num = int_arg(name, "res_num", res_num, 0)
        self.window_size = int_arg(name, "window_size", window_size)
        self.scale = int_arg(name, "scale", scale)
        pe, bias = flag(name, "pe", pe), flag(name, "bias", bias)
        self.residual_layer = nn.Sequential(*[OSAG(num_feat, bias, block_num, self.window_size, pe)
                                              for _ in range(res_num)])
        self.input = nn.Conv2d(num_in_ch, num_feat, 3, padding=1, bias=bias)
        self.output = nn.Conv2d(num_feat, num_feat, 3, padding=1, bias=bias)
        self.up = nn.Sequential(nn.Conv2d(num_feat, num_out_ch * self.scale ** 2, 3, padding=1, bias=bias),
                                nn.PixelShuffle(self.scale))

    def forward(self, x):
        image = x
        x = F.pad_to_multiple(pad_to_requirement(x, _MINIMUM), self.window_size, mode="constant")
        residual = self.input(x)
        out = self.output(self.residual_layer(residual)) + residual
        return F.crop_to(self.up(out), image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: num_feat, num_in_ch from `input`, bias from input.bias, res_num and
        block_num counted, (scale, num_out_ch) from up.0 (num_out_ch tried as num_in_ch, 3, 4, 1),
        window_size from the bias table's (2w - 1)^2 rows when pe. Without pe the weights do not
        tell the window: 8, the original's (every train_yamls/*.yaml of Omni-SR, and spandrel's)."""
        feat, num_in_ch = need(shapes, "input.weight", 4)[:2]
        need(shapes, "residual_layer.0.residual_layer.0.layer.0.fn.0.weight", 4)
        res_num = count(shapes, "residual_layer", ".esa.conv1.weight")
        block_num = count(shapes, "residual_layer.0.residual_layer", ".layer.0.fn.0.weight")
        out = need(shapes, "up.0.weight", 4)[0]
        if isinstance(known.get("scale"), int) or isinstance(known.get("num_out_ch"), int):
            num_out_ch, scale = split_shuffle(out, num_in_ch, known, "OmniSR")
        else:
            fits = [(out // c, c) for c in dict.fromkeys((num_in_ch, 3, 4, 1))
                    if out % c == 0 and math.isqrt(out // c) ** 2 == out // c]
            if not fits:
                raise NoMatch(f"up.0 has {out} outputs: not num_out_ch * scale^2")
            num_out_ch, scale = fits[0][1], math.isqrt(fits[0][0])
        table = shapes.get("residual_layer.0.residual_layer.0.layer.2.fn.rel_pos_bias.weight")
        if table is not None:
            window = (math.isqrt(table[0]) + 1) // 2
            if (2 * window - 1) ** 2 != table[0]:
                raise NoMatch(f"the relative position bias has {table[0]} rows: not (2w - 1)^2")
        else:
            window = known.get("window_size", 8)
        return {"num_in_ch": num_in_ch, "num_out_ch": num_out_ch, "num_feat": feat,
                "block_num": block_num, "pe": table is not None, "window_size": window,
                "res_num": res_num, "scale": scale, "bias": "input.bias" in shapes}

    @staticmethod
    def card(spec: dict):
        """input, res_num OSAGs (OSA blocks: an MBConv, window and grid attention, two channel
        attentions, four gated feed-forwards; a 1x1 conv; ESA), output, up. The input is padded
        to at least 16 pixels and a multiple of the window; the attention matrices, 4 heads x w^2
        per pixel, are the largest arrays. The window and grid partitions reshape to counts
        taken from the input size: one ONNX graph per size."""
        s, cin, cout, d, w = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch", "num_feat",
                                                "window_size"))
        b = spec["bias"]
        mbconv = (conv(d, d, 1) + conv(d, d, 3, groups=d) + linear(d, int(d * 0.25), False)
                  + linear(int(d * 0.25), d, False) + conv(d, d, 1))
        attention = norm(d) + linear(d, 3 * d, False) + linear(d, d, False) + (
            (2 * w - 1) ** 2 * _HEADS if spec["pe"] else 0)
        ffn = norm(d) + conv(d, 2 * d, 1, False) + conv(2 * d, 2 * d, 3, False, 2 * d) + conv(d, d, 1, False)
        channel = (norm(d) + _HEADS + conv(d, 3 * d, 1, False) + conv(3 * d, 3 * d, 3, False, 3 * d)
                   + conv(d, d, 1, False))
        f = max(d // 4, 16)
        esa = conv(d, f, 1) + conv(f, f, 1) + 2 * conv(f, f, 3) + conv(f, d, 1)
        osag = spec["block_num"] * (mbconv + 2 * attention + 4 * ffn + 2 * channel) + conv(d, d, 1, b) + esa
        params = (spec["res_num"] * osag + conv(cin, d, 3, b) + conv(d, d, 3, b)
                  + conv(d, cout * s * s, 3, b))
        return image_card(s, cin, cout, params, max(_HEADS * w * w, 6 * d, cin, cout * s * s),
                          pads_to=w, pad_minimum=_MINIMUM)
