"""Swin2SR (Conde et al., "Swin2SR: SwinV2 Transformer for Compressed Image Super-Resolution and
Restoration", ECCVW 2022; mv-lab/swin2sr as spandrel 0.4.2 reads it): SwinIR's layout with SwinV2
blocks:

- scaled cosine attention: softmax(exp(min(logit_scale, log 100)) cos(q, k) + bias + mask) v, the
  per-head logit scale learnt (q and k L2-normalised per head, the scale passed to
  framework.functional.attention as a per-head Tensor);
- a continuous position bias: 16 sigmoid of an MLP (cpb_mlp: 2 -> 512 -> heads, ReLU) of the
  log-spaced relative coordinates (the relative_coords_table buffer,
  framework.functional.windows.log_coords_table), gathered per token pair;
- post-norm: x + norm1(attn(x)), then x + norm2(mlp(x));
- q and v biases (no k bias) on the qkv linear; a 1x1 patch-embedding conv (`proj`) in the model
  and in every residual group.

Reconstructions: "pixelshuffle" (classical SR), "pixelshuffledirect" (lightweight), "nearest+conv"
(real-world x4), "pixelshuffle_aux" (compressed-input SR: an auxiliary LR output re-embedded and
a bicubic-upsampled input branch added before the last conv), "" (JPEG artefact removal and
denoising at x1, with img_range 255 in the published JPEG files). Keys, order, shapes and buffers
(each attention's relative_coords_table and relative_position_index, each shifted block's attn_mask
for img_size) are the original's; any input size runs (reflect-padded to the window, cropped back).
As SwinIR here, an img_size that is not a multiple of the window stores the mask of the padded size.
"""
from __future__ import annotations

import math

import numpy as np

import framework as sg
import framework.functional as F
from framework import nn
from framework.check import choice, flag, int_arg, int_list, number, pair
from framework.functional.anchor_attention import cosine_attention
from framework.functional.attention import relative_position_index, shift_mask
from framework.functional.windows import log_coords_table
from framework.registry import MODELS
from framework.card import conv, linear, norm

from ._blocks import (PixelShuffleUpsampler, drop_rates, embed_tokens, trunc_normal_linears,
                      upsampler_scale)
from framework.detect import Assumed, NoMatch, Unknown, count, need
from .swinir import (Mlp, PatchUnEmbed, SwinTransformerBlock, UpsampleOneStep, _resi_conv,
                     reconstruction, swin_card, swin_parts, swin_window, token_stem)

_UPSAMPLERS = ("", "pixelshuffle", "pixelshuffledirect", "nearest+conv", "pixelshuffle_aux")
_NUM_FEAT = 64
_RGB_MEAN = (0.4488, 0.4371, 0.4040)
_MAX_LOGIT = math.log(1.0 / 0.01)


def _l2_normalize(x):
    """x / max(||x||, 1e-12) along the last axis (torch's F.normalize)."""
    return x / F.clamp(F.sqrt(F.sum(x * x, axis=-1, keepdims=True)), min=1e-12)


