"""DCTLSA, "Densely Connected Transformer with Linear Self-Attention for lightweight image super-
resolution" (Zeng et al., IEEE TIM 2023; zengkun301/DCTLSA, as spandrel 0.4.2 and traiNNer-redux's
`dctlsa` read it): a local-global network of six transformer blocks, densely connected.

    f = fea_conv(x) (3x3, in_nc -> nf);  b1 = B1(f)
    b_i = B_i(c_{i-1}(cat(f, b1, ..., b_{i-1})))   (i = 2..6; c1..c5 1x1 convs + LeakyReLU 0.05)
    out = pixel_shuffle(upsampler(LR_conv(c(cat(b1, ..., b6))) + f))   (c: 1x1 + LeakyReLU 0.05)

Each B_i (an LSAB) is two SwinT blocks in sequence, each a BasicLayer: the features padded at the
bottom and right to a multiple of the window (16) by reflection, made tokens and LayerNorm-ed
(patch_embed.norm, the only norm), two transformer blocks (the second on windows shifted by 8:
the features rolled by -8, no attention mask), back to (N, nf, H, W), cropped. A block on the
(H, W, C) features:

    local = x + LocalModule(x)      BatchNorm, 1x1, depthwise 3x3, BatchNorm, 1x1 (convs without bias)
    q, k, v = heads of qkv(local) in 16 x 16 windows
    x = proj(q head_dim^-1/2 (softmax over the window's tokens of k)^T v) + local   (linear attention:
                                                                                   a d x d product)
    x = x + mlp(x)                  fc1 (C -> 2C), GELU, fc2

The LocalModule and the attention see the rolled features in the shifted block (the original's).
The network has exactly six blocks: num_modules (the width of c, nf num_modules) must be 6, as
the original's forward concatenates six outputs. Any input size runs: padded at the bottom and
right to at least 16 (spandrel's SizeRequirements(minimum=16): reflect, then replicate; the
original's reflection needs as much) and the output cropped. BatchNorm uses its running
statistics in eval() and the batch's in train(), as torch. The published DCTLSA x2 / x3 / x4:
nf 55, 5 heads (spandrel's defaults).
"""
from __future__ import annotations

import math

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import int_arg
from framework.detect import Assumed, NoMatch, need
from framework.registry import MODELS

from ._blocks import pad_to_requirement

_WINDOW = 16
_SHIFT = _WINDOW // 2
_MLP = 2  # mlp_ratio
_MODULES = 6  # B1..B6
_SLOPE = 0.05  # the 1x1 convs' LeakyReLU


class LocalModule(nn.Module):
    """BatchNorm, 1x1, depthwise 3x3, BatchNorm, 1x1 (no conv bias): (N, C, H, W) -> same."""

    def __init__(self, c: int):
        super().__init__()
        self.pointwise_prenorm_0 = nn.BatchNorm2d(c)
        self.pointwise_conv_0 = nn.Conv2d(c, c, 1, bias=False)
        self.depthwise_conv = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.pointwise_prenorm_1 = nn.BatchNorm2d(c)
        self.pointwise_conv_1 = nn.Conv2d(c, c, 1, bias=False)

    def forward(self, x):
        x = self.depthwise_conv(self.pointwise_conv_0(self.pointwise_prenorm_0(x)))
        return self.pointwise_conv_1(self.pointwise_prenorm_1(x))


