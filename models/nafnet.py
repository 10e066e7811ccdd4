"""NAFNet (Chen et al., "Simple Baselines for Image Restoration", ECCV 2022; github.com/megvii-
research/NAFNet, as spandrel 0.4.2's NAFNet architecture reads it): a restoration U-Net at scale 1
(denoising, deblurring) without nonlinear activations. A 3x3 conv (intro) to `width` features,
len(enc_blk_nums) encoder levels (NAFBlocks, then a 2x2 stride-2 conv doubling the features),
middle_blk_num NAFBlocks, as many decoder levels (a 1x1 conv doubling the features and a pixel
shuffle by 2 halving them back, plus the encoder's skip, then NAFBlocks), a 3x3 conv (ending) to
img_channel and a global residual. Each NAFBlock (c channels) is

    x = x + beta  * conv3(SCA(SG(conv2(conv1(LayerNorm2d(x))))))     conv1 1x1 c -> 2c, conv2
                                                                       depthwise 3x3, conv3 1x1 c -> c
    x = x + gamma * conv5(SG(conv4(LayerNorm2d(x))))                  conv4 1x1 c -> 2c, conv5 c -> c

SimpleGate SG(x) = x1 * x2 of x's two channel halves; simplified channel attention SCA(x) =
x * conv1x1(mean of x over the pixels) (the keys' sca.0 is that AdaptiveAvgPool2d(1), sca.1 the conv).
beta and gamma start at zero (each block starts as the identity). The input is zero-padded at the
bottom and right to a multiple of 2^len(enc_blk_nums) and the output cropped back, as the original.

The published models (NAFNet's model zoo) and their keywords:
    NAFNet-SIDD-width32 / -width64   width 32 / 64, enc_blk_nums [2, 2, 4, 8], middle_blk_num 12,
                                     dec_blk_nums [2, 2, 2, 2] (real noise, SIDD)
    NAFNet-GoPro-width32 / -width64, width 32 / 64, enc_blk_nums [1, 1, 1, 28], middle_blk_num 1,
    NAFNet-REDS-width64              dec_blk_nums [1, 1, 1, 1] (motion blur; REDS: blur + JPEG)
The GoPro models were tested with NAFNetLocal (a test-time local average pooling in SCA, TLC):
spandrel runs them as plain NAFNet, and so does srgrad. NAFNet-baseline (its GELU / channel-
attention blocks) is not read by spandrel 0.4.2 and not here. Keys are the original's (intro,
encoders.i.j.*, downs.i, middle_blks.j.*, ups.i.0, decoders.i.j.*, ending; per block norm1/2,
conv1..5, sca.1, beta, gamma).
"""
from __future__ import annotations

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, norm
from framework.check import int_arg, int_list
from framework.detect import NoMatch, count, need
from framework.registry import MODELS


class SimpleGate(nn.Module):
    """(N, 2c, H, W) -> (N, c, H, W): the product of the two channel halves."""

    def forward(self, x):
        x1, x2 = F.chunk(x, 2, dim=1)
        return x1 * x2


