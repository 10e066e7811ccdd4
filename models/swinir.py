"""SwinIR (Liang et al., "SwinIR: Image Restoration Using Swin Transformer", ICCVW 2021;
basicsr/archs/swinir_arch.py): mean shift -> conv_first -> residual Swin Transformer blocks (RSTB:
`depth` Swin blocks on tokens + a conv on the image + a skip) -> norm -> conv_after_body + long skip
-> reconstruction ("pixelshuffle" classical SR, "pixelshuffledirect" lightweight, "nearest+conv"
real-world x2 / x4 / x8, "" denoising and JPEG at x1) -> mean shift back.

A Swin block is windowed multi-head self-attention with a learnt relative-position bias (every
other block on windows shifted by half a window, the wrapped-around tokens kept apart by an additive
-100 mask), then an MLP, each pre-normed and residual. Windows are one reshape + transpose copy
(no loop over windows), the bias is gathered from its table once per block call, and the scale,
bias and mask are applied inside the softmax's pass (framework/functional/attention.py).

State_dict keys, order and shapes are BasicSR's, with its persistent buffers (each attention's
`relative_position_index`, each shifted block's `attn_mask` for `img_size`), so a BasicSR
checkpoint loads with strict=True. Any input size runs: it is reflect-padded to a multiple of the
window (SwinIR's test code) and the output cropped; at a size other than img_size the mask is
computed for that size (as BasicSR's forward), the stored buffer left alone. One departure: an
img_size that is not a multiple of the window (BasicSR's own defaults, 64 and 7, which BasicSR cannot
build) stores the mask of img_size padded to the window, the size the model then runs at.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.functional.attention import relative_position_index, shift_mask
from framework.check import choice, int_arg, int_list, pair
from framework.nn import init
from framework.nn.module import claim
from framework.registry import MODELS
from framework.card import conv, image_card, linear, norm

from ._blocks import (PixelShuffleUpsampler, embed_tokens, swin_options, trunc_normal_linears,
                      upsampler_scale)
from framework.detect import Assumed, NoMatch, Unknown, count, need

_UPSAMPLERS = ("", "pixelshuffle", "pixelshuffledirect", "nearest+conv")
_RESI = ("1conv", "3conv")
_NUM_FEAT = 64  # the reconstruction's features, fixed in BasicSR
_RGB_MEAN = (0.4488, 0.4371, 0.4040)


# -- blocks ----------------------------------------------------------------------------------------
class WindowAttention(nn.Module):
    """Multi-head self-attention inside each window with a relative-position bias:
    (B*nW, N, C) -> same, N = wh * ww tokens; mask (nW, N, N) of 0 / -100 or None. `own_index`
    False: no relative_position_index buffer, the forward takes the index (HAT keeps one for all
    blocks on the model)."""

    def __init__(self, dim: int, window_size: tuple, num_heads: int, qkv_bias: bool = True,
                 qk_scale=None, attn_drop: float = 0.0, proj_drop: float = 0.0,
                 own_index: bool = True):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, tuple(window_size), num_heads
        wh, ww = self.window_size
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            np.zeros(((2 * wh - 1) * (2 * ww - 1), num_heads), np.float32))
        if own_index:
            self.register_buffer("relative_position_index", relative_position_index(wh, ww))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def bias(self, index=None):
        """(nH, N, N): the table's rows for each token pair (`index` (N, N), default the buffer),
        one gather."""
        n = self.window_size[0] * self.window_size[1]
        index = (self.relative_position_index if index is None else index).data.reshape(-1)
        table = F.getitem(self.relative_position_bias_table, index)  # (N*N, nH)
        return F.permute(F.reshape(table, (n, n, self.num_heads)), (2, 0, 1))

    def forward(self, x, mask=None, index=None):
        b_, n, c = x.shape
        heads = self.num_heads
        if not (self.training and self.attn_drop.p > 0):  # one fused pass
            y = F.window_attention(self.qkv(x), heads, self.scale, self.bias(index), mask)
            return self.proj_drop(self.proj(y))
        qkv = F.reshape(self.qkv(x), (b_, n, 3, heads, c // heads))
        q, k, v = (F.reshape(t, (b_, heads, n, c // heads))
                   for t in F.split(F.permute(qkv, (2, 0, 3, 1, 4)), 1, 0))
        # softmax((q scale) k^T + bias + mask), the scale, bias and mask inside the softmax's pass
        attn = F.attention_softmax(q @ F.transpose(k, -2, -1), self.scale, self.bias(index), mask)
        attn = self.attn_drop(attn)
        x = F.reshape(F.transpose(attn @ v, 1, 2), (b_, n, c))
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    """fc1 -> GELU -> dropout -> fc2 -> dropout on (..., C)."""

    def __init__(self, in_features: int, hidden_features: int, drop: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class SwinTransformerBlock(nn.Module):
    """x + attn(norm1(x)) on (shifted) windows, then x + mlp(norm2(x)), each branch through drop path;
    x (B, H*W, C) with H, W multiples of the window. When the input resolution is no larger than the
    window, the window shrinks to it and nothing shifts (BasicSR's rule)."""

    def __init__(self, dim, input_resolution, num_heads, window_size=7, shift_size=0, mlp_ratio=4.0,
                 qkv_bias=True, qk_scale=None, drop=0.0, attn_drop=0.0, drop_path=0.0):
        super().__init__()
        self.input_resolution = tuple(input_resolution)
        self.window_size, self.shift_size = window_size, shift_size
        if min(self.input_resolution) <= window_size:
            self.window_size, self.shift_size = min(self.input_resolution), 0
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (self.window_size,) * 2, num_heads, qkv_bias, qk_scale,
                                    attn_drop, drop)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)
        # The stored mask is for the input resolution padded to the window, what the model runs
        # on at img_size (BasicSR cannot build a grid that is not a multiple of the window at all)
        ws = self.window_size
        self.mask_resolution = tuple(-(-n // ws) * ws for n in self.input_resolution)
        mask = None
        if self.shift_size > 0:  # (nW, ws^2, ws^2): H W ws^2 values, counted before it is made
            claim(self.mask_resolution[0] * self.mask_resolution[1] * ws * ws)
            mask = shift_mask(*self.mask_resolution, ws, self.shift_size).copy()
        self.register_buffer("attn_mask", mask)

    def mask(self, h: int, w: int, dtype):
        """The stored buffer at the input resolution (what a checkpoint holds), else the mask for (h, w)."""
        if self.shift_size == 0:
            return None  # BasicSR's mask for shift 0 is all zeros: adding it changes nothing
        if (h, w) == self.mask_resolution:
            return self.attn_mask.data
        return shift_mask(h, w, self.window_size, self.shift_size, np.dtype(dtype))

    def forward(self, x, x_size):
        h, w = x_size
        b, _, c = x.shape
        ws, shift = self.window_size, self.shift_size
        y = F.reshape(self.norm1(x), (b, h, w, c))
        if shift:
            y = F.roll(y, (-shift, -shift), (1, 2))
        y = self.attn(F.window_partition(y, ws), mask=self.mask(h, w, x.dtype))
        y = F.window_reverse(y, ws, h, w)
        if shift:
            y = F.roll(y, (shift, shift), (1, 2))
        x = x + self.drop_path(F.reshape(y, (b, h * w, c)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class BasicLayer(nn.Module):
    """`depth` Swin blocks, the odd ones on windows shifted by half a window."""

    def __init__(self, dim, input_resolution, depth, num_heads, window_size, mlp_ratio, qkv_bias,
                 qk_scale, drop, attn_drop, drop_path):
        super().__init__()
        self.blocks = nn.ModuleList([
            SwinTransformerBlock(dim, input_resolution, num_heads, window_size,
                                 0 if i % 2 == 0 else window_size // 2, mlp_ratio, qkv_bias, qk_scale,
                                 drop, attn_drop, drop_path[i]) for i in range(depth)])

    def forward(self, x, x_size):
        for blk in self.blocks:
            x = blk(x, x_size)
        return x


def _resi_conv(dim: int, kind: str) -> nn.Module:
    """'1conv': a 3x3 conv; '3conv': 3x3 to dim/4, 1x1, 3x3 back, LeakyReLU(0.2) between (fewer weights)."""
    if kind == "1conv":
        return nn.Conv2d(dim, dim, 3, padding=1)
    q = dim // 4
    return nn.Sequential(nn.Conv2d(dim, q, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(q, q, 1),
                         nn.LeakyReLU(0.2), nn.Conv2d(q, dim, 3, padding=1))


class PatchEmbed(nn.Module):
    """(B, C, H, W) -> tokens (B, H*W, C), then LayerNorm when given (the model's patch_norm)."""

    def __init__(self, embed_dim: int, norm: bool):
        super().__init__()
        if norm:
            self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        x = F.transpose(F.flatten(x, 2), 1, 2)
        return self.norm(x) if "norm" in self._modules else x


class PatchUnEmbed(nn.Module):
    """Tokens (B, H*W, C) -> (B, C, H, W)."""

    def forward(self, x, x_size):
        return F.reshape(F.transpose(x, 1, 2), (x.shape[0], x.shape[2], *x_size))


def token_stem(model, in_chans: int, embed_dim: int, patch_embed, resolution, drop_rate) -> None:
    """The SwinIR family's shallow features and tokens, in the original's key order: conv_first,
    patch_embed (the given module), patch_unembed, absolute_pos_embed (when model.ape) and pos_drop."""
    model.conv_first = nn.Conv2d(in_chans, embed_dim, 3, padding=1)
    model.patch_embed = patch_embed
    model.patch_unembed = PatchUnEmbed()
    if model.ape:
        model.absolute_pos_embed = nn.Parameter(
            np.zeros((1, resolution[0] * resolution[1], embed_dim), np.float32))
        init.trunc_normal_(model.absolute_pos_embed, std=0.02)
    model.pos_drop = nn.Dropout(drop_rate)


class RSTB(nn.Module):
    """Residual Swin Transformer block: tokens x -> embed(conv(unembed(blocks(x)))) + x."""

    def __init__(self, dim, input_resolution, depth, resi_connection, **block_kw):
        super().__init__()
        self.residual_group = BasicLayer(dim, input_resolution, depth, **block_kw)
        self.conv = _resi_conv(dim, resi_connection)
        self.patch_embed = PatchEmbed(dim, norm=False)
        self.patch_unembed = PatchUnEmbed()

    def forward(self, x, x_size):
        y = self.patch_unembed(self.residual_group(x, x_size), x_size)
        return self.patch_embed(self.conv(y)) + x


class UpsampleOneStep(nn.Sequential):
    """Lightweight SR: one conv to num_out_ch * scale^2 channels, one pixel shuffle."""

    def __init__(self, scale: int, num_feat: int, num_out_ch: int):
        super().__init__(nn.Conv2d(num_feat, scale * scale * num_out_ch, 3, padding=1),
                         nn.PixelShuffle(scale))


def build_reconstruction(net, embed_dim: int, out_ch: int, owner: str) -> None:
    """The tail SwinIR's family builds on `net` (its .upsampler and .scale set) in the original's
    key order: pixelshuffle (conv_before_upsample, upsample, conv_last), pixelshuffledirect
    (upsample), nearest+conv (conv_before_upsample, one conv_up per x2 stage, conv_hr, conv_last;
    net.ups names the conv_ups) or "" (conv_last). SwinIR's and ATD's."""
    if net.upsampler in ("pixelshuffle", "nearest+conv"):
        net.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, _NUM_FEAT, 3, padding=1),
                                                 nn.LeakyReLU())  # torch's default slope 0.01
    if net.upsampler == "pixelshuffle":
        net.upsample = PixelShuffleUpsampler(net.scale, _NUM_FEAT, owner)
        net.conv_last = nn.Conv2d(_NUM_FEAT, out_ch, 3, padding=1)
    elif net.upsampler == "pixelshuffledirect":
        net.upsample = UpsampleOneStep(net.scale, embed_dim, out_ch)
    elif net.upsampler == "nearest+conv":  # one conv_up per x2 stage (spandrel's x2 and x8)
        net.ups = [f"conv_up{i + 1}" for i in range(net.scale.bit_length() - 1)]
        for key in (*net.ups, "conv_hr"):
            setattr(net, key, nn.Conv2d(_NUM_FEAT, _NUM_FEAT, 3, padding=1))
        net.conv_last = nn.Conv2d(_NUM_FEAT, out_ch, 3, padding=1)
        net.lrelu = nn.LeakyReLU(0.2)
    else:
        net.conv_last = nn.Conv2d(embed_dim, out_ch, 3, padding=1)


# -- the model -------------------------------------------------------------------------------------
def swin_window(resolution, window_size: int) -> int:
    """The window the blocks use: the token grid's side when it is no larger (BasicSR's rule)."""
    return min(resolution) if min(resolution) <= window_size else window_size


def swin_parts(spec: dict, block) -> int:
    """The parameters the SwinIR family's models share: conv_first, the patch embedding's norm,
    the absolute position embedding, every group's blocks (`block(i)`: a block of group i) and
    closing conv, the norm and conv_after_body."""
    c = spec["embed_dim"]
    res = _resolution(spec)
    resi = resi_parameters(c, spec["resi_connection"])
    return (conv(spec["in_chans"], c) + (norm(c) if spec["patch_norm"] else 0)
            + (res[0] * res[1] * c if spec["ape"] else 0) + norm(c) + resi
            + sum(d * block(i) + resi for i, d in enumerate(spec["depths"])))


def _resolution(spec: dict) -> tuple:
    img, patch = spec["img_size"], spec.get("patch_size", 1)
    img = (img, img) if isinstance(img, int) else tuple(img)
    patch = (patch, patch) if isinstance(patch, int) else tuple(patch)
    return img[0] // patch[0], img[1] // patch[1]


def resi_parameters(dim: int, kind: str) -> int:
    """_resi_conv's parameters ('identity': none)."""
    q = dim // 4
    return {"1conv": conv(dim, dim), "3conv": conv(dim, q) + conv(q, q, 1) + conv(q, dim),
            "identity": 0}[kind]


def reconstruction(spec: dict, aux: bool = False) -> tuple[int, int]:
    """(parameters, largest activation per input pixel) of the SwinIR family's reconstruction
    (upsampler) for `spec`: "pixelshuffle" (and Swin2SR's "_aux"), "pixelshuffledirect",
    "nearest+conv", "" (x1)."""
    s, c, out, f = spec["scale"], spec["embed_dim"], spec["in_chans"], _NUM_FEAT
    kind = spec["upsampler"]
    if kind in ("pixelshuffle", "pixelshuffle_aux"):
        extra = conv(out, f) + conv(f, out) + conv(3, f) if kind == "pixelshuffle_aux" else 0
        return conv(c, f) + PixelShuffleUpsampler.parameters(s, f) + conv(f, out) + extra, f * s * s
    if kind == "pixelshuffledirect":
        return conv(c, out * s * s), out * s * s
    if kind == "nearest+conv":
        return conv(c, f) + ((s.bit_length() - 1) + 1) * conv(f, f) + conv(f, out), f * s * s
    return conv(c, out), c


def swin_card(spec: dict, params: int, act: int, pads_to: int):
    """The SwinIR family's Card: in_chans in and out, reflect-padded to the window inside; one
    ONNX graph for every size (the padding, partition and shifted-window mask built from the
    input's shape in the graph)."""
    return image_card(spec["scale"], spec["in_chans"], spec["in_chans"], params, act,
                      pads_to=pads_to, channel_keys=("in_chans",))



@MODELS.register()
class SwinIR(nn.Module):
    """SwinIR: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (BasicSR's names and defaults; `scale` is BasicSR's `upscale`):
        img_size: training patch side (int or (H, W)), default 64: fixes the stored attn_mask;
            other sizes run too (the mask is computed for them).
        patch_size: default 1 (the token grid is img_size // patch_size).
        in_chans: image channels, default 3 (the output has as many).
        embed_dim: token features, default 96.
        depths: Swin blocks per RSTB, default (6, 6, 6, 6).
        num_heads: attention heads per RSTB (each divides embed_dim), default (6, 6, 6, 6).
        window_size: attention window side, default 7.
        mlp_ratio: MLP hidden features / embed_dim, default 4.
        qkv_bias: biases on q, k, v, default True. qk_scale: default None (head_dim^-0.5).
        drop_rate, attn_drop_rate: dropout after the embedding / MLP / projection, and on the
            attention weights, default 0.
        drop_path_rate: stochastic depth, rising linearly from 0 to this over all blocks, default 0.1
            (from the framework's generator; the identity in eval()).
        ape: a learnt absolute position embedding (then the padded input must be img_size), default False.
        patch_norm: LayerNorm after the patch embedding, default True.
        scale: upscaling factor, default 2: "pixelshuffle" 2^n or 3, "pixelshuffledirect" any,
            "nearest+conv" 2, 4 or 8 (conv_up1, conv_up2, conv_up3 as needed), "" 1.
        img_range: images are multiplied by this after the mean shift, default 1 (the official
            JPEG artifact-reduction models: 255).
        upsampler: "" (default: denoising, JPEG; x1), "pixelshuffle" (classical SR),
            "pixelshuffledirect" (lightweight SR), "nearest+conv" (real-world SR).
        resi_connection: the conv closing each RSTB and the body, "1conv" (default) or "3conv".
    """

    def __init__(self, img_size=64, patch_size=1, in_chans: int = 3, embed_dim: int = 96,
                 depths=(6, 6, 6, 6), num_heads=(6, 6, 6, 6), window_size: int = 7,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, qk_scale=None, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1, ape: bool = False,
                 patch_norm: bool = True, scale: int = 2, img_range: float = 1.0, upsampler: str = "",
                 resi_connection: str = "1conv"):
        super().__init__()
        name = "SwinIR"
        img_size = pair(name, "img_size", img_size, minimum=1)
        patch_size = pair(name, "patch_size", patch_size, minimum=1)
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim)
        depths = int_list(name, "depths", depths, minimum=0)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depths))
        bad = [h for h in num_heads if embed_dim % h]
        if bad:
            raise ValueError(f"{name}: num_heads must divide embed_dim {embed_dim}, got {bad[0]}")
        window_size = int_arg(name, "window_size", window_size)
        o = swin_options(name, embed_dim, mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate,
                         drop_path_rate, ape, patch_norm, img_range)
        mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate, drop_path_rate, patch_norm = (
            o.mlp_ratio, o.qkv_bias, o.qk_scale, o.drop_rate, o.attn_drop_rate, o.drop_path_rate,
            o.patch_norm)
        self.ape, self.img_range = o.ape, o.img_range
        self.upsampler = choice(name, "upsampler", upsampler, _UPSAMPLERS)
        resi_connection = choice(name, "resi_connection", resi_connection, _RESI)
        if resi_connection == "3conv" and embed_dim < 4:
            raise ValueError(f"{name}: resi_connection '3conv' needs embed_dim >= 4 (it narrows to "
                             f"embed_dim // 4), got {embed_dim}")
        self.scale = self._check_scale(name, scale)
        resolution = (img_size[0] // patch_size[0], img_size[1] // patch_size[1])
        if min(resolution) < 1:
            raise ValueError(f"{name}: img_size {img_size} is smaller than patch_size {patch_size}")
        self.patches_resolution = resolution
        # the blocks' window: smaller when the token grid is (BasicSR's rule); inputs pad to it
        self.window_size = min(window_size, min(resolution))
        # constants, not buffers (as BasicSR): they stay out of the state_dict
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        token_stem(self, in_chans, embed_dim, PatchEmbed(embed_dim, patch_norm), resolution, drop_rate)
        rates = np.linspace(0, drop_path_rate, sum(depths)).tolist()  # stochastic depth decay rule
        self.layers = nn.ModuleList()
        for i, depth in enumerate(depths):
            start = sum(depths[:i])
            self.layers.append(RSTB(
                embed_dim, resolution, depth, resi_connection, num_heads=num_heads[i],
                window_size=window_size, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, qk_scale=qk_scale,
                drop=drop_rate, attn_drop=attn_drop_rate, drop_path=rates[start:start + depth]))
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        self._reconstruction(embed_dim, in_chans)
        self._init_weights()

    def _check_scale(self, name, scale):
        if self.upsampler == "pixelshuffle":
            return upsampler_scale(name, scale)
        scale = int_arg(name, "scale", scale)
        if self.upsampler == "nearest+conv" and scale not in (2, 4, 8):
            raise ValueError(f"{name}: upsampler 'nearest+conv' upsamples x2, x4 or x8 (one x2 "
                             f"stage per conv_up): scale must be 2, 4 or 8, got {scale}")
        if self.upsampler == "" and scale != 1:
            raise ValueError(f"{name}: upsampler '' does not upsample (denoising, JPEG): scale must "
                             f"be 1, got {scale} (BasicSR ignores upscale there: pass scale 1, or "
                             f"an upsampler)")
        return scale

    def _reconstruction(self, embed_dim, out_ch):
        build_reconstruction(self, embed_dim, out_ch, "SwinIR")

    def _init_weights(self):
        """BasicSR's _init_weights: Linear weights ~ trunc_normal(std 0.02), biases 0; LayerNorm
        ones / zeros (their default); convolutions keep torch's default."""
        trunc_normal_linears(self)

    def forward_features(self, x):
        """(N, embed_dim, H, W) -> same: tokens through every RSTB, then the norm."""
        x_size = (x.shape[2], x.shape[3])
        x = embed_tokens(self, x, "SwinIR")
        for layer in self.layers:
            x = layer(x, x_size)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"SwinIR: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image = x
        x = F.pad_to_multiple(x, self.window_size)  # SwinIR's test-time padding (reflect)
        mean = self.mean.astype(x.dtype, copy=False)
        x = (x - mean) * self.img_range
        feat = self.conv_first(x)
        feat = self.conv_after_body(self.forward_features(feat)) + feat
        if self.upsampler == "pixelshuffle":
            out = self.conv_last(self.upsample(self.conv_before_upsample(feat)))
        elif self.upsampler == "pixelshuffledirect":
            out = self.upsample(feat)
        elif self.upsampler == "nearest+conv":
            feat = self.conv_before_upsample(feat)
            for up in self.ups:
                feat = self.lrelu(getattr(self, up)(F.interpolate(feat, scale_factor=2,
                                                                  mode="nearest")))
            out = self.conv_last(self.lrelu(self.conv_hr(feat)))
        else:
            out = x + self.conv_last(feat)
        return F.crop_to(out / self.img_range + mean, image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """embed_dim and in_chans from conv_first; per RSTB its blocks (depths) and heads (the bias
        table's columns); window_size from the table's rows ((2w - 1)^2); img_size from a shifted
        block's attn_mask (its windows: a square grid of side sqrt(nW) * w assumed; absent when no
        block shifts: 64, or the window when odd blocks exist but none shifts); mlp_ratio from fc1;
        upsampler, resi_connection, ape, patch_norm, qkv_bias from which keys exist; scale from the
        upsampler (nearest+conv: x2 per conv_up). A given keyword the shapes allow is kept (an
        mlp_ratio giving the same width, ...). The weights do not tell img_range: SwinIR's official
        test code (main_test_swinir.py) runs its JPEG artifact-reduction models, the only ones with
        window 7, with 255 and every other (window 8) with 1, as spandrel does: window 7 assumes
        255 and says so (BasicSR's default window is 7 too), any other window 1. qk_scale and the
        drop rates change nothing at inference: defaults unless given."""
        if "conv_first.1.weight" in shapes:
            raise NoMatch("conv_first.1: a pixel unshuffle before conv_first (spandrel's "
                          "start_unshuffle variant), which srgrad's SwinIR does not have")
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        layers = count(shapes, "layers", "")
        given_heads = known.get("num_heads") if isinstance(known.get("num_heads"), (list, tuple)) \
            else ()
        depths, heads, window, mlp_ratio, qkv_bias = [], [], None, 4.0, True
        img_size, odd_blocks = None, False
        for i in range(layers):
            prefix = f"layers.{i}.residual_group.blocks"
            depth = count(shapes, prefix, ".norm1.weight")
            depths.append(depth)
            if not depth:  # no block: no weight fixes its heads
                heads.append(given_heads[i] if i < len(given_heads) else 6)
                continue
            need(shapes, f"{prefix}.0.attn.relative_position_index")  # HAT keeps it on the model
            rows, nh = need(shapes, f"{prefix}.0.attn.relative_position_bias_table", 2)
            heads.append(nh)
            side = (math.isqrt(rows) + 1) // 2
            if (2 * side - 1) ** 2 != rows:
                raise NoMatch(f"{prefix}.0.attn.relative_position_bias_table has {rows} rows: not "
                              f"(2 w - 1)^2 for a window w")
            window = side
            hidden = need(shapes, f"{prefix}.0.mlp.fc1.weight", 2)[0]
            mlp_ratio = hidden / embed_dim
            if int(embed_dim * mlp_ratio) < hidden:  # 7 / 3 * 3 = 6.999...: the next float up
                mlp_ratio = float(np.nextafter(mlp_ratio, np.inf))
            given = known.get("mlp_ratio")
            if isinstance(given, (int, float)) and given > 0 and int(embed_dim * given) == hidden:
                mlp_ratio = given
            qkv_bias = f"{prefix}.0.attn.qkv.bias" in shapes
            odd_blocks = odd_blocks or depth > 1
            if f"{prefix}.1.attn_mask" in shapes and img_size is None:
                nw = need(shapes, f"{prefix}.1.attn_mask", 3)[0]
                grid = math.isqrt(nw)
                img_size = grid * window if grid * grid == nw else Unknown(
                    64, f"{nw} shifted windows are not a square grid", None)
        window = window or 7
        if img_size is None:
            img_size = window if odd_blocks else 64
        if isinstance(img_size, int) and isinstance(known.get("patch_size"), int):
            img_size *= known["patch_size"]
        if "conv_after_body.weight" in shapes:
            resi = "1conv"
        elif "conv_after_body.0.weight" in shapes:
            resi = "3conv"
        else:
            raise NoMatch("no conv_after_body")
        if "conv_up1.weight" in shapes:
            ups = 1
            while f"conv_up{ups + 1}.weight" in shapes:
                ups += 1
            if ups > 3:
                raise NoMatch(f"nearest+conv with {ups} conv_up's: x2, x4 or x8 has 1 to 3")
            upsampler, scale = "nearest+conv", 2 ** ups
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
        if window == 7:
            img_range = Assumed(255.0, "SwinIR's official JPEG artifact-reduction models, the only "
                                       "ones with window 7, run with 255 (spandrel too)")
        else:
            img_range = Assumed(1.0, "SwinIR's official models with window 8", quiet=True)
        return {"img_size": img_size, "in_chans": in_chans, "embed_dim": embed_dim,
                "depths": tuple(depths), "num_heads": tuple(heads), "window_size": window,
                "mlp_ratio": mlp_ratio, "qkv_bias": qkv_bias, "ape": "absolute_pos_embed" in shapes,
                "patch_norm": "patch_embed.norm.weight" in shapes, "scale": scale,
                "upsampler": upsampler, "resi_connection": resi, "img_range": img_range}

    @staticmethod
    def card(spec: dict):
        """conv_first, RSTBs of Swin blocks (two norms, the bias table of the block's window,
        qkv, proj, the MLP) and their convs, the reconstruction (swin_parts, reconstruction).
        The attention matrices, heads x window^2 per pixel, are the largest arrays but for the
        upsampler's."""
        c, heads = spec["embed_dim"], list(spec["num_heads"])
        w = swin_window(_resolution(spec), spec["window_size"])
        hidden = int(c * spec["mlp_ratio"])

        def block(i):
            return (2 * norm(c) + (2 * w - 1) ** 2 * heads[i] + linear(c, 3 * c, spec["qkv_bias"])
                    + linear(c, c) + linear(c, hidden) + linear(hidden, c))
        up, up_act = reconstruction(spec)
        act = max([h * w * w for h in heads] + [3 * c, hidden, up_act, c * spec["scale"] ** 2])
        return swin_card(spec, swin_parts(spec, block) + up, act, w)