class WindowAttention(nn.Module):
    """The local module and the windowed linear attention (module docstring) on (B, H, W, C)."""

    def __init__(self, c: int, heads: int):
        super().__init__()
        self.heads, self.scale = heads, (c // heads) ** -0.5
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.local = LocalModule(c)

    def forward(self, x):
        b, h, w, c = x.shape
        temp = F.permute(x, 0, 3, 1, 2)
        local = F.permute(self.local(temp) + temp, 0, 2, 3, 1)
        qkv = F.window_partition(self.qkv(local), _WINDOW)  # (B nW, 256, 3C)
        n, t = qkv.shape[0], qkv.shape[1]
        qkv = F.permute(F.reshape(qkv, (n, t, 3, self.heads, c // self.heads)), 2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B nW, heads, tokens, d)
        attn = F.matmul(F.transpose(F.softmax(k, -2), -2, -1), v)  # (B nW, heads, d, d)
        out = F.reshape(F.transpose(F.matmul(q * self.scale, attn), 1, 2), (n, t, c))
        return F.window_reverse(self.proj(out), _WINDOW, h, w) + local


class Mlp(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.fc1 = nn.Linear(c, _MLP * c)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(_MLP * c, c)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SwinTransformerBlock(nn.Module):
    """(B, H, W, C) -> same: the attention (on features rolled by -shift), rolled back, then
    x + mlp(x)."""

    def __init__(self, c: int, heads: int, shift: int):
        super().__init__()
        self.shift = shift
        self.attn = WindowAttention(c, heads)
        self.mlp = Mlp(c)

    def forward(self, x):
        s = self.shift
        if s:
            x = F.roll(self.attn(F.roll(x, (-s, -s), (1, 2))), (s, s), (1, 2))
        else:
            x = self.attn(x)
        return x + self.mlp(x)


class PatchEmbed(nn.Module):
    """The tokens' LayerNorm (keys patch_embed.norm.*), on (B, H, W, C)."""

    def __init__(self, c: int):
        super().__init__()
        self.norm = nn.LayerNorm(c)

    def forward(self, x):
        return self.norm(x)


class BasicLayer(nn.Module):
    """(N, C, H, W) -> same: reflect-pad to a multiple of 16, LayerNorm, an unshifted and a
    shifted block, crop."""

    def __init__(self, c: int, heads: int):
        super().__init__()
        self.blocks = nn.ModuleList([SwinTransformerBlock(c, heads, 0),
                                     SwinTransformerBlock(c, heads, _SHIFT)])
        self.patch_embed = PatchEmbed(c)

    def forward(self, image):
        x = F.permute(F.pad_to_multiple(image, _WINDOW, "reflect"), 0, 2, 3, 1)
        x = self.patch_embed(x)
        for blk in self.blocks:
            x = blk(x)
        return F.crop_to(F.permute(x, 0, 3, 1, 2), image)


class SwinT(nn.Module):
    def __init__(self, c: int, heads: int):
        super().__init__()
        self.transformer_body = nn.Sequential(BasicLayer(c, heads))

    def forward(self, x):
        return self.transformer_body(x)


class LSAB(nn.Module):
    def __init__(self, c: int, heads: int):
        super().__init__()
        self.body = nn.Sequential(SwinT(c, heads), SwinT(c, heads))

    def forward(self, x):
        return self.body(x)


def _fuse(cin: int, c: int) -> nn.Sequential:
    """conv_block(cin, c, 1, act_type="lrelu"): a 1x1 conv and LeakyReLU 0.05 (keys .0.*)."""
    return nn.Sequential(nn.Conv2d(cin, c, 1), nn.LeakyReLU(_SLOPE))


@MODELS.register()
class DCTLSA(nn.Module):
    """DCTLSA: (N, in_nc, h, w) in [0, 1] -> (N, out_nc, h scale, w scale), any h, w.

    Args (spandrel's names and defaults; `scale` is its `upscale`, traiNNer-redux's `scale`):
        in_nc, out_nc: image channels in and out, default 3 and 3.
        nf: features, default 55 (a multiple of num_head).
        num_modules: the blocks c fuses, 6 (the only value the original's forward runs).
        num_head: attention heads, default 5.
        scale: upscaling factor, default 4 (any integer >= 1).
    """

    def __init__(self, in_nc: int = 3, nf: int = 55, num_modules: int = 6, out_nc: int = 3,
                 scale: int = 4, num_head: int = 5):
        super().__init__()
        name = "DCTLSA"
        in_nc, out_nc = int_arg(name, "in_nc", in_nc), int_arg(name, "out_nc", out_nc)
        nf, heads = int_arg(name, "nf", nf), int_arg(name, "num_head", num_head)
        self.scale = int_arg(name, "scale", scale)
        if int_arg(name, "num_modules", num_modules) != _MODULES:
            raise ValueError(f"{name}: num_modules must be 6 (the forward concatenates the six "
                             f"blocks B1..B6 into c), got {num_modules}")
        if nf % heads:
            raise ValueError(f"{name}: nf {nf} must be a multiple of num_head {heads} (the "
                             f"attention splits the features into heads)")
        self.fea_conv = nn.Conv2d(in_nc, nf, 3, padding=1)
        for i in range(1, _MODULES + 1):
            setattr(self, f"B{i}", LSAB(nf, heads))
        self.c = _fuse(nf * _MODULES, nf)
        for i in range(1, _MODULES):
            setattr(self, f"c{i}", _fuse(nf * (i + 1), nf))
        self.LR_conv = nn.Conv2d(nf, nf, 3, padding=1)
        self.upsampler = nn.Sequential(nn.Conv2d(nf, out_nc * self.scale ** 2, 3, padding=1),
                                       nn.PixelShuffle(self.scale))

    def forward(self, image):
        if image.ndim != 4:
            raise ValueError(f"DCTLSA: expected input (N, C, H, W), got shape {tuple(image.shape)}")
        f = self.fea_conv(pad_to_requirement(image, _WINDOW))
        outs, dense = [], f
        for i in range(1, _MODULES + 1):
            x = dense if i == 1 else getattr(self, f"c{i - 1}")(dense)
            outs.append(getattr(self, f"B{i}")(x))
            if i < _MODULES:
                dense = F.cat([dense, outs[-1]], 1)
        out = self.LR_conv(self.c(F.cat(outs, 1))) + f
        return F.crop_to(self.upsampler(out), image, self.scale)

    @staticmethod
    def card(spec: dict):
        """fea_conv; six LSABs of two BasicLayers (a LayerNorm; two blocks of qkv, proj, the local
        module's two BatchNorms, two 1x1 and a depthwise 3x3, the MLP); c and c1..c5; LR_conv;
        the upsampler. The largest activation: the dense concatenation (6 nf), qkv's 3 nf or the
        MLP's 2 nf per pixel of the input padded to 16 (and to the window's multiple inside)."""
        c, i, o, s = spec["nf"], spec["in_nc"], spec["out_nc"], spec["scale"]
        block = (linear(c, 3 * c) + linear(c, c) + 2 * norm(c) + 2 * conv(c, c, 1, False)
                 + conv(c, c, 3, False, c) + linear(c, _MLP * c) + linear(_MLP * c, c))
        layer = norm(c) + 2 * block
        fuse = conv(c * _MODULES, c, 1) + sum(conv(c * (k + 1), c, 1) for k in range(1, _MODULES))
        params = conv(i, c) + _MODULES * 2 * layer + fuse + conv(c, c) + conv(c, o * s * s)
        return image_card(s, i, o, params, max(_MODULES * c, o * s * s), pads_to=_WINDOW,
                          pad_minimum=_WINDOW, channel_keys=("in_nc", "out_nc"))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: nf and in_nc from fea_conv, num_modules from c's width (nf
        num_modules), scale and out_nc from the upsampler (out_nc scale^2 rows, out_nc the first
        of in_nc, 3, 4, 1 that leaves a square; a given scale or out_nc decides). num_head has no
        weight: 5 (spandrel's, the published files') unless given."""
        nf, in_nc = need(shapes, "fea_conv.weight", 4)[:2]
        if "B6.body.1.transformer_body.0.blocks.1.attn.qkv.weight" not in shapes:
            raise NoMatch("no sixth block B6 with two SwinT layers")
        modules = need(shapes, "c.0.weight", 4)[1] // nf
        rows = need(shapes, "upsampler.0.weight", 4)[0]
        if isinstance(known.get("scale"), int):
            outs = [rows // known["scale"] ** 2]
        elif isinstance(known.get("out_nc"), int):
            outs = [known["out_nc"]]
        else:
            outs = [in_nc, 3, 4, 1]
        for out in outs:
            scale = math.isqrt(rows // out) if out >= 1 and rows % out == 0 else 0
            if scale and out * scale * scale == rows:
                break
        else:
            raise NoMatch(f"the upsampler's {rows} outputs are not out_nc x scale^2")
        return {"in_nc": in_nc, "nf": nf, "num_modules": modules, "out_nc": out, "scale": scale,
                "num_head": Assumed(5, "spandrel's, every published DCTLSA's (no weight has it)",
                                    quiet=True)}