class NAFBlock(nn.Module):
    """NAFNet's block on (N, c, H, W) (the module docstring); DW_Expand = FFN_Expand = 2 (the
    original's, which spandrel builds)."""

    def __init__(self, c: int):
        super().__init__()
        dw = 2 * c
        self.conv1 = nn.Conv2d(c, dw, 1)
        self.conv2 = nn.Conv2d(dw, dw, 3, padding=1, groups=dw)
        self.conv3 = nn.Conv2d(dw // 2, c, 1)
        self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dw // 2, dw // 2, 1))
        self.sg = SimpleGate()
        self.conv4 = nn.Conv2d(c, 2 * c, 1)
        self.conv5 = nn.Conv2d(c, c, 1)
        self.norm1 = nn.LayerNorm2d(c)
        self.norm2 = nn.LayerNorm2d(c)
        self.beta = nn.Parameter(np.zeros((1, c, 1, 1), np.float32))
        self.gamma = nn.Parameter(np.zeros((1, c, 1, 1), np.float32))

    def forward(self, inp):
        x = self.sg(self.conv2(self.conv1(self.norm1(inp))))
        x = self.conv3(x * self.sca(x))
        y = inp + x * self.beta
        x = self.conv5(self.sg(self.conv4(self.norm2(y))))
        return y + x * self.gamma


def _blocks(c: int, n: int) -> nn.Sequential:
    return nn.Sequential(*[NAFBlock(c) for _ in range(n)])


@MODELS.register()
class NAFNet(nn.Module):
    """NAFNet: (N, img_channel, H, W) -> the same shape, any H, W >= 1.

    Args:
        img_channel: image channels in and out, default 3.
        width: features of the first level, default 16 (the original's; published: 32, 64).
        middle_blk_num: NAFBlocks at the bottom, default 1.
        enc_blk_nums: NAFBlocks of each encoder level (a list; default [] as the original: no
            levels), each level halving the size and doubling the features.
        dec_blk_nums: NAFBlocks of each decoder level, as many levels as enc_blk_nums.
        scale: 1 (a restoration network: srgrad's configs and commands pass their scale).
    """

    def __init__(self, img_channel: int = 3, width: int = 16, middle_blk_num: int = 1,
                 enc_blk_nums=(), dec_blk_nums=(), scale: int = 1):
        super().__init__()
        name = "NAFNet"
        img_channel = int_arg(name, "img_channel", img_channel)
        width = int_arg(name, "width", width)
        middle_blk_num = int_arg(name, "middle_blk_num", middle_blk_num, 0)
        enc = int_list(name, "enc_blk_nums", enc_blk_nums, minimum=0)
        dec = int_list(name, "dec_blk_nums", dec_blk_nums, minimum=0)
        if len(enc) != len(dec):
            raise ValueError(f"{name}: enc_blk_nums {list(enc)} and dec_blk_nums {list(dec)} need "
                             f"as many levels (each decoder level adds an encoder level's skip)")
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        self.scale = 1
        self.intro = nn.Conv2d(img_channel, width, 3, padding=1)
        self.ending = nn.Conv2d(width, img_channel, 3, padding=1)
        # the original's key order: encoders, decoders, middle_blks, ups, downs
        encoders, downs, ups, decoders = [], [], [], []
        chan = width
        for n in enc:
            encoders.append(_blocks(chan, n))
            downs.append(nn.Conv2d(chan, 2 * chan, 2, stride=2))
            chan *= 2
        middle = _blocks(chan, middle_blk_num)
        for n in dec:
            ups.append(nn.Sequential(nn.Conv2d(chan, 2 * chan, 1, bias=False), nn.PixelShuffle(2)))
            chan //= 2
            decoders.append(_blocks(chan, n))
        self.encoders, self.decoders = nn.ModuleList(encoders), nn.ModuleList(decoders)
        self.middle_blks = middle
        self.ups, self.downs = nn.ModuleList(ups), nn.ModuleList(downs)
        self.padder_size = 2 ** len(enc)

    def forward(self, image):
        x = image
        if self.padder_size > 1:  # zeros at the bottom and right, as the original's check_image_size
            x = F.pad_to_multiple(image, self.padder_size, mode="constant")
        inp = x
        x = self.intro(x)
        skips = []
        for encoder, down in zip(self.encoders, self.downs):
            x = encoder(x)
            skips.append(x)
            x = down(x)
        x = self.middle_blks(x)
        for decoder, up, skip in zip(self.decoders, self.ups, skips[::-1]):
            x = decoder(up(x) + skip)
        x = self.ending(x) + inp
        return F.crop_to(x, image) if self.padder_size > 1 else x

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's keywords: img_channel and width from intro, the levels counted from downs
        and ups (spandrel counts encoders / decoders; a level of 0 blocks has no keys there) and
        each level's NAFBlocks by their beta."""
        width, img_channel = need(shapes, "intro.weight", 4)[:2]
        if need(shapes, "ending.weight", 4)[:2] != (img_channel, width):
            raise NoMatch("ending does not map intro's features back to its channels")
        levels = count(shapes, "downs", ".weight")
        if count(shapes, "ups", ".0.weight") != levels:
            raise NoMatch(f"{levels} downs but not as many ups")
        if not any(k.endswith(".beta") for k in shapes):
            raise NoMatch("no NAFBlock (no .beta key)")
        return {"img_channel": img_channel, "width": width,
                "middle_blk_num": count(shapes, "middle_blks", ".beta"),
                "enc_blk_nums": [count(shapes, f"encoders.{i}", ".beta") for i in range(levels)],
                "dec_blk_nums": [count(shapes, f"decoders.{i}", ".beta") for i in range(levels)],
                "scale": 1}

    @staticmethod
    def card(spec: dict):
        """intro, ending, per level i (c = width 2^i) its NAFBlocks (7c^2 + 33c each: five 1x1 /
        depthwise convs, SCA's conv, two LayerNorms, beta, gamma), the down conv (2x2, c -> 2c)
        and the up conv (1x1, 2c -> 4c, no bias); the middle blocks at width 2^levels. The
        largest activation is a block's 2c-channel conv output at 1/4^i of the pixels: 2 width
        per pixel of the padded input."""
        c, w = spec["img_channel"], spec["width"]
        enc, dec = list(spec["enc_blk_nums"]), list(spec["dec_blk_nums"])

        def blocks(ch, n):
            return n * (conv(ch, 2 * ch, 1) + conv(2 * ch, 2 * ch, 3, groups=2 * ch)
                        + 3 * conv(ch, ch, 1) + conv(ch, 2 * ch, 1) + 2 * norm(ch) + 2 * ch)
        total = conv(c, w) + conv(w, c)
        for i, (ne, nd) in enumerate(zip(enc, dec[::-1])):  # decoders run from the bottom up
            ch = w * 2 ** i
            total += (blocks(ch, ne) + conv(ch, 2 * ch, 2) + conv(2 * ch, 4 * ch, 1, bias=False)
                      + blocks(ch, nd))
        total += blocks(w * 2 ** len(enc), spec["middle_blk_num"])
        return image_card(1, c, c, total, max(2 * w, c), pads_to=2 ** len(enc),
                          channel_keys=("img_channel",))