class WindowAttentionV2(nn.Module):
    """SwinV2 window attention on (B*nW, N, C), N = wh ww: cosine similarity times a learnt,
    clamped per-head logit scale, plus 16 sigmoid(cpb_mlp(coords)) as the bias, plus the mask."""

    def __init__(self, dim: int, window_size: tuple, num_heads: int, qkv_bias: bool = True,
                 attn_drop: float = 0.0, proj_drop: float = 0.0, pretrained_window_size=(0, 0)):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, tuple(window_size), num_heads
        wh, ww = self.window_size
        self.logit_scale = nn.Parameter(np.log(10 * np.ones((num_heads, 1, 1), np.float32)))
        if qkv_bias:
            self.q_bias = nn.Parameter(np.zeros(dim, np.float32))
            self.v_bias = nn.Parameter(np.zeros(dim, np.float32))
        self.register_buffer("relative_coords_table",
                             log_coords_table(wh, ww, tuple(pretrained_window_size)))
        self.register_buffer("relative_position_index", relative_position_index(wh, ww))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512), nn.ReLU(), nn.Linear(512, num_heads, bias=False))
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def bias(self, dtype):
        """(nH, N, N): 16 sigmoid of the MLP's table, gathered for each token pair."""
        n = self.window_size[0] * self.window_size[1]
        coords = sg.tensor(self.relative_coords_table.data.astype(dtype, copy=False))
        table = F.reshape(self.cpb_mlp(coords), (-1, self.num_heads))
        table = F.getitem(table, self.relative_position_index.data.reshape(-1))
        return F.sigmoid(F.permute(F.reshape(table, (n, n, self.num_heads)), (2, 0, 1))) * 16.0

    def forward(self, x, mask=None):
        b_, n, c = x.shape
        heads = self.num_heads
        bias = None
        if "q_bias" in self._parameters:
            zeros = sg.tensor(np.zeros(c, x.dtype))
            bias = F.cat([self.q_bias, zeros, self.v_bias])
        qkv = F.reshape(F.linear(x, self.qkv.weight, bias), (b_, n, 3, heads, c // heads))
        q, k, v = (F.reshape(t, (b_, n, heads, c // heads)) for t in F.split(qkv, 1, 2))
        rel = self.bias(x.dtype)
        if not (self.training and self.attn_drop.p > 0):  # one fused pass (GRL's op too)
            y = cosine_attention(*(F.reshape(t, (b_, n, c)) for t in (q, k, v)), heads,
                                 self.logit_scale, rel, mask)
            return self.proj_drop(self.proj(y))
        q, k = _l2_normalize(q), _l2_normalize(k)
        scale = F.exp(F.clamp(F.reshape(self.logit_scale, (heads,)), max=_MAX_LOGIT))
        q, k, v = (F.permute(t, (0, 2, 1, 3)) for t in (q, k, v))
        attn = self.attn_drop(F.attention_softmax(q @ F.transpose(k, -2, -1), scale, rel, mask))
        y = F.reshape(F.transpose(attn @ v, 1, 2), (b_, n, c))
        return self.proj_drop(self.proj(y))


class SwinV2Block(nn.Module):
    """Post-norm Swin block on (B, H*W, C): x + drop_path(norm1(attn(x))) on (shifted) windows, then
    x + drop_path(norm2(mlp(x))). The window shrinks to a smaller token grid (no shift then)."""

    mask = SwinTransformerBlock.mask  # the stored buffer at its size, else computed

    def __init__(self, dim, input_resolution, num_heads, window_size, shift_size, mlp_ratio,
                 qkv_bias, drop, attn_drop, drop_path, pretrained_window_size=0):
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        if min(input_resolution) <= window_size:
            self.window_size, self.shift_size = min(input_resolution), 0
        ws = self.window_size
        self.mask_resolution = tuple(-(-n // ws) * ws for n in input_resolution)
        self.register_buffer("attn_mask", shift_mask(*self.mask_resolution, ws, self.shift_size).copy()
                             if self.shift_size > 0 else None)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttentionV2(dim, (ws, ws), num_heads, qkv_bias, attn_drop, drop,
                                      (pretrained_window_size,) * 2)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)

    def forward(self, x, x_size):
        h, w = x_size
        b, _, c = x.shape
        ws, shift = self.window_size, self.shift_size
        y = F.reshape(x, (b, h, w, c))
        if shift:
            y = F.roll(y, (-shift, -shift), (1, 2))
        y = F.window_reverse(self.attn(F.window_partition(y, ws), mask=self.mask(h, w, x.dtype)),
                             ws, h, w)
        if shift:
            y = F.roll(y, (shift, shift), (1, 2))
        x = x + self.drop_path(self.norm1(F.reshape(y, (b, h * w, c))))
        return x + self.drop_path(self.norm2(self.mlp(x)))


class PatchEmbed(nn.Module):
    """(B, C, H, W) -> proj (a 1x1 conv: patch_size 1) -> tokens (B, H*W, C) -> LayerNorm when
    given."""

    def __init__(self, embed_dim: int, norm: bool):
        super().__init__()
        self.proj = nn.Conv2d(embed_dim, embed_dim, 1)
        if norm:
            self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        x = F.transpose(F.flatten(self.proj(x), 2), 1, 2)
        return self.norm(x) if "norm" in self._modules else x


class BasicLayer(nn.Module):
    """`depth` SwinV2 blocks, the odd ones on windows shifted by half a window."""

    def __init__(self, dim, input_resolution, depth, window_size, drop_path, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([
            SwinV2Block(dim, input_resolution, window_size=window_size,
                        shift_size=0 if i % 2 == 0 else window_size // 2, drop_path=drop_path[i],
                        **kw) for i in range(depth)])

    def forward(self, x, x_size):
        for blk in self.blocks:
            x = blk(x, x_size)
        return x


class RSTB(nn.Module):
    """Residual group: tokens x -> embed(conv(unembed(blocks(x)))) + x (embed includes its proj)."""

    def __init__(self, dim, input_resolution, depth, resi_connection, **block_kw):
        super().__init__()
        self.residual_group = BasicLayer(dim, input_resolution, depth, **block_kw)
        self.conv = _resi_conv(dim, resi_connection)
        self.patch_embed = PatchEmbed(dim, norm=False)
        self.patch_unembed = PatchUnEmbed()

    def forward(self, x, x_size):
        y = self.patch_unembed(self.residual_group(x, x_size), x_size)
        return self.patch_embed(self.conv(y)) + x


@MODELS.register()
class Swin2SR(nn.Module):
    """Swin2SR: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (the original's names and defaults; `scale` is its `upscale`):
        img_size: training patch side (int or (H, W)), default 64: fixes the stored attn_mask;
            other sizes run too.
        patch_size: 1 (default; the original's patch embedding cannot run another).
        in_chans: image channels, default 3 (the output has as many; "pixelshuffle_aux" needs 3).
        embed_dim: token features, default 96 (published: 180; lightweight 60).
        depths: SwinV2 blocks per group, default (6, 6, 6, 6).
        num_heads: attention heads per group (each divides embed_dim), default (6, 6, 6, 6).
        window_size: attention window side, default 7 (published: 8; JPEG 7).
        mlp_ratio: MLP hidden features / embed_dim, default 4 (published: 2).
        qkv_bias: learnt q and v biases, default True.
        drop_rate, attn_drop_rate: dropout, default 0. drop_path_rate: stochastic depth, rising
            linearly from 0, default 0.1.
        ape: a learnt absolute position embedding, default False. patch_norm: LayerNorm after the
            patch embedding, default True.
        scale: default 2: "pixelshuffle" / "pixelshuffle_aux" 2^n or 3, "pixelshuffledirect" any,
            "nearest+conv" 4, "" 1.
        img_range: images are multiplied by this after the mean shift, default 1 (the JPEG files:
            255).
        upsampler: "" (default, x1), "pixelshuffle", "pixelshuffledirect", "nearest+conv",
            "pixelshuffle_aux".
        resi_connection: "1conv" (default) or "3conv".
        pretrained_window_size: the window the coordinates table is normalised by (0: its own),
            default 0 (every published file).
    """

    def __init__(self, img_size=64, patch_size=1, in_chans: int = 3, embed_dim: int = 96,
                 depths=(6, 6, 6, 6), num_heads=(6, 6, 6, 6), window_size: int = 7,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1, ape: bool = False,
                 patch_norm: bool = True, scale: int = 2, img_range: float = 1.0,
                 upsampler: str = "", resi_connection: str = "1conv", pretrained_window_size: int = 0):
        super().__init__()
        name = "Swin2SR"
        img_size = pair(name, "img_size", img_size, minimum=1)
        if pair(name, "patch_size", patch_size, minimum=1) != (1, 1):
            raise ValueError(f"{name}: patch_size must be 1 (the original's token grid is the "
                             f"image's), got {patch_size}")
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim)
        depths = int_list(name, "depths", depths, minimum=0)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depths))
        bad = [h for h in num_heads if embed_dim % h]
        if bad:
            raise ValueError(f"{name}: num_heads must divide embed_dim {embed_dim}, got {bad[0]}")
        window_size = int_arg(name, "window_size", window_size)
        mlp_ratio = number(name, "mlp_ratio", mlp_ratio, low=0, low_open=True)
        if int(embed_dim * mlp_ratio) < 1:
            raise ValueError(f"{name}: mlp_ratio {mlp_ratio} leaves the MLP no hidden feature")
        qkv_bias = flag(name, "qkv_bias", qkv_bias)
        drop_rate, attn_drop_rate, drop_path_rate = drop_rates(name, drop_rate, attn_drop_rate,
                                                               drop_path_rate)
        self.ape = flag(name, "ape", ape)
        patch_norm = flag(name, "patch_norm", patch_norm)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        self.upsampler = choice(name, "upsampler", upsampler, _UPSAMPLERS)
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "3conv"))
        if resi_connection == "3conv" and embed_dim < 4:
            raise ValueError(f"{name}: resi_connection '3conv' needs embed_dim >= 4, got {embed_dim}")
        pretrained = int_arg(name, "pretrained_window_size", pretrained_window_size, minimum=0)
        if pretrained == 1:
            raise ValueError(f"{name}: pretrained_window_size 1 divides the coordinates by 0")
        if self.upsampler == "pixelshuffle_aux" and in_chans != 3:
            raise ValueError(f"{name}: upsampler 'pixelshuffle_aux' needs in_chans 3 (the original's "
                             f"conv_after_aux takes 3 channels), got {in_chans}")
        self.scale = self._check_scale(name, scale)
        resolution = tuple(img_size)
        self.patches_resolution = resolution
        self.window_size = window_size  # inputs pad to it, as the original (blocks may shrink theirs)
        if min(window_size, min(resolution)) == 1 and pretrained == 0:
            raise ValueError(f"{name}: a 1-token window (window_size or img_size 1) divides the "
                             f"coordinates table by 0")
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        token_stem(self, in_chans, embed_dim, PatchEmbed(embed_dim, patch_norm), resolution, drop_rate)
        rates = np.linspace(0, drop_path_rate, sum(depths)).tolist()
        self.layers = nn.ModuleList()
        for i, depth in enumerate(depths):
            start = sum(depths[:i])
            self.layers.append(RSTB(
                embed_dim, resolution, depth, resi_connection, window_size=window_size,
                drop_path=rates[start:start + depth], num_heads=num_heads[i], mlp_ratio=mlp_ratio,
                qkv_bias=qkv_bias, drop=drop_rate, attn_drop=attn_drop_rate,
                pretrained_window_size=pretrained))
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        self._reconstruction(embed_dim, in_chans)
        self._init_weights()

    def _check_scale(self, name, scale):
        if self.upsampler in ("pixelshuffle", "pixelshuffle_aux"):
            return upsampler_scale(name, scale)
        scale = int_arg(name, "scale", scale)
        need_scale = {"nearest+conv": 4, "": 1}.get(self.upsampler)
        if need_scale is not None and scale != need_scale:
            raise ValueError(f"{name}: upsampler {self.upsampler!r} makes x{need_scale} only: scale "
                             f"must be {need_scale}, got {scale}")
        return scale

    def _reconstruction(self, embed_dim, out_ch):
        f = _NUM_FEAT
        if self.upsampler in ("pixelshuffle", "pixelshuffle_aux", "nearest+conv"):
            if self.upsampler == "pixelshuffle_aux":
                self.conv_bicubic = nn.Conv2d(out_ch, f, 3, padding=1)
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, f, 3, padding=1),
                                                      nn.LeakyReLU())  # torch's default slope 0.01
        if self.upsampler == "pixelshuffle_aux":
            self.conv_aux = nn.Conv2d(f, out_ch, 3, padding=1)
            self.conv_after_aux = nn.Sequential(nn.Conv2d(3, f, 3, padding=1), nn.LeakyReLU())
        if self.upsampler in ("pixelshuffle", "pixelshuffle_aux"):
            self.upsample = PixelShuffleUpsampler(self.scale, f, "Swin2SR")
            self.conv_last = nn.Conv2d(f, out_ch, 3, padding=1)
        elif self.upsampler == "pixelshuffledirect":
            self.upsample = UpsampleOneStep(self.scale, embed_dim, out_ch)
        elif self.upsampler == "nearest+conv":
            for key in ("conv_up1", "conv_up2", "conv_hr"):
                setattr(self, key, nn.Conv2d(f, f, 3, padding=1))
            self.conv_last = nn.Conv2d(f, out_ch, 3, padding=1)
            self.lrelu = nn.LeakyReLU(0.2)
        elif self.upsampler == "":
            self.conv_last = nn.Conv2d(embed_dim, out_ch, 3, padding=1)

    def _init_weights(self):
        """The original's: every Linear (the cpb MLPs' too) ~ trunc_normal(std 0.02), biases 0;
        LayerNorm ones / zeros; logit scales log 10; q / v biases 0; convolutions torch's default."""
        trunc_normal_linears(self)

    def forward_features(self, x):
        x_size = (x.shape[2], x.shape[3])
        x = embed_tokens(self, x, "Swin2SR")
        for layer in self.layers:
            x = layer(x, x_size)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"Swin2SR: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image, (h, w), s = x, x.shape[2:], self.scale
        x = F.pad_to_multiple(x, self.window_size)  # the original's check_image_size (reflect)
        mean = self.mean.astype(x.dtype, copy=False)
        x = (x - mean) * self.img_range
        if self.upsampler == "":
            first = self.conv_first(x)
            out = x + self.conv_last(self.conv_after_body(self.forward_features(first)) + first)
            return F.crop_to(out / self.img_range + mean, image, 1)
        feat = self.conv_first(x)
        feat = self.conv_after_body(self.forward_features(feat)) + feat
        if self.upsampler == "pixelshuffle":
            out = self.conv_last(self.upsample(self.conv_before_upsample(feat)))
        elif self.upsampler == "pixelshuffle_aux":
            # the padded input resized to the unpadded output size, as the original
            bicubic = self.conv_bicubic(F.interpolate(x, size=(h * s, w * s), mode="bicubic",
                                                      align_corners=False))
            aux = self.conv_aux(self.conv_before_upsample(feat))
            up = F.crop_to(self.upsample(self.conv_after_aux(aux)), image, s)
            out = self.conv_last(up + bicubic)
        elif self.upsampler == "pixelshuffledirect":
            out = self.upsample(feat)
        else:
            feat = self.conv_before_upsample(feat)
            feat = self.lrelu(self.conv_up1(F.interpolate(feat, scale_factor=2, mode="nearest")))
            feat = self.lrelu(self.conv_up2(F.interpolate(feat, scale_factor=2, mode="nearest")))
            out = self.conv_last(self.lrelu(self.conv_hr(feat)))
        return F.crop_to(out / self.img_range + mean, image, s)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """in_chans, embed_dim from conv_first; per group its blocks (depths) and heads (logit_scale);
        window_size from relative_position_index (w^2 rows); img_size from a shifted block's
        attn_mask (a square grid of sqrt(nW) windows), else from absolute_pos_embed, else the
        window when odd blocks exist but none shifts (img_size no larger than the window; as
        spandrel), else 64 (no odd block: img_size changes no weight); mlp_ratio from
        fc1; upsampler, resi_connection, ape, patch_norm, qkv_bias (q_bias) from which keys exist;
        scale from the upsampler. img_range is not in the weights and changes the output: the
        original's convention decides it (its test script main_test_swin2sr.py and spandrel): the
        JPEG artefact-removal files, the only ones with window 7, use 255 (said), every other
        file 1; pass img_range to override. The drop rates change no weight: defaults."""
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        patch = need(shapes, "patch_embed.proj.weight", 4)
        if patch[2:] != (1, 1):
            raise NoMatch(f"patch_embed.proj is {patch[2]}x{patch[3]}: the original runs patch_size 1 only")
        if "conv_after_body_hf.weight" in shapes:
            raise NoMatch("upsampler 'pixelshuffle_hf' (a training-time variant with three outputs) "
                          "is not supported")
        layers = count(shapes, "layers", ".conv.weight") or count(shapes, "layers", ".conv.0.weight")
        depths, heads, window, mlp_ratio, qkv_bias = [], [], None, 4.0, True
        img_size, odd_blocks = None, False
        for i in range(layers):
            prefix = f"layers.{i}.residual_group.blocks"
            depth = count(shapes, prefix, ".norm1.weight")
            depths.append(depth)
            odd_blocks = odd_blocks or depth > 1
            if not depth:
                heads.append(6)  # no block: no weight fixes it
                continue
            heads.append(need(shapes, f"{prefix}.0.attn.logit_scale", 3)[0])
            n = need(shapes, f"{prefix}.0.attn.relative_position_index", 2)[0]
            window = math.isqrt(n)
            if window * window != n:
                raise NoMatch(f"{prefix}.0.attn.relative_position_index has {n} rows: not w^2")
            hidden = need(shapes, f"{prefix}.0.mlp.fc1.weight", 2)[0]
            mlp_ratio = hidden / embed_dim
            if int(embed_dim * mlp_ratio) < hidden:
                mlp_ratio = float(np.nextafter(mlp_ratio, np.inf))
            qkv_bias = f"{prefix}.0.attn.q_bias" in shapes
            if f"{prefix}.1.attn_mask" in shapes and img_size is None:
                nw = need(shapes, f"{prefix}.1.attn_mask", 3)[0]
                grid = math.isqrt(nw)
                img_size = grid * window if grid * grid == nw else Unknown(
                    64, f"{nw} shifted windows are not a square grid", None)
        window = window or 7
        if img_size is None and "absolute_pos_embed" in shapes:
            img_size = math.isqrt(need(shapes, "absolute_pos_embed", 3)[1])
        elif img_size is None and odd_blocks:  # no block shifts: the grid is no larger than the window
            img_size = window
        if "conv_after_body.weight" in shapes:
            resi = "1conv"
        elif "conv_after_body.0.weight" in shapes:
            resi = "3conv"
        else:
            raise NoMatch("no conv_after_body")
        if "conv_bicubic.weight" in shapes:
            upsampler, scale = "pixelshuffle_aux", PixelShuffleUpsampler.detect_scale(
                shapes, "upsample", _NUM_FEAT)
        elif "conv_up1.weight" in shapes:
            upsampler, scale = "nearest+conv", 4
        elif "conv_before_upsample.0.weight" in shapes:
            upsampler = "pixelshuffle"
            scale = PixelShuffleUpsampler.detect_scale(shapes, "upsample", _NUM_FEAT)
        elif "upsample.0.weight" in shapes:
            upsampler = "pixelshuffledirect"
            out = need(shapes, "upsample.0.weight", 4)[0]
            scale = math.isqrt(out // in_chans)
            if scale * scale * in_chans != out:
                raise NoMatch(f"upsample.0 has {out} outputs: not in_chans {in_chans} * scale^2")
        else:
            upsampler, scale = "", 1
        found = {"img_size": 64 if img_size is None else img_size, "in_chans": in_chans,
                 "embed_dim": embed_dim, "depths": tuple(depths), "num_heads": tuple(heads),
                 "window_size": window, "mlp_ratio": mlp_ratio, "qkv_bias": qkv_bias,
                 "ape": "absolute_pos_embed" in shapes, "patch_norm": "patch_embed.norm.weight" in shapes,
                 "scale": scale, "upsampler": upsampler, "resi_connection": resi}
        if window == 7:
            found["img_range"] = Assumed(255.0, "Swin2SR's JPEG artefact-removal files, the only "
                                                "ones with window 7, run with 255 (spandrel too)")
        else:
            found["img_range"] = Assumed(1.0, "Swin2SR's files with window 8", quiet=True)
        return found

    @staticmethod
    def card(spec: dict):
        """conv_first, the patch embedding's 1x1 conv, RSTBs of SwinV2 blocks (two norms, the
        logit scales, q and v biases, the 2 -> 512 -> heads position MLP, qkv, proj, the MLP),
        each with its conv and 1x1 embedding, the reconstruction. Inputs are padded to
        window_size; the attention matrices (heads x window^2 per pixel) and the position MLP's
        512 features per table row are the largest arrays but for the upsampler's."""
        c, heads, ws = spec["embed_dim"], list(spec["num_heads"]), spec["window_size"]
        w = swin_window(tuple(spec["img_size"]) if not isinstance(spec["img_size"], int)
                        else (spec["img_size"],) * 2, ws)
        hidden = int(c * spec["mlp_ratio"])

        def block(i):
            return (2 * norm(c) + heads[i] + (2 * c if spec["qkv_bias"] else 0) + linear(2, 512)
                    + linear(512, heads[i], False) + linear(c, 3 * c, False) + linear(c, c)
                    + linear(c, hidden) + linear(hidden, c))
        up, up_act = reconstruction(spec)
        embed = conv(c, c, 1) * (1 + len(spec["depths"]))
        act = max([h * w * w for h in heads] + [-(-512 * (2 * w - 1) ** 2 // (ws * ws)), 3 * c,
                                                hidden, up_act, c * spec["scale"] ** 2])
        return swin_card(spec, swin_parts(spec, block) + embed + up, act, ws)
