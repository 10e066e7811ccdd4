"""MSRResNet: BasicSR's modified SRResNet (Ledig et al., "Photo-Realistic Single Image Super-Resolution
Using a Generative Adversarial Network", CVPR 2017; basicsr/archs/srresnet_arch.py): conv_first ->
LeakyReLU(0.1) -> residual blocks without batch norm -> pixel-shuffle upsampling with LeakyReLU ->
conv_hr -> LeakyReLU -> conv_last, plus the bilinear-upsampled input. Every convolution starts from
BasicSR's init (kaiming normal x 0.1, zero bias), which keeps the deep residual stack near the
identity. Parameter names are BasicSR's, so its MSRResNet (and SRGAN generator) weights load."""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.check import int_arg
from framework.registry import MODELS
from framework.card import conv, image_card

from ._blocks import ResidualBlockNoBN, default_init_weights, make_layer, supported_scale
from framework.detect import NoMatch, count, need


@MODELS.register()
class MSRResNet(nn.Module):
    """MSRResNet: (N, C, h, w) -> (N, C, h*scale, w*scale).

    Upsampling: x2 / x3 one conv(F -> F*scale^2) + pixel_shuffle(scale); x4 two conv(F -> 4F) +
    pixel_shuffle(2) (upconv1, upconv2), each followed by LeakyReLU(0.1). Output adds
    interpolate(x, scale, "bilinear", align_corners=False).

    Args:
        num_in_ch, num_out_ch: image channels, default 3; equal (the output adds the input).
        num_feat: features, default 64.
        num_block: residual blocks, default 16.
        scale: 2, 3 or 4 (default 4).
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64, num_block: int = 16,
                 scale: int = 4):
        super().__init__()
        name = "MSRResNet"
        self.scale = supported_scale(name, scale, (2, 3, 4))
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        num_block = int_arg(name, "num_block", num_block, 0)
        if num_in_ch != num_out_ch:
            raise ValueError(f"{name}: the bilinear-upsampled input is added to the output, so "
                             f"num_in_ch == num_out_ch is needed, got {num_in_ch} and {num_out_ch}")
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, padding=1)
        self.body = make_layer(ResidualBlockNoBN, num_block, num_feat=num_feat)
        if self.scale == 4:
            self.upconv1 = nn.Conv2d(num_feat, num_feat * 4, 3, padding=1)
            self.upconv2 = nn.Conv2d(num_feat, num_feat * 4, 3, padding=1)
            self.pixel_shuffle = nn.PixelShuffle(2)
        else:
            self.upconv1 = nn.Conv2d(num_feat, num_feat * self.scale ** 2, 3, padding=1)
            self.pixel_shuffle = nn.PixelShuffle(self.scale)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.1)
        # BasicSR initialises every convolution here (the residual blocks' too) this way.
        default_init_weights(self, 0.1)

    def forward(self, x):
        out = self.body(self.lrelu(self.conv_first(x)))
        out = self.lrelu(self.pixel_shuffle(self.upconv1(out)))
        if self.scale == 4:
            out = self.lrelu(self.pixel_shuffle(self.upconv2(out)))
        out = self.conv_last(self.lrelu(self.conv_hr(out)))
        return out + F.interpolate(x, scale_factor=self.scale, mode="bilinear", align_corners=False)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """x4 has upconv2; otherwise upconv1's output channels are num_feat * scale^2."""
        feat, num_in_ch = need(shapes, "conv_first.weight", 4)[:2]
        up = need(shapes, "upconv1.weight", 4)[0]
        if "upconv2.weight" in shapes:
            scale = 4
        elif up in (4 * feat, 9 * feat):
            scale = 2 if up == 4 * feat else 3
        else:
            raise NoMatch(f"upconv1 has {up} output channels, not {4 * feat} or {9 * feat}")
        return {"num_in_ch": num_in_ch, "num_out_ch": need(shapes, "conv_last.weight", 4)[0],
                "num_feat": feat, "num_block": count(shapes, "body", ".conv1.weight"), "scale": scale}

    @staticmethod
    def card(spec: dict):
        """conv_first, num_block residual blocks, the upsampling convs, conv_hr and conv_last at
        the HR size."""
        s, cin, cout, f, n = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch", "num_feat",
                                                "num_block"))
        up = 2 * conv(f, 4 * f) if s == 4 else conv(f, f * s * s)
        return image_card(s, cin, cout, conv(cin, f) + 2 * n * conv(f, f) + up + conv(f, f)
                          + conv(f, cout), max(f, cin, cout) * s * s)
