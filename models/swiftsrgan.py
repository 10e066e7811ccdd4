"""Swift-SRGAN's generator (Krishnan and Koushik, "Swift-SRGAN: Rethinking Super-Resolution for
Efficient and Real-time Inference", 2021; Koushik0901/Swift-SRGAN swift-srgan/models.py, as
spandrel 0.4.2 reads it): SRGAN's generator with every convolution depthwise-separable (a depthwise
k x k conv, then a 1x1 pointwise conv).

    initial = PReLU(sep9x9(x))                                 (no BatchNorm)
    body    = residual blocks: x + BN(sep3x3(PReLU(BN(sep3x3(x)))))
    x       = BN(sep3x3(body(initial))) + initial
    x       = upsampler: (sep3x3 to 4 C, pixel shuffle 2, PReLU(C)) per factor 2
    out     = (tanh(sep9x9(x)) + 1) / 2                        (in [0, 1])

Separable convs before a BatchNorm have no bias (the original's bias=not use_bn). As in the
original, a block built with use_act=False (each residual block's second conv, the conv after the
body) still holds a PReLU that its forward never uses: its weight is in the state_dict and gets no
gradient. BatchNorm uses the batch's statistics in train() and the running ones in eval(), as
torch's. Keys are the original's (initial.cnn.depthwise, residual.i.block1.bn, upsampler.i.conv,
final_conv.pointwise, ...). Scales 1, 2, 4, 8, ... (x2 stages); any input size.
"""
from __future__ import annotations

import math

import framework.functional as F
from framework import nn
from framework.check import int_arg
from framework.detect import NoMatch, count, need
from framework.registry import MODELS


class SeperableConv2d(nn.Module):
    """(N, cin, H, W) -> (N, cout, H, W): depthwise k x k (groups cin), then pointwise 1x1 (the
    original's class name, spelling kept)."""

    def __init__(self, cin: int, cout: int, kernel_size: int, padding: int, bias: bool = True):
        super().__init__()
        self.depthwise = nn.Conv2d(cin, cin, kernel_size, padding=padding, groups=cin, bias=bias)
        self.pointwise = nn.Conv2d(cin, cout, 1, bias=bias)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


class ConvBlock(nn.Module):
    """sep conv -> BatchNorm (or none) -> PReLU (one slope per channel) when use_act."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, padding: int = 1,
                 use_act: bool = True, use_bn: bool = True):
        super().__init__()
        self.use_act = use_act
        self.cnn = SeperableConv2d(cin, cout, kernel_size, padding, bias=not use_bn)
        self.bn = nn.BatchNorm2d(cout) if use_bn else nn.Identity()
        self.act = nn.PReLU(cout)  # built even when unused, as the original (a state_dict key)

    def forward(self, x):
        y = self.bn(self.cnn(x))
        return self.act(y) if self.use_act else y


class UpsampleBlock(nn.Module):
    """sep3x3 to C scale^2, pixel shuffle, PReLU(C)."""

    def __init__(self, channels: int, scale: int):
        super().__init__()
        self.conv = SeperableConv2d(channels, channels * scale * scale, 3, 1)
        self.ps = nn.PixelShuffle(scale)
        self.act = nn.PReLU(channels)

    def forward(self, x):
        return self.act(self.ps(self.conv(x)))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.block1 = ConvBlock(channels, channels)
        self.block2 = ConvBlock(channels, channels, use_act=False)

    def forward(self, x):
        return self.block2(self.block1(x)) + x


@MODELS.register()
class SwiftSRGAN(nn.Module):
    """Swift-SRGAN's generator: (N, in_channels, h, w) -> (N, in_channels, h*scale, w*scale) in
    [0, 1], any h, w.

    Args (the original's names and defaults; `scale` is its `upscale_factor`):
        in_channels: image channels, default 3 (the output has as many).
        num_channels: features, default 64.
        num_blocks: residual blocks, default 16.
        scale: upscaling factor, default 4: 1 or a power of two (x2 stages).
    """

    def __init__(self, in_channels: int = 3, num_channels: int = 64, num_blocks: int = 16,
                 scale: int = 4):
        super().__init__()
        name = "SwiftSRGAN"
        in_channels = int_arg(name, "in_channels", in_channels)
        c = int_arg(name, "num_channels", num_channels)
        num_blocks = int_arg(name, "num_blocks", num_blocks, 0)
        self.scale = int_arg(name, "scale", scale)
        if self.scale & (self.scale - 1):
            raise ValueError(f"{name}: scale x{self.scale} is not supported (x1 or a power of two: "
                             f"one x2 stage each)")
        self.initial = ConvBlock(in_channels, c, 9, 4, use_bn=False)
        self.residual = nn.Sequential(*[ResidualBlock(c) for _ in range(num_blocks)])
        self.convblock = ConvBlock(c, c, use_act=False)
        self.upsampler = nn.Sequential(*[UpsampleBlock(c, 2)
                                         for _ in range(self.scale.bit_length() - 1)])
        self.final_conv = SeperableConv2d(c, in_channels, 9, 4)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"SwiftSRGAN: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        initial = self.initial(x)
        x = self.convblock(self.residual(initial)) + initial
        return (F.tanh(self.final_conv(self.upsampler(x))) + 1) / 2

    @staticmethod
    def card(spec: dict):
        """The facts of framework/card.py (h-cards' API): separable convs (depthwise k^2 C +
        pointwise), the BatchNorms (weight and bias; their running statistics are buffers) and
        PReLUs (one slope per channel, the unused ones too). The largest array: an upsampling
        stage's 4 C at its input's size, 4^n C per input pixel at the last."""
        from framework.card import conv, image_card, norm  # noqa: PLC0415 (h-cards)
        i, c, n, s = spec["in_channels"], spec["num_channels"], spec["num_blocks"], spec["scale"]

        def sep(cin, cout, k, bias=True):
            return conv(cin, cin, k, bias, groups=cin) + conv(cin, cout, 1, bias)
        block = sep(c, c, 3, False) + norm(c) + c
        params = (sep(i, c, 9) + c + n * 2 * block + block
                  + (s.bit_length() - 1) * (sep(c, 4 * c, 3) + c) + sep(c, i, 9))
        return image_card(s, i, i, params, max(c * s * s, i * s * s, c),
                          channel_keys=("in_channels",))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: in_channels from initial's depthwise conv, num_channels from its
        pointwise conv, num_blocks from residual, scale 2^(upsampling stages)."""
        in_channels = need(shapes, "initial.cnn.depthwise.weight", 4)[0]
        channels = need(shapes, "initial.cnn.pointwise.weight", 4)[0]
        need(shapes, "final_conv.pointwise.weight", 4)
        blocks = count(shapes, "residual", ".block1.cnn.depthwise.weight")
        stages = count(shapes, "upsampler", ".conv.depthwise.weight")
        if stages > 8:
            raise NoMatch(f"{stages} upsampling stages (x{2 ** stages}): not a published scale")
        return {"in_channels": in_channels, "num_channels": channels, "num_blocks": blocks,
                "scale": int(math.pow(2, stages))}
