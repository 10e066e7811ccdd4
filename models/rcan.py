"""RCAN (Zhang et al., "Image Super-Resolution Using Very Deep Residual Channel Attention Networks",
ECCV 2018; basicsr/archs/rcan_arch.py): mean shift -> conv_first -> num_group residual groups (each
num_block residual channel-attention blocks + a conv + a skip) -> conv_after_body + long skip ->
pixel-shuffle upsampler -> conv_last -> mean shift back. Channel attention rescales each feature map
by sigmoid(conv(relu(conv(global average)))). Parameter names are BasicSR's; the mean is a constant,
not a buffer, as there (BasicSR's state_dicts have no mean key)."""
from __future__ import annotations

from framework import nn
from framework.check import int_arg, number
from framework.registry import MODELS

from ._blocks import PixelShuffleUpsampler, channel_mean, make_layer, upsampler_scale
from .detect import count, need


class ChannelAttention(nn.Module):
    """x * sigmoid(W2 relu(W1 avg(x) + b1) + b2) on (N, F, H, W); W1: F -> F // squeeze_factor
    (HAT's may be a float ratio: the width is int(F // squeeze_factor))."""

    def __init__(self, num_feat: int, squeeze_factor: int = 16):
        super().__init__()
        mid = int(num_feat // squeeze_factor)
        self.attention = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(num_feat, mid, 1),
            nn.ReLU(), nn.Conv2d(mid, num_feat, 1), nn.Sigmoid())

    def forward(self, x):
        return x * self.attention(x)


class RCAB(nn.Module):
    """Residual channel-attention block: x + res_scale * CA(conv(relu(conv(x))))."""

    def __init__(self, num_feat: int, squeeze_factor: int = 16, res_scale: float = 1.0):
        super().__init__()
        self.res_scale = res_scale
        self.rcab = nn.Sequential(
            nn.Conv2d(num_feat, num_feat, 3, padding=1), nn.ReLU(),
            nn.Conv2d(num_feat, num_feat, 3, padding=1), ChannelAttention(num_feat, squeeze_factor))

    def forward(self, x):
        res = self.rcab(x)
        if self.res_scale != 1:  # x * 1.0 is exact: skip the multiply in the common case
            res = res * self.res_scale
        return res + x


class ResidualGroup(nn.Module):
    """num_block RCABs, then a 3x3 conv, plus the group's input."""

    def __init__(self, num_feat: int, num_block: int, squeeze_factor: int = 16, res_scale: float = 1.0):
        super().__init__()
        self.residual_group = make_layer(RCAB, num_block, num_feat=num_feat,
                                         squeeze_factor=squeeze_factor, res_scale=res_scale)
        self.conv = nn.Conv2d(num_feat, num_feat, 3, padding=1)

    def forward(self, x):
        return self.conv(self.residual_group(x)) + x


@MODELS.register()
class RCAN(nn.Module):
    """RCAN: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    Args:
        num_in_ch, num_out_ch: image channels, default 3.
        num_feat: features, default 64.
        num_group: residual groups, default 10.
        num_block: RCABs per group, default 16 (the paper's RCAN: 20).
        squeeze_factor: channel-attention reduction, default 16 (num_feat // squeeze_factor >= 1).
        scale: 2, 3, 4 (default) or another power of two.
        res_scale: residual scaling of each RCAB, default 1.
        img_range: images are scaled by this after the mean shift, default 255.
        rgb_mean: per-channel mean, default DIV2K's (0.4488, 0.4371, 0.4040); on 1 channel the
            average of the three (BasicSR's RCAN runs on 3 channels only).
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64, num_group: int = 10,
                 num_block: int = 16, squeeze_factor: int = 16, scale: int = 4, res_scale: float = 1.0,
                 img_range: float = 255.0, rgb_mean=(0.4488, 0.4371, 0.4040)):
        super().__init__()
        name = "RCAN"
        self.scale = upsampler_scale(name, scale)
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        num_group = int_arg(name, "num_group", num_group, 0)
        num_block = int_arg(name, "num_block", num_block, 0)
        squeeze_factor = int_arg(name, "squeeze_factor", squeeze_factor)
        if squeeze_factor > num_feat:
            raise ValueError(f"{name}: squeeze_factor must be <= num_feat (the attention keeps "
                             f"num_feat // squeeze_factor channels), got {squeeze_factor} > {num_feat}")
        res_scale = number(name, "res_scale", res_scale, low=0, low_open=True)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        # Constants, not buffers (as BasicSR): they stay out of the state_dict.
        self.mean_in = channel_mean(name, rgb_mean, num_in_ch)
        self.mean_out = channel_mean(name, rgb_mean, num_out_ch)

        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, padding=1)
        self.body = make_layer(ResidualGroup, num_group, num_feat=num_feat, num_block=num_block,
                               squeeze_factor=squeeze_factor, res_scale=res_scale)
        self.conv_after_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.upsample = PixelShuffleUpsampler(self.scale, num_feat, name)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)

    def forward(self, x):
        x = (x - self.mean_in.astype(x.dtype, copy=False)) * self.img_range
        x = self.conv_first(x)
        res = self.conv_after_body(self.body(x)) + x
        x = self.conv_last(self.upsample(res))
        return x / self.img_range + self.mean_out.astype(x.dtype, copy=False)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Groups from body.i.conv, blocks from group 0, the squeeze factor from the attention's
        first conv (num_feat // its channels: the largest factor giving that width), the scale from
        the upsampler. img_range, rgb_mean and res_scale change no weight: defaults unless given."""
        feat, num_in_ch = need(shapes, "conv_first.weight", 4)[:2]
        need(shapes, "conv_after_body.weight", 4)
        num_group = count(shapes, "body", ".conv.weight")
        num_block, squeeze = 16, 16  # no group: no weight fixes them
        if num_group:
            num_block = count(shapes, "body.0.residual_group", ".rcab.0.weight")
            if num_block:
                squeeze = feat // need(shapes, "body.0.residual_group.0.rcab.3.attention.1.weight", 4)[0]
        return {"num_in_ch": num_in_ch, "num_out_ch": need(shapes, "conv_last.weight", 4)[0],
                "num_feat": feat, "num_group": num_group, "num_block": num_block,
                "squeeze_factor": squeeze,
                "scale": PixelShuffleUpsampler.detect_scale(shapes, "upsample", feat)}

