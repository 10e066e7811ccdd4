"""KBNet (Zhang et al., "KBNet: Kernel Basis Network for Image Restoration", 2023;
github.com/zhangyi-3/KBNet, as spandrel 0.4.2's KBNet architecture reads its KBNet_s): NAFNet's
U-Net at scale 1 (intro, encoder levels with a 2x2 stride-2 down conv, middle blocks, decoder levels
with a 1x1 conv + pixel shuffle up and the skip added, ending, global residual; the input zero-
padded at the bottom and right to 2^levels and the output cropped back: NAFNet's forward) whose
blocks are KBBlock_s (c channels, nset = 32 kernel bases, 3x3 kernels, g = c // 4 groups):

    n   = LayerNorm2d(x)
    att = conv2(n) * attgamma + conv211(n)        (N, 32, H, W): per-pixel weights of the bases
                                                    (conv2: depthwise 3x3 to min(c, 32), SimpleGate,
                                                    1x1 to 32; conv211: 1x1 to 32)
    u   = conv21(conv1(n))                        1x1, then depthwise 3x3
    y   = (KBA(u, att) * ga1 + u) * conv11(n) * sca(n)
    x   = x + beta * conv3(y)
    x   = x + gamma * conv5(SimpleGate(conv4(LayerNorm2d(x))))

KBA, kernel basis attention: at each pixel p the fused kernel W_p = sum_s att[s, p] w[s] and bias
b_p = sum_s att[s, p] b[s] (w: 32 learnt grouped c x (c / g) x 3 x 3 kernels, b: 32 biases), then
out_p = W_p applied to u's 3x3 neighbourhood of p (zero padding) + b_p. It is composed here from
existing ops (unfold, one matmul for the fused kernels, a product and a sum over each group's
taps), so its gradients, and ONNX, come with them; spandrel's hand-written backward (the
original's KBAFunction) is what the twin's gradients use.

conv11 is a 1x1 conv and a 5x5 conv with c // 4 groups, or a depthwise 3x3 when `lightweight`;
the FFN has int(c * ffn_scale) channels (ffn_scale, spandrel's keyword; the original's FFN_Expand).
ga1, attgamma, beta and gamma start at 0.01.

Published (KBNet_s, the repository's SIDD real-noise denoiser): width 64, enc_blk_nums [2, 2, 4, 8],
middle_blk_num 12, dec_blk_nums [2, 2, 2, 2], ffn_scale 2, not lightweight. KBNet_l (the Restormer-
style variant of the deraining, defocus-deblurring and Gaussian-denoising models) is not here: its
files are refused naming it. Keys are the original's (intro, encoders.i.j.*, downs.i, middle_blks.j.*,
ups.i.0, decoders.i.j.*, ending; per block w, b, norm1/2, sca.1, conv11.0/1, conv1, conv21,
conv2.0/2, conv211, conv3, conv4, conv5, ga1, attgamma, beta, gamma).
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, norm
from framework.check import flag, int_arg, int_list, number
from framework.detect import NoMatch, count, need
from framework.nn import init
from framework.registry import MODELS

from .nafnet import NAFNet, SimpleGate

NSET, K, GC = 32, 3, 4  # the original's KBBlock_s defaults: kernel bases, kernel side, channels a group


def kba(x, att, w, b, groups: int, k: int = K):
    """Kernel basis attention: x (N, C, H, W), att (N, S, H, W) -> (N, C, H, W); w (1, S, C (C / g)
    k^2), b (1, S, C): per pixel the kernel att_p . w (grouped: g groups of C / g channels) applied
    to x's k x k neighbourhood (zero padding), plus att_p . b."""
    n, c, h, wd = x.shape
    s, cg, kk = att.shape[1], c // groups, k * k
    a = F.transpose(F.reshape(att, (n, s, h * wd)), 1, 2)            # (N, HW, S)
    bias = a @ F.reshape(b, (s, c))                                   # (N, HW, C)
    kern = F.reshape(a @ F.reshape(w, (s, c * cg * kk)), (n, h * wd, groups, cg, cg * kk))
    cols = F.unfold(x, k, padding=k // 2)                             # (N, C kk, HW)
    cols = F.permute(F.reshape(cols, (n, groups, 1, cg * kk, h * wd)), (0, 4, 1, 2, 3))
    out = F.reshape(F.sum(kern * cols, -1), (n, h * wd, c)) + bias    # (N, HW, C)
    return F.reshape(F.transpose(out, 1, 2), (n, c, h, wd))


class KBBlock(nn.Module):
    """KBBlock_s on (N, c, H, W) (the module docstring)."""

    def __init__(self, c: int, ffn_scale: float, lightweight: bool):
        super().__init__()
        self.g = c // GC
        self.w = nn.Parameter(np.zeros((1, NSET, c * (c // self.g) * K * K), np.float32))
        self.b = nn.Parameter(np.zeros((1, NSET, c), np.float32))
        # the original's init_p: kaiming_uniform(a = sqrt 5) on w (fan_in: its last two axes),
        # the bias uniform in +-1 / sqrt(fan_in)
        init.kaiming_uniform_(self.w, a=math.sqrt(5))
        bound = 1 / math.sqrt(self.w.shape[1] * self.w.shape[2])
        init.uniform_(self.b, -bound, bound)
        self.norm1, self.norm2 = nn.LayerNorm2d(c), nn.LayerNorm2d(c)
        self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c, 1))
        self.conv11 = nn.Sequential(nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 3, padding=1, groups=c)
                                    if lightweight else nn.Conv2d(c, c, 5, padding=2, groups=c // 4))
        self.conv1 = nn.Conv2d(c, c, 1)
        self.conv21 = nn.Conv2d(c, c, 3, padding=1, groups=c)
        interc = min(c, 32)
        self.conv2 = nn.Sequential(nn.Conv2d(c, interc, 3, padding=1, groups=interc), SimpleGate(),
                                   nn.Conv2d(interc // 2, NSET, 1))
        self.conv211 = nn.Conv2d(c, NSET, 1)
        self.conv3 = nn.Conv2d(c, c, 1)
        ffn = int(ffn_scale * c)
        self.conv4 = nn.Conv2d(c, ffn, 1)
        self.conv5 = nn.Conv2d(ffn // 2, c, 1)
        self.ga1 = nn.Parameter(np.full((1, c, 1, 1), 1e-2, np.float32))
        self.attgamma = nn.Parameter(np.full((1, NSET, 1, 1), 1e-2, np.float32))
        self.sg = SimpleGate()
        self.beta = nn.Parameter(np.full((1, c, 1, 1), 1e-2, np.float32))
        self.gamma = nn.Parameter(np.full((1, c, 1, 1), 1e-2, np.float32))

    def forward(self, inp):
        x = self.norm1(inp)
        sca = self.sca(x)
        x1 = self.conv11(x)
        att = self.conv2(x) * self.attgamma + self.conv211(x)
        uf = self.conv21(self.conv1(x))
        x = (kba(uf, att, self.w, self.b, self.g) * self.ga1 + uf) * x1 * sca
        y = inp + self.conv3(x) * self.beta
        return y + self.conv5(self.sg(self.conv4(self.norm2(y)))) * self.gamma


def _check_width(name: str, c: int, where: str):
    """The original's grouped convs need: c >= 4 channels, c a multiple of c // 4 (KBA's groups
    and conv11's), min(c, 32) even and dividing c (conv2's depthwise conv and its SimpleGate)."""
    interc = min(c, 32)
    if c < GC or c % (c // GC) or c % interc or interc % 2:
        raise ValueError(f"{name}: {where} has {c} channels; KBBlock_s needs at least 4, a multiple "
                         f"of c // 4, and even up to 32 or a multiple of 32 above (e.g. 4, 8, 16, "
                         f"32, 64)")


@MODELS.register()
class KBNet(nn.Module):
    """KBNet_s: (N, img_channel, H, W) -> the same shape, any H, W >= 1.

    Args:
        img_channel: image channels in and out, default 3.
        width: features of the first level, default 64 (the original's and published).
        middle_blk_num: blocks at the bottom, default 12.
        enc_blk_nums: blocks of each encoder level, default [2, 2, 4, 8].
        dec_blk_nums: blocks of each decoder level, default [2, 2, 2, 2] (as many levels).
        lightweight: conv11's depthwise 3x3 instead of the grouped 5x5, default False.
        ffn_scale: FFN channels / block channels, default 2.
        scale: 1 (srgrad's configs and commands pass their scale).
    """

    forward = NAFNet.forward  # the same U-Net pass (intro .. ending, padder_size)

    def __init__(self, img_channel: int = 3, width: int = 64, middle_blk_num: int = 12,
                 enc_blk_nums=(2, 2, 4, 8), dec_blk_nums=(2, 2, 2, 2), lightweight: bool = False,
                 ffn_scale=2, scale: int = 1):
        super().__init__()
        name = "KBNet"
        img_channel = int_arg(name, "img_channel", img_channel)
        width = int_arg(name, "width", width)
        middle_blk_num = int_arg(name, "middle_blk_num", middle_blk_num, 0)
        enc = int_list(name, "enc_blk_nums", enc_blk_nums, minimum=0)
        dec = int_list(name, "dec_blk_nums", dec_blk_nums, minimum=0)
        lightweight = flag(name, "lightweight", lightweight)
        ffn_scale = number(name, "ffn_scale", ffn_scale, low=0, low_open=True)
        if len(enc) != len(dec):
            raise ValueError(f"{name}: enc_blk_nums {list(enc)} and dec_blk_nums {list(dec)} need "
                             f"as many levels (each decoder level adds an encoder level's skip)")
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        for i in range(len(enc) + 1):
            _check_width(name, width * 2 ** i, f"level {i} (width {width} x {2 ** i})")
        for i in range(len(enc) + 1):
            if int(ffn_scale * width * 2 ** i) < 2:
                raise ValueError(f"{name}: ffn_scale {ffn_scale} leaves level {i}'s FFN fewer than "
                                 f"2 channels")
        self.scale = 1

        def blocks(c, n):
            return nn.Sequential(*[KBBlock(c, ffn_scale, lightweight) for _ in range(n)])
        # the original's key order: intro, encoders, middle_blks, decoders, ending, ups, downs
        self.intro = nn.Conv2d(img_channel, width, 3, padding=1)
        encoders, downs, ups, decoders = [], [], [], []
        chan = width
        for n in enc:
            encoders.append(blocks(chan, n))
            downs.append(nn.Conv2d(chan, 2 * chan, 2, stride=2))
            chan *= 2
        self.encoders = nn.ModuleList(encoders)
        self.middle_blks = blocks(chan, middle_blk_num)
        for n in dec:
            ups.append(nn.Sequential(nn.Conv2d(chan, 2 * chan, 1, bias=False), nn.PixelShuffle(2)))
            chan //= 2
            decoders.append(blocks(chan, n))
        self.decoders = nn.ModuleList(decoders)
        self.ending = nn.Conv2d(width, img_channel, 3, padding=1)
        self.ups, self.downs = nn.ModuleList(ups), nn.ModuleList(downs)
        self.padder_size = 2 ** len(enc)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's keywords: img_channel and width from intro, the levels counted from downs and
        ups (a level of 0 blocks has no keys in encoders / decoders), each level's blocks by their
        attgamma, ffn_scale from a block's conv4 (out / in), lightweight when conv11's second conv
        is 3x3 (5x5 otherwise). KBNet_l's files (patch_embed, encoder_level*) are refused."""
        if "patch_embed.proj.weight" in shapes and any(k.startswith("encoder_level") for k in shapes):
            raise NoMatch("this is KBNet_l (the Restormer-style KBNet), which srgrad does not have: "
                          "only KBNet_s")
        width, img_channel = need(shapes, "intro.weight", 4)[:2]
        if need(shapes, "ending.weight", 4)[:2] != (img_channel, width):
            raise NoMatch("ending does not map intro's features back to its channels")
        block = next((k[:-len(".attgamma")] for k in shapes if k.endswith(".attgamma")), None)
        if block is None:
            raise NoMatch("no KBBlock_s (no .attgamma key)")
        levels = count(shapes, "downs", ".weight")
        if count(shapes, "ups", ".0.weight") != levels:
            raise NoMatch(f"{levels} downs but not as many ups")
        ffn, c = need(shapes, f"{block}.conv4.weight", 4)[:2]
        return {"img_channel": img_channel, "width": width,
                "middle_blk_num": count(shapes, "middle_blks", ".attgamma"),
                "enc_blk_nums": [count(shapes, f"encoders.{i}", ".attgamma") for i in range(levels)],
                "dec_blk_nums": [count(shapes, f"decoders.{i}", ".attgamma") for i in range(levels)],
                "lightweight": need(shapes, f"{block}.conv11.1.weight", 4)[2] == 3,
                "ffn_scale": ffn / c, "scale": 1}

    @staticmethod
    def card(spec: dict):
        """intro, ending, per level i (c = width 2^i) its blocks, the down conv (2x2, c -> 2c) and
        the up conv (1x1, 2c -> 4c, no bias); the middle blocks at width 2^levels. The largest
        activation: KBA's fused kernels, c (c / g) 9 values per pixel of the level (4 c 9 with g =
        c // 4; the product with the unfolded neighbourhoods is as large), at 1/4^i of the pixels."""
        c0, w = spec["img_channel"], spec["width"]
        enc, dec = list(spec["enc_blk_nums"]), list(spec["dec_blk_nums"])
        light, scale = spec["lightweight"], spec["ffn_scale"]

        def block(c):
            g, interc, ffn = c // GC, min(c, 32), int(scale * c)
            return (NSET * c * (c // g) * K * K + NSET * c + 2 * norm(c) + 4 * conv(c, c, 1)
                    + (conv(c, c, 3, groups=c) if light else conv(c, c, 5, groups=c // 4))
                    + conv(c, c, 3, groups=c) + conv(c, interc, 3, groups=interc)
                    + conv(interc // 2, NSET, 1) + conv(c, NSET, 1) + conv(c, ffn, 1)
                    + conv(ffn // 2, c, 1) + 3 * c + NSET)
        total = conv(c0, w) + conv(w, c0)
        activation = max(c0, 2 * w)
        for i, (ne, nd) in enumerate(zip(enc, dec[::-1])):  # decoders run from the bottom up
            ch = w * 2 ** i
            total += (ne + nd) * block(ch) + conv(ch, 2 * ch, 2) + conv(2 * ch, 4 * ch, 1, bias=False)
            if ne or nd:
                activation = max(activation, -(-ch * (ch // (ch // GC)) * K * K // 4 ** i),
                                 int(scale * ch))
        ch = w * 2 ** len(enc)
        total += spec["middle_blk_num"] * block(ch)
        if spec["middle_blk_num"]:
            activation = max(activation, -(-ch * (ch // (ch // GC)) * K * K // 4 ** len(enc)))
        return image_card(1, c0, c0, total, activation, pads_to=2 ** len(enc),
                          channel_keys=("img_channel",))
