"""Uformer (Wang et al., "Uformer: A General U-Shaped Transformer for Image Restoration", CVPR 2022;
github.com/ZhendongWang6/Uformer, as spandrel 0.4.2's Uformer architecture reads it): a U-Net of
LeWin transformer blocks at scale 1 (denoising, deblurring, deraining).

A 3x3 conv + LeakyReLU (input_proj) to embed_dim tokens; four encoder levels (a BasicUformerLayer
of LeWin blocks, then a 4x4 stride-2 conv doubling the features: dowsample_i, the original's
spelling); a bottleneck layer (`conv`) at 16 embed_dim; four decoder levels (a 2x2 stride-2
transposed conv, upsample_i, concatenated with the encoder level's tokens, then a layer on the
concatenation); a 3x3 conv (output_proj) from 2 embed_dim to in_chans, plus the input when dd_in
is 3 (the original's rule). A LeWin block on tokens (B, H*W, C) is

    x = x + attn(window_partition(shift(norm1(x))) [+ modulator.weight])    (every other block of
    x = x + mlp(norm2(x))                                                      a layer shifted by
                                                                               win_size // 2)

with window attention (a relative-position bias table per block, the -100 mask between shifted
regions, q k v from linears, token_projection "linear", or from per-window depthwise-separable
convs, "conv") and the feed-forward token_mlp "leff" (linear, GELU, depthwise 3x3 conv on the
image, GELU, linear: locally-enhanced), "fastleff" (a full 3x3 conv there) or "mlp" / "ffn" (two
linears). The decoder's modulator is a learnt (win_size^2, C) embedding added to every window
before its attention; a cross_modulator adds, before that, attention of every token to a
learnt (win_size^2, C) embedding (the original's forward passes x, not norm_cross(x), to it; its
norm_cross is kept for the keys and unused, as there). When a level's resolution for img_size is no
larger than the window, the window shrinks to it and nothing shifts (the original's rule).

The original runs square inputs whose side is a multiple of win_size * 16 only; spandrel's size
requirement pads to a square multiple of 128 (win_size 8's). srgrad pads as spandrel's call does
inside the forward (bottom and right, by reflection as far as the image allows, then replication)
to a square whose side is a multiple of lcm(128, the window times 16) and crops the output back,
so any input runs and gives spandrel's image.

Published (the repository's get_arch; spandrel reads every keyword below from the keys except
img_size, shift_flag and the dropout rates, for which its defaults 256, True, 0 / 0 / 0.1 hold):
    Uformer_T   embed_dim 16, depths [2] * 9, num_heads [1, 2, 4, 8, 16, 16, 8, 4, 2]
    Uformer_S   embed_dim 32, the same depths and heads
    Uformer_B   embed_dim 32, depths [1, 2, 8, 8, 2, 8, 8, 2, 1] (SIDD denoising, GoPro deblurring)
all win_size 8, mlp_ratio 4, token_projection "linear", token_mlp "leff", modulator True; the
variants Uformer_S_noshift (shift_flag False: not in the keys, `--model-arg shift_flag=false`)
and Uformer_B_fastleff (token_mlp "fastleff").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import Card, conv, linear, norm
from framework.check import choice, flag, int_arg, int_list
from framework.detect import Assumed, NoMatch, count, need
from framework.functional.attention import relative_position_index, shift_mask
from framework.nn import init
from framework.registry import MODELS

from ._blocks import swin_options, trunc_normal_linears

_LEVELS = ("encoderlayer_0", "encoderlayer_1", "encoderlayer_2", "encoderlayer_3", "conv",
           "decoderlayer_0", "decoderlayer_1", "decoderlayer_2", "decoderlayer_3")
_SPANDREL_MULTIPLE = 128  # spandrel's SizeRequirements(multiple_of=128, square=True)
TOKEN_PROJECTIONS = ("linear", "conv")
TOKEN_MLPS = ("leff", "fastleff", "mlp", "ffn")


def _image(x, h: int, w: int):
    """Tokens (B, h*w, C) -> (B, C, h, w)."""
    return F.reshape(F.transpose(x, 1, 2), (x.shape[0], x.shape[2], h, w))


def _tokens(x):
    """(B, C, h, w) -> tokens (B, h*w, C)."""
    return F.transpose(F.flatten(x, 2), 1, 2)


class SepConv2d(nn.Module):
    """A depthwise 3x3 conv, ReLU, a pointwise 1x1 conv (Uformer's conv token projection)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.depthwise = nn.Conv2d(cin, cin, 3, padding=1, groups=cin)
        self.pointwise = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return self.pointwise(F.relu(self.depthwise(x)))


class LinearProjection(nn.Module):
    """q = to_q(x), [k | v] = to_kv(kv or x), heads side by side along the channels."""

    def __init__(self, dim: int, bias: bool):
        super().__init__()
        self.to_q = nn.Linear(dim, dim, bias=bias)
        self.to_kv = nn.Linear(dim, 2 * dim, bias=bias)

    def forward(self, x, kv=None):
        q = self.to_q(x)
        if kv is None:
            kv = self.to_kv(x)
        else:  # one (M, C) key / value set for every batch item (the cross modulator's)
            kv = F.expand(F.unsqueeze(self.to_kv(kv), 0), x.shape[0], kv.shape[0], 2 * x.shape[2])
        k, v = F.chunk(kv, 2, dim=-1)
        return q, k, v


class ConvProjection(nn.Module):
    """q, k, v by SepConv2d on each window as a (ws, ws) image (zero padding at its border)."""

    def __init__(self, dim: int):
        super().__init__()
        self.to_q, self.to_k, self.to_v = SepConv2d(dim, dim), SepConv2d(dim, dim), SepConv2d(dim, dim)

    def forward(self, x, kv=None):
        side = math.isqrt(x.shape[1])
        img = _image(x, side, side)
        return tuple(_tokens(f(img)) for f in (self.to_q, self.to_k, self.to_v))


class WindowAttention(nn.Module):
    """Multi-head attention in each window (B', N, C), N = ws^2, with a relative-position bias
    and an optional shift mask (nW, N, N)."""

    def __init__(self, dim: int, ws: int, heads: int, projection: str, qkv_bias: bool, qk_scale,
                 attn_drop: float, proj_drop: float):
        super().__init__()
        self.ws, self.heads = ws, heads
        self.scale = qk_scale or (dim // heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            np.zeros(((2 * ws - 1) ** 2, heads), np.float32))
        self.register_buffer("relative_position_index", relative_position_index(ws, ws))
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.qkv = ConvProjection(dim) if projection == "conv" else LinearProjection(dim, qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, mask=None):
        n = self.ws * self.ws
        table = F.getitem(self.relative_position_bias_table, self.relative_position_index.data.reshape(-1))
        bias = F.permute(F.reshape(table, (n, n, self.heads)), (2, 0, 1))
        return self.proj_drop(self.proj(_attend(self.qkv(x), self.heads, self.scale, bias, mask,
                                                self.attn_drop)))


def _attend(qkv, heads, scale, bias, mask, attn_drop):
    """softmax(scale q k^T + bias + mask) v per head, through attention dropout when it acts."""
    q, k, v = qkv
    if not (attn_drop.training and attn_drop.p > 0):
        return F.attention(q, k, v, heads, scale, bias, mask)
    b, n, c = q.shape
    m, d = k.shape[1], c // heads
    qh, kh, vh = (F.permute(F.reshape(t, (b, t.shape[1], heads, d)), (0, 2, 1, 3)) for t in (q, k, v))
    attn = attn_drop(F.attention_softmax(qh @ F.transpose(kh, -2, -1), scale, bias, mask))
    return F.reshape(F.transpose(attn @ vh, 1, 2), (b, n, c))


class CrossAttention(nn.Module):
    """Uformer's Attention: every token (B, L, C) attends to a (M, C) key / value source, no bias."""

    def __init__(self, dim: int, heads: int, qkv_bias: bool, qk_scale, attn_drop: float,
                 proj_drop: float):
        super().__init__()
        self.heads = heads
        self.scale = qk_scale or (dim // heads) ** -0.5
        self.qkv = LinearProjection(dim, qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, kv):
        return self.proj_drop(self.proj(_attend(self.qkv(x, kv), self.heads, self.scale, None, None,
                                                self.attn_drop)))


class Mlp(nn.Module):
    """fc1, GELU, dropout, fc2, dropout on tokens."""

    def __init__(self, dim: int, hidden: int, drop: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(drop)

    def forward(self, x, h, w):
        return self.drop(self.fc2(self.drop(F.gelu(self.fc1(x)))))


class LeFF(nn.Module):
    """Linear + GELU, a 3x3 conv (depthwise for "leff", full for "fastleff") + GELU on the token
    image, linear."""

    def __init__(self, dim: int, hidden: int, depthwise: bool):
        super().__init__()
        self.linear1 = nn.Sequential(nn.Linear(dim, hidden), nn.GELU())
        self.dwconv = nn.Sequential(
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden if depthwise else 1), nn.GELU())
        self.linear2 = nn.Sequential(nn.Linear(hidden, dim))

    def forward(self, x, h, w):
        return self.linear2(_tokens(self.dwconv(_image(self.linear1(x), h, w))))


class LeWinTransformerBlock(nn.Module):
    """The LeWin block (module docstring) on tokens (B, H*W, C), H and W multiples of the window."""

    def __init__(self, dim, resolution, heads, win_size, shift_size, o, drop_path, token_projection,
                 token_mlp, modulator, cross_modulator):
        super().__init__()
        self.ws, self.shift = win_size, shift_size
        if resolution <= win_size:  # the original's rule, on img_size's resolution
            self.ws, self.shift = resolution, 0
        # the embeddings take the layer's win_size, not the shrunk window (the original's)
        self.modulator = nn.Embedding(win_size * win_size, dim) if modulator else None
        self.cross_modulator = nn.Embedding(win_size * win_size, dim) if cross_modulator else None
        if cross_modulator:
            self.cross_attn = CrossAttention(dim, heads, o.qkv_bias, o.qk_scale, o.attn_drop_rate,
                                             o.drop_rate)
            self.norm_cross = nn.LayerNorm(dim)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, self.ws, heads, token_projection, o.qkv_bias, o.qk_scale,
                                    o.attn_drop_rate, o.drop_rate)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * o.mlp_ratio)
        self.mlp = (Mlp(dim, hidden, o.drop_rate) if token_mlp in ("mlp", "ffn")
                    else LeFF(dim, hidden, token_mlp == "leff"))

    def forward(self, x, h, w):
        b, _, c = x.shape
        ws, shift = self.ws, self.shift
        if self.cross_modulator is not None:
            x = x + self.cross_attn(x, self.cross_modulator.weight)
        y = F.reshape(self.norm1(x), (b, h, w, c))
        if shift:
            y = F.roll(y, (-shift, -shift), (1, 2))
        y = F.window_partition(y, ws)
        if self.modulator is not None:
            y = y + self.modulator.weight
        mask = shift_mask(h, w, ws, shift, np.dtype(x.dtype)) if shift else None
        y = F.window_reverse(self.attn(y, mask), ws, h, w)
        if shift:
            y = F.roll(y, (shift, shift), (1, 2))
        x = x + self.drop_path(F.reshape(y, (b, h * w, c)))
        return x + self.drop_path(self.mlp(self.norm2(x), h, w))


class BasicUformerLayer(nn.Module):
    """`depth` LeWin blocks, the odd ones shifted by win_size // 2 when shift_flag."""

    def __init__(self, dim, resolution, depth, heads, win_size, o, drop_path, token_projection,
                 token_mlp, shift_flag, modulator=False, cross_modulator=False):
        super().__init__()
        self.blocks = nn.ModuleList([
            LeWinTransformerBlock(dim, resolution, heads, win_size,
                                  win_size // 2 if shift_flag and i % 2 else 0, o, drop_path[i],
                                  token_projection, token_mlp, modulator, cross_modulator)
            for i in range(depth)])

    def forward(self, x, h, w):
        for blk in self.blocks:
            x = blk(x, h, w)
        return x


class _Sampler(nn.Module):
    """Tokens -> image -> a conv (in `attr`, a Sequential of one) -> tokens at the new size."""

    def __init__(self, attr: str, layer):
        super().__init__()
        setattr(self, attr, nn.Sequential(layer))
        self._attr = attr

    def forward(self, x, h, w):
        return _tokens(getattr(self, self._attr)(_image(x, h, w)))


@dataclass(frozen=True)
class UformerCard(Card):
    """Uformer's Card: it pads an image to a SQUARE of its longer side (then to the multiple), so
    a 128 x 1024 image runs at 1024 x 1024: the memory budget (autotile) must count that."""

    def padded(self, h: int, w: int) -> tuple[int, int]:
        side = max(super().padded(h, w))
        return side, side


@MODELS.register()
class Uformer(nn.Module):
    """Uformer: (N, dd_in, H, W) -> (N, in_chans, H, W), any H, W >= 1 (padded inside to a square
    multiple of lcm(128, 16 win_size), the output cropped back).

    Args:
        img_size: the training patch side the windows are sized for, default 256 (spandrel's; a
            level whose img_size / 2^i is no larger than win_size gets a window of that side).
        in_chans: output channels, default 3. dd_in: input channels, default 3; the output adds
            the input when dd_in is 3 (then in_chans must be 3).
        embed_dim: features of the first level, default 32.
        depths: LeWin blocks of the nine layers (4 encoder, bottleneck, 4 decoder), default [2] * 9.
        num_heads: heads of the nine layers, default [1, 2, 4, 8, 16, 16, 8, 4, 2].
        win_size: window side, default 8. mlp_ratio: hidden features / features, default 4.
        qkv_bias (default True), qk_scale (default None: head_dim^-0.5), drop_rate, attn_drop_rate,
        drop_path_rate (defaults 0, 0, 0.1: linear over the encoder blocks, mirrored in the decoder,
        the whole rate in the bottleneck), patch_norm (unused, the original's).
        token_projection: "linear" (default) or "conv". token_mlp: "leff" (default), "fastleff",
            "mlp" or "ffn". shift_flag: shift every other block (default True).
        modulator, cross_modulator: the decoder's learnt window embeddings (default False).
        scale: 1 (srgrad's configs and commands pass their scale).
    """

    def __init__(self, img_size: int = 256, in_chans: int = 3, dd_in: int = 3, embed_dim: int = 32,
                 depths=(2,) * 9, num_heads=(1, 2, 4, 8, 16, 16, 8, 4, 2), win_size: int = 8,
                 mlp_ratio=4.0, qkv_bias: bool = True, qk_scale=None, drop_rate=0.0,
                 attn_drop_rate=0.0, drop_path_rate=0.1, patch_norm: bool = True,
                 token_projection: str = "linear", token_mlp: str = "leff", shift_flag: bool = True,
                 modulator: bool = False, cross_modulator: bool = False, scale: int = 1):
        super().__init__()
        name = "Uformer"
        img_size = int_arg(name, "img_size", img_size, 16)  # 16: the bottleneck's side >= 1
        in_chans, dd_in = int_arg(name, "in_chans", in_chans), int_arg(name, "dd_in", dd_in)
        e = int_arg(name, "embed_dim", embed_dim)
        depths = int_list(name, "depths", depths, length=9, minimum=0)
        heads = int_list(name, "num_heads", num_heads, length=9)
        win_size = int_arg(name, "win_size", win_size)
        o = swin_options(name, e, mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate,
                         drop_path_rate, False, patch_norm, 1.0)
        token_projection = choice(name, "token_projection", token_projection, TOKEN_PROJECTIONS)
        token_mlp = choice(name, "token_mlp", token_mlp, TOKEN_MLPS)
        shift_flag = flag(name, "shift_flag", shift_flag)
        modulator, cross_modulator = flag(name, "modulator", modulator), flag(name, "cross_modulator", cross_modulator)
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        if dd_in == 3 and in_chans != 3:
            raise ValueError(f"{name}: with dd_in 3 the output adds the input, so in_chans must be 3, "
                             f"got {in_chans}")
        dims = [e, 2 * e, 4 * e, 8 * e, 16 * e, 16 * e, 8 * e, 4 * e, 2 * e]
        for i, (d, n) in enumerate(zip(dims, heads)):
            if d % n:
                raise ValueError(f"{name}: layer {_LEVELS[i]} has {d} features, not a multiple of "
                                 f"num_heads[{i}] = {n}")
        enc = [float(v) for v in np.linspace(0, o.drop_path_rate, sum(depths[:4]), dtype=np.float32)]
        if sum(depths[5:]) > len(enc):  # the original indexes past its decoder's rates
            raise ValueError(f"{name}: the decoder's depths {list(depths[5:])} hold more blocks than "
                             f"the encoder's {list(depths[:4])} (the original's drop-path rates "
                             f"run out)")
        dec = enc[::-1]
        rates = [enc[sum(depths[:i]):sum(depths[:i + 1])] for i in range(4)]
        rates += [[o.drop_path_rate] * depths[4]]
        rates += [dec[sum(depths[5:5 + i]):sum(depths[5:6 + i])] for i in range(4)]
        self.scale, self.dd_in, self.win_size = 1, dd_in, win_size
        self.pos_drop = nn.Dropout(o.drop_rate)
        self.input_proj = _Proj(nn.Conv2d(dd_in, e, 3, padding=1), nn.LeakyReLU())
        self.output_proj = _Proj(nn.Conv2d(2 * e, in_chans, 3, padding=1))
        windows = []
        for i, attr in enumerate(_LEVELS):
            level = i if i <= 4 else 8 - i
            res = img_size // 2 ** level
            windows.append((2 ** level, min(win_size, res)))
            dec_only = {"modulator": modulator, "cross_modulator": cross_modulator} if i > 4 else {}
            if (modulator or cross_modulator) and i > 4 and res < win_size:
                raise ValueError(f"{name}: {attr}'s window shrinks to {res} (img_size {img_size}), "
                                 f"smaller than the modulator's {win_size}x{win_size} embedding")
            setattr(self, attr, BasicUformerLayer(dims[i], res, depths[i], heads[i], win_size, o,
                                                  rates[i], token_projection, token_mlp, shift_flag,
                                                  **dec_only))
            if i < 4:
                setattr(self, f"dowsample_{i}", _Sampler("conv", nn.Conv2d(dims[i], 2 * dims[i], 4, stride=2, padding=1)))
            elif i < 8:
                setattr(self, f"upsample_{i - 4}", _Sampler("deconv", nn.ConvTranspose2d(
                    dims[i], dims[i + 1] // 2, 2, stride=2)))
        self.multiple = math.lcm(_SPANDREL_MULTIPLE, *(f * w for f, w in windows))
        trunc_normal_linears(self)

    def forward(self, image):
        h0, w0 = image.shape[-2:]
        side = -(-max(h0, w0) // self.multiple) * self.multiple
        x = F.pad_to_requirement(image, side, self.multiple) if (h0, w0) != (side, side) else image
        y = self.pos_drop(self.input_proj(x))
        h = w = side
        skips = []
        for i in range(4):
            y = getattr(self, f"encoderlayer_{i}")(y, h, w)
            skips.append(y)
            y = getattr(self, f"dowsample_{i}")(y, h, w)
            h, w = h // 2, w // 2
        y = self.conv(y, h, w)
        for i in range(4):
            y = F.cat([getattr(self, f"upsample_{i}")(y, h, w), skips[3 - i]], -1)
            h, w = 2 * h, 2 * w
            y = getattr(self, f"decoderlayer_{i}")(y, h, w)
        y = _image(y, h, w)
        y = self.output_proj.proj(y)
        if self.dd_in == 3:
            y = x + y
        return F.crop_to(y, image) if (h0, w0) != (side, side) else y

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's keywords: embed_dim and dd_in from input_proj, in_chans from output_proj, the
        nine depths counted and heads from each layer's first bias table, win_size from its rows
        ((2 w - 1)^2), token_projection "conv" when the q projection has a depthwise conv (qkv_bias
        True), else qkv_bias from to_q's bias, modulator / cross_modulator from the decoder's keys,
        token_mlp and mlp_ratio from the first block's feed-forward ("mlp" when it has fc1; "leff"
        when its conv is depthwise; else "fastleff"). img_size 256 and the dropout rates are
        spandrel's defaults (inference does not depend on them); shift_flag is not in the keys:
        True (every published model but Uformer_S_noshift) is Assumed."""
        e, dd_in = need(shapes, "input_proj.proj.0.weight", 4)[:2]
        in_chans = need(shapes, "output_proj.proj.0.weight", 4)[0]
        depths = [count(shapes, f"{p}.blocks", ".norm1.weight") for p in _LEVELS]
        if 0 in (depths[0], depths[2], depths[4], depths[5], depths[7]):
            raise NoMatch("a layer spandrel's detection needs has no LeWin block")
        table = ".blocks.0.attn.relative_position_bias_table"
        heads = [need(shapes, f"{p}{table}", 2)[1] if depths[i] else 1 for i, p in enumerate(_LEVELS)]
        rows = need(shapes, f"encoderlayer_0{table}", 2)[0]
        win = (math.isqrt(rows) + 1) // 2
        if (2 * win - 1) ** 2 != rows:
            raise NoMatch(f"encoderlayer_0's bias table has {rows} rows, not (2 w - 1)^2")
        block = "encoderlayer_0.blocks.0"
        if f"{block}.attn.qkv.to_q.depthwise.weight" in shapes:
            projection, qkv_bias = "conv", True
        else:
            projection, qkv_bias = "linear", f"{block}.attn.qkv.to_q.bias" in shapes
        if f"{block}.mlp.fc1.weight" in shapes:
            token_mlp, hidden = "mlp", need(shapes, f"{block}.mlp.fc1.weight", 2)[0]
        else:
            token_mlp = "leff" if need(shapes, f"{block}.mlp.dwconv.0.weight", 4)[1] == 1 else "fastleff"
            hidden = need(shapes, f"{block}.mlp.linear1.0.weight", 2)[0]
        dec = "decoderlayer_0.blocks.0"
        return {"in_chans": in_chans, "dd_in": dd_in, "embed_dim": e, "depths": depths,
                "num_heads": heads, "win_size": win, "mlp_ratio": hidden / e, "qkv_bias": qkv_bias,
                "token_projection": projection, "token_mlp": token_mlp,
                "modulator": f"{dec}.modulator.weight" in shapes,
                "cross_modulator": f"{dec}.cross_modulator.weight" in shapes,
                "shift_flag": Assumed(True, "whether every other block shifts its windows is not in "
                                            "the keys: True, as every published Uformer but "
                                            "Uformer_S_noshift (spandrel's rule)"),
                "scale": 1}

    @staticmethod
    def card(spec: dict):
        """input_proj, output_proj, the nine layers (per block two or four LayerNorms, the bias
        table, q / kv projections, proj, the feed-forward, the modulators), the four down convs
        (4x4, c -> 2c) and up transposed convs (2x2). The largest activation per pixel of the
        padded input: a level's feed-forward hidden features, its attention weights (heads ws^2 per
        token), the shift mask (ws^2 per token) or k and v, at 1/4^level of the pixels."""
        e, dd_in, out = spec["embed_dim"], spec["dd_in"], spec["in_chans"]
        depths, heads, win = list(spec["depths"]), list(spec["num_heads"]), spec["win_size"]
        hidden_of = lambda d: int(d * spec["mlp_ratio"])  # noqa: E731
        dims = [e, 2 * e, 4 * e, 8 * e, 16 * e, 16 * e, 8 * e, 4 * e, 2 * e]
        conv_proj = spec["token_projection"] == "conv"
        total = conv(dd_in, e) + conv(2 * e, out)
        activation = max(dd_in, out, e)
        for i, (d, n, depth) in enumerate(zip(dims, heads, depths)):
            level = i if i <= 4 else 8 - i
            res = spec["img_size"] // 2 ** level
            ws = res if res <= win else win
            hid = hidden_of(d)
            qkv = (3 * (conv(d, d, 3, groups=d) + conv(d, d, 1)) if conv_proj
                   else linear(d, d, spec["qkv_bias"]) + linear(d, 2 * d, spec["qkv_bias"]))
            if spec["token_mlp"] in ("mlp", "ffn"):
                mlp = linear(d, hid) + linear(hid, d)
            else:
                mlp = (linear(d, hid) + linear(hid, d)
                       + conv(hid, hid, 3, groups=hid if spec["token_mlp"] == "leff" else 1))
            blk = 2 * norm(d) + (2 * ws - 1) ** 2 * n + qkv + linear(d, d) + mlp
            if i > 4 and spec["modulator"]:
                blk += win * win * d
            if i > 4 and spec["cross_modulator"]:
                blk += win * win * d + linear(d, d, spec["qkv_bias"]) + linear(d, 2 * d, spec["qkv_bias"]) \
                    + linear(d, d) + norm(d)
                activation = max(activation, -(-n * win * win // 4 ** level))
            total += depth * blk
            if i < 4:
                total += conv(d, 2 * d, 4)
            elif i < 8:
                total += conv(d, dims[i + 1] // 2, 2)
            if depth:
                activation = max(activation, -(-max(hid, 2 * d, n * ws * ws, ws * ws) // 4 ** level))
        multiple = math.lcm(_SPANDREL_MULTIPLE, *(
            2 ** lv * (min(win, spec["img_size"] // 2 ** lv)) for lv in range(5)))
        return UformerCard("restoration", dd_in, out, 1, total, activation, pads_to=multiple,
                           channel_keys=("dd_in", "in_chans"),
                           fixed_onnx="the padding to a square and the shift masks hold for the "
                                      "traced size")


class _Proj(nn.Module):
    """Uformer's InputProj / OutputProj: a Sequential `proj` (a conv, the activation if any)."""

    def __init__(self, *layers):
        super().__init__()
        self.proj = nn.Sequential(*layers)

    def forward(self, x):
        return _tokens(self.proj(x))
