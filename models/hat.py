"""HAT, the Hybrid Attention Transformer (Chen et al., "Activating More Pixels in Image
Super-Resolution Transformer", CVPR 2023; XPixelGroup/HAT hat/archs/hat_arch.py, as spandrel 0.4.2
reads it): SwinIR's layout (mean shift -> conv_first -> residual groups on tokens -> norm ->
conv_after_body + long skip -> pixel-shuffle reconstruction -> mean shift back) with two additions
that let each output pixel see more of the input:

- the hybrid attention block (HAB): a Swin block whose (shifted-)window attention branch is joined
  by a channel-attention conv branch (CAB: 3x3 conv to dim / compress_ratio, GELU, 3x3 conv back,
  RCAN's channel attention) scaled by conv_scale: x + attn(norm1 x) + conv_scale CAB(norm1 x), then
  x + mlp(norm2 x);
- the overlapping cross-attention block (OCAB) closing every group (RHAG): the queries of each
  w x w window attend to the keys and values of its o x o neighbourhood, o = w + int(overlap_ratio
  w), zero-padded at the image border (framework.functional.windows.overlap_windows), with its own
  (w + o - 1)^2-row relative-position bias table.

HAT-S, HAT and HAT-L (and the Real-HAT GAN / MSE files) are this architecture at different sizes.
Keys, order and shapes are the original's, with its two buffers relative_position_index_SA and
relative_position_index_OCA on the model (the blocks share them; no attn_mask buffer: the original
computes the shifted-window mask in each forward, as here, for the padded input size). Any input
size runs: reflect-padded to a multiple of the window (the original's check_image_size), the output
cropped.

One departure: when o - w is odd (window 7 with the original's default overlap_ratio 0.5) the
original's Unfold has one window too few and fails; here the extra neighbourhood row and column fall
at the bottom and right (zeros past the border). Published files use window 16, overlap 24.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import choice, int_arg, int_list, number, pair
from framework.functional.attention import relative_position_index, shift_mask
from framework.functional.windows import overlap_position_index, overlap_windows
from framework.nn import init
from framework.registry import MODELS
from framework.card import conv, linear, norm

from ._blocks import (PixelShuffleUpsampler, embed_tokens, swin_options, trunc_normal_linears,
                      upsampler_scale)
from framework.detect import NoMatch, count, need
from .rcan import ChannelAttention
from .swinir import Mlp, PatchEmbed, PatchUnEmbed, WindowAttention, swin_card, swin_parts, token_stem

_RGB_MEAN = (0.4488, 0.4371, 0.4040)
_NICE_RATIOS = (0.5, 0, 1, 0.25, 0.75, 0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9)


class CAB(nn.Module):
    """Channel-attention block on (N, C, H, W): conv3x3 (C -> C // compress_ratio), GELU, conv3x3
    back, channel attention (C -> C // squeeze_factor -> C)."""

    def __init__(self, num_feat: int, compress_ratio=3, squeeze_factor=30):
        super().__init__()
        mid = int(num_feat // compress_ratio)
        self.cab = nn.Sequential(nn.Conv2d(num_feat, mid, 3, padding=1), nn.GELU(),
                                 nn.Conv2d(mid, num_feat, 3, padding=1),
                                 ChannelAttention(num_feat, squeeze_factor))

    def forward(self, x):
        return self.cab(x)


class HAB(nn.Module):
    """Hybrid attention block on tokens (B, H*W, C): x + drop_path(attn) + conv_scale * CAB, then
    x + drop_path(mlp(norm2 x)). The window attention takes the model's relative-position index."""

    def __init__(self, dim, input_resolution, num_heads, window_size, shift_size, compress_ratio,
                 squeeze_factor, conv_scale, mlp_ratio, qkv_bias, qk_scale, drop, attn_drop,
                 drop_path):
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        if min(input_resolution) <= window_size:  # the original's rule (no shift at img_size = w)
            self.window_size, self.shift_size = min(input_resolution), 0
        self.conv_scale = conv_scale
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (self.window_size,) * 2, num_heads, qkv_bias, qk_scale,
                                    attn_drop, drop, own_index=False)
        self.conv_block = CAB(dim, compress_ratio, squeeze_factor)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)

    def forward(self, x, x_size, index):
        h, w = x_size
        b, _, c = x.shape
        ws, shift = self.window_size, self.shift_size
        y = F.reshape(self.norm1(x), (b, h, w, c))
        conv_x = F.permute(self.conv_block(F.permute(y, (0, 3, 1, 2))), (0, 2, 3, 1))
        mask = None
        if shift:
            y = F.roll(y, (-shift, -shift), (1, 2))
            mask = shift_mask(h, w, ws, shift, x.dtype)
        y = self.attn(F.window_partition(y, ws), mask=mask, index=index)
        y = F.window_reverse(y, ws, h, w)
        if shift:
            y = F.roll(y, (shift, shift), (1, 2))
        x = x + self.drop_path(F.reshape(y, (b, h * w, c))) + F.reshape(conv_x, (b, h * w, c)) * self.conv_scale
        return x + self.drop_path(self.mlp(self.norm2(x)))


class OCAB(nn.Module):
    """Overlapping cross-attention on tokens (B, H*W, C): the queries of each w x w window attend to
    the keys / values of its o x o neighbourhood, a learnt (w + o - 1)^2-row bias; then proj +
    shortcut, then x + mlp(norm2 x)."""

    def __init__(self, dim, window_size, overlap_win_size, num_heads, qkv_bias, qk_scale, mlp_ratio):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.overlap_win_size = overlap_win_size
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        rows = (window_size + overlap_win_size - 1) ** 2
        self.relative_position_bias_table = nn.Parameter(np.zeros((rows, num_heads), np.float32))
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, x, x_size, index):
        h, w = x_size
        b, _, c = x.shape
        ws, ow = self.window_size, self.overlap_win_size
        qkv = self.qkv(F.reshape(self.norm1(x), (b, h, w, c)))  # (b, h, w, 3c)
        q = F.window_partition(qkv[..., :c], ws)  # (b nW, w^2, c)
        kv = overlap_windows(qkv[..., c:], ws, ow)  # (b nW, o^2, 2c), zeros past the border
        table = F.getitem(self.relative_position_bias_table, index.data.reshape(-1))
        bias = F.permute(F.reshape(table, (ws * ws, ow * ow, self.num_heads)), (2, 0, 1))
        y = F.attention(q, kv[..., :c], kv[..., c:], self.num_heads, self.scale, bias)
        y = F.reshape(F.window_reverse(y, ws, h, w), (b, h * w, c))
        x = self.proj(y) + x
        return x + self.mlp(self.norm2(x))


