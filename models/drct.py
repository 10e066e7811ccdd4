"""DRCT, the Dense-residual-connected Transformer (Hsu, Lee and Chen, "DRCT: Saving Image
Super-resolution away from Information Bottleneck", CVPRW 2024; ming053l/DRCT drct/archs/DRCT_arch.py,
as spandrel 0.4.2 and traiNNer-redux read it): SwinIR's layout (mean shift -> conv_first -> groups
on tokens -> norm -> conv_after_body + long skip -> pixel-shuffle reconstruction -> mean shift back)
whose group is a residual dense group (RDG) of five Swin blocks instead of SwinIR's chain:

    x1 = lrelu(adjust1(swin1(x)))             x4 = lrelu(adjust4(swin4([x, x1, x2, x3])))
    x2 = lrelu(adjust2(swin2([x, x1])))       x5 = adjust5(swin5([x, x1, x2, x3, x4]))
    x3 = lrelu(adjust3(swin3([x, x1, x2])))   RDG(x) = 0.2 x5 + x

Block k sees dim + (k - 1) gc features (the concatenation, gc the growth channels) and adjust_k is a
1x1 conv to gc (adjust5 back to dim), LeakyReLU 0.2 between. The blocks alternate unshifted /
shifted windows (swin2 and swin4 shifted by half a window); swin4 and swin5 have MLP ratio 1;
block k has num_heads - ((dim + (k - 1) gc) mod num_heads) heads (the original's rule: DRCT's
180 + 32 k features on 6 heads give 6, 4, 2, 6, 4). The Swin blocks are SwinIR's (models/swinir.py:
the same keys, buffers and fused window attention).

DRCT (6 groups) and DRCT-L (12 groups), 180 features, 6 heads, window 16, MLP x2, gc 32, and
Real-DRCT-GAN (DRCT-L's) are this architecture at different sizes. `depths` builds nothing: it only
spaces the stochastic depth (group i's blocks all take rate i of linspace(0, drop_path_rate,
sum(depths)) at index sum(depths[:i]), the original's rule); every published file uses 6 per group.

Any input size runs: reflect-padded at the bottom and right to a multiple of the window (replicated
past what the image can reflect: spandrel's call API, whose multiple of 16 is the window of every
published file; the original's test code and traiNNer-redux reflect-pad to the window), the output
cropped. The original builds only the "pixelshuffle" reconstruction: its upsampler "" (x1) forward
skips the whole network and returns the input, which srgrad refuses to build.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import choice, int_arg, int_list, pair
from framework.detect import NoMatch, count, need
from framework.registry import MODELS

from ._blocks import (PixelShuffleUpsampler, embed_tokens, pad_to_requirement, swin_options,
                      trunc_normal_linears, upsampler_scale)
from .swinir import PatchEmbed, PatchUnEmbed, SwinTransformerBlock, token_stem

_RGB_MEAN = (0.4488, 0.4371, 0.4040)
_NUM_FEAT = 64  # the reconstruction's features, fixed in the original
_BLOCKS = 5  # Swin blocks per RDG
_MLP_ONE = (3, 4)  # swin4 and swin5 (0-based 3, 4) have MLP ratio 1 in the original


def block_heads(dim: int, num_heads: int, k: int, gc: int) -> int:
    """Heads of the RDG's block k (0-based) on dim + k gc features: the original's
    num_heads - ((dim + k gc) % num_heads)."""
    return num_heads - ((dim + k * gc) % num_heads)


class RDG(nn.Module):
    """Residual dense group on tokens (B, H*W, dim): five Swin blocks on the growing concatenation,
    each followed by a 1x1 conv (adjust_k) to gc features (the last back to dim); 0.2 x5 + x."""

    def __init__(self, dim, input_resolution, num_heads, window_size, mlp_ratio, qkv_bias,
                 qk_scale, drop, attn_drop, drop_path, gc):
        super().__init__()
        for k in range(_BLOCKS):
            width = dim + k * gc
            setattr(self, f"swin{k + 1}", SwinTransformerBlock(
                width, input_resolution, block_heads(dim, num_heads, k, gc), window_size,
                window_size // 2 if k % 2 else 0, 1.0 if k in _MLP_ONE else mlp_ratio, qkv_bias,
                qk_scale, drop, attn_drop, drop_path))
            setattr(self, f"adjust{k + 1}", nn.Conv2d(width, dim if k == _BLOCKS - 1 else gc, 1))
        self.lrelu = nn.LeakyReLU(0.2)
        self.pe = PatchEmbed(dim, norm=False)
        self.pue = PatchUnEmbed()

    def forward(self, x, x_size):
        feats = [x]
        for k in range(1, _BLOCKS + 1):
            y = getattr(self, f"swin{k}")(feats[0] if k == 1 else F.cat(feats, -1), x_size)
            y = getattr(self, f"adjust{k}")(self.pue(y, x_size))
            feats.append(self.pe(self.lrelu(y) if k < _BLOCKS else y))
        return feats[-1] * 0.2 + x


@MODELS.register()
class DRCT(nn.Module):
    """DRCT: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (the original's names and defaults but two: `scale` is its `upscale` and, with the
    upsampler, defaults to the x2 pixel shuffle; the original's x1 "" upsampler runs no network):
        img_size: training patch side (int or (H, W)), default 64: fixes the stored attn_mask
            buffers (other sizes run too, the mask computed for them); when the token grid is no
            larger than the window, the window shrinks to it and no block shifts.
        patch_size: default 1 (the token grid is img_size // patch_size).
        in_chans: image channels, default 3 (the output has as many).
        embed_dim: token features, default 180.
        depths: one entry per RDG (their number); the values only space the stochastic depth
            (module docstring), default (6,) * 6 (DRCT; DRCT-L: (6,) * 12).
        num_heads: heads per RDG, default (6,) * 6; block k of a group uses num_heads -
            ((embed_dim + k gc) % num_heads), which must divide embed_dim + k gc.
        window_size: attention window side, default 16.
        mlp_ratio: MLP hidden features / features of the first three blocks, default 2 (the
            last two: 1).
        qkv_bias: biases on q, k, v, default True. qk_scale: default None (head_dim^-0.5).
        drop_rate, attn_drop_rate, drop_path_rate: dropout after the embedding / MLPs /
            projections, on the attention weights, and the stochastic depth, default 0, 0, 0.1.
        ape: a learnt absolute position embedding (the padded input must then be img_size),
            default False.
        patch_norm: LayerNorm after the patch embedding, default True.
        scale: upscaling factor, default 2: 2^n or 3 (pixel-shuffle stages).
        img_range: images are multiplied by this after the mean shift, default 1.
        upsampler: "pixelshuffle", the only reconstruction the original runs.
        resi_connection: the conv after the body, "1conv" (default, a 3x3 conv) or "identity".
        gc: growth channels of the dense groups, default 32.
    """

    def __init__(self, img_size=64, patch_size=1, in_chans: int = 3, embed_dim: int = 180,
                 depths=(6, 6, 6, 6, 6, 6), num_heads=(6, 6, 6, 6, 6, 6), window_size: int = 16,
                 mlp_ratio: float = 2.0, qkv_bias: bool = True, qk_scale=None,
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1, ape: bool = False, patch_norm: bool = True,
                 scale: int = 2, img_range: float = 1.0, upsampler: str = "pixelshuffle",
                 resi_connection: str = "1conv", gc: int = 32):
        super().__init__()
        name = "DRCT"
        img_size = pair(name, "img_size", img_size, minimum=1)
        patch_size = pair(name, "patch_size", patch_size, minimum=1)
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim)
        depths = int_list(name, "depths", depths, minimum=1)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depths))
        gc = int_arg(name, "gc", gc)
        for h in num_heads:
            for k in range(_BLOCKS):
                width, heads = embed_dim + k * gc, block_heads(embed_dim, h, k, gc)
                if width % heads:
                    raise ValueError(
                        f"{name}: num_heads {h} gives swin{k + 1} ({width} features) {heads} heads, "
                        f"which do not divide {width} (the original's rule: num_heads - "
                        f"(features % num_heads)); choose num_heads, embed_dim or gc so they do")
        self.window_size = int_arg(name, "window_size", window_size)
        o = swin_options(name, embed_dim, mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate,
                         drop_path_rate, ape, patch_norm, img_range)
        mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate, drop_path_rate, patch_norm = (
            o.mlp_ratio, o.qkv_bias, o.qk_scale, o.drop_rate, o.attn_drop_rate, o.drop_path_rate,
            o.patch_norm)
        self.ape, self.img_range = o.ape, o.img_range
        self.upsampler = choice(name, "upsampler", upsampler, ("pixelshuffle",))
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "identity"))
        self.scale = upsampler_scale(name, scale)
        resolution = (img_size[0] // patch_size[0], img_size[1] // patch_size[1])
        if min(resolution) < 1:
            raise ValueError(f"{name}: img_size {img_size} is smaller than patch_size {patch_size}")
        self.patches_resolution = resolution
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        token_stem(self, in_chans, embed_dim, PatchEmbed(embed_dim, patch_norm), resolution, drop_rate)
        rates = np.linspace(0, drop_path_rate, sum(depths)).tolist()
        self.layers = nn.ModuleList([
            RDG(embed_dim, resolution, num_heads[i], self.window_size, mlp_ratio, qkv_bias, qk_scale,
                drop_rate, attn_drop_rate, rates[sum(depths[:i])], gc) for i in range(len(depths))])
        self.norm = nn.LayerNorm(embed_dim)
        if resi_connection == "1conv":
            self.conv_after_body = nn.Conv2d(embed_dim, embed_dim, 3, padding=1)
        else:
            self.conv_after_body = nn.Identity()
        self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, _NUM_FEAT, 3, padding=1),
                                                  nn.LeakyReLU())  # torch's default slope 0.01
        self.upsample = PixelShuffleUpsampler(self.scale, _NUM_FEAT, name)
        self.conv_last = nn.Conv2d(_NUM_FEAT, in_chans, 3, padding=1)
        trunc_normal_linears(self)  # the original's: Linear trunc_normal(0.02), LayerNorm 1 / 0

    def forward_features(self, x):
        """(N, embed_dim, H, W) -> same: tokens through every RDG, then the norm."""
        x_size = (x.shape[2], x.shape[3])
        x = embed_tokens(self, x, "DRCT")
        for layer in self.layers:
            x = layer(x, x_size)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"DRCT: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image = x
        x = pad_to_requirement(x, 0, self.window_size)
        mean = self.mean.astype(x.dtype, copy=False)
        x = (x - mean) * self.img_range
        feat = self.conv_first(x)
        feat = self.conv_after_body(self.forward_features(feat)) + feat
        out = self.conv_last(self.upsample(self.conv_before_upsample(feat)))
        return F.crop_to(out / self.img_range + mean, image, self.scale)

    @staticmethod
    def card(spec: dict):
        """The facts of framework/card.py (h-cards' API): conv_first, the patch norm, the RDGs
        (block k: two norms, its window's bias table, qkv, proj, the MLP; adjust_k), the norm,
        conv_after_body, the reconstruction. The largest arrays: a block's attention, heads x
        window^2 per pixel, its qkv or MLP, or the upsampler's. Reflect-padded to the window
        inside; one ONNX graph per input size."""
        from framework.card import conv, image_card, linear, norm  # noqa: PLC0415 (h-cards)
        c, gc, s, f = spec["embed_dim"], spec["gc"], spec["scale"], _NUM_FEAT
        img = spec["img_size"] if isinstance(spec["img_size"], (list, tuple)) else (spec["img_size"],) * 2
        patch = spec["patch_size"] if isinstance(spec["patch_size"], (list, tuple)) else (spec["patch_size"],) * 2
        res = (img[0] // patch[0], img[1] // patch[1])
        window = min(res) if min(res) <= spec["window_size"] else spec["window_size"]
        params = conv(spec["in_chans"], c) + (norm(c) if spec["patch_norm"] else 0) + norm(c)
        params += res[0] * res[1] * c if spec["ape"] else 0
        params += conv(c, c) if spec["resi_connection"] == "1conv" else 0
        stages = [4] * (s.bit_length() - 1) if s & (s - 1) == 0 else [9]
        params += conv(c, f) + sum(conv(f, k * f) for k in stages) + conv(f, spec["in_chans"])
        act = [f * s * s]
        for heads in spec["num_heads"]:
            for k in range(_BLOCKS):
                width, h = c + k * gc, block_heads(c, heads, k, gc)
                hidden = int(width * (1.0 if k in _MLP_ONE else spec["mlp_ratio"]))
                params += (2 * norm(width) + (2 * window - 1) ** 2 * h
                           + linear(width, 3 * width, spec["qkv_bias"]) + linear(width, width)
                           + linear(width, hidden) + linear(hidden, width)
                           + conv(width, c if k == _BLOCKS - 1 else gc, 1))
                act += [h * window * window, 3 * width, hidden]
        return image_card(s, spec["in_chans"], spec["in_chans"], params, max(act),
                          pads_to=spec["window_size"], channel_keys=("in_chans",))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: in_chans, embed_dim from conv_first; per RDG its heads (swin1's bias
        table columns); window_size from that table's (2w - 1)^2 rows; mlp_ratio from swin1's fc1;
        gc from adjust1; scale from the upsampler (a file without conv_last is the original's x1
        "" upsampler, whose forward runs no network: refused); qkv_bias, patch_norm, ape,
        resi_connection from which keys exist; img_size from swin2's attn_mask (a square grid of
        windows), from absolute_pos_embed, else the window (the grid was no larger). depths builds
        nothing (it spaces the stochastic depth only): 6 per group, every published file's (a
        given depths with one entry per group is kept). img_range changes no weight: 1, every
        published file's, unless given."""
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        layers = count(shapes, "layers", ".swin1.norm1.weight")
        if not layers:
            raise NoMatch("no layers.0.swin1 (an RDG's first Swin block)")
        heads = [need(shapes, f"layers.{i}.swin1.attn.relative_position_bias_table", 2)[1]
                 for i in range(layers)]
        first = "layers.0.swin1"
        rows = need(shapes, f"{first}.attn.relative_position_bias_table", 2)[0]
        window = (math.isqrt(rows) + 1) // 2
        if (2 * window - 1) ** 2 != rows:
            raise NoMatch(f"{first}.attn.relative_position_bias_table has {rows} rows: not "
                          f"(2 w - 1)^2 for a window w")
        hidden = need(shapes, f"{first}.mlp.fc1.weight", 2)[0]
        mlp_ratio = hidden / embed_dim
        if int(embed_dim * mlp_ratio) < hidden:  # 7 / 3 * 3 = 6.999...: the next float up
            mlp_ratio = float(np.nextafter(mlp_ratio, np.inf))
        gc = need(shapes, "layers.0.adjust1.weight", 4)[0]
        if "conv_last.weight" not in shapes:
            raise NoMatch("no conv_last: the original's x1 upsampler '' returns its input without "
                          "running the network, which srgrad does not build")
        num_feat = need(shapes, "conv_last.weight", 4)[1]
        if num_feat != _NUM_FEAT:
            raise NoMatch(f"conv_last takes {num_feat} features, not the original's {_NUM_FEAT}")
        scale = PixelShuffleUpsampler.detect_scale(shapes, "upsample", _NUM_FEAT)
        patch = known.get("patch_size") if isinstance(known.get("patch_size"), int) else 1
        if "absolute_pos_embed" in shapes:
            img_size = math.isqrt(need(shapes, "absolute_pos_embed", 3)[1]) * patch
        elif "layers.0.swin2.attn_mask" in shapes:
            nw = need(shapes, "layers.0.swin2.attn_mask", 3)[0]
            grid = math.isqrt(nw)
            if grid * grid != nw:
                raise NoMatch(f"layers.0.swin2.attn_mask holds {nw} windows: not a square grid")
            img_size = grid * window * patch
        else:
            img_size = window * patch
        depths = known.get("depths")
        if not (isinstance(depths, (list, tuple)) and len(depths) == layers):
            depths = (6,) * layers
        return {"img_size": img_size, "in_chans": in_chans, "embed_dim": embed_dim,
                "depths": tuple(depths), "num_heads": tuple(heads), "window_size": window,
                "mlp_ratio": mlp_ratio, "qkv_bias": f"{first}.attn.qkv.bias" in shapes,
                "ape": "absolute_pos_embed" in shapes,
                "patch_norm": "patch_embed.norm.weight" in shapes, "scale": scale,
                "resi_connection": "1conv" if "conv_after_body.weight" in shapes else "identity",
                "gc": gc}
