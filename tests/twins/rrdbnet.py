"""PyTorch twin of RRDBNet (BasicSR rrdbnet_arch.py), BasicSR's init, with the x2-stage counts of the
original ESRGAN repository's models (shuffle_factor) and ESRGAN+'s plus."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from . import register
from ._basicsr import default_init_weights, make_layer


class ResidualDenseBlock(nn.Module):
    def __init__(self, num_feat=64, num_grow_ch=32, plus=False):
        super().__init__()
        g = num_grow_ch
        self.conv1 = nn.Conv2d(num_feat, g, 3, 1, 1)
        self.conv2 = nn.Conv2d(num_feat + g, g, 3, 1, 1)
        self.conv3 = nn.Conv2d(num_feat + 2 * g, g, 3, 1, 1)
        self.conv4 = nn.Conv2d(num_feat + 3 * g, g, 3, 1, 1)
        self.conv5 = nn.Conv2d(num_feat + 4 * g, num_feat, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)
        default_init_weights([self.conv1, self.conv2, self.conv3, self.conv4, self.conv5], 0.1)
        if plus:  # ESRGAN+ (spandrel's ResidualDenseBlock_5C)
            self.conv1x1 = nn.Conv2d(num_feat, g, 1, bias=False)
        self.plus = plus

    def forward(self, x):
        x1 = self.lrelu(self.conv1(x))
        x2 = self.lrelu(self.conv2(torch.cat((x, x1), 1)))
        if self.plus:
            x2 = x2 + self.conv1x1(x)
        x3 = self.lrelu(self.conv3(torch.cat((x, x1, x2), 1)))
        x4 = self.lrelu(self.conv4(torch.cat((x, x1, x2, x3), 1)))
        if self.plus:
            x4 = x4 + x2
        x5 = self.conv5(torch.cat((x, x1, x2, x3, x4), 1))
        return x5 * 0.2 + x


class RRDB(nn.Module):
    def __init__(self, num_feat, num_grow_ch=32, plus=False):
        super().__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch, plus)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch, plus)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch, plus)

    def forward(self, x):
        return self.rdb3(self.rdb2(self.rdb1(x))) * 0.2 + x


@register
class RRDBNet(nn.Module):
    """BasicSR's RRDBNet, with spandrel's shuffle_factor (x2 stages = log2(scale * shuffle_factor);
    None: BasicSR's unshuffle 4 // scale at x1 and x2) and ESRGAN+'s plus. Sides are padded to the
    unshuffle by reflection and the output cropped (Real-ESRGAN's inference, spandrel's forward)."""

    def __init__(self, num_in_ch=3, num_out_ch=3, scale=4, num_feat=64, num_block=23, num_grow_ch=32,
                 init="torch", shuffle_factor=None, plus=False):  # init: the twin takes weights by copy
        super().__init__()
        self.scale = scale
        self.unshuffle = {4: 1, 2: 2, 1: 4}.get(scale, 1) if shuffle_factor is None else shuffle_factor
        num_in_ch *= self.unshuffle ** 2
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1)
        self.body = make_layer(RRDB, num_block, num_feat=num_feat, num_grow_ch=num_grow_ch, plus=plus)
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.stages = (scale * self.unshuffle).bit_length() - 1
        for i in range(self.stages):
            setattr(self, f"conv_up{i + 1}", nn.Conv2d(num_feat, num_feat, 3, 1, 1))
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        h, w = x.shape[-2:]
        if self.unshuffle > 1:
            x = F.pixel_unshuffle(pad_to_multiple(x, self.unshuffle), self.unshuffle)
        feat = self.conv_first(x)
        feat = feat + self.conv_body(self.body(feat))
        for i in range(self.stages):
            up = getattr(self, f"conv_up{i + 1}")
            feat = self.lrelu(up(F.interpolate(feat, scale_factor=2, mode="nearest")))
        out = self.conv_last(self.lrelu(self.conv_hr(feat)))
        return out[..., :h * self.scale, :w * self.scale]


def pad_to_multiple(x, m):
    """Reflect-pad the bottom and right of (N, C, H, W) to multiples of m."""
    h, w = x.shape[-2:]
    ph, pw = -h % m, -w % m
    return F.pad(x, (0, pw, 0, ph), mode="reflect") if ph or pw else x