class AttenBlocks(nn.Module):
    """`depth` HABs (the odd ones shifted by half a window), then the OCAB."""

    def __init__(self, dim, input_resolution, depth, num_heads, window_size, overlap_win_size,
                 compress_ratio, squeeze_factor, conv_scale, mlp_ratio, qkv_bias, qk_scale, drop,
                 attn_drop, drop_path):
        super().__init__()
        self.blocks = nn.ModuleList([
            HAB(dim, input_resolution, num_heads, window_size, 0 if i % 2 == 0 else window_size // 2,
                compress_ratio, squeeze_factor, conv_scale, mlp_ratio, qkv_bias, qk_scale, drop,
                attn_drop, drop_path[i]) for i in range(depth)])
        self.overlap_attn = OCAB(dim, window_size, overlap_win_size, num_heads, qkv_bias, qk_scale,
                                 mlp_ratio)

    def forward(self, x, x_size, index_sa, index_oca):
        for blk in self.blocks:
            x = blk(x, x_size, index_sa)
        return self.overlap_attn(x, x_size, index_oca)


class RHAG(nn.Module):
    """Residual hybrid attention group: tokens x -> embed(conv(unembed(blocks(x)))) + x; the conv
    is a 3x3 ('1conv') or nothing ('identity')."""

    def __init__(self, dim, input_resolution, resi_connection, **blocks_kw):
        super().__init__()
        self.residual_group = AttenBlocks(dim, input_resolution, **blocks_kw)
        self.conv = nn.Conv2d(dim, dim, 3, padding=1) if resi_connection == "1conv" else nn.Identity()
        self.patch_embed = PatchEmbed(dim, norm=False)
        self.patch_unembed = PatchUnEmbed()

    def forward(self, x, x_size, index_sa, index_oca):
        y = self.residual_group(x, x_size, index_sa, index_oca)
        return self.patch_embed(self.conv(self.patch_unembed(y, x_size))) + x


def _ratio_for(window: int, overlap: int) -> float:
    """An overlap_ratio r with window + int(r window) == overlap: a round one when one fits (the
    published 0.5 first), else the smallest that does. Every such r builds the same model."""
    for r in _NICE_RATIOS:
        if window + int(r * window) == overlap:
            return r
    r = (overlap - window) / window
    while window + int(r * window) < overlap:
        r = float(np.nextafter(r, np.inf))
    return r


def _divisor_for(n: int, quotient: int):
    """A ratio r with int(n // r) == quotient (compress_ratio / squeeze_factor from a conv's
    width): an int when one fits (n // quotient), else the smallest float that does."""
    if quotient < 1 or quotient > n:
        raise NoMatch(f"a width of {quotient} is not embed_dim {n} // a ratio")
    r = n // quotient
    if n // r == quotient:
        return r
    r = n / quotient
    while int(n // r) > quotient:
        r = float(np.nextafter(r, np.inf))
    while int(n // r) < quotient:
        r = float(np.nextafter(r, -np.inf))
    return r


@MODELS.register()
class HAT(nn.Module):
    """HAT: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (the original's names and defaults; `scale` is its `upscale`):
        img_size: training patch side (int or (H, W)), default 64. It only decides the blocks'
            window when the token grid is no larger than the window (then no block shifts) and the
            absolute position embedding's size; it must not be smaller than the window.
        patch_size: default 1 (the token grid is img_size // patch_size).
        in_chans: image channels, default 3 (the output has as many).
        embed_dim: token features, default 96 (HAT-S 144, HAT and HAT-L 180).
        depths: HABs per group (RHAG), default (6, 6, 6, 6) (HAT-S and HAT 6 x 6, HAT-L 12 x 6).
        num_heads: attention heads per group (each divides embed_dim), default (6, 6, 6, 6).
        window_size: attention window side, default 7 (published: 16).
        compress_ratio: CAB's conv width is embed_dim // compress_ratio, default 3 (HAT-S 24).
        squeeze_factor: channel attention's width is embed_dim // squeeze_factor, default 30
            (HAT-S 24).
        conv_scale: weight of the CAB branch, default 0.01.
        overlap_ratio: the OCAB's neighbourhood side is window_size + int(overlap_ratio *
            window_size), default 0.5.
        mlp_ratio: MLP hidden features / embed_dim (HABs and OCABs), default 4 (published: 2).
        qkv_bias: biases on q, k, v, default True. qk_scale: default None (head_dim^-0.5).
        drop_rate, attn_drop_rate: dropout after the embedding / MLPs / projections, and on the
            HABs' attention weights, default 0.
        drop_path_rate: stochastic depth over the HABs, rising linearly from 0, default 0.1.
        ape: a learnt absolute position embedding (the padded input must then be img_size),
            default False.
        patch_norm: LayerNorm after the patch embedding, default True.
        scale: upscaling factor, default 2: 2^n or 3 (pixel-shuffle stages), or 1 (none).
        img_range: images are multiplied by this after the mean shift, default 1.
        upsampler: "pixelshuffle", the only reconstruction the original builds.
        resi_connection: the conv closing each group and the body, "1conv" (default, a 3x3 conv)
            or "identity" (none).
        num_feat: the reconstruction's features, default 64 (the original's constant; spandrel
            reads it from the weights).
    """

    def __init__(self, img_size=64, patch_size=1, in_chans: int = 3, embed_dim: int = 96,
                 depths=(6, 6, 6, 6), num_heads=(6, 6, 6, 6), window_size: int = 7,
                 compress_ratio=3, squeeze_factor=30, conv_scale: float = 0.01,
                 overlap_ratio: float = 0.5, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 qk_scale=None, drop_rate: float = 0.0, attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1, ape: bool = False, patch_norm: bool = True,
                 scale: int = 2, img_range: float = 1.0, upsampler: str = "pixelshuffle",
                 resi_connection: str = "1conv", num_feat: int = 64):
        super().__init__()
        name = "HAT"
        img_size = pair(name, "img_size", img_size, minimum=1)
        patch_size = pair(name, "patch_size", patch_size, minimum=1)
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim)
        depths = int_list(name, "depths", depths, minimum=0)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depths))
        bad = [h for h in num_heads if embed_dim % h]
        if bad:
            raise ValueError(f"{name}: num_heads must divide embed_dim {embed_dim}, got {bad[0]}")
        self.window_size = int_arg(name, "window_size", window_size)
        compress_ratio = number(name, "compress_ratio", compress_ratio, low=0, low_open=True)
        squeeze_factor = number(name, "squeeze_factor", squeeze_factor, low=0, low_open=True)
        for key, value in (("compress_ratio", compress_ratio), ("squeeze_factor", squeeze_factor)):
            if int(embed_dim // value) < 1:
                raise ValueError(f"{name}: {key} {value} leaves no feature (embed_dim {embed_dim} "
                                 f"// {key} = 0)")
        conv_scale = number(name, "conv_scale", conv_scale)
        overlap_ratio = number(name, "overlap_ratio", overlap_ratio, low=0)
        self.overlap_win_size = self.window_size + int(overlap_ratio * self.window_size)
        o = swin_options(name, embed_dim, mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate,
                         drop_path_rate, ape, patch_norm, img_range)
        mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate, drop_path_rate, patch_norm = (
            o.mlp_ratio, o.qkv_bias, o.qk_scale, o.drop_rate, o.attn_drop_rate, o.drop_path_rate,
            o.patch_norm)
        self.ape, self.img_range = o.ape, o.img_range
        self.upsampler = choice(name, "upsampler", upsampler, ("pixelshuffle",))
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "identity"))
        scale = int_arg(name, "scale", scale)
        self.scale = scale if scale == 1 else upsampler_scale(name, scale)
        num_feat = int_arg(name, "num_feat", num_feat)
        resolution = (img_size[0] // patch_size[0], img_size[1] // patch_size[1])
        if min(resolution) < self.window_size:
            raise ValueError(f"{name}: img_size {img_size} (a {resolution} token grid) is smaller "
                             f"than window_size {self.window_size} (the original cannot run it)")
        self.patches_resolution = resolution
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        self.register_buffer("relative_position_index_SA", relative_position_index(
            self.window_size, self.window_size))
        self.register_buffer("relative_position_index_OCA", overlap_position_index(
            self.window_size, self.overlap_win_size))
        token_stem(self, in_chans, embed_dim, PatchEmbed(embed_dim, patch_norm), resolution, drop_rate)
        rates = np.linspace(0, drop_path_rate, sum(depths)).tolist()
        self.layers = nn.ModuleList()
        for i, depth in enumerate(depths):
            start = sum(depths[:i])
            self.layers.append(RHAG(
                embed_dim, resolution, resi_connection, depth=depth, num_heads=num_heads[i],
                window_size=self.window_size, overlap_win_size=self.overlap_win_size,
                compress_ratio=compress_ratio, squeeze_factor=squeeze_factor, conv_scale=conv_scale,
                mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, qk_scale=qk_scale, drop=drop_rate,
                attn_drop=attn_drop_rate, drop_path=rates[start:start + depth]))
        self.norm = nn.LayerNorm(embed_dim)
        if resi_connection == "1conv":
            self.conv_after_body = nn.Conv2d(embed_dim, embed_dim, 3, padding=1)
        else:
            self.conv_after_body = nn.Identity()
        self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, padding=1),
                                                  nn.LeakyReLU())  # torch's default slope 0.01
        self.upsample = (nn.Sequential() if self.scale == 1
                         else PixelShuffleUpsampler(self.scale, num_feat, name))
        self.conv_last = nn.Conv2d(num_feat, in_chans, 3, padding=1)
        self._init_weights()

    def _init_weights(self):
        """The original's: Linear weights ~ trunc_normal(std 0.02), biases 0; LayerNorm ones /
        zeros; convolutions keep torch's default."""
        trunc_normal_linears(self)

    def forward_features(self, x):
        """(N, embed_dim, H, W) -> same: tokens through every group, then the norm."""
        x_size = (x.shape[2], x.shape[3])
        x = embed_tokens(self, x, "HAT")
        for layer in self.layers:
            x = layer(x, x_size, self.relative_position_index_SA, self.relative_position_index_OCA)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"HAT: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image = x
        x = F.pad_to_multiple(x, self.window_size)  # the original's check_image_size (reflect)
        mean = self.mean.astype(x.dtype, copy=False)
        x = (x - mean) * self.img_range
        feat = self.conv_first(x)
        feat = self.conv_after_body(self.forward_features(feat)) + feat
        out = self.conv_last(self.upsample(self.conv_before_upsample(feat)))
        return F.crop_to(out / self.img_range + mean, image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """in_chans, embed_dim from conv_first; num_feat from conv_last; scale from the upsampler
        (none: x1); window_size from relative_position_index_SA (w^2 rows), the overlap from
        relative_position_index_OCA (o^2 columns; overlap_ratio 0.5 when it fits, else a round ratio,
        any giving o builds the same model); per group its HABs (depths) and heads (the OCAB table's
        columns); compress_ratio and squeeze_factor from the CAB's widths (published values come back:
        HAT-S 24 / 24, HAT 3 / 30); mlp_ratio from fc1; resi_connection, qkv_bias, patch_norm, ape
        from which keys exist; img_size from absolute_pos_embed when present (a square grid, patch 1),
        else 64, the size every HAT options file of the original repository trains at (it only
        matters when no larger than the window). conv_scale and img_range change no weight: 0.01
        and 1, the values of every published HAT file (the original's options), unless given."""
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        sa = need(shapes, "relative_position_index_SA", 2)[0]
        window = math.isqrt(sa)
        if window * window != sa:
            raise NoMatch(f"relative_position_index_SA has {sa} rows: not w^2 for a window w")
        oca = need(shapes, "relative_position_index_OCA", 2)[1]
        overlap = math.isqrt(oca)
        if overlap * overlap != oca or overlap < window:
            raise NoMatch(f"relative_position_index_OCA has {oca} columns: not o^2 for o >= {window}")
        layers = count(shapes, "layers", ".residual_group.overlap_attn.norm1.weight")
        depths = [count(shapes, f"layers.{i}.residual_group.blocks", ".norm1.weight")
                  for i in range(layers)]
        heads = [need(shapes, f"layers.{i}.residual_group.overlap_attn.relative_position_bias_table",
                      2)[1] for i in range(layers)]
        first = "layers.0.residual_group.overlap_attn"
        hidden = need(shapes, f"{first}.mlp.fc1.weight", 2)[0]
        mlp_ratio = hidden / embed_dim
        if int(embed_dim * mlp_ratio) < hidden:  # 7 / 3 * 3 = 6.999...: the next float up
            mlp_ratio = float(np.nextafter(mlp_ratio, np.inf))
        block = "layers.0.residual_group.blocks.0.conv_block.cab"
        compress, squeeze = 3, 30
        if f"{block}.0.weight" in shapes:
            compress = _divisor_for(embed_dim, need(shapes, f"{block}.0.weight", 4)[0])
            squeeze = _divisor_for(embed_dim, need(shapes, f"{block}.3.attention.1.weight", 4)[0])
        num_feat = need(shapes, "conv_last.weight", 4)[1]
        if "upsample.0.weight" in shapes:
            scale = PixelShuffleUpsampler.detect_scale(shapes, "upsample", num_feat)
        else:
            scale = 1
        img_size = 64
        if "absolute_pos_embed" in shapes:
            side = math.isqrt(need(shapes, "absolute_pos_embed", 3)[1])
            img_size = side * known.get("patch_size", 1) if isinstance(known.get("patch_size"), int) else side
        return {"img_size": img_size, "in_chans": in_chans, "embed_dim": embed_dim,
                "depths": tuple(depths), "num_heads": tuple(heads), "window_size": window,
                "compress_ratio": compress, "squeeze_factor": squeeze,
                "overlap_ratio": _ratio_for(window, overlap), "mlp_ratio": mlp_ratio,
                "qkv_bias": f"{first}.qkv.bias" in shapes, "ape": "absolute_pos_embed" in shapes,
                "patch_norm": "patch_embed.norm.weight" in shapes, "scale": scale,
                "resi_connection": "1conv" if "conv_after_body.weight" in shapes else "identity",
                "num_feat": num_feat}

    @staticmethod
    def card(spec: dict):
        """conv_first, RHAGs (HABs: two norms, the window's bias table, qkv, proj, a CAB, the MLP;
        an OCAB with its (w + o - 1)^2-row table; the group's conv), the reconstruction. The
        largest arrays: the OCAB's attention, heads x o^2 per pixel (o the neighbourhood), or its
        unfolded keys and values."""
        c, heads, w, s = spec["embed_dim"], list(spec["num_heads"]), spec["window_size"], spec["scale"]
        o = w + int(spec["overlap_ratio"] * w)
        hidden, f = int(c * spec["mlp_ratio"]), spec["num_feat"]
        mid, sq = int(c // spec["compress_ratio"]), int(c // spec["squeeze_factor"])
        qkv = linear(c, 3 * c, spec["qkv_bias"]) + linear(c, c)
        mlp = linear(c, hidden) + linear(hidden, c)
        cab = conv(c, mid) + conv(mid, c) + conv(c, sq, 1) + conv(sq, c, 1)
        ocab = [(w + o - 1) ** 2 * h + 2 * norm(c) + qkv + mlp for h in heads]

        def block(i):
            return 2 * norm(c) + (2 * w - 1) ** 2 * heads[i] + qkv + cab + mlp
        groups = sum(ocab[i] for i, d in enumerate(spec["depths"]))
        up = (conv(c, f) + (PixelShuffleUpsampler.parameters(s, f) if s > 1 else 0)
              + conv(f, spec["in_chans"]))
        act = max([h * o * o for h in heads] + [-(-3 * c * o * o // (w * w)), 3 * c, hidden,
                                                max(f, spec["in_chans"]) * s * s])
        return swin_card(spec, swin_parts(spec, block) + groups + up, act, w)
